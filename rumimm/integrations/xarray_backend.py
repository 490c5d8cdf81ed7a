"""xarray backend: ``xr.open_dataset("scene.rumi", engine="rumimm")``.

A file opens lazily as one variable, ``band_data`` with dims ``(band, y, x)`` (a
Cube or an ImageCollection of aligned images gets a leading dim, ``time`` by
default).  Indexing the variable becomes rumimm window reads, so nothing is decoded
at open and a chip decodes only the frames it touches.  Coordinates follow what
rioxarray makes of a GeoTIFF: ``x``/``y`` at pixel centres, a ``spatial_ref``
coordinate with the CF grid mapping, ``crs_wkt`` and a GDAL ``GeoTransform``, so
``.rio.crs``, ``.rio.transform()`` and ``.rio.bounds()`` work without conversion.
The preferred chunks are those of :func:`rumimm.to_dask`: whole frames, all bands
together, sized by Dask's ``array.chunk-size``, so ``chunks={}`` gives a handful of tasks
for a large file rather than one per frame; on a Dask worker the variable reads through
the images that process keeps open (:mod:`rumimm.integrations.worker_images`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from rumimm.errors import RumiError
from rumimm.integrations.dask_array import auto_chunks, frame_chunks
from rumimm.integrations.worker_images import held
from rumimm.reader.rasterio_surface import nodata_key

if TYPE_CHECKING:
    from affine import Affine
    from numpy.typing import DTypeLike, NDArray
    from xarray.backends.common import T_PathFileOrDataStore

    from rumimm._typing import BlobArg, StrPath
    from rumimm.integrations.dask_array import HeaderArg
    from rumimm.reader.cube import Cube, ImageCollection
    from rumimm.reader.image import Image

    #: What the backend reads windows from: one image, or a stack of aligned ones.
    Source: TypeAlias = Image | Cube
    #: What opens as a Dataset: a path or URI, an Image, a Cube, an ImageCollection, or a list of paths/Images.
    Openable: TypeAlias = StrPath | Image | Cube | ImageCollection | Sequence[StrPath | Image]

__all__ = ["RumiBackendArray", "RumiBackendEntrypoint", "gdal_transform", "pixel_centres", "spatial_coords"]

VARIABLE = "band_data"  # the name rioxarray's own xarray backend gives a raster's values


def _outer_read(source: Source, key: tuple[Any, ...]) -> NDArray[Any]:
    """``source[key]`` with xarray's outer semantics (each 1-D array picks along its own axis).

    Numpy broadcasts index arrays together, and counts an int beside an array as one of
    them (their axis then goes first when a slice parts them); rumimm follows numpy.  So
    with an array in the key, ints are read as one-long slices and dropped at the end,
    and every array after the first is read as its span and then taken along its axis.
    """
    arrays = [i for i, k in enumerate(key) if isinstance(k, np.ndarray)]
    if not arrays:
        return np.asarray(source[key])
    read_key, takes, ints = list(key), [], []
    for i, k in enumerate(key):
        n = source.shape[i]
        if isinstance(k, (int, np.integer)):
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {i} with size {n}")
            j = int(k) + n if k < 0 else int(k)
            read_key[i] = slice(j, j + 1)
            ints.append(i)
        elif i in arrays[1:]:
            k = np.where(k < 0, k + n, k).astype(np.int64)
            lo = int(k.min()) if k.size else 0
            hi = int(k.max()) + 1 if k.size else 0
            read_key[i] = slice(lo, hi)
            takes.append((i, k - lo))
    block = np.asarray(source[tuple(read_key)])
    for axis, idx in takes:
        block = np.take(block, idx, axis=axis)
    if ints:
        block = block[tuple(0 if i in ints else slice(None) for i in range(block.ndim))]
    return block


class RumiBackendArray(BackendArray):
    """A lazy view of an Image or Cube for xarray: indexing reads windows.

    Pickles as the source does (path and blob), so Dask graphs stay small; a single
    image pickles as its ``(path, blob[, storage_options])`` and reads, where it lands,
    through the image that process keeps open for it (one open per worker, not per task).
    """

    def __init__(self, source: Source, decode: Decode | None = None) -> None:
        self.source = source
        self.shape = tuple(source.shape)
        self.decode = decode
        self.dtype = np.dtype(source.dtype) if decode is None else decode.dtype
        self.graph_source: tuple | None = None

    def __getstate__(self) -> dict:
        from rumimm.reader.image import Image

        state = dict(self.__dict__)
        src = self.source
        if isinstance(src, Image) and not src.closed:
            path = src.uri if src.remote else os.path.abspath(src.path)
            options = src.storage_options
            blob = bytes(src.header.blob)
            state["graph_source"] = (path, blob) if options is None else (path, blob, options)
            state["source"] = None
        return state

    def __getitem__(self, key: indexing.ExplicitIndexer) -> Any:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._raw)

    def _raw(self, key: tuple[Any, ...]) -> NDArray[Any]:
        if self.source is not None:
            block = _outer_read(self.source, key)
        else:
            with held(self.graph_source) as img:  # open until read, whatever other threads open meanwhile
                block = _outer_read(img, key)
        return block if self.decode is None else self.decode.apply(block, key, len(self.shape) - 3)


class Decode:
    """rioxarray's ``masked`` / ``mask_and_scale`` for one image's bands: nodata to NaN, then scale and offset.

    As rioxarray: masking promotes the dtype as xarray does (``maybe_promote``: float32
    for 8 and 16-bit integers and float32, float64 otherwise) and puts NaN where a
    band's sample equals its nodata; scaling then multiplies each band by its scale and
    adds its offset, in that dtype.  A stack whose images differ in nodata, scales or
    offsets has a row of them per image (``rows``) and ``item_rows`` giving each item
    of the leading axis its row: every item is decoded as its own file would be.
    """

    def __init__(self, dtype: DTypeLike, nodatavals: Iterable[float | None], scales: Sequence[float],
                 offsets: Sequence[float], scale: bool, *, rows: Sequence[tuple] = (),
                 item_rows: NDArray[np.int64] | None = None) -> None:
        from xarray.core.dtypes import maybe_promote

        self.dtype, self.fill = maybe_promote(np.dtype(dtype))
        table = [(list(nodatavals), scales, offsets), *rows]
        self.nodata = [list(n) for n, _, _ in table]
        self.scales = np.asarray([s for _, s, _ in table], np.float64)
        self.offsets = np.asarray([o for _, _, o in table], np.float64)
        self.item_rows = item_rows
        self.scale = scale and bool(np.any(self.scales != 1) or np.any(self.offsets != 0))

    def apply(self, block: NDArray[Any], key: tuple[Any, ...], band_axis: int) -> NDArray[Any]:
        if self.item_rows is None or band_axis == 0:
            return self._apply_row(0, block, key, band_axis)
        rows = self.item_rows[key[0]]
        if np.ndim(rows) == 0 or np.unique(rows).size == 1:
            return self._apply_row(int(np.ravel(rows)[0]) if np.size(rows) else 0, block, key, band_axis)
        rest = (slice(None), *key[1:])  # each item alone, its leading axis kept
        return np.concatenate([self._apply_row(int(r), block[i:i + 1], rest, band_axis)
                               for i, r in enumerate(rows)], axis=0)

    def _apply_row(self, row: int, block: NDArray[Any], key: tuple[Any, ...], band_axis: int) -> NDArray[Any]:
        nodata = self.nodata[row]
        bands = np.arange(len(nodata))[key[band_axis]]
        # where the band axis is in the block: the axes before it that an integer did not drop
        axis = sum(1 for k in key[:band_axis] if not isinstance(k, (int, np.integer)))
        trailing = sum(1 for k in key[band_axis + 1:] if not isinstance(k, (int, np.integer)))
        out = block.astype(self.dtype)
        for j, b in enumerate(np.atleast_1d(bands)):
            nod = nodata[int(b)]
            if nod is None:
                continue
            at = () if np.ndim(bands) == 0 else (slice(None),) * axis + (j,)  # band j's samples (maybe just one)
            raw = block[at]
            hit = np.isnan(raw) if isinstance(nod, float) and nod != nod else raw == nod
            out[at] = np.where(hit, self.fill, out[at])
        if self.scale:
            shape = () if np.ndim(bands) == 0 else (len(bands),) + (1,) * trailing
            scales = self.scales[row][bands].reshape(shape).astype(self.dtype)
            offsets = self.offsets[row][bands].reshape(shape).astype(self.dtype)
            out = out * scales + offsets
        return out


def gdal_transform(transform: Sequence[float], pixel_is_point: bool) -> tuple[float, ...]:
    """GDAL's ``GeoTransform`` (pixel corners) from a rumi transform.

    A PixelIsPoint transform maps pixel indices to the pixels' points; GDAL (and so
    rasterio and rioxarray) shift it by half a pixel to describe pixel areas.
    """
    a, b, c, d, e, f = tuple(transform)[:6]  # six numbers, or an Affine (nine)
    if pixel_is_point:  # GDAL's own arithmetic, so the result is GDAL's to the bit
        c, f = c - (a * 0.5 + b * 0.5), f - (d * 0.5 + e * 0.5)
    return (c, a, b, f, d, e)


def pixel_centres(gt: Sequence[float], nx: int, ny: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """1-D pixel-centre x and y of a north-up GDAL geotransform, bitwise equal to rioxarray's.

    rioxarray (``affine_to_coords``) moves the transform by half a pixel with affine's
    matrix product and applies it to (column, 0) and (0, row); the same operations in
    the same order give the same doubles, so Datasets from both align exactly.
    """
    c, a, b, f, d, e = (float(v) for v in gt)
    c_half = a * 0.5 + b * 0.5 + c
    f_half = d * 0.5 + e * 0.5 + f
    x = np.arange(nx) * a + np.zeros(nx) * b + c_half
    y = np.zeros(ny) * d + np.arange(ny) * e + f_half
    return x, y


@lru_cache(maxsize=64)
def _grid_mapping(epsg: int) -> dict[str, Any]:
    from pyproj import CRS

    crs = CRS.from_epsg(epsg)
    attrs = crs.to_cf()
    attrs["spatial_ref"] = attrs["crs_wkt"]  # rioxarray writes the WKT under both names
    return attrs


def spatial_coords(shape: Sequence[int], transform: Affine | Sequence[float] | None, epsg: int | None,
                   pixel_is_point: bool) -> tuple[dict[str, xr.Variable], dict[str, Any]]:
    """(coords, attrs) for a (..., y, x) raster: pixel-centre ``x``/``y`` and ``spatial_ref``.

    Without a CRS there is no georeferencing: no coordinates and no ``spatial_ref``.
    A rotated transform has no 1-D coordinates; it stays in ``attrs["transform"]`` and
    in ``spatial_ref``'s ``GeoTransform``.
    """
    if epsg is None:
        return {}, {}
    transform = cast("Sequence[float]", transform)  # a CRS comes with a transform
    ny, nx = shape[-2:]
    gt = gdal_transform(transform, pixel_is_point)
    attrs = dict(_grid_mapping(int(epsg)))
    attrs["GeoTransform"] = " ".join(str(float(v)) for v in gt)
    coords = {"spatial_ref": xr.Variable((), np.int64(0), attrs)}
    _c, _a, b, _f, d, _e = gt
    if b == 0 and d == 0:
        x, y = pixel_centres(gt, nx, ny)
        coords["x"] = xr.Variable("x", x, {"axis": "X"})
        coords["y"] = xr.Variable("y", y, {"axis": "Y"})
    var_attrs = {"AREA_OR_POINT": "Point" if pixel_is_point else "Area", "transform": tuple(transform)[:6]}
    return coords, var_attrs


def _frame_chunks(images: Sequence[Image], leading: str | None, shape: tuple[int, ...], dtype: Any) -> dict[str, int]:
    """Preferred chunks: whole frames sized by ``array.chunk-size`` (:func:`auto_chunks`); a stack
    mixing frame units is cut on the smaller frame (one band per chunk where bands do not fit)."""
    grids = [frame_chunks(im) for im in images]
    *lead, bands, tl, tw = min(grids)
    frame = (bands, tl, tw) if leading is None else (lead[0] if lead else 1, bands, tl, tw)
    sizes = auto_chunks(tuple(shape), dtype, frame)
    dims = ("band", "y", "x") if leading is None else (leading, "band", "y", "x")
    return dict(zip(dims, sizes, strict=True))


def _local_abspath(item: StrPath) -> StrPath:
    """A local path made absolute (a Dask worker unpickling the image may run elsewhere); a URI as is."""
    from rumimm.store.uri import is_remote

    return item if is_remote(item) else os.path.abspath(item)


def _open_source(obj: Openable, header: HeaderArg | Sequence[HeaderArg], cache_bytes: int | None, verify: bool,
                 storage_options: Mapping[str, Any] | None = None) -> tuple[Source, list[Image], bool]:
    """(source, images, owned) from a path, an Image, a Cube, an ImageCollection or a list of paths."""
    from rumimm.reader.cube import Cube, ImageCollection
    from rumimm.reader.image import Image, load_header
    from rumimm.reader.image import open as open_image

    if isinstance(obj, (str, os.PathLike)):
        # absolute: a Dask worker unpickling the image may run in another directory
        img = open_image(_local_abspath(obj), cast("HeaderArg", header), cache_bytes=cache_bytes, verify=verify,
                         storage_options=storage_options)
        return img, [img], True
    if isinstance(obj, Image):
        return obj, [obj], False
    if isinstance(obj, ImageCollection):
        groups = obj.cubes()
        if len(groups) != 1:
            raise RumiError(f"an ImageCollection opens as one Dataset only if its images share a grid; this one "
                            f"has {len(groups)} grids; open each of its .cubes() separately")
        obj = groups[0]
    if isinstance(obj, Cube):
        return obj, obj.images, False
    if isinstance(obj, (list, tuple)):
        items = [item if isinstance(item, Image) else _local_abspath(item) for item in obj]
        headers = None if header is None else list(cast("Sequence[HeaderArg]", header))  # one per path
        if headers is not None and len(headers) == len(items):  # the Cube refuses a count that differs
            # a Cube takes blob bytes only: blob files and bad blobs are read and refused as rumimm.open does
            headers = [h if isinstance(item, Image) else load_header(h, item)
                       for h, item in zip(headers, items, strict=True)]
        blobs = cast("list[BlobArg | None] | None", headers)  # parsed above; a count that differs is refused
        cube = Cube(items, blobs, cache_bytes=cache_bytes, verify=verify, storage_options=storage_options)
        return cube, cube.images, True
    raise TypeError(f"cannot open a {type(obj).__name__} with engine='rumimm'; pass a path, a list of paths, "
                    "an Image, a Cube or an ImageCollection")


def metadata_attrs(img: Image) -> dict[str, Any]:
    """The attributes rioxarray gives a raster's variable from its band metadata.

    ``_FillValue`` (the first band's nodata, in the image's dtype), ``scale_factor`` and
    ``add_offset`` (or ``scales``/``offsets`` when bands differ), ``long_name`` (the
    descriptions), ``units`` and the dataset and first band's tags.  A file without a sidecar
    has none of them but a spec 0.2 file's ``long_name``, its band texts.
    """
    meta = img.metadata
    if meta.is_empty():  # a spec 0.2 file's band texts are in its trailer, sidecar or not
        texts = img.descriptions if img.trailer is not None else ()
        return {"long_name": texts[0] if len(texts) == 1 else texts} if texts else {}
    attrs: dict = {**meta.tags, **meta.bands[0].tags}
    if img.nodata is not None:
        attrs["_FillValue"] = np.dtype(img.dtype).type(img.nodata)
    scales, offsets = img.scales, img.offsets
    if len(set(scales)) > 1:
        attrs["scales"] = scales
    else:
        attrs["scale_factor"] = scales[0]
    if len(set(offsets)) > 1:
        attrs["offsets"] = offsets
    else:
        attrs["add_offset"] = offsets[0]
    if any(img.descriptions):
        attrs["long_name"] = img.descriptions[0] if len(set(img.descriptions)) == 1 else img.descriptions
    if any(img.units):
        attrs["units"] = img.units[0] if len(img.units) == 1 else img.units
    return attrs


def _decoding(img: Image, attrs: dict[str, Any], encoding: dict[str, Any], masked: bool, mask_and_scale: bool,
              source: Source | None = None) -> Decode | None:
    """The Decode of ``masked``/``mask_and_scale``; moves the attributes it applies to ``encoding``, as rioxarray.

    For a stack (``source`` a Cube), each image's own nodata, scales and offsets decode its items.
    """
    from rumimm.reader.cube import Cube

    masked = masked or mask_and_scale
    if not masked:
        return None
    if mask_and_scale:
        for name in ("scale_factor", "scales", "add_offset", "offsets"):
            if name in attrs:
                encoding[name] = attrs.pop(name)
    if "_FillValue" in attrs:
        encoding["_FillValue"] = attrs.pop("_FillValue")
    if isinstance(source, Cube):
        images = source.images
        keys = [(tuple(nodata_key(v) for v in im.nodatavals), tuple(im.scales), tuple(im.offsets)) for im in images]
        if len(set(keys)) > 1:  # rows: image 0's (row 0), then each other distinct one
            distinct = list(dict.fromkeys(keys))
            of_image = np.array([distinct.index(k) for k in keys], np.int64)
            rows = [(images[keys.index(k)].nodatavals, k[1], k[2]) for k in distinct[1:]]
            return Decode(img.dtype, img.nodatavals, img.scales, img.offsets, mask_and_scale, rows=rows,
                          item_rows=of_image[source.item_images])
    return Decode(img.dtype, img.nodatavals, img.scales, img.offsets, mask_and_scale)


def _stack_times(images: Sequence[Image]) -> dict[str, NDArray[np.datetime64]] | None:
    """``time`` (and ``time_end``) coordinates of a stack of spec 0.2 files, or None.

    None unless every image has a trailer and all share one time kind (instants or intervals).
    A file of T steps gives T values, in the stack's item order (``Cube``).
    """
    found = [im.trailer for im in images]
    trailers = [t for t in found if t is not None]
    if len(trailers) != len(found) or len({t.time_kind for t in trailers}) != 1:
        return None
    times = np.concatenate([t.datetime64() for t in trailers])
    if trailers[0].time_kind == "interval":
        return {"time": times[:, 0], "time_end": times[:, 1]}
    return {"time": times}


def open_rumi_dataset(obj: Openable, *, header: HeaderArg | Sequence[HeaderArg] = None, stack_dim: str = "time",
                      stack_labels: Sequence[Any] | None = None, drop_variables: str | Iterable[str] | None = None,
                      cache_bytes: int | None = None, verify: bool = True, masked: bool = False,
                      mask_and_scale: bool = False, storage_options: Mapping[str, Any] | None = None) -> xr.Dataset:
    """The Dataset the backend returns; see :class:`RumiBackendEntrypoint`."""
    source, images, owned = _open_source(obj, header, cache_bytes, verify, storage_options)
    try:
        img = images[0]
        own_time = img.ndim == 4 and source is img  # a spec 0.2 file of several time steps: its own time axis
        leading = None if source.ndim == 3 else ("time" if own_time else stack_dim)
        dims = ("band", "y", "x") if leading is None else (leading, "band", "y", "x")
        geo = next((im for im in images if im.crs is not None), img)
        coords, attrs = spatial_coords(img.shape, geo.transform, geo.epsg, geo.pixel_is_point)
        attrs.update(metadata_attrs(img))
        decode_encoding: dict = {}
        decode = _decoding(img, attrs, decode_encoding, masked, mask_and_scale, source)
        lazy = indexing.LazilyIndexedArray(RumiBackendArray(source, decode))
        coords["band"] = xr.Variable("band", np.arange(1, img.count + 1))
        if img.trailer is not None and source is img:  # spec 0.2: band texts and time
            coords["description"] = xr.Variable("band", np.array(img.descriptions, dtype=object))
            if own_time:
                times = img.trailer.datetime64()
                if img.time_kind == "interval":
                    coords["time"] = xr.Variable("time", times[:, 0])
                    coords["time_end"] = xr.Variable("time", times[:, 1])
                else:
                    coords["time"] = xr.Variable("time", times)
            else:
                first = cast("list[Any]", img.time)[0]  # a trailer holds the times
                attrs = {**attrs, "time": str(first) if img.time_kind == "instant" else "/".join(str(v) for v in first)}
        if leading is not None and not own_time:
            series = _stack_times(images) if stack_labels is None and leading == "time" else None
            if series is not None:  # spec 0.2 files, one time kind: their times end to end
                coords.update({k: xr.Variable("time", v) for k, v in series.items()})
                # their trailers are read now: band texts every file shares label the band axis (differing
                # ones would not, nor as long_name: to_rumi would write the first file's for all)
                texts = {tuple(im.descriptions) for im in images}
                if len(texts) == 1:
                    coords["description"] = xr.Variable("band", np.array(texts.pop(), dtype=object))
                else:
                    attrs.pop("long_name", None)
            else:
                labels = np.arange(source.shape[0]) if stack_labels is None else np.asarray(stack_labels)
                if labels.shape != (source.shape[0],):
                    raise ValueError(f"stack_labels must have {source.shape[0]} entries, got {labels.shape}")
                coords[leading] = xr.Variable(leading, labels)
        encoding = {"preferred_chunks": _frame_chunks(images, leading, source.shape, img.dtype), "dtype": img.dtype,
                    **decode_encoding}
        if "spatial_ref" in coords:
            encoding["grid_mapping"] = "spatial_ref"
        var = xr.Variable(dims, lazy, attrs, encoding)
        drop = set([drop_variables] if isinstance(drop_variables, str) else drop_variables or ())
        variables = {} if VARIABLE in drop else {VARIABLE: var}
        coords = {k: v for k, v in coords.items() if k not in drop}
        ds = xr.Dataset(variables, coords=coords)
    except BaseException:
        if owned:
            source.close()
        raise
    if owned:
        ds.set_close(source.close)
    return ds


class RumiBackendEntrypoint(BackendEntrypoint):
    """``engine="rumimm"``: open rumi files, Cubes and ImageCollections in xarray.

    Keyword arguments of ``xr.open_dataset(..., engine="rumimm")``:

    header : bytes, Header or path, optional
        The file's header blob (or, for a list of paths, one per path), so the IFD
        is never parsed.
    stack_dim : str
        Name of the leading dim of a Cube, an ImageCollection or a list of paths
        (default ``"time"``).
    stack_labels : sequence, optional
        Its coordinate values (default 0..N-1).
    cache_bytes, verify, storage_options
        As for :func:`rumimm.open`, for the files opened by path (or remote URI).
    masked : bool
        As rioxarray's: samples equal to their band's nodata read as NaN (the dtype
        promoted as xarray promotes it) and ``_FillValue`` moves to the encoding.
    mask_and_scale : bool
        Also apply each band's scale and offset (``scale_factor``/``add_offset`` move to
        the encoding).  Both default to False, as ``rioxarray.open_rasterio``.

    The band metadata of the file's sidecar become attributes as rioxarray makes them:
    ``_FillValue`` (nodata), ``scale_factor``, ``add_offset``, ``long_name``, ``units``
    and the tags.  The Dataset holds ``band_data`` (dims ``(band, y, x)``, bands numbered from 1
    as rioxarray does), pixel-centre ``x``/``y`` for north-up georeferenced files and
    a ``spatial_ref`` coordinate when the file has a CRS.
    """

    description = "Open rumi rasters (.rumi) lazily, reading windows through rumimm"
    url = "https://github.com/rumimm/rumimm/blob/main/docs/xarray.md"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "header", "stack_dim", "stack_labels",
                               "cache_bytes", "verify", "masked", "mask_and_scale", "storage_options")

    def open_dataset(self, filename_or_obj: T_PathFileOrDataStore | Openable, *,
                     drop_variables: str | Iterable[str] | None = None, header: HeaderArg | Sequence[HeaderArg] = None,
                     stack_dim: str = "time", stack_labels: Sequence[Any] | None = None,
                     cache_bytes: int | None = None, verify: bool = True, masked: bool = False,
                     mask_and_scale: bool = False, storage_options: Mapping[str, Any] | None = None) -> xr.Dataset:
        return open_rumi_dataset(cast("Openable", filename_or_obj), header=header, stack_dim=stack_dim,
                                 stack_labels=stack_labels, drop_variables=drop_variables, cache_bytes=cache_bytes,
                                 verify=verify, masked=bool(masked), mask_and_scale=bool(mask_and_scale),
                                 storage_options=storage_options)

    def guess_can_open(self, filename_or_obj: T_PathFileOrDataStore | Openable) -> bool:
        try:
            return os.fspath(cast("StrPath", filename_or_obj)).lower().endswith(".rumi")  # else TypeError
        except TypeError:
            return False
