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
use crate::limits::Freedom;
use crate::pose::{Frames, MAX_SCALE, MIN_SCALE, Pose};
use crate::problem::{Problem, RootMode};

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
/// While [`DlsSteps::refine_toward`] moves toward the reference it counts the goals as met within
/// this many tolerances (their squared error within its square): each step's chord correction
/// leaves them a little off, which the plain steps after it close quadratically.
const RELAX_BAND: f64 = 10.0;
/// ... or within this fraction of the longest chain's reach, when that is more.
const RELAX_BAND_REACH: f64 = 1e-3;
/// The longest pull toward the reference, in multiples of the turn to it (see
/// [`DlsSteps::refine_toward`]): the first-order step. Longer pulls (doubling up to 64) cycled
/// between kept and overshooting steps, because the goals' curvature makes the best length differ
/// between directions (by a factor near 5 on a 10-bone chain).
const PULL_MAX: f64 = 1.0;
/// The shortest pull toward the reference (a rejected pull is shortened by [`PULL_SHRINK`] down
/// to it, from [`PULL_MAX`]); when even it is rejected the pull ends. It used to go on, damping
/// harder at every rejection: on real motion capture a solve spent 15 of its 50 steps so, and
/// ended 0.07 mm off its goals.
const PULL_MIN: f64 = 1e-3;
/// A rejected pull is tried again this many times as long; a kept one makes the next
/// [`PULL_GROW`] times as long (up to [`PULL_MAX`]). Halving and growing by half, against
/// quartering and doubling, on the real-motion problems the add-on exports (2224 solves, each
/// warm-started frame to frame as a bake does and cold from its reference): warm answers more
/// than 1e-3 rad from their cold solves 291 -> 228, at 45.8 iterations a warm frame against 44.6
/// (cold 61.6 against 62.2). Under a 1e-12 m move of every target (three random moves each) 2
/// cold solves moved a bone by more than 1e-6 rad (by 6.5e-6 and 2.7e-6 rad) against 1 (by
/// 5.9e-5): each a restart that ends at [`RELAX_ITERATIONS`] near a saddle of the distance, which
/// one start leaves (its turn growing by a third a step) and another settles at first; which
/// solves do is chance. Quartering let a pull whose length
/// the goals' curvature limits to about 1/4 cycle through 1/8 (kept), 1/4 (kept) and 1/2
/// (rejected), and ended the pull after five rejections in a row where the shortest pull it had
/// not tried might still have been kept. Measured around it (shrink / grow: warm answers beyond
/// 1e-3 rad, iterations a warm frame, before the finish's damping was reset after the pull):
/// 0.25 / 2 291, 44.6; 0.4 / 1.5 275, 43.5; 0.5 / 1.25 238, 43.6; 0.5 / 2 231, 49.3; 0.6 / 1.5
/// 224, 50.0; 0.7 / 1.5 235, 55.7.
const PULL_SHRINK: f64 = 0.5;
/// See [`PULL_SHRINK`].
const PULL_GROW: f64 = 1.5;
/// The most corrections a pull toward the reference gets to bring the goals back into the band
/// ([`RELAX_BAND`]) before the pull is judged: the first is the chord step (or a Gauss–Newton step
/// solved where the pull landed, when a limit took a bone), the second a Gauss–Newton step from
/// where the first landed, taken when the first left the goals outside the band but closed at
/// least three quarters of their squared gap. With one, a pull whose correction left the goals a
/// few millimetres off was rejected and quartered; on real motion capture
/// (`bench/real_motion.py`) a cold solve of a crawl frame climbed back toward its reference in a
/// cycle of pulls of 1/8, 1/4 (kept) and 1/2 (rejected) for 30 steps. Two measured against one and
/// three: frames turning a bone faster than their clip 21 -> 13 without poles (12 with three, but
/// 6 -> 8 with poles), bake frames more than 1e-2 rad from a cold solve of the frame 251 -> 182,
/// at 4% more solving time.
const PULL_CORRECTIONS: u32 = 2;
/// How much of the last kept pull's direction the next pull adds (Polyak's heavy ball): the
/// slow directions, where the goals' curvature shortens the pull's reach, build up speed. 0.3 of
/// 0, 0.3, 0.5 and 0.7 measured best: a 10-bone chain's 1000-frame bake took 13.2 iterations a
/// frame against 20.3 with doubling pulls and no momentum, and on real motion capture
/// (`bench/real_motion.py`) the mean joint error went 32.2 -> 32.0 mm without poles and
/// 18.17 -> 18.12 mm with them. Measured again with [`PULL_SHRINK`]'s halving: less momentum
/// suits the real-motion problems (0.1: 205 warm answers beyond 1e-3 rad of their cold solves
/// against 228, at 39.2 iterations a warm frame against 45.8) and the 10-bone chain's tracking
/// with a rest reference (0.2: 8.7 iterations a frame against 10.7), but the paper humanoid's,
/// without limits and so without restarts, took 49.0 (0.2) and 59.2 (0.15) iterations a frame
/// against 26.9, its warm answers up to 2.5e-2 and 6.5e-2 rad from the cold solves (1.6e-4).
const MOMENTUM: f64 = 0.3;
/// The least gain a short bone gets toward a reference (see [`DlsSteps::collect_joints`]).
const SHORT_BONE_GAIN: f64 = 0.1;
/// Most steps one run of [`DlsSteps::refine_toward`] takes toward the reference while a limit
/// holds some bone (a pull restarted after it takes as many again).
const RELAX_ITERATIONS: u32 = 40;
/// The steps [`DlsSteps::refine_toward`] keeps for finishing the goals at the end of its budget:
/// a pull cut by the budget still ends on the goals (from within the band the plain steps close
/// them in two or three, more where limits hold bones), rather than failing and leaving the solve
/// to another path (FABRIK's reaching, whose answer the steps then pull from elsewhere). 8, not
/// the 4 it was: with 4, real motion capture (`bench/real_motion.py`) kept frames whose
/// effectors ended up to 0.09 mm off (the bake's tolerance is 0.1 mm); with 8 and
/// [`FINISH_FRACTION`], 0.04 and 0.07 mm at most, and 22 and 6 frames turning a bone faster than
/// the motion against 26 and 7, at the same speed.
const FINISH_ITERATIONS: u32 = 8;
/// A bone is at a bound of its limit within this (radians): the steps toward the reference hold
/// it there (see [`DlsSteps::refine_toward`]). Looser than the clamp's round-off: a bone sliding
/// along a bound leaves it by the second order of its steps (the clamp's direction is not
/// exactly the bound's normal), and would be released and caught again at every pull.
const AT_BOUND: f64 = 1e-3;
/// How far (radians) [`DlsSteps::refresh_blocked`] turns a held bone out along its blocked
/// direction to find the direction its clamp removes now: past its bound by at least
/// [`AT_BOUND`], the farthest inside it a held bone may be.
const BOUND_PROBE: f64 = 2.0 * AT_BOUND;
/// `tan(θ / 2)` for θ a tenth of [`BOUND_PROBE`] (to round-off: the tangent's next term is 3e-9
/// of it), for [`turns_more_than`]: a probe the clamp moved by less is not counted as caught (its
/// bone is held a little inside its bound), and the direction its clamp removed would be mostly
/// round-off.
const PROBE_CAUGHT_TAN_HALF: f64 = 0.5 * (0.1 * BOUND_PROBE);
/// After the steps toward the reference, the plain steps close the goals to this fraction of
/// the tolerance, not just within it: the pull leaves them anywhere in its band (up to ten
/// tolerances, [`RELAX_BAND`]), and a finish that stopped as soon as they were within the
/// tolerance kept whatever the last step left (a tenth of the tolerance on the paper humanoid at
/// 100 iterations; 0.09 of a bake's 0.1 mm on real motion), where one or two more Gauss–Newton
/// steps close them quadratically. The least-motion path (no reference) still stops at the
/// tolerance.
const FINISH_FRACTION: f64 = 0.01;
/// The largest turn (radians) of a bone in one step toward the goals.
const MAX_TURN: f64 = 0.5;
/// [`DlsSteps::refine_toward`] has settled when a step turns no bone by more than this
/// (radians): far below what moving a target by round-off may change (the continuity
/// properties hold answers to 1e-6 rad under 1e-12 changes of a target).
const SETTLED: f64 = 2e-8;
/// [`SETTLED`] for a solve that starts near its answer (tracking, warm-started from the frame
/// before): the answer then differs from the cold solve's by up to about ten times this (the
/// natural-poses issue allows 1e-3 rad between a bake's frame and the cold solve of that frame;
/// 8e-5 measured on a 10-bone chain's bake), and the steps stop sooner: 21 iterations a frame on
/// that bake against 29 at 1e-6.
const SETTLED_NEAR: f64 = 1e-5;

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

/// How many steps a [`DlsSteps::refine_toward`] may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PullBudget {
    /// The steps of its run.
    pub steps: u32,
    /// Steps more (beyond what the run left of `steps`) for the pull's restart after it.
    pub restart: u32,
}

impl PullBudget {
    /// `steps` steps, and none more for a restart.
    pub(crate) fn only(steps: u32) -> Self {
        Self { steps, restart: 0 }
    }

    /// Half of `max_iterations` (at least one) for the run, the other half for a restart: a
    /// caller that falls back to another method when the steps miss the goals keeps that half
    /// for it (a restart only follows a run that met them).
    pub(crate) fn halves(max_iterations: u32) -> Self {
        let steps = (max_iterations / 2).max(1);
        Self { steps, restart: max_iterations.saturating_sub(steps) }
    }
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

    /// Refines `pose` (inside every limit) to the pose nearest `reference` among those that meet
    /// the goals: sequential quadratic programming on `min |θ − θ_ref|²` (each bone's turn
    /// from its reference rotation, divided by its gain `1 − stiffness`, so stiff bones count
    /// more) subject to the goals, the secondary task in the null space of Nilsson's thesis
    /// §2.4 and Blender's `IK_QJacobian` null-space projection. Each step is
    /// `Δθ = β d + Jᵀ (J Jᵀ + λ² I)⁻¹ (r − β J d)` with `d` the turn to the reference: it
    /// closes the goals' gap to first order and, within what the goals leave free, moves to
    /// the reference. Its fixed points meet the goals and are nearest the reference to first
    /// order (the turn left is in `J`'s row space), so the answer does not depend on the start
    /// (a warm start is a speed device) and is a continuous function of the targets. While the
    /// goals are unmet a step is kept when it lowers their error, and it does not pull; once they
    /// are within a band ([`RELAX_BAND`] tolerances, or [`RELAX_BAND_REACH`] of the longest
    /// chain's reach), each step pulls, its second-order error is corrected by a chord step, and it
    /// is kept when it stays in the band and comes nearer the reference (or closes most of the
    /// gap). A rejected step pulls [`PULL_SHRINK`] as far, down to [`PULL_MIN`]; a kept one makes
    /// the next pull [`PULL_GROW`] times as far, up to [`PULL_MAX`], and the next pull adds
    /// [`MOMENTUM`] times its direction (a rejected one drops it). The pull stops when the steps
    /// are within `settled` of their limit (or after [`RELAX_ITERATIONS`] while a limit holds a
    /// bone, when even the shortest pull is rejected, or [`FINISH_ITERATIONS`] before the budget
    /// ends), and plain steps finish the goals, to [`FINISH_FRACTION`] of the tolerance, from the
    /// damping the steps had before the pull. Where they cannot (the budget ends, or limits hold
    /// the bones they need), the last pose the pull kept that met the goals as closely is the
    /// answer. A bone whose twist is locked keeps the reference's twist.
    ///
    /// Where limits bind, the nearest pose is that of a bound-constrained least-distance problem,
    /// and the pull treats the bones at a bound (within [`AT_BOUND`]) as its active set (the
    /// active-set method for such problems, Nocedal & Wright ch. 16; Blender's `IK_QJacobian`
    /// projects its secondary task onto the null space of the free joints' Jacobian, and a
    /// clamped joint leaves it, Baerlocher & Boulic's clamping loop): each is held on its bound
    /// (the direction its clamp removed is projected out of its axes; a hinge loses its axis), so
    /// the pull is projected onto what the goals *and* the active bounds leave free and the
    /// clamp never takes back what the goals' part of the step counted on. A held bone the pull
    /// pushes out goes onto its bound (the clamp stops it there). A bound is released only when
    /// the step the goals and the pull ask for, unprojected, points inside (its multiplier's
    /// sign), never by a pull's correction alone; a bone off its bound is released before each
    /// pull; a step whose clamp takes a bone that was free has its correction solved again where
    /// it landed, with that bone held; and a rejected step's bounds are forgotten. Before, the
    /// cone of a spine bone caught and released it at every other pull, the rejected pulls cut
    /// the pull to a quarter, and the budget ran out wherever the pull had got: on real motion
    /// retargeted onto Rigify's metarig (getup_facedown, frames 108 to 109 in 41 steps, each
    /// solved cold at 100 iterations) adjacent answers differed by up to 0.866 rad (22 steps
    /// above 0.05 rad) at 60 iterations a solve (the budget of 50 spent, then FABRIK's reaching
    /// and the steps again); now by up to 0.203 rad (4 steps) at 47, and the distances reached
    /// vary smoothly with the targets except where the cold solve settles in the other of two
    /// local minima (a spine bone on either side of its cone's tip). On the whole real-motion
    /// bench (`bench/real_motion.py`) the frames turning a bone more than the motion does went
    /// 46 -> 25 without poles and 18 -> 7 with them, the mean joint error 32.0 -> 32.8 and
    /// 18.1 -> 18.0 mm.
    ///
    /// Where a bone the steps turn has a limit, a run that meets the goals is followed by a
    /// second from where it ended, with what is left of `budget.steps` and `budget.restart`
    /// more: the active set empty, the pull at its full length and no momentum (an adaptive
    /// restart, as momentum methods are restarted when their steps stop making progress:
    /// O'Donoghue & Candès, "Adaptive restart for accelerated gradient schemes", 2015). Should
    /// that run not meet the goals, or end further from them than the first without finishing
    /// them (to [`FINISH_FRACTION`] of the tolerance), the first run's answer stands. The first
    /// run ends where its path left it (settled, after [`RELAX_ITERATIONS`] pulls while a limit
    /// holds a bone, with its shortest pull rejected, ...), so two starts of one problem (a warm
    /// frame and the cold solve of that frame) ended apart; the restart brings them together.
    ///
    /// Every such run is restarted, not only one that ends unsettled: which way a run ends is
    /// itself a choice a target moved by round-off can flip (a first run that settles at its 39th
    /// pull or is stopped at its 40th), and restarting one but not the other moved the answer by
    /// up to 4e-3 rad. Measured on the real-motion problems exported from the add-on (2224 solves;
    /// each warm-started frame to frame as a bake does and cold from its reference, and each cold
    /// solve repeated with every target moved by 1e-12 m and by 1e-10 m, three times):
    ///
    /// | restarted | solves a 1e-12 m move changes by > 1e-6 rad | a 1e-10 m move, by > 1e-4 rad | warm answers > 1e-3 rad from their cold solves | iterations a frame |
    /// |---|---|---|---|---|
    /// | runs that end unsettled | 12 | 12 | 400 | 37.4 |
    /// | every run | 1 | 2 | 347 | 45.2 |
    /// | every run, held bones' directions refreshed ([`DlsSteps::refresh_blocked`]) | 1 | 0 | 291 | 44.6 |
    /// | none, directions refreshed | 3 | 1 | 439 | 29.1 |
    ///
    /// (A third run made answers less continuous, 158 solves moved by a 1e-12 m move: it ends on
    /// its budget. The restart's first pull at 1/16 of full length saved 9% of the iterations
    /// but stopped short, a tested warm frame 4e-3 rad from its cold solve.) Before restarts,
    /// 506 warm answers were beyond 1e-3 rad at 29.4 iterations a frame. Without limits there
    /// is no active set to change under the pull, and its runs settle where it converges: none
    /// is restarted (on the paper's humanoid, tracked with the rest pose as the reference, warm
    /// answers stay within 5.9e-4 rad of cold ones at 26.3 iterations a frame; every run
    /// restarted took 32.8). Where limits bind almost everywhere it costs most: the constrained
    /// humanoid's tracking took 48.3 iterations a frame against 25.2 (37 with the restart but no
    /// refreshed directions; benchmarks.md §3).
    pub(crate) fn refine_toward(&mut self, problem: &Problem, pose: &mut Pose, fk: Option<&Frames>, reference: &Pose, tolerance: f64, budget: PullBudget) -> DlsOutcome {
        let mut r = self.reference.take().unwrap_or_else(|| std::mem::take(&mut self.spare_reference));
        r.clone_from(reference);
        self.reference = Some(r);
        let first = self.run(problem, pose, fk, tolerance, budget.steps, None);
        let left = budget.steps.saturating_sub(first.iterations).saturating_add(budget.restart);
        // (The joints of the run, as `begin` collected them. A bone whose only limit locks its
        // twist is never held at a bound: it swings only.)
        let limited = self.joints.iter().any(|j| {
            j.stretch.is_none()
                && j.bone.is_some_and(|b| {
                    let limit = &problem.rig().bone(b).limit;
                    limit.bounds_swing() || (limit.twist.is_some() && !self.freedom[b].holds_twist())
                })
        });
        if !(first.reached && limited && left > FINISH_ITERATIONS) {
            return first;
        }
        self.before_restart.clone_from(pose);
        let first_error: f64 = self.residual.iter().map(|r| r * r).sum();
        // (It stops as near where its steps converge as the first run was to: a cold solve's
        // restart starts on the goals, where `run` would take it for a warm one, and would stop
        // within [`SETTLED_NEAR`]; a target moved by round-off could then move the answer by
        // that much.)
        let again = self.run(problem, pose, None, tolerance, left, Some(self.settled));
        let again_error: f64 = self.residual.iter().map(|r| r * r).sum();
        if !again.reached || !(self.all_reached(problem, tolerance * FINISH_FRACTION) || again_error <= first_error) {
            // The restart lost the goals, or its budget ended before it finished them (to the
            // finish's fraction of the tolerance) and it left them further off than the first
            // run: the first answer stands.
            pose.clone_from(&self.before_restart);
            evaluate(problem, &self.tree_poles, pose, &mut self.frames, &mut self.residual);
        }
        DlsOutcome { iterations: first.iterations + again.iterations, reached: self.all_reached(problem, tolerance) }
    }

    /// The active set before a pull (at `pose`, whose frames are `self.frames`) is the bones at
    /// a bound: a direction blocked by a step that overshot (the steps that reach the goals keep
    /// it while they pull the bone back) would hold a bone off its bound, where no limit holds
    /// it, so a held bone more than [`AT_BOUND`] inside is released. A bone still at its bound
    /// gets the direction its clamp removes now ([`clamp_direction`] of a turn [`BOUND_PROBE`]
    /// out along the old one): the direction was recorded in world space when the clamp caught
    /// the bone, and its parents' turns and its own slide along the bound move the bound's
    /// normal since, so the pull's projection left part of the way along the bound blocked and
    /// the pull settled short of the nearest pose. On the real-motion problems (see
    /// [`DlsSteps::refine_toward`]) warm answers more than 1e-3 rad from their cold solves went
    /// 400 -> 332 with it alone (restarting only runs that end unsettled), at the same
    /// iterations there, and 347 -> 291 where every run is restarted. A hinge's direction is its
    /// axis, turned with the bone (its clamp removes whatever of a probe is off the axis, so a
    /// probe would keep an old tilt and grow it). A bone that swings only is probed as the steps
    /// turn it, keeping its twist ([`turned_local`]).
    fn refresh_blocked(&mut self, problem: &Problem, pose: &Pose) {
        for (b, v) in self.blocked.iter_mut().enumerate() {
            let Some(inward) = *v else { continue };
            let limit = &problem.rig().bone(b).limit;
            let state = limit.state(pose.rotations[b], AT_BOUND);
            // (A bone whose twist is locked always reads as at its twist bound; only its swing
            // can hold it.)
            let twist_holds = state.twist_at_bound && !limit.freedom().holds_twist();
            if !state.swing_at_bound && !twist_holds {
                *v = None;
                continue;
            }
            let (world, local) = (self.frames.rotations[b], pose.rotations[b]);
            if let Freedom::Hinge(h) = self.freedom[b] {
                let axis = world * h.axis;
                *v = Some(if axis.dot(inward) < 0.0 { -axis } else { axis });
                continue;
            }
            let wanted = turned_local(world, local, inward * -BOUND_PROBE, self.freedom[b].holds_twist().then(|| self.kept_twist[b]));
            let clamped = limit.clamp(wanted);
            // (A probe the clamp barely caught keeps the old direction.)
            if turns_more_than(clamped, wanted, PROBE_CAUGHT_TAN_HALF)
                && let Some(normal) = clamp_direction(world, local, wanted, clamped)
            {
                *v = Some(normal);
            }
        }
    }

    /// No reference for the next run (its buffer kept for the next that has one).
    fn drop_reference(&mut self) {
        if let Some(r) = self.reference.take() {
            self.spare_reference = r;
        }
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
            // Within the band a step is kept when it comes nearer the reference, or closes most
            // of the goals' gap (the corrections the pull's steps leave).
            let better = if pulling { trial_error <= band && (trial_distance < distance || (trial_error < 0.25 * error && error > 1e-12 * band)) } else { trial_error < error };
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
            if better && pulling {
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
                if pulling {
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

    /// The squared distance of `pose` from the reference that [`DlsSteps::refine_toward`]
    /// minimises: per joint, its bone's turn from the reference rotation over the gain, and the
    /// root's translation from the reference's.
    fn reference_distance(&mut self, problem: &Problem, pose: &Pose) -> f64 {
        let Some(reference) = &self.reference else { return 0.0 };
        let rig = problem.rig();
        let mut turns = std::mem::take(&mut self.trial_turns);
        turns.clear();
        turns.resize(self.joints.len(), None);
        let distance = self
            .joints
            .iter()
            .zip(&mut turns)
            .map(|(j, turn)| match j.bone {
                Some(b) if j.stretch.is_some() => {
                    let k = j.stretch.unwrap_or(1.0);
                    ((reference.scale(b) - pose.scale(b)) / (j.gain * k)).powi(2)
                }
                Some(b) if self.swings(b, j) => {
                    let Some(r) = j.ratios else {
                        // Swing only: the angle between the bone's direction and the reference's.
                        let (d, wanted) = (pose.rotations[b] * DVec3::Y, reference.rotations[b] * DVec3::Y);
                        return (d.cross(wanted).length().atan2(d.dot(wanted)) / j.gain).powi(2);
                    };
                    // Per-axis stiffness: the minimal arc from the bone's direction to the
                    // reference's, in the bone's own frame (about its X and Z), per axis over
                    // its gain.
                    let wanted = pose.rotations[b].conjugate() * reference.rotations[b] * DVec3::Y;
                    let arc = DVec3::Y.cross(wanted);
                    let w = arc.try_normalize().map_or(DVec3::ZERO, |a| a * arc.length().atan2(wanted.y));
                    (DVec3::new(w.x / r[0], 0.0, w.z / r[2]) / j.gain).length_squared()
                }
                Some(b) => {
                    let v = rotation_vector(pose.rotations[b].conjugate() * reference.rotations[b]);
                    *turn = Some(v);
                    let v = j.ratios.map_or(v, |r| DVec3::new(v.x / r[0], v.y / r[1], v.z / r[2]));
                    (v / j.gain).length_squared()
                }
                None => (rig.bone(0).rest_rotation * (reference.root_translation - pose.root_translation)).length_squared(),
            })
            .sum();
        self.trial_turns = turns;
        distance
    }

    /// Per joint at the current pose (`self.frames`, after [`DlsSteps::linearize`]): the turn
    /// toward the reference within its axes, into `self.toward`.
    fn turns_toward_reference(&mut self, problem: &Problem, pose: &Pose) {
        let Some(reference) = &self.reference else { return };
        let rig = problem.rig();
        self.toward.clear();
        self.pushing.clear();
        for (j, joint) in self.joints.iter().enumerate() {
            if let (Some(b), Some(k)) = (joint.bone, joint.stretch) {
                // A length: the scale change to the reference's, and its coordinate.
                let d = reference.scale(b) - pose.scale(b);
                self.toward.push((DVec3::X * d, [d / (joint.gain * k), 0.0, 0.0]));
                self.pushing.push(0.0);
                continue;
            }
            let (turn, gain) = match joint.bone {
                // world · local⁻¹ · ref = exp(world · rotvec(local⁻¹ · ref)) · world.
                Some(b) => {
                    let cached = if self.pose_turns_valid { self.pose_turns.get(j).copied().flatten() } else { None };
                    let v = cached.unwrap_or_else(|| rotation_vector(pose.rotations[b].conjugate() * reference.rotations[b]));
                    (self.frames.rotations[b] * v, joint.gain)
                }
                None => (rig.bone(0).rest_rotation * (reference.root_translation - pose.root_translation), 1.0),
            };
            let mut coords = [0.0; 3];
            let mut within = DVec3::ZERO;
            let swinging = joint.bone.is_some_and(|b| self.swings(b, joint));
            let mut full = turn;
            if let (true, Some(b)) = (swinging, joint.bone) {
                // Swing only: the minimal arc from the bone's direction to the reference's, on the
                // directions each axis moves it by (`a × d`).
                let world = self.frames.rotations[b];
                let d = world * DVec3::Y;
                let wanted = world * (pose.rotations[b].conjugate() * reference.rotations[b] * DVec3::Y);
                let arc = d.cross(wanted);
                let angle = arc.length().atan2(d.dot(wanted));
                full = arc.try_normalize().map_or(DVec3::ZERO, |a| a * angle);
                if let Some(toward) = (wanted - d * d.dot(wanted)).try_normalize() {
                    // An axis scaled by `s` (per-axis stiffness) moves `s` times as far per unit:
                    // its coordinate is `along / s²` (its metric's), its turn `along / s²` times it.
                    for ((coord, axis), s) in coords.iter_mut().zip(&joint.axes[..joint.count]).zip(joint.scales) {
                        let along = axis.cross(d).dot(toward) * angle;
                        *coord = along / (gain * s * s);
                        within += *axis * (along / (s * s));
                    }
                }
            } else if joint.bone.is_some() && !joint.world_axes {
                for ((coord, axis), s) in coords.iter_mut().zip(&joint.axes[..joint.count]).zip(joint.scales) {
                    let along = axis.dot(turn);
                    *coord = along / (gain * s * s);
                    within += *axis * (along / (s * s));
                }
            } else {
                coords = (turn / gain).to_array();
                within = turn;
            }
            self.toward.push((within, coords));
            self.pushing.push(joint.bone.and_then(|b| self.blocked[b]).map_or(0.0, |v| v.dot(full)));
        }
    }

    /// Whether `joint` (bone `b`) swings only: its twist is held (so it is no hinge).
    fn swings(&self, b: usize, joint: &Joint) -> bool {
        self.freedom[b].holds_twist() && !joint.world_axes
    }

    /// `self.rhs −= pull · J d`, `d` the turns toward the reference (`self.toward`).
    fn subtract_j_toward(&mut self, pull: f64) {
        for (j, joint) in self.joints.iter().enumerate() {
            let (turn, coords) = self.toward[j];
            if joint.stretch.is_some() {
                let x = coords[0] * pull;
                for l in &self.links[self.reach_start[j]..self.reach_start[j + 1]] {
                    for c in 0..3 {
                        self.rhs[l.row + c] -= l.lever[c] * x;
                    }
                }
                continue;
            }
            let x = match joint.bone {
                Some(_) => turn / joint.gain * pull,
                None => turn * pull,
            };
            for l in &self.links[self.reach_start[j]..self.reach_start[j + 1]] {
                let moved = match joint.bone {
                    Some(_) => x.cross(l.lever),
                    None => x * l.lever.x,
                };
                for c in 0..3 {
                    self.rhs[l.row + c] -= moved[c];
                }
                if let Some(spin) = l.spin {
                    for c in 0..3 {
                        self.rhs[l.row + 3 + c] -= x[c] * spin;
                    }
                }
            }
            for p in &self.pole_links[self.pole_start[j]..self.pole_start[j + 1]] {
                self.rhs[p.row] -= pull * (0..3).map(|c| p.per_axis[c] * coords[c]).sum::<f64>();
            }
        }
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
                self.blocked[b] = clamp_direction(world, local, wanted, clamped);
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

/// The Jacobian written out, for the methods that factor it (the transpose, pseudo-inverse, SVD-DLS
/// and SDLS solvers, `super::explicit`): the same unknowns, rows, limits and clamping loop as the
/// damped-least-squares steps above, with `J` formed densely and each step given as `Δθ = Jᵀ y`
/// (every method of the family steps within `J`'s row space, so a step is its `y`).
impl DlsSteps {
    /// Sets the steps up for `problem` at `pose` (inside every limit) with no reference: swinging
    /// bones keep `pose`'s twist. Returns the number of residual rows `m`.
    pub(super) fn start_explicit(&mut self, problem: &Problem, pose: &mut Pose) -> usize {
        self.drop_reference();
        self.begin(problem, pose, None).0
    }

    /// `J` at the current pose, column-major `m × n` into `jac`, and returns `n`, the number of
    /// unknowns (each bone's axes in joint order, then one per stretchy bone's length, then the
    /// root's three translations when it is free: [`DlsSteps::translates_root`]). Row `i` is the
    /// derivative of residual row `i` ([`DlsSteps::residual_rows`], target minus effector) along
    /// each unknown, negated: a step `Δθ` moves the residual by `−J Δθ` to first order. Column `c`
    /// of a bone is `a_c × lever` on a goal's position rows and `spin · a_c` on its orientation
    /// rows (thesis eq. A-16; the levers carry the gain and `√weight`); a length's column is its
    /// lever on the position rows of the goals it carries (its unknown is radian-like: the
    /// length's change over its IK tree's extent, over its gain).
    pub(super) fn dense_jacobian(&mut self, problem: &Problem, jac: &mut Vec<f64>) -> usize {
        self.linearize(problem);
        let m = self.residual.len();
        let n: usize = self.joints.iter().map(|j| j.count).sum();
        jac.clear();
        jac.resize(m * n, 0.0);
        let mut col = 0;
        for (j, joint) in self.joints.iter().enumerate() {
            let links = &self.links[self.reach_start[j]..self.reach_start[j + 1]];
            let poles = &self.pole_links[self.pole_start[j]..self.pole_start[j + 1]];
            for c in 0..joint.count {
                let column = &mut jac[(col + c) * m..(col + c + 1) * m];
                for l in links {
                    let (position, rotation) = match joint.bone {
                        // The root's translation moves a goal's position rows along each axis.
                        None => (DVec3::AXES[c] * l.lever.x, None),
                        // A length moves them along its lever, and no orientation.
                        Some(_) if joint.stretch.is_some() => (l.lever, None),
                        Some(_) => (joint.axes[c].cross(l.lever), l.spin.map(|s| joint.axes[c] * s)),
                    };
                    column[l.row..l.row + 3].copy_from_slice(&position.to_array());
                    if let Some(r) = rotation {
                        column[l.row + 3..l.row + 6].copy_from_slice(&r.to_array());
                    }
                }
                for p in poles {
                    column[p.row] = p.per_axis[c];
                }
            }
            col += joint.count;
        }
        n
    }

    /// The residual rows at the current pose: per goal `√weight · (target − effector)`, then
    /// its orientation's three rows if it has one; then one row per pole kept in a tree.
    pub(super) fn residual_rows(&self) -> &[f64] {
        &self.residual
    }

    /// Whether the last three unknowns are the root's translation (in rig units; every other
    /// unknown is a turn in radians, or a stretchy bone's radian-like length).
    pub(super) fn translates_root(&self) -> bool {
        self.joints.last().is_some_and(|j| j.bone.is_none())
    }

    /// Tries the step `Δθ = Jᵀ y` from `pose` (whose frames and residual are the current ones):
    /// each bone turned and clamped to its limit as every step is (the clamp's direction blocked
    /// for the next steps). Returns the trial's `|r|²` and the largest change of a residual row;
    /// [`DlsSteps::accept_trial`] moves `pose` there.
    pub(super) fn try_step(&mut self, problem: &Problem, pose: &Pose, y: &[f64]) -> (f64, f64) {
        self.rhs.copy_from_slice(y);
        self.try_step_from(problem, pose, None)
    }

    /// [`DlsSteps::try_step`] with the step given as the unknowns' changes `Δθ` (`n` entries,
    /// in the order of [`DlsSteps::dense_jacobian`]'s columns), for a method whose step is not
    /// in `J`'s row space (the quasi-Newton steps of `nlp`).
    pub(super) fn try_step_unknowns(&mut self, problem: &Problem, pose: &Pose, dtheta: &[f64]) -> (f64, f64) {
        self.try_step_from(problem, pose, Some(dtheta))
    }

    /// The trial of [`DlsSteps::try_step`] (`unknowns` `None`: `Δθ = Jᵀ self.rhs`) or of
    /// [`DlsSteps::try_step_unknowns`].
    fn try_step_from(&mut self, problem: &Problem, pose: &Pose, unknowns: Option<&[f64]>) -> (f64, f64) {
        let mut trial = std::mem::take(&mut self.trial);
        trial.clone_from(pose);
        self.apply_step_from(problem, pose, &mut trial, 0.0, false, unknowns);
        let error = evaluate(problem, &self.tree_poles, &trial, &mut self.trial_frames, &mut self.trial_residual);
        self.trial = trial;
        let moved = self.residual.iter().zip(&self.trial_residual).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        (error, moved)
    }

    /// Whether the last step tried had some bone clamped to its limit.
    pub(super) fn last_step_clamped(&self) -> bool {
        self.last_step_clamped
    }

    /// `pose` becomes the last [`DlsSteps::try_step`]'s trial, with its frames and residual.
    pub(super) fn accept_trial(&mut self, pose: &mut Pose) {
        std::mem::swap(pose, &mut self.trial);
        std::mem::swap(&mut self.frames, &mut self.trial_frames);
        std::mem::swap(&mut self.residual, &mut self.trial_residual);
    }

    /// Every goal of the current pose within `tolerance` (and every tree pole kept).
    pub(super) fn reached(&self, problem: &Problem, tolerance: f64) -> bool {
        self.all_reached(problem, tolerance)
    }
}

/// `√Σ_g (√w_g · |r_g| · reach_g)²` over the goals `beyond` marks (their targets beyond their
/// chains' reach), `r_g` a goal's three position rows of `rows` (from `goal_rows`; they carry
/// `√w_g` already, and the curvature, like `J Jᵀ`, scales with the weight `w_g`): the size of the
/// curvature Gauss–Newton's model lacks toward them, which the damped methods' λ² stands in for
/// out of reach (times a factor each method measured: [`OUT_OF_REACH_DAMPING`] for `dls`).
///
/// Why: the model `|r − J Δθ|²` of `|r|²` leaves out `S = Σᵢ rᵢ ∇²rᵢ`, which vanishes where the
/// goals are met but not at the least-squares pose out of reach. There the steps lack that
/// curvature and overshoot: a bone at lever `d` from the effector adds `|r_g| · d` to it along
/// its sideways turn, so up to `|r_g| · reach_g` on a straightened chain. With
/// Levenberg–Marquardt's shrinking λ the chain then swings from side to side while it settles
/// (12–45 zigzags over the last half of `dls`'s iterations on the report's chain); with SDLS's
/// undamped response and its clamps a tree falls into a two-step cycle. A λ² of that size stands
/// in for `S` (Levenberg–Marquardt with λ² proportional to the residual, as Fan & Yuan 2005
/// choose it, here in units of the reach; and the thesis' λ = |e| + reach / 100, §4.1.3, whose
/// |e| term is there for the same reason). Only goals out of reach count, where the residual
/// stays: toward reachable targets nothing changes.
pub(super) fn out_of_reach_curvature(problem: &Problem, beyond: &[bool], goal_rows: &[usize], rows: &[f64]) -> f64 {
    let topo = problem.topology();
    beyond
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b)
        .map(|(gi, _)| {
            let row = goal_rows[gi];
            let weight = problem.goals()[gi].weight;
            (DVec3::new(rows[row], rows[row + 1], rows[row + 2]).length() * weight.sqrt() * topo.chain_reach[gi]).powi(2)
        })
        .sum::<f64>()
        .sqrt()
}

/// One Gauss–Newton step (the Jacobian pseudo-inverse, Nilsson §2.4.2) of a free serial chain of
/// ball joints, on its joint positions: `p[0]` is the pinned top and bone k runs from `p[k]` to
/// `p[k + 1]`. The joints turn by the least total turn `Σ|ωₖ|²` that moves the end `p[m]` onto
/// `target` to first order: `ωₖ = rₖ × y` with `(Σₖ |rₖ|² I − rₖ rₖᵀ) y = target − p[m]`, `rₖ`
/// the lever from joint k to the end (`J Jᵀ` in closed form, as the DLS steps'). Bone k turns by
/// the sum of the turns of the joints above it, applied as the rotation with that half-angle
/// (Cayley) vector, so bone lengths are kept to round-off and the step is first-order exact:
/// near a solution the gap shrinks quadratically. Returns false, changing nothing, when `J Jᵀ`
/// is singular (a straight chain cannot lengthen or shorten to first order).
#[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN refused: see the determinant test
pub(crate) fn chain_position_step(p: &mut [DVec3], target: DVec3) -> bool {
    let m = p.len() - 1;
    let end = p[m];
    // Σ rₖ rₖᵀ, its six distinct entries.
    let (mut xx, mut yy, mut zz, mut xy, mut xz, mut yz) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for &joint in &p[..m] {
        let r = end - joint;
        xx += r.x * r.x;
        yy += r.y * r.y;
        zz += r.z * r.z;
        xy += r.x * r.y;
        xz += r.x * r.z;
        yz += r.y * r.z;
    }
    let (a00, a11, a22, a01, a02, a12) = (yy + zz, xx + zz, xx + yy, -xy, -xz, -yz);
    // Symmetric inverse by cofactors.
    let (c00, c01, c02) = (a11 * a22 - a12 * a12, a02 * a12 - a01 * a22, a01 * a12 - a02 * a11);
    let (c11, c12, c22) = (a00 * a22 - a02 * a02, a01 * a02 - a00 * a12, a00 * a11 - a01 * a01);
    let det = a00 * c00 + a01 * c01 + a02 * c02;
    let trace = a00 + a11 + a22;
    // (Negated so that a NaN determinant is refused too.)
    if !(det > SINGULAR_GRAM * trace * trace * trace) {
        return false;
    }
    // y / 2, so that the half turns below are sums of rₖ × (y / 2).
    let d = (target - end) * (0.5 / det);
    let half_y = DVec3::new(c00 * d.x + c01 * d.y + c02 * d.z, c01 * d.x + c11 * d.y + c12 * d.z, c02 * d.x + c12 * d.y + c22 * d.z);
    // `a`: half the summed turn of the joints above bone k, its rotation's Cayley vector; the
    // rotation is v + c (a × v + a × (a × v)), c = 2 / (1 + |a|²).
    let mut a = DVec3::ZERO;
    let mut old_head = p[0];
    for k in 0..m {
        a += (end - old_head).cross(half_y);
        let bone = p[k + 1] - old_head;
        old_head = p[k + 1];
        let t = a.cross(bone);
        p[k + 1] = p[k] + bone + (t + a.cross(t)) * (2.0 / (1.0 + a.length_squared()));
    }
    true
}

/// `J Jᵀ` of [`chain_position_step`] counts as singular below this determinant relative to its
/// trace cubed.
const SINGULAR_GRAM: f64 = 1e-15;

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

/// Forward kinematics of `pose` into `frames` and the residual (rows as `J`'s) into `residual`;
/// returns `|r|²`. `tree_poles` are the goals with a residual row for their pole's swivel.
fn evaluate(problem: &Problem, tree_poles: &[usize], pose: &Pose, frames: &mut Frames, residual: &mut [f64]) -> f64 {
    problem.rig().forward_into(pose, frames);
    self::residual(problem, tree_poles, frames, residual)
}

/// The residual (rows as `J`'s) of the pose whose forward kinematics is `frames`, into
/// `residual`; returns `|r|²`.
fn residual(problem: &Problem, tree_poles: &[usize], frames: &Frames, residual: &mut [f64]) -> f64 {
    let mut row = 0;
    for gi in 0..problem.goals().len() {
        let (position, orientation) = goal_residual(problem, gi, frames);
        residual[row..row + 3].copy_from_slice(&position.to_array());
        row += 3;
        if let Some(r) = orientation {
            residual[row..row + 3].copy_from_slice(&r.to_array());
            row += 3;
        }
    }
    for &gi in tree_poles {
        residual[row] = pole_residual(problem, gi, frames);
        row += 1;
    }
    residual.iter().map(|x| x * x).sum()
}

/// The residual row of goal `gi`'s pole kept in a tree: `−√weight · reach ·` its chain's swivel
/// from the pole ([`pole_swivel`]).
fn pole_residual(problem: &Problem, gi: usize, frames: &Frames) -> f64 {
    let top = pole_top(problem, gi);
    let swivel = pole_swivel(problem, gi, frames.rotations[top], frames.heads[top]);
    -swivel * problem.goals()[gi].weight.sqrt() * problem.topology().chain_reach[gi]
}

/// Goal `gi`'s rows of the residual at the pose whose forward kinematics is `frames`:
/// `√weight · (target − effector)`, and for an orientation goal `√weight · reach ·` the rotation
/// vector from the effector's frame to the target frame.
fn goal_residual(problem: &Problem, gi: usize, frames: &Frames) -> (DVec3, Option<DVec3>) {
    let g = &problem.goals()[gi];
    let w = g.weight.sqrt();
    let position = (g.target - frames.effector(g.bone, g.use_tail)) * w;
    let orientation = g.orientation.map(|q| {
        rotation_vector((q * frames.rotations[g.bone].conjugate()).normalize()) * (w * problem.angle_scale(gi))
    });
    (position, orientation)
}

/// The error the steps minimise at the pose whose forward kinematics is `frames`: the squared
/// norm of every goal's residual rows, with the swivel rows of poles kept in trees. (A pole on a
/// lone chain has no row: it turns the chain at the start, as Blender's does.)
pub(crate) fn goal_error(problem: &Problem, frames: &Frames) -> f64 {
    let goals = problem.goals();
    let topo = problem.topology();
    (0..goals.len())
        .map(|gi| {
            let (position, orientation) = goal_residual(problem, gi, frames);
            let pole = if goals[gi].pole.is_some() && !topo.is_lone_chain(gi) { pole_residual(problem, gi, frames).powi(2) } else { 0.0 };
            position.length_squared() + orientation.map_or(0.0, |r| r.length_squared()) + pole
        })
        .sum()
}

/// The top bone of goal `gi`'s chain, whose frame a pole turns (see [`pole_swivel`]).
fn pole_top(problem: &Problem, gi: usize) -> usize {
    *problem.topology().moved[gi].last().unwrap_or(&problem.goals()[gi].bone)
}

/// A tree pole is kept when its swivel is within this (radians).
const POLE_TOLERANCE: f64 = 1e-4;

/// The turn (radians) by which a tree pole's swivel is differentiated numerically.
const SWIVEL_STEP: f64 = 1e-7;

/// The swivel of goal `gi`'s chain from its pole, with the chain's top bone at `rot`, `head`:
/// the signed angle, about the axis from `head` to the goal's target, from the pole to the top
/// bone's `X·cos a + Z·sin a` (`a` the pole angle), both seen along that axis. Zero is Sinew's
/// convention for poles in trees (as FABRIK's `keep_tree_poles` turns the chain): the bend plane
/// turns to the pole. Zero when either is along the axis.
fn pole_swivel(problem: &Problem, gi: usize, rot: glam::DQuat, head: DVec3) -> f64 {
    let g = &problem.goals()[gi];
    let Some(pole) = g.pole else { return 0.0 };
    let Some(axis) = (g.target - head).try_normalize() else { return 0.0 };
    let flat = |v: DVec3| (v - axis * v.dot(axis)).try_normalize();
    let (sin, cos) = pole.angle.sin_cos();
    let (Some(side), Some(toward)) = (flat(rot * DVec3::new(cos, 0.0, sin)), flat(pole.target - head)) else {
        return 0.0;
    };
    toward.cross(side).dot(axis).atan2(toward.dot(side))
}

#[cfg(test)]
mod tests {
    use glam::DQuat;

    use super::*;
    use crate::geometry::angle_between;
    use crate::goal::Goal;
    use crate::limits::{HingeLimit, JointLimit, Swing};
    use crate::rig::{Bone, Rig};

    /// A bent five-bone chain (lengths 1..5) and a target 1% of its reach off its end.
    fn bent_chain() -> (Vec<DVec3>, Vec<f64>, DVec3) {
        let dirs = [DVec3::Y, DVec3::new(0.3, 1.0, 0.1), DVec3::new(0.8, 0.5, -0.2), DVec3::new(1.0, -0.2, 0.3), DVec3::new(0.4, -0.9, 0.5)];
        let lengths: Vec<f64> = (1..=5).map(f64::from).collect();
        let mut p = vec![DVec3::ZERO];
        for (d, l) in dirs.iter().zip(&lengths) {
            p.push(*p.last().unwrap() + d.normalize() * *l);
        }
        let target = p[5] + DVec3::new(0.05, 0.1, -0.08);
        (p, lengths, target)
    }

    #[test]
    fn chain_position_steps_keep_lengths_and_converge_quadratically() {
        let (mut p, lengths, target) = bent_chain();
        let top = p[0];
        let mut gaps = vec![(p[5] - target).length()];
        for _ in 0..3 {
            assert!(chain_position_step(&mut p, target));
            gaps.push((p[5] - target).length());
            assert_eq!(p[0], top, "the top is pinned");
            for (k, l) in lengths.iter().enumerate() {
                assert!(((p[k + 1] - p[k]).length() - l).abs() < 1e-12, "bone {k} keeps its length");
            }
        }
        // Quadratic: each gap at most a constant times the previous one squared.
        for w in gaps.windows(2) {
            assert!(w[1] <= w[0] * w[0], "gaps {gaps:?}");
        }
        assert!(gaps[3] < 1e-9, "gaps {gaps:?}");
    }

    #[test]
    fn chain_position_step_refuses_a_straight_chain() {
        // Straight along +Y: no turn lengthens or shortens it to first order.
        let mut p: Vec<DVec3> = (0..4).map(|k| DVec3::Y * f64::from(k)).collect();
        let before = p.clone();
        assert!(!chain_position_step(&mut p, DVec3::Y * 2.5));
        assert_eq!(p, before);
    }

    /// A torso with two offset arms: a free root, a hinge elbow, a stiff shoulder; one goal with
    /// an orientation, one with a pole kept in the tree; and a second root with a goal of its own.
    /// Per-axis stiffness on the root (its own three axes), the spine (blocked in the test below)
    /// and the right forearm (twist locked: it swings only). Every kind of unknown and row.
    fn torso() -> (Problem, Pose) {
        let bone = |name: &str, parent: Option<usize>, head: DVec3, rot: DQuat, length: f64, limit: JointLimit| Bone {
            name: name.into(),
            parent,
            rest_head: head,
            rest_rotation: rot,
            length,
            limit,
        };
        let free = JointLimit::FREE;
        let hinge = JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: -2.5, max: 0.5 }), ..free };
        let stiff = JointLimit { stiffness: 0.3, ..free };
        let axes = |a: [f64; 3]| JointLimit { stiffness: a[0].max(a[1]).max(a[2]), stiffness_axes: Some(a), ..free };
        let swinging = JointLimit { twist: Some(crate::limits::TwistLimit { min: 0.0, max: 0.0 }), ..axes([0.2, 0.0, 0.7]) };
        let rig = Rig::new(vec![
            bone("root", None, DVec3::new(0.1, 0.0, 0.2), DQuat::IDENTITY, 1.0, axes([0.5, 0.2, 0.0])),
            bone("spine", Some(0), DVec3::new(0.0, 1.0, 0.0), DQuat::from_rotation_x(0.1), 1.0, axes([0.6, 0.1, 0.3])),
            bone("arm.L", Some(1), DVec3::new(0.3, 1.0, 0.0), DQuat::from_rotation_z(-1.5), 0.8, free),
            bone("fore.L", Some(2), DVec3::new(0.0, 0.8, 0.0), DQuat::from_rotation_x(-0.3), 0.7, hinge),
            bone("arm.R", Some(1), DVec3::new(-0.3, 1.0, 0.05), DQuat::from_rotation_z(1.5), 0.8, stiff),
            bone("fore.R", Some(4), DVec3::new(0.0, 0.8, 0.0), DQuat::from_rotation_x(-0.2), 0.7, swinging),
            // A second root (a prop): the root's translation does not carry it.
            bone("prop", None, DVec3::new(2.0, 0.0, 0.0), DQuat::from_rotation_z(0.3), 0.5, free),
            bone("prop.tip", Some(6), DVec3::new(0.0, 0.5, 0.0), DQuat::IDENTITY, 0.4, free),
        ])
        .unwrap();
        let goals = vec![
            Goal::new(3, DVec3::new(1.2, 1.5, 0.6)).with_orientation(DQuat::IDENTITY).with_weight(2.0),
            Goal::new(5, DVec3::new(-1.1, 1.4, 0.5)).with_pole(DVec3::new(-0.5, 1.0, -2.0), 0.3),
            Goal::new(7, DVec3::new(2.3, 0.6, 0.2)),
        ];
        let mut problem = Problem::new(rig, goals, RootMode::Free).unwrap();
        let pose = Pose {
            rotations: (0..8).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, 0.1 * i as f64, -0.05 * i as f64, 0.2)).collect(),
            root_translation: DVec3::new(0.05, -0.02, 0.1),
            scales: Vec::new(),
        };
        let mut pose = pose;
        pose.rotations[3] = DQuat::from_rotation_x(-0.7);
        // A pure swing, inside the forearm's locked twist.
        pose.rotations[5] = DQuat::from_axis_angle(DVec3::new(0.6, 0.0, 0.8), 0.5);
        // The orientation rows are linearised about a met orientation (their Jacobian is the
        // turn itself there, as the steps assume near convergence).
        let met = problem.rig().forward(&pose).rotations[3];
        problem.set_orientation(0, Some(met)).unwrap();
        (problem, pose)
    }

    /// `J` by central differences of step `eps`, a column per unknown of `steps`' joints
    /// (residual = target − effector, so `J` is minus its derivative).
    fn finite_difference_columns(problem: &Problem, pose: &Pose, steps: &DlsSteps, m: usize, eps: f64) -> Vec<Vec<f64>> {
        let mut columns = Vec::new();
        for joint in &steps.joints {
            for c in 0..joint.count {
                let plus = moved_residual(problem, pose, &steps.frames, joint, c, eps, &steps.tree_poles, m);
                let minus = moved_residual(problem, pose, &steps.frames, joint, c, -eps, &steps.tree_poles, m);
                columns.push((0..m).map(|i| -(plus[i] - minus[i]) / (2.0 * eps)).collect());
            }
        }
        columns
    }

    /// The steps' Gram matrix (lower triangle) equals `J Jᵀ` of `columns` within 1e-5, relative.
    fn assert_gram_matches(steps: &DlsSteps, columns: &[Vec<f64>], m: usize) {
        for i in 0..m {
            for j in 0..=i {
                let dense: f64 = columns.iter().map(|col| col[i] * col[j]).sum();
                let got = steps.gram.get(i, j);
                assert!((got - dense).abs() < 1e-5 * (1.0 + dense.abs()), "J Jᵀ[{i}][{j}] = {got} but finite differences give {dense}");
            }
        }
    }

    /// The residual after moving unknown `c` of `joint` by `eps`, as a step would.
    #[allow(clippy::too_many_arguments)] // a test helper: the step's inputs, spelled out
    fn moved_residual(problem: &Problem, pose: &Pose, frames: &Frames, joint: &Joint, c: usize, eps: f64, tree_poles: &[usize], m: usize) -> Vec<f64> {
        let mut p = pose.clone();
        match joint.bone {
            Some(b) if joint.stretch.is_some() => p.scales[b] += joint.gain * joint.stretch.unwrap_or(1.0) * eps,
            None => p.root_translation += problem.rig().bone(0).rest_rotation.conjugate() * (DVec3::AXES[c] * eps),
            Some(b) => {
                let world = frames.rotations[b];
                p.rotations[b] = pose.rotations[b] * from_rotation_vector(world.conjugate() * (joint.axes[c] * (eps * joint.gain)));
            }
        }
        let mut r = vec![0.0; m];
        evaluate(problem, tree_poles, &p, &mut Frames::default(), &mut r);
        r
    }

    /// The length unknowns of stretchy bones: their columns of `J` (through connected and offset
    /// children, to tails and heads, beside orientation rows they do not move) and the step they
    /// take match finite differences of the residual, the scales changing by `gain · k` times it.
    #[test]
    fn stretch_columns_match_finite_differences() {
        let bone = |name: &str, parent: Option<usize>, head: DVec3, rot: DQuat, length: f64, stretch: f64| Bone {
            name: name.into(),
            parent,
            rest_head: head,
            rest_rotation: rot,
            length,
            limit: JointLimit { stretch, ..JointLimit::FREE },
        };
        let rig = Rig::new(vec![
            bone("root", None, DVec3::ZERO, DQuat::from_rotation_x(0.2), 1.0, 0.3),
            // An offset child: its head moves with the root's scale, off the root's axis.
            bone("arm", Some(0), DVec3::new(0.2, 0.8, -0.1), DQuat::from_rotation_z(-0.7), 0.8, 0.1),
            bone("fore", Some(1), DVec3::new(0.0, 0.8, 0.0), DQuat::from_rotation_x(-0.4), 0.6, 1.0),
            bone("side", Some(0), DVec3::new(-0.2, 1.0, 0.0), DQuat::from_rotation_z(1.2), 0.5, 0.0),
        ])
        .unwrap();
        let goals = vec![
            Goal::new(2, DVec3::new(1.2, 1.4, 0.3)).with_orientation(DQuat::IDENTITY).with_weight(2.0),
            // Its head: the arm's scale moves it, its own does not.
            Goal { use_tail: false, ..Goal::new(2, DVec3::new(0.9, 1.2, 0.2)) },
            Goal::new(3, DVec3::new(-0.8, 1.3, 0.4)),
        ];
        let mut problem = Problem::new(rig, goals, RootMode::Pinned).unwrap();
        let pose = Pose {
            rotations: (0..4).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, 0.1 * i as f64, -0.05 * i as f64, 0.2)).collect(),
            root_translation: DVec3::ZERO,
            scales: vec![1.1, 0.9, 1.3, 1.0],
        };
        let met = problem.rig().forward(&pose).rotations[2];
        problem.set_orientation(0, Some(met)).unwrap();
        let mut steps = DlsSteps::default();
        steps.collect_joints(&problem);
        assert_eq!(steps.joints.iter().filter(|j| j.stretch.is_some()).count(), 3);
        // The fore bone's length moves neither the goal on its head nor the side bone.
        let fore = steps.joints.iter().position(|j| j.stretch.is_some() && j.bone == Some(2)).unwrap();
        assert_eq!(&steps.reaches[steps.reach_start[fore]..steps.reach_start[fore + 1]], &[0]);
        let m = 6 + 3 + 3;
        for v in [&mut steps.residual, &mut steps.rhs, &mut steps.trial_residual] {
            v.resize(m, 0.0);
        }
        steps.layout_gram(&problem, m);
        steps.blocked = vec![None; 4];
        evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
        steps.linearize(&problem);
        steps.gram_into();
        let eps = 1e-6;
        let columns = finite_difference_columns(&problem, &pose, &steps, m, eps);
        assert_gram_matches(&steps, &columns, m);
        // The step on a length: Jᵀ y, times gain · k on the scale.
        let y: Vec<f64> = (0..m).map(|i| 1e-3 * ((i as f64 * 1.3).cos())).collect();
        steps.rhs.copy_from_slice(&y);
        let mut trial = pose.clone();
        steps.kept_twist = pose.rotations.iter().map(|&q| swing_twist_y(q).1).collect();
        steps.apply_step(&problem, &pose, &mut trial, 0.0, false);
        let mut k = 0;
        for joint in &steps.joints {
            if let (Some(b), Some(per)) = (joint.bone, joint.stretch) {
                let step: f64 = (0..m).map(|i| columns[k][i] * y[i]).sum();
                let expected = pose.scales[b] + joint.gain * per * step;
                assert!((trial.scales[b] - expected).abs() < 1e-9, "bone {b}: scale {} but finite differences give {expected}", trial.scales[b]);
            }
            k += joint.count;
        }
    }

    #[test]
    fn implicit_jacobian_matches_finite_differences() {
        let (problem, pose) = torso();
        let mut steps = DlsSteps::default();
        steps.collect_joints(&problem);
        assert_eq!(steps.tree_poles, vec![1], "the pole is kept in the tree");
        let m = 6 + 3 + 3 + 1;
        steps.residual.resize(m, 0.0);
        steps.rhs.resize(m, 0.0);
        steps.layout_gram(&problem, m);
        steps.blocked = vec![None; 8];
        // A blocked direction on the spine: its axes are projected.
        steps.blocked[1] = Some(DVec3::new(0.6, 0.0, 0.8));
        evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
        steps.linearize(&problem);
        steps.gram_into();
        // J by central differences, a column per unknown (residual = target − effector, so J is
        // minus its derivative).
        let eps = 1e-6;
        let columns = finite_difference_columns(&problem, &pose, &steps, m, eps);
        // Unknowns: a hinge's one axis; three for a bone an orientation goal moves (less the
        // blocked direction's, which projects them onto a plane); two across any other bone
        // (one when blocked); three for the root's translation.
        for joint in &steps.joints {
            let expected = match joint.bone {
                None => 3,
                Some(b) if matches!(steps.freedom[b], Freedom::Hinge(_)) => 1,
                Some(b) if !steps.freedom[b].holds_twist() => 3,
                Some(b) if steps.blocked[b].is_some() => 1,
                Some(_) => 2,
            };
            assert_eq!(joint.count, expected, "{joint:?}");
        }
        assert!(steps.freedom.contains(&Freedom::Ball));
        assert!(steps.freedom[5].holds_twist(), "the forearm swings only");
        assert_eq!(steps.joints.iter().filter(|j| j.ratios.is_some()).count(), 3, "per-axis stiffness on three bones");
        assert_gram_matches(&steps, &columns, m);
        // The step: Jᵀ y per unknown, applied as each bone's world turn.
        let y: Vec<f64> = (0..m).map(|i| 1e-3 * ((i as f64 * 1.7).sin())).collect();
        steps.rhs.copy_from_slice(&y);
        let mut trial = pose.clone();
        steps.kept_twist = pose.rotations.iter().map(|&q| swing_twist_y(q).1).collect();
        steps.apply_step(&problem, &pose, &mut trial, 0.0, false);
        let mut k = 0;
        for joint in &steps.joints {
            let mut turn = DVec3::ZERO;
            for c in 0..joint.count {
                let step: f64 = (0..m).map(|i| columns[k][i] * y[i]).sum();
                turn += joint.axes[c] * step * joint.gain;
                k += 1;
            }
            match joint.bone {
                None => {
                    let t = problem.rig().bone(0).rest_rotation.conjugate() * turn;
                    assert!((trial.root_translation - (pose.root_translation + t)).length() < 1e-9);
                }
                Some(b) => {
                    let world = steps.frames.rotations[b];
                    let mut expected = pose.rotations[b] * from_rotation_vector(world.conjugate() * turn);
                    if steps.freedom[b].holds_twist() {
                        // A swinging bone keeps its twist.
                        expected = swing_twist_y(expected).0 * steps.kept_twist[b];
                    }
                    let got = trial.rotations[b];
                    assert!(angle_between(got, expected) < 1e-9, "bone {b}: turned {got:?}, finite differences give {expected:?}");
                }
            }
        }
    }

    /// The dense `J` the factoring methods use is the implicit one of the steps: `J Jᵀ` equals
    /// the Gram matrix block by block, and a step `Jᵀ y` through [`DlsSteps::try_step`] turns
    /// the bones as the steps' own `apply_step` does.
    #[test]
    fn the_dense_jacobian_is_the_steps_jacobian() {
        let (problem, pose) = torso();
        dense_jacobian_matches(&problem, pose, 6 + 3 + 3 + 1);
        // With stretchy bones (a length unknown each, before the free root's translation).
        let bone = |name: &str, parent: Option<usize>, head: DVec3, length: f64, stretch: f64| Bone {
            name: name.into(),
            parent,
            rest_head: head,
            rest_rotation: DQuat::from_rotation_z(0.3),
            length,
            limit: JointLimit { stretch, ..JointLimit::FREE },
        };
        let rig = Rig::new(vec![
            bone("root", None, DVec3::ZERO, 1.0, 0.3),
            bone("arm", Some(0), DVec3::new(0.2, 1.0, -0.1), 0.8, 0.7),
            bone("fore", Some(1), DVec3::new(0.0, 0.8, 0.0), 0.6, 0.0),
        ])
        .unwrap();
        let goals = vec![Goal::new(2, DVec3::new(1.2, 1.9, 0.3)).with_orientation(DQuat::from_rotation_x(0.4)), Goal::new(1, DVec3::new(0.5, 1.5, 0.2))];
        let mut problem = Problem::new(rig, goals, RootMode::Free).unwrap();
        let pose = Pose {
            rotations: (0..3).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, 0.1 * i as f64, -0.2, 0.1)).collect(),
            root_translation: DVec3::new(0.1, 0.0, -0.1),
            scales: vec![1.2, 0.8, 1.0],
        };
        // (At its orientation: the rotation rows' derivative is `spin · a` there.)
        let met = problem.rig().forward(&pose).rotations[2];
        problem.set_orientation(0, Some(met)).unwrap();
        let steps = dense_jacobian_matches(&problem, pose, 6 + 3);
        assert_eq!(steps.joints.iter().filter(|j| j.stretch.is_some()).count(), 2);
    }

    /// [`the_dense_jacobian_is_the_steps_jacobian`] on one problem with `m` rows.
    fn dense_jacobian_matches(problem: &Problem, mut pose: Pose, rows: usize) -> DlsSteps {
        let mut steps = DlsSteps::default();
        let m = steps.start_explicit(problem, &mut pose);
        assert_eq!(m, rows);
        let mut jac = Vec::new();
        let n = steps.dense_jacobian(problem, &mut jac);
        assert_eq!(n, steps.joints.iter().map(|j| j.count).sum::<usize>());
        assert!(steps.translates_root());
        steps.gram_into();
        for i in 0..m {
            for j in 0..=i {
                let dense: f64 = (0..n).map(|c| jac[c * m + i] * jac[c * m + j]).sum();
                let got = steps.gram.get(i, j);
                assert!((got - dense).abs() < 1e-12 * (1.0 + dense.abs()), "J Jᵀ[{i}][{j}] = {got}, dense {dense}");
            }
        }
        // A small step: the residual moves by −J Jᵀ y to first order.
        let y: Vec<f64> = (0..m).map(|i| 1e-6 * ((i as f64 * 0.7).cos())).collect();
        let before = steps.residual_rows().to_vec();
        steps.try_step(problem, &pose, &y);
        let mut after = pose.clone();
        steps.accept_trial(&mut after);
        let jty: Vec<f64> = (0..n).map(|c| (0..m).map(|i| jac[c * m + i] * y[i]).sum()).collect();
        for i in 0..m {
            let predicted: f64 = -(0..n).map(|c| jac[c * m + i] * jty[c]).sum::<f64>();
            let moved = steps.residual_rows()[i] - before[i];
            assert!((moved - predicted).abs() < 1e-3 * predicted.abs().max(1e-9), "row {i}: moved {moved:e}, J Jᵀ y predicts {predicted:e}");
        }
        steps
    }

    /// The metric toward the reference is the steps' own: at a pose (no blocked direction) the
    /// coordinates of the turns toward the reference, each over its axis's gain, add up to
    /// [`DlsSteps::reference_distance`] (per-axis stiffness included), up to the swinging bone's
    /// first-order axes.
    #[test]
    fn the_reference_metric_is_the_coordinates_over_the_gains() {
        let (problem, pose) = torso();
        let mut steps = DlsSteps::default();
        let reference = Pose {
            rotations: (0..8).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, -0.07 * i as f64, 0.1, 0.03 * i as f64)).collect(),
            root_translation: DVec3::new(0.3, 0.1, -0.2),
            scales: Vec::new(),
        };
        let mut reference = reference;
        // The swinging forearm's reference keeps its (locked) twist.
        reference.rotations[5] = DQuat::from_axis_angle(DVec3::new(-0.3, 0.0, 1.0).normalize(), 0.2);
        steps.reference = Some(reference);
        steps.collect_joints(&problem);
        let m = 6 + 3 + 3 + 1;
        steps.residual.resize(m, 0.0);
        steps.blocked = vec![None; 8];
        evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
        steps.linearize(&problem);
        steps.turns_toward_reference(&problem, &pose);
        let from_coords: f64 = steps.toward.iter().map(|(_, c)| c.iter().map(|x| x * x).sum::<f64>()).sum();
        let distance = steps.reference_distance(&problem, &pose);
        assert!((from_coords - distance).abs() < 0.02 * distance, "coordinates give {from_coords}, the distance is {distance}");
        // Without the swinging bone and the hinge (whose reference here is off its axis),
        // exactly.
        let kept = |j: &Joint| j.bone != Some(5) && j.bone != Some(3);
        let exact: f64 = steps.joints.iter().zip(&steps.toward).filter(|(j, _)| kept(j)).map(|(_, (_, c))| c.iter().map(|x| x * x).sum::<f64>()).sum();
        let mut only = steps.clone();
        only.joints.retain(kept);
        let d = only.reference_distance(&problem, &pose);
        assert!((exact - d).abs() < 1e-9 * d, "coordinates give {exact}, the distance is {d}");
    }

    /// A bone stiff about its local X but free about Z reaches by turning about Z: its local
    /// rotation's X component shrinks, its Z component grows, against the same bone free (and
    /// the other way round when it is stiff about Z), with the DLS solver and with FABRIK
    /// toward a reference (whose steps toward it are these).
    #[test]
    fn a_bone_stiff_about_x_reaches_by_turning_about_z() {
        use crate::solver::{Method, SolveSettings};
        let solve = |method: Method, stiffness: Option<[f64; 3]>| {
            let limit = JointLimit { stiffness: stiffness.map_or(0.0, |a| a[0].max(a[1]).max(a[2])), stiffness_axes: stiffness, ..JointLimit::FREE };
            let bone = |name: &str, parent: Option<usize>, head: DVec3, limit: JointLimit| Bone {
                name: name.into(),
                parent,
                rest_head: head,
                rest_rotation: DQuat::IDENTITY,
                length: 1.0,
                limit,
            };
            let rig = Rig::new(vec![
                bone("upper", None, DVec3::ZERO, limit),
                bone("lower", Some(0), DVec3::Y, JointLimit::FREE),
                bone("hand", Some(1), DVec3::Y, JointLimit::FREE),
            ])
            .unwrap();
            // Reached by bending forward (about X) and sideways (about Z).
            let mut problem = Problem::new(rig, vec![Goal::new(2, DVec3::new(-1.0, 1.6, 1.0))], RootMode::Pinned).unwrap();
            let rest = Pose { rotations: vec![DQuat::IDENTITY; 3], root_translation: DVec3::ZERO, scales: Vec::new() };
            problem.set_reference(Some(&rest)).unwrap();
            let mut solver = method.solver(SolveSettings::default()).unwrap();
            let solution = solver.solve(&problem, &rest).unwrap();
            assert!(solution.reached, "{method:?} {stiffness:?}: {:?}", solution.residuals);
            rotation_vector(solution.pose.rotations[0])
        };
        for method in [Method::Dls, Method::Fabrik] {
            let free = solve(method, None);
            let stiff_x = solve(method, Some([0.9, 0.0, 0.0]));
            let stiff_z = solve(method, Some([0.0, 0.0, 0.9]));
            assert!(free.x.abs() > 0.05 && free.z.abs() > 0.05, "{method:?}: free {free}");
            assert!(stiff_x.x.abs() < 0.5 * free.x.abs() && stiff_x.z.abs() > free.z.abs(), "{method:?}: stiff about X {stiff_x}, free {free}");
            assert!(stiff_z.z.abs() < 0.5 * free.z.abs() && stiff_z.x.abs() > free.x.abs(), "{method:?}: stiff about Z {stiff_z}, free {free}");
        }
    }

    /// The turn toward the reference moves the residual by `−J d` to first order.
    #[test]
    fn the_pull_toward_the_reference_moves_the_residual_by_j_d() {
        let (problem, pose) = torso();
        let mut steps = DlsSteps::default();
        let reference = Pose {
            rotations: (0..8).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, -0.07 * i as f64, 0.1, 0.03 * i as f64)).collect(),
            root_translation: DVec3::new(0.3, 0.1, -0.2),
            scales: Vec::new(),
        };
        steps.reference = Some(reference);
        steps.collect_joints(&problem);
        let m = 6 + 3 + 3 + 1;
        for v in [&mut steps.residual, &mut steps.trial_residual, &mut steps.rhs] {
            v.resize(m, 0.0);
        }
        steps.layout_gram(&problem, m);
        steps.blocked = vec![None; 8];
        steps.kept_twist = pose.rotations.iter().map(|&q| swing_twist_y(q).1).collect();
        evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
        let r0 = steps.residual.clone();
        steps.linearize(&problem);
        steps.turns_toward_reference(&problem, &pose);
        let beta = 1e-6;
        steps.rhs.fill(0.0);
        steps.subtract_j_toward(beta);
        let predicted = steps.rhs.clone();
        steps.rhs.fill(0.0);
        let mut trial = pose.clone();
        steps.apply_step(&problem, &pose, &mut trial, beta, false);
        let mut r1 = vec![0.0; m];
        evaluate(&problem, &steps.tree_poles, &trial, &mut Frames::default(), &mut r1);
        for i in 0..m {
            let got = r1[i] - r0[i];
            assert!((got - predicted[i]).abs() < 1e-3 * beta, "row {i}: moved {got:e}, J d predicts {:e}", predicted[i]);
        }
    }
}
