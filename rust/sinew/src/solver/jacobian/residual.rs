//! The goals' residual rows (and those of poles kept in trees) that the steps drive to zero, and
//! the measures built on them: the error the steps minimise ([`goal_error`]), a tree pole's
//! swivel ([`pole_swivel`]), and the curvature Gauss–Newton's model lacks toward targets beyond
//! reach ([`out_of_reach_curvature`]).

use glam::DVec3;

use crate::geometry::rotation_vector;
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// Forward kinematics of `pose` into `frames` and the residual (rows as `J`'s) into `residual`;
/// returns `|r|²`. `tree_poles` are the goals with a residual row for their pole's swivel.
pub(super) fn evaluate(problem: &Problem, tree_poles: &[usize], pose: &Pose, frames: &mut Frames, residual: &mut [f64]) -> f64 {
    problem.rig().forward_into(pose, frames);
    self::residual(problem, tree_poles, frames, residual)
}

/// The residual (rows as `J`'s) of the pose whose forward kinematics is `frames`, into
/// `residual`; returns `|r|²`.
pub(super) fn residual(problem: &Problem, tree_poles: &[usize], frames: &Frames, residual: &mut [f64]) -> f64 {
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
pub(super) fn pole_top(problem: &Problem, gi: usize) -> usize {
    *problem.topology().moved[gi].last().unwrap_or(&problem.goals()[gi].bone)
}

/// A tree pole is kept when its swivel is within this (radians).
pub(super) const POLE_TOLERANCE: f64 = 1e-4;

/// The turn (radians) by which a tree pole's swivel is differentiated numerically.
pub(super) const SWIVEL_STEP: f64 = 1e-7;

/// The swivel of goal `gi`'s chain from its pole, with the chain's top bone at `rot`, `head`:
/// the signed angle, about the axis from `head` to the goal's target, from the pole to the top
/// bone's `X·cos a + Z·sin a` (`a` the pole angle), both seen along that axis. Zero is Sinew's
/// convention for poles in trees (as FABRIK's `keep_tree_poles` turns the chain): the bend plane
/// turns to the pole. Zero when either is along the axis.
pub(super) fn pole_swivel(problem: &Problem, gi: usize, rot: glam::DQuat, head: DVec3) -> f64 {
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

/// `√Σ_g (√w_g · |r_g| · reach_g)²` over the goals `beyond` marks (their targets beyond their
/// chains' reach), `r_g` a goal's three position rows of `rows` (from `goal_rows`; they carry
/// `√w_g` already, and the curvature, like `J Jᵀ`, scales with the weight `w_g`): the size of the
/// curvature Gauss–Newton's model lacks toward them, which the damped methods' λ² stands in for
/// out of reach (times a factor each method measured: [`super::OUT_OF_REACH_DAMPING`] for `dls`).
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
pub(in crate::solver) fn out_of_reach_curvature(problem: &Problem, beyond: &[bool], goal_rows: &[usize], rows: &[f64]) -> f64 {
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
