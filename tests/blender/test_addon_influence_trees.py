"""IK constraint influence in IK trees (several constraints whose chains share a root), as
Blender's IK decides it per tree (iksolver_plugin.cc, execute_posetree), against Blender's
evaluated pose.

Measured in Blender 5.0 on a Y-branch (a three-bone trunk, two three-bone branches, an IK
constraint on each branch tip with chain 0, so one tree): without poles each target below
influence 1 moves toward its tip's place before IK (at 0.5 the tip ends halfway) and the other
is reached; with a pole on either constraint the whole tree's result is blended with the pose
before IK by the poled constraint's influence (both orders give the same pose); a muted (or
zero-influence) constraint in the tree holds its tip where it was before IK."""

import bpy
import pytest
from mathutils import Quaternion, Vector

import sinew_rigs as R

NEAR = {"L2": (0.6, 0.3, 2.2), "R2": (-0.5, -0.3, 2.3)}
POLES = {"L2": (0.5, -2.0, 2.0), "R2": (-0.5, -2.0, 2.0)}
BONES = ["trunk0", "trunk1", "trunk2", "L0", "L1", "L2", "R0", "R1", "R2"]


def _tree(specs):
    """specs: {bone: (influence, pole?, mute)} for an IK constraint (chain 0) on L2 and R2."""
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_ybranch()
    cons = {}
    for bone in ("L2", "R2"):
        if bone not in specs:
            continue
        influence, pole, mute = specs[bone]
        c = ob.pose.bones[bone].constraints.new('IK')
        c.target, c.chain_count, c.influence, c.mute = R.add_empty("T" + bone, NEAR[bone]), 0, influence, mute
        if pole:
            c.pole_target = R.add_empty("P" + bone, POLES[bone])
        cons[bone] = c
    R.activate(ob)
    bpy.context.view_layer.update()
    return ob, cons


def _tips(ob):
    return {b: R.world_tail(ob, b).copy() for b in ("L2", "R2")}


def _locals(ob):
    bpy.context.view_layer.update()
    L = R.evaluated_locals(ob)
    return {b: L[b].copy() for b in BONES}


def _sinew(ob, cons, how="solve"):
    if how == "solve":
        assert bpy.ops.sinew.solve() == {'FINISHED'}
        for c in cons.values():
            c.mute = True
    else:
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, 3
        assert bpy.ops.sinew.bake(frame_start=1, frame_end=3) == {'FINISHED'}
        for c in cons.values():
            c.mute = True  # (a bake mutes those it replaced; a muted one stays muted)
        scene.frame_set(2)
    bpy.context.view_layer.update()


@pytest.mark.parametrize("influences", [(0.5, 1.0), (1.0, 0.5), (0.3, 0.7)])
def test_a_tree_without_poles_moves_each_goal_by_its_influence(influences):
    """No pole: each goal moves toward its tip's place before IK by its influence, and the tree
    is solved fully; the tips land where Blender's do (within 1e-3)."""
    ob, cons = _tree({"L2": (influences[0], False, False), "R2": (influences[1], False, False)})
    before = {"L2": Vector((0.9, 0.0, 2.7)), "R2": Vector((-0.9, 0.0, 2.7))}
    blender = _tips(ob)
    for (bone, inf) in zip(("L2", "R2"), influences):
        want = before[bone].lerp(Vector(NEAR[bone]), inf)
        assert (blender[bone] - want).length < 1e-3, (bone, blender[bone], want)
    _sinew(ob, cons)
    sinew = _tips(ob)
    for bone in ("L2", "R2"):
        assert (sinew[bone] - blender[bone]).length < 1e-3, (bone, sinew[bone], blender[bone])


@pytest.mark.parametrize("poled", ["L2", "R2"])
@pytest.mark.parametrize("how", ["solve", "bake"])
def test_a_pole_in_a_tree_blends_the_whole_trees_result(poled, how):
    """A pole on one of the tree's constraints, influence 0.5 on it and 1 on the other: Blender
    blends every bone of the tree (the other branch's too) with the pose before IK (rest here) by
    0.5, whichever constraint comes first; so does Sinew: each bone's local rotation is the
    slerp of its full-influence solve by 0.5 (within 1e-3 rad), where it used to blend only the
    poled chain's bones and move the other branch fully."""
    other = "R2" if poled == "L2" else "L2"
    specs = {poled: (0.5, True, False), other: (1.0, False, False)}
    # Blender's own IK: the half-influence pose is the slerp of the full one.
    ob, cons = _tree(specs)
    half = _locals(ob)
    cons[poled].influence = 1.0
    full = _locals(ob)
    for b in BONES:
        assert Quaternion().slerp(full[b], 0.5).rotation_difference(half[b]).angle < 1e-3, b
    assert full["R0"].rotation_difference(half["R0"]).angle > 0.05  # the other branch is blended too
    # Sinew: the same relation to its own full-influence solve.
    ob, cons = _tree({poled: (1.0, True, False), other: (1.0, False, False)})
    _sinew(ob, cons, how)
    sinew_full = _locals(ob)
    ob, cons = _tree(specs)
    _sinew(ob, cons, how)
    sinew_half = _locals(ob)
    for b in BONES:
        assert Quaternion().slerp(sinew_full[b], 0.5).rotation_difference(sinew_half[b]).angle < 1e-3, b


@pytest.mark.parametrize("switched_off", ["mute", "influence"])
@pytest.mark.parametrize("how", ["solve", "bake"])
def test_a_muted_constraint_in_a_tree_holds_its_tip(switched_off, how):
    """A muted (or zero-influence) IK constraint sharing a tree with one that acts holds its tip
    where it was before IK, in Blender's IK (measured: the R branch's tip stays on its rest
    tail, where alone the L constraint swings it 1 m away) and in Sinew's solve, which imports
    it as a goal on that place."""
    spec = (1.0, False, True) if switched_off == "mute" else (0.0, False, False)
    ob, cons = _tree({"L2": (1.0, False, False), "R2": spec})
    blender = _tips(ob)
    rest_tail = Vector((-0.9, 0.0, 2.7))
    assert (blender["R2"] - rest_tail).length < 1e-3 and (blender["L2"] - Vector(NEAR["L2"])).length < 1e-3
    # (Alone, the L constraint swings the R branch away.)
    alone, _ = _tree({"L2": (1.0, False, False)})
    assert (_tips(alone)["R2"] - rest_tail).length > 0.5
    ob, cons = _tree({"L2": (1.0, False, False), "R2": spec})
    _sinew(ob, cons, how)
    sinew = _tips(ob)
    assert (sinew["L2"] - Vector(NEAR["L2"])).length < 1e-3, sinew["L2"]
    assert (sinew["R2"] - rest_tail).length < 1e-3, sinew["R2"]
