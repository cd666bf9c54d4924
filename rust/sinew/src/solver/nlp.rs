//! Nonlinear programming (Zhao & Badler, "Inverse Kinematics Positioning Using Nonlinear
//! Programming for Highly Articulated Figures", ACM TOG 13(4), 1994: Jack's spatial
//! constraints): minimise the weighted sum of the goals' potentials over the joint angles,
//! subject to the joint limits, by a quasi-Newton method with the limits' active set.
//!
//! - **Objective** (§5–6): `F(θ) = Σ_goals w · P`, each potential the squared distance from the
//!   effector to its goal, and for a goal with an orientation the squared angle times the
//!   commensuration factor `c²` (§5.2, eq. 8: how many length units a radian counts as), here the
//!   goal's chain reach as everywhere in Sinew ([`crate::Problem::goal_met`]). It is `|r|²` of
//!   the residual rows every Jacobian method uses (`DlsSteps`), so its gradient is `−2 Jᵀ r`
//!   (§4.2, §9: one pass over the chain, `O(nm)`). Goal kinds (§5.2's position, orientation,
//!   aiming-at, line, plane and half-space goals) reach it through [`super::solve_goal_kinds`]:
//!   each round's potentials are the squared distances to the nearest point of each goal, which
//!   equal Jack's potentials at the round's start and bound them above after it.
//! - **Rigidity** (§11): each bone's stiffness scales its unknowns (`DlsSteps`' gain), which
//!   "changes the unit of the joint angle", as Jack's scaling factors do.
//! - **Method** (appendix): BFGS with a line search that only accepts a decrease (Powell's
//!   condition, here Armijo backtracking from the full step), so **the objective never
//!   increases**; the search direction `−H g` with `H` the inverse-Hessian estimate. Two
//!   departures, both for the rig sizes Sinew takes:
//!   - `H` is kept in limited memory (Nocedal 1980, L-BFGS: the last [`MEMORY`] step and gradient
//!     pairs, the two-loop recursion) instead of as the appendix's `n × n` matrix, which for a
//!     10,000-bone rig would not fit;
//!   - the limits are the rig's cones, hinges and twist ranges, not linear constraints: a step is
//!     clamped into them (the projection onto the feasible set) and the clamped direction is
//!     blocked for the next steps, as in every Jacobian method: Rosen's projection of the search
//!     direction onto the active constraints. When a step changes the active set, `H` starts
//!     again from the gradient (Goldfarb's method recomputes the projected `H`).
//! - A fresh `H` steps along `−g` by the exact minimiser of the linearised objective (the Cauchy
//!   step `|g|² / (2 |J g|²)`), so the first step is scale-free; BFGS updates with
//!   `sᵀy ≤ 0` are skipped (they would lose positive definiteness).
//!
//! Stops: every goal met (`Converged`); no residual row moved more than `stall_tolerance`, or no
//! step along the direction lowers the objective (a Kuhn–Tucker point of the linearisation:
//! `Stalled`); the iteration cap. Where it starts (the reference, lone-chain poles) is
//! [`IterationStart`]'s choice, as for the other Jacobian methods (`explicit.rs`).

use std::collections::VecDeque;

use glam::DQuat;

use super::explicit::{Linearized, dot, next_jacobian};
use super::jacobian::DlsSteps;
use super::prepare::IterationStart;
use super::{PositionSolver, Solution, SolveSettings, StopReason, begin_solve, settle};
use crate::error::Result;
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// Step and gradient-change pairs kept for the inverse-Hessian estimate.
pub(super) const MEMORY: usize = 10;

/// Armijo's sufficient-decrease fraction.
const ARMIJO: f64 = 1e-4;

/// At most this many halvings of a step in the line search.
const HALVINGS: u32 = 40;

/// No unknown changes by more than this in one step (radians, or the reach for the root's
/// translation): the quasi-Newton model is trusted only this far.
const MAX_TURN: f64 = 0.5;

/// The nonlinear-programming solver (`"nlp"`; see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Nlp {
    settings: SolveSettings,
    steps: DlsSteps,
    jac: Vec<f64>,
    start_locals: Vec<DQuat>,
    start: IterationStart,
    frames: Frames,
    gradient: Vec<f64>,
    /// The step tried.
    step: Vec<f64>,
    /// The last accepted step and the gradient before it, to pair with the next gradient
    /// (`pending` says whether they hold one).
    pending_step: Vec<f64>,
    pending_gradient: Vec<f64>,
    pending: bool,
    inverse_hessian: InverseHessian,
}

/// A step `s`, the change of the gradient over it `y`, and `1 / (sᵀy)`.
#[derive(Debug, Clone, Default)]
struct Pair {
    s: Vec<f64>,
    y: Vec<f64>,
    rho: f64,
}

/// The inverse-Hessian estimate `H` in limited memory, with scratch space.
#[derive(Debug, Clone, Default)]
struct InverseHessian {
    /// The pairs, newest last.
    memory: VecDeque<Pair>,
    /// Pairs no longer in the memory, kept for their space (a solve allocates only while the
    /// memory first fills).
    spare: Vec<Pair>,
    /// The search direction `−H g`.
    direction: Vec<f64>,
    scratch: Vec<f64>,
    alphas: Vec<f64>,
}

impl Nlp {
    /// An `nlp` solver with `settings` (checked when solving).
    #[must_use]
    pub fn new(settings: SolveSettings) -> Self {
        Self { settings, ..Self::default() }
    }
}

impl InverseHessian {
    /// Empties the memory (`H` starts again as the Cauchy step).
    fn forget(&mut self) {
        self.spare.extend(self.memory.drain(..));
    }

    /// Remembers the step `s` with the gradient change `g_new − g_old` over it, if its curvature
    /// `sᵀy` is positive (else `H` would not stay positive definite), dropping the oldest pair
    /// beyond [`MEMORY`].
    fn remember(&mut self, s: &[f64], g_old: &[f64], g_new: &[f64]) {
        let mut pair = self.spare.pop().unwrap_or_default();
        pair.s.clear();
        pair.s.extend_from_slice(s);
        pair.y.clear();
        pair.y.extend(g_new.iter().zip(g_old).map(|(a, b)| a - b));
        let sy = dot(&pair.s, &pair.y);
        if sy > 1e-12 * dot(&pair.s, &pair.s).sqrt() * dot(&pair.y, &pair.y).sqrt() {
            if self.memory.len() == MEMORY {
                self.spare.extend(self.memory.pop_front());
            }
            pair.rho = 1.0 / sy;
            self.memory.push_back(pair);
        } else {
            self.spare.push(pair);
        }
    }

    /// `self.direction = −H g` by the two-loop recursion over the memory, or the Cauchy step
    /// along `−g` with an empty memory.
    fn search_direction(&mut self, g: &[f64], lin: &Linearized<'_>) {
        self.direction.clear();
        self.direction.extend(g.iter().map(|x| -x));
        if self.memory.is_empty() {
            // F(α) = |r − J(−α g)|² is least at α = gᵀg / (2 |J g|²) (g = −2 Jᵀ r).
            lin.times(g, &mut self.scratch);
            let jg = dot(&self.scratch, &self.scratch);
            let alpha = if jg > 0.0 { dot(g, g) / (2.0 * jg) } else { 0.0 };
            self.direction.iter_mut().for_each(|d| *d *= alpha);
            return;
        }
        // The two-loop recursion (Nocedal & Wright, Alg. 7.4), run on −g: it is linear, so it
        // gives −H g.
        let q = &mut self.direction;
        self.alphas.clear();
        for Pair { s, y, rho } in self.memory.iter().rev() {
            let a = rho * dot(s, q);
            q.iter_mut().zip(y).for_each(|(qi, yi)| *qi -= a * yi);
            self.alphas.push(a);
        }
        let Pair { s, y, .. } = self.memory.back().expect("not empty");
        let gamma = dot(s, y) / dot(y, y);
        q.iter_mut().for_each(|qi| *qi *= gamma);
        for (Pair { s, y, rho }, a) in self.memory.iter().zip(self.alphas.iter().rev()) {
            let b = rho * dot(y, q);
            q.iter_mut().zip(s).for_each(|(qi, si)| *qi += si * (a - b));
        }
    }
}

impl PositionSolver for Nlp {
    fn name(&self) -> &'static str {
        "nlp"
    }

    fn settings(&self) -> &SolveSettings {
        &self.settings
    }

    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        let mut pose = Pose::default();
        self.start.prepare(problem, start, &self.start_locals, settings.tolerance, &mut pose, &mut self.frames);
        let m = self.steps.start_explicit(problem, &mut pose);
        let reach = problem.topology().chain_reach.iter().copied().fold(0.0, f64::max);
        let h = &mut self.inverse_hessian;
        h.forget();
        self.pending = false;
        let mut objective: f64 = self.steps.residual_rows().iter().map(|x| x * x).sum();
        let mut iterations = 0;
        let stop = loop {
            let n = match next_jacobian(&mut self.steps, problem, &settings, iterations, m, &mut self.jac) {
                Ok(n) => n,
                Err(stop) => break stop,
            };
            iterations += 1;
            let lin = Linearized {
                m,
                n,
                jac: &self.jac,
                e: self.steps.residual_rows(),
                reach,
                translates_root: self.steps.translates_root(),
                beyond: &[],
                goal_rows: &[],
                problem,
            };
            lin.transpose_times(lin.e, &mut self.gradient);
            self.gradient.iter_mut().for_each(|g| *g *= -2.0);
            if std::mem::take(&mut self.pending) && self.pending_step.len() == n {
                h.remember(&self.pending_step, &self.pending_gradient, &self.gradient);
            }
            if h.memory.front().is_some_and(|p| p.s.len() != n) {
                h.forget();
            }
            h.search_direction(&self.gradient, &lin);
            let mut slope = dot(&self.gradient, &h.direction);
            // (`slope` may be NaN: a NaN slope is no descent either.)
            if slope.partial_cmp(&0.0) != Some(std::cmp::Ordering::Less) && !h.memory.is_empty() {
                // Not a descent direction (the model went stale): start H again.
                h.forget();
                h.search_direction(&self.gradient, &lin);
                slope = dot(&self.gradient, &h.direction);
            }
            if !(slope < 0.0 && slope.is_finite()) {
                break StopReason::Stalled;
            }
            let largest = (0..n).map(|j| lin.angle_of(j, h.direction[j])).fold(0.0, f64::max);
            let mut alpha = if largest > MAX_TURN { MAX_TURN / largest } else { 1.0 };
            // Backtrack until the objective falls enough (it never rises).
            let mut accepted = None;
            for _ in 0..=HALVINGS {
                self.step.clear();
                self.step.extend(h.direction.iter().map(|d| d * alpha));
                let (trial, moved) = self.steps.try_step_unknowns(problem, &pose, &self.step);
                if trial.is_finite() && trial <= objective + ARMIJO * alpha * slope {
                    accepted = Some((trial, moved));
                    break;
                }
                alpha *= 0.5;
            }
            let Some((trial, moved)) = accepted else { break StopReason::Stalled };
            let clamped = self.steps.last_step_clamped();
            self.steps.accept_trial(&mut pose);
            objective = trial;
            if clamped {
                // The limits' active set changed: H starts again (see the module docs).
                h.forget();
            } else {
                self.pending_step.clone_from(&self.step);
                self.pending_gradient.clone_from(&self.gradient);
                self.pending = true;
            }
            if moved <= settings.stall_tolerance {
                break StopReason::Stalled;
            }
        };
        settle(problem, &self.start_locals, &mut pose.rotations);
        Ok(Solution::of_solved(problem, pose, self.steps.frames(), iterations, stop, settings.tolerance))
    }
}
