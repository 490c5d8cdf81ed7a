#!/usr/bin/env bash
# The supported Pythons beyond CI's main run (Python 3.11, every test, every extra), each in a
# fresh venv built from pyproject.toml as a user would build it today:
#   3.12    today's resolution, the fast subset (-m "not slow"), and torchgeo installed: the
#           rumimm.torchgeo tests run here only (torchgeo needs Python >= 3.12; it brings torch)
#   3.13    today's resolution, the fast subset
#   lowest  Python 3.11 with the lowest versions pyproject.toml allows for rumimm's direct
#           dependencies (uv's --resolution lowest-direct), the fast subset
# The slow tests run once, in the main run.  The three venvs install concurrently (network and
# disk) while the test runs go one after another (CPU), each as soon as its venv is ready.  Each
# part prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."

part() { printf '\n== pythons.sh: %s (%ss since start)\n' "$1" "$SECONDS"; }

find_python() {  # newest CPython X.Y from pyenv, else pythonX.Y on PATH; no silent fallback
    local want=$1 cand=""
    if command -v pyenv >/dev/null 2>&1; then
        cand=$(ls -d "$(pyenv root)/versions/$want".* 2>/dev/null | grep -E "/$want\.[0-9]+$" | sort -V | tail -1 || true)
    fi
    if [ -n "$cand" ] && [ -x "$cand/bin/python" ]; then echo "$cand/bin/python"; return; fi
    command -v "python$want" || { echo "pythons.sh: no Python $want (pyenv or PATH)" >&2; return 1; }
}

LOGS=.venv-ci-logs  # install logs and times (a .venv* folder: git ignores it)
rm -rf "$LOGS" && mkdir -p "$LOGS"
bash .ci/peer026.sh  # the spec 0.2 peer's venv, which every run's interop tests call (kept if .ci/run made it)
PY311=$(find_python 3.11)
PY312=$(find_python 3.12)
PY313=$(find_python 3.13)

# Each install logs to its own file (printed only when it fails) and records its seconds.
install_pip() {  # name python extras
    local name=$1 py=$2 extras=$3 t0=$SECONDS
    rm -rf ".venv-ci-$name"
    "$py" -m venv ".venv-ci-$name"
    ".venv-ci-$name/bin/python" -m pip install --quiet --upgrade pip
    ".venv-ci-$name/bin/python" -m pip install -e ".[$extras]"
    echo "$((SECONDS - t0))" > "$LOGS/$name.seconds"
}

install_lowest() {
    local t0=$SECONDS
    rm -rf .venv-ci-lowest .venv-ci-uv
    "$PY311" -m venv .venv-ci-uv
    .venv-ci-uv/bin/python -m pip install --quiet uv
    .venv-ci-uv/bin/uv venv --quiet --python "$PY311" .venv-ci-lowest
    # lowest-direct: every dependency pyproject.toml names (rumimm's and the test extra's) at its floor,
    # the rest resolved as today.  A floor with no wheel for this Python is built from source and, for
    # the compiled ones (GDAL's rasterio), fails here: a user without a compiler gets no further
    VIRTUAL_ENV=$PWD/.venv-ci-lowest .venv-ci-uv/bin/uv pip install --resolution lowest-direct -e ".[test]"
    echo "$((SECONDS - t0))" > "$LOGS/lowest.seconds"
}

part "installing 3.12 (with torchgeo), 3.13 and lowest-3.11 venvs concurrently"
install_pip 312 "$PY312" "test,torchgeo" > "$LOGS/312.log" 2>&1 & pid312=$!
install_pip 313 "$PY313" "test" > "$LOGS/313.log" 2>&1 & pid313=$!
install_lowest > "$LOGS/lowest.log" 2>&1 & pidlow=$!

failed=()
run() {  # name pid: wait for its venv, then run the fast subset in it
    local name=$1 pid=$2 t0
    if ! wait "$pid"; then
        echo "pythons.sh: installing the $name venv failed:"; tail -40 "$LOGS/$name.log"
        failed+=("$name (install)"); return
    fi
    part "$name: installed in $(cat "$LOGS/$name.seconds") s"
    ".venv-ci-$name/bin/python" - <<'EOF'
import importlib.metadata as md, sys
names = ["numpy", "numba", "llvmlite", "ml_dtypes", "pyproj", "openzl", "geozl", "rasterio", "pyarrow", "xarray",
         "dask", "pandas", "rumi-eo", "torch", "torchgeo"]
have = []
for n in names:
    try:
        have.append(f"{n} {md.version(n)}")
    except md.PackageNotFoundError:
        pass
print(f"python {sys.version.split()[0]}: " + ", ".join(have))
EOF
    t0=$SECONDS
    # a hang fails the run instead of eating CI's time (the fast subset takes 2-5 minutes here)
    if ! timeout -k 30 1200 ".venv-ci-$name/bin/python" -m pytest -q -m "not slow" -p no:cacheprovider \
            | tee "$LOGS/$name.pytest"; then
        failed+=("$name")
    fi
    part "$name: tests took $((SECONDS - t0)) s"
}

count() {  # "N <word>" in the summary line (the last) of every run's pytest output, added up
    for f in "$LOGS"/*.pytest; do [ -f "$f" ] && tail -n 1 "$f"; done | { grep -oE "[0-9]+ $1" || true; } \
        | awk '{s += $1} END {print s + 0}'
}

# in the order the venvs are ready (uv is quickest, torch the largest download): later installs overlap
# earlier test runs
run lowest "$pidlow"
run 313 "$pid313"
run 312 "$pid312"

passed=$(count passed)
failures=$(count failed)
if [ "${#failed[@]}" -ne 0 ]; then
    echo "pythons.sh: failed: ${failed[*]}"
    echo "pythons: $passed passed, $failures failed"
    exit 1
fi
part "all Pythons passed"
echo "pythons: $passed passed, $failures failed"  # the three runs together, as CI reads a closing line
