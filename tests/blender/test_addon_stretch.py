"""IK Stretch (``ik_stretch`` per pose bone, the IK constraint's ``use_stretch``) read and solved
as Blender's IK does, keyed as pose scale, against Blender's own IK's evaluated pose.

What Blender 5.0 does (measured here, and in iksolver_plugin.cc): a bone of an IK tree that
stretches gets a translation along its Y, weighted ``ik_stretch²`` (at least 0.01); its result
is a *uniform* scale of the bone's pose matrix (the basis change times ``ikstretch[a] /
parentstretch``), so children inherit it; a tree stretches when its first constraint has Use
Stretch and no constraint joining it has (``tree->stretch && !use_stretch``)."""

import bpy
import numpy as np
import pytest
from mathutils import Vector

import sinew_rigs as R


def _two_bones(bent=0.25, stretch=(0.1, 0.1), target=(0.0, 0.0, 1.5), use_stretch=True):
    """Blender's two-bone chain: the elbow at (0, bent, 0.5), the tip at (0, 0, 1); an IK
    constraint on the second bone (chain 2) to an empty at ``target``."""
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R._new_armature("Arm")
    bpy.ops.object.mode_set(mode='EDIT')
    a = ob.data.edit_bones.new("b0")
    a.head, a.tail = (0, 0, 0), (0, bent, 0.5)
    b = ob.data.edit_bones.new("b1")
    b.head, b.tail = (0, bent, 0.5), (0, 0, 1.0)
    b.parent, b.use_connect = a, True
    bpy.ops.object.mode_set(mode='OBJECT')
    t = R.add_empty("T", target)
    pbs = ob.pose.bones
    pbs["b0"].ik_stretch, pbs["b1"].ik_stretch = stretch
    con = pbs["b1"].constraints.new('IK')
    con.target, con.chain_count, con.use_stretch = t, 2, use_stretch
    R.activate(ob)
    bpy.context.view_layer.update()
    return ob, con


def _state(ob, names):
    """Per bone: (head, tail, the evaluated pose matrix's column lengths)."""
    e = ob.evaluated_get(R.depsgraph())
    return {n: (e.pose.bones[n].head.copy(), e.pose.bones[n].tail.copy(),
                [e.pose.bones[n].matrix.col[i].to_3d().length for i in range(3)]) for n in names}


def _sinew_solve(ob, con):
    assert bpy.ops.sinew.solve(use_keyframes=True) == {'FINISHED'}
    con.mute = True  # what Sinew keyed, without Blender's IK on top
    bpy.context.view_layer.update()


CASES = [
    # (ik_stretch, target, elbow tolerance, scale tolerance (relative)). Beyond reach: (0, 0, 1.5),
    # (0, 0.3, 1.2). Within: (0, 0.2, 0.8), (0, 0.4, 0.6).
    ((0.1, 0.1), (0.0, 0.0, 1.5), 0.02, 0.005),
    ((0.1, 0.1), (0.0, 0.3, 1.2), 0.025, 0.005),
    ((0.1, 0.1), (0.0, 0.2, 0.8), 0.01, 0.005),
    ((0.1, 0.1), (0.0, 0.4, 0.6), 0.01, 0.006),
    ((1.0, 1.0), (0.0, 0.0, 1.5), 0.01, 0.01),
    ((1.0, 1.0), (0.0, 0.3, 1.2), 0.02, 0.03),
    ((1.0, 1.0), (0.0, 0.2, 0.8), 0.01, 0.02),
    ((0.5, 0.1), (0.0, 0.0, 1.5), 0.035, 0.02),
]


@pytest.mark.parametrize("stretch,target,elbow_tol,scale_tol", CASES)
def test_two_bone_chain_stretches_as_blenders_ik(stretch, target, elbow_tol, scale_tol):
    """Solve IK on a two-bone chain (bent 27° at rest) within and beyond reach lands where
    Blender's IK does: the tip on the target, the elbow within ``elbow_tol``, each bone's length
    within ``scale_tol`` of Blender's, keyed as a uniform pose scale as Blender shows it."""
    ob, con = _two_bones(stretch=stretch, target=target)
    blender = _state(ob, ["b0", "b1"])
    tip = Vector(target)
    assert (blender["b1"][1] - tip).length < 1e-3
    # Blender shows a stretch as a uniform scale of the pose matrix.
    for n in ("b0", "b1"):
        sx, sy, sz = blender[n][2]
        assert abs(sx - sy) < 1e-4 and abs(sz - sy) < 1e-4, (n, blender[n][2])
    _sinew_solve(ob, con)
    sinew = _state(ob, ["b0", "b1"])
    assert (sinew["b1"][1] - tip).length < 1e-3, sinew["b1"][1]
    assert (sinew["b0"][1] - blender["b0"][1]).length < elbow_tol, (sinew["b0"][1], blender["b0"][1])
    for n in ("b0", "b1"):
        s, b = sinew[n][2], blender[n][2]
        assert abs(s[1] / b[1] - 1.0) < scale_tol, (n, s, b)
        assert abs(s[0] - s[1]) < 1e-6 and abs(s[2] - s[1]) < 1e-6, (n, s)
    # Keyed as scale: b1's is its length over b0's (it inherits b0's scale).
    pbs = ob.pose.bones
    assert abs(pbs["b1"].scale.y * pbs["b0"].scale.y - sinew["b1"][2][1]) < 1e-5
    fcurves = R.channelbag(ob).fcurves
    assert fcurves.find('pose.bones["b0"].scale', index=1) is not None


def test_stretch_zero_and_use_stretch_off_change_nothing():
    """``ik_stretch`` 0 (the default), or Use Stretch off: the chain keeps its lengths as
    Blender's IK does (a target out of reach stays out of reach), no scale is keyed, and the
    rotations are the same as for the same rig read before stretch was supported."""
    results = []
    for stretch, use_stretch in (((0.0, 0.0), True), ((0.5, 0.5), False), ((0.0, 0.0), False)):
        ob, con = _two_bones(stretch=stretch, target=(0.3, 0.2, 1.4), use_stretch=use_stretch)
        blender = _state(ob, ["b0", "b1"])
        assert all(abs(v - 1.0) < 1e-5 for n in ("b0", "b1") for v in blender[n][2])
        _sinew_solve(ob, con)
        sinew = _state(ob, ["b0", "b1"])
        assert all(abs(v - 1.0) < 1e-6 for n in ("b0", "b1") for v in sinew[n][2])
        assert tuple(ob.pose.bones["b0"].scale) == (1.0, 1.0, 1.0)
        assert R.channelbag(ob).fcurves.find('pose.bones["b0"].scale', index=1) is None
        results.append([tuple(ob.pose.bones[n].rotation_quaternion) for n in ("b0", "b1")])
    assert results[0] == results[1] == results[2]


def _ybranch_two_constraints(first_stretch, second_stretch):
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_ybranch()
    cons = []
    for bone, target, st in (("L2", (1.6, 0.0, 2.6), first_stretch), ("R2", (-1.6, 0.0, 2.6), second_stretch)):
        c = ob.pose.bones[bone].constraints.new('IK')
        c.target, c.chain_count, c.use_stretch = R.add_empty("T" + bone, target), 0, st
        cons.append(c)
    for pb in ob.pose.bones:
        pb.ik_stretch = 0.5
    R.activate(ob)
    bpy.context.view_layer.update()
    return ob, cons


@pytest.mark.parametrize("first,second,stretches", [(True, True, False), (True, False, True), (False, True, False)])
def test_a_tree_stretches_by_blenders_rule(first, second, stretches):
    """Two IK constraints whose chains share a root form one tree, which stretches only when
    the first has Use Stretch and the second not (Blender's ``tree->stretch && !use_stretch``,
    measured): Sinew stretches exactly then, and reaches both targets out of reach only then."""
    ob, cons = _ybranch_two_constraints(first, second)
    blender = _state(ob, ["L2", "trunk0"])
    assert (abs(blender["L2"][2][1] - 1.0) > 0.01) == stretches
    _sinew_solve(ob, cons[0])
    cons[1].mute = True
    bpy.context.view_layer.update()
    sinew = _state(ob, ["L2", "R2", "trunk0"])
    stretched = any(abs(sinew[n][2][1] - 1.0) > 0.01 for n in sinew)
    assert stretched == stretches
    reached = (sinew["L2"][1] - Vector((1.6, 0.0, 2.6))).length < 1e-3
    assert reached == stretches, sinew["L2"][1]


def _rigify_arm_past_reach(extra):
    """The Rigify-generated rig with ``hand_ik.L`` moved so that the left arm's IK target lies
    ``extra`` beyond the chain's reach, along the line from the shoulder to where it was."""
    rig = R.generate_rigify()
    pbs = rig.pose.bones
    bpy.context.view_layer.update()
    e = rig.evaluated_get(R.depsgraph()).pose.bones
    up, fore = e["upper_arm_ik.L"], e["MCH-forearm_ik.L"]
    reach = up.bone.length + fore.bone.length
    shoulder = up.head.copy()
    want = shoulder + (e["MCH-upper_arm_ik_target.L"].head - shoulder).normalized() * (reach + extra)
    for _ in range(6):  # hand_ik.L's location moves the target through its parents: iterate
        target = rig.evaluated_get(R.depsgraph()).pose.bones["MCH-upper_arm_ik_target.L"].head
        local = rig.convert_space(pose_bone=pbs["hand_ik.L"], matrix=__import__("mathutils").Matrix.Translation(want - target),
                                  from_space='POSE', to_space='LOCAL').translation
        zero = rig.convert_space(pose_bone=pbs["hand_ik.L"], matrix=__import__("mathutils").Matrix.Identity(4),
                                 from_space='POSE', to_space='LOCAL').translation
        pbs["hand_ik.L"].location = Vector(pbs["hand_ik.L"].location) + (local - zero)
        bpy.context.view_layer.update()
    target = rig.evaluated_get(R.depsgraph()).pose.bones["MCH-upper_arm_ik_target.L"].head.copy()
    assert abs((target - shoulder).length - (reach + extra)) < 1e-4
    ik = pbs["MCH-forearm_ik.L"].constraints["IK"]
    return rig, ik, target


def _rigify_arm(rig):
    return _state(rig, ["upper_arm_ik.L", "MCH-forearm_ik.L"])


@pytest.mark.parametrize("how", ["solve", "bake"])
def test_rigify_arm_pulled_35_cm_past_reach_stretches_like_blenders_ik(how, capfd):
    """The issue's case: on the rig Rigify generates (its arm IK stretches: ``ik_stretch`` 0.1,
    Use Stretch on), ``hand_ik.L`` pulled 35 cm past the arm's reach. Blender's IK reaches it by
    stretching both bones; so does Sinew (Solve IK, and a bake), keyed as pose scale: the wrist
    on the target, the elbow within 1 cm of Blender's and each bone's length within 0.5%."""
    rig, ik, target = _rigify_arm_past_reach(0.35)
    blender = _rigify_arm(rig)
    assert (blender["MCH-forearm_ik.L"][1] - target).length < 1e-3
    assert blender["upper_arm_ik.L"][2][1] > 1.5
    if how == "solve":
        assert bpy.ops.sinew.solve() == {'FINISHED'}
        ik.influence = 0.0  # (Rigify drives the constraint's Mute) Sinew's keys alone
    else:
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, 3
        assert bpy.ops.sinew.bake(frame_start=1, frame_end=3) == {'FINISHED'}
        assert ik.influence == 0.0
        scene.frame_set(2)
    bpy.context.view_layer.update()
    out = capfd.readouterr().out
    assert "not reached" not in out, out
    sinew = _rigify_arm(rig)
    assert (sinew["MCH-forearm_ik.L"][1] - target).length < 1e-3, (sinew["MCH-forearm_ik.L"][1], target)
    assert (sinew["upper_arm_ik.L"][1] - blender["upper_arm_ik.L"][1]).length < 0.01
    for n in ("upper_arm_ik.L", "MCH-forearm_ik.L"):
        assert abs(sinew[n][2][1] / blender[n][2][1] - 1.0) < 0.005, (n, sinew[n][2], blender[n][2])


def test_rigify_arm_within_reach_barely_stretches():
    """Within reach (20 cm short of it) Blender's IK shrinks the nearly straight Rigify arm by
    2-3% (measured: upper arm 0.976, forearm 0.972; its steps start from a nearly straight chain,
    where turning barely shortens it, so its weighted stretch moves first); Sinew returns the
    pose nearest the pose before IK, which bends the arm more and shrinks it about half as much
    (0.990 and 0.986). Both reach."""
    rig, ik, target = _rigify_arm_past_reach(-0.2)
    blender = _rigify_arm(rig)
    assert (blender["MCH-forearm_ik.L"][1] - target).length < 1e-3
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    ik.influence = 0.0
    bpy.context.view_layer.update()
    sinew = _rigify_arm(rig)
    assert (sinew["MCH-forearm_ik.L"][1] - target).length < 1e-3
    for n in ("upper_arm_ik.L", "MCH-forearm_ik.L"):
        assert blender[n][2][1] < 0.985, (n, blender[n][2])  # as measured: Blender shrinks it
        assert abs(sinew[n][2][1] - 1.0) < min(0.02, 0.6 * (1.0 - blender[n][2][1])), (n, sinew[n][2], blender[n][2])


def test_export_writes_each_bones_stretch(tmp_path):
    """Export IK Problem writes ``"stretch"`` on the bones that stretch, and the file solves to
    the scales Solve IK keys."""
    import json

    import sinew

    ob, con = _two_bones(stretch=(0.1, 0.5), target=(0.0, 0.2, 1.4))
    path = tmp_path / "problem.json"
    assert bpy.ops.sinew.export_problem(filepath=str(path)) == {'FINISHED'}
    text = path.read_text()
    bones = {b["name"]: b for b in json.loads(text)["bones"]}
    assert bones["b0"]["stretch"] == pytest.approx(0.1) and bones["b1"]["stretch"] == pytest.approx(0.5)
    rig, goals, solver, pose, root_t, root = sinew.load_problem(text)
    assert rig.limit("b1")["stretch"] == pytest.approx(0.5)
    sol = solver.solve(rig, goals, pose=pose, reference=pose)
    _sinew_solve(ob, con)
    assert sol.reached
    assert ob.pose.bones["b0"].scale.y == pytest.approx(sol.scales[0], abs=1e-4)
    assert ob.pose.bones["b1"].scale.y == pytest.approx(sol.scales[1] / sol.scales[0], abs=1e-4)


def test_a_bone_above_a_connector_keeps_its_length(capfd):
    """A stretchy trunk whose goal's chain ends at the top of the trunk, and an arm goal whose
    chain starts one bone below the branch point: the bone between (L0) is in no chain, so in
    Blender it would take the trunk's scale where the engine keeps its length. Sinew keeps the
    bone above it rigid there and says so; the arm still stretches."""
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_ybranch()
    for bone, target, chain in (("trunk2", (0.3, 0.0, 1.4), 3), ("L2", (2.5, 0.0, 2.5), 2)):
        c = ob.pose.bones[bone].constraints.new('IK')
        c.target, c.chain_count, c.use_stretch = R.add_empty("T" + bone, target), chain, True
    for pb in ob.pose.bones:
        pb.ik_stretch = 0.5
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    assert 'Bone "trunk2": its IK Stretch is not used: bone "L0"' in out, out
    for c in ob.pose.bones["trunk2"].constraints[:] + ob.pose.bones["L2"].constraints[:]:
        c.mute = True
    scale = _state(ob, ["trunk2", "L0", "L1"])
    # trunk2 keeps its length (the bones below it may stretch: its key undoes theirs), and so
    # does L0, which inherits it.
    assert abs(scale["trunk2"][2][1] - 1.0) < 1e-6 and abs(scale["L0"][2][1] - 1.0) < 1e-6, scale
    assert ob.pose.bones["L1"].scale.y > 1.05


def _animated_two_bones():
    """The two-bone chain (``ik_stretch`` 0.5 and 0.1) whose target is keyed from within reach
    (frame 1) out past it (frame 15) and back (frame 30)."""
    ob, con = _two_bones(stretch=(0.5, 0.1), target=(0.0, 0.2, 0.8))
    t = bpy.data.objects["T"]
    R.key_locations(t, {1: (0.0, 0.2, 0.8), 15: (0.0, 0.1, 1.5), 30: (0.0, 0.2, 0.8)})
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 30
    scene.frame_set(1)
    return ob, con, t


def test_a_reduced_bake_keeps_every_scale_key():
    """A bake with Reduce Keys reduces the rotation keys and leaves the stretch's scale keys one
    per frame, as baked: Blender's evaluated pose puts the tip on the target (within the
    reduction's slack) where the chain is stretched, every frame checked."""
    ob, con, t = _animated_two_bones()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=30, use_key_reduction=True) == {'FINISHED'}
    assert con.mute
    for name in ("b0", "b1"):
        pb = ob.pose.bones[name]
        for c in range(3):
            frames, _values = R.key_frames(R.fcurve(ob, pb.path_from_id("scale"), c))
            assert list(frames) == list(range(1, 31)), (name, c, frames)
    rot_keys = [len(R.key_frames(R.fcurve(ob, ob.pose.bones["b0"].path_from_id("rotation_quaternion"), c))[0])
                for c in range(4)]
    assert max(rot_keys) < 30, rot_keys  # the rotations were reduced
    longest = 0.0
    for f in (1, 8, 15, 22, 30):
        bpy.context.scene.frame_set(f)
        e = ob.evaluated_get(R.depsgraph()).pose.bones
        tip, target = e["b1"].tail, t.matrix_world.translation
        assert (tip - target).length < 5e-3, (f, tip, target)
        longest = max(longest, e["b0"].matrix.col[1].to_3d().length)
    assert longest > 1.2  # it stretched past reach


def test_a_failing_reduction_rolls_the_scale_keys_back(addon, monkeypatch):
    """If the write fails after the scale keys went in (the reduction fails: a fault injected into
    the real add-on), they go with the rest: the user's action is assigned again with its keys as
    they were, no action is left behind, the pose's scales are as before, nothing is muted."""
    ob, con, _t = _animated_two_bones()
    for f in (1, 30):
        ob.pose.bones["b0"].rotation_quaternion = (1.0, 0.0, 0.0, 0.0)
        ob.pose.bones["b0"].keyframe_insert("rotation_quaternion", frame=f)
    act = ob.animation_data.action
    before = R.action_snapshot(act)
    actions = set(bpy.data.actions)

    def fail(*_a, **_k):
        raise ValueError("injected")

    monkeypatch.setattr(addon.key_reduction, "reduce_bake", fail)
    with pytest.raises(RuntimeError, match="Sinew failed"):
        bpy.ops.sinew.bake(frame_start=1, frame_end=30, use_key_reduction=True)
    assert ob.animation_data.action == act and set(bpy.data.actions) == actions
    assert R.same_snapshot(R.action_snapshot(act), before)
    assert all(tuple(pb.scale) == (1.0, 1.0, 1.0) for pb in ob.pose.bones)
    assert not con.mute and ob.sinew_muted == ""


# -- A stretch already in the pose: the start and reference of the next solve -------------------


def _local_pose(ob, names):
    """Per bone: (rotation_quaternion, scale) as set on the pose bones."""
    return {n: (ob.pose.bones[n].rotation_quaternion.copy(), tuple(ob.pose.bones[n].scale)) for n in names}


def _metarig_arm_past_reach():
    """QA's case: Rigify's human metarig, an IK constraint (Use Stretch, chain 2) on
    ``forearm.L`` with ``ik_stretch`` 0.1 (Rigify's) on both arm bones, its target 35 cm past
    the arm's reach."""
    meta = R.make_metarig()
    bpy.context.view_layer.update()
    up, fo = meta.pose.bones["upper_arm.L"], meta.pose.bones["forearm.L"]
    shoulder = meta.matrix_world @ up.head
    d = (meta.matrix_world @ fo.tail - shoulder).normalized()
    t = R.add_empty("T", shoulder + d * (up.bone.length + fo.bone.length + 0.35) + Vector((0, -0.05, -0.1)))
    up.ik_stretch = fo.ik_stretch = 0.1
    con = fo.constraints.new('IK')
    con.target, con.chain_count, con.use_stretch = t, 2, True
    R.activate(meta)
    bpy.ops.object.mode_set(mode='POSE')
    return meta, con, ["upper_arm.L", "forearm.L"]


def _stretched_two_bones():
    """QA's case: the two-bone chain (reach 1.12) with ``ik_stretch`` 1.0, its target at
    (0, 0, 1.5)."""
    ob, con = _two_bones(stretch=(1.0, 1.0), target=(0.0, 0.0, 1.5))
    return ob, con, ["b0", "b1"]


@pytest.mark.parametrize("rig", ["two_bones", "metarig_arm"])
def test_solving_a_stretched_chain_again_leaves_it_as_it_is(rig):
    """A stretch Solve IK keyed as pose scale is the pose's: the next Solve IK starts from it,
    and with the goal met leaves rotations, scales and keys exactly as they are (QA: each press
    turned the two-bone chain by 0.05 rad and shrank it, 1.4578 / 1.4946 -> 1.4401 / 1.4757 ->
    ...; the metarig arm turned 0.024 rad on the second press)."""
    ob, con, names = _stretched_two_bones() if rig == "two_bones" else _metarig_arm_past_reach()
    assert bpy.ops.sinew.solve(use_keyframes=True) == {'FINISHED'}
    first = _local_pose(ob, names)
    assert first[names[0]][1][1] > 1.3  # it stretched
    keys = R.action_snapshot(ob.animation_data.action)
    for _press in range(3):
        assert bpy.ops.sinew.solve(use_keyframes=True) == {'FINISHED'}
        now = _local_pose(ob, names)
        # (Within float32 rounding of the pose and keys: the metarig's wrist starts 1e-6 off,
        # well within the tolerance, and one step moves its scale by 1.4e-6.)
        for n in names:
            assert now[n][0].rotation_difference(first[n][0]).angle < 1e-5, (n, now[n][0], first[n][0])
            assert now[n][1] == pytest.approx(first[n][1], abs=1e-5), (n, now[n][1], first[n][1])
        after = R.action_snapshot(ob.animation_data.action)
        assert after.keys() == keys.keys()
        assert all(np.allclose(after[k], keys[k], atol=1e-5) for k in keys)
    con.mute = True  # Sinew's keys alone still reach
    tip = R.world_tail(ob, names[1])
    assert (tip - con.target.matrix_world.translation).length < 1e-3


def test_export_writes_the_stretch_the_pose_has(tmp_path):
    """After a stretched Solve IK, Export IK Problem writes the pose's stretch as the start's and
    the reference's ``scales`` (each bone's length over its rest length: ``b1``'s pose scale
    times ``b0``'s), and that problem solved (start and reference with those scales) is the pose
    as it is: the goal met, nothing moves."""
    import json

    import sinew

    ob, con, names = _stretched_two_bones()
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    pbs = ob.pose.bones
    lengths = [pbs["b0"].scale.y, pbs["b0"].scale.y * pbs["b1"].scale.y]
    path = tmp_path / "problem.json"
    assert bpy.ops.sinew.export_problem(filepath=str(path)) == {'FINISHED'}
    text = path.read_text()
    doc = json.loads(text)
    for part in ("pose", "reference"):
        assert doc[part]["scales"] == pytest.approx(lengths, abs=1e-6), (part, doc[part])
    rig, goals, solver, pose, root_t, _root = sinew.load_problem(text)
    scales = np.array(doc["pose"]["scales"])
    sol = solver.solve(rig, goals, pose=pose, root_translation=root_t, scales=scales,
                       reference=np.array(doc["reference"]["rotations"]), reference_scales=scales)
    assert sol.reached
    assert np.allclose(sol.scales, scales, atol=1e-9)
    assert np.allclose(np.abs(np.einsum("ni,ni->n", sol.rotations, pose)), 1.0, atol=1e-12)


def test_a_bake_over_a_stretched_bake_gives_the_same_keys():
    """A bake starts from the keyed pose with its keyed stretch, and each frame's reference is the
    keyed pose at that frame, its scale keys included: baking the same range again over a bake
    that stretched (targets unchanged, so the keys meet them) gives back the same rotation and
    scale keys."""
    ob, con, _t = _animated_two_bones()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=30) == {'FINISHED'}
    act = ob.animation_data.action
    first = R.action_snapshot(act)
    stretched = max(R.key_frames(R.fcurve(ob, 'pose.bones["b0"].scale', 1))[1])
    assert stretched > 1.2
    assert bpy.ops.sinew.restore_constraints() == {'FINISHED'}
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=30) == {'FINISHED'}
    assert ob.animation_data.action == act
    again = R.action_snapshot(act)
    assert again.keys() == first.keys()
    worst = max(float(np.abs(again[k] - first[k]).max()) for k in first)
    assert worst < 1e-4, worst


@pytest.mark.parametrize("how", ["solve", "bake", "export"])
def test_a_stretching_bone_scaled_out_of_what_the_engine_takes_is_refused(how, tmp_path):
    """A stretching bone whose pose scale makes it shorter than 1/1000 of its rest length (its
    scale at 0, a trick to hide it) is refused before anything changes, naming the bone and the
    scale, not solved from some other length."""
    ob, con, names = _stretched_two_bones()
    ob.pose.bones["b1"].scale = (0.0, 0.0, 0.0)
    before = R.pose_snapshot(ob)
    run = {"solve": lambda: bpy.ops.sinew.solve(),
           "bake": lambda: bpy.ops.sinew.bake(frame_start=1, frame_end=3),
           "export": lambda: bpy.ops.sinew.export_problem(filepath=str(tmp_path / "p.json"))}[how]
    with pytest.raises(RuntimeError, match=r'Bone "b1": its pose scale \(Y 0\)(| at frame 1) makes it 0 times its '
                                           r"rest length.*Alt\+S clears it\)\. Nothing was changed"):
        run()
    assert R.pose_snapshot(ob) == before
    assert ob.animation_data is None and not con.mute
    assert not (tmp_path / "p.json").exists()


def test_a_non_uniform_scale_on_a_stretching_bone_is_named(capfd):
    """A stretching bone scaled non-uniformly in the pose: its stretch starts from its Y scale,
    Sinew keys a uniform scale, and a warning says so."""
    ob, con, names = _stretched_two_bones()
    ob.pose.bones["b0"].scale = (1.0, 1.2, 1.0)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    assert 'Bone "b0" is scaled non-uniformly in the pose (1, 1.2, 1)' in out, out
    s = ob.pose.bones["b0"].scale
    assert s.x == s.y == s.z


# -- Solve IK keying a stretch: the animation at other frames -----------------------------------


def _animator_keyed_chain(stretch=0.3):
    """QA's case: the two-bone chain with ``ik_stretch`` 0.3 on both bones, its target keyed
    within reach at frames 1 and 5 and out of reach at 10, and the animator's rotation keys on
    both bones at frames 1 and 20 (none on scale)."""
    ob, con = _two_bones(stretch=(stretch, stretch), target=(0.3, 0.2, 0.7))
    t = bpy.data.objects["T"]
    R.key_locations(t, {1: (0.3, 0.2, 0.7), 5: (0.3, 0.2, 0.7), 10: (0.0, 0.1, 1.4)})
    for pb in ob.pose.bones:
        pb.keyframe_insert("rotation_quaternion", frame=1)
        pb.keyframe_insert("rotation_quaternion", frame=20)
    return ob, con, t


def _elbows(ob, frames):
    """The evaluated elbow (b0's tail) per frame, Blender's IK on as the animator has it."""
    out = {}
    for f in frames:
        bpy.context.scene.frame_set(f)
        out[f] = R.world_tail(ob, "b0")
    return out


def _solve_at(frame, *, auto_keying=True, only_available=False, replace=False, **kw):
    scene = bpy.context.scene
    scene.frame_set(frame)
    scene.tool_settings.use_keyframe_insert_auto = auto_keying
    scene.tool_settings.auto_keying_mode = 'REPLACE_KEYS' if replace else 'ADD_REPLACE_KEYS'
    prefs = bpy.context.preferences.edit
    prefs.use_keyframe_insert_available = only_available
    try:
        assert bpy.ops.sinew.solve(**kw) == {'FINISHED'}
    finally:
        prefs.use_keyframe_insert_available = False
        scene.tool_settings.use_keyframe_insert_auto = False
        scene.tool_settings.auto_keying_mode = 'ADD_REPLACE_KEYS'


def test_a_keyed_stretch_leaves_the_animators_other_keys_as_they_were(capfd):
    """QA's defect: Solve IK with Auto Keying at frame 10 stretches ``b0`` (here to 1.28); its
    scale had no F-curve, so one key there would hold at every frame (QA: frame 1's elbow moved
    11.4 cm). Sinew
    also keys the scale the bones had (1) at their rotation keys around frame 10 (1 and 20), says
    so, and frames 1 and 20 look as before while frame 10 keeps the solve."""
    ob, con, t = _animator_keyed_chain()
    before = _elbows(ob, (1, 20))
    _solve_at(10)
    out = capfd.readouterr().out
    assert ob.pose.bones["b0"].scale.y > 1.25
    assert 'Sinew also keyed the scale the bones had before at their rotation keys around it (bone "b0": 1, 20; ' \
           'bone "b1": 1, 20)' in out, out
    assert "holds at every frame" not in out
    for name in ("b0", "b1"):
        for c in range(3):
            frames, values = R.key_frames(R.fcurve(ob, f'pose.bones["{name}"].scale', c))
            assert list(frames) == [1.0, 10.0, 20.0], (name, c, frames)
            assert values[0] == values[2] == 1.0
    after = _elbows(ob, (1, 20))
    for f in (1, 20):
        assert (after[f] - before[f]).length < 1e-6, (f, after[f], before[f])
    bpy.context.scene.frame_set(10)
    con.mute = True  # the keys alone hold the solve at frame 10
    assert (R.world_tail(ob, "b1") - t.matrix_world.translation).length < 1e-3


def test_a_stretch_keyed_next_to_scale_keys_keys_only_the_missing_side(capfd):
    """The scale has an F-curve already (a key at frame 1, 1.0): Sinew keys the stretch at 10 and
    the scale the curve gave at 20 (the rotation key after it, where the scale has no key), and
    leaves frame 1's key as it is."""
    ob, con, t = _animator_keyed_chain()
    for pb in ob.pose.bones:
        pb.keyframe_insert("scale", frame=1)
    before = _elbows(ob, (1, 20))
    _solve_at(10)
    assert 'around it (bone "b0": 20; bone "b1": 20)' in capfd.readouterr().out
    frames, values = R.key_frames(R.fcurve(ob, 'pose.bones["b0"].scale', 1))
    assert list(frames) == [1.0, 10.0, 20.0] and values[0] == values[2] == 1.0
    after = _elbows(ob, (1, 20))
    assert all((after[f] - before[f]).length < 1e-6 for f in (1, 20))


def test_a_held_scale_under_an_fcurve_modifier_keeps_its_frame_as_it_was(capfd):
    """The review's case: the scale F-curve carries a Noise modifier; the scale Sinew keys at the
    rotation key after the stretch (frame 20) is the keys' own value there, so the Noise acts on
    it once, as before, and frame 20 looks as it did (reading the curve with its modifier and
    keying that under the same modifier applied the Noise twice)."""
    ob, con, t = _animator_keyed_chain()
    for pb in ob.pose.bones:
        pb.keyframe_insert("scale", frame=1)
    for c in range(3):
        m = R.fcurve(ob, 'pose.bones["b0"].scale', c).modifiers.new('NOISE')
        m.strength, m.scale = 0.2, 3.0
    before = _elbows(ob, (1, 20))
    _solve_at(10)
    capfd.readouterr()
    after = _elbows(ob, (1, 20))
    assert all((after[f] - before[f]).length < 1e-6 for f in (1, 20)), (before, after)
    assert all(not m.mute for c in range(3) for m in R.fcurve(ob, 'pose.bones["b0"].scale', c).modifiers)


def test_a_first_stretch_key_holds_everywhere_as_a_first_rotation_key_does(capfd):
    """Bones without rotation keys elsewhere: the solve's rotation key holds at every frame (a
    first key, as Blender's auto-keying gives it), and so does its stretch; nothing more is keyed
    and nothing warns."""
    ob, con = _two_bones(stretch=(0.3, 0.3), target=(0.0, 0.1, 1.4))
    _solve_at(10)
    out = capfd.readouterr().out
    assert "rotation keys around it" not in out and "holds at every frame" not in out, out
    frames, _values = R.key_frames(R.fcurve(ob, 'pose.bones["b0"].scale', 1))
    assert list(frames) == [10.0]


@pytest.mark.parametrize("how", ["only_insert_available", "replace", "not_keying"])
def test_an_unkeyed_stretch_that_holds_at_every_frame_is_named(how, capfd):
    """When the stretch cannot be keyed (Only Insert Available, or Auto Keying's Replace mode, and
    no scale F-curve) or is not (Auto Keying off), the pose scale holds at every frame: the last
    warnings name the bones, the scale, the frames with rotation keys that change and what to do;
    no scale F-curve is made."""
    ob, con, t = _animator_keyed_chain()
    if how == "not_keying":
        _solve_at(10, auto_keying=False)
    else:
        _solve_at(10, only_available=how == "only_insert_available", replace=how == "replace")
    lines = capfd.readouterr().out.strip().splitlines()
    warning = next((ln for ln in lines if "holds at every frame" in ln), "")
    assert warning.startswith('Warning: Sinew: the stretch Solve IK set as pose scale ("b0" ×1.277 (was ×1), "b1" ×1.003 '
                              '(was ×1)) is not keyed, and no F-curve animates their scale, so it now holds at every '
                              'frame'), lines
    assert "the frames where these bones have rotation keys (1, 20) change too" in warning
    if how == "only_insert_available":
        assert "Only Insert Available is on and there is no scale F-curve to key" in warning
        assert ob.pose.bones["b0"].keyframe_insert  # (the rotation was keyed, into its F-curve)
        assert 10.0 in R.key_frames(R.fcurve(ob, 'pose.bones["b0"].rotation_quaternion', 0))[0]
    elif how == "replace":
        assert "Auto Keying is in Replace mode and there was no scale key at this frame to replace" in warning
    else:
        assert "the pose was set, not keyed (Auto Keying is off)" in warning
    assert "Alt+S" in warning
    assert all(R.fcurve(ob, f'pose.bones["{n}"].scale', c) is None for n in ("b0", "b1") for c in range(3))


def test_a_stretch_on_a_scale_an_nla_strip_animates_is_not_said_to_hold_everywhere(capfd):
    """The review's case: the bones' scale is animated by an NLA strip (no F-curve in the active
    action): the strip sets it again at the next frame, so the stretch does not hold at every
    frame and no warning says it does (one rule, ``keys.ChannelAnimation``, for both the scale
    and Only Moved Bones off's rotations)."""
    ob, con, t = _animator_keyed_chain()
    ad = ob.animation_data
    act = ad.action
    ad.action = None
    for pb in ob.pose.bones:
        pb.keyframe_insert("scale", frame=1)
    scales = ad.action
    ad.action = act
    strip = ad.nla_tracks.new().strips.new("Scales", 1, scales)
    if hasattr(strip, "action_slot") and strip.action_slot is None and len(scales.slots):
        strip.action_slot = scales.slots[0]
    _solve_at(10, auto_keying=False)
    out = capfd.readouterr().out
    assert "holds at every frame" not in out, out


def test_a_baked_stretch_leaves_the_keyed_poses_outside_the_range_as_they_were(capfd):
    """A bake keys the stretch on every frame of its range; with no scale F-curve before, the
    range's end values would hold up to the animator's keys outside it (measured: frame 40's elbow
    moved 11.4 cm after baking frames 5 to 15). The bake also keys the scale the bones had (1) at
    their rotation keys on either side of the range (1 and 40), says so, and the keyed poses
    there are as they were."""
    ob, con = _two_bones(stretch=(0.3, 0.3), target=(0.3, 0.2, 0.7))
    t = bpy.data.objects["T"]
    R.key_locations(t, {1: (0.3, 0.2, 0.7), 10: (0.0, 0.1, 1.4), 15: (0.0, 0.1, 1.4), 40: (0.3, 0.2, 0.7)})
    for pb in ob.pose.bones:
        pb.keyframe_insert("rotation_quaternion", frame=1)
        pb.keyframe_insert("rotation_quaternion", frame=40)
    con.mute = True  # the keys' own pose (the bake mutes the constraint)
    before = _elbows(ob, (1, 40))
    con.mute = False
    bpy.context.scene.frame_set(10)
    assert bpy.ops.sinew.bake(frame_start=5, frame_end=15) == {'FINISHED'}
    assert con.mute
    out = capfd.readouterr().out
    assert ('the stretch keyed over frames 5 to 15 is Sinew\'s, not the animation\'s: Sinew also keyed the scale the '
            'bones had before at their rotation keys around it (bone "b0": 1, 40; bone "b1": 1, 40)') in out, out
    frames, values = R.key_frames(R.fcurve(ob, 'pose.bones["b0"].scale', 1))
    assert list(frames) == [1.0] + list(range(5, 16)) + [40.0] and values[0] == values[-1] == 1.0
    assert max(values) > 1.25  # it stretched
    after = _elbows(ob, (1, 40))
    for f in (1, 40):
        assert (after[f] - before[f]).length < 1e-6, (f, after[f], before[f])
