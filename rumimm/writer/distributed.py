"""Write a Dask array through the active ``dask.distributed`` client: encode where the chunks are.

Without a client, :func:`rumimm.write` computes a Dask array one row of tiles at a time and
compresses in this process.  On a cluster that moves every raw sample to the writing
process and leaves the workers idle while it compresses.  Here each chunk (cut, if need
be, on tile boundaries, every band and step whole) is compressed by a task on the worker
that computed it, and only the compressed frames travel to this process, which appends
them in frame order to the :class:`~rumimm.writer.writer.Writer`'s temporary file; the
writer then writes the prefix and renames the file into place exactly as for any write.
A worker that dies has its tasks rerun by the scheduler; a computation that fails
(``KilledWorker``, a codec error) cancels the rest and the writer discards its temporary
file, so the destination is the old file or absent.

Each worker keeps one frame encoder per file and thread between tasks.  Raw chunks are
released as soon as they are encoded, and the chunks are submitted in frame order, a window
at a time: at most a row of chunks plus one a worker thread (:func:`chunks_in_flight`) are
submitted and not yet written, so however slowly this process writes, no more than those
chunks' compressed frames are held anywhere (on the workers, or here while a row is written).
Each submission carries only the tasks its rows need (:func:`row_graphs`), so an array
embedded in the graph (``da.from_array``) travels once, a chunk at a time.  When rows share a
task (a reduction such as ``x - x.mean()``, a rechunk of input cut across tile rows), a
window would compute it again for every row that needs it, so such a write is submitted
whole, as one graph: each task runs once, and compressed frames wait on the workers until
this process writes them.
"""

from __future__ import annotations

import collections
import itertools
import math
import pickle
import threading
from typing import Any

import numpy as np

from rumimm.errors import RumiError, where
from rumimm.writer.frame_job import FrameJob, FrameSpec, JobArgs, cut, frame_specs

__all__ = ["check_dask_source", "chunks_in_flight", "client_for", "dask_array_of", "row_graphs", "write_on_client"]


def dask_array_of(array: Any) -> Any:
    """The Dask array behind ``array`` (itself, or an xarray object's ``.data``), or None."""
    try:
        import dask.array as da
    except ImportError:
        return None
    if isinstance(array, da.Array):
        return array
    data = getattr(array, "data", None) if hasattr(array, "dims") else None
    return data if isinstance(data, da.Array) else None


def check_dask_source(path: Any, array: Any) -> None:
    """Refuse a Dask array whose chunk sizes are unknown (NaN): rumi needs the shape before the first frame."""
    arr = dask_array_of(array)
    if arr is None:
        return
    unknown = [axis for axis, c in enumerate(arr.chunks) if any(math.isnan(v) for v in c)]
    if unknown:
        raise RumiError(f"{where(path)}the Dask array has unknown (nan) chunk sizes along axis "
                        f"{', '.join(map(str, unknown))}; a rumi file needs its shape before the first frame: "
                        "call .compute_chunk_sizes() (or pass lengths=) first")


def client_for(array: Any) -> Any:
    """The ``distributed.Client`` that would compute ``array`` (the default client), or None."""
    arr = dask_array_of(array)
    if arr is None:
        return None
    try:
        from dask.base import get_scheduler
        from distributed import default_client
    except ImportError:
        return None
    try:
        client = default_client()
    except ValueError:  # no client
        return None
    scheduler = get_scheduler(collections=[arr])
    return client if getattr(scheduler, "__self__", None) is client else None  # unless another scheduler is set


def _aligned(edges: tuple[int, ...], size: int, step: int) -> tuple[int, ...]:
    """Chunk sizes of an axis of ``size`` with the cuts of ``edges`` moved to multiples of ``step``."""
    cuts = sorted({min(size, round(e / step) * step) for e in np.cumsum(edges)[:-1]} - {0, size})
    bounds = [0, *cuts, size]
    return tuple(b - a for a, b in itertools.pairwise(bounds))


_jobs: dict[tuple, FrameJob] = {}
_jobs_lock = threading.Lock()


def _job(args_bytes: bytes) -> FrameJob:
    """This worker thread's FrameJob for the file whose pickled JobArgs are ``args_bytes``."""
    key = (threading.get_ident(), args_bytes)
    with _jobs_lock:
        job = _jobs.get(key)
    if job is None:
        job = FrameJob(pickle.loads(args_bytes))
        with _jobs_lock:
            mine = [k for k in _jobs if k[0] == key[0]]
            if len(mine) >= 8:  # a long-lived worker writing many files: this thread's encoders start over
                for k in mine:
                    _jobs.pop(k).encoder.close()  # this thread's own: none is encoding now
            _jobs[key] = job
    return job


def _encode_chunk(block: np.ndarray, y0: int, x0: int, args_bytes: bytes, grid: Any,
                  planes: tuple[int, int, bool] | None) -> list[tuple[int, int, list[bytes]]]:
    """A task: the frames of one chunk (tile-aligned, every band) as ``[(row, first frame, frames)]``."""
    job = _job(args_bytes)
    block = np.asarray(block, dtype=job.enc.dtype)  # byte-swaps big-endian input
    if planes is not None:  # spec 0.2 (T, B, h, w): the step-band pairs are the grid's virtual bands
        t, b, band_major = planes
        block = (block.transpose(1, 0, 2, 3) if band_major else block).reshape(t * b, *block.shape[-2:])
    elif block.ndim == 2:
        block = block[np.newaxis]
    tl = grid.tile_length
    height, width = block.shape[-2:]
    out = []
    for r in range(y0 // tl, -(-(y0 + height) // tl)):
        rows = block[:, r * tl - y0 : min((r + 1) * tl, y0 + height) - y0]
        specs = [FrameSpec(s.k, s.band, s.x0 - x0, s.x1 - x0) for s in frame_specs(grid, r)
                 if x0 <= s.x0 < x0 + width]
        out.append((r, specs[0].k, [job.encode(s.k, cut(rows, s)) for s in specs]))
    return out


def write_on_client(writer: Any, array: Any, client: Any) -> bool:
    """Fill ``writer`` (built with ``threads=1``) from the Dask array behind ``array`` on ``client``.

    The writer receives every grid row in order through ``write_frames``; closing it is the
    caller's.  False (and nothing written) for a codec that cannot be pickled to the workers:
    the caller then computes the rows here.
    """
    import dask

    arr = dask_array_of(array)
    grid = writer.grid
    tl, tw = grid.tile_length, grid.tile_width
    planes = None
    if arr.ndim == 4:
        planes = (int(arr.shape[0]), int(arr.shape[1]), bool(getattr(grid, "band_major", False)))
    # every band and step in a chunk, cuts on tile boundaries: a chunk is a set of whole frames
    chunks = (*((n,) for n in arr.shape[:-2]), _aligned(arr.chunks[-2], arr.shape[-2], tl),
              _aligned(arr.chunks[-1], arr.shape[-1], tw))
    if chunks != arr.chunks:
        arr = arr.rechunk(chunks)
    components = writer.spec == "0.2" and writer.enc.itemsize == 16
    args = JobArgs(writer.codec, writer.enc, writer.format_version, writer.verify, grid.n_frames, components)
    try:
        args_bytes = pickle.dumps(args, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a codec graph built from a closure: compressed here instead
        return False
    if b"__main__" in args_bytes:  # workers never import the user's script
        return False
    ys = np.cumsum((0, *chunks[-2]))[:-1]
    xs = np.cumsum((0, *chunks[-1]))[:-1]
    blocks = arr.to_delayed(optimize_graph=True).reshape(len(ys), len(xs))
    graphs = row_graphs(blocks)
    if graphs is not None:  # each row's chunks with only the tasks that row needs
        from dask.delayed import Delayed

        culled = np.empty(blocks.shape, dtype=object)
        for (i, j), b in np.ndenumerate(blocks):
            culled[i, j] = Delayed(b.key, graphs[i])
        blocks = culled
    encode = dask.delayed(_encode_chunk, pure=True)
    tasks = [encode(blocks[i, j], int(y0), int(x0), args_bytes, grid, planes)
             for i, y0 in enumerate(ys) for j, x0 in enumerate(xs)]  # frame order: row by row of chunks
    per_row = len(xs)
    # rows sharing a task: one submission (a window would compute the shared tasks once per row)
    limit = len(tasks) if graphs is None else chunks_in_flight(per_row, sum(client.nthreads().values()))
    pending: collections.deque = collections.deque()  # futures submitted, in frame order, not yet written
    submitted = 0
    try:
        for i in range(len(ys)):
            # top up: at most ``limit`` chunks submitted and not yet written, counting this row's
            more = min(len(tasks), i * per_row + limit) - submitted
            if more > 0:
                pending.extend(client.compute(tasks[submitted : submitted + more]))
                submitted += more
            rows: dict[int, list[tuple[int, list[bytes]]]] = {}
            for _ in range(per_row):
                fut = pending.popleft()
                for r, first, frames in fut.result():
                    rows.setdefault(r, []).append((first, frames))
                fut.release()  # its frames leave the worker: they are this process's now
            for r in sorted(rows):
                writer.write_frames(r, [f for _, frames in sorted(rows[r], key=lambda p: p[0]) for f in frames])
    except BaseException:
        client.cancel(list(pending))
        raise
    return True


def row_graphs(blocks: Any) -> list[dict] | None:
    """Each row of ``blocks`` (Delayed chunks sharing one graph): the tasks its chunks need, or None when
    two rows need the same task."""
    from dask.core import get_dependencies

    dsk = dict(blocks.flat[0].__dask_graph__())
    row_of: dict = {}
    graphs = []
    for i, row in enumerate(blocks):
        need: dict = {}
        todo = [b.key for b in row]
        while todo:
            key = todo.pop()
            if key in need:
                continue
            if row_of.setdefault(key, i) != i:
                return None
            need[key] = dsk[key]
            todo.extend(get_dependencies(dsk, key))
        graphs.append(need)
    return graphs


def chunks_in_flight(per_row: int, threads: int) -> int:
    """How many chunks a cluster write has submitted and not yet written, at most: a row of chunks
    (a grid row needs every chunk across before its frames can be written) and one a worker thread,
    which encode the next row while this process writes."""
    return per_row + max(1, threads)
