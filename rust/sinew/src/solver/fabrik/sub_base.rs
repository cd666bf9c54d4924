//! Sub-base placement in the hybrid [`super::Fabrik`]. The report (TR-632,
//! `../shared/papers/fabrik-tech-report-2009.md` §3.7.1) moves a sub-base to the centroid of the
//! positions its chains give it, so chains with slack drag it around and multi-chain solves crawl.
//! Here a chain that carries a single goal pulls its sub-base only by the part of its target it
//! cannot reach ([`Fabrik::reach_aware_pulls`]), and in the backward stage the sub-base turns by
//! damped Gauss–Newton steps on its rotation until every such chain can reach and the other pulls
//! land ([`Fabrik::turn_sub_base`]).

use glam::{DMat3, DQuat, DVec3};

use super::Fabrik;
use crate::geometry::from_rotation_vector;
use crate::problem::Problem;

/// How much more a chain's reach shortfall counts than a point pull at a sub-base.
const SHORTFALL_WEIGHT: f64 = 1e3;

/// Levenberg–Marquardt damping of a sub-base's turn, relative to the leverage of its shortfalls
/// (weight × lever arm²). A shortfall the turn can close head-on (the attachment moving across
/// the lever arm) is closed by halves; one the turn barely affects (the target along the lever
/// arm) is left to the bones above, which carry the sub-base toward it: undamped, the sub-base
/// alone would turn far for a millimetre of reach, a visible pop in tracking. A sub-base with no
/// moving bone above it (a pinned root) is damped too: undamped, its turn was a discontinuous
/// function of the targets (on the paper's hand, a 1e-12 change of a target turned a bone by up
/// to 1.15 rad in 45 of 300 cases; damped, by at most 4e-13), and the following iterations
/// finish what the damping leaves.
const SUB_BASE_DAMPING: f64 = 1.0;

/// Gauss–Newton rounds for a sub-base's rotation in the backward stage.
const SUB_BASE_ROUNDS: usize = 8;

impl Fabrik {
    /// At a sub-base `b` (head `head`, rotation `rot`): a child chain that carries a single goal
    /// asks the sub-base to move only as far as the chain cannot reach. Its pull goes to its
    /// current attachment when its target is within the chain's reach from there, and otherwise
    /// toward the target by the shortfall. Plain FABRIK pulls the sub-base to every child's
    /// forward estimate, so chains with slack drag it around and multi-chain solves crawl
    /// (§3.7.1's centroid converges slowly); this way the sub-base moves only for chains that
    /// need it, and each chain then closes its own gap.
    ///
    /// With `head_fixed` (the backward stage) the attachment can only move on the sphere about
    /// the sub-base's head, so the pull goes to the nearest point of that sphere from which the
    /// chain reaches (where the sphere meets the ball of the chain's reach about its target).
    pub(super) fn reach_aware_pulls(&mut self, problem: &Problem, b: usize, head: DVec3, rot: DQuat, head_fixed: bool) {
        let plan = &self.plan;
        let rig = problem.rig();
        for (pull, &(c, _)) in self.pulls.iter_mut().zip(&plan.pulls[b]) {
            let Some((g, reach)) = plan.lone_goal[c] else { continue };
            let target = problem.goals()[g].target;
            let attach = head + rot * rig.bone(c).rest_head;
            let to_target = target - attach;
            let dist = to_target.length();
            pull.target = if dist <= reach {
                attach
            } else if head_fixed {
                nearest_reaching_point_on_sphere(head, attach, target, reach)
            } else {
                attach + to_target * ((dist - reach) / dist)
            };
        }
    }

    /// Turns sub-base `b` (head fixed at `head`, starting at `rot`) by Gauss–Newton on its
    /// rotation so that every lone-goal child chain can reach its target (one residual each: the
    /// chain's shortfall, zero once within reach) and the other pulls land (three residuals each).
    /// The normal equations are 3×3 whatever the number of children. Near the solution this
    /// converges quadratically, where fitting to re-measured pull points (alternating
    /// projections) crawls, e.g. a pinned pelvis with both legs at full stretch.
    pub(super) fn turn_sub_base(&mut self, problem: &Problem, b: usize, head: DVec3, rot: DQuat) -> DQuat {
        let plan = &self.plan;
        let rig = problem.rig();
        let children = &plan.pulls[b];
        let mut rot = rot;
        for _ in 0..SUB_BASE_ROUNDS {
            let mut leverage = 0.0;
            let mut jtj = DMat3::ZERO;
            let mut jtr = DVec3::ZERO;
            for (k, pull) in self.pulls.iter().enumerate() {
                let v = rot * pull.local;
                let lone = children.get(k).and_then(|&(c, _)| plan.lone_goal[c]);
                match lone {
                    Some((g, reach)) => {
                        let to_target = problem.goals()[g].target - (head + v);
                        let dist = to_target.length();
                        if dist <= reach {
                            continue;
                        }
                        // A shortfall is a hard need (the chain cannot reach otherwise); the
                        // other pulls are preferences their flexible chains can give up.
                        let w = pull.weight * SHORTFALL_WEIGHT;
                        let j = -v.cross(to_target / dist);
                        leverage += w * v.length_squared();
                        jtj += DMat3::from_cols(j * j.x, j * j.y, j * j.z) * w;
                        jtr += j * ((dist - reach) * w);
                    }
                    None => {
                        let r = head + v - pull.target;
                        let vv = DMat3::from_cols(v * v.x, v * v.y, v * v.z);
                        jtj += (DMat3::from_diagonal(DVec3::splat(v.length_squared())) - vv) * pull.weight;
                        jtr += v.cross(r) * pull.weight;
                    }
                }
            }
            let scale = jtj.x_axis.x + jtj.y_axis.y + jtj.z_axis.z;
            if scale <= 0.0 || jtr.length_squared() <= 1e-30 * scale * scale {
                break;
            }
            let damped = jtj + DMat3::from_diagonal(DVec3::splat(1e-9 * scale + SUB_BASE_DAMPING * leverage));
            let mut delta = -(damped.inverse() * jtr);
            let angle = delta.length();
            if !angle.is_finite() || angle < 1e-14 {
                break;
            }
            if angle > 0.5 {
                delta *= 0.5 / angle;
            }
            rot = (from_rotation_vector(delta) * rot).normalize();
            let _ = rig;
        }
        rot
    }
}

/// The point of the sphere about `center` through `point` that is nearest to `point` and within
/// `reach` of `target`: on the circle where the sphere meets the ball about `target`, or the
/// sphere's point nearest `target` when the two do not meet.
fn nearest_reaching_point_on_sphere(center: DVec3, point: DVec3, target: DVec3, reach: f64) -> DVec3 {
    let r = (point - center).length();
    let to_target = target - center;
    let d = to_target.length();
    let Some(n) = to_target.try_normalize() else { return point };
    if d >= r + reach || d <= (r - reach).abs() {
        // Too far (or one inside the other): the sphere's point toward the target is best.
        return center + n * r;
    }
    // Circle of intersection: centre at distance h along n, radius rho.
    let h = (d * d + r * r - reach * reach) / (2.0 * d);
    let rho = (r * r - h * h).max(0.0).sqrt();
    let off = point - center;
    let side = (off - n * off.dot(n)).try_normalize().unwrap_or_else(|| n.any_orthonormal_vector());
    center + n * h + side * rho
}
