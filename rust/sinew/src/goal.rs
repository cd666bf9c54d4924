//! Goals: where an effector bone should go, and how much of the rig may move to get it there.
//!
//! A goal has a kind ([`GoalKind`], Jack's goal kinds: Phillips, Zhao & Badler 1990, §5): a
//! point, an orientation only, an aim, a line, a plane or a half-space. What each kind asks of
//! the effector is computed in one place, [`Goal::demand`]: the point the effector should be at
//! and the rotation its bone should have, seen from where the rig is now. Every error measure
//! ([`crate::Problem::goal_errors`]) and every method (through [`crate::solver::Solver::solve`])
//! goes through it.

use glam::{DQuat, DVec3};

use crate::geometry::{angle_between, shortest_arc};

/// What a goal asks of its effector (Jack §5). The kinds with a point (`Position`, `Line`,
/// `Plane`, `HalfSpace`) measure the effector point (the bone's tail, or head with
/// [`Goal::use_tail`] false) against the goal's `target` and may carry an
/// [`Goal::orientation`] too; `Orientation` needs one; `Aim` takes none.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum GoalKind {
    /// The effector point on `target` (Jack's point goal).
    #[default]
    Position,
    /// Only [`Goal::orientation`] counts; the effector point may go anywhere (Jack's orientation
    /// goal). `target` is not used.
    Orientation,
    /// The bone's local `axis` (any length; Blender's bones run along +Y) points from the bone's
    /// head at `target`; the turn about that axis is free (Jack's aiming-at goal).
    Aim {
        /// The bone axis that aims, in the bone's own frame.
        axis: DVec3,
    },
    /// The effector point on the line through `target` along `direction` (any length).
    Line {
        /// The line's direction.
        direction: DVec3,
    },
    /// The effector point on the plane through `target` with `normal` (any length).
    Plane {
        /// The plane's normal.
        normal: DVec3,
    },
    /// The effector point on the side of the plane through `target` that `normal` points to, or
    /// on the plane (Jack's half-space goal). Already inside, it asks nothing.
    HalfSpace {
        /// The plane's normal, pointing into the allowed side.
        normal: DVec3,
    },
}

impl GoalKind {
    /// The names the adapters and the problem format use, in declaration order.
    pub const NAMES: [&'static str; 6] = ["position", "orientation", "aim", "line", "plane", "half_space"];

    /// This kind's name (one of [`GoalKind::NAMES`]).
    #[must_use]
    pub fn name(self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// Its position in [`GoalKind::NAMES`] (the C API's `SINEW_GOAL_*` value).
    #[must_use]
    pub fn index(self) -> usize {
        match self {
            Self::Position => 0,
            Self::Orientation => 1,
            Self::Aim { .. } => 2,
            Self::Line { .. } => 3,
            Self::Plane { .. } => 4,
            Self::HalfSpace { .. } => 5,
        }
    }

    /// The kind named `name` with `vector` its axis, direction or normal (ignored by
    /// `position` and `orientation`). `None` for an unknown name.
    #[must_use]
    pub fn from_name(name: &str, vector: DVec3) -> Option<Self> {
        Some(match name {
            "position" => Self::Position,
            "orientation" => Self::Orientation,
            "aim" => Self::Aim { axis: vector },
            "line" => Self::Line { direction: vector },
            "plane" => Self::Plane { normal: vector },
            "half_space" => Self::HalfSpace { normal: vector },
            _ => return None,
        })
    }

    /// The kind named `name` from the one vector field it uses: `axis` for `aim` (default +Y,
    /// along the bone), `direction` for `line`, `normal` for `plane` and `half_space`, none for
    /// `position` and `orientation` (as the problem format and the Python API give them).
    ///
    /// # Errors
    /// A message for an unknown name, a missing field, or a field the kind does not use.
    pub fn from_fields(name: &str, axis: Option<DVec3>, direction: Option<DVec3>, normal: Option<DVec3>) -> Result<Self, String> {
        let (wanted, value) = match name {
            "aim" => (Some("axis"), Some(axis.unwrap_or(DVec3::Y))),
            "line" => (Some("direction"), direction),
            "plane" | "half_space" => (Some("normal"), normal),
            _ => (None, None),
        };
        let kind = Self::from_name(name, value.unwrap_or_default()).ok_or_else(|| format!("unknown goal kind \"{name}\" (kinds: {})", Self::NAMES.join(", ")))?;
        for (field, present) in [("axis", axis.is_some()), ("direction", direction.is_some()), ("normal", normal.is_some())] {
            if present && wanted != Some(field) {
                return Err(format!("a {name} goal has no {field}"));
            }
        }
        match (wanted, value) {
            (Some(field), None) => Err(format!("a {name} goal needs a {field}")),
            _ => Ok(kind),
        }
    }

    /// This kind with its axis, direction or normal at unit length (as [`crate::Problem`] keeps
    /// it; a zero vector gives NaN: validate first).
    #[must_use]
    pub fn normalized(self) -> Self {
        match self {
            Self::Aim { axis } => Self::Aim { axis: axis.normalize() },
            Self::Line { direction } => Self::Line { direction: direction.normalize() },
            Self::Plane { normal } => Self::Plane { normal: normal.normalize() },
            Self::HalfSpace { normal } => Self::HalfSpace { normal: normal.normalize() },
            k => k,
        }
    }

    /// The kind's axis, direction or normal (`None` for `position` and `orientation`).
    #[must_use]
    pub fn vector(self) -> Option<DVec3> {
        match self {
            Self::Position | Self::Orientation => None,
            Self::Aim { axis: v } | Self::Line { direction: v } | Self::Plane { normal: v } | Self::HalfSpace { normal: v } => Some(v),
        }
    }
}

/// What a goal asks of its effector at one pose ([`Goal::demand`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Demand {
    /// Where the effector point should be: the nearest point of the goal's point, line, plane or
    /// half-space to where it is; for an orientation or aim goal, where it would be if its bone
    /// turned in place (about its head) to `orientation`.
    pub point: DVec3,
    /// The rotation the effector bone's frame should have: the goal's orientation, or for an aim
    /// goal the bone's rotation turned by the shortest arc that aims it. `None`: any.
    pub orientation: Option<DQuat>,
    /// Whether `point` counts in the goal's error (false for orientation and aim goals, whose
    /// point only follows from their rotation).
    pub point_counts: bool,
}

/// A pole target: it sets the chain's swivel (where the knee or elbow points), exactly as
/// Blender's IK pole (`pole_target`, `pole_angle`) does.
///
/// The contract, that of Blender's `IK_QJacobianSolver::ConstrainPoleVector`
/// (`intern/iksolver`), which Blender runs once, before its iterations:
/// - Let `top` be the chain's top bone (the last of the goal's `chain_length` bones), `h` its head,
///   `e` the effector point, and `up = X·cos(angle) + Z·sin(angle)` with `X`, `Z` the top bone's
///   local axes, all measured on the pose the solve **starts** from.
/// - Before solving, the chain turns rigidly about `h` by the rotation that takes the frame of
///   (`e - h`, `up`) to the frame of (`target - h`, `pole - h`), each frame being
///   (`d × u` normalized, `(d × u) × d`, `-d`) for a direction `d` and an up vector `u`. So the
///   effector lands on the line from `h` to the target, and the plane through that line and
///   `up` contains the pole, `up` on the pole's side (with `angle = 0`, the top's local +X faces
///   the pole).
/// - The chain is then solved from there. An unlimited chain only bends in its own plane, so its
///   knee keeps the swivel the turn gave it: the knee is where Blender's IK puts it. `up` is not
///   re-aimed afterwards: as the chain bends, it drifts off the pole by a few degrees unless
///   `angle` is 0 or ±90° for a chain bending about the top's X (Blender's does the same).
/// - Joint limits hold: the turn is applied only as far as the top bone's limit allows (Blender
///   applies it whole, through the chain's root matrix, even past a limit), and not at all to a
///   locked top.
/// - A goal already reached by the start pose is left as it is (Blender would still swivel it):
///   solving again from a solution changes nothing.
/// - A chain lying straight on that line, which Blender's IK cannot bend (it stays straight,
///   short of the target), is bent toward the pole, in the pole's plane.
/// - In a sequence ([`crate::solve_sequence`]) the chain starts every frame from the sequence's
///   start pose, as Blender's IK starts every frame from the pose before IK.
///
/// Blender drops poles when several goals share a tree. Sinew keeps them there, differently: a
/// chain some other goal also moves is turned at every iteration about the line from its top's
/// head to its target, so that `up` points at the pole seen along that line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pole {
    /// The pole position (rig space).
    pub target: DVec3,
    /// Blender's `pole_angle`, radians: the top bone's `X·cos(angle) + Z·sin(angle)` faces the pole.
    pub angle: f64,
}

/// One IK goal on an effector bone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Goal {
    /// The effector bone's index.
    pub bone: usize,
    /// Where the effector point should go (rig space).
    pub target: DVec3,
    /// Optional world (rig-space) rotation for the effector bone's frame.
    pub orientation: Option<DQuat>,
    /// Relative importance where goals compete (> 0); weights the sub-base fit.
    pub weight: f64,
    /// How many bones, from the effector up, may move: 0 means up to the root (Blender's
    /// `chain_count`).
    pub chain_length: usize,
    /// Optional pole target for this goal's chain.
    pub pole: Option<Pole>,
    /// Pull the bone's tail (true, default) or its head onto the target.
    pub use_tail: bool,
    /// What the goal asks (default: the effector point on `target`).
    pub kind: GoalKind,
}

impl Goal {
    /// A position goal on `bone`'s tail with weight 1, moving the whole chain up to the root.
    #[must_use]
    pub fn new(bone: usize, target: DVec3) -> Self {
        Self { bone, target, orientation: None, weight: 1.0, chain_length: 0, pole: None, use_tail: true, kind: GoalKind::Position }
    }

    /// This goal with a kind.
    #[must_use]
    pub fn with_kind(mut self, kind: GoalKind) -> Self {
        self.kind = kind;
        self
    }

    /// How far this goal is from met when the effector bone's frame is `rotation` at `head` and
    /// the effector point is at `effector` (rig space): the distance from the effector to the
    /// point [`Goal::demand`] gives (0 for orientation and aim goals, whose point only follows
    /// from their rotation) and the angle (radians) from `rotation` to the demanded rotation (0
    /// without one). The one measure of a goal's error ([`crate::Problem::goal_errors`]).
    ///
    /// Directions and normals are used as unit vectors ([`crate::Problem`] keeps them unit).
    #[must_use]
    pub fn errors(&self, rotation: DQuat, head: DVec3, effector: DVec3) -> (f64, f64) {
        let demand = self.demand(rotation, head, effector);
        let distance = if demand.point_counts { (effector - demand.point).length() } else { 0.0 };
        let angle = demand.orientation.map_or(0.0, |q| angle_between(q, rotation));
        (distance, angle)
    }

    /// What this goal asks of its effector when the effector bone's frame is `rotation` at
    /// `head` and the effector point is at `effector` (rig space): the one place every kind is
    /// interpreted.
    ///
    /// - `Position`: `target`.
    /// - `Line`, `Plane`: the effector point projected onto the line or plane (the nearest point).
    /// - `HalfSpace`: the effector point itself if on the allowed side or the plane, else its
    ///   projection onto the plane.
    /// - `Orientation`: the orientation, and the point the effector would have with it.
    /// - `Aim`: `rotation` turned by the shortest arc that takes its `axis` to the direction from
    ///   `head` to `target` (no turn when `target` is at `head`), and the point that follows.
    ///
    /// Directions and normals are used as unit vectors ([`crate::Problem`] keeps them unit).
    #[must_use]
    pub fn demand(&self, rotation: DQuat, head: DVec3, effector: DVec3) -> Demand {
        // The effector seen from the bone's head, in the bone's frame: where a turn takes it.
        let local = rotation.conjugate() * (effector - head);
        let at = |point: DVec3| Demand { point, orientation: self.orientation, point_counts: true };
        match self.kind {
            GoalKind::Position => at(self.target),
            GoalKind::Line { direction } => at(self.target + direction * direction.dot(effector - self.target)),
            GoalKind::Plane { normal } => at(effector - normal * normal.dot(effector - self.target)),
            GoalKind::HalfSpace { normal } => at(effector - normal * normal.dot(effector - self.target).min(0.0)),
            GoalKind::Orientation => {
                let q = self.orientation.unwrap_or(rotation);
                Demand { point: head + q * local, orientation: Some(q), point_counts: false }
            }
            GoalKind::Aim { axis } => {
                let q = match ((rotation * axis).try_normalize(), (self.target - head).try_normalize()) {
                    (Some(from), Some(to)) => (shortest_arc(from, to) * rotation).normalize(),
                    _ => rotation,
                };
                Demand { point: head + q * local, orientation: Some(q), point_counts: false }
            }
        }
    }

    /// This goal with a chain length.
    #[must_use]
    pub fn with_chain_length(mut self, n: usize) -> Self {
        self.chain_length = n;
        self
    }

    /// This goal with a target orientation.
    #[must_use]
    pub fn with_orientation(mut self, q: DQuat) -> Self {
        self.orientation = Some(q);
        self
    }

    /// This goal with a weight.
    #[must_use]
    pub fn with_weight(mut self, w: f64) -> Self {
        self.weight = w;
        self
    }

    /// This goal with a pole target.
    #[must_use]
    pub fn with_pole(mut self, target: DVec3, angle: f64) -> Self {
        self.pole = Some(Pole { target, angle });
        self
    }
}
