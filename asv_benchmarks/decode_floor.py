"""The decode floor of compare.py: a window's frames, already in memory, decoded and nothing else.

Each frame goes through rumimm's GIL-free single-frame decoder (``rumimm.kernels.native.decode_one``,
geozl's C entry point), serially or on a plain thread pool, into one preallocated buffer.
What a read costs above this is planning, cache lookups, copying and Python overhead.
"""

from __future__ import annotations

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
