"""validate() lists every violation of a file, build_blob() stops at the first and rebuilds the blob."""

from __future__ import annotations

import json
import os
import re
import struct
import tracemalloc
from pathlib import Path

import numpy as np
import peer
import pytest
import spec_reader
from conftest import Crafted, Entry, craft, openzl_frame, patch, reference_file, set_entry

from rumimm.errors import BlobError, FormatError, RumiError
from rumimm.format import georef
from rumimm.format.blob import Header, build_header
from rumimm.format.dtypes import DTYPES
from rumimm.format.grid import FrameUnit, Grid
from rumimm.reader.validate import Report, build_blob, inspect_file, validate

DATA = Path(__file__).parent / "data"
UTM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)


def check(path) -> tuple[list[str], str]:
    """(every violation validate() lists, the message build_blob() raises at the first)."""
    rep = validate(path)
    assert not rep.ok and rep.violations
    with pytest.raises(FormatError) as info:
        build_blob(path)
    msg = str(info.value)
    assert msg.startswith(f"{path}: ")
    assert msg == f"{path}: {rep.violations[0]}"  # index stops exactly where validate starts listing
    return rep.violations, msg


# -- good files ------------------------------------------------------------------------
def test_a_crafted_good_file_is_compliant_and_indexes_to_its_canonical_blob(tmp_path, good_tile_file):
    c, data = good_tile_file
    path = tmp_path / "good.rumi"
    path.write_bytes(data)
    rep = validate(path)
    assert rep.ok and rep.violations == [] and str(rep) == f"{path}: compliant"
    assert rep.frame_format_version == 24
    assert rep.georef.epsg is None and rep.georef.pixel_is_point is False
    assert rep.blob == c.blob == build_blob(path)
    assert isinstance(rep.header, Header) and rep.header.file_size == len(data)
    assert spec_reader.check_file(str(path)) == []


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize(("epsg", "point"), [(None, False), (None, True), (4326, True), (32633, False)])
def test_crafted_files_of_both_units_with_and_without_georef_are_compliant(tmp_path, unit, epsg, point):
    c = craft((5, 17, 21), (8, 6), unit, "float32", epsg=epsg, pixel_is_point=point)
    path = c.write(tmp_path / "f.rumi")
    rep = validate(path, header=c.blob, decode=True)
    assert rep.ok, rep.violations
    assert build_blob(path) == c.blob
    assert rep.georef.epsg == epsg and rep.georef.pixel_is_point is point
    if epsg:
        assert rep.georef.transform == UTM and rep.georef.geographic is (epsg == 4326)


THRESHOLDS = [  # (B, Y, X), unit -> N; each crosses one inline/external threshold of the IFD
    ((1, 8, 8), "tile"),  # N = 1: TileOffsets and TileByteCounts inline
    ((1, 8, 16), "tile"),  # N = 2: TileOffsets external, TileByteCounts (8 bytes) inline
    ((1, 8, 24), "tile"),  # N = 3: both external
    ((4, 8, 8), "cell"),  # B = 4: BitsPerSample and SampleFormat (8 bytes) inline, N = 1
    ((5, 8, 8), "cell"),  # B = 5: both external, N = 1
    ((5, 8, 16), "cell"),  # B = 5, N = 2
    ((2, 8, 8), "tile"),  # N = 2 from bands alone
]


@pytest.mark.parametrize(("shape", "unit"), THRESHOLDS, ids=[f"{s}-{u}" for s, u in THRESHOLDS])
def test_files_at_every_inline_or_external_threshold_validate_and_index(tmp_path, shape, unit):
    c = craft(shape, 8, unit, "uint8")
    path = c.write(tmp_path / "crafted.rumi")
    assert os.path.getsize(path) == c.grid.base_frame_offset + sum(map(len, c.frames))
    assert validate(path).ok and build_blob(path) == c.blob
    blob = peer.peer_write(tmp_path / "peer.rumi", _scene("uint8", shape[0])[:, : shape[1], : shape[2]], tile=8,
                           unit=unit)
    assert build_blob(tmp_path / "peer.rumi") == blob
    assert Header.parse(blob).base_frame_offset == c.grid.base_frame_offset


# -- reference-written files index to exactly the blob rumi.write returned --------------------
_BANDS = [1, 4, 5, 13]
PEER_CASES = [(name, _BANDS[i % 4], ("tile", "cell")[i % 2 ^ (i // 4) % 2])
              for i, name in enumerate(sorted(peer.PEER_WRITABLE))]


def _scene(name, bands, seed=0):
    r = np.random.default_rng(seed)
    dt = DTYPES[name]
    if dt.itemsize == 1 and dt.name != "uint8" and dt.name != "int8":
        bits = {"uint2": 2, "int2": 2, "uint4": 4, "int4": 4, "float4_e2m1fn": 4, "float6_e2m3fn": 6,
                "float6_e3m2fn": 6}.get(name, 8)
        raw = r.integers(0, 1 << bits, (bands, 19, 23), dtype=np.uint8)
        if name == "float8_e8m0fnu":
            raw[raw == 0xFF] = 0x7F  # 0xFF is NaN for E8M0
        return raw.view(dt)
    raw = r.integers(0, 40, (bands, 19, 23, dt.itemsize), dtype=np.uint8)
    return raw.view(dt).reshape(bands, 19, 23)


@pytest.mark.parametrize(("name", "bands", "unit"), PEER_CASES, ids=[f"{n}-b{b}-{u}" for n, b, u in PEER_CASES])
def test_a_reference_written_file_indexes_to_the_blob_rumi_write_returned(tmp_path, name, bands, unit):
    path = tmp_path / f"{name}.rumi"
    blob = peer.peer_write(path, _scene(name, bands), tile=8, unit=unit)
    assert build_blob(path) == blob
    rep = validate(path, header=blob)
    assert rep.ok, rep.violations + rep.header_violations
    h = Header.parse(blob)
    assert h.dtype == DTYPES[name] and h.shape == (bands, 19, 23)
    assert h.file_size == os.path.getsize(path)


@pytest.mark.parametrize("bands", [1, 4, 5, 13])
@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize(("crs", "point"), [(None, False), (4326, True), ("EPSG:32633", False)])
def test_reference_files_of_every_band_count_unit_and_georef_index_exactly(tmp_path, bands, unit, crs, point):
    path = tmp_path / "scene.rumi"
    arr = _scene("uint16", bands, seed=bands)
    transform = None if crs is None else (UTM if crs != 4326 else (0.01, 0.0, 12.0, 0.0, -0.01, 45.0))
    blob = peer.peer_write(path, arr, tile=8, unit=unit, transform=transform, crs=crs, pixel_is_point=point)
    assert build_blob(path) == blob
    rep = validate(path, header=blob)
    assert rep.ok, rep.violations + rep.header_violations
    want = None if crs is None else georef.resolve_crs(crs)
    assert rep.georef.epsg == want and rep.georef.pixel_is_point is point
    if crs is not None:
        assert rep.georef.transform == transform


MANIFEST = json.loads((DATA / "manifest.json").read_text())


#: Every committed reference file of both specs: 0.1 by rumi-eo 0.16.0, 0.2 by rumi-eo 0.26.1.
REFERENCES = [("0.1", n) for n in sorted(MANIFEST)] + [
    ("0.2", n) for n in sorted(json.loads((DATA / "v2" / "manifest.json").read_text()))]


@pytest.mark.parametrize(("spec_name", "name"), REFERENCES)
def test_the_committed_reference_files_index_to_their_committed_blobs(spec_name, name):
    ref = reference_file(spec_name, name)
    entry = json.loads((ref.path.parent / "manifest.json").read_text())[name]
    assert build_blob(ref.path) == ref.blob
    rep = validate(ref.path, header=ref.blob, decode=True)
    assert rep.ok, str(rep)
    assert rep.spec == spec_name and rep.frame_format_version == 24
    assert rep.georef.epsg == entry["crs"] and rep.georef.pixel_is_point is entry["pixel_is_point"]
    assert (None if rep.trailer is None else list(rep.trailer.bands)) == entry.get("bands")  # 0.2: the trailer's


def test_a_header_of_the_other_spec_is_reported(reference, spec):
    other = reference_file(spec.other)
    prefix = "header blob (spec 0.2): " if spec.has_trailer else "header blob: "
    rep = validate(reference.path, header=other.blob)
    (msg,) = rep.header_violations  # one violation naming both images
    assert not rep.ok and msg.startswith(f"header blob is a spec {spec.other.name} blob of ")
    assert f"but the file is spec {spec.name}" in msg and msg.endswith("the blob belongs to another file")
    rep = validate(reference.path, header=b"LOVE")
    assert not rep.ok
    assert rep.header_violations == [f"{prefix}blob is 4 bytes, shorter than the {spec.blob_header_size}-byte header"]


def test_a_one_band_cell_file_from_the_reference_carries_frame_unit_tile_and_indexes_to_it(tmp_path):
    # With B == 1 the two layouts are the same bytes.  rumi-eo 0.16.0 writes frame_unit 0
    # (tile) in the blob even when asked for cell frames, and its two files are identical;
    # build_blob() derives TILE for B == 1 (count == g == g * B), so it reproduces that blob.
    arr = _scene("uint16", 1)
    tile_blob = peer.peer_write(tmp_path / "t.rumi", arr, tile=8, unit="tile")
    cell_blob = peer.peer_write(tmp_path / "c.rumi", arr, tile=8, unit="cell")
    assert (tmp_path / "t.rumi").read_bytes() == (tmp_path / "c.rumi").read_bytes()
    assert cell_blob == tile_blob
    assert Header.parse(cell_blob).frame_unit is FrameUnit.TILE
    assert build_blob(tmp_path / "c.rumi") == cell_blob
    # a blob that says cell (frame_unit 1) describes the very same frames; the spec says either
    # reading is correct, the reference reads the file with it, and validate accepts it
    as_cell = bytearray(cell_blob)
    as_cell[22] = 1
    h = Header.parse(bytes(as_cell))
    assert h.frame_unit is FrameUnit.CELL and h.frame_offsets.tolist() == Header.parse(cell_blob).frame_offsets.tolist()
    assert np.array_equal(peer.peer_read(tmp_path / "c.rumi", bytes(as_cell)), arr)
    rep = validate(tmp_path / "c.rumi", header=bytes(as_cell))
    assert rep.ok, rep.header_violations
    # with more than one band the unit is visible in N, so a wrong unit is a real mismatch
    two = peer.peer_write(tmp_path / "b2.rumi", _scene("uint16", 2), tile=8, unit="cell")
    as_tile = build_header(Grid(23, 19, 8, 8, 2, FrameUnit.TILE), Header.parse(two).encoding, [9] * 18)
    rep = validate(tmp_path / "b2.rumi", header=as_tile)
    assert rep.header_violations == ["header blob describes a 2 x 19 x 23 uint16 image in 8 x 8 tiles "
                                     "(18 tile frames), but the file is a 2 x 19 x 23 uint16 image in 8 x 8 tiles "
                                     "(9 cell frames); the blob belongs to another file"]


# -- a blob given with the file ---------------------------------------------------------
def test_a_header_that_disagrees_with_the_file_is_reported(tmp_path, good_tile_file):
    c, data = good_tile_file
    path = tmp_path / "f.rumi"
    path.write_bytes(data)
    counts = c.counts.copy()
    counts[7] += 1
    other = build_header(c.grid, c.enc, counts)
    rep = validate(path, header=other)
    assert not rep.ok and rep.violations == []
    assert rep.header_violations == [f"header blob byte count of frame 7 is {int(counts[7])} but the file has "
                                     f"{int(counts[7]) - 1}"]  # int: numpy 1.x makes uint64 - 1 a float
    assert str(rep) == f"{path}: {rep.header_violations[0]}"
    rep = validate(path, header=b"EVOL" + bytes(24))
    assert len(rep.header_violations) == 1 and "magic" in rep.header_violations[0]
    with pytest.raises(BlobError, match="byte count of frame 7"):
        inspect_file(path, strict=True, header=other)


@pytest.mark.parametrize("file_spec", ["0.1", "0.2"])
@pytest.mark.parametrize("blob_spec", ["0.1", "0.2"])
def test_issue_32_a_blob_of_another_file_is_one_violation_naming_both_images(tmp_path, file_spec, blob_spec):
    import rumimm

    def write(name, array, spec, tile):
        texts = [f"b{i}" for i in range(array.shape[0])]
        names = {"descriptions": texts, "time": ["2026-06-01"]} if spec == "0.2" else {}
        return rumimm.write(tmp_path / name, array, tile=tile, spec=spec, **names)

    write("scene.rumi", _scene("uint16", 4), file_spec, 8)
    other = write("other.rumi", _scene("uint8", 2)[:, :12, :16], blob_spec, 4)
    rep = validate(tmp_path / "scene.rumi", header=other)
    assert not rep.ok and rep.violations == [] and len(rep.header_violations) == 1
    (msg,) = rep.header_violations
    unit = "24 tile frames" if blob_spec == "0.1" else "24 'h w' frames"
    file_unit = "36 tile frames" if file_spec == "0.1" else "36 'h w' frames"
    blob_image = f"a 2 x 12 x 16 uint8 image in 4 x 4 tiles ({unit})"
    file_image = f"a 4 x 19 x 23 uint16 image in 8 x 8 tiles ({file_unit})"
    if blob_spec == file_spec:
        assert msg == (f"header blob describes {blob_image}, but the file is {file_image}; "
                       "the blob belongs to another file")
    else:
        assert msg == (f"header blob is a spec {blob_spec} blob of {blob_image}, but the file is spec {file_spec}, "
                       f"{file_image}; the blob belongs to another file")
    with pytest.raises(BlobError, match="the blob belongs to another file"):
        inspect_file(tmp_path / "scene.rumi", strict=True, header=other)


# -- every file MUST: a broken file is rejected ------------------------------------------
def _second_ifd(c: Crafted) -> None:
    size = len(c.render())
    c.next_ifd = size
    c.tail = struct.pack("<Q", 0) + struct.pack("<Q", 0)  # an empty IFD after the frames


def _band_interleaved(c: Crafted) -> None:
    b = c.grid.samples_per_pixel
    n = c.grid.n_frames
    c.frame_order = [k for band in range(b) for k in range(band, n, b)]


def _set(tag, values, type=None):
    return lambda c: c.set_values(tag, values, type)


def _keys(**over):
    k = list(georef.geokeys(32633))
    pos = {"version": 0, "revision": 1, "minor": 2, "nkeys": 3, "model": 7, "raster": 11, "key": 12, "loc": 13,
           "count": 14, "code": 15}
    for name, v in over.items():
        k[pos[name]] = v
    return k


def _matrix(i, v):
    m = list(georef.matrix_from_transform(UTM))
    m[i] = v
    return m


def _swap(a, b):
    def f(c):
        i, j = [k for k, e in enumerate(c.entries) if e.tag in (a, b)]
        c.entries[i], c.entries[j] = c.entries[j], c.entries[i]
    return f


def _frames(fn):
    def f(c):
        c.frames = fn(c.frames)
    return f


# name -> (craft kwargs, change to the Crafted, or a byte patch, pattern of the first violation)
FILE_CASES = {
    "classic TIFF": ({}, ("bytes", lambda b: patch(b, 2, "H", 42)), "classic TIFF \\(version 42\\)"),
    "not a TIFF": ({}, ("bytes", lambda b: b"PK\x03\x04" + b[4:]), "not a TIFF file"),
    "big-endian": ({}, ("bytes", lambda b: b"MM" + b[2:]), "big-endian \\(MM\\)"),
    "TIFF version 44": ({}, ("bytes", lambda b: patch(b, 2, "H", 44)), "TIFF version is 44, expected 43"),
    "BigTIFF offset size 4": ({}, ("bytes", lambda b: patch(b, 4, "H", 4)), "offset size 4"),
    "IFD not at byte 16": ({}, lambda c: setattr(c, "first_ifd", 24), "first IFD is at byte 24"),
    "extra tag": ({}, lambda c: c.add(284, 3, 1), "IFD has 12 tags, expected exactly 11; extra tags: 284"),
    "ModelPixelScaleTag": ({"epsg": 32633}, lambda c: c.add(33550, 12, [10.0, 10.0, 0.0]),
                           "extra tags: 33550 \\(ModelPixelScaleTag\\)"),
    "ModelTiepointTag": ({"epsg": 32633}, lambda c: c.add(33922, 12, [0, 0, 0, 5e5, 4.2e6, 0]),
                         "extra tags: 33922 \\(ModelTiepointTag\\)"),
    "GeoDoubleParamsTag": ({"epsg": 32633}, lambda c: c.add(34736, 12, [6378137.0, 298.257]),
                           "extra tags: 34736 \\(GeoDoubleParamsTag\\)"),
    "GeoAsciiParamsTag": ({"epsg": 32633}, lambda c: c.entries.append(Entry(34737, 2, 12, b"WGS 84 / UTM|")) or None,
                          "extra tags: 34737 \\(GeoAsciiParamsTag\\)"),
    "tiepoint in place of the matrix": ({"epsg": 32633}, set_entry(34264, tag=33922),
                                        "tag 33922 \\(ModelTiepointTag\\) is not allowed"),
    "missing tag": ({}, lambda c: c.remove(339), "IFD has 10 tags, expected exactly 11; missing tags: 339"),
    "missing georef tag": ({}, lambda c: c.remove(34735), "missing tags: 34735"),
    "duplicated tag": ({}, set_entry(257, tag=256), "required tag 257 \\(IMAGE_LENGTH\\) is missing"),
    "tags out of order": ({}, _swap(256, 257), "not in rising tag order"),
    "georef tags out of order": ({}, _swap(34264, 34735), "not in rising tag order"),
    "ImageWidth as SHORT": ({}, _set(256, [30], type=3), "tag 256 \\(IMAGE_WIDTH\\) has type 3 .* expected LONG"),
    "TileByteCounts as LONG8": ({}, _set(325, list(range(1, 37)), type=16),
                                "tag 325 \\(TILE_BYTE_COUNTS\\) has type 16 .* expected LONG \\(4\\) and 36"),
    "TileOffsets as LONG": ({}, _set(324, list(range(1, 37)), type=4), "tag 324 .* has type 4"),
    "matrix as FLOAT": ({}, set_entry(34264, type=11), "tag 34264 .* has type 11"),
    "BitsPerSample count 2": ({}, _set(258, [16, 16]), "tag 258 \\(BITS_PER_SAMPLE\\) .* count 2, .* and 3"),
    "TileByteCounts count 35": ({}, set_entry(325, count=35), "tag 325 .* count 35, expected LONG \\(4\\) and 36"),
    "matrix count 12": ({}, _set(34264, [1.0] * 12), "tag 34264 .* count 12, .* and 16"),
    "geokeys count 20": ({}, _set(34735, list(georef.geokeys(None)) + [0] * 4), "tag 34735 .* count 20"),
    "TileWidth count 2": ({}, set_entry(322, count=2), "tag 322 .* count 2"),
    "more than one IFD": ({}, _second_ifd, "next-IFD offset is \\d+; a rumi file has exactly one IFD"),
    "gap between external values": ({}, lambda c: c.gap_after.update({324: 8}),
                                    "tag 325 \\(TILE_BYTE_COUNTS\\) value is at byte \\d+, expected \\d+: external"),
    "gap after BitsPerSample": ({"shape": (6, 20, 30)}, lambda c: c.gap_after.update({258: 2}),
                                "tag 324 .* value is at byte"),
    "external value out of place": ({}, set_entry(34264, pointer=16), "tag 34264 .* value is at byte 16"),
    "padding before the frames": ({}, lambda c: setattr(c, "gap_before_frames", 16),
                                  "TileOffsets\\[0\\] is \\d+, but frame data starts at base_frame_offset"),
    "alignment before the frames": ({}, lambda c: setattr(c, "gap_before_frames", 4), "base_frame_offset"),
    "band-interleaved": ({}, _band_interleaved,
                         "TileOffsets\\[1\\] \\(row 0, col 0, band 1\\) .*\\(band-interleaved\\?\\)"),
    "two frames swapped": ({}, lambda c: setattr(c, "frame_order", [0, 2, 1, *list(range(3, 36))]),
                           "TileOffsets\\[1\\] .* frame-index order"),
    "sparse frame": ({}, _frames(lambda f: [*f[:5], b"", *f[6:]]),
                     "frame 5 has TileByteCounts 0; no frame may be sparse"),
    "entry count neither g nor g*B": ({}, lambda c: (set_entry(324, count=24)(c), set_entry(325, count=24)(c),
                                                     setattr(c, "frames", c.frames[:24])),
                                      "tag 324 \\(TILE_OFFSETS\\) has 24 entries; expected 12 \\(cell frames\\) or 36"),
    "mixed sample formats": ({}, _set(339, [1, 2, 1]), "different \\(SampleFormat, BitsPerSample\\) pairs"),
    "mixed bits per sample": ({}, _set(258, [16, 16, 8]), "different \\(SampleFormat, BitsPerSample\\) pairs"),
    "mixed pairs over five bands": ({"shape": (5, 20, 30)}, _set(339, [1, 1, 1, 1, 3]), "different"),
    "invalid pair": ({}, _set(339, [4, 4, 4]), "\\(4, 16\\) is not a valid rumi sample encoding"),
    "image width 0": ({}, _set(256, [0], type=4), "at least one pixel"),
    "tile width 0": ({}, _set(322, [0], type=3), "TileWidth and TileLength must be > 0"),
    "tile length 0": ({}, _set(323, [0], type=3), "TileWidth and TileLength must be > 0"),
    "samples per pixel 0": ({}, _set(277, [0], type=3), "SamplesPerPixel is 0"),
    "model type projected with key 2048": ({"epsg": 32633}, _set(34735, _keys(key=2048)),
                                           "GTModelTypeGeoKey 1 needs key 3072, found key 2048"),
    "model type geographic with key 3072": ({"epsg": 32633}, _set(34735, _keys(model=2, code=4326)),
                                            "GTModelTypeGeoKey 2 needs key 2048, found key 3072"),
    "EPSG 1000": ({"epsg": 32633}, _set(34735, _keys(code=1000)), "EPSG code 1000 is outside 1024..32766"),
    "EPSG 40000": ({"epsg": 32633}, _set(34735, _keys(code=40000)), "EPSG code 40000 is outside 1024..32766"),
    "EPSG not in the registry": ({"epsg": 32633}, _set(34735, _keys(code=1025)), "EPSG:1025 is not defined"),
    "registry says geographic": ({"epsg": 32633}, _set(34735, _keys(code=4326)),
                                 "EPSG:4326 is geographic in the EPSG registry, but GTModelTypeGeoKey says projected"),
    "undefined georef with a matrix": ({}, _set(34264, georef.matrix_from_transform(UTM)), "undefined matrix"),
    "undefined georef with an EPSG code": ({}, _set(34735, [*list(georef.geokeys(None))[:15], 4326]),
                                           "needs key 2048 = 0"),
    "raster type 3": ({"epsg": 32633}, _set(34735, _keys(raster=3)), "GTRasterTypeGeoKey is 3"),
    "third matrix row non-zero": ({"epsg": 32633}, _set(34264, _matrix(10, 1.0)), "matrix must be"),
    "Z column non-zero": ({"epsg": 32633}, _set(34264, _matrix(2, 0.5)), "matrix must be"),
    "BigTIFF reserved field 1": ({}, ("bytes", lambda b: patch(b, 6, "H", 1)), "offset size 8 and reserved 1"),
    "GeoKey directory minor revision 1": ({"epsg": 32633}, _set(34735, _keys(minor=1)),
                                          "header is \\(1, 1, 1, 3\\), expected \\(1, 1, 0, 3\\)"),
    "GeoKey directory version 2": ({"epsg": 32633}, _set(34735, _keys(version=2)), "header is \\(2, 1, 0, 3\\)"),
    "GeoKey directory declares 4 keys": ({"epsg": 32633}, _set(34735, _keys(nkeys=4)), "header is \\(1, 1, 0, 4\\)"),
    "GeoKeys out of order": ({"epsg": 32633}, _set(34735, _keys()[:4] + _keys()[8:12] + _keys()[4:8] + _keys()[12:]),
                             "keys are 1025, 1024, 3072; expected 1024, 1025 and 2048 or 3072"),
    "GeoKey stored out of line": ({"epsg": 32633}, _set(34735, _keys(loc=34736)),
                                  "key 3072 must be stored inline \\(location 0, count 1\\)"),
    "GeoKey count 2": ({"epsg": 32633}, _set(34735, _keys(count=2)), "key 3072 must be stored inline"),
    "GTModelTypeGeoKey 3": ({"epsg": 32633}, _set(34735, _keys(model=3)), "GTModelTypeGeoKey is 3, expected 0, 1"),
    "undefined georef with key 3072": ({}, _set(34735, [*list(georef.geokeys(None))[:12], 3072, 0, 1, 0]),
                                       "no CRS \\(GTModelTypeGeoKey 0\\) needs key 2048 = 0, got key 3072 = 0"),
    "vertical EPSG code": ({"epsg": 32633}, _set(34735, _keys(code=5773)), "EPSG:5773 is a Vertical CRS"),
    "fourth matrix row non-zero": ({"epsg": 32633}, _set(34264, _matrix(12, 1.0)), "matrix must be"),
    "last matrix term 2": ({"epsg": 32633}, _set(34264, _matrix(15, 2.0)), "matrix must be"),
    "external values swapped": ({}, lambda c: (set_entry(34264, pointer=684 + 32)(c), set_entry(34735, pointer=684)(c)),
                                "tag 34264 \\(MODEL_TRANSFORMATION\\) value is at byte 716, expected 684"),
    "truncated in the frames": ({}, ("bytes", lambda b: b[:-10]), "last frame ends at byte \\d+ but the file has "
                                                                  "\\d+ bytes \\(truncated\\)"),
    "truncated in the values": ({}, ("bytes", lambda b: b[:300]), "past the end of the 300-byte file \\(truncated\\)"),
    "truncated in the IFD": ({}, ("bytes", lambda b: b[:100]), "too short for the 236-byte IFD"),
    "truncated in the header": ({}, ("bytes", lambda b: b[:10]), "shorter than the 16-byte BigTIFF header"),
    "empty file": ({}, ("bytes", lambda b: b""), "file is empty"),
    "trailing bytes": ({}, lambda c: setattr(c, "tail", b"\0" * 5), "5 bytes follow the last frame"),
    "a frame that is not OpenZL": ({}, _frames(lambda f: [*f[:9], b"(\xb5/\xfd" + f[9][4:], *f[10:]]),
                                   "frame 9 \\(row 0, col 3, band 0\\) does not start with an OpenZL frame magic"),
    "a frame too short for a magic": ({}, _frames(lambda f: [*f[:2], b"ab", *f[3:]]), "frame 2 is 2 bytes, too short"),
    "mixed OpenZL format versions": ({}, _frames(
        lambda f: [*f[:4], openzl_frame(np.arange(64, dtype="<u2"), 23), *f[5:]]),
                                     "frame 4 uses OpenZL format version 23 but frame 0 uses 24"),
}


def _make(case, tmp_path) -> str:
    kwargs, change, _ = FILE_CASES[case]
    c = craft(**kwargs)
    if isinstance(change, tuple):
        data = change[1](c.render())
    else:
        change(c)
        data = c.render()
    path = tmp_path / "bad.rumi"
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_a_file_breaking_a_rule_is_rejected(tmp_path, case):
    path = _make(case, tmp_path)
    violations, msg = check(path)
    pattern = FILE_CASES[case][2]
    assert re.search(pattern, violations[0]), violations
    assert isinstance(FormatError(msg), RumiError)


def test_a_frame_one_byte_longer_than_its_count_shifts_every_later_offset(tmp_path):
    c = craft()
    c.frames[3] += b"\0"
    data = bytearray(c.render())
    # keep TileByteCounts at the true frame lengths minus the extra byte: a gap between frames 3 and 4
    pos = 252 + 8 * 36 + 4 * 3
    struct.pack_into("<I", data, pos, len(c.frames[3]) - 1)
    path = tmp_path / "gap.rumi"
    path.write_bytes(bytes(data))
    violations, _ = check(path)
    assert re.search("TileOffsets\\[4\\] \\(row 0, col 1, band 1\\) is \\d+, expected \\d+", violations[0])


@pytest.mark.slow
def test_the_independent_struct_reader_also_rejects_every_broken_file(tmp_path):
    for case in FILE_CASES:
        path = _make(case, tmp_path)
        try:
            problems = spec_reader.check_file(path)
        except spec_reader.SpecViolation as exc:
            problems = [str(exc)]
        assert problems, case


def test_validate_lists_every_violation_and_index_raises_at_the_first(tmp_path):
    c = craft(epsg=32633)
    c.set_values(34735, _keys(raster=3))
    c.set_values(34264, _matrix(12, 7.0))
    c.tail = b"\0" * 3
    path = c.write(tmp_path / "three.rumi")
    rep = validate(path)
    assert len(rep.violations) == 3, rep.violations
    assert "GTRasterTypeGeoKey is 3" in rep.violations[0]
    assert "matrix must be" in rep.violations[1]
    assert "3 bytes follow the last frame" in rep.violations[2]
    assert str(rep).splitlines() == [f"{path}: {v}" for v in rep.violations]
    assert rep.blob is not None  # the frame layout is sound, so the blob is still rebuilt
    with pytest.raises(FormatError, match="GTRasterTypeGeoKey is 3"):
        build_blob(path)


def test_a_file_with_an_extra_and_a_missing_tag_lists_both(tmp_path):
    c = craft()
    c.entry(258).tag = 284
    c.entries.sort(key=lambda e: e.tag)
    path = c.write(tmp_path / "two.rumi")
    rep = validate(path)
    assert any("tag 284 is not allowed" in v for v in rep.violations)
    assert any("required tag 258 (BITS_PER_SAMPLE) is missing" in v for v in rep.violations)


def test_an_ifd_claiming_more_frames_than_the_file_can_hold_is_rejected_without_allocating(tmp_path):
    c = craft((1, 8, 8), 8)
    big = (2**32 - 1) ** 2  # a 4-billion-square image of 1 x 1 tiles: g < 2**64 fits a BigTIFF count
    c.set_values(256, [2**32 - 1])
    c.set_values(257, [2**32 - 1])
    c.set_values(322, [1])
    c.set_values(323, [1])
    c.entry(324).data = bytes(16)  # 16 bytes on disk, 2**64 - 2**33 + 1 entries claimed
    c.entry(324).count = big
    c.entry(325).data = bytes(16)
    c.entry(325).count = big
    path = c.write(tmp_path / "huge.rumi")
    validate(path)  # warm up imports and caches outside the measurement
    tracemalloc.start()
    try:
        rep = validate(path)
        with pytest.raises(FormatError):
            build_blob(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20
    assert any("past the end" in v and "truncated" in v for v in rep.violations), rep.violations


def test_validate_decode_reports_a_frame_that_decodes_to_the_wrong_size(tmp_path):
    c = craft()
    c.frames[7] = openzl_frame(np.arange(10, dtype="<u2"))
    path = c.write(tmp_path / "short.rumi")
    for decode in (False, True):  # the frame's header already declares 20 bytes
        rep = validate(path, decode=decode)
        assert not rep.ok and len(rep.violations) == 1
        assert re.match(r"frame 7\b.*\b128\b", rep.violations[0]), rep.violations  # 64 samples of 2 bytes


@pytest.mark.parametrize("case", ["short", "long", "serial", "two outputs", "missing cell band"])
def test_validate_reads_every_frames_header_by_default_and_says_what_it_checked(tmp_path, case):
    import openzl.ext as zl

    from rumimm.reader.validate import CHECKED_DECODE, CHECKED_HEADERS, CHECKED_MAGIC, CHECKED_PROFILE

    c = craft(unit="cell") if case == "missing cell band" else craft()
    k = 3
    if case == "short":
        c.frames[k] = openzl_frame(np.arange(63, dtype="<u2"))
    elif case == "long":
        c.frames[k] = openzl_frame(np.arange(65, dtype="<u2"))
    elif case == "serial":
        c.frames[k] = openzl_frame(np.arange(64, dtype="<u2"), serial=True)
    elif case == "missing cell band":
        c.frames[k] = openzl_frame(np.arange(2 * 64, dtype="<u2"))  # 2 of 3 bands
    else:
        comp = zl.Compressor()
        comp.select_starting_graph(zl.graphs.Store()(comp))
        cctx = zl.CCtx()
        cctx.ref_compressor(comp)
        cctx.set_parameter(zl.CParam.FormatVersion, 24)
        a, b = np.arange(32, dtype="<u2"), np.arange(32, dtype="<u2")
        inputs = [zl.Input(zl.Type.Numeric, a), zl.Input(zl.Type.Numeric, b)]
        c.frames[k] = cctx.compress(inputs)
        del inputs
    path = c.write(tmp_path / "bad.rumi")
    rep = validate(path)
    assert not rep.ok and len(rep.violations) == 1 and rep.violations[0].startswith(f"frame {k} "), rep.violations
    assert rep.checked == [CHECKED_PROFILE, CHECKED_MAGIC, CHECKED_HEADERS]
    good = validate(craft().write(tmp_path / "good.rumi"), decode=True)
    assert good.ok and good.checked == [CHECKED_PROFILE, CHECKED_MAGIC, CHECKED_DECODE]


def test_validate_decode_reports_a_corrupt_frame_and_wrong_type(tmp_path):
    c = craft()
    f = bytearray(c.frames[2])
    f[len(f) // 2:] = bytes(len(f) - len(f) // 2)
    c.frames[2] = bytes(f)
    c.frames[5] = openzl_frame(np.arange(64, dtype="<u4"))  # 4-byte samples in a 2-byte file
    path = c.write(tmp_path / "corrupt.rumi")
    rep = validate(path, decode=True)
    assert len(rep.violations) == 2, rep.violations
    assert re.match(r"frame 2\b.*decode", rep.violations[0]), rep.violations
    assert re.match(r"frame 5\b.*\b256\b.*\b128\b", rep.violations[1]), rep.violations


def test_a_missing_file_is_an_io_error_not_a_violation(tmp_path):
    with pytest.raises(RumiError, match="cannot read file"):
        validate(tmp_path / "nope.rumi")
    with pytest.raises(RumiError, match="cannot read file"):
        build_blob(tmp_path / "nope.rumi")


def test_report_is_a_plain_record():
    rep = Report("x.rumi")
    assert rep.ok and str(rep) == "x.rumi: compliant" and rep.header is None
    rep.violations.append("bad")
    assert not rep.ok and str(rep) == "x.rumi: bad"
