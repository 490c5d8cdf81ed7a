"""Every byte rumimm.write lays out.

The prefix rebuilt from the spec text alone; the same input writes the same bytes; a golden
digest; the format version and the named codec presets.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import spec_reader
from conftest import UTM33N, WGS84
from writer_helpers import assert_compliant, assert_round_trip

import rumimm
from rumimm import codec, validate
from rumimm.format.blob import Header


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


@pytest.mark.parametrize(("shape", "tile", "unit"), SPEC_LAYOUTS, ids=str)
def test_every_byte_before_the_first_frame_is_the_spec_layout(tmp_path, rng, shape, tile, unit):
    a = rng.integers(0, 2000, shape, dtype=np.int32)
    for kwargs, (model, epsg, raster) in SPEC_GEOREFS:
        path = tmp_path / "s.rumi"
        blob = rumimm.write(path, a, tile=tile, unit=unit, **kwargs)
        counts = [int(c) for c in Header.parse(blob).frame_byte_counts]
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


def test_the_frame_format_version_is_pinned_and_can_be_chosen(tmp_path, scene):
    rumimm.write(tmp_path / "d.rumi", scene, tile=16)
    assert validate(tmp_path / "d.rumi").frame_format_version == 24
    blob = rumimm.write(tmp_path / "v.rumi", scene, tile=16, frame_format_version=codec.MAX_FORMAT_VERSION)
    rep = validate(tmp_path / "v.rumi", header=blob, decode=True)
    assert rep.ok and rep.frame_format_version == codec.MAX_FORMAT_VERSION
    assert_round_trip(tmp_path / "v.rumi", blob, scene)


@pytest.mark.parametrize("preset", ["delta", "transpose", "generic", "store"])
def test_named_codec_presets_write_lossless_compliant_files(tmp_path, scene, preset):
    path = tmp_path / f"{preset}.rumi"
    blob = rumimm.write(path, scene, tile=16, codec=preset, verify=True)
    assert_compliant(path, blob)
    assert_round_trip(path, blob, scene)
