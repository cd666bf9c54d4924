//! Damped least squares (the Jacobian family: Nilsson's thesis §2.4.3, Buss 2004), the same
//! joint-space steps FABRIK finishes with ([`super::jacobian`]), run from the start pose alone.
//!
//! Every bone some goal moves turns about its head (a hinge about its axis; locked bones stay),
//! the free root translates, each step `Δθ = Jᵀ (J Jᵀ + λ² I)⁻¹ e` with Levenberg–Marquardt's λ,
//! then each bone is clamped to its limit. Position and orientation goals with their weights are
//! used, and poles of chains that share bones with other goals (kept as one more residual); the
//! pole of a lone chain is Blender's turn before solving ([`crate::Pole`]), applied to the pose
//! the steps start from, as every method applies it ([`IterationStart`]). A local method: from a start
//! far from the targets it can settle in a local minimum that FABRIK's global steps avoid, which
//! is why FABRIK takes the big moves and DLS the end game in [`super::Fabrik`].
//!
//! One departure from plain Levenberg–Marquardt, toward targets out of reach (beyond the chain's
//! reach from its top bone's head, the report's test), and only there: λ² never falls below
//! `0.5 · √Σ (|r_g| · reach_g)²` over those goals (`jacobian::out_of_reach_curvature`: λ²
//! proportional to the residual, as Fan & Yuan 2005 choose it, standing in for the curvature
//! `Σ rᵢ ∇²rᵢ` that Gauss–Newton's model leaves out and that a residual which stays makes large),
//! and a kept step that lowered the error by less than a quarter of what the linear model
//! predicted doubles λ² (Moré's trust-region rule). Without them the chain zigzagged while it
//! settled: λ halves after every kept step until one overshoots, so the effector swung from side
//! to side (12–45 zigzags over the last half of the first 400 iterations on the report's chain,
//! the thesis' chain and tree); with them it settles with none, in 126 iterations on the report's
//! 1000 unreachable targets (121 before; 77 on the thesis' 18-DoF path against 43, 96 on its tree
//! against 62). Toward reachable targets nothing changes: the same steps, to the bit
//! (`docs/benchmarks.md` §7).

use glam::DQuat;

use super::jacobian::{DlsSteps, PullBudget};
use super::prepare::IterationStart;
use super::reference::{effective_reference, starts_near};
use super::{PositionSolver, Solution, SolveSettings, StopReason, begin_solve, settle};
use crate::error::Result;
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// The damped-least-squares solver. Keeps its scratch space between solves.
#[derive(Debug, Clone, Default)]
pub struct Dls {
    settings: SolveSettings,
    /// With a reference, the independent groups of goals solved one at a time.
    groups: super::GroupSolve,
    steps: DlsSteps,
    start_locals: Vec<DQuat>,
    reference: Pose,
    reference_frames: Frames,
    /// The start's forward kinematics (toward a reference).
    start_frames: Frames,
    start: IterationStart,
}

impl Dls {
    /// A damped-least-squares solver with `settings` (checked when solving). `stall_tolerance`
    /// is not used: it stops at a local minimum, where no step of any damping lowers the error.
    #[must_use]
    pub fn new(settings: SolveSettings) -> Self {
        Self { settings, ..Self::default() }
    }
}

impl PositionSolver for Dls {
    fn group_solve(&mut self) -> Option<&mut super::GroupSolve> {
        Some(&mut self.groups)
    }

    fn name(&self) -> &'static str {
        "dls"
    }

    fn settings(&self) -> &SolveSettings {
        &self.settings
    }

    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        // (A start outside a limit is brought inside first: the steps keep every pose inside.)
        let settings = begin_solve(&self.settings, problem, start, &mut self.start_locals)?;
        self.steps.set_out_of_reach_damping(true);
        let mut pose = Pose { rotations: self.start_locals.clone(), root_translation: start.root_translation, scales: super::start_scales(problem, start) };
        let out = if problem.has_reference() {
            effective_reference(problem, &pose, &mut self.reference, &mut self.reference_frames);
            // From the start when it is near the answer (tracking), else from the reference.
            problem.rig().forward_into(&pose, &mut self.start_frames);
            let frames = if starts_near(problem, &self.start_frames) {
                &self.start_frames
            } else {
                pose.clone_from(&self.reference);
                &self.reference_frames
            };
            self.steps.refine_toward(problem, &mut pose, Some(frames), &self.reference, settings.tolerance, PullBudget::only(settings.max_iterations))
        } else {
            // Lone-chain poles turned first, as Blender's IK turns them before its iterations.
            self.start.prepare(problem, start, &self.start_locals, settings.tolerance, &mut pose, &mut self.reference_frames);
            self.steps.refine(problem, &mut pose, Some(&self.reference_frames), settings.tolerance, settings.max_iterations)
        };
        let stop = match () {
            () if out.reached => StopReason::Converged,
            () if out.iterations >= settings.max_iterations => StopReason::IterationLimit,
            () => StopReason::Stalled,
        };
        settle(problem, &self.start_locals, &mut pose.rotations);
        Ok(Solution::of_solved(problem, pose, self.steps.frames(), out.iterations, stop, settings.tolerance))
    }
}
