"""The read engine as a process sees it: what loads when, forks, kernel caching, opening safely."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import rumimm
from rumimm.errors import BlobError, RumiError

ROOT = Path(__file__).resolve().parents[1]


def _run(code, env=None, timeout=240):
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="module")
def scene_file(tmp_path_factory):
    a = (np.arange(3 * 600 * 700) % 5003).astype(np.uint16).reshape(3, 600, 700)
    path = tmp_path_factory.mktemp("engine") / "scene.rumi"
    blob = rumimm.write(path, a, tile=256, transform=(10.0, 0.0, 5e5, 0.0, -10.0, 4e6), crs=32633)
    return path, blob, a


# -- start-up -----------------------------------------------------------------------------
def test_opening_and_reading_metadata_load_neither_numba_nor_openzl(scene_file):
    path, blob, _ = scene_file
    code = f"""
        import sys
        import rumimm
        heavy = ("numba", "llvmlite", "openzl", "geozl")
        loaded = lambda: sorted({{m.split(".")[0] for m in sys.modules}} & set(heavy))
        after_import = loaded()
        blob = bytes.fromhex("{blob.hex()}")
        with rumimm.open({str(path)!r}, header=blob) as img:
            meta = (img.shape, str(img.dtype), img.transform, img.crs, img.bounds, bytes(img.header) == blob)
        with rumimm.open({str(path)!r}) as img:
            meta2 = (img.shape, img.crs)
        rumimm.index({str(path)!r})
        print(after_import, loaded(), meta[0], meta[3], meta[5], meta2)
    """
    out = _run(code)
    assert out.split("]")[0] + "]" == "[]"
    assert out.startswith("[] [] (3, 600, 700) EPSG:32633 True ((3, 600, 700), 'EPSG:32633')"), out


def test_reading_chips_loads_no_numba_and_a_larger_read_loads_it(scene_file):
    path, blob, a = scene_file
    code = f"""
        import sys
        import numpy as np
        import rumimm
        from rumimm.reader.image import read_frames
        a = (np.arange(3 * 600 * 700) % 5003).astype(np.uint16).reshape(3, 600, 700)
        with rumimm.open({str(path)!r}, header=bytes.fromhex("{blob.hex()}")) as img:
            ok = [np.array_equal(img[k], a[k]) for k in (np.s_[1, 100:164, 200:264], np.s_[0:2, 250:262, 0:64],
                                                         np.s_[:, 599, 699], np.s_[2, 240:270, 250:260])]
            ok.append(np.array_equal(read_frames(img, [0])[0], a[0, :256, :256]))  # whole frames: no numba either
            chips = "numba" in sys.modules
            ok.append(np.array_equal(img[:, 100:400, 200:500], a[:, 100:400, 200:500]))  # 12 frames
            print(all(ok), chips, "numba" in sys.modules)
    """
    assert _run(code).split() == ["True", "False", "True"]


def test_the_format_versions_checked_without_openzl_are_openzls_own():
    from rumimm import codec
    from rumimm.format import tiff

    assert tiff.OPENZL_FORMAT_VERSIONS == (codec.MIN_FORMAT_VERSION, codec.MAX_FORMAT_VERSION)
    assert codec.FRAME_MAGIC == tiff.OPENZL_MAGIC


_CACHE_PROBE = """
    import json, sys
    import numpy as np
    import rumimm
    from rumimm.reader import engine
    path, blob = {path!r}, bytes.fromhex("{blob}")
    with rumimm.open(path, blob, cache_bytes=0) as img:
        a = img[1, 10:74, 20:84]          # plan_window, decode_copy
        b = img[:, :, :]                   # 2 threads, > 1 MiB: decode_copy_shared
        c = rumimm.Cube([img, img])[:, :, 5:40, 300:330]   # plan_batch
    rumimm.parse_blobs([blob, blob])       # check_blobs
    K = engine.K
    used = {{}}
    for name in dir(K):
        k = getattr(K, name)
        if not name.startswith("_") and hasattr(k, "stats") and hasattr(k, "py_func"):  # callees fold into these
            hits, misses = sum(k.stats.cache_hits.values()), sum(k.stats.cache_misses.values())
            if hits or misses:
                used[name] = [hits, misses]
    print(json.dumps(used))
"""


@pytest.mark.slow
def test_a_second_process_loads_every_kernel_the_reader_runs_from_the_cache(tmp_path, scene_file):
    path, blob, _ = scene_file
    code = _CACHE_PROBE.format(path=str(path), blob=blob.hex())
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "RUMIMM_NUM_THREADS": "2"}
    first = json.loads(_run(code, env))
    second = json.loads(_run(code, env))
    want = {"plan_window", "plan_batch", "decode_copy", "check_blobs"}
    if (os.cpu_count() or 1) >= 2:
        want.add("decode_copy_shared")
    assert want <= set(first) and set(first) == set(second)
    assert all(miss >= 1 and hit == 0 for hit, miss in first.values()), first
    assert all(hit >= 1 and miss == 0 for hit, miss in second.values()), second


# -- fork safety --------------------------------------------------------------------------
_FORK_PROBE = """
    import os, signal, sys, threading, time
    import numpy as np
    import rumimm
    path, blob = {path!r}, bytes.fromhex("{blob}")
    want = np.load({want!r})
    img = rumimm.open(path, blob, cache_bytes=0)
    done = threading.Event()

    def first_read():
        img[1, 100:164, 200:264]
        done.set()

    t = threading.Thread(target=first_read)
    t0 = time.perf_counter()
    t.start()
    children = []
    delay = {step}
    while len(children) < {forks}:
        time.sleep(delay)
        pid = os.fork()
        if pid == 0:
            signal.alarm({timeout})  # a deadlocked child dies of SIGALRM instead of hanging
            ok = np.array_equal(img[1, 100:164, 200:264], want)
            os._exit(0 if ok else 3)
        children.append(pid)
        if done.is_set():
            break
    t.join()
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    print(len(children), sum(c == 0 for c in codes), round(time.perf_counter() - t0, 3), codes)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("key,index", [("1, 100:164, 200:264", np.s_[1, 100:164, 200:264]),
                                       (":, 100:400, 200:500", np.s_[:, 100:400, 200:500])],
                         ids=["chip without numba", "12 frames through the kernels"])
def test_children_forked_at_any_point_of_a_first_read_read_at_once(tmp_path, scene_file, key, index):
    path, blob, a = scene_file
    want = tmp_path / "want.npy"
    np.save(want, a[index])
    total = ok = 0
    for step in (0.0005, 0.003, 0.011):  # fork points spread over the import, load and first decode
        code = _FORK_PROBE.replace("1, 100:164, 200:264", key)
        code = code.format(path=str(path), blob=blob.hex(), want=str(want), step=step, forks=12, timeout=60)
        n, good, _, codes = _run(code, timeout=300).split(" ", 3)
        total += int(n)
        ok += int(good)
        assert int(good) == int(n), codes
    assert total >= 3 and ok == total


# -- opening --------------------------------------------------------------------------------
def test_header_may_be_the_path_of_a_blob_file(tmp_path, scene_file):
    path, blob, a = scene_file
    blob_file = tmp_path / "scene.blob"
    blob_file.write_bytes(blob)
    for header in (blob_file, str(blob_file), bytearray(blob), memoryview(blob)):
        with rumimm.open(path, header=header) as img:
            assert img.header == blob and np.array_equal(img[0, :5, :5], a[0, :5, :5])
    with pytest.raises(BlobError, match="cannot read the header blob file"):
        rumimm.open(path, header=tmp_path / "missing.blob")
    with pytest.raises(TypeError, match="header must be"):
        rumimm.open(path, header=12)


def test_unpickling_a_closed_image_gives_a_closed_image(scene_file):
    path, blob, _ = scene_file
    img = rumimm.open(path, blob)
    img.close()
    clone = pickle.loads(pickle.dumps(img))
    assert clone.closed and clone.shape == img.shape and clone.header == blob
    with pytest.raises(RumiError, match="closed"):
        clone[0, 0, 0]
    clone.close()


def test_a_tiny_blob_claiming_millions_of_frames_is_refused_without_a_large_allocation(tmp_path, scene_file):
    path, blob, _ = scene_file
    import struct

    # a 28-byte blob (count_bits 0) for a 100000 x 100000 image in 1 x 10 tiles: 10**9 frames
    hostile = struct.pack("<IHIIHHHBBBIB", 0x45564F4C, 1, 100000, 100000, 1, 10, 1, 16, 1, 0, 1, 0)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(BlobError):
            rumimm.open(path, header=hostile)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20 and time.perf_counter() - t0 < 5


def test_reads_while_the_file_is_replaced_see_one_whole_file(tmp_path):
    """index, validate and open take size and mapping from one descriptor (no false errors)."""
    small = np.arange(2 * 300 * 300, dtype=np.uint16).reshape(2, 300, 300)
    large = np.arange(2 * 500 * 500, dtype=np.uint16).reshape(2, 500, 500) * 3
    a, b = tmp_path / "a.rumi", tmp_path / "b.rumi"
    rumimm.write(a, small, tile=128)
    rumimm.write(b, large, tile=128)
    target = tmp_path / "t.rumi"
    target.write_bytes(a.read_bytes())
    stop = threading.Event()

    def replace():
        i = 0
        while not stop.is_set():
            src = (a, b)[i % 2]
            tmp = tmp_path / f"t.{i}.tmp"
            tmp.write_bytes(src.read_bytes())
            os.replace(tmp, target)
            i += 1

    t = threading.Thread(target=replace)
    t.start()
    errors, calls = [], 0
    try:
        deadline = time.perf_counter() + 2.0
        while time.perf_counter() < deadline:
            try:
                blob = rumimm.index(target)
                rep = rumimm.validate(target)
                assert rep.ok, str(rep)
                with rumimm.open(target) as img:
                    assert img.shape in ((2, 300, 300), (2, 500, 500))
                assert blob in (rumimm.index(a), rumimm.index(b))
            except (RumiError, AssertionError) as exc:
                errors.append(repr(exc))
            calls += 1
    finally:
        stop.set()
        t.join()
    assert calls > 0 and errors == []


@pytest.mark.slow
def test_a_bad_setting_is_an_error_where_it_is_used_not_at_import(scene_file):
    path, blob, _ = scene_file
    code = f"""
        import rumimm
        f = rumimm.open  # looking the name up reads no setting
        try:
            rumimm.open({str(path)!r}, {blob!r})
        except ValueError as exc:
            print("open:", exc)
        img = rumimm.open({str(path)!r}, {blob!r}, cache_bytes=0)  # a private cache reads no setting
        print(img[0, 0, 0] >= 0)
    """
    out = _run(code, {"RUMIMM_CACHE_BYTES": "abc"})
    assert "open: RUMIMM_CACHE_BYTES must be a non-negative integer, got 'abc'" in out and "True" in out
