# SPDX-License-Identifier: GPL-3.0-or-later
"""Writing solved rotations to pose bones and keys (Blender 4.4+/5.x slotted actions; 4.2/4.3 legacy ones).

Solved rotations are quaternions (w, x, y, z) relative to rest, i.e. ``rotation_quaternion``.
Bones in another rotation mode get the same rotation as Euler angles (continuous with the
bone's current value) or axis-angle. Bulk keys go through the channelbag API
(``fcurves.ensure`` + ``keyframe_points.add`` + ``foreach_set``), never per-frame
``keyframe_insert``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import bpy
import numpy as np
from bpy_extras import anim_utils
from mathutils import Euler, Quaternion

from .rig_reader import CHANNEL_NAMES, EULER_MODES, driven_channels, rotation_property

LINEAR = 1  # keyframe interpolation enum value ('CONSTANT' 0, 'LINEAR' 1, 'BEZIER' 2)


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


def set_pose(ob, names, rotations, root_bone=None, root_location=None, scales=None) -> None:
    """Sets the rotation of the pose bones ``names`` (rotations (K, 4) wxyz in the same order),
    honouring each bone's rotation mode; optionally ``root_bone``'s location, and with ``scales``
    (K,) each bone's scale (uniform: a stretch as Blender's IK shows it)."""
    for k, (name, q) in enumerate(zip(names, rotations)):
        pb = ob.pose.bones[name]
        values = channel_values(pb, np.asarray([q]))[0]
        setattr(pb, rotation_property(pb), values)
        if scales is not None:
            pb.scale = (float(scales[k]),) * 3
    if root_bone is not None and root_location is not None:
        ob.pose.bones[root_bone].location = root_location


def _key_channel(find, pb, prop, frame, only_available, replace_only) -> None:
    """Keys ``pb``'s property ``prop`` at ``frame``; with ``only_available`` only the array items
    that already have an F-curve (none when there is none: nothing is created), with
    ``replace_only`` only where a key is already at ``frame`` (each checked here, so that Blender
    does not report the keys it could not insert). ``find``: the armature's ``fcurve_finder``
    (None when it has no action), used only with one of them on."""
    if not (only_available or replace_only):
        pb.keyframe_insert(prop, frame=frame, group=pb.name)
        return
    path = pb.path_from_id(prop)
    for index in range(len(getattr(pb, prop))):
        fc = find(path, index) if find is not None else None
        if fc is None or (replace_only and not has_key_at(fc, frame)):
            continue
        pb.keyframe_insert(prop, index=index, frame=frame, group=pb.name)


def has_key_at(fc, frame) -> bool:
    """Whether F-curve ``fc`` has a key at ``frame``."""
    return any(abs(k.co[0] - frame) < 1e-3 for k in fc.keyframe_points)


def key_current(ob, names, frame, root_bone=None, key_scale=False, only_available=False,
                replace_only=False) -> None:
    """Keys the rotation (with ``key_scale`` also the scale, and for ``root_bone`` the location)
    of ``names`` at ``frame``; with ``only_available`` (Blender's *Only Insert Available*) only the
    channels that already have an F-curve, with ``replace_only`` (Auto Keying's *Replace* mode)
    only the keys already at ``frame``."""
    # (Built once: with either option on, keys go only on F-curves that exist, so none is added
    # meanwhile; the finder reads the action's F-curves when called.)
    find = fcurve_finder(ob) if (only_available or replace_only) else None
    for name in names:
        pb = ob.pose.bones[name]
        _key_channel(find, pb, rotation_property(pb), frame, only_available, replace_only)
        if key_scale:
            _key_channel(find, pb, "scale", frame, only_available, replace_only)
    if root_bone is not None:
        _key_channel(find, ob.pose.bones[root_bone], "location", frame, only_available, replace_only)


def active_keying_set(scene):
    """The scene's active keying set (a built-in one such as "Location & Rotation", or one of the
    scene's own), or None."""
    return scene.keying_sets_all.active


@dataclass
class AutoKeying:
    """How Solve IK keys, read from the flags Blender's own auto-keying of a pose bone follows
    (``autokeyframe_pose_channel``; ``bpy_extras.anim_utils.AutoKeying`` reads them alike): the
    active keying set only with *Only Active Keying Set* on
    (``tool_settings.use_keyframe_insert_keyingset``, off by default), else the channels the solve
    changed: with *Only Insert Available* (``preferences.edit.use_keyframe_insert_available``;
    off by default up to 5.0, on from 5.2) only those that already have an F-curve, and in
    *Replace* mode (``tool_settings.auto_keying_mode``) only the keys already at the frame."""

    keying_set: object = None      # the active keying set, when Blender's auto-keying would use it
    only_available: bool = False
    replace_only: bool = False


def auto_keying(context) -> AutoKeying:
    """The ``AutoKeying`` of ``context``'s scene and preferences (Blender 4.2 to 5.2 name them alike)."""
    scene = context.scene
    if scene.tool_settings.use_keyframe_insert_keyingset:
        ks = active_keying_set(scene)
        if ks is not None:
            return AutoKeying(keying_set=ks)
    return AutoKeying(only_available=bool(context.preferences.edit.use_keyframe_insert_available),
                      replace_only=scene.tool_settings.auto_keying_mode == 'REPLACE_KEYS')


def fcurve_finder(ob):
    """find(data_path, index) -> the F-curve of ``ob``'s action (its slot's, on slotted actions)
    or None; None instead of a finder when ``ob`` has no action (or its slot no channels)."""
    ad = ob.animation_data
    act = ad.action if ad is not None else None
    if act is None:
        return None
    if not SLOTTED:  # 4.2 and 4.3: an action's F-curves are its own
        return lambda path, index: act.fcurves.find(path, index=index)
    slot = ad.action_slot
    cb = anim_utils.action_get_channelbag_for_slot(act, slot) if slot is not None else None
    if cb is None:
        return None
    return lambda path, index: cb.fcurves.find(path, index=index)


def unkeyed_rotations(ob, names, frame) -> list[str]:
    """The bones of ``names`` whose rotation has no key at scene frame ``frame`` (in the action's
    time, ``action_time``: an NLA strip in tweak mode maps it) on some channel (no F-curve, or one
    without a key there): the keys do not hold their solved rotation at other frames. A channel a
    driver sets is not counted (the driver owns it)."""
    frame = action_time(ob, frame)
    find = fcurve_finder(ob)
    driven = driven_channels(ob)
    out = []
    for name in names:
        pb = ob.pose.bones[name]
        prop = rotation_property(pb)
        path = pb.path_from_id(prop)
        for index in range(len(getattr(pb, prop))):
            if index in driven.get(path, ()):
                continue
            fc = find(path, index) if find is not None else None
            if fc is None or not has_key_at(fc, frame):
                out.append(name)
                break
    return out


def action_time(ob, frame, to_scene=False) -> float:
    """Scene frame ``frame`` in the time of ``ob``'s action (``to_scene``: the other way): in NLA
    tweak mode through the tweaked strip's mapping, as ``keyframe_insert`` maps it; else the same."""
    ad = ob.animation_data
    if ad is not None and ad.use_tweak_mode:
        return float(ad.nla_tweak_strip_time_to_scene(frame, invert=not to_scene))
    return float(frame)


def rotation_key_frames(ob, name, find=None) -> list[float]:
    """The frames (action time, sorted) at which pose bone ``name``'s rotation (the channels of
    its rotation mode) has keys in ``ob``'s action; ``find``: its ``fcurve_finder``, made here
    when None."""
    find = fcurve_finder(ob) if find is None else find
    if find is None:
        return []
    pb = ob.pose.bones[name]
    prop = rotation_property(pb)
    path = pb.path_from_id(prop)
    frames = set()
    for index in range(len(getattr(pb, prop))):
        fc = find(path, index)
        if fc is not None:
            co = np.empty(2 * len(fc.keyframe_points), dtype=np.float64)
            fc.keyframe_points.foreach_get("co", co)
            frames.update(round(float(f), 3) for f in co[0::2])
    return sorted(frames)


def scales_to_hold(ob, before, frame, last=None) -> dict[str, list[tuple[float, tuple]]]:
    """Where a stretch keyed at ``frame`` (a bake's: over ``frame`` to ``last``) would change the
    animation outside the bone's rotation keys around it (call before keying it): for each pose
    bone of ``before`` ({bone: its scale (3,) before the solve}), the nearest frames before
    ``frame`` and after ``last`` at which its rotation has keys (action time), each with the
    scale the bone had there: the value its scale F-curves' keys give there (``keys_value``), else
    (no F-curve: the value holds on every frame) its scale before the solve. ``key_held_scales`` keys them once the
    stretch is keyed. Bones without such frames are left out (a first rotation key holds on every
    frame, and so does the stretch, as Blender keys)."""
    find = fcurve_finder(ob)
    if find is None:
        return {}
    at = action_time(ob, frame)
    end = at if last is None else action_time(ob, last)
    out = {}
    for name, scale in before.items():
        keyed = rotation_key_frames(ob, name, find)
        around = [f for f in (max((f for f in keyed if f < at - 1e-3), default=None),
                              min((f for f in keyed if f > end + 1e-3), default=None)) if f is not None]
        if not around:
            continue
        path = ob.pose.bones[name].path_from_id("scale")
        curves = [find(path, c) for c in range(3)]
        out[name] = [(f, tuple(keys_value(fc, f) if fc is not None else float(scale[c])
                               for c, fc in enumerate(curves))) for f in around]
    return out


def keys_value(fc, frame) -> float:
    """The value F-curve ``fc``'s keys give at ``frame`` (action time), without its modifiers
    (each muted while it is read, then put back): a key of that value inserted there leaves the
    frame as Blender showed it, the modifiers acting on it as before (``fc.evaluate`` would
    give the modified value, which keyed under the same modifiers applies them twice)."""
    mods = [m for m in fc.modifiers if not m.mute]
    try:
        for m in mods:
            m.mute = True
        return float(fc.evaluate(frame))
    finally:
        for m in mods:
            m.mute = False


def key_held_scales(ob, held, frame) -> dict[str, list[float]]:
    """After a solve keyed the stretch at ``frame`` (a bake: at its first frame, and on): keys
    each scale channel of the bones of ``held`` (``scales_to_hold``) that now has a key at
    ``frame``, at ``held``'s frames where it has none, with the value it had there before. So the
    stretch changes the animation only between the bone's rotation keys around the frames keyed,
    as the rotation keys written there do. Returns {bone: the frames keyed (scene time)}."""
    find = fcurve_finder(ob)
    if find is None:
        return {}
    at = action_time(ob, frame)
    out: dict[str, list[float]] = {}
    for name, pairs in held.items():
        path = ob.pose.bones[name].path_from_id("scale")
        for c in range(3):
            fc = find(path, c)
            if fc is None or not has_key_at(fc, at):
                continue
            # (Shaped as the key inserted at ``frame``, which follows the user's preferences.)
            solved = next(k for k in fc.keyframe_points if abs(k.co[0] - at) < 1e-3)
            for f, values in pairs:
                if not has_key_at(fc, f):
                    k = fc.keyframe_points.insert(f, values[c])
                    k.interpolation = solved.interpolation
                    k.handle_left_type, k.handle_right_type = solved.handle_left_type, solved.handle_right_type
                    fc.update()
                    shown = action_time(ob, f, to_scene=True)
                    if shown not in out.setdefault(name, []):
                        out[name].append(shown)
    return out


def unkeyed_scales(ob, names, frame) -> tuple[list[str], dict[str, list[float]]]:
    """For the pose bones ``names`` of ``ob`` whose scale a solve at ``frame`` changed (a stretch),
    after keying: (the bones whose scale has an F-curve without a key at ``frame``: its keys take
    the stretch back at other frames; {bone: frames (scene time)} for the bones with a scale
    channel that nothing animates (``ChannelAnimation``: no F-curve, NLA strip or driver), so the
    stretch holds at every frame, and rotation keys at other frames: the frames whose pose that
    changes}."""
    animation = ChannelAnimation(ob)
    find = animation.find
    at = action_time(ob, frame)
    not_held, everywhere = [], {}
    for name in names:
        path = ob.pose.bones[name].path_from_id("scale")
        curves = [find(path, c) if find is not None else None for c in range(3)]
        if animation.still(path, 3):
            keyed = [f for f in rotation_key_frames(ob, name, find) if abs(f - at) > 1e-3]
            if keyed:
                everywhere[name] = [action_time(ob, f, to_scene=True) for f in keyed]
        elif any(fc is not None and not has_key_at(fc, at) for fc in curves):
            not_held.append(name)
    return not_held, everywhere


def action_paths(act):
    """The data paths of every F-curve of action ``act`` (all its slots, layers and strips)."""
    if act is None:
        return
    if SLOTTED:
        for layer in act.layers:
            for strip in layer.strips:
                for cb in strip.channelbags:
                    for fc in cb.fcurves:
                        yield fc.data_path
    else:
        for fc in act.fcurves:
            yield fc.data_path


def nla_paths(ad) -> set[str]:
    """The data paths that the actions of animation data ``ad``'s NLA strips animate (every track
    and strip, every slot of their actions: all that Blender may evaluate there, and more)."""
    if ad is None:
        return set()
    return {path for track in ad.nla_tracks for strip in track.strips for path in action_paths(strip.action)}


class ChannelAnimation:
    """What animates the channels of object ``ob``: an F-curve of its action (its slot's; muted or
    not: the user's), an NLA strip's action animating the property, or a driver. A channel that
    none of them animates holds its value on every frame."""

    def __init__(self, ob):
        self.find = fcurve_finder(ob)  # (None without an action)
        self.driven = driven_channels(ob)
        self.by_nla = nla_paths(ob.animation_data)

    def still(self, path: str, size: int) -> list[int]:
        """The array indices of property ``path`` (``size`` channels) that nothing animates."""
        if path in self.by_nla:
            return []
        return [c for c in range(size) if c not in self.driven.get(path, ())
                and (self.find is None or self.find(path, c) is None)]


def still_rotation_channels(ob, names) -> dict[str, dict[int, float]]:
    """The rotation channels of pose bones ``names`` of ``ob`` that nothing animates
    (``ChannelAnimation``), with the value each holds: {bone: {array index: value}}, in the
    property of the bone's rotation mode (a bone without such a channel is left out). Keys of
    that value change no pose, anywhere."""
    animation = ChannelAnimation(ob)
    out = {}
    for name in names:
        pb = ob.pose.bones[name]
        prop = rotation_property(pb)
        values = getattr(pb, prop)
        still = {c: float(values[c]) for c in animation.still(pb.path_from_id(prop), len(values))}
        if still:
            out[name] = still
    return out


def is_played(fc) -> bool:
    """Whether Blender evaluates F-curve ``fc``: it is not muted, nor in a muted group."""
    return not (fc.mute or (fc.group is not None and fc.group.mute))


def modifier_acts(m, lo, hi) -> bool:
    """Whether F-curve modifier ``m`` can make its F-curve give, at a whole frame of [lo, hi]
    where the curve has a key, another value than that key's (so keys written there do not play
    as written). It cannot (measured on a bake's key per frame in 5.0, tested on 4.2 to 5.2) when it is
    muted or invalid (Blender skips it), has Use Influence on with influence 0, is restricted to
    frames outside [lo, hi], is a Cycles modifier (it repeats the keys only outside their range),
    or is a Stepped modifier stepping by 1 frame from a whole frame (each frame keeps its key)."""
    if m.mute or not m.is_valid:
        return False
    if m.use_influence and m.influence <= 0.0:
        return False
    if m.use_restricted_range and (m.frame_end < lo or m.frame_start > hi):
        return False
    if m.type == 'CYCLES':
        return False
    if m.type == 'STEPPED':
        return not (m.frame_step == 1.0 and float(m.frame_offset).is_integer())
    return True


def keyed_channel_curves(ob, names, root_bone=None, key_scale=False):
    """(bone, property, array index, F-curve) for each channel keyed for the bones ``names`` of
    ``ob`` (as ``key_current`` and ``write_bake`` key them: the rotation property of each bone's
    mode, with ``key_scale`` its scale, and ``root_bone``'s location) that has an F-curve in the
    object's action (its slot's), muted or not."""
    find = fcurve_finder(ob)
    if find is None:
        return
    wanted = [(name, rotation_property(ob.pose.bones[name])) for name in names]
    if key_scale:
        wanted += [(name, "scale") for name in names]
    if root_bone is not None:
        wanted.append((root_bone, "location"))
    for name, prop in wanted:
        pb = ob.pose.bones[name]
        path = pb.path_from_id(prop)
        for index in range(len(getattr(pb, prop))):
            fc = find(path, index)
            if fc is not None:
                yield name, prop, index, fc


def acting_modifiers(ob, names, lo, hi, root_bone=None, key_scale=False) -> list[tuple[str, str, int, object]]:
    """The F-curve modifiers that act (``modifier_acts``) at the scene frames [lo, hi] (in the
    action's time, ``action_time``) on the channels keyed for the bones ``names`` of ``ob``
    (``keyed_channel_curves``), on the F-curves Blender evaluates (``is_played``): [(bone,
    property, array index, modifier)]. The modifiers stay on the F-curves, so they act on top of
    keys written there."""
    lo, hi = sorted((action_time(ob, lo), action_time(ob, hi)))
    return [(name, prop, index, m) for name, prop, index, fc in keyed_channel_curves(ob, names, root_bone, key_scale)
            if is_played(fc) for m in fc.modifiers if modifier_acts(m, lo, hi)]


def muted_curves(ob, names, root_bone=None, key_scale=False) -> list[tuple[str, str, int]]:
    """The channels keyed for the bones ``names`` of ``ob`` (``keyed_channel_curves``) whose
    F-curve Blender does not evaluate (muted, or in a muted group: ``is_played``), so keys
    written there do not play: [(bone, property, array index)]."""
    return [(name, prop, index) for name, prop, index, fc in keyed_channel_curves(ob, names, root_bone, key_scale)
            if not is_played(fc)]


def describe_modifiers(found) -> str:
    """``acting_modifiers``' answer in words, a modifier once per bone and property:
    'bone "b02": modifier "Noise" on rotation_quaternion W, X, Y, Z; ...'."""
    def label(m):
        kind = m.bl_rna.properties["type"].enum_items[m.type].name
        return f'modifier "{m.name}"' + (f" ({kind})" if m.name != kind else "") + " on "
    return describe_channels([(name, prop, index, label(m)) for name, prop, index, m in found])


def describe_channels(found) -> str:
    """Channels in words, once per bone, what and property: 'bone "b02": <what>rotation_quaternion
    W, X, Y, Z; ...' for ``found`` [(bone, property, array index[, what])]."""
    groups: dict[tuple, list[int]] = {}
    for name, prop, index, *what in found:
        groups.setdefault((name, what[0] if what else "", prop), []).append(index)
    parts = []
    for (name, what, prop), indices in groups.items():
        letters = CHANNEL_NAMES.get(prop, "XYZ")
        which = ", ".join(letters[i] if i < len(letters) else str(i) for i in sorted(set(indices)))
        parts.append(f'bone "{name}": {what}{prop} {which}')
    return "; ".join(parts)


# Where to remove or apply an F-curve modifier, for the messages that name one.
MODIFIER_REMEDY = ("mute or remove the modifier (Graph Editor > Sidebar > Modifiers), or apply it to the keys "
                   "(Graph Editor > Channel > Bake Channels, with Bake Modifiers)")
# How to unmute an F-curve, for the messages that name a muted one.
MUTED_REMEDY = ("Unmute them (Graph Editor: the channel's, or its group's, mute checkbox), or delete the muted "
                "F-curves if they are not wanted")


def _any_area(context):
    """An area to run Blender's keyframe operator in: the context's, else one of the window's."""
    if context.area is not None:
        return context.window, context.area
    wm = context.window_manager
    windows = ([context.window] if context.window is not None else []) + list(wm.windows)
    areas = [(win, area) for win in windows for area in win.screen.areas]
    return next((wa for wa in areas if wa[1].type == 'VIEW_3D'), areas[0] if areas else (None, None))


def key_with_keying_set(context, ob, names, frame, ks, root_bone=None, key_scale=False) -> tuple[list[str], str]:
    """Keys what a solve changed through keying set ``ks``, as Blender's Insert Keyframe does with
    an active keying set: returns (bones keyed, note for the report).

    A keying set of the scene's own (absolute paths): the paths it has on the bones ``names``
    (and ``root_bone``) of ``ob`` are keyed, at ``frame``; its paths elsewhere are not (the solve
    did not change them). A built-in (relative) keying set is applied by Blender to those bones as
    if they were the selected bones, in Pose Mode; outside Pose Mode the bones' rotation channels
    (with ``key_scale``, a stretch's scale too) are keyed as without a keying set, and the note
    says so. A keying set keys a stretched bone's scale only where it has the scale channel."""
    label = ks.bl_label
    wanted = list(names) + ([root_bone] if root_bone and root_bone not in names else [])
    if ks.is_path_absolute:
        by_path = {f'pose.bones["{bpy.utils.escape_identifier(n)}"]': n for n in wanted}
        keyed = []
        for p in ks.paths:
            if p.id != ob:
                continue
            prefix = p.data_path.split("]", 1)[0] + "]"
            bone = by_path.get(prefix)
            if bone is None or not p.data_path.startswith(prefix + "."):
                continue
            index = -1 if p.use_entire_array else p.array_index
            group = {"NAMED": p.group, "KEYINGSET": label}.get(p.group_method, "")
            ob.keyframe_insert(p.data_path, index=index, frame=frame, group=group)
            if bone not in keyed:
                keyed.append(bone)
        skipped = len(wanted) - len(keyed)
        note = f'Keyed through keying set "{label}": {len(keyed)} of the {len(wanted)} bones the solve moved'
        if skipped:
            note += f" ({skipped} not in the keying set: posed, not keyed)"
        return keyed, note
    win, area = _any_area(context)
    if ob.mode != 'POSE' or area is None:
        key_current(ob, names, frame, root_bone, key_scale=key_scale)
        return wanted, (f'The active keying set "{label}" applies to selected bones in Pose Mode; outside it Sinew '
                        "keyed the rotation of the bones the solve moved")
    pbs = [ob.pose.bones[n] for n in wanted]
    with context.temp_override(window=win, area=area, active_object=ob, object=ob, selected_pose_bones=pbs,
                               selected_pose_bones_from_active_object=pbs, active_pose_bone=pbs[0]):
        try:
            bpy.ops.anim.keyframe_insert(type=ks.bl_idname)
        except RuntimeError as ex:
            return [], f'Keying set "{label}" keyed nothing ({str(ex).strip()}); the pose is set, not keyed'
    return wanted, f'Keyed through keying set "{label}" ({len(wanted)} bones)'


# Blender 4.4+ (and 5.0, where Action.fcurves is gone) stores keys in slotted, layered actions;
# 4.2 and 4.3 (blender_version_min is 4.2.0) have the legacy Action.fcurves.
SLOTTED = hasattr(bpy.types, "ActionSlot")


def _has_id_type(slot) -> bool:
    """Whether ``slot`` is bound to an ID type (``target_id_type``; ``id_root`` in 4.4), as it is
    once any ID has used it."""
    kind = getattr(slot, "target_id_type", None) or getattr(slot, "id_root", None)
    return kind not in (None, 'UNSPECIFIED')


def slot_for_keying(act, ob):
    """The slot of action ``act`` that keys for ``ob`` go into when ``act`` is assigned to ``ob``
    with no slot, as Blender's own keying picks it (``assign_action_ensure_slot_for_keying``): the
    action's only slot while it is bound to no ID type (then no ID uses it), else a new slot for
    ``ob``. Never a slot another ID uses: Blender leaves the slot empty when another armature's
    action is picked in the Action selector, and its slots are that armature's."""
    if len(act.slots) == 1 and not _has_id_type(act.slots[0]):
        return act.slots[0]
    return act.slots.new(id_type='OBJECT', name=ob.name)


def ensure_channelbag(act, slot):
    """``anim_utils.action_ensure_channelbag_for_slot`` (Blender 5.0+), done by hand on 4.4/4.5:
    the first layer and keyframe strip (created if missing), and its channelbag for ``slot``."""
    helper = getattr(anim_utils, "action_ensure_channelbag_for_slot", None)
    if helper is not None:
        return helper(act, slot)
    layer = act.layers[0] if len(act.layers) else act.layers.new("Layer")
    strip = layer.strips[0] if len(layer.strips) else layer.strips.new(type='KEYFRAME')
    return strip.channelbag(slot, ensure=True)


def bake_action_name(ob) -> str:
    return f"{ob.name}_Sinew"


def _action_uses(id_):
    """Every use of an action by ID ``id_``, as (action, slot handle; None on 4.2/4.3): its
    animation data's action (and the one kept aside while an NLA strip is tweaked), its NLA strips
    (meta strips' too), its Action constraints (its pose bones' too)."""
    ad = getattr(id_, "animation_data", None)
    if ad is not None:
        yield ad.action, getattr(ad, "action_slot_handle", None)
        yield ad.action_tweak_storage, getattr(ad, "action_slot_handle_tweak_storage", None)
        strips = [strip for track in ad.nla_tracks for strip in track.strips]
        while strips:
            strip = strips.pop()
            yield strip.action, getattr(strip, "action_slot_handle", None)
            strips += strip.strips
    constraints = list(getattr(id_, "constraints", ()))
    pose = getattr(id_, "pose", None)
    for pb in pose.bones if pose is not None else ():
        constraints += pb.constraints
    for c in constraints:
        if c.type == 'ACTION':
            yield c.action, getattr(c, "action_slot_handle", None)


def other_users(ob, act, slot) -> list:
    """The IDs other than ``ob`` that keys written into action ``act`` for ``ob`` would change:
    those animated by ``slot`` of it (``ob``'s slot; None when ``ob`` has none yet and gets one of
    its own, ``slot_for_keying``: no other), or on Blender 4.2/4.3, which have no slots, by the
    action itself: as its action, in an NLA strip or through an Action constraint. (Read from
    ``bpy.data.user_map`` and each ID's uses: ``ActionSlot.users()`` crashes Blender 4.5-5.2 while
    an armature object without a pose, one never evaluated, is in the file.)"""
    if act is None or (SLOTTED and slot is None):
        return []
    handle = slot.handle if SLOTTED else None
    return [id_ for id_ in bpy.data.user_map(subset=[act]).get(act, ())
            if id_ != ob and any(a == act and h == handle for a, h in _action_uses(id_))]


def quoted_name(id_) -> str:
    """An ID's name as a message gives it: quoted, and for one linked from a library followed by
    that library as Blender shows it (``"Rig_Sinew" [rig.blend]``, as ``ID.name_full``), so that a
    local ID of the same name (a re-bake's new ``Rig_Sinew`` of an override) is told apart."""
    return f'"{id_.name}"' + (f" [{id_.library.name}]" if id_.library is not None else "")


def describe_ids(ids) -> str:
    """IDs named for a message: an object by its name, any other ID with its type."""
    return ", ".join(quoted_name(i) if i.id_type == 'OBJECT' else f'{i.id_type.lower().replace("_", " ")} '
                     f"{quoted_name(i)}" for i in sorted(ids, key=lambda i: (i.id_type, i.name)))


def assigned_slot(ob):
    """``ob``'s action slot (None when it has none, or on 4.2/4.3)."""
    return getattr(ob.animation_data, "action_slot", None) if ob.animation_data is not None else None


def is_sinew_bake_of(act, ob) -> bool:
    """True when ``act``, ``ob``'s action, is a Sinew bake that nothing else would see change
    (``other_users`` of ``ob``'s slot of it: none) and that has no fake user, so baking into it
    again changes nothing the user kept. On a slotted action ``ob`` must play a slot of it: with
    none (another armature's bake picked in its Action selector) it is not ``ob``'s bake."""
    slot = assigned_slot(ob)
    return (act is not None and getattr(act, "sinew_baked", False) and act.is_editable
            and not act.use_fake_user and not (SLOTTED and slot is None) and not other_users(ob, act, slot))


def blends_over_nla(ad) -> bool:
    """True when Blender blends the active action of animation data ``ad`` over NLA strips, so
    that its Action Blending and Action Influence act: NLA evaluation is on and a track that is
    evaluated (not muted; a solo one, when a track is solo) has a strip. Otherwise Blender applies
    the action as it is, whatever those two say (measured in Blender 5.0)."""
    if not ad.use_nla:
        return False
    tracks = [t for t in ad.nla_tracks if not t.mute]
    solo = [t for t in tracks if t.is_solo]
    return any(len(t.strips) for t in (solo or tracks))


def check_action_writable(ob, new_action: bool) -> None:
    """Raises ReadError when the keys cannot be written as asked (checked before any solve): in
    NLA tweak mode, when the action is blended over NLA strips other than by Replace at full
    influence (the baked rotations would be added to, combined or mixed with the strips' instead
    of shown); with New Action off, when the action is linked, or when the keys would change
    another ID too (``other_users``: another object animated by the same slot; on 4.2/4.3 by the
    same action), naming it."""
    from .rig_reader import ReadError

    ad = ob.animation_data
    if ad is not None and ad.use_tweak_mode:
        what = f" (editing action {quoted_name(ad.action)} in an NLA strip)" if ad.action is not None else ""
        raise ReadError(f'Armature "{ob.name}" is in NLA tweak mode{what}: Sinew bakes into the object\'s own '
                        "action, which Blender does not allow to change while a strip is tweaked. Leave tweak mode "
                        "(Tab in the NLA editor) and bake again")
    if ad is not None and blends_over_nla(ad) and (ad.action_blend_type != 'REPLACE' or ad.action_influence < 1.0):
        how = []
        if ad.action_blend_type != 'REPLACE':
            label = ad.bl_rna.properties["action_blend_type"].enum_items[ad.action_blend_type].name
            how.append(f"Blending {label}")
        if ad.action_influence < 1.0:
            how.append(f"Influence {ad.action_influence:.3g}")
        raise ReadError(f'Armature "{ob.name}": its action is layered over NLA strips ({", ".join(how)}), so '
                        "Blender would blend the baked rotations with the strips below instead of showing them, and "
                        "the goals would be missed. Sinew bakes plain rotations: set the action's Blending to Replace "
                        "and its Influence to 1 (NLA editor > Sidebar > Edited Action tab) and bake again")
    act = ad.action if ad is not None else None
    if not new_action and act is not None and not act.is_editable:
        raise ReadError(f"Action {quoted_name(act)} is linked and cannot be changed: turn on New Action")
    others = other_users(ob, act, assigned_slot(ob)) if not new_action else []
    if others:
        what = f"its action {quoted_name(act)}" + (f' (slot "{ad.action_slot.name_display}")' if SLOTTED else "")
        raise ReadError(f'Armature "{ob.name}": {what} also animates {describe_ids(others)}, so baking into it with '
                        f"New Action off would change {'them' if len(others) > 1 else 'it'} too. Turn on New Action "
                        f'(the bake then goes into a copy), or give "{ob.name}" an action of its own; nothing was '
                        "changed")


def prepare_action(ob, new_action: bool):
    """The action and slot to bake into: (action, slot, previous action or None, note or "").

    ``new_action``: when the current action is the user's own, a new action named
    ``<object>_Sinew`` that starts as a copy of it (so every other channel's animation carries
    over) is assigned, and the user's action gets a fake user so it is never lost. When the
    current action is already a Sinew bake nothing else plays (``is_sinew_bake_of``), the bake
    goes into it again (its keys in the range are replaced): bakes do not pile up, and the user's
    action stays the one kept safe. Otherwise (``new_action`` off) the current action, created if
    there is none. The slot is ``ob``'s (the same slot of the copy), or where ``ob`` has none, what
    Blender's keying gives it (``slot_for_keying``): never another ID's."""
    ad = ob.animation_data or ob.animation_data_create()
    prev = ad.action
    slot = getattr(ad, "action_slot", None)
    prev_ident = slot.identifier if (prev is not None and slot is not None) else None
    note = ""
    if new_action and is_sinew_bake_of(prev, ob):
        orig = getattr(prev, "sinew_original", None)
        note = f"Re-baked into {quoted_name(prev)}" + \
               (f" (the original action {quoted_name(orig)} is kept)" if orig else "")
    elif new_action or prev is None:
        name = bake_action_name(ob) if new_action else f"{ob.name}Action"
        if prev is not None:
            act = prev.copy()
            if prev.is_editable and not prev.use_fake_user:
                prev.use_fake_user = True
        else:
            act = bpy.data.actions.new(name)
        act.name = name
        if new_action and hasattr(act, "sinew_baked"):
            act.sinew_baked = True
            act.sinew_original = prev if prev is not None and not getattr(prev, "sinew_baked", False) else \
                getattr(prev, "sinew_original", None)
        _assign_action(ad, act, prev_ident)
        if prev is not None and new_action:
            note = f'Baked into new action "{act.name}"; {quoted_name(prev)} is kept' + \
                   (" (with a fake user)" if prev.use_fake_user else "")
    act = ad.action
    if not SLOTTED:
        return act, None, prev, note
    slot = ad.action_slot
    if slot is None:
        slot = slot_for_keying(act, ob)
        ad.action_slot = slot
    return act, slot, prev, note


def _assign_action(ad, act, slot_identifier) -> None:
    """Assigns action ``act`` to animation data ``ad``, on its slot named ``slot_identifier`` (the
    slot the action it replaces was on) when it has one, else on no slot (``slot_for_keying``
    then gives it one of its own)."""
    ad.action = act
    if SLOTTED:  # the slot the replaced action had, or none (not the one assigning picks)
        ad.action_slot = next((s for s in act.slots if s.identifier == slot_identifier), None) \
            if slot_identifier is not None else None


def assign_scratch_copy(ob) -> None:
    """Gives ``ob`` a new copy of its current action (on the same slot), when it has one: keys
    then written with ``write_bake(new_action=False)`` change no action that existed before, so
    assigning the previous action back and removing the copy undoes them exactly (a bake's
    scratch write, ``pipeline.BakeJob.write``). Nothing else is changed (no fake user, no name)."""
    ad = ob.animation_data
    if ad is None or ad.action is None:
        return  # write_bake makes a new action
    slot = getattr(ad, "action_slot", None)
    _assign_action(ad, ad.action.copy(), slot.identifier if slot is not None else None)


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
               compat=None, scales=None, still=None):
    """Keys every frame of ``frames`` (F,) for the bones ``names``: ``rotations`` (F, K, 4) wxyz in
    the order of ``names``; ``root_locations`` (F, 3) keys ``root_bone``'s location.
    ``compat``: per bone name, the Euler value to stay continuous with. ``scales``: None, or
    {bone name: (F,) uniform scale} for the bones whose scale is keyed too (a stretch).
    ``still``: None, or {bone name: {array index: value}}, channels of the rotation property of
    bones the bake does not move that nothing animates (``still_rotation_channels``), keyed with
    that value on every frame (so their pose does not change).

    A channel a driver sets (``driven_channels``) is never keyed: the driver owns it. Keys
    outside the range are never touched. Returns (action, previous action or None, note)."""
    frames = np.asarray(frames, dtype=np.float64)
    act, slot, prev, note = prepare_action(ob, new_action)
    fcurve = _fcurve_getter(act, slot)
    driven = driven_channels(ob)
    for k, name in enumerate(names):
        pb = ob.pose.bones[name]
        vals = channel_values(pb, rotations[:, k, :], (compat or {}).get(name))
        path = pb.path_from_id(rotation_property(pb))
        for c in range(vals.shape[1]):
            if c not in driven.get(path, ()):
                replace_range(fcurve(path, c, name), frames, vals[:, c])
        if scales is not None and name in scales:
            path = pb.path_from_id("scale")
            for c in range(3):
                if c not in driven.get(path, ()):
                    replace_range(fcurve(path, c, name), frames, np.asarray(scales[name], dtype=np.float64))
    for name, values in (still or {}).items():
        pb = ob.pose.bones[name]
        path = pb.path_from_id(rotation_property(pb))
        for c, value in values.items():
            replace_range(fcurve(path, c, name), frames, np.full(len(frames), value))
    if root_bone is not None and root_locations is not None:
        pb = ob.pose.bones[root_bone]
        path = pb.path_from_id("location")
        for c in range(3):
            if c not in driven.get(path, ()):
                replace_range(fcurve(path, c, pb.name), frames, root_locations[:, c])
    return act, prev, note


def _fcurve_getter(act, slot):
    """fcurve(data_path, index, group) -> the F-curve, created if missing."""
    if SLOTTED:
        fcurves = ensure_channelbag(act, slot).fcurves
        if hasattr(fcurves, "ensure"):
            return lambda path, index, group: fcurves.ensure(path, index=index, group_name=group)
        return lambda path, index, group: fcurves.find(path, index=index) or fcurves.new(path, index=index)

    def legacy(path, index, group):
        return act.fcurves.find(path, index=index) or act.fcurves.new(path, index=index, action_group=group)

    return legacy


def _parse_records(raw: str) -> list[dict]:
    """The records in one of the JSON strings ``muted_records`` reads (bad ones left out)."""
    if not raw:
        return []
    try:
        recs = json.loads(raw)
    except ValueError:
        return []
    if not isinstance(recs, list):
        return []
    return [r for r in recs if isinstance(r, dict) and isinstance(r.get("constraint"), str)
            and r.get("how") in ("mute", "influence")]


def muted_records(ob) -> list[dict]:
    """What Sinew bakes muted on ``ob`` and did not restore: [{"bone", "constraint", "how",
    "influence"}] (``how``: "mute", or "influence" where Mute is driven and the influence was set
    to 0 from "influence"). Each pose bone keeps its own records
    (``pose_bone.sinew.muted_constraints``), so ``bone`` is the bone's name now, also after a
    rename; records kept by bone name on the object (``ob.sinew_muted``: files baked before, or a
    bone that is not there) come last."""
    recs = []
    for pb in ob.pose.bones if ob.pose is not None else ():
        recs += [dict(r, bone=pb.name) for r in _parse_records(pb.sinew.muted_constraints)]
    known = {(r["bone"], r["constraint"]) for r in recs}
    recs += [r for r in _parse_records(getattr(ob, "sinew_muted", ""))
             if isinstance(r.get("bone"), str) and (r["bone"], r["constraint"]) not in known]
    return recs


def store_muted_records(ob, recs) -> None:
    """Keeps ``recs`` (as ``muted_records`` gives them) as the whole record: each on its pose bone,
    one whose bone is not there by that name on the object. Writes only what changes."""
    on_bone, by_name = {}, []
    for r in recs:
        if ob.pose.bones.get(r["bone"]) is not None:
            on_bone.setdefault(r["bone"], []).append({k: v for k, v in r.items() if k != "bone"})
        else:
            by_name.append(r)
    for pb in ob.pose.bones:
        raw = json.dumps(on_bone[pb.name]) if pb.name in on_bone else ""
        if pb.sinew.muted_constraints != raw:
            pb.sinew.muted_constraints = raw
    raw = json.dumps(by_name) if by_name else ""
    if ob.sinew_muted != raw:
        ob.sinew_muted = raw


def mute_constraints(ob, replaced) -> tuple[int, list[str]]:
    """Switches off the Blender IK constraints ``replaced`` [(bone, constraint)] so they do not
    act on top of the Sinew pose: mutes them, or, where ``mute`` is driven (Rigify switches its
    pole / no-pole IK that way), sets their influence to 0. Each one changed is recorded on the
    bone (``muted_records``) for Restore IK Constraints. Returns (count, warnings)."""
    ad = ob.animation_data
    drivers = ad.drivers if ad is not None else None

    def driven(c, prop):
        return drivers is not None and drivers.find(c.path_from_id(prop)) is not None

    recs = muted_records(ob)
    known = {(r["bone"], r["constraint"]) for r in recs}
    n, warnings = 0, []
    for bone, con in replaced:
        c = ob.pose.bones[bone].constraints.get(con)
        if c is None:
            continue
        if not driven(c, "mute"):
            if not c.mute:
                c.mute = True
                n += 1
                if (bone, con) not in known:
                    recs.append({"bone": bone, "constraint": con, "how": "mute"})
        elif not driven(c, "influence"):
            if c.influence != 0.0:
                if (bone, con) not in known:
                    recs.append({"bone": bone, "constraint": con, "how": "influence", "influence": c.influence})
                c.influence = 0.0
                n += 1
            warnings.append(f'Bone "{bone}": constraint "{con}" has a driven Mute; its influence was set to 0 instead')
        else:
            warnings.append(f'Bone "{bone}": constraint "{con}" has driven Mute and Influence; '
                            "it still acts on top of the Sinew pose")
    store_muted_records(ob, recs)
    return n, warnings


@dataclass
class Restored:
    """What Restore IK Constraints did on one armature (``restore_constraints``)."""

    turned_on: list[str] = field(default_factory=list)  # the constraints turned back on, described
    kept: list[str] = field(default_factory=list)       # why a record is kept: its constraint was not found
    forgotten: list[str] = field(default_factory=list)  # why a record whose constraint was not found is dropped


def _switched_off(c, how: str) -> bool:
    """Whether constraint ``c`` is off the way a record's ``how`` says Sinew switched it off."""
    return c.mute if how == "mute" else c.influence == 0.0


def _could_be(pb, c, how: str, named) -> bool:
    """Whether constraint ``c`` of pose bone ``pb`` could be one a record lost track of: an IK
    constraint still switched off the way the record says (``how``) that no record names."""
    return c.type == 'IK' and _switched_off(c, how) and (pb.name, c.name) not in named


def restore_constraints(ob) -> Restored:
    """Turns back on exactly the IK constraints Sinew bakes muted on ``ob`` (``muted_records``,
    which follow a renamed bone) and forgets them; one the user has turned on again since is left
    as it is, and forgotten.

    A record whose constraint is not found by its name (a renamed or deleted constraint; or, for
    a record kept by bone name, a renamed or deleted bone) is never guessed at: while an IK
    constraint that is still off the way the record says, and that no other record names, could
    be it (on the record's bone; anywhere in the armature when that bone is not there), the record
    is kept, and ``kept`` says which constraints to give the name back to, so Restore can run
    again; otherwise nothing Sinew switched off is left to turn on, and the record is forgotten
    (``forgotten`` says so)."""
    done = Restored()
    recs = muted_records(ob)
    named = {(r["bone"], r["constraint"]) for r in recs}
    keep = []
    for r in recs:
        bone, con, how = r["bone"], r["constraint"], r["how"]
        pb = ob.pose.bones.get(bone)
        c = pb.constraints.get(con) if pb is not None else None
        if c is None:
            if pb is not None:
                what = (f'Bone "{bone}": IK constraint "{con}", which a Sinew bake muted, is not on it by that name any '
                        "more (renamed or deleted)")
                give_back = f'rename it back to "{con}"'
                could_be = [f'"{x.name}"' for x in pb.constraints if _could_be(pb, x, how, named)]
            else:
                what = (f'Bone "{bone}", whose IK constraint "{con}" a Sinew bake muted, is not in the armature by that '
                        "name any more (renamed or deleted)")
                give_back = f'rename the bone back to "{bone}"'
                could_be = [f'"{x.name}" (bone "{p.name}")' for p in ob.pose.bones for x in p.constraints
                            if _could_be(p, x, how, named)]
            if could_be:
                keep.append(r)
                done.kept.append(f"{what}; {', '.join(could_be)}, still switched off, may be it: {give_back} and run "
                                 "Restore IK Constraints again (Sinew keeps the record), or turn it on yourself")
            else:
                done.forgotten.append(f"{what}; no IK constraint there is still switched off, so nothing is left to "
                                      "turn back on (record dropped)")
            continue
        if not _switched_off(c, how):
            continue  # turned on again since: left as it is
        if how == "mute":
            c.mute = False
            done.turned_on.append(f'"{con}" ({bone})')
        else:
            c.influence = float(r.get("influence", 1.0))
            done.turned_on.append(f'"{con}" ({bone}, influence {c.influence:.3g})')
    store_muted_records(ob, keep)
    return done
