"""Peak memory (max RSS of the benchmark process) of streaming writes and a full read.

asv reports ``ru_maxrss`` of the whole process, setup included, so each class has a
``peakmem_baseline`` (same imports and setup, no work) to subtract.

Writing a memory-mapped input: the writer reads the source one row of tiles at a
time and keeps about two rows of frames in flight, but every page of a memmap it
touches is *file-backed resident memory* and counts in RSS until the kernel reclaims
it (it does not, with free RAM).  So ``peakmem_write_memmap`` grows with the input
(128 MiB here), while ``peakmem_write_row_reader`` — the same file read through
``np.fromfile`` one row of tiles at a time, no mapping — shows the writer's own
bound: baseline + a few rows of tiles.
"""

from __future__ import annotations

import os

import numpy as np

import rumimm

from ._common import BANDS, SIZE, TILE, scene, write_scene

BIG = 4096  # 4 x 4096 x 4096 uint16 = 128 MiB: far larger than the writer's in-flight rows


class _RowReader:
    """A (B, Y, X) array-like over a raw C-order file, read with ``np.fromfile`` per slice."""

    def __init__(self, path: str, shape: tuple[int, int, int], dtype):
        self.path, self.shape, self.dtype = path, tuple(shape), np.dtype(dtype)

    def __getitem__(self, key):
        bands, rows, cols = key
        if bands != slice(None) or cols != slice(None):
            raise IndexError("only [:, y0:y1, :] is supported")
        b, y, x = self.shape
        y0, y1, _ = rows.indices(y)
        out = np.empty((b, y1 - y0, x), self.dtype)
        row_bytes = x * self.dtype.itemsize
        with open(self.path, "rb") as fh:
            for band in range(b):
                fh.seek((band * y + y0) * row_bytes)
                out[band] = np.fromfile(fh, self.dtype, count=(y1 - y0) * x).reshape(y1 - y0, x)
        return out


class PeakMemWrite:
    """Writing a 4 x 4096 x 4096 uint16 (128 MiB) input that lives on disk."""

    timeout = 300

    def setup_cache(self):
        arr = scene(BANDS, BIG)
        mm = np.lib.format.open_memmap("big.npy", mode="w+", dtype=arr.dtype, shape=arr.shape)
        mm[...] = arr
        mm.flush()
        del mm
        arr.tofile("big.raw")
        return {"npy": "big.npy", "raw": "big.raw", "shape": arr.shape, "dtype": str(arr.dtype)}

    def setup(self, src):
        self.src = src
        self.out = "peakmem-write.rumi"

    def teardown(self, src):
        if os.path.exists(self.out):
            os.remove(self.out)

    def peakmem_baseline(self, src):
        pass

    def peakmem_write_memmap(self, src):
        mm = np.load(src["npy"], mmap_mode="r")
        rumimm.write(self.out, mm, tile=TILE)

    def peakmem_write_row_reader(self, src):
        rumimm.write(self.out, _RowReader(src["raw"], src["shape"], src["dtype"]), tile=TILE)


class PeakMemRead:
    """A full read of a 4 x 2048 x 2048 uint16 image (32 MiB output)."""

    params = (["tile", "cell"],)
    param_names = ["unit"]
    timeout = 240

    def setup_cache(self):
        arr = scene(BANDS, SIZE)
        return {unit: (f"full-{unit}.rumi", write_scene(f"full-{unit}.rumi", arr, unit=unit))
                for unit in ("tile", "cell")}

    def setup(self, files, unit):
        path, blob = files[unit]
        self.img = rumimm.open(path, header=blob)

    def teardown(self, files, unit):
        self.img.close()

    def peakmem_baseline(self, files, unit):
        pass

    def peakmem_read_full(self, files, unit):
        self.img[:]
