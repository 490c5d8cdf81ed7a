"""rumimm.torchgeo: a TorchGeo GeoDataset over a rumi catalog, checked against a numpy mosaic
built here and against TorchGeo's own RasterDataset reading GeoTIFFs of the same scenes.

torchgeo needs Python >= 3.12: CI installs it in its Python 3.12 run (.ci/pythons.sh), where
these tests run; other runs skip this module.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyproj
import pytest
import shapely

torchgeo = pytest.importorskip("torchgeo")
# TorchGeo 0.10 deprecates RandomGeoSampler, GridGeoSampler and RandomBatchGeoSampler (and helpers they
# call); they still work, and users still have them
pytestmark = pytest.mark.filterwarnings("ignore:Use torchgeo:DeprecationWarning",
                                        "ignore:Use geopandas:DeprecationWarning")

import rasterio  # noqa: E402  (torchgeo depends on it)
import torch  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402
from torchgeo.datasets import RasterDataset, stack_samples  # noqa: E402
from torchgeo.samplers import (  # noqa: E402
    GriddedPatchSampler,
    GridGeoSampler,
    RandomBatchGeoSampler,
    RandomGeoSampler,
    RandomPatchSampler,
)

import rumimm  # noqa: E402
from rumimm.errors import RumiError  # noqa: E402
from rumimm.torchgeo import RumiDataset  # noqa: E402
from rumimm.torchgeo import stack_samples as rumi_stack_samples  # noqa: E402

RES = 10.0
X0, Y0 = 500000.0, 4200000.0  # top-left corner of the mosaic
# (row, col) pixel offset in the mosaic and (height, width) of each scene: a 2 x 2 layout whose
# scenes overlap by 30 px, plus one scene off the regular grid; catalog order = file name order
SCENES = [((0, 0), (200, 260)), ((0, 230), (200, 260)), ((170, 0), (200, 260)), ((170, 230), (200, 200)),
          ((400, 37), (90, 120))]
MOSAIC = (490, 490)


def _transform(r, c):
    return (RES, 0.0, X0 + c * RES, 0.0, -RES, Y0 - r * RES)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Scenes written as rumi and as GeoTIFF (plus a label GeoTIFF each), the catalog, and the
    numpy mosaics where the first scene covering a pixel wins (0 where none does)."""
    root = tmp_path_factory.mktemp("torchgeo")
    (root / "tif").mkdir()
    (root / "labels").mkdir()
    rng = np.random.default_rng(5)
    mosaic = np.zeros((3, *MOSAIC), np.uint16)
    labels = np.zeros(MOSAIC, np.uint8)
    covered = np.zeros(MOSAIC, bool)
    paths, blobs, arrays = [], [], []
    for i, ((r, c), (h, w)) in enumerate(SCENES):
        array = rng.integers(1, 60000, (3, h, w), dtype=np.uint16)
        arrays.append(array)
        label = rng.integers(1, 9, (1, h, w), dtype=np.uint8)
        t = _transform(r, c)
        path = root / f"scene{i}.rumi"
        blobs.append(rumimm.write(path, array, tile=64, transform=t, crs=32633))
        paths.append(str(path))
        for folder, data in (("tif", array), ("labels", label)):
            with rasterio.open(root / folder / f"scene{i}.tif", "w", driver="GTiff", width=w, height=h,
                               count=data.shape[0], dtype=data.dtype, crs="EPSG:32633",
                               transform=rasterio.Affine(*t), tiled=True, blockxsize=64, blockysize=64) as ds:
                ds.write(data)
        free = ~covered[r:r + h, c:c + w]
        mosaic[:, r:r + h, c:c + w][:, free] = array[:, free]
        labels[r:r + h, c:c + w][free] = label[0][free]
        covered[r:r + h, c:c + w] = True
    table = rumimm.catalog(paths, blobs=blobs)
    rumimm.write_catalog(table, root / "catalog.parquet")
    return {"root": root, "paths": paths, "blobs": blobs, "arrays": arrays, "table": table, "mosaic": mosaic,
            "labels": labels, "catalog": root / "catalog.parquet"}


class Tifs(RasterDataset):
    filename_glob = "scene*.tif"


class Labels(RasterDataset):
    filename_glob = "scene*.tif"
    is_image = False


def _window(query, res=RES):
    """(y0, y1, x0, x1) pixel window of a query in the mosaic (queries here lie on the pixel grid)."""
    x, y = query[0], query[1]
    return (round((Y0 - y.stop) / res), round((Y0 - y.start) / res), round((x.start - X0) / res),
            round((x.stop - X0) / res))


def _expected(world, query, key="mosaic"):
    """The mosaic cut at a query, 0 outside it."""
    y0, y1, x0, x1 = _window(query)
    src = world[key]
    out = np.zeros((*src.shape[:-2], y1 - y0, x1 - x0), src.dtype)
    ya, yb, xa, xb = max(y0, 0), min(y1, MOSAIC[0]), max(x0, 0), min(x1, MOSAIC[1])
    if ya < yb and xa < xb:
        out[..., ya - y0:yb - y0, xa - x0:xb - x0] = src[..., ya:yb, xa:xb]
    return out


def test_the_index_comes_from_the_catalog_footprints(world):
    ds = RumiDataset(world["catalog"])
    assert len(ds) == len(SCENES) and ds.crs == pyproj.CRS.from_epsg(32633) and ds.res == (RES, RES)
    for i, ((r, c), (h, w)) in enumerate(SCENES):
        left, top = X0 + c * RES, Y0 - r * RES
        assert ds.index.geometry.iloc[i].bounds == (left, top - h * RES, left + w * RES, top)
        assert ds.index.filepath.iloc[i] == world["paths"][i]
    assert ds.index.index.left.min() == pd.Timestamp.min and ds.index.index.right.max() == pd.Timestamp.max
    x, y, _ = ds.bounds
    assert (x.start, x.stop, y.start, y.stop) == (X0, X0 + 490 * RES, Y0 - 490 * RES, Y0)
    assert RumiDataset(world["table"]).index.geometry.equals(ds.index.geometry)  # a table works too


def test_opening_and_reading_never_index_a_file(world, monkeypatch):
    for walk in ("inspect_mapping", "inspect_store"):  # the IFD walks of a file opened without its blob
        monkeypatch.setattr(sys.modules["rumimm.reader.image"], walk,
                            lambda *a, **k: pytest.fail("a file was indexed although the catalog holds its blob"))
    ds = RumiDataset(world["catalog"])
    q = (slice(X0 + 100, X0 + 740), slice(Y0 - 1000, Y0 - 360))
    assert np.array_equal(ds[q]["image"].numpy(), _expected(world, q).astype(np.float32))


def test_samples_equal_the_mosaic_and_torchgeo_raster_dataset_on_a_grid(world):
    ds = RumiDataset(world["catalog"])
    tifs = Tifs(paths=str(world["root"] / "tif"))
    assert tifs.res == ds.res and tifs.crs == ds.crs
    # 64 px chips every 50 px: chips cross scene seams (first scene wins) and the mosaic's edge;
    # GridGeoSampler steps over each scene, TorchGeo 0.10's GriddedPatchSampler over their union
    queries = list(GridGeoSampler(ds, size=64, stride=50)) + list(GriddedPatchSampler(ds, size=64, stride=50))
    assert len(queries) > 120
    for q in queries:
        got, want = ds[q], tifs[q]
        assert got.keys() == want.keys() == {"image", "bounds", "transform"}
        assert got["image"].dtype == torch.float32 and got["image"].shape == (3, 64, 64)
        assert np.array_equal(got["image"].numpy(), _expected(world, q).astype(np.float32)), q
        assert torch.equal(got["image"], want["image"]), q
        assert torch.equal(got["bounds"], want["bounds"]) and torch.equal(got["transform"], want["transform"])


@pytest.mark.parametrize("nodata", [float("nan"), -9999.0, 0.5, -1])
def test_pixels_no_file_covers_hold_the_nodata_asked_for_in_the_samples_dtype(world, nodata):
    """The files are uint16 and the samples float32: nodata is the samples' value, not the files' (NaN, a
    negative or a fraction were cast into uint16 first: 0, 55537, 0, an error)."""
    ds = RumiDataset(world["catalog"], nodata=nodata)
    q = (slice(X0 - 640, X0 + 640), slice(Y0 - 640, Y0 + 640))  # half of it west and north of every scene
    got = ds[q]["image"].numpy()
    want = _expected(world, q).astype(np.float32)
    y0, _, x0, _ = _window(q)
    outside = np.ones(want.shape[-2:], bool)
    outside[max(0, -y0):, max(0, -x0):] = False
    want[:, outside] = nodata
    assert np.array_equal(got, want, equal_nan=True)
    if float(nodata).is_integer():  # an integer sample dtype holds it
        assert RumiDataset(world["catalog"], dtype=torch.int16, nodata=nodata).nodata == nodata
    else:
        with pytest.raises(ValueError, match="cannot be held by the samples"):
            RumiDataset(world["catalog"], dtype=torch.int16, nodata=nodata)


def _query(bounds):
    """The (x, y) slices of a sample's 9-value bounds tensor."""
    return slice(float(bounds[0]), float(bounds[1])), slice(float(bounds[3]), float(bounds[4]))


def test_random_samplers_and_a_dataloader_read_batches_in_one_call(world, monkeypatch):
    ds = RumiDataset(world["catalog"], bands=[2, 0])
    calls = []
    real = rumimm.read_batch
    monkeypatch.setattr(rumimm, "read_batch", lambda *a, **k: calls.append(len(a[0])) or real(*a, **k))
    torch.manual_seed(0)
    loader = DataLoader(ds, sampler=RandomGeoSampler(ds, size=48, length=40), batch_size=8, collate_fn=stack_samples)
    batches = list(loader)
    assert len(batches) == 5
    for batch in batches:
        assert batch["image"].shape == (8, 2, 48, 48)
        for image, bounds in zip(batch["image"], batch["bounds"], strict=True):
            assert np.array_equal(image.numpy(), _expected(world, _query(bounds))[[2, 0]].astype(np.float32))
    # a batch is one read per window size, never one per sample (chips inside one scene: one size)
    assert len(calls) < 40 and max(calls) > 1
    calls.clear()
    loader = DataLoader(ds, sampler=RandomPatchSampler(ds, size=48, length=24, generator=0), batch_size=8,
                        collate_fn=stack_samples)
    for batch in loader:
        for image, bounds in zip(batch["image"], batch["bounds"], strict=True):
            assert np.array_equal(image.numpy(), _expected(world, _query(bounds))[[2, 0]].astype(np.float32))
    assert len(calls) < 24
    torch.manual_seed(1)
    for roi in (None, shapely.box(*ds.index.geometry.iloc[4].bounds)):  # scene 4 overlaps no other scene
        calls.clear()
        batch_sampler = RandomBatchGeoSampler(ds, size=32, batch_size=6, length=24, roi=roi)
        for batch in DataLoader(ds, batch_sampler=batch_sampler, collate_fn=stack_samples):
            assert batch["image"].shape == (6, 2, 32, 32)
            for image, bounds in zip(batch["image"], batch["bounds"], strict=True):
                assert np.array_equal(image.numpy(), _expected(world, _query(bounds))[[2, 0]].astype(np.float32))
        assert sum(calls) >= 24 and len(calls) < 24
    assert calls == [6, 6, 6, 6]  # a batch inside one scene that overlaps no other: one call each


def test_dataloader_workers_reopen_files_with_their_blobs(world):
    ds = RumiDataset(world["catalog"])
    queries = list(GridGeoSampler(ds, size=40, stride=97))[:12]
    want = torch.stack([ds[q]["image"] for q in queries])  # the parent has files open before forking
    loader = DataLoader(ds, sampler=queries, batch_size=4, num_workers=2, multiprocessing_context="fork",
                        collate_fn=stack_samples)
    assert torch.equal(torch.cat([b["image"] for b in loader]), want)
    # what a spawn worker gets: the dataset pickled without its open files (spawning costs ~20 s of imports here)
    clone = pickle.loads(pickle.dumps(ds))
    assert len(clone._images) == 0 and torch.equal(torch.stack([clone[q]["image"] for q in queries]), want)


def test_rumi_stack_samples_returns_a_batch_without_copying_it_and_equals_torchgeos(world):
    ds = RumiDataset(world["catalog"], bands=[2, 0])
    torch.manual_seed(4)
    queries = list(RandomGeoSampler(ds, size=48, length=8))
    samples = ds.__getitems__(queries)
    want = stack_samples(ds.__getitems__(queries))  # TorchGeo's: a fresh stacked copy
    got = rumi_stack_samples(samples)
    assert got.keys() == want.keys()
    for key in want:
        assert torch.equal(got[key], want[key]) and got[key].dtype == want[key].dtype
    # the images were views of one batch: the batch is that memory, no copy was made
    assert got["image"].data_ptr() == samples[0]["image"].data_ptr()
    assert got["image"].shape == (8, 2, 48, 48) and got["image"].is_contiguous()
    # anything else is stacked: reordered, repeated, strided or lone samples, and other keys' lists
    for picked in ([samples[1], samples[0]], [samples[0], samples[0]], [samples[0], samples[2]]):
        batch = rumi_stack_samples(picked)
        assert batch["image"].data_ptr() != samples[0]["image"].data_ptr()
        assert torch.equal(batch["image"], torch.stack([s["image"] for s in picked]))
    strided = [{"image": s["image"][:, ::2]} for s in samples[:2]]
    assert torch.equal(rumi_stack_samples(strided)["image"], torch.stack([s["image"] for s in strided]))
    assert rumi_stack_samples([{"image": samples[0]["image"], "name": "a"}])["name"] == ["a"]
    # a single sample read alone is a view of its own one-sample batch
    one = ds[queries[0]]
    assert torch.equal(rumi_stack_samples([one])["image"][0], want["image"][0])
    masks = RumiDataset(world["catalog"], bands=[1], is_image=False)
    mask_samples = masks.__getitems__(queries)
    batch = rumi_stack_samples(mask_samples)
    assert batch["mask"].shape == (8, 48, 48) and batch["mask"].data_ptr() == mask_samples[0]["mask"].data_ptr()
    assert torch.equal(batch["mask"], stack_samples(mask_samples)["mask"])


@pytest.mark.parametrize("rumi_dataset", [True, False])
def test_rumi_stack_samples_in_workers_gives_torchgeos_batches(world, rumi_dataset):
    """Inside a worker the rumi batch is not copied, another dataset's is stacked straight into
    shared memory; the training process gets the same batches as TorchGeo's stack_samples in
    process, for the rumi dataset and for any other."""
    ds = RumiDataset(world["catalog"]) if rumi_dataset else Labels(paths=str(world["root"] / "labels"))
    torch.manual_seed(3)
    queries = list(RandomGeoSampler(ds, size=40, length=24))
    want = [stack_samples([ds[q] for q in queries[i:i + 4]]) for i in range(0, 24, 4)]
    key = "image" if rumi_dataset else "mask"

    def collate(samples):  # runs in the worker: where were the samples read, is the batch in shared memory, a copy?
        batch = rumi_stack_samples(samples)
        return batch, (torch.utils.data.get_worker_info().id, samples[0][key].is_shared(), batch[key].is_shared(),
                       batch[key].data_ptr() == samples[0][key].data_ptr())

    loader = DataLoader(ds, sampler=queries, batch_size=4, num_workers=2, multiprocessing_context="fork",
                        collate_fn=collate)
    got, flags = zip(*loader, strict=True)
    assert len(got) == 6
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for key_ in w:
            assert torch.equal(g[key_], w[key_]) if isinstance(w[key_], torch.Tensor) else g[key_] == w[key_]
    for n, (worker, read_shared, sent_shared, same) in enumerate(flags):
        if rumi_dataset:
            # sent as read; a worker's first batch is read in ordinary memory (torch moves it to shared memory
            # to send it), the next ones straight into shared memory once the worker has seen its collate keep them
            assert same and read_shared == sent_shared == (n >= 2), (n, worker)
        else:
            assert not same and not read_shared and sent_shared


def test_rumi_batches_stay_in_ordinary_memory_for_torchgeos_collate(world):
    """With a collate that copies (TorchGeo's), a worker never reads into shared memory, which
    would cost slower page faults for a batch copied anyway."""
    ds = RumiDataset(world["catalog"])
    torch.manual_seed(3)
    queries = list(RandomGeoSampler(ds, size=40, length=24))

    def collate(samples):
        return stack_samples(samples), samples[0]["image"].is_shared()

    loader = DataLoader(ds, sampler=queries, batch_size=4, num_workers=2, multiprocessing_context="fork",
                        collate_fn=collate)
    got = list(loader)
    assert len(got) == 6 and not any(shared for _, shared in got)
    want = [stack_samples([ds[q] for q in queries[i:i + 4]]) for i in range(0, 24, 4)]
    for (g, _), w in zip(got, want, strict=True):
        assert torch.equal(g["image"], w["image"]) and torch.equal(g["bounds"], w["bounds"])


def test_intersection_with_a_raster_dataset_of_masks(world):
    ds = RumiDataset(world["catalog"])
    both = ds & Labels(paths=str(world["root"] / "labels"))
    torch.manual_seed(3)
    for batch in DataLoader(both, sampler=RandomGeoSampler(both, size=40, length=12), batch_size=4,
                            collate_fn=stack_samples):
        assert batch["image"].shape == (4, 3, 40, 40) and batch["mask"].shape == (4, 40, 40)
        assert batch["mask"].dtype == torch.long
        for image, mask, bounds in zip(batch["image"], batch["mask"], batch["bounds"], strict=True):
            q = _query(bounds)
            assert np.array_equal(image.numpy(), _expected(world, q).astype(np.float32))
            assert np.array_equal(mask.numpy(), _expected(world, q, "labels").astype(np.int64))


def test_a_rumi_mask_dataset_and_a_coarser_resolution(world):
    table = world["table"]
    masks = RumiDataset(table, bands=[1], is_image=False)
    q = (slice(X0 + 200, X0 + 520), slice(Y0 - 600, Y0 - 280))
    sample = masks[q]
    assert sample["mask"].shape == (32, 32) and sample["mask"].dtype == torch.long
    assert np.array_equal(sample["mask"].numpy(), _expected(world, q)[1].astype(np.int64))
    coarse = RumiDataset(table, res=20.0)  # nearest neighbour: output pixel centres fall on odd source pixels
    got = coarse[q]["image"].numpy()
    assert got.shape == (3, 16, 16)
    assert np.array_equal(got, _expected(world, q)[:, 1::2, 1::2].astype(np.float32))
    assert torch.equal(coarse[q]["transform"], torch.tensor([20.0, 0, X0 + 200, 0, -20.0, Y0 - 280, 0, 0, 1]))


def test_time_intervals_select_scenes(world):
    table = world["table"]
    start = pd.to_datetime(["2024-01-01", "2024-02-01", "2024-03-01", "2024-04-01", "2024-05-01"])
    dated = table.append_column("start_datetime", pa.array(start.to_pydatetime(), pa.timestamp("us"))) \
                 .append_column("end_datetime", pa.array((start + pd.Timedelta(days=10)).to_pydatetime(),
                                                         pa.timestamp("us")))
    ds = RumiDataset(dated)
    assert list(ds.index.index.left) == list(start)
    # scenes 0 and 1 overlap in columns 230..260; in February only scene 1 is there
    feb = slice(pd.Timestamp("2024-02-03"), pd.Timestamp("2024-02-04"))
    q = (slice(X0 + 2300, X0 + 2600), slice(Y0 - 300, Y0), feb)
    with rumimm.open(world["paths"][1], header=world["blobs"][1]) as img:
        want = img[:, 0:30, 0:30].astype(np.float32)
    assert np.array_equal(ds[q]["image"].numpy(), want)
    with pytest.raises(IndexError, match="not found"):
        ds[q[0], q[1], slice(pd.Timestamp("2023-01-01"), pd.Timestamp("2023-02-01"))]
    same = RumiDataset(table, time=[(s, s + pd.Timedelta(days=10)) for s in start])
    assert same.index.index.equals(ds.index.index)
    # one instant per file (a datetime column): a sampler's query [t:t] finds it
    instant = RumiDataset(table.append_column("datetime", pa.array(start.to_pydatetime(), pa.timestamp("us"))))
    assert list(instant.index.index.left) == list(instant.index.index.right) == list(start)
    torch.manual_seed(4)
    for q in RandomGeoSampler(instant, size=20, length=10):
        i = list(start).index(q[2].start)  # the scene taken at that instant, alone
        assert q[2].stop == q[2].start
        (r, c), (h, w) = SCENES[i]
        alone = {"mosaic": np.zeros((3, *MOSAIC), np.uint16)}
        alone["mosaic"][:, r:r + h, c:c + w] = world["arrays"][i]
        assert np.array_equal(instant[q]["image"].numpy(), _expected(alone, q).astype(np.float32))


def test_bad_catalogs_and_queries_are_refused_clearly(world, tmp_path):
    table = world["table"]
    other = rumimm.write(tmp_path / "wgs.rumi", np.ones((3, 8, 8), np.uint16), tile=8,
                         transform=(0.1, 0, 14, 0, -0.1, 45), crs=4326)
    plain = rumimm.write(tmp_path / "plain.rumi", np.ones((3, 8, 8), np.uint16), tile=8)
    mixed = rumimm.catalog(world["paths"] + [str(tmp_path / "wgs.rumi")], blobs=world["blobs"] + [other])
    with pytest.raises(RumiError, match=r"2 CRSs \(EPSG:4326, EPSG:32633\).*where=pyarrow.compute.field"):
        RumiDataset(mixed)
    import pyarrow.compute as pc
    assert len(RumiDataset(mixed, where=pc.field("epsg") == 32633)) == len(SCENES)
    with pytest.raises(RumiError, match=r"plain.rumi: no CRS in catalog row 0"):
        RumiDataset(rumimm.catalog([str(tmp_path / "plain.rumi")], blobs=[plain]))
    with pytest.raises(RumiError, match="no rows"):
        RumiDataset(table, where=(0, 0, 1, 1))
    ds = RumiDataset(table)
    with pytest.raises(IndexError, match="not found in dataset"):
        ds[slice(0, 640), slice(0, 640)]
    with pytest.raises(RumiError, match="cannot warp them to EPSG:4326; put it first"):
        ds.crs = pyproj.CRS.from_epsg(4326)
    with pytest.raises(ValueError, match="bands must be 0-based band numbers below 3"):
        RumiDataset(table, bands=[3])


def test_the_loader_comparison_times_every_row_on_the_same_samples(tmp_path):
    """compare/loaders.py --torchgeo: each row's first batch equals the GeoTIFF dataset's, in
    process and with workers that start and stop around each timed epoch."""
    from asv_benchmarks.compare import loaders

    files = loaders.write_torchgeo_files(str(tmp_path), 1, 2 * loaders.CHIP, codecs=["fast"])
    engines = ["rumimm.torchgeo, tile 128 cell, codec=fast" + loaders.RUMI_COLLATE, "rumimm.torchgeo, tile 512",
               loaders.TG_ENGINES[-1]]
    spec = dict(files, batches=loaders.TG_WARMUP + 1, epochs=2, seed=0, engines=engines)
    for mode in loaders.TG_MODES:
        got = loaders.run_torchgeo(mode, "RandomGeoSampler", spec)
        assert set(got) == set(engines)
        for row in got.values():
            assert row["exact"] and len(row["seconds"]) == 2 and row["samples"] == spec["batches"] * loaders.BATCH


def test_stac_items_give_the_dataset_the_catalog_gives(world):
    import datetime as dt

    from rumimm import stac

    items = stac.to_items(world["table"], datetime=dt.datetime(2024, 5, 1, tzinfo=dt.UTC))
    ds = RumiDataset(items)
    from_table = RumiDataset(world["table"]).index
    assert ds.index.geometry.reset_index(drop=True).equals(from_table.geometry.reset_index(drop=True))
    assert ds.index.filepath.tolist() == from_table.filepath.tolist()
    stamp = pd.Timestamp("2024-05-01")  # the Items' datetime; the catalog has none (all of time)
    assert all(iv.left == iv.right == stamp for iv in ds.index.index)
    q = (slice(X0 + 100, X0 + 740), slice(Y0 - 1000, Y0 - 360))
    assert np.array_equal(ds[q]["image"].numpy(), _expected(world, q).astype(np.float32))
