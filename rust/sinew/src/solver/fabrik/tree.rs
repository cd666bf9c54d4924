//! The hybrid's general path: everything but a lone free serial chain (trees, offset children,
//! limits, orientation goals, poles) runs the report's two stages on bone frames (TR-632,
//! `../shared/papers/fabrik-tech-report-2009.md` §3.7, with several end effectors as §3.7.1 and
//! limits at every step as §3.7.2), with the hybrid's steering in each stage (sub-bases in
//! `sub_base.rs`, bends in `bend.rs`, tree poles in `poles.rs`) and the closed-form finish of free
//! tails (`finish.rs`). FABRIK places the limbs and decides their bends; where it crawls or stalls
//! short of goals within reach ([`CRAWL_RATIO`]), it hands over to the damped-least-squares steps
//! ([`crate::solver::jacobian`]), which move every bone at once inside every limit.
//!
//! The last stage is always a backward one, so a pose this path returns never violates a limit.

use glam::{DQuat, DVec3};

use super::Fabrik;
use super::bend::aim_hinge;
use super::finish::finish_threshold;
use super::stages::{aim, gather_pulls, keep_child_in_limit, line_step};
use crate::geometry::{EPS_LEN, fit_rigid, fit_rotation};
use crate::limits::Freedom;
use crate::pose::Pose;
use crate::problem::{Problem, RootMode};
use crate::rig::Rig;
use crate::rotations::local_rotations;
use crate::solver::{SolveSettings, StopReason, settle};

/// FABRIK hands over to the damped-least-squares finish ([`crate::solver::jacobian`]) when an
/// iteration leaves more than this fraction of the unmet distance it started with (every target
/// being within reach). FABRIK's big first steps place the limbs and decide their bend; after that
/// its convergence is linear, and slow where chains meet at a sub-base or limits hold joints (the
/// constrained humanoid needed hundreds of iterations, or stalled short), where a joint-space step
/// that moves every bone at once converges in a few. Measured on the paper models
/// (docs/benchmarks.md): 10% over two iterations needs the fewest iterations; but an iteration with
/// limits costs several damped-least-squares steps (swivel searches, limit splits), so 1% over one
/// (FABRIK goes on only while each iteration closes 99% of what is left) halves the time of the
/// constrained chain (26 → 13 µs, 6.7 → 4.4 iterations) with the same reconstruction error under
/// limits.
const CRAWL_RATIO: f64 = 0.01;

impl Fabrik {
    /// Everything but a lone free chain: small tracking moves by the damped-least-squares step
    /// ([`Self::track_small_moves`]); otherwise FABRIK on bone frames from the start pose, with
    /// what is left of the iteration budget, and the damped-least-squares finish when FABRIK
    /// stalls or crawls short of goals within reach. `pose` holds the start on entry and receives
    /// the result; the flag tells whether damped least squares had the last word (its frames are
    /// then the result's forward kinematics).
    pub(super) fn solve_general(&mut self, problem: &Problem, settings: &SolveSettings, pose: &mut Pose) -> (u32, StopReason, bool) {
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

    /// When every goal's target is within reach: the summed distance of the unmet goals (beyond
    /// `tolerance`), what the damped-least-squares steps may close. `None` when some target is
    /// out of reach (by more than `tolerance`: a target at full stretch is reached by
    /// straightening) even with every moved bone above its chain helping (from its anchor's
    /// head, see `Plan::anchor_reach`): FABRIK straightens such a chain toward its target,
    /// where a least-squares compromise would bend it to help the other goals.
    pub(super) fn unmet_if_all_within_reach(&self, problem: &Problem, tolerance: f64) -> Option<f64> {
        let mut total = 0.0;
        for (gi, (g, &(anchor, reach))) in problem.goals().iter().zip(&self.plan.anchor_reach).enumerate() {
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

    /// Fills `self.pulls` with what pulls bone `b` ([`gather_pulls`]).
    fn gather_pulls(&mut self, problem: &Problem, b: usize) -> Option<DQuat> {
        gather_pulls(&self.plan, problem, b, &self.forward_heads, &mut self.pulls)
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
            let (rot, head) = match self.plan.pulls[b].as_slice() {
                &[(c, _)] if self.pulls.len() == 1 => {
                    let (rot, head) = if self.flip_wrong_bend(rig, c, rot, head) {
                        line_step(old_rot, old_head, rig.bone(c).rest_head, self.forward_heads[c])
                    } else {
                        (rot, head)
                    };
                    self.keep_child_in_limit(rig, c, rot, head)
                }
                _ => (rot, head),
            };
            self.frames.rotations[b] = rot;
            self.forward_heads[b] = head;
        }
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
                let two_bone = match self.plan.pulls[b].as_slice() {
                    &[(c, _)] if orientation.is_none() && self.pulls.len() == 1 => {
                        self.two_bone_step(problem, b, c, base, head, current)
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
                    match (bone.limit.freedom(), self.plan.pulls[b].as_slice()) {
                        (Freedom::Hinge(h), _) => base * aim_hinge(base, h, head, p.local, p.target),
                        (_, &[(c, _)]) => {
                            let want = aim(current, head, p.local, p.target);
                            self.make_room_for_child(problem, b, c, base, head, want)
                        }
                        _ => aim(current, head, p.local, p.target),
                    }
                } else {
                    let fitted = fit_rotation(current, self.pulls.iter().map(|p| (p.local, p.target - head, p.weight)));
                    self.turn_sub_base(problem, b, head, fitted)
                };
                let local = (base.conjugate() * want).normalize();
                bone.limit.constrain_step(self.start_locals[b], self.locals[b], local)
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
