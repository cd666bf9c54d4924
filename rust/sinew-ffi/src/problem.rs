//! `sinew_problem`: a rig, its goals and root mode, plus the settings and start pose a JSON file
//! may carry.

use std::ffi::{CString, c_char};

use sinew_core::format::ProblemFile;
use sinew_core::{Goal, LoadedProblem, Method, Pole, Pose, Problem, Reference, RootMode, SolveSettings};

use crate::args::{self, OutBuf, check_out, get_mut, get_ref, read, str_arg, write};
use crate::rig::{c_names, clear_out, hand_out, sinew_rig};
use crate::solver::{sinew_reference_kind, sinew_root_mode, sinew_settings};
use crate::status::{FfiError, FfiResult, ffi_status, ffi_value, sinew_status};

/// One IK goal, as passed to `sinew_problem_add_goal` and read by `sinew_problem_get_goal`.
/// Start from `sinew_goal_default` and change what you need.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
#[allow(non_camel_case_types)]
pub struct sinew_goal {
    /// The effector bone's index.
    pub bone: usize,
    /// Where the effector point should go (armature space).
    pub target: [f64; 3],
    /// 1 if `orientation` applies, 0 if not.
    pub has_orientation: u32,
    /// Target armature-space rotation of the effector bone, `[w, x, y, z]` (normalised here).
    pub orientation: [f64; 4],
    /// Relative importance where goals compete, > 0 (default 1).
    pub weight: f64,
    /// How many bones, from the effector up, may move; 0 means up to the root (Blender's
    /// `chain_count`; default 0).
    pub chain_length: usize,
    /// 1 if `pole_target` and `pole_angle` apply, 0 if not.
    pub has_pole: u32,
    /// Pole target (armature space): the chain's bend plane turns to contain it.
    pub pole_target: [f64; 3],
    /// Extra rotation about the chain axis, radians.
    pub pole_angle: f64,
    /// 1 (default) pulls the bone's tail onto the target, 0 its head.
    pub use_tail: u32,
}

impl sinew_goal {
    fn default_goal() -> Self {
        Self::from_goal(&Goal::new(0, glam::DVec3::ZERO))
    }

    fn from_goal(g: &Goal) -> Self {
        Self {
            bone: g.bone,
            target: g.target.to_array(),
            has_orientation: u32::from(g.orientation.is_some()),
            orientation: args::wxyz(g.orientation.unwrap_or(glam::DQuat::IDENTITY)),
            weight: g.weight,
            chain_length: g.chain_length,
            has_pole: u32::from(g.pole.is_some()),
            pole_target: g.pole.map_or([0.0; 3], |p| p.target.to_array()),
            pole_angle: g.pole.map_or(0.0, |p| p.angle),
            use_tail: u32::from(g.use_tail),
        }
    }

    fn to_goal(self) -> FfiResult<Goal> {
        let has_orientation = args::flag(self.has_orientation, "goal has_orientation")?;
        let has_pole = args::flag(self.has_pole, "goal has_pole")?;
        let use_tail = args::flag(self.use_tail, "goal use_tail")?;
        Ok(Goal {
            bone: self.bone,
            target: args::vec3(self.target),
            orientation: has_orientation.then(|| args::quat_wxyz(&self.orientation)),
            weight: self.weight,
            chain_length: self.chain_length,
            pole: has_pole.then(|| Pole { target: args::vec3(self.pole_target), angle: self.pole_angle }),
            use_tail,
            // (Set other kinds with `sinew_problem_set_goal_kind`.)
            kind: sinew_core::GoalKind::Position,
        })
    }
}

/// A problem: a copy of a rig, its goals and root mode, the solver settings a JSON file asked
/// for (defaults otherwise) and a start pose (rest, or the file's `pose`).
///
/// **Ownership.** Created by `sinew_problem_new`, `sinew_problem_from_json` or
/// `sinew_problem_load_file`; owned by the caller, who releases it with `sinew_problem_free`
/// exactly once.
///
/// **Threads.** A problem may be moved between threads. Functions taking
/// `const sinew_problem *`, solving included, may run concurrently on one problem (so several
/// threads, each with its own solver, can solve one problem at once); a function taking
/// `sinew_problem *` (adding goals, moving targets, ...) must not run concurrently with any
/// other call on the same problem.
#[derive(Debug, Clone)]
#[allow(non_camel_case_types)]
pub struct sinew_problem {
    pub(crate) problem: Problem,
    pub(crate) names: Vec<CString>,
    pub(crate) method: Method,
    pub(crate) settings: SolveSettings,
    pub(crate) start: Pose,
}

impl sinew_problem {
    fn from_loaded(lp: LoadedProblem) -> FfiResult<Self> {
        let names = c_names(lp.problem.rig())?;
        Ok(Self { problem: lp.problem, names, method: lp.method, settings: lp.settings, start: lp.pose })
    }

    /// Rebuilds the problem with other goals or another rig (goals are revalidated). The
    /// reference is kept, except that a reference pose becomes the rest pose when the bone
    /// count changes (as the start pose does).
    fn rebuild(&mut self, rig: sinew_core::Rig, goals: Vec<Goal>) -> FfiResult<()> {
        let n = rig.len();
        let reference = match self.problem.reference() {
            Reference::Pose(r) if r.rotations.len() != n => Reference::Rest,
            other => other.clone(),
        };
        let mut problem = Problem::new(rig, goals, self.problem.root())?;
        problem.set_reference(reference)?;
        self.problem = problem;
        if self.start.rotations.len() != n {
            self.start = Pose::rest(n);
        }
        Ok(())
    }
}

/// Parses and validates JSON problem text. Unknown bone names (a goal's effector, a parent)
/// are reported as such before the core sees them.
pub(crate) fn load_json(text: &str) -> FfiResult<LoadedProblem> {
    let file = ProblemFile::from_json(text)?;
    // A set, so that checking every name is linear in the number of bones.
    let names: std::collections::HashSet<&str> = file.bones.iter().map(|b| b.name.as_str()).collect();
    let known = |name: &str| names.contains(name);
    for b in &file.bones {
        if let Some(p) = &b.parent
            && !known(p) {
                return Err(FfiError::new(
                    sinew_status::UnknownBone,
                    format!("bone \"{}\": unknown parent bone \"{p}\"", b.name),
                ));
            }
    }
    for (i, g) in file.goals.iter().enumerate() {
        if !known(&g.bone) {
            return Err(FfiError::new(sinew_status::UnknownBone, format!("goal {i}: unknown bone \"{}\"", g.bone)));
        }
    }
    Ok(file.load()?)
}

fn goal_count_error(i: usize, n: usize) -> FfiError {
    FfiError::new(sinew_status::InvalidGoal, format!("goal {i}: no such goal ({n} goals)"))
}

/// Fills `*out_goal` with the defaults: bone 0, target at the origin, no orientation, weight 1,
/// chain length 0 (to the root), no pole, `use_tail = 1`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_goal_default(out_goal: *mut sinew_goal) -> sinew_status {
    ffi_status!({
        // SAFETY: writable by contract.
        unsafe { write(out_goal, sinew_goal::default_goal(), "out_goal") }
    })
}

/// Creates a problem on a copy of `rig`, with no goals yet, default settings and the rest pose
/// as start pose. `root_mode` is a `sinew_root_mode` (`SINEW_ROOT_MODE_PINNED` keeps bone 0's
/// head where the start pose puts it; `SINEW_ROOT_MODE_FREE` lets it translate).
///
/// On success `*out_problem` receives a new problem (free it with `sinew_problem_free`); on
/// failure it is set to NULL.
///
/// Errors: `NULL_ARGUMENT`, `INVALID_ARGUMENT` (unknown root mode).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_new(
    rig: *const sinew_rig,
    root_mode: u32,
    out_problem: *mut *mut sinew_problem,
) -> sinew_status {
    ffi_status!({
        clear_out(out_problem, "out_problem")?;
        // SAFETY: a live rig by contract.
        let rig = unsafe { get_ref(rig, "rig") }?;
        let root = sinew_root_mode::parse(root_mode)?;
        let n = rig.rig.len();
        let problem = Problem::new(rig.rig.clone(), Vec::new(), root)?;
        let p = sinew_problem {
            problem,
            names: rig.names.clone(),
            method: Method::default(),
            settings: SolveSettings::default(),
            start: Pose::rest(n),
        };
        hand_out(out_problem, p)
    })
}

/// Creates a problem from JSON problem text (`"format": "sinew.problem/1"`; see the README):
/// rig, limits, goals, root mode, solver settings (read them with `sinew_problem_settings`) and
/// optional start pose.
///
/// `json` is NUL-terminated UTF-8. On success `*out_problem` receives a new problem (free it with
/// `sinew_problem_free`); on failure it is set to NULL and the message says what is wrong (for
/// malformed JSON with line and column).
///
/// Errors: `NULL_ARGUMENT`, `INVALID_ARGUMENT` (not UTF-8), `PARSE_ERROR`, `UNKNOWN_BONE`,
/// `LIMIT_OUT_OF_RANGE`, `INVALID_RIG`, `INVALID_GOAL`, `INVALID_SETTING`, `NON_FINITE`,
/// `SHAPE_MISMATCH` (a start pose with the wrong number of rotations).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_from_json(
    json: *const c_char,
    out_problem: *mut *mut sinew_problem,
) -> sinew_status {
    ffi_status!({
        clear_out(out_problem, "out_problem")?;
        // SAFETY: NUL-terminated by contract.
        let text = unsafe { str_arg(json, "json") }?;
        hand_out(out_problem, sinew_problem::from_loaded(load_json(text)?)?)
    })
}

/// As `sinew_problem_from_json`, reading the JSON from the file at `path` (NUL-terminated UTF-8).
///
/// Errors: as `sinew_problem_from_json`, plus `IO_ERROR` when the file cannot be read
/// (`PARSE_ERROR` if it is not UTF-8). Messages start with the path.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_load_file(
    path: *const c_char,
    out_problem: *mut *mut sinew_problem,
) -> sinew_status {
    ffi_status!({
        clear_out(out_problem, "out_problem")?;
        // SAFETY: NUL-terminated by contract.
        let path = unsafe { str_arg(path, "path") }?;
        let bytes = std::fs::read(path)
            .map_err(|e| FfiError::new(sinew_status::IoError, format!("{path}: cannot read: {e}")))?;
        let text = String::from_utf8(bytes)
            .map_err(|e| FfiError::new(sinew_status::ParseError, format!("{path}: not UTF-8: {e}")))?;
        let loaded = load_json(&text).map_err(|e| FfiError::new(e.status, format!("{path}: {}", e.message)))?;
        hand_out(out_problem, sinew_problem::from_loaded(loaded)?)
    })
}

/// Frees a problem. `NULL` is a no-op. The pointer must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_free(problem: *mut sinew_problem) {
    ffi_value!((), {
        if !problem.is_null() && problem.is_aligned() {
            // SAFETY: made by `Box::into_raw` here and freed once (contract).
            drop(unsafe { Box::from_raw(problem) });
        }
    })
}

/// Writes to `*out_rig` a new copy of the problem's rig (free it with `sinew_rig_free`). Change
/// its limits and hand it back with `sinew_problem_set_rig`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_rig(problem: *const sinew_problem, out_rig: *mut *mut sinew_rig) -> sinew_status {
    ffi_status!({
        clear_out(out_rig, "out_rig")?;
        // SAFETY: a live problem by contract.
        let p = unsafe { get_ref(problem, "problem") }?;
        hand_out(out_rig, sinew_rig { rig: p.problem.rig().clone(), names: p.names.clone() })
    })
}

/// Replaces the problem's rig with a copy of `rig` (e.g. with other limits), keeping the goals,
/// which are checked against it again. If the bone count changes, the start pose becomes the
/// rest pose. On error the problem is unchanged.
///
/// Errors: `NULL_ARGUMENT`, `INVALID_GOAL` (a goal's bone is not in the new rig).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_set_rig(problem: *mut sinew_problem, rig: *const sinew_rig) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig and a live problem, not used elsewhere during the call (contract);
        // they are distinct objects since they have distinct types.
        let rig = unsafe { get_ref(rig, "rig") }?;
        let p = unsafe { get_mut(problem, "problem") }?;
        let goals = p.problem.goals().to_vec();
        let mut next = p.clone();
        next.rebuild(rig.rig.clone(), goals)?;
        next.names = rig.names.clone();
        *p = next;
        Ok(())
    })
}

/// Writes the number of bones to `*out_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_bone_count(problem: *const sinew_problem, out_count: *mut usize) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem; writable output (contract).
        let p = unsafe { get_ref(problem, "problem") }?;
        unsafe { write(out_count, p.problem.rig().len(), "out_count") }
    })
}

/// Writes to `*out_name` bone `bone`'s name (NUL-terminated UTF-8). The string belongs to the
/// problem: it stays valid until the problem is freed or its rig replaced; do not free it.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_bone_name(
    problem: *const sinew_problem,
    bone: usize,
    out_name: *mut *const c_char,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem by contract.
        let p = unsafe { get_ref(problem, "problem") }?;
        check_out(out_name, "out_name")?;
        let i = args::bone_index(p.problem.rig(), bone)?;
        // SAFETY: checked; writable by contract.
        unsafe { write(out_name, p.names[i].as_ptr(), "out_name") }
    })
}

/// Writes the number of goals to `*out_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_goal_count(problem: *const sinew_problem, out_count: *mut usize) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem; writable output (contract).
        let p = unsafe { get_ref(problem, "problem") }?;
        unsafe { write(out_count, p.problem.goals().len(), "out_count") }
    })
}

/// Appends a goal (copied from `*goal`) and writes its index to `*out_index` (may be NULL).
/// On error the problem is unchanged.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `INVALID_ARGUMENT` (a flag other than 0 or 1),
/// `INVALID_GOAL` (bone out of range, non-finite target, zero orientation, weight outside
/// [1e-12, 1e12], a target or pole beyond 1e12 rig units, more than 256 goals moving bones in common or
/// 65,536 in all, ...).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_add_goal(
    problem: *mut sinew_problem,
    goal: *const sinew_goal,
    out_index: *mut usize,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem (exclusive) and a readable goal by contract.
        let p = unsafe { get_mut(problem, "problem") }?;
        let goal = unsafe { read(goal, "goal") }?.to_goal()?;
        if !out_index.is_null() {
            check_out(out_index, "out_index")?;
        }
        let mut goals = p.problem.goals().to_vec();
        goals.push(goal);
        let index = goals.len() - 1;
        let rig = p.problem.rig().clone();
        p.rebuild(rig, goals)?;
        if !out_index.is_null() {
            // SAFETY: checked; writable by contract.
            unsafe { write(out_index, index, "out_index") }?;
        }
        Ok(())
    })
}

/// Removes every goal.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_clear_goals(problem: *mut sinew_problem) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem, exclusive (contract).
        let p = unsafe { get_mut(problem, "problem") }?;
        let rig = p.problem.rig().clone();
        p.rebuild(rig, Vec::new())
    })
}

/// Copies goal `index` into `*out_goal`.
///
/// Errors: `NULL_ARGUMENT`, `INVALID_GOAL` (no such goal).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_get_goal(
    problem: *const sinew_problem,
    index: usize,
    out_goal: *mut sinew_goal,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem by contract.
        let p = unsafe { get_ref(problem, "problem") }?;
        check_out(out_goal, "out_goal")?;
        let goals = p.problem.goals();
        let g = goals.get(index).ok_or_else(|| goal_count_error(index, goals.len()))?;
        // SAFETY: checked; writable by contract.
        unsafe { write(out_goal, sinew_goal::from_goal(g), "out_goal") }
    })
}

/// Moves goal `index`'s target to `target` (3 doubles, armature space). Cheap: use it every
/// frame. On error nothing changes.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `INVALID_GOAL` (no such goal, non-finite).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_set_target(
    problem: *mut sinew_problem,
    index: usize,
    target: *const f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem (exclusive) and 3 doubles by contract.
        let p = unsafe { get_mut(problem, "problem") }?;
        let t = unsafe { args::read_array::<3>(target, "target") }?;
        p.problem.set_target(index, args::vec3(t))?;
        Ok(())
    })
}

/// Sets goal `index`'s target orientation to `orientation_wxyz` (4 doubles `[w, x, y, z]`,
/// armature space, normalised here), or removes it when `orientation_wxyz` is NULL.
///
/// Errors: `MISALIGNED_POINTER`, `NULL_ARGUMENT` (problem), `INVALID_GOAL`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_set_orientation(
    problem: *mut sinew_problem,
    index: usize,
    orientation_wxyz: *const f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem (exclusive) and NULL or 4 doubles by contract.
        let p = unsafe { get_mut(problem, "problem") }?;
        let q = if orientation_wxyz.is_null() {
            None
        } else {
            Some(args::quat_wxyz(&unsafe { args::read_array::<4>(orientation_wxyz, "orientation_wxyz") }?))
        };
        p.problem.set_orientation(index, q)?;
        Ok(())
    })
}

/// Goal kinds, for `sinew_problem_set_goal_kind` (since ABI 0.5; Jack's goal kinds, see
/// `docs/format.md`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub enum sinew_goal_kind {
    /// The effector point on the target (every goal's kind until set otherwise).
    Position = 0,
    /// Only the orientation counts (the goal must have one).
    Orientation = 1,
    /// The bone's local axis (`vector`) points from its head at the target; no orientation.
    Aim = 2,
    /// The effector point on the line through the target along `vector`.
    Line = 3,
    /// The effector point on the plane through the target with normal `vector`.
    Plane = 4,
    /// The effector point on the side of that plane `vector` points to, or on it.
    HalfSpace = 5,
}

/// Sets goal `index`'s kind (a `sinew_goal_kind` value) with `vector` (3 doubles: an aim's bone
/// axis, a line's direction, a plane's or half-space's normal; any nonzero length; ignored,
/// and may be NULL, for `SINEW_GOAL_KIND_POSITION` and `SINEW_GOAL_KIND_ORIENTATION`). Every goal
/// is a position goal until this is called; `sinew_problem_get_goal_kind` reads it back. On
/// error nothing changes. Since ABI 0.5.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `INVALID_GOAL` (no such goal, an unknown
/// kind, a zero or non-finite vector, an orientation kind on a goal without orientation, an
/// aim on a goal with one).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_set_goal_kind(problem: *mut sinew_problem, index: usize, kind: u32, vector: *const f64) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem (exclusive) and NULL or 3 doubles by contract.
        let p = unsafe { get_mut(problem, "problem") }?;
        let name = *sinew_core::GoalKind::NAMES.get(kind as usize).ok_or_else(|| sinew_core::Error::BadGoal {
            goal: index,
            reason: format!("goal kind {kind} is not a sinew_goal_kind (0 to {})", sinew_core::GoalKind::NAMES.len() - 1),
        })?;
        let v = if kind <= sinew_goal_kind::Orientation as u32 && vector.is_null() {
            glam::DVec3::ZERO
        } else {
            args::vec3(unsafe { args::read_array::<3>(vector, "vector") }?)
        };
        let kind = sinew_core::GoalKind::from_name(name, v).expect("a name from GoalKind::NAMES");
        p.problem.set_kind(index, kind)?;
        Ok(())
    })
}

/// Writes goal `index`'s kind (a `sinew_goal_kind` value) to `*out_kind` and its vector (unit
/// length; zeros for a position or orientation goal) to `out_vector` (3 doubles; may be NULL).
/// Since ABI 0.5.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `INVALID_GOAL` (no such goal).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_get_goal_kind(problem: *const sinew_problem, index: usize, out_kind: *mut u32, out_vector: *mut f64) -> sinew_status {
    ffi_status!({
        check_out(out_kind, "out_kind")?;
        // SAFETY: NULL, or 3 writable doubles by contract.
        let vector = if out_vector.is_null() { None } else { Some(unsafe { OutBuf::new(out_vector, 3, 3, "out_vector") }?) };
        // SAFETY: a live problem by contract.
        let p = unsafe { get_ref(problem, "problem") }?;
        let goals = p.problem.goals();
        let g = goals.get(index).ok_or_else(|| goal_count_error(index, goals.len()))?;
        // SAFETY: checked; writable by contract.
        unsafe { write(out_kind, g.kind.index() as u32, "out_kind") }?;
        if let Some(out) = vector {
            out.set_all(0, g.kind.vector().unwrap_or_default().to_array());
        }
        Ok(())
    })
}

/// Moves goal `index`'s pole target to `pole_target` (3 doubles). The goal must have a pole.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `INVALID_GOAL` (no such goal, no pole,
/// non-finite).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_set_pole_target(
    problem: *mut sinew_problem,
    index: usize,
    pole_target: *const f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem (exclusive) and 3 doubles by contract.
        let p = unsafe { get_mut(problem, "problem") }?;
        let t = unsafe { args::read_array::<3>(pole_target, "pole_target") }?;
        p.problem.set_pole_target(index, args::vec3(t))?;
        Ok(())
    })
}

/// Writes the solver settings the problem's JSON asked for (defaults for a problem made with
/// `sinew_problem_new`) to `*out_settings`; pass them to `sinew_solver_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_settings(
    problem: *const sinew_problem,
    out_settings: *mut sinew_settings,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem; writable output (contract).
        let p = unsafe { get_ref(problem, "problem") }?;
        unsafe { write(out_settings, sinew_settings::from_core(p.method, p.settings), "out_settings") }
    })
}

/// Copies the problem's start pose (the JSON's `pose`, or the rest pose): N quaternions
/// `[w, x, y, z]` into `out_rotations` (at least 4·N doubles; `out_rotations_len` is its length
/// in doubles) and bone 0's translation into `out_root_translation` (3 doubles; may be NULL).
/// Solving with NULL start arrays starts from this pose.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `BUFFER_TOO_SMALL`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_start_pose(
    problem: *const sinew_problem,
    out_rotations: *mut f64,
    out_rotations_len: usize,
    out_root_translation: *mut f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem; output buffers of the stated sizes (contract).
        let p = unsafe { get_ref(problem, "problem") }?;
        let n = p.problem.rig().len();
        let rot = unsafe { OutBuf::new(out_rotations, out_rotations_len, args::mul(n, 4, "rotations")?, "out_rotations") }?;
        let root = if out_root_translation.is_null() {
            None
        } else {
            Some(unsafe { OutBuf::new(out_root_translation, 3, 3, "out_root_translation") }?)
        };
        for (i, q) in p.start.rotations.iter().enumerate() {
            rot.set_all(4 * i, args::wxyz(*q));
        }
        if let Some(root) = root {
            root.set_all(0, p.start.root_translation.to_array());
        }
        Ok(())
    })
}

/// Sets the problem's reference pose: where the freedom the goals leave falls back to. Among
/// the poses that meet the goals, a solve returns one near it (a spine shares its bend as the
/// reference does, a limb keeps its bend plane, no bone twists unless a goal or pole asks). In a
/// DCC it is the pose before IK: the keyed animation at the frame being solved.
///
/// `rotations` holds N quaternions `[w, x, y, z]` (local to each bone's rest frame, as the start
/// pose; normalised here) and `rotations_len` must be 4·N; `root_translation` is NULL (zero) or
/// 3 doubles (bone 0's translation, used with `SINEW_ROOT_MODE_FREE`). Pass `rotations` = NULL
/// (with `rotations_len` = 0 and `root_translation` = NULL) to clear it: the reference is then
/// the rest pose, the default (`SINEW_REFERENCE_KIND_REST`); `sinew_problem_set_reference_kind`
/// asks for none. A problem from JSON has the file's `"reference"` (the rest pose when absent).
///
/// The reference survives `sinew_problem_add_goal`, `sinew_problem_clear_goals` and
/// `sinew_problem_set_rig` with the same bone count; a rig with another bone count makes a
/// reference pose the rest pose.
/// On error the problem is unchanged.
///
/// Errors: `NULL_ARGUMENT` (problem; or `rotations` NULL with a non-zero length or a
/// translation), `MISALIGNED_POINTER`, `SHAPE_MISMATCH` (`rotations_len` ≠ 4·N), `NON_FINITE`
/// (a NaN or zero quaternion, a NaN translation), `INVALID_ARGUMENT` (sizes that overflow).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_set_reference(
    problem: *mut sinew_problem,
    rotations: *const f64,
    rotations_len: usize,
    root_translation: *const f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem (exclusive), NULL or `rotations_len` doubles at `rotations`,
        // NULL or 3 doubles at `root_translation` (contract).
        let p = unsafe { get_mut(problem, "problem") }?;
        if rotations.is_null() {
            if rotations_len != 0 {
                return Err(FfiError::new(sinew_status::NullArgument, "rotations is NULL but rotations_len is not 0"));
            }
            if !root_translation.is_null() {
                return Err(FfiError::new(
                    sinew_status::NullArgument,
                    "rotations is NULL (restore the rest pose as the reference) but root_translation is not",
                ));
            }
            p.problem.set_reference(Reference::Rest)?;
            return Ok(());
        }
        let n = p.problem.rig().len();
        let r = unsafe { args::copy_exact(rotations, rotations_len, args::mul(n, 4, "rotations")?, "rotations") }?;
        let root = if root_translation.is_null() {
            glam::DVec3::ZERO
        } else {
            args::vec3(unsafe { args::read_array::<3>(root_translation, "root_translation") }?)
        };
        let pose = Pose { rotations: r.chunks_exact(4).map(args::quat_wxyz).collect(), root_translation: root, scales: Vec::new() };
        p.problem.set_reference(Reference::Pose(pose))?;
        Ok(())
    })
}

/// Sets what the problem's freedom falls back to: `kind` is `SINEW_REFERENCE_KIND_REST` (the
/// rest pose, the default) or `SINEW_REFERENCE_KIND_LEAST_MOTION` (no reference: each method's
/// answer is where its steps lead from the start; for `fabrik` and `dls` near the least joint
/// motion, in a few iterations, as a game loop tracking from the last answer may want). A pose
/// is set with `sinew_problem_set_reference`. On error the problem is unchanged.
///
/// Errors: `NULL_ARGUMENT`, `INVALID_ARGUMENT` (`SINEW_REFERENCE_KIND_POSE`, or a value that is
/// not a `sinew_reference_kind`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_set_reference_kind(problem: *mut sinew_problem, kind: u32) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem (exclusive) (contract).
        let p = unsafe { get_mut(problem, "problem") }?;
        let reference = match sinew_reference_kind::parse(kind)? {
            sinew_reference_kind::Rest => Reference::Rest,
            sinew_reference_kind::LeastMotion => Reference::LeastMotion,
            sinew_reference_kind::Pose => {
                return Err(FfiError::new(
                    sinew_status::InvalidArgument,
                    "SINEW_REFERENCE_KIND_POSE is set by giving the pose: call sinew_problem_set_reference",
                ));
            }
        };
        p.problem.set_reference(reference)?;
        Ok(())
    })
}

/// Writes to `*out_kind` what the problem's freedom falls back to (a `sinew_reference_kind`):
/// the rest pose, a pose given with `sinew_problem_set_reference`, or none.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_reference_kind(problem: *const sinew_problem, out_kind: *mut u32) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem; `out_kind` writable (contract).
        let p = unsafe { get_ref(problem, "problem") }?;
        check_out(out_kind, "out_kind")?;
        let kind = match p.problem.reference() {
            Reference::Rest => sinew_reference_kind::Rest,
            Reference::Pose(_) => sinew_reference_kind::Pose,
            Reference::LeastMotion => sinew_reference_kind::LeastMotion,
        };
        // SAFETY: checked; writable by contract.
        unsafe { write(out_kind, kind as u32, "out_kind") }
    })
}

/// Copies the problem's reference pose (see `sinew_problem_set_reference`) into
/// `out_rotations` (at least 4·N doubles; `out_rotations_len` is its length in doubles) and
/// `out_root_translation` (3 doubles; may be NULL), and writes to `*out_has_reference` whether
/// a pose is set (1) or not (0: the reference is the rest pose or none, see
/// `sinew_problem_reference_kind`; the buffers then receive the rest pose: identity rotations
/// and a zero translation, though `SINEW_REFERENCE_KIND_REST` keeps the start's root
/// translation, so give that one back with a free root, not the zero). `out_rotations` may be NULL with length 0 to ask
/// only whether there is one.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `BUFFER_TOO_SMALL`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_problem_reference(
    problem: *const sinew_problem,
    out_rotations: *mut f64,
    out_rotations_len: usize,
    out_root_translation: *mut f64,
    out_has_reference: *mut bool,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live problem; output buffers of the stated sizes (contract).
        let p = unsafe { get_ref(problem, "problem") }?;
        check_out(out_has_reference, "out_has_reference")?;
        let n = p.problem.rig().len();
        let rot = if out_rotations.is_null() && out_rotations_len == 0 {
            None
        } else {
            Some(unsafe { OutBuf::new(out_rotations, out_rotations_len, args::mul(n, 4, "rotations")?, "out_rotations") }?)
        };
        let root = if out_root_translation.is_null() {
            None
        } else {
            Some(unsafe { OutBuf::new(out_root_translation, 3, 3, "out_root_translation") }?)
        };
        let rest = Pose::rest(n);
        let reference = p.problem.reference();
        let pose = reference.pose().unwrap_or(&rest);
        if let Some(rot) = rot {
            for (i, q) in pose.rotations.iter().enumerate() {
                rot.set_all(4 * i, args::wxyz(*q));
            }
        }
        if let Some(root) = root {
            root.set_all(0, pose.root_translation.to_array());
        }
        // SAFETY: checked; writable by contract.
        unsafe { write(out_has_reference, reference.pose().is_some(), "out_has_reference") }
    })
}

impl sinew_root_mode {
    fn parse(v: u32) -> FfiResult<RootMode> {
        match v {
            0 => Ok(RootMode::Pinned),
            1 => Ok(RootMode::Free),
            _ => Err(FfiError::new(sinew_status::InvalidArgument, format!("root_mode {v} is not a sinew_root_mode"))),
        }
    }
}

impl sinew_reference_kind {
    fn parse(v: u32) -> FfiResult<Self> {
        match v {
            0 => Ok(Self::Rest),
            1 => Ok(Self::Pose),
            2 => Ok(Self::LeastMotion),
            _ => Err(FfiError::new(sinew_status::InvalidArgument, format!("kind {v} is not a sinew_reference_kind"))),
        }
    }
}
