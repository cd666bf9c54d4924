//! The Python extension module `sinew._sinew` (imported as `sinew`).
//!
//! A thin adapter over the core crate: it translates numpy arrays and Python values into owned
//! core types, releases the GIL for solves, and turns core errors (and panics) into
//! `sinew.SinewError` subclasses. No IK math lives here. The typed interface is
//! `python/sinew/_sinew.pyi`; tests are in `tests/python/`.

mod convert;
mod errors;
mod goal;
mod rig;
mod solver;

use pyo3::prelude::*;

/// The wheel version when built by `scripts/build_wheel.sh` (which sets `SINEW_VERSION` to a
/// unique dev version), otherwise the crate version.
const VERSION: &str = match option_env!("SINEW_VERSION") {
    Some(v) => v,
    None => env!("CARGO_PKG_VERSION"),
};

/// Panics inside the module's panic boundary, attached or detached from Python: the tests check
/// that it surfaces as `sinew.InternalError` and that the interpreter survives. Not public API.
#[pyfunction]
fn _panic_for_tests(py: Python<'_>, detached: bool) -> PyResult<()> {
    fn boom() -> PyResult<()> {
        panic!("deliberate panic for the tests")
    }
    if detached { py.detach(|| errors::guard(boom)) } else { errors::guard(boom) }
}

#[pymodule]
fn _sinew(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<rig::PyRig>()?;
    m.add_class::<goal::PyGoal>()?;
    m.add_class::<solver::PySolver>()?;
    m.add_class::<solver::PySolution>()?;
    m.add_class::<solver::PySequenceResult>()?;
    m.add_function(wrap_pyfunction!(solver::methods, m)?)?;
    m.add_function(wrap_pyfunction!(solver::analyze, m)?)?;
    m.add_function(wrap_pyfunction!(solver::load_problem, m)?)?;
    m.add_function(wrap_pyfunction!(solver::load_reference, m)?)?;
    // Not in `__all__` (setattr, not add): private.
    m.setattr("_panic_for_tests", wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add("__version__", VERSION)?;
    m.add("core_version", sinew::VERSION)?;
    Ok(())
}
