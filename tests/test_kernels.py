"""Bit-packed residuals and the blob checks against slow, obvious Python references (one bit at a time)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rumimm
from rumimm import kernels as K
from rumimm.format import blob as B
from rumimm.format.dtypes import encoding
from rumimm.format.grid import FrameUnit, Grid
from rumimm.reader.blob_column import parse_blobs


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


@pytest.mark.slow
@settings(max_examples=75, deadline=None)
@given(residual_sets())
def test_pack_residuals_matches_the_bit_by_bit_reference(case):
    bits, residuals, count_min = case
    counts = np.array([count_min + r for r in residuals], dtype=np.uint64)
    assert B.pack_residuals(counts, count_min, bits).tobytes() == ref_pack(residuals, bits)


@pytest.mark.slow
@settings(max_examples=75, deadline=None)
@given(residual_sets(), st.integers(0, 7))
def test_residuals_match_the_bit_by_bit_reference_from_any_start(case, start):
    bits, residuals, _ = case
    raw = ref_pack(residuals, bits)
    packed = _packed_array(raw)[:len(raw)] if raw else np.zeros(0, np.uint8)
    n = len(residuals)
    start = min(start, n)
    got = B.residuals(packed, start, n, bits)
    assert got.dtype == np.uint64
    assert got.tolist() == [ref_residual(raw, i, bits) if bits else 0 for i in range(start, n)] == residuals[start:]


@settings(max_examples=50, deadline=None)
@given(residual_sets(max_n=60), st.integers(252, 2**40))
def test_a_headers_counts_offsets_and_sums_agree_with_a_running_sum(case, base):
    bits, residuals, _count_min = case
    packed = _packed_array(ref_pack(residuals, bits))
    for k in range(len(residuals) + 1):
        assert B.residual_sum(packed, k, bits) == sum(residuals[:k])


@pytest.mark.parametrize("bits", [1, 3, 7, 8, 9, 13, 31, 32])
def test_the_widest_residuals_survive_every_bit_alignment(bits):
    hi = (1 << bits) - 1
    residuals = [hi, 0, hi, 1, hi - 1, hi] * 5  # 30 residuals: every start bit 0..7 occurs
    counts = np.array([7 + r for r in residuals], dtype=np.uint64)
    out = B.pack_residuals(counts, 7, bits)
    assert out.tobytes() == ref_pack(residuals, bits)
    assert B.residuals(out, 0, len(residuals), bits).tolist() == residuals


def test_zero_bits_means_every_residual_is_zero_and_no_bytes_are_read():
    packed = np.zeros(0, dtype=np.uint8)
    assert B.residuals(packed, 0, 5, 0).tolist() == [0] * 5
    assert B.residual_sum(packed, 5, 0) == 0
    assert B.pack_residuals(np.full(5, 99, np.uint64), 99, 0).size == 0


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=60), st.integers(0, 27), st.binary(min_size=1, max_size=4))
def test_the_single_blob_check_and_the_batch_kernel_agree_on_every_blob(tail, at, patch):
    """blob.check_one (numpy, used by open) and kernels.check_blobs (numba, parse_blobs) apply one rule set."""
    good = bytearray(B.build_header(Grid(30, 20, 8, 8, 2, FrameUnit.TILE), encoding(1, 16), np.arange(100, 124)))
    cases = [bytes(good), bytes(good[:at]) + patch + bytes(good[at + len(patch):]), bytes(good[:28]) + tail, tail]
    status = parse_blobs(cases, errors="status")["status"].tolist()
    assert status == [B.check_one(c)[0] for c in cases]
    assert status[0] == B.OK


def test_the_kernel_constants_match_the_spec():
    assert K.MAGIC == B.MAGIC == 0x45564F4C
    assert K.MAGIC.to_bytes(4, "little") == bytes([0x4C, 0x4F, 0x56, 0x45])
    assert K.VERSION == 1
    assert K.HEADER_SIZE == 28
    assert K.UINT32_MAX == 2**32 - 1
    codes = [K.OK, K.TOO_SHORT, K.BAD_MAGIC, K.BAD_VERSION, K.ZERO_TILE, K.ZERO_BANDS, K.BAD_PAIR, K.BAD_UNIT,
             K.BAD_COUNT_BITS, K.BAD_SIZE, K.PADDING_BITS, K.ZERO_COUNT, K.EMPTY_IMAGE, K.COUNT_OVERFLOW, K.NOT_MIN,
             K.NOT_MIN_BITS, K.SINGLE_FRAME_BITS, K.TOO_MANY_FRAMES]
    assert len(set(codes)) == len(codes) and K.OK == 0


STALE_SETUP = """
import glob, os, pickle, sys
sys.path.insert(0, sys.argv[1])
import gone_module  # a module that exists now and not at the next read, like a record type that moved
for path in glob.glob(os.path.join(os.environ["NUMBA_CACHE_DIR"], "**", "*.nbi"), recursive=True):
    with open(path, "rb") as fh:
        version = pickle.load(fh)
    with open(path, "wb") as fh:
        pickle.dump(version, fh)
        fh.write(pickle.dumps((0, {gone_module.Record(): 1})))
print(len(glob.glob(os.path.join(os.environ["NUMBA_CACHE_DIR"], "**", "*.nbi"), recursive=True)))
"""

STALE_READ = """
import sys, numpy as np, rumimm
from rumimm.reader import engine
engine.load()  # the kernels now (a read alone would start them loading on a thread and read without them)
with rumimm.open(sys.argv[1], header=open(sys.argv[2], "rb").read()) as img:
    out = img[:, :, :]
print(int(out.astype(np.int64).sum()))
"""


@pytest.mark.slow
def test_issue_18_a_cache_index_naming_a_module_that_moved_is_dropped_and_the_read_recompiles(tmp_path):
    """numba unpickles an index before checking its stamp: an upgrade that moves a record type must not fail reads."""
    import subprocess

    data = np.arange(3 * 100 * 100, dtype=np.uint16).reshape(3, 100, 100)
    blob = rumimm.write(tmp_path / "a.rumi", data, tile=32)  # 48 frames: the kernels read it
    (tmp_path / "a.blob").write_bytes(blob)
    (tmp_path / "gone_module.py").write_text("class Record:\n    pass\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    args = [str(tmp_path / "a.rumi"), str(tmp_path / "a.blob")]
    first = subprocess.run([sys.executable, "-c", STALE_READ, *args], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    staled = subprocess.run([sys.executable, "-c", STALE_SETUP, str(tmp_path)], env=env, capture_output=True, text=True)
    assert staled.returncode == 0, staled.stderr
    assert int(staled.stdout) >= 3  # the plan, copy and native kernels' indexes now name gone_module
    (tmp_path / "gone_module.py").unlink()
    again = subprocess.run([sys.executable, "-c", STALE_READ, *args], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert int(again.stdout) == int(data.astype(np.int64).sum()) == int(first.stdout)
