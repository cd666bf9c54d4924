//! FABRIK: Forward And Backward Reaching Inverse Kinematics (Aristidou & Lasenby, Cambridge
//! TR-632, 2009).
//!
//! - A single free serial chain runs Alg. 1 (§3.7) on joint positions alone, with the
//!   unreachable-target shortcut (straighten toward the target in one pass), and is turned into
//!   rotations once at the end ([`crate::rotations::aim_chain`]).
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

use glam::{DQuat, DVec3};

use super::{Solution, SolveSettings, Solver, StopReason};
use crate::error::Result;
use crate::geometry::{EPS_LEN, Pull, fit_rigid, fit_rotation, shortest_arc};
use crate::pose::{Frames, Pose};
use crate::problem::{Problem, RootMode};
use crate::rig::Rig;
use crate::rotations::{aim_chain, local_rotations, turn_toward};

/// How far (radians) a straight joint with a preferred bend is nudged before solving.
const BEND_NUDGE: f64 = 0.05;

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

    fn solve(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        let settings = self.settings.validated()?;
        let start = problem.checked_pose(start)?;
        let rig = problem.rig();
        let n = rig.len();
        rig.forward_into(&start, &mut self.frames);
        self.locals.clear();
        self.locals.extend_from_slice(&start.rotations);
        self.start_locals.clear();
        self.start_locals.extend_from_slice(&start.rotations);
        self.forward_heads.clear();
        self.forward_heads.extend_from_slice(&self.frames.heads);

        let goals = problem.goals();
        if goals.is_empty() {
            return Ok(Solution { pose: start, iterations: 0, residuals: vec![], reached: true, stop: StopReason::Converged });
        }

        let (iterations, stop) = if let Some(chain) = free_serial_chain(problem) {
            self.solve_serial(rig, &chain, goals[0].target, &settings)
        } else {
            self.nudge_straight_joints(problem);
            self.solve_tree(problem, &settings)
        };

        let mut pose = Pose { rotations: vec![DQuat::IDENTITY; n], root_translation: start.root_translation };
        local_rotations(rig, &self.frames, &mut pose.rotations);
        // Bones no goal moves keep their start rotation exactly (no round-off drift).
        let active = &problem.topology().active;
        // Each quaternion stays in its start's hemisphere, so warm-started frames are
        // sign-continuous and interpolating keys never takes the long way round.
        for (i, q) in pose.rotations.iter_mut().enumerate() {
            if active.binary_search(&i).is_err() {
                *q = start.rotations[i];
            } else if q.dot(start.rotations[i]) < 0.0 {
                *q = -*q;
            }
        }
        if problem.root() == RootMode::Free {
            let b0 = rig.bone(0);
            pose.root_translation = b0.rest_rotation.conjugate() * (self.frames.heads[0] - b0.rest_head);
        }
        let residuals: Vec<f64> = goals
            .iter()
            .map(|g| (self.frames.effector(g.bone, g.use_tail) - g.target).length())
            .collect();
        let reached = residuals.iter().all(|&r| r <= settings.tolerance);
        let stop = if reached { StopReason::Converged } else { stop };
        Ok(Solution { pose, iterations, residuals, reached, stop })
    }
}

/// The bones of the problem's single goal, from the top of its chain down, when Alg. 1 applies
/// as it is: one position-only goal on a tail, bones connected head-to-tail, no limit, no pole,
/// and a pinned chain top.
fn free_serial_chain(problem: &Problem) -> Option<Vec<usize>> {
    let [goal] = problem.goals() else { return None };
    if goal.orientation.is_some() || goal.pole.is_some() || !goal.use_tail {
        return None;
    }
    let rig = problem.rig();
    let moved = &problem.topology().moved[0];
    let top = *moved.last()?;
    if top == 0 && problem.root() == RootMode::Free {
        return None;
    }
    for (k, &b) in moved.iter().enumerate() {
        let bone = rig.bone(b);
        if !bone.limit.is_free() {
            return None;
        }
        if k + 1 < moved.len() {
            let parent_len = rig.bone(moved[k + 1]).length;
            if (bone.rest_head - DVec3::new(0.0, parent_len, 0.0)).length() > 1e-9 * parent_len.max(1.0) {
                return None;
            }
        }
    }
    Some(moved.iter().rev().copied().collect())
}

impl Fabrik {
    /// Alg. 1 on joint positions, then one conversion to rotations.
    fn solve_serial(&mut self, rig: &Rig, chain: &[usize], target: DVec3, s: &SolveSettings) -> (u32, StopReason) {
        let m = chain.len();
        self.joints.clear();
        self.joints.push(self.frames.heads[chain[0]]);
        self.joints.extend(chain.iter().map(|&b| self.frames.tails[b]));
        let p = &mut self.joints;
        let lengths = |k: usize| rig.bone(chain[k]).length;
        let base = p[0];
        let reach: f64 = (0..m).map(lengths).sum();
        let (iterations, stop) = if (target - base).length() >= reach {
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
            while it < s.max_iterations {
                if (p[m] - target).length_squared() <= tol2 {
                    stop = StopReason::Converged;
                    break;
                }
                it += 1;
                // Stage 1, forward reaching (lines 1.19–1.28).
                p[m] = target;
                for k in (0..m).rev() {
                    let d = p[k] - p[k + 1];
                    let r = d.length();
                    p[k] = if r > EPS_LEN { p[k + 1] + d * (lengths(k) / r) } else { p[k + 1] - DVec3::Y * lengths(k) };
                }
                // Stage 2, backward reaching (lines 1.29–1.38).
                p[0] = base;
                for k in 0..m {
                    let d = p[k + 1] - p[k];
                    let r = d.length();
                    p[k + 1] = if r > EPS_LEN { p[k] + d * (lengths(k) / r) } else { p[k] + DVec3::Y * lengths(k) };
                }
                if (p[m] - last_end).length() <= s.stall_tolerance {
                    stop = StopReason::Stalled;
                    break;
                }
                last_end = p[m];
            }
            (it, stop)
        };
        aim_chain(rig, chain, &self.joints, &mut self.frames);
        // Bones below the chain (not moved) follow their parents.
        self.refresh_inactive(rig, chain);
        (iterations, stop)
    }

    /// Forward kinematics for every bone not in `moved`, keeping its local rotation.
    fn refresh_inactive(&mut self, rig: &Rig, moved: &[usize]) {
        for (i, b) in rig.bones().iter().enumerate() {
            if moved.contains(&i) {
                continue;
            }
            let Some(p) = b.parent else { continue };
            let pr = self.frames.rotations[p];
            let rot = (pr * b.rest_rotation * self.locals[i]).normalize();
            self.frames.rotations[i] = rot;
            self.frames.heads[i] = self.frames.heads[p] + pr * b.rest_head;
            self.frames.tails[i] = self.frames.heads[i] + rot * DVec3::new(0.0, b.length, 0.0);
        }
    }

    /// Nudges each straight joint that has a preferred bend toward it (see module docs).
    fn nudge_straight_joints(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let mut changed = false;
        for &b in &problem.topology().active {
            let limit = &rig.bone(b).limit;
            if limit.locked {
                continue;
            }
            let Some(bend) = limit.preferred_bend() else { continue };
            let local = self.locals[b];
            let (swing, _) = crate::geometry::swing_twist(local, DVec3::Y);
            if swing.angle_between(DQuat::IDENTITY) < 1e-4 {
                let t = (BEND_NUDGE / bend.angle_between(DQuat::IDENTITY)).min(1.0);
                self.locals[b] = limit.clamp(DQuat::IDENTITY.slerp(bend, t) * local);
                changed = true;
            }
        }
        if changed {
            let pose = Pose { rotations: self.locals.clone(), root_translation: DVec3::ZERO };
            let root_head = self.frames.heads[0];
            rig.forward_into(&pose, &mut self.frames);
            // Keep the start's root position (forward_into used a zero translation).
            let shift = root_head - self.frames.heads[0];
            for i in 0..rig.len() {
                self.frames.heads[i] += shift;
                self.frames.tails[i] += shift;
            }
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
        while it < s.max_iterations {
            if goals.iter().zip(&self.effectors).all(|(g, e)| (*e - g.target).length() <= tol) {
                stop = StopReason::Converged;
                break;
            }
            it += 1;
            self.apply_poles(problem);
            self.forward_stage(problem);
            self.backward_stage(problem, root_head);
            let mut moved = 0.0f64;
            for (g, e) in goals.iter().zip(self.effectors.iter_mut()) {
                let now = self.frames.effector(g.bone, g.use_tail);
                moved = moved.max((now - *e).length());
                *e = now;
            }
            if moved <= s.stall_tolerance {
                stop = StopReason::Stalled;
                break;
            }
        }
        let _ = (rig, topo);
        (it, stop)
    }

    /// Turns each poled chain about its axis (chain top's head → target) so the top bone's
    /// local +X, rotated by the pole angle about the axis, points at the pole.
    fn apply_poles(&mut self, problem: &Problem) {
        for (gi, g) in problem.goals().iter().enumerate() {
            let Some(pole) = g.pole else { continue };
            let chain = &problem.topology().moved[gi];
            let top = *chain.last().unwrap_or(&g.bone);
            let a = self.frames.heads[top];
            let Some(axis) = (g.target - a).try_normalize() else { continue };
            let flat = |v: DVec3| (v - axis * v.dot(axis)).try_normalize();
            let x = self.frames.rotations[top] * DVec3::X;
            let (Some(cur), Some(want)) = (flat(x), flat(pole.target - a)) else { continue };
            let cur = DQuat::from_axis_angle(axis, pole.angle) * cur;
            let turn = shortest_arc(cur, want);
            if turn.angle_between(DQuat::IDENTITY) < 1e-12 {
                continue;
            }
            for &b in chain {
                self.frames.heads[b] = a + turn * (self.frames.heads[b] - a);
                self.frames.tails[b] = a + turn * (self.frames.tails[b] - a);
                self.frames.rotations[b] = (turn * self.frames.rotations[b]).normalize();
            }
        }
    }

    /// Stage 1: from the effectors inward; sub-bases take the rigid fit of their children's
    /// estimates.
    fn forward_stage(&mut self, problem: &Problem) {
        let rig = problem.rig();
        let topo = problem.topology();
        let goals = problem.goals();
        for &b in topo.active.iter().rev() {
            let bone = rig.bone(b);
            self.pulls.clear();
            for &(c, w) in &topo.pulls[b] {
                self.pulls.push(Pull { local: rig.bone(c).rest_head, target: self.forward_heads[c], weight: w });
            }
            let mut orientation = None;
            for &gi in &topo.effector_goals[b] {
                let g = &goals[gi];
                let local = if g.use_tail { DVec3::new(0.0, bone.length, 0.0) } else { DVec3::ZERO };
                self.pulls.push(Pull { local, target: g.target, weight: g.weight });
                if g.orientation.is_some() {
                    orientation = g.orientation;
                }
            }
            let old_head = self.frames.heads[b];
            let old_rot = self.frames.rotations[b];
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
                [(c, _)] if self.pulls.len() == 1 => self.keep_child_in_limit(rig, b, *c, rot, head),
                _ => (rot, head),
            };
            self.frames.rotations[b] = rot;
            self.forward_heads[b] = head;
        }
    }

    /// Re-orients parent `b` (placed at `rot`, `head`) so that its child `c`'s local rotation is
    /// inside `c`'s limit, keeping `c`'s estimated head where it is (§3.7.2, Alg. 2).
    fn keep_child_in_limit(&self, rig: &Rig, b: usize, c: usize, rot: DQuat, head: DVec3) -> (DQuat, DVec3) {
        let child = rig.bone(c);
        if !child.limit.constrains_rotation() {
            return (rot, head);
        }
        let child_rot = self.frames.rotations[c];
        let local = rig.local_from_world(c, rot, child_rot);
        let want = if child.limit.locked { self.start_locals[c] } else { child.limit.clamp(local) };
        if want.angle_between(local) < 1e-12 {
            return (rot, head);
        }
        let rot = (child_rot * (child.rest_rotation * want).conjugate()).normalize();
        let _ = b;
        (rot, self.forward_heads[c] - rot * child.rest_head)
    }

    /// Stage 2: from the root outward; each active bone turns about its (fixed) head toward the
    /// forward estimates, then its limit is applied. Inactive bones follow their parents.
    fn backward_stage(&mut self, problem: &Problem, root_head: DVec3) {
        let rig = problem.rig();
        let topo = problem.topology();
        let goals = problem.goals();
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
                self.pulls.clear();
                for &(c, w) in &topo.pulls[b] {
                    self.pulls.push(Pull { local: rig.bone(c).rest_head, target: self.forward_heads[c], weight: w });
                }
                let mut orientation = None;
                for &gi in &topo.effector_goals[b] {
                    let g = &goals[gi];
                    let local = if g.use_tail { DVec3::new(0.0, bone.length, 0.0) } else { DVec3::ZERO };
                    self.pulls.push(Pull { local, target: g.target, weight: g.weight });
                    if g.orientation.is_some() {
                        orientation = g.orientation;
                    }
                }
                let want = if let Some(q) = orientation {
                    q
                } else if let [p] = self.pulls.as_slice() {
                    aim(current, head, p.local, p.target)
                } else {
                    fit_rotation(current, self.pulls.iter().map(|p| (p.local, p.target - head, p.weight)))
                };
                let local = (base.conjugate() * want).normalize();
                let limit = &bone.limit;
                let clamped = if limit.locked { self.start_locals[b] } else { limit.clamp(local) };
                if limit.stiffness > 0.0 { self.locals[b].slerp(clamped, 1.0 - limit.stiffness) } else { clamped }
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

/// The FABRIK line step for a body pulled by one point: the point `local` goes to `target` and
/// the head lands on the line from `target` toward the old head (Alg. 1, lines 1.24–1.27).
#[inline]
fn line_step(rot: DQuat, old_head: DVec3, local: DVec3, target: DVec3) -> (DQuat, DVec3) {
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
fn aim(rot: DQuat, head: DVec3, local: DVec3, target: DVec3) -> DQuat {
    let len = local.length();
    match (target - head).try_normalize() {
        Some(dir) if len > EPS_LEN => turn_toward(rot, local / len, dir),
        _ => rot,
    }
}
