//! `sinew_solver`: a method with its settings and scratch space, and the last solution.

use std::ffi::c_char;

use glam::{DMat4, DQuat, DVec3};
use sinew_core::{FrameTargets, Method, Pose, SolveSettings, Solution, Solver, StopReason, solve_sequence};

use std::ptr::{null, null_mut};

use crate::args::{self, OutBuf, check_out, copy_exact, get_mut, get_ref, read, write};
use crate::problem::sinew_problem;
use crate::rig::{clear_out, hand_out};
use crate::status::{FfiError, FfiResult, ffi_status, ffi_value, sinew_status};

/// IK methods, for `sinew_settings.method`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum sinew_method {
    /// Forward And Backward Reaching IK (Aristidou & Lasenby), multi-chain with sub-bases and
    /// joint limits, finishing with damped least squares.
    Fabrik = 0,
    /// Damped least squares (the Jacobian family), from the start pose alone.
    Dls = 1,
    /// FABRIK as the tech report writes it (Alg. 1, sub-bases, limits at every step), without
    /// the least-squares finish: for comparison.
    FabrikClassic = 2,
    /// Cyclic Coordinate Descent.
    Ccd = 3,
    /// Triangulation (law of cosines, one pass): one position goal on one chain; anything else
    /// is `SINEW_STATUS_UNSUPPORTED` when solving.
    Triangulation = 4,
    /// The Jacobian transpose, `Δθ = α Jᵀ e` with the tech report's α (since ABI 0.4).
    JacobianTranspose = 5,
    /// The Jacobian pseudo-inverse, by SVD (since ABI 0.4).
    JacobianPinv = 6,
    /// Damped least squares through the SVD, with the damping of Nilsson's thesis (since ABI 0.4).
    SvdDls = 7,
    /// Buss & Kim's selectively damped least squares (since ABI 0.4).
    Sdls = 8,
    /// Jack's nonlinear programming: quasi-Newton steps on the goals' potentials within the
    /// limits (since ABI 0.5).
    Nlp = 9,
}

impl sinew_method {
    /// Every method with its C id.
    const ALL: [(sinew_method, Method); 10] = [
        (Self::Fabrik, Method::Fabrik),
        (Self::Dls, Method::Dls),
        (Self::FabrikClassic, Method::FabrikClassic),
        (Self::Ccd, Method::Ccd),
        (Self::Triangulation, Method::Triangulation),
        (Self::JacobianTranspose, Method::JacobianTranspose),
        (Self::JacobianPinv, Method::JacobianPinv),
        (Self::SvdDls, Method::SvdDls),
        (Self::Sdls, Method::Sdls),
        (Self::Nlp, Method::Nlp),
    ];

    fn from_core(method: Method) -> Self {
        Self::ALL.iter().find(|(_, m)| *m == method).map(|(c, _)| *c).expect("every core method has a C id")
    }

    fn to_core(id: u32) -> Option<Method> {
        Self::ALL.iter().find(|(c, _)| *c as u32 == id).map(|(_, m)| *m)
    }
}

/// Whether bone 0 (the rig's root) may translate, for `sinew_problem_new`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum sinew_root_mode {
    /// The root's head stays where the start pose puts it.
    Pinned = 0,
    /// The root may translate (when some goal's chain reaches it).
    Free = 1,
}

/// What the freedom the goals leave falls back to, for `sinew_problem_set_reference_kind` and
/// `sinew_problem_reference_kind`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum sinew_reference_kind {
    /// The rest pose (the default): identity rotations, unit lengths, the start's root
    /// translation.
    Rest = 0,
    /// A pose given with `sinew_problem_set_reference`.
    Pose = 1,
    /// No reference: each method's answer is where its steps lead from the start (`fabrik` and
    /// `dls`: near the least joint motion from it, in a few iterations).
    LeastMotion = 2,
}

/// Why a solve stopped, in `sinew_solve_info.stop_reason`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum sinew_stop_reason {
    /// Every goal is within tolerance.
    Converged = 0,
    /// The effectors stopped moving (targets out of reach or blocked by limits).
    Stalled = 1,
    /// The single chain's target is out of reach: it was straightened toward it in one pass.
    OutOfReach = 2,
    /// The iteration cap was hit.
    IterationLimit = 3,
}

impl sinew_stop_reason {
    fn from_core(s: StopReason) -> Self {
        match s {
            StopReason::Converged => Self::Converged,
            StopReason::Stalled => Self::Stalled,
            StopReason::OutOfReach => Self::OutOfReach,
            StopReason::IterationLimit => Self::IterationLimit,
        }
    }
}

/// Solver choice and settings. Start from `sinew_settings_default` (or
/// `sinew_problem_settings`) and change what you need.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(non_camel_case_types)]
pub struct sinew_settings {
    /// A `sinew_method` value (checked: an unknown number is `SINEW_STATUS_INVALID_SETTING`).
    pub method: u32,
    /// Iteration cap, ≥ 1 (default 100).
    pub max_iterations: u32,
    /// A goal is reached when its effector is within this distance of its target (rig units,
    /// > 0; default 1e-4).
    pub tolerance: f64,
    /// Stop when no effector moves more than this between two iterations (rig units, ≥ 0;
    /// default 1e-7).
    pub stall_tolerance: f64,
}

impl sinew_settings {
    pub(crate) fn from_core(method: Method, s: SolveSettings) -> Self {
        Self {
            method: sinew_method::from_core(method) as u32,
            max_iterations: s.max_iterations,
            tolerance: s.tolerance,
            stall_tolerance: s.stall_tolerance,
        }
    }

    fn to_core(self) -> FfiResult<(Method, SolveSettings)> {
        let Some(method) = sinew_method::to_core(self.method) else {
            let known: Vec<String> = sinew_method::ALL.iter().map(|(c, m)| format!("{} = {}", *c as u32, m.name())).collect();
            return Err(FfiError::new(
                sinew_status::InvalidSetting,
                format!("method {} is not a sinew_method ({})", self.method, known.join(", ")),
            ));
        };
        let settings = SolveSettings {
            max_iterations: self.max_iterations,
            tolerance: self.tolerance,
            stall_tolerance: self.stall_tolerance,
        }
        .validated()?;
        Ok((method, settings))
    }
}

/// A summary of one solve.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(non_camel_case_types)]
pub struct sinew_solve_info {
    /// Iterations used.
    pub iterations: u32,
    /// A `sinew_stop_reason` value.
    pub stop_reason: u32,
    /// Whether every goal is within tolerance.
    pub reached: bool,
    /// Number of bones (rotations hold 4× this many doubles).
    pub bone_count: usize,
    /// Number of goals (one residual each).
    pub goal_count: usize,
    /// The largest residual (0 without goals; NaN if any residual is NaN, which a successful
    /// solve never returns). The largest orientation residual is not here: growing this struct
    /// would change its layout (a major ABI change); read the angles with
    /// `sinew_solver_orientation_residuals`.
    pub worst_residual: f64,
}

impl sinew_solve_info {
    fn of(s: &Solution) -> Self {
        Self {
            iterations: s.iterations,
            stop_reason: sinew_stop_reason::from_core(s.stop) as u32,
            reached: s.reached,
            bone_count: s.pose.rotations.len(),
            goal_count: s.residuals.len(),
            // NaN if some residual is NaN (the core's fold would skip it).
            worst_residual: s.worst_residual(),
        }
    }
}

/// A solver: one method with its settings, its scratch space (so solving again allocates little)
/// and the last solution, read with `sinew_solver_rotations`, `sinew_solver_root_translation`,
/// `sinew_solver_residuals` and `sinew_solver_info`.
///
/// **Ownership.** Created by `sinew_solver_new`, owned by the caller, released with
/// `sinew_solver_free` exactly once. It keeps no pointer to any problem.
///
/// **Threads.** A solver may be moved between threads but is used by one thread at a time: no
/// call on a solver may run concurrently with another call on the same solver (reads included,
/// since a solve replaces the last solution). Use one solver per thread.
#[derive(Debug)]
#[allow(non_camel_case_types)]
pub struct sinew_solver {
    method: Method,
    settings: SolveSettings,
    solver: Box<dyn Solver>,
    last: Option<Solution>,
}

impl sinew_solver {
    fn last(&self) -> FfiResult<&Solution> {
        self.last
            .as_ref()
            .ok_or_else(|| FfiError::new(sinew_status::NoSolution, "the solver has not solved anything yet"))
    }
}

/// Fills `*out_settings` with the defaults: FABRIK, 100 iterations, tolerance 1e-4, stall
/// tolerance 1e-7.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_settings_default(out_settings: *mut sinew_settings) -> sinew_status {
    ffi_status!({
        let s = sinew_settings::from_core(Method::default(), SolveSettings::default());
        // SAFETY: writable by contract.
        unsafe { write(out_settings, s, "out_settings") }
    })
}

/// The name of method `method` (e.g. `"fabrik"`), a static NUL-terminated string, or NULL for a
/// number that is not a `sinew_method`. Do not free.
#[unsafe(no_mangle)]
pub extern "C" fn sinew_method_name(method: u32) -> *const c_char {
    match method {
        0 => c"fabrik".as_ptr(),
        1 => c"dls".as_ptr(),
        2 => c"fabrik_classic".as_ptr(),
        3 => c"ccd".as_ptr(),
        4 => c"triangulation".as_ptr(),
        5 => c"jacobian_transpose".as_ptr(),
        6 => c"jacobian_pinv".as_ptr(),
        7 => c"svd_dls".as_ptr(),
        8 => c"sdls".as_ptr(),
        9 => c"nlp".as_ptr(),
        _ => std::ptr::null(),
    }
}

/// The name of stop reason `stop_reason` (`"converged"`, `"stalled"`, `"out_of_reach"`,
/// `"iteration_limit"`, as in the JSON solution), a static string, or NULL for an unknown
/// number. Do not free.
#[unsafe(no_mangle)]
pub extern "C" fn sinew_stop_reason_name(stop_reason: u32) -> *const c_char {
    match stop_reason {
        0 => c"converged".as_ptr(),
        1 => c"stalled".as_ptr(),
        2 => c"out_of_reach".as_ptr(),
        3 => c"iteration_limit".as_ptr(),
        _ => std::ptr::null(),
    }
}

/// Creates a solver with `*settings` (NULL for the defaults). On success `*out_solver` receives
/// a new solver (free it with `sinew_solver_free`); on failure it is set to NULL.
///
/// Errors: `NULL_ARGUMENT` (`out_solver`), `MISALIGNED_POINTER`, `INVALID_SETTING`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_new(
    settings: *const sinew_settings,
    out_solver: *mut *mut sinew_solver,
) -> sinew_status {
    ffi_status!({
        clear_out(out_solver, "out_solver")?;
        let (method, settings) = if settings.is_null() {
            (Method::default(), SolveSettings::default())
        } else {
            // SAFETY: a readable struct by contract.
            unsafe { read(settings, "settings") }?.to_core()?
        };
        let solver = method.solver(settings)?;
        hand_out(out_solver, sinew_solver { method, settings, solver, last: None })
    })
}

/// Frees a solver. `NULL` is a no-op. The pointer must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_free(solver: *mut sinew_solver) {
    ffi_value!((), {
        if !solver.is_null() && solver.is_aligned() {
            // SAFETY: made by `Box::into_raw` here and freed once (contract).
            drop(unsafe { Box::from_raw(solver) });
        }
    })
}

/// Writes the solver's settings to `*out_settings`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_get_settings(
    solver: *const sinew_solver,
    out_settings: *mut sinew_settings,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver; writable output (contract).
        let s = unsafe { get_ref(solver, "solver") }?;
        unsafe { write(out_settings, sinew_settings::from_core(s.method, s.settings), "out_settings") }
    })
}

/// Changes the solver's method and settings. The last solution is kept. On error nothing
/// changes.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `INVALID_SETTING`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_set_settings(
    solver: *mut sinew_solver,
    settings: *const sinew_settings,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver (exclusive) and a readable struct by contract.
        let s = unsafe { get_mut(solver, "solver") }?;
        let (method, settings) = unsafe { read(settings, "settings") }?.to_core()?;
        s.solver = method.solver(settings)?;
        s.method = method;
        s.settings = settings;
        Ok(())
    })
}

/// The start pose with length scales: as [`start_pose`], and `scales` (N doubles) for the
/// problem's start scales unless NULL.
///
/// # Safety
/// As [`start_pose`]; NULL or `scales_len` doubles at `scales`.
unsafe fn start_pose_scaled(
    p: &sinew_problem,
    rotations: *const f64,
    rotations_len: usize,
    root: *const f64,
    scales: *const f64,
    scales_len: usize,
) -> FfiResult<Pose> {
    // SAFETY: forwarded contract.
    let mut pose = unsafe { start_pose(p, rotations, rotations_len, root) }?;
    if !scales.is_null() {
        // SAFETY: forwarded contract.
        pose.scales = unsafe { copy_exact(scales, scales_len, p.problem.rig().len(), "start_scales") }?;
    } else if scales_len != 0 {
        return Err(FfiError::new(sinew_status::NullArgument, "start_scales is NULL but start_scales_len is not 0"));
    }
    Ok(pose)
}

/// The start pose: given arrays, or the problem's own start pose for NULL ones.
///
/// # Safety
/// NULL or `rotations_len` doubles at `rotations`; NULL or 3 doubles at `root`.
unsafe fn start_pose(p: &sinew_problem, rotations: *const f64, rotations_len: usize, root: *const f64) -> FfiResult<Pose> {
    let n = p.problem.rig().len();
    let mut pose = p.start.clone();
    if !rotations.is_null() {
        // SAFETY: forwarded contract.
        let r = unsafe { copy_exact(rotations, rotations_len, args::mul(n, 4, "start_rotations")?, "start_rotations") }?;
        pose.rotations = r.chunks_exact(4).map(args::quat_wxyz).collect();
    } else if rotations_len != 0 {
        return Err(FfiError::new(sinew_status::NullArgument, "start_rotations is NULL but start_rotations_len is not 0"));
    }
    if !root.is_null() {
        // SAFETY: forwarded contract.
        pose.root_translation = args::vec3(unsafe { args::read_array::<3>(root, "start_root_translation") }?);
    }
    Ok(pose)
}

/// Solves `problem` once, keeping the solution in the solver.
///
/// The solve starts from `start_rotations` (N quaternions `[w, x, y, z]`, local to each bone's
/// rest frame, `start_rotations_len` = 4·N doubles) and `start_root_translation` (3 doubles:
/// bone 0's translation in its rest frame); pass NULL (and length 0) for either to use the
/// problem's start pose. To track a moving target, pass the previous solution's rotations.
///
/// `out_info` (may be NULL) receives a summary. Not reaching every goal is not an error: see
/// `out_info->reached` and `stop_reason`. Read the pose with `sinew_solver_rotations`.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `SHAPE_MISMATCH` (`start_rotations_len` ≠
/// 4·N), `NON_FINITE` (a NaN or zero start quaternion, a NaN translation or one beyond 1e12 rig
/// units, or a result that is not finite: a bug, never returned as a success).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_solve(
    solver: *mut sinew_solver,
    problem: *const sinew_problem,
    start_rotations: *const f64,
    start_rotations_len: usize,
    start_root_translation: *const f64,
    out_info: *mut sinew_solve_info,
) -> sinew_status {
    // SAFETY: forwarded contract, with the problem's start scales (the function called has the
    // panic boundary).
    unsafe {
        sinew_solver_solve_scaled(solver, problem, start_rotations, start_rotations_len, start_root_translation, null(), 0, out_info)
    }
}

/// As `sinew_solver_solve`, with the start's length scales (ABI 0.4): `start_scales` is NULL
/// (length 0) for the problem's start scales (every bone at 1 unless its file gave `"scales"`),
/// or N doubles, bone i's length over its rest length (1 for a bone whose stretch is 0; within
/// [1e-3, 1e3] for one that stretches). To track a moving target on a rig that stretches, pass
/// the previous solution's rotations and scales (`sinew_solver_scales`).
///
/// Errors: as `sinew_solver_solve`; `SHAPE_MISMATCH` for `start_scales_len` ≠ N, `NON_FINITE`
/// for a NaN scale, `LIMIT_OUT_OF_RANGE` for a scale other than 1 on a rigid bone or outside the
/// bounds (the message names the bone).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_solve_scaled(
    solver: *mut sinew_solver,
    problem: *const sinew_problem,
    start_rotations: *const f64,
    start_rotations_len: usize,
    start_root_translation: *const f64,
    start_scales: *const f64,
    start_scales_len: usize,
    out_info: *mut sinew_solve_info,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver (exclusive), a live problem, and the start arrays as documented.
        let s = unsafe { get_mut(solver, "solver") }?;
        let p = unsafe { get_ref(problem, "problem") }?;
        if !out_info.is_null() {
            check_out(out_info, "out_info")?;
        }
        let start = unsafe {
            start_pose_scaled(p, start_rotations, start_rotations_len, start_root_translation, start_scales, start_scales_len)
        }?;
        let solution = s.solver.solve(&p.problem, &start)?;
        // Never a non-finite number with an OK status.
        sinew_core::format::check_solution_finite(&solution)?;
        let info = sinew_solve_info::of(&solution);
        s.last = Some(solution);
        if !out_info.is_null() {
            // SAFETY: checked; writable by contract.
            unsafe { write(out_info, info, "out_info") }?;
        }
        Ok(())
    })
}

/// Copies the last solution's local rotations, N quaternions `[w, x, y, z]` (relative to each
/// bone's rest frame, as Blender's `pose_bone.rotation_quaternion`), into `out_rotations`
/// (`out_rotations_len` ≥ 4·N doubles).
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `BUFFER_TOO_SMALL`, `NO_SOLUTION`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_rotations(
    solver: *const sinew_solver,
    out_rotations: *mut f64,
    out_rotations_len: usize,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver and an output buffer of the stated length (contract).
        let sol = unsafe { get_ref(solver, "solver") }?.last()?;
        let n = sol.pose.rotations.len();
        let out = unsafe { OutBuf::new(out_rotations, out_rotations_len, args::mul(n, 4, "rotations")?, "out_rotations") }?;
        for (i, q) in sol.pose.rotations.iter().enumerate() {
            out.set_all(4 * i, args::wxyz(*q));
        }
        Ok(())
    })
}

/// Copies the last solution's length scales, one per bone (its length over its rest length: 1
/// for every bone that kept its length, every bone of a rig without stretch), into `out_scales`
/// (`out_scales_len` ≥ N doubles). In Blender's terms bone i's uniform pose scale is
/// `scales[i] / scales[parent]`, as Blender's IK shows a stretched bone. Since ABI 0.4.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `BUFFER_TOO_SMALL`, `NO_SOLUTION`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_scales(solver: *const sinew_solver, out_scales: *mut f64, out_scales_len: usize) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver and an output buffer of the stated length (contract).
        let sol = unsafe { get_ref(solver, "solver") }?.last()?;
        let n = sol.pose.rotations.len();
        let out = unsafe { OutBuf::new(out_scales, out_scales_len, n, "out_scales") }?;
        out.set_all(0, (0..n).map(|i| sol.pose.scale(i)));
        Ok(())
    })
}

/// Copies the last solution's root translation (bone 0's translation in its rest frame, as
/// Blender's `pose_bone.location`) into `out_translation` (3 doubles).
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `NO_SOLUTION`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_root_translation(
    solver: *const sinew_solver,
    out_translation: *mut f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver and 3 writable doubles (contract).
        let s = unsafe { get_ref(solver, "solver") }?;
        let out = unsafe { OutBuf::new(out_translation, 3, 3, "out_translation") }?;
        let sol = s.last()?;
        out.set_all(0, sol.pose.root_translation.to_array());
        Ok(())
    })
}

/// Copies the last solution's residuals, one distance per goal from effector to target, into
/// `out_residuals` (`out_residuals_len` ≥ the goal count; NULL allowed without goals).
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `BUFFER_TOO_SMALL`, `NO_SOLUTION`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_residuals(
    solver: *const sinew_solver,
    out_residuals: *mut f64,
    out_residuals_len: usize,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver and an output buffer of the stated length (contract).
        let sol = unsafe { get_ref(solver, "solver") }?.last()?;
        let out = unsafe { OutBuf::new(out_residuals, out_residuals_len, sol.residuals.len(), "out_residuals") }?;
        out.set_all(0, sol.residuals.iter().copied());
        Ok(())
    })
}

/// Copies the last solution's orientation residuals, one angle per goal (radians, from the
/// effector bone's armature-space rotation to the goal's target orientation; 0 for a goal without
/// orientation), into `out_residuals` (`out_residuals_len` ≥ the goal count; NULL allowed without
/// goals). `sinew_solve_info.reached` already asks each orientation to be within
/// `tolerance / reach` radians (`reach` the goal chain's length).
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `BUFFER_TOO_SMALL`, `NO_SOLUTION`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_orientation_residuals(
    solver: *const sinew_solver,
    out_residuals: *mut f64,
    out_residuals_len: usize,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver and an output buffer of the stated length (contract).
        let sol = unsafe { get_ref(solver, "solver") }?.last()?;
        let out = unsafe { OutBuf::new(out_residuals, out_residuals_len, sol.orientation_residuals.len(), "out_residuals") }?;
        out.set_all(0, sol.orientation_residuals.iter().copied());
        Ok(())
    })
}

/// Writes the last solution's summary (iterations, stop reason, reached, counts, worst residual)
/// to `*out_info`.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `NO_SOLUTION`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_info(solver: *const sinew_solver, out_info: *mut sinew_solve_info) -> sinew_status {
    ffi_status!({
        // SAFETY: a live solver; writable output (contract).
        let s = unsafe { get_ref(solver, "solver") }?;
        check_out(out_info, "out_info")?;
        let info = sinew_solve_info::of(s.last()?);
        unsafe { write(out_info, info, "out_info") }
    })
}

/// Solves `frames` frames of an animation, writing every frame's result into caller-provided
/// buffers: with a reference (the problem's, the rest pose unless set, or one per frame), each
/// frame exactly as `sinew_solver_solve` solves that frame alone from its reference, the frames
/// side by side on up to as many threads as the machine has; with
/// `SINEW_REFERENCE_KIND_LEAST_MOTION` and no per-frame references, each warm-started from the
/// previous frame's solution (frame 0 from the start pose), one after another (`sinew::solve_sequence`).
/// The solver keeps the last frame's solution. Quaternions are sign-continuous from frame to
/// frame, so they can be keyed directly.
///
/// With N bones, G goals and F = `frames`, lengths counted in elements:
/// - `targets`: F·G·3 doubles, `targets[(f·G + g)·3 + k]` (`targets_len` must equal it);
/// - `orientations_wxyz`: NULL, or F·G·4 doubles `[w, x, y, z]` (used for goals that have an
///   orientation, ignored for the others);
/// - `pole_targets`: NULL, or F·G·3 doubles (used for goals that have a pole);
/// - `out_rotations`: ≥ F·N·4 doubles, `[(f·N + i)·4 + (w, x, y, z)]`;
/// - `out_root_translations`: ≥ F·3 doubles;
/// - `out_residuals`: ≥ F·G doubles (may be NULL when G = 0);
/// - `out_infos`: NULL, or ≥ F `sinew_solve_info`.
///
/// Every frame uses the problem's reference (the rest pose unless set); for a reference per
/// frame use `sinew_solver_solve_sequence_with_references`.
///
/// Every input and buffer length is checked before any array is read, and every input before the
/// first frame is solved, so on such an error no output has been written. Orientations and pole
/// targets of goals that have none are ignored, whatever they hold (NaN, zero). Should a frame's
/// result hold a non-finite number (a bug), `NON_FINITE` is returned and that frame and the
/// frames after it are not written.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `SHAPE_MISMATCH` (an input length),
/// `BUFFER_TOO_SMALL` (an output length), `INVALID_GOAL` (a non-finite target, or a target or
/// pole beyond 1e12 rig units), `NON_FINITE`, `INVALID_ARGUMENT` (sizes that overflow or cannot
/// be allocated).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_solve_sequence(
    solver: *mut sinew_solver,
    problem: *const sinew_problem,
    start_rotations: *const f64,
    start_rotations_len: usize,
    start_root_translation: *const f64,
    frames: usize,
    targets: *const f64,
    targets_len: usize,
    orientations_wxyz: *const f64,
    orientations_wxyz_len: usize,
    pole_targets: *const f64,
    pole_targets_len: usize,
    out_rotations: *mut f64,
    out_rotations_len: usize,
    out_root_translations: *mut f64,
    out_root_translations_len: usize,
    out_residuals: *mut f64,
    out_residuals_len: usize,
    out_infos: *mut sinew_solve_info,
    out_infos_len: usize,
) -> sinew_status {
    // SAFETY: forwarded contract, with no references and no orientation residuals (the function
    // called has the panic boundary).
    unsafe {
        sinew_solver_solve_sequence_with_references(
            solver, problem, start_rotations, start_rotations_len, start_root_translation, frames,
            targets, targets_len, orientations_wxyz, orientations_wxyz_len, pole_targets, pole_targets_len,
            std::ptr::null(), 0,
            out_rotations, out_rotations_len, out_root_translations, out_root_translations_len,
            out_residuals, out_residuals_len, std::ptr::null_mut(), 0, out_infos, out_infos_len,
        )
    }
}

/// As `sinew_solver_solve_sequence`, with a reference pose per frame and the orientation
/// residuals per frame (ABI 0.2).
///
/// - `references_wxyz`: NULL (every frame uses the problem's reference pose,
///   `sinew_problem_set_reference`), or F·N·4 doubles `[(f·N + i)·4 + (w, x, y, z)]`: frame f's
///   reference rotation of bone i, local to its rest frame. In a DCC this is the pose before IK
///   at each frame (the keyed animation), so the freedom the goals leave follows the keys. The
///   root translation of every frame's reference is the problem's reference's (the start's without
///   one). `references_wxyz_len` must equal F·N·4; NULL needs length 0.
/// - `out_orientation_residuals`: NULL, or ≥ F·G doubles: per frame and goal, the angle (radians)
///   from the effector bone's rotation to the goal's orientation (0 for goals without one).
///
/// Every input and buffer length is checked (and every reference rotation is checked to be finite
/// and non-zero) before the first frame is solved, so on error no output has been written.
///
/// Errors: as `sinew_solver_solve_sequence`; `NON_FINITE` also for a NaN or zero reference
/// quaternion (the message names the bone and frame).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_solve_sequence_with_references(
    solver: *mut sinew_solver,
    problem: *const sinew_problem,
    start_rotations: *const f64,
    start_rotations_len: usize,
    start_root_translation: *const f64,
    frames: usize,
    targets: *const f64,
    targets_len: usize,
    orientations_wxyz: *const f64,
    orientations_wxyz_len: usize,
    pole_targets: *const f64,
    pole_targets_len: usize,
    references_wxyz: *const f64,
    references_wxyz_len: usize,
    out_rotations: *mut f64,
    out_rotations_len: usize,
    out_root_translations: *mut f64,
    out_root_translations_len: usize,
    out_residuals: *mut f64,
    out_residuals_len: usize,
    out_orientation_residuals: *mut f64,
    out_orientation_residuals_len: usize,
    out_infos: *mut sinew_solve_info,
    out_infos_len: usize,
) -> sinew_status {
    // SAFETY: forwarded contract, with the problem's start scales and no scales written (the
    // function called has the panic boundary).
    unsafe {
        sinew_solver_solve_sequence_scaled(
            solver, problem, start_rotations, start_rotations_len, start_root_translation, null(), 0, frames,
            targets, targets_len, orientations_wxyz, orientations_wxyz_len, pole_targets, pole_targets_len,
            references_wxyz, references_wxyz_len,
            out_rotations, out_rotations_len, out_root_translations, out_root_translations_len, null_mut(), 0,
            out_residuals, out_residuals_len, out_orientation_residuals, out_orientation_residuals_len, out_infos, out_infos_len,
        )
    }
}

/// As `sinew_solver_solve_sequence_with_references`, with the start's length scales and every
/// frame's (ABI 0.4), for rigs whose bones stretch (`sinew_rig_set_stretch`):
///
/// - `start_scales`: NULL (length 0) for the problem's start scales, or N doubles (as
///   `sinew_solver_solve_scaled`);
/// - `out_scales`: NULL, or ≥ F·N doubles, `[f·N + i]`: frame f's length scale of bone i.
///
/// Errors: as `sinew_solver_solve_sequence_with_references` and `sinew_solver_solve_scaled`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_solve_sequence_scaled(
    solver: *mut sinew_solver,
    problem: *const sinew_problem,
    start_rotations: *const f64,
    start_rotations_len: usize,
    start_root_translation: *const f64,
    start_scales: *const f64,
    start_scales_len: usize,
    frames: usize,
    targets: *const f64,
    targets_len: usize,
    orientations_wxyz: *const f64,
    orientations_wxyz_len: usize,
    pole_targets: *const f64,
    pole_targets_len: usize,
    references_wxyz: *const f64,
    references_wxyz_len: usize,
    out_rotations: *mut f64,
    out_rotations_len: usize,
    out_root_translations: *mut f64,
    out_root_translations_len: usize,
    out_scales: *mut f64,
    out_scales_len: usize,
    out_residuals: *mut f64,
    out_residuals_len: usize,
    out_orientation_residuals: *mut f64,
    out_orientation_residuals_len: usize,
    out_infos: *mut sinew_solve_info,
    out_infos_len: usize,
) -> sinew_status {
    // SAFETY: the same contract, passed on; no per-frame root translations.
    unsafe {
        sinew_solver_solve_sequence_rooted(
            solver,
            problem,
            start_rotations,
            start_rotations_len,
            start_root_translation,
            start_scales,
            start_scales_len,
            frames,
            targets,
            targets_len,
            orientations_wxyz,
            orientations_wxyz_len,
            pole_targets,
            pole_targets_len,
            references_wxyz,
            references_wxyz_len,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            out_rotations,
            out_rotations_len,
            out_root_translations,
            out_root_translations_len,
            out_scales,
            out_scales_len,
            out_residuals,
            out_residuals_len,
            out_orientation_residuals,
            out_orientation_residuals_len,
            out_infos,
            out_infos_len,
        )
    }
}

/// As `sinew_solver_solve_sequence_scaled`, with the root's place per frame (ABI 0.6):
///
/// - `root_translations`: NULL (length 0), or F·3 doubles, `[f·3 + c]`: frame f's root
///   translation (rig space, as `start_root_translation`; in a DCC, the keyed root location).
///   It is frame f's reference root translation, and with `SINEW_ROOT_PINNED` where the root
///   stays that frame (the frame's start root is moved there). With NULL a pinned root stays at
///   the start's throughout, as in `sinew_solver_solve_sequence_scaled`.
/// - `root_rests`: NULL (length 0), or F·R·16 doubles: frame f's rig-space rest matrix of each
///   of the rig's R root bones (bones without a parent, in bone order), row-major as
///   `sinew_rig_new`'s; in a DCC, the animated bones above the IK chains. Every other bone keeps
///   its rest relative to its parent. With NULL the rig stays as the problem has it.
///
/// Errors: as `sinew_solver_solve_sequence_scaled`; `NON_FINITE` for a root translation or rest
/// that is not finite or beyond the supported coordinates, `INVALID_RIG` for a
/// rest matrix that is not a rotation and a translation.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_solver_solve_sequence_rooted(
    solver: *mut sinew_solver,
    problem: *const sinew_problem,
    start_rotations: *const f64,
    start_rotations_len: usize,
    start_root_translation: *const f64,
    start_scales: *const f64,
    start_scales_len: usize,
    frames: usize,
    targets: *const f64,
    targets_len: usize,
    orientations_wxyz: *const f64,
    orientations_wxyz_len: usize,
    pole_targets: *const f64,
    pole_targets_len: usize,
    references_wxyz: *const f64,
    references_wxyz_len: usize,
    root_translations: *const f64,
    root_translations_len: usize,
    root_rests: *const f64,
    root_rests_len: usize,
    out_rotations: *mut f64,
    out_rotations_len: usize,
    out_root_translations: *mut f64,
    out_root_translations_len: usize,
    out_scales: *mut f64,
    out_scales_len: usize,
    out_residuals: *mut f64,
    out_residuals_len: usize,
    out_orientation_residuals: *mut f64,
    out_orientation_residuals_len: usize,
    out_infos: *mut sinew_solve_info,
    out_infos_len: usize,
) -> sinew_status {
    ffi_status!({
        // SAFETY (all blocks below): live handles (the solver exclusive) and arrays of the
        // stated lengths, by the header's contract. Inputs are copied before outputs are
        // written, so aliasing between them is harmless.
        let s = unsafe { get_mut(solver, "solver") }?;
        let p = unsafe { get_ref(problem, "problem") }?;
        let n = p.problem.rig().len();
        let g = p.problem.goals().len();
        let fg = args::mul(frames, g, "frames × goals")?;
        // Every length against the sizes it must have before any array is read or allocated.
        args::check_len_eq(targets_len, args::mul(fg, 3, "targets")?, "targets")?;
        if !orientations_wxyz.is_null() {
            args::check_len_eq(orientations_wxyz_len, args::mul(fg, 4, "orientations")?, "orientations_wxyz")?;
        }
        if !pole_targets.is_null() {
            args::check_len_eq(pole_targets_len, args::mul(fg, 3, "pole_targets")?, "pole_targets")?;
        }
        if !references_wxyz.is_null() {
            args::check_len_eq(references_wxyz_len, args::mul(args::mul(frames, n, "references")?, 4, "references")?, "references_wxyz")?;
        }
        if !root_translations.is_null() {
            args::check_len_eq(root_translations_len, args::mul(frames, 3, "root_translations")?, "root_translations")?;
        }
        let roots = p.problem.rig().roots().count();
        let rests_len = args::mul(args::mul(frames, roots, "root_rests")?, 16, "root_rests")?;
        if !root_rests.is_null() {
            args::check_len_eq(root_rests_len, rests_len, "root_rests")?;
        }
        let start = unsafe {
            start_pose_scaled(p, start_rotations, start_rotations_len, start_root_translation, start_scales, start_scales_len)
        }?;
        let targets: Vec<DVec3> = unsafe { copy_exact(targets, targets_len, args::mul(fg, 3, "targets")?, "targets") }?
            .chunks_exact(3)
            .map(|t| DVec3::new(t[0], t[1], t[2]))
            .collect();
        let orientations: Option<Vec<DQuat>> = if orientations_wxyz.is_null() {
            None
        } else {
            let o = unsafe {
                copy_exact(orientations_wxyz, orientations_wxyz_len, args::mul(fg, 4, "orientations")?, "orientations_wxyz")
            }?;
            Some(o.chunks_exact(4).map(args::quat_wxyz).collect())
        };
        let poles: Option<Vec<DVec3>> = if pole_targets.is_null() {
            None
        } else {
            let o = unsafe { copy_exact(pole_targets, pole_targets_len, args::mul(fg, 3, "pole_targets")?, "pole_targets") }?;
            Some(o.chunks_exact(3).map(|t| DVec3::new(t[0], t[1], t[2])).collect())
        };
        let references: Option<Vec<DQuat>> = if references_wxyz.is_null() {
            if references_wxyz_len != 0 {
                return Err(FfiError::new(sinew_status::NullArgument, "references_wxyz is NULL but references_wxyz_len is not 0"));
            }
            None
        } else {
            let len = args::mul(args::mul(frames, n, "references")?, 4, "references")?;
            let r = unsafe { copy_exact(references_wxyz, references_wxyz_len, len, "references_wxyz") }?;
            Some(r.chunks_exact(4).map(args::quat_wxyz).collect())
        };
        let root_translations_v: Option<Vec<DVec3>> = if root_translations.is_null() {
            if root_translations_len != 0 {
                return Err(FfiError::new(sinew_status::NullArgument, "root_translations is NULL but root_translations_len is not 0"));
            }
            None
        } else {
            let r = unsafe { copy_exact(root_translations, root_translations_len, args::mul(frames, 3, "root_translations")?, "root_translations") }?;
            Some(r.chunks_exact(3).map(|t| DVec3::new(t[0], t[1], t[2])).collect())
        };
        let root_rests: Option<Vec<DMat4>> = if root_rests.is_null() {
            if root_rests_len != 0 {
                return Err(FfiError::new(sinew_status::NullArgument, "root_rests is NULL but root_rests_len is not 0"));
            }
            None
        } else {
            let m = unsafe { copy_exact(root_rests, root_rests_len, rests_len, "root_rests") }?;
            Some(args::mat4s_rows(&m))
        };
        let rot = unsafe {
            OutBuf::new(out_rotations, out_rotations_len, args::mul(args::mul(frames, n, "rotations")?, 4, "rotations")?, "out_rotations")
        }?;
        let root = unsafe {
            OutBuf::new(out_root_translations, out_root_translations_len, args::mul(frames, 3, "root")?, "out_root_translations")
        }?;
        let scl = if out_scales.is_null() {
            None
        } else {
            Some(unsafe { OutBuf::new(out_scales, out_scales_len, args::mul(frames, n, "scales")?, "out_scales") }?)
        };
        let res = unsafe { OutBuf::new(out_residuals, out_residuals_len, fg, "out_residuals") }?;
        let ores = if out_orientation_residuals.is_null() {
            None
        } else {
            Some(unsafe { OutBuf::new(out_orientation_residuals, out_orientation_residuals_len, fg, "out_orientation_residuals") }?)
        };
        let infos = if out_infos.is_null() {
            None
        } else {
            Some(unsafe { OutBuf::new(out_infos, out_infos_len, frames, "out_infos") }?)
        };
        // (The core checks every frame's inputs before the first is solved, and ignores the
        // orientations and poles of goals that have none.)
        if frames == 0 {
            return Ok(());
        }
        let inputs = FrameTargets {
            targets: &targets,
            orientations: orientations.as_deref(),
            poles: poles.as_deref(),
            references: references.as_deref(),
            root_translations: root_translations_v.as_deref(),
            root_rests: root_rests.as_deref(),
        };
        let mut last = None;
        // A frame with a non-finite number (a bug) is not written, nor any frame after it.
        let mut broken: Option<FfiError> = None;
        solve_sequence(s.solver.as_mut(), &p.problem, &start, frames, inputs, |f, sol| {
            if broken.is_some() {
                return;
            }
            if let Err(e) = sinew_core::format::check_solution_finite(sol) {
                broken = Some(FfiError::new(sinew_status::NonFinite, format!("frame {f}: {e}")));
                return;
            }
            for (i, q) in sol.pose.rotations.iter().enumerate() {
                rot.set_all((f * n + i) * 4, args::wxyz(*q));
            }
            root.set_all(f * 3, sol.pose.root_translation.to_array());
            if let Some(scl) = &scl {
                scl.set_all(f * n, (0..n).map(|i| sol.pose.scale(i)));
            }
            res.set_all(f * g, sol.residuals.iter().copied());
            if let Some(ores) = &ores {
                ores.set_all(f * g, sol.orientation_residuals.iter().copied());
            }
            if let Some(infos) = &infos {
                infos.set(f, sinew_solve_info::of(sol));
            }
            if f + 1 == frames {
                last = Some(sol.clone());
            }
        })?;
        if let Some(e) = broken {
            return Err(e);
        }
        s.last = last;
        Ok(())
    })
}

