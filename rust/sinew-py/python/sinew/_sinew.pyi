"""Typed interface of the native module ``sinew._sinew`` (re-exported by ``sinew``).

Conventions:

* Positions, targets and orientations are rig (armature) space.
* Quaternions are always ``(w, x, y, z)``. Local rotations are relative to the bone's rest frame,
  exactly Blender's ``pose_bone.rotation_quaternion`` (``matrix_basis``) with default inheritance.
* Array arguments accept any numeric array-like (float32 and integer arrays are converted);
  returned arrays are new float64 arrays (``int64``/``bool`` where stated).
* A bone is named by its ``int`` index or its ``str`` name.
* Every error is a :class:`SinewError` (a ``ValueError``) carrying the core's message; the
  subclasses tell the kinds apart. Solves release the GIL.
"""

from collections.abc import Sequence
from typing import Any, Literal, TypeAlias, TypedDict, final

import numpy as np
import numpy.typing as npt

_ArrayLike: TypeAlias = npt.ArrayLike
_F64: TypeAlias = npt.NDArray[np.float64]
_Bone: TypeAlias = int | str
_StopReason: TypeAlias = Literal["converged", "stalled", "out_of_reach", "iteration_limit"]
_RootMode: TypeAlias = Literal["pinned", "free"]

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

__version__: str
"""The wheel's version (a unique ``X.Y.Z.devN`` per build from ``scripts/build_wheel.sh``)."""

core_version: str
"""The version of the Rust core crate the module was built with."""

class SinewError(ValueError):
    """Base class of every error Sinew raises (a ValueError); the message is the core's."""

class RigError(SinewError):
    """The rig is malformed: no bones, a bad parent order, a duplicate name, a bad length or a non-rigid rest matrix."""

class UnknownBoneError(SinewError):
    """A bone name or index does not denote a bone of the rig."""

class LimitError(SinewError):
    """A joint-limit value is outside its range."""

class GoalError(SinewError):
    """A goal is malformed (non-finite target, orientation or pole, non-positive weight, ...)."""

class ShapeError(SinewError):
    """An array has the wrong shape or is not numeric."""

class NonFiniteError(SinewError):
    """A number that must be finite is NaN or infinite, or beyond the magnitude Sinew supports
    (positions and lengths up to 1e12 rig units)."""

class SettingsError(SinewError):
    """A solver setting (method, iterations, tolerances, root mode) is invalid."""

class FormatError(SinewError):
    """A problem file could not be read."""

class InternalError(SinewError):
    """A bug in Sinew (a Rust panic, caught at the module boundary); please report it."""

class UnsupportedError(SinewError):
    """The solver's method cannot honour something the problem asks for (a kind of goal, a limit type, a rig shape); the message names it. Another method ("fabrik" takes every problem) solves it."""

class _LimitDict(TypedDict):
    swing: Literal["free", "cone", "hinge"]
    cone: tuple[float, float, float, float] | None
    cone_shape: Literal["rotation_vector", "blender"] | None
    twist: tuple[float, float] | None
    hinge: tuple[tuple[float, float, float], float, float] | None
    locked: bool
    stiffness: float
    stiffness_axes: tuple[float, float, float]
    stretch: float

class _LimitState(TypedDict):
    swing: tuple[float, float, float, float]
    twist: float
    hinge: float | None
    swing_at_bound: bool
    twist_at_bound: bool

@final
class Rig:
    """A skeleton: bones in parent-before-child order with rest transforms, lengths and limits.

    Conventions are Blender's: a bone's frame has its origin at the head and the bone runs along
    local +Y. Cheap to pass around: solves take a snapshot, and limit changes copy the rig only
    while a snapshot is still in use (copy-on-write). Safe to share between threads.
    """

    def __new__(
        cls,
        names: Sequence[str],
        parents: Sequence[int] | _ArrayLike,
        rest_matrices: _ArrayLike,
        lengths: _ArrayLike,
    ) -> Rig:
        """Builds a rig from armature-space rest matrices.

        Args:
            names: unique bone names, parents before children.
            parents: (N,) parent index per bone, -1 (any negative number) for a root.
            rest_matrices: (N, 4, 4) armature-space rest matrices, rows as numpy gives a Blender
                ``Matrix`` (``np.array(bone.matrix_local)``); rotation and translation only.
            lengths: (N,) bone lengths, each > 0.

        Raises:
            RigError: empty rig, parent not before its child, duplicate name, bad length or a
                non-rigid matrix.
            ShapeError: an array of the wrong shape.
            NonFiniteError: a NaN or infinite matrix entry.
        """

    @staticmethod
    def from_json(text: str) -> Rig:
        """The rig (with limits) of a ``sinew.problem/1`` JSON problem file; goals, settings and
        pose in the file are ignored. Raises FormatError, RigError or LimitError."""

    def __len__(self) -> int:
        """Number of bones."""

    def copy(self) -> Rig:
        """A new, independent rig handle (storage shared until either changes)."""

    def __copy__(self) -> Rig: ...
    def __deepcopy__(self, memo: Any, /) -> Rig: ...
    @property
    def names(self) -> list[str]:
        """Bone names in rig order."""

    @property
    def parents(self) -> list[int]:
        """Parent index per bone, -1 for a root."""

    @property
    def lengths(self) -> _F64:
        """(N,) bone lengths."""

    @property
    def rest_matrices(self) -> _F64:
        """(N, 4, 4) armature-space rest matrices (rows as Blender's ``bone.matrix_local``)."""

    def index(self, name: str) -> int:
        """The index of the bone called ``name``; UnknownBoneError if there is none."""

    def set_cone_limit(self, bone: _Bone, x_pos: float, x_neg: float, z_pos: float, z_neg: float) -> None:
        """Bounds the bone's swing by an irregular cone: the largest swing about +X (tilt toward
        +Z), -X, +Z (tilt toward -X) and -Z, radians, each in (0, pi]. Keeps twist, lock and
        stiffness. Raises LimitError (nothing changes) or UnknownBoneError."""

    def set_cone_limit_blender(self, bone: _Bone, min_x: float, max_x: float, min_z: float, max_z: float) -> None:
        """The cone Blender's IK builds from a pose bone's ``ik_min_x, ik_max_x, ik_min_z,
        ik_max_z`` (radians; mins <= 0 <= maxes), in Blender's shape: an ellipse on the swing
        quaternion's (x, z) with semi-axes ``sin(angle / 2)``, and a bound of +-pi on one axis
        leaves an interval on the other. A zero bound becomes 1e-6 rad (the core needs
        half-angles > 0)."""

    def set_twist_limit(self, bone: _Bone, min: float, max: float) -> None:
        """Bounds the twist about the bone's own axis (local Y): -pi <= min <= max <= pi. A hinge
        takes no twist range (LimitError)."""

    def set_hinge_limit(self, bone: _Bone, axis: Sequence[float] | _ArrayLike, min: float, max: float) -> None:
        """Makes the bone a hinge: it turns about ``axis`` (bone rest frame, normalised) by an
        angle in [min, max] (radians, within [-pi, pi]); replaces a cone and removes a twist
        range (a hinge has one degree of freedom)."""

    def set_locked(self, bone: _Bone, locked: bool = True) -> None:
        """A locked bone keeps the rotation it starts a solve with."""

    def set_stiffness(self, bone: _Bone, stiffness: float, y: float | None = None, z: float | None = None) -> None:
        """Resistance to motion in [0, 1): 0 is free, near 1 barely moves. One value for every
        axis, or ``set_stiffness(bone, x, y, z)`` per axis of the bone's own frame (Blender's
        ``ik_stiffness_x/y/z``): the damped-least-squares steps weight each local axis by
        ``1 - stiffness``; FABRIK's own steps use the largest."""

    def set_root_rest(self, bone: _Bone, matrix: _ArrayLike) -> None:
        """Moves root bone ``bone`` (one without a parent) to the armature-space rest ``matrix``
        (4, 4, rows as Blender's ``Matrix``; rotation and translation only), carrying its
        descendants, whose rests relative to their parents stay as they are: what a sequence's
        ``root_rests`` does at each frame. Raises RigError for a bone with a parent or a matrix
        that is not rigid; nothing changes then."""

    def set_stretch(self, bone: _Bone, stretch: float) -> None:
        """How readily the bone changes length, in [0, 1], as Blender's ``ik_stretch``: 0 (the
        default) keeps it rigid; above 0 a solve may scale it along its own Y (its length, and
        its children's offsets with it), weighted as Blender's IK weights its stretch. A solve
        then returns a length scale per bone (``Solution.scales``). Raises LimitError (nothing
        changes) or UnknownBoneError."""

    def clear_limits(self, bone: _Bone) -> None:
        """Removes every limit (swing, twist, lock, stiffness) and the stretch from the bone."""

    def limit(self, bone: _Bone) -> _LimitDict:
        """The bone's limits: ``{"swing": "free"|"cone"|"hinge", "cone": (x_pos, x_neg, z_pos,
        z_neg) | None, "cone_shape": "rotation_vector"|"blender"|None (the plane the cone's
        ellipses live in: ``set_cone_limit`` or ``set_cone_limit_blender``), "twist": (min, max) |
        None, "hinge": ((x, y, z), min, max) | None, "locked": bool, "stiffness": float (the
        largest), "stiffness_axes": (x, y, z), "stretch": float}``."""

    def limit_violation(self, bone: _Bone, rotation_wxyz: Sequence[float] | _ArrayLike) -> float:
        """How far the local rotation ``(w, x, y, z)`` is outside the bone's limit, as an angle in
        radians (0 inside). The core's ``JointLimit::violation``."""

    def cone_boundary(self, bone: _Bone, segments: int = 64, rings: int = 1) -> _F64 | None:
        """Where the bone's cone lets it point, for drawing it: unit directions (rings, segments,
        3) in the bone's rest frame (the directions of its +Y axis turned by allowed swings).
        Ring ``r`` is the boundary scaled by ``(r + 1) / rings`` in the cone's own plane, so the
        last ring is the boundary and the rings around the rest direction (+Y) tile the allowed
        region; segment ``k`` is at the angle ``2 pi k / segments`` around it, so with segments a
        multiple of 4 the bounds about +X, +Z, -X and -Z are segments 0, n/4, n/2 and 3n/4. None
        when the bone's swing is not a cone. The core's ``ConeLimit::boundary_directions``.
        Raises ShapeError (segments outside [4, 65536], rings outside [1, 4096]) or
        UnknownBoneError."""

    def limit_state(
        self, bone: _Bone, rotation_wxyz: Sequence[float] | _ArrayLike, tolerance: float = 1e-3
    ) -> _LimitState:
        """Where the local rotation ``(w, x, y, z)`` stands against the bone's limit: its swing
        (wxyz; for a hinge, the rotation about the hinge axis), its twist angle about the bone's Y
        (0 for a hinge), the hinge angle (None unless a hinge), and whether the swing and the twist
        are at (or beyond) a bound to within ``tolerance`` radians. The core's
        ``JointLimit::state``. Raises NonFiniteError or UnknownBoneError."""

    def forward_kinematics(
        self,
        rotations: _ArrayLike | None = None,
        root_translation: Sequence[float] | _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
    ) -> tuple[_F64, _F64, _F64]:
        """Rig-space ``(heads (N, 3), tails (N, 3), world rotations (N, 4) wxyz)`` for local
        rotations (N, 4) wxyz (rest pose if None), bone 0's translation (3,) in its rest frame
        (Blender's ``location``) and length scales (N,) (every bone at 1 if None; a bone's tail
        at its length times its scale, its children's heads at their rest offsets times it).
        Raises ShapeError, NonFiniteError or LimitError (a scale other than 1 on a bone whose
        stretch is 0, or outside [1e-3, 1e3])."""

@final
class Goal:
    """One IK goal: pull an effector bone's tail (or head) onto a target.

    The bone (index or name) is resolved against the rig passed to the solver. Attributes are
    readable and writable under the constructor's names; vectors read back as tuples.
    """

    def __new__(
        cls,
        bone: _Bone,
        target: Sequence[float] | _ArrayLike,
        orientation: Sequence[float] | _ArrayLike | None = None,
        weight: float = 1.0,
        chain_length: int = 0,
        pole_target: Sequence[float] | _ArrayLike | None = None,
        pole_angle: float = 0.0,
        use_tail: bool = True,
        kind: Literal["position", "orientation", "aim", "line", "plane", "half_space"] = "position",
        axis: Sequence[float] | _ArrayLike | None = None,
        direction: Sequence[float] | _ArrayLike | None = None,
        normal: Sequence[float] | _ArrayLike | None = None,
    ) -> Goal:
        """Args:
            bone: the effector bone, index or name.
            target: (3,) where the effector point should go (rig space).
            orientation: optional (4,) world rotation ``(w, x, y, z)`` for the effector's frame.
            weight: importance where goals compete (> 0; checked when solving).
            chain_length: bones from the effector up that may move; 0 = up to the root.
            pole_target: optional (3,) pole position: the chain's bend plane turns to contain it.
            pole_angle: extra rotation about the chain axis, radians.
            use_tail: pull the tail (True) or the head.
            kind: what the goal asks (Jack's goal kinds): ``"position"`` (the effector point on
                ``target``), ``"orientation"`` (only ``orientation`` counts), ``"aim"`` (the bone's
                local ``axis``, default +Y, points from its head at ``target``), ``"line"`` (the
                effector point on the line through ``target`` along ``direction``), ``"plane"``
                (on the plane through ``target`` with ``normal``) or ``"half_space"`` (on the side
                of that plane ``normal`` points to). Every method takes every kind.
            axis, direction, normal: (3,) the vector the kind uses (any nonzero length).

        Raises ShapeError for a vector of the wrong shape, GoalError for a negative chain
        length or one beyond int64, UnknownBoneError for a negative index. When solving, a bone
        the rig does not have raises UnknownBoneError; NaN targets, targets and poles beyond
        1e12 rig units, weights outside [1e-12, 1e12] and more than 256 goals raise GoalError.
        An unknown kind, a kind without the vector it needs or with one it does not use raise
        GoalError here; a zero vector, an orientation goal without orientation or an aim with
        one raise GoalError when solving.
        """

    def copy(self) -> Goal:
        """A copy of this goal."""

    def __copy__(self) -> Goal: ...
    def __deepcopy__(self, memo: Any, /) -> Goal: ...
    @property
    def bone(self) -> _Bone: ...
    @bone.setter
    def bone(self, value: _Bone) -> None: ...
    @property
    def target(self) -> tuple[float, float, float]: ...
    @target.setter
    def target(self, value: Sequence[float] | _ArrayLike) -> None: ...
    @property
    def orientation(self) -> tuple[float, float, float, float] | None: ...
    @orientation.setter
    def orientation(self, value: Sequence[float] | _ArrayLike | None) -> None: ...
    @property
    def weight(self) -> float: ...
    @weight.setter
    def weight(self, value: float) -> None: ...
    @property
    def chain_length(self) -> int: ...
    @chain_length.setter
    def chain_length(self, value: int) -> None: ...
    @property
    def pole_target(self) -> tuple[float, float, float] | None: ...
    @pole_target.setter
    def pole_target(self, value: Sequence[float] | _ArrayLike | None) -> None: ...
    @property
    def pole_angle(self) -> float: ...
    @pole_angle.setter
    def pole_angle(self, value: float) -> None: ...
    @property
    def use_tail(self) -> bool: ...
    @use_tail.setter
    def use_tail(self, value: bool) -> None: ...
    def errors(
        self,
        head: Sequence[float] | _ArrayLike,
        rotation: Sequence[float] | _ArrayLike,
        effector: Sequence[float] | _ArrayLike,
    ) -> tuple[float, float]:
        """How far this goal is from met, ``(distance, angle)``, when its bone's frame is
        ``rotation`` (w, x, y, z) at ``head`` with its effector point at ``effector`` (rig space):
        the engine's own measure of a solution's residuals, for a pose the caller has (Blender's
        evaluated pose, say). Raises ShapeError, or GoalError for a zero or non-finite kind
        vector."""
    @property
    def kind(self) -> str:
        """The goal's kind: "position", "orientation", "aim", "line", "plane" or "half_space"."""
    @property
    def axis(self) -> tuple[float, float, float] | None:
        """The aim goal's bone axis (None for other kinds)."""
    @property
    def direction(self) -> tuple[float, float, float] | None:
        """The line goal's direction (None for other kinds)."""
    @property
    def normal(self) -> tuple[float, float, float] | None:
        """The plane or half-space goal's normal (None for other kinds)."""

@final
class Solution:
    """The result of :meth:`Solver.solve`."""

    @property
    def rotations(self) -> _F64:
        """(N, 4) float64 local rotations ``(w, x, y, z)``, keyable as Blender's
        ``rotation_quaternion``; never outside a joint limit."""

    @property
    def root_translation(self) -> _F64:
        """(3,) bone 0's translation in its rest frame (Blender's ``location``)."""

    @property
    def scales(self) -> _F64:
        """(N,) length scale per bone: 1 for every bone that kept its length (every bone of a rig
        without stretch). In Blender terms bone ``i``'s uniform pose scale is ``scales[i] /
        scales[parent]``, as Blender's IK shows a stretched bone."""

    @property
    def iterations(self) -> int:
        """Iterations used."""

    @property
    def residuals(self) -> _F64:
        """(G,) distance from each goal's effector to its target."""

    @property
    def worst_residual(self) -> float:
        """The largest residual (0 without goals; NaN if any residual is NaN)."""

    @property
    def orientation_residuals(self) -> _F64:
        """(G,) angle in radians from each goal's effector bone rotation to its target
        orientation; 0 for goals without orientation."""

    @property
    def worst_orientation_residual(self) -> float:
        """The largest orientation residual in radians (0 without orientation goals; NaN if any
        is NaN)."""

    @property
    def reached(self) -> bool:
        """Whether every goal is within tolerance: its distance within ``tolerance`` and its
        orientation within ``tolerance / reach`` radians (``reach`` its chain's length)."""

    @property
    def stop_reason(self) -> _StopReason:
        """Why the solver stopped."""

@final
class SequenceResult:
    """The result of :meth:`Solver.solve_sequence`, one row per frame."""

    def __len__(self) -> int:
        """Number of frames F."""

    @property
    def rotations(self) -> _F64:
        """(F, N, 4) float64 local rotations ``(w, x, y, z)``, sign-continuous frame to frame."""

    @property
    def root_translations(self) -> _F64:
        """(F, 3) bone 0's translation per frame."""

    @property
    def scales(self) -> _F64:
        """(F, N) length scale per frame and bone (see ``Solution.scales``)."""

    @property
    def residuals(self) -> _F64:
        """(F, G) residual per frame and goal."""

    @property
    def orientation_residuals(self) -> _F64:
        """(F, G) orientation residual per frame and goal, radians (0 for goals without
        orientation)."""

    @property
    def iterations(self) -> npt.NDArray[np.int64]:
        """(F,) iterations per frame."""

    @property
    def reached(self) -> npt.NDArray[np.bool_]:
        """(F,) whether every goal was reached, per frame."""

    @property
    def stop_reasons(self) -> list[_StopReason]:
        """Why the solver stopped, per frame."""

@final
class Solver:
    """An IK method with its settings. Reusable and safe to share between threads; solves
    release the GIL."""

    def __new__(
        cls,
        method: str = "fabrik",
        max_iterations: int = 100,
        tolerance: float = 1e-4,
        stall_tolerance: float = 1e-7,
    ) -> Solver:
        """Args:
            method: ``"fabrik"`` (FABRIK with a damped-least-squares finish), ``"dls"`` (damped
                least squares alone), ``"fabrik_classic"`` (the tech report's FABRIK as written),
                ``"ccd"`` (cyclic coordinate descent) or ``"triangulation"`` (law of cosines, one
                pass; one position goal on one chain, else UnsupportedError when solving), or the
                rest of the Jacobian family for comparison: ``"jacobian_transpose"``,
                ``"jacobian_pinv"``, ``"svd_dls"``, ``"sdls"``, and ``"nlp"`` (Jack's nonlinear
                programming: quasi-Newton steps that never raise the goals' potentials) (any case).
            max_iterations: iteration cap (>= 1, at most 2**32 - 1).
            tolerance: a goal is reached within this distance (rig units, > 0).
            stall_tolerance: stop when no effector moves more than this per iteration (>= 0).

        Raises SettingsError (also for an int beyond int64, never OverflowError).
        """

    @property
    def method(self) -> str: ...
    @property
    def max_iterations(self) -> int: ...
    @property
    def tolerance(self) -> float: ...
    @property
    def stall_tolerance(self) -> float: ...
    def solve(
        self,
        rig: Rig,
        goals: Sequence[Goal],
        pose: _ArrayLike | None = None,
        root_translation: Sequence[float] | _ArrayLike | None = None,
        root: _RootMode = "pinned",
        reference: _ArrayLike | Literal["rest", "least_motion"] | None = None,
        reference_root_translation: Sequence[float] | _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
        reference_scales: _ArrayLike | None = None,
    ) -> Solution:
        """Solves one pose.

        Args:
            rig: the rig (a snapshot is taken).
            goals: the goals; bone names resolve against ``rig``.
            pose: (N, 4) start rotations ``(w, x, y, z)``; the rest pose if None.
            root_translation: (3,) start translation of bone 0; zero if None.
            root: ``"pinned"`` (bone 0's head stays put) or ``"free"`` (it may translate).
            reference: where the freedom the goals leave falls back to (among the poses that
                meet the goals, ``"fabrik"`` and ``"dls"`` return the one nearest it). (N, 4)
                reference rotations ``(w, x, y, z)``: in a DCC, the pose before IK (the keyed
                animation at that frame). ``"rest"`` or None (and no
                ``reference_root_translation``): the rest pose, with ``pose``'s root translation.
                ``"least_motion"``: no reference, the answer is where the method's steps lead
                from ``pose`` (near the least joint motion, in a few iterations: for tracking
                where only speed matters).
            reference_root_translation: (3,) the reference's bone 0 translation (used with
                ``root="free"``); zero if None.
            scales: (N,) start length scales (1 for a bone whose stretch is 0); every bone at 1
                if None.
            reference_scales: (N,) the reference's length scales, where stretchy bones' lengths
                fall back to; every bone at 1 if None. Only with a reference (``reference`` or
                ``reference_root_translation``; to a sequence, also ``references``): alone it
                raises SettingsError.

        Raises GoalError, ShapeError, NonFiniteError, SettingsError or UnknownBoneError, and
        UnsupportedError when the method cannot honour the problem (e.g. ``"triangulation"``
        given several goals). Not reaching a target is no error: see ``Solution.reached``.
        """

    def solve_sequence(
        self,
        rig: Rig,
        goals: Sequence[Goal],
        targets: _ArrayLike,
        orientations: _ArrayLike | None = None,
        pole_targets: _ArrayLike | None = None,
        pose: _ArrayLike | None = None,
        root_translation: Sequence[float] | _ArrayLike | None = None,
        root: _RootMode = "pinned",
        reference: _ArrayLike | Literal["rest", "least_motion"] | None = None,
        reference_root_translation: Sequence[float] | _ArrayLike | None = None,
        references: _ArrayLike | None = None,
        scales: _ArrayLike | None = None,
        reference_scales: _ArrayLike | None = None,
        root_translations: _ArrayLike | None = None,
        root_rests: _ArrayLike | None = None,
    ) -> SequenceResult:
        """Solves F frames; rotations are sign-continuous frame to frame.

        With a reference (the rest pose unless ``reference`` or ``references`` give another)
        each frame is solved exactly as :meth:`solve` solves that frame alone from its
        reference (``pose`` = that frame's reference): a bake's frame is the single solve of
        that frame. Those frames do not depend on one another and are solved on up to as many
        threads as the machine has (the environment variable ``SINEW_THREADS`` caps them), the
        GIL released. With ``reference="least_motion"`` (and no ``references``) each frame is
        warm-started from the previous frame's solution (frame 0 from ``pose``): the least
        motion, one frame after another.

        Args:
            targets: (F, G, 3) per frame and goal target.
            orientations: optional (F, G, 4) ``(w, x, y, z)``; used by goals that have an
                orientation, ignored (whatever they hold, NaN or zero) for the others.
            pole_targets: optional (F, G, 3); used by goals that have a pole, ignored for the
                others.
            references: optional (F, N, 4) ``(w, x, y, z)``: each frame's reference rotations
                (in a DCC, the keyed pose before IK at that frame). Without it every frame uses
                ``reference``. The root translation of every frame's reference is
                ``reference_root_translation`` (the start's when it is not given), unless
                ``root_translations`` gives one per frame.
            root_translations: optional (F, 3): each frame's root translation (rig space, as
                ``root_translation``; in a DCC, the keyed root location): the reference's root
                translation at that frame, and with ``root="pinned"`` where the root stays that
                frame (each frame's start root is moved there). Without it a pinned root stays at
                ``root_translation`` throughout.
            root_rests: optional (F, R, 4, 4): each frame's armature-space rest matrix of the
                rig's R root bones (those without a parent, in rig order; rows as the
                constructor's ``rest_matrices``): in a DCC, the animated bones above the IK chains
                at that frame. Every other bone keeps its rest relative to its parent. Without it
                the rig stays as it is.
            Others as :meth:`solve`.

        Every input is checked before the first frame is solved. A result too large to allocate
        (F frames × N bones, e.g. a (10**12, 0, 3) ``targets`` with no goals) raises ShapeError.
        Ctrl-C (any signal Python handles) stops a long range within about a tenth of a second
        or a block of frames (a few hundred per thread), raising KeyboardInterrupt; a frame whose
        answer is not finite stops it too (NonFiniteError, naming the frame).
        """

class _Analysis(TypedDict):
    sub_bases: list[int]
    moved: list[list[int]]
    active: list[int]

def methods() -> list[str]:
    """The names of the IK methods ``Solver(method=...)`` accepts, in the core's order (the
    default, ``"fabrik"``, among them)."""

def analyze(rig: Rig, goals: Sequence[Goal]) -> _Analysis:
    """The chain structure of ``goals`` on ``rig``: ``sub_bases`` (bones where chains meet,
    ascending), ``moved`` (per goal, the bones it moves, effector first) and ``active`` (every
    bone some goal moves, ascending)."""

def load_problem(text: str) -> tuple[Rig, list[Goal], Solver, _F64, _F64, _RootMode]:
    """Reads a ``sinew.problem/1`` JSON problem: ``(rig, goals, solver, start pose (N, 4) wxyz,
    root_translation (3,), root mode)``. Goals name their bones by name. Raises FormatError or
    any rig, limit, goal or settings error. The file's reference: :func:`load_reference`."""

def load_reference(text: str) -> dict[str, Any]:
    """A ``sinew.problem/1`` JSON problem's reference as the keyword arguments of
    :meth:`Solver.solve` that give it: ``{"reference": "rest"}`` (also when the file has none),
    ``{"reference": "least_motion"}``, or a pose's ``reference`` (N, 4) wxyz,
    ``reference_root_translation`` (3,) and, where the file gives them, ``reference_scales``
    (N,)::

        rig, goals, solver, pose, root_t, root = sinew.load_problem(text)
        solver.solve(rig, goals, pose=pose, root_translation=root_t, root=root, **sinew.load_reference(text))

    Raises what :func:`load_problem` raises."""

def _panic_for_tests(detached: bool) -> None:
    """Panics inside the module's panic boundary (tests check it raises InternalError). Not
    public API."""
