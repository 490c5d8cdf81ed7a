"""The xarray backend (engine="rumimm") and to_rumi against rumimm's own reads and rioxarray."""

from __future__ import annotations

import os
import pickle
import warnings

import dask
import numpy as np
import pytest
import rasterio
import rioxarray
import xarray as xr
from affine import Affine
from conftest import affine_times, random_samples, same_bits

import rumimm
from rumimm.errors import CodecError, CRSError, RumiError
from rumimm.format import dtypes
from rumimm.synthetic import eo_scene

UTM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
WGS84 = (0.25, 0.0, -10.0, 0.0, -0.25, 60.0)
ROTATED = (30.0, 0.5, -2e6, 0.25, -30.0, 5e6)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A 3-band uint16 UTM scene (tile 16) with its blob."""
    path = tmp_path_factory.mktemp("xr") / "scene.rumi"
    a = eo_scene(3, 70, 90, "uint16", seed=4)
    blob = rumimm.write(path, a, tile=16, transform=UTM, crs=32633, threads=1)
    return path, blob, a


def open_da(path, **kw) -> xr.DataArray:
    return xr.open_dataset(path, engine="rumimm", **kw)["band_data"]


def mapped(path) -> bool:
    """Whether this process holds ``path``: mapped, or open as a file descriptor.

    An open Image holds one or the other: a read by the numba kernels maps the file, a chip
    read while they load (or in a forked child) reads it with ``pread``.
    """
    with open("/proc/self/maps") as fh:
        if str(path) in fh.read():
            return True
    fds = "/proc/self/fd"
    for fd in os.listdir(fds):
        try:
            if os.readlink(os.path.join(fds, fd)) == str(path):
                return True
        except OSError:  # closed meanwhile
            continue
    return False


# -- registration and opening ---------------------------------------------------------
def test_the_engine_is_registered_and_claims_rumi_files_only(scene):
    from rumimm.integrations.xarray_backend import RumiBackendEntrypoint

    path, _, a = scene
    assert "rumimm" in xr.backends.list_engines()
    entry = RumiBackendEntrypoint()
    assert entry.guess_can_open(str(path)) and entry.guess_can_open(path)
    assert not entry.guess_can_open("scene.tif") and not entry.guess_can_open(b"\x00" * 4)
    with xr.open_dataset(path) as ds:  # the engine is guessed from the extension
        assert same_bits(ds["band_data"].values, a)


def test_dims_coordinates_and_the_dataarray_opener(scene):
    path, _, a = scene
    with xr.open_dataarray(path, engine="rumimm") as da:
        assert da.dims == ("band", "y", "x") and da.shape == a.shape and da.dtype == a.dtype
        assert list(da.band.values) == [1, 2, 3]
        assert np.allclose(da.x.values, 500000 + 10 * (np.arange(90) + 0.5))
        assert np.allclose(da.y.values, 4200000 - 10 * (np.arange(70) + 0.5))
        assert da.attrs["AREA_OR_POINT"] == "Area" and da.attrs["transform"] == UTM
        assert same_bits(da.values, a)


def test_nothing_is_decoded_at_open_and_a_window_decodes_only_its_frames(tmp_path, rng):
    # a corrupt frame: opening and reading elsewhere work, reading it raises CodecError
    a = rng.integers(0, 3000, (2, 40, 40), dtype=np.uint16)
    path = tmp_path / "c.rumi"
    blob = rumimm.write(path, a, tile=16, threads=1)
    hdr = rumimm.Header.parse(blob)
    last = int(hdr.frame_offsets[hdr.n_frames - 1])  # the last frame: band 1 of the bottom-right tile
    raw = bytearray(path.read_bytes())
    raw[last + 12:last + 20] = bytes(8 * [0xA5])
    path.write_bytes(bytes(raw))
    with xr.open_dataset(path, engine="rumimm", header=blob) as ds:
        da = ds["band_data"]
        assert same_bits(da.isel(y=slice(0, 30), x=slice(0, 30)).values, a[:, :30, :30])
        assert same_bits(da.isel(band=0).values, a[0])
        with pytest.raises(CodecError):
            da.isel(band=1, y=slice(35, 40), x=slice(35, 40)).values


@pytest.mark.parametrize("form", ["bytes", "Header", "path"])
def test_a_header_blob_can_be_bytes_a_header_or_a_blob_file(scene, tmp_path, form):
    path, blob, a = scene
    header = {"bytes": blob, "Header": rumimm.Header.parse(blob), "path": tmp_path / "scene.blob"}[form]
    (tmp_path / "scene.blob").write_bytes(blob)
    with xr.open_dataset(path, engine="rumimm", header=header) as ds:
        assert same_bits(ds["band_data"].values, a)


def test_a_blob_of_another_file_is_refused(scene, tmp_path, rng):
    path, _, _ = scene
    other = rumimm.write(tmp_path / "o.rumi", rng.integers(0, 9, (1, 5, 5), dtype=np.uint8))
    with pytest.raises(RumiError):
        xr.open_dataset(path, engine="rumimm", header=other)
    with pytest.raises(TypeError, match="header must be"):
        xr.open_dataset(path, engine="rumimm", header=12)


def test_an_unreadable_blob_file_is_refused_as_rumimm_open_refuses_it(scene, tmp_path):
    path, blob, _ = scene
    missing = tmp_path / "missing.blob"
    with pytest.raises(rumimm.BlobError) as by_open:
        rumimm.open(path, header=missing)
    with pytest.raises(rumimm.BlobError) as one:
        xr.open_dataset(path, engine="rumimm", header=missing)
    with pytest.raises(rumimm.BlobError) as listed:
        xr.open_dataset([path, path], engine="rumimm", header=[blob, missing])
    assert str(one.value) == str(listed.value) == str(by_open.value)


def test_a_list_of_paths_takes_a_header_object_or_a_blob_file_for_each(scene, tmp_path):
    path, blob, a = scene
    (tmp_path / "scene.blob").write_bytes(blob)
    with xr.open_dataset([path, path], engine="rumimm", header=[rumimm.Header.parse(blob), tmp_path / "scene.blob"],
                         stack_dim="t") as ds:
        assert same_bits(ds["band_data"].values, np.stack([a, a]))
    with pytest.raises(ValueError, match="got 2 images but 1 headers"):
        xr.open_dataset([path, path], engine="rumimm", header=[blob])


def test_closing_the_dataset_releases_the_file(scene):
    path, blob, _ = scene
    ds = xr.open_dataset(path, engine="rumimm", header=blob)
    ds["band_data"].isel(x=slice(0, 5)).values
    assert mapped(path)
    ds.close()
    assert not mapped(path)


def test_open_options_reach_the_images(scene, stack):
    path, blob, a = scene
    with xr.open_dataset(path, engine="rumimm", header=blob, cache_bytes=0, verify=False) as ds:
        assert same_bits(ds["band_data"].values, a)
    with xr.open_dataset(list(stack[0]), engine="rumimm", cache_bytes=1 << 20) as ds:
        assert same_bits(ds["band_data"].values, stack[2])
    for source in (path, list(stack[0])):  # rumimm.open checks them
        with pytest.raises(ValueError, match="cache size"):
            xr.open_dataset(source, engine="rumimm", cache_bytes=-1)


def test_drop_variables(scene):
    path, _, _ = scene
    with xr.open_dataset(path, engine="rumimm", drop_variables=["spatial_ref"]) as ds:
        assert "spatial_ref" not in ds.coords and "band_data" in ds


# -- indexing -------------------------------------------------------------------------
KEYS = [
    dict(band=1),
    dict(y=slice(5, 60, 3), x=slice(80, 2, -7)),
    dict(band=[2, 0], y=[3, 3, 69, 0], x=[89, 1, 40]),
    dict(band=slice(None, None, -1), y=7, x=[5, 6, 88]),
    dict(y=[-1, -70], x=-3),
    dict(band=[], y=slice(3, 9)),
    dict(band=1, x=[1, 0]),  # an int and a list parted by a slice: numpy would put the list's axis first
    dict(band=2, y=slice(2, 9), x=[88, 5, 3]),
    dict(band=[2, 0], y=4, x=[3, 1]),
    dict(band=-1, y=[6, 2], x=-2),
]


@pytest.mark.parametrize("key", KEYS, ids=[str(i) for i in range(len(KEYS))])
def test_basic_and_outer_indexing_equal_numpy(scene, key):
    path, _, a = scene
    with xr.open_dataset(path, engine="rumimm") as ds:
        want = xr.DataArray(a, dims=("band", "y", "x")).isel(key).values
        assert same_bits(ds["band_data"].isel(key).values, want)


def test_vectorized_indexing_goes_through_xarrays_adapters(scene):
    path, _, a = scene
    ys = xr.DataArray([1, 50, 69], dims="p")
    xs = xr.DataArray([0, 30, 89], dims="p")
    with xr.open_dataset(path, engine="rumimm") as ds:
        got = ds["band_data"].isel(y=ys, x=xs).values
    assert same_bits(got, a[:, [1, 50, 69], [0, 30, 89]])


@pytest.mark.slow
def test_every_sample_encoding_reads_like_rumimm(tmp_path, rng):
    # all 28: ML floats, sub-byte integers (unpacked) and the structured complex types
    for enc in dtypes.ENCODINGS.values():
        a = random_samples(enc, 3 * 21 * 19, rng, 7).reshape(3, 21, 19)
        path = tmp_path / f"{enc.name}.rumi"
        rumimm.write(path, a, tile=8, unit="cell" if enc.itemsize > 1 else "tile", threads=1)
        with rumimm.open(path) as img, xr.open_dataset(path, engine="rumimm") as ds:
            da = ds["band_data"]
            assert da.dtype == img.dtype, enc.name
            assert same_bits(da.values, img[:]), enc.name
            assert same_bits(da.isel(y=slice(3, 17), x=[0, 18]).values, img[:, 3:17, [0, 18]]), enc.name
            assert same_bits(da.chunk({}).values, img[:]), enc.name


# -- chunks -----------------------------------------------------------------------------
@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize(("limit", "want"), [("128MiB", ((3,), (40,), (50,))),
                                             ("2304B", ((3,), (16, 16, 8), (24, 24, 2))),
                                             ("5KiB", ((3,), (16, 16, 8), (48, 2))),
                                             ("1KiB", (None, (16, 16, 8), (24, 24, 2)))])
def test_empty_chunks_are_whole_frames_sized_by_dask_chunk_size(tmp_path, rng, unit, limit, want):
    # 3 bands x 16 x 24 int16 = 2304 bytes a frame position: never less than one frame,
    # all bands where they fit, else a frame's bands (one for tile frames, all for cells)
    if want[0] is None:
        want = ((1, 1, 1) if unit == "tile" else (3,), *want[1:])
    a = rng.integers(0, 500, (3, 40, 50), dtype=np.int16)
    path = tmp_path / "g.rumi"
    rumimm.write(path, a, tile=(16, 24), unit=unit, threads=1)
    with dask.config.set({"array.chunk-size": limit}), xr.open_dataset(path, engine="rumimm", chunks={}) as ds:
        da = ds["band_data"]
        assert da.chunks == want
        assert same_bits(da.values, a)
        assert int(da.sum().compute()) == int(a.sum())


@pytest.mark.parametrize("chunks", ["auto", {"band": 2, "y": 13, "x": 31}, {"y": -1}])
def test_auto_and_explicit_chunks(scene, chunks):
    path, _, a = scene
    with xr.open_dataset(path, engine="rumimm", chunks=chunks) as ds:
        da = ds["band_data"]
        assert da.chunks is not None
        assert same_bits(da.values, a)
        assert same_bits(da.isel(y=slice(10, 50)).mean("x").values, a[:, 10:50].mean(axis=2))


def test_a_chunked_dataset_pickles_as_paths_and_blobs(scene):
    path, blob, a = scene
    with xr.open_dataset(path, engine="rumimm", header=blob, chunks={}) as ds:
        data = pickle.dumps(ds)
        assert len(data) < 10_000 + len(blob)  # the lazy array reopens from path and blob, no decoded pixels
        assert same_bits(pickle.loads(data)["band_data"].values, a)


# -- rioxarray and georeferencing ---------------------------------------------------------
def test_rioxarray_sees_rumimms_crs_transform_and_bounds(scene):
    path, _, _ = scene
    with rumimm.open(path) as img, xr.open_dataset(path, engine="rumimm") as ds:
        da = ds["band_data"]
        assert da.rio.crs.to_epsg() == img.epsg == 32633
        assert da.rio.transform() == Affine(*img.transform)
        assert np.allclose(da.rio.bounds(), img.bounds)
        assert np.allclose(da.rio.resolution(), (10, -10))
        assert "crs_wkt" in ds.spatial_ref.attrs and ds.spatial_ref.attrs["GeoTransform"].split()[0] == "500000.0"
        assert da.encoding["grid_mapping"] == "spatial_ref"


def test_rioxarray_agrees_with_rioxarray_on_gdals_view_of_the_same_file(scene):
    # GDAL reads a rumi file's georeferencing (not its frames): both stacks agree on it
    path, _, _ = scene
    with rasterio.open(path) as src, xr.open_dataset(path, engine="rumimm") as ds:
        assert ds["band_data"].rio.transform() == src.transform
        assert ds["band_data"].rio.crs == src.crs


def test_pixel_is_point_puts_coordinates_on_the_points(tmp_path, rng):
    a = rng.integers(0, 9, (1, 12, 20), dtype=np.uint8)
    path = tmp_path / "p.rumi"
    rumimm.write(path, a, tile=8, transform=WGS84, crs=4326, pixel_is_point=True)
    with rumimm.open(path) as img, xr.open_dataset(path, engine="rumimm") as ds, rasterio.open(path) as src:
        da = ds["band_data"]
        assert img.pixel_is_point and da.attrs["AREA_OR_POINT"] == "Point"
        t = Affine(*img.transform)  # maps pixel indices to the points
        assert np.allclose(da.x.values, [affine_times(t, (i, 0))[0] for i in range(20)])
        assert np.allclose(da.y.values, [affine_times(t, (0, j))[1] for j in range(12)])
        # rioxarray and GDAL describe pixel areas: the transform shifted by half a pixel
        assert da.rio.transform() == src.transform == affine_times(t, Affine.translation(-0.5, -0.5))
        assert np.allclose(da.rio.bounds(), src.bounds)


def test_a_rotated_transform_has_no_1d_coordinates_and_keeps_the_transform(tmp_path, rng):
    a = rng.integers(0, 9, (2, 10, 12), dtype=np.uint8)
    path = tmp_path / "r.rumi"
    rumimm.write(path, a, tile=8, transform=ROTATED, crs=3857)
    with xr.open_dataset(path, engine="rumimm") as ds, rasterio.open(path) as src:
        da = ds["band_data"]
        assert "x" not in da.coords and "y" not in da.coords
        assert da.attrs["transform"] == ROTATED
        assert da.rio.transform() == Affine(*ROTATED) == src.transform
        assert da.rio.crs.to_epsg() == 3857
        assert same_bits(da.values, a)


def test_no_crs_gives_no_spatial_ref_and_no_coordinates(tmp_path, rng):
    a = rng.integers(0, 9, (2, 10, 12), dtype=np.uint8)
    path = tmp_path / "n.rumi"
    rumimm.write(path, a, tile=8)
    with xr.open_dataset(path, engine="rumimm") as ds:
        da = ds["band_data"]
        assert "spatial_ref" not in ds.coords and set(da.coords) == {"band"}
        assert da.rio.crs is None
        assert same_bits(da.values, a)


# -- Cube and ImageCollection -----------------------------------------------------------------
@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stack")
    paths, blobs, arrays = [], [], []
    for i, unit in enumerate(["tile", "cell", "tile"]):
        a = eo_scene(2, 30, 40, "int16", seed=i)
        paths.append(folder / f"t{i}.rumi")
        blobs.append(rumimm.write(paths[-1], a, tile=16, unit=unit, transform=UTM, crs=32633, threads=1))
        arrays.append(a)
    return paths, blobs, np.stack(arrays)


def test_a_cube_opens_as_one_dataset_with_a_leading_dim(stack):
    paths, blobs, want = stack
    with rumimm.Cube(paths, blobs) as cube:
        ds = xr.open_dataset(cube, engine="rumimm", stack_dim="time", stack_labels=["a", "b", "c"])
        da = ds["band_data"]
        assert da.dims == ("time", "band", "y", "x") and list(da.time.values) == ["a", "b", "c"]
        assert same_bits(da.values, want)
        assert same_bits(da.sel(time="b").isel(x=[3, 1], band=1).values, want[1, 1][:, [3, 1]])
        assert da.rio.transform() == Affine(*UTM)
        chunked = xr.open_dataset(cube, engine="rumimm", chunks={})["band_data"]
        assert chunked.chunks == ((3,), (2,), (30,), (40,))  # 14 kB: one chunk
        with dask.config.set({"array.chunk-size": "1KiB"}):  # mixed frame units: cut on one band
            chunked = xr.open_dataset(cube, engine="rumimm", chunks={})["band_data"]
        assert chunked.chunks == ((1, 1, 1), (1, 1), (16, 14), (32, 8))
        assert same_bits(chunked.values, want)


def test_a_list_of_paths_and_an_image_collection_open_as_a_cube(stack, tmp_path):
    paths, blobs, want = stack
    with xr.open_dataset(list(paths), engine="rumimm", header=blobs, stack_dim="t") as ds:
        assert ds["band_data"].dims[0] == "t" and same_bits(ds["band_data"].values, want)
    with rumimm.ImageCollection(paths) as coll:
        assert same_bits(xr.open_dataset(coll, engine="rumimm")["band_data"].values, want)
    rumimm.write(tmp_path / "small.rumi", want[0, :, :10], tile=16)
    with rumimm.ImageCollection([*paths, tmp_path / "small.rumi"]) as coll:
        with pytest.raises(RumiError, match="2 grids"):
            xr.open_dataset(coll, engine="rumimm")
    with pytest.raises(TypeError, match="cannot open"):
        xr.open_dataset(42, engine="rumimm")
    with pytest.raises(ValueError, match="stack_labels"):
        xr.open_dataset(list(paths), engine="rumimm", stack_labels=[1])


def test_an_open_image_can_be_passed_and_stays_open(scene):
    path, blob, a = scene
    with rumimm.open(path, header=blob) as img:
        ds = xr.open_dataset(img, engine="rumimm")
        ds.close()
        assert not img.closed and same_bits(ds["band_data"].values, a)


# -- writing ---------------------------------------------------------------------------
@pytest.mark.parametrize("point", [False, True])
@pytest.mark.parametrize("chunks", [None, {}])
def test_to_rumi_round_trips_values_and_georeferencing(scene, tmp_path, point, chunks):
    _path, _, a = scene
    src = tmp_path / "src.rumi"
    rumimm.write(src, a, tile=16, transform=UTM, crs=32633, pixel_is_point=point, threads=1)
    with xr.open_dataset(src, engine="rumimm", chunks=chunks) as ds:
        blob = rumimm.to_rumi(ds["band_data"], tmp_path / "out.rumi", tile=32, threads=1)
    with rumimm.open(tmp_path / "out.rumi", header=blob) as img:
        assert same_bits(img[:], a)
        assert img.transform == Affine(*UTM) and img.epsg == 32633 and img.pixel_is_point is point
        assert img.tile == (32, 32)


_SUBSETS = {"window": {"y": slice(5, 30), "x": slice(7, 33)},
            "stride 2": {"y": slice(None, None, 2), "x": slice(None, None, 2)},
            "stride 3 from 4": {"y": slice(4, None, 3), "x": slice(1, 80, 3)},
            "one row": {"y": slice(9, 10), "x": slice(3, 60)}}


@pytest.mark.parametrize("point", [False, True])
@pytest.mark.parametrize("reader", ["rumimm", "rioxarray"])
@pytest.mark.parametrize("subset", list(_SUBSETS))
def test_to_rumi_of_a_subset_writes_its_transform_as_rio_to_raster_does(scene, tmp_path, point, reader, subset):
    # the spatial_ref GeoTransform is the parent's after isel; the coordinates are the subset's
    _path, _, a = scene
    src = tmp_path / "src.rumi"
    rumimm.write(src, a, tile=16, transform=UTM, crs=32633, pixel_is_point=point, threads=1)
    if reader == "rioxarray":
        rumimm.to_geotiff(src, tmp_path / "src.tif")
    da = open_da(src) if reader == "rumimm" else rioxarray.open_rasterio(tmp_path / "src.tif")
    with da:
        sub = da.isel(_SUBSETS[subset])
        want = sub.rio.transform(recalc=True)
        sub.rio.to_raster(tmp_path / "sub.tif")
        rumimm.to_rumi(sub, tmp_path / "sub.rumi", tile=16, threads=1)
        values = sub.values
    with rasterio.open(tmp_path / "sub.tif") as ds:
        assert ds.transform.almost_equals(want, precision=1e-9)
    half = (0.5, 0.5)
    if point:  # rumi keeps a PixelIsPoint transform on the points, GDAL's is on the pixel corners
        want, half = affine_times(want, Affine.translation(*half)), (0, 0)
    with rumimm.open(tmp_path / "sub.rumi") as img:
        assert img.pixel_is_point is point and img.epsg == 32633
        assert img.transform.almost_equals(want, precision=1e-9)
        first = affine_times(img.transform, half)  # the first pixel's centre (area) or point
        assert first == pytest.approx((float(sub.x[0]), float(sub.y[0])), abs=1e-9)
        assert same_bits(img[:], values)


def test_to_rumi_of_a_subset_keeps_a_rotated_transform_and_refuses_uneven_coordinates(tmp_path, rng):
    a = rng.integers(0, 99, (1, 12, 14), dtype=np.uint8)
    src = tmp_path / "src.rumi"
    rumimm.write(src, a, tile=8, transform=ROTATED, crs=32633)
    with xr.open_dataset(src, engine="rumimm") as ds:  # no 1-D coordinates: the GeoTransform is all there is
        rumimm.to_rumi(ds["band_data"].isel(x=slice(2, 9)), tmp_path / "r.rumi", tile=8)
    with rumimm.open(tmp_path / "r.rumi") as img:
        assert img.transform == Affine(*ROTATED) and same_bits(img[:], a[:, :, 2:9])
    rumimm.write(src, a, tile=8, transform=UTM, crs=32633)
    with xr.open_dataset(src, engine="rumimm") as ds, pytest.raises(ValueError, match="not evenly spaced"):
        rumimm.to_rumi(ds["band_data"].isel(x=[0, 1, 3]), tmp_path / "u.rumi", tile=8)
    assert not (tmp_path / "u.rumi").exists()


def test_to_rumi_takes_rioxarray_metadata_from_coordinates_and_transposes(tmp_path, rng):
    a = rng.integers(0, 99, (20, 30, 2), dtype=np.uint8)
    da = xr.DataArray(a, dims=("lat", "lon", "band"),
                      coords={"lon": 100.5 + np.arange(30), "lat": 49.75 - 0.5 * np.arange(20)})
    da = da.rio.write_crs(4326)
    rumimm.to_rumi(da, tmp_path / "c.rumi", tile=8)
    with rumimm.open(tmp_path / "c.rumi") as img:
        assert same_bits(img[:], a.transpose(2, 0, 1))
        assert img.crs == "EPSG:4326"
        assert np.allclose(img.transform[:6], (1.0, 0, 100.0, 0, -0.5, 50.0))


def test_to_rumi_of_a_plain_or_2d_array_writes_no_georeferencing(tmp_path, rng):
    a = rng.normal(size=(9, 11)).astype(np.float32)
    rumimm.to_rumi(xr.DataArray(a), tmp_path / "p.rumi", tile=8)
    rumimm.to_rumi(a[None], tmp_path / "n.rumi", tile=8)
    for name in ("p.rumi", "n.rumi"):
        with rumimm.open(tmp_path / name) as img:
            assert img.crs is None and same_bits(img[:], a[None])


def test_to_rumi_refuses_what_rumi_cannot_hold(tmp_path, rng):
    a = rng.integers(0, 9, (4, 5), dtype=np.uint8)
    da = xr.DataArray(a, dims=("y", "x"), coords={"x": np.arange(5.0), "y": np.arange(4.0)})
    with pytest.raises(ValueError, match="GeoTransform but no CRS"):
        rumimm.to_rumi(da.rio.write_transform(Affine(1, 0, 0, 0, -1, 0)), tmp_path / "a.rumi")
    with pytest.raises(ValueError, match="not evenly spaced"):
        rumimm.to_rumi(da.assign_coords(x=[0, 1, 2, 4, 5.0]).rio.write_crs(4326), tmp_path / "b.rumi")
    with pytest.raises(CRSError):
        rumimm.to_rumi(da.rio.write_crs("+proj=merc +lon_0=3"), tmp_path / "c.rumi")
    with pytest.raises(ValueError, match="2 or 3 dims"):
        rumimm.to_rumi(xr.DataArray(np.zeros((2, 2, 2, 2), np.uint8)), tmp_path / "d.rumi")
    with pytest.raises(ValueError, match=r"coordinates \(1 x 1\) give no pixel size: one needs two points"):
        rumimm.to_rumi(da[:1, :1].rio.write_crs(32633), tmp_path / "e.rumi")
    assert not list(tmp_path.iterdir())  # nothing written, not even a temporary file


# -- coordinates bitwise equal to rioxarray's; band metadata as rioxarray gives it --------------
def _transforms(n: int, seed: int = 21):
    rng = np.random.default_rng(seed)
    out = [(0.000277777777777778, 0.0, -75.0001388888889, 0.0, -0.000277777777777778, 45.0001388888889),
           (30.0, 0.0, 499980.0, 0.0, -30.0, 4500000.0), (0.1, 0.0, -180.0, 0.0, -0.1, 90.0),
           (1 / 3, 0.0, 0.1, 0.0, -1 / 7, 0.3)]
    for _ in range(n):
        res = float(rng.choice([1e-4, 1e-3, 0.1, 10, 30, 250])) * (1 + rng.uniform(-0.01, 0.01))
        out.append((res, 0.0, float(rng.uniform(-170, 170)) if res < 1 else float(rng.uniform(2e5, 8e5)), 0.0,
                    -res * float(rng.uniform(0.5, 2)),
                    float(rng.uniform(-80, 80)) if res < 1 else float(rng.uniform(1e6, 9e6))))
    return out


@pytest.mark.parametrize("transform", _transforms(40))
def test_coordinates_are_bitwise_rioxarrays_for_the_same_transform(transform):
    from rioxarray.rioxarray import affine_to_coords

    from rumimm.integrations.xarray_backend import pixel_centres

    nx, ny = 791, 718
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PendingDeprecationWarning)  # affine 3's note on its * operator
        want = affine_to_coords(Affine(*transform), nx, ny)
    x, y = pixel_centres((transform[2], transform[0], transform[1], transform[5], transform[3], transform[4]), nx, ny)
    assert x.tobytes() == want["x"].tobytes() and y.tobytes() == want["y"].tobytes()


@pytest.mark.parametrize("point", [False, True])
def test_a_dataset_aligns_exactly_with_rioxarrays_of_the_same_file(tmp_path, point):
    transform = (0.000277777777777778, 0.0, -75.0001388888889, 0.0, -0.000277777777777778, 45.0001388888889)
    path = tmp_path / "deg.rumi"
    rumimm.write(path, np.zeros((3, 718, 791), np.uint8), tile=64, transform=transform, crs=4326,
                 pixel_is_point=point)
    ours = open_da(path)
    with rioxarray.open_rasterio(path) as theirs:  # GDAL reads a rumi file's header as a GeoTIFF's
        assert ours.x.values.tobytes() == theirs.x.values.tobytes()
        assert ours.y.values.tobytes() == theirs.y.values.tobytes()
        a, b = xr.align(ours, theirs.rio.write_crs(4326), join="exact")  # raised before the coordinates agreed
        assert a.shape == b.shape == (3, 718, 791)


@pytest.fixture(scope="module")
def described(tmp_path_factory):
    """A 2-band int16 file with nodata, scales, offsets, descriptions and units, and the same as a GeoTIFF."""
    folder = tmp_path_factory.mktemp("meta")
    rng = np.random.default_rng(8)
    a = rng.integers(-50, 50, (2, 40, 50), dtype=np.int16)
    a[:, :5, :7] = -999
    path = folder / "m.rumi"
    rumimm.write(path, a, tile=16, transform=UTM, crs=32633, nodata=-999, scales=[0.5, 0.25],
                 offsets=[10.0, -3.0], descriptions=["temperature", "pressure"], units=["K", "hPa"],
                 tags={"SOURCE": "model"})
    rumimm.to_geotiff(path, folder / "m.tif")
    return path, folder / "m.tif", a


def test_band_metadata_become_rioxarrays_attributes(described):
    path, tif, _ = described
    ours = open_da(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # rioxarray: "scales differ across bands"
        theirs = rioxarray.open_rasterio(tif)
    for name in ("_FillValue", "scales", "offsets", "long_name", "units", "SOURCE"):
        assert ours.attrs[name] == theirs.attrs[name], name
    assert type(ours.attrs["_FillValue"]) is type(theirs.attrs["_FillValue"]) is np.int16


@pytest.mark.parametrize("kw", [{"masked": True}, {"mask_and_scale": True}])
def test_masked_and_mask_and_scale_read_as_rioxarray_reads(described, kw):
    path, tif, _ = described
    ours = open_da(path, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        theirs = rioxarray.open_rasterio(tif, **kw)
    assert ours.dtype == theirs.dtype == np.float32
    assert np.array_equal(ours.values, theirs.values, equal_nan=True)
    assert np.array_equal(ours[1, 2:9, 3:12].values, theirs[1, 2:9, 3:12].values, equal_nan=True)
    assert np.array_equal(ours[:, 4, ::3].values, theirs[:, 4, ::3].values, equal_nan=True)
    for key in (dict(y=0, x=0), dict(y=30, x=40), dict(band=1, x=[3, 0, 45]), dict(y=2, x=[6, 1])):
        # one pixel of every band (masking raised on a band axis of single samples), and ints beside a list
        got = open_da(path, **kw).isel(key).values  # a fresh one: ``ours`` holds its values by now
        assert np.array_equal(got, theirs.isel(key).values, equal_nan=True), key
    assert ours.encoding["_FillValue"] == theirs.encoding["_FillValue"]
    assert "_FillValue" not in ours.attrs


def test_a_masked_stack_masks_each_image_by_its_band_nodata(described, tmp_path):
    path, _, a = described
    ds = xr.open_dataset([path, path], engine="rumimm", masked=True)
    got = ds["band_data"][:, 1, 0:6, 0:8].values
    assert got.shape == (2, 6, 8) and np.isnan(got[:, :5, :7]).all()
    assert np.array_equal(got[0, 5], a[1, 5, :8].astype(np.float32))


@pytest.mark.parametrize("chunks", [None, {}])
@pytest.mark.parametrize("kw", [{"masked": True}, {"mask_and_scale": True}])
def test_a_masked_stack_decodes_each_item_with_its_own_files_nodata_and_scales(tmp_path, kw, chunks):
    """Files whose nodata (and scales) differ: each item of the stack reads as its file alone does (-1 is
    valid data in the second file, nodata in the first)."""
    a = np.full((2, 16, 16), 5, np.int16)
    a[:, 0, 0] = -1
    b = np.full((2, 16, 16), -1, np.int16)
    b[:, 0, 0] = 0
    rumimm.write(tmp_path / "a.rumi", a, tile=16, transform=UTM, crs=32633, nodata=-1)
    rumimm.write(tmp_path / "b.rumi", b, tile=16, transform=UTM, crs=32633, nodata=0, scales=[2.0, 0.5],
                 offsets=[1.0, 0.0])
    paths = [tmp_path / "a.rumi", tmp_path / "b.rumi", tmp_path / "a.rumi"]
    alone = [open_da(p, **kw).values for p in paths]
    stack = open_da(paths, chunks=chunks, **kw)
    assert np.array_equal(stack.values, np.stack(alone), equal_nan=True)
    for key in (dict(time=1), dict(time=[2, 1]), dict(time=[1, 0], band=1, x=[0, 3]), dict(time=slice(None, None, -1),
                                                                                        y=0, x=0)):
        want = xr.DataArray(np.stack(alone), dims=stack.dims).isel(key).values
        assert np.array_equal(open_da(paths, chunks=chunks, **kw).isel(key).values, want, equal_nan=True), key


def test_to_rumi_keeps_rioxarrays_nodata_scales_descriptions_and_units(described, tmp_path):
    _path, tif, a = described
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        raw = rioxarray.open_rasterio(tif)
        masked = rioxarray.open_rasterio(tif, mask_and_scale=True)
    rumimm.to_rumi(raw, tmp_path / "raw.rumi", tile=16)
    with rumimm.open(tmp_path / "raw.rumi") as img:
        assert img.nodata == -999 and img.scales == (0.5, 0.25) and img.offsets == (10.0, -3.0)
        assert img.descriptions == ("temperature", "pressure") and img.units == ("K", "hPa")
        assert np.array_equal(img[:], a)
    rumimm.to_rumi(masked, tmp_path / "m.rumi", tile=16)
    with rumimm.open(tmp_path / "m.rumi") as img:  # values already masked and scaled: NaN nodata, no scales
        assert np.isnan(img.nodata) and img.scales == (1.0, 1.0) and img.dtype == np.float32
        assert np.array_equal(img[:], masked.values, equal_nan=True)


def test_to_rumi_identifies_a_crs_without_its_own_code_as_convert_does(tmp_path):
    from rumimm.errors import RumiWarning

    da = xr.DataArray(np.zeros((1, 20, 30), np.uint8), dims=("band", "y", "x"),
                      coords={"x": 300015.0 + 30 * np.arange(30), "y": 4499985.0 - 30 * np.arange(20)})
    da = da.rio.write_crs("+proj=utm +zone=18 +ellps=WGS84 +units=m +no_defs")
    with pytest.warns(RumiWarning, match="stored as EPSG:32618"):
        rumimm.to_rumi(da, tmp_path / "u.rumi", tile=16)
    with rumimm.open(tmp_path / "u.rumi") as img:
        assert img.crs == "EPSG:32618" and img.transform == Affine(30.0, 0.0, 300000.0, 0.0, -30.0, 4500000.0)
    geos = da.rio.write_crs("+proj=geos +h=35785831 +lon_0=0 +ellps=WGS84 +units=m")
    with pytest.raises(CRSError, match="no EPSG equivalent"):
        rumimm.to_rumi(geos, tmp_path / "g.rumi", tile=16)
