"""Sinew against Blender's own IK on the same rig (the constraint evaluated by Blender, then
imported and solved by Sinew)."""

import math

import bpy
import pytest

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
    return R.world_head(ob, "b01").copy(), R.world_tail(ob, "b01").copy()


def test_reaches_the_same_target_as_blender_ik():
    for angle in (0.0, 90.0):
        _kb, tip_b = _knee_after((0.4, 0.2, 1.5), (0, -3, 1), angle, "blender")
        _ks, tip_s = _knee_after((0.4, 0.2, 1.5), (0, -3, 1), angle, "sinew")
        assert (tip_b - tip_s).length < 1e-3


POLE_XFAIL = pytest.mark.xfail(strict=False, reason=(
    "engine: the pole angle turns the chain the other way than Blender's IK (Blender aims the "
    "root's X*cos(a) + Z*sin(a) at the pole), and the bend is not kept relative to the root "
    "bone's frame, so knees differ from Blender's for the same constraint"))


@pytest.mark.parametrize("target, angle", [
    ((0.0, 0.0, 1.6), 0.0),
    pytest.param((0.0, 0.0, 1.6), 45.0, marks=POLE_XFAIL),
    pytest.param((0.0, 0.0, 1.6), 90.0, marks=POLE_XFAIL),
    pytest.param((0.0, 0.0, 1.6), -90.0, marks=POLE_XFAIL),
    pytest.param((0.4, 0.2, 1.5), 0.0, marks=POLE_XFAIL),
    pytest.param((0.4, 0.2, 1.5), 90.0, marks=POLE_XFAIL),
])
def test_pole_puts_the_knee_where_blender_ik_does(target, angle):
    knee_b, _ = _knee_after(target, (0, -3, 1), angle, "blender")
    knee_s, _ = _knee_after(target, (0, -3, 1), angle, "sinew")
    assert (knee_b - knee_s).length < 0.02, (tuple(knee_b), tuple(knee_s))


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
            assert con.mute
        locs = R.evaluated_locals(ob)
        results[solver] = locs
        assert (R.world_head(ob, "b03") - t.location).length < 1e-3, solver
        assert locs["b00"].angle < 1e-6 and locs["b03"].angle < 1e-5, solver
        assert locs["b01"].angle > 0.05 and locs["b02"].angle > 0.05, solver
