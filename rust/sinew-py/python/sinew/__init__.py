"""Sinew: multi-chain constrained inverse kinematics for character rigs (native Rust core).

Conventions: positions are rig (armature) space, quaternions are ``(w, x, y, z)`` and local
rotations are relative to the rest pose, exactly Blender's ``pose_bone.rotation_quaternion``.
Bulk data goes in and out as numpy arrays (float32 or float64 accepted, float64 returned).
Every error is a :class:`SinewError` (a ``ValueError``) carrying the core's message.

>>> import numpy as np, sinew
>>> rest = np.repeat(np.eye(4)[None], 2, axis=0); rest[1, 1, 3] = 1.0   # bone 1's head at y=1
>>> rig = sinew.Rig(["upper", "lower"], [-1, 0], rest, [1.0, 1.0])
>>> sol = sinew.Solver().solve(rig, [sinew.Goal("lower", (1.0, 1.0, 0.0))])
>>> sol.reached
True
"""

from ._sinew import (
    FormatError,
    GoalError,
    InternalError,
    LimitError,
    NonFiniteError,
    Rig,
    RigError,
    Goal,
    SequenceResult,
    SettingsError,
    ShapeError,
    SinewError,
    Solution,
    Solver,
    UnknownBoneError,
    UnsupportedError,
    __version__,
    analyze,
    core_version,
    load_problem,
    load_reference,
    methods,
)

__all__ = [
    "FormatError",
    "Goal",
    "GoalError",
    "InternalError",
    "LimitError",
    "NonFiniteError",
    "Rig",
    "RigError",
    "SequenceResult",
    "SettingsError",
    "ShapeError",
    "SinewError",
    "Solution",
    "Solver",
    "UnknownBoneError",
    "UnsupportedError",
    "__version__",
    "analyze",
    "core_version",
    "load_problem",
    "load_reference",
    "methods",
]
