"""Blender's IK constraint influence and per-axis IK stiffness (``ik_stiffness_x/y/z``), read and
applied as Blender's own IK applies them, against Blender's evaluated pose."""

import math

import bpy
import pytest
from mathutils import Quaternion, Vector

import sinew_rigs as R
from test_addon_blender_parity import _two_bones_bent


def _chain_with_ik(target, pole_at, influence):
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = _two_bones_bent()
    t = R.add_empty("T", target)
    con = ob.pose.bones["b01"].constraints.new('IK')
    con.target, con.chain_count, con.influence = t, 2, influence
    if pole_at is not None:
        con.pole_target = R.add_empty("Pole", pole_at)
    R.activate(ob)
    return ob, con


def _locals(ob):
    bpy.context.view_layer.update()
    L = R.evaluated_locals(ob)
    return [L["b00"].copy(), L["b01"].copy()]


# Without a pole Blender moves the goal toward the effector's tail before IK by the influence
# (the tip ends halfway at 0.5); with one it slerps each bone's local rotation from before IK
# to the solved one. Both are checked: Sinew's Solve IK and a bake against Blender's evaluated
# pose with the constraint at that influence.
@pytest.mark.parametrize("target,pole_at", [((0.0, 0.4, 1.4), None), ((0.4, 0.2, 1.5), (0, -3, 1))])
@pytest.mark.parametrize("how", ["solve", "bake"])
def test_influence_half_gives_blenders_pose(target, pole_at, how):
    ob, con = _chain_with_ik(target, pole_at, 0.5)
    blender = _locals(ob)
    con.influence = 1.0
    full = _locals(ob)
    con.influence = 0.5
    # The pose is neither the unsolved one nor the solved one.
    assert full[1].rotation_difference(blender[1]).angle > 0.1
    assert blender[1].angle > 0.1
    if pole_at is not None:
        # Blender's own semantics with a pole: the slerp of the local rotations.
        for b, f in zip(blender, full):
            assert Quaternion().slerp(f, 0.5).rotation_difference(b).angle < 1e-4
    if how == "solve":
        assert bpy.ops.sinew.solve() == {'FINISHED'}
        con.mute = True
    else:
        bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, 3
        assert bpy.ops.sinew.bake(frame_start=1, frame_end=3) == {'FINISHED'}
        assert con.mute
        bpy.context.scene.frame_set(2)
    sinew = _locals(ob)
    for i, (s, b) in enumerate(zip(sinew, blender)):
        assert s.rotation_difference(b).angle < 1e-3, (i, tuple(s), tuple(b))


def _stiff_chain(stiffness_x):
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_chain(3, 0.5)
    t = R.add_empty("T", (0.5, 0.45, 1.0))
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.chain_count = t, 3
    ob.pose.bones["b00"].ik_stiffness_x = stiffness_x
    R.activate(ob)
    return ob, con


def _turn_about(ob, bone):
    """The local rotation of ``bone`` in Blender's evaluated pose as a rotation vector (x, y, z)."""
    bpy.context.view_layer.update()
    q = R.evaluated_locals(ob)[bone]
    return Vector(q.axis) * q.angle


def test_ik_stiffness_x_turns_the_bone_less_about_x():
    """A bone with ``ik_stiffness_x`` 0.9 turns less about its local X (and more about Z) than with
    0 under Sinew's Solve IK, as the stiffness weights Blender's Jacobian column.

    Blender 5.0's own IK does not show that direction on this chain: measured, the bone's
    rotation vector goes from (0.130, 0, 0.144) free to (0.161, -0.112, 0.097) at 0.9 (more
    about X, and a twist appears), and likewise for two other targets; so only its reaching and
    that the stiffness changes its pose are asserted for it, and the README says so (why: the
    next test)."""
    turns = {}
    for solver in ("blender", "sinew"):
        for stiffness in (0.0, 0.9):
            ob, con = _stiff_chain(stiffness)
            if solver == "sinew":
                assert bpy.ops.sinew.solve() == {'FINISHED'}
                con.mute = True
            assert (R.world_tail(ob, "b02") - Vector((0.5, 0.45, 1.0))).length < 1e-3, (solver, stiffness)
            turns[solver, stiffness] = _turn_about(ob, "b00")
    free, stiff = turns["sinew", 0.0], turns["sinew", 0.9]
    assert abs(free.x) > 0.05, tuple(free)
    assert abs(stiff.x) < 0.1 * abs(free.x) and abs(stiff.z) > abs(free.z), (tuple(stiff), tuple(free))
    # No twist to make up for it beyond the little the nearest pose itself has: in Sinew's metric (X
    # counts 100x at stiffness 0.9) the pose nearest the reference twists b00 by about 0.005 rad
    # (measured: objective 1.29167 with that twist, against 1.29174 for the answer the steps gave
    # before limits were held as an active set, which stopped at 0.0003 rad short of it).
    assert abs(stiff.y) < 0.01, (tuple(stiff), tuple(free))
    # Blender's own IK: the stiffness changes the pose (see the docstring for how).
    assert (turns["blender", 0.9] - turns["blender", 0.0]).length > 0.05


def test_blenders_stiffness_weights_each_step_not_where_the_steps_end():
    """Why Blender's IK turns the stiff bone *more* about X on this chain (see the test above):
    its stiffness weights each step (IK_QJacobian: the X column scaled by sqrt(1 - 0.9), the step
    by 1 - 0.9), and measured here the first step turns the bone about X 13 times less than
    without stiffness (0.0035 against 0.046 rad); but its steps have no pull toward the pose
    before IK once the goal is met, so where they end depends on the path. The target makes
    the chain fold: the base bone first turns toward it and finally turns back past its rest
    (a counter-turn, positive about X in both cases). Held back at first, the base leaves the
    bending to the bones above, which fold more, and its final counter-turn about X is larger
    (0.155 against 0.130; 0.172 against 0.130 with its twist locked, so the twist it picks up is
    not the cause). Sinew returns the pose nearest the pose before IK in a metric that counts a
    turn about X 1 / (1 - 0.9) times, so its X turn stays small: a difference of method, not of
    reading the setting."""
    def swing_x(stiffness, iterations, lock_twist=False):
        ob, con = _stiff_chain(stiffness)
        con.iterations = iterations
        ob.pose.bones["b00"].lock_ik_y = lock_twist
        bpy.context.view_layer.update()
        (x, _z), _twist = R.swing_twist(R.evaluated_locals(ob)["b00"])
        return x

    first_free, first_stiff = swing_x(0.0, 1), swing_x(0.9, 1)
    assert first_free < -0.03 and abs(first_stiff) < 0.1 * abs(first_free), (first_free, first_stiff)
    for lock in (False, True):
        free, stiff = swing_x(0.0, 500, lock), swing_x(0.9, 500, lock)
        assert 0.0 < free < stiff, (lock, free, stiff)
