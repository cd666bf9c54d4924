"""Compare IK Methods (sinew.compare_methods, issue #14): the problem Solve IK would solve, solved
once with every method the engine lists, each one's error, iterations and time in the sidebar's
Method Comparison panel; the pose, the keys and the object stay exactly as they were."""

import math
import types

import bpy
import numpy as np
import pytest
import sinew
from mathutils import Euler, Quaternion, Vector

import sinew_rigs as R


# -- A layout that checks what a draw function asks of it against Blender's UILayout ----------


class StrictLayout:
    """Stands in for ``UILayout`` in a panel's draw: every call must be a UILayout function with
    parameters it has (icons among Blender's), every attribute set one it has; labels and
    operators are recorded as (kind, text or id, icon)."""

    _rna = bpy.types.UILayout.bl_rna

    def __init__(self, log):
        object.__setattr__(self, "log", log)

    def __getattr__(self, name):
        fn = self._rna.functions.get(name)
        assert fn is not None, f"UILayout has no function {name!r}"
        params = fn.parameters

        def call(*args, **kw):
            for key, value in kw.items():
                assert key in params, f"UILayout.{name}() has no parameter {key!r}"
                if key == "icon":
                    assert value in params["icon"].enum_items.keys(), f"no icon {value!r}"
            if name in ("label", "operator"):
                text = kw.get("text", args[0] if args and name == "label" else "")
                self.log.append((name, args[0] if name == "operator" else text, kw.get("icon")))
            return StrictLayout(self.log)

        return call

    def __setattr__(self, name, value):
        assert name in self._rna.properties, f"UILayout has no property {name!r}"


def draw_panel(panel_cls, context):
    log = []
    panel_cls.draw(types.SimpleNamespace(layout=StrictLayout(log)), context)
    return log


# -- Rigs -----------------------------------------------------------------------------------------


def _key_pose(ob):
    """Keys a pose that is not the rest pose at frames 1 and 9 (one bone in Euler mode) and leaves
    the scene at frame 4, between the keys."""
    for f, turn in ((1, 0.2), (9, -0.3)):
        for i, pb in enumerate(ob.pose.bones):
            if i == 1:
                pb.rotation_mode = 'XZY'
                pb.rotation_euler = Euler((turn, 0.1, -turn), 'XZY')
                pb.keyframe_insert("rotation_euler", frame=f)
            else:
                pb.rotation_quaternion = Quaternion((1.0, turn * (i % 3 - 1), 0.1 * turn, turn)).normalized()
                pb.keyframe_insert("rotation_quaternion", frame=f)
    bpy.context.scene.frame_set(4)


def _chain():
    """A 4-bone chain with a Blender IK constraint on its tip, keyed, in Pose Mode."""
    ob = R.make_chain(4)
    t = R.add_empty("T", (0.6, 0.3, 1.4))
    con = ob.pose.bones["b03"].constraints.new('IK')
    con.target = t
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    _key_pose(ob)
    return ob


def _branches():
    """Two 3-bone chains on one trunk (their parent), keyed, each with an IK constraint whose
    target is a little off its tip, the left one with Rotation on: triangulation refuses it (two
    goals)."""
    ob = R.make_ybranch()
    _key_pose(ob)
    for bone, base in (("L2", "L0"), ("R2", "R0")):
        tail = R.world_tail(ob, bone)  # the target: a little toward the branch's base, well in reach
        t = R.add_empty(f"T{bone}", tail + 0.3 * (R.world_head(ob, base) - tail).normalized() + Vector((0, 0.1, 0)))
        t.rotation_euler = (ob.matrix_world @ ob.pose.bones[bone].matrix).to_euler()
        t.rotation_euler.x += 0.2
        con = ob.pose.bones[bone].constraints.new('IK')
        con.target, con.chain_count = t, 3
    ob.pose.bones["L2"].constraints[0].use_rotation = True
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    return ob


def _snapshot(ob):
    """Every pose bone's channels and matrices, exactly, the action's keys, and the object's
    Sinew data."""
    bones = {pb.name: (tuple(pb.location), tuple(pb.rotation_quaternion), tuple(pb.rotation_euler),
                       tuple(pb.rotation_axis_angle), tuple(pb.scale), pb.rotation_mode,
                       tuple(map(tuple, pb.matrix)), tuple(map(tuple, pb.matrix_basis))) for pb in ob.pose.bones}
    ad = ob.animation_data
    keys = R.action_snapshot(ad.action if ad else None)
    return bones, keys, ob.sinew_last_bake, ob.sinew_muted, len(bpy.data.actions)


def _compare(addon, ob):
    before = _snapshot(ob)
    assert bpy.ops.sinew.compare_methods() == {'FINISHED'}
    after = _snapshot(ob)
    assert after[0] == before[0], "the pose changed"
    assert R.same_snapshot(after[1], before[1]), "the keys changed"
    assert after[2:] == before[2:]
    doc = addon.pipeline.compare_results(ob)
    assert doc is not None
    return doc


def _check_rows(doc):
    """A row per engine method, in the engine's order; each applicable one with a finite error,
    iterations (or reached at once) and a time; the refusals with the engine's reason."""
    rows = doc["methods"]
    assert [r["method"] for r in rows] == list(sinew.methods())
    for r in rows:
        assert r["failed"] is None, r
        if r["unsupported"] is not None:
            assert "cannot solve this problem" in r["unsupported"], r
            continue
        assert math.isfinite(r["position"]) and r["position"] >= 0.0, r
        assert r["iterations"] > 0 or r["reached"], r
        assert math.isfinite(r["ms"]) and r["ms"] > 0.0, r
        if doc["orientation"]:
            assert math.isfinite(r["orientation"]), r
        else:
            assert r["orientation"] is None, r
        assert r["reached"] == (r["position"] <= doc["tolerance"] * (1 + 1e-9)) or doc["orientation"], r
    reached = [r for r in rows if r["reached"]]
    assert reached, "no method reached"
    assert doc["best"] == min(reached, key=lambda r: r["ms"])["method"]
    return {r["method"]: r for r in rows}


# -- Tests ------------------------------------------------------------------------------------------


def test_compare_on_a_chain_lists_every_method_and_changes_nothing(addon, capfd):
    ob = _chain()
    doc = _compare(addon, ob)
    rows = _check_rows(doc)
    assert doc["frame"] == 4 and doc["goals"] == 1 and not doc["orientation"]
    # Solve IK's settings (its defaults here: it has not run).
    assert doc["max_iterations"] == 100 and doc["tolerance"] == pytest.approx(1e-4) and doc["root"] == "pinned"
    # One chain and a position goal: every method applies, and the default one reaches.
    assert all(r["unsupported"] is None for r in rows.values())
    assert rows["fabrik"]["reached"] and rows["dls"]["reached"]
    out = capfd.readouterr().out
    assert f'Sinew compared {len(rows)} methods on "Chain" at frame 4: fastest to reach the goal: {doc["best"]}' in out
    assert "the pose is unchanged" in out
    # What the comparison solved is what Solve IK solves: fabrik's result is Solve IK's.
    settings = addon.pipeline.Settings()
    inp = addon.pipeline.read_solve_input(bpy.context, ob, settings)
    sol, _seconds = inp.solve(settings.solver(), settings.root)
    assert float(np.max(sol.residuals)) == rows["fabrik"]["position"]
    assert int(sol.iterations) == rows["fabrik"]["iterations"]


def test_compare_on_two_chains_shows_why_triangulation_does_not_apply(addon):
    ob = _branches()
    doc = _compare(addon, ob)
    rows = _check_rows(doc)
    assert doc["goals"] == 2 and doc["orientation"]
    assert "triangulation" in rows
    tri = rows["triangulation"]
    assert tri["unsupported"] and "2 goals" in tri["unsupported"]
    reason = addon.pipeline.short_reason(tri["unsupported"])
    assert reason.startswith("2 goals") and "cannot solve this problem" not in reason and "(" not in reason
    assert rows["fabrik"]["unsupported"] is None and rows["fabrik"]["reached"]

    # The panel: a row per method, the refusal with its reason, the fastest starred.
    panel = addon.ui.VIEW3D_PT_sinew_compare
    assert panel.bl_parent_id == "VIEW3D_PT_sinew" and panel.bl_category == "Sinew"
    assert panel.poll(bpy.context)
    log = draw_panel(panel, bpy.context)
    assert ("operator", "sinew.compare_methods", 'SORTTIME') in log
    labels = [(text, icon) for kind, text, icon in log if kind == "label"]
    texts = [t for t, _i in labels]
    for name in sinew.methods():
        assert sum(t == addon.pipeline.method_label(name) for t in texts) == 1, name
    k = texts.index(addon.pipeline.method_label("triangulation"))
    assert texts[k + 1] == "n/a"
    wrapped = []
    for text, icon in labels[k + 2:]:
        if icon != 'BLANK1':
            break
        wrapped.append(text)
    assert " ".join(wrapped) == reason
    assert (addon.pipeline.method_label("triangulation"), 'CANCEL') in labels
    assert (addon.pipeline.method_label(doc["best"]), 'SOLO_ON') in labels
    assert sum(icon == 'SOLO_ON' for _t, icon in labels) == 2  # the best row, and the line saying so
    assert any(t.startswith("Fastest to reach: ") for t in texts)
    assert any(t.endswith("°") for t in texts)  # the orientation error beside the distance


def test_compare_uses_solve_iks_settings(addon):
    ob = _branches()
    last = bpy.context.window_manager.operator_properties_last("sinew.solve")
    saved = (last.max_iterations, last.tolerance)
    try:
        last.max_iterations, last.tolerance = 2, 1e-6
        doc = _compare(addon, ob)
    finally:
        last.max_iterations, last.tolerance = saved
    assert doc["max_iterations"] == 2 and doc["tolerance"] == 1e-6
    for r in doc["methods"]:
        if r["unsupported"] is None:
            assert r["iterations"] <= 2, r


def test_the_panel_before_a_comparison_and_at_another_frame(addon):
    ob = _chain()
    log = draw_panel(addon.ui.VIEW3D_PT_sinew_compare, bpy.context)
    assert log == [("operator", "sinew.compare_methods", 'SORTTIME')]
    _compare(addon, ob)
    bpy.context.scene.frame_set(6)
    log = draw_panel(addon.ui.VIEW3D_PT_sinew_compare, bpy.context)
    assert ("label", "Compared at frame 4, not this one", 'ERROR') in log


def test_compare_is_read_only_and_found_like_the_other_operators():
    rna = bpy.ops.sinew.compare_methods.get_rna_type()
    assert rna.name == "Compare IK Methods"
    assert rna.description.strip() and "\n" not in rna.description
    opts = bpy.types.SINEW_OT_compare_methods.bl_options
    assert 'UNDO' not in opts and 'INTERNAL' not in opts and 'REGISTER' in opts
    assert not bpy.ops.sinew.compare_methods.poll()  # no armature
    ob = R.make_chain(3)
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    with pytest.raises(RuntimeError, match="no IK goals"):
        bpy.ops.sinew.compare_methods()
