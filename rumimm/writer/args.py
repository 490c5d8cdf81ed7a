"""Argument checks of ``rumimm.write`` and ``rumimm.Writer``, all done before any file is touched.

Every function turns one user argument into the value the writer uses, or raises a
``TypeError``/``ValueError`` naming the argument (``RumiError`` for an array the
format cannot hold).  The TIFF field limits below are the only copy the writer has.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, SupportsInt, cast

import numpy as np

from rumimm.errors import RumiError
from rumimm.format.dtypes import Encoding, encoding_for_dtype
from rumimm.format.georef import (
    UNDEFINED_MATRIX,
    check_extent,
    geokeys,
    matrix_from_transform,
    parse_geokeys,
    resolve_crs,
    resolve_transform,
)
from rumimm.writer.atomic import path_str

if TYPE_CHECKING:
    from typing import TypeGuard

    from numpy.typing import DTypeLike

    from rumimm._typing import AnyPath, CRSArg, Tile, TimeArg, TimeCoord, Unit

__all__ = [
    "MAX_BANDS",
    "MAX_COUNT",
    "MAX_DIM",
    "MAX_FRAME_BYTES",
    "MAX_TILE",
    "resolve_descriptions",
    "resolve_layout",
    "resolve_shape2",
    "resolve_spec",
    "resolve_threads",
    "resolve_time",
]

MAX_TILE = 0xFFFF  # TileWidth / TileLength are SHORT
MAX_DIM = 0xFFFFFFFF  # ImageWidth / ImageLength are LONG
MAX_BANDS = 0xFFFF  # SamplesPerPixel is SHORT
MAX_COUNT = 0xFFFFFFFF  # TileByteCounts is LONG
#: Raw bytes of the largest frame rumimm lets OpenZL 0.3 compress.  Measured by bisection:
#: frames fail with "temporary openzl library limitation" (after seconds and gigabytes) from
#: about 655.2e6 bytes on, for uint8 and uint16 with ``delta`` and float64 with ``transpose``
#: alike (a limit on bytes, not samples); 623 MiB is below every size that failed.
MAX_FRAME_BYTES = 623 << 20


def _is_int(v: object) -> TypeGuard[int | np.integer]:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def resolve_path(path: AnyPath) -> str:
    """The path as a non-empty ``str``; a directory is refused."""
    p = path_str(path)
    if os.path.isdir(p):
        raise IsADirectoryError(21, "path is a directory, expected a file name", p)
    return p


def resolve_tile(tile: Tile) -> tuple[int, int]:
    """(tile_length, tile_width) from an int or a pair."""
    if _is_int(tile):
        pair = (int(tile), int(tile))
    else:
        try:
            items = tuple(cast("Iterable[int]", tile))  # a pair, or TypeError for what is none
        except TypeError:
            raise TypeError(f"tile must be an int or a (tile_length, tile_width) pair, got {tile!r}") from None
        if len(items) != 2 or not all(_is_int(v) for v in items):
            raise TypeError(f"tile must be an int or a (tile_length, tile_width) pair of ints, got {tile!r}")
        pair = (int(items[0]), int(items[1]))
    for v in pair:
        if not 1 <= v <= MAX_TILE:
            raise ValueError(f"tile must be in [1, {MAX_TILE}], got {v}")
    return pair


def resolve_shape(shape: Iterable[SupportsInt]) -> tuple[int, int, int]:
    """(B, Y, X) from a 2-D or 3-D shape, checked against the TIFF field ranges (RumiError)."""
    try:
        dims = tuple(int(v) for v in shape)
    except TypeError:
        raise TypeError(f"shape must be (B, Y, X) or (Y, X), got {shape!r}") from None
    if len(dims) == 2:
        dims = (1, *dims)
    if len(dims) != 3:
        raise RumiError(f"array must be 2-D (Y, X) or 3-D (B, Y, X), got {len(dims)}-D shape {dims}")
    b, y, x = dims
    if b < 1 or y < 1 or x < 1:
        raise RumiError(f"array must not be empty, got shape (B, Y, X) = {dims}")
    if b > MAX_BANDS:
        raise RumiError(f"band count B must be <= {MAX_BANDS}, got {b}")
    if y > MAX_DIM or x > MAX_DIM:
        raise RumiError(f"image height and width must be <= {MAX_DIM}, got (Y, X) = ({y}, {x})")
    return dims


def check_frame_size(shape: tuple[int, int, int], tile: tuple[int, int], cell: bool, itemsize: int) -> None:
    """Refuse a tile whose largest frame OpenZL cannot compress, before any work."""
    b, y, x = shape
    samples = min(tile[0], y) * min(tile[1], x) * (b if cell else 1)
    if samples * itemsize > MAX_FRAME_BYTES:
        raise ValueError(f"tile {tile[0]} x {tile[1]} makes frames of {samples * itemsize} bytes, more than the "
                         f"{MAX_FRAME_BYTES} OpenZL compresses in one frame; use a smaller tile")


def resolve_encoding(dtype: DTypeLike, spec: str = "0.1") -> Encoding:
    """The rumi encoding of ``dtype`` in ``spec``, after normalising byte order."""
    dt = np.dtype(dtype)
    try:
        return encoding_for_dtype(dt, spec)
    except RumiError:
        if dt.fields is not None:  # structured complex ints / float16 in big-endian
            try:
                return encoding_for_dtype(dt.newbyteorder("<"), spec)
            except RumiError:
                pass
        raise


def resolve_georef(transform: Sequence[float] | None, crs: CRSArg, pixel_is_point: bool,
                   shape: tuple[int, int] | None = None) -> tuple[tuple[float, ...], tuple[int, ...], int | None]:
    """(matrix16, geokeys16, epsg) for the two georeferencing tags; with ``shape`` (Y, X), a geographic
    CRS is checked against the image's corners (:func:`rumimm.format.georef.check_extent`)."""
    if not isinstance(pixel_is_point, (bool, np.bool_)):
        raise TypeError(f"pixel_is_point must be True or False, got {pixel_is_point!r}")
    if (transform is None) != (crs is None):
        given, missing = ("transform", "crs") if crs is None else ("crs", "transform")
        raise ValueError(f"{given} was given without {missing}; georeferencing needs both (a matrix without "
                         "a CRS is not georeferencing in rumi); pass both, or neither for an image without one")
    if transform is None:
        return UNDEFINED_MATRIX, geokeys(None, bool(pixel_is_point)), None
    t = resolve_transform(transform)
    epsg = resolve_crs(crs)
    if shape is not None:
        check_extent(epsg, t, shape)
    return matrix_from_transform(t), geokeys(epsg, bool(pixel_is_point)), epsg


def resolve_georef_tags(georef: tuple[Iterable[float], Iterable[int]], transform: Sequence[float] | None, crs: CRSArg,
                        pixel_is_point: bool = False) -> tuple[tuple[float, ...], tuple[int, ...], int | None]:
    """(matrix16, geokeys16, epsg) from the stored values of the two georeferencing tags (what convert copies)."""
    if transform is not None or crs is not None or pixel_is_point:
        raise ValueError("georef= gives the georeferencing tags as stored, so it replaces transform=, crs= and "
                         "pixel_is_point=; pass one or the others")
    try:
        matrix, keys = georef
        m = tuple(float(v) for v in matrix)
        k = tuple(int(v) for v in keys)
    except (TypeError, ValueError):
        raise TypeError("georef must be (16 floats of tag 34264, 16 ints of tag 34735)") from None
    geo, bad = parse_geokeys(k, m)
    if bad or geo is None:
        raise RumiError(f"georef: {bad[0] if bad else 'unreadable georeferencing'}")
    return m, k, geo.epsg


def resolve_threads(threads: int | None) -> int:
    """Workers to compress with (the writer's processes, GDAL's threads): ``threads``, or the package-wide setting."""
    if threads is None:
        from rumimm.reader.threads import get_num_threads

        return max(1, int(get_num_threads()))
    if not _is_int(threads):
        raise TypeError(f"threads must be a positive int or None, got {threads!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return int(threads)


def resolve_format_version(format_version: int | None) -> int:
    """The OpenZL format version (its range is checked by the encoder, built once)."""
    if format_version is None:
        from rumimm.codec import DEFAULT_FORMAT_VERSION

        return DEFAULT_FORMAT_VERSION
    if not _is_int(format_version):
        raise TypeError(f"frame_format_version must be an int, got {format_version!r}")
    return int(format_version)


# --------------------------------------------------------------------------- spec 0.2


def resolve_spec(fmt: str | None) -> str:
    """``"0.1"`` (the default) or ``"0.2"``."""
    if fmt is None:
        return "0.1"
    if fmt not in ("0.1", "0.2"):
        raise ValueError(f"spec must be '0.1' or '0.2', got {fmt!r}")
    return fmt


def resolve_shape2(shape: Iterable[SupportsInt]) -> tuple[int, int, int, int]:
    """(T, B, Y, X) of a spec 0.2 write from a 2-, 3- or 4-D shape (RumiError beyond the field ranges)."""
    try:
        dims = tuple(int(v) for v in shape)
    except TypeError:
        raise TypeError(f"shape must be (T, B, Y, X), (B, Y, X) or (Y, X), got {shape!r}") from None
    if len(dims) == 4:
        t, *rest = dims
        if t < 1:
            raise RumiError(f"array must not be empty, got shape (T, B, Y, X) = {dims}")
        if t > MAX_DIM:
            raise RumiError(f"time step count T must be <= {MAX_DIM}, got {t}")
        return (t, *resolve_shape(rest))
    if len(dims) not in (2, 3):
        raise RumiError(f"array must be 2-D (Y, X), 3-D (B, Y, X) or 4-D (T, B, Y, X), got {len(dims)}-D "
                        f"shape {dims}")
    return (1, *resolve_shape(dims))


def resolve_descriptions(descriptions: Iterable[str] | None, count: int) -> tuple[str, ...]:
    """One non-empty, unique text per band (spec 0.2 stores them in the trailer)."""
    from rumimm.format.trailer import check_band_texts

    if descriptions is None:
        raise TypeError("spec='0.2' stores a text per band; pass descriptions=[...] with one per band, in band "
                        "order (e.g. 'B4, Red, 665nm')")
    if isinstance(descriptions, str):
        raise TypeError("descriptions is a list with one text per band; wrap a single text as "
                        f"descriptions=[{descriptions!r}]")
    texts = list(descriptions)
    if len(texts) != count:
        raise ValueError(f"descriptions needs one text per band, so {count}; got {len(texts)}")
    check_band_texts(texts)
    return tuple(texts)


_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def _seconds(value: TimeCoord, i: int) -> int:
    """Seconds since 1970-01-01 UTC of one coordinate: a date, a datetime, an ISO string or a datetime64."""
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise ValueError(f"time coordinate {i} is NaT")
        unit, step = np.datetime_data(value.dtype)
        per_second = {"ms": 10**3, "us": 10**6, "ns": 10**9, "ps": 10**12, "fs": 10**15, "as": 10**18}.get(unit)
        if per_second is None:  # seconds or coarser: exact in seconds
            return int(value.astype("datetime64[s]").astype(np.int64))
        ticks = int(value.astype(np.int64)) * step
        if ticks % per_second:
            raise ValueError(f"time coordinate {i} ({value}) carries a fraction of a second; rumi records whole "
                             "seconds; round the value before writing")
        return ticks // per_second
    if isinstance(value, str):
        try:
            value = _dt.datetime.fromisoformat(value) if ("T" in value or " " in value.strip()) \
                else _dt.date.fromisoformat(value)
        except ValueError:
            raise ValueError(f"time coordinate {i} ({value!r}) is not an ISO date or datetime") from None
    if isinstance(value, _dt.datetime):
        if value.microsecond:
            raise ValueError(f"time coordinate {i} ({value.isoformat()}) carries a fraction of a second; rumi "
                             "records whole seconds; round the value before writing")
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        delta = value - _EPOCH
        return delta.days * 86400 + delta.seconds
    if isinstance(value, _dt.date):
        return (value - _EPOCH.date()).days * 86400
    raise TypeError(f"a time coordinate is a date, a datetime, an ISO string or a numpy.datetime64, got "
                    f"{type(value).__name__}")


def resolve_time(time: TimeArg | np.ndarray, steps: int) -> tuple[int, list[int]]:
    """(kind, seconds) of ``time=``: one instant per step, or one ``(start, end)`` pair per step."""
    from rumimm.format.trailer import INSTANT, INTERVAL, check_time_order

    if time is None:
        raise TypeError("spec='0.2' labels every time step; pass time=[...] with one date per step, or a "
                        "(start, end) pair for a step without a single instant")
    if isinstance(time, (str, _dt.date, np.datetime64)):
        raise TypeError(f"time is a list with one entry per time step; wrap a single coordinate as time=[{time!r}]")
    if isinstance(time, tuple) and len(time) == 2 and not isinstance(time[0], (tuple, list)):
        raise TypeError("a tuple is one step's start and end, so it cannot be the list of steps; wrap it as "
                        "time=[(start, end)]")
    if isinstance(time, np.ndarray) and time.dtype.kind == "M":  # (T,) instants or (T, 2) intervals
        items: list[Any] = list(time) if time.ndim == 1 else [tuple(row) for row in time]
    else:
        items = list(time)
    if len(items) != steps:
        raise ValueError(f"time needs one entry per time step, so {steps}; got {len(items)}")
    pairs = [isinstance(v, (tuple, list)) for v in items]
    if any(pairs) and not all(pairs):
        raise ValueError("a file records one kind of time step, so the list is either all plain coordinates "
                         "(instants) or all pairs (intervals), not a mix")
    if all(pairs):
        seconds = []
        for i, v in enumerate(items):
            if len(v) != 2:
                raise ValueError(f"time step {i} must be a (start, end) pair, got {len(v)} values")
            seconds += [_seconds(v[0], i), _seconds(v[1], i)]
        kind = INTERVAL
    else:
        seconds = [_seconds(v, i) for i, v in enumerate(items)]
        kind = INSTANT
    check_time_order(kind, seconds)
    return kind, seconds


def resolve_layout(unit: Unit | int, bands: int, times: int) -> int:
    """The spec 0.2 frame unit a write records: ``"tile"``, ``"cell"`` or a planar unit number.

    ``"tile"``: one (h, w) frame per band and step (unit 0); ``"cell"``: every band and
    step of a grid position in one planar frame (unit 1 for one axis above 1,
    ``t b h w``, unit 4, for both).  Units 0, 1, 3, 4 and 9 may be named by number; the
    interleaved layouts (2, 5 to 8) are read but not written.
    """
    from rumimm.format import units

    if isinstance(unit, str):
        if unit not in ("tile", "cell"):
            raise ValueError(f"unit must be 'tile', 'cell' or a spec 0.2 frame unit number, got {unit!r}")
        if unit == "tile" or (bands == 1 and times == 1):
            return 0
        return 4 if bands > 1 and times > 1 else 1
    if not _is_int(unit):
        raise TypeError(f"unit must be 'tile', 'cell' or an int, got {unit!r}")
    unit = int(unit)
    rule = units.check_unit(unit, bands, times)
    if rule:
        raise ValueError(rule)
    if units.interleaved(unit):
        raise ValueError(f"frame unit {unit} ({units.unit_axes(unit, bands, times)}) interleaves samples per pixel; "
                         "rumimm reads it but writes the planar units 0, 1, 3, 4 and 9")
    return unit
