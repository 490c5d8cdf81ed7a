"""Compress a file's frames in this process and in encoding worker processes together.

``openzl.ext`` compresses with the GIL held, so Python threads add nothing; worker
processes do.  They are started with :mod:`subprocess` as ``python -c`` running
:mod:`rumimm.writer.encode_worker`, never with :mod:`multiprocessing`: a spawn or forkserver
child imports the user's ``__main__``, which re-runs a script that has no
``if __name__ == "__main__":`` guard.  Nothing here has a name in ``/dev/shm`` or a
semaphore: rows of frames travel in an anonymous shared file (``memfd``) whose
descriptor is passed over each worker's Unix socket, so the memory goes when the last
process holding it goes.  Workers die with this process (see :mod:`rumimm.writer.encode_worker`).

The pool is started on first use and reused by later writes of the same process; one
write uses it at a time (a concurrent write compresses serially).  A forked child does
not touch its parent's pool: it starts its own if it writes in parallel.
"""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import threading
import time

import numpy as np

from rumimm.errors import CodecError
from rumimm.format.grid import Grid
from rumimm.writer.encode_worker import recv_message, send_message
from rumimm.writer.frame_job import FrameJob, cut, encode_specs, frame_specs

__all__ = ["ROWS_IN_FLIGHT", "PoolUnavailable", "ProcessBackend", "pool_running"]

#: Rows of frames submitted but not yet written (the in-flight bound).
ROWS_IN_FLIGHT = 2
_ALIGN = 64  # frames start 64-byte aligned: OpenZL refuses misaligned samples
_BOOT = "import sys; sys.path.insert(0, sys.argv[1]); from rumimm.writer.encode_worker import main; main(sys.argv[2:])"


class PoolUnavailable(RuntimeError):
    """No worker pool for this write: busy with another write, or it cannot start here."""


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _anonymous_file(size: int) -> int:
    """A file descriptor of ``size`` bytes that no other process can find by name."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("rumimm-frames", getattr(os, "MFD_CLOEXEC", 1))
    else:  # pragma: no cover - non-Linux POSIX: an unlinked temporary file
        import tempfile

        with tempfile.TemporaryFile() as fh:
            fd = os.dup(fh.fileno())
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _python_executable() -> bool:
    """Whether ``sys.executable`` is a Python interpreter (not an application embedding one)."""
    name = os.path.basename(sys.executable or "").lower()
    return name.startswith(("python", "pypy"))


class _Worker:
    """One encoding worker process and the socket to it."""

    def __init__(self):
        here, there = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        kernel_signal = "1" if threading.current_thread() is threading.main_thread() else "0"
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _BOOT, package_parent, str(there.fileno()), str(os.getpid()), kernel_signal],
                pass_fds=(there.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        except BaseException:
            here.close()
            raise
        finally:
            there.close()
        self.sock = here

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.sock.close()  # the worker reads end-of-file and exits
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Pool:
    def __init__(self, workers: int):
        self.pid = os.getpid()
        self.workers: list[_Worker] = []
        try:
            for _ in range(workers):
                self.workers.append(_Worker())
        except BaseException:
            self.close()
            raise
        self.busy = False

    def usable(self, workers: int) -> bool:
        return len(self.workers) == workers and all(w.alive() for w in self.workers)

    def close(self) -> None:
        for w in self.workers:
            w.close()
        self.workers = []


_POOL: _Pool | None = None
_STOP_AT_EXIT = False
_LOCKS: dict[int, threading.Lock] = {}  # one per process: a lock a fork copied held is never used


def _lock() -> threading.Lock:
    return _LOCKS.setdefault(os.getpid(), threading.Lock())


def _current() -> _Pool | None:
    global _POOL
    if _POOL is not None and _POOL.pid != os.getpid():
        _POOL = None  # a forked child: the workers belong to the parent, leave them alone
    return _POOL


def pool_running(workers: int) -> bool:
    """Whether an idle pool of ``workers`` workers is ready in this process."""
    with _lock():
        pool = _current()
        return pool is not None and not pool.busy and pool.usable(workers)


def _acquire(workers: int) -> _Pool:
    global _POOL
    with _lock():
        pool = _current()
        if pool is not None and pool.busy:
            raise PoolUnavailable("the encoding workers are busy with another write")
        if pool is not None and not pool.usable(workers):
            pool.close()
            pool = _POOL = None
        if pool is None:
            if not (_python_executable() and hasattr(socket, "send_fds")):
                raise PoolUnavailable("no Python executable or Unix sockets to start workers with")
            pool = _POOL = _Pool(workers)
            global _STOP_AT_EXIT
            if not _STOP_AT_EXIT:  # reap the workers at a normal exit (they would exit anyway)
                import atexit

                atexit.register(stop_pool)
                _STOP_AT_EXIT = True
        pool.busy = True
        return pool


def _release(pool: _Pool, broken: bool) -> None:
    global _POOL
    with _lock():
        pool.busy = False
        if broken:
            pool.close()
            if _POOL is pool:
                _POOL = None


def stop_pool() -> None:
    """Stop the idle worker processes of this process (they are started again when needed)."""
    global _POOL
    with _lock():
        pool = _current()
        if pool is not None and not pool.busy:
            pool.close()
            _POOL = None


class ProcessBackend:
    """Compress each row partly here and partly on ``threads - 1`` worker processes.

    This process compresses the first frames of every row itself while the workers
    compress the rest; the split follows the measured speed of both sides (and this
    process's copying and writing), so neither waits for long.  The workers' frames
    are cut once into one of ``ROWS_IN_FLIGHT`` segments of shared memory, end to end,
    and each worker stores its compressed frames over the input it has consumed; the
    writer copies them from there to the file.  Only frame coordinates and sizes are
    pickled.

    If a worker dies, frames no worker had started are compressed here, as is the
    rest of the file; frames a worker was storing when it died are lost, and the
    write fails with CodecError.  ``on_broken`` is called once in that case.
    """

    def __init__(self, job: FrameJob, grid: Grid, threads: int, on_broken=None):
        import mmap

        self._job = job
        self._grid = grid
        self._n_workers = threads - 1
        self._enc = job.enc
        self._on_broken = on_broken
        b, y, x = grid.shape
        row_bytes = b * min(grid.tile_length, y) * x * self._enc.itemsize
        # a flag byte per chunk, then the row (each frame 64-byte aligned)
        n = grid.tiles_across * grid.frames_per_position
        self._flags = _align(n)
        self._segment = _align(self._flags + row_bytes + _ALIGN * n)
        # measured, smoothed: encoding speed here and in one worker (raw bytes per
        # second), and the seconds per row this process spends copying and writing
        self._rate_here: float | None = None
        self._rate_worker: float | None = None
        self._copy_seconds: float | None = None
        self._write_seconds: float | None = None
        self._pool = _acquire(self._n_workers)
        self._broken = False
        self._pending = 0  # tasks sent and not answered
        fd = None
        try:
            fd = _anonymous_file(self._segment * ROWS_IN_FLIGHT)
            self._mem = mmap.mmap(fd, self._segment * ROWS_IN_FLIGHT)
            self._buf = memoryview(self._mem)
            args = pickle.dumps(job.args, protocol=pickle.HIGHEST_PROTOCOL)
            for w in self._pool.workers:
                send_message(w.sock, ("job", args, list(sys.path)), fds=(fd,))
        except (OSError, EOFError):
            self._mark_broken()
        except BaseException:
            _release(self._pool, broken=True)
            raise
        finally:
            if fd is not None:
                os.close(fd)

    # -- the split model ------------------------------------------------------------------
    def share_here(self, row_bytes: int) -> float:
        """Fraction of a row's raw bytes to compress in this process, so both sides finish together.

        Per row this process spends ``overhead + f * S / rate_here`` and the
        workers ``(1 - f) * S / (workers * rate_worker)``; f makes them equal.
        """
        if self._rate_here is None or self._rate_worker is None:
            return 1.0 / (self._n_workers + 1)
        there = row_bytes / (self._n_workers * self._rate_worker)
        overhead = (self._copy_seconds or 0.0) + (self._write_seconds or 0.0)
        f = (there - overhead) / (there + row_bytes / self._rate_here)
        return min(max(f, 0.0), 0.95)

    def note_busy(self, seconds: float) -> None:
        """Time this process spent writing a row's frames to the file."""
        self._write_seconds = _smooth(self._write_seconds, seconds)

    # -- rows -----------------------------------------------------------------------------
    def submit(self, r: int, block: np.ndarray):
        t0 = time.perf_counter()
        block = np.asarray(block, dtype=self._enc.dtype)  # byte-swaps big-endian input
        specs = frame_specs(self._grid, r)
        sizes = [cut(block, s).nbytes for s in specs]
        m = len(specs)
        if not self._broken:
            goal, acc, m = self.share_here(sum(sizes)) * sum(sizes), 0, 0
            while m < len(specs) - 1 and acc + sizes[m] / 2 <= goal:
                acc += sizes[m]
                m += 1
        parts = []
        if m < len(specs):
            base = (r % ROWS_IN_FLIGHT) * self._segment  # its previous row was written already
            off = base + self._flags
            self._buf[base : base + self._flags] = bytes(self._flags)
            chunks = _chunks(specs[m:], sizes[m:], self._n_workers)
            # a short row makes fewer chunks than workers: the spare workers sit this row out
            for flag, (worker, chunk) in enumerate(zip(self._pool.workers, chunks, strict=False)):
                frames, raw = [], 0
                for spec in chunk:  # cut: the one copy in, frames laid end to end
                    src = cut(block, spec)
                    np.ndarray(src.shape, dtype=src.dtype, buffer=self._buf, offset=off)[...] = src
                    frames.append((spec.k, src.shape, off))
                    raw += src.nbytes
                    off = _align(off + src.nbytes)
                sent = False
                if not self._broken:
                    try:
                        send_message(worker.sock, ("task", frames, off, base + flag))
                        sent = True
                        self._pending += 1
                    except OSError:
                        self._mark_broken()
                parts.append((worker if sent else None, frames, raw, base + flag))
        t1 = time.perf_counter()
        here = encode_specs(self._job, block, specs[:m])  # while the workers run
        t2 = time.perf_counter()
        self._copy_seconds = _smooth(self._copy_seconds, t1 - t0)
        if m:
            self._rate_here = _smooth(self._rate_here, sum(sizes[:m]) / max(t2 - t1, 1e-9))
        return here, parts

    def result(self, handle):
        frames, parts = handle
        for worker, chunk, raw, flag in parts:
            reply = None
            if worker is not None:
                try:
                    reply, _ = recv_message(worker.sock)
                except (EOFError, OSError, pickle.UnpicklingError):
                    self._mark_broken()
                else:
                    self._pending -= 1
            if reply is not None and reply[0] == "error":
                raise reply[1]
            if reply is not None and reply[0] == "unavailable":
                if not self._broken:  # the workers cannot rebuild this job: the rest is compressed here
                    import warnings

                    from rumimm.errors import RumiWarning

                    warnings.warn(f"rumimm.write: the encoding workers cannot compress this file ({reply[1]}); "
                                  "compressing in this process", RumiWarning, stacklevel=5)
                self._broken = True
                reply = None
            elif reply is not None:
                _, sizes, inline, seconds = reply
                self._rate_worker = _smooth(self._rate_worker, raw / max(seconds, 1e-9))
                pos = chunk[0][2]
                for i, n in enumerate(sizes):
                    if i in inline:
                        frames.append(inline[i])
                    else:
                        frames.append(self._buf[pos : pos + n])  # released by the writer once written
                        pos += n
                continue
            if self._buf[flag]:  # a worker died while storing over these frames' input
                raise CodecError(f"frames {chunk[0][0]}..{chunk[-1][0]} of {self._job.n_frames} were lost when "
                                 "an encoding worker process died; nothing was written")
            for k, shape, off in chunk:  # never started: the frames are intact in shared memory
                frames.append(self._job.encode(k, np.ndarray(shape, dtype=self._enc.dtype, buffer=self._buf,
                                                             offset=off)))
        return frames

    def _mark_broken(self) -> None:
        if not self._broken:
            self._broken = True
            if self._on_broken is not None:
                self._on_broken()

    def close(self, cancel: bool = False) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # workers still busy with a cancelled row would answer into the next write: stop them
        _release(pool, broken=self._broken or self._pending > 0)
        try:
            self._buf.release()
            self._mem.close()
        except (BufferError, AttributeError):  # a view is still referenced; the mapping goes with it
            pass


def _smooth(old, new):
    return new if old is None else 0.5 * old + 0.5 * new


def _chunks(specs, sizes, workers: int):
    """Split a row's frames into ``workers`` contiguous chunks of similar raw size (fewer if short)."""
    target = max(sum(sizes) / workers, 1)
    out, cur, size = [], [], 0
    for spec, n in zip(specs, sizes, strict=True):
        cur.append(spec)
        size += n
        if size >= target and len(out) < workers - 1:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out
