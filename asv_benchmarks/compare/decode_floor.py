"""The decode floor of the side-by-side scripts: a window's frames, already in memory, decoded and nothing else.

Each frame goes through rumimm's GIL-free single-frame decoder (``rumimm.kernels.native.decode_one``,
geozl's C entry point), serially or on a plain thread pool, into one preallocated buffer.
What a read costs above this is planning, cache lookups, copying and Python overhead.
"""

from __future__ import annotations

import time

import numpy as np


def decode_frames(data: np.ndarray, offsets, counts, dst: np.ndarray, dst_offsets, dst_sizes, *, verify=True,
                  pool=None) -> np.ndarray:
    """Decode frame i (``data[offsets[i]:offsets[i] + counts[i]]``) into its slot of ``dst``.

    Returns the int64 statuses (the decoded byte count, or a negative code).  With a
    ``concurrent.futures`` pool the frames are decoded on its threads.
    """
    from rumimm.kernels import native as _native

    srcs = [data[int(o):int(o) + int(c)] for o, c in zip(offsets, counts, strict=True)]
    dsts = [dst[int(o):int(o) + int(n)] for o, n in zip(dst_offsets, dst_sizes, strict=True)]
    if pool is None or len(srcs) < 2:
        return np.array([_native.decode_one(s, d, verify) for s, d in zip(srcs, dsts, strict=True)], np.int64)
    return np.array(list(pool.map(lambda s, d: _native.decode_one(s, d, verify), srcs, dsts)), np.int64)


def touched_frames(header, w) -> np.ndarray:
    """The indices of the frames window ``w`` (b0, b1, y0, y1, x0, x1) touches."""
    grid = header.grid
    b0, b1, y0, y1, x0, x1 = w
    rows = range(y0 // grid.tile_length, (y1 - 1) // grid.tile_length + 1)
    cols = range(x0 // grid.tile_width, (x1 - 1) // grid.tile_width + 1)
    if int(grid.unit) == 1:  # cell frames hold every band
        return np.array([r * grid.tiles_across + c for r in rows for c in cols], np.int64)
    return np.array([grid.frame_index(r, c, band) for r in rows for c in cols for band in range(b0, b1)], np.int64)


def floor_timer(header, data: np.ndarray, threads: int):
    """A function timing the decode of just the frames a window touches (frames in ``data``).

    The frames are decoded by :func:`decode_frames` (rumimm's nogil per-frame
    decoder), serially or on a plain thread pool of ``threads`` threads.
    """
    from concurrent.futures import ThreadPoolExecutor

    from rumimm.kernels import native as _native

    offsets, counts = header.frame_offsets[:-1], header.frame_byte_counts
    isz = header.encoding.itemsize
    pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def decode_touched(w) -> float:
        ks = touched_frames(header, w)
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
