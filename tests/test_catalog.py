"""Catalogs: building, GeoParquet round trip, bbox selection, opening rows without an IFD,
and parse_blobs over pyarrow columns."""

from __future__ import annotations

import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import rumimm
from rumimm.synthetic import eo_scene

UTM33 = dict(transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0), crs=32633)


def _write(tmp_path, name, seed=0, shape=(3, 200, 300), tile=128, **geo):
    path = tmp_path / name
    array = eo_scene(bands=shape[0], height=shape[1], width=shape[2], dtype="uint16", seed=seed)
    blob = rumimm.write(path, array, tile=tile, **geo)
    return str(path), blob, array


@pytest.fixture
def scenes(tmp_path):
    """Three georeferenced files on a 3 km raster of UTM 33N tiles, one without a CRS."""
    out = []
    for i in range(3):
        t = (10.0, 0.0, 500000.0 + 3000.0 * i, 0.0, -10.0, 4200000.0)
        out.append(_write(tmp_path, f"s{i}.rumi", seed=i, transform=t, crs=32633))
    return out


def test_catalog_rows_hold_what_the_files_say(scenes, tmp_path):
    _write(tmp_path, "plain.rumi", seed=9, shape=(1, 64, 80), tile=32)
    table = rumimm.catalog(tmp_path)                      # a folder: every .rumi under it
    assert table.column_names == list(rumimm.integrations.catalogs.CATALOG_COLUMNS)
    assert table.num_rows == 4
    rows = {r["path"]: r for r in table.to_pylist()}
    for path, blob, array in scenes:
        r = rows[path]
        assert r["blob"] == blob
        assert (r["bands"], r["height"], r["width"]) == array.shape
        assert ((r["dtype"], r["tile_height"], r["tile_width"], r["unit"], r["epsg"])
                == ("uint16", 128, 128, "tile", 32633))
        with rumimm.open(path, header=blob) as img:
            assert tuple(r["transform"]) == img.transform[:6]
            assert (r["left"], r["bottom"], r["right"], r["top"]) == img.bounds
            assert r["bbox"] == dict(zip(("xmin", "ymin", "xmax", "ymax"), img.bounds, strict=True))
    plain = rows[str(tmp_path / "plain.rumi")]
    assert plain["epsg"] is None and plain["geometry"] is None and plain["transform"] is None
    assert plain["nodata"] is None and plain["scales"] == [1.0] and plain["descriptions"] == [None]


def test_catalog_rows_hold_the_sidecar_metadata(tmp_path):
    _write(tmp_path, "m.rumi", seed=1, shape=(2, 40, 50), tile=32, nodata=0, descriptions=["red", "nir"],
           scales=[1e-4, 1e-4], offsets=[-0.1, -0.1], units=["1", "1"])
    row = rumimm.catalog(tmp_path).to_pylist()[0]
    assert row["nodata"] == 0.0 and row["descriptions"] == ["red", "nir"]
    assert row["scales"] == [1e-4, 1e-4] and row["offsets"] == [-0.1, -0.1] and row["units"] == ["1", "1"]


def test_catalog_takes_writer_blobs_and_globs_and_reports_progress(scenes, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(sys.modules["rumimm.reader.validate"], "build_blob",
                        lambda p: pytest.fail(f"indexed {p} although its blob was given"))
    table = rumimm.catalog([p for p, _, _ in scenes], blobs=[b for _, b, _ in scenes],
                           progress=lambda done, total: calls.append((done, total)))
    assert table.column("blob").to_pylist() == [b for _, b, _ in scenes]
    assert calls == [(1, 3), (2, 3), (3, 3)]
    monkeypatch.undo()
    assert rumimm.catalog(str(tmp_path / "s*.rumi")).column("path").to_pylist() == [p for p, _, _ in scenes]
    with pytest.raises(ValueError, match="3 paths but 1 blobs"):
        rumimm.catalog([p for p, _, _ in scenes], blobs=[scenes[0][1]])


def test_geoparquet_one_crs(scenes, tmp_path):
    gpd = pytest.importorskip("geopandas")
    table = rumimm.catalog([p for p, _, _ in scenes])
    rumimm.write_catalog(table, tmp_path / "cat.parquet")
    frame = gpd.read_parquet(tmp_path / "cat.parquet")
    assert frame.crs.to_epsg() == 32633
    for (path, blob, _), geom in zip(scenes, frame.geometry, strict=True):
        with rumimm.open(path, header=blob) as img:
            assert geom.bounds == pytest.approx(img.bounds)
            assert geom.area == pytest.approx((img.bounds[2] - img.bounds[0]) * (img.bounds[3] - img.bounds[1]))
    back = rumimm.read_catalog(tmp_path / "cat.parquet")
    assert back.column("blob").to_pylist() == [b for _, b, _ in scenes]


def test_geoparquet_mixed_crs_goes_to_lonlat_with_an_epsg_column(scenes, tmp_path):
    gpd = pytest.importorskip("geopandas")
    p32, _b32, _ = _write(tmp_path, "west.rumi", transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0), crs=32632)
    table = rumimm.catalog([scenes[0][0], p32])
    rumimm.write_catalog(table, tmp_path / "mixed.parquet")
    frame = gpd.read_parquet(tmp_path / "mixed.parquet")
    assert frame.crs.to_string() == "OGC:CRS84"
    assert frame["epsg"].tolist() == [32633, 32632]
    # both tiles sit at the central meridian of their zone: 15 E and 9 E, about 38 N
    assert frame.geometry.iloc[0].bounds[0] == pytest.approx(15.0, abs=1e-6)
    assert frame.geometry.iloc[1].bounds[0] == pytest.approx(9.0, abs=1e-6)
    assert 37.9 < frame.geometry.iloc[1].centroid.y < 38.0


def test_select_bbox_and_read_catalog_filter(scenes, tmp_path):
    table = rumimm.catalog([p for p, _, _ in scenes])
    rumimm.write_catalog(table, tmp_path / "cat.parquet", row_group_size=1)
    box = (503500.0, 4198500.0, 504000.0, 4199000.0)          # inside the second file only
    assert rumimm.select_bbox(table, box).column("path").to_pylist() == [scenes[1][0]]
    edge = (502500.0, 4198500.0, 503500.0, 4199000.0)         # across the first/second boundary
    assert rumimm.select_bbox(table, edge).num_rows == 2
    assert rumimm.read_catalog(tmp_path / "cat.parquet", bbox=box).column("path").to_pylist() == [scenes[1][0]]
    assert rumimm.select_bbox(table, (0, 0, 1, 1)).num_rows == 0
    with pytest.raises(ValueError, match="min <= max"):
        rumimm.select_bbox(table, (1, 0, 0, 1))


def test_from_catalog_never_parses_an_ifd(scenes, tmp_path, monkeypatch):
    import rumimm.format.tiff

    table = rumimm.catalog([p for p, _, _ in scenes])
    rumimm.write_catalog(table, tmp_path / "cat.parquet")

    def no_ifd(*args, **kwargs):
        raise AssertionError("an IFD was parsed")

    validate = sys.modules["rumimm.reader.validate"]  # rumimm.validate is the function of that name
    for module, name in ((validate, "build_blob"), (validate, "inspect_file"), (rumimm.format.tiff, "read_entries")):
        monkeypatch.setattr(module, name, no_ifd)
    with rumimm.ImageCollection.from_catalog(tmp_path / "cat.parquet") as coll:
        assert len(coll) == 3
        for img, (_, _, array) in zip(coll, scenes, strict=True):
            assert np.array_equal(img[:, 10:90, 20:140], array[:, 10:90, 20:140])
    with rumimm.ImageCollection.from_catalog(table, where=pc.field("path") == scenes[2][0]) as coll:
        assert [img.path for img in coll] == [scenes[2][0]]
    with rumimm.ImageCollection.from_catalog(table, where=(503500.0, 4198500.0, 504000.0, 4199000.0)) as coll:
        assert [img.path for img in coll] == [scenes[1][0]]
    with rumimm.ImageCollection.from_catalog(table, where=np.array([True, False, True])) as coll:
        assert [img.path for img in coll] == [scenes[0][0], scenes[2][0]]
    four = table.take([0, 1, 2, 0])
    with rumimm.ImageCollection.from_catalog(four, where=(False, True, True, False)) as coll:  # a mask, not a bbox
        assert [img.path for img in coll] == [scenes[1][0], scenes[2][0]]
    images = rumimm.ImageCollection.from_catalog(table).images
    assert not any(img.closed for img in images)


def test_from_catalog_refuses_a_bad_blob_before_opening(scenes):
    table = rumimm.catalog([p for p, _, _ in scenes])
    blobs = table.column("blob").to_pylist()
    blobs[1] = b"\x00" + blobs[1][1:]
    bad = table.set_column(1, "blob", pa.array(blobs, pa.binary()))
    with pytest.raises(rumimm.BlobError, match="blob 1 of 3: magic"):
        rumimm.ImageCollection.from_catalog(bad)


def test_write_catalog_needs_geo_metadata(tmp_path):
    with pytest.raises(ValueError, match="GeoParquet metadata"):
        rumimm.write_catalog(pa.table({"path": ["a"]}), tmp_path / "x.parquet")
    assert not list(tmp_path.iterdir())


# -- parse_blobs over pyarrow columns ------------------------------------------------------------


@pytest.fixture
def blobs(scenes, tmp_path):
    other = _write(tmp_path, "cells.rumi", shape=(4, 100, 90), tile=32)[1]
    return [b for _, b, _ in scenes] + [other]


def test_parse_blobs_takes_arrow_arrays(blobs):
    want = rumimm.parse_blobs(blobs)
    binary = pa.array(blobs, pa.binary())
    for column in (binary, binary.cast(pa.large_binary()), pa.chunked_array([binary[:1], binary[1:3], binary[3:]]),
                   pa.chunked_array([], pa.binary())):
        got = rumimm.parse_blobs(column)
        n = len(column)
        for name, values in want.items():
            assert np.array_equal(got[name], values[:n]), name
    sliced = rumimm.parse_blobs(binary.slice(1, 2))
    assert np.array_equal(sliced["image_width"], want["image_width"][1:3])


def test_parse_blobs_arrow_errors(blobs):
    column = pa.array([*blobs[:2], None, *blobs[2:]], pa.binary())
    with pytest.raises(rumimm.BlobError, match="blob 2 is null"):
        rumimm.parse_blobs(column)
    with pytest.raises(TypeError, match="binary or large_binary, got string"):
        rumimm.parse_blobs(pa.array(["x"]))
    bad = pa.array([*blobs[:3], blobs[3][:-1]], pa.binary())
    with pytest.raises(rumimm.BlobError, match="blob 3 of 4"):
        rumimm.parse_blobs(bad)
    assert rumimm.parse_blobs(bad, errors="status")["status"].tolist()[:3] == [0, 0, 0]


def test_parse_blobs_many_rows_split_over_threads(blobs):
    """Above the parallel threshold the rows are checked in ranges; the result is identical."""
    rows = 3 * rumimm.reader.blob_column._PARALLEL_ROWS + 7
    many = [blobs[i % len(blobs)] for i in range(rows)]
    many[-2] = many[-2][:-1]
    column = pa.array(many, pa.binary())
    got = rumimm.parse_blobs(column, errors="status")
    assert np.flatnonzero(got["status"]).tolist() == [rows - 2]
    assert np.array_equal(got["n_frames"][:len(blobs)], rumimm.parse_blobs(blobs)["n_frames"])
    assert np.array_equal(got["n_frames"][len(blobs):2 * len(blobs)], got["n_frames"][:len(blobs)])


def test_rumimm_torchgeo_without_torchgeo_says_what_to_install(monkeypatch):
    for name in ("torchgeo", "torchgeo.datasets"):
        monkeypatch.setitem(sys.modules, name, None)  # an import of it fails, as where it is not installed
    for name in ("rumimm.torchgeo", "rumimm.integrations.torchgeo"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    wanted = r"rumimm.torchgeo needs torchgeo \(Python >= 3.12\): pip install 'rumimm\[torchgeo\]'"
    with pytest.raises(ImportError, match=wanted):
        import rumimm.torchgeo  # noqa: F401


def test_a_catalog_of_remote_uris_takes_storage_options_as_every_entry_point_does(http, tmp_path):
    pytest.importorskip("obstore")  # the "remote" extra; CI installs it
    fast = {"max_retries": 2, "retry_timeout": 3, "timeout": 2, "connect_timeout": 1, "init_backoff": 0.01,
            "max_backoff": 0.05}
    path = tmp_path / "r.rumi"
    blob = rumimm.write(path, eo_scene(bands=2, height=40, width=50, dtype="uint16", seed=3), tile=16, nodata=0)
    url = http.put("cat/r.rumi", path.read_bytes())
    http.put("cat/r.rumi.aux.xml", (tmp_path / "r.rumi.aux.xml").read_bytes())
    for blobs in (None, [blob]):
        table = rumimm.catalog([url], blobs=blobs, storage_options=fast)
        assert table["path"].to_pylist() == [url]
        assert table["blob"].to_pylist() == [bytes(blob)]
        assert table["nodata"].to_pylist() == [0.0]
    with pytest.raises(ValueError, match=r"storage options \['no_such_option'\] do not apply"):
        rumimm.catalog([url], storage_options={"no_such_option": 1})
    assert rumimm.catalog(url, storage_options=fast)["path"].to_pylist() == [url]  # a URI is never globbed


def _grid(tmp_path, name, epsg, transform, size=64):
    path = tmp_path / name
    rumimm.write(path, np.zeros((1, size, size), np.uint8), tile=size, transform=transform, crs=f"EPSG:{epsg}")
    return str(path)


@pytest.fixture
def odd_grids(tmp_path):
    """A mixed-CRS catalog (OGC:CRS84 footprints) of grids a plain outline misdescribes, and two ordinary ones."""
    return {
        "arctic": _grid(tmp_path, "arctic.rumi", 3413, (31250, 0, -1000000, 0, -31250, 1000000)),  # holds the pole
        "antarctic": _grid(tmp_path, "antarctic.rumi", 3031, (31250, 0, -1000000, 0, -31250, 1000000)),
        "geo360": _grid(tmp_path, "geo360.rumi", 4326, (0.1, 0, 190, 0, -0.1, 50)),  # 190..196.4 E
        "utm60": _grid(tmp_path, "utm60.rumi", 32660, (2500, 0, 600000, 0, -2500, 6700000)),  # across 180
        # not holding the pole: its northernmost point (0, 300 km) is mid-edge, between the outline's samples
        "polar": _grid(tmp_path, "polar.rumi", 3413, (10000, 0, -300000, 0, -10000, 1300000), size=100),
        "utm33": _grid(tmp_path, "utm33.rumi", 32633, (1000, 0, 400000, 0, -1000, 5600000)),
        "geo": _grid(tmp_path, "geo.rumi", 4326, (0.1, 0, 10, 0, -0.1, 50)),
    }


def test_mixed_crs_footprints_follow_rfc7946(odd_grids, tmp_path):
    import json

    import pyproj
    rasterio = pytest.importorskip("rasterio")
    from rasterio.warp import transform_bounds

    table = rumimm.catalog(list(odd_grids.values()))
    boxes = dict(zip(odd_grids, ([b[k] for k in ("xmin", "ymin", "xmax", "ymax")]
                                 for b in table["bbox"].to_pylist()), strict=True))
    for name in ("arctic", "antarctic", "utm60", "utm33", "geo"):
        with rasterio.open(odd_grids[name]) as ds:
            assert boxes[name] == pytest.approx(transform_bounds(ds.crs, "EPSG:4326", *ds.bounds, densify_pts=21),
                                                abs=1e-6), name
    assert boxes["arctic"][3] == 90.0 and boxes["antarctic"][1] == -90.0  # was 80.8 N: the pole missed
    assert boxes["geo360"] == pytest.approx([-170.0, 43.6, -163.6, 50.0])  # longitudes within 180
    assert boxes["utm60"][0] > boxes["utm60"][2]  # across the antimeridian: west > east (was 359.8 degrees wide)
    top = pyproj.Transformer.from_crs(3413, 4326, always_xy=True).transform(0.0, 300000.0)[1]
    assert boxes["polar"][3] >= top - 1e-9  # rasterio's 21 points stop short of it too
    geo = json.loads(table.schema.metadata[b"geo"])["columns"]["geometry"]
    assert set(geo["geometry_types"]) == {"Polygon", "MultiPolygon"}
    assert geo["bbox"][0] == -180.0 and geo["bbox"][2] == 180.0

    gpd = pytest.importorskip("geopandas")
    shapely = pytest.importorskip("shapely")
    rumimm.write_catalog(table, tmp_path / "mixed.parquet", row_group_size=1)
    frame = gpd.read_parquet(tmp_path / "mixed.parquet")
    assert frame.geometry.is_valid.all()
    assert frame.geometry.iloc[3].geom_type == "MultiPolygon"
    names = np.array(list(odd_grids))

    def meets(geom):
        return sorted(names[frame.geometry.intersects(geom).to_numpy()])

    assert meets(shapely.Point(0, 89.9)) == ["arctic"]
    assert meets(shapely.Point(179.95, 59.7)) == ["utm60"]
    assert meets(shapely.box(90, 59.4, 91, 59.6)) == []  # the 359.8-degree polygon met this
    assert meets(shapely.Point(135.0, top - 1e-4)) == ["arctic", "polar"]  # the point of the file's edge

    for query, want in [((-10, 89, 10, 90), ["arctic"]), ((-10, -90, 10, -89), ["antarctic"]),
                        ((-170, 45, -160, 50), ["geo360"]), ((-179.5, 59, -179, 60), ["utm60"]),
                        ((179.5, 59, 179.9, 60), ["utm60"]), ((0, 59, 1, 59.5), []),
                        ((179, 59, -179, 60), ["utm60"]),  # a query across the antimeridian
                        ((170, 45, -160, 60), ["geo360", "utm60"]),
                        ((134.99, top - 1e-3, 135.01, top - 1e-4), ["arctic", "polar"])]:
        with rumimm.ImageCollection.from_catalog(table, where=query) as coll:
            opened = [img.path for img in coll]
        for got in (rumimm.select_bbox(table, query)["path"].to_pylist(),
                    rumimm.read_catalog(tmp_path / "mixed.parquet", bbox=query)["path"].to_pylist(), opened):
            assert sorted(names[np.isin(list(odd_grids.values()), got)]) == want, query
    with pytest.raises(rumimm.RumiError, match="min <= max"):
        rumimm.select_bbox(table, (10, 50, 0, 40))  # south > north
    with pytest.raises(rumimm.RumiError, match="min <= max"):
        rumimm.select_bbox(table, (190, 0, 170, 1))  # west > east, but not a longitude


def test_single_crs_catalog_refuses_west_past_east(scenes):
    table = rumimm.catalog([p for p, _, _ in scenes])
    with pytest.raises(rumimm.RumiError, match="min <= max"):
        rumimm.select_bbox(table, (10.0, 0.0, -10.0, 1.0))  # metres: no antimeridian to cross


def test_where_takes_a_bbox_list_and_a_bool_list_as_a_mask(odd_grids):
    paths = [odd_grids[k] for k in ("utm33", "geo", "arctic", "utm60")]
    table = rumimm.catalog(paths)
    for where in ([13.0, 49.0, 15.0, 51.0], (13.0, 49.0, 15.0, 51.0), np.array([13.0, 49.0, 15.0, 51.0]),
                  [13, 49, 15, 51]):
        coll = rumimm.ImageCollection.from_catalog(table, where=where)
        assert sorted(img.path for img in coll) == sorted(paths[:2]), where
        coll.close()
    coll = rumimm.ImageCollection.from_catalog(table, where=[False, True, True, False])  # 4 booleans: a mask
    assert [img.path for img in coll] == paths[1:3]
    coll.close()
    small = rumimm.catalog(paths[:3])
    coll = rumimm.ImageCollection.from_catalog(small, where=[0.0, 0.0, 15.0, 51.0])  # 3 rows: still a bbox
    assert sorted(img.path for img in coll) == sorted(paths[:2])
    coll.close()


def test_a_bbox_needs_the_bbox_column(scenes, tmp_path):
    rumimm.write_catalog(rumimm.catalog([p for p, _, _ in scenes]), tmp_path / "cat.parquet")
    table = rumimm.read_catalog(tmp_path / "cat.parquet", columns=["path", "blob"])
    with pytest.raises(rumimm.RumiError, match="no 'bbox' column"):
        rumimm.ImageCollection.from_catalog(table, where=(0, 0, 1e7, 1e7))
    with pytest.raises(rumimm.RumiError, match="no 'bbox' column"):
        rumimm.select_bbox(table, (0, 0, 1e7, 1e7))
    # reading it with its bbox column but only some columns out still works
    assert rumimm.read_catalog(tmp_path / "cat.parquet", columns=["path"], bbox=(0, 0, 1e7, 1e7)).num_rows == 3


def test_a_catalog_reads_back_from_http_and_s3(http, tmp_path, monkeypatch):
    pytest.importorskip("obstore")
    from servers import MotoS3

    fast = {"max_retries": 2, "retry_timeout": 3, "timeout": 2, "connect_timeout": 1, "init_backoff": 0.01,
            "max_backoff": 0.05}
    path = tmp_path / "r.rumi"
    rumimm.write(path, eo_scene(bands=1, height=40, width=50, dtype="uint16", seed=3), tile=16, **UTM33)
    url = http.put("back/r.rumi", path.read_bytes())
    table = rumimm.catalog([url], storage_options=fast)
    rumimm.write_catalog(table, tmp_path / "cat.parquet", row_group_size=1)
    cat_url = http.put("back/cat.parquet", (tmp_path / "cat.parquet").read_bytes())
    assert rumimm.read_catalog(cat_url, storage_options=fast).equals(table)
    assert rumimm.read_catalog(cat_url, bbox=(500000, 4199000, 500100, 4200000), storage_options=fast).num_rows == 1
    with rumimm.ImageCollection.from_catalog(cat_url, storage_options=fast) as coll:
        assert [img.path for img in coll] == [url]
    with pytest.raises(Exception) as info:  # neither credentials nor a query string in the message
        rumimm.read_catalog(http.url.replace("http://", "http://user:s3cret@") + "/back/none.parquet?sig=TOKEN",
                            storage_options=fast)
    assert "s3cret" not in str(info.value) and "TOKEN" not in str(info.value)
    from rumimm.integrations.chips import _sources

    assert _sources(cat_url, None, fast)[0] == [url]

    moto = MotoS3().start()
    try:
        moto.client().create_bucket(Bucket="cat")
        so = {"endpoint": moto.endpoint, "access_key_id": "testing", "secret_access_key": "testing",
              "region": "us-east-1", "allow_http": True, **fast}
        moto.client().put_object(Bucket="cat", Key="r.rumi", Body=path.read_bytes())
        on_s3 = rumimm.catalog(["s3://cat/r.rumi"], storage_options=so)
        rumimm.write_catalog(on_s3, "s3://cat/catalog.parquet", storage_options=so)
        assert rumimm.read_catalog("s3://cat/catalog.parquet", storage_options=so).equals(on_s3)
        with rumimm.ImageCollection.from_catalog("s3://cat/catalog.parquet", storage_options=so) as coll:
            assert [img.path for img in coll] == ["s3://cat/r.rumi"]  # the options reach the catalog and its files
            assert coll[0].read().shape == (1, 40, 50)
    finally:
        moto.stop()


def test_stac_items_of_an_old_catalog_keep_nodata_within_the_dtype(tmp_path):
    pytest.importorskip("pystac")
    import datetime as dt

    from rumimm import stac

    rows = []
    for name, dtype, nodata in (("u64.rumi", "uint64", np.iinfo(np.uint64).max),
                                ("i64.rumi", "int64", np.iinfo(np.int64).min), ("u8.rumi", "uint8", 255)):
        rumimm.write(tmp_path / name, np.zeros((1, 16, 16), dtype), tile=16, nodata=nodata, **UTM33)
        rows.append(str(tmp_path / name))
    old = rumimm.catalog(rows).drop_columns(["nodatavals"])  # a catalog written before the column
    items = stac.to_items(old, datetime=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    got = [it.assets["data"].extra_fields["raster:bands"][0]["nodata"] for it in items]
    assert got == [int(np.iinfo(np.uint64).max), int(np.iinfo(np.int64).min), 255]
