"""Decode-floor ratios: a read's time over the decode-only time of the same frames (``track_``).

A timing benchmark moves with the machine: a loaded or slower machine makes every read
slower.  This one measures, inside one process and interleaved pair by pair, the read
(``rumimm.open(..., cache_bytes=0)`` then ``img[window]``) and the *decode floor* of the
same window: just the frames it touches, already in memory, decoded by geozl's C decoder
(``libgeozl``, opened here through ctypes, not through rumimm, so the floor is the same code
for every commit asv measures) into a buffer written once, serially or on a plain thread
pool.  The ratio (1.00 = nothing but decoding) grows when the engine's own work grows
(planning, buffers, page faults, placement, Python per frame), not when the machine slows
down, so ``check.sh`` compares it between commits with a tight factor (``RATIO_FACTOR``).

Rows are those of ``asv_benchmarks/compare/engines.py`` (the issue's table), on the suite's
4 x 2048 x 2048 uint16 scene in 512-pixel tile frames, written with the default codec and
with ``codec="fast"``, read on 1 and 2 threads.  Windows are at seeded random positions, the
same for both codecs; the datasets are opened anew before each read, outside the timer
except in the "open + read" row.  The value is the median of the per-window ratios (each
read timed right before or after its floor, the order alternating).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import rumimm

from ._common import BANDS, SIZE, need, scene, write_scene

CODECS = ("default", "fast")
#: (label, window size or None for the whole image, bands: "all", "one" or "two")
ROWS = {
    "full image": (None, "all"),
    "256x256 one band": (256, "one"),
    "64x64 one band": (64, "one"),
    "64x64 open+read": (64, "one"),
    "256x256 all bands": (256, "all"),
    "1024x1024 two bands": (1024, "two"),
}
#: timed pairs (read, floor) per call: enough for a steady median, about a second a call or less
PAIRS = {"full image": 21, "1024x1024 two bands": 41}
DEFAULT_PAIRS = 101
SEED = 31


def _libgeozl():
    """geozl's C frame decoder, ``geozl_2d_decompress_c``, from the installed geozl package's ``_lib``."""
    spec = importlib.util.find_spec("geozl")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        for name in ("libgeozl.so", "libgeozl.dylib", "geozl.dll"):
            path = os.path.join(folder, "_lib", name)
            if os.path.isfile(path):
                fn = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0)).geozl_2d_decompress_c
                fn.restype = ctypes.c_int
                fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
                               ctypes.POINTER(ctypes.c_size_t), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
                return fn
    raise NotImplementedError("geozl's C library (libgeozl) is not installed")


class DecodeFloor:
    """The decode-only time of a window's frames: frames in memory, libgeozl, ``threads`` threads."""

    def __init__(self, path: str, header, threads: int):
        self.decompress = _libgeozl()
        self.data = np.fromfile(path, np.uint8)
        self.header = header
        self.offsets = np.asarray(header.frame_offsets, np.int64)
        self.isz = np.dtype(header.encoding.dtype).itemsize
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.threads = threads
        self.dst = np.ones(0, np.uint8)

    def frames(self, w) -> list[int]:
        """The frames of window ``w`` = (b0, b1, y0, y1, x0, x1), tile frames."""
        g = self.header.grid
        b0, b1, y0, y1, x0, x1 = w
        return [int(g.frame_index(r, c, b))
                for r in range(y0 // g.tile_length, (y1 - 1) // g.tile_length + 1)
                for c in range(x0 // g.tile_width, (x1 - 1) // g.tile_width + 1) for b in range(b0, b1)]

    def _one(self, job) -> int:
        src, n, dst, cap = job
        out = ctypes.c_size_t(0)
        rc = self.decompress(src, n, dst, cap, ctypes.byref(out), 1, None, 0)
        return int(out.value) if rc == 0 else -1

    def __call__(self, w) -> float:
        """Seconds to decode window ``w``'s frames (the buffer is allocated and written before the timer)."""
        ks = self.frames(w)
        g = self.header.grid
        sizes = [int(g.frame_samples(k)) * self.isz for k in ks]
        total = sum(sizes) + 64 * len(ks)
        if self.dst.shape[0] < total:
            self.dst = np.ones(total, np.uint8)  # written once: no page faults in the timing
        base, src = self.dst.ctypes.data, self.data.ctypes.data
        jobs, at = [], 0
        for k, n in zip(ks, sizes, strict=True):
            jobs.append((src + int(self.offsets[k]), int(self.offsets[k + 1] - self.offsets[k]), base + at, n))
            at += (n + 63) // 64 * 64
        t0 = time.perf_counter()
        if self.pool is None or len(jobs) < 2:
            got = [self._one(j) for j in jobs]
        else:
            got = list(self.pool.map(self._one, jobs))
        dt = time.perf_counter() - t0
        if got != sizes:
            raise RuntimeError(f"the decode floor failed on frames {ks}: {got} bytes, not {sizes}")
        return dt

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def _kernels_loaded() -> None:
    """Wait for numba's kernels, which load on a background thread from the first large read.

    Until they are ready, windows of up to 32 MiB go to the chip executor, and the loader
    takes a core: a fresh benchmark process would time that state (the full 4 x 2048 x 2048
    image is 32 MiB), not the engine a long-running reader meets.  A commit without the
    background loader has nothing to wait for.
    """
    try:
        from rumimm.reader import engine
    except ImportError:
        return
    load = getattr(engine, "load", None)
    if load is not None:
        load()


def windows(row: str, size: int = SIZE, bands: int = BANDS, n: int = DEFAULT_PAIRS) -> list[tuple]:
    """``n + 1`` seeded windows (b0, b1, y0, y1, x0, x1) of ``row``; the first is a warm-up."""
    win, rule = ROWS[row]
    b0, b1 = {"all": (0, bands), "one": (bands // 2, bands // 2 + 1), "two": (1, 3)}[rule]
    if win is None:
        return [(b0, b1, 0, size, 0, size)] * (n + 1)
    rng = np.random.default_rng(SEED + list(ROWS).index(row))
    ys = rng.integers(0, size - win + 1, n + 1)
    xs = rng.integers(0, size - win + 1, n + 1)
    return [(b0, b1, int(y), int(y) + win, int(x), int(x) + win) for y, x in zip(ys, xs, strict=True)]


def paired_ratios(read, floor, wins) -> list[float]:
    """read(w) / floor(w) per window, each pair timed back to back (order alternating); ``wins[0]`` warms up."""
    read(wins[0])
    floor(wins[0])
    out = []
    for i, w in enumerate(wins[1:]):
        if i % 2:
            f = floor(w)
            r = read(w)
        else:
            r = read(w)
            f = floor(w)
        out.append(r / f)
    return out


class DecodeFloorRatio:
    """Read time / decode-floor time, per row of the issue's table, default and ``fast`` frames, 1 and 2 threads."""

    params = (list(CODECS), list(ROWS), [1, 2])
    param_names = ["codec", "row", "threads"]
    unit = "ratio"
    timeout = 180
    scene_size = SIZE  # height and width of the scene (the tests use a smaller one)

    def setup_cache(self):
        arr = scene(BANDS, self.scene_size)
        files = {}
        for codec in CODECS:
            path = os.path.abspath(f"floor-{codec}.rumi")
            try:
                files[codec] = (path, write_scene(path, arr, codec=None if codec == "default" else codec))
            except ValueError:  # a commit without the preset
                files[codec] = None
        return files

    def setup(self, files, codec, row, threads):
        need("set_num_threads", "get_num_threads")
        if files[codec] is None:
            raise NotImplementedError(f"this rumimm has no codec {codec!r}")
        self.path, self.blob = files[codec]
        self.before = rumimm.get_num_threads()
        rumimm.set_num_threads(threads)
        _kernels_loaded()
        with rumimm.open(self.path, header=self.blob) as img:
            header = img.header
        self.floor = DecodeFloor(self.path, header, threads)
        self.wins = windows(row, self.scene_size, n=PAIRS.get(row, DEFAULT_PAIRS))
        self.with_open = row.endswith("open+read")

    def teardown(self, files, codec, row, threads):
        if hasattr(self, "floor"):
            self.floor.close()
            rumimm.set_num_threads(self.before)

    def _read(self, w) -> float:
        b0, b1, y0, y1, x0, x1 = w
        key = (slice(None) if b1 - b0 == BANDS else slice(b0, b1), slice(y0, y1), slice(x0, x1))  # as engines.py
        if self.with_open:
            t0 = time.perf_counter()
            with rumimm.open(self.path, header=self.blob, cache_bytes=0) as img:
                img[key]
            return time.perf_counter() - t0
        img = rumimm.open(self.path, header=self.blob, cache_bytes=0)
        try:
            t0 = time.perf_counter()
            img[key]
            return time.perf_counter() - t0
        finally:
            img.close()

    def track_read_over_decode(self, files, codec, row, threads):
        """Median over windows of read time / decode-only time of the same frames (1.00: nothing but decoding)."""
        return float(np.median(paired_ratios(self._read, self.floor, self.wins)))
