//! The pull toward a reference pose ([`DlsSteps::refine_toward`]): among the poses that meet the
//! goals, the steps move to the one nearest the reference, sequential quadratic programming on
//! `min |θ − θ_ref|²` subject to the goals (the secondary task in the null space of Nilsson's
//! thesis §2.4). Each step is `Δθ = β d + Jᵀ (J Jᵀ + λ² I)⁻¹ (r − β J d)`, `d` the turn to the
//! reference. Where limits bind, the bones at a bound are the active set of a bound-constrained
//! least-distance problem (Nocedal & Wright ch. 16; Baerlocher & Boulic's clamping loop), and a
//! run that meets the goals is restarted once (O'Donoghue & Candès 2015).
//!
//! Here are the pull's constants, its budget ([`PullBudget`]), the distance it minimises and the
//! turns toward the reference a step adds; the steps themselves are the parent module's
//! ([`DlsSteps::run`]).

use glam::DVec3;

use super::{DlsOutcome, DlsSteps, Joint, bound_normal, clamp_direction, evaluate, turned_local};
use crate::geometry::{rotation_vector, turns_more_than};
use crate::limits::Freedom;
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// While [`DlsSteps::refine_toward`] moves toward the reference it counts the goals as met within
/// this many tolerances (their squared error within its square): each step's chord correction
/// leaves them a little off, which the plain steps after it close quadratically.
pub(super) const RELAX_BAND: f64 = 10.0;
/// ... or within this fraction of the longest chain's reach, when that is more.
pub(super) const RELAX_BAND_REACH: f64 = 1e-3;
/// The longest pull toward the reference, in multiples of the turn to it (see
/// [`DlsSteps::refine_toward`]): the first-order step. Longer pulls (doubling up to 64) cycled
/// between kept and overshooting steps, because the goals' curvature makes the best length differ
/// between directions (by a factor near 5 on a 10-bone chain).
pub(super) const PULL_MAX: f64 = 1.0;
/// The shortest pull toward the reference (a rejected pull is shortened by [`PULL_SHRINK`] down
/// to it, from [`PULL_MAX`]); when even it is rejected the pull ends. It used to go on, damping
/// harder at every rejection: on real motion capture a solve spent 15 of its 50 steps so, and
/// ended 0.07 mm off its goals.
pub(super) const PULL_MIN: f64 = 1e-3;
/// A rejected pull is tried again this many times as long; a kept one makes the next
/// [`PULL_GROW`] times as long (up to [`PULL_MAX`]). Halving and growing by half, against
/// quartering and doubling, on the real-motion problems the add-on exports (2224 solves, each
/// warm-started frame to frame as a bake does and cold from its reference): warm answers more
/// than 1e-3 rad from their cold solves 291 -> 228, at 45.8 iterations a warm frame against 44.6
/// (cold 61.6 against 62.2). Under a 1e-12 m move of every target (three random moves each) 2
/// cold solves moved a bone by more than 1e-6 rad (by 6.5e-6 and 2.7e-6 rad) against 1 (by
/// 5.9e-5): each a restart that ends at [`RELAX_ITERATIONS`] near a saddle of the distance, which
/// one start leaves (its turn growing by a third a step) and another settles at first; which
/// solves do is chance. Quartering let a pull whose length the goals' curvature limits to about
/// 1/4 cycle through 1/8 (kept), 1/4 (kept) and 1/2 (rejected), and ended the pull after five
/// rejections in a row where the shortest pull it had not tried might still have been kept. Measured around it (shrink / grow: warm answers beyond
/// 1e-3 rad, iterations a warm frame, before the finish's damping was reset after the pull):
/// 0.25 / 2 291, 44.6; 0.4 / 1.5 275, 43.5; 0.5 / 1.25 238, 43.6; 0.5 / 2 231, 49.3; 0.6 / 1.5
/// 224, 50.0; 0.7 / 1.5 235, 55.7.
pub(super) const PULL_SHRINK: f64 = 0.5;
/// See [`PULL_SHRINK`].
pub(super) const PULL_GROW: f64 = 1.5;
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
pub(super) const PULL_CORRECTIONS: u32 = 2;
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
pub(super) const MOMENTUM: f64 = 0.3;
/// Most steps one run of [`DlsSteps::refine_toward`] takes toward the reference while a limit
/// holds some bone (a pull restarted after it takes as many again).
pub(super) const RELAX_ITERATIONS: u32 = 40;
/// The steps [`DlsSteps::refine_toward`] keeps for finishing the goals at the end of its budget:
/// a pull cut by the budget still ends on the goals (from within the band the plain steps close
/// them in two or three, more where limits hold bones), rather than failing and leaving the solve
/// to another path (FABRIK's reaching, whose answer the steps then pull from elsewhere). 8, not
/// the 4 it was: with 4, real motion capture (`bench/real_motion.py`) kept frames whose
/// effectors ended up to 0.09 mm off (the bake's tolerance is 0.1 mm); with 8 and
/// [`FINISH_FRACTION`], 0.04 and 0.07 mm at most, and 22 and 6 frames turning a bone faster than
/// the motion against 26 and 7, at the same speed.
pub(super) const FINISH_ITERATIONS: u32 = 8;
/// A bone is at a bound of its limit within this (radians): the steps toward the reference hold
/// it there (see [`DlsSteps::refine_toward`]). Looser than the clamp's round-off: a bone sliding
/// along a bound leaves it by the second order of its steps (the clamp's direction is not
/// exactly the bound's normal), and would be released and caught again at every pull.
pub(super) const AT_BOUND: f64 = 1e-3;
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
pub(super) const FINISH_FRACTION: f64 = 0.01;
/// A pull toward the reference counts as coming nearer it unless the distance grows by more than
/// this fraction of itself: the distance's own round-off (a sum of a few dozen weighted squared
/// angles, each from an `atan2`), 64 units of it. Compared exactly, a pull sliding along a nearly
/// flat valley of the distance, where the correction back onto the goals gives back all but some
/// 15 units of round-off of what the pull gained (a real-motion punch frame: 4e-6 rad a step,
/// 3e-14 of a distance of 10), was rejected wherever round-off made one change 0 or positive; the
/// run then shortened its pulls and settled up to 20 iterations early, so a 1e-12 m move of a
/// target moved the answer by up to 2.2e-4 rad. Measured (the real-motion harness's 2224
/// single solves, three seeds of such moves): solves moved by more than 1e-6 rad 3 / 3 / 3 ->
/// 0 / 0 / 0 (16 units: 1 / 1 / 0; 256: 1 / 0 / 0 at 6% more iterations), 59.7 -> 62.0
/// iterations a cold solve, the same warm-cold answers.
pub(super) const DISTANCE_ROUND_OFF: f64 = 64.0 * f64::EPSILON;
/// [`DlsSteps::refine_toward`] has settled when a step turns no bone by more than this
/// (radians; the turn the kept pose makes, after clamps and corrections): far below what moving
/// a target by round-off may change (the continuity properties hold answers to 1e-6 rad under
/// 1e-12 changes of a target).
pub(super) const SETTLED: f64 = 2e-8;
/// [`SETTLED`] for a solve that starts near its answer (tracking, warm-started from the frame
/// before): the answer then differs from the cold solve's by up to about ten times this (the
/// natural-poses issue allows 1e-3 rad between a bake's frame and the cold solve of that frame;
/// 8e-5 measured on a 10-bone chain's bake), and the steps stop sooner: 21 iterations a frame on
/// that bake against 29 at 1e-6.
pub(super) const SETTLED_NEAR: f64 = 1e-5;

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

impl DlsSteps {
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
    /// [`MOMENTUM`] times its direction (a rejected one drops it), but one kept only for closing
    /// the goals' gap, no nearer the reference, is treated as half rejected: the next pull is
    /// [`PULL_SHRINK`] as far and adds no momentum. (Lengthened after it, the pulls cycled to
    /// their step cap: nearer the reference with the goals left a little off, back onto the
    /// goals and away from it, an overshoot; on the real-motion problems the add-on exports,
    /// FABRIK's and DLS's answers, which differ only in how they first reach the goals, were
    /// more than 1e-3 rad apart on 193 of 2224 solves, 153 without the cycle, at 58.9 iterations
    /// a cold solve against 61.6.) The pull stops when the steps
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
    /// it, so a held bone more than [`AT_BOUND`] inside is released. A bone still at one bound
    /// (its cone's or its twist range's) gets that bound's normal where it stands now
    /// ([`bound_normal`]); one at both, the direction its clamp removes now
    /// ([`clamp_direction`] of a turn [`BOUND_PROBE`] out along the old one): the direction was
    /// recorded in world space when the clamp caught the bone, and its parents' turns and its
    /// own slide along the bound move the bound's normal since, so the pull's projection left
    /// part of the way along the bound blocked and
    /// the pull settled short of the nearest pose. On the real-motion problems (see
    /// [`DlsSteps::refine_toward`]) warm answers more than 1e-3 rad from their cold solves went
    /// 400 -> 332 with it alone (restarting only runs that end unsettled), at the same
    /// iterations there, and 347 -> 291 where every run is restarted. A hinge's direction is its
    /// axis, turned with the bone (its clamp removes whatever of a probe is off the axis, so a
    /// probe would keep an old tilt and grow it). A bone that swings only is probed as the steps
    /// turn it, keeping its twist ([`turned_local`]).
    pub(super) fn refresh_blocked(&mut self, problem: &Problem, pose: &Pose) {
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
            if let Some(normal) = bound_normal(limit, &state, world, local) {
                *v = Some(normal);
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
    pub(super) fn drop_reference(&mut self) {
        if let Some(r) = self.reference.take() {
            self.spare_reference = r;
        }
    }

    /// The squared distance of `pose` from the reference that [`DlsSteps::refine_toward`]
    /// minimises: per joint, its bone's turn from the reference rotation over the gain, and the
    /// root's translation from the reference's.
    pub(super) fn reference_distance(&mut self, problem: &Problem, pose: &Pose) -> f64 {
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
    pub(super) fn turns_toward_reference(&mut self, problem: &Problem, pose: &Pose) {
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
    pub(super) fn subtract_j_toward(&mut self, pull: f64) {
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
}
