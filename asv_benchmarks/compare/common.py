"""What the side-by-side scripts share: the checkout's paths, the scenes' georeferencing, the
GeoTIFF peer's file, child processes, recorded versions and the generated sections of the docs.

Imports nothing beyond numpy at module level: ``spec_v2``'s worker imports its script, and so this
module, in rumi-eo 0.26.1's own interpreter, where rumimm is not installed.
"""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Iterable, Sequence

import numpy as np

#: The repository root: children run with it as their working directory, so ``python -m
#: asv_benchmarks.compare.<name>`` and ``import rumimm`` find the checkout first.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")
#: rumi-eo 0.26.1, the spec 0.2 peer, in its own venv (``.ci/peer026.sh``) or where the variable points.
PEER026 = os.environ.get("RUMIMM_PEER026_PYTHON") or os.path.join(ROOT, ".venv-rumi026", "bin", "python")
#: stackstac 0.5.1 (pins pandas < 3), in its own venv (``asv_benchmarks/compare/stackstac_venv.sh``)
#: or where the variable points: the STAC comparison's stackstac row.
STACKSTAC = os.environ.get("RUMIMM_STACKSTAC_PYTHON") or os.path.join(ROOT, ".venv-stackstac", "bin", "python")

#: rumi-eo 0.26.1 writing scenes with its recommended recipe (``PEER026 -c PEER_WRITE JSON``: the .npy
#: scenes, the paths, the tile size); prints the headers and versions as JSON.
PEER_WRITE = r'''
import json, sys
import numpy as np, geozl, rumi
args = json.loads(sys.argv[1])
headers = []
for npy, path in zip(args["npys"], args["paths"]):
    arr = np.load(npy)
    table = rumi.frames(arr, "b (row h) (col w) -> row col b (h w)", tile_size=args["tile"])
    for frame in table:
        frame.compressed = geozl.compress(frame.data, graph=geozl.graph(frame.data, "planar>zigzag>zstd"))
    _, header = rumi.write(path, table, bands=[f"band {i}" for i in range(arr.shape[0])], time=["2026-01-01"])
    headers.append(bytes(header).hex())
print(json.dumps({"headers": headers, "rumi": rumi.__version__, "geozl": geozl.__version__}))
'''

#: Georeferencing of every scene the scripts write (UTM 33N, 10 m pixels).
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
EPSG = 32633


def write_geotiff(path: str, array: np.ndarray, tile: int) -> None:
    """Tiled ZSTD (level 9) + horizontal predictor GeoTIFF through rasterio/GDAL."""
    import rasterio
    from rasterio.transform import Affine

    b, y, x = array.shape
    xres, rrot, x0, crot, yres, y0 = TRANSFORM
    profile = dict(driver="GTiff", width=x, height=y, count=b, dtype=array.dtype.name, crs=f"EPSG:{EPSG}",
                   transform=Affine(xres, rrot, x0, crot, yres, y0), tiled=True, blockxsize=tile,
                   blockysize=tile, compress="zstd", zstd_level=9, predictor=2, bigtiff="IF_SAFER",
                   num_threads="ALL_CPUS")
    with rasterio.open(path, "w", **profile) as ds:
        ds.write(array)


def module_command(module: str, *args: str, python: str = sys.executable) -> list[str]:
    """The command running ``module`` (a script of this package) in a fresh interpreter; run it with
    ``cwd=ROOT``, where ``-m`` finds the package (and the checkout's rumimm)."""
    return [python, "-m", module, *args]


def thread_env(threads: int) -> dict[str, str]:
    """This process's environment with every engine's thread count set to ``threads``."""
    n = str(threads)
    return dict(os.environ, RUMIMM_NUM_THREADS=n, RUMI_NUM_THREADS=n, GDAL_NUM_THREADS=n, OMP_NUM_THREADS=n)


def versions(names: Iterable[str]) -> dict[str, str | None]:
    """The installed version of each distribution in ``names`` (None when absent)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def median(samples: Sequence[float]) -> float | None:
    """The median of ``samples``, None for no samples."""
    return float(statistics.median(samples)) if samples else None


def replace_section(page: str, begin: str, end: str, text: str, *, append: bool = False) -> None:
    """Put ``text`` between the ``begin`` and ``end`` markers of the docs page ``page`` (markers kept).

    A page without the markers is an error, or with ``append`` gets the markers and text at its end.
    """
    with open(page, encoding="utf-8") as fh:
        doc = fh.read()
    if begin in doc and end in doc:
        head, rest = doc.split(begin, 1)
        doc = f"{head}{begin}\n{text}\n{end}{rest.split(end, 1)[1]}"
    elif append:
        doc = f"{doc.rstrip()}\n\n{begin}\n{text}\n{end}\n"
    else:
        raise SystemExit(f"{os.path.relpath(page, ROOT)} has no {begin} marker")
    with open(page, "w", encoding="utf-8") as fh:
        fh.write(doc)


def check_chips(engine: str, got: np.ndarray, files: list[dict], batch: list[tuple[int, int, int]], chip: int) -> None:
    """AssertionError unless ``got`` holds the ``chip`` x ``chip`` windows ``(file, y, x)`` of the files' arrays:
    every engine's first batch is checked pixel for pixel before any is timed."""
    want = np.stack([files[i]["array"][:, y:y + chip, x:x + chip] for i, y, x in batch])
    if not np.array_equal(got, want):
        raise AssertionError(f"{engine}: wrong pixels")
