"""Real armatures and scene helpers for the add-on tests (no mocks: everything is bpy data)."""

import contextlib
import math

import bpy
import numpy as np
from mathutils import Quaternion, Vector


def _new_armature(name):
    arm = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(ob)
    activate(ob)
    return ob


def activate(ob):
    # (Synced first: after objects move between collections or a collection is excluded, the view
    # layer's object list can still hold the old bases until an update, and walking it then
    # crashed Blender once in a full run, in test_addon_hidden_targets.)
    bpy.context.view_layer.update()
    for o in bpy.context.view_layer.objects:
        o.select_set(False)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)


def make_chain(n=10, length=0.5, name="Chain", roll_step=0.0, bend=0.0):
    """n connected bones b00..b(n-1) from the origin up +Z (armature space), with rolls; with
    ``bend``, the joints zigzag by that much in Y (the tip back at Y 0), so Blender's IK has a
    bend to follow."""
    ob = _new_armature(name)
    bpy.ops.object.mode_set(mode='EDIT')
    prev = None
    for i in range(n):
        eb = ob.data.edit_bones.new(f"b{i:02d}")
        y0 = prev.tail.y if prev is not None else 0.0
        y1 = (bend if i % 2 else -bend) if i < n - 1 else 0.0
        eb.head = (0.0, y0, i * length)
        eb.tail = (0.0, y1, (i + 1) * length)
        eb.roll = roll_step * i
        if prev is not None:
            eb.parent = prev
            eb.use_connect = True
        prev = eb
    bpy.ops.object.mode_set(mode='OBJECT')
    return ob


def make_ybranch(name="YBranch"):
    """A trunk of 3 bones up +Z, then two 3-bone branches leaning to +X (L*) and -X (R*)."""
    ob = _new_armature(name)
    bpy.ops.object.mode_set(mode='EDIT')
    eds = ob.data.edit_bones
    prev = None
    for i in range(3):
        eb = eds.new(f"trunk{i}")
        eb.head, eb.tail = (0, 0, i * 0.5), (0, 0, (i + 1) * 0.5)
        if prev:
            eb.parent, eb.use_connect = prev, True
        prev = eb
    top = prev
    for side, sx in (("L", 1.0), ("R", -1.0)):
        p = top
        head = Vector(top.tail)
        for i in range(3):
            eb = eds.new(f"{side}{i}")
            d = Vector((0.3 * sx, 0.0, 0.4)).normalized() * 0.5
            eb.head, eb.tail = head, head + d
            eb.parent, eb.use_connect = p, True
            p, head = eb, head + d
    bpy.ops.object.mode_set(mode='OBJECT')
    return ob


def make_metarig():
    """Rigify's human metarig (159 bones, real rest orientations and rolls)."""
    bpy.ops.object.armature_human_metarig_add()
    ob = bpy.context.active_object
    assert ob.type == 'ARMATURE' and len(ob.data.bones) > 100
    return ob


def generate_rigify(meta=None):
    """The rig Rigify generates from ``meta`` (by default the human metarig, ``make_metarig``),
    made the active object."""
    meta = meta or make_metarig()
    activate(meta)
    assert bpy.ops.pose.rigify_generate() == {'FINISHED'}
    rig = next(o for o in bpy.data.objects if o.type == 'ARMATURE' and o != meta)
    activate(rig)
    return rig


def add_empty(name, location=(0, 0, 0), parent=None):
    e = bpy.data.objects.new(name, None)
    e.empty_display_type = 'SPHERE'
    e.empty_display_size = 0.05
    e.location = location
    if parent is not None:
        e.parent = parent
    bpy.context.scene.collection.objects.link(e)
    return e


def set_goal(ob, bone, target, subtarget="", chain_length=0, **kw):
    s = ob.pose.bones[bone].sinew
    s.use_goal = True
    s.target = target
    s.subtarget = subtarget
    s.chain_length = chain_length
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def key_locations(ob, frames_values):
    """Keys ob.location at {frame: (x, y, z)}."""
    for f, loc in frames_values.items():
        ob.location = loc
        ob.keyframe_insert("location", frame=f)


@contextlib.contextmanager
def frames_stepped():
    """A list that gets the scene's frame at every frame change (``frame_change_pre``) while the
    block runs: what a call stepped."""
    stepped = []

    def count(scene, *_args):
        stepped.append(scene.frame_current)

    bpy.app.handlers.frame_change_pre.append(count)
    try:
        yield stepped
    finally:
        bpy.app.handlers.frame_change_pre.remove(count)


def depsgraph():
    dg = bpy.context.evaluated_depsgraph_get()
    dg.update()
    return dg


def world_tail(ob, bone):
    e = ob.evaluated_get(depsgraph())
    return e.matrix_world @ e.pose.bones[bone].tail


def world_head(ob, bone):
    e = ob.evaluated_get(depsgraph())
    return e.matrix_world @ e.pose.bones[bone].head


def world_location(ob):
    return ob.evaluated_get(depsgraph()).matrix_world.translation.copy()


def evaluated_locals(ob):
    """{bone: Quaternion} local rotations (relative to rest, as rotation_quaternion) recovered from
    the *evaluated* armature-space pose matrices, so constraints and keys are all accounted for."""
    e = ob.evaluated_get(depsgraph())
    out = {}
    for pb in e.pose.bones:
        rest = pb.bone.matrix_local
        if pb.parent is None:
            base = rest
        else:
            base = pb.parent.matrix @ pb.parent.bone.matrix_local.inverted() @ rest
        out[pb.name] = (base.inverted() @ pb.matrix).to_quaternion()
    return out


def swing_twist(q):
    """Splits q = swing * twist about local Y: returns (swing rotation vector (x, z), twist angle)."""
    q = Quaternion(q).normalized()
    tw = Quaternion((q.w, 0.0, q.y, 0.0))
    if tw.magnitude < 1e-12:
        tw = Quaternion()
    tw.normalize()
    swing = q @ tw.inverted()
    if swing.w < 0:
        swing.negate()
    axis, angle = swing.to_axis_angle()
    rv = axis * angle
    twist = 2.0 * math.atan2(tw.y, tw.w)
    twist = (twist + math.pi) % (2 * math.pi) - math.pi
    return (rv.x, rv.z), twist


def pose_snapshot(ob):
    return {pb.name: (tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler), pb.rotation_mode,
                      tuple(pb.scale)) for pb in ob.pose.bones}


# Blender 4.4+ stores keys in slotted, layered actions (5.0 removed Action.fcurves); 4.2 and 4.3
# have the legacy Action.fcurves. The helpers below read either (scripts/test_blender_versions.sh).
SLOTTED = hasattr(bpy.types, "ActionSlot")


def action_snapshot(action):
    """Every key of every F-curve of an action: {(slot, path, index): co array} (slot "" for a
    legacy, pre-slotted action)."""
    out = {}
    if action is None:
        return out

    def add(slot_id, fcurves):
        for fc in fcurves:
            co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
            fc.keyframe_points.foreach_get("co", co)
            hl = np.empty_like(co)
            fc.keyframe_points.foreach_get("handle_left", hl)
            out[(slot_id, fc.data_path, fc.array_index)] = np.concatenate([co, hl])

    if not SLOTTED:
        add("", action.fcurves)
        return out
    for layer in action.layers:
        for strip in layer.strips:
            for slot in action.slots:
                cb = strip.channelbag(slot)
                if cb is not None:
                    add(slot.identifier, cb.fcurves)
    return out


def action_fcurves(action, ob):
    """What holds ``action``'s F-curves for ``ob`` (``.fcurves.find(path, index=i)``): the channelbag
    of ``ob``'s slot, or on Blender 4.2/4.3 the action itself."""
    if not SLOTTED:
        return action
    from bpy_extras import anim_utils

    return anim_utils.action_get_channelbag_for_slot(action, ob.animation_data.action_slot)


def channelbag(ob):
    return action_fcurves(ob.animation_data.action, ob)


def fcurve(ob, path, index):
    cb = channelbag(ob)
    return cb.fcurves.find(path, index=index) if cb else None


def key_frames(fc):
    co = np.empty(2 * len(fc.keyframe_points), dtype=np.float32)
    fc.keyframe_points.foreach_get("co", co)
    return co[0::2], co[1::2]


def same_snapshot(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
