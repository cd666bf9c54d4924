//! # Sinew's C ABI
//!
//! `libsinew.so` / `libsinew.a` (and `sinew.dll` on Windows) with the header `ffi/sinew.h`,
//! generated from this crate by cbindgen (tests/header.rs keeps it current). The design follows
//! rustls-ffi:
//!
//! - Three opaque handles, [`sinew_rig`], [`sinew_problem`] and [`sinew_solver`], each created
//!   by a `*_new`/`*_from_*` function that writes the handle through an output pointer and
//!   released by its `*_free` (NULL is a no-op). Their docs state ownership and thread rules.
//! - Every function that can fail returns a numbered [`sinew_status`]; the calling thread's
//!   message is read with [`sinew_last_error_message`]. Every body runs inside a
//!   `catch_unwind` boundary, so a panic becomes `SINEW_STATUS_PANIC`, never an abort of the
//!   host application.
//! - Only `double`, fixed-size integers, `bool` and `#[repr(C)]` structs of them cross the
//!   boundary; glam types never do. Enum-like inputs are `uint32_t` and validated.
//! - NULL and misaligned pointers and wrong lengths are reported, not crashed on.
//!
//! The core crate is [`sinew_core`] (package `sinew`); this crate only translates.

#![allow(clippy::missing_safety_doc)] // The header preamble states the one safety contract.
#![allow(clippy::too_many_arguments)] // C functions take (pointer, length) pairs.

// Declared in the order the header lists them.
pub mod status;
pub mod rig;
pub mod problem;
pub mod solver;
mod args;

use std::ffi::c_char;

pub use problem::{sinew_goal, sinew_goal_kind, sinew_problem};
pub use rig::sinew_rig;
pub use solver::{sinew_method, sinew_reference_kind, sinew_root_mode, sinew_settings, sinew_solve_info, sinew_solver, sinew_stop_reason};
pub use status::{sinew_last_error_message, sinew_status, sinew_status_name};

/// Major version of the C ABI. It changes when a signature, a struct layout or the meaning of a
/// status code changes; a program built against another major version must be rebuilt.
pub const SINEW_ABI_VERSION_MAJOR: u32 = 0;

/// Minor version of the C ABI. It grows when functions, status codes or enum values are added.
/// 2 added reference poses (`sinew_problem_set_reference`, `sinew_problem_reference`,
/// `sinew_solver_solve_sequence_with_references`) and `sinew_solver_orientation_residuals`; 3
/// added per-axis stiffness (`sinew_rig_set_stiffness_axes`); 4 added the methods
/// `SINEW_METHOD_FABRIK_CLASSIC`, `SINEW_METHOD_CCD` and `SINEW_METHOD_TRIANGULATION` (2–4),
/// `SINEW_STATUS_UNSUPPORTED`, `SINEW_METHOD_JACOBIAN_TRANSPOSE` (5), `SINEW_METHOD_JACOBIAN_PINV`
/// (6), `SINEW_METHOD_SVD_DLS` (7) and `SINEW_METHOD_SDLS` (8), and bones that stretch
/// (`sinew_rig_set_stretch`, `sinew_solver_scales`, `sinew_solver_solve_scaled`,
/// `sinew_solver_solve_sequence_scaled`); 5 added goal kinds (`sinew_goal_kind`,
/// `sinew_problem_set_goal_kind`, `sinew_problem_get_goal_kind`) and `SINEW_METHOD_NLP` (9); 6
/// added a root translation and root bones' rests per frame (`sinew_solver_solve_sequence_rooted`);
/// 7 made the rest pose every problem's default reference (it had none: least motion from the
/// start), so `sinew_problem_set_reference` with NULL now restores the rest pose, and added
/// `sinew_reference_kind`, `sinew_problem_set_reference_kind` and `sinew_problem_reference_kind`
/// (`SINEW_REFERENCE_KIND_LEAST_MOTION` asks for no reference).
pub const SINEW_ABI_VERSION_MINOR: u32 = 7;

/// The library's version, e.g. `"0.1.0"`: a static NUL-terminated string. Do not free.
#[unsafe(no_mangle)]
pub extern "C" fn sinew_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The ABI version of the loaded library, `(SINEW_ABI_VERSION_MAJOR << 16) |
/// SINEW_ABI_VERSION_MINOR`. A program should check at start-up that the major part equals the
/// header's `SINEW_ABI_VERSION_MAJOR` and the minor part is at least the header's.
#[unsafe(no_mangle)]
pub extern "C" fn sinew_abi_version() -> u32 {
    (SINEW_ABI_VERSION_MAJOR << 16) | SINEW_ABI_VERSION_MINOR
}
