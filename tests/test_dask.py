"""rumimm.to_dask and Dask-array writes, on the local schedulers and a two-process LocalCluster."""

from __future__ import annotations

import os
import pickle
import threading
import warnings

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr
from conftest import exit_code_in_fork, random_samples, reference_file, same_bits

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
def test_auto_chunks_are_whole_frames_sized_by_dask_chunk_size(scene):
    files, a = scene
    spans = ((16,) * 5 + (10,), (32, 32, 32, 14))
    for unit in ("tile", "cell"):
        assert rumimm.to_dask(*files[unit]).chunks == ((3,), (90,), (110,))  # 59 kB: one chunk
        with dask.config.set({"array.chunk-size": "3KiB"}):  # 3 x 16 x 32 x 2 bytes: one frame position
            arr = rumimm.to_dask(*files[unit])
        assert arr.chunks == ((3,), *spans) and arr.dtype == a.dtype
        assert same_bits(arr.compute(scheduler="sync"), a)
        assert same_bits(arr[1:, 20:70, 33:99].compute(), a[1:, 20:70, 33:99])
        assert int(arr.sum(dtype="u8").compute()) == int(a.sum(dtype="u8"))
    with dask.config.set({"array.chunk-size": "1KiB"}):  # less than a frame position: the frame grid
        assert rumimm.to_dask(*files["tile"]).chunks == ((1, 1, 1), *spans)
        assert rumimm.to_dask(*files["cell"]).chunks == ((3,), *spans)


@pytest.mark.parametrize(("spec_name", "name", "chunksize"), [
    ("0.1", "u16_cell_b3", (3, 32, 32)),  # b h w cells
    ("0.1", "u16_tile_b4", (1, 64, 64)),
    ("0.2", "cube_u4", (3, 2, 8, 8)),  # t b h w cells
    ("0.2", "cube_u0", (1, 1, 8, 8)),
])
def test_reference_files_of_either_spec_chunk_on_their_frame_grid(spec_name, name, chunksize):
    ref = reference_file(spec_name, name)
    with dask.config.set({"array.chunk-size": "1B"}):  # less than a frame: the frame grid
        arr = rumimm.to_dask(ref.path)
    assert arr.chunksize == chunksize
    np.testing.assert_array_equal(arr.compute(), ref.array)


def test_the_default_graph_of_a_512_mib_file_is_a_few_tasks():
    from rumimm.integrations.dask_array import auto_chunks

    # the file: 4 x 8192 x 8192 uint16 in 512-pixel tiles, Dask's default 128 MiB chunks
    assert auto_chunks((4, 8192, 8192), "uint16", (1, 512, 512), "128MiB") == (4, 4096, 4096)
    assert auto_chunks((4, 8192, 8192), "uint16", (1, 512, 512), "32MiB") == (4, 2048, 2048)
    # a narrow strip: the columns left over become rows; a 13-band float64 cube keeps its bands
    assert auto_chunks((1, 100_000, 600), "uint8", (1, 256, 256), "16MiB") == (1, 21_760, 600)
    assert auto_chunks((13, 10_980, 10_980), "float64", (13, 512, 512), "128MiB") == (13, 1024, 1024)
    # a frame larger than the budget is still one chunk
    assert auto_chunks((2, 4000, 4000), "float64", (2, 1024, 1024), "1MiB") == (2, 1024, 1024)
    # the default budget: Dask's array.chunk-size up to 32 MiB, or rumimm.chunk-size
    shape, frame = (4, 8192, 8192), (1, 512, 512)
    assert auto_chunks(shape, "uint16", frame) == (4, 2048, 2048)  # 16 tasks for 512 MiB
    with dask.config.set({"array.chunk-size": "8MiB"}):
        assert auto_chunks(shape, "uint16", frame) == (4, 1024, 1024)
    with dask.config.set({"rumimm.chunk-size": "128MiB"}):
        assert auto_chunks(shape, "uint16", frame) == (4, 4096, 4096)


def test_a_512_mib_graph_in_miniature_has_its_task_count(tmp_path):
    # the same ratios at 1/64 of the size: 4 x 1024 x 1024 in 64-pixel tiles, 2 MiB chunks
    a = eo_scene(4, 1024, 1024, "uint16", seed=3)
    path = tmp_path / "big.rumi"
    blob = rumimm.write(path, a, tile=64, threads=1)
    with dask.config.set({"array.chunk-size": "2MiB"}):
        arr = rumimm.to_dask(path, header=blob)
    assert arr.chunks == ((4,), (512, 512), (512, 512))
    assert len(dict(arr.__dask_graph__())) == arr.npartitions == 4  # 1,024 frames, 4 read tasks
    (total,) = dask.optimize(arr.sum(dtype="u8"))
    assert len(dict(total.__dask_graph__())) <= 8
    assert int(total.compute()) == int(a.sum(dtype="u8"))


@pytest.mark.parametrize("chunks", ["auto", None, (3, 48, 64), {0: 1, 1: 32, 2: -1}])
def test_chunks_of_whole_frames_read_without_a_warning(scene, chunks):
    files, a = scene
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        arr = rumimm.to_dask(files["tile"][0], header=files["tile"][1], chunks=chunks)
    assert same_bits(arr.compute(), a)
    assert np.allclose(arr.mean(axis=(1, 2)).compute(), a.mean(axis=(1, 2)))


@pytest.mark.parametrize(("chunks", "axes"), [((3, 50, 64), "1"), ({0: 2, 1: 45, 2: -1}, "1"),
                                              ((1, 16, 40), "2"), (((1, 2), (45, 45), (55, 55)), "1, 2")])
def test_chunks_that_split_frames_are_honoured_with_a_warning(scene, chunks, axes):
    files, a = scene
    with pytest.warns(rumimm.RumiWarning, match=rf"tile.rumi: chunks .* split frames of shape \(1, 16, 32\) "
                                                 rf"along axis {axes}: "):
        arr = rumimm.to_dask(files["tile"][0], header=files["tile"][1], chunks=chunks)
    assert same_bits(arr.compute(), a)
    with pytest.warns(rumimm.RumiWarning, match=r"split frames of shape \(3, 16, 32\) along axis 0"):
        rumimm.to_dask(*files["cell"], chunks=(1, 32, 32))  # a cell frame holds every band


@pytest.mark.parametrize(("chunks", "why"), [((3, 100), "same length"), (((1, 1), (90,), (110,)), "add up"),
                                             ((0, 16, 32), "division"), ("nonsense", "byte unit"),
                                             (((3,), (90,), (100,)), "add up")])
def test_chunks_that_do_not_fit_the_array_are_refused(scene, chunks, why):
    path, blob = scene[0]["tile"]
    with pytest.raises(rumimm.RumiError, match=rf"tile.rumi: chunks .* do not fit the array of shape "
                                               rf"\(3, 90, 110\): .*{why}"):
        rumimm.to_dask(path, header=blob, chunks=chunks)


def _truncated_after_first_row(tmp_path, a, tile):
    """A file whose frames past the first row of tiles are overwritten with zeros, and its blob: reading them fails."""
    path = tmp_path / "cut.rumi"
    blob = rumimm.write(path, a, tile=tile, threads=1)
    header = rumimm.parse_header(blob)
    first = int(header.frame_offsets[a.shape[0] * -(-a.shape[2] // tile)])  # the second row's first frame
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(first)
        fh.write(bytes(size - first))
    return path, blob


def test_slices_read_only_the_frames_they_touch(tmp_path):
    a = eo_scene(2, 128, 96, "uint16", seed=5)
    path, blob = _truncated_after_first_row(tmp_path, a, 32)
    arr = rumimm.to_dask(path, header=blob)  # one chunk holds the whole image
    assert arr.npartitions == 1
    with pytest.raises(rumimm.RumiError):
        arr.compute()  # the frames past the first row are gone
    window = arr[:, 3:30, 10:90]
    assert window.npartitions == 1 and len(dict(window.__dask_graph__())) == 1
    assert same_bits(window.compute(), a[:, 3:30, 10:90])
    assert same_bits(arr[1, :32, -7].compute(), a[1, :32, -7])
    assert same_bits(arr[-1:, 5][:, 10:20].compute(), a[-1:, 5][:, 10:20])
    assert int(arr[:, :32].sum(dtype="u8").compute()) == int(a[:, :32].sum(dtype="u8"))
    assert same_bits(arr[:, :32].map_blocks(np.flip, dtype=a.dtype).compute(), np.flip(a[:, :32]))
    da_ = xr.DataArray(arr, dims=("band", "y", "x"))
    assert same_bits(da_.isel(y=slice(0, 32), x=slice(40, 60)).values, a[:, :32, 40:60])
    assert same_bits(da_.isel(band=0, y=31).values, a[0, 31])
    assert same_bits(arr[:, :32][:, ::2].compute(), a[:, :32:2])  # a step: Dask's slicing of the window's read


def test_xarray_isel_of_a_chunked_dataset_reads_the_chunks_it_touches(tmp_path):
    a = eo_scene(2, 128, 96, "uint16", seed=5)
    path, blob = _truncated_after_first_row(tmp_path, a, 32)
    with dask.config.set({"array.chunk-size": "4KiB"}), \
            xr.open_dataset(path, engine="rumimm", header=blob, chunks={}) as ds:
        band_data = ds["band_data"]
        assert band_data.chunks == ((2,), (32,) * 4, (32,) * 3)
        assert same_bits(band_data.isel(y=slice(2, 30)).values, a[:, 2:30])
        assert same_bits(band_data.sel(x=band_data.x[40:90]).isel(y=7).values, a[:, 7, 40:90])


def _only_frames_under(path, a, tile, ys, xs):
    """A georeferenced file of ``a`` whose frames outside the window ``ys``, ``xs`` are wiped (their
    magic kept, which opening checks), and its blob: decoding any frame the window does not touch fails."""
    blob = rumimm.write(path, a, tile=tile, transform=UTM, crs=32633, threads=1)
    header = rumimm.parse_header(blob)
    bands, across = a.shape[0], -(-a.shape[2] // tile)
    under = {(r * across + c) * bands + b for r in range(ys.start // tile, -(-ys.stop // tile))
             for c in range(xs.start // tile, -(-xs.stop // tile)) for b in range(bands)}
    with open(path, "r+b") as fh:
        for k in sorted(set(range(header.n_frames)) - under):
            fh.seek(int(header.frame_offsets[k]) + 4)
            fh.write(bytes(int(header.frame_byte_counts[k]) - 4))
    with rumimm.open(path, header=blob) as img:
        assert same_bits(img[:, ys, xs], a[:, ys, xs])
        with pytest.raises(rumimm.RumiError, match="corrupt"):
            img[:, :tile, :tile]  # a frame outside the window: wiped
    return blob


#: A 64 x 64 window of a 2 x 512 x 512 file of 32 x 32 frames: 3 x 3 frame positions of 256.
WINDOW = (slice(200, 264), slice(100, 164))


def _window_reads(ds, a):
    """isel and sel of WINDOW on a Dataset opened with ``chunks={}`` (one chunk: the whole file)."""
    ys, xs = WINDOW
    band_data = ds["band_data"]
    assert band_data.chunks == ((2,), (512,), (512,))  # the window is a small part of its chunk
    assert same_bits(band_data.isel(y=ys, x=xs).values, a[:, ys, xs])
    assert same_bits(band_data.isel(band=1, y=ys, x=xs).values, a[1, ys, xs])
    assert int(band_data.isel(y=ys, x=xs).sum(dtype="u8")) == int(a[:, ys, xs].sum(dtype="u8"))
    assert np.allclose(band_data.isel(y=ys, x=xs).mean(["y", "x"]).values, a[:, ys, xs].mean(axis=(1, 2)))
    x, y = band_data.x.values, band_data.y.values  # pixel centres; y descends, as the labels slice
    by_label = band_data.sel(x=slice(x[xs.start], x[xs.stop - 1]), y=slice(y[ys.start], y[ys.stop - 1]))
    assert same_bits(by_label.values, a[:, ys, xs])
    assert same_bits(ds.isel(y=ys, x=xs).load()["band_data"].values, a[:, ys, xs])
    flipped = band_data.isel(y=ys, x=xs).data.map_blocks(np.flip, dtype=a.dtype)
    assert same_bits(flipped.compute(), np.flip(a[:, ys, xs]))


def test_xarray_isel_and_sel_of_a_window_decode_only_the_frames_under_it(tmp_path):
    # Dask fuses xarray's read of a chunk with the slice of it that follows (dask.array.optimization's
    # slice fusion), so the backend array is asked for the window alone.
    a = eo_scene(2, 512, 512, "uint16", seed=5)
    path = tmp_path / "window.rumi"
    blob = _only_frames_under(path, a, 32, *WINDOW)
    for inline_array in (False, True):
        with xr.open_dataset(path, engine="rumimm", header=blob, chunks={}, inline_array=inline_array) as ds:
            _window_reads(ds, a)
            with pytest.raises(rumimm.RumiError, match="corrupt"):
                ds["band_data"].isel(y=slice(0, 64)).values  # the frames outside are gone indeed


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
    arr = rumimm.to_dask(path, header=blob, chunks=(1, 8, 8))
    graph = dict(arr.__dask_graph__())
    assert arr.npartitions == len(graph) == 3200
    size = len(pickle.dumps(graph))
    per_chunk = (size - len(blob)) / arr.npartitions
    assert len(blob) > 2000 and per_chunk < 120, (len(blob), per_chunk)
    assert pickle.dumps(graph).count(blob) == 1
    assert same_bits(arr[:, 100:140, 7:300].compute(), a[:, 100:140, 7:300])


def test_reads_fuse_with_the_per_chunk_step_that_consumes_them(scene):
    files, a = scene
    arr = rumimm.to_dask(*files["tile"], chunks=(1, 16, 32))
    (total,) = dask.optimize(arr.sum(dtype="u8"))
    keys = list(dict(total.__dask_graph__()))
    assert not [k for k in keys if isinstance(k, tuple) and k[0] == arr.name]  # no read left as its own task
    assert len(keys) < 2 * arr.npartitions
    assert int(total.compute()) == int(a.sum(dtype="u8"))


def test_two_calls_on_one_file_share_keys_and_other_chunks_do_not(scene):
    files, _ = scene
    assert rumimm.to_dask(*files["tile"]).name == rumimm.to_dask(*files["tile"]).name
    assert rumimm.to_dask(*files["tile"]).name != rumimm.to_dask(*files["tile"], chunks=(1, 32, 64)).name


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


# -- a two-process LocalCluster (one start-up for the session) -----------------------------------
def _compiles():
    from conftest import _COMPILES

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


@pytest.fixture
def client(dask_session_client):
    """The session's two-process LocalCluster, as the current client for one test."""
    with dask_session_client.as_current():
        yield dask_session_client


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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_starts_with_no_worker_images_even_if_their_lock_was_held(scene):
    """A worker's open images are its own: a forked child (a DataLoader worker, a forking pool) starts with none,
    and with a new lock, so a thread of the parent holding it at the fork cannot hang the child."""
    from rumimm.integrations import worker_images

    files, a = scene
    path, blob = files["tile"]
    with worker_images.held((str(path), blob)) as parent:
        pass
    assert worker_images.open_count(str(path)) == 1

    def child():
        assert worker_images.open_count() == 0
        with worker_images.held((str(path), blob)) as img:
            assert img is not parent and same_bits(img[:, :20, :30], a[:, :20, :30])

    with worker_images._lock:
        code = exit_code_in_fork(child)
    assert code == 0, "the forked child hung on the worker images' lock" if code < 0 else code
    with worker_images.held((str(path), blob)) as again:
        assert again is parent  # the parent's stay open and kept


def test_an_image_a_read_holds_is_not_closed_by_another_making_room(scene, tmp_path):
    """A task reads inside worker_images.held: opening MAX_OPEN other files meanwhile (another thread's tasks)
    leaves it open until the read lets go, then closes it; before, it was closed under the read
    ("image is closed", 1 read in 3,000 with 40 files on 6 threads)."""
    from rumimm.integrations import worker_images

    files, a = scene
    path, blob = files["tile"]
    others = []
    for i in range(worker_images.MAX_OPEN + 2):
        p = tmp_path / f"o{i}.rumi"
        others.append((str(p), rumimm.write(p, a[:, :16, :16], tile=16)))
    worker_images.close_all()
    with worker_images.held((str(path), blob)) as img:
        for o in others:
            with worker_images.held(o) as other:
                assert same_bits(other[:, :4, :4], a[:, :4, :4])
        assert worker_images.open_count(str(path)) == 0  # made room for: out of the pool
        assert not img.closed and same_bits(img[:, :20, :30], a[:, :20, :30])
    assert img.closed and not worker_images._retired and not worker_images._holds
    worker_images.close_all()


def _open_images(path):
    """Run on a worker: how many images of ``path`` it keeps open for read tasks."""
    from rumimm.integrations.worker_images import open_count

    return open_count(path)


@pytest.mark.slow
def test_workers_compile_once_and_keep_each_file_open_across_tasks(scene, client, tmp_path):
    files, a = scene
    path, blob = files["tile"]
    arr = rumimm.to_dask(path, header=blob, chunks=(3, 32, 64))  # 12 frames a chunk: the kernels read it
    assert int(arr.sum(dtype="u8").compute()) == int(a.sum(dtype="u8"))  # warm: starts loading the kernels
    assert set(client.run(_kernels_loaded).values()) == {"ready"}
    before_compiles = client.run(_compiles)
    assert all(n > 0 for n in before_compiles.values())  # the counter sees the first tasks' compiles
    assert int((arr[:, 5:85] * 2).sum(dtype="u8").compute()) == int(a[:, 5:85].sum(dtype="u8")) * 2
    before_handles = client.run(_handles, path)
    for _ in range(3):
        assert int((arr[:, 5:85] * 2).sum(dtype="u8").compute()) == int(a[:, 5:85].sum(dtype="u8")) * 2
    assert client.run(_compiles) == before_compiles  # more tasks, no numba compile or cache load
    after = client.run(_handles, path)
    assert after == before_handles  # 3 computations of 12 tasks each opened nothing
    # one image a worker: its descriptor (and the one its mapping holds), one mapping
    assert all(fds <= 2 and maps <= 1 for fds, maps in after.values())
    assert set(client.run(_open_images, str(path)).values()) == {1}
    # a file replaced at the same path (a rename, as rumimm writes) is read anew, the old image closed
    copy = tmp_path / "replaced.rumi"
    rumimm.write(copy, a, tile=(16, 32), threads=1)
    arr = rumimm.to_dask(copy, chunks=(3, 32, 64))
    assert int(arr.sum(dtype="u8").compute()) == int(a.sum(dtype="u8"))
    blob2 = rumimm.write(copy, a[:, ::-1], tile=(16, 32), threads=1)
    arr = rumimm.to_dask(copy, header=blob2, chunks=(3, 32, 64))
    assert same_bits(arr.compute(), a[:, ::-1])
    assert all(fds <= 2 for fds, _ in client.run(_handles, copy).values())
    assert set(client.run(_open_images, str(copy)).values()) <= {0, 1}


@pytest.mark.slow
def test_xarray_chunks_compute_on_the_cluster(scene, client):
    files, a = scene
    path, blob = files["cell"]
    with xr.open_dataset(path, engine="rumimm", header=blob, chunks={}) as ds:
        band_sums = ds["band_data"].sum(["y", "x"], dtype="u8").compute()
    assert band_sums.values.tolist() == a.sum(axis=(1, 2), dtype="u8").tolist()


@pytest.mark.slow
def test_xarray_isel_and_sel_of_a_window_on_the_cluster_decode_only_the_frames_under_it(client, tmp_path):
    a = eo_scene(2, 512, 512, "uint16", seed=5)
    path = tmp_path / "window.rumi"
    blob = _only_frames_under(path, a, 32, *WINDOW)
    with xr.open_dataset(path, engine="rumimm", header=blob, chunks={}) as ds:
        _window_reads(ds, a)
        with pytest.raises(rumimm.RumiError, match="corrupt"):
            ds["band_data"].isel(y=slice(0, 64)).values


@pytest.mark.slow
def test_a_dask_array_writes_through_the_cluster(scene, client, tmp_path):
    files, a = scene
    arr = rumimm.to_dask(*files["tile"])
    blob = rumimm.write(tmp_path / "c.rumi", (arr // 2).astype("uint16"), tile=32, threads=1)
    with rumimm.open(tmp_path / "c.rumi", header=blob) as img:
        assert same_bits(img[:], a // 2)


def _refuse_to_encode(*args, **kwargs):
    raise AssertionError("a frame was compressed in the writing process")


def _temp_files(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["0.1", "0.2"])
def test_a_cluster_write_encodes_on_the_workers_and_writes_the_same_bytes(scene, client, tmp_path, monkeypatch,
                                                                        spec):
    from rumimm.writer.frame_job import FrameJob

    files, a = scene
    with dask.config.set({"array.chunk-size": "8KiB"}):
        src = rumimm.to_dask(*files["tile"])  # lives on the workers: chunks of 3 x 16 x 64
    assert src.npartitions > 8
    v2 = {"spec": "0.2", "descriptions": ["a", "b", "c"], "time": ["2026-01-01"]} if spec == "0.2" else {}
    want = a + np.uint16(1)
    for tile, unit in [((16, 32), "tile"), (24, "cell"), ((40, 16), "tile")]:  # chunks on, across, off tiles
        with monkeypatch.context() as m:
            m.setattr(FrameJob, "encode", _refuse_to_encode)  # only the workers may compress
            blob = rumimm.write(tmp_path / "c.rumi", src + np.uint16(1), tile=tile, unit=unit, transform=UTM,
                                crs=32633, nodata=0, **v2)
        local = rumimm.write(tmp_path / "n.rumi", want, tile=tile, unit=unit, transform=UTM, crs=32633, nodata=0,
                             threads=1, **v2)
        assert blob == local, (tile, unit)
        assert (tmp_path / "c.rumi").read_bytes() == (tmp_path / "n.rumi").read_bytes(), (tile, unit)
        assert (tmp_path / "c.rumi.aux.xml").exists()
    assert _temp_files(tmp_path) == []


class _EncodedNotWritten:
    """A scheduler plugin: how many chunk encodes of a cluster write hold their frames at once (in
    memory on a worker, or fetched and not yet released by the writer), and the most ever."""

    def __init__(self):
        self.held, self.peak, self.done = set(), 0, 0

    def transition(self, key, start, finish, *args, **kwargs):
        name = key if isinstance(key, str) else str(key[0])
        if not name.startswith("_encode_chunk-"):
            return
        if finish == "memory":
            self.held.add(key)
            self.done += 1
            self.peak = max(self.peak, len(self.held))
        elif start == "memory":
            self.held.discard(key)


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["0.1", "0.2"])
def test_a_slow_writer_holds_at_most_a_row_of_chunks_and_one_a_thread(scene, client, tmp_path, monkeypatch, spec):
    from dask.distributed import SchedulerPlugin

    from rumimm.writer.distributed import chunks_in_flight
    from rumimm.writer.writer import Writer

    a = scene[1]
    src = da.from_array(a, chunks=(3, 16, 64))  # 6 rows of 2 chunks, tiles of 16 x 32: whole frames
    threads = sum(client.nthreads().values())
    bound = chunks_in_flight(2, threads)
    assert bound == 4 < src.npartitions == 12
    v2 = {"spec": "0.2", "descriptions": ["a", "b", "c"], "time": ["2026-01-01"]} if spec == "0.2" else {}
    written = []
    slow = Writer.write_frames

    def write_slowly(self, r, frames):  # the workers finish every chunk meanwhile, unless held back
        written.append(r)
        threading.Event().wait(0.05)
        slow(self, r, frames)

    plugin = type("Counted", (_EncodedNotWritten, SchedulerPlugin), {})()
    scheduler = client.cluster.scheduler
    scheduler.add_plugin(plugin, name="rumimm-encoded-not-written")
    try:
        with monkeypatch.context() as m:
            m.setattr(Writer, "write_frames", write_slowly)
            blob = rumimm.write(tmp_path / "c.rumi", src, tile=(16, 32), transform=UTM, crs=32633, **v2)
    finally:
        scheduler.remove_plugin(name="rumimm-encoded-not-written")
    assert written == list(range(6))  # every grid row, in order, through the slowed writer
    assert plugin.done == 12 and not plugin.held  # every chunk encoded once, and all released
    assert 2 <= plugin.peak <= bound
    local = rumimm.write(tmp_path / "n.rumi", a, tile=(16, 32), transform=UTM, crs=32633, threads=1, **v2)
    assert blob == local and (tmp_path / "c.rumi").read_bytes() == (tmp_path / "n.rumi").read_bytes()


def test_row_graphs_give_each_row_of_chunks_only_its_own_tasks_unless_rows_share_one():
    from rumimm.writer.distributed import row_graphs

    a = np.arange(4 * 64 * 48, dtype=np.uint16).reshape(4, 64, 48)
    x = da.from_array(a, chunks=(4, 16, 24))  # 4 rows of 2 chunks, each chunk's samples its own task
    for arr in (x, x + 1, (x * 2).astype("u4")):
        blocks = arr.to_delayed(optimize_graph=True).reshape(4, 2)
        graphs = row_graphs(blocks)
        whole = dict(blocks.flat[0].__dask_graph__())
        assert len(graphs) == 4 and sum(len(g) for g in graphs) == len(whole)  # disjoint, and all of it
        for i, g in enumerate(graphs):
            others = {b.key for k in range(4) if k != i for b in blocks[k]}
            assert {b.key for b in blocks[i]} <= set(g) and not others & set(g)
    shared = {"reduction": x - x.mean(), "rechunk across tile rows": x.rechunk((4, 24, 24)).rechunk((4, 16, 24))}
    for name, arr in shared.items():
        assert row_graphs(arr.to_delayed(optimize_graph=True).reshape(4, 2)) is None, name


def _counted(block, log):
    """A source chunk that notes each time it is computed (on any worker) in the file ``log``."""
    with open(log, "a") as f:
        f.write("1")
    return block


@pytest.mark.slow
def test_a_cluster_write_whose_rows_share_a_reduction_computes_each_source_chunk_once(scene, client, tmp_path):
    """``x // 2 + x.max() // 4``: every chunk needs the maximum of all; computed once, not once per row."""
    a = scene[1]
    log = tmp_path / "calls"
    x = da.from_array(a, chunks=(3, 16, 64)).map_blocks(_counted, log=str(log), meta=a[:0, :0, :0])  # 12 chunks
    blob = rumimm.write(tmp_path / "c.rumi", x // 2 + x.max() // 4, tile=(16, 32), transform=UTM, crs=32633)
    assert len(log.read_text()) == x.npartitions == 12
    want = a // 2 + a.max() // 4
    local = rumimm.write(tmp_path / "n.rumi", want, tile=(16, 32), transform=UTM, crs=32633, threads=1)
    assert blob == local and (tmp_path / "c.rumi").read_bytes() == (tmp_path / "n.rumi").read_bytes()


@pytest.mark.slow
def test_a_cluster_write_of_2d_4d_and_xarray_arrays(scene, client, tmp_path):
    files, a = scene
    band = da.from_array(a[1], chunks=(30, 50))
    blob = rumimm.write(tmp_path / "b.rumi", band, tile=16)
    with rumimm.open(tmp_path / "b.rumi", header=blob) as img:
        assert same_bits(img[0], a[1])
    cube = da.from_array(np.stack([a, a // 3]), chunks=(1, 1, 45, 55))
    times = ["2026-01-01", "2026-02-01"]
    blob = rumimm.write(tmp_path / "t.rumi", cube, tile=32, unit="cell", spec="0.2", descriptions=["a", "b", "c"],
                        time=times)
    local = rumimm.write(tmp_path / "l.rumi", np.stack([a, a // 3]), tile=32, unit="cell", spec="0.2",
                         descriptions=["a", "b", "c"], time=times, threads=1)
    assert blob == local and (tmp_path / "t.rumi").read_bytes() == (tmp_path / "l.rumi").read_bytes()
    path, blob = files["cell"]
    with xr.open_dataset(path, engine="rumimm", header=blob, chunks={}) as ds:
        out = rumimm.to_rumi(ds["band_data"] // 2, tmp_path / "x.rumi", tile=32)
    with rumimm.open(tmp_path / "x.rumi", header=out) as img:
        assert same_bits(img[:], a // 2) and img.crs == "EPSG:32633" and tuple(img.transform)[:6] == UTM


def test_a_dask_array_of_unknown_chunk_sizes_is_refused(scene, tmp_path):
    a = scene[1]
    src = da.from_array(a, chunks=(3, 45, 55))
    unknown = da.Array(src.dask, src.name, ((3,), (np.nan, np.nan), (55, 55)), meta=np.empty((0, 0, 0), a.dtype))
    with pytest.raises(rumimm.RumiError, match=r"u.rumi: the Dask array has unknown \(nan\) chunk sizes along "
                                               r"axis 1; .*compute_chunk_sizes"):
        rumimm.write(tmp_path / "u.rumi", unknown)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_cluster_write_to_a_missing_directory_computes_nothing(scene, client, tmp_path):
    def boom(block):
        raise AssertionError("computed")

    src = da.from_array(scene[1], chunks=(3, 45, 55)).map_blocks(boom, meta=np.empty((0, 0, 0), scene[1].dtype))
    with pytest.raises(FileNotFoundError, match=r"no/such/dir/o.rumi"):
        rumimm.write(tmp_path / "no" / "such" / "dir" / "o.rumi", src, tile=32)


def _die_in_task(block, marker="", always=False):
    """A task that kills its worker process: once (the first task to create ``marker``) or every time."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        os._exit(1)
    except FileExistsError:
        if always:
            os._exit(1)
    return block


@pytest.mark.slow
def test_a_worker_killed_mid_write_reruns_its_tasks_or_leaves_the_old_file(scene, client, tmp_path):
    from dask.distributed import Client, LocalCluster

    # a cluster of its own, whose workers this test kills; a task that killed its worker
    # twice fails the computation (the default is 3 deaths)
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}), \
            LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                         silence_logs=50) as cluster, Client(cluster) as doomed:
        _kill_workers_mid_write(scene, doomed, tmp_path)
    assert len(client.scheduler_info()["workers"]) == 2  # the module's cluster, untouched


def _kill_workers_mid_write(scene, client, tmp_path):
    files, a = scene
    dest = tmp_path / "out" / "k.rumi"
    dest.parent.mkdir()
    old = rumimm.write(dest, a[:1], tile=32, threads=1)
    old_bytes = dest.read_bytes()
    src = rumimm.to_dask(*files["tile"], chunks=(3, 32, 64))
    # once: the scheduler reruns the dead worker's tasks elsewhere and the file is whole
    meta = np.empty((0, 0, 0), a.dtype)  # not inferred by calling the task here
    once = src.map_blocks(_die_in_task, marker=str(tmp_path / "once"), meta=meta)
    blob = rumimm.write(dest, once, tile=32)
    assert (tmp_path / "once").exists()
    with rumimm.open(dest, header=blob) as img:
        assert same_bits(img[:], a)
    assert _temp_files(dest.parent) == []
    client.wait_for_workers(2, timeout=120)
    # every time: the write fails, and the destination is the file before it, with no temporary file
    rumimm.write(dest, a[:1], tile=32, threads=1)
    always = src.map_blocks(_die_in_task, marker=str(tmp_path / "always"), always=True, meta=meta)
    from distributed import KilledWorker

    with pytest.raises(KilledWorker):
        rumimm.write(dest, always, tile=32)
    assert dest.read_bytes() == old_bytes and rumimm.build_blob(dest) == old
    assert _temp_files(dest.parent) == []


def test_writer_write_frames_takes_rows_of_frames_compressed_elsewhere(tmp_path):
    from rumimm.writer.frame_job import FrameJob, JobArgs, encode_specs, frame_specs

    a = eo_scene(2, 40, 50, "uint16", seed=4)
    with rumimm.Writer(tmp_path / "f.rumi", a.shape, a.dtype, tile=16, threads=1) as w:
        job = FrameJob(JobArgs(w.codec, w.enc, w.format_version, False, w.grid.n_frames))
        rows = [encode_specs(job, a[:, y0:y1], frame_specs(w.grid, r))
                for r, (y0, y1) in enumerate(w.row_span(r) for r in range(w.rows))]
        with pytest.raises(rumimm.RumiError, match=r"f.rumi: grid row 1: expected row 0 on a serial writer"):
            w.write_frames(1, rows[1])
        with pytest.raises(rumimm.RumiError, match=r"f.rumi: grid row 0 has 5 frames, expected 8"):
            w.write_frames(0, rows[0][:5])
        older = FrameJob(JobArgs(w.codec, w.enc, w.format_version - 1, False, w.grid.n_frames))
        row0 = list(rows[0])
        bad = [(encode_specs(older, a[:, :16], frame_specs(w.grid, 0)), rf"f.rumi: frame 0 has OpenZL format version "
                rf"{w.format_version - 1}, but this file pins {w.format_version}"),
               ([b"\0" * 40, *row0[1:]], r"f.rumi: frame 0: expected the OpenZL magic"),
               ([*row0[:5], row0[7], row0[6], row0[5]], r"f.rumi: frame 5 declares 64 bytes of samples, expected 512"),
               ([*row0[:7], row0[7][:6]], r"f.rumi: frame 7 has an unreadable header")]
        for frames, match in bad:  # what the file would not hold: each refused before it is written
            with pytest.raises(rumimm.RumiError, match=match):
                w.write_frames(0, frames)
        # refused rows leave the writer usable, as write_row's checks do
        w.write_frames(0, rows[0])
        for r in range(1, w.rows):
            w.write_row(r, a[:, slice(*w.row_span(r))])  # compressed elsewhere and here: one file
    rumimm.write(tmp_path / "g.rumi", a, tile=16, threads=1)
    assert (tmp_path / "f.rumi").read_bytes() == (tmp_path / "g.rumi").read_bytes()
