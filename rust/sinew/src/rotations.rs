//! From solved positions to keyable rotations.
//!
//! FABRIK moves points (§3.7). A DCC keys rotations. The conversion turns each bone by the
//! *smallest* rotation from its previous direction to its new one, so twist the solve did not ask
//! for is kept and nothing flips between frames; then local rotations are read off relative to
//! each parent's solved frame.

use glam::{DQuat, DVec3};

use crate::geometry::{EPS_LEN, renormalize, shortest_arc, y_axis};
use crate::pose::Frames;
use crate::rig::Rig;

/// `rotation` turned by the smallest rotation that takes the bone-local unit direction
/// `local_dir` (as seen through `rotation`) onto the unit world direction `new_dir`.
#[must_use]
#[inline]
pub fn turn_toward(rotation: DQuat, local_dir: DVec3, new_dir: DVec3) -> DQuat {
    renormalize(shortest_arc(rotation * local_dir, new_dir) * rotation)
}

/// A bone's world `rotation` turned by the shortest arc that points its +Y along `d` (a bone
/// from one solved joint to the next), **scaled by some positive factor** (callers normalise
/// once); unchanged when `d` is (next to) zero.
///
/// With `y` the bone's unit +Y, the arc is the half-angle quaternion `(|d| + y·d, y × d)`, of
/// norm `√(2|d| (|d| + y·d))`: neither `d` nor the arc is normalised on the way, which saves two
/// dependent divisions per bone (the serial chain's read-back is a chain of them).
#[inline(always)]
fn aimed_along(rotation: DQuat, d: DVec3) -> DQuat {
    let len = d.length();
    if len <= EPS_LEN {
        return rotation;
    }
    let y = y_axis(rotation);
    let w = len + y.dot(d);
    // As `shortest_arc`: opposite directions turn half a turn about an axis across `y`.
    let arc = if w > 1e-12 * len {
        let c = y.cross(d);
        DQuat::from_xyzw(c.x, c.y, c.z, w)
    } else {
        DQuat::from_axis_angle(y.any_orthonormal_vector(), std::f64::consts::PI)
    };
    arc * rotation
}

/// Re-aims the bones of a serial chain at solved joint positions.
///
/// `chain` lists bones from the top of the chain down (each the parent of the next, connected
/// head-to-tail); `joints[k]` is bone `chain[k]`'s new head and `joints[k + 1]` its new tail.
/// Each bone's world rotation in `frames` is turned by the shortest arc from its old direction to
/// the new one, and heads and tails are set to the joints.
pub fn aim_chain(rig: &Rig, chain: &[usize], joints: &[DVec3], frames: &mut Frames) {
    for (k, &b) in chain.iter().enumerate() {
        frames.rotations[b] = aimed_along(frames.rotations[b], joints[k + 1] - joints[k]).normalize();
        frames.heads[b] = joints[k];
        frames.tails[b] = joints[k] + y_axis(frames.rotations[b]) * rig.bone(b).length;
    }
}

/// The local rotations that aim a serial chain at solved joint positions: what [`aim_chain`]
/// then [`local_rotations`] give for the chain's bones, without placing heads and tails.
///
/// `frames` holds the forward kinematics of the start pose, whose unit local rotations are
/// `start`; `chain` and `joints` are as in [`aim_chain`]. Each chain bone turns from its start
/// world rotation by the shortest arc onto its new direction, and its local rotation (relative to
/// its parent's turned frame) is kept in the hemisphere of its start's; every other bone keeps
/// its start rotation exactly (what `settle` would do): `out` holds `start` on entry. Each
/// bone's turn depends only on its own start frame and joints, not on its parent's result, so
/// the processor overlaps the bones' work; forward kinematics of `out` is the caller's (taking
/// it here, bone by bone, measured slower: it puts the frames' dependent chain inside this loop).
pub(crate) fn aim_serial_chain(rig: &Rig, chain: &[usize], joints: &[DVec3], start: &[DQuat], frames: &Frames, out: &mut [DQuat]) {
    let mut parent = chain.first().and_then(|&top| rig.bone(top).parent).map_or(DQuat::IDENTITY, |p| frames.rotations[p]);
    for (k, &b) in chain.iter().enumerate() {
        // `world` and `parent` carry arbitrary scales; the local rotation is normalised once.
        let world = aimed_along(frames.rotations[b], joints[k + 1] - joints[k]);
        let local = (rig.local_base(b, parent).conjugate() * world).normalize();
        out[b] = if local.dot(start[b]) < 0.0 { -local } else { local };
        parent = world;
    }
}

/// Local rotations (relative to rest, as [`crate::Pose::rotations`]) of every bone in `frames`.
pub fn local_rotations(rig: &Rig, frames: &Frames, out: &mut [DQuat]) {
    for (i, b) in rig.bones().iter().enumerate() {
        let parent = b.parent.map_or(DQuat::IDENTITY, |p| frames.rotations[p]);
        out[i] = rig.local_from_world(i, parent, frames.rotations[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pose::Pose;

    #[test]
    fn aiming_a_chain_reproduces_its_joints_by_fk() {
        let rig = crate::rig::tests::chain(3);
        let mut f = rig.rest_frames().clone();
        let joints = [DVec3::ZERO, DVec3::new(1.0, 0.0, 0.0), DVec3::new(1.0, 0.0, 1.0), DVec3::new(1.0, 1.0, 1.0)];
        aim_chain(&rig, &[0, 1, 2], &joints, &mut f);
        let mut pose = Pose::rest(3);
        local_rotations(&rig, &f, &mut pose.rotations);
        let fk = rig.forward(&pose);
        for k in 0..3 {
            assert!((fk.tails[k] - joints[k + 1]).length() < 1e-12);
        }
    }
}
