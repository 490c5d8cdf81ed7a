"""Files written by the reference implementation (rumi-eo 0.16.0) read exactly with rumimm."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from affine import Affine
from peer import PEER_READABLE, PEER_WRITABLE, peer_read, peer_write

import rumimm
from rumimm.format.dtypes import DTYPES
from rumimm.reader import engine
from rumimm.synthetic import eo_scene

DATA = os.path.join(os.path.dirname(__file__), "data")
sys.path.insert(0, DATA)
from make_fixtures import source  # noqa: E402

MANIFEST = json.load(open(os.path.join(DATA, "manifest.json")))

KEYS = [
    np.s_[:],
    np.s_[:, 3:17, 5:29],
    np.s_[0, ::2, ::-3],
    np.s_[-1, 10:11, 10:11],
    np.s_[..., 7:9],
    np.s_[[0, -1], -5:, :6],
]


def same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("name", sorted(PEER_WRITABLE))
def test_a_file_the_peer_wrote_reads_exactly(tmp_path, name, unit):
    array = eo_scene(3, 27, 35, dtype=name, seed=11)
    blob = peer_write(tmp_path / "p.rumi", array, tile=16, unit=unit)
    with rumimm.open(tmp_path / "p.rumi", blob) as a, rumimm.open(tmp_path / "p.rumi") as b:
        assert bytes(b.header) == blob
        for key in KEYS:
            assert same(a[key], array[key]), key
            assert same(b[key], array[key]), key


@pytest.mark.parametrize("name", sorted(PEER_READABLE))
def test_windows_agree_with_the_peers_reader(tmp_path, name):
    array = eo_scene(2, 40, 33, dtype=name, seed=12)
    blob = peer_write(tmp_path / "p.rumi", array, tile=16, unit="tile", graph="delta" if name != "complex64"
                      else "generic")
    with rumimm.open(tmp_path / "p.rumi", blob) as img:
        for b, y, x in (((0, 2), (0, 40), (0, 33)), ((1, 2), (5, 37), (3, 20)), ((0, 1), (15, 17), (15, 17))):
            want = peer_read(tmp_path / "p.rumi", blob, b=b, y=y, x=x)
            assert same(img[b[0]:b[1], y[0]:y[1], x[0]:x[1]], want)


def test_a_georeferenced_peer_file_reports_its_transform_and_crs(tmp_path):
    array = eo_scene(1, 20, 30, dtype="uint8", seed=13)
    t = (0.5, 0.0, 10.0, 0.0, -0.5, 50.0)
    blob = peer_write(tmp_path / "g.rumi", array, tile=8, transform=t, crs=4326, pixel_is_point=True)
    for header in (blob, None):
        with rumimm.open(tmp_path / "g.rumi", header) as img:
            assert img.transform == Affine(*t) and img.crs == "EPSG:4326" and img.pixel_is_point
            assert img.bounds == (9.75, 40.25, 24.75, 50.25)  # rasterio's: the pixel areas around the points


@pytest.mark.parametrize("native", [True, False], ids=["geozl-c", "openzl-ext"])
@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_the_fixtures_with_geozl_and_openzl_frames_read_exactly(name, native, monkeypatch):
    entry = MANIFEST[name]
    path = os.path.join(DATA, entry["file"])
    blob = open(os.path.join(DATA, entry["blob"]), "rb").read()
    array = source(name)
    if not native:
        engine.load()
        monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    for header in (blob, None):
        with rumimm.open(path, header, cache_bytes=0) as img:
            assert engine._NATIVE is native
            assert img.shape == tuple(entry["shape"]) and img.frame_unit == entry["unit"]
            assert img.dtype == np.dtype(entry["dtype"]) == DTYPES[entry["dtype"]]
            assert img.tile == (entry["tile"], entry["tile"])
            for key in KEYS:
                assert same(img[key], array[key]), key
            assert img.epsg == entry["crs"]
            assert img.transform == (None if entry["transform"] is None else Affine(*entry["transform"]))
            assert img.pixel_is_point is entry["pixel_is_point"]


def test_fixtures_of_one_grid_stack_into_a_cube_and_batch():
    names = ["u16_tile_b4", "u16_cell_b3"]
    paths = [os.path.join(DATA, MANIFEST[n]["file"]) for n in names]
    got = rumimm.read_batch(paths, [((0, 20), (0, 30)), ((40, 60), (50, 80))], bands=[0, 2])
    assert same(got[0], source(names[0])[[0, 2], 0:20, 0:30])
    assert same(got[1], source(names[1])[[0, 2], 40:60, 50:80])


# -- odd shapes written by the reference --------------------------------------------------
# (B, Y, X), square tile, unit, dtype -> the N and inline/external layout each one exercises
ODD_SHAPES = [
    ((1, 1, 1), 16, "tile", "uint8"),  # 1 x 1 image, N = 1: TileOffsets and TileByteCounts inline
    ((1, 1, 1), 1, "cell", "float32"),  # 1 x 1 tile; B = 1 cell is the tile layout
    ((2, 5, 7), 16, "tile", "int16"),  # smaller than one tile, N = 2: TileByteCounts inline, TileOffsets not
    ((2, 5, 7), 16, "cell", "int16"),  # the same as one cell frame, N = 1
    ((1, 8, 24), 8, "tile", "uint16"),  # N = 3: both external
    ((3, 13, 11), 5, "tile", "float64"),  # tile not a multiple of 16, ragged both ways
    ((3, 13, 11), 12, "cell", "complex64"),  # tile 12, N = 2 cell frames
    ((1, 9, 9), 1, "tile", "int8"),  # 1 x 1 tiles: 81 frames
    ((1, 19, 23), 8, "cell", "uint16"),  # B = 1 cell vs tile: same bytes, frame_unit 0 in the blob
    ((5, 10, 10), 8, "tile", "float32"),  # B = 5: BitsPerSample and SampleFormat external
    ((7, 10, 10), 8, "cell", "uint32"),  # B = 7 cell
    ((7, 3, 40), 24, "tile", "float16"),  # B = 7 tile, one tile row cut to 3 rows
]


@pytest.mark.parametrize(("shape", "tile", "unit", "name"), ODD_SHAPES,
                         ids=[f"{'x'.join(map(str, s))}-t{t}-{u}-{n}" for s, t, u, n in ODD_SHAPES])
def test_odd_shapes_the_peer_wrote_read_exactly(tmp_path, shape, tile, unit, name):
    import spec_reader

    array = eo_scene(*shape, dtype=name, seed=sum(shape) + tile)
    path = tmp_path / "odd.rumi"
    blob = peer_write(path, array, tile=tile, unit=unit)
    b, y, x = shape
    g = ((y + tile - 1) // tile) * ((x + tile - 1) // tile)
    n = g * b if unit == "tile" or b == 1 else g
    with rumimm.open(path, blob, cache_bytes=0) as a, rumimm.open(path) as c:
        assert bytes(c.header) == blob
        assert a.n_frames == n and a.shape == shape and a.tile == (tile, tile)
        assert a.header.base_frame_offset == spec_reader.expected_base_frame_offset(b, n)
        assert a.frame_unit == ("tile" if b == 1 else unit)
        keys = [np.s_[:], np.s_[-1], np.s_[:, -1, -1], np.s_[:, y // 2:, : x // 2 + 1], np.s_[::-1, ::2, ::-3]]
        for key in keys:
            assert same(a[key], array[key]), key
            assert same(c[key], array[key]), key
    if name in PEER_READABLE:
        assert same(peer_read(path, blob), array)


# -- non-square tiles: the reference cannot write them (one tile_size), so crafted files ------
NON_SQUARE = [((1, 11, 13), (3, 7), "tile"), ((2, 20, 9), (16, 5), "tile"), ((2, 20, 9), (16, 5), "cell"),
              ((5, 6, 33), (1, 32), "cell"), ((3, 17, 4), (17, 4), "tile")]


@pytest.mark.parametrize(("shape", "tile", "unit"), NON_SQUARE,
                         ids=[f"{'x'.join(map(str, s))}-t{t[0]}x{t[1]}-{u}" for s, t, u in NON_SQUARE])
def test_non_square_tiles_read_exactly_and_agree_with_the_peers_reader(tmp_path, shape, tile, unit):
    from conftest import craft

    array = eo_scene(*shape, dtype="uint16", seed=shape[1] * tile[0])
    c = craft(shape, tile, unit, "uint16", array=array)
    path = c.write(tmp_path / "ns.rumi")
    with rumimm.open(path, c.blob, cache_bytes=0) as a, rumimm.open(path) as b:
        assert bytes(b.header) == c.blob and a.tile == tile
        for key in (np.s_[:], np.s_[:, 1::2, ::-1], np.s_[-1, tile[0] - 1:tile[0] + 1, tile[1] - 1:tile[1] + 1]):
            assert same(a[key], array[key]) and same(b[key], array[key]), key
    assert same(peer_read(path, c.blob), array)


def test_a_file_the_reference_writes_with_a_nan_transform_is_read_not_refused(tmp_path):
    # no rule of the spec asks for finite matrix values, and rumi-eo writes and reads them
    a = np.arange(2 * 9 * 7, dtype=np.uint16).reshape(2, 9, 7)
    path = tmp_path / "nan.rumi"
    blob = peer_write(path, a, tile=4, transform=(float("nan"), 0.0, 5.0, 0.0, -1.0, float("inf")), crs=32633)
    assert rumimm.build_blob(path) == blob
    assert rumimm.validate(path).ok
    for header in (None, blob):
        with rumimm.open(path, header) as img:
            assert img.crs == "EPSG:32633"
            t = img.transform
            assert np.isnan(t[0]) and t[5] == float("inf") and t[4] == -1.0
            assert np.array_equal(img[:], a)
