"""``rumimm.open`` on spec 0.2 files written by rumi-eo 0.26.1 (``tests/data/v2``).

Every frame layout the reference writes reads back as its source array: (B, Y, X) when
T = 1, (T, B, Y, X) otherwise, with numpy indexing on every axis; band texts and time
come back as ``Image.descriptions`` and ``Image.time``.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from affine import Affine

import rumimm
from rumimm.errors import BlobError, FormatError, WindowError

DATA = Path(__file__).parent / "data" / "v2"
sys.path.insert(0, str(DATA))
import make_fixtures_v2 as make_fixtures  # noqa: E402  (not tests/data/make_fixtures.py, the 0.1 fixtures)

MANIFEST = json.loads((DATA / "manifest.json").read_text())
NAMES = sorted(MANIFEST)


def _open(name, with_header=True, **kw):
    header = (DATA / f"{name}.header").read_bytes() if with_header else None
    return rumimm.open(DATA / f"{name}.rumi", header, **kw)


@pytest.mark.parametrize("with_header", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_every_reference_layout_reads_back_its_source_array(name, with_header):
    want = make_fixtures.source(name)
    with _open(name, with_header) as img:
        assert img.spec == "0.2"
        assert img.shape == want.shape and img.ndim == want.ndim
        assert img.dtype == want.dtype
        assert img.frame_unit == MANIFEST[name]["frame_layout"]
        got = img[...]
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.asarray(img), want)


KEYS_4D = [
    (1,), (slice(None), 0), (-1, slice(None, None, -1), slice(2, 9), slice(None, 5)), ([2, 0], 1),
    (slice(None), [1, 0], slice(3, 17, 3), slice(1, 15)), (Ellipsis, 4, 7), (0, 1, 19, 17),
    (np.array([True, False, True]), slice(None), slice(0, 20, 7)), ([0, 2], [1, 0]), ([[1], [0]], [0, 1], 3),
    (slice(1, None), None, 0),
]


@pytest.mark.parametrize("name", ["cube_u0", "cube_u9", "cube_u3", "cube_u4", "cube_u5", "cube_u6", "cube_u7",
                                  "cube_u8"])
@pytest.mark.parametrize("key", KEYS_4D, ids=range(len(KEYS_4D)))
def test_a_cube_takes_numpy_indexing_on_every_axis(name, key):
    want = make_fixtures.source(name)
    with _open(name) as img:
        got = img[key]
    np.testing.assert_array_equal(got, want[key])
    assert got.shape == want[key].shape


KEYS_3D = [(1,), (slice(None), slice(3, 17, 2), slice(1, 15)), ([2, 0], 5), (-1, -1, -1),
           (slice(None, None, -1), slice(None), [0, 17, 3])]


@pytest.mark.parametrize("name", ["img_u0", "img_u1", "img_u2"])
@pytest.mark.parametrize("key", KEYS_3D, ids=range(len(KEYS_3D)))
def test_an_image_takes_numpy_indexing(name, key):
    want = make_fixtures.source(name)
    with _open(name) as img:
        np.testing.assert_array_equal(img[key], want[key])


def test_out_of_range_indices_raise_window_errors_naming_the_time_axis():
    with _open("cube_u4") as img:
        with pytest.raises(WindowError, match="axis 0 \\(time\\) with size 3"):
            img[3]
        with pytest.raises(WindowError, match="axis 1 \\(band\\) with size 2"):
            img[:, 2]


def test_band_texts_and_time_come_from_the_trailer():
    with _open("img_u0") as img:
        assert img.descriptions == ("B2, Blue", "B3, Green", "B4, Red")
        assert img.time == [dt.date(2026, 1, 1)] and img.time_kind == "instant"
        assert img.count == 3 and img.time_count == 1
        assert img.crs == "EPSG:32633" and img.transform == Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0)
        d = img.to_dict()
        assert d["bands"] == ["B2, Blue", "B3, Green", "B4, Red"] and d["time"] == ["2026-01-01"]
    with _open("cube_interval", with_header=False) as img:
        assert img.time == [(dt.date(2026, 1, 1), dt.date(2026, 1, 16)), (dt.date(2026, 2, 1), dt.date(2026, 2, 15))]
        assert img.time_kind == "interval"
    with _open("cube_seconds") as img:
        utc = dt.UTC
        assert img.time == [dt.datetime(2026, 1, 1, tzinfo=utc), dt.datetime(2026, 1, 1, 6, 0, 7, tzinfo=utc),
                            dt.datetime(2026, 3, 1, 12, tzinfo=utc)]
        assert img.trailer.datetime64().dtype == np.dtype("datetime64[s]")
    with _open("one_frame") as img:
        assert img.time == [dt.date(1969, 7, 20)]
        assert img.crs == "EPSG:4326" and img.pixel_is_point
    with rumimm.open(DATA.parent / "f32_tile_b1.rumi") as img:
        assert img.spec == "0.1" and img.descriptions == (None,) and img.time is None and img.time_count == 1


def test_read_of_a_cube_gives_every_step_of_the_bands_and_window():
    want = make_fixtures.source("cube_u9")
    with _open("cube_u9") as img:
        np.testing.assert_array_equal(img.read(), want)
        np.testing.assert_array_equal(img.read(2, window=((2, 12), (3, 9))), want[:, 1, 2:12, 3:9])  # 1-based
        np.testing.assert_array_equal(img.read([2, 1]), want[:, [1, 0]])


def test_a_header_of_another_file_is_refused(tmp_path):  # of the other spec: test_reader.py
    with pytest.raises(BlobError, match="truncated, or the blob belongs to another file"):
        rumimm.open(DATA / "cube_u4.rumi", (DATA / "cube_u3.header").read_bytes())
    with pytest.raises(BlobError, match="does not describe this file: IFD entry 11 \\(tag 65000\\)"):
        rumimm.open(DATA / "cube_u9.rumi", (DATA / "cube_u0.header").read_bytes())
    with pytest.raises(BlobError):
        rumimm.open(DATA / "img_u1.rumi", (DATA / "img_u0.header").read_bytes())
    data = (DATA / "img_u1.rumi").read_bytes()
    (tmp_path / "cut.rumi").write_bytes(data[:-4])
    with pytest.raises(BlobError, match="trailer"):
        rumimm.open(tmp_path / "cut.rumi", (DATA / "img_u1.header").read_bytes())
    with pytest.raises(FormatError, match="trailer"):
        rumimm.open(tmp_path / "cut.rumi")
