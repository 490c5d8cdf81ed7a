"""Chips: windows of at most ``engine.SMALL_READ_FRAMES`` frames, read without numba.

The same steps as ``engine.execute``, frame by frame in Python: a cached frame is used
as is; a new one is copied out of the file with one ``pread``, its OpenZL header checked
once per open image, decoded by geozl's C decoder through ctypes (GIL released) into a
buffer the cache keeps or into this thread's scratch, its decoded byte count checked
and sub-byte samples masked; the first failure raises one ``CodecError``
(``frame_checks.frame_error``); rectangles are placed by numpy slicing.  A process that
only reads chips never loads numba (0.3 s or more at the first read).  Imported by
``engine._load_decoder``, with OpenZL and geozl's library.
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from rumimm.reader import frame_checks as _checks
from rumimm.reader import threads as _threads
from rumimm.codec import geozl_lib as _geozl
from rumimm.reader.source import (PARALLEL_MIN_BYTES, SCRATCH_KEEP_BYTES, FrameSource, align, fetch_frames, lookup,
                                  thread_scratch)

__all__ = ["read_small", "decode_copied"]

_local = threading.local()


def decode_into(fs: FrameSource, src: int, nbytes: int, frame: np.ndarray, dst: int):
    """Decode the ``nbytes``-byte frame at address ``src`` into ``frame`` (at address ``dst``).

    geozl's C decoder, GIL released.  Checks the decoded byte count and masks sub-byte
    samples; returns None, or the failing status for ``frame_error``.
    """
    got = _geozl.decompress(src, nbytes, dst, frame.shape[0], fs.verify)
    if got != frame.shape[0]:
        return got if got < 0 else _geozl.STATUS_SIZE_MISMATCH
    if fs.mask != 0xFF:
        np.bitwise_and(frame, fs.mask, out=frame)
    return None


def raw_buffer(nbytes: int) -> tuple[np.ndarray, int]:
    """This thread's buffer for a frame's compressed bytes, and its address (kept up to SCRATCH_KEEP_BYTES)."""
    held = getattr(_local, "raw", None)
    if held is not None and held[0].shape[0] >= nbytes:
        return held
    buf = np.empty(max(nbytes + (nbytes >> 2), 1 << 16), np.uint8)  # room for the next, larger frames
    held = (buf, buf.ctypes.data)
    if nbytes <= SCRATCH_KEEP_BYTES:
        _local.raw = held
    return held


def decode_copied(fs: FrameSource, f, k: int, frame: np.ndarray, dst: int, raw=None):
    """Copy frame k's bytes out of the file with one pread, check its header once, decode it into ``frame``.

    A chip's frames are read this way rather than through the mapping: as fast
    (the copy costs what faulting a fresh mapping's pages in costs), and a file
    truncated while open gives an error, not SIGBUS.  ``f`` is ``fs.file``; ``raw``: the
    frame's bytes when the caller fetched them (a remote image).
    """
    if raw is not None:
        _checks.check_header(fs, k, raw, frame.shape[0])
        return decode_into(fs, raw.ctypes.data, raw.shape[0], frame, dst)
    off = fs.header.offsets
    start = int(off[k])
    nbytes = int(off[k + 1]) - start
    buf, addr = raw_buffer(nbytes)
    raw = buf[:nbytes]
    f.read_into(raw, start)
    _checks.check_header(fs, k, raw, frame.shape[0])
    return decode_into(fs, addr, nbytes, frame, dst)


def read_small(fs: FrameSource, bands: np.ndarray, rows, cols, ys: int, xs: int, out) -> None:
    """Read a window of few frames with geozl's C decoder through ctypes, no numba.

    ``rows`` and ``cols`` are ``window.segments`` lists.  The same steps as
    ``engine.execute``, frame by frame: a cached frame is used as is; a new one is copied
    out of the file, its header checked once, decoded (GIL released) into a buffer the
    cache keeps or into this thread's scratch, its decoded byte count checked and
    sub-byte samples masked (:func:`decode_copied`); the first failure raises one
    ``frame_error``.  Rectangles are placed by numpy slicing.  Frames holding 1 MiB or
    more in all are decoded on the decode threads, from the mapping (:func:`decode_parallel`).
    """
    g = fs.grid
    cell = fs.cell
    planes = g.samples_per_pixel if cell else 1
    dst = out.view(np.uint8).reshape(out.shape + (fs.isz,))
    slots = [(slice(None), None)] if cell else list(enumerate(bands.tolist()))
    jobs = []  # (frame, frame shape, decoded bytes, out index, frame index)
    for r, fy, cy, dy in rows:
        for c, fx, cx, dx in cols:
            fh, fw = g.edge_size(r, c)
            shape = (planes, fh, fw, fs.isz)
            size = planes * fh * fw * fs.isz
            into = (slice(dy, dy + cy), slice(dx, dx + cx))
            take = (slice(fy, fy + (cy - 1) * ys + 1, ys), slice(fx, fx + (cx - 1) * xs + 1, xs))
            for slot, b in slots:
                k = g.frame_index(r, c) if cell else g.frame_index(r, c, b)
                jobs.append((k, shape, size, (slot,) + into, ((bands,) if cell else (0,)) + take))
    total = sum(job[2] for job in jobs)
    if len(jobs) > 1 and total >= PARALLEL_MIN_BYTES and not fs.remote and decode_parallel(fs, jobs, dst):
        return
    cache = fs.cache
    store = cache is not None and cache.admits(total)  # the admission rule applies to the read as a whole
    f = fs.opened()  # held until the read returns: the descriptor stays open
    fs.checked()
    hits = [None if cache is None else cache.get((fs.token, job[0])) for job in jobs]
    fetched = {}
    if fs.remote:  # every new frame of the chip in one round of requests
        fetched = fetch_frames((fs,), [0] * len(jobs), [job[0] for job in jobs],
                               [i for i, hit in enumerate(hits) if hit is None])
    for i, (k, shape, size, into, take) in enumerate(jobs):
        hit = hits[i]
        if hit is not None:
            frame = hit[0]
        else:
            if store:
                frame = np.empty(size, np.uint8)
                addr = frame.ctypes.data
            else:
                scratch, addr = thread_scratch(size)
                frame = scratch[:size]
            status = decode_copied(fs, f, k, frame, addr, fetched.get(i))
            if status is not None:
                raise _checks.frame_error(fs, k, int(status))
            if store:
                cache.put_many([(fs.token, k)], [frame], [addr])
        dst[into] = frame.reshape(shape)[take]


def decode_parallel(fs: FrameSource, jobs, dst) -> bool:
    """Decode a few large new frames on the decode threads, from the mapping, and place them.

    Returns False (nothing done) when the parallel slot is taken or only one thread is set.
    """
    chunks = _threads.parallel_slot(len(jobs))
    if chunks < 2:
        return False
    try:
        klist = [job[0] for job in jobs]
        found = lookup((fs,), [0] * len(jobs), klist)
        frames = [None if found is None or found[i] is None else found[i][0] for i in range(len(jobs))]
        missing = [i for i, f in enumerate(frames) if f is None]
        chunks = max(1, min(chunks, len(missing)))  # every frame cached: nothing to decode
        sizes = [jobs[i][2] for i in missing]
        store = found is not None and fs.cache.admits(sum(sizes))
        stride = align(max(sizes, default=0))
        scratch, base = (None, 0) if store or not missing else thread_scratch(stride * len(missing))
        addrs = {}
        for n, (i, size) in enumerate(zip(missing, sizes)):
            if store:
                frames[i] = np.empty(size, np.uint8)
                addrs[i] = frames[i].ctypes.data
            else:
                frames[i] = scratch[n * stride:n * stride + size]
                addrs[i] = base + n * stride
        src, nbytes, _ = fs.frame_table()
        keep = fs.mapping()  # alive while the decoders read it
        for i in missing:
            _checks.check_header(fs, klist[i])

        def work(w):
            return [(i, decode_into(fs, int(src[klist[i]]), int(nbytes[klist[i]]), frames[i], addrs[i]))
                    for i in missing[w::chunks]]

        done = _threads.run_workers(work, chunks) if chunks > 1 else [work(0)]
        del keep
    finally:
        _threads.release_parallel()
    status = dict(itertools.chain.from_iterable(done))
    bad = [i for i in missing if status[i] is not None]
    if bad:
        raise _checks.frame_error(fs, klist[bad[0]], int(status[bad[0]]))
    for (_, shape, _, into, take), frame in zip(jobs, frames):
        dst[into] = frame.reshape(shape)[take]
    if store:
        fs.cache.put_many([(fs.token, klist[i]) for i in missing], [frames[i] for i in missing],
                          [addrs[i] for i in missing])
    return True
