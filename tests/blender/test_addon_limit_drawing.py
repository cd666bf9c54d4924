"""Limits drawn in the viewport: the geometry as data against the engine's limits and Blender's
evaluated pose, the colours at a bound, the draw handler's life, and an offscreen image."""

import math

import addon_utils
import bpy
import numpy as np
import pytest
from mathutils import Matrix, Quaternion, Vector

import sinew_rigs as R
from sinew_addon_env import MODULE

Y = Vector((0.0, 1.0, 0.0))


def _rig():
    """A 4-bone chain with rolls, the armature object moved, turned and scaled, its root bone
    posed: b01 a Sinew cone and twist, b02 Blender IK limits on X and Z (Blender's cone shape),
    b03 a knee (Blender IK: Y and Z locked, X limited to 0..150 degrees: a hinge)."""
    ob = R.make_chain(4, length=0.4, roll_step=0.4)
    ob.location = (0.3, -0.2, 0.1)
    ob.rotation_euler = (0.2, -0.3, 0.5)
    ob.scale = (1.5, 1.5, 1.5)
    ob.pose.bones["b00"].rotation_quaternion = Quaternion((0.3, 0.5, -0.2), 0.7)
    s = ob.pose.bones["b01"].sinew
    s.use_cone, s.cone_x_pos, s.cone_x_neg, s.cone_z_pos, s.cone_z_neg = True, 0.9, 0.3, 0.6, 0.45
    s.use_twist, s.twist_min, s.twist_max = True, -0.3, 0.5
    pb = ob.pose.bones["b02"]
    pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -0.4, 1.1
    pb.use_ik_limit_z, pb.ik_min_z, pb.ik_max_z = True, -0.7, 0.5
    knee = ob.pose.bones["b03"]
    knee.lock_ik_y = knee.lock_ik_z = True
    knee.use_ik_limit_x, knee.ik_min_x, knee.ik_max_x = True, 0.0, math.radians(150)
    R.activate(ob)
    return ob


def _shapes(addon, ob):
    return {s.bone: (s, m) for s, m in addon.limit_drawing.armature_shapes(ob, R.depsgraph())}


def _solver_rig(addon, ob, name):
    """The engine rig a solve would get for this bone's limit (read_limit + apply_limit)."""
    import sinew

    rig = sinew.Rig([name], [-1], np.eye(4)[None], [1.0])
    addon.rig_reader.apply_limit(rig, name, addon.rig_reader.read_limit(ob.pose.bones[name]))
    return rig


def _world_tail_when_posed(ob, name, q):
    pb = ob.pose.bones[name]
    saved = Quaternion(pb.rotation_quaternion)
    pb.rotation_quaternion = q
    tail = R.world_tail(ob, name)
    pb.rotation_quaternion = saved
    R.depsgraph()
    return tail


def _q(v):
    return (v.w, v.x, v.y, v.z)


def _swing_onto(d, extra=0.0):
    """(w, x, y, z) in double precision (mathutils is single) of the shortest turn of +Y onto the
    unit direction ``d``, turned ``extra`` radians further about the same axis."""
    d = np.asarray(d, dtype=np.float64)
    axis = np.cross((0.0, 1.0, 0.0), d)
    angle = math.atan2(np.linalg.norm(axis), d[1]) + extra
    axis /= np.linalg.norm(axis)
    return (math.cos(angle / 2), *(math.sin(angle / 2) * axis))


def test_only_limited_bones_are_drawn_and_the_handler_costs_nothing_when_off(addon):
    ob = _rig()
    assert set(_shapes(addon, ob)) == {"b01", "b02", "b03"}
    assert not bpy.context.scene.sinew_show_limits
    assert not addon.limit_drawing.handler_registered()


@pytest.mark.parametrize("bone", ["b01", "b02"])
def test_cone_vertices_are_where_the_limit_lets_the_tail_go(addon, bone):
    """Every boundary vertex, as the swing that turns the bone onto it, is inside the limit the
    solve uses, and a little further is clamped; posing the bone at that swing puts its tail
    (Blender's evaluated pose, world space) on the drawn vertex."""
    ob = _rig()
    shape, matrix = _shapes(addon, ob)[bone]
    rig = _solver_rig(addon, ob, bone)
    assert shape.cone.shape == (addon.limit_drawing.RINGS, addon.limit_drawing.SEGMENTS, 3)
    boundary = shape.cone[-1]
    for k, d in enumerate(boundary):
        assert rig.limit_violation(bone, _swing_onto(d)) < 1e-9, k
        assert rig.limit_violation(bone, _swing_onto(d, 2e-3)) > 1e-5, k
        assert rig.limit_state(bone, _swing_onto(d), 1e-6)["swing_at_bound"]
    for d in shape.cone[:-1].reshape(-1, 3):  # the surface inside the boundary: inside, off the bound
        assert rig.limit_violation(bone, _swing_onto(d)) < 1e-9
        assert not rig.limit_state(bone, _swing_onto(d), 1e-6)["swing_at_bound"]
    for k in (0, 5, 12, 24, 31, 36):
        drawn = matrix @ Vector(boundary[k])
        tail = _world_tail_when_posed(ob, bone, Quaternion(_swing_onto(boundary[k])))
        assert (drawn - tail).length < 1e-5, (k, drawn, tail)
    # The drawn lines are the boundary loop (and spokes) in world space.
    prims = addon.limit_drawing.transformed(addon.limit_drawing.local_primitives(shape), matrix)
    world_boundary = np.array([matrix @ Vector(d) for d in boundary])
    assert np.abs(prims.lines[: 2 * len(boundary): 2] - world_boundary).max() < 1e-5


def test_blender_cone_keeps_blenders_shape(addon):
    """Blender's IK limits are an ellipse on the swing quaternion: on a diagonal the drawn bound
    is where sin(angle/2) components meet that ellipse, not the rotation vector's."""
    ob = _rig()
    shape, _m = _shapes(addon, ob)["b02"]
    for d in shape.cone[-1]:
        q = Quaternion(_swing_onto(d))
        a = math.sin(1.1 / 2) if q.x >= 0 else math.sin(0.4 / 2)
        b = math.sin(0.5 / 2) if q.z >= 0 else math.sin(0.7 / 2)
        assert (q.x / a) ** 2 + (q.z / b) ** 2 == pytest.approx(1.0, abs=1e-5)


def test_hinge_arc_spans_exactly_the_range(addon):
    ob = _rig()
    shape, matrix = _shapes(addon, ob)["b03"]
    assert shape.cone is None and shape.twist_arc is None
    lo, hi = shape.hinge_range
    assert lo == pytest.approx(0.0, abs=1e-6) and hi == pytest.approx(math.radians(150), abs=1e-6)
    # Every vertex is the tail turned about X, from the lower bound to the upper, in order.
    angles = [math.atan2(p[2], p[1]) for p in shape.hinge_arc]
    assert np.allclose(np.linalg.norm(shape.hinge_arc, axis=1), 1.0) and np.allclose(shape.hinge_arc[:, 0], 0.0)
    unwrapped = np.unwrap(angles)
    assert unwrapped[0] == pytest.approx(lo, abs=1e-6) and unwrapped[-1] == pytest.approx(hi, abs=1e-6)  # (mathutils: single)
    assert np.all(np.diff(unwrapped) > 0) and np.diff(unwrapped).max() <= addon.limit_drawing.ARC_STEP + 1e-9
    # The arc's ends are where Blender puts the tail at the bounds.
    for end, angle in ((0, lo), (-1, hi)):
        tail = _world_tail_when_posed(ob, "b03", Quaternion((1, 0, 0), angle))
        assert (matrix @ Vector(shape.hinge_arc[end]) - tail).length < 1e-5


def test_twist_arc_spans_exactly_the_range_around_the_current_axis(addon):
    ob = _rig()
    swing, twist = Quaternion((1.0, 0.0, 0.5), 0.4), 0.2
    ob.pose.bones["b01"].rotation_quaternion = swing @ Quaternion((0, 1, 0), twist)
    shape, matrix = _shapes(addon, ob)["b01"]
    ld = addon.limit_drawing
    assert shape.twist_range == (pytest.approx(-0.3), pytest.approx(0.5))
    # In the swung frame every vertex is at TWIST_HEIGHT up the axis, TWIST_RADIUS around it,
    # from the twist's lower bound to its upper one (measured from +Z toward +X, i.e. about +Y).
    inv = swing.inverted()
    local = np.array([inv @ Vector(p) for p in shape.twist_arc])
    assert np.allclose(local[:, 1], ld.TWIST_HEIGHT) and np.allclose(np.hypot(local[:, 0], local[:, 2]), ld.TWIST_RADIUS)
    angles = np.arctan2(local[:, 0], local[:, 2])
    assert angles[0] == pytest.approx(-0.3, abs=1e-6) and angles[-1] == pytest.approx(0.5, abs=1e-6)
    assert np.all(np.diff(angles) > 0)
    # The tick points where the posed bone's Z axis points (Blender's evaluated pose, world).
    e = ob.evaluated_get(R.depsgraph())
    z_world = (e.matrix_world.to_3x3() @ e.pose.bones["b01"].matrix.to_3x3().col[2]).normalized()
    tick = (matrix @ Vector(shape.twist_tick)) - (matrix @ Vector(shape.twist_centre))
    assert tick.normalized().dot(z_world) == pytest.approx(1.0, abs=1e-6)
    assert not shape.twist_at_bound and not shape.swing_at_bound


def test_blenders_elbow_swing_is_drawn_as_the_arc_of_its_free_axis(addon):
    """Lock IK X with Z limited (Blender's elbow): the swing is about Z only, drawn as a hinge's arc
    over Z's range whose ends are where Blender puts the tail at the bounds (as a cone it was a
    sliver, and with Z free a band drawn as spokes to the bone's own axis)."""
    ob = R.make_chain(3, length=0.4, roll_step=0.4)
    pb = ob.pose.bones["b01"]
    pb.lock_ik_x = True
    pb.use_ik_limit_z, pb.ik_min_z, pb.ik_max_z = True, -0.5, 0.4
    R.activate(ob)
    shape, matrix = _shapes(addon, ob)["b01"]
    assert shape.cone is None and shape.twist_arc is None
    assert shape.hinge_range == (pytest.approx(-0.5), pytest.approx(0.4))
    for end, angle in ((0, -0.5), (-1, 0.4)):
        tail = _world_tail_when_posed(ob, "b01", Quaternion((0, 0, 1), angle))
        assert (matrix @ Vector(shape.hinge_arc[end]) - tail).length < 1e-5


@pytest.mark.parametrize("locks, sinew", [("xy", "twist"), ("xz", "twist"), ("xy", "cone")])
def test_blenders_other_locks_are_drawn_with_sinews_cone_or_twist(addon, locks, sinew):
    """What the solve keeps is drawn: Sinew's twist on a bone locked on X and Y (Blender's elbow,
    its swing about Z only, free: the arc of the tail turned about Z, a full turn) draws Sinew's
    twist range with it; on a bone locked on X and Z, the twist range alone; Sinew's cone on the
    bone locked on X and Y draws the cone and the twist held at 0 (QA: the other locks were
    dropped, as in the solve)."""
    ob = R.make_chain(3, length=0.4)
    pb = ob.pose.bones["b01"]
    for a in locks:
        setattr(pb, f"lock_ik_{a}", True)
    s = pb.sinew
    if sinew == "twist":
        s.use_twist, s.twist_min, s.twist_max = True, math.radians(-20), math.radians(20)
    else:
        s.use_cone = True
        s.cone_x_pos = s.cone_x_neg = s.cone_z_pos = s.cone_z_neg = math.radians(60)
    R.activate(ob)
    shape, _matrix = _shapes(addon, ob)["b01"]
    assert shape.hinge_arc is None or (locks, sinew) == ("xy", "twist")
    if sinew == "cone":
        boundary = shape.cone[-1]
        assert np.abs(boundary[:, 0]).max() == pytest.approx(math.sin(math.radians(60)), abs=1e-6)
        assert np.abs(boundary[:, 2]).max() == pytest.approx(math.sin(math.radians(60)), abs=1e-6)
        assert shape.twist_range == (0.0, 0.0)
        return
    assert shape.twist_range == (pytest.approx(math.radians(-20)), pytest.approx(math.radians(20)))
    assert shape.cone is None
    if locks == "xy":
        arc = shape.hinge_arc
        assert shape.hinge_range == (pytest.approx(-math.pi), pytest.approx(math.pi))
        assert np.abs(arc[:, 2]).max() < 1e-6 and np.allclose(np.linalg.norm(arc, axis=1), 1.0)
        angles = np.unwrap(np.arctan2(-arc[:, 0], arc[:, 1]))  # about +Z, from +Y toward -X
        assert angles[-1] - angles[0] == pytest.approx(2.0 * math.pi, abs=1e-5) and np.all(np.diff(angles) > 0)
        assert arc[0] == pytest.approx((0.0, -1.0, 0.0), abs=1e-6)  # from -pi, the tail turned back


def test_parts_at_a_bound_are_drawn_in_the_bound_colour(addon):
    ld = addon.limit_drawing
    ob = _rig()
    ob.pose.bones["b03"].rotation_quaternion = Quaternion((1, 0, 0), 1.0)  # the knee inside its range
    shapes = _shapes(addon, ob)
    for name in ("b01", "b02", "b03"):
        shape = shapes[name][0]
        assert not shape.swing_at_bound and not shape.twist_at_bound, name
        prims = ld.local_primitives(shape)
        assert not np.any(np.all(np.isclose(prims.line_colors[:, :3], ld.BOUND_COLOR), axis=1)), name
    # b01 swung to its +X bound (0.9 rad) and twisted to its upper bound; b02 beyond its -Z bound;
    # the knee straight (its lower bound is 0).
    ob.pose.bones["b01"].rotation_quaternion = Quaternion((1, 0, 0), 0.9) @ Quaternion((0, 1, 0), 0.5)
    ob.pose.bones["b02"].rotation_quaternion = Quaternion((0, 0, 1), -0.9)
    ob.pose.bones["b03"].rotation_quaternion = Quaternion()
    shapes = _shapes(addon, ob)
    b01, b02, b03 = (shapes[n][0] for n in ("b01", "b02", "b03"))
    assert b01.swing_at_bound and b01.twist_at_bound and b02.swing_at_bound and b03.swing_at_bound
    for shape in (b01, b02, b03):
        prims = ld.local_primitives(shape)
        assert np.allclose(prims.tri_colors[:, :3], ld.BOUND_COLOR) and np.allclose(prims.line_colors[:, :3], ld.BOUND_COLOR)
    # Only the twist at its bound: the cone keeps its colour.
    ob.pose.bones["b01"].rotation_quaternion = Quaternion((1, 0, 0), 0.3) @ Quaternion((0, 1, 0), -0.3)
    b01 = _shapes(addon, ob)["b01"][0]
    assert b01.twist_at_bound and not b01.swing_at_bound
    def key(c):
        return tuple(int(round(float(v) * 1000)) for v in c[:3])

    colors = {key(c) for c in ld.local_primitives(b01).line_colors}
    assert colors == {key(ld.BOUND_COLOR), key(ld.CONE_COLOR)}


def test_blender_ik_pose_counts(addon):
    """The state is read from the evaluated pose: a Blender IK constraint that bends the knee to
    its limit colours it, though the knee's own rotation channels are at rest."""
    ob = R.make_chain(2, length=0.5)
    knee = ob.pose.bones["b01"]
    knee.lock_ik_y = knee.lock_ik_z = True
    knee.use_ik_limit_x, knee.ik_min_x, knee.ik_max_x = True, 0.0, math.radians(60)
    t = R.add_empty("T", (0.0, -0.2, 0.3))  # needs more than 60 degrees of bend
    con = knee.constraints.new('IK')
    con.target, con.chain_count = t, 2
    shape = _shapes(addon, ob)["b01"][0]
    assert shape.swing_at_bound and tuple(knee.rotation_quaternion) == (1, 0, 0, 0)


def test_limits_the_engine_refuses_are_not_drawn(addon, capfd):
    ob = _rig()
    s = ob.pose.bones["b01"].sinew
    s.twist_min, s.twist_max = 0.5, -0.5  # min above max: the solve reports it; drawing skips it
    assert "b01" not in _shapes(addon, ob) and "b02" in _shapes(addon, ob)
    ob.pose.bones["b02"].sinew.lock = True  # a lock keeps the pose it has: nothing to draw
    assert "b02" not in _shapes(addon, ob)
    ob.data.bones["b03"].hide = True  # hidden bones are not drawn
    assert not _shapes(addon, ob)


@pytest.mark.parametrize("scaled, scale", [("b02", (0.0, 0.0, 0.0)), ("b02", (1.0, 0.0, 1.0)),
                                           ("b01", (0.0, 0.0, 0.0))])
def test_a_bone_scaled_to_zero_leaves_out_only_the_limits_it_flattens(addon, scaled, scale):
    """QA: a bone scaled to zero, or flat on one axis (a way to hide part of a character), above a
    limited bone made the drawing raise ("matrix does not have an inverse") and draw nothing for
    any armature. The joints under it have no frame to draw in: their limits are left out, every
    other limit is drawn as before, and the sidebar says why."""
    from test_addon_ux import _sidebar_labels

    ld = addon.limit_drawing
    other = _rig()
    bpy.ops.object.mode_set(mode='POSE')
    ob = R.make_chain(4, length=0.4, name="Flat")
    for name in ("b01", "b03"):
        pb = ob.pose.bones[name]
        pb.use_ik_limit_x, pb.ik_min_x, pb.ik_max_x = True, -0.5, 0.5
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    assert {o.name for o in ld.armatures_to_draw(bpy.context)} == {"Chain", "Flat"}
    before = {o.name: _shapes(addon, o) for o in (other, ob)}
    vertices = sum(len(p) for p in ld.scene_primitives(bpy.context))
    b03 = len(ld.local_primitives(before["Flat"]["b03"][0]))
    ob.pose.bones[scaled].scale = scale
    after = {o.name: _shapes(addon, o) for o in (other, ob)}
    assert set(after["Flat"]) == {"b01"} and set(after["Chain"]) == {"b01", "b02", "b03"}
    for arm, bone in [("Flat", "b01"), ("Chain", "b01"), ("Chain", "b02"), ("Chain", "b03")]:
        assert np.allclose(after[arm][bone][1], before[arm][bone][1], atol=1e-6), (arm, bone)
    assert sum(len(p) for p in ld.scene_primitives(bpy.context)) == vertices - b03
    bpy.context.scene.sinew_show_limits = True
    try:
        assert _sidebar_labels(addon) == ["1 of 2 bones with limits flattened:", "their limits are not drawn",
                                          f'(e.g. "b03": "{scaled}" has a zero scale)']
        ob.pose.bones[scaled].scale = (1.0, 1.0, 1.0)
        assert _sidebar_labels(addon) == []
    finally:
        bpy.context.scene.sinew_show_limits = False


def test_show_limits_adds_the_handler_and_removes_it(addon, tmp_path):
    ld = addon.limit_drawing
    scene = bpy.context.scene
    scene.sinew_show_limits = True
    assert ld.handler_registered()
    scene.sinew_show_limits = False
    assert not ld.handler_registered()
    # Saved on: opening the file again draws again; an empty file does not.
    scene.sinew_show_limits = True
    path = str(tmp_path / "limits.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.read_homefile(use_empty=True)
    assert not ld.handler_registered()
    bpy.ops.wm.open_mainfile(filepath=path)
    assert bpy.context.scene.sinew_show_limits and ld.handler_registered()
    # Disabling the add-on removes it; enabling it again (the file still says on) adds it back.
    addon_utils.disable(MODULE, default_set=True)
    try:
        assert not ld.handler_registered()
    finally:
        addon_utils.enable(MODULE, default_set=True)
    import sys

    assert sys.modules[MODULE].limit_drawing.handler_registered()
    bpy.context.scene.sinew_show_limits = False
    assert not sys.modules[MODULE].limit_drawing.handler_registered()


def _camera_matrices(scene, location, look_at, width, height):
    cam = bpy.data.objects.new("LimitsCam", bpy.data.cameras.new("LimitsCam"))
    scene.collection.objects.link(cam)
    cam.location = location
    cam.rotation_euler = (Vector(look_at) - Vector(location)).to_track_quat('-Z', 'Y').to_euler()
    bpy.context.view_layer.update()
    view = cam.matrix_world.inverted()
    proj = cam.calc_matrix_camera(bpy.context.evaluated_depsgraph_get(), x=width, y=height)
    return view, proj


def _project(view, proj, p, width, height):
    v = proj @ view @ Vector((*p, 1.0))
    return int((v.x / v.w * 0.5 + 0.5) * width), int((v.y / v.w * 0.5 + 0.5) * height)


def test_offscreen_image_shows_the_limits(addon, tmp_path):
    """Headless Blender has a GPU context once it has rendered (software OpenGL here): the 3D
    view and the limits drawn over it into an offscreen buffer, through the draw handler."""
    ld = addon.limit_drawing
    scene = bpy.context.scene
    if not ld.init_gpu_headless(scene):
        pytest.skip("no GPU context in this headless Blender (no EGL/OpenGL): the offscreen image cannot be drawn")
    ob = _rig()
    ob.pose.bones["b03"].rotation_quaternion = Quaternion()  # the knee straight: at its bound
    scene.sinew_show_limits = True
    W, H = 320, 240
    view, proj = _camera_matrices(scene, (4.5, -5.0, 3.0), tuple(R.world_head(ob, "b02")), W, H)
    without = ld.render_view(bpy.context, view, proj, W, H, limits=False)
    with_limits = ld.render_view(bpy.context, view, proj, W, H, limits=True)
    assert with_limits.shape == (H, W, 4)
    changed = np.abs(with_limits[..., :3] - without[..., :3]).max(axis=2) > 0.02
    assert changed.sum() > 200
    # The knee's arc is drawn in the bound colour where its middle projects.
    shape, matrix = _shapes(addon, ob)["b03"]
    mid = matrix @ Vector(shape.hinge_arc[len(shape.hinge_arc) // 2])
    x, y = _project(view, proj, mid, W, H)
    patch = with_limits[max(0, y - 3): y + 4, max(0, x - 3): x + 4, :3]
    assert np.any((patch[..., 0] > 0.6) & (patch[..., 0] > patch[..., 2] + 0.3)), patch
    ld.save_png(with_limits, tmp_path / "limits.png")
    assert (tmp_path / "limits.png").stat().st_size > 1000
    # The draw handler itself, as a viewport calls it (its region and the offscreen's matrices).
    import gpu

    area = next(a for a in bpy.context.window.screen.areas if a.type == 'VIEW_3D')
    region = next(r for r in area.regions if r.type == 'WINDOW')
    off = gpu.types.GPUOffScreen(W, H)
    try:
        with off.bind(), bpy.context.temp_override(area=area, region=region):
            gpu.matrix.load_matrix(view)
            gpu.matrix.load_projection_matrix(proj)
            gpu.state.active_framebuffer_get().clear(color=(0.0, 0.0, 0.0, 0.0), depth=1.0)
            ld._draw_handler()
            px = np.array(gpu.state.active_framebuffer_get().read_color(0, 0, W, H, 4, 0, 'FLOAT').to_list())
    finally:
        off.free()
    assert not ld._reported
    assert px.reshape(H, W, 4)[..., 3].max() > 0.1  # it drew
