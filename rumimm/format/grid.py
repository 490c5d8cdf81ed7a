"""Tile-grid arithmetic of a rumi image on Python integers.

Everything here is pure arithmetic with no I/O: the grid size, the frame count N
for each frame unit, the frame index of a grid position, the actual (cut) size of
edge frames and ``base_frame_offset`` from the spec's closed formula.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from rumimm.format.bigtiff import ifd_end, ifd_size

__all__ = ["FrameUnit", "Grid", "base_frame_offset", "ceildiv", "frame_unit"]

#: Fixed sizes from the spec's Placement section.
IFD_SIZE = ifd_size(11)  # 236: spec 0.1.0's eleven tags
IFD_END = ifd_end(11)  # 252


class FrameUnit(enum.IntEnum):
    """What one frame holds."""

    TILE = 0
    """One band at one grid position; decodes to (h, w)."""
    CELL = 1
    """All bands at one grid position; decodes to (B, h, w)."""


def frame_unit(unit) -> FrameUnit:
    """Coerce ``"tile"``, ``"cell"``, 0, 1 or a FrameUnit to a FrameUnit."""
    if isinstance(unit, str):
        try:
            return FrameUnit[unit.upper()]
        except KeyError:
            raise ValueError(f"unit must be 'tile' or 'cell', got {unit!r}") from None
    try:
        return FrameUnit(int(unit))
    except (ValueError, TypeError):
        raise ValueError(f"unit must be 'tile' or 'cell', got {unit!r}") from None


def ceildiv(a: int, b: int) -> int:
    """Integer ceiling division, exact for any size."""
    return -(-a // b)


def base_frame_offset(samples_per_pixel: int, n_frames: int) -> int:
    """Byte where the frame data starts, from the spec's closed formula."""
    b, n = samples_per_pixel, n_frames
    external = (
        (2 * b if b >= 5 else 0)  # 258 BitsPerSample
        + (8 * n if n >= 2 else 0)  # 324 TileOffsets
        + (4 * n if n >= 3 else 0)  # 325 TileByteCounts
        + (2 * b if b >= 5 else 0)  # 339 SampleFormat
        + 128  # 34264 ModelTransformationTag
        + 32  # 34735 GeoKeyDirectoryTag
    )
    return IFD_END + external


@dataclass(frozen=True)
class Grid:
    """The tile grid of one image: shape, tile size, band count and frame unit."""

    image_width: int
    image_length: int
    tile_width: int
    tile_length: int
    samples_per_pixel: int
    unit: FrameUnit = FrameUnit.TILE

    @cached_property
    def tiles_across(self) -> int:
        return ceildiv(self.image_width, self.tile_width)

    @cached_property
    def tiles_down(self) -> int:
        return ceildiv(self.image_length, self.tile_length)

    @cached_property
    def n_positions(self) -> int:
        """Grid positions g = tiles_across * tiles_down."""
        return self.tiles_across * self.tiles_down

    @cached_property
    def n_frames(self) -> int:
        """N: frames in the file for this frame unit."""
        g = self.n_positions
        return g * self.samples_per_pixel if self.unit == FrameUnit.TILE else g

    @property
    def frames_per_position(self) -> int:
        return self.samples_per_pixel if self.unit == FrameUnit.TILE else 1

    @cached_property
    def base_frame_offset(self) -> int:
        return base_frame_offset(self.samples_per_pixel, self.n_frames)

    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, Y, X) of the image."""
        return (self.samples_per_pixel, self.image_length, self.image_width)

    def frame_index(self, row: int, col: int, band: int = 0) -> int:
        """Frame index of a grid position (and band, for tile frames)."""
        pos = row * self.tiles_across + col
        return pos * self.samples_per_pixel + band if self.unit == FrameUnit.TILE else pos

    def frame_position(self, index: int) -> tuple[int, int, int]:
        """(row, col, band) of a frame; band is 0 for cell frames."""
        if self.unit == FrameUnit.TILE:
            pos, band = divmod(index, self.samples_per_pixel)
        else:
            pos, band = index, 0
        row, col = divmod(pos, self.tiles_across)
        return row, col, band

    def edge_size(self, row: int, col: int) -> tuple[int, int]:
        """Actual (h, w) at a grid position, cut to the image bounds."""
        h = min(self.tile_length, self.image_length - row * self.tile_length)
        w = min(self.tile_width, self.image_width - col * self.tile_width)
        return h, w

    def frame_shape(self, index: int) -> tuple[int, ...]:
        """Decoded shape of a frame: (h, w) for tile frames, (B, h, w) for cells."""
        row, col, _ = self.frame_position(index)
        h, w = self.edge_size(row, col)
        return (h, w) if self.unit == FrameUnit.TILE else (self.samples_per_pixel, h, w)

    def frame_samples(self, index: int) -> int:
        return math.prod(self.frame_shape(index))

    @cached_property
    def frame_samples_array(self) -> np.ndarray:
        """Samples of every frame in frame-index order (int64, length N)."""
        rows = np.arange(self.tiles_down, dtype=np.int64)
        cols = np.arange(self.tiles_across, dtype=np.int64)
        h = np.minimum(self.tile_length, self.image_length - rows * self.tile_length)
        w = np.minimum(self.tile_width, self.image_width - cols * self.tile_width)
        per_pos = (h[:, None] * w[None, :]).reshape(-1)
        if self.unit == FrameUnit.TILE:
            return np.repeat(per_pos, self.samples_per_pixel)
        return per_pos * self.samples_per_pixel
