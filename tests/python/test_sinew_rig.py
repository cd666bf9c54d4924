"""sinew.Rig: construction from Blender-style matrices, limits, forward kinematics, JSON."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

import sinew
from sinew_py_rigs import build, chain, matrix, quat_axis_angle, quat_mul

TWO_BONES = json.dumps(
    {
        "format": "sinew.problem/1",
        "bones": [
            {"name": "upper", "head": [0, 0, 0], "tail": [0, 0, 1]},
            {"name": "lower", "parent": "upper", "head": [0, 0, 1], "tail": [0, 0, 2],
             "limit": {"swing": {"cone": {"x_pos": 0.5, "x_neg": 0.4, "z_pos": 1.0, "z_neg": 0.9}},
                       "twist": {"min": -0.1, "max": 0.2}}},
        ],
        "goals": [{"bone": "lower", "target": [0.5, 0, 1.5], "chain_length": 2, "weight": 2.0,
                   "pole": {"target": [1, 1, 1], "angle": 0.25}, "orientation": [1, 0, 0, 0]}],
        "root": "free",
        "settings": {"method": "fabrik", "max_iterations": 50, "tolerance": 0.001},
        "pose": {"rotations": [[1, 0, 0, 0], [0.0, 0, 0, 1]], "root_translation": [0.1, 0.2, 0.3]},
    }
)


def test_names_parents_lengths_and_rest_matrices_round_trip():
    bones = [
        ("hips", -1, (0, 0, 1), (0, 0, 1.2), 0.0),
        ("spine", 0, (0, 0, 1.2), (0, 0.05, 1.6), 0.3),
        ("thigh.L", 0, (0.1, 0, 1.0), (0.12, 0, 0.55), -0.2),
    ]
    rig = build(bones)
    assert len(rig) == 3
    assert rig.names == ["hips", "spine", "thigh.L"]
    assert rig.parents == [-1, 0, 0]
    assert rig.index("thigh.L") == 2
    np.testing.assert_allclose(rig.lengths, [0.2, np.hypot(0.05, 0.4), np.hypot(0.02, 0.45)], atol=1e-12)
    expected = np.array([matrix(b[2], b[3], b[4]) for b in bones])
    assert rig.rest_matrices.shape == (3, 4, 4)
    np.testing.assert_allclose(rig.rest_matrices, expected, atol=1e-12)


def test_rest_fk_puts_heads_and_tails_where_the_matrices_say():
    rig = chain(5)
    heads, tails, rots = rig.forward_kinematics(np.tile([1.0, 0, 0, 0], (5, 1)))
    np.testing.assert_allclose(heads[:, 2], np.arange(5), atol=1e-12)
    np.testing.assert_allclose(tails[:, 2], np.arange(1, 6), atol=1e-12)
    np.testing.assert_allclose(heads[:, :2], 0, atol=1e-12)
    assert rots.shape == (5, 4)
    np.testing.assert_allclose(np.linalg.norm(rots, axis=1), 1, atol=1e-12)
    # rotations=None is the rest pose
    h2, t2, r2 = rig.forward_kinematics()
    np.testing.assert_allclose(t2, tails, atol=1e-12)


def test_fk_follows_blender_local_rotation_convention():
    rig = chain(3)  # up +Z; local +Y of every bone is world +Z
    rot = np.tile([1.0, 0, 0, 0], (3, 1))
    rot[1] = quat_axis_angle((1, 0, 0), np.pi / 2)  # local X: tilts the bone's +Y toward its +Z
    heads, tails, _ = rig.forward_kinematics(rot)
    # Bone 1 (and bone 2 with it) now points along bone 1's local +Z in world space.
    world_rest = rig.rest_matrices[1][:3, :3]
    direction = world_rest @ np.array([0, 0, 1.0])
    np.testing.assert_allclose(tails[1] - heads[1], direction, atol=1e-12)
    np.testing.assert_allclose(tails[2] - heads[2], direction, atol=1e-12)
    # root translation moves bone 0's head in its rest frame
    h, _, _ = rig.forward_kinematics(rot, root_translation=(0, 1.0, 0))
    np.testing.assert_allclose(h[0], rig.rest_matrices[0][:3, :3] @ [0, 1.0, 0], atol=1e-12)


def test_world_rotations_compose_rest_and_local():
    rig = chain(4)
    rng = np.random.default_rng(1)
    q = rng.normal(size=(4, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    heads, tails, world = rig.forward_kinematics(q)
    # the bone direction is world rotation applied to +Y, scaled by the length
    for i in range(4):
        w, x, y, z = world[i]
        y_axis = np.array([2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x)])
        np.testing.assert_allclose(tails[i] - heads[i], y_axis * rig.lengths[i], atol=1e-12)
    # quaternion sign does not matter
    _, tails_neg, _ = rig.forward_kinematics(-q)
    np.testing.assert_allclose(tails_neg, tails, atol=1e-12)


def test_float32_and_integer_inputs_are_accepted():
    rig64 = chain(4)
    rig32 = chain(4, dtype=np.float32)
    np.testing.assert_allclose(rig32.rest_matrices, rig64.rest_matrices, atol=1e-6)
    ints = sinew.Rig(["a", "b"], np.array([-1, 0], dtype=np.int32), np.stack([np.eye(4), matrix((0, 1, 0), (0, 2, 0))]).astype(np.float32), [1, 1])
    assert ints.parents == [-1, 0]
    rot32 = np.tile(np.array([1, 0, 0, 0], np.float32), (4, 1))
    _, t, _ = rig64.forward_kinematics(rot32, np.zeros(3, np.float32))
    assert t.dtype == np.float64
    # non-contiguous views work too
    big = np.tile([1.0, 0, 0, 0, 9, 9, 9, 9], (4, 1))[:, :4]
    assert not big.flags["C_CONTIGUOUS"]
    rig64.forward_kinematics(big)


def test_stiffness_per_axis():
    rig = chain(4)
    rig.set_stiffness(1, 0.1, 0.5, 0.0)
    lim = rig.limit(1)
    assert lim["stiffness_axes"] == (0.1, 0.5, 0.0) and lim["stiffness"] == 0.5
    rig.set_stiffness(1, 0.3)  # one value: every axis again
    assert rig.limit(1)["stiffness_axes"] == (0.3, 0.3, 0.3)
    with pytest.raises(sinew.LimitError, match="stiffness y"):
        rig.set_stiffness(1, 0.1, 1.0, 0.0)
    with pytest.raises(sinew.LimitError):
        rig.set_stiffness(1, 0.1, float("nan"), 0.0)
    assert rig.limit(1)["stiffness_axes"] == (0.3, 0.3, 0.3)  # nothing changed
    with pytest.raises(TypeError):
        rig.set_stiffness(1, 0.1, 0.2)


def test_limits_set_read_and_clear():
    rig = chain(4)
    rig.set_cone_limit(1, 0.5, 0.4, 0.3, 0.2)
    rig.set_twist_limit("b1", -0.1, 0.2)
    rig.set_stiffness(1, 0.25)
    assert rig.limit(1) == {
        "swing": "cone", "cone": (0.5, 0.4, 0.3, 0.2), "cone_shape": "rotation_vector", "twist": (-0.1, 0.2),
        "hinge": None,
        "locked": False, "stiffness": 0.25, "stiffness_axes": (0.25, 0.25, 0.25), "stretch": 0.0,
    }
    rig.set_hinge_limit("b2", (2.0, 0, 0), -0.5, 2.0)
    lim = rig.limit(2)
    assert lim["swing"] == "hinge" and lim["cone"] is None
    assert lim["hinge"] == ((1.0, 0.0, 0.0), -0.5, 2.0)  # axis normalised
    rig.set_locked(3)
    assert rig.limit(3)["locked"] is True
    rig.set_locked(3, False)
    assert rig.limit(3)["locked"] is False
    rig.clear_limits(1)
    assert rig.limit(1) == {"swing": "free", "cone": None, "cone_shape": None, "twist": None, "hinge": None,
                            "locked": False, "stiffness": 0.0, "stiffness_axes": (0.0, 0.0, 0.0), "stretch": 0.0}
    assert rig.limit(np.int64(0))["swing"] == "free"  # numpy integers name bones too


def test_blender_cone_mapping_including_zero_bounds():
    rig = chain(2)
    rig.set_cone_limit_blender(1, -0.3, 0.5, -0.7, 0.9)
    assert rig.limit(1)["cone"] == (0.5, 0.3, 0.9, 0.7)
    assert rig.limit(1)["cone_shape"] == "blender"
    rig.set_cone_limit_blender(1, 0.0, 0.5, -0.7, 0.0)  # Blender allows a zero bound
    x_pos, x_neg, z_pos, z_neg = rig.limit(1)["cone"]
    assert (x_pos, z_neg) == (0.5, 0.7) and 0 < x_neg <= 1e-6 and 0 < z_pos <= 1e-6
    # A swing toward the zero side is (almost) all violation.
    assert rig.limit_violation(1, quat_axis_angle((1, 0, 0), -0.4)) == pytest.approx(0.4, abs=1e-5)


def test_limit_violation_is_zero_inside_and_the_angle_outside():
    rig = chain(2)
    rig.set_cone_limit(1, 0.5, 0.5, 0.5, 0.5)
    rig.set_twist_limit(1, -0.2, 0.2)
    assert rig.limit_violation(1, quat_axis_angle((1, 0, 0), 0.3)) == 0.0
    assert rig.limit_violation(1, quat_axis_angle((1, 0, 0), 0.8)) == pytest.approx(0.3, abs=1e-9)
    assert rig.limit_violation(1, quat_axis_angle((0, 1, 0), 0.5)) == pytest.approx(0.3, abs=1e-9)
    # any scale and sign of the quaternion
    assert rig.limit_violation(1, -3.0 * quat_axis_angle((1, 0, 0), 0.8)) == pytest.approx(0.3, abs=1e-9)
    both = quat_mul(quat_axis_angle((1, 0, 0), 0.3), quat_axis_angle((0, 1, 0), 0.1))
    assert rig.limit_violation("b1", both) <= 1e-12
    assert rig.limit_violation(0, quat_axis_angle((0, 0, 1), 3.0)) == 0.0  # free bone


def _swing_onto(d):
    """The quaternion (w, x, y, z) of the shortest turn of +Y onto the unit direction d."""
    d = np.asarray(d, dtype=np.float64)
    axis = np.cross((0.0, 1.0, 0.0), d)
    s = np.linalg.norm(axis)
    angle = np.arctan2(s, d[1])
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis / s]), axis / s, angle


@pytest.mark.parametrize("blender", [False, True])
def test_cone_boundary_lies_on_the_limit(blender):
    rig = chain(2)
    if blender:
        rig.set_cone_limit_blender(1, -0.5, 0.9, -0.3, 0.6)
        bounds = (0.9, 0.6, 0.5, 0.3)  # about +X, +Z, -X, -Z
    else:
        rig.set_cone_limit(1, 1.2, 0.4, 0.7, 0.25)
        bounds = (1.2, 0.7, 0.4, 0.25)
    rig.set_twist_limit(1, -0.2, 0.2)  # the boundary is the swing's: twist does not change it
    dirs = rig.cone_boundary(1, segments=32, rings=4)
    assert dirs.shape == (4, 32, 3) and dirs.dtype == np.float64
    assert np.allclose(np.linalg.norm(dirs, axis=2), 1.0)
    for ring in range(4):
        for k in range(32):
            q, axis, angle = _swing_onto(dirs[ring, k])
            assert rig.limit_violation(1, q) < 1e-9
            if ring == 3:  # the boundary: a little further out is clamped
                assert rig.limit_violation(1, quat_axis_angle(axis, angle + 1e-3)) > 1e-5
                assert rig.limit_state(1, q, 1e-6)["swing_at_bound"]
            else:
                assert not rig.limit_state(1, q, 1e-6)["swing_at_bound"]
    # The four half-angles are segments 0, 8, 16, 24 (about +X, +Z, -X, -Z).
    for k, bound in zip((0, 8, 16, 24), bounds):
        assert _swing_onto(dirs[3, k])[2] == pytest.approx(bound, abs=1e-9)
    assert rig.cone_boundary(0) is None  # a free bone
    with pytest.raises(sinew.ShapeError):
        rig.cone_boundary(1, segments=2)


def test_limit_state_reports_the_parts_and_the_bounds():
    rig = chain(3)
    rig.set_cone_limit(1, 0.5, 0.5, 0.5, 0.5)
    rig.set_twist_limit(1, -0.2, 0.3)
    rig.set_hinge_limit(2, (1, 0, 0), 0.0, 2.0)
    q = quat_mul(quat_axis_angle((1, 0, 0), 0.5), quat_axis_angle((0, 1, 0), 0.1))
    st = rig.limit_state(1, q)
    assert st["swing_at_bound"] and not st["twist_at_bound"] and st["hinge"] is None
    assert st["twist"] == pytest.approx(0.1) and np.allclose(st["swing"], quat_axis_angle((1, 0, 0), 0.5))
    st = rig.limit_state(1, quat_mul(quat_axis_angle((1, 0, 0), 0.2), quat_axis_angle((0, 1, 0), 0.3)))
    assert not st["swing_at_bound"] and st["twist_at_bound"]
    st = rig.limit_state(2, quat_axis_angle((1, 0, 0), 1.0))
    assert st["hinge"] == pytest.approx(1.0) and not st["swing_at_bound"]
    assert rig.limit_state(2, quat_axis_angle((1, 0, 0), 2.0))["swing_at_bound"]
    assert not rig.limit_state(0, (1, 0, 0, 0))["swing_at_bound"]  # free
    with pytest.raises(sinew.NonFiniteError):
        rig.limit_state(1, (0, 0, 0, 0))


def test_copies_are_independent_and_cheap():
    rig = chain(3)
    other = rig.copy()
    also = copy.copy(rig)
    deep = copy.deepcopy(rig)
    other.set_cone_limit(1, 0.1, 0.1, 0.1, 0.1)
    assert rig.limit(1)["swing"] == "free"
    assert also.limit(1)["swing"] == "free" and deep.limit(1)["swing"] == "free"
    assert other.limit(1)["swing"] == "cone"


def test_failed_limit_change_leaves_the_rig_unchanged():
    rig = chain(3)
    rig.set_cone_limit(1, 0.5, 0.5, 0.5, 0.5)
    with pytest.raises(sinew.LimitError, match="x_neg"):
        rig.set_cone_limit(1, 0.5, 0.0, 0.5, 0.5)
    assert rig.limit(1)["cone"] == (0.5, 0.5, 0.5, 0.5)


def test_from_json_reads_the_rig_with_limits_only():
    rig = sinew.Rig.from_json(TWO_BONES)
    assert rig.names == ["upper", "lower"]
    lim = rig.limit("lower")
    assert lim["cone"] == (0.5, 0.4, 1.0, 0.9) and lim["twist"] == (-0.1, 0.2)
    _, tails, _ = rig.forward_kinematics()
    np.testing.assert_allclose(tails[1], [0, 0, 2], atol=1e-12)
    # goals or settings the rig does not need are not checked
    broken_goal = json.loads(TWO_BONES)
    broken_goal["goals"][0]["bone"] = "nope"
    broken_goal["settings"]["tolerance"] = -1
    assert len(sinew.Rig.from_json(json.dumps(broken_goal))) == 2


def test_load_problem_returns_everything_the_file_holds():
    rig, goals, solver, pose, root_translation, root = sinew.load_problem(TWO_BONES)
    assert isinstance(rig, sinew.Rig) and len(rig) == 2
    assert rig.limit(1)["swing"] == "cone"
    assert len(goals) == 1
    g = goals[0]
    assert g.bone == "lower" and g.target == (0.5, 0.0, 1.5) and g.chain_length == 2 and g.weight == 2.0
    assert g.pole_target == (1.0, 1.0, 1.0) and g.pole_angle == 0.25 and g.orientation == (1.0, 0.0, 0.0, 0.0)
    assert g.use_tail is True
    assert (solver.method, solver.max_iterations, solver.tolerance) == ("fabrik", 50, 0.001)
    assert pose.shape == (2, 4) and pose.dtype == np.float64
    np.testing.assert_allclose(pose, [[1, 0, 0, 0], [0, 0, 0, 1]])
    np.testing.assert_allclose(root_translation, [0.1, 0.2, 0.3])
    assert root == "free"
    sol = solver.solve(rig, goals, pose=pose, root_translation=root_translation, root=root)
    assert sol.rotations.shape == (2, 4)


def test_a_hinge_takes_no_twist_range():
    """A hinge has one degree of freedom: setting a hinge removes a twist range set before, and a
    twist range on a hinge is refused (LimitError) and changes nothing, never silently dropped."""
    rig = chain(3)
    rig.set_twist_limit("b1", -0.2, 0.3)
    rig.set_hinge_limit("b1", (1, 0, 0), 0.0, 2.0)
    assert rig.limit("b1")["swing"] == "hinge" and rig.limit("b1")["twist"] is None
    with pytest.raises(sinew.LimitError, match="twist min on a hinge"):
        rig.set_twist_limit("b1", -0.2, 0.3)
    assert rig.limit("b1")["swing"] == "hinge" and rig.limit("b1")["twist"] is None
