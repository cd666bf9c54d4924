//! Joint-space damped least squares steps (the Jacobian family; Nilsson's thesis §2.4.3 and
//! Buss 2004, "DLS") on the same [`Problem`] as every solver: the [`super::Dls`] solver runs
//! them from the start pose, and [`super::Fabrik`] hands over to them for small tracking moves
//! and when its point steps stall or crawl short of goals that limits and sub-bases make hard.
//!
//! The unknowns are small turns of every bone some goal moves: three world axes about the bone's
//! head (one, the hinge axis, for a hinge; two across a bone whose twist is locked; none for a
//! locked bone: the joint model gives them, [`crate::limits::Freedom::step_axes`], as Blender's
//! `IK_QSegment` kinds give theirs), each scaled by `1 − stiffness`, plus the root's translation when it is free. A bone whose stiffness differs
//! between its local axes (Blender's `ik_stiffness_x/y/z`) turns about its own local X, Y and Z
//! instead, each scaled by its own `1 − stiffness` (Blender's `IK_QSegment::SetWeight`). The residual stacks, per goal,
//! `√weight · (target − effector)` and, for an orientation goal, `√weight · reach ·` the rotation
//! vector from the effector's frame to the target frame (`reach` is the goal chain's length, so
//! a radian counts as far as the chain reaches), and for a pole on a chain that shares bones with
//! other goals, `√weight · reach ·` its swivel from the pole ([`pole_swivel`]: Sinew keeps poles
//! in trees, where Blender drops them). A step solves
//! `Δθ = Jᵀ (J Jᵀ + λ² I)⁻¹ r` (the Gram matrix is small: three rows per goal), and λ adapts as
//! Levenberg–Marquardt's: halved after a step that lowers `|r|²`, multiplied by four (and the
//! step retried) after one that does not. The [`super::Dls`] solver
//! ([`DlsSteps::set_out_of_reach_damping`]; FABRIK's finish does not) also keeps λ² above a floor proportional to the
//! residual of goals whose targets lie beyond their chains' reach ([`out_of_reach_curvature`]),
//! so that it settles on them without zigzagging; FABRIK's finish keeps the plain rule.
//!
//! `J` is never formed. A goal's rows move only with the bones on its path, and a bone's three
//! unknowns act on them as one cross product: turning about world axis `a` moves an effector at
//! lever `d` from the head by `a × d`. So each bone keeps, per goal it moves, its lever; `J Jᵀ`
//! is a sum of 3 × 3 blocks per pair of those goals (in closed form for the unprojected world
//! axes: `Σ_c (e_c × d)(e_c × d')ᵀ = (d·d') I − d' dᵀ`), `Jᵀ y` a cross product per goal, and
//! the small dense system is solved by a Cholesky factorisation written out here (at three to
//! thirty rows, cheaper than a general library's).
//!
//! Limits are kept at every step: each bone's new local rotation is clamped to its limit, as in
//! FABRIK (§3.7.2). A clamped bone would otherwise keep pushing into its limit while the step
//! assumes it moved; so the direction the clamp took away is blocked (projected out of that
//! bone's axes) for the following steps, and the other joints take up the rest (the "clamping
//! loop" of Baerlocher & Boulic, for swing cones), until the goals pull the bone back inside.
//! Toward a reference pose the blocked bones are the active set of a bound-constrained
//! least-distance step ([`DlsSteps::refine_toward`]).

use glam::{DMat3, DVec3};

use glam::DQuat;

use super::gram::GramBlocks;
use crate::geometry::{from_rotation_vector, renormalize, rotation_vector, swing_twist_y, turns_more_than};
use crate::limits::{Freedom, JointLimit, LimitState};
use crate::pose::{Frames, MAX_SCALE, MIN_SCALE, Pose};
use crate::problem::{Problem, RootMode};

mod chain_step;
mod explicit_api;
mod residual;
mod toward;

pub(crate) use chain_step::chain_position_step;
pub(crate) use residual::goal_error;
pub(super) use residual::out_of_reach_curvature;
use residual::{POLE_TOLERANCE, SWIVEL_STEP, evaluate, pole_swivel, pole_top, residual};
pub(crate) use toward::PullBudget;
use toward::{
    AT_BOUND, DISTANCE_ROUND_OFF, FINISH_FRACTION, FINISH_ITERATIONS, MOMENTUM, PULL_CORRECTIONS, PULL_GROW, PULL_MAX, PULL_MIN, PULL_SHRINK, RELAX_BAND, RELAX_BAND_REACH, RELAX_ITERATIONS, SETTLED,
    SETTLED_NEAR,
};

/// Levenberg–Marquardt damping at the start, relative to the Gram matrix's largest diagonal.
const DAMPING_START: f64 = 1e-4;
/// Smallest relative damping (keeps the Gram matrix positive definite near singular poses).
const DAMPING_MIN: f64 = 1e-9;
/// Relative damping of the steps toward the reference: their projection onto what the goals
/// leave free is as exact as the factorisation allows.
const DAMPING_PROJECTION: f64 = 1e-12;
/// Relative damping past which no step lowers the error: a local minimum.
const DAMPING_MAX: f64 = 1e6;
/// With [`DlsSteps::set_out_of_reach_damping`]: λ² never falls below this times
/// [`out_of_reach_curvature`], `√Σ (|r_g| · reach_g)²` over the goals whose targets lie beyond
/// their chains' reach. 0.5 measured: the least of 0.25, 0.35, 0.4, 0.5 and 1 that
/// left no zigzag on the settling cases of `tests/jacobian_methods.rs` and
/// `examples/compare_methods.rs` (0.35 and 0.4 still zigzagged toward a target straight below the
/// report's chain).
const OUT_OF_REACH_DAMPING: f64 = 0.5;
/// While that floor is in force, a kept step that lowered `|r|²` by less than this fraction of
/// what the linear model predicted doubles λ² (Moré's trust-region rule, ρ < 1/4): with the floor
/// alone, a bend of the straightened chain could flip sign at every step and shrink by 0.1% a step
/// (a target of the report's unreachable set took 5611 iterations).
const POOR_RATIO: f64 = 0.25;
/// The clamp moved a bone by more than this (radians): its direction is blocked.
const CLAMPED: f64 = 1e-9;
/// `tan(CLAMPED / 2)` (to round-off: the tangent's next term is 1e-28 of it), for
/// [`turns_more_than`].
const CLAMPED_TAN_HALF: f64 = 0.5 * CLAMPED;
/// The least gain a short bone gets toward a reference (see [`DlsSteps::collect_joints`]).
const SHORT_BONE_GAIN: f64 = 0.1;
/// The largest turn (radians) of a bone in one step toward the goals.
const MAX_TURN: f64 = 0.5;

/// The unknowns of one bone (a turn about up to three world axes through its head, scaled by
/// `gain`), of the root's translation (`bone: None`, the three world axes), or of a stretchy
/// bone's length (`stretch`: one unknown).
#[derive(Debug, Clone, Copy)]
struct Joint {
    bone: Option<usize>,
    /// For a bone's length (see [`stretch_gain`]): `k`, its tree's extent over its rest length,
    /// so that a step `x` on this unknown changes the bone's length scale by `gain · k · x` (its
    /// length by `gain · x` times the tree's extent, as Blender's IK measures a stretch in a tree
    /// scaled to unit size). `None` for a turn or the root's translation.
    stretch: Option<f64>,
    /// `1 − stiffness` (the largest of the bone's axes', for per-axis stiffness).
    gain: f64,
    /// Per-axis stiffness: each local axis's `1 − stiffness` over `gain` (X, Y, Z); `None` when
    /// the three are equal.
    ratios: Option<[f64; 3]>,
    /// Per unknown axis: its length's share of the per-axis gain (the axes of a bone with
    /// per-axis stiffness are scaled by it; 1 otherwise).
    scales: [f64; 3],
    /// The bone's unknown axes at the current pose (world, `count` of them), as its joint gives
    /// them ([`Freedom::step_axes`]): its hinge axis, its swing axes, or the world axes with the
    /// blocked direction projected out.
    axes: [DVec3; 3],
    count: usize,
    /// `axes` are exactly the world axes (nothing blocked), so the closed forms apply.
    world_axes: bool,
}

/// How a joint moves one goal's rows at the current pose: the position rows from `row` by
/// `a × lever` per unknown axis `a` (`lever` = gain · √weight · (effector − head)), and for an
/// orientation goal the three rows after them by `spin · a`. For the root's translation the
/// position rows move by `lever.x` along each axis.
#[derive(Debug, Clone, Copy)]
struct Link {
    row: usize,
    lever: DVec3,
    spin: Option<f64>,
}

/// How a joint moves a tree pole's row: by `per_axis[c]` per unknown `c`; `turn` is
/// `Σ_c per_axis[c] · axes[c]` (for the root's translation, `per_axis` itself).
#[derive(Debug, Clone, Copy)]
struct PoleLink {
    row: usize,
    per_axis: DVec3,
    turn: DVec3,
}

/// Scratch space and state of a damped-least-squares solve, reused between solves.
#[derive(Debug, Clone, Default)]
pub(crate) struct DlsSteps {
    joints: Vec<Joint>,
    /// Per joint `j`, the goals it moves: `reaches[reach_start[j]..reach_start[j + 1]]`.
    reaches: Vec<usize>,
    reach_start: Vec<usize>,
    /// Scratch for them: per bone its joint (`usize::MAX`: none) and the joint of its length,
    /// per joint a fill position.
    joint_of_bone: Vec<usize>,
    stretch_of_bone: Vec<usize>,
    cursor: Vec<usize>,
    /// Aligned with `reaches`: the links at the current pose.
    links: Vec<Link>,
    /// Per joint `j`, its links to tree poles: `pole_links[pole_start[j]..pole_start[j + 1]]`.
    pole_links: Vec<PoleLink>,
    pole_start: Vec<usize>,
    /// Per bone: the direction a clamp blocked (world, unit), if any.
    blocked: Vec<Option<DVec3>>,
    /// Whether the last step applied had some bone clamped to its limit (its blocked direction
    /// set): the active set of the limits changed.
    last_step_clamped: bool,
    /// Goals whose pole is kept in a tree (see [`pole_swivel`]): one residual row each.
    tree_poles: Vec<usize>,
    /// Per goal: its first residual row.
    goal_rows: Vec<usize>,
    /// `J Jᵀ + λ² I`, a block per group of coupled goals ([`GramBlocks`]); only its lower
    /// triangle is read (then holds its Cholesky factor).
    gram: GramBlocks,
    /// The right-hand side, then the solution `y` of the damped system.
    rhs: Vec<f64>,
    /// The pose being refined: its frames and residual.
    frames: Frames,
    residual: Vec<f64>,
    /// A step's candidate, evaluated beside them and swapped in when it is accepted (so a
    /// rejected step leaves the pose's frames and residual as they were).
    trial: Pose,
    trial_frames: Frames,
    trial_residual: Vec<f64>,
    /// Per bone: the freedom the steps give it, its joint's ([`crate::JointLimit::freedom`]),
    /// which decides its unknowns ([`Freedom::step_axes`]); a bone that swings only keeps the
    /// twist in `kept_twist`.
    freedom: Vec<Freedom>,
    /// Per bone: the twist (about local +Y) a bone that swings only keeps: the reference's, or
    /// the start's.
    kept_twist: Vec<DQuat>,
    /// The reference pose the steps are pulled toward ([`DlsSteps::refine_toward`]).
    reference: Option<Pose>,
    /// The reference's buffer while the steps have none (so that tracking allocates nothing).
    spare_reference: Pose,
    /// Per joint, at the current pose: the world turn (translation, for the root) toward the
    /// reference within the joint's axes, and its coordinates on them divided by the gain.
    toward: Vec<(DVec3, [f64; 3])>,
    /// Per joint, the local rotation vector from the pose to the reference that
    /// [`DlsSteps::reference_distance`] measured on the pose it was last given (`None` for a
    /// joint it measured otherwise), and the same for the current pose, valid while
    /// `pose_turns_valid`: [`DlsSteps::turns_toward_reference`] reads it rather than taking the
    /// same arctangents again for a pull the steps kept.
    trial_turns: Vec<Option<DVec3>>,
    pose_turns: Vec<Option<DVec3>>,
    pose_turns_valid: bool,
    /// The step toward the reference after its second-order correction.
    corrected: Pose,
    /// The last kept pull's direction (momentum), per joint as `toward`.
    momentum: Vec<(DVec3, [f64; 3])>,
    /// Per joint, how many axes it had when `momentum` was kept (its coordinates mean nothing
    /// on a different set of axes).
    momentum_axes: Vec<usize>,
    /// Per joint, at the current pose: the component of its turn toward the reference along its
    /// bone's blocked direction, before the projection takes it out (0 where nothing is blocked):
    /// with the goals' part of a step, the sign of the bound's multiplier.
    pushing: Vec<f64>,
    /// Per bone: its blocked direction before the pull being tried (restored if it is not kept).
    was_blocked: Vec<Option<DVec3>>,
    /// The steps are pulling toward the reference: a hinge at its bound is held there.
    pulling: bool,
    /// While the steps toward the reference correct a pull, blocked directions are held (not
    /// released by the correction alone).
    holding: bool,
    /// The pose's frames and residual, kept aside while a step is relinearized at its trial.
    spare_frames: Frames,
    spare_residual: Vec<f64>,
    /// How near their limit the steps toward the reference stop ([`SETTLED`] or
    /// [`SETTLED_NEAR`]).
    settled: f64,
    /// Whether stretchy bones keep their lengths ([`DlsSteps::set_rigid`]).
    rigid: bool,
    /// Whether λ² has a floor for goals out of reach ([`DlsSteps::set_out_of_reach_damping`]).
    out_of_reach_damping: bool,
    /// Per goal: whether its target lies beyond its chain's reach ([`DlsSteps::mark_beyond_reach`]).
    beyond: Vec<bool>,
    /// The last pose a pull toward the reference kept with every goal met (see
    /// [`DlsSteps::refine_toward`]).
    met: Pose,
    /// The pose a restarted pull started from, kept should the restart not meet the goals (or
    /// end further from them than it without finishing them).
    before_restart: Pose,
}

/// What a damped-least-squares run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct DlsOutcome {
    /// Steps tried (accepted or not).
    pub iterations: u32,
    /// Whether every goal ended within `tolerance` (and every tree pole within
    /// [`POLE_TOLERANCE`]).
    pub reached: bool,
}

impl DlsSteps {
    /// With `rigid`, the steps keep every bone's length (the stretchy bones' lengths are not
    /// unknowns): FABRIK's own passes use them so, and stretch only in their finish.
    pub(crate) fn set_rigid(&mut self, rigid: bool) {
        self.rigid = rigid;
    }

    /// With `on`, the steps toward goals whose targets lie beyond their chains' reach are damped
    /// by at least [`OUT_OF_REACH_DAMPING`] times [`out_of_reach_curvature`], so that the chains
    /// settle on them without zigzagging (the `dls` solver; FABRIK's finish keeps the plain
    /// Levenberg–Marquardt λ).
    pub(crate) fn set_out_of_reach_damping(&mut self, on: bool) {
        self.out_of_reach_damping = on;
    }

    /// Refines `pose` (inside every limit; locked bones keep their rotations in it) toward the
    /// goals for at most `max_iterations` steps; `pose` only ever gets better (lower weighted
    /// squared residual). Stops when every goal is within `tolerance`, or at a local
    /// minimum (no step of any damping lowers the error). `fk` is the forward kinematics of
    /// `pose` when the caller has it; [`DlsSteps::frames`] are that of the refined pose.
    pub(crate) fn refine(&mut self, problem: &Problem, pose: &mut Pose, fk: Option<&Frames>, tolerance: f64, max_iterations: u32) -> DlsOutcome {
        self.drop_reference();
        self.run(problem, pose, fk, tolerance, max_iterations, None)
    }

    /// Sets a run up at `pose` (inside every limit; `fk` its forward kinematics when the caller
    /// has it): the joints and residual rows of `problem`, the twist each swinging bone keeps
    /// (the reference's, or `pose`'s), nothing blocked, the frames and residual of `pose`.
    /// Returns the number of residual rows and `|r|²`.
    fn begin(&mut self, problem: &Problem, pose: &mut Pose, fk: Option<&Frames>) -> (usize, f64) {
        let rig = problem.rig();
        self.collect_joints(problem);
        if !problem.topology().stretchy.is_empty() && !self.rigid && pose.scales.is_empty() {
            // Lengths are unknowns: one scale per bone (the same forward kinematics).
            pose.scales.resize(rig.len(), 1.0);
        }
        // The twist each bone keeps: its reference's, or its start's.
        let twists = self.reference.as_ref().map_or(&pose.rotations, |r| &r.rotations);
        self.kept_twist.clear();
        self.kept_twist.extend(twists.iter().map(|&q| swing_twist_y(q).1));
        let m = self.goal_rows.last().map_or(0, |&r| r + problem.goals().last().map_or(0, |g| if g.orientation.is_some() { 6 } else { 3 }))
            + self.tree_poles.len();
        self.blocked.clear();
        self.blocked.resize(rig.len(), None);
        self.holding = false;
        self.pulling = false;
        for v in [&mut self.residual, &mut self.trial_residual, &mut self.rhs, &mut self.spare_residual] {
            v.resize(m, 0.0);
        }
        self.layout_gram(problem, m);
        let error = match fk {
            Some(fk) => {
                // The caller's frames must be `Rig::forward` of `pose` to the bit (the solution's
                // residuals are reported from them); checked in debug builds, in scratch space.
                #[cfg(debug_assertions)]
                {
                    rig.forward_into(pose, &mut self.trial_frames);
                    debug_assert!(self.trial_frames == *fk, "the frames passed to refine are not the forward kinematics of the pose");
                }
                self.frames.copy_from(fk);
                residual(problem, &self.tree_poles, &self.frames, &mut self.residual)
            }
            None => evaluate(problem, &self.tree_poles, pose, &mut self.frames, &mut self.residual),
        };
        (m, error)
    }

    fn run(&mut self, problem: &Problem, pose: &mut Pose, fk: Option<&Frames>, tolerance: f64, max_iterations: u32, settled: Option<f64>) -> DlsOutcome {
        let (m, mut error) = self.begin(problem, pose, fk);
        if self.joints.is_empty() || m == 0 {
            return DlsOutcome { iterations: 0, reached: self.all_reached(problem, tolerance) };
        }
        // Where the steps toward the reference stop (unless given): nearer their limit from a
        // cold start.
        self.settled = settled.unwrap_or_else(|| if super::reference::starts_near(problem, &self.frames) { SETTLED_NEAR } else { SETTLED });
        // Toward the reference while `relaxing`; then plain steps finish the goals.
        let mut relaxing = self.reference.is_some();
        // While relaxing, goals within this error count as met (a step's chord correction
        // leaves them a little off; the finishing steps close that quadratically).
        let reach = problem.topology().chain_reach.iter().copied().fold(0.0, f64::max);
        let band = (RELAX_BAND * tolerance).max(RELAX_BAND_REACH * reach).powi(2);
        let mut distance = if relaxing { self.reference_distance(problem, pose) } else { 0.0 };
        // (The rotation vectors `reference_distance` measured are those of `pose`.)
        std::mem::swap(&mut self.pose_turns, &mut self.trial_turns);
        self.pose_turns_valid = relaxing;
        // Toward a reference the plain steps that finish the goals close them to a fraction of
        // the tolerance ([`FINISH_FRACTION`]); the least-motion path stops at the tolerance.
        let finish_tolerance = if relaxing { tolerance * FINISH_FRACTION } else { tolerance };
        let mut pull = 1.0;
        let mut have_momentum = false;
        let mut was_pulling = false;
        let mut damping_before_pull = DAMPING_START;
        let mut pulled = 0;
        let mut last_turn = 0.0f64;
        let mut damping = DAMPING_START;
        // How closely the pose in `self.met` meets the goals: 0 (none kept), 1 (within the
        // tolerance), 2 (within the finish's fraction of it).
        let met_level = |steps: &Self| u8::from(steps.all_reached(problem, tolerance)) + u8::from(steps.all_reached(problem, finish_tolerance));
        let mut met = 0;
        let mut it = 0;
        while it < max_iterations {
            if !relaxing && self.all_reached(problem, finish_tolerance) {
                break;
            }
            it += 1;
            if relaxing && max_iterations - it < FINISH_ITERATIONS {
                // Out of steps toward the reference: the last few finish the goals, so that a
                // short budget still ends on them.
                relaxing = false;
            }
            if relaxing && pulled >= RELAX_ITERATIONS && self.blocked.iter().any(Option::is_some) {
                // Limits that bind can keep the pull and the goals' corrections trading off;
                // past this many steps the pose is near enough the reference: finish the goals.
                relaxing = false;
            }
            // Far from the goals the steps only close them (the least joint motion); near
            // them (within the band) they also move toward the reference.
            let pulling = relaxing && error <= band;
            self.pulling = pulling;
            if pulling {
                self.refresh_blocked(problem, pose);
            }
            // `self.frames` and `self.residual` are those of `pose`.
            self.linearize(problem);
            self.gram_into();
            let scale = (0..m).map(|i| self.gram.get(i, i)).fold(0.0, f64::max);
            if scale <= 0.0 {
                if pulling {
                    // Every joint is held at a bound (hinges at theirs have no axis while the
                    // steps pull): nothing is left to pull; plain steps finish the goals.
                    relaxing = false;
                    continue;
                }
                break;
            }
            // Out of reach, λ² has a floor ([`out_of_reach_curvature`]); not while pulling toward
            // the reference, which wants the system barely damped.
            let floor = if self.out_of_reach_damping && !(relaxing && error <= band) {
                self.mark_beyond_reach(problem);
                OUT_OF_REACH_DAMPING * out_of_reach_curvature(problem, &self.beyond, &self.goal_rows, &self.residual)
            } else {
                0.0
            };
            if was_pulling && !pulling {
                // The pull ended (or the goals left the band): the plain steps start from the
                // damping they had before it, not from the projection's, which a step that the
                // goals' curvature spoils would have to climb back from by rejections (a factor
                // of four each): on a paper humanoid solve whose pull ended at the band's edge,
                // 11 of its last 30 steps.
                damping = damping.max(damping_before_pull);
            }
            let lambda2 = if floor > damping * scale { floor } else { damping * scale };
            for i in 0..m {
                self.gram.add(i, i, lambda2);
            }
            self.rhs.copy_from_slice(&self.residual);
            pulled += u32::from(pulling);
            if pulling && !was_pulling {
                // The projection onto what the goals leave free wants `J Jᵀ` barely damped:
                // damping leaves part of the pull in the goals' directions.
                damping_before_pull = damping;
                damping = DAMPING_PROJECTION;
            }
            was_pulling = pulling;
            let pull_now = if pulling { pull } else { 0.0 };
            if pulling {
                self.turns_toward_reference(problem, pose);
                if have_momentum && self.momentum.len() == self.toward.len() {
                    for (((t, m), joint), &axes_then) in self.toward.iter_mut().zip(&self.momentum).zip(&self.joints).zip(&self.momentum_axes) {
                        if joint.count != axes_then {
                            // Blocked or released since (a swing-only bone's two axes became the
                            // one its bound leaves, or back): its old coordinates would push
                            // along other axes; it keeps no momentum.
                            continue;
                        }
                        // On the joint's axes now (its coordinates on them): a bone blocked since
                        // pushes no more into its bound, and a hinge turns about its axis only.
                        let turn = if joint.world_axes || joint.bone.is_none() || joint.stretch.is_some() {
                            m.0
                        } else {
                            (0..joint.count).map(|c| joint.axes[c] * (m.1[c] * joint.gain)).sum()
                        };
                        t.0 += turn * MOMENTUM;
                        for c in 0..3 {
                            t.1[c] += m.1[c] * MOMENTUM;
                        }
                    }
                }
                self.subtract_j_toward(pull_now);
            }
            if !self.gram.factor_solve(&mut self.rhs) {
                break;
            }
            if pulling {
                self.was_blocked.clone_from(&self.blocked);
            }
            let mut trial = std::mem::take(&mut self.trial);
            trial.clone_from(pose);
            let mut largest_turn = self.apply_step(problem, pose, &mut trial, pull_now, false);
            let mut shortened = 1.0;
            if largest_turn > MAX_TURN {
                // A long step leaves the linearisation far behind and wanders from the least
                // motion's path: shortened to [`MAX_TURN`] (as Blender's IK clamps its steps).
                let k = MAX_TURN / largest_turn;
                shortened = k;
                self.rhs.iter_mut().for_each(|y| *y *= k);
                if pulling {
                    // The long step's clamps and releases do not hold the shorter one.
                    self.blocked.clone_from(&self.was_blocked);
                }
                largest_turn = self.apply_step(problem, pose, &mut trial, pull_now * k, false);
            }
            let mut trial_error = evaluate(problem, &self.tree_poles, &trial, &mut self.trial_frames, &mut self.trial_residual);
            // Out of reach: whether the step lowered `|r|²` by much less than the linear model
            // predicted (`r − J Δθ = (1 − k) r + λ² y` for the step `k y` solved with λ²).
            let poor = floor > 0.0 && {
                let left: f64 = (0..m).map(|i| ((1.0 - shortened) * self.residual[i] + lambda2 * self.rhs[i]).powi(2)).sum();
                error - trial_error < POOR_RATIO * (error - left)
            };
            if pulling {
                // Second-order correction: the step toward the reference leaves the goals by its
                // square; one chord step (the same factor, the residual where the step landed)
                // brings them back before the step is judged.
                let fresh = self.blocked.iter().zip(&self.was_blocked).any(|(now, was)| now.is_some() && was.is_none());
                let mut corrected = std::mem::take(&mut self.corrected);
                corrected.clone_from(&trial);
                self.holding = true;
                let mut corrections = 0;
                loop {
                    let landed = trial_error;
                    if fresh || corrections > 0 {
                        // A limit took a bone that was free when the step was solved (the chord
                        // step would still count on its motion), or the chord step left the goals
                        // outside the band: the correction is solved again where the step landed,
                        // with any bone a limit took on its bound and held there (the active
                        // set's step, Baerlocher & Boulic's clamping loop), so the other bones
                        // take up what it could not do.
                        trial_error = self.relinearized_correction(problem, &trial, &mut corrected, m, damping);
                    } else {
                        self.rhs.copy_from_slice(&self.trial_residual);
                        self.gram.substitute(&mut self.rhs);
                        self.apply_step(problem, &trial, &mut corrected, 0.0, true);
                        trial_error = evaluate(problem, &self.tree_poles, &corrected, &mut self.trial_frames, &mut self.trial_residual);
                    }
                    corrections += 1;
                    let closing = trial_error < 0.25 * landed;
                    if trial_error <= band || corrections >= PULL_CORRECTIONS || !closing {
                        break;
                    }
                    // Still outside the band but closing (Gauss–Newton's quadratic rate): once
                    // more from where the correction landed.
                    std::mem::swap(&mut trial, &mut corrected);
                    corrected.clone_from(&trial);
                }
                self.holding = false;
                std::mem::swap(&mut trial, &mut corrected);
                self.corrected = corrected;
            }
            let trial_distance = if relaxing { self.reference_distance(problem, &trial) } else { 0.0 };
            if pulling {
                // While pulling, a step's size is the turn it makes, clamped and corrected, not
                // the one it asked for: a bone the pull pushes against a bound it is released
                // from asks for the same turn at every step, the clamp takes it back, and the
                // steps settled only at the pull's step cap (a real-motion leg whose thigh sat at
                // its cone and twist bounds at once: 0.139 rad asked at every step for 35 steps,
                // 4e-6 rad made and shrinking). Where that cap or the budget ends a run is a
                // choice round-off flips: measured so, 10 -> 7 of the 2224 real-motion solves the
                // add-on exports moved by more than 1e-6 rad by a 1e-12 m move of their targets.
                largest_turn = self.largest_change(pose, &trial);
            }
            // Within the band a step is kept when it comes nearer the reference, or closes most
            // of the goals' gap (the corrections the pull's steps leave).
            // (Nearer unless farther by more than the distance's own round-off.)
            let nearer = trial_distance < distance * (1.0 + DISTANCE_ROUND_OFF);
            let better = if pulling { trial_error <= band && (nearer || (trial_error < 0.25 * error && error > 1e-12 * band)) } else { trial_error < error };
            if better {
                std::mem::swap(pose, &mut trial);
                std::mem::swap(&mut self.frames, &mut self.trial_frames);
                std::mem::swap(&mut self.residual, &mut self.trial_residual);
                // (While relaxing, `reference_distance` measured the kept pose.)
                std::mem::swap(&mut self.pose_turns, &mut self.trial_turns);
                self.pose_turns_valid = relaxing;
                if pulling {
                    // (The latest such pose: kept pulls come nearer the reference, but for those
                    // kept for closing most of the goals' gap.)
                    let level = met_level(self);
                    if level >= met.max(1) {
                        self.met.clone_from(pose);
                        met = level;
                    }
                }
            }
            self.trial = trial;
            // The steps converge linearly: with `rate` the ratio of this step to the last, the
            // fixed point is about `turn · rate / (1 − rate)` away.
            let rate = if last_turn > 0.0 { (largest_turn / last_turn).min(0.99) } else { 0.5 };
            // A pull kept only for closing most of the goals' gap, that came no nearer the
            // reference: its direction is no way toward it (it gives no momentum), and the next
            // pull is shorter, not longer. Lengthened, the pulls cycled: one pulled nearer the
            // reference while leaving the goals a little off (within the band), the next closed
            // them by moving away again (kept for closing the gap), the one after overshot
            // (rejected), and so on to the pull's step cap, in both runs of a solve.
            let receded = better && pulling && !nearer;
            if better && pulling && !receded {
                last_turn = largest_turn;
                self.momentum.clone_from(&self.toward);
                self.momentum_axes.clear();
                self.momentum_axes.extend(self.joints.iter().map(|j| j.count));
                have_momentum = true;
            } else if pulling {
                have_momentum = false;
            }
            if pulling && largest_turn <= self.settled && largest_turn * rate / (1.0 - rate) <= self.settled {
                // Near the goals, and the steps toward the reference are within round-off of
                // where they converge: settled; plain steps finish the goals.
                relaxing = false;
                if better {
                    error = trial_error;
                } else {
                    // (The bounds the rejected step met do not hold `pose`.)
                    self.blocked.clone_from(&self.was_blocked);
                }
                continue;
            }
            if better {
                let gain = (error - trial_error) / error.max(f64::MIN_POSITIVE);
                let stalled = !(relaxing && trial_error <= band) && gain < 1e-9;
                error = trial_error;
                distance = trial_distance;
                damping = if poor {
                    // Out of reach, a step that fell far short of its prediction: the model's
                    // curvature is too low there (the step overshot); damp twice as hard.
                    2.0 * lambda2 / scale
                } else {
                    (damping * 0.5).max(if pulling { DAMPING_PROJECTION } else { DAMPING_MIN })
                };
                if receded {
                    pull *= PULL_SHRINK;
                } else if pulling {
                    // Back up to the full pull after a rejection shortened it (the momentum
                    // takes up the goals' curvature, which the identity metric leaves out).
                    pull = (pull * PULL_GROW).min(PULL_MAX);
                }
                if stalled {
                    break;
                }
            } else {
                // Rejected: `pose` and its frames and residual stand; pull less toward the
                // reference, then damp harder. (The bounds the rejected step met do not hold
                // `pose`.)
                if pulling {
                    self.blocked.clone_from(&self.was_blocked);
                }
                if pulling && pull > PULL_MIN {
                    pull *= PULL_SHRINK;
                    continue;
                }
                if pulling {
                    // Even the shortest pull is rejected: the pull has come as near the reference
                    // as its steps can (damping harder only makes its projection less exact);
                    // plain steps finish the goals.
                    relaxing = false;
                    continue;
                }
                // (With the out-of-reach floor in force, four times the λ² the step had.)
                damping = if lambda2 > damping * scale { 4.0 * lambda2 / scale } else { damping * 4.0 };
                if damping > DAMPING_MAX {
                    break;
                }
            }
        }
        self.pulling = false;
        self.pose_turns_valid = false;
        if met > 0 && met_level(self) < met {
            // The pull passed poses that met every goal (or met them closer), but where it ended
            // the plain steps could not finish them as well (the budget ran out, or limits hold
            // the bones they need): the last of those poses, rather than a failure that leaves the
            // solve to FABRIK's reaching and an answer far from the reference.
            pose.clone_from(&self.met);
            evaluate(problem, &self.tree_poles, pose, &mut self.frames, &mut self.residual);
        }
        DlsOutcome { iterations: it, reached: self.all_reached(problem, tolerance) }
    }

    /// The largest change between `from` and `to` of a joint's bone: its turn (radians), or its
    /// length's change over its tree's extent.
    fn largest_change(&self, from: &Pose, to: &Pose) -> f64 {
        self.joints
            .iter()
            .filter_map(|j| {
                let b = j.bone?;
                Some(match j.stretch {
                    Some(k) => (to.scales[b] - from.scales[b]).abs() / k,
                    None => 2.0 * (from.rotations[b].conjugate() * to.rotations[b]).xyz().length().min(1.0).asin(),
                })
            })
            .fold(0.0, f64::max)
    }

    /// The correction of a pull's `trial` (whose frames and residual are `self.trial_frames` and
    /// `self.trial_residual`) into `corrected` (a copy of `trial`): one Gauss–Newton step solved
    /// at `trial` itself (linearized there, with the blocked directions as they are now, `m`
    /// residual rows, relative damping `damping`). Returns its squared error; `corrected`'s
    /// frames and residual are then in `self.trial_frames` and `self.trial_residual`, and
    /// `self.frames` and `self.residual` still those of the pose the step started from.
    fn relinearized_correction(&mut self, problem: &Problem, trial: &Pose, corrected: &mut Pose, m: usize, damping: f64) -> f64 {
        // The trial's frames and residual where the linearization reads them; the pose's aside.
        std::mem::swap(&mut self.frames, &mut self.trial_frames);
        std::mem::swap(&mut self.residual, &mut self.trial_residual);
        std::mem::swap(&mut self.trial_frames, &mut self.spare_frames);
        std::mem::swap(&mut self.trial_residual, &mut self.spare_residual);
        self.linearize(problem);
        self.gram_into();
        let scale = (0..m).map(|i| self.gram.get(i, i)).fold(0.0, f64::max);
        for i in 0..m {
            self.gram.add(i, i, damping * scale);
        }
        self.rhs.copy_from_slice(&self.residual);
        let solved = scale > 0.0 && self.gram.factor_solve(&mut self.rhs);
        if solved {
            self.apply_step(problem, trial, corrected, 0.0, false);
        }
        let error = evaluate(problem, &self.tree_poles, corrected, &mut self.trial_frames, &mut self.trial_residual);
        std::mem::swap(&mut self.frames, &mut self.spare_frames);
        std::mem::swap(&mut self.residual, &mut self.spare_residual);
        error
    }

    /// Marks, per goal, whether its target lies beyond its chain's reach from the chain's top
    /// bone's head at the current pose (the report's test of a reachable target, TR-632 Alg. 1
    /// line 1.3): [`DlsSteps::beyond_reach`]. None is when the root translates, nor a chain with
    /// a bone whose length is an unknown: those reach farther.
    pub(super) fn mark_beyond_reach(&mut self, problem: &Problem) {
        let topo = problem.topology();
        let free = self.translates_root();
        let stretches = |gi: usize| !self.rigid && topo.moved[gi].iter().any(|b| topo.stretchy.binary_search(b).is_ok());
        self.beyond.clear();
        self.beyond.extend((0..problem.goals().len()).map(|gi| {
            !free && !stretches(gi) && topo.moved[gi].last().is_some_and(|&top| problem.beyond_reach_by(gi, self.frames.heads[top]) > 0.0)
        }));
    }

    /// Per goal, whether its target was beyond its chain's reach ([`DlsSteps::mark_beyond_reach`]).
    pub(super) fn beyond_reach(&self) -> &[bool] {
        &self.beyond
    }

    /// Per goal, its first residual row (its position rows, then its orientation's).
    pub(super) fn goal_rows(&self) -> &[usize] {
        &self.goal_rows
    }

    /// The forward kinematics of the pose the last [`DlsSteps::refine`] left.
    pub(crate) fn frames(&self) -> &Frames {
        &self.frames
    }

    /// The joints: every unlocked bone some goal moves (three world axes, or its hinge axis),
    /// then each stretchy bone's length (unless [`DlsSteps::set_rigid`]), then the root's
    /// translation when it is free; which goals each moves; the residual rows.
    fn collect_joints(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let topo = problem.topology();
        let goals = problem.goals();
        let unknown = |bone: Option<usize>, gain: f64, ratios: Option<[f64; 3]>| Joint { bone, stretch: None, gain, ratios, scales: [1.0; 3], axes: DVec3::AXES, count: 3, world_axes: true };
        // Toward a reference, a bone's turn counts more the shorter the bone is next to the
        // moving bones' mean (its gain is its length over that mean, at least
        // [`SHORT_BONE_GAIN`]): short bones (clavicles, neck and spine segments) turn less, as
        // they do in real motion. Measured on real motion capture (bench/real_motion.py): mean
        // internal-joint error 35.0 -> 32.4 mm without poles, 20.8 -> 18.2 mm with them.
        let mean_length = topo.active.iter().map(|&i| rig.bone(i).length).sum::<f64>() / topo.active.len().max(1) as f64;
        let toward = self.reference.is_some();
        let length_weight = |b: usize| if toward && mean_length > 0.0 { (rig.bone(b).length / mean_length).max(SHORT_BONE_GAIN) } else { 1.0 };
        // Each bone's unknowns are its joint's ([`Freedom`]); a bone swings only where its joint
        // does ([`Freedom::Swing`]: its twist is locked), unless an orientation goal moves it:
        // then the steps keep the twist exactly instead of clamping it back after every step.
        self.freedom.clear();
        self.freedom.extend(rig.bones().iter().map(|b| b.limit.freedom()));
        for (gi, g) in goals.iter().enumerate() {
            if g.orientation.is_some() {
                for &b in &topo.moved[gi] {
                    if self.freedom[b] == Freedom::Swing {
                        self.freedom[b] = Freedom::Ball;
                    }
                }
            }
        }
        self.joints.clear();
        for &b in &topo.active {
            let limit = &rig.bone(b).limit;
            let [sx, sy, sz] = limit.axis_stiffness();
            let least = sx.min(sy).min(sz);
            if self.freedom[b] == Freedom::Fixed || least >= 1.0 {
                continue;
            }
            let ratios = (sx != sy || sy != sz).then(|| [sx, sy, sz].map(|s| (1.0 - s) / (1.0 - least)));
            self.joints.push(unknown(Some(b), (1.0 - least) * length_weight(b), ratios));
        }
        // The lengths of stretchy bones (locked ones too: a lock holds the rotation).
        for &b in topo.stretchy.iter().filter(|_| !self.rigid) {
            let k = topo.stretch_norm[b] / rig.bone(b).length;
            self.joints.push(Joint { stretch: Some(k), count: 1, world_axes: false, ..unknown(Some(b), stretch_gain(rig.bone(b).limit.stretch), None) });
        }
        // (Last: the explicit methods' unknowns end with the root's translation.)
        if problem.root() == RootMode::Free && topo.active.first() == Some(&0) {
            self.joints.push(unknown(None, 1.0, None));
        }
        // Which goals each joint moves: a goal moves with every bone on its path to the root,
        // and the root's translation moves bone 0's tree (other roots stay where the rest pose
        // puts them); a stretchy bone's length moves the goals below it and one on its own tail
        // (not one on its head). Per joint in goal order, from one walk up each goal's path
        // (two: count, then fill).
        let root_joint = self.joints.iter().position(|j| j.bone.is_none());
        self.joint_of_bone.clear();
        self.joint_of_bone.resize(rig.len(), usize::MAX);
        self.stretch_of_bone.clear();
        self.stretch_of_bone.resize(rig.len(), usize::MAX);
        for (j, joint) in self.joints.iter().enumerate() {
            if let Some(b) = joint.bone {
                if joint.stretch.is_some() {
                    self.stretch_of_bone[b] = j;
                } else {
                    self.joint_of_bone[b] = j;
                }
            }
        }
        let (joint_of_bone, stretch_of_bone, cursor) = (&self.joint_of_bone, &self.stretch_of_bone, &mut self.cursor);
        let walk = |gi: usize, visit: &mut dyn FnMut(usize)| {
            let mut x = Some(goals[gi].bone);
            while let Some(i) = x {
                if joint_of_bone[i] != usize::MAX {
                    visit(joint_of_bone[i]);
                }
                // (A bone's length does not move its own head: a goal on it does not move with it.)
                if stretch_of_bone[i] != usize::MAX && (goals[gi].use_tail || goals[gi].bone != i) {
                    visit(stretch_of_bone[i]);
                }
                if i == 0
                    && let Some(r) = root_joint
                {
                    visit(r);
                }
                x = rig.bone(i).parent;
            }
        };
        cursor.clear();
        cursor.resize(self.joints.len() + 1, 0);
        for gi in 0..goals.len() {
            walk(gi, &mut |j| cursor[j + 1] += 1);
        }
        for j in 0..self.joints.len() {
            cursor[j + 1] += cursor[j];
        }
        self.reach_start.clear();
        self.reach_start.extend_from_slice(cursor);
        self.reaches.clear();
        self.reaches.resize(cursor[self.joints.len()], 0);
        let reaches = &mut self.reaches;
        for gi in 0..goals.len() {
            walk(gi, &mut |j| {
                reaches[cursor[j]] = gi;
                cursor[j] += 1;
            });
        }
        self.goal_rows.clear();
        let mut row = 0;
        for g in goals {
            self.goal_rows.push(row);
            row += if g.orientation.is_some() { 6 } else { 3 };
        }
        self.tree_poles.clear();
        self.tree_poles.extend((0..goals.len()).filter(|&gi| goals[gi].pole.is_some() && !topo.is_lone_chain(gi)));
    }

    /// Every goal within `tolerance`, and every tree pole's swivel within [`POLE_TOLERANCE`].
    fn all_reached(&self, problem: &Problem, tolerance: f64) -> bool {
        (0..problem.goals().len()).all(|gi| problem.goal_met(gi, &self.frames, tolerance))
            && self.tree_poles.iter().all(|&gi| {
                let top = pole_top(problem, gi);
                pole_swivel(problem, gi, self.frames.rotations[top], self.frames.heads[top]).abs() <= POLE_TOLERANCE
            })
    }

    /// `J` at the current frames, as each joint's axes, links and pole links.
    fn linearize(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let topo = problem.topology();
        let goals = problem.goals();
        let first_pole_row = self.residual.len() - self.tree_poles.len();
        let toward = self.pulling;
        self.links.clear();
        self.pole_links.clear();
        self.pole_start.clear();
        for j in 0..self.joints.len() {
            let joint = &mut self.joints[j];
            if let (Some(b), None) = (joint.bone, joint.stretch) {
                // The joint model's axes for the bone ([`Freedom::step_axes`]), weighted per axis.
                let (frames, parent) = (&self.frames, rig.bone(b).parent);
                let rest_y = || rig.local_base(b, parent.map_or(DQuat::IDENTITY, |p| frames.rotations[p])) * DVec3::Y;
                let step = self.freedom[b].step_axes(frames.rotations[b], rest_y, self.blocked[b], joint.ratios);
                (joint.axes, joint.count, joint.scales, joint.world_axes) = (step.axes, step.count, step.scales, step.world);
                if matches!(self.freedom[b], Freedom::Hinge(_)) && toward && self.blocked[b].is_some() {
                    // Pulling toward a reference, a hinge at its bound is held there as the other
                    // bones are (its one axis is its blocked direction) until the steps pull it
                    // back.
                    joint.count = 0;
                }
            }
            let joint = *joint;
            for &gi in &self.reaches[self.reach_start[j]..self.reach_start[j + 1]] {
                let g = &goals[gi];
                let w = g.weight.sqrt();
                if let (Some(b), Some(k)) = (joint.bone, joint.stretch) {
                    // A length: the bone's point that leads down to the effector (its tail, or the
                    // next bone's rest head, which its scale carries) moves along with the scale.
                    let lead = stretch_lead(rig, b, g.bone);
                    let lever = self.frames.rotations[b] * lead * (joint.gain * w * k);
                    self.links.push(Link { row: self.goal_rows[gi], lever, spin: None });
                    continue;
                }
                let lever = match joint.bone {
                    Some(b) => (self.frames.effector(g.bone, g.use_tail) - self.frames.heads[b]) * (joint.gain * w),
                    None => DVec3::splat(w),
                };
                let spin = g.orientation.and(joint.bone).map(|_| joint.gain * w * problem.angle_scale(gi));
                self.links.push(Link { row: self.goal_rows[gi], lever, spin });
            }
            // Tree poles: the swivel turns with the chain's top bone and everything above it
            // (which also moves the top's head, and with it the axis); numerical first-order
            // derivatives, no FK.
            self.pole_start.push(self.pole_links.len());
            // (A length's effect on a swivel is left out: the swivel is measured exactly after
            // every step, and the turns correct it.)
            for (p, &gi) in self.tree_poles.iter().enumerate().filter(|_| joint.stretch.is_none()) {
                let top = pole_top(problem, gi);
                if joint.bone.is_some_and(|b| b > top) || !self.reaches[self.reach_start[j]..self.reach_start[j + 1]].contains(&gi) {
                    continue;
                }
                let (rot, head) = (self.frames.rotations[top], self.frames.heads[top]);
                let at = pole_swivel(problem, gi, rot, head);
                let scale = goals[gi].weight.sqrt() * topo.chain_reach[gi];
                let mut per_axis = DVec3::ZERO;
                for c in 0..joint.count {
                    let (r, h) = match joint.bone {
                        None => (rot, head + joint.axes[c] * SWIVEL_STEP),
                        Some(b) => {
                            let turn = from_rotation_vector(joint.axes[c] * (SWIVEL_STEP * joint.gain));
                            let pivot = self.frames.heads[b];
                            ((turn * rot).normalize(), pivot + turn * (head - pivot))
                        }
                    };
                    per_axis[c] = (pole_swivel(problem, gi, r, h) - at) / SWIVEL_STEP * scale;
                }
                let turn = match joint.bone {
                    None => per_axis,
                    Some(_) => (0..joint.count).map(|c| joint.axes[c] * per_axis[c]).sum(),
                };
                self.pole_links.push(PoleLink { row: first_pole_row + p, per_axis, turn });
            }
        }
        self.pole_start.push(self.pole_links.len());
    }

    /// Lays `self.gram` out for the `m` residual rows: a block per group of coupled goals
    /// ([`crate::problem::Topology::coupled`]), a tree pole's row with its goal's.
    fn layout_gram(&mut self, problem: &Problem, m: usize) {
        let coupled = &problem.topology().coupled;
        let first_pole_row = m - self.tree_poles.len();
        let (goal_rows, tree_poles) = (&self.goal_rows, &self.tree_poles);
        // Goal rows ascend with the goals; the tree poles' rows come after them.
        let goal_of_row = |row: usize| match row.checked_sub(first_pole_row) {
            Some(p) => tree_poles[p],
            None => goal_rows.partition_point(|&r| r <= row) - 1,
        };
        self.gram.layout(m, |row| coupled[goal_of_row(row)], problem.goals().len());
    }

    /// `J Jᵀ` into the lower triangle of `self.gram`: per joint, a 3 × 3 block
    /// (or a row, for a pole) per pair of the rows it moves.
    fn gram_into(&mut self) {
        let g = &mut self.gram;
        g.clear();
        for (j, joint) in self.joints.iter().enumerate() {
            let links = &self.links[self.reach_start[j]..self.reach_start[j + 1]];
            let axes = &joint.axes[..joint.count];
            for (a, la) in links.iter().enumerate() {
                // Rows ascend with the goals, so `lb` (b ≤ a) is never below `la`.
                for (b, lb) in links[..=a].iter().enumerate() {
                    let (ra, rb) = (la.row, lb.row);
                    if joint.stretch.is_some() {
                        // One unknown moving the position rows by the lever.
                        g.add3(ra, rb, outer(la.lever, lb.lever));
                        continue;
                    }
                    if joint.bone.is_none() {
                        g.add3(ra, rb, DMat3::from_diagonal(DVec3::splat(la.lever.x * lb.lever.x)));
                        continue;
                    }
                    let (da, db) = (la.lever, lb.lever);
                    // Position rows of `la` by position rows of `lb`: Σ_c (a_c × da)(a_c × db)ᵀ.
                    let pp = if joint.world_axes {
                        DMat3::from_diagonal(DVec3::splat(da.dot(db))) - outer(db, da)
                    } else {
                        axes.iter().map(|&x| outer(x.cross(da), x.cross(db))).sum()
                    };
                    g.add3(ra, rb, pp);
                    if let Some(sa) = la.spin {
                        // Orientation rows of `la` by position rows of `lb`: Σ_c sa a_c (a_c × db)ᵀ.
                        let rp = if joint.world_axes { skew(db) * sa } else { axes.iter().map(|&x| outer(x * sa, x.cross(db))).sum() };
                        g.add3(ra + 3, rb, rp);
                        if let Some(sb) = lb.spin {
                            let rr = if joint.world_axes {
                                DMat3::from_diagonal(DVec3::splat(sa * sb))
                            } else {
                                axes.iter().map(|&x| outer(x * sa, x * sb)).sum()
                            };
                            g.add3(ra + 3, rb + 3, rr);
                        }
                    }
                    if let Some(sb) = lb.spin
                        && b < a
                    {
                        // Position rows of `la` by orientation rows of `lb` (above the diagonal
                        // when they are the same goal's).
                        let pr = if joint.world_axes { -skew(da) * sb } else { axes.iter().map(|&x| outer(x.cross(da), x * sb)).sum() };
                        g.add3(ra, rb + 3, pr);
                    }
                }
            }
            let poles = &self.pole_links[self.pole_start[j]..self.pole_start[j + 1]];
            for (a, pa) in poles.iter().enumerate() {
                // Pole rows come after every goal's rows.
                for l in links {
                    let (pos, rot) = match joint.bone {
                        None => (pa.per_axis * l.lever.x, None),
                        Some(_) => (pa.turn.cross(l.lever), l.spin.map(|s| pa.turn * s)),
                    };
                    for c in 0..3 {
                        g.add(pa.row, l.row + c, pos[c]);
                    }
                    if let Some(rot) = rot {
                        for c in 0..3 {
                            g.add(pa.row, l.row + 3 + c, rot[c]);
                        }
                    }
                }
                for pb in &poles[..=a] {
                    g.add(pa.row, pb.row, pa.per_axis.dot(pb.per_axis));
                }
            }
        }
    }

    /// `trial` ← `pose` moved by `Jᵀ y` (`y` = `self.rhs`) and `pull` times the turns toward
    /// the reference (`self.toward`), each bone swinging only unless its twist is free, and
    /// clamped to its limit; records the directions clamps took away in `self.blocked`. `pose`'s
    /// frames are `self.frames`, or `self.trial_frames` with `from_trial`. Returns the largest
    /// turn of a bone (radians).
    fn apply_step(&mut self, problem: &Problem, pose: &Pose, trial: &mut Pose, pull: f64, from_trial: bool) -> f64 {
        self.apply_step_from(problem, pose, trial, pull, from_trial, None)
    }

    /// [`DlsSteps::apply_step`] with the step given either as `Jᵀ y` (`y` = `self.rhs`, when
    /// `unknowns` is `None`) or as the unknowns' changes `Δθ` themselves (in `J`'s column order:
    /// a bone turns by `gain · Σ_c a_c Δθ_c` about its head, a length's scale changes by
    /// `gain · k · Δθ`, the root moves by `Δθ` in rig space).
    fn apply_step_from(&mut self, problem: &Problem, pose: &Pose, trial: &mut Pose, pull: f64, from_trial: bool, unknowns: Option<&[f64]>) -> f64 {
        let rig = problem.rig();
        let y = &self.rhs;
        let y3 = |r: usize| DVec3::new(y[r], y[r + 1], y[r + 2]);
        let mut largest = 0.0f64;
        let mut col = 0;
        self.last_step_clamped = false;
        for (j, joint) in self.joints.iter().enumerate() {
            let links = &self.links[self.reach_start[j]..self.reach_start[j + 1]];
            let poles = &self.pole_links[self.pole_start[j]..self.pole_start[j + 1]];
            let toward = if pull > 0.0 { self.toward[j].0 * pull } else { DVec3::ZERO };
            let given = unknowns.map(|u| &u[col..col + joint.count]);
            col += joint.count;
            if let (Some(b), Some(k)) = (joint.bone, joint.stretch) {
                // A length: its unknown's step is Σ_goals lever · y_pos; the scale changes by
                // gain · k times it (and by the pull toward the reference's), within the bounds.
                let x: f64 = given.map_or_else(|| links.iter().map(|l| l.lever.dot(y3(l.row))).sum(), |u| u[0]);
                let before = pose.scales[b];
                let after = (before + joint.gain * k * x + toward.x).clamp(MIN_SCALE, MAX_SCALE);
                trial.scales[b] = after;
                // (Measured as the change of the bone's length over its tree's extent, the
                // radian-like size of the unknown.)
                largest = largest.max((after - before).abs() / k);
                continue;
            }
            let Some(b) = joint.bone else {
                // The root's translation, kept in bone 0's rest frame.
                let t = given.map_or_else(
                    || links.iter().map(|l| y3(l.row) * l.lever.x).sum::<DVec3>() + poles.iter().map(|p| p.per_axis * y[p.row]).sum::<DVec3>(),
                    |u| DVec3::new(u[0], u[1], u[2]),
                ) + toward;
                trial.root_translation = pose.root_translation + rig.bone(0).rest_rotation.conjugate() * t;
                continue;
            };
            // Unknown c's step is a_c · Σ_goals (lever × y_pos + spin y_rot), plus its pole terms;
            // the bone turns by gain · Σ_c a_c step_c.
            let goals_pull: DVec3 = links.iter().map(|l| l.lever.cross(y3(l.row)) + l.spin.map_or(DVec3::ZERO, |s| y3(l.row + 3) * s)).sum();
            // A blocked direction points back inside the limit; once the goals pull the bone that
            // way, the limit no longer holds it, and the next steps may use the direction again
            // (otherwise a bone that touched its limit early stays held off it, and the steps
            // stall short of targets they could reach).
            //
            // Toward the reference the pull's own push into the bound counts too (it was
            // projected out of `toward`): the bound is released when the step the goals and the
            // pull ask for, unprojected, points inside (its multiplier changes sign: the active
            // set rule of a bound-constrained least-distance step); the corrections of a pull
            // release nothing ([`DlsSteps::holding`]), or a bone the pull pushes into its bound
            // would leave it at every correction and hit it again at every pull.
            let mut onto_bound = DVec3::ZERO;
            if let Some(v) = self.blocked[b] {
                let inward = (goals_pull * joint.gain + toward).dot(v);
                let release = if pull > 0.0 { inward + pull * self.pushing[j] > 0.0 } else { !self.holding && inward > 0.0 };
                if pull > 0.0 && !release && self.pushing[j] < 0.0 {
                    // Held, and the pull pushes it out: it goes as far as the bound (the clamp
                    // stops it there; it is within [`AT_BOUND`] of it), so a bone held a little
                    // inside its bound does not stay off it. (Not a turn of the step's: the
                    // clamp takes it back once the bone is on its bound.)
                    onto_bound = v * (pull * self.pushing[j]).max(-2.0 * AT_BOUND);
                }
                if release {
                    self.blocked[b] = None;
                }
            }
            let turn = if let Some(u) = given {
                (0..joint.count).map(|c| joint.axes[c] * u[c]).sum::<DVec3>()
            } else if joint.world_axes {
                goals_pull + poles.iter().map(|p| p.per_axis * y[p.row]).sum::<DVec3>()
            } else {
                (0..joint.count)
                    .map(|c| joint.axes[c] * (joint.axes[c].dot(goals_pull) + poles.iter().map(|p| p.per_axis[c] * y[p.row]).sum::<f64>()))
                    .sum()
            } * joint.gain
                + toward;
            largest = largest.max(turn.length());
            let turn = turn + onto_bound;
            // World turn `turn` about the bone's head.
            let world = if from_trial { self.trial_frames.rotations[b] } else { self.frames.rotations[b] };
            let local = pose.rotations[b];
            let wanted = turned_local(world, local, turn, self.freedom[b].holds_twist().then(|| self.kept_twist[b]));
            let limit = &rig.bone(b).limit;
            let clamped = limit.clamp(wanted);
            if clamped != wanted && turns_more_than(clamped, wanted, CLAMPED_TAN_HALF) {
                self.blocked[b] = if self.pulling {
                    held_direction(limit, world, local, wanted, clamped)
                } else {
                    clamp_direction(world, local, wanted, clamped)
                };
                self.last_step_clamped = true;
            }
            trial.rotations[b] = clamped;
        }
        largest
    }
}

/// The local rotation a bone asks for when a step turns it by the world turn `turn` about its
/// head, at world rotation `world` and local rotation `local`: with world = base · local,
/// exp(ω) · world = base · local · exp(world⁻¹ ω). A bone that swings only keeps `kept_twist`
/// (the steps' swings would drift its twist at second order).
#[inline(always)]
fn turned_local(world: DQuat, local: DQuat, turn: DVec3, kept_twist: Option<DQuat>) -> DQuat {
    let wanted = renormalize(local * from_rotation_vector(world.conjugate() * turn));
    match kept_twist {
        Some(twist) => (swing_twist_y(wanted).0 * twist).normalize(),
        None => wanted,
    }
}

/// The world direction (unit) a bone's clamp removed, the clamp having taken its local rotation
/// `wanted` to `clamped`, when its world rotation is `world` at local rotation `local`:
/// `base · rotvec(clamped · wanted⁻¹)` with `base = world · local⁻¹` (its parent's world rotation
/// and its rest). `None` when the clamp removed nothing.
// (Always inlined: called from two places, it was not, and `apply_step_from` then ran 20% slower
// on rigs without limits, where it is never called: the core bench's tracking with a reference.)
#[inline(always)]
fn clamp_direction(world: DQuat, local: DQuat, wanted: DQuat, clamped: DQuat) -> Option<DVec3> {
    ((world * local.conjugate()) * rotation_vector((clamped * wanted.conjugate()).normalize())).try_normalize()
}

/// Where a pull's clamp caught a bone (from `local` at world rotation `world`, asking for
/// `wanted`, clamped to `clamped`), the direction that holds it: the normal of the one bound it
/// is at ([`bound_normal`] at `clamped`), or, at two (its swing and its twist) or a hinge's, the
/// direction the clamp removed ([`clamp_direction`]). Measured on the 2224 real-motion solves
/// the add-on exports, against the clamp's direction here (with the normal already refreshed
/// before each pull): warm answers beyond 1e-3 rad of their cold solves 41 -> 38, solves a
/// 1e-12 m move of the targets moves by more than 1e-6 rad 7 / 7 / 7 -> 3 / 1 / 3 (three
/// seeds), 61.1 -> 59.7 iterations a cold solve. (The steps that first reach the goals keep the
/// clamp's direction: with the normal there too, a torso whose cone holds a spine bone
/// (`tests/binding_limits.rs`) ended 0.9 mm off its hand's target.)
fn held_direction(limit: &JointLimit, world: DQuat, local: DQuat, wanted: DQuat, clamped: DQuat) -> Option<DVec3> {
    let state = limit.state(clamped, AT_BOUND);
    bound_normal(limit, &state, world * local.conjugate() * clamped, clamped).or_else(|| clamp_direction(world, local, wanted, clamped))
}

/// The inward normal (world space, unit) of the one bound a bone is at, where it stands (world
/// rotation `world`, local `local`, its limit's `state` there); `None` at none or at two (its
/// swing and its twist: a bone that swings only is never held by its twist). The gradient of the bound's implicit value over the
/// turns the steps make ([`JointLimit::bound_gradient`]), pointing inside. A pull projected off
/// it leaves the bound only at second order, which the clamp takes back. The direction the clamp
/// removes from a probe past the bound (what [`DlsSteps::refresh_blocked`] used before, and still
/// uses where the swing and the twist are both at a bound) is normal to the bound in the cone's
/// own coordinates (the swing quaternion's components for Blender's shape), not in the turns the
/// steps make, so the pull kept pushing a little into the bound; the clamp took that back, the
/// goals were left open by as much, and closing them cost more than the pull gained: the pull
/// stopped short of the nearest pose, where its path left it. On the 2224 real-motion solves the
/// add-on exports, warm answers more than 1e-3 rad from their cold solves went 230 -> 41 with it.
/// (A bone that swings only keeps its twist as the steps turn it; its cone bounds its swing
/// alone, which the twist it keeps does not change, so the same gradient holds.)
fn bound_normal(limit: &JointLimit, state: &LimitState, world: DQuat, local: DQuat) -> Option<DVec3> {
    let twist_holds = state.twist_at_bound && !limit.freedom().holds_twist();
    if state.swing_at_bound == twist_holds {
        return None;
    }
    let gradient = world * limit.bound_gradient(local, state.swing_at_bound)?;
    // Inward, the value falls: a cone's, or the twist at the top of its range; at the bottom it
    // rises.
    let outward_rises = state.swing_at_bound || limit.twist.is_some_and(|t| state.twist > 0.5 * (t.min + t.max));
    (if outward_rises { -gradient } else { gradient }).try_normalize()
}

/// The gain of a bone's length with [`crate::JointLimit::stretch`] `stretch` (above 0), as
/// Blender's IK weights its stretch: `IK_SetStiffness(seg, IK_TRANS_Y, 1 − stretch²)` makes the
/// weight `w = 1 − stiffness`, at least [`STRETCH_WEIGHT_MIN`] (its stiffness is capped at
/// 0.99: `ik_stretch` 0.1 and 0.01 give the same pose in Blender 5.0, measured). Blender's
/// steps (`IK_QJacobian`: the columns scaled by `√w`, the step by `w`) move each unknown along
/// `w^{3/2}` times the gradient, so where they settle is, to first order, the pose nearest the
/// start in the metric `Σ Δ² / w^{3/2}`; here a metric `Σ (Δ / gain)²`, so the gain is
/// `w^{3/4}`. Measured in Blender 5.0: a straight two-bone chain pulled past reach shares the
/// stretch `(w₁ / w₂)^{3/2}` to one (125 to 1 for `ik_stretch` 0.5 against 0.1), as here.
pub(crate) fn stretch_gain(stretch: f64) -> f64 {
    (stretch * stretch).max(STRETCH_WEIGHT_MIN).powf(0.75)
}

/// The least weight Blender's IK gives a stretch (`1 −` its largest stiffness, 0.99).
pub(crate) const STRETCH_WEIGHT_MIN: f64 = 0.01;

/// The point of bone `b` (in its own frame, at rest length) that carries bone `effector`, which
/// is `b` or below it: `b`'s tail (`effector` is `b`), else the rest head of the child of `b`
/// on the way down to `effector`. Scaling `b` moves that point, and with it `effector`'s whole
/// branch, by the point's rotation times the scale change.
fn stretch_lead(rig: &crate::rig::Rig, b: usize, effector: usize) -> DVec3 {
    let mut c = effector;
    while let Some(p) = rig.bone(c).parent {
        if p == b {
            return rig.bone(c).rest_head;
        }
        c = p;
    }
    DVec3::new(0.0, rig.bone(b).length, 0.0)
}

/// The outer product `u vᵀ`.
#[inline]
fn outer(u: DVec3, v: DVec3) -> DMat3 {
    DMat3::from_cols(u * v.x, u * v.y, u * v.z)
}

/// The cross-product matrix: `skew(d) · x = d × x`.
#[inline]
fn skew(d: DVec3) -> DMat3 {
    DMat3::from_cols(DVec3::new(0.0, d.z, -d.y), DVec3::new(-d.z, 0.0, d.x), DVec3::new(d.y, -d.x, 0.0))
}

#[cfg(test)]
mod tests;
