"""Spec 0.2 frames whose band or time axis is interleaved per pixel (``h w b``, ``t h w b``, ...).

The engine places planar frames: ``(B', h, w)`` planes of virtual bands
(``format.units``).  A frame that keeps a band or time axis after ``h w`` holds the
same samples in another order, so it is decoded whole and transposed to those planes
here, then the window's rectangle is copied with numpy.  These layouts are rare
(rumi-eo writes them only when asked); each read decodes the frames it touches, and
does not use the decoded-frame cache.
"""

from __future__ import annotations

import numpy as np

from rumimm.format import units
from rumimm.format.v2 import Grid2
from rumimm.format.window import Run, segments
from rumimm.reader import engine

__all__ = ["frame_array", "frame_planes", "interleaved_frames", "read_interleaved"]


def frame_array(grid: Grid2, k: int, frame: np.ndarray) -> np.ndarray:
    """A decoded frame (any shape, C order) in its layout's axes, e.g. ``(h, w, T, B)``."""
    row, col, _ = grid.frame_position(k)
    h, w = grid.edge_size(row, col)
    if units.is_tile(grid.layout):
        return frame.reshape(h, w)
    _, sizes = units.frame_axes(grid.layout, grid.bands, grid.times, h, w)
    return frame.reshape(sizes)


def frame_planes(grid: Grid2, k: int, frame: np.ndarray) -> np.ndarray:
    """A decoded cell frame as ``(B * T, h, w)`` planes in virtual-band order (a view when planar)."""
    row, col, _ = grid.frame_position(k)
    h, w = grid.edge_size(row, col)
    names, sizes = units.frame_axes(grid.layout, grid.bands, grid.times, h, w)
    arr = frame.reshape(sizes)
    outer = [i for i, a in enumerate(names) if a not in ("h", "w")]
    return arr.transpose([*outer, names.index("h"), names.index("w")]).reshape(-1, h, w)


def _segments(grid: Grid2, y: Run, x: Run):
    rows = segments(y.start, y.step, y.count, grid.tile_length, grid.image_length).tolist()
    cols = segments(x.start, x.step, x.count, grid.tile_width, grid.image_width).tolist()
    return rows, cols


def interleaved_frames(grid: Grid2, y: Run, x: Run) -> list[int]:
    """The cell frames a window of runs ``y``, ``x`` touches, in the order :func:`read_interleaved` decodes them."""
    if not (y.count and x.count):
        return []
    rows, cols = _segments(grid, y, x)
    return [grid.frame_index(r, c) for r, *_ in rows for c, *_ in cols]


def read_interleaved(fs, bands: np.ndarray, y: Run, x: Run, out=None, raw=None) -> np.ndarray:
    """The (len(bands), y.count, x.count) block of virtual ``bands`` from a file of interleaved cell frames.

    ``raw``: ``{frame: compressed bytes}`` got already (a batch gets every image's frames
    together); the frames it lacks are read from the store.
    """
    grid: Grid2 = fs.grid
    if out is None:
        out = np.empty((bands.shape[0], y.count, x.count), fs.dtype)
    if not (bands.shape[0] and y.count and x.count):
        return out
    rows, cols = _segments(grid, y, x)
    ks = [grid.frame_index(r, c) for r, *_ in rows for c, *_ in cols]
    frames = iter(engine.decode_frames(fs, ks, raw))
    for r, fy, cy, dy in rows:
        for c, fx, cx, dx in cols:
            k = grid.frame_index(r, c)
            planes = frame_planes(grid, k, next(frames))
            ys = slice(fy, fy + (cy - 1) * y.step + 1, y.step)
            xs = slice(fx, fx + (cx - 1) * x.step + 1, x.step)
            out[:, dy:dy + cy, dx:dx + cx] = planes[bands][:, ys, xs]
    return out
