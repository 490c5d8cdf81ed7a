"""A map-style dataset of fixed-size chips for training loops (PyTorch or plain numpy).

``ChipDataset`` draws its chips once, at construction, from the files' header blobs
alone (shapes, and transforms for a bounds filter): no file is opened until a chip is
read.  ``__getitems__`` reads a whole batch with one :func:`rumimm.read_batch` call,
so frames shared by chips of the batch are decoded once and all are decoded together.

The dataset pickles as paths, blobs and the chip table: a worker process (fork, spawn
or forkserver) reopens files with their blobs on first use, without reading headers,
and decodes on one thread unless told otherwise (the workers are the parallelism).
Nothing here imports torch.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np

__all__ = ["ChipDataset"]


def _size(size) -> tuple[int, int]:
    h, w = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
    h, w = int(h), int(w)
    if h < 1 or w < 1:
        raise ValueError(f"chip size must be >= 1, got {size}")
    return h, w


def _sources(sources, headers):
    """(paths, blobs, transforms) of a catalog table/file, an ImageCollection or a list of Images/paths."""
    from rumimm.reader.image import Image

    if isinstance(sources, (str, os.PathLike)) or type(sources).__module__.startswith("pyarrow"):
        from rumimm.integrations.catalogs import read_catalog

        table = read_catalog(sources, columns=["path", "blob", "transform"]) \
            if isinstance(sources, (str, os.PathLike)) else sources
        transforms = table.column("transform").to_pylist() if "transform" in table.column_names else None
        return table.column("path").to_pylist(), table.column("blob").to_pylist(), transforms
    items = list(sources)
    if headers is not None:
        headers = list(headers)
        if len(headers) != len(items):
            raise ValueError(f"got {len(items)} sources but {len(headers)} headers")
    paths, blobs, transforms = [], [], []
    for i, item in enumerate(items):
        if isinstance(item, Image):
            paths.append(item.path)
            blobs.append(bytes(item.header))
            transforms.append(item.transform)
            continue
        blob = None if headers is None else headers[i]
        with Image(item, blob, cache_bytes=0) as img:  # only the prefix is read when a blob is given
            paths.append(img.path)
            blobs.append(bytes(img.header))
            transforms.append(img.transform)
    return paths, blobs, transforms


def _pixel_limits(transform, bounds, height: int, width: int):
    """(y0, y1, x0, x1) pixel rows/columns of an image inside ``bounds`` (north-up transforms)."""
    if transform is None:
        return None
    a, b, c, d, e, f = transform
    if b != 0 or d != 0:
        raise ValueError("a bounds filter needs north-up images (no rotation in the transform)")
    left, bottom, right, top = bounds
    xs = sorted(((left - c) / a, (right - c) / a))
    ys = sorted(((top - f) / e, (bottom - f) / e))
    x0, x1 = max(0, int(np.ceil(xs[0] - 1e-9))), min(width, int(np.floor(xs[1] + 1e-9)))
    y0, y1 = max(0, int(np.ceil(ys[0] - 1e-9))), min(height, int(np.floor(ys[1] + 1e-9)))
    return y0, y1, x0, x1


class ChipDataset:
    """Fixed-size chips from many rumi files, as a map-style dataset.

    Parameters
    ----------
    sources : catalog table or Parquet path, ImageCollection, or sequence of Image or path
        The files.  A catalog (:func:`rumimm.catalog`) or Images give the blobs;
        paths without ``headers`` are indexed once here.
    size : int or (h, w)
        Chip size in pixels.
    n : int, optional
        Random chips: how many to draw.  Required unless ``grid=True``.
    grid : bool
        Instead, every chip of a regular grid over each file (step ``stride``).
    stride : int or (sy, sx), optional
        Grid step (default: the chip size, non-overlapping).
    weights : sequence of float, optional
        Random chips: relative probability of each file (default: equal).
    seed : int
        Seed of the random draw (the same seed gives the same chips).
    bounds : (left, bottom, right, top), optional
        Keep chips inside these bounds, in each file's CRS (north-up files); files
        outside them, or without georeferencing, get no chips.
    bands : int or sequence of int, optional
        Bands of every chip (default all; an int drops the band axis).
    transform : callable, optional
        Applied to every chip array before it is returned (augmentation).
    headers : sequence of bytes, optional
        Blobs for ``sources`` given as paths.
    worker_threads : int
        Decode threads in a process other than the one that built the dataset
        (a data-loader worker); default 1.  The building process keeps its setting.
    max_open : int
        Files kept open per process (least recently used are closed).
    cache_bytes : int, optional
        Decoded-frame cache of the files, as in :func:`rumimm.open` (0: none).

    Notes
    -----
    ``ds[i]`` is a (bands, h, w) array (the file's numpy dtype, ``bool`` for 1-bit
    samples, ``ml_dtypes`` types for bfloat16 and friends); ``ds.__getitems__(idx)``
    reads them all in one call and returns one (N, bands, h, w) array (a list when a
    ``transform`` is set).  ``ds.chips`` holds the (file, y0, x0) of every chip and
    ``ds.locate(i)`` gives its path and window, e.g. to fetch a label.
    """

    def __init__(self, sources, size, *, n: int | None = None, grid: bool = False, stride=None, weights=None,
                 seed: int = 0, bounds=None, bands=None, transform=None, headers=None, worker_threads: int = 1,
                 max_open: int = 1024, cache_bytes=None):
        from rumimm.reader.blob_column import parse_blobs

        self.size = _size(size)
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        if int(worker_threads) < 1 or int(max_open) < 1:
            raise ValueError("worker_threads and max_open must be >= 1")
        self.paths, self.blobs, transforms = _sources(sources, headers)
        if not self.paths:
            raise ValueError("a ChipDataset needs at least one file")
        fields = parse_blobs(self.blobs)
        self.bands = bands
        self.transform = transform
        self.worker_threads = int(worker_threads)
        self.max_open = int(max_open)
        self.cache_bytes = cache_bytes
        self._check_uniform(fields)
        limits = self._limits(fields, transforms, bounds)
        if grid:
            self.chips = self._grid(limits, stride)
        else:
            if n is None:
                raise ValueError("give n (random chips) or grid=True")
            self.chips = self._random(limits, int(n), weights, seed)
        self._pid = os.getpid()
        self._images: OrderedDict = OrderedDict()

    # -- construction -------------------------------------------------------------------
    def _check_uniform(self, fields) -> None:
        """One dtype for every file (and one band count unless bands are chosen): one batch array."""
        enc = np.stack([fields["sample_format"], fields["bits_per_sample"]], axis=1)
        bad = np.flatnonzero(np.any(enc != enc[0], axis=1))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{self.paths[i]} has another sample type than {self.paths[0]}; "
                             "a ChipDataset returns one dtype")
        nb = fields["samples_per_pixel"]
        if self.bands is None and np.any(nb != nb[0]):
            i = int(np.flatnonzero(nb != nb[0])[0])
            raise ValueError(f"{self.paths[i]} has {nb[i]} bands but {self.paths[0]} has {nb[0]}; pass bands=")
        if self.bands is not None:
            wanted = np.atleast_1d(np.asarray(self.bands, np.int64))
            if wanted.size and (wanted.max() >= nb.min() or wanted.min() < -nb.min()):
                raise ValueError(f"bands {wanted.tolist()} out of range for files with {int(nb.min())} bands")

    def _limits(self, fields, transforms, bounds) -> np.ndarray:
        """(F, 4) int64 pixel ranges (y0, y1, x0, x1) where chips may lie, per file."""
        height, width = fields["image_length"], fields["image_width"]
        lim = np.stack([np.zeros_like(height), height, np.zeros_like(width), width], axis=1)
        if bounds is not None:
            if len(bounds) != 4:
                raise ValueError(f"bounds must be (left, bottom, right, top), got {bounds}")
            for i in range(lim.shape[0]):
                t = None if transforms is None else transforms[i]
                got = _pixel_limits(t, bounds, int(height[i]), int(width[i]))
                lim[i] = (0, 0, 0, 0) if got is None else got
        return lim

    def _random(self, lim, n: int, weights, seed) -> np.ndarray:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        h, w = self.size
        fits = ((lim[:, 1] - lim[:, 0]) >= h) & ((lim[:, 3] - lim[:, 2]) >= w)
        p = np.ones(lim.shape[0]) if weights is None else np.asarray(weights, np.float64)
        if p.shape != (lim.shape[0],) or not np.all(np.isfinite(p)) or np.any(p < 0):
            raise ValueError(f"weights must be {lim.shape[0]} finite values >= 0, one per file")
        p = np.where(fits, p, 0.0)
        if p.sum() <= 0:
            raise ValueError(f"no file can hold a {h} x {w} chip (inside the bounds, with weight > 0)")
        rng = np.random.default_rng(seed)
        f = rng.choice(lim.shape[0], size=n, p=p / p.sum())
        y = lim[f, 0] + rng.integers(0, lim[f, 1] - lim[f, 0] - h + 1)
        x = lim[f, 2] + rng.integers(0, lim[f, 3] - lim[f, 2] - w + 1)
        return np.column_stack([f, y, x]).astype(np.int64)

    def _grid(self, lim, stride) -> np.ndarray:
        h, w = self.size
        sy, sx = (h, w) if stride is None else _size(stride)
        parts = []
        for i, (y0, y1, x0, x1) in enumerate(lim):
            ys = np.arange(y0, y1 - h + 1, sy)
            xs = np.arange(x0, x1 - w + 1, sx)
            if ys.size and xs.size:
                yy, xx = np.meshgrid(ys, xs, indexing="ij")
                parts.append(np.column_stack([np.full(yy.size, i), yy.ravel(), xx.ravel()]))
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros((0, 3), np.int64)

    # -- files ------------------------------------------------------------------------
    def _image(self, i: int):
        from rumimm.reader.image import Image

        if self._pid != os.getpid():  # a worker: the parent's handles are not ours to use
            self._enter_worker()
        img = self._images.get(i)
        if img is None:
            img = self._images[i] = Image(self.paths[i], self.blobs[i], cache_bytes=self.cache_bytes)
        else:
            self._images.move_to_end(i)
        return img

    def _enter_worker(self) -> None:
        from rumimm.reader.threads import set_num_threads

        self._images = OrderedDict()
        self._pid = os.getpid()
        set_num_threads(self.worker_threads)

    def _trim(self) -> None:
        while len(self._images) > self.max_open:
            _, img = self._images.popitem(last=False)
            img.close()

    def close(self) -> None:
        """Close the files this process opened (they reopen on the next read)."""
        images, self._images = self._images, OrderedDict()
        for img in images.values():
            img.close()

    # -- dataset protocol ---------------------------------------------------------------
    def __len__(self) -> int:
        return self.chips.shape[0]

    def locate(self, i: int) -> tuple[str, tuple[tuple[int, int], tuple[int, int]]]:
        """(path, ((y0, y1), (x0, x1))) of chip ``i``."""
        f, y, x = (int(v) for v in self.chips[self._index(i)])
        h, w = self.size
        return self.paths[f], ((y, y + h), (x, x + w))

    def _index(self, i) -> int:
        n = len(self)
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"chip {i} out of range for {n} chips")
        return i + n if i < 0 else i

    def __getitem__(self, i):
        return self._finish(self._read(np.array([self._index(i)]))[0], single=True)

    def __getitems__(self, indices):
        """Chips ``indices`` read in one batch: an (N, bands, h, w) array (a list with a transform)."""
        idx = np.array([self._index(i) for i in indices], np.int64)
        return self._finish(self._read(idx), single=False)

    def _read(self, idx: np.ndarray) -> np.ndarray:
        from rumimm.reader.cube import read_batch

        rows = self.chips[idx]
        images = [self._image(int(f)) for f in rows[:, 0]]
        try:
            return read_batch(images, rows[:, 1:], bands=self.bands, size=self.size)
        finally:
            self._trim()

    def _finish(self, block, single: bool):
        if self.transform is None:
            return block
        if single:
            return self.transform(block)
        return [self.transform(chip) for chip in block]

    # -- pickling -----------------------------------------------------------------------
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_images"] = OrderedDict()  # files are reopened, with their blobs, where the dataset lands
        return state

    def __repr__(self) -> str:
        h, w = self.size
        return f"<rumimm.ChipDataset {len(self)} chips of {h} x {w} from {len(self.paths)} files>"
