"""Spec 0.2 files through the rest of rumimm: Cube, read_batch, ChipDataset, catalogs, xarray, Dask,
GeoTIFF export and quicklook (fixtures written by rumi-eo 0.26.1, ``tests/data/v2``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import rumimm
from rumimm.errors import BlobError, RumiError, WindowError

DATA = Path(__file__).parent / "data" / "v2"
sys.path.insert(0, str(DATA))
import make_fixtures_v2 as make_fixtures  # noqa: E402  (not tests/data/make_fixtures.py, the 0.1 fixtures)


def _p(name):
    return str(DATA / f"{name}.rumi")


def test_a_cube_and_a_batch_of_02_images_read_every_layout_of_one_step():
    a, c = make_fixtures.source("img_u2"), make_fixtures.source("img_u0")
    cube = rumimm.Cube([_p("img_u2"), _p("img_u2")])
    np.testing.assert_array_equal(cube[:, [2, 0], 3:9:2, 1:13], np.stack([a, a])[:, [2, 0], 3:9:2, 1:13])
    got = rumimm.read_batch([_p("img_u2"), _p("img_u2")], np.array([[0, 0], [4, 4]]), size=(8, 8), bands=[2, 0])
    np.testing.assert_array_equal(got, np.stack([a[[2, 0], :8, :8], a[[2, 0], 4:12, 4:12]]))
    got = rumimm.read_batch([_p("img_u0"), _p("img_u1")], np.array([[1, 2], [3, 4]]), size=(5, 6))
    np.testing.assert_array_equal(got[0], c[:, 1:6, 2:8])


@pytest.mark.parametrize("names", [("cube_u4", "cube_u9"), ("cube_u0", "cube_u3"), ("cube_u7", "cube_u5"),
                                   ("cube_u8", "cube_u6", "cube_u4")])
def test_a_cube_of_files_of_several_steps_is_their_time_series_end_to_end(names):
    # band-major and time-major frames, planar and interleaved cells, mixed in one Cube
    want = np.concatenate([make_fixtures.source(n) for n in names])
    with rumimm.Cube([_p(n) for n in names]) as cube:
        assert cube.shape == want.shape == (3 * len(names), 2, 20, 18)
        assert cube.steps == [(i, t) for i in range(len(names)) for t in range(3)]
        assert cube.time == [v for n in names for v in rumimm.open(_p(n)).time]
        np.testing.assert_array_equal(cube[...], want)
        np.testing.assert_array_equal(cube[[5, 0, 3, 4], ::-1, 3:19:4, 2:17], want[[5, 0, 3, 4], ::-1, 3:19:4, 2:17])
        np.testing.assert_array_equal(cube[-1, 1], want[-1, 1])
        np.testing.assert_array_equal(cube.read(1, window=((2, 9), (0, 5))), want[:, 0, 2:9, 0:5])


def test_a_cube_mixes_files_of_one_step_and_of_several_and_checks_their_step_shape(tmp_path):
    cube9 = make_fixtures.source("cube_u9")
    one = (np.arange(2 * 20 * 18, dtype=np.uint16).reshape(2, 20, 18) * 7) % 1000
    rumimm.write(tmp_path / "one.rumi", one, tile=8)  # spec 0.1: one step, no time
    with rumimm.Cube([tmp_path / "one.rumi", _p("cube_u9")]) as cube:
        assert cube.shape == (4, 2, 20, 18) and cube.steps == [(0, 0), (1, 0), (1, 1), (1, 2)]
        assert cube.time is None  # the spec 0.1 file has none
        np.testing.assert_array_equal(cube[:, :, 5:15], np.concatenate([one[None], cube9])[:, :, 5:15])
    with pytest.raises(RumiError, match=r"not grid-aligned: shape \(2, 20, 18\) != \(3, 20, 18\)"):
        rumimm.Cube([_p("cube_u9"), _p("img_u0")])


def test_batches_and_chips_of_files_of_several_steps_have_a_time_axis():
    c4, c9, c7 = (make_fixtures.source(n) for n in ("cube_u4", "cube_u9", "cube_u7"))
    got = rumimm.read_batch([_p("cube_u4"), _p("cube_u9")], np.array([[0, 0], [4, 3]]), size=(8, 8), bands=[1, 1, 0])
    assert got.shape == (2, 3, 3, 8, 8)
    np.testing.assert_array_equal(got[0], c4[:, [1, 1, 0], :8, :8])
    np.testing.assert_array_equal(got[1], c9[:, [1, 1, 0], 4:12, 3:11])
    got = rumimm.read_batch([_p("cube_u7")], np.array([[2, 2]]), size=(8, 8), bands=1)  # interleaved cells
    np.testing.assert_array_equal(got[0], c7[:, 1, 2:10, 2:10])
    # one band-major and one time-major file: each read in its own (step, band) numbering, as a Cube reads them
    c3 = make_fixtures.source("cube_u3")
    got = rumimm.read_batch([_p("cube_u4"), _p("cube_u3")], np.array([[0, 0], [2, 1]]), size=(8, 8), bands=[1, 0])
    np.testing.assert_array_equal(got[0], c4[:, [1, 0], :8, :8])
    np.testing.assert_array_equal(got[1], c3[:, [1, 0], 2:10, 1:9])
    with pytest.raises(RumiError, match="has 1 time step"):
        rumimm.read_batch([_p("cube_u4"), _p("img_u0")], np.array([[0, 0], [0, 0]]), size=(8, 8))
    ds = rumimm.ChipDataset([_p("cube_u4"), _p("cube_u9")], size=8, n=5, seed=2)
    batch = ds.__getitems__(list(range(5)))
    assert batch.shape == (5, 3, 2, 8, 8)
    for i, (f, y, x) in enumerate(ds.chips):
        np.testing.assert_array_equal(batch[i], (c4, c9)[int(f)][:, :, y:y + 8, x:x + 8])
    with pytest.raises(ValueError, match="time step"):
        rumimm.ChipDataset([_p("cube_u4"), _p("img_u0")], size=8, n=2, bands=[0])


def test_chips_come_from_02_files_and_their_headers():
    headers = [(DATA / "img_u0.header").read_bytes(), (DATA / "img_u1.header").read_bytes()]
    ds = rumimm.ChipDataset([_p("img_u0"), _p("img_u1")], size=8, n=6, seed=3, headers=headers)
    src = [make_fixtures.source("img_u0"), make_fixtures.source("img_u1")]
    batch = ds.__getitems__(list(range(6)))
    for i, (f, y, x) in enumerate(ds.chips):
        np.testing.assert_array_equal(batch[i], src[int(f)][:, y:y + 8, x:x + 8])


def test_a_catalog_lists_spec_time_and_band_texts_and_reopens_its_rows(tmp_path):
    pytest.importorskip("pyarrow")
    paths = [_p("img_u0"), _p("cube_interval"), str(DATA.parent / "u8_geo_utm33n.rumi")]
    table = rumimm.catalog(paths)
    rows = table.select(["spec", "time_count", "descriptions", "time", "bands", "height", "unit"]).to_pylist()
    assert rows[0] == {"spec": "0.2", "time_count": 1, "descriptions": ["B2, Blue", "B3, Green", "B4, Red"],
                       "time": ["2026-01-01"], "bands": 3, "height": 20, "unit": "h w"}
    assert rows[1]["time"] == ["2026-01-01/2026-01-16", "2026-02-01/2026-02-15"] and rows[1]["time_count"] == 2
    assert rows[2]["spec"] == "0.1" and rows[2]["time"] is None
    rumimm.write_catalog(table, tmp_path / "c.parquet")
    coll = rumimm.ImageCollection.from_catalog(tmp_path / "c.parquet")
    assert [im.spec for im in coll.images] == ["0.2", "0.2", "0.1"]
    from rumimm.reader.blob_column import parse_blobs_any

    fields = parse_blobs_any(table.column("blob"))
    assert fields["spec"].tolist() == [2, 2, 1] and fields["time_count"].tolist() == [1, 2, 1]
    with pytest.raises(BlobError, match=r"blob 0 of 1: .*nor a spec 0.2 blob"):
        parse_blobs_any([b"LOVE" + bytes(40)])


def test_xarray_gives_02_files_a_time_dimension_and_band_descriptions():
    xr = pytest.importorskip("xarray")
    da = xr.open_dataarray(_p("cube_u4"), engine="rumimm")
    assert da.dims == ("time", "band", "y", "x")
    # compared as datetimes: xarray before 2025.1 holds every time coordinate in nanoseconds
    assert np.array_equal(da.time.values, np.array(["2026-01-01", "2026-02-01", "2026-03-01"], "datetime64[s]"))
    assert da.time.values.dtype.kind == "M"
    assert da.description.values.tolist() == ["x", "y"]
    np.testing.assert_array_equal(da.isel(time=2, band=1, y=slice(3, 9)).values,
                                  make_fixtures.source("cube_u4")[2, 1, 3:9])
    iv = xr.open_dataarray(_p("cube_interval"), engine="rumimm")
    assert "time_end" in iv.coords
    img = xr.open_dataarray(_p("img_u0"), engine="rumimm")
    assert img.dims == ("band", "y", "x") and img.attrs["time"] == "2026-01-01" and "x" in img.coords


def test_xarray_stacks_02_files_of_several_steps_on_their_times_end_to_end(tmp_path):
    xr = pytest.importorskip("xarray")
    rng = np.random.default_rng(3)
    parts = [rng.integers(0, 4000, (n, 2, 20, 18), dtype=np.uint16) for n in (3, 2)]
    times = [["2026-01-01", "2026-01-11", "2026-01-21"], ["2026-02-01", "2026-02-11"]]
    paths = [tmp_path / "jan.rumi", tmp_path / "feb.rumi"]
    for path, arr, t in zip(paths, parts, times, strict=True):
        rumimm.write(path, arr, spec="0.2", tile=8, time=t, descriptions=["red", "nir"])
    da = xr.open_dataarray(paths, engine="rumimm")
    assert da.dims == ("time", "band", "y", "x") and da.shape == (5, 2, 20, 18)
    assert np.array_equal(da.time.values, np.array(times[0] + times[1], "datetime64[s]"))
    np.testing.assert_array_equal(da.values, np.concatenate(parts))
    np.testing.assert_array_equal(da.sel(time="2026-02-11", band=2).values, parts[1][1, 1])
    # labels given, or another leading dim: the stack's own labels, as for spec 0.1 stacks
    da = xr.open_dataarray(paths, engine="rumimm", stack_dim="scene")
    assert da.dims[0] == "scene" and da.scene.values.tolist() == [0, 1, 2, 3, 4]


def test_dask_chunks_02_files_in_whole_frames_by_the_chunk_size():
    arr = rumimm.to_dask(_p("cube_u0"))  # whole frames of every step and band, by array.chunk-size
    assert arr.chunks == tuple((n,) for n in arr.shape)
    np.testing.assert_array_equal(arr.compute(), make_fixtures.source("cube_u0"))


def test_geotiff_export_and_quicklook_take_02_images(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    pytest.importorskip("PIL")
    rumimm.to_geotiff(_p("img_u0"), tmp_path / "a.tif")
    with rasterio.open(tmp_path / "a.tif") as ds:
        np.testing.assert_array_equal(ds.read(), make_fixtures.source("img_u0"))
        assert ds.crs.to_epsg() == 32633
    rumimm.quicklook(_p("img_u2"), tmp_path / "q.png")
    assert (tmp_path / "q.png").stat().st_size > 0


def test_geotiff_export_and_quicklook_refuse_files_of_several_steps_clearly(tmp_path):
    pytest.importorskip("rasterio")
    pytest.importorskip("PIL")
    with pytest.raises(RumiError, match="3 time steps"):
        rumimm.to_geotiff(_p("cube_u4"), tmp_path / "a.tif")
    with pytest.raises(RumiError, match="3 time steps"):
        rumimm.quicklook(_p("cube_u4"), tmp_path / "q.png")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["cube_u4", "cube_interval", "img_u0", "cube_seconds"])
def test_an_02_file_opened_with_xarray_writes_back_with_its_time_and_band_texts(tmp_path, name):
    xr = pytest.importorskip("xarray")
    da = xr.open_dataarray(_p(name), engine="rumimm")
    rumimm.to_rumi(da, tmp_path / "x.rumi", spec="0.2", tile=8)
    with rumimm.open(_p(name)) as a, rumimm.open(tmp_path / "x.rumi") as b:
        np.testing.assert_array_equal(b[...], a[...])
        assert (b.time, b.descriptions, b.crs, b.transform) == (a.time, a.descriptions, a.crs, a.transform)


def _stack_of_02_files(tmp_path, texts=(["red", "nir"],) * 3, steps=(2, 1, 3)):
    """Files of 2, 1 and 3 steps (a list of paths opens on their times end to end) and their pixels."""
    rng = np.random.default_rng(7)
    paths, parts, times = [], [], []
    for i, (n, t) in enumerate(zip(steps, texts, strict=True)):
        arr = rng.integers(0, 4000, (n, 2, 20, 18), dtype=np.uint16)
        days = [np.datetime64("2026-01-01") + np.timedelta64(10 * i + k, "D") for k in range(n)]
        paths.append(tmp_path / f"s{i}.rumi")
        rumimm.write(paths[-1], arr if n > 1 else arr[0], spec="0.2", tile=8, time=days, descriptions=t,
                     unit="cell" if i % 2 else "tile", transform=(10, 0, 500000, 0, -10, 4200000), crs=32633)
        parts.append(arr)
        times += days
    return paths, np.concatenate(parts), times


def test_to_rumi_takes_time_and_descriptions_passed_over_a_leading_coordinate_that_is_not_a_time(tmp_path):
    """stack_dim="scene" numbers the items: with time= passed the numbers are not read as times; without
    it, numbers and strings that are no dates are refused as a RumiError saying to pass time=."""
    xr = pytest.importorskip("xarray")
    paths, want, times = _stack_of_02_files(tmp_path)
    da = xr.open_dataarray(paths, engine="rumimm", stack_dim="scene")
    out = tmp_path / "out.rumi"
    assert "description" not in da.coords  # stacked on other labels: no trailer is read for band texts
    for d in (da, da.assign_coords(scene=list("abcdef"))):
        rumimm.to_rumi(d, out, spec="0.2", tile=8, time=times, descriptions=["R", "N"])
        with rumimm.open(out) as img:
            np.testing.assert_array_equal(img[...], want)
            assert np.array_equal(img.trailer.datetime64(), np.array(times, "datetime64[s]"))
            assert img.descriptions == ("R", "N")
    for d in (da, da.assign_coords(scene=list("abcdef")), da.assign_coords(scene=np.arange(6.0))):
        with pytest.raises(RumiError, match=r"coordinate 'scene' .* is not a time.*pass time=\[\.\.\.\]"):
            rumimm.to_rumi(d, out, spec="0.2", tile=8)
    # dates as strings are times; a fraction of a second is refused, not cut off
    rumimm.to_rumi(da.assign_coords(scene=[str(t) for t in times]), out, spec="0.2", tile=8,
                   descriptions=["red", "nir"])
    with rumimm.open(out) as img:
        assert np.array_equal(img.trailer.datetime64(), np.array(times, "datetime64[s]"))
        assert img.descriptions == ("red", "nir")
    late = xr.open_dataarray(paths, engine="rumimm")
    late = late.assign_coords(time=late.time + np.timedelta64(500, "ms"))
    with pytest.raises(ValueError, match="fraction of a second"):
        rumimm.to_rumi(late, out, spec="0.2", tile=8)


def test_to_rumi_of_one_band_of_a_file_of_several_steps_writes_steps_not_bands(tmp_path):
    """isel(band=1) leaves (time, y, x) and a scalar description: one band of T steps, its text kept."""
    xr = pytest.importorskip("xarray")
    da = xr.open_dataarray(_p("cube_u4"), engine="rumimm")
    rumimm.to_rumi(da.isel(band=1), tmp_path / "b.rumi", spec="0.2", tile=8)
    with rumimm.open(_p("cube_u4")) as a, rumimm.open(tmp_path / "b.rumi") as b:
        assert b.shape == (3, 1, 20, 18)
        np.testing.assert_array_equal(b[...], a[:, 1:2])
        assert (b.time, b.descriptions) == (a.time, ("y",))
    # a stack's leading dim other than time: the scalar band coordinate says the band was selected away
    paths, want, times = _stack_of_02_files(tmp_path)
    scenes = xr.open_dataarray(paths, engine="rumimm", stack_dim="scene")
    rumimm.to_rumi(scenes.isel(band=0), tmp_path / "s.rumi", spec="0.2", tile=8, time=times, descriptions=["red"])
    with rumimm.open(tmp_path / "s.rumi") as img:
        np.testing.assert_array_equal(img[...], want[:, :1])
        assert img.descriptions == ("red",) and len(img.time) == 6


@pytest.mark.parametrize("name", ["cube_u4", "cube_interval", "cube_seconds"])
def test_to_rumi_of_one_step_of_a_file_of_several_writes_that_steps_time(tmp_path, name):
    xr = pytest.importorskip("xarray")
    da = xr.open_dataarray(_p(name), engine="rumimm")
    rumimm.to_rumi(da.isel(time=1), tmp_path / "x.rumi", spec="0.2", tile=8)
    with rumimm.open(_p(name)) as a, rumimm.open(tmp_path / "x.rumi") as b:
        np.testing.assert_array_equal(b[...], a[1])
        assert (b.time, b.time_kind, b.descriptions) == ([a.time[1]], a.time_kind, a.descriptions)


def test_a_stack_of_02_files_sharing_band_texts_writes_back_with_them(tmp_path):
    """A list of paths or a Cube of 0.2 files gets their shared band texts as its description coordinate,
    so to_rumi writes it back; files whose texts differ get none (pass descriptions=)."""
    xr = pytest.importorskip("xarray")
    paths, want, times = _stack_of_02_files(tmp_path)
    for obj in (paths, rumimm.Cube(paths)):
        with xr.open_dataarray(obj, engine="rumimm") as da:
            assert da.description.values.tolist() == ["red", "nir"] and da.attrs["long_name"] == ("red", "nir")
            rumimm.to_rumi(da, tmp_path / "out.rumi", spec="0.2", tile=8)
        with rumimm.open(tmp_path / "out.rumi") as img:
            np.testing.assert_array_equal(img[...], want)
            assert np.array_equal(img.trailer.datetime64(), np.array(times, "datetime64[s]"))
            assert img.descriptions == ("red", "nir") and img.epsg == 32633
    other = tmp_path / "other"
    other.mkdir()
    paths, want, times = _stack_of_02_files(other, texts=(["red", "nir"], ["nir", "red"], ["red", "nir"]))
    with xr.open_dataarray(paths, engine="rumimm") as da:
        assert "description" not in da.coords
        with pytest.raises(TypeError, match="pass descriptions="):
            rumimm.to_rumi(da, tmp_path / "out.rumi", spec="0.2", tile=8)
    # one 0.2 file without a sidecar: its band texts are also its long_name, as a sidecar's would be
    with xr.open_dataarray(_p("img_u0"), engine="rumimm") as da:
        assert da.attrs["long_name"] == ("B2, Blue", "B3, Green", "B4, Red")


def test_time_values_of_every_datetime64_unit_are_whole_seconds_or_refused(tmp_path):
    arr = np.zeros((1, 4, 4), np.uint8)
    for t in (np.datetime64("2026-01-01T00:00:05.000", "ms"), np.datetime64("3000-01-01", "D"),
              np.datetime64("2026-01-01T00:00:07", "ns")):
        rumimm.write(tmp_path / "t.rumi", arr, tile=4, spec="0.2", descriptions=["a"], time=[t])
        with rumimm.open(tmp_path / "t.rumi") as img:
            assert img.trailer.datetime64()[0] == t.astype("datetime64[s]")
    with pytest.raises(ValueError, match="fraction of a second"):
        rumimm.write(tmp_path / "u.rumi", arr, tile=4, spec="0.2", descriptions=["a"],
                     time=[np.datetime64("2026-01-01T00:00:05.5", "ms")])


@pytest.mark.parametrize("unit", ["cell", 9, 4])
def test_read_batch_of_time_major_files_with_other_band_counts_reads_each_files_own_bands(tmp_path, unit):
    """A time-major grid numbers its (step, band) pairs by its own band count: a batch of files of 2 and
    3 bands reads each file's bands, not the first file's numbering applied to all."""
    rng = np.random.default_rng(4)
    cubes = [rng.integers(0, 60000, (2, b, 8, 8), dtype=np.uint16) for b in (2, 3, 3, 2)]
    paths = []
    for i, c in enumerate(cubes):
        paths.append(tmp_path / f"c{i}.rumi")
        rumimm.write(paths[-1], c, tile=8, unit=unit, spec="0.2", time=["2026-01-01", "2026-01-02"],
                     descriptions=[f"b{j}" for j in range(c.shape[1])])
    got = rumimm.read_batch(paths, ((0, 8), (0, 8)), bands=[1, 0])
    assert got.shape == (4, 2, 2, 8, 8)
    for g, c in zip(got, cubes, strict=True):
        np.testing.assert_array_equal(g, c[:, [1, 0]])
    np.testing.assert_array_equal(rumimm.read_batch(paths[1:3], ((0, 8), (0, 8)))[1], cubes[2])


def test_read_batch_takes_bands_as_image_read_does(tmp_path):
    """A boolean mask selects bands (not the bands 0 and 1), negatives count from the end, and a float is
    refused rather than truncated, as numpy and Image.read take them."""
    arr = np.arange(3 * 8 * 8, dtype=np.uint16).reshape(3, 8, 8)
    path = tmp_path / "a.rumi"
    rumimm.write(path, arr, tile=8)
    win = ((0, 4), (0, 4))
    np.testing.assert_array_equal(rumimm.read_batch([path], win, bands=[True, False, True])[0], arr[[0, 2], :4, :4])
    np.testing.assert_array_equal(rumimm.read_batch([path], win, bands=np.array([False, True, False]))[0],
                                  arr[[1], :4, :4])
    np.testing.assert_array_equal(rumimm.read_batch([path], win, bands=[-1, 0, -1])[0], arr[[2, 0, 2], :4, :4])
    with rumimm.open(path) as img:
        np.testing.assert_array_equal(img[[True, False, True], :4, :4], arr[[0, 2], :4, :4])
    for bad, match in (([1.9], "integer or boolean"), ([True, False], "boolean index did not match"),
                       (True, "got a bool"), ([[0, 1]], "1-d list")):
        with pytest.raises(WindowError, match=match):
            rumimm.read_batch([path], win, bands=bad)
