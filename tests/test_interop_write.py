"""Files written by rumimm are read exactly by the reference implementation (rumi-eo 0.16.0).

The peer is a black box used through ``tests/peer.py``.  Which encodings it reads
back was measured here on rumimm-written files: exactly ``PEER_READABLE``, i.e. uint8 ..
uint64, int8 .. int64, float16/32/64 and complex64 with any numpy, plus bfloat16 and the
byte-wide float8 types where numpy takes them through DLPack (numpy >= 2.5); for every
other encoding ``rumi.read`` fails to hand the samples to numpy (sub-byte, structured
complex, ML floats on older numpy) or rejects the 16-byte Struct frames of complex128.
"""

from __future__ import annotations

import numpy as np
import pytest
import rumi
from conftest import UTM33N, WGS84, same_bits, samples
from peer import PEER_READABLE, PEER_WRITABLE, peer_header, peer_read, peer_write

import rumimm
from rumimm.format.blob import Header
from rumimm.format.dtypes import DTYPES

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
    # the prediction asks numpy, not the peer; a peer that reads something else wrongly fails here too
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


@pytest.mark.slow
def test_a_scene_written_on_the_process_pool_is_read_exactly_by_the_reference(tmp_path, monkeypatch):
    import rumimm.writer.writer as W
    from rumimm.synthetic import eo_scene

    a = eo_scene(4, 300, 260, "uint16", seed=3)
    monkeypatch.setattr(W, "PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(W, "PROCESS_START_MIN_BYTES", 0)
    blob = rumimm.write(tmp_path / "s.rumi", a, tile=64, threads=2, transform=UTM33N, crs=32633)
    assert same_bits(peer_read(tmp_path / "s.rumi", blob), a)
    assert same_bits(peer_read(tmp_path / "s.rumi", blob, b=(2, 4), y=(60, 200), x=(100, 101)), a[2:4, 60:200, 100:101])


# -- byte-level comparison with the reference writer -------------------------------------
# The reference writer is given rumimm's own compressed frames (whatever the codec), so
# every byte of the two files can be compared: header, IFD, external values, frames, blob.
# rumi.frames only cuts square tiles; non-square tiles are compared with the spec's own
# layout in test_writer_layout.py and read back by the reference below.
LAYOUTS = {  # id: ((B, Y, X), tile, unit)
    "1x1": ((1, 1, 1), 16, "tile"),
    "1x1-3-bands-cell": ((3, 1, 1), 16, "cell"),
    "smaller-than-a-tile": ((2, 5, 7), 16, "tile"),
    "smaller-than-a-tile-cell": ((2, 5, 7), 16, "cell"),
    "tile-13-B1": ((1, 30, 45), 13, "tile"),
    "tile-13-B1-cell": ((1, 30, 45), 13, "cell"),
    "exact-multiples-B4": ((4, 32, 48), 16, "tile"),
    "exact-multiples-B4-cell": ((4, 32, 48), 16, "cell"),
    "B5-external-bps": ((5, 20, 9), 8, "tile"),
    "B5-cell": ((5, 20, 9), 8, "cell"),
    "B7": ((7, 17, 17), 8, "tile"),
    "B7-cell": ((7, 17, 17), 8, "cell"),
    "N2-offsets-external": ((1, 9, 20), 10, "tile"),
    "N3-counts-external": ((1, 9, 30), 10, "tile"),
    "N2-by-bands": ((2, 9, 10), 10, "tile"),
    "N3-by-bands": ((3, 9, 10), 10, "tile"),
    "N2-cell": ((2, 9, 20), 10, "cell"),
    "N3-cell": ((2, 9, 30), 10, "cell"),
    "B40": ((40, 6, 5), 4, "tile"),
    "B40-cell": ((40, 6, 5), 4, "cell"),
    "B40-N1-cell": ((40, 3, 3), 4, "cell"),
}
GEOREFS = {
    "none": {},
    "pixel-is-point-only": {"pixel_is_point": True},
    "projected": {"crs": 32633, "transform": UTM33N},
    "geographic-point": {"crs": "EPSG:4326", "transform": WGS84, "pixel_is_point": True},
    "rotated-3857": {"crs": 3857, "transform": (30.0, 0.5, -2e6, 0.25, -30.0, 5e6)},
}


def frames_of(path, blob) -> list[bytes]:
    h = Header.parse(blob)
    data = path.read_bytes()
    return [data[int(h.frame_offsets[k]) : int(h.frame_offsets[k + 1])] for k in range(h.n_frames)]


def reference_rewrite(path, array, tile, unit, frames, geo) -> bytes:
    """Lay ``frames`` out with ``rumi.write`` (cut by ``rumi.frames``); return its blob."""
    table = rumi.frames(array, tile, unit=unit)
    assert len(table) == len(frames)
    for frame, data in zip(table, frames, strict=True):
        frame.compressed = data
    kwargs = {"pixel_is_point": geo.get("pixel_is_point", False)}
    if "crs" in geo:
        kwargs.update(crs=geo["crs"], transform=tuple(float(v) for v in geo["transform"]))
    _, header = rumi.write(str(path), table, **kwargs)
    return bytes(header)


def assert_reference_agrees(tmp_path, a, tile, unit, geo, **kw) -> None:
    ours = tmp_path / "ours.rumi"
    blob = rumimm.write(ours, a, tile=tile, unit=unit, **geo, **kw)
    theirs = tmp_path / "theirs.rumi"
    assert reference_rewrite(theirs, a, tile, unit, frames_of(ours, blob), geo) == blob
    assert ours.read_bytes() == theirs.read_bytes()
    # the reference's view of rumimm's blob equals its view of the file it rebuilds the blob from
    assert rumi.RumiHeader(blob).to_dict() == rumi.RumiHeader.from_path(str(ours)).to_dict()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_the_reference_writer_given_rumimms_frames_writes_every_byte_rumimm_wrote(tmp_path, rng, layout):
    shape, tile, unit = LAYOUTS[layout]
    a = rng.integers(0, 3000, shape, dtype=np.uint16)
    for geo in GEOREFS.values():
        assert_reference_agrees(tmp_path, a, tile, unit, geo)
    # and both readers read it back exactly, with and without the blob
    blob = rumimm.write(tmp_path / "r.rumi", a, tile=tile, unit=unit)
    with rumimm.open(tmp_path / "r.rumi", header=blob) as img:
        assert same_bits(img[:], a)
    assert same_bits(peer_read(tmp_path / "r.rumi", blob), a)
    assert same_bits(peer_read(tmp_path / "r.rumi"), a)


@pytest.mark.parametrize("name", sorted(PEER_WRITABLE))
def test_the_reference_writer_agrees_byte_for_byte_for_every_encoding_it_writes(tmp_path, rng, name):
    for layout in ("1x1", "N3-cell", "B5-external-bps", "B7-cell"):
        shape, tile, unit = LAYOUTS[layout]
        a = samples(name, shape, rng)
        assert_reference_agrees(tmp_path, a, tile, unit, {})
        blob = rumimm.write(tmp_path / "r.rumi", a, tile=tile, unit=unit)
        with rumimm.open(tmp_path / "r.rumi", header=blob) as img:
            assert same_bits(img[:], a), layout
        if name in PEER_READABLE:
            assert same_bits(peer_read(tmp_path / "r.rumi", blob), a), layout
            assert same_bits(peer_read(tmp_path / "r.rumi"), a), layout


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize(("shape", "tile"), [((1, 21, 50), (8, 32)), ((5, 40, 9), (32, 8)), ((3, 7, 70), (5, 16))])
def test_the_reference_reads_non_square_tiles_and_sees_the_same_header(tmp_path, rng, shape, tile, unit):
    a = rng.integers(-900, 900, shape, dtype=np.int16)
    path = tmp_path / "ns.rumi"
    blob = rumimm.write(path, a, tile=tile, unit=unit, transform=UTM33N, crs=32633)
    view = rumi.RumiHeader.from_path(str(path)).to_dict()
    assert view == rumi.RumiHeader(blob).to_dict()
    tl, tw = tile
    assert view["tile"] == [tw, tl]  # the peer lists (width, length)
    assert (view["tiles_across"], view["tiles_down"]) == (-(-shape[2] // tw), -(-shape[1] // tl))
    assert same_bits(peer_read(path, blob), a) and same_bits(peer_read(path), a)
    assert same_bits(peer_read(path, blob, y=(3, shape[1]), x=(1, shape[2] - 1)), a[:, 3:, 1:-1])
