#!/usr/bin/env bash
# Builds the release abi3 wheel of the Python module (rust/sinew-py, import name `sinew`) with the
# venv's maturin into dist/wheels/, leaving exactly that one sinew wheel there, and prints its path
# as the last line.
#
# Every build gets a new version, PEP 440 `<workspace version>.dev<UTC timestamp in ms>` (e.g.
# 0.1.0.dev20251122031500123): Blender keys extracted wheels by name and version and never
# re-extracts a version it already has (the stale-wheel trap). The module reports the same string
# as `sinew.__version__`. SINEW_WHEEL_VERSION=0.1.0 scripts/build_wheel.sh builds a release version.
#
# How, without touching tracked files: maturin 1.16 has no version override, but it reads
# pyproject.toml from the current directory. The script runs maturin in a temporary directory
# holding a copy of the crate's pyproject.toml with a static version plus `manifest-path` back to
# the crate, and a copy of python/ (maturin only packs Python files below the pyproject's
# directory; a symlink is not enough). SINEW_VERSION passes the same version into the module.
#
# Run alone, the wheel is built against the host glibc (tagged e.g. manylinux_2_35), which only
# runs on distributions at least as new as this machine. scripts/build_extension.sh (what the tests
# and the demo use) builds the portable one by default:
#   SINEW_MATURIN_ARGS="--zig --compatibility manylinux_2_28" scripts/build_wheel.sh
# (zig from the `ziglang` package in requirements-dev.txt; manylinux_2_28 is the glibc floor of
# Blender's Linux builds). maturin finds zig as `python3 -m ziglang`, so the venv's bin/ goes first
# on PATH for the build.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
crate=$root/rust/sinew-py
out_dir=$root/dist/wheels

[ -x .venv/bin/maturin ] || scripts/bootstrap.sh
maturin=$root/.venv/bin/maturin
# maturin >= 1.9.4 sets PYO3_BUILD_EXTENSION_MODULE (pyo3 0.30 dropped the `extension-module`
# feature); an older one would link the module against libpython.
"$root/.venv/bin/python" - "$("$maturin" --version)" <<'PY'
import sys
have = tuple(int(x) for x in sys.argv[1].split()[-1].split(".")[:3])
if have < (1, 9, 4):
    sys.exit(f"build_wheel: {sys.argv[1]} is too old; sinew-py needs maturin >= 1.9.4")
PY

base=$(sed -n '/^\[workspace\.package\]/,/^\[/s/^version *= *"\([^"]*\)".*/\1/p' Cargo.toml)
[ -n "$base" ] || { echo "build_wheel: no [workspace.package] version in Cargo.toml" >&2; exit 1; }
version=${SINEW_WHEEL_VERSION:-$base.dev$(date -u +%Y%m%d%H%M%S%3N)}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sinew-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$root/.venv/bin/python" - "$crate/pyproject.toml" "$tmp/pyproject.toml" "$version" "$crate" <<'PY'
import re, sys
src, dst, version, crate = sys.argv[1:]
text = open(src, encoding="utf-8").read()
# A static version instead of the dynamic (Cargo) one.
text, n = re.subn(r'(?m)^dynamic = \["version"\]\n', f'version = "{version}"\n', text)
assert n == 1, "pyproject.toml: expected `dynamic = [\"version\"]`"
# The crate itself stays where it is.
text, n = re.subn(r'(?m)^python-source = "python"$',
                  f'python-source = "python"\nmanifest-path = "{crate}/Cargo.toml"', text)
assert n == 1, "pyproject.toml: expected `python-source = \"python\"`"
open(dst, "w", encoding="utf-8").write(text)
PY
cp -R "$crate/python" "$tmp/python"
find "$tmp/python" -name __pycache__ -prune -exec rm -rf {} +

# shellcheck disable=SC2086  # SINEW_MATURIN_ARGS is a list of words
(cd "$tmp" && PATH="$root/.venv/bin:$PATH" SINEW_VERSION=$version "$maturin" build --release --locked \
  --interpreter "$root/.venv/bin/python" --out "$tmp/out" ${SINEW_MATURIN_ARGS:-} >&2)

shopt -s nullglob
built=("$tmp"/out/sinew-*.whl)
[ ${#built[@]} -eq 1 ] || { echo "build_wheel: expected one wheel, got: ${built[*]:-none}" >&2; exit 1; }
mkdir -p "$out_dir"
rm -f "$out_dir"/sinew-*.whl
mv "${built[0]}" "$out_dir/"
echo "$out_dir/$(basename "${built[0]}")"
