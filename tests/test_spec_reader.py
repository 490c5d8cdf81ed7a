"""The independent spec reader accepts what the reference writes and flags what breaks the spec.

``spec_reader`` is the yardstick for rumimm's own tests, so it is checked here against
the reference implementation (files written fresh by ``peer`` and the stored fixtures)
and against hand-made corruptions of those files.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys

import numpy as np
import peer
import pytest
import spec_reader as sr

from rumimm.format.dtypes import DTYPES  # only to make sample arrays; pairs are checked against SPEC_PAIRS

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
sys.path.insert(0, DATA)
import make_fixtures  # noqa: E402

with open(os.path.join(DATA, "manifest.json")) as _f:
    MANIFEST = json.load(_f)

# The spec's Sample encodings table, keyed by the dtype names of rumimm.format.dtypes.DTYPES.
SPEC_PAIRS = {
    "uint2": (1, 2), "uint4": (1, 4), "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
    "int2": (2, 2), "int4": (2, 4), "int8": (2, 8), "int16": (2, 16), "int32": (2, 32), "int64": (2, 64),
    "float16": (3, 16), "float32": (3, 32), "float64": (3, 64),
    "complex64": (6, 64), "complex128": (6, 128),
    "float8_e4m3fn": (100, 8), "float8_e5m2": (101, 8), "bfloat16": (102, 16), "float8_e8m0fnu": (103, 8),
    "float6_e2m3fn": (104, 6), "float6_e3m2fn": (105, 6), "float4_e2m1fn": (106, 4),
}  # fmt: skip


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write(path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _ramp(shape, dtype=np.uint16, seed=0) -> np.ndarray:
    """A band-distinct ramp with noise, so frames compress to unequal sizes."""
    rng = np.random.default_rng(seed)
    b, y, x = np.indices(shape)
    return (x + 2 * y + 50 * b + rng.integers(0, 9, shape)).astype(dtype)


def _sample(name: str, shape, rng) -> np.ndarray:
    """Random samples of dtype ``name`` with valid bit patterns."""
    dtype = DTYPES[name]
    bits = SPEC_PAIRS[name][1]
    if dtype.kind in "ui" and dtype.itemsize * 8 == bits:
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    if dtype.kind in "fc" and dtype.fields is None and dtype.name.startswith(("float", "complex")):
        values = rng.standard_normal(shape) * 100
        if dtype.kind == "c":
            values = values + 1j * rng.standard_normal(shape)
        return values.astype(dtype)
    if dtype.itemsize == 1:  # sub-byte and 8-bit ML types: any low-bits pattern (e8m0: not 0xFF)
        raw = rng.integers(0, min(2**bits, 255), shape, dtype=np.uint8)
        return raw.view(dtype)
    return rng.standard_normal(shape).astype(dtype)  # bfloat16


@pytest.fixture(scope="module")
def four_band_file(tmp_path_factory):
    """A 4-band tile-unit peer file with ragged edges: 3 x 3 grid, 36 frames of unequal size."""
    path = tmp_path_factory.mktemp("peer") / "four.rumi"
    blob = peer.peer_write(path, _ramp((4, 40, 37)), tile=16, unit="tile")
    return path, blob


# --- the stored fixtures ----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_fixture_is_compliant_with_and_without_its_blob(name):
    entry = MANIFEST[name]
    path = os.path.join(DATA, entry["file"])
    blob = _read(os.path.join(DATA, entry["blob"]))
    assert sr.check_file(path) == []
    assert sr.check_file(path, blob=blob) == []


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_fixture_blob_rebuilds_byte_for_byte_from_its_file(name):
    entry = MANIFEST[name]
    blob = _read(os.path.join(DATA, entry["blob"]))
    fields = sr.parse_blob(blob)
    assert sr.blob_from_file(os.path.join(DATA, entry["file"]), frame_unit=fields["frame_unit"]) == blob


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_fixture_matches_its_manifest_digests_and_parameters(name):
    entry = MANIFEST[name]
    path = os.path.join(DATA, entry["file"])
    assert hashlib.sha256(_read(path)).hexdigest() == entry["file_sha256"]
    assert hashlib.sha256(_read(os.path.join(DATA, entry["blob"]))).hexdigest() == entry["blob_sha256"]
    source = make_fixtures.source(name)
    assert hashlib.sha256(source.tobytes()).hexdigest() == entry["source_sha256"]
    f = sr.parse_file(path)
    assert (f["samples_per_pixel"], f["image_length"], f["image_width"]) == tuple(entry["shape"])
    assert (f["tile_length"], f["tile_width"]) == (entry["tile"], entry["tile"])
    assert (f["sample_format"][0], f["bits_per_sample"][0]) == SPEC_PAIRS[entry["dtype"]]


def _frame_windows(f: dict, unit: str):
    """(band slice, y slice, x slice) of every frame in frame-index order, from the spec."""
    bands = f["samples_per_pixel"]
    for row in range(f["tiles_down"]):
        for col in range(f["tiles_across"]):
            ys = slice(row * f["tile_length"], min((row + 1) * f["tile_length"], f["image_length"]))
            xs = slice(col * f["tile_width"], min((col + 1) * f["tile_width"], f["image_width"]))
            if unit == "cell":
                yield slice(0, bands), ys, xs
            else:
                for band in range(bands):
                    yield slice(band, band + 1), ys, xs


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_every_fixture_frame_decodes_with_the_installed_geozl_to_one_numeric_output_of_its_samples(name):
    import geozl
    import openzl.ext as zl

    entry = MANIFEST[name]
    path = os.path.join(DATA, entry["file"])
    data = _read(path)
    f = sr.parse_file(path)
    source = make_fixtures.source(name)
    unit = "cell" if sr.parse_blob(_read(os.path.join(DATA, entry["blob"])))["frame_unit"] == 1 else "tile"
    windows = list(_frame_windows(f, unit))
    assert len(windows) == len(f["frames"])
    for (offset, count), (bs, ys, xs) in zip(f["frames"], windows, strict=True):
        dctx = zl.DCtx()
        geozl.register_decoders(dctx)
        outputs = dctx.decompress(data[offset : offset + count])
        assert len(outputs) == 1
        out = outputs[0]
        assert out.type == zl.Type.Numeric and out.elt_width == source.dtype.itemsize
        expected = np.ascontiguousarray(source[bs, ys, xs])
        assert out.num_elts == expected.size
        assert out.content.as_bytes() == expected.tobytes()


def test_the_projected_fixture_carries_epsg_32633_and_its_affine():
    f = sr.parse_file(os.path.join(DATA, "u8_geo_utm33n.rumi"))
    geo = f["georef"]
    assert (geo["model_type"], geo["raster_type"], geo["crs_key"], geo["epsg"]) == (1, 1, 3072, 32633)
    assert geo["affine"] == tuple(MANIFEST["u8_geo_utm33n"]["transform"])


def test_the_geographic_fixture_carries_epsg_4326_and_pixel_is_point():
    f = sr.parse_file(os.path.join(DATA, "f32_geo_wgs84_point.rumi"))
    geo = f["georef"]
    assert (geo["model_type"], geo["raster_type"], geo["crs_key"], geo["epsg"]) == (2, 2, 2048, 4326)
    assert geo["pixel_is_point"] is True
    assert geo["affine"] == tuple(MANIFEST["f32_geo_wgs84_point"]["transform"])


def test_the_fixture_folder_stays_small():
    total = sum(os.path.getsize(os.path.join(DATA, n)) for n in os.listdir(DATA))
    assert total < 300_000


# --- files written fresh by the peer ----------------------------------------------


@pytest.mark.parametrize("bands", [1, 4, 5, 13])
@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize(("shape", "tile"), [((37, 50), 16), ((33, 17), 32), ((16, 16), 16), ((1, 1), 16)])
def test_a_peer_file_is_compliant_and_its_blob_rebuilds_byte_for_byte(tmp_path, bands, unit, shape, tile):
    path = tmp_path / "a.rumi"
    blob = peer.peer_write(path, _ramp((bands, *shape), seed=bands), tile=tile, unit=unit)
    assert sr.check_file(path, blob=blob) == []
    fields = sr.parse_blob(blob)
    assert sr.blob_from_file(path, frame_unit=fields["frame_unit"]) == blob
    assert fields["counts"] == sr.parse_file(path)["tile_byte_counts"]


def test_the_peer_writes_frame_unit_tile_in_the_blob_of_a_single_band_cell_file(tmp_path):
    path = tmp_path / "one.rumi"
    blob = peer.peer_write(path, _ramp((1, 20, 20)), tile=16, unit="cell")
    assert sr.parse_blob(blob)["frame_unit"] == 0
    assert sr.blob_from_file(path) == blob


@pytest.mark.parametrize("bands", [1, 3])
def test_a_one_frame_file_has_a_28_byte_blob_with_count_bits_zero(tmp_path, bands):
    path = tmp_path / "pixel.rumi"
    blob = peer.peer_write(path, _ramp((bands, 1, 1)), tile=16, unit="cell")
    assert sr.parse_blob(blob)["count_bits"] == 0 and len(blob) == sr.BLOB_HEADER_SIZE
    assert sr.check_file(path, blob=blob) == []


@pytest.mark.parametrize("name", sorted(peer.PEER_WRITABLE))
def test_every_dtype_the_peer_writes_gives_a_compliant_file_with_the_spec_pair(tmp_path, name):
    rng = np.random.default_rng(7)
    array = _sample(name, (3, 21, 30), rng)
    path = tmp_path / f"{name}.rumi"
    blob = peer.peer_write(path, array, tile=16, unit="tile")
    assert sr.check_file(path, blob=blob) == []
    assert sr.blob_from_file(path) == blob
    fields = sr.parse_blob(blob)
    assert (fields["sample_format"], fields["bits_per_sample"]) == SPEC_PAIRS[name]


@pytest.mark.parametrize("name", sorted(peer.PEER_READABLE))
def test_every_dtype_in_peer_readable_reads_back_exactly(tmp_path, name):
    rng = np.random.default_rng(11)
    array = _sample(name, (2, 19, 23), rng)
    path = tmp_path / f"{name}.rumi"
    blob = peer.peer_write(path, array, tile=16, unit="cell")
    back = peer.peer_read(path, blob)
    assert back.dtype == array.dtype and back.tobytes() == array.tobytes()
    window = peer.peer_read(path, blob, b=(1, 2), y=(3, 18), x=(5, 22))
    assert window.tobytes() == np.ascontiguousarray(array[1:2, 3:18, 5:22]).tobytes()


@pytest.mark.parametrize("name", sorted(peer.PEER_WRITABLE - peer.PEER_READABLE))
def test_the_peer_fails_to_read_back_every_dtype_outside_peer_readable(tmp_path, name):
    # PEER_READABLE follows the installed numpy (see peer.py); if this starts failing, the peer
    # learned a dtype some other way: update PEER_READABLE and data/README.md
    path = tmp_path / f"{name}.rumi"
    blob = peer.peer_write(path, _sample(name, (1, 8, 8), np.random.default_rng(3)), tile=16)
    # BufferError: numpy 1.x's DLPack (no 1.0 consumer) for the padded sub-byte types
    with pytest.raises((OSError, SystemError, TypeError, ValueError, BufferError)):
        peer.peer_read(path, blob)


def test_the_peer_rejects_bool_and_structured_complex_dtypes():
    assert not {"bool", "complex_int16", "complex_int32", "complex_float16"} & peer.PEER_WRITABLE
    with pytest.raises(TypeError):
        peer.peer_frames(np.zeros((1, 4, 4), bool), tile=16)


def test_the_delta_graph_and_an_older_format_version_are_compliant_too(tmp_path):
    path = tmp_path / "d.rumi"
    blob = peer.peer_write(path, _ramp((2, 30, 30), np.int32), tile=16, graph="delta", format_version=20)
    assert sr.check_file(path, blob=blob) == []
    assert {m - sr.OPENZL_MAGIC_BASE for m in sr.parse_file(path)["frame_magics"]} == {20}


def test_a_peer_file_without_georeferencing_has_the_undefined_matrix_and_keys(tmp_path):
    path = tmp_path / "u.rumi"
    peer.peer_write(path, _ramp((1, 8, 8)), tile=16)
    f = sr.parse_file(path)
    assert f["matrix"] == sr.UNDEFINED_MATRIX
    assert f["geokeys"] == (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 1, 2048, 0, 1, 0)
    assert f["georef"]["epsg"] is None and f["georef"]["affine"] is None


@pytest.mark.parametrize(
    ("crs", "transform", "model", "key"),
    [
        (32633, (10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0), 1, 3072),
        ("EPSG:4326", (0.001, 0.0002, -3.0, 0.0003, -0.001, 40.0), 2, 2048),
    ],
)
@pytest.mark.parametrize("pixel_is_point", [False, True])
def test_a_georeferenced_peer_file_stores_the_full_matrix_and_three_keys(
    tmp_path, crs, transform, model, key, pixel_is_point
):
    path = tmp_path / "g.rumi"
    blob = peer.peer_write(path, _ramp((2, 20, 20)), tile=16, transform=transform, crs=crs,
                           pixel_is_point=pixel_is_point)
    assert sr.check_file(path, blob=blob) == []
    f = sr.parse_file(path)
    x_res, row_rot, x_origin, col_rot, y_res, y_origin = transform
    assert f["matrix"] == (x_res, row_rot, 0.0, x_origin, col_rot, y_res, 0.0, y_origin, 0, 0, 0, 0, 0, 0, 0, 1)
    epsg = int(str(crs).split(":")[-1])
    raster = 2 if pixel_is_point else 1
    assert f["geokeys"] == (1, 1, 0, 3, 1024, 0, 1, model, 1025, 0, 1, raster, key, 0, 1, epsg)


@pytest.mark.parametrize(
    ("bands", "across", "down", "frames"), [(4, 1, 1, 1), (1, 2, 1, 2), (1, 3, 1, 3), (5, 1, 1, 5)])
def test_the_base_frame_offset_formula_matches_the_first_tile_offset(tmp_path, bands, across, down, frames):
    path = tmp_path / "b.rumi"
    unit = "cell" if frames == across * down and bands > 1 else "tile"
    peer.peer_write(path, _ramp((bands, 16 * down, 16 * across)), tile=16, unit=unit)
    f = sr.parse_file(path)
    assert len(f["tile_offsets"]) == frames
    assert f["tile_offsets"][0] == sr.expected_base_frame_offset(bands, frames)


def test_a_five_band_file_stores_its_six_external_values_back_to_back_from_byte_252(tmp_path):
    path = tmp_path / "five.rumi"
    peer.peer_write(path, _ramp((5, 20, 40)), tile=16)
    f = sr.parse_file(path)
    assert [tag for tag, _, _ in f["external"]] == [258, 324, 325, 339, 34264, 34735]
    assert [size for _, _, size in f["external"]] == [10, 8 * 30, 4 * 30, 10, 128, 32]
    ends = [252] + [offset + size for _, offset, size in f["external"]]
    assert [offset for _, offset, _ in f["external"]] == ends[:-1]
    assert f["tile_offsets"][0] == ends[-1] == sr.expected_base_frame_offset(5, 30)


# --- the blob, by hand ---------------------------------------------------------------


def _blob_header(**changes) -> bytes:
    fields = dict(
        magic=sr.BLOB_MAGIC, version=1, image_width=30, image_length=10, tile_width=16, tile_length=16,
        samples_per_pixel=2, bits_per_sample=16, sample_format=1, frame_unit=0, count_min=5, count_bits=3,
    )  # fmt: skip
    fields.update(changes)
    return struct.pack("<IHIIHHHBBBIB", *fields.values())


# counts [5, 7, 6, 12] -> residuals [0, 2, 1, 7] in 3 bits, LSB first:
# bits 0-2: 000, bits 3-5: 010 (bit 4), bits 6-8: 100 (bit 6), bits 9-11: 111
HAND_PACKED = bytes([0b0101_0000, 0b0000_1110])


def test_a_hand_packed_blob_decodes_to_its_counts():
    blob = _blob_header() + HAND_PACKED
    fields = sr.parse_blob(blob)
    assert fields["frames"] == 4 and fields["tiles_across"] == 2 and fields["tiles_down"] == 1
    assert fields["counts"] == [5, 7, 6, 12]
    assert blob[0:4] == b"LOVE"


def test_build_blob_packs_the_hand_example_exactly():
    fields = dict(image_width=30, image_length=10, tile_width=16, tile_length=16,
                  samples_per_pixel=2, bits_per_sample=16, sample_format=1, frame_unit=0)  # fmt: skip
    assert sr.build_blob(fields, [5, 7, 6, 12]) == _blob_header() + HAND_PACKED
    assert sr.build_blob(fields, [9, 9, 9, 9]) == _blob_header(count_min=9, count_bits=0)


@pytest.mark.parametrize(
    ("blob", "message"),
    [
        (_blob_header(magic=0x45564F4D) + HAND_PACKED, "magic"),
        (_blob_header(version=2) + HAND_PACKED, "version"),
        (_blob_header(frame_unit=2) + HAND_PACKED, "frame_unit"),
        (_blob_header(sample_format=3, bits_per_sample=8) + HAND_PACKED, "not a valid pair"),
        (_blob_header(sample_format=4) + HAND_PACKED, "not a valid pair"),
        (_blob_header(tile_width=0) + HAND_PACKED, "tile"),
        (_blob_header(samples_per_pixel=0) + HAND_PACKED, "samples_per_pixel"),
        (_blob_header(count_bits=33) + bytes(17), "count_bits is 33"),
        (_blob_header() + HAND_PACKED + b"\x00", "expected 28 + ceil"),
        (_blob_header() + HAND_PACKED[:1], "expected 28 + ceil"),
        (_blob_header() + bytes([HAND_PACKED[0], HAND_PACKED[1] | 0x80]), "unused bit"),
        # counts [5, 7, 6, 8] stored as 4 + [1, 3, 2, 4]: count_min is not the minimum
        (_blob_header(count_min=4) + bytes([0x99, 0x08]), "expected the smallest count 5"),
        # counts [5, 7, 6, 12] packed in 4 bits instead of 3
        (_blob_header(count_bits=4) + bytes([0x20, 0x71]), "expected the minimum width 3"),
        (_blob_header(count_min=0, count_bits=0), "count_min is 0"),
        (_blob_header()[:27], "at least the 28-byte header"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_parse_blob_rejects_a_blob_that_breaks_a_rule(blob, message):
    with pytest.raises(sr.SpecViolation, match=re.escape(message)):
        sr.parse_blob(blob)
    assert any(message in p for p in sr.check_blob(blob))


# --- hand-made corruptions of a peer file ----------------------------------------------


def _entry_at(f: dict, tag: int) -> int:
    """Byte position of the IFD entry of ``tag``."""
    index = [e[0] for e in f["entries"]].index(tag)
    return f["ifd_offset"] + 8 + 20 * index


def _flags(problems: list[str], text: str) -> bool:
    return any(text in p for p in problems)


def test_an_unchanged_rebuild_of_a_peer_file_is_identical(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    sr.build_file(tmp_path / "same.rumi", entries, frames)
    assert _read(tmp_path / "same.rumi") == _read(path)


def test_check_file_flags_an_added_tag(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    scale = (33550, sr.DOUBLE, 3, struct.pack("<3d", 1.0, 1.0, 0.0))
    entries = sorted([*entries, scale])
    sr.build_file(tmp_path / "x.rumi", entries, frames)
    problems = sr.check_file(tmp_path / "x.rumi")
    assert _flags(problems, "tag 33550 (ModelPixelScaleTag) must not appear")
    assert _flags(problems, "IFD has 12 entries, expected 11")


def test_check_file_flags_a_missing_tag(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    entries = [e for e in entries if e[0] != sr.GEO_KEY_DIRECTORY]
    sr.build_file(tmp_path / "x.rumi", entries, frames)
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "tag 34735 (GeoKeyDirectoryTag) is missing")


def test_check_file_flags_a_wrong_tag_type(tmp_path, four_band_file):
    path, _ = four_band_file
    data = bytearray(_read(path))
    at = _entry_at(sr.parse_file(path), sr.IMAGE_WIDTH)
    struct.pack_into("<H", data, at + 2, sr.SHORT)
    _write(tmp_path / "x.rumi", bytes(data))
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "tag 256 (ImageWidth) has type 3, expected 4 (LONG)")


def test_check_file_flags_a_wrong_tag_count(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    entries = [(t, ty, 17, v + bytes(8)) if t == sr.MODEL_TRANSFORMATION else (t, ty, c, v) for t, ty, c, v in entries]
    sr.build_file(tmp_path / "x.rumi", entries, frames)
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "tag 34264 (ModelTransformationTag) has 17 values, expected 16")


def test_check_file_flags_tags_out_of_rising_order(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    entries[0], entries[1] = entries[1], entries[0]
    sr.build_file(tmp_path / "x.rumi", entries, frames)
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "expected strictly rising tag order")


def test_check_file_flags_external_values_out_of_tag_order(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    # same IFD order, but write the GeoKey values before the matrix: swap the two entries
    # and swap them back in the IFD bytes afterwards
    i, j = [e[0] for e in entries].index(34264), [e[0] for e in entries].index(34735)
    entries[i], entries[j] = entries[j], entries[i]
    sr.build_file(tmp_path / "x.rumi", entries, frames)
    data = bytearray(_read(tmp_path / "x.rumi"))
    a, b = 16 + 8 + 20 * i, 16 + 8 + 20 * j
    data[a : a + 20], data[b : b + 20] = data[b : b + 20], data[a : a + 20]
    _write(tmp_path / "x.rumi", bytes(data))
    problems = sr.check_file(tmp_path / "x.rumi")
    assert not _flags(problems, "expected strictly rising tag order")  # the IFD itself is in order
    assert _flags(problems, "tag 34264 value is at byte")


def test_check_file_flags_a_band_interleaved_layout_without_sorting_offsets(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    bands, positions = 4, len(frames) // 4
    band_major = [p * bands + b for b in range(bands) for p in range(positions)]
    sr.build_file(tmp_path / "x.rumi", entries, frames, frame_order=band_major)
    f = sr.parse_file(tmp_path / "x.rumi")
    # sorted, the offsets still form one contiguous run: that is why order must not be sorted
    ranges = sorted(f["frames"])
    assert all(ranges[k][0] + ranges[k][1] == ranges[k + 1][0] for k in range(len(ranges) - 1))
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "frame 1 starts at byte")


def test_check_file_flags_a_gap_before_the_frames(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    sr.build_file(tmp_path / "x.rumi", entries, frames, gap=8)
    problems = sr.check_file(tmp_path / "x.rumi")
    assert _flags(problems, "expected base_frame_offset")
    assert _flags(problems, "right after the values")


def test_check_file_flags_a_truncated_file(tmp_path, four_band_file):
    path, _ = four_band_file
    _write(tmp_path / "x.rumi", _read(path)[:-10])
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "(the end of the last frame)")


def test_check_file_flags_bytes_after_the_last_frame(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    sr.build_file(tmp_path / "x.rumi", entries, frames, tail=b"\x00")
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "(the end of the last frame)")


def test_check_file_flags_a_zero_byte_count(tmp_path, four_band_file):
    path, _ = four_band_file
    data = bytearray(_read(path))
    f = sr.parse_file(path)
    struct.pack_into("<I", data, f["value_offsets"][sr.TILE_BYTE_COUNTS] + 4 * 5, 0)
    _write(tmp_path / "x.rumi", bytes(data))
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "TileByteCounts[5] is 0")


def test_check_file_flags_an_entry_count_matching_neither_unit(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    frames = frames[:-1]
    entries = [(t, ty, len(frames) if t in (324, 325) else c, v) for t, ty, c, v in entries]
    entries = [(t, ty, c, bytes(8 * c) if t == 324 else v) for t, ty, c, v in entries]
    sr.build_file(tmp_path / "x.rumi", entries, frames)
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "TileOffsets has 35 entries, expected 9 (cell) or 36 (tile)")


def test_check_file_flags_a_frame_without_an_openzl_magic(tmp_path, four_band_file):
    path, _ = four_band_file
    data = bytearray(_read(path))
    offset = sr.parse_file(path)["tile_offsets"][2]
    data[offset] ^= 0xFF
    _write(tmp_path / "x.rumi", bytes(data))
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "frame 2 starts with")


def test_check_file_flags_frames_of_two_openzl_format_versions(tmp_path):
    array = _ramp((2, 20, 20))
    peer.peer_write(tmp_path / "v24.rumi", array, tile=16, format_version=24)
    peer.peer_write(tmp_path / "v23.rumi", array, tile=16, format_version=23)
    entries, frames24 = sr.entries_of(tmp_path / "v24.rumi")
    _, frames23 = sr.entries_of(tmp_path / "v23.rumi")
    sr.build_file(tmp_path / "x.rumi", entries, frames24[:4] + frames23[4:])
    problems = sr.check_file(tmp_path / "x.rumi")
    assert _flags(problems, "frames use OpenZL format versions [23, 24]")


def test_check_file_flags_a_second_ifd(tmp_path, four_band_file):
    path, _ = four_band_file
    entries, frames = sr.entries_of(path)
    sr.build_file(tmp_path / "x.rumi", entries, frames, next_ifd=16)
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "expected 0 (exactly one IFD)")


@pytest.mark.parametrize(
    ("header", "message"),
    [(b"MM", "expected b'II'"), (b"II\x2a\x00", "expected 43 (BigTIFF)")],
)
def test_check_file_flags_a_file_that_is_not_little_endian_bigtiff(tmp_path, four_band_file, header, message):
    path, _ = four_band_file
    data = _read(path)
    _write(tmp_path / "x.rumi", header + data[len(header) :])
    assert _flags(sr.check_file(tmp_path / "x.rumi"), message)


def test_check_file_flags_mixed_band_encodings(tmp_path):
    path = tmp_path / "five.rumi"
    peer.peer_write(path, _ramp((5, 20, 20)), tile=16)
    data = bytearray(_read(path))
    f = sr.parse_file(path)
    struct.pack_into("<H", data, f["value_offsets"][sr.SAMPLE_FORMAT] + 2, 2)
    _write(tmp_path / "x.rumi", bytes(data))
    assert _flags(sr.check_file(tmp_path / "x.rumi"), "bands use different encodings")


def _patch_georef(tmp_path, src, matrix=None, geokeys=None):
    data = bytearray(_read(src))
    f = sr.parse_file(src)
    if matrix is not None:
        struct.pack_into("<16d", data, f["value_offsets"][sr.MODEL_TRANSFORMATION], *matrix)
    if geokeys is not None:
        struct.pack_into("<16H", data, f["value_offsets"][sr.GEO_KEY_DIRECTORY], *geokeys)
    out = tmp_path / "x.rumi"
    _write(out, bytes(data))
    return sr.check_file(out)


@pytest.fixture
def projected_file(tmp_path):
    path = tmp_path / "utm.rumi"
    peer.peer_write(path, _ramp((1, 20, 20)), tile=16, transform=(10, 0, 5e5, 0, -10, 4e6), crs=32633)
    return path


UTM_KEYS = (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 1, 3072, 0, 1, 32633)
UTM_MATRIX = (10.0, 0.0, 0.0, 5e5, 0.0, -10.0, 0.0, 4e6, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)


@pytest.mark.parametrize(
    ("matrix", "geokeys", "message"),
    [
        ((*UTM_MATRIX[:10], 1.0, *UTM_MATRIX[11:]), None, "matrix third row"),
        ((*UTM_MATRIX[:2], 0.5, *UTM_MATRIX[3:]), None, "Z column"),
        ((*UTM_MATRIX[:15], 2.0), None, "fourth row"),
        (None, (*UTM_KEYS[:12], 2048, 0, 1, 32633), "comes with key 2048, expected 3072"),
        (None, (*UTM_KEYS[:7], 2, *UTM_KEYS[8:12], 2048, 0, 1, 32633), "is projected but GTModelTypeGeoKey"),
        (None, (*UTM_KEYS[:15], 40000), "outside 1024..32766"),
        (None, (*UTM_KEYS[:15], 1000), "outside 1024..32766"),
        (None, (*UTM_KEYS[:15], 1111), "not in the EPSG registry"),
        (None, (*UTM_KEYS[:7], 3, *UTM_KEYS[8:]), "GTModelTypeGeoKey is 3"),
        (None, (*UTM_KEYS[:11], 3, *UTM_KEYS[12:]), "GTRasterTypeGeoKey is 3"),
        (None, (*UTM_KEYS[:3], 4, *UTM_KEYS[4:]), "declares 4 keys"),
        (None, (*UTM_KEYS[:4], 1026, *UTM_KEYS[5:]), "GeoKey ids are"),
        (None, (*UTM_KEYS[:13], 34736, *UTM_KEYS[14:]), "location 34736"),
        (UTM_MATRIX, (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 1, 2048, 0, 1, 0), "undefined georeferencing has matrix"),
        (sr.UNDEFINED_MATRIX, (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 1, 2048, 0, 1, 4326),
         "expected GeographicTypeGeoKey 2048 = 0"),
        (sr.UNDEFINED_MATRIX, (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 1, 3072, 0, 1, 0),
         "expected GeographicTypeGeoKey 2048 = 0"),
    ],
)  # fmt: skip
def test_check_file_flags_broken_georeferencing(tmp_path, projected_file, matrix, geokeys, message):
    assert _flags(_patch_georef(tmp_path, projected_file, matrix, geokeys), message)


def test_a_geographic_matrix_with_rotation_and_undefined_keys_with_pixel_is_point_are_accepted(tmp_path,
                                                                                                projected_file):
    rotated = (0.1, 0.02, 0.0, 10.0, 0.03, -0.1, 0.0, 50.0) + (0.0,) * 7 + (1.0,)
    geographic = (1, 1, 0, 3, 1024, 0, 1, 2, 1025, 0, 1, 2, 2048, 0, 1, 4326)
    assert _patch_georef(tmp_path, projected_file, rotated, geographic) == []
    undefined_point = (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 2, 2048, 0, 1, 0)
    assert _patch_georef(tmp_path, projected_file, sr.UNDEFINED_MATRIX, undefined_point) == []


# --- a file checked against a blob ---------------------------------------------------------


def test_check_file_flags_a_blob_with_a_bad_magic(four_band_file):
    path, blob = four_band_file
    assert _flags(sr.check_file(path, blob=b"LOVF" + blob[4:]), "blob magic is 4c 4f 56 46")


def test_check_file_flags_a_blob_whose_counts_differ_from_the_file(four_band_file):
    path, blob = four_band_file
    counts = sr.parse_blob(blob)["counts"]
    fields = sr.parse_blob(blob)
    other = sr.build_blob(fields, [c + 1 if i == 3 else c for i, c in enumerate(counts)])
    assert _flags(sr.check_file(path, blob=other), "blob frame byte counts differ from TileByteCounts")


def test_check_file_flags_a_blob_for_the_wrong_frame_unit_or_shape(four_band_file):
    path, blob = four_band_file
    fields = sr.parse_blob(blob)
    cells = sr.build_blob(dict(fields, frame_unit=1), fields["counts"][:9])
    assert _flags(sr.check_file(path, blob=cells), "blob frame_unit is 1, the file's entry count says 0")
    wider = sr.build_blob(dict(fields, image_width=fields["image_width"] + 1), fields["counts"])
    assert _flags(sr.check_file(path, blob=wider), "blob image_width is 38, the file says 37")
