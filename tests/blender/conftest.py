"""pytest inside real Blender: the extension is installed once (sinew_addon_env) and every test
gets an empty scene."""

import sys

from sinew_addon_env import MODULE  # first: sets BLENDER_USER_RESOURCES, imports bpy, installs the zip

import addon_utils  # noqa: E402
import bpy  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def addon():
    """The installed add-on package (bl_ext.user_default.sinew)."""
    return sys.modules[MODULE]


@pytest.fixture(autouse=True)
def empty_scene():
    bpy.ops.wm.read_homefile(use_empty=True)
    assert addon_utils.check(MODULE) == (True, True)
    yield
