"""Makes the tests import the *built wheel*, never the source tree, and never a stale install.

Self-sufficient: if `sinew` is not installed in this interpreter, or its version is not the one of
the newest wheel in dist/wheels/ (each build has a unique version), the newest wheel is installed
with `pip install --force-reinstall --no-deps` before any test imports `sinew`. Build it with
`scripts/build_wheel.sh`. Run from the repository root:
`.venv/bin/python -m pytest -q tests/python`.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from sinew_py_wheel import SOURCE, newest_wheel, wheel_version


def _drop_source_from_path() -> None:
    """`rust/sinew-py/python/sinew` has no `_sinew`; it must never shadow the installed wheel."""
    keep = []
    for entry in sys.path:
        try:
            if Path(entry or ".").resolve() == SOURCE:
                continue
        except OSError:
            pass
        keep.append(entry)
    sys.path[:] = keep


def _installed_version() -> str | None:
    try:
        return importlib.metadata.version("sinew")
    except importlib.metadata.PackageNotFoundError:
        return None


def _ensure_current_wheel() -> None:
    _drop_source_from_path()
    if "sinew" in sys.modules:
        return
    wheel = newest_wheel()
    installed = _installed_version()
    if wheel is None:
        if installed is None:
            pytest.exit("sinew is not installed and dist/wheels/ has no wheel: run scripts/build_wheel.sh", returncode=2)
        return  # test whatever is installed (e.g. a wheel installed by hand)
    if installed != wheel_version(wheel):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             "--force-reinstall", "--no-deps", str(wheel)],
            check=True,
        )
        importlib.invalidate_caches()


_ensure_current_wheel()
