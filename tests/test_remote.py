"""rumi files read from URIs: index, validate and images over HTTP and S3 on 127.0.0.1.

The files are written by rumimm and served whole by the test servers, which count the
requests each call costs.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from conftest import moto_object, remote_batch, write_scenes

import rumimm
from rumimm.errors import FormatError, RumiError
from rumimm.reader.validate import CHECKED_HEADERS, CHECKED_MAGIC, CHECKED_PROFILE, PREFIX_BYTES
from rumimm.store import RemoteError

pytest.importorskip("obstore")  # the "remote" extra; CI installs it

from servers import MotoS3

FAST = {"max_retries": 2, "retry_timeout": 3, "timeout": 2, "connect_timeout": 1,
        "init_backoff": 0.01, "max_backoff": 0.05}


@pytest.fixture(scope="module")
def moto():
    srv = MotoS3().start()
    yield srv
    srv.stop()


def _scene(tmp_path_factory, name, shape, tile, unit="tile"):
    rng = np.random.default_rng(sum(shape) + tile)
    a = rng.integers(0, 4000, shape).astype(np.uint16)
    path = tmp_path_factory.mktemp("remote") / name
    blob = rumimm.write(path, a, tile=tile, unit=unit)
    return a, path, blob


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(array, path, blob): 3 bands, 700 x 900, 256 tiles with ragged edges: 36 frames."""
    return _scene(tmp_path_factory, "small.rumi", (3, 700, 900), 256)


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A file whose IFD values run past PREFIX_BYTES: 13 bands of 40 x 40 tiles of 16 px."""
    return _scene(tmp_path_factory, "many.rumi", (13, 640, 640), 16)


def test_index_of_a_url_costs_one_request(server, small):
    _, path, blob = small
    url = server.put("small.rumi", path.read_bytes())
    assert rumimm.build_blob(url) == blob
    assert [r.range for r in server.requests] == [f"bytes=0-{PREFIX_BYTES - 1}"]


def test_index_of_a_file_with_many_frames_costs_two_requests(server, many):
    _, path, blob = many
    url = server.put("many.rumi", path.read_bytes())
    assert rumimm.Header.parse(blob).n_frames * 12 > PREFIX_BYTES
    assert rumimm.build_blob(url, storage_options=FAST) == blob
    assert server.count("GET") == 2 and server.count("HEAD") == 0


def test_index_of_a_truncated_object_names_the_url(server, small):
    _, path, _ = small
    url = server.put("cut.rumi", path.read_bytes()[:-10])
    with pytest.raises(FormatError, match=r"cut\.rumi: last frame ends at byte \d+ but the file has"):
        rumimm.build_blob(url, storage_options=FAST)


def test_validate_of_a_url_checks_every_frame_in_spans(server, many, monkeypatch):
    _, path, blob = many
    data = path.read_bytes()
    url = server.put("many.rumi", data)
    monkeypatch.setattr("rumimm.reader.validate._Spans.SPAN_BYTES", 100_000)
    rep = rumimm.validate(url, header=blob, storage_options=FAST)
    assert rep.ok, str(rep)
    assert rep.checked[:3] == [CHECKED_PROFILE, CHECKED_MAGIC, CHECKED_HEADERS]
    spans = -(-len(data) // 100_000)
    # the prefix, then each pass reads the object once, then the sampled frames for the readers in one call
    assert server.count("GET") <= 2 + 2 * (spans + 1) + 3
    assert rep.readers == ("rumimm", "rumi-eo 0.16.0") and rep.sampled_frames[0] == 0


def test_validate_of_a_url_reports_a_corrupt_frame(server, small):
    _, path, _ = small
    data = bytearray(path.read_bytes())
    hdr = rumimm.Header.parse(rumimm.build_blob(path))
    k = 5
    start = int(hdr.frame_offsets[k])
    data[start + 8:start + 40] = bytes(32)
    url = server.put("bad.rumi", bytes(data))
    rep = rumimm.validate(url, decode=True, storage_options=FAST)
    assert not rep.ok and any("frame 5" in v for v in rep.violations)


def test_index_of_an_s3_object_through_the_environment(moto, monkeypatch, small):
    _, path, blob = small
    moto_object(moto, monkeypatch, "rumimm-index", "s/small.rumi", path.read_bytes())
    assert rumimm.build_blob("s3://rumimm-index/s/small.rumi") == blob
    assert moto.count("GET") == 1 and moto.count("HEAD") == 0


# -- images ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """8 files of 4 bands, 1024 x 1024, 512-pixel tile frames: [(array, path, blob)]."""
    return write_scenes(tmp_path_factory.mktemp("scenes"))


def _serve(server, scenes):
    return [server.put(f"scenes/s{i}.rumi", p.read_bytes()) for i, (_, p, _) in enumerate(scenes)]


def test_opening_with_a_blob_sends_nothing_and_a_window_in_one_tile_position_costs_one_request(server, scenes):
    a, _, blob = scenes[0]
    url = _serve(server, scenes)[0]
    img = rumimm.open(url, header=blob, cache_bytes=0)
    assert server.requests == []
    assert np.array_equal(img[:, 100:356, 600:856], a[:, 100:356, 600:856])
    assert len(server.requests) == 1 and server.count("HEAD") == 0
    server.reset()
    assert np.array_equal(img[:, 700:956, 20:276], a[:, 700:956, 20:276])
    assert len(server.requests) == 1 and server.requests[0].if_match is not None  # pinned to the first answer


def test_opening_without_a_blob_costs_one_request(server, scenes):
    a, _, blob = scenes[1]
    url = _serve(server, scenes)[1]
    with rumimm.open(url, storage_options=FAST) as img:
        assert bytes(img.header) == blob
        assert len(server.requests) == 1
        assert np.array_equal(img[:, 5:9, 1000:1010], a[:, 5:9, 1000:1010])
        assert np.array_equal(np.asarray(img), a)


def test_a_cached_frame_is_not_fetched_again(server, scenes):
    a, _, blob = scenes[2]
    url = _serve(server, scenes)[2]
    img = rumimm.open(url, header=blob, cache_bytes=64 << 20)
    img[:, 0:64, 0:64]
    server.reset()
    assert np.array_equal(img[:, 64:128, 64:128], a[:, 64:128, 64:128])
    assert server.requests == []


def test_read_batch_fetches_a_batch_from_many_objects_together(server, scenes):
    rows = remote_batch(server, _serve(server, scenes), scenes, seed=3)
    # at most one request per object and run of nearby frames: here every file is < 1 MiB
    # between its frames, so one per file the batch touches
    assert server.count("GET") == len({i for i, _, _ in rows})
    assert server.max_in_flight >= 2


def test_an_object_replaced_after_the_first_read_is_refused(server, scenes):
    _, p, blob = scenes[3]
    url = server.put("changing.rumi", p.read_bytes())
    img = rumimm.open(url, header=blob, cache_bytes=0, storage_options=FAST)
    img[:, 0:10, 0:10]
    server.put("changing.rumi", scenes[4][1].read_bytes())
    with pytest.raises(RemoteError, match=r"changing\.rumi: the object changed since it was opened"):
        img[:, 0:10, 0:10]


def test_a_blob_of_another_file_fails_the_first_read(server, scenes, small):
    _, p_small, _ = small
    url = server.put("other.rumi", p_small.read_bytes())
    img = rumimm.open(url, header=scenes[0][2], cache_bytes=0, storage_options=FAST)  # no request: not seen yet
    with pytest.raises(RumiError, match=r"other\.rumi: "):
        img[:, 0:10, 0:10]


def test_a_missing_object_fails_the_first_read_naming_the_url(server, scenes):
    img = rumimm.open(f"{server.url}/missing.rumi?token=SECRET", header=scenes[0][2], storage_options=FAST)
    with pytest.raises(RemoteError, match=r"missing\.rumi: not found \(HTTP 404\)") as info:
        img[:, 0:10, 0:10]
    assert "SECRET" not in str(info.value) and "SECRET" not in repr(img)


def test_a_remote_image_pickles_as_its_uri_blob_and_options(server, scenes):
    a, _, blob = scenes[5]
    url = _serve(server, scenes)[5] + "?v=1"
    img = rumimm.open(url, header=blob, storage_options=FAST)
    clone = pickle.loads(pickle.dumps(img))
    assert clone.uri == url and clone.storage_options == FAST and clone.path == url.split("?")[0]
    assert np.array_equal(clone[2, 10:20, 10:20], a[2, 10:20, 10:20])


def test_an_s3_object_through_the_environment(moto, monkeypatch, scenes):
    a, p, blob = scenes[6]
    moto_object(moto, monkeypatch, "rumimm-images", "s6.rumi", p.read_bytes())
    img = rumimm.open("s3://rumimm-images/s6.rumi", header=blob, cache_bytes=0)
    assert moto.requests == []
    assert np.array_equal(img[:, 300:556, 300:556], a[:, 300:556, 300:556])
    assert moto.count("GET") == 1 and moto.count("HEAD") == 0
    assert img.transform is None and moto.count("GET") == 2  # georeferencing: one more small request


def test_a_chip_dataset_from_a_catalog_of_urls_reads_no_header(server, scenes):
    pytest.importorskip("pyarrow")
    urls = _serve(server, scenes)
    table = rumimm.catalog(urls, blobs=[b for _, _, b in scenes])
    # building the catalog reads each file's georeferencing (160 bytes) and asks for its sidecar (404 here)
    assert server.count("GET") == 16 and sum(r.path.endswith(".aux.xml") for r in server.requests) == 8
    server.reset()
    ds = rumimm.ChipDataset(table, 256, n=16, seed=1, cache_bytes=0)
    assert server.requests == []
    batch = ds.__getitems__(list(range(16)))
    for n, (i, y, x) in enumerate(ds.chips.tolist()):
        assert np.array_equal(batch[n], scenes[i][0][:, y:y + 256, x:x + 256])
    assert server.count("GET") == len(set(ds.chips[:, 0].tolist()))


_FORKED_LOADER = """
import multiprocessing, sys
import numpy as np
sys.path.insert(0, {tests!r})
import rumimm
from servers import RangeServer
srv = RangeServer().start()
urls = [srv.put(f"s{{i}}.rumi", open(p, "rb").read()) for i, p in enumerate({paths!r})]
ds = rumimm.ChipDataset(urls, 256, n=4, seed=2, headers=[bytes.fromhex(h) for h in {blobs!r}], cache_bytes=0)
assert srv.requests == [], srv.requests
with multiprocessing.get_context("fork").Pool(1) as pool:
    got = pool.apply_async(ds.__getitems__, ([0, 1, 2, 3],)).get(timeout=60)
for n, (i, y, x) in enumerate(ds.chips.tolist()):
    with rumimm.open({paths!r}[i]) as img:
        assert np.array_equal(got[n], img[:, y:y + 256, x:x + 256])
print("ok", len(srv.requests))
srv.stop()
"""


def test_a_forked_worker_reads_when_the_parent_sent_no_request(scenes):
    paths = [str(p) for _, p, _ in scenes]
    code = _FORKED_LOADER.format(tests=os.path.dirname(__file__), paths=paths, blobs=[b.hex() for _, _, b in scenes])
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok ")


def test_to_dask_and_xarray_read_a_url(server, scenes):
    pytest.importorskip("dask")
    xr = pytest.importorskip("xarray")
    a, _, blob = scenes[7]
    url = _serve(server, scenes)[7]
    arr = rumimm.to_dask(url, header=blob, storage_options=FAST)
    assert np.array_equal(arr[:, 500:600, 500:600].compute(scheduler="sync"), a[:, 500:600, 500:600])
    ds = xr.open_dataset(url, engine="rumimm", header=blob, storage_options=FAST)
    assert np.array_equal(ds["band_data"].values[:, 0:50, 0:50], a[:, 0:50, 0:50])


def test_the_command_line_reads_urls(server, small, capsys):
    from rumimm.cli import main

    _, path, blob = small
    url = server.put("cli/small.rumi", path.read_bytes()) + "?sig=SECRET"
    assert main(["info", url, "--json"]) == 0
    out = capsys.readouterr().out
    assert '"frames": 36' in out and "SECRET" not in out
    assert main(["validate", url]) == 0
    assert "compliant" in capsys.readouterr().out
    assert main(["index", url, "--hex"]) == 0
    assert capsys.readouterr().out.strip() == blob.hex()
    assert main(["info", f"{server.url}/cli/missing.rumi?sig=SECRET"]) == 2
    err = capsys.readouterr().err
    assert "missing.rumi: not found" in err and "SECRET" not in err


def test_export_to_geotiff_reads_a_url(server, small, tmp_path):
    rasterio = pytest.importorskip("rasterio")
    a, path, blob = small
    url = server.put("export/small.rumi", path.read_bytes())
    rumimm.to_geotiff(url, tmp_path / "out.tif", header=blob)
    with rasterio.open(tmp_path / "out.tif") as ds:
        assert np.array_equal(ds.read(), a)


def test_a_failing_server_fails_a_batch_with_a_remote_error_naming_the_url(server, scenes):
    urls = _serve(server, scenes)
    images = [rumimm.open(u, header=b, cache_bytes=0, storage_options=FAST)
              for u, (_, _, b) in zip(urls, scenes, strict=True)]
    server.faults[:] = ["503"] * 50
    with pytest.raises(RemoteError, match=r"scenes/s\d\.rumi: GET bytes \d+\.\.\d+ failed \(HTTP 503"):
        rumimm.read_batch(images[:4], np.zeros((4, 2), np.int64), size=(300, 300))
    server.faults.clear()
    got = rumimm.read_batch(images[:1], np.zeros((1, 2), np.int64), size=(64, 64))
    assert np.array_equal(got[0], scenes[0][0][:, :64, :64])


def test_a_batch_mixing_local_and_remote_images_and_cached_frames_is_exact(server, scenes):
    urls = _serve(server, scenes)
    local = rumimm.open(scenes[0][1], header=scenes[0][2], cache_bytes=0)
    remote = [rumimm.open(u, header=b, cache_bytes=64 << 20)
              for u, (_, _, b) in zip(urls[1:4], scenes[1:4], strict=True)]
    remote[0][:, 0:300, 0:300]  # caches 4 positions x 4 bands of file 1
    server.reset()
    images = [local, remote[0], remote[1], remote[2], remote[0]]
    origins = np.array([(100, 700), (200, 200), (600, 100), (0, 0), (500, 700)], np.int64)
    got = rumimm.read_batch(images, origins, size=(300, 300))
    for n, (img_i, (y, x)) in enumerate(zip([0, 1, 2, 3, 1], origins.tolist(), strict=True)):
        assert np.array_equal(got[n], scenes[img_i][0][:, y:y + 300, x:x + 300])
    assert all(r.path != "/scenes/s0.rumi" for r in server.requests)


def test_a_corrupt_remote_frame_is_a_codec_error_naming_the_url_and_frame(server, scenes):
    from rumimm.errors import CodecError

    _, p, blob = scenes[4]
    data = bytearray(p.read_bytes())
    hdr = rumimm.Header.parse(blob)
    start = int(hdr.frame_offsets[9])
    data[start + 40:start + 200] = bytes(160)
    url = server.put("corrupt.rumi", bytes(data))
    img = rumimm.open(url, header=blob, cache_bytes=0)
    with pytest.raises(CodecError, match=r"corrupt\.rumi: frame 9 of 16"):
        img[:, :, :]
    with pytest.raises(CodecError, match=r"corrupt\.rumi: frame 9 of 16"):
        rumimm.read_batch([img, img], np.array([(0, 0), (600, 100)], np.int64), size=(400, 400))  # (1, 0) has frame 9


@pytest.mark.parametrize("width", [2**31, 7])
def test_an_ifd_claiming_a_huge_image_fetches_nothing_past_the_object(server, small, width):
    import struct

    _, path, _ = small
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 16 + 8 + 20 * 0 + 12, width)  # ImageWidth, inline
    url = server.put(f"hostile{width}.rumi", bytes(data))
    with pytest.raises(FormatError, match=rf"hostile{width}\.rumi: "):
        rumimm.build_blob(url, storage_options=FAST)
    assert server.count("GET") <= 2 and server.bytes_sent <= len(data)


def test_a_broken_remote_spec_0_2_object_is_a_format_error_naming_the_url(server):
    url = server.put("v2.rumi", b"RUMI" + bytes(400))
    with pytest.raises(FormatError, match=r"v2\.rumi: file header version is 0, expected 1"):
        rumimm.open(url, storage_options=FAST)
    assert len(server.requests) == 1


def test_a_remote_sidecar_is_read_once_when_metadata_is_asked_for(server, tmp_path):
    a = np.arange(2 * 64 * 64, dtype=np.uint16).reshape(2, 64, 64)
    path = tmp_path / "meta.rumi"
    blob = rumimm.write(path, a, tile=32, nodata=7, descriptions=["red", "nir"])
    url = server.put("meta/meta.rumi", path.read_bytes())
    server.put("meta/meta.rumi.aux.xml", (tmp_path / "meta.rumi.aux.xml").read_bytes())
    server.reset()
    img = rumimm.open(url, header=blob, storage_options=FAST)
    assert np.array_equal(img[:, 0:8, 0:8], a[:, 0:8, 0:8]) and len(server.requests) == 1  # pixels: no sidecar
    assert img.nodata == 7 and img.descriptions == ("red", "nir")
    # on first use: one GET of the sidecar, then the file read whole once to check the sidecar's FILE_SHA256
    # (a remote object has no inode to compare: docs/remote.md)
    paths = [r.path for r in server.requests[1:]]
    assert paths[0] == "/meta/meta.rumi.aux.xml" and set(paths[1:]) == {"/meta/meta.rumi"}
    seen = len(server.requests)
    assert img.scales == (1.0, 1.0) and len(server.requests) == seen  # the sidecar is kept
    again = rumimm.open(url, header=blob, storage_options=FAST)
    assert again.nodata == 7  # the same object (ETag): the sidecar, and 16 bytes of the file to learn its ETag
    assert [(r.path, r.range) for r in server.requests[seen:]] == [("/meta/meta.rumi.aux.xml", f"bytes=0-{16 << 20}"),
                                                                   ("/meta/meta.rumi", "bytes=0-15")]


def test_a_remote_file_without_a_sidecar_costs_one_404_and_has_no_metadata(server, small, recwarn):
    _, path, blob = small
    url = server.put("meta/bare.rumi", path.read_bytes()) + "?sig=SECRET"
    server.reset()
    img = rumimm.open(url, header=blob, storage_options=FAST)
    assert img.nodata is None and img.descriptions == (None, None, None)
    assert [r.path for r in server.requests] == ["/meta/bare.rumi.aux.xml?sig=SECRET"]  # the query string kept
    assert not recwarn.list


def test_a_broken_remote_sidecar_warns_and_leaves_the_pixels_readable(server, small):
    a, path, blob = small
    url = server.put("meta/broken.rumi", path.read_bytes())
    server.put("meta/broken.rumi.aux.xml", b"<PAMDataset><not xml")
    img = rumimm.open(url, header=blob, storage_options=FAST)
    with pytest.warns(rumimm.RumiWarning, match=r"broken\.rumi\.aux\.xml: .*not applied"):
        assert img.nodata is None
    server.faults[:] = ["403"]
    img = rumimm.open(url, header=blob, storage_options=FAST)
    with pytest.warns(rumimm.RumiWarning, match=r"broken\.rumi\.aux\.xml: cannot read the sidecar \(access denied"):
        assert img.nodata is None
    assert np.array_equal(img[:, 0:5, 0:5], a[:, 0:5, 0:5])
