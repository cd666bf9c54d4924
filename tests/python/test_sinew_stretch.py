"""Bones that stretch (Blender's ``ik_stretch``) through the Python module: ``Rig.set_stretch``,
``Solution.scales``, start and reference scales, and forward kinematics with scales."""

from __future__ import annotations

import numpy as np
import pytest

import sinew
from sinew_py_rigs import chain


def _stretchy(n=3, stretch=0.1):
    rig = chain(n, length=0.5)
    for i in range(n):
        rig.set_stretch(i, stretch)
    return rig


def test_set_stretch_reads_back_and_is_checked():
    rig = chain(3)
    assert rig.limit(1)["stretch"] == 0.0
    rig.set_cone_limit(1, 0.5, 0.5, 0.5, 0.5)
    rig.set_stretch("b1", 0.25)
    lim = rig.limit(1)
    assert lim["stretch"] == 0.25 and lim["swing"] == "cone"  # the other limits stay
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(sinew.LimitError, match="stretch"):
            rig.set_stretch(1, bad)
    assert rig.limit(1)["stretch"] == 0.25  # nothing changed
    rig.clear_limits(1)
    assert rig.limit(1)["stretch"] == 0.0
    with pytest.raises(sinew.UnknownBoneError):
        rig.set_stretch("nope", 0.1)


@pytest.mark.parametrize("method", ["fabrik", "dls"])
def test_a_stretchy_chain_reaches_beyond_its_length(method):
    rig = _stretchy()
    goal = sinew.Goal("b2", target=(0.3, 0.0, 2.0))  # the chain is 1.5 long
    sol = sinew.Solver(method, max_iterations=200).solve(rig, [goal], reference=np.tile([1.0, 0, 0, 0], (3, 1)))
    assert sol.reached, sol.residuals
    assert sol.scales.shape == (3,) and np.all(sol.scales > 1.0)
    heads, tails, _ = rig.forward_kinematics(sol.rotations, scales=sol.scales)
    np.testing.assert_allclose(np.linalg.norm(tails - heads, axis=1), 0.5 * sol.scales, rtol=1e-12)
    np.testing.assert_allclose(tails[2], (0.3, 0.0, 2.0), atol=1e-4)
    # A rigid chain stops short and keeps its lengths; every scale is 1.
    rigid = sinew.Solver(method).solve(chain(3, length=0.5), [goal])
    assert not rigid.reached and np.all(rigid.scales == 1.0)


def test_scales_in_and_out_of_sequences():
    rig = _stretchy()
    goal = sinew.Goal("b2", target=(0.0, 0.0, 1.0))
    frames = np.array([[[0.0, 0.2, 1.0 + 0.3 * k]] for k in range(4)])
    res = sinew.Solver("fabrik").solve_sequence(rig, [goal], frames)
    assert res.scales.shape == (4, 3) and res.reached.all()
    assert res.scales[-1].max() > 1.0
    # The last frame's stretch as a warm start, and a reference with scales.
    sol = sinew.Solver("fabrik").solve(rig, [sinew.Goal("b2", target=frames[-1, 0])], pose=res.rotations[-1],
                                       scales=res.scales[-1], reference=res.rotations[-1],
                                       reference_scales=res.scales[-1])
    assert sol.reached
    np.testing.assert_allclose(sol.scales, res.scales[-1], atol=1e-4)


def test_bad_scales_are_typed_errors():
    rig = _stretchy()
    rigid_first = chain(3, length=0.5)
    rigid_first.set_stretch(2, 0.5)
    goal = sinew.Goal("b2", target=(0.0, 0.0, 1.0))
    solver = sinew.Solver("fabrik")
    with pytest.raises(sinew.ShapeError):
        solver.solve(rig, [goal], scales=[1.0, 1.0])
    with pytest.raises(sinew.NonFiniteError, match='"b1"'):
        solver.solve(rig, [goal], scales=[1.0, float("nan"), 1.0])
    with pytest.raises(sinew.LimitError, match='"b0"'):
        solver.solve(rigid_first, [goal], scales=[1.2, 1.0, 1.0])
    with pytest.raises(sinew.LimitError, match='"b2"'):
        solver.solve(rig, [goal], scales=[1.0, 1.0, 0.0])
    with pytest.raises(sinew.LimitError):
        solver.solve(rig, [goal], reference=np.tile([1.0, 0.0, 0.0, 0.0], (3, 1)), reference_scales=[1.0, 1.0, -2.0])
    with pytest.raises(sinew.LimitError):
        rigid_first.forward_kinematics(scales=[2.0, 1.0, 1.0])
