"""Key reduction after a bake: Blender's evaluated pose stays within the tolerance of the
unreduced bake on every frame; what is kept, what is left alone, what is reported."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

import sinew_rigs as R

FRAMES = range(1, 61)


def _circle(f, center=(0.6, 0.0, 2.0), radius=0.6, n=40):
    a = 2 * math.pi * f / n
    return (center[0] + radius * math.cos(a), center[1] + radius * math.sin(a), center[2])


def _scene(n=6, modes=None):
    """A chain with rolls whose tip follows an empty keyed on a circle every 5 frames (Blender's
    Bezier keys: smooth motion). ``modes``: {bone: rotation_mode}."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    ob = R.make_chain(n, roll_step=0.3)
    for name, mode in (modes or {}).items():
        ob.pose.bones[name].rotation_mode = mode
    t = R.add_empty("T")
    R.key_locations(t, {f: _circle(f) for f in FRAMES[::5]})
    R.set_goal(ob, f"b{n - 1:02d}", t)
    R.activate(ob)
    scene.frame_set(1)
    return ob, t


def _evaluated(ob, frames):
    """Per frame, each bone's local rotation recovered from Blender's evaluated pose matrices,
    and bone 0's evaluated location."""
    scene = bpy.context.scene
    rots, locs = [], []
    for f in frames:
        scene.frame_set(f)
        rots.append(R.evaluated_locals(ob))
        locs.append(Vector(ob.evaluated_get(R.depsgraph()).pose.bones[0].location))
    return rots, locs


def _angle(a, b):
    """The angle between two rotations, in double precision (mathutils computes in single, and
    acos near 1 would lose most of it): 4 asin(|a - b| / 2) for unit a, b in one hemisphere."""
    a, b = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    if np.dot(a, b) < 0.0:
        b = -b
    return 4.0 * math.asin(min(1.0, np.linalg.norm(a - b) / 2.0))


def _reducing(addon, angle, distance, **kw):
    """The bake's Settings with key reduction on: ``angle`` in radians (the operator's
    ``reduction_angle`` is an ANGLE property: radians, shown in degrees), ``distance``."""
    return addon.pipeline.Settings(key_reduction=True, reduction_angle=angle, reduction_distance=distance, **kw)


def _count_keys(ob, lo, hi):
    n = 0
    for fc in R.channelbag(ob).fcurves:
        frames, _ = R.key_frames(fc)
        n += int(np.sum((frames >= lo) & (frames <= hi)))
    return n


@pytest.mark.parametrize("degrees", [0.1, 0.5])
def test_reduced_bake_stays_within_the_tolerance_of_the_unreduced_bake_on_every_frame(degrees, capfd):
    """The same scene baked twice (built afresh each time): without and with key reduction.
    Blender's evaluated pose, read back on every frame, differs per bone by at most the angle."""
    ob, _t = _scene()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=60) == {'FINISHED'}
    full_keys = _count_keys(ob, 1, 60)
    full, _ = _evaluated(ob, FRAMES)

    bpy.ops.wm.read_homefile(use_empty=True)
    ob, _t = _scene()
    capfd.readouterr()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=60, use_key_reduction=True,
                              reduction_angle=math.radians(degrees)) \
        == {'FINISHED'}
    out = capfd.readouterr().out
    reduced_keys = _count_keys(ob, 1, 60)
    reduced, _ = _evaluated(ob, FRAMES)
    worst = max(_angle(a[name], b[name]) for a, b in zip(full, reduced) for name in a)
    tol = math.radians(degrees)
    assert worst <= tol + 2e-5, math.degrees(worst)  # (+ single-precision round-off of the matrices)
    assert worst > 0.2 * tol  # the reduction did use its tolerance
    assert reduced_keys < 0.8 * full_keys, (reduced_keys, full_keys)
    assert f"Key reduction kept {reduced_keys} of {full_keys} keys" in out, out
    assert "misses targets" not in out  # the bake's own check allows what the reduction moved
    # Every channel keeps the range's first and last frames; the keys are Bezier keys with
    # automatic clamped handles, the curve's ends vector handles (Blender would flatten automatic
    # ones there), the last keeps the bake's interpolation toward whatever follows.
    for fc in R.channelbag(ob).fcurves:
        frames, _ = R.key_frames(fc)
        assert frames[0] == 1 and frames[-1] == 60
        kps = list(fc.keyframe_points)
        assert all(k.interpolation == 'BEZIER' and k.handle_right_type == 'AUTO_CLAMPED' for k in kps[1:-1])
        assert kps[0].interpolation == 'BEZIER' and kps[0].handle_right_type == 'VECTOR'
        assert kps[-1].interpolation == 'LINEAR' and kps[-1].handle_left_type == 'VECTOR'


def test_a_looser_tolerance_keeps_fewer_keys_and_reports_the_deviation(addon):
    kept = []
    for degrees in (0.05, 0.5, 2.0):
        bpy.ops.wm.read_homefile(use_empty=True)
        ob, _t = _scene()
        job = addon.pipeline.BakeJob(bpy.context, ob, 1, 60, _reducing(addon, math.radians(degrees), 1e-4))
        r = job.run()
        red = r.reduction
        assert red.max_angle <= math.radians(degrees) and red.max_angle > 0.2 * math.radians(degrees)
        assert red.keys_before == 6 * 4 * 60 and red.keys_after == _count_keys(ob, 1, 60)
        assert red.groups == 6 and red.skipped == 0 and not red.location
        kept.append(red.keys_after)
        assert not r.blender_misses
    assert kept[0] > kept[1] > kept[2]


def test_euler_and_axis_angle_bones_are_measured_as_blender_rotates_them(addon):
    ob, _t = _scene(modes={"b01": 'XZY', "b03": 'AXIS_ANGLE', "b04": 'ZYX'})
    tol = math.radians(0.3)
    job = addon.pipeline.BakeJob(bpy.context, ob, 1, 60, _reducing(addon, tol, 1e-4))
    r = job.run()
    assert r.reduction.keys_after < 0.5 * r.reduction.keys_before
    assert r.reduction.keys_before == 60 * (4 + 3 + 4 + 4 + 4 + 3)
    idx = {n: k for k, n in enumerate(r.names)}
    rots, _ = _evaluated(ob, FRAMES)
    for k, frame_rots in enumerate(rots):
        for name, q in frame_rots.items():
            assert _angle(q, r.rotations[k, idx[name]]) <= tol + 2e-5, (k, name)


def test_root_location_is_reduced_within_the_distance(addon, capfd):
    """Free root: the root's location channels keep keys together, within the distance."""
    ob, _t = _scene(n=3)
    ob.pose.bones["b00"].location = (0.0, 0.0, 0.0)
    dist = 2e-3
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=60, root_mode='FREE', use_key_reduction=True,
                              reduction_angle=math.radians(0.2), reduction_distance=dist) == {'FINISHED'}
    out = capfd.readouterr().out
    assert "in location" in out
    frames, _ = R.key_frames(R.fcurve(ob, 'pose.bones["b00"].location', 0))
    assert 2 <= len(frames) < 60
    for c in (1, 2):
        other, _ = R.key_frames(R.fcurve(ob, 'pose.bones["b00"].location', c))
        assert list(other) == list(frames)  # the three channels keep the same frames



def test_root_location_deviation_against_the_solution(addon):
    ob, _t = _scene(n=3)
    dist = 2e-3
    job = addon.pipeline.BakeJob(bpy.context, ob, 1, 60, _reducing(addon, math.radians(0.2), dist, root="free"))
    r = job.run()
    assert r.reduction.location and 0.0 < r.reduction.max_distance <= dist
    _, locs = _evaluated(ob, FRAMES)
    worst = max((Vector(loc) - Vector(r.root_translations[k])).length for k, loc in enumerate(locs))
    assert worst <= dist + 1e-6
    assert np.ptp(r.root_translations, axis=0).max() > 10 * dist


def test_keys_outside_the_range_are_not_touched(addon):
    ob, _t = _scene()
    for f in range(1, 61, 3):  # the user's keys: every bone, the whole range
        for i, pb in enumerate(ob.pose.bones):
            pb.rotation_quaternion = Quaternion((1, 0, 0), 0.1 * math.sin(f / 7 + i))
            pb.keyframe_insert("rotation_quaternion", frame=f, group=pb.name)
    act = ob.animation_data.action
    before = R.action_snapshot(act)
    job = addon.pipeline.BakeJob(bpy.context, ob, 20, 40, _reducing(addon, math.radians(0.1), 1e-4),
                                 new_action=False)
    r = job.run()
    assert ob.animation_data.action == act
    after = R.action_snapshot(act)
    for key, data in before.items():
        n = len(data) // 4
        old = [(f, v) for f, v in zip(data[0:2 * n:2], data[1:2 * n:2]) if f < 20 or f > 40]
        m = len(after[key]) // 4
        new_frames, new_vals = after[key][0:2 * m:2], after[key][1:2 * m:2]
        assert old == [(f, v) for f, v in zip(new_frames, new_vals) if f < 20 or f > 40], key
        inside = [f for f in new_frames if 20 <= f <= 40]
        assert inside[0] == 20 and inside[-1] == 40 and len(inside) < 21
    assert r.reduction.keys_after < r.reduction.keys_before


def test_the_animation_outside_the_range_does_not_change(addon):
    """Between the user's last key before the range and the range's first key, and after the
    range, the curves evaluate as the unreduced bake left them (the first key's left handle is
    kept, the last key's interpolation too)."""
    ob, _t = _scene()
    for f in (1, 8, 15, 45, 52, 60):  # the user's Bezier keys around the range
        for i, pb in enumerate(ob.pose.bones):
            pb.rotation_quaternion = Quaternion((1, 0, 0.3), 0.2 * math.sin(f / 5 + i))
            pb.keyframe_insert("rotation_quaternion", frame=f, group=pb.name)
    job = addon.pipeline.BakeJob(bpy.context, ob, 20, 40, addon.pipeline.Settings(), new_action=False)
    r = job.run()
    outside = [f + d for f in (15, 40, 45) for d in (0.25, 0.5, 0.75, 1.5, 2.5, 4.0)] + [1.0, 8.0, 55.0]
    fcurves = [fc for fc in R.channelbag(ob).fcurves if "rotation" in fc.data_path]
    before = [[fc.evaluate(f) for f in outside] for fc in fcurves]
    res = addon.key_reduction.reduce_bake(ob, r.frames, r.keyed, None, math.radians(0.5), 0.0)
    assert res.keys_after < res.keys_before
    after = [[fc.evaluate(f) for f in outside] for fc in fcurves]
    np.testing.assert_allclose(after, before, atol=1e-6)


def test_a_still_bone_keeps_only_its_ends_and_a_jump_keeps_its_keys(addon):
    """Written keys, reduced directly: a bone that holds still needs only the range's ends; a
    smooth swing needs a few keys; a sudden turn keeps the keys around it. Blender evaluates
    every frame within the tolerance."""
    ob = R.make_chain(3)
    frames = np.arange(1, 61, dtype=np.float64)
    still = np.tile(np.array(Quaternion((0.3, 0.2, 1.0), 0.4)), (60, 1))
    swing = np.array([np.array(Quaternion((1, 0, 0), 0.6 * math.sin(2 * math.pi * f / 40))) for f in frames])
    jump = np.array([np.array(Quaternion((0, 0, 1), 0.0 if f <= 30 else 0.5)) for f in frames])
    rotations = np.stack([still, swing, jump], axis=1)
    names = ["b00", "b01", "b02"]
    addon.keys.write_bake(ob, frames, names, rotations, new_action=False)
    tol = math.radians(0.2)
    res = addon.key_reduction.reduce_bake(ob, frames, names, None, tol, 0.0)
    kept = {n: R.key_frames(R.fcurve(ob, f'pose.bones["{n}"].rotation_quaternion', 0))[0].tolist() for n in names}
    assert kept["b00"] == [1, 60]
    assert 4 <= len(kept["b01"]) <= 20, kept["b01"]  # a smooth swing: a key every few frames at most
    assert {30, 31} <= set(kept["b02"]) and kept["b02"][0] == 1 and kept["b02"][-1] == 60
    assert 0.0 < res.max_angle <= tol
    for k, f in enumerate(frames):  # what Blender evaluates, on every frame
        for b, name in enumerate(names):
            q = [R.fcurve(ob, f'pose.bones["{name}"].rotation_quaternion', c).evaluate(f) for c in range(4)]
            assert _angle(q, rotations[k, b]) <= tol + 1e-6, (f, name)


def test_channels_with_modifiers_are_left_alone(addon):
    ob, _t = _scene(n=3)
    job = addon.pipeline.BakeJob(bpy.context, ob, 1, 60, addon.pipeline.Settings())
    job.run()
    R.fcurve(ob, 'pose.bones["b01"].rotation_quaternion', 2).modifiers.new('NOISE')
    res = addon.key_reduction.reduce_bake(ob, np.arange(1, 61), ["b00", "b01", "b02"], None, math.radians(0.5), 0.0)
    assert res.skipped == 1 and res.groups == 2
    frames, _ = R.key_frames(R.fcurve(ob, 'pose.bones["b01"].rotation_quaternion', 0))
    assert len(frames) == 60


def test_effector_slack_bounds_the_effector_motion(addon):
    """The bound the bake's check allows: every keyed bone above the effector turning by the
    tolerance moves the tail by at most the sum of tolerance times distance."""
    ob = R.make_chain(4, length=0.5)
    slack = addon.key_reduction.effector_slack(ob, [("b03", True), ("b03", False)], ["b01", "b02", "b03"], None,
                                               0.01, 0.0)
    assert slack[0] == pytest.approx(0.01 * (1.5 + 1.0 + 0.5))
    assert slack[1] == pytest.approx(0.01 * (1.0 + 0.5))
    # Turning those bones by the tolerance moves the tail by no more.
    tail0 = R.world_tail(ob, "b03")
    for name in ("b01", "b02", "b03"):
        ob.pose.bones[name].rotation_quaternion = Quaternion((1, 0, 0), 0.01)
    assert (R.world_tail(ob, "b03") - tail0).length <= slack[0]


def test_a_failing_reduction_changes_nothing(addon, monkeypatch):
    """If the reduction fails (a fault injected into the real add-on), the bake's write is rolled
    back: the user's action is assigned again, no new action is left, nothing is muted, and the
    operator reports an error instead of a traceback."""
    ob, _t = _scene(n=3)
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target, con.chain_count = bpy.data.objects["T"], 2
    for f in (1, 30, 60):
        ob.pose.bones["b00"].rotation_quaternion = Quaternion((1, 0, 0), 0.01 * f)
        ob.pose.bones["b00"].keyframe_insert("rotation_quaternion", frame=f)
    act = ob.animation_data.action
    before = R.action_snapshot(act)
    actions = set(bpy.data.actions)

    def fail(*_a, **_k):
        raise ValueError("injected")

    monkeypatch.setattr(addon.key_reduction, "reduce_bake", fail)
    with pytest.raises(RuntimeError, match="Sinew failed"):
        bpy.ops.sinew.bake(frame_start=1, frame_end=60, use_key_reduction=True)
    assert ob.animation_data.action == act and set(bpy.data.actions) == actions
    assert R.same_snapshot(R.action_snapshot(act), before)
    assert not act.use_fake_user and not con.mute and ob.sinew_muted == ""


def _two_armatures_in_pose_mode():
    """Armatures "A" and "B" in Pose Mode together, "A" active, each tip following its own empty on
    a circle (keyed every 5 frames)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = FRAMES[0], FRAMES[-1]
    obs = []
    for name, dx in (("A", 0.0), ("B", 3.0)):
        ob = R.make_chain(4, name=name, roll_step=0.3)
        ob.location = (dx, 0.0, 0.0)
        t = R.add_empty("T" + name)
        R.key_locations(t, {f: _circle(f, center=(0.5 + dx, 0.0, 1.8), radius=0.4) for f in FRAMES[::5]})
        R.set_goal(ob, "b03", t)
        obs.append(ob)
    a, b = obs
    R.activate(b)
    a.select_set(True)
    bpy.context.view_layer.objects.active = a
    bpy.ops.object.mode_set(mode='POSE')
    assert {o.name for o in bpy.context.objects_in_mode} == {"A", "B"}
    scene.frame_set(1)
    return a, b


def test_every_armature_of_a_multi_armature_bake_is_reduced_and_reported(addon, capfd):
    a, b = _two_armatures_in_pose_mode()
    capfd.readouterr()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=60, use_key_reduction=True,
                              reduction_angle=math.radians(0.5)) == {'FINISHED'}
    out = capfd.readouterr().out
    for ob in (a, b):
        n = _count_keys(ob, 1, 60)
        assert n < 0.8 * 4 * 4 * 60, (ob.name, n)
        assert f'Sinew: "{ob.name}": Key reduction kept {n} of {4 * 4 * 60} keys' in out, out
        assert f'Sinew: "{ob.name}" baked 60 frames' in out  # and each armature's per-goal report
        assert addon.pipeline.last_bake_results(ob)
    assert "misses targets" not in out


def test_a_reduction_failing_on_the_second_armature_puts_the_first_back(addon, monkeypatch):
    a, b = _two_armatures_in_pose_mode()
    real = addon.key_reduction.reduce_bake

    def reduce_bake(ob, *args, **kw):
        if ob.name == "B":
            raise ValueError("injected")
        return real(ob, *args, **kw)

    monkeypatch.setattr(addon.key_reduction, "reduce_bake", reduce_bake)
    actions = set(bpy.data.actions)  # the targets' own
    with pytest.raises(RuntimeError, match="Sinew failed"):
        bpy.ops.sinew.bake(frame_start=1, frame_end=60, use_key_reduction=True)
    assert set(bpy.data.actions) == actions and a.animation_data is None and b.animation_data is None
    assert a.sinew_last_bake == "" and b.sinew_last_bake == ""
