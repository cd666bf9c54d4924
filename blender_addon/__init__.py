# SPDX-License-Identifier: GPL-3.0-or-later
"""Sinew IK for Blender: solve and bake multi-chain constrained IK with the Sinew engine.

The engine is the ``sinew`` Python module (a Rust extension bundled as a wheel). This add-on
reads the armature (rest data, Sinew settings, and any Blender IK constraints and IK limits it
already has), calls the engine once per solve or bake, and writes pose rotations and keys.

Modules, as in Blender's bundled add-ons:
``properties`` (per-bone settings), ``rig_reader`` (armature -> engine rig and goals),
``pipeline`` (solve / bake / export work), ``keys`` (pose and keyframe writing),
``key_reduction`` (thinning a bake's keys within a tolerance), ``limit_drawing`` (joint limits
in the viewport), ``operators``, ``ui``.
"""

if "bpy" in locals():
    import importlib

    for _m in ("properties", "rig_reader", "keys", "key_reduction", "pipeline", "limit_drawing", "operators", "ui"):
        if _m in locals():
            importlib.reload(locals()[_m])

import bpy  # noqa: F401  (kept for the reload check above)

from . import key_reduction, keys, limit_drawing, operators, pipeline, properties, rig_reader, ui  # noqa: F401

_modules = (properties, limit_drawing, operators, ui)


def register():
    for m in _modules:
        m.register()


def unregister():
    for m in reversed(_modules):
        m.unregister()
    rig_reader.invalidate_analysis()
    pipeline.forget_compare_results()
