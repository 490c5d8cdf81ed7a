"""Tile-grid arithmetic: frame index, edge sizes, N and base_frame_offset."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rumimm.format import bigtiff as B
from rumimm.format import grid as G
from rumimm.format.grid import FrameUnit, Grid, base_frame_offset, ceildiv, frame_unit


@st.composite
def grids(draw, max_side=300, max_tile=64, max_bands=16):
    width = draw(st.integers(1, max_side))
    length = draw(st.integers(1, max_side))
    tw = draw(st.integers(1, max_tile))
    tl = draw(st.integers(1, max_tile))
    bands = draw(st.integers(1, max_bands))
    unit = draw(st.sampled_from([FrameUnit.TILE, FrameUnit.CELL]))
    g = Grid(width, length, tw, tl, bands, unit)
    assume(g.n_frames <= 3000)  # keeps the slow per-frame loops below quick
    return g


# -- constants and worked values from the spec ------------------------------------------
def test_the_ifd_is_236_bytes_and_ends_at_byte_252():
    assert B.TIFF_HEADER_SIZE == 16 and B.ENTRY_SIZE == 20 and B.entry_offset(2) == 64 and B.value_offset(0) == 36
    assert G.IFD_SIZE == 8 + 20 * 11 + 8 == 236
    assert G.IFD_END == 252


def test_the_smallest_file_starts_its_frames_after_the_ifd_and_the_160_georef_bytes():
    # one band, one frame: every value is inline except the two georeferencing tags
    assert base_frame_offset(1, 1) == 252 + 128 + 32 == 412


@pytest.mark.parametrize(
    ("bands", "n", "expected"),
    [
        (1, 1, 412),  # only the georef tags are external
        (1, 2, 412 + 16),  # N >= 2: TileOffsets (8 N) goes external, TileByteCounts (4 N = 8) fits
        (1, 3, 412 + 24 + 12),  # N >= 3: TileByteCounts goes external too
        (4, 1, 412),  # B = 4: 8 bytes of SHORTs still fit inline
        (5, 1, 412 + 10 + 10),  # B >= 5: BitsPerSample and SampleFormat go external
        (4, 2, 412 + 16),
        (5, 3, 412 + 20 + 24 + 12),
        (13, 13, 252 + 26 + 104 + 52 + 26 + 160),
        (3, 12, 252 + 96 + 48 + 160),
    ],
)
def test_base_frame_offset_crosses_each_threshold_exactly_where_the_spec_says(bands, n, expected):
    assert base_frame_offset(bands, n) == expected


def test_base_frame_offset_equals_the_spec_formula_for_many_sizes():
    for b in range(1, 20):
        for n in range(1, 50):
            external = ((2 * b if b >= 5 else 0) + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0)
                        + (2 * b if b >= 5 else 0) + 128 + 32)
            assert base_frame_offset(b, n) == 252 + external


def test_files_of_the_same_shape_and_unit_share_a_base_offset():
    a = Grid(1000, 700, 256, 256, 4, FrameUnit.TILE)
    b = Grid(1000, 700, 256, 256, 4, FrameUnit.TILE)
    assert a.base_frame_offset == b.base_frame_offset == base_frame_offset(4, 4 * 3 * 4)
    cell = Grid(1000, 700, 256, 256, 4, FrameUnit.CELL)
    assert cell.base_frame_offset == base_frame_offset(4, 12)


# -- frame units ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "unit"), [("tile", FrameUnit.TILE), ("cell", FrameUnit.CELL), ("TILE", FrameUnit.TILE),
                                         (0, FrameUnit.TILE), (1, FrameUnit.CELL), (FrameUnit.CELL, FrameUnit.CELL)])
def test_frame_unit_accepts_names_codes_and_members(value, unit):
    assert frame_unit(value) is unit


@pytest.mark.parametrize("bad", ["band", "", 2, -1, None, 1.5j])
def test_frame_unit_rejects_anything_else_with_value_error(bad):
    with pytest.raises(ValueError, match="unit must be 'tile' or 'cell'"):
        frame_unit(bad)


# -- ceildiv ----------------------------------------------------------------------------
@given(st.integers(0, 2**70), st.integers(1, 2**40))
def test_ceildiv_is_exact_on_sizes_floats_cannot_hold(a, b):
    q = ceildiv(a, b)
    assert q * b >= a > (q - 1) * b or (a == 0 and q == 0)


def test_ceildiv_differs_from_float_ceil_where_floats_round():
    a, b = 2**60 + 1, 1
    assert ceildiv(a, b) == 2**60 + 1 != math.ceil(a / b)


# -- grid math ----------------------------------------------------------------------------
def test_a_ragged_grid_has_the_spec_counts_and_edge_sizes():
    g = Grid(30, 20, 8, 8, 3, FrameUnit.TILE)
    assert (g.tiles_across, g.tiles_down, g.n_positions, g.n_frames) == (4, 3, 12, 36)
    assert g.shape == (3, 20, 30)
    assert g.edge_size(0, 0) == (8, 8)
    assert g.edge_size(0, 3) == (8, 6)
    assert g.edge_size(2, 0) == (4, 8)
    assert g.edge_size(2, 3) == (4, 6)
    assert g.frame_index(1, 2, 1) == (1 * 4 + 2) * 3 + 1 == 19
    assert g.frame_position(19) == (1, 2, 1)
    assert g.frame_shape(35) == (4, 6)
    cell = Grid(30, 20, 8, 8, 3, FrameUnit.CELL)
    assert cell.n_frames == 12
    assert cell.frame_index(1, 2) == 6
    assert cell.frame_shape(11) == (3, 4, 6)
    assert cell.frame_samples(11) == 72


def test_the_default_unit_is_tile():
    assert Grid(10, 10, 4, 4, 2).unit is FrameUnit.TILE


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(grids())
def test_frame_index_and_frame_position_are_inverse(g):
    b_range = range(g.samples_per_pixel) if g.unit == FrameUnit.TILE else range(1)
    k = 0
    for row in range(g.tiles_down):
        for col in range(g.tiles_across):
            for band in b_range:
                # row-major positions, bands innermost: frame-index order is this loop's order
                assert g.frame_index(row, col, band) == k
                assert g.frame_position(k) == (row, col, band)
                k += 1
    assert k == g.n_frames


@settings(max_examples=100, deadline=None)
@given(grids())
def test_n_frames_follows_the_frame_unit(g):
    positions = ceildiv(g.image_width, g.tile_width) * ceildiv(g.image_length, g.tile_length)
    assert g.n_positions == positions
    if g.unit == FrameUnit.TILE:
        assert g.n_frames == positions * g.samples_per_pixel
        assert g.frames_per_position == g.samples_per_pixel
    else:
        assert g.n_frames == positions
        assert g.frames_per_position == 1
    assert g.base_frame_offset == base_frame_offset(g.samples_per_pixel, g.n_frames)


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(grids())
def test_edge_frames_are_cut_to_the_image_and_frames_tile_it_exactly(g):
    covered = np.zeros((g.image_length, g.image_width), dtype=np.int64)
    for row in range(g.tiles_down):
        for col in range(g.tiles_across):
            h, w = g.edge_size(row, col)
            assert 1 <= h <= g.tile_length and 1 <= w <= g.tile_width
            y0, x0 = row * g.tile_length, col * g.tile_width
            assert y0 + h <= g.image_length and x0 + w <= g.image_width
            covered[y0:y0 + h, x0:x0 + w] += 1
    assert (covered == 1).all()


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(grids())
def test_frame_samples_array_matches_the_per_frame_shapes(g):
    arr = g.frame_samples_array
    assert arr.dtype == np.int64 and arr.shape == (g.n_frames,)
    slow = [int(np.prod(g.frame_shape(k))) for k in range(g.n_frames)]
    assert arr.tolist() == slow == [g.frame_samples(k) for k in range(g.n_frames)]
    assert int(arr.sum()) == g.samples_per_pixel * g.image_length * g.image_width
    for k in range(g.n_frames):
        shape = g.frame_shape(k)
        assert len(shape) == (2 if g.unit == FrameUnit.TILE else 3)
        if g.unit == FrameUnit.CELL:
            assert shape[0] == g.samples_per_pixel


@given(st.integers(1, 2**32 - 1), st.integers(1, 2**32 - 1), st.integers(1, 65535), st.integers(1, 65535),
       st.integers(1, 65535), st.sampled_from([FrameUnit.TILE, FrameUnit.CELL]))
def test_grid_sizes_stay_exact_at_the_largest_header_values(w, h, tw, tl, b, unit):
    g = Grid(w, h, tw, tl, b, unit)
    across, down = -(-w // tw), -(-h // tl)
    assert g.n_frames == across * down * (b if unit == FrameUnit.TILE else 1)
    last = g.n_frames - 1
    row, col, band = g.frame_position(last)
    assert (row, col) == (down - 1, across - 1)
    assert g.frame_index(row, col, band) == last
    assert g.edge_size(row, col) == (h - (down - 1) * tl, w - (across - 1) * tw)


def test_one_band_tile_and_cell_grids_have_the_same_frames_and_base():
    t = Grid(30, 20, 8, 8, 1, FrameUnit.TILE)
    c = Grid(30, 20, 8, 8, 1, FrameUnit.CELL)
    assert t.n_frames == c.n_frames
    assert t.base_frame_offset == c.base_frame_offset
    assert t.frame_samples_array.tolist() == c.frame_samples_array.tolist()
    assert all(t.frame_position(k) == c.frame_position(k) for k in range(t.n_frames))
