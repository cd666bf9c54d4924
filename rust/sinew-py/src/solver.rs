//! `sinew.Solver`, its results, `methods`, `analyze`, `load_problem` and `load_reference`.
//!
//! Inputs are copied into owned core values while attached to Python; the solve itself runs with
//! the GIL released (`Python::detach`).

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use glam::{DQuat, DVec3};
use numpy::{PyArray1, PyArray2, PyArray3};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::convert::{
    Dim, mat4s_rows, push_wxyz, wxyz_flat, push_xyz, quats_from_wxyz, read_f64, read_i64, read_opt_f64, read_opt_vec3, root_mode, root_mode_name, stop_name,
    to_numpy, to_numpy_py, vec3s,
};
use crate::errors::{NonFiniteError, SettingsError, ShapeError, guard_core};
use crate::goal::{PyGoal, core_goals};
use crate::rig::PyRig;
use sinew::{FrameTargets, Method, Pose, Problem, SolveSettings};

/// An IK method with its settings. Reuses one core solver's scratch space between solves;
/// concurrent solves from several threads each get their own.
#[pyclass(module = "sinew._sinew", name = "Solver", frozen)]
#[derive(Debug)]
pub(crate) struct PySolver {
    method: Method,
    settings: SolveSettings,
    cached: Mutex<Option<Box<dyn sinew::Solver>>>,
}

impl PySolver {
    fn from_core(method: Method, settings: SolveSettings) -> PyResult<Self> {
        // Validates the settings (the core's BadSetting).
        let solver = guard_core(|| method.solver(settings))?;
        Ok(Self { method, settings, cached: Mutex::new(Some(solver)) })
    }

    /// Runs `f` with a core solver: the cached one if free, else a new one. Called detached.
    fn with_solver<T>(&self, f: impl FnOnce(&mut dyn sinew::Solver) -> sinew::Result<T>) -> PyResult<T> {
        guard_core(|| {
            let cached = self.cached.lock().unwrap_or_else(PoisonError::into_inner).take();
            let mut solver = match cached {
                Some(s) => s,
                None => self.method.solver(self.settings)?,
            };
            let out = f(solver.as_mut());
            // Only reached without a panic: a solver that panicked is dropped, not reused.
            *self.cached.lock().unwrap_or_else(PoisonError::into_inner) = Some(solver);
            out
        })
    }
}

/// Owned inputs of a solve, read from Python before detaching.
struct Inputs {
    rig: Arc<sinew::Rig>,
    goals: Vec<PyGoal>,
    start: Pose,
    root: sinew::RootMode,
    /// What the freedom falls back to: the rest pose unless `reference` named another.
    reference: sinew::Reference,
}

fn read_inputs(
    rig: &PyRig,
    goals: Vec<PyRef<'_, PyGoal>>,
    pose: Option<&Bound<'_, PyAny>>,
    root_translation: Option<&Bound<'_, PyAny>>,
    scales: Option<&Bound<'_, PyAny>>,
    root: &str,
) -> PyResult<Inputs> {
    let rig = rig.snapshot();
    let n = rig.len();
    let goals: Vec<PyGoal> = goals.iter().map(|g| (**g).clone()).collect();
    let mut start = Pose::rest(n);
    if let Some(p) = read_opt_f64(pose, "pose", &[Dim::Is(n), Dim::Is(4)])? {
        start.rotations = quats_from_wxyz(&p);
    }
    start.root_translation = read_opt_vec3(root_translation, "root_translation")?.unwrap_or(DVec3::ZERO);
    start.scales = read_opt_f64(scales, "scales", &[Dim::Is(n)])?.unwrap_or_default();
    Ok(Inputs { rig, goals, start, root: root_mode(root)?, reference: sinew::Reference::Rest })
}

/// Reads the reference arguments of `solve` or `solve_sequence` into `inputs`: `reference` may
/// be `"rest"` (as when nothing is given: the rest pose) or `"least_motion"` (none); a reference
/// pose is given by its rotations or its root translation (or, for a sequence with per-frame
/// `references`, by those); its root translation where none is given is `default_root`
/// (`solve`: zero; a sequence: the start's). `reference_scales` without a pose is refused
/// (SettingsError), not read as one toward the rest pose, and so is `"least_motion"` with
/// per-frame references.
fn read_reference(
    inputs: &mut Inputs,
    reference: Option<&Bound<'_, PyAny>>,
    reference_root_translation: Option<&Bound<'_, PyAny>>,
    reference_scales: Option<&Bound<'_, PyAny>>,
    default_root: DVec3,
    per_frame_references: bool,
) -> PyResult<()> {
    let n = inputs.rig.len();
    let named = match reference.map(|r| r.extract::<String>()) {
        Some(Ok(name)) => Some(sinew::Reference::named(&name).ok_or_else(|| {
            let (rest, least_motion) = (sinew::Reference::REST_NAME, sinew::Reference::LEAST_MOTION_NAME);
            SettingsError::new_err(format!("reference \"{name}\" is not \"{rest}\", \"{least_motion}\" or an (N, 4) array"))
        })?),
        _ => None,
    };
    if let Some(named) = named {
        if reference_root_translation.is_some_and(|r| !r.is_none()) || reference_scales.is_some_and(|r| !r.is_none()) {
            return Err(SettingsError::new_err("reference_root_translation and reference_scales belong to a reference pose, not to a named reference"));
        }
        if named == sinew::Reference::LeastMotion && per_frame_references {
            return Err(SettingsError::new_err("reference=\"least_motion\" asks for no reference, but references gives one per frame: pass one or the other"));
        }
        inputs.reference = named;
        return Ok(());
    }
    let rotations = read_opt_f64(reference, "reference", &[Dim::Is(n), Dim::Is(4)])?;
    let root = read_opt_vec3(reference_root_translation, "reference_root_translation")?;
    let scales = read_opt_f64(reference_scales, "reference_scales", &[Dim::Is(n)])?;
    inputs.reference = match (rotations, root, scales) {
        (None, None, None) => sinew::Reference::Rest,
        (None, None, Some(_)) if !per_frame_references => {
            return Err(SettingsError::new_err(
                "reference_scales is given without a reference pose: pass the reference (or, to a sequence, references) it belongs to",
            ));
        }
        (r, t, s) => sinew::Reference::Pose(Pose {
            rotations: r.map_or_else(|| vec![DQuat::IDENTITY; n], |r| quats_from_wxyz(&r)),
            root_translation: t.unwrap_or(default_root),
            scales: s.unwrap_or_default(),
        }),
    };
    Ok(())
}

impl Inputs {
    /// Builds and validates the core problem (clones the rig: done detached).
    fn problem(&self) -> sinew::Result<Problem> {
        let goals = core_goals(&self.goals, &self.rig)?;
        let mut problem = Problem::new((*self.rig).clone(), goals, self.root)?;
        if !matches!(self.reference, sinew::Reference::Rest) {
            problem.set_reference(self.reference.clone()).map_err(|e| match e {
                sinew::Error::ShapeMismatch { expected, got, .. } => {
                    sinew::Error::ShapeMismatch { what: "reference".into(), expected, got }
                }
                sinew::Error::NonFinite { what } => sinew::Error::NonFinite { what: format!("reference: {what}") },
                other => other,
            })?;
        }
        Ok(problem)
    }
}

#[pymethods]
impl PySolver {
    #[new]
    // `max_iterations` is read by `read_i64` (a SettingsError for an int beyond i64, not pyo3's
    // OverflowError); the signature shown keeps its default of 100.
    #[pyo3(
        signature = (method = "fabrik", max_iterations = None, tolerance = 1e-4, stall_tolerance = 1e-7),
        text_signature = "(method='fabrik', max_iterations=100, tolerance=0.0001, stall_tolerance=1e-07)"
    )]
    fn new(method: &str, max_iterations: Option<&Bound<'_, PyAny>>, tolerance: f64, stall_tolerance: f64) -> PyResult<Self> {
        let method = guard_core(|| Method::from_name(method))?;
        let max_iterations = match max_iterations {
            Some(m) if !m.is_none() => read_i64(m, "solver setting max_iterations", |msg| {
                SettingsError::new_err(format!("{msg}: must be between 1 and {}", u32::MAX))
            })?,
            _ => 100,
        };
        let max_iterations = u32::try_from(max_iterations).map_err(|_| {
            SettingsError::new_err(format!("solver setting max_iterations = {max_iterations} is invalid: must be between 1 and {}", u32::MAX))
        })?;
        Self::from_core(method, SolveSettings { max_iterations, tolerance, stall_tolerance })
    }

    fn __repr__(&self) -> String {
        let s = self.settings;
        format!(
            "Solver(method={:?}, max_iterations={}, tolerance={}, stall_tolerance={})",
            self.method.name(),
            s.max_iterations,
            s.tolerance,
            s.stall_tolerance
        )
    }

    #[getter]
    fn method(&self) -> &'static str {
        self.method.name()
    }

    #[getter]
    fn max_iterations(&self) -> u32 {
        self.settings.max_iterations
    }

    #[getter]
    fn tolerance(&self) -> f64 {
        self.settings.tolerance
    }

    #[getter]
    fn stall_tolerance(&self) -> f64 {
        self.settings.stall_tolerance
    }

    /// Solves one pose. Releases the GIL while solving.
    #[pyo3(signature = (rig, goals, pose = None, root_translation = None, root = "pinned", reference = None, reference_root_translation = None, scales = None, reference_scales = None))]
    #[allow(clippy::too_many_arguments)]
    fn solve(
        &self,
        py: Python<'_>,
        rig: PyRef<'_, PyRig>,
        goals: Vec<PyRef<'_, PyGoal>>,
        pose: Option<&Bound<'_, PyAny>>,
        root_translation: Option<&Bound<'_, PyAny>>,
        root: &str,
        reference: Option<&Bound<'_, PyAny>>,
        reference_root_translation: Option<&Bound<'_, PyAny>>,
        scales: Option<&Bound<'_, PyAny>>,
        reference_scales: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PySolution> {
        let mut inputs = read_inputs(&rig, goals, pose, root_translation, scales, root)?;
        read_reference(&mut inputs, reference, reference_root_translation, reference_scales, DVec3::ZERO, false)?;
        let n = inputs.rig.len();
        let sol = py.detach(|| {
            let problem = guard_core(|| inputs.problem())?;
            self.with_solver(|s| {
                let sol = s.solve(&problem, &inputs.start)?;
                // Never a non-finite number without an exception.
                sinew::format::check_solution_finite(&sol)?;
                Ok(sol)
            })
        })?;
        PySolution::new(py, &sol, n)
    }

    /// Solves F frames (`sinew::solve_sequence`: with a reference, the rest pose unless given,
    /// each as its single solve from it, on several threads; with `reference="least_motion"`,
    /// each warm-started from the previous one). Releases the GIL while solving.
    #[pyo3(signature = (rig, goals, targets, orientations = None, pole_targets = None, pose = None, root_translation = None, root = "pinned", reference = None, reference_root_translation = None, references = None, scales = None, reference_scales = None, root_translations = None, root_rests = None))]
    #[allow(clippy::too_many_arguments)]
    fn solve_sequence(
        &self,
        py: Python<'_>,
        rig: PyRef<'_, PyRig>,
        goals: Vec<PyRef<'_, PyGoal>>,
        targets: &Bound<'_, PyAny>,
        orientations: Option<&Bound<'_, PyAny>>,
        pole_targets: Option<&Bound<'_, PyAny>>,
        pose: Option<&Bound<'_, PyAny>>,
        root_translation: Option<&Bound<'_, PyAny>>,
        root: &str,
        reference: Option<&Bound<'_, PyAny>>,
        reference_root_translation: Option<&Bound<'_, PyAny>>,
        references: Option<&Bound<'_, PyAny>>,
        scales: Option<&Bound<'_, PyAny>>,
        reference_scales: Option<&Bound<'_, PyAny>>,
        root_translations: Option<&Bound<'_, PyAny>>,
        root_rests: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PySequenceResult> {
        let g = goals.len();
        let mut inputs = read_inputs(&rig, goals, pose, root_translation, scales, root)?;
        let start_root = inputs.start.root_translation;
        read_reference(&mut inputs, reference, reference_root_translation, reference_scales, start_root, references.is_some_and(|r| !r.is_none()))?;
        let (t, shape) = read_f64(targets, "targets", &[Dim::Any("F"), Dim::Is(g), Dim::Is(3)])?;
        let frames = shape[0];
        let targets = vec3s(&t);
        let orientations: Option<Vec<DQuat>> =
            read_opt_f64(orientations, "orientations", &[Dim::Is(frames), Dim::Is(g), Dim::Is(4)])?.map(|v| quats_from_wxyz(&v));
        let poles: Option<Vec<DVec3>> =
            read_opt_f64(pole_targets, "pole_targets", &[Dim::Is(frames), Dim::Is(g), Dim::Is(3)])?.map(|v| vec3s(&v));
        let n = inputs.rig.len();
        let references: Option<Vec<DQuat>> =
            read_opt_f64(references, "references", &[Dim::Is(frames), Dim::Is(n), Dim::Is(4)])?.map(|v| quats_from_wxyz(&v));
        let root_translations: Option<Vec<DVec3>> =
            read_opt_f64(root_translations, "root_translations", &[Dim::Is(frames), Dim::Is(3)])?.map(|v| vec3s(&v));
        let roots = inputs.rig.roots().count();
        let root_rests: Option<Vec<glam::DMat4>> =
            read_opt_f64(root_rests, "root_rests", &[Dim::Is(frames), Dim::Is(roots), Dim::Is(4), Dim::Is(4)])?.map(|v| mat4s_rows(&v));
        let out = py.detach(|| {
            let problem = guard_core(|| inputs.problem())?;
            // (The core checks every frame's inputs before the first is solved, and ignores the
            // orientations and poles of goals that have none.)
            // The result's size comes from the shape of `targets` alone when there are no goals
            // (a (1e9, 0, 3) array holds nothing): it is reserved without aborting on failure.
            let mut out = SequenceData::try_with_capacity(frames, n, g)?;
            let mut broken = None;
            let mut interrupted = None;
            let mut last_check = Instant::now();
            let flow = self.with_solver(|s| {
                let frame_inputs = FrameTargets {
                    targets: &targets,
                    orientations: orientations.as_deref(),
                    poles: poles.as_deref(),
                    references: references.as_deref(),
                    root_translations: root_translations.as_deref(),
                    root_rests: root_rests.as_deref(),
                };
                sinew::solve_sequence_until(s, &problem, &inputs.start, frames, frame_inputs, |f, sol| {
                    if let Err(e) = sinew::format::check_solution_finite(sol) {
                        broken = Some((f, e));
                        return ControlFlow::Break(());
                    }
                    out.push(sol);
                    // Ctrl-C (or any signal Python handles) stops a long range: checked every
                    // SIGNAL_CHECK as the frames come in, the GIL taken only for that.
                    if last_check.elapsed() >= SIGNAL_CHECK {
                        last_check = Instant::now();
                        if let Err(e) = Python::attach(|py| py.check_signals()) {
                            interrupted = Some(e);
                            return ControlFlow::Break(());
                        }
                    }
                    ControlFlow::Continue(())
                })
            })?;
            if let Some(e) = interrupted {
                return Err(e);
            }
            if let Some((f, e)) = broken {
                return Err(NonFiniteError::new_err(format!("frame {f}: {e}")));
            }
            // (The sink stops the range only for those two.)
            debug_assert!(flow.is_continue());
            Ok::<_, PyErr>(out)
        })?;
        out.into_py(py, frames, n, g)
    }
}

/// How often `solve_sequence` asks Python whether a signal is pending (Ctrl-C), as its frames come
/// in: a long range stops within about this, or a block of frames, of the key press.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Per-frame results gathered while detached.
struct SequenceData {
    rotations: Vec<f64>,
    roots: Vec<f64>,
    scales: Vec<f64>,
    residuals: Vec<f64>,
    orientation_residuals: Vec<f64>,
    iterations: Vec<i64>,
    reached: Vec<bool>,
    stops: Vec<&'static str>,
}

/// `Vec::try_with_capacity` of `count` elements (computed without overflow), or `ShapeError`.
fn try_vec<T>(count: Option<usize>, frames: usize, what: &str) -> PyResult<Vec<T>> {
    let fail = || {
        ShapeError::new_err(format!(
            "solve_sequence: the {what} of {frames} frames need more memory than can be allocated ({} bytes)",
            count.and_then(|c| c.checked_mul(std::mem::size_of::<T>())).map_or("too many".to_owned(), |b| b.to_string())
        ))
    };
    let count = count.ok_or_else(fail)?;
    let mut v = Vec::new();
    v.try_reserve_exact(count).map_err(|_| fail())?;
    Ok(v)
}

impl SequenceData {
    fn try_with_capacity(frames: usize, n: usize, g: usize) -> PyResult<Self> {
        Ok(Self {
            rotations: try_vec(frames.checked_mul(n).and_then(|x| x.checked_mul(4)), frames, "rotations")?,
            roots: try_vec(frames.checked_mul(3), frames, "root translations")?,
            scales: try_vec(frames.checked_mul(n), frames, "length scales")?,
            residuals: try_vec(frames.checked_mul(g), frames, "residuals")?,
            orientation_residuals: try_vec(frames.checked_mul(g), frames, "orientation residuals")?,
            iterations: try_vec(Some(frames), frames, "iteration counts")?,
            reached: try_vec(Some(frames), frames, "reached flags")?,
            stops: try_vec(Some(frames), frames, "stop reasons")?,
        })
    }

    fn push(&mut self, sol: &sinew::Solution) {
        for &q in &sol.pose.rotations {
            push_wxyz(&mut self.rotations, q);
        }
        push_xyz(&mut self.roots, sol.pose.root_translation);
        push_scales(&mut self.scales, &sol.pose);
        self.residuals.extend_from_slice(&sol.residuals);
        self.orientation_residuals.extend_from_slice(&sol.orientation_residuals);
        self.iterations.push(i64::from(sol.iterations));
        self.reached.push(sol.reached);
        self.stops.push(stop_name(sol.stop));
    }

    fn into_py(self, py: Python<'_>, frames: usize, n: usize, g: usize) -> PyResult<PySequenceResult> {
        Ok(PySequenceResult {
            rotations: to_numpy_py(py, self.rotations, (frames, n, 4))?,
            root_translations: to_numpy_py(py, self.roots, (frames, 3))?,
            scales: to_numpy_py(py, self.scales, (frames, n))?,
            residuals: to_numpy_py(py, self.residuals, (frames, g))?,
            orientation_residuals: to_numpy_py(py, self.orientation_residuals, (frames, g))?,
            iterations: to_numpy_py(py, self.iterations, frames)?,
            reached: to_numpy_py(py, self.reached, frames)?,
            stop_reasons: self.stops,
        })
    }
}

/// Every bone's length scale of `pose` (1 for each where it has none).
fn push_scales(out: &mut Vec<f64>, pose: &Pose) {
    out.extend((0..pose.rotations.len()).map(|i| pose.scale(i)));
}

/// The result of one solve.
#[pyclass(module = "sinew._sinew", name = "Solution", frozen)]
#[derive(Debug)]
pub(crate) struct PySolution {
    /// Local rotations (N, 4) wxyz, as Blender's `rotation_quaternion`.
    #[pyo3(get)]
    rotations: Py<PyArray2<f64>>,
    /// Bone 0's translation (3,) in its rest frame, as Blender's `location`.
    #[pyo3(get)]
    root_translation: Py<PyArray1<f64>>,
    /// Length scale per bone (N,): 1 for every bone that kept its length.
    #[pyo3(get)]
    scales: Py<PyArray1<f64>>,
    #[pyo3(get)]
    iterations: u32,
    /// Per goal distance from effector to target (G,).
    #[pyo3(get)]
    residuals: Py<PyArray1<f64>>,
    /// Per goal angle (radians) from the effector bone's rotation to its target orientation
    /// (G,); 0 for goals without orientation.
    #[pyo3(get)]
    orientation_residuals: Py<PyArray1<f64>>,
    #[pyo3(get)]
    reached: bool,
    #[pyo3(get)]
    stop_reason: &'static str,
    worst: f64,
    worst_orientation: f64,
}

impl PySolution {
    fn new(py: Python<'_>, sol: &sinew::Solution, n: usize) -> PyResult<Self> {
        let rot = wxyz_flat(&sol.pose.rotations);
        let mut scales = Vec::with_capacity(n);
        push_scales(&mut scales, &sol.pose);
        Ok(Self {
            rotations: to_numpy_py(py, rot, (n, 4))?,
            root_translation: to_numpy_py(py, sol.pose.root_translation.to_array().to_vec(), 3)?,
            scales: to_numpy_py(py, scales, n)?,
            iterations: sol.iterations,
            residuals: to_numpy_py(py, sol.residuals.clone(), sol.residuals.len())?,
            orientation_residuals: to_numpy_py(py, sol.orientation_residuals.clone(), sol.orientation_residuals.len())?,
            reached: sol.reached,
            stop_reason: stop_name(sol.stop),
            // NaN if some residual is NaN (the core's fold would skip it).
            worst: sol.worst_residual(),
            worst_orientation: sol.worst_orientation_residual(),
        })
    }
}

#[pymethods]
impl PySolution {
    /// The largest residual (0 without goals; NaN if any is NaN).
    #[getter]
    fn worst_residual(&self) -> f64 {
        self.worst
    }

    /// The largest orientation residual, radians (0 without orientation goals; NaN if any is
    /// NaN).
    #[getter]
    fn worst_orientation_residual(&self) -> f64 {
        self.worst_orientation
    }

    fn __repr__(&self) -> String {
        format!(
            "<sinew.Solution {} after {} iterations, worst residual {:.3e}>",
            self.stop_reason, self.iterations, self.worst
        )
    }
}

/// The results of `Solver.solve_sequence`, one row per frame.
#[pyclass(module = "sinew._sinew", name = "SequenceResult", frozen)]
#[derive(Debug)]
pub(crate) struct PySequenceResult {
    /// (F, N, 4) local rotations wxyz.
    #[pyo3(get)]
    rotations: Py<PyArray3<f64>>,
    /// (F, 3) root translations.
    #[pyo3(get)]
    root_translations: Py<PyArray2<f64>>,
    /// (F, N) length scales.
    #[pyo3(get)]
    scales: Py<PyArray2<f64>>,
    /// (F, G) residuals.
    #[pyo3(get)]
    residuals: Py<PyArray2<f64>>,
    /// (F, G) orientation residuals, radians.
    #[pyo3(get)]
    orientation_residuals: Py<PyArray2<f64>>,
    /// (F,) iterations per frame.
    #[pyo3(get)]
    iterations: Py<PyArray1<i64>>,
    /// (F,) whether every goal was reached.
    #[pyo3(get)]
    reached: Py<PyArray1<bool>>,
    /// Per frame stop reason.
    #[pyo3(get)]
    stop_reasons: Vec<&'static str>,
}

#[pymethods]
impl PySequenceResult {
    fn __len__(&self) -> usize {
        self.stop_reasons.len()
    }

    fn __repr__(&self) -> String {
        format!("<sinew.SequenceResult of {} frames>", self.stop_reasons.len())
    }
}

/// The names of the IK methods `Solver(method=...)` accepts, in the order of the core's
/// `Method::ALL` (a method added there is listed here without a change).
#[pyfunction]
pub(crate) fn methods() -> Vec<&'static str> {
    Method::ALL.iter().map(|m| m.name()).collect()
}

/// The chain structure of `goals` on `rig`: sub-bases (where chains meet), the bones each goal
/// moves (effector first), and every bone some goal moves.
#[pyfunction]
pub(crate) fn analyze<'py>(py: Python<'py>, rig: PyRef<'py, PyRig>, goals: Vec<PyRef<'py, PyGoal>>) -> PyResult<Bound<'py, PyDict>> {
    let inputs = read_inputs(&rig, goals, None, None, None, "pinned")?;
    let topology = py.detach(|| guard_core(|| Ok(inputs.problem()?.topology().clone())))?;
    let d = PyDict::new(py);
    d.set_item("sub_bases", &topology.sub_bases)?;
    d.set_item("moved", &topology.moved)?;
    d.set_item("active", &topology.active)?;
    Ok(d)
}

/// Reads a problem file: `(rig, goals, solver, start pose (N, 4), root_translation (3,), root mode)`.
#[pyfunction]
pub(crate) fn load_problem(py: Python<'_>, text: String) -> PyResult<Bound<'_, PyTuple>> {
    let loaded = py.detach(move || guard_core(|| sinew::Problem::from_json(&text)))?;
    let problem = &loaded.problem;
    let rig = problem.rig();
    let n = rig.len();
    let goals: Vec<PyGoal> = problem.goals().iter().map(|g| PyGoal::from_core(g, rig)).collect();
    let solver = PySolver::from_core(loaded.method, loaded.settings)?;
    let pose: Bound<'_, PyArray2<f64>> = to_numpy(py, wxyz_flat(&loaded.pose.rotations), (n, 4))?;
    let root_translation: Bound<'_, PyArray1<f64>> = to_numpy(py, loaded.pose.root_translation.to_array().to_vec(), 3)?;
    let items: [Bound<'_, PyAny>; 6] = [
        Bound::new(py, PyRig::from_core(rig.clone()))?.into_any(),
        goals.into_pyobject(py)?.into_any(),
        Bound::new(py, solver)?.into_any(),
        pose.into_any(),
        root_translation.into_any(),
        root_mode_name(problem.root()).into_pyobject(py)?.into_any(),
    ];
    PyTuple::new(py, items)
}

/// A problem file's reference as the keyword arguments of `Solver.solve` that give it:
/// `{"reference": "rest"}` (also when the file has none), `{"reference": "least_motion"}`, or a
/// pose's `reference` (N, 4), `reference_root_translation` (3,) and, where it has them,
/// `reference_scales` (N,). The file is read as `load_problem` reads it.
#[pyfunction]
pub(crate) fn load_reference(py: Python<'_>, text: String) -> PyResult<Bound<'_, PyDict>> {
    let loaded = py.detach(move || guard_core(|| sinew::Problem::from_json(&text)))?;
    let d = PyDict::new(py);
    match loaded.problem.reference() {
        sinew::Reference::Pose(r) => {
            let n = r.rotations.len();
            d.set_item("reference", to_numpy(py, wxyz_flat(&r.rotations), (n, 4))?)?;
            d.set_item("reference_root_translation", to_numpy(py, r.root_translation.to_array().to_vec(), 3)?)?;
            if !r.scales.is_empty() {
                d.set_item("reference_scales", to_numpy(py, r.scales.clone(), n)?)?;
            }
        }
        named => d.set_item("reference", named.name())?,
    }
    Ok(d)
}
