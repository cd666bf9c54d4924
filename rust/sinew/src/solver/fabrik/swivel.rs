//! The swivel search of the hybrid's bend steering (`bend.rs`): a bone turned about an axis
//! through its head (which keeps that axis's points where they are) to the turn nearest zero at
//! which a limit excess is smallest ([`best_swivel`]), with a coarse scan of the circle, then
//! bisection or Brent's minimisation ([`brent_minimum`]). Not in the report (TR-632,
//! `../shared/papers/fabrik-tech-report-2009.md`), whose limits (§3.7.2) only clamp.

use glam::{DQuat, DVec3};

/// `rot` turned about `axis` (through the bone's head) by the angle nearest zero at which
/// `cost` (a limit excess, 0 when satisfied) is smallest.
///
/// - Zero turn when `rot` already satisfies `cost` (the common case: one evaluation).
/// - Otherwise a coarse scan of the circle ([`SWIVEL_STEPS`] angles) finds the best angle
///   (among satisfying ones, the one nearest zero), so the search is global.
/// - If that angle satisfies, the satisfying turn nearest zero lies between it and its scan
///   neighbour toward zero: bisection on that interval, keeping the satisfying end
///   ([`SWIVEL_ROUNDS`] halvings, one evaluation each).
/// - If no angle satisfies, the excess is minimised on the interval of the best angle's scan
///   neighbours by Brent's method (parabolic steps where the excess is smooth, golden-section
///   steps at its kinks) to [`SWIVEL_TOL`]; the refined angle is kept only if it lowers the
///   excess (a flat excess, such as a cone the swivel cannot change, keeps the scanned angle).
pub(super) fn best_swivel(rot: DQuat, axis: DVec3, cost: impl Fn(DQuat) -> f64) -> DQuat {
    const OK: f64 = 1e-12;
    let swivel = |phi: f64| (DQuat::from_axis_angle(axis, phi) * rot).normalize();
    let excess = |phi: f64| cost(swivel(phi));
    let better = |a: (f64, f64), b: (f64, f64)| a.0 < b.0 - OK || (a.0 <= OK && b.0 <= OK && a.1 < b.1);
    let mut best = (0.0, (excess(0.0), 0.0));
    if best.1.0 <= OK {
        return rot;
    }
    for i in 1..SWIVEL_STEPS {
        let phi = crate::geometry::wrap_angle(i as f64 * std::f64::consts::TAU / SWIVEL_STEPS as f64);
        let sc = (excess(phi), phi.abs());
        if better(sc, best.1) {
            best = (phi, sc);
        }
    }
    let step = std::f64::consts::TAU / SWIVEL_STEPS as f64;
    let (phi, cost_at_phi) = (best.0, best.1.0);
    if cost_at_phi <= OK {
        // `phi` is a nonzero scan angle (zero did not satisfy): move toward zero while the
        // excess stays satisfied, halving the step.
        let toward_zero = -phi.signum();
        let (mut phi, mut step) = (phi, step);
        for _ in 0..SWIVEL_ROUNDS {
            step *= 0.5;
            let cand = phi + toward_zero * step;
            if excess(cand) <= OK {
                phi = cand;
            }
        }
        return swivel(phi);
    }
    let (refined, refined_cost) = brent_minimum(excess, phi - step, phi + step, phi, cost_at_phi, SWIVEL_TOL, SWIVEL_EVALS);
    swivel(if refined_cost < cost_at_phi - OK { refined } else { phi })
}

/// Angles of [`best_swivel`]'s coarse scan of the circle.
const SWIVEL_STEPS: usize = 24;
/// Bisection halvings of [`best_swivel`] toward the satisfying turn nearest zero (the last step is
/// the scan step / 2¹⁶, about 4e-6 rad).
const SWIVEL_ROUNDS: usize = 16;
/// Angle tolerance (radians) of [`best_swivel`]'s minimisation when no turn satisfies.
const SWIVEL_TOL: f64 = 1e-6;
/// Most evaluations of [`best_swivel`]'s minimisation when no turn satisfies.
const SWIVEL_EVALS: usize = 40;

/// The minimum of `f` on `[lo, hi]` by Brent's method (parabolic interpolation safeguarded by
/// golden-section steps; Brent 1973, as in Numerical Recipes' `brent`), starting from `x0` (with
/// `f(x0) = f0`) inside the interval: `(x, f(x))` to within `tol` in `x`, after at most
/// `max_evals` evaluations. Finds a local minimum; the caller brackets it.
fn brent_minimum(f: impl Fn(f64) -> f64, lo: f64, hi: f64, x0: f64, f0: f64, tol: f64, max_evals: usize) -> (f64, f64) {
    const GOLDEN: f64 = 0.381_966_011_250_105_1; // (3 - √5) / 2
    let (mut a, mut b) = (lo, hi);
    let (mut x, mut w, mut v) = (x0, x0, x0);
    let (mut fx, mut fw, mut fv) = (f0, f0, f0);
    // `d`: the last step; `e`: the one before (a parabolic step must be less than half of it).
    let (mut d, mut e) = (0.0f64, 0.0f64);
    for _ in 0..max_evals {
        let xm = 0.5 * (a + b);
        if (x - xm).abs() <= 2.0 * tol - 0.5 * (b - a) {
            break;
        }
        let mut golden = true;
        if e.abs() > tol {
            // Parabola through (x, fx), (w, fw), (v, fv): its vertex is x + p / q.
            let r = (x - w) * (fx - fv);
            let mut q = (x - v) * (fx - fw);
            let mut p = (x - v) * q - (x - w) * r;
            q = 2.0 * (q - r);
            if q > 0.0 {
                p = -p;
            }
            q = q.abs();
            let last = e;
            e = d;
            if p.abs() < (0.5 * q * last).abs() && p > q * (a - x) && p < q * (b - x) {
                d = p / q;
                let u = x + d;
                if u - a < 2.0 * tol || b - u < 2.0 * tol {
                    d = tol.copysign(xm - x);
                }
                golden = false;
            }
        }
        if golden {
            e = if x >= xm { a - x } else { b - x };
            d = GOLDEN * e;
        }
        let u = if d.abs() >= tol { x + d } else { x + tol.copysign(d) };
        let fu = f(u);
        if fu <= fx {
            if u >= x {
                a = x;
            } else {
                b = x;
            }
            (v, fv, w, fw, x, fx) = (w, fw, x, fx, u, fu);
        } else {
            if u < x {
                a = u;
            } else {
                b = u;
            }
            if fu <= fw || w == x {
                (v, fv, w, fw) = (w, fw, u, fu);
            } else if fu <= fv || v == x || v == w {
                (v, fv) = (u, fu);
            }
        }
    }
    (x, fx)
}
