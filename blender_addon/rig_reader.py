# SPDX-License-Identifier: GPL-3.0-or-later
"""Turns an armature and its settings into what the Sinew engine solves: a ``sinew.Rig`` with
limits, and goals whose targets are sampled from the evaluated scene.

Nothing here solves or does rotation math: the engine gets Blender's own rest matrices
(``bone.matrix_local``) and pose convention (``rotation_quaternion`` relative to rest, default
inheritance; bone 0's ``location`` is the root translation) and answers in the same terms.

Where goals and limits come from, per pose bone:

* a Sinew goal (``pose_bone.sinew.use_goal``), else each of its Blender IK constraints that is
  not muted, has influence and a valid target;
* Sinew limits (cone / twist / lock / stiffness) where enabled, else Blender's per-bone IK limits
  (``lock_ik_*``, ``use_ik_limit_*``, ``ik_min_*``/``ik_max_*``, ``ik_stiffness_*``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from mathutils import Matrix, Quaternion

# The core requires every cone half-angle to be in (0, π]. Blender allows ik_max_x = 0 ("may
# not swing that way at all"); such a half-angle becomes this many radians (0.06°) instead.
ZERO_HALF_ANGLE = 1e-3
# The core's stiffness range is [0, 1); Blender's ik_stiffness goes up to 1 (immobile).
MAX_STIFFNESS = 0.99
# Rotation-mode names that are Euler orders.
EULER_MODES = {'XYZ', 'XZY', 'YXZ', 'YZX', 'ZXY', 'ZYX'}


class ReadError(Exception):
    """A problem with the rig or its settings, worded for the user (reported as an ERROR)."""


def engine():
    """The ``sinew`` extension module (bundled as a wheel with this add-on)."""
    try:
        import sinew
    except ImportError as ex:  # pragma: no cover - only when the wheel did not install
        raise ReadError(f"The Sinew engine module is not available ({ex}); reinstall the Sinew extension") from ex
    return sinew


# --------------------------------------------------------------------------------------------
# Goals and limits as read from the rig (plain data; the engine objects are built from these)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TargetRef:
    """An object, or a bone of an armature object (its head, as Blender's IK uses it)."""

    ob: object
    bone: str = ""

    def describe(self) -> str:
        return f'"{self.ob.name}" bone "{self.bone}"' if self.bone else f'"{self.ob.name}"'

    def world_matrix(self, depsgraph) -> Matrix:
        ob_eval = self.ob.evaluated_get(depsgraph)
        if self.bone:
            return ob_eval.matrix_world @ ob_eval.pose.bones[self.bone].matrix
        return ob_eval.matrix_world.copy()


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


@dataclass
class LimitSpec:
    """One bone's limits, in the form the engine's setters take."""

    swing: str = "free"          # "free", "cone", "cone_blender", "hinge"
    cone: tuple = ()             # cone: (x_pos, x_neg, z_pos, z_neg); cone_blender: (min_x, max_x, min_z, max_z)
    hinge: tuple = ()            # (axis (3,), min, max)
    twist: tuple | None = None   # (min, max)
    locked: bool = False
    stiffness: float = 0.0
    source: str = ""

    @property
    def is_free(self) -> bool:
        return self.swing == "free" and self.twist is None and not self.locked and self.stiffness == 0.0


def _check_target(ob, bone_name, what, owner) -> TargetRef:
    if ob is None:
        raise ReadError(f'Bone "{owner}": {what} target is missing')
    if bone_name:
        if ob.type != 'ARMATURE':
            raise ReadError(f'Bone "{owner}": {what} target "{ob.name}" is not an armature, so it has no bone "{bone_name}"')
        if ob.pose is None or ob.pose.bones.get(bone_name) is None:
            raise ReadError(f'Bone "{owner}": {what} target armature "{ob.name}" has no bone "{bone_name}"')
    return TargetRef(ob, bone_name)


def read_goals(ob) -> tuple[list[GoalSpec], list[tuple[str, str]], list[str]]:
    """Goals of armature ``ob``: (goals, replaced IK constraints as (bone, constraint), warnings).

    Raises ReadError for a Sinew goal without a usable target.
    """
    goals: list[GoalSpec] = []
    replaced: list[tuple[str, str]] = []
    warnings: list[str] = []
    for pb in ob.pose.bones:
        s = pb.sinew
        ik_constraints = [c for c in pb.constraints if c.type == 'IK']
        if s.use_goal:
            target = _check_target(s.target, s.subtarget, "Sinew goal", pb.name)
            pole = None
            if s.pole_target is not None:
                pole = _check_target(s.pole_target, s.pole_subtarget, "Sinew pole", pb.name)
            goals.append(GoalSpec(
                bone=pb.name, target=target, use_tail=s.use_tail, weight=s.weight,
                use_orientation=s.use_orientation, chain_length=_engine_chain_length(s.chain_length, s.use_tail),
                pole=pole, pole_angle=s.pole_angle, source="Sinew",
            ))
            # Blender IK on the same bone would fight the Sinew result: it is replaced too.
            replaced += [(pb.name, c.name) for c in ik_constraints if not c.mute and c.influence > 0.0]
            continue
        for c in ik_constraints:
            if c.mute or c.influence <= 0.0:
                continue  # muted or without influence: Blender does not solve it either
            if c.target is None:
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" has no target (targetless IK is not imported)')
                continue
            if c.target.type == 'ARMATURE' and c.subtarget and c.target.pose.bones.get(c.subtarget) is None:
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" targets missing bone "{c.subtarget}"; skipped')
                continue
            if c.target == ob and c.subtarget == pb.name:
                warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" targets its own bone; skipped')
                continue
            pole = None
            if c.pole_target is not None:
                if c.pole_target.type == 'ARMATURE' and c.pole_subtarget and c.pole_target.pose.bones.get(c.pole_subtarget) is None:
                    warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" pole bone "{c.pole_subtarget}" is missing; pole ignored')
                else:
                    sub = c.pole_subtarget if c.pole_target.type == 'ARMATURE' else ""
                    pole = TargetRef(c.pole_target, sub)
            sub = c.subtarget if c.target.type == 'ARMATURE' else ""
            # Without use_tail Blender leaves the constrained bone out of the chain: its parent is
            # the chain's tip, and the parent's tail (and, with use_rotation, its orientation) is
            # what goes to the target; chain_count counts from the parent.
            effector, source = pb.name, f'IK "{c.name}"'
            if not c.use_tail:
                if pb.parent is None:
                    warnings.append(f'Bone "{pb.name}": IK constraint "{c.name}" has no chain '
                                    "(Use Tail is off on a bone without parent); skipped")
                    continue
                effector, source = pb.parent.name, f'IK "{c.name}" on {pb.name} (Use Tail off)'
            goals.append(GoalSpec(
                bone=effector, target=TargetRef(c.target, sub), use_tail=True,
                # The engine has no partially applied goal; a constraint's influence scales its
                # weight, which decides how competing goals share bones.
                weight=max(1e-3, c.weight * c.influence),
                use_orientation=c.use_rotation,
                chain_length=c.chain_count,
                pole=pole, pole_angle=c.pole_angle, source=source, constraint=c.name,
            ))
            replaced.append((pb.name, c.name))
    return goals, replaced, warnings


def _engine_chain_length(chain_length: int, use_tail: bool) -> int:
    """A Sinew goal's chain length for the engine: the engine counts from the effector bone also
    when it pulls the bone's head, where the bone's own rotation cannot help; the Sinew setting
    counts the bones that can (as Blender's chain_count does), so one more is passed."""
    if chain_length == 0:
        return 0
    return chain_length if use_tail else chain_length + 1


def read_limit(pb) -> LimitSpec:
    """One bone's limits: Sinew settings where enabled, else Blender's IK limits."""
    s = pb.sinew
    lim = LimitSpec()
    sources = []

    # Blender's IK limits in the core's terms: swing about X and Z (the cone or a hinge),
    # twist about Y.
    lx, ly, lz = pb.lock_ik_x, pb.lock_ik_y, pb.lock_ik_z
    x_range = (pb.ik_min_x, pb.ik_max_x) if pb.use_ik_limit_x else (-math.pi, math.pi)
    y_range = (0.0, 0.0) if ly else ((pb.ik_min_y, pb.ik_max_y) if pb.use_ik_limit_y else None)
    z_range = (pb.ik_min_z, pb.ik_max_z) if pb.use_ik_limit_z else (-math.pi, math.pi)
    if lx and lz:
        if ly:
            lim.locked = True
        else:
            # No swing at all, only the twist: a hinge about the bone's own axis.
            lo, hi = y_range if y_range is not None else (-math.pi, math.pi)
            lim.swing, lim.hinge = "hinge", ((0.0, 1.0, 0.0), lo, hi)
        sources.append("IK lock")
    elif lx or lz:
        # One swing axis locked: a hinge about the other. The core's hinge also fixes the twist
        # (Blender would still allow Y here unless it is locked).
        axis, (lo, hi) = ((0.0, 0.0, 1.0), z_range) if lx else ((1.0, 0.0, 0.0), x_range)
        lim.swing, lim.hinge = "hinge", (axis, lo, hi)
        sources.append("IK lock")
    elif pb.use_ik_limit_x or pb.use_ik_limit_z:
        # The core does not allow a zero half-angle: 0 becomes ZERO_HALF_ANGLE (see above).
        min_x, max_x = min(x_range[0], -ZERO_HALF_ANGLE), max(x_range[1], ZERO_HALF_ANGLE)
        min_z, max_z = min(z_range[0], -ZERO_HALF_ANGLE), max(z_range[1], ZERO_HALF_ANGLE)
        lim.swing, lim.cone = "cone_blender", (min_x, max_x, min_z, max_z)
        sources.append("IK limits")
    if lim.swing != "hinge" and not lim.locked and y_range is not None:
        lim.twist = y_range
        sources.append("IK limit Y")
    stiffness = max(pb.ik_stiffness_x, pb.ik_stiffness_y, pb.ik_stiffness_z)
    if stiffness > 0.0:
        lim.stiffness = min(stiffness, MAX_STIFFNESS)

    # Sinew's own settings override Blender's per aspect.
    if s.use_cone:
        lim.swing, lim.cone, lim.hinge = "cone", (s.cone_x_pos, s.cone_x_neg, s.cone_z_pos, s.cone_z_neg), ()
        lim.locked = False
        sources = [x for x in sources if x.startswith("IK limit Y")] + ["Sinew cone"]
    if s.use_twist:
        if lim.swing == "hinge":
            lim.swing, lim.hinge = "free", ()
            sources = [x for x in sources if x != "IK lock"]
        lim.twist = (s.twist_min, s.twist_max)
        sources = [x for x in sources if x != "IK limit Y"] + ["Sinew twist"]
    if s.lock:
        lim.locked = True
        sources.append("Sinew lock")
    if s.stiffness > 0.0:
        lim.stiffness = s.stiffness
    lim.source = ", ".join(sources)
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
        if lim.stiffness > 0.0:
            rig.set_stiffness(name, lim.stiffness)
    except sinew.SinewError as ex:
        src = f" ({lim.source})" if lim.source else ""
        raise ReadError(f'Bone "{name}": bad limit{src}: {ex}') from ex


# --------------------------------------------------------------------------------------------
# The problem
# --------------------------------------------------------------------------------------------


@dataclass
class RigProblem:
    """An armature read for the engine: the rig (with limits), the goals, and how to sample them."""

    ob: object
    names: list[str]                  # pose bone names in rig order (bone 0 = the root that moves)
    parents: list[int]
    rest: np.ndarray                  # (N, 4, 4) rest matrices actually given to the engine
    lengths: np.ndarray               # (N,)
    rig: object                       # sinew.Rig
    goals: list[GoalSpec]
    replaced: list[tuple[str, str]]   # Blender IK constraints the goals replace (bone, constraint)
    warnings: list[str]
    sub_bases: list[str] = field(default_factory=list)
    moved: list[list[str]] = field(default_factory=list)   # per goal
    limits: dict = field(default_factory=dict)              # name -> LimitSpec, non-free only

    @property
    def index(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    @property
    def moved_bones(self) -> list[str]:
        """Every bone some goal moves, in rig order."""
        s = {b for chain in self.moved for b in chain}
        return [n for n in self.names if n in s]

    @property
    def base_bones(self) -> list[str]:
        """Bones no goal moves whose pose still decides where the moved bones are (their
        ancestors), in rig order."""
        moved = set(self.moved_bones)
        idx = self.index
        out = set()
        for name in moved:
            p = self.parents[idx[name]]
            while p >= 0:
                if self.names[p] not in moved:
                    out.add(self.names[p])
                p = self.parents[p]
        return [n for n in self.names if n in out]

    # -- sampling -------------------------------------------------------------------------

    def sample_goals(self, depsgraph):
        """Every goal's target, orientation and pole in armature space for the evaluated scene:
        arrays (G, 3), (G, 4) wxyz, (G, 3)."""
        ob_eval = self.ob.evaluated_get(depsgraph)
        to_arm = ob_eval.matrix_world.inverted_safe()
        g = len(self.goals)
        targets = np.zeros((g, 3))
        orients = np.zeros((g, 4))
        orients[:, 0] = 1.0
        poles = np.zeros((g, 3))
        for i, spec in enumerate(self.goals):
            m = to_arm @ spec.target.world_matrix(depsgraph)
            targets[i] = m.translation
            if spec.use_orientation:
                orients[i] = m.to_3x3().normalized().to_quaternion()
            if spec.pole is not None:
                poles[i] = (to_arm @ spec.pole.world_matrix(depsgraph)).translation
        return targets, orients, poles

    def engine_goals(self, targets, orients, poles):
        sinew = engine()
        out = []
        for i, spec in enumerate(self.goals):
            kw = {}
            if spec.use_orientation:
                kw["orientation"] = orients[i]
            if spec.pole is not None:
                kw["pole_target"] = poles[i]
                kw["pole_angle"] = spec.pole_angle
            out.append(sinew.Goal(spec.bone, targets[i], weight=spec.weight, chain_length=spec.chain_length,
                                  use_tail=spec.use_tail, **kw))
        return out

    def pose_from_bones(self, pose_bones):
        """Local rotations (N, 4) wxyz and bone 0's location from pose bones (original or
        evaluated). Quaternion-mode bones keep their stored sign, so solved keys continue the
        hemisphere of the keys around them."""
        rot = np.zeros((len(self.names), 4))
        for i, name in enumerate(self.names):
            rot[i] = bone_quaternion(pose_bones[name])
        return rot, np.array(pose_bones[self.names[0]].location, dtype=np.float64)


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


def _rig_order(ob, goals: list[GoalSpec]) -> list[str]:
    """Bones parent-first, with the root that the most goals hang from first (it becomes the
    engine's bone 0, the only root whose translation is posed)."""
    bones = ob.data.bones
    roots = [b for b in bones if b.parent is None]

    def root_of(name):
        b = bones[name]
        while b.parent is not None:
            b = b.parent
        return b.name

    counts = {r.name: 0 for r in roots}
    for g in goals:
        counts[root_of(g.bone)] += 1
    roots.sort(key=lambda r: -counts[r.name])  # stable: ties keep Blender's order
    order = []
    stack = list(reversed(roots))
    while stack:
        b = stack.pop()
        order.append(b.name)
        stack.extend(reversed(b.children))
    return order


def read(ob, *, need_goals: bool = True, limits: bool = True) -> RigProblem:
    """Reads armature object ``ob`` (rest data, current pose offsets, goals, limits) into a
    RigProblem. Raises ReadError with a user-facing message; changes nothing."""
    sinew = engine()
    if ob is None or ob.type != 'ARMATURE':
        raise ReadError("The active object is not an armature")
    if not ob.data.bones:
        raise ReadError(f'Armature "{ob.name}" has no bones')
    if ob.mode == 'EDIT':
        raise ReadError("Leave Edit Mode first (Sinew reads the pose)")
    goals, replaced, warnings = read_goals(ob)
    if need_goals and not goals:
        raise ReadError(
            f'Armature "{ob.name}" has no IK goals: give a bone a Sinew goal (Bone properties > Sinew IK) '
            "or an IK constraint with a target")

    names = _rig_order(ob, goals)
    bones, pbones = ob.data.bones, ob.pose.bones
    idx = {n: i for i, n in enumerate(names)}
    parents = [idx[bones[n].parent.name] if bones[n].parent else -1 for n in names]
    rest = np.zeros((len(names), 4, 4))
    lengths = np.zeros(len(names))
    for i, n in enumerate(names):
        b, pb = bones[n], pbones[n]
        m = b.matrix_local
        # The engine poses only bone 0's translation. Any other unconnected bone's current
        # pose location is an offset of its head in its rest frame, so it is folded into the
        # rest matrix given to the engine (exactly what Blender does with it).
        if i != 0 and not b.use_connect and pb.location.length_squared > 0.0:
            m = m @ Matrix.Translation(pb.location)
        rest[i] = np.array(m)
        lengths[i] = b.length
    try:
        rig = sinew.Rig(names, np.asarray(parents, dtype=np.int64), rest, lengths)
    except sinew.SinewError as ex:
        raise ReadError(f'Armature "{ob.name}": {ex}') from ex
    problem = RigProblem(ob=ob, names=names, parents=parents, rest=rest, lengths=lengths, rig=rig,
                         goals=goals, replaced=replaced, warnings=warnings)
    if goals:
        try:
            analysis = sinew.analyze(rig, problem.engine_goals(*_dummy_targets(len(goals))))
        except sinew.SinewError as ex:
            raise ReadError(f'Armature "{ob.name}": {ex}') from ex
        problem.sub_bases = [names[i] for i in analysis["sub_bases"]]
        problem.moved = [[names[i] for i in chain] for chain in analysis["moved"]]
    # Limits on every bone a goal moves (others never turn, so their settings do not matter).
    for name in (problem.moved_bones if limits else ()):
        lim = read_limit(pbones[name])
        if not lim.is_free:
            apply_limit(rig, name, lim)
            problem.limits[name] = lim
    # Things the engine's pose convention does not cover: say so rather than solve wrongly.
    for name in problem.moved_bones + problem.base_bones:
        b, pb = bones[name], pbones[name]
        if not b.use_inherit_rotation or b.inherit_scale != 'FULL':
            warnings.append(f'Bone "{name}" does not inherit rotation/scale fully; Sinew assumes it does')
        if any(abs(v - 1.0) > 1e-6 for v in pb.scale):
            warnings.append(f'Bone "{name}" is scaled in the pose; Sinew ignores pose scale')
    return problem


def _dummy_targets(g):
    t = np.zeros((g, 3))
    o = np.zeros((g, 4))
    o[:, 0] = 1.0
    return t, o, np.zeros((g, 3))


# --------------------------------------------------------------------------------------------
# Analysis for the sidebar (cached: draw() runs often)
# --------------------------------------------------------------------------------------------

_analysis_cache: dict = {}


def invalidate_analysis():
    _analysis_cache.clear()


def _signature(ob):
    sig = [ob.name, ob.data.name, len(ob.data.bones)]
    for pb in ob.pose.bones:
        s = pb.sinew
        if s.use_goal:
            sig.append((pb.name, s.chain_length, s.use_tail, s.target.name if s.target else None, s.subtarget))
        for c in pb.constraints:
            if c.type == 'IK':
                sig.append((pb.name, c.name, c.mute, c.influence > 0.0, c.chain_count, c.use_tail,
                            c.target.name if c.target else None, c.subtarget))
    return tuple(sig)


def analysis(ob) -> dict:
    """{"goals": [(bone, source, [moved bones])], "sub_bases": [...], "warnings": [...],
    "error": str|None} for the sidebar."""
    try:
        key = _signature(ob)
    except (AttributeError, ReferenceError):
        return {"goals": [], "sub_bases": [], "warnings": [], "error": None}
    hit = _analysis_cache.get(key)
    if hit is not None:
        return hit
    try:
        p = read(ob, need_goals=False, limits=False)
        out = {"goals": [(g.bone, g.source, moved) for g, moved in zip(p.goals, p.moved)],
               "sub_bases": p.sub_bases, "warnings": p.warnings, "error": None}
    except ReadError as ex:
        out = {"goals": [], "sub_bases": [], "warnings": [], "error": str(ex)}
    if len(_analysis_cache) > 32:
        _analysis_cache.clear()
    _analysis_cache[key] = out
    return out
