"""The rasterio-shaped surface of an Image (and a Cube): profile, band metadata, index/xy, windows.

A rasterio user looks for ``profile``, ``index``/``xy``, ``block_windows`` and the band
metadata (``nodata``, ``descriptions``, ``scales``, ``offsets``, ...) under rasterio's
names and meanings; :class:`RasterioSurface` adds them on top of the public properties
its host already has (``shape``, ``dtype``, ``tile``, ``transform`` (an ``affine.Affine``,
as rasterio's), ``crs``, ``pixel_is_point``).  ``index`` and ``xy`` are plain arithmetic;
the members that return rasterio objects import it on first use (``pip install 'rumimm[geotiff]'``).

A PixelIsPoint file's transform maps pixel indices to the pixels' points; rasterio (GDAL)
reads such a file's transform shifted by half a pixel to the pixel corners, and so
``index``, ``xy`` and ``window_from_bounds`` (and ``Image.bounds``) work on that shifted
transform (:func:`area_coefficients`), as rasterio's do on the same file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from affine import Affine

from rumimm._deprecation import UNSET, renamed
from rumimm.errors import RumiError, WindowError

if TYPE_CHECKING:
    import pyproj
    from numpy.typing import ArrayLike, DTypeLike, NDArray
    from rasterio.windows import Window

    from rumimm.format.pam import Metadata

__all__ = [
    "COMPRESSIONS_WITH_PREDICTOR",
    "GDAL_NATIVE",
    "NBITS_IN",
    "NBITS_OUT",
    "OFFSETS",
    "RasterioSurface",
    "area_coefficients",
    "gdal_type",
    "gtiff_profile",
    "indexes_to_bands",
    "nodata_key",
    "require",
]

#: Where in a pixel ``xy`` puts the point: (column, row) offsets from the pixel's corner.
OFFSETS = {"center": (0.5, 0.5), "ul": (0.0, 0.0), "ur": (1.0, 0.0), "ll": (0.0, 1.0), "lr": (1.0, 1.0)}
#: Distance (in pixels) within which a window edge snaps to the whole pixel it is on.
SNAP = 1e-6


def require(module: str) -> Any:
    """Import an optional package of the ``geotiff`` extra, or say how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise ImportError(f"this needs {top}; pip install 'rumimm[geotiff]' (rasterio)") from None


def area_coefficients(transform: Any, pixel_is_point: bool) -> tuple[float, ...]:
    """The six coefficients of the transform of the pixel areas (corners), as rasterio reads the file.

    ``transform`` is a rumi transform (six numbers or an ``Affine``).  A PixelIsPoint
    one maps pixel indices to the pixels' points; GDAL (and so rasterio) shifts it by
    half a pixel to the pixel corners, with this arithmetic, so the result is GDAL's to
    the bit.  A PixelIsArea one is returned as it is.
    """
    a, b, c, d, e, f = (float(v) for v in tuple(transform)[:6])
    if pixel_is_point:
        c, f = c - (a * 0.5 + b * 0.5), f - (d * 0.5 + e * 0.5)
    return (a, b, c, d, e, f)


def _coefficients(host: Any) -> tuple[float, ...]:
    """The host's pixel-area affine coefficients (see ``area_coefficients``); the identity without georeferencing.

    As rasterio: a file without a transform has the identity, shifted or not.
    """
    t = host.transform
    if t is None:
        return (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
    return area_coefficients(t, bool(getattr(host, "pixel_is_point", False)))


def _inverse(a: float, b: float, c: float, d: float, e: float, f: float) -> tuple[float, ...]:
    """Coefficients of the inverse transform, computed as ``~affine.Affine`` does."""
    idet = 1.0 / (a * e - b * d)
    ra, rb, rd, re = e * idet, -b * idet, -d * idet, a * idet
    return (ra, rb, -c * ra - f * rb, rd, re, -c * rd - f * re)


def _apply(t: tuple[float, ...], u: Any, v: Any) -> tuple[Any, Any]:
    """``t`` applied to (u, v): numbers or arrays."""
    a, b, c, d, e, f = t
    return a * u + b * v + c, d * u + e * v + f


def _nodata_number(v: float, dtype: Any) -> float:
    """A nodata value as rasterio gives it: a float, unless an integer a float cannot hold exactly for
    64-bit integer samples (a float band's is the float nearest it, as GDAL reads it)."""
    wide = np.dtype(dtype).kind in "iu" and np.dtype(dtype).itemsize == 8
    return v if wide and isinstance(v, int) and abs(v) > 2**53 else float(v)


def _band_index(bidx: object, count: int) -> int:
    """The 0-based index of 1-based band ``bidx``, or an IndexError."""
    if isinstance(bidx, bool) or not isinstance(bidx, (int, np.integer)) or not 1 <= bidx <= count:
        raise WindowError(f"band index {bidx!r} is out of range: bands are numbered 1 to {count} (as rasterio's)")
    return int(bidx) - 1


def indexes_to_bands(indexes: int | Iterable[int] | None, bands: Any, count: int,
                     owner: str = "Image") -> Any:
    """The 0-based band selection of ``read(indexes, ...)``: 1-based ``indexes``, as rasterio.

    ``bands`` (0-based, deprecated: two numberings in one call) is still taken, with a
    DeprecationWarning; ``UNSET`` when the caller left it out.
    """
    if bands is not UNSET:
        if indexes is not None:
            raise TypeError("read() takes indexes (1-based, as rasterio), not also the deprecated bands (0-based)")
        index = "img[b]" if owner == "Image" else "cube[:, b]"
        renamed(f"{owner}.read(bands=b)", f"{owner}.read(indexes=b + 1) (1-based, as rasterio) or {index}",
                stacklevel=4)
        return bands
    if indexes is None:
        return None
    if isinstance(indexes, (int, np.integer)) and not isinstance(indexes, bool):
        return _band_index(indexes, count)
    try:
        values = list(cast("Iterable[int]", indexes))
    except TypeError:
        raise TypeError("indexes must be an int or a sequence of ints (1-based), "
                        f"got {type(indexes).__name__}") from None
    return [_band_index(i, count) for i in values]


def _snap_down(v: float) -> int:
    r = round(v)
    return int(r) if abs(v - r) < SNAP else math.floor(v)


def _snap_up(v: float) -> int:
    r = round(v)
    return int(r) if abs(v - r) < SNAP else math.ceil(v)


class RasterioSurface:
    """Mixin: rasterio's dataset members computed from ``shape``, ``dtype``, ``tile``, ``transform``, ``crs``."""

    if TYPE_CHECKING:  # what the host provides
        @property
        def shape(self) -> tuple[int, ...]: ...
        @property
        def tile(self) -> tuple[int, int]: ...
        @property
        def dtype(self) -> np.dtype: ...
        @property
        def crs(self) -> str | None: ...
        @property
        def transform(self) -> Affine | None: ...
        @property
        def pixel_is_point(self) -> bool: ...
        @property
        def metadata(self) -> Metadata: ...

    @property
    def profile(self) -> dict[str, Any]:
        """Creation options for a tiled, compressed GeoTIFF of this image (no ``driver`` key).

        Usable as ``rasterio.open(out, "w", driver="GTiff", **img.profile)``: dtype,
        count, height, width, crs, transform, nodata and the block layout, compression
        and predictor that ``rumimm.to_geotiff`` uses.  Sub-byte samples are ``uint8``
        with ``nbits``; float16 is ``float32`` with ``nbits=16``.

        A PixelIsPoint file's ``transform`` here is the one rasterio reads from it, of
        the pixel corners (as ``window_transform``), so the GeoTIFF these options make
        (PixelIsArea, rasterio's default) puts every pixel where this file does.

        Raises
        ------
        RumiError
            GeoTIFF has no sample type for this dtype (int2/int4, complex integers,
            the ML float types).
        """
        profile = gtiff_profile(self)
        if "transform" in profile and getattr(self, "pixel_is_point", False):
            profile["transform"] = Affine(*_coefficients(self))
        return profile

    @property
    def affine(self) -> Affine:
        """Deprecated: ``transform`` (an ``affine.Affine`` now, None without georeferencing)."""
        renamed(f"{type(self).__name__}.affine", f"{type(self).__name__}.transform")
        return Affine(*_coefficients(self))

    @property
    def pyproj_crs(self) -> pyproj.CRS | None:
        """The CRS as a ``pyproj.CRS``, or None without georeferencing."""
        if self.crs is None:
            return None
        import pyproj

        return pyproj.CRS.from_user_input(self.crs)

    # -- band metadata (from the PAM sidecar; see rumimm.format.pam) ------------------------
    @property
    def nodatavals(self) -> tuple[float | None, ...]:
        """Each band's nodata value (a float, an int beyond 2**53 for 64-bit integers), or None."""
        return tuple(None if b.nodata is None else _nodata_number(b.nodata, self.dtype) for b in self.metadata.bands)

    @property
    def nodata(self) -> float | None:
        """The first band's nodata value, or None (rasterio's ``nodata``)."""
        return self.nodatavals[0]

    @property
    def descriptions(self) -> tuple[str | None, ...]:
        """Each band's description, or None."""
        return tuple(b.description for b in self.metadata.bands)

    @property
    def colorinterp(self) -> tuple[str, ...]:
        """Each band's colour interpretation as a rasterio ``ColorInterp`` name.

        What GDAL reports for a rumi file (``ColorInterp[name]`` gives rasterio's member):
        ``"palette"`` for a band with a colour map, whatever else is set (GDAL's GeoTIFF
        driver says so for a band with a colour table); unset, ``"gray"`` for band 1 and
        ``"undefined"`` for the others.
        """
        return tuple("palette" if b.colormap else b.colorinterp or ("gray" if i == 0 else "undefined")
                     for i, b in enumerate(self.metadata.bands))

    @property
    def scales(self) -> tuple[float, ...]:
        """Each band's scale (1.0 when unset): physical value = sample * scale + offset."""
        return tuple(1.0 if b.scale is None else b.scale for b in self.metadata.bands)

    @property
    def offsets(self) -> tuple[float, ...]:
        """Each band's offset (0.0 when unset)."""
        return tuple(0.0 if b.offset is None else b.offset for b in self.metadata.bands)

    @property
    def units(self) -> tuple[str | None, ...]:
        """Each band's unit, or None."""
        return tuple(b.unit for b in self.metadata.bands)

    def tags(self, bidx: int = 0, ns: str | None = None) -> dict[str, str]:
        """Tags of the dataset (``bidx=0``) or of band ``bidx`` (1-based), as rasterio's ``tags``.

        ``ns`` names another metadata domain of the dataset.
        """
        meta = self.metadata
        if bidx == 0:
            return dict(meta.tags) if not ns else dict(meta.domains.get(ns, {}))
        return {} if ns else dict(meta.bands[_band_index(bidx, len(meta.bands))].tags)

    def colormap(self, bidx: int) -> dict[int, tuple[int, int, int, int]]:
        """Band ``bidx``'s (1-based) colour map ``{value: (r, g, b, a)}``; ValueError when it has none (rasterio)."""
        table = self.metadata.bands[_band_index(bidx, len(self.metadata.bands))].colormap
        if not table:
            raise ValueError(f"band {bidx} has no colour map")
        return dict(table)

    def index(self, x: ArrayLike, y: ArrayLike, op: Callable[[Any], Any] = math.floor
              ) -> tuple[int, int] | tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(row, col) of the pixel holding the point (x, y) in CRS units, as rasterio's ``index``.

        ``x`` and ``y`` may be numbers or arrays; ``op`` rounds the fractional pixel
        position (``math.floor`` by default; arrays use numpy's ``floor``).  Points
        outside the image give rows and columns outside it (no clipping).
        """
        col, row = _apply(_inverse(*_coefficients(self)), x, y)
        if np.ndim(col) == 0 and np.ndim(row) == 0:
            return int(op(row)), int(op(col))
        fn = np.floor if op is math.floor else (np.ceil if op is math.ceil else np.vectorize(op))
        return fn(np.asarray(row)).astype(np.int64), fn(np.asarray(col)).astype(np.int64)

    def xy(self, row: float | Any, col: float | Any, offset: str = "center"
           ) -> tuple[float, float] | tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(x, y) in CRS units of a pixel's centre (or corner: ``offset`` "ul", "ur", "ll", "lr")."""
        try:
            dc, dr = OFFSETS[offset]
        except (KeyError, TypeError):
            raise ValueError(f"offset must be one of {', '.join(OFFSETS)}, got {offset!r}") from None
        if np.ndim(row) == 0 and np.ndim(col) == 0:
            x, y = _apply(_coefficients(self), col + dc, row + dr)
            return float(x), float(y)
        return _apply(_coefficients(self), np.asarray(col) + dc, np.asarray(row) + dr)

    def window_from_bounds(self, left: float, bottom: float, right: float, top: float) -> Window:
        """The smallest whole-pixel rasterio ``Window`` covering a box in CRS units.

        Unlike ``rasterio.windows.from_bounds`` the window is on whole pixels (edges
        within a millionth of a pixel of a pixel edge snap to it), so ``img.read(window=w)``
        takes it as is; like it, the window is not clipped to the image.
        """
        if not (left < right and bottom < top):
            raise ValueError(f"bounds must have left < right and bottom < top, got {(left, bottom, right, top)}")
        inv = _inverse(*_coefficients(self))
        corners = ((left, top), (right, top), (left, bottom), (right, bottom))
        cols, rows = zip(*(_apply(inv, x, y) for x, y in corners), strict=True)
        c0, r0 = _snap_down(min(cols)), _snap_down(min(rows))
        c1, r1 = _snap_up(max(cols)), _snap_up(max(rows))
        return require("rasterio.windows").Window(c0, r0, c1 - c0, r1 - r0)

    def window_transform(self, window: Any) -> Affine:
        """The ``Affine`` of a window's pixel grid: the image's, moved to the window's corner.

        ``window`` is a rasterio ``Window``, ``((y0, y1), (x0, x1))`` or ``(slice, slice)``.
        """
        if hasattr(window, "col_off") and hasattr(window, "row_off"):
            col, row = float(window.col_off), float(window.row_off)
        else:
            try:
                (ys, xs) = window
                row = ys.start if isinstance(ys, slice) else ys[0]
                col = xs.start if isinstance(xs, slice) else xs[0]
                row, col = float(row or 0), float(col or 0)
            except (TypeError, ValueError, IndexError):
                raise ValueError(f"window must be a rasterio Window, ((y0, y1), (x0, x1)) or (slice, slice), "
                                 f"got {window!r}") from None
        a, b, c, d, e, f = _coefficients(self)
        x, y = _apply((a, b, c, d, e, f), col, row)
        return Affine(a, b, x, d, e, y)

    def block_windows(self, bidx: int = 0) -> Iterator[tuple[tuple[int, int], Window]]:
        """Yield ``((i, j), Window)`` for every position of the frame grid, row by row.

        As rasterio's ``block_windows``: ``i`` is the grid row, ``j`` the grid column and
        the window the pixels of that tile (edge tiles are clipped to the image).  ``bidx``
        is accepted for rasterio compatibility; every band has the same grid.
        """
        Window = require("rasterio.windows").Window
        height, width = self.shape[-2:]
        tl, tw = self.tile
        for i, y0 in enumerate(range(0, height, tl)):
            for j, x0 in enumerate(range(0, width, tw)):
                yield (i, j), Window(x0, y0, min(tw, width - x0), min(tl, height - y0))


# --------------------------------------------------------------------------- the GeoTIFF profile

#: GDAL compressions for which a horizontal / floating-point predictor helps.
COMPRESSIONS_WITH_PREDICTOR = frozenset({"deflate", "zstd", "lzw", "lzma"})
#: rumi dtype name -> (GDAL dtype, NBITS) for samples GDAL holds only with NBITS.
NBITS_OUT = {"bool": ("uint8", 1), "uint2": ("uint8", 2), "uint4": ("uint8", 4), "float16": ("float32", 16)}
#: (GDAL dtype, NBITS) -> rumi dtype name, the inverse.
NBITS_IN = {v: k for k, v in NBITS_OUT.items()}
#: rumi dtypes that are GDAL dtypes as they are.
GDAL_NATIVE = frozenset({"uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float32", "float64",
                     "complex64", "complex128"})
#: GDAL's block cache while converting.  Rows are read and written once, in order, so a


def gdal_type(dtype: DTypeLike) -> tuple[str, int | None]:
    """(GDAL dtype name, NBITS or None) of a rumi sample dtype, or RumiError."""
    from rumimm.format.dtypes import encoding_for_dtype

    name = encoding_for_dtype(dtype).name
    if name in GDAL_NATIVE:
        return name, None
    if name in NBITS_OUT:
        return NBITS_OUT[name]
    raise RumiError(f"GeoTIFF (GDAL) has no sample type for {name}; cast the image to a GDAL type "
                    "(uint8..uint64, int8..int64, float32, float64, complex64, complex128) and write it with rasterio")


def gdal_block(n: int) -> int:
    """A GeoTIFF block size near ``n``: a multiple of 16 (GDAL's rule for tiles), 16 to 4096."""
    return min(4096, max(16, -(-int(n) // 16) * 16))


def gdal_compression(name: object) -> str:
    """A GDAL compression name, checked (GDAL itself only logs an unknown one and writes uncompressed)."""
    from rasterio.enums import Compression

    known = sorted(c.value.lower() for c in Compression)
    value = str(name).lower()
    if value not in known:
        raise ValueError(f"compress must be one of {', '.join(known)} or None, got {name!r}")
    return value


def nodata_key(v: object) -> object:
    """A nodata value as a set member: NaNs equal each other."""
    return "nan" if isinstance(v, float) and v != v else v


def gtiff_profile(img: Any, *, compress: str | None = "zstd", predictor: int | None = None,
                  tile: int | tuple[int, int] | None = None, interleave: str | None = None,
                  bigtiff: str = "IF_SAFER") -> dict[str, Any]:
    """rasterio creation keywords (all but ``driver``) for a tiled GeoTIFF of ``img``.

    Parameters
    ----------
    img : Image or Cube
        What the GeoTIFF will hold (its shape, dtype, tile, transform and CRS).
    compress : str or None
        A GDAL compression (``"zstd"``, ``"deflate"``, ``"lzw"``, ...); None for none.
    predictor : int, optional
        1 (none), 2 (horizontal) or 3 (floating point); default: 2 for integers and 3
        for float32/64 when ``compress`` is one that benefits, else none.
    tile : int or (int, int), optional
        Block (height, width); default the image's tile, rounded up to a multiple of 16.
    interleave : {"band", "pixel"}, optional
        Default "band" for tile frames, "pixel" for cell frames (the same layout).
    bigtiff : str
        GDAL's BIGTIFF option.
    """
    gdal_dtype, nbits = gdal_type(img.dtype)
    tl, tw = (tile, tile) if isinstance(tile, int) else (tile or img.tile)
    unit = getattr(img, "frame_unit", "tile")
    if interleave is None:
        interleave = "pixel" if unit == "cell" else "band"
    if interleave not in ("band", "pixel"):
        raise ValueError(f"interleave must be 'band' or 'pixel', got {interleave!r}")
    height, width = img.shape[-2:]
    profile = {"dtype": gdal_dtype, "count": img.shape[-3], "height": height, "width": width, "nodata": None,
               "tiled": True, "blockysize": gdal_block(tl), "blockxsize": gdal_block(tw), "interleave": interleave,
               "photometric": "minisblack",  # bands are bands: no RGB(A) reading of 3 or 4 bytes a pixel
               "bigtiff": bigtiff}
    if img.crs is not None:
        profile["crs"] = require("rasterio.crs").CRS.from_user_input(img.crs)
        profile["transform"] = Affine(*tuple(img.transform)[:6])
    meta = getattr(img, "metadata", None)
    if meta is not None:  # the PAM sidecar's nodata and the photometric its colours need
        nodata = {nodata_key(b.nodata) for b in meta.bands}
        if len(nodata) == 1 and None not in nodata:
            profile["nodata"] = meta.bands[0].nodata  # a GeoTIFF has one nodata for all bands
        interp = [b.colorinterp for b in meta.bands]
        if img.shape[-3] == 1 and meta.bands[0].colormap and gdal_dtype in ("uint8", "uint16"):
            profile["photometric"] = "palette"
        elif interp[:3] == ["red", "green", "blue"]:
            profile["photometric"] = "rgb"
    if nbits is not None:
        profile["nbits"] = nbits
    if compress is not None:
        profile["compress"] = gdal_compression(compress)
        if predictor is None and nbits is None and profile["compress"] in COMPRESSIONS_WITH_PREDICTOR:
            kind = np.dtype(gdal_dtype).kind
            predictor = 2 if kind in "iu" else (3 if kind == "f" else None)
        if predictor is not None:
            profile["predictor"] = int(predictor)
    return profile
