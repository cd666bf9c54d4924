//! The reference pose a solve falls back to, and the pole pre-pass every method runs on it.
//!
//! Where the goals leave freedom (how a spine shares its bend, where a knee points without a
//! pole, how much a bone twists), a solver of a problem with a reference
//! ([`crate::Problem::reference`]: the rest pose unless set; in a DCC the keyed pose before IK)
//! returns the pose nearest it, as Blender's IK does by starting
//! every evaluation from the pose before IK. This module builds the reference a solve actually
//! uses ([`effective_reference`]): the problem's reference clamped into every limit, then each
//! lone chain's pole applied to it exactly as Blender's `IK_QJacobianSolver::ConstrainPoleVector`
//! does before its iterations ([`crate::Pole`]). The least-squares steps then pull toward it
//! ([`super::jacobian::DlsSteps::refine_toward`]).

use glam::{DMat3, DQuat, DVec3};

use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// The reference pose a solve of `problem` uses, into `out` (rotations and root translation)
/// with its forward kinematics in `frames`: [`Problem::reference`] (rest where none is set)
/// clamped into every limit, bones no goal moves and locked ones at their `start` rotations, and the chain of every
/// goal with a pole that no other goal moves turned about its top bone's head as Blender's pole
/// turns it ([`turn_chain_toward_pole`]). A function of the problem alone (and of the locked
/// bones' start), so every start converges to the same answer.
pub(crate) fn effective_reference(problem: &Problem, start: &Pose, out: &mut Pose, frames: &mut Frames) {
    out.root_translation = problem.reference_into(start, &mut out.rotations, &mut out.scales);
    let rig = problem.rig();
    rig.forward_into(out, frames);
    let topo = problem.topology();
    for (gi, g) in problem.goals().iter().enumerate() {
        if g.pole.is_some() && topo.is_lone_chain(gi) {
            turn_chain_toward_pole(problem, gi, &mut out.rotations, &out.scales, frames);
        }
    }
}

/// Whether a solve whose start has forward kinematics `frames` starts near its answer: every
/// goal's gap within [`NEAR_FRACTION`] of its chain's reach (a tracking frame, warm-started
/// from the frame before). The steps toward the reference then start there, which is cheaper
/// and ends at the same pose; otherwise they start from the reference itself, as Blender's IK
/// starts every evaluation from the pose before IK.
pub(crate) fn starts_near(problem: &Problem, frames: &Frames) -> bool {
    let topo = problem.topology();
    problem.goals().iter().enumerate().all(|(gi, g)| (frames.effector(g.bone, g.use_tail) - g.target).length() <= NEAR_FRACTION * topo.chain_reach[gi])
}

/// See [`starts_near`].
const NEAR_FRACTION: f64 = 0.05;

/// Blender's pole turn of goal `gi`'s chain (which must have a pole) on the pose whose local
/// rotations are `locals` (and length scales `scales`, empty for all 1) and forward kinematics
/// `frames` (both updated): the chain turns
/// rigidly about its top bone's head by the rotation taking the frame (top head → effector,
/// `up` = the top bone's `X·cos a + Z·sin a`) to the frame (top head → target, top head →
/// pole), as `ConstrainPoleVector`. Blender turns past the top bone's limit; Sinew takes the
/// largest part of the turn within it (none for a locked top bone).
pub(crate) fn turn_chain_toward_pole(problem: &Problem, gi: usize, locals: &mut [DQuat], scales: &[f64], frames: &mut Frames) {
    let rig = problem.rig();
    let g = &problem.goals()[gi];
    let (Some(pole), Some(&top)) = (g.pole, problem.topology().moved[gi].last()) else { return };
    let bone = rig.bone(top);
    if bone.limit.locked {
        return;
    }
    let head = frames.heads[top];
    let (sin, cos) = pole.angle.sin_cos();
    let up = frames.rotations[top] * DVec3::new(cos, 0.0, sin);
    let end = frames.effector(g.bone, g.use_tail);
    let Some(turn) = pole_turn(end - head, up, g.target - head, pole.target - head) else { return };
    let parent = bone.parent.map_or(DQuat::IDENTITY, |p| frames.rotations[p]);
    let world = frames.rotations[top];
    let local = |t: f64| rig.local_from_world(top, parent, (DQuat::IDENTITY.slerp(turn, t) * world).normalize());
    // The largest part of the turn within the top bone's limit (never worse than the start,
    // should the start itself be outside).
    let allowed = bone.limit.violation(locals[top]) + 1e-9;
    let fits = |t: f64| bone.limit.violation(local(t)) <= allowed;
    let t = if fits(1.0) {
        1.0
    } else {
        let (mut lo, mut hi) = (0.0, 1.0);
        for _ in 0..40 {
            let mid = 0.5 * (lo + hi);
            if fits(mid) { lo = mid } else { hi = mid }
        }
        lo
    };
    if t > 0.0 {
        locals[top] = local(t);
        rig.forward_from(locals, scales, top, frames);
    }
}

/// The turn of Blender's pole (see [`turn_chain_toward_pole`]) for a chain whose effector is at
/// `end` from the top's head: the rotation taking the look-at frame of (`end`, `up`) to that of
/// (`goal`, `pole`), each frame being (normalized `d × u`, that × `d`, `-d`) for direction `d`
/// and up `u`. `None` when a frame is degenerate (a zero vector, or `up` along the direction).
pub(crate) fn pole_turn(end: DVec3, up: DVec3, goal: DVec3, pole: DVec3) -> Option<DQuat> {
    let frame = |d: DVec3, u: DVec3| -> Option<DMat3> {
        let d = d.try_normalize()?;
        let x = d.cross(u.try_normalize()?).try_normalize()?;
        Some(DMat3::from_cols(x, x.cross(d), -d))
    };
    let (from, to) = (frame(end, up)?, frame(goal, pole)?);
    Some(DQuat::from_mat3(&(to * from.transpose())).normalize())
}
