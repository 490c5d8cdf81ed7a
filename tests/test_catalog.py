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
