//! The closed-form end game of the hybrid [`super::Fabrik`]: the report's remark that a joint
//! between two known positions lies where two spheres meet (TR-632,
//! `../shared/papers/fabrik-tech-report-2009.md` §3.7) turned into a finish. FABRIK converges
//! linearly and crawls when a chain is nearly stretched; once it has closed all but
//! [`FINISH_FRACTION`] of a gap (or the chain is nearly stretched), the law of cosines at the
//! lowest joint that can absorb the rest places the chain on its target at once
//! ([`finish_exactly`]). On bone frames, each goal's free serial tail is finished this way
//! ([`Fabrik::finish_free_tails`]).
//!
//! The finish only places joint positions exactly on the target or changes nothing; a target
//! beyond a tail's reach straightens the tail toward it, as Alg. 1's unreachable case does.

use glam::{DQuat, DVec3};

use super::Fabrik;
use crate::geometry::EPS_LEN;
use crate::problem::Problem;
use crate::rig::Rig;
use crate::rotations::aim_chain;

/// Chains finish in closed form once the gap is below this fraction of where it started (see
/// [`finish_exactly`] and [`finish_threshold`]): the last bones take up at most 1% of the motion,
/// so the pose stays FABRIK's.
const FINISH_FRACTION: f64 = 0.01;

/// The gap below which a chain is finished in closed form: [`FINISH_FRACTION`] of the gap the
/// solve started with, but never less than ten tolerances (tracking moves targets by little, and
/// FABRIK's linear convergence would otherwise crawl the last stretch).
#[inline]
pub(super) fn finish_threshold(initial_gap: f64, tolerance: f64) -> f64 {
    (FINISH_FRACTION * initial_gap).max(10.0 * tolerance)
}

/// Whether a chain of total `reach` from `top` is (nearly) stretched to reach `target`: then it
/// is almost straight whatever FABRIK does, FABRIK crawls there, and the closed-form finish may
/// place it at once.
#[inline]
pub(super) fn nearly_stretched(top: DVec3, target: DVec3, reach: f64) -> bool {
    (target - top).length() >= STRETCHED * reach
}

/// See [`nearly_stretched`].
const STRETCHED: f64 = 0.99;

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
pub(super) fn finish_exactly(p: &mut [DVec3], lengths: &impl Fn(usize) -> f64, target: DVec3) -> bool {
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
    /// Closes the last gap of each goal whose own bones end in a free serial chain, in closed
    /// form ([`finish_exactly`]), once FABRIK has brought it within `self.finish_below[g]` or the
    /// chain is nearly stretched (or `always`, as when FABRIK has stalled). A target beyond the
    /// tail's reach straightens the tail toward it, as
    /// Alg. 1's unreachable case does (FABRIK would only crawl there). With an orientation goal
    /// the effector takes the goal's frame and the bones above it finish onto the head that frame
    /// needs. Bones the tail carries (other goals' chains hanging from it) follow by forward
    /// kinematics.
    pub(super) fn finish_free_tails(&mut self, problem: &Problem, always: bool) {
        let rig = problem.rig();
        let plan = &self.plan;
        let mut changed = false;
        self.changed.clear();
        self.changed.resize(rig.len(), false);
        for (gi, g) in problem.goals().iter().enumerate() {
            let Some(tail) = plan.free_tails[gi].as_deref() else { continue };
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
}
