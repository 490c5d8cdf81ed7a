"""The header blob: canonical encoding, every reader MUST, batches and absurd sizes."""

from __future__ import annotations

import json
import struct
import tracemalloc

import numpy as np
import pytest
import spec_reader
from conftest import grid_and_encoding
from hypothesis import given, settings
from hypothesis import strategies as st

from rumimm import kernels as K
from rumimm.errors import BlobError, FormatError, RumiError
from rumimm.format.blob import BLOB_FIELDS, HEADER_SIZE, MAGIC, VERSION, Header, build_header, pack_residuals
from rumimm.format.dtypes import ENCODINGS, encoding
from rumimm.format.grid import FrameUnit, Grid
from rumimm.reader.blob_column import parse_blobs

HEAD = struct.Struct("<IHIIHHHBBBIB")


def raw_blob(*, magic=MAGIC, version=VERSION, width=30, length=20, tw=8, tl=8, bands=3, bps=16, sf=1, unit=0,
             count_min=100, count_bits=0, packed=b"") -> bytes:
    """A blob with exactly the given fields, checked by nobody."""
    return HEAD.pack(magic, version, width, length, tw, tl, bands, bps, sf, unit, count_min, count_bits) + packed


def pack(residuals, bits) -> bytes:
    counts = np.asarray(residuals, dtype=np.uint64) + np.uint64(1)
    return pack_residuals(counts, 1, bits).tobytes()


# -- canonical encoding and round trips ------------------------------------------------
@st.composite
def blob_cases(draw):
    g, enc = draw(grid_and_encoding(max_size=400, max_tile=80, max_bands=20, max_frames=4000))
    n = g.n_frames
    kind = draw(st.sampled_from(["equal", "narrow", "wide", "full"]))
    seed = draw(st.integers(0, 2**32 - 1))
    r = np.random.default_rng(seed)
    cmin = int(r.integers(1, 2**31))
    if kind == "equal":
        counts = np.full(n, cmin, dtype=np.uint64)
    elif kind == "narrow":
        counts = r.integers(cmin, cmin + 200, n).astype(np.uint64)
    elif kind == "wide":
        counts = r.integers(1, 2**31, n).astype(np.uint64)
    else:
        counts = r.integers(1, 2**32, n, dtype=np.uint64)
    return g, enc, counts


@pytest.mark.slow
@settings(max_examples=120, deadline=None)
@given(blob_cases())
def test_build_then_parse_round_trips_every_field_count_and_offset(case):
    g, enc, counts = case
    blob = build_header(g, enc, counts)
    h = Header.parse(blob)
    cmin = int(counts.min())
    bits = 0 if counts.max() == cmin else (int(counts.max()) - cmin).bit_length()
    assert len(blob) == 28 + -(-g.n_frames * bits // 8)
    assert (h.count_min, h.count_bits) == (cmin, bits)
    assert h.grid == g
    assert h.encoding is enc and h.dtype == enc.dtype
    assert h.shape == g.shape and h.n_frames == g.n_frames
    assert h.frame_unit is g.unit
    assert h.frame_byte_counts.dtype == np.uint64 and h.frame_byte_counts.tolist() == counts.tolist()
    offsets = h.frame_offsets
    assert offsets.dtype == np.uint64 and offsets.shape == (g.n_frames + 1,)
    assert offsets[0] == g.base_frame_offset == h.base_frame_offset
    assert np.array_equal(np.diff(offsets), counts)
    ks = range(g.n_frames + 1) if g.n_frames <= 300 else np.random.default_rng(0).integers(0, g.n_frames + 1, 300)
    for k in ks:
        assert h.offset(int(k)) == int(offsets[k])
    for k in list(ks)[:50]:
        if k < g.n_frames:
            assert h.byte_count(int(k)) == int(counts[k])
    assert h.file_size == int(offsets[-1]) == g.base_frame_offset + int(counts.sum())
    # the independent struct reader agrees, and so does its own canonical encoder
    ref = spec_reader.parse_blob(blob)
    assert ref["counts"] == counts.tolist()
    fields = {name: getattr(h, name) for name in ("image_width", "image_length", "tile_width", "tile_length",
                                                  "samples_per_pixel", "bits_per_sample", "sample_format")}
    assert spec_reader.build_blob({**fields, "frame_unit": int(g.unit)}, counts.tolist()) == blob


def test_offset_of_k_equals_offsets_k_for_every_frame_of_a_ragged_image(rng):
    g = Grid(1000, 700, 64, 48, 5, FrameUnit.TILE)
    counts = rng.integers(1000, 90000, g.n_frames)
    h = Header.parse(build_header(g, encoding(1, 16), counts))
    offsets = h.frame_offsets
    assert [h.offset(k) for k in range(g.n_frames + 1)] == offsets.tolist()
    assert offsets[-1] == h.file_size


def test_equal_counts_take_zero_bits_and_no_packed_bytes():
    g = Grid(30, 20, 8, 8, 3)
    blob = build_header(g, encoding(1, 16), [77] * g.n_frames)
    assert len(blob) == 28
    h = Header.parse(blob)
    assert h.count_bits == 0 and h.count_min == 77
    assert h.frame_byte_counts.tolist() == [77] * 36
    assert h.offset(36) == g.base_frame_offset + 36 * 77


def test_a_single_frame_always_has_count_bits_zero():
    h = Header.parse(build_header(Grid(5, 5, 8, 8, 1), encoding(3, 32), [12345]))
    assert (h.n_frames, h.count_bits, len(h)) == (1, 0, 28)


def test_the_blob_bytes_are_exactly_the_spec_layout():
    g = Grid(30, 20, 8, 8, 3, FrameUnit.CELL)  # 12 frames
    counts = [10, 13, 10, 11, 12, 17, 10, 10, 14, 10, 16, 10]  # residuals 0..7: 3 bits
    blob = build_header(g, encoding(2, 16), counts)
    assert blob[:4] == bytes([0x4C, 0x4F, 0x56, 0x45])
    assert HEAD.unpack_from(blob) == (MAGIC, 1, 30, 20, 8, 8, 3, 16, 2, 1, 10, 3)
    assert len(blob) == 28 + 36 // 8 + 1  # ceil(12 * 3 / 8) = 5
    bits = "".join(format(r - 10, "03b")[::-1] for r in counts)  # LSB first, residual after residual
    bits += "0" * (40 - len(bits))  # unused bits in the final byte are zero
    assert blob[28:] == bytes(int(bits[i:i + 8][::-1], 2) for i in range(0, 40, 8))


def test_header_parse_of_a_header_returns_it_and_headers_compare_by_bytes():
    blob = build_header(Grid(30, 20, 8, 8, 3), encoding(1, 8), np.arange(1, 37))
    h = Header.parse(blob)
    assert Header.parse(h) is h
    assert h == blob and h == bytearray(blob) and h == Header.parse(bytearray(blob))
    assert hash(h) == hash(Header.parse(blob))
    assert bytes(h) == h.to_bytes() == blob and len(h) == len(blob)
    assert "uint8" in repr(h) and "frames=36" in repr(h)
    assert h.frame_byte_counts.flags.writeable is False and h.frame_offsets.flags.writeable is False
    assert Header.parse(np.frombuffer(blob, dtype=np.uint8)) == h


def test_to_dict_is_json_safe_and_describes_the_layout():
    g = Grid(30, 20, 8, 8, 3, FrameUnit.CELL)
    h = Header.parse(build_header(g, encoding(3, 32), [5, 6, 7, 8] * 3))
    d = json.loads(json.dumps(h.to_dict()))
    assert d["shape"] == [3, 20, 30] and d["dtype"] == "float32" and d["tile"] == [8, 8]
    assert d["frame_unit"] == "cell" and d["frames"] == 12
    assert d["tiles_across"] == 4 and d["tiles_down"] == 3
    assert d["base_frame_offset"] == g.base_frame_offset
    assert d["file_size"] == g.base_frame_offset + 78 and d["blob_size"] == len(h)
    assert (d["count_min"], d["count_bits"]) == (5, 2)


def test_frame_numbers_outside_the_image_raise_index_error():
    h = Header.parse(build_header(Grid(30, 20, 8, 8, 3), encoding(1, 8), np.arange(1, 37)))
    for bad in (-1, 37):
        with pytest.raises(IndexError):
            h.offset(bad)
    with pytest.raises(IndexError):
        h.byte_count(36)
    with pytest.raises(IndexError):
        h.byte_count(-1)
    assert h.offset(36) == h.file_size


@pytest.mark.parametrize(
    ("grid", "counts", "match"),
    [
        (Grid(30, 20, 8, 8, 3), [5] * 35, "expected 36 frame byte counts"),
        (Grid(30, 20, 8, 8, 3), [0] + [5] * 35, "must be > 0"),
        (Grid(30, 20, 8, 8, 3), [2**32] + [5] * 35, "exceeds 2\\*\\*32 - 1"),
        (Grid(2**32, 1, 2**16, 1, 1), [5] * 65536, "image_width must be in"),
        (Grid(8, 8, 8, 2**16, 1), [5], "tile_length must be in"),
        (Grid(8, 8, 8, 8, 2**16, FrameUnit.CELL), [5], "samples_per_pixel must be in"),
    ],
)
def test_build_header_refuses_what_a_blob_cannot_hold(grid, counts, match):
    with pytest.raises(ValueError, match=match):
        build_header(grid, encoding(1, 8), counts)


# -- every reader MUST: a bad blob raises BlobError ---------------------------------------
GOOD = dict(width=30, length=20, tw=8, tl=8, bands=3, bps=16, sf=1, unit=0)  # 36 tile frames


def good_raw(**over) -> bytes:
    residuals = [0, 5, 3, 7] * 9  # 36 residuals at 3 bits: 108 bits, 14 bytes, 4 unused bits
    return raw_blob(**{**GOOD, "count_min": 100, "count_bits": 3, "packed": pack(residuals, 3), **over})


def test_the_hand_made_good_blob_is_valid():
    h = Header.parse(good_raw())
    assert h.n_frames == 36 and h.frame_byte_counts.tolist() == [100, 105, 103, 107] * 9
    assert spec_reader.check_blob(good_raw()) == []


BAD_BLOBS = {
    "magic": (good_raw(magic=0x4556_4F4D), "magic is not 4C 4F 56 45"),
    "magic byte-swapped": (good_raw(magic=0x4C4F5645), "magic"),
    "version 0": (good_raw(version=0), "version must be 1"),
    "version 2": (good_raw(version=2), "version must be 1"),
    "tile_width 0": (good_raw(tw=0), "tile_width and tile_length must be > 0"),
    "tile_length 0": (good_raw(tl=0), "tile_width and tile_length must be > 0"),
    "samples_per_pixel 0": (good_raw(bands=0), "samples_per_pixel must be >= 1"),
    "pair (1, 12)": (good_raw(bps=12), "not a valid rumi sample encoding"),
    "pair (4, 16)": (good_raw(sf=4), "not a valid rumi sample encoding"),
    "pair (3, 8)": (good_raw(sf=3, bps=8), "not a valid rumi sample encoding"),
    "frame_unit 2": (good_raw(unit=2), "frame_unit must be 0 \\(tile\\) or 1 \\(cell\\), got 2"),
    "frame_unit 255": (good_raw(unit=255), "frame_unit must be 0"),
    "count_bits 33": (raw_blob(**GOOD, count_bits=33, packed=b"\0" * (-(-36 * 33 // 8))), "between 0 and 32, got 33"),
    "count_bits 255": (good_raw(count_bits=255), "between 0 and 32"),
    "one byte short": (good_raw()[:-1], "blob is 41 bytes, expected 28 \\+ ceil\\(N \\* count_bits / 8\\) = 42"),
    "one byte long": (good_raw() + b"\0", "blob is 43 bytes, expected .* = 42"),
    "packed counts missing": (good_raw()[:28], "blob is 28 bytes"),
    "shorter than the header": (good_raw()[:27], "shorter than the 28-byte header"),
    "empty": (b"", "blob is 0 bytes"),
    "unused bits set": (good_raw()[:-1] + bytes([good_raw()[-1] | 0x80]), "unused bits .* must be zero"),
    "count_min 0": (good_raw(count_min=0), "count_min must be > 0"),
    "count_min not the minimum": (raw_blob(**GOOD, count_min=99, count_bits=3, packed=pack([1, 6, 4, 7] * 9, 3)),
                                  "count_min is not the smallest"),
    "count_bits wider than needed": (raw_blob(**GOOD, count_min=100, count_bits=4, packed=pack([0, 5, 3, 7] * 9, 4)),
                                     "count_bits = 4 is not the minimum width"),
    "count_bits 32 for tiny residuals": (raw_blob(**GOOD, count_min=100, count_bits=32,
                                                  packed=pack([0, 1] * 18, 32)), "not the minimum width"),
    "single frame with count_bits 1": (raw_blob(width=8, length=8, tw=8, tl=8, bands=1, count_bits=1,
                                                packed=b"\0"), "one frame must have count_bits 0, got 1"),
    "single frame with count_bits 32": (raw_blob(width=8, length=8, tw=8, tl=8, bands=1, count_bits=32,
                                                 packed=b"\0" * 4), "one frame must have count_bits 0, got 32"),
    "empty image": (good_raw(width=0), "at least one pixel"),
    "image_length 0": (good_raw(length=0), "image is 30 x 0; a rumi image has at least one pixel"),
    "tile_width and tile_length 0": (good_raw(tw=0, tl=0), "tile_width and tile_length must be > 0, got 0 x 0"),
    "count beyond uint32": (raw_blob(**GOOD, count_min=2**32 - 5, count_bits=3, packed=pack([0, 5, 3, 7] * 9, 3)),
                            "exceeds 2\\*\\*32 - 1"),
}


@pytest.mark.parametrize("name", list(BAD_BLOBS))
def test_a_blob_breaking_a_rule_is_rejected_with_blob_error(name):
    blob, match = BAD_BLOBS[name]
    with pytest.raises(BlobError, match=match) as info:
        Header.parse(blob)
    assert isinstance(info.value, FormatError) and isinstance(info.value, RumiError)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith("header blob: ")
    # the batch path finds the same rule
    status = parse_blobs([blob], errors="status")["status"]
    assert status[0] != K.OK
    with pytest.raises(BlobError, match=r"^blob 0 of 1: "):
        parse_blobs([blob])
    # and the independent struct reader agrees the blob is bad (where it checks that rule)
    if name != "count beyond uint32":
        assert spec_reader.check_blob(blob), name


def test_an_int_or_a_str_is_not_a_blob_and_allocates_nothing():
    # bytes(10**12) would try to allocate a terabyte of zeros
    for wrong in (10**12, 28, True, np.int64(40), "LOVE" + "\0" * 24):
        with pytest.raises(TypeError, match="header blob must be bytes"):
            Header.parse(wrong)


def test_a_rejected_blob_names_the_file_it_belongs_to():
    with pytest.raises(BlobError, match=r"^scene\.rumi: header blob: version must be 1"):
        Header.parse(good_raw(version=7), path="scene.rumi")


def test_every_pair_outside_the_28_is_rejected_and_every_listed_pair_accepted():
    pairs = np.array([(sf, bps) for sf in range(256) for bps in range(256)], dtype=np.int64)
    one = raw_blob(width=1, length=1, tw=1, tl=1, bands=1, bps=0, sf=0, count_min=9)
    data = np.tile(np.frombuffer(one, dtype=np.uint8), (len(pairs), 1))
    data[:, 20] = pairs[:, 1]
    data[:, 21] = pairs[:, 0]
    out = parse_blobs(data.reshape(-1), np.arange(len(pairs) + 1) * 28, errors="status")
    valid = np.array([(int(sf), int(bps)) in ENCODINGS for sf, bps in pairs])
    assert valid.sum() == 28
    assert np.all(out["status"][valid] == K.OK)
    assert np.all(out["status"][~valid] == K.BAD_PAIR)
    assert np.array_equal(out["sample_format"], pairs[:, 0]) and np.array_equal(out["bits_per_sample"], pairs[:, 1])


# -- parse_blobs -------------------------------------------------------------------------
def test_parse_blobs_reports_a_status_per_blob_in_a_mixed_batch(rng):
    good = [build_header(Grid(30 + i, 20, 8, 8, 1 + i % 4, FrameUnit(i % 2)), encoding(1, 16),
                         rng.integers(50, 900, Grid(30 + i, 20, 8, 8, 1 + i % 4, FrameUnit(i % 2)).n_frames))
            for i in range(6)]
    bad = {name: BAD_BLOBS[name][0] for name in ("magic", "version 2", "one byte long", "count_min 0",
                                                  "unused bits set", "single frame with count_bits 1")}
    expected_status = {"magic": K.BAD_MAGIC, "version 2": K.BAD_VERSION, "one byte long": K.BAD_SIZE,
                       "count_min 0": K.ZERO_COUNT, "unused bits set": K.PADDING_BITS,
                       "single frame with count_bits 1": K.SINGLE_FRAME_BITS}
    batch, want = [], []
    names = list(bad)
    for i in range(6):
        batch += [good[i], bad[names[i]]]
        want += [K.OK, expected_status[names[i]]]
    out = parse_blobs(batch, errors="status")
    assert out["status"].tolist() == want
    assert set(out) == set(BLOB_FIELDS) | {"status"}
    assert all(col.dtype == np.int64 and col.shape == (12,) for col in out.values())
    for i in range(6):
        h = Header.parse(good[i])
        row = 2 * i
        assert [int(out[name][row]) for name in BLOB_FIELDS] == [
            h.image_width, h.image_length, h.tile_width, h.tile_length, h.samples_per_pixel, h.bits_per_sample,
            h.sample_format, int(h.frame_unit), h.count_min, h.count_bits, h.n_frames, len(h)]
    assert out["blob_size"].tolist() == [len(b) for b in batch]
    # the same batch as one flat buffer with Arrow-style offsets
    flat = np.frombuffer(b"".join(batch), dtype=np.uint8)
    offs = np.concatenate([[0], np.cumsum([len(b) for b in batch])])
    out2 = parse_blobs(flat, offs, errors="status")
    assert all(np.array_equal(out[k], out2[k]) for k in out)
    with pytest.raises(BlobError, match=r"^blob 1 of 12: magic"):
        parse_blobs(batch)
    assert "status" not in parse_blobs(good)


def test_parse_blobs_accepts_an_empty_batch_and_rejects_bad_offsets():
    out = parse_blobs([], errors="status")
    assert all(col.shape == (0,) for col in out.values())
    flat = np.zeros(56, dtype=np.uint8)
    with pytest.raises(TypeError):
        parse_blobs(flat)
    for offs in ([0, 30, 20], [0, 57], [-1, 28], []):
        with pytest.raises(ValueError, match="offsets"):
            parse_blobs(flat, offs)


@pytest.mark.slow
def test_parse_blobs_checks_a_million_blobs_in_one_pass_and_gets_every_one_right():
    m = 1_000_000
    r = np.random.default_rng(7)
    rec = np.zeros(m, dtype=[("magic", "<u4"), ("version", "<u2"), ("w", "<u4"), ("l", "<u4"), ("tw", "<u2"),
                             ("tl", "<u2"), ("b", "<u2"), ("bps", "u1"), ("sf", "u1"), ("unit", "u1"),
                             ("cmin", "<u4"), ("bits", "u1"), ("packed", "u1", (4,))])
    assert rec.dtype.itemsize == 32
    pairs = np.array(sorted(ENCODINGS), dtype=np.int64)
    pick = r.integers(0, len(pairs), m)
    rec["magic"], rec["version"] = MAGIC, VERSION
    rec["w"], rec["l"] = r.integers(11, 21, m), r.integers(11, 21, m)  # 2 x 2 grid of 10 x 10 tiles
    rec["tw"], rec["tl"] = 10, 10
    rec["b"] = r.integers(1, 65536, m)
    rec["unit"] = 1  # cell frames: N = 4 whatever B
    rec["sf"], rec["bps"] = pairs[pick, 0], pairs[pick, 1]
    rec["cmin"] = r.integers(1, 2**31, m)
    rec["bits"] = 8
    res = r.integers(0, 256, (m, 4))
    lo = r.integers(0, 4, m)
    hi = (lo + r.integers(1, 4, m)) % 4
    rows = np.arange(m)
    res[rows, lo] = 0
    res[rows, hi] = r.integers(128, 256, m)  # largest residual needs exactly 8 bits
    rec["packed"] = res
    expected = np.zeros(m, dtype=np.int64)
    groups = np.array_split(r.permutation(m)[: 8 * 10_000], 8)  # eight disjoint groups of broken blobs
    rec["magic"][groups[0]] = 0x01020304
    expected[groups[0]] = K.BAD_MAGIC
    rec["version"][groups[1]] = 2
    expected[groups[1]] = K.BAD_VERSION
    rec["sf"][groups[2]] = 4
    expected[groups[2]] = K.BAD_PAIR
    rec["unit"][groups[3]] = 2
    expected[groups[3]] = K.BAD_UNIT
    rec["bits"][groups[4]] = 9  # 28 + ceil(4 * 9 / 8) = 33 != 32
    expected[groups[4]] = K.BAD_SIZE
    rec["cmin"][groups[5]] = 0
    expected[groups[5]] = K.ZERO_COUNT
    rec["packed"][groups[6]] |= 1  # no residual is 0 any more
    expected[groups[6]] = K.NOT_MIN
    rec["packed"][groups[7]] >>= 1  # largest residual needs 7 bits
    expected[groups[7]] = K.NOT_MIN_BITS
    flat = rec.view(np.uint8)
    offsets = np.arange(m + 1, dtype=np.int64) * 32

    out = parse_blobs(flat, offsets, errors="status")

    assert np.array_equal(out["status"], expected)
    assert np.array_equal(out["image_width"], rec["w"]) and np.array_equal(out["image_length"], rec["l"])
    assert np.array_equal(out["samples_per_pixel"], rec["b"])
    assert np.array_equal(out["sample_format"], rec["sf"]) and np.array_equal(out["bits_per_sample"], rec["bps"])
    assert np.array_equal(out["frame_unit"], rec["unit"]) and np.array_equal(out["count_min"], rec["cmin"])
    assert np.array_equal(out["count_bits"], rec["bits"])
    assert np.all(out["blob_size"] == 32)
    ok = expected == K.OK
    assert ok.sum() == m - 80_000 and np.all(out["n_frames"][ok] == 4)
    for i in r.choice(np.flatnonzero(ok), 50, replace=False):  # spot-check counts through Header
        h = Header.parse(flat[32 * i: 32 * i + 32].tobytes())
        assert h.frame_byte_counts.tolist() == (rec["cmin"][i] + res[i].astype(np.uint64)).tolist()
    # the list-of-bytes form gives the same answer (first 100,000)
    part = list(map(bytes, flat.reshape(m, 32)[:100_000]))
    assert np.array_equal(parse_blobs(part, errors="status")["status"], expected[:100_000])


# -- absurd sizes are refused or handled without allocating ----------------------------------
def _peak_bytes(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("bits", [0, 32])
@pytest.mark.parametrize("unit", [0, 1])
def test_a_blob_claiming_a_four_billion_square_image_of_1x1_tiles_is_rejected_without_allocating(bits, unit):
    blob = raw_blob(width=2**32 - 1, length=2**32 - 1, tw=1, tl=1, bands=65535, unit=unit, count_bits=bits,
                    packed=b"\xff" * 16)
    Header.parse(good_raw())  # compile outside the measurement

    def parse():
        with pytest.raises(BlobError, match="more than 2\\*\\*40 frames"):
            Header.parse(blob)
        out = parse_blobs([blob] * 3, errors="status")
        assert out["status"].tolist() == [K.TOO_MANY_FRAMES] * 3

    assert _peak_bytes(parse) < 1 << 20


def test_the_largest_addressable_blob_answers_offsets_without_allocating_them():
    # 2**32 - 1 columns of 1-pixel tiles, 256 rows: 2**40 - 256 frames of 4 bytes each
    blob = raw_blob(width=2**32 - 1, length=256, tw=1, tl=1, bands=1, count_min=4, count_bits=0)
    h = Header.parse(blob)

    def answer():
        n = h.n_frames
        assert n == (2**32 - 1) * 256
        assert h.offset(n) == h.file_size == h.base_frame_offset + 4 * n
        assert h.offset(n // 2) == h.base_frame_offset + 4 * (n // 2)
        assert h.byte_count(n - 1) == 4
        counts = h.frame_byte_counts
        assert counts.shape == (n,) and int(counts[n - 7]) == 4  # a broadcast view, not an array
        assert h.to_dict()["frames"] == n and "frames=" in repr(h)

    assert _peak_bytes(answer) < 1 << 20


def test_a_blob_past_the_frame_limit_after_bands_multiply_is_rejected():
    # 2**31 positions x 2**10 bands = 2**41 tile frames; as cell frames, 2**31 frames
    blob = raw_blob(width=2**31, length=1, tw=1, tl=1, bands=1024, unit=0, count_bits=0)
    with pytest.raises(BlobError, match="more than 2\\*\\*40 frames"):
        Header.parse(blob)
    cell = Header.parse(raw_blob(width=2**31, length=1, tw=1, tl=1, bands=1024, unit=1, count_bits=0))
    assert cell.n_frames == 2**31


def test_the_column_names_are_stable():
    assert BLOB_FIELDS == ("image_width", "image_length", "tile_width", "tile_length", "samples_per_pixel",
                           "bits_per_sample", "sample_format", "frame_unit", "count_min", "count_bits", "n_frames",
                           "blob_size")
    assert HEADER_SIZE == 28
