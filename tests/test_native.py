"""Tests for rumimm.kernels.native: GIL-free OpenZL decoding through libgeozl.

Frames are made with openzl.ext (built-in codecs) and with geozl (geozl codecs);
every decode is checked against the source array and against openzl.ext's decoder.
"""

from __future__ import annotations

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

from rumimm.kernels import native as nat

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


@pytest.mark.slow
def test_binding_the_library_imports_neither_geozl_nor_cffi():
    code = """
        import sys, rumimm
        before = set(sys.modules)
        import rumimm.kernels.native as nat
        new = {m.split('.')[0] for m in set(sys.modules) - before}
        print(sorted(new & {'geozl', 'cffi'}), nat.available())
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


def test_status_messages_name_the_openzl_error_or_our_own_check():
    assert nat.status_message(-5) == "OpenZL: dstCapacity_tooSmall"
    assert nat.status_message(-13) == "OpenZL: compressedChecksumWrong"
    assert nat.status_message(-98) == "OpenZL: error code 98"
    assert "different byte count" in nat.status_message(nat.STATUS_SIZE_MISMATCH)
    assert "not available" in nat.status_message(nat.STATUS_UNAVAILABLE)
    assert nat.status_message(10) == "decoded 10 bytes"


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


@pytest.mark.slow
def test_without_the_library_the_decoder_reports_unavailable_instead_of_crashing():
    code = """
        import numpy as np
        import rumimm.kernels.native as nat
        frame = np.ones(64, np.uint8)
        print(nat.available(), nat.library_path(), nat.decode_one(frame, np.empty(8, np.uint8)))
    """
    out = _run(code, {"GEOZL_FULL_LIB": "/nonexistent/libgeozl.so"}).split()
    assert out == ["False", "None", str(nat.STATUS_UNAVAILABLE)]
