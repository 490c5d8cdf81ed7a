"""Key normalisation and window planning against numpy and slow references (no decoding)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rumimm import kernels as K
from rumimm.errors import RumiError, WindowError
from rumimm.format.window import Run, select, select_read
from rumimm.kernels import plan as kernel_plan

SHAPE = (3, 11, 13)
ARRAY = np.arange(np.prod(SHAPE), dtype=np.int64).reshape(SHAPE)


def read_selection(array: np.ndarray, sel) -> np.ndarray:
    """What the engine reads for a selection: the block of lists x run x run."""
    block = array
    for axis, idx in enumerate(sel.lists):
        block = np.take(block, idx, axis=axis)
    ys = np.arange(sel.y.count) * sel.y.step + sel.y.start
    xs = np.arange(sel.x.count) * sel.x.step + sel.x.start
    return block[..., ys[:, None], xs[None, :]] if ys.size and xs.size else \
        np.empty((*block.shape[:-2], ys.size, xs.size), block.dtype)


def via_selection(array, key):
    sel = select(key, array.shape)
    block = read_selection(array, sel)
    return block if sel.remap is None else block[sel.remap]


# -- keys vs numpy --------------------------------------------------------------------
KEYS = [
    np.s_[:],
    np.s_[...],
    np.s_[1],
    np.s_[-1],
    np.s_[:, 2:9, 3:12],
    np.s_[:, 2:9:3, ::4],
    np.s_[:, ::-1, 10:2:-3],
    np.s_[0, 5, 7],
    np.s_[0, :, 7],
    np.s_[[2, 0], :, 1:4],
    np.s_[[2, 0, 2], 3:5, 1:4],
    np.s_[[True, False, True]],
    np.s_[..., 4],
    np.s_[1, ...],
    np.s_[:, [0, 10, 3]],
    np.s_[:, [1, 3, 5], [2, 4, 6]],
    np.s_[[0, 1], 3, [2, 4]],
    np.s_[:, 1, ..., [0, 2, 4]],  # an Ellipsis of no axes still parts advanced indices: theirs go first
    np.s_[0, ..., [1, 2], 3],
    np.s_[[0, 2], 4, ..., [1, 5]],
    np.s_[:, 1, [0, 2, 4], ...],
    np.s_[0, [1, 2], :],
    np.s_[None, 1, 2:4],
    np.s_[:, None, 0, :],
    np.s_[np.array([[0, 1], [2, 0]]), 4],
    np.s_[:, 20:30],
    np.s_[:, 5:5],
    np.s_[[], 1:3],
    np.s_[np.int64(2), np.int32(3)],
    np.s_[np.array(1), 2:5],
]


@pytest.mark.parametrize("key", KEYS, ids=[str(k) for k in KEYS])
def test_a_selection_read_and_remapped_equals_numpy_indexing(key):
    got = via_selection(ARRAY, key)
    want = ARRAY[key]
    assert np.shape(got) == np.shape(want)
    assert np.array_equal(got, want)


def test_plain_slices_need_no_remap():
    sel = select(np.s_[:, 2:9, 3:12], SHAPE)
    assert sel.remap is None
    assert sel.y == Run(2, 1, 7) and sel.x == Run(3, 1, 9)
    assert sel.lists[0].tolist() == [0, 1, 2]


def test_a_band_list_is_read_in_the_order_asked_without_remap():
    sel = select(np.s_[[2, 0], 1:3], SHAPE)
    assert sel.lists[0].tolist() == [2, 0]
    assert sel.remap is None


def test_a_negative_step_reads_ascending_and_reverses_by_view():
    sel = select(np.s_[:, ::-2], SHAPE)
    assert sel.y == Run(0, 2, 6)
    assert sel.remap[1] == slice(None, None, -1)


def test_sparse_rows_become_one_run_that_covers_them():
    sel = select(np.s_[:, [1, 4, 7, 10]], SHAPE)
    assert sel.y == Run(1, 3, 4)
    sel = select(np.s_[:, [9, 1, 2]], SHAPE)
    assert sel.y == Run(1, 1, 9)


def test_a_four_dimensional_key_selects_images_first():
    shape = (4, *SHAPE)
    arr = np.arange(np.prod(shape)).reshape(shape)
    for key in (np.s_[1:3, 0, 2:5, ::3], np.s_[[3, 0], :, 1], np.s_[..., 2, 3], np.s_[-1]):
        assert np.array_equal(via_selection(arr, key), arr[key])
    assert select(np.s_[1:3], shape).lists[0].tolist() == [1, 2]


@st.composite
def index_items(draw, n):
    kind = draw(st.sampled_from(["int", "slice", "slice", "slice", "list", "mask"]))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    if kind == "slice":
        a = draw(st.none() | st.integers(-n - 3, n + 3))
        b = draw(st.none() | st.integers(-n - 3, n + 3))
        c = draw(st.none() | st.integers(-5, 5).filter(lambda v: v != 0))
        return slice(a, b, c)
    if kind == "list":
        return draw(st.lists(st.integers(-n, n - 1), min_size=0, max_size=4))
    return np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))


@st.composite
def keys(draw):
    items = [draw(index_items(n)) for n in SHAPE]
    k = draw(st.integers(0, 3))
    items = items[:k] if draw(st.booleans()) else items
    if items and draw(st.booleans()):
        at = draw(st.integers(0, len(items)))
        if draw(st.booleans()) and at < len(items):
            items[at] = Ellipsis
        else:  # inserted: with every axis indexed, it stands for none
            items.insert(at, Ellipsis)
    return tuple(items)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys())
def test_random_keys_match_numpy_including_its_errors(key):
    try:
        want = ARRAY[key]
    except IndexError:
        with pytest.raises(IndexError):
            via_selection(ARRAY, key)
        return
    got = via_selection(ARRAY, key)
    assert np.shape(got) == np.shape(want)
    assert np.array_equal(got, want)


# -- errors ---------------------------------------------------------------------------
@pytest.mark.parametrize("key", [
    np.s_[3], np.s_[-4], np.s_[:, 11], np.s_[0, 0, 13], np.s_[[0, 3]], np.s_[0, 0, 0, 0],
    np.s_[1.5], np.s_["a"], np.s_[..., ...], np.s_[np.array([True, False])], np.s_[np.array([0.5])],
])
def test_bad_keys_raise_window_error_which_is_an_index_error(key):
    with pytest.raises(WindowError) as info:
        select(key, SHAPE)
    assert isinstance(info.value, IndexError) and isinstance(info.value, RumiError)


def test_a_boolean_mask_over_several_axes_is_refused_as_such():
    with pytest.raises(WindowError, match=r"a boolean index must be 1-d, one per axis .* shape \(3, 11\) at axis 0"):
        select(np.ones((3, 11), bool), SHAPE)


def test_an_out_of_range_index_names_the_axis():
    with pytest.raises(WindowError, match=r"index 11 is out of bounds for axis 1 \(y\) with size 11"):
        select(np.s_[:, 11], SHAPE)


def test_read_windows_accept_pairs_slices_and_rasterio_windows():
    class Window:  # rasterio.windows.Window's attributes
        row_off, col_off, height, width = 2, 3, 4, 5

    for window in (((2, 6), (3, 8)), (slice(2, 6), slice(3, 8)), Window()):
        sel = select_read(None, window, SHAPE)
        assert (sel.y, sel.x) == (Run(2, 1, 4), Run(3, 1, 5))
        assert sel.lists[0].tolist() == [0, 1, 2] and sel.remap is None


def test_read_with_an_int_band_drops_the_band_axis():
    sel = select_read(1, None, SHAPE)
    assert sel.lists[0].tolist() == [1] and sel.remap == (0,)


def test_read_with_repeated_bands_reads_each_once():
    sel = select_read([2, 0, 2], None, SHAPE)
    assert sel.lists[0].tolist() == [0, 2]
    block = ARRAY[sel.lists[0]]
    assert np.array_equal(block[sel.remap], ARRAY[[2, 0, 2]])


@pytest.mark.parametrize(("bands", "window"), [
    (3, None), ([0, 5], None), (None, ((0, 12), (0, 5))), (None, ((-12, 3), (0, 5))), (None, ((4, 20), (0, 1))),
    (None, (slice(0, 4, 2), slice(0, 3))), (None, "nope"), (None, ((1, 2, 3), (0, 1))), (None, ((0.5, 2), (0, 1))),
])
def test_read_rejects_bands_and_windows_outside_the_image(bands, window):
    with pytest.raises(WindowError):
        select_read(bands, window, SHAPE)


def test_a_rasterio_window_with_a_negative_offset_is_outside_the_image():
    """Window offsets are positions, not ends counted back: Window(0, -10, ...) starts above the image (a
    version that resolved it as ends read rows from wrong offsets, silently)."""
    windows = pytest.importorskip("rasterio.windows")
    for w in (windows.Window(0, -10, 5, 8), windows.Window(-5, 0, 5, 5), windows.Window(0, -11, 13, 11)):
        with pytest.raises(WindowError, match="outside the image"):
            select_read(None, w, SHAPE)
    sel = select_read(None, windows.Window(2, 3, 4, 5), SHAPE)
    assert (sel.y.start, sel.y.count, sel.x.start, sel.x.count) == (3, 5, 2, 4)


ENDS = [None, -14, -11, -5, -1, 0, 1, 4, 10, 11, 12]


@pytest.mark.parametrize("rows", [(a, b) for a in ENDS for b in ENDS])
def test_a_window_resolves_none_and_negative_ends_as_rasterio_does(rows):
    """None is the edge, a negative end counts from the end, a stop before the start is empty (rasterio's
    Window.from_slices); what then leaves the image is refused, where rasterio would read outside it."""
    windows = pytest.importorskip("rasterio.windows")
    want = windows.Window.from_slices(rows, (0, 13), height=11, width=13)
    y0, y1 = int(want.row_off), int(want.row_off + want.height)
    for form in (rows, slice(*rows)):
        if 0 <= y0 <= y1 <= 11:
            sel = select_read(None, (form, (0, 13)), SHAPE)
            assert (sel.y.start, sel.y.count) == (y0, y1 - y0)
        else:
            with pytest.raises(WindowError, match="outside the image"):
                select_read(None, (form, (0, 13)), SHAPE)


# -- the planner ----------------------------------------------------------------------
def ref_segments(start, step, count, tile, size):
    idx = start + step * np.arange(count)
    out = []
    for t in sorted(set((idx // tile).tolist())):
        inside = np.flatnonzero(idx // tile == t)
        out.append([t, int(idx[inside[0]]) - t * tile, inside.size, int(inside[0])])
    return out


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 60), st.integers(1, 9), st.data())
def test_segments_split_a_run_at_tile_edges_like_a_slow_reference(size, tile, data):
    start = data.draw(st.integers(0, size - 1))
    step = data.draw(st.integers(1, 12))
    count = data.draw(st.integers(0, (size - 1 - start) // step + 1))
    got = kernel_plan._segments(start, step, count, tile, size).tolist()
    assert got == ref_segments(start, step, count, tile, size)


def grid_row(shape, tile, cell):
    b, y, x = shape
    tl, tw = tile
    return np.array([tl, tw, -(-x // tw), -(-y // tl), b, int(cell), y, x], np.int64)


def frames_of(array, tile, cell):
    """Frames of ``array`` in frame-index order (the writer's cut), as numpy arrays."""
    b, y, x = array.shape
    tl, tw = tile
    out = []
    for r in range(-(-y // tl)):
        for c in range(-(-x // tw)):
            block = array[:, r * tl:(r + 1) * tl, c * tw:(c + 1) * tw]
            out.extend([block] if cell else [block[i] for i in range(b)])
    return out


def apply_plan(plan, frames, nb, ny, nx, ys, xs, bands):
    """Slow reference of the copy kernel: copy every entry's rectangle."""
    out = np.full((nb, ny, nx), -1, np.int64)
    for e in plan:
        f = frames[e[K.P_FRAME]]
        fy, fx, cy, cx, dy, dx = (int(e[c]) for c in (K.P_FY, K.P_FX, K.P_CY, K.P_CX, K.P_DY, K.P_DX))
        src_y = slice(fy, fy + (cy - 1) * ys + 1, ys)
        src_x = slice(fx, fx + (cx - 1) * xs + 1, xs)
        if e[K.P_SLOT] >= 0:
            assert f.shape == (e[K.P_FH], e[K.P_FW])
            out[e[K.P_SLOT], dy:dy + cy, dx:dx + cx] = f[src_y, src_x]
        else:
            assert f.shape[1:] == (e[K.P_FH], e[K.P_FW])
            out[:, dy:dy + cy, dx:dx + cx] = f[bands][:, src_y, src_x]
    return out


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3), st.integers(1, 23), st.integers(1, 23), st.integers(1, 8), st.integers(1, 8),
       st.booleans(), st.data())
def test_a_plan_copies_exactly_the_selected_pixels_from_the_frames_it_lists(b, y, x, tl, tw, cell, data):
    array = np.arange(b * y * x, dtype=np.int64).reshape(b, y, x)
    bands = np.array(data.draw(st.permutations(range(b)))[:data.draw(st.integers(1, b))], np.int64)
    y0 = data.draw(st.integers(0, y - 1))
    ys = data.draw(st.integers(1, 5))
    ny = data.draw(st.integers(1, (y - 1 - y0) // ys + 1))
    x0 = data.draw(st.integers(0, x - 1))
    xs = data.draw(st.integers(1, 5))
    nx = data.draw(st.integers(1, (x - 1 - x0) // xs + 1))
    plan = K.plan_window(grid_row((b, y, x), (tl, tw), cell), bands, Run(y0, ys, ny), Run(x0, xs, nx), 8)
    got = apply_plan(plan, frames_of(array, (tl, tw), cell), bands.size, ny, nx, ys, xs, bands)
    want = array[bands][:, y0:y0 + (ny - 1) * ys + 1:ys, x0:x0 + (nx - 1) * xs + 1:xs]
    assert np.array_equal(got, want)
    # only frames holding a selected pixel are listed, each once
    rows = {(y0 + i * ys) // tl for i in range(ny)}
    cols = {(x0 + i * xs) // tw for i in range(nx)}
    ta = -(-x // tw)
    if cell:
        want_frames = {r * ta + c for r in rows for c in cols}
    else:
        want_frames = {(r * ta + c) * b + int(band) for r in rows for c in cols for band in bands}
    assert sorted(plan[:, K.P_FRAME].tolist()) == sorted(want_frames)
    assert len(set(plan[:, K.P_FRAME].tolist())) == plan.shape[0]
    # the decoded byte count of each frame follows from its cut size
    per = b if cell else 1
    assert np.array_equal(plan[:, K.P_NBYTES], plan[:, K.P_FH] * plan[:, K.P_FW] * 8 * per)


def test_a_window_crossing_four_tiles_of_one_band_plans_four_frames():
    plan = K.plan_window(grid_row((2, 40, 40), (16, 16), False), np.array([1]), Run(10, 1, 10), Run(12, 1, 10), 2)
    assert plan[:, K.P_FRAME].tolist() == [1, 3, 7, 9]


def test_a_step_larger_than_a_tile_skips_the_tiles_between():
    plan = K.plan_window(grid_row((1, 64, 64), (8, 8), True), np.array([0]), Run(0, 32, 2), Run(0, 1, 1), 1)
    assert plan[:, K.P_FRAME].tolist() == [0, 32]


def test_a_batch_plan_tags_each_entry_with_its_item_and_image():
    grids = np.stack([grid_row((1, 20, 20), (8, 8), False), grid_row((2, 30, 30), (10, 10), True)])
    windows = np.array([[1, 0, 0], [0, 5, 6], [1, 15, 9]])  # (image, origin row, origin column)
    plan = K.plan_batch(grids, windows, np.array([0]), Run(0, 1, 4), Run(0, 1, 4), 1)
    # item 1 crosses four 8 x 8 tiles of image 0; item 2 two 10 x 10 cells of image 1
    assert plan[:, K.P_ITEM].tolist() == [0, 1, 1, 1, 1, 2, 2]
    assert plan[:, K.P_IMAGE].tolist() == [1, 0, 0, 0, 0, 1, 1]
    assert plan[:, K.P_PLANES].tolist() == [2, 0, 0, 0, 0, 2, 2]
