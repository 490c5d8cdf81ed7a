"""Hostile input in spec 0.2 files and blobs: seeded random damage only ever raises RumiError.

As ``test_hostile.py`` does for 0.1.0: files rumi-eo 0.26.1 wrote (``tests/data/v2``) get
random byte changes, truncations, insertions, bit flips in the header, IFD and trailer,
and extreme values in the 13 IFD entries and the trailer's fields; random 32-byte blobs are
parsed.  ``index``, ``validate``, ``open`` (with and without the header) and reads must
succeed (the right pixels when the header pins the layout) or raise a RumiError: no other
exception, no hang, and no allocation beyond a few MiB whatever the damaged counts claim.
"""

from __future__ import annotations

import struct
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import rumimm
from rumimm.errors import RumiError
from rumimm.format.trailer import parse_trailer
from rumimm.format.v2 import Header2, parse_header

DATA = Path(__file__).parent / "data" / "v2"
sys.path.insert(0, str(DATA))
import make_fixtures_v2 as make_fixtures  # noqa: E402  (not tests/data/make_fixtures.py, the 0.1 fixtures)

NAMES = ["cube_u0", "cube_u4", "cube_u7", "img_u2", "img_b6", "cube_seconds", "one_frame", "dtype_complex128"]
_EXTREMES = [0, 1, 2, 3, 9, 10, 255, 256, 65535, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1]


def _damage(data: bytearray, rng, base: int, tail: int) -> bytearray:
    kind = int(rng.integers(0, 7))
    if kind == 0:
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
    elif kind == 1:
        data = data[: int(rng.integers(0, len(data)))]
    elif kind == 2:
        at = int(rng.integers(0, len(data)))
        data[at:at] = rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
    elif kind == 3:
        data[int(rng.integers(0, base))] ^= 1 << int(rng.integers(0, 8))
    elif kind == 4:  # an extreme value in one of the 13 entries' type, count or value
        at, fmt = [(2, "<H"), (4, "<Q"), (12, "<H"), (12, "<I"), (12, "<Q")][int(rng.integers(0, 5))]
        at += 24 + 20 * int(rng.integers(0, 13))
        v = int(rng.choice(_EXTREMES)) & {"<H": 0xFFFF, "<I": 0xFFFFFFFF, "<Q": 2**64 - 1}[fmt]
        struct.pack_into(fmt, data, at, v)
    elif kind == 5:  # inside the trailer: lengths, kind, bits, epoch, step, scale, residuals
        at = int(rng.integers(tail, len(data)))
        data[at] = int(rng.choice([0, 1, 2, 64, 65, 255]))
    else:
        at = int(rng.integers(base, tail))
        data[at] ^= int(rng.integers(1, 256))
    return data


@pytest.mark.slow
def test_damaged_02_files_raise_rumi_error_from_every_entry_point(tmp_path):
    rng = np.random.default_rng(20261201)
    path = tmp_path / "damaged.rumi"
    bases = []
    for name in NAMES:
        blob = (DATA / f"{name}.header").read_bytes()
        hdr = Header2.parse(blob)
        bases.append((DATA / f"{name}.rumi", blob, make_fixtures.source(name).reshape(hdr.shape), hdr))
    from rumimm.reader import engine

    engine.load()  # numba and the kernels (a damaged file may take a path that needs them): not measured
    for src, blob, array, _ in bases:  # every entry point's imports, outside the measurement too
        for _, call in _calls(src, blob, array):
            call()
    outcomes = {"ok": 0, "rejected": 0}
    tracemalloc.start()
    try:
        for i in range(200):
            src, blob, array, hdr = bases[i % len(bases)]
            path.write_bytes(bytes(_damage(bytearray(src.read_bytes()), rng, hdr.base_frame_offset,
                                           hdr.frames_end)))
            for name, call in _calls(path, blob, array):
                try:
                    call()
                    outcomes["ok"] += 1
                except RumiError:
                    outcomes["rejected"] += 1
                except Exception as exc:
                    pytest.fail(f"damage {i}: {name} raised {type(exc).__name__}: {exc}")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcomes["ok"] > 40 and outcomes["rejected"] > 300, outcomes
    assert peak < 16 << 20, peak


def _calls(path, blob, array):
    def read(img, pinned):
        got = img[...]
        _ = img.crs, img.descriptions, img.time
        if pinned:
            assert np.array_equal(got.view(np.uint8), array.view(np.uint8))

    def open_plain():
        with rumimm.open(path, cache_bytes=0) as img:
            read(img, False)

    def open_blob():
        with rumimm.open(path, blob, cache_bytes=0) as img:
            read(img, True)

    yield "index", lambda: rumimm.build_blob(path)
    yield "validate", lambda: rumimm.validate(path, header=blob, decode=True)
    yield "open", open_plain
    yield "open(header=)", open_blob


@pytest.mark.slow
def test_random_02_blobs_parse_or_raise_blob_error_without_large_allocations():
    rng = np.random.default_rng(7)
    tracemalloc.start()
    parsed = 0
    try:
        for _ in range(3000):
            head = struct.pack("<IHIIIHHHBBBIB", 0x45564F4C, 1, *(int(rng.choice(_EXTREMES[:11]) % 2**32) or 1
                                                               for _ in range(3)),
                               *(int(v) for v in rng.choice([0, 1, 8, 255, 65535], 3)),
                               int(rng.choice([8, 16, 32, 1, 4])), int(rng.choice([1, 2, 3, 6, 107])),
                               int(rng.integers(0, 11)), int(rng.choice([0, 1, 100, 2**32 - 1])),
                               int(rng.choice([0, 1, 7, 32, 33])))
            blob = head + rng.integers(0, 256, int(rng.integers(0, 40)), dtype=np.uint8).tobytes()
            try:
                hdr = parse_header(blob, spec="0.2")
                parsed += 1
                _ = hdr.frame_offsets, hdr.frames_end
            except RumiError:
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed > 0
    assert peak < 16 << 20, peak


def test_random_trailers_parse_or_raise_format_error_in_bounded_work():
    rng = np.random.default_rng(11)
    for _ in range(3000):
        tail = b"TAIL\x01\x00" + rng.integers(0, 256, int(rng.integers(0, 60)), dtype=np.uint8).tobytes()
        try:
            tr = parse_trailer(tail, int(rng.integers(0, 4)), int(rng.choice([1, 2, 3, 2**32 - 1])))
            assert tr.residuals is None or len(tr.residuals) == tr.count <= 8 * len(tail)
        except RumiError:
            pass
