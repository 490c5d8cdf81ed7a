"""Side-by-side: rumimm against the reference implementation (rumi-eo 0.16.0) and GDAL.

Usage (from the repository root)::

    python asv_benchmarks/compare.py                  # the full measurement, 4 x 4096 x 4096 uint16
    python asv_benchmarks/compare.py --size 2048      # a quicker check (to a scratch folder)
    python asv_benchmarks/compare.py --publish        # the full measurement, into docs/
    python -m asv_benchmarks.compare --help

What it does, in order:

1. Builds a deterministic EO-like scene (``rumimm.synthetic.eo_scene``, uint16,
   ``--bands`` x ``--size`` x ``--size``) and writes it three times, georeferenced:
   with rumimm (``rumimm.write``, 512-pixel tile frames, the default codec or ``--codec``); with
   the reference implementation (``rumi.frames(arr, 512)``, each frame compressed
   by ``openzl.ext`` at frame format version 24 with the generic ``graphs.Compress``
   graph, then ``rumi.write``: exactly ``tests/peer.py``'s ``peer_write``); and as a
   tiled GeoTIFF with GDAL through rasterio (512 x 512 blocks, ZSTD level 9,
   horizontal predictor 2, GDAL's default pixel interleaving).
2. Draws seeded random windows for each row of the table, the same for every engine.
3. Runs every (engine, thread count) pair in its OWN subprocess, so thread
   settings, caches and JIT state cannot leak between them: rumimm on its file,
   rumimm on the reference's file (engine against engine on identical bytes),
   the reference on its file, GDAL on the GeoTIFF, and the decode-only floor (the
   frames a window touches, already in memory, decoded by rumimm's GIL-free
   per-frame decoder and nothing else: ``asv_benchmarks/decode_floor.py``).  Each
   timed read touches windows at fresh positions; before each one the dataset is
   opened anew outside the timer (GDAL's block cache then holds nothing of it)
   and rumimm's decoded-frame cache is OFF (``cache_bytes=0``).  The first read
   of every row is an untimed warm-up and is checked pixel for pixel against the
   scene.  Files are hot in the OS page cache: this measures decoding, not disks.
4. Cold start: a fresh interpreter per sample imports the engine, opens the file
   and reads one 64 x 64 window; the row is the whole process, exec to exit, as a
   user's script meets it (bytecode cached, as after any first run; a 64 x 64 read
   needs no numba).  The time inside the process, import to first pixels, is kept
   in the JSON as ``inprocess_seconds``.
5. Prints one table (median seconds per operation, ratio to the reference, file
   sizes relative to raw, the decode floor) and saves it as Markdown and JSON,
   and a PNG chart, under ``--out`` (default: a new scratch folder, printed at the
   end).  Only ``--publish`` writes into ``docs/`` (the committed performance page).

Needs the ``bench`` extras: ``pip install -e ".[bench]"`` (rasterio, rumi-eo,
matplotlib).  At the default size it takes 2 to 4 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

try:
    import rumimm
except ImportError:  # a plain checkout: use the working tree
    sys.path.insert(0, _ROOT)
    import rumimm

DEFAULT_SIZE = 4096
DEFAULT_BANDS = 4
DEFAULT_TILE = 512
DEFAULT_REPEATS = 21
DEFAULT_COLD_REPEATS = 7
DEFAULT_ROUNDS = 3
DEFAULT_THREADS = (1, 2)
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
EPSG = 32633
FORMAT_VERSION = 24

#: (label, window size or None for the whole image, band range as a fraction-free rule)
ROWS = (
    ("full image", None, "all"),
    ("256x256 all bands", 256, "all"),
    ("256x256 one band", 256, "one"),
    ("64x64 one band", 64, "one"),
    ("1024x1024 two bands", 1024, "two"),
    ("64x64 one band, open + read", 64, "one"),
)
COLD_ROW = "cold start, whole process (import, open, first 64x64 read)"
ENGINES = ("rumimm", "rumimm on reference file", "reference (rumi-eo)", "GDAL GeoTIFF")
CODEC_PREFIX = "rumimm codec="  # a column per --codec-column preset: rumimm on its own file written with it


def _engines(results: dict) -> list[str]:
    """The engines of a run, codec columns included (older results list only ``ENGINES``)."""
    return list(results.get("setup", {}).get("engines", ENGINES))


def _file_key(engine: str) -> str:
    """The ``spec["files"]`` entry a rumimm engine reads."""
    return engine if engine.startswith(CODEC_PREFIX) else "rumimm" if engine == "rumimm" else "reference"
FLOOR_RUMIMM = "decode floor, rumimm file"
FLOOR_REFERENCE = "decode floor, reference file"


# --------------------------------------------------------------------------- files


def _bands(rule: str, b: int) -> tuple[int, int]:
    if rule == "all":
        return 0, b
    if rule == "one":
        return b // 2, b // 2 + 1
    if rule == "two":
        return (1, 3) if b >= 3 else (0, min(2, b))
    raise ValueError(rule)


def write_reference(path: str, array: np.ndarray, tile: int) -> bytes:
    """Write ``array`` with rumi-eo: rumi.frames, openzl generic graph at v24, rumi.write."""
    import openzl.ext as zl
    import rumi

    compressor = zl.Compressor()
    gid = zl.graphs.Compress().parameterize(compressor)
    compressor.select_starting_graph(gid)
    table = rumi.frames(array, tile, unit="tile")
    for frame in table:
        held = np.ascontiguousarray(frame.data).reshape(-1)
        held = held.view(f"<u{held.dtype.itemsize}")
        cctx = zl.CCtx()
        cctx.set_parameter(zl.CParam.FormatVersion, FORMAT_VERSION)
        cctx.select_starting_graph(compressor, gid)
        inp = zl.Input(zl.Type.Numeric, held)  # Input does not keep `held` alive: it must outlive compress
        frame.compressed = bytes(cctx.compress([inp]))
        del inp
    _, header = rumi.write(path, table, transform=TRANSFORM, crs=EPSG)
    return bytes(header)


def write_geotiff(path: str, array: np.ndarray, tile: int) -> None:
    """Tiled ZSTD (level 9) + horizontal predictor GeoTIFF through rasterio/GDAL."""
    import rasterio
    from rasterio.transform import Affine

    b, y, x = array.shape
    xres, rrot, x0, crot, yres, y0 = TRANSFORM
    profile = dict(driver="GTiff", width=x, height=y, count=b, dtype=array.dtype.name, crs=f"EPSG:{EPSG}",
                   transform=Affine(xres, rrot, x0, crot, yres, y0), tiled=True, blockxsize=tile,
                   blockysize=tile, compress="zstd", zstd_level=9, predictor=2, bigtiff="IF_SAFER",
                   num_threads="ALL_CPUS")
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(array)


def _windows(rows, size: int, bands: int, repeats: int, seed: int) -> dict:
    """Per row: ``repeats + 1`` windows (the first is the untimed warm-up), seeded."""
    out = {}
    for i, (label, win, rule) in enumerate(rows):
        b0, b1 = _bands(rule, bands)
        rng = np.random.default_rng(seed + 1000 + i)
        if win is None:
            n = max(3, repeats // 3) + 1
            out[label] = [(b0, b1, 0, size, 0, size)] * n
            continue
        ys = rng.integers(0, size - win + 1, size=repeats + 1)
        xs = rng.integers(0, size - win + 1, size=repeats + 1)
        out[label] = [(b0, b1, int(y), int(y) + win, int(x), int(x) + win) for y, x in zip(ys, xs, strict=True)]
    return out


# --------------------------------------------------------------------------- workers


def _worker_env(threads: int) -> dict:
    env = dict(os.environ)
    env["RUMIMM_NUM_THREADS"] = str(threads)
    env["RUMI_NUM_THREADS"] = str(threads)
    env["GDAL_NUM_THREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
    return env


def _reader(engine: str, spec: dict, threads: int):
    """Return (open, read, close) for one engine: open outside the timer, read inside."""
    b = spec["bands"]
    if engine in ("rumimm", "rumimm on reference file") or engine.startswith(CODEC_PREFIX):
        rumimm.set_num_threads(threads)
        key = _file_key(engine)
        path, blob = spec["files"][key]["path"], bytes.fromhex(spec["files"][key]["blob"])

        def open_():
            return rumimm.open(path, header=blob, cache_bytes=0)

        def read(h, w):
            b0, b1, y0, y1, x0, x1 = w
            if b1 - b0 == b:
                return h[:, y0:y1, x0:x1]
            return h[b0:b1, y0:y1, x0:x1]

        return open_, read, lambda h: h.close()
    if engine == "reference (rumi-eo)":
        import rumi

        rumi.set_num_threads(threads)
        path, blob = spec["files"]["reference"]["path"], bytes.fromhex(spec["files"]["reference"]["blob"])

        def read(h, w):
            b0, b1, y0, y1, x0, x1 = w
            if (b0, b1, y0, x0) == (0, b, 0, 0) and (y1, x1) == (spec["size"], spec["size"]):
                return rumi.read(path, blob, num_threads=threads)
            return rumi.read(path, blob, b=(b0, b1), y=(y0, y1), x=(x0, x1), num_threads=threads)

        # rumi.read takes the path and the blob each time: it has no open handle
        return (lambda: None), read, (lambda h: None)
    if engine == "GDAL GeoTIFF":
        import rasterio
        from rasterio.windows import Window

        env = rasterio.Env(GDAL_NUM_THREADS=str(threads))
        env.__enter__()
        path = spec["files"]["gdal"]["path"]

        def read(h, w):
            b0, b1, y0, y1, x0, x1 = w
            if (y0, x0, y1, x1) == (0, 0, spec["size"], spec["size"]) and (b0, b1) == (0, b):
                return h.read()
            return h.read(list(range(b0 + 1, b1 + 1)), window=Window(x0, y0, x1 - x0, y1 - y0))

        return (lambda: rasterio.open(path)), read, (lambda h: h.close())
    raise ValueError(f"unknown engine {engine!r}")


def run_engine(engine: str, spec: dict, threads: int) -> dict:
    """Time every row for one engine in this process; returns {row: {"seconds": [...], "exact": bool}}."""
    scene = np.load(spec["scene"], mmap_mode="r")
    open_, read, close = _reader(engine, spec, threads)
    floor = None
    if engine.startswith("rumimm"):  # paired: decode a window's frames, then read it, alternately
        from rumimm.format.blob import Header

        f = spec["files"][_file_key(engine)]
        floor = _floor_timer(Header.parse(bytes.fromhex(f["blob"])), np.fromfile(f["path"], np.uint8), threads)
    results = {}
    for label, _, _ in ROWS:
        include_open = label.endswith("open + read")
        seconds, exact, ratios = [], True, []
        for i, w in enumerate(spec["windows"][label]):
            floor_s = floor(w) if floor is not None and i else None
            if include_open:
                t0 = time.perf_counter()
                h = open_()
                got = read(h, w)
                close(h)
                dt = time.perf_counter() - t0
            else:
                h = open_()
                t0 = time.perf_counter()
                got = read(h, w)
                dt = time.perf_counter() - t0
                close(h)
            if i == 0:  # warm-up: JIT, first-touch page faults; check the pixels instead
                b0, b1, y0, y1, x0, x1 = w
                want = scene[b0:b1, y0:y1, x0:x1]
                exact = bool(np.array_equal(np.asarray(got).reshape(want.shape), want))
            else:
                seconds.append(dt)
                if floor_s:
                    ratios.append(dt / floor_s)
            del got
        results[label] = {"seconds": seconds, "exact": exact}
        if ratios:
            results[label]["floor_ratio"] = ratios
    return results


def _touched_frames(header, w) -> np.ndarray:
    grid = header.grid
    b0, b1, y0, y1, x0, x1 = w
    rows = range(y0 // grid.tile_length, (y1 - 1) // grid.tile_length + 1)
    cols = range(x0 // grid.tile_width, (x1 - 1) // grid.tile_width + 1)
    if int(grid.unit) == 1:  # cell frames hold every band
        return np.array([r * grid.tiles_across + c for r in rows for c in cols], np.int64)
    return np.array([grid.frame_index(r, c, band) for r in rows for c in cols for band in range(b0, b1)], np.int64)


def _floor_timer(header, data: np.ndarray, threads: int):
    """A function timing the decode of just the frames a window touches (frames in ``data``).

    The frames are decoded by ``decode_floor.decode_frames`` (rumimm's nogil per-frame
    decoder), serially or on a plain thread pool of ``threads`` threads.
    """
    from concurrent.futures import ThreadPoolExecutor

    from rumimm.kernels import native as _native

    try:
        from asv_benchmarks.decode_floor import decode_frames
    except ImportError:  # run as a script: the folder itself is on sys.path
        from decode_floor import decode_frames

    offsets, counts = header.frame_offsets[:-1], header.frame_byte_counts
    isz = header.encoding.itemsize
    pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def decode_touched(w) -> float:
        ks = _touched_frames(header, w)
        sizes = np.array([header.grid.frame_samples(int(k)) * isz for k in ks], np.int64)
        dst_off = np.zeros(ks.size, np.int64)
        np.cumsum(sizes[:-1], out=dst_off[1:])
        dst = np.ones(int(sizes.sum()), np.uint8)  # written once: no page faults in the timing
        t0 = time.perf_counter()
        status = decode_frames(data, offsets[ks], counts[ks], dst, dst_off, sizes, pool=pool)
        dt = time.perf_counter() - t0
        if np.any(status < 0):
            raise RuntimeError(f"a frame failed to decode: {_native.status_message(int(status.min()))}")
        return dt

    return decode_touched


def run_floor(spec: dict, threads: int) -> dict:
    """Decode-only time of the frames each window touches, both rumi files, frames in memory."""
    from rumimm.format.blob import Header
    from rumimm.reader.cache import tune_malloc

    tune_malloc()  # the allocator setting the reader applies at its first read, so the floor is like for like
    out = {}
    for key, name in (("rumimm", FLOOR_RUMIMM), ("reference", FLOOR_REFERENCE)):
        f = spec["files"][key]
        header = Header.parse(bytes.fromhex(f["blob"]))
        floor = _floor_timer(header, np.fromfile(f["path"], np.uint8), threads)  # in memory: no file I/O
        out[name] = {label: {"seconds": [floor(w) for w in spec["windows"][label][1:]], "exact": True}
                     for label, _, _ in ROWS}
    return out


_COLD = {
    "rumimm": """
        import time
        t0 = time.perf_counter()
        import rumimm
        img = rumimm.open(PATH, header=BLOB)
        a = img[B, Y0:Y0 + 64, X0:X0 + 64]
        print(time.perf_counter() - t0)
    """,
    "rumimm on reference file": None,  # same code, the reference's file and blob
    "reference (rumi-eo)": """
        import time
        t0 = time.perf_counter()
        import rumi
        a = rumi.read(PATH, BLOB, b=(B, B + 1), y=(Y0, Y0 + 64), x=(X0, X0 + 64))
        print(time.perf_counter() - t0)
    """,
    "GDAL GeoTIFF": """
        import time
        t0 = time.perf_counter()
        import rasterio
        from rasterio.windows import Window
        with rasterio.open(PATH) as ds:
            a = ds.read(B + 1, window=Window(X0, Y0, 64, 64))
        print(time.perf_counter() - t0)
    """,
}


def run_cold(engine: str, spec: dict, threads: int, repeats: int) -> dict:
    """Cold start: one fresh interpreter per sample, timed exec to exit; the first (warming disk caches) is dropped."""
    key = engine if engine.startswith(CODEC_PREFIX) else {
        "rumimm": "rumimm", "rumimm on reference file": "reference", "reference (rumi-eo)": "reference",
        "GDAL GeoTIFF": "gdal"}[engine]
    code = textwrap.dedent(_COLD.get(engine) or _COLD["rumimm"])
    f = spec["files"][key]
    windows = spec["windows"]["64x64 one band"]
    env = _worker_env(threads)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's interpreter caches bytecode; the dropped first run writes it
    seconds, inside = [], []
    for i in range(repeats + 1):
        b0, _, y0, _, x0, _ = windows[i % len(windows)]
        prelude = (f"PATH = {f['path']!r}\nBLOB = bytes.fromhex({f.get('blob', '')!r})\n"
                   f"B, Y0, X0 = {b0}, {y0}, {x0}\n")
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", prelude + code], env=env, cwd=_ROOT,
                              capture_output=True, text=True, check=False)  # "-c" imports from the cwd first
        t1 = time.perf_counter()
        if proc.returncode != 0:
            raise RuntimeError(f"cold start of {engine} failed:\n{proc.stderr}")
        if i:
            seconds.append(t1 - t0)
            inside.append(float(proc.stdout.strip().splitlines()[-1]))
    return {"seconds": seconds, "inprocess_seconds": inside, "exact": True}


def _worker_main(args) -> None:
    with open(args.spec) as fh:
        spec = json.load(fh)
    if args.worker == "floor":
        result = run_floor(spec, args.threads)
    else:
        result = {args.worker: run_engine(args.worker, spec, args.threads)}
    with open(args.result, "w") as fh:
        json.dump(result, fh)


def _pool_samples(into: dict, got: dict) -> None:
    """Merge a worker's {engine: {row: {"seconds", "exact"}}} into ``into``, pooling samples."""
    for engine, rows in got.items():
        mine = into.setdefault(engine, {})
        for row, res in rows.items():
            if row not in mine:
                mine[row] = {k: (list(v) if isinstance(v, list) else v) for k, v in res.items()}
            else:
                mine[row]["seconds"].extend(res["seconds"])
                mine[row]["exact"] = mine[row]["exact"] and res["exact"]
                if "floor_ratio" in res:
                    mine[row].setdefault("floor_ratio", []).extend(res["floor_ratio"])


def _spawn_worker(engine: str, spec_path: str, threads: int, workdir: str) -> dict:
    tag = engine.replace(' ', '_').replace('(', '').replace(')', '')
    result = os.path.join(workdir, f"result-{tag}-{threads}.json")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", engine, "--threads", str(threads),
           "--spec", spec_path, "--result", result]
    proc = subprocess.run(cmd, env=_worker_env(threads), capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"worker {engine} ({threads} threads) failed:\n{proc.stderr}")
    with open(result) as fh:
        return json.load(fh)


# --------------------------------------------------------------------------- report


def _fmt_time(s: float | None) -> str:
    if s is None:
        return "n/a"
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 0.1:
        return f"{s * 1e3:.0f} ms"
    if s >= 0.01:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e3:.2f} ms"


def _median(samples) -> float | None:
    return float(statistics.median(samples)) if samples else None


#: The distributions whose versions every run records (the interpreter's, as the workers run it).
VERSIONED = ("numpy", "numba", "llvmlite", "ml_dtypes", "openzl", "geozl", "rasterio", "rumi-eo", "matplotlib")


def _versions() -> dict:
    """Versions of python, rumimm, every package in VERSIONED (None when absent) and GDAL."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "rumimm": rumimm.__version__}
    for dist in VERSIONED:
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    try:
        import rasterio

        out["GDAL"] = rasterio.__gdal_version__
    except ImportError:
        out["GDAL"] = None
    return out


def _row_labels(results: dict) -> list[str]:
    """The rows a run measured, as it named them (a saved run may predate a rename)."""
    return list(results["setup"].get("rows") or [r[0] for r in ROWS] + [COLD_ROW])


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def build_table(results: dict) -> str:
    """The Markdown report: the time table, then the file table, then notes."""
    threads = results["threads"]
    ref = "reference (rumi-eo)"
    engines = _engines(results)
    lines = ["| operation | threads | " + " | ".join(engines) + f" | {FLOOR_RUMIMM} | {FLOOR_REFERENCE} |",
             "|---|---:|" + "---:|" * (len(engines) + 2)]
    labels = _row_labels(results)
    for label in labels:
        for n in threads:
            cell = results["timings"][str(n)]
            ref_s = _median(cell[ref][label]["seconds"])
            row = [label, str(n)]
            for engine in engines:
                entry = cell[engine][label]
                s = _median(entry["seconds"])
                text = _fmt_time(s)
                if engine != ref and s is not None and ref_s:
                    text += f" ({s / ref_s:.2f}x)"
                if not entry.get("exact", True):
                    text += " WRONG PIXELS"
                row.append(text)
            for floor in (FLOOR_RUMIMM, FLOOR_REFERENCE):
                entry = cell.get(floor, {}).get(label)
                row.append(_fmt_time(_median(entry["seconds"])) if entry else "n/a")
            lines.append("| " + " | ".join(row) + " |")
    paired = [e for e in engines if e.startswith("rumimm")]
    if any("floor_ratio" in results["timings"][str(n)][e].get(label, {})
           for n in threads for e in paired for label in labels):
        lines += ["", "Paired decode-floor ratio: rumimm's read time over the decode-only time of the same "
                  "window's frames, timed alternately in the same process (median of per-window ratios; "
                  "1.00 = nothing but decoding). The paired decode runs serially, or on a plain thread pool "
                  "over the nogil per-frame decoder.", "",
                  "| operation | threads | " + " | ".join(paired) + " |", "|---|---:|" + "---:|" * len(paired)]
        for label in labels:
            for n in threads:
                cell = results["timings"][str(n)]
                vals = [cell[e].get(label, {}).get("floor_ratio") for e in paired]
                if any(vals):
                    lines.append(f"| {label} | {n} | " + " | ".join(
                        f"{statistics.median(v):.2f}" if v else "n/a" for v in vals) + " |")
    raw = results["raw_bytes"]
    lines += ["", "| file | size | relative to raw | write time |", "|---|---:|---:|---:|"]
    for f in results["files"].values():
        lines.append(f"| {f['label']} | {f['bytes'] / 2**20:.1f} MiB | {f['bytes'] / raw:.3f} | "
                     f"{f['write_seconds']:.2f} s |")
    return "\n".join(lines)


def _notes(results: dict) -> str:
    s = results["setup"]
    v = results["versions"]
    vers = ", ".join(f"{k} {val}" for k, val in v.items() if val is not None)
    return textwrap.dedent(f"""\
        Scene: `eo_scene(bands={s['bands']}, height={s['size']}, width={s['size']}, dtype="uint16", seed={s['seed']})`,
        {results['raw_bytes'] / 2**20:.0f} MiB raw; {s['tile']}-pixel tiles everywhere; rumimm's file written with
        codec={s.get('codec')!r} (None: the default). Median of {s['repeats']} reads
        at seeded random window positions ({max(3, s['repeats'] // 3)} for the full image) in each of
        {s.get('rounds', 1)} interleaved rounds, pooled ({s['cold_repeats']} fresh processes for cold start);
        the ratio in parentheses is time / reference time (lower is faster).
        Each (engine, threads) pair ran in its own process per round; datasets were opened anew before every read
        (outside the timer, except in the "open + read" row), rumimm's decoded-frame cache was OFF
        (`cache_bytes=0`), and files were hot in the OS page cache. The reference has no open handle:
        `rumi.read(path, blob, ...)` opens the file on every call. The decode floor is the GIL-free
        decoding of just the frames a window touches, already in memory, with rumimm's nogil per-frame decoder.
        GDAL uses its default pixel interleaving (one block holds every band). Cold start is the whole fresh
        process, exec to exit (python start-up, import, open, the first read, exit), bytecode cached.

        Machine: {results['machine']['cpu']}, {results['machine']['cores']} cores; {vers}.
        Measured {results['date']}, `{results['command']}`, {results['elapsed_seconds']:.0f} s in all.
        """)


def save_chart(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    threads = results["threads"]
    keys = _row_labels(results)
    labels = [k if k != keys[-1] else "cold start" for k in keys]
    colors = {"rumimm": "#1b9e77", "rumimm on reference file": "#66c2a5", "reference (rumi-eo)": "#d95f02",
              "GDAL GeoTIFF": "#7570b3"}
    fig, axes = plt.subplots(1, len(threads), figsize=(6.5 * len(threads), 5.5), sharey=True, squeeze=False)
    engines = _engines(results)
    height = 0.8 / len(engines)
    for ax, n in zip(axes[0], threads, strict=True):
        cell = results["timings"][str(n)]
        for j, engine in enumerate(engines):
            vals = [_median(cell[engine][k]["seconds"]) or np.nan for k in keys]
            ys = np.arange(len(keys)) + (j - (len(engines) - 1) / 2) * height
            ax.barh(ys, vals, height=height, color=colors.get(engine, "#a6761d"), label=engine)
        floor = [_median(cell[FLOOR_RUMIMM][k]["seconds"]) if k in cell[FLOOR_RUMIMM] else np.nan for k in keys]
        ax.scatter(floor, np.arange(len(keys)), marker="|", s=400, color="black", zorder=3,
                   label="decode floor (rumimm file)")
        ax.set_xscale("log")
        ax.set_title(f"{n} thread{'s' if n > 1 else ''}")
        ax.set_xlabel("seconds per operation (log scale, lower is faster)")
        ax.grid(axis="x", which="both", alpha=0.3)
    axes[0][0].set_yticks(np.arange(len(keys)), labels)
    axes[0][0].invert_yaxis()
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=len(names), fontsize=8, frameon=False)
    s = results["setup"]
    fig.suptitle(f"rumimm vs rumi-eo 0.16.0 vs GDAL: {s['bands']} x {s['size']} x {s['size']} uint16, "
                 f"{s['tile']} px tiles (median; caches off; page cache hot)", fontsize=10)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main


def measure(args) -> dict:
    from rumimm.synthetic import eo_scene

    t_start = time.perf_counter()
    workdir = args.workdir or tempfile.mkdtemp(prefix="rumimm-compare-")
    os.makedirs(workdir, exist_ok=True)
    threads = tuple(int(t) for t in args.threads.split(","))
    log = (lambda *a: print(*a, file=sys.stderr, flush=True)) if not args.quiet else (lambda *a: None)
    try:
        versions = _versions()
        log("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
        log(f"building a {args.bands} x {args.size} x {args.size} uint16 scene in {workdir}")
        scene = eo_scene(bands=args.bands, height=args.size, width=args.size, dtype="uint16", seed=args.seed)
        scene_path = os.path.join(workdir, "scene.npy")
        np.save(scene_path, scene)
        files = {}

        p = os.path.join(workdir, "scene.rumi")
        t0 = time.perf_counter()
        blob = rumimm.write(p, scene, tile=args.tile, transform=TRANSFORM, crs=EPSG, codec=args.codec)
        files["rumimm"] = {"label": f"rumimm ({args.codec or 'default'} codec)", "path": p, "blob": blob.hex(),
                           "write_seconds": time.perf_counter() - t0}
        log(f"  rumimm wrote {os.path.getsize(p) / 2**20:.1f} MiB in {files['rumimm']['write_seconds']:.1f} s")
        for codec in args.codec_column:
            p = os.path.join(workdir, f"scene_{codec}.rumi")
            t0 = time.perf_counter()
            blob = rumimm.write(p, scene, tile=args.tile, transform=TRANSFORM, crs=EPSG, codec=codec)
            files[CODEC_PREFIX + codec] = {"label": f"rumimm ({codec} codec)", "path": p, "blob": blob.hex(),
                                           "write_seconds": time.perf_counter() - t0}
        engines = [*ENGINES, *(CODEC_PREFIX + c for c in args.codec_column)]

        p = os.path.join(workdir, "reference.rumi")
        t0 = time.perf_counter()
        blob = write_reference(p, scene, args.tile)
        files["reference"] = {"label": "reference (rumi-eo, openzl generic graph)", "path": p, "blob": blob.hex(),
                              "write_seconds": time.perf_counter() - t0}
        log(f"  rumi-eo wrote {os.path.getsize(p) / 2**20:.1f} MiB in {files['reference']['write_seconds']:.1f} s")

        p = os.path.join(workdir, "scene.tif")
        t0 = time.perf_counter()
        write_geotiff(p, scene, args.tile)
        files["gdal"] = {"label": "GDAL GeoTIFF (ZSTD 9, predictor 2)", "path": p,
                         "write_seconds": time.perf_counter() - t0}
        log(f"  GDAL wrote {os.path.getsize(p) / 2**20:.1f} MiB in {files['gdal']['write_seconds']:.1f} s")
        for f in files.values():
            f["bytes"] = os.path.getsize(f["path"])
        raw = int(scene.nbytes)
        del scene

        spec = {"scene": scene_path, "size": args.size, "bands": args.bands, "files": files,
                "windows": _windows(ROWS, args.size, args.bands, args.repeats, args.seed)}
        spec_path = os.path.join(workdir, "spec.json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)

        # Each (engine, threads) worker process runs once per round; rounds interleave, with the
        # engine order rotated, and samples pool across rounds, so a slow spell of a shared
        # machine lands on every engine rather than on whichever ran during it.
        timings = {str(n): {} for n in threads}
        workers = [*engines, "floor"]
        for r in range(args.rounds):
            order = workers[r % len(workers):] + workers[: r % len(workers)]
            for n in threads:
                for engine in order:
                    log(f"round {r + 1}/{args.rounds}: timing {engine} on {n} thread(s)")
                    _pool_samples(timings[str(n)], _spawn_worker(engine, spec_path, n, workdir))
        for n in threads:
            for engine in engines:
                log(f"cold start of {engine} on {n} thread(s)")
                timings[str(n)][engine][COLD_ROW] = run_cold(engine, spec, n, args.cold_repeats)

        results = {
            "setup": {"size": args.size, "bands": args.bands, "tile": args.tile, "seed": args.seed,
                      "codec": args.codec,
                      "repeats": args.repeats, "rounds": args.rounds, "cold_repeats": args.cold_repeats,
                      "dtype": "uint16",
                      "rows": [r[0] for r in ROWS] + [COLD_ROW], "engines": engines},
            "threads": list(threads),
            "raw_bytes": raw,
            "files": {k: {kk: vv for kk, vv in f.items() if kk not in ("path", "blob")} for k, f in files.items()},
            "timings": timings,
            "windows": spec["windows"],
            "versions": versions,
            "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "platform": platform.platform()},
            "date": time.strftime("%Y-%m-%d %H:%M %Z"),
            "command": " ".join(["python asv_benchmarks/compare.py", *args.argv]),
        }
        results["elapsed_seconds"] = time.perf_counter() - t_start
        return results
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def save(results: dict, out_dir: str, *, chart: bool = True) -> dict:
    os.makedirs(out_dir, exist_ok=True)
    table = build_table(results)
    md = os.path.join(out_dir, "performance-table.md")
    with open(md, "w") as fh:
        fh.write("<!-- generated by asv_benchmarks/compare.py; do not edit by hand -->\n\n")
        fh.write(table + "\n\n" + _notes(results))
    js = os.path.join(out_dir, "performance.json")
    with open(js, "w") as fh:
        json.dump(results, fh, indent=1)
    paths = {"table": md, "json": js}
    page = os.path.join(out_dir, "performance.md")
    if os.path.exists(page):  # performance.md includes the table between two markers
        with open(page) as fh:
            text = fh.read()
        start, end = "<!-- performance-table:start -->", "<!-- performance-table:end -->"
        if start in text and end in text:
            head, rest = text.split(start, 1)
            _, tail = rest.split(end, 1)
            with open(page, "w") as fh:
                fh.write(f"{head}{start}\n{table}\n\n{_notes(results)}{end}{tail}")
            paths["page"] = page
    if chart:
        png = os.path.join(out_dir, "performance.png")
        save_chart(results, png)
        paths["chart"] = png
    return paths


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="compare", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=DEFAULT_SIZE, help="scene height and width (default %(default)s)")
    ap.add_argument("--bands", type=int, default=DEFAULT_BANDS, help="band count (default %(default)s)")
    ap.add_argument("--tile", type=int, default=DEFAULT_TILE, help="tile size of all three files (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=DEFAULT_REPEATS, help="timed windows per row (default %(default)s)")
    ap.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                    help="worker processes per (engine, threads), interleaved; samples pool (default %(default)s)")
    ap.add_argument("--cold-repeats", type=int, default=DEFAULT_COLD_REPEATS,
                    help="fresh processes per cold-start cell (default %(default)s)")
    ap.add_argument("--threads", default=",".join(map(str, DEFAULT_THREADS)),
                    help="comma-separated thread counts (default %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="scene and window seed (default %(default)s)")
    ap.add_argument("--codec-column", nargs="*", default=[], metavar="PRESET",
                    help="a column per preset: rumimm on its own file written with it, in the same run")
    ap.add_argument("--codec", help="codec preset of rumimm's file, e.g. fast (default: rumimm's default); the "
                                    "rumimm column and its decode floor then show that codec")
    ap.add_argument("--out", help="where the table, JSON and chart go (default: a new scratch folder; "
                                  "see --publish)")
    ap.add_argument("--publish", action="store_true",
                    help="write the table, JSON and chart into docs/ (the committed performance page)")
    ap.add_argument("--workdir", help="keep the files here (default: a temporary folder, removed)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ap.add_argument("--no-chart", action="store_true", help="skip the PNG (no matplotlib needed)")
    ap.add_argument("--quiet", action="store_true", help="no progress on stderr")
    ap.add_argument("--from-json", metavar="JSON", help="re-render the table and chart of a saved run, no measuring")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.publish and args.out:
        ap.error("--publish writes into docs/; give --out or --publish, not both")
    if args.publish:
        args.out = os.path.join(_ROOT, "docs")
    elif not args.out and not args.worker:
        args.out = tempfile.mkdtemp(prefix="rumimm-compare-out-")
    if args.worker:
        args.threads = int(args.threads)
        _worker_main(args)
        return 0
    if args.from_json:
        with open(args.from_json) as fh:
            results = json.load(fh)
        paths = save(results, args.out, chart=not args.no_chart)
        print(build_table(results))
        print("\nsaved " + ", ".join(paths.values()))
        return 0
    if args.size < 1024:
        ap.error("--size must be at least 1024 (the largest window is 1024 x 1024)")
    if args.bands < 1 or args.repeats < 1 or args.cold_repeats < 1 or args.rounds < 1:
        ap.error("--bands, --repeats, --rounds and --cold-repeats must be at least 1")
    args.argv = argv
    results = measure(args)
    paths = save(results, args.out, chart=not args.no_chart)
    print(build_table(results))
    print()
    print("saved " + ", ".join(paths.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
