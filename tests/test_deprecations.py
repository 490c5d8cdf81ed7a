"""Every renamed public name keeps working for one release, warning with the name of its successor.

docs/migration.md lists the renames.  Everywhere else in the tests (and the docs' code) an
old name is an error: pyproject.toml's ``filterwarnings`` turns these DeprecationWarnings into
exceptions (``RenamedWarning``, a DeprecationWarning), and ``pytest.warns`` below catches them first.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from affine import Affine

import rumimm
from rumimm.errors import RenamedWarning
from rumimm.reader.image import georef_block, raw_frame

UTM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
TIME = ["2026-01-01"]


@pytest.fixture
def scene():
    return (np.arange(3 * 40 * 48, dtype=np.uint16) % 1000).reshape(3, 40, 48)


@pytest.fixture
def geo(tmp_path, scene):
    path = tmp_path / "g.rumi"
    blob = rumimm.write(path, scene, tile=16, transform=UTM, crs=32633, offsets=[1.0, 2.0, 3.0])
    return path, blob


def _warns(old: str, new: str):
    """pytest.warns for the one message every rename gives."""
    import re

    return pytest.warns(RenamedWarning, match=f"^{re.escape(old)} is deprecated; use {re.escape(new)}")


# -- top-level names ----------------------------------------------------------------------

def test_rumimm_index_is_build_blob(geo):
    path, blob = geo
    with _warns("rumimm.index", "rumimm.build_blob"):
        old = rumimm.index
    assert old is rumimm.build_blob and old(path) == blob


def test_rumimm_profile_is_profile_codecs():
    with _warns("rumimm.profile", "rumimm.profile_codecs"):
        old = rumimm.profile
    assert old is rumimm.profile_codecs


def test_from_rumimm_import_an_old_name_warns_too():
    with _warns("rumimm.index", "rumimm.build_blob"):
        from rumimm import index
    assert index is rumimm.build_blob


def test_old_names_are_not_listed_and_a_missing_name_still_raises():
    assert "index" not in rumimm.__all__ and "profile" not in rumimm.__all__
    assert {"build_blob", "profile_codecs"} <= set(rumimm.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rumimm.nope


def test_the_warning_points_at_the_callers_line():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rumimm.profile
    assert caught[0].filename == __file__ and issubclass(caught[0].category, DeprecationWarning)


# -- Header ----------------------------------------------------------------------------

def test_header_offsets_and_counts_are_frame_offsets_and_frame_byte_counts(geo):
    _, blob = geo
    h = rumimm.Header.parse(blob)
    with _warns("Header.offsets", "Header.frame_offsets"):
        offsets = h.offsets
    with _warns("Header.counts", "Header.frame_byte_counts"):
        counts = h.counts
    assert offsets is h.frame_offsets and counts is h.frame_byte_counts
    assert int(offsets[-1]) == h.file_size and int(counts.sum()) == h.file_size - h.base_frame_offset


# -- Image -----------------------------------------------------------------------------

def test_image_affine_is_transform(geo):
    path, blob = geo
    with rumimm.open(path, blob) as img:
        with _warns("Image.affine", "Image.transform"):
            old = img.affine
        assert old == img.transform == Affine(*UTM) and isinstance(img.transform, Affine)
        assert img.offsets == (1.0, 2.0, 3.0)  # rasterio's meaning: the bands' scale offsets


def test_cube_affine_is_transform(geo):
    path, blob = geo
    with rumimm.Cube([path, path], [blob, blob]) as cube, _warns("Cube.affine", "Cube.transform"):
        assert cube.affine == cube.transform == Affine(*UTM)


def test_an_ungeoreferenced_images_old_affine_stays_the_identity(tmp_path, scene):
    rumimm.write(tmp_path / "u.rumi", scene, tile=16)
    with rumimm.open(tmp_path / "u.rumi") as img, _warns("Image.affine", "Image.transform"):
        assert img.affine == Affine.identity() and img.transform is None


def test_read_bands_is_indexes_from_1(geo, scene):
    path, blob = geo
    with rumimm.open(path, blob) as img:
        with _warns("Image.read(bands=b)", "Image.read(indexes=b + 1)"):
            got = img.read(bands=[2, 0], window=((0, 8), (0, 8)))
        assert np.array_equal(got, img.read([3, 1], window=((0, 8), (0, 8))))
        assert np.array_equal(got, scene[[2, 0], :8, :8])
        with pytest.raises(TypeError, match="1-based"):
            img.read(1, bands=0)


def test_cube_read_bands_is_indexes_from_1(geo, scene):
    path, blob = geo
    with rumimm.Cube([path], [blob]) as cube, _warns("Cube.read(bands=b)", "Cube.read(indexes=b + 1)"):
        assert np.array_equal(cube.read(bands=1), scene[None, 1])


def test_raw_frame_and_georef_block_are_functions_of_the_module(geo):
    path, blob = geo
    with rumimm.open(path, blob) as img:
        with _warns("Image.raw_frame(k)", "rumimm.reader.image.raw_frame(img, k)"):
            assert img.raw_frame(1) == raw_frame(img, 1)
        with _warns("Image.georef_block()", "rumimm.reader.image.georef_block(img)"):
            assert img.georef_block() == georef_block(img)


def test_open_format_is_spec(geo):
    path, blob = geo
    with _warns("open(format=)", "open(spec=)"), rumimm.open(path, blob, format="0.1") as img:
        assert img.spec == "0.1"
    with _warns("Image(format=)", "Image(spec=)"), rumimm.Image(path, blob, format="0.1") as img:
        assert img.spec == "0.1"
    with pytest.raises(TypeError, match="both format= and spec="):
        rumimm.open(path, blob, format="0.1", spec="0.1")


# -- writers ---------------------------------------------------------------------------

def test_write_format_bands_and_format_version_are_spec_descriptions_and_frame_format_version(tmp_path, scene):
    with _warns("write(format=)", "write(spec=)"), _warns("write(bands=)", "write(descriptions=)"), \
            _warns("write(format_version=)", "write(frame_format_version=)"):
        blob = rumimm.write(tmp_path / "o.rumi", scene, tile=16, format="0.2", bands=["a", "b", "c"], time=TIME,
                            format_version=24)
    new = rumimm.write(tmp_path / "n.rumi", scene, tile=16, spec="0.2", descriptions=["a", "b", "c"], time=TIME,
                       frame_format_version=24)
    assert blob == new and (tmp_path / "o.rumi").read_bytes() == (tmp_path / "n.rumi").read_bytes()
    with rumimm.open(tmp_path / "o.rumi", blob) as img:
        assert img.spec == "0.2" and img.descriptions == ("a", "b", "c")
    assert rumimm.validate(tmp_path / "o.rumi", header=blob).frame_format_version == 24


def test_giving_an_old_keyword_and_its_successor_is_refused(tmp_path, scene):
    with pytest.raises(TypeError, match=r"write\(\) got both bands= and descriptions="):
        rumimm.write(tmp_path / "x.rumi", scene, spec="0.2", descriptions=["a", "b", "c"], bands=["a", "b", "c"],
                     time=TIME)
    assert not (tmp_path / "x.rumi").exists()


def test_writer_takes_the_old_keywords(tmp_path, scene):
    with _warns("Writer(format=)", "Writer(spec=)"), _warns("Writer(bands=)", "Writer(descriptions=)"), \
            _warns("Writer(format_version=)", "Writer(frame_format_version=)"), \
            rumimm.Writer(tmp_path / "w.rumi", scene.shape, scene.dtype, tile=16, format="0.2", bands=["a", "b", "c"],
                          time=TIME, format_version=24) as w:
        for r in range(w.rows):
            y0, y1 = w.row_span(r)
            w.write_row(r, scene[:, y0:y1])
    assert w.spec == "0.2" and w.descriptions == ("a", "b", "c")


def test_convert_format_and_bands_are_spec_and_descriptions(geo, tmp_path):
    path, _ = geo
    with _warns("convert(format=)", "convert(spec=)"), _warns("convert(bands=)", "convert(descriptions=)"):
        old = rumimm.convert(path, tmp_path / "o.rumi", format="0.2", bands=["x", "y", "z"], time=TIME)
    assert old == rumimm.convert(path, tmp_path / "n.rumi", spec="0.2", descriptions=["x", "y", "z"], time=TIME)
    with rumimm.open(tmp_path / "o.rumi", old) as img:
        assert img.descriptions == ("x", "y", "z")


def test_from_geotiff_format_and_bands_are_spec_and_descriptions(geo, tmp_path):
    path, _ = geo
    with rumimm.open(path) as img:
        rumimm.to_geotiff(img, tmp_path / "g.tif")
    with _warns("from_geotiff(format=)", "from_geotiff(spec=)"), \
            _warns("from_geotiff(bands=)", "from_geotiff(descriptions=)"):
        out = rumimm.from_geotiff(tmp_path / "g.tif", tmp_path / "o.rumi", tile=16, format="0.2",
                                  bands=["x", "y", "z"], time=TIME)
    with rumimm.open(tmp_path / "o.rumi", out) as img:
        assert img.spec == "0.2" and img.descriptions == ("x", "y", "z")


def test_to_rumi_format_and_bands_are_spec_and_descriptions(tmp_path, scene):
    xr = pytest.importorskip("xarray")
    da = xr.DataArray(scene, dims=("band", "y", "x"))
    with _warns("to_rumi(format=)", "to_rumi(spec=)"), _warns("to_rumi(bands=)", "to_rumi(descriptions=)"):
        blob = rumimm.to_rumi(da, tmp_path / "o.rumi", tile=16, format="0.2", bands=["x", "y", "z"], time=TIME)
    with rumimm.open(tmp_path / "o.rumi", blob) as img:
        assert img.spec == "0.2" and img.descriptions == ("x", "y", "z")


def test_an_old_name_outside_these_tests_is_an_error():
    """The filter in pyproject.toml: without pytest.warns an old name raises."""
    with pytest.raises(RenamedWarning, match=r"rumimm\.index is deprecated; use rumimm\.build_blob"):
        rumimm.index


def test_report_format_version_is_frame_format_version(geo):
    path, blob = geo
    rep = rumimm.validate(path, header=blob)
    with _warns("Report.format_version", "Report.frame_format_version"):
        assert rep.format_version == rep.frame_format_version == 24
