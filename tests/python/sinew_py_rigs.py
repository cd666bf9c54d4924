"""Test rigs and small quaternion helpers for the Python-module tests (numpy only)."""

from __future__ import annotations

import numpy as np

import sinew


def rotation_y_to(direction, roll: float = 0.0) -> np.ndarray:
    """3×3 rotation taking +Y to `direction` (shortest arc), then `roll` about the bone's axis."""
    d = np.asarray(direction, float)
    d = d / np.linalg.norm(d)
    y = np.array([0.0, 1.0, 0.0])
    c = float(np.dot(y, d))
    if c < -1 + 1e-12:
        r = np.diag([-1.0, -1.0, 1.0])
    else:
        v = np.cross(y, d)
        vx = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
        r = np.eye(3) + vx + vx @ vx / (1 + c)
    cr, sr = np.cos(roll), np.sin(roll)
    roll_m = np.array([[cr, 0, sr], [0, 1, 0], [-sr, 0, cr]])
    return r @ roll_m


def matrix(head, tail, roll: float = 0.0) -> np.ndarray:
    """A Blender-style `bone.matrix_local` (rows) from head, tail and roll."""
    m = np.eye(4)
    m[:3, :3] = rotation_y_to(np.subtract(tail, head), roll)
    m[:3, 3] = head
    return m


def build(bones, dtype=np.float64) -> sinew.Rig:
    """`bones`: list of (name, parent index, head, tail[, roll])."""
    names = [b[0] for b in bones]
    parents = [b[1] for b in bones]
    mats = np.array([matrix(b[2], b[3], b[4] if len(b) > 4 else 0.0) for b in bones], dtype=dtype)
    lengths = np.array([np.linalg.norm(np.subtract(b[3], b[2])) for b in bones], dtype=dtype)
    return sinew.Rig(names, parents, mats, lengths)


def chain(n: int = 10, length: float = 1.0, axis=(0.0, 0.0, 1.0), dtype=np.float64) -> sinew.Rig:
    """n bones head to tail along `axis` (default up +Z, as in Blender), bone i named `b{i}`."""
    a = np.asarray(axis, float)
    return build([(f"b{i}", i - 1, a * length * i, a * length * (i + 1), 0.3 * i) for i in range(n)], dtype)


def y_shape() -> sinew.Rig:
    """A trunk of 3 bones up +Z splitting into two 3-bone branches (sub-base at bone 2)."""
    up = np.array([0.0, 0.0, 1.0])
    bones = [(f"trunk{i}", i - 1, up * i, up * (i + 1)) for i in range(3)]
    for side, sx in (("L", 1.0), ("R", -1.0)):
        start = len(bones)
        d = np.array([sx, 0.0, 1.0]) / np.sqrt(2.0)
        for k in range(3):
            head = up * 3 + d * k
            bones.append((f"arm{k}.{side}", 2 if k == 0 else start + k - 1, head, head + d))
    return build(bones)


def quat_mul(a, b) -> np.ndarray:
    """Hamilton product of (…, 4) wxyz quaternions."""
    aw, ax, ay, az = np.moveaxis(np.asarray(a, float), -1, 0)
    bw, bx, by, bz = np.moveaxis(np.asarray(b, float), -1, 0)
    return np.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_axis_angle(axis, angle: float) -> np.ndarray:
    a = np.asarray(axis, float)
    a = a / np.linalg.norm(a)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * a])


def quat_angle(a, b) -> float:
    """Angle between two rotations (radians), sign-insensitive."""
    d = abs(float(np.dot(np.asarray(a) / np.linalg.norm(a), np.asarray(b) / np.linalg.norm(b))))
    return 2.0 * np.arccos(min(1.0, d))


def random_unit_quats(rng: np.random.Generator, n: int) -> np.ndarray:
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)
