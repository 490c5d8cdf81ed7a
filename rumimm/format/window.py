"""Turn a numpy-style key or a (bands, window) pair into per-axis selections.

A key such as ``img[:, 100:612, ::2]`` or ``cube[[0, 3], 2, y0:y1, x0:x1]`` becomes
one :class:`Selection`: for every axis what to read (a list of indices on the
leading axes, an ascending arithmetic run ``start + i * step`` on y and x) and a
*remap*, the key that numpy then applies to the block that was read.  Reading the
block and applying the remap gives exactly what numpy's own indexing of the full
array gives (shape, order, dropped axes, advanced-index broadcasting), because the
remap keeps every integer, slice and array of the key in place, only shifted into
the block's coordinates.  For the common keys (integers and slices) the remap is a
view or nothing at all.

Reads touch only the rows and columns a slice selects: steps and arrays on y and x
become runs, and the planner in ``kernels/plan.py`` skips frames with no selected pixel.
"""

from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from rumimm.errors import WindowError

__all__ = ["AXES", "Run", "Selection", "select", "select_read"]

AXES = ("band", "y", "x")
_ALL = slice(None)
_REVERSE = slice(None, None, -1)
_NO_AXES = object()  # an Ellipsis that stands for no axis (see _expand)


class Run(NamedTuple):
    """Indices ``start + i * step`` for ``i < count``, step >= 1."""

    start: int
    step: int
    count: int


class Selection(NamedTuple):
    """What to read on each axis and how to index the block read.

    ``lists`` hold the indices of the leading axes (images of a cube, bands), in
    block order (int64 arrays); ``y`` and ``x`` are runs; ``remap`` is None when the
    block is already the answer, else the key to apply to it.
    """

    lists: tuple[np.ndarray, ...]
    y: Run
    x: Run
    remap: tuple | None


def _is_int(item) -> bool:
    return isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_))


def _bad_type(item) -> WindowError:
    return WindowError(
        "only integers, slices (`:`), ellipsis (`...`), None and integer or boolean arrays are valid "
        f"indices, got {type(item).__name__}"
    )


def _index(i: int, n: int, axis: int, names) -> int:
    if i < -n or i >= n:
        raise WindowError(f"index {i} is out of bounds for axis {axis} ({names[axis]}) with size {n}")
    return i + n if i < 0 else i


def _as_index_array(item, n: int, axis: int, names) -> np.ndarray:
    arr = np.asarray(item)
    if arr.dtype == np.bool_:
        if arr.ndim != 1:
            raise WindowError(f"a boolean index must be 1-d, one per axis (rumimm reads no mask spanning several "
                              f"axes); got shape {arr.shape} at axis {axis} ({names[axis]})")
        if arr.shape[0] != n:
            raise WindowError(
                f"boolean index did not match axis {axis} ({names[axis]}) of size {n}; its shape is {arr.shape}"
            )
        return np.flatnonzero(arr)
    if arr.size == 0 and arr.dtype.kind not in "iu":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iu":
        raise WindowError(f"arrays used as indices must be of integer or boolean type, got {arr.dtype}")
    arr = arr.astype(np.int64, copy=False)
    if arr.size:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -n or hi >= n:
            bad = lo if lo < -n else hi
            raise WindowError(f"index {bad} is out of bounds for axis {axis} ({names[axis]}) with size {n}")
        if lo < 0:
            arr = np.where(arr < 0, arr + n, arr)
    return arr


def _expand(key, ndim: int) -> list:
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise WindowError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise WindowError(f"too many indices: the array is {ndim}-dimensional, but {used} were indexed")
    out = []
    for k in key:
        if k is Ellipsis:
            # one that stands for no axis still parts the advanced indices on either side (numpy then
            # puts their axes first): kept as a marker for the remap
            out.extend([_ALL] * (ndim - used) if ndim > used else [_NO_AXES])
        else:
            out.append(k)
    if not n_ell:
        out.extend([_ALL] * (ndim - used))
    return out


def _run_of(sorted_unique: np.ndarray) -> Run:
    """The shortest ascending run covering sorted unique indices (exact if they are one)."""
    first = int(sorted_unique[0])
    if sorted_unique.size == 1:
        return Run(first, 1, 1)
    d = np.diff(sorted_unique)
    step = int(d[0])
    if np.all(d == step):
        return Run(first, step, int(sorted_unique.size))
    return Run(first, 1, int(sorted_unique[-1]) - first + 1)


def _select_basic(key, shape):
    """The hot path: up to ndim Python ints and forward slices, nothing else (else None).

    One pass, no per-axis lists: a chip's key costs about 2 us here.
    """
    if type(key) is not tuple:
        key = (key,)
    ndim = len(shape)
    nk = len(key)
    if nk > ndim:
        return None
    starts = [0] * ndim
    counts = list(shape)
    ints = None  # the axes an int drops, when there are any
    for axis in range(nk):
        item = key[axis]
        tp = type(item)
        if tp is slice:
            if item.step is not None and item.step != 1:
                return None
            start, stop, _ = item.indices(shape[axis])
            starts[axis] = start
            counts[axis] = stop - start if stop > start else 0
        elif tp is int:
            n = shape[axis]
            if item < -n or item >= n:
                return None  # the slow path words the error
            starts[axis] = item + n if item < 0 else item
            counts[axis] = 1
            ints = [axis] if ints is None else [*ints, axis]
        else:
            return None
    lead = ndim - 2
    if lead == 1:  # (band, y, x): no generator for one list
        lists: tuple = (np.arange(starts[0], starts[0] + counts[0], dtype=np.int64),)
    else:
        lists = tuple([np.arange(starts[a], starts[a] + counts[a], dtype=np.int64) for a in range(lead)])
    remap = None if ints is None else tuple(0 if a in ints else _ALL for a in range(ndim))
    return Selection(lists, Run(starts[lead], 1, counts[lead]), Run(starts[-1], 1, counts[-1]), remap)


def select(key, shape: tuple[int, ...], names=None) -> Selection:
    """Normalise ``key`` for an array of ``shape`` whose last two axes are y and x.

    Raises
    ------
    WindowError
        An index out of range, a wrong type, too many indices, a boolean mask of
        the wrong size (all are ``IndexError`` too, as numpy raises).
    """
    fast = _select_basic(key, shape)
    if fast is not None:
        return fast
    ndim = len(shape)
    names = names or (("image",) * (ndim - 3) + AXES)
    items = _expand(key, ndim)
    # classify: which items are advanced (arrays); ints then count as advanced too
    arrays = {}
    axis = 0
    kinds = []  # per item: ("new",) | ("int", axis, i) | ("slice", axis, s) | ("array", axis)
    for item in items:
        if item is None or item is _NO_AXES:
            kinds.append(("new",) if item is None else ("parting",))
            continue
        n = shape[axis]
        if _is_int(item):
            kinds.append(("int", axis, _index(operator.index(item), n, axis, names)))
        elif isinstance(item, slice):
            kinds.append(("slice", axis, item))
        elif isinstance(item, (bool, np.bool_)):
            raise WindowError("boolean scalar indices are not supported; use a boolean array along one axis")
        elif isinstance(item, (list, tuple, np.ndarray)) or hasattr(item, "__array__"):
            arr = np.asarray(item)
            if arr.ndim == 0 and arr.dtype.kind in "iu":
                kinds.append(("int", axis, _index(int(arr), n, axis, names)))
            else:
                arrays[axis] = _as_index_array(arr, n, axis, names)
                kinds.append(("array", axis))
        else:
            raise _bad_type(item)
        axis += 1
    lists: list[np.ndarray] = []
    runs: list[Run] = []
    remap: list = []
    for kind in kinds:
        tag = kind[0]
        if tag == "new" or tag == "parting":
            remap.append(None if tag == "new" else Ellipsis)
            continue
        ax = kind[1]
        n = shape[ax]
        lead = ax < ndim - 2
        if tag == "int":
            i = kind[2]
            sel = np.array([i], np.int64) if lead else Run(i, 1, 1)
            remap.append(0)
        elif tag == "slice":
            start, stop, step = kind[2].indices(n)
            count = len(range(start, stop, step))
            if step > 0 or count == 0:
                first, step_up, r = start if count else 0, max(step, 1), _ALL
            else:
                first, step_up, r = start + (count - 1) * step, -step, _REVERSE
            sel = (np.arange(first, first + count * step_up, step_up, dtype=np.int64) if lead
                   else Run(first, step_up, count))
            remap.append(r)
        else:
            idx = arrays[ax]
            if lead and idx.ndim == 1 and len(arrays) == 1 and not any(k[0] == "int" for k in kinds) \
                    and np.unique(idx).size == idx.size:
                sel, r = idx, _ALL  # read in the order asked: the block is the answer
            else:
                uniq = np.unique(idx)
                if lead:
                    sel = uniq
                    r = np.searchsorted(uniq, idx) if uniq.size else idx
                else:
                    sel = _run_of(uniq) if uniq.size else Run(0, 1, 0)
                    r = (idx - sel.start) // sel.step if uniq.size else idx
            remap.append(r)
        (lists if lead else runs).append(sel)
    # the block is the answer only when every remap entry is a plain ``:``; otherwise
    # numpy applies the remap, ints and arrays in their places (advanced semantics kept)
    trivial = all(r is _ALL or r is Ellipsis for r in remap)
    return Selection(tuple(lists), runs[0], runs[1], None if trivial else tuple(remap))


def _window_range(w, n: int, axis: str) -> tuple[int, int]:
    """(start, stop) of a window's range along an axis of ``n`` pixels, as rasterio's ``Window.from_slices``
    resolves it: None is the image's edge, a negative index counts from the end, a stop before the start
    gives an empty range; a range that leaves the image is refused (no clipping)."""
    if isinstance(w, slice):
        if w.step not in (None, 1):
            raise WindowError(f"window {axis} slice must have step 1, got {w.step}")
        ends = (w.start, w.stop)
    else:
        try:
            ends = tuple(w)
        except TypeError:
            ends = ()
        if len(ends) != 2:
            raise WindowError(f"window {axis} range must be (start, stop) or a slice, got {w!r}")
    try:
        lo, hi = (default if v is None else operator.index(v) for v, default in zip(ends, (0, n), strict=True))
    except TypeError:
        raise WindowError(f"window {axis} range must be (start, stop) or a slice, got {w!r}") from None
    lo, hi = (v + n if v < 0 else v for v in (lo, hi))
    hi = max(hi, lo)
    if not 0 <= lo <= hi <= n:
        raise WindowError(f"window {axis} range [{lo}, {hi}) is outside the image (0 to {n})")
    return lo, hi


def window_bounds(window, ny: int, nx: int, name: str = "window") -> tuple[int, int, int, int]:
    """(y0, y1, x0, x1) of ``((y0, y1), (x0, x1))``, ``(slice, slice)`` or a rasterio ``Window``.

    The window must lie inside ``[0, ny) x [0, nx)`` and, for a ``Window``, on whole pixels.
    """
    if hasattr(window, "row_off") and hasattr(window, "col_off"):
        y0, x0 = int(window.row_off), int(window.col_off)
        y1, x1 = y0 + int(window.height), x0 + int(window.width)
        if y0 != window.row_off or x0 != window.col_off or y1 - y0 != window.height or x1 - x0 != window.width:
            raise WindowError(f"{name} {window!r} is not on whole pixels")
        for lo, hi, n, axis in ((y0, y1, ny, "y"), (x0, x1, nx, "x")):  # offsets as given: no end counts back
            if not 0 <= lo <= hi <= n:
                raise WindowError(f"window {axis} range [{lo}, {hi}) is outside the image (0 to {n})")
        return y0, y1, x0, x1
    try:
        wy, wx = window
    except (TypeError, ValueError):
        raise WindowError(f"{name} must be ((y0, y1), (x0, x1)), got {window!r}") from None
    y0, y1 = _window_range(wy, ny, "y")
    x0, x1 = _window_range(wx, nx, "x")
    return y0, y1, x0, x1


def select_read(bands, window, shape: tuple[int, int, int]) -> Selection:
    """The selection of ``Image.read(bands, window)``: bands None, an int or a list;
    window None, ``((y0, y1), (x0, x1))``, ``(slice, slice)`` or a rasterio ``Window``.

    Unlike slicing, a window that leaves the image raises (no clipping).
    """
    b, ny, nx = shape
    if window is None:
        (y0, y1), (x0, x1) = (0, ny), (0, nx)
    else:
        y0, y1, x0, x1 = window_bounds(window, ny, nx)
    blist, remap = band_selection(bands, b)
    return Selection((blist,), Run(y0, 1, y1 - y0), Run(x0, 1, x1 - x0), remap)


def band_selection(bands, count: int) -> tuple[np.ndarray, tuple | None]:
    """The distinct bands a ``bands=`` argument reads, and how to index them back.

    ``bands`` is None (all), an int (its axis dropped), a list of ints (negatives count from
    the end, repeats allowed) or a boolean mask of ``count`` entries, as numpy indexes an
    axis; floats and other types are refused.  The remap is None when the list read is the
    answer, else the index that gives the caller's list (or drops an int's axis).
    """
    if bands is None:
        return np.arange(count, dtype=np.int64), None
    if _is_int(bands):
        return np.array([_index(int(bands), count, 0, AXES)], np.int64), (0,)
    if isinstance(bands, (bool, np.bool_)):
        raise WindowError("bands must be an int, a 1-d list of ints or a boolean mask, got a bool")
    blist = _as_index_array(bands, count, 0, AXES)
    if blist.ndim != 1:
        raise WindowError(f"bands must be an int or a 1-d list of ints, got shape {blist.shape}")
    uniq = np.unique(blist)
    if uniq.size != blist.size:  # repeats: each distinct band read once
        return uniq, (np.searchsorted(uniq, blist),)
    return blist, None


def segments(start, step, count, tile, size):
    """Split the selection ``start + i * step`` (i < count) at tile edges.

    Returns int64 (m, 4): tile index, first index inside the tile, number of selected
    indices inside it, destination index of the first one.  Tiles without a selected
    index are skipped, so a large step decodes only the frames it touches.  Plain
    numpy: small reads run it as is, ``kernels.plan`` compiles it for the planner.
    """
    if count == 0:
        return np.empty((0, 4), np.int64)
    last = start + (count - 1) * step
    t0 = start // tile
    t1 = last // tile
    out = np.empty((t1 - t0 + 1, 4), np.int64)
    m = 0
    for t in range(t0, t1 + 1):
        lo = t * tile
        hi = min(lo + tile, size) - 1
        # first i with start + i * step >= lo, last i with start + i * step <= hi
        i0 = 0 if lo <= start else (lo - start + step - 1) // step
        i1 = min((hi - start) // step, count - 1)
        if i0 > i1:
            continue
        out[m, 0] = t
        out[m, 1] = start + i0 * step - lo
        out[m, 2] = i1 - i0 + 1
        out[m, 3] = i0
        m += 1
    return out[:m]
