"""rumimm.to_dask and Dask-array writes, on the local schedulers and a two-process LocalCluster."""

from __future__ import annotations

import os
import pickle

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import random_samples, reference_file, same_bits

import rumimm
from rumimm.format import dtypes
from rumimm.synthetic import eo_scene

UTM = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A 3-band uint16 scene in tile frames and the same in cell frames, with blobs."""
    folder = tmp_path_factory.mktemp("dask")
    a = eo_scene(3, 90, 110, "uint16", seed=7)
    files = {}
    for unit in ("tile", "cell"):
        path = folder / f"{unit}.rumi"
        files[unit] = (path, rumimm.write(path, a, tile=(16, 32), unit=unit, transform=UTM, crs=32633, threads=1))
    return files, a


# -- the graph -------------------------------------------------------------------------
@pytest.mark.slow
def test_default_chunks_are_the_frame_grid(scene):
    files, a = scene
    tile = rumimm.to_dask(*files["tile"])
    cell = rumimm.to_dask(*files["cell"])
    spans = ((16,) * 5 + (10,), (32, 32, 32, 14))
    assert tile.chunks == ((1, 1, 1), *spans) and cell.chunks == ((3,), *spans)
    assert tile.dtype == cell.dtype == a.dtype
    for arr in (tile, cell):
        assert same_bits(arr.compute(scheduler="sync"), a)
        assert same_bits(arr[1:, 20:70, 33:99].compute(), a[1:, 20:70, 33:99])
        assert int(arr.sum(dtype="u8").compute()) == int(a.sum(dtype="u8"))


@pytest.mark.parametrize(("spec_name", "name", "chunksize"), [
    ("0.1", "u16_cell_b3", (3, 32, 32)),  # b h w cells
    ("0.1", "u16_tile_b4", (1, 64, 64)),
    ("0.2", "cube_u4", (3, 2, 8, 8)),  # t b h w cells
    ("0.2", "cube_u0", (1, 1, 8, 8)),
])
def test_reference_files_of_either_spec_chunk_on_their_frame_grid(spec_name, name, chunksize):
    ref = reference_file(spec_name, name)
    arr = rumimm.to_dask(ref.path)
    assert arr.chunksize == chunksize
    np.testing.assert_array_equal(arr.compute(), ref.array)


@pytest.mark.parametrize("chunks", ["auto", (3, 50, 64), {0: 2, 1: 45, 2: -1}])
def test_other_chunks(scene, chunks):
    files, a = scene
    arr = rumimm.to_dask(files["tile"][0], header=files["tile"][1], chunks=chunks)
    assert same_bits(arr.compute(), a)
    assert np.allclose(arr.mean(axis=(1, 2)).compute(), a.mean(axis=(1, 2)))


@pytest.mark.slow
def test_every_sample_encoding_computes_like_rumimm_reads(tmp_path, rng):
    for enc in dtypes.ENCODINGS.values():
        a = random_samples(enc, 2 * 13 * 17, rng, 7).reshape(2, 13, 17)
        path = tmp_path / f"{enc.name}.rumi"
        blob = rumimm.write(path, a, tile=8, unit="cell" if enc.itemsize > 2 else "tile", threads=1)
        arr = rumimm.to_dask(path, header=blob)
        with rumimm.open(path, header=blob) as img:
            assert arr.dtype == img.dtype, enc.name
            assert same_bits(arr.compute(scheduler="sync"), img[:]), enc.name
            assert same_bits(arr[1, 3:12, ::3].compute(), img[1, 3:12, ::3]), enc.name


def test_sources_an_image_a_blob_file_or_no_blob(scene, tmp_path):
    files, a = scene
    path, blob = files["cell"]
    (tmp_path / "b.blob").write_bytes(blob)
    with rumimm.open(path, header=blob) as img:
        from_image = rumimm.to_dask(img)
    for arr in (from_image, rumimm.to_dask(path, header=tmp_path / "b.blob"), rumimm.to_dask(str(path))):
        assert same_bits(arr.compute(), a)
    with pytest.raises(TypeError, match=r"path or a rumimm.Image"):
        rumimm.to_dask(a)


@pytest.mark.parametrize("blob_file", ["missing.blob", "."], ids=["missing", "a-directory"])
def test_an_unreadable_blob_file_is_refused_as_rumimm_open_refuses_it(scene, tmp_path, blob_file):
    path = scene[0]["tile"][0]
    with pytest.raises(rumimm.BlobError) as by_open:
        rumimm.open(path, header=tmp_path / blob_file)
    with pytest.raises(rumimm.BlobError) as by_dask:
        rumimm.to_dask(path, header=tmp_path / blob_file)
    assert str(by_dask.value) == str(by_open.value) and str(tmp_path / blob_file) in str(by_dask.value)
    with pytest.raises(TypeError,
                       match=r"^header must be the blob bytes, a Header or the path of a blob file, got int$"):
        rumimm.to_dask(path, header=12)


@pytest.mark.slow
def test_to_dask_needs_no_xarray(scene, tmp_path):
    import subprocess
    import sys

    path, blob = scene[0]["tile"]
    (tmp_path / "b.blob").write_bytes(blob)
    code = ("import sys; sys.modules['xarray'] = None; import rumimm; "
            f"print(int(rumimm.to_dask({str(path)!r}, header={str(tmp_path / 'b.blob')!r}).sum(dtype='u8').compute()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == int(scene[1].sum(dtype="u8"))


@pytest.mark.slow
def test_the_graph_carries_the_path_one_blob_and_windows(tmp_path):
    # 2 x 40 x 40 tiles = 3200 frames: the blob is a few kB, a chunk's task a few dozen bytes
    a = eo_scene(2, 320, 320, "uint16", seed=2)
    path = tmp_path / "many.rumi"
    blob = rumimm.write(path, a, tile=8, threads=1)
    arr = rumimm.to_dask(path, header=blob)
    graph = dict(arr.__dask_graph__())
    assert arr.npartitions == len(graph) == 3200
    size = len(pickle.dumps(graph))
    per_chunk = (size - len(blob)) / arr.npartitions
    assert len(blob) > 2000 and per_chunk < 120, (len(blob), per_chunk)
    assert pickle.dumps(graph).count(blob) == 1
    assert same_bits(arr[:, 100:140, 7:300].compute(), a[:, 100:140, 7:300])


def test_reads_fuse_with_the_per_chunk_step_that_consumes_them(scene):
    files, a = scene
    arr = rumimm.to_dask(*files["tile"])
    (total,) = dask.optimize(arr.sum(dtype="u8"))
    keys = list(dict(total.__dask_graph__()))
    assert not [k for k in keys if isinstance(k, tuple) and k[0] == arr.name]  # no read left as its own task
    assert len(keys) < 2 * arr.npartitions
    assert int(total.compute()) == int(a.sum(dtype="u8"))


def test_two_calls_on_one_file_share_keys_and_other_chunks_do_not(scene):
    files, _ = scene
    assert rumimm.to_dask(*files["tile"]).name == rumimm.to_dask(*files["tile"]).name
    assert rumimm.to_dask(*files["tile"]).name != rumimm.to_dask(*files["tile"], chunks=(1, 45, 55)).name


# -- writing ---------------------------------------------------------------------------------
def test_writing_a_dask_array_computes_one_row_of_tiles_at_a_time(tmp_path):
    a = eo_scene(3, 50, 50, "int16", seed=1)
    computed = []

    def tag(block, block_info=None):
        computed.append(block_info[0]["array-location"][1][0])  # the chunk's first image row
        return block

    src = da.from_array(a, chunks=(3, 8, 25)).map_blocks(tag, dtype=a.dtype)
    calls = []

    def recording_get(dsk, keys, **kwargs):
        before = len(computed)
        out = dask.get(dsk, keys, **kwargs)
        calls.append(sorted(set(computed[before:])))
        return out

    with dask.config.set(scheduler=recording_get):
        blob = rumimm.write(tmp_path / "w.rumi", src, tile=16, threads=1)
    # grid rows of 16 image rows: each compute covered exactly the two 8-row chunks of one grid row
    assert calls == [[0, 8], [16, 24], [32, 40], [48]]
    with rumimm.open(tmp_path / "w.rumi", header=blob) as img:
        assert same_bits(img[:], a)


def test_a_dask_array_read_from_rumi_writes_back_through_to_rumi(scene, tmp_path):
    files, a = scene
    arr = rumimm.to_dask(*files["cell"])
    rumimm.to_rumi(arr[:, :, ::-1] + np.uint16(1), tmp_path / "o.rumi", tile=32, threads=1)
    with rumimm.open(tmp_path / "o.rumi") as img:
        assert same_bits(img[:], a[:, :, ::-1] + np.uint16(1))


# -- a two-process LocalCluster (one start-up for the module) -----------------------------------
_COMPILES = []


def _count_numba_compiles():
    """Run on a worker: count every entry into numba's compiler (a compile or a cache load)."""
    from numba.core import event

    class Counter(event.Listener):
        def on_start(self, ev):
            _COMPILES.append(ev.kind)

        def on_end(self, ev):
            pass

    event.register("numba:compiler_lock", Counter())


def _compiles():
    return len(_COMPILES)


def _kernels_loaded():
    """Run on a worker: wait for the kernels its first reads started loading on a thread (``reader.jit``)."""
    from rumimm.reader import jit

    jit.wait()
    return jit.state()


def _handles(path):
    """Run on a worker: (descriptors open on ``path``, mappings of it).

    Only ``path``'s: the worker's own descriptors (sockets, pipes) come and go with Dask's
    version and with which tests ran before."""
    fds = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds += os.readlink(f"/proc/self/fd/{fd}") == str(path)
        except OSError:  # closed since listed
            pass
    with open("/proc/self/maps") as fh:
        maps = sum(str(path) in line for line in fh)
    return fds, maps


@pytest.fixture(scope="module")
def client():
    """A two-process LocalCluster; starting it takes ~15 s here, so every test using it is marked slow."""
    from dask.distributed import Client, LocalCluster

    with LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                      silence_logs=40) as cluster, Client(cluster) as c:
        c.run(_count_numba_compiles)
        yield c


@pytest.mark.slow
def test_reductions_on_a_local_cluster_equal_numpy(scene, client):
    files, a = scene
    for unit in ("tile", "cell"):
        arr = rumimm.to_dask(*files[unit])
        assert int(arr.sum(dtype="u8").compute()) == int(a.sum(dtype="u8"))
        win = arr[:, 13:77, 40:101]
        assert np.allclose(win.mean(axis=(1, 2)).compute(), a[:, 13:77, 40:101].mean(axis=(1, 2)))
        assert same_bits(arr.max(axis=0).compute(), a.max(axis=0))
    assert len(client.scheduler_info()["workers"]) == 2


@pytest.mark.slow
def test_workers_compile_once_and_keep_no_handles(scene, client):
    files, a = scene
    path, blob = files["tile"]
    arr = rumimm.to_dask(path, header=blob, chunks=(3, 32, 64))  # 12 frames a chunk: the kernels read it
    assert int(arr.sum(dtype="u8").compute()) == int(a.sum(dtype="u8"))  # warm: starts loading the kernels
    assert set(client.run(_kernels_loaded).values()) == {"ready"}
    before_compiles = client.run(_compiles)
    assert all(n > 0 for n in before_compiles.values())  # the counter sees the first tasks' compiles
    before_handles = client.run(_handles, path)
    for _ in range(3):
        assert int((arr[:, 5:85] * 2).sum(dtype="u8").compute()) == int(a[:, 5:85].sum(dtype="u8")) * 2
    assert client.run(_compiles) == before_compiles  # more tasks, no numba compile or cache load
    after = client.run(_handles, path)
    assert all(maps == 0 for _, maps in after.values())  # every task closed the file it opened
    assert all(fds == 0 for fds, _ in after.values()) and after == before_handles


@pytest.mark.slow
def test_xarray_chunks_compute_on_the_cluster(scene, client):
    files, a = scene
    path, blob = files["cell"]
    with xr.open_dataset(path, engine="rumimm", header=blob, chunks={}) as ds:
        band_sums = ds["band_data"].sum(["y", "x"], dtype="u8").compute()
    assert band_sums.values.tolist() == a.sum(axis=(1, 2), dtype="u8").tolist()


@pytest.mark.slow
def test_a_dask_array_writes_through_the_cluster(scene, client, tmp_path):
    files, a = scene
    arr = rumimm.to_dask(*files["tile"])
    blob = rumimm.write(tmp_path / "c.rumi", (arr // 2).astype("uint16"), tile=32, threads=1)
    with rumimm.open(tmp_path / "c.rumi", header=blob) as img:
        assert same_bits(img[:], a // 2)
