"""Quick looks: an 8-bit PNG of one band (grey) or three (RGB), percentile-stretched.

The image is read at a step chosen so the longer side fits ``max_size``
(``img[bands, ::step, ::step]``): only the selected bands are decoded, and once the
step exceeds the tile size, only the frames that hold a sampled row and column.
Pillow writes the PNG (``pip install 'rumimm[preview]'``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rumimm.errors import RumiError, WindowError

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from rumimm._typing import StrPath
    from rumimm.reader.image import Image

__all__ = ["PERCENTILES", "BandNumberError", "one_based_bands", "preview_file", "quicklook", "stretch"]

#: Low and high percentiles mapped to 0 and 255 by default.
PERCENTILES = (2.0, 98.0)


def stretch(block: NDArray[Any], percentiles: tuple[float, float] = PERCENTILES) -> NDArray[np.uint8]:
    """Each band of a (n, h, w) block scaled to uint8 between its low and high percentiles.

    NaN and infinite samples become 0 and are left out of the percentiles; a band
    whose percentiles are equal becomes 0 where at or below them, 255 above.
    """
    if block.dtype.fields is not None or block.dtype.kind == "c":
        raise ValueError(f"a quick look needs real samples, not {block.dtype}")
    lo_pct, hi_pct = percentiles
    if not 0 <= lo_pct < hi_pct <= 100:
        raise ValueError(f"percentiles must satisfy 0 <= low < high <= 100, got {percentiles!r}")
    out = np.zeros(block.shape, np.uint8)
    for i, band in enumerate(block.astype(np.float64)):
        finite = np.isfinite(band)
        if not finite.any():
            continue
        lo, hi = np.percentile(band[finite], [lo_pct, hi_pct])
        scaled = (band - lo) / (hi - lo) * 255.0 if hi > lo else np.where(band > lo, 255.0, 0.0)
        out[i] = np.clip(np.where(finite, scaled, 0.0), 0, 255).round().astype(np.uint8)
    return out


def _bands(bands: int | np.integer | Sequence[int | np.integer] | None, count: int) -> list[int]:
    if bands is None:
        return [0, 1, 2] if count >= 3 else [0]
    if isinstance(bands, (int, np.integer)):
        bands = [bands]
    chosen = [int(b) for b in bands]
    if len(chosen) not in (1, 3):
        raise ValueError(f"a quick look shows 1 band (grey) or 3 (red, green, blue), got {len(chosen)}: {chosen}")
    bad = [b for b in chosen if not 0 <= b < count]
    if bad:
        raise ValueError(f"band {bad[0]} is out of range for an image of {count} bands (0-based)")
    return chosen


class BandNumberError(WindowError):
    """A 1-based band number (as ``rumimm quicklook --bands`` takes them) that the file does not have."""


def one_based_bands(bands: Sequence[int] | None, count: int, path: StrPath) -> list[int] | None:
    """1-based band numbers as the 0-based ones :func:`quicklook` takes; BandNumberError for one past ``count``."""
    if bands is None:
        return None
    if max(bands) > count:
        raise BandNumberError(f"band {max(bands)} does not exist; {os.fspath(path)} has {count} bands "
                              f"(numbered 1 to {count})")
    return [b - 1 for b in bands]


def preview_file(src: StrPath, dst: StrPath, *, bands: Sequence[int] | None = None, max_size: int = 1024,
                 header: bytes | None = None) -> tuple[int, int]:
    """:func:`quicklook` of the file ``src`` with 1-based ``bands`` (as GDAL numbers them); its (height, width).

    The output's directory is checked before the file is read.
    """
    from rumimm.reader.image import open as open_image
    from rumimm.reader.inputs import check_destination

    check_destination(dst)
    with open_image(src, header=header) as img:
        return quicklook(img, dst, bands=one_based_bands(bands, img.count, src), max_size=max_size)


#: Picture formats a quick look is written in, by the file name's extension.
FORMATS = {".png": "PNG", ".jpg": "JPEG", ".jpeg": "JPEG", ".tif": "TIFF", ".tiff": "TIFF", ".webp": "WEBP"}


def picture_format(dst: StrPath) -> str:
    """Pillow's format name for ``dst``'s extension, or ValueError naming the ones known."""
    ext = os.path.splitext(os.fspath(dst))[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"{os.fspath(dst)}: a quick look is written as PNG, JPEG, TIFF or WebP; name it "
                         f"{', '.join(FORMATS)} (got {ext or 'no extension'!r})")
    return FORMATS[ext]


def quicklook(src: StrPath | Image, dst: StrPath, *, bands: int | Sequence[int] | None = None, max_size: int = 1024,
              header: bytes | None = None, percentiles: tuple[float, float] = PERCENTILES) -> tuple[int, int]:
    """Write a PNG preview of a rumi image; return its (height, width).

    Parameters
    ----------
    src : str, os.PathLike or Image
        The rumi file (opened with ``header`` if given) or an open Image.
    dst : str or os.PathLike
        The picture to create or replace (atomically): PNG, or JPEG, TIFF or WebP by its
        extension (``.png``, ``.jpg``/``.jpeg``, ``.tif``/``.tiff``, ``.webp``).
    bands : int or sequence of 3 ints, optional
        0-based band(s): one for grey, three for red, green, blue.  Default: the first
        three bands, or the first if there are fewer than three.
    max_size : int
        Longest side of the preview in pixels; the image is read every
        ``ceil(longest side / max_size)`` pixels.
    percentiles : (float, float)
        Percentiles of each band mapped to 0 and 255.

    Raises
    ------
    ValueError
        Bad ``bands``, ``max_size`` or ``percentiles``, or complex samples.
    ImportError
        Pillow is not installed.
    """
    from rumimm.reader.image import Image
    from rumimm.reader.image import open as open_image
    from rumimm.writer.atomic import replacing

    if isinstance(max_size, bool) or not isinstance(max_size, (int, np.integer)) or max_size < 1:
        raise ValueError(f"max_size must be a positive int, got {max_size!r}")
    kind = picture_format(dst)
    try:
        from PIL import Image as PILImage
    except ImportError:
        raise ImportError("quick looks need Pillow; pip install 'rumimm[preview]'") from None
    img = src if isinstance(src, Image) else open_image(src, header=header)
    try:
        if img.ndim == 4:
            raise RumiError(f"{img.path} has {img.shape[0]} time steps (T, B, Y, X); a quick look shows one "
                            "(B, Y, X) image")
        count, height, width = img.shape
        chosen = _bands(bands, count)
        step = max(1, math.ceil(max(height, width) / max_size))
        rgb = stretch(img[chosen, ::step, ::step], percentiles)
    finally:
        if img is not src:
            img.close()
    picture = PILImage.fromarray(rgb[0] if len(chosen) == 1 else np.ascontiguousarray(np.moveaxis(rgb, 0, -1)))
    with replacing(dst) as tmp:
        picture.save(tmp, format=kind)
    return rgb.shape[1:]
