# SPDX-License-Identifier: GPL-3.0-or-later
"""The work behind the operators, as plain functions and a generator (tests drive these directly;
headless Blender has no modal loop).

* ``solve_pose``: one frame, from the current pose.
* ``BakeJob``: a frame range. ``steps()`` samples targets frame by frame, solves with
  ``solve_sequence`` and writes the keys at the very end, yielding progress in between, so a
  modal operator can run it in chunks and cancel it without having changed anything.
* ``problem_document``: the exact problem as ``sinew.problem/1`` JSON.

Every read and check happens before the first write: an error leaves the scene as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from . import keys, rig_reader
from .rig_reader import ReadError, engine

ROOT_MODES = ("pinned", "free")


@dataclass
class Settings:
    max_iterations: int = 100
    tolerance: float = 1e-4
    root: str = "pinned"

    def solver(self):
        sinew = engine()
        if self.root not in ROOT_MODES:
            raise ReadError(f"Root mode must be one of {ROOT_MODES}, not {self.root!r}")
        try:
            return sinew.Solver(method="fabrik", max_iterations=int(self.max_iterations), tolerance=float(self.tolerance))
        except sinew.SinewError as ex:
            raise ReadError(f"Bad solver setting: {ex}") from ex


@dataclass
class SolveResult:
    problem: rig_reader.RigProblem
    rotations: np.ndarray          # (N, 4) in rig order
    root_translation: np.ndarray   # (3,)
    residuals: np.ndarray          # (G,)
    iterations: int
    reached: bool
    stop_reason: str
    keyed: list = field(default_factory=list)
    muted: int = 0
    seconds: float = 0.0


def _snapshot_pose(ob):
    return {pb.name: (tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler),
                      tuple(pb.rotation_axis_angle), tuple(pb.scale)) for pb in ob.pose.bones}


def _restore_pose(ob, snap):
    for pb in ob.pose.bones:
        s = snap.get(pb.name)
        if s is not None:
            pb.location, pb.rotation_quaternion, pb.rotation_euler, pb.rotation_axis_angle, pb.scale = s


def solve_pose(context, ob, settings: Settings, *, key: bool = True, keep_constraints: bool = False) -> SolveResult:
    """Solves armature ``ob`` at the current frame from its current pose and writes the moved
    bones' rotations (and keys them at the current frame when ``key``)."""
    sinew = engine()
    t0 = time.perf_counter()
    depsgraph = context.evaluated_depsgraph_get()
    problem = rig_reader.read(ob, depsgraph=depsgraph)
    solver = settings.solver()
    targets = problem.sample_goals(depsgraph)
    pose, root_t = problem.pose_from_bones(ob.pose.bones)
    try:
        sol = solver.solve(problem.rig, problem.engine_goals(*targets), pose=pose, root_translation=root_t,
                           root=settings.root)
    except sinew.SinewError as ex:
        raise ReadError(f"Sinew could not solve: {ex}") from ex
    rotations = np.asarray(sol.rotations)
    if not np.all(np.isfinite(rotations)):
        raise ReadError("Sinew returned a non-finite pose; nothing was changed")

    # -- writes start here --
    idx = problem.index
    moved = problem.moved_bones
    root_bone = problem.root_bone if settings.root == "free" else None
    keys.set_pose(ob, moved, rotations[[idx[n] for n in moved]], root_bone, np.asarray(sol.root_translation))
    if key:
        keys.key_current(ob, moved, context.scene.frame_current, root_bone)
    muted, mute_warnings = (0, []) if keep_constraints else keys.mute_constraints(ob, problem.replaced)
    problem.warnings.extend(mute_warnings)
    context.view_layer.update()
    return SolveResult(problem, rotations, np.asarray(sol.root_translation), np.asarray(sol.residuals),
                       int(sol.iterations), bool(sol.reached), str(sol.stop_reason), moved if key else [], muted,
                       time.perf_counter() - t0)


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
    per_frame: bool                # solved frame by frame (animated bones above the chains)
    sample_seconds: float
    solve_seconds: float
    write_seconds: float
    warnings: list

    @property
    def seconds(self):
        return self.sample_seconds + self.solve_seconds + self.write_seconds

    @property
    def worst_residual(self):
        return float(self.residuals.max()) if self.residuals.size else 0.0


class BakeJob:
    """Bakes goals over ``frame_start..frame_end`` (inclusive).

    The constructor reads and checks everything it can without changing the scene (raises
    ReadError). ``steps()`` then yields progress in [0, 1] and finally stores ``self.result``;
    ``run()`` does it all at once; ``cancel()`` puts the frame and pose back (nothing else has
    been written before the last step).
    """

    def __init__(self, context, ob, frame_start: int, frame_end: int, settings: Settings, *,
                 new_action: bool = True, only_moved: bool = True, keep_constraints: bool = False,
                 chunk: int = 0):
        if frame_end < frame_start:
            raise ReadError(f"The frame range is empty ({frame_start}..{frame_end})")
        self.problem = rig_reader.read(ob)
        self.solver = settings.solver()
        self.settings = settings
        self.ob = ob
        self.scene = context.scene
        self.view_layer = context.view_layer
        self.frames = np.arange(int(frame_start), int(frame_end) + 1)
        self.new_action = new_action
        self.only_moved = only_moved
        self.keep_constraints = keep_constraints
        self.chunk = int(chunk) if chunk and chunk > 0 else len(self.frames)
        self.result: BakeResult | None = None
        self.done = False
        self._saved_frame = (self.scene.frame_current, self.scene.frame_subframe)
        self._saved_pose = _snapshot_pose(ob)

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
        try:
            yield from self._steps()
        except ReadError:
            self.cancel()
            raise
        except engine().SinewError as ex:
            self.cancel()
            raise ReadError(f"Sinew could not solve: {ex}") from ex
        except BaseException:
            self.cancel()
            raise

    def _steps(self):
        p, ob, scene = self.problem, self.ob, self.scene
        frames = self.frames
        nf, ng, nb = len(frames), len(p.goals), len(p.names)
        idx = p.index
        pinned = self.settings.root == "pinned"
        moved = p.moved_bones
        # Progress: sampling 0-50%, solving 50-90%, writing the rest.

        # 1. Sample per frame: every goal's target, the evaluated pose of the bones above the
        #    chains (the engine rig's rest), and for "key every bone" the other bones' rotations.
        t0 = time.perf_counter()
        targets = np.zeros((nf, ng, 3))
        orients = np.zeros((nf, ng, 4))
        poles = np.zeros((nf, ng, 3))
        rests = np.zeros((nf, nb, 4, 4))
        root_loc = np.zeros((nf, 3))
        moved_set = set(moved)
        others = [] if self.only_moved else [b.name for b in ob.data.bones if b.name not in moved_set]
        others_rot = np.zeros((nf, len(others), 4))
        conn = [idx[n] for n in p.connectors]
        conn_rot = np.zeros((nf, len(conn), 4))
        start_pose = start_root = None
        compat = {}
        for k, f in enumerate(frames):
            scene.frame_set(int(f))
            depsgraph = self.view_layer.depsgraph
            targets[k], orients[k], poles[k] = p.sample_goals(depsgraph)
            pbs = ob.evaluated_get(depsgraph).pose.bones
            rests[k] = p.rest_for(pbs, pbs)
            if k == 0:
                start_pose, start_root = p.pose_from_bones(pbs)
                compat = {n: tuple(pbs[n].rotation_euler) for n in moved + others}
            if p.root_bone:
                root_loc[k] = pbs[p.root_bone].location
            for j, n in enumerate(p.connectors):
                conn_rot[k, j] = rig_reader.bone_quaternion(pbs[n])
            for j, n in enumerate(others):
                others_rot[k, j] = rig_reader.bone_quaternion(pbs[n])
            if (k + 1) % self.chunk == 0:
                yield 0.5 * (k + 1) / nf
        if not (np.all(np.isfinite(targets)) and np.all(np.isfinite(poles))):
            raise ReadError("A goal target has a non-finite position in the frame range")
        sample_s = time.perf_counter() - t0

        # 2. Solve: one solve_sequence call, unless the bones above the chains (or the pinned
        #    root's location) move in the range; then each frame is solved on its own rig.
        t0 = time.perf_counter()
        per_frame = bool(np.any(np.abs(rests - rests[0]) > 1e-6))
        if conn and np.any(np.abs(np.einsum("fci,ci->fc", conn_rot, conn_rot[0])) < 1.0 - 1e-12):
            per_frame = True
        if pinned and p.root_bone and np.any(np.abs(root_loc - root_loc[0]) > 1e-7):
            per_frame = True
        goals = p.engine_goals(targets[0], orients[0], poles[0])
        use_orient = any(g.use_orientation for g in p.goals)
        use_poles = any(g.pole is not None for g in p.goals)
        rotations = np.zeros((nf, nb, 4))
        root_t = np.zeros((nf, 3))
        residuals = np.zeros((nf, ng))
        iterations = np.zeros(nf, dtype=np.int64)
        reached = np.zeros(nf, dtype=bool)
        pose, root = np.array(start_pose), np.array(start_root)
        rig = p.make_rig(rests[0])
        for c0 in range(0, nf, self.chunk):
            c1 = min(nf, c0 + self.chunk)
            if not per_frame:
                res = self.solver.solve_sequence(
                    rig, goals, targets[c0:c1],
                    orientations=orients[c0:c1] if use_orient else None,
                    pole_targets=poles[c0:c1] if use_poles else None,
                    pose=pose, root_translation=root, root=self.settings.root)
                rotations[c0:c1] = res.rotations
                root_t[c0:c1] = res.root_translations
                residuals[c0:c1] = res.residuals
                iterations[c0:c1] = res.iterations
                reached[c0:c1] = res.reached
            else:
                for k in range(c0, c1):
                    if k and np.any(rests[k] != rests[k - 1]):
                        rig = p.make_rig(rests[k])
                    if pinned:
                        root = root_loc[k]
                    pose[conn] = conn_rot[k]
                    sol = self.solver.solve(rig, p.engine_goals(targets[k], orients[k], poles[k]), pose=pose,
                                            root_translation=root, root=self.settings.root)
                    rotations[k] = sol.rotations
                    root_t[k] = sol.root_translation
                    residuals[k] = sol.residuals
                    iterations[k] = sol.iterations
                    reached[k] = sol.reached
                    pose, root = np.array(rotations[k]), np.array(root_t[k])
            pose, root = np.array(rotations[c1 - 1]), np.array(root_t[c1 - 1])
            yield 0.5 + 0.4 * c1 / nf
        if not np.all(np.isfinite(rotations)):
            raise ReadError("Sinew returned a non-finite pose; nothing was changed")
        solve_s = time.perf_counter() - t0

        # 3. Write (nothing before this point changed the scene, apart from the current frame).
        t0 = time.perf_counter()
        keyed = moved + others
        keyed_rot = np.concatenate([rotations[:, [idx[n] for n in moved], :], others_rot], axis=1)
        root_bone = p.root_bone if not pinned else None
        _restore_pose(ob, self._saved_pose)
        action, prev = keys.write_bake(ob, frames, keyed, keyed_rot, root_bone, root_t if root_bone else None,
                                       new_action=self.new_action, compat=compat)
        muted, mute_warnings = (0, []) if self.keep_constraints else keys.mute_constraints(ob, p.replaced)
        p.warnings.extend(mute_warnings)
        frame, sub = self._saved_frame
        scene.frame_set(frame, subframe=sub)
        self.done = True
        write_s = time.perf_counter() - t0
        self.result = BakeResult(frames, list(p.names), rotations, root_t, residuals, iterations, reached, list(keyed),
                                 action, prev, muted, per_frame, sample_s, solve_s, write_s, list(p.warnings))
        yield 1.0


def problem_document(problem: rig_reader.RigProblem, targets, orients, poles, pose, root_translation,
                     settings: Settings) -> dict:
    """The problem as ``sinew.problem/1`` (see rust/sinew/src/format.rs)."""
    bones = []
    for i, name in enumerate(problem.names):
        b = {"name": name, "parent": problem.names[problem.parents[i]] if problem.parents[i] >= 0 else None,
             "matrix": [[float(v) for v in row] for row in problem.rest[i]], "length": float(problem.lengths[i])}
        if name in problem.limits:
            b["limit"] = _limit_json(problem.rig.limit(name))
        bones.append(b)
    goals = []
    for i, g in enumerate(problem.goals):
        d = {"bone": g.bone, "target": [float(v) for v in targets[i]], "weight": float(g.weight),
             "chain_length": int(g.chain_length), "use_tail": bool(g.use_tail)}
        if g.use_orientation:
            d["orientation"] = [float(v) for v in orients[i]]
        if g.pole is not None:
            d["pole"] = {"target": [float(v) for v in poles[i]], "angle": float(g.pole_angle)}
        goals.append(d)
    return {
        "format": "sinew.problem/1",
        "bones": bones,
        "goals": goals,
        "root": settings.root,
        "settings": {"method": "fabrik", "max_iterations": int(settings.max_iterations),
                     "tolerance": float(settings.tolerance)},
        "pose": {"rotations": [[float(v) for v in q] for q in pose],
                 "root_translation": [float(v) for v in root_translation]},
    }


def _limit_json(d):
    """The engine's ``rig.limit()`` dict as the problem format's ``limit`` object (the core's
    serde form of ``JointLimit``)."""
    swing = d["swing"]
    if swing == "cone":
        x_pos, x_neg, z_pos, z_neg = d["cone"]
        swing = {"cone": {"x_pos": x_pos, "x_neg": x_neg, "z_pos": z_pos, "z_neg": z_neg}}
    elif swing == "hinge":
        axis, lo, hi = d["hinge"]
        swing = {"hinge": {"axis": [float(v) for v in axis], "min": lo, "max": hi}}
    twist = None if d["twist"] is None else {"min": d["twist"][0], "max": d["twist"][1]}
    return {"swing": swing, "twist": twist, "locked": bool(d["locked"]), "stiffness": float(d["stiffness"])}


def export_problem(context, ob, settings: Settings) -> dict:
    depsgraph = context.evaluated_depsgraph_get()
    problem = rig_reader.read(ob, depsgraph=depsgraph)
    targets = problem.sample_goals(depsgraph)
    pose, root_t = problem.pose_from_bones(ob.pose.bones)
    return problem_document(problem, *targets, pose, root_t, settings)
