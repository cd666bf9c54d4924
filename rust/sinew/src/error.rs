//! The one error type of the core.

/// Everything that can go wrong in Sinew's core.
///
/// Bad input is always reported through this type: the core never panics on user data and never
/// returns a pose containing NaN. The C ABI maps each variant to a numbered status code and the
/// Python module to an exception carrying the same message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The rig has no bones.
    #[error("the rig has no bones")]
    EmptyRig,
    /// A number that must be finite is NaN or infinite.
    #[error("{what} is not finite")]
    NonFinite {
        /// What the number is, e.g. `rest matrix of bone "hand.L"`.
        what: String,
    },
    /// A finite number beyond the magnitude Sinew supports for it: a position or length beyond
    /// [`crate::rig::MAX_COORDINATE`] rig units, a quaternion whose squared length overflows.
    /// Squaring such a number would overflow, so it is refused rather than solved into NaN.
    #[error("{what} = {value:e} is beyond the supported magnitude {bound:e}")]
    TooLarge {
        /// What the number is, e.g. `root translation`.
        what: String,
        /// The offending value (its largest component).
        value: f64,
        /// The largest magnitude accepted.
        bound: f64,
    },
    /// A bone length is zero, negative or not finite.
    #[error("bone \"{bone}\" has length {length}; a bone length must be positive")]
    BadBoneLength {
        /// The bone's name.
        bone: String,
        /// The offending length.
        length: f64,
    },
    /// A parent index does not name an earlier bone.
    #[error(
        "bone \"{bone}\" (index {index}) names parent {parent}, which is out of range or not before it; bones must be in parent-before-child order"
    )]
    BadParent {
        /// The bone's name.
        bone: String,
        /// The bone's index.
        index: usize,
        /// The parent index it gave.
        parent: i64,
    },
    /// Two bones share a name.
    #[error("two bones are named \"{name}\"")]
    DuplicateName {
        /// The repeated name.
        name: String,
    },
    /// A name or index does not denote a bone of the rig.
    #[error("unknown bone {bone}")]
    UnknownBone {
        /// The name (quoted) or index that was asked for.
        bone: String,
    },
    /// A rest matrix is not a rigid transform (rotation + translation).
    #[error("rest matrix of bone \"{bone}\"{} is not a rigid transform (scale or shear {deviation:.3e})", at_frame(*.frame))]
    NotRigid {
        /// The bone's name.
        bone: String,
        /// How far the 3×3 part is from orthonormal.
        deviation: f64,
        /// The frame of a sequence whose root rest it is ([`crate::FrameTargets::root_rests`]);
        /// `None` for a rig's own rest.
        frame: Option<usize>,
    },
    /// A joint-limit value is outside its range.
    #[error("limit on bone \"{bone}\": {what} = {value} is outside {range}")]
    LimitOutOfRange {
        /// The bone's name.
        bone: String,
        /// Which value, e.g. `cone x_pos`.
        what: String,
        /// The value given.
        value: f64,
        /// The accepted range, in words.
        range: String,
    },
    /// A goal is malformed (zero weight, unknown chain, non-finite target, ...).
    #[error("goal {goal}: {reason}")]
    BadGoal {
        /// The goal's index in the list given.
        goal: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// Arrays whose lengths must agree do not.
    #[error("{what}: expected {expected}, got {got}")]
    ShapeMismatch {
        /// What was measured.
        what: String,
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// A solver setting is outside its range.
    #[error("solver setting {what} = {value} is invalid: {reason}")]
    BadSetting {
        /// The setting's name.
        what: String,
        /// The value given.
        value: f64,
        /// Why it is rejected.
        reason: String,
    },
    /// No solver method has this name.
    #[error("unknown method \"{name}\"; available: {available}")]
    UnknownMethod {
        /// The name asked for.
        name: String,
        /// The methods there are, comma-separated.
        available: String,
    },
    /// A problem file could not be read.
    #[error("problem file: {0}")]
    Format(String),
    /// The method cannot honour something the problem asks for (a kind of goal, a limit type, a
    /// rig shape): it refuses the problem rather than ignore a goal or a limit. Another method
    /// (`fabrik` takes every problem) solves it.
    #[error("method \"{method}\" cannot solve this problem: {what}")]
    Unsupported {
        /// The method's name, e.g. `triangulation`.
        method: String,
        /// What it cannot honour, and why.
        what: String,
    },
    /// The solve stopped before every goal was within tolerance
    /// (returned only by [`crate::Solution::ensure_reached`]; `solve` itself reports this in the
    /// [`crate::Solution`]).
    #[error("did not converge after {iterations} iterations: worst residual {residual}")]
    NotConverged {
        /// Iterations used.
        iterations: u32,
        /// The largest per-goal residual distance.
        residual: f64,
    },
}

/// " at frame N" for an error about one frame of a sequence, else nothing.
fn at_frame(frame: Option<usize>) -> String {
    frame.map_or_else(String::new, |f| format!(" at frame {f}"))
}

/// Shorthand for results of the core.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Checks that every component of `v` is finite.
pub(crate) fn check_finite(values: &[f64], what: impl FnOnce() -> String) -> Result<()> {
    if values.iter().all(|v| v.is_finite()) {
        Ok(())
    } else {
        Err(Error::NonFinite { what: what() })
    }
}
