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
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || scripts/bootstrap.sh
[ -x scripts/build_wheel.sh ] || { echo "build_extension: scripts/build_wheel.sh is missing" >&2; exit 1; }

# The wheel script's output goes to stderr (the log); its last line is the wheel's path.
wheel_out=$(scripts/build_wheel.sh)
printf '%s\n' "$wheel_out" >&2
wheel=$(printf '%s\n' "$wheel_out" | tail -n1)
[ -f "$wheel" ] || { echo "build_extension: build_wheel.sh did not print a wheel path (got '$wheel')" >&2; exit 1; }

mkdir -p blender_addon/wheels dist
rm -f blender_addon/wheels/*.whl
cp "$wheel" blender_addon/wheels/

staging=dist/extension_staging/sinew
rm -rf dist/extension_staging
mkdir -p dist/extension_staging
stamp=$(date -u +%Y%m%d%H%M%S)
version=$("$PY" - "$staging" "$(basename "$wheel")" "$stamp" <<'EOF'
import re, shutil, sys, tomllib
staging, wheel, stamp = sys.argv[1:]
shutil.copytree("blender_addon", staging, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".*"))
path = f"{staging}/blender_manifest.toml"
text = open(path, encoding="utf-8").read()
base = tomllib.loads(text)["version"].split("+")[0]
version = f"{base}+{stamp}"
text, n1 = re.subn(r'(?m)^version = "[^"]*"$', f'version = "{version}"', text)
text, n2 = re.subn(r'(?m)^wheels = \[\]$', f'wheels = ["./wheels/{wheel}"]', text)
assert n1 == 1 and n2 == 1, "blender_manifest.toml template: expected one `version = ...` and one `wheels = []` line"
m = tomllib.loads(text)
assert m["version"] == version and m["wheels"] == [f"./wheels/{wheel}"], m
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
zip="dist/sinew-$version.zip"
"$PY" "$blender_ext" build --valid-tags="$tags" --source-dir "$staging" --output-filepath "$zip" >&2
"$PY" "$blender_ext" validate --valid-tags="$tags" "$zip" >&2
echo "$PWD/$zip"
