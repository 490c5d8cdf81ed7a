"""rumimm.write and rumimm.Writer refuse bad arrays, arguments and paths by name.

Each is refused before any file is made or any frame compressed.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import UTM33N

import rumimm
from rumimm import codec
from rumimm.errors import CRSError, RumiError
from rumimm.writer import args as W_ARGS


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
        ({"frame_format_version": 99}, ValueError, "format_version must be an int in .*got 99"),
        ({"frame_format_version": 10}, ValueError, "format_version must be an int in"),
        ({"frame_format_version": 24.0}, TypeError, "format_version must be an int"),
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
    assert rumimm.build_blob(tmp_path / "b.rumi") == blob and rumimm.clean(path) == []


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
