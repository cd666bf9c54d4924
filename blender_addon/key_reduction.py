# SPDX-License-Identifier: GPL-3.0-or-later
"""Key reduction for bakes: removes baked keys where the animation Blender evaluates from the keys
that stay remains within a tolerance of the bake on every baked frame.

A bake keys every frame. The keys that stay are Bezier keys with automatic clamped handles,
Blender's default for keys an animator sets: smooth motion needs far fewer of them than of
straight (LINEAR) segments (a walk's leg at 0.1°: a linear segment may span about one frame, a
Bezier one several). A Bezier key's handles depend on its neighbours, so whether a key can go is
not decided from key values alone: the reduction asks Blender. Per bone, starting from the
range's first and last frames, it writes the keys kept so far, lets Blender compute their handles
(``fcurve.update()``), evaluates every channel on every baked frame (``fcurve.evaluate``), and in
each gap between kept keys where some frame is beyond the tolerance keeps the worst frame's key
too; until no frame is (at worst every key comes back, which reproduces the bake exactly). The
tolerance therefore holds for what Blender evaluates.

Per bone, its rotation channels keep keys at the same frames (a key per bone, as an animator
keys), and the error is the angle between the rotation the reduced channels evaluate to and the
baked one, as Blender's pose evaluation builds it (a quaternion normalised, Euler angles in the
bone's order, axis-angle). The root's location channels keep keys together too, measured by
distance. A stretching bone's scale keys (a bake of a rig whose bones stretch) are not reduced:
they stay one per frame, exactly as baked. Keys outside the range are untouched, and so is the animation outside it: the last key
in the range keeps the bake's interpolation toward the next key, and where a key precedes the
range, the first key's left handle stays where the bake left it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from . import keys
from .rig_reader import EULER_MODES

KEY_MATCH = 1e-3  # frames: a key belongs to a baked frame within this
HANDLES = 'AUTO_CLAMPED'  # the kept keys' handles: Blender's default (plain AUTO kept more keys on the demo)


@dataclass
class ReductionResult:
    keys_before: int = 0        # keys of the reduced channels in the baked range
    keys_after: int = 0
    max_angle: float = 0.0      # radians: the largest rotation deviation Blender evaluates
    max_distance: float = 0.0   # the largest location deviation
    groups: int = 0             # bones (and root locations) reduced
    skipped: int = 0            # left as they were (F-curve modifiers, keys not one per frame)
    seconds: float = 0.0
    angle_tolerance: float = 0.0
    distance_tolerance: float = 0.0
    location: bool = False      # a root location was reduced

    @property
    def kept_fraction(self) -> float:
        return self.keys_after / self.keys_before if self.keys_before else 1.0

    def report(self) -> str:
        text = (f"Key reduction kept {self.keys_after} of {self.keys_before} keys ({100 * self.kept_fraction:.1f}%) "
                f"within {math.degrees(self.angle_tolerance):.3g}°")
        if self.location:
            text += f" and {self.distance_tolerance:.3g} in location"
        text += f"; largest deviation {math.degrees(self.max_angle):.3g}°"
        if self.location:
            text += f", {self.max_distance:.3g} in location"
        if self.skipped:
            text += (f"; {self.skipped} channel group(s) left unreduced (F-curve modifiers, keys off the frames or "
                     "driven channels)")
        return text + f" ({self.seconds * 1000:.0f} ms)"


# --------------------------------------------------------------------------------------------
# Deviation measures (vectorised): Blender's rotation of channel values, and distances
# --------------------------------------------------------------------------------------------


def rotation_matrices(values: np.ndarray, mode: str) -> np.ndarray:
    """(F, 3, 3) rotations of a bone's rotation channel values (F, 3 or 4) in ``mode``, as
    Blender's pose evaluation builds them."""
    from .pipeline import _axis_angle_matrices, _euler_matrices, _quaternion_matrices

    if mode == 'QUATERNION':
        return _quaternion_matrices(values)
    if mode == 'AXIS_ANGLE':
        return _axis_angle_matrices(values)
    return _euler_matrices(values, mode)


def rotation_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angles (radians) between rotation matrices (F, 3, 3): 2 asin(|A - B|_F / (2√2)), which
    stays exact for small angles."""
    d = np.linalg.norm((a - b).reshape(len(a), 9), axis=1)
    return 2.0 * np.arcsin(np.minimum(1.0, d / (2.0 * math.sqrt(2.0))))


class _Group:
    """One bone's rotation channels, or the root's location channels, over the baked frames."""

    def __init__(self, fcurves, frames, values, mode):
        self.fcurves = fcurves
        self.frames = frames       # (F,) float64
        self.values = values       # (F, C) float64 (the keys' float32 values)
        self.mode = mode           # a rotation mode, or "LOCATION"
        self.ref = values if mode == "LOCATION" else rotation_matrices(values, mode)

    def deviation(self, values) -> np.ndarray:
        """(F,) how far channel values (F, C) are from the bake, frame by frame."""
        if self.mode == "LOCATION":
            return np.linalg.norm(values - self.ref, axis=1)
        return rotation_angles(rotation_matrices(values, self.mode), self.ref)


def worst_in_gaps(kept: np.ndarray, dev: np.ndarray, tolerance: float) -> list[int]:
    """For each gap between consecutive kept frames (indices ``kept``, sorted) where some frame's
    deviation is beyond ``tolerance``, the index of the worst one."""
    out = []
    for a, b in zip(kept[:-1], kept[1:]):
        if b - a > 1:
            k = a + 1 + int(np.argmax(dev[a + 1:b]))
            if dev[k] > tolerance:
                out.append(k)
    return out


# --------------------------------------------------------------------------------------------
# Reading and changing the F-curves
# --------------------------------------------------------------------------------------------


def _keys_in_range(fc, lo, hi):
    """(indices, frames, values) of ``fc``'s keys with lo <= frame <= hi."""
    kp = fc.keyframe_points
    co = np.empty(2 * len(kp), dtype=np.float32)
    kp.foreach_get("co", co)
    fr, val = co[0::2].astype(np.float64), co[1::2].astype(np.float64)
    idx = np.nonzero((fr >= lo - KEY_MATCH) & (fr <= hi + KEY_MATCH))[0]
    return idx, fr[idx], val[idx]


def _read_group(fcurves, frames, mode):
    """A _Group of ``fcurves`` over ``frames``, or None when they are not one key per baked frame
    (or have modifiers, which key values alone do not describe)."""
    if any(fc is None or len(fc.modifiers) for fc in fcurves):
        return None
    vals = []
    for fc in fcurves:
        _idx, fr, v = _keys_in_range(fc, frames[0], frames[-1])
        if len(fr) != len(frames) or np.abs(fr - frames).max() > KEY_MATCH:
            return None
        vals.append(v)
    return _Group(fcurves, frames, np.stack(vals, axis=1), mode)


def _evaluated(group: _Group) -> np.ndarray:
    frames = group.frames.tolist()
    return np.stack([np.fromiter(map(fc.evaluate, frames), dtype=np.float64, count=len(frames))
                     for fc in group.fcurves], axis=1)


def _as_bezier(kf) -> None:
    kf.interpolation = 'BEZIER'
    kf.handle_left_type = kf.handle_right_type = HANDLES


def _start(group: _Group) -> None:
    """Leaves only the range's first and last keys: Bezier keys (the last keeps its interpolation,
    which shapes the curve after the range). Where the curve goes on beyond the range (more keys,
    or linear extrapolation), the handle facing outside keeps the value the bake gave it and the
    key stops Blender's handle smoothing (``auto_smoothing``) there, so the curve outside the
    range evaluates as before. At a curve's end held constant, Blender would flatten an automatic
    handle (an ease): a vector handle, toward the next key, follows the motion instead."""
    lo, hi = group.frames[0], group.frames[-1]
    for fc in group.fcurves:
        idx, _fr, _v = _keys_in_range(fc, lo, hi)
        kp = fc.keyframe_points
        constant = fc.extrapolation == 'CONSTANT'
        pin_left = idx[0] > 0 or not constant
        pin_right = idx[-1] < len(kp) - 1 or not constant
        left = tuple(kp[int(idx[0])].handle_left)
        right = tuple(kp[int(idx[-1])].handle_right)
        for k in idx[1:-1][::-1]:
            kp.remove(kp[int(k)], fast=True)
        first, last = kp[int(idx[0])], kp[int(idx[0]) + 1]
        _as_bezier(first)
        # (A clamped automatic handle next to a free one moves it where it clamps: Blender
        # aligns the other side then. Plain automatic handles do not.)
        if pin_left:
            first.handle_right_type, first.handle_left_type = 'AUTO', 'FREE'
            first.handle_left = left
        else:
            first.handle_left_type = first.handle_right_type = 'VECTOR'
        if pin_right:
            last.handle_left_type, last.handle_right_type = 'AUTO', 'FREE'
            last.handle_right = right
        else:
            last.handle_left_type = last.handle_right_type = 'VECTOR'
        fc.update()


def _add(group: _Group, rows) -> None:
    for c, fc in enumerate(group.fcurves):
        kp = fc.keyframe_points
        for k in rows:
            _as_bezier(kp.insert(float(group.frames[k]), float(group.values[k, c]), options={'FAST'}))
        fc.update()


def refine(group: _Group, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Reduces ``group``'s keys in the range (see the module's docstring); returns (indices of the
    frames kept, the deviation Blender evaluates on every frame)."""
    n = len(group.frames)
    kept = np.array([0, n - 1])
    _start(group)
    while True:
        dev = group.deviation(_evaluated(group))
        add = worst_in_gaps(kept, dev, tolerance)
        if not add:
            return kept, dev
        _add(group, add)
        kept = np.union1d(kept, add)


# --------------------------------------------------------------------------------------------


def reduce_bake(ob, frames, names, root_bone, angle_tolerance: float, distance_tolerance: float) -> ReductionResult:
    """Reduces the keys a bake just wrote on ``ob``'s action for frames ``frames`` (every frame
    keyed): the rotation channels of the pose bones ``names`` within ``angle_tolerance`` radians
    per bone, and ``root_bone``'s location (if given) within ``distance_tolerance``. A bone with a
    driven rotation channel is left as baked. Keys outside the range are not touched. Returns
    what it kept and the largest deviation Blender evaluates."""
    t0 = time.perf_counter()
    res = ReductionResult(angle_tolerance=float(angle_tolerance), distance_tolerance=float(distance_tolerance))
    frames = np.asarray(frames, dtype=np.float64)
    find = keys.fcurve_finder(ob)
    if find is None or len(frames) < 3:
        res.seconds = time.perf_counter() - t0
        return res
    plans = []
    driven = keys.driven_channels(ob)
    for name in names:
        pb = ob.pose.bones[name]
        prop = keys.rotation_property(pb)
        path = pb.path_from_id(prop)
        if path in driven:  # a driver sets part of the rotation: the keys alone do not give it
            res.skipped += 1
            continue
        n = 4 if pb.rotation_mode in ('QUATERNION', 'AXIS_ANGLE') else 3
        mode = pb.rotation_mode if (pb.rotation_mode in EULER_MODES or n == 4) else 'XYZ'
        plans.append(([find(path, c) for c in range(n)], mode, float(angle_tolerance)))
    if root_bone is not None:
        path = ob.pose.bones[root_bone].path_from_id("location")
        plans.append(([find(path, c) for c in range(3)], "LOCATION", float(distance_tolerance)))

    # Every group is read (and checked) before any key changes.
    groups = []
    for fcurves, mode, tol in plans:
        group = _read_group(fcurves, frames, mode)
        if group is None:
            res.skipped += 1
        else:
            groups.append((group, tol))
    for group, tol in groups:
        kept, dev = refine(group, tol)
        n_channels = len(group.fcurves)
        res.groups += 1
        res.keys_before += n_channels * len(group.frames)
        res.keys_after += n_channels * len(kept)
        worst = float(dev.max())
        if group.mode == "LOCATION":
            res.location = True
            res.max_distance = max(res.max_distance, worst)
        else:
            res.max_angle = max(res.max_angle, worst)
    res.seconds = time.perf_counter() - t0
    return res


def effector_slack(ob, effectors, keyed, root_bone, angle_tolerance: float, distance_tolerance: float,
                   stretch=None) -> np.ndarray:
    """For each effector ``(bone, use_tail)``, a bound (armature space) on how far the reduction
    can move its point: each keyed bone above it (or itself, for the tail) off by at most
    ``angle_tolerance`` turns it by at most that angle times its distance from the bone's head
    (bounded by the rest offsets along the way, which rotations keep), plus the root location's
    tolerance when the root is keyed. The bake's check of Blender's evaluated pose allows it.
    ``stretch``: {bone name: its largest length scale over the range} for a rig that stretches
    (a bone's length and its children's offsets grow with it, and so do the levers)."""
    bones = ob.data.bones
    keyed = set(keyed)
    scale = (lambda n: max(1.0, stretch.get(n, 1.0))) if stretch else (lambda n: 1.0)
    out = np.zeros(len(effectors))
    for g, (name, use_tail) in enumerate(effectors):
        b = bones[name]
        dist = b.length * scale(b.name) if use_tail else 0.0  # from the effector bone's head to the point
        total = 0.0
        while b is not None:
            if b.name in keyed and dist > 0.0:
                total += angle_tolerance * dist
            if b.name == root_bone:
                total += distance_tolerance
            if b.parent is not None:
                dist += (b.head_local - b.parent.head_local).length * scale(b.parent.name)
            b = b.parent
        out[g] = total
    return out
