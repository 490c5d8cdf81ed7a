"""The BigTIFF side of rumi: the 16-byte header, the fixed 11-tag IFD and its values.

``build_prefix`` lays out everything before the frame data exactly as the spec
places it (IFD at byte 16, 236 bytes, external values in rising tag order with no
gaps).  ``read_entries`` decodes raw IFD entries without judging them;
``validate.py`` holds the rules.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

import numpy as np

from .dtypes import Encoding
from .grid import IFD_END, TIFF_HEADER_SIZE, Grid

__all__ = ["Tag", "TiffType", "FIXED_TAGS", "IfdEntry", "build_prefix", "read_entries"]

BIGTIFF_MAGIC = b"II\x2b\x00\x08\x00\x00\x00"
N_TAGS = 11


class TiffType(enum.IntEnum):
    """TIFF field types used by rumi."""

    SHORT = 3
    """16-bit unsigned integer."""
    LONG = 4
    """32-bit unsigned integer."""
    DOUBLE = 12
    """IEEE 64-bit float."""
    LONG8 = 16
    """64-bit unsigned integer (BigTIFF)."""

    @property
    def size(self) -> int:
        return {3: 2, 4: 4, 12: 8, 16: 8}[int(self)]

    @property
    def code(self) -> str:
        return {3: "H", 4: "I", 12: "d", 16: "Q"}[int(self)]


class Tag(enum.IntEnum):
    """The eleven tags of a rumi IFD, in rising order."""

    IMAGE_WIDTH = 256
    """Image width in pixels."""
    IMAGE_LENGTH = 257
    """Image height in pixels."""
    BITS_PER_SAMPLE = 258
    """Bits per sample, one per band."""
    SAMPLES_PER_PIXEL = 277
    """Band count B."""
    TILE_WIDTH = 322
    """Nominal tile width."""
    TILE_LENGTH = 323
    """Nominal tile height."""
    TILE_OFFSETS = 324
    """Frame offsets, N entries in frame-index order."""
    TILE_BYTE_COUNTS = 325
    """Frame byte counts, N entries in frame-index order."""
    SAMPLE_FORMAT = 339
    """Sample format, one per band."""
    MODEL_TRANSFORMATION = 34264
    """GeoTIFF 4 x 4 model transformation matrix."""
    GEO_KEY_DIRECTORY = 34735
    """GeoTIFF key directory."""


#: tag -> (type, count as a function of (B, N)); the order is the file order.
FIXED_TAGS: dict[Tag, tuple[TiffType, object]] = {
    Tag.IMAGE_WIDTH: (TiffType.LONG, lambda b, n: 1),
    Tag.IMAGE_LENGTH: (TiffType.LONG, lambda b, n: 1),
    Tag.BITS_PER_SAMPLE: (TiffType.SHORT, lambda b, n: b),
    Tag.SAMPLES_PER_PIXEL: (TiffType.SHORT, lambda b, n: 1),
    Tag.TILE_WIDTH: (TiffType.SHORT, lambda b, n: 1),
    Tag.TILE_LENGTH: (TiffType.SHORT, lambda b, n: 1),
    Tag.TILE_OFFSETS: (TiffType.LONG8, lambda b, n: n),
    Tag.TILE_BYTE_COUNTS: (TiffType.LONG, lambda b, n: n),
    Tag.SAMPLE_FORMAT: (TiffType.SHORT, lambda b, n: b),
    Tag.MODEL_TRANSFORMATION: (TiffType.DOUBLE, lambda b, n: 16),
    Tag.GEO_KEY_DIRECTORY: (TiffType.SHORT, lambda b, n: 16),
}

_ENTRY = struct.Struct("<HHQ8s")


@dataclass(frozen=True)
class IfdEntry:
    """One raw IFD entry: tag, type code, count and the 8-byte value field."""

    tag: int
    type: int
    count: int
    field: bytes

    @property
    def pointer(self) -> int:
        return int.from_bytes(self.field, "little")


def build_prefix(grid: Grid, enc: Encoding, offsets: np.ndarray, counts: np.ndarray,
                 matrix: tuple[float, ...], keys: tuple[int, ...]) -> bytes:
    """BigTIFF header + IFD + external values: every byte before the first frame."""
    b, n = grid.samples_per_pixel, grid.n_frames
    values: dict[Tag, bytes] = {
        Tag.IMAGE_WIDTH: struct.pack("<I", grid.image_width),
        Tag.IMAGE_LENGTH: struct.pack("<I", grid.image_length),
        Tag.BITS_PER_SAMPLE: np.full(b, enc.bits_per_sample, dtype="<u2").tobytes(),
        Tag.SAMPLES_PER_PIXEL: struct.pack("<H", b),
        Tag.TILE_WIDTH: struct.pack("<H", grid.tile_width),
        Tag.TILE_LENGTH: struct.pack("<H", grid.tile_length),
        Tag.TILE_OFFSETS: np.ascontiguousarray(offsets, dtype="<u8").tobytes(),
        Tag.TILE_BYTE_COUNTS: np.ascontiguousarray(counts, dtype="<u4").tobytes(),
        Tag.SAMPLE_FORMAT: np.full(b, enc.sample_format, dtype="<u2").tobytes(),
        Tag.MODEL_TRANSFORMATION: struct.pack("<16d", *matrix),
        Tag.GEO_KEY_DIRECTORY: struct.pack("<16H", *keys),
    }
    ifd = [struct.pack("<Q", N_TAGS)]
    external: list[bytes] = []
    cursor = IFD_END
    for tag, (typ, count) in FIXED_TAGS.items():
        data = values[tag]
        c = count(b, n)
        if len(data) != c * typ.size:  # not an assert: python -O must not write a broken IFD
            raise ValueError(f"tag {int(tag)}: {len(data)} value bytes, expected {c} x {typ.size}")
        if len(data) <= 8:
            field = data.ljust(8, b"\0")
        else:
            field = struct.pack("<Q", cursor)
            external.append(data)
            cursor += len(data)
        ifd.append(_ENTRY.pack(int(tag), int(typ), c, field))
    ifd.append(struct.pack("<Q", 0))  # no next IFD
    out = BIGTIFF_MAGIC + struct.pack("<Q", TIFF_HEADER_SIZE) + b"".join(ifd) + b"".join(external)
    if len(out) != grid.base_frame_offset:
        raise ValueError(f"prefix is {len(out)} bytes, expected base_frame_offset {grid.base_frame_offset}")
    return out


def read_entries(buf, count: int) -> list[IfdEntry]:
    """Decode ``count`` raw entries from the IFD at byte 16 of ``buf``."""
    out = []
    for i in range(count):
        pos = TIFF_HEADER_SIZE + 8 + 20 * i
        tag, typ, cnt, field = _ENTRY.unpack_from(buf, pos)
        out.append(IfdEntry(tag, typ, cnt, field))
    return out
