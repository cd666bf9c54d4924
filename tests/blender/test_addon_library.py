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
    path = str(tmp_path / "rig_library.blend")
    _save_library(path, (ob, t))
    return path


def _save_library(path, objects):
    """Saves the current file as library ``path`` with ``objects`` in collection "RigColl", then
    starts an empty file."""
    coll = bpy.data.collections.new("RigColl")
    bpy.context.scene.collection.children.link(coll)
    for o in objects:
        bpy.context.scene.collection.objects.unlink(o)
        coll.objects.link(o)
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_homefile(use_empty=True)


def _link(path):
    with bpy.data.libraries.load(path, link=True) as (_src, dst):
        dst.collections = ["RigColl"]
    coll = dst.collections[0]
    bpy.context.scene.collection.children.link(coll)
    return coll


def _override(path):
    """Links "RigColl" of library ``path`` and makes a fully editable library override of it in
    its place: (the override collection, its armature)."""
    coll = _link(path)
    local = coll.override_hierarchy_create(bpy.context.scene, bpy.context.view_layer, do_fully_editable=True)
    bpy.context.scene.collection.children.unlink(coll)
    return local, next(o for o in local.objects if o.type == 'ARMATURE')


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
    _local, rig = _override(_library(tmp_path))
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


def test_overridden_rig_with_a_linked_action_bakes_into_a_local_one(tmp_path, capfd):
    path = str(tmp_path / "animated_library.blend")
    ob = R.make_chain(3, name="Rig")
    for f in (1, 10):
        ob.pose.bones["b00"].rotation_quaternion = (1.0, 0.01 * f, 0.0, 0.0)
        ob.pose.bones["b00"].keyframe_insert("rotation_quaternion", frame=f)
    _save_library(path, (ob,))
    _local, rig = _override(path)
    linked_action = rig.animation_data.action
    assert linked_action.library is not None
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.4, 0.1, 1.2), 10: (-0.3, 0.2, 1.1)})
    R.set_goal(rig, "b02", t, chain_length=2)
    R.activate(rig)
    # A linked action is named with its library, as Blender shows it.
    with pytest.raises(RuntimeError, match=r'Action "RigAction" \[animated_library.blend\] is linked and cannot be '
                                           r"changed: turn on New Action"):
        bpy.ops.sinew.bake(frame_start=1, frame_end=10, new_action=False)
    assert rig.animation_data.action == linked_action
    capfd.readouterr()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    assert 'Baked into new action "Rig_Sinew"; "RigAction" [animated_library.blend] is kept' in capfd.readouterr().out
    act = rig.animation_data.action
    assert act.library is None and act.sinew_original == linked_action
    for f in (1, 10):
        bpy.context.scene.frame_set(f)
        assert (R.world_tail(rig, "b02") - R.world_location(t)).length < 1e-3, f
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    assert rig.animation_data.action == act
    assert ('Re-baked into "Rig_Sinew" (the original action "RigAction" [animated_library.blend] is kept)'
            in capfd.readouterr().out)


def test_rebaking_an_override_whose_linked_action_is_a_bake_names_the_library(tmp_path, capfd):
    """A rig baked in its library (its action is the library's "Rig_Sinew"), overridden in a shot
    and baked again goes into a new local "Rig_Sinew"; the report tells the two apart by the
    library (QA qa9 defect 4: 'Baked into new action "Rig_Sinew"; "Rig_Sinew" is kept')."""
    path = str(tmp_path / "rig.blend")
    ob = R.make_chain(3, name="Rig")
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.4, 0.1, 1.1), 10: (-0.4, 0.2, 1.0)})
    ob.pose.bones["b00"].keyframe_insert("rotation_quaternion", frame=1)
    c = ob.pose.bones["b02"].constraints.new('IK')
    c.target, c.chain_count = t, 2
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}  # baked in the library
    bpy.ops.object.mode_set(mode='OBJECT')
    _save_library(path, (ob, t))
    local, rig = _override(path)
    linked = rig.animation_data.action
    assert linked.name == "Rig_Sinew" and linked.library is not None
    R.activate(rig)
    assert bpy.ops.sinew.restore_constraints() == {'FINISHED'}
    bpy.ops.object.mode_set(mode='POSE')
    capfd.readouterr()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    out = capfd.readouterr().out
    assert 'Baked into new action "Rig_Sinew"; "Rig_Sinew" [rig.blend] is kept' in out, out
    act = rig.animation_data.action
    assert act.name == "Rig_Sinew" and act.library is None and act != linked
    assert act.sinew_original.name == "RigAction" and act.sinew_original.library is not None
    target = next(o for o in local.objects if o.type == 'EMPTY')
    for f in (1, 10):
        bpy.context.scene.frame_set(f)
        assert (R.world_tail(rig, "b02") - R.world_location(target)).length < 1e-3, f
