//! Goals: where an effector bone should go, and how much of the rig may move to get it there.

use glam::{DQuat, DVec3};

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
}

impl Goal {
    /// A position goal on `bone`'s tail with weight 1, moving the whole chain up to the root.
    #[must_use]
    pub fn new(bone: usize, target: DVec3) -> Self {
        Self { bone, target, orientation: None, weight: 1.0, chain_length: 0, pole: None, use_tail: true }
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
