#!/usr/bin/env bash
# The add-on's tests (tests/blender) on every Blender release line the manifest allows, each in its
# own venv with that release's bpy from PyPI:
#
#   scripts/test_blender_versions.sh               # 4.2 LTS, 4.5 LTS, 5.0, 5.2 (the default matrix)
#   scripts/test_blender_versions.sh 4.2 5.2 -x    # chosen versions; arguments after them go to pytest
#
#   version  venv          Python        bpy
#   4.2      .venv-bpy42   CPython 3.11  bpy==4.2.*  (pre-slotted actions: Action.fcurves)
#   4.5      .venv-bpy45   CPython 3.11  bpy==4.5.*
#   5.0      .venv         CPython 3.11  bpy==5.0.*  (the project's own venv: what ./dev test runs)
#   5.x≥5.1  .venv-bpy5x   CPython 3.13  bpy==5.x.*
#
# CPython 3.13 is looked up as SINEW_PYTHON313, python3.13 on PATH, or pyenv's newest 3.13. The
# extension zip is built once (scripts/build_extension.sh, with .venv) and installed into each
# Blender as a user would; the same abi3 wheel serves every version. A venv is set up once and
# refreshed only when what it installs changes. Each bpy wheel is 300-400 MB (pip caches them).
# Prints one summary line per version and exits non-zero if any version failed.
set -euo pipefail
cd "$(dirname "$0")/.."

versions=()
while [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+\.[0-9]+$ ]]; do versions+=("$1"); shift; done
[ ${#versions[@]} -gt 0 ] || versions=(4.2 4.5 5.0 5.2)
pytest_args=("$@")

python313() {
  local c
  for c in "${SINEW_PYTHON313:-}" python3.13 "$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13 2>/dev/null | sort -V | tail -n1)"; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 \
        && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  return 1
}

python311() {
  local c
  for c in "${SINEW_PYTHON:-}" python3.11 python3; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 \
        && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  return 1
}

# venv for one version: prints its python, or fails with the reason on stderr.
setup_venv() {
  local v=$1 major=${1%%.*} minor=${1#*.} venv py reqs stamp want
  if [ "$v" = 5.0 ]; then
    scripts/bootstrap.sh >&2
    echo .venv/bin/python; return 0
  fi
  venv=.venv-bpy$major$minor
  if [ "$major" -gt 5 ] || { [ "$major" = 5 ] && [ "$minor" -ge 1 ]; }; then
    py=$(python313) || { echo "no CPython 3.13 (bpy $v needs it): set SINEW_PYTHON313" >&2; return 1; }
    # Blender 5.1+ bundles numpy 2.x: whatever bpy pulls in.
    reqs=("bpy==$v.*" "pytest>=8")
  else
    py=$(python311) || { echo "no CPython 3.11 (bpy $v needs it): set SINEW_PYTHON" >&2; return 1; }
    # Blender 4.2-5.0 bundle numpy 1.26.
    reqs=("bpy==$v.*" "numpy==1.26.*" "pytest>=8")
  fi
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" >&2
  stamp=$venv/.requirements
  want="${reqs[*]}"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${reqs[@]}" >&2
    echo "$want" > "$stamp"
  fi
  echo "$venv/bin/python"
}

scripts/bootstrap.sh
scripts/build_extension.sh >/dev/null

declare -A result
status=0
for v in "${versions[@]}"; do
  echo "=== Blender $v" >&2
  if ! py=$(setup_venv "$v"); then
    result[$v]="NOT RUN (venv set-up failed, see above)"; status=1; continue
  fi
  have=$("$py" -c 'import bpy, sys; print(bpy.app.version_string, "/ CPython", sys.version.split()[0])' 2>/dev/null | tail -n1)
  log=$(mktemp "${TMPDIR:-/tmp}/sinew-bpy$v.XXXXXX")
  set +e
  "$py" -m pytest -q -p no:cacheprovider tests/blender "${pytest_args[@]}" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error)' "$log" | tail -n1 | sed 's/=//g; s/^ *//; s/ *$//')
  rm -f "$log"
  result[$v]="bpy $have: ${summary:-no pytest summary} (exit $rc)"
  [ "$rc" = 0 ] || status=1
done

echo
echo "Blender versions (tests/blender):"
for v in "${versions[@]}"; do echo "  $v  ${result[$v]}"; done
exit $status
