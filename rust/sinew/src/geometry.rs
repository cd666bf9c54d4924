//! Shared geometry: swing–twist decomposition, shortest arcs, the quadrant ellipse and rigid fits.
//!
//! Everything here is pure math on glam's f64 types; the solvers and the limits call into this
//! module rather than carrying their own copies.

use glam::{DMat3, DQuat, DVec2, DVec3};

/// Below this length a vector is treated as zero (rig units).
pub const EPS_LEN: f64 = 1e-12;

/// `q` scaled to unit length. A quaternion within 1e-6 of unit length (the product of unit
/// quaternions, or one read from single-precision data) takes one Newton step,
/// `q · (3 − |q|²) / 2`, accurate to `¾ (|q|² − 1)²` (at most 4e-13, round-off for
/// products of unit quaternions), with no square root or division; any other takes the exact
/// division by its length. Forward kinematics renormalises every bone this way.
#[must_use]
#[inline]
pub fn renormalize(q: DQuat) -> DQuat {
    let n2 = q.length_squared();
    if (n2 - 1.0).abs() < 1e-6 { q * (0.5 * (3.0 - n2)) } else { q.normalize() }
}

/// `q` read as a start rotation: kept to the bit when it is unit to round-off (`|q|²` within 16
/// ulps of 1), otherwise scaled to unit length (to round-off: two [`renormalize`] steps, or the
/// exact division). Idempotent, so a solve's result read back as the next solve's start is that
/// same start, bit for bit (solving again from a solution depends on it: a stalled solve's
/// landscape is flat, and an ulp in the start can pick another way out of it).
#[must_use]
#[inline]
pub fn unit_start(q: DQuat) -> DQuat {
    let n2 = q.length_squared();
    if (n2 - 1.0).abs() <= 16.0 * f64::EPSILON {
        q
    } else if (n2 - 1.0).abs() < 1e-6 {
        renormalize(renormalize(q))
    } else {
        q.normalize()
    }
}

/// The unit quaternion `q`'s image of +Y (its rotation matrix's second column): `q * DVec3::Y`
/// in fewer operations. Forward kinematics places every tail with it.
#[must_use]
#[inline]
pub fn y_axis(q: DQuat) -> DVec3 {
    let (x, y, z, w) = (q.x, q.y, q.z, q.w);
    DVec3::new(2.0 * (x * y - w * z), 1.0 - 2.0 * (x * x + z * z), 2.0 * (y * z + w * x))
}

/// The shortest rotation taking unit vector `from` to unit vector `to`.
///
/// `shortest_arc(from, to) * from ≈ to`. For opposite vectors the half-turn axis is chosen
/// perpendicular to `from` (deterministically).
#[must_use]
#[inline]
pub fn shortest_arc(from: DVec3, to: DVec3) -> DQuat {
    let d = from.dot(to);
    if d < -1.0 + 1e-12 {
        return DQuat::from_axis_angle(from.any_orthonormal_vector(), std::f64::consts::PI);
    }
    // q = (1 + d, from × to) normalised: the half-angle construction, no trigonometry.
    let c = from.cross(to);
    let w = 1.0 + d;
    let inv = 1.0 / (w * w + c.length_squared()).sqrt();
    DQuat::from_xyzw(c.x * inv, c.y * inv, c.z * inv, w * inv)
}

/// The angle in [0, π] of the rotation taking `a` to `b` (unit quaternions, either sign).
///
/// Computed as `2 atan2(|v|, |w|)` of `a⁻¹ b`, which stays exact near zero where the usual
/// `2 acos(|a·b|)` loses half its digits (it returns ~3e-8 for identical rotations).
#[must_use]
#[inline]
pub fn angle_between(a: DQuat, b: DQuat) -> f64 {
    let d = a.conjugate() * b;
    2.0 * DVec3::new(d.x, d.y, d.z).length().atan2(d.w.abs())
}

/// True when the rotation taking `a` to `b` turns by more than the angle whose half has tangent
/// `tan_half`: [`angle_between`]`(a, b) > 2 atan(tan_half)`, without the arctangent
/// (`|v| > tan_half · |w|` for `a⁻¹ b = (v, w)`). For tests against a fixed angle in the solvers'
/// inner loops.
#[must_use]
#[inline]
pub fn turns_more_than(a: DQuat, b: DQuat, tan_half: f64) -> bool {
    let d = a.conjugate() * b;
    DVec3::new(d.x, d.y, d.z).length() > tan_half * d.w.abs()
}

/// Splits `q` into `swing * twist`, where `twist` turns about `axis` (unit) and `swing` turns
/// `axis` without twisting about it.
#[must_use]
#[inline]
pub fn swing_twist(q: DQuat, axis: DVec3) -> (DQuat, DQuat) {
    let v = DVec3::new(q.x, q.y, q.z);
    let p = axis * v.dot(axis);
    let t = DQuat::from_xyzw(p.x, p.y, p.z, q.w);
    let len = t.length();
    let twist = if len < 1e-12 { DQuat::IDENTITY } else { t / len };
    (q * twist.conjugate(), twist)
}

/// [`swing_twist`] about the bone axis +Y, written out (every joint limit splits a rotation this
/// way at every solver step): `q = swing * twist`, `twist = (0, y, 0, w) / |(y, w)|`, and
/// `swing` has no Y component.
#[must_use]
#[inline]
pub fn swing_twist_y(q: DQuat) -> (DQuat, DQuat) {
    let n2 = q.w * q.w + q.y * q.y;
    if n2 < 1e-24 {
        return (q, DQuat::IDENTITY);
    }
    let inv = 1.0 / n2.sqrt();
    let (ty, tw) = (q.y * inv, q.w * inv);
    // q · twist⁻¹ with twist⁻¹ = (0, −ty, 0, tw); its Y part, q.y·tw − q.w·ty, is zero.
    let swing = DQuat::from_xyzw(q.x * tw + q.z * ty, 0.0, q.z * tw - q.x * ty, q.w * tw + q.y * ty);
    (swing, DQuat::from_xyzw(0.0, ty, 0.0, tw))
}

/// The signed angle in (-π, π] of a rotation `q` about `axis` (the twist part of `q`).
#[must_use]
#[inline]
pub fn twist_angle(q: DQuat, axis: DVec3) -> f64 {
    let s = DVec3::new(q.x, q.y, q.z).dot(axis);
    let a = 2.0 * s.atan2(q.w);
    wrap_angle(a)
}

/// Wraps an angle into (-π, π].
#[must_use]
#[inline]
pub fn wrap_angle(a: f64) -> f64 {
    use std::f64::consts::{PI, TAU};
    // `a % TAU` is `a` itself below a full turn; skip the (slow) fmod there, as solvers call
    // this on every twist angle.
    let mut a = if a.abs() < TAU { a } else { a % TAU };
    if a > PI {
        a -= TAU;
    } else if a <= -PI {
        a += TAU;
    }
    a
}

/// The rotation vector (axis × angle, angle in [0, π]) of `q`: the exponential-map coordinates.
#[must_use]
#[inline]
pub fn rotation_vector(q: DQuat) -> DVec3 {
    let q = if q.w < 0.0 { -q } else { q };
    let v = DVec3::new(q.x, q.y, q.z);
    let s = v.length();
    if s < 1e-12 {
        return v * 2.0;
    }
    let angle = 2.0 * s.atan2(q.w);
    v * (angle / s)
}

/// The rotation with rotation vector `r` (inverse of [`rotation_vector`]): `(sin(θ/2) r̂, cos(θ/2))`
/// with `θ = |r|`.
///
/// Below 0.2 radians (`SERIES_BELOW`; every step of the damped-least-squares solver, most limit
/// clamps) both factors come from their Taylor series, exact to round-off there (the first
/// omitted term is under 3e-17), with no square root or trigonometry.
#[must_use]
#[inline]
pub fn from_rotation_vector(r: DVec3) -> DQuat {
    let t2 = r.length_squared();
    if t2 < SERIES_BELOW * SERIES_BELOW {
        // cos(θ/2) = 1 − θ²/8 + θ⁴/384 − θ⁶/46080 + θ⁸/10321920 − …
        // sin(θ/2)/θ = 1/2 − θ²/48 + θ⁴/3840 − θ⁶/645120 + θ⁸/185794560 − …
        let c = 1.0 + t2 * (-1.0 / 8.0 + t2 * (1.0 / 384.0 + t2 * (-1.0 / 46080.0 + t2 * (1.0 / 10_321_920.0))));
        let s = 0.5 + t2 * (-1.0 / 48.0 + t2 * (1.0 / 3840.0 + t2 * (-1.0 / 645_120.0 + t2 * (1.0 / 185_794_560.0))));
        return DQuat::from_xyzw(r.x * s, r.y * s, r.z * s, c);
    }
    let angle = t2.sqrt();
    DQuat::from_axis_angle(r / angle, angle)
}

/// Rotation angle (radians) below which [`from_rotation_vector`] sums series.
const SERIES_BELOW: f64 = 0.2;

/// The point nearest to `p` on or inside the axis-aligned ellipse with semi-axes `a`, `b` (> 0).
///
/// Points inside are returned unchanged. Outside points are projected by solving for the
/// ellipse's normal parameter (Eberly's formulation) with Newton's method, safeguarded by
/// bisection, so the result is exact to ~1e-12 of the axes however eccentric the ellipse is.
#[must_use]
pub fn clamp_to_ellipse(p: DVec2, a: f64, b: f64) -> DVec2 {
    let (x, y) = (p.x.abs(), p.y.abs());
    if (x / a).powi(2) + (y / b).powi(2) <= 1.0 {
        return p;
    }
    let q = nearest_on_ellipse_first_quadrant(x, y, a, b);
    DVec2::new(q.x.copysign(p.x), q.y.copysign(p.y))
}

/// Nearest point on the ellipse boundary for a point (x, y) with x, y ≥ 0, outside the ellipse.
fn nearest_on_ellipse_first_quadrant(x: f64, y: f64, a: f64, b: f64) -> DVec2 {
    // Solve for t in F(t) = (a x / (t + a²))² + (b y / (t + b²))² - 1 = 0, t ≥ 0 (outside).
    // The nearest point is (a² x / (t + a²), b² y / (t + b²)). F is decreasing and convex in t,
    // so Newton's steps from a point left of the root climb to it monotonically (quadratically
    // near it). They start where the larger term alone is 1 (F ≥ 0 there), not at 0: from 0 a
    // very eccentric ellipse (a bound of ZERO_BOUND) would take dozens of steps. The bracket
    // [lo, hi] is kept and a step leaving it bisects instead, so round-off cannot run away.
    // They stop when a Newton step is within round-off of `t + min(a², b²)`: the nearest point
    // depends on `t` only through `t + a²` and `t + b²`. (A test relative to `t` alone asked for
    // digits `F` does not have when the point lies just outside, `t` near 1e-10: the steps then
    // stalled, bisected and bracketed for up to 58 rounds, 17 on average over the core bench's
    // clamps; now 3 to 7.)
    let (a2, b2) = (a * a, b * b);
    let (ax, by) = (a * x, b * y);
    let f_df = |t: f64| {
        let (u, v) = (ax / (t + a2), by / (t + b2));
        (u * u + v * v - 1.0, -2.0 * (u * u / (t + a2) + v * v / (t + b2)))
    };
    let mut lo = (ax - a2).max(by - b2).max(0.0);
    let mut hi = (ax * ax + by * by).sqrt().max(1e-300);
    // hi satisfies F(hi) <= 0 because t + a² > a x and t + b² > b y there (up to the sum).
    while f_df(hi).0 > 0.0 {
        hi *= 2.0;
    }
    let scale = a2.min(b2).max(1e-300);
    let mut t = lo;
    for _ in 0..100 {
        let (f, df) = f_df(t);
        if f > 0.0 {
            lo = t;
        } else {
            hi = t;
        }
        let newton = t - f / df;
        if newton.is_finite() && (newton - t).abs() <= 1e-15 * (newton.abs() + scale) {
            t = newton;
            break;
        }
        let next = if newton.is_finite() && newton > lo && newton < hi { newton } else { 0.5 * (lo + hi) };
        if (next - t).abs() <= 1e-15 * (next + scale) || hi - lo <= 1e-15 * (hi + scale) {
            t = next;
            break;
        }
        t = next;
    }
    let mut q = DVec2::new(a2 * x / (t + a2), b2 * y / (t + b2));
    // Guard rounding: never report a point outside.
    let k = (q.x / a).powi(2) + (q.y / b).powi(2);
    if k > 1.0 {
        q /= k.sqrt();
    }
    q
}

/// A weighted correspondence for a rigid fit: `local` (a point in the body's frame) should land
/// on `target` (a point in the world).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pull {
    /// The point in the body's own frame, relative to its origin (the bone's head).
    pub local: DVec3,
    /// Where it should go.
    pub target: DVec3,
    /// Its weight (> 0).
    pub weight: f64,
}

/// Refines `rotation` so that it best turns the vectors `a_i` onto the vectors `b_i`
/// (weighted least squares, `Σ w_i |R a_i - b_i|²` minimised).
///
/// Müller et al., "A Robust Method to Extract the Rotational Part of Deformations" (2016):
/// warm-started from `rotation`, it converges in a few steps and, where the fit is degenerate
/// (all vectors collinear), keeps the rotation closest to the start, which is what a tracking
/// solver wants.
#[must_use]
pub fn fit_rotation(rotation: DQuat, pairs: impl Iterator<Item = (DVec3, DVec3, f64)> + Clone) -> DQuat {
    let mut q = rotation;
    for _ in 0..40 {
        // Gradient and Hessian of Σ w b·(R a) under R ← exp(δ) R.
        let mut g = DVec3::ZERO;
        let mut den = 0.0;
        let mut h = DMat3::ZERO;
        for (a, b, w) in pairs.clone() {
            let ra = q * a;
            g += w * ra.cross(b);
            let d = ra.dot(b);
            den += w * d;
            let outer = DMat3::from_cols(ra * b.x, ra * b.y, ra * b.z);
            h += (DMat3::from_diagonal(DVec3::splat(d)) - (outer + outer.transpose()) * 0.5) * w;
        }
        // Newton where the Hessian is positive definite (near the optimum: quadratic
        // convergence); Müller's step elsewhere and along degenerate directions.
        let newton = (h.determinant() > 1e-12 * den.abs().max(1e-300).powi(3))
            .then(|| h.inverse() * g)
            .filter(|d| d.dot(g) > 0.0 && d.length() < 1.0);
        let omega = newton.unwrap_or_else(|| g / (den.abs() + 1e-12));
        let angle = omega.length();
        if angle < 1e-14 {
            break;
        }
        q = (DQuat::from_axis_angle(omega / angle, angle) * q).normalize();
    }
    q
}

/// The weighted rigid transform (rotation, origin) of a body whose local points `pulls[i].local`
/// best reach `pulls[i].target`, warm-started from `rotation`.
///
/// Returns the new rotation and the new origin of the body's frame. With a single pull the fit
/// is degenerate; callers use the FABRIK line step instead.
#[must_use]
pub fn fit_rigid(rotation: DQuat, pulls: &[Pull]) -> (DQuat, DVec3) {
    let wsum: f64 = pulls.iter().map(|p| p.weight).sum();
    let lc = pulls.iter().map(|p| p.local * p.weight).sum::<DVec3>() / wsum;
    let tc = pulls.iter().map(|p| p.target * p.weight).sum::<DVec3>() / wsum;
    let q = fit_rotation(rotation, pulls.iter().map(|p| (p.local - lc, p.target - tc, p.weight)));
    (q, tc - q * lc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    #[test]
    fn renormalize_is_unit_near_and_far_from_unit_length() {
        let q = DQuat::from_axis_angle(DVec3::new(1.0, 2.0, -0.5).normalize(), 1.1);
        for scale in [1.0, 1.0 + 4e-7, 1.0 - 4e-7, 1.0 + 0.9e-6 / 2.0, 2.0, 0.3] {
            let r = renormalize(q * scale);
            assert!((r.length() - 1.0).abs() < 4e-13, "scale {scale}: |r| - 1 = {:e}", r.length() - 1.0);
            assert!((r - q).length() < 1e-12, "scale {scale}: {r:?} vs {q:?}");
        }
    }

    /// Reading a start twice gives the same bits: a solve's result, read back, is its start.
    #[test]
    fn unit_start_is_idempotent_to_the_bit() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        for _ in 0..10_000 {
            let q = DQuat::from_xyzw(next(), next(), next(), next());
            for scale in [1.0, 1.0 + 3e-16, 1.0 - 5e-13, 1.0 + 9e-7, 1.7] {
                let once = unit_start((q.normalize()) * scale);
                assert!((once.length_squared() - 1.0).abs() <= 16.0 * f64::EPSILON, "{once:?}");
                assert_eq!(unit_start(once), once);
            }
        }
        let unit = DQuat::from_axis_angle(DVec3::new(1.0, 2.0, -0.5).normalize(), 1.1);
        assert_eq!(unit_start(unit), unit);
    }

    #[test]
    fn shortest_arc_maps_from_to() {
        let a = DVec3::new(0.3, -0.2, 0.9).normalize();
        let b = DVec3::new(-0.7, 0.1, 0.2).normalize();
        assert!((shortest_arc(a, b) * a - b).length() < 1e-12);
        assert!((shortest_arc(a, -a) * a + a).length() < 1e-12);
        assert!((shortest_arc(a, a) * a - a).length() < 1e-12);
    }

    #[test]
    fn swing_twist_recomposes_and_twist_is_about_axis() {
        let q = DQuat::from_euler(glam::EulerRot::XYZ, 0.4, -1.1, 0.7);
        let (s, t) = swing_twist(q, DVec3::Y);
        assert!((s * t).abs_diff_eq(q, 1e-12) || (s * t).abs_diff_eq(-q, 1e-12));
        assert!(t.x.abs() < 1e-12 && t.z.abs() < 1e-12);
        // The swing has no component about Y.
        assert!(rotation_vector(s).y.abs() < 1e-12);
    }

    #[test]
    fn swing_twist_about_y_is_the_general_split() {
        for q in [
            DQuat::from_euler(glam::EulerRot::XYZ, 0.3, -1.2, 2.5),
            DQuat::from_euler(glam::EulerRot::ZXY, -2.9, 0.1, 0.4),
            DQuat::from_rotation_y(1.0),
            DQuat::from_rotation_x(3.0),
            -DQuat::from_rotation_z(0.2),
        ] {
            let (s, t) = swing_twist_y(q);
            let (s2, t2) = swing_twist(q, DVec3::Y);
            assert!((s - s2).length() < 1e-15 && (t - t2).length() < 1e-15, "{q:?}");
            assert!(s.y == 0.0 && t.x == 0.0 && t.z == 0.0);
            assert!((s * t - q).length() < 1e-15);
        }
    }

    #[test]
    fn rotation_vector_series_matches_trigonometry() {
        for &angle in &[0.0, 1e-9, 1e-4, 0.05, 0.1, 0.199_999, 0.2, 0.7, 3.0] {
            let axis = DVec3::new(0.3, -0.8, 0.5).normalize();
            let q = from_rotation_vector(axis * angle);
            let exact = DQuat::from_axis_angle(axis, angle);
            assert!((q - exact).length() < 4e-16, "angle {angle}: {q:?} vs {exact:?}");
            assert!((q.length() - 1.0).abs() < 4e-16);
        }
    }

    #[test]
    fn rotation_vector_roundtrip() {
        for r in [DVec3::new(0.1, 0.2, -0.3), DVec3::new(0.0, 3.0, 0.0), DVec3::ZERO, DVec3::new(2.0, -1.0, 0.5)] {
            let q = from_rotation_vector(r);
            assert!((rotation_vector(q) - r).length() < 1e-9, "{r:?}");
        }
    }

    #[test]
    fn turns_more_than_agrees_with_angle_between() {
        let a = DQuat::from_euler(glam::EulerRot::YXZ, 0.3, -1.2, 0.4);
        for angle in [1e-9f64, 1e-6, 0.1, 1.0, 3.0] {
            let tan_half = (0.5 * angle).tan();
            for k in [0.5, 0.999, 1.001, 2.0] {
                let turn = (angle * k).min(PI);
                let b = a * DQuat::from_axis_angle(DVec3::new(1.0, 2.0, -0.5).normalize(), turn);
                assert_eq!(turns_more_than(a, b, tan_half), angle_between(a, b) > angle, "{angle} {k}");
                assert_eq!(turns_more_than(a, -b, tan_half), angle_between(a, -b) > angle, "{angle} {k} (other sign)");
            }
        }
    }

    #[test]
    fn ellipse_clamp_is_nearest_and_on_boundary() {
        let (a, b) = (0.5, 2.0);
        let p = DVec2::new(3.0, -1.0);
        let q = clamp_to_ellipse(p, a, b);
        assert!(((q.x / a).powi(2) + (q.y / b).powi(2) - 1.0).abs() < 1e-9);
        // Compare with a dense scan of the boundary.
        let best = (0..200_000)
            .map(|i| {
                let t = i as f64 / 200_000.0 * 2.0 * PI;
                (DVec2::new(a * t.cos(), b * t.sin()) - p).length()
            })
            .fold(f64::INFINITY, f64::min);
        assert!((q - p).length() <= best + 1e-6);
        let inside = DVec2::new(0.1, 0.1);
        assert_eq!(clamp_to_ellipse(inside, a, b), inside);
    }

    #[test]
    fn ellipse_clamp_is_exact_just_outside_and_far_outside() {
        // The nearest boundary point `q` of `p` is on the ellipse, and `p − q` is along the
        // boundary's normal there, `(q.x / a², q.y / b²)`: points from 1e-12 to 10 outside, on
        // round, eccentric and nearly degenerate ellipses.
        for (a, b) in [(0.52, 0.44), (0.35, 0.79), (1.0, 1.0), (2.0, 1e-6), (1e-6, 0.3)] {
            for k in 0..48 {
                let phi = k as f64 * 0.37 + 0.05;
                let on = DVec2::new(a * phi.cos(), b * phi.sin());
                let normal = DVec2::new(on.x / (a * a), on.y / (b * b)).normalize();
                for out in [1e-12, 1e-9, 1e-6, 1e-3, 0.1, 10.0] {
                    let p = on + normal * out;
                    let q = clamp_to_ellipse(p, a, b);
                    assert!(((q.x / a).powi(2) + (q.y / b).powi(2) - 1.0).abs() < 1e-12, "{a} {b} {p:?} -> {q:?}");
                    let n = DVec2::new(q.x / (a * a), q.y / (b * b)).normalize();
                    let d = p - q;
                    assert!(d.perp_dot(n).abs() <= 1e-9 * d.length() + 1e-15, "{a} {b} {p:?} -> {q:?}");
                    assert!((d.length() - out).abs() <= 1e-9 * out.max(1e-3), "{a} {b} {p:?}: {} vs {out}", d.length());
                }
            }
        }
    }

    #[test]
    fn rigid_fit_recovers_a_transform() {
        let r = DQuat::from_euler(glam::EulerRot::YXZ, 0.3, 1.2, -0.4);
        let t = DVec3::new(1.0, 2.0, 3.0);
        let locals = [DVec3::new(1.0, 0.0, 0.0), DVec3::new(0.0, 2.0, 0.0), DVec3::new(0.0, 0.5, 1.0)];
        let pulls: Vec<Pull> = locals.iter().map(|&l| Pull { local: l, target: r * l + t, weight: 1.0 }).collect();
        let (q, o) = fit_rigid(DQuat::IDENTITY, &pulls);
        assert!(q.abs_diff_eq(r, 1e-9) || q.abs_diff_eq(-r, 1e-9), "{q:?} vs {r:?}");
        assert!((o - t).length() < 1e-9);
    }
}
