"""rumimm.stac: Items valid against the STAC 1.1 and extension schemas (offline), catalogs as
ItemCollections and back, and Items loaded with no header request (local HTTP server, moto's S3)."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import itertools
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import rumimm
from rumimm import stac
from rumimm.integrations import stac as stac_impl
from rumimm.synthetic import eo_scene

pystac = pytest.importorskip("pystac")  # the "stac" extra; the test extra installs it, CI runs these
jsonschema = pytest.importorskip("jsonschema")

SCHEMAS = Path(__file__).parent / "data" / "stac-schemas"
T0 = dt.datetime(2024, 5, 1, 10, 30, tzinfo=dt.UTC)


def _transform(i: int) -> tuple[float, ...]:
    return (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)


def _validator():
    """A Draft 7 validator for STAC 1.1 Items whose every $ref resolves from local files (none fetched)."""
    from pystac.validation.local_validator import get_local_schema_cache
    from referencing import Registry, Resource

    def refuse(uri):
        raise AssertionError(f"schema {uri} is not held locally (tests reach no network)")

    resources = [(uri, Resource.from_contents(doc)) for uri, doc in get_local_schema_cache().items()]
    for f in SCHEMAS.glob("*.json"):
        doc = json.loads(f.read_text())
        resources.append((doc["$id"].rstrip("#"), Resource.from_contents(doc)))
    registry = Registry(retrieve=refuse).with_resources(resources)
    item_schema = get_local_schema_cache()["https://schemas.stacspec.org/v1.1.0/item-spec/json-schema/item.json"]

    def validate(item_dict):
        jsonschema.Draft7Validator(item_schema, registry=registry).validate(item_dict)
        for uri in item_dict["stac_extensions"]:
            schema = registry.get_or_retrieve(uri).value.contents
            jsonschema.Draft7Validator(schema, registry=registry).validate(item_dict)
        return True

    return validate


@pytest.fixture(scope="module")
def validate():
    return _validator()


def _write(folder, name, seed=0, spec=None, **kw):
    array = eo_scene(bands=3, height=96, width=128, dtype="uint16", seed=seed)
    path = folder / name
    extra = {"spec": spec, "descriptions": ["red", "green", "nir"]} if spec == "0.2" else {}
    blob = rumimm.write(path, array, tile=32, transform=_transform(seed), crs=32633, nodata=0, **extra, **kw)
    return str(path), blob, array


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """Four 0.1 files and two 0.2 files (with times), all on one grid: [(path, blob, array)]."""
    d = tmp_path_factory.mktemp("stac")
    out = [_write(d, f"s{i}.rumi", seed=i) for i in range(4)]
    for i in range(2):
        out.append(_write(d, f"t{i}.rumi", seed=10 + i, spec="0.2",
                          time=[np.datetime64(f"2024-06-0{i + 1}T10:00")]))
    return out


def _items(scenes):
    return stac.items([p for p, _, _ in scenes], blobs=[b for _, b, _ in scenes],
                      datetime=[T0 + dt.timedelta(days=i) for i in range(len(scenes))])


# -- Items --------------------------------------------------------------------------------

def test_items_of_both_specs_validate_against_stac_1_1_and_every_extension_they_use(scenes, validate):
    items = _items(scenes)
    assert [it.id for it in items] == ["s0", "s1", "s2", "s3", "t0", "t1"]
    for it in items:
        d = it.to_dict()
        assert validate(d)
        assert set(d["stac_extensions"]) >= {stac.PROJECTION, stac.RASTER}
    d = items[0].to_dict()
    asset = d["assets"]["data"]
    assert base64.b64decode(asset["rumi:header"]) == scenes[0][1]
    assert asset["rumi:spec"] == "0.1" and asset["type"] == stac.MEDIA_TYPE
    assert asset["file:size"] == Path(scenes[0][0]).stat().st_size
    # the sidecar (nodata) binds the file's SHA-256: the checksum costs no read of the file
    assert asset["file:checksum"] == "1220" + hashlib.sha256(Path(scenes[0][0]).read_bytes()).hexdigest()
    assert asset["raster:bands"] == [{"data_type": "uint16", "nodata": 0}] * 3
    props = d["properties"]
    assert props["proj:code"] == "EPSG:32633" and props["proj:shape"] == [96, 128]
    assert props["proj:transform"] == list(_transform(0))
    assert props["proj:bbox"] == [500000.0, 4200000.0 - 960, 500000.0 + 1280, 4200000.0]
    assert props["datetime"] == "2024-05-01T10:30:00Z"
    west, south, east, north = d["bbox"]
    assert 14.99 < west < east < 15.02 and 37.9 < south < north < 38.0  # UTM 33N, 500 km E: 15 degrees E
    # a spec 0.2 file: its own time wins over the argument, its band texts are eo band names
    d = items[4].to_dict()
    assert d["properties"]["datetime"] == "2024-06-01T10:00:00Z"
    assert d["assets"]["data"]["rumi:spec"] == "0.2"
    assert [b["name"] for b in d["assets"]["data"]["eo:bands"]] == ["red", "green", "nir"]


def test_an_item_without_a_time_needs_datetime_and_one_without_a_crs_is_refused(tmp_path):
    path = tmp_path / "a.rumi"
    rumimm.write(path, np.zeros((1, 32, 32), np.uint8), tile=32, transform=_transform(0), crs=32633)
    with pytest.raises(rumimm.RumiError, match="datetime="):
        stac.item(path)
    assert stac.item(path, datetime=T0).datetime == T0
    bare = tmp_path / "b.rumi"
    rumimm.write(bare, np.zeros((1, 32, 32), np.uint8), tile=32)
    with pytest.raises(rumimm.RumiError, match="no georeferencing"):
        stac.item(bare, datetime=T0)


def test_footprints_are_counter_clockwise_rings_in_wgs84(scenes):
    ring = np.array(_items(scenes)[0].geometry["coordinates"][0])
    x, y = ring[:, 0], ring[:, 1]
    assert np.sum(x[:-1] * y[1:] - x[1:] * y[:-1]) > 0
    assert np.array_equal(ring[0], ring[-1])


def test_items_on_one_grid_share_no_lists_and_the_collector_is_left_as_found(scenes):
    """The build makes a grid's footprint and a band layout once and copies them: Items on one grid
    are equal where they should be and independent (an edit of one is not an edit of another); the
    garbage collector, paused for the build, is enabled again only if it was."""
    import gc

    table = rumimm.catalog([p for p, _, _ in scenes[:4]], blobs=[b for _, b, _ in scenes[:4]])
    items = stac.to_items(table, datetime=T0)
    assert gc.isenabled()
    a, b = items[0], items[1]
    assert a.geometry == b.geometry and a.bbox == b.bbox
    assert a.assets["data"].extra_fields["raster:bands"] == b.assets["data"].extra_fields["raster:bands"]
    a.geometry["coordinates"][0][0][0] = 0.0
    a.bbox[0] = 0.0
    a.assets["data"].extra_fields["raster:bands"][0]["nodata"] = 7
    a.properties["proj:shape"][0] = 1
    a.stac_extensions.append("x")
    c = stac.to_items(table, datetime=T0)[1]
    assert b.to_dict() == c.to_dict()
    gc.disable()
    try:
        stac.to_items(table, datetime=T0)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_builds_in_two_threads_share_one_collector_pause_and_a_forked_child_gets_it_back():
    """The collector stays paused until the last overlapping build ends (the first to end used to turn it
    back on under the other), and a child forked during a build, where no build runs, has it enabled."""
    import gc

    from rumimm.integrations.stac import _gc_paused

    assert gc.isenabled()
    first, second = _gc_paused(), _gc_paused()
    first.__enter__()
    second.__enter__()  # another thread's build, begun while the first runs
    first.__exit__(None, None, None)
    assert not gc.isenabled()
    if hasattr(os, "fork"):
        from conftest import exit_code_in_fork

        def child():
            assert gc.isenabled()
            with _gc_paused():
                assert not gc.isenabled()
            assert gc.isenabled()

        assert exit_code_in_fork(child) == 0
    second.__exit__(None, None, None)
    assert gc.isenabled()


# -- catalog <-> ItemCollection -----------------------------------------------------------

def test_a_catalog_becomes_an_item_collection_and_back(scenes, tmp_path, validate):
    table = rumimm.catalog([p for p, _, _ in scenes], blobs=[b for _, b, _ in scenes])
    path = tmp_path / "cat.parquet"
    rumimm.write_catalog(table, path)
    ic = stac.to_item_collection(path, datetime=T0)
    assert len(ic) == 6 and all(validate(it.to_dict()) for it in ic)
    back = stac.from_items(ic)
    for name in ("path", "blob", "bands", "height", "width", "dtype", "epsg", "transform", "left", "bottom",
                 "right", "top", "nodata", "spec"):
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name
    # it is a catalog: it opens as one
    assert len(rumimm.ImageCollection.from_catalog(back)) == 6
    # a JSON round trip (what a STAC API answers) gives the same table
    as_json = json.loads(json.dumps(ic.to_dict()))
    assert stac.from_items(as_json).column("blob").to_pylist() == table.column("blob").to_pylist()


def test_stac_geoparquet_round_trip_loads_with_the_blobs(scenes, tmp_path):
    pytest.importorskip("stac_geoparquet")
    items = _items(scenes[:3])
    stac.to_stac_geoparquet(items, tmp_path / "items.parquet")
    back = stac.read_stac_geoparquet(tmp_path / "items.parquet")
    assert [d["id"] for d in back] == ["s0", "s1", "s2"]
    assert stac.from_items(back).column("blob").to_pylist() == [b for _, b, _ in scenes[:3]]
    cube = stac.load(back, output="cube")
    np.testing.assert_array_equal(cube[2], scenes[2][2])


def test_collection_extent_covers_its_items(scenes, validate):
    items = _items(scenes)
    col = stac.collection(items, id="rumi-scenes")
    assert col.extent.spatial.bboxes[0][0] <= min(it.bbox[0] for it in items)
    assert col.extent.temporal.intervals[0][0] == T0
    assert all(it.collection_id == "rumi-scenes" for it in items)
    col.normalize_hrefs("https://example.com/stac")
    assert validate(items[0].to_dict())


# -- loading ------------------------------------------------------------------------------

def test_load_gives_a_dask_backed_dataset_with_time_band_and_crs(scenes):
    items = _items(scenes[:4])
    ds = stac.load(items)
    da = ds["band_data"]
    assert da.dims == ("time", "band", "y", "x") and da.shape == (4, 3, 96, 128)
    assert da.chunks is not None  # Dask-backed
    assert ds.rio.crs.to_epsg() == 32633
    assert list(ds["time"].values) == [np.datetime64((T0 + dt.timedelta(days=i)).replace(tzinfo=None), "ns")
                                       for i in range(4)]
    np.testing.assert_array_equal(da.values, np.stack([a for _, _, a in scenes[:4]]))
    two = stac.load(items, bands=[3, 1], time="2024-05-02/2024-05-03")
    assert two["band_data"].shape == (2, 2, 96, 128)
    np.testing.assert_array_equal(two["band_data"].values[0], scenes[1][2][[2, 0]])


def test_spec_02_items_load_with_their_times_and_band_names(scenes, server):
    pytest.importorskip("obstore")
    items = _remote_items(scenes[4:], server)
    server.reset()
    ds = stac.load(items, bands=["nir", "red"])
    assert list(ds["description"].values) == ["nir", "red"]
    assert list(ds["time"].values) == [np.datetime64("2024-06-01T10:00", "ns"), np.datetime64("2024-06-02T10:00", "ns")]
    # before pixels: the first file's band metadata (its PAM sidecar, and a spec 0.2 file's trailer after its
    # frames), nothing of its header and nothing of the second file
    hdr = rumimm.parse_header(scenes[4][1])
    assert sorted((r.path.split("?")[0], int(r.range.split("=")[1].split("-")[0])) for r in server.requests) == \
        [("/stac/t0.rumi", int(hdr.frames_end)), ("/stac/t0.rumi.aux.xml", 0)]
    np.testing.assert_array_equal(ds["band_data"].values[1], scenes[5][2][[2, 0]])
    with pytest.raises(rumimm.RumiError, match="no band named 'swir'"):
        stac.load(items, bands=["swir"])


def test_bbox_selects_items_and_cuts_the_dataset(scenes, tmp_path):
    far = tmp_path / "far.rumi"
    far_blob = rumimm.write(far, scenes[0][2], tile=32, transform=(10.0, 0.0, 600000.0, 0.0, -10.0, 4200000.0),
                            crs=32633)
    items = [*_items(scenes[:2]), stac.item(far, blob=far_blob, datetime=T0)]
    west, south, east, north = items[0].bbox
    box = (west, south, (west + east) / 2, (south + north) / 2)
    ds = stac.load(items, bbox=box)  # the far scene is left out: one grid
    assert ds.sizes["time"] == 2 and 0 < ds.sizes["x"] < 128 and 0 < ds.sizes["y"] < 96
    with pytest.raises(rumimm.RumiError, match="no Item"):
        stac.load(items, bbox=(0.0, 0.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="bbox"):
        stac.load(items, bbox=(1.0, 0.0, 0.0, 1.0))


def test_load_as_cube_and_collection(scenes):
    items = _items(scenes)
    cube = stac.load(items, output="cube")
    assert isinstance(cube, rumimm.Cube) and cube.shape == (6, 3, 96, 128)
    coll = stac.load(items[:2], output="collection")
    assert isinstance(coll, rumimm.ImageCollection) and len(coll) == 2


def _remote_items(scenes, server):
    items = _items(scenes)
    for it, (p, _, _) in zip(items, scenes, strict=True):
        it.assets["data"].href = server.put(f"stac/{Path(p).name}", Path(p).read_bytes()) + "?sig=SECRET"
    return items


def test_loading_remote_items_sends_no_header_request(scenes, server):
    pytest.importorskip("obstore")
    items = _remote_items(scenes[:4], server)
    server.reset()
    cube = stac.load(items, output="cube")
    assert server.count() == 0 and server.count("HEAD") == 0  # nothing before pixels
    chip = cube[:, :, 0:32, 0:32]
    np.testing.assert_array_equal(chip, np.stack([a[:, :32, :32] for _, _, a in scenes[:4]]))
    hdr = rumimm.parse_header(scenes[0][1])
    first_frame = int(hdr.frame_offsets[0])
    assert server.requests and all(int(r.range.split("=")[1].split("-")[0]) >= first_frame
                                   for r in server.requests)  # only pixel frames were asked for


def test_loading_from_moto_s3_sends_no_header_request(scenes, monkeypatch):
    pytest.importorskip("obstore")
    from conftest import moto_object
    from servers import MotoS3

    moto = MotoS3().start()
    try:
        items = _items(scenes[:2])
        for k, (it, (p, _, _)) in enumerate(zip(items, scenes[:2], strict=True)):
            moto_object(moto, monkeypatch, "stac", f"s/{k}.rumi", Path(p).read_bytes())
            it.assets["data"].href = f"s3://stac/s/{k}.rumi"
        moto.reset()
        cube = stac.load(items, output="cube")
        assert len(moto.requests) == 0
        np.testing.assert_array_equal(cube[1], scenes[1][2])
        assert moto.count("HEAD") == 0
    finally:
        moto.stop()


# -- bad input ----------------------------------------------------------------------------

def _dict(scenes, i=0):
    return _items(scenes)[i].to_dict()


def test_a_cog_item_is_refused_naming_rumimm_convert(scenes):
    d = _dict(scenes)
    asset = d["assets"]["data"]
    del asset["rumi:header"]
    asset["href"] = "https://example.com/cog.tif?X-Amz-Signature=SECRET"
    with pytest.raises(rumimm.RumiError, match="rumimm convert") as err:
        stac.load([d])
    assert "SECRET" not in str(err.value) and "cog.tif" in str(err.value)


def test_items_without_projection_fields_are_refused(scenes):
    d = _dict(scenes)
    del d["properties"]["proj:code"]
    with pytest.raises(rumimm.RumiError, match="proj:code"):
        stac.load([d])
    d = _dict(scenes)
    d["properties"]["proj:shape"] = [96]
    with pytest.raises(rumimm.RumiError, match="proj:shape"):
        stac.load([d])


def test_mixed_crs_is_refused_or_grouped_never_reprojected(scenes, tmp_path):
    path = tmp_path / "z32.rumi"
    blob = rumimm.write(path, scenes[0][2], tile=32, transform=_transform(0), crs=32632)
    items = [*_items(scenes[:2]), stac.item(path, blob=blob, datetime=T0)]
    with pytest.raises(rumimm.RumiError, match="2 CRSs"):
        stac.load(items)
    groups = stac.load(items, groupby="crs", output="cube")
    assert sorted(groups) == [32632, 32633]
    assert groups[32633].shape[0] == 2 and groups[32632].shape[0] == 1
    np.testing.assert_array_equal(groups[32632][0], scenes[0][2])


def test_a_blob_of_another_file_is_detected_never_wrong_pixels(scenes, server, tmp_path):
    # the grid differs: refused before anything is opened
    other = tmp_path / "other.rumi"
    wrong = rumimm.write(other, np.zeros((3, 64, 64), np.uint16), tile=32, transform=_transform(0), crs=32633)
    d = _dict(scenes)
    d["assets"]["data"]["rumi:header"] = base64.b64encode(wrong).decode()
    with pytest.raises(rumimm.RumiError, match="not this asset's"):
        stac.load([d])
    # same grid, another file's blob (another size): refused by file:size, or at the first read when absent
    d = _dict(scenes)
    d["assets"]["data"]["rumi:header"] = base64.b64encode(scenes[1][1]).decode()
    with pytest.raises(rumimm.RumiError, match="file:size"):
        stac.load([d])
    del d["assets"]["data"]["file:size"]
    d["assets"]["data"]["href"] = server.put("swap.rumi", Path(scenes[0][0]).read_bytes())
    cube = stac.load([d], output="cube")
    with pytest.raises(rumimm.RumiError, match="does not match"):  # a RemoteError: the size the blob implies
        np.asarray(cube[0])


@pytest.mark.parametrize("mutate", [
    lambda d: d["assets"]["data"].__setitem__("rumi:header", 12),
    lambda d: d["assets"]["data"].__setitem__("rumi:header", "not base64 !"),
    lambda d: d["assets"]["data"].__setitem__("rumi:header", "A" * ((1 << 27) + 4)),
    lambda d: d["assets"]["data"].__setitem__("href", ["x"]),
    lambda d: d["properties"].__setitem__("proj:transform", list(range(10**6))),
    lambda d: d["properties"].__setitem__("proj:transform", ["a"] * 6),
    lambda d: d["properties"].__setitem__("proj:transform", [10 ** 400, 0, 0, 0, -10, 0]),
    lambda d: d["properties"].__setitem__("proj:transform", [float("nan"), 0, 0, 0, -10, 0]),
    lambda d: d["properties"].__setitem__("proj:shape", [True, 2]),
    lambda d: d["properties"].__setitem__("proj:code", "EPSG:" + "9" * 5000),
    lambda d: d["properties"].__setitem__("proj:code", {"a": [[[[[]]]]]}),
    lambda d: d.__setitem__("properties", [1, 2]),
    lambda d: d.__setitem__("assets", "x"),
    lambda d: d.__setitem__("id", None),
], ids=["header-int", "header-text", "header-huge", "href-list", "transform-huge", "transform-text",
        "transform-int-past-float", "transform-nan", "shape-bool", "code-long", "code-nested", "properties-list",
        "assets-text", "id-null"])
def test_hostile_json_raises_rumi_errors(scenes, mutate):
    d = copy.deepcopy(_dict(scenes))
    mutate(d)
    with pytest.raises(rumimm.RumiError):
        stac.load([d])


@pytest.mark.parametrize("bands", [[1, 2, 3], [{"scale": "x"}] * 3, [{"nodata": "zero"}] * 3, [{"unit": 5}] * 3])
def test_hostile_raster_bands_are_refused_when_a_search_becomes_a_catalog(scenes, bands):
    d = _dict(scenes)
    d["assets"]["data"]["raster:bands"] = bands
    with pytest.raises(rumimm.RumiError, match="raster:bands"):
        stac.from_items([d])


def test_deeply_nested_json_is_refused(scenes):
    d = _dict(scenes)
    nest: list = []
    for _ in range(100_000):
        nest = [nest]
    d["assets"]["data"]["rumi:header"] = nest
    with pytest.raises(rumimm.RumiError, match="must be a string"):
        stac.load([d])


def test_query_strings_never_appear_in_messages(scenes, server):
    items = _remote_items(scenes[:1], server)
    d = items[0].to_dict()
    d["properties"]["proj:shape"] = [1, 1]
    with pytest.raises(rumimm.RumiError) as err:
        stac.load([d])
    assert "SECRET" not in str(err.value) and "s0.rumi" in str(err.value)
    d = items[0].to_dict()
    d["properties"]["datetime"] = "2026-01-01T00:00:00 s0.rumi?X-Amz-Signature=SECRET"  # a field with a signature
    with pytest.raises(rumimm.RumiError, match="is not an ISO 8601") as err:
        stac.load([d])
    assert "SECRET" not in str(err.value) and "?..." in str(err.value)


def test_from_items_makes_a_table_chip_dataset_reads(scenes):
    items = _items(scenes[:2])
    table = stac.from_items(items)
    assert isinstance(table, pa.Table)
    assert table.column("start_datetime").to_pylist()[1] == T0 + dt.timedelta(days=1)
    ds = rumimm.ChipDataset(items, 32, n=4, seed=0)
    path, ((y0, y1), (x0, x1)) = ds.locate(0)
    k = [p for p, _, _ in scenes].index(path)
    np.testing.assert_array_equal(ds[0], scenes[k][2][:, y0:y1, x0:x1])
    ds = rumimm.ChipDataset(pystac.ItemCollection(items), 32, n=4, seed=0)
    assert len(ds) == 4


def test_the_xarray_output_of_remote_items_reads_only_pixels(scenes, server):
    pytest.importorskip("obstore")
    items = _remote_items(scenes[:2], server)
    server.reset()
    ds = stac.load(items, bands=[2])
    assert ds.rio.crs.to_epsg() == 32633
    before = list(server.requests)
    np.testing.assert_array_equal(ds["band_data"].values[:, 0], np.stack([a[1] for _, _, a in scenes[:2]]))
    # before pixels: the first file's PAM sidecar (the Dataset's band attributes), no header and no georeferencing
    assert [r.path.split("?")[0] for r in before] == ["/stac/s0.rumi.aux.xml"]


def test_a_checksum_is_given_only_while_the_sidecar_still_binds_the_file(tmp_path):
    path, blob, _ = _write(tmp_path, "c.rumi")
    assert "file:checksum" in stac.item(path, blob=blob, datetime=T0).assets["data"].extra_fields
    st = Path(path).stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # the file may have changed
    fields = stac.item(path, blob=blob, datetime=T0).assets["data"].extra_fields
    assert "file:checksum" not in fields and fields["file:size"] == st.st_size


def test_a_spec_02_file_of_several_steps_spans_its_times(tmp_path, validate):
    array = eo_scene(bands=2, height=64, width=64, dtype="uint16", seed=3)
    steps = np.stack([array, array + 1])
    path = tmp_path / "steps.rumi"
    blob = rumimm.write(path, steps, tile=32, transform=_transform(0), crs=32633, spec="0.2",
                        descriptions=["a", "b"], time=np.array(["2024-07-01", "2024-07-09"], "datetime64[D]"))
    it = stac.item(path, blob=blob)
    d = it.to_dict()
    assert validate(d)
    assert d["properties"]["datetime"] is None
    assert (d["properties"]["start_datetime"], d["properties"]["end_datetime"]) == \
        ("2024-07-01T00:00:00Z", "2024-07-09T00:00:00Z")
    cube = stac.load([it], output="cube")
    np.testing.assert_array_equal(np.asarray(cube), steps)


def test_band_metadata_goes_to_the_raster_and_eo_extensions_and_back(tmp_path, validate):
    array = eo_scene(bands=2, height=64, width=64, dtype="float32", seed=4)
    path = tmp_path / "meta.rumi"
    blob = rumimm.write(path, array, tile=32, transform=_transform(0), crs=32633, nodata=float("nan"),
                        scales=[0.5, 2.0], offsets=[0.0, -1.0], units=["K", "m"], descriptions=["t", "h"])
    it = stac.item(path, blob=blob, datetime=T0, codec="fast")
    d = it.to_dict()
    assert validate(d)
    asset = d["assets"]["data"]
    assert asset["raster:bands"] == [{"data_type": "float32", "nodata": "nan", "scale": 0.5, "unit": "K"},
                                     {"data_type": "float32", "nodata": "nan", "scale": 2.0, "offset": -1.0,
                                      "unit": "m"}]
    assert asset["eo:bands"] == [{"name": "t"}, {"name": "h"}] and asset["rumi:codec"] == "fast"
    table, back = rumimm.catalog([path], blobs=[blob]), stac.from_items([it])
    for name in ("descriptions", "scales", "offsets", "units"):
        assert back.column(name).to_pylist() == table.column(name).to_pylist(), name
    assert np.isnan(back.column("nodata").to_pylist()[0])


def test_a_point_files_item_and_catalog_row_give_rasterios_transform_and_load_at_its_points(tmp_path):
    """A PixelIsPoint file's Item carries the pixel-corner transform rasterio reads (as rio-stac would
    give), its bbox agrees with it, and a load from the Item puts the pixels where the file does."""
    import rasterio
    import xarray as xr

    path, blob, array = _write(tmp_path, "p.rumi", seed=2, pixel_is_point=True)
    rumimm.to_geotiff(path, tmp_path / "p.tif")
    with rasterio.open(tmp_path / "p.tif") as ds:
        corner, bounds = tuple(ds.transform)[:6], tuple(ds.bounds)
    item = stac.item(path, blob=blob, datetime=T0)
    assert tuple(item.properties["proj:transform"][:6]) == corner
    assert tuple(item.properties["proj:bbox"]) == bounds
    row = rumimm.catalog([path]).to_pylist()[0]
    assert tuple(row["transform"]) == corner and (row["left"], row["bottom"], row["right"], row["top"]) == bounds
    loaded = stac.load([item])["band_data"]
    with xr.open_dataset(path, engine="rumimm") as direct:
        assert np.array_equal(loaded.x.values, direct.x.values) and np.array_equal(loaded.y.values, direct.y.values)
    np.testing.assert_array_equal(loaded.values[0], array)


# -- reviewed bugs: hrefs, bbox cuts, nodata, time arguments, messages ----------------------------------

def _static_catalog(root):
    """Two Items in their own folders, each beside its asset with href './B04.rumi' (pystac's relative layout);
    the pixels are the day of the month."""
    paths = []
    for day in (1, 2):
        folder = root / f"s{day}"
        folder.mkdir()
        rumimm.write(folder / "B04.rumi", np.full((1, 32, 32), day, np.uint8), tile=32,
                     transform=_transform(0), crs=32633)
        it = stac.item(folder / "B04.rumi", datetime=T0.replace(day=day), id=f"s{day}")
        it.set_self_href(str(folder / "item.json"))
        it.make_asset_hrefs_relative()
        it.save_object(include_self_link=True)
        paths.append(str(folder / "item.json"))
    return paths


def test_relative_asset_hrefs_resolve_against_the_items_location_not_the_working_directory(tmp_path, monkeypatch):
    paths = _static_catalog(tmp_path)
    monkeypatch.chdir(tmp_path / "s1")  # where './B04.rumi' is the first Item's file: the second must not read it
    items = [pystac.Item.from_file(p) for p in paths]
    assert [it.assets["data"].href for it in items] == ["./B04.rumi", "./B04.rumi"]
    want = [it.assets["data"].get_absolute_href() for it in items]
    assert want == [str(tmp_path / "s1" / "B04.rumi"), str(tmp_path / "s2" / "B04.rumi")]
    ds = stac.load(items)
    assert ds.band_data.values[:, 0, 0, 0].tolist() == [1, 2]
    assert stac.from_items(items).column("path").to_pylist() == want
    dicts = [json.loads(Path(p).read_text()) for p in paths]  # the Item dicts: their "self" link
    assert stac.load(dicts).band_data.values[:, 0, 0, 0].tolist() == [1, 2]
    assert stac.from_items(dicts).column("path").to_pylist() == want
    bare = [it.to_dict(include_self_link=False, transform_hrefs=False) for it in items]  # no self link: as given
    assert stac.load(bare).band_data.values[:, 0, 0, 0].tolist() == [1, 1]
    assert stac.from_items(bare).column("path").to_pylist() == ["./B04.rumi", "./B04.rumi"]


def test_an_item_of_a_relative_path_gets_an_absolute_href(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rumimm.write("a.rumi", np.ones((1, 16, 16), np.uint8), tile=16, transform=_transform(0), crs=32633)
    it = stac.item("a.rumi", datetime=T0)
    assert it.assets["data"].href == str(tmp_path / "a.rumi")
    it.save_object(dest_href=str(tmp_path / "out" / "a" / "item.json"), include_self_link=True)
    back = pystac.Item.from_file(str(tmp_path / "out" / "a" / "item.json"))
    assert back.assets["data"].get_absolute_href() == str(tmp_path / "a.rumi")
    assert stac.load([back]).band_data.values.sum() == 256
    remote = "https://example.com/data/a.rumi"
    assert stac_impl._hrefs([remote, "a.rumi"]) == [remote, str(tmp_path / "a.rumi")]


PROJ = "https://stac-extensions.github.io/projection/v2.0.0/schema.json"
_BIG = (1000.0, 0.0, 300000.0, 0.0, -1000.0, 4400000.0)  # UTM 33N, 400 x 400 km around 15E, ~36N..40N


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("big") / "big.rumi"
    rumimm.write(path, np.arange(400 * 400, dtype=np.uint32).reshape(1, 400, 400), tile=128, transform=_BIG,
                 crs=32633)
    return stac.item(path, datetime=T0)


def _touched(bbox, transform, epsg, shape):
    """The rows and columns of the pixels a WGS 84 bbox touches, by brute force: the bbox's outline at 2,000
    points per edge, projected, its bounds in pixels."""
    import pyproj

    t = np.linspace(0, 1, 2000)
    w, s, e, n = bbox
    lon = np.concatenate([w + (e - w) * t, np.full_like(t, e), e - (e - w) * t, np.full_like(t, w)])
    lat = np.concatenate([np.full_like(t, s), s + (n - s) * t, np.full_like(t, n), n - (n - s) * t])
    x, y = pyproj.Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    cols = (np.asarray(x) - transform[2]) / transform[0]
    rows = (np.asarray(y) - transform[5]) / transform[4]
    return (range(max(0, int(np.floor(rows.min()))), min(shape[0], int(np.floor(rows.max())) + 1)),
            range(max(0, int(np.floor(cols.min()))), min(shape[1], int(np.floor(cols.max())) + 1)))


def test_a_bbox_keeps_every_pixel_it_touches_not_only_those_inside_its_projected_corners(big):
    import pyproj

    bbox = (13.0, 37.0, 17.0, 39.0)  # its south edge bends 1.9 km below its corners at 15E
    ds = stac.load([big], bbox=bbox)
    rows, cols = _touched(bbox, _BIG, 32633, (400, 400))
    xs = _BIG[2] + _BIG[0] * (np.array(cols) + 0.5)
    ys = _BIG[5] + _BIG[4] * (np.array(rows) + 0.5)
    np.testing.assert_array_equal(ds.x.values, xs)
    np.testing.assert_array_equal(ds.y.values, ys)
    # every pixel centre inside the bbox is kept (the old cut dropped 538 of them)
    X, Y = np.meshgrid(_BIG[2] + _BIG[0] * (np.arange(400) + 0.5), _BIG[5] + _BIG[4] * (np.arange(400) + 0.5))
    lon, lat = pyproj.Transformer.from_crs(32633, 4326, always_xy=True).transform(X, Y)
    inside = (lon >= 13) & (lon <= 17) & (lat >= 37) & (lat <= 39)
    assert Y[inside].min() >= ys.min() and X[inside].min() >= xs.min() and X[inside].max() <= xs.max()
    assert Y[inside].min() < 4096000  # below the corners' projection: the old cut's lowest row
    np.testing.assert_array_equal(ds.band_data.values[0, 0],
                                  np.arange(400 * 400).reshape(400, 400)[rows.start:rows.stop, cols.start:cols.stop])


def test_a_bbox_inside_one_pixel_gives_that_pixel_as_odc_stac_does(big):
    import pyproj

    to = pyproj.Transformer.from_crs(32633, 4326, always_xy=True)
    x0, y0 = 300000 + 100 * 1000 + 50, 4400000 - 100 * 1000 - 50  # 200 m in the corner of pixel (100, 100)
    lo, hi = to.transform(x0, y0 - 200), to.transform(x0 + 200, y0)
    ds = stac.load([big], bbox=(lo[0], lo[1], hi[0], hi[1]))
    assert ds.x.values.tolist() == [400500.0] and ds.y.values.tolist() == [4299500.0]  # odc-stac's answer
    assert int(ds.band_data.values[0, 0, 0, 0]) == 100 * 400 + 100
    lon, lat = to.transform(400500.0, 4299500.0)  # a point bbox: its pixel
    ds = stac.load([big], bbox=(lon, lat, lon, lat))
    assert ds.x.values.tolist() == [400500.0] and ds.y.values.tolist() == [4299500.0]


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # odc-geo's own Affine use
def test_a_small_bbox_cuts_as_odc_stac_cuts_the_same_grid_as_a_geotiff(big, tmp_path):
    odc_stac = pytest.importorskip("odc.stac")
    import pyproj
    import rasterio
    from rasterio.transform import Affine

    tif = tmp_path / "big.tif"
    with rasterio.open(tif, "w", driver="GTiff", width=400, height=400, count=1, dtype="uint8", crs="EPSG:32633",
                       transform=Affine(*_BIG)) as dst:
        dst.write(np.ones((1, 400, 400), np.uint8))
    it = pystac.Item("big", geometry=None, bbox=None, datetime=T0, properties={
        "proj:code": "EPSG:32633", "proj:shape": [400, 400], "proj:transform": list(_BIG)}, stac_extensions=[PROJ])
    it.add_asset("data", pystac.Asset(str(tif), media_type="image/tiff; application=geotiff"))
    to = pyproj.Transformer.from_crs(32633, 4326, always_xy=True)
    for x0, y0, size in [(400050, 4299950, 200), (350000, 4350000, 3000), (420700, 4200300, 10)]:
        lo, hi = to.transform(x0, y0 - size), to.transform(x0 + size, y0)
        bbox = (lo[0], lo[1], hi[0], hi[1])
        want = odc_stac.load([it], bbox=bbox)
        got = stac.load([big], bbox=bbox)
        np.testing.assert_array_equal(got.x.values, want.x.values)
        np.testing.assert_array_equal(got.y.values, want.y.values)


def test_an_item_wholly_inside_the_bbox_is_selected_though_the_bboxs_corners_miss_it(tmp_path):
    import pyproj

    bbox = (13.0, 37.0, 17.0, 39.0)
    _, ys = pyproj.Transformer.from_crs(4326, 32633, always_xy=True).transform([13, 17], [37, 37])
    top = min(ys) - 100  # below the corners' lowest y, above the bbox's south edge at 15E
    path = tmp_path / "edge.rumi"
    rumimm.write(path, np.ones((1, 10, 10), np.uint8), tile=16, transform=(100.0, 0, 499500.0, 0, -100.0, top),
                 crs=32633)
    it = stac.item(path, datetime=T0)
    assert bbox[0] < it.bbox[0] and bbox[1] < it.bbox[1] and it.bbox[2] < bbox[2] and it.bbox[3] < bbox[3]
    assert stac.load([it], bbox=bbox).band_data.shape == (1, 1, 10, 10)


def test_a_rotated_grid_is_cut_to_the_pixels_holding_the_bbox(tmp_path):
    import pyproj

    tr = (10.0, 5.0, 500000.0, 5.0, -10.0, 4200000.0)
    path = tmp_path / "rot.rumi"
    rumimm.write(path, np.arange(32 * 32, dtype=np.uint16).reshape(1, 32, 32), tile=32, transform=tr, crs=32633)
    it = stac.item(path, datetime=T0)
    assert stac.load([it], bbox=it.bbox).band_data.shape == (1, 1, 32, 32)  # was (1, 1, 0, 0)
    x, y = tr[2] + tr[0] * 10.5 + tr[1] * 20.5, tr[5] + tr[3] * 10.5 + tr[4] * 20.5  # pixel (row 20, col 10)
    lon, lat = pyproj.Transformer.from_crs(32633, 4326, always_xy=True).transform(x, y)
    ds = stac.load([it], bbox=(lon, lat, lon, lat))
    assert ds.band_data.shape == (1, 1, 1, 1) and int(ds.band_data.values.item()) == 20 * 32 + 10


def test_each_band_gets_its_own_nodata_and_64_bit_ones_stay_exact(tmp_path):
    a = np.arange(2 * 16 * 16, dtype=np.uint16).reshape(2, 16, 16)
    rumimm.write(tmp_path / "nd2.rumi", a, tile=16, transform=_transform(0), crs=32633, nodata=[0, 65535])
    paths = [str(tmp_path / "nd2.rumi")]
    for k in ("int64", "uint64"):
        p = tmp_path / f"{k}.rumi"
        rumimm.write(p, np.full((1, 16, 16), 5, k), tile=16, transform=_transform(0), crs=32633,
                     nodata=np.iinfo(k).max)
        paths.append(str(p))
    want = []
    for p in paths:
        with rumimm.open(p) as img:
            want.append(list(img.nodatavals))
    assert want == [[0, 65535], [2**63 - 1], [2**64 - 1]]
    items = stac.items(paths, datetime=T0)
    got = [[b["nodata"] for b in it.assets["data"].extra_fields["raster:bands"]] for it in items]
    assert got == want and all(type(v) is int for g in got for v in g)
    table = stac.from_items(items)  # and back: each band's nodata, exact
    assert table.column("nodatavals").to_pylist() == [["0", "65535"], [str(2**63 - 1)], [str(2**64 - 1)]]
    again = stac.to_items(table, datetime=T0)
    assert [[b["nodata"] for b in it.assets["data"].extra_fields["raster:bands"]] for it in again] == want
    assert rumimm.catalog(paths).column("nodatavals").to_pylist()[1:] == [[str(2**63 - 1)], [str(2**64 - 1)]]


def test_time_takes_dates_and_datetime64_as_the_writer_does(scenes):
    items = _items(scenes[:2])  # T0 and T0 + 1 day, 10:30 UTC
    day = T0.date()
    for time, n in [(day, 1), ((day, day + dt.timedelta(days=1)), 2), (np.datetime64("2024-05-01T10:30"), 1),
                    (np.datetime64("2024-05-02"), 1), ((np.datetime64("2024-05-01T11:00"), None), 1),
                    ((None, day), 1)]:
        assert stac.load(items, time=time).sizes["time"] == n, time
    for bad in (np.datetime64("NaT"), np.datetime64("2024-05"), 12):
        with pytest.raises(rumimm.RumiError, match="time"):
            stac.load(items, time=bad)


def test_redact_drops_a_urls_user_and_password(scenes):
    assert stac.redact("https://alice:PW@data.example.com/a.rumi?sig=S") == "https://data.example.com/a.rumi"
    assert stac.redact("http://bob@h:8080/x@y.rumi") == "http://h:8080/x@y.rumi"
    assert stac.redact("s3://bucket/k@v.rumi") == "s3://bucket/k@v.rumi"
    d = _dict(scenes)
    d["assets"]["data"]["href"] = "https://alice:S3CRET@data.example.com/s0.rumi?sig=SIGSECRET"
    d["properties"]["proj:shape"] = [1, 1]
    with pytest.raises(rumimm.RumiError) as err:
        stac.load([d])
    assert "S3CRET" not in str(err.value) and "alice" not in str(err.value) and "SIGSECRET" not in str(err.value)
    assert "data.example.com/s0.rumi" in str(err.value)


def test_is_items_knows_item_dicts_as_chip_and_torchgeo_datasets_take_them(scenes):
    items = _items(scenes[:1])
    dicts = [it.to_dict() for it in items]
    assert stac_impl.is_items(items) and stac_impl.is_items(dicts)
    assert stac_impl.is_items({"type": "FeatureCollection", "features": dicts})
    assert not stac_impl.is_items([scenes[0][0]]) and not stac_impl.is_items(stac.from_items(items))


# -- the antimeridian and the poles (RFC 7946) ------------------------------------------------

_AM_TILE = ((1000.0, 0, 640000.0, 0, -1000.0, 6000000.0), 32660)  # UTM 60N at ~54N: 179.1E .. 180.1E
_NORTH_POLE_GRID = ((10000.0, 0, -320000.0, 0, -10000.0, 320000.0), 3413)  # polar stereographic, pole inside
_SOUTH_POLE_GRID = ((10000.0, 0, -300000.0, 0, -10000.0, 340000.0), 3031)


def _grid_item(folder, name, grid, size=64):
    transform, crs = grid
    path = folder / name
    rumimm.write(path, np.arange(size * size, dtype=np.uint16).reshape(1, size, size), tile=64, transform=transform,
                 crs=crs)
    return stac.item(path, datetime=T0)


def _gdal_bounds(grid, size=64):
    from rasterio.warp import transform_bounds

    (a, _, c, _, e, f), crs = grid
    return transform_bounds(crs, 4326, c, f + e * size, c + a * size, f, densify_pts=21)


def _ring_area(ring):
    x, y = np.asarray(ring, float).T
    return float(np.sum(x[:-1] * y[1:] - x[1:] * y[:-1])) / 2


def _inside(ring, lon, lat):
    """Ray casting: whether (lon, lat) lies inside the closed ring."""
    x, y = np.asarray(ring, float).T
    x0, y0, x1, y1 = x[:-1], y[:-1], x[1:], y[1:]
    up = (y0 <= lat) != (y1 <= lat)
    with np.errstate(all="ignore"):
        at = x0 + (lat - y0) * (x1 - x0) / (y1 - y0)
    return bool(np.count_nonzero(up & (lon < at)) % 2)


def _simple(ring):
    """No two non-adjacent edges of the closed ring cross or touch."""
    p = np.asarray(ring, float)
    edges = list(itertools.pairwise(p))
    n = len(edges)

    def orient(a, b, c):
        return np.sign((b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0]))

    for i in range(n):
        for j in range(i + 2, n):
            if i == 0 and j == n - 1:
                continue
            (a, b), (c, d) = edges[i], edges[j]
            if orient(a, b, c) * orient(a, b, d) <= 0 and orient(c, d, a) * orient(c, d, b) <= 0:
                return False
    return True


def _pixel_centres_wgs84(grid, size=64, step=4):
    import pyproj

    (a, _, c, _, e, f), crs = grid
    centres = (np.arange(0, size, step) + 0.5).astype(float)
    cols, rows = np.meshgrid(centres, centres)
    lon, lat = pyproj.Transformer.from_crs(crs, 4326, always_xy=True).transform(c + a * cols, f + e * rows)
    return np.asarray(lon).ravel(), np.asarray(lat).ravel()


def test_an_item_across_the_antimeridian_gets_rfc_7946_bbox_and_multipolygon(tmp_path, validate):
    it = _grid_item(tmp_path, "am.rumi", _AM_TILE)
    west, south, east, north = it.bbox
    assert west > east  # RFC 7946 5.2; was [-179.92, 53.53, 179.998, 54.13], 360 degrees wide
    np.testing.assert_allclose(it.bbox, _gdal_bounds(_AM_TILE), atol=1e-3)
    geometry = it.geometry
    assert geometry["type"] == "MultiPolygon" and len(geometry["coordinates"]) == 2  # RFC 7946 3.1.9
    for polygon in geometry["coordinates"]:
        assert len(polygon) == 1
        ring = polygon[0]
        assert ring[0] == ring[-1] and len(ring) >= 4
        lons, lats = np.asarray(ring).T
        assert lons.min() >= -180 and lons.max() <= 180 and south <= lats.min() and lats.max() <= north
        assert _ring_area(ring) > 0 and _simple(ring)  # counter-clockwise, valid
    spans = sorted((min(x for x, _ in p[0]), max(x for x, _ in p[0])) for p in geometry["coordinates"])
    assert spans[0][0] == -180 and spans[1][1] == 180  # the parts meet at the antimeridian
    lon, lat = _pixel_centres_wgs84(_AM_TILE)
    assert (lon > 0).any() and (lon < 0).any()
    for x, y in zip(lon, lat, strict=True):  # every pixel lies in one part
        assert sum(_inside(p[0], x, y) for p in geometry["coordinates"]) == 1
    assert validate(it.to_dict())


def test_items_holding_a_pole_get_the_rfc_7946_polar_bbox(tmp_path, validate):
    north = _grid_item(tmp_path, "np.rumi", _NORTH_POLE_GRID)
    np.testing.assert_allclose(north.bbox, _gdal_bounds(_NORTH_POLE_GRID), atol=1e-3)
    assert north.bbox[0] == -180 and north.bbox[2] == 180 and north.bbox[3] == 90  # was [-180, 85.8, 171.9, 87.0]
    south = _grid_item(tmp_path, "sp.rumi", _SOUTH_POLE_GRID)
    np.testing.assert_allclose(south.bbox, _gdal_bounds(_SOUTH_POLE_GRID), atol=1e-3)
    assert south.bbox[:3] == [-180, -90, 180]
    for it, grid in ((north, _NORTH_POLE_GRID), (south, _SOUTH_POLE_GRID)):
        assert it.geometry["type"] == "Polygon"  # the cap, cut at the antimeridian and closed along the pole
        ring = it.geometry["coordinates"][0]
        lons, lats = np.asarray(ring).T
        assert lons.min() == -180 and lons.max() == 180 and it.bbox[3 if it is north else 1] in lats
        assert _ring_area(ring) > 0 and _simple(ring)
        lon, lat = _pixel_centres_wgs84(grid)
        assert all(_inside(ring, x, y) for x, y in zip(lon, lat, strict=True))
        assert validate(it.to_dict())


def test_a_geographic_grid_past_180_gets_longitudes_within_180(tmp_path):
    it = _grid_item(tmp_path, "ll360.rumi", ((20 / 64, 0, 170.0, 0, -20 / 64, 10.0), 4326))
    assert it.bbox == [170.0, -10.0, -170.0, 10.0] and it.geometry["type"] == "MultiPolygon"
    ds = stac.load([it], bbox=(-175.0, -5.0, -172.0, 5.0))  # was "no Item meets the bbox"
    assert ds.band_data.shape == (1, 1, 32, 10)
    np.testing.assert_allclose(ds.x.values[[0, -1]], [170 + 48.5 * 20 / 64, 170 + 57.5 * 20 / 64])  # 185E .. 188E


def test_a_bbox_on_either_side_of_180_or_across_it_selects_the_antimeridian_item(tmp_path):
    it = _grid_item(tmp_path, "am.rumi", _AM_TILE)
    other = _grid_item(tmp_path, "far.rumi", ((1000.0, 0, 400000.0, 0, -1000.0, 6000000.0), 32660))
    east_side = stac.load([it, other], bbox=(-179.95, 53.6, -179.90, 53.7))
    west_side = stac.load([it, other], bbox=(179.5, 53.6, 179.6, 53.7))
    assert east_side.band_data.shape[-2:] == (12, 3) and west_side.band_data.shape[-2:] == (13, 8)
    assert east_side.x.values.min() > west_side.x.values.max()  # the east side's pixels, further east in UTM
    west, south, east, north = it.bbox  # each side of the Item's own bbox selects it alone (was: both Items)
    assert stac.load([it, other], bbox=(west, south, 180.0, north)).band_data.shape[-1] < 64
    assert stac.load([it, other], bbox=(-180.0, south, east, north)).band_data.shape[-1] < 64
    with pytest.raises(ValueError, match="across the antimeridian"):  # the whole of it, west > east: refused
        stac.load([it], bbox=it.bbox)


def test_a_collection_of_items_across_the_antimeridian_spans_it(tmp_path):
    am = _grid_item(tmp_path, "am.rumi", _AM_TILE)
    west_of_it = _grid_item(tmp_path, "w.rumi", ((1000.0, 0, 600000.0, 0, -1000.0, 6000000.0), 32660))
    col = stac.collection([am, west_of_it], id="am")
    (w, s, e, n), = col.extent.spatial.bboxes
    assert w == west_of_it.bbox[0] and e == am.bbox[2] and w > e
    assert s == min(am.bbox[1], west_of_it.bbox[1]) and n == max(am.bbox[3], west_of_it.bbox[3])
    north = _grid_item(tmp_path, "np.rumi", _NORTH_POLE_GRID)
    assert stac.collection([am, north], id="np").extent.spatial.bboxes[0][::2] == [-180, 180]
