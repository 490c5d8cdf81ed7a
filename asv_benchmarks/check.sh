#!/usr/bin/env bash
# Regression check: benchmark a base commit (default: main) and the working tree with
# `asv continuous`, each built in its own virtualenv (asv.conf.json), on a focused quick
# subset; exit 1 when a benchmark got slower by more than the factor.  Then the engine
# against its decode floor (bench_floor: read time / decode-only time of the same frames,
# measured inside one process, so a slower machine does not move it): exit 1 when a ratio
# grew by more than RATIO_FACTOR.
#
#   asv_benchmarks/check.sh [BASE]        BASE: any commit-ish, default main
#   FACTOR=2.0 ROUNDS=4 BENCH='regex' asv_benchmarks/check.sh
#   RATIO_FACTOR=1.3 RATIO_BENCH='regex' asv_benchmarks/check.sh      RATIO_BENCH= skips the ratios
#
# The working tree (tracked and untracked files, .gitignore respected) is measured as a
# throwaway commit object: HEAD, the index and every ref are left alone.
# Defaults (chosen from measurements on a shared 2-core machine, docs/performance.md):
# factor 2.0, 4 rounds interleaved between the two builds; ratio factor 1.5, one round (a
# track_ benchmark keeps one value a build: its medians over many paired reads are inside it).
set -euo pipefail
cd "$(dirname "$0")"
. ./subset.sh

base=${1:-main}
factor=${FACTOR:-2.0}
rounds=${ROUNDS:-4}
bench=${BENCH:-$QUICK_BENCH}
ratio_factor=${RATIO_FACTOR:-1.5}
ratio_bench=${RATIO_BENCH-$QUICK_RATIOS}

git rev-parse --verify --quiet "$base^{commit}" >/dev/null || { echo "check.sh: unknown base '$base'" >&2; exit 2; }
base_commit=$(git rev-parse "$base^{commit}")  # resolved once: both comparisons measure the same base

# snapshot the working tree into a commit object, without touching the real index
index=$(mktemp)
trap 'rm -f "$index"' EXIT
cp "$(git rev-parse --git-path index)" "$index"
GIT_INDEX_FILE=$index git add -A -- "$(git rev-parse --show-toplevel)"
tree=$(GIT_INDEX_FILE=$index git write-tree)
if [ "$tree" = "$(git rev-parse 'HEAD^{tree}')" ]; then
    head=$(git rev-parse HEAD)
else
    head=$(git -c user.name=check.sh -c user.email=check.sh@localhost \
        commit-tree "$tree" -p HEAD -m "working tree of $(git rev-parse --short HEAD)")
fi
echo "check.sh: base $base ($(git rev-parse --short "$base")) against the working tree ($(git rev-parse --short "$head")), factor $factor, $rounds rounds; decode-floor ratios: factor $ratio_factor"

ensure_machine
status=0
# exit status 1 when any benchmark is slower by more than the factor (and significantly so)
asv continuous --config asv.conf.json --factor "$factor" --interleave-rounds \
    -a rounds="$rounds" --bench "$bench" --split --show-stderr "$base_commit" "$head" || status=$?
if [ -n "$ratio_bench" ]; then
    # a ratio (unit "ratio", higher is worse) grew by more than the ratio factor: the engine, not the machine
    asv continuous --config asv.conf.json --factor "$ratio_factor" -a rounds=1 \
        --bench "$ratio_bench" --split --show-stderr "$base_commit" "$head" || { r=$?; [ "$r" -gt "$status" ] && status=$r; }
fi
exit "$status"
