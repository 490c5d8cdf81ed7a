"""Bit-packed frame byte counts (the spec's Packing and Decoding sections), with numpy.

Residual i (``count[i] - count_min``) takes ``count_bits`` bits from bit
``i * count_bits`` of the packed bytes, least significant bit first.
"""

from __future__ import annotations

import numpy as np

RESIDUAL_CHUNK = 1 << 16  # residuals unpacked at a time when only a sum, min or max is needed


def residuals(packed: np.ndarray, start: int, stop: int, bits: int) -> np.ndarray:
    """Residuals ``start:stop`` (uint64, a new array): ``bits`` bits each, LSB first.

    Bits past the end of ``packed`` read as 0.  Each residual is one unaligned 8-byte
    little-endian load at its first byte, shifted and masked (shift + bits <= 39).
    """
    n = stop - start
    if bits == 0 or n <= 0:
        return np.zeros(max(n, 0), np.uint64)
    lo = np.arange(start, stop, dtype=np.int64) * bits
    first = (start * bits) >> 3
    last = ((stop - 1) * bits >> 3) + 8
    window = np.zeros(last - first, np.uint8)
    got = packed[first:min(last, packed.shape[0])]
    window[:got.shape[0]] = got
    words = np.ndarray((window.shape[0] - 7,), "<u8", window, 0, (1,))  # an 8-byte load at every byte
    v = words[(lo >> 3) - first]
    v >>= (lo & 7).astype(np.uint64)
    v &= np.uint64((1 << bits) - 1)
    return v.astype(np.uint64, copy=False)


def residual_chunks(packed: np.ndarray, n: int, bits: int):
    for start in range(0, n, RESIDUAL_CHUNK):
        yield residuals(packed, start, min(n, start + RESIDUAL_CHUNK), bits)


def residual_sum(packed: np.ndarray, k: int, bits: int) -> int:
    """sum(residual[0:k]), in chunks: no allocation proportional to k."""
    if bits == 0:
        return 0
    return sum(int(r.sum(dtype=np.uint64)) for r in residual_chunks(packed, k, bits))


def pack_residuals(counts: np.ndarray, count_min: int, bits: int) -> np.ndarray:
    """``counts - count_min`` at ``bits`` bits each, LSB first, padded with zero bits to a byte."""
    n = counts.shape[0]
    if bits == 0:
        return np.zeros(0, np.uint8)
    r = (counts.astype(np.uint64) - np.uint64(count_min))[:, None]
    planes = ((r >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    out = np.packbits(planes.reshape(-1), bitorder="little")
    assert out.shape[0] == -(-n * bits // 8)
    return out


def pack_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """uint64 ``values`` at ``bits`` bits each (0 to 64), LSB first, zero-padded to a whole byte."""
    n = values.shape[0]
    if bits == 0 or n == 0:
        return np.zeros(0, np.uint8)
    v = np.ascontiguousarray(values, dtype=np.uint64)[:, None]
    planes = ((v >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
    return np.packbits(planes.reshape(-1), bitorder="little")


def unpack_bits(packed: np.ndarray, n: int, bits: int) -> np.ndarray:
    """``n`` values of ``bits`` bits (0 to 64) from ``packed`` (uint8), LSB first, as uint64.

    ``packed`` must hold at least ``ceil(n * bits / 8)`` bytes (the caller checks sizes).
    """
    if bits == 0 or n == 0:
        return np.zeros(n, np.uint64)
    flat = np.unpackbits(np.asarray(packed, np.uint8)[:-(-n * bits // 8)], bitorder="little")[:n * bits]
    planes = flat.reshape(n, bits).astype(np.uint64)
    out = np.zeros(n, np.uint64)
    for j in range(bits):
        out |= planes[:, j] << np.uint64(j)
    return out
