//! Status codes, the thread-local last-error message and the panic boundary.

use std::cell::RefCell;
use std::ffi::{CString, c_char};

use sinew_core::Error;

/// What every `sinew_*` function that can fail returns.
///
/// The numbers are part of the ABI: they never change, new codes are only appended. On any
/// status other than `SINEW_STATUS_OK` the calling thread's last-error message says what went
/// wrong (read it with `sinew_last_error_message`), and no output argument has been written
/// except that a handle output (`sinew_rig **out_rig`, ...) is set to NULL.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum sinew_status {
    /// Success.
    Ok = 0,
    /// A pointer argument that must not be NULL is NULL.
    NullArgument = 1,
    /// A pointer argument is not aligned for its type (e.g. a `double *` not 8-byte aligned).
    MisalignedPointer = 2,
    /// An argument is out of its domain: an unknown enum value, a flag other than 0 or 1, a
    /// string that is not UTF-8, an index out of range, a size that overflows.
    InvalidArgument = 3,
    /// Input arrays whose lengths must agree do not (e.g. 15 doubles for one 4×4 matrix).
    ShapeMismatch = 4,
    /// An output buffer is shorter than the result.
    BufferTooSmall = 5,
    /// JSON problem text is malformed (the message gives line and column) or structurally wrong.
    ParseError = 6,
    /// A file could not be read.
    IoError = 7,
    /// A bone name or index does not denote a bone of the rig.
    UnknownBone = 8,
    /// A joint-limit value is outside its range (cone half-angles in (0, π], twist and hinge
    /// angles in [-π, π] with min ≤ max, stiffness in [0, 1), non-zero hinge axis).
    LimitOutOfRange = 9,
    /// The bones do not form a valid rig (no bones, a parent not before its child, two bones with
    /// one name, a length that is not positive, a rest matrix with scale or shear).
    InvalidRig = 10,
    /// A goal is invalid (weight not positive, zero orientation, no such goal, ...).
    InvalidGoal = 11,
    /// A solver setting is invalid (unknown method, zero iterations, tolerance not positive).
    InvalidSetting = 12,
    /// A number that must be finite is NaN or infinite, or is beyond the magnitude Sinew
    /// supports for it (positions and bone lengths up to 1e12 rig units), or a solve produced a
    /// non-finite number (a bug, reported rather than returned).
    NonFinite = 13,
    /// A result was asked of a solver that has not solved anything yet.
    NoSolution = 14,
    /// The solve did not reach every goal (reserved: solving itself reports this through
    /// `sinew_solve_info.reached` and returns `SINEW_STATUS_OK`).
    NotConverged = 15,
    /// An error of the core this ABI version does not know (newer core than header).
    InternalError = 16,
    /// Sinew panicked. The panic was caught at the boundary; the message says where. The handles
    /// passed to the failing call are still safe to free.
    Panic = 17,
    /// The solver's method cannot honour something the problem asks for (e.g. triangulation
    /// given several goals or an orientation goal, or `CCD` a bone that stretches); the message
    /// names it. Another method
    /// (`SINEW_METHOD_FABRIK` takes every problem) solves it.
    Unsupported = 18,
}

impl sinew_status {
    /// Every status, in numeric order.
    pub(crate) const ALL: [sinew_status; 19] = [
        Self::Ok,
        Self::NullArgument,
        Self::MisalignedPointer,
        Self::InvalidArgument,
        Self::ShapeMismatch,
        Self::BufferTooSmall,
        Self::ParseError,
        Self::IoError,
        Self::UnknownBone,
        Self::LimitOutOfRange,
        Self::InvalidRig,
        Self::InvalidGoal,
        Self::InvalidSetting,
        Self::NonFinite,
        Self::NoSolution,
        Self::NotConverged,
        Self::InternalError,
        Self::Panic,
        Self::Unsupported,
    ];

    /// The status numbered `code`, if there is one (never a transmute).
    #[must_use]
    pub fn from_u32(code: u32) -> Option<Self> {
        Self::ALL.get(code as usize).copied()
    }

    /// The C enumerator's name, NUL-terminated.
    #[must_use]
    pub const fn name_cstr(self) -> &'static [u8] {
        match self {
            Self::Ok => b"SINEW_STATUS_OK\0",
            Self::NullArgument => b"SINEW_STATUS_NULL_ARGUMENT\0",
            Self::MisalignedPointer => b"SINEW_STATUS_MISALIGNED_POINTER\0",
            Self::InvalidArgument => b"SINEW_STATUS_INVALID_ARGUMENT\0",
            Self::ShapeMismatch => b"SINEW_STATUS_SHAPE_MISMATCH\0",
            Self::BufferTooSmall => b"SINEW_STATUS_BUFFER_TOO_SMALL\0",
            Self::ParseError => b"SINEW_STATUS_PARSE_ERROR\0",
            Self::IoError => b"SINEW_STATUS_IO_ERROR\0",
            Self::UnknownBone => b"SINEW_STATUS_UNKNOWN_BONE\0",
            Self::LimitOutOfRange => b"SINEW_STATUS_LIMIT_OUT_OF_RANGE\0",
            Self::InvalidRig => b"SINEW_STATUS_INVALID_RIG\0",
            Self::InvalidGoal => b"SINEW_STATUS_INVALID_GOAL\0",
            Self::InvalidSetting => b"SINEW_STATUS_INVALID_SETTING\0",
            Self::NonFinite => b"SINEW_STATUS_NON_FINITE\0",
            Self::NoSolution => b"SINEW_STATUS_NO_SOLUTION\0",
            Self::NotConverged => b"SINEW_STATUS_NOT_CONVERGED\0",
            Self::InternalError => b"SINEW_STATUS_INTERNAL_ERROR\0",
            Self::Panic => b"SINEW_STATUS_PANIC\0",
            Self::Unsupported => b"SINEW_STATUS_UNSUPPORTED\0",
        }
    }
}

/// A failure on its way to C: a status and the message for `sinew_last_error_message`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FfiError {
    pub(crate) status: sinew_status,
    pub(crate) message: String,
}

impl FfiError {
    pub(crate) fn new(status: sinew_status, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }
}

impl From<Error> for FfiError {
    fn from(e: Error) -> Self {
        let status = match &e {
            Error::EmptyRig
            | Error::BadBoneLength { .. }
            | Error::BadParent { .. }
            | Error::DuplicateName { .. }
            | Error::NotRigid { .. } => sinew_status::InvalidRig,
            Error::NonFinite { .. } | Error::TooLarge { .. } => sinew_status::NonFinite,
            Error::UnknownBone { .. } => sinew_status::UnknownBone,
            Error::LimitOutOfRange { .. } => sinew_status::LimitOutOfRange,
            Error::BadGoal { .. } => sinew_status::InvalidGoal,
            Error::ShapeMismatch { .. } => sinew_status::ShapeMismatch,
            Error::BadSetting { .. } | Error::UnknownMethod { .. } => sinew_status::InvalidSetting,
            Error::Format(_) => sinew_status::ParseError,
            Error::NotConverged { .. } => sinew_status::NotConverged,
            Error::Unsupported { .. } => sinew_status::Unsupported,
            _ => sinew_status::InternalError,
        };
        Self { status, message: e.to_string() }
    }
}

pub(crate) type FfiResult<T> = Result<T, FfiError>;

thread_local! {
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

pub(crate) fn set_last_error(message: &str) {
    // Interior NULs would truncate the C string; show them instead.
    let c = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = Some(c));
}

pub(crate) fn clear_last_error() {
    let _ = LAST_ERROR.try_with(|slot| *slot.borrow_mut() = None);
}

/// Turns a body's result into a status, recording or clearing the last error.
pub(crate) fn finish(result: std::thread::Result<FfiResult<()>>) -> sinew_status {
    match result {
        Ok(Ok(())) => {
            clear_last_error();
            sinew_status::Ok
        }
        Ok(Err(e)) => {
            set_last_error(&e.message);
            e.status
        }
        Err(payload) => {
            set_last_error(&format!("internal error (panic): {}", panic_message(payload.as_ref())));
            sinew_status::Panic
        }
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

/// The body of an exported function that returns a [`sinew_status`]: runs `$body` (a block
/// evaluating to `FfiResult<()>`) under `catch_unwind`, so a panic never crosses into C (it
/// would abort the host, e.g. a whole Blender or Maya session). On success the calling
/// thread's last error is cleared; on failure it is set.
macro_rules! ffi_status {
    ($body:block) => {{
        let result = ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(
            || -> $crate::status::FfiResult<()> { $body },
        ));
        $crate::status::finish(result)
    }};
}

/// The body of an exported function that returns a plain value: `$default` if `$body` panics
/// (the message is still recorded).
macro_rules! ffi_value {
    ($default:expr, $body:block) => {{
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| $body)) {
            Ok(v) => v,
            Err(payload) => {
                $crate::status::set_last_error(&format!(
                    "internal error (panic): {}",
                    $crate::status::panic_message(payload.as_ref())
                ));
                $default
            }
        }
    }};
}

pub(crate) use {ffi_status, ffi_value};

/// Copies the calling thread's last error message into `buf` as NUL-terminated UTF-8.
///
/// Returns the size the whole message needs **including** the terminating NUL, or 0 when the
/// last status-returning call on this thread succeeded (or none failed yet). At most `len` bytes
/// are written: when `len` is smaller than the returned size, the message is truncated (still
/// NUL-terminated if `len > 0`). Call with `buf = NULL, len = 0` to ask for the size only.
///
/// Every status-returning `sinew_*` call sets the message when it fails and clears it when it
/// succeeds; this function itself changes nothing. Messages are per thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sinew_last_error_message(buf: *mut c_char, len: usize) -> usize {
    ffi_value!(0, {
        LAST_ERROR
            .try_with(|slot| {
                let slot = slot.borrow();
                let Some(msg) = slot.as_ref() else { return 0 };
                let bytes = msg.as_bytes_with_nul();
                if !buf.is_null() && len > 0 {
                    let n = (bytes.len() - 1).min(len - 1);
                    // SAFETY: the caller guarantees `buf` points to `len` writable bytes; we write
                    // `n + 1 <= len` of them. `u8` and `c_char` have alignment 1.
                    unsafe {
                        std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.cast::<u8>(), n);
                        *buf.add(n) = 0;
                    }
                }
                bytes.len()
            })
            .unwrap_or(0)
    })
}

/// The name of status code `status` as a static NUL-terminated string (e.g.
/// `"SINEW_STATUS_PARSE_ERROR"`), or `"SINEW_STATUS_UNKNOWN"` for a number that is not a status.
/// Never NULL; do not free.
#[unsafe(no_mangle)]
pub extern "C" fn sinew_status_name(status: u32) -> *const c_char {
    match sinew_status::from_u32(status) {
        Some(s) => s.name_cstr().as_ptr().cast(),
        None => c"SINEW_STATUS_UNKNOWN".as_ptr(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_last_error() -> Option<String> {
        let n = unsafe { sinew_last_error_message(std::ptr::null_mut(), 0) };
        if n == 0 {
            return None;
        }
        let mut buf = vec![0 as c_char; n];
        assert_eq!(unsafe { sinew_last_error_message(buf.as_mut_ptr(), n) }, n);
        Some(unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap().to_owned())
    }

    #[test]
    fn panics_become_a_status_and_a_message() {
        let status = ffi_status!({
            if std::hint::black_box(true) {
                panic!("boom {}", 42);
            }
            Ok(())
        });
        assert_eq!(status, sinew_status::Panic);
        assert_eq!(read_last_error().unwrap(), "internal error (panic): boom 42");
        let v: usize = ffi_value!(7, {
            if std::hint::black_box(true) {
                panic!("static str");
            }
            1
        });
        assert_eq!(v, 7);
        assert_eq!(read_last_error().unwrap(), "internal error (panic): static str");
        assert_eq!(ffi_status!({ Ok(()) }), sinew_status::Ok);
        assert_eq!(read_last_error(), None);
    }

    #[test]
    fn messages_truncate_and_report_their_size() {
        set_last_error("abcdef");
        let mut buf = [1 as c_char; 4];
        assert_eq!(unsafe { sinew_last_error_message(buf.as_mut_ptr(), 4) }, 7);
        assert_eq!(buf.map(|c| c as u8), *b"abc\0");
        set_last_error("nul\0inside");
        assert_eq!(read_last_error().unwrap(), "nul\\0inside");
    }

    #[test]
    fn statuses_are_numbered_in_order() {
        for (i, s) in sinew_status::ALL.iter().enumerate() {
            assert_eq!(*s as u32, i as u32);
            assert_eq!(sinew_status::from_u32(i as u32), Some(*s));
        }
        assert_eq!(sinew_status::from_u32(19), None);
    }
}
