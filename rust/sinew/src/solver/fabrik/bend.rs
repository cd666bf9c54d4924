//! Bend steering in the hybrid [`super::Fabrik`]: limits that decide which way a joint bends,
//! beyond the report's clamping (TR-632, `../shared/papers/fabrik-tech-report-2009.md` §3.7.2):
//! - a straight joint with a preferred bend is nudged toward it before solving
//!   ([`Fabrik::nudge_straight_joints`]), so FABRIK's point steps see the side;
//! - a knee or elbow bent the wrong way is flipped over in the forward stage
//!   ([`Fabrik::flip_wrong_bend`]);
//! - the parent of a hinge takes the exact two-bone step (the law of cosines within the hinge's
//!   range, [`Fabrik::two_bone_step`]), a hinge bone aims within its plane ([`aim_hinge`]), and a
//!   parent swivels to make room for its child's limit ([`Fabrik::make_room_for_child`]).

use glam::{DQuat, DVec3};

use super::Fabrik;
use super::stages::aim;
use super::swivel::best_swivel;
use crate::geometry::{EPS_LEN, from_rotation_vector};
use crate::limits::Freedom;
use crate::problem::Problem;
use crate::rig::Rig;
use crate::rotations::turn_toward;

/// How far (radians) a straight joint with a preferred bend is nudged before solving.
pub(super) const BEND_NUDGE: f64 = 0.05;

/// The cosine of 1e-3 rad: a joint whose bone points within that of its parent's axis is
/// straight (see [`Fabrik::nudge_straight_joints`]).
const STRAIGHT_COS: f64 = 0.999_999_500_000_041_7; // cos(1e-3)

impl Fabrik {
    /// Pre-bends each straight joint that has a preferred bend (see module docs): the bone turns
    /// [`BEND_NUDGE`] toward the bend and its parent half that back about the same axis, so the
    /// joint itself leaves the line from the parent's head to the child's tail and FABRIK's
    /// point steps see which side the bend is on.
    pub(super) fn nudge_straight_joints(&mut self, problem: &Problem, tolerance: f64) {
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
            let bends = match (self.plan.lone_goal[b], lone) {
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
    pub(super) fn must_bend(&self, problem: &Problem, b: usize, tolerance: f64) -> bool {
        let topo = problem.topology();
        let unmet_within_reach = |g: usize| {
            let goal = &problem.goals()[g];
            let Some(&top) = topo.moved[g].last() else { return false };
            let unmet = (self.frames.effector(goal.bone, goal.use_tail) - goal.target).length_squared() > tolerance * tolerance;
            unmet && problem.beyond_reach_by(g, self.frames.heads[top]) < 0.0
        };
        match self.plan.lone_goal[b] {
            Some((g, _)) => unmet_within_reach(g),
            None => (0..problem.goals().len()).any(|g| topo.moved[g].contains(&b) && unmet_within_reach(g)),
        }
    }

    /// When child `c`'s joint is bent the wrong way relative to its parent (placed at `rot`,
    /// `head`) and the mirrored bend is allowed, reflects `c`'s estimated head across the line
    /// from the parent's head to `c`'s tail: both bone lengths are kept and the joint (a knee, an
    /// elbow) moves to the side its limit allows. Returns whether it flipped.
    pub(super) fn flip_wrong_bend(&mut self, rig: &Rig, c: usize, rot: DQuat, head: DVec3) -> bool {
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

    /// When one thing pulls bone `c` (its single active child, or one position goal): the pulled
    /// point in `c`'s frame and where it should go.
    fn single_pull(&self, problem: &Problem, c: usize) -> Option<(DVec3, DVec3)> {
        match (self.plan.pulls[c].as_slice(), self.plan.effector_goals[c].as_slice()) {
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
    pub(super) fn two_bone_step(&self, problem: &Problem, b: usize, c: usize, base: DQuat, head: DVec3, current: DQuat) -> Option<DQuat> {
        let rig = problem.rig();
        let child = rig.bone(c);
        // (A locked child is [`Freedom::Fixed`]: no step.)
        let Freedom::Hinge(hinge) = child.limit.freedom() else { return None };
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
    pub(super) fn make_room_for_child(&self, problem: &Problem, b: usize, c: usize, base: DQuat, head: DVec3, want: DQuat) -> DQuat {
        let rig = problem.rig();
        let child = rig.bone(c);
        if !matches!(child.limit.freedom(), Freedom::Ball | Freedom::Swing) || !child.limit.constrains_rotation() {
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

/// The local rotation of a hinge bone (frame `base` at zero angle, head at `head`) that best
/// aims its point `local` at `target`: the signed angle about the hinge axis between the point
/// and the target as seen in the hinge's plane, clamped to the range.
#[inline]
pub(super) fn aim_hinge(base: DQuat, hinge: crate::limits::HingeLimit, head: DVec3, local: DVec3, target: DVec3) -> DQuat {
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
