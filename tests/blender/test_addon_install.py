"""The built extension installs into real Blender like a user's, and registers everything."""

import json
import os
import subprocess
import sys
import tomllib
import types
import zipfile
from pathlib import Path

import addon_utils
import bpy
import pytest

from sinew_addon_env import MODULE, USER_RESOURCES, ZIP


def test_installed_from_the_built_zip_and_enabled():
    assert addon_utils.check(MODULE) == (True, True)
    mod = sys.modules[MODULE]
    assert mod.__file__.startswith(os.path.join(USER_RESOURCES, "extensions", "user_default", "sinew"))
    with open(os.path.join(os.path.dirname(mod.__file__), "blender_manifest.toml"), "rb") as fh:
        manifest = tomllib.load(fh)
    assert manifest["id"] == "sinew"
    assert manifest["blender_version_min"] == "4.2.0"
    assert manifest["license"] == ["SPDX:GPL-3.0-or-later"]
    assert set(manifest["tags"]) == {"Animation", "Rigging"}
    # A version with build metadata, new on every build, matching the zip's name.
    assert "+" in manifest["version"] and ZIP.name == f"sinew-{manifest['version']}.zip"
    assert len(manifest["wheels"]) == 1 and manifest["wheels"][0].startswith("./wheels/sinew-")


def test_engine_module_is_the_bundled_wheel():
    import sinew

    manifest_wheel = None
    ext = os.path.join(USER_RESOURCES, "extensions", "user_default", "sinew", "wheels")
    (manifest_wheel,) = os.listdir(ext)
    assert sinew.__version__ == manifest_wheel.split("-")[1]
    # The add-on's own check agrees: the engine loaded is the one Blender installed for it.
    rig_reader = sys.modules[MODULE].rig_reader
    assert rig_reader.installed_engine_version() == sinew.__version__
    assert rig_reader.engine_problem() is None


def test_another_engine_imported_first_is_named_with_where_it_came_from():
    """A ``sinew`` of another build imported from elsewhere before the add-on's (a venv's, in a
    script running bpy as a module) is refused as an update is, saying where it came from."""
    import sinew

    rig_reader = sys.modules[MODULE].rig_reader
    other = types.SimpleNamespace(__version__="0.0.1", __file__="/elsewhere/site-packages/sinew/__init__.py")
    assert rig_reader.engine_mismatch(other) == (
        f"The Sinew engine loaded (0.0.1, from /elsewhere/site-packages/sinew) is not the one installed with the "
        f"add-on ({sinew.__version__}): another copy of the sinew module was imported first; restart Blender to "
        "load the add-on's")
    assert rig_reader.engine_mismatch(types.SimpleNamespace(__version__=sinew.__version__, __file__="/x")) is None


def test_operators_panels_and_properties_registered():
    for name in ("SINEW_OT_solve", "SINEW_OT_bake", "SINEW_OT_export_problem",
                 "BONE_PT_sinew", "VIEW3D_PT_sinew", "VIEW3D_PT_sinew_analysis"):
        assert name in dir(bpy.types), name
    assert "sinew" in bpy.types.PoseBone.bl_rna.properties
    assert bpy.types.SINEW_OT_solve.bl_options >= {"REGISTER", "UNDO"}
    # No REGISTER: the bake's settings are made in its dialog; an Adjust Last Operation panel
    # would bake the whole range again on every change (tests/blender/test_addon_ux.py).
    assert bpy.types.SINEW_OT_bake.bl_options == {"UNDO"}


def test_in_the_pose_ik_and_animation_menus():
    # (F3 menu search finds operators through the menus they are in; test_addon_ux.py checks
    # what each menu shows.)
    for menu in (bpy.types.VIEW3D_MT_pose_ik, bpy.types.VIEW3D_MT_object_animation):
        funcs = menu._dyn_ui_initialize()
        assert any(getattr(f, "__module__", "").startswith(MODULE) for f in funcs), menu
    assert not any(getattr(f, "__module__", "").startswith(MODULE)
                   for f in bpy.types.VIEW3D_MT_pose._dyn_ui_initialize())


def test_poll_greys_out_without_an_active_armature():
    assert bpy.context.active_object is None
    assert not bpy.ops.sinew.solve.poll()
    assert not bpy.ops.sinew.bake.poll()
    mesh = bpy.data.objects.new("M", bpy.data.meshes.new("M"))
    bpy.context.scene.collection.objects.link(mesh)
    bpy.context.view_layer.objects.active = mesh
    assert not bpy.ops.sinew.solve.poll()
    with pytest.raises(RuntimeError, match="poll"):
        bpy.ops.sinew.solve()


def test_disable_and_enable_again():
    addon_utils.disable(MODULE, default_set=True)
    try:
        assert "SINEW_OT_solve" not in dir(bpy.types)
        assert "sinew" not in bpy.types.PoseBone.bl_rna.properties
    finally:
        addon_utils.enable(MODULE, default_set=True)
    assert addon_utils.check(MODULE) == (True, True)
    assert "SINEW_OT_solve" in dir(bpy.types)


# -- Updating the extension while Blender runs ------------------------------------------------------


def zip_with_engine_version(src: Path, dst: Path, version: str) -> None:
    """A copy of extension zip ``src`` whose bundled engine wheel says it is ``version``: the same
    binary, repacked under another version (its file name, its ``.dist-info`` and METADATA, which
    is what Blender extracts), listed in the manifest under its new name. A build as far as Blender
    and the add-on can tell; ``sinew.__version__`` of its binary stays the old one."""
    with zipfile.ZipFile(src) as zin:
        (wheel_name,) = [n for n in zin.namelist() if n.startswith("wheels/sinew-")]
        old_file = wheel_name.split("/")[1]
        old = old_file.split("-")[1]
        new_file = old_file.replace(f"sinew-{old}-", f"sinew-{version}-", 1)
        wheel = Path(dst.parent / old_file)
        wheel.write_bytes(zin.read(wheel_name))
        repacked = dst.parent / new_file
        with zipfile.ZipFile(wheel) as win, zipfile.ZipFile(repacked, "w", zipfile.ZIP_DEFLATED) as wout:
            for name in win.namelist():
                data = win.read(name)
                if name.startswith(f"sinew-{old}.dist-info/"):
                    data = data.replace(f"sinew-{old}.dist-info".encode(), f"sinew-{version}.dist-info".encode())
                    data = data.replace(f"Version: {old}\n".encode(), f"Version: {version}\n".encode())
                    name = name.replace(f"sinew-{old}.dist-info", f"sinew-{version}.dist-info", 1)
                wout.writestr(name, data)
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
            for name in zin.namelist():
                if name == wheel_name:
                    zout.write(repacked, f"wheels/{new_file}")
                elif name == "blender_manifest.toml":
                    text = zin.read(name).decode()
                    assert old_file in text, text  # (a platform build lists it twice)
                    zout.writestr(name, text.replace(old_file, new_file))
                else:
                    zout.writestr(zin.getinfo(name), zin.read(name))


@pytest.mark.parametrize("how", ["update", "reinstall"])
def test_an_update_while_blender_runs_is_refused_until_a_restart(tmp_path, how):
    """Installing a newer build over the installed one (or uninstalling it and installing the
    newer one) while Blender runs loads the new add-on, but the engine loaded before stays in
    memory. Solve IK, Bake, Compare IK Methods and Export IK Problem refuse and say to restart,
    changing nothing; the sidebar says it; nothing prints a traceback (QA qa9 defect 3: they ran
    on the old engine without a word)."""
    import sinew

    old = sinew.__version__
    new = f"{old}+update"
    newer = tmp_path / "newer" / "sinew-newer.zip"
    newer.parent.mkdir()
    zip_with_engine_version(ZIP, newer, new)
    result = tmp_path / "result.json"
    script = Path(__file__).with_name("sinew_update_session.py")
    run = subprocess.run([sys.executable, str(script), str(ZIP), str(newer), how, str(result)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and result.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    assert "Traceback" not in run.stdout + run.stderr, run.stdout[-3000:] + run.stderr[-3000:]
    out = json.loads(result.read_text())
    assert out["before_update"] == ["FINISHED"]  # the first install solves
    # The engine in memory is still the first build; Blender installed the newer one.
    assert out["loaded_before"] == out["loaded_after"] == old
    assert out["installed"] == [new]
    said = f"Sinew was updated while Blender was running: restart Blender to load engine {new} ({old} is loaded)"
    for op, reported in out["results"].items():
        assert reported == f"Error: {said}; nothing was changed\n", (op, reported)
    assert out["unchanged"], (out["start"], out["end"])
    assert not out["end"]["export_exists"] and not out["compare_results"]
    assert " ".join(out["sidebar"]).startswith(said), out["sidebar"]
