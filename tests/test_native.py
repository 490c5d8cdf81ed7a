"""Tests for rumimm._native: GIL-free OpenZL decoding through libgeozl.

Frames are made with openzl.ext (built-in codecs) and with geozl (geozl codecs);
every decode is checked against the source array and against openzl.ext's decoder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import geozl
import numpy as np
import openzl.ext as zl
import pytest

from rumimm import _native as nat

ROOT = Path(__file__).resolve().parents[1]
FORMAT_VERSION = 24
GUARD = 4096
GUARD_BYTE = 0xA5
WIDTH_DTYPES = {1: np.uint8, 2: np.uint16, 4: np.float32, 8: np.float64}


# --------------------------------------------------------------------------- frames


def _graph(comp, name):
    if name == "compress":
        return zl.graphs.Compress()(comp)
    if name == "delta":
        return zl.nodes.DeltaInt()(comp, zl.nodes.Zigzag()(comp, zl.graphs.Huffman()(comp)))
    if name == "delta_compress":  # Huffman takes widths 1 and 2 only
        return zl.nodes.DeltaInt()(comp, zl.nodes.Zigzag()(comp, zl.graphs.Compress()(comp)))
    if name == "zstd":
        return zl.graphs.Zstd()(comp)
    raise ValueError(name)


def openzl_frame(arr, graph="compress", *, kind=zl.Type.Numeric, params=()):
    """One OpenZL frame of ``arr`` at format version 24."""
    comp = zl.Compressor()
    gid = _graph(comp, graph)
    comp.select_starting_graph(gid)
    cctx = zl.CCtx()
    cctx.ref_compressor(comp)
    cctx.set_parameter(zl.CParam.FormatVersion, FORMAT_VERSION)
    for param, value in params:
        cctx.set_parameter(param, value)
    flat = np.ascontiguousarray(arr).reshape(-1)
    inp = zl.Input(kind, flat)  # holds no reference to flat: keep it alive
    frame = cctx.compress([inp])
    del inp, flat
    return frame


def geozl_frame(tile, method="planar>zigzag>entropy"):
    return geozl.compress(tile, graph=geozl.graph(tile, method))


def openzl_decode(frame) -> np.ndarray:
    """Reference decode: openzl.ext with geozl's decoders, as bytes."""
    dctx = zl.DCtx()
    geozl.register_decoders(dctx)
    (out,) = dctx.decompress(bytes(frame))
    return np.frombuffer(out.content.as_bytes(), np.uint8)


def scene_tile(rng, shape, dtype):
    """Smooth field plus noise, cast to dtype: compressible like real imagery."""
    h, w = shape
    y, x = np.mgrid[0:h, 0:w]
    field = 100 + 40 * np.sin(x / 17.0) * np.cos(y / 23.0) + rng.normal(0, 3, shape)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (field * 0.37).astype(dt)
    info = np.iinfo(dt)
    return np.clip(field, info.min, info.max).astype(dt)


def as_bytes(frame) -> np.ndarray:
    return np.frombuffer(frame, np.uint8)


def aligned_empty(nbytes, fill=None) -> np.ndarray:
    """An 8-byte aligned uint8 buffer."""
    out = np.empty((nbytes + 7) // 8, np.uint64).view(np.uint8)[:nbytes]
    if fill is not None:
        out[:] = fill
    return out


def guarded(capacity):
    """A buffer of exactly ``capacity`` bytes followed by a guard region."""
    raw = aligned_empty(capacity + GUARD, GUARD_BYTE)
    return raw, raw[:capacity]


def guard_intact(raw, capacity) -> bool:
    return bool((raw[capacity:] == GUARD_BYTE).all())


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(20260815)


@pytest.fixture(scope="module")
def tile_u16(rng):
    return scene_tile(rng, (64, 96), np.uint16)


# --------------------------------------------------------------------------- library


def test_the_library_is_found_inside_the_installed_geozl_package():
    path = nat.library_path()
    assert nat.available()
    assert path is not None and Path(path).is_file()
    assert Path(path).parent == Path(geozl.__file__).parent / "_lib"
    assert Path(path).name == "libgeozl.so"


def test_importing_the_module_loads_neither_geozl_nor_openzl():
    code = """
        import sys, rumimm
        before = set(sys.modules)
        import rumimm._native as nat
        new = {m.split('.')[0] for m in set(sys.modules) - before}
        print(sorted(new & {'geozl', 'openzl', 'cffi'}), nat.available())
    """
    out = _run(code)
    assert out.strip() == "[] True"


# --------------------------------------------------------------------------- decode_one


BUILTIN_CASES = [(w, g) for w in (1, 2, 4, 8) for g in ("compress", "zstd")] + [
    (1, "delta"), (2, "delta"), (4, "delta_compress"), (8, "delta_compress")]


@pytest.mark.parametrize(("width", "graph"), BUILTIN_CASES)
def test_a_builtin_codec_frame_decodes_to_its_source_bytes(rng, width, graph):
    tile = scene_tile(rng, (48, 80), WIDTH_DTYPES[width])
    frame = openzl_frame(tile, graph)
    dst = aligned_empty(tile.nbytes)
    assert nat.decode_one(as_bytes(frame), dst) == tile.nbytes
    assert np.array_equal(dst, tile.view(np.uint8).ravel())


@pytest.mark.parametrize("width", [1, 2, 4, 8])
@pytest.mark.parametrize("method", ["med>zigzag>pfor", "delta_w>zigzag>zstd"])
def test_a_geozl_codec_frame_decodes_to_its_source_bytes(rng, width, method):
    tile = scene_tile(rng, (64, 72), WIDTH_DTYPES[width])
    frame = geozl_frame(tile, method)
    dst = aligned_empty(tile.nbytes)
    assert nat.decode_one(as_bytes(frame), dst) == tile.nbytes
    assert np.array_equal(dst, tile.view(np.uint8).ravel())


def test_a_cell_frame_of_several_bands_decodes_to_its_source_bytes(rng):
    cell = np.stack([scene_tile(rng, (40, 40), np.int16) for _ in range(3)])
    frame = geozl_frame(cell, "planar>zigzag>entropy")
    dst = aligned_empty(cell.nbytes)
    assert nat.decode_one(as_bytes(frame), dst) == cell.nbytes
    assert np.array_equal(dst.view(np.int16).reshape(cell.shape), cell)


def test_a_width_16_struct_frame_decodes_like_complex128_storage(rng):
    values = (rng.normal(size=200) + 1j * rng.normal(size=200)).astype(np.complex128)
    comp = zl.Compressor()
    comp.select_starting_graph(zl.graphs.Compress()(comp))
    cctx = zl.CCtx()
    cctx.ref_compressor(comp)
    cctx.set_parameter(zl.CParam.FormatVersion, FORMAT_VERSION)
    # openzl.ext 0.3.0 reads a 2-d Struct input as (elt_width, num_elts)
    records = values.view(np.uint8).reshape(16, -1)
    inp = zl.Input(zl.Type.Struct, records)
    frame = cctx.compress([inp])
    del inp
    (ref,) = zl.DCtx().decompress(frame)
    assert (ref.type, ref.elt_width, ref.num_elts) == (zl.Type.Struct, 16, values.size)
    dst = aligned_empty(values.nbytes)
    assert nat.decode_one(as_bytes(frame), dst) == values.nbytes
    assert np.array_equal(dst.view(np.complex128), values)


def test_a_frame_too_large_for_the_buffer_fails_without_writing_past_it(tile_u16):
    frame = as_bytes(openzl_frame(tile_u16, "compress"))
    for short in (2, 8, tile_u16.nbytes // 2, tile_u16.nbytes - 2):
        capacity = tile_u16.nbytes - short
        raw, dst = guarded(capacity)
        assert nat.decode_one(frame, dst) == -5  # dstCapacity_tooSmall
        assert guard_intact(raw, capacity)


def test_a_buffer_not_aligned_to_the_element_width_is_refused_cleanly(tile_u16):
    frame = as_bytes(openzl_frame(tile_u16, "compress"))
    raw = aligned_empty(tile_u16.nbytes + 8)
    assert nat.decode_one(frame, raw[1:1 + tile_u16.nbytes]) == -6
    assert nat.decode_one(frame, raw[2:2 + tile_u16.nbytes]) == tile_u16.nbytes


def test_an_empty_or_garbage_source_gives_a_negative_status(rng):
    dst = aligned_empty(1024)
    assert nat.decode_one(np.empty(0, np.uint8), dst) < 0
    assert nat.decode_one(rng.integers(0, 256, 300).astype(np.uint8), dst) < 0


def _flip_each(frame, count=24):
    """Copies of frame with one payload bit flipped, at count middle positions."""
    start = frame.size // 2
    for pos in range(start, start + count):
        damaged = frame.copy()
        damaged[pos] ^= 0x10
        yield damaged


def test_checksums_are_verified_by_default(tile_u16):
    frame = as_bytes(openzl_frame(tile_u16, "delta")).copy()
    dst = aligned_empty(tile_u16.nbytes)
    slipped_through = 0
    for damaged in _flip_each(frame):
        assert nat.decode_one(damaged, dst) == -13  # compressedChecksumWrong
        assert nat.decode_one(damaged, dst, True) == -13
        # without verification the damage often decodes, silently wrong
        if nat.decode_one(damaged, dst, False) == tile_u16.nbytes:
            assert not np.array_equal(dst, tile_u16.view(np.uint8).ravel())
            slipped_through += 1
    assert slipped_through > 0


def test_verify_also_checks_the_content_checksum(tile_u16):
    params = [(zl.CParam.CompressedChecksum, 2)]  # disable: leave only content
    frame = as_bytes(openzl_frame(tile_u16, "delta", params=params)).copy()
    dst = aligned_empty(tile_u16.nbytes)
    caught_by_content = slipped_through = 0
    for damaged in _flip_each(frame):
        status = nat.decode_one(damaged, dst)
        assert status < 0
        caught_by_content += status == -14  # contentChecksumWrong
        slipped_through += nat.decode_one(damaged, dst, False) == tile_u16.nbytes
    assert caught_by_content > 0 and slipped_through > 0


def test_damaged_frames_never_write_past_the_buffer(rng, tile_u16):
    tile = tile_u16
    frames = [
        as_bytes(openzl_frame(tile, "compress")),
        as_bytes(openzl_frame(tile, "delta")),
        as_bytes(geozl_frame(tile, "planar>zigzag>entropy")),
        as_bytes(geozl_frame(tile, "med>zigzag>pfor")),
    ]
    failures = 0
    for i in range(1200):
        frame = frames[i % len(frames)].copy()
        for _ in range(int(rng.integers(1, 4))):
            frame[rng.integers(0, frame.size)] ^= np.uint8(1 << int(rng.integers(0, 8)))
        if i % 4 == 0:
            frame = frame[: int(rng.integers(1, frame.size))]
        capacity = tile.nbytes - (int(rng.integers(1, 64)) * 2 if i % 3 == 0 else 0)
        raw, dst = guarded(capacity)
        status = nat.decode_one(frame, dst, i % 2 == 0)
        assert guard_intact(raw, capacity), f"iteration {i} wrote past the buffer"
        assert status <= capacity
        failures += status < 0
    assert failures > 600  # most damage is caught


def test_truncated_frames_give_a_negative_status(tile_u16):
    frame = as_bytes(openzl_frame(tile_u16, "compress"))
    for keep in (1, 4, 8, frame.size // 3, frame.size - 1):
        raw, dst = guarded(tile_u16.nbytes)
        assert nat.decode_one(frame[:keep], dst) < 0
        assert guard_intact(raw, tile_u16.nbytes)


def test_a_frame_with_two_outputs_is_refused(rng):
    comp = zl.Compressor()
    comp.select_starting_graph(zl.graphs.Compress()(comp))
    cctx = zl.CCtx()
    cctx.ref_compressor(comp)
    cctx.set_parameter(zl.CParam.FormatVersion, FORMAT_VERSION)
    a = rng.integers(0, 9, 100).astype(np.uint8)
    b = rng.integers(0, 9, 100).astype(np.uint32)
    inputs = [zl.Input(zl.Type.Numeric, a), zl.Input(zl.Type.Numeric, b)]
    frame = cctx.compress(inputs)
    assert nat.decode_one(as_bytes(frame), aligned_empty(500)) == -8  # userBuffers_invalidNum


def test_the_output_type_is_not_checked_so_a_serial_frame_decodes_too(rng):
    # documented limitation: the C entry reports bytes, not type or elt width
    data = rng.integers(0, 256, 1000).astype(np.uint8)
    frame = openzl_frame(data, "zstd", kind=zl.Type.Serial)
    dst = aligned_empty(data.size)
    assert nat.decode_one(as_bytes(frame), dst) == data.size
    assert np.array_equal(dst, data)


# --------------------------------------------------------------------------- decode_many


def _batch(rng, count):
    """count frames of random shape, width and codec, with junk between them."""
    tiles, frames = [], []
    for i in range(count):
        width = (1, 2, 4, 8)[i % 4]
        shape = (int(rng.integers(1, 70)), int(rng.integers(1, 90)))
        tile = scene_tile(rng, shape, WIDTH_DTYPES[width])
        kind = i % 3
        if kind == 0:
            frame = openzl_frame(tile, "compress")
        elif kind == 1:
            frame = openzl_frame(tile, "zstd")
        else:
            frame = geozl_frame(tile, "delta_w>zigzag>zstd")
        tiles.append(tile)
        frames.append(frame)
    parts, offsets, pos = [], [], 0
    for frame in frames:
        gap = rng.integers(0, 256, int(rng.integers(0, 9))).astype(np.uint8).tobytes()
        parts += [gap, frame]
        pos += len(gap)
        offsets.append(pos)
        pos += len(frame)
    buf = np.frombuffer(b"".join(parts), np.uint8)
    sizes = np.array([len(f) for f in frames], np.uint64)
    dst_sizes = np.array([t.nbytes for t in tiles], np.int64)
    slots = (dst_sizes + 7) // 8 * 8
    dst_offsets = np.concatenate([[0], np.cumsum(slots)[:-1]]).astype(np.int64)
    return tiles, frames, buf, np.array(offsets, np.uint64), sizes, dst_offsets, dst_sizes


@pytest.fixture(scope="module")
def batch(rng):
    return _batch(rng, 130)


def test_decode_many_equals_a_per_frame_openzl_decode(batch):
    tiles, frames, buf, offsets, sizes, dst_offsets, dst_sizes = batch
    total = int(dst_offsets[-1] + dst_sizes[-1])
    dst = aligned_empty(total, 0)
    status = np.full(len(frames), 12345, np.int64)
    nat.decode_many(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status)
    assert np.array_equal(status, dst_sizes)
    for i, frame in enumerate(frames):
        got = dst[dst_offsets[i]: dst_offsets[i] + dst_sizes[i]]
        assert np.array_equal(got, openzl_decode(frame)), f"frame {i}"
        assert np.array_equal(got, tiles[i].view(np.uint8).ravel()), f"frame {i}"


def test_decode_many_reads_a_read_only_memory_map(batch, tmp_path):
    tiles, frames, buf, offsets, sizes, dst_offsets, dst_sizes = batch
    path = tmp_path / "frames.bin"
    buf.tofile(path)
    mm = np.memmap(path, np.uint8, mode="r")
    dst = aligned_empty(int(dst_offsets[-1] + dst_sizes[-1]))
    status = np.empty(len(frames), np.int64)
    nat.decode_many(mm, offsets, sizes, dst, dst_offsets, dst_sizes, status)
    assert np.array_equal(status, dst_sizes)
    assert np.array_equal(dst[dst_offsets[5]: dst_offsets[5] + dst_sizes[5]],
                          tiles[5].view(np.uint8).ravel())
    del mm


def test_decode_many_gives_the_same_bytes_on_one_and_on_all_threads(batch):
    tiles, frames, buf, offsets, sizes, dst_offsets, dst_sizes = batch
    total = int(dst_offsets[-1] + dst_sizes[-1])
    before = nat.get_num_threads()
    outputs = []
    try:
        for n in (1, nat.numba.config.NUMBA_NUM_THREADS):
            nat.set_num_threads(n)
            dst = aligned_empty(total, 0)
            status = nat.decode_frames(buf, offsets, sizes, dst, dst_offsets, dst_sizes)
            assert np.array_equal(status, dst_sizes)
            outputs.append(dst)
    finally:
        nat.set_num_threads(before)
    assert np.array_equal(outputs[0], outputs[1])


def test_decode_many_flags_bad_frames_and_leaves_neighbours_intact(rng, tile_u16):
    good = as_bytes(openzl_frame(tile_u16, "compress"))
    damaged = good.copy()
    damaged[damaged.size // 2] ^= 0x40
    small = scene_tile(rng, (16, 16), np.uint16)
    small_frame = as_bytes(openzl_frame(small, "compress"))
    frames = [good, damaged, good[: good.size // 2], small_frame, good, good]
    buf = np.concatenate(frames)
    sizes = np.array([f.size for f in frames], np.uint64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64)
    n = tile_u16.nbytes
    # slot 3 expects a full tile but gets a small frame; slot 4 is too small
    dst_sizes = np.array([n, n, n, n, n - 64, n], np.int64)
    dst_offsets = np.concatenate([[0], np.cumsum(dst_sizes)[:-1]]).astype(np.int64)
    total = int(dst_sizes.sum())
    raw, dst = guarded(total)
    status = np.empty(len(frames), np.int64)
    nat.decode_many(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status)
    assert status[0] == n and status[5] == n
    assert status[1] == -13 and status[2] < 0
    assert status[3] == nat.STATUS_SIZE_MISMATCH
    assert status[4] == -5
    assert guard_intact(raw, total)
    tile_bytes = tile_u16.view(np.uint8).ravel()
    assert np.array_equal(dst[dst_offsets[0]: dst_offsets[0] + n], tile_bytes)
    assert np.array_equal(dst[dst_offsets[5]: dst_offsets[5] + n], tile_bytes)


def test_decode_many_checks_ranges_before_touching_memory(tile_u16):
    frame = as_bytes(openzl_frame(tile_u16, "compress"))
    n = tile_u16.nbytes
    buf = frame.copy()
    huge = np.uint64(2**64 - 8)
    offsets = np.array([0, 1, huge, 0, 0, 0, 0], np.uint64)
    sizes = np.array([frame.size, frame.size, 16, 0, frame.size, frame.size, frame.size],
                     np.uint64)
    dst_offsets = np.array([0, 0, 0, 0, -8, 8, 2**62], np.int64)
    dst_sizes = np.array([n, n, n, n, n, n, 8], np.int64)
    raw, dst = guarded(n)
    status = np.empty(7, np.int64)
    nat.decode_many(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status)
    assert status[0] == n
    assert list(status[1:4]) == [nat.STATUS_SOURCE_RANGE] * 3
    assert list(status[4:]) == [nat.STATUS_DEST_RANGE] * 3
    assert guard_intact(raw, n)


def test_random_frames_in_a_batch_give_negative_statuses_without_overflow(rng):
    count, capacity = 120, 2048
    frames = []
    for i in range(count):
        body = rng.integers(0, 256, int(rng.integers(1, 400))).astype(np.uint8)
        if i % 2:  # a valid magic makes the decoder read further
            body[:4] = np.frombuffer((0xD7B1A5C0 + FORMAT_VERSION).to_bytes(4, "little"),
                                     np.uint8)[: body.size]
        frames.append(body)
    buf = np.concatenate(frames)
    sizes = np.array([f.size for f in frames], np.uint64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.uint64)
    dst_sizes = np.full(count, capacity, np.int64)
    dst_offsets = np.arange(count, dtype=np.int64) * capacity
    total = count * capacity
    raw, dst = guarded(total)
    status = np.empty(count, np.int64)
    nat.decode_many(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status)
    assert (status < 0).all()
    assert guard_intact(raw, total)


def test_decode_serial_gives_the_same_statuses_and_bytes_as_decode_many(batch):
    tiles, frames, buf, offsets, sizes, dst_offsets, dst_sizes = batch
    total = int(dst_offsets[-1] + dst_sizes[-1])
    results = []
    for kernel in (nat.decode_many, nat.decode_serial):
        dst = aligned_empty(total, 0)
        status = np.empty(len(frames), np.int64)
        kernel(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status)
        results.append((status, dst))
    assert np.array_equal(results[0][0], dst_sizes)
    assert np.array_equal(results[0][0], results[1][0])
    assert np.array_equal(results[0][1], results[1][1])


def test_decode_frames_coerces_arguments_and_rejects_mismatched_lengths(tile_u16):
    frame = openzl_frame(tile_u16, "compress")
    n = tile_u16.nbytes
    dst = aligned_empty(n)
    status = nat.decode_frames(frame, [0], [len(frame)], dst, [0], [n])
    assert status.tolist() == [n]
    with pytest.raises(ValueError, match="one length"):
        nat.decode_frames(frame, [0], [len(frame), 1], dst, [0], [n])
    with pytest.raises(TypeError, match="uint8"):
        nat.decode_frames(frame, [0], [len(frame)], dst.view(np.uint16), [0], [n])


def test_python_threads_can_call_decode_one_at_once(rng):
    tiles = [scene_tile(rng, (128, 128), np.uint16) for _ in range(8)]
    frames = [as_bytes(geozl_frame(t, "planar>zigzag>entropy")) for t in tiles]
    results = [None] * len(frames)

    def work(k):
        for _ in range(10):
            dst = aligned_empty(tiles[k].nbytes)
            ok = nat.decode_one(frames[k], dst) == tiles[k].nbytes
            ok = ok and np.array_equal(dst, tiles[k].view(np.uint8).ravel())
            results[k] = ok if results[k] is None else results[k] and ok

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(frames))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(results)


# --------------------------------------------------------------------------- sizes, messages


def test_frame_sizes_reports_the_declared_decoded_size(batch):
    tiles, frames, buf, offsets, sizes, dst_offsets, dst_sizes = batch
    out = np.empty(len(frames), np.uint64)
    nat.frame_sizes(buf, offsets, sizes, out)
    assert np.array_equal(out, dst_sizes.astype(np.uint64))


def test_frame_sizes_is_zero_for_garbage_and_out_of_range_frames(rng):
    buf = rng.integers(0, 256, 64).astype(np.uint8)
    offsets = np.array([0, 60, 100], np.uint64)
    sizes = np.array([64, 16, 4], np.uint64)
    out = np.full(3, 7, np.uint64)
    nat.frame_sizes(buf, offsets, sizes, out)
    assert out.tolist() == [0, 0, 0]


def test_status_messages_name_the_openzl_error_or_our_own_check():
    assert nat.status_message(-5) == "OpenZL: dstCapacity_tooSmall"
    assert nat.status_message(-13) == "OpenZL: compressedChecksumWrong"
    assert nat.status_message(-98) == "OpenZL: error code 98"
    assert "different byte count" in nat.status_message(nat.STATUS_SIZE_MISMATCH)
    assert "source buffer" in nat.status_message(nat.STATUS_SOURCE_RANGE)
    assert nat.status_message(10) == "decoded 10 bytes"


def test_error_context_returns_openzl_text_for_a_bad_frame_only(tile_u16):
    frame = as_bytes(openzl_frame(tile_u16, "delta")).copy()
    assert nat.error_context(frame) == ""
    damaged = next(_flip_each(frame))
    assert nat.decode_one(damaged, aligned_empty(tile_u16.nbytes)) == -13
    assert "checksum" in nat.error_context(damaged).lower()


# --------------------------------------------------------------------------- threads


def test_set_num_threads_changes_the_count_and_rejects_bad_values():
    before = nat.get_num_threads()
    try:
        nat.set_num_threads(1)
        assert nat.get_num_threads() == 1
        limit = nat.numba.config.NUMBA_NUM_THREADS
        for bad in (0, -1, limit + 1):
            with pytest.raises(ValueError, match="number of threads"):
                nat.set_num_threads(bad)
        with pytest.raises(TypeError):
            nat.set_num_threads(1.5)
        with pytest.raises(TypeError):
            nat.set_num_threads(True)
    finally:
        nat.set_num_threads(before)


def test_the_threading_layer_is_one_numba_ships():
    assert nat.threading_layer() in {"workqueue", "omp", "tbb"}


# --------------------------------------------------------------------------- processes


def _run(code, env=None):
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


_CACHE_PROBE = """
    import json, numpy as np
    import rumimm._native as nat
    frame = np.frombuffer(bytes.fromhex('{frame}'), np.uint8)
    n = {n}
    dst = np.empty(n, np.uint8)
    one = nat.decode_one(frame, dst)
    buf = np.concatenate([frame, frame])
    status = np.empty(2, np.int64)
    nat.decode_many(buf, np.array([0, frame.size], np.uint64),
                    np.array([frame.size] * 2, np.uint64), np.empty(2 * n, np.uint8),
                    np.array([0, n], np.int64), np.array([n, n], np.int64), status)
    serial = np.empty(2, np.int64)
    nat.decode_serial(buf, np.array([0, frame.size], np.uint64),
                      np.array([frame.size] * 2, np.uint64), np.empty(2 * n, np.uint8),
                      np.array([0, n], np.int64), np.array([n, n], np.int64), serial)
    assert serial.tolist() == status.tolist()
    sizes = np.empty(1, np.uint64)
    nat.frame_sizes(frame, np.zeros(1, np.uint64), np.array([frame.size], np.uint64), sizes)
    kernels = (nat.decode_one, nat.decode_many, nat.decode_serial, nat.frame_sizes)
    stats = {{k.__name__: [sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values())]
             for k in kernels}}
    print(json.dumps({{"ok": [int(one), status.tolist(), int(sizes[0])], "stats": stats,
                      "threads": nat.get_num_threads()}}))
"""


def test_a_second_process_loads_every_kernel_from_the_cache(tmp_path, tile_u16):
    frame = openzl_frame(tile_u16, "compress")
    n = tile_u16.nbytes
    code = _CACHE_PROBE.format(frame=frame.hex(), n=n)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "RUMIMM_NUM_THREADS": "1"}
    first = json.loads(_run(code, env))
    second = json.loads(_run(code, env))
    assert first["ok"] == second["ok"] == [n, [n, n], n]
    assert all(miss >= 1 and hit == 0 for hit, miss in first["stats"].values())
    assert all(hit >= 1 and miss == 0 for hit, miss in second["stats"].values())
    assert second["threads"] == 1  # RUMIMM_NUM_THREADS is honoured


def test_without_the_library_kernels_report_unavailable_instead_of_crashing(tile_u16):
    code = """
        import numpy as np
        import rumimm._native as nat
        frame = np.ones(64, np.uint8)
        status = np.empty(2, np.int64)
        nat.decode_many(frame, np.zeros(2, np.uint64), np.full(2, 64, np.uint64),
                        np.empty(16, np.uint8), np.array([0, 8], np.int64),
                        np.full(2, 8, np.int64), status)
        sizes = np.empty(1, np.uint64)
        nat.frame_sizes(frame, np.zeros(1, np.uint64), np.full(1, 64, np.uint64), sizes)
        try:
            nat.decode_frames(frame, [0], [64], np.empty(8, np.uint8), [0], [8])
            raised = False
        except RuntimeError:
            raised = True
        print(nat.available(), nat.library_path(), nat.decode_one(frame, np.empty(8, np.uint8)),
              status.tolist(), int(sizes[0]), raised)
    """
    out = _run(code, {"GEOZL_FULL_LIB": "/nonexistent/libgeozl.so"}).split()
    unavailable = str(nat.STATUS_UNAVAILABLE)
    assert out[:3] == ["False", "None", unavailable]
    assert "".join(out[3:5]) == f"[{unavailable},{unavailable}]"
    assert out[5:] == ["0", "True"]


_CONCURRENT_PROBE = """
    import os, threading, numpy as np
    import rumimm._native as nat
    frame = np.frombuffer(bytes.fromhex('{frame}'), np.uint8)
    n, count = {n}, 16
    buf = np.concatenate([frame] * count)
    args = (buf, np.arange(count, dtype=np.uint64) * frame.size,
            np.full(count, frame.size, np.uint64))
    slots = (np.arange(count, dtype=np.int64) * n, np.full(count, n, np.int64))

    def run():
        status = nat.decode_frames(*args, np.empty(count * n, np.uint8), *slots)
        return bool((status == n).all())

    ok = [run()]
    workers = [threading.Thread(target=lambda: ok.append(all(run() for _ in range(10))))
               for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    pid = os.fork()
    if pid == 0:
        os._exit(0 if run() else 3)
    _, code = os.waitpid(pid, 0)
    print(nat.threading_layer(), ok, os.waitstatus_to_exitcode(code))
"""


@pytest.mark.parametrize("layer", ["default", "workqueue"])
def test_decode_frames_survives_concurrent_callers_and_a_fork(tile_u16, layer):
    frame = openzl_frame(tile_u16, "compress")
    code = _CONCURRENT_PROBE.format(frame=frame.hex(), n=tile_u16.nbytes)
    env = {"RUMIMM_NUM_THREADS": "2"}
    if layer != "default":
        env["NUMBA_THREADING_LAYER"] = layer
    out = _run(code, env).split()
    assert out[1:] == ["[True,", "True,", "True]", "0"]
    if layer != "default":
        assert out[0] == layer


def test_rumimm_num_threads_must_be_a_positive_integer():
    code = """
        import rumimm._native as nat
        try:
            nat.get_num_threads()
        except ValueError as exc:
            print(exc)
    """
    out = _run(code, {"RUMIMM_NUM_THREADS": "zero"})
    assert "RUMIMM_NUM_THREADS must be a positive integer" in out
