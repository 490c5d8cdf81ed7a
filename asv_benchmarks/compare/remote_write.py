"""Remote writes: a scene written straight to S3 against the other ways of getting it there.

Usage (from the repository root)::

    python -m asv_benchmarks.compare.remote_write                  # 0 and 20 ms, a 128 MiB scene
    python -m asv_benchmarks.compare.remote_write --latency 0 --size 2048 --repeat 1
    python -m asv_benchmarks.compare.remote_write --rows rumimm --repeat 9   # the two rumimm rows only

What it does:

1. Starts moto's S3 server on 127.0.0.1 in a process of its own (GDAL holds the GIL
   while it talks to a server, so a server in this process would stall), sleeping
   ``latency`` ms before each answer.
2. Writes one synthetic EO scene (``rumimm.synthetic.eo_scene``, 4 x ``size`` x ``size``
   uint16: 128 MiB at the default 4096) to a bucket, each way in turn, ``--repeat`` times
   (the median is printed, after one untimed warm-up round, and for the direct write the
   median and range of its ratio to the local write + upload of the same round):
   ``rumimm -> s3://`` (``rumimm.write`` to the URI), ``rumimm local + upload`` (``rumimm.write``
   to a local file, then ``obstore.put`` of it), ``GDAL COG -> /vsis3/`` (rasterio: a tiled
   GeoTIFF in ``/vsimem/``, then the COG driver's copy to ``/vsis3/``; ZSTD, predictor 2,
   512 blocks) and ``zarr 3 -> S3`` (``zarr.create_array`` on ``zarr.storage.ObjectStore`` over
   obstore's S3 store, (1, 512, 512) chunks, Blosc zstd + bitshuffle).
3. Conversion: ``--cogs`` (8) COGs of ``size / 2`` pixels in the bucket, each converted to a rumi
   object in the bucket (``rumimm.from_geotiff("/vsis3/...", "s3://...")``) against
   ``gdal_translate`` (``rasterio.shutil.copy`` to a local COG) followed by an upload.

Every row uses 512-pixel tiles and one process (rumimm ``threads=1``, GDAL ``NUM_THREADS=1``)
so the rows compare the paths, not the core counts.  ``--rows`` picks the groups to time
(``rumimm``: the first two rows; ``gdal``, ``zarr``, ``convert``).  Needs the ``bench`` and
``remote`` extras.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

TILE = 512
BUCKET = "bench-write"
CREDS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


def serve(port: int, latency_ms: float) -> None:
    """moto's S3 on 127.0.0.1:``port``, every answer ``latency_ms`` late (run in a process of its own)."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log(self, *args):
            pass

    app = DomainDispatcherApplication(create_backend_app)

    def late(environ, start_response):
        time.sleep(latency_ms / 1000)
        return app(environ, start_response)

    make_server("127.0.0.1", port, late, threaded=True, request_handler=Quiet).serve_forever()


class Moto:
    def __init__(self, latency_ms: float):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen([sys.executable, "-m", "asv_benchmarks.compare.remote_write", "--serve",
                                      str(self.port), str(latency_ms)])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("moto did not start") from None
                time.sleep(0.1)
        os.environ.update({**CREDS, "AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": "true",
                           "AWS_S3_ENDPOINT": f"127.0.0.1:{self.port}", "AWS_HTTPS": "NO",
                           "AWS_VIRTUAL_HOSTING": "FALSE"})
        import boto3

        self.s3 = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                               aws_access_key_id="testing", aws_secret_access_key="testing")
        self.s3.create_bucket(Bucket=BUCKET)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _obstore_put(key: str, local: str) -> None:
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, client_options={"allow_http": True})
    with open(local, "rb") as fh:
        obstore.put(store, key, fh, chunk_size=16 << 20, max_concurrency=8)


def _profile(b: int, y: int, x: int) -> dict:
    from rasterio.transform import Affine

    return dict(driver="GTiff", width=x, height=y, count=b, dtype="uint16", crs="EPSG:32633",
                transform=Affine(10, 0, 500000, 0, -10, 4200000), tiled=True, blockxsize=TILE, blockysize=TILE,
                compress="zstd", predictor=2, num_threads=1)


_GROUP = {"rumimm -> s3://": "rumimm", "rumimm local + upload": "rumimm", "GDAL COG -> /vsis3/": "gdal",
          "zarr 3 -> S3": "zarr"}
GROUPS = ("rumimm", "gdal", "zarr", "convert")


def write_rows(scene: np.ndarray, work: str, groups=GROUPS) -> dict:
    """Seconds for each way of getting ``scene`` into the bucket."""
    import rasterio
    import rasterio.shutil
    import zarr
    from obstore.store import S3Store
    from zarr.codecs import BloscCodec

    import rumimm

    def direct():
        rumimm.write(f"s3://{BUCKET}/direct.rumi", scene, tile=TILE, threads=1)

    def local_upload():
        path = os.path.join(work, "local.rumi")
        rumimm.write(path, scene, tile=TILE, threads=1)
        _obstore_put("uploaded.rumi", path)

    def gdal():  # GDAL stages the random writes of a TIFF in a local temporary file, then uploads it
        with rasterio.Env(GDAL_NUM_THREADS=1, CPL_VSIL_USE_TEMP_FILE_FOR_RANDOM_WRITE="YES"):
            mem = "/vsimem/scene.tif"
            with rasterio.open(mem, "w", **_profile(*scene.shape)) as ds:
                ds.write(scene)
            rasterio.shutil.copy(mem, f"/vsis3/{BUCKET}/scene.tif", driver="COG", compress="ZSTD", predictor=2,
                                 blocksize=TILE, overviews="NONE", num_threads=1)
            rasterio.shutil.delete(mem)

    def zarr3():
        store = zarr.storage.ObjectStore(S3Store(BUCKET, client_options={"allow_http": True}))
        z = zarr.create_array(store, name="scene", shape=scene.shape, chunks=(1, TILE, TILE), dtype=scene.dtype,
                              overwrite=True, compressors=BloscCodec(cname="zstd", clevel=5, shuffle="bitshuffle"))
        z[...] = scene

    rows = {"rumimm -> s3://": direct, "rumimm local + upload": local_upload, "GDAL COG -> /vsis3/": gdal,
            "zarr 3 -> S3": zarr3}
    return {name: fn for name, fn in rows.items() if _GROUP[name] in groups}


def convert_rows(cogs: list[str], work: str) -> dict:
    import rasterio
    import rasterio.shutil

    import rumimm

    def rumimm_convert():
        for i, key in enumerate(cogs):
            rumimm.from_geotiff(f"/vsis3/{BUCKET}/{key}", f"s3://{BUCKET}/rumi/{i}.rumi", tile=TILE, threads=1)

    def translate_upload():
        with rasterio.Env(GDAL_NUM_THREADS=1):
            for i, key in enumerate(cogs):
                local = os.path.join(work, f"t{i}.tif")
                rasterio.shutil.copy(f"/vsis3/{BUCKET}/{key}", local, driver="COG", compress="ZSTD", predictor=2,
                                     blocksize=TILE, overviews="NONE", num_threads=1)
                _obstore_put(f"translated/{i}.tif", local)
                os.unlink(local)

    return {"rumimm.from_geotiff bucket -> bucket": rumimm_convert,
            "gdal_translate to local + upload": translate_upload}


def timed(rows: dict, repeat: int) -> dict:
    """Seconds of each row in each round (lists); rows take turns, in reverse order every other round."""
    out: dict = {name: [] for name in rows}
    for fn in rows.values():  # warm-up, untimed: JIT compilation, clients, connections
        fn()
    for i in range(repeat):
        order = list(rows.items()) if i % 2 == 0 else list(rows.items())[::-1]
        for name, fn in order:  # taking turns: a burst of load falls on every row alike
            t0 = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - t0)
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--latency", type=float, nargs="+", default=[0.0, 20.0], help="ms per request")
    p.add_argument("--size", type=int, default=4096, help="scene height and width (4 bands uint16)")
    p.add_argument("--cogs", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--rows", nargs="+", choices=GROUPS, default=list(GROUPS), help="the groups of rows to time")
    p.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.serve:
        serve(int(args.serve[0]), float(args.serve[1]))
        return
    import rasterio

    from rumimm.synthetic import eo_scene

    scene = eo_scene(bands=4, height=args.size, width=args.size, dtype="uint16", seed=0)
    half = args.size // 2
    print(f"scene 4 x {args.size} x {args.size} uint16 ({scene.nbytes / 2**20:.0f} MiB), tile {TILE}, "
          f"{args.cogs} COGs of 4 x {half} x {half}")
    with tempfile.TemporaryDirectory(prefix="rumimm-remote-write-") as work:
        cog_paths = []
        for i in range(args.cogs if "convert" in args.rows else 0):
            path = os.path.join(work, f"c{i}.tif")
            with rasterio.open(path, "w", **_profile(4, half, half)) as ds:
                ds.write(eo_scene(bands=4, height=half, width=half, dtype="uint16", seed=i + 1))
            cog_paths.append(path)
        for latency in args.latency:
            srv = Moto(latency)
            try:
                keys = []
                for i, path in enumerate(cog_paths):
                    srv.s3.upload_file(path, BUCKET, f"cogs/{i}.tif")
                    keys.append(f"cogs/{i}.tif")
                runs = timed(write_rows(scene, work, args.rows), args.repeat)
                conv = timed(convert_rows(keys, work), args.repeat) if "convert" in args.rows else {}
            finally:
                srv.stop()
            w = {name: statistics.median(v) for name, v in runs.items()}
            c = {name: statistics.median(v) for name, v in conv.items()}
            print(f"\nlatency {latency:g} ms per request")
            base = w.get("rumimm local + upload")
            for name, s in w.items():
                vs = f"  {s / base:5.2f}x local+upload" if base else ""
                print(f"  {name:<38} {s:7.2f} s  {scene.nbytes / 2**20 / s:7.1f} MiB/s{vs}")
            if "rumimm" in args.rows:
                direct, local = runs["rumimm -> s3://"], runs["rumimm local + upload"]
                ratios = [a / b for a, b in zip(direct, local, strict=True)]
                print(f"  rumimm -> s3:// / local + upload, same round: median {statistics.median(ratios):.2f} "
                      f"(range {min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)")
            if c:
                gbase = c["gdal_translate to local + upload"]
                for name, s in c.items():
                    print(f"  {name:<38} {s:7.2f} s  {gbase / s:5.2f}x faster than gdal_translate + upload")


if __name__ == "__main__":
    main()
