"""GeoTIFF in and out (rumimm.integrations.geotiff) and the rasterio-shaped surface of Image and Cube."""

from __future__ import annotations

import math
import os
import re
import tracemalloc
import warnings

import numpy as np
import pytest
import rasterio
from affine import Affine
from conftest import affine_times
from rasterio.windows import Window

import rumimm
from rumimm.errors import CRSError, RumiError, RumiWarning
from rumimm.integrations.geotiff import from_geotiff, gtiff_profile, to_geotiff

NORTH_UP = Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
ROTATED = Affine(9.5, 1.25, 399960.0, 0.75, -9.75, 5000040.0)


def make_tif(path, array, *, transform=NORTH_UP, crs="EPSG:32633", block=32, **extra):
    b, h, w = array.shape
    profile = dict(driver="GTiff", dtype=array.dtype.name, count=b, height=h, width=w, tiled=True,
                   photometric="minisblack", blockxsize=block, blockysize=block, **extra)
    if crs is not None:
        profile.update(crs=crs, transform=transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(path, "w", **profile) as ds:
            ds.write(array)
    return path


def sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (rng.normal(0, 1000, shape)).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)


def read_tif(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        ds = rasterio.open(path)
    with ds:
        return ds.read(), ds.transform, ds.crs, ds.profile


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "int16", "float32"])
@pytest.mark.parametrize(("shape", "transform", "tile"), [((1, 77, 101), NORTH_UP, 32), ((4, 45, 70), ROTATED, 16)],
                         ids=["1band-north-up", "4bands-rotated"])
def test_geotiff_to_rumi_to_geotiff_keeps_pixels_transform_and_crs(tmp_path, dtype, shape, transform, tile):
    data = sample(dtype, shape)
    src = make_tif(tmp_path / "in.tif", data, transform=transform)
    blob = from_geotiff(src, tmp_path / "x.rumi", tile=tile, header_out=tmp_path / "x.blob")
    assert (tmp_path / "x.blob").read_bytes() == blob == rumimm.build_blob(tmp_path / "x.rumi")
    with rumimm.open(tmp_path / "x.rumi", header=blob) as img:
        assert img.dtype == np.dtype(dtype) and img.tile == (tile, tile)
        assert np.array_equal(img[:], data)
        assert img.transform == transform and img.crs == "EPSG:32633"
        to_geotiff(img, tmp_path / "out.tif")
    back, t, crs, profile = read_tif(tmp_path / "out.tif")
    assert np.array_equal(back, data) and back.dtype == np.dtype(dtype)
    assert t == transform and crs.to_epsg() == 32633
    assert profile["tiled"] and profile["compress"] == "zstd"
    assert not [f for f in os.listdir(tmp_path) if ".tmp" in f]


def test_cell_frames_and_an_ungeoreferenced_image_round_trip(tmp_path):
    data = sample("int16", (3, 40, 50))
    rumimm.write(tmp_path / "c.rumi", data, tile=24, unit="cell")
    to_geotiff(tmp_path / "c.rumi", tmp_path / "c.tif")
    back, t, crs, profile = read_tif(tmp_path / "c.tif")
    assert np.array_equal(back, data) and crs is None and t.is_identity
    assert profile["interleave"] == "pixel" and profile["blockxsize"] == 32  # 24 rounded up to GDAL's 16s
    blob = from_geotiff(tmp_path / "c.tif", tmp_path / "d.rumi", tile=24, unit="cell")
    with rumimm.open(tmp_path / "d.rumi", header=blob) as img:
        assert np.array_equal(img[:], data) and img.crs is None and img.frame_unit == "cell"


@pytest.mark.parametrize("dtype", ["int8", "uint32", "int64", "float64", "complex64", "complex128"])
def test_every_other_gdal_type_round_trips_rumi_to_geotiff_to_rumi(tmp_path, dtype):
    rng = np.random.default_rng(2)
    data = (rng.normal(0, 1e3, (2, 19, 23)) * (1 + 1j if np.dtype(dtype).kind == "c" else 1)).astype(dtype)
    rumimm.write(tmp_path / "a.rumi", data, tile=16, transform=ROTATED, crs=32633)
    to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif")
    blob = from_geotiff(tmp_path / "a.tif", tmp_path / "b.rumi", tile=16)
    with rumimm.open(tmp_path / "b.rumi", header=blob) as img:
        assert img.dtype == np.dtype(dtype) and np.array_equal(img[:], data)
        assert img.transform == ROTATED and img.crs == "EPSG:32633"


def _first_ifd_tags(path, codes):
    """{code: first value} of the first IFD's ``codes`` (classic TIFF or BigTIFF, little endian), read with struct."""
    import struct

    raw = open(path, "rb").read()
    assert raw[:2] == b"II", "GDAL writes little-endian TIFF here"
    big = struct.unpack_from("<H", raw, 2)[0] == 43
    offset = struct.unpack_from("<Q" if big else "<I", raw, 8 if big else 4)[0]
    count = struct.unpack_from("<Q" if big else "<H", raw, offset)[0]
    entry, first = (20, offset + 8) if big else (12, offset + 2)
    short = {3: "<H", 4: "<I", 16: "<Q"}
    found = {}
    for i in range(count):
        at = first + i * entry
        code, typ = struct.unpack_from("<HH", raw, at)
        if code in codes:  # the first value is stored inline for the SHORT/LONG tags asked for here
            found[code] = struct.unpack_from(short[typ], raw, at + (12 if big else 8))[0]
    return found


@pytest.mark.parametrize(("dtype", "nbits"), [("bool", 1), ("uint2", 2), ("uint4", 4), ("float16", 16)])
def test_sub_byte_and_half_samples_travel_as_gdal_nbits(tmp_path, dtype, nbits):
    dt = rumimm.DTYPES[dtype]
    rng = np.random.default_rng(1)
    if dtype == "float16":
        data = rng.normal(0, 100, (2, 33, 47)).astype(dt)
    else:
        data = rng.integers(0, 2 ** nbits, (2, 33, 47)).astype(np.uint8).view(dt)
    rumimm.write(tmp_path / "s.rumi", data, tile=16, transform=NORTH_UP, crs=32633)
    to_geotiff(tmp_path / "s.rumi", tmp_path / "s.tif")
    # The file itself holds nbits-bit samples (BitsPerSample 258; SampleFormat 339: 1 uint, 3 IEEE float),
    # whatever the GDAL version; how GDAL presents them changed in GDAL 3.11, which added a Float16 type.
    tags = _first_ifd_tags(tmp_path / "s.tif", (258, 339))
    assert tags[258] == nbits and tags.get(339, 1) == (3 if dtype == "float16" else 1)
    with rasterio.open(tmp_path / "s.tif") as ds:
        gdal_has_float16 = tuple(int(v) for v in rasterio.__gdal_version__.split(".")[:2]) >= (3, 11)
        if dtype == "float16" and gdal_has_float16:
            assert ds.dtypes[0] == "float16" and "NBITS" not in ds.tags(1, ns="IMAGE_STRUCTURE")
        else:  # sub-byte samples, and halves before GDAL 3.11: Byte/Float32 with NBITS
            assert ds.tags(1, ns="IMAGE_STRUCTURE")["NBITS"] == str(nbits)
            assert ds.dtypes[0] == ("float32" if dtype == "float16" else "uint8")
        assert np.array_equal(ds.read().astype(np.float32), data.astype(np.float32))
    blob = from_geotiff(tmp_path / "s.tif", tmp_path / "t.rumi", tile=16)
    with rumimm.open(tmp_path / "t.rumi", header=blob) as img:
        assert img.dtype == dt and np.array_equal(img[:].view(np.uint8 if nbits < 16 else np.uint16),
                                                  data.view(np.uint8 if nbits < 16 else np.uint16))


def test_pixel_is_point_keeps_its_matrix_unshifted_both_ways(tmp_path):
    data = sample("uint16", (1, 20, 30))
    rumimm.write(tmp_path / "p.rumi", data, tile=16, transform=NORTH_UP, crs=32633, pixel_is_point=True)
    to_geotiff(tmp_path / "p.rumi", tmp_path / "p.tif")
    with rasterio.open(tmp_path / "p.tif") as ds:
        assert ds.tags()["AREA_OR_POINT"] == "Point"
        assert ds.transform == affine_times(NORTH_UP, Affine.translation(-0.5, -0.5))  # GDAL's usual half-pixel shift
    blob = from_geotiff(tmp_path / "p.tif", tmp_path / "q.rumi", tile=16)
    with rumimm.open(tmp_path / "q.rumi", header=blob) as img:
        assert img.pixel_is_point and img.transform == NORTH_UP


def test_types_geotiff_cannot_hold_are_refused_with_what_to_do(tmp_path):
    data = np.zeros((8, 8), rumimm.DTYPES["int4"])
    rumimm.write(tmp_path / "i4.rumi", data, tile=8)
    with pytest.raises(RumiError, match="no sample type for int4; cast"):
        to_geotiff(tmp_path / "i4.rumi", tmp_path / "i4.tif")
    assert os.listdir(tmp_path) == ["i4.rumi"]


@pytest.mark.parametrize("threads", [0, -1, "2", 2.0, True, [2]])
def test_threads_are_refused_as_write_refuses_them(tmp_path, threads):
    data = sample("uint8", (1, 16, 16))
    rumimm.write(tmp_path / "a.rumi", data, tile=16)
    with pytest.raises((TypeError, ValueError)) as by_write:
        rumimm.write(tmp_path / "b.rumi", data, tile=16, threads=threads)
    with pytest.raises(type(by_write.value), match=f"^{re.escape(str(by_write.value))}$"):
        to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", threads=threads)
    assert sorted(os.listdir(tmp_path)) == ["a.rumi"]


def test_numpy_int_threads_are_accepted_as_write_accepts_them(tmp_path):
    data = sample("uint8", (1, 16, 16))
    rumimm.write(tmp_path / "a.rumi", data, tile=16, threads=np.int64(2))
    to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", threads=np.int64(2))
    assert np.array_equal(read_tif(tmp_path / "a.tif")[0], data)


def test_exported_files_get_the_usual_permissions(tmp_path):
    rumimm.write(tmp_path / "a.rumi", sample("uint8", (1, 16, 16)), tile=16)
    mask = os.umask(0o022)
    try:
        to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif")
        rumimm.quicklook(tmp_path / "a.rumi", tmp_path / "a.png")
    finally:
        os.umask(mask)
    assert (tmp_path / "a.tif").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "a.png").stat().st_mode & 0o777 == 0o644


def test_a_failed_export_leaves_an_existing_file_untouched(tmp_path):
    rumimm.write(tmp_path / "a.rumi", sample("uint8", (1, 16, 16)), tile=16)
    (tmp_path / "a.tif").write_bytes(b"old")
    with pytest.raises(ValueError, match=r"compress must be one of .*zstd"):
        to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", compress="no-such-codec")

    def interrupt(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", progress=interrupt)
    assert (tmp_path / "a.tif").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["a.rumi", "a.tif"]


@pytest.mark.parametrize("cog", [False, True])
def test_an_export_over_a_geotiff_takes_away_the_sidecar_that_described_it(tmp_path, cog):
    """GDAL keeps nodata and descriptions in ``NAME.aux.xml``; replacing NAME must not leave the old one to
    describe the new file (every pixel of it read as nodata), and a failed export keeps both."""
    a = np.ones((1, 16, 16), np.uint8)
    rumimm.write(tmp_path / "a.rumi", a, tile=16)
    side = tmp_path / "a.tif.aux.xml"
    old = ('<PAMDataset><PAMRasterBand band="1"><Description>stale</Description><NoDataValue>1</NoDataValue>'
           '</PAMRasterBand></PAMDataset>')
    (tmp_path / "a.tif").write_bytes(b"old")
    side.write_text(old)
    with pytest.raises(ValueError, match="compress"):
        to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", compress="no-such-codec", cog=cog)
    assert side.read_text() == old
    to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", cog=cog)
    assert not side.exists()
    with rasterio.open(tmp_path / "a.tif") as ds:
        assert ds.nodata is None and ds.descriptions == (None,) and ds.read_masks(1).all()
    assert sorted(os.listdir(tmp_path)) == ["a.rumi", "a.tif"]


def test_cog_export_writes_a_cloud_optimized_geotiff(tmp_path):
    data = sample("uint16", (2, 300, 260))
    rumimm.write(tmp_path / "a.rumi", data, tile=128, transform=NORTH_UP, crs=32633)
    to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", cog=True)
    with rasterio.open(tmp_path / "a.tif") as ds:
        assert ds.tags(ns="IMAGE_STRUCTURE").get("LAYOUT") == "COG"
        assert ds.overviews(1) and np.array_equal(ds.read(), data) and ds.transform == NORTH_UP


def test_nodata_descriptions_tags_and_colour_maps_survive_the_round_trip(tmp_path):
    data = sample("uint8", (1, 40, 40))
    src = make_tif(tmp_path / "rich.tif", data, nodata=0)
    with rasterio.open(src, "r+") as ds:
        ds.set_band_description(1, "classes")
        ds.update_tags(source="survey")
        ds.update_tags(1, meaning="land cover")
        ds.write_colormap(1, {0: (0, 0, 0, 255), 1: (255, 0, 0, 255)})
        ds.build_overviews([2])
    with pytest.warns(RumiWarning) as record:
        blob = from_geotiff(src, tmp_path / "r.rumi", tile=16)
    assert len(record) == 1  # only what neither rumi nor its sidecar holds
    message = str(record[0].message)
    assert message == f"{src}: rumi cannot hold overviews (1 level): not in {tmp_path / 'r.rumi'}"
    with rumimm.open(tmp_path / "r.rumi", header=blob) as img:
        assert np.array_equal(img[:], data)
        assert img.nodata == 0.0 and img.descriptions == ("classes",)
        assert img.tags() == {"source": "survey"} and img.tags(1) == {"meaning": "land cover"}
        assert img.colormap(1)[1] == (255, 0, 0, 255) and img.colorinterp == ("palette",)
    to_geotiff(tmp_path / "r.rumi", tmp_path / "back.tif")
    with rasterio.open(tmp_path / "back.tif") as ds:
        assert ds.nodata == 0.0 and ds.descriptions == ("classes",)
        assert ds.tags()["source"] == "survey" and ds.tags(1)["meaning"] == "land cover"
        assert ds.colormap(1)[1] == (255, 0, 0, 255) and ds.colorinterp[0].name == "palette"
        assert np.array_equal(ds.read(), data)


def test_alpha_rgb_units_scales_offsets_and_nan_nodata_survive_the_round_trip(tmp_path):
    from rasterio.enums import ColorInterp

    data = sample("float32", (4, 32, 32))
    src = make_tif(tmp_path / "f.tif", data, nodata=float("nan"))
    with rasterio.open(src, "r+") as ds:
        ds.colorinterp = (ColorInterp.red, ColorInterp.green, ColorInterp.blue, ColorInterp.alpha)
        ds.units = ("W m-2 sr-1", "W m-2 sr-1", "W m-2 sr-1", "")
        ds.scales = (0.5, 0.5, 0.5, 1.0)
        ds.offsets = (-1.0, -1.0, -1.0, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        blob = from_geotiff(src, tmp_path / "f.rumi", tile=16)
    with rumimm.open(tmp_path / "f.rumi", header=blob) as img:
        assert all(math.isnan(v) for v in img.nodatavals)
        assert img.colorinterp == ("red", "green", "blue", "alpha")
        assert img.units == ("W m-2 sr-1",) * 3 + (None,)
        assert img.scales == (0.5, 0.5, 0.5, 1.0) and img.offsets == (-1.0, -1.0, -1.0, 0.0)
    to_geotiff(tmp_path / "f.rumi", tmp_path / "back.tif")
    with rasterio.open(tmp_path / "back.tif") as ds:
        assert math.isnan(ds.nodata)
        assert [c.name for c in ds.colorinterp] == ["red", "green", "blue", "alpha"]
        assert ds.units == ("W m-2 sr-1",) * 3 + (None,) or ds.units == ("W m-2 sr-1",) * 3 + ("",)
        assert ds.scales == (0.5, 0.5, 0.5, 1.0) and ds.offsets == (-1.0, -1.0, -1.0, 0.0)
        assert np.array_equal(ds.read(), data, equal_nan=True)


def test_a_mask_band_is_listed_as_lost(tmp_path):
    data = sample("uint8", (3, 32, 32))
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True):
        with rasterio.open(tmp_path / "m.tif", "w", driver="GTiff", dtype="uint8", count=3, height=32, width=32,
                           crs="EPSG:4326", transform=Affine(0.1, 0, 10, 0, -0.1, 50), photometric="rgb") as ds:
            ds.write(data)
            ds.write_mask(np.ones((32, 32), bool))
    with pytest.warns(RumiWarning) as record:
        from_geotiff(tmp_path / "m.tif", tmp_path / "m.rumi", tile=32)
    assert len(record) == 1
    assert "a mask band" in str(record[0].message)
    with rumimm.open(tmp_path / "m.rumi") as img:
        assert img.colorinterp == ("red", "green", "blue")


def test_a_nodata_the_rumi_dtype_cannot_hold_is_listed(tmp_path):
    data = (sample("uint8", (1, 16, 16)) & 1).astype("uint8")
    with rasterio.open(tmp_path / "b.tif", "w", driver="GTiff", dtype="uint8", count=1, height=16, width=16,
                       nbits=1, nodata=255, crs="EPSG:32633", transform=NORTH_UP) as ds:
        ds.write(data)
    with pytest.warns(RumiWarning, match="nodata 255.0 of band 1 is not a bool value"):
        from_geotiff(tmp_path / "b.tif", tmp_path / "b.rumi", tile=16)
    with rumimm.open(tmp_path / "b.rumi") as img:
        assert img.dtype == np.bool_ and img.nodata is None


def test_a_plain_geotiff_converts_without_a_warning(tmp_path):
    src = make_tif(tmp_path / "plain.tif", sample("uint16", (3, 20, 20)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_geotiff(src, tmp_path / "p.rumi", tile=16)


def test_a_crs_without_its_own_code_is_stored_as_the_epsg_code_gdal_identifies(tmp_path):
    data = sample("uint8", (1, 16, 16))
    utm = make_tif(tmp_path / "utm.tif", data, crs="+proj=utm +zone=33 +ellps=WGS84 +units=m +no_defs")
    with pytest.warns(RumiWarning, match="has no EPSG code of its own; stored as EPSG:32633: it has EPSG:32633's "
                                         "projection, parameters and ellipsoid") as record:
        blob = from_geotiff(utm, tmp_path / "n.rumi", tile=16)
    assert len(record) == 1
    with rumimm.open(tmp_path / "n.rumi", header=blob) as img:
        assert img.crs == "EPSG:32633" and img.transform == NORTH_UP
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # saying which code it is silences the identification
        from_geotiff(utm, tmp_path / "n.rumi", tile=16, crs=32633)


def test_a_crs_no_epsg_code_fits_is_refused_naming_the_nearest(tmp_path):
    data = sample("uint8", (1, 16, 16))
    custom = make_tif(tmp_path / "custom.tif", data, crs="+proj=tmerc +lon_0=13.3 +k=0.9999 +ellps=GRS80 +units=m",
                      transform=Affine(10, 0, 400000, 0, -10, 5800000))
    with pytest.raises(CRSError, match=r"custom.tif: the CRS .* has no EPSG code with the same projection, parameters "
                                       "and ellipsoid; nearest: EPSG:") as info:
        from_geotiff(custom, tmp_path / "c.rumi", tile=16)
    assert "gdalwarp -t_srs" in str(info.value)
    geos = make_tif(tmp_path / "geos.tif", data, crs="+proj=geos +h=35785831 +lon_0=0 +ellps=WGS84 +units=m",
                    transform=Affine(3000, 0, -100000, 0, -3000, 100000))
    with pytest.raises(CRSError, match="has no EPSG equivalent"):
        from_geotiff(geos, tmp_path / "g.rumi", tile=16)
    assert not (tmp_path / "c.rumi").exists() and not (tmp_path / "g.rumi").exists()
    blob = from_geotiff(geos, tmp_path / "g.rumi", tile=16, drop_georef=True)  # the pixels alone
    with rumimm.open(tmp_path / "g.rumi", header=blob) as img:
        assert img.crs is None and np.array_equal(img[:], data)


def test_a_geotransform_without_a_crs_needs_crs_or_drop_georef(tmp_path):
    data = sample("uint8", (1, 16, 16))
    bare = make_tif(tmp_path / "bare.tif", data, crs=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(bare, "r+") as ds:
            ds.transform = NORTH_UP
    with pytest.raises(CRSError, match=r"geotransform but no CRS; pass crs=<EPSG code> .* or drop_georef=True"):
        from_geotiff(bare, tmp_path / "b.rumi", tile=16)
    with pytest.raises(CRSError, match=r"EPSG:4326 is geographic .* beyond longitudes"):
        from_geotiff(bare, tmp_path / "b.rumi", tile=16, crs=4326)  # metres are not degrees
    blob = from_geotiff(bare, tmp_path / "b.rumi", tile=16, crs=32633)
    with rumimm.open(tmp_path / "b.rumi", header=blob) as img:
        assert img.crs == "EPSG:32633"
    blob = from_geotiff(bare, tmp_path / "d.rumi", tile=16, drop_georef=True)
    with rumimm.open(tmp_path / "d.rumi", header=blob) as img:
        assert img.crs is None and img.transform is None


def test_a_crs_argument_contradicting_the_files_crs_is_refused(tmp_path):
    src = make_tif(tmp_path / "utm.tif", sample("uint8", (1, 16, 16)))  # EPSG:32633
    with pytest.raises(CRSError, match=r"crs=EPSG:32634 was given, but the file's CRS .* is EPSG:32633"):
        from_geotiff(src, tmp_path / "x.rumi", tile=16, crs=32634)


@pytest.mark.parametrize(("name", "crs", "transform", "code"), [
    ("utm-north-wgs84-ellipsoid", "+proj=utm +zone=18 +ellps=WGS84 +units=m +no_defs",
     Affine(30, 0, 300000, 0, -30, 4500000), 32618),
    ("utm-south-wgs84-ellipsoid", "+proj=utm +zone=23 +south +ellps=WGS84 +units=m +no_defs",
     Affine(30, 0, 300000, 0, -30, 7400000), 32723),
    ("laea-epsg3035-parameters", "+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m",
     Affine(100, 0, 4321000, 0, -100, 3210000), 3035),
    ("esri-wkt-of-5070", "ESRI::5070", Affine(30, 0, 1000000, 0, -30, 2000000), 5070),
    ("longlat-wgs84-ellipsoid", "+proj=longlat +ellps=WGS84 +no_defs", Affine(0.01, 0, 10, 0, -0.01, 50), 4326),
    ("british-national-grid-proj", "+proj=tmerc +lat_0=49 +lon_0=-2 +k=0.9996012717 +x_0=400000 +y_0=-100000 "
     "+ellps=airy +units=m +no_defs", Affine(25, 0, 400000, 0, -25, 300000), 27700),
])
def test_crss_gdal_identifies_convert_to_their_code(tmp_path, name, crs, transform, code):
    import pyproj

    if crs.startswith("ESRI::"):  # the WKT ESRI software writes for EPSG:5070
        crs = pyproj.CRS.from_epsg(5070).to_wkt("WKT1_ESRI")
    src = make_tif(tmp_path / f"{name}.tif", sample("uint8", (1, 16, 16)), crs=crs, transform=transform)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RumiWarning)
        blob = from_geotiff(src, tmp_path / "x.rumi", tile=16)
    with rumimm.open(tmp_path / "x.rumi", header=blob) as img:
        assert img.epsg == code


def test_an_unreadable_block_names_the_file_and_gdals_reason(tmp_path):
    src = make_tif(tmp_path / "t.tif", sample("uint16", (1, 64, 64)), compress="deflate", block=16)
    raw = bytearray(src.read_bytes())
    raw[-600:] = b"\xff" * 600  # the last blocks' deflate streams
    (tmp_path / "bad.tif").write_bytes(bytes(raw))
    with pytest.raises(RumiError, match=r"bad.tif: GDAL cannot read rows \d+ to \d+: .*; the file may be truncated") \
            as info:
        from_geotiff(tmp_path / "bad.tif", tmp_path / "bad.rumi", tile=16)
    assert "See previous exception" not in str(info.value)
    assert not (tmp_path / "bad.rumi").exists()


def test_export_to_a_directory_is_refused_before_anything_is_written(tmp_path):
    rumimm.write(tmp_path / "x.rumi", sample("uint8", (1, 16, 16)), tile=16)
    with pytest.raises(IsADirectoryError, match="is a directory"):
        to_geotiff(tmp_path / "x.rumi", tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["x.rumi"]


@pytest.mark.slow
def test_conversion_memory_is_about_one_row_of_tiles(tmp_path):
    bands, size, tile = 2, 2048, 64
    data = sample("uint16", (bands, size, size))
    src = make_tif(tmp_path / "big.tif", data, block=64, compress="none")
    image_bytes, row_bytes = data.nbytes, bands * tile * size * 2
    del data
    rumimm.write(tmp_path / "warm.rumi", np.zeros((1, 8, 8), np.uint16), tile=8)  # compile outside the measurement
    tracemalloc.start()
    try:
        blob = from_geotiff(src, tmp_path / "big.rumi", tile=tile)
        convert_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        with rumimm.open(tmp_path / "big.rumi", header=blob) as img:
            to_geotiff(img, tmp_path / "back.tif", tile=tile)
        export_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert convert_peak < 8 * row_bytes <= image_bytes / 4, (convert_peak, row_bytes, image_bytes)
    assert export_peak < 8 * row_bytes, (export_peak, row_bytes, image_bytes)


def test_progress_is_reported_once_per_row(tmp_path):
    src = make_tif(tmp_path / "in.tif", sample("uint8", (1, 50, 20)))
    seen = []
    from_geotiff(src, tmp_path / "x.rumi", tile=16, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    seen.clear()
    to_geotiff(tmp_path / "x.rumi", tmp_path / "x.tif", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]


# ------------------------------------------------------------------ the rasterio-shaped surface
@pytest.fixture
def rotated(tmp_path):
    data = sample("uint16", (3, 45, 70))
    blob = rumimm.write(tmp_path / "r.rumi", data, tile=(16, 32), transform=ROTATED, crs=32632)
    with rumimm.open(tmp_path / "r.rumi", header=blob) as img:
        yield img, data, tmp_path


def test_transform_is_an_affine_and_pyproj_crs_a_crs(rotated):
    img, _, _ = rotated
    assert img.transform == ROTATED and isinstance(img.transform, Affine)
    assert img.pyproj_crs.to_epsg() == 32632 and img.pyproj_crs.name == "WGS 84 / UTM zone 32N"


def test_index_and_xy_agree_with_rasterio(rotated):
    img, _, _ = rotated
    rows, cols = np.array([0, 3, 44, 17]), np.array([0, 69, 5, 33])
    for offset in ("center", "ul", "ur", "ll", "lr"):
        want = rasterio.transform.xy(ROTATED, rows, cols, offset=offset)
        got = img.xy(rows, cols, offset=offset)
        assert np.allclose(got[0], want[0], rtol=0, atol=1e-6) and np.allclose(got[1], want[1], rtol=0, atol=1e-6)
    xs, ys = img.xy(rows, cols)
    assert img.index(xs, ys)[0].tolist() == rows.tolist() and img.index(xs, ys)[1].tolist() == cols.tolist()
    x, y = img.xy(7, 9)
    assert isinstance(x, float) and img.index(x, y) == (7, 9) == rasterio.transform.rowcol(ROTATED, x, y)
    with pytest.raises(ValueError, match="offset must be one of"):
        img.xy(0, 0, offset="middle")


def test_window_from_bounds_covers_the_box_on_whole_pixels(tmp_path):
    data = sample("uint8", (2, 60, 80))
    blob = rumimm.write(tmp_path / "n.rumi", data, tile=32, transform=NORTH_UP, crs=32633)
    with rumimm.open(tmp_path / "n.rumi", header=blob) as img:
        w = img.window_from_bounds(500100.0, 4200000.0 - 250.0, 500300.0, 4200000.0 - 50.0)
        assert w == Window(10, 5, 20, 20)
        assert np.array_equal(img.read(window=w), data[:, 5:25, 10:30])
        assert img.window_from_bounds(500101.0, 4199751.0, 500299.0, 4199949.0) == Window(10, 5, 20, 20)
        assert img.window_transform(w) == affine_times(NORTH_UP, Affine.translation(10, 5))
        assert img.window_transform(((5, 25), (10, 30))) == img.window_transform(w)
        assert img.window_transform((slice(5, 25), slice(10, 30))) == img.window_transform(w)
        with pytest.raises(ValueError, match="left < right"):
            img.window_from_bounds(1, 0, 0, 1)


def test_block_windows_are_the_frame_grid(rotated):
    img, data, _ = rotated
    blocks = list(img.block_windows())
    assert [ij for ij, _ in blocks] == [(i, j) for i in range(3) for j in range(3)]
    assert blocks[-1][1] == Window(64, 32, 6, 13)
    covered = np.zeros(img.shape[1:], int)
    for _, w in blocks:
        covered[w.toslices()] += 1
        assert np.array_equal(img.read(window=w), data[(slice(None), *w.toslices())])
    assert (covered == 1).all()


def test_profile_opens_a_geotiff_with_rasterio(rotated):
    img, data, tmp_path = rotated
    with rasterio.open(tmp_path / "p.tif", "w", driver="GTiff", **img.profile) as out:
        for _, w in img.block_windows():
            out.write(img.read(window=w), window=w)
    back, t, crs, profile = read_tif(tmp_path / "p.tif")
    assert np.array_equal(back, data) and t == ROTATED and crs.to_epsg() == 32632
    assert profile["blockysize"] == 16 and profile["blockxsize"] == 32 and profile["compress"] == "zstd"
    assert img.profile["predictor"] == 2 and "driver" not in img.profile


def test_profile_picks_the_float_predictor_and_none_without_compression(tmp_path):
    rumimm.write(tmp_path / "f.rumi", np.zeros((1, 8, 8), np.float32), tile=8)
    with rumimm.open(tmp_path / "f.rumi") as img:
        assert img.profile["predictor"] == 3 and "crs" not in img.profile
        plain = gtiff_profile(img, compress=None)
        assert "predictor" not in plain and "compress" not in plain and plain["blockxsize"] == 16


def test_an_ungeoreferenced_image_has_no_transform_and_indexes_pixels_as_rasterio(tmp_path):
    rumimm.write(tmp_path / "u.rumi", np.zeros((1, 8, 8), np.uint8), tile=8)
    with rumimm.open(tmp_path / "u.rumi") as img:
        assert img.transform is None and img.pyproj_crs is None
        assert img.window_transform(((0, 2), (0, 2))) == Affine.identity()  # rasterio's identity
        assert img.index(2.5, 3.5) == (3, 2) and img.xy(3, 2) == (2.5, 3.5)


def test_a_cube_has_the_same_surface(tmp_path):
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"t{i}.rumi")
        rumimm.write(paths[-1], sample("uint16", (2, 40, 40), seed=i), tile=16, transform=NORTH_UP, crs=32633)
    cube = rumimm.Cube(paths)
    try:
        assert cube.transform == NORTH_UP and isinstance(cube.transform, Affine)
        assert cube.index(*cube.xy(3, 4)) == (3, 4)
        assert len(list(cube.block_windows())) == 9 and cube.profile["count"] == 2
    finally:
        cube.close()


@pytest.mark.slow
def test_from_geotiff_needs_rasterio_only_when_called():
    import subprocess
    import sys

    code = ("import sys, rumimm, rumimm.cli, rumimm.integrations.geotiff, rumimm.integrations.preview, "
            "rumimm.reader.rasterio_surface; "
            "bad = [m for m in ('rasterio', 'PIL') if m in sys.modules]; print(bad)")  # affine is a core dependency
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


def test_index_rounds_with_the_given_op(rotated):
    img, _, _ = rotated
    x, y = img.xy(7, 9, offset="ul")
    assert img.index(x, y, op=math.floor) == (7, 9)
    assert img.index(*img.xy(7, 9), op=math.ceil) == (8, 10)


def test_an_interrupted_conversion_leaves_no_file(tmp_path):
    src = make_tif(tmp_path / "in.tif", sample("uint16", (2, 64, 40)))
    (tmp_path / "x.rumi").write_bytes(b"old")

    def interrupt(done, total):
        if done == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        from_geotiff(src, tmp_path / "x.rumi", tile=16, header_out=tmp_path / "x.blob", progress=interrupt)
    assert (tmp_path / "x.rumi").read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["in.tif", "x.rumi"]


def test_an_export_in_progress_uses_a_temp_name_that_clean_recognises(tmp_path):
    from rumimm.writer.atomic import TEMP_PATTERN

    rumimm.write(tmp_path / "a.rumi", sample("uint16", (1, 64, 64)), tile=16)
    seen = []

    def look(done, total):
        seen.extend(n for n in os.listdir(tmp_path) if n not in ("a.rumi",))

    to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", tile=16, progress=look)
    temps = {n for n in seen if n != "a.tif"}
    assert temps, "the export wrote nowhere but its destination"
    for name in temps:
        m = TEMP_PATTERN.match(name)
        assert m is not None and m["name"] == "a.tif" and int(m["pid"]) == os.getpid()
    assert rumimm.clean(tmp_path) == []  # this process is alive: its files are never stale


def test_a_cog_export_without_compression_is_uncompressed(tmp_path):
    data = sample("uint16", (1, 300, 260))
    rumimm.write(tmp_path / "a.rumi", data, tile=128, transform=NORTH_UP, crs=32633)
    to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif", compress=None, cog=True)
    with rasterio.open(tmp_path / "a.tif") as ds:
        assert ds.compression is None and np.array_equal(ds.read(), data)


def test_an_export_through_a_symlink_replaces_its_target_and_keeps_its_mode(tmp_path):
    rumimm.write(tmp_path / "a.rumi", sample("uint8", (1, 16, 16)), tile=16)
    (tmp_path / "real.tif").write_bytes(b"old")
    os.chmod(tmp_path / "real.tif", 0o444)
    os.symlink("real.tif", tmp_path / "link.tif")
    to_geotiff(tmp_path / "a.rumi", tmp_path / "link.tif")
    assert os.path.islink(tmp_path / "link.tif")
    assert (tmp_path / "real.tif").read_bytes()[:2] == b"II"
    assert (tmp_path / "real.tif").stat().st_mode & 0o777 == 0o444
    assert sorted(os.listdir(tmp_path)) == ["a.rumi", "link.tif", "real.tif"]


@pytest.mark.parametrize("coefficients", [(10, 0, 5e5, 0, -10, float("nan")), (10, 0, 5e5, 20, 0, 4e6),
                                          (0, 0, 5e5, 0, 0, 4e6)], ids=["nan", "singular", "zero"])
def test_issue_24_a_geotiff_whose_geotransform_rumi_cannot_store_is_a_crs_error_naming_it(tmp_path, coefficients):
    # found by the geotiff fuzz target: the source's geotransform went to the Writer, whose
    # argument check raised a plain ValueError about "transform" (tests/fuzz/regressions/geotiff)
    src = tmp_path / "bad.tif"
    with rasterio.open(src, "w", driver="GTiff", width=4, height=3, count=1, dtype="uint8", crs="EPSG:32633",
                       transform=Affine(*coefficients)) as ds:
        ds.write(np.zeros((1, 3, 4), np.uint8))
    with pytest.raises(CRSError, match=r"bad.tif: the geotransform") as info:
        rumimm.from_geotiff(src, tmp_path / "out.rumi")
    assert "drop_georef" in str(info.value)
    assert not (tmp_path / "out.rumi").exists()
    rumimm.from_geotiff(src, tmp_path / "out.rumi", drop_georef=True)  # the remedy the message names works


def test_issue_24_a_tiff_tag_with_a_control_character_is_left_out_with_a_warning(tmp_path):
    # found by the geotiff fuzz target: GDAL reports TIFFTAG_ARTIST (tag 315) with the control
    # character it holds, and the sidecar's argument check raised a plain ValueError about "tags"
    src = tmp_path / "artist.tif"
    with rasterio.open(src, "w", driver="GTiff", width=4, height=3, count=1, dtype="uint8") as ds:
        ds.write(np.arange(12, dtype=np.uint8).reshape(1, 3, 4))
        ds.update_tags(TIFFTAG_ARTIST="a\x01b", TIFFTAG_SOFTWARE="kept")
    with pytest.warns(RumiWarning, match="TIFFTAG_ARTIST"):
        blob = rumimm.from_geotiff(src, tmp_path / "out.rumi")
    with rumimm.open(tmp_path / "out.rumi", blob) as img:
        assert np.array_equal(img[...], np.arange(12, dtype=np.uint8).reshape(1, 3, 4))
        assert img.tags().get("TIFFTAG_SOFTWARE") == "kept" and "TIFFTAG_ARTIST" not in img.tags()


@pytest.mark.parametrize("cog", [False, True])
def test_an_export_over_a_geotiff_takes_away_its_external_mask_and_overviews(tmp_path, cog):
    """GDAL applies ``NAME.msk`` and ``NAME.ovr`` to whatever NAME is; replacing NAME must not leave the old
    ones on the new file (half of it masked, overviews of other pixels), and a failed export keeps them."""
    tif, msk, ovr = tmp_path / "a.tif", tmp_path / "a.tif.msk", tmp_path / "a.tif.ovr"
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=False):
        with rasterio.open(tif, "w", driver="GTiff", dtype="uint8", count=1, height=64, width=64, crs="EPSG:32633",
                           transform=NORTH_UP) as ds:
            ds.write(np.ones((1, 64, 64), np.uint8))
            half = np.zeros((64, 64), np.uint8)
            half[:, :32] = 255
            ds.write_mask(half)
    with warnings.catch_warnings():  # an external overview file, as gdaladdo -ro writes: the level as a TIFF
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(ovr, "w", driver="GTiff", dtype="uint8", count=1, height=32, width=32) as ds:
            ds.write(np.ones((1, 32, 32), np.uint8))
    with rasterio.open(tif) as ds:
        assert ds.overviews(1) == [2] and not ds.read_masks(1).all()
    assert msk.exists() and ovr.exists()
    rumimm.write(tmp_path / "a.rumi", np.full((1, 64, 64), 200, np.uint8), tile=64, transform=NORTH_UP, crs=32633)
    before = msk.read_bytes(), ovr.read_bytes()
    with pytest.raises(ValueError, match="compress"):
        to_geotiff(tmp_path / "a.rumi", tif, compress="no-such-codec", cog=cog)
    assert (msk.read_bytes(), ovr.read_bytes()) == before
    to_geotiff(tmp_path / "a.rumi", tif, cog=cog)
    assert sorted(os.listdir(tmp_path)) == ["a.rumi", "a.tif"]
    with rasterio.open(tif) as ds:
        assert ds.read_masks(1).all() and ds.overviews(1) == ([] if not cog else ds.overviews(1))
        assert (ds.read(1, out_shape=(32, 32)) == 200).all()  # any overview GDAL reads is of the new pixels


def test_a_crs_without_a_geotransform_is_dropped_with_a_warning(tmp_path):
    """rasterio gives a file without a geotransform the identity: no georeferencing, not a real transform."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(tmp_path / "c.tif", "w", driver="GTiff", dtype="uint8", count=1, height=20, width=30,
                           crs="EPSG:32633") as ds:
            ds.write(np.ones((1, 20, 30), np.uint8))
    with pytest.warns(rasterio.errors.NotGeoreferencedWarning), rasterio.open(tmp_path / "c.tif") as ds:
        assert ds.crs.to_epsg() == 32633 and ds.transform.is_identity  # GDAL: a CRS, no geotransform
    with pytest.warns(RumiWarning, match=r"c.tif: the CRS \(.*zone=33.*\) is dropped: the file has no geotransform"):
        blob = from_geotiff(tmp_path / "c.tif", tmp_path / "c.rumi", tile=16)
    with rumimm.open(tmp_path / "c.rumi", header=blob) as img:
        assert img.transform is None and img.crs is None and img.bounds is None
    to_geotiff(tmp_path / "c.rumi", tmp_path / "out.tif")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(tmp_path / "out.tif") as ds:
            assert ds.crs is None and ds.transform.is_identity


@pytest.mark.parametrize(("dtype", "nodata"), [("int64", -2**63), ("int64", 2**62 + 1), ("uint64", 2**64 - 1)])
def test_a_64_bit_nodata_gdal_would_read_back_as_another_value_is_left_out_with_a_warning(tmp_path, dtype, nodata):
    data = np.arange(256, dtype=dtype).reshape(1, 16, 16)
    data[0, 0, 0] = nodata
    rumimm.write(tmp_path / "a.rumi", data, nodata=nodata, tile=16, transform=NORTH_UP, crs=32633)
    with pytest.warns(RumiWarning, match=f"a.rumi: rasterio cannot write nodata {nodata} exactly .* none was written"):
        to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif")
    with rasterio.open(tmp_path / "a.tif") as ds:
        assert ds.nodata is None and np.array_equal(ds.read(), data)


@pytest.mark.parametrize("nodata", [-9999, 2**53, -2**53])
def test_a_64_bit_nodata_a_float64_carries_is_written(tmp_path, nodata):
    rumimm.write(tmp_path / "a.rumi", np.zeros((1, 16, 16), np.int64), nodata=nodata, tile=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RumiWarning)
        to_geotiff(tmp_path / "a.rumi", tmp_path / "a.tif")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        with rasterio.open(tmp_path / "a.tif") as ds:
            assert ds.nodata == nodata


@pytest.mark.parametrize(("dtype", "nd"), [("int64", 2**62 + 1), ("uint64", 2**64 - 1), ("int64", -2**63 + 1)])
def test_a_64_bit_nodata_beyond_2_53_is_imported_as_gdal_holds_it_not_rounded(tmp_path, dtype, nd):
    # 2**62 + 1: a float64 holds 2**62; 2**64 - 1: rasterio reports None; GDAL masks the exact value only
    data = np.arange(16, dtype=dtype).reshape(1, 4, 4)
    data[0, 0, :2] = nd, nd - 1
    src = make_tif(tmp_path / "s.tif", data, block=16)
    (tmp_path / "s.tif.aux.xml").write_text(
        f'<PAMDataset><PAMRasterBand band="1"><NoDataValue>{nd}</NoDataValue></PAMRasterBand></PAMDataset>')
    with rasterio.open(src) as ds:
        masks = ds.read_masks(1)
    assert not masks[0, 0] and masks[0, 1]  # GDAL: the exact value is nodata, its float64 neighbour is not
    with warnings.catch_warnings():
        warnings.simplefilter("error", RumiWarning)
        from_geotiff(src, tmp_path / "s.rumi", tile=16)
    with rumimm.open(tmp_path / "s.rumi") as img:
        assert img.nodata == nd and isinstance(img.nodata, int)
        assert np.array_equal(img[0] != img.nodata, masks > 0)


def test_a_missing_or_unreadable_source_is_refused_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        from_geotiff(tmp_path / "missing.tif", tmp_path / "o.rumi")
    assert info.value.filename == str(tmp_path / "missing.tif")
    with pytest.raises(FileNotFoundError):
        rumimm.open(tmp_path / "missing.tif")  # what rumimm.open says of the same path
    (tmp_path / "notes.tif").write_text("hello\n")
    with pytest.raises(RumiError, match=r"notes.tif: not a TIFF file .*nor a raster format GDAL reads"):
        from_geotiff(tmp_path / "notes.tif", tmp_path / "o.rumi")
    (tmp_path / "cut.tif").write_bytes(b"II*\x00" + bytes(20))
    with pytest.raises(RumiError, match=r"cut.tif: GDAL cannot open it as a raster: "):
        from_geotiff(tmp_path / "cut.tif", tmp_path / "o.rumi")
    assert sorted(os.listdir(tmp_path)) == ["cut.tif", "notes.tif"]


def test_a_crs_without_a_code_is_stored_as_the_code_with_its_axis_order(tmp_path):
    """An easting-northing UTM on GRS80 is EPSG:25833 (as rasterio and pyproj say), not its N-E twin 3045."""
    crs = rasterio.crs.CRS.from_proj4("+proj=tmerc +lat_0=0 +lon_0=15 +k=0.9996 +x_0=500000 +y_0=0 +ellps=GRS80 "
                                      "+units=m +no_defs")
    src = make_tif(tmp_path / "t.tif", sample("uint8", (1, 16, 16)), crs=crs,
                   transform=Affine(10, 0, 500000, 0, -10, 5540000))  # 50 N: in 25833's area in every EPSG release
    with rasterio.open(src) as ds:
        expected = ds.crs.to_epsg(confidence_threshold=20)
    with pytest.warns(RumiWarning, match=f"stored as EPSG:{expected}") as record:
        from_geotiff(src, tmp_path / "t.rumi", tile=16)
    assert "EPSG:3045 (other datums)" not in str(record[0].message)
    with rumimm.open(tmp_path / "t.rumi") as img:
        assert img.epsg == expected
        assert [a.direction for a in img.pyproj_crs.axis_info] == ["east", "north"]


def test_a_complex_nodata_left_out_is_not_said_to_be_one_gdal_lacks(tmp_path):
    data = (np.arange(12).reshape(1, 3, 4) + 0j).astype(np.complex64)
    src = make_tif(tmp_path / "c.tif", data, block=16, nodata=0)
    with rasterio.open(src) as ds:
        assert not ds.read_masks(1)[0, 0] and ds.read_masks(1).sum() == 11 * 255  # GDAL masks it
    with pytest.warns(RumiWarning, match="rumi cannot hold nodata 0.0 of band 1: rumi keeps no nodata for complex64 "
                                         "samples") as record:
        from_geotiff(src, tmp_path / "c.rumi", tile=16)
    assert "GDAL has no nodata" not in str(record[0].message)
