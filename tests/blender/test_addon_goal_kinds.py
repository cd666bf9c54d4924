"""Sinew goals of every kind (Bone properties > Sinew IK > Goal > Kind) in real Blender: a foot
kept above a floor Empty (Half-Space), a hand slid onto a table (Plane), an effector on a line,
a head aimed at a target (Aim), a bone turned to a rotation only (Orientation). Every check reads
Blender's evaluated pose back and measures it against the target Empty's own matrix_world."""

import json
import math

import bpy
import numpy as np
import pytest
from mathutils import Vector

import sinew_rigs as R
from test_addon_ux import draw_into

TOL = 1e-3  # world units; the solver's tolerance is 1e-4 in armature space
AXES = {'X': (1, 0, 0), 'Y': (0, 1, 0), 'Z': (0, 0, 1), 'NEG_X': (-1, 0, 0), 'NEG_Y': (0, -1, 0), 'NEG_Z': (0, 0, -1)}


def make_leg(name="Leg"):
    """pelvis (root, up +Z) with a leg hanging from its head: thigh, shin (knee bent forward a
    little), foot (toe forward, near the ground). The armature object is moved and turned, so
    armature and world space differ."""
    arm = bpy.data.armatures.new(name)
    ob = bpy.data.objects.new(name, arm)
    bpy.context.scene.collection.objects.link(ob)
    R.activate(ob)
    bpy.ops.object.mode_set(mode='EDIT')
    eds = arm.edit_bones
    pelvis = eds.new("pelvis")
    pelvis.head, pelvis.tail = (0, 0, 1.0), (0, 0, 1.2)
    thigh = eds.new("thigh")
    thigh.head, thigh.tail, thigh.parent = (0, 0, 1.0), (0, -0.03, 0.55), pelvis
    shin = eds.new("shin")
    shin.head, shin.tail, shin.parent, shin.use_connect = (0, -0.03, 0.55), (0, 0, 0.1), thigh, True
    foot = eds.new("foot")
    foot.head, foot.tail, foot.parent, foot.use_connect = (0, 0, 0.1), (0, -0.18, 0.02), shin, True
    bpy.ops.object.mode_set(mode='OBJECT')
    ob.location = (0.5, -0.3, 0.2)
    ob.rotation_euler = (0.1, 0.0, 0.4)
    bpy.context.view_layer.update()
    return ob


def axis_world(ob, axis='Z'):
    """The world direction of axis ``axis`` of object ``ob`` (evaluated), unit length."""
    m = ob.evaluated_get(R.depsgraph()).matrix_world.to_3x3()
    return (m @ Vector(AXES[axis])).normalized()


def signed_distance(point, floor, axis='Z'):
    """The signed distance of a world point from the plane through ``floor``'s origin across its
    axis ``axis`` (positive on the side the axis points to)."""
    return (point - R.world_location(floor)).dot(axis_world(floor, axis))


def tilted_floor(name, through, height):
    """A floor Empty turned off the axes, whose plane passes ``height`` below the world point
    ``through`` along its local Z (negative: above it); its origin is off to the side (0.4 along
    its X), so the point of the plane nearest ``through`` is not the origin."""
    floor = R.add_empty(name)
    floor.empty_display_type = 'PLAIN_AXES'
    floor.rotation_euler = (0.25, -0.2, 0.6)
    bpy.context.view_layer.update()
    floor.location = through - axis_world(floor) * height + axis_world(floor, 'X') * 0.4
    bpy.context.view_layer.update()
    return floor


def world_pose(ob):
    e = ob.evaluated_get(R.depsgraph())
    return {pb.name: np.array(e.matrix_world @ pb.matrix) for pb in e.pose.bones}


# -- Half-Space: a foot above a floor ------------------------------------------------------------


def test_half_space_lifts_a_foot_below_a_tilted_floor_onto_it():
    ob = make_leg()
    floor = tilted_floor("Floor", R.world_tail(ob, "foot"), -0.12)  # the toe starts 0.12 below the floor
    assert signed_distance(R.world_tail(ob, "foot"), floor) == pytest.approx(-0.12, abs=1e-6)
    R.set_goal(ob, "foot", floor, chain_length=3, goal_kind='HALF_SPACE')
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    d = signed_distance(R.world_tail(ob, "foot"), floor)
    assert d >= -TOL, d
    assert d < 0.01, d  # lifted onto the floor, not beyond: the nearest point of the allowed side
    # The pelvis (not in the chain) did not move; the leg did.
    assert R.evaluated_locals(ob)["pelvis"].angle < 1e-9
    assert R.evaluated_locals(ob)["thigh"].angle > 1e-3


def test_half_space_leaves_a_foot_above_the_floor_exactly_as_it_is():
    ob = make_leg()
    ob.pose.bones["shin"].rotation_quaternion = (0.9950041652780258, 0.09983341664682815, 0.0, 0.0)
    bpy.context.view_layer.update()
    floor = tilted_floor("Floor", R.world_tail(ob, "foot"), 0.12)  # 0.12 below the toe
    R.set_goal(ob, "foot", floor, chain_length=3, goal_kind='HALF_SPACE')
    R.activate(ob)
    before, before_world = R.pose_snapshot(ob), world_pose(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert R.pose_snapshot(ob) == before  # bit-identical channels
    after = world_pose(ob)
    assert all(np.array_equal(after[n], before_world[n]) for n in before_world)


def test_half_space_normal_is_the_axis_chosen():
    """goal_axis -Z: the allowed side is below the Empty's plane, so a toe above it is pulled down."""
    ob = make_leg()
    ceiling = tilted_floor("Ceiling", R.world_tail(ob, "foot"), 0.1)  # its plane 0.1 below the toe
    R.set_goal(ob, "foot", ceiling, chain_length=3, goal_kind='HALF_SPACE', goal_axis='NEG_Z')
    R.activate(ob)
    bpy.ops.sinew.solve()
    d = signed_distance(R.world_tail(ob, "foot"), ceiling, 'NEG_Z')
    assert -TOL <= d < 0.01, d


# -- Plane and Line: a hand on a table, an effector on a rail ---------------------------------------


@pytest.mark.parametrize("subtarget", [False, True])
def test_plane_puts_the_effector_on_the_targets_plane(subtarget):
    ob = R.make_chain(4, roll_step=0.3)
    ob.location, ob.rotation_euler = (0.3, 0.2, 0.1), (0.2, -0.1, 0.5)
    bpy.context.view_layer.update()
    table = tilted_floor("Table", R.world_tail(ob, "b03"), 0.3)  # the tip starts 0.3 off the table
    target, bone, axis = table, "", 'Z'
    if subtarget:
        # The table is a bone of another armature: its plane is across the bone's own Y axis.
        holder = R.make_chain(1, name="Holder")
        holder.matrix_world = table.matrix_world
        bpy.context.view_layer.update()
        target, bone, axis = holder, "b00", 'Y'
    R.set_goal(ob, "b03", target, subtarget=bone, goal_kind='PLANE', goal_axis=axis)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    e = target.evaluated_get(R.depsgraph())
    m = e.matrix_world @ e.pose.bones[bone].matrix if bone else e.matrix_world
    normal = (m.to_3x3() @ Vector(AXES[axis])).normalized()
    d = (R.world_tail(ob, "b03") - m.translation).dot(normal)
    assert abs(d) < TOL, d
    assert (R.world_tail(ob, "b03") - m.translation).length > 0.05  # on the plane, not on its origin


def test_line_puts_the_effector_on_the_line_along_the_targets_axis():
    ob = R.make_chain(4, roll_step=0.3)
    rail = R.add_empty("Rail", (0.8, 0.4, 1.2))
    rail.rotation_euler = (0.3, 0.5, -0.4)
    R.set_goal(ob, "b03", rail, goal_kind='LINE', goal_axis='X')
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    d = R.world_tail(ob, "b03") - R.world_location(rail)
    u = axis_world(rail, 'X')
    assert (d - u * d.dot(u)).length < TOL
    assert abs(d.dot(u)) > 0.05  # somewhere along the line, not pulled to its origin


# -- Aim and Orientation: a head looks at a target; a bone takes a rotation only -------------------


@pytest.mark.parametrize("aim_axis", ['Y', 'NEG_Z'])
def test_aim_points_the_bones_axis_at_the_target(aim_axis):
    ob = R.make_chain(3, roll_step=0.4)
    ob.location, ob.rotation_euler = (0.2, 0.0, 0.1), (0.0, 0.2, -0.3)
    look = R.add_empty("Look", (1.5, -2.0, 1.0))
    R.set_goal(ob, "b02", look, chain_length=2, goal_kind='AIM', aim_axis=aim_axis)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    e = ob.evaluated_get(R.depsgraph())
    m = e.matrix_world @ e.pose.bones["b02"].matrix
    pointing = (m.to_3x3() @ Vector(AXES[aim_axis])).normalized()
    wanted = (R.world_location(look) - m.translation).normalized()
    assert math.degrees(pointing.angle(wanted)) < 0.1
    assert R.evaluated_locals(ob)["b00"].angle < 1e-9  # chain length 2: the bottom bone stays


def test_aim_with_rotation_on_is_refused_by_name_and_changes_nothing():
    ob = R.make_chain(3)
    look = R.add_empty("Look", (1.5, -2.0, 1.0))
    R.set_goal(ob, "b02", look, goal_kind='AIM', use_orientation=True)
    R.activate(ob)
    before = R.pose_snapshot(ob)
    with pytest.raises(RuntimeError, match='Bone "b02": an Aim goal .* takes no rotation'):
        bpy.ops.sinew.solve()
    assert R.pose_snapshot(ob) == before


def test_orientation_turns_the_bone_to_the_targets_rotation_with_rotation_implied():
    ob = R.make_chain(3)
    turn = R.add_empty("Turn", (5.0, 5.0, 5.0))  # its place does not matter
    turn.rotation_euler = (0.4, -0.3, 1.1)
    R.set_goal(ob, "b02", turn, goal_kind='ORIENTATION')
    assert not ob.pose.bones["b02"].sinew.use_orientation
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    e = ob.evaluated_get(R.depsgraph())
    have = (e.matrix_world @ e.pose.bones["b02"].matrix).to_quaternion()
    want = turn.evaluated_get(R.depsgraph()).matrix_world.to_quaternion()
    assert math.degrees(have.rotation_difference(want).angle) < 0.1


# -- Bake: the floor moves -----------------------------------------------------------------------


def _bake_floor(ob, floor, frames, addon, sampling):
    job = addon.pipeline.BakeJob(bpy.context, ob, frames[0], frames[-1], addon.pipeline.Settings(), sampling=sampling)
    r = job.run()
    assert r.reached.all(), r.residuals
    assert not r.blender_misses
    out = []
    for f in frames:
        bpy.context.scene.frame_set(f)
        out.append(signed_distance(R.world_tail(ob, "foot"), floor))
    return r, out


@pytest.mark.parametrize("sampling", ["auto", "frames"])
def test_bake_keeps_the_foot_above_a_floor_that_rises_and_falls(addon, sampling):
    ob = make_leg()
    toe = R.world_tail(ob, "foot")
    floor = tilted_floor("Floor", toe, 0.0)
    n = axis_world(floor)
    heights = {1: -0.10, 2: 0.05, 3: 0.12, 4: -0.02, 5: 0.08}  # the toe's height above the floor at rest
    for f, h in heights.items():
        floor.location = toe - n * h
        floor.keyframe_insert("location", frame=f)
    R.set_goal(ob, "foot", floor, chain_length=3, goal_kind='HALF_SPACE')
    R.activate(ob)
    r, dists = _bake_floor(ob, floor, list(heights), addon, sampling)
    assert r.sampling == ("fcurves" if sampling == "auto" else "frames")
    assert r.per_frame  # each frame from its own keyed pose, as Solve IK at that frame
    assert all(d >= -TOL for d in dists), dists
    for (f, h), d in zip(heights.items(), dists):
        if h < 0.0:  # the floor is above the toe at rest: the toe goes onto the floor, not beyond
            assert d < 0.01, (f, d)
        else:  # below it: the leg keeps its own (here: rest) pose, also after a frame that lifted it
            assert d == pytest.approx(h, abs=1e-5), (f, d)


def test_bake_with_a_turning_floor_solves_each_frame_with_its_own_normal(addon):
    ob = make_leg()
    toe = R.world_tail(ob, "foot")
    floor = tilted_floor("Floor", toe, -0.08)
    for f, rot in {1: (0.25, -0.2, 0.6), 3: (-0.3, 0.35, 0.1), 5: (0.5, 0.1, -0.4)}.items():
        floor.rotation_euler = rot
        floor.keyframe_insert("rotation_euler", frame=f)
    R.set_goal(ob, "foot", floor, chain_length=3, goal_kind='HALF_SPACE')
    R.activate(ob)
    r, dists = _bake_floor(ob, floor, [1, 2, 3, 4, 5], addon, "auto")
    assert r.per_frame
    assert all(d >= -TOL for d in dists), dists


# -- Export, comparison, reports --------------------------------------------------------------------


def test_export_writes_the_kind_and_loads_back_to_the_same_kind(addon, tmp_path):
    import sinew

    ob = make_leg()
    floor = tilted_floor("Floor", R.world_tail(ob, "foot"), -0.12)
    look = R.add_empty("Look", (1.0, -2.0, 1.5))
    R.set_goal(ob, "foot", floor, chain_length=3, goal_kind='HALF_SPACE')
    R.set_goal(ob, "pelvis", look, chain_length=1, goal_kind='AIM', aim_axis='Z')
    R.activate(ob)
    path = tmp_path / "kinds.json"
    assert bpy.ops.sinew.export_problem(filepath=str(path)) == {'FINISHED'}
    text = path.read_text()
    doc = json.loads(text)
    assert doc["format"] == "sinew.problem/2"
    goals = {g["bone"]: g for g in doc["goals"]}
    assert goals["foot"]["kind"] == "half_space" and goals["pelvis"]["kind"] == "aim"
    assert goals["pelvis"]["axis"] == [0.0, 0.0, 1.0]
    # The normal is the floor's Z in armature space.
    want = ob.matrix_world.inverted().to_3x3() @ axis_world(floor)
    np.testing.assert_allclose(goals["foot"]["normal"], want.normalized(), atol=1e-6)
    rig, loaded, solver, pose, root_t, root = sinew.load_problem(text)
    kinds = {g.bone: (g.kind, g.normal, g.axis) for g in loaded}
    assert kinds["foot"][0] == "half_space" and kinds["pelvis"][0] == "aim"
    np.testing.assert_allclose(kinds["foot"][1], goals["foot"]["normal"], atol=1e-12)
    np.testing.assert_allclose(kinds["pelvis"][2], (0.0, 0.0, 1.0), atol=1e-12)
    # The file solves to what Solve IK writes.
    from_file = solver.solve(rig, loaded, pose=pose, root_translation=root_t, root=root,
                             reference=np.array(doc["reference"]["rotations"]))
    res = addon.pipeline.solve_pose(bpy.context, ob, addon.pipeline.Settings(), key=False)
    # (The file's rest matrices come back within 3e-16, which moves the answer within the tolerance.)
    np.testing.assert_allclose(from_file.rotations, res.rotations, atol=1e-5)


def test_position_goals_still_export_as_format_1(tmp_path):
    ob = R.make_chain(3)
    R.set_goal(ob, "b02", R.add_empty("T", (0.4, 0.0, 1.2)))
    R.activate(ob)
    path = tmp_path / "p.json"
    bpy.ops.sinew.export_problem(filepath=str(path))
    doc = json.loads(path.read_text())
    assert doc["format"] == "sinew.problem/1" and "kind" not in doc["goals"][0]


def test_compare_methods_and_reports_take_the_kinds(addon, capfd):
    ob = make_leg()
    floor = tilted_floor("Floor", R.world_tail(ob, "foot"), -0.12)
    look = R.add_empty("Look", (1.0, -2.0, 1.5))
    R.set_goal(ob, "foot", floor, chain_length=3, goal_kind='PLANE')
    R.set_goal(ob, "pelvis", look, chain_length=1, goal_kind='AIM')
    R.activate(ob)
    doc = addon.pipeline.compare_methods(bpy.context, ob, addon.pipeline.Settings())
    assert doc["orientation"]  # the aim's angle has a column
    rows = {r["method"]: r for r in doc["methods"]}
    assert rows["fabrik"]["reached"] and rows["dls"]["reached"]
    capfd.readouterr()
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    assert "2 goals reached" in out and "pelvis: 0, aim error" in out, out
    a = addon.rig_reader.analysis(ob)
    assert {b: src for b, src, _m in a["goals"]} == {"foot": "Sinew Plane", "pelvis": "Sinew Aim"}


def test_a_floor_scaled_to_nothing_is_refused_by_name(addon):
    ob = make_leg()
    floor = tilted_floor("Floor", R.world_tail(ob, "foot"), -0.12)
    floor.scale = (1.0, 1.0, 0.0)
    R.set_goal(ob, "foot", floor, chain_length=3, goal_kind='HALF_SPACE')
    R.activate(ob)
    with pytest.raises(RuntimeError, match=r'Bone "foot": the Half-Space goal\'s normal, the Z axis of "Floor", is zero'):
        bpy.ops.sinew.solve()


# -- The panel ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ['POSITION', 'ORIENTATION', 'AIM', 'LINE', 'PLANE', 'HALF_SPACE'])
def test_goal_panel_shows_the_kind_and_only_the_fields_that_apply(addon, kind):
    ob = R.make_chain(3)
    R.set_goal(ob, "b02", R.add_empty("T"), goal_kind=kind)
    R.activate(ob)
    ob.data.bones.active = ob.data.bones["b02"]
    for draw in (addon.ui.BONE_PT_sinew_goal.draw, addon.ui.VIEW3D_PT_sinew_bone.draw):
        log = draw_into(draw, bpy.context)
        props = {name: text for k, name, text in log if k == "prop"}
        assert "goal_kind" in props
        assert ("goal_axis" in props) == (kind in ('LINE', 'PLANE', 'HALF_SPACE'))
        if "goal_axis" in props:
            assert props["goal_axis"] == ("Direction" if kind == 'LINE' else "Normal")
        assert ("aim_axis" in props) == (kind == 'AIM')
        assert ("use_tail" in props) == (kind not in ('AIM', 'ORIENTATION'))
        assert ("use_orientation" in props) == (kind != 'ORIENTATION')
        assert not [t for k, t, _ in log if k == "label" and "Aim takes no rotation" in t]
    # Aim with Rotation on (set before the kind was changed) says why it will be refused.
    if kind == 'AIM':
        ob.pose.bones["b02"].sinew.use_orientation = True
        log = draw_into(addon.ui.BONE_PT_sinew_goal.draw, bpy.context)
        assert [t for k, t, _ in log if k == "label" and "Aim takes no rotation" in t]
