"""Training chips: ``read_batch`` of a batch of chips from many files, and Cube windows.

Eight grid-aligned 4 x 1024 x 1024 uint16 images (different seeds, 256-pixel
tiles: a time series of one tile of the grid).  A batch is 32 chips at seeded
random positions in randomly chosen images, the access pattern of a training
data loader.  Images are opened with ``cache_bytes=0``, so every call decodes.
"""

from __future__ import annotations

import numpy as np

import rumimm

from ._common import BANDS, need, scene, write_scene

N_IMAGES = 8
CUBE_SIZE = 1024
CUBE_TILE = 256
BATCH = 32


def _stack():
    files = []
    for i in range(N_IMAGES):
        path = f"t{i}.rumi"
        files.append((path, write_scene(path, scene(BANDS, CUBE_SIZE, seed=100 + i), tile=CUBE_TILE)))
    return files


def _chips(chip: int, seed: int = 7):
    rng = np.random.default_rng(seed + chip)
    which = rng.integers(0, N_IMAGES, size=BATCH)
    origins = rng.integers(0, CUBE_SIZE - chip + 1, size=(BATCH, 2))
    return which, origins


class ReadBatch:
    """32 chips of 64 or 256 pixels, all bands or one, from open images or from paths + blobs."""

    params = ([64, 256], ["all", "one"], ["images", "paths"])
    param_names = ["chip", "bands", "source"]

    def setup_cache(self):
        return _stack()

    def setup(self, files, chip, bands, source):
        need("read_batch")
        which, self.origins = _chips(chip)
        self.chip = chip
        self.bands = None if bands == "all" else 2
        self.images = [rumimm.open(p, header=b, cache_bytes=0) for p, b in files]
        if source == "images":
            self.sources, self.headers = [self.images[i] for i in which], None
        else:  # opened (header only, no IFD parse) and closed inside every call
            self.sources = [files[i][0] for i in which]
            self.headers = [files[i][1] for i in which]
        self.out = None
        rumimm.read_batch(self.sources, self.origins, self.headers, size=(chip, chip), bands=self.bands,
                          cache_bytes=0)

    def teardown(self, files, chip, bands, source):
        for img in getattr(self, "images", ()):  # asv tears down a skipped combination too
            img.close()

    def time_read_batch(self, files, chip, bands, source):
        rumimm.read_batch(self.sources, self.origins, self.headers, size=(self.chip, self.chip), bands=self.bands,
                          cache_bytes=0)


class CubeWindow:
    """``cube[:, :, y0:y0+s, x0:x0+s]``: one window through the whole time series."""

    params = ([64, 256, 1024],)
    param_names = ["size"]

    def setup_cache(self):
        return _stack()

    def setup(self, files, size):
        need("Cube")
        self.cube = rumimm.Cube([p for p, _ in files], [b for _, b in files], cache_bytes=0)
        o = 0 if size == CUBE_SIZE else CUBE_TILE - size // 2 + 5
        self.key = (slice(None), slice(None), slice(o, o + size), slice(o, o + size))
        self.cube[self.key]

    def teardown(self, files, size):
        if hasattr(self, "cube"):
            self.cube.close()

    def time_cube_window(self, files, size):
        self.cube[self.key]
