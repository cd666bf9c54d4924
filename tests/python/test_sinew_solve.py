"""Solver.solve and Solver.solve_sequence: real results, checked with forward kinematics."""

from __future__ import annotations

import json

import numpy as np
import pytest

import sinew
from sinew_py_rigs import chain, quat_angle, quat_axis_angle, y_shape
from sinew_py_wheel import REPO

IDENTITY = np.array([1.0, 0, 0, 0])


def effector(rig: sinew.Rig, rotations, root_translation=None, bone: int = -1) -> np.ndarray:
    _, tails, _ = rig.forward_kinematics(rotations, root_translation)
    return tails[bone]


def assert_bone_lengths_kept(rig: sinew.Rig, rotations, root_translation=None):
    heads, tails, _ = rig.forward_kinematics(rotations, root_translation)
    np.testing.assert_allclose(np.linalg.norm(tails - heads, axis=1), rig.lengths, atol=1e-9)
    parents = rig.parents
    # in a head-to-tail chain every head sits on its parent's tail
    for i, p in enumerate(parents):
        if p >= 0:
            np.testing.assert_allclose(heads[i], tails[p], atol=1e-9)


def test_ten_bone_chain_reaches_a_reachable_target():
    rig = chain(10)
    solver = sinew.Solver(tolerance=1e-5)
    for target in [(3.0, 4.0, 2.0), (-2.0, 1.0, 5.0), (0.5, -6.0, -3.0), (0.1, 0.0, 9.5)]:
        sol = solver.solve(rig, [sinew.Goal("b9", target)])
        assert sol.reached, (target, sol.stop_reason, sol.residuals)
        assert sol.stop_reason == "converged"
        assert sol.rotations.shape == (10, 4) and sol.rotations.dtype == np.float64
        assert sol.residuals.shape == (1,) and sol.residuals[0] <= 1e-5
        assert sol.worst_residual == sol.residuals[0]
        np.testing.assert_allclose(np.linalg.norm(sol.rotations, axis=1), 1, atol=1e-12)
        tip = effector(rig, sol.rotations)
        assert np.linalg.norm(tip - target) <= 1e-5
        assert np.linalg.norm(tip - target) == pytest.approx(sol.residuals[0], abs=1e-9)
        assert_bone_lengths_kept(rig, sol.rotations)
        np.testing.assert_array_equal(sol.root_translation, [0, 0, 0])


def test_straight_chain_reaches_a_target_on_its_own_line():
    rig = chain(10)
    sol = sinew.Solver().solve(rig, [sinew.Goal("b9", (0.0, 0.0, 9.5))])
    assert sol.reached, (sol.stop_reason, sol.residuals)


def test_unreachable_target_leaves_the_chain_pointing_at_it():
    rig = chain(10)
    target = np.array([20.0, 10.0, 5.0])
    sol = sinew.Solver().solve(rig, [sinew.Goal(9, target)])
    assert not sol.reached
    assert sol.stop_reason in ("out_of_reach", "stalled")
    heads, tails, _ = rig.forward_kinematics(sol.rotations)
    direction = target / np.linalg.norm(target)  # the root's head is at the origin
    for i in range(10):
        bone_dir = (tails[i] - heads[i]) / rig.lengths[i]
        assert np.dot(bone_dir, direction) > 1 - 1e-9, i
    assert sol.residuals[0] == pytest.approx(np.linalg.norm(target) - 10.0, abs=1e-6)


def test_pose_start_and_free_root():
    rig = chain(4)
    start = np.tile(IDENTITY, (4, 1))
    start[2] = quat_axis_angle((1, 0, 0), 0.4)
    sol = sinew.Solver().solve(rig, [sinew.Goal("b3", (1.0, 1.0, 2.5))], pose=start, root_translation=(0, 0, 0))
    assert sol.reached
    # out of reach with the root pinned, reached when it may move
    far = (0.0, 3.0, 9.0)
    pinned = sinew.Solver().solve(rig, [sinew.Goal(3, far)])
    assert not pinned.reached
    free = sinew.Solver().solve(rig, [sinew.Goal(3, far)], root="free")
    assert free.reached, free.stop_reason
    assert np.linalg.norm(free.root_translation) > 1.0
    assert np.linalg.norm(effector(rig, free.rotations, free.root_translation) - far) <= 1e-4


def test_chain_length_keeps_the_rest_still():
    rig = chain(6)
    sol = sinew.Solver().solve(rig, [sinew.Goal("b5", (1.0, 0.5, 5.0), chain_length=3)])
    assert sol.reached
    np.testing.assert_allclose(np.abs(sol.rotations[:3]), np.tile(IDENTITY, (3, 1)), atol=1e-12)


def test_head_goal():
    rig = chain(5)
    sol = sinew.Solver().solve(rig, [sinew.Goal("b4", (1.0, 1.0, 3.0), use_tail=False)])
    assert sol.reached
    heads, _, _ = rig.forward_kinematics(sol.rotations)
    assert np.linalg.norm(heads[4] - (1.0, 1.0, 3.0)) <= 1e-4


def test_orientation_goal_turns_the_effector():
    rig = chain(4)
    want = quat_axis_angle((0, 1, 0), 1.0)  # world rotation of the last bone's frame
    goal = sinew.Goal("b3", (1.0, 0.0, 2.5), orientation=want)
    sol = sinew.Solver(max_iterations=300).solve(rig, [goal])
    _, tails, world = rig.forward_kinematics(sol.rotations)
    assert np.linalg.norm(tails[3] - goal.target) <= 1e-3
    assert quat_angle(world[3], want) <= 1e-2, quat_angle(world[3], want)


def test_cone_and_twist_limits_are_never_violated():
    rng = np.random.default_rng(7)
    rig = chain(10)
    for i in range(10):
        rig.set_cone_limit(i, *rng.uniform(0.1, 0.8, size=4))
        rig.set_twist_limit(i, -rng.uniform(0.05, 0.4), rng.uniform(0.05, 0.4))
    solver = sinew.Solver(max_iterations=200)
    targets = rng.uniform(-8, 8, size=(30, 3))
    targets[:, 2] = np.abs(targets[:, 2])
    for target in targets:
        sol = solver.solve(rig, [sinew.Goal(9, target)])
        for i in range(10):
            assert rig.limit_violation(i, sol.rotations[i]) <= 1e-9, (target, i)
        assert_bone_lengths_kept(rig, sol.rotations)
    seq = solver.solve_sequence(rig, [sinew.Goal(9, targets[0])], targets[:, None, :])
    for f in range(len(targets)):
        for i in range(10):
            assert rig.limit_violation(i, seq.rotations[f, i]) <= 1e-9, (f, i)


def test_hinge_and_lock_are_respected():
    rig = chain(4)
    rig.set_hinge_limit(1, (1, 0, 0), 0.0, 2.5)
    rig.set_hinge_limit(2, (1, 0, 0), 0.0, 2.5)
    rig.set_locked(3)
    start = np.tile(IDENTITY, (4, 1))
    start[3] = quat_axis_angle((0, 0, 1), 0.3)
    sol = sinew.Solver().solve(rig, [sinew.Goal(3, (1.0, 1.0, 2.0))], pose=start)
    for i in (1, 2):
        assert rig.limit_violation(i, sol.rotations[i]) <= 1e-9
    assert quat_angle(sol.rotations[3], start[3]) <= 1e-9


def test_two_goals_on_a_tree():
    rig = y_shape()
    goals = [sinew.Goal("arm2.L", (2.5, 0.3, 4.0)), sinew.Goal("arm2.R", (-2.0, -0.5, 4.5))]
    info = sinew.analyze(rig, goals)
    assert info["sub_bases"] == [2]
    assert info["moved"][0] == [5, 4, 3, 2, 1, 0]
    assert info["moved"][1] == [8, 7, 6, 2, 1, 0]
    assert info["active"] == list(range(9))
    sol = sinew.Solver(max_iterations=300).solve(rig, goals)
    assert sol.residuals.shape == (2,)
    _, tails, _ = rig.forward_kinematics(sol.rotations)
    for g, r in zip(goals, sol.residuals):
        assert np.linalg.norm(tails[rig.index(g.bone)] - g.target) == pytest.approx(r, abs=1e-9)
    assert sol.worst_residual < 0.05, sol.residuals


def test_dls_method_solves_the_same_problems():
    rig = y_shape()
    goals = [sinew.Goal("arm2.L", (2.5, 0.3, 4.0)), sinew.Goal("arm2.R", (-2.0, -0.5, 4.5))]
    solver = sinew.Solver("dls", max_iterations=300)
    assert solver.method == "dls"
    sol = solver.solve(rig, goals)
    _, tails, _ = rig.forward_kinematics(sol.rotations)
    for g, r in zip(goals, sol.residuals):
        assert np.linalg.norm(tails[rig.index(g.bone)] - g.target) == pytest.approx(r, abs=1e-9)
    assert sol.reached, (sol.stop_reason, sol.residuals)
    assert_bone_lengths_kept(rig, sol.rotations)
    seq = solver.solve_sequence(rig, goals, np.array([[g.target for g in goals]] * 3, dtype=float))
    assert seq.rotations.shape == (3, len(rig), 4) and bool(np.all(seq.reached))


METHODS = ["fabrik", "dls", "fabrik_classic", "ccd", "triangulation"]


@pytest.mark.parametrize("method", METHODS)
def test_every_method_solves_a_chain_by_name(method):
    rig = chain(6)
    solver = sinew.Solver(method, max_iterations=2000, tolerance=1e-5)
    assert solver.method == method
    assert sinew.Solver(method.upper()).method == method
    target = (1.5, -2.0, 3.5)
    sol = solver.solve(rig, [sinew.Goal("b5", target)])
    assert sol.reached, (method, sol.stop_reason, sol.residuals)
    assert np.linalg.norm(effector(rig, sol.rotations) - target) == pytest.approx(sol.residuals[0], abs=1e-9)
    assert_bone_lengths_kept(rig, sol.rotations)
    if method == "triangulation":
        assert sol.iterations == 1
    seq = solver.solve_sequence(rig, [sinew.Goal("b5", target)], np.array([[target]] * 3, dtype=float))
    assert bool(np.all(seq.reached))


@pytest.mark.parametrize("method", ["fabrik_classic", "ccd"])
def test_classic_fabrik_and_ccd_solve_trees(method):
    rig = y_shape()
    goals = [sinew.Goal("arm2.L", (2.5, 0.3, 4.0)), sinew.Goal("arm2.R", (-2.0, -0.5, 4.5))]
    sol = sinew.Solver(method, max_iterations=2000).solve(rig, goals)
    _, tails, _ = rig.forward_kinematics(sol.rotations)
    for g, r in zip(goals, sol.residuals):
        assert np.linalg.norm(tails[rig.index(g.bone)] - g.target) == pytest.approx(r, abs=1e-9)
    assert_bone_lengths_kept(rig, sol.rotations)
    assert sol.worst_residual < 0.05, (method, sol.stop_reason, sol.residuals)


def test_triangulation_refuses_what_it_cannot_honour():
    solver = sinew.Solver("triangulation")
    two = [sinew.Goal("arm2.L", (2.5, 0.3, 4.0)), sinew.Goal("arm2.R", (-2.0, -0.5, 4.5))]
    with pytest.raises(sinew.UnsupportedError, match=r'"triangulation".*2 goals'):
        solver.solve(y_shape(), two)
    with pytest.raises(sinew.UnsupportedError, match="orientation"):
        solver.solve(chain(3), [sinew.Goal("b2", (0.5, 0.0, 2.0), orientation=(1, 0, 0, 0))])
    # A SinewError like every other, and the solver still works.
    with pytest.raises(sinew.SinewError):
        solver.solve(y_shape(), two)
    assert solver.solve(chain(3), [sinew.Goal("b2", (0.5, 0.0, 2.0))]).reached


def test_an_unknown_method_lists_every_method():
    with pytest.raises(sinew.SettingsError, match="fabrik, dls, fabrik_classic, ccd, triangulation"):
        sinew.Solver("newton")


@pytest.mark.parametrize("method", ["jacobian_transpose", "jacobian_pinv", "svd_dls", "sdls", "nlp"])
def test_the_jacobian_family_is_selectable_by_name(method):
    rig = y_shape()
    goals = [sinew.Goal("arm2.L", (2.5, 0.3, 4.0)), sinew.Goal("arm2.R", (-2.0, -0.5, 4.5))]
    solver = sinew.Solver(method, max_iterations=2000)
    assert solver.method == method
    assert sinew.Solver(method.upper()).method == method
    sol = solver.solve(rig, goals)
    _, tails, _ = rig.forward_kinematics(sol.rotations)
    for g, r in zip(goals, sol.residuals):
        assert np.linalg.norm(tails[rig.index(g.bone)] - g.target) == pytest.approx(r, abs=1e-9)
    assert sol.reached, (method, sol.stop_reason, sol.residuals)
    assert_bone_lengths_kept(rig, sol.rotations)


def circle_targets(frames: int, radius: float = 3.0, height: float = 6.0) -> np.ndarray:
    t = np.linspace(0, 2 * np.pi, frames)
    return np.stack([radius * np.cos(t), radius * np.sin(t), height + 0.5 * np.sin(3 * t)], axis=1)


def test_sequence_shapes_and_types():
    rig = y_shape()
    goals = [sinew.Goal("arm2.L", (2, 0, 4)), sinew.Goal("arm2.R", (-2, 0, 4), orientation=IDENTITY, pole_target=(0, 1, 4))]
    F = 7
    targets = np.zeros((F, 2, 3), np.float32)
    targets[:, 0] = (2, 0, 4)
    targets[:, 1] = (-2, 0, 4)
    orientations = np.tile(IDENTITY, (F, 2, 1))
    poles = np.tile([0.0, 1.0, 4.0], (F, 2, 1))
    seq = sinew.Solver().solve_sequence(rig, goals, targets, orientations=orientations, pole_targets=poles)
    assert len(seq) == F
    assert seq.rotations.shape == (F, 9, 4) and seq.rotations.dtype == np.float64
    assert seq.root_translations.shape == (F, 3)
    assert seq.residuals.shape == (F, 2)
    assert seq.iterations.shape == (F,) and seq.iterations.dtype == np.int64
    assert seq.reached.shape == (F,) and seq.reached.dtype == np.bool_
    assert len(seq.stop_reasons) == F
    assert set(seq.stop_reasons) <= {"converged", "stalled", "out_of_reach", "iteration_limit"}
    empty = sinew.Solver().solve_sequence(rig, goals, np.zeros((0, 2, 3)))
    assert len(empty) == 0 and empty.rotations.shape == (0, 9, 4)


def test_sequence_is_warm_started_frame_to_frame():
    # Without a reference ("least_motion"): each frame from the answer before.
    rig = chain(10)
    for i in range(10):
        rig.set_cone_limit(i, 0.6, 0.6, 0.6, 0.6)
    goal = sinew.Goal(9, (0, 0, 0))
    targets = circle_targets(25)
    start = np.tile(IDENTITY, (10, 1))
    start[0] = quat_axis_angle((1, 0, 0), 0.2)
    solver = sinew.Solver()
    seq = solver.solve_sequence(rig, [goal], targets[:, None, :], pose=start, reference="least_motion")
    previous = start
    for f in range(len(targets)):
        goal.target = targets[f]
        single = solver.solve(rig, [goal], pose=previous, reference="least_motion")
        np.testing.assert_allclose(seq.rotations[f], single.rotations, atol=1e-12)
        np.testing.assert_allclose(seq.residuals[f], single.residuals, atol=1e-12)
        assert seq.iterations[f] == single.iterations and seq.reached[f] == single.reached
        assert seq.stop_reasons[f] == single.stop_reason
        previous = seq.rotations[f]


def test_sequence_quaternions_are_sign_continuous():
    rig = chain(10)
    targets = circle_targets(240, radius=4.0)
    # a full turn around the chain, twice, plus a start pose in the negative hemisphere
    targets = np.concatenate([targets, targets])
    start = -np.tile(IDENTITY, (10, 1))
    seq = sinew.Solver().solve_sequence(rig, [sinew.Goal(9, targets[0])], targets[:, None, :], pose=start)
    q = seq.rotations
    dots = np.einsum("fbk,fbk->fb", q[1:], q[:-1])
    assert dots.min() >= 0.0, np.argwhere(dots < 0)[:5]
    assert np.einsum("bk,bk->b", q[0], start).min() >= 0.0
    assert seq.reached.all()


def test_sequence_root_translation_and_free_root():
    rig = chain(3)
    targets = np.array([[[0.0, 0.0, 5.0]], [[0.0, 1.0, 5.0]], [[0.0, 2.0, 5.0]]])
    seq = sinew.Solver().solve_sequence(rig, [sinew.Goal(2, (0, 0, 0))], targets, root="free")
    assert seq.reached.all()
    assert np.linalg.norm(seq.root_translations, axis=1).min() > 1.0
    for f in range(3):
        tip = effector(rig, seq.rotations[f], seq.root_translations[f])
        assert np.linalg.norm(tip - targets[f, 0]) <= 1e-4


def test_goal_attributes_read_and_write():
    g = sinew.Goal("hand", np.array([1, 2, 3], np.float32))
    assert g.bone == "hand" and g.target == (1.0, 2.0, 3.0)
    assert g.orientation is None and g.pole_target is None
    assert (g.weight, g.chain_length, g.pole_angle, g.use_tail) == (1.0, 0, 0.0, True)
    g.bone = 4
    g.target = [4, 5, 6]
    g.orientation = (1, 0, 0, 0)
    g.pole_target = np.zeros(3)
    g.weight, g.chain_length, g.pole_angle, g.use_tail = 2.0, 3, 0.5, False
    assert (g.bone, g.target, g.orientation, g.pole_target) == (4, (4.0, 5.0, 6.0), (1.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    assert (g.weight, g.chain_length, g.pole_angle, g.use_tail) == (2.0, 3, 0.5, False)
    g.orientation = None
    assert g.orientation is None
    c = g.copy()
    c.target = (0, 0, 0)
    assert g.target == (4.0, 5.0, 6.0)
    assert "Goal(4" in repr(g)


def test_solver_settings_are_readable():
    s = sinew.Solver("FABRIK", max_iterations=7, tolerance=1e-3, stall_tolerance=0.0)
    assert (s.method, s.max_iterations, s.tolerance, s.stall_tolerance) == ("fabrik", 7, 1e-3, 0.0)
    sol = s.solve(chain(10), [sinew.Goal(9, (20.0, 20.0, 20.0))])
    assert sol.iterations <= 7


def test_a_files_reference_comes_as_solve_keywords():
    """``sinew.load_reference`` gives a file's reference as ``Solver.solve``'s keyword arguments:
    the paper models ask for none, a file without one gets the rest pose, and a pose (normalised,
    with its root translation) solves as the file's numbers passed by hand."""
    paper = (REPO / "tests" / "data" / "paper_chain10.json").read_text()
    assert sinew.load_reference(paper) == {"reference": "least_motion"}
    doc = json.loads(paper)
    del doc["reference"]
    assert sinew.load_reference(json.dumps(doc)) == {"reference": "rest"}
    n = len(doc["bones"])
    rotations = _bent(n, 0.1)
    doc["reference"] = {"rotations": (2.0 * rotations).tolist(), "root_translation": [1.0, 2.0, 3.0]}
    kwargs = sinew.load_reference(json.dumps(doc))
    assert set(kwargs) == {"reference", "reference_root_translation"}
    np.testing.assert_allclose(kwargs["reference"], rotations, atol=1e-15)  # normalised
    assert kwargs["reference_root_translation"].tolist() == [1.0, 2.0, 3.0]
    rig, goals, solver, pose, root_t, root = sinew.load_problem(json.dumps(doc))
    by_file = solver.solve(rig, goals, pose=pose, root_translation=root_t, root=root, **kwargs)
    by_hand = solver.solve(rig, goals, pose=pose, root_translation=root_t, root=root, reference=2.0 * rotations,
                           reference_root_translation=(1.0, 2.0, 3.0))
    assert np.array_equal(by_file.rotations, by_hand.rotations)
    with pytest.raises(sinew.FormatError):
        sinew.load_reference(paper.replace('"least_motion"', '"none"'))


PROBLEM_FILES = sorted((REPO / "tests" / "data").glob("*.json"))


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=[p.name for p in PROBLEM_FILES])
def test_shared_problem_files_solve_within_their_limits(path):
    text = path.read_text()
    if json.loads(text).get("format") != "sinew.problem/1":
        pytest.skip("not a problem file")
    rig, goals, solver, pose, root_translation, root = sinew.load_problem(text)
    sol = solver.solve(rig, goals, pose=pose, root_translation=root_translation, root=root,
                       **sinew.load_reference(text))
    assert sol.residuals.shape == (len(goals),)
    assert np.isfinite(sol.rotations).all()
    for i in range(len(rig)):
        assert rig.limit_violation(i, sol.rotations[i]) <= 1e-9


def _bent(n: int, phase: float = 0.0) -> np.ndarray:
    """A pose of n bones, each bent a little about a different axis."""
    return np.array([quat_axis_angle((1.0, 0.5 * np.sin(i + phase), 0.3), 0.15 + 0.02 * i + phase) for i in range(n)])


def test_a_reference_pose_is_kept_where_the_goals_leave_it_free():
    rig = chain(6)
    reference = _bent(6)
    target = effector(rig, reference)
    solver = sinew.Solver(tolerance=1e-6)
    sol = solver.solve(rig, [sinew.Goal("b5", target)], reference=reference)
    assert sol.reached
    worst = max(quat_angle(a, b) for a, b in zip(sol.rotations, reference))
    assert worst < 1e-3, worst
    # Without it the chain reaches the same target in another shape (the rest pose's way).
    plain = solver.solve(rig, [sinew.Goal("b5", target)])
    assert plain.reached
    assert max(quat_angle(a, b) for a, b in zip(plain.rotations, reference)) > 1e-2
    # A reference given as a list of lists, not normalised, is the same reference.
    again = solver.solve(rig, [sinew.Goal("b5", target)], reference=(3.0 * reference).tolist())
    np.testing.assert_allclose(again.rotations, sol.rotations, atol=1e-12)


def test_orientation_residuals_are_the_angles_left():
    rig = chain(4)
    want = quat_axis_angle((0, 1, 0), 1.0)
    goals = [sinew.Goal("b3", (1.0, 0.0, 2.5), orientation=want)]
    sol = sinew.Solver(max_iterations=3).solve(rig, goals)
    assert sol.orientation_residuals.shape == (1,) and sol.orientation_residuals.dtype == np.float64
    _, _, world = rig.forward_kinematics(sol.rotations)
    assert sol.orientation_residuals[0] == pytest.approx(quat_angle(world[3], want), abs=1e-9)
    assert sol.worst_orientation_residual == sol.orientation_residuals[0]
    # Unreachable orientation (the chain's reach forbids it with the target): not reached.
    # A position goal has no orientation residual.
    pos = sinew.Solver().solve(rig, [sinew.Goal("b3", (1.0, 0.0, 2.5))])
    np.testing.assert_array_equal(pos.orientation_residuals, [0.0])
    assert pos.worst_orientation_residual == 0.0
    none = sinew.Solver().solve(rig, [])
    assert none.orientation_residuals.shape == (0,) and none.worst_orientation_residual == 0.0
    # An orientation goal far from met is not reached even when its position is.
    flipped = quat_axis_angle((1, 0, 0), np.pi)
    tip = effector(rig, np.tile(IDENTITY, (4, 1)))
    sol = sinew.Solver(max_iterations=2).solve(rig, [sinew.Goal("b3", tip, orientation=flipped, chain_length=1)])
    # (One bone cannot both keep its tail there and turn half over: whichever it gives up, the
    # goal is not reached.)
    assert sol.worst_orientation_residual > 0.1 or sol.worst_residual > 0.1
    assert not sol.reached


def test_sequence_follows_a_reference_per_frame():
    rig = chain(6)
    frames = 5
    references = np.array([_bent(6, 0.05 * f) for f in range(frames)])
    targets = np.array([[effector(rig, r)] for r in references])
    goals = [sinew.Goal("b5", targets[0, 0])]
    solver = sinew.Solver(tolerance=1e-6)
    seq = solver.solve_sequence(rig, goals, targets, references=references)
    assert seq.reached.all()
    for f in range(frames):
        worst = max(quat_angle(a, b) for a, b in zip(seq.rotations[f], references[f]))
        assert worst < 1e-3, (f, worst)
    assert seq.orientation_residuals.shape == (frames, 1)
    np.testing.assert_array_equal(seq.orientation_residuals, 0.0)
    # Without references every frame falls back to the rest pose's way: another shape.
    plain = solver.solve_sequence(rig, goals, targets)
    assert max(quat_angle(a, b) for a, b in zip(plain.rotations[-1], references[-1])) > 1e-2
    # One reference for every frame is `reference`; `references` with that pose in every
    # frame is the same thing.
    one = solver.solve_sequence(rig, goals, targets, reference=references[2])
    tiled = solver.solve_sequence(rig, goals, targets, references=np.tile(references[2], (frames, 1, 1)))
    np.testing.assert_allclose(one.rotations, tiled.rotations, atol=1e-12)


def test_sequence_pins_the_root_at_each_frame_s_translation():
    # A keyed root that walks: one call, each frame solved as a single solve from that frame's
    # reference with the pinned root (and the reference's root) at that frame's translation.
    rig = chain(6)
    frames = 6
    roots = np.array([(1.0 * f, 0.0, 0.1 * f) for f in range(frames)])
    references = np.array([_bent(6, 0.05 * f) for f in range(frames)])
    targets = np.array([[effector(rig, r, roots[f])] for f, r in enumerate(references)])
    goals = [sinew.Goal("b5", targets[0, 0])]
    solver = sinew.Solver(tolerance=1e-6)
    seq = solver.solve_sequence(rig, goals, targets, references=references, root_translations=roots)
    assert seq.reached.all()
    np.testing.assert_array_equal(seq.root_translations, roots)
    by_frame = sinew.Solver(tolerance=1e-6)
    for f in range(frames):
        sol = by_frame.solve(rig, [sinew.Goal("b5", targets[f, 0])], pose=references[f], root_translation=roots[f],
                             reference=references[f], reference_root_translation=roots[f])
        np.testing.assert_array_equal(seq.rotations[f], sol.rotations)
    # Without them the pinned root stays where the first frame has it: the walked-away targets
    # are missed.
    assert not solver.solve_sequence(rig, goals, targets, references=references).reached[-1]
    with pytest.raises(sinew.ShapeError):
        solver.solve_sequence(rig, goals, targets, root_translations=roots[1:])
    bad = roots.copy()
    bad[2, 1] = np.nan
    with pytest.raises(sinew.NonFiniteError, match="frame 2"):
        solver.solve_sequence(rig, goals, targets, root_translations=bad)


def test_sequence_follows_the_root_bone_s_rest_per_frame():
    # An animated bone above the chain: its rest matrix per frame (root_rests), one call, each
    # frame solved as a single solve from its reference on the rig with its root moved there
    # (Rig.set_root_rest): to the bit; and, to round-off, as on a rig built from that frame's
    # rest matrices.
    rig = chain(5)
    frames = 6
    rests = rig.rest_matrices
    movers = []
    for f in range(frames):
        c, s_ = np.cos(0.05 * f), np.sin(0.05 * f)
        m = np.array([[1, 0, 0, 0.2 * f], [0, c, -s_, 0], [0, s_, c, 0.1 * f], [0, 0, 0, 1.0]])
        movers.append(m)
    references = np.array([_bent(5, 0.05 * f) for f in range(frames)])
    rigs = [sinew.Rig(rig.names, rig.parents, np.array([m @ r for r in rests]), rig.lengths) for m in movers]
    targets = np.array([[effector(rigs[f], references[f])] for f in range(frames)])
    goals = [sinew.Goal("b4", targets[0, 0], chain_length=4)]
    solver = sinew.Solver(tolerance=1e-6)
    root_rests = np.array([[m @ rests[0]] for m in movers])
    seq = solver.solve_sequence(rig, goals, targets, references=references, root_rests=root_rests)
    assert seq.reached.all()
    by_frame = sinew.Solver(tolerance=1e-6)
    for f in range(frames):
        frame_goals = [sinew.Goal("b4", targets[f, 0], chain_length=4)]
        moved = rig.copy()
        moved.set_root_rest(0, root_rests[f, 0])
        sol = by_frame.solve(moved, frame_goals, pose=references[f], reference=references[f])
        np.testing.assert_array_equal(seq.rotations[f], sol.rotations)
        # (The rebuilt rig's rests relative to their parents differ from the moved rig's by
        # round-off.)
        rebuilt = by_frame.solve(rigs[f], frame_goals, pose=references[f], reference=references[f])
        np.testing.assert_allclose(seq.rotations[f], rebuilt.rotations, atol=1e-7)
    assert not solver.solve_sequence(rig, goals, targets, references=references).reached[-1]
    with pytest.raises(sinew.ShapeError):
        solver.solve_sequence(rig, goals, targets, root_rests=root_rests[1:])
    skewed = root_rests.copy()
    skewed[2, 0, 0, 0] = 2.0
    with pytest.raises(sinew.RigError):
        solver.solve_sequence(rig, goals, targets, root_rests=skewed)
    # Rig.set_root_rest refuses what the sequence refuses, and changes nothing then.
    before = rig.rest_matrices
    with pytest.raises(sinew.RigError):
        rig.set_root_rest(0, skewed[2, 0])
    with pytest.raises(sinew.RigError):
        rig.set_root_rest("b1", root_rests[0, 0])
    np.testing.assert_array_equal(rig.rest_matrices, before)


def test_sequence_orientation_residuals_match_single_solves():
    rig = y_shape()
    goals = [sinew.Goal("arm2.L", (2, 0, 4)), sinew.Goal("arm2.R", (-2, 0, 4), orientation=IDENTITY)]
    F = 3
    targets = np.array([[(2.0, 0.1 * f, 4.0), (-2.0, 0.0, 4.0 + 0.1 * f)] for f in range(F)])
    orientations = np.tile(quat_axis_angle((0, 0, 1), 0.8), (F, 2, 1))
    seq = sinew.Solver().solve_sequence(rig, goals, targets, orientations=orientations)
    assert seq.orientation_residuals.shape == (F, 2)
    np.testing.assert_array_equal(seq.orientation_residuals[:, 0], 0.0)
    for f in range(F):
        _, _, world = rig.forward_kinematics(seq.rotations[f])
        bone = rig.names.index("arm2.R")
        # (quat_angle goes through acos: near zero it is good to about 1e-8.)
        assert seq.orientation_residuals[f, 1] == pytest.approx(quat_angle(world[bone], orientations[f, 1]), abs=1e-7)


def test_methods_lists_every_method_the_solver_accepts():
    names = sinew.methods()
    assert isinstance(names, list) and len(names) == len(set(names))
    assert {"fabrik", "dls"} <= set(names)
    rig = chain(4)
    for name in names:
        solver = sinew.Solver(method=name)
        assert solver.method == name
        assert solver.solve(rig, [sinew.Goal("b3", (1.0, 1.0, 1.0))]).reached, name
    with pytest.raises(sinew.SinewError, match="fabrik"):
        sinew.Solver(method="not-a-method")


@pytest.mark.parametrize("method", ["nlp", "fabrik", "dls"])
def test_goal_kinds_are_met_and_read_back(method):
    """Every goal kind reaches Python: a line, plane, half-space, aim and orientation-only goal on
    a bent chain are each met (checked here with forward kinematics), and the goal reads back its
    kind and vector."""
    rig = chain(4)
    bent = np.array([[np.cos(0.2), 0, 0, np.sin(0.2)], [np.cos(0.25), np.sin(0.25), 0, 0]] * 2)
    heads, tails, rots = rig.forward_kinematics(bent)
    solver = sinew.Solver(method, max_iterations=500, tolerance=1e-5)
    rest = np.tile(IDENTITY, (4, 1))
    # The rest chain is straight (singular for a line along it): start from a bent pose, with no
    # reference (the rest pose, the default, would start the methods that step from it on the line).
    start = np.array([[np.cos(0.05), np.sin(0.05), 0, 0]] * 4)

    line = sinew.Goal("b3", tails[3] + (0, 0, 0.5), kind="line", direction=(0, 0, 3))
    assert line.kind == "line" and line.direction == (0, 0, 3) and line.normal is None and line.axis is None
    sol = solver.solve(rig, [line], pose=start, reference="least_motion")
    tip = effector(rig, sol.rotations)
    off = tip - line.target
    assert sol.reached and np.linalg.norm(off - np.array([0, 0, 1.0]) * off[2]) <= 1e-5

    plane = sinew.Goal("b3", (0, 0, 0.8), kind="plane", normal=(0, 0, 1))
    sol = solver.solve(rig, [plane], pose=start, reference="least_motion")
    assert sol.reached and abs(effector(rig, sol.rotations)[2] - 0.8) <= 1e-5

    # The tip (near z = 4) must come down to z <= 2.
    half = sinew.Goal("b3", (0, 0, 2.0), kind="half_space", normal=(0, 0, -1))
    sol = solver.solve(rig, [half], pose=start, reference="least_motion")
    assert sol.reached and effector(rig, sol.rotations)[2] <= 2.0 + 1e-5

    aim = sinew.Goal("b3", (2.0, 3.0, 1.0), kind="aim")
    assert aim.axis == (0, 1, 0)
    sol = solver.solve(rig, [aim], pose=start, reference="least_motion")
    h, t, _ = rig.forward_kinematics(sol.rotations)
    along, wanted = t[3] - h[3], np.array(aim.target) - h[3]
    cos = along @ wanted / np.linalg.norm(along) / np.linalg.norm(wanted)
    assert sol.reached and cos >= np.cos(1e-5)

    turn = sinew.Goal("b3", (0, 0, 0), orientation=rots[3], kind="orientation")
    sol = solver.solve(rig, [turn], pose=rest)
    _, _, got = rig.forward_kinematics(sol.rotations)
    assert sol.reached and quat_angle(got[3], rots[3]) <= 1e-5
    # (quat_angle goes through acos: near zero it is good to about 1e-7 here.)
    assert sol.orientation_residuals[0] == pytest.approx(quat_angle(got[3], rots[3]), abs=1e-6)


def test_bad_goal_kinds_are_goal_errors():
    with pytest.raises(sinew.GoalError, match="unknown goal kind"):
        sinew.Goal(0, (0, 0, 0), kind="cone")
    with pytest.raises(sinew.GoalError, match="a plane goal needs a normal"):
        sinew.Goal(0, (0, 0, 0), kind="plane")
    with pytest.raises(sinew.GoalError, match="a line goal has no normal"):
        sinew.Goal(0, (0, 0, 0), kind="line", normal=(0, 0, 1))
    rig = chain(2)
    with pytest.raises(sinew.GoalError, match="needs an orientation"):
        sinew.Solver().solve(rig, [sinew.Goal(1, (0, 0, 0), kind="orientation")])
    with pytest.raises(sinew.GoalError, match="must be finite and nonzero"):
        sinew.Solver().solve(rig, [sinew.Goal(1, (0, 0, 0), kind="plane", normal=(0, 0, 0))])


def test_goal_errors_measure_a_given_pose_as_the_solver_does():
    """Goal.errors gives, for a pose the caller has, what a solution reports as its residuals."""
    rig = chain(4)
    solver = sinew.Solver("fabrik", max_iterations=3)
    start = np.array([[np.cos(0.1), np.sin(0.1), 0, 0]] * 4)
    goals = [sinew.Goal("b3", (0.5, 0.2, 2.0), kind="plane", normal=(0, 1, 1)),
             sinew.Goal("b3", (1.0, 1.0, 1.0), kind="line", direction=(0, 0, 2)),
             sinew.Goal("b3", (0, 0, 3.0), kind="half_space", normal=(0, 0, -1)),
             sinew.Goal("b3", (1.0, 2.0, 3.0), orientation=(0.9, 0.1, 0.3, 0.2)),
             sinew.Goal("b3", (2.0, 1.0, 0.5), kind="aim")]
    for goal in goals:
        sol = solver.solve(rig, [goal], pose=start)
        heads, tails, rots = rig.forward_kinematics(sol.rotations)
        d, a = goal.errors(heads[3], rots[3], tails[3])
        assert d == pytest.approx(sol.residuals[0], abs=1e-12), goal
        assert a == pytest.approx(sol.orientation_residuals[0], abs=1e-12), goal
    with pytest.raises(sinew.GoalError, match="finite and nonzero"):
        sinew.Goal(0, (0, 0, 0), kind="plane", normal=(0, 0, 0)).errors((0, 0, 0), (1, 0, 0, 0), (0, 1, 0))



def test_the_rest_pose_is_the_default_reference():
    """Without a reference argument a solve falls back to the rest pose (issue #13): the same
    answer as ``reference="rest"`` and as explicit identity rotations, whatever the start, and a
    sequence solves each frame as that single solve. ``reference="least_motion"`` asks for none:
    its answer is where the steps lead from the start, so two starts give two answers."""
    rig = y_shape()
    n = len(rig)
    heads, tails, _ = rig.forward_kinematics(np.array([_bent(n, 0.1)[i] for i in range(n)]))
    goals = [sinew.Goal(n // 2 - 1, tails[n // 2 - 1]), sinew.Goal(n - 1, tails[n - 1])]
    starts = [np.tile(IDENTITY, (n, 1)), _bent(n, -0.2)]
    solver = sinew.Solver(max_iterations=1000)
    default = [solver.solve(rig, goals, pose=s) for s in starts]
    for s, d in zip(starts, default):
        assert d.reached
        for reference in ["rest", np.tile(IDENTITY, (n, 1))]:
            other = solver.solve(rig, goals, pose=s, reference=reference)
            assert np.array_equal(other.rotations, d.rotations)
    active = sinew.analyze(rig, goals)["active"]  # (bones no goal moves keep their start's)

    def apart(a, b):
        return max(quat_angle(a.rotations[i], b.rotations[i]) for i in active)

    assert apart(default[0], default[1]) < 1e-3
    least = [solver.solve(rig, goals, pose=s, reference="least_motion") for s in starts]
    assert all(sol.reached for sol in least)
    assert apart(least[0], least[1]) > 1e-2
    # A sequence's frames are the single solve from the rest pose (to the bit, up to sign).
    targets = np.array([[g.target for g in goals]] * 3)
    seq = solver.solve_sequence(rig, goals, targets, pose=starts[1])
    for f in range(3):
        dots = np.einsum("ni,ni->n", seq.rotations[f], default[0].rotations)
        assert np.array_equal(np.where(dots[:, None] < 0, -seq.rotations[f], seq.rotations[f]), default[0].rotations)
    with pytest.raises(sinew.SettingsError, match="not \"rest\", \"least_motion\""):
        solver.solve(rig, goals, reference="none")
    with pytest.raises(sinew.SettingsError, match="named reference"):
        solver.solve(rig, goals, reference="least_motion", reference_scales=np.ones(n))

_THREADED_SEQUENCE = """
import sys
import numpy as np
sys.path[:0] = sys.argv[1:]
import test_sinew_solve as t
rig = t.chain(8)
rig.set_cone_limit("b3", 0.3, 0.3, 0.3, 0.3)
frames = 48
references = np.array([t._bent(8, 0.05 * f) for f in range(frames)])
phase = np.linspace(0.0, 2.0 * np.pi, frames)
targets = np.array([[t.effector(rig, references[f]) + 0.8 * np.array([np.sin(p), 0.0, 1.0 - np.cos(p)])]
                    for f, p in enumerate(phase)])
seq = t.sinew.Solver().solve_sequence(rig, [t.sinew.Goal("b7", targets[0, 0])], targets, references=references)
sys.stdout.write(np.asarray(seq.rotations, dtype=np.float64).tobytes().hex())
"""


@pytest.mark.parametrize("threads", ["1", "3"])
def test_sequence_answers_do_not_depend_on_threads(threads):
    # A sequence with a reference solves its frames side by side; SINEW_THREADS caps the threads
    # (1: the calling thread alone) and changes no answer, to the bit.
    import os
    import subprocess
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    paths = [here, *[p for p in sys.path if p]]

    def run(env_threads):
        env = {k: v for k, v in os.environ.items() if k != "SINEW_THREADS"}
        if env_threads is not None:
            env["SINEW_THREADS"] = env_threads
        out = subprocess.run([sys.executable, "-c", _THREADED_SEQUENCE, *paths], env=env, check=True,
                             capture_output=True, text=True)
        return out.stdout

    machine = run(None)
    assert len(machine) > 0
    assert run(threads) == machine


def test_a_sequence_s_reference_root_is_the_start_s_with_or_without_reference_scales():
    # With per-frame references and a free root, each frame's reference root is the start's
    # where no reference_root_translation is given; passing the default reference_scales (all 1)
    # changes nothing (it used to put the reference root at the origin).
    rig = chain(3)
    rng = np.random.default_rng(5)
    frames = 6
    targets = np.array([[[0.3 * np.sin(f), 2.2, 0.4]] for f in range(frames)])
    references = np.tile([1.0, 0.0, 0.0, 0.0], (frames, 3, 1)) + 0.05 * rng.standard_normal((frames, 3, 4))
    kw = dict(root="free", root_translation=(1.0, -1.0, 0.5), references=references)
    plain = sinew.Solver().solve_sequence(rig, [sinew.Goal("b2", targets[0, 0])], targets, **kw)
    scaled = sinew.Solver().solve_sequence(rig, [sinew.Goal("b2", targets[0, 0])], targets,
                                             reference_scales=np.ones(3), **kw)
    assert np.array_equal(np.asarray(plain.rotations), np.asarray(scaled.rotations))
    assert np.array_equal(np.asarray(plain.root_translations), np.asarray(scaled.root_translations))


_LONG_SEQUENCE = """
import sys
import numpy as np
sys.path[:0] = sys.argv[1:]
import test_sinew_solve as t
rig = t.chain(16)
for b in range(16):
    rig.set_cone_limit(f"b{b}", 0.25, 0.25, 0.25, 0.25)
frames = 200000
reference = t._bent(16)
reach = t.effector(rig, reference)
phase = np.linspace(0.0, 100.0 * np.pi, frames)
targets = (reach + 0.5 * np.stack([np.sin(phase), np.zeros(frames), 1.0 - np.cos(phase)], axis=1))[:, None, :]
print("started", flush=True)
t.sinew.Solver().solve_sequence(rig, [t.sinew.Goal("b15", targets[0, 0])], targets, reference=reference)
"""


def test_ctrl_c_stops_a_long_sequence():
    # Ctrl-C during solve_sequence raises KeyboardInterrupt as the frames come in (the solve runs
    # with the GIL released, and used to run to its last frame first: the whole range takes 53 s
    # on this project's 2-core machine). The interrupt is sent half a second after the range
    # starts; the process must end within 20 s of it (here it ends well within a second).
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    paths = [here, *[p for p in sys.path if p]]
    proc = subprocess.Popen([sys.executable, "-c", _LONG_SEQUENCE, *paths], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail("solve_sequence went on for 20 s after Ctrl-C")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]
