"""Georeferencing: transform <-> 16 doubles, EPSG <-> 16-short GeoKey directory."""

from __future__ import annotations

import math
import re

import numpy as np
import pyproj
import pytest
from conftest import affine_times
from hypothesis import given
from hypothesis import strategies as st

import rumimm
from rumimm.errors import CRSError, RumiError
from rumimm.format import georef
from rumimm.format.georef import (
    UNDEFINED_MATRIX,
    Georef,
    crs_kind,
    geokeys,
    matrix_from_transform,
    parse_geokeys,
    resolve_crs,
    resolve_transform,
    transform_from_matrix,
)

UTM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


# -- transform <-> matrix ------------------------------------------------------------------
def test_the_matrix_layout_is_the_spec_layout():
    m = matrix_from_transform((1.5, 0.25, 100.0, -0.125, -2.0, 200.0))
    assert m == (1.5, 0.25, 0.0, 100.0,
                 -0.125, -2.0, 0.0, 200.0,
                 0.0, 0.0, 0.0, 0.0,
                 0.0, 0.0, 0.0, 1.0)  # fmt: skip
    assert len(m) == 16 and all(isinstance(v, float) for v in m)


@pytest.mark.slow
@given(st.tuples(finite, finite, finite, finite, finite, finite))
def test_six_coefficients_survive_the_16_double_round_trip_both_ways(t):
    m = matrix_from_transform(t)
    assert transform_from_matrix(m) == tuple(float(v) for v in t)
    assert m[8:15] == (0.0,) * 7 and m[2] == m[6] == 0.0 and m[15] == 1.0
    assert matrix_from_transform(transform_from_matrix(m)) == m


def test_the_undefined_matrix_is_identity_with_a_zero_third_row():
    assert UNDEFINED_MATRIX == (1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)


class FakeAffine:
    """Duck-types rasterio/affine ``Affine``: a..f plus to_gdal."""

    a, b, c, d, e, f = UTM

    def to_gdal(self):
        return (self.c, self.a, self.b, self.f, self.d, self.e)


@pytest.mark.parametrize("t", [UTM, list(UTM), np.array(UTM), FakeAffine(), (*UTM, 0, 0, 1),
                               np.array([*UTM, 0.0, 0.0, 1.0]).reshape(3, 3)], ids=str)
def test_resolve_transform_accepts_six_coefficients_an_affine_or_a_3x3(t):
    assert resolve_transform(t) == UTM


@pytest.mark.parametrize(("bad", "match"), [
    ((1, 2, 3, 4, 5), "6 or 9 coefficients"),
    ((*UTM, 0, 1, 1), "must end with 0, 0, 1"),
    ((1.0, 0.0, 0.0, 0.0, float("nan"), 0.0), "finite"),
    ((0.0, 0.0, 5.0, 0.0, 0.0, 5.0), "singular"),
    ((1.0, 2.0, 0.0, 2.0, 4.0, 0.0), "singular"),
    (None, "6 or 9 numbers"),
])
def test_resolve_transform_rejects_what_cannot_be_a_raster_transform(bad, match):
    with pytest.raises(ValueError, match=match):
        resolve_transform(bad)


# -- CRS: only projected or geographic EPSG codes, typed by the registry ------------------------
def test_epsg_4326_is_geographic_and_32633_projected_in_the_registry():
    assert crs_kind(4326) == georef.MODEL_GEOGRAPHIC
    assert crs_kind(32633) == georef.MODEL_PROJECTED
    # same answer as PROJ's database, not the number
    assert pyproj.CRS.from_epsg(4326).is_geographic and pyproj.CRS.from_epsg(32633).is_projected


@pytest.mark.parametrize(("code", "match"), [
    (5773, "Vertical CRS; .*ordinary GeoTIFF"),  # EGM96 height
    (7415, "Compound CRS; .*ordinary GeoTIFF"),  # Amersfoort / RD New + NAP height
    (4978, "Geocentric CRS, neither projected nor geographic; .*ordinary GeoTIFF"),
    (1025, "EPSG:1025 is not defined in the EPSG registry"),
    (1023, "outside 1024..32766; .*GeoTIFF"),
    (32767, "outside 1024..32766"),
    (0, "outside"),
    (100000, "outside"),
])
def test_codes_rumi_cannot_store_are_rejected_with_crs_error(code, match):
    with pytest.raises(CRSError, match=match) as info:
        resolve_crs(code)
    assert isinstance(info.value, RumiError)
    with pytest.raises(CRSError):
        geokeys(code)


@pytest.mark.parametrize("crs", [4326, "EPSG:4326", "epsg:4326", " EPSG: 4326 ", "4326", np.int64(4326),
                                 pyproj.CRS.from_epsg(4326)], ids=repr)
def test_resolve_crs_takes_an_int_an_epsg_string_or_an_object_with_to_epsg(crs):
    assert resolve_crs(crs) == 4326


def test_resolve_crs_uses_to_epsg_of_any_object():
    class Rasterio:
        def to_epsg(self):
            return 32633

    class NoCode:
        def to_epsg(self):
            return None

    assert resolve_crs(Rasterio()) == 32633
    with pytest.raises(CRSError, match=r"has no EPSG code; .*GeoTIFF"):
        resolve_crs(NoCode())


@pytest.mark.slow
def test_a_crs_object_must_be_an_epsg_crs_exactly_not_approximately():
    import rasterio.crs

    wkt = pyproj.CRS.from_epsg(3857).to_wkt()
    assert resolve_crs(rasterio.crs.CRS.from_epsg(32633)) == 32633
    assert resolve_crs(rasterio.crs.CRS.from_wkt(wkt)) == 3857  # an EPSG CRS spelled as WKT
    assert resolve_crs(pyproj.CRS.from_wkt(wkt)) == 3857
    # a user-defined CRS that pyproj and rasterio match to EPSG:32633 at their default 70 %
    approx = pyproj.CRS("+proj=utm +zone=33 +ellps=WGS84")
    assert approx.to_epsg() == 32633
    for crs in (approx, rasterio.crs.CRS.from_proj4("+proj=utm +zone=33 +ellps=WGS84")):
        with pytest.raises(CRSError, match=r"matches EPSG:32633 only approximately; pass crs=32633"):
            resolve_crs(crs)
    with pytest.raises(CRSError, match="has no EPSG code"):
        resolve_crs(pyproj.CRS("+proj=merc +lon_0=17 +ellps=GRS80"))


@pytest.mark.parametrize("bad", [True, "WGS84", "+proj=longlat +datum=WGS84", "ESRI:54009", 4326.0, None, b"4326"])
def test_anything_but_an_epsg_code_is_rejected(bad):
    with pytest.raises(CRSError):
        resolve_crs(bad)


# -- GeoKeyDirectoryTag -------------------------------------------------------------------
def test_geokeys_for_a_geographic_crs_use_key_2048():
    assert geokeys(4326) == (1, 1, 0, 3, 1024, 0, 1, 2, 1025, 0, 1, 1, 2048, 0, 1, 4326)


def test_geokeys_for_a_projected_crs_use_key_3072_and_record_pixel_is_point():
    assert geokeys(32633, pixel_is_point=True) == (1, 1, 0, 3, 1024, 0, 1, 1, 1025, 0, 1, 2, 3072, 0, 1, 32633)


@pytest.mark.parametrize("point", [False, True])
def test_no_crs_writes_model_type_0_and_geographic_type_0(point):
    keys = geokeys(None, point)
    assert keys == (1, 1, 0, 3, 1024, 0, 1, 0, 1025, 0, 1, 2 if point else 1, 2048, 0, 1, 0)
    g, bad = parse_geokeys(keys, UNDEFINED_MATRIX)
    assert bad == []
    assert g == Georef(None, None, None, point) and g.crs is None


@pytest.mark.parametrize(("code", "geographic"), [(4326, True), (32633, False), (3857, False), (4258, True)])
def test_parse_geokeys_reads_back_what_geokeys_wrote(code, geographic):
    g, bad = parse_geokeys(geokeys(code), matrix_from_transform(UTM))
    assert bad == []
    assert g.epsg == code and g.crs == f"EPSG:{code}" and g.geographic is geographic
    assert g.transform == UTM and g.pixel_is_point is False


def _keys(**over):
    k = list(geokeys(32633))
    names = {"version": 0, "revision": 1, "minor": 2, "nkeys": 3, "model": 7, "raster": 11, "key": 12, "code": 15,
             "loc": 13, "count": 14}
    for name, v in over.items():
        k[names[name]] = v
    return k


GEO_VIOLATIONS = {
    "model projected but key 2048": (_keys(key=2048), "GTModelTypeGeoKey 1 needs key 3072, found key 2048"),
    "model geographic but key 3072": (_keys(model=2, code=4326), "GTModelTypeGeoKey 2 needs key 2048, found key 3072"),
    "EPSG below 1024": (_keys(code=1000), "EPSG code 1000 is outside 1024..32766"),
    "EPSG above 32766": (_keys(code=40000), "EPSG code 40000 is outside 1024..32766"),
    "EPSG not in the registry": (_keys(code=1025), "EPSG:1025 is not defined in the EPSG registry"),
    "registry says geographic": (_keys(code=4326), "EPSG:4326 is geographic in the EPSG registry, but "
                                                   "GTModelTypeGeoKey says projected"),
    "registry says projected": (_keys(model=2, key=2048), "EPSG:32633 is projected in the EPSG registry, but "
                                                          "GTModelTypeGeoKey says geographic"),
    "vertical code": (_keys(code=5773), "Vertical CRS"),
    "raster type 0": (_keys(raster=0), "GTRasterTypeGeoKey is 0, expected 1"),
    "raster type 3": (_keys(raster=3), "GTRasterTypeGeoKey is 3"),
    "model type 3": (_keys(model=3), "GTModelTypeGeoKey is 3"),
    "three keys but header says four": (_keys(nkeys=4), "header is \\(1, 1, 0, 4\\)"),
    "key directory version 2": (_keys(version=2), "header is"),
    "key revision 2": (_keys(revision=2), "header is \\(1, 2, 0, 3\\)"),
    "minor revision 1 (GeoTIFF 1.1; rumi-eo rejects it too)": (_keys(minor=1), "header is \\(1, 1, 1, 3\\), expected "
                                                                             "\\(1, 1, 0, 3\\)"),
    "key value stored out of line": (_keys(loc=34736), "must be stored inline"),
    "key count 2": (_keys(count=2), "must be stored inline"),
}


@pytest.mark.parametrize("name", list(GEO_VIOLATIONS))
def test_a_georeferencing_violation_is_reported(name):
    keys, match = GEO_VIOLATIONS[name]
    _, bad = parse_geokeys(keys, matrix_from_transform(UTM))
    assert bad, name
    assert any(re.search(match, msg) for msg in bad), bad


def test_without_a_crs_the_matrix_must_be_the_undefined_matrix():
    _, bad = parse_geokeys(geokeys(None), matrix_from_transform(UTM))
    assert len(bad) == 1 and "undefined matrix" in bad[0]


def test_without_a_crs_key_2048_must_hold_0():
    keys = list(geokeys(None))
    keys[15] = 4326
    _, bad = parse_geokeys(keys, UNDEFINED_MATRIX)
    assert any("needs key 2048 = 0" in m for m in bad)
    keys = list(geokeys(None))
    keys[12] = 3072
    _, bad = parse_geokeys(keys, UNDEFINED_MATRIX)
    assert any("needs key 2048 = 0" in m for m in bad)


@pytest.mark.parametrize("i", [2, 6, 8, 9, 10, 11, 12, 13, 14])
def test_a_non_zero_z_term_or_third_row_is_reported(i):
    m = list(matrix_from_transform(UTM))
    m[i] = 1.0
    _, bad = parse_geokeys(geokeys(32633), m)
    assert any("matrix must be" in msg for msg in bad)


def test_a_last_matrix_term_other_than_one_is_reported_but_non_finite_coefficients_are_not():
    m = list(matrix_from_transform(UTM))
    m[15] = 2.0
    assert any("matrix must be" in msg for msg in parse_geokeys(geokeys(32633), m)[1])
    m = list(matrix_from_transform(UTM))
    m[3], m[5] = float("inf"), float("nan")  # no rule forbids them; the reference writes them
    g, bad = parse_geokeys(geokeys(32633), m)
    assert bad == [] and g.epsg == 32633
    assert g.transform[2] == float("inf") and math.isnan(g.transform[4])
    m = list(georef.UNDEFINED_MATRIX)
    m[0] = float("nan")  # without a CRS the matrix must be the undefined one exactly
    assert any("undefined matrix" in msg for msg in parse_geokeys(geokeys(None), m)[1])


def test_wrong_sized_tags_are_reported_not_indexed():
    g, bad = parse_geokeys(geokeys(4326)[:12], UNDEFINED_MATRIX)
    assert g is None and bad == ["georeferencing tags have the wrong size"]


def test_registry_checks_can_be_skipped_for_offline_use():
    g, bad = parse_geokeys(_keys(code=1025), matrix_from_transform(UTM), registry=False)
    assert bad == [] and g.epsg == 1025


# -- PixelIsPoint: the rasterio-shaped members read the transform as rasterio does ------------
@pytest.fixture
def point_file_and_geotiff(tmp_path):
    """A PixelIsPoint rumi file (transform UTM: pixel indices -> points) and the same data as a Point GeoTIFF."""
    rasterio = pytest.importorskip("rasterio")
    from affine import Affine

    data = np.arange(20 * 30, dtype=np.uint16).reshape(1, 20, 30)
    rumimm.write(tmp_path / "p.rumi", data, tile=16, transform=UTM, crs=32633, pixel_is_point=True)
    corners = affine_times(Affine(*UTM), Affine.translation(-0.5, -0.5))  # GDAL's transform: the pixel corners
    with rasterio.open(tmp_path / "p.tif", "w", driver="GTiff", count=1, height=20, width=30, dtype="uint16",
                       crs="EPSG:32633", transform=corners) as dst:
        dst.update_tags(AREA_OR_POINT="Point")
        dst.write(data)
    with rasterio.Env(GTIFF_POINT_GEO_IGNORE=True), rasterio.open(tmp_path / "p.tif") as ds:
        assert ds.transform == Affine(*UTM)  # the GeoTIFF stores the rumi file's point transform
    with rumimm.open(tmp_path / "p.rumi") as img, rasterio.open(tmp_path / "p.tif") as ds:
        assert ds.tags()["AREA_OR_POINT"] == "Point" and ds.transform == corners
        yield img, ds, tmp_path


def test_a_point_files_xy_bounds_index_and_windows_are_rasterios(point_file_and_geotiff):
    from affine import Affine
    from rasterio.windows import from_bounds

    img, ds, _ = point_file_and_geotiff
    assert img.pixel_is_point and img.transform == Affine(*UTM)  # the stored transform, unshifted
    assert img.xy(0, 0) == (500000.0, 4200000.0) == tuple(float(v) for v in ds.xy(0, 0))  # the point
    rows, cols = np.array([0, 3, 19, 11]), np.array([0, 29, 5, 17])
    for offset in ("center", "ul", "ur", "ll", "lr"):
        got, want = img.xy(rows, cols, offset=offset), ds.xy(rows, cols, offset=offset)
        assert np.allclose(got[0], want[0], rtol=0, atol=1e-6) and np.allclose(got[1], want[1], rtol=0, atol=1e-6)
        assert img.xy(7, 9, offset=offset) == tuple(float(v) for v in ds.xy(7, 9, offset=offset))
    assert img.bounds == tuple(ds.bounds) == (499995.0, 4199805.0, 500295.0, 4200005.0)
    assert img.res == ds.res == (10.0, 10.0)
    for x, y in ((500006, 4199994), (500004, 4199996), (499996, 4200004), (500000, 4200000), (500123.4, 4199876.5)):
        assert img.index(x, y) == tuple(int(v) for v in ds.index(x, y)), (x, y)
    assert img.index(500006, 4199994) == (1, 1)
    xs, ys = img.xy(rows, cols)
    assert img.index(xs, ys)[0].tolist() == rows.tolist() and img.index(xs, ys)[1].tolist() == cols.tolist()
    boxes = ((500020, 4199900, 500060, 4199980), (499995, 4199805, 500295, 4200005),
             (500001, 4199951, 500049, 4199999))
    for box in boxes:
        w, f = img.window_from_bounds(*box), from_bounds(*box, ds.transform)
        assert (w.col_off, w.row_off) == (math.floor(f.col_off), math.floor(f.row_off))
        assert (w.col_off + w.width, w.row_off + w.height) == (math.ceil(f.col_off + f.width),
                                                                 math.ceil(f.row_off + f.height))
        assert np.array_equal(img.read(window=w), ds.read(window=w))
    assert img.window_from_bounds(500020, 4199900, 500060, 4199980).flatten() == (2, 2, 5, 9)
    from rasterio.windows import Window

    assert img.window_transform(((2, 7), (3, 9))) == ds.window_transform(Window(3, 2, 6, 5))
    assert img.profile["transform"] == ds.transform  # a GeoTIFF made with it puts the pixels where this file does


def test_a_point_files_xy_are_its_xarray_coordinates_and_a_cube_agrees(point_file_and_geotiff):
    xr = pytest.importorskip("xarray")
    img, ds, tmp_path = point_file_and_geotiff
    with xr.open_dataset(tmp_path / "p.rumi", engine="rumimm") as xds:
        x, y = xds["band_data"].x.values, xds["band_data"].y.values
    assert np.allclose(img.xy(np.zeros(30), np.arange(30))[0], x, rtol=0, atol=1e-6)
    assert np.allclose(img.xy(np.arange(20), np.zeros(20))[1], y, rtol=0, atol=1e-6)
    rumimm.write(tmp_path / "q.rumi", np.zeros((1, 20, 30), np.uint16), tile=16, transform=UTM, crs=32633,
                 pixel_is_point=True)
    with rumimm.Cube([tmp_path / "p.rumi", tmp_path / "q.rumi"]) as cube:
        assert cube.pixel_is_point and cube.transform == img.transform
        assert cube.bounds == img.bounds == tuple(ds.bounds)
        assert cube.xy(7, 9) == img.xy(7, 9) and cube.index(500006, 4199994) == (1, 1)
        assert cube.window_from_bounds(500020, 4199900, 500060, 4199980) == img.window_from_bounds(
            500020, 4199900, 500060, 4199980)


def test_a_point_file_without_a_crs_indexes_pixels_as_rasterio(tmp_path):
    rumimm.write(tmp_path / "u.rumi", np.zeros((1, 8, 8), np.uint8), tile=8, pixel_is_point=True)
    with rumimm.open(tmp_path / "u.rumi") as img:
        assert img.pixel_is_point and img.transform is None and img.bounds is None
        assert img.index(2.5, 3.5) == (3, 2) and img.xy(3, 2) == (2.5, 3.5)  # rasterio's identity, unshifted
