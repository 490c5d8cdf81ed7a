"""Files written by the reference implementation (rumi-eo 0.16.0) read exactly with rumimm."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from peer import PEER_READABLE, PEER_WRITABLE, peer_read, peer_write

import rumimm
from rumimm import _native
from rumimm.dtypes import DTYPES
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
            assert img.transform == t and img.crs == "EPSG:4326" and img.pixel_is_point
            assert img.bounds == (10.0, 40.0, 25.0, 50.0)


@pytest.mark.parametrize("native", [True, False], ids=["geozl-c", "openzl-ext"])
@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_the_fixtures_with_geozl_and_openzl_frames_read_exactly(name, native, monkeypatch):
    entry = MANIFEST[name]
    path = os.path.join(DATA, entry["file"])
    blob = open(os.path.join(DATA, entry["blob"]), "rb").read()
    array = source(name)
    if not native:
        monkeypatch.setattr(_native, "available", lambda: False)
    for header in (blob, None):
        with rumimm.open(path, header, cache_bytes=0) as img:
            assert img._native is native
            assert img.shape == tuple(entry["shape"]) and img.frame_unit == entry["unit"]
            assert img.dtype == np.dtype(entry["dtype"]) == DTYPES[entry["dtype"]]
            assert img.tile == (entry["tile"], entry["tile"])
            for key in KEYS:
                assert same(img[key], array[key]), key
            assert img.epsg == entry["crs"]
            assert img.transform == (None if entry["transform"] is None else tuple(entry["transform"]))
            assert img.pixel_is_point is entry["pixel_is_point"]


def test_fixtures_of_one_grid_stack_into_a_cube_and_batch():
    names = ["u16_tile_b4", "u16_cell_b3"]
    paths = [os.path.join(DATA, MANIFEST[n]["file"]) for n in names]
    got = rumimm.read_batch(paths, [((0, 20), (0, 30)), ((40, 60), (50, 80))], bands=[0, 2])
    assert same(got[0], source(names[0])[[0, 2], 0:20, 0:30])
    assert same(got[1], source(names[1])[[0, 2], 40:60, 50:80])
