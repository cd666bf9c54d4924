//! The Jacobian pseudo-inverse method (TR-632 §3.2.1 and §3.2.3, Nilsson's thesis §2.4.2 and
//! §2.4.4): `Δθ = J⁺ e` with `J⁺ = Σ σᵢ⁻¹ vᵢ uᵢᵀ` over the nonzero singular values (TR eq.
//! 3.19, thesis eq. A-42), by SVD: the least-squares step of least norm. Near a target and away
//! from singular poses it converges quadratically (the Gauss–Newton step); it is unstable near
//! singular poses, where a small `σᵢ` makes a large step (thesis §2.4.2: "jerky movements"), so
//! on targets out of reach, where the chain straightens toward a singular pose, it can jump about
//! instead of settling (thesis Tables 4.2, 4.6 and 4.7 give no result for it there).
//!
//! A singular value counts as zero below `max(m, n) · ε · σ₁` (numerical rank, as MATLAB's
//! `pinv`): at an exactly singular pose (a straight chain pulled along its own line) the step
//! has no component along the lost direction, and the method does not move that way (thesis:
//! "in a real singularity the method will not attempt to move the end effector"). Goals, limits,
//! poles and the reference pose as the rest of the family (`explicit.rs`).

use super::explicit::{Linearized, Rule, explicit_solver};

explicit_solver!(
    /// The Jacobian pseudo-inverse solver (`"jacobian_pinv"`; see the module docs).
    JacobianPinv,
    Pinv,
    "jacobian_pinv"
);

/// TR eq. 3.19.
#[derive(Debug, Clone, Default)]
pub(super) struct Pinv;

impl Rule for Pinv {
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool {
        let svd = lin.svd();
        y.clear();
        y.resize(lin.m, 0.0);
        let mut any = false;
        for (i, &s) in svd.sigma.iter().enumerate() {
            if s > svd.cutoff {
                // σ⁻¹ vᵢ uᵢᵀ e = Jᵀ (σ⁻² uᵢ uᵢᵀ e).
                svd.add_u(i, svd.u_dot(i, lin.e) / (s * s), y);
                any = true;
            }
        }
        any
    }
}
