"""A headless Blender session in which the Sinew extension is updated while Blender runs, in a
process of its own (an engine, once imported, stays loaded for the life of the process).
test_addon_install.py runs it:

    python sinew_update_session.py FIRST_ZIP SECOND_ZIP update|reinstall RESULT_JSON

It installs FIRST_ZIP into a private BLENDER_USER_RESOURCES as sinew_addon_env.py does, solves an
IK chain once (the add-on imports its engine), then installs SECOND_ZIP over it (``update``: Install
from Disk over the installed extension) or uninstalls the extension and installs SECOND_ZIP
(``reinstall``). Then it runs Solve IK, Bake IK to Keyframes, Compare IK Methods and Export IK
Problem, and writes to RESULT_JSON what each returned or reported, whether the pose, the keys, the
actions, the IK constraint, the frame or the export file changed, the sidebar's labels and the
engine versions.
"""

import importlib.metadata
import json
import os
import sys
import tempfile
import types

os.environ["BLENDER_USER_RESOURCES"] = tempfile.mkdtemp(prefix="sinew-update-session-")

import bpy  # noqa: E402
import addon_utils  # noqa: E402  (bpy's own module, importable once bpy is)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sinew_rigs as R  # noqa: E402

MODULE = "bl_ext.user_default.sinew"
USER_RESOURCES = os.environ["BLENDER_USER_RESOURCES"]


class Labels:
    """Stands in for ``UILayout`` in a panel's draw: records the labels' texts."""

    def __init__(self, log):
        object.__setattr__(self, "log", log)

    def label(self, text="", **_kw):
        self.log.append(text)

    def __getattr__(self, _name):
        return lambda *a, **kw: Labels(self.log)

    def __setattr__(self, _name, _value):
        pass


def install(path):
    bpy.ops.extensions.package_install_files(filepath=path, repo="user_default", enable_on_install=True)
    assert addon_utils.check(MODULE) == (True, True), f"{path} did not install and enable"


def uninstall():
    repos = bpy.context.preferences.extensions.repos
    index = next(i for i, r in enumerate(repos) if r.module == "user_default")
    bpy.ops.extensions.package_uninstall(repo_index=index, pkg_id="sinew")
    assert addon_utils.check(MODULE) == (False, False)


def run(op, *args, **kw):
    """What the operator returned, or the error it reported (bpy raises it as a RuntimeError)."""
    try:
        return sorted(op(*args, **kw))
    except RuntimeError as ex:
        return str(ex)


def state(ob, target, export):
    action = ob.animation_data.action if ob.animation_data else None
    return {
        "pose": {k: [list(map(float, v)) if not isinstance(v, str) else v for v in vs]
                 for k, vs in R.pose_snapshot(ob).items()},
        "keys": {repr(k): v.tolist() for k, v in R.action_snapshot(action).items()},
        "action": action.name if action else None,
        "actions": sorted(a.name for a in bpy.data.actions),
        "ik_mute": ob.pose.bones["b02"].constraints["IK"].mute,
        "frame": bpy.context.scene.frame_current,
        "target": list(target.matrix_world.translation),
        "export_exists": os.path.exists(export),
    }


def main(first, second, how, result_path):
    # As in Blender, the extensions' site-packages comes before the venv's (sinew_addon_env.py).
    site = os.path.join(USER_RESOURCES, "extensions", ".local", "lib",
                        f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    os.makedirs(site, exist_ok=True)
    sys.path.insert(0, site)
    install(first)
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = R.make_chain(3)
    target = R.add_empty("T", (0.4, 0.1, 1.1))
    c = ob.pose.bones["b02"].constraints.new('IK')
    c.target, c.chain_count = target, 2
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    ob.pose.bones["b00"].keyframe_insert("rotation_quaternion", frame=1)
    before_update = run(bpy.ops.sinew.solve)   # loads the first zip's engine
    import sinew

    loaded = sinew.__version__
    if how == "update":
        install(second)
    else:
        uninstall()
        install(second)
    addon = sys.modules[MODULE]
    ob, target = bpy.data.objects["Chain"], bpy.data.objects["T"]
    R.activate(ob)
    bpy.ops.object.mode_set(mode='POSE')
    export = os.path.join(tempfile.mkdtemp(prefix="sinew-update-export-"), "problem.json")
    start = state(ob, target, export)
    results = {
        "solve": run(bpy.ops.sinew.solve, use_keyframes=True),
        "bake": run(bpy.ops.sinew.bake, frame_start=1, frame_end=5),
        "bake_invoked": run(bpy.ops.sinew.bake, 'INVOKE_DEFAULT', frame_start=1, frame_end=5),
        "compare": run(bpy.ops.sinew.compare_methods),
        "export": run(bpy.ops.sinew.export_problem, filepath=export),
    }
    end = state(ob, target, export)
    sidebar = []
    addon.ui.VIEW3D_PT_sinew.draw(types.SimpleNamespace(layout=Labels(sidebar)), bpy.context)
    out = {
        "before_update": before_update,
        "loaded_before": loaded,
        "loaded_after": sys.modules["sinew"].__version__,
        # What Blender extracted from SECOND_ZIP's wheel: what it imports at its next start.
        "installed": [d.version for d in importlib.metadata.distributions(path=[site]) if d.metadata["Name"] == "sinew"],
        "results": results,
        "unchanged": start == end,
        "start": start,
        "end": end,
        "compare_results": addon.pipeline.compare_results(ob) is not None,
        "sidebar": sidebar,
    }
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:5])
    sys.stdout.flush()
    sys.stderr.flush()
    # bpy 4.2 segfaults at interpreter exit once an add-on was enabled (conftest.pytest_unconfigure).
    os._exit(0)
