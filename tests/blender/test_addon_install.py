"""The built extension installs into real Blender like a user's, and registers everything."""

import os
import sys
import tomllib

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
