"""xarray backend: ``xr.open_dataset("scene.rumi", engine="rumimm")``.

A file opens lazily as one variable, ``band_data`` with dims ``(band, y, x)`` (a
Cube or an ImageCollection of aligned images gets a leading dim, ``time`` by
default).  Indexing the variable becomes rumimm window reads, so nothing is decoded
at open and a chip decodes only the frames it touches.  Coordinates follow what
rioxarray makes of a GeoTIFF: ``x``/``y`` at pixel centres, a ``spatial_ref``
coordinate with the CF grid mapping, ``crs_wkt`` and a GDAL ``GeoTransform``, so
``.rio.crs``, ``.rio.transform()`` and ``.rio.bounds()`` work without conversion.
The preferred chunks are the frame grid, so ``chunks={}`` gives one Dask task per
frame (per cell of frames for ``unit="cell"`` files).
"""

from __future__ import annotations

import os
from functools import lru_cache

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from rumimm.integrations.dask_array import frame_chunks
from rumimm.errors import RumiError

__all__ = ["RumiBackendEntrypoint", "RumiBackendArray", "spatial_coords", "gdal_transform"]

VARIABLE = "band_data"  # the name rioxarray's own xarray backend gives a raster's values


def _outer_read(source, key: tuple):
    """``source[key]`` with xarray's outer semantics (each 1-D array picks along its own axis).

    Numpy broadcasts two index arrays together; rumimm follows numpy, so every array
    after the first is read as its span and then taken along its axis.
    """
    arrays = [i for i, k in enumerate(key) if isinstance(k, np.ndarray)]
    if len(arrays) <= 1:
        return np.asarray(source[key])
    read_key, takes = list(key), []
    dropped = 0
    for i, k in enumerate(key):
        if isinstance(k, (int, np.integer)):
            dropped += 1
        elif i in arrays[1:]:
            n = source.shape[i]
            k = np.where(k < 0, k + n, k).astype(np.int64)
            lo = int(k.min()) if k.size else 0
            hi = int(k.max()) + 1 if k.size else 0
            read_key[i] = slice(lo, hi)
            takes.append((i - dropped, k - lo))
    block = np.asarray(source[tuple(read_key)])
    for axis, idx in takes:
        block = np.take(block, idx, axis=axis)
    return block


class RumiBackendArray(BackendArray):
    """A lazy view of an Image or Cube for xarray: indexing reads windows.

    Pickles as the source does (path and blob), so Dask graphs stay small.
    """

    def __init__(self, source):
        self.source = source
        self.shape = tuple(source.shape)
        self.dtype = np.dtype(source.dtype)

    def __getitem__(self, key):
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._raw)

    def _raw(self, key: tuple):
        return _outer_read(self.source, key)


def gdal_transform(transform, pixel_is_point: bool) -> tuple[float, ...]:
    """GDAL's ``GeoTransform`` (pixel corners) from a rumi transform.

    A PixelIsPoint transform maps pixel indices to the pixels' points; GDAL (and so
    rasterio and rioxarray) shift it by half a pixel to describe pixel areas.
    """
    a, b, c, d, e, f = transform
    if pixel_is_point:
        c, f = c - 0.5 * (a + b), f - 0.5 * (d + e)
    return (c, a, b, f, d, e)


@lru_cache(maxsize=64)
def _grid_mapping(epsg: int) -> dict:
    from pyproj import CRS

    crs = CRS.from_epsg(epsg)
    attrs = crs.to_cf()
    attrs["spatial_ref"] = attrs["crs_wkt"]  # rioxarray writes the WKT under both names
    return attrs


def spatial_coords(shape, transform, epsg, pixel_is_point: bool) -> tuple[dict, dict]:
    """(coords, attrs) for a (..., y, x) raster: pixel-centre ``x``/``y`` and ``spatial_ref``.

    Without a CRS there is no georeferencing: no coordinates and no ``spatial_ref``.
    A rotated transform has no 1-D coordinates; it stays in ``attrs["transform"]`` and
    in ``spatial_ref``'s ``GeoTransform``.
    """
    if epsg is None:
        return {}, {}
    ny, nx = shape[-2:]
    gt = gdal_transform(transform, pixel_is_point)
    attrs = dict(_grid_mapping(int(epsg)))
    attrs["GeoTransform"] = " ".join(str(float(v)) for v in gt)
    coords = {"spatial_ref": xr.Variable((), np.int64(0), attrs)}
    c, a, b, f, d, e = gt
    if b == 0 and d == 0:
        coords["x"] = xr.Variable("x", c + a * (np.arange(nx) + 0.5), {"axis": "X"})
        coords["y"] = xr.Variable("y", f + e * (np.arange(ny) + 0.5), {"axis": "Y"})
    var_attrs = {"AREA_OR_POINT": "Point" if pixel_is_point else "Area", "transform": tuple(transform)}
    return coords, var_attrs


def _frame_chunks(images, leading) -> dict:
    """Preferred chunks on the frame grid; a stack mixing frame units gets one band per chunk."""
    grids = [frame_chunks(im) for im in images]
    bands, tl, tw = min(grids)
    chunks = {"band": bands, "y": tl, "x": tw}
    return chunks if leading is None else {leading: 1, **chunks}


def _open_source(obj, header, cache_bytes, verify):
    """(source, images, owned) from a path, an Image, a Cube, an ImageCollection or a list of paths."""
    from rumimm.reader.cube import Cube, ImageCollection
    from rumimm.reader.image import Image, load_header
    from rumimm.reader.image import open as open_image

    if isinstance(obj, (str, os.PathLike)):
        # absolute: a Dask worker unpickling the image may run in another directory
        img = open_image(os.path.abspath(obj), header, cache_bytes=cache_bytes, verify=verify)
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
        items = [item if isinstance(item, Image) else os.path.abspath(item) for item in obj]
        headers = None if header is None else list(header)
        if headers is not None and len(headers) == len(items):  # the Cube refuses a count that differs
            # a Cube takes blob bytes only: blob files and bad blobs are read and refused as rumimm.open does
            headers = [h if isinstance(item, Image) else load_header(h, item) for h, item in zip(headers, items)]
        cube = Cube(items, headers, cache_bytes=cache_bytes, verify=verify)
        return cube, cube.images, True
    raise TypeError(f"cannot open a {type(obj).__name__} with engine='rumimm'; pass a path, a list of paths, "
                    "an Image, a Cube or an ImageCollection")


def open_rumi_dataset(obj, *, header=None, stack_dim="time", stack_labels=None, drop_variables=None,
                      cache_bytes=None, verify=True) -> xr.Dataset:
    """The Dataset the backend returns; see :class:`RumiBackendEntrypoint`."""
    source, images, owned = _open_source(obj, header, cache_bytes, verify)
    try:
        img = images[0]
        leading = None if source.ndim == 3 else stack_dim
        dims = ("band", "y", "x") if leading is None else (leading, "band", "y", "x")
        lazy = indexing.LazilyIndexedArray(RumiBackendArray(source))
        geo = next((im for im in images if im.crs is not None), img)
        coords, attrs = spatial_coords(img.shape, geo.transform, geo.epsg, geo.pixel_is_point)
        coords["band"] = xr.Variable("band", np.arange(1, img.shape[0] + 1))
        if leading is not None:
            labels = np.arange(source.shape[0]) if stack_labels is None else np.asarray(stack_labels)
            if labels.shape != (source.shape[0],):
                raise ValueError(f"stack_labels must have {source.shape[0]} entries, got {labels.shape}")
            coords[leading] = xr.Variable(leading, labels)
        encoding = {"preferred_chunks": _frame_chunks(images, leading), "dtype": img.dtype}
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
    cache_bytes, verify
        As for :func:`rumimm.open`, for the files opened by path.

    The Dataset holds ``band_data`` (dims ``(band, y, x)``, bands numbered from 1
    as rioxarray does), pixel-centre ``x``/``y`` for north-up georeferenced files and
    a ``spatial_ref`` coordinate when the file has a CRS.
    """

    description = "Open rumi rasters (.rumi) lazily, reading windows through rumimm"
    url = "https://github.com/rumimm/rumimm/blob/main/docs/xarray.md"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "header", "stack_dim", "stack_labels",
                               "cache_bytes", "verify")

    def open_dataset(self, filename_or_obj, *, drop_variables=None, header=None, stack_dim="time",
                     stack_labels=None, cache_bytes=None, verify=True):
        return open_rumi_dataset(filename_or_obj, header=header, stack_dim=stack_dim, stack_labels=stack_labels,
                                 drop_variables=drop_variables, cache_bytes=cache_bytes, verify=verify)

    def guess_can_open(self, filename_or_obj) -> bool:
        try:
            return os.fspath(filename_or_obj).lower().endswith(".rumi")
        except TypeError:
            return False
