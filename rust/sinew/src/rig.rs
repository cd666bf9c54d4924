//! The rig: bones in parent-before-child order with rest transforms, lengths and limits.
//!
//! Conventions are Blender's: a bone's frame has its origin at the bone's head and the bone runs
//! along local +Y, so its tail is at `(0, length, 0)`. A bone's rest transform is stored relative
//! to its parent's frame (for a root bone, relative to rig space), which is
//! `parent.matrix_local⁻¹ · bone.matrix_local` in Blender terms. A child's head need not sit on
//! its parent's tail (clavicles on a chest, thighs on a pelvis).

use std::collections::HashMap;

use glam::{DMat3, DMat4, DQuat, DVec3};

use crate::error::{Error, Result, check_finite};
use crate::limits::JointLimit;
use crate::pose::{Frames, Pose};

/// One bone of a [`Rig`].
#[derive(Debug, Clone, PartialEq)]
pub struct Bone {
    /// Unique name.
    pub name: String,
    /// Index of the parent bone (always smaller than this bone's index), `None` for a root.
    pub parent: Option<usize>,
    /// Rest position of the head in the parent's frame (rig space for a root).
    pub rest_head: DVec3,
    /// Rest rotation relative to the parent's frame (rig space for a root).
    pub rest_rotation: DQuat,
    /// Distance from head to tail (> 0).
    pub length: f64,
    /// Joint limits (free by default).
    pub limit: JointLimit,
}

/// How far a child's head may sit from its parent's tail and still count as connected, as a
/// fraction of the rig's extent (the largest distance of a rest head or tail from the rig's
/// origin).
///
/// Rest data from a DCC is single precision: Blender stores heads and tails as `f32`, so the
/// connected bones of a real rig sit 1e-8 to 1e-7 of its extent apart (about 0.2 µm on a 2 m
/// metarig), while a real offset (a clavicle on a chest, a thigh on a pelvis) is orders of
/// magnitude larger. Solvers join connected bones exactly (a serial chain's joint positions);
/// the residuals they report come from forward kinematics, so the round-off is never hidden.
pub const CONNECTED_TOLERANCE: f64 = 1e-6;

/// The largest magnitude, in rig units, of any position (rest heads and tails, targets, pole
/// targets, the root translation) and of any bone length Sinew accepts. The solvers square
/// distances and multiply them (a cross product of two offsets is a distance squared), so
/// values near `sqrt(f64::MAX)` (about 1.3e154) would overflow into infinities and NaN; 1e12
/// leaves those products far from overflow while exceeding any real rig (a kilometre-sized set in
/// millimetres is 1e6). Larger values are refused with [`Error::TooLarge`] (or
/// [`Error::BadGoal`] for a goal's target or pole).
pub const MAX_COORDINATE: f64 = 1e12;

/// `None` when every component of `v` is finite and within ±[`MAX_COORDINATE`]; otherwise what
/// is wrong, in words (for the adapters' and the validation's messages).
#[must_use]
pub fn coordinate_problem(v: DVec3) -> Option<String> {
    if !v.is_finite() {
        return Some("is not finite".into());
    }
    let m = v.abs().max_element();
    (m > MAX_COORDINATE).then(|| format!("has a component of magnitude {m:e}, beyond the supported {MAX_COORDINATE:e} rig units"))
}

/// [`coordinate_problem`] as an error naming `what`.
pub(crate) fn check_coordinate(v: DVec3, what: impl FnOnce() -> String) -> Result<()> {
    if !v.is_finite() {
        return Err(Error::NonFinite { what: what() });
    }
    let m = v.abs().max_element();
    if m > MAX_COORDINATE {
        return Err(Error::TooLarge { what: what(), value: m, bound: MAX_COORDINATE });
    }
    Ok(())
}

/// Bounds [`JointLimit::validated`] does not check but the solvers need: a cone half-angle of
/// at least [`ConeLimit::ZERO_BOUND`] (the floor the core itself gives Blender's zero bounds);
/// a narrower cone is refused (lock the bone or use a hinge instead).
///
/// [`ConeLimit::ZERO_BOUND`]: crate::limits::ConeLimit::ZERO_BOUND
fn check_limit_bounds(limit: &JointLimit, bone: &str) -> Result<()> {
    if let crate::limits::Swing::Cone(c) = limit.swing {
        let floor = crate::limits::ConeLimit::ZERO_BOUND;
        for (what, v) in [("cone x_pos", c.x_pos), ("cone x_neg", c.x_neg), ("cone z_pos", c.z_pos), ("cone z_neg", c.z_neg)] {
            if v < floor {
                return Err(Error::LimitOutOfRange {
                    bone: bone.to_owned(),
                    what: what.into(),
                    value: v,
                    range: format!("[{floor:e}, π] (for a narrower cone lock the bone or use a hinge)"),
                });
            }
        }
    }
    Ok(())
}

/// A skeleton: bones in parent-before-child order.
///
/// Bone 0 is the rig's root: its translation is the one a [`Pose`] carries. Other parentless
/// bones are roots too but stay where the rest pose puts them.
#[derive(Debug, Clone, PartialEq)]
pub struct Rig {
    bones: Vec<Bone>,
    children: Vec<Vec<usize>>,
    by_name: HashMap<String, usize>,
    rest_frames: Frames,
    /// [`CONNECTED_TOLERANCE`] times the rig's extent.
    connect_distance: f64,
    /// Per bone: the shortcuts forward kinematics may take (derived from the rest data).
    fk: Vec<FkShortcut>,
}

/// What forward kinematics can skip for one bone, decided exactly from its rest data. Every
/// shortcut computes the general formula's value (to round-off: a head along the parent's +Y is
/// placed with the +Y column rather than a general rotation); [`Rig::forward`] is the reference
/// every solver's reported residuals are computed with, so they agree with it to the bit.
#[derive(Debug, Clone, Copy, PartialEq)]
struct FkShortcut {
    /// The rest rotation is exactly the identity: `rest · local` is `local`.
    rest_identity: bool,
    /// Where the head is, relative to the parent.
    head: HeadRule,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum HeadRule {
    /// The rest head is exactly `(0, parent length, 0)`: the head is the parent's tail as
    /// computed.
    ParentTail,
    /// The rest head is exactly `(0, h, 0)`: `parent head + h · parent's +Y`.
    AlongParentY(f64),
    /// Anything else (and roots).
    Offset,
}

/// Something that names a bone: its index or its name.
pub trait BoneRef {
    /// Resolves to an index of `rig`.
    ///
    /// # Errors
    /// [`Error::UnknownBone`] if there is no such bone.
    fn resolve(&self, rig: &Rig) -> Result<usize>;
}

impl BoneRef for usize {
    fn resolve(&self, rig: &Rig) -> Result<usize> {
        if *self < rig.len() {
            Ok(*self)
        } else {
            Err(Error::UnknownBone { bone: format!("index {self} (rig has {} bones)", rig.len()) })
        }
    }
}

impl BoneRef for &str {
    fn resolve(&self, rig: &Rig) -> Result<usize> {
        rig.find(self).ok_or_else(|| Error::UnknownBone { bone: format!("\"{self}\"") })
    }
}

impl BoneRef for String {
    fn resolve(&self, rig: &Rig) -> Result<usize> {
        self.as_str().resolve(rig)
    }
}

impl Rig {
    /// Builds a rig from bones already expressed relative to their parents.
    ///
    /// # Errors
    /// [`Error::EmptyRig`], [`Error::BadParent`], [`Error::DuplicateName`],
    /// [`Error::BadBoneLength`], [`Error::NonFinite`], [`Error::LimitOutOfRange`].
    pub fn new(bones: Vec<Bone>) -> Result<Self> {
        if bones.is_empty() {
            return Err(Error::EmptyRig);
        }
        let mut by_name = HashMap::with_capacity(bones.len());
        let mut children = vec![Vec::new(); bones.len()];
        let mut checked = Vec::with_capacity(bones.len());
        for (i, mut b) in bones.into_iter().enumerate() {
            if by_name.insert(b.name.clone(), i).is_some() {
                return Err(Error::DuplicateName { name: b.name });
            }
            if let Some(p) = b.parent {
                if p >= i {
                    return Err(Error::BadParent { bone: b.name, index: i, parent: p as i64 });
                }
                children[p].push(i);
            }
            if !(b.length.is_finite() && b.length > 0.0) {
                return Err(Error::BadBoneLength { bone: b.name, length: b.length });
            }
            if b.length > MAX_COORDINATE {
                return Err(Error::TooLarge { what: format!("length of bone \"{}\"", b.name), value: b.length, bound: MAX_COORDINATE });
            }
            let r = b.rest_rotation;
            check_finite(&[b.rest_head.x, b.rest_head.y, b.rest_head.z, r.x, r.y, r.z, r.w], || {
                format!("rest transform of bone \"{}\"", b.name)
            })?;
            check_coordinate(b.rest_head, || format!("rest head of bone \"{}\"", b.name))?;
            let n = r.length();
            if (n - 1.0).abs() > 1e-3 {
                return Err(Error::NotRigid { bone: b.name, deviation: (n - 1.0).abs(), frame: None });
            }
            b.rest_rotation = r / n;
            b.limit = b.limit.validated(&b.name)?;
            check_limit_bounds(&b.limit, &b.name)?;
            checked.push(b);
        }
        let fk = checked
            .iter()
            .map(|b| FkShortcut {
                rest_identity: b.rest_rotation == DQuat::IDENTITY,
                head: match b.parent {
                    Some(p) if b.rest_head.x == 0.0 && b.rest_head.z == 0.0 => {
                        if b.rest_head.y == checked[p].length { HeadRule::ParentTail } else { HeadRule::AlongParentY(b.rest_head.y) }
                    }
                    _ => HeadRule::Offset,
                },
            })
            .collect();
        let mut rig = Self { bones: checked, children, by_name, rest_frames: Frames::default(), connect_distance: 0.0, fk };
        rig.rest_frames = rig.checked_rest_frames()?;
        let extent = rig.rest_frames.heads.iter().chain(&rig.rest_frames.tails).fold(0.0f64, |m, p| m.max(p.length()));
        let longest = rig.bones.iter().fold(0.0f64, |m, b| m.max(b.length));
        rig.connect_distance = CONNECTED_TOLERANCE * extent.max(longest);
        Ok(rig)
    }

    /// The rest pose's rig-space frames, each head and tail checked: each rest head and length is
    /// bounded above, but a long chain of them adds up.
    fn checked_rest_frames(&self) -> Result<Frames> {
        let frames = self.forward(&Pose::rest(self.len()));
        for (i, b) in self.bones.iter().enumerate() {
            check_coordinate(frames.heads[i], || format!("rest head of bone \"{}\" in rig space", b.name))?;
            check_coordinate(frames.tails[i], || format!("rest tail of bone \"{}\" in rig space", b.name))?;
        }
        Ok(frames)
    }

    /// Moves root bone `bone` (one without a parent) to the rig-space rest frame of `matrix`
    /// (rigid, as [`Rig::from_matrices`] reads it), carrying its descendants: in a DCC, the
    /// animated bone above an IK chain's top at one frame. Which bones count as connected stays
    /// as it was decided when the rig was built.
    ///
    /// # Errors
    /// [`Error::UnknownBone`], [`Error::BadParent`] for a bone that has a parent, or as
    /// [`Rig::from_matrices`] for the matrix; the rig is unchanged on error.
    pub fn set_root_rest(&mut self, bone: impl BoneRef, matrix: &DMat4) -> Result<()> {
        let i = bone.resolve(self)?;
        if let Some(p) = self.bones[i].parent {
            return Err(Error::BadParent { bone: self.bones[i].name.clone(), index: i, parent: p as i64 });
        }
        let (rotation, head) = rigid_from_matrix(matrix, &self.bones[i].name)?;
        check_coordinate(head, || format!("rest head of bone \"{}\"", self.bones[i].name))?;
        let before = (self.bones[i].rest_rotation, self.bones[i].rest_head, self.fk[i].rest_identity);
        let n = rotation.length();
        (self.bones[i].rest_rotation, self.bones[i].rest_head) = (rotation / n, head);
        self.fk[i].rest_identity = self.bones[i].rest_rotation == DQuat::IDENTITY;
        match self.checked_rest_frames() {
            Ok(frames) => {
                self.rest_frames = frames;
                Ok(())
            }
            Err(e) => {
                (self.bones[i].rest_rotation, self.bones[i].rest_head, self.fk[i].rest_identity) = before;
                Err(e)
            }
        }
    }

    /// The root bones' rests of `other`, a rig of the same bones (a clone of this one whose roots
    /// may have moved since: [`Rig::set_root_rest`]), and the rest frames with them.
    pub(crate) fn copy_root_rests_from(&mut self, other: &Rig) {
        for (i, (mine, theirs)) in self.bones.iter_mut().zip(&other.bones).enumerate() {
            if mine.parent.is_none() {
                (mine.rest_rotation, mine.rest_head) = (theirs.rest_rotation, theirs.rest_head);
                self.fk[i].rest_identity = other.fk[i].rest_identity;
            }
        }
        self.rest_frames.clone_from(&other.rest_frames);
    }

    /// Builds a rig from armature-space rest matrices, as Blender's `bone.matrix_local`.
    ///
    /// `parents[i]` is the parent's index (`None` or a negative number for a root in the C and
    /// Python adapters). Matrices must be rigid (rotation and translation only).
    ///
    /// # Errors
    /// As [`Rig::new`], plus [`Error::ShapeMismatch`] and [`Error::NotRigid`].
    pub fn from_matrices(names: &[String], parents: &[Option<usize>], rest: &[DMat4], lengths: &[f64]) -> Result<Self> {
        let n = names.len();
        for (what, got) in [("parents", parents.len()), ("rest matrices", rest.len()), ("lengths", lengths.len())] {
            if got != n {
                return Err(Error::ShapeMismatch { what: format!("number of {what}"), expected: n, got });
            }
        }
        let mut world = Vec::with_capacity(n);
        for (i, m) in rest.iter().enumerate() {
            world.push(rigid_from_matrix(m, &names[i])?);
        }
        let mut bones = Vec::with_capacity(n);
        for i in 0..n {
            let (rot, head) = world[i];
            let (rest_rotation, rest_head) = match parents[i] {
                Some(p) if p < i => {
                    let (prot, phead) = world[p];
                    (prot.conjugate() * rot, prot.conjugate() * (head - phead))
                }
                Some(p) => return Err(Error::BadParent { bone: names[i].clone(), index: i, parent: p as i64 }),
                None => (rot, head),
            };
            bones.push(Bone {
                name: names[i].clone(),
                parent: parents[i],
                rest_head,
                rest_rotation,
                length: lengths[i],
                limit: JointLimit::FREE,
            });
        }
        Self::new(bones)
    }

    /// The root bones (those without a parent), ascending: the bones [`Rig::set_root_rest`] and
    /// a sequence's `root_rests` move.
    pub fn roots(&self) -> impl Iterator<Item = usize> + '_ {
        self.bones.iter().enumerate().filter(|(_, b)| b.parent.is_none()).map(|(i, _)| i)
    }

    /// Number of bones.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bones.len()
    }

    /// Always false: a rig has at least one bone.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.bones.is_empty()
    }

    /// The bones, parent before child.
    #[must_use]
    pub fn bones(&self) -> &[Bone] {
        &self.bones
    }

    /// Bone `i`. Panics if out of range; use [`BoneRef::resolve`] for unchecked input.
    #[must_use]
    pub fn bone(&self, i: usize) -> &Bone {
        &self.bones[i]
    }

    /// The index of the bone called `name`.
    #[must_use]
    pub fn find(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Whether bone `i`'s head sits on its parent's tail, within [`CONNECTED_TOLERANCE`] of the
    /// rig's extent (false for a root).
    #[must_use]
    pub fn is_connected(&self, i: usize) -> bool {
        let b = &self.bones[i];
        b.parent.is_some_and(|p| (b.rest_head - DVec3::new(0.0, self.bones[p].length, 0.0)).length() <= self.connect_distance)
    }

    /// The children of bone `i`, in index order.
    #[must_use]
    pub fn children(&self, i: usize) -> &[usize] {
        &self.children[i]
    }

    /// Sets the limits of one bone.
    ///
    /// # Errors
    /// [`Error::UnknownBone`] or [`Error::LimitOutOfRange`]; the rig is unchanged on error.
    pub fn set_limit(&mut self, bone: impl BoneRef, limit: JointLimit) -> Result<()> {
        let i = bone.resolve(self)?;
        let limit = limit.validated(&self.bones[i].name)?;
        check_limit_bounds(&limit, &self.bones[i].name)?;
        self.bones[i].limit = limit;
        Ok(())
    }

    /// The rest pose's world frames (rig space).
    #[must_use]
    pub fn rest_frames(&self) -> &Frames {
        &self.rest_frames
    }

    /// Forward kinematics: the rig-space frame of every bone for `pose`.
    ///
    /// Bone `i`'s rotation is `parent_rotation · rest_rotation · pose.rotations[i]` and its head is
    /// `parent_head + parent_rotation · (parent_scale · rest_head)` (for bone 0,
    /// `rest_head + rest_rotation · pose.root_translation`); its tail is `head + rotation ·
    /// (0, length · scale, 0)`, with each bone's length scale from [`Pose::scales`] (1 where it is
    /// empty). That is exactly how Blender evaluates `matrix_basis` with default inheritance, a
    /// stretched bone carrying a uniform scale (see [`Pose`]).
    #[must_use]
    pub fn forward(&self, pose: &Pose) -> Frames {
        let mut f = Frames::with_len(self.len());
        self.forward_into(pose, &mut f);
        f
    }

    /// [`Rig::forward`] into existing storage (no allocation once sized).
    pub fn forward_into(&self, pose: &Pose, out: &mut Frames) {
        out.resize(self.len());
        let root_head = |i: usize, _: &Frames| {
            let b = &self.bones[i];
            if i == 0 { b.rest_head + b.rest_rotation * pose.root_translation } else { b.rest_head }
        };
        let local = |i: usize| pose.rotations.get(i).copied().unwrap_or(DQuat::IDENTITY);
        if pose.scales.is_empty() {
            // Every bone at its rest length: the same loop with a constant scale, which the
            // compiler folds away (a rigid rig's forward kinematics costs what it did).
            self.frames_from(0, local, |_| 1.0, root_head, out);
        } else {
            self.frames_from(0, local, |i| pose.scales.get(i).copied().unwrap_or(1.0), root_head, out);
        }
    }

    /// [`Rig::forward_into`] for bone `from` and every bone after it (its descendants among
    /// them), from local rotations `locals` and length scales `scales` (empty: every bone at 1),
    /// on frames `out` that hold the bones before `from`; a root bone keeps its head where `out`
    /// has it.
    pub(crate) fn forward_from(&self, locals: &[DQuat], scales: &[f64], from: usize, out: &mut Frames) {
        if scales.is_empty() {
            self.frames_from(from, |i| locals[i], |_| 1.0, |i, out: &Frames| out.heads[i], out);
        } else {
            self.frames_from(from, |i| locals[i], |i| scales[i], |i, out: &Frames| out.heads[i], out);
        }
    }

    /// The forward-kinematics loop: the frames of bone `from` and every bone after it, from
    /// `local(i)` and `scale(i)`, into `out` (which holds the bones before `from`); a root bone's
    /// head is `root_head(i, out)`.
    #[inline(always)]
    fn frames_from(
        &self,
        from: usize,
        local: impl Fn(usize) -> DQuat,
        scale: impl Fn(usize) -> f64,
        root_head: impl Fn(usize, &Frames) -> DVec3,
        out: &mut Frames,
    ) {
        // The previous bone's frame, kept in registers: in a chain it is the parent's, and reading
        // it back from `out` would put a store-to-load round trip on every bone's critical path.
        let mut prev = match from.checked_sub(1) {
            Some(p) => (out.rotations[p], out.heads[p], out.tails[p], scale(p)),
            None => (DQuat::IDENTITY, DVec3::ZERO, DVec3::ZERO, 1.0),
        };
        for i in from..self.len() {
            let parent = match self.bones[i].parent {
                Some(p) if p + 1 == i => Ok(prev),
                Some(p) => Ok((out.rotations[p], out.heads[p], out.tails[p], scale(p))),
                None => Err(root_head(i, out)),
            };
            let s = scale(i);
            let (rot, head, tail) = self.bone_frame(i, local(i), s, parent);
            prev = (rot, head, tail, s);
            (out.rotations[i], out.heads[i], out.tails[i]) = (rot, head, tail);
        }
    }

    /// One step of forward kinematics: bone `i`'s world (rotation, head, tail) from its `local`
    /// rotation, its length scale and its parent's (rotation, head, tail, length scale), or, for
    /// a root, its head.
    #[inline(always)]
    fn bone_frame(&self, i: usize, local: DQuat, scale: f64, parent: std::result::Result<(DQuat, DVec3, DVec3, f64), DVec3>) -> (DQuat, DVec3, DVec3) {
        let (b, fk) = (&self.bones[i], self.fk[i]);
        // Normalised before the parent's rotation enters, so the chain from parent to child is
        // one quaternion product (a product of unit quaternions is unit to round-off, a few ulps
        // per level). FK runs several times per solve.
        let own = crate::geometry::renormalize(if fk.rest_identity { local } else { b.rest_rotation * local });
        let (rot, head) = match parent {
            Ok((pr, parent_head, parent_tail, parent_scale)) => {
                let head = match fk.head {
                    // (The parent's tail is already where its scale puts it.)
                    HeadRule::ParentTail => parent_tail,
                    HeadRule::AlongParentY(h) => parent_head + crate::geometry::y_axis(pr) * (h * parent_scale),
                    HeadRule::Offset => parent_head + pr * (b.rest_head * parent_scale),
                };
                (pr * own, head)
            }
            Err(root_head) => (own, root_head),
        };
        (rot, head, head + crate::geometry::y_axis(rot) * (b.length * scale))
    }

    /// The local rotation of bone `i` that gives it world rotation `world`, given its parent's
    /// world rotation (ignored for roots).
    #[must_use]
    #[inline]
    pub fn local_from_world(&self, i: usize, parent_world: DQuat, world: DQuat) -> DQuat {
        crate::geometry::renormalize(self.local_base(i, parent_world).conjugate() * world)
    }

    /// The world rotation bone `i`'s local rotation is relative to, given its parent's world
    /// rotation (ignored for roots): `world = local_base · local`.
    #[inline(always)]
    pub(crate) fn local_base(&self, i: usize, parent_world: DQuat) -> DQuat {
        let b = &self.bones[i];
        match b.parent {
            Some(_) if self.fk[i].rest_identity => parent_world,
            Some(_) => parent_world * b.rest_rotation,
            None => b.rest_rotation,
        }
    }

    /// Total length of the bones from `bone` up to and including `top` (an ancestor), following
    /// head-to-head distances where children are offset.
    #[must_use]
    pub fn reach(&self, bone: usize, top: usize) -> f64 {
        let mut total = self.bones[bone].length;
        let mut i = bone;
        while i != top {
            let b = &self.bones[i];
            match b.parent {
                Some(p) => {
                    total += b.rest_head.length();
                    i = p;
                }
                None => break,
            }
        }
        total
    }
}

/// Splits a rest matrix into rotation and translation, rejecting a non-finite entry, scale and
/// shear.
fn rigid_from_matrix(m: &DMat4, name: &str) -> Result<(DQuat, DVec3)> {
    check_finite(&m.to_cols_array(), || format!("rest matrix of bone \"{name}\""))?;
    let r = DMat3::from_mat4(*m);
    let dev = (r.transpose() * r - DMat3::IDENTITY).to_cols_array().iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let bottom = [m.x_axis.w, m.y_axis.w, m.z_axis.w, m.w_axis.w - 1.0].iter().fold(0.0f64, |a, v| a.max(v.abs()));
    if dev > 1e-3 || bottom > 1e-6 || r.determinant() < 0.0 {
        return Err(Error::NotRigid { bone: name.to_owned(), deviation: dev.max(bottom), frame: None });
    }
    Ok((DQuat::from_mat3(&r).normalize(), m.w_axis.truncate()))
}

/// Blender's bone orientation from head, tail and roll: the shortest arc from +Y to the bone's
/// direction, then `roll` about the bone's own axis (`vec_roll_to_mat3`, away from −Y).
#[must_use]
pub fn rotation_from_head_tail(head: DVec3, tail: DVec3, roll: f64) -> DQuat {
    let dir = (tail - head).normalize_or(DVec3::Y);
    crate::geometry::shortest_arc(DVec3::Y, dir) * DQuat::from_rotation_y(roll)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `n` unit bones along +Y, each the parent of the next (shared by the unit tests).
    pub(crate) fn chain(n: usize) -> Rig {
        let bones = (0..n)
            .map(|i| Bone {
                name: format!("b{i}"),
                parent: i.checked_sub(1),
                rest_head: if i == 0 { DVec3::ZERO } else { DVec3::new(0.0, 1.0, 0.0) },
                rest_rotation: DQuat::IDENTITY,
                length: 1.0,
                limit: JointLimit::FREE,
            })
            .collect();
        Rig::new(bones).unwrap()
    }

    #[test]
    fn rest_fk_of_a_chain() {
        let rig = chain(3);
        let f = rig.rest_frames();
        assert!((f.tails[2] - DVec3::new(0.0, 3.0, 0.0)).length() < 1e-12);
    }

    #[test]
    fn matrices_roundtrip_through_relative_form() {
        let names: Vec<String> = ["hips", "spine", "thigh"].iter().map(|s| s.to_string()).collect();
        let rot = |h: DVec3, t: DVec3, roll: f64| rotation_from_head_tail(h, t, roll);
        let heads = [DVec3::new(0.0, 0.0, 1.0), DVec3::new(0.0, 0.0, 1.2), DVec3::new(0.1, 0.0, 1.0)];
        let tails = [DVec3::new(0.0, 0.0, 1.2), DVec3::new(0.0, 0.05, 1.6), DVec3::new(0.12, 0.0, 0.55)];
        let mats: Vec<DMat4> = (0..3)
            .map(|i| DMat4::from_rotation_translation(rot(heads[i], tails[i], 0.3 * i as f64), heads[i]))
            .collect();
        let lengths: Vec<f64> = (0..3).map(|i| (tails[i] - heads[i]).length()).collect();
        let rig = Rig::from_matrices(&names, &[None, Some(0), Some(0)], &mats, &lengths).unwrap();
        let f = rig.rest_frames();
        for i in 0..3 {
            assert!((f.heads[i] - heads[i]).length() < 1e-12);
            assert!((f.tails[i] - tails[i]).length() < 1e-12, "{i}");
        }
    }

    #[test]
    fn bad_rigs_are_typed_errors() {
        let b = |name: &str, parent, length| Bone {
            name: name.into(),
            parent,
            rest_head: DVec3::ZERO,
            rest_rotation: DQuat::IDENTITY,
            length,
            limit: JointLimit::FREE,
        };
        assert_eq!(Rig::new(vec![]), Err(Error::EmptyRig));
        assert!(matches!(Rig::new(vec![b("a", None, 0.0)]), Err(Error::BadBoneLength { .. })));
        assert!(matches!(Rig::new(vec![b("a", None, -1.0)]), Err(Error::BadBoneLength { .. })));
        assert!(matches!(Rig::new(vec![b("a", Some(0), 1.0)]), Err(Error::BadParent { .. })));
        assert!(matches!(Rig::new(vec![b("a", None, 1.0), b("b", Some(5), 1.0)]), Err(Error::BadParent { .. })));
        assert!(matches!(Rig::new(vec![b("a", None, 1.0), b("a", Some(0), 1.0)]), Err(Error::DuplicateName { .. })));
        let mut nan = b("a", None, 1.0);
        nan.rest_head.x = f64::NAN;
        assert!(matches!(Rig::new(vec![nan]), Err(Error::NonFinite { .. })));
        let scaled = DMat4::from_scale(DVec3::splat(2.0));
        assert!(matches!(
            Rig::from_matrices(&["a".into()], &[None], &[scaled], &[1.0]),
            Err(Error::NotRigid { .. })
        ));
        assert!(matches!(
            Rig::from_matrices(&["a".into()], &[None], &[DMat4::IDENTITY], &[]),
            Err(Error::ShapeMismatch { .. })
        ));
    }
}
