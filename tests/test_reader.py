"""rumimm.open: windows, keys, encodings, cache, threads, pickling and hostile files vs numpy."""

from __future__ import annotations

import concurrent.futures as cf
import gc
import multiprocessing as mp
import os
import pickle
import struct
import subprocess
import sys

import numpy as np
import pytest
from affine import Affine
from conftest import openzl_frame, reference_file, set_entry
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rumimm
from rumimm.errors import BlobError, CodecError, FormatError, RumiError, WindowError
from rumimm.format import georef
from rumimm.format.blob import Header, build_header
from rumimm.format.dtypes import DTYPES, encoding_for_dtype
from rumimm.format.grid import Grid, frame_unit
from rumimm.format.tiff import build_prefix
from rumimm.reader import cache, engine, threads
from rumimm.reader.image import frame_source as image_source
from rumimm.reader.image import read_frames
from rumimm.synthetic import eo_scene

SHAPE = (3, 37, 53)  # ragged: 16 x 16 tiles leave 5-row and 5-column edge frames
TILE = 16


def same(got, want) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    return got.shape == want.shape and got.dtype == want.dtype and got.tobytes() == want.tobytes()


def write(path, array, **kw):
    kw.setdefault("threads", 1)
    return rumimm.write(path, array, **kw)


@pytest.fixture(scope="module")
def scene():
    return eo_scene(*SHAPE, dtype="uint16", seed=7)


@pytest.fixture(scope="module", params=["tile", "cell"])
def written(request, tmp_path_factory, scene):
    path = tmp_path_factory.mktemp("reader") / f"scene_{request.param}.rumi"
    blob = write(path, scene, tile=TILE, unit=request.param)
    return path, blob, request.param


@pytest.fixture
def img(written):
    path, blob, _ = written
    with rumimm.open(path, blob, cache_bytes=0) as image:
        yield image


@pytest.fixture
def restore_threads():
    before = threads.get_num_threads()
    yield
    threads.set_num_threads(before)


def assemble(path, grid: Grid, frames: list[bytes], dtype, *, epsg=None, transform=None) -> bytes:
    """A rumi file from raw OpenZL frames (any content), laid out as the spec says."""
    enc = encoding_for_dtype(dtype)
    counts = np.array([len(f) for f in frames], np.uint64)
    offsets = grid.base_frame_offset + np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.uint64)
    matrix = georef.UNDEFINED_MATRIX if transform is None else georef.matrix_from_transform(transform)
    prefix = build_prefix(grid, enc, offsets, counts, matrix, georef.geokeys(epsg))
    with open(path, "wb") as f:
        f.write(prefix + b"".join(frames))
    return build_header(grid, enc, counts)


# -- windows at every alignment --------------------------------------------------------
WINDOWS = {
    "inside one tile": np.s_[:, 2:9, 3:12],
    "one tile exactly": np.s_[:, 16:32, 16:32],
    "across a tile edge": np.s_[:, 10:20, 12:40],
    "across four tiles of one band": np.s_[1, 10:20, 12:20],
    "touching the bottom right corner": np.s_[:, 30:37, 45:53],
    "the ragged edge frames only": np.s_[:, 32:, 48:],
    "one pixel": np.s_[2, 36, 52],
    "one pixel as a 3-d block": np.s_[2:3, 17:18, 31:32],
    "whole image": np.s_[:],
    "one band whole": np.s_[1],
    "one row": np.s_[:, 20],
    "one column": np.s_[:, :, 47],
    "steps": np.s_[:, 1::5, 2::7],
    "negative steps": np.s_[::-1, ::-3, 50:3:-4],
    "band list": np.s_[[2, 0], 5:30, 5:30],
    "repeated bands": np.s_[[1, 1, 0], 5:8, 40:50],
    "boolean bands": np.s_[np.array([True, False, True]), :4, :4],
    "ellipsis": np.s_[..., 3:9],
    "newaxis": np.s_[None, 0, 3:5, 3:5],
    "fancy rows and columns": np.s_[:, [3, 30, 17], [0, 52, 16]],
    "fancy rows with int band": np.s_[2, [36, 0], 4:9],
    "empty": np.s_[:, 5:5, :],
    "clipped slices": np.s_[:, 30:100, -100:4],
}


@pytest.mark.parametrize("key", list(WINDOWS.values()), ids=list(WINDOWS))
def test_every_window_equals_numpy_indexing_of_the_array_written(img, scene, key):
    assert same(img[key], scene[key])


@pytest.mark.parametrize("key", list(WINDOWS.values()), ids=list(WINDOWS))
def test_windows_read_the_same_with_the_cache_on(written, scene, key):
    path, blob, _ = written
    with rumimm.open(path, blob, cache_bytes=1 << 20) as image:
        assert same(image[key], scene[key])
        assert same(image[key], scene[key])  # now from the cache


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_windows_and_steps_match_numpy(img, scene, data):
    _b, y, x = SHAPE

    def axis(n):
        a = data.draw(st.integers(-n - 2, n + 2))
        c = data.draw(st.integers(-n - 2, n + 2))
        s = data.draw(st.sampled_from([None, 1, 1, 2, 3, 17, -1, -2, -5]))
        return slice(a, c, s)

    key = (data.draw(st.sampled_from([slice(None), 0, -1, [2, 0], slice(None, None, -1)])), axis(y), axis(x))
    assert same(img[key], scene[key])


def test_opening_with_and_without_the_blob_reads_the_same(written, scene):
    path, blob, _ = written
    with rumimm.open(path) as a, rumimm.open(path, Header.parse(blob)) as b:
        assert bytes(a.header) == bytes(b.header) == blob
        for key in WINDOWS.values():
            assert same(a[key], b[key])
        assert a.to_dict() == b.to_dict()


def test_out_of_range_keys_raise_window_error_like_numpy(img):
    for key in (np.s_[3], np.s_[:, 37], np.s_[:, :, -54], np.s_[0, 0, 0, 0], np.s_[[0, 4]], np.s_[0.5]):
        with pytest.raises(WindowError):
            img[key]
        with pytest.raises(IndexError):
            img[key]


# -- all encodings ---------------------------------------------------------------------
@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_encoding_reads_back_in_windows(tmp_path, name, unit):
    array = eo_scene(2, 23, 29, dtype=name, seed=3)
    blob = write(tmp_path / "a.rumi", array, tile=8, unit=unit)
    with rumimm.open(tmp_path / "a.rumi", blob) as image:
        assert image.dtype == array.dtype
        for key in (np.s_[:], np.s_[1, 3:20, 5:27], np.s_[:, 7:9, 7:9], np.s_[0, ::3, ::-2], np.s_[:, 22, 28]):
            assert same(image[key], array[key]), key
        for _ in range(2):  # decoded into the cache, then a hit: a read-only view of the cached frame both times
            got = image.read([1, 2], window=((3, 7), (9, 15)), copy=False)
            assert same(got, array[:, 3:7, 9:15])
            view = image.read(2, window=((3, 7), (9, 15)), copy=False)
            assert same(view, array[1, 3:7, 9:15]) and not view.flags.writeable


@pytest.mark.parametrize(("dtype", "bits"), [("bool", 1), ("uint2", 2), ("int4", 4), ("float6_e2m3fn", 6),
                                        ("float4_e2m1fn", 4)])
def test_sub_byte_samples_are_the_low_bits_of_each_byte(tmp_path, monkeypatch, dtype, bits):
    grid = Grid(7, 5, 4, 4, 1, frame_unit("tile"))
    raw = np.random.default_rng(1).integers(0, 256, (5, 7), dtype=np.uint8)
    frames = [openzl_frame(np.ascontiguousarray(raw[r * 4:r * 4 + 4, c * 4:c * 4 + 4]))
              for r in range(2) for c in range(2)]
    blob = assemble(tmp_path / "s.rumi", grid, frames, DTYPES[dtype])
    want = (raw & ((1 << bits) - 1)).view(DTYPES[dtype])
    for small in (engine.SMALL_READ_FRAMES, 0):  # few frames: without numba; 0: the kernels
        monkeypatch.setattr(engine, "SMALL_READ_FRAMES", small)
        with rumimm.open(tmp_path / "s.rumi", blob, cache_bytes=0) as image:
            assert same(image[0], want)
            assert same(image[0, 1:3, 1:3], want[1:3, 1:3])  # one frame: the view path
            # whole frames as wide as the window: the first decodes straight into the output, masked there
            assert same(image[0, 0:5, 4:7], want[0:5, 4:7])
    engine.load()
    monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    with rumimm.open(tmp_path / "s.rumi", blob, cache_bytes=0) as image:
        assert not engine._NATIVE
        assert same(image[0], want)


# -- metadata --------------------------------------------------------------------------
def test_properties_describe_the_image(written, scene):
    path, blob, unit = written
    with rumimm.open(path, blob) as image:
        assert image.shape == SHAPE and image.ndim == 3 and len(image) == 3
        assert image.dtype == np.dtype("uint16") and image.nbytes == scene.nbytes
        assert (image.count, image.height, image.width) == SHAPE
        assert image.tile == (TILE, TILE) and image.frame_unit == unit
        assert image.transform is None and image.crs is None and image.bounds is None and image.res is None
        assert image.header == blob
        d = image.to_dict()
        assert d["shape"] == list(SHAPE) and d["frame_unit"] == unit and d["crs"] is None
        assert d["path"] == os.fspath(path)
        assert np.array_equal(np.asarray(image), scene)


def test_georeferencing_is_read_from_its_fixed_place_without_the_ifd(tmp_path, scene):
    t = (10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0)
    blob = write(tmp_path / "g.rumi", scene, tile=TILE, transform=t, crs=32633)
    with rumimm.open(tmp_path / "g.rumi", blob) as a, rumimm.open(tmp_path / "g.rumi") as b:
        for image in (a, b):
            assert image.transform == Affine(*t) and image.crs == "EPSG:32633" and image.epsg == 32633
            assert image.bounds == (500000.0, 4100000.0 - 370.0, 500000.0 + 530.0, 4100000.0)
            assert image.res == (10.0, 10.0)
            assert image.pixel_is_point is False


def test_a_broken_georeferencing_block_raises_format_error_when_asked_for(tmp_path, scene):
    blob = write(tmp_path / "g.rumi", scene, tile=TILE)
    grid = Header.parse(blob).grid
    data = bytearray((tmp_path / "g.rumi").read_bytes())
    data[grid.base_frame_offset - 32 + 14] = 9  # GTModelTypeGeoKey := 9
    (tmp_path / "g.rumi").write_bytes(bytes(data))
    with rumimm.open(tmp_path / "g.rumi", blob) as image:
        assert same(image[:, :3, :3], scene[:, :3, :3])  # pixels do not need the tags
        with pytest.raises(FormatError, match="GTModelTypeGeoKey"):
            image.crs


# -- read(): bands, windows, out -------------------------------------------------------
def test_read_fills_a_caller_buffer_in_place(img, scene):
    out = np.zeros((2, 10, 20), np.uint16)
    got = img.read([3, 1], ((5, 15), (30, 50)), out=out)
    assert got is out and same(out, scene[[2, 0], 5:15, 30:50])
    strided = np.zeros((2, 10, 40), np.uint16)[:, :, ::2]
    img.read([3, 1], ((5, 15), (30, 50)), out=strided)
    assert same(strided, scene[[2, 0], 5:15, 30:50])
    band = np.zeros((37, 53), np.uint16)
    assert same(img.read(2, out=band), scene[1])
    assert same(img.read(), scene)


def test_read_counts_bands_from_1_as_rasterio(img, scene):
    assert same(img.read(1), scene[0])
    assert same(img.read([1, 3]), scene[[0, 2]])
    assert same(img.read(indexes=3), scene[2])
    for bad in (0, 4, [1, 0], -1):
        with pytest.raises(WindowError, match="numbered 1 to 3"):
            img.read(bad)
    with pytest.raises(TypeError, match="1-based"):
        img.read(1.5)


def test_read_rejects_a_wrong_buffer_and_windows_outside_the_image(img):
    with pytest.raises(ValueError, match="shape"):
        img.read(window=((0, 4), (0, 4)), out=np.zeros((3, 4, 5), np.uint16))
    with pytest.raises(ValueError, match="dtype"):
        img.read(window=((0, 4), (0, 4)), out=np.zeros((3, 4, 4), np.int16))
    with pytest.raises(WindowError):
        img.read(window=((0, 40), (0, 4)))
    with pytest.raises(WindowError):
        img.read(4)


# -- the cache and zero-copy views -----------------------------------------------------
def test_neighbouring_small_windows_decode_their_frame_once(written, scene):
    path, blob, _ = written
    with rumimm.open(path, blob, cache_bytes=4 << 20) as image:
        c = image._cache
        assert same(image[0, 0:4, 0:4], scene[0, 0:4, 0:4])
        misses = c.misses
        for y in range(0, 16, 4):
            for x in range(0, 16, 4):
                assert same(image[0, y:y + 4, x:x + 4], scene[0, y:y + 4, x:x + 4])
        assert c.misses == misses and c.hits >= 16


def test_arrays_returned_never_alias_the_cache(written, scene):
    path, blob, _ = written
    with rumimm.open(path, blob, cache_bytes=4 << 20) as image:
        for key in (np.s_[0, 1:5, 1:5], np.s_[:, 0:20, 0:20]):
            first = image[key]
            first[...] = 0
            assert same(image[key], scene[key])


def test_read_with_copy_false_gives_a_read_only_view_of_the_cached_frame(written, scene):
    path, blob, unit = written
    with rumimm.open(path, blob, cache_bytes=4 << 20) as image:
        first = image.read(2, window=((1, 5), (2, 9)), copy=False)  # decoded now, kept by the cache: a view of it
        again = image.read(2, window=((1, 5), (2, 9)), copy=False)  # a hit: a view of the same frame
        assert same(first, scene[1, 1:5, 2:9]) and same(again, scene[1, 1:5, 2:9])
        assert not first.flags.writeable and not again.flags.writeable
        assert np.shares_memory(first, again)  # no copy: both look into the one cached frame
        with pytest.raises(ValueError, match="read-only"):
            first[...] = 0
        owned = np.array(first)  # the documented way to own the window
        owned[...] = 0
        assert same(image.read(2, window=((1, 5), (2, 9)), copy=False), scene[1, 1:5, 2:9])
        # the default, and img[...], stay arrays of the caller's own
        for got in (image.read(2, window=((1, 5), (2, 9))), image[1, 1:5, 2:9]):
            assert got.flags.writeable and not np.shares_memory(got, first)
        if unit == "cell":  # consecutive bands of one cell frame: still one view
            block = image.read([1, 2, 3], window=((1, 5), (2, 9)), copy=False)
            assert same(block, scene[0:3, 1:5, 2:9]) and not block.flags.writeable


def test_read_with_copy_false_copies_when_no_cache_keeps_the_frame_or_the_window_spans_frames(written, scene):
    path, blob, _ = written
    with rumimm.open(path, blob, cache_bytes=0) as image:  # decoded into scratch memory: copied out of it
        got = image.read(1, window=((1, 5), (2, 9)), copy=False)
        assert same(got, scene[0, 1:5, 2:9]) and got.flags.writeable
        owner = got if got.base is None else got.base
        assert owner.flags.owndata and owner.nbytes == got.nbytes
    with rumimm.open(path, blob, cache_bytes=4 << 20) as image:
        for band, window in ((1, ((TILE - 2, TILE + 3), (0, 5))), ([1, 3], ((1, 5), (2, 9)))):
            got = image.read(band, window=window, copy=False)  # two frames, or two tile frames of two bands
            (y0, y1), (x0, x1) = window
            want = scene[np.asarray(band) - 1, y0:y1, x0:x1]
            assert same(got, want) and got.flags.writeable


def test_without_a_cache_a_window_inside_one_frame_is_a_writable_copy(img, scene):
    chip = img[1, 2:9, 3:12]
    owner = chip if chip.base is None else chip.base  # an int band is a view of its own (1, h, w) block
    assert owner.flags.owndata and owner.nbytes == chip.nbytes and chip.flags.writeable
    chip[...] = 0
    assert same(img[1, 2:9, 3:12], scene[1, 2:9, 3:12])


@pytest.mark.parametrize("cache_bytes", [0, 1 << 16], ids=["no cache", "frame bigger than the cache admits"])
def test_chips_keep_only_their_own_pixels_alive(tmp_path, cache_bytes):
    import tracemalloc

    a = np.arange(512 * 512, dtype=np.uint16).reshape(1, 512, 512)
    blob = rumimm.write(tmp_path / "big.rumi", a, tile=512)  # one 512 KiB frame
    with rumimm.open(tmp_path / "big.rumi", blob, cache_bytes=cache_bytes) as image:
        image[0, 0:8, 0:8]  # load the engine and warm any per-thread scratch outside the trace
        tracemalloc.start()
        try:
            chips = [image[0, y:y + 8, 8:16] for y in range(0, 400, 4)]
            held, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert all(same(c, a[0, y:y + 8, 8:16]) for c, y in zip(chips, range(0, 400, 4), strict=True))
    assert held < 100 * 8 * 8 * 2 + 100 * 1024  # 100 chips of 128 bytes, not 100 frames of 512 KiB


def test_the_cache_stays_within_its_budget_and_drops_a_closed_images_frames(written):
    path, blob, _ = written
    budget = 6 * TILE * TILE * 2 * 3
    image = rumimm.open(path, blob, cache_bytes=budget)
    for y in range(0, 37, 8):
        for x in range(0, 53, 8):
            image[:, y:y + 2, x:x + 2]
            assert image._cache.nbytes <= budget
    image.close()
    assert len(image._cache) == 0
    shared = rumimm.open(path, blob)
    shared[:, 0:2, 0:2]
    token = shared._token
    assert any(k[0] == token for k in list(cache.SHARED._items))
    shared.close()
    assert not any(k[0] == token for k in list(cache.SHARED._items))


def test_frame_cache_evicts_least_recently_used_first():
    c = cache.FrameCache(400)
    frames = [np.zeros(100, np.uint8) for _ in range(5)]
    c.put_many([("a", i) for i in range(4)], frames[:4])
    assert c.get(("a", 0))[0] is frames[0]  # 0 is now the most recent
    c.put_many([("a", 4)], frames[4:])
    assert c.get(("a", 1)) is None
    array, address = c.get(("a", 0))
    assert array is frames[0] and address == frames[0].ctypes.data
    assert c.nbytes == 400 and not frames[0].flags.writeable
    assert not c.admits(101) and c.admits(100) and not cache.FrameCache(0).admits(1)
    c.resize(200)
    assert c.nbytes <= 200
    with pytest.raises(ValueError):
        cache.FrameCache(-1)


# -- threads, concurrency, pickling, lifecycle -----------------------------------------
def test_one_and_two_threads_read_the_same(written, scene, restore_threads):
    path, blob, _ = written
    with rumimm.open(path, blob, cache_bytes=0) as image:
        for n in (1, threads.get_num_threads()):
            threads.set_num_threads(n)
            assert threads.get_num_threads() == n
            assert same(image[:], scene)
            assert same(image[[2, 1], 3:33:2, 1:50], scene[[2, 1], 3:33:2, 1:50])


def test_set_num_threads_rejects_bad_counts():
    with pytest.raises(ValueError):
        threads.set_num_threads(0)
    with pytest.raises(TypeError):
        threads.set_num_threads(1.5)
    assert rumimm.get_num_threads() == threads.get_num_threads()


@pytest.mark.slow
def test_the_thread_count_comes_from_rumimm_num_threads():
    env = dict(os.environ, RUMIMM_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", "import rumimm; print(rumimm.get_num_threads())"],
                         env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1"


@pytest.mark.parametrize("cache_bytes", [0, None])
def test_many_threads_reading_at_once_get_correct_windows(written, scene, cache_bytes):
    path, blob, _ = written
    rng = np.random.default_rng(5)
    keys = []
    for _ in range(200):
        y0, x0 = rng.integers(0, 30), rng.integers(0, 45)
        h, w = rng.integers(1, 38 - y0), rng.integers(1, 54 - x0)
        keys.append((slice(None) if rng.random() < 0.5 else int(rng.integers(0, 3)),
                     slice(y0, y0 + h), slice(x0, x0 + w)))
    with rumimm.open(path, blob, cache_bytes=cache_bytes) as image, cf.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda k: image[k], keys))
    assert all(same(r, scene[k]) for r, k in zip(results, keys, strict=True))


def test_an_image_pickles_and_reopens(written, scene):
    path, blob, _ = written
    with rumimm.open(path, blob, cache_bytes=0) as image:
        clone = pickle.loads(pickle.dumps(image))
    try:
        assert not clone.closed and clone.header == blob and clone._cache is None
        assert same(clone[:, 3:30, 7:9], scene[:, 3:30, 7:9])
    finally:
        clone.close()


def test_an_image_of_either_spec_pickles_with_its_trailer_and_a_closed_one_stays_closed(reference):
    img = rumimm.open(reference.path, reference.blob, cache_bytes=0)
    again = pickle.loads(pickle.dumps(img))
    try:
        assert not again.closed and again.header == reference.blob and again._cache is None
        assert again.spec == img.spec and again.descriptions == img.descriptions and again.time == img.time
        np.testing.assert_array_equal(again[..., 4:9, :], reference.array[..., 4:9, :])
    finally:
        again.close()
    img.close()
    closed = pickle.loads(pickle.dumps(img))  # opens nothing
    assert closed.closed and closed.shape == reference.array.shape and closed.header == reference.blob
    assert closed.time == img.time and closed.spec == img.spec
    with pytest.raises(RumiError, match="closed"):
        closed[(0,) * closed.ndim]
    closed.close()


def test_a_blob_of_the_other_spec_is_refused(reference, spec):
    for other in ("f32_tile_b1", None) if spec.has_trailer else ("img_u0", None):
        blob = reference_file(spec.other, other).blob
        with pytest.raises(BlobError, match=r"header blob \(spec 0\.2\): " if spec.has_trailer else r"header blob: "):
            rumimm.open(reference.path, blob)
        with pytest.raises(BlobError, match=rf"header blob is spec {spec.other.name}, but spec {spec.name} was asked"):
            rumimm.open(reference.path, spec.other.parse_header(blob))  # a parsed header says its spec


def test_spec_must_agree_with_the_file(reference, spec):
    other = spec.other.name
    with pytest.raises(FormatError, match=rf"file is rumi spec {spec.name} \(it starts with {spec.starts_with}\), "
                                          rf"but spec='{other}' was given"):
        rumimm.open(reference.path, spec=other)
    with pytest.raises(ValueError, match=r"^spec must be '0\.1' or '0\.2', got '2'"):
        rumimm.open(reference.path, reference.blob, spec="2")
    for blob in (reference.blob, None):
        with rumimm.open(reference.path, blob, spec=spec.name) as img:
            assert img.spec == spec.name


def _read_in_child(args):
    image, key = args
    return image[key]


@pytest.mark.slow
def test_forked_workers_read_after_the_parent_decoded_in_parallel(written, scene):
    path, blob, _ = written
    with rumimm.open(path, blob) as image:
        image[:]  # the parent has used its thread pool now
        keys = [np.s_[:, 0:20, 0:20], np.s_[1, 10:37, 30:53], np.s_[:]]
        with mp.get_context("fork").Pool(2) as pool:
            results = pool.map(_read_in_child, [(image, k) for k in keys])
    assert all(same(r, scene[k]) for r, k in zip(results, keys, strict=True))


def test_close_is_idempotent_and_a_closed_image_refuses_to_read(written):
    path, blob, _ = written
    image = rumimm.open(path, blob)
    with image:
        assert not image.closed
    assert image.closed
    image.close()
    with pytest.raises(RumiError, match="closed"):
        image[0, 0, 0]
    assert "closed" in repr(image)


# -- the openzl.ext fallback -----------------------------------------------------------
def test_the_fallback_decoder_reads_the_same_when_geozls_library_is_missing(written, scene, monkeypatch):
    path, blob, _ = written
    engine.load()
    monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    for cache_bytes in (0, None):
        with rumimm.open(path, blob, cache_bytes=cache_bytes) as image:
            assert not engine._NATIVE
            for key in WINDOWS.values():
                assert same(image[key], scene[key])


def test_read_frames_returns_whole_frames_in_their_shape(img, scene, written):
    _, _, unit = written
    first, last = read_frames(img, [0, img.n_frames - 1])
    if unit == "tile":
        assert same(first, scene[0, :16, :16]) and same(last, scene[2, 32:, 48:])
    else:
        assert same(first, scene[:, :16, :16]) and same(last, scene[:, 32:, 48:])
    with pytest.raises(WindowError):
        read_frames(img, [img.n_frames])


@pytest.mark.parametrize(("spec_name", "name", "frame0"), [
    ("0.1", "u16_tile_b4", lambda a: a[0, :64, :64]),  # (h, w)
    ("0.1", "u16_cell_b3", lambda a: a[:, :32, :32]),  # (B, h, w)
    ("0.2", "cube_u8", lambda a: a[:, :, :8, :8].transpose(2, 3, 0, 1)),  # h w t b
])
def test_read_frames_gives_each_reference_frame_in_its_layouts_axes(spec_name, name, frame0):
    ref = reference_file(spec_name, name)
    with rumimm.open(ref.path, ref.blob) as img:
        (frame,) = read_frames(img, [0])
        np.testing.assert_array_equal(frame, frame0(ref.array))  # shape included
        with pytest.raises(WindowError):
            read_frames(img, [img.n_frames])


# -- hostile files and blobs -----------------------------------------------------------
@pytest.fixture
def copy_of(written, tmp_path):
    path, blob, unit = written
    dst = tmp_path / "copy.rumi"
    dst.write_bytes(path.read_bytes())
    return dst, blob, unit


def test_a_truncated_file_is_refused_with_or_without_the_blob(copy_of):
    path, blob, _ = copy_of
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(BlobError, match="truncated"):
        rumimm.open(path, blob)
    with pytest.raises(FormatError):
        rumimm.open(path)


@pytest.mark.parametrize("native", [True, False])
def test_a_corrupt_frame_raises_codec_error_naming_the_frame_and_its_position(copy_of, scene, native,
                                                                             monkeypatch):
    path, blob, unit = copy_of
    hdr = Header.parse(blob)
    k = hdr.grid.frame_index(1, 2, 0)  # row 1, col 2 (band 0 for tile frames)
    start, end = int(hdr.frame_offsets[k]), int(hdr.frame_offsets[k + 1])
    data = bytearray(path.read_bytes())
    for i in range(start + 8, end, max(1, (end - start) // 16)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    if not native:
        engine.load()
        monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    position = "row 1, col 2" + (", band 0" if unit == "tile" else "")
    for cache_bytes in (0, None):
        with rumimm.open(path, blob, cache_bytes=cache_bytes) as image:
            for key in (np.s_[0, 20:22, 40:42], np.s_[:, 10:30, 30:50], np.s_[:]):
                with pytest.raises(CodecError, match=rf"frame {k} of {hdr.n_frames} \({position}\)"):
                    image[key]
            assert same(image[:, 0:16, 0:16], scene[:, 0:16, 0:16])  # other frames still read


def test_a_blob_for_another_file_is_refused(tmp_path, written, scene):
    path, blob, unit = written
    other = write(tmp_path / "other.rumi", scene[:, :30], tile=TILE, unit=unit)
    with pytest.raises(BlobError):
        rumimm.open(path, other)
    with pytest.raises(BlobError):
        rumimm.open(tmp_path / "other.rumi", blob)


def test_a_blob_with_another_grid_but_the_same_file_size_is_refused(tmp_path, written):
    path, blob, _unit = written
    hdr = Header.parse(blob)
    g = hdr.grid
    n = g.n_frames
    swapped = Grid(g.image_length, g.image_width, g.tile_width, g.tile_length, g.samples_per_pixel, g.unit)
    counts = np.array(hdr.frame_byte_counts, np.int64)
    if swapped.n_frames == n:
        lie = build_header(swapped, hdr.encoding, counts)
        with pytest.raises(BlobError, match="does not describe this file"):
            rumimm.open(path, lie)


def test_a_blob_whose_frame_sizes_do_not_match_the_file_raises_codec_error(written):
    path, blob, _ = written
    hdr = Header.parse(blob)
    counts = np.array(hdr.frame_byte_counts, np.int64)
    counts[0] += 7  # same total: frame 0 takes 7 bytes of frame 1
    counts[1] -= 7
    lie = build_header(hdr.grid, hdr.encoding, counts)
    with rumimm.open(path, lie, cache_bytes=0) as image:
        # frame 0 keeps its header but runs into frame 1 (checksum); frame 1 loses its magic
        with pytest.raises(CodecError, match=r"frame [01] of"):
            image[:, 0:2, 0:2]


def test_a_large_read_checks_each_new_frames_header_once_and_names_a_bad_one(tmp_path, written, scene):
    # the kernels' path finds a read's unchecked frames with one array lookup: the bad one is still named
    path, blob, unit = written
    hdr = Header.parse(blob)
    data = bytearray(path.read_bytes())
    k = hdr.grid.n_frames - 2
    at = int(hdr.frame_offsets[k])
    data[at:at + 4] = (int.from_bytes(data[at:at + 4], "little") + 1).to_bytes(4, "little")  # another version
    bad = tmp_path / "bad.rumi"
    bad.write_bytes(bytes(data))
    with rumimm.open(bad, blob, cache_bytes=0) as image:
        fs = image_source(image)
        assert same(image[:, :TILE * 2, :], scene[:, :TILE * 2, :])  # more frames than a chip: the kernels
        assert fs.header_checked.sum() == (hdr.grid.tiles_across * 2 * (1 if unit == "cell" else SHAPE[0]))
        with pytest.raises(CodecError, match=f"frame {k} of {hdr.grid.n_frames} .* starts with"):
            image[:]
        assert same(image[:, :TILE * 2, :], scene[:, :TILE * 2, :])


@pytest.mark.parametrize("cache_bytes", [0, 4 << 20], ids=["no cache", "cache"])
def test_whole_tile_frames_on_contiguous_output_rows_decode_straight_into_the_output(written, scene, cache_bytes,
                                                                                     monkeypatch):
    path, blob, unit = written
    K = engine.load()
    made = []
    real = K.Frames

    def frames(*args):
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(K, "Frames", frames)
    with rumimm.open(path, blob, cache_bytes=cache_bytes) as image:
        # one column of tiles, as wide as a tile: whole frames on whole output rows; then the 5-column edge
        # frames, whose 10-byte rows put some bands' planes off the decoder's 8-byte alignment (copied instead)
        # (3 cell frames each: the chip executor's; 9 tile frames: the kernels')
        for key in (np.s_[:, 0:37, TILE:2 * TILE], np.s_[:, 0:37, 3 * TILE:], np.s_[:, 3:37, TILE:2 * TILE]):
            made.clear()
            assert same(image[key], scene[key])
            if unit == "cell":
                assert not made
                continue
            direct = made[0].direct.reshape(3, 3)  # (grid row, band), in plan order
            if cache_bytes:  # new frames decode into arrays the cache keeps, and are copied out
                assert not direct.any()
            elif key[1].start:  # rows 3:37: grid row 0's frames are cut (copied), rows 1 and 2 whole
                assert direct.tolist() == [[0, 0, 0], [1, 1, 1], [1, 1, 1]]
            elif key[2].start == TILE:
                assert direct.all()
            else:
                assert 0 < direct.sum() < direct.size
        out = np.zeros((3, 37, 2 * TILE + 1), np.uint16)[:, :, 1:]  # a caller's buffer: rows not contiguous
        assert same(image.read(window=((0, 37), (0, 2 * TILE)), out=out), scene[:, :, :2 * TILE])


def test_a_frame_decoding_to_the_wrong_size_raises_codec_error_on_both_paths(tmp_path, monkeypatch):
    grid = Grid(8, 8, 4, 4, 1, frame_unit("tile"))
    a = np.arange(64, dtype=np.uint16).reshape(8, 8)
    frames = [openzl_frame(a[r * 4:r * 4 + 4, c * 4:c * 4 + 4]) for r in range(2) for c in range(2)]
    frames[3] = openzl_frame(np.arange(15, dtype=np.uint16))  # one sample short
    blob = assemble(tmp_path / "w.rumi", grid, frames, np.uint16)
    for native in (True, False):
        if not native:
            engine.load()
            monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
        with rumimm.open(tmp_path / "w.rumi", blob, cache_bytes=0) as image:
            assert same(image[0, :4, :8], a[:4, :8])
            with pytest.raises(CodecError, match=r"frame 3 of 4 \(row 1, col 1, band 0\)"):
                image[0, 5, 5]
            with pytest.raises(CodecError, match="frame 3"):
                image[:]


def test_a_frame_of_the_wrong_sample_width_is_caught_by_the_fallback(tmp_path, monkeypatch):
    grid = Grid(4, 4, 4, 4, 1, frame_unit("tile"))
    frames = [openzl_frame(np.arange(32, dtype=np.uint8))]  # 32 bytes, but 8-bit samples
    blob = assemble(tmp_path / "t.rumi", grid, frames, np.uint16)
    engine.load()
    monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    with rumimm.open(tmp_path / "t.rumi", blob, cache_bytes=0) as image, pytest.raises(CodecError, match="frame 0"):
        image[:]


@pytest.mark.parametrize("native", [True, False], ids=["native", "fallback"])
def test_a_frame_of_the_right_size_but_the_wrong_type_raises_on_every_read_path(tmp_path, monkeypatch, native):
    grid = Grid(8, 4, 4, 4, 1, frame_unit("tile"))
    a = np.arange(32, dtype=np.uint16).reshape(4, 8)
    frames = [openzl_frame(a[:, :4]), openzl_frame(a[:, 4:], serial=True)]  # 32 bytes either way
    blob = assemble(tmp_path / "s.rumi", grid, frames, np.uint16)
    if not native:
        engine.load()
        monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    with rumimm.open(tmp_path / "s.rumi", blob, cache_bytes=0) as image:
        assert same(image[0, :, :4], a[:, :4])
        for key in (np.s_[0, 1:3, 5:7], np.s_[:], np.s_[0, 0, 7]):
            with pytest.raises(CodecError, match=r"s\.rumi: frame 1 of 2 \(row 0, col 1, band 0\).*Serial"):
                image[key]
        with pytest.raises(CodecError, match="frame 1 of 2"):
            rumimm.Cube([image, image])[:, 0, :, 4:]
        with pytest.raises(CodecError, match="frame 1 of 2"):
            rumimm.read_batch([image, image], np.array([[0, 0], [1, 4]]), size=(2, 2))
    with rumimm.open(tmp_path / "s.rumi", blob) as image:  # the shared cache never keeps it
        with pytest.raises(CodecError, match="frame 1 of 2"):
            image[:]
        with pytest.raises(CodecError, match="frame 1 of 2"):
            image[:]


def test_a_file_that_is_not_rumi_is_refused(tmp_path, written):
    path, blob, _ = written
    data = bytearray(path.read_bytes())
    data[0:2] = b"MM"
    (tmp_path / "x.rumi").write_bytes(bytes(data))
    with pytest.raises(BlobError, match="BigTIFF"):
        rumimm.open(tmp_path / "x.rumi", blob)
    with pytest.raises(FormatError):
        rumimm.open(tmp_path / "x.rumi")
    with pytest.raises(FileNotFoundError):
        rumimm.open(tmp_path / "missing.rumi", blob)
    with pytest.raises(BlobError):
        rumimm.open(path, b"not a blob")


# -- a frame is sized by its grid position, never by what it decodes to ----------------------
@pytest.mark.parametrize("native", [True, False], ids=["geozl-c", "openzl-ext"])
@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_a_frame_decoding_to_more_samples_than_its_position_holds_raises_codec_error(tmp_path, monkeypatch,
                                                                                   unit, native):
    # 7 x 5 image in 4 x 4 tiles: the last frame is a 1 x 3 edge frame; store it as a full,
    # padded 4 x 4 tile (what a GeoTIFF writer would do): its decoded length must not be trusted
    grid = Grid(7, 5, 4, 4, 2, frame_unit(unit))
    a = np.arange(2 * 5 * 7, dtype=np.uint16).reshape(2, 5, 7)
    padded = np.zeros((2, 8, 8), np.uint16)
    padded[:, :5, :7] = a
    frames = []
    for r in range(2):
        for c in range(2):
            block = a[:, r * 4:r * 4 + 4, c * 4:c * 4 + 4] if (r, c) != (1, 1) else padded[:, 4:8, 4:8]
            frames += [openzl_frame(block)] if unit == "cell" else [openzl_frame(block[b]) for b in range(2)]
    blob = assemble(tmp_path / "p.rumi", grid, frames, np.uint16)
    if not native:
        engine.load()
        monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    k = grid.frame_index(1, 1, 0)
    with rumimm.open(tmp_path / "p.rumi", blob, cache_bytes=0) as image:
        assert same(image[:, :4, :], a[:, :4, :])  # the frames of row 0 are right
        for key in (np.s_[0, 4, 4], np.s_[:, 3:5, 3:7], np.s_[:]):
            with pytest.raises(CodecError, match=rf"frame {k} of {grid.n_frames} \(row 1, col 1"):
                image[key]
        with pytest.raises(CodecError, match=rf"frame {k}\b"):
            read_frames(image, [k])
    rep = rumimm.validate(tmp_path / "p.rumi", decode=True)
    assert rep.violations and rep.violations[0].startswith(f"frame {k}"), rep.violations


# -- open(path, header=): the cheap checks that the blob describes this file ------------------
def _lie(blob, **over) -> bytes:
    """``blob`` with fields replaced, the frame byte counts kept (so the file size still matches)."""
    h = Header.parse(blob)
    g = h.grid
    fields = {"image_width": g.image_width, "image_length": g.image_length, "tile_width": g.tile_width,
              "tile_length": g.tile_length, "samples_per_pixel": g.samples_per_pixel, "unit": g.unit}
    enc = over.pop("encoding", h.encoding)
    fields.update(over)
    grid = Grid(fields["image_width"], fields["image_length"], fields["tile_width"], fields["tile_length"],
                fields["samples_per_pixel"], fields["unit"])
    assert grid.n_frames == g.n_frames and grid.base_frame_offset == g.base_frame_offset
    return build_header(grid, enc, np.array(h.frame_byte_counts))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("image_width", 50, "image_width is 53 in the file but 50 in the blob"),
    ("image_length", 40, "image_length is 37 in the file but 40 in the blob"),
    ("tile_width", 14, "tile_width is 16 in the file but 14 in the blob"),
    ("tile_length", 13, "tile_length is 16 in the file but 13 in the blob"),
    ("samples_per_pixel", 4, "samples_per_pixel is 3 in the file but 4 in the blob"),
    ("encoding", encoding_for_dtype(np.int16), "\\(sample_format, bits_per_sample\\) is \\(1, 16\\) in the file but "
                                               "\\(2, 16\\) in the blob"),
])
def test_a_blob_that_differs_from_the_file_in_one_fixed_field_is_refused(tmp_path, scene, field, value, message):
    path = tmp_path / "c.rumi"
    blob = write(path, scene, tile=TILE, unit="cell")  # cell frames: N does not depend on B
    with pytest.raises(BlobError, match=f"^{path}: the header blob does not describe this file: {message}$"):
        rumimm.open(path, _lie(blob, **{field: value}))


def test_a_blob_with_the_wrong_sample_pair_is_refused_when_the_pairs_are_stored_after_the_ifd(tmp_path):
    a = eo_scene(5, 20, 20, dtype="uint16", seed=2)  # B = 5: BitsPerSample and SampleFormat are external
    blob = write(tmp_path / "b5.rumi", a, tile=8)
    for enc, msg in ((encoding_for_dtype(np.int16), "\\(1, 16\\) in the file but \\(2, 16\\)"),
                     (encoding_for_dtype(np.float16), "\\(1, 16\\) in the file but \\(3, 16\\)")):
        with pytest.raises(BlobError, match=msg):
            rumimm.open(tmp_path / "b5.rumi", _lie(blob, encoding=enc))
    with rumimm.open(tmp_path / "b5.rumi", blob) as image:
        assert same(image[:], a)


def test_a_blob_with_the_other_frame_unit_is_refused_by_the_tileoffsets_entry_count(tmp_path, scene):
    path = tmp_path / "t.rumi"
    blob = write(path, scene, tile=TILE, unit="tile")  # 36 tile frames
    h = Header.parse(blob)
    cell = Grid(53, 37, 16, 16, 3, frame_unit("cell"))  # 12 cell frames
    total = h.file_size - cell.base_frame_offset  # same file size, so only the entry count can tell
    counts = np.full(12, total // 12, np.int64)
    counts[: total % 12] += 1
    lie = build_header(cell, h.encoding, counts)
    assert Header.parse(lie).file_size == h.file_size
    with pytest.raises(BlobError, match="frame count is 36 in the file but 12 in the blob"):
        rumimm.open(path, lie)


def test_open_with_a_header_checks_that_frame_0_starts_with_an_openzl_magic(tmp_path, scene):
    path = tmp_path / "m.rumi"
    blob = write(path, scene, tile=TILE)
    base = Header.parse(blob).base_frame_offset
    data = bytearray(path.read_bytes())
    data[base:base + 4] = b"\x28\xb5\x2f\xfd"  # a zstd frame magic
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="frame 0 does not start with an OpenZL frame magic \\(found 0xfd2fb528\\)"):
        rumimm.open(path, blob)
    with pytest.raises(FormatError, match=r"frame 0 .* does not start with an OpenZL frame magic"):
        rumimm.open(path)


@pytest.mark.parametrize("tail", [b"\0", b"\0" * 4096, b"II*\0"])
def test_a_file_with_bytes_after_its_last_frame_is_refused_with_or_without_the_blob(tmp_path, scene, tail):
    # the file is its prefix and one run of frames; the blob's end of the last frame is the file size
    path = tmp_path / "tail.rumi"
    blob = write(path, scene, tile=TILE)
    path.write_bytes(path.read_bytes() + tail)
    with pytest.raises(BlobError, match=f"file has {Header.parse(blob).file_size + len(tail)} bytes but the "
                                        f"header blob's frames end at byte {Header.parse(blob).file_size}"):
        rumimm.open(path, blob)
    with pytest.raises(FormatError, match=f"{len(tail)} bytes follow the last frame"):
        rumimm.open(path)


def _crafted(tmp_path, change, shape=(3, 20, 30)):
    """A crafted file broken by ``change`` without moving a byte, and the blob of the unbroken file."""
    from conftest import craft

    c = craft(shape, 8, "tile", "uint16")
    blob = c.blob
    change(c)
    return c.write(tmp_path / "x.rumi"), blob


@pytest.mark.parametrize(("change", "error", "message"), [
    (set_entry(322, type=8), BlobError, "IFD entry 4 is tag 322, type 8, count 1; expected tag 322 \\(TILE_WIDTH\\), "
                                         "type SHORT \\(3\\), count 1"),
    (set_entry(256, type=3, data=(30).to_bytes(2, "little")), BlobError, "IFD entry 0 is tag 256, type 3"),
    (set_entry(34264, tag=34735), BlobError, "IFD entry 9 is tag 34735, type 12"),
    (set_entry(34264, pointer=16), BlobError, "tag 34264 \\(MODEL_TRANSFORMATION\\) value is at byte 16, expected 684"),
    (set_entry(258, data=struct.pack("<3H", 16, 16, 8)), BlobError,
     "tag 258 \\(BITS_PER_SAMPLE\\) holds \\(16, 16, 8\\), the blob gives \\(16, 16, 16\\)"),
    (lambda c: setattr(c, "next_ifd", 16), FormatError, "next-IFD offset is 16; a rumi file has exactly one IFD"),
], ids=["type", "ImageWidth as SHORT", "tag id", "pointer", "one band's BitsPerSample", "second IFD"])
def test_open_with_a_header_compares_the_whole_ifd_with_the_one_the_blob_implies(tmp_path, change, error, message):
    path, blob = _crafted(tmp_path, change)
    with pytest.raises(error, match=message):
        rumimm.open(path, blob)
    with pytest.raises(FormatError):
        rumimm.open(path)  # and index() rejects the file too


@pytest.mark.parametrize(("shape", "tag", "values", "message"), [
    ((1, 8, 8), 324, [413], "tag 324 \\(TILE_OFFSETS\\) holds \\(413,\\), the blob gives \\(412,\\)"),  # N = 1
    ((1, 8, 16), 325, "swap", "tag 325 \\(TILE_BYTE_COUNTS\\) holds \\((\\d+), (\\d+)\\), the blob gives "
                               "\\(\\2, \\1\\)"),  # N = 2
])
def test_open_with_a_header_compares_inline_frame_offsets_and_byte_counts(tmp_path, shape, tag, values, message):
    from conftest import craft

    c = craft(shape, 8, "tile", "uint8", seed=3)
    blob = c.blob
    if values == "swap":
        assert c.counts[0] != c.counts[1]
        # the blob's counts in the other order: same size, same frame 0, only the inline counts differ
        blob = build_header(c.grid, c.enc, c.counts[::-1])
    else:
        c.set_values(tag, values, type=16)
    path = c.write(tmp_path / "n.rumi")
    with pytest.raises(BlobError, match=message):
        rumimm.open(path, blob)


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 8, 16)], ids=["one frame", "two frames"])
def test_a_first_frame_too_short_for_a_magic_raises_format_error_with_or_without_the_blob(tmp_path, shape):
    # a one-frame file ends 2 bytes after base_frame_offset: reading a 4-byte magic there overran the file
    from conftest import craft

    c = craft(shape, 8, "tile", "uint8")
    c.frames[0] = b"ab"
    path = c.write(tmp_path / "short.rumi")
    for header in (c.blob, None):
        with pytest.raises(FormatError, match="frame 0 is 2 bytes, too short to be an OpenZL frame"):
            rumimm.open(path, header)


@pytest.mark.parametrize("native", [True, False], ids=["geozl-c", "openzl-ext"])
def test_a_frame_of_another_openzl_format_version_raises_codec_error_on_the_header_path(tmp_path, monkeypatch,
                                                                                         native):
    # index() and validate() reject the file; with its blob only reading the odd frame can tell
    grid = Grid(8, 4, 4, 4, 1, frame_unit("tile"))
    a = np.arange(32, dtype=np.uint16).reshape(4, 8)
    frames = [openzl_frame(a[:, :4], 24), openzl_frame(np.ascontiguousarray(a[:, 4:]), 23)]
    blob = assemble(tmp_path / "v.rumi", grid, frames, np.uint16)
    with pytest.raises(FormatError, match="frame 1 uses OpenZL format version 23 but frame 0 uses 24"):
        rumimm.open(tmp_path / "v.rumi")
    if not native:
        engine.load()
        monkeypatch.setattr(engine, "_NATIVE", False)  # as without geozl's library
    for cache_bytes in (0, None):
        with rumimm.open(tmp_path / "v.rumi", blob, cache_bytes=cache_bytes) as image:
            assert same(image[0, :, :4], a[:, :4])
            for key in (np.s_[0, :, 4:], np.s_[:]):
                with pytest.raises(CodecError, match=r"frame 1 of 2 \(row 0, col 1, band 0\) starts with 0xd7b1a5d7 "
                                                     r"but frame 0 with 0xd7b1a5d8 \(OpenZL format version 24\)"):
                    image[key]


# -- the file mapping is never unmapped under an array still using it ------------------------
_CRASH_SCRIPT = r"""
import sys, threading, time
import numpy as np
import rumimm
from rumimm.errors import RumiError
path, blob_path, mode = sys.argv[1:4]
blob = open(blob_path, "rb").read()
if mode == "traceback":
    # open() fails in _check_prefix; the traceback's frames still hold views of the map
    bad = bytearray(blob)
    bad[6:10] = (int.from_bytes(bad[6:10], "little") - 1).to_bytes(4, "little")  # image_width - 1
    try:
        rumimm.open(path, bytes(bad))
    except RumiError as exc:
        tb, total = exc.__traceback__, 0
        while tb is not None:  # what a debugger or a logger capturing locals does
            for v in list(tb.tb_frame.f_locals.values()):
                if isinstance(v, np.ndarray) and v.dtype == np.uint8 and v.size > 300:
                    total += int(v[:300].sum())
            tb = tb.tb_next
        print("ok", total)
else:
    # close() while another thread is decoding from the map
    for trial in range(12):
        img = rumimm.open(path, blob, cache_bytes=0)
        def read():
            try:
                for _ in range(4):
                    img[:]
                    img[0, :100, :100]  # a chip: copied out of the file through its descriptor
            except RumiError:
                pass
        t = threading.Thread(target=read)
        t.start()
        time.sleep(0.004 * (trial % 4))
        img.close()
        t.join()
    print("ok")
"""


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["traceback", "close during a read"])
def test_the_file_mapping_outlives_every_array_of_it(tmp_path, mode):
    # np.memmap's arrays hold no buffer export, so closing its mmap unmapped memory still in use
    # (a segfault, in a child process here); np.frombuffer's do, and close() leaves the map to them
    a = eo_scene(2, 512, 512, dtype="uint16", seed=3)
    blob = write(tmp_path / "m.rumi", a, tile=128)
    (tmp_path / "m.blob").write_bytes(blob)
    script = tmp_path / "crash.py"
    script.write_text(_CRASH_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "m.rumi"), str(tmp_path / "m.blob"),
                          mode.split()[0]], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.startswith("ok")


DUP_FD = sys.version_info < (3, 13)  # Python's mmap keeps a duplicate descriptor before 3.13


def _held_by_process(path, since=(0, 0)) -> tuple[int, int]:
    """(open descriptors, mapped regions) of this process on ``path`` (Linux /proc), minus ``since``."""
    gc.collect()  # images an earlier test left unclosed
    real = os.path.realpath(path)
    fds = sum(1 for fd in os.listdir("/proc/self/fd") if _readlink(f"/proc/self/fd/{fd}") == real)
    with open("/proc/self/maps") as fh:
        maps = sum(1 for line in fh if line.rstrip("\n").endswith(" " + real))
    return fds - since[0], maps - since[1]


def _readlink(p):
    try:
        return os.readlink(p)
    except OSError:
        return None


@pytest.mark.slow
def test_close_releases_the_descriptor_and_the_mapping_at_once(written):
    path, blob, _ = written
    for header in (blob, None):
        for cache_bytes in (0, None):
            before = _held_by_process(path)
            image = rumimm.open(path, header, cache_bytes=cache_bytes)
            image[:, :3, :3]
            image[:]  # the kernels' read maps the file
            _ = image.crs
            assert _held_by_process(path, before) == (1 + DUP_FD, 1)
            image.close()
            assert _held_by_process(path, before) == (0, 0)


@pytest.mark.slow
def test_a_chip_read_copies_frames_out_and_never_maps_the_file(written, scene):
    path, blob, _ = written
    before = _held_by_process(path)
    with rumimm.open(path, blob, cache_bytes=0) as image:
        assert same(image[:, 5:15, 20:30], scene[:, 5:15, 20:30])  # 3 frames (1 for cells)
        assert same(image[0, 30:, 40:], scene[0, 30:, 40:])  # an edge frame
        assert image.crs == image.crs
        assert _held_by_process(path, before) == (1, 0)
        assert same(image[:], scene)
        assert _held_by_process(path, before) == (1 + DUP_FD, 1)
    assert _held_by_process(path, before) == (0, 0)


def test_a_short_text_file_and_a_fifo_get_the_messages_every_command_gives(tmp_path):
    (tmp_path / "short.txt").write_bytes(b"hello\n")
    for call in (rumimm.open, rumimm.build_blob):
        with pytest.raises(FormatError, match=r"not a TIFF file \(starts with b'he', expected b'II'\)"):
            call(tmp_path / "short.txt")  # not "file is 6 bytes, shorter than the 16-byte BigTIFF header"
    (tmp_path / "short.tif").write_bytes(b"II+\x00\x08\x00")
    with pytest.raises(FormatError, match="file is 6 bytes, shorter than the 16-byte BigTIFF header"):
        rumimm.open(tmp_path / "short.tif")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.rumi")
        with pytest.raises(FormatError, match=r"not a regular file \(a FIFO, socket or device\)$"):
            rumimm.open(tmp_path / "pipe.rumi")


def test_a_file_truncated_after_open_fails_a_chip_read_with_a_clear_error(copy_of):
    path, blob, _ = copy_of
    with rumimm.open(path, blob, cache_bytes=0) as image:
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) // 2)
        with pytest.raises(FormatError, match="truncated after it was opened"):
            image[0, -3:, -3:]  # a chip: read with pread
        with pytest.raises(FormatError, match="truncated after it was opened"):
            image[:]  # the kernels: the file is mapped first


_FORK_WHILE_MAPPING = r"""
import os, signal, sys, threading, time
import numpy as np
import rumimm
from rumimm.store import local as mapped
path, blob = sys.argv[1], bytes.fromhex(sys.argv[2])
slow = mapped._mmap
def _slow_mmap(*args, **kw):
    time.sleep(0.3)  # a thread is inside LocalStore.mapping() when the process forks
    return slow(*args, **kw)
mapped._mmap = _slow_mmap
img = rumimm.open(path, blob, cache_bytes=0)
t = threading.Thread(target=lambda: img[:])
t.start()
time.sleep(0.1)
pid = os.fork()
if pid == 0:
    signal.alarm(20)  # a deadlocked child dies of SIGALRM instead of hanging
    os._exit(0 if np.array_equal(img[:], np.load(sys.argv[3])) else 3)
t.join()
print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_maps_the_file_reads_it(written, scene, tmp_path):
    path, blob, _ = written
    np.save(tmp_path / "want.npy", scene)
    script = tmp_path / "probe.py"
    script.write_text(_FORK_WHILE_MAPPING)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(script), str(path), blob.hex(), str(tmp_path / "want.npy")],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["0"]
