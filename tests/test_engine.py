"""The read engine as a process sees it: what loads when, forks, kernel caching, opening safely."""

from __future__ import annotations

import json
import os
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
@pytest.mark.slow
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
        rumimm.build_blob({str(path)!r})
        print(after_import, loaded(), meta[0], meta[3], meta[5], meta2)
    """
    out = _run(code)
    assert out.split("]")[0] + "]" == "[]"
    assert out.startswith("[] [] (3, 600, 700) EPSG:32633 True ((3, 600, 700), 'EPSG:32633')"), out


@pytest.mark.slow
def test_issue_18_ml_dtypes_loads_only_for_a_file_whose_sample_type_needs_it(tmp_path, scene_file):
    # ml_dtypes 0.7's import alone costs about a second: a uint16 user must never pay it
    path, blob, _a = scene_file
    bf = (np.arange(2 * 300 * 280, dtype=np.float32).reshape(2, 300, 280) / 7).astype(rumimm.DTYPES["bfloat16"])
    bf_blob = rumimm.write(tmp_path / "bf16.rumi", bf, tile=128)
    np.save(tmp_path / "bf16_bits.npy", bf.view(np.uint16))
    code = f"""
        import sys
        import numpy as np
        import rumimm
        from rumimm.reader import jit
        a = (np.arange(3 * 600 * 700) % 5003).astype(np.uint16).reshape(3, 600, 700)
        with rumimm.open({str(path)!r}, header=bytes.fromhex("{blob.hex()}")) as img:
            meta = (img.shape, str(img.dtype), img.crs is not None, len(img.to_dict()))
            ok = [np.array_equal(img[1, 100:164, 200:264], a[1, 100:164, 200:264]),
                  np.array_equal(img[:, 100:400, 200:500], a[:, 100:400, 200:500])]
        jit.wait()  # numba and the kernels, loaded on their thread, import no ml_dtypes either
        rumimm.validate({str(path)!r}, header=bytes.fromhex("{blob.hex()}"))
        before = "ml_dtypes" in sys.modules
        with rumimm.open({str(tmp_path / "bf16.rumi")!r}, header=bytes.fromhex("{bf_blob.hex()}")) as img:
            bits = np.load({str(tmp_path / "bf16_bits.npy")!r})
            got = img[:, 40:290, 10:270]
            ok.append(np.array_equal(got.view(np.uint16), bits[:, 40:290, 10:270]))
            print(all(ok), meta[1], before, str(got.dtype), "ml_dtypes" in sys.modules)
    """
    assert _run(code).split() == ["True", "uint16", "False", "bfloat16", "True"]


@pytest.mark.slow
def test_reading_chips_loads_no_numba_and_a_larger_read_starts_loading_it(scene_file):
    path, blob, _a = scene_file
    code = f"""
        import sys
        import numpy as np
        import rumimm
        from rumimm.reader import jit
        from rumimm.reader.image import read_frames
        a = (np.arange(3 * 600 * 700) % 5003).astype(np.uint16).reshape(3, 600, 700)
        with rumimm.open({str(path)!r}, header=bytes.fromhex("{blob.hex()}")) as img:
            ok = [np.array_equal(img[k], a[k]) for k in (np.s_[1, 100:164, 200:264], np.s_[0:2, 250:262, 0:64],
                                                         np.s_[:, 599, 699], np.s_[2, 240:270, 250:260])]
            ok.append(np.array_equal(read_frames(img, [0])[0], a[0, :256, :256]))  # whole frames: no numba either
            chips = ("numba" in sys.modules, jit.state())
            ok.append(np.array_equal(img[:, 100:400, 200:500], a[:, 100:400, 200:500]))  # 12 frames
            started = jit.state()
            jit.wait()
            ok.append(np.array_equal(img[:, 100:400, 200:500], a[:, 100:400, 200:500]))  # now through the kernels
            print(all(ok), *chips, started in ("loading", "ready"), "numba" in sys.modules)
    """
    assert _run(code).split() == ["True", "False", "idle", "True", "True"]


@pytest.mark.slow
def test_a_read_larger_than_the_loading_limit_waits_for_the_kernels(scene_file):
    path, blob, _a = scene_file
    code = f"""
        import numpy as np
        import rumimm
        from rumimm.reader import engine, jit
        a = (np.arange(3 * 600 * 700) % 5003).astype(np.uint16).reshape(3, 600, 700)
        engine.LOADING_READ_BYTES = 27 * 256 * 256 * 2 - 1  # one byte under the bound of the window below:
        # 3 x 3 grid positions (a 300-pixel run can touch 3 tiles of 256) x 3 bands of 256 x 256 uint16
        with rumimm.open({str(path)!r}, header=bytes.fromhex("{blob.hex()}")) as img:
            ok = np.array_equal(img[:, 100:400, 200:500], a[:, 100:400, 200:500])
            print(ok, jit.state())
    """
    assert _run(code).split() == ["True", "ready"]


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
        a = img[1, 10:74, 20:84]          # a chip: no kernels
        b = img[:, :, :]                   # starts the loader: plan_batch, decode_copy
        c = rumimm.Cube([img, img])[:, :, 5:40, 300:330]
    rumimm.parse_blobs([blob, blob])       # waits for the loader; check_blobs
    K = engine.load()
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
    want = {"plan_batch", "decode_copy", "check_blobs"}
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
@pytest.mark.parametrize(("key", "index"), [("1, 100:164, 200:264", np.s_[1, 100:164, 200:264]),
                                       (":, 100:400, 200:500", np.s_[:, 100:400, 200:500])],
                         ids=["chip without numba", "12 frames while the kernels load"])
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


_FORK_DURING_LOAD = """
    import os, signal, time
    import numpy as np
    import rumimm
    from rumimm.reader import engine, jit
    path, blob = {path!r}, bytes.fromhex("{blob}")
    want = np.load({want!r})
    img = rumimm.open(path, blob, cache_bytes=0)
    first = np.array_equal(img[:, 100:400, 200:500], want)  # 12 frames: starts the loader, reads without it
    forks = []  # (pid, the parent's loader state once fork returned)

    def fork():
        pid = os.fork()
        if pid == 0:
            signal.alarm({timeout})  # a deadlocked child dies of SIGALRM instead of hanging
            engine.LOADING_READ_BYTES = 0  # every read is "large": only the fork rule keeps it off numba
            ok = np.array_equal(img[:, 100:400, 200:500], want)
            ok = ok and all(np.array_equal(c, want) for c in rumimm.Cube([img, img])[:, :, 100:400, 200:500])
            off = jit.state() == "off"
            blobs = [bytes.fromhex(h) for h in {blobs!r}]
            got = rumimm.parse_blobs(blobs, errors="status")  # the batch blob check, numpy blob by blob when off
            ok = ok and {{k: v.tolist() for k, v in got.items()}} == {checked!r}
            if off:
                try:
                    jit.wait()
                    ok = False
                except rumimm.RumiError:
                    pass
            os._exit((11 if off else 10) if ok else 3)
        forks.append((pid, jit.state()))

    delay = 0.02
    while len(forks) < 10 and jit.state() == "loading":
        fork()
        time.sleep(delay)
        delay *= 1.4
    jit.wait()
    fork()
    codes = [(state, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])) for pid, state in forks]
    print(first, codes)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_while_the_kernels_compile_does_not_wait_and_the_child_reads_without_them(tmp_path, scene_file):
    # An empty numba cache: the parent compiles on its loader thread while the main thread forks.
    path, blob, a = scene_file
    want = tmp_path / "want.npy"
    np.save(want, a[:, 100:400, 200:500])
    blobs = [blob, blob[:20], b"XXXX" + blob[4:], blob + b"\0", bytes(28), blob[:4] + bytes([9]) + blob[5:]]
    checked = {k: v.tolist() for k, v in rumimm.parse_blobs(blobs, errors="status").items()}
    assert sorted(set(checked["status"])) == [0, 1, 2, 3, 9]  # valid, short, bad magic, bad version, bad size
    code = _FORK_DURING_LOAD.format(path=str(path), blob=blob.hex(), want=str(want), timeout=120,
                                    blobs=[b.hex() for b in blobs], checked=checked)
    out = _run(code, env={"NUMBA_CACHE_DIR": str(tmp_path / "cache"), "RUMIMM_NUM_THREADS": "2"}, timeout=400)
    first, codes = out.split(" ", 1)
    codes = eval(codes)
    assert first == "True"
    # a fork returned while the loader still ran (so it did not wait for it); that child read every window
    # right without numba and refuses to load it; children forked once it was ready read with the kernels
    assert any(state == "loading" for state, _ in codes), codes
    assert all(code == 11 for state, code in codes if state == "loading"), codes
    assert all(code == 10 for state, code in codes if state == "ready"), codes
    assert codes[-1][0] == "ready", codes


_FORK_AS_NUMBA_IMPORTS_NUMPY_MA = """
    import os, signal, sys, time
    import numpy as np
    import rumimm
    from rumimm.reader import jit
    path, blob = {path!r}, bytes.fromhex("{blob}")
    want = np.load({want!r})
    imgs = [rumimm.open(path, blob, cache_bytes=0) for _ in range(3)]
    first = np.array_equal(imgs[0][:, 100:400, 200:500], want)  # 12 frames: starts the kernels' loader
    t0 = time.time()
    while "numpy.ma" not in sys.modules and time.time() - t0 < 30:
        pass  # the loader's numba imports numpy.ma: fork as it starts, holding the module's import lock
    state = jit.state()
    pid = os.fork()
    if pid == 0:
        signal.alarm({timeout})  # a deadlocked child dies of SIGALRM instead of hanging
        got = rumimm.read_batch(imgs, np.array([[100, 200], [100, 200], [100, 200]]), size=(300, 300))
        os._exit(0 if all(np.array_equal(g, want) for g in got) else 3)
    print(first, state, os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_as_the_kernels_loader_imports_numpy_ma_reads_a_batch(tmp_path, scene_file):
    """numba imports numpy.ma lazily; np.unique on a batch's read path needs it: a child forked while the
    loader held its import lock waited on it forever (5 forks of 5), until the engine imported it first."""
    path, blob, a = scene_file
    want = tmp_path / "want.npy"
    np.save(want, a[:, 100:400, 200:500])
    for _ in range(3):
        code = _FORK_AS_NUMBA_IMPORTS_NUMPY_MA.format(path=str(path), blob=blob.hex(), want=str(want), timeout=60)
        first, state, child = _run(code, env={"NUMBA_CACHE_DIR": str(tmp_path / "cache")}, timeout=300).split()
        assert (first, child) == ("True", "0"), state


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


def test_a_tiny_blob_claiming_millions_of_frames_is_refused_without_a_large_allocation(tmp_path, scene_file):
    path, _blob, _ = scene_file
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


@pytest.mark.slow
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
                blob = rumimm.build_blob(target)
                rep = rumimm.validate(target)
                assert rep.ok, str(rep)
                with rumimm.open(target) as img:
                    assert img.shape in ((2, 300, 300), (2, 500, 500))
                assert blob in (rumimm.build_blob(a), rumimm.build_blob(b))
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


# -- reads while the kernels load ---------------------------------------------------------------
def test_reads_without_the_kernels_equal_reads_through_them(tmp_path, monkeypatch):
    # while the kernels load, windows and batches go to the chip executor: every pixel must be the same
    from rumimm.reader import engine

    rng = np.random.default_rng(18)
    tiles = rng.integers(0, 60000, (4, 150, 170), dtype=np.uint16)
    cells = rng.integers(-9, 9, (3, 130, 120), dtype=np.int8)
    paths = {}
    for name, arr, unit in (("tile", tiles, "tile"), ("cell", cells, "cell")):
        blob = rumimm.write(tmp_path / f"{name}.rumi", arr, tile=32, unit=unit)
        paths[name] = (tmp_path / f"{name}.rumi", blob, arr)

    def reads():
        got = []
        for path, blob, arr in paths.values():
            with rumimm.open(path, header=blob, cache_bytes=0) as img:
                got += [img[:, 10:140, 5:160], img[[2, 0], 3:149:4, 7:111:3], img[1, ::-2, 40:100]]
                other = rumimm.open(path, header=blob, cache_bytes=0)
                got.append(rumimm.Cube([img, other, img])[:, :, 33:97, 60:101])
                got.append(rumimm.read_batch([img, other], [((0, 70), (20, 90)), ((60, 130), (40, 110))],
                                             bands=[0, 2]))
                out = np.zeros((2, 2, 70, 70, 2), arr.dtype)[..., 0]  # a strided out: items are not contiguous
                rumimm.read_batch([img, img], [((5, 75), (9, 79)), ((50, 120), (1, 71))], bands=[1, 0], out=out)
                got.append(out.copy())
                other.close()
        return got

    engine.load()
    through = reads()
    chip_reads = []
    read_small = engine._small.read_small
    monkeypatch.setattr(engine._small, "read_small", lambda *a: chip_reads.append(1) or read_small(*a))
    monkeypatch.setattr(engine, "_without_kernels", lambda nbytes: True)
    without = reads()
    assert len(chip_reads) >= 14  # 2 files x (3 windows + 3 Cube windows + 2 + 2 batch windows)
    assert len(through) == len(without) == 12
    for a, b in zip(through, without, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert np.array_equal(through[0], tiles[:, 10:140, 5:160]) and np.array_equal(through[6], cells[:, 10:140, 5:160])


def test_chip_spans_are_the_segments_of_a_step_of_one():
    """The chip executor's step-1 tiling (``engine._spans``, no numpy) gives ``window.segments``' rows exactly."""
    from rumimm.format.window import segments
    from rumimm.reader import engine

    for tile in (1, 7, 16, 512):
        for size in (1, 15, 16, 17, 40, 1100):
            for start in range(0, size, max(1, size // 9)):
                for count in {1, 2, tile - 1, tile, tile + 1, size - start} - {0}:
                    if 0 < count <= size - start:
                        want = [tuple(r) for r in segments(start, 1, count, tile, size).tolist()]
                        assert engine._spans(start, count, tile) == want, (start, count, tile, size)
