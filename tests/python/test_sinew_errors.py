"""Every bad input the module handles raises a SinewError (the right subclass), never a crash."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sinew
from sinew_py_rigs import chain, matrix

NAN = float("nan")
INF = float("inf")


def two_bone_inputs():
    return ["a", "b"], [-1, 0], np.stack([matrix((0, 0, 0), (0, 0, 1)), matrix((0, 0, 1), (0, 0, 2))]), [1.0, 1.0]


def with_(index, value):
    args = list(two_bone_inputs())
    args[index] = value
    return args


def scaled():
    m = two_bone_inputs()[2].copy()
    m[1, :3, :3] *= 2.0
    return m


def sheared():
    m = two_bone_inputs()[2].copy()
    m[1, 0, 1] += 0.3
    return m


def mirrored():
    m = two_bone_inputs()[2].copy()
    m[1, :3, 0] *= -1.0
    return m


def nan_matrix():
    m = two_bone_inputs()[2].copy()
    m[0, 0, 3] = NAN
    return m


def bad_bottom_row():
    m = two_bone_inputs()[2].copy()
    m[0, 3, 0] = 0.5
    return m


BAD_RIGS = {
    "empty": ([[], [], np.zeros((0, 4, 4)), []], sinew.RigError, "no bones"),
    "empty lists": ([[], [], [], []], sinew.RigError, "no bones"),
    "parent after child": (with_(1, [1, -1]), sinew.RigError, "parent-before-child"),
    "parent is itself": (with_(1, [-1, 1]), sinew.RigError, "parent"),
    "parent out of range": (with_(1, [-1, 7]), sinew.RigError, "parent"),
    "fractional parent": (with_(1, [-1, 0.5]), sinew.RigError, "not an integer"),
    "NaN parent": (with_(1, [-1, NAN]), sinew.RigError, "not an integer"),
    "duplicate names": (with_(0, ["a", "a"]), sinew.RigError, "two bones"),
    "zero length": (with_(3, [1.0, 0.0]), sinew.RigError, "length"),
    "negative length": (with_(3, [-1.0, 1.0]), sinew.RigError, "length"),
    "NaN length": (with_(3, [1.0, NAN]), sinew.RigError, "length"),
    "scaled matrix": (with_(2, scaled()), sinew.RigError, "rigid"),
    "sheared matrix": (with_(2, sheared()), sinew.RigError, "rigid"),
    "mirrored matrix": (with_(2, mirrored()), sinew.RigError, "rigid"),
    "bottom row": (with_(2, bad_bottom_row()), sinew.RigError, "rigid"),
    "NaN matrix": (with_(2, nan_matrix()), sinew.NonFiniteError, "not finite"),
    "3x3 matrices": (with_(2, np.zeros((2, 3, 3))), sinew.ShapeError, r"\(2, 4, 4\)"),
    "too few matrices": (with_(2, np.zeros((1, 4, 4))), sinew.ShapeError, r"\(2, 4, 4\)"),
    "flat matrices": (with_(2, np.zeros(32)), sinew.ShapeError, r"\(2, 4, 4\)"),
    "ragged matrices": (with_(2, [[1, 2], [3]]), sinew.ShapeError, "rest_matrices"),
    "text matrices": (with_(2, "abc"), sinew.ShapeError, "numeric"),
    "too few lengths": (with_(3, [1.0]), sinew.ShapeError, r"\(2,\)"),
    "too many parents": (with_(1, [-1, 0, 1]), sinew.ShapeError, "parents"),
    "2-D lengths": (with_(3, [[1.0, 1.0]]), sinew.ShapeError, "lengths"),
}


@pytest.mark.parametrize("args, error, match", BAD_RIGS.values(), ids=BAD_RIGS.keys())
def test_bad_rigs(args, error, match):
    with pytest.raises(error, match=match):
        sinew.Rig(*args)


def test_good_two_bone_rig_for_reference():
    assert len(sinew.Rig(*two_bone_inputs())) == 2


BAD_LIMITS = {
    "cone zero": (lambda r: r.set_cone_limit(1, 0.0, 0.5, 0.5, 0.5), sinew.LimitError),
    "cone above pi": (lambda r: r.set_cone_limit(1, 4.0, 0.5, 0.5, 0.5), sinew.LimitError),
    "cone NaN": (lambda r: r.set_cone_limit(1, NAN, 0.5, 0.5, 0.5), sinew.LimitError),
    "cone negative": (lambda r: r.set_cone_limit(1, 0.5, -0.5, 0.5, 0.5), sinew.LimitError),
    "blender min above 0": (lambda r: r.set_cone_limit_blender(1, 0.2, 0.5, -0.5, 0.5), sinew.LimitError),
    "twist min > max": (lambda r: r.set_twist_limit(1, 0.5, 0.1), sinew.LimitError),
    "twist beyond pi": (lambda r: r.set_twist_limit(1, -4.0, 0.1), sinew.LimitError),
    "twist NaN": (lambda r: r.set_twist_limit(1, NAN, 0.1), sinew.LimitError),
    "hinge zero axis": (lambda r: r.set_hinge_limit(1, (0, 0, 0), 0.0, 1.0), sinew.LimitError),
    "hinge NaN axis": (lambda r: r.set_hinge_limit(1, (NAN, 0, 0), 0.0, 1.0), sinew.LimitError),
    "hinge min > max": (lambda r: r.set_hinge_limit(1, (1, 0, 0), 1.0, 0.0), sinew.LimitError),
    "hinge axis shape": (lambda r: r.set_hinge_limit(1, (1, 0), 0.0, 1.0), sinew.ShapeError),
    "stiffness 1": (lambda r: r.set_stiffness(1, 1.0), sinew.LimitError),
    "stiffness negative": (lambda r: r.set_stiffness(1, -0.1), sinew.LimitError),
    "unknown name": (lambda r: r.set_locked("nope"), sinew.UnknownBoneError),
    "index out of range": (lambda r: r.set_cone_limit(99, 0.5, 0.5, 0.5, 0.5), sinew.UnknownBoneError),
    "negative index": (lambda r: r.clear_limits(-1), sinew.UnknownBoneError),
    "float bone": (lambda r: r.clear_limits(1.5), sinew.UnknownBoneError),
    "None bone": (lambda r: r.limit(None), sinew.UnknownBoneError),
    "index() unknown": (lambda r: r.index("nope"), sinew.UnknownBoneError),
    "limit() unknown": (lambda r: r.limit("nope"), sinew.UnknownBoneError),
    "violation unknown bone": (lambda r: r.limit_violation(5, (1, 0, 0, 0)), sinew.UnknownBoneError),
    "violation zero quaternion": (lambda r: r.limit_violation(1, (0, 0, 0, 0)), sinew.NonFiniteError),
    "violation NaN quaternion": (lambda r: r.limit_violation(1, (NAN, 0, 0, 0)), sinew.NonFiniteError),
    "violation shape": (lambda r: r.limit_violation(1, (1, 0, 0)), sinew.ShapeError),
    "fk shape": (lambda r: r.forward_kinematics(np.zeros((3, 4))), sinew.ShapeError),
    "fk NaN": (lambda r: r.forward_kinematics(np.full((2, 4), NAN)), sinew.NonFiniteError),
    "fk zero quaternion": (lambda r: r.forward_kinematics(np.zeros((2, 4))), sinew.NonFiniteError),
    "fk root shape": (lambda r: r.forward_kinematics(None, (1, 2)), sinew.ShapeError),
    "fk root NaN": (lambda r: r.forward_kinematics(None, (NAN, 0, 0)), sinew.NonFiniteError),
}


@pytest.mark.parametrize("call, error", BAD_LIMITS.values(), ids=BAD_LIMITS.keys())
def test_bad_rig_calls(call, error):
    rig = chain(2)
    before = [rig.limit(i) for i in range(2)]
    with pytest.raises(error):
        call(rig)
    assert [rig.limit(i) for i in range(2)] == before


BAD_GOALS = {
    "target shape 2": (lambda: sinew.Goal(0, (1, 2)), sinew.ShapeError),
    "target shape 1x3": (lambda: sinew.Goal(0, [[1, 2, 3]]), sinew.ShapeError),
    "target text": (lambda: sinew.Goal(0, "abc"), sinew.ShapeError),
    "target None": (lambda: sinew.Goal(0, None), sinew.ShapeError),
    "orientation shape": (lambda: sinew.Goal(0, (1, 2, 3), orientation=(1, 0, 0)), sinew.ShapeError),
    "pole shape": (lambda: sinew.Goal(0, (1, 2, 3), pole_target=(1, 0)), sinew.ShapeError),
    "negative chain length": (lambda: sinew.Goal(0, (1, 2, 3), chain_length=-1), sinew.GoalError),
    "negative bone index": (lambda: sinew.Goal(-1, (1, 2, 3)), sinew.UnknownBoneError),
    "bone of another type": (lambda: sinew.Goal([0], (1, 2, 3)), sinew.UnknownBoneError),
}


@pytest.mark.parametrize("make, error", BAD_GOALS.values(), ids=BAD_GOALS.keys())
def test_bad_goals(make, error):
    with pytest.raises(error):
        make()


def test_bad_goal_attribute_assignment_keeps_the_old_value():
    g = sinew.Goal(0, (1, 2, 3))
    with pytest.raises(sinew.ShapeError):
        g.target = (1, 2)
    with pytest.raises(sinew.GoalError):
        g.chain_length = -3
    assert g.target == (1.0, 2.0, 3.0) and g.chain_length == 0


def goal(**kw):
    kw.setdefault("bone", 2)
    kw.setdefault("target", (1.0, 1.0, 2.0))
    return sinew.Goal(**kw)


BAD_SOLVES = {
    "NaN target": (dict(goals=[goal(target=(NAN, 0, 0))]), sinew.GoalError, "goal 0: target is not finite"),
    "inf target": (dict(goals=[goal(), goal(target=(INF, 0, 0))]), sinew.GoalError, "goal 1"),
    "zero weight": (dict(goals=[goal(weight=0.0)]), sinew.GoalError, "weight"),
    "negative weight": (dict(goals=[goal(weight=-1.0)]), sinew.GoalError, "weight"),
    "NaN weight": (dict(goals=[goal(weight=NAN)]), sinew.GoalError, "weight"),
    "NaN orientation": (dict(goals=[goal(orientation=(NAN, 0, 0, 0))]), sinew.GoalError, "orientation"),
    "zero orientation": (dict(goals=[goal(orientation=(0, 0, 0, 0))]), sinew.GoalError, "orientation"),
    "NaN pole": (dict(goals=[goal(pole_target=(NAN, 0, 0))]), sinew.GoalError, "pole"),
    "NaN pole angle": (dict(goals=[goal(pole_target=(1, 0, 0), pole_angle=NAN)]), sinew.GoalError, "pole"),
    "unknown bone name": (dict(goals=[goal(), goal(bone="hand")]), sinew.UnknownBoneError,
                          r'unknown bone "hand" \(effector of goal 1\)'),
    "bone index out of range": (dict(goals=[goal(bone=3)]), sinew.UnknownBoneError, r"index 3 .*effector of goal 0"),
    "pose shape": (dict(pose=np.zeros((2, 4))), sinew.ShapeError, r"\(3, 4\)"),
    "pose NaN": (dict(pose=np.full((3, 4), NAN)), sinew.NonFiniteError, "rotation"),
    "pose zero quaternion": (dict(pose=np.zeros((3, 4))), sinew.NonFiniteError, "zero length"),
    "root translation shape": (dict(root_translation=(0, 0)), sinew.ShapeError, "root_translation"),
    "root translation NaN": (dict(root_translation=(0, NAN, 0)), sinew.NonFiniteError, "root translation"),
    "root mode": (dict(root="floating"), sinew.SettingsError, "root mode"),
    "reference shape": (dict(reference=np.tile([1.0, 0, 0, 0], (2, 1))), sinew.ShapeError, r"reference.*\(3, 4\)"),
    "reference NaN": (dict(reference=np.full((3, 4), NAN)), sinew.NonFiniteError, "reference: rotation"),
    "reference zero quaternion": (dict(reference=np.zeros((3, 4))), sinew.NonFiniteError, "reference: .*zero length"),
    "reference root translation shape": (dict(reference_root_translation=(0, 0)), sinew.ShapeError,
                                         "reference_root_translation"),
    "reference root translation NaN": (dict(reference_root_translation=(0, NAN, 0)), sinew.NonFiniteError,
                                       "reference: root translation"),
}


@pytest.mark.parametrize("kwargs, error, match", BAD_SOLVES.values(), ids=BAD_SOLVES.keys())
def test_bad_solves(kwargs, error, match):
    rig = chain(3)
    kwargs.setdefault("goals", [goal()])
    with pytest.raises(error, match=match):
        sinew.Solver().solve(rig, **kwargs)
    # the same inputs in a sequence fail the same way (targets from the goals, 2 frames)
    targets = np.array([[g.target for g in kwargs["goals"]]] * 2)
    with pytest.raises(error):
        sinew.Solver().solve_sequence(rig, targets=targets, **kwargs)


BAD_SEQUENCES = {
    "targets last axis": (dict(targets=np.zeros((4, 1, 2))), sinew.ShapeError, r"\(F, 1, 3\)"),
    "targets goal count": (dict(targets=np.zeros((4, 2, 3))), sinew.ShapeError, r"\(F, 1, 3\)"),
    "targets 2-D": (dict(targets=np.zeros((4, 3))), sinew.ShapeError, "targets"),
    "orientation frames": (dict(orientations=np.zeros((3, 1, 4))), sinew.ShapeError, r"\(4, 1, 4\)"),
    "pole frames": (dict(pole_targets=np.zeros((5, 1, 3))), sinew.ShapeError, r"\(4, 1, 3\)"),
    "NaN target in frame 2": (dict(targets=np.where(np.arange(4)[:, None, None] == 2, NAN, np.ones((4, 1, 3)))),
                              sinew.GoalError, "frame 2"),
    "NaN orientation": (dict(goals=[goal(orientation=(1, 0, 0, 0))], orientations=np.full((4, 1, 4), NAN)),
                        sinew.GoalError, "goal 0: .*not finite"),
    "references frames": (dict(references=np.tile([1.0, 0, 0, 0], (3, 3, 1))), sinew.ShapeError, r"\(4, 3, 4\)"),
    "references bones": (dict(references=np.tile([1.0, 0, 0, 0], (4, 2, 1))), sinew.ShapeError, r"\(4, 3, 4\)"),
    "zero reference in frame 3": (dict(references=np.where(np.arange(4)[:, None, None] == 3, 0.0,
                                                           np.tile([1.0, 0, 0, 0], (4, 3, 1)))),
                                  sinew.NonFiniteError, r'bone "b0" at frame 3'),
    # (Scales belong to a reference pose: alone they would be read as one of the rest pose's.)
    "reference scales without a reference": (dict(reference_scales=np.ones(3)), sinew.SettingsError,
                                             "reference_scales is given without a reference pose"),
    "no reference with per-frame references": (dict(reference="least_motion", references=np.tile([1.0, 0, 0, 0], (4, 3, 1))),
                                               sinew.SettingsError, "least_motion.*references"),
}


@pytest.mark.parametrize("kwargs, error, match", BAD_SEQUENCES.values(), ids=BAD_SEQUENCES.keys())
def test_bad_sequences(kwargs, error, match):
    rig = chain(3)
    kwargs.setdefault("goals", [goal()])
    kwargs.setdefault("targets", np.ones((4, 1, 3)))
    with pytest.raises(error, match=match):
        sinew.Solver().solve_sequence(rig, **kwargs)


BAD_SOLVERS = {
    "method": (dict(method="newton"), "unknown method"),
    "zero iterations": (dict(max_iterations=0), "max_iterations"),
    "negative iterations": (dict(max_iterations=-5), "max_iterations"),
    "huge iterations": (dict(max_iterations=2**40), "max_iterations"),
    "zero tolerance": (dict(tolerance=0.0), "tolerance"),
    "NaN tolerance": (dict(tolerance=NAN), "tolerance"),
    "negative stall tolerance": (dict(stall_tolerance=-1e-3), "stall_tolerance"),
    "inf stall tolerance": (dict(stall_tolerance=INF), "stall_tolerance"),
}


@pytest.mark.parametrize("kwargs, match", BAD_SOLVERS.values(), ids=BAD_SOLVERS.keys())
def test_bad_solvers(kwargs, match):
    with pytest.raises(sinew.SettingsError, match=match):
        sinew.Solver(**kwargs)


PROBLEM = {
    "format": "sinew.problem/1",
    "bones": [{"name": "a", "head": [0, 0, 0], "tail": [0, 0, 1]},
              {"name": "b", "parent": "a", "head": [0, 0, 1], "tail": [0, 0, 2]}],
    "goals": [{"bone": "b", "target": [0.5, 0, 1.5]}],
}


def problem_with(**changes) -> str:
    d = json.loads(json.dumps(PROBLEM))
    for k, v in changes.items():
        d[k] = v
    return json.dumps(d)


BAD_FILES = {
    "not JSON": ("{", sinew.FormatError),
    "empty text": ("", sinew.FormatError),
    "wrong format tag": (problem_with(format="sinew.problem/9"), sinew.FormatError),
    "unknown field": (problem_with(colour="red"), sinew.FormatError),
    "unknown parent": (problem_with(bones=[{"name": "a", "parent": "zz", "head": [0, 0, 0], "tail": [0, 0, 1]}]),
                       sinew.UnknownBoneError),
    "parent after child": (problem_with(bones=[{"name": "a", "parent": "b", "head": [0, 0, 0], "tail": [0, 0, 1]},
                                               {"name": "b", "head": [0, 0, 1], "tail": [0, 0, 2]}]), sinew.FormatError),
    "no bones": (problem_with(bones=[], goals=[]), sinew.RigError),
    "bad limit": (problem_with(bones=[{"name": "a", "head": [0, 0, 0], "tail": [0, 0, 1],
                                       "limit": {"stiffness": 2.0}}], goals=[]), sinew.LimitError),
    "unknown goal bone": (problem_with(goals=[{"bone": "zz", "target": [0, 0, 0]}]), sinew.UnknownBoneError),
    "bad method": (problem_with(settings={"method": "newton"}), sinew.FormatError),
    "bad tolerance": (problem_with(settings={"tolerance": -1.0}), sinew.SettingsError),
    "pose shape": (problem_with(pose={"rotations": [[1, 0, 0, 0]]}), sinew.ShapeError),
}


@pytest.mark.parametrize("text, error", BAD_FILES.values(), ids=BAD_FILES.keys())
def test_bad_problem_files(text, error):
    with pytest.raises(error):
        sinew.load_problem(text)


def test_rig_from_json_reports_rig_errors_only():
    with pytest.raises(sinew.FormatError):
        sinew.Rig.from_json("[1, 2]")
    with pytest.raises(sinew.RigError):
        sinew.Rig.from_json(problem_with(bones=[], goals=[]))


def test_wrong_python_types_are_type_errors():
    """Not array-likes but wrong *types* of argument follow Python's convention."""
    rig = chain(2)
    with pytest.raises(TypeError):
        sinew.Solver().solve(rig, [1, 2])
    with pytest.raises(TypeError):
        sinew.Solver().solve("rig", [])
    with pytest.raises(TypeError):
        sinew.Rig("ab", [-1, 0], np.zeros((2, 4, 4)), [1, 1])


def test_a_rust_panic_is_an_internal_error_not_a_crash():
    import sinew._sinew as native

    for detached in (False, True):
        with pytest.raises(sinew.InternalError, match="deliberate panic"):
            native._panic_for_tests(detached)
    # the module keeps working afterwards
    assert sinew.Solver().solve(chain(3), [goal()]).reached
