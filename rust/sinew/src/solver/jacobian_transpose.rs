//! The Jacobian transpose method (TR-632 §3.2.2, Nilsson's thesis §2.4.1; Wolovich & Elliott
//! 1984): `Δθ = α Jᵀ e`, with the α of TR eq. 3.15 (thesis eq. A-19),
//! `α = ⟨e, J Jᵀ e⟩ / ⟨J Jᵀ e, J Jᵀ e⟩`: the step whose first-order motion `α J Jᵀ e` comes
//! nearest `e`. No inverse is formed, so an iteration is the cheapest of the family (two
//! products with `J`), and no singularity makes it blow up; but it converges slowly (linearly,
//! at a rate set by `J`'s condition number: the thesis needs 59–472 iterations where the
//! pseudo-inverse needs 31–59, the report 1311 on its 10-joint chain), and on targets out of
//! reach it can oscillate (thesis Table 4.6).
//!
//! One departure from the report: the step takes eq. 3.15's α of the *previous* iterate (the first
//! step its own), Δθ = α_{k−1} Jᵀe_k. The method stays the transpose (`Δθ = α Jᵀe` "for some scalar
//! α", thesis A-18; every step taken, no line search); only its α lags. Eq. 3.15 is the exact
//! line search along `Jᵀe` on the linear model (steepest descent's Cauchy step, `|Jᵀe|² /
//! |J Jᵀe|²`), and the Cauchy step of the previous iterate is, on a linear residual, exactly
//! Barzilai & Borwein's (1988) step `sᵀs / sᵀy` (`s` the last step, `y` the change of the
//! gradient): the gradient method with retards (Friedlander, Martínez, Molina & Raydan 1999).
//! With the current iterate's α, steepest descent zigzags between two directions (Akaike), and
//! the error along `J Jᵀ`'s small eigenvalues (a nearly straight chain's pull along itself)
//! shrinks by about `1 − σ_min²/σ_max²` a step; the lagged α breaks that pattern. On the report's 1000 reachable targets (tolerance
//! 1e-3 mm on the 9 m chain) the mean went from 979 to 366 iterations, and those reached within
//! 2000 from 888 to 958 (951 to 979 within 10 000); on the thesis' tree from 8 of 160 solves
//! reached within the 1000 cap to all 160. The costs: the steps are no longer monotone in the
//! error (a lagged α can be long for the current `J`), and out of reach, where the transpose
//! zigzags with either α, the lagged one swings much wider (toward (0, 0, −15 000) mm the 9 m
//! chain's effector moves up to 7.5 m a step over the window where it moved 0.16 m, before it
//! stops at 4166 iterations); on the unconstrained chain's in-limit targets (Table 4.5's set-up)
//! the mean went from 92.6 to 163 iterations (99.4% within 2000). docs/benchmarks.md §7 has both.
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
    /// The α of eq. 3.15 at the last iterate (0 before the first).
    previous: f64,
}

impl Rule for Transpose {
    fn begin(&mut self) {
        self.previous = 0.0;
    }

    #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN refused: see the denominator test
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool {
        lin.transpose_times(lin.e, &mut self.jte);
        lin.times(&self.jte, &mut self.jjte);
        let denominator = dot(&self.jjte, &self.jjte);
        // (Negated so that a NaN is refused too.)
        if !(denominator > 0.0) {
            return false;
        }
        // TR eq. 3.15 at this iterate; the step takes the last iterate's (see the module docs).
        let here = dot(lin.e, &self.jjte) / denominator;
        let alpha = if self.previous > 0.0 { self.previous } else { here };
        self.previous = here;
        y.clear();
        y.extend(lin.e.iter().map(|e| alpha * e));
        true
    }
}
