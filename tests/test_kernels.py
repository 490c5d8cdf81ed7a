"""The blob kernels against slow, obvious Python references (one bit at a time)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rumimm import kernels as K


# -- slow references, straight from the spec's Packing and Decoding sections -------------
def ref_pack(residuals, bits: int) -> bytes:
    out = bytearray(-(-len(residuals) * bits // 8))
    for i, r in enumerate(residuals):
        for j in range(bits):
            if (int(r) >> j) & 1:
                pos = i * bits + j
                out[pos // 8] |= 1 << (pos % 8)
    return bytes(out)


def ref_residual(packed: bytes, i: int, bits: int) -> int:
    lo = i * bits
    return sum(((packed[(lo + j) // 8] >> ((lo + j) % 8)) & 1) << j for j in range(bits))


def ref_counts(packed: bytes, n: int, bits: int, count_min: int) -> list[int]:
    return [count_min + ref_residual(packed, i, bits) for i in range(n)]


def ref_offsets(counts, base: int) -> list[int]:
    out = [base]
    for c in counts:
        out.append(out[-1] + c)
    return out


@st.composite
def residual_sets(draw, max_n=120):
    bits = draw(st.integers(0, 32))
    n = draw(st.integers(1, max_n))
    hi = (1 << bits) - 1
    residuals = draw(st.lists(st.integers(0, hi), min_size=n, max_size=n))
    count_min = draw(st.integers(1, 2**32 - 1))  # kernels work in uint64; blob.py bounds counts
    return bits, residuals, count_min


def _packed_array(packed: bytes) -> np.ndarray:
    # kernels read a view of at least one byte; trailing 0xFF catches reads past the region
    parent = np.frombuffer(packed + b"\xff" * 8, dtype=np.uint8)
    return parent[: max(1, len(packed))] if packed else np.zeros(1, dtype=np.uint8)


@settings(max_examples=75, deadline=None)
@given(residual_sets())
def test_pack_residuals_matches_the_bit_by_bit_reference(case):
    bits, residuals, count_min = case
    counts = np.array([count_min + r for r in residuals], dtype=np.uint64)
    out = np.zeros(-(-len(residuals) * bits // 8), dtype=np.uint8)
    K.pack_residuals(counts, count_min, bits, out)
    assert out.tobytes() == ref_pack(residuals, bits)


@settings(max_examples=75, deadline=None)
@given(residual_sets())
def test_unpack_counts_matches_the_bit_by_bit_reference(case):
    bits, residuals, count_min = case
    packed = ref_pack(residuals, bits)
    n = len(residuals)
    out = np.zeros(n, dtype=np.uint64)
    K.unpack_counts(_packed_array(packed), n, bits, count_min, out)
    assert out.tolist() == ref_counts(packed, n, bits, count_min) == [count_min + r for r in residuals]


@settings(max_examples=75, deadline=None)
@given(residual_sets(), st.integers(252, 2**40))
def test_prefix_offsets_matches_a_running_sum(case, base):
    bits, residuals, count_min = case
    packed = ref_pack(residuals, bits)
    n = len(residuals)
    out = np.zeros(n + 1, dtype=np.uint64)
    K.prefix_offsets(_packed_array(packed), n, bits, count_min, base, out)
    assert out.tolist() == ref_offsets([count_min + r for r in residuals], base)


@settings(max_examples=50, deadline=None)
@given(residual_sets(max_n=60))
def test_residual_sum_gives_every_offset_without_walking_counts(case):
    bits, residuals, count_min = case
    packed = _packed_array(ref_pack(residuals, bits))
    for k in range(len(residuals) + 1):
        assert int(K.residual_sum(packed, k, bits)) == sum(residuals[:k])


@settings(max_examples=50, deadline=None)
@given(residual_sets(max_n=60))
def test_residual_at_decodes_each_count_independently(case):
    bits, residuals, _ = case
    raw = ref_pack(residuals, bits)
    packed = _packed_array(raw)
    for i in reversed(range(len(residuals))):
        assert int(K.residual_at(packed, i, bits)) == residuals[i] == (ref_residual(raw, i, bits) if bits else 0)


@pytest.mark.parametrize("bits", [1, 3, 7, 8, 9, 13, 31, 32])
def test_the_widest_residuals_survive_every_bit_alignment(bits):
    hi = (1 << bits) - 1
    residuals = [hi, 0, hi, 1, hi - 1, hi] * 5  # 30 residuals: every start bit 0..7 occurs
    counts = np.array([7 + r for r in residuals], dtype=np.uint64)
    out = np.zeros(-(-len(residuals) * bits // 8), dtype=np.uint8)
    K.pack_residuals(counts, 7, bits, out)
    assert out.tobytes() == ref_pack(residuals, bits)
    back = np.zeros(len(residuals), dtype=np.uint64)
    K.unpack_counts(_packed_array(out.tobytes()), len(residuals), bits, 7, back)
    assert back.tolist() == counts.tolist()


def test_zero_bits_means_every_count_is_count_min_and_no_bytes_are_read():
    packed = np.zeros(1, dtype=np.uint8)
    out = np.zeros(5, dtype=np.uint64)
    K.unpack_counts(packed, 5, 0, 99, out)
    assert out.tolist() == [99] * 5
    offs = np.zeros(6, dtype=np.uint64)
    K.prefix_offsets(packed, 5, 0, 99, 412, offs)
    assert offs.tolist() == [412 + 99 * k for k in range(6)]
    assert int(K.residual_sum(packed, 5, 0)) == 0
    assert int(K.residual_at(packed, 4, 0)) == 0


def test_the_kernel_constants_match_the_spec():
    assert K.MAGIC == 0x45564F4C
    assert K.MAGIC.to_bytes(4, "little") == bytes([0x4C, 0x4F, 0x56, 0x45])
    assert K.VERSION == 1
    assert K.HEADER_SIZE == 28
    assert K.UINT32_MAX == 2**32 - 1
    codes = [K.OK, K.TOO_SHORT, K.BAD_MAGIC, K.BAD_VERSION, K.ZERO_TILE, K.ZERO_BANDS, K.BAD_PAIR, K.BAD_UNIT,
             K.BAD_COUNT_BITS, K.BAD_SIZE, K.PADDING_BITS, K.ZERO_COUNT, K.EMPTY_IMAGE, K.COUNT_OVERFLOW, K.NOT_MIN,
             K.NOT_MIN_BITS, K.SINGLE_FRAME_BITS, K.TOO_MANY_FRAMES]
    assert len(set(codes)) == len(codes) and K.OK == 0
