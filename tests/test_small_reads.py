"""Small reads (geozl's decoder through ctypes, no numba) against the kernels' reads.

A window of at most ``engine.SMALL_READ_FRAMES`` frames is read without numba; every
other read goes through the kernels.  Both must give the same pixels and the same
errors: each test reads the same keys with the limit as shipped, with 0 (everything
through the kernels) and with a huge limit (everything through the small path).
"""

from __future__ import annotations

import numpy as np
import pytest

import rumimm
from rumimm.errors import CodecError
from rumimm.format.blob import Header
from rumimm.reader import engine

PATHS = {"as shipped": engine.SMALL_READ_FRAMES, "kernels only": 0, "small path only": 1 << 30}
KEYS = (
    np.s_[:], np.s_[1], np.s_[0, 3:9, 4:12], np.s_[:, 5:20, 6:19], np.s_[2, 7:30, 13:40],
    np.s_[[2, 0], 9:26, 3:40:3], np.s_[1, ::4, ::-3], np.s_[:, 29, 38], np.s_[0:2, 31:, 40:],
    np.s_[1, 2:35:5, 40], np.s_[[1], 16:17, 16:32],
)


def _array(dtype, rng):
    shape = (3, 37, 41)  # 8 x 16 tiles leave ragged edge frames
    if dtype == "complex128":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(np.complex128)
    if dtype == "float32":
        return rng.normal(size=shape).astype(np.float32)
    return rng.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("dtype", ["uint16", "int8", "float32", "complex128"])
def test_small_reads_and_kernel_reads_give_the_same_pixels(tmp_path, monkeypatch, unit, dtype):
    a = _array(dtype, np.random.default_rng(3))
    blob = rumimm.write(tmp_path / "a.rumi", a, tile=(8, 16), unit=unit, threads=1)
    for name, limit in PATHS.items():
        monkeypatch.setattr(engine, "SMALL_READ_FRAMES", limit)
        for cache_bytes, verify in ((0, True), (None, True), (None, False)):
            with rumimm.open(tmp_path / "a.rumi", blob, cache_bytes=cache_bytes, verify=verify) as img:
                for key in KEYS + KEYS:  # the second pass finds the frames the cache kept
                    got = img[key]
                    assert got.dtype == a.dtype and got.shape == a[key].shape, (name, key)
                    assert got.tobytes() == a[key].tobytes(), (name, key)
                out = np.zeros((2, 6, 8), a.dtype)
                img.read([3, 2], window=((20, 26), (30, 38)), out=out)
                assert out.tobytes() == a[[2, 1], 20:26, 30:38].tobytes(), name


def _corrupt(path, blob, k, part):
    """Flip bytes of frame k: in its OpenZL header (checked before decoding) or its payload."""
    hdr = Header.parse(blob)
    start, end = int(hdr.frame_offsets[k]), int(hdr.frame_offsets[k + 1])
    if part == "payload":
        start = (start + end) // 2
    data = bytearray(path.read_bytes())
    for i in range(start + 8, end, max(1, (end - start) // 16)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    return hdr


@pytest.mark.parametrize("part", ["header", "payload"])
@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_a_corrupt_frame_raises_the_same_error_on_both_paths(tmp_path, monkeypatch, unit, part):
    a = _array("uint16", np.random.default_rng(4))
    path = tmp_path / "a.rumi"
    blob = rumimm.write(path, a, tile=(8, 16), unit=unit, threads=1)
    k = Header.parse(blob).grid.frame_index(1, 2, 0)  # rows 8:16, cols 32:41
    hdr = _corrupt(path, blob, k, part)
    messages = {}
    for name, limit in PATHS.items():
        monkeypatch.setattr(engine, "SMALL_READ_FRAMES", limit)
        for cache_bytes in (0, None):
            with rumimm.open(path, blob, cache_bytes=cache_bytes) as img:
                for key in (np.s_[0, 9:12, 33:36], np.s_[0, 4:12, 20:41]):
                    with pytest.raises(CodecError) as err:
                        img[key]
                    messages[name, cache_bytes, key[1].start] = str(err.value)
                assert img[:, 0:8, :].tobytes() == a[:, 0:8, :].tobytes()  # other frames still read
    assert len(set(messages.values())) == 1, messages
    msg = messages["as shipped", 0, 9]
    assert f"a.rumi: frame {k} of {hdr.n_frames} (row 1, col 2" in msg
    assert ("unreadable header" if part == "header" else "failed to decode (OpenZL:") in msg


@pytest.mark.parametrize("unit", ["tile", "cell"])
def test_small_reads_on_two_threads_give_the_same_pixels_decoded_or_cached(tmp_path, monkeypatch, unit):
    # chips of 1 MiB or more of new frames decode on the decode threads (the chip executor, reader.small_reads);
    # the threshold is lowered so that these small frames take that path, read twice: decoded, then cached
    from rumimm.reader import small_reads, threads

    a = _array("uint16", np.random.default_rng(5))
    blob = rumimm.write(tmp_path / "a.rumi", a, tile=(8, 16), unit=unit, threads=1)
    monkeypatch.setattr(engine, "SMALL_READ_FRAMES", 1 << 30)
    engine._load_decoder()
    monkeypatch.setattr(small_reads, "PARALLEL_MIN_BYTES", 0)
    before = threads.get_num_threads()
    threads.set_num_threads(2)
    try:
        for cache_bytes in (0, None, 1 << 20):
            with rumimm.open(tmp_path / "a.rumi", blob, cache_bytes=cache_bytes) as img:
                for key in KEYS + KEYS:
                    assert img[key].tobytes() == a[key].tobytes(), (cache_bytes, key)
    finally:
        threads.set_num_threads(before)
