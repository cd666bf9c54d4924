# SPDX-License-Identifier: GPL-3.0-or-later
"""The work behind the operators, as plain functions and a generator (tests drive these directly;
headless Blender has no modal loop).

* ``solve_pose``: one frame, from the current pose, which is also the reference pose (where the
  freedom the goals leave falls back to: the pose before IK, as Blender's IK starts from).
  ``solve_poses`` does it for several armatures (multi-object Pose Mode): all are read and solved
  before any is written, and one that follows bones another moves is solved again after that
  one's pose is set (``call_order``; armatures that follow each other are refused).
* ``BakeJob``: a frame range. ``steps()`` samples the targets over the range, solves with
  ``solve_sequence`` and writes the keys at the very end, yielding progress in between, so a
  modal operator can run it in chunks and cancel it without having changed anything.
  Targets that are plain objects animated only by F-curves are sampled from their F-curves
  (``sample_goals_from_fcurves``) when nothing the bake reads from the armature changes over the
  range (``pose_is_static``); anything else is sampled by stepping the frames. The same pass
  samples each frame's FK pose of the moved bones (their action-evaluated local rotations, which
  IK constraints never change) as that frame's reference pose for ``solve_sequence``.
  ``BakeBatch`` runs one job per armature: all sample and solve (in ``call_order``: one that
  follows bones another moves samples that one's keys, written to a scratch action meanwhile),
  then all write, then all measure.
* ``compare_methods``: what ``solve_pose`` would solve, solved once by every method and written
  nowhere; the results are kept in memory for the sidebar (``compare_results``).
* ``problem_document``: the exact problem as ``sinew.problem/1`` JSON (``/2`` with goal kinds).

Every read and check happens before the first write: an error leaves the scene as it was.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import dataclass, field, replace

import bpy
import numpy as np
from mathutils import Euler, Matrix, Quaternion, Vector

from . import key_reduction, keys, rig_reader
from .rig_reader import ReadError, engine

ROOT_MODES = ("pinned", "free")


DEFAULT_METHOD = "fabrik"


def method_names() -> list[str]:
    """The engine's IK methods by name (``sinew.methods()``: every method the core lists)."""
    sinew = engine()
    lister = getattr(sinew, "methods", None)
    return list(lister()) if lister is not None else [DEFAULT_METHOD]


# Names and tooltips for the methods the add-on knows; a method the engine adds later is listed
# with its own name (method_label, method_description).
METHOD_INFO = {
    "fabrik": ("FABRIK", "Forward and backward reaching IK, finished with damped least squares steps"),
    "dls": ("Damped Least Squares", "Jacobian damped least squares steps"),
    "fabrik_classic": ("FABRIK (Classic)", "The FABRIK tech report's algorithm as written, for comparison"),
    "ccd": ("CCD", "Cyclic coordinate descent, from the effector to the root, for comparison"),
    "triangulation": ("Triangulation", "The law of cosines in one pass: one position goal on one chain"),
    "jacobian_transpose": ("Jacobian Transpose", "Steps along the Jacobian's transpose, for comparison"),
    "jacobian_pinv": ("Jacobian Pseudo-Inverse", "Steps through the Jacobian's pseudo-inverse (SVD), for comparison"),
    "svd_dls": ("SVD-DLS", "Damped least squares through the Jacobian's SVD, for comparison"),
    "sdls": ("SDLS", "Selectively damped least squares (Buss and Kim), for comparison"),
    "nlp": ("Nonlinear Programming", "Jack's nonlinear programming: quasi-Newton steps that never raise the goals' error"),
}


def method_label(name: str) -> str:
    """The method's label; a method the add-on does not know by its name, words of up to three
    letters as an acronym ("svd_dls" would be "SVD DLS")."""
    info = METHOD_INFO.get(name)
    if info:
        return info[0]
    return " ".join(w.upper() if len(w) <= 3 else w.title() for w in name.split("_") if w)


def method_description(name: str) -> str:
    info = METHOD_INFO.get(name)
    return info[1] if info else f'The Sinew engine\'s "{name}" method'


@dataclass
class Settings:
    max_iterations: int = 100
    tolerance: float = 1e-4
    root: str = "pinned"
    method: str = DEFAULT_METHOD    # one of method_names()
    only_selected: bool = False     # only the goals of selected bones (rig_reader.selected_goals)
    # Key reduction after a bake (key_reduction.reduce_bake, called in BakeJob._write): the bake
    # dialog's Reduce Keys, Angle Tolerance (an ANGLE property: radians, shown in degrees) and
    # Distance Tolerance.
    key_reduction: bool = False
    reduction_angle: float = math.radians(0.1)   # radians a reduced rotation may deviate
    reduction_distance: float = 1e-4             # distance a reduced location may deviate

    def solver(self, length_scale: float = 1.0):
        """The engine's solver for these settings. ``length_scale``: how much larger armature
        space is than the frame the engine solves in (the largest scale above a chain,
        ``RigProblem.goal_scales``); the tolerance, an armature-space distance, is divided by it."""
        sinew = engine()
        if self.root not in ROOT_MODES:
            raise ReadError(f"Root mode must be one of {ROOT_MODES}, not {self.root!r}")
        try:
            return sinew.Solver(method=str(self.method), max_iterations=int(self.max_iterations),
                                tolerance=float(self.tolerance) / float(length_scale))
        except sinew.SinewError as ex:
            raise ReadError(f"Bad solver setting: {ex}") from ex


@dataclass
class SolveResult:
    problem: rig_reader.RigProblem
    rotations: np.ndarray          # (N, 4) in rig order
    root_translation: np.ndarray   # (3,)
    residuals: np.ndarray          # (G,) the engine's, in armature space
    iterations: int
    reached: bool                  # the engine's answer
    stop_reason: str
    keyed: list = field(default_factory=list)
    seconds: float = 0.0
    misses: np.ndarray | None = None   # (G,) measured on Blender's evaluated pose after writing (armature space)
    tolerance: float = 1e-4
    orientation_residuals: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (G,) radians
    scales: np.ndarray | None = None   # (N,) pose scales keyed (each bone's length over its parent's), if it stretches
    key_note: str = ""             # how the keys were written, when a keying set was used
    unkeyed: str = ""              # keying asked for, but the solved rotations not all keyed: the warning
    held_note: str = ""            # where the scale before was keyed around a keyed stretch (held_scales_note)
    stretch_everywhere: str = ""   # a stretch left unkeyed on a scale nothing animates: the warning
    curve_warnings: str = ""       # F-curve modifiers act on the channels keyed, or their F-curves are muted (modifier_warning, muted_warning)
    world_misses: np.ndarray | None = None  # (G,) ``misses`` in world space: the distances the report gives

    @property
    def reached_in_blender(self) -> bool:
        return self.misses is not None and bool(np.all(self.misses <= verify_tolerance(self.tolerance)))

    def goal_report(self) -> str:
        """Per goal: its effector's distance to the target and, for a goal with an orientation,
        the angle left (see ``goal_report``)."""
        return goal_report(self.problem, self.residuals, self.orientation_residuals)


# Blender stores pose rotations in single precision: a solution within the tolerance may come
# back from Blender's evaluation this much further off.
VERIFY_SLACK = 2e-6
# A bake checks Blender's evaluated pose at this many frames, spread over the range (ends included).
VERIFY_FRAMES = 25
# A bake's solving step (the unit of its progress and of Esc) takes at least this many frames per
# core, so the engine, which solves a step's frames side by side (8 or more a thread), uses every
# core; a frame takes about 0.3 ms on Rigify's metarig.
SOLVE_STEP_FRAMES = 8

NOT_EDITABLE = "Cannot edit library linked or non-editable override object"


def verify_tolerance(tolerance: float) -> float:
    return float(tolerance) + VERIFY_SLACK


def check_time_not_stretched(scene) -> None:
    """Refuses a bake while the scene's Time Stretching is on (``frame_map_old`` differs from
    ``frame_map_new``): Blender then evaluates the animation at scaled times, not at the frame
    numbers, so keys baked at each frame would be shown at other frames."""
    old, new = scene.render.frame_map_old, scene.render.frame_map_new
    if old != new:
        raise ReadError(f"Time Stretching is on (Output Properties > Frame Range > Time Stretching: Old {old}, New "
                        f"{new}): Blender then plays the animation at other times than the frame numbers, so keys "
                        "baked at each frame would be shown at other frames. Set Old and New to the same value, bake, "
                        "and set them back")


def check_editable(ob) -> None:
    """Blender's pose tools refuse linked (not overridden) objects; so does Sinew."""
    if ob is not None and not ob.is_editable:
        lib = f' (from library "{ob.library.filepath}")' if ob.library is not None else ""
        raise ReadError(f'{NOT_EDITABLE} "{ob.name}"{lib}: make a library override of it first '
                        "(Object > Library Override > Make)")


def world_scales_distances(ob) -> bool:
    """True when object ``ob``'s world matrix (its own scale and its parents') changes distances,
    so that armature-space distances (the solver's residuals and tolerance) are not the ones the
    user sees."""
    m3 = ob.matrix_world.to_3x3()
    product = m3.transposed() @ m3
    return any(abs(product[r][c] - (r == c)) > 1e-6 for r in range(3) for c in range(3))


def evaluated_misses(problem: rig_reader.RigProblem, depsgraph, targets=None, vectors=None, *,
                     world: bool = False) -> np.ndarray:
    """(G,) how far each goal's effector (its tail, or head) is from its target in Blender's
    evaluated pose, in armature space (the units of the solver's tolerance), or with ``world``
    in world space (the distance the user sees: effector, target, line and plane carried by the
    armature's world matrix, which may scale them): for a line, plane or half-space goal from
    that line, plane or side (``vectors`` (G, 3), ``sample_vectors``), as the engine measures
    its residual; 0 for orientation and aim goals (their error is an angle). ``targets`` (G, 3):
    the targets the engine solved for (a goal's moved by its influence, ``blend_goals``);
    default, as sampled."""
    if targets is None:
        targets, _orients, _poles = problem.sample_goals(depsgraph)
    if vectors is None and any(g.kind in rig_reader.TARGET_AXIS_KINDS for g in problem.goals):
        vectors = problem.sample_vectors(depsgraph)
    sinew = rig_reader.engine()
    ob_eval = problem.ob.evaluated_get(depsgraph)
    pbs = ob_eval.pose.bones
    to_world = Matrix(ob_eval.matrix_world) if world else Matrix.Identity(4)
    # A direction is carried by the matrix, a plane's normal by its inverse transpose.
    carry = {"direction": to_world.to_3x3(), "normal": to_world.to_3x3().inverted_safe().transposed()}
    out = np.zeros(len(problem.goals))
    for i, spec in enumerate(problem.goals):
        pb = pbs[spec.bone]
        effector = to_world @ (pb.tail if spec.use_tail else pb.head)
        target = to_world @ Vector(targets[i])
        if spec.kind == "position":
            out[i] = (effector - target).length
        elif spec.kind in rig_reader.TARGET_AXIS_KINDS:
            # (The engine's measure: the distance to the goal's line, plane or allowed side.)
            kind = problem.kind_arguments(i, vectors)
            key = rig_reader.KIND_VECTOR[spec.kind]
            kind[key] = tuple((carry[key] @ Vector(kind[key])).normalized())
            goal = sinew.Goal(spec.bone, tuple(target), use_tail=spec.use_tail, **kind)
            # (The rotation does not enter a point's distance.)
            out[i] = goal.errors(tuple(to_world @ pb.head), pb.matrix.to_quaternion(), tuple(effector))[0]
    return out


def checked_targets(problem: rig_reader.RigProblem, depsgraph, targets, vectors, followed=()):
    """``targets`` (G, 3) and ``vectors`` (G, 3) or None, the ones solved for, with those of the
    goals whose target follows bones the solve moved (``RigProblem.moving_targets``), and of the
    goals ``followed`` (whose target follows bones another armature of the call moved,
    ``CallOrder.followed_goals``, at full influence), re-read from ``depsgraph`` after the poses
    were written: Blender's evaluated pose is checked against where such a target is now, so a
    goal is not called reached while the target has moved away."""
    again = sorted(set(problem.moving_targets) | set(followed))
    if not again:
        return targets, vectors
    now, _orients, _poles = problem.sample_goals(depsgraph)
    targets = np.array(targets, dtype=np.float64)
    targets[again] = now[again]
    if vectors is not None:
        vectors = np.array(vectors, dtype=np.float64)
        vectors[again] = problem.sample_vectors(depsgraph)[again]
    return targets, vectors


def itasc_note(ob, settings: Settings) -> str | None:
    """Says how an armature set to Blender's iTaSC solver was solved (None for Standard IK)."""
    pose = ob.pose
    if pose is None or pose.ik_solver != 'ITASC':
        return None
    p = pose.ik_param
    # (What rig_reader reads of an IK constraint and of a bone, and what it does not.)
    return (f'Armature "{ob.name}" is set to the iTaSC IK solver; Sinew solved it with its own solver '
            f"({method_label(settings.method)}, {settings.max_iterations} iterations, tolerance {settings.tolerance:g}, root {settings.root}), "
            "taking each IK constraint's target, pole, chain length, Use Tail, Stretch, Position weight, Rotation "
            "(on or off) and influence, and the bones' IK limits, stiffness and IK Stretch from the rig. "
            f"Not used: iTaSC's own settings (mode {p.mode.title()}, solver {p.solver}, precision {p.precision:g}, "
            f"{p.iterations} iterations and the rest of its panel), the constraints' Axis Reference, Lock X/Y/Z "
            "(under Position and Rotation) and Rotation weight (Orientation Weight), and the bones' Control Rotation "
            "and IK Rotation Weight")


def goal_report(problem: rig_reader.RigProblem, residuals, orientation_residuals) -> str:
    """One line for every goal: ``bone: distance`` and, where the goal has an orientation,
    ``, orientation error <degrees>°``. ``residuals`` and ``orientation_residuals`` are (G,) (one
    solve) or (F, G) (a bake: the worst frame is reported)."""
    res = np.asarray(residuals, dtype=np.float64)
    ori = np.asarray(orientation_residuals, dtype=np.float64)
    if res.ndim == 2:
        res = res.max(axis=0) if len(res) else np.zeros(res.shape[1])
    if ori.ndim == 2:
        ori = ori.max(axis=0) if len(ori) else np.zeros(ori.shape[1])
    parts = []
    for i, g in enumerate(problem.goals):
        text = f"{g.bone}: {res[i]:.3g}" if i < len(res) else f"{g.bone}: ?"
        if g.reports_angle and i < len(ori):
            text += f", {'aim' if g.kind == 'aim' else 'orientation'} error {np.degrees(ori[i]):.3g}°"
        parts.append(text)
    return "; ".join(parts)


def _snapshot_pose(ob):
    return {pb.name: (tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler),
                      tuple(pb.rotation_axis_angle), tuple(pb.scale)) for pb in ob.pose.bones}


def _restore_pose(ob, snap):
    for pb in ob.pose.bones:
        s = snap.get(pb.name)
        if s is not None:
            pb.location, pb.rotation_quaternion, pb.rotation_euler, pb.rotation_axis_angle, pb.scale = s


def modifier_warning(found) -> str:
    """The warning that F-curve modifiers (``keys.acting_modifiers``: ``found``) act on channels
    Solve IK keyed, naming each, and what to do."""
    return (f"F-curve modifiers act on channels Solve IK keyed ({keys.describe_modifiers(found)}): Blender applies "
            "them on top of the keys (and some, such as a Generator that replaces the keys, keep it from inserting "
            f"a key at all), so the keyed pose is not the solved one. For each, {keys.MODIFIER_REMEDY}, and solve "
            "again")


def muted_warning(muted) -> str:
    """The warning that Solve IK keyed channels whose F-curves are muted (``keys.muted_curves``:
    ``muted``), naming each, and what to do."""
    return (f"F-curves Solve IK keyed are muted ({keys.describe_channels(muted)}): Blender does not play a muted "
            f"F-curve (or one in a muted group), so the keys there do not animate the bones: the solved pose stays only "
            f"until something else sets them. "
            f"{keys.MUTED_REMEDY}")


def _not_keyed_why(keying, channel: str, modifiers: bool = False) -> str:
    """Why keying as ``keying`` (a ``keys.AutoKeying``) left a solved ``channel`` ("rotation" or
    "scale") without a key at the frame, and what to change. ``modifiers``: F-curve modifiers act
    on the channels keyed (``modifier_warning``), which may be why."""
    if keying.keying_set is not None:
        return (f'Only Active Keying Set is on and keying set "{keying.keying_set.bl_label}" does not key it; '
                f"make a keying set with {channel} active, or turn Only Active Keying Set off (Timeline > Keying)")
    whys = []
    if keying.only_available:
        whys.append(f"Only Insert Available is on and there is no {channel} F-curve to key; key the {channel} once, "
                    "or turn Only Insert Available off (Preferences > Animation > Auto-Keyframing)")
    if keying.replace_only:
        whys.append(f"Auto Keying is in Replace mode and there was no {channel} key at this frame to replace; insert "
                    "one, or set Auto Keying to Add & Replace (Timeline > Keying)")
    if modifiers:
        whys.append(f"an F-curve modifier on its {channel} keeps Blender from inserting keys (see the warning that "
                    "names it)")
    return "; or ".join(whys) or "Blender did not insert the key"


def _bones_text(bones) -> str:
    """'1 bone ("b02")' / '5 bones ("a", "b", "c", "d" and 1 more)'."""
    shown = ", ".join(f'"{b}"' for b in bones[:4]) + (f" and {len(bones) - 4} more" if len(bones) > 4 else "")
    return f"{len(bones)} bone{'s' if len(bones) > 1 else ''} ({shown})"


def _frames_text(frames, most: int = 8) -> str:
    """'1, 20' (sorted; at most ``most``, then 'and N more')."""
    frames = sorted(set(frames))
    text = ", ".join(f"{f:g}" for f in frames[:most])
    return text + (f" and {len(frames) - most} more" if len(frames) > most else "")


def unkeyed_warning(bones, keying, modifiers: bool = False, channel: str = "rotation") -> str:
    """The warning that the solved rotations (``channel`` "scale": the stretch's scales) of
    ``bones`` were not keyed (keyed as ``keying``, a ``keys.AutoKeying``, says): why, that the
    pose will not hold at other frames, and what to change. ``modifiers``: F-curve modifiers act
    on the channels keyed (``modifier_warning``), which may be why."""
    solved = "rotation" if channel == "rotation" else "scale (a stretch)"
    what = f"the solved {solved} of {_bones_text(bones)} is not keyed"
    return f"{what}, so the solved pose will not hold at other frames: {_not_keyed_why(keying, channel, modifiers)}"


def held_scales_note(kept, frame, last=None) -> str:
    """The note that Solve IK (a bake: over ``frame`` to ``last``) keyed, around a stretch keyed at
    ``frame``, the scale the bones had before at their rotation keys on either side
    (``keys.key_held_scales``: ``kept``)."""
    where = "; ".join(f'bone "{b}": {_frames_text(fs)}' for b, fs in kept.items())
    keyed = f"at frame {frame:g}" if last is None else f"over frames {frame:g} to {last:g}"
    return (f"the stretch keyed {keyed} is Sinew's, not the animation's: Sinew also keyed the scale the bones had "
            f"before at their rotation keys around it ({where}), so it changes the animation only between those "
            "keys, as the rotation keys do")


def stretch_everywhere_warning(everywhere, scales, index, before, keying) -> str:
    """The warning that the stretch Solve IK set on the bones of ``everywhere`` ({bone: the frames,
    other than the solved one, where its rotation has keys}) is not keyed and that nothing
    animates their scale, so it holds at every frame and changes those keyed poses: names the
    bones with their scale now (``scales`` (N,), engine order ``index``) and before (``before``
    {bone: (3,)}), the frames, why (``keying``, a ``keys.AutoKeying``; None: not keying) and what
    to do."""
    bones = list(everywhere)
    scaled = ", ".join(f'"{b}" ×{float(scales[index[b]]):.4g} (was ×{float(before[b][1]):.4g})' for b in bones[:4])
    if len(bones) > 4:
        scaled += f" and {len(bones) - 4} more"
    frames = _frames_text([f for fs in everywhere.values() for f in fs])
    if keying is None:
        why = ("the pose was set, not keyed (Auto Keying is off). To keep the stretch at this frame only, solve with "
               "Insert Keyframes on (Adjust Last Operation panel): Sinew then also keys the scale the bones had "
               "before at their rotation keys around this frame")
    else:
        why = (f"{_not_keyed_why(keying, 'scale')}, and solve again: Sinew then also keys the scale the bones had "
               "before at their rotation keys around this frame")
    return (f"the stretch Solve IK set as pose scale ({scaled}) is not keyed, and no F-curve animates their scale, so "
            f"it now holds at every frame: the frames where these bones have rotation keys ({frames}) change too. "
            f"Why: {why}. To drop the stretch, clear the scale (Alt+S) or undo")


class PendingSolve:
    """One armature solved and not yet written (``prepare_solve``): ``set_pose()`` sets the pose,
    ``key_pose()`` keys it, ``finish()`` measures Blender's evaluated pose and gives the SolveResult.
    ``scales``: (N,) the pose scales to set and key (each bone's length over its parent's) when
    the rig stretches, else None; ``targets``: (G, 3) the targets solved for (moved by influence)."""

    def __init__(self, ob, problem, settings, sol, rotations, root_bone, key, frame, t0, scales=None, targets=None,
                 vectors=None):
        self.ob, self.problem, self.settings, self.sol = ob, problem, settings, sol
        self.rotations, self.root_bone, self.key, self.frame, self.t0 = rotations, root_bone, key, frame, t0
        self.scales, self.targets, self.vectors = scales, targets, vectors
        self.keyed: list[str] = []
        self.key_note = ""
        self.unkeyed = ""
        self.curve_warnings = ""
        self.held_note = ""
        self.stretch_everywhere = ""
        self._saved_pose = _snapshot_pose(ob)

    def set_pose(self) -> None:
        """Sets the moved bones' rotations (their scales, where the rig stretches, and the free
        root's location)."""
        ob, problem = self.ob, self.problem
        idx = problem.index
        moved = problem.moved_bones
        moved_idx = [idx[n] for n in moved]
        keys.set_pose(ob, moved, self.rotations[moved_idx], self.root_bone, np.asarray(self.sol.root_translation),
                      self.scales[moved_idx] if self.scales is not None else None)

    def key_pose(self, context, keying=None) -> None:
        """When keying, keys the pose ``set_pose`` set at the frame as ``keying`` (a
        ``keys.AutoKeying``; None: the default) says: through its keying set if it has one
        (``keys.key_with_keying_set``: the keying set decides the channels), else their rotation
        channels (the scales of a stretching rig's moved bones, the free root's location), only
        those with an F-curve when ``only_available``, only keys already at the frame when
        ``replace_only``. When a moved bone's rotation ends up with
        no key at the frame, ``unkeyed`` says which and why (the pose will not hold); when
        F-curve modifiers act on the channels keyed at the frame, or their F-curves are muted,
        ``curve_warnings`` names them.

        A stretch (a moved bone's scale the solve changed) is the solve's, not the animator's:
        where its scale is keyed at the frame (not in Replace mode), the scale the bone had
        before is keyed too at its rotation keys on either side where the scale has none
        (``keys.scales_to_hold``), so the stretch changes the animation only between them, as
        the rotation key does (``held_note`` says where); a stretch left unkeyed on a scale that
        nothing animates holds at every frame: ``stretch_everywhere`` warns, naming the bones
        and the keyed frames that change (also when not keying)."""
        stretched = self._stretched()
        if not self.key:
            self._warn_unkeyed_stretch(stretched, None)
            return
        ob, moved = self.ob, self.problem.moved_bones
        key_scale = self.scales is not None
        keying = keying or keys.AutoKeying()
        # (Not in Replace mode, which keys only over keys already there.)
        held = {} if keying.replace_only else keys.scales_to_hold(ob, stretched, self.frame)
        if keying.keying_set is not None:
            self.keyed, self.key_note = keys.key_with_keying_set(context, ob, moved, self.frame, keying.keying_set,
                                                                 self.root_bone, key_scale=key_scale)
        else:
            keys.key_current(ob, moved, self.frame, self.root_bone, key_scale=key_scale,
                             only_available=keying.only_available, replace_only=keying.replace_only)
            self.keyed = list(moved)
        found = keys.acting_modifiers(ob, moved, self.frame, self.frame, self.root_bone, key_scale)
        muted = keys.muted_curves(ob, moved, self.root_bone, key_scale)
        self.curve_warnings = " ".join(w for w in (modifier_warning(found) if found else "",
                                              muted_warning(muted) if muted else "") if w)
        unkeyed = keys.unkeyed_rotations(ob, moved, self.frame)
        if unkeyed:
            self.keyed = [n for n in self.keyed if n not in unkeyed]
            self.unkeyed = unkeyed_warning(unkeyed, keying, modifiers=any(name in unkeyed for name, *_ in found))
        kept = keys.key_held_scales(ob, held, self.frame)
        if kept:
            self.held_note = held_scales_note(kept, self.frame)
        self._warn_unkeyed_stretch(stretched, keying, unkeyed, found)

    def _stretched(self) -> dict[str, tuple]:
        """{moved bone: its scale before the solve} for the moved bones whose scale the solve
        changes (a stretch; empty when the rig does not stretch)."""
        if self.scales is None:
            return {}
        idx = self.problem.index
        out = {}
        for name in self.problem.moved_bones:
            before = self._saved_pose[name][4]
            now = float(self.scales[idx[name]])
            if max(abs(now - v) for v in before) > 1e-6 * max(1.0, abs(now)):
                out[name] = before
        return out

    def _warn_unkeyed_stretch(self, stretched, keying, unkeyed=(), found=()) -> None:
        """Sets ``stretch_everywhere`` for the bones of ``stretched`` whose scale nothing
        animates, left unkeyed (``keying`` None: not keying), and, when keying, adds the bones
        whose stretch was not keyed on a scale F-curve (it will not hold) to ``unkeyed``."""
        if not stretched:
            return
        not_held, everywhere = keys.unkeyed_scales(self.ob, list(stretched), self.frame)
        if everywhere:
            self.stretch_everywhere = stretch_everywhere_warning(everywhere, self.scales, self.problem.index,
                                                                 stretched, keying)
        not_held = [n for n in not_held if n not in unkeyed]
        if keying is not None and not_held:
            text = unkeyed_warning(not_held, keying, modifiers=any(name in not_held for name, *_ in found),
                                   channel="scale")
            self.unkeyed = f"{self.unkeyed} {text}" if self.unkeyed else text

    def restore(self) -> None:
        """Puts the pose back as it was when the solve was prepared (keys are not touched)."""
        _restore_pose(self.ob, self._saved_pose)

    def finish(self, depsgraph, followed=()) -> SolveResult:
        """The SolveResult, measured on Blender's evaluated pose (``depsgraph``) after every
        armature of the call is written. ``followed``: goals whose target follows bones another
        armature of the call moved (``CallOrder.followed_goals``): measured where it is now."""
        sol = self.sol
        # (Against the targets solved for: a goal moved by its influence, blend_goals; a target
        # that follows the bones just written, where it is now.)
        followed = [i for i in followed if self.problem.goals[i].influence >= 1.0]
        targets, vectors = checked_targets(self.problem, depsgraph, self.targets, self.vectors, followed)
        misses = evaluated_misses(self.problem, depsgraph, targets, vectors)
        world_misses = evaluated_misses(self.problem, depsgraph, targets, vectors, world=True)
        residuals = self.problem.to_armature_distances(sol.residuals, self.problem.scales_above)
        res = SolveResult(self.problem, self.rotations, np.asarray(sol.root_translation), residuals,
                          int(sol.iterations), bool(sol.reached), str(sol.stop_reason), list(self.keyed),
                          time.perf_counter() - self.t0, misses, self.settings.tolerance,
                          np.asarray(sol.orientation_residuals), scales=self.scales, key_note=self.key_note,
                          world_misses=world_misses, unkeyed=self.unkeyed, curve_warnings=self.curve_warnings,
                          held_note=self.held_note, stretch_everywhere=self.stretch_everywhere)
        return res


@dataclass
class SolveInput:
    """What Solve IK hands the engine for one armature at the current frame (``read_solve_input``):
    the problem, the targets (influence applied), and the current pose, its stretch included,
    which is both where the solve starts and its reference pose. Compare IK Methods solves the
    same input."""

    problem: rig_reader.RigProblem
    targets: tuple                 # (G, 3) targets, (G, 4) orientations wxyz, (G, 3) poles: in the goals'
                                   # engine frames (armature space with the scale above the chains
                                   # divided out, RigProblem.to_engine)
    pose: np.ndarray               # (N, 4) wxyz, the pose before IK
    root_translation: np.ndarray   # (3,)
    vectors: np.ndarray | None = None  # (G, 3) the goals' kind vectors (RigProblem.sample_vectors)
    # (N,) the pose before IK's length scales (RigProblem.pose_length_scales: a stretch keyed
    # before included), None when the rig does not stretch
    scales: np.ndarray | None = None

    def engine_goals(self):
        return self.problem.engine_goals(*self.targets, self.vectors)

    @property
    def armature_targets(self) -> np.ndarray:
        """(G, 3) the targets solved for, in armature space (where Blender's pose is measured)."""
        p = self.problem
        return p.to_engine(self.targets[0], p.rest, p.scales_above, inverse=True)

    @property
    def length_scale(self) -> float:
        """``Settings.solver``'s ``length_scale`` for this input."""
        return float(self.problem.goal_scales(self.problem.scales_above).max())

    def armature_distances(self, residuals) -> np.ndarray:
        """The engine's residuals (G,) as armature-space distances."""
        return self.problem.to_armature_distances(residuals, self.problem.scales_above)

    def solve(self, solver, root: str, goals=None):
        """The one engine call of a solve: ``(solution, seconds spent in the call)``. ``goals``:
        ``engine_goals()``, made here when not given. Raises the engine's SinewError."""
        goals = self.engine_goals() if goals is None else goals
        t0 = time.perf_counter()
        sol = solver.solve(self.problem.rig, goals, pose=self.pose, root_translation=self.root_translation,
                           root=root, reference=self.pose, reference_root_translation=self.root_translation,
                           scales=self.scales, reference_scales=self.scales)
        return sol, time.perf_counter() - t0


def read_solve_input(context, ob, settings: Settings) -> SolveInput:
    """Reads armature ``ob`` as Solve IK solves it at the current frame, changing nothing
    (ReadError, NoGoalsError when it has no goal to solve)."""
    depsgraph = context.evaluated_depsgraph_get()
    problem = rig_reader.read(ob, depsgraph=depsgraph, only_selected=settings.only_selected)
    targets = problem.sample_goals(depsgraph)
    problem.check_samples(*(a[None] for a in targets), [context.scene.frame_current])
    vectors = problem.sample_vectors(depsgraph)
    problem.check_vectors(vectors[None], [context.scene.frame_current])
    pose, root_t = problem.pose_from_bones(ob.pose.bones)
    scales = problem.pose_length_scales(ob.pose.bones)
    # The current pose is the pose before IK (IK constraints never change the bones' own
    # rotation and scale channels): it is both where the solve starts and where the freedom the
    # goals leave falls back to, so a goal already met leaves the pose as it is. Its lengths too:
    # a stretch keyed as pose scale by an earlier solve is the pose's, as Blender shows it (and
    # as Blender's IK starts from it), not undone toward rest lengths.
    # IK constraint influence as Blender applies it: pole-less goals move toward the effector's
    # pose before IK (here); chains with a pole are blended with it after solving (prepare_solve).
    tg, orients, poles = (np.array(a, dtype=np.float64)[None] for a in targets)
    # In the goals' engine frames (the scale of the bones above the chains divided out).
    tg = problem.to_engine(tg, problem.rest[None], problem.scales_above[None])
    poles = problem.to_engine(poles, problem.rest[None], problem.scales_above[None])
    problem.blend_goals(lambda _k: problem.rig, tg, orients, np.asarray(pose, dtype=np.float64)[None],
                        np.asarray(root_t, dtype=np.float64)[None],
                        reference_scales=None if scales is None else scales[None])
    return SolveInput(problem, (tg[0], orients[0], poles[0]), pose, root_t, vectors, scales)


def prepare_solve(context, ob, settings: Settings, *, key: bool = True) -> PendingSolve:
    """Reads armature ``ob`` and solves it at the current frame from its current pose, changing
    nothing (ReadError, NoGoalsError when it has no goal to solve). See ``solve_pose``."""
    sinew = engine()
    t0 = time.perf_counter()
    check_editable(ob)
    inp = read_solve_input(context, ob, settings)
    problem = inp.problem
    solver = settings.solver(inp.length_scale)
    root_bone = problem.root_bone if settings.root == "free" else None
    if root_bone is not None and not ob.data.bones[root_bone].use_local_location:
        raise ReadError(f'Bone "{root_bone}": Local Location is off (Bone properties > Relations), so Sinew cannot '
                        "key its location for the Free root: turn Local Location on, or use the Pinned root")
    if key:
        ad = ob.animation_data
        if ad is not None and ad.action is not None and not ad.action.is_editable:
            raise ReadError(f"Action {keys.quoted_name(ad.action)} is linked and cannot be keyed: turn Insert "
                            "Keyframes off, or give the object a local action")
    try:
        sol, _seconds = inp.solve(solver, settings.root)
    except sinew.SinewError as ex:
        raise ReadError(f"Sinew could not solve: {ex}") from ex
    rotations = np.array(sol.rotations, dtype=np.float64)
    # A stretch is keyed as a uniform pose scale, each bone's length over its parent's.
    scales = problem.local_scales(np.array(sol.scales, dtype=np.float64))[None] if problem.stretches else None
    problem.blend_result(np.asarray(inp.pose, dtype=np.float64)[None], rotations[None], scales,
                         reference_scales=None if inp.scales is None else problem.local_scales(inp.scales)[None])
    if not np.all(np.isfinite(rotations)) or (scales is not None and not np.all(np.isfinite(scales))):
        raise ReadError("Sinew returned a non-finite pose; nothing was changed")
    return PendingSolve(ob, problem, settings, sol, rotations, root_bone, key, context.scene.frame_current, t0,
                        scales[0] if scales is not None else None, inp.armature_targets, inp.vectors)


def solve_pose(context, ob, settings: Settings, *, key: bool = True, keying=None) -> SolveResult:
    """Solves armature ``ob`` at the current frame from its current pose and writes the moved
    bones' rotations (and keys them at the current frame when ``key``, as ``keying``, a
    ``keys.AutoKeying``, says). Blender IK constraints are left as they are (other frames keep
    them); then Blender's evaluated pose is measured against the targets (``SolveResult.misses``)."""
    return solve_poses(context, [ob], settings, key=key, keying=keying)[0][0]


def _armature_error(ob, ex: ReadError, several: bool) -> ReadError:
    """``ex``, naming the armature when several are solved and the message does not."""
    text = str(ex)
    if not several or text.startswith(f'Armature "{ob.name}"'):
        return ex
    return type(ex)(f'Armature "{ob.name}": {text}')


def _read_each(obs, read, verb: str):
    """``read(ob)`` for every armature of ``obs``: (what it returned for each, skipped). With
    several armatures one without goals is skipped (its NoGoalsError's message in ``skipped``);
    with one, or when none has goals, NoGoalsError ("... has a goal to ``verb``"). Any other
    ReadError is raised, naming the armature when several are read."""
    several = len(obs) > 1
    read_ok, skipped = [], []
    for ob in obs:
        try:
            read_ok.append(read(ob))
        except rig_reader.NoGoalsError as ex:
            if not several:
                raise
            skipped.append(str(ex))
        except ReadError as ex:
            raise _armature_error(ob, ex, several) from ex
    if not read_ok:
        raise rig_reader.NoGoalsError(f"No armature in Pose Mode has a goal to {verb}: " + " ".join(skipped))
    return read_ok, skipped


# --------------------------------------------------------------------------------------------
# Several armatures in one call: each is solved after the armatures whose moved bones it follows
# --------------------------------------------------------------------------------------------




@dataclass
class CallOrder:
    """How one call solves several armatures (``call_order``)."""

    order: list[int]          # indices of the call's armatures, each after the ones it follows
    follows: list[dict]       # per armature: {index of an armature whose moved bones it follows: what
                              # follows them ("the target of bone ...", "the armature object")}
    followed_goals: list[list[int]]  # per armature: its goals whose target follows such bones

    def read_later(self, i: int) -> bool:
        """Whether some armature of the call follows armature ``i``'s moved bones."""
        return any(i in f for f in self.follows)

    def notes(self, problems, verb: str) -> list[str]:
        """'"A" <verb> after "B": <why>', for every armature that follows another's moved bones."""
        out = []
        for i in self.order:
            for j, why in self.follows[i].items():
                out.append(f'"{problems[i].ob.name}" {verb} after "{problems[j].ob.name}": {why} follows bones that '
                           f'"{problems[j].ob.name}"\'s goals move')
        return out


def call_order(problems) -> CallOrder:
    """The order to solve the armatures of one call in (``problems``, one RigProblem each, as the
    user has them): armature X is solved after armature Y when X follows some bone Y's goals move
    (``rig_reader.follows_moved_bones``): a goal's target or pole, the armature object itself, or a bone its
    chains hang from. Otherwise the user's order is kept. Armatures that follow each other's moved
    bones, directly or through others, cannot be ordered: ReadError naming them and why, before
    anything is solved or written."""
    moved = {p.ob: set(p.moved_bones) for p in problems}
    index = {p.ob: i for i, p in enumerate(problems)}
    follows, followed_goals = [], []
    for p in problems:
        others = {ob: names for ob, names in moved.items() if ob != p.ob}
        why, goals = {}, []
        if others:
            for k, g in enumerate(p.goals):
                for ref, what in ((g.target, "target"), (g.pole, "pole target")):
                    if ref is None:
                        continue
                    hit = rig_reader.follows_moved_bones(ref.ob, ref.node, others)
                    for ob in hit:
                        why.setdefault(index[ob], f'the {what} of bone "{g.owner or g.bone}" ({ref.describe()})')
                    if hit and ref is g.target:
                        goals.append(k)
            for name in ["", *p.anchors]:
                for ob in rig_reader.follows_moved_bones(p.ob, name, others):
                    why.setdefault(index[ob], f'bone "{name}" (above its chains)' if name else "the armature object")
        follows.append(why)
        followed_goals.append(goals)
    order, done = [], set()
    while len(order) < len(problems):
        ready = [i for i in range(len(problems)) if i not in done and done.issuperset(follows[i])]
        if not ready:
            raise ReadError(_cycle_message(problems, follows, done))
        order.append(ready[0])
        done.add(ready[0])
    return CallOrder(order, follows, followed_goals)


def _cycle_message(problems, follows, done) -> str:
    """The refusal of armatures that follow each other's moved bones: the first cycle among the
    armatures not ordered (``done`` holds the ones that were)."""
    path, i = [], min(i for i in range(len(problems)) if i not in done)
    while i not in path:
        path.append(i)
        i = min(j for j in follows[i] if j not in done)
    cycle = path[path.index(i):]
    names = [f'"{problems[k].ob.name}"' for k in cycle]
    who = " and ".join(names) if len(names) == 2 else ", ".join(names[:-1]) + " and " + names[-1]
    each = "each follow bones the other's goals move" if len(cycle) == 2 else \
        "follow bones each other's goals move, in a ring"
    why = "; ".join(f'"{problems[k].ob.name}": {follows[k][cycle[(n + 1) % len(cycle)]]}' for n, k in enumerate(cycle))
    return (f"Armatures {who} {each} ({why}): Sinew solves an armature after the ones whose bones it follows, so it "
            "cannot solve these in one call; nothing was changed. Solve or bake them one at a time (only one of them "
            "in Pose Mode)")


def solve_poses(context, obs, settings: Settings, *, key: bool = True, keying=None):
    """Solves every armature of ``obs`` (one engine call each) and writes them only when all could
    be solved: (results, skipped, notes), where ``skipped`` says which armatures had no goal to
    solve (with several armatures such an armature is skipped; with one, or when none has a goal,
    NoGoalsError). Any other ReadError changes nothing.

    Armatures are solved in ``call_order``: one that follows bones another moves (a target on its
    bone, a Bone parent) is read and solved again once the other's pose is set, so it aims where
    that bone is then; ``notes`` says which were ("A" solved after "B": why). All are read and
    solved first (every refusal before anything changes, a cycle too); the poses are set in that
    order, then keyed, then every armature is measured. The results are in the order of ``obs``."""
    several = len(obs) > 1
    pending, skipped = _read_each(obs, lambda ob: prepare_solve(context, ob, settings, key=key), "solve")
    order = call_order([p.problem for p in pending])
    try:
        for i in order.order:
            if order.follows[i]:
                context.view_layer.update()
                try:
                    pending[i] = prepare_solve(context, pending[i].ob, settings, key=key)
                except ReadError as ex:
                    raise _armature_error(pending[i].ob, ex, several) from ex
            pending[i].set_pose()
        for p in pending:
            p.key_pose(context, keying)
    except BaseException:
        for p in pending:
            p.restore()
        raise
    context.view_layer.update()
    depsgraph = context.evaluated_depsgraph_get()
    results = [p.finish(depsgraph, order.followed_goals[i]) for i, p in enumerate(pending)]
    return results, skipped, order.notes([p.problem for p in pending], "solved")


# --------------------------------------------------------------------------------------------
# Compare IK Methods: the problem Solve IK would solve, solved by every method, nothing written
# --------------------------------------------------------------------------------------------

_UNSUPPORTED_PREFIX = re.compile(r'^method "[^"]*" cannot solve this problem: ')


def short_reason(message: str) -> str:
    """The gist of an UnsupportedError's message, for a panel row: without the leading
    ``method "x" cannot solve this problem:``, up to the first parenthesis or semicolon."""
    text = _UNSUPPORTED_PREFIX.sub("", str(message).strip())
    for stop in (" (", "; "):
        k = text.find(stop)
        if k > 0:
            text = text[:k]
    return text.rstrip(" :;,.")


def compare_methods(context, ob, settings: Settings) -> dict:
    """Solves what Solve IK would solve for armature ``ob`` at the current frame
    (``read_solve_input``, ``settings`` but its method) once with every method of
    ``method_names()``, writing nothing. A document for the Method Comparison panel:
    ``{"armature", "frame", "goals", "orientation" (whether some goal has one), "max_iterations",
    "tolerance", "root", "only_selected", "best" (the method that reached every goal in the least
    time, or None), "methods": [row]}``, a row per method in the engine's order: ``{"method",
    "reached", "position" (worst distance left, armature space), "orientation" (worst degrees, or
    None), "iterations", "ms" (the one engine call, time.perf_counter), "stop", "unsupported" (the
    UnsupportedError's message, or None), "failed" (any other engine error, or None)}``."""
    sinew = engine()
    names = method_names()
    inp = read_solve_input(context, ob, settings)
    replace(settings, method=names[0]).solver()  # a bad setting: ReadError, before any solve
    try:
        goals = inp.engine_goals()
    except sinew.SinewError as ex:
        raise ReadError(f"Sinew could not solve: {ex}") from ex
    orientation = any(g.reports_angle for g in inp.problem.goals)
    rows = []
    for name in names:
        row = {"method": name, "reached": False, "position": None, "orientation": None, "iterations": None,
               "ms": None, "stop": None, "unsupported": None, "failed": None}
        try:
            solver = replace(settings, method=name).solver(inp.length_scale)
            sol, seconds = inp.solve(solver, settings.root, goals)
        except sinew.UnsupportedError as ex:
            row["unsupported"] = str(ex)
        except (sinew.SinewError, ReadError) as ex:
            row["failed"] = str(ex)
        else:
            res = inp.armature_distances(sol.residuals)
            row.update(reached=bool(sol.reached), position=float(res.max()) if res.size else 0.0,
                       iterations=int(sol.iterations), ms=seconds * 1000.0, stop=str(sol.stop_reason))
            if orientation:
                ori = np.asarray(sol.orientation_residuals, dtype=np.float64)
                row["orientation"] = float(np.degrees(ori.max())) if ori.size else 0.0
            if not np.all(np.isfinite(np.asarray(sol.rotations, dtype=np.float64))):
                row.update(reached=False, failed="returned a non-finite pose")
        rows.append(row)
    reached = [r for r in rows if r["reached"] and r["failed"] is None]
    best = min(reached, key=lambda r: r["ms"])["method"] if reached else None
    return {"armature": ob.name, "frame": int(context.scene.frame_current), "goals": len(inp.problem.goals),
            "orientation": orientation, "max_iterations": int(settings.max_iterations),
            "tolerance": float(settings.tolerance), "root": settings.root,
            "only_selected": bool(settings.only_selected), "best": best, "methods": rows}


# Kept in memory, per object (its session_uid), not on the object: the comparison is a read-only
# command (no undo step), so it must not change Blender data, and timings of one session and one
# pose have no place in the saved file. Gone when Blender restarts or the add-on is disabled.
_comparisons: dict = {}


def store_compare_results(ob, doc: dict) -> None:
    """Keeps ``compare_methods``' document for ``ob`` (for the sidebar's Method Comparison)."""
    if len(_comparisons) > 32:
        _comparisons.clear()
    _comparisons[ob.session_uid] = doc


def compare_results(ob) -> dict | None:
    """What ``store_compare_results`` kept for ``ob``, or None."""
    try:
        return _comparisons.get(ob.session_uid)
    except (AttributeError, ReferenceError):
        return None


def forget_compare_results() -> None:
    _comparisons.clear()


# --------------------------------------------------------------------------------------------
# Sampling plain F-curve-animated targets without stepping frames
# --------------------------------------------------------------------------------------------
#
# Stepping the scene (``frame_set``) evaluates everything that depends on time, once per frame.
# A target that is a plain object (no parent, no constraints, no drivers, animated only by its
# own action) has a world matrix that is a function of its F-curves alone, so it is computed
# here for all frames at once: each F-curve is evaluated at every frame and the channels are
# composed as Blender composes an object's matrix (BKE_object_to_mat4). Anything else falls back
# to stepping the frames.

# Object transform channels (data path -> size) and how Blender composes them.
TRANSFORM_CHANNELS = {
    "location": 3, "rotation_euler": 3, "rotation_quaternion": 4, "rotation_axis_angle": 4, "scale": 3,
    "delta_location": 3, "delta_rotation_euler": 3, "delta_rotation_quaternion": 4, "delta_scale": 3,
}
_POSE_BONE_PATH = re.compile(r'pose\.bones\["((?:[^"\\]|\\.)*)"\]')
_ROTATION_PROPS = (".rotation_quaternion", ".rotation_euler", ".rotation_axis_angle")


def action_fcurves(id_data, driven_paths_read=None):
    """The F-curves Blender evaluates for ``id_data`` (an object or other ID), as a list of
    (data_path, array_index, fcurve), when its own action is the only thing that animates it:
    ``[]`` when nothing animates it, None when something else may (drivers, NLA tracks, tweak
    mode, an action with several layers or strips). Muted F-curves, F-curves in muted groups and
    empty F-curves are left out, as Blender leaves them out. Without NLA tracks Blender applies the
    action in full (its influence and blend mode only act on top of NLA tracks).

    ``driven_paths_read``: when given, the data paths the caller will read; drivers then count
    only where one sets such a path (a driver elsewhere cannot change what the action's
    F-curves give for them)."""
    ad = getattr(id_data, "animation_data", None)
    if ad is None:
        return []
    if driven_paths_read is None:
        drivers_matter = len(ad.drivers) > 0
    else:
        drivers_matter = any(not d.mute and d.data_path in driven_paths_read for d in ad.drivers)
    if drivers_matter or len(ad.nla_tracks) or ad.use_tweak_mode:
        return None
    act = ad.action
    if act is None:
        return []
    if keys.SLOTTED:
        if len(act.layers) > 1 or any(len(layer.strips) > 1 for layer in act.layers):
            return None
        if ad.action_slot is None:
            return []
        cb = keys.anim_utils.action_get_channelbag_for_slot(act, ad.action_slot)
        fcurves = cb.fcurves if cb is not None else ()
    else:
        fcurves = act.fcurves
    out = []
    for fc in fcurves:
        if not keys.is_played(fc):
            continue
        if not len(fc.keyframe_points) and not len(fc.modifiers):
            continue
        out.append((fc.data_path, fc.array_index, fc))
    return out


def fcurve_samples(fcurve, frames) -> np.ndarray:
    """``fcurve.evaluate(f)`` for every frame of ``frames`` (a list of floats), as an array."""
    return np.fromiter(map(fcurve.evaluate, frames), dtype=np.float64, count=len(frames))


def _euler_matrices(angles, order):
    """(F, 3, 3) rotation matrices of Euler angles (F, 3) (about X, Y, Z) in Blender's ``order``
    ('XYZ': X is applied first)."""
    n = len(angles)
    out = np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
    for axis in order:
        i = "XYZ".index(axis)
        j, k = (i + 1) % 3, (i + 2) % 3
        c, s = np.cos(angles[:, i]), np.sin(angles[:, i])
        r = np.zeros((n, 3, 3))
        r[:, i, i] = 1.0
        r[:, j, j] = c
        r[:, k, k] = c
        r[:, k, j] = s
        r[:, j, k] = -s
        out = r @ out
    return out


def _quaternion_matrices(q):
    """(F, 3, 3) from quaternions (F, 4) wxyz, normalised first; a zero quaternion is (0, 1, 0, 0)
    as in Blender's normalize_qt."""
    q = np.array(q, dtype=np.float64)
    n = np.linalg.norm(q, axis=1)
    zero = n == 0.0
    q[zero] = (0.0, 1.0, 0.0, 0.0)
    n[zero] = 1.0
    w, x, y, z = (q / n[:, None]).T
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=1),
    ], axis=1)


def _axis_angle_matrices(aa):
    """(F, 3, 3) from axis-angle (F, 4) = (angle, x, y, z); a zero axis is no rotation."""
    angle = aa[:, 0]
    axis = np.array(aa[:, 1:], dtype=np.float64)
    n = np.linalg.norm(axis, axis=1)
    zero = n == 0.0
    axis[zero] = (1.0, 0.0, 0.0)
    angle = np.where(zero, 0.0, angle)
    axis /= np.where(zero, 1.0, n)[:, None]
    c, s = np.cos(angle), np.sin(angle)
    x, y, z = axis.T
    t = 1.0 - c
    return np.stack([
        np.stack([c + t * x * x, t * x * y - s * z, t * x * z + s * y], axis=1),
        np.stack([t * x * y + s * z, c + t * y * y, t * y * z - s * x], axis=1),
        np.stack([t * x * z - s * y, t * y * z + s * x, c + t * z * z], axis=1),
    ], axis=1)


def object_world_matrices(ob, frames, scene, *, ignore=None) -> np.ndarray | None:
    """World matrices (F, 4, 4) of object ``ob`` at each of ``frames``, from its own F-curves,
    without evaluating the scene; or None when its transform may depend on anything else.

    Contract: a result is the ``matrix_world`` that ``scene.frame_set(f)`` followed by
    ``ob.evaluated_get(depsgraph)`` gives, for every f (up to float32 rounding). A result is
    returned only when ``ob`` has no parent, no constraint in effect (muted, invalid or zero
    influence ones are ignored, as Blender ignores them), no rigid body, no drivers and no NLA
    tracks; every F-curve of its action animates a transform channel (``TRANSFORM_CHANNELS``)
    or is accepted by ``ignore(data_path)`` (the caller takes care of those); and the scene's
    time is not remapped. Channels without an F-curve keep the object's current value.
    """
    if ob.parent is not None or getattr(ob, "rigid_body", None) is not None:
        return None
    if any(not rig_reader.is_off(c) for c in ob.constraints):
        return None
    if scene.render.frame_map_old != scene.render.frame_map_new:
        return None
    curves = action_fcurves(ob)
    if curves is None:
        return None
    nf = len(frames)
    values = {path: np.tile(np.array(getattr(ob, path), dtype=np.float64), (nf, 1)) for path in TRANSFORM_CHANNELS}
    fl = [float(f) for f in frames]
    for path, index, fc in curves:
        size = TRANSFORM_CHANNELS.get(path)
        if size is None:
            if ignore is not None and ignore(path):
                continue
            return None
        if 0 <= index < size:  # Blender ignores an F-curve with an index out of range
            values[path][:, index] = fcurve_samples(fc, fl)
    mode = ob.rotation_mode
    if mode == 'QUATERNION':
        rot = _quaternion_matrices(values["delta_rotation_quaternion"]) @ _quaternion_matrices(values["rotation_quaternion"])
    elif mode == 'AXIS_ANGLE':
        rot = _axis_angle_matrices(values["rotation_axis_angle"])  # Blender has no delta axis-angle in RNA
    else:
        rot = _euler_matrices(values["delta_rotation_euler"], mode) @ _euler_matrices(values["rotation_euler"], mode)
    out = np.zeros((nf, 4, 4))
    out[:, :3, :3] = rot * (values["scale"] * values["delta_scale"])[:, None, :]
    out[:, :3, 3] = values["location"] + values["delta_location"]
    out[:, 3, 3] = 1.0
    return out


def sample_goals_from_fcurves(problem: rig_reader.RigProblem, frames, scene, *, with_vectors: bool = False):
    """Every goal's target, orientation and pole over ``frames`` in armature space, as arrays
    (F, G, 3), (F, G, 4) wxyz, (F, G, 3): what ``problem.sample_goals(depsgraph)`` gives after
    ``scene.frame_set(f)`` for each frame, computed from F-curves (``object_world_matrices``)
    instead. None when a target or pole is a bone or a vertex group (its mesh may deform), or it
    or the armature object is not such a plain object (the armature's pose F-curves are left to
    ``pose_is_static``). With ``with_vectors``, a fourth array (F, G, 3):
    ``problem.sample_vectors`` per frame."""
    ob = problem.ob
    arm = object_world_matrices(ob, frames, scene, ignore=lambda path: path.startswith("pose."))
    if arm is None:
        return None
    det = np.linalg.det(arm[:, :3, :3]) if np.all(np.isfinite(arm)) else np.zeros(1)
    if np.any(np.abs(det) < 1e-12):
        return None  # stepping the frames reports it, frame by frame
    to_arm = np.linalg.inv(arm)
    cache = {}

    def in_armature_space(ref):
        if ref.bone or ref.vertex_group:
            return None
        key = ref.ob.name
        if key not in cache:
            w = arm if ref.ob == ob else object_world_matrices(ref.ob, frames, scene)
            cache[key] = None if w is None else to_arm @ w
        return cache[key]

    nf, ng = len(frames), len(problem.goals)
    targets = np.zeros((nf, ng, 3))
    orients = np.zeros((nf, ng, 4))
    orients[:, :, 0] = 1.0
    poles = np.zeros((nf, ng, 3))
    vectors = np.zeros((nf, ng, 3))
    for i, spec in enumerate(problem.goals):
        m = in_armature_space(spec.target)
        if m is None:
            return None
        targets[:, i] = m[:, :3, 3]
        if spec.kind == "aim":
            vectors[:, i] = rig_reader.axis_vector(spec.axis)
        elif spec.kind in rig_reader.TARGET_AXIS_KINDS:
            vectors[:, i] = [rig_reader.target_axis(r, spec.axis) for r in m[:, :3, :3]]
        if spec.use_orientation:
            # Exactly the conversion sample_goals makes (mathutils), frame by frame.
            orients[:, i] = [tuple(rig_reader.orientation_quaternion(Matrix(r), spec)) for r in m[:, :3, :3]]
        if spec.pole is not None:
            mp = in_armature_space(spec.pole)
            if mp is None:
                return None
            poles[:, i] = mp[:, :3, 3]
    return (targets, orients, poles, vectors) if with_vectors else (targets, orients, poles)


def bone_rotations_from_fcurves(ob, names, frames) -> np.ndarray | None:
    """Local rotations (F, len(names), 4) wxyz of pose bones ``names`` of armature ``ob`` at each
    of ``frames``, from the action's F-curves on their rotation channels, converted as
    ``rig_reader.bone_quaternion`` converts an evaluated pose bone (each bone's own rotation
    mode); channels without an F-curve keep the bone's current value. None when something other
    than the object's own action may animate it (``action_fcurves``). What ``scene.frame_set(f)``
    then ``bone_quaternion`` of the evaluated pose bone gives, without stepping the frames."""
    curves = action_fcurves(ob)
    if curves is None:
        return None
    nf = len(frames)
    fl = [float(f) for f in frames]
    wanted = {}
    for j, name in enumerate(names):
        pb = ob.pose.bones[name]
        wanted[f'pose.bones["{bpy.utils.escape_identifier(name)}"]'] = (j, pb)
    values = {}
    for path, index, fc in curves:
        m = _POSE_BONE_PATH.match(path)
        if m is None or path[:m.end()] not in wanted:
            continue
        prop = path[m.end() + 1:]
        size = {"rotation_quaternion": 4, "rotation_euler": 3, "rotation_axis_angle": 4}.get(prop)
        if size is None or not 0 <= index < size:
            continue
        j, pb = wanted[path[:m.end()]]
        key = (j, prop)
        if key not in values:
            values[key] = np.tile(np.array(getattr(pb, prop), dtype=np.float64), (nf, 1))
        values[key][:, index] = fcurve_samples(fc, fl)
    out = np.zeros((nf, len(names), 4))
    for j, name in enumerate(names):
        pb = ob.pose.bones[name]
        mode = pb.rotation_mode
        prop = ("rotation_quaternion" if mode == 'QUATERNION' else
                "rotation_axis_angle" if mode == 'AXIS_ANGLE' else "rotation_euler")
        v = values.get((j, prop))
        if v is None:
            out[:, j] = tuple(rig_reader.bone_quaternion(pb))
            continue
        for k in range(nf):
            if mode == 'QUATERNION':
                q = Quaternion(v[k])
                q = Quaternion() if q.magnitude < 1e-9 else q.normalized()
            elif mode == 'AXIS_ANGLE':
                a = v[k]
                q = Quaternion((a[1], a[2], a[3]), a[0]) if (a[1] or a[2] or a[3]) else Quaternion()
            else:
                q = Euler(v[k], mode).to_quaternion()
            out[k, j] = tuple(q)
    return out


_CONSTRAINT_PATH = re.compile(r'pose\.bones\["((?:[^"\\]|\\.)*)"\]\.constraints\["((?:[^"\\]|\\.)*)"\]\.(influence|mute)$')


def _animated_constraints(ob) -> set:
    """The constraints (bone, constraint name) of armature ``ob`` whose influence or mute an
    F-curve (of its action or an NLA strip's) or a driver may set."""
    ad = ob.animation_data
    if ad is None:
        return set()
    paths = [fc.data_path for fc in ad.drivers if not fc.mute]
    paths += keys.action_paths(ad.action)
    paths += keys.nla_paths(ad)
    out = set()
    for path in paths:
        m = _CONSTRAINT_PATH.match(path)
        if m:
            out.add((_unescape(m.group(1)), _unescape(m.group(2))))
    return out


def _unescape(name: str) -> str:
    return re.sub(r'\\(.)', r'\1', name)


def _influence_relevant(ob) -> set:
    """The constraints (bone, constraint name) of armature ``ob`` whose influence a bake reads:
    every IK constraint (goals, IK trees, ``rig_reader.check_trees_per_frame``) and every
    constraint of a bone inside some IK constraint's chain (``rig_reader.check_ik_chain_constraints``).
    The influence of any other constraint is never read, so an animated one needs no sampling."""
    pbs = ob.pose.bones
    chain_bones = set()
    for pb in pbs:
        for c in pb.constraints:
            if c.type != 'IK':
                continue
            b, n = pb, 0
            while b is not None and (c.chain_count == 0 or n <= c.chain_count):  # (a superset: safe)
                chain_bones.add(b.name)
                b, n = b.parent, n + 1
    return {(pb.name, c.name) for pb in pbs for c in pb.constraints
            if c.type == 'IK' or pb.name in chain_bones}


def constraint_influences(ob, frames, scene, view_layer) -> rig_reader.ConstraintInfluences:
    """``constraint_influences_steps`` run to the end (blocking)."""
    return run_to_end(constraint_influences_steps(ob, frames, scene, view_layer))


def run_to_end(steps):
    """Drives the generator ``steps`` to its end, ignoring the progress it yields, and returns
    what it returns."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def rescaled(steps, start: float, width: float):
    """Yields each progress ``p`` in [0, 1] of the generator ``steps`` as ``start + width * p``
    and returns what ``steps`` returns (``value = yield from rescaled(...)``). Closing this
    generator (Esc) closes ``steps`` then and there, so its clean-up runs at once."""
    try:
        while True:
            try:
                progress = next(steps)
            except StopIteration as done:
                return done.value
            yield start + width * progress
    finally:
        steps.close()


def constraint_influences_steps(ob, frames, scene, view_layer, chunk: int = 10):
    """Every constraint of armature ``ob``'s pose bones: its influence as Blender applies it (0
    while muted, ``rig_reader.constraint_enforce``) at each of ``frames``, as a generator: it
    yields progress in [0, 1] and returns the ``rig_reader.ConstraintInfluences``.

    Only the constraints a bake reads (``_influence_relevant``: IK constraints and the
    constraints of bones in IK chains) are sampled; every other one, and one whose influence and
    mute nothing animates, keeps its value now for every frame (nothing stepped, nothing
    yielded: the bake of a rig without such animation is not slowed). When only the object's own
    action animates them, they are read from its F-curves as Blender evaluates them (an
    influence clamped to [0, 1], a mute on from 0.5; drivers of other properties do not
    matter); when a driver of one of them or an NLA strip may, every frame is stepped (``scene.frame_set``) and the evaluated constraints read, yielding every
    ``chunk`` frames. The frame and the armature's pose are put back at the end, and also when
    the generator is closed early (Esc) or fails. Changes nothing."""
    frames = np.asarray(frames)
    nf = len(frames)
    keys_ = [(pb.name, c.name) for pb in ob.pose.bones for c in pb.constraints]
    columns = {k: j for j, k in enumerate(keys_)}
    values = np.zeros((nf, len(keys_)))
    now = [rig_reader.constraint_enforce(c) for pb in ob.pose.bones for c in pb.constraints]
    values[:] = now
    animated = _animated_constraints(ob)
    if animated:
        animated = [k for k in animated & _influence_relevant(ob) if k in columns]
    if not animated:
        return rig_reader.ConstraintInfluences(frames, columns, values)
    bases = {(bone, name): 'pose.bones["%s"].constraints["%s"].' % (bpy.utils.escape_identifier(bone),
                                                                      bpy.utils.escape_identifier(name))
             for bone, name in animated}
    # (A driver on some other property, a Rigify rig's say, does not make these F-curves wrong.)
    curves = action_fcurves(ob, {b + p for b in bases.values() for p in ("influence", "mute")})
    if curves is not None:
        fl = [float(f) for f in frames]
        by_path = {path: fc for path, _index, fc in curves}
        for bone, name in animated:
            c = ob.pose.bones[bone].constraints[name]
            base = bases[(bone, name)]
            influence = np.full(nf, float(c.influence))
            mute = np.full(nf, bool(c.mute))
            if base + "influence" in by_path:
                influence = fcurve_samples(by_path[base + "influence"], fl)
            if base + "mute" in by_path:
                mute = fcurve_samples(by_path[base + "mute"], fl) >= 0.5
            values[:, columns[(bone, name)]] = np.where(mute, 0.0, np.clip(influence, 0.0, 1.0))
        return rig_reader.ConstraintInfluences(frames, columns, values)
    chunk = max(1, int(chunk))
    saved_frame, saved_pose = (scene.frame_current, scene.frame_subframe), _snapshot_pose(ob)
    try:
        for k, f in enumerate(frames):
            scene.frame_set(int(f))
            pbs = ob.evaluated_get(view_layer.depsgraph).pose.bones
            for bone, name in animated:
                values[k, columns[(bone, name)]] = rig_reader.constraint_enforce(pbs[bone].constraints[name])
            if (k + 1) % chunk == 0 and k + 1 < nf:
                yield (k + 1) / nf
    finally:
        scene.frame_set(saved_frame[0], subframe=saved_frame[1])
        _restore_pose(ob, saved_pose)
        view_layer.update()
    yield 1.0
    return rig_reader.ConstraintInfluences(frames, columns, values)


def pose_is_static(problem: rig_reader.RigProblem) -> bool:
    """True when nothing a bake reads from the armature's evaluated pose changes with the frame,
    so one evaluation serves the whole range: the pose of the bones above the chains (anchors and
    their ancestors), of the connectors and the pose location of the moved bones. (What Only
    Moved Bones off keys of the other bones, ``keys.still_rotation_channels``, is what nothing
    animates: it is read from the bones, not per frame.)

    That holds when neither the armature object nor its data is driven or has NLA tracks, no
    F-curve animates those bones (F-curves on the moved bones' rotations are fine: they seed the
    start pose, read at the first frame, and each frame's reference pose, read from the F-curves
    by ``bone_rotations_from_fcurves``; other bones may be animated), and none of those bones has
    a constraint in effect other than the Blender IK constraints the goals replace."""
    ob = problem.ob
    curves = action_fcurves(ob)
    if curves is None or action_fcurves(ob.data) != []:
        return False
    bones = ob.data.bones
    moved = set(problem.moved_bones)
    relevant = moved | set(problem.connectors)
    for name in problem.anchors:
        b = bones[name]
        while b is not None:
            relevant.add(b.name)
            b = b.parent
    escaped = {bpy.utils.escape_identifier(n): n for n in bones.keys()}
    for path, _index, _fc in curves:
        if not path.startswith("pose."):
            continue  # the object's own channels: object_world_matrices decides
        m = _POSE_BONE_PATH.match(path)
        name = escaped.get(m.group(1)) if m else None
        if name is None:
            return False  # not a pose bone channel (or an unknown bone): be safe
        if name in moved and path[m.end():] in _ROTATION_PROPS:
            continue
        mc = _CONSTRAINT_PATH.match(path)
        if mc is not None and ob.pose.bones[name].constraints.get(_unescape(mc.group(2))) is not None and \
                ob.pose.bones[name].constraints[_unescape(mc.group(2))].type == 'IK':
            continue  # an IK constraint's influence: read per frame beforehand (constraint_influences)
        if name in relevant:
            return False
    replaced = set(problem.replaced)
    for name in relevant:
        for c in ob.pose.bones[name].constraints:
            if (name, c.name) in replaced or rig_reader.is_off(c):
                continue
            return False
    return True


@dataclass
class BakeResult:
    frames: np.ndarray             # (F,)
    names: list                    # rig order
    rotations: np.ndarray          # (F, N, 4) as solved, rig order
    root_translations: np.ndarray  # (F, 3)
    residuals: np.ndarray          # (F, G)
    iterations: np.ndarray         # (F,)
    reached: np.ndarray            # (F,)
    keyed: list                    # bones keyed
    action: object
    previous_action: object
    muted: int
    per_frame: bool                # solved frame by frame (a bone inside the rig moving relative to its
                                   # parent, or a goal's line or plane turning with its target)
    sample_seconds: float
    solve_seconds: float
    write_seconds: float
    warnings: list
    sampling: str = "frames"       # how targets were sampled: "fcurves" (no frame stepping) or "frames"
    action_note: str = ""          # which action the keys went into, and what was kept
    tolerance: float = 1e-4
    checked_frames: np.ndarray | None = None   # (K,) frames where Blender's evaluated pose was measured
    misses: np.ndarray | None = None           # (K, G) effector-to-target distances there (armature space)
    verify_seconds: float = 0.0
    orientation_residuals: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))  # (F, G) radians
    references: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 4)))  # (F, N, 4) FK pose per frame
    problem: object = None         # the rig_reader.RigProblem baked
    reduction: object = None       # key_reduction.ReductionResult when the keys were reduced
    miss_slack: np.ndarray | None = None  # (G,) how far the reduction may move each effector
    scales: np.ndarray | None = None  # (F, N) pose scales keyed (each bone's length over its parent's), if it stretches
    influence_note: str = ""       # which goals' IK influence the range animates (influence_note)
    read_seconds: float = 0.0      # reading the rig and its constraints' influences over the range
    held_note: str = ""            # where the scale before was keyed around the baked stretch (held_scales_note)


    def goal_report(self) -> str:
        """Per goal, its worst frame: distance and, for a goal with an orientation, the angle."""
        return goal_report(self.problem, self.residuals, self.orientation_residuals)

    @property
    def seconds(self):
        """The whole bake: reading the rig, sampling, solving, writing and measuring."""
        return self.read_seconds + self.sample_seconds + self.solve_seconds + self.write_seconds + self.verify_seconds

    @property
    def blender_misses(self) -> list:
        """[(frame, goal index, miss)] at the checked frames where Blender's evaluated pose misses
        a target by more than the tolerance beyond Sinew's own residual (Sinew's solution is not
        what Blender shows there), worst first."""
        if self.misses is None:
            return []
        tol = verify_tolerance(self.tolerance)
        if self.miss_slack is not None:  # key reduction moves the effectors by up to this
            tol = tol + self.miss_slack
        engine = self.residuals[np.searchsorted(self.frames, self.checked_frames)]
        bad = (self.misses > tol) & (self.misses > engine + tol)
        out = [(int(self.checked_frames[k]), int(i), float(self.misses[k, i])) for k, i in np.argwhere(bad)]
        return sorted(out, key=lambda t: -t[2])

    @property
    def worst_residual(self):
        return float(self.residuals.max()) if self.residuals.size else 0.0


class BakeJob:
    """Bakes goals over ``frame_start..frame_end`` (inclusive).

    The constructor reads and checks everything it can without changing the scene (raises
    ReadError). ``steps()`` then yields progress in [0, 1] and finally stores ``self.result``;
    ``run()`` does it all at once; ``cancel()`` puts the frame and pose back (nothing else has
    been written before the last step).

    ``influences``: the constraints' influences over the range, as ``constraint_influences``
    reads them (``bake_jobs_steps`` reads them in steps, with progress, before making the job);
    by default the constructor reads them, stepping the frames when a driver or NLA strip animates
    one (blocking). ``read_seconds``: time already spent reading them, counted in the result's
    ``seconds``. A range whose estimated memory is above ``MAX_BAKE_BYTES`` is refused
    (``check_bake_size``) before anything is read frame by frame, as is every other refusal of
    ``check_bake_up_front``; ``checked``: the caller has run that already (``bake_jobs_steps``).
    Once the rig is read, ``check_keyed_curves`` refuses keys Blender would not play as solved
    (F-curve modifiers on the channels keyed, a keyed rotation mode changing over the range).

    ``sampling``: "auto" samples plain F-curve-animated targets from their F-curves when the
    armature's pose is static over the range (see ``sample_goals_from_fcurves`` and
    ``pose_is_static``) and steps the frames otherwise; "frames" always steps the frames.

    Key reduction: with ``settings.key_reduction``, the keys are reduced right after they are
    written, within ``settings.reduction_angle`` (radians) and ``settings.reduction_distance``
    (``key_reduction.reduce_bake``; ``self.reduction`` is that pair, or None), as part of the
    write: if it fails, ``undo_write`` puts the scene back.
    """

    def __init__(self, context, ob, frame_start: int, frame_end: int, settings: Settings, *,
                 new_action: bool = True, only_moved: bool = True, keep_constraints: bool = False,
                 chunk: int = 0, sampling: str = "auto", verify: bool = True, influences=None,
                 read_seconds: float = 0.0, checked: bool = False):
        t0 = time.perf_counter()
        if sampling not in ("auto", "frames"):
            raise ValueError(f"sampling must be 'auto' or 'frames', not {sampling!r}")
        if not checked:
            check_bake_up_front(context.evaluated_depsgraph_get(), ob, frame_start, frame_end, new_action)
        # Each constraint's influence at every frame: a goal whose IK constraint has influence
        # at some frame of the range is baked, each frame with its own influence.
        frames = np.arange(int(frame_start), int(frame_end) + 1)
        if influences is None:
            influences = constraint_influences(ob, frames, context.scene, context.view_layer)
        self.problem = rig_reader.read(ob, only_selected=settings.only_selected, influences=influences)
        check_bake_size(ob, frame_start, frame_end, self.problem, only_moved)
        root_bone = self.problem.root_bone
        if settings.root == "free" and root_bone is not None and not ob.data.bones[root_bone].use_local_location:
            raise ReadError(f'Bone "{root_bone}": Local Location is off (Bone properties > Relations), so Sinew '
                            "cannot key its location for the Free root: turn Local Location on, or use the Pinned root")
        check_keyed_curves(ob, self.problem, frames, root_bone if settings.root == "free" else None)
        self.verify = verify
        self.reduction = ((float(settings.reduction_angle), float(settings.reduction_distance))
                          if settings.key_reduction else None)
        settings.solver()  # a bad setting: ReadError up front (compute solves with one whose
                           # tolerance is in the engine frame, Settings.solver)
        self.settings = settings
        self.ob = ob
        self.scene = context.scene
        self.view_layer = context.view_layer
        self.frames = np.arange(int(frame_start), int(frame_end) + 1)
        self.new_action = new_action
        self.only_moved = only_moved
        self.keep_constraints = keep_constraints
        self.chunk = int(chunk) if chunk and chunk > 0 else len(self.frames)
        self.sampling = sampling
        self.result: BakeResult | None = None
        self.done = False
        self._saved_frame = (self.scene.frame_current, self.scene.frame_subframe)
        self._saved_pose = _snapshot_pose(ob)
        self.read_seconds = float(read_seconds) + time.perf_counter() - t0
        # Goals whose target follows bones another armature of the batch moves (BakeBatch):
        # measured where that target is after every armature is written.
        self.followed_goals: list[int] = []

    # -- helpers ----------------------------------------------------------------------------

    def _restore(self):
        frame, sub = self._saved_frame
        self.scene.frame_set(frame, subframe=sub)
        _restore_pose(self.ob, self._saved_pose)
        self.view_layer.update()

    def cancel(self):
        """Leaves the scene as it was before the job (call before the job finished)."""
        if not self.done:
            self._restore()
            self.done = True

    def run(self) -> BakeResult:
        for _ in self.steps():
            pass
        return self.result

    # -- the work ---------------------------------------------------------------------------

    def steps(self):
        """Samples, solves, writes and measures, yielding progress in [0, 1]; on any error the
        scene is put back (``cancel``) and a ReadError (or the bug) is raised."""
        try:
            yield from self.compute()
            self.write()
            self.measure()
        except engine().SinewError as ex:
            self.cancel()
            raise ReadError(f"Sinew could not solve: {ex}") from ex
        except BaseException:
            self.cancel()
            raise
        yield 1.0  # (after the try, as in BakeBatch.steps: closing the generator here undoes nothing)

    def compute(self):
        """Samples and solves (steps 1 and 2), yielding progress up to 0.9; changes nothing but
        the current frame and (through the animation) the pose, which ``cancel`` and ``write``
        put back."""
        p, ob, scene = self.problem, self.ob, self.scene
        frames = self.frames
        nf, ng, nb = len(frames), len(p.goals), len(p.names)
        idx = p.index
        pinned = self.settings.root == "pinned"
        moved = p.moved_bones
        # Progress: sampling 0-50%, solving 50-90%, writing the rest.

        # 1. Sample per frame: every goal's target, the evaluated pose of the bones above the
        #    chains (the engine rig's rest).
        #    Plain F-curve-animated targets on a rig whose pose does not change over the range
        #    are read from their F-curves, and the pose once; otherwise every frame is stepped.
        t0 = time.perf_counter()
        targets = np.zeros((nf, ng, 3))
        orients = np.zeros((nf, ng, 4))
        poles = np.zeros((nf, ng, 3))
        vectors = np.zeros((nf, ng, 3))  # the goals' kind vectors (RigProblem.sample_vectors)
        # The engine rest per frame, one array shared by consecutive frames where it is the same
        # (it changes only with the pose above the chains): not a copy per frame.
        rest_list = []
        above = np.ones((nf, nb))  # the roots' scales (RigProblem.anchor_scales), per frame
        root_loc = np.zeros((nf, 3))
        # Only Moved Bones off: the other bones' rotation channels that nothing animates, with the
        # value they hold on every frame (keyed as they are: channels, not quaternions, so a bone
        # partly driven or not normalised keeps its pose); animated ones play as before, untouched.
        moved_set = set(moved)
        still = {} if self.only_moved else keys.still_rotation_channels(
            ob, [b.name for b in ob.data.bones if b.name not in moved_set])
        conn = [idx[n] for n in p.connectors]
        conn_rot = np.zeros((nf, len(conn), 4))
        # Each frame's reference: the FK pose of the moved bones at that frame (their
        # action-evaluated rotation channels; IK constraints never write those, so nothing needs
        # muting), the start pose's rotations elsewhere (the engine keeps other bones as they are).
        moved_idx = [idx[n] for n in moved]
        moved_rot = np.zeros((nf, len(moved), 4))
        # And its lengths: each frame's pose scales (a stretch keyed before included) as the
        # engine's length scales (RigProblem.pose_length_scales), when the rig stretches.
        ref_scales = np.ones((nf, nb)) if p.stretches else None
        start_pose = start_root = None
        compat = {}
        fast = None
        if self.sampling == "auto" and pose_is_static(p):
            fast = sample_goals_from_fcurves(p, frames, scene, with_vectors=True)
        sampled_frames = [frames[0]] if fast is not None else frames
        for k, f in enumerate(sampled_frames):
            if fast is None or (scene.frame_current, scene.frame_subframe) != (int(f), 0.0):
                scene.frame_set(int(f))  # the fast path: only when not at the first frame already
            else:
                self.view_layer.update()
            depsgraph = self.view_layer.depsgraph
            if fast is None:
                targets[k], orients[k], poles[k] = p.sample_goals(depsgraph)
                vectors[k] = p.sample_vectors(depsgraph)
            pbs = ob.evaluated_get(depsgraph).pose.bones
            rest = p.rest_for(pbs, pbs)
            rest_list.append(rest_list[-1] if rest_list and np.array_equal(rest, rest_list[-1]) else rest)
            above[k] = p.anchor_scales(pbs, frame=int(f))
            if k == 0:
                start_pose, start_root = p.pose_from_bones(pbs)
                compat = {n: tuple(pbs[n].rotation_euler) for n in moved}
            if p.root_bone:
                root_loc[k] = pbs[p.root_bone].location
            for j, n in enumerate(p.connectors):
                conn_rot[k, j] = rig_reader.bone_quaternion(pbs[n])
            if fast is None:
                for j, n in enumerate(moved):
                    moved_rot[k, j] = rig_reader.bone_quaternion(pbs[n])
            if ref_scales is not None:
                ref_scales[k] = p.pose_length_scales(pbs, frame=int(f))
            if fast is None and (k + 1) % self.chunk == 0:
                yield 0.5 * (k + 1) / nf
        if fast is not None:
            # The pose does not change over the range: the first frame's holds for all. Only the
            # moved bones' rotations may be animated (pose_is_static): read from their F-curves.
            targets[:], orients[:], poles[:], vectors[:] = fast
            rest_list *= nf
            root_loc[1:], conn_rot[1:] = root_loc[0], conn_rot[0]
            above[1:] = above[0]
            fk = bone_rotations_from_fcurves(ob, moved, frames)
            if fk is None:  # not expected: pose_is_static read the same F-curves
                raise ReadError("Could not read the moved bones' keys from the action")
            moved_rot[:] = fk
            if ref_scales is not None:  # (pose_is_static: no moved bone's scale is animated)
                ref_scales[1:] = ref_scales[0]
            yield 0.5
        # (F, N, 4, 4) rests: where the pose above the chains does not change, a read-only view of
        # the one array (no memory per frame).
        static_rest = all(r is rest_list[0] for r in rest_list)
        rests = np.broadcast_to(rest_list[0], (nf, nb, 4, 4)) if static_rest else np.stack(rest_list)
        del rest_list
        p.check_samples(targets, orients, poles, [int(f) for f in frames])
        p.check_vectors(vectors, [int(f) for f in frames])
        # From here on, points are in the goals' engine frames (the scale of the bones above the
        # chains divided out, RigProblem.to_engine); distances come back in armature space.
        targets = p.to_engine(targets, rests, above)
        poles = p.to_engine(poles, rests, above)
        solver = self.settings.solver(float(p.goal_scales(above).max()))
        references = np.tile(np.asarray(start_pose, dtype=np.float64), (nf, 1, 1))
        references[:, moved_idx] = moved_rot
        # (Connectors, bones between chains that no goal moves, at their own pose each frame, as
        # Solve IK's reference has them there.)
        references[:, conn] = conn_rot
        if not np.all(np.isfinite(references)):
            raise ReadError("A keyed bone rotation is not finite in the frame range")
        sample_s = time.perf_counter() - t0

        # 2. Solve: one solve_sequence call (animated bones above the chains move the rig's roots
        #    frame by frame), unless a bone inside the rig moves relative to its parent; then each
        #    frame is solved on its own rig.
        t0 = time.perf_counter()
        # IK constraint influence as Blender applies it at each frame (RigProblem.frame_blends,
        # blend_goals, blend_result): a frame where a goal's IK does not act keeps its FK pose.
        influence, tree_blend = p.frame_blends()
        frame_rigs: dict[int, object] = {}

        def rig_for_frame(k):
            key = 0 if not np.any(rests[k] != rests[0]) else k
            if key not in frame_rigs:
                frame_rigs[key] = p.make_rig(rests[key])
            return frame_rigs[key]

        p.blend_goals(rig_for_frame, targets, orients, references, root_loc, influence, ref_scales)
        # Bones above the chains animated: the sequence moves the rig's roots frame by frame
        # (``root_rests``) where nothing else moves relative to its parent; else a rig a frame.
        root_rests = None
        per_frame = False
        # (Compared exactly: a frame's rig is the one Solve IK builds there, to the bit.)
        if not static_rest and np.any(rests != rests[0]):
            root_rests = p.root_rests(rests)
            per_frame = root_rests is None
        if conn and np.any(conn_rot != conn_rot[0]):
            per_frame = True
        # Pinned: the root sits at its keyed location each frame. Free: the keyed location is
        # each frame's reference root translation. The sequence takes one per frame.
        moving_root = bool(p.root_bone and np.any(root_loc != root_loc[0]))
        # A goal of another kind than position (rig_reader.KINDS) is solved frame by frame: each
        # frame gets its own line direction or plane normal, which may turn with the target (a
        # sequence takes one per goal). (Every frame starts from its own keyed pose either way.)
        if any(g.kind != "position" for g in p.goals):
            per_frame = True
        # A sequence takes one reference length per bone: lengths keyed to change over the range
        # (a stretch baked before) are solved frame by frame, each frame with its own.
        if ref_scales is not None and np.any(ref_scales != ref_scales[0]):
            per_frame = True
        goals = p.engine_goals(targets[0], orients[0], poles[0], vectors[0])
        use_orient = any(g.use_orientation for g in p.goals)
        use_poles = any(g.pole is not None for g in p.goals)
        rotations = np.zeros((nf, nb, 4))
        root_t = np.zeros((nf, 3))
        residuals = np.zeros((nf, ng))
        orientation_residuals = np.zeros((nf, ng))
        iterations = np.zeros(nf, dtype=np.int64)
        reached = np.zeros(nf, dtype=bool)
        scales = np.ones((nf, nb))
        pose, root = np.array(start_pose), np.array(start_root)
        # The first frame starts from its pose as keyed, its stretch included; each chunk and
        # frame after from the frame before.
        start_scales = None if ref_scales is None else np.array(ref_scales[0])
        rig = p.make_rig(rests[0])
        # (Solved in steps of at least SOLVE_STEP_FRAMES per core, so a step's frames spread over
        # every core the engine solves them on.)
        step = max(self.chunk, SOLVE_STEP_FRAMES * _cores())
        for c0 in range(0, nf, step):
            c1 = min(nf, c0 + step)
            if not per_frame:
                res = solver.solve_sequence(
                    rig, goals, targets[c0:c1],
                    orientations=orients[c0:c1] if use_orient else None,
                    pole_targets=poles[c0:c1] if use_poles else None,
                    pose=pose, root_translation=root, root=self.settings.root,
                    reference_root_translation=root_loc[0], references=references[c0:c1], scales=start_scales,
                    reference_scales=None if ref_scales is None else ref_scales[0],
                    root_translations=root_loc[c0:c1] if moving_root else None,
                    root_rests=None if root_rests is None else root_rests[c0:c1])
                rotations[c0:c1] = res.rotations
                root_t[c0:c1] = res.root_translations
                scales[c0:c1] = res.scales
                residuals[c0:c1] = res.residuals
                orientation_residuals[c0:c1] = res.orientation_residuals
                iterations[c0:c1] = res.iterations
                reached[c0:c1] = res.reached
            else:
                for k in range(c0, c1):
                    if k and np.any(rests[k] != rests[k - 1]):
                        rig = p.make_rig(rests[k])
                    # Each frame from its own pose before IK, as Solve IK solves it there and as
                    # the sequence solves its frames: a baked frame is Solve IK's answer there.
                    pose, root = np.array(references[k]), np.array(root_loc[k])
                    start_scales = None if ref_scales is None else np.array(ref_scales[k])
                    pose[conn] = conn_rot[k]
                    sol = solver.solve(rig, p.engine_goals(targets[k], orients[k], poles[k], vectors[k]), pose=pose,
                                            root_translation=root, root=self.settings.root,
                                            reference=references[k], reference_root_translation=root_loc[k],
                                            scales=start_scales,
                                            reference_scales=None if ref_scales is None else ref_scales[k])
                    rotations[k] = sol.rotations
                    if k:  # keys interpolate: each quaternion in the hemisphere of the frame before
                        rotations[k][np.einsum("ni,ni->n", rotations[k], rotations[k - 1]) < 0.0] *= -1.0
                    root_t[k] = sol.root_translation
                    scales[k] = sol.scales
                    residuals[k] = sol.residuals
                    orientation_residuals[k] = sol.orientation_residuals
                    iterations[k] = sol.iterations
                    reached[k] = sol.reached
            pose, root = np.array(rotations[c1 - 1]), np.array(root_t[c1 - 1])
            start_scales = np.array(scales[c1 - 1]) if p.stretches else None
            yield 0.5 + 0.4 * c1 / nf
        # A stretch is keyed as a uniform pose scale, each bone's length over its parent's.
        local_scales = p.local_scales(scales) if p.stretches else None
        p.blend_result(references, rotations, local_scales, tree_blend,
                       reference_scales=None if ref_scales is None else p.local_scales(ref_scales))
        if not np.all(np.isfinite(rotations)) or (local_scales is not None and not np.all(np.isfinite(local_scales))):
            raise ReadError("Sinew returned a non-finite pose; nothing was changed")
        solve_s = time.perf_counter() - t0
        residuals = p.to_armature_distances(residuals, above)
        targets = p.to_engine(targets, rests, above, inverse=True)

        self._computed = dict(
            rotations=rotations, root_t=root_t, residuals=residuals, iterations=iterations, reached=reached,
            orientation_residuals=orientation_residuals, references=references, per_frame=per_frame,
            sample_s=sample_s, solve_s=solve_s, sampling="fcurves" if fast is not None else "frames",
            keyed=moved + list(still), compat=compat, moved=moved, moved_rot=rotations[:, [idx[n] for n in moved], :],
            still=still,
            root_bone=p.root_bone if not pinned else None, targets=targets, vectors=vectors,
            scales=scales if p.stretches else None, goal_scales=p.goal_scales(above).max(axis=0),
            local_scales=local_scales, tree_blend=tree_blend, influence=influence,
            keyed_scales=None if local_scales is None else {n: local_scales[:, idx[n]] for n in moved})

    def write(self, scratch: bool = False):
        """3. Writes the keys (nothing before this changed the scene, apart from the current
        frame and the pose the animation set, which is put back first). ``scratch``: into a new
        copy of the current action instead, muting and reducing as the real write does, so that
        Blender evaluates the baked pose for armatures that follow this one's bones
        (``BakeBatch``); ``undo_write`` then takes it all back exactly, the user's actions never
        having been touched."""
        c = self._computed
        t0 = time.perf_counter()
        _restore_pose(self.ob, self._saved_pose)
        written = self._write(self.frames, c["moved"], c["moved_rot"], c["root_bone"], c["root_t"], c["compat"],
                              c["keyed_scales"], c["still"], scratch=scratch)
        if not scratch:
            c["action"], c["prev"], c["note"], c["muted"], c["reduction"], kept = written
            c["held_note"] = held_scales_note(kept, int(self.frames[0]), int(self.frames[-1])) if kept else ""
            c["write_s"] = time.perf_counter() - t0

    def measure(self):
        """4. Measures what Blender evaluates from the keys at frames spread over the range, puts
        the frame back and stores ``self.result``."""
        c, p, scene, frames = self._computed, self.problem, self.scene, self.frames
        nf, ng = len(frames), len(p.goals)
        t0 = time.perf_counter()
        checked, misses = None, None
        if self.verify:
            checked = frames[np.unique(np.linspace(0, nf - 1, min(nf, VERIFY_FRAMES)).round().astype(int))]
            misses = np.zeros((len(checked), ng))
            for k, f in enumerate(checked):
                scene.frame_set(int(f))
                # (Against the targets solved for: a goal moved by its influence, blend_goals; a
                # target that follows the bones just keyed, where it is now.)
                at = np.searchsorted(frames, f)
                depsgraph = self.view_layer.depsgraph
                # (A target that follows another armature's baked bones, where it is now.)
                followed = [i for i in self.followed_goals if c["influence"][at, i] >= 1.0]
                misses[k] = evaluated_misses(p, depsgraph, *checked_targets(p, depsgraph, c["targets"][at],
                                                                           c["vectors"][at], followed))
                # A goal whose tree's result Blender blends with the pose before IK on this frame
                # (a pole with influence below 1, or the IK not acting) is not meant to reach it.
                misses[k][c["tree_blend"][at] < 1.0] = 0.0
        frame, sub = self._saved_frame
        scene.frame_set(frame, subframe=sub)
        self.done = True
        verify_s = time.perf_counter() - t0
        self.result = BakeResult(frames, list(p.names), c["rotations"], c["root_t"], c["residuals"], c["iterations"],
                                 c["reached"], list(c["keyed"]), c["action"], c["prev"], c["muted"], c["per_frame"],
                                 c["sample_s"], c["solve_s"], c["write_s"], list(p.warnings), c["sampling"], c["note"],
                                 self.settings.tolerance, checked, misses, verify_s, c["orientation_residuals"],
                                 c["references"], p, c["reduction"], self._miss_slack(c), c["local_scales"],
                                 influence_note(p, frames, c["influence"], c["tree_blend"]), self.read_seconds,
                                 c["held_note"])

    def _miss_slack(self, c):
        """(G,) how far the key reduction may move each effector (``key_reduction.effector_slack``),
        which the check of Blender's evaluated pose allows; None without reduction. (A stretch
        lengthens the levers: the bones' largest length scales over the range are passed.)"""
        if c["reduction"] is None:
            return None
        stretch = None
        if c["scales"] is not None:
            stretch = dict(zip(self.problem.names, np.max(c["scales"], axis=0).tolist()))
        slack = key_reduction.effector_slack(self.ob, [(g.bone, g.use_tail) for g in self.problem.goals], c["keyed"],
                                             c["root_bone"], *self.reduction, stretch=stretch)
        # (Its levers are rest lengths: a scale above a chain lengthens them.)
        return slack * np.maximum(1.0, c["goal_scales"])

    def _write(self, frames, moved, moved_rot, root_bone, root_t, compat, scales=None, still=None, *,
               scratch: bool = False):
        """Writes the keys (and reduces them, when asked) and mutes the replaced constraints; on
        any failure puts back what ``undo_write`` puts back and re-raises. ``moved``: the bones
        solved, their rotations ``moved_rot`` (F, K, 4) in that order; ``still``: None, or {bone
        name: {array index: value}} the rotation channels of the other bones that nothing animates
        (Only Moved Bones off, ``keys.still_rotation_channels``), keyed with their value
        (``keys.write_bake``); the key reduction reduces the bones keyed whole, and leaves a bone
        whose other channels are animated (the user's keys) as it is. ``scales``: None, or {bone
        name: (F,) uniform scale} for the bones whose stretch is keyed; the key reduction leaves
        those scale keys as they are (one per frame), and the scale each had before is keyed at its
        rotation keys on either side of the range where its scale has none
        (``keys.scales_to_hold``: the stretch is the bake's, not the animation's, so it changes
        nothing outside those keys). ``scratch``: into a new copy of the current action
        (``keys.assign_scratch_copy``; see ``write``), leaving the warnings as they are. Returns
        (action, previous action, note, constraints muted, reduction, {bone: frames where the
        scale before was keyed})."""
        ob, p = self.ob, self.problem
        ad = ob.animation_data
        had_ad = ad is not None
        saved_action = ad.action if had_ad else None
        self._undo = dict(
            had_ad=had_ad, action=saved_action, slot=keys.assigned_slot(ob),
            slots=set(s.handle for s in saved_action.slots) if keys.SLOTTED and saved_action is not None else None,
            fake=saved_action.use_fake_user if saved_action is not None else None,
            cons=[(c, c.mute, c.influence) for bone, name in p.replaced
                  for c in [ob.pose.bones[bone].constraints.get(name)] if c is not None],
            record=keys.muted_records(ob), actions=set(bpy.data.actions), last_bake=ob.sinew_last_bake)
        try:
            if scratch:
                keys.assign_scratch_copy(ob)
            held = keys.scales_to_hold(ob, {n: self._saved_pose[n][4] for n in scales or ()}, frames[0], frames[-1])
            action, prev, note = keys.write_bake(ob, frames, moved, moved_rot, root_bone,
                                                 root_t if root_bone else None,
                                                 new_action=self.new_action and not scratch,
                                                 compat=compat, scales=scales, still=still)
            kept = keys.key_held_scales(ob, held, frames[0])
            reduction = None
            if self.reduction is not None:  # key reduction (key_reduction.py), undone with the write on failure
                pbs = ob.pose.bones
                keyed = list(moved) + [n for n, values in (still or {}).items()
                                       if len(values) == len(getattr(pbs[n], rig_reader.rotation_property(pbs[n])))]
                reduction = key_reduction.reduce_bake(ob, frames, keyed, root_bone, *self.reduction)
            muted, mute_warnings = (0, []) if self.keep_constraints else keys.mute_constraints(ob, p.replaced)
        except BaseException:
            self.undo_write()
            raise
        if not scratch:
            p.warnings.extend(mute_warnings)
        return action, prev, note, muted, reduction, kept

    def undo_write(self):
        """Puts back what ``write`` changed: the action assignment and slot, the fake user, the
        constraint mutes and the record of them, the last bake's results; removes the actions it
        made, and the slot it added to the user's action for an armature that had none (keys written
        into a slot the user's action had, with New Action off, are not restored)."""
        u = getattr(self, "_undo", None)
        if u is None:
            return
        ob = self.ob
        if u["had_ad"]:
            ob.animation_data.action = u["action"]
            if keys.SLOTTED and u["action"] is not None:
                ob.animation_data.action_slot = u["slot"]
        elif ob.animation_data is not None:
            ob.animation_data_clear()
        if u["action"] is not None and u["action"].is_editable:
            u["action"].use_fake_user = u["fake"]
            if u["slots"] is not None:
                for slot in [s for s in u["action"].slots if s.handle not in u["slots"]]:
                    u["action"].slots.remove(slot)
        for act in set(bpy.data.actions) - u["actions"]:
            bpy.data.actions.remove(act)
        for c, mute, influence in u["cons"]:
            c.mute, c.influence = mute, influence
        keys.store_muted_records(ob, u["record"])
        ob.sinew_last_bake = u["last_bake"]
        self._undo = None


class BakeBatch:
    """Bakes several armatures, one ``BakeJob`` (one engine call) each: samples and solves all of
    them, then writes all, then measures all, so an error before the writes changes nothing, and
    an error while writing puts back what the jobs before wrote (``BakeJob.undo_write``).

    They are sampled and solved in ``call_order`` (the constructor refuses armatures that follow
    each other's moved bones: ReadError, nothing changed). An armature that another follows (its
    bone is that one's target, pole or Bone parent) is written to a scratch copy of its action
    once solved (``BakeJob.write(scratch=True)``), so the ones after it sample Blender's pose of
    its keys; before the real writes every scratch write is taken back exactly (also on an error
    or Esc). Every armature is measured after all are written, a target that follows another
    armature's bones where it is then (``CallOrder.followed_goals``)."""

    def __init__(self, jobs):
        self.jobs = list(jobs)
        self.order = call_order([job.problem for job in self.jobs])
        for job, goals in zip(self.jobs, self.order.followed_goals):
            job.followed_goals = goals
        self.done = False

    @property
    def results(self):
        return [job.result for job in self.jobs]

    def cancel(self):
        for job in reversed(self.jobs):
            job.cancel()
        self.done = True

    def run(self):
        for _ in self.steps():
            pass
        return self.results

    def steps(self):
        n = len(self.jobs)
        written = []
        try:
            for k, i in enumerate(self.order.order):
                job = self.jobs[i]
                for progress in job.compute():
                    yield 0.9 * (k + min(progress / 0.9, 1.0)) / n
                if self.order.read_later(i):  # the jobs after it sample its keys
                    job.write(scratch=True)
                    written.append(job)
            while written:
                written.pop().undo_write()
            for job in self.jobs:
                job.write()  # a job whose write fails puts back its own writes
                written.append(job)
            for job in self.jobs:
                job.measure()
            self.done = True
        except BaseException as ex:
            for job in reversed(written):
                job.undo_write()
            self.cancel()
            if isinstance(ex, engine().SinewError):
                raise ReadError(f"Sinew could not solve: {ex}") from ex
            raise
        # (Outside the try: a caller that stops at this last step, as the modal operator does once
        # ``done`` is set, and closes the generator later, or lets Python free it, must not undo
        # the finished bake.)
        yield 1.0


def influence_note(problem, frames, influence, tree_blend) -> str:
    """Names the goals whose IK constraint influence changes over a bake's range (``influence``,
    ``tree_blend``: (F, G), ``RigProblem.frame_blends``): how far it goes (the smallest and
    largest product of the two) and on how many frames its IK does not act (where the keys are
    the FK pose, the pose before IK); "" when no influence changes."""
    parts = []
    for i, g in enumerate(problem.goals):
        if g.tree < 0 or (np.all(influence[:, i] == influence[0, i]) and np.all(tree_blend[:, i] == tree_blend[0, i])):
            continue
        acts = problem.tree_acts(g.tree)
        value = influence[:, i] * tree_blend[:, i]
        text = f'IK "{g.constraint}" (bone "{g.owner}") between {float(value.min()):.3g} and {float(value.max()):.3g}'
        off = int(np.count_nonzero(~acts))
        if off:
            text += f" (off on {off} of {len(frames)} frames: keyed with the FK pose there)"
        parts.append(text)
    if not parts:
        return ""
    return ("IK influence animated over the range, baked frame by frame as Blender's IK applies it: " +
            "; ".join(parts))


def make_bake_jobs(context, obs, frame_start: int, frame_end: int, settings: Settings, **kw):
    """A BakeJob for every armature of ``obs`` that has goals to bake: (jobs, skipped), as
    ``solve_poses`` decides (with several armatures one without goals is skipped and named in
    ``skipped``; otherwise NoGoalsError). Reads everything first: changes nothing. Blocking:
    ``bake_jobs_steps`` is the same in steps."""
    return run_to_end(bake_jobs_steps(context, obs, frame_start, frame_end, settings, **kw))


def bake_jobs_steps(context, obs, frame_start: int, frame_end: int, settings: Settings, **kw):
    """``make_bake_jobs`` as a generator: reads each armature's constraint influences over the
    range (``constraint_influences_steps``: stepping the frames, in chunks of ``kw["chunk"]``,
    only when a driver or NLA strip animates the influence or mute of a constraint the bake
    reads), yielding progress in [0, 1] meanwhile (nothing when no frame is stepped), then makes
    the jobs and returns (jobs, skipped). Closing it early (Esc) puts the frame and pose back;
    it changes nothing. What ``check_bake_up_front`` refuses (Time Stretching, a linked armature,
    one Blender does not evaluate, an action that cannot be written, a range too large) is refused
    before any stepping."""
    frames = np.arange(int(frame_start), int(frame_end) + 1)
    chunk = kw.get("chunk") or 10
    read = {}
    n = len(obs)
    for i, ob in enumerate(obs):
        t0 = time.perf_counter()
        if ob.type == 'ARMATURE' and frame_end >= frame_start:
            try:
                check_bake_up_front(context.evaluated_depsgraph_get(), ob, frame_start, frame_end,
                                    kw.get("new_action", True))
            except ReadError as ex:
                raise _armature_error(ob, ex, n > 1) from ex
            influences = yield from rescaled(
                constraint_influences_steps(ob, frames, context.scene, context.view_layer, chunk), i / n, 1 / n)
            read[ob.name] = (influences, time.perf_counter() - t0)
    return _read_each(obs, lambda ob: BakeJob(context, ob, frame_start, frame_end, settings, **kw,
                                              influences=read.get(ob.name, (None, 0.0))[0],
                                              read_seconds=read.get(ob.name, (None, 0.0))[1],
                                              checked=ob.name in read), "bake")


# Largest memory a bake may need (``check_bake_size``), and the bytes counted per frame: per
# engine bone (the solved, reference and keyed rotations, scales; its keys in Blender), per goal
# (targets, orientations, poles, residuals), per other bone keyed (Only Moved Bones off), per
# constraint (its influence) and per armature bone before the rig is read.
MAX_BAKE_BYTES = 4 << 30
BYTES_PER_BONE_FRAME = 600
BYTES_PER_GOAL_FRAME = 200
BYTES_PER_OTHER_FRAME = 300
BYTES_PER_CONSTRAINT_FRAME = 8


def bake_size_estimate(ob, frame_start: int, frame_end: int, problem=None, only_moved: bool = True) -> int:
    """A rough estimate of the memory (bytes) baking armature ``ob`` over the range needs: with
    the rig read (``problem``), from its engine bones, goals and (``only_moved`` off) the other
    bones keyed; before it (``problem`` None), only what reading the constraints' influences
    frame by frame holds, a lower bound."""
    nf = max(0, int(frame_end) - int(frame_start) + 1)
    n_cons = sum(len(pb.constraints) for pb in ob.pose.bones)
    per_frame = BYTES_PER_CONSTRAINT_FRAME * n_cons
    if problem is not None:
        per_frame += BYTES_PER_BONE_FRAME * len(problem.names) + BYTES_PER_GOAL_FRAME * len(problem.goals)
        if not only_moved:
            per_frame += BYTES_PER_OTHER_FRAME * (len(ob.data.bones) - len(problem.moved_bones))
    return nf * per_frame


def check_bake_up_front(depsgraph, ob, frame_start: int, frame_end: int, new_action: bool) -> None:
    """The refusals of a bake of armature ``ob`` that need neither the rig read nor any frame
    stepped (ReadError): an empty range, Time Stretching, a linked armature, an armature
    ``depsgraph`` (the view layer's) does not evaluate (``rig_reader.check_armature_evaluated``),
    an action the keys cannot be written into (``keys.check_action_writable``: NLA tweak mode,
    blended over NLA strips), a range too large for even the constraints' influences
    (``check_bake_size``). Run before the influences are read frame by frame
    (``bake_jobs_steps``, ``BakeJob``)."""
    if frame_end < frame_start:
        raise ReadError(f"The frame range is empty ({frame_start}..{frame_end})")
    check_time_not_stretched(depsgraph.scene)
    check_editable(ob)
    rig_reader.check_armature_evaluated(ob, depsgraph)
    keys.check_action_writable(ob, new_action)
    check_bake_size(ob, frame_start, frame_end)


def check_keyed_curves(ob, problem: rig_reader.RigProblem, frames, root_bone=None) -> None:
    """The refusals of a bake of armature ``ob`` (ReadError, before anything is written) that
    need the rig read: what the F-curves of the channels the bake keys (the moved bones' rotation
    in their mode, their scale when the rig stretches, a free ``root_bone``'s location) would do
    to keys written over ``frames``. A bake keeps each F-curve and replaces its keys in the range,
    so Blender would not play the solved pose there when

    * the rotation mode of a moved bone is keyed and is, at some frame of the range, another
      mode than the one it has now, which the bake keys: Blender would play the other mode's
      channels on those frames;
    * the F-curve of one of those channels is muted (or in a muted group): Blender would not play
      the keys written there;
    * an F-curve modifier acts on one of those channels (``keys.acting_modifiers``: Noise,
      Generator, Stepped by more than a frame, Envelope, Limits, ... that are not muted, at
      influence 0 or restricted to other frames): it would act on top of the baked keys."""
    pbs = ob.pose.bones
    find = keys.fcurve_finder(ob)
    for name in problem.moved_bones:
        pb = pbs[name]
        path = pb.path_from_id("rotation_mode")
        fc = find(path, 0) if find is not None else None
        if fc is None or not keys.is_played(fc):
            continue
        modes = pb.bl_rna.properties["rotation_mode"].enum_items
        now = modes[pb.rotation_mode].value
        values = fcurve_samples(fc, [float(f) for f in frames]).astype(int)
        other = np.nonzero(values != now)[0]
        if len(other):
            k = int(other[0])
            there = next((m.name for m in modes if m.value == values[k]), str(values[k]))
            raise ReadError(
                f'Bone "{name}": its rotation mode is keyed (F-curve rotation_mode), and is {there} at frame '
                f"{int(frames[k])} of the range, not {modes[pb.rotation_mode].name} as now. Sinew bakes the rotation "
                "in the mode the bone has now, and Blender would play the keys of the other mode on those frames: "
                "remove the rotation mode's keys (leaving the mode you want), or bake the frames of each mode "
                "separately with the playhead on one of them; nothing was changed")
    muted = keys.muted_curves(ob, problem.moved_bones, root_bone, key_scale=problem.stretches)
    if muted:
        raise ReadError(f"F-curves of channels the bake keys are muted ({keys.describe_channels(muted)}): Blender "
                        f"does not play a muted F-curve (or one in a muted group), so the baked keys would not play. "
                        f"{keys.MUTED_REMEDY}, and bake again; nothing was changed")
    found = keys.acting_modifiers(ob, problem.moved_bones, float(frames[0]), float(frames[-1]), root_bone,
                                  key_scale=problem.stretches)
    if found:
        raise ReadError(f"F-curve modifiers act on channels the bake keys ({keys.describe_modifiers(found)}): a bake "
                        "keeps each F-curve, with its modifiers, and replaces only its keys in the range, so they "
                        "would act on top of the baked keys and Blender's pose would miss the goals. For each, "
                        f"{keys.MODIFIER_REMEDY}, and bake again (Cycles, Stepped by 1 frame, and modifiers that are "
                        "muted, at influence 0 or restricted to frames outside the range, are fine); nothing was "
                        "changed")


def check_bake_size(ob, frame_start: int, frame_end: int, problem=None, only_moved: bool = True) -> None:
    """Refuses (ReadError with the estimate and the range) a bake whose ``bake_size_estimate`` is
    above ``MAX_BAKE_BYTES`` (a huge End Frame typed by mistake), before anything is sampled."""
    need = bake_size_estimate(ob, frame_start, frame_end, problem, only_moved)
    if need > MAX_BAKE_BYTES:
        nf = int(frame_end) - int(frame_start) + 1
        raise ReadError(f"Baking frames {int(frame_start)} to {int(frame_end)} ({nf} frames) would need about "
                        f"{need / (1 << 30):.1f} GB of memory (at most {MAX_BAKE_BYTES / (1 << 30):.0f} GB): "
                        "bake a shorter range, or the range in parts; nothing was changed")


def bake_goal_results(r: BakeResult) -> list[dict]:
    """Per goal of a bake: {"bone", "source", "worst" (largest distance left, Sinew's), "frame"
    (where), "missed" (frames beyond the tolerance), "orientation" (worst degrees, or None),
    "blender" (worst miss in Blender's evaluated pose at the checked frames, or None),
    "blender_frame", "blender_missed" (checked frames where Blender's evaluated pose misses the
    goal although Sinew's solution reaches closer: ``BakeResult.blender_misses``)}."""
    out = []
    frames = r.frames
    blender_missed = [0] * len(r.problem.goals)
    for _f, i, _m in r.blender_misses:
        blender_missed[i] += 1
    for i, g in enumerate(r.problem.goals):
        col = r.residuals[:, i] if r.residuals.size else np.zeros(1)
        k = int(np.argmax(col))
        d = {"bone": g.bone, "source": g.source, "worst": float(col[k]), "frame": int(frames[min(k, len(frames) - 1)]),
             "missed": int(np.count_nonzero(col > r.tolerance)), "orientation": None, "blender": None,
             "blender_frame": None, "blender_missed": blender_missed[i]}
        if g.reports_angle and r.orientation_residuals.size:
            d["orientation"] = float(np.degrees(r.orientation_residuals[:, i].max()))
        if r.misses is not None and r.misses.size:
            kb = int(np.argmax(r.misses[:, i]))
            d["blender"], d["blender_frame"] = float(r.misses[kb, i]), int(r.checked_frames[kb])
        out.append(d)
    return out


def store_bake_results(ob, r: BakeResult, settings: Settings) -> None:
    """Keeps a bake's per-goal results on the object (``ob.sinew_last_bake``, JSON) for the
    sidebar's Last Bake panel."""
    doc = {"frames": [int(r.frames[0]), int(r.frames[-1])], "method": settings.method,
           "tolerance": float(r.tolerance), "seconds": float(r.seconds), "goals": bake_goal_results(r)}
    ob.sinew_last_bake = json.dumps(doc)


def last_bake_results(ob) -> dict | None:
    """What ``store_bake_results`` kept on ``ob``, or None."""
    raw = getattr(ob, "sinew_last_bake", "")
    if not raw:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("goals"), list) else None


def problem_document(problem: rig_reader.RigProblem, targets, orients, poles, pose, root_translation,
                     settings: Settings, vectors=None, scales=None) -> dict:
    """The problem as ``sinew.problem/1`` (see rust/sinew/src/format.rs), with ``pose`` (and its
    length scales ``scales`` (N,), when the rig stretches) as both the start pose and the
    reference pose, as ``solve_pose`` solves it; ``sinew.problem/2`` when a goal has a kind other
    than position (its ``kind`` and its vector from ``vectors`` (G, 3))."""
    bones = []
    # (Armature-space rests, as the format has them: the engine rig's.)
    matrices = np.asarray(problem.rig.rest_matrices, dtype=np.float64)
    for i, name in enumerate(problem.names):
        b = {"name": name, "parent": problem.names[problem.parents[i]] if problem.parents[i] >= 0 else None,
             "matrix": [[float(v) for v in row] for row in matrices[i]], "length": float(problem.lengths[i])}
        if name in problem.limits:
            lim = problem.rig.limit(name)
            b["limit"] = _limit_json(lim)
            if lim["stretch"] > 0.0:
                b["stretch"] = float(lim["stretch"])
        bones.append(b)
    goals = []
    for i, g in enumerate(problem.goals):
        d = {"bone": g.bone, "target": [float(v) for v in targets[i]], "weight": float(g.weight),
             "chain_length": int(g.chain_length), "use_tail": bool(g.use_tail)}
        if g.use_orientation:
            d["orientation"] = [float(v) for v in orients[i]]
        if g.pole is not None:
            d["pole"] = {"target": [float(v) for v in poles[i]], "angle": float(g.pole_angle)}
        if g.kind != "position":
            d["kind"] = g.kind
            if g.kind in rig_reader.KIND_VECTOR:
                d[rig_reader.KIND_VECTOR[g.kind]] = [float(v) for v in vectors[i]]
        goals.append(d)
    kinds = any(g.kind != "position" for g in problem.goals)
    start = {"rotations": [[float(v) for v in q] for q in pose],
             "root_translation": [float(v) for v in root_translation]}
    if scales is not None:
        start["scales"] = [float(v) for v in scales]
    return {
        "format": "sinew.problem/2" if kinds else "sinew.problem/1",
        "bones": bones,
        "goals": goals,
        "root": settings.root,
        "settings": {"method": settings.method, "max_iterations": int(settings.max_iterations),
                     "tolerance": float(settings.tolerance)},
        "pose": start,
        # Solve IK's reference is the pose it starts from (the pose before IK, its stretch included).
        "reference": dict(start),
    }


def _limit_json(d):
    """The engine's ``rig.limit()`` dict as the problem format's ``limit`` object (the core's
    serde form of ``JointLimit``)."""
    swing = d["swing"]
    if swing == "cone":
        x_pos, x_neg, z_pos, z_neg = d["cone"]
        swing = {"cone": {"x_pos": x_pos, "x_neg": x_neg, "z_pos": z_pos, "z_neg": z_neg}}
        if d.get("cone_shape") == "blender":  # Blender's IK limits (the default shape is not written)
            swing["cone"]["shape"] = "blender"
    elif swing == "hinge":
        axis, lo, hi = d["hinge"]
        swing = {"hinge": {"axis": [float(v) for v in axis], "min": lo, "max": hi}}
    twist = None if d["twist"] is None else {"min": d["twist"][0], "max": d["twist"][1]}
    axes = [float(v) for v in d.get("stiffness_axes", (d["stiffness"],) * 3)]
    # One number when the three axes agree, else [x, y, z] (per local axis).
    stiffness = axes[0] if axes[0] == axes[1] == axes[2] else axes
    return {"swing": swing, "twist": twist, "locked": bool(d["locked"]), "stiffness": stiffness}


def _cores() -> int:
    """The cores this process may run on (the engine's threads are as many)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else (os.cpu_count() or 1)


def export_problem(context, ob, settings: Settings) -> dict:
    """The problem Solve IK would solve for ``ob`` now (``read_solve_input``: influence applied to
    the targets as before solving; the blend after solving of poled chains has no place in the
    format), as ``sinew.problem/1`` (``/2`` with goal kinds)."""
    inp = read_solve_input(context, ob, settings)
    # (The document is the engine's problem: targets in the engine frames, the tolerance too.)
    engine_settings = replace(settings, tolerance=float(settings.tolerance) / inp.length_scale)
    return problem_document(inp.problem, *inp.targets, inp.pose, inp.root_translation, engine_settings, inp.vectors,
                            inp.scales)
