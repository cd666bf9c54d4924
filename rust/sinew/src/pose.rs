//! Poses (what a solve returns and a DCC keys) and world frames (what forward kinematics gives).

use glam::{DQuat, DVec3};

/// A pose of a [`crate::Rig`]: one local rotation per bone plus the root's translation.
///
/// `rotations[i]` is bone `i`'s rotation relative to its rest frame, which is exactly Blender's
/// `pose_bone.rotation_quaternion` (`matrix_basis`) with default inheritance. `root_translation`
/// is bone 0's offset in its own rest frame, as Blender's `pose_bone.location`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pose {
    /// Local rotation per bone, relative to rest.
    pub rotations: Vec<DQuat>,
    /// Bone 0's translation in its rest frame.
    pub root_translation: DVec3,
}

impl Pose {
    /// The rest pose of a rig with `n` bones.
    #[must_use]
    pub fn rest(n: usize) -> Self {
        Self { rotations: vec![DQuat::IDENTITY; n], root_translation: DVec3::ZERO }
    }

    /// The largest angle (radians) any bone turns between `self` and `other`.
    #[must_use]
    pub fn max_angle_to(&self, other: &Pose) -> f64 {
        self.rotations.iter().zip(&other.rotations).map(|(a, b)| crate::geometry::angle_between(*a, *b)).fold(0.0, f64::max)
    }
}

/// Rig-space frames of every bone: heads, tails and world rotations (the result of forward
/// kinematics).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Frames {
    /// Head (frame origin) per bone.
    pub heads: Vec<DVec3>,
    /// Tail per bone (`head + rotation · (0, length, 0)`).
    pub tails: Vec<DVec3>,
    /// World rotation per bone (bone's local +Y is its direction).
    pub rotations: Vec<DQuat>,
}

impl Frames {
    /// Zeroed storage for `n` bones.
    #[must_use]
    pub fn with_len(n: usize) -> Self {
        let mut f = Self::default();
        f.resize(n);
        f
    }

    /// Copies `other` into this storage (no allocation once sized; the derived `clone_from`
    /// would allocate anew).
    pub(crate) fn copy_from(&mut self, other: &Frames) {
        self.heads.clone_from(&other.heads);
        self.tails.clone_from(&other.tails);
        self.rotations.clone_from(&other.rotations);
    }

    pub(crate) fn resize(&mut self, n: usize) {
        self.heads.resize(n, DVec3::ZERO);
        self.tails.resize(n, DVec3::ZERO);
        self.rotations.resize(n, DQuat::IDENTITY);
    }

    /// The point of bone `i` a goal pulls on: its tail, or its head.
    #[must_use]
    #[inline]
    pub fn effector(&self, i: usize, use_tail: bool) -> DVec3 {
        if use_tail { self.tails[i] } else { self.heads[i] }
    }
}
