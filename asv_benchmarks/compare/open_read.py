"""Open + read of one chip, engines in turn on the same windows: the row the side-by-side table samples too thinly.

Usage (from the repository root)::

    python -m asv_benchmarks.compare.open_read                  # 400 windows, 1 thread
    python -m asv_benchmarks.compare.open_read --windows 1000 --chip 128

A 64 x 64 one-band chip costs one 512 x 512 frame's decode, and how long that takes depends
on the frame's content; ``compare/engines.py`` times 21 windows a round, each engine in a
process of its own at another moment, so its "open + read" ratios move by 0.2-0.4 between
runs.  Here one process writes the scene three times (rumimm's default codec, rumi-eo 0.16.0's
own writer, rumimm with ``codec="fast"``; 512-pixel tile frames) and, for each seeded window,
times ``rumi.read(path, blob, b=, y=, x=)`` on the reference's file and then
``rumimm.open(path, header=blob, cache_bytes=0)`` + the chip + ``close`` on each file, one
after another.  It prints each engine's median and its ratio to the reference: the ratio of
medians and the median of per-window ratios.  Every chip is compared with rumi-eo's.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time

import numpy as np

import rumimm
from asv_benchmarks.compare.common import EPSG, TRANSFORM, versions
from asv_benchmarks.compare.engines import write_reference


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=400)
    ap.add_argument("--chip", type=int, default=64)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)

    import rumi

    from rumimm.synthetic import eo_scene

    rumi.set_num_threads(1)
    rumimm.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="rumimm-open-read-") as work:
        scene = eo_scene(4, args.size, args.size, "uint16", seed=0)
        files = {}
        for name, codec in (("reference's file", "reference"), ("rumimm, default codec", None),
                            ("rumimm on reference file", "same"), ("rumimm, codec=fast", "fast")):
            if codec == "same":
                files[name] = files["reference's file"]
                continue
            path = os.path.join(work, f"{len(files)}.rumi")
            blob = (write_reference(path, scene, 512) if codec == "reference" else
                    rumimm.write(path, scene, tile=512, transform=TRANSFORM, crs=EPSG, codec=codec))
            files[name] = (path, blob)
        del scene
        rng = random.Random(args.seed)
        c, n = args.chip, args.size
        times: dict[str, list[float]] = {"rumi-eo on its file": [], **{k: [] for k in files if k != "reference's file"}}
        ref_path, ref_blob = files["reference's file"]
        for _ in range(args.windows):
            b, y, x = rng.randrange(4), rng.randrange(n - c), rng.randrange(n - c)
            t0 = time.perf_counter()
            want = rumi.read(ref_path, ref_blob, b=(b, b + 1), y=(y, y + c), x=(x, x + c), num_threads=1)
            times["rumi-eo on its file"].append(time.perf_counter() - t0)
            for name, (path, blob) in files.items():
                if name == "reference's file":
                    continue
                t0 = time.perf_counter()
                img = rumimm.open(path, header=blob, cache_bytes=0)
                got = img[b:b + 1, y:y + c, x:x + c]
                img.close()
                times[name].append(time.perf_counter() - t0)
                if not np.array_equal(got.reshape(-1), np.asarray(want).reshape(-1)):
                    raise RuntimeError(f"{name}: the chip at band {b}, y {y}, x {x} differs from rumi-eo's")
    base = times["rumi-eo on its file"]
    print(f"{args.windows} windows of {c} x {c}, one band, 1 thread; load average {os.getloadavg()[0]:.1f}")
    for name, t in times.items():
        per_window = statistics.median(a / r for a, r in zip(t, base, strict=True))
        mid = statistics.median(t)
        print(f"{name:26s} {mid * 1e6:8.1f} us   over rumi-eo: {mid / statistics.median(base):.2f}"
              f" (median per-window ratio {per_window:.2f})")
    found = versions(["rumimm", "rumi-eo", "numpy", "openzl", "geozl"])
    print("versions:", ", ".join(f"{k} {v}" for k, v in found.items()))
    return times


if __name__ == "__main__":
    main()
