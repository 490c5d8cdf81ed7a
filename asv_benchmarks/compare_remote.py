"""Remote chips: random chips per second and requests per chip over HTTP with added latency.

Usage (from the repository root)::

    python asv_benchmarks/compare_remote.py                       # 0, 5, 20, 50 ms
    python asv_benchmarks/compare_remote.py --latency 20 --batches 4

What it does:

1. Writes ``--files`` (8) synthetic EO scenes (``rumimm.synthetic.eo_scene``, 4 x 2048 x
   2048 uint16) as rumimm files (512-pixel tile frames), as COGs through GDAL (512
   blocks, ZSTD level 9, predictor 2, no overviews) and as zarr 3 arrays ((1, 512, 512)
   chunks, Blosc zstd + bitshuffle).
2. Serves every file from memory with the test suite's HTTP server (``tests/servers.py``,
   on 127.0.0.1, Range support, in a process of its own), which sleeps ``latency``
   before each answer and counts requests and bytes.
3. Draws random 256 x 256 all-band chips over the files in batches of 16 (the same
   chips for every engine) and times each engine batch by batch, engines taking turns
   so a burst of load elsewhere falls on all alike; the first batch of each engine is
   an untimed warm-up, checked pixel for pixel against the source arrays.
   Engines: rumimm ``read_batch`` over URLs with the blobs (kept open), rumimm
   ``ChipDataset.__getitems__`` (the same chips, files opened by the dataset), GDAL
   ``/vsicurl/`` (datasets kept open, chips read one after another), zarr 3 over
   obstore's HTTP store (arrays kept open, chips one after another).
4. Prints chips/s and requests per chip for each engine and latency.

Caches: rumimm's frame cache off (``cache_bytes=0``); GDAL's block cache 16 MB and its
``/vsicurl/`` region cache left at its default (a chip rarely repeats); zarr has none.
Needs the ``bench`` and ``remote`` extras (rasterio, zarr, obstore).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import warnings

import numpy as np

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:  # a plain checkout: use the working tree
    sys.path.insert(0, _ROOT)

import rumimm  # noqa: E402

BANDS, CHIP, BATCH, TILE = 4, 256, 16, 512
LATENCIES_MS = (0, 5, 20, 50)


def write_files(work: str, n: int, size: int) -> list[dict]:
    """Each scene as a rumi file (+ blob), a COG and a zarr 3 array; returns their paths and arrays."""
    from rumimm.synthetic import eo_scene

    out = []
    os.makedirs(work, exist_ok=True)
    for i in range(n):
        arr = eo_scene(bands=BANDS, height=size, width=size, dtype="uint16", seed=i)
        rumi = os.path.join(work, f"s{i}.rumi")
        cog = os.path.join(work, f"s{i}.tif")
        zdir = os.path.join(work, f"s{i}.zarr")
        done = os.path.join(work, f"s{i}.done")
        if os.path.exists(done):  # written by an earlier run with --work: reuse
            blob = rumimm.index(rumi)
        else:
            blob = rumimm.write(rumi, arr, tile=TILE)
            _write_cog(cog, arr)
            _write_zarr(zdir, arr)
            open(done, "w").close()
        out.append({"array": arr, "rumi": rumi, "blob": blob, "cog": cog, "zarr": zdir})
    return out


def _write_cog(path: str, arr: np.ndarray) -> None:
    import rasterio

    b, y, x = arr.shape
    with rasterio.open(path, "w", driver="COG", width=x, height=y, count=b, dtype=arr.dtype.name,
                       blocksize=TILE, compress="zstd", level=9, predictor=2, overviews="none") as ds:
        ds.write(arr)


def _write_zarr(path: str, arr: np.ndarray) -> None:
    import zarr
    from zarr.codecs import BloscCodec

    z = zarr.create_array(path, shape=arr.shape, chunks=(1, TILE, TILE), dtype=arr.dtype, overwrite=True,
                          compressors=BloscCodec(cname="zstd", clevel=5, shuffle="bitshuffle"))
    z[...] = arr


class Served:
    """``tests/servers.py`` serving the work folder from another process, and its counters.

    In another process because GDAL holds the GIL while it reads a TIFF directory over
    HTTP: a server in the benchmark's own process would stall until GDAL's timeout.
    """

    def __init__(self, work: str):
        self.proc = subprocess.Popen([sys.executable, os.path.join(_ROOT, "tests", "servers.py"), work],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"the file server did not start: {self.url!r}")

    def control(self, what: str) -> dict:
        with urllib.request.urlopen(f"{self.url}/__control/{what}", timeout=30) as r:
            return json.loads(r.read())

    def stop(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def add_urls(files: list[dict], work: str, url: str) -> None:
    for f in files:
        for key in ("rumi", "cog", "zarr"):
            f[key + "_url"] = f"{url}/{os.path.relpath(f[key], work).replace(os.sep, '/')}"


def draw_chips(n_files: int, size: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, n_files, n), rng.integers(0, size - CHIP + 1, n),
                     rng.integers(0, size - CHIP + 1, n)], axis=1)


# --------------------------------------------------------------------------- engines


class RumimmBatch:
    name = "rumimm read_batch (URL + blob)"

    def __init__(self, files):
        self.images = [rumimm.open(f["rumi_url"], header=f["blob"], cache_bytes=0) for f in files]

    def read(self, batch):
        return rumimm.read_batch([self.images[i] for i, _, _ in batch], np.asarray(batch)[:, 1:], size=(CHIP, CHIP))


class RumimmDataset:
    name = "rumimm ChipDataset (__getitems__)"

    def __init__(self, files):
        self.files = files
        self.ds = rumimm.ChipDataset([f["rumi_url"] for f in files], CHIP, n=1, headers=[f["blob"] for f in files],
                                     cache_bytes=0)

    def read(self, batch):
        self.ds.chips = np.asarray(batch, np.int64)  # the chips every engine reads
        return self.ds.__getitems__(list(range(len(batch))))


class Gdal:
    name = "GDAL /vsicurl/ kept open"

    def __init__(self, files):
        import rasterio

        self.env = rasterio.Env(GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR", GDAL_CACHEMAX=16,
                                CPL_VSIL_CURL_ALLOWED_EXTENSIONS=".tif", GDAL_HTTP_MAX_RETRY=0, GDAL_HTTP_TIMEOUT=30)
        self.env.__enter__()  # left by close(): GDAL's settings must not outlive the comparison
        self.ds = [rasterio.open(f"/vsicurl/{f['cog_url']}") for f in files]

    def close(self):
        for ds in self.ds:
            ds.close()
        self.env.__exit__(None, None, None)

    def read(self, batch):
        from rasterio.windows import Window

        return np.stack([self.ds[i].read(window=Window(x, y, CHIP, CHIP)) for i, y, x in batch])


class Zarr:
    name = "zarr 3 (obstore HTTP) kept open"

    def __init__(self, files):
        import zarr
        from obstore.store import HTTPStore
        from zarr.storage import ObjectStore

        self.arrays = [zarr.open_array(ObjectStore(HTTPStore(f["zarr_url"], client_options={"allow_http": True}),
                                                   read_only=True), mode="r") for f in files]

    def read(self, batch):
        return np.stack([self.arrays[i][:, y:y + CHIP, x:x + CHIP] for i, y, x in batch])


ENGINES = (RumimmBatch, RumimmDataset, Gdal, Zarr)


def run(files, server: Served, latency_ms: float, batches: int, seed: int, engines=ENGINES) -> dict:
    """{engine: {"chips/s", "requests/chip"}} for one latency: engines take turns batch by batch."""
    size = files[0]["array"].shape[1]
    chips = draw_chips(len(files), size, BATCH * (batches + 1), seed).tolist()
    server.control("latency/0")
    classes, engines = engines, []
    for cls in classes:
        try:
            engines.append(cls(files))
        except Exception as exc:  # noqa: BLE001 - an engine that cannot run is reported, not fatal
            print(f"  {cls.name}: cannot run ({type(exc).__name__}: {exc})")
    server.control(f"latency/{latency_ms:g}")
    try:
        return _time(files, server, chips, engines, batches)
    finally:
        for e in engines:
            getattr(e, "close", lambda: None)()


def _time(files, server: Served, chips, engines, batches: int) -> dict:
    times: dict = {e.name: [] for e in engines}
    requests = {e.name: 0 for e in engines}
    sent = {e.name: 0 for e in engines}
    for b in range(batches + 1):
        batch = chips[b * BATCH:(b + 1) * BATCH]
        order = engines[b % len(engines):] + engines[:b % len(engines)]
        for e in order:
            server.control("reset")
            t = time.perf_counter()
            got = e.read(batch)
            dt = time.perf_counter() - t
            stats = server.control("stats")
            if b == 0:
                want = np.stack([files[i]["array"][:, y:y + CHIP, x:x + CHIP] for i, y, x in batch])
                if not np.array_equal(got, want):
                    raise AssertionError(f"{e.name}: wrong pixels")
                continue
            times[e.name].append(dt)
            requests[e.name] += stats["requests"]
            sent[e.name] += stats["bytes"]
    n = batches * BATCH
    return {name: {"chips/s": n / sum(ts), "median batch s": statistics.median(ts),
                   "requests/chip": requests[name] / n, "MB/chip": sent[name] / n / 1e6}
            for name, ts in times.items()}


def main(argv=None) -> None:
    warnings.filterwarnings("ignore", message="Dataset has no geotransform")  # synthetic scenes: no CRS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--batches", type=int, default=4, help="timed batches of 16 per engine and latency")
    ap.add_argument("--latency", type=float, nargs="*", default=list(LATENCIES_MS), help="ms added per request")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engines", nargs="*", default=[c.__name__ for c in ENGINES],
                    help=f"of {[c.__name__ for c in ENGINES]}")
    ap.add_argument("--work", help="folder for the files (kept, and reused when it holds them)")
    args = ap.parse_args(argv)
    engines = [c for c in ENGINES if c.__name__ in args.engines]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        files = write_files(work, args.files, args.size)
        server = Served(work)
        try:
            add_urls(files, work, server.url)
            print(f"rumimm {rumimm.__version__}; {args.files} files {BANDS}x{args.size}x{args.size} uint16; "
                  f"{CHIP}x{CHIP} all-band chips, batches of {BATCH}")
            print("| latency ms | engine | chips/s | requests/chip | MB/chip |")
            print("|---|---|---|---|---|")
            for lat in args.latency:
                res = run(files, server, lat, args.batches, args.seed, engines)
                for name, r in res.items():
                    print(f"| {lat:g} | {name} | {r['chips/s']:.1f} | {r['requests/chip']:.2f} | "
                          f"{r['MB/chip']:.2f} |", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
