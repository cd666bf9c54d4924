//! `sinew_rig`: bones, rest transforms and joint limits.

use std::ffi::{CString, c_char};

use glam::DVec3;
use sinew_core::{ConeLimit, HingeLimit, JointLimit, Rig, Swing, TwistLimit};

use crate::args::{self, check_out, copy_exact, copy_slice, get_mut, get_ref, str_arg, write};
use crate::problem::load_json;
use crate::status::{FfiError, FfiResult, ffi_status, ffi_value, sinew_status};

/// A rig: bones in parent-before-child order with their rest transforms, lengths and joint
/// limits.
///
/// **Ownership.** Created by `sinew_rig_new`, `sinew_rig_from_json` or `sinew_problem_rig`;
/// owned by the caller, who releases it with `sinew_rig_free` exactly once. A problem made from
/// a rig copies it, so the rig may be freed or changed afterwards without affecting the problem.
///
/// **Threads.** A rig may be moved between threads. Functions taking `const sinew_rig *` may run
/// concurrently on one rig; a function taking `sinew_rig *` (the limit setters) must not run
/// concurrently with any other call on the same rig.
#[derive(Debug, Clone)]
#[allow(non_camel_case_types)]
pub struct sinew_rig {
    pub(crate) rig: Rig,
    pub(crate) names: Vec<CString>,
}

impl sinew_rig {
    pub(crate) fn new(rig: Rig) -> FfiResult<Self> {
        let names = c_names(&rig)?;
        Ok(Self { rig, names })
    }

    fn set_limit(&mut self, bone: usize, f: impl FnOnce(&mut JointLimit)) -> FfiResult<()> {
        let i = args::bone_index(&self.rig, bone)?;
        let mut limit = self.rig.bone(i).limit;
        f(&mut limit);
        // Validates the whole limit; the rig is unchanged on error.
        self.rig.set_limit(i, limit)?;
        Ok(())
    }
}

/// The bone names as C strings (a name with an interior NUL cannot be one).
pub(crate) fn c_names(rig: &Rig) -> FfiResult<Vec<CString>> {
    rig.bones()
        .iter()
        .map(|b| {
            CString::new(b.name.as_str()).map_err(|_| {
                FfiError::new(sinew_status::InvalidRig, format!("bone name {:?} contains a NUL character", b.name))
            })
        })
        .collect()
}

/// Stores a new handle in `*out`.
pub(crate) fn hand_out<T>(out: *mut *mut T, value: T) -> FfiResult<()> {
    // SAFETY: `out` was checked by `check_out` at the start of every caller and is writable by
    // the caller's contract.
    unsafe { write(out, Box::into_raw(Box::new(value)), "output handle") }
}

/// Sets a handle output to NULL as soon as it is known to be writable, so that it is NULL on
/// every failure.
pub(crate) fn clear_out<T>(out: *mut *mut T, what: &str) -> FfiResult<()> {
    check_out(out, what)?;
    // SAFETY: non-NULL, aligned (checked above); writable by the caller's contract.
    unsafe { out.write(std::ptr::null_mut()) };
    Ok(())
}

/// Creates a rig from arrays, as a DCC exports its skeleton.
///
/// - `names`: `names_len` NUL-terminated UTF-8 bone names, unique. `names_len` is the number of
///   bones, N.
/// - `parents`: N parent indices; a negative value (use -1) marks a root. A parent must come
///   before its child.
/// - `rest_matrices`: 16·N doubles: per bone its armature-space rest matrix (Blender's
///   `bone.matrix_local`), **row-major**, rigid (rotation and translation only). The bone lies
///   along its local +Y axis from its head (the matrix's translation).
/// - `lengths`: N bone lengths (head to tail), each > 0.
///
/// Every bone starts with no limit. On success `*out_rig` receives a new rig the caller must
/// free with `sinew_rig_free`; on failure it is set to NULL.
///
/// Every length is checked against the others before any array is read.
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `SHAPE_MISMATCH` (a length other than N, 16·N,
/// N), `INVALID_ARGUMENT` (a name that is not UTF-8, or a length too large to copy),
/// `INVALID_RIG`, `NON_FINITE` (also a position or length beyond 1e12 rig units).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_new(
    names: *const *const c_char,
    names_len: usize,
    parents: *const i64,
    parents_len: usize,
    rest_matrices: *const f64,
    rest_matrices_len: usize,
    lengths: *const f64,
    lengths_len: usize,
    out_rig: *mut *mut sinew_rig,
) -> sinew_status {
    ffi_status!({
        clear_out(out_rig, "out_rig")?;
        let n = names_len;
        // Every length against the others before any array is read: a wrong `names_len` must not
        // be trusted to copy (or allocate) anything.
        args::check_len_eq(parents_len, n, "parents")?;
        args::check_len_eq(rest_matrices_len, args::mul(n, 16, "rest_matrices")?, "rest_matrices")?;
        args::check_len_eq(lengths_len, n, "lengths")?;
        // SAFETY (all four): the caller passes each array with its length (header contract).
        let name_ptrs = unsafe { copy_slice(names, n, "names") }?;
        let parents = unsafe { copy_exact(parents, parents_len, n, "parents") }?;
        let rest = unsafe { copy_exact(rest_matrices, rest_matrices_len, args::mul(n, 16, "rest_matrices")?, "rest_matrices") }?;
        let lengths = unsafe { copy_exact(lengths, lengths_len, n, "lengths") }?;
        let mut owned = Vec::with_capacity(n);
        for (i, &p) in name_ptrs.iter().enumerate() {
            // SAFETY: each name is a NUL-terminated string by contract.
            owned.push(unsafe { str_arg(p, &format!("names[{i}]")) }?.to_owned());
        }
        let parents: Vec<Option<usize>> = parents.iter().map(|&p| usize::try_from(p).ok()).collect();
        let mats = args::mat4s_rows(&rest);
        let rig = Rig::from_matrices(&owned, &parents, &mats, &lengths)?;
        hand_out(out_rig, sinew_rig::new(rig)?)
    })
}

/// Creates a rig from the bones of a JSON problem text (`"format": "sinew.problem/1"`; see the
/// README). The whole text is validated, goals and settings included, but only the rig is kept.
///
/// `json` is NUL-terminated UTF-8. On success `*out_rig` receives a new rig (free it with
/// `sinew_rig_free`); on failure it is set to NULL.
///
/// Errors: `NULL_ARGUMENT`, `INVALID_ARGUMENT` (not UTF-8), `PARSE_ERROR` (with line and column
/// in the message), `UNKNOWN_BONE`, `LIMIT_OUT_OF_RANGE`, `INVALID_RIG`, `INVALID_GOAL`,
/// `INVALID_SETTING`, `NON_FINITE`, `SHAPE_MISMATCH` (a start pose with the wrong number of
/// rotations).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_from_json(json: *const c_char, out_rig: *mut *mut sinew_rig) -> sinew_status {
    ffi_status!({
        clear_out(out_rig, "out_rig")?;
        // SAFETY: NUL-terminated by contract.
        let text = unsafe { str_arg(json, "json") }?;
        let loaded = load_json(text)?;
        hand_out(out_rig, sinew_rig::new(loaded.problem.rig().clone())?)
    })
}

/// Frees a rig. `NULL` is a no-op. The pointer must not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_free(rig: *mut sinew_rig) {
    ffi_value!((), {
        if !rig.is_null() && rig.is_aligned() {
            // SAFETY: a non-NULL rig was made by `Box::into_raw` here and is freed once (contract).
            drop(unsafe { Box::from_raw(rig) });
        }
    })
}

/// Writes the number of bones to `*out_count`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_bone_count(rig: *const sinew_rig, out_count: *mut usize) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig by contract.
        let rig = unsafe { get_ref(rig, "rig") }?;
        // SAFETY: writable by contract.
        unsafe { write(out_count, rig.rig.len(), "out_count") }
    })
}

/// Writes to `*out_name` bone `bone`'s name, NUL-terminated UTF-8. The string belongs to the rig:
/// it stays valid until the rig is freed; do not free it.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE` (index out of range).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_bone_name(
    rig: *const sinew_rig,
    bone: usize,
    out_name: *mut *const c_char,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig by contract.
        let rig = unsafe { get_ref(rig, "rig") }?;
        check_out(out_name, "out_name")?;
        let i = args::bone_index(&rig.rig, bone)?;
        // SAFETY: checked above; writable by contract.
        unsafe { write(out_name, rig.names[i].as_ptr(), "out_name") }
    })
}

/// Writes to `*out_parent` the parent index of bone `bone`, or -1 for a root.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_bone_parent(rig: *const sinew_rig, bone: usize, out_parent: *mut i64) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig by contract.
        let rig = unsafe { get_ref(rig, "rig") }?;
        check_out(out_parent, "out_parent")?;
        let i = args::bone_index(&rig.rig, bone)?;
        let p = rig.rig.bone(i).parent.map_or(-1, |p| p as i64);
        // SAFETY: checked above; writable by contract.
        unsafe { write(out_parent, p, "out_parent") }
    })
}

/// Writes to `*out_index` the index of the bone called `name` (NUL-terminated UTF-8).
///
/// Errors: `NULL_ARGUMENT`, `INVALID_ARGUMENT` (not UTF-8), `UNKNOWN_BONE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_find_bone(
    rig: *const sinew_rig,
    name: *const c_char,
    out_index: *mut usize,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig and a NUL-terminated name by contract.
        let rig = unsafe { get_ref(rig, "rig") }?;
        let name = unsafe { str_arg(name, "name") }?;
        check_out(out_index, "out_index")?;
        let i = rig
            .rig
            .find(name)
            .ok_or_else(|| FfiError::new(sinew_status::UnknownBone, format!("unknown bone \"{name}\"")))?;
        // SAFETY: checked above; writable by contract.
        unsafe { write(out_index, i, "out_index") }
    })
}

/// Bounds bone `bone`'s swing by the irregular cone of FABRIK §3.7.2: the largest swing about
/// +X, −X, +Z and −Z of the bone's rest frame, radians, each in (0, π]. Swinging about +X tilts
/// the bone (local +Y) toward +Z; about +Z tilts it toward −X. Replaces a hinge; keeps twist,
/// lock and stiffness.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`, `LIMIT_OUT_OF_RANGE` (the rig is then unchanged).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_cone_limit(
    rig: *mut sinew_rig,
    bone: usize,
    x_pos: f64,
    x_neg: f64,
    z_pos: f64,
    z_neg: f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        rig.set_limit(bone, |l| l.swing = Swing::Cone(ConeLimit::new(x_pos, x_neg, z_pos, z_neg)))
    })
}

/// The cone of `sinew_rig_set_cone_limit` from Blender's pose-bone IK limits
/// (`ik_min_x ≤ 0 ≤ ik_max_x`, `ik_min_z ≤ 0 ≤ ik_max_z`, radians), as Blender's own solver reads
/// them: `x_pos = max_x, x_neg = -min_x, z_pos = max_z, z_neg = -min_z`, the quarter ellipses on
/// the swing quaternion's `(x, z)` with semi-axes `sin(angle / 2)` (Blender's `IK_QSwingSegment`;
/// `sinew_rig_set_cone_limit`'s are on the rotation vector), and a bound of ±π on one axis leaving
/// an interval on the other.
///
/// Errors: as `sinew_rig_set_cone_limit` (a zero range on an axis is out of range: lock the bone
/// or use a hinge instead).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_cone_limit_blender(
    rig: *mut sinew_rig,
    bone: usize,
    min_x: f64,
    max_x: f64,
    min_z: f64,
    max_z: f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        rig.set_limit(bone, |l| l.swing = Swing::Cone(ConeLimit::from_blender(min_x, max_x, min_z, max_z)))
    })
}

/// Makes bone `bone` a one-axis joint: its local rotation turns only about `axis` (3 doubles, a
/// non-zero vector in the bone's rest frame, normalised here; an elbow or knee is usually
/// `{1, 0, 0}`) by an angle in `[min, max]` radians within [-π, π]. Replaces a cone, and removes
/// a twist range (a hinge has one degree of freedom).
///
/// Errors: `NULL_ARGUMENT`, `MISALIGNED_POINTER`, `UNKNOWN_BONE`, `LIMIT_OUT_OF_RANGE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_hinge_limit(
    rig: *mut sinew_rig,
    bone: usize,
    axis: *const f64,
    min: f64,
    max: f64,
) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig (exclusive) and 3 doubles at `axis` (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        let axis: DVec3 = args::vec3(unsafe { args::read_array::<3>(axis, "axis") }?);
        // (A hinge has one degree of freedom: a twist range set before goes.)
        rig.set_limit(bone, |l| {
            l.swing = Swing::Hinge(HingeLimit { axis, min, max });
            l.twist = None;
        })
    })
}

/// Bounds bone `bone`'s twist about its own axis (local +Y) to `[min, max]` radians,
/// `-π ≤ min ≤ max ≤ π`. Keeps the swing limit, lock and stiffness.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`, `LIMIT_OUT_OF_RANGE` (also for a hinge, which takes
/// no twist range).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_twist_limit(rig: *mut sinew_rig, bone: usize, min: f64, max: f64) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        rig.set_limit(bone, |l| l.twist = Some(TwistLimit { min, max }))
    })
}

/// Locks (`locked = 1`) or unlocks (`0`) bone `bone`: a locked bone keeps the rotation it starts
/// each solve with.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`, `INVALID_ARGUMENT` (a flag other than 0 or 1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_locked(rig: *mut sinew_rig, bone: usize, locked: u32) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        let locked = args::flag(locked, "locked")?;
        rig.set_limit(bone, |l| l.locked = locked)
    })
}

/// Sets bone `bone`'s stiffness in [0, 1): 0 moves freely, near 1 barely moves (each solver step
/// moves the bone `1 - stiffness` of the way it wants to go).
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`, `LIMIT_OUT_OF_RANGE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_stiffness(rig: *mut sinew_rig, bone: usize, stiffness: f64) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        rig.set_limit(bone, |l| {
            l.stiffness = stiffness;
            l.stiffness_axes = None;
        })
    })
}

/// Sets bone `bone`'s stiffness per axis of its own frame, each in [0, 1) (Blender's
/// `ik_stiffness_x/y/z`): the damped-least-squares steps weight a turn about the bone's local
/// X, Y and Z by `1 - x`, `1 - y` and `1 - z`; FABRIK's own steps use the largest.
/// `sinew_rig_set_stiffness` sets all three to one value again. Since ABI 0.3.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`, `LIMIT_OUT_OF_RANGE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_stiffness_axes(rig: *mut sinew_rig, bone: usize, x: f64, y: f64, z: f64) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        rig.set_limit(bone, |l| {
            // The largest (NaN stays NaN, for validation to refuse).
            l.stiffness = if [x, y, z].iter().any(|v| v.is_nan()) { f64::NAN } else { x.max(y).max(z) };
            l.stiffness_axes = Some([x, y, z]);
        })
    })
}

/// Sets how readily bone `bone` changes length, in [0, 1], as Blender's `ik_stretch`: 0 (the
/// default) keeps it rigid; above 0 a solve may scale it along its own Y (its length, and its
/// children's offsets with it), weighted as Blender's IK weights its stretch, and the solution
/// then has a length scale per bone (`sinew_solver_scales`). `FABRIK`, `DLS` and the Jacobian
/// methods (5–8) stretch; `FABRIK_CLASSIC`, `CCD` and `TRIANGULATION` keep every length and
/// refuse a problem where a stretchy bone carries a goal (`SINEW_STATUS_UNSUPPORTED`). Since
/// ABI 0.4.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`, `LIMIT_OUT_OF_RANGE` (outside [0, 1], or NaN).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_set_stretch(rig: *mut sinew_rig, bone: usize, stretch: f64) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        rig.set_limit(bone, |l| l.stretch = stretch)
    })
}

/// Removes every limit of bone `bone` (free swing and twist, unlocked, no stiffness) and its
/// stretch.
///
/// Errors: `NULL_ARGUMENT`, `UNKNOWN_BONE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_rig_clear_limit(rig: *mut sinew_rig, bone: usize) -> sinew_status {
    ffi_status!({
        // SAFETY: a live rig, not used concurrently (contract).
        let rig = unsafe { get_mut(rig, "rig") }?;
        rig.set_limit(bone, |l| *l = JointLimit::FREE)
    })
}
