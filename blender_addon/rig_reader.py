# SPDX-License-Identifier: GPL-3.0-or-later
"""Turns an armature and its settings into what the Sinew engine solves: a ``sinew.Rig`` with
limits, and goals whose targets are sampled from the evaluated scene.

Nothing here solves or does rotation math: the engine gets Blender's own rest data (rest
matrices composed from ``bone.matrix_local``, see "The problem" below) and pose convention
(``rotation_quaternion`` relative to rest, default inheritance; bone 0's ``location`` is the root
translation) and answers in the same terms.

Where goals and limits come from, per pose bone:

* a Sinew goal (``pose_bone.sinew.use_goal``), else its Blender IK constraints as Blender's IK
  gathers them into IK trees (``ik_trees``: the first one with influence, and the muted ones
  before it, which hold their tip where it is when they share a tree with one that acts);
* Blender's per-bone IK limits (``lock_ik_*``, ``use_ik_limit_*``, ``ik_min_*``/``ik_max_*``,
  ``ik_stiffness_*``) merged per axis with Sinew's (cone / twist / lock / stiffness) where
  enabled: ``read_limit``.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import sys
from dataclasses import dataclass, field, replace
from functools import cache, cached_property

import numpy as np
from mathutils import Matrix, Quaternion, Vector

# The core requires every cone half-angle to be in (0, π]. Blender allows ik_max_x = 0 ("may
# not swing that way at all"); such a half-angle becomes this many radians (0.06°) instead.
ZERO_HALF_ANGLE = 1e-3
# The core's stiffness range is [0, 1); Blender's ik_stiffness goes up to 1 (immobile).
MAX_STIFFNESS = 0.99
# Rotation-mode names that are Euler orders.
EULER_MODES = {'XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX'}


class ReadError(Exception):
    """A problem with the rig or its settings, worded for the user (reported as an ERROR)."""


class NoGoalsError(ReadError):
    """The armature has no goal to solve (none at all, or none on a selected bone with Only
    Selected Bones): with several armatures in Pose Mode, such an armature is skipped."""


def engine():
    """The ``sinew`` extension module (bundled as a wheel with this add-on). Raises ReadError
    (``engine_problem``) when it does not import, or when it is another build than Blender
    installed for this add-on: every engine call goes through here, so nothing runs on an engine
    the add-on was not installed with."""
    problem = engine_problem()
    if problem is not None:
        raise ReadError(f"{problem}; nothing was changed")
    import sinew

    return sinew


def engine_problem() -> str | None:
    """Why the engine cannot be used in this session, in the user's words, or None: the ``sinew``
    module does not import (the wheel did not install), or it is another build than Blender
    installed for this add-on (``engine_mismatch``)."""
    try:
        import sinew
    except ImportError as ex:  # pragma: no cover - only when the wheel did not install
        return f"The Sinew engine module is not available ({ex}); reinstall the Sinew extension"
    return engine_mismatch(sinew)


def extensions_site_packages() -> str:
    """The site-packages into which Blender's extension system extracts the extensions' wheels
    (``<extensions>/.local/lib/pythonX.Y/site-packages``, as ``addon_utils`` makes it), and from
    which Blender imports them: it puts that directory first on ``sys.path`` when it starts."""
    import bpy

    return os.path.join(bpy.utils.user_resource('EXTENSIONS'), ".local", "lib",
                        f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")


@cache
def installed_engine_version() -> str | None:
    """The version of the ``sinew`` distribution that Blender's extension system installed from the
    wheel this add-on bundles: the ``sinew-<version>.dist-info`` it extracted into
    ``extensions_site_packages``, which is the engine Blender imports when it starts. None when
    there is none: an add-on run from a source tree, whose manifest lists no wheel, runs whatever
    ``sinew`` the developer put on the path, unchecked.

    Read once per load of the add-on: installing, updating or reinstalling the extension imports
    its modules anew, after Blender has extracted the wheel."""
    site = extensions_site_packages()
    if not os.path.isdir(site):
        return None
    for dist in importlib.metadata.distributions(path=[site]):
        if (dist.metadata["Name"] or "").lower() == "sinew":
            return dist.version
    return None


def engine_mismatch(sinew) -> str | None:
    """What to tell the user when the ``sinew`` module loaded in this session is another build
    than the one Blender installed for this add-on (``installed_engine_version``), else None.

    It happens when the extension is updated, or uninstalled and installed again, while Blender
    runs: Blender loads the new add-on's Python, but a native module cannot be loaded twice in one
    Python, so the engine imported before stays in memory (Blender says nothing about it), and
    only a restart loads the new one. Or another copy of ``sinew`` was imported first, from
    elsewhere on ``sys.path`` (a script running Blender as a Python module whose Python has
    ``sinew`` installed: tests/blender, bench and the demo put the extension's site-packages
    first); the message then says where it came from."""
    installed = installed_engine_version()
    loaded = getattr(sinew, "__version__", None) or "an unknown build"
    if installed is None or loaded == installed:
        return None
    package = os.path.dirname(getattr(sinew, "__file__", None) or "")
    if os.path.realpath(os.path.dirname(package)) != os.path.realpath(extensions_site_packages()):
        return (f"The Sinew engine loaded ({loaded}, from {package}) is not the one installed with the add-on "
                f"({installed}): another copy of the sinew module was imported first; restart Blender to load "
                "the add-on's")
    return (f"Sinew was updated while Blender was running: restart Blender to load engine {installed} "
            f"({loaded} is loaded)")


# --------------------------------------------------------------------------------------------
# Goals and limits as read from the rig (plain data; the engine objects are built from these)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetRef:
    """An object, a bone of an armature object (its head, as Blender's IK uses it), or a vertex
    group of a mesh object (``vertex_group_matrix``: where Blender's constraints put it)."""

    ob: object
    bone: str = ""
    vertex_group: str = ""
    hidden: bool = False  # an object Blender does not evaluate, read from its channels (check_evaluated)

    @property
    def node(self) -> str:
        """What of ``ob`` the target is, as ``follows_moved_bones`` walks it: the bone's name, the
        object's geometry (``GEOMETRY``) for a vertex group, "" for the object itself."""
        return self.bone or (GEOMETRY if self.vertex_group else "")

    def describe(self) -> str:
        if self.bone:
            return f'"{self.ob.name}" bone "{self.bone}"'
        if self.vertex_group:
            return f'"{self.ob.name}" vertex group "{self.vertex_group}"'
        return f'"{self.ob.name}"'

    def world_matrix(self, depsgraph) -> Matrix:
        """The target's world matrix (for a bone, its pose matrix carried to world space; for a
        vertex group, ``vertex_group_matrix`` of the evaluated mesh) as ``depsgraph`` evaluates
        the scene; for a ``hidden`` object (``check_evaluated``), computed from its own transform
        channels and F-curves at the scene's frame (``plain_matrix``)."""
        if self.hidden:
            m = plain_matrix(self.ob, depsgraph.scene)
            if m is None:  # (check_evaluated let only plain objects through)
                raise ReadError(f"{self.describe()} is not evaluated by Blender and is not a plain object")
            return m
        ob_eval = self.ob.evaluated_get(depsgraph)
        if self.bone:
            return ob_eval.matrix_world @ ob_eval.pose.bones[self.bone].matrix
        if self.vertex_group:
            m = vertex_group_matrix(ob_eval, self.vertex_group)
            if m is None:
                raise ReadError(
                    f'Vertex group "{self.vertex_group}" of mesh "{self.ob.name}" has no vertex with a weight above 0 '
                    f"at frame {depsgraph.scene.frame_current} (Blender's IK then aims at the mesh's origin): assign "
                    "vertices to the group, or clear the Vertex Group field to aim at the origin; nothing was changed")
            return m
        return ob_eval.matrix_world.copy()


def vertex_group_matrix(ob_eval, name: str) -> Matrix | None:
    """Where Blender's constraints put a target that is vertex group ``name`` of the evaluated
    mesh object ``ob_eval`` (``contarget_get_mesh_mat`` in Blender's constraint.cc), as a world
    matrix; None when no vertex has a weight above 0 in the group (Blender then takes the
    object's origin with no rotation, a degenerate matrix), and the object's own matrix when it
    has no such group (as Blender).

    Blender's rule, read from the evaluated mesh (after shape keys and modifiers, with the
    weights as its modifiers leave them): the point is the mean of the vertices whose weight in
    the group is above 0, each weighted by its weight, carried to world space by the object's
    matrix. The rotation comes from the same weighted mean of their vertex normals, carried by
    the inverse transpose of the object's 3x3 matrix and normalised: that is the Z axis; X is
    Z × the object's Y axis as that inverse transpose carries it (or its X axis, when that
    cross product is shorter than 1e-3), Y is Z × X; each axis normalised."""
    obmat = ob_eval.matrix_world
    group = ob_eval.vertex_groups.find(name)
    if group < 0:
        return obmat.copy()
    me = ob_eval.data
    members, weights = [], []
    for v in me.vertices:
        for g in v.groups:
            if g.group == group:
                if g.weight > 0.0:
                    members.append(v.index)
                    weights.append(g.weight)
                break
    if not members:
        return None
    n = len(me.vertices)
    co = np.empty(3 * n, dtype=np.float32)
    me.vertices.foreach_get("co", co)
    normals = np.empty(3 * n, dtype=np.float32)
    me.vertex_normals.foreach_get("vector", normals)
    w = np.asarray(weights, dtype=np.float64)[:, None]
    total = float(w.sum())
    centre = (co.reshape(n, 3)[members] * w).sum(axis=0) / total
    normal = (normals.reshape(n, 3)[members] * w).sum(axis=0) / total
    carry = obmat.to_3x3().inverted_safe().transposed()
    z = (carry @ Vector(normal.tolist())).normalized()
    x = z.cross(carry.col[1])
    if x.length_squared < 1e-6:
        x = z.cross(carry.col[0])
    y = z.cross(x)
    m = Matrix((x.normalized(), y.normalized(), z.normalized())).transposed().to_4x4()  # (the axes as columns)
    m.translation = obmat @ Vector(centre.tolist())
    return m


def plain_matrix(ob, scene) -> Matrix | None:
    """Object ``ob``'s world matrix at ``scene``'s current frame computed from its own transform
    channels and F-curves (``pipeline.object_world_matrices``, which the bake's F-curve sampling
    uses), without evaluating the scene; None unless ``ob`` is such a plain object (no parent, no
    constraint in effect, no drivers, no NLA, only its own action animates it; time not
    remapped), whose channels are then the whole truth."""
    from .pipeline import object_world_matrices  # (pipeline builds on this module)

    m = object_world_matrices(ob, [scene.frame_current_final], scene)
    return None if m is None else Matrix(m[0].tolist())


def shown_objects(depsgraph) -> set[int]:
    """The objects ``depsgraph`` evaluates whole (``as_pointer()`` of the originals): the ones its
    view layer shows, whatever the eye icon says, and their parents (``depsgraph.ids``; measured
    in Blender 4.2, 5.0 and 5.2). An object disabled in viewports (the monitor icon) or in an
    excluded or viewport-disabled collection is not among them: Blender evaluates only what a
    shown object depends on of it (an IK constraint's target: its matrix, the bone or the mesh the
    constraint reads), or nothing, and the rest stays as it was when last shown (the pose of an
    armature that only deforms a shown mesh, say)."""
    return {i.original.as_pointer() for i in depsgraph.ids}


def not_evaluated_reason(ob, depsgraph) -> str:
    """Why Blender does not evaluate object ``ob`` in ``depsgraph``'s view layer, as the user
    would fix it."""
    if ob.hide_viewport:
        return f'"{ob.name}" has Disable in Viewports on (the monitor icon in the Outliner)'
    return (f'"{ob.name}" is in no collection the view layer "{depsgraph.view_layer.name}" evaluates: its collection '
            "is excluded (the checkbox in the Outliner) or disabled in viewports")


def check_armature_evaluated(ob, depsgraph) -> None:
    """ReadError (naming armature ``ob``, why and what to do; nothing is changed) unless
    ``depsgraph`` evaluates ``ob`` whole (``shown_objects``): an armature disabled in viewports,
    or in an excluded or disabled collection (still active, in Pose Mode, or reached through
    ``bpy.context.temp_override`` by a script), keeps the object matrix and pose it had when last
    shown, whatever the frame, so a solve would aim from a stale place and a bake would key
    rotations that miss once it is shown."""
    if ob.as_pointer() in shown_objects(depsgraph):
        return
    raise ReadError(
        f'Armature "{ob.name}" is not evaluated by Blender ({not_evaluated_reason(ob, depsgraph)}), so its place and '
        "pose stay where they were when it was last shown, whatever the frame: Sinew would solve it from there and "
        "its keys would miss once it is shown. Enable it in viewports or include its collection in the view layer "
        "(hiding it with the eye icon instead is fine: Blender still evaluates it); nothing was changed")


def check_evaluated(goals, depsgraph) -> list[GoalSpec]:
    """``goals`` with each target or pole object that ``depsgraph`` does not evaluate marked
    ``hidden``, or ReadError (naming the goal's bone, the target or pole and why; nothing is
    changed) when such an object is not plain.

    Blender evaluates the objects a view layer shows (the eye icon does not matter) and their
    parents (``shown_objects``), and of any other object what a shown one depends on. A Blender
    IK constraint depends on its target and pole (muted or at influence 0 as well: measured in
    4.2, 5.0 and 5.2), so Blender evaluates what its IK reads of them, the object's matrix, the
    bone or the mesh, even when they are disabled in viewports or in an excluded or disabled
    collection (a hidden mocap skeleton): an IK constraint's target or pole that ``depsgraph``
    holds (``evaluated_get`` gives an evaluated copy) is read as Blender's IK sees it. A Sinew
    goal's target is a property, not a constraint: one that is not shown is not evaluated (its
    depsgraph copy, if any, keeps the matrix it had when last shown) and reading it would solve for
    a stale place. Such a target (or pole) is read from its own channels and F-curves
    (``plain_matrix``) when it is a plain object, which gives exactly its place; a bone, a vertex
    group (its mesh would be stale too), or an object with a parent, constraints or drivers, is
    refused. A Line, Plane or Half-Space goal's direction or normal is an axis of its target, read
    the same way."""
    shown = shown_objects(depsgraph)
    out = []
    for g in goals:
        refs = {}
        for ref, what in ((g.target, "target"), (g.pole, "pole target")):
            if ref is None or ref.ob.as_pointer() in shown:
                continue
            if g.tree >= 0 and ref.ob.evaluated_get(depsgraph).is_evaluated:
                continue  # (evaluated as the IK constraint's dependency)
            if not ref.bone and not ref.vertex_group and plain_matrix(ref.ob, depsgraph.scene) is not None:
                refs["target" if what == "target" else "pole"] = replace(ref, hidden=True)
                continue
            goal = "Sinew goal" if g.tree < 0 else f'IK constraint "{g.constraint}"'
            if ref.vertex_group:
                plain = " (a vertex group is read from the mesh as Blender evaluates it)"
            elif ref.bone:
                plain = ""
            else:
                plain = (" (Sinew reads a hidden target only when it is a plain object: no parent, no constraints, no "
                         "drivers, animated only by its own keys)")
            instead = (", or use a Blender IK constraint, whose targets Blender evaluates" if g.tree < 0 else "")
            raise ReadError(
                f'Bone "{g.owner or g.bone}": the {goal}\'s {what} {ref.describe()} is not evaluated by Blender '
                f"({not_evaluated_reason(ref.ob, depsgraph)}), so Sinew cannot know where it is{plain}. Enable it in "
                "viewports or include its collection (hiding it with the eye icon instead is fine: Blender still "
                f"evaluates it){instead}; nothing was changed")
        out.append(replace(g, **refs) if refs else g)
    return out


# Sinew goal kinds (properties.GOAL_KINDS) by the engine's names. Line, Plane and Half-Space
# take a vector from the target's axes in armature space (``RigProblem.sample_vectors``); Aim an
# axis of the effector bone (``axis_vector``); Position and Orientation none.
KINDS = {'POSITION': "position", 'ORIENTATION': "orientation", 'AIM': "aim", 'LINE': "line", 'PLANE': "plane",
         'HALF_SPACE': "half_space"}
# The engine's keyword for each kind's vector.
KIND_VECTOR = {"aim": "axis", "line": "direction", "plane": "normal", "half_space": "normal"}
# Kinds whose goal is a point of the effector (its tail or head) on something.
POINT_KINDS = ("position", "line", "plane", "half_space")
# Kinds whose vector is an axis of the target, turned with it.
TARGET_AXIS_KINDS = ("line", "plane", "half_space")
KIND_LABELS = {"position": "Position", "orientation": "Orientation", "aim": "Aim", "line": "Line", "plane": "Plane",
               "half_space": "Half-Space"}


def axis_vector(name: str) -> tuple[float, float, float]:
    """The unit vector of an axis item of ``properties.AXES`` ('X', ..., 'NEG_Z')."""
    sign = -1.0 if name.startswith("NEG_") else 1.0
    i = "XYZ".index(name[-1])
    return tuple(sign if j == i else 0.0 for j in range(3))


@dataclass
class GoalSpec:
    bone: str                    # effector pose bone
    target: TargetRef
    use_tail: bool
    weight: float
    use_orientation: bool
    chain_length: int            # the engine's meaning: bones from the effector up, 0 = to the root
    pole: TargetRef | None
    pole_angle: float
    source: str                  # for the UI: "Sinew" or 'IK "name"'
    constraint: str = ""         # the Blender IK constraint this goal comes from, if any
    influence: float = 1.0       # how far the goal moves toward its target from the effector before IK
                                 # (RigProblem.blend_goals): the constraint's influence, 0 when muted
    tree: int = -1               # the Blender IK tree of its constraint (ik_trees), -1 for a Sinew goal
    tree_blend: float = 1.0      # how far the tree's bones turn from before IK (RigProblem.blend_result)
    stretch: bool = False        # whether its tree stretches (Blender's tree->stretch)
    owner: str = ""              # the bone that carries the Sinew goal or the IK constraint
    kind: str = "position"       # the engine's goal kind (KINDS); IK constraints are position goals
    axis: str = ""               # line / plane / half-space: the target's axis ('X' .. 'NEG_Z'); aim: the bone's

    @property
    def reports_angle(self) -> bool:
        """Whether the goal's orientation residual means something (a rotation to match, or an aim)."""
        return self.use_orientation or self.kind == "aim"


@dataclass
class LimitSpec:
    """One bone's limits, in the form the engine's setters take."""

    swing: str = "free"          # "free", "cone", "cone_blender", "hinge"
    cone: tuple = ()             # cone: (x_pos, x_neg, z_pos, z_neg); cone_blender: (min_x, max_x, min_z, max_z)
    hinge: tuple = ()            # (axis (3,), min, max)
    twist: tuple | None = None   # (min, max)
    locked: bool = False
    stiffness: float = 0.0       # the largest of the three axes'
    stiffness_axes: tuple | None = None  # (x, y, z) per local axis where they differ
    stretch: float = 0.0         # ik_stretch where the bone's IK tree stretches (Blender's rule), else 0
    source: str = ""             # where each part comes from ("IK lock X, Sinew twist"), for messages
    from_blender: str = ""       # the Blender IK locks and limits kept (read_limit), for the Limits panel

    @property
    def is_free(self) -> bool:
        return (self.swing == "free" and self.twist is None and not self.locked and self.stiffness == 0.0
                and self.stretch == 0.0)


def _deleted(ob) -> bool:
    """True for an object that is in no collection any more (deleted from the scene; Sinew's
    own target pointer keeps such an object alive, but Blender no longer evaluates it)."""
    return ob.library is None and not ob.users_collection and not ob.users_scene


def _check_target(ob, subtarget, what, owner) -> TargetRef:
    """A Sinew goal's target or pole (``what``: "Sinew goal" or "Sinew pole"): object ``ob``, or
    its bone or vertex group ``subtarget`` (``vertex_group_ref``); ReadError naming bone ``owner``
    for a missing or deleted object, or a subtarget it does not have."""
    if ob is None:
        raise ReadError(f'Bone "{owner}": {what} target is missing')
    if _deleted(ob):
        raise ReadError(f'Bone "{owner}": {what} target "{ob.name}" was deleted from the scene (it is in no '
                        "collection); pick another target")
    if subtarget:
        if ob.type in VERTEX_GROUP_TYPES:
            if ob.vertex_groups.get(subtarget) is None:
                raise ReadError(f'Bone "{owner}": {what} target "{ob.name}" has no vertex group "{subtarget}"')
            return vertex_group_ref(ob, subtarget, f'Bone "{owner}"', f"{what} target")
        if ob.type != 'ARMATURE':
            raise ReadError(f'Bone "{owner}": {what} target "{ob.name}" is not an armature or a mesh, so it has no '
                            f'bone or vertex group "{subtarget}": clear that field under the target')
        if ob.pose is None or ob.pose.bones.get(subtarget) is None:
            raise ReadError(f'Bone "{owner}": {what} target armature "{ob.name}" has no bone "{subtarget}"')
    return TargetRef(ob, subtarget)


# Object types whose vertex groups a constraint's target can name (Blender's
# OB_TYPE_SUPPORT_VGROUP); Sinew reads a mesh's (vertex_group_matrix), not a lattice's.
VERTEX_GROUP_TYPES = ('MESH', 'LATTICE')


def vertex_group_ref(ob, name: str, where: str, what: str) -> TargetRef:
    """The target or pole (``what``, for the message after ``where``) that is vertex group
    ``name`` of object ``ob`` (a ``VERTEX_GROUP_TYPES`` object that has the group). ReadError,
    changing nothing, for a lattice's group (Blender's IK aims at the plain mean of the lattice
    points in it, as its modifiers and shape keys deform them, which Sinew does not read) and for
    a mesh in Edit Mode (Blender then reads the group from the edit mesh, unevaluated)."""
    if ob.type == 'LATTICE':
        raise ReadError(
            f'{where}: the {what} is vertex group "{name}" of lattice "{ob.name}", which Sinew cannot read (it reads '
            f"a mesh's vertex groups). Add an Empty parented to those lattice points (Parent type Vertex or Vertex "
            f"(Triangle)) and make it the {what} instead; nothing was changed")
    if ob.mode == 'EDIT':
        raise ReadError(
            f'{where}: the {what} is vertex group "{name}" of mesh "{ob.name}", which is in Edit Mode (Blender then '
            f'reads the group from the edit mesh, which Sinew cannot): leave Edit Mode on "{ob.name}"; nothing was '
            "changed")
    return TargetRef(ob, vertex_group=name)


def _constraint_ref(ob, subtarget: str, where: str, what: str, warnings: list[str]) -> TargetRef:
    """An IK constraint's target or pole (``what``) as Blender's IK reads it
    (``constraint_target_to_mat4``): a bone of an armature, a vertex group of a mesh
    (``vertex_group_ref``, which refuses a lattice's), else the object: Blender ignores the name
    on other objects, and takes the object's origin for a vertex group the object does not have
    (with a warning here)."""
    if not subtarget or ob.type not in ('ARMATURE', *VERTEX_GROUP_TYPES):
        return TargetRef(ob)
    if ob.type == 'ARMATURE':
        return TargetRef(ob, subtarget)
    if ob.vertex_groups.get(subtarget) is None:
        warnings.append(f'{where} names vertex group "{subtarget}", which "{ob.name}" does not have: Blender\'s IK '
                        f"then aims its {what} at the object's origin, and so does Sinew")
        return TargetRef(ob)
    return vertex_group_ref(ob, subtarget, where, what)


def deforms(arm_ob, ob) -> bool:
    """Whether armature object ``arm_ob`` deforms object ``ob``'s mesh: an Armature modifier of
    ``ob`` on it (shown in the viewport), or an Armature parent."""
    return ((ob.parent == arm_ob and ob.parent_type == 'ARMATURE')
            or any(m.type == 'ARMATURE' and m.object == arm_ob and m.show_viewport for m in ob.modifiers))


# ``follows_moved_bones``' name for an object's deformed geometry (its vertices as Blender evaluates
# them, which an Armature modifier or an Armature parent moves with the bones), as opposed to its
# transform ("") or one of its bones.
GEOMETRY = "\0geometry"


def _constraint_references(c):
    """(object, bone name, ``GEOMETRY`` or "") for every target of constraint ``c``: its target,
    an IK constraint's pole target, an Armature constraint's targets; a bone only on an armature;
    a mesh's or lattice's vertex group, or a Shrinkwrap target, is its geometry."""
    pairs = [(getattr(c, "target", None), getattr(c, "subtarget", "")),
             (getattr(c, "pole_target", None), getattr(c, "pole_subtarget", ""))]
    pairs += [(t.target, t.subtarget) for t in getattr(c, "targets", ())]
    for ob, sub in pairs:
        if ob is None:
            continue
        if ob.type == 'ARMATURE':
            yield ob, sub or ""
        else:
            yield ob, GEOMETRY if (sub or c.type == 'SHRINKWRAP') else ""




def follows_moved_bones(ob, bone: str, moved: dict) -> set:
    """The armatures of ``moved`` ({armature object: names of the bones a call moves}) some of
    whose moved bones object ``ob`` (with ``bone``: that bone of armature ``ob``; ``GEOMETRY``:
    its deformed geometry, a vertex group's) follows in Blender's evaluation: the bone itself, the
    bones it hangs from, the object's parent (a Bone parent: that bone; a Vertex parent: the
    parent's geometry; any other parent type: the parent object, which no call moves), the
    armatures deforming a geometry (``deforms``) and the targets of the constraints in effect
    on each of them, followed on. Drivers are not."""
    found, seen, todo = set(), set(), [(ob, bone)]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        o, name = node
        if name == GEOMETRY:
            found |= {arm for arm, names in moved.items() if names and deforms(arm, o)}
            todo.append((o, ""))
            continue
        if name:
            pb = o.pose.bones.get(name) if o.type == 'ARMATURE' and o.pose is not None else None
            if pb is None:
                continue
            if name in moved.get(o, ()):
                found.add(o)
            if pb.parent is not None:
                todo.append((o, pb.parent.name))
            todo.append((o, ""))
            constraints = pb.constraints
        else:
            if o.parent is not None:
                todo.append((o.parent, o.parent_bone if o.parent_type == 'BONE' else
                             GEOMETRY if o.parent_type in ('VERTEX', 'VERTEX_3') else ""))
            constraints = o.constraints
        for c in constraints:
            if not is_off(c):
                todo.extend(_constraint_references(c))
    return found


@dataclass
class IKTarget:
    """One Blender IK constraint as Blender's IK places it in a tree (``PoseTarget``)."""

    owner: str                   # the constraint's pose bone
    constraint: object           # the bpy constraint
    tip: str                     # the chain's tip: the owner, or its parent with Use Tail off
    chain: list[str]             # tip first, up to the chain's root
    active: bool                 # not muted and with influence
    influence: float             # Blender's ``enforce``, 0 when muted (``CONSTRAINT_OFF``)


@dataclass
class IKTree:
    """A Blender IK tree (``PoseTree``): constraints whose chains share a root bone, solved
    together; what influence and stretch do is decided per tree."""

    root: str
    bones: list[str]
    targets: list[IKTarget]
    stretch: bool                # ``tree->stretch``


def is_off(c) -> bool:
    """Whether constraint ``c`` is switched off: muted, invalid or at influence 0 (Blender then
    ignores it)."""
    return c.mute or not c.is_valid or c.influence <= 0.0


def constraint_enforce(c) -> float:
    """Constraint ``c``'s influence as Blender's evaluation applies it now (its ``enforce``): 0
    when muted, else its influence."""
    return 0.0 if c.mute else float(min(1.0, max(0.0, c.influence)))


@dataclass
class ConstraintInfluences:
    """Every constraint of an armature's pose bones: its influence as Blender applies it (0 while
    muted, ``constraint_enforce``) at each frame of a bake's range, as
    ``pipeline.constraint_influences`` samples them. A bake reads the rig with these
    (``read(influences=...)``): its goals are the IK constraints with influence at some frame of
    the range, and each frame gets its own influence (``RigProblem.frame_blends``)."""

    frames: np.ndarray           # (F,)
    columns: dict                # (bone, constraint name) -> column of ``values``
    values: np.ndarray           # (F, C)

    def at(self, bone: str, name: str) -> np.ndarray:
        """(F,) the constraint's influence at each frame (0 for one not sampled)."""
        j = self.columns.get((bone, name))
        return np.zeros(len(self.frames)) if j is None else self.values[:, j]

    def peak(self, bone: str, name: str) -> float:
        """The constraint's largest influence over the frames."""
        v = self.at(bone, name)
        return float(v.max()) if v.size else 0.0

    @property
    def animated(self) -> bool:
        """Whether some constraint's influence changes over the frames."""
        return bool(self.values.size) and bool(np.any(self.values != self.values[:1]))


def ik_trees(ob, enforce=None) -> list[IKTree]:
    """The IK trees Blender's IK (iksolver_plugin.cc, ``initialize_posetree``) builds from the
    IK constraints of armature ``ob``, bones with a Sinew goal left out (their constraints are
    replaced). Per pose bone, in order, its IK constraints with a target (an armature target
    needs a bone) that are valid: each, muted or not, joins the tree whose root is its chain's
    root bone and one of whose tips is off its chain (else a new tree), and the bone's first
    constraint with influence ends the list (Blender supports one per bone). A new tree stretches
    when its first constraint has Use Stretch; a constraint joining it then sets
    ``tree->stretch = tree->stretch && !use_stretch`` (so two stretching chains in one tree do not
    stretch; measured in Blender 5.0). ``enforce(pose_bone, constraint)``: each constraint's
    influence (default ``constraint_enforce``, now); a constraint acts when it is above 0."""
    enforce = enforce or (lambda _pb, c: constraint_enforce(c))
    trees: list[IKTree] = []
    by_root: dict[str, list[IKTree]] = {}
    for pb in ob.pose.bones:
        if pb.sinew.use_goal:
            continue
        tip = pb
        for c in pb.constraints:
            if c.type != 'IK' or c.target is None or not c.is_valid:
                continue
            if c.target.type == 'ARMATURE' and not c.subtarget:
                continue
            if not c.use_tail and tip.parent is not None:
                tip = tip.parent  # (Blender moves the tip for the constraints after this one too)
            chain, b = [], tip
            while b is not None and len(chain) < 255:
                chain.append(b.name)
                if len(chain) == c.chain_count:
                    break
                b = b.parent
            influence = float(enforce(pb, c))
            target = IKTarget(pb.name, c, tip.name, chain, influence > 0.0, influence)
            on_chain = set(chain)
            tree = next((t for t in by_root.get(chain[-1], []) if any(x.tip not in on_chain for x in t.targets)), None)
            if tree is None:
                tree = IKTree(chain[-1], list(reversed(chain)), [], bool(c.use_stretch))
                by_root.setdefault(chain[-1], []).append(tree)
                trees.append(tree)
            else:
                tree.stretch = tree.stretch and not c.use_stretch
                tree.bones += [n for n in reversed(chain) if n not in tree.bones]
            tree.targets.append(target)
            if target.active:
                break
    return trees


def target_blends(tree: IKTree, t: IKTarget, influences: dict) -> tuple[np.ndarray, np.ndarray]:
    """Blender's influence rule (execute_posetree) for target ``t`` of ``tree``, given every
    target's influence per frame (``influences``: {id(target): (F,)}): (goal influence (F,), tree
    blend (F,)). Going through the tree's targets in order, once one has a pole the whole tree's
    result is blended with the pose before IK by the last poled one's influence and no goal
    after it moves; before that, a target's goal moves toward the tip's place before IK by its
    influence. On a frame where no target of the tree has influence Blender skips the tree: both
    are 0 (the goal held where its tip was, the tree's bones left as they were before IK)."""
    goal, blend, resultblend = None, None, False
    for x in tree.targets:
        if x.constraint.pole_target is not None:
            resultblend, blend = True, influences[id(x)]
        if x is t:
            goal = np.ones_like(influences[id(x)]) if resultblend else influences[id(x)]
    goal = np.asarray(goal, dtype=np.float64).copy()
    blend = np.ones_like(goal) if blend is None else np.asarray(blend, dtype=np.float64).copy()
    off = ~np.any([influences[id(x)] > 0.0 for x in tree.targets], axis=0)
    goal[off], blend[off] = 0.0, 0.0
    return goal, blend


def _tree_goal(ob, t: IKTarget, tree_index: int, tree: IKTree, itasc: bool, warnings: list[str]) -> GoalSpec | None:
    """The goal IK tree target ``t`` makes, with Blender's influence (execute_posetree): going
    through the tree's targets in order, once one has a pole the whole tree's result is blended
    with the pose before IK by that one's influence (``resultblend``, ``blend_m3_m3m3``) and no
    goal after it moves; before that, a target whose influence is below 1 (0 when muted) moves
    toward the tip's place before IK. A muted target that moves all the way holds its tip where
    it was. None (with a warning) for a constraint Sinew cannot import."""
    c, owner = t.constraint, t.owner
    goal_blend, blend = (float(v[0]) for v in target_blends(tree, t, {id(x): np.array([x.influence])
                                                                      for x in tree.targets}))
    holding = not t.active and goal_blend == 0.0
    where = f'Bone "{owner}": IK constraint "{c.name}"'
    if not holding:
        if _deleted(c.target):
            raise ReadError(f"{where} targets \"{c.target.name}\", which was deleted from the scene; pick another "
                            "target or mute the constraint")
        if itasc and c.ik_type == 'DISTANCE':
            raise ReadError(f"{where} is an iTaSC Distance constraint, which Sinew cannot solve; set its Type to "
                            "Copy Pose or mute it")
        if itasc and not c.use_location:
            raise ReadError(f"{where} has Position off (an iTaSC rotation-only goal), which Sinew cannot solve; turn "
                            "Position on or mute the constraint")
        if c.target.type == 'ARMATURE' and c.target.pose.bones.get(c.subtarget) is None:
            warnings.append(f'{where} targets missing bone "{c.subtarget}"; skipped')
            return None
        if c.target == ob and c.subtarget == owner:
            warnings.append(f"{where} targets its own bone; skipped")
            return None
    if not c.use_tail and ob.pose.bones[owner].parent is None:
        warnings.append(f"{where} has no chain (Use Tail is off on a bone without parent); skipped")
        return None
    if c.use_rotation and not itasc and not holding and abs(c.orient_weight - 1.0) > 1e-6:
        # (iTaSC's note lists it among what is not used.)
        warnings.append(f"{where}: its Rotation weight ({c.orient_weight:.3g}) is not used: a Sinew goal has one "
                        "weight, the constraint's Weight, for its position and rotation alike")
    pole = None
    if c.pole_target is not None:
        if c.pole_target.type == 'ARMATURE' and c.pole_subtarget and c.pole_target.pose.bones.get(c.pole_subtarget) is None:
            warnings.append(f'{where} pole bone "{c.pole_subtarget}" is missing; pole ignored')
        elif t.active:  # (only an acting constraint's pole turns the chain)
            pole = _constraint_ref(c.pole_target, c.pole_subtarget, where, "pole target", warnings)
    # (A muted constraint that holds its tip needs no target: any reference will do, the goal
    # is moved all the way to the tip's place before IK.)
    target = TargetRef(ob, "") if holding else _constraint_ref(c.target, c.subtarget, where, "target", warnings)
    # Without use_tail Blender leaves the constrained bone out of the chain: its parent is the
    # chain's tip, and the parent's tail (and, with use_rotation, its orientation) is what goes
    # to the target; chain_count counts from the parent.
    source = f'IK "{c.name}"' if c.use_tail else f'IK "{c.name}" on {owner} (Use Tail off)'
    if holding:
        source += " (muted: holds its tip, as in Blender's IK tree)"
    return GoalSpec(
        bone=t.tip, target=target, use_tail=True,
        # Influence is applied as Blender's IK applies it (RigProblem.blend_goals and
        # blend_result), not through the weight.
        weight=c.weight, influence=goal_blend, use_orientation=c.use_rotation, chain_length=c.chain_count,
        pole=pole, pole_angle=c.pole_angle, source=source, constraint=c.name,
        tree=tree_index, tree_blend=blend, stretch=tree.stretch, owner=owner,
    )


def read_goals(ob, enforce=None) -> tuple[list[GoalSpec], list[tuple[str, str]], list[str]]:
    """Goals of armature ``ob``: (goals, replaced IK constraints as (bone, constraint), warnings).
    ``enforce(pose_bone, constraint)``: the influence that decides whether an IK constraint acts
    (default ``constraint_enforce``: now; a bake passes each one's largest over its range, so a
    constraint with influence at any frame of it is a goal, ``ik_trees``).

    Raises ReadError for a Sinew goal without a usable target, and for one whose target is a bone
    of its own chain (``goal_chain``: the effector and the bones above it that it moves), as
    Blender's IK skips a constraint targeting its own bone.
    """
    enforce = enforce or (lambda _pb, c: constraint_enforce(c))
    goals: list[GoalSpec] = []
    replaced: list[tuple[str, str]] = []
    warnings: list[str] = []
    itasc = ob.pose is not None and ob.pose.ik_solver == 'ITASC'
    for pb in ob.pose.bones:
        s = pb.sinew
        ik_constraints = [c for c in pb.constraints if c.type == 'IK']
        if s.use_goal:
            target = _check_target(s.target, s.subtarget, "Sinew goal", pb.name)
            pole = None
            if s.pole_target is not None:
                pole = _check_target(s.pole_target, s.pole_subtarget, "Sinew pole", pb.name)
            kind = KINDS[s.goal_kind]
            if kind == "aim" and s.use_orientation:
                raise ReadError(f'Bone "{pb.name}": an Aim goal points the bone at its target and takes no rotation: '
                                "turn the goal's Rotation off, or make it a Position or Orientation goal")
            # Orientation matches the target's rotation (Rotation is implied); Aim and Orientation
            # act on the bone itself, so its tail or head does not matter.
            use_tail = s.use_tail if kind in POINT_KINDS else True
            goals.append(GoalSpec(
                bone=pb.name, target=target, use_tail=use_tail, weight=s.weight,
                use_orientation=s.use_orientation or kind == "orientation",
                chain_length=_engine_chain_length(s.chain_length, use_tail),
                pole=pole, pole_angle=s.pole_angle, source="Sinew" if kind == "position" else f"Sinew {KIND_LABELS[kind]}",
                owner=pb.name, kind=kind,
                axis=s.aim_axis if kind == "aim" else (s.goal_axis if kind in TARGET_AXIS_KINDS else ""),
            ))
            chain = goal_chain(ob, goals[-1])
            if target.ob == ob and target.bone in chain:
                which = "its own bone" if target.bone == pb.name else f'bone "{target.bone}" of its own chain'
                raise ReadError(f'Bone "{pb.name}": the Sinew goal targets {which}, which the solve moves, so the '
                                "target would move with the chain it pulls (Blender's IK refuses the same): pick a "
                                "bone outside the chain, another object, or shorten the chain; nothing was changed")
            # Blender IK on the same bone would fight the Sinew result: it is replaced too.
            replaced += [(pb.name, c.name) for c in ik_constraints if enforce(pb, c) > 0.0]
            continue
        for c in ik_constraints:
            if enforce(pb, c) <= 0.0:
                continue
            if c.target is None:
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" has no target (targetless IK is not imported)')
            elif c.target.type == 'ARMATURE' and c.subtarget and c.target.pose.bones.get(c.subtarget) is None:
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" targets missing bone "{c.subtarget}"; skipped')
            elif c.target == ob and c.subtarget == pb.name:
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" targets its own bone; skipped')
            elif c.target.type == 'ARMATURE' and not c.subtarget:
                # (Blender's IK ignores an armature target without a bone; on its own armature
                # Blender also marks the constraint invalid.)
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" targets armature "{c.target.name}" '
                                "without naming a bone, which Blender's IK ignores; skipped")
            elif not c.is_valid:
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" is not valid in Blender (red in the '
                                "constraint stack), so Blender's IK ignores it; skipped")
    for tree_index, tree in enumerate(ik_trees(ob, enforce)):
        if not any(t.active for t in tree.targets):
            continue  # Blender skips a tree none of whose constraints acts
        for t in tree.targets:
            spec = _tree_goal(ob, t, tree_index, tree, itasc, warnings)
            if spec is not None:
                goals.append(spec)
                if t.active:
                    replaced.append((t.owner, t.constraint.name))
    check_goal_values(goals)
    # (A constraint skipped both here and in its IK tree is named once.)
    return goals, replaced, list(dict.fromkeys(warnings))


def check_goal_values(goals: list[GoalSpec]) -> None:
    """Refuses (ReadError naming the bone, the Sinew goal or IK constraint, the setting and the
    value; nothing is changed) a goal whose Weight, or Pole Angle when it has a pole, is not a
    finite number. Blender's fields clamp what is typed into their range, but a NaN set through
    Python is stored as it is (and would reach the engine, whose error names only the goal's
    index, and a JSON export, which cannot hold it). Limits are checked by the engine when they
    are set (``apply_limit``)."""
    for g in goals:
        values = [("Weight", g.weight)] + ([("Pole Angle", g.pole_angle)] if g.pole is not None else [])
        for setting, value in values:
            if not math.isfinite(value):
                goal = "the Sinew goal" if g.tree < 0 else f'IK constraint "{g.constraint}"'
                shown = "NaN" if math.isnan(value) else f"{value}"
                raise ReadError(f'Bone "{g.owner or g.bone}": {goal} has {setting} {shown}, which is not a number: '
                                "set it to a number; nothing was changed")


def is_bone_selected(pb) -> bool:
    """True for a selected, visible pose bone (``PoseBone.select`` and ``hide`` in Blender 5.0,
    ``Bone.select`` and ``hide`` before)."""
    sel = pb.select if hasattr(pb, "select") else pb.bone.select
    hidden = pb.hide if hasattr(pb, "hide") else pb.bone.hide
    return bool(sel) and not hidden


def goal_chain(ob, g: GoalSpec) -> list[str]:
    """The bones of goal ``g``'s chain: its effector and the bones above it, as many as its
    chain length counts (0: up to the root)."""
    chain, b = [], ob.pose.bones[g.bone]
    while b is not None and (g.chain_length == 0 or len(chain) < g.chain_length):
        chain.append(b.name)
        b = b.parent
    return chain


def goal_handles(ob, g: GoalSpec) -> set[str]:
    """The bones of ``ob`` whose selection selects goal ``g`` for Only Selected Bones: the bone
    that carries the goal or IK constraint, the bones of its chain (``goal_chain``, the effector
    first), and its target and pole when they are bones of ``ob``, each with the bones that carry
    it: its parents up to one that also carries the chain (so the root above every bone does not
    select every goal). On a Rigify rig, whose IK constraints, their chains' end bones and their
    targets are hidden mechanism bones, the animator's IK control (``hand_ik.L``, the parent of
    the constraint's target) and the visible bone of the chain (``upper_arm_ik.L``) both select
    the arm's goal."""
    chain = goal_chain(ob, g)
    above_chain, b = set(), ob.pose.bones[chain[-1]]
    while b is not None:
        above_chain.add(b.name)
        b = b.parent
    handles = {g.owner or g.bone, *chain}
    for ref in (g.target, g.pole):
        if ref is not None and ref.ob == ob and ref.bone:
            handles.add(ref.bone)
            b = ob.pose.bones[ref.bone].parent
            while b is not None and b.name not in above_chain:
                handles.add(b.name)
                b = b.parent
    return handles


def selected_goals(ob, goals, replaced):
    """The goals (and the IK constraints they replace) of the selected bones of ``ob``: a goal
    counts when one of its ``goal_handles`` is selected."""
    selected = {pb.name for pb in ob.pose.bones if is_bone_selected(pb)}
    kept = [g for g in goals if not selected.isdisjoint(goal_handles(ob, g))]
    owners = {g.owner or g.bone for g in kept}
    return kept, [(bone, con) for bone, con in replaced if bone in owners]


def _engine_chain_length(chain_length: int, use_tail: bool) -> int:
    """A Sinew goal's chain length for the engine: the engine counts from the effector bone also
    when it pulls the bone's head, where the bone's own rotation cannot help; the Sinew setting
    counts the bones that can (as Blender's chain_count does), so one more is passed."""
    if chain_length == 0:
        return 0
    return chain_length if use_tail else chain_length + 1


# What bounds one rotation axis of a bone (X or Z: the swing about it, Y: the twist): None (free),
# LOCKED, or a (min, max) range in radians.
LOCKED = "locked"


def blender_axis_bound(pb, axis: str):
    """What Blender's IK settings of pose bone ``pb`` put on its local ``axis`` ('x', 'y' or 'z'):
    LOCKED (Lock IK), its (ik_min, ik_max) (Limit), or None (free)."""
    if getattr(pb, f"lock_ik_{axis}"):
        return LOCKED
    if getattr(pb, f"use_ik_limit_{axis}"):
        return (getattr(pb, f"ik_min_{axis}"), getattr(pb, f"ik_max_{axis}"))
    return None


_FULL_TURN = (-math.pi, math.pi)


def _blender_cone_bounds(bound) -> tuple[float, float]:
    """(min, max) of a swing axis in Blender's cone shape (``set_cone_limit_blender``): a locked
    axis 0 both ways (``ConeLimit::from_blender`` makes that its zero bound: Blender's elbow), a
    limited one its range widened to ZERO_HALF_ANGLE where it is 0 (the core allows no zero
    half-angle), a free one a half turn."""
    if bound is LOCKED:
        return 0.0, 0.0
    lo, hi = bound or _FULL_TURN
    return min(lo, -ZERO_HALF_ANGLE), max(hi, ZERO_HALF_ANGLE)


def read_limit(pb) -> LimitSpec:
    """One bone's limits, Blender's per-axis IK settings merged with Sinew's by one rule: Sinew's
    cone replaces Blender's lock or limit on X and Z, Sinew's twist range the one on Y, and every
    other axis keeps Blender's lock or limit (an elbow locked on X and Y with a Sinew twist still
    swings only about Z; with a Sinew cone it still does not twist). Sinew's lock holds the bone
    whatever the rest says, and its stiffness, when not 0, replaces Blender's per-axis IK
    stiffness. ``source`` names where each part comes from (Blender's lock or limit per axis,
    Sinew's settings), for messages; ``from_blender`` the Blender locks and limits kept, for the
    Limits panel.

    In the core's terms (``apply_limit``): the swing is Sinew's cone, or from Blender's X and Z
    a hinge when only one axis is left free (one swing axis and Y locked: a hinge about the
    other; both swing axes locked: a hinge about Y over the twist's range), Blender's elbow
    (``IK_QElbowSegment``: one swing axis locked, a cone whose locked axis has half-angles of 0)
    or Blender's cone shape; the twist is Y's range (a lock is the range [0, 0]); all three
    locked is a locked bone."""
    s = pb.sinew
    lim = LimitSpec()
    x, y, z = (blender_axis_bound(pb, a) for a in "xyz")
    kept = [f"IK {'lock' if bound is LOCKED else 'limit'} {a}"
            for a, bound, replaced in (("X", x, s.use_cone), ("Y", y, s.use_twist), ("Z", z, s.use_cone))
            if bound is not None and not replaced]
    sources = kept + (["Sinew cone"] if s.use_cone else []) + (["Sinew twist"] if s.use_twist else [])
    if s.use_twist:
        y = (s.twist_min, s.twist_max)
    twist = (0.0, 0.0) if y is LOCKED else y
    if s.use_cone:
        lim.swing, lim.cone, lim.twist = "cone", (s.cone_x_pos, s.cone_x_neg, s.cone_z_pos, s.cone_z_neg), twist
    elif x is LOCKED and z is LOCKED and y is LOCKED:
        lim.locked = True
    elif x is LOCKED and z is LOCKED:
        # No swing at all, only the twist: a hinge about the bone's own axis.
        lim.swing, lim.hinge = "hinge", ((0.0, 1.0, 0.0), *(twist or _FULL_TURN))
    elif (x is LOCKED or z is LOCKED) and y is LOCKED:
        # One swing axis and the twist locked: a hinge about the other swing axis.
        axis, bound = ((0.0, 0.0, 1.0), z) if x is LOCKED else ((1.0, 0.0, 0.0), x)
        lim.swing, lim.hinge = "hinge", (axis, *(bound or _FULL_TURN))
    else:
        if x is not None or z is not None:
            lim.swing, lim.cone = "cone_blender", (*_blender_cone_bounds(x), *_blender_cone_bounds(z))
        lim.twist = twist
    # Blender's IK weights each local axis by 1 - ik_stiffness (IK_QSegment::SetWeight); the
    # engine does the same in its damped-least-squares steps (FABRIK's own use the largest).
    axes = tuple(min(float(v), MAX_STIFFNESS) for v in (pb.ik_stiffness_x, pb.ik_stiffness_y, pb.ik_stiffness_z))
    lim.stiffness = max(axes)
    if not axes[0] == axes[1] == axes[2]:
        lim.stiffness_axes = axes
    if any(v != 0.0 for v in axes) and s.stiffness == 0.0:
        sources.append("IK stiffness")
    if s.lock:
        lim.locked = True
        sources, kept = ["Sinew lock"], []
    if s.stiffness != 0.0:  # (a NaN set through Python goes to the engine, which refuses it)
        lim.stiffness, lim.stiffness_axes = s.stiffness, None
        sources.append("Sinew stiffness")
    lim.source, lim.from_blender = ", ".join(sources), ", ".join(kept)
    return lim


def apply_limit(rig, name: str, lim: LimitSpec) -> None:
    """Sets ``lim`` on bone ``name`` of the engine rig. Raises ReadError naming the bone."""
    sinew = engine()
    try:
        rig.clear_limits(name)
        if lim.swing == "cone":
            rig.set_cone_limit(name, *lim.cone)
        elif lim.swing == "cone_blender":
            rig.set_cone_limit_blender(name, *lim.cone)
        elif lim.swing == "hinge":
            axis, lo, hi = lim.hinge
            rig.set_hinge_limit(name, np.asarray(axis, dtype=np.float64), lo, hi)
        if lim.twist is not None:
            rig.set_twist_limit(name, *lim.twist)
        if lim.locked:
            rig.set_locked(name, True)
        if lim.stiffness_axes is not None:
            rig.set_stiffness(name, *lim.stiffness_axes)
        elif lim.stiffness != 0.0:
            rig.set_stiffness(name, lim.stiffness)
        if lim.stretch != 0.0:
            rig.set_stretch(name, lim.stretch)
    except sinew.SinewError as ex:
        src = f" ({lim.source})" if lim.source else ""
        raise ReadError(f'Bone "{name}": bad limit{src}: {ex}') from ex


# --------------------------------------------------------------------------------------------
# The problem
# --------------------------------------------------------------------------------------------
#
# The engine gets only the bones the goals move, plus
# * an "anchor" above every chain that hangs from bones no goal moves: a root whose rest matrix
#   is that parent's *evaluated* pose matrix (armature space), so everything above the chains
#   (animation, drivers, constraints, inheritance flags, Rigify's mechanism bones) is taken
#   exactly as Blender evaluates it;
# * "connectors": unmoved bones between moved ones (a shoulder between a moved chest and a moved
#   arm), posed by their own rotation and carried along.
# Moved bones and connectors keep Blender's rest relation to their parent
# (parent.matrix_local⁻¹ · matrix_local), so the engine's local rotations are their
# rotation_quaternion.
#
# Scale above the chains. Bones below an anchor inherit its evaluated scale: under an anchor
# scaled uniformly by s (a character resized by its root control) a chain is s times its rest
# size in armature space. The engine's rig is rigid, so each engine root's subtree is solved in
# its own "engine frame", armature space scaled by 1/s about the root's head h: a point p is
# h + (p - h) / s there (``to_engine``), where the chain has its rest size. The scale being
# uniform, rotations are the same in both frames: the solved rotations are Blender's
# rotation_quaternion as they are, only points (targets, poles) go in converted and distances
# (residuals) come back times s (``to_armature_distances``). A non-uniform, mirrored or zero
# scale above a chain has no such frame and is refused (``anchor_scales``). A moved root has no
# bone above it; the armature object's own scale is divided out by armature space.


@dataclass
class RigProblem:
    """An armature read for the engine: the rig (with limits), the goals, and how to sample them."""

    ob: object
    names: list[str]                  # engine bones: moved bones and anchors, parents first
    parents: list[int]
    anchors: list[str]                # unmoved bones the chains hang from (engine roots, evaluated pose)
    connectors: list[str]             # unmoved bones between moved ones (posed by their rotation)
    lengths: np.ndarray               # (N,)
    rest: np.ndarray                  # (N, 4, 4) rest matrices the engine rig was built with
    rig: object                       # sinew.Rig
    goals: list[GoalSpec]
    replaced: list[tuple[str, str]]   # Blender IK constraints the goals replace (bone, constraint)
    warnings: list[str]
    root_bone: str | None             # engine bone 0 when it is a real root the goals move, else None
    sub_bases: list[str] = field(default_factory=list)
    moved: list[list[str]] = field(default_factory=list)   # per goal
    limits: dict = field(default_factory=dict)              # name -> LimitSpec, non-free only
    # (N,) at the frame read: each engine root's uniform scale in Blender's evaluated pose (an
    # anchor's; 1 for a moved root and for every bone with a parent); see ``anchor_scales``.
    scales_above: np.ndarray | None = None
    trees: list = field(default_factory=list)               # the IK trees (ik_trees) the goals' ``tree`` index
    # A bake's: every constraint's influence at each frame of its range (ConstraintInfluences);
    # None when read for the current frame (Solve IK), whose influences the goals hold.
    influences: ConstraintInfluences | None = None
    # Sinew goals whose target is a bone of this armature that follows bones the solve moves:
    # the solve aims at where it was before; the check of Blender's evaluated pose re-reads it.
    moving_targets: list[int] = field(default_factory=list)

    @property
    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    @property
    def stretches(self) -> bool:
        """Whether some moved bone may stretch (Blender's IK Stretch): solves then key scale."""
        return any(lim.stretch > 0.0 for lim in self.limits.values())

    def local_scales(self, scales) -> np.ndarray:
        """The engine's length scales (..., N), each a bone's length over its rest length, as
        Blender pose scales (uniform, as Blender's IK shows a stretched bone): each bone's over its
        parent's (the parent's scale carries to the child with default inheritance)."""
        scales = np.asarray(scales, dtype=np.float64)
        parents = np.asarray(self.parents)
        parent_scales = np.where(parents >= 0, scales[..., np.maximum(parents, 0)], 1.0)
        return scales / parent_scales

    def pose_length_scales(self, pose_bones, frame=None) -> np.ndarray | None:
        """The engine's length scales (N,) of the pose in ``pose_bones`` (original or evaluated
        pose bones: the pose before IK, a stretch keyed by an earlier solve included); None when
        no moved bone stretches (``stretches``). The inverse of ``local_scales``: a bone that
        stretches is its pose scale's Y (its length over its parent's) times its parent's length
        scale; every other bone keeps its rest length, 1 (the engine's rule). ReadError naming the
        bone (and ``frame``, when given) when a stretching bone's length is not one the engine
        starts from: finite and within [1e-3, 1e3] times its rest length."""
        if not self.stretches:
            return None
        out = np.ones(len(self.names))
        for i, name in enumerate(self.names):  # (parents first)
            lim = self.limits.get(name)
            if lim is None or lim.stretch <= 0.0:
                continue
            p = self.parents[i]
            y = float(pose_bones[name].scale[1])
            s = y * (out[p] if p >= 0 else 1.0)
            if not (math.isfinite(s) and MIN_LENGTH_SCALE <= s <= MAX_LENGTH_SCALE):
                at = "" if frame is None else f" at frame {frame}"
                raise ReadError(f'Bone "{name}": its pose scale (Y {y:.6g}){at} makes it {s:.6g} times its rest '
                                f"length; IK Stretch starts from the bone's length as the pose shows it, and Sinew "
                                f"takes {MIN_LENGTH_SCALE:g} to {MAX_LENGTH_SCALE:g} times the rest length: set its "
                                "scale (Alt+S clears it). Nothing was changed")
            out[i] = s
        return out

    @property
    def moved_bones(self) -> list[str]:
        """Every bone some goal moves, in rig order."""
        fixed = set(self.anchors) | set(self.connectors)
        return [n for n in self.names if n not in fixed]

    # -- rest data --------------------------------------------------------------------------

    def rest_for(self, anchor_bones, moved_bones) -> np.ndarray:
        """(N, 4, 4) the engine's rest data (``make_rig`` builds a rig from it): each root bone's
        armature-space rest matrix (an anchor at its pose in ``anchor_bones``, evaluated pose
        bones), and every other bone's rest relative to its root's frame, as in Blender's rest,
        with the pose location of unconnected bones (other than the root) folded in from
        ``moved_bones``. The relative rests are read from the armature alone (not through the
        anchors' pose), so they are the same numbers at every frame where nothing folded in
        changes: a bake's sequence moves only the roots (``root_rests``), and its frames solve the
        rig Solve IK solves at that frame, to the bit. (A bone with Inherit Rotation off keeps its
        rest orientation in armature space, so its relative rest follows the anchor's pose: a
        bake solves such a rig frame by frame, as it does a folded location that changes.)"""
        ob = self.ob
        bones = ob.data.bones
        out = np.zeros((len(self.names), 4, 4))
        world, relative, root_of = {}, {}, {}
        for i, name in enumerate(self.names):
            b = bones[name]
            if self.parents[i] < 0:
                # A root: an anchor at its pose (rotation and translation only), else its rest,
                # with its pose location folded in unless it is bone 0 (whose translation the
                # engine poses).
                if name in self._anchor_set:
                    m = anchor_bones[name].matrix.normalized()
                else:
                    m = b.matrix_local
                    loc = moved_bones[name].location
                    if name != self.root_bone and loc.length_squared > 0.0:
                        m = m @ Matrix.Translation(loc)
                world[name], relative[name], root_of[name] = m, Matrix.Identity(4), name
                out[i] = np.array(m)
                continue
            step = b.parent.matrix_local.inverted() @ b.matrix_local
            m, r = world[b.parent.name] @ step, relative[b.parent.name] @ step
            root = root_of[name] = root_of[b.parent.name]
            if not b.use_inherit_rotation:
                # Blender's hinge (Inherit Rotation off): the head follows the parent, the
                # orientation is the bone's rest orientation (check_relations allows this on a
                # chain's top bone only, where the parent's frame is fixed).
                m = Matrix.Translation(m.translation) @ b.matrix_local.to_3x3().to_4x4()
                r = world[root].inverted() @ m
            # The engine poses only bone 0's translation. Any other unconnected bone's pose
            # location is an offset of its head in its rest frame: folded into its rest.
            if name != self.root_bone and not b.use_connect:
                loc = moved_bones[name].location
                if loc.length_squared > 0.0:
                    m, r = m @ Matrix.Translation(loc), r @ Matrix.Translation(loc)
            world[name], relative[name] = m, r
            out[i] = np.array(r)
        return out

    def anchor_scales(self, anchor_bones, frame=None) -> np.ndarray:
        """(N,) the uniform scale of every anchor in evaluated pose bones ``anchor_bones`` (the
        scale its chains inherit, which ``rest_for`` leaves out of the rest matrices), 1 for the
        other bones. ReadError naming the anchor (and ``frame``, when given) where that scale is
        not uniform, is mirrored or is zero: no engine frame then matches Blender's chain (see
        "Scale above the chains")."""
        out = np.ones(len(self.names))
        for i, name in self._anchor_rows:
            out[i] = self._uniform_scale(anchor_bones, name, frame)
        return out

    def _uniform_scale(self, pose_bones, name, frame) -> float:
        m3 = pose_bones[name].matrix.to_3x3()
        # (Per bone and frame while a bake samples: mathutils, not numpy's per-call overhead.)
        cols = m3.col
        norms = [c.length for c in cols]
        s = sum(norms) / 3.0
        tol = UNIFORM_SCALE_TOLERANCE
        if (s > 1e-9 and math.isfinite(s) and max(abs(n - s) for n in norms) <= tol * s and m3.determinant() > 0.0
                and max(abs(cols[i].dot(cols[j])) for i, j in ((0, 1), (0, 2), (1, 2))) <= tol * s * s):
            return s
        m = np.array(m3, dtype=np.float64)
        bad = _scale_problem(m)
        if bad is None:
            return float(np.linalg.norm(m, axis=0).mean())
        # Name the bone the scale comes from: the highest one above the anchor that has it too.
        source, b = name, pose_bones[name].parent
        while b is not None and _scale_problem(np.array(b.matrix.to_3x3(), dtype=np.float64)) is not None:
            source, b = b.name, b.parent
        i = self.index[name]
        below = [g.bone for g, r in zip(self.goals, self.goal_roots()) if r == i]
        chain = f' (the chain of bone "{below[0]}" hangs from it)' if below else ""
        origin = "" if source == name else f', from bone "{source}" above it'
        at = "" if frame is None else f" at frame {frame}"
        raise ReadError(f'Bone "{name}"{chain} is {bad} in the pose{at}{origin}; Sinew follows only a uniform '
                        "scale of the bones above its chains (as when a character is resized by its root): "
                        "make that scale uniform, or solve with Blender's IK. Nothing was changed")

    def goal_roots(self) -> np.ndarray:
        """(G,) the engine root above each goal's effector (the root whose frame the goal is
        solved in, see "Scale above the chains")."""
        idx, out = self.index, []
        for g in self.goals:
            i = idx[g.bone]
            while self.parents[i] >= 0:
                i = self.parents[i]
            out.append(i)
        return np.array(out, dtype=np.int64)

    def goal_scales(self, scales) -> np.ndarray:
        """(..., G) each goal's scale of armature space over its engine frame, from the roots'
        scales (..., N) (``anchor_scales``)."""
        return np.asarray(scales, dtype=np.float64)[..., self.goal_roots()]

    def to_engine(self, points, rest, scales, inverse=False) -> np.ndarray:
        """Points (..., G, 3) of armature space, one per goal, in each goal's engine frame for rest
        matrices (..., N, 4, 4) and roots' scales (..., N): ``h + (p - h) / s`` about its root's
        head h (see "Scale above the chains"); ``inverse``: from the engine frame back."""
        roots = self.goal_roots()
        heads = np.asarray(rest, dtype=np.float64)[..., :3, 3][..., roots, :]
        s = self.goal_scales(scales)[..., None]
        points = np.asarray(points, dtype=np.float64)
        return heads + (points - heads) * (s if inverse else 1.0 / s)

    def to_armature_distances(self, distances, scales) -> np.ndarray:
        """Distances (..., G) measured in the goals' engine frames (the engine's residuals) in
        armature space, for roots' scales (..., N)."""
        return np.asarray(distances, dtype=np.float64) * self.goal_scales(scales)

    def root_rests(self, rests):
        """For per-frame engine rests ``rests`` (F, N, 4, 4, ``rest_for``) in which only the root
        bones' frames move (animated bones above the chains): the roots' (F, R, 4, 4), which the
        engine's sequence takes (``root_rests``); None where some other bone's rest relative to
        its root changes (a keyed location folded into its rest), which needs a rig per frame."""
        rests = np.asarray(rests)
        others = [i for i, q in enumerate(self.parents) if q >= 0]
        if others and np.any(rests[:, others] != rests[0, others]):
            return None
        return rests[:, self._root_rows]

    def make_rig(self, rest):
        """A new engine rig with ``rest`` (``rest_for``) and this problem's limits: the bones
        built with every root at the origin, then each root moved to its rest
        (``Rig.set_root_rest``), exactly as a bake's sequence moves the roots at each frame."""
        sinew = engine()
        rest = np.asarray(rest, dtype=np.float64)
        at_origin = rest.copy()
        at_origin[self._root_rows] = np.eye(4)
        try:
            rig = sinew.Rig(self.names, np.asarray(self.parents, dtype=np.int64), at_origin, self.lengths)
            for i in self._root_rows:
                rig.set_root_rest(i, rest[i])
        except sinew.SinewError as ex:
            raise ReadError(f'Armature "{self.ob.name}": {ex}') from ex
        for name, lim in self.limits.items():
            apply_limit(rig, name, lim)
        return rig

    # (Built once: a bake reads them at every frame. ``names`` and ``anchors`` are not changed
    # after a problem is made.)
    @cached_property
    def _anchor_set(self) -> frozenset[str]:
        return frozenset(self.anchors)

    @cached_property
    def _root_rows(self) -> list[int]:
        """The engine rig's root bones (no parent in it), in rig order: the bones ``rest_for``
        gives in armature space and a sequence's ``root_rests`` moves."""
        return [i for i, q in enumerate(self.parents) if q < 0]

    @cached_property
    def _anchor_rows(self) -> list[tuple[int, str]]:
        """(engine index, name) of every anchor, in rig order."""
        index = self.index
        return [(index[n], n) for n in self.anchors]

    # -- sampling -------------------------------------------------------------------------

    def sample_goals(self, depsgraph):
        """Every goal's target, orientation and pole in armature space for the evaluated scene:
        arrays (G, 3), (G, 4) wxyz, (G, 3)."""
        ob_eval = self.ob.evaluated_get(depsgraph)
        to_arm = armature_inverse(self.ob, ob_eval.matrix_world)
        g = len(self.goals)
        targets = np.zeros((g, 3))
        orients = np.zeros((g, 4))
        orients[:, 0] = 1.0
        poles = np.zeros((g, 3))
        for i, spec in enumerate(self.goals):
            m = to_arm @ spec.target.world_matrix(depsgraph)
            targets[i] = m.translation
            if spec.use_orientation:
                orients[i] = orientation_quaternion(m.to_3x3(), spec)
            if spec.pole is not None:
                poles[i] = (to_arm @ spec.pole.world_matrix(depsgraph)).translation
        return targets, orients, poles

    def sample_vectors(self, depsgraph) -> np.ndarray:
        """(G, 3) every goal's kind vector for the evaluated scene: for a line, plane or
        half-space goal its target's axis (``GoalSpec.axis``) in armature space, normalised (NaN
        when the target's scale makes it zero: ``check_vectors`` reports it); for an aim goal its
        bone's axis (bone space); zero for the others."""
        ob_eval = self.ob.evaluated_get(depsgraph)
        to_arm = armature_inverse(self.ob, ob_eval.matrix_world)
        out = np.zeros((len(self.goals), 3))
        for i, spec in enumerate(self.goals):
            if spec.kind == "aim":
                out[i] = axis_vector(spec.axis)
            elif spec.kind in TARGET_AXIS_KINDS:
                m = np.array(to_arm @ spec.target.world_matrix(depsgraph))
                out[i] = target_axis(m[:3, :3], spec.axis)
        return out

    def check_vectors(self, vectors, frames) -> None:
        """Raises ReadError naming the goal, its target and the frame where a line's direction or
        a plane's normal (``vectors`` (F, G, 3)) is not finite or zero (the target's axis scaled to
        nothing)."""
        bad = ~np.all(np.isfinite(vectors), axis=-1)
        if bad.any():
            k, i = (int(v) for v in np.argwhere(bad)[0])
            spec = self.goals[i]
            what = "direction" if spec.kind == "line" else "normal"
            raise ReadError(f'Bone "{spec.bone}": the {KIND_LABELS[spec.kind]} goal\'s {what}, the {_axis_label(spec.axis)} '
                            f"axis of {spec.target.describe()}, is zero or not finite at frame {frames[k]} (a zero "
                            "scale, or NaN in its animation, drivers or constraints); fix the target's scale")

    def check_samples(self, targets, orients, poles, frames) -> None:
        """Raises ReadError naming the goal, its target and the frame where a sampled target,
        orientation or pole (arrays (F, G, ...)) is not finite (NaN or infinite animation,
        drivers or custom properties)."""
        for what, arr in (("target", targets), ("pole", poles), ("rotation target", orients)):
            bad = ~np.all(np.isfinite(arr), axis=-1)
            if bad.any():
                k, i = (int(v) for v in np.argwhere(bad)[0])
                spec = self.goals[i]
                ref = spec.pole if what == "pole" else spec.target
                raise ReadError(f'Bone "{spec.bone}": the {what} {ref.describe()} has a non-finite position or '
                                f"rotation (NaN or infinity) at frame {frames[k]}; check its animation, drivers and "
                                "constraints")

    # -- IK constraint influence, as Blender's IK applies it ---------------------------------
    #
    # Blender's IK (iksolver_plugin execute_posetree) applies a constraint's influence (its
    # "enforce") per IK tree (ik_trees), going through the tree's targets in order. Until one
    # with a pole comes up, a target whose influence is below 1 moves its goal: the target
    # becomes influence * target + (1 - influence) * the effector's tail in the pose before IK
    # (and a rotation goal the slerp between the effector's rotation before IK and the
    # target's), and that goal is solved fully; a muted one (influence 0) so holds its tip.
    # Once one with a pole comes up, the tree's result is blended instead: every bone of the tree
    # turns from its rotation before IK by the slerp of that turn by the last poled target's
    # influence (blend_m3_m3m3 of the basis change with identity, which also blends a stretch's
    # scale), and the goals after it are not moved. (_tree_goal decides both per goal.) Sinew's
    # pose before IK is the reference pose (Solve IK's current pose, a bake's keyed pose per
    # frame).

    def frame_blends(self, frames: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """(goal influence (F, G), tree blend (F, G)): each goal's ``influence`` and
        ``tree_blend`` at each frame. For a bake (``influences``) from each frame's constraint
        influences, as Blender's IK applies them at that frame (``target_blends``: a goal whose
        tree has no influence on a frame gets 0 for both, so its bones keep the pose before IK);
        else the goals' own, on each of ``frames`` frames."""
        goals = self.goals
        influence = np.tile([g.influence for g in goals], (frames, 1)).astype(np.float64)
        blend = np.tile([g.tree_blend for g in goals], (frames, 1)).astype(np.float64)
        inf = self.influences
        if inf is None:
            return influence, blend
        influence = np.tile(influence[:1], (len(inf.frames), 1))
        blend = np.tile(blend[:1], (len(inf.frames), 1))
        for i, g in enumerate(goals):
            if g.tree < 0:
                continue
            tree = self.trees[g.tree]
            t = next(x for x in tree.targets if x.owner == g.owner and x.constraint.name == g.constraint)
            influence[:, i], blend[:, i] = target_blends(
                tree, t, {id(x): inf.at(x.owner, x.constraint.name) for x in tree.targets})
        return influence, blend

    def tree_acts(self, tree: int) -> np.ndarray:
        """(F,) whether Blender's IK tree ``tree`` (``trees``) acts at each frame of a bake's range
        (some constraint of it has influence); one frame, True, without ``influences``."""
        if self.influences is None:
            return np.ones(1, dtype=bool)
        return np.any([self.influences.at(x.owner, x.constraint.name) > 0.0 for x in self.trees[tree].targets],
                      axis=0)

    def blend_goals(self, rig_for_frame, targets, orients, references, root_translations, influence=None,
                    reference_scales=None) -> None:
        """Moves, in place, the targets (F, G, 3) and orientations (F, G, 4) of goals whose
        influence is below 1 toward their effector in each frame's reference pose (F, N, 4) with
        root translation (F, 3) and length scales (F, N) (``pose_length_scales``; None: rest
        lengths); ``rig_for_frame(k)`` is the engine rig of frame k.
        ``influence``: (F, G) each goal's influence per frame (``frame_blends``), default its own."""
        if influence is None:
            influence = self.frame_blends(len(targets))[0]
        blended = [i for i in range(len(self.goals)) if np.any(influence[:, i] < 1.0)]
        if not blended:
            return
        idx = self.index
        for k in range(len(targets)):
            now = [i for i in blended if influence[k, i] < 1.0]
            if not now:
                continue
            _heads, tails, world = rig_for_frame(k).forward_kinematics(
                references[k], root_translations[k], None if reference_scales is None else reference_scales[k])
            for i in now:
                g, w = self.goals[i], float(influence[k, i])
                b = idx[g.bone]
                tip = tails[b] if g.use_tail else _heads[b]
                targets[k, i] = w * targets[k, i] + (1.0 - w) * tip
                if g.use_orientation:
                    orients[k, i] = slerp_wxyz(world[b][None], orients[k, i][None], w)[0]

    def tree_blends(self, blend=None) -> dict[str, np.ndarray]:
        """Per bone of an IK tree whose result Blender blends with the pose before IK on some
        frame (a poled target with influence below 1 in it, or, in a bake, a frame where the tree
        does not act): its factor per frame (F,), from ``blend`` (F, G) (``frame_blends``;
        default the goals' own, one frame)."""
        if blend is None:
            blend = self.frame_blends()[1]
        out: dict[str, np.ndarray] = {}
        for i, (g, chain) in enumerate(zip(self.goals, self.moved)):
            if g.tree >= 0 and np.any(blend[:, i] < 1.0):
                for name in chain:
                    out[name] = blend[:, i]
        return out

    def blend_result(self, references, rotations, scales=None, blend=None, reference_scales=None) -> None:
        """Blends, in place, the solved rotations (F, N, 4) of the bones of IK trees whose result
        Blender blends (``tree_blends``) with each frame's reference (F, N, 4): the slerp by the
        tree's factor at that frame; and their local (Blender pose) scales (F, N), when given,
        from the reference's by it (``reference_scales``, (F, N) local scales as ``local_scales``
        gives them; None: 1). ``blend``: (F, G) per frame (``frame_blends``), default the goals' own."""
        idx = self.index
        for name, t in self.tree_blends(blend).items():
            b = idx[name]
            t = np.broadcast_to(t, (len(rotations),))
            rotations[:, b] = slerp_wxyz(references[:, b], rotations[:, b], t)
            if scales is not None:
                before = 1.0 if reference_scales is None else reference_scales[:, b]
                scales[:, b] = before + t * (scales[:, b] - before)

    def engine_goals(self, targets, orients, poles, vectors=None):
        """The engine's goals for targets (G, 3), orientations (G, 4), poles (G, 3) and kind
        vectors (G, 3) (``sample_vectors``; needed only when a goal has a kind other than
        position or orientation)."""
        sinew = engine()
        out = []
        for i, spec in enumerate(self.goals):
            kw = self.kind_arguments(i, vectors)
            if spec.use_orientation:
                kw["orientation"] = orients[i]
            if spec.pole is not None:
                kw["pole_target"] = poles[i]
                kw["pole_angle"] = spec.pole_angle
            out.append(sinew.Goal(spec.bone, targets[i], weight=spec.weight, chain_length=spec.chain_length,
                                  use_tail=spec.use_tail, **kw))
        return out

    def kind_arguments(self, i: int, vectors=None) -> dict:
        """Goal ``i``'s kind as ``sinew.Goal``'s keyword arguments (none for a position goal),
        its direction or normal from ``vectors`` (G, 3)."""
        spec = self.goals[i]
        if spec.kind == "position":
            return {}
        kw = {"kind": spec.kind}
        if spec.kind in KIND_VECTOR:
            if vectors is None:
                raise ValueError(f"goal {spec.bone!r} ({spec.kind}) needs its vector")
            kw[KIND_VECTOR[spec.kind]] = vectors[i]
        return kw

    def pose_from_bones(self, pose_bones):
        """Local rotations (N, 4) wxyz (anchors: identity, their pose is their rest) and bone 0's
        location from pose bones (original or evaluated); connectors keep theirs in a solve. Quaternion-mode bones keep their
        stored sign, so solved keys continue the hemisphere of the keys around them."""
        rot = np.zeros((len(self.names), 4))
        rot[:, 0] = 1.0
        anchors = self._anchor_set
        for i, name in enumerate(self.names):
            if name not in anchors:
                rot[i] = bone_quaternion(pose_bones[name])
        loc = np.array(pose_bones[self.root_bone].location, dtype=np.float64) if self.root_bone else np.zeros(3)
        return rot, loc


# The length scales the engine takes for a bone that stretches (sinew::MIN_SCALE, MAX_SCALE).
MIN_LENGTH_SCALE, MAX_LENGTH_SCALE = 1e-3, 1e3

# How far a matrix's axes may be from one uniform scale (relative), as ``_scale_problem`` checks.
UNIFORM_SCALE_TOLERANCE = 1e-4


def _scale_problem(m3) -> str | None:
    """None when the 3x3 ``m3`` is a rotation times a uniform positive scale (within
    ``UNIFORM_SCALE_TOLERANCE``); else what it is instead, for a message."""
    if not np.all(np.isfinite(m3)):
        return "not finite"
    norms = np.linalg.norm(m3, axis=0)
    s = float(norms.mean())
    if s < 1e-9:
        return "scaled to zero"
    if np.linalg.det(m3) < 0.0:
        return "mirrored (a negative scale)"
    n = m3 / np.where(norms > 0.0, norms, 1.0)
    skew = float(np.abs(n.T @ n - np.eye(3)).max())
    if float(np.abs(norms - s).max()) > UNIFORM_SCALE_TOLERANCE * s or skew > UNIFORM_SCALE_TOLERANCE:
        return "scaled non-uniformly (" + ", ".join(f"{v:.4g}" for v in norms) + ")"
    return None


def armature_inverse(ob, matrix_world) -> Matrix:
    """The inverse of the armature object's world matrix; ReadError when it has none."""
    det = matrix_world.to_3x3().determinant()
    if not (math.isfinite(det) and all(math.isfinite(v) for row in matrix_world for v in row)) or abs(det) < 1e-12:
        raise ReadError(f'Armature "{ob.name}" has a zero or non-finite scale in the scene (its world matrix '
                        "cannot be inverted); fix the object's scale, animation or drivers")
    return matrix_world.inverted()


def slerp_wxyz(a, b, t) -> np.ndarray:
    """Per row, the slerp from quaternion ``a`` to ``b`` (arrays (K, 4) wxyz) by ``t`` (a number,
    or one per row (K,)), along the shorter arc, in ``a``'s hemisphere (Blender's
    interp_qt_qtqt)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64).copy()
    t = np.broadcast_to(np.asarray(t, dtype=np.float64), (len(a),))
    dot = np.einsum("ki,ki->k", a, b)
    b[dot < 0.0] *= -1.0
    dot = np.abs(dot)
    out = np.empty_like(a)
    near = dot > 1.0 - 1e-10
    tn = t[near][:, None]
    out[near] = (1.0 - tn) * a[near] + tn * b[near]
    far = ~near
    if far.any():
        theta = np.arccos(np.clip(dot[far], -1.0, 1.0))
        s = np.sin(theta)
        tf = t[far]
        out[far] = (np.sin((1.0 - tf) * theta) / s)[:, None] * a[far] + (np.sin(tf * theta) / s)[:, None] * b[far]
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def orientation_quaternion(m3, spec) -> Quaternion:
    """The rotation of a rotation goal's target (3x3 in armature space) as a quaternion; ReadError
    when it is no rotation: mirrored (one of target and armature has a negative scale) or sheared
    (a non-uniform scale of the armature or a parent turns the target's axes off square)."""
    det = m3.determinant()
    if not math.isfinite(det):
        return Quaternion((math.nan, math.nan, math.nan, math.nan))  # reported by check_samples
    if det <= 0.0:
        raise ReadError(f'Bone "{spec.bone}": the rotation target {spec.target.describe()} is mirrored relative '
                        "to the armature (a negative scale on one of them), so it has no rotation to match: "
                        "remove the negative scale or turn the goal's rotation off")
    n = m3.normalized()
    cols = [n.col[j] for j in range(3)]
    if max(abs(cols[0].dot(cols[1])), abs(cols[1].dot(cols[2])), abs(cols[0].dot(cols[2]))) > 1e-4:
        raise ReadError(f'Bone "{spec.bone}": the rotation target {spec.target.describe()} is sheared in armature '
                        "space (a non-uniform scale on the armature or a parent), so it has no rotation to match: "
                        "make the scale uniform or turn the goal's rotation off")
    return n.to_quaternion()


def _axis_label(name: str) -> str:
    return ("-" + name[4:]) if name.startswith("NEG_") else name


def target_axis(m3, name: str) -> np.ndarray:
    """A target's axis ``name`` ('X' .. 'NEG_Z') from its 3x3 matrix in armature space (the
    column, as the target draws it), normalised; NaN when it is zero or not finite."""
    m3 = np.asarray(m3, dtype=np.float64)
    v = np.asarray(axis_vector(name)) @ m3.T  # the signed column
    n = float(np.linalg.norm(v))
    if not math.isfinite(n) or n < 1e-12:
        return np.full(3, np.nan)
    return v / n


def bone_quaternion(pb) -> Quaternion:
    mode = pb.rotation_mode
    if mode == 'QUATERNION':
        q = Quaternion(pb.rotation_quaternion)
        if q.magnitude < 1e-9:
            return Quaternion()
        return q.normalized()
    if mode == 'AXIS_ANGLE':
        a = pb.rotation_axis_angle
        return Quaternion((a[1], a[2], a[3]), a[0]) if (a[1] or a[2] or a[3]) else Quaternion()
    return pb.rotation_euler.to_quaternion()


def no_goals_message(ob, reasons=()) -> str:
    """Why ``ob`` has no goals: ``reasons`` (the reader's warnings about the IK constraints it
    skipped, such as one that targets its own bone), then the IK constraints that are switched
    off (and those a Sinew bake switched off, which Restore IK Constraints turns back on)."""
    from .keys import muted_records

    why = "; ".join(r.removesuffix("; skipped") for r in reasons)
    msg = (f'Armature "{ob.name}" has no IK goals' + (f" Sinew can use ({why})" if why else "") +
           ": give a bone a Sinew goal (Bone properties > Sinew IK) or an IK constraint with a target")
    ours = {(r["bone"], r["constraint"]) for r in muted_records(ob)}
    by_sinew, off = [], []
    for pb in ob.pose.bones:
        for c in pb.constraints:
            if c.type == 'IK' and (c.mute or c.influence <= 0.0):
                (by_sinew if (pb.name, c.name) in ours else off).append(f'"{c.name}" (bone "{pb.name}")')
    if by_sinew:
        msg += (f". The IK constraint(s) {', '.join(by_sinew)} were muted by a Sinew bake: "
                "Restore IK Constraints (Pose > Inverse Kinematics, or the Sinew sidebar) turns them back on")
    if off:
        msg += f". The IK constraint(s) {', '.join(off)} are muted or have no influence"
    return msg


def rotation_property(pb) -> str:
    """The property that holds pose bone ``pb``'s rotation in its rotation mode."""
    mode = pb.rotation_mode
    if mode == 'QUATERNION':
        return "rotation_quaternion"
    if mode == 'AXIS_ANGLE':
        return "rotation_axis_angle"
    return "rotation_euler"


def driven_channels(ob) -> dict[str, set[int]]:
    """The channels of object ``ob`` that its drivers set: {data path: array indices}. Muted
    drivers are left out (Blender does not evaluate them). A driven channel belongs to its
    driver: whatever is keyed on it, the driver sets it again, so Sinew never keys one."""
    ad = ob.animation_data
    out: dict[str, set[int]] = {}
    for fc in (ad.drivers if ad is not None else ()):
        if not fc.mute:
            out.setdefault(fc.data_path, set()).add(fc.array_index)
    return out


# The names Blender's UI gives the channels of each rotation property (W is an axis-angle's angle).
CHANNEL_NAMES = {"rotation_quaternion": "WXYZ", "rotation_axis_angle": "WXYZ", "rotation_euler": "XYZ"}


def check_driven_rotations(ob, problem) -> None:
    """Refuses a bone the goals move whose rotation a driver sets (ReadError naming the bone and
    the channels): the driver would override the solved rotation, and a driven channel is never
    keyed."""
    driven = driven_channels(ob)
    if not driven:
        return
    for name in problem.moved_bones:
        pb = ob.pose.bones[name]
        prop = rotation_property(pb)
        indices = sorted(driven.get(pb.path_from_id(prop), ()))
        if indices:
            names = CHANNEL_NAMES[prop]
            which = ", ".join(names[i] if 0 <= i < len(names) else str(i) for i in indices)
            raise ReadError(f'Bone "{name}": a driver sets its rotation ({prop} {which}), so Sinew cannot set the '
                            "rotation it solves (the driver would override it, and Sinew never keys a driven "
                            f'channel): remove or mute the driver, or shorten the chain so that "{name}" is not moved')


def rest_matrices(bones) -> np.ndarray:
    """(N, 4, 4) the armature-space rest matrices (``Bone.matrix_local``) of ``bones`` (an
    armature's ``data.bones``), in their order."""
    flat = np.empty(len(bones) * 16, dtype=np.float32)
    bones.foreach_get("matrix_local", flat)  # (column by column)
    return flat.reshape(-1, 4, 4).transpose(0, 2, 1).astype(np.float64)


def _analyze(ob, goals):
    """Which bones each goal moves and where chains meet, from the engine's own analysis of the
    whole armature (rest data only)."""
    sinew = engine()
    bones = ob.data.bones
    names = [b.name for b in bones]  # Blender lists parents before children
    idx = {n: i for i, n in enumerate(names)}
    parents = np.array([idx[b.parent.name] if b.parent else -1 for b in bones], dtype=np.int64)
    if any(p >= i for i, p in enumerate(parents)):  # not expected; keep the engine's order rule
        raise ReadError(f'Armature "{ob.name}": bones are not listed parents first')
    rest = rest_matrices(bones)
    lengths = np.array([b.length for b in bones])
    try:
        rig = sinew.Rig(names, parents, rest, lengths)
        goal_objs = [sinew.Goal(g.bone, (0.0, 0.0, 0.0), chain_length=g.chain_length, use_tail=g.use_tail,
                                weight=g.weight) for g in goals]
        a = sinew.analyze(rig, goal_objs)
    except sinew.SinewError as ex:
        raise ReadError(f'Armature "{ob.name}": {ex}') from ex
    return [names[i] for i in a["sub_bases"]], [[names[i] for i in chain] for chain in a["moved"]]


def check_relations(ob, problem) -> None:
    """Refuses bone relations the engine's pose convention cannot express (ReadError naming the
    bone and the setting): Inherit Rotation off on a bone whose parent the goals also move, or on
    a connector; Local Location off on a moved bone or connector with a pose location. (Inherit
    Rotation off on a chain's top bone is modelled exactly: see ``rest_for``.)"""
    bones, moved = ob.data.bones, set(problem.moved_bones)
    for name in problem.moved_bones + problem.connectors:
        b, pb = bones[name], ob.pose.bones[name]
        top = b.parent is None or name in problem.anchors or (b.parent.name not in moved and
                                                              b.parent.name not in problem.connectors)
        if not b.use_inherit_rotation and not (top and name in moved):
            raise ReadError(
                f'Bone "{name}": Inherit Rotation is off (Bone properties > Relations), and Sinew moves the bone '
                f'above it, which Sinew cannot solve: turn Inherit Rotation on, or shorten the chain so that '
                f'"{name}" is its top bone')
        if not b.use_local_location and not b.use_connect and Vector(pb.location).length_squared > 0.0:
            raise ReadError(
                f'Bone "{name}": Local Location is off (Bone properties > Relations) and the bone has a pose '
                "location, which Sinew cannot solve: turn Local Location on, or clear its location (Alt G)")


# Constraints that only scale their bone. They change its length, as a pose scale does (which
# Sinew warns about), and not where it points, so a bone of a Blender IK chain may carry them:
# Rigify's paws put a Copy Scale on the lower leg of their IK chains.
SCALE_ONLY_CONSTRAINTS = frozenset({'COPY_SCALE', 'LIMIT_SCALE', 'MAINTAIN_VOLUME'})

# Blender stores the limits in single precision: -180° typed in is float32(-pi), a hair beyond -pi.
_FULL_TURN_SLACK = 1e-6


def cannot_bind(c) -> bool:
    """Whether constraint ``c``, in effect, cannot change its bone's pose whatever the pose: a
    Limit Rotation whose every enabled axis allows the full turn (min -180° or below and max 180°
    or above: the Euler angles Blender decomposes the rotation into lie in [-180°, 180°], so
    nothing is clamped, with the Legacy Behavior option or without), or a Limit Location or Limit
    Rotation with no axis enabled. (A Limit Location with bounds, or a Limit Distance, may bind
    depending on the pose.)"""
    if c.type == 'LIMIT_ROTATION':
        lo = -math.pi + _FULL_TURN_SLACK
        hi = math.pi - _FULL_TURN_SLACK
        return all(not getattr(c, f"use_limit_{a}") or (getattr(c, f"min_{a}") <= lo and getattr(c, f"max_{a}") >= hi)
                   for a in "xyz")
    if c.type == 'LIMIT_LOCATION':
        return not any(getattr(c, f"use_{m}_{a}") for m in ("min", "max") for a in "xyz")
    return False


def cannot_act(c) -> bool:
    """Whether constraint ``c`` cannot change its bone's pose now: switched off (muted, invalid,
    influence 0) or ``cannot_bind``."""
    return is_off(c) or cannot_bind(c)


def check_ik_chain_constraints(ob, problem) -> None:
    """Refuses (ReadError naming the bone, its constraint and the IK constraint) a bone of a
    Blender IK constraint's chain that carries another constraint in effect (not muted, valid,
    with influence) that can turn or move it. Blender's IK solves the chain after such a
    constraint has acted, and still reaches its target; Sinew replaces the IK with rotations set
    on the bones (Bake IK to Keyframes mutes the IK constraint), and the other constraint would
    act on top of them and pull the chain off its target: a rig that worked would be broken.
    Constraints that only scale (``SCALE_ONLY_CONSTRAINTS``) are let through (with the warning
    ``read`` gives), and so are those that cannot bind (``cannot_bind``: a Limit Rotation
    allowing the full turn, say), silently; so are the chains of Sinew goals, where no Blender IK
    was reaching: a constraint there acts on top as it does without Sinew, and the report gives
    the miss Blender shows. A bake (``problem.influences``) refuses only a frame where both act:
    an IK/FK switch that turns the IK off where a Copy Rotation takes over bakes, the other
    constraint acting on top of the keys where Blender showed it acting; the error names the
    first such frame."""
    inf = problem.influences
    for g, chain in zip(problem.goals, problem.moved):
        if g.tree < 0:  # a Sinew goal
            continue
        acts = problem.tree_acts(g.tree)
        for name in chain:
            for c in ob.pose.bones[name].constraints:
                if c.type == 'IK' or c.type in SCALE_ONLY_CONSTRAINTS or not c.is_valid or cannot_bind(c):
                    continue
                on = (inf.at(name, c.name) > 0.0) if inf is not None else np.array([constraint_enforce(c) > 0.0])
                both = on & acts
                if not both.any():
                    continue
                at = f" at frame {int(inf.frames[int(np.argmax(both))])}" if inf is not None and inf.animated else ""
                raise ReadError(
                    f'Bone "{name}" is in the chain of IK constraint "{g.constraint}" (bone "{g.owner}") and has '
                    f'constraint "{c.name}" in effect{at}. Blender\'s IK solves the chain after "{c.name}" has acted, '
                    f'so it still reaches its target; Sinew replaces the IK with keyed rotations, and "{c.name}" would '
                    f'act on top of them and pull the chain off its target. '
                    f'Mute "{c.name}" or set its influence to 0{" where the IK acts" if at else ""}, or shorten the IK '
                    f'constraint\'s Chain Length so that "{name}" is not in the chain; nothing was changed')


def check_trees_per_frame(ob, influences: ConstraintInfluences, trees: list[IKTree]) -> None:
    """Refuses (ReadError) IK constraints switched on and off over a bake's range in a way that
    regroups Blender's IK trees: a bone with several IK constraints, whose first with influence
    changes (Blender's IK uses only that one). ``trees``: the trees read with each constraint's
    largest influence over the range; on every frame, each tree that acts must be one of them."""
    names = [(pb.name, c.name) for pb in ob.pose.bones for c in pb.constraints if c.type == 'IK']
    if not names or not influences.animated:
        return
    acting = np.stack([influences.at(*n) > 0.0 for n in names], axis=1)  # (F, C)
    known = {_tree_signature(t) for t in trees}
    patterns, first = np.unique(acting, axis=0, return_index=True)
    for pattern, k in zip(patterns, first):
        on = {n for n, a in zip(names, pattern) if a}
        for tree in ik_trees(ob, lambda pb, c: 1.0 if (pb.name, c.name) in on else 0.0):
            if any(x.active for x in tree.targets) and _tree_signature(tree) not in known:
                raise ReadError(
                    f'Armature "{ob.name}": the IK constraints of bone "{tree.targets[-1].owner}" are switched on and '
                    f"off over the frame range (influence or mute animated) so that Blender's IK uses another of them "
                    f"at frame {int(influences.frames[k])} (Blender uses a bone's first IK constraint with influence); "
                    "Sinew bakes one set of IK chains over a range: bake the frames before and after the switch "
                    "separately. Nothing was changed")


def _tree_signature(tree: IKTree) -> tuple:
    return tree.root, tuple((x.owner, x.constraint.name, x.tip) for x in tree.targets)


def read(ob, *, need_goals: bool = True, depsgraph=None, only_selected: bool = False,
         influences: ConstraintInfluences | None = None) -> RigProblem:
    """Reads armature object ``ob`` (rest data, goals, limits; the evaluated pose of the bones
    above the chains from ``depsgraph``, default: the context's) into a RigProblem. Raises
    ReadError with a user-facing message (NoGoalsError when there is no goal); changes nothing.
    An armature ``depsgraph`` does not evaluate is refused first (``check_armature_evaluated``).
    ``only_selected``: only the goals of selected bones (``selected_goals``). ``influences``: a
    bake's constraint influences over its range (``ConstraintInfluences``): an IK constraint with
    influence at any frame of it is a goal, whatever its influence now, and the checks that
    depend on influence consider every frame; default: the influences now."""
    import bpy

    if ob is None or ob.type != 'ARMATURE':
        raise ReadError("The active object is not an armature")
    if not ob.data.bones:
        raise ReadError(f'Armature "{ob.name}" has no bones')
    if ob.mode == 'EDIT':
        raise ReadError("Leave Edit Mode first (Sinew reads the pose)")
    depsgraph = depsgraph or bpy.context.evaluated_depsgraph_get()
    check_armature_evaluated(ob, depsgraph)
    enforce = None if influences is None else (lambda pb, c: influences.peak(pb.name, c.name))
    goals, replaced, warnings = read_goals(ob, enforce)
    if need_goals and not goals:
        raise NoGoalsError(no_goals_message(ob, warnings))
    if only_selected:
        goals, replaced = selected_goals(ob, goals, replaced)
        if need_goals and not goals:
            from .keys import muted_records

            muted = (" (the IK constraints a Sinew bake muted are not goals until Restore IK Constraints turns them "
                     "back on)" if muted_records(ob) else "")
            raise NoGoalsError(f'Armature "{ob.name}": no selected bone has an IK goal (Only Selected Bones is on); '
                               "select a bone of an IK chain, the bone with the goal or IK constraint, or its target "
                               f"or pole bone{muted}")
    sub_bases, moved = _analyze(ob, goals) if goals else ([], [])

    bones = ob.data.bones
    moved_set = {b for chain in moved for b in chain}
    anchors, connectors = [], set()
    for name in moved_set:
        path, p = [], bones[name].parent
        while p is not None and p.name not in moved_set:
            path.append(p.name)
            p = p.parent
        if p is not None:
            connectors.update(path)  # between two moved bones
        elif path and path[0] not in anchors:
            anchors.append(path[0])  # the chain hangs from unmoved bones: only its parent matters
    anchors.sort(key=lambda n: bones.find(n))
    moved_roots = [b.name for b in bones if b.name in moved_set and b.parent is None]
    # Engine bone 0 is the one root whose translation is posed: the moved real root that the
    # most goals reach (others keep their place), else an anchor (never translated).
    counts = {r: sum(r in chain for chain in moved) for r in moved_roots}
    moved_roots.sort(key=lambda r: -counts[r])
    root_bone = moved_roots[0] if moved_roots else None
    order = moved_roots + anchors + [b.name for b in bones
                                     if (b.name in moved_set or b.name in connectors) and b.name not in moved_roots]
    idx = {n: i for i, n in enumerate(order)}
    parents = [idx[bones[n].parent.name] if (bones[n].parent and n not in anchors) else -1 for n in order]
    problem = RigProblem(
        ob=ob, names=order, parents=parents, anchors=anchors, connectors=[n for n in order if n in connectors],
        lengths=np.array([bones[n].length for n in order]), rest=np.zeros((len(order), 4, 4)), rig=None,
        goals=goals, replaced=replaced, warnings=warnings, root_bone=root_bone, sub_bases=sub_bases, moved=moved,
        trees=ik_trees(ob, enforce), influences=influences)
    if not goals:
        return problem
    if influences is not None:
        check_trees_per_frame(ob, influences, problem.trees)
    check_relations(ob, problem)
    check_driven_rotations(ob, problem)
    check_ik_chain_constraints(ob, problem)
    # IK Stretch as Blender's IK reads it: a bone of a tree that stretches, by its ik_stretch.
    stretching = {b for g, chain in zip(goals, moved) if g.stretch for b in chain}
    # A bone Sinew does not move between two it moves (a connector) inherits the scale of the
    # moved bone above it in Blender, where the engine keeps it at its length: that bone keeps
    # its length too.
    for name in problem.connectors:
        p = bones[name].parent
        while p is not None and p.name not in moved_set:
            p = p.parent
        if p is not None and p.name in stretching and ob.pose.bones[p.name].ik_stretch > 0.0:
            stretching.discard(p.name)
            warnings.append(f'Bone "{p.name}": its IK Stretch is not used: bone "{name}" below it, between bones '
                            "that Sinew moves, is in no IK chain and would be scaled with it")
    for name in problem.moved_bones:
        pb = ob.pose.bones[name]
        lim = read_limit(pb)
        if name in stretching and pb.ik_stretch != 0.0:
            # (Blender keeps it in [0, 1]; a NaN set through Python goes to the engine, which refuses it.)
            lim.stretch = float(pb.ik_stretch)
            lim.source = ", ".join(x for x in (lim.source, "IK Stretch") if x)
        if not lim.is_free:
            problem.limits[name] = lim
    problem.goals = goals = check_evaluated(goals, depsgraph)
    ob_eval = ob.evaluated_get(depsgraph)
    problem.rest = problem.rest_for(ob_eval.pose.bones, ob.pose.bones)
    problem.scales_above = problem.anchor_scales(ob_eval.pose.bones)
    problem.rig = problem.make_rig(problem.rest)
    # What the engine's pose convention does not cover: say so rather than solve wrongly.
    # (Each bone's length over its rest length as Blender shows it: its pose scale's Y times its
    # parent's, the chains' anchors at 1.)
    shown = {}
    for i, name in enumerate(problem.names):
        p = problem.parents[i]
        shown[name] = 1.0 if name in problem.anchors else \
            float(ob.pose.bones[name].scale[1]) * (shown[problem.names[p]] if p >= 0 else 1.0)
    for name in problem.moved_bones + problem.connectors:
        b, pb = bones[name], ob.pose.bones[name]
        if b.inherit_scale != 'FULL':
            warnings.append(f'Bone "{name}" does not inherit scale fully; Sinew assumes it does')
        if problem.stretches and name in problem.moved_bones:
            # Sinew keys the scale of every moved bone of a rig that stretches, uniform: a bone
            # that stretches starts from its length as the pose shows it (pose_length_scales),
            # the others from their rest length.
            sx, sy, sz = pb.scale
            lim = problem.limits.get(name)
            if lim is not None and lim.stretch > 0.0:
                if max(abs(sx - sy), abs(sz - sy)) > 1e-6 * abs(sy):
                    warnings.append(f'Bone "{name}" is scaled non-uniformly in the pose ({sx:.4g}, {sy:.4g}, '
                                    f"{sz:.4g}); its IK Stretch starts from its length (Y) and Sinew keys a uniform "
                                    "scale")
            elif abs(shown[name] - 1.0) > 1e-5:
                warnings.append(f'Bone "{name}" is scaled in the pose (its length ×{shown[name]:.4g}, its parents\' '
                                "scale included) but does not stretch: Sinew keeps its rest length and keys its "
                                "scale back to it")
        elif any(abs(v - 1.0) > 1e-6 for v in pb.scale):
            warnings.append(f'Bone "{name}" is scaled in the pose; Sinew ignores pose scale')
        if any(c.type != 'IK' and not cannot_act(c) for c in pb.constraints):
            warnings.append(f'Bone "{name}" has constraints besides IK; they act on top of the Sinew pose')
    for i, g in enumerate(goals):
        for ref in (g.target, g.pole):
            # (The same walk as the order of several armatures in one call: through bone and
            # object parents, constraint targets and deformation.)
            if ref is None or ob not in follows_moved_bones(ref.ob, ref.node, {ob: moved_set}):
                continue
            if ref.ob == ob and ref.bone:
                warnings.append(f'Bone "{g.bone}": target bone "{ref.bone}" follows bones Sinew moves; '
                                "its position is taken from before the solve")
            elif ref.vertex_group and deforms(ob, ref.ob):
                # (Blender's IK has a dependency cycle there.)
                warnings.append(f'Bone "{g.bone}": vertex group "{ref.vertex_group}" of mesh "{ref.ob.name}" is '
                                "deformed by this armature, so it may move with the bones Sinew moves; its position "
                                "is taken from before the solve")
            else:
                what = "target" if ref is g.target else "pole target"
                warnings.append(f'Bone "{g.bone}": its {what} {ref.describe()} follows bones Sinew moves (through '
                                "parents, constraints or deformation); its position is taken from before the solve")
            if ref is g.target and g.tree < 0:  # (a Sinew goal: its influence is 1)
                problem.moving_targets.append(i)
    return problem


# --------------------------------------------------------------------------------------------
# Analysis for the sidebar (cached under its inputs: draw() runs often)
# --------------------------------------------------------------------------------------------

_analysis_cache: dict = {}


def invalidate_analysis():
    _analysis_cache.clear()


def _ref_state(ob, subtarget: str):
    """What ``read_goals`` reads of a target or pole object ``ob`` with subtarget ``subtarget``
    (``_check_target``, ``_constraint_ref``, ``vertex_group_ref``): which object it is, whether
    it was deleted, and whether it has that bone, or that vertex group (and its mesh is in Edit
    Mode). For whether it was deleted (``_deleted``, which scans every collection's objects:
    0.07 ms an object in a scene of 2,000), its number of users, which leaving its last
    collection changes."""
    if ob is None:
        return None
    has = None
    if subtarget and ob.type == 'ARMATURE':
        has = ob.pose is not None and ob.pose.bones.get(subtarget) is not None
    elif subtarget and ob.type in VERTEX_GROUP_TYPES:
        has = (ob.vertex_groups.get(subtarget) is not None, ob.mode == 'EDIT')
    return ob.name_full, ob.type, ob.users, subtarget, has


def analysis_key(ob) -> tuple:
    """Everything ``analysis`` of armature ``ob`` depends on, as a key cheap enough for every
    redraw of the sidebar: the armature and its mode (in Edit Mode nothing more: the panel asks to
    leave it), its IK solver, its bones' names, parents and rest, and every pose bone's Sinew goal
    and IK constraints as ``read_goals`` reads them, with their targets and poles
    (``_ref_state``). Of a constraint's influence only whether it acts counts, so that a pose, a
    frame or an animated influence does not read the rig again. (Measured on Rigify's generated
    rig, 706 bones, in Blender 5.0: 1.0 ms, where reading the analysis again takes 3.8 ms.)"""
    if ob.mode == 'EDIT':
        return ob.name_full, 'EDIT'
    bones = ob.data.bones
    lengths = np.empty(len(bones), dtype=np.float32)
    bones.foreach_get("length", lengths)
    key = [ob.name_full, ob.mode, ob.pose.ik_solver, tuple(bones.keys()), rest_matrices(bones).tobytes(),
           lengths.tobytes(), tuple(ob.pose.bones.keys())]
    for pb in ob.pose.bones:
        parent = pb.parent
        key.append(parent.name if parent is not None else None)
        s = pb.sinew
        if s.use_goal:
            key.append((pb.name, _ref_state(s.target, s.subtarget), _ref_state(s.pole_target, s.pole_subtarget),
                        s.goal_kind, s.use_orientation, s.use_tail, s.chain_length, repr(s.weight),
                        repr(s.pole_angle), s.aim_axis, s.goal_axis))
        for c in pb.constraints:
            if c.type == 'IK':
                key.append((pb.name, c.name, c.mute, c.influence > 0.0, c.is_valid,
                            _ref_state(c.target, c.subtarget), _ref_state(c.pole_target, c.pole_subtarget),
                            c.chain_count, c.use_tail, c.use_stretch, c.use_rotation, repr(c.orient_weight),
                            repr(c.weight), repr(c.pole_angle), c.ik_type, c.use_location))
    # (Floats as their repr: a NaN set from Python equals itself there, so the key still matches.)
    return tuple(key)


def analysis(ob) -> dict:
    """{"goals": [(bone, source, [moved bones])], "sub_bases": [...], "warnings": [...],
    "error": str|None} for the sidebar: of the rig as it is, read again only when its
    ``analysis_key`` changes."""
    try:
        key = analysis_key(ob)
    except (AttributeError, ReferenceError):
        return {"goals": [], "sub_bases": [], "warnings": [], "error": None}
    hit = _analysis_cache.get(key)
    if hit is not None:
        return hit
    try:
        if ob.mode == 'EDIT':
            raise ReadError("Leave Edit Mode to see the chains")
        goals, _replaced, warnings = read_goals(ob)
        sub_bases, moved = _analyze(ob, goals) if goals else ([], [])
        out = {"goals": [(g.bone, g.source, m) for g, m in zip(goals, moved)],
               "sub_bases": sub_bases, "warnings": warnings, "error": None}
    except ReadError as ex:
        out = {"goals": [], "sub_bases": [], "warnings": [], "error": str(ex)}
    if len(_analysis_cache) > 32:
        _analysis_cache.clear()
    _analysis_cache[key] = out
    return out
