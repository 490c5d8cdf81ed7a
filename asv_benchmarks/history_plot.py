"""Draw benchmark history from asv results as one PNG (for the docs; asv publish draws the HTML).

    python asv_benchmarks/history_plot.py --out docs/asv-history.png [--branch main]

Reads ``.asv/results`` (written by ``history.sh``), keeps the commits of ``--branch``
in history order, and plots each chosen row (benchmark + parameters): the median of
its samples with the interquartile range as a bar, and the fastest sample (on a
shared machine, the least disturbed one).  Commits without a result for a row are
left out of that row.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))

# (panel title, benchmark name, parameter values as asv stores them)
ROWS = [
    ("open (with the blob) + one 64 x 64 read, tile frames", "bench_read.Open.time_open_read_64", ("'tile'", "'blob'")),
    ("1024 x 1024 window, all bands, 1 thread", "bench_read.WindowReadThreads.time_read", ("1", "'window 1024'")),
    ("full image (4 x 2048 x 2048 uint16), 1 thread", "bench_read.WindowReadThreads.time_read", ("1", "'full'")),
    ("cold start: import, open, first 64 x 64 read", "bench_coldstart.ColdStart.timeraw_import_open_read_64",
     ("'tile'",)),
]


def _branch_commits(branch: str) -> list[str]:
    """Full hashes of ``branch``'s first-parent history, oldest first."""
    out = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", branch], cwd=HERE, check=True,
                         capture_output=True, text=True).stdout
    return out.split()


def _load(results_dir: str) -> dict[str, dict]:
    """commit hash -> that commit's results file (the newest one if several environments)."""
    by_commit = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "*", "*.json"))):
        if os.path.basename(path) in ("machine.json", "benchmarks.json"):
            continue
        with open(path) as fh:
            data = json.load(fh)
        by_commit[data["commit_hash"]] = data
    return by_commit


def _row(data: dict, name: str, params: tuple[str, ...]):
    """(median, q25, q75, fastest sample) of one parameter combination, or None when not measured."""
    entry = data["results"].get(name)
    if entry is None:
        return None
    cols = dict(zip(data["result_columns"], entry, strict=False))  # asv drops an entry's trailing None columns
    combos = list(itertools.product(*cols["params"])) if cols["params"] else [()]
    if params not in combos:
        return None
    i = combos.index(params)
    values = [cols.get(k) and cols[k][i] for k in ("result", "stats_q_25", "stats_q_75")]
    if values[0] is None:
        return None
    samples = cols.get("samples") and cols["samples"][i]
    values = [v if v is not None else values[0] for v in values]
    return (*values, min(samples) if samples else None)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", default=os.path.join(HERE, ".asv", "results"))
    parser.add_argument("--branch", default="main")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(HERE), "docs", "asv-history.png"))
    args = parser.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = _load(args.results_dir)
    commits = [c for c in _branch_commits(args.branch) if c in results]
    if not commits:
        raise SystemExit(f"no results for any commit of {args.branch} in {args.results_dir}")
    fig, axes = plt.subplots(len(ROWS), 1, figsize=(9, 2.6 * len(ROWS)), sharex=True)
    for ax, (title, name, params) in zip(axes, ROWS, strict=True):
        xs, med, lo, hi, fastest = [], [], [], [], []
        for x, commit in enumerate(commits):
            row = _row(results[commit], name, params)
            if row is not None:
                xs.append(x)
                med.append(row[0] * 1e3)
                lo.append((row[0] - row[1]) * 1e3)
                hi.append((row[2] - row[0]) * 1e3)
                fastest.append(float("nan") if row[3] is None else row[3] * 1e3)
        ax.errorbar(xs, med, yerr=[lo, hi], marker="o", capsize=3, label="median (bar: interquartile range)")
        if any(f == f for f in fastest):  # samples are kept when history.sh ran with --record-samples
            ax.plot(xs, fastest, "v--", color="tab:green", alpha=0.8, label="fastest sample")
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    axes[-1].set_xticks(range(len(commits)), [c[:7] for c in commits], rotation=45, ha="right", fontsize=8)
    axes[0].legend(fontsize=8, loc="upper left")
    axes[-1].set_xlabel(f"commits of {args.branch} that change the library, oldest first")
    fig.tight_layout()
    fig.savefig(args.out, dpi=90)
    print(f"wrote {args.out} ({len(commits)} commits)")


if __name__ == "__main__":
    main()
