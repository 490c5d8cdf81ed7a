"""Training-loader comparison: random chips per second from rumimm and what users would pick instead.

Usage (from the repository root)::

    python -m asv_benchmarks.compare.loaders                # results in a scratch folder
    python -m asv_benchmarks.compare.loaders --publish      # also update docs/performance.md
    python -m asv_benchmarks.compare.loaders --torchgeo     # rumimm.torchgeo against TorchGeo's RasterDataset

What it does:

1. Writes ``--files`` (8) synthetic EO scenes (``rumimm.synthetic.eo_scene``, 4 x 2048 x
   2048 uint16, one seed each) as: rumimm files in 512-pixel tile frames (the default
   codec, which rumi-eo 0.16.0 also reads, so it reads the same files); tiled GeoTIFFs
   through rasterio/GDAL (512 x 512 blocks, ZSTD level 9, predictor 2); zarr-python 3
   arrays with (1, 512, 512) chunks, once with zarr's default codec and once with Blosc
   zstd + bitshuffle, plus Blosc at (1, 128, 128) chunks (like for like with rumimm's
   recommended tile); and rumimm files at tile 128/256/512 x unit tile/cell for the
   tile-size study.
2. Draws random 256 x 256 all-band chips uniformly over files (``rumimm.ChipDataset``
   with a seed) and cuts them into batches of 16: every engine reads the same chips.
3. Runs each (mode, round) in its own subprocess: modes are 1 thread, 2 threads (each
   engine's own setting), and 2 worker processes of 1 thread each (a fork pool reading
   batches, as a PyTorch DataLoader does).  Inside it every engine reads every batch, the
   engines taking turns batch by batch in rotating order, so a burst of load from
   elsewhere on a shared machine falls on all of them alike.  Each engine's first batch
   is an untimed warm-up, checked pixel for pixel.
4. Decode-only floor: taking its turn with the engines, the frames each chip of a batch
   touches are decoded with nothing else (the decode-only timer of ``engines.py``,
   ``decode_floor.floor_timer``: frames in memory, the GIL-free decoder, the same thread
   count).  Caches are off: rumimm's frame cache (``cache_bytes=0``) and GDAL's block cache
   at 16 MB (one chip's blocks).  With worker processes, batches stay in the workers (a
   DataLoader moves them through shared memory; a pipe would time the pipe).
5. Prints and saves a Markdown table, JSON and a PNG chart.

Engines read files hot in the OS page cache: this measures decoding, not disks.
Needs the ``bench`` extra (``pip install -e ".[bench]"``: rasterio, rumi-eo, zarr, matplotlib).

``--torchgeo`` (Python >= 3.12, the ``torchgeo`` extra) instead compares TorchGeo samples per
second: ``rumimm.torchgeo.RumiDataset`` over a catalog of the scenes (tile 512 and 128; with
``--codec``, also written with each preset in tile frames at 512 and 128 and cell frames at 128)
against TorchGeo's ``RasterDataset`` over GeoTIFFs of the same scenes (512 blocks, ZSTD 9,
predictor 2), with the same queries from one TorchGeo sampler, through a ``DataLoader``
(TorchGeo's ``stack_samples``; with ``--collate rumimm`` also rumimm's, for every row) in
process and with 2 forked workers.  Engines take turns epoch by
epoch in rotating order; before each timed epoch an engine's DataLoader starts with a few
untimed batches (worker start, kernels, open files), and with workers only that engine's
workers are alive, as in a training process.  Each engine's first batch is checked against
the GeoTIFF dataset's.
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

import numpy as np

import rumimm
from asv_benchmarks.compare.common import (
    DOCS,
    EPSG,
    ROOT,
    TRANSFORM,
    module_command,
    replace_section,
    thread_env,
    versions,
    write_geotiff,
)
from asv_benchmarks.compare.decode_floor import floor_timer

BANDS, SIZE, CHIP, BATCH = 4, 2048, 256, 16
MAIN = ("rumimm dataset (__getitems__)", "rumimm kept open (read_batch)", "rumimm opened per chip (blob)",
        "rumi-eo (rumi.read per chip)", "GDAL kept open", "GDAL opened per chip", "zarr default codec",
        "zarr blosc-zstd-bitshuffle", "zarr blosc-zstd-bitshuffle chunks 128")
TILES = tuple((t, u) for t in (128, 256, 512) for u in ("tile", "cell"))
MODES = ("1 thread", "2 threads", "2 workers")


def tile_engine(tile: int, unit: str) -> str:
    return f"rumimm tile {tile} {unit}"


def codec_engine(codec: str, tile: int) -> str:
    """The engine reading the files written with preset ``codec`` (``--codec``) at ``tile``, with read_batch."""
    return f"rumimm codec={codec} tile {tile} (read_batch)"


def codec_engines(codecs) -> list[str]:
    return [codec_engine(c, t) for c in codecs for t in CODEC_TILES]


CODEC_TILES = (512, 128)


# --------------------------------------------------------------------------- data


def write_files(work: str, n: int, size: int, *, skip_zarr: bool = False, codecs=()) -> dict:
    """Every engine's copy of ``n`` scenes; returns the spec the workers read.

    ``codecs``: presets (``rumimm.PRESETS``) of which rumimm files are written too, tile
    frames at each of ``CODEC_TILES``, for the ``codec=`` rows.
    """
    from rumimm.synthetic import eo_scene

    files = {"scenes": [], "tiles": {}, "gdal": [], "zarr": [], "zarr_blosc": [], "zarr_blosc_128": []}
    for i in range(n):
        arr = eo_scene(bands=BANDS, height=size, width=size, dtype="uint16", seed=i)
        npy = os.path.join(work, f"scene{i}.npy")
        np.save(npy, arr)
        files["scenes"].append(npy)
        for tile, unit in TILES:
            p = os.path.join(work, f"s{i}_t{tile}_{unit}.rumi")
            blob = rumimm.write(p, arr, tile=tile, unit=unit, transform=TRANSFORM, crs=EPSG)
            files["tiles"].setdefault(f"{tile} {unit}", []).append((p, blob.hex()))
        for codec in codecs:
            for tile in CODEC_TILES:
                p = os.path.join(work, f"s{i}_t{tile}_{codec}.rumi")
                blob = rumimm.write(p, arr, tile=tile, codec=codec, transform=TRANSFORM, crs=EPSG)
                files["tiles"].setdefault(f"{tile} tile codec={codec}", []).append((p, blob.hex()))
        g = os.path.join(work, f"s{i}.tif")
        write_geotiff(g, arr, 512)  # the single-file comparison's GeoTIFF: ZSTD 9, predictor 2, 512 blocks
        files["gdal"].append(g)
        if not skip_zarr:
            import zarr
            from zarr.codecs import BloscCodec

            blosc = {"compressors": BloscCodec(cname="zstd", clevel=5, shuffle="bitshuffle")}
            # the 128 chunks match rumimm's recommended tile for these chips: like for like
            for key, chunk, kw in (("zarr", 512, {}), ("zarr_blosc", 512, blosc), ("zarr_blosc_128", 128, blosc)):
                z = os.path.join(work, f"s{i}_{key}.zarr")
                za = zarr.create_array(store=z, shape=arr.shape, chunks=(1, chunk, chunk), dtype="uint16",
                                       overwrite=True, **kw)
                za[:] = arr
                files[key].append(z)
    return files


def _tree_size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def file_sizes(files: dict, raw: int) -> dict:
    out = {"rumimm (tile 512)": sum(_tree_size(p) for p, _ in files["tiles"]["512 tile"])}
    for key, label in (("gdal", "GeoTIFF ZSTD-9 pred 2"), ("zarr", "zarr default codec"),
                       ("zarr_blosc", "zarr blosc-zstd-bitshuffle"),
                       ("zarr_blosc_128", "zarr blosc-zstd-bitshuffle chunks 128")):
        if files[key]:
            out[label] = sum(_tree_size(p) for p in files[key])
    for tile, unit in TILES:
        out[f"rumimm tile {tile} {unit}"] = sum(_tree_size(p) for p, _ in files["tiles"][f"{tile} {unit}"])
    for key, written in files["tiles"].items():
        if "codec=" in key:
            tile, _, codec = key.split()
            out[codec_engine(codec.split("=", 1)[1], int(tile))] = sum(_tree_size(p) for p, _ in written)
    return {k: {"bytes": v, "ratio": v / raw} for k, v in out.items()}


def bytes_decoded(files: dict, chips: np.ndarray) -> dict:
    """Mean bytes decoded per chip (frames it touches) over the chip's own bytes, per tile size and unit."""
    out = {}
    per_chip = BANDS * CHIP * CHIP * 2
    for tile, unit in TILES:
        total = 0
        for _, y, x in chips:
            rows = (y + CHIP - 1) // tile - y // tile + 1
            cols = (x + CHIP - 1) // tile - x // tile + 1
            total += rows * cols * BANDS * tile * tile * 2  # every band's frames (tile) or the cells (cell)
        out[f"{tile} {unit}"] = total / len(chips) / per_chip
    return out


# --------------------------------------------------------------------------- workers


def _reader(engine: str, spec: dict, threads: int):
    """A function reading one batch (rows of (file, y0, x0)) into an (N, B, h, w) array."""
    if engine.startswith("rumimm"):
        rumimm.set_num_threads(threads)
        key = "512 tile"
        if engine.startswith("rumimm codec="):  # rumimm codec=NAME tile T (read_batch)
            _, codec, _, tile, _ = engine.split()
            paths = [p for p, _ in spec["files"]["tiles"][f"{tile} tile {codec}"]]
            blobs = [bytes.fromhex(b) for _, b in spec["files"]["tiles"][f"{tile} tile {codec}"]]
            images = [rumimm.open(p, header=b, cache_bytes=0) for p, b in zip(paths, blobs, strict=True)]
            return lambda rows: rumimm.read_batch([images[f] for f in rows[:, 0]], rows[:, 1:], size=(CHIP, CHIP))
        if engine.startswith("rumimm tile"):
            _, _, tile, unit = engine.split()
            key = f"{tile} {unit}"
        paths = [p for p, _ in spec["files"]["tiles"][key]]
        blobs = [bytes.fromhex(b) for _, b in spec["files"]["tiles"][key]]
        if engine == "rumimm opened per chip (blob)":
            def read(rows):
                out = np.empty((len(rows), BANDS, CHIP, CHIP), np.uint16)
                for i, (f, y, x) in enumerate(rows):
                    with rumimm.open(paths[f], header=blobs[f], cache_bytes=0) as img:
                        img.read(window=((y, y + CHIP), (x, x + CHIP)), out=out[i])
                return out
            return read
        if engine == "rumimm kept open (read_batch)":
            images = [rumimm.open(p, header=b, cache_bytes=0) for p, b in zip(paths, blobs, strict=True)]
            return lambda rows: rumimm.read_batch([images[f] for f in rows[:, 0]], rows[:, 1:], size=(CHIP, CHIP))
        ds = rumimm.ChipDataset(paths, CHIP, headers=blobs, n=0, cache_bytes=0)
        ds.chips = np.asarray(spec["chips"], np.int64)
        index = {tuple(r): i for i, r in enumerate(ds.chips.tolist())}
        return lambda rows: ds.__getitems__([index[tuple(r)] for r in rows.tolist()])
    if engine.startswith("rumi-eo"):
        import rumi

        rumi.set_num_threads(threads)
        paths = [p for p, _ in spec["files"]["tiles"]["512 tile"]]
        blobs = [bytes.fromhex(b) for _, b in spec["files"]["tiles"]["512 tile"]]

        def read(rows):
            return np.stack([rumi.read(paths[f], blobs[f], b=(0, BANDS), y=(y, y + CHIP), x=(x, x + CHIP),
                                       num_threads=threads) for f, y, x in rows])
        return read
    if engine.startswith("GDAL"):
        import rasterio
        from rasterio.windows import Window

        # a block cache big enough for one chip's blocks, too small to hold the files (as rumimm's cache is off)
        rasterio.Env(GDAL_NUM_THREADS=str(threads), GDAL_CACHEMAX=16).__enter__()
        paths = spec["files"]["gdal"]
        if engine == "GDAL kept open":
            handles = [rasterio.open(p) for p in paths]
            return lambda rows: np.stack([handles[f].read(window=Window(x, y, CHIP, CHIP)) for f, y, x in rows])

        def read(rows):
            out = []
            for f, y, x in rows:
                with rasterio.open(paths[f]) as ds:
                    out.append(ds.read(window=Window(x, y, CHIP, CHIP)))
            return np.stack(out)
        return read
    if engine.startswith("zarr"):
        import zarr

        zarr.config.set({"threading.max_workers": threads})
        key = "zarr_blosc_128" if "chunks 128" in engine else "zarr_blosc" if "blosc" in engine else "zarr"
        arrays = [zarr.open_array(p, mode="r") for p in spec["files"][key]]
        return lambda rows: np.stack([arrays[f][:, y:y + CHIP, x:x + CHIP] for f, y, x in rows])
    raise ValueError(f"unknown engine {engine!r}")


def _floor(spec: dict, threads: int):
    """Seconds to decode just the frames a batch touches (512 tile files), on ``threads`` threads.

    The same decode-only timer as the single-file comparison (``compare/engines.py``): each chip's
    frames, already in memory, decoded by the GIL-free batch decoder and nothing else.
    """
    from rumimm.format.blob import Header

    timers = [floor_timer(Header.parse(bytes.fromhex(b)), np.fromfile(p, np.uint8), threads)
              for p, b in spec["files"]["tiles"]["512 tile"]]

    def run(rows) -> float:
        return sum(timers[f]((0, BANDS, y, y + CHIP, x, x + CHIP)) for f, y, x in rows)

    return run


FLOOR = "decode floor"
_STATE: dict = {}


def _pool_init(engines, spec):
    _STATE["readers"] = {e: _reader(e, spec, 1) for e in engines}


def _pool_read(engine, rows, keep=False):
    """Read a batch in a worker; timed batches are not sent back (a DataLoader passes them in shared memory)."""
    got = _STATE["readers"][engine](np.asarray(rows, np.int64))
    return got if keep else None


def chips_per_s(res: dict) -> float | None:
    """A run's chips per second; None when it timed nothing (no batch after the warm-up)."""
    return res["chips"] / res["seconds"] if res["chips"] and res["seconds"] > 0 else None


def _text(value: float | None, spec: str = ".0f", unit: str = "") -> str:
    """A table cell: ``value`` formatted, or n/a for a rate or ratio of nothing timed."""
    return "n/a" if value is None else format(value, spec) + unit


def _rotated(engines, k: int) -> list:
    k %= len(engines)
    return engines[k:] + engines[:k]


def run_mode(mode: str, engines: list, spec: dict) -> dict:
    """Every engine in this process, interleaved batch by batch in rotating order.

    Returns {engine: {"seconds", "chips", "exact"}}; a burst of load from elsewhere on the
    machine then falls on all engines alike, which separate processes per engine cannot
    promise on a shared machine.
    """
    chips = np.asarray(spec["chips"], np.int64)
    batches = [chips[i:i + BATCH] for i in range(0, len(chips), BATCH)]
    scenes = [np.load(p, mmap_mode="r") for p in spec["files"]["scenes"]]
    out = {e: {"seconds": 0.0, "chips": 0, "exact": True} for e in engines}

    def check(engine, rows, got):
        want = np.stack([scenes[f][:, y:y + CHIP, x:x + CHIP] for f, y, x in rows])
        out[engine]["exact"] = bool(np.array_equal(np.asarray(got), want))

    if mode == "2 workers":
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(2, _pool_init, (engines, spec)) as pool:
            for e in engines:
                check(e, batches[0], pool.apply(_pool_read, (e, batches[0], True)))
                pool.starmap(_pool_read, [(e, batches[0]), (e, batches[0])], chunksize=1)  # both workers warm
            for k in range(1, len(batches), 2):
                step = batches[k:k + 2]  # one batch a worker; after an odd count the last one has none
                for e in _rotated(engines, k // 2):
                    t0 = time.perf_counter()
                    pool.starmap(_pool_read, [(e, rows) for rows in step], chunksize=1)
                    out[e]["seconds"] += time.perf_counter() - t0
                    out[e]["chips"] += len(step) * BATCH
        return out
    threads = 1 if mode == "1 thread" else 2
    readers = {e: _reader(e, spec, threads) for e in engines}
    floor = _floor(spec, threads)
    order = [*engines, FLOOR]
    out[FLOOR] = {"seconds": 0.0, "chips": 0, "exact": True}
    for e in engines:
        check(e, batches[0], readers[e](batches[0]))
    floor(batches[0])
    for k, rows in enumerate(batches[1:]):
        for e in _rotated(order, k):
            t0 = time.perf_counter()
            if e == FLOOR:
                dt = floor(rows)
            else:
                readers[e](rows)
                dt = time.perf_counter() - t0
            out[e]["seconds"] += dt
            out[e]["chips"] += BATCH
    return out


# --------------------------------------------------------------------------- TorchGeo

TG_ENGINES = ("rumimm.torchgeo, tile 512", "rumimm.torchgeo, tile 128", "TorchGeo RasterDataset (GeoTIFF)")
TG_SAMPLERS = ("RandomBatchGeoSampler", "RandomGeoSampler")
TG_MODES = ("in process", "2 workers")
#: a row name's ending when its DataLoader collates with rumimm.torchgeo.stack_samples, not TorchGeo's
RUMI_COLLATE = ", rumimm stack_samples"


#: (tile, unit) of the TorchGeo comparison's codec= rows: tile frames at 512 and 128, and cell frames (every
#: band of a tile in one frame) at 128, which decode the same bytes as tile frames in a quarter as many frames
TG_CODEC_LAYOUTS = ((512, "tile"), (128, "tile"), (128, "cell"))


def _tg_rumi_engine(tile: int, unit: str = "tile", codec: str | None = None) -> str:
    return (f"rumimm.torchgeo, tile {tile}{'' if unit == 'tile' else ' ' + unit}"
            + ("" if codec is None else f", codec={codec}"))


def tg_engines(codecs=(), collates=("torchgeo",)) -> list[str]:
    """The TorchGeo rows: rumimm.torchgeo at tile 512 and 128 (default codec), then each of ``codecs`` at every
    ``TG_CODEC_LAYOUTS``, GeoTIFF last; all of them again for each collate function in ``collates``
    ("torchgeo", "rumimm")."""
    rows = [*TG_ENGINES[:2], *(_tg_rumi_engine(t, u, c) for c in codecs for t, u in TG_CODEC_LAYOUTS),
            TG_ENGINES[-1]]
    return [row + ("" if c == "torchgeo" else RUMI_COLLATE) for c in collates for row in rows]


def _tg_collate(engine: str):
    """The DataLoader's collate_fn of a row: TorchGeo's stack_samples, or rumimm's where the row says so."""
    if engine.endswith(RUMI_COLLATE):
        from rumimm.torchgeo import stack_samples
    else:
        from torchgeo.datasets import stack_samples
    return stack_samples


def _tg_tag(tile: int, unit: str, codec: str | None) -> str:
    """The file-name part of a layout and preset: t128, t128cell_fast, ..."""
    return f"t{tile}{'' if unit == 'tile' else unit}{'' if codec is None else '_' + codec}"


def write_torchgeo_files(work: str, n: int, size: int, codecs=()) -> dict:
    """The scenes as rumi (tile 512 and 128, catalogs of both; again per preset in ``codecs`` at every
    ``TG_CODEC_LAYOUTS``) and as GeoTIFFs in a folder of their own."""
    from rumimm.synthetic import eo_scene

    os.makedirs(os.path.join(work, "tif"), exist_ok=True)
    out = {"catalogs": {}, "tif": os.path.join(work, "tif")}
    written: dict = {(t, "tile", None): ([], []) for t in (512, 128)}
    written.update({(t, u, c): ([], []) for c in codecs for t, u in TG_CODEC_LAYOUTS})
    for i in range(n):
        arr = eo_scene(bands=BANDS, height=size, width=size, dtype="uint16", seed=i)
        a, b, c, d, e, f = TRANSFORM
        transform = (a, b, c + i * size * a, d, e, f)  # scenes side by side: the index has one per place
        for (tile, unit, codec), (paths, blobs) in written.items():
            path = os.path.join(work, f"s{i}_{_tg_tag(tile, unit, codec)}.rumi")
            blobs.append(rumimm.write(path, arr, tile=tile, unit=unit, codec=codec, transform=transform, crs=EPSG))
            paths.append(path)
        _write_shifted_geotiff(os.path.join(work, "tif", f"s{i}.tif"), arr, transform)
    for (tile, unit, codec), (paths, blobs) in written.items():
        cat = os.path.join(work, f"catalog_{_tg_tag(tile, unit, codec)}.parquet")
        rumimm.write_catalog(rumimm.catalog(paths, blobs=blobs), cat)
        out["catalogs"][_tg_rumi_engine(tile, unit, codec)] = cat
    return out


def _write_shifted_geotiff(path: str, arr: np.ndarray, transform) -> None:
    """``write_geotiff``'s profile (512 blocks, ZSTD 9, predictor 2) at another transform."""
    import rasterio
    from rasterio.transform import Affine

    b, y, x = arr.shape
    with rasterio.open(path, "w", driver="GTiff", width=x, height=y, count=b, dtype=arr.dtype.name,
                       crs=f"EPSG:{EPSG}", transform=Affine(*transform), tiled=True, blockxsize=512,
                       blockysize=512, compress="zstd", zstd_level=9, predictor=2) as ds:
        ds.write(arr)


def _tg_dataset(engine: str, spec: dict):
    engine = engine.removesuffix(RUMI_COLLATE)
    if engine.startswith("rumimm"):
        from rumimm.torchgeo import RumiDataset

        return RumiDataset(spec["catalogs"][engine], cache_bytes=0)
    from torchgeo.datasets import RasterDataset

    class GeoTiffs(RasterDataset):
        filename_glob = "s*.tif"

    return GeoTiffs(paths=spec["tif"], cache=True)  # file handles kept open, as TorchGeo does by default


def _tg_batches(spec: dict, sampler: str, n_batches: int, seed: int) -> list:
    """Lists of GeoSlices from one TorchGeo sampler over the rumi dataset (same footprints as the GeoTIFFs)."""
    import warnings

    import torch
    from torchgeo.samplers import RandomBatchGeoSampler, RandomGeoSampler

    ds = _tg_dataset(TG_ENGINES[0], spec)
    torch.manual_seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TorchGeo 0.10 deprecates both samplers
        if sampler == "RandomBatchGeoSampler":
            batches = list(RandomBatchGeoSampler(ds, size=CHIP, batch_size=BATCH, length=BATCH * n_batches))
        else:
            queries = list(RandomGeoSampler(ds, size=CHIP, length=BATCH * n_batches))
            batches = [queries[i:i + BATCH] for i in range(0, len(queries), BATCH)]
    return batches


#: untimed batches that start an engine's DataLoader (worker processes, kernels, open files) before each timed epoch
TG_WARMUP = 3


class _Batches:
    """A DataLoader's batch sampler whose batches can be swapped between epochs (warm-up, then timed)."""

    def __init__(self, batches):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def _tg_first_batch(engine: str, spec: dict, queries):
    """The images of one batch of ``queries``, read in this process by a dataset made for it."""
    ds = _tg_dataset(engine, spec)
    samples = ds.__getitems__(queries) if hasattr(ds, "__getitems__") else [ds[q] for q in queries]
    return _tg_collate(engine)(samples)["image"]


def run_torchgeo(mode: str, sampler: str, spec: dict) -> dict:
    """Every TorchGeo engine over the same batches, epochs interleaved in rotating order.

    First every engine reads the first batch in this process (rumimm's kernels load here, so
    forked workers start with them); that batch, and the same batch through the engine's
    DataLoader, must equal the GeoTIFF dataset's.  With workers,
    one engine's DataLoader is alive at a time, as in a training process: it starts
    (``TG_WARMUP`` untimed batches: workers fork, files open), runs the timed epoch and shuts
    its workers down.  Keeping every engine's workers alive at once (two dozen processes,
    each with its copy-on-write share of the parent's heap) slowed whichever engine ran next
    by up to a third on the 2-core machine.
    """
    import torch
    from torch.utils.data import DataLoader
    batches = _tg_batches(spec, sampler, spec["batches"], spec["seed"])
    workers = 2 if mode == "2 workers" else 0
    kw = {"num_workers": workers, "persistent_workers": True, "multiprocessing_context": "fork"} if workers else {}
    engines = spec["engines"]
    datasets = {e: _tg_dataset(e, spec) for e in engines}
    out = {e: {"seconds": [], "samples": len(batches) * BATCH, "exact": True} for e in engines}
    first = {e: _tg_first_batch(e, spec, batches[0]) for e in engines}  # datasets of their own: nothing to fork
    loaded = {}  # the same batch through each engine's DataLoader
    for r in range(spec["epochs"]):
        for e in _rotated(list(engines), r):
            order = _Batches(batches[:TG_WARMUP])
            loader = DataLoader(datasets[e], batch_sampler=order, collate_fn=_tg_collate(e), **kw)
            for k, batch in enumerate(loader):  # untimed: the loader starts
                if k == 0 and r == 0:
                    loaded[e] = batch["image"]
            order.batches = batches
            t0 = time.perf_counter()
            for _ in loader:
                pass
            out[e]["seconds"].append(time.perf_counter() - t0)
            if workers:  # now, not whenever the garbage collector gets to it
                loader._iterator._shutdown_workers()
            del loader
    reference = first[engines[-1]]
    for e in engines:
        out[e]["exact"] = bool(torch.equal(first[e], reference) and torch.equal(loaded[e], reference))
    return out


def _work_files(args, prefix: str, spec_name: str, write) -> tuple[str, str, dict]:
    """The work folder, the spec's path in it and the files: an earlier run's with ``--reuse``, else
    ``write(work)``'s."""
    work = args.workdir or tempfile.mkdtemp(prefix=prefix)
    os.makedirs(work, exist_ok=True)
    spec_path = os.path.join(work, spec_name)
    if args.reuse and os.path.exists(spec_path):
        with open(spec_path) as f:
            return work, spec_path, json.load(f)["files"]
    print(f"writing {args.files} scenes to {work}", file=sys.stderr)
    return work, spec_path, write(work)


def measure_torchgeo(args) -> dict:
    work, spec_path, files = _work_files(args, "rumimm-torchgeo-", "torchgeo-spec.json",
                                         lambda work: write_torchgeo_files(work, args.files, args.size, args.codec))
    spec = dict(files, files=files, batches=args.batches, epochs=args.rounds, seed=args.seed,
                engines=tg_engines(args.codec, args.collate))
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    samples = {}
    for sampler in TG_SAMPLERS:
        for mode in TG_MODES:
            env = thread_env(1 if mode == "2 workers" else 2)
            cmd = module_command(__spec__.name, "--torchgeo-worker", mode, sampler, spec_path)
            got = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
            if got.returncode:
                raise RuntimeError(f"{sampler} {mode} failed:\n{got.stderr[-3000:]}")
            for engine, res in json.loads(got.stdout.strip().splitlines()[-1]).items():
                samples[f"{engine}|{sampler}|{mode}"] = res
                rates = [res["samples"] / s for s in res["seconds"]]
                print(f"{engine:34s} {sampler:22s} {mode:10s} {statistics.median(rates):8.1f} samples/s"
                      f"{'' if res['exact'] else '  NOT EXACT'}", file=sys.stderr)
    return {"samples": samples, "config": {"workdir": work, "files": args.files, "size": args.size, "chip": CHIP,
                                           "batch": BATCH, "batches": args.batches, "epochs": args.rounds,
                                           "cpus": os.cpu_count(), "engines": spec["engines"],
                                           "versions": _versions()}}


def build_torchgeo_table(results: dict) -> str:
    """Median samples/s per engine, sampler and mode, and each rumi row over the GeoTIFF row of its column."""
    rate = {}
    for key, res in results["samples"].items():
        rate[key] = statistics.median(res["samples"] / s for s in res["seconds"])
    cols = [(s, m) for s in TG_SAMPLERS for m in TG_MODES]
    lines = ["| engine | " + " | ".join(f"{s}, {m}" for s, m in cols) + " |", "|---|" + "---:|" * len(cols)]
    engines = results.get("config", {}).get("engines", TG_ENGINES)
    for e in engines:
        base = TG_ENGINES[-1] + (RUMI_COLLATE if e.endswith(RUMI_COLLATE) else "")  # same collate function
        cells = []
        for s, m in cols:
            value = rate[f"{e}|{s}|{m}"]
            exact = results["samples"][f"{e}|{s}|{m}"]["exact"]
            ratio = "" if e == base else f" ({value / rate[f'{base}|{s}|{m}']:.1f}x)"
            cells.append(f"{value:.0f}{ratio}{'' if exact else ' NOT EXACT'}")
        lines.append(f"| {e} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- driver


def _spawn(mode: str, engines: list, spec_path: str) -> dict:
    env = thread_env(2 if mode == "2 threads" else 1)
    cmd = module_command(__spec__.name, "--worker", mode, ",".join(engines), spec_path)
    got = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    if got.returncode:
        raise RuntimeError(f"{mode} failed:\n{got.stderr[-3000:]}")
    return json.loads(got.stdout.strip().splitlines()[-1])


def measure(args) -> dict:
    work, spec_path, files = _work_files(
        args, "rumimm-loaders-", "spec.json",
        lambda work: write_files(work, args.files, args.size, skip_zarr=args.skip_zarr, codecs=args.codec))
    paths = [p for p, _ in files["tiles"]["512 tile"]]
    blobs = [bytes.fromhex(b) for _, b in files["tiles"]["512 tile"]]
    n = BATCH * (args.batches + 1)
    chips = rumimm.ChipDataset(paths, CHIP, headers=blobs, n=n, seed=args.seed).chips
    spec = {"files": files, "chips": chips.tolist()}
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    engines = [e for e in MAIN if not (args.skip_zarr and e.startswith("zarr"))] + codec_engines(args.codec)
    study = [tile_engine(t, u) for t, u in TILES if (t, u) != (512, "tile")]
    samples: dict = {}
    for r in range(args.rounds):
        for mode in MODES:
            # in 2 workers, the recommended tile only (the whole study at 1 and 2 threads)
            got = _spawn(mode, engines + (study if mode != "2 workers" else [tile_engine(128, "tile")]), spec_path)
            for engine, res in got.items():
                samples.setdefault(f"{engine}|{mode}", []).append(res)
                print(f"round {r + 1}: {engine:34s} {mode:10s} {_text(chips_per_s(res), '.1f'):>8} chips/s"
                      f"{'' if res['exact'] else '  NOT EXACT'}", file=sys.stderr)
    for mode in MODES[:2]:  # the dataset's floor, paired with it run by run
        for res, fl in zip(samples[f"{MAIN[0]}|{mode}"], samples.pop(f"{FLOOR}|{mode}"), strict=True):
            res["floor_seconds"] = fl["seconds"]
    raw = args.files * BANDS * args.size * args.size * 2
    return {"samples": samples, "sizes": file_sizes(files, raw), "decoded": bytes_decoded(files, chips),
            "config": {"workdir": work, "files": args.files, "size": args.size, "chip": CHIP, "batch": BATCH,
                       "batches": args.batches, "rounds": args.rounds, "cpus": os.cpu_count(),
                       "codecs": list(args.codec), "versions": _versions()}}


def _versions() -> dict:
    """The versions of the engines' packages that are installed."""
    found = versions(("rumimm", "rumi-eo", "rasterio", "zarr", "numcodecs", "numpy", "torch", "torchgeo"))
    return {name: v for name, v in found.items() if v is not None}


def summarize(results: dict) -> dict:
    """Per engine and mode: median chips/s over rounds, exactness, floor ratio (None where nothing was timed)."""
    table: dict = {}
    for key, runs in results["samples"].items():
        engine, mode = key.split("|")
        rates = [rate for rate in map(chips_per_s, runs) if rate is not None]
        row = table.setdefault(engine, {})
        row[mode] = {"chips_per_s": statistics.median(rates) if rates else None,
                     "exact": all(r["exact"] for r in runs)}
        if "floor_seconds" in runs[0]:
            ratios = [r["seconds"] / r["floor_seconds"] for r in runs if r["floor_seconds"] > 0]
            row[mode]["read_over_floor"] = statistics.median(ratios) if ratios else None
    return table


def build_table(results: dict) -> str:
    table = summarize(results)
    sizes = results["sizes"]
    size_of = {"rumimm": "rumimm (tile 512)", "rumi-eo": "rumimm (tile 512)", "GDAL": "GeoTIFF ZSTD-9 pred 2",
               "zarr default codec": "zarr default codec",
               "zarr blosc-zstd-bitshuffle chunks 128": "zarr blosc-zstd-bitshuffle chunks 128",
               "zarr blosc-zstd-bitshuffle": "zarr blosc-zstd-bitshuffle"}
    lines = ["| engine | " + " | ".join(f"chips/s, {m}" for m in MODES) + " | size / raw |",
             "|---|" + "---:|" * (len(MODES) + 1)]
    codecs = results.get("config", {}).get("codecs", [])
    for engine in [*MAIN, *codec_engines(codecs), *(tile_engine(t, u) for t, u in TILES if (t, u) != (512, "tile"))]:
        if engine not in table:
            continue
        key = next((k for k in size_of if engine.startswith(k)), None)
        if engine.startswith(("rumimm tile", "rumimm codec=")):
            key = engine
            size = sizes[engine]["ratio"]
        else:
            size = sizes[size_of[key]]["ratio"]
        cells = [_text(table[engine][m]["chips_per_s"]) if m in table[engine] else "-" for m in MODES]
        lines.append(f"| {engine} | " + " | ".join(cells) + f" | {size:.3f} |")
    floor = table[MAIN[0]]
    lines.append("")
    lines.append("Dataset read time over the decode-only time of the frames its batches touch: "
                 + ", ".join(f"{m} {_text(floor[m]['read_over_floor'], '.2f', 'x')}" for m in MODES[:2]) + ".")
    lines.append("")
    lines.append("| tile, unit | bytes decoded per byte returned | chips/s, 1 thread | chips/s, 2 threads |")
    lines.append("|---|---:|---:|---:|")
    for tile, unit in TILES:
        eng = MAIN[0] if (tile, unit) == (512, "tile") else tile_engine(tile, unit)
        lines.append(f"| {tile} {unit} | {results['decoded'][f'{tile} {unit}']:.2f} | "
                     f"{_text(table[eng]['1 thread']['chips_per_s'])} | "
                     f"{_text(table[eng]['2 threads']['chips_per_s'])} |")
    return "\n".join(lines)


def save_chart(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = summarize(results)
    engines = [e for e in (*MAIN, tile_engine(128, "tile")) if e in table]  # and the recommended tile for these chips
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.27
    ys = np.arange(len(engines))
    for j, mode in enumerate(MODES):
        ax.barh(ys + (j - 1) * width, [table[e].get(mode, {}).get("chips_per_s") or 0 for e in engines], width,
                label=mode)
    ax.set_yticks(ys, engines)
    ax.invert_yaxis()
    ax.set_xlabel("256 x 256 x 4-band uint16 chips per second (higher is better)")
    ax.set_title(f"Random chips from {results['config']['files']} files, batches of {BATCH}")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


_BEGIN = "<!-- loaders:begin (asv_benchmarks/compare/loaders.py --publish) -->"
_END = "<!-- loaders:end -->"


def publish(results: dict, table: str) -> None:
    """Write docs/loaders.json, docs/loaders.png and the table into docs/performance.md."""
    _publish(results, table, "loaders.json", _BEGIN, _END)
    save_chart(results, os.path.join(DOCS, "loaders.png"))


_TG_BEGIN = "<!-- torchgeo:begin (asv_benchmarks/compare/loaders.py --torchgeo --publish) -->"
_TG_END = "<!-- torchgeo:end -->"


def publish_torchgeo(results: dict, table: str) -> None:
    """Write docs/loaders-torchgeo.json and the table into docs/performance.md."""
    _publish(results, table, "loaders-torchgeo.json", _TG_BEGIN, _TG_END)


def _publish(results: dict, table: str, json_name: str, begin: str, end: str) -> None:
    """Save the results as docs/``json_name`` (no local paths) and put ``table`` between the page's markers."""
    shared = dict(results, config={k: v for k, v in results["config"].items() if k != "workdir"})
    with open(os.path.join(DOCS, json_name), "w") as f:
        json.dump(shared, f, indent=1)
    replace_section(os.path.join(DOCS, "performance.md"), begin, end, table)

def _save_json(results: dict, out: str | None, name: str) -> str:
    """Save ``results`` as ``name`` in ``out`` (default: the run's work folder); return the folder."""
    out = out or results["config"]["workdir"]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name), "w") as f:
        json.dump(results, f, indent=1)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--size", type=int, default=SIZE)
    p.add_argument("--batches", type=int, default=24, help="timed batches of 16 per engine and round (plus a warm-up)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", help="where to write the files (default: a new temporary folder)")
    p.add_argument("--out", help="where to save table, JSON and chart (default: the work folder)")
    p.add_argument("--skip-zarr", action="store_true")
    p.add_argument("--reuse", action="store_true", help="reuse the files of an earlier run in --workdir")
    p.add_argument("--publish", action="store_true", help="update docs/performance.md, loaders.png, loaders.json")
    p.add_argument("--torchgeo", action="store_true", help="compare rumimm.torchgeo with TorchGeo's RasterDataset")
    p.add_argument("--codec", nargs="*", default=[], metavar="PRESET",
                   help="also write rumimm files with these presets (tile 512 and 128) and read them (codec= rows)")
    p.add_argument("--collate", nargs="+", default=["torchgeo"], choices=["torchgeo", "rumimm"],
                   help="--torchgeo: the DataLoader's collate_fn, TorchGeo's stack_samples and/or rumimm.torchgeo's "
                        "(every row once per choice, each rumi row against the GeoTIFF row of its collate)")
    p.add_argument("--worker", nargs=3, metavar=("MODE", "ENGINES", "SPEC"), help=argparse.SUPPRESS)
    p.add_argument("--torchgeo-worker", nargs=3, metavar=("MODE", "SAMPLER", "SPEC"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.torchgeo_worker:
        mode, sampler, spec_path = args.torchgeo_worker
        with open(spec_path) as f:
            spec = json.load(f)
        print(json.dumps(run_torchgeo(mode, sampler, spec)))
        return 0
    if args.torchgeo:
        results = measure_torchgeo(args)
        table = build_torchgeo_table(results)
        _save_json(results, args.out, "torchgeo.json")
        print(table)
        if args.publish:
            publish_torchgeo(results, table)
        return 0
    if args.worker:
        mode, engines, spec_path = args.worker
        with open(spec_path) as f:
            spec = json.load(f)
        print(json.dumps(run_mode(mode, engines.split(","), spec)))
        return 0
    results = measure(args)
    table = build_table(results)
    out = _save_json(results, args.out, "loaders.json")
    with open(os.path.join(out, "loaders-table.md"), "w") as f:
        f.write(table + "\n")
    save_chart(results, os.path.join(out, "loaders.png"))
    print(table)
    if args.publish:
        publish(results, table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
