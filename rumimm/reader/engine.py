"""The read engine: windows to frames, and the kernel executor of the planner.

Every read (``Image``, ``Cube``, ``ImageCollection``, ``read_batch``) hands the engine
:class:`FrameSource` records, one per open file.  :func:`read_window` sends a window of
at most :data:`SMALL_READ_FRAMES` frames (a chip) to the chip executor
(``small_reads``: geozl's C decoder through ctypes, numpy placement, no numba, so a
process that only reads chips never loads numba, 0.3 s or more at the first read);
larger windows and batches get a *plan* from the kernels (``kernels.plan_window`` /
``plan_batch``: one int64 row per (frame, output slot) saying which rectangle of a
decoded frame goes where) and run through :func:`execute`: entries are grouped by frame
(a frame several windows need is decoded once), the planner (``reader.planner``) takes
the cached frames and hands out buffers, each new frame's header is checked once per open
image, one ``nogil`` kernel call (``kernels.decode_copy``) decodes and places everything
on the calling thread or a few threads, and the planner's ``finish`` maps a failure to
one :class:`~rumimm.errors.CodecError` and fills the cache.  Whole frames
(:func:`decode_frames`) go to the chip executor.  Output is copied out of the decoded
frames, except that ``Image.read(copy=False)`` asks for a window inside one frame the cache holds
as a read-only view of that frame (``read_window(view=True)``): no copy and no new array, at the
price of keeping the whole frame alive while the view lives.

Loading.  Opening a file and reading its metadata need neither numba nor OpenZL.
:func:`_load_decoder` imports OpenZL and opens geozl's library at the first pixel read,
under a module lock a fork waits for (``os.register_at_fork``).  numba and the kernels
load on a background thread (``reader.jit``), started by the first read that would use
them; until they are ready, windows of up to :data:`LOADING_READ_BYTES` of frames go to the chip
executor (a whole window, or each window of a batch) and larger ones wait.  A fork does
not wait for the loader (``jit`` says what a child forked meanwhile can do).
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (imported before any fork can wait on load(): see _before_fork)
import logging  # noqa: F401  (numba imports it; both register fork hooks of their own)
import os
import threading

import numpy as np
import numpy.ma  # (imported before the kernels' loader can be importing it when a process forks)

from rumimm.format.window import Run, segments
from rumimm.reader import jit as _jit
from rumimm.reader.planner import check_new, finish, plan_frames, uncached
from rumimm.reader.source import PARALLEL_MIN_BYTES, FrameSource, frame_buffers, frame_bytes

__all__ = [
    "PARALLEL_MIN_BYTES",
    "FrameSource",
    "decode_frames",
    "execute",
    "load",
    "read_window",
    "read_windows",
]

#: A window of at most this many frames is read without numba (geozl's decoder through ctypes).
SMALL_READ_FRAMES = 4

#: While the kernels load, a window whose frames decode to at most this many bytes goes without
#: them; a larger one waits: on its decode threads the chip executor holds every frame of a window
#: (compressed and decoded) at once and places them after, 2-3x slower than the kernels on 128 MiB
#: (a 4 x 4096 x 4096 uint16 image), about as fast up to 8 MiB (docs/dev/startup.md).
LOADING_READ_BYTES = 32 << 20

_load_lock = threading.RLock()
K = None  # rumimm.kernels once loaded
_geozl = None  # rumimm.codec.geozl_lib once loaded (the C decoder through ctypes)
_checks = None  # rumimm.reader.frame_checks once loaded (frame headers, errors, the openzl.ext fallback decoder)
_threads = None  # rumimm.reader.threads once loaded (the decode thread pool)
_small = None  # rumimm.reader.small_reads once loaded (chips without numba)
_NATIVE = False  # geozl's GIL-free C decoder is bound
_NO_SCRATCH = np.zeros(1, np.uint8)


def _load_decoder() -> bool:
    """Import OpenZL (frame headers), the thread pool and open geozl's C decoder, once.

    Enough for a small read (``small_reads``), which then needs no numba.  Runs
    under the load lock, like :func:`load`, so a fork never inherits it half done.
    Returns whether the C decoder is there.
    """
    global _checks, _threads, _small, _geozl, _NATIVE
    if _geozl is None:
        with _load_lock:
            if _geozl is None:
                from rumimm._env import env_int
                from rumimm.codec import geozl_lib
                from rumimm.reader import frame_checks, small_reads, threads

                if env_int("RUMIMM_TUNE_MALLOC", 0) != 0:  # unset or 1; 0 opts out
                    from rumimm.reader.cache import tune_malloc

                    tune_malloc()
                _checks, _threads, _small = frame_checks, threads, small_reads
                _NATIVE = geozl_lib.available()
                _geozl = geozl_lib
    return _NATIVE


def load():
    """Import numba, the kernels, OpenZL and geozl's C decoder, once; return the kernels.

    Waits for the background loader (``reader.jit``); safe to call from many threads at
    once.  :func:`_load_decoder` also applies ``cache.tune_malloc`` (glibc's allocator
    keeps the decoder's scratch memory instead of returning it to the kernel after every
    frame: half a frame's decode time; ``docs/performance.md``), unless ``RUMIMM_TUNE_MALLOC=0``.
    """
    global K
    if K is None:
        _load_decoder()
        K = _jit.wait()
    return K


def _without_kernels(nbytes: int) -> bool:
    """Whether a window whose frames decode to ``nbytes`` goes to the chip executor rather than wait for the kernels.

    Yes while they load (the loader is started here), up to LOADING_READ_BYTES, and always in
    a process that never can load them (forked while its parent did: ``jit``).  Call after
    :func:`_load_decoder` returned True.
    """
    global K
    if K is None:
        K = _jit.kernels()
    if K is not None:
        return False
    state = _jit.state()
    return state == "off" or (state == "loading" and nbytes <= LOADING_READ_BYTES)


def _before_fork() -> None:
    _load_lock.acquire()
    _jit.before_fork()


def _after_fork_in_parent() -> None:
    _jit.after_fork_in_parent()
    _load_lock.release()


def _after_fork_in_child() -> None:
    _jit.after_fork_in_child()
    _load_lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


# --------------------------------------------------------------------------- the engine


def _group(plan, sources):
    """Sort plan entries by (source, frame); return (plan, group starts, head rows)."""
    key = plan[:, K.P_IMAGE] * (max(s.n_frames for s in sources) + 1) + plan[:, K.P_FRAME]
    idx = np.argsort(key, kind="stable")
    plan = plan[idx]
    key = key[idx]
    starts = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    return plan, np.append(starts, plan.shape[0]).astype(np.int64), plan[starts]


def execute(sources, plan, bands, ys: int, xs: int, out, *, group: bool = True) -> None:
    """Decode and copy every entry of ``plan`` into ``out`` (uint8, (items, slots, rows, row bytes)).

    ``sources`` are the files the plan's P_IMAGE column refers to (one dtype).  With
    ``group``, entries of one frame are gathered first, so a frame several entries
    need decodes once; without it the entries must be one per frame, of sources[0].
    The planner (``reader.planner``) splits the frames into cached and new ones and
    hands out buffers; the kernels decode the new ones straight from the bytes the stores
    give (``source.frame_buffers``: addresses into local mappings, no view per frame; fetched buffers).  A new
    tile frame that is a whole, aligned block of output rows decodes straight into ``out`` (``Frames.direct``).
    """
    if K is None:
        load()
    single = len(sources) == 1
    if group and not (single and plan.shape[0] == 1):
        plan, starts, heads = _group(plan, sources)
    else:
        starts = np.arange(plan.shape[0] + 1, dtype=np.int64)
        heads = plan
    frame_idx = np.ascontiguousarray(heads[:, K.P_FRAME])
    n = frame_idx.shape[0]
    owners = [0] * n if single else heads[:, K.P_IMAGE].tolist()
    frames = frame_idx.tolist()
    sizes = heads[:, K.P_NBYTES].tolist()
    total = sum(sizes)
    chunks = _threads.parallel_slot(n) if _NATIVE and total >= PARALLEL_MIN_BYTES else 1
    try:
        # the kernels place a frame as soon as it is decoded: one scratch slot per thread, found by the kernel
        batch = plan_frames(sources, owners, frames, sizes, slots=chunks if _NATIVE else None, by_slot=_NATIVE)
        batch.frame_array = frame_idx
        missing = batch.missing
        if chunks > 1:
            new = total if len(missing) == n else sum(sizes[g] for g in missing)
            useful = len(missing) if new >= PARALLEL_MIN_BYTES else 1
            if useful < 2:  # most were cached: threads no longer pay off
                _threads.release_parallel()
                chunks = 1
            chunks = min(chunks, useful) if chunks > 1 else 1
        need = np.zeros(n, np.uint8)
        raw = None  # the new frames' bytes (views into mappings, fetched buffers), alive until the kernels return
        src = np.zeros(n, np.uint64)  # where each new frame's bytes are, and how many (0: cached, or decoded already)
        size = np.zeros(n, np.uint64)
        if missing and not _NATIVE:
            from rumimm.reader.frame_checks import fallback_frames

            decoded = fallback_frames(sources, [frames[g] for g in missing], [owners[g] for g in missing])
            for g, frame in zip(missing, decoded, strict=True):
                batch.decoded[g][:] = frame
        elif missing:
            raw, order, addresses, nbytes = frame_buffers(sources, owners, frames, missing, frame_idx)
            src[order] = addresses
            size[order] = nbytes
            check_new(batch, raw)
            need[order] = 1
        if batch.store or len(missing) < n or not _NATIVE:
            addresses = np.array(batch.addresses, np.uint64)
            if missing and _NATIVE and not batch.store:
                addresses[missing] = 0  # the kernels decode into their thread's scratch slot
        else:  # every frame new, none kept: all decode into the threads' scratch slots
            addresses = np.zeros(n, np.uint64)
        fidx = np.arange(n, dtype=np.int64)
        status = np.zeros(n, np.int64)
        fs0 = sources[0]
        scratch = _NO_SCRATCH if batch.scratch is None else batch.scratch
        kframes = K.Frames(src, size, fidx, addresses, need, starts, status, np.zeros(n, np.uint8))
        place = K.Placement(plan, bands, out, int(ys), int(xs), fs0.isz, fs0.mask, any(s.verify for s in sources))
        counter = np.zeros(1, np.int64)
        if chunks > 1:
            bad = _threads.run_workers(
                lambda w: K.decode_copy(kframes, place, scratch, batch.stride, counter, w), chunks)
            bad = min((b for b in bad if b >= 0), default=-1)
        else:
            bad = K.decode_copy(kframes, place, scratch, batch.stride, counter, 0)
    finally:
        if chunks > 1:
            _threads.release_parallel()
    finish(batch, bad, int(status[bad]) if bad >= 0 else 0)
    del raw


def read_window(fs: FrameSource, bands: np.ndarray, y, x, out=None, view: bool = False) -> np.ndarray:
    """The (len(bands), y.count, x.count) block of rows ``y`` and columns ``x`` (``window.Run``).

    Written into ``out`` (C-contiguous, the source's dtype) when given, else a new array.
    A window of at most :data:`SMALL_READ_FRAMES` frames is read by ``small_reads.read_small``
    (no numba); larger ones by the kernels.  ``view`` (without ``out``): a window inside one
    frame that the cache holds, or keeps now, is returned as a read-only view of that frame
    (``small_reads.read_view``): no copy, no new array.
    """
    nb = bands.shape[0]
    if not (nb and y.count and x.count):
        return np.empty((nb, y.count, x.count), fs.dtype) if out is None else out
    fs.live_store()
    g = fs.grid
    rows = cols = None
    if y.step == 1 and x.step == 1:  # the grid positions touched, counted (segments only for the chip executor)
        down = (y.start + y.count - 1) // g.tile_length - y.start // g.tile_length + 1
        across = (x.start + x.count - 1) // g.tile_width - x.start // g.tile_width + 1
    else:  # a step may skip whole tiles
        rows = segments(y.start, y.step, y.count, g.tile_length, g.image_length).tolist()
        cols = segments(x.start, x.step, x.count, g.tile_width, g.image_width).tolist()
        down, across = len(rows), len(cols)
    if _load_decoder() and (down * across * (1 if fs.cell else nb) <= SMALL_READ_FRAMES
                            or _without_kernels(_window_bytes(fs, bands, y, x))):
        if rows is None:  # step 1: what segments gives, as lists of tuples without numpy
            rows = _spans(y.start, y.count, g.tile_length)
            cols = _spans(x.start, x.count, g.tile_width)
        if view and down == 1 and across == 1 and fs.cache is not None and (
                nb == 1 or (fs.cell and bool(np.all(np.diff(bands) == 1)))):
            return _small.read_view(fs, bands, rows, cols, y.step, x.step)  # the cached frame's window, no copy
        if out is None:
            out = np.empty((nb, y.count, x.count), fs.dtype)
        _small.read_small(fs, bands, rows, cols, y.step, x.step, out)
        return out
    if out is None:
        out = np.empty((nb, y.count, x.count), fs.dtype)
    kern = K if K is not None else load()
    plan = kern.plan_window(fs.grid_rows[0], bands, _run(y), _run(x), fs.isz)
    execute((fs,), plan, bands, y.step, x.step, out.reshape((1, *out.shape)).view(np.uint8), group=False)
    return out


def _spans(start: int, count: int, tile: int) -> list[tuple[int, int, int, int]]:
    """``window.segments(start, 1, count, tile, size)`` for a step of 1 and count >= 1 inside the image, as a list:
    (tile index, first index inside it, count inside it, output offset) per tile touched."""
    t, first = divmod(start, tile)
    if first + count <= tile:  # one tile: most chips
        return [(t, first, count, 0)]
    out = []
    done = 0
    while done < count:
        n = min(tile - first, count - done)
        out.append((t, first, n, done))
        t += 1
        first = 0
        done += n
    return out


def read_windows(sources, windows: np.ndarray, bands: np.ndarray, y, x, out4) -> None:
    """Read N windows into ``out4[n]``: window n is the runs ``y``, ``x`` shifted by its origin.

    ``windows`` is int64 (N, ``kernels.WINDOW_COLS``): source index, origin row, origin
    column; ``out4`` is uint8 (N, len(bands), y.count, x.count * itemsize).  All windows
    are planned together, so a frame several windows need is decoded once.
    """
    for s in sources:
        s.live_store()  # a closed image fails here, even with nothing to read; execute maps the files
    if _load_decoder() and _without_kernels(max(_window_bytes(s, bands, y, x) for s in sources)):
        _read_each(sources, windows, bands, y, x, out4)
        return
    kern = K if K is not None else load()
    grids = np.concatenate([s.grid_rows for s in sources])
    plan = kern.plan_batch(grids, windows, bands, _run(y), _run(x), sources[0].isz)
    if plan.shape[0]:
        execute(sources, plan, bands, y.step, x.step, out4)


def _window_bytes(fs: FrameSource, bands, y, x) -> int:
    """At most the decoded bytes of the frames a window of runs ``y``, ``x`` touches, wherever it lies."""
    g = fs.grid
    down = min(g.tiles_down, (y.count - 1) * y.step // g.tile_length + 2)
    across = min(g.tiles_across, (x.count - 1) * x.step // g.tile_width + 2)
    frame = g.tile_length * g.tile_width * fs.isz * (g.samples_per_pixel if fs.cell else 1)
    return down * across * (1 if fs.cell else bands.shape[0]) * frame


def _read_each(sources, windows, bands, y, x, out4) -> None:
    """``read_windows`` without the kernels: each window to the chip executor, one by one.

    The frames no cache holds are got first, all windows' at once (``frame_bytes``: one
    round of requests for remote objects, as the kernels' path makes).
    """
    jobs = []
    wanted: dict = {}
    for i, y0, x0 in windows.tolist():
        fs = sources[i]
        rows = segments(y0 + y.start, y.step, y.count, fs.grid.tile_length, fs.grid.image_length).tolist()
        cols = segments(x0 + x.start, x.step, x.count, fs.grid.tile_width, fs.grid.image_width).tolist()
        jobs.append((i, rows, cols))
        wanted.setdefault(i, set()).update(p.frame for p in _small.chip_parts(fs, bands, rows, cols))
    owners = [i for i, ks in wanted.items() for _ in ks]
    frames = [k for ks in wanted.values() for k in ks]
    new = uncached(sources, owners, frames)
    got = frame_bytes(sources, owners, frames, new)
    raw: dict = {i: {} for i in wanted}
    for g, buf in got.items():
        raw[owners[g]][frames[g]] = buf
    for n, (i, rows, cols) in enumerate(jobs):
        fs = sources[i]
        item = out4[n]
        direct = item.flags.c_contiguous
        out = item.view(fs.dtype) if direct else np.empty((*item.shape[:2], x.count), fs.dtype)
        _small.read_small(fs, bands, rows, cols, y.step, x.step, out, raw[i])
        if not direct:
            item[...] = out.view(np.uint8)


def _run(r) -> Run:
    """A ``window.Run`` of Python ints: the kernels are compiled for that one record type."""
    return Run(int(r.start), int(r.step), int(r.count))


def decode_frames(fs: FrameSource, ks, raw=None) -> list[np.ndarray]:
    """Whole frames (indices), each a new array shaped (h, w) or (B, h, w) in the file's dtype.

    ``raw``: ``{frame: compressed bytes}`` the caller got already.
    """
    fs.live_store()
    if _load_decoder():
        return _small.read_whole_frames(fs, ks, raw)
    ks = [int(k) for k in ks]
    raw = _checks.fallback_frames((fs,), ks, [0] * len(ks))
    return [r.view(fs.dtype).reshape(fs.grid.frame_shape(k)) for k, r in zip(ks, raw, strict=True)]
