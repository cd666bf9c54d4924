//! Goals: where an effector bone should go, and how much of the rig may move to get it there.

use glam::{DQuat, DVec3};

/// A pole target: the chain's bend plane turns to contain it (as Blender's IK pole).
///
/// The chain turns about its axis (the first bone's head to the goal's target) until the first
/// bone's `X·cos(angle) + Z·sin(angle)` points at the pole: with `angle = 0` its local +X does,
/// exactly Blender's convention (`pole_angle`). Unlike Blender's own solvers, Sinew keeps each chain's pole when a tree has
/// several goals.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pole {
    /// The pole position (rig space).
    pub target: DVec3,
    /// Extra rotation about the chain axis, radians.
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
