"""The Blender session the add-on tests run in (imported by conftest.py before any test).

bpy 5.0 runs as a Python module. BLENDER_USER_RESOURCES points at a private directory before bpy
is imported, so nothing is installed into ~/.config/blender; the newest dist/sinew-*.zip is then
installed the way a user installs an extension, and Rigify is enabled for its metarigs.
"""

import os
import sys
import tempfile
from pathlib import Path

_URES = tempfile.mkdtemp(prefix="sinew-blender-tests-")
os.environ["BLENDER_USER_RESOURCES"] = _URES

import bpy  # noqa: E402
import addon_utils  # noqa: E402  (bpy's own module, importable once bpy is)
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODULE = "bl_ext.user_default.sinew"
USER_RESOURCES = _URES


def _newest_zip() -> Path:
    zips = sorted((ROOT / "dist").glob("sinew-*.zip"), key=lambda p: p.stat().st_mtime)
    if not zips:
        pytest.exit("tests/blender: no dist/sinew-*.zip; run scripts/build_extension.sh first", returncode=2)
    return zips[-1]


def _install():
    zip_path = _newest_zip()
    # The add-on imports the engine when it registers (it lists the engine's methods). Blender puts
    # the extensions' site-packages before its own; bpy as a module in a venv appends it after the
    # venv's, where tests/python may have installed another build of `sinew`. So, as in Blender,
    # it goes first, before the install extracts the wheel there (unless tests/python in the same
    # pytest run already imported `sinew`: a native module cannot be loaded twice).
    site = os.path.join(_URES, "extensions", ".local", "lib",
                        f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    preimported = "sinew" in sys.modules
    if not preimported:
        os.makedirs(site, exist_ok=True)
        sys.path.insert(0, site)
    bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="user_default", enable_on_install=True)
    # The operator returns FINISHED even when the install failed: check what actually happened.
    assert addon_utils.check(MODULE) == (True, True), f"{zip_path.name} did not install and enable"
    # The add-on must run the engine wheel it bundles (same build): imported from the extension's
    # site-packages, or, if another copy was imported first, the same build.
    ext_dir = os.path.join(_URES, "extensions", "user_default", "sinew")
    wheels = [w for w in os.listdir(os.path.join(ext_dir, "wheels")) if w.startswith("sinew-")]
    assert len(wheels) == 1, wheels
    bundled_version = wheels[0].split("-")[1]
    assert os.path.isdir(os.path.join(site, "sinew")), "the sinew wheel was not extracted"
    import sinew

    if not preimported:
        assert sinew.__file__.startswith(_URES), sinew.__file__
    assert sinew.__version__ == bundled_version, (
        f"sinew {sinew.__version__} from {sinew.__file__} is not the bundled wheel {wheels[0]}")
    return zip_path


ZIP = _install()
addon_utils.enable("rigify", default_set=True)
