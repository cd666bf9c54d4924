//! Damped least squares through the singular value decomposition (TR-632 §3.2.5, eq. 3.24–3.27;
//! Nilsson's thesis §2.4.3–2.4.4): `Δθ = Σ σᵢ / (σᵢ² + λ²) vᵢ uᵢᵀ e`, which is
//! `Jᵀ (J Jᵀ + λ² I)⁻¹ e` (eq. 3.23) computed from the SVD: like the pseudo-inverse away from
//! singular poses, smoothly damped near them.
//!
//! The damping is the thesis' (§4.1.3): `λ = |e| + reach / 100`, recomputed every iteration
//! (`reach` the longest goal chain's length). It scales with the rig (thesis §4.1.5: resizing
//! the model and its targets leaves the iterations unchanged); large while the effectors are far
//! from their targets, so a far target is approached in short, stable steps (slowly, the thesis'
//! conclusion notes), and on targets out of reach, where `|e|` stays large, the chain settles
//! without oscillating. (The report used Buss & Kim's constant `λ = 1.1`, which depends on the
//! rig's units.) `dls` is the same family with Levenberg–Marquardt's adaptive λ and a step kept
//! only when it lowers the error. Goals, limits, poles and the reference pose as the rest of
//! the family (`explicit.rs`).
//!
//! One departure, toward targets just beyond reach, where the thesis saw its λ fail ("when the
//! target positions were nearly out of range, it started oscillating since the desirable change
//! was too small to dampen", §4.1.3): there `|e|` is small while the curvature Gauss–Newton's
//! model lacks, `Σ eᵢ ∇²eᵢ`, is about `|e| · reach`, and the thesis' `reach / 100` does not cover
//! it. So toward goals whose targets lie beyond their chains' reach (the report's test), λ² is at
//! least `0.75 · √Σ (|e_g| · reach_g)²` over them (`jacobian::out_of_reach_curvature`, the floor
//! `dls` uses). Measured on the report's chain: 1392 mm beyond its reach the effector had fallen
//! into a 155 mm two-step cycle to the cap, and 221 of its 1000 unreachable targets were capped
//! (mean 2343 iterations); with the floor none is, in 166 iterations, and no settling case
//! zigzags. Toward reachable targets nothing changes.

use super::explicit::{Linearized, Rule, dot, explicit_solver};

explicit_solver!(
    /// The SVD damped-least-squares solver (`"svd_dls"`; see the module docs).
    SvdDls,
    DampedSvd,
    "svd_dls"
);

/// The thesis' damping: `|e|` plus this fraction of the reach (§4.1.3).
const DAMPING_REACH: f64 = 0.01;

/// Toward goals out of reach, λ² is at least this times [`Linearized::out_of_reach`] of `e` (see the
/// module docs). 0.75 measured: 0.5 (`dls`'s factor) left 5 zigzags just beyond
/// the report's chain's reach, 0.75 none, 1 a few again, and 2 doubled the iterations.
const OUT_OF_REACH_DAMPING: f64 = 0.75;

/// TR eq. 3.27 with the thesis' λ.
#[derive(Debug, Clone, Default)]
pub(super) struct DampedSvd;

impl Rule for DampedSvd {
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool {
        // The thesis' λ, and toward goals out of reach at least the floor of the module docs.
        let lambda = (dot(lin.e, lin.e).sqrt() + DAMPING_REACH * lin.reach).max((OUT_OF_REACH_DAMPING * lin.out_of_reach(lin.e)).sqrt());
        let svd = lin.svd();
        y.clear();
        y.resize(lin.m, 0.0);
        let mut any = false;
        for (i, &s) in svd.sigma.iter().enumerate() {
            if s > svd.cutoff {
                // σ / (σ² + λ²) vᵢ uᵢᵀ e = Jᵀ (uᵢ uᵢᵀ e / (σ² + λ²)).
                svd.add_u(i, svd.u_dot(i, lin.e) / (s * s + lambda * lambda), y);
                any = true;
            }
        }
        any
    }
}
