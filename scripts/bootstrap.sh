#!/usr/bin/env bash
# Creates .venv (CPython 3.11, as Blender 4.2–5.0 bundle) with requirements-dev.txt, once.
# Re-runs pip only when requirements-dev.txt changed since the last successful install; installs
# valgrind (for the C example's memory check) with apt-get when it is missing and we are root.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${SINEW_PYTHON:-}
if [ -z "$PY" ]; then
  for c in python3.11 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then PY=$c; break; fi
  done
fi
[ -n "$PY" ] || { echo "bootstrap: CPython 3.11 is required (bpy 5.0 is built for it); set SINEW_PYTHON" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  echo "$want" > "$stamp"
fi
# The C example runs under valgrind in the tests (required in CI): install it where we can.
if ! command -v valgrind >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "bootstrap: installing valgrind (apt-get)" >&2
  (apt-get install -y -q valgrind >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q valgrind >/dev/null; }) \
    || echo "bootstrap: could not install valgrind; the C example's valgrind test will fail in CI" >&2
fi
