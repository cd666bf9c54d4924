//! Checked conversions of C arguments: NULL and misaligned pointers, lengths that overflow,
//! flags, strings. Everything here returns an [`FfiError`] instead of invoking undefined
//! behaviour on the inputs we can check; what cannot be checked (a dangling pointer, a buffer
//! shorter than the length claimed) is the caller's contract, stated in the header.

use std::ffi::{CStr, c_char};

use glam::{DMat4, DQuat, DVec3};

use crate::status::{FfiError, FfiResult, sinew_status};

/// Checks that `p` is non-NULL and aligned for `T`.
pub(crate) fn check_ptr<T>(p: *const T, what: &str) -> FfiResult<()> {
    if p.is_null() {
        return Err(FfiError::new(sinew_status::NullArgument, format!("{what} is NULL")));
    }
    if !p.is_aligned() {
        return Err(FfiError::new(
            sinew_status::MisalignedPointer,
            format!("{what} ({p:p}) is not aligned to {} bytes", std::mem::align_of::<T>()),
        ));
    }
    Ok(())
}

/// A shared reference to a caller-owned object.
///
/// # Safety
/// A non-NULL `p` must point to a live, initialised `T` that nothing mutates during the call.
pub(crate) unsafe fn get_ref<'a, T>(p: *const T, what: &str) -> FfiResult<&'a T> {
    check_ptr(p, what)?;
    // SAFETY: non-NULL and aligned (checked); live and initialised by the caller's contract.
    Ok(unsafe { &*p })
}

/// An exclusive reference to a caller-owned object.
///
/// # Safety
/// A non-NULL `p` must point to a live, initialised `T` not used by anyone else during the call.
pub(crate) unsafe fn get_mut<'a, T>(p: *mut T, what: &str) -> FfiResult<&'a mut T> {
    check_ptr(p, what)?;
    // SAFETY: as `get_ref`, plus exclusivity by contract.
    Ok(unsafe { &mut *p })
}

/// Reads a `T` the caller passed by pointer.
///
/// # Safety
/// As [`get_ref`].
pub(crate) unsafe fn read<T: Copy>(p: *const T, what: &str) -> FfiResult<T> {
    // SAFETY: forwarded contract.
    Ok(*unsafe { get_ref(p, what) }?)
}

fn check_len<T>(len: usize, what: &str) -> FfiResult<()> {
    if len.checked_mul(std::mem::size_of::<T>()).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(FfiError::new(sinew_status::InvalidArgument, format!("{what}: length {len} is too large")));
    }
    Ok(())
}

/// Copies `len` elements the caller passed as `(p, len)`. `len == 0` accepts any pointer,
/// NULL included.
///
/// # Safety
/// A non-NULL `p` with `len > 0` must point to `len` initialised `T`.
pub(crate) unsafe fn copy_slice<T: Copy>(p: *const T, len: usize, what: &str) -> FfiResult<Vec<T>> {
    if len == 0 {
        return Ok(Vec::new());
    }
    check_ptr(p, what)?;
    check_len::<T>(len, what)?;
    // The copy's memory is asked for without aborting on failure: a length the caller's buffer
    // cannot really hold is then an error, not the end of the host process.
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        FfiError::new(
            sinew_status::InvalidArgument,
            format!("{what}: length {len} is too large ({} bytes cannot be allocated)", len.saturating_mul(std::mem::size_of::<T>())),
        )
    })?;
    // SAFETY: non-NULL, aligned, size fits isize (checked); `len` initialised elements by contract.
    // The slice is copied at once and not kept, so an output buffer of the same call may alias it.
    out.extend_from_slice(unsafe { std::slice::from_raw_parts(p, len) });
    Ok(out)
}

/// Checks that an input array's length is exactly `expected` (before anything reads it).
pub(crate) fn check_len_eq(len: usize, expected: usize, what: &str) -> FfiResult<()> {
    if len != expected {
        return Err(FfiError::new(sinew_status::ShapeMismatch, format!("{what}: expected {expected} elements, got {len}")));
    }
    Ok(())
}

/// Like [`copy_slice`] but requires exactly `expected` elements.
///
/// # Safety
/// As [`copy_slice`].
pub(crate) unsafe fn copy_exact<T: Copy>(p: *const T, len: usize, expected: usize, what: &str) -> FfiResult<Vec<T>> {
    check_len_eq(len, expected, what)?;
    // SAFETY: forwarded contract.
    unsafe { copy_slice(p, len, what) }
}

/// A fixed-size array passed as a bare pointer (a point, a quaternion).
///
/// # Safety
/// A non-NULL `p` must point to `N` initialised `f64`.
pub(crate) unsafe fn read_array<const N: usize>(p: *const f64, what: &str) -> FfiResult<[f64; N]> {
    check_ptr(p, what)?;
    // SAFETY: non-NULL and aligned (checked); `N` doubles by contract. `[f64; N]` has the
    // alignment of `f64`.
    Ok(unsafe { p.cast::<[f64; N]>().read() })
}

/// A caller-provided output buffer of `len` elements, written element by element through the raw
/// pointer (no `&mut [T]` is formed, so overlapping buffers are not undefined behaviour).
#[derive(Debug)]
pub(crate) struct OutBuf<T> {
    ptr: *mut T,
    len: usize,
}

impl<T> OutBuf<T> {
    /// Checks the buffer holds at least `needed` elements.
    ///
    /// # Safety
    /// A non-NULL `p` must point to `len` writable `T`.
    pub(crate) unsafe fn new(p: *mut T, len: usize, needed: usize, what: &str) -> FfiResult<Self> {
        if needed > 0 {
            check_ptr(p, what)?;
        }
        if len < needed {
            return Err(FfiError::new(
                sinew_status::BufferTooSmall,
                format!("{what}: buffer holds {len} elements, {needed} needed"),
            ));
        }
        Ok(Self { ptr: p, len: needed })
    }

    /// Writes element `i` (< the `needed` given to [`OutBuf::new`]).
    pub(crate) fn set(&self, i: usize, v: T) {
        assert!(i < self.len, "output index {i} out of range {}", self.len);
        // SAFETY: `i < needed <= len` and the buffer is writable by `new`'s contract.
        unsafe { self.ptr.add(i).write(v) }
    }

    /// Writes `values` starting at element `start`.
    pub(crate) fn set_all(&self, start: usize, values: impl IntoIterator<Item = T>) {
        for (k, v) in values.into_iter().enumerate() {
            self.set(start + k, v);
        }
    }
}

/// Writes one value through an output pointer.
///
/// # Safety
/// A non-NULL `p` must point to writable memory for one `T`.
pub(crate) unsafe fn write<T>(p: *mut T, v: T, what: &str) -> FfiResult<()> {
    check_ptr(p, what)?;
    // SAFETY: non-NULL, aligned (checked); writable by contract. `write` drops nothing.
    unsafe { p.write(v) };
    Ok(())
}

/// Checks an output pointer before any work, so failures can't leave half-done results.
pub(crate) fn check_out<T>(p: *mut T, what: &str) -> FfiResult<()> {
    check_ptr(p.cast_const(), what)
}

/// A NUL-terminated UTF-8 string.
///
/// # Safety
/// A non-NULL `p` must point to a NUL-terminated string that stays valid during the call.
pub(crate) unsafe fn str_arg<'a>(p: *const c_char, what: &str) -> FfiResult<&'a str> {
    if p.is_null() {
        return Err(FfiError::new(sinew_status::NullArgument, format!("{what} is NULL")));
    }
    // SAFETY: non-NULL; NUL-terminated by contract. `c_char` has alignment 1.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|e| FfiError::new(sinew_status::InvalidArgument, format!("{what} is not UTF-8: {e}")))
}

/// A C flag: 0 or 1; anything else is rejected rather than guessed at.
pub(crate) fn flag(v: u32, what: &str) -> FfiResult<bool> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(FfiError::new(sinew_status::InvalidArgument, format!("{what} is {v}; a flag must be 0 or 1"))),
    }
}

/// `count * k`, or an error if it overflows.
pub(crate) fn mul(count: usize, k: usize, what: &str) -> FfiResult<usize> {
    count
        .checked_mul(k)
        .ok_or_else(|| FfiError::new(sinew_status::InvalidArgument, format!("{what}: size overflows")))
}

pub(crate) fn vec3(a: [f64; 3]) -> DVec3 {
    DVec3::from_array(a)
}

/// `[w, x, y, z]` to a quaternion, scaled exactly (by a power of two) when its components are so
/// large that normalising it would overflow (`sinew_core::problem::rescaled_quat`).
pub(crate) fn quat_wxyz(q: &[f64]) -> DQuat {
    sinew_core::problem::rescaled_quat(DQuat::from_xyzw(q[1], q[2], q[3], q[0]))
}

/// Row-major 4 × 4 matrices (16 doubles each, as the header's rest matrices) to glam's
/// column-major ones.
pub(crate) fn mat4s_rows(v: &[f64]) -> Vec<DMat4> {
    v.chunks_exact(16).map(|m| DMat4::from_cols_slice(m).transpose()).collect()
}

/// A quaternion to `[w, x, y, z]`.
pub(crate) fn wxyz(q: DQuat) -> [f64; 4] {
    [q.w, q.x, q.y, q.z]
}

/// Checks that a bone index is in range.
pub(crate) fn bone_index(rig: &sinew_core::Rig, bone: usize) -> FfiResult<usize> {
    if bone < rig.len() {
        Ok(bone)
    } else {
        Err(FfiError::new(
            sinew_status::UnknownBone,
            format!("unknown bone index {bone} (rig has {} bones)", rig.len()),
        ))
    }
}
