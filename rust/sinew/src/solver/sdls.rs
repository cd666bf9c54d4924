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
//! is damped hard, and a well-conditioned one hardly at all: no damping constant to choose.
//!
//! Two details follow Buss's published code rather than the paper's text, and a third departs
//! from both, each chosen by measurement (`bench/results/compare_methods.json`):
//! - the clamps are smooth (`γ / (γ + max)`), not the paper's `ClampMaxAbs` (scale by `γ / max`
//!   only when `max > γ`), which switched on and off near the end out of reach and made the
//!   effector chatter (steps of 5e-3 mm reversing on a 9000 mm chain);
//! - each goal's error `e` (each block of rows) is first clamped to [`TARGET_CLAMP`] of its
//!   chain's reach (Buss's `CalcdTClampedFromdS`, whose `BaseMaxTargetDist` is an absolute
//!   length; here a fraction, so it scales with the rig). Without it, targets far out of reach
//!   from a straight chain make the chain flail (steps of metres on the 9 m chain, 7 of 10 such
//!   targets not settled in 10 000 iterations); with it all settle in about 300. In reach it costs
//!   iterations on far targets (18.7 against 12.7 on the report's reachable set);
//! - toward goals whose targets lie beyond their chains' reach (the report's test), and only
//!   there, each response is damped: `σᵢ / (σᵢ² + λ²)` in place of `σᵢ⁻¹`, with
//!   `λ² = √Σ (|e_g| · reach_g)²` over those goals' clamped errors
//!   (`jacobian::out_of_reach_curvature`). Buss & Kim's responses are undamped Gauss–Newton
//!   steps, whose model of `|e|²` lacks the curvature `Σ eᵢ ∇²eᵢ` that a residual which stays out
//!   of reach makes large; their steps overshoot, and the clamps turn the overshoot into a
//!   two-step cycle. On the thesis' tree with every effector out of range (Table 4.7's set-up)
//!   that cycle ran to the cap on all 160 solves (0.042 units a step, turning back at every
//!   step); damped, all settle, in 17 iterations, and no chain or tree case zigzags. The cost is
//!   on chains, which settled without it: 417 iterations on the report's unreachable targets
//!   against 276. Toward reachable targets nothing changes.
//!
//! On targets out of reach it settles without turning back, on chains and trees (measured in
//! `tests/jacobian_methods.rs` and `docs/benchmarks.md`).
//!
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

/// Each goal's error is clamped to this fraction of its chain's reach before the step (see the
/// module docs).
const TARGET_CLAMP: f64 = 0.2;

/// Toward goals out of reach, each response is damped with λ² this times
/// [`Linearized::out_of_reach`] of the clamped error (see the module docs). 1 measured on the
/// settling cases of `examples/compare_methods.rs`: 0.5 left 4 zigzags toward the target straight
/// below the report's chain, 1 none; 2 cost a third more iterations.
const OUT_OF_REACH_DAMPING: f64 = 1.0;

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
    /// The goal of each block of rows.
    block_goals: Vec<usize>,
    /// `e` with each block clamped.
    clamped: Vec<f64>,
}

impl Rule for Selective {
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool {
        let (m, n) = (lin.m, lin.n);
        self.blocks.clear();
        self.block_goals.clear();
        let mut row = 0;
        for (gi, g) in lin.problem.goals().iter().enumerate() {
            self.blocks.push(row);
            self.block_goals.push(gi);
            row += 3;
            if g.orientation.is_some() {
                self.blocks.push(row);
                self.block_goals.push(gi);
                row += 3;
            }
        }
        // One row per pole kept in a tree, in goal order.
        let goals = lin.problem.goals();
        self.block_goals.extend((0..goals.len()).filter(|&gi| goals[gi].pole.is_some() && !lin.problem.topology().is_lone_chain(gi)));
        self.blocks.extend(row..m);
        self.blocks.push(m);
        debug_assert_eq!(self.blocks.len(), self.block_goals.len() + 1);
        self.column_norms.clear();
        self.column_norms.extend((0..n).map(|j| {
            let col = lin.column(j);
            self.blocks.windows(2).map(|b| col[b[0]..b[1]].iter().map(|x| x * x).sum::<f64>().sqrt()).sum::<f64>()
        }));
        // Each block's error clamped to a fraction of its goal's reach (Buss's
        // `CalcdTClampedFromdS`).
        self.clamped.clear();
        self.clamped.extend_from_slice(lin.e);
        for (b, &goal) in self.blocks.windows(2).zip(&self.block_goals) {
            let block = &mut self.clamped[b[0]..b[1]];
            let limit = TARGET_CLAMP * lin.problem.angle_scale(goal);
            let norm = block.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > limit {
                block.iter_mut().for_each(|x| *x *= limit / norm);
            }
        }
        // Damping toward goals out of reach, from the clamped error the response is to (zero
        // when every target is within reach).
        let lambda2 = OUT_OF_REACH_DAMPING * lin.out_of_reach(&self.clamped);
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
            let alpha = svd.u_dot(i, &self.clamped);
            let u = svd.u.column(i);
            let big_n: f64 = self.blocks.windows(2).map(|b| u.rows(b[0], b[1] - b[0]).norm()).sum();
            let v = svd.v_t.row(i);
            let big_m = v.iter().zip(&self.column_norms).map(|(vj, rho)| vj.abs() * rho).sum::<f64>() / s;
            let gamma = if big_m > big_n { GAMMA_MAX * big_n / big_m } else { GAMMA_MAX };
            // wᵢ = (α / σ) vᵢ (out of reach σ / (σ² + λ²) in place of 1 / σ: see the module
            // docs), clamped so that no unknown turns more than γᵢ.
            let w = if lambda2 > 0.0 { alpha * s / (s * s + lambda2) } else { alpha / s };
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
