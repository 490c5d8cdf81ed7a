"""Georeferencing: affine transform <-> ModelTransformationTag, EPSG <-> GeoKeyDirectoryTag.

rumi stores a CRS only as an EPSG code and always writes both tags, so their size
never changes.  Whether a code is geographic or projected comes from the EPSG
registry in PROJ's database (via pyproj), never from the number.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from rumimm.errors import CRSError

__all__ = [
    "GEOREF_BYTES",
    "UNDEFINED_MATRIX",
    "Georef",
    "check_extent",
    "crs_kind",
    "geokeys",
    "matrix_from_transform",
    "parse_geokeys",
    "resolve_crs",
    "resolve_transform",
    "split_georef_block",
    "transform_from_matrix",
]

#: The two georeferencing tag values stored right before the first frame: ModelTransformation
#: (16 doubles, 128 bytes) then GeoKeyDirectory (16 shorts, 32 bytes).
MATRIX_BYTES = 128
GEOREF_BYTES = MATRIX_BYTES + 32


def split_georef_block(block) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, keys) of the 160-byte georeferencing block: 16 float64 and 16 uint16, little-endian."""
    return np.frombuffer(block, "<f8", 16, 0), np.frombuffer(block, "<u2", 16, MATRIX_BYTES)

MODEL_PROJECTED = 1
MODEL_GEOGRAPHIC = 2
RASTER_PIXEL_IS_AREA = 1
RASTER_PIXEL_IS_POINT = 2
KEY_MODEL_TYPE = 1024
KEY_RASTER_TYPE = 1025
KEY_GEOGRAPHIC_TYPE = 2048
KEY_PROJECTED_TYPE = 3072
EPSG_MIN, EPSG_MAX = 1024, 32766
GEOKEY_HEADER = (1, 1, 0, 3)  # KeyDirectoryVersion, KeyRevision, MinorRevision, NumberOfKeys

#: The spec's matrix for undefined georeferencing, row-major.
UNDEFINED_MATRIX = (1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)

_GEOTIFF_HINT = "rumi stores only projected or geographic EPSG CRSs; use an ordinary GeoTIFF for this raster"


@dataclass(frozen=True)
class Georef:
    """Georeferencing read from a file: no CRS when ``epsg`` is None."""

    epsg: int | None
    transform: tuple[float, ...] | None  # (x_res, row_rot, x_origin, col_rot, y_res, y_origin)
    geographic: bool | None
    pixel_is_point: bool

    @property
    def crs(self) -> str | None:
        return None if self.epsg is None else f"EPSG:{self.epsg}"


def matrix_from_transform(t) -> tuple[float, ...]:
    """16 doubles (row-major 4 x 4) from (x_res, row_rot, x_origin, col_rot, y_res, y_origin)."""
    a, b, c, d, e, f = (float(v) for v in t)
    return (a, b, 0.0, c, d, e, 0.0, f, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)


def transform_from_matrix(m) -> tuple[float, ...]:
    """The six affine coefficients of a 16-double ModelTransformationTag."""
    return (m[0], m[1], m[3], m[4], m[5], m[7])


def resolve_transform(transform) -> tuple[float, ...]:
    """Accept 6 coefficients, a rasterio/affine ``Affine`` or 9 values with last row 0 0 1."""
    if hasattr(transform, "to_gdal") and hasattr(transform, "a"):
        vals = [transform.a, transform.b, transform.c, transform.d, transform.e, transform.f]
    else:
        try:
            vals = [float(v) for v in (transform.ravel() if hasattr(transform, "ravel") else transform)]
        except TypeError:
            raise ValueError(f"transform must be 6 or 9 numbers, got {transform!r}") from None
        if len(vals) == 9:
            if vals[6:] != [0.0, 0.0, 1.0]:
                raise ValueError(f"a 9-value transform must end with 0, 0, 1, got {vals[6:]}")
            vals = vals[:6]
        if len(vals) != 6:
            raise ValueError(f"transform must have 6 or 9 coefficients, got {len(vals)}")
    vals = [float(v) for v in vals]
    if not all(math.isfinite(v) for v in vals):
        raise ValueError(f"transform coefficients must be finite, got {vals}")
    if vals[0] * vals[4] - vals[1] * vals[3] == 0:
        raise ValueError(f"transform {vals} is singular (zero determinant)")
    return tuple(vals)


def resolve_crs(crs) -> int:
    """An EPSG code from an int, ``"EPSG:n"`` or any object with ``to_epsg()``."""
    if isinstance(crs, bool):
        raise CRSError(f"crs must be an EPSG code, got {crs!r}")
    if isinstance(crs, numbers.Integral):  # int or a numpy integer from a catalog column
        code = int(crs)
    elif isinstance(crs, str):
        m = re.fullmatch(r"\s*(?:EPSG:)?\s*(\d+)\s*", crs, flags=re.IGNORECASE)
        if not m:
            raise CRSError(f"crs {crs!r} is not an EPSG code; {_GEOTIFF_HINT}")
        code = int(m.group(1))
    elif hasattr(crs, "to_epsg"):
        code = _exact_epsg(crs)
    else:
        raise CRSError(f"crs must be an EPSG int, 'EPSG:n' or have to_epsg(), got {type(crs).__name__}")
    code = int(code)
    crs_kind(code)  # range and registry checks
    return code


def _exact_epsg(crs) -> int:
    """The EPSG code a CRS object *is*, not one it resembles.

    pyproj's and rasterio's ``to_epsg()`` accept a 70 % match by default, which would
    store a user-defined CRS (a PROJ string, an ESRI WKT) under a code that is not
    quite it; rumi holds EPSG codes only, so anything short of an exact match is refused.
    """
    try:
        code = crs.to_epsg(100)
    except TypeError:  # a to_epsg() without a confidence argument
        code = crs.to_epsg()
        if code is None:
            raise CRSError(f"crs {_short(crs)} has no EPSG code; {_GEOTIFF_HINT}") from None
        return code
    if code is None:
        near = crs.to_epsg()
        if near is not None:
            raise CRSError(f"crs {_short(crs)} matches EPSG:{near} only approximately; pass crs={near} if that "
                           f"is what it is, or {_GEOTIFF_HINT}")
        raise CRSError(f"crs {_short(crs)} has no EPSG code; {_GEOTIFF_HINT}")
    return code


def _short(crs) -> str:
    """A one-line name of a CRS object for messages."""
    try:
        text = crs.to_string()
    except Exception:
        text = repr(crs)
    text = " ".join(str(text).split())
    return repr(text if len(text) <= 100 else text[:97] + "...")


@lru_cache(maxsize=4096)
def crs_kind(code: int) -> int:
    """MODEL_GEOGRAPHIC or MODEL_PROJECTED for an EPSG code, from the EPSG registry."""
    if not EPSG_MIN <= code <= EPSG_MAX:
        raise CRSError(f"EPSG code {code} is outside {EPSG_MIN}..{EPSG_MAX}; {_GEOTIFF_HINT}")
    import pyproj  # deferred: only georeferenced files pay the import

    try:
        crs = pyproj.CRS.from_authority("EPSG", str(code))
    except pyproj.exceptions.CRSError:
        raise CRSError(f"EPSG:{code} is not defined in the EPSG registry") from None
    if crs.is_compound or crs.is_vertical or crs.is_engineering:
        raise CRSError(f"EPSG:{code} is a {crs.type_name}; {_GEOTIFF_HINT}")
    if crs.is_projected:
        return MODEL_PROJECTED
    if crs.is_geographic:
        return MODEL_GEOGRAPHIC
    raise CRSError(f"EPSG:{code} is a {crs.type_name}, neither projected nor geographic; {_GEOTIFF_HINT}")


#: Longitudes a geographic raster may span: -180 to 180, or 0 to 360 (global grids of climate models).
LON_RANGE = (-180.0, 360.0)


def check_extent(epsg: int, transform, shape) -> None:
    """CRSError when a geographic CRS's image corners lie beyond its longitudes or latitudes.

    A metre grid labelled EPSG:4326 is the usual mistake this catches.  Corners may
    overshoot by half a pixel (pixel-centre grids from -180 to 180 and pole to pole).
    """
    if crs_kind(int(epsg)) != MODEL_GEOGRAPHIC:
        return
    a, b, c, d, e, f = (float(v) for v in transform)
    height, width = shape
    xs = [c + a * px + b * py for px, py in ((0, 0), (width, 0), (0, height), (width, height))]
    ys = [f + d * px + e * py for px, py in ((0, 0), (width, 0), (0, height), (width, height))]
    tx, ty = 0.5 * (abs(a) + abs(b)) + 1e-9, 0.5 * (abs(d) + abs(e)) + 1e-9
    lo, hi = LON_RANGE
    if min(xs) < lo - tx or max(xs) > hi + tx or min(ys) < -90 - ty or max(ys) > 90 + ty:
        raise CRSError(f"EPSG:{epsg} is geographic (degrees), but the transform puts the image at x "
                       f"{min(xs):.6g} to {max(xs):.6g}, y {min(ys):.6g} to {max(ys):.6g}, beyond longitudes "
                       f"{lo:g} to {hi:g} and latitudes -90 to 90; the coordinates are in another CRS: pass its "
                       "EPSG code")


def geokeys(epsg: int | None, pixel_is_point: bool = False) -> tuple[int, ...]:
    """The 16-short GeoKeyDirectoryTag for an EPSG code, or for no CRS (``None``)."""
    raster = RASTER_PIXEL_IS_POINT if pixel_is_point else RASTER_PIXEL_IS_AREA
    if epsg is None:
        model, key, code = 0, KEY_GEOGRAPHIC_TYPE, 0
    else:
        model = crs_kind(int(epsg))
        key = KEY_GEOGRAPHIC_TYPE if model == MODEL_GEOGRAPHIC else KEY_PROJECTED_TYPE
        code = int(epsg)
    return (*GEOKEY_HEADER, KEY_MODEL_TYPE, 0, 1, model, KEY_RASTER_TYPE, 0, 1, raster, key, 0, 1, code)


def parse_geokeys(keys, matrix, *, registry: bool = True) -> tuple[Georef | None, list[str]]:
    """Read the two georeferencing tags; return (Georef, violations of the spec)."""
    bad: list[str] = []
    k = [int(v) for v in keys]
    m = [float(v) for v in matrix]
    if len(k) != 16 or len(m) != 16:
        return None, ["georeferencing tags have the wrong size"]
    if tuple(k[:4]) != GEOKEY_HEADER:
        # KeyDirectoryVersion 1, KeyRevision 1, MinorRevision 0 (GeoTIFF 1.0, whose key names the
        # spec uses; rumi-eo 0.16.0 writes and requires exactly this header), three keys
        bad.append(f"tag 34735: header is {tuple(k[:4])}, expected (1, 1, 0, 3): key directory version 1, "
                   "revision 1.0, three keys")
    entries = [tuple(k[i : i + 4]) for i in (4, 8, 12)]
    for key_id, loc, count, _ in entries:
        if loc != 0 or count != 1:
            bad.append(f"tag 34735: key {key_id} must be stored inline (location 0, count 1), got ({loc}, {count})")
    (id0, _, _, model), (id1, _, _, raster), (id2, _, _, code) = entries
    if id0 != KEY_MODEL_TYPE or id1 != KEY_RASTER_TYPE or id2 not in (KEY_GEOGRAPHIC_TYPE, KEY_PROJECTED_TYPE):
        bad.append(f"tag 34735: keys are {id0}, {id1}, {id2}; expected 1024, 1025 and 2048 or 3072")
    if raster not in (RASTER_PIXEL_IS_AREA, RASTER_PIXEL_IS_POINT):
        bad.append(f"tag 34735: GTRasterTypeGeoKey is {raster}, expected 1 (PixelIsArea) or 2 (PixelIsPoint)")
    # Non-finite matrix values are not refused: no rule of the spec forbids them and the
    # reference writes and reads them (rumimm's writer refuses them as input instead).
    pixel_is_point = raster == RASTER_PIXEL_IS_POINT
    if model == 0:
        if id2 != KEY_GEOGRAPHIC_TYPE or code != 0:
            bad.append(f"tag 34735: no CRS (GTModelTypeGeoKey 0) needs key 2048 = 0, got key {id2} = {code}")
        if tuple(m) != UNDEFINED_MATRIX:
            bad.append("tag 34264: with no CRS the matrix must be the spec's undefined matrix "
                       "(1 0 0 0 / 0 1 0 0 / 0 0 0 0 / 0 0 0 1)")
        return Georef(None, None, None, pixel_is_point), bad
    if model not in (MODEL_PROJECTED, MODEL_GEOGRAPHIC):
        bad.append(f"tag 34735: GTModelTypeGeoKey is {model}, expected 0, 1 (projected) or 2 (geographic)")
        return None, bad
    want_key = KEY_PROJECTED_TYPE if model == MODEL_PROJECTED else KEY_GEOGRAPHIC_TYPE
    if id2 != want_key:
        bad.append(f"tag 34735: GTModelTypeGeoKey {model} needs key {want_key}, found key {id2}")
    if not EPSG_MIN <= code <= EPSG_MAX:
        bad.append(f"tag 34735: EPSG code {code} is outside {EPSG_MIN}..{EPSG_MAX}")
    elif registry:
        try:
            kind = crs_kind(code)
            if kind != model:
                names = {MODEL_PROJECTED: "projected", MODEL_GEOGRAPHIC: "geographic"}
                bad.append(f"tag 34735: EPSG:{code} is {names[kind]} in the EPSG registry, "
                           f"but GTModelTypeGeoKey says {names[model]}")
        except CRSError as exc:
            bad.append(f"tag 34735: {exc}")
    zero = [i for i in (2, 6, 8, 9, 10, 11, 12, 13, 14) if m[i] != 0.0]
    if zero or m[15] != 1.0:
        bad.append("tag 34264: matrix must be [x_res row_rot 0 x_origin / col_rot y_res 0 y_origin / "
                   "0 0 0 0 / 0 0 0 1]")
    return Georef(code, transform_from_matrix(m), model == MODEL_GEOGRAPHIC, pixel_is_point), bad
