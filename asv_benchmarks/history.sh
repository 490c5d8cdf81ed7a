#!/usr/bin/env bash
# History: benchmark the last N commits of main that change the library (rumimm/ or
# pyproject.toml; a commit touching only docs or tests measures the same code), each
# built in its own virtualenv, skipping commits already measured; then render the HTML
# (.asv/html, one graph per benchmark) with `asv publish`.
#
#   asv_benchmarks/history.sh [N] [BRANCH]      N defaults to 10, BRANCH to main
#   BENCH='regex' asv_benchmarks/history.sh 20  another subset (default: check.sh's two)
#   ROUNDS=3 asv_benchmarks/history.sh          rounds per commit, interleaved (default 2)
#   ALL_COMMITS=1 asv_benchmarks/history.sh 10  every commit, docs-only ones included
set -euo pipefail
cd "$(dirname "$0")"
. ./subset.sh

n=${1:-10}
branch=${2:-main}
bench=${BENCH:-$QUICK_BENCH|$QUICK_RATIOS}

hashes=$(mktemp)
trap 'rm -f "$hashes"' EXIT
if [ -n "${ALL_COMMITS:-}" ]; then
    git rev-list --first-parent -n "$n" "$branch" >"$hashes"
else
    git rev-list --first-parent -n "$n" "$branch" -- ../rumimm ../pyproject.toml >"$hashes"
fi
echo "history.sh: $(wc -l <"$hashes") commits of $branch"

ensure_machine
# --interleave-rounds: round 1 of every commit, then round 2, so a busy spell of the machine
# spreads over all commits instead of lifting the few measured during it
asv run --config asv.conf.json --skip-existing-commits --record-samples --interleave-rounds \
    -a rounds="${ROUNDS:-2}" --bench "$bench" "HASHFILE:$hashes"
asv publish --config asv.conf.json
echo "history.sh: open $(pwd)/.asv/html/index.html, or run: asv preview --config asv.conf.json"
