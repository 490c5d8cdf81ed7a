"""rumimm.write's georeferencing: the EPSG code, model type and transform stored as the spec places them."""

from __future__ import annotations

import pytest
import spec_reader
from conftest import UTM33N, WGS84
from writer_helpers import assert_compliant

import rumimm
from rumimm import validate


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
