"""Blender bake benchmark (issue #3): Sinew's Bake IK to Keyframes against Blender's own IK
constraints (Standard/Legacy solver, then iTaSC) followed by Blender's visual-keying bake, in one
headless bpy process, on the same rig and the same animated targets.

Run from the repository root:

    .venv/bin/python bench/blender_bake.py [--frames 1000] [--repeat 3] [--rigs chain,metarig]

It installs the newest dist/sinew-*.zip the way the tests do (building it with
scripts/build_extension.sh when there is none) into a private BLENDER_USER_RESOURCES, then for
each rig, on a freshly built scene per measurement:

* **step**: ``scene.frame_set`` through the range plus reading every target's evaluated matrix,
  with no IK at all: what merely stepping the scene costs;
* **sinew**: ``pipeline.BakeJob`` (what the *Bake IK to Keyframes* operator runs), timed whole
  and by phase (read rig, sample targets, solve = the engine call, write keys); with the add-on's
  default tolerance, with a ten times tighter one, and with frame stepping forced
  (``sampling="frames"``, how every target was sampled before F-curve sampling, and still how
  parented, constrained or driven targets are);
* **legacy** / **itasc**: Blender IK constraints on the same bones with the same chain lengths
  and targets. Solving = stepping with the constraints on minus stepping with them muted; then
  ``anim_utils.bake_action`` with visual keying (the chain bones only), timed whole;
* **error**: after each bake the constraints are muted, the frames are stepped and every
  effector (the goal bone's tail) is compared with its target (mean and max distance; for
  orientation goals also the angle between the bone's and the target's rotation).

Times are the median over ``--repeat`` runs (all runs are in the JSON). Results:
bench/results/blender_bake.md (table) and bench/results/blender_bake.json (raw numbers).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="sinew-bench-")

import bpy  # noqa: E402
import addon_utils  # noqa: E402
import numpy as np  # noqa: E402
from bpy_extras import anim_utils  # noqa: E402
from mathutils import Vector  # noqa: E402

import bundled_addon  # noqa: E402
from bench_scene import activate, key_fcurves, new_empty  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MODULE = "bl_ext.user_default.sinew"

# Blender IK settings (see "fairness" in the report): the constraint's own iteration cap for
# the Standard solver (its default, 500), and iTaSC converging on every frame.
LEGACY_ITERATIONS = 500
ITASC_ITERATIONS = 1000        # the maximum Blender allows
ITASC_PRECISION = 1e-4         # metres; Blender's default is 0.005
SINEW_ITERATIONS = 100         # the add-on's defaults
SINEW_TOLERANCE = 1e-4
SINEW_TIGHT_TOLERANCE = 1e-5   # a second Sinew run, for the error comparison
REACHED = 1e-4                 # metres: an effector this close to its target counts as on it
ERROR_SLACK = 1e-5             # metres: "equal error" allows this much (a tenth of Sinew's tolerance)


# --------------------------------------------------------------------------------------------
# Set-up
# --------------------------------------------------------------------------------------------


def install_addon():
    zips = sorted((ROOT / "dist").glob("sinew-*.zip"), key=lambda p: p.stat().st_mtime)
    if not zips:
        print("bench: no dist/sinew-*.zip; building it with scripts/build_extension.sh", flush=True)
        subprocess.run([str(ROOT / "scripts" / "build_extension.sh")], check=True, stdout=subprocess.DEVNULL)
        zips = sorted((ROOT / "dist").glob("sinew-*.zip"), key=lambda p: p.stat().st_mtime)
    zip_path = zips[-1]
    bundled_addon.install(zip_path, "bench")
    addon_utils.enable("rigify", default_set=True)
    return zip_path


class Scene:
    """A rig with animated target empties and its goal definitions."""

    def __init__(self, ob, goals, frames, description):
        self.ob = ob
        self.goals = goals          # [(bone, target empty, chain_length, use_rotation)]
        self.frames = frames
        self.description = description

    def chain_bones(self):
        out = []
        for bone, _t, n, _r in self.goals:
            pb = self.ob.pose.bones[bone]
            for _ in range(n):
                if pb is None:
                    break
                if pb.name not in out:
                    out.append(pb.name)
                pb = pb.parent
        return out

    def use(self, method):
        """Gives the rig its goals for ``method``: 'none', 'sinew' (Sinew goals) or 'blender'
        (Blender IK constraints)."""
        for bone, target, chain, rot in self.goals:
            pb = self.ob.pose.bones[bone]
            if method == "sinew":
                s = pb.sinew
                s.use_goal, s.target, s.chain_length, s.use_orientation = True, target, chain, rot
            elif method == "blender":
                c = pb.constraints.new('IK')
                c.name = "IK"
                c.target, c.chain_count, c.use_rotation = target, chain, rot
                c.iterations = LEGACY_ITERATIONS
                c.use_stretch = False

    def ik_constraints(self):
        return [pb.constraints["IK"] for pb in self.ob.pose.bones if "IK" in pb.constraints]

    def targets(self):
        return [t for _b, t, _n, _r in self.goals]


def build_chain(frames):
    """A 10-bone chain, 0.5 m bones up +Z with a gentle rest bend and rolls; one goal at the tip
    (chain length 10) following a smooth Lissajous path inside its 5 m reach."""
    bpy.ops.wm.read_homefile(use_empty=True)
    arm = bpy.data.armatures.new("Chain")
    ob = bpy.data.objects.new("Chain", arm)
    bpy.context.scene.collection.objects.link(ob)
    activate(ob)
    bpy.ops.object.mode_set(mode='EDIT')
    prev, head = None, Vector((0.0, 0.0, 0.0))
    for i in range(10):
        eb = arm.edit_bones.new(f"b{i:02d}")
        d = Vector((math.sin(0.06 * (i + 1)), 0.0, math.cos(0.06 * (i + 1)))) * 0.5
        eb.head, eb.tail = head, head + d
        eb.roll = 0.3 * i
        if prev is not None:
            eb.parent, eb.use_connect = prev, True
        prev, head = eb, head + d
    bpy.ops.object.mode_set(mode='OBJECT')
    t = new_empty("Target")
    f = np.asarray(frames, dtype=np.float64)
    w = 2 * math.pi * (f - f[0]) / 240.0
    loc = np.stack([1.6 + 1.1 * np.sin(w), 0.9 * np.sin(1.7 * w + 0.4), 3.1 + 0.9 * np.cos(1.3 * w)], axis=1)
    key_fcurves(t, "location", loc, frames)
    return Scene(ob, [("b09", t, 10, False)], frames, "10-bone chain (0.5 m bones), 1 goal (position), chain length 10")


CYCLE = 40        # frames per walk cycle (two steps)
STEP = 0.32       # metres the body travels per step


def build_metarig(frames):
    """Rigify's human metarig (159 bones) walking forward (the armature object is animated), its
    hands, feet and head following animated empties, as in demo/run_demo.py: goals on hand.L/R
    and foot.L/R (chain length 3; the feet also match the targets' rotation) and spine.006 (the
    head, chain length 4)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_human_metarig_add()
    ob = bpy.context.active_object
    fwd = Vector((0.0, -1.0, 0.0))  # the metarig faces -Y
    mw = ob.matrix_world.copy()
    rest = {b: mw @ ob.data.bones[b].tail_local for b in ("foot.L", "foot.R", "hand.L", "hand.R", "spine.006")}
    foot_rot = {s: (mw @ ob.data.bones[f"foot.{s}"].matrix_local).to_euler() for s in "LR"}
    names = {"foot.L": "Foot.L", "foot.R": "Foot.R", "hand.L": "Hand.L", "hand.R": "Hand.R", "spine.006": "Head"}
    empties = {b: new_empty(n) for b, n in names.items()}
    f = np.asarray(frames, dtype=np.float64)
    n = len(f)
    t = (f - f[0]) / CYCLE * 2 * math.pi
    speed = 2 * STEP / CYCLE
    travel = speed * (f - f[0])
    bob = 0.025 * np.cos(2 * t)
    start = Vector(ob.location)
    body = np.array(start)[None, :] + np.outer(travel, fwd)
    key_fcurves(ob, "location", body + np.stack([np.zeros(n), np.zeros(n), -0.06 + bob], axis=1), frames)
    for side, phase, sx in (("L", 0.0, 1.0), ("R", math.pi, -1.0)):
        s = np.sin(t + phase)
        swing = np.maximum(0.0, np.cos(t + phase))
        foot = np.array(rest[f"foot.{side}"])[None, :] + np.outer(travel + STEP / 2 * s, fwd) \
            + np.outer(0.09 * swing, (0, 0, 1))
        key_fcurves(empties[f"foot.{side}"], "location", foot, frames)
        r = foot_rot[side]
        key_fcurves(empties[f"foot.{side}"], "rotation_euler",
                   np.stack([r.x - 0.35 * swing, np.full(n, r.y), np.full(n, r.z)], axis=1), frames)
        hand = body + np.array((0.27 * sx, 0.0, 0.98))[None, :] - np.outer(0.16 * s, fwd) \
            + np.outer(0.04 * np.abs(s) - 0.06 + bob, (0, 0, 1))
        key_fcurves(empties[f"hand.{side}"], "location", hand, frames)
    head = np.array(rest["spine.006"])[None, :] + np.outer(travel, fwd) \
        + np.stack([0.03 * np.sin(t), np.full(n, -0.03), -0.07 + bob + 0.015 * np.sin(2 * t + 1)], axis=1)
    key_fcurves(empties["spine.006"], "location", head, frames)
    goals = [(b, empties[b], 4 if b == "spine.006" else 3, b.startswith("foot")) for b in names]
    return Scene(ob, goals, frames, "Rigify human metarig (159 bones) walking; goals on hands and feet (chain 3, "
                                    "feet with rotation) and head (chain 4)")


BUILDERS = {"chain": build_chain, "metarig": build_metarig}


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------


def step_range(sc: Scene):
    """frame_set through the range and read every target's evaluated matrix; returns seconds."""
    scene = bpy.context.scene
    dg = bpy.context.evaluated_depsgraph_get()
    objs = sc.targets()
    t0 = time.perf_counter()
    for f in sc.frames:
        scene.frame_set(int(f))
        for o in objs:
            o.evaluated_get(dg).matrix_world.translation.copy()
    return time.perf_counter() - t0


def effector_errors(sc: Scene):
    """Steps the range and compares each effector (goal bone tail) with its target (world space):
    mean and max distance, the max angle between bone and target rotation over orientation goals
    (degrees, None without such goals), per goal the max distance, and how many frames have every
    effector within REACHED of its target."""
    scene = bpy.context.scene
    dg = bpy.context.evaluated_depsgraph_get()
    dist, rot = np.zeros((len(sc.frames), len(sc.goals))), []
    for k, f in enumerate(sc.frames):
        scene.frame_set(int(f))
        ob = sc.ob.evaluated_get(dg)
        for g, (bone, target, _n, use_rot) in enumerate(sc.goals):
            pb = ob.pose.bones[bone]
            tm = target.evaluated_get(dg).matrix_world
            dist[k, g] = (ob.matrix_world @ pb.tail - tm.translation).length
            if use_rot:
                qb = (ob.matrix_world @ pb.matrix).to_3x3().normalized().to_quaternion()
                qt = tm.to_3x3().normalized().to_quaternion()
                rot.append(math.degrees(qb.rotation_difference(qt).angle))
    return {"err_mean": float(dist.mean()), "err_max": float(dist.max()),
            "rot_err_max_deg": float(max(rot)) if rot else None,
            "err_max_per_goal": {b: float(dist[:, g].max()) for g, (b, _t, _n, _r) in enumerate(sc.goals)},
            "frames_within_tolerance": int(np.sum(np.all(dist <= REACHED, axis=1)))}


def measure_step(builder, frames):
    sc = builder(frames)
    sc.use("none")
    bpy.context.scene.frame_set(int(frames[0]))
    return {"step_s": step_range(sc)}


def measure_sinew(builder, frames, addon, tolerance=SINEW_TOLERANCE, sampling="auto"):
    sc = builder(frames)
    sc.use("sinew")
    activate(sc.ob)
    scene = bpy.context.scene
    scene.frame_set(int(frames[0]))
    settings = addon.pipeline.Settings(max_iterations=SINEW_ITERATIONS, tolerance=tolerance)
    t0 = time.perf_counter()
    kw = {} if sampling == "auto" else {"sampling": sampling}
    job = addon.pipeline.BakeJob(bpy.context, sc.ob, int(frames[0]), int(frames[-1]), settings, **kw)
    t1 = time.perf_counter()
    r = job.run()
    t2 = time.perf_counter()
    return {
        "wall_s": t2 - t0, "read_s": t1 - t0, "sample_s": r.sample_seconds, "solve_s": r.solve_seconds,
        "write_s": r.write_seconds, "sampling": getattr(r, "sampling", "frames"), "per_frame": bool(r.per_frame),
        "iterations_mean": float(np.mean(r.iterations)), "iterations_max": int(np.max(r.iterations)),
        "frames_reached": int(np.sum(r.reached)), "engine_residual_max": r.worst_residual,
        "bones_keyed": len(r.keyed), **effector_errors(sc),
    }


def measure_blender(builder, frames, solver):
    sc = builder(frames)
    sc.use("blender")
    ob = sc.ob
    ob.pose.ik_solver = solver
    if solver == 'ITASC':
        p = ob.pose.ik_param
        p.mode = 'ANIMATION'
        p.reiteration_method = 'ALWAYS'
        p.iterations = ITASC_ITERATIONS
        p.precision = ITASC_PRECISION
    activate(ob)
    scene = bpy.context.scene
    cons = sc.ik_constraints()
    scene.frame_set(int(frames[0]))
    for c in cons:
        c.mute = True
    off = step_range(sc)
    for c in cons:
        c.mute = False
    on = step_range(sc)
    # Visual-keying bake of the chain bones (what Bake Action does with "Only Selected").
    chain = set(sc.chain_bones())
    for pb in ob.pose.bones:
        pb.select = pb.name in chain
    opts = anim_utils.BakeOptions(
        only_selected=True, do_pose=True, do_object=False, do_visual_keying=True, do_constraint_clear=False,
        do_parents_clear=False, do_clean=False, do_location=True, do_rotation=True, do_scale=False,
        do_bbone=False, do_custom_props=False)
    scene.frame_set(int(frames[0]))
    t0 = time.perf_counter()
    # The object's own (walking) animation must survive: bake into a copy of its action.
    ad = ob.animation_data
    action = ad.action.copy() if (ad is not None and ad.action is not None) else None
    if action is not None:
        slot = ad.action_slot
        ad.action = action
        ad.action_slot = slot if slot in action.slots.values() else action.slots[0]
    anim_utils.bake_action(ob, action=action, frames=range(int(frames[0]), int(frames[-1]) + 1),
                           bake_options=opts)
    bake = time.perf_counter() - t0
    for c in cons:
        c.mute = True
    return {"on_s": on, "off_s": off, "solve_s": on - off, "bake_s": bake, **effector_errors(sc)}


def median_runs(runs):
    out = {}
    for k, v in runs[0].items():
        if isinstance(v, float) and k.endswith("_s"):
            out[k] = statistics.median(r[k] for r in runs)
        else:
            out[k] = v
    return out


def run_rig(name, frames, repeat, addon):
    builder = BUILDERS[name]
    runs = {"step": [], "sinew": [], "sinew_tight": [], "sinew_frames": [], "legacy": [], "itasc": []}
    for i in range(repeat):
        runs["step"].append(measure_step(builder, frames))
        runs["sinew"].append(measure_sinew(builder, frames, addon))
        runs["sinew_tight"].append(measure_sinew(builder, frames, addon, SINEW_TIGHT_TOLERANCE))
        runs["sinew_frames"].append(measure_sinew(builder, frames, addon, sampling="frames"))
        runs["legacy"].append(measure_blender(builder, frames, 'LEGACY'))
        runs["itasc"].append(measure_blender(builder, frames, 'ITASC'))
        print(f"  {name} run {i + 1}/{repeat}: step {runs['step'][-1]['step_s']:.3f} s, "
              f"sinew {runs['sinew'][-1]['wall_s']:.3f} s (solve {runs['sinew'][-1]['solve_s']:.3f}, "
              f"targets from {runs['sinew'][-1]['sampling']}), "
              f"legacy solve {runs['legacy'][-1]['solve_s']:.3f} bake {runs['legacy'][-1]['bake_s']:.3f}, "
              f"itasc solve {runs['itasc'][-1]['solve_s']:.3f} bake {runs['itasc'][-1]['bake_s']:.3f}", flush=True)
    sc = builder(frames)
    med = {k: median_runs(v) for k, v in runs.items()}
    return {"rig": name, "description": sc.description, "frames": len(frames), "bones": len(sc.ob.data.bones),
            "goals": len(sc.goals), "median": med, "runs": runs}


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def ms(s):
    return f"{s * 1000:.0f} ms" if s >= 0.1 else f"{s * 1000:.1f} ms"


def mm(m):
    return f"{m * 1000:.3f}"


SINEW_ROWS = (("sinew", f"Sinew, tolerance {SINEW_TOLERANCE * 1000:g} mm"),
              ("sinew_tight", f"Sinew, tolerance {SINEW_TIGHT_TOLERANCE * 1000:g} mm"))


def goals_for(res, sinew_key="sinew"):
    m = res["median"]
    s, step = m[sinew_key], m["step"]["step_s"]
    out = []
    for key, label in (("legacy", "Standard"), ("itasc", "iTaSC")):
        b = m[key]
        speed = b["solve_s"] / s["solve_s"] if s["solve_s"] > 0 else float("inf")
        err_ok = s["err_mean"] <= b["err_mean"] + ERROR_SLACK and s["err_max"] <= b["err_max"] + ERROR_SLACK
        out.append({"goal": f"solve >= 100x faster than {label} IK at equal or lower error",
                    "ratio": speed, "error_ok": err_ok, "met": speed >= 100 and err_ok})
        out.append({"goal": f"whole bake faster than {label} IK + visual-keying bake",
                    "ratio": b["bake_s"] / s["wall_s"], "met": s["wall_s"] < b["bake_s"]})
    out.insert(0, {"goal": "whole bake <= 1.2x stepping the scene", "ratio": s["wall_s"] / step,
                   "met": s["wall_s"] <= 1.2 * step,
                   "note": f"the engine call alone is {s['solve_s'] / step:.2f}x stepping"})
    return out


def table(res):
    m = res["median"]
    s, step = m["sinew"], m["step"]["step_s"]
    lines = [
        f"**{res['rig']}**: {res['description']}; {res['frames']} frames.",
        "",
        "| method | whole bake | solving part | sampling | writing keys | effector error mean / max (mm) | "
        f"frames with every effector within {REACHED * 1000:g} mm | rotation error max |",
        "|---|---|---|---|---|---|---|---|",
        f"| stepping the scene (`frame_set` + read targets, no IK) | {ms(step)} | – | – | – | – | – | – |",
    ]
    for key, label in SINEW_ROWS + (("sinew_frames", f"{SINEW_ROWS[0][1]}, forced to step frames"),):
        s = m[key]
        rot = f"{s['rot_err_max_deg']:.4f}°" if s["rot_err_max_deg"] is not None else "–"
        lines.append(f"| {label} (`BakeJob`, targets from {s['sampling']}) | {ms(s['wall_s'])} | "
                     f"{ms(s['solve_s'])} | {ms(s['sample_s'])} | {ms(s['write_s'])} | "
                     f"{mm(s['err_mean'])} / {mm(s['err_max'])} | {s['frames_within_tolerance']} | {rot} |")
    for key, label in (("legacy", "Blender IK, Standard"), ("itasc", "Blender IK, iTaSC")):
        b = m[key]
        rot = f"{b['rot_err_max_deg']:.4f}°" if b["rot_err_max_deg"] is not None else "–"
        lines.append(f"| {label} + `bake_action` (visual keying) | {ms(b['bake_s'])} | {ms(b['solve_s'])} "
                     f"(on {ms(b['on_s'])} − muted {ms(b['off_s'])}) | – | – | "
                     f"{mm(b['err_mean'])} / {mm(b['err_max'])} | {b['frames_within_tolerance']} | {rot} |")
    lines += ["", "| Sinew setting | goal | measured | met? |", "|---|---|---|---|"]
    for key, label in SINEW_ROWS:
        for g in goals_for(res, key):
            extra = "" if "error_ok" not in g else (", error equal or lower" if g["error_ok"] else ", error higher")
            if "note" in g:
                extra += f" ({g['note']})"
            lines.append(f"| {label} | {g['goal']} | {g['ratio']:.2f}×{extra} | "
                         f"{'**met**' if g['met'] else '**missed**'} |")
    return "\n".join(lines)


def git_state():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "rust", "blender_addon"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--frames", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rigs", default="chain,metarig")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    args = ap.parse_args()
    zip_path = install_addon()
    addon = sys.modules[MODULE]
    frames = list(range(1, args.frames + 1))
    import sinew

    print(f"bench: {zip_path.name} (engine {sinew.__version__}), Blender {bpy.app.version_string}, "
          f"{args.frames} frames, {args.repeat} runs", flush=True)
    results = []
    for name in args.rigs.split(","):
        results.append(run_rig(name.strip(), frames, args.repeat, addon))
    meta = {
        "command": " ".join(["bench/blender_bake.py"] + sys.argv[1:]),
        "blender": bpy.app.version_string, "python": platform.python_version(), "engine": sinew.__version__,
        "extension": zip_path.name, "git": git_state(), "cpus": os.cpu_count(), "load_avg": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "repeat": args.repeat,
        "settings": {"sinew": {"max_iterations": SINEW_ITERATIONS, "tolerance": SINEW_TOLERANCE},
                 "sinew_tight": {"max_iterations": SINEW_ITERATIONS, "tolerance": SINEW_TIGHT_TOLERANCE},
                     "legacy": {"iterations": LEGACY_ITERATIONS, "use_stretch": False},
                     "itasc": {"mode": "ANIMATION", "reiteration_method": "ALWAYS",
                               "iterations": ITASC_ITERATIONS, "precision": ITASC_PRECISION}},
    }
    md = [f"Blender bake benchmark: `{meta['command']}`, Blender {meta['blender']} (bpy module), "
          f"{meta['extension']}, git {meta['git']}, {meta['date']}, {meta['cpus']} CPUs, "
          f"load average at the end {meta['load_avg'][0]:.1f}; times are medians of {args.repeat} runs.",
          "",
          f"Settings: Sinew {SINEW_ITERATIONS} iterations, tolerance {SINEW_TOLERANCE * 1000:g} mm (the add-on's "
          f"defaults), and again with tolerance {SINEW_TIGHT_TOLERANCE * 1000:g} mm; Blender Standard: {LEGACY_ITERATIONS} iterations per constraint, no stretch; iTaSC: Animation "
          f"mode, reiterate always, {ITASC_ITERATIONS} iterations, precision {ITASC_PRECISION * 1000:g} mm. "
          f"\"Equal error\" allows {ERROR_SLACK * 1000:g} mm. Errors are measured on the baked keys (IK muted).",
          ""]
    for res in results:
        md += [table(res), ""]
    text = "\n".join(md)
    print(text)
    for res in results:
        res["goals_check"] = {key: goals_for(res, key) for key, _label in SINEW_ROWS}
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "blender_bake.md").write_text(text + "\n", encoding="utf-8")
        (RESULTS / "blender_bake.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n",
                                                   encoding="utf-8")
        print(f"wrote {RESULTS / 'blender_bake.md'} and blender_bake.json")


if __name__ == "__main__":
    main()
