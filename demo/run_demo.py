"""Sinew demo in headless Blender: a Rigify human walks, its hands, feet and head tracking
animated empties, baked by the Sinew add-on.

Run with `./dev demo` (or `.venv/bin/python demo/run_demo.py [--frames N] [--no-render]` after
`scripts/build_extension.sh`). It installs the newest dist/sinew-*.zip the way a user would (into a
private BLENDER_USER_RESOURCES), builds the scene, runs Sinew's "Bake IK to Keyframes" operator,
saves demo_out/sinew_demo.blend and renders a few frames to demo_out/*.png with Workbench, and
demo_out/sinew_limits.png: the 3D view with the add-on's Show Limits on (the picture in
docs/limits.png), drawn offscreen with the gpu module.
"""

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="sinew-demo-")

import bpy  # noqa: E402
import addon_utils  # noqa: E402
import bmesh  # noqa: E402
from mathutils import Euler, Matrix, Vector  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "demo_out"
MODULE = "bl_ext.user_default.sinew"

CYCLE = 40        # frames per walk cycle (two steps)
STEP = 0.32       # metres the body travels per step
FORWARD = Vector((0.0, -1.0, 0.0))  # the metarig faces -Y


def install_addon():
    """Installs the newest zip as a user would, its engine imported from the extension (not a
    ``sinew`` in the venv, which would come first on sys.path and which the add-on refuses to run
    on: bench/bundled_addon.py)."""
    zips = sorted((ROOT / "dist").glob("sinew-*.zip"), key=lambda p: p.stat().st_mtime)
    if not zips:
        sys.exit("demo: no dist/sinew-*.zip; run scripts/build_extension.sh first")
    sys.path.insert(0, str(ROOT / "bench"))
    import bundled_addon

    version = bundled_addon.install(zips[-1], "demo")
    addon_utils.enable("rigify", default_set=True)
    print(f"installed {zips[-1].name} (engine {version})")


def skin(ob):
    """A low-poly body: one tapered cylinder per body bone, rigidly skinned to it (vertex group
    + Armature modifier), so the render shows the posed skeleton as a figure."""
    skip = ("face", "breast", "pelvis", "heel", "palm")
    bones = [b for b in ob.data.bones
             if not any(b.name.startswith(s) for s in skip) and not _under(b, "face")]
    mesh = bpy.data.meshes.new("Body")
    body = bpy.data.objects.new("Body", mesh)
    bpy.context.scene.collection.objects.link(body)
    bm = bmesh.new()
    deform = bm.verts.layers.deform.verify()
    radii = {"spine": (0.13, 0.12), "spine.001": (0.12, 0.12), "spine.002": (0.12, 0.14),
             "spine.003": (0.14, 0.11), "spine.004": (0.045, 0.045), "spine.005": (0.045, 0.05),
             "thigh": (0.08, 0.055), "shin": (0.055, 0.04), "foot": (0.04, 0.03), "toe": (0.03, 0.02),
             "shoulder": (0.04, 0.05), "upper_arm": (0.045, 0.038), "forearm": (0.036, 0.028),
             "hand": (0.03, 0.025)}
    for b in bones:
        key = b.name if b.name in radii else b.name.split(".")[0]
        r, r_tip = radii.get(key, (max(0.006, 0.18 * b.length), max(0.005, 0.14 * b.length)))
        group = body.vertex_groups.new(name=b.name).index
        if b.name == "spine.006":  # the head: a sphere
            geom = bmesh.ops.create_uvsphere(bm, u_segments=16, v_segments=10, radius=0.11)
            to_bone = b.matrix_local @ Matrix.Translation((0, b.length * 0.45, -0.01))
        else:
            geom = bmesh.ops.create_cone(bm, cap_ends=True, cap_tris=False, segments=12, radius1=r, radius2=r_tip,
                                         depth=b.length)
            # Cone along Z centred at 0 -> along the bone (+Y from head to tail), armature space.
            to_bone = b.matrix_local @ Matrix.Translation((0, b.length / 2, 0)) @ Matrix.Rotation(-math.pi / 2, 4, 'X')
        bmesh.ops.transform(bm, matrix=to_bone, verts=geom["verts"])
        for v in geom["verts"]:
            v[deform][group] = 1.0  # rigid skinning (bmesh may reuse freed slots: no index ranges)
    bm.to_mesh(mesh)
    bm.free()
    body.parent = ob
    mod = body.modifiers.new("Armature", 'ARMATURE')
    mod.object = ob
    for p in mesh.polygons:
        p.use_smooth = True
    body.color = (0.85, 0.55, 0.35, 1.0)
    return body


def _under(bone, name):
    while bone is not None:
        if bone.name == name:
            return True
        bone = bone.parent
    return False


def empty(name, loc, size=0.05, shape='SPHERE'):
    e = bpy.data.objects.new(name, None)
    e.empty_display_type = shape
    e.empty_display_size = size
    e.location = loc
    bpy.context.scene.collection.objects.link(e)
    return e


def walk(ob, frames):
    """Keys the armature object walking forward (bobbing) and the empties its hands, feet and
    head track: feet plant and swing, hands swing opposite, the head nods and looks around."""
    def world_tail(bone):
        return ob.matrix_world @ ob.data.bones[bone].tail_local

    rest = {b: world_tail(b) for b in ("foot.L", "foot.R", "hand.L", "hand.R", "spine.006")}
    foot_rot = {s: (ob.matrix_world @ ob.data.bones[f"foot.{s}"].matrix_local).to_euler() for s in "LR"}
    targets = {
        "foot.L": empty("Foot.L", rest["foot.L"], 0.06, 'ARROWS'),
        "foot.R": empty("Foot.R", rest["foot.R"], 0.06, 'ARROWS'),
        "hand.L": empty("Hand.L", rest["hand.L"]),
        "hand.R": empty("Hand.R", rest["hand.R"]),
        "spine.006": empty("Head", rest["spine.006"]),
    }
    start = ob.location.copy()
    speed = 2 * STEP / CYCLE
    for f in frames:
        t = (f - frames[0]) / CYCLE * 2 * math.pi
        body = start + FORWARD * speed * (f - frames[0])
        bob = 0.025 * math.cos(2 * t)
        ob.location = body + Vector((0.0, 0.0, -0.06 + bob))
        ob.keyframe_insert("location", frame=f)
        for side, phase, sx in (("L", 0.0, 1.0), ("R", math.pi, -1.0)):
            s = math.sin(t + phase)
            swing = max(0.0, math.cos(t + phase))  # lift only while the foot swings forward
            foot = targets[f"foot.{side}"]
            foot.location = rest[f"foot.{side}"] + FORWARD * (speed * (f - frames[0]) + STEP / 2 * s) \
                + Vector((0.0, 0.0, 0.09 * swing))
            foot.rotation_euler = Euler((foot_rot[side].x - 0.35 * swing, foot_rot[side].y, foot_rot[side].z))
            foot.keyframe_insert("location", frame=f)
            foot.keyframe_insert("rotation_euler", frame=f)
            hand = targets[f"hand.{side}"]
            hand.location = body + Vector((0.27 * sx, 0.0, 0.98)) - FORWARD * 0.16 * s \
                + Vector((0.0, 0.0, 0.04 * abs(s) - 0.06 + bob))
            hand.keyframe_insert("location", frame=f)
        head = targets["spine.006"]
        head.location = rest["spine.006"] + FORWARD * speed * (f - frames[0]) \
            + Vector((0.03 * math.sin(t), -0.03, -0.07 + bob + 0.015 * math.sin(2 * t + 1)))
        head.keyframe_insert("location", frame=f)
    return targets


def set_goals(ob, targets):
    chains = {"foot.L": 3, "foot.R": 3, "hand.L": 3, "hand.R": 3, "spine.006": 4}
    for bone, t in targets.items():
        s = ob.pose.bones[bone].sinew
        s.use_goal = True
        s.target = t
        s.chain_length = chains[bone]
        s.use_orientation = bone.startswith("foot")  # keep the feet's pitch from the trackers
    # Knees bend forward only, elbows backward only: hinges about the bones' own X axes, and a
    # cone on the thighs; the metarig's rolls put X across the body.
    for side in "LR":
        knee = ob.pose.bones[f"shin.{side}"]
        knee.lock_ik_y = knee.lock_ik_z = True
        knee.use_ik_limit_x, knee.ik_min_x, knee.ik_max_x = True, 0.0, math.radians(150)
        elbow = ob.pose.bones[f"forearm.{side}"]
        elbow.sinew.use_cone = True
        elbow.sinew.cone_x_pos, elbow.sinew.cone_x_neg = math.radians(140), math.radians(5)
        elbow.sinew.cone_z_pos = elbow.sinew.cone_z_neg = math.radians(10)
        thigh = ob.pose.bones[f"thigh.{side}"]
        thigh.sinew.use_cone = True
        thigh.sinew.cone_x_pos, thigh.sinew.cone_x_neg = math.radians(45), math.radians(90)  # back, forward
        thigh.sinew.cone_z_pos = thigh.sinew.cone_z_neg = math.radians(25)
        thigh.sinew.use_twist, thigh.sinew.twist_min, thigh.sinew.twist_max = True, -0.3, 0.3


def stage(ob, frames):
    scene = bpy.context.scene
    ground = bpy.data.objects.new("Ground", bpy.data.meshes.new("Ground"))
    bm = bmesh.new()
    bmesh.ops.create_grid(bm, x_segments=12, y_segments=24, size=3.0)
    bm.to_mesh(ground.data)
    bm.free()
    ground.scale = (1.0, 2.0, 1.0)
    ground.location = (0.0, -2.0, 0.0)
    ground.color = (0.55, 0.58, 0.62, 1.0)
    scene.collection.objects.link(ground)
    cam_data = bpy.data.cameras.new("Camera")
    cam_data.lens = 30
    cam = bpy.data.objects.new("Camera", cam_data)
    scene.collection.objects.link(cam)
    scene.camera = cam
    aim = empty("CameraAim", (0.0, 0.0, 1.0), 0.01)
    aim.parent = ob  # follows the walking figure at hip height
    track = cam.constraints.new('TRACK_TO')
    track.target = aim
    track.track_axis, track.up_axis = 'TRACK_NEGATIVE_Z', 'UP_Y'
    cam.parent = None
    dist = 2 * STEP / CYCLE * (frames[-1] - frames[0])
    for f, y in ((frames[0], 0.0), (frames[-1], -dist)):
        cam.location = (3.4, y - 1.7, 1.25)
        cam.keyframe_insert("location", frame=f)
    scene.render.engine = 'BLENDER_WORKBENCH'
    scene.display.shading.light = 'STUDIO'
    scene.display.shading.color_type = 'OBJECT'
    scene.display.shading.show_shadows = True
    scene.display.shading.show_cavity = True
    scene.render.resolution_x, scene.render.resolution_y = 960, 540
    scene.render.resolution_percentage = 100
    scene.render.image_settings.file_format = 'PNG'
    scene.frame_start, scene.frame_end = frames[0], frames[-1]
    world = bpy.data.worlds.new("World")
    scene.world = world
    world.color = (0.9, 0.92, 0.95)


def frame_at_most_bounds(addon, ob, frames):
    """The frame of ``frames`` where the most limits are at a bound (the first of equals)."""
    scene = bpy.context.scene
    frame0, best, most = scene.frame_current, frames[0], -1
    for f in frames:
        scene.frame_set(f)
        shapes = addon.limit_drawing.armature_shapes(ob, bpy.context.evaluated_depsgraph_get())
        n = sum(s.swing_at_bound + s.twist_at_bound for s, _m in shapes)
        if n > most:
            best, most = f, n
    scene.frame_set(frame0)
    return best


def render_limits(addon, ob, frame, path):
    """The 3D view (Solid shading, overlays) from a camera near the figure at ``frame``, with the
    add-on's Show Limits on, drawn offscreen (headless Blender has a GPU context once it has
    rendered: software OpenGL works). Changes to the scene are put back."""
    ld = addon.limit_drawing
    scene = bpy.context.scene
    if not ld.init_gpu_headless(scene):
        print("limits picture: no GPU context in this Blender (no EGL/OpenGL), skipped")
        return None
    body = bpy.data.objects["Body"]
    space = next(a.spaces.active for a in bpy.context.window.screen.areas if a.type == 'VIEW_3D')
    saved = (scene.frame_current, body.color[:], ob.select_get(), space.shading.type, space.shading.color_type,
             space.shading.light, scene.sinew_show_limits)
    W, H = 960, 540
    try:
        scene.frame_set(frame)
        body.color = (0.72, 0.74, 0.78, 1.0)  # neutral, so the limits' colours read
        ob.select_set(False)
        space.shading.type, space.shading.color_type, space.shading.light = 'SOLID', 'OBJECT', 'STUDIO'
        scene.sinew_show_limits = True
        dg = bpy.context.evaluated_depsgraph_get()
        hips = ob.evaluated_get(dg).matrix_world @ ob.pose.bones["spine"].head
        eye = hips + Vector((2.65, -1.55, 0.27))
        cam = bpy.data.objects.new("LimitsCamera", bpy.data.cameras.new("LimitsCamera"))
        cam.data.lens = 28
        cam.location = eye
        cam.rotation_euler = (hips + Vector((0.0, 0.0, 0.06)) - eye).to_track_quat('-Z', 'Y').to_euler()
        scene.collection.objects.link(cam)
        bpy.context.view_layer.update()
        view = cam.matrix_world.inverted()
        proj = cam.calc_matrix_camera(bpy.context.evaluated_depsgraph_get(), x=W, y=H)
        cam.hide_set(True)  # not drawn in its own picture
        pixels = ld.render_view(bpy.context, view, proj, W, H, limits=True)
        ld.save_png(pixels, str(path))
        bpy.data.objects.remove(cam)
    finally:
        frame0, color, selected, shading, color_type, light, show = saved
        scene.frame_set(frame0)
        body.color = color
        ob.select_set(selected)
        space.shading.type, space.shading.color_type, space.shading.light = shading, color_type, light
        scene.sinew_show_limits = show
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=250)
    ap.add_argument("--no-render", action="store_true")
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    install_addon()
    addon = sys.modules[MODULE]

    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_human_metarig_add()
    ob = bpy.context.active_object
    ob.data.display_type = 'STICK'
    ob.show_in_front = True
    frames = list(range(1, args.frames + 1))
    skin(ob)
    targets = walk(ob, frames)
    set_goals(ob, targets)
    stage(ob, frames)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    scene = bpy.context.scene
    scene.frame_set(1)

    n_bones = len(ob.data.bones)
    t0 = time.perf_counter()
    result = bpy.ops.sinew.bake('INVOKE_DEFAULT', frame_start=frames[0], frame_end=frames[-1])
    dt = time.perf_counter() - t0
    assert result == {'FINISHED'}, result
    analysis = addon.rig_reader.analysis(ob)
    print(f"rig: {n_bones} bones, {len(analysis['goals'])} goals, sub-bases: {analysis['sub_bases']}")
    for bone, source, moved in analysis["goals"]:
        print(f"  {bone:10} ({source}) moves {moved}")
    print(f"bake: {len(frames)} frames in {dt:.3f} s = {dt / len(frames) * 1000:.2f} ms/frame "
          f"(operator wall clock: sample, solve, write keys)")

    # Residuals as Blender shows them: effector tails against the trackers, every frame.
    worst = {b: 0.0 for b in targets}
    t0 = time.perf_counter()
    for f in frames:
        scene.frame_set(f)
        dg = bpy.context.evaluated_depsgraph_get()
        e = ob.evaluated_get(dg)
        for bone, t in targets.items():
            tail = e.matrix_world @ e.pose.bones[bone].tail
            worst[bone] = max(worst[bone], (tail - t.evaluated_get(dg).matrix_world.translation).length)
    print(f"evaluated residuals over {len(frames)} frames (max, metres): "
          + ", ".join(f"{b} {w:.2e}" for b, w in worst.items())
          + f"  [{(time.perf_counter() - t0) / len(frames) * 1000:.2f} ms/frame to evaluate]")

    scene.frame_set(1)
    blend = OUT / "sinew_demo.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    print(f"saved {blend}")
    if not args.no_render:
        for f in sorted({frames[0], frames[len(frames) // 4], frames[len(frames) // 2], frames[-1] - 5}):
            scene.frame_set(f)
            scene.render.filepath = str(OUT / f"sinew_demo_{f:04d}.png")
            t0 = time.perf_counter()
            bpy.ops.render.render(write_still=True)
            print(f"rendered {scene.render.filepath} ({time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        if render_limits(addon, ob, frame_at_most_bounds(addon, ob, frames[:CYCLE]), OUT / "sinew_limits.png"):
            print(f"rendered {OUT / 'sinew_limits.png'} (the 3D view with Show Limits on, offscreen; "
                  f"{time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
