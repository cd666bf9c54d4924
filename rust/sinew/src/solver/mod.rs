//! The solver interface every method implements, its settings and its result.
//!
//! FABRIK ([`Fabrik`], with a damped-least-squares finish) is the main method; the Jacobian
//! family is damped least squares ([`Dls`], Levenberg–Marquardt), the transpose
//! ([`JacobianTranspose`]), the pseudo-inverse ([`JacobianPinv`]), damped least squares through
//! the SVD ([`SvdDls`]) and selectively damped least squares ([`Sdls`]); the report's FABRIK as
//! written ([`FabrikClassic`]), CCD ([`Ccd`]) and triangulation ([`Triangulation`]) are there to
//! compare with; [`Nlp`] is Jack's nonlinear programming. All behind the same [`Solver`] trait,
//! on the same [`Problem`] and [`Solution`]; every method takes every goal kind
//! ([`crate::GoalKind`]) through rounds of position goals (`solve_goal_kinds`). Shared machinery: `jacobian` (the joint-space steps,
//! their unknowns, residual rows and clamping, which every Jacobian method uses), `gram` (their
//! damped system, block by block), `explicit` (the loop of the methods that form `J` and factor
//! it), `reference` (the reference pose and the pole turn) and `prepare` (where the paper methods
//! without a least-squares finish start).

mod ccd;
mod dls;
mod explicit;
mod fabrik;
mod gram;
mod jacobian;
mod jacobian_pinv;
mod jacobian_transpose;
mod nlp;
mod prepare;
mod reference;
mod sdls;
mod sequence;
mod svd_dls;
mod triangulation;

pub use ccd::Ccd;
pub use dls::Dls;
pub use fabrik::Fabrik;
pub use fabrik::FabrikClassic;
pub use jacobian_pinv::JacobianPinv;
pub use jacobian_transpose::JacobianTranspose;
pub use nlp::Nlp;
pub use sdls::Sdls;
pub use sequence::{FrameTargets, solve_sequence, solve_sequence_until};
pub use svd_dls::SvdDls;
pub use triangulation::Triangulation;

use glam::DQuat;

use crate::error::{Error, Result};
use crate::pose::{Frames, Pose};
use crate::problem::Problem;

/// Settings shared by every solver.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct SolveSettings {
    /// Iteration cap (≥ 1).
    pub max_iterations: u32,
    /// A goal is reached when its effector is within this distance of its target (rig units, > 0).
    pub tolerance: f64,
    /// Stop when no effector moves more than this between two iterations (rig units, ≥ 0): the
    /// paper's termination rule for targets that limits or reach make unattainable.
    pub stall_tolerance: f64,
}

impl Default for SolveSettings {
    fn default() -> Self {
        Self { max_iterations: 100, tolerance: 1e-4, stall_tolerance: 1e-7 }
    }
}

impl SolveSettings {
    /// Checks the ranges.
    ///
    /// # Errors
    /// [`Error::BadSetting`].
    pub fn validated(self) -> Result<Self> {
        let bad = |what: &str, value: f64, reason: &str| Error::BadSetting {
            what: what.into(),
            value,
            reason: reason.into(),
        };
        if self.max_iterations == 0 {
            return Err(bad("max_iterations", 0.0, "must be at least 1"));
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0) {
            return Err(bad("tolerance", self.tolerance, "must be positive and finite"));
        }
        if !(self.stall_tolerance.is_finite() && self.stall_tolerance >= 0.0) {
            return Err(bad("stall_tolerance", self.stall_tolerance, "must be non-negative and finite"));
        }
        Ok(self)
    }
}

/// Why a solve stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Every goal is within tolerance.
    Converged,
    /// The effectors stopped moving (targets out of reach or blocked by limits).
    Stalled,
    /// The single chain's target is out of reach: it was straightened toward it in one pass.
    OutOfReach,
    /// The iteration cap was hit.
    IterationLimit,
}

impl StopReason {
    /// Its name in solution files, Python and the CLI (`"converged"`, `"stalled"`,
    /// `"out_of_reach"`, `"iteration_limit"`).
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Converged => "converged",
            StopReason::Stalled => "stalled",
            StopReason::OutOfReach => "out_of_reach",
            StopReason::IterationLimit => "iteration_limit",
        }
    }
}

/// The result of one solve.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    /// The solved pose: local rotations per bone (keyable as they are) and the root translation.
    pub pose: Pose,
    /// Iterations used.
    pub iterations: u32,
    /// Per goal: distance from its effector to its target after the solve.
    pub residuals: Vec<f64>,
    /// Per goal: the angle (radians) from its effector bone's frame to its target orientation
    /// after the solve (0 for a goal without one).
    pub orientation_residuals: Vec<f64>,
    /// Whether every goal is within tolerance: its distance within `tolerance`, and its
    /// orientation within `tolerance / reach` radians ([`Problem::goal_met`]).
    pub reached: bool,
    /// Why the solver stopped.
    pub stop: StopReason,
}

impl Solution {
    /// The solution a solver returns for its solved `pose`, whose forward kinematics `frames`
    /// holds and whose rotations [`settle`] has settled (bones no goal moves at their start
    /// rotations exactly, every quaternion in its start's hemisphere). The residuals are those of
    /// the pose as returned, so they agree with what any caller recomputes with
    /// [`crate::Rig::forward`], to the last bit (the property tests check every solution's);
    /// joint positions that met the targets but whose pose misses them by round-off (of bones
    /// counted as connected, `Rig::is_connected`) make a `Converged` stop `Stalled`.
    pub(crate) fn of_solved(problem: &Problem, pose: Pose, frames: &Frames, iterations: u32, stop: StopReason, tolerance: f64) -> Self {
        let mut solution = Solution { pose, iterations, residuals: Vec::new(), orientation_residuals: Vec::new(), reached: false, stop };
        solution.solved_again(problem, frames, iterations, stop, tolerance);
        solution
    }

    /// This solution's residuals, `reached` and stop made those of its pose (whose forward
    /// kinematics `frames` are, as [`Solution::of_solved`]) after a further solve took
    /// `iterations` in all, in its own buffers.
    pub(crate) fn solved_again(&mut self, problem: &Problem, frames: &Frames, iterations: u32, stop: StopReason, tolerance: f64) {
        let goals = 0..problem.goals().len();
        self.residuals.clear();
        self.orientation_residuals.clear();
        for gi in goals.clone() {
            let (distance, angle) = problem.goal_errors(gi, frames);
            self.residuals.push(distance);
            self.orientation_residuals.push(angle);
        }
        self.reached = goals.into_iter().all(|gi| problem.goal_met(gi, frames, tolerance));
        self.iterations = iterations;
        self.stop = match stop {
            _ if self.reached => StopReason::Converged,
            StopReason::Converged => StopReason::Stalled,
            other => other,
        };
    }

    /// The largest per-goal residual (0 without goals; NaN if any residual is NaN).
    #[must_use]
    pub fn worst_residual(&self) -> f64 {
        self.residuals.iter().copied().fold(0.0, |a, r| if r.is_nan() || a.is_nan() { f64::NAN } else { a.max(r) })
    }

    /// The largest per-goal orientation residual, radians (0 without orientation goals; NaN if
    /// any is NaN).
    #[must_use]
    pub fn worst_orientation_residual(&self) -> f64 {
        self.orientation_residuals.iter().copied().fold(0.0, |a, r| if r.is_nan() || a.is_nan() { f64::NAN } else { a.max(r) })
    }

    /// This solution if every goal was reached.
    ///
    /// # Errors
    /// [`Error::NotConverged`] carrying the iterations and worst residual.
    pub fn ensure_reached(self) -> Result<Self> {
        if self.reached {
            Ok(self)
        } else {
            Err(Error::NotConverged { iterations: self.iterations, residual: self.worst_residual() })
        }
    }
}

/// Bones no goal moves back to their `start` rotation exactly (no round-off drift); every other
/// bone's quaternion into its start's hemisphere, so warm-started frames are sign-continuous and
/// interpolating keys never takes the long way round. A sign flip changes no bit of forward
/// kinematics, so frames computed before settling stand.
pub(crate) fn settle(problem: &Problem, start: &[DQuat], rotations: &mut [DQuat]) {
    let topo = problem.topology();
    for (i, q) in rotations.iter_mut().enumerate() {
        let s = start[i];
        if !topo.is_active[i] {
            *q = s;
        } else if q.dot(s) < 0.0 {
            *q = -*q;
        }
    }
}

/// An IK method.
///
/// A solver owns scratch space sized for the last problem it saw, so solving again (the tracking
/// case, warm-started from the previous pose) allocates nothing but the returned pose.
///
/// Every method of [`Method`] implements it through the crate's seam for methods (a method's own
/// iterations take position goals; `solve` meets every other kind of goal in rounds of them).
pub trait Solver: std::fmt::Debug + Send {
    /// The method's name, e.g. `"fabrik"`.
    fn name(&self) -> &'static str;

    /// The settings in use.
    fn settings(&self) -> &SolveSettings;

    /// Solves `problem` starting from `start`.
    ///
    /// The returned pose never violates a joint limit, and forward kinematics of it preserves
    /// every bone length and rest offset by construction, except the lengths of bones that may
    /// stretch ([`crate::JointLimit::stretch`]): a solve of a problem where some do
    /// ([`Problem::stretches`]) returns one length scale per bone ([`Pose::scales`]), 1 for every
    /// other bone.
    ///
    /// Every kind of goal is met ([`crate::GoalKind`]); the residuals and `reached` are those of
    /// [`Problem::goal_errors`].
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] or [`Error::NonFinite`] for a start pose that does not fit the rig;
    /// [`Error::Unsupported`] for a problem the method cannot solve.
    fn solve(&mut self, problem: &Problem, start: &Pose) -> Result<Solution>;
}

/// The seam a method implements (one per file): its own iterations, on position goals. Every
/// such method is a [`Solver`], whose `solve` meets goals of the other kinds through it
/// ([`solve_goal_kinds`]). Crate-private, so that no caller hands a method a line, plane or
/// half-space goal directly (it would read the goal's `target` as a point).
pub(crate) trait PositionSolver: std::fmt::Debug + Send {
    /// [`Solver::name`].
    fn name(&self) -> &'static str;

    /// [`Solver::settings`].
    fn settings(&self) -> &SolveSettings;

    /// [`Solver::solve`] for a problem whose goals are all position goals (each with an optional
    /// orientation; [`Problem::has_only_position_goals`]).
    ///
    /// # Errors
    /// As [`Solver::solve`].
    fn solve_positions(&mut self, problem: &Problem, start: &Pose) -> Result<Solution>;

    /// For a method that returns the pose nearest the reference among those that meet the goals
    /// (`fabrik`, `dls`), its [`GroupSolve`]: with a reference, each independent group of goals is
    /// solved on its own. The other methods only start from the reference, and have none.
    fn group_solve(&mut self) -> Option<&mut GroupSolve> {
        None
    }
}

impl<T: PositionSolver> Solver for T {
    fn name(&self) -> &'static str {
        PositionSolver::name(self)
    }

    fn settings(&self) -> &SolveSettings {
        PositionSolver::settings(self)
    }

    fn solve(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
        let (name, settings) = (PositionSolver::name(self), *PositionSolver::settings(self));
        if problem.has_reference()
            && let Some(groups) = self.group_solve()
            && groups.refresh(problem, name, settings)?
        {
            return groups.solve(problem, start, settings);
        }
        solve_goal_kinds(self, problem, start)
    }
}

/// A problem with a reference whose goals fall into independent groups (no moving bone in
/// common, none moving another group's effector: [`Problem::independent_groups`]) is solved a
/// group at a time, each group on its own from the pose the groups before it left, with the whole
/// iteration budget, as Blender's IK solves each IK tree on its own. So a goal that cannot be met
/// (out of reach, or held off by limits) changes nothing in a group it shares no bone with.
/// Solved together, a goal out of reach kept every chain from its pull toward the reference (its
/// error never came within the pull's band): a metarig's head and neck ended 32° from where they
/// end with an arm's goal muted, and a bake popped where the arm's target crossed its reach. The
/// groups' bones are disjoint, so each group's answer is the one a problem of its goals alone
/// gives; the iterations reported are the most any group took.
///
/// Kept by the solver between solves: each group's problem and a solver of the same method
/// (with its own scratch space and FABRIK plan), made again when the problem's structure
/// ([`Problem::structure_id`]) or the settings change; each solve copies the goals, the
/// reference and the roots' rests into them.
#[derive(Debug, Default)]
pub(crate) struct GroupSolve {
    /// The structure id the groups were made for (0: none yet).
    structure: u64,
    settings: Option<SolveSettings>,
    groups: Vec<Group>,
    /// The whole answer's forward kinematics, for its residuals.
    frames: Frames,
}

/// One group of [`GroupSolve`]: its goals (indices into the whole problem's), a problem of them
/// alone and a solver for it.
#[derive(Debug)]
struct Group {
    goals: Vec<usize>,
    problem: Problem,
    solver: Box<dyn Solver>,
}

/// A cache: a clone starts empty and makes its groups again.
impl Clone for GroupSolve {
    fn clone(&self) -> Self {
        Self::default()
    }
}

impl GroupSolve {
    /// Makes the groups for `problem` unless they are made; whether it has two or more.
    fn refresh(&mut self, problem: &Problem, method: &str, settings: SolveSettings) -> Result<bool> {
        if self.structure != problem.structure_id() || self.settings != Some(settings) {
            self.structure = 0;
            self.groups.clear();
            if let Some(groups) = problem.independent_groups() {
                for goals in groups {
                    let sub = problem.with_goals(&goals)?;
                    let solver = Method::from_name(method)?.solver(settings)?;
                    self.groups.push(Group { goals, problem: sub, solver });
                }
            }
            (self.structure, self.settings) = (problem.structure_id(), Some(settings));
        }
        Ok(!self.groups.is_empty())
    }

    /// Solves `problem` a group at a time (see [`GroupSolve`]).
    fn solve(&mut self, problem: &Problem, start: &Pose, settings: SolveSettings) -> Result<Solution> {
        let settings = settings.validated()?;
        problem.check_pose(start)?;
        let (mut iterations, mut stop) = (0u32, StopReason::Converged);
        let mut pose: Option<Pose> = None;
        for group in &mut self.groups {
            group.problem.copy_frame_from(problem, &group.goals);
            let solution = group.solver.solve(&group.problem, pose.as_ref().unwrap_or(start))?;
            iterations = iterations.max(solution.iterations);
            if solution.stop != StopReason::Converged && stop == StopReason::Converged {
                stop = solution.stop;
            }
            pose = Some(solution.pose);
        }
        let pose = pose.unwrap_or_else(|| start.clone());
        problem.rig().forward_into(&pose, &mut self.frames);
        Ok(Solution::of_solved(problem, pose, &self.frames, iterations, stop, settings.tolerance))
    }
}

/// At most this many rounds of [`solve_goal_kinds`].
const KIND_ROUNDS: usize = 16;

/// Solves `problem`, whose goals may be of any kind, with `solver`'s method, which takes position
/// goals: in rounds, each solving the position problem of what the goals ask at the pose the
/// round starts from (the first round: at the reference pose, where the problem has one)
/// ([`Problem::as_position_goals`], [`crate::Goal::demand`]): a line, plane
/// or half-space goal's nearest point to the effector, an orientation or aim goal's bone turned
/// in place. The report's projection of the target onto the goal each iteration (TR §3.7, for
/// constraints other than points), done each round, so every method honours every kind.
///
/// The rounds stop once every goal is met, after a round that did not lower the problem's own
/// error (the sum over goals of the squared distance and the squared angle times the chain's
/// reach), or once the solver's iteration cap is spent. Since the nearest point of a line,
/// plane or half-space is no further than any other point of it, and an aim's shortest arc is
/// the smallest turn that aims, a round that meets its position goals better also meets the
/// goals better: the error never rises from round to round. A problem of position goals is
/// solved in one call, as [`PositionSolver::solve_positions`].
///
/// # Errors
/// The errors of the method's [`PositionSolver::solve_positions`].
pub(crate) fn solve_goal_kinds<S: PositionSolver + ?Sized>(solver: &mut S, problem: &Problem, start: &Pose) -> Result<Solution> {
    if problem.has_only_position_goals() {
        return solver.solve_positions(problem, start);
    }
    let settings = PositionSolver::settings(solver).validated()?;
    problem.check_pose(start)?;
    let error = |frames: &Frames| -> f64 {
        (0..problem.goals().len())
            .map(|gi| {
                let (d, a) = problem.goal_errors(gi, frames);
                d * d + (a * problem.angle_scale(gi)).powi(2)
            })
            .sum()
    };
    let mut positions = problem.clone();
    let mut pose = start.clone();
    // The first round's demands are measured on the reference (the bones goals move at their
    // reference rotations), where there is one: what a goal asks then does not depend on the
    // start, a half-space the reference meets asks for the reference's own effector (so the
    // pose falls back to the reference, not to where the start had it), and a line or plane asks
    // for the reference effector's nearest point. Without one, on the start.
    let mut frames = if problem.has_reference() {
        let mut reference = Pose::default();
        reference.root_translation = problem.reference_into(start, &mut reference.rotations, &mut reference.scales);
        problem.rig().forward(&reference)
    } else {
        problem.rig().forward(&pose)
    };
    let mut last_error = f64::INFINITY;
    let (mut iterations, mut stop) = (0u32, StopReason::Stalled);
    for _ in 0..KIND_ROUNDS {
        problem.as_position_goals(&frames, &mut positions);
        let solution = solver.solve_positions(&positions, &pose)?;
        iterations = iterations.saturating_add(solution.iterations);
        let now = problem.rig().forward(&solution.pose);
        let e = error(&now);
        if e > last_error {
            // (Not expected, by the argument above; kept out of the answer, with its stop reason,
            // all the same.)
            break;
        }
        stop = solution.stop;
        (pose, frames) = (solution.pose, now);
        let met = (0..problem.goals().len()).all(|gi| problem.goal_met(gi, &frames, settings.tolerance));
        if met || e >= last_error * (1.0 - 1e-9) {
            break;
        }
        if iterations >= settings.max_iterations {
            stop = StopReason::IterationLimit;
            break;
        }
        last_error = e;
    }
    Ok(Solution::of_solved(problem, pose, &frames, iterations, stop, settings.tolerance))
}

/// What every solve begins with: the settings checked, `start` checked against the problem's rig,
/// and its rotations normalised and clamped into their limits into `start_locals` (the solver's
/// scratch space, which [`settle`] takes back): a start outside a limit is brought inside before
/// anything else, so a solution never keeps a pose outside a limit because it met the goals
/// there.
///
/// # Errors
/// [`Error::BadSetting`], or the errors of [`Problem::check_pose`].
pub(crate) fn begin_solve(settings: &SolveSettings, problem: &Problem, start: &Pose, start_locals: &mut Vec<DQuat>) -> Result<SolveSettings> {
    let settings = settings.validated()?;
    problem.check_pose(start)?;
    start_locals.clear();
    let rig = problem.rig();
    start_locals.extend(start.rotations.iter().enumerate().map(|(i, &q)| {
        let q = crate::geometry::unit_start(q);
        let limit = &rig.bone(i).limit;
        limit.constrain(q, q)
    }));
    Ok(settings)
}

/// The length scales a solve of `problem` starts from: one per bone where some bone may stretch
/// (`start`'s, 1 where it has none), else `start`'s as given.
pub(crate) fn start_scales(problem: &Problem, start: &Pose) -> Vec<f64> {
    if problem.stretches() && start.scales.is_empty() { vec![1.0; problem.rig().len()] } else { start.scales.clone() }
}

/// The methods available by name (for the C, Python and command-line adapters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Forward And Backward Reaching IK (tech report §3.7), with a damped-least-squares finish.
    #[default]
    Fabrik,
    /// Damped least squares (the Jacobian family: Nilsson's thesis §2.4.3).
    Dls,
    /// FABRIK as the tech report writes it (Alg. 1, §3.7.1–3.7.2), without the hybrid's finish.
    FabrikClassic,
    /// Cyclic Coordinate Descent (tech report §3.6.1).
    Ccd,
    /// Triangulation (Müller-Cajar & Mukundan): one chain, one position goal, one pass.
    Triangulation,
    /// The Jacobian transpose with the report's α (TR §3.2.2, thesis §2.4.1).
    JacobianTranspose,
    /// The Jacobian pseudo-inverse by SVD (TR §3.2.1, §3.2.3; thesis §2.4.2, §2.4.4).
    JacobianPinv,
    /// Damped least squares through the SVD (TR eq. 3.27; thesis §2.4.3–2.4.4).
    SvdDls,
    /// Buss & Kim's selectively damped least squares (TR §3.2.6).
    Sdls,
    /// Jack's nonlinear programming (Zhao & Badler 1994): the goals' potentials minimised by
    /// quasi-Newton steps that never raise them, within the limits.
    Nlp,
}

impl Method {
    /// Every method, for listings; a method's index here is its number in the C ABI
    /// (`sinew_method`).
    pub const ALL: [Method; 10] = [
        Method::Fabrik,
        Method::Dls,
        Method::FabrikClassic,
        Method::Ccd,
        Method::Triangulation,
        Method::JacobianTranspose,
        Method::JacobianPinv,
        Method::SvdDls,
        Method::Sdls,
        Method::Nlp,
    ];

    /// The method called `name` (`"fabrik"`, `"dls"`, `"fabrik_classic"`, `"ccd"`,
    /// `"triangulation"`, `"jacobian_transpose"`, `"jacobian_pinv"`, `"svd_dls"`, `"sdls"`, `"nlp"`;
    /// any case).
    ///
    /// # Errors
    /// [`Error::UnknownMethod`] for an unknown name.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL.into_iter().find(|m| m.name().eq_ignore_ascii_case(name)).ok_or_else(|| Error::UnknownMethod {
            name: name.to_owned(),
            available: Self::ALL.map(Method::name).join(", "),
        })
    }

    /// The method's name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Fabrik => "fabrik",
            Self::Dls => "dls",
            Self::FabrikClassic => "fabrik_classic",
            Self::Ccd => "ccd",
            Self::Triangulation => "triangulation",
            Self::JacobianTranspose => "jacobian_transpose",
            Self::JacobianPinv => "jacobian_pinv",
            Self::SvdDls => "svd_dls",
            Self::Sdls => "sdls",
            Self::Nlp => "nlp",
        }
    }

    /// A solver of this method with `settings`.
    ///
    /// # Errors
    /// [`Error::BadSetting`] for settings out of range.
    pub fn solver(self, settings: SolveSettings) -> Result<Box<dyn Solver>> {
        let settings = settings.validated()?;
        Ok(match self {
            Self::Fabrik => Box::new(Fabrik::new(settings)),
            Self::Dls => Box::new(Dls::new(settings)),
            Self::FabrikClassic => Box::new(FabrikClassic::new(settings)),
            Self::Ccd => Box::new(Ccd::new(settings)),
            Self::Triangulation => Box::new(Triangulation::new(settings)),
            Self::JacobianTranspose => Box::new(JacobianTranspose::new(settings)),
            Self::JacobianPinv => Box::new(JacobianPinv::new(settings)),
            Self::SvdDls => Box::new(SvdDls::new(settings)),
            Self::Sdls => Box::new(Sdls::new(settings)),
            Self::Nlp => Box::new(Nlp::new(settings)),
        })
    }
}
