"""Hostile input: seeded random damage to files and blobs only ever raises RumiError.

Every entry point a reader meets untrusted bytes through (``index``, ``validate``,
``Header.parse``, ``parse_blobs``, ``open`` with and without ``header=``, window reads,
the georeferencing properties) is fed random byte changes, bit flips, truncations,
insertions, extreme IFD values and random blobs.  Each call must succeed (and then
return the right pixels where the blob pins the layout) or raise a RumiError: no other
exception type, no crash, no hang, no allocation beyond a few MiB.  Deterministic
(fixed seeds) and bounded (a few seconds in all).
"""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from conftest import craft

import rumimm
from rumimm import kernels as K
from rumimm.errors import RumiError
from rumimm.format.blob import MAGIC, Header
from rumimm.format.dtypes import ENCODINGS
from rumimm.reader.blob_column import parse_blobs
from rumimm.synthetic import eo_scene

_EXTREMES = [0, 1, 2, 3, 255, 256, 65535, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1]


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """(path, blob, array) of small files: tile and cell frames, inline and external values, georef."""
    d = tmp_path_factory.mktemp("hostile")
    out = []
    a = eo_scene(3, 21, 18, dtype="uint16", seed=4)
    out.append((d / "tile.rumi", rumimm.write(d / "tile.rumi", a, tile=8, unit="tile", threads=1), a))
    b = eo_scene(5, 9, 17, dtype="float32", seed=5)
    out.append((d / "cell.rumi", rumimm.write(d / "cell.rumi", b, tile=(8, 16), unit="cell", threads=1,
                                              crs=32633, transform=(10.0, 0.0, 5e5, 0.0, -10.0, 4.2e6)), b))
    c = np.arange(16, dtype=np.uint8).reshape(1, 2, 8) * 7
    crafted = craft((1, 2, 8), (2, 4), "tile", "uint8", array=c)  # N = 2: TileByteCounts inline
    out.append((Path(crafted.write(d / "two.rumi")), crafted.blob, c))
    return out


def _damage(data: bytearray, rng, base: int) -> bytearray:
    kind = int(rng.integers(0, 6))
    if kind == 0:  # random bytes anywhere
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
    elif kind == 1:  # truncation
        data = data[: int(rng.integers(0, len(data)))]
    elif kind == 2:  # insertion
        at = int(rng.integers(0, len(data)))
        data[at:at] = rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
    elif kind == 3:  # a bit flip before the frames
        data[int(rng.integers(0, base))] ^= 1 << int(rng.integers(0, 8))
    elif kind == 4:  # an extreme value in an IFD entry's type, count or value field
        at, fmt = [(2, "<H"), (4, "<Q"), (12, "<H"), (12, "<I"), (12, "<Q")][int(rng.integers(0, 5))]
        at += 24 + 20 * int(rng.integers(0, 11))
        v = int(rng.choice(_EXTREMES)) & {"<H": 0xFFFF, "<I": 0xFFFFFFFF, "<Q": 2**64 - 1}[fmt]
        struct.pack_into(fmt, data, at, v)
    else:  # bytes inside the frames
        at = int(rng.integers(base, len(data)))
        data[at] ^= int(rng.integers(1, 256))
    return data


def _calls(path, blob, array):
    """Every reader entry point on ``path``: yields (name, zero-argument call)."""

    def read(img, pinned):
        got = [img[:], img[:, img.height // 2:, img.width // 3:], img[-1, ::3, ::-2]]
        _ = img.crs, img.transform, img.bounds  # the georeferencing block, parsed on demand
        if pinned:  # the blob fixes layout and dtype, and OpenZL checksums are on: right pixels or an error
            assert np.array_equal(got[0].view(np.uint8), array.view(np.uint8))

    def open_plain():
        with rumimm.open(path, cache_bytes=0) as img:
            read(img, False)

    def open_blob():
        with rumimm.open(path, blob, cache_bytes=0) as img:
            read(img, True)

    yield "index", lambda: rumimm.build_blob(path)
    yield "validate", lambda: rumimm.validate(path, header=blob)
    yield "open", open_plain
    yield "open(header=)", open_blob


@pytest.mark.slow
def test_damaged_files_raise_rumi_error_from_every_entry_point(tmp_path, bases):
    rng = np.random.default_rng(20260815)
    path = tmp_path / "damaged.rumi"
    outcomes = {"ok": 0, "rejected": 0}
    rumimm.validate(bases[0][0], decode=True)  # compile and import outside the measurement
    tracemalloc.start()
    try:
        for i in range(240):
            src, blob, array = bases[i % len(bases)]
            data = _damage(bytearray(src.read_bytes()), rng, Header.parse(blob).base_frame_offset)
            path.write_bytes(bytes(data))
            for name, call in _calls(path, blob, array):
                try:
                    call()
                    outcomes["ok"] += 1
                except RumiError:
                    outcomes["rejected"] += 1
                except Exception as exc:
                    pytest.fail(f"damage {i}: {name} raised {type(exc).__name__}: {exc}")
            if i % 8 == 0:
                try:
                    rumimm.validate(path, decode=True)
                except RumiError:
                    pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert outcomes["ok"] > 50 and outcomes["rejected"] > 300, outcomes  # both outcomes are exercised
    assert peak < 16 << 20, peak


def _random_blob(rng) -> bytes:
    pairs = sorted(ENCODINGS)
    sf, bps = pairs[int(rng.integers(0, len(pairs)))] if rng.random() < 0.8 else rng.integers(0, 256, 2)
    width = int(rng.choice([1, 2, 7, 300, 2**16, 2**32 - 1])) if rng.random() < 0.7 else int(rng.integers(0, 2**32))
    length = int(rng.choice([1, 3, 8, 2**20, 2**32 - 1])) if rng.random() < 0.7 else int(rng.integers(0, 2**32))
    tw, tl = (int(v) for v in rng.choice([0, 1, 8, 16, 255, 65535], 2))
    bands = int(rng.choice([0, 1, 3, 5, 65535]))
    unit = int(rng.choice([0, 1, 1, 2, 255]))
    cmin = int(rng.choice([0, 1, 100, 2**32 - 1]))
    bits = int(rng.choice([0, 0, 1, 3, 8, 32, 33, 255]))
    head = struct.pack("<IHIIHHHBBBIB", MAGIC if rng.random() < 0.95 else int(rng.integers(0, 2**32)),
                       1 if rng.random() < 0.95 else int(rng.integers(0, 2**16)), width, length, tw, tl, bands,
                       int(bps), int(sf), unit, cmin, bits)
    return head + rng.integers(0, 256, int(rng.integers(0, 48)), dtype=np.uint8).tobytes()


@pytest.mark.slow
def test_random_blobs_are_parsed_or_rejected_with_blob_error_and_never_open_another_file(bases):
    rng = np.random.default_rng(7)
    path, good, array = bases[0]
    blobs = [_random_blob(rng) for _ in range(3000)]
    for i in range(200):  # and damaged copies of real blobs
        b = bytearray(bases[i % 3][1])
        for _ in range(int(rng.integers(1, 3))):
            b[int(rng.integers(0, len(b)))] ^= 1 << int(rng.integers(0, 8))
        blobs.append(bytes(b[: len(b) if rng.random() < 0.8 else int(rng.integers(0, len(b)))]))
    status = parse_blobs(blobs, errors="status")["status"]
    tracemalloc.start()
    try:
        parsed = 0
        for blob, st in zip(blobs, status, strict=True):
            try:
                h = Header.parse(blob)
            except RumiError:
                assert st != K.OK
                continue
            assert st == K.OK
            parsed += 1
            _ = h.to_dict(), h.file_size, h.byte_count(h.n_frames - 1), h.offset(h.n_frames // 2), repr(h)
            try:
                with rumimm.open(path, blob, cache_bytes=0) as img:
                    assert np.array_equal(img[:], array)  # only a blob equal to the file's own can open it
                    assert bytes(img.header) == good
            except RumiError:
                pass
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert parsed > 30, parsed
    assert peak < 16 << 20, peak


def test_files_of_garbage_or_cut_frames_with_a_blob_that_matches_them_raise_rumi_error(tmp_path):
    # the blob is right about the layout, the frames are not OpenZL (or are cut short): the
    # header path must refuse at open or at the read, never read past the file or the frame
    rng = np.random.default_rng(99)
    real = [craft((1, 8, 8), 8, "tile", "uint8", seed=s).frames[0] for s in range(3)]
    path = tmp_path / "g.rumi"
    outcomes = {"ok": 0, "rejected": 0}
    for i in range(150):
        shape, unit = [((1, 8, 8), "tile"), ((1, 8, 16), "tile"), ((2, 8, 8), "cell"), ((2, 8, 16), "tile")][i % 4]
        c = craft(shape, 8, unit, "uint8")
        for k in range(len(c.frames)):
            r = rng.random()
            if r < 0.3:
                c.frames[k] = rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
            elif r < 0.5:
                c.frames[k] = c.frames[k][: int(rng.integers(1, len(c.frames[k])))]
            elif r < 0.6:
                c.frames[k] = real[int(rng.integers(0, 3))]  # a valid frame of another size or place
        c.write(path)
        for header in (c.blob, None):
            try:
                with rumimm.open(path, header, cache_bytes=0) as img:
                    img[:]
                    img[-1, 3:5, 2:9]
                outcomes["ok"] += 1
            except RumiError:
                outcomes["rejected"] += 1
            except Exception as exc:
                pytest.fail(f"case {i} (header={'yes' if header else 'no'}): {type(exc).__name__}: {exc}")
    assert outcomes["ok"] > 5 and outcomes["rejected"] > 100, outcomes
