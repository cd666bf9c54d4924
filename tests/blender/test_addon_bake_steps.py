"""Bake IK to Keyframes: what runs in the chunked, cancellable part, and what it holds in memory.

- A driven IK influence (a driver on the constraint, which only stepping the frames reads) is
  read in steps with progress (``pipeline.bake_jobs_steps``, which the modal operator drives),
  and closing those steps early (Esc) leaves the frame, the pose and the animation as they were.
- A driven constraint that no IK chain involves is not stepped at all.
- A pose above the chains that never changes bakes the same keys whether the frames are stepped
  or read from the F-curves (one rest held for all frames).
- An absurd range (Blender's largest End Frame) is refused up front, with the estimate and the
  range, and changes nothing.
- The modal operator stops driving the bake's steps at their last one (``done``) and closes them
  then or lets Python free them: that undoes nothing."""

import bpy
import numpy as np
import pytest

import sinew_rigs as R
from test_addon_influence_animated import _rig


def _jobs_steps(addon, ob, start, end):
    P = addon.pipeline
    return P.bake_jobs_steps(bpy.context, [ob], start, end, P.Settings(), chunk=10)


def _run(gen):
    yielded = []
    while True:
        try:
            yielded.append(next(gen))
        except StopIteration as done:
            return yielded, done.value


def test_a_driven_influence_is_read_in_steps_with_progress(addon):
    """Over 60 frames, reading the driven influence yields progress (rising, within [0, 1]) every
    10 frames before the jobs are made, and the job bakes as the blocking path does."""
    ob, _ik = _rig("driven", "1to0", False)
    bpy.context.scene.frame_set(5)
    yielded, (jobs, skipped) = _run(_jobs_steps(addon, ob, 1, 60))
    assert len(yielded) >= 5 and yielded == sorted(yielded) and 0.0 < yielded[0] and yielded[-1] <= 1.0
    assert len(jobs) == 1 and not skipped
    assert bpy.context.scene.frame_current == 5
    blocking = addon.pipeline.BakeJob(bpy.context, ob, 1, 60, addon.pipeline.Settings())
    stepped = jobs[0].run()
    assert stepped.read_seconds > 0.0 and stepped.seconds >= stepped.read_seconds
    assert np.array_equal(blocking.problem.influences.values, jobs[0].problem.influences.values)


def test_closing_the_influence_steps_early_leaves_the_scene_as_it_was(addon):
    """Esc while the influence is read (the generator closed after its first step): the frame,
    the pose and the action are as before; no key, no new action."""
    ob, ik = _rig("driven", "1to0", False)
    scene = bpy.context.scene
    scene.frame_set(7)
    action = ob.animation_data.action
    n_actions = len(bpy.data.actions)
    pose = {pb.name: tuple(pb.rotation_quaternion) for pb in ob.pose.bones}
    gen = _jobs_steps(addon, ob, 1, 60)
    assert 0.0 < next(gen) < 1.0
    assert scene.frame_current != 7  # it was stepping
    gen.close()
    assert scene.frame_current == 7
    assert {pb.name: tuple(pb.rotation_quaternion) for pb in ob.pose.bones} == pose
    assert ob.animation_data.action == action and len(bpy.data.actions) == n_actions
    assert not ik.mute


def test_a_driven_constraint_outside_every_ik_chain_steps_no_frame(addon):
    """A driven Copy Location influence on a bone no IK chain reaches: nothing to read frame by
    frame, so the steps yield nothing before the jobs are made."""
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_chain(4, 0.5, name="Rig")
    ik = ob.pose.bones["b03"].constraints.new('IK')
    ik.target, ik.chain_count = R.add_empty("T", (0.6, 0.1, 1.4)), 2
    c = ob.pose.bones["b00"].constraints.new('COPY_LOCATION')
    c.target = R.add_empty("Other")
    d = c.driver_add("influence").driver
    d.type = 'SCRIPTED'
    d.expression = "0.5"
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    yielded, (jobs, _skipped) = _run(_jobs_steps(addon, ob, 1, 60))
    assert yielded == [] and len(jobs) == 1


def test_a_static_pose_above_the_chains_bakes_the_same_keys_stepped_or_not(addon):
    """Nothing above the chain animated (one rest for every frame): stepping the frames and
    reading the F-curves give the same rotations, exactly."""
    results = {}
    for sampling in ("auto", "frames"):
        ob, _ik = _rig("keyed", "1to0", False, fk_above=False)
        results[sampling] = addon.pipeline.BakeJob(bpy.context, ob, 1, 10, addon.pipeline.Settings(),
                                                   sampling=sampling).run()
    assert results["auto"].sampling == "fcurves" and results["frames"].sampling == "frames"
    assert np.abs(results["auto"].rotations - results["frames"].rotations).max() < 1e-12


def test_an_absurd_range_is_refused_up_front(addon):
    """Blender's largest End Frame on a 40-bone chain: refused at once with the frame count and
    the memory estimate; no action, nothing keyed, the frame unchanged."""
    ob = R.make_chain(40, 0.1, name="Long")
    t = R.add_empty("T", (0.5, 0.0, 3.0))
    R.set_goal(ob, "b39", t, chain_length=0)
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    bpy.context.scene.frame_set(3)
    with pytest.raises(RuntimeError, match=r"Baking frames 1 to 1048574 \(1048574 frames\) would need about "
                                           r"[0-9.]+ GB of memory.*nothing was changed"):
        bpy.ops.sinew.bake(frame_start=1, frame_end=1048574)
    assert ob.animation_data is None or ob.animation_data.action is None
    assert bpy.context.scene.frame_current == 3
    est = addon.pipeline.bake_size_estimate(ob, 1, 1048574)
    assert est <= addon.pipeline.MAX_BAKE_BYTES  # (before the read: a lower bound only)


@pytest.mark.parametrize("how", ["closed", "freed"])
def test_a_finished_bake_stays_when_its_steps_are_closed_at_the_last_one(addon, how):
    """As the modal operator drives it: the batch's steps (through ``rescaled``, as the operator
    wraps them) are run until the batch is ``done``, then closed, or dropped for Python to free,
    without running to their end. The bake stays: its action, its keys, the muted constraint.
    (Before, closing at the last step ran the error path and took the whole bake back.)"""
    import gc

    P = addon.pipeline
    ob = R.make_chain(4, 0.5, name="Rig")
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.5, 0.2, 1.4), 20: (-0.3, 0.4, 1.5)})
    ik = ob.pose.bones["b03"].constraints.new('IK')
    ik.target, ik.chain_count = t, 3
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    jobs, _skipped = P.make_bake_jobs(bpy.context, [ob], 1, 20, P.Settings())
    batch = P.BakeBatch(jobs)
    steps = P.rescaled(batch.steps(), 0.3, 0.7)
    for progress in steps:
        if batch.done:
            break
    assert batch.done and progress == 1.0
    action = ob.animation_data.action
    assert action.name == "Rig_Sinew" and ik.mute
    if how == "closed":
        steps.close()
    else:
        del steps
        gc.collect()
    assert ob.animation_data.action == action and action.name in bpy.data.actions and ik.mute
    for f in (1, 10, 20):
        bpy.context.scene.frame_set(f)
        assert (R.world_tail(ob, "b03") - R.world_location(t)).length < 1e-3, f
