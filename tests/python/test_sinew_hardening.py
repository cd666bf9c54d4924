"""Hardening: no input kills the interpreter, no finite input gives a non-finite pose, and the
sequence contract (unused orientations and poles are ignored) holds."""

from __future__ import annotations

import numpy as np
import pytest

import sinew
from sinew_py_rigs import chain

NAN = float("nan")


def finite_solution(sol) -> None:
    assert np.isfinite(sol.rotations).all()
    assert np.allclose(np.linalg.norm(sol.rotations, axis=-1), 1.0)
    assert np.isfinite(sol.root_translation).all()
    assert np.isfinite(sol.residuals).all()
    assert np.isfinite(sol.worst_residual)


@pytest.mark.parametrize("value", [2**64, 2**70, -(2**70)])
def test_chain_length_beyond_int64_is_a_goal_error(value):
    with pytest.raises(sinew.GoalError, match="chain_length"):
        sinew.Goal(2, (0, 0, 1), chain_length=value)
    g = sinew.Goal(2, (0, 0, 1))
    with pytest.raises(sinew.GoalError, match="chain_length"):
        g.chain_length = value
    assert g.chain_length == 0
    # Not an int at all is still a TypeError, as before.
    with pytest.raises(TypeError):
        sinew.Goal(2, (0, 0, 1), chain_length="3")


@pytest.mark.parametrize("value", [2**64, 2**70, -(2**70)])
def test_max_iterations_beyond_int64_is_a_settings_error(value):
    with pytest.raises(sinew.SettingsError, match="max_iterations"):
        sinew.Solver(max_iterations=value)
    assert sinew.Solver().max_iterations == 100
    assert sinew.Solver("dls", 7).max_iterations == 7


def test_sequence_result_that_cannot_be_allocated_is_a_sinew_error():
    # No goals: a (10**12, 0, 3) array holds nothing, but asks for 10**12 frames of results
    # (32 TB for one bone). This used to reserve it all up front and abort the interpreter.
    rig = chain(1)
    targets = np.zeros((10**12, 0, 3))
    with pytest.raises(sinew.ShapeError, match="cannot be allocated|more memory"):
        sinew.Solver().solve_sequence(rig, [], targets)
    # Small ones still work.
    seq = sinew.Solver().solve_sequence(rig, [], np.zeros((5, 0, 3)))
    assert seq.rotations.shape == (5, 1, 4)


def test_unused_sequence_orientations_and_poles_are_ignored():
    rig = chain(3)
    goals = [sinew.Goal(2, (0.5, 0, 2.0)), sinew.Goal(1, (0.2, 0, 1.5), chain_length=1, orientation=(1, 0, 0, 0))]
    targets = np.array([[g.target for g in goals]] * 3, dtype=float)
    orientations = np.full((3, 2, 4), NAN)
    orientations[:, 1] = (1, 0, 0, 0)  # goal 1 uses its orientation; goal 0's entries are ignored
    poles = np.zeros((3, 2, 3))  # neither goal has a pole: ignored, whatever they hold
    poles[1, 0] = NAN
    seq = sinew.Solver().solve_sequence(rig, goals, targets, orientations=orientations, pole_targets=poles)
    assert np.isfinite(seq.rotations).all() and np.isfinite(seq.residuals).all()
    zero = np.zeros((3, 2, 4))
    zero[:, 1] = (0, 0, 1, 0)
    assert len(sinew.Solver().solve_sequence(rig, goals, targets, orientations=zero)) == 3
    # A goal that has an orientation still gets its entries checked.
    orientations[2, 1] = 0.0
    with pytest.raises(sinew.GoalError, match="goal 1: orientation .*at frame 2"):
        sinew.Solver().solve_sequence(rig, goals, targets, orientations=orientations)


@pytest.mark.parametrize("method", ["fabrik", "dls", "fabrik_classic", "ccd"])
@pytest.mark.parametrize("value", [1e150, 1.4e154, 1e300, -1.7e308])
def test_huge_quaternions_give_finite_solutions(method, value):
    # (Triangulation refuses orientation goals: test_sinew_solve.py.)
    rig = chain(3)
    goal = sinew.Goal(2, (0.5, 0, 2.0), orientation=(value, 0, value, 0))
    pose = np.tile([1.0, 0, 0, 0], (3, 1))
    pose[0] = (value, 0, 0, value)
    solver = sinew.Solver(method)
    finite_solution(solver.solve(rig, [goal], pose=pose))
    seq = solver.solve_sequence(
        rig, [goal], np.array([[[0.5, 0, 2.0]]] * 2), orientations=np.array([[[value, 0, 0, value]]] * 2), pose=pose
    )
    assert np.isfinite(seq.rotations).all() and np.isfinite(seq.residuals).all()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(target=(1.35e154, 0, 1)), "target .*1e12"),
        (dict(target=(0, 0, 1e13)), "target .*1e12"),
        (dict(target=(0, 0, 1), pole_target=(1e300, 0, 0)), "pole target .*1e12"),
        (dict(target=(0, 0, 1), weight=1e300), r"weight .*\[1e-12, 1e12\]"),
        (dict(target=(0, 0, 1), weight=1e-300), r"weight .*\[1e-12, 1e12\]"),
    ],
)
def test_coordinates_and_weights_beyond_their_bounds_are_goal_errors(kwargs, match):
    with pytest.raises(sinew.GoalError, match=match):
        sinew.Solver().solve(chain(3), [sinew.Goal(2, **kwargs)])


def test_sequence_targets_beyond_the_bound_fail_before_any_frame():
    targets = np.ones((4, 1, 3))
    targets[3, 0, 1] = 1e200
    with pytest.raises(sinew.GoalError, match="goal 0: target .*1e12.* at frame 3"):
        sinew.Solver().solve_sequence(chain(3), [sinew.Goal(2, (0, 0, 1))], targets)


def test_rig_and_pose_bounds():
    with pytest.raises(sinew.NonFiniteError, match="root translation"):
        sinew.Solver().solve(chain(3), [sinew.Goal(2, (0, 0, 1))], root_translation=(1e300, 0, 0), root="free")
    with pytest.raises(sinew.NonFiniteError, match="1e12"):
        chain(3, length=1e13)
    rig = chain(3)
    with pytest.raises(sinew.LimitError, match="cone x_pos"):
        rig.set_cone_limit(1, 1e-300, 1, 1, 1)
    assert rig.limit(1)["swing"] == "free"


def test_goal_count_is_capped():
    goals = [sinew.Goal(2, (0, 0, 1))] * 257
    with pytest.raises(sinew.GoalError, match="257 goals, from goal 0 on, move bones in common .* at most 256 may"):
        sinew.Solver().solve(chain(3), goals)


def test_a_bone_that_is_its_own_parent_says_so():
    text = """{"format": "sinew.problem/1", "bones": [
        {"name": "a", "head": [0,0,0], "tail": [0,0,1]},
        {"name": "b", "parent": "b", "head": [0,0,1], "tail": [0,0,2]}]}"""
    with pytest.raises(sinew.FormatError, match='bone "b" names itself as its parent'):
        sinew.Rig.from_json(text)
