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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy as np

from rumimm.errors import FormatError, RumiError
from rumimm.format import dtypes
from rumimm.integrations.open_files import OpenFiles

if TYPE_CHECKING:
    import pyarrow as pa
    from numpy.typing import DTypeLike

    from rumimm._typing import StrPath
    from rumimm.reader.cube import ImageCollection
    from rumimm.reader.image import Image

#: What a dataset's files (or label rasters) come from: a catalog table or Parquet path, an
#: ImageCollection, or Images and paths.
ChipSources: TypeAlias = "StrPath | pa.Table | ImageCollection | Iterable[Image | StrPath]"
#: Blob fields by name, one value per file (``reader.blob_column.parse_blobs_any``).
Fields: TypeAlias = Mapping[str, np.ndarray]
#: numpy's casting rules (``numpy.can_cast``).
Casting: TypeAlias = Literal["no", "equiv", "safe", "same_kind", "unsafe"]
#: What a read makes before ``transform``: a chip array, a sample, or (image, label) arrays.
Chips: TypeAlias = "np.ndarray | dict[str, Any] | tuple[np.ndarray, np.ndarray]"

__all__ = ["MAX_CHIPS", "ChipDataset"]

#: Most chips a dataset holds (its table takes 24 bytes a chip: 1.5 GiB at this bound).
MAX_CHIPS = 1 << 26


def _size(size: int | Sequence[int]) -> tuple[int, int]:
    h, w = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
    h, w = int(h), int(w)
    if h < 1 or w < 1:
        raise ValueError(f"chip size must be >= 1, got {size}")
    return h, w


def _sources(sources: ChipSources, headers: Iterable[bytes] | None,
             storage_options: Mapping[str, Any] | None = None, transforms_needed: bool = True,
             ) -> tuple[list[str], list[bytes], list[tuple[float, ...] | None] | None]:
    """(paths, blobs, transforms) of a catalog table/file, an ImageCollection or a list of Images/paths."""
    from rumimm.integrations.stac import from_items, is_items
    from rumimm.reader.image import Image

    if is_items(sources):  # pystac Items or their dicts (a stac-geoparquet read): their blobs, no header request
        sources = from_items(sources)
    if isinstance(sources, (str, os.PathLike)) or type(sources).__module__.startswith("pyarrow"):
        from rumimm.integrations.catalogs import read_catalog
        from rumimm.reader.catalog_table import check_rows
        from rumimm.store import is_remote

        table: pa.Table = read_catalog(sources, columns=["path", "blob", "transform"],
                                       storage_options=storage_options if is_remote(sources) else None) \
            if isinstance(sources, (str, os.PathLike)) else sources
        paths, blobs, _ = check_rows(table)  # the same RumiErrors as from_catalog, before anything is sized
        transforms = table.column("transform").to_pylist() if "transform" in table.column_names else None
        return paths, blobs, transforms
    items = list(sources)
    if headers is not None:
        headers = list(headers)
        if len(headers) != len(items):
            raise ValueError(f"got {len(items)} sources but {len(headers)} headers")
    paths, blobs, transforms = [], [], []
    for i, item in enumerate(items):
        if isinstance(item, Image):
            paths.append(item.uri)
            blobs.append(bytes(item.header))
            transforms.append(_coefficients(item) if transforms_needed else None)
            continue
        blob = None if headers is None else headers[i]
        with Image(item, blob, cache_bytes=0, storage_options=storage_options) as img:  # no IFD walk with a blob
            paths.append(img.uri)
            blobs.append(bytes(img.header))
            # only bounds= needs them: a remote file's georeferencing costs a request
            transforms.append(_coefficients(img) if transforms_needed else None)
    return paths, blobs, transforms


def _coefficients(img: Image) -> tuple[float, ...] | None:
    """An image's six affine coefficients (a, b, c, d, e, f) of its pixel areas, or None without georeferencing.

    A PixelIsPoint file's stored transform is moved half a pixel to the corners, as rasterio reads it
    (and as a catalog stores it), so chips and bounds are the same whether built from paths or a catalog.
    """
    from rumimm.reader.rasterio_surface import area_coefficients

    t = img.transform
    return None if t is None else area_coefficients(t, img.pixel_is_point)


def _align_labels(labels: ChipSources, label_headers: Iterable[bytes] | None, paths: Sequence[str],
                  blobs: Sequence[bytes]) -> tuple[list[str], list[bytes], np.ndarray, np.ndarray]:
    """(label paths, blobs, (F, 2) pixel offsets, (F, 4) limits) of label rasters aligned with the images.

    A label raster goes with the image in the same position.  Both georeferenced: the
    same CRS and pixel size and an origin a whole number of pixels away (the offset, so
    the label may be a larger or shifted raster).  Otherwise: the same height and width.
    The limits are the image rows and columns the label covers.
    """
    from rumimm.reader.image import Image

    lpaths, lblobs, _ = _sources(labels, label_headers)
    if len(lpaths) != len(paths):
        raise ValueError(f"got {len(paths)} image files but {len(lpaths)} label rasters; give one label per image")
    offsets = np.zeros((len(paths), 2), np.int64)
    limits = np.zeros((len(paths), 4), np.int64)
    for i in range(len(paths)):
        with Image(paths[i], blobs[i], cache_bytes=0) as img, Image(lpaths[i], lblobs[i], cache_bytes=0) as lab:
            (_, h, w), (_, lh, lw) = img.shape, lab.shape
            t, lt = _coefficients(img), _coefficients(lab)
            if t is None or lt is None:
                if (lh, lw) != (h, w):
                    raise RumiError(f"{lpaths[i]}: label raster is {lh} x {lw}, its image {paths[i]} {h} x {w}; "
                                    "without georeferencing on both they must have the same grid")
                dy = dx = 0
            else:
                if lab.crs != img.crs:
                    raise RumiError(f"{lpaths[i]}: label CRS {lab.crs} differs from {paths[i]}'s {img.crs}")
                a, b, c, d, e, f = t
                la, lb, lc, ld, le, lf = lt
                if (a, b, d, e) != (la, lb, ld, le) or b != 0 or d != 0:
                    raise RumiError(f"{lpaths[i]}: label pixel size {(la, le)} differs from {paths[i]}'s {(a, e)} "
                                    "(or a grid is rotated); resample the labels onto the image grid")
                fx, fy = (c - lc) / a, (f - lf) / e
                dx, dy = round(fx), round(fy)
                if abs(fx - dx) > 1e-6 or abs(fy - dy) > 1e-6:
                    raise RumiError(f"{lpaths[i]}: label grid is offset by ({fy:.6g}, {fx:.6g}) pixels from "
                                    f"{paths[i]}'s, not whole pixels; resample the labels onto the image grid")
        offsets[i] = (dy, dx)
        limits[i] = (max(0, -dy), min(h, lh - dy), max(0, -dx), min(w, lw - dx))
    return lpaths, lblobs, offsets, limits


def _output_args(dtype: DTypeLike | None, scale: str | float | Sequence[float] | None, fill_nodata: float | None,
                 output: str) -> tuple[np.dtype | None, str | np.ndarray | None, float | None, str]:
    """(dtype, scale, fill_nodata, output) checked: what each chip becomes after it is read."""
    if output not in ("array", "sample"):
        raise ValueError(f"output must be 'array' or 'sample', got {output!r}")
    chip_dtype = None if dtype is None else np.dtype(dtype)
    factors: str | np.ndarray | None
    if scale is not None and not isinstance(scale, str):
        values = np.atleast_1d(np.asarray(scale, np.float64))
        if values.ndim != 1 or not np.all(np.isfinite(values)):
            raise ValueError(f"scale must be 'file', a finite number or one per band, got {scale!r}")
        factors = values
    elif scale is not None and scale != "file":
        raise ValueError(f"scale must be 'file' (each file's scales and offsets), a number or one per band, "
                         f"got {scale!r}")
    else:
        factors = scale if isinstance(scale, str) else None  # "file" or None
    if factors is not None and chip_dtype is not None and chip_dtype.kind not in "fc":
        raise ValueError(f"scaled chips need a float dtype, got {chip_dtype}")
    return chip_dtype, factors, fill_nodata, output


CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def _check_casting(src: np.dtype, dst: np.dtype | None, casting: str, path: str) -> None:
    """RumiError unless numpy's ``casting`` rule allows the files' ``src`` samples to become ``dst`` chips."""
    if casting not in CASTINGS:
        raise ValueError(f"casting must be one of {', '.join(map(repr, CASTINGS))}, got {casting!r}")
    if dst is None or dst == src:
        return
    try:
        ok = bool(np.can_cast(src, dst, casting))  # type: ignore[arg-type]  # one of CASTINGS, checked above
    except TypeError:  # an ml_dtypes type numpy has no casting table for
        ok = casting == "unsafe"
    if not ok:
        raise RumiError(f"{path}: its {src} samples cannot become {dst} chips under casting={casting!r} "
                        f"(values may not fit); pass casting='same_kind' or 'unsafe' to cast them anyway "
                        f"(integers beyond {dst}'s range saturate, NaN becomes 0), or another dtype")


def _check_fill(fill: float, dtype: np.dtype) -> None:
    """RumiError unless ``fill`` (fill_nodata) is a value of the chips' ``dtype``."""
    try:
        value = float(fill)
    except (TypeError, ValueError, OverflowError):
        raise RumiError(f"fill_nodata must be a number, got {fill!r}") from None
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not (value.is_integer() and info.min <= int(value) <= info.max):
            raise RumiError(f"fill_nodata {fill!r} is not a {dtype} value ({info.min} to {info.max}); the chips "
                            f"are {dtype}: pass dtype= a type that holds it")
    elif dtype.kind == "b":
        if value not in (0.0, 1.0):
            raise RumiError(f"fill_nodata {fill!r} is not a bool value (0 or 1)")
    elif dtype.kind == "f" and np.isfinite(value):
        try:
            big = value != 0 and abs(value) > float(np.finfo(dtype).max)
        except (TypeError, ValueError):  # an ml_dtypes float numpy's finfo does not know
            big = False
        if big:
            raise RumiError(f"fill_nodata {fill!r} is beyond the range of {dtype}")


def _cast(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``block`` as ``dtype``, saturating: an integer beyond the target's range becomes its min or max.

    numpy's ``astype`` would wrap (2399 as uint8 is 95); floats to integers truncate
    toward zero and NaN becomes 0.
    """
    if dtype.kind in "iu" and block.dtype.kind in "iuf" and not np.can_cast(block.dtype, dtype, "safe"):
        info = np.iinfo(dtype)
        if block.dtype.kind == "f":
            # the bounds as floats may round outward (float(2**31 - 1) in float32 is 2**31, which wraps):
            # values at or past them are set to the integer bounds after the cast
            high, low = block >= float(info.max), block <= float(info.min)
            out = np.where(high | low | np.isnan(block), 0, block).astype(dtype)
            out[high] = info.max
            out[low] = info.min
            return out
        src = np.iinfo(block.dtype)
        lo, hi = max(int(info.min), int(src.min)), min(int(info.max), int(src.max))
        return np.clip(block, np.asarray(lo, block.dtype), np.asarray(hi, block.dtype)).astype(dtype)
    return block.astype(dtype)


def _pixel_limits(transform: Sequence[float] | None, bounds: Sequence[float], height: int,
                  width: int) -> tuple[int, int, int, int] | None:
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
    storage_options : dict, optional
        For paths that are remote URIs (``s3://``, ``gs://``, ``az://``, ``http(s)://``),
        as in :func:`rumimm.open`.  From a catalog, no request reads a header; each
        process (a data-loader worker) opens its own clients.  With the ``fork`` start
        method, make no remote read in the parent before the workers start (obstore's
        runtime does not survive a fork; ``docs/remote.md``).
    dtype : dtype-like, optional
        The chips' dtype (default: the files').  torch has almost no arithmetic for
        ``uint16``/``uint32`` tensors: ask for ``"float32"`` (or ``"int32"``) here, and
        the cast is done once per batch in numpy, before the tensor is made.
    casting : {"no", "equiv", "safe", "same_kind", "unsafe"}
        numpy's rule for the cast of the files' samples to ``dtype`` (``numpy.can_cast``),
        checked when the dataset is made (RumiError if it does not allow it).  The default
        ``"safe"`` allows only casts that keep every value (uint16 to float32 or int32).
        ``"same_kind"`` or ``"unsafe"`` allow narrowing: an integer beyond the target's
        range saturates to its min or max (never wraps: 2399 as uint8 is 255), a float
        to an integer is truncated toward zero and NaN becomes 0.  No scaling is implied:
        use ``scale`` for that.
    scale : "file", float or sequence of float, optional
        Multiply the chips: ``"file"`` applies each file's own scales and offsets (its
        sidecar's; physical values), a number or one per selected band multiplies.
        Scaled chips are ``float32`` unless ``dtype`` says another float.
    fill_nodata : number, optional
        Replace samples equal to their band's nodata (from each file's sidecar) by this
        value (``float("nan")`` for a float ``dtype``).  It must be a value of the chips'
        dtype (RumiError when the dataset is made).
    labels : sequence of Image or path, catalog table or Parquet path, optional
        One label raster per file, for segmentation: on the same grid, or (both
        georeferenced) in the same CRS and pixel size with an origin a whole number of
        pixels away.  Chips lie where the label covers the image; each chip comes with
        its label window: ``(image, label)`` arrays (a ``transform`` gets the pair), or a
        ``"mask"`` entry in a sample.  Labels are read as stored (all their bands).
        A batch (``__getitems__``) is then a list of N pairs or samples.
    label_headers : sequence of bytes, optional
        Blobs of ``labels`` given as paths.
    output : {"array", "sample"}
        ``"sample"``: each chip is a TorchGeo-style dict ``{"image": (bands, h, w),
        "valid": bool (bands, h, w) False where the sample is its band's nodata,
        "bounds": (left, bottom, right, top) in the file's CRS (NaN without one),
        "crs": "EPSG:<code>" or None}``; a batch is a list of N of them (torch's default
        collate makes one dict of stacked tensors of it).

    Notes
    -----
    ``ds[i]`` is a (bands, h, w) array ((T, bands, h, w) when the files are spec 0.2
    files of T > 1 time steps, all with the same T) (the file's numpy dtype, ``bool`` for 1-bit
    samples, ``ml_dtypes`` types for bfloat16 and friends); ``ds.__getitems__(idx)``
    reads them all in one call and returns one (N, bands, h, w) array (a list when a
    ``transform`` is set).  ``ds.chips`` holds the (file, y0, x0) of every chip and
    ``ds.locate(i)`` gives its path and window, e.g. to fetch a label.
    """

    def __init__(self, sources: ChipSources, size: int | Sequence[int], *, n: int | None = None, grid: bool = False,
                 stride: int | Sequence[int] | None = None, weights: Sequence[float] | None = None, seed: int = 0,
                 bounds: Sequence[float] | None = None, bands: int | Sequence[int] | None = None,
                 transform: Callable[[Any], Any] | None = None, headers: Sequence[bytes] | None = None,
                 worker_threads: int = 1, max_open: int = 1024, cache_bytes: int | None = None,
                 dtype: DTypeLike | None = None, scale: str | float | Sequence[float] | None = None,
                 fill_nodata: float | None = None, output: Literal["array", "sample"] = "array",
                 labels: ChipSources | None = None, label_headers: Sequence[bytes] | None = None,
                 storage_options: Mapping[str, Any] | None = None, casting: Casting = "safe") -> None:
        from rumimm.reader.blob_column import parse_blobs_any

        self.size = _size(size)
        if transform is not None and not callable(transform):
            raise TypeError(f"transform must be callable, got {type(transform).__name__}")
        if int(worker_threads) < 1 or int(max_open) < 1:
            raise ValueError("worker_threads and max_open must be >= 1")
        self.dtype, self.scale, self.fill_nodata, self.output = _output_args(dtype, scale, fill_nodata, output)
        self.paths, self.blobs, transforms = _sources(sources, headers, storage_options, bounds is not None)
        if not self.paths:
            raise ValueError("a ChipDataset needs at least one file")
        fields = parse_blobs_any(self.blobs)
        steps = fields["time_count"]
        other = np.flatnonzero(steps != steps[0])
        if other.size:  # spec 0.2 files of T > 1 steps give (T, bands, h, w) chips: one T for all
            i = int(other[0])
            raise ValueError(f"{self.paths[i]} has {int(steps[i])} time step(s) but {self.paths[0]} has "
                             f"{int(steps[0])}; a ChipDataset returns one shape")
        self.bands = bands
        self.transform = transform
        self.worker_threads = int(worker_threads)
        self.max_open = int(max_open)
        self.cache_bytes = cache_bytes
        self.storage_options = dict(storage_options) if storage_options else None
        self._check_uniform(fields)
        self.casting = casting
        self._check_output(fields)
        self.label_paths: Any = None  # with labels: set together by _align_labels
        self.label_blobs: Any = None
        self.label_offsets: Any = None
        if labels is not None:
            self.label_paths, self.label_blobs, self.label_offsets, label_limits = \
                _align_labels(labels, label_headers, self.paths, self.blobs)
        if self.scale is not None and not isinstance(self.scale, str) and self.scale.size > 1:
            chosen = int(fields["samples_per_pixel"][0]) if bands is None else np.atleast_1d(bands).size
            if self.scale.size != chosen:
                raise ValueError(f"scale has {self.scale.size} values; give one, or one per band read ({chosen})")
        limits = self._limits(fields, transforms, bounds)
        if labels is not None:  # chips only where the label raster covers the image
            limits[:, 0] = np.maximum(limits[:, 0], label_limits[:, 0])
            limits[:, 1] = np.minimum(limits[:, 1], label_limits[:, 1])
            limits[:, 2] = np.maximum(limits[:, 2], label_limits[:, 2])
            limits[:, 3] = np.minimum(limits[:, 3], label_limits[:, 3])
        if grid:
            self.chips = self._grid(limits, stride)
        else:
            if n is None:
                raise ValueError("give n (random chips) or grid=True")
            self.chips = self._random(limits, int(n), weights, seed)
        self._images = OpenFiles(self.max_open, self.worker_threads)

    # -- construction -------------------------------------------------------------------
    def _check_output(self, fields: Fields) -> None:
        """The cast to ``dtype`` allowed by ``casting`` and ``fill_nodata`` a value of the chips' dtype."""
        sf, bps = int(fields["sample_format"][0]), int(fields["bits_per_sample"][0])
        try:
            src = dtypes.encoding(sf, bps).dtype
        except FormatError:
            src = dtypes.encoding(sf, bps, spec="0.2").dtype
        _check_casting(src, self.dtype, self.casting, self.paths[0])
        if self.fill_nodata is not None:
            _check_fill(self.fill_nodata, self.dtype or (np.dtype(np.float32) if self.scale is not None else src))

    def _check_uniform(self, fields: Fields) -> None:
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

    def _limits(self, fields: Fields, transforms: Sequence[Sequence[float] | None] | None,
                bounds: Sequence[float] | None) -> np.ndarray:
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

    def _random(self, lim: np.ndarray, n: int, weights: Sequence[float] | None, seed: int) -> np.ndarray:
        if not 0 <= n <= MAX_CHIPS:
            raise ValueError(f"n must be in [0, {MAX_CHIPS:,}], got {n}")
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

    def _grid(self, lim: np.ndarray, stride: int | Sequence[int] | None) -> np.ndarray:
        h, w = self.size
        sy, sx = (h, w) if stride is None else _size(stride)
        ny = np.maximum(0, (lim[:, 1] - lim[:, 0] - h) // sy + 1)
        nx = np.maximum(0, (lim[:, 3] - lim[:, 2] - w) // sx + 1)
        total = sum(int(a) * int(b) for a, b in zip(ny, nx, strict=True))  # Python ints: no overflow from hostile sizes
        if total > MAX_CHIPS:
            raise RumiError(f"a grid of {h} x {w} chips, step {sy} x {sx}, over these files has {total:,} chips, more "
                            f"than {MAX_CHIPS:,} (the chip table alone would need {24 * total:,} bytes); use a larger "
                            "stride, a bounds filter or random chips (n=)")
        parts = []
        for i, (y0, y1, x0, x1) in enumerate(lim):
            ys = np.arange(y0, y1 - h + 1, sy)
            xs = np.arange(x0, x1 - w + 1, sx)
            if ys.size and xs.size:
                yy, xx = np.meshgrid(ys, xs, indexing="ij")
                parts.append(np.column_stack([np.full(yy.size, i), yy.ravel(), xx.ravel()]))
        return np.concatenate(parts).astype(np.int64) if parts else np.zeros((0, 3), np.int64)

    # -- files ------------------------------------------------------------------------
    def _image(self, i: int) -> Image:
        from rumimm.reader.image import Image

        return self._images.get(i, lambda: Image(self.paths[i], self.blobs[i], cache_bytes=self.cache_bytes,
                                                  storage_options=self.storage_options))

    def _label_image(self, i: int) -> Image:
        """The label raster of file ``i``, opened with its blob (kept open beside the images)."""
        from rumimm.reader.image import Image

        return self._images.get(("label", i), lambda: Image(self.label_paths[i], self.label_blobs[i],
                                                             cache_bytes=self.cache_bytes))

    def close(self) -> None:
        """Close the files this process opened (they reopen on the next read)."""
        self._images.close()

    # -- dataset protocol ---------------------------------------------------------------
    def __len__(self) -> int:
        return self.chips.shape[0]

    def locate(self, i: int) -> tuple[str, tuple[tuple[int, int], tuple[int, int]]]:
        """(path, ((y0, y1), (x0, x1))) of chip ``i``."""
        f, y, x = (int(v) for v in self.chips[self._index(i)])
        h, w = self.size
        return self.paths[f], ((y, y + h), (x, x + w))

    def _index(self, i: int | np.integer) -> int:
        n = len(self)
        i = int(i)
        if not -n <= i < n:
            raise IndexError(f"chip {i} out of range for {n} chips")
        return i + n if i < 0 else i

    def __getitem__(self, i: int | np.integer) -> Any:
        idx = np.array([self._index(i)])
        with self._images.reading():  # every image the chip needs (pixels, nodata, bounds) held until done
            chip = self._with_labels(self._sample(self._read(idx), idx, single=True), idx, single=True)
        return self._finish(chip, single=True)

    def __getitems__(self, indices: Iterable[int | np.integer]) -> Any:
        """Chips ``indices`` read in one batch: an (N, bands, h, w) array (a list with a transform).

        With ``output="sample"`` or ``labels``, a list of N samples or (image, label) pairs,
        views of arrays read in one batch, which torch's default collate stacks.
        """
        idx = np.array([self._index(i) for i in indices], np.int64)
        with self._images.reading():  # every image the batch needs (pixels, nodata, bounds) held until done
            chips = self._with_labels(self._sample(self._read(idx), idx, single=False), idx, single=False)
        return self._finish(chips, single=False)

    def _with_labels(self, chips: np.ndarray | dict[str, Any], idx: np.ndarray, single: bool) -> Chips:
        """Add the label chips: ``(image, label)`` for arrays, a ``"mask"`` entry for samples."""
        if self.label_paths is None:
            return chips
        from rumimm.reader.cube import read_batch

        rows = self.chips[idx]
        images = [self._label_image(int(f)) for f in rows[:, 0]]  # held by the caller's reading() block
        origins = rows[:, 1:] + self.label_offsets[rows[:, 0]]
        labels = read_batch(images, origins, size=self.size)
        if single:
            labels = labels[0]
        if isinstance(chips, dict):
            return {**chips, "mask": labels}
        return chips, labels

    def _band_list(self, count: int) -> list[int]:
        if self.bands is None:
            return list(range(count))
        return [int(b) % count for b in np.atleast_1d(self.bands)]

    def _sample(self, block: np.ndarray, idx: np.ndarray, single: bool) -> np.ndarray | dict[str, Any]:
        """The chips as asked: nodata filled, scaled, cast, and as arrays or samples."""
        if self.scale is None and self.fill_nodata is None and self.output == "array":
            if self.dtype is not None and block.dtype != self.dtype:
                block = _cast(block, self.dtype)  # one cast per batch, before any tensor is made
            return block[0] if single else block
        rows = self.chips[idx]
        need_valid = self.output == "sample" or self.fill_nodata is not None
        valid = np.ones(block.shape, bool) if need_valid else None
        out_dtype = self.dtype or (np.dtype(np.float32) if self.scale is not None else block.dtype)
        out = _cast(block, out_dtype)  # a copy: nodata is filled and bands scaled in place
        squeeze = self.bands is not None and np.ndim(self.bands) == 0
        for k, (f, _, _) in enumerate(rows):
            img = self._image(int(f))
            bands = self._band_list(img.count)
            # (bands, h, w), or (T, bands, h, w) for a file of T steps: the band axis is the third from the end
            chip, raw, ok = out[k], block[k], None if valid is None else valid[k]
            if squeeze:  # one band, its axis dropped: views with it back
                chip, raw = np.expand_dims(chip, -3), np.expand_dims(raw, -3)
                ok = None if ok is None else np.expand_dims(ok, -3)
            for j, b in enumerate(bands):
                if ok is not None:  # need_valid
                    nod = img.nodatavals[b]
                    if nod is not None:
                        r = raw[..., j, :, :]
                        bad = np.isnan(r) if isinstance(nod, float) and nod != nod else r == nod
                        ok[..., j, :, :] = ~bad
                if self.scale is not None:
                    sc, off = (img.scales[b], img.offsets[b]) if isinstance(self.scale, str) else \
                        (self.scale[j if self.scale.size > 1 else 0], 0.0)
                    if sc != 1 or off != 0:
                        chip[..., j, :, :] = chip[..., j, :, :] * np.asarray(sc, out_dtype) + np.asarray(off, out_dtype)
        if self.fill_nodata is not None and valid is not None:  # fill_nodata makes valid
            out[~valid] = self.fill_nodata
        if self.output == "array":
            return out[0] if single else out
        assert valid is not None  # a sample always carries its valid mask
        sample: dict[str, Any] = {"image": out, "valid": valid, "bounds": self._bounds(rows),
                                  "crs": [self._image(int(f)).crs for f in rows[:, 0]]}
        if single:
            sample = {"image": out[0], "valid": valid[0], "bounds": sample["bounds"][0], "crs": sample["crs"][0]}
        return sample

    def _bounds(self, rows: np.ndarray) -> np.ndarray:
        """(N, 4) (left, bottom, right, top) of chips in their files' CRSs (NaN without georeferencing)."""
        h, w = self.size
        out = np.full((rows.shape[0], 4), np.nan)
        for k, (f, y, x) in enumerate(rows):
            t = _coefficients(self._image(int(f)))
            if t is None:
                continue
            a, b, c, d, e, g = t
            xs = [c + a * px + b * py for px, py in ((x, y), (x + w, y), (x, y + h), (x + w, y + h))]
            ys = [g + d * px + e * py for px, py in ((x, y), (x + w, y), (x, y + h), (x + w, y + h))]
            out[k] = (min(xs), min(ys), max(xs), max(ys))
        return out

    def _read(self, idx: np.ndarray) -> np.ndarray:
        from rumimm.reader.cube import read_batch

        rows = self.chips[idx]
        images = [self._image(int(f)) for f in rows[:, 0]]  # held by the caller's reading() block
        return read_batch(images, rows[:, 1:], bands=self.bands, size=self.size)

    def _finish(self, block: Chips, single: bool) -> Any:
        """Apply ``transform``; a batch of samples or pairs becomes a list of them (what DataLoader collates)."""
        fn = self.transform if self.transform is not None else (lambda item: item)
        if single:
            return fn(block)
        if isinstance(block, dict):
            n = len(block["image"])
            return [fn({k: v[i] for k, v in block.items()}) for i in range(n)]
        if isinstance(block, tuple):  # (images, labels): the transform sees each pair (augment both alike)
            return [fn((chip, label)) for chip, label in zip(*block, strict=True)]
        return block if self.transform is None else [fn(chip) for chip in block]

    def __repr__(self) -> str:
        h, w = self.size
        return f"<rumimm.ChipDataset {len(self)} chips of {h} x {w} from {len(self.paths)} files>"
