"""Solves release the GIL, and Rig, Goal and Solver can be shared between threads."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import sinew
from sinew_py_rigs import chain


def limited_chain(n: int = 40) -> sinew.Rig:
    rig = chain(n, length=0.25)
    for i in range(n):
        rig.set_cone_limit(i, 0.3, 0.3, 0.3, 0.3)
        rig.set_twist_limit(i, -0.1, 0.1)
    return rig


def spiral(frames: int) -> np.ndarray:
    t = np.linspace(0, 4 * np.pi, frames)
    return np.stack([3 * np.cos(t), 3 * np.sin(t), 6 + np.sin(5 * t)], axis=1)[:, None, :]


def test_solve_sequence_releases_the_gil():
    rig = limited_chain()
    solver = sinew.Solver(tolerance=1e-6)
    goals = [sinew.Goal(len(rig) - 1, (0, 0, 0))]
    # The spiral (which ends where it starts) repeated until the solve lasts about a quarter of a
    # second on this machine: the engine only gets faster, and a fixed count became too short to
    # tell.
    t0 = time.perf_counter()
    solver.solve_sequence(rig, goals, spiral(80))
    once = time.perf_counter() - t0
    targets = np.concatenate([spiral(80)] * int(np.ceil(0.25 / max(once, 1e-4))))
    entered, finished = threading.Event(), threading.Event()
    timing = {}

    def work():
        entered.set()
        t0 = time.perf_counter()
        timing["result"] = solver.solve_sequence(rig, goals, targets)
        timing["seconds"] = time.perf_counter() - t0
        finished.set()

    def spin(until) -> int:
        """Turns of a pure-Python loop until `until()`; it only turns while holding the GIL."""
        spins = 0
        while not until():
            spins += 1
        return spins

    # Baseline turns per second under the machine's current load.
    timer_done = threading.Event()
    t0 = time.perf_counter()
    threading.Timer(0.2, timer_done.set).start()
    baseline = spin(timer_done.is_set) / (time.perf_counter() - t0)
    worker = threading.Thread(target=work)
    worker.start()
    entered.wait()
    spins = spin(finished.is_set)
    worker.join()
    assert timing["result"].reached.all()
    assert timing["seconds"] > 0.05, "solve too short to tell"
    # If the native call held the GIL, this thread could not turn at all until the solve ended
    # (the worker's own clock says how long that was); released, it keeps most of its speed.
    expected = baseline * timing["seconds"]
    assert spins > 0.2 * expected, (spins, expected, timing["seconds"])


def test_shared_rig_and_solver_give_the_serial_results_from_many_threads():
    rig = limited_chain(20)
    solver = sinew.Solver()
    rng = np.random.default_rng(3)
    targets = rng.uniform(-3, 3, size=(16, 3)) + (0, 0, 3)
    goals = [[sinew.Goal(19, t)] for t in targets]
    serial = [solver.solve(rig, g).rotations for g in goals]
    with ThreadPoolExecutor(max_workers=4) as pool:
        parallel = list(pool.map(lambda g: solver.solve(rig, g).rotations, goals))
    for a, b in zip(serial, parallel):
        np.testing.assert_array_equal(a, b)
    seqs = [targets[i : i + 4, None, :] for i in range(0, 16, 4)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: solver.solve_sequence(rig, [sinew.Goal(19, (0, 0, 0))], t), seqs))
    for t, r in zip(seqs, results):
        np.testing.assert_array_equal(r.rotations, solver.solve_sequence(rig, [sinew.Goal(19, (0, 0, 0))], t).rotations)


def test_changing_limits_while_another_thread_solves():
    rig = limited_chain(20)
    solver = sinew.Solver()
    targets = spiral(20)
    stop = threading.Event()
    errors = []

    def keep_solving():
        try:
            while not stop.is_set():
                seq = solver.solve_sequence(rig, [sinew.Goal(19, (0, 0, 0))], targets)
                assert np.isfinite(seq.rotations).all()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    workers = [threading.Thread(target=keep_solving) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        for k in range(200):
            rig.set_cone_limit(k % 20, 0.2 + 0.001 * k, 0.3, 0.3, 0.3)
            rig.clear_limits((k + 7) % 20) if k % 3 == 0 else rig.set_twist_limit((k + 7) % 20, -0.1, 0.1)
    finally:
        stop.set()
        for w in workers:
            w.join()
    assert not errors, errors
    # Each solve used one consistent snapshot: the final rig's limits hold on a fresh solve.
    sol = solver.solve(rig, [sinew.Goal(19, (1.0, 1.0, 4.0))])
    for i in range(20):
        assert rig.limit_violation(i, sol.rotations[i]) <= 1e-9
