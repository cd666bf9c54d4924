"""Export IK Problem writes exactly what Solve IK solves (sinew.problem/1)."""

import json
import math
from pathlib import Path

import bpy
import numpy as np
import pytest

import sinew_rigs as R


def _rig_with_everything():
    ob = R.make_ybranch()
    ob.location = (0.2, 0.1, 0.0)
    tl = R.add_empty("TL", (0.9, 0.3, 2.1))
    tl.rotation_euler = (0.4, 0.2, -0.3)
    tr = R.add_empty("TR", (-0.1, 0.0, 2.0))
    pole = R.add_empty("Pole", (-0.5, -2.0, 1.5))
    R.set_goal(ob, "L2", tl, use_orientation=True, weight=2.0)
    con = ob.pose.bones["R2"].constraints.new('IK')  # a Blender IK goal with a pole, imported
    con.target, con.pole_target, con.pole_angle, con.chain_count = tr, pole, math.radians(-30), 3
    s = ob.pose.bones["L1"].sinew
    s.use_cone, s.cone_x_pos, s.cone_x_neg, s.cone_z_pos, s.cone_z_neg = True, 0.6, 0.3, 0.5, 0.4
    s.use_twist, s.twist_min, s.twist_max = True, -0.2, 0.3
    pb = ob.pose.bones["trunk1"]
    pb.use_ik_limit_z, pb.ik_min_z, pb.ik_max_z = True, -0.5, 0.4  # a Blender cone (X free)
    ob.pose.bones["trunk2"].ik_stiffness_y = 0.4
    ob.pose.bones["R1"].rotation_quaternion = (0.98, 0.1, 0.0, 0.17)  # a non-rest start pose
    R.activate(ob)
    return ob


def test_export_loads_back_and_solves_to_the_same_rotations(addon, tmp_path):
    import sinew

    ob = _rig_with_everything()
    path = tmp_path / "problem.json"
    assert bpy.ops.sinew.export_problem(filepath=str(path), max_iterations=80, tolerance=1e-5) == {'FINISHED'}
    text = path.read_text()
    doc = json.loads(text)
    assert doc["format"] == "sinew.problem/1" and doc["root"] == "pinned"
    assert doc["settings"] == {"method": "fabrik", "max_iterations": 80, "tolerance": 1e-5}  # as typed, not its f32 round-off
    bones = {b["name"]: b for b in doc["bones"]}
    cone = bones["L1"]["limit"]["swing"]["cone"]  # (Blender angles are single precision)
    assert cone == {"x_pos": pytest.approx(0.6), "x_neg": pytest.approx(0.3), "z_pos": 0.5, "z_neg": pytest.approx(0.4)}
    assert bones["L1"]["limit"]["twist"] == {"min": pytest.approx(-0.2), "max": pytest.approx(0.3)}
    assert bones["trunk1"]["limit"]["swing"]["cone"]["z_neg"] == pytest.approx(0.5)
    assert bones["trunk1"]["limit"]["swing"]["cone"]["x_pos"] == pytest.approx(math.pi)
    assert bones["trunk1"]["limit"]["swing"]["cone"]["shape"] == "blender"  # Blender's IK limits keep their shape
    assert bones["trunk2"]["limit"]["stiffness"] == [0.0, pytest.approx(0.4), 0.0]  # ik_stiffness_y only, per axis
    assert bones["L0"]["parent"] == "trunk2" and bones["trunk0"]["parent"] is None
    goals = {g["bone"]: g for g in doc["goals"]}
    assert goals["R2"]["pole"]["angle"] == pytest.approx(math.radians(-30))
    assert goals["R2"]["chain_length"] == 3 and "orientation" in goals["L2"]

    # Solve IK falls back to the pose it starts from: the file says so.
    assert doc["reference"] == doc["pose"]
    rig, goals_, solver, pose, root_t, root = sinew.load_problem(text)
    assert rig.names == [b["name"] for b in doc["bones"]]
    from_file = solver.solve(rig, goals_, pose=pose, root_translation=root_t, root=root,
                             reference=np.array(doc["reference"]["rotations"]),
                             reference_root_translation=doc["reference"]["root_translation"])

    settings = addon.pipeline.Settings(max_iterations=80, tolerance=1e-5)
    res = addon.pipeline.solve_pose(bpy.context, ob, settings, key=False)
    assert res.problem.names == rig.names
    np.testing.assert_allclose(from_file.rotations, res.rotations, atol=1e-9)
    # And what Blender shows is that solution (with the Blender IK constraint, which Solve IK
    # leaves on, muted: it would act on top).
    ob.pose.bones["R2"].constraints["IK"].mute = True
    locs = R.evaluated_locals(ob)
    for i, name in enumerate(rig.names):
        assert abs(np.dot(np.array(locs[name]), res.rotations[i])) > 1 - 1e-6, name
    assert sinew.Rig.from_json(text).limit("L1")["swing"] == "cone"
    assert sinew.Rig.from_json(text).limit("trunk1")["cone_shape"] == "blender"


def test_export_reports_errors(tmp_path):
    ob = R.make_chain(3)
    R.activate(ob)
    with pytest.raises(RuntimeError, match="no IK goals"):
        bpy.ops.sinew.export_problem(filepath=str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()


def test_export_never_writes_a_value_json_cannot_hold(addon, tmp_path, monkeypatch):
    """Export writes strict JSON or nothing: a value that is not a finite number, should one get
    past reading the rig (which refuses those it knows of, by name), is named by its place in the
    document and no file is written (QA: a NaN pole angle was written as a bare NaN, which
    `sinew solve` could not read). Here one is put into the document the export makes."""
    ob = R.make_chain(3)
    R.set_goal(ob, "b02", R.add_empty("T", (0.4, 0.0, 1.2)))
    R.activate(ob)
    real = addon.pipeline.export_problem

    def with_a_nan(*args):
        doc = real(*args)
        doc["goals"][0]["target"][1] = float("nan")
        return doc

    monkeypatch.setattr(addon.pipeline, "export_problem", with_a_nan)
    path = tmp_path / "nan.json"
    with pytest.raises(RuntimeError, match=r"not a finite number at goals\[0\]\.target\[1\], which JSON cannot hold; "
                                           "nothing was written"):
        bpy.ops.sinew.export_problem(filepath=str(path))
    assert not path.exists()
    monkeypatch.setattr(addon.pipeline, "export_problem", real)
    assert bpy.ops.sinew.export_problem(filepath=str(path)) == {'FINISHED'}
    json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON token {c}"))


@pytest.mark.parametrize("lock_y", [False, True])
def test_blender_ik_locks_export_as_blenders_segments(tmp_path, lock_y):
    """X locked: Blender's elbow segment (a swing about Z within Z's limits, then a twist about
    Y), a cone with zero X half-angles and free twist; X and Y locked: a hinge about Z."""
    import sinew

    ob = R.make_chain(3)
    t = R.add_empty("T", (0.4, 0.0, 1.2))
    R.set_goal(ob, "b02", t)
    pb = ob.pose.bones["b01"]
    pb.lock_ik_x = True
    pb.lock_ik_y = lock_y
    pb.use_ik_limit_z, pb.ik_min_z, pb.ik_max_z = True, -0.5, 0.4
    R.activate(ob)
    path = tmp_path / "lock.json"
    bpy.ops.sinew.export_problem(filepath=str(path))
    doc = json.loads(path.read_text())
    limit = doc["bones"][1]["limit"]
    if lock_y:
        hinge = limit["swing"]["hinge"]
        assert hinge["axis"] == [0.0, 0.0, 1.0]
        assert (hinge["min"], hinge["max"]) == (pytest.approx(-0.5), pytest.approx(0.4))
    else:
        cone = limit["swing"]["cone"]
        assert cone["x_pos"] < 1e-5 and cone["x_neg"] < 1e-5
        assert (cone["z_pos"], cone["z_neg"]) == (pytest.approx(0.4), pytest.approx(0.5))
        assert limit["twist"] is None
    rig, goals, solver, pose, root_t, root = sinew.load_problem(path.read_text())
    sol = solver.solve(rig, goals, pose=pose, root_translation=root_t, root=root)
    assert sol.reached and rig.limit_violation("b01", sol.rotations[1]) < 1e-9


def _rig_from_document(doc):
    import sinew

    names = [b["name"] for b in doc["bones"]]
    parents = [names.index(b["parent"]) if b["parent"] else -1 for b in doc["bones"]]
    rig = sinew.Rig(names, parents, np.array([b["matrix"] for b in doc["bones"]]),
                    [b["length"] for b in doc["bones"]])
    for b in doc["bones"]:
        lim = b.get("limit")
        if not lim:
            continue
        sw = lim["swing"]
        if isinstance(sw, dict) and "cone" in sw:
            c = sw["cone"]
            rig.set_cone_limit(b["name"], c["x_pos"], c["x_neg"], c["z_pos"], c["z_neg"])
        elif isinstance(sw, dict) and "hinge" in sw:
            rig.set_hinge_limit(b["name"], sw["hinge"]["axis"], sw["hinge"]["min"], sw["hinge"]["max"])
        if lim["twist"]:
            rig.set_twist_limit(b["name"], lim["twist"]["min"], lim["twist"]["max"])
        if lim["stiffness"]:
            rig.set_stiffness(b["name"], lim["stiffness"])
    return rig


def test_same_problem_built_two_ways_solves_the_same():
    """data/hinge_roundoff_problem.json: exported from the Y-branch above with a Blender IK lock
    (hinge) on the straight trunk. It was a repro for the engine (the two solves came out 0.36
    apart); a regression test since the core fix in 5197955."""
    import sinew

    text = (Path(__file__).parent / "data" / "hinge_roundoff_problem.json").read_text()
    rig, goals, solver, pose, root_t, root = sinew.load_problem(text)
    for reference in ("least_motion", "rest"):  # (the path of the 5197955 fix, and the default)
        a = solver.solve(rig, goals, pose=pose, root_translation=root_t, root=root, reference=reference)
        b = solver.solve(_rig_from_document(json.loads(text)), goals, pose=pose, root_translation=root_t, root=root,
                         reference=reference)
        np.testing.assert_allclose(a.rotations, b.rotations, atol=1e-6)
