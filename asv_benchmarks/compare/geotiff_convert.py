"""GeoTIFF conversion: rumimm's streaming converters against the plain whole-array recipe.

Usage (from the repository root)::

    python -m asv_benchmarks.compare.geotiff_convert                 # 4 x 4096 x 4096 uint16, 3 rounds
    python -m asv_benchmarks.compare.geotiff_convert --size 2048     # quicker

Four operations, each run in a fresh interpreter per sample (so peak RSS is the
operation's own), in interleaved rounds (every operation once per round) so load on
a shared machine hits all of them alike:

* ``from_geotiff``: ``rumimm.from_geotiff(tif, rumi, tile=512)``, streaming.
* ``rasterio read + write``: ``rumimm.write(rumi, rasterio.open(tif).read(), tile=512,
  transform=..., crs=...)``, the recipe a user writes by hand (whole image in memory).
* ``to_geotiff``: ``rumimm.to_geotiff(rumi, tif)`` (zstd, predictor 2, 512 blocks), streaming.
* ``read + rasterio write``: ``img[:]`` then one ``dst.write`` with the same creation
  options (``img.profile`` and GDAL's ``NUM_THREADS``, as ``to_geotiff`` uses).

The source GeoTIFF is a tiled (512), deflate-compressed, band-interleaved GeoTIFF of
``rumimm.synthetic.eo_scene``.  Each sample reports wall seconds (imports and numba
kernel loading excluded: the child does both first and times only the operation) and
the peak RSS increase over the RSS before the operation (Linux: the peak is reset
through ``/proc/self/clear_refs`` first), and the peak increase of anonymous memory
(RSS without the pages of memory-mapped files, sampled every 2 ms): rumimm reads
through a memory map, so the rumi file's pages, which the kernel can drop at any
time, count in RSS but not in anonymous memory.  Prints a Markdown table of medians and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from asv_benchmarks.compare.common import EPSG, ROOT, TRANSFORM

CHILD = r"""
import json, os, sys, tempfile, time
import numpy as np, rasterio, rumimm
import rumimm.integrations.geotiff, rumimm.reader.image, rumimm.writer.writer
op, tif, rumi, out = sys.argv[1:5]
with tempfile.TemporaryDirectory() as d:  # load the numba kernels and codecs outside the measurement
    rumimm.write(os.path.join(d, "w.rumi"), np.zeros((1, 16, 16), np.uint16), tile=16)
    with rumimm.open(os.path.join(d, "w.rumi")) as img:
        img[:]
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak RSS (VmHWM) to the current RSS
import threading
peak_anon, done = [status("RssAnon")], threading.Event()
def sample():  # anonymous memory: RSS without the pages of memory-mapped files (the rumi file)
    while not done.wait(0.002):
        peak_anon[0] = max(peak_anon[0], status("RssAnon"))
base, base_anon = status("VmRSS"), peak_anon[0]
sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
t0 = time.perf_counter()
if op == "from_geotiff":
    rumimm.from_geotiff(tif, rumi, tile=512)
elif op == "rasterio read + write":
    with rasterio.open(tif) as ds:
        arr = ds.read()
        rumimm.write(rumi, arr, tile=512, transform=ds.transform, crs=ds.crs.to_epsg())
elif op == "to_geotiff":
    rumimm.to_geotiff(rumi, out)
elif op == "read + rasterio write":
    with rumimm.open(rumi) as img, rasterio.open(out, "w", driver="GTiff", num_threads=rumimm.get_num_threads(),
                                                 **img.profile) as dst:
        dst.write(img[:])
seconds = time.perf_counter() - t0
done.set()
sampler.join()
print(json.dumps({"seconds": seconds, "peak_rss": status("VmHWM") - base, "peak_anon": peak_anon[0] - base_anon}))
"""

OPS = ["from_geotiff", "rasterio read + write", "to_geotiff", "read + rasterio write"]


def make_source(path: str, bands: int, size: int) -> int:
    import rasterio
    from affine import Affine

    from rumimm.synthetic import eo_scene

    scene = eo_scene(bands=bands, height=size, width=size, dtype="uint16", seed=0)
    with rasterio.open(path, "w", driver="GTiff", count=bands, height=size, width=size, dtype="uint16",
                       crs=f"EPSG:{EPSG}", transform=Affine(*TRANSFORM), tiled=True,
                       blockxsize=512, blockysize=512, compress="deflate", interleave="band",
                       photometric="minisblack") as ds:
        ds.write(scene)
    return scene.nbytes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--bands", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also save every sample as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rumimm-geotiff-bench-") as d:
        tif, rumi, out = (os.path.join(d, n) for n in ("src.tif", "scene.rumi", "out.tif"))
        raw = make_source(tif, args.bands, args.size)
        samples = {op: [] for op in OPS}
        for _ in range(args.rounds + 1):  # round 0 warms numba's on-disk cache and the page cache
            for op in OPS:
                proc = subprocess.run([sys.executable, "-c", CHILD, op, tif, rumi, out], cwd=ROOT,
                                      capture_output=True, text=True, check=True)
                samples[op].append(json.loads(proc.stdout.strip().splitlines()[-1]))
        samples = {op: s[1:] for op, s in samples.items()}
    med = {op: tuple(statistics.median(s[k] for s in v) for k in ("seconds", "peak_rss", "peak_anon"))
           for op, v in samples.items()}
    print(f"{args.bands} x {args.size} x {args.size} uint16 ({raw / 2**20:.0f} MiB raw), "
          f"{args.rounds} interleaved rounds, medians\n")
    print("| operation | seconds | MiB/s (raw) | peak RSS increase | peak anonymous increase | time vs recipe "
          "| anonymous vs recipe |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    pairs = {"from_geotiff": "rasterio read + write", "to_geotiff": "read + rasterio write"}
    for op in OPS:
        sec, rss, anon = med[op]
        ref = pairs.get(op)
        ratio_t = f"{sec / med[ref][0]:.2f}" if ref else "1"
        ratio_m = f"{anon / med[ref][2]:.2f}" if ref else "1"
        print(f"| {op} | {sec:.2f} | {raw / 2**20 / sec:.0f} | {rss / 2**20:.0f} MiB | {anon / 2**20:.0f} MiB "
              f"| {ratio_t} | {ratio_m} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"bands": args.bands, "size": args.size, "raw_bytes": raw, "samples": samples}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
