"""rumimm.write's georeferencing: the EPSG code, model type and transform stored as the spec places them."""

from __future__ import annotations

import pytest
import spec_reader
from conftest import UTM33N, WGS84
from writer_helpers import assert_compliant

import rumimm
from rumimm import validate
from rumimm.reader.image import georef_block


# -- georeferencing ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("crs", "transform", "geographic"),
    [(32633, UTM33N, False), ("EPSG:4326", WGS84, True)],
)
def test_georeferenced_files_carry_the_epsg_code_and_transform(tmp_path, scene, crs, transform, geographic):
    path = tmp_path / "geo.rumi"
    blob = rumimm.write(path, scene, tile=16, transform=transform, crs=crs, pixel_is_point=geographic)
    assert_compliant(path, blob)
    g = validate(path).georef
    assert g.epsg == int(str(crs).removeprefix("EPSG:")) and g.geographic is geographic
    assert g.transform == transform and g.pixel_is_point is geographic
    assert spec_reader.parse_file(path)["georef"] is not None


@pytest.mark.parametrize(("crs", "model", "key"), [
    (4087, 1, 3072),  # WGS 84 / World Equidistant Cylindrical: projected, among geographic-looking codes
    (3824, 2, 2048),  # TWD97: geographic, among projected-looking codes
    (4258, 2, 2048),
    (2056, 1, 3072),
])
def test_the_model_type_and_crs_key_come_from_the_epsg_registry(tmp_path, scene, crs, model, key):
    path = tmp_path / "k.rumi"
    degrees = (0.001, 0.0, 121.0, 0.0, -0.001, 24.0)  # a geographic CRS refuses metre coordinates
    blob = rumimm.write(path, scene, tile=16, transform=UTM33N if model == 1 else degrees, crs=crs)
    keys = spec_reader.parse_file(path)["geokeys"]
    assert keys == (1, 1, 0, 3, 1024, 0, 1, model, 1025, 0, 1, 1, key, 0, 1, crs)
    assert_compliant(path, blob)


def test_a_pyproj_crs_and_an_affine_are_accepted(tmp_path, scene):
    import pyproj
    from affine import Affine

    blob = rumimm.write(tmp_path / "a.rumi", scene, tile=16, transform=Affine(*UTM33N), crs=pyproj.CRS(32633))
    assert validate(tmp_path / "a.rumi").georef.transform == UTM33N
    assert blob == rumimm.write(tmp_path / "b.rumi", scene, tile=16, transform=UTM33N, crs=32633)


def test_without_georeferencing_the_undefined_matrix_and_model_type_zero_are_stored(tmp_path, scene):
    path = tmp_path / "plain.rumi"
    blob = rumimm.write(path, scene, tile=16, pixel_is_point=True)
    assert_compliant(path, blob)
    g = validate(path).georef
    assert g.epsg is None and g.transform is None and g.pixel_is_point
    f = spec_reader.parse_file(path)
    assert tuple(f["matrix"]) == spec_reader.UNDEFINED_MATRIX and f["geokeys"][7] == 0


def test_the_stored_georeferencing_tags_of_another_file_are_written_as_they_are(tmp_path, scene):
    from rumimm.format.georef import split_georef_block

    rumimm.write(tmp_path / "a.rumi", scene, transform=(0.5, 0.0, 12.0, 0.0, -0.5, 48.0), crs=4326,
                 pixel_is_point=True)
    with rumimm.open(tmp_path / "a.rumi") as img:
        block = georef_block(img)
    matrix, keys = split_georef_block(block)
    with rumimm.Writer(tmp_path / "b.rumi", scene.shape, scene.dtype, georef=(matrix, keys)) as w:
        for r in range(w.rows):
            w.write_row(r, scene[:, slice(*w.row_span(r)), :])
    with rumimm.open(tmp_path / "b.rumi") as img:
        assert georef_block(img) == block and img.crs == "EPSG:4326" and img.georef.pixel_is_point


def test_stored_georeferencing_tags_replace_transform_and_crs_and_must_follow_the_spec(tmp_path, scene):
    from rumimm.format.georef import UNDEFINED_MATRIX

    keys = (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 1, 2048, 0, 1, 0)
    with pytest.raises(ValueError, match="georef= gives the georeferencing tags as stored, so it replaces"):
        rumimm.Writer(tmp_path / "b.rumi", scene.shape, scene.dtype, georef=(UNDEFINED_MATRIX, keys), crs=4326)
    with pytest.raises(rumimm.RumiError, match="georef: tag 34735: header is"):
        rumimm.Writer(tmp_path / "b.rumi", scene.shape, scene.dtype, georef=(UNDEFINED_MATRIX, (9,) * 16))
    with pytest.raises(TypeError, match="georef must be"):
        rumimm.Writer(tmp_path / "b.rumi", scene.shape, scene.dtype, georef=UNDEFINED_MATRIX)
    assert not (tmp_path / "b.rumi").exists()
