"""``rumimm.convert`` and ``rumimm convert``: spec 0.1.0 <-> spec 0.2 keeping the frame bytes.

The peer check (rumi-eo 0.26.1 reads the converted files) is in ``test_interop_v2.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import spec_reader_v2 as spec
from affine import Affine

import rumimm
from rumimm.cli import main
from rumimm.errors import RumiError

DATA = Path(__file__).parent / "data" / "v2"
sys.path.insert(0, str(DATA))
import make_fixtures_v2 as make_fixtures  # noqa: E402  (not tests/data/make_fixtures.py, the 0.1 fixtures)


def _frames_v1(path) -> bytes:
    blob = rumimm.build_blob(path)
    hdr = rumimm.Header.parse(blob)
    return Path(path).read_bytes()[hdr.base_frame_offset:]


def _frames_v2(path) -> bytes:
    p = spec.parse_file(path)
    return p["data"][p["offsets"][0]:p["offsets"][-1] + p["counts"][-1]]


@pytest.mark.parametrize(("unit", "layout"), [("tile", 0), ("cell", 1)])
def test_a_01_file_converts_to_02_with_its_frames_and_back_to_the_same_bytes(tmp_path, rng, unit, layout):
    arr = rng.integers(0, 5000, (3, 37, 29)).astype(np.uint16)
    v1 = tmp_path / "a.rumi"
    rumimm.write(v1, arr, tile=16, unit=unit, transform=(10, 0, 500000, 0, -10, 4e6), crs=32633)
    v2 = tmp_path / "b.rumi"
    blob = rumimm.convert(v1, v2, time=["2026-06-01"])
    p = spec.parse_file(v2)
    assert p["unit"] == layout and p["texts"] == ["band 1", "band 2", "band 3"]
    assert _frames_v2(v2) == _frames_v1(v1)
    assert blob == rumimm.build_blob(v2) == spec.blob_of(p)
    with rumimm.open(v2, blob) as img:
        np.testing.assert_array_equal(img[...], arr)
        assert img.crs == "EPSG:32633" and img.transform == Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0)
    back = tmp_path / "c.rumi"
    rumimm.convert(v2, back, spec="0.1")
    assert back.read_bytes() == v1.read_bytes()


def test_complex128_frames_are_re_encoded_as_float64_components_for_02(tmp_path, rng):
    arr = (rng.normal(size=(2, 20, 20)) + 1j * rng.normal(size=(2, 20, 20))).astype(np.complex128)
    rumimm.write(tmp_path / "a.rumi", arr, tile=8)
    rumimm.convert(tmp_path / "a.rumi", tmp_path / "b.rumi", descriptions=["re", "im"], time=["2026-01-01"])
    assert rumimm.validate(tmp_path / "b.rumi", decode=True).ok
    with rumimm.open(tmp_path / "b.rumi") as img:
        np.testing.assert_array_equal(img[...], arr)
        assert img.descriptions == ("re", "im")
    rumimm.convert(tmp_path / "b.rumi", tmp_path / "c.rumi", spec="0.1")
    with rumimm.open(tmp_path / "c.rumi") as img:
        np.testing.assert_array_equal(img[...], arr)


@pytest.mark.parametrize("name", ["img_u0", "img_u1", "img_u2", "img_b1", "one_frame", "dtype_complex128",
                                  "dtype_bool"])
def test_reference_02_files_of_one_step_convert_to_01(tmp_path, name):
    out = tmp_path / "v1.rumi"
    blob = rumimm.convert(DATA / f"{name}.rumi", out, spec="0.1")
    assert rumimm.build_blob(out) == blob and rumimm.validate(out, decode=True).ok
    with rumimm.open(out) as img:
        assert img.spec == "0.1"
        np.testing.assert_array_equal(img[...], make_fixtures.source(name).reshape(img.shape))
    if name in ("img_u0", "img_u1", "one_frame"):  # frames kept (interleaved and complex128 ones are re-encoded)
        assert _frames_v1(out) == _frames_v2(DATA / f"{name}.rumi")


def test_what_the_other_spec_cannot_hold_is_refused_before_writing(tmp_path):
    with pytest.raises(RumiError, match=r"has 3 time steps; spec 0.1 holds one"):
        rumimm.convert(DATA / "cube_u4.rumi", tmp_path / "x.rumi", spec="0.1")
    rumimm.write(tmp_path / "i4.rumi", np.zeros((1, 4, 4), ml_dtypes.int4), tile=4)
    with pytest.raises(RumiError, match=r"int4 has no encoding in rumi spec 0.2"):
        rumimm.convert(tmp_path / "i4.rumi", tmp_path / "x.rumi", time=["2026-01-01"])
    rumimm.write(tmp_path / "u8.rumi", np.zeros((1, 4, 4), np.uint8), tile=4)
    with pytest.raises(TypeError, match="pass time="):
        rumimm.convert(tmp_path / "u8.rumi", tmp_path / "x.rumi")
    with pytest.raises(ValueError, match="must not be the source"):
        rumimm.convert(DATA / "img_u0.rumi", DATA / "img_u0.rumi", spec="0.1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i4.rumi", "u8.rumi"]


def test_the_command_line_converts_both_ways(tmp_path, rng, capsys):
    arr = rng.integers(0, 255, (2, 30, 20)).astype(np.uint8)
    rumimm.write(tmp_path / "a.rumi", arr, tile=16)
    assert main(["convert", str(tmp_path / "a.rumi"), str(tmp_path / "b.rumi")]) == 2
    assert "pass --time ISO" in capsys.readouterr().err
    assert main(["convert", str(tmp_path / "a.rumi"), str(tmp_path / "b.rumi"), "--time", "2026-01-01/2026-02-01",
                 "--band", "B4, Red", "--band", "B8, NIR"]) == 0
    with rumimm.open(tmp_path / "b.rumi") as img:
        assert img.descriptions == ("B4, Red", "B8, NIR") and img.time_kind == "interval"
    assert main(["convert", str(tmp_path / "b.rumi"), str(tmp_path / "c.rumi")]) == 0
    assert (tmp_path / "c.rumi").read_bytes() == (tmp_path / "a.rumi").read_bytes()


def test_info_index_and_validate_commands_describe_02_files(tmp_path, capsys):
    path = DATA / "cube_interval.rumi"
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rumi 0.2" in out and "(2, 2, 9, 7) (time, band, y, x)" in out
    assert "frame unit     h w (tile frames, frame_unit 0)" in out
    assert "interval: 2026-01-01/2026-01-16, 2026-02-01/2026-02-15" in out
    assert f"file size      {path.stat().st_size:,} bytes" in out
    assert main(["info", "--json", str(DATA / "img_u0.rumi")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["spec"] == "0.2" and d["bands"] == ["B2, Blue", "B3, Green", "B4, Red"] and d["crs"] == "EPSG:32633"
    assert main(["index", "-o", str(tmp_path / "h.blob"), str(path)]) == 0
    assert (tmp_path / "h.blob").read_bytes() == (DATA / "cube_interval.header").read_bytes()
    assert main(["validate", "--header", str(tmp_path / "h.blob"), str(path)]) == 0
    assert "(spec 0.2)" in capsys.readouterr().out


def test_a_geotiff_converts_to_02_with_its_band_descriptions(tmp_path, rng, capsys):
    rasterio = pytest.importorskip("rasterio")
    from rasterio.transform import from_origin

    arr = rng.integers(0, 4000, (2, 40, 30)).astype(np.uint16)
    tif = tmp_path / "a.tif"
    with rasterio.open(tif, "w", driver="GTiff", height=40, width=30, count=2, dtype="uint16", crs="EPSG:32633",
                       transform=from_origin(500000, 4100000, 10, 10)) as ds:
        ds.write(arr)
        ds.descriptions = ("B4, Red", "B8, NIR")
    assert main(["convert", str(tif), str(tmp_path / "a.rumi"), "--format", "0.2"]) == 2
    assert "--time ISO" in capsys.readouterr().err
    assert main(["convert", str(tif), str(tmp_path / "a.rumi"), "--time", "2026-07-01", "--tile", "16"]) == 0
    with rumimm.open(tmp_path / "a.rumi") as img:
        assert img.spec == "0.2" and img.descriptions == ("B4, Red", "B8, NIR") and img.crs == "EPSG:32633"
        np.testing.assert_array_equal(img[...], arr)
