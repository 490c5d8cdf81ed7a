"""Opening and reading: open with/without the blob, windows, full image, thread counts.

The image is 4 x 2048 x 2048 uint16 in 512-pixel tiles, written once per class in
tile and in cell frames.  Every read benchmark opens its image with
``cache_bytes=0``: the decoded-frame cache is off, so each call decodes every
frame it touches (asv repeats a call many times; with the cache on it would time
cache hits).  ``WindowReadCached`` times the default, cached path separately.
"""

from __future__ import annotations

import rumimm

from ._common import BANDS, SIZE, TILE, band_key, need, scene, window_origin, write_scene

UNITS = ("tile", "cell")


def _files():
    arr = scene(BANDS, SIZE)
    return {unit: (f"read-{unit}.rumi", write_scene(f"read-{unit}.rumi", arr, unit=unit)) for unit in UNITS}


class Open:
    """``rumimm.open`` + ``close``: with the header blob (no IFD parse) and without it."""

    params = (list(UNITS), ["blob", "no blob"])
    param_names = ["unit", "header"]

    def setup_cache(self):
        return _files()

    def setup(self, files, unit, header):
        self.path, blob = files[unit]
        self.blob = blob if header == "blob" else None
        with rumimm.open(self.path, header=self.blob, cache_bytes=0) as img:  # import and load kernels now
            img[2, 700:764, 900:964]

    def time_open_close(self, files, unit, header):
        rumimm.open(self.path, header=self.blob).close()

    def time_open_read_64(self, files, unit, header):
        """What a data loader pays per chip when it opens the file for each sample."""
        with rumimm.open(self.path, header=self.blob, cache_bytes=0) as img:
            img[2, 700:764, 900:964]


class WindowRead:
    """Window reads: 64, 256, 1024 px; one band or all; on or off the tile grid; tile/cell."""

    params = ([64, 256, 1024], ["one", "all"], ["aligned", "unaligned"], list(UNITS))
    param_names = ["size", "bands", "align", "unit"]

    def setup_cache(self):
        return _files()

    def setup(self, files, size, bands, align, unit):
        path, blob = files[unit]
        self.img = rumimm.open(path, header=blob, cache_bytes=0)
        o = window_origin(size, align, TILE)
        self.key = (band_key(bands), slice(o, o + size), slice(o, o + size))
        self.img[self.key]  # first call: JIT dispatch and page faults outside the timing

    def teardown(self, files, size, bands, align, unit):
        self.img.close()

    def time_window(self, files, size, bands, align, unit):
        self.img[self.key]


class WindowReadThreads:
    """A 1024 px all-band window and the full image on 1 and 2 decode threads."""

    params = ([1, 2], ["window 1024", "full"])
    param_names = ["threads", "what"]

    def setup_cache(self):
        return _files()

    def setup(self, files, threads, what):
        need("set_num_threads", "get_num_threads")
        self.before = rumimm.get_num_threads()
        rumimm.set_num_threads(threads)
        path, blob = files["tile"]
        self.img = rumimm.open(path, header=blob, cache_bytes=0)
        o = window_origin(1024, "unaligned", TILE)
        self.key = (slice(None), slice(o, o + 1024), slice(o, o + 1024)) if what != "full" else (Ellipsis,)
        self.img[2, :64, :64]

    def teardown(self, files, threads, what):
        if hasattr(self, "img"):  # asv tears down a skipped combination too
            self.img.close()
            rumimm.set_num_threads(self.before)

    def time_read(self, files, threads, what):
        self.img[self.key]


class WindowReadCached:
    """The default path: a 64 px one-band window with the shared decoded-frame cache on.

    After the first call the frame is cached, so this times a cache hit: the cost
    of a chip next to one just read.
    """

    def setup_cache(self):
        return _files()

    def setup(self, files):
        path, blob = files["tile"]
        self.img = rumimm.open(path, header=blob)
        self.img[2, 700:764, 900:964]

    def teardown(self, files):
        self.img.close()

    def time_window_64_cache_hit(self, files):
        self.img[2, 700:764, 900:964]


class FullRead:
    """The whole image: indexing, ``read()`` and ``read(out=)`` into a preallocated array."""

    params = (list(UNITS),)
    param_names = ["unit"]
    timeout = 120

    def setup_cache(self):
        return _files()

    def setup(self, files, unit):
        import numpy as np

        path, blob = files[unit]
        self.img = rumimm.open(path, header=blob, cache_bytes=0)
        self.out = np.empty(self.img.shape, self.img.dtype)
        self.img.read(out=self.out)

    def teardown(self, files, unit):
        self.img.close()

    def time_getitem(self, files, unit):
        self.img[:]

    def time_read_into(self, files, unit):
        self.img.read(out=self.out)


class TileSizeAndDtype:
    """A 256 px all-band window and a 64 px one-band chip by tile size and dtype; file size.

    Smaller tiles decode less for small windows and compress slightly worse.
    """

    params = ([256, 512, 1024], ["uint8", "uint16", "float32"], [64, 256])
    param_names = ["tile", "dtype", "window"]
    timeout = 180

    def setup_cache(self):
        import numpy as np

        files = {}
        for dtype in self.params[1]:
            arr = scene(BANDS, SIZE, dtype=dtype)
            for tile in self.params[0]:
                path = f"tile-{tile}-{dtype}.rumi"
                files[(tile, dtype)] = (path, write_scene(path, arr, tile=tile), int(np.asarray(arr).nbytes))
        return files

    def setup(self, files, tile, dtype, window):
        path, blob, self.raw = files[(tile, dtype)]
        self.img = rumimm.open(path, header=blob, cache_bytes=0)
        o = window_origin(window, "unaligned", tile)
        self.key = (slice(None) if window == 256 else 2, slice(o, o + window), slice(o, o + window))
        self.img[self.key]
        self.path = path

    def teardown(self, files, tile, dtype, window):
        self.img.close()

    def time_window(self, files, tile, dtype, window):
        self.img[self.key]

    def track_size_ratio(self, files, tile, dtype, window):
        """File size over raw size (lower is better); the same for both windows."""
        import os

        return os.path.getsize(self.path) / self.raw

    track_size_ratio.unit = "file / raw"
