"""The rasterio-shaped surface of an Image (and a Cube): profile, Affine, index/xy, windows.

A rasterio user looks for ``profile``, an ``Affine`` transform, ``index``/``xy`` and
``block_windows``; :class:`RasterioSurface` adds them on top of the public properties
its host already has (``shape``, ``dtype``, ``tile``, ``transform``, ``crs``), so the
host keeps its own tuple-and-string properties unchanged.  ``index`` and ``xy`` are
plain arithmetic; the members that return rasterio or affine objects import them on
first use (``pip install 'rumimm[geotiff]'``).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["OFFSETS", "RasterioSurface", "require"]

#: Where in a pixel ``xy`` puts the point: (column, row) offsets from the pixel's corner.
OFFSETS = {"center": (0.5, 0.5), "ul": (0.0, 0.0), "ur": (1.0, 0.0), "ll": (0.0, 1.0), "lr": (1.0, 1.0)}
#: Distance (in pixels) within which a window edge snaps to the whole pixel it is on.
SNAP = 1e-6


def require(module: str):
    """Import an optional package of the ``geotiff`` extra, or say how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        top = module.split(".")[0]
        raise ImportError(f"this needs {top}; pip install 'rumimm[geotiff]' (rasterio and affine)") from None


def _coefficients(host) -> tuple[float, ...]:
    """The host's six affine coefficients; the identity when it has no georeferencing (as rasterio)."""
    t = host.transform
    return (1.0, 0.0, 0.0, 0.0, 1.0, 0.0) if t is None else tuple(float(v) for v in t)


def _inverse(a, b, c, d, e, f) -> tuple[float, ...]:
    """Coefficients of the inverse transform, computed as ``~affine.Affine`` does."""
    idet = 1.0 / (a * e - b * d)
    ra, rb, rd, re = e * idet, -b * idet, -d * idet, a * idet
    return (ra, rb, -c * ra - f * rb, rd, re, -c * rd - f * re)


def _apply(t, u, v):
    a, b, c, d, e, f = t
    return a * u + b * v + c, d * u + e * v + f


def _snap_down(v: float) -> int:
    r = round(v)
    return int(r) if abs(v - r) < SNAP else math.floor(v)


def _snap_up(v: float) -> int:
    r = round(v)
    return int(r) if abs(v - r) < SNAP else math.ceil(v)


class RasterioSurface:
    """Mixin: rasterio's dataset members computed from ``shape``, ``dtype``, ``tile``, ``transform``, ``crs``."""

    @property
    def profile(self) -> dict:
        """Creation options for a tiled, compressed GeoTIFF of this image (no ``driver`` key).

        Usable as ``rasterio.open(out, "w", driver="GTiff", **img.profile)``: dtype,
        count, height, width, crs, transform, nodata and the block layout, compression
        and predictor that ``rumimm.to_geotiff`` uses.  Sub-byte samples are ``uint8``
        with ``nbits``; float16 is ``float32`` with ``nbits=16``.

        Raises
        ------
        RumiError
            GeoTIFF has no sample type for this dtype (int2/int4, complex integers,
            the ML float types).
        """
        from .geotiff import gtiff_profile

        return gtiff_profile(self)

    @property
    def affine(self):
        """The transform as an ``affine.Affine`` (the identity without georeferencing, as rasterio)."""
        return require("affine").Affine(*_coefficients(self))

    @property
    def pyproj_crs(self):
        """The CRS as a ``pyproj.CRS``, or None without georeferencing."""
        if self.crs is None:
            return None
        import pyproj

        return pyproj.CRS.from_user_input(self.crs)

    def index(self, x, y, op=math.floor):
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

    def xy(self, row, col, offset: str = "center"):
        """(x, y) in CRS units of a pixel's centre (or corner: ``offset`` "ul", "ur", "ll", "lr")."""
        try:
            dc, dr = OFFSETS[offset]
        except (KeyError, TypeError):
            raise ValueError(f"offset must be one of {', '.join(OFFSETS)}, got {offset!r}") from None
        if np.ndim(row) == 0 and np.ndim(col) == 0:
            x, y = _apply(_coefficients(self), col + dc, row + dr)
            return float(x), float(y)
        return _apply(_coefficients(self), np.asarray(col) + dc, np.asarray(row) + dr)

    def window_from_bounds(self, left, bottom, right, top):
        """The smallest whole-pixel rasterio ``Window`` covering a box in CRS units.

        Unlike ``rasterio.windows.from_bounds`` the window is on whole pixels (edges
        within a millionth of a pixel of a pixel edge snap to it), so ``img.read(window=w)``
        takes it as is; like it, the window is not clipped to the image.
        """
        if not (left < right and bottom < top):
            raise ValueError(f"bounds must have left < right and bottom < top, got {(left, bottom, right, top)}")
        inv = _inverse(*_coefficients(self))
        cols, rows = zip(*(_apply(inv, x, y) for x, y in ((left, top), (right, top), (left, bottom), (right, bottom))))
        c0, r0 = _snap_down(min(cols)), _snap_down(min(rows))
        c1, r1 = _snap_up(max(cols)), _snap_up(max(rows))
        return require("rasterio.windows").Window(c0, r0, c1 - c0, r1 - r0)

    def window_transform(self, window):
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
        return require("affine").Affine(a, b, x, d, e, y)

    def block_windows(self, bidx: int = 0):
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
