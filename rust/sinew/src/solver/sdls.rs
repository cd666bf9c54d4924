//! Selectively damped least squares (Buss & Kim 2005, "Selectively Damped Least Squares for
//! Inverse Kinematics", J. Graphics Tools 10(3); TR-632 §3.2.6; Nilsson's thesis §2.4.4 cites it
//! as the SVD's use): the pseudo-inverse's response `wᵢ = σᵢ⁻¹ (uᵢ · e) vᵢ` to each singular
//! value, each clamped by its own bound on the joint turn it may cause, then the sum clamped.
//!
//! Per singular value `i`, with `J` in blocks of rows `l` (a goal's three position rows, its
//! three orientation rows, a tree pole's row) and `ρₗⱼ = |J_{l,j}|` the block's column norm:
//! - `Nᵢ = Σₗ |uᵢ,ₗ|`, how far the effectors move for a unit move along `uᵢ`;
//! - `Mᵢ = σᵢ⁻¹ Σⱼ |vⱼᵢ| Σₗ ρₗⱼ`, a bound on how far they move when the joints turn by
//!   `σᵢ⁻¹ vᵢ`;
//! - `γᵢ = min(1, Nᵢ / Mᵢ) · γ_max` with `γ_max = π/4`;
//! - `φᵢ = wᵢ · γᵢ / (γᵢ + max|wᵢ|)`, so no joint turns more than `γᵢ` for it;
//! - `Δθ = Σᵢ φᵢ`, scaled by `γ_max / (γ_max + max|Δθ|)` when some joint would turn more than
//!   `γ_max`.
//!
//! So a direction that needs large joint turns for a small effector motion (near a singular pose)
//! is damped hard, and a well-conditioned one hardly at all: no damping constant to choose, and
//! on targets out of reach the chain settles instead of oscillating (the paper's claim, measured
//! in `tests/jacobian_methods.rs`). The clamps are the smooth ones of Buss's published code, not
//! the paper's `ClampMaxAbs` (scale by `γ / max` only when `max > γ`): measured on the report's
//! chain out of reach, the hard clamp switches on and off near the end and the effector chatters
//! (steps of 5e-3 mm reversing on a 9000 mm chain), where the smooth one settles monotonically.
//! A free root's translation counts in units of the longest chain's reach for the clamps (a
//! translation by the reach as a radian). Goals, limits, poles and the reference pose as the rest
//! of the family (`explicit.rs`).

use std::f64::consts::FRAC_PI_4;

use super::explicit::{Linearized, Rule, explicit_solver};

explicit_solver!(
    /// The selectively-damped-least-squares solver (`"sdls"`; see the module docs).
    Sdls,
    Selective,
    "sdls"
);

/// Buss & Kim's largest joint turn in one step, `γ_max` (radians).
const GAMMA_MAX: f64 = FRAC_PI_4;

/// Buss & Kim's Algorithm (their §4), with scratch space.
#[derive(Debug, Clone, Default)]
pub(super) struct Selective {
    /// First row of each block of rows, then `m`.
    blocks: Vec<usize>,
    /// Per unknown `j`: `Σₗ ρₗⱼ`.
    column_norms: Vec<f64>,
    /// `Δθ` as the sum of the clamped responses.
    dtheta: Vec<f64>,
    /// Per singular value: its coefficient `cᵢ` (`Δθ = Σ cᵢ vᵢ`).
    coefficients: Vec<f64>,
}

impl Rule for Selective {
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool {
        let (m, n) = (lin.m, lin.n);
        self.blocks.clear();
        let mut row = 0;
        for g in lin.problem.goals() {
            self.blocks.push(row);
            row += 3;
            if g.orientation.is_some() {
                self.blocks.push(row);
                row += 3;
            }
        }
        // One row per pole kept in a tree.
        self.blocks.extend(row..m);
        self.blocks.push(m);
        self.column_norms.clear();
        self.column_norms.extend((0..n).map(|j| {
            let col = lin.column(j);
            self.blocks.windows(2).map(|b| col[b[0]..b[1]].iter().map(|x| x * x).sum::<f64>().sqrt()).sum::<f64>()
        }));
        let svd = lin.svd();
        self.dtheta.clear();
        self.dtheta.resize(n, 0.0);
        self.coefficients.clear();
        self.coefficients.resize(svd.sigma.len(), 0.0);
        let mut any = false;
        for (i, &s) in svd.sigma.iter().enumerate() {
            if s <= svd.cutoff {
                continue;
            }
            let alpha = svd.u_dot(i, lin.e);
            let u = svd.u.column(i);
            let big_n: f64 = self.blocks.windows(2).map(|b| u.rows(b[0], b[1] - b[0]).norm()).sum();
            let v = svd.v_t.row(i);
            let big_m = v.iter().zip(&self.column_norms).map(|(vj, rho)| vj.abs() * rho).sum::<f64>() / s;
            let gamma = if big_m > big_n { GAMMA_MAX * big_n / big_m } else { GAMMA_MAX };
            // wᵢ = (α / σ) vᵢ, clamped so that no unknown turns more than γᵢ.
            let w = alpha / s;
            let largest = v.iter().enumerate().map(|(j, &vj)| lin.angle_of(j, w * vj)).fold(0.0, f64::max);
            // Buss's smooth form of ClampMaxAbs (see the module docs): scaled by γ / (γ + max).
            let c = w * gamma / (gamma + largest);
            self.coefficients[i] = c;
            for (d, vj) in self.dtheta.iter_mut().zip(v.iter()) {
                *d += c * vj;
            }
            any = true;
        }
        if !any {
            return false;
        }
        let largest = self.dtheta.iter().enumerate().map(|(j, &d)| lin.angle_of(j, d)).fold(0.0, f64::max);
        let scale = if largest > GAMMA_MAX { GAMMA_MAX / (GAMMA_MAX + largest) } else { 1.0 };
        // Σ cᵢ vᵢ = Jᵀ Σ (cᵢ / σᵢ) uᵢ.
        y.clear();
        y.resize(m, 0.0);
        for (i, &s) in svd.sigma.iter().enumerate() {
            if s > svd.cutoff {
                svd.add_u(i, scale * self.coefficients[i] / s, y);
            }
        }
        true
    }
}
