"""Linked rigs: refused as Blender's pose tools refuse them; library overrides: Sinew's settings
can be overridden and survive saving and reloading."""

import bpy
import pytest

import sinew_rigs as R


def _library(tmp_path):
    """A library .blend with a rig (a Sinew goal and limits) and its target in collection "RigColl"."""
    ob = R.make_chain(3, name="Rig")
    t = R.add_empty("T", (0.5, 0.0, 1.2))
    s = R.set_goal(ob, "b02", t, chain_length=2)
    s.weight = 2.0
    ob.pose.bones["b01"].sinew.use_twist = True
    coll = bpy.data.collections.new("RigColl")
    bpy.context.scene.collection.children.link(coll)
    for o in (ob, t):
        bpy.context.scene.collection.objects.unlink(o)
        coll.objects.link(o)
    path = str(tmp_path / "rig_library.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_homefile(use_empty=True)
    return path


def _link(path):
    with bpy.data.libraries.load(path, link=True) as (_src, dst):
        dst.collections = ["RigColl"]
    coll = dst.collections[0]
    bpy.context.scene.collection.children.link(coll)
    return coll


def test_linked_rig_is_refused_like_blenders_pose_tools(addon, tmp_path):
    coll = _link(_library(tmp_path))
    rig = bpy.data.objects["Rig"]
    assert rig.library is not None and not rig.is_editable
    R.activate(rig)
    for op in (bpy.ops.sinew.solve, bpy.ops.sinew.bake):
        assert not op.poll()
        with pytest.raises(RuntimeError, match="Cannot edit library linked or non-editable override object"):
            op()
    with pytest.raises(addon.rig_reader.ReadError, match='Cannot edit library linked .* "Rig" .*library override'):
        addon.pipeline.solve_pose(bpy.context, rig, addon.pipeline.Settings())
    with pytest.raises(addon.rig_reader.ReadError, match="Cannot edit library linked"):
        addon.pipeline.BakeJob(bpy.context, rig, 1, 10, addon.pipeline.Settings())
    assert rig.animation_data is None and len(bpy.data.actions) == 0
    assert coll.library is not None


def test_overridden_rig_keeps_its_sinew_overrides_through_save_and_reload(tmp_path):
    coll = _link(_library(tmp_path))
    scene, view_layer = bpy.context.scene, bpy.context.view_layer
    local = coll.override_hierarchy_create(scene, view_layer, do_fully_editable=True)
    scene.collection.children.unlink(coll)
    rig = next(o for o in local.objects if o.type == 'ARMATURE')
    assert rig.override_library is not None and rig.is_editable
    s = rig.pose.bones["b02"].sinew
    assert s.weight == pytest.approx(2.0) and s.chain_length == 2  # from the library
    s.weight, s.chain_length = 3.5, 1
    rig.pose.bones["b01"].sinew.twist_max = 0.25
    rig.pose.bones["b00"].sinew.lock = True  # a bone whose Sinew settings the library never touched
    main = str(tmp_path / "shot.blend")
    bpy.ops.wm.save_as_mainfile(filepath=main)
    bpy.ops.wm.open_mainfile(filepath=main)
    rig = next(o for o in bpy.data.objects if o.type == 'ARMATURE' and o.override_library is not None)
    s = rig.pose.bones["b02"].sinew
    assert s.weight == pytest.approx(3.5) and s.chain_length == 1
    assert s.use_goal and s.target is not None and s.target.name.startswith("T")
    assert rig.pose.bones["b01"].sinew.twist_max == pytest.approx(0.25)
    assert rig.pose.bones["b01"].sinew.use_twist  # from the library, not overridden
    assert rig.pose.bones["b00"].sinew.lock
    # And the overridden rig solves: chain length 1 moves b02 only.
    R.activate(rig)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert R.evaluated_locals(rig)["b01"].angle < 1e-6
    assert R.evaluated_locals(rig)["b02"].angle > 1e-3


def test_overridden_rig_with_a_linked_action_bakes_into_a_local_one(tmp_path):
    path = str(tmp_path / "animated_library.blend")
    ob = R.make_chain(3, name="Rig")
    for f in (1, 10):
        ob.pose.bones["b00"].rotation_quaternion = (1.0, 0.01 * f, 0.0, 0.0)
        ob.pose.bones["b00"].keyframe_insert("rotation_quaternion", frame=f)
    coll = bpy.data.collections.new("RigColl")
    bpy.context.scene.collection.children.link(coll)
    bpy.context.scene.collection.objects.unlink(ob)
    coll.objects.link(ob)
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_homefile(use_empty=True)
    coll = _link(path)
    local = coll.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer, do_fully_editable=True)
    bpy.context.scene.collection.children.unlink(coll)
    rig = next(o for o in local.objects if o.type == 'ARMATURE')
    linked_action = rig.animation_data.action
    assert linked_action.library is not None
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.4, 0.1, 1.2), 10: (-0.3, 0.2, 1.1)})
    R.set_goal(rig, "b02", t, chain_length=2)
    R.activate(rig)
    with pytest.raises(RuntimeError, match=r'Action "RigAction" is linked from library .* turn on New Action'):
        bpy.ops.sinew.bake(frame_start=1, frame_end=10, new_action=False)
    assert rig.animation_data.action == linked_action
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    act = rig.animation_data.action
    assert act.library is None and act.sinew_original == linked_action
    for f in (1, 10):
        bpy.context.scene.frame_set(f)
        assert (R.world_tail(rig, "b02") - R.world_location(t)).length < 1e-3, f
