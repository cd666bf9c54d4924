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
//!   placement of the last thousandths of the gap ([`finish_exactly`](finish::finish_exactly)).
//!   The steps take the least joint turn, so the bends stay close to FABRIK's own: on that
//!   benchmark the median largest joint bend is 30.1°, against 26.9° for Alg. 1 run to
//!   convergence (docs/benchmarks.md). A tracking move (a gap within
//!   [`TRACK_FRACTION`](tracking::TRACK_FRACTION) of the reach) takes the steps alone, from the
//!   warm start.
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
//!
//! The module's files, one concept each (the report is
//! `../shared/papers/fabrik-tech-report-2009.md` from the repository root):
//! - `stages.rs`: the report's steps both FABRIK solvers take: Alg. 1's line step (lines
//!   1.24–1.27), aiming a bone about its fixed head (lines 1.29–1.38), what pulls a sub-base
//!   (§3.7.1), and Alg. 2 in the forward stage (§3.7.2).
//! - `classic.rs`: [`FabrikClassic`] (`"fabrik_classic"`), the report's FABRIK as written, made of
//!   those steps alone, with the report's termination rules.
//! - This file: [`Fabrik`] (`"fabrik"`, the default), the hybrid: the reference pose, stretch,
//!   and the re-solve rounds ([`Fabrik::round`]) around the two paths below.
//! - `serial.rs`: a lone serial chain, Alg. 1 on joint positions with the Gauss–Newton finish, and
//!   the cone-limited chain solved as a free one first ([`Fabrik::solve_unbound`]).
//! - `tree.rs`: everything else, the two stages on bone frames (§3.7.1, §3.7.2), and the
//!   damped-least-squares finish they hand over to.
//! - `finish.rs`: the closed-form end game (§3.7's sphere intersection,
//!   [`finish_exactly`](finish::finish_exactly)).
//! - `tracking.rs`: small tracking moves, taken by the damped-least-squares steps alone.
//! - `sub_base.rs`: sub-base placement (reach-aware pulls, the Gauss–Newton turn).
//! - `bend.rs`: bend steering (preferred bends, wrong-way flips, the two-bone step, making room
//!   for a child's limit), on the swivel search of `swivel.rs`.
//! - `poles.rs`: Blender's pole on lone chains, and poles kept in trees.
//! - `plan.rs`: what both solvers derive from a problem's structure beyond its topology (what
//!   pulls each bone, lone chains' reaches, anchors, free tails, the serial chain), kept between
//!   solves and derived anew for a problem of another structure.

mod bend;
mod classic;
mod finish;
mod plan;
mod poles;
mod serial;
mod stages;
mod sub_base;
mod swivel;
mod tracking;
mod tree;

pub use classic::FabrikClassic;

use std::sync::Arc;

use glam::{DQuat, DVec3};

use plan::Plan;
use super::jacobian::{DlsSteps, PullBudget, goal_error};
use super::reference::{effective_reference, starts_near};
use super::{PositionSolver, Solution, SolveSettings, StopReason, begin_solve, settle};
use crate::error::Result;
use crate::geometry::Pull;
use crate::pose::{Frames, Pose};
use crate::problem::Problem;
use crate::rotations::aim_serial_chain;

/// The FABRIK solver. Keeps scratch buffers and the problem's plan between solves, so the
/// warm-started tracking path allocates only its result.
#[derive(Debug, Clone, Default)]
pub struct Fabrik {
    settings: SolveSettings,
    /// With a reference, the independent groups of goals solved one at a time.
    groups: super::GroupSolve,
    /// The plan of the problem last solved ([`Plan`]), derived anew for another structure.
    plan: Arc<Plan>,
    frames: Frames,
    locals: Vec<DQuat>,
    start_locals: Vec<DQuat>,
    /// The start as a pose, and the answer of FABRIK's reaching refined toward the reference
    /// ([`Fabrik::solve_toward_reference`]): buffers kept between solves.
    start_pose: Pose,
    refined: Pose,
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
    /// ([`finish_threshold`](finish::finish_threshold)).
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

impl PositionSolver for Fabrik {
    fn group_solve(&mut self) -> Option<&mut super::GroupSolve> {
        Some(&mut self.groups)
    }

    fn name(&self) -> &'static str {
        "fabrik"
    }

    fn settings(&self) -> &SolveSettings {
        &self.settings
    }

    /// With a reference pose ([`Problem::reference`]): the least-squares steps toward it
    /// (`DlsSteps::refine_toward` in `jacobian/toward.rs`) when every target is within reach, from the
    /// start when it is near the answer (tracking) and from the reference otherwise; where they
    /// do not reach (a local minimum), FABRIK reaches (`Fabrik::solve_reaching`) and the steps
    /// then move its answer to the pose nearest the reference. Targets out of reach keep FABRIK's
    /// straightened chains. Without a reference, FABRIK's own solve from the start (the least
    /// motion from it).
    ///
    /// Where bones may stretch ([`Problem::stretches`]), see `Fabrik::solve_stretching`.
    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        Plan::refresh(&mut self.plan, problem);
        if problem.stretches() && !problem.goals().is_empty() {
            return self.solve_stretching(problem, start);
        }
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        if problem.goals().is_empty() || !problem.has_reference() {
            // Without a reference, the least motion from the start: FABRIK's own solve.
            return self.solve_reaching(problem, start, settings);
        }
        // (The start's pose in a buffer kept between solves, so that tracking allocates nothing
        // but its answer.)
        let mut start_pose = std::mem::take(&mut self.start_pose);
        start_pose.rotations.clone_from(&self.start_locals);
        start_pose.root_translation = start.root_translation;
        start_pose.scales.clone_from(&start.scales);
        let solved = self.solve_toward_reference(problem, &start_pose, settings);
        self.start_pose = start_pose;
        solved
    }
}

impl Fabrik {
    /// [`PositionSolver::solve_positions`] of a problem with goals and a reference, from
    /// `start_pose` (the start's rotations inside every limit, `self.start_locals`).
    fn solve_toward_reference(&mut self, problem: &Problem, start_pose: &Pose, settings: SolveSettings) -> Result<Solution> {
        let rig = problem.rig();
        effective_reference(problem, start_pose, &mut self.reference, &mut self.reference_frames);
        rig.forward_into(start_pose, &mut self.frames);
        let tol = settings.tolerance;
        let mut spent = 0;
        if self.unmet_if_all_within_reach(problem, tol).is_some() {
            // From the start when it is near the answer (tracking), else from the reference.
            let near = starts_near(problem, &self.frames);
            // (In a buffer kept between solves: only an answer is allocated.)
            let mut pose = std::mem::take(&mut self.refined);
            let frames = if near {
                pose.clone_from(start_pose);
                &self.frames
            } else {
                pose.clone_from(&self.reference);
                &self.reference_frames
            };
            let out = self.dls.refine_toward(problem, &mut pose, Some(frames), &self.reference, tol, PullBudget::halves(settings.max_iterations));
            if out.reached {
                settle(problem, &self.start_locals, &mut pose.rotations);
                let answer = pose.clone();
                self.refined = pose;
                return Ok(Solution::of_solved(problem, answer, self.dls.frames(), out.iterations, StopReason::Converged, tol));
            }
            self.refined = pose;
            spent = out.iterations;
            if spent >= settings.max_iterations {
                // Nothing left for FABRIK's reaching: the steps' pose, as far as they got.
                let mut answer = self.refined.clone();
                settle(problem, &self.start_locals, &mut answer.rotations);
                return Ok(Solution::of_solved(problem, answer, self.dls.frames(), spent, StopReason::IterationLimit, tol));
            }
        }
        let left = SolveSettings { max_iterations: (settings.max_iterations - spent).max(1), ..settings };
        let mut reaching = self.solve_reaching(problem, start_pose, left)?;
        reaching.iterations += spent;
        let left = settings.max_iterations.saturating_sub(reaching.iterations);
        if reaching.reached && left > 0 {
            // (In a buffer kept between solves; the answer goes into `reaching`'s own.)
            let mut pose = std::mem::take(&mut self.refined);
            pose.clone_from(&reaching.pose);
            let out = self.dls.refine_toward(problem, &mut pose, None, &self.reference, tol, PullBudget::only(left));
            if out.reached {
                // (The steps keep each quaternion near the one they started from: FABRIK's, which
                // `settle` put in its start's hemisphere; again, for the sign.)
                settle(problem, &self.start_locals, &mut pose.rotations);
                std::mem::swap(&mut reaching.pose, &mut pose);
                let iterations = reaching.iterations + out.iterations;
                reaching.solved_again(problem, self.dls.frames(), iterations, StopReason::Converged, tol);
            }
            self.refined = pose;
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
        if problem.has_reference() {
            let start_pose = Pose { rotations: self.start_locals.clone(), root_translation: start.root_translation, scales };
            effective_reference(problem, &start_pose, &mut self.reference, &mut self.reference_frames);
            rig.forward_into(&start_pose, &mut self.frames);
            // From the start when it is near the answer (tracking), else from the reference.
            let near = starts_near(problem, &self.frames);
            let (mut pose, frames) = if near { (start_pose, &self.frames) } else { (self.reference.clone(), &self.reference_frames) };
            let out = self.dls.refine_toward(problem, &mut pose, Some(frames), &self.reference, tol, PullBudget::halves(settings.max_iterations));
            spent = out.iterations;
            settle(problem, &self.start_locals, &mut pose.rotations);
            let sol = Solution::of_solved(problem, pose, self.dls.frames(), spent, stop(out.reached, spent), tol);
            if sol.reached || spent >= settings.max_iterations {
                // (Reached, or nothing left for FABRIK's reaching.)
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
        if (problem.has_reference() || !best.reached) && left > 0 {
            let mut pose = best.pose.clone();
            let out = if problem.has_reference() {
                self.dls.refine_toward(problem, &mut pose, None, &self.reference, tol, PullBudget::only(left))
            } else {
                self.dls.refine(problem, &mut pose, None, tol, left)
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

        let plan = Arc::clone(&self.plan);
        let serial = plan.serial_chain.as_ref().filter(|_| goals[0].orientation.is_none());
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

/// The sum of a solution's squared goal distances (how [`Fabrik::solve_stretching`] compares
/// answers that miss).
fn squared_residual(s: &Solution) -> f64 {
    s.residuals.iter().map(|r| r * r).sum()
}

impl Fabrik {
    /// One round of the general path from `pose` (whose local rotations are `self.start_locals`
    /// and whose forward kinematics is `self.frames`): FABRIK, then the damped-least-squares
    /// finish where it applies.
    ///
    /// With `guarded`, a round that does not reach every goal and does not bring the goals
    /// closer than its start did by [`IMPROVE`] returns its start (when that is within the
    /// limits), stalled; the flag says so. So no solve ends farther from its goals than it
    /// started; and since [`crate::Solver::solve`] solves a stalled result again until a round keeps its
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Solver;
    use crate::goal::Goal;
    use crate::problem::RootMode;
    use crate::rig::tests::chain;
    use crate::rig::{Bone, Rig};

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
}
