"""Files written by rumimm are read exactly by the reference implementation (rumi-eo 0.16.0).

The peer is a black box used through ``tests/peer.py``.  Which encodings it reads
back was measured here on rumimm-written files: exactly ``PEER_READABLE`` (uint8 ..
uint64, int8 .. int64, float16/32/64 and complex64); for every other encoding
``rumi.read`` fails to hand the samples to numpy (sub-byte, ML floats, structured
complex) or rejects the 16-byte Struct frames of complex128.
"""

from __future__ import annotations

import numpy as np
import pytest
import rumi
from conftest import UTM33N, WGS84, same_bits, samples
from peer import PEER_READABLE, peer_header, peer_read, peer_write

import rumimm
from rumimm.blob import Header
from rumimm.dtypes import DTYPES

WINDOWS = [
    {},
    {"b": (1, 3), "y": (5, 29), "x": (3, 17)},  # crosses tile edges in both axes
    {"b": (0, 1), "y": (30, 37), "x": (40, 45)},  # the ragged corner frame
    {"y": (0, 1), "x": (0, 1)},
]


@pytest.mark.parametrize("name", sorted(PEER_READABLE))
@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_the_reference_reads_every_peer_readable_encoding_exactly_with_windows(tmp_path, rng, name, unit):
    a = samples(name, (3, 37, 45), rng)
    path = tmp_path / f"{name}.rumi"
    blob = rumimm.write(path, a, tile=(16, 20), unit=unit)
    for win in WINDOWS:
        got = peer_read(path, blob, **win)
        b0, b1 = win.get("b", (0, 3))
        y0, y1 = win.get("y", (0, 37))
        x0, x1 = win.get("x", (0, 45))
        assert same_bits(got, a[b0:b1, y0:y1, x0:x1]), win
    assert same_bits(peer_read(path), a)  # the peer rebuilds the blob from the IFD itself


def test_the_reference_reads_exactly_the_encodings_measured_readable(tmp_path, rng):
    readable = set()
    for name in DTYPES:
        a = samples(name, (2, 9, 11), rng)
        path = tmp_path / f"{name}.rumi"
        blob = rumimm.write(path, a, tile=8)
        try:
            got = peer_read(path, blob)
        except Exception:  # the peer's own limitation, not a file problem: see the module docstring
            continue
        if same_bits(got, a):
            readable.add(name)
    assert readable == set(PEER_READABLE)


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("bands", [1, 4, 5, 13])
def test_the_reference_sees_the_same_header_as_rumimm(tmp_path, rng, unit, bands):
    a = rng.integers(0, 900, (bands, 33, 50), dtype=np.uint16)
    path = tmp_path / "h.rumi"
    blob = rumimm.write(path, a, tile=16, unit=unit)
    h = Header.parse(blob).to_dict()
    p = peer_header(path)
    for key in ("shape", "dtype", "tiles_across", "tiles_down", "frame_unit", "frames", "base_frame_offset"):
        assert p[key] == h[key], key
    assert same_bits(peer_read(path, blob), a)


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("bands", [1, 5])
@pytest.mark.parametrize(
    "geo", [None, {"crs": 32633, "transform": UTM33N}, {"crs": 4326, "transform": WGS84, "pixel_is_point": True}]
)
def test_with_the_same_graph_rumimm_writes_the_reference_writers_bytes(tmp_path, rng, unit, bands, geo):
    # the 'generic' preset is the graph tests/peer.py compresses with, so every byte can match
    a = rng.integers(0, 5000, (bands, 33, 47), dtype=np.uint16)
    geo = geo or {}
    ours = rumimm.write(tmp_path / "r.rumi", a, tile=16, unit=unit, codec="generic", **geo)
    theirs = peer_write(tmp_path / "p.rumi", a, tile=16, unit=unit, graph="generic", **geo)
    assert ours == theirs
    assert (tmp_path / "r.rumi").read_bytes() == (tmp_path / "p.rumi").read_bytes()


def test_the_reference_stacks_rumimm_files_into_a_cube(tmp_path, rng):
    cube = rng.integers(0, 255, (3, 2, 20, 24), dtype=np.uint8)
    paths, blobs = [], []
    for i, img in enumerate(cube):
        paths.append(str(tmp_path / f"{i}.rumi"))
        blobs.append(rumimm.write(paths[-1], img, tile=8, transform=UTM33N, crs=32633))
    assert same_bits(rumi.read(paths, blobs), cube)
    assert same_bits(rumi.read(paths, blobs, n=(1, 3), y=(4, 19), x=(7, 8)), cube[1:3, :, 4:19, 7:8])


def test_the_reference_reads_a_file_from_its_bytes(tmp_path, rng):
    a = rng.normal(size=(2, 19, 23)).astype(np.float32)
    a[0, 3, 4] = np.nan
    blob = rumimm.write(tmp_path / "f.rumi", a, tile=8)
    assert same_bits(rumi.read((tmp_path / "f.rumi").read_bytes(), blob), a)


def test_a_scene_written_on_the_process_pool_is_read_exactly_by_the_reference(tmp_path, monkeypatch):
    import rumimm.writer as W
    from rumimm.synthetic import eo_scene

    a = eo_scene(4, 300, 260, "uint16", seed=3)
    monkeypatch.setattr(W, "PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(W, "PROCESS_START_MIN_BYTES", 0)
    blob = rumimm.write(tmp_path / "s.rumi", a, tile=64, threads=2, transform=UTM33N, crs=32633)
    assert same_bits(peer_read(tmp_path / "s.rumi", blob), a)
    assert same_bits(peer_read(tmp_path / "s.rumi", blob, b=(2, 4), y=(60, 200), x=(100, 101)), a[2:4, 60:200, 100:101])
