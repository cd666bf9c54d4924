//! FABRIK: Forward And Backward Reaching Inverse Kinematics (Aristidou & Lasenby, Cambridge
//! TR-632, 2009).
//!
//! - A single free serial chain runs Alg. 1 (§3.7) on joint positions alone, with the
//!   unreachable-target shortcut (straighten toward the target in one pass), and is turned into
//!   rotations once at the end ([`crate::rotations::aim_serial_chain`]). FABRIK's first iteration
//!   places the chain and decides its bends; from there its convergence is linear (textbook
//!   Alg. 1 needs 87.6 mean / 20 median iterations on the chain10 benchmark), so the chain is
//!   finished by Gauss–Newton steps on the same joint positions
//!   ([`super::jacobian::chain_position_step`], quadratic: one or two steps), then a closed-form
//!   placement of the last thousandths of the gap ([`finish_exactly`]). The steps take the least
//!   joint turn, so the bends stay close to FABRIK's own: on that benchmark the median largest
//!   joint bend is 30.1°, against 26.9° for Alg. 1 run to convergence (docs/benchmarks.md).
//!   A tracking move (a gap within [`TRACK_FRACTION`] of the reach) takes the steps alone, from
//!   the warm start.
//! - A serial chain whose limits are cones and twist ranges is solved as a free one first. Where
//!   no limit binds, that is the answer; where some bind, the bones are clamped into their
//!   limits and damped-least-squares steps finish from there ([`Fabrik::solve_unbound`]). Only
//!   if that fails does the general path below solve it.
//! - Everything else (trees, offset children, limits, orientation goals, poles) runs the same two
//!   stages on bone frames. Forward (§3.7.1): from every effector inward; a bone pulled by one
//!   point takes the FABRIK line step, a sub-base pulled by several takes the weighted
//!   least-squares rigid fit of its attachment points (the centroid of §3.7.1 is the special
//!   case of coincident attachments). Backward: from the root outward, each bone turns about its
//!   fixed head toward the forward estimates.
//! - Limits (§3.7.2) are applied at every step, not at the end: in the backward stage each bone's
//!   local rotation is clamped (cone or hinge, then twist: Alg. 3 then Alg. 2); in the forward
//!   stage a parent is re-oriented so its child's rotation stays inside the child's limit (the
//!   paper's "re-orient the joint p_{i-1}"). The final stage is always a backward one, so a
//!   returned pose never violates a limit.
//! - A limit with a preferred bend (a hinge whose range is not centred on zero, a lopsided cone)
//!   decides the bend direction of a straight limb: such a joint starting straight is nudged
//!   toward the middle of its range before the first iteration.

use glam::{DMat3, DQuat, DVec3};

use super::jacobian::{DlsSteps, chain_position_step, goal_error};
use super::reference::{effective_reference, starts_near};
use super::{Solution, SolveSettings, Solver, StopReason, begin_solve, settle};
use crate::error::Result;
use crate::geometry::{EPS_LEN, Pull, angle_between, fit_rigid, fit_rotation, from_rotation_vector, shortest_arc};
use crate::pose::{Frames, Pose};
use crate::limits::Swing;
use crate::problem::{Problem, RootMode};
use crate::rig::Rig;
use crate::rotations::{aim_chain, aim_serial_chain, local_rotations, turn_toward};

/// Chains finish in closed form once the gap is below this fraction of where it started (see
/// [`finish_exactly`] and [`finish_threshold`]): the last bones take up at most 1% of the motion,
/// so the pose stays FABRIK's.
const FINISH_FRACTION: f64 = 0.01;

/// The gap below which a chain is finished in closed form: [`FINISH_FRACTION`] of the gap the
/// solve started with, but never less than ten tolerances (tracking moves targets by little, and
/// FABRIK's linear convergence would otherwise crawl the last stretch).
#[inline]
fn finish_threshold(initial_gap: f64, tolerance: f64) -> f64 {
    (FINISH_FRACTION * initial_gap).max(10.0 * tolerance)
}

/// Whether a chain of total `reach` from `top` is (nearly) stretched to reach `target`: then it
/// is almost straight whatever FABRIK does, FABRIK crawls there, and the closed-form finish may
/// place it at once.
#[inline]
fn nearly_stretched(top: DVec3, target: DVec3, reach: f64) -> bool {
    (target - top).length() >= STRETCHED * reach
}

/// See [`nearly_stretched`].
const STRETCHED: f64 = 0.99;

/// A serial chain on Gauss–Newton steps is finished in closed form ([`finish_exactly`]) once its
/// gap is below this fraction of where it started: the last two bones then take up 0.3% of the
/// motion. Measured on the chain10 benchmark's 1000 targets: against 1e-3 this saves a step in
/// a sixth of the solves (median 3 → 2 iterations) for 0.6° on the median largest joint bend
/// (29.5° → 30.1°; steps alone give 29.4°, 1e-2 gives 32.4°, FABRIK run to convergence 26.9°).
const NEWTON_CLOSE: f64 = 3e-3;

/// How much more a chain's reach shortfall counts than a point pull at a sub-base.
const SHORTFALL_WEIGHT: f64 = 1e3;

/// Levenberg–Marquardt damping of a sub-base's turn, relative to the leverage of its shortfalls
/// (weight × lever arm²). A shortfall the turn can close head-on (the attachment moving across
/// the lever arm) is closed by halves; one the turn barely affects (the target along the lever
/// arm) is left to the bones above, which carry the sub-base toward it: undamped, the sub-base
/// alone would turn far for a millimetre of reach, a visible pop in tracking. A sub-base with no
/// moving bone above it (a pinned root) is damped too: undamped, its turn was a discontinuous
/// function of the targets (on the paper's hand, a 1e-12 change of a target turned a bone by up
/// to 1.15 rad in 45 of 300 cases; damped, by at most 4e-13), and the following iterations
/// finish what the damping leaves.
const SUB_BASE_DAMPING: f64 = 1.0;

/// Gauss–Newton rounds for a sub-base's rotation in the backward stage.
const SUB_BASE_ROUNDS: usize = 8;

/// The sum of a solution's squared goal distances (how [`Fabrik::solve_stretching`] compares
/// answers that miss).
fn squared_residual(s: &Solution) -> f64 {
    s.residuals.iter().map(|r| r * r).sum()
}

/// FABRIK hands over to the damped-least-squares finish ([`super::jacobian`]) when an iteration
/// leaves more than this fraction of the unmet distance it started with (every target being
/// within reach). FABRIK's big first steps place the limbs and decide their bend; after that its
/// convergence is linear, and slow where chains meet at a sub-base or limits hold joints (the
/// constrained humanoid needed hundreds of iterations, or stalled short), where a joint-space
/// step that moves every bone at once converges in a few. Measured on the paper models
/// (docs/benchmarks.md): 10% over two iterations needs the fewest iterations; but an iteration
/// with limits costs several damped-least-squares steps (swivel searches, limit splits), so 1%
/// over one (FABRIK goes on only while each iteration closes 99% of what is left) halves the
/// time of the constrained chain (26 → 13 µs, 6.7 → 4.4 iterations) with the same
/// reconstruction error under limits.
const CRAWL_RATIO: f64 = 0.01;

/// A tracking move is small when every goal's gap is at most this fraction of its chain's reach
/// (and every target within reach): the damped-least-squares step from the warm start then
/// solves it ([`Fabrik::track_small_moves`]). FABRIK's limit steering chooses swivels and bends
/// discretely, which showed as pops in tracking (a bone turning 0.2–3 rad in one frame where
/// the motion turns 0.03); the least joint motion has none. Measured on the humanoid tracking
/// and §4.3.2 reconstruction benchmarks (docs/benchmarks.md): 0.05 removes every pop and keeps
/// the constrained reconstruction at least as accurate as FABRIK alone.
const TRACK_FRACTION: f64 = 0.05;

/// Most damped-least-squares steps a small tracking move may take before FABRIK takes over.
const TRACK_ITERATIONS: u32 = 40;

/// How far (radians) a straight joint with a preferred bend is nudged before solving.
const BEND_NUDGE: f64 = 0.05;

/// The cosine of 1e-3 rad: a joint whose bone points within that of its parent's axis is
/// straight (see [`Fabrik::nudge_straight_joints`]).
const STRAIGHT_COS: f64 = 0.999_999_500_000_041_7; // cos(1e-3)

/// The FABRIK solver. Keeps scratch buffers between solves, so the warm-started tracking path
/// allocates only its result.
#[derive(Debug, Clone, Default)]
pub struct Fabrik {
    settings: SolveSettings,
    frames: Frames,
    locals: Vec<DQuat>,
    start_locals: Vec<DQuat>,
    forward_heads: Vec<DVec3>,
    effectors: Vec<DVec3>,
    joints: Vec<DVec3>,
    pulls: Vec<Pull>,
    /// The serial chain's joints before a Gauss–Newton step, restored if the step fails.
    saved_joints: Vec<DVec3>,
    /// Per bone: whether its frame changed in the current finishing step (see
    /// [`Fabrik::refresh_below`]).
    changed: Vec<bool>,
    /// Per goal: the gap below which its free tail is finished in closed form
    /// ([`finish_threshold`]).
    finish_below: Vec<f64>,
    /// The damped-least-squares finish (see the module docs).
    dls: DlsSteps,
    /// The reference pose of the current solve ([`effective_reference`]) and its frames.
    reference: Pose,
    reference_frames: Frames,
}

impl Fabrik {
    /// A FABRIK solver with `settings` (checked when solving).
    #[must_use]
    pub fn new(settings: SolveSettings) -> Self {
        Self { settings, ..Self::default() }
    }

    /// Changes the settings.
    pub fn set_settings(&mut self, settings: SolveSettings) {
        self.settings = settings;
    }
}

impl Solver for Fabrik {
    fn name(&self) -> &'static str {
        "fabrik"
    }

    fn settings(&self) -> &SolveSettings {
        &self.settings
    }

    /// With a reference pose ([`Problem::reference`]): the least-squares steps toward it
    /// (`DlsSteps::refine_toward` in `jacobian.rs`) when every target is within reach, from the
    /// start when it is near the answer (tracking) and from the reference otherwise; where they
    /// do not reach (a local minimum), FABRIK reaches (`Fabrik::solve_reaching`) and the steps
    /// then move its answer to the pose nearest the reference. Targets out of reach keep FABRIK's
    /// straightened chains. Without a reference, FABRIK's own solve from the start (the least
    /// motion from it).
    ///
    /// Where bones may stretch ([`Problem::stretches`]), see `Fabrik::solve_stretching`.
    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        if problem.stretches() && !problem.goals().is_empty() {
            return self.solve_stretching(problem, start);
        }
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        if problem.goals().is_empty() || problem.reference().is_none() {
            // Without a reference, the least motion from the start: FABRIK's own solve.
            return self.solve_reaching(problem, start, settings);
        }
        let rig = problem.rig();
        let start_pose = Pose { rotations: self.start_locals.clone(), root_translation: start.root_translation, scales: start.scales.clone() };
        effective_reference(problem, &start_pose, &mut self.reference, &mut self.reference_frames);
        rig.forward_into(&start_pose, &mut self.frames);
        let tol = settings.tolerance;
        let mut spent = 0;
        if self.unmet_if_all_within_reach(problem, tol).is_some() {
            // From the start when it is near the answer (tracking), else from the reference.
            let near = starts_near(problem, &self.frames);
            let (mut pose, frames) = if near { (start_pose.clone(), &self.frames) } else { (self.reference.clone(), &self.reference_frames) };
            let budget = (settings.max_iterations / 2).max(1);
            let out = self.dls.refine_toward(problem, &mut pose, Some(frames), &self.reference, tol, budget);
            if out.reached {
                settle(problem, &self.start_locals, &mut pose.rotations);
                return Ok(Solution::of_solved(problem, pose, self.dls.frames(), out.iterations, StopReason::Converged, tol));
            }
            spent = out.iterations;
        }
        let left = SolveSettings { max_iterations: (settings.max_iterations - spent).max(1), ..settings };
        let mut reaching = self.solve_reaching(problem, &start_pose, left)?;
        reaching.iterations += spent;
        let left = settings.max_iterations.saturating_sub(reaching.iterations);
        if reaching.reached && left > 0 {
            let mut pose = reaching.pose.clone();
            let out = self.dls.refine_toward(problem, &mut pose, None, &self.reference, tol, left);
            if out.reached {
                // (The steps keep each quaternion near the one they started from: FABRIK's, which
                // `settle` put in its start's hemisphere; again, for the sign.)
                settle(problem, &self.start_locals, &mut pose.rotations);
                return Ok(Solution::of_solved(problem, pose, self.dls.frames(), reaching.iterations + out.iterations, StopReason::Converged, tol));
            }
        }
        Ok(reaching)
    }
}

impl Fabrik {
    /// A problem some of whose bones may stretch ([`Problem::stretches`]). FABRIK's own passes
    /// place joints at fixed distances, so they run with every stretchy bone at its rest length;
    /// the damped-least-squares steps, whose unknowns include those lengths (weighted as
    /// Blender's IK weights its stretch, `jacobian::stretch_gain`), do the stretching:
    /// - with a reference, as without stretch: the steps toward the pose nearest it among those
    ///   that meet the goals, lengths included (a bone stretches where its weight makes that
    ///   nearer than turning: little within reach, as far as needed beyond it), from the start
    ///   when it is near the answer, else from the reference; where they stall, FABRIK reaches
    ///   with rigid bones (straightening toward targets out of reach) and the steps go on from
    ///   its answer;
    /// - without one: FABRIK's own solve with rigid bones (the least motion from the start), so a
    ///   target within the rigid chain's reach is reached without stretching; where that falls
    ///   short, the steps from its answer stretch the bones.
    ///
    /// Of the answers tried, the first that meets every goal, else the one nearest the goals.
    fn solve_stretching(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        let rig = problem.rig();
        let tol = settings.tolerance;
        let scales = super::start_scales(problem, start);
        let mut rigid = scales.clone();
        for &b in &problem.topology().stretchy {
            rigid[b] = 1.0;
        }
        let rigid_start = Pose { rotations: start.rotations.clone(), root_translation: start.root_translation, scales: rigid };
        let stop = |reached: bool, iterations: u32| match () {
            () if reached => StopReason::Converged,
            () if iterations >= settings.max_iterations => StopReason::IterationLimit,
            () => StopReason::Stalled,
        };
        let mut spent = 0;
        let mut stalled = None;
        if problem.reference().is_some() {
            let start_pose = Pose { rotations: self.start_locals.clone(), root_translation: start.root_translation, scales };
            effective_reference(problem, &start_pose, &mut self.reference, &mut self.reference_frames);
            rig.forward_into(&start_pose, &mut self.frames);
            // From the start when it is near the answer (tracking), else from the reference.
            let near = starts_near(problem, &self.frames);
            let (mut pose, frames) = if near { (start_pose, &self.frames) } else { (self.reference.clone(), &self.reference_frames) };
            let budget = (settings.max_iterations / 2).max(1);
            let out = self.dls.refine_toward(problem, &mut pose, Some(frames), &self.reference, tol, budget);
            spent = out.iterations;
            settle(problem, &self.start_locals, &mut pose.rotations);
            let sol = Solution::of_solved(problem, pose, self.dls.frames(), spent, stop(out.reached, spent), tol);
            if sol.reached {
                return Ok(sol);
            }
            stalled = Some(sol);
        }
        let left = SolveSettings { max_iterations: (settings.max_iterations - spent).max(1), ..settings };
        // (Its own damped-least-squares steps too.)
        self.dls.set_rigid(true);
        let reaching = self.solve_reaching(problem, &rigid_start, left);
        self.dls.set_rigid(false);
        let mut reaching = reaching?;
        reaching.iterations += spent;
        if reaching.pose.scales.is_empty() {
            reaching.pose.scales.clone_from(&rigid_start.scales);
        }
        let left = settings.max_iterations.saturating_sub(reaching.iterations);
        let mut best = reaching;
        if (problem.reference().is_some() || !best.reached) && left > 0 {
            let mut pose = best.pose.clone();
            let out = match problem.reference() {
                Some(_) => self.dls.refine_toward(problem, &mut pose, None, &self.reference, tol, left),
                None => self.dls.refine(problem, &mut pose, None, tol, left),
            };
            settle(problem, &self.start_locals, &mut pose.rotations);
            let iterations = best.iterations + out.iterations;
            let sol = Solution::of_solved(problem, pose, self.dls.frames(), iterations, stop(out.reached, iterations), tol);
            if sol.reached || squared_residual(&sol) < squared_residual(&best) {
                best = sol;
            }
        }
        if let Some(s) = stalled.filter(|s| !best.reached && squared_residual(s) < squared_residual(&best)) {
            best = Solution { iterations: best.iterations, ..s };
        }
        Ok(best)
    }

    /// FABRIK's own solve (module docs): how a solve reaches its targets when the steps from the
    /// start do not, and what straightens chains toward targets out of reach.
    fn solve_reaching(&mut self, problem: &Problem, start: &Pose, settings: SolveSettings) -> Result<Solution> {
        let settings = begin_solve(&settings, problem, start, &mut self.start_locals)?;
        let rig = problem.rig();
        let mut pose = Pose { rotations: self.start_locals.clone(), root_translation: start.root_translation, scales: start.scales.clone() };
        rig.forward_into(&pose, &mut self.frames);

        let goals = problem.goals();
        let topo = problem.topology();
        if goals.is_empty() {
            return Ok(Solution { pose, iterations: 0, residuals: vec![], orientation_residuals: vec![], reached: true, stop: StopReason::Converged });
        }

        let serial = topo.serial_chain.as_ref().filter(|_| goals[0].orientation.is_none());
        if let Some(chain) = serial
            && (self.frames.effector(goals[0].bone, goals[0].use_tail) - goals[0].target).length_squared() <= settings.tolerance * settings.tolerance
            && (!chain.limited || self.start_within_limits(problem))
        {
            // Met at the start: the start is the solution, exactly.
            return Ok(Solution::of_solved(problem, pose, &self.frames, 0, StopReason::Converged, settings.tolerance));
        }
        if let Some(chain) = serial.filter(|c| !c.limited) {
            let chain = &chain.bones;
            let (iterations, stop) = self.solve_serial(rig, chain, goals[0].target, &settings);
            // (`aim_serial_chain` leaves the rotations settled: bones off the chain at their start
            // rotations, chain bones in their start's hemisphere.)
            aim_serial_chain(rig, chain, &self.joints, &self.start_locals, &self.frames, &mut pose.rotations);
            rig.forward_into(&pose, &mut self.frames);
            return Ok(Solution::of_solved(problem, pose, &self.frames, iterations, stop, settings.tolerance));
        }
        // A serial chain with cone and twist limits: where none of them binds, Alg. 1's answer is
        // the solution ([`Fabrik::solve_unbound`]); each round tries that first.
        let unbound = serial.map(|c| c.bones.as_slice());
        // Without poles on lone chains (turned anew from every start, as Blender's), a solve
        // that does not reach every goal never ends farther from its goals than it started, and
        // one that stalls is solved again from where it stopped while that gets it closer (see
        // [`Fabrik::round`]).
        let guarded = (0..goals.len()).all(|gi| goals[gi].pole.is_none() || !topo.is_lone_chain(gi));
        let mut spent = 0;
        loop {
            // (Tracking moves go to the damped-least-squares step from the warm start, as
            // elsewhere: switching between this and that from frame to frame showed as pops.)
            if let Some(chain) = unbound
                && !self.is_small_move(problem, settings.tolerance)
            {
                let left = SolveSettings { max_iterations: settings.max_iterations - spent, ..settings };
                match self.solve_unbound(problem, chain, &left, pose) {
                    Ok(sol) => return Ok(Solution { iterations: spent + sol.iterations, ..sol }),
                    Err((start, used)) => (pose, spent) = (start, spent + used),
                }
            }
            let left = SolveSettings { max_iterations: settings.max_iterations - spent, ..settings };
            let (next, kept_start) = self.round(problem, &left, pose, guarded);
            let mut sol = Solution { iterations: spent + next.iterations, ..next };
            if kept_start && sol.stop == StopReason::Stalled && next.iterations >= left.max_iterations {
                // The round that kept its start spent all that was left: the cap, not a stall,
                // ended it (a round depends on the budget only through the cap, so with more
                // it might have got closer).
                sol.stop = StopReason::IterationLimit;
            }
            if !guarded || sol.stop != StopReason::Stalled || kept_start {
                return Ok(sol);
            }
            if sol.iterations >= settings.max_iterations {
                // Another round was due: the cap, not a stall, ended the solve.
                sol.stop = StopReason::IterationLimit;
                return Ok(sol);
            }
            // The next round starts where this one stopped.
            spent = sol.iterations;
            self.start_locals.clear();
            self.start_locals.extend(sol.pose.rotations.iter().map(|&q| crate::geometry::unit_start(q)));
            pose = Pose { rotations: self.start_locals.clone(), root_translation: sol.pose.root_translation, scales: sol.pose.scales.clone() };
            rig.forward_into(&pose, &mut self.frames);
        }
    }
}

impl Fabrik {
    /// A serial chain with cone and twist limits, solved first as if free: its straight joints
    /// with a preferred bend nudged toward it (as [`Fabrik::solve_general`] does), then Alg. 1
    /// with the Gauss–Newton finish ([`Fabrik::solve_serial`]), at most [`UNBOUND_ITERATIONS`].
    ///
    /// - When that reaches the target (or points the chain at an unreachable one, as Alg. 1
    ///   does) with every bone inside its limit, it is a solution of the constrained problem,
    ///   and the one a free chain gets: the limits are checked on the answer, not on the way
    ///   (an iterate may leave a limit that the answer keeps). 824 of the chain10 benchmark's
    ///   1000 in-limit targets are of this kind; Alg. 1 on positions is several times cheaper
    ///   than the general path's steps on frames.
    /// - When it reaches the target but some bones leave their limits, those bones are clamped
    ///   into them (§3.7.2's projection, once) and the damped-least-squares steps, which keep
    ///   every limit at every step ([`super::jacobian`]), close the gap that opens, at most
    ///   [`UNBOUND_ITERATIONS`] more: the chain is then near a solution, and a few steps (3–4
    ///   on that benchmark, 175 of the 1000) reach it. On those 1000 targets the answers bend
    ///   a little less than the general path's did (mean largest joint turn 19.97° against
    ///   20.56°, mean total turn 98.9° against 103.7°).
    ///
    /// `pose` is the start, whose local rotations are `self.start_locals` and forward kinematics
    /// `self.frames`. `Err` with the start and the iterations spent otherwise (the steps did not
    /// reach, or the target is out of reach and straightening breaks a limit); `self.frames` is
    /// then the start's forward kinematics again, for the general path.
    fn solve_unbound(&mut self, problem: &Problem, chain: &[usize], settings: &SolveSettings, mut pose: Pose) -> std::result::Result<Solution, (Pose, u32)> {
        let rig = problem.rig();
        self.locals.clone_from(&self.start_locals);
        self.nudge_straight_joints(problem, settings.tolerance);
        let capped = SolveSettings { max_iterations: settings.max_iterations.min(UNBOUND_ITERATIONS), ..*settings };
        let (mut iterations, stop) = self.solve_serial(rig, chain, problem.goals()[0].target, &capped);
        if matches!(stop, StopReason::Converged | StopReason::OutOfReach) {
            // (Bones off the chain keep their start rotations; chain bones stay in the
            // hemisphere of their nudged start's.)
            aim_serial_chain(rig, chain, &self.joints, &self.locals, &self.frames, &mut pose.rotations);
            if chain.iter().all(|&b| rig.bone(b).limit.contains(pose.rotations[b])) {
                rig.forward_into(&pose, &mut self.frames);
                return Ok(Solution::of_solved(problem, pose, &self.frames, iterations, stop, settings.tolerance));
            }
            if stop == StopReason::Converged {
                // Some limit binds: the nearest rotations inside the limits, then the steps.
                for &b in chain {
                    pose.rotations[b] = rig.bone(b).limit.clamp(pose.rotations[b]);
                }
                let budget = UNBOUND_ITERATIONS.min(settings.max_iterations - iterations);
                let out = self.dls.refine(problem, &mut pose, None, settings.tolerance, budget);
                if out.reached {
                    // (Each quaternion into its start's hemisphere, as every path leaves them.)
                    settle(problem, &self.start_locals, &mut pose.rotations);
                    return Ok(Solution::of_solved(problem, pose, self.dls.frames(), iterations + out.iterations, StopReason::Converged, settings.tolerance));
                }
                iterations += out.iterations;
            }
        }
        pose.rotations.copy_from_slice(&self.start_locals);
        rig.forward_into(&pose, &mut self.frames);
        Err((pose, iterations))
    }
}

/// Most iterations [`Fabrik::solve_unbound`] spends on Alg. 1, and then on damped-least-squares
/// steps, before the general path takes over (a free chain10 solve takes at most 7 on the
/// benchmark's 1000 targets; the steps after a clamp at most 9 on the in-limit targets).
const UNBOUND_ITERATIONS: u32 = 10;

impl Fabrik {
    /// One round of the general path from `pose` (whose local rotations are `self.start_locals`
    /// and whose forward kinematics is `self.frames`): FABRIK, then the damped-least-squares
    /// finish where it applies.
    ///
    /// With `guarded`, a round that does not reach every goal and does not bring the goals
    /// closer than its start did by [`IMPROVE`] returns its start (when that is within the
    /// limits), stalled; the flag says so. So no solve ends farther from its goals than it
    /// started; and since [`Solver::solve`] solves a stalled result again until a round keeps its
    /// start, solving again from a stalled solution repeats that last round and returns the
    /// solution: a fixed point (a round is a function of its start alone).
    fn round(&mut self, problem: &Problem, settings: &SolveSettings, mut pose: Pose, guarded: bool) -> (Solution, bool) {
        let rig = problem.rig();
        let goals = problem.goals();
        self.locals.clear();
        self.locals.extend_from_slice(&self.start_locals);
        self.forward_heads.clear();
        self.forward_heads.extend_from_slice(&self.frames.heads);
        let start_error = guarded.then(|| goal_error(problem, &self.frames));
        let start_translation = pose.root_translation;
        let (iterations, stop, finished_by_dls) = self.solve_general(problem, settings, &mut pose);
        settle(problem, &self.start_locals, &mut pose.rotations);
        let frames = if finished_by_dls {
            // The steps' frames are the result's forward kinematics already (a sign flip by
            // `settle` changes no bit of it).
            self.dls.frames()
        } else {
            rig.forward_into(&pose, &mut self.frames);
            &self.frames
        };
        let reached = (0..goals.len()).all(|gi| problem.goal_met(gi, frames, settings.tolerance));
        if let Some(before) = start_error
            && !reached
            && goal_error(problem, frames) >= before - IMPROVE * before.max(settings.tolerance * settings.tolerance)
            && self.start_within_limits(problem)
        {
            pose.rotations.copy_from_slice(&self.start_locals);
            pose.root_translation = start_translation;
            rig.forward_into(&pose, &mut self.frames);
            // (A round cut short by the cap says so: it may not have been done.)
            let stop = if stop == StopReason::IterationLimit { stop } else { StopReason::Stalled };
            return (Solution::of_solved(problem, pose, &self.frames, iterations, stop, settings.tolerance), true);
        }
        (Solution::of_solved(problem, pose, frames, iterations, stop, settings.tolerance), false)
    }
}

/// How much (relative) a round must lower its start's [`goal_error`] for its result to be kept
/// when it does not reach every goal (see [`Fabrik::round`]); below that the start is returned.
const IMPROVE: f64 = 1e-9;

impl Fabrik {
    /// Whether every bone the goals move starts inside its limit (a locked bone keeps its start
    /// anyway), so the start may be returned as a solution.
    fn start_within_limits(&self, problem: &Problem) -> bool {
        let rig = problem.rig();
        problem.topology().active.iter().all(|&b| {
            let limit = &rig.bone(b).limit;
            limit.locked || limit.violation(self.start_locals[b]) <= 1e-9
        })
    }

    /// Alg. 1 on joint positions (`self.joints`, from the start pose's `self.frames`); the
    /// caller turns them into rotations ([`aim_serial_chain`]).
    fn solve_serial(&mut self, rig: &Rig, chain: &[usize], target: DVec3, s: &SolveSettings) -> (u32, StopReason) {
        let m = chain.len();
        self.joints.clear();
        self.joints.push(self.frames.heads[chain[0]]);
        self.joints.extend(chain.iter().map(|&b| self.frames.tails[b]));
        // Sized now, so a later solve that first takes a Gauss–Newton step allocates nothing.
        self.saved_joints.reserve(self.joints.len());
        let p = &mut self.joints;
        let lengths = |k: usize| rig.bone(chain[k]).length;
        let base = p[0];
        let reach: f64 = (0..m).map(lengths).sum();
        let (iterations, stop) = if (p[m] - target).length_squared() <= s.tolerance * s.tolerance {
            // Met at the start (at full stretch, too): nothing moves.
            (0, StopReason::Converged)
        } else if (target - base).length() >= reach {
            // Lines 1.4–1.12: the target is out of reach; point the chain straight at it.
            let dir = (target - base).normalize_or(DVec3::Y);
            for k in 0..m {
                p[k + 1] = p[k] + dir * lengths(k);
            }
            (1, StopReason::OutOfReach)
        } else {
            let tol2 = s.tolerance * s.tolerance;
            let mut it = 0;
            let mut stop = StopReason::IterationLimit;
            let mut last_end = p[m];
            let start_gap = (p[m] - target).length();
            let finish_below = finish_threshold(start_gap, s.tolerance);
            // After FABRIK's first iteration (which places the chain and decides its bends) the
            // chain is finished by Gauss–Newton steps while each at least halves the gap.
            let mut newton = true;
            // A tracking move (see [`TRACK_FRACTION`]) takes the steps from the warm start: the
            // least joint motion. FABRIK's first iteration would place the chain anew, which
            // turned bones up to 0.19 rad in a frame of a smooth motion (0.011 rad with this).
            let tracking = start_gap <= TRACK_FRACTION * reach;
            while it < s.max_iterations {
                let gap = (p[m] - target).length_squared();
                let close = if newton && it > 0 { NEWTON_CLOSE * start_gap } else { finish_below };
                let may_finish = gap <= close * close || (it > 0 && nearly_stretched(base, target, reach));
                if gap <= tol2 || (may_finish && finish_exactly(p, &lengths, target)) {
                    stop = StopReason::Converged;
                    break;
                }
                it += 1;
                if newton && (it > 1 || tracking) {
                    self.saved_joints.clone_from(p);
                    if chain_position_step(p, target) && (p[m] - target).length_squared() <= 0.25 * gap {
                        last_end = p[m];
                        continue;
                    }
                    p.clone_from(&self.saved_joints);
                    newton = false;
                }
                // Stage 1, forward reaching (lines 1.19–1.28).
                // Each joint is placed at `lengths(k) / |d|` along `d`, computed as `(lengths(k) / |d|²)
                // · |d|`: the division and the square root then run side by side, and each
                // iteration is a chain of twenty such placements.
                p[m] = target;
                for k in (0..m).rev() {
                    let d = p[k] - p[k + 1];
                    let r2 = d.length_squared();
                    p[k] = if r2 > EPS_LEN * EPS_LEN { p[k + 1] + d * ((lengths(k) / r2) * r2.sqrt()) } else { p[k + 1] - DVec3::Y * lengths(k) };
                }
                // Stage 2, backward reaching (lines 1.29–1.38).
                p[0] = base;
                for k in 0..m {
                    let d = p[k + 1] - p[k];
                    let r2 = d.length_squared();
                    p[k + 1] = if r2 > EPS_LEN * EPS_LEN { p[k] + d * ((lengths(k) / r2) * r2.sqrt()) } else { p[k] + DVec3::Y * lengths(k) };
                }
                if (p[m] - last_end).length() <= s.stall_tolerance {
                    // Stalled short of a reachable target (a straight chain on the target's own
                    // line never bends): the closed-form finish bends it.
                    stop = if finish_exactly(p, &lengths, target) { StopReason::Converged } else { StopReason::Stalled };
                    break;
                }
                last_end = p[m];
            }
            (it, stop)
        };
        (iterations, stop)
    }

    /// Forward kinematics, from their local rotations, for every bone below one marked in
    /// `self.changed` (and not marked itself): what a finished tail carries follows it.
    fn refresh_below(&mut self, rig: &Rig) {
        for (i, b) in rig.bones().iter().enumerate() {
            let Some(p) = b.parent else { continue };
            if self.changed[i] || !self.changed[p] {
                continue;
            }
            self.changed[i] = true;
            let pr = self.frames.rotations[p];
            let rot = (pr * b.rest_rotation * self.locals[i]).normalize();
            self.frames.rotations[i] = rot;
            self.frames.heads[i] = self.frames.heads[p] + pr * b.rest_head;
            self.frames.tails[i] = self.frames.heads[i] + rot * DVec3::new(0.0, b.length, 0.0);
        }
    }

    /// Pre-bends each straight joint that has a preferred bend (see module docs): the bone turns
    /// [`BEND_NUDGE`] toward the bend and its parent half that back about the same axis, so the
    /// joint itself leaves the line from the parent's head to the child's tail and FABRIK's
    /// point steps see which side the bend is on.
    fn nudge_straight_joints(&mut self, problem: &Problem, tolerance: f64) {
        let rig = problem.rig();
        let topo = problem.topology();
        // Every test and turn below is on local rotations: a joint's straightness and a
        // parent's counter-turn about the bend axis do not depend on the bones above, so the
        // frames (which `must_bend` reads: effectors and chain tops, moved by nudges only to
        // first order) are refreshed once, after all the nudges.
        let mut first_changed = None;
        // `must_bend` of the last bone only one goal moves, and that goal: the same for every
        // bone of its chain (the frames it reads do not change in this loop).
        let mut lone: Option<(usize, bool)> = None;
        // (Cheapest tests first: this runs before every solve.)
        for &b in &topo.active {
            let bone = rig.bone(b);
            let Some(p) = bone.parent else { continue };
            let Some(bend) = bone.limit.preferred_bend_vector().filter(|_| !bone.limit.locked) else { continue };
            // The bone's direction in its parent's frame, within 1e-3 rad of the parent's own (+Y).
            if ((bone.rest_rotation * self.locals[b]) * DVec3::Y).y < STRAIGHT_COS {
                continue;
            }
            let bends = match (topo.lone_goal[b], lone) {
                (Some((g, _)), Some((lg, bends))) if g == lg => bends,
                (Some((g, _)), _) => {
                    let bends = self.must_bend(problem, b, tolerance);
                    lone = Some((g, bends));
                    bends
                }
                (None, _) => self.must_bend(problem, b, tolerance),
            };
            if !bends {
                continue;
            }
            // The nudge as a rotation vector: `delta` about the bend's axis. Nudged rotations are
            // seeds and are not clamped here: FABRIK's backward stage clamps every bone it
            // places, and the serial chain's result is checked against every limit.
            let angle = bend.length();
            let delta = BEND_NUDGE.min(angle);
            let turn = bend * (delta / angle);
            self.locals[b] = from_rotation_vector(turn) * self.locals[b];
            let mut from = b;
            if topo.is_active[p] && !rig.bone(p).limit.locked {
                // The parent turns back by half about the same world axis; in its own frame that
                // axis is `rest_rotation · axis` whatever its pose.
                let back = from_rotation_vector(bone.rest_rotation * turn * -0.5);
                self.locals[p] *= back;
                from = p;
            }
            first_changed = Some(first_changed.map_or(from, |f: usize| f.min(from)));
        }
        if let Some(from) = first_changed {
            rig.forward_from(&self.locals, &[], from, &mut self.frames);
        }
    }

    /// Whether some goal whose chain holds bone `b` is unmet and within its chain's reach (only
    /// then must a straight joint bend at all).
    fn must_bend(&self, problem: &Problem, b: usize, tolerance: f64) -> bool {
        let topo = problem.topology();
        let unmet_within_reach = |g: usize| {
            let goal = &problem.goals()[g];
            let Some(&top) = topo.moved[g].last() else { return false };
            let unmet = (self.frames.effector(goal.bone, goal.use_tail) - goal.target).length_squared() > tolerance * tolerance;
            unmet && (goal.target - self.frames.heads[top]).length() < topo.chain_reach[g]
        };
        match topo.lone_goal[b] {
            Some((g, _)) => unmet_within_reach(g),
            None => (0..problem.goals().len()).any(|g| topo.moved[g].contains(&b) && unmet_within_reach(g)),
        }
    }

    /// The general two-stage iteration on bone frames.
    fn solve_tree(&mut self, problem: &Problem, s: &SolveSettings) -> (u32, StopReason) {
        let rig = problem.rig();
        let goals = problem.goals();
        let topo = problem.topology();
        let root_head = self.frames.heads[0];
        self.effectors.clear();
        self.effectors.extend(goals.iter().map(|g| self.frames.effector(g.bone, g.use_tail)));
        let tol = s.tolerance;
        let mut stop = StopReason::IterationLimit;
        let mut it = 0;
        self.finish_below.clear();
        self.finish_below.extend(goals.iter().zip(&self.effectors).map(|(g, e)| finish_threshold((*e - g.target).length(), tol)));
        // The unmet distance before the current iteration (see [`CRAWL_RATIO`]).
        let mut unmet_before = self.unmet_if_all_within_reach(problem, tol);
        while it < s.max_iterations {
            if (0..goals.len()).all(|gi| problem.goal_met(gi, &self.frames, tol)) {
                stop = StopReason::Converged;
                break;
            }
            it += 1;
            self.keep_tree_poles(problem);
            self.forward_stage(problem);
            self.backward_stage(problem, root_head);
            self.finish_free_tails(problem, false);
            // Stalled when no goal still short of its target moves: goals already within
            // tolerance may keep creeping closer, but that is no reason to go on.
            let mut moved = 0.0f64;
            for (g, e) in goals.iter().zip(self.effectors.iter_mut()) {
                let now = self.frames.effector(g.bone, g.use_tail);
                if (now - g.target).length() > tol {
                    moved = moved.max((now - *e).length());
                }
                *e = now;
            }
            if moved <= s.stall_tolerance {
                // Stalled: a free tail may still be bent onto its target in closed form (a
                // straight chain on its target's own line never bends under FABRIK's steps).
                let before: f64 = goals.iter().map(|g| (self.frames.effector(g.bone, g.use_tail) - g.target).length()).sum();
                self.finish_free_tails(problem, true);
                let after: f64 = goals.iter().map(|g| (self.frames.effector(g.bone, g.use_tail) - g.target).length()).sum();
                if after < before - tol {
                    for (g, e) in goals.iter().zip(self.effectors.iter_mut()) {
                        *e = self.frames.effector(g.bone, g.use_tail);
                    }
                    continue;
                }
                stop = StopReason::Stalled;
                break;
            }
            let unmet = self.unmet_if_all_within_reach(problem, tol);
            if let (Some(now), Some(before)) = (unmet, unmet_before)
                && now > CRAWL_RATIO * before
            {
                // Crawling (a sub-base or limits hold the chains in a tug of war): the caller's
                // damped-least-squares finish takes over.
                stop = StopReason::Stalled;
                break;
            }
            unmet_before = unmet;
        }
        let _ = (rig, topo);
        (it, stop)
    }

    /// Everything but a lone free chain: small tracking moves by the damped-least-squares step
    /// ([`Self::track_small_moves`]); otherwise FABRIK on bone frames from the start pose, with
    /// what is left of the iteration budget, and the damped-least-squares finish when FABRIK
    /// stalls or crawls short of goals within reach. `pose` holds the start on entry and receives
    /// the result; the flag tells whether damped least squares had the last word (its frames are
    /// then the result's forward kinematics).
    fn solve_general(&mut self, problem: &Problem, settings: &SolveSettings, pose: &mut Pose) -> (u32, StopReason, bool) {
        let rig = problem.rig();
        let spent = match self.track_small_moves(problem, settings, pose) {
            Ok((iterations, stop)) => return (iterations, stop, true),
            Err(spent) => spent,
        };
        self.apply_poles(problem, settings.tolerance);
        self.nudge_straight_joints(problem, settings.tolerance);
        let left = SolveSettings { max_iterations: settings.max_iterations - spent, ..*settings };
        let (iterations, stop) = self.solve_tree(problem, &left);
        let iterations = iterations + spent;
        local_rotations(rig, &self.frames, &mut pose.rotations);
        if problem.root() == RootMode::Free {
            let b0 = rig.bone(0);
            pose.root_translation = b0.rest_rotation.conjugate() * (self.frames.heads[0] - b0.rest_head);
        }
        let stuck = matches!(stop, StopReason::Stalled | StopReason::IterationLimit);
        if !stuck
            || iterations >= settings.max_iterations
            || !self.unmet_if_all_within_reach(problem, settings.tolerance).is_some_and(|d| d > 0.0)
        {
            return (iterations, stop, false);
        }
        // Bones no goal moves back to their start rotations exactly, before the steps (which
        // leave them) compute the forward kinematics the solution reports.
        settle(problem, &self.start_locals, &mut pose.rotations);
        let out = self.dls.refine(problem, pose, None, settings.tolerance, settings.max_iterations - iterations);
        let total = iterations + out.iterations;
        let stop = match () {
            () if out.reached => StopReason::Converged,
            () if total >= settings.max_iterations => StopReason::IterationLimit,
            () => StopReason::Stalled,
        };
        (total, stop, true)
    }

    /// Tracking: when every goal is within reach and its gap is small next to its chain's reach,
    /// the damped-least-squares step from the start pose (the smallest joint motion that closes
    /// the gaps) solves it; FABRIK's limit steering makes discrete choices (swivels, flips) that
    /// show as pops between frames. `Err` with the iterations spent when that does not apply or
    /// does not reach within [`TRACK_ITERATIONS`] (at most half the budget): FABRIK then solves
    /// from the start (its frames are untouched; `pose` keeps its root translation, and its
    /// rotations are overwritten later).
    fn track_small_moves(&mut self, problem: &Problem, settings: &SolveSettings, pose: &mut Pose) -> std::result::Result<(u32, StopReason), u32> {
        if !self.is_small_move(problem, settings.tolerance) {
            return Err(0);
        }
        let start_root = pose.root_translation;
        pose.rotations.copy_from_slice(&self.start_locals);
        // The budget is the solver's, not what this round has left, which only caps it: a round
        // must depend on its start alone up to the cap (see [`Fabrik::round`]).
        let budget = TRACK_ITERATIONS.min(self.settings.max_iterations / 2).min(settings.max_iterations);
        let out = self.dls.refine(problem, pose, Some(&self.frames), settings.tolerance, budget);
        if out.reached {
            return Ok((out.iterations, StopReason::Converged));
        }
        pose.root_translation = start_root;
        Err(out.iterations)
    }

    /// Whether this is a tracking move (see [`TRACK_FRACTION`]): no goal has a pole, every target
    /// is within reach, and every gap is at most [`TRACK_FRACTION`] of its chain's reach.
    fn is_small_move(&self, problem: &Problem, tolerance: f64) -> bool {
        let topo = problem.topology();
        !problem.goals().iter().any(|g| g.pole.is_some())
            && self.unmet_if_all_within_reach(problem, tolerance).is_some()
            && problem.goals().iter().enumerate().all(|(gi, g)| {
                (self.frames.effector(g.bone, g.use_tail) - g.target).length() <= TRACK_FRACTION * topo.chain_reach[gi]
            })
    }

    /// When every goal's target is within reach: the summed distance of the unmet goals (beyond
    /// `tolerance`), what the damped-least-squares steps may close. `None` when some target is
    /// out of reach (by more than `tolerance`: a target at full stretch is reached by
    /// straightening) even with every moved bone above its chain helping (from its anchor's
    /// head, see `Topology::anchor_reach`): FABRIK straightens such a chain toward its target,
    /// where a least-squares compromise would bend it to help the other goals.
    fn unmet_if_all_within_reach(&self, problem: &Problem, tolerance: f64) -> Option<f64> {
        let topo = problem.topology();
        let mut total = 0.0;
        for (gi, (g, &(anchor, reach))) in problem.goals().iter().zip(&topo.anchor_reach).enumerate() {
            if (g.target - self.frames.heads[anchor]).length() > reach + tolerance {
                return None;
            }
            // (An orientation error counts as the distance it is at the chain's reach.)
            let (distance, angle) = problem.goal_errors(gi, &self.frames);
            for d in [distance, angle * problem.angle_scale(gi)] {
                if d > tolerance {
                    total += d;
                }
            }
        }
        Some(total)
    }

    /// Closes the last gap of each goal whose own bones end in a free serial chain, in closed
    /// form ([`finish_exactly`]), once FABRIK has brought it within `self.finish_below[g]` or the
    /// chain is nearly stretched (or `always`, as when FABRIK has stalled). A target beyond the
    /// tail's reach straightens the tail toward it, as
    /// Alg. 1's unreachable case does (FABRIK would only crawl there). With an orientation goal
    /// the effector takes the goal's frame and the bones above it finish onto the head that frame
    /// needs. Bones the tail carries (other goals' chains hanging from it) follow by forward
    /// kinematics.
    fn finish_free_tails(&mut self, problem: &Problem, always: bool) {
        let rig = problem.rig();
        let topo = problem.topology();
        let mut changed = false;
        self.changed.clear();
        self.changed.resize(rig.len(), false);
        for (gi, g) in problem.goals().iter().enumerate() {
            let Some(tail) = topo.free_tails[gi].as_deref() else { continue };
            if g.pole.is_some() {
                continue;
            }
            // An orientation goal fixes the effector's frame, so its head has one place to be:
            // the bones above it finish onto that point.
            let (moving, aim_at) = match g.orientation {
                Some(q) => (&tail[..tail.len() - 1], g.target - q * DVec3::new(0.0, rig.bone(g.bone).length, 0.0)),
                None => (tail, g.target),
            };
            if moving.len() < 2 {
                continue;
            }
            let gap = (self.frames.tails[g.bone] - g.target).length();
            let top = self.frames.heads[moving[0]];
            let reach: f64 = moving.iter().map(|&b| rig.bone(b).length).sum();
            if !always && gap > self.finish_below[gi] && !nearly_stretched(top, aim_at, reach) {
                continue;
            }
            self.joints.clear();
            self.joints.push(top);
            self.joints.extend(moving.iter().map(|&b| self.frames.tails[b]));
            let lengths = |k: usize| rig.bone(moving[k]).length;
            if !finish_exactly(&mut self.joints, &lengths, aim_at) {
                let Some(dir) = (aim_at - top).try_normalize().filter(|_| (aim_at - top).length() >= reach) else {
                    continue;
                };
                for k in 0..moving.len() {
                    self.joints[k + 1] = self.joints[k] + dir * lengths(k);
                }
            }
            aim_chain(rig, moving, &self.joints, &mut self.frames);
            if let Some(q) = g.orientation {
                let head = self.joints[moving.len()];
                self.frames.rotations[g.bone] = q;
                self.frames.heads[g.bone] = head;
                self.frames.tails[g.bone] = head + q * DVec3::new(0.0, rig.bone(g.bone).length, 0.0);
            }
            for &b in tail {
                let parent = rig.bone(b).parent.map_or(DQuat::IDENTITY, |p| self.frames.rotations[p]);
                self.locals[b] = rig.local_from_world(b, parent, self.frames.rotations[b]);
                self.changed[b] = true;
            }
            changed = true;
        }
        if changed {
            self.refresh_below(rig);
        }
    }

    /// Blender's pole, for each poled goal whose bones no other goal moves (Blender's IK drops
    /// poles when a tree has several goals; those chains are kept by [`Self::keep_tree_poles`]).
    ///
    /// Exactly Blender's `IK_QJacobianSolver::ConstrainPoleVector`, which Blender runs once,
    /// before its iterations, on the pose it starts from: the chain turns rigidly about its top
    /// bone's head by the rotation taking the frame (`dir` = top head → effector, `up` = the top
    /// bone's `X·cos a + Z·sin a`) to the frame (top head → target, top head → pole); so the
    /// effector lands on the line to the target and the plane of `dir` and `up` contains the pole,
    /// `up` on the pole's side. The solve then runs from there: an unlimited chain only bends in
    /// its plane, so its knee stays on the swivel this turn gave it. Blender applies the turn
    /// outside the top bone's limits; Sinew takes the largest part of it that keeps the top bone
    /// within its limit (none for a locked top).
    ///
    /// A chain that is straight along that line cannot bend under FABRIK (nor under Blender's
    /// Jacobian, which leaves it straight and short of the target): each of its straight joints
    /// without a preferred bend of its own ([`Self::nudge_straight_joints`] does those) is
    /// pre-bent toward the pole, in the pole's plane.
    fn apply_poles(&mut self, problem: &Problem, tolerance: f64) {
        let topo = problem.topology();
        for (gi, g) in problem.goals().iter().enumerate() {
            let Some(pole) = g.pole else { continue };
            if !problem.topology().is_lone_chain(gi) {
                continue;
            }
            let Some(&top) = topo.moved[gi].last() else { continue };
            // A goal reached at the start keeps its pose: solving again from a solution changes
            // nothing (Blender's IK would still swivel the chain).
            let reached = problem.goal_met(gi, &self.frames, tolerance);
            if reached {
                continue;
            }
            let _ = top;
            super::reference::turn_chain_toward_pole(problem, gi, &mut self.locals, &[], &mut self.frames);
            self.bend_straight_chain_toward_pole(problem, gi, pole.target, tolerance);
        }
    }

    /// See [`Self::apply_poles`]: pre-bends goal `gi`'s chain toward `pole` when the whole chain
    /// lies on one line. Each straight joint turns [`BEND_NUDGE`] toward the pole's side and its
    /// parent half that back, as [`Self::nudge_straight_joints`] does for a preferred bend.
    fn bend_straight_chain_toward_pole(&mut self, problem: &Problem, gi: usize, pole: DVec3, tolerance: f64) {
        let rig = problem.rig();
        let chain = &problem.topology().moved[gi];
        let Some(&top) = chain.last() else { return };
        let head = self.frames.heads[top];
        let Some(line) = (self.frames.tails[chain[0]] - head).try_normalize() else { return };
        let straight = chain.iter().all(|&b| (self.frames.rotations[b] * DVec3::Y).angle_between(line) < 1e-3);
        let Some(side) = (pole - head).reject_from_normalized(line).try_normalize() else { return };
        if !straight {
            return;
        }
        // Turning the parent by -δ/2 about side × line moves the joint toward `side`.
        let world_axis = side.cross(line);
        for &b in chain.iter().rev() {
            let bone = rig.bone(b);
            let Some(p) = bone.parent else { continue };
            if !chain.contains(&p) || bone.limit.locked || bone.limit.preferred_bend().is_some() || !self.must_bend(problem, b, tolerance) {
                continue;
            }
            let base = self.frames.rotations[p] * bone.rest_rotation;
            let axis = base.conjugate() * world_axis;
            self.locals[b] = bone.limit.clamp(DQuat::from_axis_angle(axis, BEND_NUDGE) * self.locals[b]);
            if !rig.bone(p).limit.locked {
                let turned = DQuat::from_axis_angle(world_axis, -0.5 * BEND_NUDGE) * self.frames.rotations[p];
                let grand = rig.bone(p).parent.map_or(DQuat::IDENTITY, |g| self.frames.rotations[g]);
                self.locals[p] = rig.bone(p).limit.clamp(rig.local_from_world(p, grand, turned));
            }
            rig.forward_from(&self.locals, &[], 0, &mut self.frames);
        }
    }

    /// Poles of goals that share bones with other goals (a tree, where Blender's IK ignores
    /// poles), kept at every iteration: each such chain turns about its axis (chain top's head
    /// → target) so that the top bone's `X·cos a + Z·sin a` (a = pole angle) points at the pole,
    /// seen along that axis.
    fn keep_tree_poles(&mut self, problem: &Problem) {
        for (gi, g) in problem.goals().iter().enumerate() {
            let Some(pole) = g.pole else { continue };
            if problem.topology().is_lone_chain(gi) {
                continue;
            }
            let chain = &problem.topology().moved[gi];
            let top = *chain.last().unwrap_or(&g.bone);
            let a = self.frames.heads[top];
            let Some(axis) = (g.target - a).try_normalize() else { continue };
            let flat = |v: DVec3| (v - axis * v.dot(axis)).try_normalize();
            let (sin, cos) = pole.angle.sin_cos();
            let side = self.frames.rotations[top] * (DVec3::X * cos + DVec3::Z * sin);
            let (Some(cur), Some(want)) = (flat(side), flat(pole.target - a)) else { continue };
            let turn = shortest_arc(cur, want);
            if angle_between(turn, DQuat::IDENTITY) < 1e-12 {
                continue;
            }
            for &b in chain {
                self.frames.heads[b] = a + turn * (self.frames.heads[b] - a);
                self.frames.tails[b] = a + turn * (self.frames.tails[b] - a);
                self.frames.rotations[b] = (turn * self.frames.rotations[b]).normalize();
            }
        }
    }

    /// Fills `self.pulls` with what pulls bone `b` ([`gather_pulls`]).
    fn gather_pulls(&mut self, problem: &Problem, b: usize) -> Option<DQuat> {
        gather_pulls(problem, b, &self.forward_heads, &mut self.pulls)
    }

    /// Stage 1: from the effectors inward; sub-bases take the rigid fit of their children's
    /// estimates.
    fn forward_stage(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let topo = problem.topology();
        for &b in topo.active.iter().rev() {
            let orientation = self.gather_pulls(problem, b);
            let old_head = self.frames.heads[b];
            let old_rot = self.frames.rotations[b];
            if self.pulls.len() > 1 {
                self.reach_aware_pulls(problem, b, old_head, old_rot, false);
            }
            let (rot, head) = if let Some(q) = orientation {
                // The effector's frame is given: place it rigidly (weighted mean of its pulls).
                let wsum: f64 = self.pulls.iter().map(|p| p.weight).sum();
                let head = self.pulls.iter().map(|p| (p.target - q * p.local) * p.weight).sum::<DVec3>() / wsum;
                (q, head)
            } else if let [p] = self.pulls.as_slice() {
                line_step(old_rot, old_head, p.local, p.target)
            } else {
                fit_rigid(old_rot, &self.pulls)
            };
            let (rot, head) = match topo.pulls[b].as_slice() {
                [(c, _)] if self.pulls.len() == 1 => {
                    let (rot, head) = if self.flip_wrong_bend(rig, *c, rot, head) {
                        line_step(old_rot, old_head, rig.bone(*c).rest_head, self.forward_heads[*c])
                    } else {
                        (rot, head)
                    };
                    self.keep_child_in_limit(rig, *c, rot, head)
                }
                _ => (rot, head),
            };
            self.frames.rotations[b] = rot;
            self.forward_heads[b] = head;
        }
    }

    /// When child `c`'s joint is bent the wrong way relative to its parent (placed at `rot`,
    /// `head`) and the mirrored bend is allowed, reflects `c`'s estimated head across the line
    /// from the parent's head to `c`'s tail: both bone lengths are kept and the joint (a knee, an
    /// elbow) moves to the side its limit allows. Returns whether it flipped.
    fn flip_wrong_bend(&mut self, rig: &Rig, c: usize, rot: DQuat, head: DVec3) -> bool {
        let child = rig.bone(c);
        if child.limit.locked || child.limit.preferred_bend().is_none() {
            return false;
        }
        let child_rot = self.frames.rotations[c];
        if !child.limit.bends_wrong_way(rig.local_from_world(c, rot, child_rot)) {
            return false;
        }
        let joint = self.forward_heads[c];
        let tail = joint + child_rot * DVec3::new(0.0, child.length, 0.0);
        let Some(axis) = (tail - head).try_normalize() else { return false };
        let r = joint - head;
        let flipped = head + axis * (2.0 * axis.dot(r)) - r;
        let Some(dir) = (tail - flipped).try_normalize() else { return false };
        self.forward_heads[c] = flipped;
        self.frames.rotations[c] = turn_toward(child_rot, DVec3::Y, dir);
        true
    }

    /// Re-orients a parent (placed at `rot`, `head`) so that its child `c`'s local rotation is
    /// inside `c`'s limit ([`keep_child_in_limit`]).
    fn keep_child_in_limit(&self, rig: &Rig, c: usize, rot: DQuat, head: DVec3) -> (DQuat, DVec3) {
        keep_child_in_limit(rig, c, (rot, head), self.frames.rotations[c], self.start_locals[c], self.forward_heads[c])
    }

    /// Stage 2: from the root outward; each active bone turns about its (fixed) head toward the
    /// forward estimates, then its limit is applied. Inactive bones follow their parents.
    fn backward_stage(&mut self, problem: &Problem, root_head: DVec3) {
        let rig = problem.rig();
        let topo = problem.topology();
        let mut next_active = topo.active.iter().peekable();
        for (b, bone) in rig.bones().iter().enumerate() {
            let active = next_active.peek() == Some(&&b);
            if active {
                next_active.next();
            }
            let (base, head) = match bone.parent {
                Some(p) => {
                    let pr = self.frames.rotations[p];
                    (pr * bone.rest_rotation, self.frames.heads[p] + pr * bone.rest_head)
                }
                None if b == 0 => {
                    let head = if problem.root() == RootMode::Free && active { self.forward_heads[0] } else { root_head };
                    (bone.rest_rotation, head)
                }
                None => (bone.rest_rotation, self.frames.heads[b]),
            };
            let local = if active {
                let current = self.frames.rotations[b];
                let orientation = self.gather_pulls(problem, b);
                if self.pulls.len() > 1 {
                    self.reach_aware_pulls(problem, b, head, current, true);
                }
                let two_bone = match topo.pulls[b].as_slice() {
                    [(c, _)] if orientation.is_none() && self.pulls.len() == 1 => {
                        self.two_bone_step(problem, b, *c, base, head, current)
                    }
                    _ => None,
                };
                let want = if let Some(q) = orientation {
                    q
                } else if let Some(q) = two_bone {
                    q
                } else if let [p] = self.pulls.as_slice()
                    && p.local.length_squared() <= EPS_LEN * EPS_LEN
                {
                    // Pulled at its head only (a head goal): nothing decides its rotation, so it
                    // keeps its local rotation and follows its parent.
                    base * self.locals[b]
                } else if let [p] = self.pulls.as_slice() {
                    match (bone.limit.swing, topo.pulls[b].as_slice()) {
                        (Swing::Hinge(h), _) if !bone.limit.locked => base * aim_hinge(base, h, head, p.local, p.target),
                        (_, [(c, _)]) => {
                            let want = aim(current, head, p.local, p.target);
                            self.make_room_for_child(problem, b, *c, base, head, want)
                        }
                        _ => aim(current, head, p.local, p.target),
                    }
                } else {
                    let fitted = fit_rotation(current, self.pulls.iter().map(|p| (p.local, p.target - head, p.weight)));
                    self.turn_sub_base(problem, b, head, fitted)
                };
                let local = (base.conjugate() * want).normalize();
                let limit = &bone.limit;
                let clamped = if limit.locked { self.start_locals[b] } else { limit.clamp(local) };
                if limit.max_stiffness() > 0.0 && !limit.locked {
                    // The slerp of two allowed rotations can leave a cone: clamp again.
                    limit.clamp(self.locals[b].slerp(clamped, 1.0 - limit.max_stiffness()))
                } else {
                    clamped
                }
            } else {
                self.locals[b]
            };
            self.locals[b] = local;
            let rot = (base * local).normalize();
            self.frames.rotations[b] = rot;
            self.frames.heads[b] = head;
            self.frames.tails[b] = head + rot * DVec3::new(0.0, bone.length, 0.0);
        }
    }
}

/// Joint positions `p` (m + 1 points, bone k from `p[k]` to `p[k + 1]`) are bent to put the end
/// exactly on `target`: at the lowest joint `k` from which bone k plus the straightened rest of
/// the chain can reach it, bone k turns (in the plane of its current direction and the target)
/// to the angle the law of cosines gives, and the bones below it line up on the target.
///
/// This is the closed-form end game FABRIK's report points to (§3.7: a joint between two known
/// positions lies on the intersection of two spheres): plain FABRIK converges linearly and
/// crawls when the chain is nearly stretched, so once it has closed all but
/// [`FINISH_FRACTION`] of the gap, the rest is placed directly. Returns false (and changes
/// nothing) when no joint can take up the residual.
fn finish_exactly(p: &mut [DVec3], lengths: &impl Fn(usize) -> f64, target: DVec3) -> bool {
    let m = p.len() - 1;
    if m < 2 {
        return false;
    }
    let mut rest = lengths(m - 1);
    for k in (0..m - 1).rev() {
        let l = lengths(k);
        let to_target = target - p[k];
        let c = to_target.length();
        // A target at full stretch, or beyond it by round-off (1e-9 of the length), counts as
        // reachable: the chain straightens onto it.
        let slack = 1e-9 * (l + rest);
        if c <= EPS_LEN || c > l + rest + slack || c < (l - rest).abs() - slack {
            rest += l;
            continue;
        }
        let w = to_target / c;
        let u = (p[k + 1] - p[k]) / l;
        let side = (u - w * u.dot(w)).try_normalize().unwrap_or_else(|| w.any_orthonormal_vector());
        let cos_phi = ((l * l + c * c - rest * rest) / (2.0 * l * c)).clamp(-1.0, 1.0);
        let sin_phi = (1.0 - cos_phi * cos_phi).sqrt();
        p[k + 1] = p[k] + (w * cos_phi + side * sin_phi) * l;
        let tail_dir = (target - p[k + 1]).normalize_or(w);
        for j in k + 1..m {
            p[j + 1] = p[j] + tail_dir * lengths(j);
        }
        p[m] = target;
        return true;
    }
    false
}

impl Fabrik {
    /// At a sub-base `b` (head `head`, rotation `rot`): a child chain that carries a single goal
    /// asks the sub-base to move only as far as the chain cannot reach. Its pull goes to its
    /// current attachment when its target is within the chain's reach from there, and otherwise
    /// toward the target by the shortfall. Plain FABRIK pulls the sub-base to every child's
    /// forward estimate, so chains with slack drag it around and multi-chain solves crawl
    /// (§3.7.1's centroid converges slowly); this way the sub-base moves only for chains that
    /// need it, and each chain then closes its own gap.
    ///
    /// With `head_fixed` (the backward stage) the attachment can only move on the sphere about
    /// the sub-base's head, so the pull goes to the nearest point of that sphere from which the
    /// chain reaches (where the sphere meets the ball of the chain's reach about its target).
    fn reach_aware_pulls(&mut self, problem: &Problem, b: usize, head: DVec3, rot: DQuat, head_fixed: bool) {
        let topo = problem.topology();
        let rig = problem.rig();
        for (pull, &(c, _)) in self.pulls.iter_mut().zip(&topo.pulls[b]) {
            let Some((g, reach)) = topo.lone_goal[c] else { continue };
            let target = problem.goals()[g].target;
            let attach = head + rot * rig.bone(c).rest_head;
            let to_target = target - attach;
            let dist = to_target.length();
            pull.target = if dist <= reach {
                attach
            } else if head_fixed {
                nearest_reaching_point_on_sphere(head, attach, target, reach)
            } else {
                attach + to_target * ((dist - reach) / dist)
            };
        }
    }

    /// Turns sub-base `b` (head fixed at `head`, starting at `rot`) by Gauss–Newton on its
    /// rotation so that every lone-goal child chain can reach its target (one residual each: the
    /// chain's shortfall, zero once within reach) and the other pulls land (three residuals each).
    /// The normal equations are 3×3 whatever the number of children. Near the solution this
    /// converges quadratically, where fitting to re-measured pull points (alternating
    /// projections) crawls, e.g. a pinned pelvis with both legs at full stretch.
    fn turn_sub_base(&mut self, problem: &Problem, b: usize, head: DVec3, rot: DQuat) -> DQuat {
        let topo = problem.topology();
        let rig = problem.rig();
        let children = &topo.pulls[b];
        let mut rot = rot;
        for _ in 0..SUB_BASE_ROUNDS {
            let mut leverage = 0.0;
            let mut jtj = DMat3::ZERO;
            let mut jtr = DVec3::ZERO;
            for (k, pull) in self.pulls.iter().enumerate() {
                let v = rot * pull.local;
                let lone = children.get(k).and_then(|&(c, _)| topo.lone_goal[c]);
                match lone {
                    Some((g, reach)) => {
                        let to_target = problem.goals()[g].target - (head + v);
                        let dist = to_target.length();
                        if dist <= reach {
                            continue;
                        }
                        // A shortfall is a hard need (the chain cannot reach otherwise); the
                        // other pulls are preferences their flexible chains can give up.
                        let w = pull.weight * SHORTFALL_WEIGHT;
                        let j = -v.cross(to_target / dist);
                        leverage += w * v.length_squared();
                        jtj += DMat3::from_cols(j * j.x, j * j.y, j * j.z) * w;
                        jtr += j * ((dist - reach) * w);
                    }
                    None => {
                        let r = head + v - pull.target;
                        let vv = DMat3::from_cols(v * v.x, v * v.y, v * v.z);
                        jtj += (DMat3::from_diagonal(DVec3::splat(v.length_squared())) - vv) * pull.weight;
                        jtr += v.cross(r) * pull.weight;
                    }
                }
            }
            let scale = jtj.x_axis.x + jtj.y_axis.y + jtj.z_axis.z;
            if scale <= 0.0 || jtr.length_squared() <= 1e-30 * scale * scale {
                break;
            }
            let damped = jtj + DMat3::from_diagonal(DVec3::splat(1e-9 * scale + SUB_BASE_DAMPING * leverage));
            let mut delta = -(damped.inverse() * jtr);
            let angle = delta.length();
            if !angle.is_finite() || angle < 1e-14 {
                break;
            }
            if angle > 0.5 {
                delta *= 0.5 / angle;
            }
            rot = (from_rotation_vector(delta) * rot).normalize();
            let _ = rig;
        }
        rot
    }

    /// When one thing pulls bone `c` (its single active child, or one position goal): the pulled
    /// point in `c`'s frame and where it should go.
    fn single_pull(&self, problem: &Problem, c: usize) -> Option<(DVec3, DVec3)> {
        let topo = problem.topology();
        match (topo.pulls[c].as_slice(), topo.effector_goals[c].as_slice()) {
            ([(gc, _)], []) => Some((problem.rig().bone(*gc).rest_head, self.forward_heads[*gc])),
            ([], [g]) => {
                let g = &problem.goals()[*g];
                if g.orientation.is_some() {
                    return None;
                }
                let len = problem.rig().bone(c).length;
                Some((if g.use_tail { DVec3::new(0.0, len, 0.0) } else { DVec3::ZERO }, g.target))
            }
            _ => None,
        }
    }

    /// The rotation of a bone whose only pulled child `c` is a hinge, with its head fixed at
    /// `head`: the exact two-bone step. The law of cosines gives the hinge angle (inside the
    /// hinge's range) that puts `c`'s pull point at the target's distance from `head`; the bone
    /// then turns by the shortest arc from `current` to point that way, which keeps the swivel
    /// (and any pole's) from frame to frame. FABRIK's point steps crawl and stall at hinges
    /// near full extension and fight the joint's side; this lands exactly when the target is
    /// within the pair's reach.
    fn two_bone_step(&self, problem: &Problem, b: usize, c: usize, base: DQuat, head: DVec3, current: DQuat) -> Option<DQuat> {
        let rig = problem.rig();
        let child = rig.bone(c);
        let Swing::Hinge(hinge) = child.limit.swing else { return None };
        if child.limit.locked {
            return None;
        }
        let (point, target) = self.single_pull(problem, c)?;
        let to_target = target - head;
        let dist = to_target.length();
        if dist < EPS_LEN {
            return None;
        }
        // Pull point in the parent's frame at hinge angle θ: k + Rc R(a, θ) p.
        let k = child.rest_head;
        let v = child.rest_rotation.conjugate() * k;
        let a = hinge.axis;
        let p_par = a * a.dot(point);
        let p_perp = point - p_par;
        let (cc, cs, c0) = (v.dot(p_perp), v.dot(a.cross(p_perp)), v.dot(p_par));
        let want = 0.5 * (dist * dist - k.length_squared() - point.length_squared()) - c0;
        let reach = |t: f64| (k + child.rest_rotation * DQuat::from_axis_angle(a, t) * point).length();
        let r = cc.hypot(cs);
        let phase = cs.atan2(cc);
        let mut candidates = [hinge.min, hinge.max, phase, phase + std::f64::consts::PI, f64::NAN, f64::NAN];
        if r > 1e-12 && want.abs() <= r {
            let spread = (want / r).acos();
            candidates[4] = phase + spread;
            candidates[5] = phase - spread;
        }
        let cur_theta = crate::geometry::twist_angle(self.locals[c], a);
        let mut theta = crate::limits::clamp_angle(cur_theta, hinge.min, hinge.max);
        let mut best = f64::INFINITY;
        for t in candidates.into_iter().filter(|t| t.is_finite()) {
            let t = crate::geometry::wrap_angle(t);
            if t < hinge.min || t > hinge.max {
                continue;
            }
            let err = (reach(t) - dist).abs();
            if err < best - 1e-9 || (err <= best + 1e-9 && (t - cur_theta).abs() < (theta - cur_theta).abs()) {
                best = err;
                theta = t;
            }
        }
        let local_point = k + child.rest_rotation * DQuat::from_axis_angle(a, theta) * point;
        let dir = to_target / dist;
        // The shortest turn keeps the swivel where the bone is (poles have turned it already):
        // the hinge angle's sign already puts the joint on its side.
        let rot = turn_toward(current, local_point.normalize_or(DVec3::Y), dir);
        // Every swivel reaches equally well; if this one breaks the bone's own limit, take the
        // nearest swivel that keeps it (the limit would otherwise clamp the pair off target).
        let limit = &rig.bone(b).limit;
        if limit.locked {
            return Some(rot);
        }
        Some(best_swivel(rot, dir, |r| limit.excess(base.conjugate() * r)))
    }

    /// For a bone aimed as `want` (head at `head`, frame `base` at rest) whose only pulled child
    /// `c` has a swing or twist limit: swivels the bone about the line from its head to `c`'s
    /// head (which keeps that joint where FABRIK put it) to the nearest turn at which `c` can
    /// point at its own target within its limit (and the bone stays within its own). Without it
    /// a parent that rotates freely (a pelvis carrying a cone-limited thigh) never turns to
    /// make room for its child's limit, and the pair oscillates.
    fn make_room_for_child(&self, problem: &Problem, b: usize, c: usize, base: DQuat, head: DVec3, want: DQuat) -> DQuat {
        let rig = problem.rig();
        let child = rig.bone(c);
        if child.limit.locked || !child.limit.constrains_rotation() || matches!(child.limit.swing, Swing::Hinge(_)) {
            return want;
        }
        let Some((point, target)) = self.single_pull(problem, c) else { return want };
        let joint = head + want * child.rest_head;
        let Some(axis) = (joint - head).try_normalize() else { return want };
        let child_want = aim(self.frames.rotations[c], joint, point, target);
        let own = &rig.bone(b).limit;
        best_swivel(want, axis, |r| {
            child.limit.excess((r * child.rest_rotation).conjugate() * child_want)
                + if own.locked { 0.0 } else { own.excess(base.conjugate() * r) }
        })
    }
}

/// The FABRIK line step for a body pulled by one point: the point `local` goes to `target` and
/// the head lands on the line from `target` toward the old head (Alg. 1, lines 1.24–1.27).
#[inline]
pub(super) fn line_step(rot: DQuat, old_head: DVec3, local: DVec3, target: DVec3) -> (DQuat, DVec3) {
    let len = local.length();
    if len < EPS_LEN {
        return (rot, target);
    }
    let back = (old_head - target).try_normalize().unwrap_or(-(rot * local) / len);
    let head = target + back * len;
    (turn_toward(rot, local / len, -back), head)
}

/// The point of the sphere about `center` through `point` that is nearest to `point` and within
/// `reach` of `target`: on the circle where the sphere meets the ball about `target`, or the
/// sphere's point nearest `target` when the two do not meet.
fn nearest_reaching_point_on_sphere(center: DVec3, point: DVec3, target: DVec3, reach: f64) -> DVec3 {
    let r = (point - center).length();
    let to_target = target - center;
    let d = to_target.length();
    let Some(n) = to_target.try_normalize() else { return point };
    if d >= r + reach || d <= (r - reach).abs() {
        // Too far (or one inside the other): the sphere's point toward the target is best.
        return center + n * r;
    }
    // Circle of intersection: centre at distance h along n, radius rho.
    let h = (d * d + r * r - reach * reach) / (2.0 * d);
    let rho = (r * r - h * h).max(0.0).sqrt();
    let off = point - center;
    let side = (off - n * off.dot(n)).try_normalize().unwrap_or_else(|| n.any_orthonormal_vector());
    center + n * h + side * rho
}

/// `rot` turned about `axis` (through the bone's head) by the angle nearest zero at which
/// `cost` (a limit excess, 0 when satisfied) is smallest.
///
/// - Zero turn when `rot` already satisfies `cost` (the common case: one evaluation).
/// - Otherwise a coarse scan of the circle ([`SWIVEL_STEPS`] angles) finds the best angle
///   (among satisfying ones, the one nearest zero), so the search is global.
/// - If that angle satisfies, the satisfying turn nearest zero lies between it and its scan
///   neighbour toward zero: bisection on that interval, keeping the satisfying end
///   ([`SWIVEL_ROUNDS`] halvings, one evaluation each).
/// - If no angle satisfies, the excess is minimised on the interval of the best angle's scan
///   neighbours by Brent's method (parabolic steps where the excess is smooth, golden-section
///   steps at its kinks) to [`SWIVEL_TOL`]; the refined angle is kept only if it lowers the
///   excess (a flat excess, such as a cone the swivel cannot change, keeps the scanned angle).
fn best_swivel(rot: DQuat, axis: DVec3, cost: impl Fn(DQuat) -> f64) -> DQuat {
    const OK: f64 = 1e-12;
    let swivel = |phi: f64| (DQuat::from_axis_angle(axis, phi) * rot).normalize();
    let excess = |phi: f64| cost(swivel(phi));
    let better = |a: (f64, f64), b: (f64, f64)| a.0 < b.0 - OK || (a.0 <= OK && b.0 <= OK && a.1 < b.1);
    let mut best = (0.0, (excess(0.0), 0.0));
    if best.1.0 <= OK {
        return rot;
    }
    for i in 1..SWIVEL_STEPS {
        let phi = crate::geometry::wrap_angle(i as f64 * std::f64::consts::TAU / SWIVEL_STEPS as f64);
        let sc = (excess(phi), phi.abs());
        if better(sc, best.1) {
            best = (phi, sc);
        }
    }
    let step = std::f64::consts::TAU / SWIVEL_STEPS as f64;
    let (phi, cost_at_phi) = (best.0, best.1.0);
    if cost_at_phi <= OK {
        // `phi` is a nonzero scan angle (zero did not satisfy): move toward zero while the
        // excess stays satisfied, halving the step.
        let toward_zero = -phi.signum();
        let (mut phi, mut step) = (phi, step);
        for _ in 0..SWIVEL_ROUNDS {
            step *= 0.5;
            let cand = phi + toward_zero * step;
            if excess(cand) <= OK {
                phi = cand;
            }
        }
        return swivel(phi);
    }
    let (refined, refined_cost) = brent_minimum(excess, phi - step, phi + step, phi, cost_at_phi, SWIVEL_TOL, SWIVEL_EVALS);
    swivel(if refined_cost < cost_at_phi - OK { refined } else { phi })
}

/// Angles of [`best_swivel`]'s coarse scan of the circle.
const SWIVEL_STEPS: usize = 24;
/// Bisection halvings of [`best_swivel`] toward the satisfying turn nearest zero (the last step is
/// the scan step / 2¹⁶, about 4e-6 rad).
const SWIVEL_ROUNDS: usize = 16;
/// Angle tolerance (radians) of [`best_swivel`]'s minimisation when no turn satisfies.
const SWIVEL_TOL: f64 = 1e-6;
/// Most evaluations of [`best_swivel`]'s minimisation when no turn satisfies.
const SWIVEL_EVALS: usize = 40;

/// The minimum of `f` on `[lo, hi]` by Brent's method (parabolic interpolation safeguarded by
/// golden-section steps; Brent 1973, as in Numerical Recipes' `brent`), starting from `x0` (with
/// `f(x0) = f0`) inside the interval: `(x, f(x))` to within `tol` in `x`, after at most
/// `max_evals` evaluations. Finds a local minimum; the caller brackets it.
fn brent_minimum(f: impl Fn(f64) -> f64, lo: f64, hi: f64, x0: f64, f0: f64, tol: f64, max_evals: usize) -> (f64, f64) {
    const GOLDEN: f64 = 0.381_966_011_250_105_1; // (3 - √5) / 2
    let (mut a, mut b) = (lo, hi);
    let (mut x, mut w, mut v) = (x0, x0, x0);
    let (mut fx, mut fw, mut fv) = (f0, f0, f0);
    // `d`: the last step; `e`: the one before (a parabolic step must be less than half of it).
    let (mut d, mut e) = (0.0f64, 0.0f64);
    for _ in 0..max_evals {
        let xm = 0.5 * (a + b);
        if (x - xm).abs() <= 2.0 * tol - 0.5 * (b - a) {
            break;
        }
        let mut golden = true;
        if e.abs() > tol {
            // Parabola through (x, fx), (w, fw), (v, fv): its vertex is x + p / q.
            let r = (x - w) * (fx - fv);
            let mut q = (x - v) * (fx - fw);
            let mut p = (x - v) * q - (x - w) * r;
            q = 2.0 * (q - r);
            if q > 0.0 {
                p = -p;
            }
            q = q.abs();
            let last = e;
            e = d;
            if p.abs() < (0.5 * q * last).abs() && p > q * (a - x) && p < q * (b - x) {
                d = p / q;
                let u = x + d;
                if u - a < 2.0 * tol || b - u < 2.0 * tol {
                    d = tol.copysign(xm - x);
                }
                golden = false;
            }
        }
        if golden {
            e = if x >= xm { a - x } else { b - x };
            d = GOLDEN * e;
        }
        let u = if d.abs() >= tol { x + d } else { x + tol.copysign(d) };
        let fu = f(u);
        if fu <= fx {
            if u >= x {
                a = x;
            } else {
                b = x;
            }
            (v, fv, w, fw, x, fx) = (w, fw, x, fx, u, fu);
        } else {
            if u < x {
                a = u;
            } else {
                b = u;
            }
            if fu <= fw || w == x {
                (v, fv, w, fw) = (w, fw, u, fu);
            } else if fu <= fv || v == x || v == w {
                (v, fv) = (u, fu);
            }
        }
    }
    (x, fx)
}

/// The local rotation of a hinge bone (frame `base` at zero angle, head at `head`) that best
/// aims its point `local` at `target`: the signed angle about the hinge axis between the point
/// and the target as seen in the hinge's plane, clamped to the range.
#[inline]
fn aim_hinge(base: DQuat, hinge: crate::limits::HingeLimit, head: DVec3, local: DVec3, target: DVec3) -> DQuat {
    let axis = base * hinge.axis;
    let flat = |x: DVec3| x - axis * x.dot(axis);
    let (from, to) = (flat(base * local), flat(target - head));
    let angle = if from.length_squared() > EPS_LEN && to.length_squared() > EPS_LEN {
        from.cross(to).dot(axis).atan2(from.dot(to))
    } else {
        0.0
    };
    DQuat::from_axis_angle(hinge.axis, crate::limits::clamp_angle(angle, hinge.min, hinge.max))
}

/// The rotation about a fixed `head` nearest to `rot` that aims `local` at `target`.
#[inline]
pub(super) fn aim(rot: DQuat, head: DVec3, local: DVec3, target: DVec3) -> DQuat {
    let len = local.length();
    match (target - head).try_normalize() {
        Some(dir) if len > EPS_LEN => turn_toward(rot, local / len, dir),
        _ => rot,
    }
}



/// §3.7.2, Alg. 2 in FABRIK's forward stage: re-orients a parent (placed at `rot`, `head`) so
/// that its child `c` (at world rotation `child_rot`, its head estimated at `child_head`) has a
/// local rotation inside `c`'s limit (a locked child's, `locked_local`), keeping `c`'s estimated
/// head where it is. Returns the parent's new rotation and head.
pub(super) fn keep_child_in_limit(rig: &Rig, c: usize, (rot, head): (DQuat, DVec3), child_rot: DQuat, locked_local: DQuat, child_head: DVec3) -> (DQuat, DVec3) {
    let child = rig.bone(c);
    if !child.limit.constrains_rotation() {
        return (rot, head);
    }
    let local = rig.local_from_world(c, rot, child_rot);
    let want = if child.limit.locked { locked_local } else { child.limit.clamp(local) };
    if angle_between(want, local) < 1e-12 {
        return (rot, head);
    }
    let rot = (child_rot * (child.rest_rotation * want).conjugate()).normalize();
    (rot, child_head - rot * child.rest_head)
}

/// Fills `pulls` with what pulls bone `b` in FABRIK's forward stage (§3.7.1's sub-bases): each
/// active child's head toward its forward estimate in `forward_heads` (with the summed weight of
/// the goals it leads to), and each goal on `b` (its tail or head toward the target). Returns the
/// target orientation of the first goal on `b` that has one.
pub(super) fn gather_pulls(problem: &Problem, b: usize, forward_heads: &[DVec3], pulls: &mut Vec<Pull>) -> Option<DQuat> {
    let rig = problem.rig();
    let topo = problem.topology();
    pulls.clear();
    for &(c, w) in &topo.pulls[b] {
        pulls.push(Pull { local: rig.bone(c).rest_head, target: forward_heads[c], weight: w });
    }
    let mut orientation = None;
    for &gi in &topo.effector_goals[b] {
        let g = &problem.goals()[gi];
        let local = if g.use_tail { DVec3::new(0.0, rig.bone(b).length, 0.0) } else { DVec3::ZERO };
        pulls.push(Pull { local, target: g.target, weight: g.weight });
        orientation = orientation.or(g.orientation);
    }
    orientation
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goal::Goal;
    use crate::rig::Bone;
    use crate::rig::tests::chain;

    #[test]
    fn straight_chain_reaches_a_target_on_its_own_line() {
        // Serial path (one free chain) and tree path (a second goal makes it a tree problem).
        let target = DVec3::new(0.0, 9.5, 0.0);
        let serial = Problem::new(chain(10), vec![Goal::new(9, target)], RootMode::Pinned).unwrap();
        let mut tree_rig_bones = chain(10).bones().to_vec();
        tree_rig_bones.push(Bone { name: "side".into(), parent: Some(0), ..tree_rig_bones[1].clone() });
        let tree = Problem::new(
            Rig::new(tree_rig_bones).unwrap(),
            vec![Goal::new(9, target), Goal::new(10, DVec3::new(0.0, 2.0, 0.0)).with_chain_length(1)],
            RootMode::Pinned,
        )
        .unwrap();
        for problem in [serial, tree] {
            let s = Fabrik::new(SolveSettings::default()).solve(&problem, &Pose::rest(problem.rig().len())).unwrap();
            assert!(s.reached, "{:?} {:?}", s.stop, s.residuals);
            let f = problem.rig().forward(&s.pose);
            assert!((f.tails[9] - target).length() <= 1e-4);
        }
    }

    #[test]
    fn unreachable_target_straightens_in_one_pass() {
        let target = DVec3::new(20.0, 3.0, -1.0);
        let problem = Problem::new(chain(10), vec![Goal::new(9, target)], RootMode::Pinned).unwrap();
        let s = Fabrik::new(SolveSettings::default()).solve(&problem, &Pose::rest(10)).unwrap();
        assert_eq!((s.iterations, s.stop), (1, StopReason::OutOfReach));
        let f = problem.rig().forward(&s.pose);
        let dir = target.normalize();
        for i in 0..10 {
            assert!(((f.tails[i] - f.heads[i]).normalize() - dir).length() < 1e-12);
        }
    }
}

