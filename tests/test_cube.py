"""Cube, ImageCollection and read_batch against numpy stacks of the arrays written."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from affine import Affine

import rumimm
from rumimm.errors import CodecError, RumiError, WindowError
from rumimm.reader import engine
from rumimm.synthetic import eo_scene

SHAPE = (2, 29, 41)
TILE = 8
TRANSFORM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0)


def same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Three grid-aligned images (two frame units) plus their arrays and blobs."""
    folder = tmp_path_factory.mktemp("cube")
    arrays, paths, blobs = [], [], []
    for i, unit in enumerate(["tile", "cell", "tile"]):
        a = eo_scene(*SHAPE, dtype="int16", seed=10 + i)
        p = folder / f"t{i}.rumi"
        blobs.append(rumimm.write(p, a, tile=TILE, unit=unit, transform=TRANSFORM, crs=32633, threads=1))
        arrays.append(a)
        paths.append(p)
    return paths, blobs, np.stack(arrays)


@pytest.fixture
def cube(stack):
    paths, blobs, _ = stack
    with rumimm.Cube(paths, blobs, cache_bytes=0) as c:
        yield c


KEYS = [
    np.s_[:],
    np.s_[1],
    np.s_[:, :, 3:20, 5:30],
    np.s_[:, 1, 7:9, 7:9],
    np.s_[[2, 0], :, ::4, ::-3],
    np.s_[-1, 0, 28, 40],
    np.s_[..., 10],
    np.s_[1:, [1, 0], 4:12],
    np.s_[[0, 0, 2], 1, 0:3, 0:3],
    np.s_[:, :, [0, 28], [40, 1]],
    np.s_[::-1, :, 24:, 32:],
    np.s_[:, 1, 5, ..., [3, 9]],  # an Ellipsis of no axes parts the advanced indices
]


@pytest.mark.parametrize("key", KEYS, ids=[str(k) for k in KEYS])
def test_cube_indexing_equals_numpy_on_the_stack(cube, stack, key):
    assert same(cube[key], stack[2][key])


def test_a_cube_has_four_axes_and_the_images_metadata(cube, stack):
    assert cube.shape == (3, *SHAPE) and cube.ndim == 4 and len(cube) == 3
    assert cube.dtype == np.dtype("int16") and cube.nbytes == stack[2].nbytes
    assert cube.transform == Affine(*TRANSFORM) and cube.crs == "EPSG:32633" and cube.tile == (TILE, TILE)
    assert same(np.asarray(cube), stack[2])


def test_cube_read_fills_a_buffer(cube, stack):
    out = np.empty((3, 1, 5, 6), np.int16)
    assert cube.read([2], ((2, 7), (30, 36)), out=out) is out
    assert same(out, stack[2][:, [1], 2:7, 30:36])
    assert same(cube.read(1, ((0, 4), (0, 4))), stack[2][:, 0, 0:4, 0:4])  # 1-based, as rasterio


def test_images_on_different_grids_do_not_make_a_cube(tmp_path, stack):
    paths, blobs, arrays = stack
    small = rumimm.write(tmp_path / "s.rumi", arrays[0][:, :20], tile=TILE, threads=1)
    with pytest.raises(RumiError, match="shape"):
        rumimm.Cube([paths[0], tmp_path / "s.rumi"], [blobs[0], small])
    retiled = rumimm.write(tmp_path / "r.rumi", arrays[0], tile=16, threads=1)
    with pytest.raises(RumiError, match="tile"):
        rumimm.Cube([paths[0], tmp_path / "r.rumi"], [blobs[0], retiled])
    moved = rumimm.write(tmp_path / "m.rumi", arrays[0], tile=TILE, transform=(20.0, 0, 0, 0, -20.0, 0),
                         crs=32633, threads=1)
    with pytest.raises(RumiError, match="transform"):
        rumimm.Cube([paths[0], tmp_path / "m.rumi"], [blobs[0], moved])
    other_type = rumimm.write(tmp_path / "u.rumi", arrays[0].astype(np.uint16), tile=TILE, threads=1)
    with pytest.raises(RumiError, match="dtype"):
        rumimm.Cube([paths[0], tmp_path / "u.rumi"], [blobs[0], other_type])
    with pytest.raises(ValueError):
        rumimm.Cube([])


def test_a_cube_of_open_images_leaves_them_open(stack):
    paths, blobs, arrays = stack
    images = [rumimm.open(p, b) for p, b in zip(paths, blobs, strict=True)]
    with rumimm.Cube(images) as c:
        assert same(c[:, 0, 0], arrays[:, 0, 0])
    assert not any(img.closed for img in images)
    for img in images:
        img.close()


def test_a_cube_pickles(cube, stack):
    clone = pickle.loads(pickle.dumps(cube))
    assert same(clone[:, :, 1:4, 1:4], stack[2][:, :, 1:4, 1:4])


def test_a_cube_decodes_with_the_fallback_too(stack, monkeypatch):
    paths, blobs, arrays = stack
    engine.load()
    monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    with rumimm.Cube(paths, blobs) as c:
        assert same(c[:, :, 5:25, 3:33], arrays[:, :, 5:25, 3:33])


# -- collections ---------------------------------------------------------------------------
def test_a_collection_groups_aligned_images_into_cubes(tmp_path, stack):
    paths, blobs, arrays = stack
    small = rumimm.write(tmp_path / "s.rumi", arrays[1][:, :20], tile=TILE, threads=1)
    with rumimm.ImageCollection([paths[0], tmp_path / "s.rumi", paths[2]], [blobs[0], small, blobs[2]]) as col:
        assert len(col) == 3 and col.shapes == [SHAPE, (2, 20, 41), SHAPE]
        assert same(col[1][:], arrays[1][:, :20])
        cubes = col.cubes()
        assert [c.shape[0] for c in cubes] == [2, 1]
        assert same(cubes[0][:, :, 0:5, 0:5], arrays[[0, 2]][:, :, 0:5, 0:5])
        got = col.read_batch(((0, 8), (0, 8)))
        assert same(got, np.stack([arrays[0][:, :8, :8], arrays[1][:, :8, :8], arrays[2][:, :8, :8]]))
        assert len(col[1:]) == 2


# -- read_batch ----------------------------------------------------------------------------
def test_read_batch_reads_many_windows_of_one_image_into_one_array(stack):
    paths, blobs, arrays = stack
    rng = np.random.default_rng(3)
    origins = np.stack([rng.integers(0, 29 - 6, 40), rng.integers(0, 41 - 7, 40)], axis=1)
    with rumimm.open(paths[1], blobs[1], cache_bytes=0) as img:
        got = rumimm.read_batch([img] * 40, origins, size=(6, 7))
        windows = [((y, y + 6), (x, x + 7)) for y, x in origins]
        assert same(rumimm.read_batch([img] * 40, windows), got)
    want = np.stack([arrays[1][:, y:y + 6, x:x + 7] for y, x in origins])
    assert same(got, want)


def test_read_batch_reads_windows_from_many_files(stack):
    paths, blobs, arrays = stack
    windows = [((0, 9), (0, 9)), (slice(20, 29), slice(32, 41)), ((10, 19), (13, 22))]
    got = rumimm.read_batch(paths, windows, headers=blobs)
    assert got.shape == (3, 2, 9, 9)
    assert same(got[0], arrays[0][:, 0:9, 0:9])
    assert same(got[1], arrays[1][:, 20:29, 32:41])
    assert same(got[2], arrays[2][:, 10:19, 13:22])
    one_band = rumimm.read_batch(paths, windows, headers=blobs, bands=1)
    assert same(one_band, got[:, 1])
    swapped = rumimm.read_batch(paths, windows, headers=blobs, bands=[1, 0, 1])
    assert same(swapped, got[:, [1, 0, 1]])


def test_read_batch_accepts_one_window_for_all_and_fills_out(stack):
    paths, blobs, arrays = stack
    out = np.zeros((3, 2, 4, 5), np.int16)
    assert rumimm.read_batch(paths, ((3, 7), (8, 13)), headers=blobs, out=out) is out
    assert same(out, arrays[:, :, 3:7, 8:13])


def test_read_batch_decodes_a_frame_shared_by_windows_once(stack):
    paths, blobs, arrays = stack
    with rumimm.open(paths[0], blobs[0], cache_bytes=0) as img:
        windows = [((0, 4), (0, 4)), ((1, 5), (2, 6)), ((4, 8), (4, 8))]
        got = rumimm.read_batch([img, img, img], windows, bands=0)
    assert same(got, np.stack([arrays[0][0, 0:4, 0:4], arrays[0][0, 1:5, 2:6], arrays[0][0, 4:8, 4:8]]))


def test_read_batch_refuses_windows_that_leave_an_image_or_differ_in_size(stack):
    paths, blobs, _ = stack
    with pytest.raises(WindowError, match="window 1"):
        rumimm.read_batch(paths[:2], [((0, 4), (0, 4)), ((27, 31), (0, 4))], headers=blobs[:2])
    with pytest.raises(WindowError, match="equal-size"):
        rumimm.read_batch(paths[:2], [((0, 4), (0, 4)), ((0, 5), (0, 4))], headers=blobs[:2])
    with pytest.raises(WindowError):
        rumimm.read_batch(paths[:2], ((0, 4), (0, 4)), headers=blobs[:2], bands=[2])
    with pytest.raises(ValueError, match="windows"):
        rumimm.read_batch(paths[:2], [((0, 4), (0, 4))] * 3, headers=blobs[:2])
    with pytest.raises(WindowError, match="window origins must be integers, got an array of float64"):
        rumimm.read_batch(paths[:2], np.array([[0.0, 0.0], [1.5, 2.0]]), size=(4, 4), headers=blobs[:2])


def test_read_batch_takes_open_windows_and_one_rasterio_window_per_image(stack):
    paths, blobs, arrays = stack
    whole = rumimm.read_batch(paths, (slice(None), slice(None)), headers=blobs)
    assert same(whole, arrays)
    tail = rumimm.read_batch(paths, (slice(20, None), slice(None, 5)), headers=blobs)
    assert same(tail, arrays[:, :, 20:, :5])
    rasterio = pytest.importorskip("rasterio")
    got = rumimm.read_batch(paths, rasterio.windows.Window(3, 2, 5, 4), headers=blobs)
    assert same(got, arrays[:, :, 2:6, 3:8])
    with pytest.raises(WindowError, match=r"outside the image \(0 to 29\)"):  # the image's size, not a placeholder
        rumimm.read_batch(paths, ((25, 31), (0, 4)), headers=blobs)


def test_read_batch_refuses_bands_that_count_from_the_end_of_images_of_other_band_counts(tmp_path, stack):
    paths, blobs, arrays = stack
    three = eo_scene(3, 29, 41, dtype="int16", seed=3)
    blob3 = rumimm.write(tmp_path / "three.rumi", three, tile=TILE, transform=TRANSFORM, crs=32633, threads=1)
    sources, headers = [tmp_path / "three.rumi", paths[0]], [blob3, blobs[0]]
    for bands in (-1, [0, -1]):
        with pytest.raises(WindowError, match="other bands in images of 2 and of 3 bands"):
            rumimm.read_batch(sources, ((0, 4), (0, 4)), headers=headers, bands=bands)
    for mask in ([True, False], [True, False, True]):  # a mask fits one band count, as numpy's does
        with pytest.raises(WindowError, match="boolean index did not match axis 0"):
            rumimm.read_batch(sources, ((0, 4), (0, 4)), headers=headers, bands=mask)
    got = rumimm.read_batch(sources, ((0, 4), (0, 4)), headers=headers, bands=[1, 0])  # the same bands of each
    assert same(got, np.stack([three[[1, 0], :4, :4], arrays[0][[1, 0], :4, :4]]))


def test_read_batch_names_the_multi_step_image_a_single_step_one_does_not_batch_with(tmp_path, stack):
    paths, blobs, _ = stack
    steps = np.stack([eo_scene(*SHAPE, dtype="int16", seed=s) for s in (1, 2)])
    rumimm.write(tmp_path / "steps.rumi", steps, tile=TILE, spec="0.2", descriptions=["a", "b"],
                 time=["2026-01-01", "2026-01-02"], threads=1)
    with pytest.raises(RumiError, match=r"image 0 \(.*t0.rumi\) has 1 time step\(s\) but image 1 \(.*steps.rumi\) 2"):
        rumimm.read_batch([paths[0], tmp_path / "steps.rumi"], ((0, 4), (0, 4)), headers=[blobs[0], None])


def test_an_empty_read_batch_fills_out_and_counts_a_mask(stack):
    out = np.zeros((0, 1, 4, 4), np.int16)
    assert rumimm.read_batch([], ((0, 4), (0, 4)), out=out, bands=[True, False]) is out
    assert rumimm.read_batch([], ((0, 4), (0, 4)), bands=[True, False, True]).shape == (0, 2, 4, 4)
    with pytest.raises(ValueError, match="out must have shape"):
        rumimm.read_batch([], ((0, 4), (0, 4)), out=np.zeros((5, 5)))


def test_an_unpickled_cube_or_collection_closes_the_images_it_opened(stack):
    paths, blobs, _ = stack
    for kind in (rumimm.Cube, rumimm.ImageCollection):
        with kind(paths, blobs) as original:
            clone = pickle.loads(pickle.dumps(original))
        clone.close()
        assert all(img.closed for img in clone.images if isinstance(img, rumimm.Image)) or \
            all(img.closed for img in clone)
    images = [rumimm.open(p, b) for p, b in zip(paths, blobs, strict=True)]
    clone = pickle.loads(pickle.dumps(rumimm.Cube(images)))  # images the caller gave stay the caller's
    clone.close()
    assert not any(img.closed for img in clone.images)
    for img in images + clone.images:
        img.close()


def test_read_batch_names_the_corrupt_frame(tmp_path, stack):
    paths, blobs, _ = stack
    data = bytearray(paths[0].read_bytes())
    hdr = rumimm.Header.parse(blobs[0])
    start = int(hdr.frame_offsets[0])
    data[start + 20:start + 40] = bytes(20)
    (tmp_path / "bad.rumi").write_bytes(bytes(data))
    with pytest.raises(CodecError, match=r"bad.rumi: frame 0 of \d+ \(row 0, col 0, band 0\)"):
        rumimm.read_batch([paths[1], tmp_path / "bad.rumi"], ((0, 4), (0, 4)), headers=[blobs[1], blobs[0]])
