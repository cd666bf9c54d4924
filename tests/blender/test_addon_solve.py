"""Solve IK (sinew.solve) on real armatures; every check reads the *evaluated* pose back."""

import math

import bpy
import pytest
from mathutils import Quaternion, Vector

import sinew_rigs as R

TOL = 1e-3  # world units; the solver's tolerance is 1e-4 in armature space


def _place(ob):
    """Moves and turns the armature object so armature and world space differ."""
    ob.location = (1.0, -2.0, 0.5)
    ob.rotation_euler = (0.3, -0.2, 0.9)
    bpy.context.view_layer.update()


def test_chain_reaches_a_reachable_target_and_keys_moved_bones():
    ob = R.make_chain(10, roll_step=0.4)
    _place(ob)
    target = R.add_empty("T", ob.matrix_world @ Vector((1.5, 0.5, 3.0)))
    R.set_goal(ob, "b09", target)
    R.activate(ob)
    bpy.context.scene.frame_set(7)
    assert bpy.ops.sinew.solve(use_keyframes=True) == {'FINISHED'}
    assert (R.world_tail(ob, "b09") - R.world_location(target)).length < TOL
    # Keys at the current frame for every moved bone (the whole chain: chain length 0).
    for i in range(10):
        fc = R.fcurve(ob, f'pose.bones["b{i:02d}"].rotation_quaternion', 0)
        assert fc is not None
        frames, _ = R.key_frames(fc)
        assert list(frames) == [7.0]


def test_chain_length_limits_the_moved_bones():
    ob = R.make_chain(10)
    target = R.add_empty("T", (1.0, 0.0, 4.0))
    R.set_goal(ob, "b09", target, chain_length=4)
    R.activate(ob)
    bpy.ops.sinew.solve(use_keyframes=True)
    assert (R.world_tail(ob, "b09") - target.location).length < TOL
    locs = R.evaluated_locals(ob)
    for i in range(6):
        assert locs[f"b{i:02d}"].angle < 1e-6
    assert R.fcurve(ob, 'pose.bones["b05"].rotation_quaternion', 0) is None


def test_unreachable_target_leaves_the_chain_pointing_at_it():
    ob = R.make_chain(10, roll_step=0.3)
    _place(ob)
    target = R.add_empty("T", ob.matrix_world @ Vector((8.0, 3.0, 6.0)))
    R.set_goal(ob, "b09", target)
    R.activate(ob)
    bpy.ops.sinew.solve()
    base = R.world_head(ob, "b00")
    want = (R.world_location(target) - base).normalized()
    for i in range(10):
        d = (R.world_tail(ob, f"b{i:02d}") - R.world_head(ob, f"b{i:02d}")).normalized()
        assert d.angle(want) < 1e-3, (i, math.degrees(d.angle(want)))


def test_y_branch_reaches_both_targets_and_finds_the_sub_base(addon):
    ob = R.make_ybranch()
    tl = R.add_empty("TL", (0.9, 0.3, 2.2))
    tr = R.add_empty("TR", (-1.0, -0.2, 2.0))
    R.set_goal(ob, "L2", tl)
    R.set_goal(ob, "R2", tr)
    R.activate(ob)
    a = addon.rig_reader.analysis(ob)
    assert a["error"] is None
    assert a["sub_bases"] == ["trunk2"]
    moved = {bone: m for bone, _src, m in a["goals"]}
    assert moved["L2"] == ["L2", "L1", "L0", "trunk2", "trunk1", "trunk0"]
    assert moved["R2"] == ["R2", "R1", "R0", "trunk2", "trunk1", "trunk0"]
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "L2") - tl.location).length < TOL
    assert (R.world_tail(ob, "R2") - tr.location).length < TOL


def _cone_ok(q, x_pos, x_neg, z_pos, z_neg, eps=1e-4):
    (x, z), _tw = R.swing_twist(q)
    a = x_pos if x >= 0 else x_neg
    b = z_pos if z >= 0 else z_neg
    return (x / a) ** 2 + (z / b) ** 2 <= 1.0 + eps


def test_cones_and_twist_limits_are_respected():
    ob = R.make_chain(5, roll_step=0.5)
    target = R.add_empty("T", (1.6, 0.4, 1.2))
    cone = (math.radians(30), math.radians(10), math.radians(25), math.radians(15))
    for i in range(5):
        s = ob.pose.bones[f"b{i:02d}"].sinew
        s.use_cone = True
        s.cone_x_pos, s.cone_x_neg, s.cone_z_pos, s.cone_z_neg = cone
        s.use_twist = True
        s.twist_min, s.twist_max = math.radians(-5), math.radians(8)
    # An orientation goal twisted about the tip's own axis pulls on the twist limits.
    target.rotation_euler = (0.0, 0.0, 2.0)
    R.set_goal(ob, "b04", target, use_orientation=True)
    R.activate(ob)
    bpy.ops.sinew.solve()
    locs = R.evaluated_locals(ob)
    bent = 0.0
    for i in range(5):
        q = locs[f"b{i:02d}"]
        assert _cone_ok(q, *cone), (i, R.swing_twist(q))
        _sw, tw = R.swing_twist(q)
        assert math.radians(-5) - 1e-4 <= tw <= math.radians(8) + 1e-4, (i, math.degrees(tw))
        bent = max(bent, q.angle)
    assert bent > math.radians(8)  # the limits bound a real bend, not a rest pose


# Blender's IK setting on one axis of a bone: Lock IK, Limit with these (min, max), or neither.
_AXIS_LIMITS = {"x": (math.radians(-10), math.radians(8)), "y": (math.radians(-6), math.radians(9)),
                "z": (math.radians(-7), math.radians(12))}
_SINEW_CONE = tuple(math.radians(a) for a in (12, 8, 10, 14))  # x_pos, x_neg, z_pos, z_neg
_SINEW_TWIST = (math.radians(-8), math.radians(5))
_SLACK = 1e-4  # radians


def _blender_swing_ok(q, x, z):
    """Whether the swing of local rotation ``q`` keeps Blender's IK settings on X and Z (each
    "lock", "limit" (``_AXIS_LIMITS``) or "free") as Blender's IK measures them: on the swing
    quaternion's (x, z) components, each bound θ giving sin(θ / 2); both limited, a quarter
    ellipse per quadrant; a locked axis's component 0."""
    q = q.normalized()
    tw = Quaternion((q.w, 0.0, q.y, 0.0)).normalized()
    sw = q @ tw.inverted()
    if sw.w < 0:
        sw.negate()
    comps = {"x": sw.x, "z": sw.z}
    semi = {}
    for a, how in (("x", x), ("z", z)):
        if how == "lock" and abs(comps[a]) > _SLACK:
            return False
        if how == "limit":
            lo, hi = _AXIS_LIMITS[a]
            semi[a] = math.sin((hi if comps[a] >= 0 else -lo) / 2)
    return sum((comps[a] / s) ** 2 for a, s in semi.items()) <= 1.0 + 1e-3 if len(semi) == 2 else \
        all(abs(comps[a]) <= s + _SLACK for a, s in semi.items())


@pytest.mark.parametrize("sinew", [(cone, twist, lock) for lock in (False, True) for twist in (False, True)
                                   for cone in (False, True)],
                         ids=lambda s: "+".join(n for n, on in zip(("cone", "twist", "lock"), s) if on) or "no-sinew")
@pytest.mark.parametrize("blender", [(x, y, z) for x in ("free", "lock", "limit") for y in ("free", "lock", "limit")
                                     for z in ("free", "lock", "limit")], ids="-".join)
def test_sinew_cone_and_twist_replace_only_their_axes_of_blenders_ik_settings(blender, sinew):
    """One rule merges Blender's IK settings with Sinew's: Sinew's cone replaces Blender's lock or
    limit on X and Z, Sinew's twist the one on Y, every other axis keeps Blender's lock or limit,
    and Sinew's lock holds the bone. Every combination, on the middle bone of a chain pulled by a
    rotation goal, read from Blender's evaluated pose. (QA: Lock X + Y with a Sinew twist swung
    33.5 degrees about the locked X; Lock X + Y with a Sinew cone twisted 94.3 degrees.)"""
    use_cone, use_twist, lock = sinew
    ob = R.make_chain(3, length=0.4, roll_step=0.3, bend=0.03)
    target = R.add_empty("T", (0.5, -0.3, 0.7))
    target.rotation_euler = (1.0, 0.5, -0.8)
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.chain_count, con.use_rotation = target, 3, True
    pb = ob.pose.bones["b01"]
    for a, how in zip("xyz", blender):
        setattr(pb, f"lock_ik_{a}", how == "lock")
        setattr(pb, f"use_ik_limit_{a}", how == "limit")
        setattr(pb, f"ik_min_{a}", _AXIS_LIMITS[a][0])
        setattr(pb, f"ik_max_{a}", _AXIS_LIMITS[a][1])
    s = pb.sinew
    s.use_cone, s.use_twist, s.lock = use_cone, use_twist, lock
    s.cone_x_pos, s.cone_x_neg, s.cone_z_pos, s.cone_z_neg = _SINEW_CONE
    s.twist_min, s.twist_max = _SINEW_TWIST
    R.activate(ob)
    con.mute = True
    rest_miss = (R.world_tail(ob, "b02") - target.location).length
    con.mute = False
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    con.mute = True  # Sinew's keyed pose alone
    assert (R.world_tail(ob, "b02") - target.location).length < 0.5 * rest_miss  # it solved
    q = R.evaluated_locals(ob)["b01"]
    (x, z), tw = R.swing_twist(q)
    seen = f"b01 swing x {math.degrees(x):.2f}, z {math.degrees(z):.2f}, twist {math.degrees(tw):.2f} degrees"
    if lock:
        assert q.angle < 1e-6, seen
        return
    if use_cone:
        assert _cone_ok(q, *_SINEW_CONE), seen
    else:
        assert _blender_swing_ok(q, blender[0], blender[2]), seen
    lo, hi = _SINEW_TWIST if use_twist else {"lock": (0.0, 0.0), "limit": _AXIS_LIMITS["y"],
                                             "free": (-math.pi, math.pi)}[blender[1]]
    assert lo - _SLACK <= tw <= hi + _SLACK, seen
    if not use_cone and not use_twist and blender == ("free", "free", "free"):
        # (The limits above bind: free, the bone goes past each of them.)
        assert x < math.radians(-10) and z < math.radians(-14) and tw < math.radians(-8), seen


def test_blender_ik_constraint_and_ik_limits_need_no_sinew_setup():
    ob = R.make_chain(4, roll_step=0.2)
    target = R.add_empty("T", (0.8, 0.3, 1.3))
    tip = ob.pose.bones["b03"]
    con = tip.constraints.new('IK')
    con.target = target
    con.chain_count = 3
    # b02: X locked, Y locked → a hinge about Z; b01: X limited to [-20°, 35°], Z free.
    b2 = ob.pose.bones["b02"]
    b2.lock_ik_x = b2.lock_ik_y = True
    b1 = ob.pose.bones["b01"]
    b1.use_ik_limit_x = True
    b1.ik_min_x, b1.ik_max_x = math.radians(-20), math.radians(35)
    b1.use_ik_limit_y = True
    b1.ik_min_y, b1.ik_max_y = math.radians(-3), math.radians(3)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert not con.mute, "Solve IK leaves the Blender IK constraint on"
    con.mute = True  # measure Sinew's keyed pose alone
    assert (R.world_tail(ob, "b03") - target.location).length < TOL
    locs = R.evaluated_locals(ob)
    q2 = locs["b02"]
    assert abs(q2.x) < 1e-5 and abs(q2.y) < 1e-5  # only about Z
    (x1, _z1), tw1 = R.swing_twist(locs["b01"])
    assert math.radians(-20) - 1e-4 <= x1 <= math.radians(35) + 1e-4
    assert abs(tw1) <= math.radians(3) + 1e-4
    assert locs["b00"].angle < 1e-6  # chain_count 3: b00 does not move


def test_solve_leaves_ik_constraints_on_and_other_frames_as_they_were(capfd):
    """Solve IK at one frame keys that frame only and mutes nothing: at every other frame
    Blender's IK still acts, and a later Bake still finds its goals."""
    scene = bpy.context.scene
    ob = R.make_chain(3, roll_step=0.2)
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.5, 0.0, 1.2), 20: (-0.4, 0.3, 1.1)})
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target = t
    R.activate(ob)
    scene.frame_set(20)
    blender_at_20 = R.world_tail(ob, "b02").copy()
    scene.frame_set(5)
    assert bpy.ops.sinew.solve(use_keyframes=True) == {'FINISHED'}
    assert 'IK constraint(s) "IK" (bone "b02") stay on' in capfd.readouterr().out
    assert not con.mute and con.influence == 1.0 and ob.sinew_muted == ""
    frames, _ = R.key_frames(R.fcurve(ob, 'pose.bones["b01"].rotation_quaternion', 0))
    assert list(frames) == [5.0]
    for f in (1, 12, 20):  # Blender's IK still takes the chain to the target everywhere
        scene.frame_set(f)
        assert (R.world_tail(ob, "b02") - R.world_location(t)).length < 5e-3, f
    scene.frame_set(20)
    assert (R.world_tail(ob, "b02") - blender_at_20).length < 5e-3
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=20) == {'FINISHED'}


def test_muted_and_zero_influence_constraints_are_skipped():
    ob = R.make_chain(3)
    t = R.add_empty("T", (0.5, 0.0, 1.2))
    c1 = ob.pose.bones["b02"].constraints.new('IK')
    c1.target, c1.mute = t, True
    c2 = ob.pose.bones["b01"].constraints.new('IK')
    c2.target, c2.influence = t, 0.0
    R.activate(ob)
    with pytest.raises(RuntimeError, match="no IK goals"):
        bpy.ops.sinew.solve()


def test_bone_subtarget_uses_its_head_and_pole_aims_the_chain():
    ob = R.make_chain(2, length=1.0)
    ctl = R.make_chain(1, length=0.2, name="Controls")
    ctl.location = (0.6, 0.0, 1.0)
    pole = R.add_empty("Pole", (0.0, -3.0, 1.0))
    R.set_goal(ob, "b01", ctl, subtarget="b00", pole_target=pole)
    R.activate(ob)
    bpy.ops.sinew.solve()
    assert (R.world_tail(ob, "b01") - R.world_head(ctl, "b00")).length < TOL
    # Pole angle 0, as in Blender: the first bone's X axis points at the pole (seen along the
    # chain's axis, from its head to the target).
    e = ob.evaluated_get(R.depsgraph())
    x = (e.matrix_world @ e.pose.bones["b00"].matrix).col[0].xyz
    head = R.world_head(ob, "b00")
    axis = (R.world_head(ctl, "b00") - head).normalized()
    flat = lambda v: (v - axis * v.dot(axis)).normalized()  # noqa: E731
    assert flat(x).angle(flat(pole.location - head)) < math.radians(0.5)


def test_euler_and_axis_angle_bones_are_written_in_their_mode():
    ob = R.make_chain(4, roll_step=0.3)
    modes = ['XZY', 'QUATERNION', 'AXIS_ANGLE', 'YXZ']
    for i, m in enumerate(modes):
        ob.pose.bones[f"b{i:02d}"].rotation_mode = m
    target = R.add_empty("T", (0.9, -0.4, 1.1))
    R.set_goal(ob, "b03", target)
    R.activate(ob)
    bpy.ops.sinew.solve(use_keyframes=True)
    assert (R.world_tail(ob, "b03") - target.location).length < TOL
    pb0 = ob.pose.bones["b00"]
    assert tuple(pb0.rotation_quaternion) == (1.0, 0.0, 0.0, 0.0)  # untouched: the bone is in XZY
    assert Vector(pb0.rotation_euler).length > 1e-3
    assert R.fcurve(ob, 'pose.bones["b00"].rotation_euler', 2) is not None
    assert R.fcurve(ob, 'pose.bones["b02"].rotation_axis_angle', 3) is not None


def test_redo_settings_and_no_keys_option():
    ob = R.make_chain(6)
    target = R.add_empty("T", (1.0, 0.5, 2.0))
    R.set_goal(ob, "b05", target)
    R.activate(ob)
    assert bpy.ops.sinew.solve(use_keyframes=False, max_iterations=300, tolerance=1e-5) == {'FINISHED'}
    assert ob.animation_data is None
    assert (R.world_tail(ob, "b05") - target.location).length < 1e-4


def test_free_root_translates_to_an_out_of_reach_target():
    ob = R.make_chain(3)
    target = R.add_empty("T", (3.0, 1.0, 1.0))
    R.set_goal(ob, "b02", target)
    R.activate(ob)
    bpy.ops.sinew.solve(root_mode='FREE', use_keyframes=True)
    assert (R.world_tail(ob, "b02") - target.location).length < TOL
    assert Vector(ob.pose.bones["b00"].location).length > 0.1
    assert R.fcurve(ob, 'pose.bones["b00"].location', 0) is not None


# Reachable offsets from each effector's rest tail (toward the body / bending the limb).
METARIG_GOALS = {"hand.L": ((-0.15, -0.2, 0.1), 3), "hand.R": ((0.2, -0.15, 0.15), 3),
                 "foot.L": ((0.0, -0.15, 0.2), 3), "foot.R": ((0.02, 0.1, 0.12), 3),
                 "spine.006": ((0.0, -0.08, -0.05), 4)}


def test_metarig_limbs_and_head_reach(addon):
    ob = R.make_metarig()
    R.activate(ob)
    targets = {}
    for bone, (off, n) in METARIG_GOALS.items():
        t = R.add_empty(f"T_{bone}", R.world_tail(ob, bone) + Vector(off))
        R.set_goal(ob, bone, t, chain_length=n)
        targets[bone] = t
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    for bone, t in targets.items():
        assert (R.world_tail(ob, bone) - t.location).length < TOL, bone
    a = addon.rig_reader.analysis(ob)
    assert a["error"] is None and len(a["goals"]) == 5


def _unchanged(ob, snap, n_actions):
    assert R.pose_snapshot(ob) == snap
    assert ob.animation_data is None
    assert len(bpy.data.actions) == n_actions


def test_errors_are_reported_and_change_nothing(capfd):
    ob = R.make_chain(4)
    target = R.add_empty("T", (0.5, 0.0, 1.5))
    R.activate(ob)
    snap, n_actions = R.pose_snapshot(ob), len(bpy.data.actions)

    with pytest.raises(RuntimeError, match="no IK goals"):
        bpy.ops.sinew.solve()
    _unchanged(ob, snap, n_actions)

    s = R.set_goal(ob, "b03", None)
    with pytest.raises(RuntimeError, match='Bone "b03": Sinew goal target is missing'):
        bpy.ops.sinew.solve()
    _unchanged(ob, snap, n_actions)

    s.target = ob
    s.subtarget = "nope"
    with pytest.raises(RuntimeError, match='has no bone "nope"'):
        bpy.ops.sinew.solve()
    _unchanged(ob, snap, n_actions)

    s.target, s.subtarget = target, ""
    lim = ob.pose.bones["b01"].sinew
    lim.use_twist = True
    lim.twist_min, lim.twist_max = 0.5, 0.1
    with pytest.raises(RuntimeError, match='Bone "b01": bad limit'):
        bpy.ops.sinew.solve()
    _unchanged(ob, snap, n_actions)

    lim.use_twist = False
    lim.use_cone = True
    lim.cone_x_pos = 0.0
    with pytest.raises(RuntimeError, match='Bone "b01": bad limit'):
        bpy.ops.sinew.solve()
    _unchanged(ob, snap, n_actions)
    err = capfd.readouterr()
    assert "bad limit" in err.out + err.err

    lim.use_cone = False
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    assert "Sinew: 1 goal reached" in out


def test_error_in_edit_mode_and_wrong_object():
    ob = R.make_chain(2)
    R.activate(ob)
    bpy.ops.object.mode_set(mode='EDIT')
    assert not bpy.ops.sinew.solve.poll()
    bpy.ops.object.mode_set(mode='POSE')
    assert bpy.ops.sinew.solve.poll()


def test_sinew_goal_on_the_head_moves_the_bones_above():
    ob = R.make_chain(4, roll_step=0.3)
    t = R.add_empty("T", (0.5, 0.1, 1.2))
    R.set_goal(ob, "b03", t, chain_length=2, use_tail=False)
    R.activate(ob)
    bpy.ops.sinew.solve()
    assert (R.world_head(ob, "b03") - t.location).length < TOL
    locs = R.evaluated_locals(ob)
    assert locs["b00"].angle < 1e-6
    assert locs["b01"].angle > 0.05 and locs["b02"].angle > 0.05


def test_sinew_goal_on_the_head_leaves_the_effector_bone_alone():
    ob = R.make_chain(4, roll_step=0.3)
    t = R.add_empty("T", (0.5, 0.1, 1.2))
    R.set_goal(ob, "b03", t, chain_length=2, use_tail=False)
    R.activate(ob)
    bpy.ops.sinew.solve()
    assert R.evaluated_locals(ob)["b03"].angle < 1e-6


def test_a_second_top_level_chain_keeps_its_pose_location(addon):
    """Two parentless chains in one armature: the engine poses only the first root's location,
    and the second root's pose location (here keyed away from its rest) is folded into its rest,
    so Solve IK and a bake reach its target where Blender shows the chain."""
    ob = R._new_armature("TwoRoots")
    bpy.ops.object.mode_set(mode='EDIT')
    for prefix, x in (("A", 0.0), ("B", 1.0)):
        prev = None
        for i in range(2):
            eb = ob.data.edit_bones.new(f"{prefix}{i}")
            eb.head, eb.tail = (x, 0.0, 0.5 * i), (x, 0.0, 0.5 * (i + 1))
            if prev is not None:
                eb.parent, eb.use_connect = prev, True
            prev = eb
    bpy.ops.object.mode_set(mode='OBJECT')
    for f in (1, 10):
        ob.pose.bones["B0"].location = (0.3, 0.0, 0.0)
        ob.pose.bones["B0"].keyframe_insert("location", frame=f)
    ta = R.add_empty("TA", (0.3, 0.0, 0.9))
    tb = R.add_empty("TB", (1.3, 0.5, 0.8))  # beyond B's reach from its rest head, within it from the moved one
    R.set_goal(ob, "A1", ta, chain_length=2)
    R.set_goal(ob, "B1", tb, chain_length=2)
    R.activate(ob)
    bpy.context.scene.frame_set(5)
    assert bpy.ops.sinew.solve(use_keyframes=False) == {'FINISHED'}
    assert (R.world_tail(ob, "A1") - R.world_location(ta)).length < TOL
    assert (R.world_tail(ob, "B1") - R.world_location(tb)).length < TOL
    r = addon.pipeline.BakeJob(bpy.context, ob, 1, 10, addon.pipeline.Settings()).run()
    assert r.reached.all()
    for f in (1, 10):
        bpy.context.scene.frame_set(f)
        assert (R.world_tail(ob, "B1") - R.world_location(tb)).length < TOL, f
