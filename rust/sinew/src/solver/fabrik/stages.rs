//! The steps of the report's FABRIK (TR-632, `../shared/papers/fabrik-tech-report-2009.md`
//! §3.7) that both FABRIK solvers take, [`super::FabrikClassic`] as the report writes them and
//! the hybrid [`super::Fabrik`] between its own steering:
//! - Alg. 1's line step (lines 1.24–1.27): a body pulled by one point moves that point onto its
//!   target and its head onto the line back toward where it was ([`line_step`]);
//! - the backward stage's turn (lines 1.29–1.38): a bone turns about its fixed head, by the
//!   rotation nearest its current one, to aim a point at its target ([`aim`]);
//! - what pulls a bone in the forward stage (§3.7.1): its active children's forward estimates and
//!   its own goals, so a bone several things pull is a sub-base ([`gather_pulls`]);
//! - Alg. 2 in the forward stage (§3.7.2): a parent re-oriented so its child's rotation stays
//!   inside the child's limit ([`keep_child_in_limit`]).
//!
//! Pure functions of their inputs: the callers own the frames and the scratch buffers.

use glam::{DQuat, DVec3};

use super::plan::Plan;
use crate::geometry::{EPS_LEN, Pull, angle_between};
use crate::problem::Problem;
use crate::rig::Rig;
use crate::rotations::turn_toward;

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
    let want = child.limit.constrain(locked_local, local);
    if angle_between(want, local) < 1e-12 {
        return (rot, head);
    }
    let rot = (child_rot * (child.rest_rotation * want).conjugate()).normalize();
    (rot, child_head - rot * child.rest_head)
}

/// Fills `pulls` with what pulls bone `b` in FABRIK's forward stage (§3.7.1's sub-bases, as the
/// problem's [`Plan`] `plan` lists them): each active child's head toward its forward estimate in
/// `forward_heads` (with the summed weight of the goals it leads to), and each goal on `b` (its
/// tail or head toward the target). Returns the target orientation of the first goal on `b` that
/// has one.
pub(super) fn gather_pulls(plan: &Plan, problem: &Problem, b: usize, forward_heads: &[DVec3], pulls: &mut Vec<Pull>) -> Option<DQuat> {
    let rig = problem.rig();
    pulls.clear();
    for &(c, w) in &plan.pulls[b] {
        pulls.push(Pull { local: rig.bone(c).rest_head, target: forward_heads[c], weight: w });
    }
    let mut orientation = None;
    for &gi in &plan.effector_goals[b] {
        let g = &problem.goals()[gi];
        let local = if g.use_tail { DVec3::new(0.0, rig.bone(b).length, 0.0) } else { DVec3::ZERO };
        pulls.push(Pull { local, target: g.target, weight: g.weight });
        orientation = orientation.or(g.orientation);
    }
    orientation
}
