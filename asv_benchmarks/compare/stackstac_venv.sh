#!/usr/bin/env bash
# Create .venv-stackstac (the repository root) with stackstac 0.5.1 and what it needs to read the
# STAC comparison's COG Items (compare/stac.py's stackstac row, run by compare/stac_stackstac.py).
# stackstac 0.5.1 pins pandas < 3, so it cannot share rumimm's venv.  rasterio is pinned to the
# release odc-stac's row uses (the same GDAL under both COG loaders).  Idempotent: an existing venv
# with stackstac 0.5.1 is kept.  Prints the versions it holds.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.venv-stackstac
PY=${PYTHON:-python3}
if ! { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import stackstac, sys; sys.exit(stackstac.__version__ != "0.5.1")' 2>/dev/null; }; then
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet "stackstac==0.5.1" "rasterio==1.4.4" pystac dask numpy
fi
"$VENV/bin/python" -m asv_benchmarks.compare.stac_stackstac --versions
