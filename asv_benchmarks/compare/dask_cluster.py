"""Side-by-side: rumimm on a Dask cluster against rumimm in one process and zarr 3 on the same cluster.

Usage (from the repository root)::

    python -m asv_benchmarks.compare.dask_cluster              # 4 x 8192 x 8192 uint16 (512 MiB), 16 GeoTIFFs
    python -m asv_benchmarks.compare.dask_cluster --size 4096 --json out.json

One deterministic EO-like scene (``rumimm.synthetic.eo_scene``, uint16, 512-pixel tile
frames, the default codec), one ``LocalCluster`` of 2 worker processes with 1 thread each,
one warm-up run of every case (imports, kernel loads and first opens are not timed), then
``--repeat`` interleaved rounds of all cases, so a noisy machine affects every case alike;
the run of median time is reported.

Reads (a full-image sum or mean):
  in-process ``rumimm.open(p)[:].sum()``; ``rumimm.to_dask(p).sum()`` with default chunks on
  the threaded scheduler and on the cluster; xarray ``open_dataset(p, engine="rumimm",
  chunks={})`` mean on the cluster; ``da.from_zarr`` of the same array in zarr 3 (zstd) with
  zarr's default chunks and with 1 x 512 x 512 chunks, on the cluster.
Writes (of ``to_dask(src) + 1``): ``rumimm.write`` and ``to_zarr`` on the cluster, and
  ``rumimm.write`` of the same values as a numpy array in this process.  Each cluster write
  runs twice: with the array persisted on the workers beforehand (the goal rows: the data is
  in the workers' memory as the numpy array is in this process's) and with the array computed
  by the write itself (its tasks also decode the source and add, which the numpy write does
  not; context).
Bulk conversion: ``rumimm.convert_many`` of ``--files`` GeoTIFFs (tiled, ZSTD) in this process
  (``jobs=1``: a file at a time, each compressed on every core) and on the cluster (a file a
  worker, each on one thread); and, for context, the same files one after another on one
  thread (``threads=1``, as each cluster task runs), which is what the cluster's workers
  divide between them.

For the cluster runs it also reports where the time goes, from Dask's task stream: task
compute seconds (decode and encode), seconds moving data between processes, and the rest of
the wall time (scheduling, the client's share: for a write, appending frames to the file).
Needs the ``bench`` extra (dask, distributed, zarr, rasterio).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

import numpy as np

import rumimm
from asv_benchmarks.compare.common import EPSG, TRANSFORM, write_geotiff
from rumimm.synthetic import eo_scene


def _stream_split(stream: list[dict], wall: float, workers: int) -> dict:
    """Task-stream seconds: compute and transfer summed over workers, and the wall time not spent in either."""
    compute = sum(s["stop"] - s["start"] for t in stream for s in t["startstops"] if s["action"] == "compute")
    transfer = sum(s["stop"] - s["start"] for t in stream for s in t["startstops"] if s["action"] == "transfer")
    return {"tasks": len(stream), "compute_s": compute, "transfer_s": transfer,
            "other_s": max(0.0, wall - (compute + transfer) / workers)}


def _once(fn, client, workers: int) -> dict:
    """One timed run; on the cluster also the task-stream split of its wall time."""
    if client is None:
        t = time.perf_counter()
        fn()
        return {"seconds": time.perf_counter() - t}
    from distributed import get_task_stream

    with get_task_stream(client) as ts:
        t = time.perf_counter()
        fn()
        wall = time.perf_counter() - t
    return {"seconds": wall, **_stream_split(ts.data, wall, workers)}


def _rounds(cases: list[tuple[str, Any, Any]], repeat: int, workers: int = 2) -> dict:
    """Every case once to warm up, then ``repeat`` interleaved rounds; the run of median time per case."""
    for _, fn, _client in cases:
        fn()  # imports, kernel loads, first opens, the cluster's first tasks
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in cases}
    for _ in range(repeat):
        for name, fn, client in cases:
            runs[name].append(_once(fn, client, workers))
    out = {}
    for name, results in runs.items():
        ordered = sorted(results, key=lambda r: r["seconds"])
        out[name] = {**ordered[len(ordered) // 2], "runs": [r["seconds"] for r in results]}
    return out


def run(size: int, bands: int, tile: int, files: int, bulk_size: int, repeat: int, folder: str) -> dict:
    import dask
    import dask.array as da
    import xarray as xr
    import zarr
    from dask.distributed import Client, LocalCluster, wait

    res: dict[str, Any] = {"shape": [bands, size, size], "tile": tile, "load_before": os.getloadavg()}
    a = eo_scene(bands, size, size, "uint16", seed=1)
    src = os.path.join(folder, "src.rumi")
    blob = rumimm.write(src, a, tile=tile, transform=TRANSFORM, crs=EPSG)
    plus = a + np.uint16(1)
    z_default = os.path.join(folder, "default.zarr")
    z_512 = os.path.join(folder, "c512.zarr")
    zarr.save_array(z_default, a, zarr_format=3)
    zarr.create_array(z_512, shape=a.shape, dtype=a.dtype, chunks=(1, 512, 512))[:] = a
    res["zarr_default_chunks"] = list(zarr.open_array(z_default).chunks)
    tifs = []
    for i in range(files):
        path = os.path.join(folder, f"g{i:02d}.tif")
        write_geotiff(path, eo_scene(bands, bulk_size, bulk_size, "uint16", seed=100 + i), tile)
        tifs.append(path)
    bulk_local = os.path.join(folder, "bulk_local")
    bulk_dask = os.path.join(folder, "bulk_dask")
    bulk_serial = os.path.join(folder, "bulk_serial")

    def bulk(folder_out, client):
        shutil.rmtree(folder_out, ignore_errors=True)
        os.mkdir(folder_out)
        assert not rumimm.convert_many(tifs, folder_out, tile=tile, jobs=1, client=client).errors

    def bulk_one_thread():  # convert_many's task per file, as a cluster worker runs it: threads=1
        from rumimm.integrations.bulk import convert_one

        shutil.rmtree(bulk_serial, ignore_errors=True)
        os.mkdir(bulk_serial)
        for path in tifs:
            dst = os.path.join(bulk_serial, os.path.basename(path)[:-4] + ".rumi")
            convert_one(path, dst, {"tile": tile, "unit": "tile", "threads": 1})

    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                      silence_logs=50) as cluster, Client(cluster) as client:
        res["default_chunks"] = [c[0] for c in rumimm.to_dask(src, blob).chunks]
        res["default_tasks"] = rumimm.to_dask(src, blob).npartitions

        def xr_mean():
            with xr.open_dataset(src, engine="rumimm", header=blob, chunks={}) as ds:
                ds["band_data"].mean().compute()

        def big_chunks():
            with dask.config.set({"rumimm.chunk-size": "128MiB"}):
                arr = rumimm.to_dask(src, blob)
            arr.sum().compute()

        def rumi_write():
            rumimm.write(os.path.join(folder, "w_dask.rumi"), rumimm.to_dask(src, blob) + np.uint16(1), tile=tile)

        def zarr_write():
            (rumimm.to_dask(src, blob) + np.uint16(1)).to_zarr(os.path.join(folder, "w.zarr"), overwrite=True)

        # The same values already computed and held by the workers (``persist``), as the numpy array is
        # already in this process's memory: the write alone, encode and assembly, on both sides.  Built by
        # map_blocks, so its keys differ from ``to_dask(src) + 1``'s and the "source computed" rows compute.
        resident = rumimm.to_dask(src, blob).map_blocks(np.add, np.uint16(1), dtype=np.uint16).persist()
        wait(resident)

        def rumi_write_resident():
            rumimm.write(os.path.join(folder, "w_res.rumi"), resident, tile=tile)

        def zarr_write_resident():
            resident.to_zarr(os.path.join(folder, "w_res.zarr"), overwrite=True)

        cases = _rounds([
            ("read in-process", lambda: rumimm.open(src, blob)[:].sum(), None),
            ("read to_dask threads", lambda: rumimm.to_dask(src, blob).sum().compute(scheduler="threads"), None),
            ("read to_dask cluster", lambda: rumimm.to_dask(src, blob).sum().compute(), client),
            ("read to_dask cluster, 128 MiB chunks", big_chunks, client),
            ("read xarray chunks={} cluster", xr_mean, client),
            ("read zarr default chunks cluster", lambda: da.from_zarr(z_default).sum().compute(), client),
            ("read zarr 512 chunks cluster", lambda: da.from_zarr(z_512).sum().compute(), client),
            ("write numpy in-process", lambda: rumimm.write(os.path.join(folder, "w_np.rumi"), plus, tile=tile),
             None),
            ("write rumimm cluster, source on the workers", rumi_write_resident, client),
            ("write to_zarr cluster, source on the workers", zarr_write_resident, client),
            ("write rumimm cluster, source computed", rumi_write, client),
            ("write to_zarr cluster, source computed", zarr_write, client),
            ("bulk convert one process", lambda: bulk(bulk_local, None), None),
            ("bulk convert cluster", lambda: bulk(bulk_dask, client), client),
            ("bulk convert one process, threads=1", bulk_one_thread, None),
        ], repeat)
    for name in ("w_dask.rumi", "w_res.rumi"):
        with rumimm.open(os.path.join(folder, name)) as img, rumimm.open(os.path.join(folder, "w_np.rumi")) as ref:
            assert img.header.blob == ref.header.blob  # the same file either way
    res["cases"] = cases
    res["load_after"] = os.getloadavg()
    c = {k: v["seconds"] for k, v in cases.items()}
    res["ratios"] = {
        "cluster read / in-process read (goal <= 1.2)": c["read to_dask cluster"] / c["read in-process"],
        "cluster read / zarr default on the cluster (goal < 1)": c["read to_dask cluster"]
        / c["read zarr default chunks cluster"],
        "cluster read / zarr 512 on the cluster (goal < 1)": c["read to_dask cluster"]
        / c["read zarr 512 chunks cluster"],
        "cluster write / in-process write, source on the workers (goal <= 1.5)":
            c["write rumimm cluster, source on the workers"] / c["write numpy in-process"],
        "cluster write / to_zarr, source on the workers (goal < 1)": c["write rumimm cluster, source on the workers"]
        / c["write to_zarr cluster, source on the workers"],
        "cluster write / in-process write, source computed (context: the cluster also decodes and adds)":
            c["write rumimm cluster, source computed"] / c["write numpy in-process"],
        "cluster write / to_zarr, source computed (goal < 1)": c["write rumimm cluster, source computed"]
        / c["write to_zarr cluster, source computed"],
        "bulk: one process / cluster (goal >= 1.7)": c["bulk convert one process"] / c["bulk convert cluster"],
        "bulk: one process, threads=1 / cluster (context)": c["bulk convert one process, threads=1"]
        / c["bulk convert cluster"],
        "bulk: one process, threads=1 / one process (context)": c["bulk convert one process, threads=1"]
        / c["bulk convert one process"],
    }
    return res


def table(res: dict) -> str:
    lines = ["| case | seconds | tasks | task compute s | transfer s | other wall s |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, v in res["cases"].items():
        extra = (f"{v['tasks']} | {v['compute_s']:.2f} | {v['transfer_s']:.2f} | {v['other_s']:.2f}"
                 if "tasks" in v else " | | | ")
        lines.append(f"| {name} | {v['seconds']:.2f} | {extra} |")
    lines += ["", "| ratio | value |", "|---|---:|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in res["ratios"].items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=8192)
    p.add_argument("--bands", type=int, default=4)
    p.add_argument("--tile", type=int, default=512)
    p.add_argument("--files", type=int, default=16, help="GeoTIFFs for the bulk conversion")
    p.add_argument("--bulk-size", type=int, default=2048, help="height and width of each GeoTIFF")
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds after the warm-up; the median is kept")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="compare_dask-") as folder:
        res = run(args.size, args.bands, args.tile, args.files, args.bulk_size, args.repeat, folder)
    print(f"shape {res['shape']}, tile {res['tile']}, default to_dask chunks {res['default_chunks']} "
          f"({res['default_tasks']} tasks), zarr default chunks {res['zarr_default_chunks']}; "
          f"load average before {res['load_before'][0]:.1f}, after {res['load_after'][0]:.1f}")
    print(table(res))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
