"""Sampling targets for a bake without stepping frames: plain F-curve-animated objects are read
from their F-curves (pipeline.sample_goals_from_fcurves); everything else still steps the frames.
Every check compares with what frame stepping gives in the same scene."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

import sinew_rigs as R

FRAMES = list(range(1, 49))


def _key(ob, path, frames_values, interpolation=None):
    for f, v in frames_values.items():
        setattr(ob, path, v)
        ob.keyframe_insert(path, frame=f)
    if interpolation:
        for fc in R.channelbag(ob).fcurves:
            if fc.data_path == path:
                for k in fc.keyframe_points:
                    k.interpolation = interpolation


def _animated_empty(name, mode, seed=0):
    """An empty with every transform channel animated (BEZIER keys, so in-between frames are
    interpolated, plus a Cycles modifier on one curve and keys ending before the range does),
    in rotation mode ``mode``."""
    rng = np.random.default_rng(seed)
    e = R.add_empty(name)
    e.rotation_mode = mode
    keyed = (1, 9, 20, 33)
    _key(e, "location", {f: tuple(rng.uniform(-1, 1, 3) + (0.5, 0.0, 1.5)) for f in keyed})
    _key(e, "scale", {f: tuple(rng.uniform(0.7, 1.3, 3)) for f in keyed})
    _key(e, "delta_location", {f: tuple(rng.uniform(-0.2, 0.2, 3)) for f in keyed[:2]})
    _key(e, "delta_scale", {1: (1.0, 1.0, 1.0), 20: (1.2, 0.9, 1.1)})
    if mode == 'QUATERNION':
        _key(e, "rotation_quaternion", {f: tuple(Quaternion(rng.normal(size=4)).normalized()) for f in keyed})
        _key(e, "delta_rotation_quaternion", {1: (1, 0, 0, 0), 20: tuple(Quaternion((0.3, 0.5, -0.2), 0.4))})
    elif mode == 'AXIS_ANGLE':
        _key(e, "rotation_axis_angle", {f: (rng.uniform(-2, 2), *rng.normal(size=3)) for f in keyed})
    else:
        _key(e, "rotation_euler", {f: tuple(rng.uniform(-2.5, 2.5, 3)) for f in keyed})
        _key(e, "delta_rotation_euler", {1: (0.0, 0.0, 0.0), 20: (0.2, -0.3, 0.5)})
    # One curve with a modifier (evaluated by FCurve.evaluate as by the depsgraph).
    R.fcurve(e, "location", 2).modifiers.new('CYCLES')
    return e


def _stepped_world(ob, frames):
    scene = bpy.context.scene
    out = []
    for f in frames:
        scene.frame_set(f)
        out.append(np.array(ob.evaluated_get(R.depsgraph()).matrix_world))
    return np.array(out)


@pytest.mark.parametrize("mode", ['QUATERNION', 'AXIS_ANGLE', 'XYZ', 'ZXY', 'YZX'])
def test_object_world_matrices_equal_frame_stepping(addon, mode):
    e = _animated_empty("E", mode)
    fast = addon.pipeline.object_world_matrices(e, FRAMES, bpy.context.scene)
    assert fast is not None
    np.testing.assert_allclose(fast, _stepped_world(e, FRAMES), atol=2e-6)


def _rig_with_orientation_goal(target_mode='YXZ', pole_mode='AXIS_ANGLE'):
    """A chain whose armature object itself walks and turns (F-curves), with an orientation goal
    on a target in ``target_mode`` and a pole in ``pole_mode``; a second chain-less goal is not
    needed: one goal carries target, orientation and pole."""
    ob = R.make_chain(6, roll_step=0.3)
    _key(ob, "location", {1: (0, 0, 0), 48: (0.4, -0.3, 0.1)})
    ob.rotation_mode = 'XZY'
    _key(ob, "rotation_euler", {1: (0, 0, 0), 30: (0.1, 0.0, 0.6)})
    t = R.add_empty("T")
    t.rotation_mode = target_mode
    _key(t, "location", {f: Vector((0.6 + 0.5 * math.cos(f / 8), 0.5 * math.sin(f / 8), 2.0))[:] for f in range(1, 49, 6)})
    _key(t, "rotation_euler", {1: (0.0, 0.2, 0.0), 24: (0.8, -0.4, 1.2), 48: (0.1, 0.5, -0.6)})
    pole = R.add_empty("Pole")
    pole.rotation_mode = pole_mode
    _key(pole, "location", {1: (0.0, -2.0, 1.0), 48: (1.0, -2.0, 1.5)})
    R.set_goal(ob, "b05", t, use_orientation=True, pole_target=pole, chain_length=0)
    R.activate(ob)
    return ob, t, pole


def _stepped_goals(problem, frames):
    scene = bpy.context.scene
    out = [[], [], []]
    for f in frames:
        scene.frame_set(f)
        for acc, a in zip(out, problem.sample_goals(R.depsgraph())):
            acc.append(a)
    return [np.array(a) for a in out]


def test_fast_sampling_gives_the_targets_rotations_and_poles_of_frame_stepping(addon):
    ob, _t, _pole = _rig_with_orientation_goal()
    p = addon.rig_reader.read(ob)
    assert addon.pipeline.pose_is_static(p)
    fast = addon.pipeline.sample_goals_from_fcurves(p, FRAMES, bpy.context.scene)
    assert fast is not None
    targets, orients, poles = fast
    s_targets, s_orients, s_poles = _stepped_goals(p, FRAMES)
    np.testing.assert_allclose(targets, s_targets, atol=2e-6)
    np.testing.assert_allclose(poles, s_poles, atol=2e-6)
    # the same rotation (a quaternion and its negation are one rotation)
    signs = np.sign(np.einsum("fgi,fgi->fg", orients, s_orients))
    np.testing.assert_allclose(orients * signs[..., None], s_orients, atol=2e-6)
    assert np.ptp(s_orients[:, 0], axis=0).max() > 0.3  # the rotation does vary over the range


def test_bake_from_fcurves_equals_the_bake_stepping_frames(addon):
    """Whole bakes: the F-curve path (no frame stepping) and the frame-stepping path give the
    same solution; the scene's frame is put back either way."""
    scene = bpy.context.scene
    ob, t, _pole = _rig_with_orientation_goal()
    scene.frame_set(17)
    results, frame_changes = {}, {}
    with R.frames_stepped() as seen:
        for sampling in ("auto", "frames"):
            job = addon.pipeline.BakeJob(bpy.context, ob, 1, 48, addon.pipeline.Settings(), sampling=sampling,
                                         verify=False)
            seen.clear()
            results[sampling] = job.run()
            frame_changes[sampling] = list(seen)
            assert scene.frame_current == 17
            # back to the scene as it was: the previous action and the rest pose
            ob.animation_data.action = results[sampling].previous_action
            for pb in ob.pose.bones:
                pb.rotation_quaternion = (1, 0, 0, 0)
    # F-curve sampling visits the first frame (for the start pose) and puts the frame back;
    # frame stepping visits every frame.
    assert frame_changes["auto"] == [1, 17]
    assert frame_changes["frames"] == list(range(1, 49)) + [17]
    fast, slow = results["auto"], results["frames"]
    assert fast.sampling == "fcurves" and slow.sampling == "frames"
    assert not fast.per_frame and not slow.per_frame
    # Each frame's reference (the keyed pose before IK): from the F-curves, as stepping reads it.
    np.testing.assert_allclose(fast.references, slow.references, atol=1e-6)
    # (Not the iteration counts: the references read from F-curves and from the stepped frames
    # differ by round-off, and the steps toward them stop at slightly different iterations.)
    np.testing.assert_allclose(fast.residuals, slow.residuals, atol=1e-6)
    # (Up to 2.6e-5 measured: where the steps toward a reference far from the target use their
    # whole budget, round-off in the reference shows in the answer.)
    np.testing.assert_allclose(fast.rotations, slow.rotations, atol=1e-4)
    # and what was keyed puts the effector on the target, rotated as the target
    ob.animation_data.action = fast.action
    for f in (1, 20, 48):
        scene.frame_set(f)
        assert (R.world_tail(ob, "b05") - R.world_location(t)).length < 1e-3, f
        e = ob.evaluated_get(R.depsgraph())
        q_bone = (e.matrix_world @ e.pose.bones["b05"].matrix).to_quaternion()
        q_t = t.evaluated_get(R.depsgraph()).matrix_world.to_quaternion()
        assert q_bone.rotation_difference(q_t).angle < 1e-2, f


def test_rebake_over_keyed_chain_bones_reads_the_start_pose_at_the_first_frame(addon):
    """F-curves on the moved bones' own rotations (e.g. an earlier bake) do not prevent the fast
    path: they only seed the start pose, read at the first frame of the range."""
    scene = bpy.context.scene
    ob = R.make_chain(4)
    t = R.add_empty("T")
    _key(t, "location", {1: (0.6, 0.0, 1.2), 30: (-0.4, 0.3, 1.5)})
    R.set_goal(ob, "b03", t)
    R.activate(ob)
    for f in (1, 30):
        for i, pb in enumerate(ob.pose.bones):
            pb.rotation_quaternion = Quaternion((1, 0, 0), 0.2 * i + 0.01 * f)
            pb.keyframe_insert("rotation_quaternion", frame=f)
    scene.frame_set(25)
    results = {}
    for sampling in ("auto", "frames"):
        results[sampling] = addon.pipeline.BakeJob(bpy.context, ob, 5, 30, addon.pipeline.Settings(),
                                                   sampling=sampling).run()
        ob.animation_data.action = results[sampling].previous_action  # its keys set the start pose again
        assert scene.frame_current == 25
    assert results["auto"].sampling == "fcurves"
    np.testing.assert_allclose(results["auto"].rotations, results["frames"].rotations, atol=1e-6)


def _parented(t, addon):
    parent = R.add_empty("P", (0.2, 0.0, 0.5))
    _key(parent, "rotation_euler", {1: (0, 0, 0), 48: (0, 0, 1.0)})
    t.parent = parent


def _constrained(t, addon):
    other = R.add_empty("Other", (0.3, 0.2, 1.8))
    c = t.constraints.new('COPY_LOCATION')
    c.target = other
    c.use_z = False


def _driven(t, addon):
    d = t.driver_add("location", 2).driver
    d.expression = "1.8 + 0.1 * sin(frame / 5)"


def _nla(t, addon):
    ad = t.animation_data
    track = ad.nla_tracks.new()
    track.strips.new("Base", 1, ad.action)


def _bone_subtarget(t, addon):
    ob = bpy.data.objects["Chain"]
    other = R.make_chain(2, name="Other")
    _key(other, "location", {1: (0.5, 0.0, 0.8), 48: (0.8, 0.0, 0.6)})
    s = ob.pose.bones["b05"].sinew
    s.target, s.subtarget = other, "b01"
    R.activate(ob)


def _animated_bone_above_the_chain(t, addon):
    ob = bpy.data.objects["Chain"]
    s = ob.pose.bones["b05"].sinew
    s.chain_length = 3  # b03..b05 move; b00..b02 are above the chain
    pb = ob.pose.bones["b01"]
    for f, a in ((1, 0.0), (48, 0.5)):
        pb.rotation_quaternion = Quaternion((1, 0, 0), a)
        pb.keyframe_insert("rotation_quaternion", frame=f)


def _constraint_above_the_chain(t, addon):
    ob = bpy.data.objects["Chain"]
    ob.pose.bones["b05"].sinew.chain_length = 3
    other = R.add_empty("Other")
    _key(other, "rotation_euler", {1: (0, 0, 0), 48: (0.4, 0, 0)})
    c = ob.pose.bones["b01"].constraints.new('COPY_ROTATION')
    c.target = other
    c.mix_mode, c.target_space, c.owner_space = 'ADD', 'LOCAL', 'LOCAL'


@pytest.mark.parametrize("make_slow", [_parented, _constrained, _driven, _nla, _bone_subtarget,
                                       _animated_bone_above_the_chain, _constraint_above_the_chain])
def test_anything_but_plain_fcurves_steps_the_frames(addon, make_slow):
    scene = bpy.context.scene
    ob = R.make_chain(6, roll_step=0.3)
    t = R.add_empty("T")
    _key(t, "location", {1: (0.5, 0.0, 1.9), 48: (0.1, 0.4, 2.1)})
    R.set_goal(ob, "b05", t)
    R.activate(ob)
    p = addon.rig_reader.read(ob)
    assert addon.pipeline.pose_is_static(p)
    assert addon.pipeline.sample_goals_from_fcurves(p, FRAMES, scene) is not None
    make_slow(t, addon)
    p = addon.rig_reader.read(ob)
    assert (not addon.pipeline.pose_is_static(p)
            or addon.pipeline.sample_goals_from_fcurves(p, FRAMES, scene) is None)
    r = addon.pipeline.BakeJob(bpy.context, ob, 1, 48, addon.pipeline.Settings()).run()
    assert r.sampling == "frames"
    s = ob.pose.bones["b05"].sinew
    for f in (1, 24, 48):
        scene.frame_set(f)
        target = (s.target.evaluated_get(R.depsgraph()).matrix_world
                  @ (s.target.evaluated_get(R.depsgraph()).pose.bones[s.subtarget].head if s.subtarget else Vector()))
        assert (R.world_tail(ob, "b05") - target).length < 1e-3, f


def test_muted_constraints_and_muted_curves_are_ignored_as_blender_ignores_them(addon):
    e = _animated_empty("E", 'XYZ')
    c = e.constraints.new('COPY_LOCATION')
    c.target = R.add_empty("Other", (5, 5, 5))
    c.mute = True
    R.fcurve(e, "location", 0).mute = True
    fast = addon.pipeline.object_world_matrices(e, FRAMES, bpy.context.scene)
    assert fast is not None
    np.testing.assert_allclose(fast, _stepped_world(e, FRAMES), atol=2e-6)
