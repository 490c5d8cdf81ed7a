#!/usr/bin/env bash
# CI's short fuzz run: every target of tests/fuzz, one after another, for FUZZ_SECONDS (10) each with
# libFuzzer's -seed=1, on the seeds and the kept corpus; new inputs stay in the work folder (.venv-ci-fuzz,
# ignored by git), which also holds each target's log and any finding (crash-*, timeout-*, oom-*).
# Fails when a target has a finding or the spec 0.2 differential against rumi-eo 0.26.1 disagrees.
# The long run (docs/reliability.md#fuzzing) is the same command with --minutes and --keep.
set -euo pipefail
cd "$(dirname "$0")/.."
python -c "import atheris" || { echo "fuzz.sh: atheris is missing; pip install -e '.[fuzz]'"; exit 1; }
rm -rf .venv-ci-fuzz
python -m tests.fuzz.run --all --seconds "${FUZZ_SECONDS:-10}" --seed 1 --work .venv-ci-fuzz \
    --summary .venv-ci-fuzz/summary
