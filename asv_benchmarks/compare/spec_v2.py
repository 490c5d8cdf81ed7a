"""Side-by-side on spec 0.2 files: rumimm against rumi-eo 0.26.1, on the bytes rumi-eo wrote.

Usage (from the repository root; rumi-eo 0.26.1 in its own venv, ``.ci/peer026.sh``)::

    python -m asv_benchmarks.compare.spec_v2            # 8 files of 4 x 2048 x 2048 uint16, tiles 512 and 128
    python -m asv_benchmarks.compare.spec_v2 --size 1024 --files 4 --reps 5   # a quicker check

1. Builds ``--files`` deterministic EO-like scenes (``rumimm.synthetic.eo_scene``, uint16,
   4 bands) and has rumi-eo 0.26.1 write each, for each tile size, with its recommended
   recipe: one ``h w`` frame per band (``b (row h) (col w) -> row col b (h w)``), each
   compressed by ``geozl.compress`` with a ``planar>zigzag>zstd`` graph built per frame.
2. Runs every (engine, tile, thread count) in its own subprocess (rumi-eo's in its own
   interpreter): rumi-eo's ``read``/``read_many`` and rumimm's ``open``/``read_batch``, both
   given the header rumi-eo returned and no frame cache (rumimm ``cache_bytes=0``; rumi-eo
   keeps none).  The rows: one 256 x 256 chip and one 512 x 512 window of every band at seeded
   random positions of one file (the file opened per read), one whole file, and training
   batches of 16 chips of 256 x 256 pixels, every band, drawn at random over all files
   (``read_many`` against ``read_batch`` on paths and headers: both open the files per call).
   The first call of each row is an untimed warm-up, checked against the scene; rumimm's
   numba kernels are loaded before any row (their load is a start-up cost, measured by the
   cold-start rows of ``compare/engines.py``).
   The engines run in the order rumi-eo, rumimm, rumimm, rumi-eo and each row keeps an
   engine's better median of its two runs, so a drifting machine load favours neither.
3. Prints the median seconds per operation (chips per second for the batches) and the ratio
   rumimm / rumi-eo (below 1 is faster; for the batches, throughput rumimm / rumi-eo), and
   saves them as JSON under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from asv_benchmarks.compare.common import PEER026 as PEER
from asv_benchmarks.compare.common import PEER_WRITE, ROOT, module_command

BANDS = 4


# --------------------------------------------------------------------------- workers (one per process)


def _positions(seed: int, n: int, size: int, win: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [(int(y), int(x)) for y, x in rng.integers(0, size - win + 1, (n, 2))]


def _batches(seed: int, n: int, files: int, size: int, batch: int = 16, win: int = 256):
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, files, batch).tolist(), rng.integers(0, size - win + 1, (batch, 2)).tolist())
            for _ in range(n)]


def worker(spec: dict) -> dict:
    """Time every row with one engine and thread count; runs in its own interpreter."""
    engine, threads, reps = spec["engine"], spec["threads"], spec["reps"]
    paths, headers = spec["paths"], [bytes.fromhex(h) for h in spec["headers"]]
    size = spec["size"]
    scene0 = np.load(spec["scene0"], mmap_mode="r")
    if engine == "rumi":
        import rumi

        rumi.set_num_threads(threads)

        def window(i, y, x, w):
            return rumi.read(paths[i], headers[i], window=(y, x, w, w))

        def whole(i):
            return rumi.read(paths[i], headers[i])

        def batch(files, origins):
            return rumi.read_many([paths[f] for f in files], [headers[f] for f in files],
                                  windows=[(y, x, 256, 256) for y, x in origins])
    else:
        import rumimm

        rumimm.set_num_threads(threads)
        # Load the numba kernels before the first timed read.  A fresh process loads them on a
        # background thread and reads through the chip executor meanwhile, so without this the
        # first row's reads would share the CPU with that load; its cost is a start-up cost
        # (the cold-start rows of compare/engines.py), not a per-read one.
        from rumimm.reader import engine as _engine

        _engine.load()

        def window(i, y, x, w):
            with rumimm.open(paths[i], headers[i], cache_bytes=0) as img:
                return img[:, y:y + w, x:x + w]

        def whole(i):
            with rumimm.open(paths[i], headers[i], cache_bytes=0) as img:
                return img[...]

        def batch(files, origins):
            return rumimm.read_batch([paths[f] for f in files], np.asarray(origins, np.int64),
                                     [headers[f] for f in files], size=(256, 256), cache_bytes=0)

    out = {}
    for name, w in (("chip 256 x 256, 4 bands", 256), ("window 512 x 512, 4 bands", 512)):
        pos = _positions(7 + w, reps + 1, size, w)
        got = window(0, *pos[0], w)
        assert np.array_equal(got, scene0[:, pos[0][0]:pos[0][0] + w, pos[0][1]:pos[0][1] + w]), name
        times = []
        for y, x in pos[1:]:
            t0 = time.perf_counter()
            window(0, y, x, w)
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times)
    assert np.array_equal(whole(0), scene0)
    times = []
    for _ in range(max(3, reps // 4)):
        t0 = time.perf_counter()
        whole(0)
        times.append(time.perf_counter() - t0)
    out["whole file"] = statistics.median(times)
    batches = _batches(11, reps + 1, len(paths), size)
    files, origins = batches[0]
    got = batch(files, origins)
    y, x = origins[0]
    if files[0] == 0:
        assert np.array_equal(got[0], scene0[:, y:y + 256, x:x + 256])
    times = []
    for files, origins in batches[1:]:
        t0 = time.perf_counter()
        batch(files, origins)
        times.append(time.perf_counter() - t0)
    out["training chips (chips/s)"] = 16 / statistics.median(times)
    return out


# --------------------------------------------------------------------------- driver


def _run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(proc.stderr.strip()[-2000:])
    return proc.stdout.strip().splitlines()[-1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=2048)
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--tiles", type=int, nargs="+", default=[512, 128])
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--out", default=None)
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if not os.path.isfile(PEER):
        print(f"rumi-eo 0.26.1 not found at {PEER}: run .ci/peer026.sh or set RUMIMM_PEER026_PYTHON",
              file=sys.stderr)
        return 2
    import rumimm
    from rumimm.synthetic import eo_scene

    out = args.out or tempfile.mkdtemp(prefix="rumimm-compare-v2-")
    os.makedirs(out, exist_ok=True)
    npys = []
    for i in range(args.files):
        npy = os.path.join(out, f"scene{i}.npy")
        if not os.path.exists(npy):
            np.save(npy, eo_scene(bands=BANDS, height=args.size, width=args.size, dtype="uint16", seed=i))
        npys.append(npy)
    raw = BANDS * args.size * args.size * 2
    results = {"rumimm": rumimm.__version__, "size": args.size, "files": args.files, "rows": {}}
    for tile in args.tiles:
        paths = [os.path.join(out, f"scene{i}_t{tile}.rumi") for i in range(args.files)]
        meta = json.loads(_run([PEER, "-c", PEER_WRITE, json.dumps({"npys": npys, "paths": paths, "tile": tile})]))
        results["peer"] = {"rumi-eo": meta["rumi"], "geozl": meta["geozl"]}
        ratio = statistics.mean(os.path.getsize(q) for q in paths) / raw
        for blob, q in zip(meta["headers"], paths, strict=True):
            assert rumimm.build_blob(q) == bytes.fromhex(blob), q
        for threads in args.threads:
            row: dict = {}
            # ABBA, each run in a fresh process: a machine whose load drifts biases neither engine;
            # per row, the better of an engine's two medians (time: lower; chips/s: higher)
            for engine in ("rumi", "rumimm", "rumimm", "rumi"):
                python = PEER if engine == "rumi" else sys.executable
                spec = {"engine": engine, "threads": threads, "reps": args.reps, "paths": paths,
                        "headers": meta["headers"], "size": args.size, "scene0": npys[0]}
                got = json.loads(_run(module_command(__spec__.name, "--worker", json.dumps(spec), python=python)))
                best = row.setdefault(engine, got)
                for name, v in got.items():
                    best[name] = max(best[name], v) if "chips/s" in name else min(best[name], v)
            key = f"tile {tile}, {threads} thread{'s' if threads > 1 else ''}"
            results["rows"][key] = {"file/raw": round(ratio, 3), **row}
            print(f"\n{key} (files {ratio:.3f} of raw)")
            for name in row["rumi"]:
                a, b = row["rumimm"][name], row["rumi"][name]
                if "chips/s" in name:
                    print(f"  {name:32s} rumimm {a:10.1f}  rumi-eo {b:10.1f}  throughput x{a / b:.2f}")
                else:
                    print(f"  {name:32s} rumimm {a * 1e3:9.2f} ms  rumi-eo {b * 1e3:9.2f} ms  ratio {a / b:.2f}")
    with open(os.path.join(out, "compare_v2.json"), "w") as fh:
        json.dump(results, fh, indent=1)
    print(f"\nsaved {os.path.join(out, 'compare_v2.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
