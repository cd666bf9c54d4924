"""Key reduction on the demo's bake: how many keys stay at a given angle tolerance, how long the
reduction takes, and how far Blender's evaluated pose moves from the unreduced bake.

Run from the repository root (after scripts/build_extension.sh):

    .venv/bin/python bench/key_reduction.py [--frames 250] [--angles 0.1,0.5] [--repeat 3]

It installs the newest dist/sinew-*.zip as demo/run_demo.py does and builds the demo's scene
(the Rigify human metarig walking, hands, feet and head tracking animated empties; knee hinges,
elbow and thigh cones) afresh for every bake. The unreduced bake is the *Bake IK to Keyframes*
operator's work (``pipeline.BakeJob``, the operator's defaults); each reduced bake is the same
with ``Settings(key_reduction=True, reduction_angle=radians(angle), reduction_distance=1e-4)``
(the dialog's Reduce Keys with that angle, which it shows in degrees). For each, every
frame is stepped and every keyed bone's local rotation is recovered from Blender's evaluated pose
matrices and compared with the unreduced bake's. Prints a Markdown table; the time is the
reduction's own (median of ``--repeat`` bakes), not the bake's.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "demo"))

import run_demo as demo  # noqa: E402  (sets BLENDER_USER_RESOURCES, imports bpy)

import bpy  # noqa: E402
import numpy as np  # noqa: E402


def build(frames):
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_human_metarig_add()
    ob = bpy.context.active_object
    targets = demo.walk(ob, frames)
    demo.set_goals(ob, targets)
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    bpy.context.scene.frame_set(frames[0])
    return ob


def evaluated_locals(ob, names, frames):
    """Per frame, {bone: local rotation} from Blender's evaluated armature-space pose matrices."""
    scene = bpy.context.scene
    out = []
    for f in frames:
        scene.frame_set(f)
        e = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        row = {}
        for name in names:
            pb = e.pose.bones[name]
            rest = pb.bone.matrix_local
            base = rest if pb.parent is None else pb.parent.matrix @ pb.parent.bone.matrix_local.inverted() @ rest
            row[name] = (base.inverted() @ pb.matrix).to_quaternion()
        out.append(row)
    return out


def angle(a, b):
    """In double precision (mathutils' single-precision dot and acos near 1 lose ~0.01°)."""
    a, b = np.array(a, dtype=np.float64), np.array(b, dtype=np.float64)
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    if np.dot(a, b) < 0.0:
        b = -b
    return 4.0 * math.asin(min(1.0, np.linalg.norm(a - b) / 2.0))


PARTS = {"legs": ("thigh", "shin", "foot"), "arms": ("upper_arm", "forearm", "hand"), "spine": ("spine",)}


def kept_by_part(addon, ob, keyed):
    """{part: (keys, frames × bones)} of the first rotation channel of each keyed bone."""
    ad = ob.animation_data
    if addon.keys.SLOTTED:
        fcurves = addon.keys.ensure_channelbag(ad.action, ad.action_slot).fcurves
    else:
        fcurves = ad.action.fcurves
    out = {}
    for part, prefixes in PARTS.items():
        bones = [n for n in keyed if n.split(".")[0] in prefixes]
        n = sum(len(fcurves.find(f'pose.bones["{b}"].rotation_quaternion', index=0).keyframe_points) for b in bones)
        out[part] = (n, len(bones))
    return out


def bake(addon, frames, reduction):
    """The demo's bake; ``reduction``: None, or (angle radians, distance) for Reduce Keys."""
    ob = build(frames)
    settings = addon.pipeline.Settings()
    if reduction is not None:
        settings.key_reduction = True
        settings.reduction_angle, settings.reduction_distance = reduction
    job = addon.pipeline.BakeJob(bpy.context, ob, frames[0], frames[-1], settings)
    result = job.run()
    return ob, result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=250)
    ap.add_argument("--angles", default="0.1,0.5", help="tolerances in degrees, comma-separated")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    demo.install_addon()
    addon = sys.modules[demo.MODULE]
    frames = list(range(1, args.frames + 1))

    ob, full = bake(addon, frames, None)
    keyed = list(full.keyed)
    reference = evaluated_locals(ob, keyed, frames)
    rows = []
    for degrees in (float(a) for a in args.angles.split(",")):
        seconds, results = [], []
        for _ in range(args.repeat):
            ob, r = bake(addon, frames, (math.radians(degrees), 1e-4))
            seconds.append(r.reduction.seconds)
            results.append(r)
        r = results[-1]
        posed = evaluated_locals(ob, keyed, frames)
        worst = max(angle(a[n], b[n]) for a, b in zip(reference, posed) for n in keyed)
        red = r.reduction
        rows.append((degrees, red, statistics.median(seconds), worst, len(r.blender_misses), kept_by_part(addon, ob, keyed)))

    print(f"\nDemo bake: {len(frames)} frames, {len(keyed)} keyed bones ({', '.join(keyed)}), "
          f"bake {full.seconds:.2f} s unreduced\n")
    print("| tolerance | keys kept | fraction kept | legs / arms / spine | reduction time (median) | largest "
          "deviation (reduction's fcurve.evaluate) | largest deviation (Blender's evaluated pose vs the unreduced "
          "bake) |")
    print("|---|---|---|---|---|---|---|")
    for degrees, red, secs, worst, _misses, parts in rows:
        by_part = " / ".join(f"{100 * k / (b * len(frames)):.0f}%" for k, b in parts.values())
        print(f"| {degrees:g}° | {red.keys_after} of {red.keys_before} | {100 * red.kept_fraction:.1f}% | {by_part} | "
              f"{secs * 1000:.0f} ms | {math.degrees(red.max_angle):.4f}° | {math.degrees(worst):.4f}° |")
    bad = [(d, w) for d, _r, _s, w, m, _p in rows if w > math.radians(d) + 2e-5 or m]
    if bad:
        sys.exit(f"key reduction: tolerance exceeded or the bake's check failed at {bad}")


if __name__ == "__main__":
    main()
