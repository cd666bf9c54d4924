"""The pose before IK is the reference pose: Solve IK falls back to the current pose, and Bake IK
to Keyframes to each frame's keyed (FK) pose of the chain bones."""

import math

import bpy
import numpy as np
import pytest
from mathutils import Quaternion

import sinew_rigs as R

FRAMES = range(1, 21)


def _angle(a, b) -> float:
    """Angle between two rotations (radians), sign-insensitive; in double precision and with
    atan2, so float32 round-off near zero reads as ~1e-8, not acos's ~1e-3."""
    a = np.array(tuple(a), dtype=np.float64)
    b = np.array(tuple(b), dtype=np.float64)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    w = float(np.dot(a, b))  # conj(a) * b
    v = a[0] * b[1:] - b[0] * a[1:] - np.cross(a[1:], b[1:])
    return 2.0 * math.atan2(float(np.linalg.norm(v)), abs(w))


def _bend(i: int, f: float) -> Quaternion:
    """A keyed FK pose: every bone bent about a slowly turning axis, changing with the frame."""
    axis = (math.cos(0.3 * i + 0.05 * f), math.sin(0.3 * i + 0.05 * f), 0.2)
    return Quaternion(axis, 0.12 + 0.01 * i + 0.008 * f)


def _local(pb) -> Quaternion:
    """A pose bone's local rotation from its own channels, whatever its rotation mode."""
    if pb.rotation_mode == 'QUATERNION':
        return Quaternion(pb.rotation_quaternion).normalized()
    return pb.rotation_euler.to_quaternion()


def _keyed_chain(n=6, mode='QUATERNION'):
    """A chain whose bones (in rotation mode ``mode``) are keyed every frame of FRAMES, and an
    empty keyed onto the keyed effector's tail at every frame (so every frame's targets are met
    by its keyed pose). Returns (armature, empty, {frame: {bone: keyed rotation}})."""
    scene = bpy.context.scene
    ob = R.make_chain(n, roll_step=0.3)
    for f in FRAMES:
        for i, pb in enumerate(ob.pose.bones):
            pb.rotation_mode = mode
            if mode == 'QUATERNION':
                pb.rotation_quaternion = _bend(i, f)
                pb.keyframe_insert("rotation_quaternion", frame=f)
            else:
                pb.rotation_euler = _bend(i, f).to_euler(mode)
                pb.keyframe_insert("rotation_euler", frame=f)
    keyed, tails = {}, {}
    for f in FRAMES:
        scene.frame_set(f)
        keyed[f] = {pb.name: _local(pb) for pb in ob.pose.bones}
        tails[f] = tuple(R.world_tail(ob, f"b{n - 1:02d}"))
    t = R.add_empty("T")
    R.key_locations(t, tails)
    R.set_goal(ob, f"b{n - 1:02d}", t)
    R.activate(ob)
    scene.frame_set(FRAMES[0])
    return ob, t, keyed


@pytest.mark.parametrize("sampling, mode", [("auto", 'QUATERNION'), ("frames", 'QUATERNION'), ("auto", 'XZY'),
                                            ("frames", 'XZY')])
def test_bake_keeps_the_keyed_pose_where_the_targets_sit_on_it(addon, sampling, mode):
    scene = bpy.context.scene
    ob, t, keyed = _keyed_chain(mode=mode)
    job = addon.pipeline.BakeJob(bpy.context, ob, FRAMES[0], FRAMES[-1], addon.pipeline.Settings(tolerance=1e-5),
                                 sampling=sampling)
    r = job.run()
    # "auto" reads the targets and the keyed bones from their F-curves; "frames" steps the scene.
    assert r.sampling == ("fcurves" if sampling == "auto" else "frames")
    assert not r.per_frame
    assert r.reached.all()
    idx = {n: k for k, n in enumerate(r.names)}
    # The references handed to the engine are the keys.
    for k, f in enumerate(r.frames):
        for name, q in keyed[int(f)].items():
            assert _angle(r.references[k, idx[name]], q) < 1e-6, (f, name)
    # The solution is the keyed pose, frame by frame.
    worst = 0.0
    for k, f in enumerate(r.frames):
        for name, q in keyed[int(f)].items():
            worst = max(worst, _angle(r.rotations[k, idx[name]], q))
    assert worst < 1e-3, worst
    # And so is the evaluated scene with the baked keys.
    for f in (FRAMES[0], 7, FRAMES[-1]):
        scene.frame_set(f)
        locs = R.evaluated_locals(ob)
        for name, q in keyed[f].items():
            assert _angle(locs[name], q) < 1e-3, (f, name)
        assert (R.world_tail(ob, "b05") - R.world_location(t)).length < 1e-4, f


def test_bake_without_the_references_would_not_keep_the_keys(addon):
    """The check above is not vacuous: the same sequence solved without references (the rest
    pose as reference) leaves the keyed pose."""
    import sinew

    ob, t, keyed = _keyed_chain()
    job = addon.pipeline.BakeJob(bpy.context, ob, FRAMES[0], FRAMES[-1], addon.pipeline.Settings(tolerance=1e-5))
    r = job.run()
    p = job.problem
    rig = p.make_rig(p.rest_for(ob.pose.bones, ob.pose.bones))
    targets = np.zeros((len(FRAMES), 1, 3))
    for k, f in enumerate(FRAMES):
        bpy.context.scene.frame_set(f)
        targets[k, 0] = tuple(R.world_location(t))
    goals = p.engine_goals(targets[0], np.tile([1.0, 0, 0, 0], (1, 1)), np.zeros((1, 3)))
    plain = sinew.Solver(tolerance=1e-5).solve_sequence(rig, goals, targets, pose=r.references[0])
    with_refs = sinew.Solver(tolerance=1e-5).solve_sequence(rig, goals, targets, pose=r.references[0],
                                                            references=r.references)
    np.testing.assert_allclose(with_refs.rotations, r.rotations, atol=1e-9)
    idx = {n: k for k, n in enumerate(r.names)}
    drift = max(_angle(plain.rotations[-1, idx[n]], q) for n, q in keyed[FRAMES[-1]].items())
    assert drift > 1e-2, drift


def _posed_chain_with_target(n=6, orientation=False):
    ob = R.make_chain(n, roll_step=0.3)
    for i, pb in enumerate(ob.pose.bones):
        pb.rotation_mode = 'QUATERNION'
        pb.rotation_quaternion = _bend(i, 3.0)
    bpy.context.view_layer.update()
    eff = f"b{n - 1:02d}"
    t = R.add_empty("T", location=tuple(R.world_tail(ob, eff)))
    if orientation:
        e = ob.evaluated_get(R.depsgraph())
        t.rotation_mode = 'QUATERNION'
        t.rotation_quaternion = (e.matrix_world @ e.pose.bones[eff].matrix).to_quaternion()
    R.set_goal(ob, eff, t, use_orientation=orientation)
    R.activate(ob)
    bpy.context.view_layer.update()
    return ob, t


@pytest.mark.parametrize("orientation", [False, True])
def test_ik_solve_with_the_target_on_the_effector_leaves_the_pose_as_it_is(addon, capfd, orientation):
    ob, t = _posed_chain_with_target(orientation=orientation)
    before = {pb.name: Quaternion(pb.rotation_quaternion) for pb in ob.pose.bones}
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    assert "Sinew: 1 goal reached" in out
    assert "b05: " in out
    assert ("orientation error" in out) == orientation, out
    for pb in ob.pose.bones:
        assert _angle(pb.rotation_quaternion, before[pb.name]) < 1e-3, pb.name
    assert (R.world_tail(ob, "b05") - R.world_location(t)).length < 1e-4


def test_ik_solve_reports_the_orientation_error_per_goal(addon):
    ob, t = _posed_chain_with_target(orientation=True)
    # Turn the target's orientation away from anything a one-bone chain can reach at that point.
    t.rotation_quaternion = Quaternion((1, 0, 0), math.pi) @ t.rotation_quaternion
    ob.pose.bones["b05"].sinew.chain_length = 1
    bpy.context.view_layer.update()
    res = addon.pipeline.solve_pose(bpy.context, ob, addon.pipeline.Settings(), key=False)
    assert res.orientation_residuals.shape == (1,)
    e = ob.evaluated_get(R.depsgraph())
    got = (e.matrix_world @ e.pose.bones["b05"].matrix).to_quaternion()
    want = t.matrix_world.to_quaternion()
    assert res.orientation_residuals[0] == pytest.approx(_angle(got, want), abs=1e-4)
    assert res.orientation_residuals[0] > 0.1
    assert not res.reached
    report = res.goal_report()
    assert report.startswith("b05: ") and f"orientation error {math.degrees(res.orientation_residuals[0]):.3g}°" in report
