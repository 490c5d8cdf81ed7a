"""The chip executor: windows of at most ``engine.SMALL_READ_FRAMES`` frames and whole frames, without numba.

The planner (``reader.planner``) says which frames are cached and where new ones decode;
this executor gets the new frames' bytes with one ``Store.get_ranges`` call (a local
file: one ``pread`` per frame into this thread's buffer; a remote store: one round of
merged, concurrent requests), checks each one's header, decodes it with geozl's C decoder through ctypes (GIL
released), checks the decoded byte count and masks sub-byte samples, then places the
rectangles by numpy slicing.  New frames holding :data:`~rumimm.reader.source.PARALLEL_MIN_BYTES`
or more in all are decoded on the decode threads.  A process that only reads chips never
loads numba (0.3 s or more at the first read).  Imported by ``engine._load_decoder``, with
OpenZL and geozl's library.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import numpy as np

from rumimm.codec import geozl_lib as _geozl
from rumimm.reader import threads as _threads
from rumimm.reader.frame_checks import check_header
from rumimm.reader.planner import FrameBatch, check_new, finish, plan_frames
from rumimm.reader.source import PARALLEL_MIN_BYTES, SCRATCH_KEEP_BYTES, FrameSource

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rumimm.store import Store

__all__ = ["ChipPart", "chip_parts", "read_small", "read_view", "read_whole_frames"]

_local = threading.local()
_WORDS = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


class ChipPart:
    """What one frame gives a chip: its index, its decoded shape, and where its rectangle goes."""

    __slots__ = ("frame", "into", "nbytes", "shape", "take")

    def __init__(self, frame: int, shape: tuple, into: tuple, take: tuple):
        self.frame = frame  # index in the file
        self.shape = shape  # (planes, rows, columns, itemsize) of the decoded frame, as bytes
        self.nbytes = shape[0] * shape[1] * shape[2] * shape[3]
        self.into = into  # index of the output (uint8, (bands, rows, columns, itemsize)) it fills
        self.take = take  # index of the decoded frame it copies


def read_small(fs: FrameSource, bands: np.ndarray, rows, cols, ys: int, xs: int, out, raw=None) -> None:
    """Read a window of few frames into ``out`` ((bands, rows, columns), the file's dtype).

    ``rows`` and ``cols`` are ``window.segments`` lists: (grid position, first, count,
    output offset) along each axis.  ``raw``: ``{frame: compressed bytes}`` the caller got
    already (a batch gets every window's frames at once); the others come from the store.
    """
    parts = chip_parts(fs, bands, rows, cols, ys, xs)
    word = _WORDS.get(fs.isz)
    if word is not None:  # samples copied as unsigned words of their size (a strided copy of 2-byte rows is slower)
        dst = out.view(word)

        def place(g: int, frame: np.ndarray) -> None:
            p = parts[g]
            dst[p.into] = frame.view(word).reshape(p.shape[:3])[p.take]
    else:  # 16-byte samples: as bytes
        dst = out.view(np.uint8).reshape((*out.shape, fs.isz))

        def place(g: int, frame: np.ndarray) -> None:
            p = parts[g]
            dst[p.into] = frame.reshape(p.shape)[p.take]

    finish(_decode(fs, [p.frame for p in parts], [p.nbytes for p in parts], place=place, raw=raw))


def read_view(fs: FrameSource, bands: np.ndarray, rows, cols, ys: int, xs: int) -> np.ndarray:
    """A window inside one frame (``read_small``'s arguments, one grid position; one band of tile frames, or
    ascending consecutive bands of cell frames), as a read-only view of the frame the cache holds.

    A frame the cache does not keep (no cache, or a read larger than its admission rule)
    was decoded into this thread's scratch memory: the window is copied out of it into a
    new array, as ``read_small`` would place it.
    """
    (part,) = chip_parts(fs, bands[:1] if fs.cell else bands, rows, cols, ys, xs)
    batch = _decode(fs, [part.frame], [part.nbytes])
    finish(batch)  # the new frame into the cache first: from then on its array is read-only
    planes, fh, fw, _ = part.shape
    frame = batch.decoded[0].view(fs.dtype).reshape(planes, fh, fw)
    b0 = int(bands[0]) if fs.cell else 0
    window = frame[(slice(b0, b0 + bands.shape[0]), *part.take[1:])]
    if window.flags.writeable:  # scratch memory (or a frame no cache took): the caller gets its own copy
        return window.copy()
    return window


def chip_parts(fs: FrameSource, bands: np.ndarray, rows, cols, ys: int = 1, xs: int = 1) -> list[ChipPart]:
    """What each frame of a window (``read_small``'s arguments) gives it, in decoding order."""
    g = fs.grid
    cell = fs.cell
    if not cell and len(rows) == 1 and len(cols) == 1 and bands.shape[0] == 1:  # a chip of one tile frame
        (r, fy, cy, dy), (c, fx, cx, dx) = rows[0], cols[0]
        fh, fw = g.edge_size(r, c)
        return [ChipPart(g.frame_index(r, c, int(bands[0])), (1, fh, fw, fs.isz),
                         (0, slice(dy, dy + cy), slice(dx, dx + cx)),
                         (0, slice(fy, fy + (cy - 1) * ys + 1, ys), slice(fx, fx + (cx - 1) * xs + 1, xs)))]
    planes = g.samples_per_pixel if cell else 1
    slots = [(slice(None), None)] if cell else list(enumerate(bands.tolist()))
    parts = []
    for r, fy, cy, dy in rows:
        for c, fx, cx, dx in cols:
            fh, fw = g.edge_size(r, c)
            shape = (planes, fh, fw, fs.isz)
            into = (slice(dy, dy + cy), slice(dx, dx + cx))
            take = (slice(fy, fy + (cy - 1) * ys + 1, ys), slice(fx, fx + (cx - 1) * xs + 1, xs))
            for slot, b in slots:
                k = g.frame_index(r, c) if cell else g.frame_index(r, c, b)
                parts.append(ChipPart(k, shape, (slot, *into), ((bands,) if cell else (0,)) + take))
    return parts


def read_whole_frames(fs: FrameSource, ks, raw=None) -> list[np.ndarray]:
    """Whole frames (indices), each a new array shaped (h, w) or (B, h, w) in the file's dtype.

    ``raw``: ``{frame: compressed bytes}`` the caller got already; the others come from the store.
    """
    g = fs.grid
    frames = [int(k) for k in ks]
    batch = _decode(fs, frames, [g.frame_samples(k) * fs.isz for k in frames], own=True, raw=raw)
    return [buf.view(fs.dtype).reshape(g.frame_shape(k)) for k, buf in zip(frames, batch.decoded, strict=True)]


def _decode(fs: FrameSource, frames: list[int], sizes: list[int], own: bool = False, place=None,
            raw=None) -> FrameBatch:
    """Plan the frames and decode the new ones into their buffers; raises the first failure.

    ``own``: every frame is decoded into an array of its own, for the caller to keep
    (the cache is neither asked nor filled).  Otherwise a new frame decodes into a buffer
    the cache keeps or into this thread's scratch.  ``place(g, frame)`` is called for
    every frame once its decoded bytes are ready: decoding serially, right after each new
    frame is decoded, while it is still in the CPU caches, so one scratch slot serves them
    all (placing after four 512 KiB frames were decoded cost up to 0.7 ms a chip).
    ``raw``: ``{frame index: compressed bytes}`` the caller got already.
    """
    store = fs.live_store()  # held until the read returns: the descriptor stays open
    n_new = sum(sizes)
    workers = _threads.parallel_slot(len(frames)) if len(frames) > 1 and n_new >= PARALLEL_MIN_BYTES else 1
    try:
        batch = plan_frames((fs,), [0] * len(frames), frames, sizes, own=own,
                            slots=1 if workers < 2 and place is not None else None)
        missing = batch.missing
        if workers > 1 and len(missing) > 1:
            raw = _frame_bytes(fs, store, frames, missing, raw)
            check_new(batch, raw)
            jobs = missing
            done = _threads.run_workers(lambda w: [(g, _decode_one(batch, g, raw[g])) for g in jobs[w::workers]],
                                        min(workers, len(missing)))
            failed = sorted((g, status) for part in done for g, status in part if status is not None)
            if failed:
                finish(batch, *failed[0])
            if place is not None:
                for g, frame in enumerate(batch.decoded):
                    place(g, frame)
            return batch
        if place is not None and len(missing) < len(frames):  # cached frames first: new ones share a slot
            new = set(missing)
            for g, frame in enumerate(batch.decoded):
                if g not in new:
                    place(g, frame)
        for g, frame in _frame_stream(fs, store, frames, missing, raw):
            # one frame at a time through this thread's buffer and one decode slot: placed before the next
            check_header(fs, frames[g], frame, sizes[g])
            status = _decode_one(batch, g, frame)
            if status is not None:
                finish(batch, g, status)
            if place is not None:
                place(g, batch.decoded[g])
    finally:
        if workers > 1:
            _threads.release_parallel()
    return batch


def _frame_bytes(fs: FrameSource, store, frames: list[int], missing: list[int], given) -> dict:
    """``{g: compressed bytes}`` of the new frames: from ``given`` (``{frame: bytes}``), the rest with one
    ``get_ranges`` call.

    The store may fill this thread's buffer (a local file: one ``pread`` per frame, cheaper
    for a few frames than faulting in a fresh mapping) or hand out its own (a remote
    object: one round of merged, concurrent requests).
    """
    if given is None:
        out: dict = {}
        lacking = missing
    else:
        out = {g: given[frames[g]] for g in missing if frames[g] in given}
        lacking = [g for g in missing if g not in out]
    if lacking:
        ranges = [fs.frame_range(frames[g]) for g in lacking]
        total = 0
        for _, n in ranges:
            total += n
        out.update(zip(lacking, store.get_ranges(ranges, scratch=_raw_buffer(total)), strict=True))
    return out


def _frame_stream(fs: FrameSource, store: Store, frames: list[int], missing: list[int],
                  given: dict | None) -> Iterator[tuple[int, np.ndarray]]:
    """``(g, compressed bytes)`` of each new frame, from ``given`` (``{frame: bytes}``) or ``store.iter_ranges``.

    A local file reads each frame into the start of this thread's buffer right before it is
    decoded (the bytes are still in the CPU caches); a remote object hands them out as its
    merged, concurrent requests complete.
    """
    lacking = missing
    if given is not None:
        lacking = []
        for g in missing:
            if frames[g] in given:
                yield g, given[frames[g]]
            else:
                lacking.append(g)
    if lacking:
        ranges = [fs.frame_range(frames[g]) for g in lacking]
        scratch = _raw_buffer(ranges[0][1] if len(ranges) == 1 else max([n for _, n in ranges]))
        for i, buf in store.iter_ranges(ranges, scratch=scratch):
            yield lacking[i], buf


def _decode_one(batch: FrameBatch, g: int, raw: np.ndarray) -> int | None:
    """Decode group g's frame from ``raw`` into its buffer (geozl's C decoder, GIL released); None or the status."""
    fs = batch.sources[0]
    frame = batch.decoded[g]
    got = _geozl.decompress(raw.ctypes.data, raw.shape[0], batch.addresses[g], frame.shape[0], fs.verify)
    if got != frame.shape[0]:
        return got if got < 0 else _geozl.STATUS_SIZE_MISMATCH
    if fs.mask != 0xFF:
        np.bitwise_and(frame, fs.mask, out=frame)
    return None


def _raw_buffer(nbytes: int) -> np.ndarray:
    """This thread's buffer for a frame's compressed bytes (kept up to SCRATCH_KEEP_BYTES)."""
    held = getattr(_local, "raw", None)
    if held is None or held.shape[0] < nbytes:
        held = np.empty(max(nbytes + (nbytes >> 2), 1 << 16), np.uint8)  # room for the next, larger frames
        if nbytes <= SCRATCH_KEEP_BYTES:
            _local.raw = held
    return held[:nbytes]
