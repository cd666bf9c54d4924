"""Sinew against Blender's own IK on the same rig (the constraint evaluated by Blender, then
imported and solved by Sinew)."""

import math

import bpy
import pytest
from mathutils import Quaternion, Vector

import sinew_rigs as R


def _two_bones_bent():
    """A 2-bone chain bent about the first bone's X axis in rest (the knee toward local +Z), as
    legs and arms usually are."""
    ob = R._new_armature("Leg")
    bpy.ops.object.mode_set(mode='EDIT')
    a = ob.data.edit_bones.new("b00")
    a.head, a.tail = (0, 0, 0), (0.0, -0.3, 1.0)
    b = ob.data.edit_bones.new("b01")
    b.head, b.tail = (0.0, -0.3, 1.0), (0.0, 0.0, 2.0)
    b.parent, b.use_connect = a, True
    bpy.ops.object.mode_set(mode='OBJECT')
    return ob


def _knee_after(target, pole_at, angle_deg, solver):
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = _two_bones_bent()
    t = R.add_empty("T", target)
    pole = R.add_empty("Pole", pole_at)
    con = ob.pose.bones["b01"].constraints.new('IK')
    con.target, con.pole_target, con.pole_angle, con.chain_count = t, pole, math.radians(angle_deg), 2
    R.activate(ob)
    if solver == "sinew":
        bpy.ops.sinew.solve()
        assert not con.mute  # Solve IK leaves the constraint on; measure Sinew's keyed pose alone
        con.mute = True
    return R.world_head(ob, "b01").copy(), R.world_tail(ob, "b01").copy()


def test_reaches_the_same_target_as_blender_ik():
    for angle in (0.0, 90.0):
        _kb, tip_b = _knee_after((0.4, 0.2, 1.5), (0, -3, 1), angle, "blender")
        _ks, tip_s = _knee_after((0.4, 0.2, 1.5), (0, -3, 1), angle, "sinew")
        assert (tip_b - tip_s).length < 1e-3


# Blender's pole (IK_QJacobianSolver::ConstrainPoleVector, run once before its iterations): the
# chain turns rigidly about its top's head so that the effector points at the target and the
# plane of (top head -> effector, the top's X*cos(a) + Z*sin(a)) holds the pole; then it bends
# in its plane. Sinew does the same, so knees agree to Blender's own convergence (~1e-6).
@pytest.mark.parametrize("target, angle", [
    ((0.0, 0.0, 1.6), 0.0),
    ((0.0, 0.0, 1.6), 45.0),
    ((0.0, 0.0, 1.6), 90.0),
    ((0.0, 0.0, 1.6), -90.0),
    ((0.0, 0.0, 1.6), 135.0),
    ((0.4, 0.2, 1.5), 0.0),
    ((0.4, 0.2, 1.5), 45.0),
    ((0.4, 0.2, 1.5), 90.0),
    ((0.4, 0.2, 1.5), -90.0),
    ((0.4, 0.2, 1.5), -150.0),
])
def test_pole_puts_the_knee_where_blender_ik_does(target, angle):
    knee_b, _ = _knee_after(target, (0, -3, 1), angle, "blender")
    knee_s, _ = _knee_after(target, (0, -3, 1), angle, "sinew")
    assert (knee_b - knee_s).length < 1e-3, (tuple(knee_b), tuple(knee_s))


def test_baked_knees_follow_blender_ik_frame_by_frame():
    """A bake solves the frames warm-started, but a chain with a pole starts every frame from the
    pose before IK, as Blender's IK does: each frame's knee is Blender's for that frame."""
    knees = {}
    frames = range(1, 25, 3)
    for solver in ("blender", "sinew"):
        bpy.ops.wm.read_homefile(use_empty=True)
        ob = _two_bones_bent()
        t = R.add_empty("T")
        R.key_locations(t, {1: (0.4, 0.2, 1.5), 12: (0.0, 0.1, 1.7), 24: (-0.3, -0.4, 1.4)})
        pole = R.add_empty("Pole", (0, -3, 1))
        R.key_locations(pole, {1: (0, -3, 1), 24: (1.5, -2.5, 1.2)})
        con = ob.pose.bones["b01"].constraints.new('IK')
        con.target, con.pole_target, con.pole_angle, con.chain_count = t, pole, math.radians(45), 2
        R.activate(ob)
        if solver == "sinew":
            assert bpy.ops.sinew.bake(frame_start=1, frame_end=24) == {'FINISHED'}
            assert con.mute
        knees[solver] = []
        for f in frames:
            bpy.context.scene.frame_set(f)
            knees[solver].append(R.world_head(ob, "b01").copy())
    for f, kb, ks in zip(frames, knees["blender"], knees["sinew"]):
        assert (kb - ks).length < 1e-3, (f, tuple(kb), tuple(ks))


def test_use_tail_off_moves_the_bones_blender_moves():
    """Blender leaves the constrained bone out of the chain without use_tail and pulls its head:
    chain_count 2 on b03 moves b02 and b01 only."""
    results = {}
    for solver in ("blender", "sinew"):
        bpy.ops.wm.read_homefile(use_empty=True)
        ob = R.make_chain(4, roll_step=0.3)
        bpy.ops.object.mode_set(mode='EDIT')
        ob.data.edit_bones["b02"].tail.x += 0.1  # a rest bend, so Blender's IK has a bend direction
        bpy.ops.object.mode_set(mode='OBJECT')
        t = R.add_empty("T", (0.5, 0.1, 1.2))
        con = ob.pose.bones["b03"].constraints.new('IK')
        con.target, con.chain_count, con.use_tail = t, 2, False
        R.activate(ob)
        if solver == "sinew":
            bpy.ops.sinew.solve()
            assert not con.mute  # Solve IK leaves the constraint on; measure Sinew's keyed pose alone
            con.mute = True
        locs = R.evaluated_locals(ob)
        results[solver] = locs
        assert (R.world_head(ob, "b03") - t.location).length < 1e-3, solver
        assert locs["b00"].angle < 1e-6 and locs["b03"].angle < 1e-5, solver
        assert locs["b01"].angle > 0.05 and locs["b02"].angle > 0.05, solver


def _limb_with_fk_keys(pole):
    """The bent two-bone limb with FK keys on both bones (a rigger's animation), an IK target
    that follows the keyed hand a few centimetres off it, and optionally a pole."""
    ob = _two_bones_bent()
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    for f, (a, b) in {1: (0.0, 0.2), 8: (0.3, 0.6), 16: (-0.2, 0.9), 24: (0.1, 0.4)}.items():
        for name, angle, axis in (("b00", a, (0, 0, 1)), ("b01", b, (1, 0, 0))):
            pb = ob.pose.bones[name]
            pb.rotation_mode = 'QUATERNION'
            pb.rotation_quaternion = Quaternion(axis, angle)
            pb.keyframe_insert("rotation_quaternion", frame=f)
    bpy.ops.object.mode_set(mode='OBJECT')
    t = R.add_empty("T")
    for f in range(1, 25):
        bpy.context.scene.frame_set(f)
        tip = R.world_tail(ob, "b01")
        t.location = tip + Vector((0.03 * math.sin(f * 0.4), 0.02, -0.03 * math.cos(f * 0.3)))
        t.keyframe_insert("location", frame=f)
    con = ob.pose.bones["b01"].constraints.new('IK')
    con.target, con.chain_count = t, 2
    if pole:
        p = R.add_empty("Pole", (0, -3, 1))
        con.pole_target, con.pole_angle = p, math.radians(90)
    R.activate(ob)
    return ob, con


@pytest.mark.parametrize("pole", [False, True])
def test_a_bake_over_fk_keys_is_blenders_ik_from_those_keys(pole):
    """Blender's IK solves every frame from the keyed pose; so does Sinew's bake (each frame's
    keys are its reference): every bone within 2 degrees of Blender's, frame by frame."""
    rotations = {}
    for solver in ("blender", "sinew"):
        bpy.ops.wm.read_homefile(use_empty=True)
        ob, con = _limb_with_fk_keys(pole)
        if solver == "sinew":
            assert bpy.ops.sinew.bake(frame_start=1, frame_end=24) == {'FINISHED'}
            assert con.mute
        rotations[solver] = []
        for f in range(1, 25):
            bpy.context.scene.frame_set(f)
            ev = ob.evaluated_get(R.depsgraph())
            rotations[solver].append([ev.pose.bones[n].matrix.to_quaternion() for n in ("b00", "b01")])
    worst = 0.0
    for f, (qb, qs) in enumerate(zip(rotations["blender"], rotations["sinew"]), start=1):
        for a, b in zip(qb, qs):
            worst = max(worst, math.degrees(a.rotation_difference(b).angle))
    assert worst < 2.0, worst


def test_a_poleless_limb_bends_in_its_pre_bend_plane_as_blenders_does():
    """A target in the plane the limb is pre-bent in (x = 0) keeps the knee in that plane, with
    Blender's IK and with Sinew's Solve IK; a target off it moves the knee near where Blender's
    does, within 5 cm (measured: 3.9 cm; Sinew's is the pose nearest the rest pose, Blender's where its
    least-squares steps from rest stop)."""
    for target, within in (((0.0, 0.2, 1.5), 1e-4), ((0.25, 0.2, 1.5), 0.05)):
        knees = {}
        for solver in ("blender", "sinew"):
            bpy.ops.wm.read_homefile(use_empty=True)
            ob = _two_bones_bent()
            t = R.add_empty("T", target)
            con = ob.pose.bones["b01"].constraints.new('IK')
            con.target, con.chain_count = t, 2
            R.activate(ob)
            if solver == "sinew":
                bpy.ops.sinew.solve()
                con.mute = True
            knees[solver] = R.world_head(ob, "b01").copy()
        if target[0] == 0.0:
            assert abs(knees["sinew"].x) < 1e-4 and abs(knees["blender"].x) < 1e-4, (tuple(knees["sinew"]), tuple(knees["blender"]))
        assert (knees["sinew"] - knees["blender"]).length < within, (tuple(knees["sinew"]), tuple(knees["blender"]))


# -- Vertex group targets -------------------------------------------------------------------
#
# A target or pole that is a vertex group of a mesh (the constraint's Vertex Group field) is
# where Blender's constraints put it (constraint.cc, contarget_get_mesh_mat): the weighted mean
# of the evaluated mesh's vertices with a weight above 0 in the group, turned by their weighted
# mean normal. A Copy Transforms constraint on an Empty reads the same target matrix: the tests'
# measure of Blender's own.


def _grip_mesh(name="Hand", location=(0.05, 0.0, 0.0)):
    """A mesh with two faces whose group "grip" (weights 1, 0.5, 0.25 and one vertex at 0, which
    does not count) sits near (0.6, 0.3, 1.0) in object space, and two vertices outside it near
    the origin (as the reported rig's)."""
    import bmesh

    me = bpy.data.meshes.new(name)
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    bm = bmesh.new()
    out = [bm.verts.new(co) for co in ((0, 0, 0), (0.1, 0, 0))]
    grip = [bm.verts.new(co) for co in ((0.6, 0.3, 1.0), (0.66, 0.3, 1.0), (0.66, 0.36, 1.03), (0.6, 0.36, 1.02))]
    bm.faces.new(grip)
    bm.faces.new(out + [bm.verts.new((0.05, 0.1, 0.0))])
    bm.to_mesh(me)
    bm.free()
    vg = ob.vertex_groups.new(name="grip")
    for i, w in zip((2, 3, 4, 5), (1.0, 0.5, 0.25, 0.0)):
        vg.add([i], w, 'REPLACE')
    ob.location = location
    return ob


def _blender_target(mesh, group, name="Probe"):
    """An Empty whose Copy Transforms takes ``group`` of ``mesh``: its evaluated world matrix is
    Blender's target matrix for that vertex group."""
    probe = R.add_empty(name)
    c = probe.constraints.new('COPY_TRANSFORMS')
    c.target, c.subtarget = mesh, group
    return probe


def _largest_difference(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def _evaluated_matrix(ob):
    return ob.evaluated_get(R.depsgraph()).matrix_world.copy()


def _bent_chain(n=3):
    """n bones of 0.5 up +Z, bent a little in Y (Blender's IK needs a bend to start from)."""
    ob = R.make_chain(n)
    bpy.ops.object.mode_set(mode='EDIT')
    for i, eb in enumerate(ob.data.edit_bones[:-1]):
        eb.tail.y = 0.1 * (1 if i % 2 else -1)
    bpy.ops.object.mode_set(mode='OBJECT')
    return ob


def test_a_vertex_group_is_read_where_blenders_constraints_put_it(addon):
    """Position and rotation, on a rotated, non-uniformly scaled mesh deformed by an animated
    shape key and a modifier, at several frames; and the rotation's fallback axis when the
    group's normal lies along the object's Y."""
    mesh = _grip_mesh()
    mesh.rotation_euler = (0.3, -0.5, 1.1)
    mesh.scale = (1.0, 2.0, 0.5)
    mesh.shape_key_add(name="Basis")
    key = mesh.shape_key_add(name="Reach")
    for i, d in ((2, (0.1, 0.0, 0.2)), (3, (0.0, -0.2, 0.1)), (0, (0.3, 0.3, 0.3))):
        key.data[i].co = key.data[i].co + Vector(d)
    key.value = 0.0
    key.keyframe_insert("value", frame=1)
    key.value = 1.0
    key.keyframe_insert("value", frame=10)
    mod = mesh.modifiers.new("Bend", 'SIMPLE_DEFORM')
    mod.deform_method, mod.angle = 'BEND', 0.4
    probe = _blender_target(mesh, "grip")
    for f in (1, 4, 10):
        bpy.context.scene.frame_set(f)
        ours = addon.rig_reader.vertex_group_matrix(mesh.evaluated_get(R.depsgraph()), "grip")
        theirs = _evaluated_matrix(probe)
        assert (theirs.translation - mesh.evaluated_get(R.depsgraph()).matrix_world.translation).length > 0.5
        assert _largest_difference(ours, theirs) < 1e-5, (f, ours, theirs)
    # The group's normal along the object's Y axis (a face in the XZ plane, object unrotated):
    # X comes from the object's X axis instead.
    mesh.modifiers.clear()
    mesh.shape_key_clear()
    mesh.rotation_euler = (0.0, 0.0, 0.0)
    for v, co in zip(mesh.data.vertices[2:6], ((0.6, 0.3, 1.0), (0.7, 0.3, 1.0), (0.7, 0.3, 1.1), (0.6, 0.3, 1.1))):
        v.co = co
    mesh.data.update()
    ours = addon.rig_reader.vertex_group_matrix(mesh.evaluated_get(R.depsgraph()), "grip")
    theirs = _evaluated_matrix(probe)
    assert abs(abs(ours.col[2].y) - 1.0) < 1e-6  # (the case it tests)
    assert _largest_difference(ours, theirs) < 1e-5, (ours, theirs)


def test_a_bake_puts_the_tip_on_a_vertex_group_target_as_blenders_ik_does(capfd):
    """The reported rig: an IK constraint aimed at vertex group "grip" of mesh "Hand", whose
    origin is 1.2 away. The mesh moves by its own keys (which the bake would read from the
    F-curves for a plain object) and its shape key moves the group: the bake steps the frames and
    puts the tip where Blender's IK put it, on every frame."""
    ob = _bent_chain()
    mesh = _grip_mesh()
    R.key_locations(mesh, {1: (0.05, 0.0, 0.0), 10: (-0.1, 0.2, 0.1)})
    mesh.shape_key_add(name="Basis")
    key = mesh.shape_key_add(name="Lift")
    for i in (2, 3, 4):
        key.data[i].co.z += 0.15
    key.value = 0.0
    key.keyframe_insert("value", frame=1)
    key.value = 1.0
    key.keyframe_insert("value", frame=10)
    probe = _blender_target(mesh, "grip")
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.subtarget, con.chain_count = mesh, "grip", 3
    frames = (1, 4, 7, 10)
    before = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        before[f] = R.world_tail(ob, "b02")
        assert (before[f] - _evaluated_matrix(probe).translation).length < 1e-3  # Blender's IK reaches it
    R.activate(ob)
    capfd.readouterr()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    out = capfd.readouterr().out
    assert con.mute and "misses" not in out
    for f in frames:
        bpy.context.scene.frame_set(f)
        tip = R.world_tail(ob, "b02")
        assert (tip - _evaluated_matrix(probe).translation).length < 1e-4, f
        assert (tip - before[f]).length < 1e-3, f


def test_a_pole_vertex_group_turns_the_knee_as_blenders_ik_does():
    """The pole is a mesh whose origin is on the other side of the leg (x = -1) from its vertex
    group "knee" (x = +1): the knee turns toward the group, as Blender's does."""
    knees = {}
    for solver in ("blender", "sinew", "blender at the origin"):
        bpy.ops.wm.read_homefile(use_empty=True)
        ob = _two_bones_bent()
        t = R.add_empty("T", (0.0, 0.0, 1.6))
        mesh = _grip_mesh("PoleMesh", location=(-1.0, 0.0, 0.5))
        mesh.vertex_groups.new(name="knee").add([0, 1], 1.0, 'REPLACE')
        for v, co in zip(mesh.data.vertices[:2], ((2.0, 0.0, 0.5), (2.0, 0.05, 0.5))):
            v.co = co
        mesh.data.update()
        con = ob.pose.bones["b01"].constraints.new('IK')
        con.target, con.chain_count = t, 2
        con.pole_target, con.pole_subtarget, con.pole_angle = mesh, "knee", 0.0
        if solver == "blender at the origin":
            con.pole_subtarget = ""
        R.activate(ob)
        if solver == "sinew":
            assert bpy.ops.sinew.bake(frame_start=1, frame_end=2) == {'FINISHED'}
            assert con.mute
        knees[solver] = R.world_head(ob, "b01").copy()
    assert (knees["blender"] - knees["blender at the origin"]).length > 0.5  # (the case it tests)
    assert (knees["blender"] - knees["sinew"]).length < 1e-3, (tuple(knees["blender"]), tuple(knees["sinew"]))


def test_solve_export_and_compare_read_a_vertex_group_target(addon, capfd, tmp_path):
    import json

    ob = _bent_chain()
    mesh = _grip_mesh()
    probe = _blender_target(mesh, "grip")
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.subtarget, con.chain_count = mesh, "grip", 3
    R.activate(ob)
    centre = _evaluated_matrix(probe).translation
    path = tmp_path / "problem.json"
    assert bpy.ops.sinew.export_problem(filepath=str(path)) == {'FINISHED'}
    goal = json.loads(path.read_text())["goals"][0]
    assert (Vector(goal["target"]) - centre).length < 1e-6  # (the armature is at the origin, unscaled)
    assert bpy.ops.sinew.compare_methods() == {'FINISHED'}
    rows = {r["method"]: r for r in addon.pipeline.compare_results(ob)["methods"]}
    assert rows["fabrik"]["reached"]
    capfd.readouterr()
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    assert "something on the rig" not in out and "misses" not in out
    con.mute = True
    assert (R.world_tail(ob, "b02") - centre).length < 1e-4


def test_a_sinew_goal_on_a_mesh_takes_its_vertex_group_or_its_origin():
    """As for a constraint: with a vertex group the group's centre, without one the origin; a
    group the mesh does not have is refused by name."""
    ob = _bent_chain()
    mesh = _grip_mesh(location=(-0.3, -0.2, 0.4))
    probe = _blender_target(mesh, "grip")
    R.set_goal(ob, "b02", mesh, "grip", chain_length=3)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "b02") - _evaluated_matrix(probe).translation).length < 1e-4
    ob.pose.bones["b02"].sinew.subtarget = ""
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "b02") - mesh.location).length < 1e-4
    ob.pose.bones["b02"].sinew.subtarget = "palm"
    snap = R.pose_snapshot(ob)
    with pytest.raises(RuntimeError, match=r'Bone "b02": Sinew goal target "Hand" has no vertex group "palm"'):
        bpy.ops.sinew.solve()
    assert R.pose_snapshot(ob) == snap


def test_a_constraints_vertex_group_the_mesh_lacks_is_the_origin_as_in_blender(capfd):
    ob = _bent_chain()
    mesh = _grip_mesh(location=(0.3, 0.2, 0.9))
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.subtarget, con.chain_count = mesh, "palm", 3
    assert (R.world_tail(ob, "b02") - mesh.location).length < 1e-3  # Blender's IK
    R.activate(ob)
    capfd.readouterr()
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert ('IK constraint "IK" names vertex group "palm", which "Hand" does not have: Blender\'s IK then aims its '
            "target at the object's origin, and so does Sinew") in capfd.readouterr().out
    con.mute = True
    assert (R.world_tail(ob, "b02") - mesh.location).length < 1e-4


def _refused(ob, con, ops, match):
    """Each operator of ``ops`` refuses with an error matching ``match`` and changes nothing: the
    pose, the animation and the IK constraint ``con`` (not muted)."""
    snap = R.pose_snapshot(ob)
    for op in ops:
        with pytest.raises(RuntimeError, match=match):
            op()
        assert R.pose_snapshot(ob) == snap and ob.animation_data is None and not con.mute


def _lattice(name="Cage"):
    lat = bpy.data.objects.new(name, bpy.data.lattices.new(name))
    bpy.context.scene.collection.objects.link(lat)
    lat.vertex_groups.new(name="grip").add([0, 1], 1.0, 'REPLACE')
    return lat


@pytest.mark.parametrize("which", ["target", "pole"])
def test_a_lattice_vertex_group_is_refused_by_name_and_nothing_changes(which):
    ob = _bent_chain()
    lat = _lattice()
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.chain_count = 3
    if which == "target":
        con.target, con.subtarget = lat, "grip"
    else:
        con.target, con.pole_target, con.pole_subtarget = R.add_empty("T", (0.4, 0.2, 1.1)), lat, "grip"
    what = "target" if which == "target" else "pole target"
    R.activate(ob)
    _refused(ob, con, (bpy.ops.sinew.solve, bpy.ops.sinew.bake, bpy.ops.sinew.compare_methods),
             rf'Bone "b02": IK constraint "IK": the {what} is vertex group "grip" of lattice "Cage", which Sinew cannot '
             rf"read .* Add an Empty parented to those lattice points .*; nothing was changed")


def test_a_vertex_group_of_a_mesh_in_edit_mode_is_refused():
    ob = _bent_chain()
    mesh = _grip_mesh()
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.subtarget, con.chain_count = mesh, "grip", 3
    R.activate(mesh)
    bpy.ops.object.mode_set(mode='EDIT')
    bpy.context.view_layer.objects.active = ob
    assert mesh.mode == 'EDIT' and ob.mode == 'OBJECT'
    _refused(ob, con, (bpy.ops.sinew.solve, bpy.ops.sinew.bake),
             r'the target is vertex group "grip" of mesh "Hand", which is in Edit Mode .* leave Edit Mode on "Hand"')


def test_a_vertex_group_with_no_weight_is_refused_with_the_frame():
    ob = _bent_chain()
    mesh = _grip_mesh()
    mesh.vertex_groups.new(name="empty")
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.subtarget, con.chain_count = mesh, "empty", 3
    R.activate(ob)
    bpy.context.scene.frame_set(3)
    _refused(ob, con, (bpy.ops.sinew.solve, lambda: bpy.ops.sinew.bake(frame_start=3, frame_end=6)),
             r'Vertex group "empty" of mesh "Hand" has no vertex with a weight above 0 at frame 3 .*nothing was changed')
    assert bpy.context.scene.frame_current == 3


def test_a_hidden_vertex_group_target_of_a_sinew_goal_is_refused():
    ob = _bent_chain()
    mesh = _grip_mesh()
    mesh.hide_viewport = True
    R.set_goal(ob, "b02", mesh, "grip", chain_length=3)
    R.activate(ob)
    with pytest.raises(RuntimeError, match=r'Bone "b02": the Sinew goal\'s target "Hand" vertex group "grip" is not '
                                           r"evaluated by Blender .*a vertex group is read from the mesh as Blender "
                                           r"evaluates it"):
        bpy.ops.sinew.solve()
    assert ob.animation_data is None


def test_a_vertex_group_deformed_by_the_armature_is_said_to_be_read_before_the_solve(capfd):
    ob = _bent_chain()
    mesh = _grip_mesh()
    mesh.modifiers.new("Armature", 'ARMATURE').object = ob
    R.set_goal(ob, "b02", mesh, "grip", chain_length=3)
    R.activate(ob)
    capfd.readouterr()
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert ('Bone "b02": vertex group "grip" of mesh "Hand" is deformed by this armature, so it may move with the '
            "bones Sinew moves; its position is taken from before the solve") in capfd.readouterr().out
