"""An IK constraint's influence animated over a bake's range (keyed, or driven from a custom
property: the usual IK/FK blend), against Blender's own IK evaluated frame by frame before the
bake.

A four-bone chain with FK keys (bent one way at frame 1, another at frame 10), an animated
target and an IK constraint on its last two bones (a limb: the pose Blender's IK gives is
unique, so each bone can be compared, not only the tip); the IK constraint's influence goes 1 -> 0 (or 0 -> 1) over frames 1..10, with or without
a pole. After Bake IK to Keyframes (the IK constraint muted), Blender's evaluated pose at every
frame must be the one its IK showed before the bake with the animated influence (each bone's
local rotation within 1e-3 rad, the tip within 1e-3), whatever frame the bake was started from."""

import math

import bpy
import pytest
from mathutils import Euler, Vector

import sinew_rigs as R

FRAMES = range(1, 11)
BONES = ["b00", "b01", "b02", "b03"]
# Influence keys (frame, value): 1 until frame 4, down to 0 at frame 9 (and the reverse).
CURVES = {"1to0": ((1, 1.0), (4, 1.0), (9, 0.0)), "0to1": ((1, 0.0), (4, 0.0), (9, 1.0))}


def _rig(how, curve, pole, fk_above=True):
    """The chain, its FK keys (on b01 above the IK chain too, with ``fk_above``), the animated target, and the IK constraint on b03 (chain 2) whose
    influence is keyed (``how`` "keyed") or driven by the armature's "ik" property, keyed
    (``how`` "driven"), along ``CURVES[curve]``."""
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_chain(4, 0.5, name="Rig")
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    pbs = ob.pose.bones
    for f, bend in ((1, 0.3), (10, -0.4)):
        for name, factor in (("b01", 1.0), ("b02", 0.5), ("b03", 1.5)):
            pbs[name].rotation_quaternion = Euler((bend * factor, 0.0, 0.2 * factor)).to_quaternion()
        for pb in pbs:
            if fk_above or pb.name in ("b02", "b03"):
                pb.keyframe_insert("rotation_quaternion", frame=f)
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.6, 0.1, 1.4), 10: (0.7, -0.2, 1.2)})
    ik = pbs["b03"].constraints.new('IK')
    ik.target, ik.chain_count = t, 2
    if pole:
        ik.pole_target = R.add_empty("Pole", (0.0, -2.0, 1.0))
        ik.pole_angle = -math.pi / 2
    if how == "keyed":
        for f, v in CURVES[curve]:
            ik.influence = v
            ik.keyframe_insert("influence", frame=f)
    else:
        for f, v in CURVES[curve]:
            ob["ik"] = v
            ob.keyframe_insert('["ik"]', frame=f)
        d = ik.driver_add("influence").driver
        d.type = 'AVERAGE'
        var = d.variables.new()
        var.targets[0].id = ob
        var.targets[0].data_path = '["ik"]'
    R.activate(ob)
    return ob, ik


def _frames(ob):
    """Per frame: (IK influence, {bone: local rotation}, tip) in Blender's evaluated pose."""
    scene = bpy.context.scene
    out = {}
    for f in FRAMES:
        scene.frame_set(f)
        ik = ob.evaluated_get(R.depsgraph()).pose.bones["b03"].constraints["IK"]
        out[f] = (0.0 if ik.mute else ik.influence, R.evaluated_locals(ob), R.world_tail(ob, "b03").copy())
    return out


def _assert_same(after, before, chain, pole):
    """Every frame of ``after`` shows ``before``'s pose: the tip within 1e-3, and each bone's
    local rotation within 1e-3 rad where that pose is unique: everywhere with a pole; without
    one (where Sinew and Blender may turn a chain differently about the line to the target), the
    chain's own bones only on frames where the IK does not act (the FK pose)."""
    for f in FRAMES:
        influence, rot_b, tip_b = before[f]
        _influence, rot_a, tip_a = after[f]
        for b in BONES:
            if pole or influence == 0.0 or b not in chain:
                assert rot_a[b].rotation_difference(rot_b[b]).angle < 1e-3, (f, influence, b)
        assert (tip_a - tip_b).length < 1e-3, (f, influence, tuple(tip_a), tuple(tip_b))


def _bake(ob, start):
    bpy.context.scene.frame_set(start)
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}


@pytest.mark.parametrize("start", [1, 6, 10])
@pytest.mark.parametrize("pole", [False, True], ids=["no_pole", "pole"])
@pytest.mark.parametrize("curve", ["1to0", "0to1"])
@pytest.mark.parametrize("how", ["keyed", "driven"])
def test_a_bake_follows_the_animated_influence_frame_by_frame(how, curve, pole, start):
    """After the bake (IK muted) every frame shows what Blender's IK showed with that frame's
    influence: fully on target where it is 1, blended where it is between, the FK keys where it
    is 0; started from a frame where the influence is 1 or 0 alike."""
    ob, ik = _rig(how, curve, pole)
    before = _frames(ob)
    influences = [before[f][0] for f in FRAMES]
    assert max(influences) == 1.0 and min(influences) == 0.0 and 0.0 < influences[5] < 1.0
    _bake(ob, start)
    assert ik.mute
    _assert_same(_frames(ob), before, ("b02", "b03"), pole)


def test_the_report_names_the_animated_influence(capfd):
    """The bake's report says which IK constraint's influence the range animates and on how many
    frames its IK does not act (keyed with the FK pose there)."""
    ob, _ik = _rig("keyed", "1to0", False)
    _bake(ob, 10)
    out = capfd.readouterr().out
    assert ('IK influence animated over the range, baked frame by frame as Blender\'s IK applies it: IK "IK" (bone '
            '"b03") between 0 and 1 (off on 2 of 10 frames: keyed with the FK pose there)') in out, out


@pytest.mark.parametrize("how", ["keyed", "driven"])
def test_the_keys_do_not_depend_on_the_frame_the_bake_starts_from(how):
    """The same rig baked from frame 1 (influence 1) and from frame 10 (influence 0) gives the same
    keys (each bone within 1e-6 rad at every frame)."""
    results = []
    for start in (1, 10):
        ob, _ik = _rig(how, "1to0", False)
        _bake(ob, start)
        results.append(_frames(ob))
    for f in FRAMES:
        for b in BONES:
            assert results[0][f][1][b].rotation_difference(results[1][f][1][b]).angle < 1e-6, (f, b)


def test_a_keyed_influence_is_read_from_its_fcurve_without_stepping_frames(addon):
    """Only F-curves animate the rig (the influence among them): the bake reads the influence
    from its F-curve (the F-curve sampling path) and gives what stepping the frames gives."""
    results = {}
    for sampling in ("auto", "frames"):
        ob, _ik = _rig("keyed", "1to0", False, fk_above=False)
        bpy.context.scene.frame_set(10)
        results[sampling] = addon.pipeline.BakeJob(bpy.context, ob, 1, 10, addon.pipeline.Settings(),
                                                   sampling=sampling).run()
    assert results["auto"].sampling == "fcurves" and results["frames"].sampling == "frames"
    diff = abs(results["auto"].rotations - results["frames"].rotations).max()
    assert diff < 1e-9, diff


def test_a_keyed_influence_is_read_from_its_fcurve_despite_a_driver_elsewhere(addon):
    """A driver on some other property of the armature (as every Rigify rig has) does not make
    the bake step the frames to read a keyed IK influence: it comes from its F-curve, and is what
    Blender evaluates at each frame."""
    ob, _ik = _rig("keyed", "1to0", False)
    ob["other"] = 0.0
    ob.driver_add('["other"]').driver.expression = "frame"
    scene = bpy.context.scene
    want = []
    for f in FRAMES:
        scene.frame_set(f)
        c = ob.evaluated_get(R.depsgraph()).pose.bones["b03"].constraints["IK"]
        want.append(0.0 if c.mute else c.influence)
    scene.frame_set(5)
    with R.frames_stepped() as stepped:
        inf = addon.pipeline.constraint_influences(ob, list(FRAMES), scene, bpy.context.view_layer)
    assert stepped == []
    assert abs(inf.at("b03", "IK") - want).max() < 1e-6, (inf.at("b03", "IK"), want)
    # A driver on the influence itself still makes it step the frames.
    _ik.driver_add("influence").driver.expression = "1.0"
    with R.frames_stepped() as stepped:
        addon.pipeline.constraint_influences(ob, list(FRAMES), scene, bpy.context.view_layer)
    assert len(stepped) >= len(FRAMES)


@pytest.mark.parametrize("how", ["keyed", "driven"])
@pytest.mark.parametrize("frame", [3, 6, 8])
def test_solve_ik_at_a_frame_uses_that_frames_influence(how, frame):
    """Solve IK at a frame solves with the influence Blender's IK has there: with the IK then
    muted, the pose is Blender's IK pose at that frame."""
    ob, ik = _rig(how, "1to0", False)
    want = _frames(ob)[frame]
    bpy.context.scene.frame_set(frame)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    ik.mute = True
    bpy.context.view_layer.update()
    rot = R.evaluated_locals(ob)
    for b in ("b00", "b01"):  # (without a pole the chain's bones may turn otherwise about the line to the target)
        assert rot[b].rotation_difference(want[1][b]).angle < 1e-3, (frame, b)
    assert (R.world_tail(ob, "b03") - want[2]).length < 1e-3


def _ikfk(copy_influence_keys):
    """A homemade IK/FK switch: the chain's bones copy the rotation of FK bones by influence
    "fk" (keyed along ``copy_influence_keys``), the IK constraint's influence driven by 1 - fk."""
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_chain(4, 0.5, name="Rig")
    R.activate(ob)
    bpy.ops.object.mode_set(mode='EDIT')
    eds = ob.data.edit_bones
    for n, p in (("fk01", "b00"), ("fk02", "fk01"), ("fk03", "fk02")):
        src = eds["b" + n[2:]]
        e = eds.new(n)
        e.head, e.tail, e.parent = src.head, src.tail, eds[p]
    bpy.ops.object.mode_set(mode='POSE')
    pbs = ob.pose.bones
    pbs["fk02"].rotation_quaternion = Euler((0.8, 0.0, 0.3)).to_quaternion()
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.5, 0.2, 1.3), 10: (0.6, -0.3, 1.1)})
    ik = pbs["b03"].constraints.new('IK')
    ik.target, ik.chain_count = t, 3
    ob["fk"] = 0.0
    for f, v in copy_influence_keys:
        ob["fk"] = v
        ob.keyframe_insert('["fk"]', frame=f)
    for fc in R.channelbag(ob).fcurves:
        for k in fc.keyframe_points:
            k.interpolation = 'CONSTANT'
    for n in ("b01", "b02", "b03"):
        c = pbs[n].constraints.new('COPY_ROTATION')
        c.target, c.subtarget = ob, "fk" + n[1:]
        pbs[n].constraints.move(len(pbs[n].constraints) - 1, 0)
        d = c.driver_add("influence").driver
        d.type = 'AVERAGE'
        v = d.variables.new()
        v.targets[0].id, v.targets[0].data_path = ob, '["fk"]'
    d = ik.driver_add("influence").driver
    d.type = 'SCRIPTED'
    v = d.variables.new()
    v.name, v.targets[0].id, v.targets[0].data_path = "fk", ob, '["fk"]'
    d.expression = "1 - fk"
    R.activate(ob)
    return ob, ik


@pytest.mark.parametrize("start", [1, 8])
def test_an_ik_fk_switch_bakes_whatever_the_playhead(start, capfd):
    """IK on frames 1-5, Copy Rotation from the FK bones on 6-10: the other constraint on the IK
    chain never acts where the IK does, so the bake is not refused (from either side of the
    switch), and every frame shows what it showed before: the IK pose, then the FK bones' (the
    Copy Rotation acting on top of the keys, as before the bake). No miss is reported."""
    ob, ik = _ikfk(((5, 0.0), (6, 1.0)))
    before = _frames(ob)
    assert before[1][0] == 1.0 and before[8][0] == 0.0
    _bake(ob, start)
    assert ik.mute
    _assert_same(_frames(ob), before, ("b01", "b02", "b03"), False)
    out = capfd.readouterr().out
    assert "misses" not in out and "Sinew baked 10 frames" in out, out


@pytest.mark.parametrize("start", [1, 8])
def test_another_constraint_acting_where_the_ik_acts_is_refused_at_any_playhead(start):
    """Copy Rotation at influence 0.5 from frame 8, where the IK still has influence 0.5: the bake
    is refused from frame 1 (where the Copy Rotation is off) as from frame 8, naming the first
    frame where both act, and nothing changes."""
    ob, ik = _ikfk(((1, 0.0), (8, 0.5)))
    bpy.context.scene.frame_set(start)
    action = ob.animation_data.action
    with pytest.raises(RuntimeError, match=r'"Copy Rotation" in effect at frame 8'):
        bpy.ops.sinew.bake(frame_start=1, frame_end=10)
    assert not ik.mute and ob.animation_data.action == action
    assert bpy.context.scene.frame_current == start
