"""Real-motion benchmark: judges IK *poses* on motion capture, Sinew against Blender's own IK.

Run from the repository root (one headless bpy process):

    .venv/bin/python -m pip install -r bench/requirements.txt     # once: pybullet, for its data
    .venv/bin/python bench/real_motion.py [--clips crawl,jump] [--frames N] [--step K] [--repeat 3]
                                          [--variants poles,nopoles] [--solvers standard,itasc,sinew]
                                          [--zip dist/sinew-<ver>.zip] [--render DIR] [--no-write]

A default run (all nine clips, every frame: 1112 frames, both variants, three solvers, timing
best of 3) takes about 20 s here after the extension is built, so nothing is subsampled; --step
and --frames exist for quick runs. --render DIR only renders the retargeted truth (Workbench
PNGs, side view) to check the retargeting by eye.

Motion: the DeepMimic clips that ship in pybullet_data (data/motions/humanoid3d_<name>.txt). Only
crawl, getup_facedown, getup_faceup, jump, kick, punch, roll, spin and spinkick are ever loaded
(walk, run, dance and the acrobatic clips are held out). Frame layout (checked against
pybullet_envs/deep_mimic/env/humanoid_pose_interpolator.py): [duration, root pos xyz, root quat
wxyz, chest, neck, right hip (quat), right knee (angle), right ankle, right shoulder (quat), right
elbow (angle), left hip, left knee, left ankle, left shoulder, left elbow]. The DeepMimic character
(pybullet_data/humanoid/humanoid.urdf, loaded with globalScaling 0.25) is Y up, X forward, Z to
its right; every joint frame is the parent's at rest; knees and elbows turn about Z.

Retargeting onto Rigify's basic_human metarig (29 bones, scaled to 1.75 m; it faces -Y, Z up), the
FK "truth":

* axes: Blender = M @ DeepMimic with M: X->-Y (forward), Y->Z (up), Z->-X (the character's right);
  a DeepMimic rotation R becomes M R M^T;
* root: the hips bone `spine` takes the root rotation; the root position (horizontal start moved
  to the origin, scaled by 1.75 m / the DeepMimic character's 1.619 m) is put at the middle of the
  metarig's hip joints (thigh heads), so `spine`'s head is keyed there plus its rotated offset;
* chest rotation spread evenly (q^(1/3) each) over spine.001, spine.002, spine.003 (the chest);
  neck rotation spread evenly (q^(1/2)) over spine.004 and spine.005; the head (spine.006) at rest;
* limbs: the upper bone (thigh, upper_arm) is turned so that it points along the clip's upper
  limb, with the twist that puts the lower bone's (shin, forearm) local X on the clip's hinge
  axis (knees: X = the character's left, so positive X bends the knee back; elbows: X = its
  right, positive X bends forward); the lower bone then turns about its local X only, by the angle
  that points it along the clip's lower limb (single-axis hinges, as the clip's 1-DoF joints);
* everything else (shoulders/clavicles, hands, feet, toes, pelvis, breasts, heels) at rest.

Scenes (one per solver x variant x clip, built fresh): the same rig with only the root (`spine`
location + rotation) keyed, every other bone at rest, and keyed empties at the truth's world
positions of both forearm tails, both shin tails and the neck top (spine.005's tail). Blender IK
constraints: forearm.L/R and shin.L/R chain_count 2; spine.005 chain_count 5 (spine.005 down to
spine.001: every spine bone the truth moves; the root `spine` is keyed). Per-bone IK limits on the
13 chain bones from the truth's own range in this clip plus 10 degrees (the range always contains
the rest pose); shins and forearms: X limited, Y and Z locked. Limits are read as Blender's IK
solver reads them (intern/iksolver IK_QSegment.cpp, IK_Math.h): the local rotation is split into
swing * twist (twist about Y); X and Z bound the swing through an ellipse per quadrant on the
swing quaternion's (x, z) components (semi-axes sin(limit/2)), Y bounds the twist. Sinew's cone
(rust/sinew/src/limits.rs) puts the same quarter ellipses on the swing's rotation vector
instead, a slightly different shape: each swing quadrant is widened (2% steps) until the truth is
inside both, and violations are counted both ways.
Variant "poles": pole empties for the 4 limbs keyed in front of the true knee/elbow (the true
upper bone's -Z direction, pole_angle -90 degrees: with Blender's convention the top bone's
X cos(a) + Z sin(a) faces the pole), one upper-limb length away, perpendicular to the limb line.

Solvers: Blender Standard (pose.ik_solver 'LEGACY', 500 iterations, no stretch), Blender iTaSC
(Animation mode, reiterate always, 1000 iterations, precision 0.1 mm), each evaluated frame by
frame (frame_set, then the evaluated pose matrices); Sinew: the built extension is installed and
`bpy.ops.sinew.bake` (Bake IK to Keyframes, add-on defaults: 100 iterations, 0.1 mm, root pinned)
runs over the range; it mutes the IK constraints it replaced and keys the result, which is then
evaluated frame by frame.

Metrics per solver x variant x clip and in total (world space, 1.75 m character): internal joint
error (heads of spine.002-.005, upper_arm, forearm (elbow), shin (knee): 10 joints; spine.001's
head is the keyed root bone's tail) mean / max mm;
effector error (the 5 goal tails against their targets) mean / max mm; frames with any IK-limit
violation beyond 1e-3 rad; the largest per-frame turn of any bone (local rotation) against the
motion's own; "pops": frames where some bone turns more than the clip's own largest per-frame
turn + 0.01 rad; ms per frame of solving (Blender: stepping with the constraints on minus muted,
best of 2; Sinew: the bake's engine time, `BakeResult.solve_seconds`, as bench/blender_bake.py).
Bake against Solve IK (Sinew, the first of its bakes): before baking, each frame is read as Solve
IK reads it there (`pipeline.read_solve_input`: the pose before IK as start and reference) and
solved on its own with the engine call Solve IK makes; the frames where some bone of the bake's
answer differs from that solve by more than 1e-3 rad (the natural-poses issue's bound) are
counted, with those beyond 1e-2 rad and the largest difference.
Round-off (the same single solves): each solved again with every target moved by 1e-12 m in
three random directions (seeded), and the frames where some bone moves by more than 1e-6 rad
counted (the issue's continuity bound), with the largest move.

Results: bench/results/real_motion.json and real_motion.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MODULE = "bl_ext.user_default.sinew"

CLIPS = ("crawl", "getup_facedown", "getup_faceup", "jump", "kick", "punch", "roll", "spin", "spinkick")
SOLVERS = ("standard", "itasc", "sinew")
VARIANTS = ("nopoles", "poles")

HEIGHT = 1.75
# The DeepMimic humanoid's height (humanoid.urdf x globalScaling 0.25): hip->knee 1.686184,
# knee->ankle 1.639480, ankle->sole 0.09 + 0.11 (foot box), root->chest 0.944604, chest->neck
# 0.895576, neck sphere centre 0.7 + radius 0.41.
DM_HEIGHT = 0.25 * (1.686184 + 1.639480 + 0.2 + 0.944604 + 0.895576 + 0.7 + 0.41)
MARGIN = math.radians(10.0)
VIOLATION = 1e-3
POP_SLACK = 0.01
# A bake's frame is the same pose as a solve of that frame alone from its reference when no bone
# differs by more than this (rad; the natural-poses issue's bound on the warm start).
WARM_COLD = 1e-3
# The continuity: a target moved by ROUND_OFF_MOVE (every target of a frame, in
# ROUND_OFF_TRIES random directions) moves no bone of the frame's single solve by more than
# ROUND_OFF_TURN.
ROUND_OFF_MOVE = 1e-12
ROUND_OFF_TRIES = 3
ROUND_OFF_TURN = 1e-6
POLE_ANGLE = -math.pi / 2

LEGACY_ITERATIONS = 500
ITASC_ITERATIONS = 1000
ITASC_PRECISION = 1e-4

SPINE = ["spine.001", "spine.002", "spine.003"]
NECK = ["spine.004", "spine.005"]
LIMBS = {  # lower bone: (upper bone, kind, side)
    "shin.L": ("thigh.L", "knee", "L"), "shin.R": ("thigh.R", "knee", "R"),
    "forearm.L": ("upper_arm.L", "elbow", "L"), "forearm.R": ("upper_arm.R", "elbow", "R"),
}
GOALS = [("forearm.L", 2), ("forearm.R", 2), ("shin.L", 2), ("shin.R", 2), ("spine.005", 5)]
# spine.001's head is the keyed root bone's tail (always exact): the spine joints start above it.
JOINTS = ["spine.002", "spine.003"] + NECK + ["upper_arm.L", "upper_arm.R", "forearm.L", "forearm.R", "shin.L", "shin.R"]
HINGES = ("shin.L", "shin.R", "forearm.L", "forearm.R")

# Blender = M @ DeepMimic (columns: images of DeepMimic X, Y, Z).
M = [[0.0, 0.0, -1.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]


def find_motions():
    spec = importlib.util.find_spec("pybullet_data")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("real_motion: pybullet_data is missing; install it with\n"
                 "    .venv/bin/python -m pip install -r bench/requirements.txt")
    d = Path(list(spec.submodule_search_locations)[0]) / "data" / "motions"
    if not d.is_dir():
        sys.exit(f"real_motion: {d} not found (pybullet_data without motions?)")
    return d


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clips", default=",".join(CLIPS))
    ap.add_argument("--frames", type=int, default=0, help="cap on frames per clip (default: all)")
    ap.add_argument("--step", type=int, default=1, help="use every K-th clip frame (default 1: all)")
    ap.add_argument("--variants", default="nopoles,poles")
    ap.add_argument("--solvers", default=",".join(SOLVERS))
    ap.add_argument("--repeat", type=int, default=3,
                    help="timing runs: Blender steps the range this many times with IK on and muted (best of "
                         "each); Sinew bakes this many fresh scenes (best engine time; metrics from the first)")
    ap.add_argument("--zip", default=None, help="extension zip (default: build with scripts/build_extension.sh)")
    ap.add_argument("--render", default=None, metavar="DIR",
                    help="only render the truth of a few frames per clip to DIR (Workbench PNG) and stop")
    ap.add_argument("--render-frames", default="0.2,0.5,0.8", help="fractions of each clip to render")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    ap.add_argument("--save-problems", default=None, metavar="DIR",
                    help="also write each frame's exported single-solve problem (sinew.problem/1) and the bake's "
                         "answer to DIR/<clip>_<variant>.json, for replaying the solves outside Blender")
    args = ap.parse_args()
    for c in args.clips.split(","):
        if c not in CLIPS:
            sys.exit(f"real_motion: clip {c!r} is not one of the benchmark clips {CLIPS} (others are held out)")
    for s in args.solvers.split(","):
        if s not in SOLVERS:
            sys.exit(f"real_motion: unknown solver {s!r}")
    for v in args.variants.split(","):
        if v not in VARIANTS:
            sys.exit(f"real_motion: unknown variant {v!r}")
    return args


ARGS = parse_args() if __name__ == "__main__" else None
MOTIONS = find_motions()

os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="sinew-real-motion-")

import bpy  # noqa: E402
import addon_utils  # noqa: E402
import bmesh  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Matrix, Vector  # noqa: E402

import bundled_addon  # noqa: E402
from bench_scene import activate, key_fcurves, new_empty  # noqa: E402

M = np.array(M)


# --------------------------------------------------------------------------------------------
# Small rotation helpers (numpy)
# --------------------------------------------------------------------------------------------


def quat_to_mat(q):
    """(..., 4) wxyz -> (..., 3, 3)."""
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)


def mat_to_quat(m):
    return np.array(Matrix(m.tolist()).to_quaternion())


def quat_pow(q, t):
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q)
    if q[0] < 0:
        q = -q
    ang = 2 * math.acos(min(1.0, q[0]))
    s = np.linalg.norm(q[1:])
    if s < 1e-12:
        return np.array([1.0, 0, 0, 0])
    axis = q[1:] / s
    return np.concatenate([[math.cos(t * ang / 2)], math.sin(t * ang / 2) * axis])


def rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def unit(v):
    return v / np.linalg.norm(v)


def swing_twist(R):
    """Local rotation(s) (..., 3, 3) -> (..., 3): Blender's IK-limit parameters (IK_Math.h,
    SphericalRangeParameters): the rotation split as swing * twist, twist about Y; returns the
    swing quaternion's x and z components (sin of half the angle times the axis) and the twist
    angle."""
    R = np.asarray(R)
    num = 2.0 * np.maximum(1e-12, 1.0 + R[..., 1, 1])
    inv = 1.0 / np.sqrt(num)
    qx = R[..., 2, 1] * inv
    qz = -R[..., 0, 1] * inv
    tw = 2.0 * np.arctan2(R[..., 0, 2] - R[..., 2, 0], R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2] + 1.0)
    return np.stack([qx, qz, tw], -1)


def quadrant_limits(p, lo, hi):
    """Per sample, the x and z half-angles of the swing quadrant it lies in."""
    A = np.where(p[..., 0] >= 0, hi[0], -lo[0])
    B = np.where(p[..., 1] >= 0, hi[2], -lo[2])
    return A, B


def cone_excess(p, lo, hi):
    """How far (radians) swings lie outside the cone from (lo, hi) (x and z), 0 inside: Blender's
    ellipse on the swing quaternion's (x, z) (IK_QSphericalSegment, EllipseClamp) and Sinew's on
    the swing's rotation vector (limits.rs, ConeLimit). Returns (blender, sinew)."""
    A, B = quadrant_limits(p, lo, hi)
    qx, qz = p[..., 0], p[..., 1]
    s = np.sqrt(qx * qx + qz * qz)
    theta = 2 * np.arcsin(np.clip(s, 0, 1))
    e_b = (qx / np.sin(A / 2)) ** 2 + (qz / np.sin(B / 2)) ** 2
    safe = np.where(s > 1e-12, s, 1.0)
    rx, rz = theta * qx / safe, theta * qz / safe
    e_s = (rx / A) ** 2 + (rz / B) ** 2
    ex_b = np.where(e_b > 1, theta - 2 * np.arcsin(np.clip(s / np.sqrt(np.maximum(e_b, 1e-300)), 0, 1)), 0.0)
    ex_s = np.where(e_s > 1, theta - theta / np.sqrt(np.maximum(e_s, 1e-300)), 0.0)
    return ex_b, ex_s


def fit_limits(p, margin):
    """Limits (lo, hi) as (x, y, z) angles from samples p (F, 3) of swing_twist: the range (with
    the rest pose) plus margin on each axis, then each swing quadrant widened (x and z together,
    by 2% steps) until every sample is inside both Blender's ellipse and Sinew's cone."""
    ang = np.stack([2 * np.arcsin(np.clip(p[:, 0], -1, 1)), p[:, 2], 2 * np.arcsin(np.clip(p[:, 1], -1, 1))], 1)
    lo = np.maximum(np.minimum(ang.min(0), 0.0) - margin, -math.pi)
    hi = np.minimum(np.maximum(ang.max(0), 0.0) + margin, math.pi)
    for _ in range(200):
        ex_b, ex_s = cone_excess(p, lo, hi)
        bad = (ex_b > 0) | (ex_s > 0)
        if not bad.any():
            break
        for sx in (0, 1):
            for sz in (0, 1):
                q = bad & ((p[:, 0] >= 0) == bool(sx)) & ((p[:, 1] >= 0) == bool(sz))
                if not q.any():
                    continue
                if sx:
                    hi[0] = min(math.pi, hi[0] * 1.02)
                else:
                    lo[0] = max(-math.pi, lo[0] * 1.02)
                if sz:
                    hi[2] = min(math.pi, hi[2] * 1.02)
                else:
                    lo[2] = max(-math.pi, lo[2] * 1.02)
    return lo, hi


def rot_angle(R):
    """Angle of rotation matrices (..., 3, 3)."""
    tr = np.trace(R, axis1=-2, axis2=-1)
    return np.arccos(np.clip((tr - 1) / 2, -1.0, 1.0))


# --------------------------------------------------------------------------------------------
# Rig, clip, truth
# --------------------------------------------------------------------------------------------


def load_clip(name, cap, step):
    assert name in CLIPS, name  # the held-out clips are never opened
    with open(MOTIONS / f"humanoid3d_{name}.txt", encoding="utf-8") as fh:
        frames = np.array(json.load(fh)["Frames"], dtype=np.float64)
    assert frames.shape[1] == 44, frames.shape
    frames = frames[::step]
    if cap:
        frames = frames[:cap]
    return frames


def build_rig():
    """A fresh scene with Rigify's basic_human metarig scaled to HEIGHT (scale applied)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.object.armature_basic_human_metarig_add()
    ob = bpy.context.active_object
    top = max(b.tail_local.z for b in ob.data.bones)
    bottom = min(min(b.head_local.z, b.tail_local.z) for b in ob.data.bones)
    s = HEIGHT / (top - bottom)
    ob.scale = (s, s, s)
    bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    for pb in ob.pose.bones:
        pb.rotation_mode = 'QUATERNION'
    return ob


class RigData:
    def __init__(self, ob):
        bones = ob.data.bones
        self.names = [b.name for b in bones]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.parent = [self.index[b.parent.name] if b.parent else -1 for b in bones]
        self.rest = np.array([np.array(b.matrix_local) for b in bones])          # (N,4,4)
        self.lengths = np.array([b.length for b in bones])
        for i, p in enumerate(self.parent):
            assert p < i, "bones are not parent-first"

    def R(self, name):
        return self.rest[self.index[name], :3, :3]

    def fk(self, quats, root_loc):
        """quats (F,N,4) local, root_loc (F,3) -> pose matrices (F,N,4,4) armature (= world) space."""
        F, N = quats.shape[:2]
        basis = np.zeros((F, N, 4, 4))
        basis[..., :3, :3] = quat_to_mat(quats)
        basis[..., 3, 3] = 1
        out = np.zeros((F, N, 4, 4))
        for i in range(N):
            p = self.parent[i]
            b = basis[:, i]
            if p < 0:
                b = b.copy()
                b[:, :3, 3] = root_loc
                out[:, i] = self.rest[i] @ b
            else:
                rel = np.linalg.inv(self.rest[p]) @ self.rest[i]
                out[:, i] = out[:, p] @ rel @ b
        return out

    def heads_tails(self, poses):
        heads = poses[..., :3, 3]
        tails = heads + poses[..., :3, 1] * self.lengths[None, :, None]
        return heads, tails

    def local_rotations(self, poses):
        """Pose matrices (F,N,4,4) -> local rotations (F,N,3,3) (pose_bone.matrix_basis)."""
        F, N = poses.shape[:2]
        out = np.zeros((F, N, 3, 3))
        for i in range(N):
            p = self.parent[i]
            Ri = self.rest[i, :3, :3]
            if p < 0:
                out[:, i] = Ri.T @ poses[:, i, :3, :3]
            else:
                rel = self.rest[p, :3, :3].T @ Ri
                out[:, i] = rel.T @ np.swapaxes(poses[:, p, :3, :3], -1, -2) @ poses[:, i, :3, :3]
        return out


def retarget(rd: RigData, clip):
    """The FK truth: local quaternions (F,N,4) and the root bone's location (F,3)."""
    F, N = len(clip), len(rd.names)
    quats = np.zeros((F, N, 4))
    quats[..., 0] = 1
    root_loc = np.zeros((F, 3))
    scale = HEIGHT / DM_HEIGHT
    idx = rd.index
    sp = idx["spine"]
    hip_mid = 0.5 * (rd.rest[idx["thigh.L"], :3, 3] + rd.rest[idx["thigh.R"], :3, 3])
    spine_head = rd.rest[sp, :3, 3]
    origin = clip[0, 1:4].copy()
    origin[1] = 0.0  # keep the height
    Rs = rd.R("spine")
    for f, fr in enumerate(clip):
        q = lambda a: quat_to_mat(fr[a:a + 4])  # noqa: E731
        Rroot, Rchest, Rneck = q(4), q(8), q(12)
        D = {}
        D0 = M @ Rroot @ M.T
        D["spine"] = D0
        quats[f, sp] = mat_to_quat(Rs.T @ D0 @ Rs)
        pos = M @ ((fr[1:4] - origin) * scale)
        head = pos + D0 @ (spine_head - hip_mid)
        root_loc[f] = Rs.T @ (head - spine_head)
        # spine: the chest's rotation spread evenly; neck likewise; head at rest
        prev = D0
        for names, qq in ((SPINE, fr[8:12]), (NECK, fr[12:16])):
            E = M @ quat_to_mat(quat_pow(qq, 1.0 / len(names))) @ M.T
            for n in names:
                Rb = rd.R(n)
                quats[f, idx[n]] = mat_to_quat(Rb.T @ E @ Rb)
                prev = prev @ E
                D[n] = prev
        # limbs
        Rg = {"hip.R": Rroot @ q(16), "hip.L": Rroot @ q(30),
              "shoulder.R": Rroot @ Rchest @ q(25), "shoulder.L": Rroot @ Rchest @ q(39)}
        ang = {"knee.R": fr[20], "knee.L": fr[34], "elbow.R": fr[29], "elbow.L": fr[43]}
        for lower, (upper, kind, side) in LIMBS.items():
            g_up = Rg[("hip." if kind == "knee" else "shoulder.") + side]
            g_lo = g_up @ rot_z(ang[f"{kind}.{side}"])
            u = M @ g_up @ np.array([0.0, -1.0, 0.0])
            l_dir = M @ g_lo @ np.array([0.0, -1.0, 0.0])
            a = M @ g_up @ np.array([0.0, 0.0, 1.0])
            xt = -a if kind == "knee" else a
            Ru, Rl = rd.R(upper), rd.R(lower)
            y0, x0 = Ru[:, 1], Rl[:, 0]
            x0p = unit(x0 - (x0 @ y0) * y0)
            F_rest = np.stack([y0, x0p, np.cross(y0, x0p)], 1)
            F_tgt = np.stack([u, xt, np.cross(u, xt)], 1)
            Du = F_tgt @ F_rest.T
            parent_D = D0 if kind == "knee" else D["spine.003"]  # thighs hang from spine; arms from the shoulders
            quats[f, idx[upper]] = mat_to_quat(Ru.T @ parent_D.T @ Du @ Ru)
            G = Du @ Rl
            xw, yw = G[:, 0], G[:, 1]
            lp = l_dir - (l_dir @ xw) * xw
            phi = math.atan2(xw @ np.cross(yw, lp), yw @ lp)
            quats[f, idx[lower]] = [math.cos(phi / 2), math.sin(phi / 2), 0, 0]
    # keep each bone's quaternion in the hemisphere of the frame before (for keys)
    for f in range(1, F):
        flip = np.einsum("ni,ni->n", quats[f], quats[f - 1]) < 0
        quats[f, flip] *= -1
    return quats, root_loc


# --------------------------------------------------------------------------------------------
# Scene building
# --------------------------------------------------------------------------------------------


def key_bone(ob, bone, prop, values, frames):
    key_fcurves(ob, ob.pose.bones[bone].path_from_id(prop), values, frames, bone)


class Truth:
    """A clip's FK truth on the rig: local quaternions, poses, targets, poles, limits."""

    def __init__(self, rd: RigData, clip):
        self.quats, self.root_loc = retarget(rd, clip)
        self.poses = rd.fk(self.quats, self.root_loc)
        self.heads, self.tails = rd.heads_tails(self.poses)
        self.local = rd.local_rotations(self.poses)
        idx = rd.index
        self.targets = {b: self.tails[:, idx[b]] for b, _n in GOALS}
        self.poles = {}
        for lower, (upper, _k, _s) in LIMBS.items():
            hip = self.heads[:, idx[upper]]
            knee = self.heads[:, idx[lower]]
            eff = self.tails[:, idx[lower]]
            line = eff - hip
            line /= np.linalg.norm(line, axis=1, keepdims=True)
            n = -self.poses[:, idx[upper], :3, 2]          # top bone's X cos(-90°) + Z sin(-90°)
            n = n - np.einsum("fi,fi->f", n, line)[:, None] * line
            n /= np.linalg.norm(n, axis=1, keepdims=True)
            self.poles[lower] = knee + rd.lengths[idx[upper]] * n
        chain = chain_bones(rd)
        p = swing_twist(self.local[:, [idx[b] for b in chain]])  # (F, C, 3)
        self.limits = {b: fit_limits(p[:, c], MARGIN) for c, b in enumerate(chain)}
        turns = rot_angle(np.swapaxes(self.local[:-1], -1, -2) @ self.local[1:])  # (F-1, N)
        self.turns = turns
        self.max_turn = float(turns.max()) if turns.size else 0.0


def chain_bones(rd):
    out = []
    for b, n in GOALS:
        i = rd.index[b]
        for _ in range(n):
            out.append(rd.names[i])
            i = rd.parent[i]
    return out


def build_scene(truth: Truth, frames, variant, with_constraints=True):
    ob = build_rig()
    rd = RigData(ob)
    sp = rd.index["spine"]
    key_bone(ob, "spine", "location", truth.root_loc, frames)
    key_bone(ob, "spine", "rotation_quaternion", truth.quats[:, sp], frames)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = int(frames[0]), int(frames[-1])
    for b, n in GOALS:
        t = new_empty(f"T_{b}", 0.04)
        key_fcurves(t, "location", truth.targets[b], frames)
        if not with_constraints:
            continue
        c = ob.pose.bones[b].constraints.new('IK')
        c.name = "IK"
        c.target, c.chain_count = t, n
        c.iterations = LEGACY_ITERATIONS
        c.use_stretch = False
        if variant == "poles" and b in LIMBS:
            p = new_empty(f"P_{b}", 0.03)
            key_fcurves(p, "location", truth.poles[b], frames)
            c.pole_target = p
            c.pole_angle = POLE_ANGLE
    if with_constraints:
        for b, (lo, hi) in truth.limits.items():
            pb = ob.pose.bones[b]
            if b in HINGES:
                pb.use_ik_limit_x = True
                pb.ik_min_x, pb.ik_max_x = float(lo[0]), float(hi[0])
                pb.lock_ik_y = pb.lock_ik_z = True
            else:
                pb.use_ik_limit_x = pb.use_ik_limit_y = pb.use_ik_limit_z = True
                pb.ik_min_x, pb.ik_max_x = float(lo[0]), float(hi[0])
                pb.ik_min_y, pb.ik_max_y = float(lo[1]), float(hi[1])
                pb.ik_min_z, pb.ik_max_z = float(lo[2]), float(hi[2])
    scene.frame_set(int(frames[0]))
    return ob


def ik_constraints(ob):
    return [c for pb in ob.pose.bones for c in pb.constraints if c.type == 'IK']


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------


def read_poses(ob, frames):
    scene = bpy.context.scene
    dg = bpy.context.evaluated_depsgraph_get()
    n = len(ob.pose.bones)
    out = np.zeros((len(frames), n, 4, 4))
    buf = np.zeros(n * 16, dtype=np.float32)
    for k, f in enumerate(frames):
        scene.frame_set(int(f))
        ob.evaluated_get(dg).pose.bones.foreach_get("matrix", buf)
        out[k] = buf.reshape(n, 4, 4).transpose(0, 2, 1)
    mw = np.array(ob.matrix_world)
    assert np.allclose(mw, np.eye(4)), "the rig's object transform must be the identity"
    return out


def step_time(frames):
    scene = bpy.context.scene
    t0 = time.perf_counter()
    for f in frames:
        scene.frame_set(int(f))
    return time.perf_counter() - t0


def metrics(rd: RigData, truth: Truth, poses):
    idx = rd.index
    heads, tails = rd.heads_tails(poses)
    j = [idx[b] for b in JOINTS]
    jerr = np.linalg.norm(heads[:, j] - truth.heads[:, j], axis=-1)
    eerr = np.stack([np.linalg.norm(tails[:, idx[b]] - truth.targets[b], axis=-1) for b, _n in GOALS], 1)
    local = rd.local_rotations(poses)
    chain = list(truth.limits)
    p = swing_twist(local[:, [idx[b] for b in chain]])
    viol = np.zeros(len(poses), dtype=bool)      # Blender's limits as Blender reads them
    viol_s = np.zeros(len(poses), dtype=bool)    # the same, with Sinew's cone for the swing
    worst = 0.0
    per_bone = {}
    for c, b in enumerate(chain):
        lo, hi = truth.limits[b]
        pc = p[:, c]
        ax = 2 * np.arcsin(np.clip(pc[:, 0], -1, 1))
        az = 2 * np.arcsin(np.clip(pc[:, 1], -1, 1))
        if b in HINGES:
            over = np.stack([lo[0] - ax, ax - hi[0], np.abs(pc[:, 2]), np.abs(az)], 1).max(1)
            over_s = over
        else:
            tw = np.maximum(lo[1] - pc[:, 2], pc[:, 2] - hi[1])
            ex_b, ex_s = cone_excess(pc, lo, hi)
            over = np.maximum(tw, ex_b)
            over_s = np.maximum(tw, ex_s)
        worst = max(worst, float(over.max()))
        if np.any(over > VIOLATION) or np.any(over_s > VIOLATION):
            per_bone[b] = {"frames": int(np.sum(over > VIOLATION)), "frames_sinew_cone": int(np.sum(over_s > VIOLATION)),
                           "worst_rad": float(over.max())}
        viol |= over > VIOLATION
        viol_s |= over_s > VIOLATION
    turns = rot_angle(np.swapaxes(local[:-1], -1, -2) @ local[1:])
    pops = int(np.sum(np.any(turns > truth.max_turn + POP_SLACK, axis=1))) if turns.size else 0
    pops_own = int(np.sum(np.any(turns > truth.turns + POP_SLACK, axis=1))) if turns.size else 0
    return {
        "frames": len(poses),
        "joint_err_mean_mm": float(jerr.mean() * 1000), "joint_err_max_mm": float(jerr.max() * 1000),
        "joint_err_sum_mm": float(jerr.sum() * 1000), "joint_err_count": int(jerr.size),
        "joint_err_max_per_joint_mm": {b: float(jerr[:, k].max() * 1000) for k, b in enumerate(JOINTS)},
        "joint_err_mean_per_joint_mm": {b: float(jerr[:, k].mean() * 1000) for k, b in enumerate(JOINTS)},
        "eff_err_mean_mm": float(eerr.mean() * 1000), "eff_err_max_mm": float(eerr.max() * 1000),
        "eff_err_sum_mm": float(eerr.sum() * 1000), "eff_err_count": int(eerr.size),
        "violation_frames": int(viol.sum()), "violation_worst_rad": worst,
        "violation_frames_sinew_cone": int(viol_s.sum()), "violations_per_bone": per_bone,
        "max_turn_rad": float(turns.max()) if turns.size else 0.0, "motion_max_turn_rad": truth.max_turn,
        "pop_frames": pops, "pop_frames_vs_same_bone": pops_own,
    }


def run_blender(truth, frames, variant, solver, repeat):
    ob = build_scene(truth, frames, variant)
    ob.pose.ik_solver = 'LEGACY' if solver == "standard" else 'ITASC'
    if solver == "itasc":
        p = ob.pose.ik_param
        p.mode = 'ANIMATION'
        p.reiteration_method = 'ALWAYS'
        p.iterations = ITASC_ITERATIONS
        p.precision = ITASC_PRECISION
    cons = ik_constraints(ob)
    timings = {"on": [], "off": []}
    for _ in range(repeat):
        for mute, key in ((True, "off"), (False, "on")):
            for c in cons:
                c.mute = mute
            bpy.context.scene.frame_set(int(frames[0]))
            timings[key].append(step_time(frames))
    for c in cons:
        c.mute = False
    poses = read_poses(ob, frames)
    solve = max(0.0, min(timings["on"]) - min(timings["off"]))
    return poses, {"solve_s": solve, "on_s": min(timings["on"]), "off_s": min(timings["off"]), "runs": timings}


def cold_problems(ob, frames, addon):
    """Per frame, before the bake: what Solve IK would solve there (the pose before IK as both
    start and reference), read as Solve IK reads it (``pipeline.read_solve_input``), and as the
    add-on exports it (``sinew.problem/1`` text, for ``--save-problems``)."""
    inputs, docs = [], []
    settings = addon.pipeline.Settings()
    for f in frames:
        bpy.context.scene.frame_set(int(f))
        with bpy.context.temp_override(active_object=ob, object=ob, selected_objects=[ob]):
            inputs.append(addon.pipeline.read_solve_input(bpy.context, ob, settings))
            docs.append(json.dumps(addon.pipeline.export_problem(bpy.context, ob, settings)))
    return inputs, docs


def largest_angle(a, b):
    """The largest angle (rad) between corresponding rotations of ``a`` and ``b`` ((N, 4) each)."""
    dots = np.abs(np.einsum("ni,ni->n", np.asarray(a), np.asarray(b)))
    return float(np.max(2.0 * np.arccos(np.clip(dots, 0.0, 1.0))))


def warm_vs_cold(inputs, rotations, addon):
    """Per frame, the largest angle (rad) between a bone of the bake's answer (``rotations``
    (F, N, 4) in rig order) and the same bone of Solve IK's solve of that frame alone
    (``inputs``, :func:`cold_problems`: the same engine call Solve IK makes); and the largest
    angle that solve moves by when every target moves by ``ROUND_OFF_MOVE`` (in
    ``ROUND_OFF_TRIES`` random directions, the same on every run)."""
    rng = np.random.default_rng(12)
    settings = addon.pipeline.Settings()
    apart, moved = np.zeros(len(inputs)), np.zeros(len(inputs))
    for k, inp in enumerate(inputs):
        solver = settings.solver(inp.length_scale)
        goals = inp.engine_goals()
        cold = np.asarray(inp.solve(solver, settings.root, goals)[0].rotations)
        apart[k] = largest_angle(cold, rotations[k])
        targets = [np.asarray(g.target, dtype=float) for g in goals]
        for _ in range(ROUND_OFF_TRIES):
            for g, t in zip(goals, targets):
                d = rng.normal(size=3)
                g.target = t + ROUND_OFF_MOVE * d / np.linalg.norm(d)
            moved[k] = max(moved[k], largest_angle(inp.solve(solver, settings.root, goals)[0].rotations, cold))
    return apart, moved


def run_sinew(truth, frames, variant, addon, check_cold=False, save=None):
    ob = build_scene(truth, frames, variant)
    activate(ob)
    inputs, docs = cold_problems(ob, frames, addon) if check_cold else (None, None)
    jobs = []
    orig = addon.pipeline.BakeJob

    class Recording(orig):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            jobs.append(self)

    addon.pipeline.BakeJob = Recording
    try:
        t0 = time.perf_counter()
        with bpy.context.temp_override(active_object=ob, object=ob, selected_objects=[ob]):
            ret = bpy.ops.sinew.bake(frame_start=int(frames[0]), frame_end=int(frames[-1]))
        wall = time.perf_counter() - t0
    finally:
        addon.pipeline.BakeJob = orig
    assert ret == {'FINISHED'}, ret
    r = jobs[-1].result
    muted = [c.name for c in ik_constraints(ob) if c.mute]
    poses = read_poses(ob, frames)
    cold = {}
    if inputs is not None:
        d, moved = warm_vs_cold(inputs, np.asarray(r.rotations), addon)
        if save is not None:
            save.write_text(json.dumps({"problems": docs, "bake_rotations": np.asarray(r.rotations).tolist()}))
        cold = {"warm_cold_max_rad": float(np.max(d)), "warm_cold_frames": int(np.count_nonzero(d > WARM_COLD)),
                "warm_cold_frames_1e2": int(np.count_nonzero(d > 10 * WARM_COLD)),
                "warm_cold_median_rad": float(np.median(d)),
                "round_off_frames": int(np.count_nonzero(moved > ROUND_OFF_TURN)),
                "round_off_max_rad": float(np.max(moved))}
    return poses, {**cold, "solve_s": r.solve_seconds, "wall_s": wall, "sample_s": r.sample_seconds,
                   "write_s": r.write_seconds, "per_frame": bool(r.per_frame), "muted": len(muted),
                   "frames_reached": int(np.sum(r.reached)), "iterations_mean": float(np.mean(r.iterations)),
                   "iterations_max": int(np.max(r.iterations)), "warnings": list(r.warnings)}


# --------------------------------------------------------------------------------------------
# Install, render, report
# --------------------------------------------------------------------------------------------


def install_addon(zip_arg):
    if zip_arg:
        zip_path = Path(zip_arg).resolve()
    else:
        print("real_motion: building the extension with scripts/build_extension.sh", flush=True)
        out = subprocess.run([str(ROOT / "scripts" / "build_extension.sh")], check=True, cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
        zip_path = Path(out.strip().splitlines()[-1])
    return zip_path, bundled_addon.install(zip_path, "real_motion")


def skin(ob):
    """Tapered cylinders rigidly skinned to the body bones (as demo/run_demo.py), for renders."""
    skip = ("breast", "pelvis", "heel")
    mesh = bpy.data.meshes.new("Body")
    body = bpy.data.objects.new("Body", mesh)
    bpy.context.scene.collection.objects.link(body)
    bm = bmesh.new()
    deform = bm.verts.layers.deform.verify()
    for b in ob.data.bones:
        if b.name.startswith(skip):
            continue
        group = body.vertex_groups.new(name=b.name).index
        if b.name == "spine.006":
            geom = bmesh.ops.create_uvsphere(bm, u_segments=16, v_segments=10, radius=0.1)
            to_bone = b.matrix_local @ Matrix.Translation((0, b.length * 0.45, 0))
        else:
            r = 0.11 if b.name.startswith("spine") else max(0.02, 0.13 * b.length)
            geom = bmesh.ops.create_cone(bm, cap_ends=True, cap_tris=False, segments=12, radius1=r,
                                         radius2=0.8 * r, depth=b.length)
            to_bone = b.matrix_local @ Matrix.Translation((0, b.length / 2, 0)) @ Matrix.Rotation(-math.pi / 2, 4, 'X')
        bmesh.ops.transform(bm, matrix=to_bone, verts=geom["verts"])
        for v in geom["verts"]:
            v[deform][group] = 1.0
    bm.to_mesh(mesh)
    bm.free()
    body.parent = ob
    mod = body.modifiers.new("Armature", 'ARMATURE')
    mod.object = ob
    body.color = (0.85, 0.55, 0.35, 1.0)
    return body


def render_truth(clips, args, outdir):
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    for name in clips:
        clip = load_clip(name, args.frames, args.step)
        ob = build_rig()
        rd = RigData(ob)
        truth = Truth(rd, clip)
        frames = np.arange(1, len(clip) + 1)
        for b in rd.names:
            i = rd.index[b]
            key_bone(ob, b, "rotation_quaternion", truth.quats[:, i], frames)
        key_bone(ob, "spine", "location", truth.root_loc, frames)
        skin(ob)
        scene = bpy.context.scene
        ground = bpy.data.objects.new("Ground", bpy.data.meshes.new("Ground"))
        bm = bmesh.new()
        bmesh.ops.create_grid(bm, x_segments=20, y_segments=20, size=4.0)
        bm.to_mesh(ground.data)
        bm.free()
        ground.color = (0.55, 0.58, 0.62, 1.0)
        scene.collection.objects.link(ground)
        cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
        cam.data.lens = 28
        scene.collection.objects.link(cam)
        scene.camera = cam
        scene.render.engine = 'BLENDER_WORKBENCH'
        scene.display.shading.light = 'STUDIO'
        scene.display.shading.color_type = 'OBJECT'
        scene.display.shading.show_shadows = True
        scene.render.resolution_x, scene.render.resolution_y = 640, 400
        scene.render.image_settings.file_format = 'PNG'
        scene.render.image_settings.compression = 100
        world = bpy.data.worlds.new("World")
        scene.world = world
        world.color = (0.9, 0.92, 0.95)
        for frac in (float(x) for x in args.render_frames.split(",")):
            k = min(len(clip) - 1, int(frac * (len(clip) - 1)))
            scene.frame_set(int(frames[k]))
            hips = truth.heads[k, rd.index["spine"]]
            # a view from the character's left side (it faces -Y at rest, DeepMimic's +X)
            eye = hips + np.array([3.6, -0.8, 0.6])
            cam.location = eye.tolist()
            d = hips - eye
            cam.rotation_euler = Vector(d.tolist()).to_track_quat('-Z', 'Y').to_euler()
            ground.location = (hips[0], hips[1], 0.0)
            scene.render.filepath = str(outdir / f"truth_{name}_{k:03d}.png")
            bpy.ops.render.render(write_still=True)
            print(f"rendered {scene.render.filepath}", flush=True)


def fmt(x, nd=1):
    return f"{x:.{nd}f}"


LABELS = {"standard": "Blender Standard", "itasc": "Blender iTaSC", "sinew": "Sinew (Bake IK to Keyframes)"}


def aggregate(rows):
    """Totals over clips for one solver x variant: means weighted by sample counts."""
    out = {"frames": sum(r["frames"] for r in rows)}
    out["joint_err_mean_mm"] = sum(r["joint_err_sum_mm"] for r in rows) / sum(r["joint_err_count"] for r in rows)
    out["joint_err_max_mm"] = max(r["joint_err_max_mm"] for r in rows)
    out["eff_err_mean_mm"] = sum(r["eff_err_sum_mm"] for r in rows) / sum(r["eff_err_count"] for r in rows)
    out["eff_err_max_mm"] = max(r["eff_err_max_mm"] for r in rows)
    out["violation_frames"] = sum(r["violation_frames"] for r in rows)
    out["violation_frames_sinew_cone"] = sum(r["violation_frames_sinew_cone"] for r in rows)
    out["max_turn_rad"] = max(r["max_turn_rad"] for r in rows)
    out["motion_max_turn_rad"] = max(r["motion_max_turn_rad"] for r in rows)
    out["pop_frames"] = sum(r["pop_frames"] for r in rows)
    out["pop_frames_vs_same_bone"] = sum(r["pop_frames_vs_same_bone"] for r in rows)
    out["joint_err_mean_per_joint_mm"] = {
        j: sum(r["joint_err_mean_per_joint_mm"][j] * r["frames"] for r in rows) / out["frames"] for j in JOINTS}
    out["solve_s"] = sum(r["solve_s"] for r in rows)
    out["ms_per_frame"] = 1000 * out["solve_s"] / out["frames"]
    if all("warm_cold_frames" in r for r in rows):
        out["warm_cold_frames"] = sum(r["warm_cold_frames"] for r in rows)
        out["warm_cold_frames_1e2"] = sum(r["warm_cold_frames_1e2"] for r in rows)
        out["warm_cold_max_rad"] = max(r["warm_cold_max_rad"] for r in rows)
        out["round_off_frames"] = sum(r["round_off_frames"] for r in rows)
        out["round_off_max_rad"] = max(r["round_off_max_rad"] for r in rows)
    return out


def row(label, m):
    return (f"| {label} | {fmt(m['joint_err_mean_mm'])} / {fmt(m['joint_err_max_mm'])} | "
            f"{fmt(m['eff_err_mean_mm'], 2)} / {fmt(m['eff_err_max_mm'], 2)} | {m['violation_frames']} / "
            f"{m['violation_frames_sinew_cone']} | "
            f"{m['max_turn_rad']:.3f} / {m['motion_max_turn_rad']:.3f} | {m['pop_frames']} | "
            f"{m['ms_per_frame']:.3f} |")


HEADER = ["| solver | joint error mean / max (mm) | effector error mean / max (mm) | frames with a limit "
          "violation (Blender's ellipse / Sinew's cone) | largest turn / motion's (rad) | frames turning > motion's largest + 0.01 | "
          "solving ms/frame |", "|---|---|---|---|---|---|---|"]


def report(results, meta):
    lines = [f"Real-motion benchmark: `{meta['command']}`; Blender {meta['blender']} (bpy module), "
             f"{meta['extension']}, git {meta['git']}, {meta['date']}, {meta['cpus']} CPUs, "
             f"load average at the end {meta['load_avg'][0]:.1f}.", "",
             f"DeepMimic clips {', '.join(meta['clips'])} ({meta['total_frames']} frames in all, "
             f"{'every clip frame' if meta['step'] == 1 else 'every ' + str(meta['step']) + 'th clip frame'}"
             f"{', at most ' + str(meta['frames_cap']) + ' per clip' if meta['frames_cap'] else ''}) retargeted onto "
             "Rigify's basic_human metarig at 1.75 m; goals: both forearm tails and shin tails (chain 2), "
             "the neck top (spine.005's tail, chain 5); per-bone IK limits = the truth's range (with rest) + 10°, "
             "swing quadrants widened until the truth is inside both Blender's ellipse (on the swing quaternion) "
             "and Sinew's cone (on the swing's rotation vector); shins and forearms X only, Y and Z locked. "
             "Poles: 4 limbs, pole_angle -90°. Joint error: heads of spine.002-.005, upper arms, forearms "
             "(elbows), shins (knees) against the FK truth. Violations beyond 1e-3 rad. Blender ms/frame = "
             f"stepping with IK on − muted (best of {meta['repeat']} each); Sinew ms/frame = the bake's engine "
             f"time (best of {meta['repeat']} bakes). Settings: Standard {LEGACY_ITERATIONS} iterations, no "
             f"stretch; iTaSC Animation mode, reiterate always, {ITASC_ITERATIONS} iterations, precision "
             f"{ITASC_PRECISION * 1000:g} mm; Sinew: the Bake operator's defaults (100 iterations, tolerance 0.1 mm, "
             "root pinned).", ""]
    for variant in meta["variants"]:
        lines += [f"**Total, {'with pole targets on the 4 limbs' if variant == 'poles' else 'no poles'}**", ""]
        lines += HEADER
        for solver in meta["solvers"]:
            rs = [results[c][variant][solver] for c in meta["clips"]]
            lines.append(row(LABELS[solver], aggregate(rs)))
        lines.append("")
        if "sinew" in meta["solvers"]:
            a = aggregate([results[c][variant]["sinew"] for c in meta["clips"]])
            if "warm_cold_frames" in a:
                lines += [f"The bake against a solve of each frame alone from its reference (Solve IK's "
                          f"engine call at that frame): {a['warm_cold_frames']} of {a['frames']} "
                          f"frames differ by more than {WARM_COLD:g} rad in some bone "
                          f"({a['warm_cold_frames_1e2']} by more than {10 * WARM_COLD:g} rad); the largest difference is "
                          f"{a['warm_cold_max_rad']:.3f} rad. Every target of a frame moved by "
                          f"{ROUND_OFF_MOVE:g} m ({ROUND_OFF_TRIES} random moves) moves a bone of that solve by more "
                          f"than {ROUND_OFF_TURN:g} rad in {a['round_off_frames']} of {a['frames']} frames (at most "
                          f"{a['round_off_max_rad']:.1e} rad).", ""]
    lines += ["**Mean error per joint, all clips (mm)**", "",
              "| solver | variant | " + " | ".join(JOINTS) + " |", "|---|---|" + "---|" * len(JOINTS)]
    for variant in meta["variants"]:
        for solver in meta["solvers"]:
            a = aggregate([results[c][variant][solver] for c in meta["clips"]])
            lines.append(f"| {LABELS[solver]} | {variant} | "
                         + " | ".join(fmt(a["joint_err_mean_per_joint_mm"][j]) for j in JOINTS) + " |")
    lines.append("")
    if "standard" in meta["solvers"] and "poles" in meta["variants"]:
        knee = {v: aggregate([results[c][v]["standard"] for c in meta["clips"]])["joint_err_mean_per_joint_mm"]
                for v in meta["variants"]}
        lines += [f"Pole check: with the pole targets, Blender Standard puts the knees (shin heads) "
                  f"{fmt(knee['poles']['shin.L'], 2)} / {fmt(knee['poles']['shin.R'], 2)} mm (L / R, mean) from the "
                  "truth" + (f" (without poles: {fmt(knee['nopoles']['shin.L'])} / {fmt(knee['nopoles']['shin.R'])} mm)"
                             if "nopoles" in knee else "") + ". The elbows' poles are not exact (see the forearm "
                  "column); a likely cause, not verified, is the metarig's arm rest: forearm X is about 4.5° off "
                  "perpendicular to the upper arm, so the hinge plane the truth uses is not the upper arm's Y-Z plane "
                  "that pole_angle -90° aligns.", ""]
    lines += ["**Per clip**", "", "| clip | variant | " + HEADER[0][2:], "|---|---|" + HEADER[1][1:]]
    for c in meta["clips"]:
        for variant in meta["variants"]:
            for solver in meta["solvers"]:
                r = dict(results[c][variant][solver])
                r["ms_per_frame"] = 1000 * r["solve_s"] / r["frames"]
                lines.append(f"| {c} ({r['frames']}) | {variant} " + row(LABELS[solver], r))
    return "\n".join(lines)


def git_state():
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                             text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "rust", "blender_addon"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def check_truth(rd_ob, truth, frames):
    """The numpy FK agrees with Blender's on a few frames (truth keyed on the rig)."""
    ob = rd_ob
    rd = RigData(ob)
    for b in rd.names:
        key_bone(ob, b, "rotation_quaternion", truth.quats[:, rd.index[b]], frames)
    key_bone(ob, "spine", "location", truth.root_loc, frames)
    ks = sorted({0, len(frames) // 2, len(frames) - 1})
    poses = read_poses(ob, [frames[k] for k in ks])
    err = float(np.abs(poses - truth.poses[ks]).max())
    assert err < 1e-4, f"numpy FK disagrees with Blender's by {err}"
    return err


def main():
    args = ARGS
    clips = args.clips.split(",")
    addon_utils.enable("rigify", default_set=True)
    if args.render:
        render_truth(clips, args, args.render)
        return
    solvers = [s for s in SOLVERS if s in args.solvers.split(",")]
    variants = [v for v in VARIANTS if v in args.variants.split(",")]
    zip_path, engine = ("-", "-")
    addon = None
    if "sinew" in solvers:
        zip_path, engine = install_addon(args.zip)
        addon = sys.modules[MODULE]
    print(f"real_motion: Blender {bpy.app.version_string}, extension {getattr(zip_path, 'name', zip_path)} "
          f"(engine {engine}); clips {clips}", flush=True)
    results, truths = {}, {}
    t_start = time.perf_counter()
    total_frames = 0
    for name in clips:
        clip = load_clip(name, args.frames, args.step)
        frames = list(range(1, len(clip) + 1))
        total_frames += len(frames)
        ob = build_rig()
        rd = RigData(ob)
        truth = Truth(rd, clip)
        fk_err = check_truth(ob, truth, frames)
        # the truth itself through the metrics (must be 0 error, 0 violations)
        self_check = metrics(rd, truth, truth.poses)
        assert self_check["violation_frames"] == 0 and self_check["joint_err_max_mm"] < 1e-6, self_check
        truths[name] = {"frames": len(frames), "fk_check_max_abs": fk_err, "motion_max_turn_rad": truth.max_turn,
                        "limits_deg": {b: [np.degrees(lo).round(1).tolist(), np.degrees(hi).round(1).tolist()]
                                       for b, (lo, hi) in truth.limits.items()}}
        results[name] = {}
        for variant in variants:
            results[name][variant] = {}
            for solver in solvers:
                t0 = time.perf_counter()
                if solver == "sinew":
                    save = Path(args.save_problems) / f"{name}_{variant}.json" if args.save_problems else None
                    poses, timing = run_sinew(truth, frames, variant, addon, check_cold=True, save=save)
                    runs = [timing["solve_s"]]
                    for _ in range(args.repeat - 1):
                        runs.append(run_sinew(truth, frames, variant, addon)[1]["solve_s"])
                    timing["solve_s"], timing["solve_runs_s"] = min(runs), runs
                else:
                    poses, timing = run_blender(truth, frames, variant, solver, args.repeat)
                m = metrics(rd, truth, poses)
                m.update(timing)
                results[name][variant][solver] = m
                print(f"  {name:15s} {variant:8s} {solver:8s} joints {m['joint_err_mean_mm']:7.1f} / "
                      f"{m['joint_err_max_mm']:7.1f} mm, effectors {m['eff_err_mean_mm']:7.2f} / "
                      f"{m['eff_err_max_mm']:7.2f} mm, violations {m['violation_frames']:3d}, turn "
                      f"{m['max_turn_rad']:.3f} (motion {m['motion_max_turn_rad']:.3f}), pops {m['pop_frames']}, "
                      f"{1000 * m['solve_s'] / m['frames']:.3f} ms/frame"
                      + (f", warm vs cold > {WARM_COLD:g} rad {m['warm_cold_frames']} (max {m['warm_cold_max_rad']:.3f})"
                         if "warm_cold_frames" in m else "") + f" ({time.perf_counter() - t0:.1f} s)",
                      flush=True)
    meta = {
        "command": " ".join([".venv/bin/python bench/real_motion.py"] + sys.argv[1:]),
        "blender": bpy.app.version_string, "python": platform.python_version(), "engine": engine,
        "extension": getattr(zip_path, "name", str(zip_path)), "git": git_state(), "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "clips": clips, "variants": variants, "solvers": solvers, "step": args.step, "repeat": args.repeat, "frames_cap": args.frames,
        "total_frames": total_frames, "run_seconds": time.perf_counter() - t_start,
        "settings": {"margin_deg": math.degrees(MARGIN), "violation_rad": VIOLATION, "pop_slack_rad": POP_SLACK,
                     "pole_angle_deg": math.degrees(POLE_ANGLE), "height_m": HEIGHT, "deepmimic_height_m": DM_HEIGHT,
                     "goals": GOALS, "joints": JOINTS,
                     "standard": {"iterations": LEGACY_ITERATIONS, "use_stretch": False},
                     "itasc": {"mode": "ANIMATION", "reiteration_method": "ALWAYS", "iterations": ITASC_ITERATIONS,
                               "precision": ITASC_PRECISION},
                     "sinew": "bpy.ops.sinew.bake defaults (100 iterations, tolerance 1e-4, root pinned)"},
    }
    totals = {v: {s: aggregate([results[c][v][s] for c in clips]) for s in solvers} for v in variants}
    text = report(results, meta)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "real_motion.md").write_text(text + "\n", encoding="utf-8")
        (RESULTS / "real_motion.json").write_text(
            json.dumps({"meta": meta, "totals": totals, "results": results, "truth": truths}, indent=1) + "\n",
            encoding="utf-8")
        print(f"wrote {RESULTS / 'real_motion.md'} and real_motion.json")


if __name__ == "__main__":
    main()
