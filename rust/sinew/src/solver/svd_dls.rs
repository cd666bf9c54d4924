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

use super::explicit::{Linearized, Rule, dot, explicit_solver};

explicit_solver!(
    /// The SVD damped-least-squares solver (`"svd_dls"`; see the module docs).
    SvdDls,
    DampedSvd,
    "svd_dls"
);

/// The thesis' damping: `|e|` plus this fraction of the reach (§4.1.3).
const DAMPING_REACH: f64 = 0.01;

/// TR eq. 3.27 with the thesis' λ.
#[derive(Debug, Clone, Default)]
pub(super) struct DampedSvd;

impl Rule for DampedSvd {
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool {
        let lambda = dot(lin.e, lin.e).sqrt() + DAMPING_REACH * lin.reach;
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
