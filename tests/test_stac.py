"""rumimm.stac: Items valid against the STAC 1.1 and extension schemas (offline), catalogs as
ItemCollections and back, and Items loaded with no header request (local HTTP server, moto's S3)."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import rumimm
from rumimm import stac
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
