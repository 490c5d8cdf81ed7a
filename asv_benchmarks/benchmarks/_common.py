"""Deterministic benchmark data shared by every benchmark module.

Every benchmark builds its own data from :func:`rumimm.synthetic.eo_scene` (seeded,
EO-like: fractal terrain, band texture, water, sensor noise), writes it in its
class's ``setup_cache`` into asv's per-class cache folder and passes the paths and
header blobs on.  Sizes are chosen so ``asv run --quick`` finishes in a few minutes
on 2 cores: the read scene is 4 x 2048 x 2048 uint16 (32 MiB raw) in 512-pixel tiles.

Benchmarks use rumimm's public names only, so the same suite measures past and future
commits (``asv.conf.json`` builds each commit in its own virtualenv); :func:`need`
skips a benchmark on a commit that lacks a name.  In the existing-environment mode
(``asv.conf.existing.json``) rumimm must be importable (``pip install -e .`` from the
repo root); when it is not, the repository root is put on ``sys.path``.
"""

from __future__ import annotations

import os
import sys

try:
    import rumimm
except ImportError:  # a plain checkout: benchmark the working tree
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    import rumimm

import numpy as np

BANDS = 4
SIZE = 2048
TILE = 512
DTYPE = "uint16"
SEED = 0
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)
CRS = 32633


def need(*names: str) -> None:
    """Skip a benchmark (asv skips on NotImplementedError) on a commit whose rumimm lacks a name.

    The suite runs against every commit of the history it is asked to measure; a
    benchmark of an API that came later is skipped there rather than failed.
    """
    missing = [name for name in names if not hasattr(rumimm, name)]
    if missing:
        raise NotImplementedError(f"this rumimm has no {', '.join(missing)}")


def scene(bands: int = BANDS, height: int = SIZE, width: int | None = None, dtype: str = DTYPE,
          seed: int = SEED) -> np.ndarray:
    """The (bands, height, width) synthetic scene every benchmark reads or writes."""
    from rumimm.synthetic import eo_scene

    return eo_scene(bands=bands, height=height, width=height if width is None else width, dtype=dtype, seed=seed)


def write_scene(path: str, array: np.ndarray, *, unit: str = "tile", tile: int = TILE, codec=None) -> bytes:
    """Write ``array`` georeferenced with rumimm and return the header blob."""
    return rumimm.write(path, array, tile=tile, unit=unit, transform=TRANSFORM, crs=CRS, codec=codec)


def window_origin(size: int, align: str, tile: int = TILE, *, n: int = 1) -> int:
    """Top/left pixel of a ``size``-pixel window.

    ``aligned``: on the tile grid (tile corner ``tile``), so a window of one tile
    touches one frame per band.  ``unaligned``: straddling the grid corner at
    (tile, tile) by ``size // 2`` plus 5 pixels, the common case of a random chip.
    """
    if align == "aligned":
        return tile * n
    if align == "unaligned":
        return max(0, tile * n - size // 2 + 5)
    raise ValueError(f"align must be 'aligned' or 'unaligned', got {align!r}")


def band_key(bands: str):
    """The band part of an index: ``one`` -> band 2 (a 2-D result), ``all`` -> every band."""
    if bands == "one":
        return 2
    if bands == "all":
        return slice(None)
    raise ValueError(f"bands must be 'one' or 'all', got {bands!r}")
