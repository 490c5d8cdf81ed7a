"""The encoding worker pool: the same bytes as serial compression, failures in and of workers, when it is (not) used.

Worker processes and killed writers seen from outside (a child Python) are in test_writer_processes.py.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from writer_helpers import no_temp_files

import rumimm
import rumimm.writer.writer as W
from rumimm import codec
from rumimm.errors import CodecError, RumiWarning
from rumimm.writer import frame_job


# -- the process pool ---------------------------------------------------------------------
def failing_builder(compressor, enc, shape):
    """A picklable codec builder that refuses edge frames (width 5), to fail inside a worker."""
    if shape[-1] == 5:
        raise RuntimeError("edge frames refused")
    return codec.PRESETS["delta"].build(compressor, enc, shape)


def width_key(shape):
    """Graph cache key: one graph per frame width, so the builder sees the edge frames."""
    return shape[-1]


@pytest.fixture
def workers_for_any_size(monkeypatch):
    """Use the encoding workers for every image (the size thresholds are about speed only)."""
    monkeypatch.setattr(W, "PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(W, "PROCESS_START_MIN_BYTES", 0)
    monkeypatch.setattr(W, "_WORKERS_FAILED", False)


@pytest.mark.slow
def test_the_encoding_workers_write_the_same_bytes_as_serial_and_verify(tmp_path, rng, workers_for_any_size):
    a = rng.integers(0, 3000, (3, 70, 45), dtype=np.uint16).astype(">u2")
    serial = rumimm.write(tmp_path / "s.rumi", a, tile=(16, 20), threads=1)
    w = rumimm.Writer(tmp_path / "p.rumi", a.shape, a.dtype, tile=(16, 20), threads=2, verify=True)
    assert w.backend_name == "processes"
    for r in range(w.rows):
        w.write_row(r, a[:, slice(*w.row_span(r))])
    assert w.close() == serial
    assert (tmp_path / "s.rumi").read_bytes() == (tmp_path / "p.rumi").read_bytes()
    assert no_temp_files(tmp_path)

    # incompressible frames outgrow their input: those come back through the socket
    noise = rng.integers(0, 256, (2, 40, 50), dtype=np.uint8)
    assert rumimm.write(tmp_path / "n.rumi", noise, tile=16, threads=2) == rumimm.write(
        tmp_path / "m.rumi", noise, tile=16, threads=1)
    assert (tmp_path / "n.rumi").read_bytes() == (tmp_path / "m.rumi").read_bytes()

    # three processes, cell frames
    assert rumimm.write(tmp_path / "c3.rumi", a, tile=(16, 10), unit="cell", threads=3) == rumimm.write(
        tmp_path / "c1.rumi", a, tile=(16, 10), unit="cell", threads=1)
    assert (tmp_path / "c3.rumi").read_bytes() == (tmp_path / "c1.rumi").read_bytes()

    # an error inside a worker surfaces as a CodecError and leaves no file; the next write works
    bad = codec.Codec("edge-refuser", "test", True, False, True, builder=failing_builder, graph_key=width_key)
    with pytest.raises(CodecError, match="edge frames refused"):
        rumimm.write(tmp_path / "f.rumi", a, tile=(16, 20), threads=2, codec=bad)
    assert not (tmp_path / "f.rumi").exists() and no_temp_files(tmp_path)
    assert rumimm.write(tmp_path / "again.rumi", a, tile=(16, 20), threads=2) == serial


def test_a_killed_worker_falls_back_to_this_process_with_a_warning(tmp_path, scene, workers_for_any_size):
    from rumimm.writer import encode_pool

    serial = rumimm.write(tmp_path / "s.rumi", scene, tile=16, threads=1)
    w = rumimm.Writer(tmp_path / "b.rumi", scene.shape, scene.dtype, tile=16, threads=2)
    assert w.backend_name == "processes"
    for worker in encode_pool._POOL.workers:
        worker.proc.kill()
        worker.proc.wait()
    with pytest.warns(RumiWarning, match="encoding worker process died"):
        for r in range(w.rows):
            w.write_row(r, scene[:, slice(*w.row_span(r))])
        assert w.close() == serial
    assert (tmp_path / "b.rumi").read_bytes() == (tmp_path / "s.rumi").read_bytes()
    assert W._WORKERS_FAILED  # later writes do not try again
    assert rumimm.Writer(tmp_path / "x.rumi", scene.shape, scene.dtype, threads=2).backend_name == "serial"


@pytest.mark.slow
def test_frames_lost_by_a_worker_that_died_while_storing_abort_the_write(tmp_path, scene, workers_for_any_size,
                                                                          monkeypatch):
    from rumimm.writer import encode_pool

    real = encode_pool.send_message

    def dies_while_storing(sock, msg, fds=()):
        if msg[0] != "task":
            return real(sock, msg, fds)
        backend = writer._backend
        backend._buf[msg[3]] = 1  # what a worker does just before overwriting the frames' input
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(encode_pool, "send_message", dies_while_storing)
    path = tmp_path / "lost.rumi"
    path.write_bytes(b"old")
    writer = rumimm.Writer(path, scene.shape, scene.dtype, tile=16, threads=2)
    lost = "were lost when an encoding worker process died"
    with pytest.warns(RumiWarning), pytest.raises(CodecError, match=lost), writer:
        for r in range(writer.rows):
            writer.write_row(r, scene[:, slice(*writer.row_span(r))])
    assert path.read_bytes() == b"old" and no_temp_files(tmp_path)


def test_small_images_and_one_thread_compress_serially(tmp_path, scene, monkeypatch):
    from rumimm.writer import encode_pool

    big = (4, 4096, 4096)  # 128 MiB of uint16: enough once the workers run, not enough to start them
    for shape, threads in ((scene.shape, 4), (big, 1)):
        with rumimm.Writer(tmp_path / "a.rumi", shape, np.uint16, threads=threads) as w:
            assert w.backend_name == "serial"
            w.abort()
    monkeypatch.setattr(W, "_WORKERS_FAILED", False)
    monkeypatch.setattr(encode_pool, "pool_running", lambda workers: False)
    w = rumimm.Writer(tmp_path / "b.rumi", big, np.uint16, threads=2)
    assert w.backend_name == "serial"
    w.abort()
    monkeypatch.setattr(encode_pool, "pool_running", lambda workers: True)
    w = rumimm.Writer(tmp_path / "c.rumi", big, np.uint16, threads=2)
    assert w.backend_name == "processes"
    w.abort()
    assert os.listdir(tmp_path) == []


def test_a_codec_defined_in_main_or_a_closure_compresses_here(tmp_path, scene, workers_for_any_size):
    def closure_builder(compressor, enc, shape):
        return codec.PRESETS["delta"].build(compressor, enc, shape)

    closure = codec.Codec("closure", "test", True, False, True, builder=closure_builder)
    with rumimm.Writer(tmp_path / "c.rumi", scene.shape, scene.dtype, tile=16, threads=2, codec=closure) as w:
        assert w.backend_name == "serial"
        w.abort()
    assert not W._codec_reaches_workers(type("Main", (), {"__module__": "__main__", "__qualname__": "Main"}))


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_workers_and_leaves_the_parents_alone(tmp_path, rng, workers_for_any_size):
    from rumimm.writer import encode_pool

    a = rng.integers(0, 3000, (3, 70, 45), dtype=np.uint16)
    serial = rumimm.write(tmp_path / "s.rumi", a, tile=16, threads=1)
    assert rumimm.write(tmp_path / "p.rumi", a, tile=16, threads=2) == serial
    parents = encode_pool._POOL
    pid = os.fork()
    if pid == 0:  # the child: its own workers, the same bytes
        code = 1
        try:
            ok = rumimm.write(tmp_path / "c.rumi", a, tile=16, threads=2) == serial
            code = 0 if ok and encode_pool._POOL is not parents else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert encode_pool._POOL is parents and parents.usable(1)
    assert rumimm.write(tmp_path / "q.rumi", a, tile=16, threads=2) == serial


@pytest.mark.slow
def test_long_rows_of_incompressible_frames_do_not_deadlock_the_workers(tmp_path, rng, workers_for_any_size,
                                                                          monkeypatch):
    # tasks and answers both larger than a socket buffer: the worker must keep reading
    # the next row's task while the writer has not yet read the last answer
    import socket
    import threading

    from rumimm.writer import encode_pool

    encode_pool.stop_pool()
    real = socket.socketpair

    def small_buffers(*args):
        pair = real(*args)
        for s in pair:  # what long rows do to the default buffers, with short rows
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        return pair

    monkeypatch.setattr(encode_pool.socket, "socketpair", small_buffers)
    a = rng.integers(0, 256, (1, 8, 160000), dtype=np.uint8)
    result = {}

    def run():
        result["blob"] = rumimm.write(tmp_path / "w.rumi", a, tile=(2, 32), threads=2)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the write did not finish: writer and worker wait for each other"
    assert result["blob"] == rumimm.write(tmp_path / "s.rumi", a, tile=(2, 32), threads=1)
    assert (tmp_path / "w.rumi").read_bytes() == (tmp_path / "s.rumi").read_bytes()
    encode_pool.stop_pool()  # the next test's workers get the usual buffers


@pytest.mark.slow
def test_an_interrupt_during_a_write_with_workers_leaves_no_file_and_the_next_write_works(tmp_path, scene,
                                                                                          workers_for_any_size,
                                                                                          monkeypatch):
    path = tmp_path / "i.rumi"
    path.write_bytes(b"old")
    serial = rumimm.write(tmp_path / "s.rumi", scene, tile=16, threads=1)
    original = frame_job.FrameJob.encode  # patched here only: the workers keep theirs
    calls = {"n": 0}

    def interrupted(self, k, frame):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self, k, frame)

    monkeypatch.setattr(frame_job.FrameJob, "encode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rumimm.write(path, scene, tile=16, threads=2)
    assert path.read_bytes() == b"old" and no_temp_files(tmp_path)
    monkeypatch.setattr(frame_job.FrameJob, "encode", original)
    assert rumimm.write(path, scene, tile=16, threads=2) == serial
    assert path.read_bytes() == (tmp_path / "s.rumi").read_bytes()


def test_an_application_embedding_python_compresses_here(tmp_path, scene, workers_for_any_size, monkeypatch):
    from rumimm.writer import encode_pool

    encode_pool.stop_pool()
    monkeypatch.setattr(encode_pool.sys, "executable", "/opt/app/bin/render-farm")  # would not run python -c
    with rumimm.Writer(tmp_path / "e.rumi", scene.shape, scene.dtype, tile=16, threads=2) as w:
        assert w.backend_name == "serial"
        w.abort()
