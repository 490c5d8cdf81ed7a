"""TorchGeo over a rumi catalog: a ``GeoDataset`` whose index is the catalog's footprints.

:class:`RumiDataset` builds TorchGeo's spatiotemporal index (footprints, CRS, a time
interval per file) from a :func:`rumimm.catalog` table or its GeoParquet file, without
opening any file.  Indexing it with a GeoSlice ``[xmin:xmax:xres, ymin:ymax:yres,
tmin:tmax]`` returns TorchGeo's sample dict (``image`` or ``mask``, ``bounds``,
``transform``), so TorchGeo's samplers, ``&`` with label datasets and its data modules
work unchanged.  Files are opened with the catalog's header blobs (no IFD is read) and a
batch of queries (``__getitems__``, what a ``DataLoader`` calls) is read with one
:func:`rumimm.read_batch` call per window size, so frames shared by several chips are
decoded once, in parallel.

Reads are never warped: every file must share one CRS.  A query at another resolution
than a file's is resampled with nearest neighbour.  Needs torchgeo (Python >= 3.12;
``pip install rumimm[torchgeo]``), imported only here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np

try:
    import torch
    from torchgeo.datasets import GeoDataset
except ImportError as err:  # the extra is missing, or this Python is older than TorchGeo allows
    raise ImportError(f"rumimm.torchgeo needs torchgeo (Python >= 3.12): pip install 'rumimm[torchgeo]' ({err})") \
        from err
import pandas as pd
import pyproj
import shapely
from geopandas import GeoDataFrame

import rumimm
from rumimm.errors import RumiError
from rumimm.integrations.open_files import OpenFiles

if TYPE_CHECKING:
    import pyarrow as pa
    from numpy.typing import NDArray

    from rumimm._typing import StrPath
    from rumimm.reader.image import Image

#: A TorchGeo query: ``[xmin:xmax:xres, ymin:ymax:yres, tmin:tmax:tstep]``, trailing slices optional.
GeoSlice: TypeAlias = slice | tuple[slice, ...]
#: A sample dict: ``image`` or ``mask``, ``bounds``, ``transform`` (and what ``transforms`` add).
Sample: TypeAlias = dict[str, Any]
#: ``where=``: a bbox in the catalog's CRS, a pyarrow expression or a boolean mask.
Where: TypeAlias = "tuple[float, float, float, float] | pa.compute.Expression | Sequence[bool] | None"
#: ``time=``: one (start, end) pair for every row, or one per row (anything ``pandas.Timestamp`` takes).
TimeRange: TypeAlias = tuple[Any, Any] | Sequence[tuple[Any, Any]] | None
#: Output pixels [out0, out1) from source pixels [src0, src1) along one axis, and the gather index
#: (None: one to one), as ``RumiDataset._pixels`` gives them.
_Span: TypeAlias = "tuple[int, int, int, int, NDArray[np.int64] | None]"

__all__ = ["RumiDataset", "stack_samples"]

_COLUMNS = ["path", "blob", "bands", "height", "width", "dtype", "epsg", "transform", "left", "bottom", "right",
            "top"]
_ALIGNED = 1e-6  # a query edge within this many pixels of a pixel edge is on it (float noise of k * res sums)


def _table(catalog: pa.Table | StrPath, where: Where) -> pa.Table:
    """The catalog's pyarrow table (read from GeoParquet if a path), rows selected by ``where``."""
    from rumimm.integrations.stac import from_items, is_items

    if is_items(catalog):  # pystac Items or their dicts (a stac-geoparquet read): a catalog table, no file read
        catalog = from_items(catalog)
    if isinstance(catalog, (str, os.PathLike)):
        names = rumimm.read_catalog(catalog, columns=[]).schema.names
        extra = [c for c in ("datetime", "start_datetime", "end_datetime") if c in names]
        table = rumimm.read_catalog(catalog, columns=_COLUMNS + extra)
    else:
        table = catalog
    from rumimm.reader.catalog_table import select_rows

    return select_rows(table, where)


def _times(table: pa.Table, time: TimeRange, n: int) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """One closed (start, end) per row: ``time``, else the table's datetime columns, else all of time."""
    if time is not None:
        pairs = [time] * n if len(time) == 2 and not isinstance(time[0], (tuple, list)) else list(time)
        if len(pairs) != n:
            raise ValueError(f"time must be one (start, end) pair or one per catalog row ({n}), got {len(pairs)}")
    elif "start_datetime" in table.column_names and "end_datetime" in table.column_names:
        pairs = list(zip(table.column("start_datetime").to_pylist(), table.column("end_datetime").to_pylist(),
                         strict=True))
    elif "datetime" in table.column_names:
        pairs = [(t, t) for t in table.column("datetime").to_pylist()]
    else:
        return [(pd.Timestamp.min, pd.Timestamp.max)] * n
    out = []
    for i, (start, end) in enumerate(pairs):
        start = pd.Timestamp.min if start is None else pd.Timestamp(start)
        end = pd.Timestamp.max if end is None else pd.Timestamp(end)
        if start.tzinfo is not None or end.tzinfo is not None:  # TorchGeo's index holds naive times
            start = start.tz_convert(None) if start.tzinfo is not None else start
            end = end.tz_convert(None) if end.tzinfo is not None else end
        if end < start:
            raise ValueError(f"catalog row {i}: time interval ends ({end}) before it starts ({start})")
        out.append((start, end))
    return out


_NUMPY_OF = {torch.float32: np.float32, torch.float64: np.float64, torch.float16: np.float16, torch.int64: np.int64,
             torch.int32: np.int32, torch.int16: np.int16, torch.int8: np.int8, torch.uint8: np.uint8,
             torch.bool: np.bool_}


def _torch_ready(data: NDArray[Any]) -> NDArray[Any]:
    """``data`` in a dtype torch.from_numpy takes, values unchanged (uint16/uint32 widen, ML floats -> float32)."""
    if data.dtype == np.uint16:
        return data.astype(np.int32)
    if data.dtype == np.uint32:
        return data.astype(np.int64)
    if data.dtype.kind == "V" or data.dtype.type.__module__.startswith("ml_dtypes"):
        return data.astype(np.float32)
    return data


#: True inside a ``DataLoader`` worker once :func:`stack_samples` has sent a batch on as it was
#: read: that worker's collate keeps batches, so :class:`RumiDataset` assembles the next ones
#: in shared memory, where the worker would otherwise copy them to send them.
_collate_keeps_batches = False


def _shared_empty(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """An uninitialised tensor in shared memory, where torch's ``default_collate`` puts a
    worker's batches too: sending it to the training process copies nothing."""
    # torch's own default_collate allocates with this private call: the public share_memory_() would
    # first fill ordinary memory and then copy it into a shared segment
    storage = torch.UntypedStorage._new_shared(int(np.prod(shape)) * dtype.itemsize)  # noqa: SLF001
    # (torch's stubs type set_'s size as torch.Size; a tuple is what torch's own collate passes)
    empty: Any = torch.empty(0, dtype=dtype)
    return cast("torch.Tensor", empty.set_(storage, 0, shape))


def _batch_of(tensors: list[torch.Tensor]) -> torch.Tensor | None:
    """The batch that the tensors (at least one) are consecutive views of, or None.

    Every tensor contiguous, of one shape, dtype and device, and tensor ``i`` starting ``i``
    tensor sizes after the first in one storage: stacking them would copy that storage onto
    itself, and a view of it is the same batch."""
    first = tensors[0]
    storage, n, start = first.untyped_storage(), first.numel(), first.storage_offset()
    for i, t in enumerate(tensors):
        if not (t.dtype == first.dtype and t.shape == first.shape
                and t.device == first.device and t.is_contiguous() and not t.requires_grad
                and t.untyped_storage().data_ptr() == storage.data_ptr() and t.storage_offset() == start + i * n):
            return None
    if (start + len(tensors) * n) * first.element_size() > storage.nbytes():
        return None
    empty: Any = torch.empty(0, dtype=first.dtype, device=first.device)
    return cast("torch.Tensor", empty.set_(storage, start, (len(tensors), *first.shape)))


def stack_samples(samples: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """TorchGeo's ``stack_samples`` (a ``DataLoader``'s ``collate_fn``) without its copies where
    none is needed.

    Tensors under one key are stacked along a new first axis; other values are gathered in
    lists.  Where a key's tensors are consecutive views of one batch, which is what
    :class:`RumiDataset` returns for a ``DataLoader`` batch, that batch is returned as it is,
    without the copy (16 MB for 16 float32 samples of 4 x 256 x 256); inside a worker, this
    tells the worker's rumi dataset to read its next batches into shared memory, so that
    sending them copies nothing either.  Other tensors are stacked, inside a worker straight
    into shared memory (as torch's ``default_collate`` does), which spares any dataset's
    batch the second copy a worker makes to send it.
    """
    samples = list(samples)
    out: dict = {}
    for key in dict.fromkeys(k for s in samples for k in s):
        values = [s[key] for s in samples if key in s]
        if not all(isinstance(v, torch.Tensor) for v in values):
            out[key] = values
            continue
        batch = _batch_of(values)
        in_worker = torch.utils.data.get_worker_info() is not None
        if batch is None and in_worker and len({v.shape for v in values}) == 1:
            batch = torch.stack(values, out=_shared_empty((len(values), *values[0].shape), values[0].dtype))
        elif batch is None:
            batch = torch.stack(values)
        elif in_worker:
            global _collate_keeps_batches
            _collate_keeps_batches = True
        out[key] = batch
    return out


class RumiDataset(GeoDataset):
    """A TorchGeo ``GeoDataset`` over the rumi files of a catalog.

    Parameters
    ----------
    catalog : pyarrow.Table, str or os.PathLike
        A :func:`rumimm.catalog` table or the GeoParquet file :func:`rumimm.write_catalog`
        wrote.  Only the catalog is read here; files are opened, with their blobs, when a
        sample first needs them.
    where : bbox tuple, pyarrow expression or boolean mask, optional
        Rows to keep: ``(xmin, ymin, xmax, ymax)`` in the catalog's CRS, or e.g.
        ``pyarrow.compute.field("epsg") == 32633``.
    bands : sequence of int, optional
        0-based bands to read (default all; every file needs them).
    res : float or (xres, yres), optional
        Resolution of the samples in CRS units (default: the first file's).
    time : (start, end) or a sequence of them, one per row, optional
        Time interval of every file (closed); default the catalog's ``start_datetime``
        and ``end_datetime`` columns, else its ``datetime`` column, else all of time.
    is_image : bool
        Samples hold ``image`` (bands, h, w) if True, else ``mask`` (h, w for one band).
    dtype : torch.dtype, optional
        Sample dtype (default float32 for images, int64 for masks, as TorchGeo's
        ``RasterDataset``).
    nodata : float
        Value of sample pixels no file covers.
    transforms : callable, optional
        Applied to every sample dict.
    cache_bytes : int, optional
        Decoded-frame cache per file, as in :func:`rumimm.open` (0: none).
    verify : bool
        Verify each frame's OpenZL checksums while decoding, as :func:`rumimm.open`
        (default True).
    worker_threads : int
        Decode threads in a ``DataLoader`` worker process (default 1: the workers are the
        parallelism); the process that built the dataset keeps its setting.
    max_open : int
        Files kept open per process (least recently used are closed).

    Raises
    ------
    RumiError
        A row has no CRS, the rows have more than one CRS (select one with ``where``),
        a transform is rotated, or the files differ in dtype or band count.

    Notes
    -----
    Where files overlap, the first catalog row wins (TorchGeo's merge does the same).
    The sample's ``transform`` is the 9 coefficients of its affine transform and
    ``bounds`` TorchGeo's 9-value tensor of the query, as ``RasterDataset`` returns.

    Examples
    --------
    >>> from torchgeo.samplers import RandomGeoSampler          # doctest: +SKIP
    >>> from torch.utils.data import DataLoader
    >>> ds = RumiDataset("catalog.parquet")
    >>> loader = DataLoader(ds, sampler=RandomGeoSampler(ds, size=256, length=1024), batch_size=32,
    ...                     collate_fn=torchgeo.datasets.stack_samples)
    """

    def __init__(self, catalog: pa.Table | StrPath, *, where: Where = None, bands: Sequence[int] | None = None,
                 res: float | tuple[float, float] | None = None, time: TimeRange = None, is_image: bool = True,
                 dtype: torch.dtype | None = None, nodata: float = 0,
                 transforms: Callable[[Sample], Sample] | None = None, cache_bytes: int | None = None,
                 verify: bool = True, worker_threads: int = 1, max_open: int = 256) -> None:
        table = _table(catalog, where)
        n = table.num_rows
        if n == 0:
            raise RumiError("the catalog has no rows (after where=); a RumiDataset needs at least one file")
        paths = table.column("path").to_pylist()
        epsg = table.column("epsg").to_pylist()
        missing = [i for i, e in enumerate(epsg) if e is None]
        if missing:
            i = missing[0]
            raise RumiError(f"{paths[i]}: no CRS in catalog row {i}; a GeoDataset needs georeferenced files")
        codes = sorted(set(epsg))
        if len(codes) > 1:
            raise RumiError(f"catalog rows have {len(codes)} CRSs ({', '.join(f'EPSG:{c}' for c in codes)}); "
                            "a RumiDataset reads one CRS without warping; select one with "
                            f"where=pyarrow.compute.field('epsg') == {codes[0]}")
        transforms_ = np.array(table.column("transform").to_pylist(), np.float64).reshape(n, 6)
        rotated = np.flatnonzero((transforms_[:, 1] != 0) | (transforms_[:, 3] != 0)
                                 | (transforms_[:, 0] <= 0) | (transforms_[:, 4] >= 0))
        if rotated.size:
            i = int(rotated[0])
            raise RumiError(f"{paths[i]}: transform {transforms_[i].tolist()} is not north-up; "
                            "a RumiDataset reads north-up files (a > 0, b = d = 0, e < 0)")
        dtypes = table.column("dtype").to_pylist()
        nbands = np.array(table.column("bands").to_pylist(), np.int64)
        if len(set(dtypes)) > 1:
            i = next(i for i, d in enumerate(dtypes) if d != dtypes[0])
            raise RumiError(f"{paths[i]} is {dtypes[i]} but {paths[0]} is {dtypes[0]}; samples have one dtype")
        if bands is None:
            if np.any(nbands != nbands[0]):
                i = int(np.flatnonzero(nbands != nbands[0])[0])
                raise RumiError(f"{paths[i]} has {nbands[i]} bands but {paths[0]} has {nbands[0]}; pass bands=")
            self.band_list = list(range(int(nbands[0])))
        else:
            self.band_list = [int(b) for b in bands]
            if not self.band_list or min(self.band_list) < 0 or max(self.band_list) >= int(nbands.min()):
                raise ValueError(f"bands must be 0-based band numbers below {int(nbands.min())}, got {list(bands)}")
        if int(worker_threads) < 1 or int(max_open) < 1:
            raise ValueError("worker_threads and max_open must be >= 1")

        self.paths = paths
        self.blobs = [bytes(b) for b in table.column("blob").to_pylist()]
        self.file_transforms = transforms_
        self.heights = np.array(table.column("height").to_pylist(), np.int64)
        self.widths = np.array(table.column("width").to_pylist(), np.int64)
        self.file_bounds = np.column_stack([np.array(table.column(c).to_pylist(), np.float64)
                                            for c in ("left", "bottom", "right", "top")])
        self.sample_dtype = np.dtype(dtypes[0])
        self.is_image = bool(is_image)
        self.dtype = dtype if dtype is not None else (torch.float32 if self.is_image else torch.long)
        self.nodata = nodata
        held = np.dtype(_NUMPY_OF.get(self.dtype, self.sample_dtype))  # where samples are assembled
        lo, hi = (0, 1) if held.kind == "b" else (np.iinfo(held).min, np.iinfo(held).max) if held.kind in "iu" \
            else (-np.inf, np.inf)
        if held.kind in "iub" and not (np.isfinite(nodata) and float(nodata).is_integer() and lo <= nodata <= hi):
            raise ValueError(f"nodata {nodata!r} cannot be held by the samples ({held}); pass a value of their "
                             "range, or dtype=torch.float32")
        self.transforms = transforms
        self.cache_bytes = cache_bytes
        self.verify = bool(verify)
        self.worker_threads = int(worker_threads)
        self.max_open = int(max_open)

        times = _times(table, time, n)
        self.time_ns = np.array([[s.value, e.value] for s, e in times], np.int64)
        b = self.file_bounds
        self._extent = (float(b[:, 0].min()), float(b[:, 2].max()), float(b[:, 1].min()), float(b[:, 3].max()),
                        pd.Timestamp(int(self.time_ns[:, 0].min())), pd.Timestamp(int(self.time_ns[:, 1].max())))
        geometry = shapely.box(self.file_bounds[:, 0], self.file_bounds[:, 1], self.file_bounds[:, 2],
                               self.file_bounds[:, 3])
        interval = pd.IntervalIndex.from_tuples(times, closed="both", name="datetime")
        self.index = GeoDataFrame({"filepath": paths}, index=interval, geometry=geometry,
                                  crs=pyproj.CRS.from_epsg(codes[0]))
        if res is None:
            res = (float(transforms_[0, 0]), float(-transforms_[0, 4]))
        self._res = (float(res), float(res)) if isinstance(res, (int, float)) else (float(res[0]), float(res[1]))
        self._images = OpenFiles(self.max_open, self.worker_threads)

    # -- TorchGeo's properties ------------------------------------------------------------------
    @property
    def bounds(self) -> tuple[slice, slice, slice]:
        """Bounding x, y and t slices of the index (the catalog's extent, found once: TorchGeo
        asks for it at every query)."""
        xmin, xmax, ymin, ymax, tmin, tmax = self._extent
        return slice(xmin, xmax, self.res[0]), slice(ymin, ymax, self.res[1]), slice(tmin, tmax, 1)

    @GeoDataset.crs.setter
    def crs(self, new_crs: pyproj.CRS | str | int) -> None:
        if new_crs == self.crs:
            return
        raise RumiError(f"a RumiDataset reads its files in their CRS ({self.crs.to_string()}) and cannot warp them "
                        f"to {pyproj.CRS.from_user_input(new_crs).to_string()}; put it first in `a & b` so the "
                        "other dataset is warped to it")

    # -- files --------------------------------------------------------------------------------
    def _image(self, f: int) -> Image:
        return self._images.get(f, lambda: rumimm.open(self.paths[f], header=self.blobs[f],
                                                       cache_bytes=self.cache_bytes, verify=self.verify))

    def close(self) -> None:
        """Close the files this process opened (they reopen on the next read)."""
        self._images.close()

    # -- planning -------------------------------------------------------------------------------
    def _rows(self, query: GeoSlice, x: slice, y: slice, t: slice) -> NDArray[np.intp]:
        """Catalog rows a query touches, in catalog order.

        Intervals are closed at both ends, the query's too: a file taken at one instant
        (a ``datetime`` column) meets the query ``[t:t]`` a sampler makes of it (TorchGeo's
        ``pandas.Interval`` test excludes a file that ends where the query starts).
        """
        start, stop = pd.Timestamp(t.start).value, pd.Timestamp(t.stop).value
        hit = np.flatnonzero((self.time_ns[:, 0] <= stop) & (self.time_ns[:, 1] >= start))
        hit = hit[:: int(t.step or 1)]
        b = self.file_bounds[hit]
        hit = hit[(b[:, 0] < x.stop) & (b[:, 2] > x.start) & (b[:, 1] < y.stop) & (b[:, 3] > y.start)]
        if hit.size == 0:
            raise IndexError(f"index: {query} not found in dataset with bounds: {self.bounds}")
        return hit

    def _pixels(self, f: int, start: float, res: float, n: int, axis: int) -> _Span | None:
        """Source pixel of each of the ``n`` output pixels along x (axis 0) or y (axis 1) of file ``f``.

        Returns (out0, out1, src0, src1, gather): output pixels [out0, out1) come from source
        pixels [src0, src1), one to one when ``gather`` is None, else ``gather`` indexes them.
        """
        a, _, c, _, e, fy = self.file_transforms[f]
        size = int(self.widths[f] if axis == 0 else self.heights[f])
        if axis == 0:
            pos = (start - c) / a  # output pixel 0's left edge, in source pixels
            step = res / a
        else:
            pos = (start - fy) / e  # output row 0's top edge (start is the query's ymax)
            step = res / -e
        if abs(step - 1) * n < _ALIGNED and abs(pos - round(pos)) < _ALIGNED:  # same grid: a shifted window
            k = round(pos)
            o0, o1 = max(0, -k), min(n, size - k)
            return (o0, o1, k + o0, k + o1, None) if o1 > o0 else None
        src = np.floor(pos + (np.arange(n) + 0.5) * step).astype(np.int64)  # nearest neighbour: pixel centres
        inside = np.flatnonzero((src >= 0) & (src < size))
        if inside.size == 0:
            return None
        o0, o1 = int(inside[0]), int(inside[-1]) + 1
        s0, s1 = int(src[o0]), int(src[o1 - 1]) + 1
        return o0, o1, s0, s1, src[o0:o1] - s0

    def _plan(self, query: GeoSlice) -> tuple[tuple[slice, slice], int, int, list[tuple[int, _Span, _Span]]]:
        """(H, W, pieces) of a query; a piece is (file, (y...), (x...)) as :meth:`_pixels` gives them."""
        x, y, t = self._disambiguate_slice(query)
        width = round((x.stop - x.start) / x.step)
        height = round((y.stop - y.start) / y.step)
        pieces = []
        for f in self._rows(query, x, y, t):
            px = self._pixels(int(f), x.start, x.step, width, 0)
            py = self._pixels(int(f), y.stop, y.step, height, 1)
            if px is not None and py is not None:
                pieces.append((int(f), py, px))
                if px[:2] == (0, width) and py[:2] == (0, height):
                    break  # this row covers the whole sample: the rows after it are hidden
        return (x, y), height, width, pieces[::-1]  # painted last to first: the first row wins

    # -- reading --------------------------------------------------------------------------------
    def _read(self, queries: Sequence[GeoSlice]) -> list[Sample]:
        plans = [self._plan(q) for q in queries]
        nb = len(self.band_list)
        tensors: list[Any] = list(self._outputs([(nb, h, w) for _, h, w, _ in plans]))
        outs = [t.numpy() if isinstance(t, torch.Tensor) else t for t in tensors]
        for out, (_, h, w, pieces) in zip(outs, plans, strict=True):
            if not any(py[:2] == (0, h) and px[:2] == (0, w) for _, py, px in pieces):
                out[...] = np.array(self.nodata).astype(out.dtype)  # as the sample holds it (checked at init)
        groups: dict[tuple[int, int], list] = {}  # one read_batch call per window size
        for n, (_, _, _, pieces) in enumerate(plans):
            for order, (f, py, px) in enumerate(pieces):
                groups.setdefault((py[3] - py[2], px[3] - px[2]), []).append((n, order, f, py, px))
        placed: list[tuple[int, int, NDArray[Any], _Span, _Span]] = []  # (sample, order, chip, py, px)
        with self._images.reading():  # the images held until read: another thread's read never closes them
            for (h, w), items in groups.items():
                images = [self._image(f) for _, _, f, _, _ in items]
                origins = np.array([(py[2], px[2]) for _, _, _, py, px in items], np.int64)
                block = rumimm.read_batch(images, origins, size=(h, w), bands=self.band_list)
                placed.extend((n, order, block[i], py, px) for i, (n, order, _, py, px) in enumerate(items))
        placed.sort(key=lambda item: (item[0], item[1]))  # per sample, last catalog row first
        for n, _, chip, py, px in placed:
            if py[4] is not None:
                chip = chip[:, py[4], :]
            if px[4] is not None:
                chip = chip[:, :, px[4]]
            outs[n][:, py[0]:py[1], px[0]:px[1]] = chip  # cast to the sample dtype on the way
        # bounds and transform are tensors of their own per sample: rows of one tensor per batch made a
        # forked worker's heap grow by tens of MB a batch with TorchGeo's collate (measured, glibc 2.36)
        return [self._sample(q, x, y, data) for q, ((x, y), _, _, _), data in zip(queries, plans, tensors, strict=True)]

    def _outputs(self, shapes: list[tuple[int, int, int]]) -> list[torch.Tensor] | list[NDArray[Any]]:
        """Where each sample is assembled, already in the sample dtype: views of one batch tensor
        when the samples share a shape, so :func:`stack_samples` returns that batch without
        copying it.

        In a ``DataLoader`` worker whose collate is :func:`stack_samples` (known once it has
        sent a batch on as it was read) the batch is placed in shared memory, which the
        worker sends without copying; elsewhere in ordinary memory: a batch that another
        collate function copies anyway would pay for shared memory's slower page faults
        for nothing."""
        if self.dtype not in _NUMPY_OF:  # a dtype numpy lacks (bfloat16, ...): torch casts in _sample
            return [np.empty(s, self.sample_dtype) for s in shapes]
        if len(set(shapes)) == 1:
            shape = (len(shapes), *shapes[0])
            if _collate_keeps_batches and torch.utils.data.get_worker_info() is not None:
                return list(_shared_empty(shape, self.dtype))
            return list(torch.empty(shape, dtype=self.dtype))
        return [torch.empty(s, dtype=self.dtype) for s in shapes]

    def _sample(self, query: GeoSlice, x: slice, y: slice, data: torch.Tensor | NDArray[Any]) -> Sample:
        """TorchGeo's sample dict of ``query``, whose disambiguated x and y slices are ``x``, ``y``."""
        # a tensor is what _outputs made, filled in self.dtype
        tensor = data if isinstance(data, torch.Tensor) else torch.from_numpy(_torch_ready(data)).to(self.dtype)
        sample = {"bounds": self._slice_to_tensor(query),
                  "transform": torch.tensor([x.step, 0.0, x.start, 0.0, -y.step, y.stop, 0.0, 0.0, 1.0])}
        if self.is_image:
            sample["image"] = tensor
        else:
            sample["mask"] = tensor.squeeze(-3)
        if self.transforms is not None:
            sample = self.transforms(sample)
        return sample

    def __getitem__(self, query: GeoSlice) -> Sample:
        """The sample of one GeoSlice ``[xmin:xmax:xres, ymin:ymax:yres, tmin:tmax:tstep]``.

        Raises
        ------
        IndexError
            No file meets the query.
        """
        return self._read([query])[0]

    def __getitems__(self, queries: Iterable[GeoSlice]) -> list[Sample]:
        """Samples of many GeoSlices, read together (what a ``DataLoader`` calls for a batch)."""
        return self._read(list(queries))

    def __repr__(self) -> str:
        return (f"<rumimm RumiDataset of {len(self.paths)} files, {self.crs.to_string()}, "
                f"res {self.res[0]:g} x {self.res[1]:g}>")

