"""Remote chips: random chips per second and requests per chip over HTTP with added latency.

Usage (from the repository root)::

    python -m asv_benchmarks.compare.remote_chips                       # 0, 5, 20, 50 ms
    python -m asv_benchmarks.compare.remote_chips --latency 20 --batches 4
    python -m asv_benchmarks.compare.remote_chips --latency 20 --coalesce 1048576 8388608   # rumimm's merging

What it does:

1. Writes ``--files`` (8) synthetic EO scenes (``rumimm.synthetic.eo_scene``, 4 x 2048 x
   2048 uint16) as rumimm files (512-pixel tile frames), as COGs through GDAL (512
   blocks, ZSTD level 9, predictor 2, no overviews), as zarr 3 arrays ((1, 512, 512)
   chunks, Blosc zstd + bitshuffle) and, when rumi-eo 0.26.1 is installed in its own venv
   (``.ci/peer026.sh``, or ``$RUMIMM_PEER026_PYTHON``), as spec 0.2 files rumi-eo writes
   with its recommended recipe (one ``h w`` frame per band of 512-pixel tiles, each
   compressed by ``geozl`` with a ``planar>zigzag>zstd`` graph, as ``compare/spec_v2.py``).
2. Serves every file from memory with the test suite's HTTP server (``tests/servers.py``,
   on 127.0.0.1, Range support, in a process of its own), which sleeps ``latency``
   before each answer and counts requests and bytes.
3. Draws random 256 x 256 all-band chips over the files in batches of 16 (the same
   chips for every engine) and times each engine batch by batch, engines taking turns
   so a burst of load elsewhere falls on all alike; the first batch of each engine is
   an untimed warm-up, checked pixel for pixel against the source arrays.
   Engines: rumimm ``read_batch`` over URLs with the blobs (kept open), rumimm
   ``ChipDataset.__getitems__`` (the same chips, files opened by the dataset), rumimm
   ``read_batch`` on rumi-eo's spec 0.2 bytes, rumi-eo 0.26.1 ``read_many`` on the same
   0.2 URLs and headers (its own interpreter, a worker process kept running; the batch is
   timed inside it), GDAL ``/vsicurl/`` (datasets kept open, chips read one after
   another), zarr 3 over obstore's HTTP store (arrays kept open, chips one after another).
   ``--coalesce N ...`` adds a rumimm ``read_batch`` row per merging threshold (bytes, or
   ``auto``; the storage option ``coalesce``).
4. Prints chips/s, requests and MB fetched per chip for each engine and latency, and for
   rumimm's ``read_batch`` rows the share of the batch time spent waiting for the frames
   (the rest is planning, decoding and placing).

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

import rumimm
from asv_benchmarks.compare.common import PEER026, PEER_WRITE, ROOT, check_chips
from rumimm.reader.image import frame_source

BANDS, CHIP, BATCH, TILE = 4, 256, 16, 512
LATENCIES_MS = (0, 5, 20, 50)
PEER = PEER026  # a module global: the tests point it elsewhere


def write_files(work: str, n: int, size: int, codecs=()) -> list[dict]:
    """Each scene as a rumi file (+ blob), a COG and a zarr 3 array, and as a rumi file per preset in
    ``codecs`` (keys ``rumi_<preset>``, ``blob_<preset>``); returns their paths and arrays."""
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
            blob = rumimm.build_blob(rumi)
        else:
            blob = rumimm.write(rumi, arr, tile=TILE)
            _write_cog(cog, arr)
            _write_zarr(zdir, arr)
            open(done, "w").close()
        entry = {"array": arr, "rumi": rumi, "blob": blob, "cog": cog, "zarr": zdir}
        for codec in codecs:
            path = os.path.join(work, f"s{i}_{codec}.rumi")
            entry[f"rumi_{codec}"] = path
            entry[f"blob_{codec}"] = (rumimm.build_blob(path) if os.path.exists(path)
                                      else rumimm.write(path, arr, tile=TILE, codec=codec))
        out.append(entry)
    if os.path.isfile(PEER):
        _write_peer_files(work, out)
    return out


def _write_peer_files(work: str, files: list[dict]) -> None:
    """rumi-eo 0.26.1 writes each scene as a spec 0.2 file with its recommended recipe (its own interpreter)."""
    paths = [os.path.join(work, f"s{i}.v2.rumi") for i in range(len(files))]
    done = os.path.join(work, "v2.done")
    if not os.path.exists(done):
        npys = []
        for i, f in enumerate(files):
            npys.append(os.path.join(work, f"s{i}.npy"))
            np.save(npys[-1], f["array"])
        args = json.dumps({"npys": npys, "paths": paths, "tile": TILE})
        proc = subprocess.run([PEER, "-c", PEER_WRITE, args], capture_output=True, text=True, check=False,
                              cwd=tempfile.gettempdir())
        for npy in npys:
            os.remove(npy)
        if proc.returncode:
            raise RuntimeError(f"rumi-eo could not write its files: {proc.stderr.strip()[-1000:]}")
        open(done, "w").close()
    for f, path in zip(files, paths, strict=True):
        f["v2"], f["v2_blob"] = path, rumimm.build_blob(path)


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
        self.proc = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "servers.py"), work],
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
        for key in [k for k in f if k in ("rumi", "cog", "zarr", "v2") or k.startswith("rumi_")]:
            if key in f:
                f[key + "_url"] = f"{url}/{os.path.relpath(f[key], work).replace(os.sep, '/')}"


def draw_chips(n_files: int, size: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, n_files, n), rng.integers(0, size - CHIP + 1, n),
                     rng.integers(0, size - CHIP + 1, n)], axis=1)


# --------------------------------------------------------------------------- engines


class _FetchClock:
    """Seconds rumimm spends waiting for its batches' frames (``reader.source.get_ranges_many``, wrapped)."""

    seconds = 0.0
    installed = False

    @classmethod
    def install(cls) -> None:
        from rumimm.reader import source

        if cls.installed:
            return
        inner = source.get_ranges_many

        def timed(requests):
            t = time.perf_counter()
            try:
                return inner(requests)
            finally:
                cls.seconds += time.perf_counter() - t

        source.get_ranges_many = timed
        cls.installed = True


class RumimmBatch:
    name = "rumimm read_batch (URL + blob)"
    key, blob_key = "rumi_url", "blob"
    options: dict | None = None

    def __init__(self, files):
        self.images = [rumimm.open(f[self.key], header=f[self.blob_key], cache_bytes=0, storage_options=self.options)
                       for f in files]
        _FetchClock.install()

    def read(self, batch):
        before = _FetchClock.seconds
        try:
            return rumimm.read_batch([self.images[i] for i, _, _ in batch], np.asarray(batch)[:, 1:],
                                     size=(CHIP, CHIP))
        finally:
            self.fetch_last = _FetchClock.seconds - before


class RumimmBatchV2(RumimmBatch):
    name = "rumimm read_batch on rumi-eo's 0.2 files"
    key, blob_key = "v2_url", "v2_blob"


def coalescing(value) -> type:
    """A rumimm ``read_batch`` engine whose images merge ranges closer than ``value`` bytes (or ``"auto"``)."""
    label = value if value == "auto" else f"{int(value) / (1 << 20):g} MiB"
    return type(f"RumimmCoalesce_{value}", (RumimmBatch,), {"name": f"rumimm read_batch, coalesce {label}",
                                                           "options": {"coalesce": value}})


def with_codec(codec: str, coalesce=None) -> type:
    """A rumimm ``read_batch`` engine on the files written with preset ``codec`` (``--codec``), merging
    ranges closer than ``coalesce`` bytes (or ``"auto"``) when given."""
    name = f"rumimm read_batch, codec={codec}"
    attrs = {"name": name, "key": f"rumi_{codec}_url", "blob_key": f"blob_{codec}"}
    if coalesce is not None:
        label = coalesce if coalesce == "auto" else f"{int(coalesce) / (1 << 20):g} MiB"
        attrs.update(name=f"{name}, coalesce {label}", options={"coalesce": coalesce})
    return type(f"RumimmCodec_{codec}_{coalesce}", (RumimmBatch,), attrs)


_PEER_READ = r'''
import hashlib, json, os, sys, time
import numpy as np, rumi
assert rumi.__version__ == "0.26.1", rumi.__version__
rumi.set_num_threads(os.cpu_count() or 1)
init = json.loads(sys.stdin.readline())
urls, headers = init["urls"], [bytes.fromhex(h) for h in init["headers"]]
print(json.dumps({"ready": rumi.__version__}), flush=True)
for line in sys.stdin:
    job = json.loads(line)
    batch = job["batch"]
    t = time.perf_counter()
    got = rumi.read_many([urls[i] for i, _, _ in batch], [headers[i] for i, _, _ in batch],
                         windows=[(y, x, job["chip"], job["chip"]) for _, y, x in batch])
    dt = time.perf_counter() - t
    if job.get("save"):
        np.save(job["save"], got)
    print(json.dumps({"seconds": dt}), flush=True)
'''


class RumiEo:
    """rumi-eo 0.26.1 ``read_many`` on its own 0.2 files, in a worker process of its interpreter."""

    name = "rumi-eo 0.26.1 read_many (its 0.2 files)"

    def __init__(self, files):
        if not os.path.isfile(PEER) or any("v2_url" not in f for f in files):
            raise RuntimeError(f"rumi-eo 0.26.1 not found at {PEER}: run .ci/peer026.sh or set RUMIMM_PEER026_PYTHON")
        self.proc = subprocess.Popen([PEER, "-c", _PEER_READ], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=tempfile.gettempdir())
        self.tmp = tempfile.mkdtemp(prefix="rumimm-remote-peer-")
        self._send({"urls": [f["v2_url"] for f in files], "headers": [f["v2_blob"].hex() for f in files]})
        self.seconds = None

    def _send(self, msg: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the rumi-eo worker stopped (see its stderr)")
        return json.loads(line)

    def read(self, batch):
        save = os.path.join(self.tmp, "batch.npy")
        out = self._send({"batch": [list(map(int, c)) for c in batch], "chip": CHIP, "save": save})
        self.seconds = out["seconds"]  # timed inside the worker: no pipe or pickling counted
        got = np.load(save)
        os.remove(save)
        return got

    def close(self):
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.rmdir(self.tmp)


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


ENGINES = (RumimmBatch, RumimmDataset, RumimmBatchV2, RumiEo, Gdal, Zarr)


def run(files, server: Served, latency_ms: float, batches: int, seed: int, engines=ENGINES) -> dict:
    """{engine: {"chips/s", "requests/chip"}} for one latency: engines take turns batch by batch."""
    size = files[0]["array"].shape[1]
    chips = draw_chips(len(files), size, BATCH * (batches + 1), seed).tolist()
    server.control("latency/0")
    classes, engines = engines, []
    for cls in classes:
        try:
            engines.append(cls(files))
        except Exception as exc:
            print(f"  {cls.name}: cannot run ({type(exc).__name__}: {exc})")
    server.control(f"latency/{latency_ms:g}")
    try:
        out = _time(files, server, chips, engines, batches)
        for e in engines:
            if (e.options or {}).get("coalesce") == "auto" if hasattr(e, "options") else False:
                link = frame_source(e.images[0]).live_store().link
                print(f"  {e.name}: round trip {link.rtt * 1e3:.0f} ms x {link.rate / 1e6:.0f} MB/s an answer: "
                      f"merging threshold {link.coalesce() / (1 << 20):.1f} MiB")
        return out
    finally:
        for e in engines:
            getattr(e, "close", lambda: None)()


def _time(files, server: Served, chips, engines, batches: int) -> dict:
    times: dict = {e.name: [] for e in engines}
    requests = {e.name: 0 for e in engines}
    sent = {e.name: 0 for e in engines}
    fetch = {e.name: 0.0 for e in engines}
    for b in range(batches + 1):
        batch = chips[b * BATCH:(b + 1) * BATCH]
        order = engines[b % len(engines):] + engines[:b % len(engines)]
        for e in order:
            server.control("reset")
            t = time.perf_counter()
            got = e.read(batch)
            dt = time.perf_counter() - t
            dt = getattr(e, "seconds", None) or dt  # an engine in another process times itself
            stats = server.control("stats")
            if b == 0:
                check_chips(e.name, got, files, batch, CHIP)
                continue
            times[e.name].append(dt)
            fetch[e.name] += getattr(e, "fetch_last", 0.0)
            requests[e.name] += stats["requests"]
            sent[e.name] += stats["bytes"]
    n = batches * BATCH
    return {name: {"chips/s": n / sum(ts), "median batch s": statistics.median(ts),
                   "requests/chip": requests[name] / n, "MB/chip": sent[name] / n / 1e6,
                   "fetch share": fetch[name] / sum(ts)}
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
    ap.add_argument("--coalesce", nargs="*", default=[],
                    help="a rumimm read_batch row per merging threshold: bytes, or auto")
    ap.add_argument("--codec", nargs="*", default=[], metavar="PRESET",
                    help="a rumimm read_batch row per preset, on files written with it (same tile)")
    ap.add_argument("--work", help="folder for the files (kept, and reused when it holds them)")
    args = ap.parse_args(argv)
    engines = [c for c in ENGINES if c.__name__ in args.engines]
    engines += [coalescing(v if v == "auto" else int(v)) for v in args.coalesce]
    engines += [with_codec(c) for c in args.codec]
    engines += [with_codec(c, v if v == "auto" else int(v)) for c in args.codec for v in args.coalesce]
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or tmp
        files = write_files(work, args.files, args.size, args.codec)
        server = Served(work)
        try:
            add_urls(files, work, server.url)
            print(f"rumimm {rumimm.__version__}; {args.files} files {BANDS}x{args.size}x{args.size} uint16; "
                  f"{CHIP}x{CHIP} all-band chips, batches of {BATCH}")
            print("| latency ms | engine | chips/s | requests/chip | MB/chip | time fetching |")
            print("|---|---|---|---|---|---|")
            for lat in args.latency:
                res = run(files, server, lat, args.batches, args.seed, engines)
                for name, r in res.items():
                    share = f"{r['fetch share']:.0%}" if r["fetch share"] else ""
                    print(f"| {lat:g} | {name} | {r['chips/s']:.1f} | {r['requests/chip']:.2f} | "
                          f"{r['MB/chip']:.2f} | {share} |", flush=True)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
