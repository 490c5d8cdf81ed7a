"""The batch blob check: every blob of a catalog column in one numba pass.

``rumimm.parse_blobs`` calls :func:`check_blobs`; one blob is checked by
``blob.check_one`` (numpy) with the same rules, in the same order, giving the same
status codes (defined in ``blob.py``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rumimm.format.blob import (
    BAD_COUNT_BITS,
    BAD_MAGIC,
    BAD_PAIR,
    BAD_SIZE,
    BAD_UNIT,
    BAD_VERSION,
    COUNT_OVERFLOW,
    EMPTY_IMAGE,
    HEADER_SIZE,
    MAGIC,
    MAX_FRAMES,
    NOT_MIN,
    NOT_MIN_BITS,
    OK,
    PADDING_BITS,
    SINGLE_FRAME_BITS,
    TOO_MANY_FRAMES,
    TOO_SHORT,
    UINT32_MAX,
    VERSION,
    ZERO_BANDS,
    ZERO_COUNT,
    ZERO_TILE,
)


@njit(cache=True, nogil=True, inline="always")
def _u(buf, pos, nbytes):
    """Little-endian unsigned integer of ``nbytes`` bytes at ``pos``."""
    v = np.uint64(0)
    for j in range(nbytes):
        v |= np.uint64(buf[pos + j]) << np.uint64(8 * j)
    return v


@njit(cache=True, nogil=True, inline="always")
def _residual(packed, i, bits):
    """Residual ``i``: ``bits`` bits from bit ``i * bits``, LSB first, staying in ``packed``."""
    lo = np.int64(i) * bits
    byte = lo >> 3
    shift = lo & 7
    need = (shift + bits + 7) >> 3
    v = np.uint64(0)
    for j in range(need):
        v |= np.uint64(packed[byte + j]) << np.uint64(8 * j)
    v >>= np.uint64(shift)
    if bits < 64:
        v &= (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    return v


@njit(cache=True, nogil=True)
def _bit_length(x):
    n = 0
    while x:
        x >>= np.uint64(1)
        n += 1
    return n


@njit(cache=True, nogil=True)
def _ceildiv(a, b):
    return -(-a // b)


@njit(cache=True, nogil=True)
def check_blobs(data, starts, valid_pairs, fields, status):
    """Parse and check every blob ``data[starts[i]:starts[i+1]]``.

    ``fields`` is int64 (M, 12): width, length, tile_width, tile_length, bands,
    bits_per_sample, sample_format, frame_unit, count_min, count_bits, n_frames,
    blob_size.  ``status[i]`` receives OK or the first rule broken.  Checks every
    reader MUST of the spec and the canonical encoding (min residual 0, minimal
    width), without allocating per blob.
    """
    m = starts.shape[0] - 1
    for i in range(m):
        s = starts[i]
        size = starts[i + 1] - s
        fields[i, 11] = size
        if size < HEADER_SIZE:
            status[i] = TOO_SHORT
            continue
        magic = _u(data, s, 4)
        version = _u(data, s + 4, 2)
        width = np.int64(_u(data, s + 6, 4))
        length = np.int64(_u(data, s + 10, 4))
        tw = np.int64(_u(data, s + 14, 2))
        tl = np.int64(_u(data, s + 16, 2))
        bands = np.int64(_u(data, s + 18, 2))
        bps = np.int64(data[s + 20])
        sf = np.int64(data[s + 21])
        unit = np.int64(data[s + 22])
        cmin = np.int64(_u(data, s + 23, 4))
        bits = np.int64(data[s + 27])
        fields[i, 0] = width
        fields[i, 1] = length
        fields[i, 2] = tw
        fields[i, 3] = tl
        fields[i, 4] = bands
        fields[i, 5] = bps
        fields[i, 6] = sf
        fields[i, 7] = unit
        fields[i, 8] = cmin
        fields[i, 9] = bits
        if magic != MAGIC:
            status[i] = BAD_MAGIC
            continue
        if version != VERSION:
            status[i] = BAD_VERSION
            continue
        if tw == 0 or tl == 0:
            status[i] = ZERO_TILE
            continue
        if bands == 0:
            status[i] = ZERO_BANDS
            continue
        if valid_pairs[sf, bps] == 0:
            status[i] = BAD_PAIR
            continue
        if unit > 1:
            status[i] = BAD_UNIT
            continue
        if bits > 32:
            status[i] = BAD_COUNT_BITS
            continue
        if width == 0 or length == 0:
            status[i] = EMPTY_IMAGE
            continue
        across = _ceildiv(width, tw)
        down = _ceildiv(length, tl)
        if across > MAX_FRAMES // down:  # the int64 product below would overflow
            status[i] = TOO_MANY_FRAMES
            continue
        g = across * down
        n = g * bands if unit == 0 else g
        fields[i, 10] = n
        if n > MAX_FRAMES:
            status[i] = TOO_MANY_FRAMES
            continue
        packed_size = _ceildiv(n * bits, 8)
        if size != HEADER_SIZE + packed_size:
            status[i] = BAD_SIZE
            continue
        if cmin == 0:
            status[i] = ZERO_COUNT
            continue
        if n == 1 and bits != 0:
            status[i] = SINGLE_FRAME_BITS
            continue
        used = n * bits
        if used & 7:
            last = data[s + HEADER_SIZE + packed_size - 1]
            if last >> (used & 7):
                status[i] = PADDING_BITS
                continue
        if bits:
            packed = data[s + HEADER_SIZE : s + size]
            rmin = _residual(packed, 0, bits)
            rmax = rmin
            for k in range(1, n):
                r = _residual(packed, k, bits)
                if r < rmin:
                    rmin = r
                if r > rmax:
                    rmax = r
            if rmin != 0:
                status[i] = NOT_MIN
                continue
            if _bit_length(rmax) != bits:
                status[i] = NOT_MIN_BITS
                continue
            if np.uint64(cmin) + rmax > np.uint64(UINT32_MAX):
                status[i] = COUNT_OVERFLOW
                continue
        status[i] = OK
