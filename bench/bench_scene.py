"""Scene building shared by the benchmarks that run headless Blender (bench/blender_bake.py and
bench/real_motion.py): keying F-curves in bulk, target empties, the active object.

Import it after ``bpy``, as the scripts do (Blender 5.0's slotted actions)."""

from __future__ import annotations

import bpy
import numpy as np
from bpy_extras import anim_utils


def key_fcurves(ob, path, values, frames, group="Object Transforms"):
    """Keys ``ob``'s data path ``path`` at every frame of ``frames`` from ``values`` (F, k),
    LINEAR, in bulk, in the F-curve group ``group`` of ``ob``'s action (made if it has none)."""
    ad = ob.animation_data or ob.animation_data_create()
    if ad.action is None:
        ad.action = bpy.data.actions.new(f"{ob.name}Action")
    if ad.action_slot is None:
        ad.action_slot = ad.action.slots.new(id_type='OBJECT', name=ob.name)
    cb = anim_utils.action_ensure_channelbag_for_slot(ad.action, ad.action_slot)
    values = np.asarray(values, dtype=np.float64)
    co = np.empty((len(frames), 2), dtype=np.float32)
    co[:, 0] = frames
    for c in range(values.shape[1]):
        fc = cb.fcurves.ensure(path, index=c, group_name=group)
        kp = fc.keyframe_points
        kp.clear()
        kp.add(len(frames))
        co[:, 1] = values[:, c]
        kp.foreach_set("co", co.ravel())
        kp.foreach_set("interpolation", np.full(len(frames), 1, dtype=np.int32))  # LINEAR
        fc.update()


def new_empty(name, size=0.05):
    """A sphere empty linked to the scene (a target or pole)."""
    e = bpy.data.objects.new(name, None)
    e.empty_display_type = 'SPHERE'
    e.empty_display_size = size
    bpy.context.scene.collection.objects.link(e)
    return e


def activate(ob):
    """Makes ``ob`` the only selected object and the active one."""
    for o in bpy.context.view_layer.objects:
        o.select_set(False)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
