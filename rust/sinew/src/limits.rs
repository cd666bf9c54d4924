//! Joint limits in swing–twist form (FABRIK tech report §3.7.2, Alg. 2 and 3).
//!
//! A bone's local rotation `q` (relative to its rest frame, as Blender's `matrix_basis`) is split
//! into `q = swing * twist`: `twist` turns about the bone's own axis (local +Y) and `swing` tilts
//! that axis. The *rotational* limit of the paper bounds the swing (a [`ConeLimit`] or a
//! [`HingeLimit`]); the *orientational* limit bounds the twist ([`TwistLimit`]).
//!
//! The cone is the paper's irregular cone: four half-angles, one per quadrant, joined by quarter
//! ellipses. As in Blender's own IK solver, the ellipse lives in the plane of the swing's
//! rotation vector `(x, z)` (the exponential map) rather than the paper's `S tan θ` plane, so it
//! stays well defined for half-angles up to 180°.

use glam::{DQuat, DVec2, DVec3};

use crate::error::{Error, Result};
use crate::geometry::{angle_between, clamp_to_ellipse, from_rotation_vector, rotation_vector, swing_twist_y, twist_angle};

/// The irregular cone of Alg. 3: how far the bone may swing about each half of its local X and Z
/// axes, in radians, each in (0, π].
///
/// Swinging about +X tilts the bone (local +Y) toward +Z; about +Z tilts it toward −X. The bound
/// on a swing whose rotation vector is `(x, 0, z)` is the quarter ellipse of its quadrant:
/// `(x / x_lim)² + (z / z_lim)² ≤ 1`. Blender's `ik_min_x, ik_max_x, ik_min_z, ik_max_z` map to
/// `x_neg = -ik_min_x, x_pos = ik_max_x, z_neg = -ik_min_z, z_pos = ik_max_z`
/// ([`ConeLimit::from_blender`]).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConeLimit {
    /// Largest swing about +X (tilt toward +Z).
    pub x_pos: f64,
    /// Largest swing about −X (tilt toward −Z).
    pub x_neg: f64,
    /// Largest swing about +Z (tilt toward −X).
    pub z_pos: f64,
    /// Largest swing about −Z (tilt toward +X).
    pub z_neg: f64,
    /// Which plane the quarter ellipses live in (the rotation vector's, by default).
    #[serde(default, skip_serializing_if = "ConeShape::is_default")]
    pub shape: ConeShape,
}

/// Where a [`ConeLimit`]'s quarter ellipses are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConeShape {
    /// On the swing's rotation vector `(x, z)` (angle × axis): Sinew's own cone, well defined up
    /// to half turns.
    #[default]
    RotationVector,
    /// As Blender's IK reads `ik_min/max_x/z` (`IK_QSwingSegment`): on the swing quaternion's
    /// `(x, z)` components (`sin(angle / 2)` × axis), each half-angle `θ` giving the semi-axis
    /// `sin(θ / 2)`; an axis left at a half turn (not limited) bounds nothing, so the other
    /// axis's limit is an interval, as Blender's single-axis limit is.
    Blender,
}

impl ConeShape {
    fn is_default(&self) -> bool {
        *self == Self::RotationVector
    }
}

impl ConeLimit {
    /// A cone with the four half-angles given (radians, each in (0, π]).
    #[must_use]
    pub const fn new(x_pos: f64, x_neg: f64, z_pos: f64, z_neg: f64) -> Self {
        Self { x_pos, x_neg, z_pos, z_neg, shape: ConeShape::RotationVector }
    }

    /// A circular cone of half-angle `angle`.
    #[must_use]
    pub const fn circular(angle: f64) -> Self {
        Self::new(angle, angle, angle, angle)
    }

    /// The cone Blender's solver builds from a bone's `ik_min_x/ik_max_x/ik_min_z/ik_max_z`
    /// (radians; mins ≤ 0 ≤ maxes).
    ///
    /// Blender rigs often give a bound of exactly 0 (a knee's `ik_min_x`), which would make a
    /// quarter ellipse degenerate; such a bound becomes [`ConeLimit::ZERO_BOUND`]. Values on
    /// the wrong side of zero are left as they are for validation to reject.
    #[must_use]
    pub fn from_blender(min_x: f64, max_x: f64, min_z: f64, max_z: f64) -> Self {
        let half = |v: f64| if v == 0.0 { Self::ZERO_BOUND } else { v };
        Self { shape: ConeShape::Blender, ..Self::new(half(max_x), half(-min_x), half(max_z), half(-min_z)) }
    }

    /// For [`ConeShape::Blender`]: the semi-axes `(a, b)` of the quadrant of a swing whose
    /// quaternion has the `(x, z)` components given, `sin(θ / 2)` of its half-angles; a half-angle
    /// within [`crate::limits::PI_SLACK`] of π gives infinity (that axis bounds nothing).
    #[inline]
    fn blender_axes(&self, x: f64, z: f64) -> (f64, f64) {
        self.blender_quadrant(x, z, f64::sin)
    }

    /// [`Self::blender_axes`] without trigonometry, each semi-axis at most the exact one
    /// (`sin h ≥ h − h³ / 6` for `h ≥ 0`; for the half-angles here, `h ≤ π / 2`, it is positive
    /// and within 8% of it, within 0.2% up to `h = 0.5`): for the tests that need only be sure a
    /// swing is inside. Those run for every bone at every solver step; the two sines of the exact
    /// axes were a tenth of the solving time on Blender-shaped limits (real motion capture).
    #[inline]
    fn blender_axes_within(&self, x: f64, z: f64) -> (f64, f64) {
        self.blender_quadrant(x, z, |h| h - h * h * h * (1.0 / 6.0))
    }

    /// The quadrant's half-angles for `(x, z)` as semi-axes `sin_half(θ / 2)`, infinity for a
    /// half-angle within [`crate::limits::PI_SLACK`] of π.
    #[inline(always)]
    fn blender_quadrant(&self, x: f64, z: f64, sin_half: impl Fn(f64) -> f64) -> (f64, f64) {
        let semi = |theta: f64| if theta >= std::f64::consts::PI - PI_SLACK { f64::INFINITY } else { sin_half(0.5 * theta) };
        (semi(if x >= 0.0 { self.x_pos } else { self.x_neg }), semi(if z >= 0.0 { self.z_pos } else { self.z_neg }))
    }

    /// For [`ConeShape::Blender`]: whether `(x, z)`, the swing quaternion's components times
    /// `√n2` (its squared norm `n2`), is surely inside the region ([`Self::blender_axes_within`]):
    /// `(x / a)² + (z / b)² ≤ n2` with a margin, multiplied out (no division) where both
    /// semi-axes are finite.
    #[inline]
    fn blender_surely_inside(&self, x: f64, z: f64, n2: f64) -> bool {
        let (a, b) = self.blender_axes_within(x, z);
        // (Multiplied out only where `(a·b)²` cannot underflow: a cone that `Rig::set_limit`
        // accepts has no half-angle under `ZERO_BOUND`, but this one may not have been checked.)
        if a.is_finite() && b.is_finite() && a.min(b) > 1e-60 {
            let (xb, za, ab) = (x * b, z * a, a * b);
            return xb * xb + za * za <= SURE_MARGIN * n2 * ab * ab;
        }
        (x / a).powi(2) + (z / b).powi(2) <= SURE_MARGIN * n2
    }

    /// For [`ConeShape::Blender`]: the point of the Blender region nearest `(x, z)`.
    #[inline]
    fn blender_clamp(p: DVec2, (a, b): (f64, f64)) -> DVec2 {
        match (a.is_finite(), b.is_finite()) {
            (false, false) => p,
            (true, false) => DVec2::new(p.x.clamp(-a, a), p.y),
            (false, true) => DVec2::new(p.x, p.y.clamp(-b, b)),
            (true, true) => clamp_to_ellipse(p, a, b),
        }
    }

    /// The half-angle (radians) that stands for a bound of 0 in [`ConeLimit::from_blender`].
    pub const ZERO_BOUND: f64 = 1e-6;

    /// The point of the cone's boundary in its own plane (the rotation vector's `(x, z)`, or for
    /// [`ConeShape::Blender`] the swing quaternion's) at parameter `phi` (radians) around it:
    /// `phi = 0, π/2, π, 3π/2` give the bounds about +X, +Z, −X and −Z, and each quadrant in
    /// between is its quarter ellipse `(a cos φ, b sin φ)`. A Blender cone with an unbounded axis
    /// (a half turn) is a band of the unit disk, traced along the ray at angle `phi`.
    #[must_use]
    pub fn boundary_point(&self, phi: f64) -> DVec2 {
        let (s, c) = phi.sin_cos();
        if self.shape == ConeShape::Blender {
            let (a, b) = self.blender_axes(c, s);
            let t = match (a.is_finite(), b.is_finite()) {
                (true, true) => return DVec2::new(a * c, b * s),
                (true, false) => (a / c.abs()).min(1.0),
                (false, true) => (b / s.abs()).min(1.0),
                (false, false) => 1.0,
            };
            return DVec2::new(t * c, t * s);
        }
        let a = if c >= 0.0 { self.x_pos } else { self.x_neg };
        let b = if s >= 0.0 { self.z_pos } else { self.z_neg };
        DVec2::new(a * c, b * s)
    }

    /// The swing rotation at point `p` of the cone's plane (see [`Self::boundary_point`]).
    #[must_use]
    pub fn swing_at(&self, p: DVec2) -> DQuat {
        if self.shape == ConeShape::Blender {
            let w = (1.0 - p.length_squared()).max(0.0).sqrt();
            return DQuat::from_xyzw(p.x, 0.0, p.y, w).normalize();
        }
        from_rotation_vector(DVec3::new(p.x, 0.0, p.y))
    }

    /// Where the cone lets the bone point: unit directions of the bone's axis (its rest frame's
    /// +Y turned by a swing), `rings × segments` of them, ring-major. Ring `r` is the boundary
    /// scaled by `(r + 1) / rings` in the cone's plane, so the last ring is the boundary itself
    /// and the rings with the rest direction (+Y) at the centre tile the allowed region (both
    /// shapes' regions are star-shaped about it). Segment `k` is at `phi = 2πk / segments`
    /// ([`Self::boundary_point`]): with `segments` a multiple of 4, the four half-angles are
    /// vertices. For drawing the limit as Blender draws its own.
    #[must_use]
    pub fn boundary_directions(&self, segments: usize, rings: usize) -> Vec<DVec3> {
        let mut out = Vec::with_capacity(segments * rings);
        for r in 0..rings {
            let scale = (r + 1) as f64 / rings as f64;
            for k in 0..segments {
                let phi = std::f64::consts::TAU * k as f64 / segments as f64;
                out.push(self.swing_at(self.boundary_point(phi) * scale) * DVec3::Y);
            }
        }
        out
    }

    /// True when `swing` (no component about Y) is on the cone's boundary or outside it, to
    /// within `tolerance` radians: turning it `tolerance` further about its own axis leaves the
    /// cone. A swing of (nearly) no angle is at the bound only if some half-angle is within
    /// `tolerance`.
    #[must_use]
    pub fn at_bound(&self, swing: DQuat, tolerance: f64) -> bool {
        let r = rotation_vector(swing);
        let angle = r.length();
        if angle < 1e-12 {
            return self.x_pos.min(self.x_neg).min(self.z_pos).min(self.z_neg) <= tolerance;
        }
        let grown = from_rotation_vector(r * ((angle + tolerance).min(std::f64::consts::PI) / angle));
        angle_between(self.clamp_swing(grown), grown) > 1e-12
    }

    /// Clamps a swing rotation (no component about Y) into the cone.
    #[must_use]
    pub fn clamp_swing(&self, swing: DQuat) -> DQuat {
        if self.shape == ConeShape::Blender {
            let s = if swing.w < 0.0 { -swing } else { swing };
            let p = DVec2::new(s.x, s.z);
            let c = Self::blender_clamp(p, self.blender_axes(p.x, p.y));
            return if c == p { swing } else { DQuat::from_xyzw(c.x, 0.0, c.y, (1.0 - c.length_squared()).max(0.0).sqrt()).normalize() };
        }
        let r = rotation_vector(swing);
        let p = DVec2::new(r.x, r.z);
        let a = if p.x >= 0.0 { self.x_pos } else { self.x_neg };
        let b = if p.y >= 0.0 { self.z_pos } else { self.z_neg };
        let c = clamp_to_ellipse(p, a, b);
        if c == p {
            swing
        } else {
            from_rotation_vector(DVec3::new(c.x, 0.0, c.y))
        }
    }

    /// True when the swing rotation `swing` (no component about Y, as [`JointLimit`]'s split
    /// gives) is certainly inside the cone, decided without trigonometry. `false` means "not
    /// known": the caller then measures exactly. Limit checks run for every bone at every solver
    /// step and most rotations are well inside, so this skips the arctangent of the exact test.
    ///
    /// The exact test is `angle · |(v̂x / a, v̂z / b)| ≤ 1` with `angle = 2 atan(|v| / w)` for the
    /// quaternion's vector part `v` (`w ≥ 0`); since `atan t ≤ t`, `2 |(vx / a, vz / b)| / w ≤ 1`
    /// implies it (with a margin far above round-off, so both tests never disagree).
    #[inline]
    #[must_use]
    pub fn surely_contains(&self, swing: DQuat) -> bool {
        let (x, z, w) = if swing.w < 0.0 { (-swing.x, -swing.z, -swing.w) } else { (swing.x, swing.z, swing.w) };
        if self.shape == ConeShape::Blender {
            // The components are the coordinates; the semi-axes are bounded from below.
            return self.blender_surely_inside(x, z, x * x + z * z + w * w);
        }
        let a = if x >= 0.0 { self.x_pos } else { self.x_neg };
        let b = if z >= 0.0 { self.z_pos } else { self.z_neg };
        let (u, v) = (x / a, z / b);
        // Squared, so no square root (nor libm's slow `hypot`): both sides are ≥ 0.
        4.0 * (u * u + v * v) <= (SURE_MARGIN * w) * (SURE_MARGIN * w)
    }

    fn validate(&self, bone: &str) -> Result<()> {
        for (what, v) in [("x_pos", self.x_pos), ("x_neg", self.x_neg), ("z_pos", self.z_pos), ("z_neg", self.z_neg)] {
            if !(v > 0.0 && v <= std::f64::consts::PI) {
                return Err(Error::LimitOutOfRange {
                    bone: bone.to_owned(),
                    what: format!("cone {what}"),
                    value: v,
                    range: "(0, π]".into(),
                });
            }
        }
        Ok(())
    }
}

/// Where a local rotation stands against a bone's limit ([`JointLimit::state`]): its parts and
/// whether each is at a bound. For display (the Blender add-on colours a limit at its bound).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LimitState {
    /// The swing part (no component about Y); for a hinge, the rotation about its axis.
    pub swing: DQuat,
    /// The twist angle about the bone's own axis (radians; 0 for a hinge).
    pub twist: f64,
    /// For a hinge, the angle about its axis (radians).
    pub hinge_angle: Option<f64>,
    /// The swing is at (or beyond) the cone's boundary or a hinge bound.
    pub swing_at_bound: bool,
    /// The twist is at (or beyond) a bound of the twist range.
    pub twist_at_bound: bool,
}

/// True when `angle` is within `tolerance` of either end of `[min, max]`, or outside it; a range
/// of a full turn has no bound.
fn range_at_bound(angle: f64, min: f64, max: f64, tolerance: f64) -> bool {
    max - min < std::f64::consts::TAU - 1e-9 && (angle <= min + tolerance || angle >= max - tolerance)
}

/// Twist bounds about the bone's own axis (Alg. 2), radians, `-π ≤ min ≤ max ≤ π`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TwistLimit {
    /// Smallest twist.
    pub min: f64,
    /// Largest twist.
    pub max: f64,
}

impl TwistLimit {
    /// True when the twist rotation `twist` (about Y only, unit) is certainly inside the range,
    /// decided without trigonometry (see [`ConeLimit::surely_contains`]): its angle is
    /// `2 atan(y / w)` for `w ≥ 0`, at most `2 |y| / w` in size, so a range containing
    /// `[-2 |y| / w, 2 |y| / w]` contains it. `false` means "not known".
    #[inline]
    #[must_use]
    pub fn surely_contains(&self, twist: DQuat) -> bool {
        let bound = 2.0 * twist.y.abs();
        let w = twist.w.abs();
        bound <= SURE_MARGIN * w * (-self.min) && bound <= SURE_MARGIN * w * self.max
    }
}

/// Safety factor of the trigonometry-free inside tests ([`ConeLimit::surely_contains`],
/// [`TwistLimit::surely_contains`]): far from 1 by round-off, close to 1 in effect.
const SURE_MARGIN: f64 = 1.0 - 1e-9;

/// The angle in `[min, max]` nearest to `angle` on the circle (all radians, `angle` in
/// (−π, π], `−π ≤ min ≤ max ≤ π`): inside the range, `angle` itself; outside, the bound it is
/// closer to going round either way, so a hinge `[0, 3]` given 3.2 rad (read as −3.08) clamps to 3,
/// not 0. At equal distances, `min`. Every hinge and twist clamp goes through here.
#[must_use]
#[inline]
pub fn clamp_angle(angle: f64, min: f64, max: f64) -> f64 {
    if angle >= min && angle <= max {
        return angle;
    }
    let below = crate::geometry::wrap_angle(min - angle).abs();
    let above = crate::geometry::wrap_angle(angle - max).abs();
    if above < below { max } else { min }
}

/// How far past π (radians) a limit angle may be given and still be read as π: Blender stores
/// its default ±180° IK limits as the single-precision `3.1415927410125732`, 8.7e-8 above π, and
/// sliders that end at 180° do the same.
pub const PI_SLACK: f64 = 1e-6;

/// `v` with a value within [`PI_SLACK`] beyond ±π read as ±π (others unchanged).
#[inline]
fn snap_pi(v: f64) -> f64 {
    use std::f64::consts::PI;
    if v > PI && v <= PI + PI_SLACK {
        PI
    } else if (-PI - PI_SLACK..-PI).contains(&v) {
        -PI
    } else {
        v
    }
}

/// A one-axis joint: the local rotation turns about `axis` only, by an angle in `[min, max]`.
///
/// `axis` is a unit vector in the bone's rest frame (an elbow or knee is usually local X). The
/// hinge also decides the bend direction when targets leave it open.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HingeLimit {
    /// The hinge axis in the bone's rest frame (normalised on validation).
    pub axis: DVec3,
    /// Smallest angle about the axis, radians, ≥ −π.
    pub min: f64,
    /// Largest angle about the axis, radians, ≤ π.
    pub max: f64,
}

/// What bounds a bone's swing.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Swing {
    /// Any direction.
    #[default]
    Free,
    /// The irregular cone.
    Cone(ConeLimit),
    /// One axis only (twist is then fixed at zero).
    Hinge(HingeLimit),
}

/// A joint's rotational degrees of freedom: what a solver step may turn the bone about. Each
/// kind gives its own axes to the solvers (`Freedom::step_axes`), as Blender's `IK_QSegment`
/// subclasses do (`IK_QNullSegment`, `IK_QSphericalSegment`, `IK_QSwingSegment`,
/// `IK_QRevoluteSegment`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Freedom {
    /// None: the bone is locked and keeps the rotation it starts the solve with
    /// ([`JointLimit::constrain`]).
    Fixed,
    /// Three: swing and twist (each perhaps bounded).
    Ball,
    /// Two: swing only, the twist held (a twist range of one value, as Blender's `lock_ik_y`).
    Swing,
    /// One: the angle about the hinge's axis (in the bone's rest frame), within its range.
    Hinge(HingeLimit),
}

/// The axes a solver step turns one bone about ([`Freedom::step_axes`]): the first `count` of
/// `axes` (world), each already multiplied by its weight `scales[c]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepAxes {
    pub(crate) axes: [DVec3; 3],
    pub(crate) count: usize,
    /// Per axis, the weight it carries (1 without per-axis stiffness).
    pub(crate) scales: [f64; 3],
    /// `axes` are exactly the world axes, unweighted (so closed forms in them apply).
    pub(crate) world: bool,
}

impl Freedom {
    /// How many rotational unknowns the joint has: 0, 3, 2 or 1 (a swing-only bone's steps use
    /// three near a half-turn swing, where its twist is undefined, and one while a bound blocks it:
    /// `Freedom::step_axes`).
    #[must_use]
    pub const fn count(self) -> usize {
        match self {
            Self::Fixed => 0,
            Self::Ball => 3,
            Self::Swing => 2,
            Self::Hinge(_) => 1,
        }
    }

    /// True when a step keeps the bone's twist (about its own +Y) as it was: [`Freedom::Swing`].
    #[inline]
    #[must_use]
    pub const fn holds_twist(self) -> bool {
        matches!(self, Self::Swing)
    }

    /// The world axes a solver step turns the bone about, at world rotation `world` (its own +Y
    /// its direction; `rest_y` gives the direction the bone has at rest under its parent's
    /// current frame), with `blocked` (a world turn a limit holds the bone against) taken out
    /// and each axis weighted by `weights` (per-axis stiffness: each local axis's `1 − stiffness`
    /// relative to the largest, as Blender's `IK_QSegment::SetWeight`). As `IK_QSegment`'s kinds:
    /// - [`Freedom::Hinge`]: its axis, turned into the world.
    /// - [`Freedom::Swing`]: per direction `e` across the bone `d` (its own X and Z, or the one a
    ///   blocked turn leaves), the turn that moves `d` by `e` along the minimal arc from the rest
    ///   direction `y`, `d × e + ((d × y)·e / (1 + y·d)) d` (the swing's angular velocity, which
    ///   keeps the twist of the local rotation's swing–twist split about +Y, as twist limits
    ///   measure it: the second term is the twist a plain turn across the bone would add at
    ///   first order once it is swung). Near a half-turn swing (`d ≈ −y`), where twist is
    ///   undefined, the three axes of a ball.
    /// - [`Freedom::Ball`]: the three world axes, or with per-axis weights the bone's own; less
    ///   the blocked direction (projected out).
    /// - [`Freedom::Fixed`] has none.
    #[must_use]
    pub(crate) fn step_axes(self, world: DQuat, rest_y: impl FnOnce() -> DVec3, blocked: Option<DVec3>, weights: Option<[f64; 3]>) -> StepAxes {
        let mut scales = [1.0; 3];
        match self {
            Self::Fixed => return StepAxes { axes: [DVec3::ZERO; 3], count: 0, scales, world: false },
            Self::Hinge(h) => {
                let mut axes = [world * h.axis, DVec3::ZERO, DVec3::ZERO];
                if let Some(r) = weights {
                    scales[0] = axis_scale(h.axis, r);
                    axes[0] *= scales[0];
                }
                return StepAxes { axes, count: 1, scales, world: false };
            }
            Self::Swing => {
                if let Some((mut axes, count)) = swing_axes(world, rest_y(), blocked) {
                    if let Some(r) = weights {
                        for c in 0..count {
                            scales[c] = axis_scale(world.conjugate() * axes[c], r);
                            axes[c] *= scales[c];
                        }
                    }
                    return StepAxes { axes, count, scales, world: false };
                }
            }
            Self::Ball => {}
        }
        // Per-axis weights: the bone's own axes, each scaled by its weight.
        let own = weights.map(|r| [world * (DVec3::X * r[0]), world * (DVec3::Y * r[1]), world * (DVec3::Z * r[2])]);
        if let Some(v) = blocked {
            let axes = own.unwrap_or(DVec3::AXES).map(|a| a - v * v.dot(a));
            StepAxes { axes, count: 3, scales: weights.unwrap_or(scales), world: false }
        } else if let (Some(own), Some(r)) = (own, weights) {
            StepAxes { axes: own, count: 3, scales: r, world: false }
        } else {
            StepAxes { axes: DVec3::AXES, count: 3, scales, world: true }
        }
    }
}

/// [`Freedom::Swing`]'s axes (see [`Freedom::step_axes`]): its two, or the one `blocked` leaves;
/// `None` near a half-turn swing.
fn swing_axes(world: DQuat, y: DVec3, blocked: Option<DVec3>) -> Option<([DVec3; 3], usize)> {
    let d = world * DVec3::Y;
    let one_plus = 1.0 + y.dot(d);
    if one_plus < 1e-6 {
        return None;
    }
    let lean = d.cross(y) / one_plus;
    let axis = |e: DVec3| d.cross(e) + d * lean.dot(e);
    // A blocked turn `v` moves the bone's direction by `v × d`; the direction left is across both.
    let blocked = blocked.and_then(|v| v.cross(d).try_normalize());
    Some(match blocked {
        Some(moved) => ([axis(d.cross(moved)), DVec3::ZERO, DVec3::ZERO], 1),
        None => ([axis(world * DVec3::X), axis(world * DVec3::Z), DVec3::ZERO], 2),
    })
}

/// The share of a per-axis gain that a turn about `local_axis` (in the bone's own frame, any
/// length) gets, with `ratios` each local axis's gain over the largest: `1 / |(u_c / ratio_c)|`
/// for the unit axis `u`, so the metric `Σ_c (θ u_c / ratio_c)²` of a turn `θ u` is `(θ / scale)²`.
fn axis_scale(local_axis: DVec3, ratios: [f64; 3]) -> f64 {
    let u = local_axis.normalize_or_zero();
    let w = DVec3::new(u.x / ratios[0], u.y / ratios[1], u.z / ratios[2]).length();
    if w > 0.0 { 1.0 / w } else { 1.0 }
}

/// A twist range at most this wide (radians) locks the twist: the bone swings only
/// ([`Freedom::Swing`]).
const TWIST_LOCKED: f64 = 1e-9;

/// Every limit on one bone.
///
/// In the problem format `stiffness` is one number (all three axes) or `[x, y, z]`, one per axis
/// of the bone's own frame (Blender's `ik_stiffness_x/y/z`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(from = "JointLimitRepr", into = "JointLimitRepr")]
pub struct JointLimit {
    /// The rotational (swing) bound.
    pub swing: Swing,
    /// The orientational (twist) bound; `None` means free twist. A hinge takes none (refused by
    /// [`JointLimit::validated`]).
    pub twist: Option<TwistLimit>,
    /// A locked bone keeps the rotation it starts the solve with ([`Freedom::Fixed`]; the rule
    /// is [`JointLimit::constrain`]'s).
    pub locked: bool,
    /// Resistance to motion in [0, 1) about all three axes: 0 is free, near 1 barely moves. Each
    /// solver step moves the bone `1 - stiffness` of the way toward where it wants to go.
    /// [`JointLimit::stiffness_axes`], when set, takes its place.
    pub stiffness: f64,
    /// Resistance per axis of the bone's own frame (X, Y, Z), each in [0, 1), as Blender's
    /// `ik_stiffness_x/y/z`: the damped-least-squares steps weight a turn about local axis `c` by
    /// `1 - stiffness_axes[c]` (Blender's `IK_QSegment::SetWeight`); FABRIK's own steps use the
    /// largest. `None`: [`JointLimit::stiffness`] about every axis.
    pub stiffness_axes: Option<[f64; 3]>,
    /// How readily the bone changes length, in [0, 1], as Blender's `ik_stretch`: 0 (the
    /// default) keeps it rigid; above 0 the bone may scale along its own Y (its length, and with
    /// it the offsets of its children, as a uniform scale), the damped-least-squares steps
    /// weighting that unknown as Blender's IK weights its stretch (`1 − stiffness` with stiffness
    /// `1 − stretch²`, at least 0.01; see `solver::jacobian`). In the problem format it is the
    /// bone's `"stretch"`, not part of `"limit"`.
    pub stretch: f64,
}

/// A bone's stiffness as the problem format writes it: one number, or one per local axis.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum StiffnessRepr {
    All(f64),
    Axes([f64; 3]),
}

/// [`JointLimit`] as the problem format writes it.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct JointLimitRepr {
    swing: Swing,
    twist: Option<TwistLimit>,
    locked: bool,
    stiffness: StiffnessRepr,
}

impl Default for JointLimitRepr {
    fn default() -> Self {
        JointLimit::FREE.into()
    }
}

impl From<JointLimitRepr> for JointLimit {
    fn from(r: JointLimitRepr) -> Self {
        let (stiffness, stiffness_axes) = match r.stiffness {
            StiffnessRepr::All(s) => (s, None),
            StiffnessRepr::Axes(a) => (a[0].max(a[1]).max(a[2]), Some(a)),
        };
        Self { swing: r.swing, twist: r.twist, locked: r.locked, stiffness, stiffness_axes, stretch: 0.0 }
    }
}

impl From<JointLimit> for JointLimitRepr {
    fn from(l: JointLimit) -> Self {
        let stiffness = match l.stiffness_axes {
            Some(a) if !(a[0] == a[1] && a[1] == a[2]) => StiffnessRepr::Axes(a),
            Some(a) => StiffnessRepr::All(a[0]),
            None => StiffnessRepr::All(l.stiffness),
        };
        Self { swing: l.swing, twist: l.twist, locked: l.locked, stiffness }
    }
}

impl Default for JointLimit {
    fn default() -> Self {
        Self::FREE
    }
}

impl JointLimit {
    /// No limit at all.
    pub const FREE: Self = Self { swing: Swing::Free, twist: None, locked: false, stiffness: 0.0, stiffness_axes: None, stretch: 0.0 };

    /// The stiffness about the bone's local X, Y and Z.
    #[must_use]
    pub fn axis_stiffness(&self) -> [f64; 3] {
        self.stiffness_axes.unwrap_or([self.stiffness; 3])
    }

    /// The largest stiffness about any axis (what FABRIK's own steps use).
    #[must_use]
    pub fn max_stiffness(&self) -> f64 {
        let [x, y, z] = self.axis_stiffness();
        x.max(y).max(z)
    }

    /// True when the limit never changes a rotation (free, unlocked, not stiff).
    #[must_use]
    pub fn is_free(&self) -> bool {
        matches!(self.swing, Swing::Free) && self.twist.is_none() && !self.locked && self.max_stiffness() == 0.0
    }

    /// True when the bone's rotation is bounded (cone, hinge, twist or lock).
    #[must_use]
    pub fn constrains_rotation(&self) -> bool {
        self.bounds_swing() || self.twist.is_some() || self.locked
    }

    /// The joint's degrees of freedom: none when locked, a hinge's one, a locked twist's two, or
    /// three.
    #[must_use]
    pub fn freedom(&self) -> Freedom {
        match self.swing {
            _ if self.locked => Freedom::Fixed,
            Swing::Hinge(h) => Freedom::Hinge(h),
            _ if self.twist.is_some_and(|t| t.max - t.min <= TWIST_LOCKED) => Freedom::Swing,
            _ => Freedom::Ball,
        }
    }

    /// True when the swing (the bone's direction) is bounded: a cone or a hinge.
    #[must_use]
    pub fn bounds_swing(&self) -> bool {
        !matches!(self.swing, Swing::Free)
    }

    /// An upper bound (radians) on how far the limit lets the bone's direction swing from rest:
    /// a cone's widest half-angle, π otherwise.
    #[must_use]
    pub fn widest_swing(&self) -> f64 {
        match self.swing {
            Swing::Cone(cone) => cone.x_pos.max(cone.x_neg).max(cone.z_pos).max(cone.z_neg),
            _ => std::f64::consts::PI,
        }
    }

    /// How much shorter than its two links (`rest_head`, from the parent's head to the joint, and
    /// `point` on the bone at rest rotation `rest_rotation`) the joint leaves the span from the
    /// parent's head to `point` at its straightest allowed angle: a hinge's, sampled over its
    /// range (0 for other joints). A knee whose range stops short of straight never straightens.
    pub(crate) fn reach_loss(&self, rest_head: DVec3, rest_rotation: DQuat, point: DVec3) -> f64 {
        let Swing::Hinge(h) = self.swing else { return 0.0 };
        let k = rest_head;
        let span = |t: f64| (k + rest_rotation * DQuat::from_axis_angle(h.axis, t) * point).length();
        const SAMPLES: usize = 64;
        let best = (0..=SAMPLES)
            .map(|i| span(h.min + (h.max - h.min) * i as f64 / SAMPLES as f64))
            .fold(0.0f64, f64::max);
        (k.length() + point.length() - best).max(0.0)
    }

    /// The local rotation the joint takes when a solver asks for `q` in a solve that started it
    /// at `start`: `start` when locked ([`Freedom::Fixed`]), else `q` clamped into the limit.
    #[inline]
    #[must_use]
    pub fn constrain(&self, start: DQuat, q: DQuat) -> DQuat {
        if self.locked { start } else { self.clamp(q) }
    }

    /// [`Self::constrain`] for a step from the rotation `current` (FABRIK's and CCD's own steps):
    /// a stiff joint moves only `1 −` [`Self::max_stiffness`] of the way from `current` to the
    /// clamped `q` (a slerp, clamped again: the slerp of two allowed rotations can leave a cone).
    #[inline]
    #[must_use]
    pub(crate) fn constrain_step(&self, start: DQuat, current: DQuat, q: DQuat) -> DQuat {
        let clamped = self.constrain(start, q);
        let stiffness = self.max_stiffness();
        if stiffness > 0.0 && !self.locked { self.clamp(current.slerp(clamped, 1.0 - stiffness)) } else { clamped }
    }

    /// The allowed local rotation nearest to `local` (swing clamped, then twist clamped).
    ///
    /// A lock is not applied here: [`Self::constrain`] applies it.
    #[must_use]
    pub fn clamp(&self, local: DQuat) -> DQuat {
        match self.swing {
            Swing::Hinge(h) => {
                let angle = clamp_angle(twist_angle(local, h.axis), h.min, h.max);
                DQuat::from_axis_angle(h.axis, angle)
            }
            Swing::Free if self.twist.is_none() => local,
            _ if self.surely_contains(local) => local,
            _ => {
                let (mut swing, mut twist) = self.split(local);
                let mut changed = false;
                if let Swing::Cone(c) = self.swing
                    && !c.surely_contains(swing)
                {
                    let clamped = c.clamp_swing(swing);
                    changed = clamped != swing;
                    swing = clamped;
                }
                if let Some(t) = self.twist
                    && !t.surely_contains(twist)
                {
                    let a = twist_angle(twist, DVec3::Y);
                    let ac = clamp_angle(a, t.min, t.max);
                    if ac != a {
                        twist = DQuat::from_rotation_y(ac);
                        changed = true;
                    }
                }
                // Inside: the rotation itself, not its recomposition (so clamping is exact where
                // it has nothing to do, and cheap).
                if changed { (swing * twist).normalize() } else { local }
            }
        }
    }

    /// Where `local` stands against the limit: its swing and twist (or hinge angle) and which
    /// of them is at a bound, to within `tolerance` radians (see [`ConeLimit::at_bound`]). A lock
    /// is not a bound here.
    #[must_use]
    pub fn state(&self, local: DQuat, tolerance: f64) -> LimitState {
        if let Swing::Hinge(h) = self.swing {
            let angle = twist_angle(local, h.axis);
            return LimitState {
                swing: DQuat::from_axis_angle(h.axis, angle),
                twist: 0.0,
                hinge_angle: Some(angle),
                swing_at_bound: range_at_bound(angle, h.min, h.max, tolerance),
                twist_at_bound: false,
            };
        }
        let (swing, twist) = self.split(local);
        let twist = twist_angle(twist, DVec3::Y);
        LimitState {
            swing,
            twist,
            hinge_angle: None,
            swing_at_bound: matches!(self.swing, Swing::Cone(c) if c.at_bound(swing, tolerance)),
            twist_at_bound: self.twist.is_some_and(|t| range_at_bound(twist, t.min, t.max, tolerance)),
        }
    }

    /// True when `local` (for a cone or twist limit) is certainly inside it, decided without
    /// splitting it: [`ConeLimit::surely_contains`] and [`TwistLimit::surely_contains`] on its
    /// swing and twist, whose tests are homogeneous, so they take the split's parts before
    /// normalisation (no square root or division). `false` means "not known" (and always for a
    /// hinge, or near a half-turn swing, where the split is special).
    #[inline]
    fn surely_contains(&self, local: DQuat) -> bool {
        let q = local;
        let n2 = q.w * q.w + q.y * q.y;
        if matches!(self.swing, Swing::Hinge(_)) || n2 < 1e-18 {
            return false;
        }
        if let Swing::Cone(c) = self.swing
            && c.shape == ConeShape::Blender
        {
            // The swing q · twist⁻¹ times √n2 (see `swing_twist_y`), whose (x, z) over √n2 are
            // the coordinates Blender's ellipse bounds: inside when (x/a)² + (z/b)² ≤ n2.
            let (x, z) = (q.x * q.w + q.z * q.y, q.z * q.w - q.x * q.y);
            if !c.blender_surely_inside(x, z, n2) {
                return false;
            }
        } else if let Swing::Cone(c) = self.swing {
            // The swing q · twist⁻¹ times √n2 (see `swing_twist_y`): (x, z, w) below, w ≥ 0.
            let (x, z, w) = (q.x * q.w + q.z * q.y, q.z * q.w - q.x * q.y, n2);
            let a = if x >= 0.0 { c.x_pos } else { c.x_neg };
            let b = if z >= 0.0 { c.z_pos } else { c.z_neg };
            // `ConeLimit::surely_contains`' test times a²b².
            let (xb, za, wab) = (x * b, z * a, SURE_MARGIN * w * a * b);
            if 4.0 * (xb * xb + za * za) > wab * wab {
                return false;
            }
        }
        match self.twist {
            // The twist (0, y, 0, w) times √n2.
            Some(t) => {
                let (bound, w) = (2.0 * q.y.abs(), SURE_MARGIN * q.w.abs());
                bound <= w * (-t.min) && bound <= w * t.max
            }
            None => true,
        }
    }

    /// True when `local` is outside the limit but its swing mirrored to the other side (`-θ`
    /// for a hinge angle `θ`, the opposite swing for a cone) is inside: the joint is bent the
    /// wrong way. FABRIK's forward stage then flips the joint over instead of pinning it straight.
    #[must_use]
    pub fn bends_wrong_way(&self, local: DQuat) -> bool {
        if self.violation(local) < 1e-9 {
            return false;
        }
        let mirrored = match self.swing {
            Swing::Hinge(h) => DQuat::from_axis_angle(h.axis, -twist_angle(local, h.axis)),
            Swing::Cone(_) => {
                let (swing, twist) = swing_twist_y(local);
                swing.conjugate() * twist
            }
            Swing::Free => return false,
        };
        self.violation(mirrored) < 1e-9
    }

    /// Swing–twist split of `local` about Y. A half-turn swing has no defined twist (every
    /// twist composes to another half turn), so there the twist is chosen inside the twist range
    /// (nearest zero) rather than read as zero.
    fn split(&self, local: DQuat) -> (DQuat, DQuat) {
        if local.w * local.w + local.y * local.y < 1e-18 {
            let angle = self.twist.map_or(0.0, |t| 0.0f64.clamp(t.min, t.max));
            let twist = DQuat::from_rotation_y(angle);
            return ((local * twist.conjugate()).normalize(), twist);
        }
        swing_twist_y(local)
    }

    /// The gradient of a bound's implicit value at `local`, over turns `u` (a rotation vector in
    /// the bone's own frame) that take it to `local · exp(u)`: of its cone's value when `swing`
    /// (1 on the cone: Blender's shape `(X / a)² + (Z / b)²` on the swing quaternion's
    /// components, the quadrant's semi-axes `sin` of the half-angles; the rotation vector's shape
    /// `|(r.x / a, r.z / b)|` on the swing's rotation vector `r`), else of its twist angle. `None`
    /// without a cone (for `swing`). The value's level set through `local` is the bound there
    /// when `local` is on it, so this is the bound's normal in the turns a solver makes (the
    /// bone's world rotation times it, in world space); the direction a clamp removes is normal
    /// only in the cone's own coordinates.
    /// Analytic: the swing's components `(X, Z, W)` ([`swing_twist_y`]) as functions of the
    /// quaternion, each direction `dq = q · (u / 2, 0)`.
    #[must_use]
    pub(crate) fn bound_gradient(&self, local: DQuat, swing: bool) -> Option<DVec3> {
        let q = if local.w < 0.0 { -local } else { local };
        let n2 = q.w * q.w + q.y * q.y;
        if n2 < 1e-24 {
            return None;
        }
        let n = n2.sqrt();
        let v = DVec3::new(q.x, q.y, q.z);
        // The quaternion's change along each axis's turn: vector part, scalar part.
        let dq = DVec3::AXES.map(|axis| (0.5 * (q.w * axis + v.cross(axis)), -0.5 * v.dot(axis)));
        let mut gradient = DVec3::ZERO;
        if !swing {
            // The twist angle 2 atan2(y, w).
            for (k, (d, dw)) in dq.into_iter().enumerate() {
                gradient[k] = 2.0 * (q.w * d.y - q.y * dw) / n2;
            }
            return Some(gradient);
        }
        let Swing::Cone(c) = self.swing else { return None };
        let (x, z) = ((q.x * q.w + q.z * q.y) / n, (q.z * q.w - q.x * q.y) / n);
        let blender = c.shape == ConeShape::Blender;
        let (a, b) = if blender {
            c.blender_axes(x, z)
        } else {
            (if x >= 0.0 { c.x_pos } else { c.x_neg }, if z >= 0.0 { c.z_pos } else { c.z_neg })
        };
        // The rotation vector's shape: |(r.x / a, r.z / b)| for r = f · (X, 0, Z),
        // f = 2 atan2(ρ, W) / ρ, so f · e with e = |(X / a, Z / b)|.
        let rho = x.hypot(z);
        if !blender && rho < 1e-12 {
            return None;
        }
        let e = ((x / a).powi(2) + (z / b).powi(2)).sqrt();
        let f = 2.0 * rho.atan2(n) / rho;
        let (f_rho, f_w) = ((2.0 * n / (rho * rho + n2) - f) / rho, -2.0 / (rho * rho + n2));
        for (k, (d, dw)) in dq.into_iter().enumerate() {
            // d(X, Z, W) along it.
            let dn = (q.w * dw + q.y * d.y) / n;
            let dx = (d.x * q.w + q.x * dw + d.z * q.y + q.z * d.y - x * dn) / n;
            let dz = (d.z * q.w + q.z * dw - d.x * q.y - q.x * d.y - z * dn) / n;
            let d_squares = x * dx / (a * a) + z * dz / (b * b);
            gradient[k] = if blender {
                2.0 * d_squares
            } else {
                (f_rho * (x * dx + z * dz) / rho + f_w * dn) * e + f * d_squares / e
            };
        }
        Some(gradient)
    }

    /// A cheap measure of how far `local` is outside the limit (0 inside, growing with the
    /// distance outside, radians-like): solvers use it to compare candidate rotations without
    /// projecting each one. Locks are not measured here.
    #[must_use]
    pub fn excess(&self, local: DQuat) -> f64 {
        match self.swing {
            Swing::Hinge(h) => {
                let angle = twist_angle(local, h.axis);
                let off_axis = angle_between(local, DQuat::from_axis_angle(h.axis, angle));
                off_axis + (h.min - angle).max(0.0) + (angle - h.max).max(0.0)
            }
            Swing::Free if self.twist.is_none() => 0.0,
            _ if self.surely_contains(local) => 0.0,
            _ => {
                let (swing, twist) = self.split(local);
                let mut e = 0.0;
                if let Swing::Cone(c) = self.swing
                    && !c.surely_contains(swing)
                {
                    if c.shape == ConeShape::Blender {
                        e += angle_between(swing, c.clamp_swing(swing));
                    } else {
                        let r = rotation_vector(swing);
                        let a = if r.x >= 0.0 { c.x_pos } else { c.x_neg };
                        let b = if r.z >= 0.0 { c.z_pos } else { c.z_neg };
                        let k = ((r.x / a).powi(2) + (r.z / b).powi(2)).sqrt();
                        if k > 1.0 {
                            e += (1.0 - 1.0 / k) * r.length();
                        }
                    }
                }
                if let Some(t) = self.twist
                    && !t.surely_contains(twist)
                {
                    let a = twist_angle(twist, DVec3::Y);
                    e += (t.min - a).max(0.0) + (a - t.max).max(0.0);
                }
                e
            }
        }
    }

    /// True when `local` is inside the limit: [`Self::clamp`] leaves it where it is (to within
    /// [`Self::violation`] 1e-9 rad, the tolerance the property tests hold every solution to).
    /// Locks are not checked here.
    #[must_use]
    pub fn contains(&self, local: DQuat) -> bool {
        let clamped = self.clamp(local);
        clamped == local || angle_between(clamped, local) <= 1e-9
    }

    /// How far `local` is outside the limit, as the angle between it and [`Self::clamp`] of it
    /// (0 inside). Tests use it to assert that no solution violates a limit.
    #[must_use]
    pub fn violation(&self, local: DQuat) -> f64 {
        angle_between(self.clamp(local), local)
    }

    /// The direction the bone leans toward when its limit leaves room to bend only one way:
    /// the middle of a hinge's range, or the swing to the centre of a lopsided cone. `None` when
    /// the limit has no preferred bend (free, symmetric cone, or a hinge whose range is centred
    /// on zero).
    #[must_use]
    pub fn preferred_bend(&self) -> Option<DQuat> {
        self.preferred_bend_vector().map(from_rotation_vector)
    }

    /// [`Self::preferred_bend`] as a rotation vector (axis × angle, in the bone's rest frame),
    /// without trigonometry.
    #[must_use]
    pub fn preferred_bend_vector(&self) -> Option<DVec3> {
        match self.swing {
            Swing::Hinge(h) => {
                let mid = 0.5 * (h.min + h.max);
                (mid.abs() > 1e-6).then(|| h.axis * mid)
            }
            Swing::Cone(c) => {
                let cx = 0.5 * (c.x_pos - c.x_neg);
                let cz = 0.5 * (c.z_pos - c.z_neg);
                (cx.abs() > 1e-6 || cz.abs() > 1e-6).then(|| DVec3::new(cx, 0.0, cz))
            }
            Swing::Free => None,
        }
    }

    /// Checks every value against its range; normalises a hinge axis.
    ///
    /// # Errors
    /// [`Error::LimitOutOfRange`] naming the bone and the value.
    pub fn validated(mut self, bone: &str) -> Result<Self> {
        let out = |what: &str, value: f64, range: &str| Error::LimitOutOfRange {
            bone: bone.to_owned(),
            what: what.to_owned(),
            value,
            range: range.to_owned(),
        };
        use std::f64::consts::PI;
        // Blender's ±180° (single precision, just past π) is π.
        match &mut self.swing {
            Swing::Free => {}
            Swing::Cone(c) => {
                for v in [&mut c.x_pos, &mut c.x_neg, &mut c.z_pos, &mut c.z_neg] {
                    *v = snap_pi(*v);
                }
            }
            Swing::Hinge(h) => (h.min, h.max) = (snap_pi(h.min), snap_pi(h.max)),
        }
        if let Some(t) = &mut self.twist {
            (t.min, t.max) = (snap_pi(t.min), snap_pi(t.max));
        }
        match &mut self.swing {
            Swing::Free => {}
            Swing::Cone(c) => c.validate(bone)?,
            Swing::Hinge(h) => {
                let len = h.axis.length();
                if !len.is_finite() || len < 1e-9 {
                    return Err(out("hinge axis length", len, "a non-zero finite vector"));
                }
                h.axis /= len;
                if !(h.min >= -PI && h.min <= PI) {
                    return Err(out("hinge min", h.min, "[-π, π]"));
                }
                if !(h.max >= h.min && h.max <= PI) {
                    return Err(out("hinge max", h.max, "[min, π]"));
                }
            }
        }
        if let (Swing::Hinge(_), Some(t)) = (self.swing, self.twist) {
            // A hinge has one degree of freedom, its angle about the axis, bounded by its own
            // min and max: a twist range on it would have no meaning, and is refused rather than
            // dropped.
            return Err(out("twist min on a hinge", t.min, "what a hinge takes (it turns only about its axis, within its own min and max: no twist range)"));
        }
        if let Some(t) = self.twist {
            if !(t.min >= -PI && t.min <= PI) {
                return Err(out("twist min", t.min, "[-π, π]"));
            }
            if !(t.max >= t.min && t.max <= PI) {
                return Err(out("twist max", t.max, "[min, π]"));
            }
        }
        // Per axis first, so the message names the axis.
        if let Some(axes) = self.stiffness_axes {
            for (what, v) in ["stiffness x", "stiffness y", "stiffness z"].into_iter().zip(axes) {
                if !(0.0..1.0).contains(&v) {
                    return Err(out(what, v, "[0, 1)"));
                }
            }
        }
        if !(self.stiffness >= 0.0 && self.stiffness < 1.0) {
            return Err(out("stiffness", self.stiffness, "[0, 1)"));
        }
        if !(0.0..=1.0).contains(&self.stretch) {
            return Err(out("stretch", self.stretch, "[0, 1]"));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, FRAC_PI_6};

    #[test]
    fn cone_keeps_inside_and_clamps_outside_per_quadrant() {
        let lim = JointLimit { swing: Swing::Cone(ConeLimit::new(FRAC_PI_2, FRAC_PI_6, FRAC_PI_4, FRAC_PI_4)), ..JointLimit::FREE };
        let inside = DQuat::from_rotation_x(0.5);
        assert!(lim.clamp(inside).abs_diff_eq(inside, 1e-12));
        let outside = DQuat::from_rotation_x(-1.0); // beyond x_neg = 30°
        let c = lim.clamp(outside);
        assert!((rotation_vector(c).x + FRAC_PI_6).abs() < 1e-9, "{:?}", rotation_vector(c));
        assert!(lim.violation(c) < 1e-12);
        assert!(lim.violation(outside) > 0.4);
    }

    #[test]
    fn twist_is_clamped_and_swing_kept() {
        let lim = JointLimit { twist: Some(TwistLimit { min: -0.2, max: 0.3 }), ..JointLimit::FREE };
        let q = DQuat::from_rotation_x(0.4) * DQuat::from_rotation_y(1.0);
        let c = lim.clamp(q);
        let (s, t) = swing_twist_y(c);
        assert!((twist_angle(t, DVec3::Y) - 0.3).abs() < 1e-12);
        assert!(s.abs_diff_eq(DQuat::from_rotation_x(0.4), 1e-12));
    }

    #[test]
    fn hinge_projects_onto_axis_and_prefers_mid_range() {
        let lim = JointLimit {
            swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: 0.0, max: 2.6 }),
            ..JointLimit::FREE
        };
        let c = lim.clamp(DQuat::from_rotation_x(-0.5) * DQuat::from_rotation_z(0.3));
        assert!(c.abs_diff_eq(DQuat::IDENTITY, 1e-12));
        assert!(lim.preferred_bend().unwrap().abs_diff_eq(DQuat::from_rotation_x(1.3), 1e-12));
    }

    /// Each kind of joint gives its own unknowns (as `IK_QSegment`'s kinds): none for a lock, which
    /// keeps its start; one hinge axis; two swing axes that leave the twist as it is to first
    /// order; three for a ball.
    #[test]
    fn each_freedom_gives_its_own_step_axes_and_a_lock_keeps_its_start() {
        let hinge = HingeLimit { axis: DVec3::X, min: -1.0, max: 1.0 };
        let world = DQuat::from_rotation_x(0.5) * DQuat::from_rotation_y(0.2);
        let (start, q) = (DQuat::from_rotation_y(0.1), DQuat::from_rotation_x(1.5) * DQuat::from_rotation_y(0.4));
        let swing_only = JointLimit { twist: Some(TwistLimit { min: 0.2, max: 0.2 }), ..JointLimit::FREE };
        for (lim, freedom) in [
            (JointLimit::FREE, Freedom::Ball),
            (swing_only, Freedom::Swing),
            (JointLimit { swing: Swing::Hinge(hinge), ..JointLimit::FREE }, Freedom::Hinge(hinge)),
            (JointLimit { swing: Swing::Hinge(hinge), locked: true, ..JointLimit::FREE }, Freedom::Fixed),
            (JointLimit { locked: true, ..swing_only }, Freedom::Fixed),
        ] {
            assert_eq!(lim.freedom(), freedom);
            let step = freedom.step_axes(world, || DVec3::Y, None, None);
            assert_eq!(step.count, freedom.count(), "{freedom:?}");
            assert_eq!(lim.constrain(start, q), if freedom == Freedom::Fixed { start } else { lim.clamp(q) });
        }
        let step = Freedom::Hinge(hinge).step_axes(world, || DVec3::Y, None, None);
        assert!(step.axes[0].abs_diff_eq(world * DVec3::X, 1e-15));
        // The swing axes (a bone at rest under an unturned parent, so its local rotation is
        // `world`): a small turn about either keeps the twist.
        let step = Freedom::Swing.step_axes(world, || DVec3::Y, None, None);
        for a in &step.axes[..step.count] {
            let turned = from_rotation_vector(*a * 1e-5) * world;
            let twist = twist_angle(swing_twist_y(turned).1, DVec3::Y);
            assert!((twist - 0.2).abs() < 1e-9, "{a:?}: twist {twist}");
        }
    }

    /// The split-free inside test never says "inside" where the exact test (clamping the split
    /// parts) would move the rotation, and it decides most rotations well inside.
    #[test]
    fn the_split_free_inside_test_agrees_with_clamping() {
        let limits = [
            JointLimit { swing: Swing::Cone(ConeLimit::new(0.7, 0.5, 0.6, 0.4)), twist: Some(TwistLimit { min: -0.3, max: 0.35 }), ..JointLimit::FREE },
            JointLimit { swing: Swing::Cone(ConeLimit::new(FRAC_PI_2, 1e-6, 3.0, FRAC_PI_6)), ..JointLimit::FREE },
            JointLimit { twist: Some(TwistLimit { min: -0.5, max: 0.4 }), ..JointLimit::FREE },
            JointLimit { swing: Swing::Cone(ConeLimit::from_blender(-0.5, 0.7, -0.6, 0.4)), twist: Some(TwistLimit { min: -0.3, max: 0.35 }), ..JointLimit::FREE },
            JointLimit { swing: Swing::Cone(ConeLimit::from_blender(-0.5, 0.7, -std::f64::consts::PI, std::f64::consts::PI)), ..JointLimit::FREE },
        ];
        // A deterministic spread of rotations: axes over the sphere, angles up to a full turn.
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        for lim in limits {
            let mut decided = 0;
            for _ in 0..20_000 {
                let axis = DVec3::new(next() - 0.5, next() - 0.5, next() - 0.5).normalize();
                let q = DQuat::from_axis_angle(axis, 1.5 * next() * next() * std::f64::consts::TAU);
                for q in [q, -q] {
                    if lim.surely_contains(q) {
                        decided += 1;
                        let (swing, twist) = lim.split(q);
                        let cone_ok = match lim.swing {
                            Swing::Cone(c) => c.clamp_swing(swing) == swing,
                            _ => true,
                        };
                        let twist_ok = lim.twist.is_none_or(|t| (t.min..=t.max).contains(&twist_angle(twist, DVec3::Y)));
                        assert!(cone_ok && twist_ok, "{lim:?}: {q:?} said inside");
                    }
                }
            }
            assert!(decided > 2_000, "{lim:?}: only {decided} decided");
        }
    }

    #[test]
    fn hinge_and_twist_clamps_pick_the_nearer_bound_across_a_half_turn() {
        let hinge = JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: 0.0, max: 3.0 }), ..JointLimit::FREE };
        // 3.2 rad reads as −3.08: 0.2 past the top bound, 3.08 below the bottom one.
        let c = hinge.clamp(DQuat::from_rotation_x(3.2));
        assert!((twist_angle(c, DVec3::X) - 3.0).abs() < 1e-12, "{c:?}");
        let c = hinge.clamp(DQuat::from_rotation_x(-0.2));
        assert!(twist_angle(c, DVec3::X).abs() < 1e-12, "{c:?}");
        let twist = JointLimit { twist: Some(TwistLimit { min: -3.0, max: 0.5 }), ..JointLimit::FREE };
        let c = twist.clamp(DQuat::from_rotation_y(3.1));
        assert!((twist_angle(c, DVec3::Y) + 3.0).abs() < 1e-12, "{c:?}");
        let c = twist.clamp(DQuat::from_rotation_y(0.9));
        assert!((twist_angle(c, DVec3::Y) - 0.5).abs() < 1e-12, "{c:?}");
        assert_eq!(clamp_angle(0.2, -1.0, 1.0), 0.2);
    }

    #[test]
    fn blender_single_precision_half_turns_are_read_as_pi() {
        use std::f64::consts::PI;
        let f32_pi = f64::from(std::f32::consts::PI);
        assert!(f32_pi > PI);
        let lim = JointLimit {
            swing: Swing::Cone(ConeLimit::new(f32_pi, 1.0, f32_pi, 0.5)),
            twist: Some(TwistLimit { min: -f32_pi, max: f32_pi }),
            ..JointLimit::FREE
        }
        .validated("b")
        .unwrap();
        let Swing::Cone(c) = lim.swing else { panic!() };
        assert_eq!((c.x_pos, c.z_pos), (PI, PI));
        assert_eq!(lim.twist, Some(TwistLimit { min: -PI, max: PI }));
        let hinge = JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: -f32_pi, max: 0.0 }), ..JointLimit::FREE };
        assert!(hinge.validated("b").is_ok());
        // Beyond round-off is still refused.
        assert!(JointLimit { swing: Swing::Cone(ConeLimit::circular(PI + 1e-3)), ..JointLimit::FREE }.validated("b").is_err());
    }

    /// Blender's limits (`IK_QSwingSegment`): an ellipse on the swing quaternion's (x, z), with
    /// semi-axes `sin(θ / 2)`; a single limited axis is an interval on its component.
    #[test]
    fn blender_cones_bound_the_swing_quaternion_as_blender_does() {
        use std::f64::consts::PI;
        let cone = ConeLimit::from_blender(-0.5, 0.7, -0.6, 0.4);
        assert_eq!(cone.shape, ConeShape::Blender);
        let lim = JointLimit { swing: Swing::Cone(cone), ..JointLimit::FREE };
        // About one axis the bound is the angle itself.
        for (axis, max) in [(DVec3::X, 0.7), (-DVec3::X, 0.5), (DVec3::Z, 0.4), (-DVec3::Z, 0.6)] {
            assert!(lim.contains(DQuat::from_axis_angle(axis, max - 1e-6)));
            let c = lim.clamp(DQuat::from_axis_angle(axis, max + 0.3));
            assert!(angle_between(c, DQuat::from_axis_angle(axis, max)) < 1e-9, "{axis}: {c:?}");
        }
        // Between the axes: the quaternion ellipse, not the rotation vector's.
        let inside_q = |q: DQuat| {
            let q = if q.w < 0.0 { -q } else { q };
            let (a, b) = (if q.x >= 0.0 { 0.35f64.sin() } else { 0.25f64.sin() }, if q.z >= 0.0 { 0.2f64.sin() } else { 0.3f64.sin() });
            (q.x / a).powi(2) + (q.z / b).powi(2) <= 1.0
        };
        for k in 0..400 {
            let t = f64::from(k) * 0.0157;
            let swing = from_rotation_vector(DVec3::new(t.cos(), 0.0, t.sin()) * (0.3 + 0.4 * (f64::from(k) * 0.37).sin().abs()));
            assert_eq!(lim.contains(swing), inside_q(swing), "{swing:?}");
        }
        // A narrow ellipse (2.8 rad about X, 0.5 about Z): on the diagonal the rotation-vector
        // cone reaches 0.696 rad and Blender's 0.692; 0.694 is inside one and outside the other.
        let diagonal = from_rotation_vector(DVec3::new(1.0, 0.0, 1.0).normalize() * 0.694);
        let narrow = |shape| JointLimit { swing: Swing::Cone(ConeLimit { shape, ..ConeLimit::new(2.8, 2.8, 0.5, 0.5) }), ..JointLimit::FREE };
        assert!(narrow(ConeShape::RotationVector).contains(diagonal));
        assert!(!narrow(ConeShape::Blender).contains(diagonal));
        // One axis limited (Z at a half turn): an interval on x, whatever the swing about Z.
        let x_only = JointLimit { swing: Swing::Cone(ConeLimit::from_blender(-0.5, 0.7, -PI, PI)), ..JointLimit::FREE };
        let big_z = DQuat::from_rotation_z(2.5) * DQuat::from_rotation_x(0.6);
        let (swing, _) = swing_twist_y(big_z);
        let x_component = if swing.w < 0.0 { -swing.x } else { swing.x };
        assert_eq!(x_only.contains(swing), x_component <= 0.35f64.sin());
        let c = x_only.clamp(DQuat::from_rotation_z(1.0) * DQuat::from_rotation_x(1.5));
        let (cs, _) = swing_twist_y(c);
        assert!((cs.x.abs() - 0.35f64.sin()).abs() < 1e-9, "{cs:?}");
    }

    /// The drawn cone is the clamped one: every boundary direction, as the swing that turns +Y
    /// onto it, is inside the limit, and turning it a little further leaves it; the four
    /// half-angles are vertices; the inner rings are inside.
    #[test]
    fn cone_boundary_directions_lie_on_the_limit() {
        use std::f64::consts::PI;
        let cones = [
            ConeLimit::new(FRAC_PI_2, FRAC_PI_6, FRAC_PI_4, 1.0),
            ConeLimit::new(2.8, 2.8, 0.5, 0.5),
            ConeLimit::new(PI, 0.3, PI, 0.2),
            ConeLimit::from_blender(-0.5, 0.7, -0.6, 0.4),
            ConeLimit::from_blender(-0.5, 0.7, -PI, PI),
            ConeLimit::from_blender(-PI, PI, -0.3, 1.2),
            ConeLimit::from_blender(0.0, 2.6, -0.2, 0.2),
        ];
        let (segments, rings) = (64, 3);
        for cone in cones {
            let lim = JointLimit { swing: Swing::Cone(cone), ..JointLimit::FREE }.validated("b").unwrap();
            let Swing::Cone(c) = lim.swing else { panic!() };
            let dirs = c.boundary_directions(segments, rings);
            assert_eq!(dirs.len(), segments * rings);
            for (i, d) in dirs.iter().enumerate() {
                assert!((d.length() - 1.0).abs() < 1e-12);
                if d.y < -1.0 + 1e-9 {
                    continue; // a half turn: every axis in the XZ plane gives it (the one drawn is inside)
                }
                let swing = DQuat::from_rotation_arc(DVec3::Y, *d);
                assert!(lim.violation(swing) < 1e-9, "{cone:?} #{i}: {d:?} outside by {}", lim.violation(swing));
                let (axis, angle) = swing.to_axis_angle();
                if i < segments * (rings - 1) || angle > PI - 1e-3 {
                    continue; // inner rings; the half turn (the band's ends) has nowhere further to go
                }
                let further = DQuat::from_axis_angle(axis, angle + 1e-4);
                // (Beyond a thin ellipse's tip the clamp moves it by less than 1e-9: any move counts.)
                assert!(lim.clamp(further) != further, "{cone:?} #{i}: {further:?} is still inside");
                assert!(c.at_bound(swing, 1e-6), "{cone:?} #{i}");
            }
            // The half-angles: segment 0 is the bound about +X, segment n/4 about +Z, and so on.
            let last = &dirs[segments * (rings - 1)..];
            for (k, axis, bound) in [(0, DVec3::X, c.x_pos), (16, DVec3::Z, c.z_pos), (32, -DVec3::X, c.x_neg), (48, -DVec3::Z, c.z_neg)] {
                if c.shape == ConeShape::Blender && bound >= PI - PI_SLACK {
                    continue; // unbounded: the band reaches the half turn
                }
                let expected = DQuat::from_axis_angle(axis, bound) * DVec3::Y;
                assert!((last[k] - expected).length() < 1e-9, "{cone:?}: segment {k} {:?} vs {expected:?}", last[k]);
            }
        }
    }

    /// A cone's implicit value (1 on the cone) at `local`'s swing, as [`JointLimit::bound_gradient`]
    /// states it, and the twist angle: what the gradient is checked against.
    fn bound_value(lim: &JointLimit, local: DQuat, swing: bool) -> f64 {
        let (s, t) = lim.split(local);
        if !swing {
            return twist_angle(t, DVec3::Y);
        }
        let Swing::Cone(c) = lim.swing else { unreachable!() };
        let s = if s.w < 0.0 { -s } else { s };
        if c.shape == ConeShape::Blender {
            let (a, b) = c.blender_axes(s.x, s.z);
            return (s.x / a).powi(2) + (s.z / b).powi(2);
        }
        let r = rotation_vector(s);
        let a = if r.x >= 0.0 { c.x_pos } else { c.x_neg };
        let b = if r.z >= 0.0 { c.z_pos } else { c.z_neg };
        ((r.x / a).powi(2) + (r.z / b).powi(2)).sqrt()
    }

    #[test]
    fn bound_gradients_are_the_derivatives_of_the_bounds_values() {
        let cone = ConeLimit::new(0.8, 0.4, 0.6, 0.5);
        let limits = [ConeShape::RotationVector, ConeShape::Blender].map(|shape| JointLimit {
            swing: Swing::Cone(ConeLimit { shape, ..cone }),
            twist: Some(TwistLimit { min: -0.3, max: 0.2 }),
            ..JointLimit::FREE
        });
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        let h = 1e-6;
        for lim in &limits {
            for _ in 0..200 {
                let swing = DVec3::new(next(), 0.0, next()) * 1.2;
                let local = from_rotation_vector(swing) * DQuat::from_rotation_y(next() * 0.5);
                for along_swing in [true, false] {
                    let g = lim.bound_gradient(local, along_swing).unwrap();
                    for (k, axis) in DVec3::AXES.iter().enumerate() {
                        let at = |t: f64| bound_value(lim, local * from_rotation_vector(*axis * t), along_swing);
                        let numeric = (at(h) - at(-h)) / (2.0 * h);
                        assert!((g[k] - numeric).abs() < 1e-6 * (1.0 + numeric.abs()), "{:?} swing {along_swing}: {g} against {numeric} on axis {k} at {local}", lim.swing);
                    }
                }
            }
        }
    }

    #[test]
    fn limit_state_says_which_part_is_at_its_bound() {
        let lim = JointLimit {
            swing: Swing::Cone(ConeLimit::new(0.8, 0.4, 0.6, 0.5)),
            twist: Some(TwistLimit { min: -0.3, max: 0.2 }),
            ..JointLimit::FREE
        };
        let st = lim.state(DQuat::from_rotation_x(0.8) * DQuat::from_rotation_y(0.1), 1e-3);
        assert!(st.swing_at_bound && !st.twist_at_bound, "{st:?}");
        assert!((st.twist - 0.1).abs() < 1e-12 && st.swing.abs_diff_eq(DQuat::from_rotation_x(0.8), 1e-12));
        let st = lim.state(DQuat::from_rotation_x(0.79) * DQuat::from_rotation_y(-0.3), 1e-3);
        assert!(!st.swing_at_bound && st.twist_at_bound, "{st:?}");
        let st = lim.state(DQuat::from_rotation_z(-0.9), 1e-3); // beyond z_neg: at the bound too
        assert!(st.swing_at_bound && st.hinge_angle.is_none());
        assert!(!lim.state(DQuat::IDENTITY, 1e-3).swing_at_bound);
        let hinge = JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: 0.0, max: 2.6 }), ..JointLimit::FREE };
        let st = hinge.state(DQuat::from_rotation_x(2.6), 1e-3);
        assert!(st.swing_at_bound && (st.hinge_angle.unwrap() - 2.6).abs() < 1e-12, "{st:?}");
        assert!(hinge.state(DQuat::IDENTITY, 1e-3).swing_at_bound);
        assert!(!hinge.state(DQuat::from_rotation_x(1.0), 1e-3).swing_at_bound);
        let full = JointLimit { twist: Some(TwistLimit { min: -std::f64::consts::PI, max: std::f64::consts::PI }), ..JointLimit::FREE };
        assert!(!full.state(DQuat::from_rotation_y(3.1), 1e-3).twist_at_bound);
    }

    #[test]
    fn a_misspelt_limit_key_is_refused_not_ignored() {
        // (A fuzzer found "sw-ng" loading as a free joint.)
        assert!(serde_json::from_str::<JointLimit>(r#"{"sw-ng": {"cone": {"x_pos": 1, "x_neg": 1, "z_pos": 1, "z_neg": 1}}}"#).is_err());
        assert!(serde_json::from_str::<JointLimit>(r#"{"swing": {"hinge": {"axis": [1, 0, 0], "min": 0, "max": 1, "mx": 2}}}"#).is_err());
        assert!(serde_json::from_str::<JointLimit>(r#"{"swing": {"cone": {"x_pos": 1, "x_neg": 1, "z_pos": 1, "z_neg": 1}}, "locked": false}"#).is_ok());
    }

    #[test]
    fn bad_values_are_rejected() {
        let bad = [
            JointLimit { swing: Swing::Cone(ConeLimit::new(0.0, 1.0, 1.0, 1.0)), ..JointLimit::FREE },
            JointLimit { swing: Swing::Cone(ConeLimit::new(4.0, 1.0, 1.0, 1.0)), ..JointLimit::FREE },
            JointLimit { swing: Swing::Cone(ConeLimit::new(f64::NAN, 1.0, 1.0, 1.0)), ..JointLimit::FREE },
            JointLimit { twist: Some(TwistLimit { min: 0.5, max: 0.1 }), ..JointLimit::FREE },
            JointLimit { stiffness: 1.0, ..JointLimit::FREE },
            JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::ZERO, min: 0.0, max: 1.0 }), ..JointLimit::FREE },
            // A hinge has one degree of freedom: a twist range on it is refused, not dropped.
            JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: 0.0, max: 1.0 }), twist: Some(TwistLimit { min: -0.1, max: 0.1 }), ..JointLimit::FREE },
        ];
        for b in bad {
            assert!(matches!(b.validated("b"), Err(Error::LimitOutOfRange { .. })), "{b:?}");
        }
    }
}
