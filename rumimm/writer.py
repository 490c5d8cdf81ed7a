"""Write any (B, Y, X) array as a compliant rumi file: streamed, parallel and atomic.

:class:`Writer` takes the image one grid row at a time (a ``(B, h_r, X)`` block),
cuts it into frames in frame-index order (tile-interleaved: every band of a grid
position, then the next position), compresses the frames in parallel and appends
them to a temporary file right after the space reserved for the BigTIFF prefix,
whose size depends only on the shape (``grid.base_frame_offset``).  ``close``
seeks back, writes the prefix with the real offsets and byte counts, fsyncs and
renames the file into place, then returns the canonical header blob.  Any failure
removes the temporary file and leaves an existing file at ``path`` untouched.

:func:`write` is a thin layer over :class:`Writer` that reads its source one row of
tiles at a time, so a ``np.memmap`` (or any sliceable array-like) larger than RAM
streams through in bounded memory: about two rows of frames plus the frame index.

Parallelism.  ``openzl.ext`` compresses with the GIL held (measured), so Python
threads add nothing.  geozl's GIL-free C compressor cannot build the default
``delta`` preset (its recipes have no DeltaInt > Zigzag chain), so it is not used
either.  With ``threads >= 2``, images of at least ``PROCESS_START_MIN_BYTES`` (or
``PROCESS_MIN_BYTES`` once the pool runs) are compressed by this process and
``threads - 1`` worker processes together (``forkserver``, started once and
reused; frames reach the workers through shared memory and come back the same
way), with at most ``ROWS_IN_FLIGHT`` rows of frames submitted and not yet
written; smaller images are compressed serially.  Every path writes the same
bytes.  docs/dev/writer-notes.md has the measurements.
"""

from __future__ import annotations

import errno
import itertools
import os
import pickle
import tempfile
import threading
import time
from collections import deque
from concurrent.futures.process import BrokenProcessPool

import numpy as np

from .blob import build_header
from .dtypes import Encoding, encoding_for_dtype
from .errors import CodecError, RumiError, where
from .georef import UNDEFINED_MATRIX, geokeys, matrix_from_transform, resolve_crs, resolve_transform
from .grid import FrameUnit, Grid, frame_unit
from .tiff import build_prefix

__all__ = ["write", "Writer"]

MAX_TILE = 0xFFFF  # TileWidth / TileLength are SHORT
MAX_DIM = 0xFFFFFFFF  # ImageWidth / ImageLength are LONG
MAX_BANDS = 0xFFFF  # SamplesPerPixel is SHORT
MAX_COUNT = 0xFFFFFFFF  # TileByteCounts is LONG

#: Raw bytes from which a running process pool beats compressing serially.
PROCESS_MIN_BYTES = 32 << 20
#: Raw bytes from which it pays to start the pool (about a second, once per process).
PROCESS_START_MIN_BYTES = 512 << 20
#: Rows of frames submitted but not yet written (the in-flight bound).
ROWS_IN_FLIGHT = 2


# --------------------------------------------------------------------------- #
# argument checks: everything is validated before any file is touched
# --------------------------------------------------------------------------- #
def _resolve_tile(tile) -> tuple[int, int]:
    """(tile_length, tile_width) from an int or a pair."""
    if isinstance(tile, (bool, np.bool_)):
        raise TypeError(f"tile must be an int or a (tile_length, tile_width) pair, got {tile!r}")
    if isinstance(tile, (int, np.integer)):
        pair = (int(tile), int(tile))
    else:
        try:
            items = tuple(tile)
        except TypeError:
            raise TypeError(f"tile must be an int or a (tile_length, tile_width) pair, got {tile!r}") from None
        if len(items) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                                      for v in items):
            raise TypeError(f"tile must be an int or a (tile_length, tile_width) pair of ints, got {tile!r}")
        pair = (int(items[0]), int(items[1]))
    for v in pair:
        if not 1 <= v <= MAX_TILE:
            raise ValueError(f"tile must be in [1, {MAX_TILE}], got {v}")
    return pair


def _resolve_shape(shape) -> tuple[int, int, int]:
    """(B, Y, X) from a 2-D or 3-D shape, checked against the TIFF field ranges."""
    try:
        shape = tuple(int(v) for v in shape)
    except TypeError:
        raise TypeError(f"shape must be (B, Y, X) or (Y, X), got {shape!r}") from None
    if len(shape) == 2:
        shape = (1, *shape)
    if len(shape) != 3:
        raise ValueError(f"array must be 2-D (Y, X) or 3-D (B, Y, X), got {len(shape)}-D shape {shape}")
    b, y, x = shape
    if b < 1 or y < 1 or x < 1:
        raise ValueError(f"array must not be empty, got shape (B, Y, X) = {shape}")
    if b > MAX_BANDS:
        raise ValueError(f"band count B must be <= {MAX_BANDS}, got {b}")
    if y > MAX_DIM or x > MAX_DIM:
        raise ValueError(f"image height and width must be <= {MAX_DIM}, got (Y, X) = ({y}, {x})")
    return shape


def _resolve_encoding(dtype) -> Encoding:
    """The rumi encoding of ``dtype``, after normalising byte order."""
    dt = np.dtype(dtype)
    try:
        return encoding_for_dtype(dt)
    except RumiError:
        if dt.fields is not None:  # structured complex ints / float16 in big-endian
            try:
                return encoding_for_dtype(dt.newbyteorder("<"))
            except RumiError:
                pass
        raise


def _resolve_georef(transform, crs, pixel_is_point) -> tuple[tuple[float, ...], tuple[int, ...], int | None]:
    """(matrix16, geokeys16, epsg) for the two georeferencing tags."""
    if not isinstance(pixel_is_point, (bool, np.bool_)):
        raise TypeError(f"pixel_is_point must be True or False, got {pixel_is_point!r}")
    if (transform is None) != (crs is None):
        given, missing = ("transform", "crs") if crs is None else ("crs", "transform")
        raise ValueError(f"{given} was given without {missing}; georeferencing needs both (a matrix without "
                         "a CRS is not georeferencing in rumi); pass both, or neither for an image without one")
    if transform is None:
        return UNDEFINED_MATRIX, geokeys(None, bool(pixel_is_point)), None
    t = resolve_transform(transform)
    epsg = resolve_crs(crs)
    return matrix_from_transform(t), geokeys(epsg, bool(pixel_is_point)), epsg


def _resolve_threads(threads) -> int:
    if threads is None:
        return _default_threads()
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer)):
        raise TypeError(f"threads must be a positive int or None, got {threads!r}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    return int(threads)


def _default_threads() -> int:
    """The package-wide thread setting (``rumimm.set_num_threads`` / ``RUMIMM_NUM_THREADS``)."""
    try:
        from .threads import get_num_threads
    except ImportError:
        try:
            from ._native import get_num_threads
        except Exception:  # pragma: no cover - numba missing or broken
            return os.cpu_count() or 1
    return max(1, int(get_num_threads()))


def _resolve_codec(codec, enc: Encoding, format_version):
    """(resolved codec, format version) through rumimm.codec."""
    from . import codec as _codec

    if format_version is None:
        format_version = _codec.DEFAULT_FORMAT_VERSION
    if isinstance(format_version, (bool, np.bool_)) or not isinstance(format_version, (int, np.integer)):
        raise TypeError(f"format_version must be an int, got {format_version!r}")
    resolved = _codec.resolve_codec(codec, enc)
    _codec.FrameEncoder(resolved, enc, int(format_version))  # checks the version (and geozl) before any work
    return resolved, int(format_version)


# --------------------------------------------------------------------------- #
# frame encoding: one job description, run serially or on worker processes
# --------------------------------------------------------------------------- #
class _FrameJob:
    """Compress (and optionally verify) the frames of one file; one instance per process."""

    def __init__(self, codec, enc: Encoding, format_version: int, verify: bool, n_frames: int):
        from . import codec as _codec

        self.enc = enc
        self.n_frames = n_frames
        self.encoder = _codec.FrameEncoder(codec, enc, format_version)
        self.decoder = _codec.FrameDecoder() if verify else None

    def encode(self, k: int, frame: np.ndarray) -> bytes:
        try:
            data = bytes(self.encoder.encode(frame))
        except RumiError as exc:
            raise type(exc)(f"frame {k} of {self.n_frames}: {exc}") from exc
        except Exception as exc:
            raise CodecError(f"frame {k} of {self.n_frames} failed to compress: {exc}") from exc
        if not data:
            raise CodecError(f"frame {k} of {self.n_frames} compressed to 0 bytes; every frame must be non-empty")
        if len(data) > MAX_COUNT:
            raise RumiError(f"frame {k} of {self.n_frames} compressed to {len(data)} bytes, more than the "
                            f"{MAX_COUNT} a TileByteCounts entry holds; use a smaller tile")
        if self.decoder is not None:
            self._verify(k, frame, data)
        return data

    def _verify(self, k: int, frame: np.ndarray, data: bytes) -> None:
        enc = self.enc
        got = self.decoder.decode(data, enc, frame.size, index=k)
        want = np.ascontiguousarray(frame).reshape(-1)
        if enc.bits_per_sample == 1:
            want = np.not_equal(want, 0).view(np.uint8)  # what a 1-bit sample stores
        elif enc.subbyte:
            want = want.view(np.uint8) & np.uint8((1 << enc.bits_per_sample) - 1)
        got = np.ascontiguousarray(got).reshape(-1).view(np.uint8)
        want = want.view(np.uint8)
        if got.size != want.size or not np.array_equal(got, want):
            raise CodecError(f"frame {k} of {self.n_frames} does not decode to the samples written "
                             "(verify=True); the codec is not lossless for this data")


def _frame_specs(grid: Grid, r: int) -> list[tuple[int, int, int, int]]:
    """(frame index, band or -1 for a cell, x0, x1) of every frame of grid row r, in order."""
    tw, x = grid.tile_width, grid.image_width
    k = grid.frame_index(r, 0, 0)
    bands = range(grid.samples_per_pixel) if grid.unit == FrameUnit.TILE else (-1,)
    out = []
    for c in range(grid.tiles_across):
        x0, x1 = c * tw, min((c + 1) * tw, x)
        for band in bands:
            out.append((k, band, x0, x1))
            k += 1
    return out


def _encode_specs(job: _FrameJob, block: np.ndarray, specs) -> list[bytes]:
    """Cut the frames ``specs`` from a (B, h, X) block (of the job's dtype) and compress them."""
    out = []
    for k, band, x0, x1 in specs:
        frame = block[:, :, x0:x1] if band < 0 else block[band, :, x0:x1]
        if not frame.flags.aligned:  # OpenZL fails on misaligned samples (e.g. np.frombuffer at an odd offset)
            frame = frame.copy()
        out.append(job.encode(k, frame))
    return out


class _SerialBackend:
    """Compress in the calling thread."""

    def __init__(self, job_args, grid: Grid):
        self._job = _FrameJob(*job_args)
        self._grid = grid

    def submit(self, r: int, block: np.ndarray):
        block = np.asarray(block, dtype=self._job.enc.dtype)  # byte-swaps big-endian input
        return _encode_specs(self._job, block, _frame_specs(self._grid, r))

    def result(self, handle):
        return handle

    def note_busy(self, seconds: float) -> None:
        pass

    def close(self, cancel: bool = False):
        pass


# -- the process pool ------------------------------------------------------------
# Frames reach the workers through shared memory, already cut and contiguous, and
# the compressed frames come back in the same place: only frame coordinates and
# sizes are pickled.  Pickling the frames both ways measured slower than
# compressing them serially; pickling just the compressed frames back cost about
# a fifth of the compression itself.

_WORKER_JOBS: dict[str, _FrameJob] = {}  # per worker process, keyed by job id


def _worker_init():
    import signal

    # the parent handles Ctrl-C and cancels; a worker dying on SIGINT would break the pool
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _process_task(job_id: str, job_args, shm_name: str, frames, end: int, flag: int):
    """Compress the contiguous frames ``(k, shape, offset)`` of a shared-memory segment, in place.

    All frames of the task are compressed first; then byte ``flag`` of the segment
    is set (the input is about to be overwritten) and frame i's output is stored
    right after frame i - 1's, over input already compressed.  A frame that would
    reach into the next frame's input (or past ``end``) is returned in ``inline``
    instead.  Returns (sizes, inline, seconds), ``seconds`` being the task's
    time, for balancing the work.
    """
    from multiprocessing import shared_memory

    t0 = time.perf_counter()
    job = _WORKER_JOBS.get(job_id)
    if job is None:
        _WORKER_JOBS.clear()  # one file at a time per worker
        job = _WORKER_JOBS[job_id] = _FrameJob(*job_args)
    dt = job.enc.dtype
    # attach for this task only, so an idle worker never pins a row of memory
    shm = shared_memory.SharedMemory(name=shm_name)
    inline = {}
    try:
        buf = shm.buf
        out = []
        for k, shape, off in frames:
            frame = np.ndarray(shape, dtype=dt, buffer=buf, offset=off)
            out.append(job.encode(k, frame))  # verified too, while its input is intact
            del frame
        buf[flag] = 1
        pos = frames[0][2]
        for i, data in enumerate(out):
            n = len(data)
            limit = frames[i + 1][2] if i + 1 < len(frames) else end
            if pos + n <= limit:
                buf[pos : pos + n] = data
                pos += n
            else:
                inline[i] = data
        sizes = [len(d) for d in out]
        del buf, out
    finally:
        try:
            shm.close()
        except BufferError:  # pragma: no cover - a view escaped; the mapping dies with it
            pass
    return sizes, inline, time.perf_counter() - t0


_POOL_LOCK = threading.Lock()
_POOL = None  # (workers, ProcessPoolExecutor), reused across writes
_POOL_FAILED = False  # set when a pool broke: compress serially for the rest of the process

#: Start method of the worker processes: "forkserver" forks workers from a clean
#: server process, safe whatever threads this process runs (numba's, the user's).
START_METHOD = "forkserver"


def _process_pool(workers: int):
    """A process pool of ``workers``, created once and reused (its start-up is the main cost)."""
    global _POOL
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with _POOL_LOCK:
        if _POOL is not None and (_POOL[0] != workers or getattr(_POOL[1], "_broken", False)):
            _POOL[1].shutdown(wait=False, cancel_futures=True)
            _POOL = None
        if _POOL is None:
            method = START_METHOD if START_METHOD in multiprocessing.get_all_start_methods() else "spawn"
            ctx = multiprocessing.get_context(method)
            if method == "forkserver":
                # the server imports these once; workers fork from it ready to compress
                ctx.set_forkserver_preload(["rumimm.writer", "rumimm.codec"])
            _POOL = (workers, ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init))
        return _POOL[1]


def _pool_running(workers: int) -> bool:
    pool = _POOL
    return pool is not None and pool[0] == workers and not getattr(pool[1], "_broken", False)


def _drop_process_pool():
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL[1].shutdown(wait=False, cancel_futures=True)
            _POOL = None


class _ProcessBackend:
    """Compress each row partly here and partly on ``threads - 1`` worker processes.

    openzl.ext holds the GIL, so the parallel encoders are processes, one
    FrameEncoder each.  This process compresses the first frames of every row
    itself while the workers compress the rest; the split follows the measured
    speed of both sides (and this process's copying and writing), so neither
    waits for long.  The workers' frames are cut once into one of
    ``ROWS_IN_FLIGHT`` shared-memory segments, end to end, and each worker stores
    its compressed frames over the input it has consumed; the writer copies them
    from there to the file.  Only frame coordinates and sizes are pickled.

    If the pool breaks (a worker killed, or a script without an
    ``if __name__ == "__main__":`` guard failing to start one), frames no worker
    had started are compressed here, as is the rest of the file, with a
    RumiWarning; frames a worker was storing when it died are lost, and the write
    fails with CodecError.
    """

    _ids = itertools.count()

    def __init__(self, job_args, grid: Grid, threads: int):
        from multiprocessing import shared_memory

        self._args = job_args
        self._grid = grid
        self._workers = threads - 1
        self._id = f"{os.getpid()}-{next(self._ids)}"
        self._enc: Encoding = job_args[1]
        b, y, x = grid.shape
        self._row_bytes = b * min(grid.tile_length, y) * x * self._enc.itemsize
        # a flag byte per chunk (at most one chunk per frame of a row), then the row
        # (frames start 64-byte aligned: OpenZL refuses misaligned samples)
        n = grid.tiles_across * grid.frames_per_position
        self._flags = _align(n)
        size = self._flags + self._row_bytes + _ALIGN * n
        # measured, smoothed: encoding speed here and in one worker (raw bytes per
        # second), and the seconds per row this process spends copying rows in and
        # writing frames out
        self._rate_here: float | None = None
        self._rate_worker: float | None = None
        self._copy_seconds: float | None = None
        self._write_seconds: float | None = None
        self._segments = []
        try:
            self._job = _FrameJob(*job_args)
            for _ in range(ROWS_IN_FLIGHT):
                self._segments.append(shared_memory.SharedMemory(create=True, size=size))
            self._pool = _process_pool(self._workers)
        except BaseException:
            self._release()
            raise
        self._broken = False
        self._futures: set = set()

    def share_here(self, row_bytes: int) -> float:
        """Fraction of a row's raw bytes to compress in this process, so both sides finish together.

        Per row this process spends ``overhead + f * S / rate_here`` and the
        workers ``(1 - f) * S / (workers * rate_worker)``; f makes them equal.
        """
        if self._rate_here is None or self._rate_worker is None:
            return 1.0 / (self._workers + 1)
        there = row_bytes / (self._workers * self._rate_worker)
        overhead = (self._copy_seconds or 0.0) + (self._write_seconds or 0.0)
        f = (there - overhead) / (there + row_bytes / self._rate_here)
        return min(max(f, 0.0), 0.95)

    def note_busy(self, seconds: float) -> None:
        """Time this process spent writing a row's frames to the file."""
        self._write_seconds = self._smooth(self._write_seconds, seconds)

    @staticmethod
    def _smooth(old, new):
        return new if old is None else 0.5 * old + 0.5 * new

    def submit(self, r: int, block: np.ndarray):
        t0 = time.perf_counter()
        block = np.asarray(block, dtype=self._enc.dtype)  # byte-swaps big-endian input
        specs = _frame_specs(self._grid, r)
        b, h, _ = block.shape
        sizes = [(x1 - x0) * h * block.itemsize * (b if band < 0 else 1) for _, band, x0, x1 in specs]
        m = len(specs)
        if not self._broken:
            goal, acc, m = self.share_here(sum(sizes)) * sum(sizes), 0, 0
            while m < len(specs) - 1 and acc + sizes[m] / 2 <= goal:
                acc += sizes[m]
                m += 1
        parts = []
        if m < len(specs):
            shm = self._segments[r % ROWS_IN_FLIGHT]  # its previous row was written already
            off = self._flags
            shm.buf[: self._flags] = bytes(self._flags)
            for flag, chunk in enumerate(_chunks(specs[m:], sizes[m:], self._workers)):
                frames, raw = [], 0
                for k, band, x0, x1 in chunk:  # cut: the one copy in, frames laid end to end
                    src = block[:, :, x0:x1] if band < 0 else block[band, :, x0:x1]
                    np.ndarray(src.shape, dtype=src.dtype, buffer=shm.buf, offset=off)[...] = src
                    frames.append((k, src.shape, off))
                    raw += src.nbytes
                    off = _align(off + src.nbytes)
                try:
                    fut = self._pool.submit(_process_task, self._id, self._args, shm.name, frames, off, flag)
                except BrokenProcessPool:
                    fut = None
                else:
                    self._futures.add(fut)
                parts.append((shm, frames, raw, flag, fut))
        t1 = time.perf_counter()
        here = _encode_specs(self._job, block, specs[:m])  # while the workers run
        t2 = time.perf_counter()
        self._copy_seconds = self._smooth(self._copy_seconds, t1 - t0)
        if m:
            self._rate_here = self._smooth(self._rate_here, sum(sizes[:m]) / max(t2 - t1, 1e-9))
        return here, parts

    def result(self, handle):
        frames, parts = handle
        for shm, chunk, raw, flag, fut in parts:
            if fut is not None:
                try:
                    sizes, inline, seconds = fut.result()
                except BrokenProcessPool:
                    self._fall_back()
                else:
                    self._rate_worker = self._smooth(self._rate_worker, raw / max(seconds, 1e-9))
                    pos = chunk[0][2]
                    for i, n in enumerate(sizes):
                        if i in inline:
                            frames.append(inline[i])
                        else:
                            frames.append(shm.buf[pos : pos + n])  # released by the writer once written
                            pos += n
                    continue
                finally:
                    self._futures.discard(fut)
            self._fall_back()
            if shm.buf[flag]:  # a worker died while storing over these frames' input
                raise CodecError(f"frames {chunk[0][0]}..{chunk[-1][0]} of {self._args[4]} were lost when the "
                                 "compression process pool broke; nothing was written")
            for k, shape, off in chunk:  # never started: the frames are intact in the segment
                frames.append(self._job.encode(k, np.ndarray(shape, dtype=self._enc.dtype, buffer=shm.buf, offset=off)))
        return frames

    def _fall_back(self):
        if not self._broken:
            import warnings

            from .errors import RumiWarning

            global _POOL_FAILED
            self._broken = True
            _POOL_FAILED = True  # do not pay for a pool that cannot start, again and again
            _drop_process_pool()
            warnings.warn("rumimm.write: the compression process pool broke; compressing in this process "
                          "from now on (a script must guard its entry point with if __name__ == '__main__':)",
                          RumiWarning, stacklevel=5)

    def close(self, cancel: bool = False):
        if cancel:
            for fut in self._futures:
                fut.cancel()
        self._futures = set()
        self._release()

    def _release(self):
        # unlinking is safe while a cancelled task still runs: its mapping outlives the name
        for shm in self._segments:
            try:
                shm.close()
            except BufferError:  # a view is still referenced; the mapping goes with it
                pass
            try:
                shm.unlink()
            except FileNotFoundError:
                pass
        self._segments = []


_ALIGN = 64


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _chunks(specs, sizes, workers: int):
    """Split a row's frames into about 2 * workers contiguous chunks of similar raw size."""
    target = max(sum(sizes) // (2 * workers), 1 << 18)
    out, cur, size = [], [], 0
    for spec, n in zip(specs, sizes):
        cur.append(spec)
        size += n
        if size >= target:
            out.append(cur)
            cur, size = [], 0
    if cur:
        out.append(cur)
    return out


# --------------------------------------------------------------------------- #
# the atomic output file
# --------------------------------------------------------------------------- #
def _umask() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)  # no race-free read elsewhere; restore at once
    os.umask(mask)
    return mask


class _AtomicFile:
    """A temporary file next to ``path``; ``commit`` fsyncs and renames it over ``path``."""

    def __init__(self, path: str):
        self.path = path
        directory = os.path.dirname(os.path.abspath(path))
        # the name is cut so that a file name near NAME_MAX (255) still leaves room for the temp name
        fd, self.tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)[:200]}.", suffix=".tmp", dir=directory)
        try:
            os.fchmod(fd, 0o666 & ~_umask())
            self.fh = os.fdopen(fd, "wb", buffering=1 << 20)
        except BaseException:
            os.close(fd)
            os.unlink(self.tmp)
            raise
        self.done = False

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.tmp, self.path)
        self.done = True
        try:  # make the rename itself durable
            dfd = os.open(os.path.dirname(os.path.abspath(self.path)), os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)

    def discard(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            self.fh.close()
        except OSError:
            pass
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass


# --------------------------------------------------------------------------- #
# Writer
# --------------------------------------------------------------------------- #
class Writer:
    """Stream an image into a rumi file one grid row at a time.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file to create or replace (atomically, on ``close``).
    shape : tuple of int
        ``(B, Y, X)`` (bands, height, width) or ``(Y, X)`` for one band.
    dtype : dtype-like
        Any of the 28 rumi sample dtypes (see ``rumimm.DTYPES``); big-endian
        input is accepted and stored little-endian.
    tile : int or (int, int)
        Nominal tile size, or ``(tile_length, tile_width)``; each in [1, 65535].
    unit : {"tile", "cell"}
        ``"tile"``: one frame per band and grid position; ``"cell"``: one frame
        of shape (B, h, w) per grid position.  With one band the two are the
        same file, and the blob records ``"tile"`` (as ``rumimm.index`` derives it).
    transform : 6 or 9 numbers or ``Affine``, optional
        ``(x_res, row_rot, x_origin, col_rot, y_res, y_origin)``; needs ``crs``.
    crs : int, str or object with ``to_epsg()``, optional
        An EPSG code (``32633``, ``"EPSG:4326"``, a ``pyproj.CRS`` or rasterio ``CRS`` that
        *is* an EPSG CRS: an approximate match is refused); needs ``transform``.
    pixel_is_point : bool
        GTRasterTypeGeoKey: pixels are points (True) or areas (False).
    codec : str or codec object, optional
        A preset of :mod:`rumimm.codec` (default: its lossless default).
    format_version : int, optional
        OpenZL frame format version, pinned for every frame (default
        ``codec.DEFAULT_FORMAT_VERSION`` = 24, the newest rumi-eo 0.16.0 reads).
    threads : int, optional
        Compression threads/processes (default: ``rumimm.get_num_threads()``).
    verify : bool
        Decode every frame after compressing it and compare its bits.

    Attributes
    ----------
    header : bytes or None
        The header blob, once ``close`` has succeeded.
    rows : int
        Grid rows ``write_row`` expects (``tiles_down``); ``row_span(r)`` gives
        the image rows of each.
    grid : rumimm.grid.Grid
        The tile grid and frame unit.
    backend_name : {"serial", "processes"}
        How frames are compressed (see the module notes).

    Raises
    ------
    ValueError, TypeError, RumiError, CRSError
        For any bad argument, before a file is created.

    Notes
    -----
    Grid row ``r`` covers image rows ``r * tile_length`` to
    ``min((r + 1) * tile_length, Y)``.  Rows must arrive in order 0, 1, ...
    Leaving a ``with`` block by an exception, or a failed ``close``, discards
    the temporary file and leaves any existing file at ``path`` untouched.
    Memory: at most two rows of frames are in flight (submitted, not written),
    plus the frame index.

    Examples
    --------
    >>> with rumimm.Writer("big.rumi", (4, 100_000, 100_000), "uint16") as w:   # doctest: +SKIP
    ...     for r in range(w.rows):
    ...         w.write_row(r, make_rows(*w.row_span(r)))
    >>> blob = w.header                                                        # doctest: +SKIP
    """

    def __init__(self, path, shape, dtype, *, tile=512, unit="tile", transform=None, crs=None,
                 pixel_is_point=False, codec=None, format_version=None, threads=None, verify=False):
        self.path = os.fspath(path)
        b, y, x = _resolve_shape(shape)
        self.enc = _resolve_encoding(dtype)
        tl, tw = _resolve_tile(tile)
        self.unit = frame_unit(unit)
        if b == 1:
            # one band: both units give the same frames and layout; record "tile", the
            # reading rumimm.index (and the reference writer) derive from the IFD
            self.unit = FrameUnit.TILE
        self._matrix, self._keys, self.epsg = _resolve_georef(transform, crs, pixel_is_point)
        self.codec, self.format_version = _resolve_codec(codec, self.enc, format_version)
        self.threads = _resolve_threads(threads)
        self.verify = bool(verify)
        self.grid = Grid(x, y, tw, tl, b, self.unit)
        if os.path.isdir(self.path):
            raise IsADirectoryError(errno.EISDIR, "path is a directory, expected a file name", self.path)
        self.header: bytes | None = None
        self.counts = np.zeros(self.grid.n_frames, dtype=np.uint64)
        self._next_row = 0
        self._next_frame = 0
        self._pending: deque = deque()
        self._closed = False
        self.backend_name = self._choose_backend(b * y * x * self.enc.itemsize)
        self._file = _AtomicFile(self.path)
        try:
            self._file.fh.seek(self.grid.base_frame_offset)
            self._backend = self._make_backend()
        except BaseException:
            self._file.discard()
            raise

    # -- choosing how to compress ---------------------------------------------------
    def _choose_backend(self, raw_bytes: int) -> str:
        # openzl.ext compresses with the GIL held: threads add nothing, processes do,
        # once the image is large enough to pay for the pool (started once, then reused)
        limit = PROCESS_MIN_BYTES
        if not _pool_running(self.threads - 1):
            limit = max(limit, PROCESS_START_MIN_BYTES)
        frames_per_row = self.grid.tiles_across * self.grid.frames_per_position
        if self.threads < 2 or frames_per_row < 2 or raw_bytes < limit or _POOL_FAILED:
            return "serial"
        try:
            pickle.dumps(self.codec)
        except Exception:  # a user graph built from a closure cannot reach a worker
            return "serial"
        return "processes"

    def _make_backend(self):
        args = (self.codec, self.enc, self.format_version, self.verify, self.grid.n_frames)
        if self.backend_name == "processes":
            return _ProcessBackend(args, self.grid, self.threads)
        return _SerialBackend(args, self.grid)

    # -- public API -----------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int, int]:
        """(B, Y, X) of the image."""
        return self.grid.shape

    @property
    def dtype(self) -> np.dtype:
        return self.enc.dtype

    @property
    def rows(self) -> int:
        """Number of grid rows (``tiles_down``) ``write_row`` expects."""
        return self.grid.tiles_down

    @property
    def rows_written(self) -> int:
        return self._next_row

    @property
    def closed(self) -> bool:
        return self._closed

    def row_span(self, r: int) -> tuple[int, int]:
        """Image rows ``(y0, y1)`` covered by grid row ``r``."""
        if not 0 <= r < self.rows:
            raise IndexError(f"grid row {r} out of range for {self.rows} rows")
        tl = self.grid.tile_length
        return r * tl, min((r + 1) * tl, self.grid.image_length)

    def write_row(self, r: int, block) -> None:
        """Add grid row ``r`` as a ``(B, h_r, X)`` block (``(h_r, X)`` for one band).

        Raises
        ------
        RumiError
            ``r`` is not the next row, the writer is closed, or ``block`` has the
            wrong shape or a dtype of another sample encoding.  The writer stays
            usable after these; an error while compressing or writing discards it.
        """
        if self._closed:
            raise RumiError(f"{where(self.path)}writer is closed; no more rows can be written")
        if isinstance(r, (bool, np.bool_)) or not isinstance(r, (int, np.integer)):
            raise TypeError(f"row must be an int, got {r!r}")
        if r != self._next_row:
            if r >= self.rows or r < 0:
                raise RumiError(f"grid row {r} out of range for {self.rows} rows")
            raise RumiError(f"grid row {r} arrived out of order; rows must be written in order 0..{self.rows - 1}, "
                            f"expected row {self._next_row}")
        block = self._check_block(r, block)
        try:
            self._pending.append(self._backend.submit(r, block))
            del block
            self._next_row += 1
            while len(self._pending) >= ROWS_IN_FLIGHT:
                self._flush_one()
        except BaseException:
            self.abort()
            raise

    def close(self) -> bytes:
        """Finish the file: drain frames, write the prefix, fsync, rename; return the blob.

        Closing a writer that has not received every row raises RumiError and
        discards the temporary file.  Closing again returns the same blob.
        """
        if self._closed:
            if self.header is None:
                raise RumiError(f"{where(self.path)}writer was aborted; no file was written")
            return self.header
        try:
            if self._next_row != self.rows:
                raise RumiError(f"{where(self.path)}only {self._next_row} of {self.rows} grid rows were written; "
                                "a rumi file needs every frame")
            while self._pending:
                self._flush_one()
            self._backend.close()
            offsets = np.empty(self.grid.n_frames, dtype=np.uint64)
            offsets[0] = self.grid.base_frame_offset
            np.cumsum(self.counts[:-1], out=offsets[1:])
            offsets[1:] += np.uint64(self.grid.base_frame_offset)
            prefix = build_prefix(self.grid, self.enc, offsets, self.counts, self._matrix, self._keys)
            blob = build_header(self.grid, self.enc, self.counts)
            fh = self._file.fh
            end = self.grid.base_frame_offset + int(self.counts.sum())
            if self._next_frame != self.grid.n_frames or fh.tell() != end:
                raise RumiError(f"{where(self.path)}internal error: {self._next_frame} of {self.grid.n_frames} "
                                f"frames end at byte {fh.tell()}, expected {end}; nothing was written")
            fh.seek(0)
            fh.write(prefix)
            self._file.commit()
        except BaseException:
            self.abort()
            raise
        self.header = blob
        self._closed = True
        return blob

    def abort(self) -> None:
        """Stop without writing: cancel pending frames and delete the temporary file."""
        if self._closed:
            return
        self._closed = True
        self._pending.clear()
        try:
            self._backend.close(cancel=True)
        except Exception:
            pass
        finally:
            self._file.discard()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()

    def __del__(self):
        f = getattr(self, "_file", None)
        if f is not None and not getattr(self, "_closed", True):
            try:
                self.abort()
            except Exception:
                pass

    def __repr__(self) -> str:
        b, y, x = self.shape
        state = "closed" if self._closed else f"row {self._next_row}/{self.rows}"
        return (f"<rumimm.Writer {self.path!r} ({b}, {y}, {x}) {self.enc.name} tile "
                f"{self.grid.tile_length}x{self.grid.tile_width} {self.unit.name.lower()} {state}>")

    # -- internals ------------------------------------------------------------------
    def _check_block(self, r: int, block) -> np.ndarray:
        block = np.asarray(block)
        b, _, x = self.shape
        y0, y1 = self.row_span(r)
        if block.ndim == 2 and b == 1:
            block = block[np.newaxis]
        want = (b, y1 - y0, x)
        if block.shape != want:
            raise RumiError(f"grid row {r}: block has shape {block.shape}, expected (B, h, X) = {want}")
        if block.dtype != self.enc.dtype:
            try:
                other = _resolve_encoding(block.dtype)
            except RumiError:
                other = None
            if other is not self.enc:
                raise RumiError(f"grid row {r}: block dtype is {block.dtype}, expected {self.enc.dtype} "
                                f"({self.enc.name}); cast it explicitly if a lossy conversion is intended")
        return block

    def _flush_one(self) -> None:
        handle = self._pending.popleft()
        frames = self._backend.result(handle)
        t0 = time.perf_counter()
        fh = self._file.fh
        k = self._next_frame
        for data in frames:
            fh.write(data)
            self.counts[k] = len(data)
            k += 1
            if isinstance(data, memoryview):
                data.release()  # a view of a shared-memory segment the next rows reuse
        self._next_frame = k
        self._backend.note_busy(time.perf_counter() - t0)


# --------------------------------------------------------------------------- #
# write()
# --------------------------------------------------------------------------- #
def _source(array):
    """A sliceable source with .shape and .dtype; only plain sequences are read whole."""
    if all(hasattr(array, a) for a in ("shape", "dtype", "__getitem__")):
        return array
    return np.asarray(array)


def write(path, array, *, tile=512, unit="tile", transform=None, crs=None, pixel_is_point=False, codec=None,
          format_version=None, threads=None, verify=False) -> bytes:
    """Write ``array`` as a rumi file and return its header blob.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file to create or replace atomically.
    array : array-like, shape (B, Y, X) or (Y, X)
        Any of the 28 rumi sample dtypes.  A ``np.memmap`` or any array-like
        with ``shape``, ``dtype`` and slicing (zarr, h5py, xarray) is read one
        row of tiles at a time, so it may be larger than RAM.
    tile, unit, transform, crs, pixel_is_point, codec, format_version, threads, verify
        As for :class:`Writer`.

    Returns
    -------
    bytes
        The canonical header blob (equal to ``rumimm.index(path)``).

    Raises
    ------
    RumiError
        The array, dtype or an argument cannot be stored as rumi.
    CodecError
        A frame failed to compress (or, with ``verify=True``, to round-trip).
    CRSError
        ``crs`` is not an EPSG projected or geographic CRS.

    Examples
    --------
    >>> blob = rumimm.write("scene.rumi", scene, tile=512,                     # doctest: +SKIP
    ...                     transform=(10, 0, 500000, 0, -10, 4200000), crs=32633)
    """
    src = _source(array)
    shape = _resolve_shape(src.shape)
    two_d = len(src.shape) == 2
    with Writer(path, shape, src.dtype, tile=tile, unit=unit, transform=transform, crs=crs,
                pixel_is_point=pixel_is_point, codec=codec, format_version=format_version, threads=threads,
                verify=verify) as w:
        for r in range(w.rows):
            y0, y1 = w.row_span(r)
            block = src[y0:y1, :] if two_d else src[:, y0:y1, :]
            w.write_row(r, np.asarray(block))
            del block
    return w.header
