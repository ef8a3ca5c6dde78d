#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh machine of this kind, then runs the whole suite
# under two Triton releases: the newest that works here (3.9.0) and 3.6.0, which the GPU machine has.
# Re-running reuses the virtual environments.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PIP_DISABLE_PIP_VERSION_CHECK=1

setup() {
    local venv=$1 triton=$2 numpy=$3
    [ -x "$venv/bin/python" ] || "$PY" -m venv "$venv"
    # torch first, from the CPU wheel on disk, so nothing resolves a CUDA build
    "$venv/bin/pip" install -q torch==2.13.0 2>&1 | grep -v "is ignored" || true
    "$venv/bin/pip" install -q "triton==$triton" "$numpy" -e '.[test]' 2>&1 | grep -v "is ignored" || true
    "$venv/bin/python" -c "import triton, torch, numpy; print('$venv: triton', triton.__version__, 'torch', torch.__version__, 'numpy', numpy.__version__)"
}

# Debian's Chromium for the browser tests (Playwright's own browser download does not work here)
if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get install -y -q chromium >/dev/null 2>&1 || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; }
fi

setup .venv 3.9.0 "numpy>=2.4"
setup .venv-triton36 3.6.0 "numpy>=2.4"

status=0
echo "== Triton 3.9.0: whole suite"
.venv/bin/python -m pytest -q -p no:cacheprovider tests "$@" || status=$?
echo "== Triton 3.6.0: whole suite"
.venv-triton36/bin/python -m pytest -q -p no:cacheprovider tests "$@" || status=$?
exit $status
