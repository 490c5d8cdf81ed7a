"""Stacks of images: Cube (grid-aligned, a lazy (N, B, Y, X) array), ImageCollection
(images on different grids) and read_batch (equal-size windows from many files).

All three read through the read engine (``engine.read_windows``) in one kernel call per read: the frames
of every image and window are planned together, decoded in parallel, a frame that
several windows need is decoded once, and every window is copied into its slot of
one (N, B, h, w) output.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast, overload

import numpy as np

from rumimm._deprecation import UNSET
from rumimm.errors import RumiError, WindowError
from rumimm.format.georef import split_georef_block
from rumimm.format.v2 import Grid2
from rumimm.format.window import Run, band_selection, select, window_bounds
from rumimm.reader import engine, layouts
from rumimm.reader.image import Image, frame_source, georef_block, read_block
from rumimm.reader.rasterio_surface import RasterioSurface, indexes_to_bands
from rumimm.store import get_ranges_many

if TYPE_CHECKING:
    from typing import Self

    from affine import Affine
    from numpy.typing import ArrayLike, DTypeLike, NDArray

    from rumimm._typing import BlobArg, StrPath
    from rumimm.format.pam import Metadata

__all__ = ["Cube", "ImageCollection", "read_batch"]


def _open_all(sources: Iterable[Image | StrPath], headers: Iterable[BlobArg | None] | None, cache_bytes: int | None,
              verify: bool, storage_options: Mapping[str, Any] | None = None) -> tuple[list[Image], list[bool]]:
    """Images for a list of Images or paths; returns (images, opened-here flags)."""
    items = list(sources)
    if headers is not None:
        headers = list(headers)
        if len(headers) != len(items):
            raise ValueError(f"got {len(items)} images but {len(headers)} headers")
    images: list[Image] = []
    owned: list[bool] = []
    by_path: dict[tuple[str, bytes | None], Image] = {}
    try:
        for i, item in enumerate(items):
            if isinstance(item, Image):
                images.append(item)
                owned.append(False)
                continue
            hdr = headers[i] if headers is not None else None
            key = (str(item), None if hdr is None else bytes(hdr))
            img = by_path.get(key)
            if img is None:
                img = by_path[key] = Image(item, hdr, cache_bytes=cache_bytes, verify=verify,
                                           storage_options=storage_options)
                owned.append(True)
            else:
                owned.append(False)
            images.append(img)
    except BaseException:
        for img in by_path.values():
            img.close()
        raise
    return images, owned


def _close_owned(images: Sequence[Image], owned: Sequence[bool]) -> None:
    """Close the images :func:`_open_all` opened (flag True); leave the caller's open."""
    for img, own in zip(images, owned, strict=True):
        if own:
            img.close()


def _unique(images: Sequence[Image]) -> tuple[list[Image], NDArray[np.int64]]:
    """Distinct images (by identity) and, for each input, its index among them."""
    ids: dict[int, int] = {}
    uniq: list[Image] = []
    index = np.empty(len(images), np.int64)
    for i, img in enumerate(images):
        j = ids.get(id(img))
        if j is None:
            j = ids[id(img)] = len(uniq)
            uniq.append(img)
        index[i] = j
    return uniq, index


def _read_stack(images: Sequence[Image], bands: NDArray[np.int64], y0: int | NDArray[np.int64],
                x0: int | NDArray[np.int64], y: Run, x: Run, out4: NDArray[np.uint8]) -> None:
    """Read runs ``y``, ``x`` shifted by (y0[n], x0[n]) of images[n] for every n into out4 (uint8 4-D)."""
    if any(im.header.interleaved for im in images):
        # spec 0.2 cells interleaved per pixel (h w b, ...): each image places its own frames
        y0s, x0s = np.broadcast_to(y0, (len(images),)), np.broadcast_to(x0, (len(images),))
        runs = [(Run(int(y0s[n]) + y.start, y.step, y.count), Run(int(x0s[n]) + x.start, x.step, x.count))
                for n in range(len(images))]
        raw = _interleaved_bytes(images, runs)
        for n, im in enumerate(images):
            if im.header.interleaved:
                block = layouts.read_interleaved(frame_source(im), bands, *runs[n], None, raw.get(id(im)))
            else:
                block = read_block(im, bands, *runs[n], None)
            out4[n] = block.view(np.uint8).reshape(out4.shape[1:])
        return
    uniq, index = _unique(images)
    windows = np.empty((len(images), 3), np.int64)
    windows[:, 0] = index
    windows[:, 1] = y0
    windows[:, 2] = x0
    engine.read_windows([frame_source(im) for im in uniq], windows, bands, y, x, out4)


def _interleaved_bytes(images: Sequence[Image], runs: Sequence[tuple[Run, Run]]) -> dict[int, dict[int, Any]]:
    """``{id(image): {frame: compressed bytes}}``: every interleaved image's frames of a batch, got together
    (``store.get_ranges_many``: views into local files' mappings; one request per remote object and run of
    nearby frames, all in flight at once)."""
    wanted: dict[int, tuple[Image, set[int]]] = {}
    for im, (y, x) in zip(images, runs, strict=True):
        if im.header.interleaved:
            entry = wanted.setdefault(id(im), (im, set()))
            entry[1].update(layouts.interleaved_frames(cast(Grid2, im.header.grid), y, x))
    if not wanted:
        return {}
    jobs = []
    for im, ks in wanted.values():
        fs = frame_source(im)
        order = sorted(ks)
        jobs.append((id(im), order, fs.live_store(), [fs.frame_range(k) for k in order]))
    got = get_ranges_many([(store, ranges) for _, _, store, ranges in jobs])
    return {key: dict(zip(order, bufs, strict=True)) for (key, order, _, _), bufs in zip(jobs, got, strict=True)}


def _georef_block(img: Image, block: bytes | None = None) -> bytes | None:
    """The 160 bytes of the two georeferencing tags (``block`` when already read), or None when no CRS is set."""
    block = georef_block(img) if block is None else block
    _, keys = split_georef_block(block)
    if int(keys[7]) == 0:  # GTModelTypeGeoKey 0: undefined georeferencing
        return None
    return block


def _common_steps(images: Sequence[Image]) -> int | None:
    """T when the images are spec 0.2 files of T > 1 steps that one read can batch, None for (B, Y, X) images."""
    ref = next((j for j, img in enumerate(images) if img.ndim == 4), None)
    if ref is None:
        return None
    first = images[ref]
    for i, img in enumerate(images):
        if img.ndim != 4 or img.time_count != first.time_count:
            raise RumiError(f"image {i} ({img.path}) has {img.time_count} time step(s) but image {ref} "
                            f"({first.path}) {first.time_count}; read_batch returns one array")
    return first.time_count


def _check_aligned(images: Sequence[Image]) -> None:
    first = images[0]
    ref_geo = None
    for i, img in enumerate(images):
        for name, a, b in (("shape", _step_shape(first), _step_shape(img)), ("tile", first.tile, img.tile),
                           ("dtype", first.dtype, img.dtype)):
            if a != b:
                raise RumiError(f"images 0 and {i} are not grid-aligned: {name} {a} != {b} "
                                f"({first.path}, {img.path}); use an ImageCollection")
        block = georef_block(img)
        if ref_geo is not None and block == ref_geo[1]:
            continue  # the same bytes as the reference's (a search result of one grid): nothing to parse
        geo = _georef_block(img, block)
        if geo is None:
            continue
        if ref_geo is None:
            ref_geo = (i, geo)
        elif geo != ref_geo[1]:
            j = ref_geo[0]
            ref = images[j]
            raise RumiError(f"images {j} and {i} are not grid-aligned: transform/crs {ref.transform} {ref.crs} != "
                            f"{img.transform} {img.crs}; use an ImageCollection")


def _step_shape(img: Image) -> tuple[int, int, int]:
    """(B, Y, X) of one time step: the image's shape, or a spec 0.2 file's (T, B, Y, X) without T."""
    b, y, x = img.shape[-3:]
    return (b, y, x)


def _steps(images: Sequence[Image]) -> tuple[np.ndarray, np.ndarray]:
    """The Cube's items: for each, the index of its image and its time step (0 for a (B, Y, X) image)."""
    counts = np.array([img.shape[0] if img.ndim == 4 else 1 for img in images], np.int64)
    image = np.repeat(np.arange(len(images), dtype=np.int64), counts)
    starts = np.cumsum(counts) - counts
    step = np.arange(image.shape[0], dtype=np.int64) - starts[image]
    return image, step


class Cube(RasterioSurface):
    """Grid-aligned images stacked into a lazy (N, B, Y, X) array.

    Parameters
    ----------
    images : sequence of Image or path
        Same shape, tile size and dtype; the same transform and CRS where set.
        Frame units may differ.  Paths are opened here (and closed by
        :meth:`close`); Images passed in stay open.
    headers : sequence of bytes, optional
        Header blobs of the paths, in order (see :func:`rumimm.open`).
    cache_bytes, verify, storage_options
        Passed to :func:`rumimm.open` for the paths (which may be remote URIs).

    Indexing follows numpy on (item, band, y, x); each read decodes the frames of
    all selected images in one parallel pass.  A spec 0.2 file of T time steps
    contributes T items, in its time order, so a Cube of such files is their time
    series end to end (N is the sum of the steps; :attr:`steps` maps items back).

    Examples
    --------
    >>> cube = rumimm.Cube(["t0.rumi", "t1.rumi", "t2.rumi"])   # doctest: +SKIP
    >>> chips = cube[:, :, 512:768, 512:768]                     # (3, B, 256, 256)
    """

    def __init__(self, images: Iterable[Image | StrPath], headers: Iterable[BlobArg | None] | None = None, *,
                 cache_bytes: int | None = None, verify: bool = True,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        imgs, owned = _open_all(images, headers, cache_bytes, verify, storage_options)
        try:
            if not imgs:
                raise ValueError("a Cube needs at least one image")
            _check_aligned(imgs)
        except BaseException:
            _close_owned(imgs, owned)
            raise
        self._images = imgs
        self._owned = owned
        self._item_image, self._item_step = _steps(imgs)

    # -- container --------------------------------------------------------------------
    @property
    def item_images(self) -> NDArray[np.int64]:
        """For each item of the leading axis, the index in ``images`` of the file it comes from."""
        return self._item_image

    @property
    def images(self) -> list[Image]:
        return list(self._images)

    def __len__(self) -> int:
        return int(self._item_image.shape[0])

    @property
    def steps(self) -> list[tuple[int, int]]:
        """For each item: (index of its image in :attr:`images`, its time step in that image)."""
        return list(zip(self._item_image.tolist(), self._item_step.tolist(), strict=True))

    @property
    def time(self) -> list[Any] | None:
        """Each item's time (spec 0.2 files, as :attr:`rumimm.Image.time`), or None when an image has none."""
        times = [img.time for img in self._images]
        if any(t is None for t in times):
            return None
        return [cast("list[Any]", times[i])[t] for i, t in self.steps]

    def close(self) -> None:
        """Close the images this Cube opened (idempotent)."""
        _close_owned(self._images, self._owned)

    @property
    def closed(self) -> bool:
        return any(img.closed for img in self._images)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_rebuild, (Cube, self._images, self._owned))

    def __repr__(self) -> str:
        n, b, y, x = self.shape
        return f"<rumimm.Cube ({n}, {b}, {y}, {x}) {self.dtype}>"

    # -- metadata ---------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(N, B, Y, X): N items (one per image, or per time step of a spec 0.2 file)."""
        return (len(self), *_step_shape(self._images[0]))

    @property
    def dtype(self) -> np.dtype:
        return self._images[0].dtype

    @property
    def ndim(self) -> int:
        return 4

    @property
    def nbytes(self) -> int:
        n, b, y, x = self.shape
        return n * b * y * x * self.dtype.itemsize

    @property
    def tile(self) -> tuple[int, int]:
        return self._images[0].tile

    def _georeferenced(self) -> Image:
        for img in self._images:
            if img.crs is not None:
                return img
        return self._images[0]

    @property
    def metadata(self) -> Metadata:
        """The first image's band metadata (nodata, descriptions, ...; see ``Image.metadata``)."""
        return self._images[0].metadata

    @property
    def transform(self) -> Affine | None:
        return self._georeferenced().transform

    @property
    def crs(self) -> str | None:
        return self._georeferenced().crs

    @property
    def pixel_is_point(self) -> bool:
        return self._georeferenced().pixel_is_point

    @property
    def bounds(self) -> tuple[float, float, float, float] | None:
        return self._georeferenced().bounds

    @property
    def res(self) -> tuple[float, float] | None:
        return self._georeferenced().res

    # -- reading ----------------------------------------------------------------------
    def __getitem__(self, key: Any) -> NDArray[Any]:
        sel = select(key, self.shape)
        items, bands = sel.lists
        block = self._read(items, bands, sel.y, sel.x, None)
        return block if sel.remap is None else block[sel.remap]

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> NDArray[Any]:
        a = self[...]
        return a if dtype is None else a.astype(dtype, copy=False)

    def read(self, indexes: int | Sequence[int] | None = None, window: Any = None, out: NDArray[Any] | None = None,
             *, bands: Any = UNSET) -> NDArray[Any]:
        """Every image's bands in a window: (N, n, h, w), or (N, h, w) for an int band.

        Arguments as :meth:`rumimm.Image.read`: ``indexes`` from 1 (rasterio's); ``bands``
        (from 0) is deprecated: ``read(b + 1)`` or ``cube[:, b]``.
        """
        shape = self.shape
        bands = indexes_to_bands(indexes, bands, shape[1], "Cube")
        from rumimm.format.window import select_read

        sel = select_read(bands, window, shape[1:])
        items = np.arange(shape[0], dtype=np.int64)
        shape = (len(items), sel.lists[0].shape[0], sel.y.count, sel.x.count)
        remap = None if sel.remap is None else (slice(None), *sel.remap)
        if out is not None:
            want = shape if remap is None else np.empty(shape, np.uint8)[remap].shape
            _check_out(out, want, self.dtype)
            if remap is None and out.flags.c_contiguous:
                return self._read(items, sel.lists[0], sel.y, sel.x, out)
            block = self._read(items, sel.lists[0], sel.y, sel.x, None)
            out[...] = block if remap is None else block[remap]
            return out
        block = self._read(items, sel.lists[0], sel.y, sel.x, None)
        return block if remap is None else block[remap]

    def _read(self, items: ArrayLike, bands: NDArray[np.int64], y: Run, x: Run, out: NDArray[Any] | None
              ) -> NDArray[Any]:
        items = np.asarray(items, np.int64)
        if out is None:
            out = np.empty((len(items), bands.shape[0], y.count, x.count), self.dtype)
        if not out.size:
            return out
        image, step = self._item_image[items], self._item_step[items]
        images = [self._images[int(i)] for i in image]
        if all(img.ndim == 3 for img in self._images):
            _read_stack(images, bands, 0, 0, y, x, out.view(np.uint8))
            return out
        # spec 0.2 files of several steps: a step's bands are virtual bands of its file's grid
        # (format.units), which differ by step and file; read each group of items that share them
        groups: dict[tuple, list[int]] = {}
        for n, (img, t) in enumerate(zip(images, step.tolist(), strict=True)):
            groups.setdefault(_virtual_key(img, t, bands), []).append(n)
        for key, members in groups.items():
            vbands = np.asarray(key, np.int64)
            part = [images[n] for n in members]
            if len(members) == len(items):
                _read_stack(part, vbands, 0, 0, y, x, out.view(np.uint8))
            else:
                block = np.empty((len(members), bands.shape[0], y.count, x.count), self.dtype)
                _read_stack(part, vbands, 0, 0, y, x, block.view(np.uint8))
                out[members] = block
        return out


def _virtual_groups(images: Sequence[Image], steps: int, bands: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """The images (indices) that share the grid bands holding ``bands`` of every step, with those bands."""
    keys: dict[tuple[bool, int], list[int]] = {}
    for i, img in enumerate(images):  # band-major grids number them by T alone, which all share
        grid = cast(Grid2, img.header.grid)
        keys.setdefault((grid.band_major, 0 if grid.band_major else grid.bands), []).append(i)
    return [(np.asarray(members, np.int64),
             cast(Grid2, images[members[0]].header.grid).virtual_bands(np.arange(steps), bands).reshape(-1))
            for members in keys.values()]


def _virtual_key(img: Image, t: int, bands: np.ndarray) -> tuple[int, ...]:
    """The grid bands holding ``bands`` of step ``t`` of ``img``, as a hashable tuple."""
    if img.ndim == 3:
        return tuple(bands.tolist())
    grid = img.header.grid
    assert isinstance(grid, Grid2)  # only a spec 0.2 file has steps
    return tuple(grid.virtual_bands([t], bands).reshape(-1).tolist())


def _check_out(out: object, shape: Sequence[int], dtype: np.dtype[Any]) -> None:
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy array, got {type(out).__name__}")
    if out.shape != tuple(shape) or out.dtype != dtype:
        raise ValueError(f"out must have shape {tuple(shape)} and dtype {dtype}, got {out.shape} and {out.dtype}")
    if not out.flags.writeable:
        raise ValueError("out must be writable")


class ImageCollection:
    """Images that need not share a grid (different sizes, tiles, CRSs or dtypes).

    A sequence of :class:`~rumimm.Image`; :meth:`cubes` groups the grid-aligned
    ones into Cubes, :meth:`read_batch` reads equal-size windows from them.
    """

    def __init__(self, images: Iterable[Image | StrPath], headers: Iterable[BlobArg | None] | None = None, *,
                 cache_bytes: int | None = None, verify: bool = True,
                 storage_options: Mapping[str, Any] | None = None) -> None:
        self._images, self._owned = _open_all(images, headers, cache_bytes, verify, storage_options)

    def __len__(self) -> int:
        return len(self._images)

    def __iter__(self) -> Iterator[Image]:
        return iter(self._images)

    @overload
    def __getitem__(self, i: slice) -> ImageCollection: ...
    @overload
    def __getitem__(self, i: int) -> Image: ...
    def __getitem__(self, i: int | slice) -> Image | ImageCollection:
        if isinstance(i, slice):
            sub = ImageCollection(self._images[i])
            return sub
        return self._images[operator.index(i)]

    @property
    def images(self) -> list[Image]:
        return list(self._images)

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        return [img.shape for img in self._images]

    def close(self) -> None:
        """Close the images this collection opened (idempotent)."""
        _close_owned(self._images, self._owned)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (_rebuild, (ImageCollection, self._images, self._owned))

    def __repr__(self) -> str:
        return f"<rumimm.ImageCollection of {len(self._images)} images>"

    def cubes(self) -> list[Cube]:
        """The grid-aligned groups, in first-appearance order, each as a Cube."""
        groups: dict[tuple[Any, ...], list[Image]] = {}
        for img in self._images:
            key = (_step_shape(img), img.tile, img.dtype.str, str(img.dtype), _georef_block(img))
            groups.setdefault(key, []).append(img)
        return [Cube(g) for g in groups.values()]

    def read_batch(self, windows: Any, *, bands: int | Sequence[int] | None = None, out: NDArray[Any] | None = None,
                   size: tuple[int, int] | None = None) -> NDArray[Any]:
        """:func:`read_batch` over this collection's images (one window each)."""
        return read_batch(self._images, windows, bands=bands, out=out, size=size)

    @classmethod
    def from_catalog(cls, table_or_path: Any, where: Any = None, *, cache_bytes: int | None = None, verify: bool = True,
                     storage_options: Mapping[str, Any] | None = None) -> ImageCollection:
        """The images of a catalog's rows, opened with their blobs (no IFD is read).

        ``table_or_path`` is a :func:`rumimm.catalog` table or its Parquet file;
        ``where`` selects rows: a bbox ``(xmin, ymin, xmax, ymax)`` in the catalog's
        CRS, a pyarrow compute expression or a boolean mask.  Paths may be remote URIs
        (``storage_options`` as for :func:`rumimm.open`); opening them sends no request.
        """
        from rumimm.reader.catalog_table import catalog_images

        _, _, images = catalog_images(table_or_path, where, cache_bytes=cache_bytes, verify=verify,
                                      storage_options=storage_options)
        coll = cls(images)
        coll._owned = [True] * len(images)
        return coll


_UNBOUNDED = 1 << 62  # an image size no window end reaches: a window read against no image


def _rebuild(cls: type[Cube] | type[ImageCollection], images: list[Image], owned: list[bool]
             ) -> Cube | ImageCollection:
    """An unpickled Cube or ImageCollection: it closes the images it opened, as the original did."""
    obj = cls(images)
    obj._owned = list(owned)
    return obj


def _parse_windows(windows: Any, images: Sequence[Image], size: Sequence[int] | None
                   ) -> tuple[NDArray[np.int64], NDArray[np.int64], int, int]:
    """(y0 array, x0 array, h, w) from N windows (or one window for all), each inside its image."""
    n = len(images)
    if isinstance(windows, np.ndarray) and windows.ndim == 2 and windows.shape[1] == 2:
        if size is None:
            raise ValueError("an (N, 2) array of window origins needs size=(h, w)")
        if windows.dtype.kind not in "iu":  # as numpy takes indices: a float origin is refused, not cut
            raise WindowError(f"window origins must be integers, got an array of {windows.dtype}")
        starts = windows.astype(np.int64)
        if starts.shape[0] != n:
            raise ValueError(f"got {n} images but {starts.shape[0]} windows")
        h, w = (operator.index(v) for v in size)
        if h < 0 or w < 0:
            raise WindowError(f"window size must be >= 0, got {size}")
        return np.ascontiguousarray(starts[:, 0]), np.ascontiguousarray(starts[:, 1]), h, w
    if hasattr(windows, "row_off"):  # one rasterio Window
        wins = [windows] * n
    else:
        wins = list(windows)
        if wins and not _looks_like_many(wins):
            wins = [windows] * n
    if n == 0 and not wins and size is None:  # one window, no image: its size where its ends say it
        try:
            ya, yb, xa, xb = window_bounds(windows, _UNBOUNDED, _UNBOUNDED)
        except WindowError:
            ya = yb = xa = xb = 0
        if max(yb, xb) < _UNBOUNDED:
            return np.empty(0, np.int64), np.empty(0, np.int64), yb - ya, xb - xa
    if len(wins) != n:
        raise ValueError(f"got {n} images but {len(wins)} windows")
    y0 = np.empty(n, np.int64)
    x0 = np.empty(n, np.int64)
    hw: tuple[int, ...] | None = None
    for i, w in enumerate(wins):  # an open end (slice(2, None)) is the image's own
        try:
            ya, yb, xa, xb = window_bounds(w, images[i].height, images[i].width, name=f"window {i}")
        except WindowError as exc:
            raise WindowError(f"window {i}, of image {i} ({images[i].path}): {exc}") from None
        cur = (ya, xa, yb - ya, xb - xa)
        if hw is None:
            hw = cur[2:]
        elif cur[2:] != hw:
            raise WindowError(f"window {i} is {cur[2]} x {cur[3]}, but window 0 is {hw[0]} x {hw[1]}; "
                              "read_batch needs equal-size windows")
        y0[i], x0[i] = cur[0], cur[1]
    if size is not None and hw is not None and tuple(size) != hw:
        raise WindowError(f"windows are {hw[0]} x {hw[1]}, but size is {tuple(size)}")
    if hw is None:
        hw = (0, 0) if size is None else tuple(size)
    return y0, x0, hw[0], hw[1]


def _looks_like_many(wins: Sequence[Any]) -> bool:
    """True for [w0, w1, ...]; False for one window ((y0, y1), (x0, x1)) or (slice, slice)."""
    first = wins[0]
    if hasattr(first, "row_off") or isinstance(first, slice):
        return hasattr(first, "row_off")
    try:
        inner = first[0]
    except (TypeError, IndexError):
        return False
    return not isinstance(inner, (int, np.integer))


def _batch_bands(bands: Any, images: Sequence[Image]) -> tuple[NDArray[np.int64], tuple | None]:
    """``band_selection`` of ``bands`` for every image: it must pick the same bands of each.

    As ``Image.read`` takes it: an int (axis dropped), ints, negatives from the end, a
    boolean mask.  A negative index or a mask means other bands in images of other band
    counts, so it is refused there rather than read against one image's count.
    """
    counts = sorted({img.count for img in images})
    if bands is None and len(counts) > 1:
        raise WindowError("images have different band counts; pass bands=")
    blist, picked = band_selection(bands, counts[0])
    for c in counts[1:]:
        other, other_picked = band_selection(bands, c)
        if picked is None or other_picked is None:
            same = picked is other_picked and np.array_equal(other, blist)
        else:
            same = np.array_equal(other, blist) and all(
                np.array_equal(a, b) for a, b in zip(picked, other_picked, strict=True))
        if not same:
            raise WindowError(f"bands={bands!r} picks other bands in images of {counts[0]} and of {c} bands "
                              "(negatives and masks count by each image's bands); name the bands by 0-based "
                              "number")
    return blist, picked


def _empty_batch(bands: Any, h: int, w: int, out: NDArray[Any] | None) -> NDArray[Any]:
    """``read_batch`` of no images: (0, n_bands, h, w), or (0, h, w) for an int band; into ``out`` when given."""
    if bands is None:
        shape: tuple[int, ...] = (0, 0, h, w)
    elif isinstance(bands, (int, np.integer)):
        shape = (0, h, w)
    else:
        picked = np.asarray(bands)
        shape = (0, int(np.count_nonzero(picked)) if picked.dtype == bool else len(picked), h, w)
    if out is None:
        return np.empty(shape, np.uint8)
    _check_out(out, shape, out.dtype)
    return out


def read_batch(sources: Iterable[Image | StrPath], windows: Any, headers: Iterable[BlobArg | None] | None = None, *,
               bands: int | Sequence[int] | NDArray[Any] | None = None, out: NDArray[Any] | None = None,
               size: Sequence[int] | None = None, cache_bytes: int | None = None,
               verify: bool = True, storage_options: Mapping[str, Any] | None = None) -> NDArray[Any]:
    """Read N equal-size windows, window n from image n, into one (N, B, h, w) array.

    Parameters
    ----------
    sources : sequence of Image or path
        One per window; repeat an Image to read many windows of one file.  Paths
        are opened for this call only (give ``headers`` to skip the IFD).
    windows : sequence of windows, one window, or an (N, 2) int array
        Each ``((y0, y1), (x0, x1))``, ``(slice, slice)`` or a rasterio
        ``Window``, all of the same size; one window applies to every image; an
        (N, 2) array holds window origins (y0, x0) and needs ``size``.
    headers : sequence of bytes, optional
        Header blobs for the paths in ``sources``.
    bands : int, sequence of int or boolean mask, optional
        Bands to read from every image (default all; 0-based, negatives from the
        end; an int drops the band axis), as numpy indexes the band axis.
    out : numpy.ndarray, optional
        Filled in place and returned.
    size : (h, w), optional
        Window size, for an (N, 2) array of origins.
    storage_options : dict, optional
        For paths that are remote URIs (see :func:`rumimm.open`).

    Returns
    -------
    numpy.ndarray
        (N, n_bands, h, w), or (N, h, w) for an int band; for spec 0.2 files of T > 1
        time steps (all with the same T), (N, T, n_bands, h, w) or (N, T, h, w).  Frames shared by
        several windows are decoded once; all are decoded in one parallel pass.
        Remote images: the batch's new frames are fetched together first, one ranged
        request per run of nearby frames of each object, all in flight at once.

    Raises
    ------
    WindowError
        A window leaves its image, a band is missing in an image, or the windows
        differ in size.
    RumiError
        The images do not share a dtype.
    """
    images, owned = _open_all(sources, headers, cache_bytes, verify, storage_options)
    try:
        n = len(images)
        y0, x0, h, w = _parse_windows(windows, images, size)
        if n == 0:
            return _empty_batch(bands, h, w, out)
        dtype = images[0].dtype
        steps = _common_steps(images)  # spec 0.2 files of T > 1 steps: (N, T, n_bands, h, w)
        for i, img in enumerate(images):
            if img.dtype != dtype:
                raise RumiError(f"image {i} ({img.path}) is {img.dtype} but image 0 is {dtype}; "
                                "read_batch returns one array")
            ny, nx = img.height, img.width
            if not (y0[i] >= 0 and y0[i] + h <= ny and x0[i] >= 0 and x0[i] + w <= nx):
                raise WindowError(f"window {i} [{y0[i]}:{y0[i] + h}, {x0[i]}:{x0[i] + w}] leaves image {i} "
                                  f"({img.path}) of {ny} x {nx} pixels")
        blist, picked = _batch_bands(bands, images)
        remap: tuple | None = None if picked is None else (slice(None), *picked)
        shape: tuple[int, ...] = (n, blist.size, h, w)
        groups = [(np.arange(n), blist)]
        if steps:
            # every (step, band) pair is a virtual band of the grid, read in (step, band) order; a
            # time-major grid numbers them by its band count, so images of other counts read apart
            groups = _virtual_groups(images, steps, blist)
            shape = (n, steps, blist.size, h, w)
            if remap is not None:
                remap = (remap[0], slice(None), *remap[1:])
        final = shape if remap is None else np.empty(shape, np.uint8)[remap].shape
        if out is not None:
            _check_out(out, final, dtype)
        direct = out is not None and remap is None and out.flags.c_contiguous
        block = out if direct and out is not None else np.empty(shape, dtype)
        if block.size:
            flat = block.reshape(n, -1, h, w).view(np.uint8)
            if len(groups) == 1:  # the usual batch: straight into the block
                _read_stack(images, groups[0][1], y0, x0, Run(0, 1, h), Run(0, 1, w), flat)
            else:
                for members, vbands in groups:
                    part = np.empty((members.size, *flat.shape[1:]), np.uint8)
                    _read_stack([images[i] for i in members], vbands, y0[members], x0[members], Run(0, 1, h),
                                Run(0, 1, w), part)
                    flat[members] = part
        result = block if remap is None else block[remap]
        if out is not None and not direct:
            out[...] = result
            return out
        return result
    finally:
        _close_owned(images, owned)
