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
