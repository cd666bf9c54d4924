//! The Jacobian transpose method (TR-632 §3.2.2, Nilsson's thesis §2.4.1; Wolovich & Elliott
//! 1984): `Δθ = α Jᵀ e`, with the α of TR eq. 3.15 (thesis eq. A-19),
//! `α = ⟨e, J Jᵀ e⟩ / ⟨J Jᵀ e, J Jᵀ e⟩`: the step whose first-order motion `α J Jᵀ e` comes
//! nearest `e`. No inverse is formed, so an iteration is the cheapest of the family (two
//! products with `J`), and no singularity makes it blow up; but it converges slowly (linearly,
//! at a rate set by `J`'s condition number: the thesis needs 59–472 iterations where the
//! pseudo-inverse needs 31–59, the report 1311 on its 10-joint chain), and on targets out of
//! reach it can oscillate (thesis Table 4.6).
//!
//! Goals, limits, poles and the reference pose as the rest of the family (`explicit.rs`).

use super::explicit::{Linearized, Rule, dot, explicit_solver};

explicit_solver!(
    /// The Jacobian transpose solver (`"jacobian_transpose"`; see the module docs).
    JacobianTranspose,
    Transpose,
    "jacobian_transpose"
);

/// TR eq. 3.13 and 3.15.
#[derive(Debug, Clone, Default)]
pub(super) struct Transpose {
    jte: Vec<f64>,
    jjte: Vec<f64>,
}

impl Rule for Transpose {
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN refused: see the denominator test
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool {
        lin.transpose_times(lin.e, &mut self.jte);
        lin.times(&self.jte, &mut self.jjte);
        let denominator = dot(&self.jjte, &self.jjte);
        // (Negated so that a NaN is refused too.)
        if !(denominator > 0.0) {
            return false;
        }
        let alpha = dot(lin.e, &self.jjte) / denominator;
        y.clear();
        y.extend(lin.e.iter().map(|e| alpha * e));
        true
    }
}
