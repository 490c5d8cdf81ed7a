"""rumimm.write and rumimm.Writer: every encoding round-trips, the files are compliant, atomic and deterministic.

Files are decoded by hand twice: with rumimm's ``Header.parse(blob).offsets`` and
with the offsets that the independent ``tests/spec_reader.py`` parses from the IFD,
each frame through ``codec.FrameDecoder``.  Images are small, with ragged edge
frames in both axes so order and cut bugs show.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest
import spec_reader
from conftest import UTM33N, WGS84, samples

import rumimm
import rumimm.writer.writer as W
from rumimm.writer import atomic, frame_job
from rumimm.writer import args as W_ARGS
from rumimm import codec
from rumimm.format.blob import Header
from rumimm.format.dtypes import DTYPES, ENCODINGS, encoding_for_dtype
from rumimm.errors import CodecError, CRSError, RumiError, RumiWarning
from rumimm.format.grid import FrameUnit
from rumimm import index
from rumimm import validate  # the public names: rumimm.index, rumimm.validate

# -- helpers ---------------------------------------------------------------------------
def storage_bytes(a: np.ndarray) -> np.ndarray:
    """What a frame stores for ``a``: its bytes, one per sub-byte sample."""
    return np.ascontiguousarray(a).view(np.uint8)


def decode(path, blob, offsets=None) -> np.ndarray:
    """Rebuild the (B, Y, X) storage bytes of a file frame by frame with codec.FrameDecoder."""
    h = Header.parse(blob)
    g, enc = h.grid, h.encoding
    offs = h.offsets if offsets is None else np.asarray(offsets, dtype=np.uint64)
    data = np.fromfile(path, dtype=np.uint8)
    out = np.zeros(h.shape, dtype=enc.storage_dtype)
    dec = codec.FrameDecoder()
    for k in range(h.n_frames):
        row, col, band = g.frame_position(k)
        hh, ww = g.edge_size(row, col)
        flat = dec.decode(data[int(offs[k]) : int(offs[k + 1])], enc, g.frame_samples(k), index=k)
        y0, x0 = row * g.tile_length, col * g.tile_width
        if g.unit == FrameUnit.TILE:
            out[band, y0 : y0 + hh, x0 : x0 + ww] = flat.reshape(hh, ww)
        else:
            out[:, y0 : y0 + hh, x0 : x0 + ww] = flat.reshape(g.samples_per_pixel, hh, ww)
    return out.view(np.uint8)


def spec_offsets(path) -> list[int]:
    """Frame offsets (length N + 1) from the independent spec reader."""
    frames = spec_reader.parse_file(path)["frames"]
    return [off for off, _ in frames] + [frames[-1][0] + frames[-1][1]]


def assert_compliant(path, blob) -> None:
    assert index(path) == blob
    report = validate(path, header=blob)
    assert report.ok, report.violations
    assert report.format_version == codec.DEFAULT_FORMAT_VERSION
    assert spec_reader.check_file(path, blob) == []
    assert spec_reader.blob_from_file(path) == blob


def assert_round_trip(path, blob, array) -> None:
    a = array if array.ndim == 3 else array[np.newaxis]
    want = storage_bytes(a)
    assert np.array_equal(decode(path, blob), want)
    assert np.array_equal(decode(path, blob, spec_offsets(path)), want)


def no_temp_files(directory) -> bool:
    return not [n for n in os.listdir(directory) if n.endswith(".tmp")]


@pytest.fixture
def scene(rng):
    """(3, 37, 45) uint16 with ragged edges for 16 x 20 tiles and frames of unequal size."""
    a = rng.integers(0, 4000, (3, 37, 45), dtype=np.uint16)
    a[1] //= 64  # compresses better than band 0: unequal frame sizes
    return a


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
    assert h.offsets[0] == h.grid.base_frame_offset == os.path.getsize(path) - int(h.counts.sum())
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
    firsts = [int(dec.decode(data[int(h.offsets[k]) : int(h.offsets[k + 1])], h.encoding, 16)[0])
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


# -- georeferencing ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("crs", "transform", "geographic"),
    [(32633, UTM33N, False), ("EPSG:4326", WGS84, True)],
)
def test_georeferenced_files_carry_the_epsg_code_and_transform(tmp_path, scene, crs, transform, geographic):
    path = tmp_path / "geo.rumi"
    blob = rumimm.write(path, scene, tile=16, transform=transform, crs=crs, pixel_is_point=geographic)
    assert_compliant(path, blob)
    g = validate(path).georef
    assert g.epsg == int(str(crs).removeprefix("EPSG:")) and g.geographic is geographic
    assert g.transform == transform and g.pixel_is_point is geographic
    assert spec_reader.parse_file(path)["georef"] is not None


@pytest.mark.parametrize(("crs", "model", "key"), [
    (4087, 1, 3072),  # WGS 84 / World Equidistant Cylindrical: projected, among geographic-looking codes
    (3824, 2, 2048),  # TWD97: geographic, among projected-looking codes
    (4258, 2, 2048),
    (2056, 1, 3072),
])
def test_the_model_type_and_crs_key_come_from_the_epsg_registry(tmp_path, scene, crs, model, key):
    path = tmp_path / "k.rumi"
    blob = rumimm.write(path, scene, tile=16, transform=UTM33N, crs=crs)
    keys = spec_reader.parse_file(path)["geokeys"]
    assert keys == (1, 1, 0, 3, 1024, 0, 1, model, 1025, 0, 1, 1, key, 0, 1, crs)
    assert_compliant(path, blob)


def test_a_pyproj_crs_and_an_affine_are_accepted(tmp_path, scene):
    import pyproj
    from affine import Affine

    blob = rumimm.write(tmp_path / "a.rumi", scene, tile=16, transform=Affine(*UTM33N), crs=pyproj.CRS(32633))
    assert validate(tmp_path / "a.rumi").georef.transform == UTM33N
    assert blob == rumimm.write(tmp_path / "b.rumi", scene, tile=16, transform=UTM33N, crs=32633)


def test_without_georeferencing_the_undefined_matrix_and_model_type_zero_are_stored(tmp_path, scene):
    path = tmp_path / "plain.rumi"
    blob = rumimm.write(path, scene, tile=16, pixel_is_point=True)
    assert_compliant(path, blob)
    g = validate(path).georef
    assert g.epsg is None and g.transform is None and g.pixel_is_point
    f = spec_reader.parse_file(path)
    assert tuple(f["matrix"]) == spec_reader.UNDEFINED_MATRIX and f["geokeys"][7] == 0


# -- every byte before the first frame, from the spec text alone -------------------------
def spec_prefix(shape, tile, unit, bps, sf, counts, transform=None, model=0, epsg=0, raster=1) -> bytes:
    """The BigTIFF header, IFD and external values exactly as the spec places them."""
    import struct

    b, y, x = shape
    tl, tw = tile
    g = -(-x // tw) * -(-y // tl)
    n = g * b if unit == "tile" else g
    base = 252 + (2 * b if b >= 5 else 0) * 2 + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0) + 128 + 32
    offsets = [base + sum(counts[:k]) for k in range(n)]
    if transform is None:  # Undefined georeferencing
        matrix = (1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
    else:
        xr, rr, x0, cr, yr, y0 = transform
        matrix = (xr, rr, 0, x0, cr, yr, 0, y0, 0, 0, 0, 0, 0, 0, 0, 1)
    crs_key = 3072 if model == 1 else 2048
    keys = (1, 1, 0, 3, 1024, 0, 1, model, 1025, 0, 1, raster, crs_key, 0, 1, epsg)
    tags = [  # tag, type, count, value bytes: the Fixed IFD table
        (256, 4, 1, struct.pack("<I", x)),
        (257, 4, 1, struct.pack("<I", y)),
        (258, 3, b, struct.pack(f"<{b}H", *[bps] * b)),
        (277, 3, 1, struct.pack("<H", b)),
        (322, 3, 1, struct.pack("<H", tw)),
        (323, 3, 1, struct.pack("<H", tl)),
        (324, 16, n, struct.pack(f"<{n}Q", *offsets)),
        (325, 4, n, struct.pack(f"<{n}I", *counts)),
        (339, 3, b, struct.pack(f"<{b}H", *[sf] * b)),
        (34264, 12, 16, struct.pack("<16d", *matrix)),
        (34735, 3, 16, struct.pack("<16H", *keys)),
    ]
    out = spec_reader.lay_out_ifd(tags)  # the independent struct-based reader's layout
    assert len(out) == base
    return out


SPEC_LAYOUTS = [  # (B, Y, X), (tile_length, tile_width), unit
    ((1, 1, 1), (16, 16), "tile"),
    ((3, 1, 1), (512, 512), "cell"),
    ((2, 5, 7), (16, 16), "tile"),
    ((1, 30, 45), (13, 13), "tile"),
    ((4, 32, 48), (16, 16), "cell"),
    ((5, 20, 9), (8, 8), "tile"),
    ((7, 17, 17), (8, 8), "cell"),
    ((1, 9, 20), (10, 10), "tile"),  # N = 2: TileOffsets external, TileByteCounts inline
    ((1, 9, 30), (10, 10), "tile"),  # N = 3: both external
    ((2, 9, 30), (10, 10), "cell"),
    ((40, 6, 5), (4, 4), "tile"),
    ((40, 3, 3), (4, 4), "cell"),  # B = 40, N = 1
    ((3, 21, 50), (8, 32), "tile"),  # non-square tiles, both ways
    ((6, 40, 9), (32, 8), "cell"),
    ((1, 7, 70), (5, 16), "tile"),
]
SPEC_GEOREFS = [  # write kwargs, (model, epsg, raster) the spec asks for
    ({}, (0, 0, 1)),
    ({"pixel_is_point": True}, (0, 0, 2)),
    ({"crs": 32633, "transform": UTM33N}, (1, 32633, 1)),
    ({"crs": "EPSG:4326", "transform": WGS84, "pixel_is_point": True}, (2, 4326, 2)),
    ({"crs": 3857, "transform": (30.0, 0.5, -2e6, 0.25, -30.0, 5e6)}, (1, 3857, 1)),
]


@pytest.mark.parametrize("shape, tile, unit", SPEC_LAYOUTS, ids=str)
def test_every_byte_before_the_first_frame_is_the_spec_layout(tmp_path, rng, shape, tile, unit):
    a = rng.integers(0, 2000, shape, dtype=np.int32)
    for kwargs, (model, epsg, raster) in SPEC_GEOREFS:
        path = tmp_path / "s.rumi"
        blob = rumimm.write(path, a, tile=tile, unit=unit, **kwargs)
        counts = [int(c) for c in Header.parse(blob).counts]
        data = path.read_bytes()
        want_unit = "tile" if shape[0] == 1 else unit  # one band: the writer records tile frames
        want = spec_prefix(shape, tile, want_unit, 32, 2, counts, kwargs.get("transform"), model, epsg, raster)
        assert data[: len(want)] == want, kwargs
        assert len(data) == len(want) + sum(counts)  # frames follow at once, back to back, nothing after
        assert spec_reader.check_file(path, blob) == []


# -- determinism --------------------------------------------------------------------------
# pinned with the default codec (codec.DEFAULT_PRESETS["uint16"]) at format version 24; it changes only
# with a deliberate change of the writer, the default preset or openzl
GOLDEN_SHA256 = "d5f094637dc8b85575e14f1a8805f6bb67961a996f1f02f2bf7a98e3248639b5"


def golden_scene() -> np.ndarray:
    y, x = np.mgrid[0:24, 0:30]
    return np.stack([(y * 31 + x * 7) % 251, (y * x) % 97, (y + 2 * x) % 13]).astype(np.uint16)


def test_the_same_input_writes_the_same_bytes(tmp_path, scene):
    a = rumimm.write(tmp_path / "a.rumi", scene, tile=(16, 20), transform=UTM33N, crs=32633)
    b = rumimm.write(tmp_path / "b.rumi", scene.copy(), tile=(16, 20), transform=UTM33N, crs=32633)
    assert a == b and (tmp_path / "a.rumi").read_bytes() == (tmp_path / "b.rumi").read_bytes()


def test_a_small_default_codec_file_matches_its_golden_sha256(tmp_path):
    path = tmp_path / "golden.rumi"
    rumimm.write(path, golden_scene(), tile=16, transform=UTM33N, crs=32633)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == GOLDEN_SHA256


def test_the_format_version_is_pinned_and_can_be_chosen(tmp_path, scene):
    rumimm.write(tmp_path / "d.rumi", scene, tile=16)
    assert validate(tmp_path / "d.rumi").format_version == 24
    blob = rumimm.write(tmp_path / "v.rumi", scene, tile=16, format_version=codec.MAX_FORMAT_VERSION)
    rep = validate(tmp_path / "v.rumi", header=blob, decode=True)
    assert rep.ok and rep.format_version == codec.MAX_FORMAT_VERSION
    assert_round_trip(tmp_path / "v.rumi", blob, scene)


@pytest.mark.parametrize("preset", ["delta", "transpose", "generic", "store"])
def test_named_codec_presets_write_lossless_compliant_files(tmp_path, scene, preset):
    path = tmp_path / f"{preset}.rumi"
    blob = rumimm.write(path, scene, tile=16, codec=preset, verify=True)
    assert_compliant(path, blob)
    assert_round_trip(path, blob, scene)


# -- streaming Writer ---------------------------------------------------------------------
def test_the_writer_streams_rows_and_returns_the_blob_on_close(tmp_path, scene):
    path = tmp_path / "s.rumi"
    with rumimm.Writer(path, scene.shape, scene.dtype, tile=(16, 20), unit="cell") as w:
        assert w.rows == 3 and w.row_span(2) == (32, 37)
        for r in range(w.rows):
            y0, y1 = w.row_span(r)
            w.write_row(r, scene[:, y0:y1])
    assert w.closed and w.header == index(path)
    assert w.header == rumimm.write(tmp_path / "w.rumi", scene, tile=(16, 20), unit="cell")
    assert path.read_bytes() == (tmp_path / "w.rumi").read_bytes()


def test_the_writer_keeps_at_most_one_finished_row_of_frames_unwritten(tmp_path, rng):
    a = rng.integers(0, 50, (2, 40, 24), dtype=np.uint8)
    w = rumimm.Writer(tmp_path / "m.rumi", a.shape, a.dtype, tile=8)
    per_row = w.grid.tiles_across * 2
    for r in range(w.rows):
        w.write_row(r, a[:, slice(*w.row_span(r))])
        # rows before r are on disk, row r is the only one in flight
        assert int(np.count_nonzero(w.counts)) == r * per_row
    assert_round_trip(tmp_path / "m.rumi", w.close(), a)


def test_rows_out_of_order_are_refused_and_the_writer_stays_usable(tmp_path, scene):
    w = rumimm.Writer(tmp_path / "o.rumi", scene.shape, scene.dtype, tile=16)
    with pytest.raises(RumiError, match="row 1 arrived out of order.*expected row 0"):
        w.write_row(1, scene[:, 16:32])
    with pytest.raises(RumiError, match=r"block has shape \(3, 15, 45\), expected \(B, h, X\) = \(3, 16, 45\)"):
        w.write_row(0, scene[:, :15])
    with pytest.raises(RumiError, match="block dtype is float32"):
        w.write_row(0, scene[:, :16].astype(np.float32))
    for r in range(w.rows):
        w.write_row(r, scene[:, slice(*w.row_span(r))])
    assert_round_trip(tmp_path / "o.rumi", w.close(), scene)


def test_closing_before_every_row_raises_and_leaves_no_file(tmp_path, scene):
    path = tmp_path / "short.rumi"
    w = rumimm.Writer(path, scene.shape, scene.dtype, tile=16)
    w.write_row(0, scene[:, :16])
    with pytest.raises(RumiError, match="only 1 of 3 grid rows were written"):
        w.close()
    assert not path.exists() and no_temp_files(tmp_path)
    with pytest.raises(RumiError, match="writer is closed"):
        w.write_row(1, scene[:, 16:32])


def test_an_exception_inside_the_with_block_discards_the_file(tmp_path, scene):
    path = tmp_path / "x.rumi"
    path.write_bytes(b"old contents")
    with pytest.raises(ZeroDivisionError):
        with rumimm.Writer(path, scene.shape, scene.dtype, tile=16) as w:
            w.write_row(0, scene[:, :16])
            1 / 0
    assert path.read_bytes() == b"old contents" and no_temp_files(tmp_path)
    assert w.closed and w.header is None


def test_write_reads_its_source_one_row_of_tiles_at_a_time(tmp_path, scene):
    class Source:
        """An array-like that records the slices read from it."""

        shape, dtype = scene.shape, scene.dtype
        reads: list = []

        def __getitem__(self, key):
            self.reads.append(key)
            return scene[key]

    src = Source()
    blob = rumimm.write(tmp_path / "src.rumi", src, tile=16)
    assert [k[1] for k in src.reads] == [slice(0, 16), slice(16, 32), slice(32, 37)]
    assert_round_trip(tmp_path / "src.rumi", blob, scene)


def test_a_memmap_streams_to_the_same_file_as_the_array(tmp_path, scene):
    mm = np.memmap(tmp_path / "raw.bin", dtype=scene.dtype, mode="w+", shape=scene.shape)
    mm[:] = scene
    mm.flush()
    ro = np.memmap(tmp_path / "raw.bin", dtype=scene.dtype, mode="r", shape=scene.shape)
    assert rumimm.write(tmp_path / "mm.rumi", ro, tile=16) == rumimm.write(tmp_path / "a.rumi", scene, tile=16)
    assert (tmp_path / "mm.rumi").read_bytes() == (tmp_path / "a.rumi").read_bytes()


def test_a_memmap_much_larger_than_a_row_is_written_in_bounded_memory(tmp_path, rng):
    import tracemalloc

    shape = (2, 2048, 1024)  # 8 MiB of uint16; one row of 64-pixel tiles is 256 KiB
    mm = np.memmap(tmp_path / "big.bin", dtype=np.uint16, mode="w+", shape=shape)
    mm[:] = rng.integers(0, 1000, shape[1:], dtype=np.uint16)
    mm.flush()
    del mm
    src = np.memmap(tmp_path / "big.bin", dtype=np.uint16, mode="r", shape=shape)
    tracemalloc.start()
    try:
        blob = rumimm.write(tmp_path / "big.rumi", src, tile=64, threads=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20) + 4 * 256 * 1024  # the 1 MiB file buffer and a few rows, never the 8 MiB image
    assert_round_trip(tmp_path / "big.rumi", blob, np.asarray(src))


# -- atomicity --------------------------------------------------------------------------
def _failing_encode(fail_at: int, exc: BaseException):
    original = codec.FrameEncoder.encode
    calls = {"n": 0}

    def encode(self, frame):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise exc
        return original(self, frame)

    return encode


def test_a_codec_error_mid_file_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    path = tmp_path / "keep.rumi"
    old = rumimm.write(path, scene[:1], tile=16)
    before = path.read_bytes()
    monkeypatch.setattr(codec.FrameEncoder, "encode", _failing_encode(5, CodecError("boom")))
    with pytest.raises(CodecError, match="frame 4 of 27: boom"):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == before and index(path) == old and no_temp_files(tmp_path)


def test_an_unexpected_codec_exception_becomes_a_codec_error_naming_the_frame(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(codec.FrameEncoder, "encode", _failing_encode(2, RuntimeError("native failure")))
    with pytest.raises(CodecError, match="frame 1 of 27 failed to compress: native failure"):
        rumimm.write(tmp_path / "e.rumi", scene, tile=16)
    assert not (tmp_path / "e.rumi").exists() and no_temp_files(tmp_path)


def test_a_keyboard_interrupt_mid_file_leaves_no_partial_file(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(codec.FrameEncoder, "encode", _failing_encode(10, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        rumimm.write(tmp_path / "k.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_a_full_disk_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    path = tmp_path / "disk.rumi"
    path.write_bytes(b"previous")
    real = atomic.AtomicFile.__init__

    def init(self, p):
        real(self, p)
        fh = self.fh

        class Full:
            def __getattr__(self, name):
                return getattr(fh, name)

            def write(self, data):
                raise OSError(28, "No space left on device")

        self.fh = Full()

    monkeypatch.setattr(atomic.AtomicFile, "__init__", init)
    with pytest.raises(OSError, match="No space left"):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == b"previous" and no_temp_files(tmp_path)


def test_a_failed_rename_leaves_no_temporary_file(tmp_path, scene, monkeypatch):
    def replace(src, dst):
        raise PermissionError(13, "denied", dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(PermissionError):
        rumimm.write(tmp_path / "r.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_a_failure_while_finishing_the_file_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    # everything is compressed and on disk in the temporary file when the prefix fails
    path = tmp_path / "late.rumi"
    old = rumimm.write(path, scene[:1], tile=16)
    before = path.read_bytes()

    def broken_prefix(*args, **kwargs):
        raise ValueError("georeferencing found bad at the last moment")

    monkeypatch.setattr(W, "build_prefix", broken_prefix)
    with pytest.raises(ValueError, match="at the last moment"):
        rumimm.write(path, scene, tile=16, transform=UTM33N, crs=32633)
    assert path.read_bytes() == before and index(path) == old and no_temp_files(tmp_path)


def test_a_keyboard_interrupt_while_syncing_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    path = tmp_path / "sync.rumi"
    path.write_bytes(b"previous")

    def fsync(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    with pytest.raises(KeyboardInterrupt):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == b"previous" and no_temp_files(tmp_path)


def test_a_writer_dropped_without_close_leaves_nothing_behind(tmp_path, scene):
    import gc

    w = rumimm.Writer(tmp_path / "dropped.rumi", scene.shape, scene.dtype, tile=16)
    w.write_row(0, scene[:, :16])
    assert len(os.listdir(tmp_path)) == 1  # the temporary file
    del w
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_frames_that_do_not_end_where_the_counts_say_are_never_committed(tmp_path, scene, monkeypatch):
    path = tmp_path / "gap.rumi"
    path.write_bytes(b"previous")
    real = W.Writer._flush_one

    def flush_with_a_stray_byte(self):
        real(self)
        self._file.fh.write(b"\0")  # a gap the counts do not know about

    monkeypatch.setattr(W.Writer, "_flush_one", flush_with_a_stray_byte)
    with pytest.raises(RumiError, match="internal error: 27 of 27 frames end at byte"):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == b"previous" and no_temp_files(tmp_path)


def test_a_frame_that_compresses_to_nothing_is_refused(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(codec.FrameEncoder, "encode", lambda self, frame: b"")
    with pytest.raises(CodecError, match="frame 0 of 27 compressed to 0 bytes; every frame must be non-empty"):
        rumimm.write(tmp_path / "z.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_a_frame_larger_than_a_tile_byte_count_can_hold_is_refused(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(frame_job, "MAX_COUNT", 20)  # stands in for 2**32 - 1: TileByteCounts is LONG
    with pytest.raises(RumiError, match="frame 0 of 27 compressed to .* bytes, more than the 20 a TileByteCounts"):
        rumimm.write(tmp_path / "o.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_verify_catches_a_frame_that_does_not_decode_to_its_samples(tmp_path, scene, monkeypatch):
    original = codec.FrameEncoder.encode

    def lossy(self, frame):
        return original(self, np.zeros_like(frame))

    monkeypatch.setattr(codec.FrameEncoder, "encode", lossy)
    with pytest.raises(CodecError, match="frame 0 of 27 does not decode to the samples written"):
        rumimm.write(tmp_path / "v.rumi", scene, tile=16, verify=True)
    assert os.listdir(tmp_path) == []


def test_a_file_name_near_the_length_limit_is_written(tmp_path, scene):
    path = tmp_path / ("n" * 245 + ".rumi")  # 250 bytes: the temporary name must not exceed 255
    blob = rumimm.write(path, scene, tile=16)
    assert index(path) == blob and os.listdir(tmp_path) == [path.name]


def test_the_written_file_gets_the_usual_permissions(tmp_path, scene):
    rumimm.write(tmp_path / "p.rumi", scene, tile=16)
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "p.rumi").stat().st_mode & 0o777 == 0o666 & ~mask


# -- argument checks ---------------------------------------------------------------------
def _huge(shape, dtype=np.uint8):
    return np.broadcast_to(np.zeros(1, dtype), shape)  # no memory behind it


@pytest.mark.parametrize(
    ("array", "error", "match"),
    [
        (np.zeros(5, np.uint8), RumiError, "2-D .* or 3-D .*, got 1-D"),
        (np.zeros((1, 2, 3, 4), np.uint8), RumiError, "got 4-D"),
        (np.zeros((2, 0, 3), np.uint8), RumiError, "must not be empty"),
        (_huge((65536, 1, 1)), RumiError, "band count B must be <= 65535, got 65536"),
        (_huge((1, 2**32, 1)), RumiError, "height and width must be <= 4294967295"),
        (np.zeros((2, 2), dtype=object), RumiError, "dtype object has no rumi sample encoding"),
        (np.zeros((2, 2), dtype=np.complex256), RumiError, "has no rumi sample encoding"),
    ],
)
def test_bad_arrays_are_refused_before_any_file_is_made(tmp_path, array, error, match):
    with pytest.raises(error, match=match):
        rumimm.write(tmp_path / "bad.rumi", array)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"tile": 0}, ValueError, r"tile must be in \[1, 65535\], got 0"),
        ({"tile": 65536}, ValueError, r"tile must be in \[1, 65535\], got 65536"),
        ({"tile": (16, 0)}, ValueError, "got 0"),
        ({"tile": (1, 2, 3)}, TypeError, "tile must be an int or a"),
        ({"tile": 16.0}, TypeError, "tile must be an int or a"),
        ({"tile": True}, TypeError, "tile must be an int"),
        ({"unit": "band"}, ValueError, "unit must be 'tile' or 'cell'"),
        ({"transform": UTM33N}, ValueError, "transform was given without crs"),
        ({"crs": 32633}, ValueError, "crs was given without transform"),
        ({"transform": (1, 0, 0, 0, float("nan"), 0), "crs": 32633}, ValueError, "coefficients must be finite"),
        ({"transform": (1, 0, 0, 0, 1), "crs": 32633}, ValueError, "transform must have 6 or 9 coefficients"),
        ({"transform": UTM33N, "crs": "+proj=utm +zone=33"}, CRSError, "is not an EPSG code"),
        ({"transform": UTM33N, "crs": 5773}, CRSError, "(?i)vertical"),
        ({"transform": UTM33N, "crs": 99999}, CRSError, "outside 1024..32766"),
        ({"transform": UTM33N, "crs": 1023}, CRSError, "outside 1024..32766"),
        ({"transform": UTM33N, "crs": 32767}, CRSError, "outside 1024..32766"),
        ({"transform": UTM33N, "crs": 1025}, CRSError, "EPSG:1025 is not defined in the EPSG registry"),
        ({"transform": UTM33N, "crs": 4978}, CRSError, "(?i)geocentric"),
        ({"transform": UTM33N, "crs": 7415}, CRSError, "(?i)compound"),
        ({"transform": UTM33N, "crs": "ESRI:54009"}, CRSError, "is not an EPSG code"),
        ({"transform": UTM33N, "crs": 'GEOGCS["WGS 84",DATUM["WGS_1984"]]'}, CRSError, "is not an EPSG code"),
        ({"pixel_is_point": "yes"}, TypeError, "pixel_is_point must be True or False"),
        ({"codec": "zip"}, ValueError, "codec 'zip' is not a preset"),
        ({"format_version": 99}, ValueError, "format_version must be an int in .*got 99"),
        ({"format_version": 10}, ValueError, "format_version must be an int in"),
        ({"format_version": 24.0}, TypeError, "format_version must be an int"),
        ({"threads": 0}, ValueError, "threads must be >= 1, got 0"),
        ({"threads": "2"}, TypeError, "threads must be a positive int"),
    ],
)
def test_bad_arguments_are_refused_by_name_before_any_file_is_made(tmp_path, scene, kwargs, error, match):
    with pytest.raises(error, match=match):
        rumimm.write(tmp_path / "bad.rumi", scene, **kwargs)
    assert os.listdir(tmp_path) == []


def test_a_directory_path_is_refused(tmp_path, scene):
    with pytest.raises(IsADirectoryError):
        rumimm.write(tmp_path, scene)
    assert os.listdir(tmp_path) == []


def _never_compress(monkeypatch):
    def encode(self, frame):
        raise AssertionError("compressed before the argument was refused")

    monkeypatch.setattr(codec.FrameEncoder, "encode", encode)


def test_an_empty_path_fails_before_anything_is_compressed(tmp_path, scene, monkeypatch):
    _never_compress(monkeypatch)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="an empty path names no file"):
        rumimm.write("", scene)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("empty", ["", b""], ids=["str", "bytes"])
def test_write_and_clean_refuse_an_empty_path_alike(tmp_path, scene, monkeypatch, empty):
    _never_compress(monkeypatch)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as by_write:
        rumimm.write(empty, scene)
    with pytest.raises(FileNotFoundError) as by_clean:
        rumimm.clean(empty)
    assert str(by_write.value) == str(by_clean.value) and by_write.value.filename == by_clean.value.filename == ""
    assert os.listdir(tmp_path) == []


def test_write_and_clean_take_a_bytes_path_alike(tmp_path, scene):
    path = os.fsencode(tmp_path / "b.rumi")
    blob = rumimm.write(path, scene, tile=16)
    assert rumimm.index(tmp_path / "b.rumi") == blob and rumimm.clean(path) == []


def test_a_missing_directory_is_reported_with_the_users_path(tmp_path, scene, monkeypatch):
    _never_compress(monkeypatch)
    path = tmp_path / "no" / "such" / "dir" / "x.rumi"
    with pytest.raises(FileNotFoundError) as info:
        rumimm.write(path, scene)
    assert info.value.filename == str(path) and "rumimm-" not in str(info.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(("shape", "tile", "unit"), [((1, 30000, 30000), 30000, "tile"),
                                                     ((2, 20000, 20000), 20000, "cell")])
def test_a_tile_larger_than_openzl_compresses_is_refused_up_front(tmp_path, monkeypatch, shape, tile, unit):
    _never_compress(monkeypatch)
    with pytest.raises(ValueError, match=rf"more than the {W_ARGS.MAX_FRAME_BYTES} OpenZL compresses"):
        rumimm.write(tmp_path / "t.rumi", _huge(shape), tile=tile, unit=unit)
    assert os.listdir(tmp_path) == []
    # the limit is on the largest frame, which an image smaller than the tile cuts down
    rumimm.Writer(tmp_path / "small.rumi", (1, 100, 100), np.uint8, tile=30000).abort()


def test_writing_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path, scene):
    target = tmp_path / "data" / "real.rumi"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.rumi"
    link.symlink_to(target)
    blob = rumimm.write(link, scene, tile=16)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert index(target) == blob and os.listdir(target.parent) == ["real.rumi"]
    dangling = tmp_path / "dangling.rumi"
    dangling.symlink_to(tmp_path / "data" / "new.rumi")
    rumimm.write(dangling, scene, tile=16)
    assert dangling.is_symlink() and index(tmp_path / "data" / "new.rumi") == blob


def test_replacing_a_file_keeps_its_permission_bits(tmp_path, scene):
    path = tmp_path / "ro.rumi"
    rumimm.write(path, scene[:1], tile=16)
    path.chmod(0o444)
    rumimm.write(path, scene, tile=16)
    assert path.stat().st_mode & 0o777 == 0o444
    path.chmod(0o640)
    rumimm.write(path, scene, tile=16)
    assert path.stat().st_mode & 0o777 == 0o640


def test_progress_advances_once_per_row_of_tiles(tmp_path, scene):
    seen = []
    rumimm.write(tmp_path / "p.rumi", scene, tile=16, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    with pytest.raises(TypeError, match="progress must be None, a bool or a callable"):
        rumimm.write(tmp_path / "q.rumi", scene, progress="yes")
    assert os.listdir(tmp_path) == ["p.rumi"]


def test_progress_true_draws_a_bar_on_stderr(tmp_path, scene, capsys):
    rumimm.write(tmp_path / "p.rumi", scene, tile=16, progress=True)
    err = capsys.readouterr().err
    assert "write:" in err and "/3 " in err  # a tqdm bar over the 3 rows


# -- the process pool ---------------------------------------------------------------------
def failing_builder(compressor, enc, shape):
    """A picklable codec builder that refuses edge frames (width 5), to fail inside a worker."""
    if shape[-1] == 5:
        raise RuntimeError("edge frames refused")
    return codec.PRESETS["delta"].build(compressor, enc, shape)


def width_key(shape):
    """Graph cache key: one graph per frame width, so the builder sees the edge frames."""
    return shape[-1]


@pytest.fixture
def workers_for_any_size(monkeypatch):
    """Use the encoding workers for every image (the size thresholds are about speed only)."""
    monkeypatch.setattr(W, "PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(W, "PROCESS_START_MIN_BYTES", 0)
    monkeypatch.setattr(W, "_WORKERS_FAILED", False)


@pytest.mark.slow
def test_the_encoding_workers_write_the_same_bytes_as_serial_and_verify(tmp_path, rng, workers_for_any_size):
    a = rng.integers(0, 3000, (3, 70, 45), dtype=np.uint16).astype(">u2")
    serial = rumimm.write(tmp_path / "s.rumi", a, tile=(16, 20), threads=1)
    w = rumimm.Writer(tmp_path / "p.rumi", a.shape, a.dtype, tile=(16, 20), threads=2, verify=True)
    assert w.backend_name == "processes"
    for r in range(w.rows):
        w.write_row(r, a[:, slice(*w.row_span(r))])
    assert w.close() == serial
    assert (tmp_path / "s.rumi").read_bytes() == (tmp_path / "p.rumi").read_bytes()
    assert no_temp_files(tmp_path)

    # incompressible frames outgrow their input: those come back through the socket
    noise = rng.integers(0, 256, (2, 40, 50), dtype=np.uint8)
    assert rumimm.write(tmp_path / "n.rumi", noise, tile=16, threads=2) == rumimm.write(
        tmp_path / "m.rumi", noise, tile=16, threads=1)
    assert (tmp_path / "n.rumi").read_bytes() == (tmp_path / "m.rumi").read_bytes()

    # three processes, cell frames
    assert rumimm.write(tmp_path / "c3.rumi", a, tile=(16, 10), unit="cell", threads=3) == rumimm.write(
        tmp_path / "c1.rumi", a, tile=(16, 10), unit="cell", threads=1)
    assert (tmp_path / "c3.rumi").read_bytes() == (tmp_path / "c1.rumi").read_bytes()

    # an error inside a worker surfaces as a CodecError and leaves no file; the next write works
    bad = codec.Codec("edge-refuser", "test", True, False, True, builder=failing_builder, graph_key=width_key)
    with pytest.raises(CodecError, match="edge frames refused"):
        rumimm.write(tmp_path / "f.rumi", a, tile=(16, 20), threads=2, codec=bad)
    assert not (tmp_path / "f.rumi").exists() and no_temp_files(tmp_path)
    assert rumimm.write(tmp_path / "again.rumi", a, tile=(16, 20), threads=2) == serial


def test_a_killed_worker_falls_back_to_this_process_with_a_warning(tmp_path, scene, workers_for_any_size):
    from rumimm.writer import encode_pool

    serial = rumimm.write(tmp_path / "s.rumi", scene, tile=16, threads=1)
    w = rumimm.Writer(tmp_path / "b.rumi", scene.shape, scene.dtype, tile=16, threads=2)
    assert w.backend_name == "processes"
    for worker in encode_pool._POOL.workers:
        worker.proc.kill()
        worker.proc.wait()
    with pytest.warns(RumiWarning, match="encoding worker process died"):
        for r in range(w.rows):
            w.write_row(r, scene[:, slice(*w.row_span(r))])
        assert w.close() == serial
    assert (tmp_path / "b.rumi").read_bytes() == (tmp_path / "s.rumi").read_bytes()
    assert W._WORKERS_FAILED  # later writes do not try again
    assert rumimm.Writer(tmp_path / "x.rumi", scene.shape, scene.dtype, threads=2).backend_name == "serial"


def test_frames_lost_by_a_worker_that_died_while_storing_abort_the_write(tmp_path, scene, workers_for_any_size,
                                                                          monkeypatch):
    from rumimm.writer import encode_pool

    real = encode_pool.send_message

    def dies_while_storing(sock, msg, fds=()):
        if msg[0] != "task":
            return real(sock, msg, fds)
        backend = writer._backend
        backend._buf[msg[3]] = 1  # what a worker does just before overwriting the frames' input
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(encode_pool, "send_message", dies_while_storing)
    path = tmp_path / "lost.rumi"
    path.write_bytes(b"old")
    writer = rumimm.Writer(path, scene.shape, scene.dtype, tile=16, threads=2)
    lost = "were lost when an encoding worker process died"
    with pytest.warns(RumiWarning), pytest.raises(CodecError, match=lost):
        with writer:
            for r in range(writer.rows):
                writer.write_row(r, scene[:, slice(*writer.row_span(r))])
    assert path.read_bytes() == b"old" and no_temp_files(tmp_path)


def test_small_images_and_one_thread_compress_serially(tmp_path, scene, monkeypatch):
    from rumimm.writer import encode_pool

    big = (4, 4096, 4096)  # 128 MiB of uint16: enough once the workers run, not enough to start them
    for shape, threads in ((scene.shape, 4), (big, 1)):
        with rumimm.Writer(tmp_path / "a.rumi", shape, np.uint16, threads=threads) as w:
            assert w.backend_name == "serial"
            w.abort()
    monkeypatch.setattr(W, "_WORKERS_FAILED", False)
    monkeypatch.setattr(encode_pool, "pool_running", lambda workers: False)
    w = rumimm.Writer(tmp_path / "b.rumi", big, np.uint16, threads=2)
    assert w.backend_name == "serial"
    w.abort()
    monkeypatch.setattr(encode_pool, "pool_running", lambda workers: True)
    w = rumimm.Writer(tmp_path / "c.rumi", big, np.uint16, threads=2)
    assert w.backend_name == "processes"
    w.abort()
    assert os.listdir(tmp_path) == []


def test_a_codec_defined_in_main_or_a_closure_compresses_here(tmp_path, scene, workers_for_any_size):
    def closure_builder(compressor, enc, shape):
        return codec.PRESETS["delta"].build(compressor, enc, shape)

    closure = codec.Codec("closure", "test", True, False, True, builder=closure_builder)
    with rumimm.Writer(tmp_path / "c.rumi", scene.shape, scene.dtype, tile=16, threads=2, codec=closure) as w:
        assert w.backend_name == "serial"
        w.abort()
    assert not W._codec_reaches_workers(type("Main", (), {"__module__": "__main__", "__qualname__": "Main"}))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_workers_and_leaves_the_parents_alone(tmp_path, rng, workers_for_any_size):
    from rumimm.writer import encode_pool

    a = rng.integers(0, 3000, (3, 70, 45), dtype=np.uint16)
    serial = rumimm.write(tmp_path / "s.rumi", a, tile=16, threads=1)
    assert rumimm.write(tmp_path / "p.rumi", a, tile=16, threads=2) == serial
    parents = encode_pool._POOL
    pid = os.fork()
    if pid == 0:  # the child: its own workers, the same bytes
        code = 1
        try:
            ok = rumimm.write(tmp_path / "c.rumi", a, tile=16, threads=2) == serial
            code = 0 if ok and encode_pool._POOL is not parents else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert encode_pool._POOL is parents and parents.usable(1)
    assert rumimm.write(tmp_path / "q.rumi", a, tile=16, threads=2) == serial


def test_long_rows_of_incompressible_frames_do_not_deadlock_the_workers(tmp_path, rng, workers_for_any_size,
                                                                          monkeypatch):
    # tasks and answers both larger than a socket buffer: the worker must keep reading
    # the next row's task while the writer has not yet read the last answer
    import socket
    import threading

    from rumimm.writer import encode_pool

    encode_pool.stop_pool()
    real = socket.socketpair

    def small_buffers(*args):
        pair = real(*args)
        for s in pair:  # what long rows do to the default buffers, with short rows
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        return pair

    monkeypatch.setattr(encode_pool.socket, "socketpair", small_buffers)
    a = rng.integers(0, 256, (1, 8, 160000), dtype=np.uint8)
    result = {}

    def run():
        result["blob"] = rumimm.write(tmp_path / "w.rumi", a, tile=(2, 32), threads=2)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the write did not finish: writer and worker wait for each other"
    assert result["blob"] == rumimm.write(tmp_path / "s.rumi", a, tile=(2, 32), threads=1)
    assert (tmp_path / "w.rumi").read_bytes() == (tmp_path / "s.rumi").read_bytes()
    encode_pool.stop_pool()  # the next test's workers get the usual buffers


def test_an_interrupt_during_a_write_with_workers_leaves_no_file_and_the_next_write_works(tmp_path, scene,
                                                                                          workers_for_any_size,
                                                                                          monkeypatch):
    path = tmp_path / "i.rumi"
    path.write_bytes(b"old")
    serial = rumimm.write(tmp_path / "s.rumi", scene, tile=16, threads=1)
    original = frame_job.FrameJob.encode  # patched here only: the workers keep theirs
    calls = {"n": 0}

    def interrupted(self, k, frame):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self, k, frame)

    monkeypatch.setattr(frame_job.FrameJob, "encode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rumimm.write(path, scene, tile=16, threads=2)
    assert path.read_bytes() == b"old" and no_temp_files(tmp_path)
    monkeypatch.setattr(frame_job.FrameJob, "encode", original)
    assert rumimm.write(path, scene, tile=16, threads=2) == serial
    assert path.read_bytes() == (tmp_path / "s.rumi").read_bytes()


def test_an_application_embedding_python_compresses_here(tmp_path, scene, workers_for_any_size, monkeypatch):
    from rumimm.writer import encode_pool

    encode_pool.stop_pool()
    monkeypatch.setattr(encode_pool.sys, "executable", "/opt/app/bin/render-farm")  # would not run python -c
    with rumimm.Writer(tmp_path / "e.rumi", scene.shape, scene.dtype, tile=16, threads=2) as w:
        assert w.backend_name == "serial"
        w.abort()


_CYCLES_SCRIPT = r"""
import gc, os, sys
import numpy as np
import rumimm
from rumimm.writer import atomic
from rumimm.synthetic import eo_scene
scene = eo_scene(3, 64, 64, dtype="uint16", seed=1)
folder = sys.argv[1]
def fsync(fd):
    raise KeyboardInterrupt
real = atomic.os.fsync
kept = []
for i in range(20):
    atomic.os.fsync = fsync
    try:
        rumimm.write(os.path.join(folder, f"x{i}.rumi"), scene, tile=16)
    except KeyboardInterrupt as exc:
        kept.append(exc)  # the traceback keeps the writer, its encoder and OpenZL contexts in a cycle
    atomic.os.fsync = real
    w = rumimm.Writer(os.path.join(folder, f"y{i}.rumi"), scene.shape, scene.dtype, tile=16)
    w.write_row(0, scene[:, :16])
    w.self = w  # dropped without close, in a cycle
    del w
kept.clear()
gc.collect()
print("ok")
"""


def test_writers_and_encoders_left_in_reference_cycles_are_collected_without_a_crash(tmp_path):
    # the cycle collector used to clear a Compressor and the CCtx referencing it in either order,
    # and OpenZL's extension aborts the process ("intrusive_counter::dec_ref ... underflow")
    script = tmp_path / "cycles.py"
    script.write_text(_CYCLES_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.split() == ["ok"]


def test_an_encoder_closed_frees_its_contexts_and_still_encodes():
    enc = codec.FrameEncoder(None, "uint16")
    frame = np.arange(256, dtype=np.uint16).reshape(16, 16)
    first = enc.encode(frame)
    assert len(enc._contexts) == 1
    enc.close()
    enc.close()
    assert enc._contexts == {}
    assert enc.encode(frame) == first
