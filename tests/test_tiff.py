"""The BigTIFF prefix: header, the fixed 11-tag IFD at byte 16 and the external values."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from conftest import craft, grid_and_encoding
from hypothesis import given, settings
from hypothesis import strategies as st

from rumimm.format import georef
from rumimm.format.dtypes import encoding
from rumimm.format.grid import Grid
from rumimm.format.tiff import BIGTIFF_MAGIC, FIXED_TAGS, N_TAGS, IfdEntry, Tag, TiffType, build_prefix, read_entries

SPEC_TAGS = [  # tag, type, count as (B, N) -> count; copied from the spec's Fixed IFD table
    (256, 4, lambda b, n: 1),
    (257, 4, lambda b, n: 1),
    (258, 3, lambda b, n: b),
    (277, 3, lambda b, n: 1),
    (322, 3, lambda b, n: 1),
    (323, 3, lambda b, n: 1),
    (324, 16, lambda b, n: n),
    (325, 4, lambda b, n: n),
    (339, 3, lambda b, n: b),
    (34264, 12, lambda b, n: 16),
    (34735, 3, lambda b, n: 16),
]
TYPE_SIZE = {3: 2, 4: 4, 12: 8, 16: 8}
TYPE_CODE = {3: "H", 4: "I", 12: "d", 16: "Q"}


def test_the_tag_and_type_enums_carry_the_spec_codes():
    assert [int(t) for t in Tag] == [t for t, _, _ in SPEC_TAGS]
    assert list(FIXED_TAGS) == list(Tag) and N_TAGS == 11
    for (tag, (typ, count)), (stag, styp, scount) in zip(FIXED_TAGS.items(), SPEC_TAGS, strict=True):
        assert int(tag) == stag and int(typ) == styp
        for b, n in [(1, 1), (4, 9), (13, 117)]:
            assert count(b, n) == scount(b, n)
    assert {int(t): t.size for t in TiffType} == TYPE_SIZE
    assert {int(t): t.code for t in TiffType} == TYPE_CODE
    assert BIGTIFF_MAGIC == b"II+\x00\x08\x00\x00\x00"


def _prefix(grid, enc, counts, matrix=georef.UNDEFINED_MATRIX, keys=None):
    counts = np.asarray(counts, dtype=np.uint64)
    offsets = grid.base_frame_offset + np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.uint64)
    return build_prefix(grid, enc, offsets, counts, matrix, keys or georef.geokeys(None)), offsets


def parse_prefix(buf: bytes):
    """Decode the prefix with struct only: header, entries and every value."""
    assert buf[:4] == b"II\x2b\x00"
    bytesize, reserved, first = struct.unpack_from("<HHQ", buf, 4)
    assert (bytesize, reserved, first) == (8, 0, 16)
    (count,) = struct.unpack_from("<Q", buf, 16)
    entries, values = [], {}
    for i in range(count):
        tag, typ, cnt, fld = struct.unpack_from("<HHQ8s", buf, 24 + 20 * i)
        entries.append((tag, typ, cnt, fld))
        size = cnt * TYPE_SIZE[typ]
        raw = fld[:size] if size <= 8 else buf[int.from_bytes(fld, "little"):][:size]
        values[tag] = struct.unpack(f"<{cnt}{TYPE_CODE[typ]}", raw)
    (next_ifd,) = struct.unpack_from("<Q", buf, 24 + 20 * count)
    return count, entries, values, next_ifd


@st.composite
def prefix_cases(draw):
    g, enc = draw(grid_and_encoding(max_size=200, max_tile=64, max_bands=16, max_frames=2000))
    counts = np.random.default_rng(draw(st.integers(0, 2**31))).integers(1, 10**6, g.n_frames)
    return g, enc, counts


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(prefix_cases())
def test_build_prefix_lays_out_the_spec_ifd_for_any_grid(case):
    g, enc, counts = case
    buf, offsets = _prefix(g, enc, counts)
    b, n = g.samples_per_pixel, g.n_frames
    assert len(buf) == g.base_frame_offset  # the first frame starts right after the prefix
    count, entries, values, next_ifd = parse_prefix(buf)
    assert count == 11 and next_ifd == 0
    assert [(t, ty, c) for t, ty, c, _ in entries] == [(t, ty, c(b, n)) for t, ty, c in SPEC_TAGS]
    cursor = 252  # 16-byte header + 236-byte IFD
    for _tag, typ, cnt, fld in entries:
        size = cnt * TYPE_SIZE[typ]
        if size > 8:  # external values follow the IFD in rising tag order, no gaps
            assert int.from_bytes(fld, "little") == cursor
            cursor += size
        else:
            assert fld[size:] == b"\0" * (8 - size)
    assert cursor == len(buf)
    assert values[256] == (g.image_width,) and values[257] == (g.image_length,)
    assert values[258] == (enc.bits_per_sample,) * b and values[339] == (enc.sample_format,) * b
    assert values[277] == (b,) and values[322] == (g.tile_width,) and values[323] == (g.tile_length,)
    assert list(values[324]) == offsets.tolist() and list(values[325]) == counts.tolist()
    assert values[34264] == georef.UNDEFINED_MATRIX
    assert values[34735] == georef.geokeys(None)


def test_the_smallest_prefix_is_412_bytes_with_only_georef_values_outside_the_ifd():
    buf, _ = _prefix(Grid(8, 8, 8, 8, 1), encoding(1, 8), [100])
    assert len(buf) == 412
    _, entries, values, _ = parse_prefix(buf)
    external = [t for t, ty, c, _ in entries if c * TYPE_SIZE[ty] > 8]
    assert external == [34264, 34735]
    assert values[324] == (412,)


def test_georeferencing_changes_the_values_of_the_two_tags_never_their_size():
    g, enc = Grid(30, 20, 8, 8, 3), encoding(1, 16)
    counts = np.arange(1, 37)
    plain, _ = _prefix(g, enc, counts)
    geo, _ = _prefix(g, enc, counts, georef.matrix_from_transform((10, 0, 5e5, 0, -10, 4.2e6)), georef.geokeys(32633))
    assert len(plain) == len(geo)
    diff = np.flatnonzero(np.frombuffer(plain, np.uint8) != np.frombuffer(geo, np.uint8))
    assert diff.min() >= len(plain) - 160  # only the last 160 bytes (128 matrix + 32 keys) differ
    values = parse_prefix(geo)[2]
    assert values[34735][-1] == 32633 and values[34264][3] == 5e5


def test_read_entries_decodes_the_raw_ifd():
    buf, _ = _prefix(Grid(30, 20, 8, 8, 3), encoding(1, 16), np.arange(1, 37))
    entries = read_entries(buf, 11)
    assert all(isinstance(e, IfdEntry) for e in entries)
    assert [e.tag for e in entries] == [int(t) for t in Tag]
    assert entries[0].type == 4 and entries[0].count == 1 and entries[0].pointer == 30
    assert entries[6].count == 36 and entries[6].pointer == 252


@pytest.mark.parametrize(("shape", "tile", "unit"), [((3, 20, 30), 8, "tile"), ((5, 20, 30), (8, 16), "cell"),
                                               ((1, 8, 8), 8, "tile"), ((13, 9, 17), 8, "tile")])
def test_the_conftest_writer_and_build_prefix_make_the_same_bytes(shape, tile, unit):
    c = craft(shape, tile, unit)
    rendered = c.render()
    prefix, _ = _prefix(c.grid, c.enc, c.counts)
    assert rendered == prefix + b"".join(c.frames)


def test_build_prefix_refuses_values_that_do_not_fill_their_entries_even_under_python_O():
    g, enc = Grid(30, 20, 8, 8, 3), encoding(1, 16)
    counts = np.arange(1, 37, dtype=np.uint64)
    with pytest.raises(ValueError, match="tag 324: 280 value bytes, expected 36 x 8"):
        build_prefix(g, enc, np.arange(35, dtype=np.uint64), counts, georef.UNDEFINED_MATRIX, georef.geokeys(None))
    with pytest.raises(ValueError, match="tag 325: 140 value bytes, expected 36 x 4"):
        build_prefix(g, enc, np.arange(36, dtype=np.uint64), counts[:35], georef.UNDEFINED_MATRIX,
                     georef.geokeys(None))
