"""Bone relations Sinew cannot model are refused; what Blender evaluates after writing is what is
reported (never "reached" when Blender's pose misses); iTaSC rigs are said to be solved by Sinew;
bad input gets a clear report or a correct result."""

import math
import re
import time

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector

import sinew_rigs as R

TOL = 1e-3


def _unconnect(ob, bone):
    bpy.ops.object.mode_set(mode='EDIT')
    ob.data.edit_bones[bone].use_connect = False
    bpy.ops.object.mode_set(mode='OBJECT')


# -- Item 5: relations ----------------------------------------------------------------------


def test_local_location_off_with_a_pose_location_is_refused():
    ob = R.make_chain(4, roll_step=0.4)
    _unconnect(ob, "b02")
    ob.data.bones["b02"].use_local_location = False
    ob.pose.bones["b02"].location = (0.05, 0.1, 0.0)
    t = R.add_empty("T", (0.5, 0.2, 1.4))
    R.set_goal(ob, "b03", t)
    R.activate(ob)
    snap = R.pose_snapshot(ob)
    for op in (bpy.ops.sinew.solve, bpy.ops.sinew.bake):
        with pytest.raises(RuntimeError, match=r'Bone "b02": Local Location is off .* pose location'):
            op()
        assert R.pose_snapshot(ob) == snap and ob.animation_data is None
    # Without a pose location the setting does not matter: solved, and Blender's pose reaches.
    ob.pose.bones["b02"].location = (0, 0, 0)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "b03") - t.location).length < TOL


def test_inherit_rotation_off_inside_a_chain_is_refused():
    ob = R.make_chain(4, roll_step=0.4)
    ob.data.bones["b02"].use_inherit_rotation = False
    t = R.add_empty("T", (0.5, 0.2, 1.4))
    R.set_goal(ob, "b03", t)  # moves b00..b03: b02's parent moves
    R.activate(ob)
    with pytest.raises(RuntimeError, match=r'Bone "b02": Inherit Rotation is off .*"b02" is its top bone'):
        bpy.ops.sinew.solve()
    assert ob.animation_data is None


def test_inherit_rotation_off_on_a_chains_top_bone_is_solved_exactly(capfd):
    """b02 is the top of the chain (chain length 2) and does not inherit its posed parents'
    rotation: Blender's hinge, modelled in reading the rig."""
    ob = R.make_chain(4, roll_step=0.4)
    ob.data.bones["b02"].use_inherit_rotation = False
    ob.pose.bones["b00"].rotation_quaternion = Quaternion((1, 0, 0.3), 0.5)
    ob.pose.bones["b01"].rotation_quaternion = Quaternion((0, 1, 1), 0.4)
    bpy.context.view_layer.update()
    head = R.world_head(ob, "b02")
    t = R.add_empty("T", head + Vector((0.45, 0.3, 0.5)))
    R.set_goal(ob, "b03", t, chain_length=2)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert "Sinew: 1 goal reached" in capfd.readouterr().out
    assert (R.world_tail(ob, "b03") - t.location).length < TOL


def test_a_constraint_acting_on_top_is_reported_as_the_real_miss(capfd):
    """Sinew's solution reaches, but a Limit Rotation on a chain bone changes what Blender shows:
    the report gives Blender's miss, never "reached"."""
    ob = R.make_chain(4, roll_step=0.2)
    c = ob.pose.bones["b01"].constraints.new('LIMIT_ROTATION')
    c.use_limit_x = c.use_limit_z = True  # b01 may not swing at all
    t = R.add_empty("T", (0.6, 0.2, 1.3))
    R.set_goal(ob, "b03", t)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    miss = (R.world_tail(ob, "b03") - t.location).length
    assert miss > 0.01
    assert "goal reached" not in out and "goals reached" not in out
    assert f'in Blender\'s evaluated pose bone "b03" misses its target by {miss:.4g}, although' \
        in out.replace(f"{miss:.6g}", f"{miss:.4g}")
    assert "Sinew's solution comes closer" in out
    # It points at the warning that names the cause.
    assert 'Warning: Bone "b01" has constraints besides IK' in out and "rotations (see the warnings)" in out
    # The bake says so too, frame by frame.
    R.key_locations(t, {1: (0.6, 0.2, 1.3), 10: (0.4, -0.3, 1.4)})
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    out = capfd.readouterr().out
    assert "Blender's evaluated pose misses targets at 10 of the 10 checked frames" in out
    assert 'bone "b03"' in out
    assert 'Warning: Bone "b01" has constraints besides IK' in out and "baked keys (see the warnings)" in out
    # The bake's own summary names the goal as missed there, never "reached".
    assert "reached on every frame" not in out, out
    assert ('bone "b03" misses in Blender\'s evaluated pose by up to ' in out
            and "(10 of the 10 checked frames), although Sinew's solution reaches it" in out), out


def test_a_miss_with_no_warning_behind_it_points_at_no_warnings(capfd):
    """The armature left in Rest Position: Blender shows the rest pose, so Solve and Bake report
    Blender's miss; the reader has nothing to warn about, and the reports do not send the user to
    warnings that are not there."""
    ob = R.make_chain(4)
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.5, 0.0, 1.5), 10: (0.8, 0.3, 1.2)})
    R.set_goal(ob, "b03", t, chain_length=3)
    R.activate(ob)
    ob.data.pose_position = 'REST'
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    out = capfd.readouterr().out
    assert "Warning: Sinew: in Blender's evaluated pose bone \"b03\" misses its target" in out
    assert "Blender's evaluated pose misses targets at 10 of the 10 checked frames" in out
    assert "see the warnings" not in out
    assert [ln for ln in out.splitlines() if ln.startswith("Warning:")] == [
        ln for ln in out.splitlines() if ln.startswith("Warning: Sinew")]  # no warning but Sinew's reports


@pytest.mark.parametrize("mode, prop, index, channel", [('QUATERNION', "rotation_quaternion", 1, "X"),
                                                        ('ZXY', "rotation_euler", 2, "Z")])
def test_a_chain_bone_whose_rotation_a_driver_sets_is_refused(mode, prop, index, channel):
    """A driver on a rotation channel of a bone the goals move would override the solved rotation
    (and Sinew never keys a driven channel): Solve IK and the bake refuse it, naming the bone and
    the channel, and change nothing. Muted, the driver does not act: the rig is solved."""
    scene = bpy.context.scene
    ob = R.make_chain(4)
    t = R.add_empty("T", (0.5, 0.2, 1.5))
    R.set_goal(ob, "b03", t, chain_length=3)
    pb = ob.pose.bones["b02"]
    pb.rotation_mode = mode
    fc = pb.driver_add(prop, index)
    fc.driver.type, fc.driver.expression = 'SCRIPTED', "0.3"
    R.activate(ob)
    scene.frame_set(3)
    bpy.context.view_layer.update()
    snap = R.pose_snapshot(ob)
    for run in (lambda: bpy.ops.sinew.solve(use_keyframes=True),
                lambda: bpy.ops.sinew.bake(frame_start=1, frame_end=5)):
        with pytest.raises(RuntimeError, match=rf'Bone "b02": a driver sets its rotation \({prop} {channel}\).*'
                                               r'remove or mute the driver, or shorten the chain'):
            run()
        assert ob.animation_data.action is None and R.pose_snapshot(ob) == snap and scene.frame_current == 3
    fc.mute = True
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "b03") - t.location).length < TOL


# -- Other constraints on the chain of a Blender IK constraint -------------------------------


def _copy_location_on_the_root(pbs, aux):
    c = pbs["b00"].constraints.new('COPY_LOCATION')
    c.target = aux
    return "b00", c


def _child_of_on_the_root(pbs, aux):
    c = pbs["b00"].constraints.new('CHILD_OF')
    c.target = aux
    return "b00", c


def _damped_track_in_the_middle(pbs, aux):
    c = pbs["b02"].constraints.new('DAMPED_TRACK')
    c.target = aux
    return "b02", c


def _copy_rotation_in_the_middle(pbs, aux):
    aux.rotation_euler = (0.5, 0.0, 0.0)
    c = pbs["b02"].constraints.new('COPY_ROTATION')
    c.target = aux
    return "b02", c


def _limit_rotation_in_the_middle(pbs, aux):
    c = pbs["b02"].constraints.new('LIMIT_ROTATION')
    c.use_limit_x = c.use_limit_z = True
    c.min_x, c.max_x, c.min_z, c.max_z = -0.1, 0.1, -0.1, 0.1
    c.owner_space = 'LOCAL'
    return "b02", c


def _limit_rotation_on_every_axis(pbs, min_degrees):
    """A Limit Rotation on the elbow (b02), every axis limited to [min_degrees, 180°]."""
    c = pbs["b02"].constraints.new('LIMIT_ROTATION')
    c.use_limit_x = c.use_limit_y = c.use_limit_z = True
    c.min_x = c.min_y = c.min_z = math.radians(min_degrees)
    c.max_x = c.max_y = c.max_z = math.radians(180.0)
    c.owner_space = 'LOCAL'
    return "b02", c


def _limit_rotation_short_of_a_full_turn(pbs, aux):
    """A Limit Rotation of ±179° can bind (an angle past 179° is clamped): still refused."""
    return _limit_rotation_on_every_axis(pbs, -179.0)


def _stretch_to_in_the_middle(pbs, aux):
    c = pbs["b02"].constraints.new('STRETCH_TO')
    c.target = aux
    return "b02", c


def _ik_chain_with_a_constraint(add_constraint):
    """A 4-bone chain whose Blender IK constraint (on b03, chain to the root) follows an animated
    target, and ``add_constraint`` on one of its bones: (armature, target, IK constraint, bone,
    the other constraint)."""
    ob = R.make_chain(4, name="Arm")
    t = R.add_empty("T", (0.4, 0.2, 1.3))
    R.key_locations(t, {1: (0.4, 0.2, 1.3), 10: (0.6, -0.2, 1.1)})
    aux = R.add_empty("Aux", (1.0, 1.0, 1.0))
    bone, other = add_constraint(ob.pose.bones, aux)
    ik = ob.pose.bones["b03"].constraints.new('IK')
    ik.target, ik.chain_count = t, 0
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    return ob, t, ik, bone, other


def _blender_reaches(ob, t, frames=(1, 5, 10)):
    for f in frames:
        bpy.context.scene.frame_set(f)
        assert (R.world_tail(ob, "b03") - R.world_location(t)).length < 1e-3, f
    bpy.context.scene.frame_set(1)


@pytest.mark.parametrize("add_constraint", [_copy_location_on_the_root, _child_of_on_the_root,
                                            _damped_track_in_the_middle, _copy_rotation_in_the_middle,
                                            _limit_rotation_in_the_middle, _limit_rotation_short_of_a_full_turn,
                                            _stretch_to_in_the_middle])
def test_another_constraint_on_a_blender_ik_chain_is_refused_and_nothing_changes(add_constraint, addon):
    """Blender's IK solves its chain after the chain bones' other constraints and reaches; Sinew's
    keys would have them act on top and miss (by 0.7 to 1.7 here), so Solve IK and the bake refuse
    the rig, naming the bone, the constraint and what to do, and change nothing. Muted, the
    constraint no longer stands in the way."""
    ob, t, ik, bone, other = _ik_chain_with_a_constraint(add_constraint)
    _blender_reaches(ob, t)  # the rig works with Blender's IK
    snap = R.pose_snapshot(ob)
    expected = (rf'Bone "{bone}" is in the chain of IK constraint "IK" \(bone "b03"\) and has constraint '
                rf'"{other.name}" in effect\. .* Mute "{other.name}" or set its influence to 0, or shorten the IK '
                rf'constraint\'s Chain Length so that "{bone}" is not in the chain; nothing was changed')
    for op, kw in ((bpy.ops.sinew.solve, {"use_keyframes": True}), (bpy.ops.sinew.bake, {"frame_start": 1,
                                                                                         "frame_end": 10})):
        with pytest.raises(RuntimeError, match=expected):
            op(**kw)
        assert R.pose_snapshot(ob) == snap and ob.animation_data is None
        assert not ik.mute and ik.influence == 1.0 and addon.keys.muted_records(ob) == []
        _blender_reaches(ob, t)
    other.mute = True
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    assert ik.mute
    _blender_reaches(ob, t)


def _limit_rotation_full_turn(pbs, aux):
    """QA: a Limit Rotation of ±180° on every axis on the elbow, a visual FK limit that never binds."""
    return _limit_rotation_on_every_axis(pbs, -180.0)


def _limit_rotation_one_full_axis(pbs, aux):
    c = pbs["b01"].constraints.new('LIMIT_ROTATION')
    c.use_limit_y = True
    c.min_y, c.max_y = -4.0, 4.0
    c.owner_space = 'WORLD'
    return "b01", c


def _limit_rotation_no_axis(pbs, aux):
    c = pbs["b00"].constraints.new('LIMIT_ROTATION')
    c.min_x = c.max_x = 0.0  # bounds that would bind, were the axis enabled
    c.owner_space = 'WORLD'
    return "b00", c


def _limit_location_no_axis(pbs, aux):
    c = pbs["b02"].constraints.new('LIMIT_LOCATION')
    c.min_x = c.max_x = 5.0
    c.owner_space = 'WORLD'
    return "b02", c


@pytest.mark.parametrize("add_constraint", [_limit_rotation_full_turn, _limit_rotation_one_full_axis,
                                            _limit_rotation_no_axis, _limit_location_no_axis])
def test_a_limit_that_cannot_bind_on_a_blender_ik_chain_is_let_through(add_constraint, capfd):
    """A Limit Rotation whose every enabled axis allows the full turn, or a Limit Rotation or Limit
    Location with no axis enabled, cannot change the pose: Solve IK and the bake take the rig, say
    nothing about it, and Blender's evaluated pose (the limit acting on the keys) reaches."""
    ob, t, ik, bone, other = _ik_chain_with_a_constraint(add_constraint)
    scene = bpy.context.scene
    scene.frame_set(5)
    assert bpy.ops.sinew.solve(use_keyframes=True) == {'FINISHED'}
    assert (R.world_tail(ob, "b03") - R.world_location(t)).length < 1e-3
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    assert ik.mute and not other.mute
    out = capfd.readouterr().out
    assert "besides IK" not in out and f'"{other.name}"' not in out
    _blender_reaches(ob, t)


def test_a_constraint_that_only_scales_a_blender_ik_chain_bone_is_let_through(capfd):
    """Scale-only constraints (Rigify's paws put a Copy Scale on an IK chain's lower leg) change a
    bone's length, not where it points: baked, with the warning Sinew gives for any constraint
    acting on top, and Blender's pose reaches while the scale they copy is 1."""
    def copy_scale_in_the_middle(pbs, aux):
        c = pbs["b02"].constraints.new('COPY_SCALE')
        c.target, c.influence = aux, 0.75
        return "b02", c

    ob, t, ik, bone, other = _ik_chain_with_a_constraint(copy_scale_in_the_middle)
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=10) == {'FINISHED'}
    assert 'Bone "b02" has constraints besides IK; they act on top of the Sinew pose' in capfd.readouterr().out
    assert ik.mute and not other.mute
    _blender_reaches(ob, t)


def test_rigify_paw_with_a_copy_scale_on_its_ik_chain_bakes():
    """Rigify's quadruped rear legs (limbs.paw) carry a Copy Scale on a bone of an IK chain: the
    rig still bakes, its IK constraints switched off and the Copy Scale left as it is."""
    bpy.ops.object.armature_basic_quadruped_metarig_add()
    rig = R.generate_rigify(bpy.context.active_object)
    copy_scale = rig.pose.bones["MCH-shin_ik3.L"].constraints["Copy Scale"]
    assert any(c.type == 'IK' for c in rig.pose.bones["MCH-foot_ik3.L"].constraints)
    iks = [c for pb in rig.pose.bones for c in pb.constraints if c.type == 'IK' and not c.mute and c.influence > 0]
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=3) == {'FINISHED'}
    assert all(c.mute or c.influence == 0.0 for c in iks)  # (muted, or where Mute is driven, no influence)
    assert not copy_scale.mute and copy_scale.influence == pytest.approx(0.75)


def test_bake_reports_blenders_pose_checked_when_all_is_well(capfd, addon):
    ob = R.make_chain(4)
    t = R.add_empty("T")
    R.key_locations(t, {1: (0.5, 0.2, 1.4), 60: (-0.3, 0.4, 1.5)})
    R.set_goal(ob, "b03", t)
    R.activate(ob)
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=60) == {'FINISHED'}
    out = capfd.readouterr().out
    assert "Blender's evaluated pose checked at 25 frames" in out and "misses targets" not in out


# -- Item 6: iTaSC ----------------------------------------------------------------------------


def test_itasc_rig_is_solved_by_sinew_and_the_report_says_so(capfd):
    ob = R.make_chain(4, roll_step=0.2)
    ob.pose.ik_solver = 'ITASC'
    ob.pose.ik_param.iterations = 7
    t = R.add_empty("T", (0.5, 0.2, 1.4))
    con = ob.pose.bones["b03"].constraints.new('IK')
    con.target, con.chain_count = t, 3
    R.activate(ob)
    assert bpy.ops.sinew.solve(max_iterations=50) == {'FINISHED'}
    out = capfd.readouterr().out
    assert ('Armature "Chain" is set to the iTaSC IK solver; Sinew solved it with its own solver '
            "(FABRIK, 50 iterations, tolerance 0.0001, root pinned)") in out
    # What it names as unused is what Sinew does not read: the constraint's Weight (iTaSC's
    # position weight) it does read.
    assert ("taking each IK constraint's target, pole, chain length, Use Tail, Stretch, Position weight, Rotation (on "
            "or off) and influence, and the bones' IK limits, stiffness and IK Stretch from the rig. Not used: iTaSC's "
            "own settings (mode Animation, solver SDLS, precision 0.005, 7 iterations and the rest of its panel), the "
            "constraints' Axis Reference, Lock X/Y/Z (under Position and Rotation) and Rotation weight (Orientation "
            "Weight), and the bones' Control Rotation and IK Rotation Weight") in out
    assert "per-constraint weights" not in out
    con.mute = True
    assert (R.world_tail(ob, "b03") - t.location).length < TOL  # Sinew's keyed pose alone reaches
    con.mute = False
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=3) == {'FINISHED'}
    assert "is set to the iTaSC IK solver" in capfd.readouterr().out


def test_itasc_position_weight_is_used_as_the_note_says(capfd):
    """Two goals that cannot both be met share the miss by their constraints' Weight (iTaSC's
    position weight, which the note lists among what Sinew takes): lowering one's Weight moves
    the miss onto it."""
    misses = {}
    for weight in (1.0, 0.05):
        bpy.ops.wm.read_homefile(use_empty=True)
        ob = R.make_ybranch()
        ob.pose.ik_solver = 'ITASC'
        tl, tr = R.add_empty("TL", (1.8, 0.0, 0.6)), R.add_empty("TR", (-0.4, 0.9, 2.6))
        cl = ob.pose.bones["L2"].constraints.new('IK')
        cl.target, cl.chain_count, cl.weight = tl, 6, weight
        cr = ob.pose.bones["R2"].constraints.new('IK')
        cr.target, cr.chain_count = tr, 6
        R.activate(ob)
        assert bpy.ops.sinew.solve() == {'FINISHED'}
        assert "Position weight" in capfd.readouterr().out
        cl.mute = cr.mute = True
        misses[weight] = (R.world_tail(ob, "L2") - tl.location).length
    assert misses[0.05] > misses[1.0] + 0.05, misses


def test_standard_ik_rotation_weight_is_named_as_not_used(capfd):
    """Blender's Standard IK weighs an IK constraint's rotation by its Rotation weight
    (orient_weight); Sinew has one weight per goal: a Rotation weight other than 1 is named as not
    used (and not when Rotation is off, where Blender does not use it either)."""
    ob = R.make_chain(4)
    con = ob.pose.bones["b03"].constraints.new('IK')
    con.target, con.chain_count = R.add_empty("T", (0.5, 0.2, 1.4)), 3
    con.orient_weight = 0.3
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert "Rotation weight" not in capfd.readouterr().out  # Rotation off
    con.use_rotation = True
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert ('Bone "b03": IK constraint "IK": its Rotation weight (0.3) is not used: a Sinew goal has one weight, '
            "the constraint's Weight, for its position and rotation alike") in capfd.readouterr().out


def test_a_huge_sinew_goal_weight_is_clamped_where_it_is_typed():
    """A Sinew goal's Weight has a hard maximum (1e6) well inside the engine's range (1e12), so a
    value typed or set from Python beyond it is clamped by Blender instead of refused later by the
    engine under the goal's index (a QA pass's note)."""
    ob = R.make_chain(4)
    t = R.add_empty("T", (0.5, 0.2, 1.4))
    s = R.set_goal(ob, "b03", t, chain_length=3, weight=1e20)
    assert s.weight == 1e6
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "b03") - t.location).length < TOL


def test_itasc_distance_constraint_is_refused():
    ob = R.make_chain(3)
    ob.pose.ik_solver = 'ITASC'
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.target = R.add_empty("T", (0.5, 0.2, 1.0))
    con.ik_type = 'DISTANCE'
    R.activate(ob)
    with pytest.raises(RuntimeError, match=r'Bone "b02": IK constraint "IK" is an iTaSC Distance constraint'):
        bpy.ops.sinew.solve()


# -- Item 7: bad input ------------------------------------------------------------------------


def test_target_deleted_from_the_scene_is_reported():
    ob = R.make_chain(3)
    t = R.add_empty("T", (0.5, 0.0, 1.2))
    R.set_goal(ob, "b02", t)
    R.activate(t)
    assert bpy.ops.object.delete() == {'FINISHED'}
    assert ob.pose.bones["b02"].sinew.target is not None  # Sinew's pointer keeps the object alive
    R.activate(ob)
    for op in (bpy.ops.sinew.solve, bpy.ops.sinew.bake):
        with pytest.raises(RuntimeError, match=r'Bone "b02": Sinew goal target "T" was deleted from the scene'):
            op()
    assert ob.animation_data is None


def test_nan_targets():
    """A driver that returns NaN: Blender refuses the value (the channel keeps a finite one), and
    Sinew solves to the target where Blender shows it. A NaN that does reach the target (a keyed
    NaN) is reported with the bone, the target and the frame."""
    scene = bpy.context.scene
    ob = R.make_chain(3)
    t = R.add_empty("T", (0.4, 0.1, 1.2))
    fc = t.driver_add("location", 0)
    fc.driver.type, fc.driver.expression = 'SCRIPTED', "float('nan')"
    R.set_goal(ob, "b02", t)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert all(math.isfinite(v) for v in R.world_location(t))
    assert (R.world_tail(ob, "b02") - R.world_location(t)).length < TOL
    t.driver_remove("location", 0)
    u = R.add_empty("U")
    R.key_locations(u, {1: (0.4, 0.1, 1.2), 5: (0.3, 0.2, 1.1), 9: (0.2, 0.0, 1.3)})
    kp = R.fcurve(u, "location", 1).keyframe_points
    kp[1].co.y = float("nan")  # frame 5's Y
    ob.pose.bones["b02"].sinew.target = u
    scene.frame_set(5)
    with pytest.raises(RuntimeError, match=r'Bone "b02": the target "U" has a non-finite position or rotation '
                                           r"\(NaN or infinity\) at frame 5"):
        bpy.ops.sinew.solve()
    scene.frame_set(1)
    snap = R.pose_snapshot(ob)
    with pytest.raises(RuntimeError, match=r'the target "U" has a non-finite .* at frame [2-8]'):
        bpy.ops.sinew.bake(frame_start=1, frame_end=9)
    assert R.pose_snapshot(ob) == snap and scene.frame_current == 1
    assert not any(a.name.endswith("_Sinew") for a in bpy.data.actions)


def _nan_constraint_pole_angle(ob, con):
    con.pole_angle = float("nan")


def _nan_constraint_weight(ob, con):
    con.weight = float("nan")


def _nan_sinew_pole_angle(ob, con):
    con.mute = True
    R.set_goal(ob, "b02", con.target, chain_length=3, pole_target=con.pole_target, pole_angle=float("nan"))


def _nan_sinew_weight(ob, con):
    con.mute = True
    R.set_goal(ob, "b02", con.target, chain_length=3, weight=float("nan"))


def _nan_sinew_stiffness(ob, con):
    ob.pose.bones["b01"].sinew.stiffness = float("nan")


def _nan_ik_stretch(ob, con):
    con.use_stretch = True
    ob.pose.bones["b01"].ik_stretch = float("nan")


@pytest.mark.parametrize("operator", ["solve", "bake", "compare_methods", "export_problem"])
@pytest.mark.parametrize("set_nan, error", [
    (_nan_constraint_pole_angle, r'Bone "b02": IK constraint "IK" has Pole Angle NaN, which is not a number'),
    (_nan_constraint_weight, r'Bone "b02": IK constraint "IK" has Weight NaN, which is not a number'),
    (_nan_sinew_pole_angle, r'Bone "b02": the Sinew goal has Pole Angle NaN, which is not a number'),
    (_nan_sinew_weight, r'Bone "b02": the Sinew goal has Weight NaN, which is not a number'),
    (_nan_sinew_stiffness, r'Bone "b01": bad limit \(Sinew stiffness\): .*stiffness = NaN is outside'),
    (_nan_ik_stretch, r'Bone "b01": bad limit \(IK Stretch\): .*stretch = NaN is outside'),
], ids=["constraint-pole-angle", "constraint-weight", "sinew-pole-angle", "sinew-weight", "sinew-stiffness",
        "ik-stretch"])
def test_a_nan_goal_or_bone_setting_is_refused_by_name_and_nothing_changes(set_nan, error, operator, tmp_path):
    """A NaN set through Python (Blender's fields clamp what is typed, not NaN) in a goal's Weight
    or Pole Angle, a Sinew stiffness or an IK Stretch is refused when the rig is read, naming the
    bone, the constraint or setting and the value, by every operator alike, and nothing changes
    (QA: Solve said "goal 0: pole angle is not finite", Export wrote a bare NaN, Compare listed
    every method as failed, and a NaN stiffness or stretch was solved as 0)."""
    ob = R.make_chain(3, length=0.4)
    t, pole = R.add_empty("T", (0.5, 0.2, 0.8)), R.add_empty("P", (0.0, -1.0, 0.4))
    con = ob.pose.bones["b02"].constraints.new('IK')
    con.name, con.target, con.chain_count, con.pole_target = "IK", t, 3, pole
    set_nan(ob, con)
    R.activate(ob)
    snap, n_actions, muted = R.pose_snapshot(ob), len(bpy.data.actions), con.mute
    path = tmp_path / "problem.json"
    kw = {"solve": {}, "bake": {"frame_start": 1, "frame_end": 3}, "compare_methods": {},
          "export_problem": {"filepath": str(path)}}[operator]
    with pytest.raises(RuntimeError, match=error):
        getattr(bpy.ops.sinew, operator)(**kw)
    assert R.pose_snapshot(ob) == snap and ob.animation_data is None and len(bpy.data.actions) == n_actions
    assert con.mute == muted and not path.exists()


def test_zero_length_bone_in_a_chain():
    """Blender keeps a bone whose head and tail meet as a tiny one (about 2e-6): it is solved."""
    ob = R.make_chain(4)
    bpy.ops.object.mode_set(mode='EDIT')
    eb = ob.data.edit_bones["b02"]
    eb.tail = eb.head
    bpy.ops.object.mode_set(mode='OBJECT')
    if "b02" not in ob.data.bones:
        pytest.skip(f"Blender {bpy.app.version_string} deletes a zero-length bone on leaving edit mode")
    assert ob.data.bones["b02"].length < 1e-5
    t = R.add_empty("T", (0.4, 0.2, 1.2))
    R.set_goal(ob, "b03", t)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "b03") - t.location).length < TOL


def test_500_bone_rig_with_24_goals(capfd):
    ob = R._new_armature("Big")
    bpy.ops.object.mode_set(mode='EDIT')
    eds = ob.data.edit_bones
    root = eds.new("root")
    root.head, root.tail = (0, 0, 0), (0, 0, 0.2)
    tips, n = [], 1
    for c in range(24):
        a = 2 * math.pi * c / 24
        d = Vector((math.cos(a), math.sin(a), 0.3)).normalized() * 0.1
        p, head = root, Vector(root.tail)
        for i in range(20):
            eb = eds.new(f"c{c:02d}_{i:02d}")
            eb.head, eb.tail, eb.parent, eb.use_connect = head, head + d, p, True
            p, head, n = eb, head + d, n + 1
        tips.append(p.name)
    for i in range(500 - n):  # bones no goal moves
        eb = eds.new(f"x{i:02d}")
        eb.head, eb.tail, eb.parent = (0, 0, -0.1 * i), (0, 0, -0.1 * i - 0.1), root
    bpy.ops.object.mode_set(mode='OBJECT')
    assert len(ob.data.bones) == 500
    targets = []
    for k, tip in enumerate(tips):
        top = R.world_head(ob, ob.pose.bones[tip].parent_recursive[6].name)  # chain length 8
        end = R.world_tail(ob, tip)
        base = top + 0.85 * (end - top)
        t = R.add_empty(f"T{k:02d}")
        R.key_locations(t, {1: tuple(base + Vector((0, 0, 0.15))), 20: tuple(base + Vector((0, 0.1, -0.12)))})
        R.set_goal(ob, tip, t, chain_length=8)
        targets.append(t)
    R.activate(ob)
    t0 = time.perf_counter()
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    solve_s = time.perf_counter() - t0
    assert "Sinew: all 24 goals reached" in capfd.readouterr().out
    t0 = time.perf_counter()
    assert bpy.ops.sinew.bake(frame_start=1, frame_end=20) == {'FINISHED'}
    bake_s = time.perf_counter() - t0
    out = capfd.readouterr().out
    assert "Sinew baked 20 frames" in out and "not reached" not in out and "misses targets" not in out
    for f in (1, 10, 20):
        bpy.context.scene.frame_set(f)
        worst = max((R.world_tail(ob, tip) - R.world_location(t)).length for tip, t in zip(tips, targets))
        assert worst < TOL, f
    assert solve_s < 2.0 and bake_s < 5.0, (solve_s, bake_s)  # measured here: ~0.01 s and ~0.05 s


@pytest.mark.parametrize("scale", [(1.0, 2.0, 0.5), (-1.0, 1.0, 1.0), (0.5, -2.0, 1.5)])
def test_non_uniform_and_negative_object_scale(scale):
    """Positions and poles map affinely between world and armature space, so the chain reaches
    its world-space target at any object scale."""
    ob = R.make_chain(4, roll_step=0.3)
    ob.location, ob.rotation_euler, ob.scale = (0.3, 0.2, 0.1), (0.2, 0.1, 0.5), scale
    bpy.context.view_layer.update()
    t = R.add_empty("T", ob.matrix_world @ Vector((0.5, 0.3, 1.4)))
    pole = R.add_empty("P", ob.matrix_world @ Vector((0.0, -2.0, 1.0)))
    R.set_goal(ob, "b03", t, pole_target=pole)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    assert (R.world_tail(ob, "b03") - t.location).length < TOL * max(abs(v) for v in scale)


def _reported_miss(out, bone):
    """The distance Solve IK's report gives for ``bone`` ("misses its target by <d>")."""
    return float(re.search(rf'bone "{bone}" misses its target by ([-+0-9.e]+)', out).group(1))


@pytest.mark.parametrize("parent_scale", [(1.0, 2.0, 0.5), (0.01, 0.01, 0.01)], ids=["shear", "centimetres"])
def test_solve_reports_the_distance_the_user_sees_in_world_space(capfd, parent_scale):
    """Under a scaled parent (rotated and non-uniformly scaled: a shear; or a rig at 1/100), Solve
    IK's "misses its target by" is the distance between the bone's tail and the target in the
    world, as the user measures it, not the armature-space one."""
    p = R.add_empty("P", (0.1, 0.0, 0.0))
    p.rotation_euler, p.scale = (0.4, 0.0, 0.7), parent_scale
    ob = R.make_chain(4)
    ob.parent, ob.rotation_euler = p, (0.0, 0.6, 0.0)
    bpy.context.view_layer.update()
    t = R.add_empty("T", ob.matrix_world @ Vector((0.8, 0.4, 2.6)))  # out of reach
    R.set_goal(ob, "b03", t)
    R.activate(ob)
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    world = (R.world_tail(ob, "b03") - t.location).length
    armature = (ob.matrix_world.inverted() @ t.location - ob.pose.bones["b03"].tail).length
    assert abs(world - armature) > 0.1 * world  # the two differ here
    assert _reported_miss(out, "b03") == pytest.approx(world, rel=1e-4)
    # A reachable target with the rig in Rest Position: Blender's miss in the world, Sinew's own
    # residuals said to be in armature space.
    t.location = ob.matrix_world @ Vector((0.5, 0.3, 1.4))
    ob.data.pose_position = 'REST'
    assert bpy.ops.sinew.solve() == {'FINISHED'}
    out = capfd.readouterr().out
    world = (R.world_tail(ob, "b03") - t.location).length
    assert _reported_miss(out, "b03") == pytest.approx(world, rel=1e-4)
    assert "Sinew's solution comes closer (its residuals in armature space: " in out


@pytest.mark.parametrize("scale, why", [((-1.0, 1.0, 1.0), "is mirrored relative to the armature"),
                                        ((1.0, 2.0, 0.5), "is sheared in armature space")])
def test_rotation_goal_under_a_mirroring_or_shearing_scale_is_refused(scale, why):
    ob = R.make_chain(4, roll_step=0.3)
    ob.scale = scale
    bpy.context.view_layer.update()
    t = R.add_empty("T", ob.matrix_world @ Vector((0.5, 0.3, 1.4)))
    t.rotation_euler = (0.3, 0.2, 0.1)
    R.set_goal(ob, "b03", t, use_orientation=True)
    R.activate(ob)
    with pytest.raises(RuntimeError, match=rf'Bone "b03": the rotation target "T" {why}'):
        bpy.ops.sinew.solve()
    assert ob.animation_data is None


def test_zero_object_scale_is_reported():
    ob = R.make_chain(3)
    ob.scale = (1.0, 0.0, 1.0)
    R.set_goal(ob, "b02", R.add_empty("T", (0.5, 0.0, 1.2)))
    R.activate(ob)
    with pytest.raises(RuntimeError, match=r'Armature "Chain" has a zero or non-finite scale'):
        bpy.ops.sinew.solve()
    assert ob.animation_data is None
