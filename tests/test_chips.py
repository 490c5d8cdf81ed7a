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
    for got, i in zip(batch, [5, 2, 5, 39], strict=True):
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
    with pytest.raises(ValueError, match=r"4 finite values|3 finite values"):
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
    assert (b[3].dtype == ml_dtypes.bfloat16
            and np.array_equal(b[3].view(np.uint16), bf[:, 40:80, 40:80].view(np.uint16)))
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


@pytest.mark.parametrize(("max_open", "output"), [(1, "array"), (2, "array"), (1, "sample")])
def test_threads_sharing_a_dataset_never_close_an_image_another_is_reading(files, max_open, output):
    """Making room for one thread's files closed images another thread had taken and not yet read
    ("image is closed" in 4 of 10 batches with max_open below the file count); a sample's nodata and
    bounds come from the images too, after the pixels."""
    from concurrent.futures import ThreadPoolExecutor

    ds = _dataset(files, n=60, max_open=max_open, seed=5, output=output)
    batches = [list(range(i, i + 6)) for i in range(0, 60, 6)] * 4

    def read(idx):
        return idx, ds.__getitems__(idx)

    with ThreadPoolExecutor(4) as pool:
        for idx, got in pool.map(read, batches):
            for i, chip in zip(idx, got, strict=True):
                assert np.array_equal(chip if output == "array" else chip["image"], _expected(ds, files, i))
    assert len(ds._images) <= max_open and not ds._images._retired and not ds._images._holds
    ds.close()


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


@pytest.mark.slow
@pytest.mark.torch
def test_torch_dataloader(files):
    """PyTorch's DataLoader batches through __getitems__, in-process and in fork/spawn workers."""
    import torch  # the torch marker: CI installs it; rumimm itself never imports torch
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


# -- chips a model can use: dtype, scale, nodata, samples; catalog rows checked first ------------------
@pytest.fixture
def nodata_files(tmp_path):
    """Two 2 x 64 x 80 uint16 files with nodata 0 in a corner, scales and offsets in their sidecars."""
    out = []
    for i in range(2):
        a = eo_scene(bands=2, height=64, width=80, dtype="uint16", seed=10 + i) + 1
        a[:, :8, :8] = 0
        path = str(tmp_path / f"n{i}.rumi")
        blob = rumimm.write(path, a, tile=32, transform=_transform(i), crs=32633, nodata=0,
                            scales=[1e-4, 2e-4], offsets=[-0.1, 0.0])
        out.append((path, blob, a))
    return out


def test_a_float_dtype_gives_chips_torch_can_do_arithmetic_on(nodata_files):
    ds = _dataset(nodata_files, size=16, n=6, dtype="float32")
    chip = ds[0]
    assert chip.dtype == np.float32 and np.array_equal(chip, _expected(ds, nodata_files, 0).astype(np.float32))
    assert ds.__getitems__([0, 1]).dtype == np.float32


def test_scale_file_gives_physical_values_and_a_number_multiplies(nodata_files):
    ds = _dataset(nodata_files, size=16, grid=True, scale="file")
    raw = _expected(ds, nodata_files, 3).astype(np.float32)
    want = np.stack([raw[0] * np.float32(1e-4) + np.float32(-0.1), raw[1] * np.float32(2e-4)])
    assert ds[3].dtype == np.float32 and np.array_equal(ds[3], want)
    ds = _dataset(nodata_files, size=16, grid=True, scale=1 / 10000, dtype="float64")
    assert np.array_equal(ds[3], _expected(ds, nodata_files, 3) * (1 / 10000))
    with pytest.raises(ValueError, match="float dtype"):
        _dataset(nodata_files, size=16, n=2, scale=2.0, dtype="uint16")
    with pytest.raises(ValueError, match="one per band read"):
        _dataset(nodata_files, size=16, n=2, scale=[1.0, 2.0, 3.0])


def test_nodata_is_filled_and_samples_carry_a_valid_mask_bounds_and_crs(nodata_files):
    ds = _dataset(nodata_files, size=16, grid=True, dtype="float32", fill_nodata=np.nan, output="sample")
    corner = next(i for i in range(len(ds)) if tuple(ds.chips[i, 1:]) == (0, 0))
    s = ds[corner]
    assert set(s) == {"image", "valid", "bounds", "crs"} and s["crs"] == "EPSG:32633"
    assert s["valid"].shape == (2, 16, 16) and not s["valid"][:, :8, :8].any() and s["valid"][:, 8:, 8:].all()
    assert np.isnan(s["image"][:, :8, :8]).all() and not np.isnan(s["image"][:, 8:, 8:]).any()
    f = int(ds.chips[corner, 0])
    assert tuple(s["bounds"]) == (500000.0 + 2000.0 * f, 4200000.0 - 160.0, 500160.0 + 2000.0 * f, 4200000.0)
    batch = ds.__getitems__([corner, corner + 1])
    assert len(batch) == 2 and np.array_equal(batch[0]["image"], s["image"], equal_nan=True)
    assert (batch[1]["valid"].shape == (2, 16, 16) and batch[1]["bounds"].shape == (4,)
            and batch[1]["crs"] == "EPSG:32633")
    one = _dataset(nodata_files, size=16, grid=True, bands=1, output="sample")[corner]
    assert one["image"].shape == one["valid"].shape == (16, 16) and not one["valid"][:8, :8].any()


def test_bad_catalog_rows_are_rumi_errors_before_anything_is_sized(nodata_files, tmp_path):
    import pyarrow as pa

    from rumimm.errors import RumiError

    (p0, b0, _), (p1, b1, _) = nodata_files
    tables = {
        "no path": pa.table({"path": pa.array([p0, None]), "blob": pa.array([b0, b1])}),
        "no blob": pa.table({"path": pa.array([p0, p1]), "blob": pa.array([b0, None], pa.binary())}),
        "must be binary": pa.table({"path": pa.array([p0, p1]), "blob": pa.array(["x", "y"])}),
        "must be strings": pa.table({"path": pa.array([1, 2]), "blob": pa.array([b0, b1])}),
        "'transform' must be lists": pa.table({"path": pa.array([p0, p1]), "blob": pa.array([b0, b1]),
                                             "transform": pa.array(["a", "b"])}),
    }
    for match, table in tables.items():
        with pytest.raises(RumiError, match=match):
            rumimm.ChipDataset(table, 16, n=2)
        with pytest.raises(RumiError, match=match):
            rumimm.ImageCollection.from_catalog(table)


def test_a_grid_too_large_to_hold_is_refused_before_it_is_allocated(tmp_path):
    import tracemalloc

    import pyarrow as pa

    from rumimm.errors import RumiError
    from rumimm.format import blob as blob_format
    from rumimm.format.grid import FrameUnit

    # a valid 28-byte blob: a 2**20 x 2**20 uint8 image of 1-pixel tiles, every frame 20 bytes (no residual bits)
    giant = blob_format._HEADER.pack(blob_format.MAGIC, blob_format.VERSION, 1 << 20, 1 << 20, 1, 1, 1, 8, 1,
                                     int(FrameUnit.TILE), 20, 0)
    assert len(giant) == 28 and rumimm.parse_blobs([giant])["image_width"][0] == 1 << 20
    table = pa.table({"path": pa.array([str(tmp_path / "giant.rumi")]), "blob": pa.array([giant], pa.binary())})
    tracemalloc.start()
    try:
        with pytest.raises(RumiError, match="has 1,099,511,627,776 chips, more than"):
            rumimm.ChipDataset(table, 1, grid=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20  # was 2-4 GB before any file was opened


def test_label_rasters_come_with_their_chips_aligned_by_grid_or_georeferencing(files, tmp_path):
    labels, label_arrays = [], []
    for i, (_path, _, array) in enumerate(files):
        lab = (array[0] % 5).astype(np.uint8)[np.newaxis]
        if i == 1:  # a larger label raster starting 3 rows up and 5 columns left: aligned by georeferencing
            big = np.full((1, 170, 210), 255, np.uint8)
            big[:, 3:163, 5:205] = lab
            t = _transform(i)
            rumimm.write(tmp_path / f"l{i}.rumi", big, tile=64,
                         transform=(t[0], 0.0, t[2] - 50.0, 0.0, t[4], t[5] + 30.0), crs=32633)
        else:
            rumimm.write(tmp_path / f"l{i}.rumi", lab, tile=64, transform=_transform(i), crs=32633)
        labels.append(str(tmp_path / f"l{i}.rumi"))
        label_arrays.append(lab)
    ds = _dataset(files, size=32, n=12, seed=5, labels=labels)
    for i in range(len(ds)):
        chip, label = ds[i]
        path, ((y0, y1), (x0, x1)) = ds.locate(i)
        f = [p for p, _, _ in files].index(path)
        assert np.array_equal(chip, files[f][2][:, y0:y1, x0:x1])
        assert np.array_equal(label, label_arrays[f][:, y0:y1, x0:x1])
    pairs = ds.__getitems__([0, 3])
    assert len(pairs) == 2 and pairs[1][0].shape == (3, 32, 32) and pairs[1][1].shape == (1, 32, 32)
    assert np.array_equal(pairs[1][1], ds[3][1])
    sample = _dataset(files, size=32, n=4, seed=5, labels=labels, output="sample")[2]
    assert sample["mask"].shape == (1, 32, 32)
    wrong = tmp_path / "wrong.rumi"
    rumimm.write(wrong, np.zeros((1, 160, 200), np.uint8), tile=64, transform=(20.0, 0, 500000.0, 0, -20.0, 4200000.0),
                 crs=32633)
    from rumimm.errors import RumiError

    with pytest.raises(RumiError, match="label pixel size"):
        _dataset(files, size=32, n=4, labels=[str(wrong), labels[1], labels[2]])
    with pytest.raises(ValueError, match="one label per image"):
        _dataset(files, size=32, n=4, labels=labels[:2])


@pytest.mark.slow
@pytest.mark.torch
def test_samples_and_label_pairs_collate_in_a_torch_dataloader(nodata_files, tmp_path):
    import torch  # the torch marker: CI installs it
    from torch.utils.data import DataLoader

    labels = []
    for i, (_path, _, array) in enumerate(nodata_files):
        labels.append(str(tmp_path / f"lab{i}.rumi"))
        rumimm.write(labels[-1], (array[:1] % 3).astype(np.uint8), tile=32, transform=_transform(i), crs=32633)
    ds = _dataset(nodata_files, size=16, n=8, dtype="float32", output="sample", labels=labels)
    batch = next(iter(DataLoader(ds, batch_size=4)))
    assert batch["image"].shape == (4, 2, 16, 16) and batch["image"].dtype == torch.float32
    assert batch["mask"].shape == (4, 1, 16, 16) and batch["valid"].dtype == torch.bool
    assert batch["bounds"].shape == (4, 4) and batch["crs"] == ["EPSG:32633"] * 4
    assert torch.isfinite((batch["image"] - 1).mean())
    images, masks = next(iter(DataLoader(_dataset(nodata_files, size=16, n=8, labels=labels), batch_size=4)))
    assert images.shape == (4, 2, 16, 16) and masks.shape == (4, 1, 16, 16)


# -- casting is explicit; fill_nodata fits the chips' dtype (issue "edges a user hits") ---------
def test_a_narrowing_dtype_is_refused_unless_a_casting_rule_allows_it(nodata_files):
    with pytest.raises(rumimm.RumiError, match=r"uint16 samples cannot become uint8 chips under casting='safe'"):
        _dataset(nodata_files, size=16, n=2, dtype="uint8")
    with pytest.raises(rumimm.RumiError, match="casting='no'"):
        _dataset(nodata_files, size=16, n=2, dtype="int32", casting="no")
    with pytest.raises(ValueError, match="casting must be one of"):
        _dataset(nodata_files, size=16, n=2, dtype="uint8", casting="wrap")


def test_an_unsafe_cast_saturates_instead_of_wrapping(tmp_path):
    path = tmp_path / "big.rumi"
    rumimm.write(path, np.full((1, 16, 16), 2399, np.uint16), tile=16)
    ds = rumimm.ChipDataset([str(path)], 16, grid=True, dtype="uint8", casting="unsafe")
    assert ds[0].dtype == np.uint8
    assert int(ds[0].max()) == 255  # numpy's astype would give 2399 % 256 = 95
    assert int(ds.__getitems__([0])[0].max()) == 255
    signed = rumimm.ChipDataset([str(path)], 16, grid=True, dtype="int8", casting="same_kind", output="sample")
    assert int(signed[0]["image"].max()) == 127


@pytest.mark.parametrize(("src", "dst"), [("float32", "int32"), ("float32", "uint32"), ("float64", "int64"),
                                          ("float64", "uint64"), ("float32", "int16")])
def test_an_unsafe_cast_of_floats_saturates_at_the_integer_bounds(tmp_path, src, dst):
    """float(2**31 - 1) is 2**31 in float32, so clipping to it and casting wrapped to the minimum."""
    info = np.iinfo(dst)
    values = np.array([3e9, -3e9, 1e10, 1e20, -1e20, 5.0, np.nan, float(info.max)], src)
    path = tmp_path / "f.rumi"
    rumimm.write(path, np.resize(values, (1, 16, 16)), tile=16)
    got = rumimm.ChipDataset([str(path)], 16, grid=True, dtype=dst, casting="unsafe")[0].reshape(-1)[:values.size]
    want = [0 if np.isnan(v) else int(info.max) if v >= float(info.max) else int(info.min) if v <= float(info.min)
            else int(v) for v in values.astype(np.float64)]
    assert got.tolist() == want and want[-1] == info.max


def test_files_of_several_steps_fill_scale_and_mask_by_band_across_every_step(tmp_path):
    """Chips of a spec 0.2 file of T steps are (T, bands, h, w): nodata, scale and the valid mask go by band."""
    a = np.full((3, 2, 32, 32), 7, np.uint16)
    a[:, 1, :4] = 0
    path = tmp_path / "t.rumi"
    rumimm.write(path, a, tile=32, spec="0.2", descriptions=["a", "b"], nodata=[None, 0],
                 time=["2026-01-01", "2026-01-02", "2026-01-03"])
    s = rumimm.ChipDataset([str(path)], 32, grid=True, dtype="float32", fill_nodata=np.nan, scale=[2.0, 3.0],
                           output="sample")[0]
    assert s["image"].shape == s["valid"].shape == (3, 2, 32, 32)
    assert np.isnan(s["image"][:, 1, :4]).all() and not np.isnan(s["image"][:, 1, 4:]).any()
    assert (s["image"][:, 0] == 14).all() and (s["image"][:, 1, 4:] == 21).all()
    assert not s["valid"][:, 1, :4].any() and s["valid"][:, 0].all() and s["valid"][:, 1, 4:].all()
    one = rumimm.ChipDataset([str(path)], 32, grid=True, bands=1, dtype="float32", fill_nodata=-1.0,
                             output="sample")[0]
    assert one["image"].shape == (3, 32, 32) and (one["image"][:, :4] == -1).all() and not one["valid"][:, :4].any()


def test_point_files_give_the_same_chips_from_paths_and_a_catalog_and_area_bounds(tmp_path):
    a = np.ones((1, 100, 50), np.uint16)
    path = tmp_path / "p.rumi"
    rumimm.write(path, a, tile=32, transform=(10, 0, 1000, 0, -10, 2000), crs=32633, pixel_is_point=True)
    box = (1000, 1000, 1500, 2000)
    by_path = rumimm.ChipDataset([str(path)], 10, grid=True, bounds=box, output="sample")
    by_catalog = rumimm.ChipDataset(rumimm.catalog([str(path)]), 10, grid=True, bounds=box, output="sample")
    assert np.array_equal(by_path.chips, by_catalog.chips)
    whole = rumimm.ChipDataset([str(path)], (100, 50), grid=True, output="sample")[0]
    with rumimm.open(path) as img:
        assert tuple(whole["bounds"]) == img.bounds == (995.0, 1005.0, 1495.0, 2005.0)


def test_a_safe_cast_needs_no_casting_argument(nodata_files):
    ds = _dataset(nodata_files, size=16, n=2, dtype="int32")
    assert ds[0].dtype == np.int32


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"fill_nodata": 70000}, "not a uint16 value"),
    ({"fill_nodata": -1}, "not a uint16 value"),
    ({"fill_nodata": 0.5}, "not a uint16 value"),
    ({"fill_nodata": float("nan")}, "not a uint16 value"),
    ({"fill_nodata": 1e40, "dtype": "float32"}, "beyond the range of float32"),
    ({"fill_nodata": "x"}, "must be a number"),
])
def test_a_fill_value_outside_the_chips_dtype_is_refused_when_the_dataset_is_made(nodata_files, kwargs, match):
    with pytest.raises(rumimm.RumiError, match=match):
        _dataset(nodata_files, size=16, n=2, **kwargs)


def test_stac_item_dicts_are_taken_as_pystac_items_are(files, tmp_path):
    """``item.to_dict()`` and a stac-geoparquet read give Item dicts: the chips are those of the pystac Items."""
    pytest.importorskip("pystac")
    import datetime as dt

    from rumimm import stac

    items = stac.items([p for p, _, _ in files], blobs=[b for _, b, _ in files],
                       datetime=dt.datetime(2024, 5, 1, tzinfo=dt.UTC))
    dicts = [it.to_dict() for it in items]
    sources = [dicts, {"type": "FeatureCollection", "features": dicts}]
    if __import__("importlib").util.find_spec("stac_geoparquet") is not None:
        stac.to_stac_geoparquet(items, tmp_path / "items.parquet")
        sources.append(stac.read_stac_geoparquet(tmp_path / "items.parquet"))
    want = rumimm.ChipDataset(items, 48, n=6, seed=3)
    for src in sources:
        ds = rumimm.ChipDataset(src, 48, n=6, seed=3)
        for i in range(len(ds)):
            assert ds.locate(i) == want.locate(i)
            np.testing.assert_array_equal(ds[i], _expected(ds, files, i))
