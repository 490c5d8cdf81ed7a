"""Write an xarray DataArray (numpy- or Dask-backed) as a rumi file.

The georeferencing comes from the metadata rioxarray keeps: the ``spatial_ref``
grid-mapping coordinate (``crs_wkt`` and ``GeoTransform``), else regular 1-D
``x``/``y`` coordinates for the transform.  The values stream through
:func:`rumimm.write`, which takes one row of tiles at a time, so a Dask-backed
array is computed one row of tiles at a time and never held whole; on an active
``dask.distributed`` client its chunks are compressed on the workers that compute
them and only compressed frames reach this process (:mod:`rumimm.writer.distributed`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from rumimm._deprecation import renamed_keyword

if TYPE_CHECKING:
    import dask.array
    import xarray as xr
    from numpy.typing import NDArray
    from pyproj import CRS

    from rumimm._typing import StrPath

_T = TypeVar("_T")

__all__ = ["georef_of", "metadata_of", "to_rumi"]

_X_NAMES = ("x", "lon", "longitude")
_Y_NAMES = ("y", "lat", "latitude")


def _spatial_dims(da: xr.DataArray) -> tuple[Hashable, Hashable]:
    dims = list(da.dims)
    y = next((d for d in dims if str(d).lower() in _Y_NAMES), None)
    x = next((d for d in dims if str(d).lower() in _X_NAMES), None)
    if x is None or y is None:
        if da.ndim < 2:
            raise ValueError(f"a rumi image needs 2 or 3 dims (band, y, x), got dims {tuple(dims)}")
        y, x = dims[-2], dims[-1]
    return y, x


def _grid_mapping(da: xr.DataArray) -> xr.DataArray | None:
    name = da.encoding.get("grid_mapping", da.attrs.get("grid_mapping", "spatial_ref"))
    return da.coords.get(name, None)


def _transform_from_coords(da: xr.DataArray, y: Hashable, x: Hashable,
                           ) -> tuple[float, float, float, float, float, float] | None:
    """A north-up transform (pixel corners) from regular 1-D coordinates, or None."""
    if x not in da.coords or y not in da.coords:
        return None
    xs, ys = np.asarray(da[x].values, float), np.asarray(da[y].values, float)
    if xs.ndim != 1 or ys.ndim != 1 or xs.size < 2 or ys.size < 2:
        return None
    dx, dy = np.diff(xs), np.diff(ys)
    if not (np.allclose(dx, dx[0], rtol=1e-9, atol=0) and np.allclose(dy, dy[0], rtol=1e-9, atol=0)):
        raise ValueError(f"coordinates {x!r}/{y!r} are not evenly spaced; rumi stores an affine transform only")
    a, e = float(dx.mean()), float(dy.mean())
    return (a, 0.0, xs[0] - a / 2, 0.0, e, ys[0] - e / 2)


def _axis_from_coords(da: xr.DataArray, dim: Hashable, origin: float, res: float) -> tuple[float, float]:
    """(origin, resolution) of a north-up ``GeoTransform`` along ``dim``, as its 1-D coordinate has them now.

    xarray carries ``spatial_ref``'s ``GeoTransform`` unchanged through ``isel``/``sel``, so a
    window or a strided subset still has its parent's; the coordinate was sliced with the
    values.  As rioxarray's ``transform(recalc=True)`` (``rio.to_raster``): the resolution from
    the first and last coordinates (the ``GeoTransform``'s for a single coordinate) and the
    origin half a pixel before the first.  Where that agrees with the ``GeoTransform`` to
    rounding, the ``GeoTransform``'s own values are kept (bit-exact round trips); without a
    usable 1-D coordinate, too.
    """
    if dim not in da.coords or da[dim].dims != (dim,):
        return origin, res
    vs = np.asarray(da[dim].values, float)
    if vs.size == 0 or not np.all(np.isfinite(vs)):
        return origin, res
    n = vs.size
    new_res = res if n == 1 else float((vs[-1] - vs[0]) / (n - 1))
    if n > 2:
        slack = 8 * np.finfo(float).eps * float(np.max(np.abs(vs)))
        if float(np.max(np.abs(np.diff(vs) - new_res))) > 1e-6 * abs(new_res) + slack:
            raise ValueError(f"coordinate {dim!r} is not evenly spaced; rumi stores an affine transform only")
    new_origin = float(vs[0] - new_res / 2)
    scale = max(abs(origin), abs(float(vs[0])), abs(float(vs[-1])))
    slack = 8 * np.finfo(float).eps * scale
    tol = 1e-9 * abs(res)
    if abs(new_origin - origin) <= tol + slack and abs(new_res - res) <= tol + slack / max(n - 1, 1):
        return origin, res
    return new_origin, new_res


def georef_of(da: xr.DataArray) -> dict[str, Any]:
    """``transform``, ``crs`` and ``pixel_is_point`` for :func:`rumimm.write`, from rioxarray's metadata.

    Returns an empty dict for an array without a CRS.  The transform is rumimm's
    order ``(x_res, row_rot, x_origin, col_rot, y_res, y_origin)``; for an array whose
    ``AREA_OR_POINT`` attribute is ``"Point"`` it is shifted back by half a pixel from
    GDAL's pixel-corner ``GeoTransform`` to the points, as rumi stores it.  A north-up
    ``GeoTransform`` is checked against the 1-D ``x``/``y`` coordinates, which follow an
    ``isel``/``sel`` subset while the attribute does not (see :func:`_axis_from_coords`).
    """
    from pyproj import CRS

    gm = _grid_mapping(da)
    wkt = None if gm is None else gm.attrs.get("crs_wkt", gm.attrs.get("spatial_ref"))
    point = str(da.attrs.get("AREA_OR_POINT", "Area")).lower() == "point"
    if gm is None or wkt is None:  # (no grid mapping: no WKT)
        if gm is not None and "GeoTransform" in gm.attrs:
            raise ValueError("the array has a GeoTransform but no CRS; rumi keeps a transform only with an EPSG "
                             "CRS: pass crs=")
        return {"pixel_is_point": point} if point else {}
    crs = CRS.from_wkt(wkt)
    y, x = _spatial_dims(da)
    if "GeoTransform" in gm.attrs:
        c, a, b, f, d, e = (float(v) for v in str(gm.attrs["GeoTransform"]).split())
        if b == 0 and d == 0:  # north-up: the coordinates say where a subset (isel/sel) lies
            c, a = _axis_from_coords(da, x, c, a)
            f, e = _axis_from_coords(da, y, f, e)
    else:
        t = _transform_from_coords(da, y, x)
        if t is None:
            if x in da.coords and y in da.coords and da[x].ndim == 1 and da[y].ndim == 1:
                raise ValueError(f"the array has a CRS and no GeoTransform, and its x/y coordinates ({da.sizes[x]} x "
                                 f"{da.sizes[y]}) give no pixel size: one needs two points; pass transform=")
            raise ValueError("the array has a CRS but neither a GeoTransform nor 1-D x/y coordinates; pass transform=")
        a, b, c, d, e, f = t
    if point:
        c, f = c + 0.5 * (a + b), f + 0.5 * (d + e)
    height, width = da.sizes[y], da.sizes[x]
    return {"transform": (a, b, c, d, e, f), "crs": _epsg_of(crs, (a, b, c, d, e, f), height, width),
            "pixel_is_point": point}


def _epsg_of(crs: CRS, transform: tuple[float, float, float, float, float, float], height: int, width: int,
             ) -> int:
    """The EPSG code of the array's CRS, identified as ``from_geotiff`` identifies a file's.

    One warning when the identification is inexact.
    """
    import warnings

    from rumimm.errors import RumiWarning
    from rumimm.format.crs_identify import identify, short_name

    a, b, c, d, e, f = transform
    centre = (a * width / 2 + b * height / 2 + c, d * width / 2 + e * height / 2 + f)
    found = identify(crs, centre)
    if not found.exact:
        warnings.warn(f"the array's CRS ({short_name(crs)}) has no EPSG code of its own; stored as "
                      f"EPSG:{found.epsg}: {found.note}", RumiWarning, stacklevel=4)
    return found.epsg


def metadata_of(da: xr.DataArray, count: int) -> dict[str, Any]:
    """The ``nodata``, ``scales``, ``offsets``, ``descriptions`` and ``units`` arguments of :func:`rumimm.write`.

    Read from the array as rioxarray keeps them: ``_FillValue`` (attribute or encoding: where
    ``masked``/``mask_and_scale`` moved it), ``scale_factor``/``add_offset`` (or per-band
    ``scales``/``offsets``), ``long_name`` and ``units``.  A masked array (``_FillValue`` in its
    encoding) gets NaN as nodata; scales and offsets already applied (``mask_and_scale``) are not
    stored again.
    """
    def get(name: str) -> Any:
        return da.attrs.get(name, da.encoding.get(name))

    def per_band(value: Any, cast: Callable[[Any], _T]) -> list[_T] | None:
        if value is None:
            return None
        values = [value] * count if np.ndim(value) == 0 or isinstance(value, str) else list(value)
        return [cast(v) for v in values] if len(values) == count else None

    out: dict[str, Any] = {}
    fill = get("_FillValue")
    if fill is not None:
        fill = np.asarray(fill).item()
        if "_FillValue" not in da.attrs and np.issubdtype(da.dtype, np.floating):
            fill = float("nan")  # masked on reading: NaN marks the missing samples now, not the raw value
        if not (isinstance(fill, float) and np.isnan(fill) and not np.issubdtype(da.dtype, np.floating)):
            out["nodata"] = fill
    scales = per_band(get("scales") if get("scales") is not None else get("scale_factor"), float)
    offsets = per_band(get("offsets") if get("offsets") is not None else get("add_offset"), float)
    if "scale_factor" not in da.encoding and "scales" not in da.encoding:  # not already applied (mask_and_scale)
        if scales is not None and any(v != 1 for v in scales):
            out["scales"] = scales
        if offsets is not None and any(v != 0 for v in offsets):
            out["offsets"] = offsets
    names = per_band(da.attrs.get("long_name"), str)
    if names is not None:
        out["descriptions"] = names
    units = per_band(da.attrs.get("units"), str)
    if units is not None:
        out["units"] = units
    return out


def _times_of(da: xr.DataArray, name: Hashable) -> list[Any]:
    """The values of coordinate ``name`` as times :func:`rumimm.write` takes, or a RumiError saying to pass ``time=``.

    datetime64 values go on unchanged (the writer refuses a fraction of a second; casting
    to seconds here would drop it silently); strings and objects must each be a date numpy
    reads.  Numbers are refused: ``0, 1, 2`` are stack positions (``stack_dim="scene"``),
    not seconds since 1970.
    """
    from rumimm.errors import RumiError

    values = np.atleast_1d(np.asarray(da.coords[name].values))
    hint = (f"coordinate {name!r} ({values.dtype}) is not a time, and spec='0.2' labels every time step "
            f"with one; pass time=[...] with one date per step")
    if values.dtype.kind == "M":
        return list(values)
    if values.dtype.kind not in "OUS":
        raise RumiError(hint)
    try:
        return [np.datetime64(v) for v in values]
    except (TypeError, ValueError):
        raise RumiError(hint) from None


def _spec02_labels(da: xr.DataArray, other: list[Hashable], out: dict[str, Any], passed: dict[str, Any],
                   ) -> tuple[xr.DataArray, list[Hashable]]:
    """Band texts and time for a spec 0.2 write from the array's own labels; returns the array and its (time,
    band) dims.

    ``time`` comes from a ``time`` dimension's coordinate (``time_end`` too makes intervals),
    a scalar ``time`` coordinate (``isel(time=0)`` of a file of several steps), or, for one
    step, a ``time`` attribute (``"start/end"`` for an interval), as the rumimm backend gives
    them; band texts from a ``description`` coordinate on the band dimension, or a scalar one
    (``isel(band=1)``).  A (time, y, x) array (the band selected away: a ``time`` dimension,
    or a scalar ``band`` coordinate) gets a band axis of length 1, so its steps are not written
    as bands.  What ``passed`` (the caller's write keywords) holds is not read from the array.
    """
    tdim = "time" if "time" in other else (other[0] if len(other) == 2 else None)
    if tdim is None and len(other) == 1 and other[0] != "band" and "band" in da.coords \
            and da.coords["band"].ndim == 0:  # e.g. a scene stack's isel(band=0)
        tdim = other[0]
    bdim = next((d for d in other if d != tdim), None)
    if tdim is not None and bdim is None:  # (time, y, x): one band
        bdim = "band"
        da = da.expand_dims(bdim, axis=da.dims.index(tdim) + 1)  # a scalar band coordinate becomes its 1-D one
    if "descriptions" not in passed and "description" in da.coords:
        texts = da.coords["description"]
        if texts.dims == (bdim,) or (texts.ndim == 0 and bdim is not None and da.sizes[bdim] == 1):
            out["descriptions"] = [str(v) for v in np.atleast_1d(texts.values)]
    if "time" not in passed:
        if tdim is not None and tdim in da.coords and da.coords[tdim].dims == (tdim,):
            starts = _times_of(da, tdim)
            if "time_end" in da.coords and da.coords["time_end"].dims == (tdim,):
                out["time"] = list(zip(starts, _times_of(da, "time_end"), strict=True))
            else:
                out["time"] = starts
        elif tdim is None and "time" in da.coords and da.coords["time"].ndim == 0:  # one step of several
            start = _times_of(da, "time")[0]
            end = _times_of(da, "time_end")[0] if "time_end" in da.coords and da.coords["time_end"].ndim == 0 \
                else None
            out["time"] = [start if end is None else (start, end)]
        elif tdim is None and isinstance(da.attrs.get("time"), str):
            t = da.attrs["time"]
            out["time"] = [tuple(t.split("/", 1)) if "/" in t else t]
    return da, [d for d in (tdim, bdim) if d is not None]


def to_rumi(obj: xr.DataArray | NDArray[Any] | dask.array.Array, path: StrPath, **write_kwargs: Any) -> bytes:
    """Write a DataArray (or a numpy or Dask array) as a rumi file; return the blob.

    Parameters
    ----------
    obj : xarray.DataArray, numpy.ndarray or dask.array.Array
        2-D ``(y, x)`` or 3-D with one non-spatial dim (``band``); the spatial dims
        are found by name (``x``/``y``, ``lon``/``lat``) or are the last two, and the
        array is transposed to ``(band, y, x)``.  With ``spec="0.2"`` also 4-D
        ``(time, band, y, x)`` and ``(time, y, x)`` (one band); the time coordinate (and
        ``time_end``) and a ``description`` coordinate on the band dim give ``time`` and
        ``descriptions`` unless they are passed, as do the scalar ones ``isel`` leaves
        (``isel(time=0)``, ``isel(band=1)``).  A Dask-backed array is computed one row of tiles
        at a time, or, on an active ``dask.distributed`` client, compressed on its workers chunk by chunk.
    path : str or os.PathLike
        The ``.rumi`` file to create or replace atomically.
    **write_kwargs
        As for :func:`rumimm.write` (``tile``, ``unit``, ``codec``, ...).  An explicit
        ``transform``, ``crs`` or ``pixel_is_point`` overrides what the array carries, and so
        do ``nodata``, ``scales``, ``offsets``, ``descriptions`` and ``units``, which are
        otherwise taken from rioxarray's attributes (see :func:`metadata_of`).

    Returns
    -------
    bytes
        The header blob.

    Raises
    ------
    ValueError
        More than 3 dims (4 with ``spec="0.2"``), irregular coordinates, or a transform without a
        CRS; a :class:`rumimm.RumiError` for a leading coordinate that is not a time (pass ``time=``).
    CRSError
        The array's CRS is not exactly an EPSG projected or geographic CRS.

    Examples
    --------
    >>> blob = rumimm.to_rumi(ds.band_data, "copy.rumi", tile=256)   # doctest: +SKIP
    """
    from rumimm.writer.writer import write

    for old, new in (("format", "spec"), ("bands", "descriptions"), ("format_version", "frame_format_version")):
        if old in write_kwargs:
            value = write_kwargs.pop(old)
            write_kwargs[new] = renamed_keyword("to_rumi", old, new, value, write_kwargs.get(new), stacklevel=4)
    if hasattr(obj, "dims") and hasattr(obj, "coords"):
        da = cast("xr.DataArray", obj)
        v2 = write_kwargs.get("spec") == "0.2"
        if da.ndim not in ((2, 3, 4) if v2 else (2, 3)):
            raise ValueError(f"a rumi image needs 2 or 3 dims (band, y, x), or (time, band, y, x) with "
                             f"spec='0.2', got dims {tuple(da.dims)}")
        y, x = _spatial_dims(da)
        georef = georef_of(da)
        other = [d for d in da.dims if d not in (y, x)]
        labels: dict[str, Any] = {}
        if v2:
            da, other = _spec02_labels(da, other, labels, write_kwargs)
        georef.update(metadata_of(da, da.sizes[other[-1]] if other else 1))
        georef.update(labels)  # a description coordinate's band texts, over the sidecar's long_name
        georef.update(write_kwargs)
        # the DataArray itself is the source: write() slices it a row of tiles at a time,
        # which loads (or computes, if Dask-backed) only that row
        return write(path, da.transpose(*other, y, x), **georef)
    return write(path, obj, **write_kwargs)
