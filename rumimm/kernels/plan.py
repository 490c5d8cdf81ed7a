"""Window planning: which rectangle of which frame goes where in the output.

A read is planned as a list of *copy entries*, one per (frame, output slot).  Entries
that share a frame form a *group*; the engine decodes each group's frame once (or takes
it from the cache) and copies every entry of the group while the frame is still hot in
the CPU cache.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from rumimm.format.window import segments

#: Columns of a plan (int64, one row per copy entry).
P_FRAME = 0  # frame index k inside its file
P_FH = 1  # actual frame height (edge frames are cut)
P_FW = 2  # actual frame width
P_FY = 3  # first selected row inside the frame
P_FX = 4  # first selected column inside the frame
P_CY = 5  # selected rows inside the frame
P_CX = 6  # selected columns inside the frame
P_DY = 7  # destination row of the first selected row
P_DX = 8  # destination column of the first selected column
P_SLOT = 9  # tile frames: destination band slot; cell frames: -1 (all slots)
P_PLANES = 10  # cell frames: bands in the frame (B); tile frames: 0
P_NBYTES = 11  # decoded byte count of the frame
P_ITEM = 12  # destination item (first axis of the 4-D output)
P_IMAGE = 13  # which image (file) of the call the frame belongs to
PLAN_COLS = 14

#: Columns of a batch's window table (int64, one row per window).
W_IMAGE = 0  # which image (file) of the call
W_Y = 1  # the window's origin row (added to the y run's start)
W_X = 2  # the window's origin column
WINDOW_COLS = 3

#: Columns of a grid row handed to the planner (int64).
G_TILE_LENGTH = 0
G_TILE_WIDTH = 1
G_TILES_ACROSS = 2
G_TILES_DOWN = 3
G_BANDS = 4
G_CELL = 5
G_LENGTH = 6
G_WIDTH = 7
GRID_COLS = 8


#: Tile segments of one axis' selection (``window.segments``, also run as plain Python by small reads).
_segments = njit(cache=True, nogil=True)(segments)


@njit(cache=True, nogil=True, inline="always")
def _plan_item(grid, bands, y0, y, x0, x, itemsize, item, image, out, m):
    """Append the copy entries of the window at (y0, x0) + runs ``y``, ``x`` of one image to ``out`` from row ``m``."""
    tl = grid[G_TILE_LENGTH]
    tw = grid[G_TILE_WIDTH]
    ta = grid[G_TILES_ACROSS]
    nbands = grid[G_BANDS]
    cell = grid[G_CELL]
    rows = _segments(y0 + y.start, y.step, y.count, tl, grid[G_LENGTH])
    cols = _segments(x0 + x.start, x.step, x.count, tw, grid[G_WIDTH])
    nb = bands.shape[0]
    for i in range(rows.shape[0]):
        r = rows[i, 0]
        fh = min(tl, grid[G_LENGTH] - r * tl)
        for j in range(cols.shape[0]):
            c = cols[j, 0]
            fw = min(tw, grid[G_WIDTH] - c * tw)
            pos = r * ta + c
            reps = 1 if cell else nb
            for s in range(reps):
                e = out[m]
                if cell:
                    e[P_FRAME] = pos
                    e[P_SLOT] = -1
                    e[P_PLANES] = nbands
                    e[P_NBYTES] = nbands * fh * fw * itemsize
                else:
                    e[P_FRAME] = pos * nbands + bands[s]
                    e[P_SLOT] = s
                    e[P_PLANES] = 0
                    e[P_NBYTES] = fh * fw * itemsize
                e[P_FH] = fh
                e[P_FW] = fw
                e[P_FY] = rows[i, 1]
                e[P_FX] = cols[j, 1]
                e[P_CY] = rows[i, 2]
                e[P_CX] = cols[j, 2]
                e[P_DY] = rows[i, 3]
                e[P_DX] = cols[j, 3]
                e[P_ITEM] = item
                e[P_IMAGE] = image
                m += 1
    return m


@njit(cache=True, nogil=True, inline="always")
def _touched(start, step, count, tile):
    if count == 0:
        return 0
    return (start + (count - 1) * step) // tile - start // tile + 1


#: The window table of :func:`plan_window`: one window, image 0, origin (0, 0).
_ONE_WINDOW = np.zeros((1, WINDOW_COLS), np.int64)


def plan_window(grid, bands, y, x, itemsize):
    """Copy entries (int64 (C, PLAN_COLS)) of one window of one image.

    ``grid`` is one int64 row of ``GRID_COLS``; ``bands`` (int64) the band of each
    output slot, in output order (unique); ``y`` and ``x`` are ``window.Run`` records
    (start, step >= 1, count) inside the image.  Entries come in frame-index order for
    ascending bands (file order), one per frame for tile frames and one per grid
    position for cell frames.

    :func:`plan_batch` of one window at the origin, not a kernel of its own: one
    planner to compile (about a second on a first run) instead of two.
    """
    return plan_batch(grid.reshape(1, GRID_COLS), _ONE_WINDOW, bands, y, x, itemsize)


@njit(cache=True, nogil=True)
def plan_batch(grids, windows, bands, y, x, itemsize):
    """Copy entries of N equal-size windows, one output item each.

    Item n reads the runs ``y`` and ``x`` shifted by window n's origin
    (``windows[n, W_Y]``, ``windows[n, W_X]``) from image ``windows[n, W_IMAGE]``,
    whose grid row is ``grids[windows[n, W_IMAGE]]``.
    """
    n = windows.shape[0]
    cap = 0
    for i in range(n):
        g = grids[windows[i, W_IMAGE]]
        per = 1 if g[G_CELL] else bands.shape[0]
        cap += _touched(windows[i, W_Y] + y.start, y.step, y.count, g[G_TILE_LENGTH]) * \
            _touched(windows[i, W_X] + x.start, x.step, x.count, g[G_TILE_WIDTH]) * per
    out = np.empty((cap, PLAN_COLS), np.int64)
    m = np.int64(0)  # not a literal 0: _plan_item would be compiled for Literal[int](0) as well
    for i in range(n):
        image = windows[i, W_IMAGE]
        m = _plan_item(grids[image], bands, windows[i, W_Y], y, windows[i, W_X], x, itemsize, i, image, out, m)
    return out[:m]
