# SPDX-License-Identifier: GPL-3.0-or-later
"""Draws each bone's joint limit in the 3D viewport, as Blender draws its own IK limits.

The limit drawn is the one a solve uses: ``rig_reader.read_limit`` (Blender's IK limits merged
with Sinew's settings, per axis), set on an engine rig by ``rig_reader.apply_limit``. Like
Blender's degrees-of-freedom display, it sits at the bone's head in the bone's rest frame carried
by its parent's pose (where the bone's own rotation starts from), scaled to the bone's length:

* a **cone** (Sinew's four-angle cone in either of its shapes) is the patch of the sphere the
  bone's tail may reach, with its boundary: the directions come from the engine
  (``Rig.cone_boundary``), so the add-on holds none of the cone's math;
* a **hinge** is the arc the tail sweeps over the hinge's range, with its two end spokes; so is
  the swing of Blender's elbow (one swing axis locked: ``elbow_swing``), about the other axis;
* a **twist** range is an arc around the bone's current axis (its swing as the engine splits
  it), with a tick at the current twist.

A part is drawn in ``BOUND_COLOR`` when the current (evaluated) pose is at that bound
(``Rig.limit_state``). The geometry is plain data (``limit_shape``, ``primitives``) so the tests
check it against the engine; ``draw_primitives`` draws it with the ``gpu`` module, from a
``SpaceView3D`` POST_VIEW handler that exists only while a scene's "Show Limits" is on.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, replace

import bpy
import numpy as np
from bpy.props import BoolProperty
from mathutils import Matrix, Quaternion, Vector

from . import rig_reader

SEGMENTS = 48          # around a cone (a multiple of 4: the four half-angles are vertices)
RINGS = 4              # rings tiling a cone's surface
ARC_STEP = math.radians(4.0)   # the largest angle between two vertices of an arc
TWIST_HEIGHT = 0.3     # a twist arc's centre on the bone's axis, in bone lengths from the head
TWIST_RADIUS = 0.2     # its radius, in bone lengths
AT_BOUND_TOLERANCE = math.radians(0.5)  # a pose this close to a bound counts as at it
FLAT_VOLUME = 1e-6     # a joint frame whose unit axes span less volume has none to draw in

CONE_COLOR = (0.25, 0.6, 1.0)
HINGE_COLOR = (0.35, 0.85, 0.45)
TWIST_COLOR = (1.0, 0.8, 0.2)
BOUND_COLOR = (1.0, 0.3, 0.08)
SURFACE_ALPHA = 0.2
LINE_ALPHA = 0.95
LINE_WIDTH = 2.0
Y_AXIS = Vector((0.0, 1.0, 0.0))


# --------------------------------------------------------------------------------------------
# The limit as the engine has it (cached: a redraw reads every bone's limit)
# --------------------------------------------------------------------------------------------

_engine_limits: dict = {}


def limit_key(lim: rig_reader.LimitSpec):
    """What of a limit is drawn, as a hashable key (stiffness is not drawn)."""
    return (lim.swing, tuple(lim.cone), tuple(lim.hinge), lim.twist, lim.locked)


def drawable(lim: rig_reader.LimitSpec) -> bool:
    """True when ``lim`` bounds a rotation in a way there is something to draw for (a lock keeps
    the pose it has; stiffness bounds nothing)."""
    return not lim.locked and (lim.swing != "free" or lim.twist is not None)


def engine_limit(lim: rig_reader.LimitSpec):
    """A one-bone engine rig ("bone", identity rest) with what ``lim`` draws (``limit_key``: not
    its stiffness or stretch) set exactly as a solve sets it, or None when the engine refuses that
    limit (the solve reports that)."""
    key = limit_key(lim)
    if key in _engine_limits:
        return _engine_limits[key]
    sinew = rig_reader.engine()
    rig = sinew.Rig(["bone"], [-1], np.eye(4)[None], [1.0])
    try:
        # (Only what the key holds, so that bones with the same key share one answer.)
        rig_reader.apply_limit(rig, "bone", replace(lim, stiffness=0.0, stiffness_axes=None, stretch=0.0))
    except rig_reader.ReadError:
        rig = None
    if len(_engine_limits) > 256:
        _engine_limits.clear()
    _engine_limits[key] = rig
    return rig


def clear_caches():
    _engine_limits.clear()
    _cone_cache.clear()


_cone_cache: dict = {}


def cone_directions(lim: rig_reader.LimitSpec) -> np.ndarray | None:
    """(RINGS, SEGMENTS, 3) unit directions the cone lets the bone point (its rest frame), the
    last ring on the boundary; None for a limit without a cone."""
    key = limit_key(lim)
    if key not in _cone_cache:
        rig = engine_limit(lim)
        _cone_cache[key] = None if rig is None else rig.cone_boundary("bone", SEGMENTS, RINGS)
    return _cone_cache[key]


# --------------------------------------------------------------------------------------------
# Geometry (pure: the tests check it as data)
# --------------------------------------------------------------------------------------------


@dataclass
class LimitShape:
    """One bone's limit drawing in its joint frame (origin at the head, axes the bone's rest frame
    carried by its parent; unit: the bone's length)."""

    bone: str
    cone: np.ndarray | None = None         # (RINGS, SEGMENTS, 3) directions, the last ring the boundary
    hinge_arc: np.ndarray | None = None    # (K, 3) the tail swung about the hinge axis, min to max
    twist_arc: np.ndarray | None = None    # (K, 3) around the bone's axis, twist min to max
    twist_centre: np.ndarray | None = None  # (3,) the twist arc's centre
    twist_tick: np.ndarray | None = None   # (3,) where the current twist points on the arc
    twist_range: tuple | None = None       # (min, max) of the twist arc (radians)
    hinge_range: tuple | None = None       # (min, max) of the hinge arc
    swing_at_bound: bool = False
    twist_at_bound: bool = False


def _arc_angles(lo: float, hi: float) -> np.ndarray:
    return np.linspace(lo, hi, max(2, int(math.ceil((hi - lo) / ARC_STEP)) + 1))


def _twist_arc(swing: Quaternion, lo: float, hi: float, current: float):
    """A twist arc about the axis of a bone turned by ``swing``: the points of +Z turned about the
    bone's own Y by each twist in [lo, hi], at TWIST_RADIUS around TWIST_HEIGHT up the axis."""
    def point(t):
        return swing @ Vector((TWIST_RADIUS * math.sin(t), TWIST_HEIGHT, TWIST_RADIUS * math.cos(t)))

    arc = np.array([point(t) for t in _arc_angles(lo, hi)])
    return arc, np.array(swing @ (TWIST_HEIGHT * Y_AXIS)), np.array(point(current))


def _hinge_arc(axis, lo: float, hi: float) -> np.ndarray:
    """(K, 3) the bone's tail (+Y) turned about ``axis`` by each angle from ``lo`` to ``hi``."""
    axis = Vector(axis)
    return np.array([Quaternion(axis, a) @ Y_AXIS for a in _arc_angles(lo, hi)])


def elbow_swing(lim: rig_reader.LimitSpec) -> tuple | None:
    """For Blender's elbow (``rig_reader.read_limit``: a Blender cone whose X or Z half-angles are
    both 0, that swing axis locked): (the other axis, its min, its max), the swing's only freedom,
    drawn as a hinge's arc (as a cone it is a sliver, and with that axis free a band of no width
    whose boundary does not show the swing); else None."""
    if lim.swing != "cone_blender":
        return None
    min_x, max_x, min_z, max_z = lim.cone
    if min_x == max_x == 0.0:
        return (0.0, 0.0, 1.0), min_z, max_z
    if min_z == max_z == 0.0:
        return (1.0, 0.0, 0.0), min_x, max_x
    return None


def limit_shape(name: str, lim: rig_reader.LimitSpec, local: Quaternion) -> LimitShape | None:
    """The drawing of limit ``lim`` of bone ``name`` whose local rotation (relative to rest, as
    ``rotation_quaternion``) is ``local``; None when there is nothing to draw or the engine
    refuses the limit."""
    if not drawable(lim):
        return None
    rig = engine_limit(lim)
    if rig is None:
        return None
    q = Quaternion(local).normalized()
    state = rig.limit_state("bone", (q.w, q.x, q.y, q.z), AT_BOUND_TOLERANCE)
    shape = LimitShape(name, swing_at_bound=bool(state["swing_at_bound"]),
                       twist_at_bound=bool(state["twist_at_bound"]))
    swing = Quaternion(state["swing"])
    elbow = elbow_swing(lim)
    if elbow is not None:
        shape.hinge_arc, shape.hinge_range = _hinge_arc(*elbow), elbow[1:]
    elif lim.swing in ("cone", "cone_blender"):
        shape.cone = cone_directions(lim)
    elif lim.swing == "hinge":
        axis, lo, hi = rig.limit("bone")["hinge"]  # normalised by the engine
        axis = Vector(axis)
        if abs(axis.dot(Y_AXIS)) > 1.0 - 1e-9:
            # About the bone's own axis (Blender's IK with X and Z locked): drawn as a twist.
            sign = 1.0 if axis.dot(Y_AXIS) > 0.0 else -1.0
            lo, hi = (lo, hi) if sign > 0.0 else (-hi, -lo)
            shape.twist_arc, shape.twist_centre, shape.twist_tick = _twist_arc(
                Quaternion(), lo, hi, sign * state["hinge"])
            shape.twist_range, shape.twist_at_bound = (lo, hi), shape.swing_at_bound
            shape.swing_at_bound = False
        else:
            shape.hinge_arc, shape.hinge_range = _hinge_arc(axis, lo, hi), (lo, hi)
    if lim.swing != "hinge" and lim.twist is not None:
        lo, hi = rig.limit("bone")["twist"]
        shape.twist_arc, shape.twist_centre, shape.twist_tick = _twist_arc(swing, lo, hi, state["twist"])
        shape.twist_range = (lo, hi)
    return shape


def flattened(matrix) -> bool:
    """True when ``matrix``'s 3 × 3 part is flat: its axes, each scaled to unit length, span no
    volume (below ``FLAT_VOLUME``), as a pose under a zero scale on some axis is."""
    return abs(matrix.to_3x3().normalized().determinant()) < FLAT_VOLUME


def joint_frame(pb_eval) -> tuple[Matrix, Quaternion] | None:
    """(armature-space joint matrix: translation to the posed head, rotation of the bone's rest
    frame carried by its parent's pose; the bone's local rotation recovered from the evaluated
    pose, so constraints such as Blender's IK count) for an evaluated pose bone. None when the
    joint has no frame: its parent's pose is ``flattened`` (a bone above scaled to zero, or to
    zero on one axis, to hide part of a character; ``flattening_bone`` names it)."""
    bone = pb_eval.bone
    if pb_eval.parent is not None and bone.use_inherit_rotation:
        frame = pb_eval.parent.matrix @ bone.parent.matrix_local.inverted() @ bone.matrix_local
    else:
        frame = bone.matrix_local
    if flattened(frame):
        return None
    rot = frame.to_3x3().normalized()
    local = (rot.inverted() @ pb_eval.matrix.to_3x3().normalized()).to_quaternion()
    return Matrix.Translation(pb_eval.head) @ rot.to_4x4(), local


def flattening_bone(pb_eval) -> str:
    """The bone whose zero scale flattens the joint of evaluated pose bone ``pb_eval`` (one whose
    ``joint_frame`` is None): the topmost of the flattened bones right above it."""
    b = pb_eval.parent
    while b.parent is not None and flattened(b.parent.matrix):
        b = b.parent
    return b.name


@dataclass
class Primitives:
    """What ``draw_primitives`` draws: triangles and line segments with a colour per vertex."""

    tris: np.ndarray    # (3T, 3) float32
    tri_colors: np.ndarray   # (3T, 4)
    lines: np.ndarray   # (2L, 3)
    line_colors: np.ndarray  # (2L, 4)

    @staticmethod
    def empty() -> Primitives:
        z3, z4 = np.zeros((0, 3), np.float32), np.zeros((0, 4), np.float32)
        return Primitives(z3, z4, z3.copy(), z4.copy())

    def __len__(self):
        return len(self.tris) + len(self.lines)


def _loop_segments(points: np.ndarray, closed: bool) -> np.ndarray:
    nxt = np.roll(points, -1, axis=0) if closed else points[1:]
    cur = points if closed else points[:-1]
    return np.stack([cur, nxt], axis=1).reshape(-1, 3)


def _fan(centre: np.ndarray, points: np.ndarray, closed: bool) -> np.ndarray:
    nxt = np.roll(points, -1, axis=0) if closed else points[1:]
    cur = points if closed else points[:-1]
    return np.stack([np.broadcast_to(centre, cur.shape), cur, nxt], axis=1).reshape(-1, 3)


def _cone_triangles(dirs: np.ndarray) -> np.ndarray:
    """The surface of a (RINGS, SEGMENTS, 3) ring grid: a fan from +Y to the first ring, then
    quads (two triangles) between rings."""
    tris = [_fan(np.array(Y_AXIS), dirs[0], True)]
    for r in range(1, len(dirs)):
        a, b = dirs[r - 1], dirs[r]
        a1, b1 = np.roll(a, -1, axis=0), np.roll(b, -1, axis=0)
        tris.append(np.stack([a, b, b1], axis=1).reshape(-1, 3))
        tris.append(np.stack([a, b1, a1], axis=1).reshape(-1, 3))
    return np.concatenate(tris)


def local_primitives(shape: LimitShape) -> Primitives:
    """``shape`` as triangles and lines in its joint frame (unit: the bone's length)."""
    tris, tri_cols, lines, line_cols = [], [], [], []

    def add(t, lns, rgb, at_bound):
        color = BOUND_COLOR if at_bound else rgb
        if t is not None and len(t):
            tris.append(t)
            tri_cols.append(np.tile((*color, SURFACE_ALPHA), (len(t), 1)))
        if lns is not None and len(lns):
            lines.append(lns)
            line_cols.append(np.tile((*color, LINE_ALPHA), (len(lns), 1)))

    origin = np.zeros(3)
    if shape.cone is not None:
        boundary = shape.cone[-1]
        # The boundary and the spokes to the four half-angles (segments 0, n/4, n/2, 3n/4).
        spokes = np.stack([np.broadcast_to(origin, (4, 3)), boundary[:: len(boundary) // 4][:4]], axis=1)
        add(_cone_triangles(shape.cone), np.concatenate([_loop_segments(boundary, True), spokes.reshape(-1, 3)]),
            CONE_COLOR, shape.swing_at_bound)
    if shape.hinge_arc is not None:
        arc = shape.hinge_arc
        spokes = np.array([origin, arc[0], origin, arc[-1]])
        add(_fan(origin, arc, False), np.concatenate([_loop_segments(arc, False), spokes]), HINGE_COLOR,
            shape.swing_at_bound)
    if shape.twist_arc is not None:
        arc, c = shape.twist_arc, shape.twist_centre
        spokes = np.array([c, arc[0], c, arc[-1], c, shape.twist_tick])
        add(_fan(c, arc, False), np.concatenate([_loop_segments(arc, False), spokes]), TWIST_COLOR,
            shape.twist_at_bound)
    if not tris and not lines:
        return Primitives.empty()

    def cat(parts, width):
        return np.concatenate(parts).astype(np.float32) if parts else np.zeros((0, width), np.float32)

    return Primitives(cat(tris, 3), cat(tri_cols, 4), cat(lines, 3), cat(line_cols, 4))


def transformed(prims: Primitives, matrix) -> Primitives:
    m = np.array(matrix, dtype=np.float64)

    def tf(p):
        return (p @ m[:3, :3].T + m[:3, 3]).astype(np.float32) if len(p) else p

    return Primitives(tf(prims.tris), prims.tri_colors, tf(prims.lines), prims.line_colors)


def merged(parts) -> Primitives:
    parts = [p for p in parts if len(p)]
    if not parts:
        return Primitives.empty()
    return Primitives(*(np.concatenate([getattr(p, f) for p in parts])
                        for f in ("tris", "tri_colors", "lines", "line_colors")))


def _bone_visible(bone) -> bool:
    if bone.hide:
        return False
    colls = getattr(bone, "collections", None)
    if colls is None or not len(colls):
        return True
    return any(getattr(c, "is_visible_effectively", getattr(c, "is_visible", True)) for c in colls)


def armature_shapes(ob, depsgraph) -> list[tuple[LimitShape, Matrix]]:
    """Every drawable limit of armature ``ob`` with its world-space joint matrix (scaled to the
    bone's length), for its evaluated pose."""
    ob_eval = ob.evaluated_get(depsgraph)
    out = []
    for pb in ob.pose.bones:
        if not _bone_visible(pb.bone):
            continue
        lim = rig_reader.read_limit(pb)
        if not drawable(lim):
            continue
        frame = joint_frame(ob_eval.pose.bones[pb.name])
        if frame is None:  # (flattened by a zero scale above: visibility_note says so)
            continue
        joint, local = frame
        shape = limit_shape(pb.name, lim, local)
        if shape is not None:
            out.append((shape, ob_eval.matrix_world @ joint @ Matrix.Scale(pb.bone.length, 4)))
    return out


def limited_bones(ob) -> tuple[list[str], list[str]]:
    """The bones of armature ``ob`` with a limit to draw: (shown, hidden), hidden meaning hidden
    themselves or in no visible bone collection, whose limits ``armature_shapes`` leaves out
    (Rigify's IK knees and elbows are hidden MCH bones)."""
    shown, hidden = [], []
    for pb in ob.pose.bones:
        if drawable(rig_reader.read_limit(pb)):
            (shown if _bone_visible(pb.bone) else hidden).append(pb.name)
    return shown, hidden


def flattened_joints(ob, depsgraph, bones) -> list[tuple[str, str]]:
    """(bone, the bone whose zero scale flattens its joint) for each of ``bones`` of armature
    ``ob`` whose joint has no frame in its evaluated pose (``joint_frame``), whose limit
    ``armature_shapes`` leaves out."""
    pose = ob.evaluated_get(depsgraph).pose
    return [(name, flattening_bone(pose.bones[name])) for name in bones if joint_frame(pose.bones[name]) is None]


def visibility_note(ob, depsgraph) -> list[str]:
    """Lines for the sidebar under Show Limits when what is drawn of armature ``ob`` is not all its
    limits: none to draw, or some (or all) not drawn: on hidden bones, or flattened by a zero
    scale above them (``flattened_joints``). [] otherwise."""
    shown, hidden = limited_bones(ob)
    if not shown and not hidden:
        return ["No bone has a joint limit to draw"]
    total = len(shown) + len(hidden)

    def count(n, what):
        return (f"{n} bone{'s' if n > 1 else ''} with limits, all {what}:" if n == total
                else f"{n} of {total} bones with limits {what}:")

    lines = []
    if hidden:
        bone = ob.data.bones[hidden[0]]
        if bone.hide:
            how = "unhide it"
        else:
            names = ", ".join(f'"{c.name}"' for c in bone.collections)
            how = f"show bone collection {names}" if len(bone.collections) == 1 else f"show one of {names}"
        lines += [count(len(hidden), "hidden"), "their limits are not drawn", f'(e.g. "{bone.name}": {how})']
    flat = flattened_joints(ob, depsgraph, shown)
    if flat:
        bone, by = flat[0]
        lines += [count(len(flat), "flattened"), "their limits are not drawn",
                  f'(e.g. "{bone}": "{by}" has a zero scale)']
    return lines


def armatures_to_draw(context) -> list:
    """The visible armatures whose limits are drawn: the active one and any in Pose Mode."""
    active = context.view_layer.objects.active
    out = []
    for ob in context.view_layer.objects:
        if ob.type == 'ARMATURE' and ob.pose is not None and (ob == active or ob.mode == 'POSE') \
                and ob.visible_get(view_layer=context.view_layer):
            out.append(ob)
    return out


def scene_primitives(context, depsgraph=None) -> tuple[Primitives, Primitives]:
    """(primitives drawn with the depth test, primitives drawn in front) of every armature
    ``armatures_to_draw`` gives (an armature shown In Front has its limits in front too)."""
    depsgraph = depsgraph or context.evaluated_depsgraph_get()
    depth, front = [], []
    for ob in armatures_to_draw(context):
        prims = [transformed(local_primitives(s), m) for s, m in armature_shapes(ob, depsgraph)]
        (front if ob.show_in_front else depth).extend(prims)
    return merged(depth), merged(front)


# --------------------------------------------------------------------------------------------
# Drawing (gpu)
# --------------------------------------------------------------------------------------------


def draw_primitives(prims: Primitives, viewport_size, *, depth_test: bool = True) -> None:
    """Draws ``prims`` with the current gpu matrices (a POST_VIEW handler's, or an offscreen's)."""
    if not len(prims):
        return
    import gpu
    from gpu_extras.batch import batch_for_shader

    gpu.state.blend_set('ALPHA')
    gpu.state.depth_mask_set(False)
    gpu.state.depth_test_set('LESS_EQUAL' if depth_test else 'NONE')
    try:
        if len(prims.tris):
            shader = gpu.shader.from_builtin('SMOOTH_COLOR')
            batch_for_shader(shader, 'TRIS', {"pos": prims.tris, "color": prims.tri_colors}).draw(shader)
        if len(prims.lines):
            shader = gpu.shader.from_builtin('POLYLINE_SMOOTH_COLOR')
            shader.uniform_float("viewportSize", tuple(float(v) for v in viewport_size))
            shader.uniform_float("lineWidth", LINE_WIDTH)
            batch_for_shader(shader, 'LINES', {"pos": prims.lines, "color": prims.line_colors}).draw(shader)
    finally:
        gpu.state.blend_set('NONE')
        gpu.state.depth_test_set('NONE')
        gpu.state.depth_mask_set(True)


def draw_scene_limits(context, viewport_size, depsgraph=None) -> int:
    """Draws the limits of ``armatures_to_draw``; returns how many vertices it drew."""
    depth, front = scene_primitives(context, depsgraph)
    draw_primitives(depth, viewport_size, depth_test=True)
    draw_primitives(front, viewport_size, depth_test=False)
    return len(depth) + len(front)


_handle = None
_reported: set = set()


def _draw_handler():
    context = bpy.context
    scene = context.scene
    if scene is None or not getattr(scene, "sinew_show_limits", False):
        return
    if rig_reader.engine_problem() is not None:  # the limits come from the engine; the sidebar says why not
        return
    try:
        region = context.region
        draw_scene_limits(context, (region.width, region.height))
    except Exception as ex:  # never a traceback on every redraw: once per kind of failure
        key = repr(ex)
        if key not in _reported:
            _reported.add(key)
            traceback.print_exc()
            print(f"Sinew: drawing the limits failed ({ex!r}); please report this")


def handler_registered() -> bool:
    return _handle is not None


def sync() -> None:
    """Adds the draw handler while some scene has Show Limits on, removes it otherwise."""
    global _handle
    try:
        want = any(getattr(s, "sinew_show_limits", False) for s in bpy.data.scenes)
    except AttributeError:  # bpy.data is restricted while add-ons register at startup
        want = False
    if want and _handle is None:
        _handle = bpy.types.SpaceView3D.draw_handler_add(_draw_handler, (), 'WINDOW', 'POST_VIEW')
    elif not want and _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, 'WINDOW')
        _handle = None
    if _handle is None:
        clear_caches()


def _toggled(self, context):
    sync()
    for window in getattr(context.window_manager, "windows", ()):
        for area in window.screen.areas:
            if area.type == 'VIEW_3D':
                area.tag_redraw()


@bpy.app.handlers.persistent
def _after_load(*_args):
    sync()


# --------------------------------------------------------------------------------------------
# An image of the limits without a window (headless Blender: the demo, the tests)
# --------------------------------------------------------------------------------------------


def gpu_ready() -> bool:
    """True when the ``gpu`` module can draw (it cannot in background mode until Blender has made
    a GPU context)."""
    import gpu

    try:
        gpu.platform.backend_type_get()
    except SystemError:
        return False
    return True


def init_gpu_headless(scene) -> bool:
    """In background mode, makes Blender create its GPU context the way it does for a render: one
    4 × 4 Workbench render of ``scene`` from a temporary camera; everything it set is put back.
    Returns ``gpu_ready()`` (False where no GPU or software OpenGL can be opened)."""
    if gpu_ready():
        return True
    render = scene.render
    saved = (scene.camera, render.engine, render.resolution_x, render.resolution_y, render.resolution_percentage,
             render.filepath)
    cam_data = bpy.data.cameras.new("sinew_gpu_init")
    cam = bpy.data.objects.new("sinew_gpu_init", cam_data)
    scene.collection.objects.link(cam)
    try:
        scene.camera = cam
        render.engine = 'BLENDER_WORKBENCH'
        render.resolution_x = render.resolution_y = 4
        render.resolution_percentage = 100
        bpy.ops.render.render(write_still=False)
    except RuntimeError:
        pass
    finally:
        (scene.camera, render.engine, render.resolution_x, render.resolution_y, render.resolution_percentage,
         render.filepath) = saved
        scene.collection.objects.unlink(cam)
        bpy.data.objects.remove(cam)
        bpy.data.cameras.remove(cam_data)
        for view_layer in scene.view_layers:
            view_layer.update()
    return gpu_ready()


def render_view(context, view_matrix, projection_matrix, width: int, height: int, *, limits: bool = True):
    """Draws the 3D viewport of ``context`` (its VIEW_3D area: shading and overlays as set there)
    and, with ``limits``, the limits over it, into an offscreen buffer; returns (height, width, 4)
    float pixels, bottom row first. Needs a GPU context: in background mode Blender makes one for
    its first render (the caller renders once before), otherwise ``gpu`` raises SystemError."""
    import gpu

    area = next(a for w in context.window_manager.windows for a in w.screen.areas if a.type == 'VIEW_3D')
    region = next(r for r in area.regions if r.type == 'WINDOW')
    offscreen = gpu.types.GPUOffScreen(width, height)
    try:
        offscreen.draw_view3d(context.scene, context.view_layer, area.spaces.active, region,
                              view_matrix, projection_matrix, do_color_management=True, draw_background=True)
        with offscreen.bind():
            gpu.matrix.load_matrix(view_matrix)
            gpu.matrix.load_projection_matrix(projection_matrix)
            if limits:
                draw_scene_limits(context, (width, height))
            fb = gpu.state.active_framebuffer_get()
            buf = fb.read_color(0, 0, width, height, 4, 0, 'FLOAT')
    finally:
        offscreen.free()
    buf.dimensions = width * height * 4
    return np.array(buf, dtype=np.float32).reshape(height, width, 4)


def save_png(pixels: np.ndarray, path: str) -> None:
    """Writes (height, width, 4) float pixels (bottom row first, display space) to a PNG."""
    height, width = pixels.shape[:2]
    img = bpy.data.images.new("sinew_limits_render", width, height, alpha=True)
    try:
        img.colorspace_settings.name = 'sRGB'
        img.pixels.foreach_set(np.clip(pixels, 0.0, 1.0).astype(np.float32).ravel())
        img.filepath_raw = str(path)
        img.file_format = 'PNG'
        img.save()
    finally:
        bpy.data.images.remove(img)


# --------------------------------------------------------------------------------------------


def register():
    bpy.types.Scene.sinew_show_limits = BoolProperty(
        name="Show Limits",
        description="Draw each bone's joint limit in the 3D viewport (Blender's IK limits merged with Sinew's): "
                    "cones as surfaces at the joint, hinge and twist ranges as arcs, orange where the pose is at a "
                    "bound",
        default=False, options=set(), update=_toggled)
    bpy.app.handlers.load_post.append(_after_load)
    sync()


def unregister():
    global _handle
    if _after_load in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(_after_load)
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, 'WINDOW')
        _handle = None
    clear_caches()
    del bpy.types.Scene.sinew_show_limits
