"""Spec 0.2 byte layouts: the 32-byte blob, the 13-tag IFD, the TAIL trailer and the frame-unit registry.

Checked against fixtures rumi-eo 0.26.1 wrote (``tests/data/v2``) and against the
independent reader ``spec_reader_v2``; hostile blobs and trailers must raise
``BlobError``/``FormatError`` naming the rule.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import spec_reader_v2 as spec

from rumimm.errors import BlobError, FormatError
from rumimm.format import trailer, units
from rumimm.format.blob import Header
from rumimm.format.dtypes import SPEC_ENCODINGS, encoding, encoding_for_dtype
from rumimm.format.v2 import (
    Grid2,
    Header2,
    base_frame_offset2,
    build_header2,
    build_prefix2,
    parse_header,
    spec_of_file,
)

DATA = Path(__file__).parent / "data" / "v2"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
NAMES = sorted(MANIFEST)


def _blob(name: str) -> bytes:
    return (DATA / f"{name}.header").read_bytes()


@pytest.mark.parametrize("name", NAMES)
def test_each_reference_header_parses_to_the_fields_of_its_file(name):
    p = spec.parse_file(DATA / f"{name}.rumi")
    hdr = Header2.parse(_blob(name))
    assert hdr.spec == "0.2"
    assert (hdr.image_width, hdr.image_length, hdr.samples_per_pixel, hdr.time_count, hdr.layout) == (
        p["width"], p["length"], p["bands"], p["times"], p["unit"])
    assert hdr.n_frames == p["frames"]
    assert hdr.base_frame_offset == p["offsets"][0] == base_frame_offset2(p["bands"], p["frames"])
    assert hdr.frame_offsets[:-1].tolist() == list(p["offsets"])
    assert hdr.frame_byte_counts.tolist() == list(p["counts"])
    assert hdr.frames_end == p["offsets"][-1] + p["counts"][-1]
    assert list(hdr.shape) == MANIFEST[name]["shape"]
    assert hdr.layout_name == MANIFEST[name]["frame_layout"]
    assert spec.blob_of(p) == _blob(name)


@pytest.mark.parametrize("name", NAMES)
def test_the_header_and_prefix_rumimm_builds_are_the_reference_bytes(name):
    p = spec.parse_file(DATA / f"{name}.rumi")
    hdr = Header2.parse(_blob(name))
    assert build_header2(hdr.grid, hdr.encoding, p["counts"]) == _blob(name)
    prefix = build_prefix2(hdr.grid, hdr.encoding, np.array(p["offsets"], np.uint64),
                           np.array(p["counts"], np.uint64), p["matrix"], p["geokeys"])
    assert prefix == p["data"][:p["offsets"][0]]


@pytest.mark.parametrize("name", NAMES)
def test_the_trailer_parses_to_the_reference_texts_and_time_and_rebuilds_byte_equal(name):
    p = spec.parse_file(DATA / f"{name}.rumi")
    end = p["offsets"][-1] + p["counts"][-1]
    tail = p["data"][end:]
    tr = trailer.parse_trailer(tail, p["bands"], p["times"])
    assert list(tr.bands) == p["texts"] == MANIFEST[name]["bands"]
    assert tr.seconds == p["seconds"]
    assert [str(t) for t in tr.time] == MANIFEST[name]["time"]
    assert tr.time_kind == MANIFEST[name]["time_kind"]
    assert trailer.build_trailer(tr.bands, tr.kind, tr.seconds) == tail


def test_frame_indices_of_virtual_bands_follow_the_spec_formula_for_every_unit():
    for unit in range(10):
        for bands, times in ((1, 1), (3, 1), (1, 4), (3, 4)):
            if unit not in units.valid_units(bands, times):
                continue
            g = Grid2.of(50, 70, 16, 32, bands, times, unit)
            assert g.n_frames == units.n_frames(unit, g.n_positions, bands, times)
            for row, col in ((0, 0), (1, 2), (2, 3)):
                for t in range(times):
                    for b in range(bands):
                        v = int(g.virtual_bands([t], [b])[0, 0])
                        want = spec.frame_index(unit, g.tiles_across, bands, times, row, col, b, t)
                        assert g.frame_index(row, col, v) == want


def test_unit_registry_validity_matches_the_reference_table():
    assert units.valid_units(1, 1) == (0,)
    assert units.valid_units(4, 1) == (0, 1, 2) == units.valid_units(1, 3)
    assert units.valid_units(4, 3) == (0, 3, 4, 5, 6, 7, 8, 9)
    assert units.check_unit(10, 2, 2) == "frame_unit 10 is not registered (0 to 9)"
    assert "needs B > 1 and T > 1" in units.check_unit(4, 3, 1)
    assert "exactly one of B and T" in units.check_unit(1, 3, 2)
    assert units.unit_axes(1, 1, 3) == "t h w" and units.unit_axes(2, 3, 1) == "h w b"
    assert [units.interleaved(u) for u in range(10)] == [False, False, True, False, False, True, True, True, True,
                                                         False]


def test_spec_02_sample_types_drop_sub_byte_and_complex_integers_and_add_the_fnuz_floats():
    v2 = SPEC_ENCODINGS["0.2"]
    assert (1, 4) not in v2 and (5, 32) not in v2 and (106, 4) not in v2
    assert encoding(107, 8, spec="0.2").name == "float8_e4m3fnuz"
    with pytest.raises(FormatError, match=r"\(107, 8\) is not a valid rumi sample encoding;"):
        encoding(107, 8)
    with pytest.raises(FormatError, match=r"in spec 0.2"):
        encoding(1, 4, spec="0.2")
    assert encoding_for_dtype(np.uint16, "0.2") is encoding_for_dtype(np.uint16)
    assert len(v2) == 21


# -- telling the versions apart -------------------------------------------------------------


def test_a_header_alone_is_told_apart_by_its_layout():
    for name in NAMES:
        assert parse_header(_blob(name)).spec == "0.2"
    for blob in sorted((DATA.parent).glob("*.blob")):
        assert parse_header(blob.read_bytes()).spec == "0.1"


def test_a_blob_valid_as_both_versions_asks_for_format():
    # a 0.1 blob whose tile (tile_width 1, tile_length 1) reads as time_count 65537 in 0.2, and whose
    # band count / sample fields line up as a valid 0.2 blob of one frame of the same size
    v1 = struct.pack("<IHIIHHHBBBIB", 0x45564F4C, 1, 1, 1, 1, 1, 1, 8, 1, 0, 10, 0)
    assert Header.parse(v1)
    v2 = struct.pack("<IHIIIHHHBBBIB", 0x45564F4C, 1, 1, 1, 1, 1, 1, 1, 8, 1, 0, 10, 0)
    both = v2
    with pytest.raises(BlobError):
        Header.parse(both)  # 32 bytes: not a 0.1 blob of one frame
    assert parse_header(both).spec == "0.2"
    assert parse_header(v1).spec == "0.1"
    assert parse_header(v1, spec="0.1").spec == "0.1"
    with pytest.raises(BlobError, match=r"spec 0.2"):
        parse_header(v1, spec="0.2")
    with pytest.raises(ValueError, match="spec must be"):
        parse_header(v1, spec="1.0")


def test_an_ambiguous_blob_is_refused_without_format(monkeypatch):
    import rumimm.format.v2 as v2mod
    from rumimm.format.spec import Spec02

    v1 = struct.pack("<IHIIHHHBBBIB", 0x45564F4C, 1, 1, 1, 1, 1, 1, 8, 1, 0, 10, 0)
    # pretend it is also a 0.2 blob
    monkeypatch.setattr(Spec02, "parse_header", lambda self, data, path=None: Header.parse(v1))
    with pytest.raises(BlobError, match=r"valid as both spec 0.1 .* pass spec="):
        v2mod.parse_header(v1)


def test_files_are_told_apart_by_their_first_bytes():
    assert spec_of_file((DATA / "img_u0.rumi").read_bytes()[:16]) == "0.2"
    assert spec_of_file((DATA.parent / "f32_tile_b1.rumi").read_bytes()[:16]) == "0.1"
    assert spec_of_file(b"\x89PNG") is None


# -- hostile blobs --------------------------------------------------------------------------


def _set(blob: bytes, fmt: str, at: int, value) -> bytes:
    b = bytearray(blob)
    struct.pack_into(fmt, b, at, value)
    return bytes(b)


@pytest.mark.parametrize(("change", "rule"), [
    (lambda b: b[:20], "shorter than the 32-byte header"),
    (lambda b: _set(b, "<I", 0, 0x12345678), "magic is not"),
    (lambda b: _set(b, "<H", 4, 2), "version must be 1"),
    (lambda b: _set(b, "<I", 14, 0), "time_count must be >= 1"),
    (lambda b: _set(b, "<I", 14, 5), "blob is \\d+ bytes, expected 32 \\+ ceil"),
    (lambda b: _set(b, "<H", 18, 0), "tile_width and tile_length must be > 0"),
    (lambda b: _set(b, "<H", 22, 0), "samples_per_pixel must be >= 1"),
    (lambda b: _set(b, "<B", 24, 4), "not a sample type of spec 0.2"),
    (lambda b: _set(b, "<B", 26, 10), "frame_unit 10 is not registered"),
    (lambda b: _set(b, "<B", 26, 1), "needs exactly one of B and T above 1"),
    (lambda b: _set(b, "<B", 31, 33), "count_bits must be between 0 and 32"),
    (lambda b: _set(b, "<I", 27, 0), "count_min must be > 0"),
    (lambda b: b + b"\0", "expected 32 \\+ ceil"),
    (lambda b: _set(_set(b, "<I", 6, 0xFFFFFFFF), "<I", 10, 0xFFFFFFFF), "more than 2\\*\\*40 frames"),
    (lambda b: _set(b, "<I", 14, 0xFFFFFFFF), "more than 2\\*\\*40 frames|expected 32"),
    (lambda b: _set(_set(b, "<I", 14, 0xFFFFFFFF), "<B", 26, 4), "more than the 1073741824 bytes rumimm decodes"),
])
def test_a_hostile_blob_raises_blob_error_naming_the_rule(change, rule):
    good = _blob("cube_u0")
    with pytest.raises(BlobError, match=rule):
        Header2.parse(change(good))


def test_non_canonical_count_encodings_are_refused():
    from rumimm.format.packing import pack_residuals

    hdr = Header2.parse(_blob("cube_u0"))
    counts, cmin, bits = hdr.frame_byte_counts, hdr.count_min, hdr.count_bits
    wide = _set(_blob("cube_u0")[:32], "<B", 31, bits + 1) + pack_residuals(counts, cmin, bits + 1).tobytes()
    with pytest.raises(BlobError, match="not the minimum width"):
        Header2.parse(wide)
    low = _set(_blob("cube_u0")[:32], "<I", 27, cmin - 1) + pack_residuals(counts, cmin - 1, bits).tobytes()
    with pytest.raises(BlobError, match="count_min is not the smallest"):
        Header2.parse(low)


# -- hostile trailers -----------------------------------------------------------------------


def _tail(name="cube_seconds"):
    p = spec.parse_file(DATA / f"{name}.rumi")
    end = p["offsets"][-1] + p["counts"][-1]
    return p["data"][end:], p["bands"], p["times"]


@pytest.mark.parametrize(("change", "rule"), [
    (lambda t: t[:3], "fewer than the trailer's 6-byte head"),
    (lambda t: b"TAIX" + t[4:], "expected b'TAIL'"),
    (lambda t: t[:4] + b"\2\0" + t[6:], "version is 2"),
    (lambda t: t[:6] + b"\0\0" + t[9:], "band text 0 is empty"),
    (lambda t: t[:8] + b"\0" + t[9:], "band text 0 contains a 0x00 byte"),
    (lambda t: t[:8] + b"\xff" + t[9:], "band text 0 is not valid UTF-8"),
    (lambda t: t[:11] + b"x" + t[12:], "band text 1 \\('x'\\) repeats band 0"),
    (lambda t: t[:6] + b"\xff\x00" + t[8:], "band text 0 claims 255 bytes"),
    (lambda t: t[:12] + b"\3" + t[13:], "time_type is 3"),
    (lambda t: t[:13] + b"\x41" + t[14:], "time_bits is 65"),
    (lambda t: t[:30] + struct.pack("<I", 2) + t[34:], "time_scale is 2"),
    (lambda t: t + b"\0", "nothing may follow the residuals"),
    (lambda t: t[:-1], "the file is truncated"),
    (lambda t: t[:34] + bytes([t[34] | 1]) + t[35:], "are not canonical"),
])
def test_a_hostile_trailer_raises_format_error_naming_the_rule(change, rule):
    tail, bands, times = _tail()
    assert tail[6:8] == b"\1\0" and tail[9:11] == b"\1\0"  # texts "x", "y": the offsets above assume them
    with pytest.raises(FormatError, match=rule):
        trailer.parse_trailer(change(tail), bands, times)


def test_a_regular_series_of_four_billion_steps_is_checked_without_allocating_them():
    tail = trailer.build_trailer(["a"], trailer.INSTANT, [0, 86400])
    assert trailer.parse_trailer(tail, 1, 2).seconds == [0, 86400]
    # bits 0 and a claimed T of 2**32 - 1: constant time, nothing materialised
    big = trailer.parse_trailer(tail, 1, 0xFFFFFFFF)
    assert big.count == 0xFFFFFFFF and big.residuals is None and big.step == 1


def test_time_values_round_trip_through_the_canonical_fields():
    cases = [[0, 86400, 3 * 86400], [5, 6, 8], [-86400 * 365, 0], [0, 0, 0], [1, 3, 4]]
    for seconds in cases:
        tr = trailer.parse_trailer(trailer.build_trailer(["a"], trailer.INSTANT, seconds), 1, len(seconds))
        assert tr.seconds == seconds
    iv = [0, 86400, 86400, 2 * 86400 + 5]
    tr = trailer.parse_trailer(trailer.build_trailer(["a"], trailer.INTERVAL, iv), 1, 2)
    assert tr.seconds == iv and tr.time_kind == "interval"
    with pytest.raises(ValueError, match="goes backwards"):
        trailer.build_trailer(["a"], trailer.INSTANT, [5, 4])
    with pytest.raises(ValueError, match="ends after step 1 starts"):
        trailer.build_trailer(["a"], trailer.INTERVAL, [0, 10, 5, 20])
    with pytest.raises(ValueError, match="repeats band 0"):
        trailer.build_trailer(["a", "a"], trailer.INSTANT, [0])


def test_trailer_size_bounds_hold_the_smallest_and_the_largest_trailers():
    """What a remote reader may fetch for a trailer: never less than the smallest, never more than the largest."""
    assert trailer.min_trailer_bytes(3) == len(trailer.build_trailer(["a", "b", "c"], trailer.INSTANT, [0]))
    rng = np.random.default_rng(5)
    ends = np.sort(rng.integers(-(1 << 62), 1 << 62, 6)).tolist()  # irregular: 64-bit residuals
    big = trailer.build_trailer(["x" * trailer.MAX_TEXT_BYTES, "y" * trailer.MAX_TEXT_BYTES], trailer.INTERVAL, ends)
    assert len(big) <= trailer.max_trailer_bytes(2, 3)
    assert trailer.max_trailer_bytes(2, 3) - len(big) < 64
