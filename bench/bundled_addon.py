"""Installing the built extension into the benchmarks' private headless Blender, shared by
bench/blender_bake.py and bench/real_motion.py.

Import it after ``BLENDER_USER_RESOURCES`` is set and ``bpy`` imported, as the scripts do."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import addon_utils
import bpy

MODULE = "bl_ext.user_default.sinew"


def install(zip_path: Path, who: str) -> str:
    """Installs and enables the extension ``zip_path`` as a user would, then makes sure the engine
    imported is the wheel it bundles (not a ``sinew`` installed in the venv, which would come first
    on sys.path), as tests/blender/sinew_addon_env.py does. Returns the engine's version; exits
    with a message naming ``who`` when anything is off."""
    # The add-on imports the engine when it registers (it lists the engine's methods): as in
    # Blender, the extensions' site-packages comes first, before the install extracts the wheel.
    if "sinew" in sys.modules:
        sys.exit(f"{who}: a sinew module was imported before the bundled one could be")
    ures = os.environ["BLENDER_USER_RESOURCES"]
    site = os.path.join(ures, "extensions", ".local", "lib",
                        f"python{sys.version_info[0]}.{sys.version_info[1]}", "site-packages")
    os.makedirs(site, exist_ok=True)
    if site in sys.path:
        sys.path.remove(site)
    sys.path.insert(0, site)
    bpy.ops.extensions.package_install_files(filepath=str(zip_path), repo="user_default", enable_on_install=True)
    # The operator says FINISHED even when the install failed: check.
    if addon_utils.check(MODULE) != (True, True):
        sys.exit(f"{who}: {zip_path.name} did not install")
    wheels = [w for w in os.listdir(os.path.join(ures, "extensions", "user_default", "sinew", "wheels"))
              if w.startswith("sinew-")]
    import sinew

    if not sinew.__file__.startswith(ures) or len(wheels) != 1 or sinew.__version__ != wheels[0].split("-")[1]:
        sys.exit(f"{who}: sinew {sinew.__version__} from {sinew.__file__} is not the bundled wheel {wheels}")
    return sinew.__version__
