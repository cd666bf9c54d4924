//! The loop the Jacobian methods that form `J` share: the transpose ([`super::JacobianTranspose`]),
//! the pseudo-inverse ([`super::JacobianPinv`]), damped least squares through the SVD
//! ([`super::SvdDls`]) and selectively damped least squares ([`super::Sdls`]).
//!
//! Each is a [`Rule`]: from `J` and the error `e` at the current pose it gives this iteration's
//! step `Δθ`, always as `Δθ = Jᵀ y` (every one of them steps within `J`'s row space: the
//! transpose by construction, the others as sums of right singular vectors `vᵢ = Jᵀuᵢ/σᵢ`).
//! Everything else is [`DlsSteps`]' (`jacobian/`), so the methods are compared on equal
//! terms with `dls` and FABRIK's finish: the same unknowns (three world axes per bone, a hinge's
//! axis, the two swing axes of a bone whose twist is locked, the length of a bone that may
//! stretch, the free root's translation, each scaled by the bone's stiffness or stretch gain), the same residual rows (positions, orientations scaled
//! by the chain's reach, with `√weight`, poles kept in trees), and limits clamped after every
//! step with the clamped direction blocked for the following steps, as `dls` does.
//!
//! A solve:
//! 1. [`begin_solve`] clamps the start into the limits.
//! 2. Where to iterate from, as the methods without a least-squares finish choose it
//!    ([`IterationStart`]): the reference pose (clamped, each lone chain's pole applied to it as
//!    Blender's `ConstrainPoleVector`) unless the start is near the answer (tracking) or meets
//!    every goal; without a reference, the start with each lone chain's pole turned (a goal
//!    already met is left alone, so a solution solved again is a fixed point).
//! 3. Iterations, each: form `J` and `e`, the method's step, the step clamped into the limits.
//!    Every step is taken, as the papers' methods take them (no line search: a method that
//!    overshoots or oscillates shows it, thesis §4.3); the pose returned is the last one.
//! 4. Stops: every goal met (`Converged`); no residual row moved more than `stall_tolerance`
//!    in the last step, the thesis' "the end effector did not move" (§4.2; `Stalled`); a step
//!    that is zero or not finite (`Stalled`, the pose before it kept); the iteration cap.
//!
//! The reference pose is honoured as the start (and through the poles applied to it), not as a
//! secondary task: the pose returned is where the method's own steps lead from there, which for
//! the pseudo-inverse family is the least joint motion per step. (`dls` and `fabrik` return the
//! pose nearest the reference that meets the goals; the null-space term of thesis eq. A-30 would
//! give the pseudo-inverse the same, and is not implemented.)

use glam::DQuat;
use nalgebra::DMatrix;

use super::jacobian::{DlsSteps, out_of_reach_curvature};
use super::prepare::IterationStart;
use super::{Solution, SolveSettings, StopReason, begin_solve, settle};
use crate::error::Result;
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// One iteration as a method sees it: `J` (`m × n`, column-major) and `e` at the current pose.
#[derive(Debug)]
pub(super) struct Linearized<'a> {
    /// Residual rows.
    pub m: usize,
    /// Unknowns.
    pub n: usize,
    /// `J`, column `j` at `jac[j * m..(j + 1) * m]`.
    pub jac: &'a [f64],
    /// The error `e` (target minus effector per row; see `DlsSteps::residual_rows`).
    pub e: &'a [f64],
    /// The longest goal chain's reach (rig units): a length scale for damping and clamping.
    pub reach: f64,
    /// The last three unknowns are the root's translation (rig units; the others are radians).
    pub translates_root: bool,
    /// Per goal: whether its target lies beyond its chain's reach (empty: none is).
    pub beyond: &'a [bool],
    /// Per goal: its first residual row.
    pub goal_rows: &'a [usize],
    /// The problem (its goals give the rows' blocks).
    pub problem: &'a Problem,
}

impl Linearized<'_> {
    /// Column `j` of `J`.
    pub fn column(&self, j: usize) -> &[f64] {
        &self.jac[j * self.m..(j + 1) * self.m]
    }

    /// `out = Jᵀ v` (`n` entries).
    pub fn transpose_times(&self, v: &[f64], out: &mut Vec<f64>) {
        out.clear();
        out.extend((0..self.n).map(|j| dot(self.column(j), v)));
    }

    /// `out = J x` (`m` entries).
    pub fn times(&self, x: &[f64], out: &mut Vec<f64>) {
        out.clear();
        out.resize(self.m, 0.0);
        for (j, &xj) in x.iter().enumerate() {
            for (o, a) in out.iter_mut().zip(self.column(j)) {
                *o += a * xj;
            }
        }
    }

    /// The thin singular value decomposition `J = Σ σᵢ uᵢ vᵢᵀ` (thesis §2.4.4, TR eq. 3.17),
    /// by nalgebra's Golub–Kahan bidiagonalisation and implicit-shift QR.
    pub fn svd(&self) -> Svd {
        let svd = DMatrix::from_column_slice(self.m, self.n, self.jac).svd(true, true);
        let (Some(u), Some(v_t)) = (svd.u, svd.v_t) else { unreachable!("both factors were asked for") };
        let sigma: Vec<f64> = svd.singular_values.iter().copied().collect();
        let largest = sigma.iter().copied().fold(0.0, f64::max);
        // Numerical rank: singular values below this are round-off of zero (as MATLAB's and
        // NumPy's `pinv` decide it).
        let cutoff = largest * self.m.max(self.n) as f64 * f64::EPSILON;
        Svd { u, v_t, sigma, cutoff }
    }

    /// [`out_of_reach_curvature`] of the residual rows `rows` (`e`, or `e` clamped): 0 when every
    /// target is within its chain's reach.
    pub fn out_of_reach(&self, rows: &[f64]) -> f64 {
        out_of_reach_curvature(self.problem, self.beyond, self.goal_rows, rows)
    }

    /// How far unknown `j` of a step `dtheta` turns, in radians: its value, or for a root
    /// translation its length over the reach (a translation by the reach counts as a radian).
    pub fn angle_of(&self, j: usize, dtheta: f64) -> f64 {
        if self.translates_root && j + 3 >= self.n && self.reach > 0.0 { dtheta.abs() / self.reach } else { dtheta.abs() }
    }
}

/// A thin SVD of `J` (see [`Linearized::svd`]).
#[derive(Debug)]
pub(super) struct Svd {
    /// `m × k` left singular vectors, `k = min(m, n)`.
    pub u: DMatrix<f64>,
    /// `k × n`: row `i` is `vᵢᵀ`.
    pub v_t: DMatrix<f64>,
    /// The `k` singular values.
    pub sigma: Vec<f64>,
    /// Singular values at most this are taken as zero.
    pub cutoff: f64,
}

impl Svd {
    /// `uᵢ · e`.
    pub fn u_dot(&self, i: usize, e: &[f64]) -> f64 {
        self.u.column(i).iter().zip(e).map(|(a, b)| a * b).sum()
    }

    /// `y += k uᵢ`.
    pub fn add_u(&self, i: usize, k: f64, y: &mut [f64]) {
        for (o, a) in y.iter_mut().zip(self.u.column(i).iter()) {
            *o += k * a;
        }
    }
}

/// `a · b`.
pub(super) fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// A method of the family: its step at one iteration.
pub(super) trait Rule: Default + Clone + std::fmt::Debug + Send {
    /// Fills `y` (`m` entries) so that this iteration's step is `Δθ = Jᵀ y`. False when the
    /// method has no step to take (`J` or `e` zero, say).
    fn step(&mut self, lin: &Linearized<'_>, y: &mut Vec<f64>) -> bool;

    /// Called before a solve's first iteration (a rule that carries state between iterations
    /// resets it here).
    fn begin(&mut self) {}
}

/// A solver of the family: its rule, settings and scratch space (reused between solves).
#[derive(Debug, Clone, Default)]
pub(super) struct Explicit<R> {
    pub settings: SolveSettings,
    rule: R,
    steps: DlsSteps,
    jac: Vec<f64>,
    y: Vec<f64>,
    start_locals: Vec<DQuat>,
    start: IterationStart,
    frames: Frames,
}

impl<R: Rule> Explicit<R> {
    pub fn new(settings: SolveSettings) -> Self {
        Self { settings, ..Self::default() }
    }

    /// The solve of the module docs.
    pub fn solve(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        // Where to iterate from: the reference or the start, lone-chain poles turned as
        // Blender's are (the same choice as the methods without a least-squares finish).
        let mut pose = Pose::default();
        self.start.prepare(problem, start, &self.start_locals, settings.tolerance, &mut pose, &mut self.frames);
        let m = self.steps.start_explicit(problem, &mut pose);
        let reach = problem.topology().chain_reach.iter().copied().fold(0.0, f64::max);
        let mut iterations = 0;
        self.rule.begin();
        let stop = loop {
            let n = match next_jacobian(&mut self.steps, problem, &settings, iterations, m, &mut self.jac) {
                Ok(n) => n,
                Err(stop) => break stop,
            };
            iterations += 1;
            self.steps.mark_beyond_reach(problem);
            let lin = Linearized {
                m,
                n,
                jac: &self.jac,
                e: self.steps.residual_rows(),
                reach,
                translates_root: self.steps.translates_root(),
                beyond: self.steps.beyond_reach(),
                goal_rows: self.steps.goal_rows(),
                problem,
            };
            self.y.resize(m, 0.0);
            if !self.rule.step(&lin, &mut self.y) || !self.y.iter().all(|v| v.is_finite()) {
                break StopReason::Stalled;
            }
            let (error, moved) = self.steps.try_step(problem, &pose, &self.y);
            if !error.is_finite() {
                break StopReason::Stalled;
            }
            self.steps.accept_trial(&mut pose);
            if moved <= settings.stall_tolerance {
                break StopReason::Stalled;
            }
        };
        settle(problem, &self.start_locals, &mut pose.rotations);
        Ok(Solution::of_solved(problem, pose, self.steps.frames(), iterations, stop, settings.tolerance))
    }
}

/// The stops an iteration of the family checks before its step, in order: every goal met
/// (`Converged`), the cap (`IterationLimit`), nothing to move (`Stalled`). `Ok(n)` with `J`
/// formed into `jac` (`n` unknowns) when the iteration goes on, else the stop. Shared with `nlp`.
pub(super) fn next_jacobian(steps: &mut DlsSteps, problem: &Problem, settings: &SolveSettings, iterations: u32, m: usize, jac: &mut Vec<f64>) -> std::result::Result<usize, StopReason> {
    if steps.reached(problem, settings.tolerance) {
        return Err(StopReason::Converged);
    }
    if iterations >= settings.max_iterations {
        return Err(StopReason::IterationLimit);
    }
    let n = steps.dense_jacobian(problem, jac);
    if m == 0 || n == 0 {
        return Err(StopReason::Stalled);
    }
    Ok(n)
}

/// Declares a public solver type of the family around [`Explicit`] with its rule.
macro_rules! explicit_solver {
    ($(#[$doc:meta])* $name:ident, $rule:ty, $method:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default)]
        pub struct $name(super::explicit::Explicit<$rule>);

        impl $name {
            #[doc = concat!("A `", $method, "` solver with `settings` (checked when solving).")]
            #[must_use]
            pub fn new(settings: super::SolveSettings) -> Self {
                Self(super::explicit::Explicit::new(settings))
            }
        }

        impl super::PositionSolver for $name {
            fn name(&self) -> &'static str {
                $method
            }

            fn settings(&self) -> &super::SolveSettings {
                &self.0.settings
            }

            fn solve_positions(&mut self, problem: &crate::problem::Problem, start: &crate::pose::Pose) -> crate::error::Result<super::Solution> {
                self.0.solve(problem, start)
            }
        }
    };
}
pub(super) use explicit_solver;
