"""ChipDataset: the chips drawn, what a read returns, pickling, and worker processes."""

from __future__ import annotations

import multiprocessing
import pickle

import ml_dtypes
import numpy as np
import pytest

import rumimm
from rumimm.synthetic import eo_scene


def _transform(i):
    return (10.0, 0.0, 500000.0 + 2000.0 * i, 0.0, -10.0, 4200000.0)


@pytest.fixture
def files(tmp_path):
    """Three 3 x 160 x 200 uint16 files side by side (2 km apart), paths, blobs and arrays."""
    out = []
    for i in range(3):
        array = eo_scene(bands=3, height=160, width=200, dtype="uint16", seed=i)
        path = str(tmp_path / f"f{i}.rumi")
        out.append((path, rumimm.write(path, array, tile=64, transform=_transform(i), crs=32633), array))
    return out


def _dataset(files, size=48, **kw):
    return rumimm.ChipDataset([p for p, _, _ in files], size, headers=[b for _, b, _ in files], **kw)


def _expected(ds, files, i):
    arrays = {p: a for p, _, a in files}
    path, ((y0, y1), (x0, x1)) = ds.locate(i)
    return arrays[path][:, y0:y1, x0:x1]


def test_random_chips_are_seeded_and_read_right(files):
    ds = _dataset(files, n=40, seed=3)
    assert len(ds) == 40 and ds.chips.shape == (40, 3)
    assert np.array_equal(ds.chips, _dataset(files, n=40, seed=3).chips)
    assert not np.array_equal(ds.chips, _dataset(files, n=40, seed=4).chips)
    assert set(ds.chips[:, 0]) == {0, 1, 2}
    assert ds.chips[:, 1].max() <= 160 - 48 and ds.chips[:, 2].max() <= 200 - 48 and ds.chips.min() >= 0
    for i in (0, 17, -1):
        chip = ds[i]
        assert chip.shape == (3, 48, 48) and chip.dtype == np.uint16
        assert np.array_equal(chip, _expected(ds, files, i))
    batch = ds.__getitems__([5, 2, 5, 39])
    assert batch.shape == (4, 3, 48, 48)
    for got, i in zip(batch, [5, 2, 5, 39]):
        assert np.array_equal(got, _expected(ds, files, i))
    with pytest.raises(IndexError, match="chip 40 out of range for 40"):
        ds[40]


def test_weights_bands_and_transform(files):
    ds = _dataset(files, n=30, weights=[0, 1, 3], bands=[2, 0])
    assert set(ds.chips[:, 0]) == {1, 2}
    assert np.array_equal(ds[0], _expected(ds, files, 0)[[2, 0]])
    one = _dataset(files, n=5, bands=1)
    assert one[0].shape == (48, 48) and one.__getitems__([0, 1]).shape == (2, 48, 48)
    flip = _dataset(files, n=5, transform=lambda c: c[:, ::-1].astype(np.float32))
    got = flip.__getitems__([0, 3])
    assert isinstance(got, list) and got[1].dtype == np.float32
    assert np.array_equal(got[1], _expected(flip, files, 3)[:, ::-1])
    assert np.array_equal(flip[2], _expected(flip, files, 2)[:, ::-1])
    with pytest.raises(ValueError, match="4 finite values|3 finite values"):
        _dataset(files, n=5, weights=[1, 1])
    with pytest.raises(ValueError, match="bands \\[3\\] out of range"):
        _dataset(files, n=5, bands=[3])


def test_grid_chips_cover_each_file(files):
    ds = _dataset(files, size=64, grid=True)
    assert len(ds) == 3 * (2 * 3)                      # 160 // 64 = 2 rows, 200 // 64 = 3 columns
    assert ds.locate(0) == (files[0][0], ((0, 64), (0, 64)))
    assert ds.locate(5) == (files[0][0], ((64, 128), (128, 192)))
    overlapping = _dataset(files, size=64, grid=True, stride=32)
    assert len(overlapping) == 3 * (4 * 5)
    assert np.array_equal(overlapping[7], _expected(overlapping, files, 7))


def test_bounds_keep_chips_inside(files):
    # x from 501500 to 503000 m: the right part of file 0 and the left half of file 1
    bounds = (501500.0, 4198600.0, 503000.0, 4200000.0)
    ds = _dataset(files, size=32, n=50, bounds=bounds)
    assert set(ds.chips[:, 0]) == {0, 1}
    for f, y, x in ds.chips:
        left = 500000.0 + 2000.0 * f + 10.0 * x
        top = 4200000.0 - 10.0 * y
        assert left >= bounds[0] and left + 320 <= bounds[2] and top <= bounds[3] and top - 320 >= bounds[1]
    grid = _dataset(files, size=32, grid=True, bounds=bounds)
    assert {(int(f), int(x)) for f, _, x in grid.chips} >= {(0, 150), (1, 0)}
    with pytest.raises(ValueError, match="no file can hold"):
        _dataset(files, size=32, n=5, bounds=(0.0, 0.0, 10.0, 10.0))


def test_sources_catalog_images_and_types(files, tmp_path):
    table = rumimm.catalog([p for p, _, _ in files])
    rumimm.write_catalog(table, tmp_path / "cat.parquet")
    from_file = rumimm.ChipDataset(tmp_path / "cat.parquet", 48, n=10, seed=1)
    from_table = rumimm.ChipDataset(table, 48, n=10, seed=1)
    with rumimm.ImageCollection.from_catalog(table) as coll:
        from_images = rumimm.ChipDataset(coll.images, 48, n=10, seed=1)
        assert np.array_equal(from_images[3], from_file[3])
    assert np.array_equal(from_file.chips, from_table.chips)
    assert np.array_equal(from_table.__getitems__([1, 2]), from_file.__getitems__([1, 2]))
    mask = np.zeros((1, 100, 100), bool)
    mask[0, 10:20, 30:70] = True
    rumimm.write(tmp_path / "mask.rumi", mask, tile=32)
    bf = eo_scene(bands=2, height=100, width=100, dtype="float32", seed=0).astype(ml_dtypes.bfloat16)
    rumimm.write(tmp_path / "bf.rumi", bf, tile=32)
    m = rumimm.ChipDataset([tmp_path / "mask.rumi"], 40, grid=True)
    assert m[0].dtype == np.bool_ and np.array_equal(m[0], mask[:, :40, :40])
    b = rumimm.ChipDataset([tmp_path / "bf.rumi"], 40, grid=True)
    assert b[3].dtype == ml_dtypes.bfloat16 and np.array_equal(b[3].view(np.uint16), bf[:, 40:80, 40:80].view(np.uint16))
    with pytest.raises(ValueError, match="another sample type"):
        rumimm.ChipDataset([tmp_path / "mask.rumi", tmp_path / "bf.rumi"], 8, n=2, bands=0)


def test_pickles_as_paths_and_blobs(files):
    ds = _dataset(files, n=12)
    ds[0]                                               # opens a file
    data = pickle.dumps(ds)
    assert b"Image" not in data and len(data) < 10_000
    clone = pickle.loads(data)
    assert clone.paths == ds.paths and clone.blobs == ds.blobs
    assert np.array_equal(clone.__getitems__(range(12)), ds.__getitems__(range(12)))


def test_max_open_closes_least_recently_used(files):
    ds = _dataset(files, n=30, max_open=1)
    for i in range(len(ds)):
        assert np.array_equal(ds[i], _expected(ds, files, i))
        assert len(ds._images) == 1
    ds.close()
    assert not ds._images


def _threads_and_batch(ds, idx):
    batch = ds.__getitems__(idx)
    return rumimm.get_num_threads(), batch


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_worker_processes(files, method):
    """Plain multiprocessing (what DataLoader workers are): same chips, one decode thread each."""
    if method not in multiprocessing.get_all_start_methods():
        pytest.fail(f"start method {method} is missing on this platform")
    ds = _dataset(files, n=16, seed=7)
    want = ds.__getitems__(range(16))                   # the parent has files open before forking
    batches = [list(range(0, 8)), list(range(8, 16))]
    with multiprocessing.get_context(method).Pool(2) as pool:
        got = pool.starmap(_threads_and_batch, [(ds, b) for b in batches])
    assert [t for t, _ in got] == [1, 1]
    assert np.array_equal(np.concatenate([b for _, b in got]), want)


def test_torch_dataloader(files):
    """PyTorch's DataLoader batches through __getitems__, in-process and in fork/spawn workers."""
    # the torch extra (rumimm never imports torch); CI's main run installs it, the other Pythons' runs do not
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    ds = _dataset(files, n=24, seed=2)
    want = torch.from_numpy(ds.__getitems__(range(24)).astype(np.int32))
    for workers, context in ((0, None), (2, "fork"), (1, "spawn")):
        loader = DataLoader(ds, batch_size=8, num_workers=workers, multiprocessing_context=context)
        got = torch.cat([b.to(torch.int32) for b in loader])
        assert torch.equal(got, want), (workers, context)


def test_bad_arguments(files):
    with pytest.raises(ValueError, match="give n"):
        _dataset(files)
    with pytest.raises(ValueError, match="chip size must be >= 1"):
        _dataset(files, size=0, n=1)
    with pytest.raises(TypeError, match="transform must be callable"):
        _dataset(files, n=1, transform=3)
    with pytest.raises(ValueError, match="at least one file"):
        rumimm.ChipDataset([], 8, n=1)
    with pytest.raises(ValueError, match="got 3 sources but 1 headers"):
        rumimm.ChipDataset([p for p, _, _ in files], 8, n=1, headers=[files[0][1]])
