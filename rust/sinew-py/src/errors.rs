//! The exceptions of the module and the one place core errors and panics become Python errors.
//!
//! Every error is a `sinew.SinewError` (a `ValueError`) carrying the core's message; the
//! subclasses let callers tell the kinds apart without parsing text.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

create_exception!(
    sinew,
    SinewError,
    PyValueError,
    "Base class of every error Sinew raises (a ValueError); the message is the core's."
);
create_exception!(
    sinew,
    RigError,
    SinewError,
    "The rig is malformed: no bones, a bad parent order, a duplicate name, a bad length or a non-rigid rest matrix."
);
create_exception!(sinew, UnknownBoneError, SinewError, "A bone name or index does not denote a bone of the rig.");
create_exception!(sinew, LimitError, SinewError, "A joint-limit value is outside its range.");
create_exception!(
    sinew,
    GoalError,
    SinewError,
    "A goal is malformed (non-finite target, orientation or pole, non-positive weight, ...)."
);
create_exception!(sinew, ShapeError, SinewError, "An array has the wrong shape or is not numeric.");
create_exception!(
    sinew,
    NonFiniteError,
    SinewError,
    "A number that must be finite is NaN or infinite, or beyond the magnitude Sinew supports (positions and lengths up to 1e12 rig units)."
);
create_exception!(sinew, SettingsError, SinewError, "A solver setting (method, iterations, tolerances, root mode) is invalid.");
create_exception!(sinew, FormatError, SinewError, "A problem file could not be read.");
create_exception!(
    sinew,
    UnsupportedError,
    SinewError,
    "The solver's method cannot honour something the problem asks for (a kind of goal, a limit type, a rig shape); the message names it. Another method (\"fabrik\" takes every problem) solves it."
);
create_exception!(
    sinew,
    InternalError,
    SinewError,
    "A bug in Sinew (a Rust panic, caught at the module boundary); please report it."
);

/// Adds every exception class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SinewError", py.get_type::<SinewError>())?;
    m.add("RigError", py.get_type::<RigError>())?;
    m.add("UnknownBoneError", py.get_type::<UnknownBoneError>())?;
    m.add("LimitError", py.get_type::<LimitError>())?;
    m.add("GoalError", py.get_type::<GoalError>())?;
    m.add("ShapeError", py.get_type::<ShapeError>())?;
    m.add("NonFiniteError", py.get_type::<NonFiniteError>())?;
    m.add("SettingsError", py.get_type::<SettingsError>())?;
    m.add("FormatError", py.get_type::<FormatError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}

/// A core error as the matching Python exception, with the core's message.
pub(crate) fn core_err(e: sinew::Error) -> PyErr {
    use sinew::Error as E;
    let msg = e.to_string();
    match e {
        E::EmptyRig | E::BadBoneLength { .. } | E::BadParent { .. } | E::DuplicateName { .. } | E::NotRigid { .. } => {
            RigError::new_err(msg)
        }
        E::UnknownBone { .. } => UnknownBoneError::new_err(msg),
        E::LimitOutOfRange { .. } => LimitError::new_err(msg),
        E::BadGoal { .. } => GoalError::new_err(msg),
        E::ShapeMismatch { .. } => ShapeError::new_err(msg),
        E::NonFinite { .. } | E::TooLarge { .. } => NonFiniteError::new_err(msg),
        E::BadSetting { .. } | E::UnknownMethod { .. } => SettingsError::new_err(msg),
        E::Format(_) => FormatError::new_err(msg),
        E::Unsupported { .. } => UnsupportedError::new_err(msg),
        _ => SinewError::new_err(msg),
    }
}

/// Runs `f`, turning a Rust panic into `InternalError` so that it never escapes as a
/// `PanicException` (a `BaseException`) or worse. Wraps every call into the core.
pub(crate) fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => Err(InternalError::new_err(format!(
            "internal error in Sinew (a bug, please report it): {}",
            panic_message(payload.as_ref())
        ))),
    }
}

/// [`guard`] for a core call returning the core's `Result`.
pub(crate) fn guard_core<T>(f: impl FnOnce() -> sinew::Result<T>) -> PyResult<T> {
    guard(|| f().map_err(core_err))
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_owned()
    }
}
