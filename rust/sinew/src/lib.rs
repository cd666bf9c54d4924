//! # Sinew
//!
//! Multi-chain constrained inverse kinematics for character rigs: a pure Rust core with no FFI,
//! Python or Blender in it. The C ABI (`sinew-ffi`), the Python module (`sinew-py`) and the
//! Blender add-on only translate to and from these types.
//!
//! Where things live:
//! - [`rig`]: [`Rig`] and [`Bone`] (rest transforms, Blender's conventions), forward kinematics.
//! - [`pose`]: [`Pose`] (what a solve returns: keyable local rotations) and [`Frames`].
//! - [`limits`]: [`JointLimit`], [`ConeLimit`], [`TwistLimit`], [`HingeLimit`] (§3.7.2).
//! - [`goal`] and [`problem`]: [`Goal`], [`Pole`], [`Problem`] and its derived [`Topology`]
//!   (sub-bases, bones each goal moves).
//! - [`solver`]: the [`Solver`] trait, [`SolveSettings`], [`Solution`], [`Method`], [`Fabrik`],
//!   the Jacobian family ([`Dls`], [`JacobianTranspose`], [`JacobianPinv`], [`SvdDls`], [`Sdls`]),
//!   and, to compare with, [`FabrikClassic`], [`Ccd`] and [`Triangulation`].
//! - [`rotations`]: turning solved joint positions into local rotations.
//! - [`geometry`]: shared math (shortest arcs, swing–twist, quadrant ellipse, rigid fits).
//! - [`format`](mod@format): the JSON problem format.
//!
//! ```
//! use sinew::{Fabrik, Goal, Problem, RootMode, Solver, SolveSettings, Pose};
//! use glam::DVec3;
//!
//! let text = r#"{"format": "sinew.problem/1", "bones": [
//!     {"name": "upper", "head": [0,0,0], "tail": [0,0,1]},
//!     {"name": "lower", "parent": "upper", "head": [0,0,1], "tail": [0,0,2]}]}"#;
//! let rig = Problem::from_json(text).unwrap().problem.rig().clone();
//! let problem = Problem::new(rig, vec![Goal::new(1, DVec3::new(1.0, 0.0, 1.0))], RootMode::Pinned).unwrap();
//! let mut solver = Fabrik::new(SolveSettings::default());
//! let solution = solver.solve(&problem, &Pose::rest(2)).unwrap();
//! assert!(solution.reached);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod format;
pub mod geometry;
pub mod goal;
pub mod limits;
pub mod pose;
pub mod problem;
pub mod rig;
pub mod rotations;
pub mod solver;

pub use error::{Error, Result};
pub use format::{LoadedProblem, ProblemFile, ReferenceFile, SolutionFile};
pub use goal::{Demand, Goal, GoalKind, Pole};
pub use limits::{ConeLimit, ConeShape, Freedom, HingeLimit, JointLimit, LimitState, Swing, TwistLimit};
pub use pose::{Frames, MAX_SCALE, MIN_SCALE, Pose};
pub use problem::{Problem, Reference, RootMode, Topology};
pub use rig::{Bone, BoneRef, CONNECTED_TOLERANCE, Rig};
pub use solver::{
    Ccd, Dls, Fabrik, FabrikClassic, FrameTargets, JacobianPinv, JacobianTranspose, Method, Sdls, SolveSettings, Solution, Solver, StopReason, SvdDls,
    Triangulation, solve_sequence, solve_sequence_until,
};

/// The crate version (`CARGO_PKG_VERSION`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
