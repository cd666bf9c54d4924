"""A uniform scale on the bones above an IK chain (a character resized by its root control) is
followed as Blender's IK follows it: the chain is that much smaller or larger, Sinew's keys reach
the targets in Blender's evaluated pose and agree with Blender's IK; a scale Sinew cannot follow
(non-uniform) is refused up front, naming the bone, and nothing is changed."""

import math

import bpy
import pytest
from mathutils import Vector

import sinew_rigs as R

TOL = 1e-3  # world units; the solver's tolerance is 1e-4 in armature space


def _scaled_chain(scale, object_scale=1.0):
    """A 4-bone chain b00..b03 whose root b00 has a uniform pose scale ``scale``, an IK
    constraint on b03 (chain of 3: b01..b03 hang from b00) toward an animated Empty, frames
    1..10. Returns (armature, constraint, target)."""
    ob = R.make_chain(4)
    ob.scale = (object_scale,) * 3
    t = R.add_empty("T")
    s = scale * object_scale
    R.key_locations(t, {1: (0.3 * s, 0.2 * s, 1.0 * s), 10: (0.2 * s, -0.2 * s, 0.9 * s)})
    R.activate(ob)
    ob.pose.bones["b00"].scale = (scale,) * 3
    con = ob.pose.bones["b03"].constraints.new('IK')
    con.target, con.chain_count = t, 3
    return ob, con, t


def _tip_misses(ob, t, frames):
    scene = bpy.context.scene
    out = []
    for f in frames:
        scene.frame_set(f)
        out.append((R.world_tail(ob, "b03") - R.world_location(t)).length)
    return out


@pytest.mark.parametrize("scale, object_scale", [(0.7, 1.0), (1.4, 1.0), (0.8, 0.5)])
def test_bake_reaches_under_a_scaled_root_as_blenders_ik_does(scale, object_scale, capfd):
    """QA's case (root scaled 0.7: the bake missed by 0.32 on every frame, and said "reached"):
    Blender's IK reaches, and so do Sinew's keys once the IK constraint is muted."""
    ob, con, t = _scaled_chain(scale, object_scale)
    frames = range(1, 11)
    blender = _tip_misses(ob, t, frames)
    assert max(blender) < TOL, blender
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    assert con.mute
    out = capfd.readouterr().out
    sinew = _tip_misses(ob, t, frames)
    assert max(sinew) < TOL, sinew
    assert "the goal reached on every frame" in out, out
    assert "scaled" not in out and "misses" not in out, out
    # The chain keeps Blender's size: each bone at its rest length times the scale above it.
    e = ob.evaluated_get(R.depsgraph())
    for name in ("b01", "b02", "b03"):
        pb = e.pose.bones[name]
        assert abs((pb.tail - pb.head).length - 0.5 * scale) < 1e-5


@pytest.mark.parametrize("scale", [0.7, 1.4])
def test_solve_ik_reaches_under_a_scaled_root(scale, capfd):
    ob, con, t = _scaled_chain(scale)
    bpy.context.scene.frame_set(4)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    assert "Sinew: 1 goal reached" in out, out
    con.mute = True  # Sinew's keyed pose alone
    assert (R.world_tail(ob, "b03") - R.world_location(t)).length < TOL


def _bent_leg_under_root(scale):
    """A root bone (scaled ``scale``) carrying a 2-bone leg bent at the knee, with an IK
    constraint and a pole: Blender's IK has one answer, which Sinew must match."""
    ob = R._new_armature("Leg")
    bpy.ops.object.mode_set(mode='EDIT')
    eds = ob.data.edit_bones
    root = eds.new("root")
    root.head, root.tail = (0, 0, 0), (0, 0.3, 0)
    a = eds.new("thigh")
    a.head, a.tail = (0.1, 0, 0.2), (0.1, -0.3, 1.2)
    a.parent = root
    b = eds.new("shin")
    b.head, b.tail = (0.1, -0.3, 1.2), (0.1, 0.0, 2.2)
    b.parent, b.use_connect = a, True
    bpy.ops.object.mode_set(mode='OBJECT')
    ob.pose.bones["root"].scale = (scale,) * 3
    t = R.add_empty("T", (0.5 * scale, 0.2 * scale, 1.6 * scale))
    pole = R.add_empty("Pole", (0.1, -3.0, 1.0))
    con = ob.pose.bones["shin"].constraints.new('IK')
    con.target, con.pole_target, con.pole_angle, con.chain_count = t, pole, math.radians(30), 2
    R.activate(ob)
    return ob, con, t


@pytest.mark.parametrize("scale", [0.6, 1.5])
def test_knee_under_a_scaled_root_is_where_blenders_ik_puts_it(scale):
    ob, con, t = _bent_leg_under_root(scale)
    knee_b, tip_b = R.world_head(ob, "shin").copy(), R.world_tail(ob, "shin").copy()
    assert (tip_b - t.location).length < TOL
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    con.mute = True
    knee_s, tip_s = R.world_head(ob, "shin"), R.world_tail(ob, "shin")
    assert (tip_s - t.location).length < TOL
    assert (knee_s - knee_b).length < TOL, (tuple(knee_b), tuple(knee_s))


def test_bake_follows_an_animated_root_scale(capfd):
    """The root's scale keyed from 1 to 0.6 over the range (the character shrinking): each frame
    is solved at that frame's size."""
    ob, con, t = _scaled_chain(1.0)
    pb = ob.pose.bones["b00"]
    for f, s in ((1, 1.0), (10, 0.6)):
        pb.scale = (s,) * 3
        pb.keyframe_insert("scale", frame=f)
    R.key_locations(t, {1: (0.3, 0.2, 1.0), 10: (0.2 * 0.6, -0.2 * 0.6, 0.9 * 0.6)})
    frames = range(1, 11)
    assert max(_tip_misses(ob, t, frames)) < TOL
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    assert max(_tip_misses(ob, t, frames)) < TOL
    assert "the goal reached on every frame" in capfd.readouterr().out


def _state(ob):
    actions = set(bpy.data.actions)
    return actions, [(c.mute, c.influence) for pb in ob.pose.bones for c in pb.constraints], R.pose_snapshot(ob)


@pytest.mark.parametrize("op", ["bake", "solve"])
def test_non_uniform_scale_above_a_chain_is_refused_naming_the_bone(op):
    """A non-uniform scale above a chain has no frame in which the chain keeps its shape: refused,
    naming the bone that carries it (here above the chain's parent), and nothing changes."""
    ob = R.make_chain(5)
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.3, 0.2, 1.4), 5: (0.2, -0.2, 1.3)})
    R.activate(ob)
    ob.pose.bones["b00"].scale = (1.0, 0.6, 1.0)
    con = ob.pose.bones["b04"].constraints.new('IK')
    con.target, con.chain_count = t, 3
    before = _state(ob)
    with pytest.raises(RuntimeError) as ex:
        if op == "bake":
            bpy.ops.sinew.bake(frame_start=1, frame_end=5)
        else:
            bpy.ops.sinew.solve(use_keyframes=True)
    msg = str(ex.value)
    assert 'Bone "b01" (the chain of bone "b04" hangs from it) is scaled non-uniformly' in msg, msg
    assert 'from bone "b00" above it' in msg and "Traceback" not in msg
    after = _state(ob)
    assert after[0] == before[0] and after[1] == before[1]
    assert after[2] == before[2]
    assert not con.mute


def test_non_uniform_scale_at_one_frame_is_refused_naming_the_frame():
    ob, con, t = _scaled_chain(1.0)
    pb = ob.pose.bones["b00"]
    for f, s in ((1, (1.0, 1.0, 1.0)), (10, (1.0, 1.0, 0.5))):
        pb.scale = s
        pb.keyframe_insert("scale", frame=f)
    bpy.context.scene.frame_set(1)  # uniform here: the error comes from the frames the bake steps
    with pytest.raises(RuntimeError, match=r'Bone "b00" \(the chain of bone "b03" hangs from it\) is scaled '
                                           r"non-uniformly \([^)]*\) in the pose at frame 2;"):
        bpy.ops.sinew.bake(frame_start=1, frame_end=10)
    assert not con.mute


def _rigify_rig_resized(scale):
    """The rig Rigify generates, resized by its ``root`` control (uniform pose scale ``scale``),
    its left foot and right hand IK controls animated over frames 1..12."""
    rig = R.generate_rigify()
    pbs = rig.pose.bones
    pbs["root"].scale = (scale,) * 3
    for f, s in ((1, 0.0), (12, 1.0)):
        pbs["foot_ik.L"].location = (0.0, -0.1 * s, 0.15 * s)
        pbs["foot_ik.L"].keyframe_insert("location", frame=f)
        pbs["hand_ik.R"].location = (0.05 * s, -0.15 * s, 0.1 * s)
        pbs["hand_ik.R"].keyframe_insert("location", frame=f)
    return rig


LIMBS = (("MCH-shin_ik.L", "MCH-thigh_ik_target.L"), ("MCH-forearm_ik.R", "MCH-upper_arm_ik_target.R"),
         ("MCH-shin_ik.R", "MCH-thigh_ik_target.R"), ("MCH-forearm_ik.L", "MCH-upper_arm_ik_target.L"))


def _limbs(rig, frames):
    """{(frame, effector): (knee or elbow, tip, target)} in world space."""
    scene = bpy.context.scene
    out = {}
    for f in frames:
        scene.frame_set(f)
        for bone, target in LIMBS:
            out[f, bone] = (R.world_head(rig, bone).copy(), R.world_tail(rig, bone).copy(),
                            R.world_head(rig, target).copy())
    return out


def test_rigify_rig_resized_by_its_root_bakes_like_blenders_ik(capfd):
    """QA's case: Rigify's ``root`` scaled to 0.8. Blender's IK reached within 0.1 mm while the
    bake missed by 8-16 cm and reported every goal reached. Resizing by the root scales the whole
    problem about the root's head (at the origin), so the answer is the unscaled rig's, scaled:
    Blender's IK gives exactly that, and now so do Sinew's baked keys (knees, elbows and tips
    within 0.1 mm of 0.8 times the unscaled bake's), which reach every target in Blender's
    evaluated pose; no bone is called scaled. (The animated left leg has no pole, and Sinew's knee
    is up to 2 cm from Blender's there at any scale; that choice is not this defect.)"""
    frames = (1, 4, 8, 12)
    runs = {}
    for scale in (1.0, 0.8):
        bpy.ops.wm.read_homefile(use_empty=True)
        rig = _rigify_rig_resized(scale)
        blender = _limbs(rig, frames)
        assert max((tip - target).length for _k, tip, target in blender.values()) < 1e-3
        assert bpy.ops.sinew.bake(frame_start=1, frame_end=12) == {'FINISHED'}
        out = capfd.readouterr().out
        sinew = _limbs(rig, frames)
        for key, (_knee, tip, target) in sinew.items():
            assert (tip - target).length < TOL, (scale, key)
        assert "all 4 goals reached on every frame" in out, out
        assert "is scaled" not in out and "misses" not in out, out
        runs[scale] = blender, sinew
    for which in (0, 1):  # Blender's IK, then Sinew's bake
        unscaled, scaled = runs[1.0][which], runs[0.8][which]
        for key in unscaled:
            for a, b in zip(unscaled[key], scaled[key]):
                assert (a * 0.8 - b).length < 1e-4, (which, key)


def test_chains_under_differently_scaled_bones_are_each_solved_at_their_size(capfd):
    """Two chains hanging from two bones scaled differently (0.6 and 1.3): each is solved in its
    own frame, and both reach targets placed where their own bones can reach."""
    from mathutils import Quaternion

    ob = R.make_ybranch()
    R.activate(ob)
    pbs = ob.pose.bones
    pbs["L0"].scale = (0.6,) * 3
    pbs["R0"].scale = (1.3,) * 3
    # Reachable targets: the tails of a bent pose, then back to rest.
    pbs["L1"].rotation_quaternion = Quaternion((1, 0, 0.2), 0.7)
    pbs["R1"].rotation_quaternion = Quaternion((0.3, 0, 1), -0.6)
    pbs["R2"].rotation_quaternion = Quaternion((1, 0, 0), 0.5)
    bpy.context.view_layer.update()
    targets = {n: R.add_empty(f"T{n}", R.world_tail(ob, n)) for n in ("L2", "R2")}
    for n in ("L1", "R1", "R2"):
        pbs[n].rotation_quaternion = (1, 0, 0, 0)
    for n, t in targets.items():
        R.set_goal(ob, n, t, chain_length=2)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert "Sinew: all 2 goals reached" in capfd.readouterr().out
    for n, t in targets.items():
        assert (R.world_tail(ob, n) - t.location).length < TOL, n


def test_compare_methods_under_a_scaled_root_reaches_in_armature_units(addon):
    """Compare IK Methods solves what Solve IK solves: under the root scaled 1.4, the methods
    that reach report a distance left in armature space within the tolerance."""
    ob, con, t = _scaled_chain(1.4)
    bpy.context.scene.frame_set(4)
    assert bpy.ops.sinew.compare_methods() == {'FINISHED'}
    doc = addon.pipeline.compare_results(ob)
    rows = [r for r in doc["methods"] if r["unsupported"] is None]
    assert doc["best"] is not None and rows
    for r in rows:
        assert r["failed"] is None, r
        if r["reached"]:
            assert r["position"] <= doc["tolerance"], r
