//! FABRIK's Gauss–Newton finish on joint positions ([`chain_position_step`]).

use glam::DVec3;

/// One Gauss–Newton step (the Jacobian pseudo-inverse, Nilsson §2.4.2) of a free serial chain of
/// ball joints, on its joint positions: `p[0]` is the pinned top and bone k runs from `p[k]` to
/// `p[k + 1]`. The joints turn by the least total turn `Σ|ωₖ|²` that moves the end `p[m]` onto
/// `target` to first order: `ωₖ = rₖ × y` with `(Σₖ |rₖ|² I − rₖ rₖᵀ) y = target − p[m]`, `rₖ`
/// the lever from joint k to the end (`J Jᵀ` in closed form, as the DLS steps'). Bone k turns by
/// the sum of the turns of the joints above it, applied as the rotation with that half-angle
/// (Cayley) vector, so bone lengths are kept to round-off and the step is first-order exact:
/// near a solution the gap shrinks quadratically. Returns false, changing nothing, when `J Jᵀ`
/// is singular (a straight chain cannot lengthen or shorten to first order).
#[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN refused: see the determinant test
pub(crate) fn chain_position_step(p: &mut [DVec3], target: DVec3) -> bool {
    let m = p.len() - 1;
    let end = p[m];
    // Σ rₖ rₖᵀ, its six distinct entries.
    let (mut xx, mut yy, mut zz, mut xy, mut xz, mut yz) = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    for &joint in &p[..m] {
        let r = end - joint;
        xx += r.x * r.x;
        yy += r.y * r.y;
        zz += r.z * r.z;
        xy += r.x * r.y;
        xz += r.x * r.z;
        yz += r.y * r.z;
    }
    let (a00, a11, a22, a01, a02, a12) = (yy + zz, xx + zz, xx + yy, -xy, -xz, -yz);
    // Symmetric inverse by cofactors.
    let (c00, c01, c02) = (a11 * a22 - a12 * a12, a02 * a12 - a01 * a22, a01 * a12 - a02 * a11);
    let (c11, c12, c22) = (a00 * a22 - a02 * a02, a01 * a02 - a00 * a12, a00 * a11 - a01 * a01);
    let det = a00 * c00 + a01 * c01 + a02 * c02;
    let trace = a00 + a11 + a22;
    // (Negated so that a NaN determinant is refused too.)
    if !(det > SINGULAR_GRAM * trace * trace * trace) {
        return false;
    }
    // y / 2, so that the half turns below are sums of rₖ × (y / 2).
    let d = (target - end) * (0.5 / det);
    let half_y = DVec3::new(c00 * d.x + c01 * d.y + c02 * d.z, c01 * d.x + c11 * d.y + c12 * d.z, c02 * d.x + c12 * d.y + c22 * d.z);
    // `a`: half the summed turn of the joints above bone k, its rotation's Cayley vector; the
    // rotation is v + c (a × v + a × (a × v)), c = 2 / (1 + |a|²).
    let mut a = DVec3::ZERO;
    let mut old_head = p[0];
    for k in 0..m {
        a += (end - old_head).cross(half_y);
        let bone = p[k + 1] - old_head;
        old_head = p[k + 1];
        let t = a.cross(bone);
        p[k + 1] = p[k] + bone + (t + a.cross(t)) * (2.0 / (1.0 + a.length_squared()));
    }
    true
}

/// `J Jᵀ` of [`chain_position_step`] counts as singular below this determinant relative to its
/// trace cubed.
const SINGULAR_GRAM: f64 = 1e-15;
