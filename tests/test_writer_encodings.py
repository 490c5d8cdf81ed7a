"""rumimm.write: every encoding, frame unit, band count and shape round-trips bit-exactly into a compliant file.

Files are decoded by hand twice (``writer_helpers.decode``: rumimm's blob offsets, then the
offsets the independent ``tests/spec_reader.py`` parses); input arrays in any byte order,
layout or alignment write the same file.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import samples
from writer_helpers import assert_compliant, assert_round_trip, storage_bytes

import rumimm
from rumimm import codec
from rumimm.format.blob import Header
from rumimm.format.dtypes import DTYPES, ENCODINGS, encoding_for_dtype
from rumimm.format.grid import FrameUnit


# -- encodings, units, shapes ------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_encoding_round_trips_bit_exactly_in_tile_and_cell_frames(tmp_path, rng, name):
    a = samples(name, (2, 23, 19), rng)
    for unit in ("tile", "cell"):
        path = tmp_path / f"{name}_{unit}.rumi"
        blob = rumimm.write(path, a, tile=(8, 6), unit=unit, verify=True)
        h = Header.parse(blob)
        assert h.encoding is ENCODINGS[h.encoding.key] and h.dtype == encoding_for_dtype(a.dtype).dtype
        assert h.frame_unit == FrameUnit[unit.upper()]
        assert_compliant(path, blob)
        assert_round_trip(path, blob, a)


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_encoding_reads_back_through_rumimm_open_whole_and_windowed(tmp_path, rng, name):
    a = samples(name, (3, 37, 45), rng)
    for unit in ("tile", "cell"):
        blob = rumimm.write(tmp_path / "o.rumi", a, tile=(16, 20), unit=unit)
        with rumimm.open(tmp_path / "o.rumi", header=blob) as img:
            full, win = img[:], img[1:3, 5:29, 3:17]
        assert full.dtype == a.dtype and np.array_equal(storage_bytes(full), storage_bytes(a))
        assert np.array_equal(storage_bytes(win), storage_bytes(a[1:3, 5:29, 3:17]))


def test_all_28_encodings_are_covered():
    assert len(DTYPES) == 28


def test_nan_payloads_and_signed_zeros_keep_their_bits(tmp_path):
    bits = np.array([0x7FC00000, 0x7FC00001, 0xFFC12345, 0x7F800001, 0x80000000, 0x7F800000], dtype="<u4")
    a = np.resize(bits, (1, 5, 7)).view(np.float32)
    blob = rumimm.write(tmp_path / "nan.rumi", a, tile=4, verify=True)
    assert_round_trip(tmp_path / "nan.rumi", blob, a)


@pytest.mark.parametrize("bands", [1, 4, 5, 13])
@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_band_counts_around_the_inline_thresholds_write_compliant_files(tmp_path, rng, bands, unit):
    a = rng.integers(0, 300, (bands, 21, 26), dtype=np.uint16)
    path = tmp_path / "b.rumi"
    blob = rumimm.write(path, a, tile=(8, 10), unit=unit)
    h = Header.parse(blob)
    assert h.frame_offsets[0] == h.grid.base_frame_offset == os.path.getsize(path) - int(h.frame_byte_counts.sum())
    assert_compliant(path, blob)
    assert_round_trip(path, blob, a)


def test_a_one_band_cell_file_is_recorded_as_tile_frames_like_index_derives_it(tmp_path, rng):
    a = rng.integers(0, 9, (1, 10, 12), dtype=np.uint8)
    tile = rumimm.write(tmp_path / "t.rumi", a, tile=4, unit="tile")
    cell = rumimm.write(tmp_path / "c.rumi", a, tile=4, unit="cell")
    assert tile == cell and Header.parse(cell).frame_unit == FrameUnit.TILE
    assert (tmp_path / "t.rumi").read_bytes() == (tmp_path / "c.rumi").read_bytes()


def test_edge_frames_are_cut_to_the_image_in_both_axes(tmp_path, scene):
    path = tmp_path / "edge.rumi"
    blob = rumimm.write(path, scene, tile=(16, 20))
    h = Header.parse(blob)
    assert (h.grid.tiles_down, h.grid.tiles_across) == (3, 3)
    assert h.grid.frame_shape(h.n_frames - 1) == (37 - 32, 45 - 40)
    assert_round_trip(path, blob, scene)


@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_a_one_by_one_image_is_one_frame_per_band_or_one_cell(tmp_path, unit):
    a = np.array([[[7]], [[9]]], dtype=np.int16)
    path = tmp_path / "px.rumi"
    blob = rumimm.write(path, a, tile=512, unit=unit)
    h = Header.parse(blob)
    assert h.shape == (2, 1, 1) and h.n_frames == (2 if unit == "tile" else 1)
    assert_compliant(path, blob)
    assert_round_trip(path, blob, a)


def test_a_one_frame_file_has_count_bits_zero(tmp_path, rng):
    a = rng.integers(0, 5, (33, 40), dtype=np.uint8)
    path = tmp_path / "one.rumi"
    blob = rumimm.write(path, a, tile=64)
    h = Header.parse(blob)
    assert h.n_frames == 1 and h.count_bits == 0 and len(blob) == 28
    assert_compliant(path, blob)
    assert_round_trip(path, blob, a)


def test_a_2d_array_is_written_as_one_band(tmp_path, rng):
    a = rng.integers(0, 5, (17, 9), dtype=np.int8)
    blob = rumimm.write(tmp_path / "2d.rumi", a, tile=8)
    assert Header.parse(blob).shape == (1, 17, 9)
    assert_round_trip(tmp_path / "2d.rumi", blob, a)


def test_rectangular_tiles_take_tile_length_then_tile_width(tmp_path, scene):
    blob = rumimm.write(tmp_path / "r.rumi", scene, tile=(16, 32))
    h = Header.parse(blob)
    assert (h.tile_length, h.tile_width) == (16, 32)
    assert_compliant(tmp_path / "r.rumi", blob)
    assert_round_trip(tmp_path / "r.rumi", blob, scene)


def test_tiles_are_interleaved_all_bands_of_a_position_before_the_next(tmp_path, rng):
    # each band is constant with a different value: frame k must hold band k % B
    a = np.stack([np.full((8, 8), v, np.uint8) for v in (11, 22, 33)])
    path = tmp_path / "order.rumi"
    blob = rumimm.write(path, a, tile=4)
    h = Header.parse(blob)
    data = np.fromfile(path, dtype=np.uint8)
    dec = codec.FrameDecoder()
    firsts = [int(dec.decode(data[int(h.frame_offsets[k]) : int(h.frame_offsets[k + 1])], h.encoding, 16)[0])
              for k in range(h.n_frames)]
    assert firsts == [11, 22, 33] * 4


def test_big_endian_input_is_stored_little_endian(tmp_path, scene):
    le = rumimm.write(tmp_path / "le.rumi", scene, tile=16)
    be = rumimm.write(tmp_path / "be.rumi", scene.astype(">u2"), tile=16)
    assert le == be and (tmp_path / "le.rumi").read_bytes() == (tmp_path / "be.rumi").read_bytes()


def test_big_endian_structured_complex_input_is_stored_little_endian(tmp_path, rng):
    a = samples("complex_int16", (1, 6, 5), rng)
    be = a.astype([("real", ">i2"), ("imag", ">i2")])
    blob = rumimm.write(tmp_path / "c.rumi", be, tile=4)
    assert_round_trip(tmp_path / "c.rumi", blob, a)


def test_a_non_contiguous_view_writes_the_same_file_as_its_copy(tmp_path, rng):
    big = rng.integers(0, 1000, (4, 40, 50), dtype=np.uint16)
    view = big[::2, 3:30, ::-2]
    rumimm.write(tmp_path / "v.rumi", view, tile=8)
    rumimm.write(tmp_path / "c.rumi", np.ascontiguousarray(view), tile=8)
    assert (tmp_path / "v.rumi").read_bytes() == (tmp_path / "c.rumi").read_bytes()


def test_misaligned_input_memory_is_written_like_aligned_input(tmp_path, scene):
    raw = bytearray(scene.nbytes + 1)
    odd = np.ndarray(scene.shape, scene.dtype, buffer=raw, offset=1)  # samples at odd addresses
    odd[...] = scene
    assert not odd.flags.aligned
    blob = rumimm.write(tmp_path / "o.rumi", odd, tile=(16, 45))
    assert blob == rumimm.write(tmp_path / "a.rumi", scene, tile=(16, 45))
    assert (tmp_path / "o.rumi").read_bytes() == (tmp_path / "a.rumi").read_bytes()
