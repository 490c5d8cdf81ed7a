"""Argument checks of ``rumimm.write`` and ``rumimm.Writer``, all done before any file is touched.

Every function turns one user argument into the value the writer uses, or raises a
``TypeError``/``ValueError`` naming the argument (``RumiError`` for an array the
format cannot hold).  The TIFF field limits below are the only copy the writer has.
"""

from __future__ import annotations

import os

import numpy as np

from rumimm.writer.atomic import path_str
from rumimm.format.dtypes import Encoding, encoding_for_dtype
from rumimm.errors import RumiError
from rumimm.format.georef import UNDEFINED_MATRIX, geokeys, matrix_from_transform, resolve_crs, resolve_transform

__all__ = ["MAX_TILE", "MAX_DIM", "MAX_BANDS", "MAX_COUNT", "MAX_FRAME_BYTES", "resolve_threads"]

MAX_TILE = 0xFFFF  # TileWidth / TileLength are SHORT
MAX_DIM = 0xFFFFFFFF  # ImageWidth / ImageLength are LONG
MAX_BANDS = 0xFFFF  # SamplesPerPixel is SHORT
MAX_COUNT = 0xFFFFFFFF  # TileByteCounts is LONG
#: Raw bytes of the largest frame rumimm lets OpenZL 0.3 compress.  Measured by bisection:
#: frames fail with "temporary openzl library limitation" (after seconds and gigabytes) from
#: about 655.2e6 bytes on, for uint8 and uint16 with ``delta`` and float64 with ``transpose``
#: alike (a limit on bytes, not samples); 623 MiB is below every size that failed.
MAX_FRAME_BYTES = 623 << 20


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def resolve_path(path) -> str:
    """The path as a non-empty ``str``; a directory is refused."""
    p = path_str(path)
    if os.path.isdir(p):
        raise IsADirectoryError(21, "path is a directory, expected a file name", p)
    return p


def resolve_tile(tile) -> tuple[int, int]:
    """(tile_length, tile_width) from an int or a pair."""
    if _is_int(tile):
        pair = (int(tile), int(tile))
    else:
        try:
            items = tuple(tile)
        except TypeError:
            raise TypeError(f"tile must be an int or a (tile_length, tile_width) pair, got {tile!r}") from None
        if len(items) != 2 or not all(_is_int(v) for v in items):
            raise TypeError(f"tile must be an int or a (tile_length, tile_width) pair of ints, got {tile!r}")
        pair = (int(items[0]), int(items[1]))
    for v in pair:
        if not 1 <= v <= MAX_TILE:
            raise ValueError(f"tile must be in [1, {MAX_TILE}], got {v}")
    return pair


def resolve_shape(shape) -> tuple[int, int, int]:
    """(B, Y, X) from a 2-D or 3-D shape, checked against the TIFF field ranges (RumiError)."""
    try:
        shape = tuple(int(v) for v in shape)
    except TypeError:
        raise TypeError(f"shape must be (B, Y, X) or (Y, X), got {shape!r}") from None
    if len(shape) == 2:
        shape = (1, *shape)
    if len(shape) != 3:
        raise RumiError(f"array must be 2-D (Y, X) or 3-D (B, Y, X), got {len(shape)}-D shape {shape}")
    b, y, x = shape
    if b < 1 or y < 1 or x < 1:
        raise RumiError(f"array must not be empty, got shape (B, Y, X) = {shape}")
    if b > MAX_BANDS:
        raise RumiError(f"band count B must be <= {MAX_BANDS}, got {b}")
    if y > MAX_DIM or x > MAX_DIM:
        raise RumiError(f"image height and width must be <= {MAX_DIM}, got (Y, X) = ({y}, {x})")
    return shape


def check_frame_size(shape: tuple[int, int, int], tile: tuple[int, int], cell: bool, itemsize: int) -> None:
    """Refuse a tile whose largest frame OpenZL cannot compress, before any work."""
    b, y, x = shape
    samples = min(tile[0], y) * min(tile[1], x) * (b if cell else 1)
    if samples * itemsize > MAX_FRAME_BYTES:
        raise ValueError(f"tile {tile[0]} x {tile[1]} makes frames of {samples * itemsize} bytes, more than the "
                         f"{MAX_FRAME_BYTES} OpenZL compresses in one frame; use a smaller tile")


def resolve_encoding(dtype) -> Encoding:
    """The rumi encoding of ``dtype``, after normalising byte order."""
    dt = np.dtype(dtype)
    try:
        return encoding_for_dtype(dt)
    except RumiError:
        if dt.fields is not None:  # structured complex ints / float16 in big-endian
            try:
                return encoding_for_dtype(dt.newbyteorder("<"))
            except RumiError:
                pass
        raise


def resolve_georef(transform, crs, pixel_is_point) -> tuple[tuple[float, ...], tuple[int, ...], int | None]:
    """(matrix16, geokeys16, epsg) for the two georeferencing tags."""
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
    return matrix_from_transform(t), geokeys(epsg, bool(pixel_is_point)), epsg


def resolve_threads(threads) -> int:
    """Workers to compress with (the writer's processes, GDAL's threads): ``threads``, or the package-wide setting."""
    if threads is None:
        from rumimm.reader.threads import get_num_threads

        return max(1, int(get_num_threads()))
    if not _is_int(threads):
        raise TypeError(f"threads must be a positive int or None, got {threads!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return int(threads)


def resolve_format_version(format_version) -> int:
    """The OpenZL format version (its range is checked by the encoder, built once)."""
    if format_version is None:
        from rumimm.codec import DEFAULT_FORMAT_VERSION

        return DEFAULT_FORMAT_VERSION
    if not _is_int(format_version):
        raise TypeError(f"format_version must be an int, got {format_version!r}")
    return int(format_version)
