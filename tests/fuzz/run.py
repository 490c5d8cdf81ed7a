"""Run fuzz targets one after another for a fixed time each and report what they did.

Short run (CI: every target, fixed seed, new inputs thrown away)::

    python -m tests.fuzz.run --all --seconds 20 --seed 1

Long run (docs/reliability.md; new inputs that add coverage are kept in tests/fuzz/corpus)::

    python -m tests.fuzz.run --all --minutes 15 --keep --summary fuzz-summary

Each target runs in its own process (``tests.fuzz.main``) on its seeds (built afresh by
``tests.fuzz.seeds``), its kept corpus (``tests/fuzz/corpus/<target>``) and its
regressions (``tests/fuzz/regressions/<target>``), with libFuzzer's ``-timeout`` per input
and ``-rss_limit_mb``.  Per target it prints executions, coverage (libFuzzer's ``cov``
edges and ``ft`` features at the end of the run), corpus size and findings (inputs
libFuzzer saved as crash-, timeout-, oom- or leak-); ``--summary NAME`` writes
``NAME.json`` and ``NAME.md`` (a table for docs/reliability.md).  After ``open_read``, the
spec 0.2 files of its corpus are read by rumi-eo 0.26.1 in one batch and compared with
rumimm (``tests.fuzz.peer026``; skipped with a note when that peer's venv is absent).
With ``--keep``, each target's corpus is merged (``-merge=1``) and what the seeds do not
already hold is written to ``tests/fuzz/corpus/<target>`` (files named by their SHA-1).
Exit status 1 if any target had a finding.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests")]

from fuzz.seeds import CORPUS, REGRESSIONS, write_seeds  # noqa: E402
from fuzz.targets import TARGETS  # noqa: E402

_DONE = re.compile(r"#(\d+)\s+DONE\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\d+)(\w*)")
_LAST = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/(\d+)(\w*)")
_STAT = re.compile(r"stat::(\w+):\s+(\d+)")
_FINDING = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")


def _size(n: str, unit: str) -> int:
    return int(n) * {"b": 1, "Kb": 1 << 10, "Mb": 1 << 20}.get(unit, 1)


def run_target(name: str, seconds: float, seed: int, work: Path, timeout: int, keep: bool,
               chunk: float = 0) -> dict:
    """Fuzz ``name`` for ``seconds``; with ``chunk`` > 0, in fresh processes of at most ``chunk`` seconds.

    Each piece starts from every input the earlier ones found (they share the ``new`` folder), with the
    next seed, so coverage keeps growing; a fresh process also restarts libFuzzer's resident-memory
    count, which creeps up by about 0.4 KB an execution in the fuzzing process itself (not in rumimm:
    the same inputs replayed in a plain loop keep a flat resident size), so an hours-long run in one
    process would end in an out-of-memory call that no input caused.
    """
    t = TARGETS[name]
    seeds = work / "seeds" / name
    new = work / "new" / name
    findings = work / "findings" / name
    for d in (new, findings):
        d.mkdir(parents=True, exist_ok=True)
    dirs = [new, seeds] + [d / name for d in (CORPUS, REGRESSIONS) if (d / name).is_dir()]
    pieces = [seconds] if chunk <= 0 else [min(chunk, seconds - i) for i in range(0, int(seconds), int(chunk))]
    t0 = time.monotonic()
    logs, runs = [], []
    for i, piece in enumerate(pieces):
        runs.append(_run_piece(name, t, piece, seed + i, timeout, findings, dirs))
        logs.append(runs[-1]["log"])
        if runs[-1]["found"] or runs[-1]["error"]:
            break
    elapsed = time.monotonic() - t0
    (work / f"{name}.log").write_text("\n".join(logs))
    last = runs[-1]
    found = sorted(p.name for p in findings.iterdir() if p.name.startswith(_FINDING))
    out = {"target": name, "seconds": round(elapsed, 1), "fuzz_seconds": int(sum(pieces[:len(runs)])),
           "seed": seed, "processes": len(runs), "executions": sum(r["execs"] for r in runs),
           "exec_per_s": round(sum(r["execs"] for r in runs) / max(1.0, sum(pieces[:len(runs)]))),
           "cov": last["cov"], "ft": last["ft"], "corpus": last["corp"], "corpus_bytes": last["corp_bytes"],
           "new_units": sum(r["new_units"] for r in runs), "peak_rss_mb": max(r["rss"] for r in runs),
           "findings": found, "error": last["error"], "findings_dir": str(findings)}
    if keep and not found and not last["error"]:
        out["kept"] = _keep(name, dirs, seeds, work)
    return out


def _run_piece(name: str, t, seconds: float, seed: int, timeout: int, findings: Path, dirs: list[Path]) -> dict:
    """One fuzzing process: its log and libFuzzer's final numbers."""
    cmd = [sys.executable, "-m", "tests.fuzz.main", name, f"-max_total_time={int(seconds)}", f"-seed={seed}",
           f"-timeout={timeout}", f"-max_len={t.max_len}", "-print_final_stats=1",
           f"-artifact_prefix={findings}/", *map(str, dirs)]
    # the files each input is written to: in memory where there is /dev/shm, removed after the run
    scratch = tempfile.mkdtemp(prefix=f"rumimm-fuzz-{name}-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False,
                              env={**os.environ, "RUMIMM_FUZZ_SCRATCH": scratch},
                              timeout=seconds + 600)  # the warm-up and a last slow input, then it has hung
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    log = proc.stdout + proc.stderr
    m = _DONE.findall(log) or _LAST.findall(log)
    execs, cov, ft, corp, corp_bytes = (int(m[-1][0]), int(m[-1][1]), int(m[-1][2]), int(m[-1][3]),
                                        _size(m[-1][4], m[-1][5])) if m else (0, 0, 0, 0, 0)
    stats = {k: int(v) for k, v in _STAT.findall(log)}
    found = any(p.name.startswith(_FINDING) for p in findings.iterdir())
    error = None
    if proc.returncode and not found:
        error = f"exit {proc.returncode}: " + " | ".join(log.strip().splitlines()[-5:])
    return {"log": log, "execs": stats.get("number_of_executed_units", execs), "cov": cov, "ft": ft, "corp": corp,
            "corp_bytes": corp_bytes, "new_units": stats.get("new_units_added", 0),
            "rss": stats.get("peak_rss_mb", 0), "found": found, "error": error}


def _sha1s(folder: Path) -> set[str]:
    return {hashlib.sha1(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()}


def _keep(name: str, dirs: list[Path], seeds: Path, work: Path) -> int:
    """Merge every input of the run into a minimal set; keep in tests/fuzz/corpus what is not a seed."""
    merged = work / "merged" / name
    shutil.rmtree(merged, ignore_errors=True)
    merged.mkdir(parents=True)
    t = TARGETS[name]
    scratch = tempfile.mkdtemp(prefix=f"rumimm-fuzz-{name}-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        proc = subprocess.run([sys.executable, "-m", "tests.fuzz.main", name, "-merge=1", f"-max_len={t.max_len}",
                               "-timeout=30", str(merged), *map(str, dirs)], cwd=ROOT, capture_output=True, text=True,
                              check=False, env={**os.environ, "RUMIMM_FUZZ_SCRATCH": scratch})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (work / f"{name}.merge.log").write_text(proc.stdout + proc.stderr)
    if not any(merged.iterdir()):
        print(f"{name}: the merge kept nothing (exit {proc.returncode}; {work / f'{name}.merge.log'})", flush=True)
        return 0
    skip = _sha1s(seeds) | _sha1s(REGRESSIONS / name) if (REGRESSIONS / name).is_dir() else _sha1s(seeds)
    dest = CORPUS / name
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    n = 0
    for p in sorted(merged.iterdir()):
        data = p.read_bytes()
        h = hashlib.sha1(data).hexdigest()
        if h not in skip:
            (dest / h).write_bytes(data)
            n += 1
    return n


def markdown(rows: list[dict], peer: dict | None) -> str:
    lines = ["| target | fuzzing time (s) | executions | exec/s | cov | ft | corpus (inputs / KiB) | "
             "peak RSS (MB) | findings |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f = ", ".join(r["findings"]) or (r["error"] and "error (see log)") or "none"
        time_ = f"{r['fuzz_seconds']}" + (f" ({r['processes']} processes)" if r.get("processes", 1) > 1 else "")
        lines.append(f"| {r['target']} | {time_} | {r['executions']:,} | {r['exec_per_s']:,} | {r['cov']} "
                     f"| {r['ft']} | {r['corpus']} / {r['corpus_bytes'] / 1024:.0f} | {r['peak_rss_mb']} | {f} |")
    total = sum(r["fuzz_seconds"] for r in rows)
    lines.append(f"\n{len(rows)} targets, {total / 3600:.2f} h of fuzzing, "
                 f"{sum(r['executions'] for r in rows):,} executions.")
    if peer is not None:
        lines.append(f"\nspec 0.2 differential (rumi-eo 0.26.1): {peer.get('note') or peer}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("targets", nargs="*", help="target names (default with --all: every target)")
    ap.add_argument("--all", action="store_true", help="every target: " + ", ".join(TARGETS))
    ap.add_argument("--seconds", type=float, help="fuzzing time per target")
    ap.add_argument("--minutes", type=float, help="fuzzing time per target, in minutes")
    ap.add_argument("--seed", type=int, default=1, help="libFuzzer's -seed (default 1)")
    ap.add_argument("--timeout", type=int, default=10, help="seconds one input may take (libFuzzer -timeout)")
    ap.add_argument("--keep", action="store_true", help="merge what was found into tests/fuzz/corpus/<target>")
    ap.add_argument("--chunk-minutes", type=float, default=2.0,
                    help="a target's time in fresh processes of at most this long, each on the inputs found so far "
                         "(default 2; 0: one process)")
    ap.add_argument("--work", help="folder for seeds, new inputs, findings and logs (default: a temporary one)")
    ap.add_argument("--summary", help="write NAME.json and NAME.md")
    args = ap.parse_args(argv)
    names = list(TARGETS) if args.all or not args.targets else args.targets
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        ap.error(f"unknown targets {unknown}; known: {list(TARGETS)}")
    seconds = args.seconds if args.seconds is not None else (args.minutes or 0.25) * 60
    work = Path(args.work or tempfile.mkdtemp(prefix="rumimm-fuzz-run-"))
    work.mkdir(parents=True, exist_ok=True)
    write_seeds(work / "seeds", names)
    rows = []
    for name in names:
        r = run_target(name, seconds, args.seed, work, args.timeout, args.keep, args.chunk_minutes * 60)
        rows.append(r)
        f = ", ".join(r["findings"]) or r["error"] or "none"
        print(f"{name:10s} {r['executions']:>10,} execs  cov {r['cov']:>5}  ft {r['ft']:>6}  corpus {r['corpus']:>5}"
              f"  rss {r['peak_rss_mb']:>4} MB  findings: {f}", flush=True)
    peer = None
    if "open_read" in names:
        from fuzz.peer026 import compare_folders

        folders = [work / "new" / "open_read", work / "seeds" / "open_read", CORPUS / "open_read",
                   REGRESSIONS / "open_read"]
        peer = compare_folders([f for f in folders if f.is_dir()])
        print(f"open_read  spec 0.2 differential against rumi-eo 0.26.1: {peer.get('note') or peer}", flush=True)
    md = markdown(rows, peer)
    print(f"\nwork folder: {work}\n")
    print(md)
    if args.summary:
        Path(f"{args.summary}.json").write_text(json.dumps({"rows": rows, "peer026": peer}, indent=1) + "\n")
        Path(f"{args.summary}.md").write_text(md)
    bad = any(r["findings"] or r["error"] for r in rows) or bool(peer and peer.get("mismatches"))
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
