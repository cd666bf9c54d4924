"""Where the Python module's source and wheels are (shared by conftest.py and the tests)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = (REPO / "rust" / "sinew-py" / "python").resolve()
WHEELS = REPO / "dist" / "wheels"


def wheel_version(wheel: Path) -> str:
    """The version field of a wheel file name (`sinew-<version>-<py>-<abi>-<platform>.whl`)."""
    return wheel.name.split("-")[1]


def newest_wheel() -> Path | None:
    """The most recently built sinew wheel in dist/wheels/, if any."""
    wheels = sorted(WHEELS.glob("sinew-*.whl"), key=lambda p: p.stat().st_mtime)
    return wheels[-1] if wheels else None
