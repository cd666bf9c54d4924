#!/usr/bin/env bash
# Builds the Blender extension: dist/sinew-<version>.zip, whose path is printed as the last line.
#
#   1. scripts/build_wheel.sh builds the `sinew` Python module (abi3 wheel, new version each build);
#   2. the wheel replaces any old one in blender_addon/wheels/ (git-ignored);
#   3. blender_addon/ is copied to dist/extension_staging/sinew/ with a generated manifest: the
#      tracked blender_manifest.toml is the template; the copy gets a version with build metadata
#      (0.1.0+<UTC time>, new every build, so Blender never keeps a stale install) and the wheel in
#      `wheels = [...]`. Tracked files are never modified;
#   4. Blender's own extension CLI (blender_ext.py from the bpy package in .venv, which is what
#      `blender --command extension` runs) validates the staging directory and builds the zip.
#
# The wheel is built for manylinux_2_28 (glibc 2.28, the floor of Blender's Linux builds) with
# `maturin --zig` (zig from the `ziglang` package in requirements-dev.txt), so the zip runs on every
# Linux Blender runs on, not only on distributions as new as the build machine. Without zig it
# falls back to a host-glibc build with a loud warning, and fails under CI=true.
# SINEW_MATURIN_ARGS, when set (even empty), is passed to maturin as it is instead.
#
# Release (.github/workflows/release.yml): `scripts/build_extension.sh --wheels DIR` builds no
# wheel; it bundles every sinew wheel in DIR (one per platform), lists their platforms in the
# manifest and packs one zip per platform with `build --split-platforms`
# (dist/sinew-<version>-<platform>.zip; version: the manifest's, or SINEW_EXTENSION_VERSION).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || scripts/bootstrap.sh
[ -x scripts/build_wheel.sh ] || { echo "build_extension: scripts/build_wheel.sh is missing" >&2; exit 1; }

release_wheels=
if [ "${1:-}" = "--wheels" ]; then
  release_wheels=${2:?build_extension: --wheels needs a directory}
  [ -d "$release_wheels" ] || { echo "build_extension: $release_wheels is not a directory" >&2; exit 1; }
elif [ $# -gt 0 ]; then
  echo "usage: scripts/build_extension.sh [--wheels DIR]" >&2; exit 2
fi

mkdir -p blender_addon/wheels dist
if [ -n "$release_wheels" ]; then
  shopt -s nullglob
  wheels=("$release_wheels"/sinew-*.whl)
  shopt -u nullglob
  [ ${#wheels[@]} -gt 0 ] || { echo "build_extension: no sinew-*.whl in $release_wheels" >&2; exit 1; }
  rm -f blender_addon/wheels/*.whl
  cp "${wheels[@]}" blender_addon/wheels/
else
  if [ -z "${SINEW_MATURIN_ARGS+set}" ]; then
    if "$PY" -m ziglang version >/dev/null 2>&1; then
      export SINEW_MATURIN_ARGS="--zig --compatibility manylinux_2_28"
    else
      {
        echo "################################################################################"
        echo "build_extension: WARNING: zig is not available (.venv/bin/python -m ziglang failed)."
        echo "build_extension: building the wheel against THIS machine's glibc ($(ldd --version 2>/dev/null | head -n1 | awk '{print $NF}'))."
        echo "build_extension: the zip will NOT load in Blender on older Linux distributions."
        echo "build_extension: install zig with: .venv/bin/python -m pip install ziglang"
        echo "################################################################################"
      } >&2
      if [ "${CI:-}" = true ]; then
        echo "build_extension: CI=true: refusing to build a host-glibc extension" >&2
        exit 1
      fi
      export SINEW_MATURIN_ARGS=""
    fi
  fi
  # The wheel script's output goes to stderr (the log); its last line is the wheel's path.
  wheel_out=$(scripts/build_wheel.sh)
  printf '%s\n' "$wheel_out" >&2
  wheel=$(printf '%s\n' "$wheel_out" | tail -n1)
  [ -f "$wheel" ] || { echo "build_extension: build_wheel.sh did not print a wheel path (got '$wheel')" >&2; exit 1; }
  rm -f blender_addon/wheels/*.whl
  cp "$wheel" blender_addon/wheels/
  wheels=("$wheel")
fi

staging=dist/extension_staging/sinew
rm -rf dist/extension_staging
mkdir -p dist/extension_staging
stamp=$(date -u +%Y%m%d%H%M%S)
release=${release_wheels:+1}
version=$(SINEW_RELEASE=$release "$PY" - "$staging" "$stamp" "${wheels[@]##*/}" <<'EOF'
import os, re, shutil, sys, tomllib
staging, stamp, *wheels = sys.argv[1:]
release = os.environ.get("SINEW_RELEASE") == "1"
shutil.copytree("blender_addon", staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
path = f"{staging}/blender_manifest.toml"
text = open(path, encoding="utf-8").read()
base = tomllib.loads(text)["version"].split("+")[0]
version = (os.environ.get("SINEW_EXTENSION_VERSION") or base) if release else f"{base}+{stamp}"
entries = [f"./wheels/{w}" for w in sorted(wheels)]
text, n1 = re.subn(r'(?m)^version = "[^"]*"$', f'version = "{version}"', text)
text, n2 = re.subn(r'(?m)^wheels = \[\]$', "wheels = [" + ", ".join(f'"{e}"' for e in entries) + "]", text)
assert n1 == 1 and n2 == 1, "blender_manifest.toml template: expected one `version = ...` and one `wheels = []` line"
if release:
    # One Blender platform per wheel tag (blender_ext.py maps wheel tags the same way).
    def platform(wheel):
        tag = wheel[:-len(".whl")].split("-")[-1]
        if "linux" in tag and tag.endswith("x86_64"):
            return ["linux-x64"]
        if tag == "win_amd64":
            return ["windows-x64"]
        if tag.startswith("macosx") and tag.endswith("universal2"):
            return ["macos-arm64", "macos-x64"]
        if tag.startswith("macosx") and tag.endswith("arm64"):
            return ["macos-arm64"]
        if tag.startswith("macosx") and tag.endswith("x86_64"):
            return ["macos-x64"]
        sys.exit(f"build_extension: no Blender platform for wheel {wheel}")
    platforms = sorted({p for w in wheels for p in platform(w)})
    text, n3 = re.subn(r'(?m)^platforms = \[[^\]]*\]$', "platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]", text)
    assert n3 == 1, "blender_manifest.toml template: expected one `platforms = [...]` line"
m = tomllib.loads(text)
assert m["version"] == version and m["wheels"] == entries, m
open(path, "w", encoding="utf-8").write(text)
print(version)
EOF
)

blender_ext=$("$PY" - <<'EOF'
import glob, importlib.util, os
root = os.path.dirname(importlib.util.find_spec("bpy").origin)
hits = sorted(glob.glob(os.path.join(root, "*", "scripts", "addons_core", "bl_pkg", "cli", "blender_ext.py")))
print(hits[-1] if hits else "")
EOF
)
[ -f "$blender_ext" ] || { echo "build_extension: blender_ext.py not found in the bpy package" >&2; exit 1; }
tags=$(dirname "$blender_ext")/../../../modules/_bpy_internal/extensions/tags.py

"$PY" "$blender_ext" validate --valid-tags="$tags" "$staging" >&2
rm -f dist/sinew-*.zip
if [ -n "$release_wheels" ]; then
  # One zip per platform, each with only its own wheel: dist/sinew-<version>-<platform>.zip.
  "$PY" "$blender_ext" build --valid-tags="$tags" --source-dir "$staging" --output-dir dist --split-platforms >&2
  shopt -s nullglob
  zips=(dist/sinew-*.zip)
  [ ${#zips[@]} -gt 0 ] || { echo "build_extension: --split-platforms built no zip" >&2; exit 1; }
  for z in "${zips[@]}"; do
    "$PY" "$blender_ext" validate --valid-tags="$tags" "$z" >&2
    echo "$PWD/$z"
  done
  exit 0
fi
zip="dist/sinew-$version.zip"
"$PY" "$blender_ext" build --valid-tags="$tags" --source-dir "$staging" --output-filepath "$zip" >&2
"$PY" "$blender_ext" validate --valid-tags="$tags" "$zip" >&2
echo "$PWD/$zip"
