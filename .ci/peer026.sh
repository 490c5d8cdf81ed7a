#!/usr/bin/env bash
# Create .venv-rumi026 (the repository root) with rumi-eo 0.26.1, the spec 0.2 peer the tests
# run as a black box (tests/peer026.py).  It pins geozl 0.18 / openzl 0.2, so it cannot share
# rumimm's venv.  Idempotent: an existing venv with rumi-eo 0.26.1 is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-rumi026
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import rumi, sys; sys.exit(rumi.__version__ != "0.26.1")' 2>/dev/null; then
    exit 0
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "rumi-eo==0.26.1"
"$VENV/bin/python" -c 'import rumi, geozl; print("peer:", "rumi-eo", rumi.__version__, "geozl", geozl.__version__)'
