//! A lone serial chain (one position goal on a chain of connected bones with a pinned top,
//! the [`Plan`](super::plan::Plan)'s serial chain): the report's Alg. 1 (TR-632,
//! `../shared/papers/fabrik-tech-report-2009.md` §3.7) on joint positions alone, with its
//! unreachable-target shortcut (lines 1.4–1.12), finished by Gauss–Newton steps on the same
//! positions and the closed-form end game ([`Fabrik::solve_serial`]); the caller turns the
//! positions into rotations once, at the end.
//!
//! A chain whose limits are cones and twist ranges is solved as a free one first, and clamped
//! and finished by damped-least-squares steps where a limit binds ([`Fabrik::solve_unbound`]);
//! when that fails the general path (`tree.rs`) solves it.

use glam::DVec3;

use super::Fabrik;
use super::finish::{finish_exactly, finish_threshold, nearly_stretched};
use super::tracking::TRACK_FRACTION;
use crate::geometry::EPS_LEN;
use crate::pose::Pose;
use crate::problem::Problem;
use crate::rig::Rig;
use crate::rotations::aim_serial_chain;
use crate::solver::jacobian::chain_position_step;
use crate::solver::{Solution, SolveSettings, StopReason, settle};

/// A serial chain on Gauss–Newton steps is finished in closed form ([`finish_exactly`]) once its
/// gap is below this fraction of where it started: the last two bones then take up 0.3% of the
/// motion. Measured on the chain10 benchmark's 1000 targets: against 1e-3 this saves a step in
/// a sixth of the solves (median 3 → 2 iterations) for 0.6° on the median largest joint bend
/// (29.5° → 30.1°; steps alone give 29.4°, 1e-2 gives 32.4°, FABRIK run to convergence 26.9°).
const NEWTON_CLOSE: f64 = 3e-3;

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
    ///   every limit at every step ([`crate::solver::jacobian`]), close the gap that opens, at most
    ///   [`UNBOUND_ITERATIONS`] more: the chain is then near a solution, and a few steps (3–4
    ///   on that benchmark, 175 of the 1000) reach it. On those 1000 targets the answers bend
    ///   a little less than the general path's did (mean largest joint turn 19.97° against
    ///   20.56°, mean total turn 98.9° against 103.7°).
    ///
    /// `pose` is the start, whose local rotations are `self.start_locals` and forward kinematics
    /// `self.frames`. `Err` with the start and the iterations spent otherwise (the steps did not
    /// reach, or the target is out of reach and straightening breaks a limit); `self.frames` is
    /// then the start's forward kinematics again, for the general path.
    pub(super) fn solve_unbound(&mut self, problem: &Problem, chain: &[usize], settings: &SolveSettings, mut pose: Pose) -> std::result::Result<Solution, (Pose, u32)> {
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
    /// Alg. 1 on joint positions (`self.joints`, from the start pose's `self.frames`); the
    /// caller turns them into rotations ([`aim_serial_chain`]).
    pub(super) fn solve_serial(&mut self, rig: &Rig, chain: &[usize], target: DVec3, s: &SolveSettings) -> (u32, StopReason) {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goal::Goal;
    use crate::problem::RootMode;
    use crate::rig::tests::chain;
    use crate::solver::Solver;

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
