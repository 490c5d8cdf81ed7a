"""STAC: from a list of Items to the first chip, and chips per second, over HTTP with added latency.

Usage (from the repository root)::

    python -m asv_benchmarks.compare.stac                      # 64 scenes, 20 ms a request
    python -m asv_benchmarks.compare.stac --files 16 --size 512 --latency 20 --batches 4

What it does:

1. Writes ``--files`` (64) synthetic EO scenes (``rumimm.synthetic.eo_scene``, 4 x 1024 x 1024
   uint16, UTM 33N) three ways: rumi spec 0.1 and spec 0.2 files (256-pixel tile frames) and
   COGs through GDAL (256 blocks, ZSTD 9, predictor 2).  Items: ``rumimm.stac.items`` for the
   rumi files (the header blob in ``rumi:header``), pystac Items with the projection and raster
   fields (what rio-stac writes) for the COGs; hrefs point at the server.
2. Serves the folder with the test suite's HTTP server (``tests/servers.py``, 127.0.0.1, in a
   process of its own), ``--latency`` ms before each answer.
3. Times, for each engine, (a) Item list -> the first 256 x 256 chip of the first scene, from
   nothing open, and (b) training batches of 16 random chips over all scenes (the same chips
   for every engine; the first batch an untimed warm-up checked pixel for pixel).
   Engines: ``rumimm.stac.load(items, output="cube")`` then ``read_batch`` over its images
   (spec 0.1 and spec 0.2 Items), and odc-stac's ``odc.stac.load`` on the COG Items (Dask
   chunks of one block, a chip a ``.isel(...)``, the batch one ``dask.compute``), and
   stackstac's ``stackstac.stack`` on the same COG Items, the same way, in stackstac's own
   interpreter (``--stackstac-python``; 0.5.1 pins pandas < 3): ``compare/stac_stackstac.py``,
   driven over a pipe so its batches interleave with the others'.  stackstac takes one band
   per asset, so that worker makes each Item's 4-band asset four ``vrt://`` band subsets of
   the same COG (timed with the first chip).
4. Times building 10,000 Items from a rumimm catalog table (``rumimm.stac.to_items``).
5. Prints the table, the versions of both COG loaders, and rumimm's ratios to each of them.

Needs the ``bench``, ``remote`` and ``stac`` extras and odc-stac; for the stackstac row, its venv
(``asv_benchmarks/compare/stackstac_venv.sh`` makes ``.venv-stackstac``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np

import rumimm
from asv_benchmarks.compare.common import EPSG, ROOT, STACKSTAC, TRANSFORM, check_chips, module_command, versions
from asv_benchmarks.compare.remote_chips import Served

BANDS, CHIP, BATCH, TILE = 4, 256, 16, 256
T0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
GDAL_ENV = {"GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR", "GDAL_HTTP_MULTIPLEX": "YES",
            "CPL_VSIL_CURL_ALLOWED_EXTENSIONS": ".tif"}


def write_files(work: str, n: int, size: int) -> list[dict]:
    import rasterio
    from rasterio.transform import Affine

    from rumimm.synthetic import eo_scene

    out = []
    for i in range(n):
        arr = eo_scene(bands=BANDS, height=size, width=size, dtype="uint16", seed=i)
        f = {"array": arr}
        for key, spec in (("v1", None), ("v2", "0.2")):
            path = os.path.join(work, f"s{i}.{key}.rumi")
            extra = {} if spec is None else {"spec": "0.2", "descriptions": [f"b{k}" for k in range(BANDS)],
                                             "time": [np.datetime64("2024-05-01T00:00") + np.timedelta64(i, "h")]}
            f[key + "_blob"] = rumimm.write(path, arr, tile=TILE, transform=TRANSFORM, crs=EPSG, **extra)
            f[key] = path
        cog = os.path.join(work, f"s{i}.tif")
        a, b, c, d, e, g = TRANSFORM
        with rasterio.open(cog, "w", driver="COG", width=size, height=size, count=BANDS, dtype="uint16",
                           crs=f"EPSG:{EPSG}", transform=Affine(a, b, c, d, e, g), blocksize=TILE,
                           compress="zstd", level=9, predictor=2, overviews="none") as ds:
            ds.write(arr)
        f["cog"] = cog
        out.append(f)
    return out


def rumi_items(files: list[dict], key: str, url: str, work: str) -> list:
    from rumimm import stac

    items = stac.items([f[key] for f in files], blobs=[f[key + "_blob"] for f in files],
                       datetime=[T0 + dt.timedelta(hours=i) for i in range(len(files))])
    for it, f in zip(items, files, strict=True):
        it.assets["data"].href = f"{url}/{os.path.relpath(f[key], work)}"
    return items


def cog_items(files: list[dict], url: str, work: str) -> list:
    """COG Items as rio-stac makes them: projection fields and raster bands, no header."""
    import pystac

    from rumimm import stac

    size = files[0]["array"].shape[1]
    base = stac.to_items(rumimm.catalog([f["v1"] for f in files], blobs=[f["v1_blob"] for f in files]),
                         datetime=[T0 + dt.timedelta(hours=i) for i in range(len(files))])
    out = []
    for it, f in zip(base, files, strict=True):
        d = it.to_dict()
        d["id"] = d["id"] + "-cog"
        d["assets"] = {"data": {"href": f"{url}/{os.path.relpath(f['cog'], work)}",
                                "type": "image/tiff; application=geotiff; profile=cloud-optimized",
                                "roles": ["data"], "raster:bands": [{"data_type": "uint16"}] * BANDS}}
        d["properties"]["proj:shape"] = [size, size]
        out.append(pystac.Item.from_dict(d))
    return out


def draw_chips(n_files: int, size: int, n: int, seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(0, n_files, n), rng.integers(0, size - CHIP + 1, n),
                     rng.integers(0, size - CHIP + 1, n)], axis=1).tolist()


class Rumimm:
    def __init__(self, name: str, items: list):
        self.name, self.items, self.cube = name, items, None

    def first_chip(self) -> np.ndarray:
        from rumimm import stac

        self.cube = stac.load(self.items, output="cube", cache_bytes=0)
        return np.asarray(self.cube[0, :, :CHIP, :CHIP])

    def batch(self, chips: list[list[int]]) -> np.ndarray:
        images = self.cube.images
        return rumimm.read_batch([images[i] for i, _, _ in chips], np.asarray(chips)[:, 1:], size=(CHIP, CHIP))


class OdcStac:
    name = "odc-stac on COGs"

    def __init__(self, items: list):
        self.items, self.da = items, None

    def first_chip(self) -> np.ndarray:
        import odc.stac

        names = [f"data.{k + 1}" for k in range(BANDS)]  # odc-stac's names for the asset's raster:bands
        ds = odc.stac.load(self.items, bands=names, chunks={"x": TILE, "y": TILE}, groupby="id")
        self.da = ds[names].to_array("band").transpose("time", "band", "y", "x")
        return self.da.isel(time=0, x=slice(0, CHIP), y=slice(0, CHIP)).values

    def batch(self, chips: list[list[int]]) -> np.ndarray:
        import dask

        parts = [self.da.isel(time=i, y=slice(y, y + CHIP), x=slice(x, x + CHIP)).data for i, y, x in chips]
        (stack,) = dask.compute(parts)
        return np.stack(stack)


class StackStac:
    """stackstac in its own interpreter (``compare/stac_stackstac.py``), one request a line over a
    pipe; ``seconds`` is the time the worker measured around its call (the pipe and the arrays'
    hand-over through ``.npy`` files are not in it)."""

    name = "stackstac on COGs"

    def __init__(self, items: list, python: str, work: str):
        self.work, self.seconds, self.n = work, 0.0, 0
        path = os.path.join(work, "stackstac-items.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump([it.to_dict() for it in items], fh)
        self.proc = subprocess.Popen(module_command("asv_benchmarks.compare.stac_stackstac", python=python), cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self._ask({"op": "load", "items": path, "chip": CHIP, "tile": TILE})

    def _ask(self, req: dict) -> dict:
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the stackstac worker stopped (exit {self.proc.wait()}), see its error above")
        return json.loads(line)

    def _call(self, req: dict) -> np.ndarray:
        self.n += 1
        out = os.path.join(self.work, f"stackstac-{self.n}.npy")
        self.seconds = self._ask({**req, "out": out})["seconds"]
        try:
            return np.load(out)
        finally:
            os.remove(out)

    def first_chip(self) -> np.ndarray:
        return self._call({"op": "first"})

    def batch(self, chips: list[list[int]]) -> np.ndarray:
        return self._call({"op": "batch", "chips": chips})

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()


def timed(engine, method: str, *args):
    """``engine.method(*args)`` and its seconds: for an engine in another interpreter, the time it measured."""
    t = time.perf_counter()
    got = getattr(engine, method)(*args)
    elapsed = time.perf_counter() - t
    return got, (engine.seconds if isinstance(engine, StackStac) else elapsed)


def run(files, items: dict, server: Served, latency_ms: float, batches: int, seed: int,
        stackstac_python: str | None = None, work: str | None = None) -> dict:
    """Every engine's first chip and chips/s (the first batch checked pixel for pixel); with
    ``stackstac_python`` (and ``work``, a folder for its hand-over files), stackstac's row too."""
    engines: list = [Rumimm("rumimm.stac.load, spec 0.1 Items", items["v1"]),
                     Rumimm("rumimm.stac.load, spec 0.2 Items", items["v2"]), OdcStac(items["cog"])]
    if stackstac_python is not None:
        engines.append(StackStac(items["cog"], stackstac_python, work or tempfile.gettempdir()))
    try:
        return _run(engines, files, server, latency_ms, batches, seed)
    finally:
        for e in engines:
            if isinstance(e, StackStac):
                e.close()


def _run(engines: list, files, server: Served, latency_ms: float, batches: int, seed: int) -> dict:
    size = files[0]["array"].shape[1]
    # Imports and the JIT out of the timings, for every engine: odc-stac's and stackstac's imports
    # are, so are the modules rumimm.stac.load imports on first use (the client library, the cube).
    import obstore.store  # noqa: F401
    import odc.stac  # noqa: F401

    import rumimm.format.crs_identify
    import rumimm.reader.cube  # noqa: F401
    from rumimm.reader import engine

    engine.load()
    server.control(f"latency/{latency_ms:g}")
    out: dict = {}
    for e in engines:
        server.control("reset")
        chip, first = timed(e, "first_chip")
        stats = server.control("stats")
        if not np.array_equal(np.asarray(chip).reshape(BANDS, CHIP, CHIP), files[0]["array"][:, :CHIP, :CHIP]):
            raise AssertionError(f"{e.name}: wrong first chip")
        out[e.name] = {"first chip s": first, "requests to first chip": stats["requests"]}
    chips = draw_chips(len(files), size, BATCH * (batches + 1), seed)
    times: dict = {e.name: [] for e in engines}
    for b in range(batches + 1):
        batch = chips[b * BATCH:(b + 1) * BATCH]
        for e in engines[b % len(engines):] + engines[:b % len(engines)]:
            got, elapsed = timed(e, "batch", batch)
            if b == 0:
                check_chips(e.name, got, files, batch, CHIP)
                continue
            times[e.name].append(elapsed)
    for name, ts in times.items():
        out[name]["chips/s"] = batches * BATCH / sum(ts)
        out[name]["median batch s"] = statistics.median(ts)
    return out


def items_from_catalog(files: list[dict], n: int = 10_000) -> float:
    import pyarrow as pa

    from rumimm import stac

    table = rumimm.catalog([f["v1"] for f in files], blobs=[f["v1_blob"] for f in files])
    big = pa.concat_tables([table] * (n // table.num_rows + 1)).slice(0, n)
    ids = [f"i{k}" for k in range(n)]
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        stac.to_items(big, datetime=T0, ids=ids)
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=64)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--latency", type=float, default=20.0, help="ms before each answer")
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stackstac-python", default=STACKSTAC,
                    help="stackstac's interpreter (default: .venv-stackstac's, or $RUMIMM_STACKSTAC_PYTHON)")
    args = ap.parse_args(argv)
    for k, v in GDAL_ENV.items():
        os.environ.setdefault(k, v)
    stackstac_python, stackstac_versions = args.stackstac_python, None
    if os.path.isfile(stackstac_python):
        stackstac_versions = stackstac_versions_of(stackstac_python)
    else:
        print(f"stackstac: no interpreter at {stackstac_python}: run asv_benchmarks/compare/stackstac_venv.sh "
              "(makes .venv-stackstac) or pass --stackstac-python; the other rows follow")
        stackstac_python = None
    with tempfile.TemporaryDirectory(prefix="rumimm-stac-") as work:
        files = write_files(work, args.files, args.size)
        server = Served(work)
        try:
            items = {"v1": rumi_items(files, "v1", server.url, work), "v2": rumi_items(files, "v2", server.url, work),
                     "cog": cog_items(files, server.url, work)}
            res = run(files, items, server, args.latency, args.batches, args.seed, stackstac_python, work)
        finally:
            server.stop()
        build = items_from_catalog(files)
    print(f"{args.files} scenes of {BANDS} x {args.size} x {args.size} uint16, {args.latency:g} ms a request, "
          f"batches of {BATCH} chips of {CHIP} x {CHIP}")
    print(f"{'engine':40s} {'first chip s':>12s} {'requests':>9s} {'chips/s':>9s}")
    for name, r in res.items():
        print(f"{name:40s} {r['first chip s']:12.3f} {r['requests to first chip']:9d} {r['chips/s']:9.1f}")
    print(f"10,000 Items from a catalog table: {build:.2f} s")
    here = versions(["odc-stac", "rasterio", "dask", "pandas"])
    print("odc-stac row: " + ", ".join(f"{k} {v}" for k, v in here.items()))
    if stackstac_versions:
        print("stackstac row: " + ", ".join(f"{k} {v}" for k, v in stackstac_versions.items()))
    for peer in [n for n in res if not n.startswith("rumimm")]:
        for name in [n for n in res if n.startswith("rumimm")]:
            a, b = res[name], res[peer]
            print(f"{name} / {peer}: first chip {b['first chip s'] / a['first chip s']:.1f}x sooner, "
                  f"chips/s x{a['chips/s'] / b['chips/s']:.1f}")


def stackstac_versions_of(python: str) -> dict:
    """The versions ``compare/stac_stackstac.py`` reports in stackstac's interpreter."""
    proc = subprocess.run(module_command("asv_benchmarks.compare.stac_stackstac", "--versions", python=python),
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


if __name__ == "__main__":
    main()
