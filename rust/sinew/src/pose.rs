//! Poses (what a solve returns and a DCC keys) and world frames (what forward kinematics gives).

use glam::{DQuat, DVec3};

/// The smallest length scale a stretching bone may take ([`Pose::scales`]): a bone never
/// shrinks to nothing (Blender's IK stops its stretch at 0.001 of the tree's size).
pub const MIN_SCALE: f64 = 1e-3;
/// The largest length scale a stretching bone may take.
pub const MAX_SCALE: f64 = 1e3;

/// A pose of a [`crate::Rig`]: one local rotation per bone plus the root's translation, and,
/// for rigs whose bones stretch, one length scale per bone.
///
/// `rotations[i]` is bone `i`'s rotation relative to its rest frame, which is exactly Blender's
/// `pose_bone.rotation_quaternion` (`matrix_basis`) with default inheritance. `root_translation`
/// is bone 0's offset in its own rest frame, as Blender's `pose_bone.location`.
///
/// `scales[i]` is bone `i`'s length over its rest length (1 = rest): its tail is
/// `head + length · scales[i]` along its +Y, and its children's heads sit `scales[i]` times as
/// far from its head as at rest; its children's own lengths are their own scales'. That is
/// Blender's pose with a uniform `pose_bone.scale` of `scales[i] / scales[parent]` and default
/// inheritance, which is how Blender's IK shows a stretched bone. Empty means every bone at 1
/// (every rigid rig's poses, and what a solve of a rig without stretch returns); otherwise one
/// per bone. Only bones whose [`crate::JointLimit::stretch`] is above 0 may be other than 1.
#[derive(Debug, Default, PartialEq)]
pub struct Pose {
    /// Local rotation per bone, relative to rest.
    pub rotations: Vec<DQuat>,
    /// Bone 0's translation in its rest frame.
    pub root_translation: DVec3,
    /// Length scale per bone (see the type's docs); empty: every bone at 1.
    pub scales: Vec<f64>,
}

impl Clone for Pose {
    fn clone(&self) -> Self {
        Self { rotations: self.rotations.clone(), root_translation: self.root_translation, scales: self.scales.clone() }
    }

    /// Field by field, into this pose's own storage (the derived one would allocate anew): the
    /// solvers' inner loops copy poses into kept buffers.
    fn clone_from(&mut self, source: &Self) {
        self.rotations.clone_from(&source.rotations);
        self.root_translation = source.root_translation;
        self.scales.clone_from(&source.scales);
    }
}

impl Pose {
    /// The rest pose of a rig with `n` bones.
    #[must_use]
    pub fn rest(n: usize) -> Self {
        Self { rotations: vec![DQuat::IDENTITY; n], root_translation: DVec3::ZERO, scales: Vec::new() }
    }

    /// A pose with `rotations` and `root_translation`, every bone at its rest length.
    #[must_use]
    pub fn new(rotations: Vec<DQuat>, root_translation: DVec3) -> Self {
        Self { rotations, root_translation, scales: Vec::new() }
    }

    /// Bone `i`'s length scale (1 when [`Pose::scales`] is empty).
    #[must_use]
    #[inline]
    pub fn scale(&self, i: usize) -> f64 {
        self.scales.get(i).copied().unwrap_or(1.0)
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
