# SPDX-License-Identifier: GPL-3.0-or-later
"""Writing solved rotations to pose bones and keys (Blender 4.4+/5.0 slotted actions).

Solved rotations are quaternions (w, x, y, z) relative to rest, i.e. ``rotation_quaternion``.
Bones in another rotation mode get the same rotation as Euler angles (continuous with the
bone's current value) or axis-angle. Bulk keys go through the channelbag API
(``fcurves.ensure`` + ``keyframe_points.add`` + ``foreach_set``), never per-frame
``keyframe_insert``.
"""

from __future__ import annotations

import bpy
import numpy as np
from bpy_extras import anim_utils
from mathutils import Euler, Quaternion

from .rig_reader import EULER_MODES

LINEAR = 1  # keyframe interpolation enum value ('CONSTANT' 0, 'LINEAR' 1, 'BEZIER' 2)


def rotation_property(pb) -> str:
    mode = pb.rotation_mode
    if mode == 'QUATERNION':
        return "rotation_quaternion"
    if mode == 'AXIS_ANGLE':
        return "rotation_axis_angle"
    return "rotation_euler"


def channel_values(pb, quats: np.ndarray, compat=None) -> np.ndarray:
    """Quaternions (F, 4) as the values of ``pb``'s rotation property, (F, 3 or 4).

    Euler angles stay continuous from frame to frame, starting near ``compat`` (default: the
    bone's current Euler value)."""
    mode = pb.rotation_mode
    if mode == 'QUATERNION':
        return np.asarray(quats, dtype=np.float64)
    out = np.empty((len(quats), 3 if mode in EULER_MODES else 4))
    if mode == 'AXIS_ANGLE':
        for f, q in enumerate(quats):
            axis, angle = Quaternion(q).to_axis_angle()
            out[f] = (angle, axis.x, axis.y, axis.z)
        return out
    prev = Euler(compat if compat is not None else pb.rotation_euler, mode)
    for f, q in enumerate(quats):
        prev = Quaternion(q).to_euler(mode, prev)
        out[f] = prev
    return out


def set_pose(ob, names, rotations, root_bone=None, root_location=None) -> None:
    """Sets the rotation of the pose bones ``names`` (rotations (K, 4) wxyz in the same order),
    honouring each bone's rotation mode; optionally ``root_bone``'s location."""
    for name, q in zip(names, rotations):
        pb = ob.pose.bones[name]
        values = channel_values(pb, np.asarray([q]))[0]
        setattr(pb, rotation_property(pb), values)
    if root_bone is not None and root_location is not None:
        ob.pose.bones[root_bone].location = root_location


def key_current(ob, names, frame, root_bone=None) -> None:
    """Keys the rotation (and for ``root_bone`` the location) of ``names`` at ``frame``."""
    for name in names:
        pb = ob.pose.bones[name]
        pb.keyframe_insert(rotation_property(pb), frame=frame, group=name)
    if root_bone is not None:
        ob.pose.bones[root_bone].keyframe_insert("location", frame=frame, group=root_bone)


# Blender 4.4+ (and 5.0, where Action.fcurves is gone) stores keys in slotted, layered actions;
# 4.2 and 4.3 (blender_version_min is 4.2.0) have the legacy Action.fcurves.
SLOTTED = hasattr(bpy.types, "ActionSlot")


def prepare_action(ob, new_action: bool):
    """The action and slot to bake into: (action, slot, previous action or None).

    ``new_action``: a new action that starts as a copy of the current one (so the animation of
    every other channel carries over), assigned to ``ob``; the previous action gets a fake user so
    it is never lost. Otherwise the current action (created if there is none)."""
    ad = ob.animation_data or ob.animation_data_create()
    prev = ad.action
    slot = getattr(ad, "action_slot", None)
    prev_ident = slot.identifier if (prev is not None and slot is not None) else None
    if new_action or prev is None:
        if prev is not None:
            act = prev.copy()
            prev.use_fake_user = True
        else:
            act = bpy.data.actions.new(f"{ob.name}Action")
        if new_action:
            act.name = f"{ob.name}_Sinew"
        ad.action = act
        if SLOTTED and prev_ident is not None:
            for slot in act.slots:
                if slot.identifier == prev_ident:
                    ad.action_slot = slot
                    break
    act = ad.action
    if not SLOTTED:
        return act, None, prev
    slot = ad.action_slot
    if slot is None:
        slot = anim_utils.action_get_first_suitable_slot(act, 'OBJECT') or act.slots.new(id_type='OBJECT', name=ob.name)
        ad.action_slot = slot
    return act, slot, prev


def replace_range(fc, frames: np.ndarray, values: np.ndarray) -> None:
    """Replaces the keys of ``fc`` in [frames[0], frames[-1]] with one LINEAR key per frame;
    keys outside the range are untouched."""
    kp = fc.keyframe_points
    lo, hi = float(frames[0]) - 1e-4, float(frames[-1]) + 1e-4
    n = len(kp)
    if n:
        co = np.empty(2 * n, dtype=np.float32)
        kp.foreach_get("co", co)
        fr = co[0::2]
        for i in np.nonzero((fr >= lo) & (fr <= hi))[0][::-1]:
            kp.remove(kp[int(i)], fast=True)
    n0 = len(kp)
    kp.add(len(frames))
    if n0 == 0:  # a new F-curve: nothing to keep, so nothing to read back
        co = np.empty(2 * len(frames), dtype=np.float32)
        co[0::2] = frames
        co[1::2] = values
        kp.foreach_set("co", co)
        kp.foreach_set("interpolation", np.full(len(frames), LINEAR, dtype=np.int32))
        fc.update()
        return
    n = len(kp)
    co = np.empty(2 * n, dtype=np.float32)
    kp.foreach_get("co", co)
    co[2 * n0::2] = frames
    co[2 * n0 + 1::2] = values
    kp.foreach_set("co", co)
    interp = np.empty(n, dtype=np.int32)
    kp.foreach_get("interpolation", interp)
    interp[n0:] = LINEAR
    kp.foreach_set("interpolation", interp)
    fc.update()


def write_bake(ob, frames, names, rotations, root_bone=None, root_locations=None, *, new_action: bool = True,
               compat=None):
    """Keys every frame of ``frames`` (F,) for the bones ``names``: ``rotations`` (F, K, 4) wxyz in
    the order of ``names``; ``root_locations`` (F, 3) keys ``root_bone``'s location.
    ``compat``: per bone name, the Euler value to stay continuous with.

    Keys outside the range are never touched. Returns (action, previous action or None)."""
    frames = np.asarray(frames, dtype=np.float64)
    act, slot, prev = prepare_action(ob, new_action)
    fcurve = _fcurve_getter(act, slot)
    for k, name in enumerate(names):
        pb = ob.pose.bones[name]
        prop = rotation_property(pb)
        vals = channel_values(pb, rotations[:, k, :], (compat or {}).get(name))
        path = pb.path_from_id(prop)
        for c in range(vals.shape[1]):
            replace_range(fcurve(path, c, name), frames, vals[:, c])
    if root_bone is not None and root_locations is not None:
        pb = ob.pose.bones[root_bone]
        path = pb.path_from_id("location")
        for c in range(3):
            replace_range(fcurve(path, c, pb.name), frames, root_locations[:, c])
    return act, prev


def _fcurve_getter(act, slot):
    """fcurve(data_path, index, group) -> the F-curve, created if missing."""
    if SLOTTED:
        fcurves = anim_utils.action_ensure_channelbag_for_slot(act, slot).fcurves
        if hasattr(fcurves, "ensure"):
            return lambda path, index, group: fcurves.ensure(path, index=index, group_name=group)
        return lambda path, index, group: fcurves.find(path, index=index) or fcurves.new(path, index=index)

    def legacy(path, index, group):
        return act.fcurves.find(path, index=index) or act.fcurves.new(path, index=index, action_group=group)

    return legacy


def mute_constraints(ob, replaced) -> tuple[int, list[str]]:
    """Switches off the Blender IK constraints ``replaced`` [(bone, constraint)] so they do not
    act on top of the Sinew pose: mutes them, or, where ``mute`` is driven (Rigify switches its
    pole / no-pole IK that way), sets their influence to 0. Returns (count, warnings)."""
    ad = ob.animation_data
    drivers = ad.drivers if ad is not None else None

    def driven(c, prop):
        return drivers is not None and drivers.find(c.path_from_id(prop)) is not None

    n, warnings = 0, []
    for bone, con in replaced:
        c = ob.pose.bones[bone].constraints.get(con)
        if c is None:
            continue
        if not driven(c, "mute"):
            if not c.mute:
                c.mute = True
                n += 1
        elif not driven(c, "influence"):
            if c.influence != 0.0:
                c.influence = 0.0
                n += 1
            warnings.append(f'Bone "{bone}": constraint "{con}" has a driven Mute; its influence was set to 0 instead')
        else:
            warnings.append(f'Bone "{bone}": constraint "{con}" has driven Mute and Influence; '
                            "it still acts on top of the Sinew pose")
    return n, warnings
