"""The read engine: plan -> cache -> decode + place, for one image or a stack of them.

Every read (``Image``, ``Cube``, ``ImageCollection``, ``read_batch``) hands the engine
:class:`FrameSource` records, one per open file, and a *plan*: one int64 row per
(frame, output slot) saying which rectangle of a decoded frame goes where in the
output (``kernels.plan_window`` / ``plan_batch``).  :func:`execute` then

1. groups the entries by frame (a frame several windows need is decoded once),
2. takes the frames the cache holds, decides whether the new ones are kept,
3. checks each new frame's OpenZL header once per open image,
4. decodes and places everything in one ``nogil`` kernel call
   (``kernels.decode_copy``), on the calling thread or on a few threads,
5. maps a failed frame to one :class:`~rumimm.errors.CodecError` and stores the
   new frames in the cache.

Whole frames (:func:`decode_frames`) go through the same kernel with an empty copy
list.  A window of at most :data:`SMALL_READ_FRAMES` frames (a chip) skips the kernels:
``small_reads`` runs the same steps in Python, decoding each frame with the same C
function (``codec.geozl_lib``, through ctypes, GIL released) and placing it with numpy
slicing, so a process that only reads chips never loads numba (0.3 s or more at
the first read).  Both share the cache, the header checks and the error mapping
(``frame_checks``).  Output is always copied out of the decoded frame, so a small chip
never keeps a whole frame alive.

Loading.  Opening a file and reading its metadata need neither numba nor OpenZL.
:func:`_load_decoder` imports OpenZL and opens geozl's library at the first pixel read,
under a module lock a fork waits for (``os.register_at_fork``).  numba and the kernels
load on a background thread (``reader.jit``), started by the first read that would use
them; until they are ready, reads go through ``small_reads`` (whole windows of any
size, or each window of a batch), and a fork does not wait for them (``jit`` says what
a child forked meanwhile can do).
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (imported before any fork can wait on load(): see _before_fork)
import logging  # noqa: F401  (numba imports it; both register fork hooks of their own)
import os
import threading

import numpy as np

from rumimm.reader import jit as _jit
from rumimm.reader.source import PARALLEL_MIN_BYTES, FrameSource, align, lookup, thread_scratch
from rumimm.format.window import Run, segments

__all__ = ["FrameSource", "load", "execute", "read_window", "read_windows", "decode_frames",
           "PARALLEL_MIN_BYTES"]

#: A window of at most this many frames is read without numba (geozl's decoder through ctypes).
SMALL_READ_FRAMES = 4

#: While the kernels load, a read of at most this many output bytes goes without them; a larger
#: one waits: the chip executor decodes all, then places all, 2-3x slower than the kernels on
#: 128 MiB (a 4 x 4096 x 4096 uint16 image), about as fast up to 8 MiB (docs/dev/startup.md).
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
                from rumimm.reader import frame_checks, small_reads, threads
                from rumimm._env import env_int
                from rumimm.codec import geozl_lib

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
    """Whether a read of ``nbytes`` output bytes goes through ``small_reads`` rather than wait for the kernels.

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


def execute(sources, plan, bands, ys: int, xs: int, out4, *, group: bool = True) -> None:
    """Decode and copy every entry of ``plan`` into ``out4`` (uint8, (items, slots, rows, row bytes)).

    ``sources`` are the files the plan's P_IMAGE column refers to (one dtype).  With
    ``group``, entries of one frame are gathered first, so a frame several entries
    need decodes once; without it the entries must be one per frame, of sources[0].
    """
    if K is None:
        load()
    single = len(sources) == 1
    if group and not (single and plan.shape[0] == 1):
        plan, gstart, heads = _group(plan, sources)
    else:
        gstart = np.arange(plan.shape[0] + 1, dtype=np.int64)
        heads = plan
    ks = np.ascontiguousarray(heads[:, K.P_FRAME])
    ngroups = ks.shape[0]
    owners = [0] * ngroups if single else heads[:, K.P_IMAGE].tolist()
    keep = [s.mapping() for s in sources]  # every mapping the kernel reads, alive until it returns
    tables = [s.frame_table() for s in sources]
    if single:
        src, size, _ = tables[0]
        fidx = ks
    else:
        own = np.asarray(owners)
        src = np.empty(ngroups, np.uint64)
        size = np.empty(ngroups, np.uint64)
        for i, (s_src, s_size, _) in enumerate(tables):
            m = own == i
            src[m] = s_src[ks[m]]
            size[m] = s_size[ks[m]]
        fidx = np.arange(ngroups, dtype=np.int64)
    klist = ks.tolist()
    nbytes = heads[:, K.P_NBYTES]
    dec = np.zeros(ngroups, np.uint64)
    need = np.ones(ngroups, np.uint8)

    # -- frames already decoded
    found = lookup(sources, owners, klist)
    if found is None:
        missing = list(range(ngroups))
    else:
        missing = []
        for g, hit in enumerate(found):
            if hit is None:
                missing.append(g)
            else:
                keep.append(hit[0])
                dec[g] = hit[1]
                need[g] = 0
    sizes = [int(nbytes[g]) for g in missing]
    new_bytes = sum(sizes)
    store = found is not None and bool(missing) and all(
        s.cache is not None and s.cache.admits(new_bytes) for s in sources)

    # -- frames to decode: into new buffers the cache keeps, or a scratch slot per thread
    chunks = 1
    fresh = []
    scratch = _NO_SCRATCH
    stride = 0
    if missing and not _NATIVE:
        fresh = _checks.fallback_frames(sources, [klist[g] for g in missing], [owners[g] for g in missing])
        for g, frame in zip(missing, fresh):
            dec[g] = frame.ctypes.data
            need[g] = 0
        keep.extend(fresh)
    elif missing:
        for g in missing:
            _checks.check_header(sources[owners[g]], klist[g])
        if new_bytes >= PARALLEL_MIN_BYTES:  # threads pay off only with enough work
            chunks = _threads.parallel_slot(len(missing))
        if store:
            for g, n in zip(missing, sizes):
                frame = np.empty(n, np.uint8)
                dec[g] = frame.ctypes.data
                fresh.append(frame)
            keep.extend(fresh)
        else:
            stride = align(max(sizes))
            scratch = thread_scratch(stride * chunks)[0]
            keep.append(scratch)
    status = np.zeros(ngroups, np.int64)
    fs0 = sources[0]
    frames = K.Frames(src, size, fidx, dec, need, gstart, status)
    place = K.Placement(plan, bands, out4, int(ys), int(xs), fs0.isz, fs0.mask, any(s.verify for s in sources))
    counter = np.zeros(1, np.int64)
    if chunks > 1:
        try:
            bad = _threads.run_workers(lambda w: K.decode_copy(frames, place, scratch, stride, counter, w), chunks)
            bad = min((b for b in bad if b >= 0), default=-1)
        finally:
            _threads.release_parallel()
    else:
        bad = K.decode_copy(frames, place, scratch, stride, counter, 0)
    if bad >= 0:
        raise _checks.frame_error(sources[owners[bad]], klist[bad], int(status[bad]))
    if store and fresh:
        for g, frame in zip(missing, fresh):
            fs = sources[owners[g]]
            fs.cache.put_many([(fs.token, klist[g])], [frame], [int(dec[g])])
    del keep


def read_window(fs: FrameSource, bands: np.ndarray, y, x, out=None) -> np.ndarray:
    """The (len(bands), y.count, x.count) block of rows ``y`` and columns ``x`` (``window.Run``).

    Written into ``out`` (C-contiguous, the source's dtype) when given, else a new array.
    A window of at most :data:`SMALL_READ_FRAMES` frames is read by ``small_reads.read_small``
    (no numba); larger ones by the kernels.
    """
    nb = bands.shape[0]
    if out is None:
        out = np.empty((nb, y.count, x.count), fs.dtype)
    if not (nb and y.count and x.count):
        return out
    fs.opened()
    g = fs.grid
    r, fy = divmod(y.start, g.tile_length)
    c, fx = divmod(x.start, g.tile_width)
    if fy + (y.count - 1) * y.step < g.tile_length and fx + (x.count - 1) * x.step < g.tile_width:
        rows, cols = [(r, fy, y.count, 0)], [(c, fx, x.count, 0)]  # one grid position: what segments gives
    else:
        rows = segments(y.start, y.step, y.count, g.tile_length, g.image_length).tolist()
        cols = segments(x.start, x.step, x.count, g.tile_width, g.image_width).tolist()
    if _load_decoder() and (len(rows) * len(cols) * (1 if fs.cell else nb) <= SMALL_READ_FRAMES
                            or _without_kernels(out.nbytes)):
        _small.read_small(fs, bands, rows, cols, y.step, x.step, out)
        return out
    kern = K if K is not None else load()
    plan = kern.plan_window(fs.grid_rows[0], bands, _run(y), _run(x), fs.isz)
    execute((fs,), plan, bands, y.step, x.step, out.reshape((1,) + out.shape).view(np.uint8), group=False)
    return out


def read_windows(sources, windows: np.ndarray, bands: np.ndarray, y, x, out4) -> None:
    """Read N windows into ``out4[n]``: window n is the runs ``y``, ``x`` shifted by its origin.

    ``windows`` is int64 (N, ``kernels.WINDOW_COLS``): source index, origin row, origin
    column; ``out4`` is uint8 (N, len(bands), y.count, x.count * itemsize).  All windows
    are planned together, so a frame several windows need is decoded once.
    """
    for s in sources:
        s.opened()  # a closed image fails here, even with nothing to read; execute maps the files
    if _load_decoder() and _without_kernels(out4.nbytes):
        _read_each(sources, windows, bands, y, x, out4)
        return
    kern = K if K is not None else load()
    grids = np.concatenate([s.grid_rows for s in sources])
    plan = kern.plan_batch(grids, windows, bands, _run(y), _run(x), sources[0].isz)
    if plan.shape[0]:
        execute(sources, plan, bands, y.step, x.step, out4)


def _read_each(sources, windows, bands, y, x, out4) -> None:
    """``read_windows`` without the kernels: each window through ``small_reads``, one by one."""
    for n, (i, y0, x0) in enumerate(windows.tolist()):
        fs = sources[i]
        rows = segments(y0 + y.start, y.step, y.count, fs.grid.tile_length, fs.grid.image_length).tolist()
        cols = segments(x0 + x.start, x.step, x.count, fs.grid.tile_width, fs.grid.image_width).tolist()
        item = out4[n]
        direct = item.flags.c_contiguous
        out = item.view(fs.dtype) if direct else np.empty(item.shape[:2] + (x.count,), fs.dtype)
        _small.read_small(fs, bands, rows, cols, y.step, x.step, out)
        if not direct:
            item[...] = out.view(np.uint8)


def _run(r) -> Run:
    """A ``window.Run`` of Python ints: the kernels are compiled for that one record type."""
    return Run(int(r.start), int(r.step), int(r.count))


def decode_frames(fs: FrameSource, ks) -> list[np.ndarray]:
    """Whole frames (indices), each a new array shaped (h, w) or (B, h, w) in the file's dtype."""
    native = _load_decoder()
    out = []
    for k in ks:
        k = int(k)
        if not native:
            raw = _checks.fallback_frames((fs,), [k], [0])[0]
        else:
            f = fs.opened()
            fs.checked()
            raw = np.empty(fs.grid.frame_samples(k) * fs.isz, np.uint8)
            status = _small.decode_copied(fs, f, k, raw, raw.ctypes.data)
            if status is not None:
                raise _checks.frame_error(fs, k, int(status))
        out.append(raw.view(fs.dtype).reshape(fs.grid.frame_shape(k)))
    return out
