"""Write any (B, Y, X) array as a compliant rumi file: streamed, parallel and atomic.

:class:`Writer` takes the image one grid row at a time (a ``(B, h_r, X)`` block),
cuts it into frames in frame-index order (tile-interleaved: every band of a grid
position, then the next position), compresses them and appends them to a temporary
file right after the space reserved for the BigTIFF prefix, whose size depends only on
the shape (``grid.base_frame_offset``).  ``close`` seeks back, writes the prefix with
the real offsets and byte counts, fsyncs and renames the file into place
(:mod:`rumimm.writer.atomic`), then returns the canonical header blob.  Any failure removes
the temporary file and leaves an existing file at ``path`` untouched.

:func:`write` is a thin layer over :class:`Writer` that reads its source one row of
tiles at a time, so a ``np.memmap`` (or any sliceable array-like) larger than RAM
streams through in bounded memory: about two rows of frames plus the frame index.

Frames are compressed in this process, or, with ``threads >= 2`` and images of at
least ``PROCESS_START_MIN_BYTES`` (``PROCESS_MIN_BYTES`` once the workers run), by
this process and ``threads - 1`` encoding worker processes together
(:mod:`rumimm.writer.encode_pool`).  Every path writes the same bytes.
docs/dev/writer-notes.md has the design and its measurements.
"""

from __future__ import annotations

import pickle
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from types import TracebackType
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rumimm._deprecation import UNSET, renamed_keyword
from rumimm.errors import CodecError, RumiError, RumiWarning, where
from rumimm.format.grid import FrameUnit, Grid, frame_unit
from rumimm.format.spec import spec_named
from rumimm.format.trailer import build_trailer
from rumimm.format.v2 import Grid2
from rumimm.store import is_remote, open_writer
from rumimm.writer import encode_pool
from rumimm.writer.args import (
    check_frame_size,
    resolve_descriptions,
    resolve_encoding,
    resolve_format_version,
    resolve_georef,
    resolve_georef_tags,
    resolve_layout,
    resolve_path,
    resolve_shape,
    resolve_shape2,
    resolve_spec,
    resolve_threads,
    resolve_tile,
    resolve_time,
)
from rumimm.writer.frame_job import FrameJob, JobArgs, encode_specs, frame_specs
from rumimm.writer.sidecar import remove_sidecar, resolve_metadata, write_remote_sidecar, write_sidecar

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, DTypeLike

    from rumimm._typing import CRSArg, ProgressArg, SliceableArray, SpecName, StrPath, Tile, TimeArg, Unit
    from rumimm.codec.presets import CodecArg
    from rumimm.format.pam import Metadata

__all__ = ["Writer", "write"]

#: Raw bytes from which running encoding workers beat compressing serially.
PROCESS_MIN_BYTES = 32 << 20
#: Raw bytes from which it pays to start the workers (once per process).
PROCESS_START_MIN_BYTES = 512 << 20

_WORKERS_FAILED = False  # set when workers died: compress serially for the rest of the process


class _SerialBackend:
    """Compress in the calling thread."""

    def __init__(self, job: FrameJob, grid: Grid) -> None:
        self._job = job
        self._grid = grid

    def submit(self, r: int, block: np.ndarray) -> list[bytes]:
        block = np.asarray(block, dtype=self._job.enc.dtype)  # byte-swaps big-endian input
        return encode_specs(self._job, block, frame_specs(self._grid, r))

    def result(self, handle: list[bytes]) -> list[bytes]:
        return handle

    def note_busy(self, seconds: float) -> None:
        pass

    def close(self, cancel: bool = False) -> None:
        self._job.encoder.close()  # its OpenZL contexts go now, not with a cycle (FrameEncoder.close)


def _workers_broke() -> None:
    import warnings

    global _WORKERS_FAILED
    _WORKERS_FAILED = True  # do not pay for workers that cannot run, again and again
    warnings.warn("rumimm.write: an encoding worker process died; compressing in this process from now on",
                  RumiWarning, stacklevel=6)


def _codec_reaches_workers(codec: object) -> bool:
    """A worker can rebuild ``codec``: it pickles, and not by reference to the user's ``__main__``."""
    try:
        data = pickle.dumps(codec, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # a graph built from a closure
        return False
    return b"__main__" not in data  # workers never import the user's script


# --------------------------------------------------------------------------- #
# Writer
# --------------------------------------------------------------------------- #
class Writer:
    """Stream an image into a rumi file one grid row at a time.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file to create or replace (atomically, on ``close``).  Through a
        symbolic link the link's target is replaced and the link kept; a replaced
        file keeps its permission bits, a new one gets ``0666 & ~umask``.
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
        same file, and the blob records ``"tile"`` (as ``rumimm.build_blob`` derives it).
    transform : 6 or 9 numbers or ``Affine``, optional
        ``(x_res, row_rot, x_origin, col_rot, y_res, y_origin)``; needs ``crs``.
    crs : int, str or object with ``to_epsg()``, optional
        An EPSG code (``32633``, ``"EPSG:4326"``, a ``pyproj.CRS`` or rasterio ``CRS`` that
        *is* an EPSG CRS: an approximate match is refused); needs ``transform``.
    pixel_is_point : bool
        GTRasterTypeGeoKey: pixels are points (True) or areas (False).
    codec : str or codec object, optional
        A preset of :mod:`rumimm.codec` (``rumimm.PRESETS``): ``"fast"`` (fastest decode;
        rumi-eo 0.16.0 and 0.26.1 decode it too), ``"small"`` (rumi-eo 0.26.1 only),
        ``"portable"`` (OpenZL built-ins only), ...; per dtype, each picks its recipe and falls
        back to the dtype's default where it has none.  Default: ``"auto"`` (= ``"portable"``)
        for spec 0.1.0 files, ``"fast"`` for ``spec="0.2"``.  ``"geozl:<recipe>"`` names any
        geozl recipe.
    frame_format_version : int, optional
        OpenZL frame format version, pinned for every frame (default
        ``codec.DEFAULT_FORMAT_VERSION`` = 24, the newest rumi-eo 0.16.0 reads).
    threads : int, optional
        Processes that compress: this one plus ``threads - 1`` encoding workers
        for large images (default: ``rumimm.get_num_threads()``).
    verify : bool
        Decode every frame after compressing it and compare its bits.
    progress : None, bool or callable
        ``True`` draws a tqdm bar, a callable is called as ``progress(done, rows)``
        after each grid row reaches the file (see :mod:`rumimm.progress`).
    metadata : rumimm.format.pam.Metadata, optional
        Band metadata (nodata, descriptions, ...) for the PAM sidecar ``path + ".aux.xml"``,
        written with the file (see :func:`write`).  Without it (or with empty metadata)
        a sidecar left at that path by an earlier file is removed.
    spec : {None, "0.1", "0.2"}
        The specification to write: spec 0.1.0 (default, read by rumi-eo 0.16) or
        spec 0.2 (the ``RUMI`` header, 13-tag IFD, 32-byte blob and trailer that
        rumi-eo 0.18 and later read).  With ``"0.2"``, ``shape`` may be
        ``(T, B, Y, X)`` and ``unit`` is ``"tile"`` (frame unit 0), ``"cell"``
        (unit 1, or ``t b h w``, unit 4, when B and T are both above 1) or one of the
        planar units 0, 1, 3, 4, 9.
    descriptions : sequence of str
        ``spec="0.2"`` only, and required there: one non-empty, unique text per band
        (e.g. ``"B4, Red, 665nm"``), stored in the trailer (``Image.descriptions`` reads them).
    time : sequence
        ``spec="0.2"`` only, and required there: one coordinate per time step (a
        ``date``, ``datetime``, ISO string or ``numpy.datetime64``; whole UTC seconds,
        naive datetimes are UTC), or one ``(start, end)`` pair per step.
    storage_options : dict, optional
        For a ``path`` that is a URI (``s3://``, ``gs://``, ``az://``): the client's settings, as
        for reading, plus ``part_size`` (bytes per part of the upload); see docs/remote.md.
    overwrite : bool
        False: refuse to replace an existing file or object (``FileExistsError``).
    georef : (sequence of 16 float, sequence of 16 int), optional
        The values of the two georeferencing tags (ModelTransformationTag, GeoKeyDirectoryTag)
        as a rumi file stores them, written as they are instead of ``transform``, ``crs`` and
        ``pixel_is_point`` (``rumimm.convert`` keeps its source's this way).
    storage_options : dict, optional
        For a ``path`` that is a URI (``s3://``, ``gs://``, ``az://``): the client's settings,
        as for reading, plus ``part_size``; the frames are staged and uploaded on ``close``,
        the object visible only once complete (docs/remote.md, "Writing").
    overwrite : bool
        False: refuse to replace an existing file or object (``FileExistsError``).
    format_version, format, bands
        Deprecated names of ``frame_format_version``, ``spec`` and ``descriptions``.

    Attributes
    ----------
    header : bytes or None
        The header blob, once ``close`` has succeeded.
    rows : int
        Grid rows ``write_row`` expects (``tiles_down``); ``row_span(r)`` gives
        the image rows of each.
    grid : rumimm.format.grid.Grid
        The tile grid and frame unit.
    backend_name : {"serial", "processes"}
        How frames are compressed (see the module notes).

    Raises
    ------
    ValueError, TypeError, RumiError, CRSError
        For any bad argument, before a file is created (RumiError for a shape or
        dtype rumi cannot store, or a tile larger than OpenZL compresses).
    FileNotFoundError
        The directory of ``path`` does not exist (the message names ``path``).

    Notes
    -----
    Grid row ``r`` covers image rows ``r * tile_length`` to
    ``min((r + 1) * tile_length, Y)``.  Rows must arrive in order 0, 1, ...
    Leaving a ``with`` block by an exception, or a failed ``close``, discards
    the temporary file and leaves any existing file at ``path`` untouched.
    Memory: at most two rows of frames are in flight (submitted, not written),
    plus the frame index.  A writer killed outright leaves its temporary file
    ``.<name>.rumimm-<pid>-<random>.tmp``; the next write of ``path`` or
    :func:`rumimm.writer.atomic.clean` removes it.

    Examples
    --------
    >>> with rumimm.Writer("big.rumi", (4, 100_000, 100_000), "uint16") as w:   # doctest: +SKIP
    ...     for r in range(w.rows):
    ...         w.write_row(r, make_rows(*w.row_span(r)))
    >>> blob = w.header                                                        # doctest: +SKIP
    """

    def __init__(self, path: StrPath, shape: Sequence[int], dtype: DTypeLike, *, tile: Tile = 512,
                 unit: Unit | int = "tile", transform: Sequence[float] | None = None, crs: CRSArg = None,
                 pixel_is_point: bool = False, codec: CodecArg = None, frame_format_version: int | None = None,
                 threads: int | None = None, verify: bool = False, progress: ProgressArg = None,
                 metadata: Metadata | None = None, spec: SpecName | None = None,
                 descriptions: Sequence[str] | None = None, time: TimeArg | np.ndarray = None,
                 georef: tuple[Sequence[float], Sequence[int]] | None = None,
                 storage_options: Mapping[str, Any] | None = None, overwrite: bool = True,
                 format_version: object = UNSET, format: object = UNSET, bands: object = UNSET) -> None:
        from rumimm.codec import resolve_codec
        from rumimm.progress import Progress

        frame_format_version = renamed_keyword("Writer", "format_version", "frame_format_version", format_version,
                                               frame_format_version)
        spec = renamed_keyword("Writer", "format", "spec", format, spec)
        descriptions = renamed_keyword("Writer", "bands", "descriptions", bands, descriptions)
        self.path: str = path if isinstance(path, str) and is_remote(path) else resolve_path(path)
        self._storage_options = dict(storage_options or {})
        self._spec = spec_obj = spec_named(resolve_spec(spec))
        self.spec = spec_obj.name
        self._trailer = b""
        if spec_obj.has_time:
            steps, b, y, x = resolve_shape2(shape)
            self._user_shape = (b, y, x) if len(tuple(shape)) < 4 else (steps, b, y, x)
            layout = resolve_layout(unit, b, steps)
            self.descriptions = resolve_descriptions(descriptions, b)
            kind, seconds = resolve_time(time, steps)
            self._trailer = build_trailer(self.descriptions, kind, seconds)
        else:
            if descriptions is not None or time is not None:
                raise ValueError("descriptions= and time= are stored by spec 0.2 files only; pass spec='0.2' (or "
                                 "metadata= for a spec 0.1 file's sidecar descriptions)")
            steps, (b, y, x) = 1, resolve_shape(shape)
            self._user_shape = (b, y, x)
        self.enc = resolve_encoding(dtype, self.spec)
        tl, tw = resolve_tile(tile)
        if spec_obj.has_time:
            self.grid: Grid = Grid2.of(x, y, tw, tl, b, steps, layout)
            self.unit = self.grid.unit
        else:
            self.unit = frame_unit(unit)
            if b == 1:
                # one band: both units give the same frames and layout; record "tile", the
                # reading rumimm.build_blob (and the reference writer) derive from the IFD
                self.unit = FrameUnit.TILE
            self.grid = Grid(x, y, tw, tl, b, self.unit)
        check_frame_size(self.grid.shape, (tl, tw), self.unit == FrameUnit.CELL, self.enc.itemsize)
        if georef is not None:
            self._matrix, self._keys, self.epsg = resolve_georef_tags(georef, transform, crs, pixel_is_point)
        else:
            self._matrix, self._keys, self.epsg = resolve_georef(transform, crs, pixel_is_point, (y, x))
        self.metadata = resolve_metadata(metadata, b, self.enc.dtype)
        # complex128 frames of spec 0.2 hold float64 components: rumi-eo reads them so
        components = self._components = spec_obj.component_frames(self.enc.itemsize)
        self.codec = resolve_codec(codec, resolve_encoding(np.float64) if components else self.enc, spec=self.spec)
        self.format_version = resolve_format_version(frame_format_version)
        _check_recipe_version(self.codec, self.format_version, self.path)
        self.threads = resolve_threads(threads)
        self.verify = bool(verify)
        # the encoder this process compresses with; building it checks the codec and version
        self._job = FrameJob(JobArgs(self.codec, self.enc, self.format_version, self.verify, self.grid.n_frames,
                                     components))
        self._progress = Progress(progress, self.grid.tiles_down, desc="write", unit="row")
        self.header: bytes | None = None
        self.counts = np.zeros(self.grid.n_frames, dtype=np.uint64)
        self._next_row = 0
        self._next_frame = 0
        self._pending: deque = deque()
        self._closed = False
        try:
            self._file = open_writer(self.path, storage_options, overwrite=overwrite)
            try:
                self._file.seek(self.grid.base_frame_offset)
                self._backend = self._make_backend(steps * b * y * x * self.enc.itemsize)
            except BaseException:
                self._file.abort()
                raise
        except BaseException:
            self._progress.close()
            raise

    # -- choosing how to compress ---------------------------------------------------
    def _make_backend(self, raw_bytes: int) -> _SerialBackend | encode_pool.ProcessBackend:
        self.backend_name = "serial"
        # openzl.ext compresses with the GIL held: threads add nothing, processes do,
        # once the image is large enough to pay for them (started once, then reused)
        workers = self.threads - 1
        limit = PROCESS_MIN_BYTES if encode_pool.pool_running(workers) else PROCESS_START_MIN_BYTES
        frames_per_row = self.grid.tiles_across * self.grid.frames_per_position
        if (workers < 1 or frames_per_row < 2 or raw_bytes < limit or _WORKERS_FAILED
                or not _codec_reaches_workers(self.codec)):
            return _SerialBackend(self._job, self.grid)
        try:
            backend = encode_pool.ProcessBackend(self._job, self.grid, self.threads, on_broken=_workers_broke)
        except encode_pool.PoolUnavailable:
            return _SerialBackend(self._job, self.grid)
        except OSError:  # no way to start a process here
            _workers_broke()
            return _SerialBackend(self._job, self.grid)
        self.backend_name = "processes"
        return backend

    # -- public API -----------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """(B, Y, X) of the image; (T, B, Y, X) for a spec 0.2 write of a 4-D shape."""
        return self._user_shape

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

    def write_row(self, r: int, block: ArrayLike) -> None:
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
        rows = [self._check_block(r, block)]
        del block  # the one reference left is in ``rows``, which _queue empties: a row is not held while others flush
        self._queue(self._backend.submit, r, rows)

    def _queue(self, submit: Callable[[int, Any], Any], r: int, rows: list[Any]) -> None:
        """Queue grid row ``r`` (``submit(r, rows.pop())``: its frames, or their pending encoding), writing
        out finished rows while more than the rows in flight wait; any failure aborts the file."""
        try:
            self._pending.append(submit(r, rows.pop()))
            self._next_row += 1
            while len(self._pending) >= encode_pool.ROWS_IN_FLIGHT:
                self._flush_one()
        except BaseException:
            self.abort()
            raise

    def write_frames(self, r: int, frames: Sequence[bytes]) -> None:
        """Add grid row ``r`` as its frames, already compressed, in frame-index order.

        For frames compressed elsewhere (Dask workers: :mod:`rumimm.writer.distributed`) with
        this writer's codec and format version; needs a writer that compresses serially.
        """
        if self._closed:
            raise RumiError(f"{where(self.path)}writer is closed; no more rows can be written")
        if r != self._next_row or self.backend_name != "serial":
            raise RumiError(f"{where(self.path)}grid row {r}: expected row {self._next_row} on a serial writer")
        frames = list(frames)
        want = self.grid.tiles_across * self.grid.frames_per_position
        if len(frames) != want:
            raise RumiError(f"{where(self.path)}grid row {r} has {len(frames)} frames, expected {want}")
        for j, frame in enumerate(frames):
            self._check_frame(r * want + j, frame)
        self._queue(lambda _r, done: done, r, [frames])  # the serial backend's result() hands them back as they are

    def _check_frame(self, k: int, frame: bytes) -> None:
        """A frame compressed elsewhere must be what this writer would write at index ``k``: its pinned
        format version, one output of the encoding's type, the frame's sample count in bytes (~3 us)."""
        from rumimm.codec.frames import check_frame_header, frame_format_version

        label = f"{where(self.path)}frame {k}"
        try:
            version = frame_format_version(frame)
        except RumiError as exc:
            raise RumiError(f"{label}: {exc}") from None
        if version != self.format_version:
            raise RumiError(f"{label} has OpenZL format version {version}, but this file pins "
                            f"{self.format_version}: every frame of a file uses one version")
        check_frame_header(frame, self.enc, self.grid.frame_samples(k), label=label, components=self._components)

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
            prefix = self._spec.build_prefix(self.grid, self.enc, offsets, self.counts, self._matrix, self._keys)
            blob = self._spec.build_header(self.grid, self.enc, self.counts)
            fh = self._file
            end = self.grid.base_frame_offset + int(self.counts.sum())
            if self._next_frame != self.grid.n_frames or fh.tell() != end:
                raise RumiError(f"{where(self.path)}internal error: {self._next_frame} of {self.grid.n_frames} "
                                f"frames end at byte {fh.tell()}, expected {end}; nothing was written")
            fh.write(self._trailer)  # spec 0.2: band texts and time after the last frame
            fh.seek(0)
            fh.write(prefix)
            # the sidecar goes first: a crash between the two renames leaves the old file with a
            # sidecar whose blob digest is not its own, which open recognises and ignores
            fh.flush()
            remote = is_remote(self.path)
            has_sidecar = not remote and write_sidecar(self.path, self.metadata, blob, self._file.staged)
            self._file.commit()
        except BaseException:
            self.abort()
            raise
        if remote:  # after the object: an object store has no rename to order the two by
            write_remote_sidecar(self.path, self._storage_options, self.metadata, blob)
        elif not has_sidecar:
            remove_sidecar(self.path)  # it described the file just replaced
        self._progress.close()
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
            self._file.abort()
            self._progress.close()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc_type is not None:
            self.abort()
        elif not self._closed:
            self.close()

    def __del__(self) -> None:
        f = getattr(self, "_file", None)
        if f is not None and not getattr(self, "_closed", True):
            try:
                self.abort()
            except Exception:
                pass

    def __repr__(self) -> str:
        shape = ", ".join(str(v) for v in self.shape)
        state = "closed" if self._closed else f"row {self._next_row}/{self.rows}"
        return (f"<rumimm.Writer {self.path!r} ({shape}) {self.enc.name} tile "
                f"{self.grid.tile_length}x{self.grid.tile_width} {self.unit.name.lower()} {state}>")

    # -- internals ------------------------------------------------------------------
    def _check_block(self, r: int, block: ArrayLike) -> np.ndarray:
        block = np.asarray(block)
        y0, y1 = self.row_span(r)
        if len(self._user_shape) == 4:  # spec 0.2 (T, B, h, X): the step-band pairs become virtual bands
            t, b, _, x = self._user_shape
            want4 = (t, b, y1 - y0, x)
            if block.shape != want4:
                raise RumiError(f"grid row {r}: block has shape {block.shape}, expected (T, B, h, X) = {want4}")
            band_major = cast(Grid2, self.grid).band_major
            block = (block.transpose(1, 0, 2, 3) if band_major else block).reshape(t * b, y1 - y0, x)
        b, _, x = self.grid.shape
        if block.ndim == 2 and b == 1:
            block = block[np.newaxis]
        want = (b, y1 - y0, x)
        if block.shape != want:
            raise RumiError(f"grid row {r}: block has shape {block.shape}, expected (B, h, X) = {want}")
        if block.dtype != self.enc.dtype:
            try:
                other = resolve_encoding(block.dtype)
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
        fh = self._file
        k = self._next_frame
        for data in frames:
            fh.write(data)
            self.counts[k] = len(data)
            k += 1
            if isinstance(data, memoryview):
                data.release()  # a view of a shared-memory segment the next rows reuse
        self._next_frame = k
        self._backend.note_busy(time.perf_counter() - t0)
        self._progress.advance()


# --------------------------------------------------------------------------- #
# write()
# --------------------------------------------------------------------------- #
def _source(array: ArrayLike | SliceableArray) -> SliceableArray:
    """A sliceable source with .shape and .dtype; only plain sequences are read whole."""
    if all(hasattr(array, a) for a in ("shape", "dtype", "__getitem__")):
        return cast("SliceableArray", array)
    return np.asarray(array)



def _check_recipe_version(codec: Any, format_version: int, path: str) -> None:
    """A geozl recipe's frames carry the frame format geozl writes it at (24, or 27 for geozl 0.19's newer
    codecs): a file asked to pin another is refused, not written at that one (a pin its frames would belie)."""
    from rumimm.codec.compat import recipe_codecs

    recipe = getattr(codec, "recipe", None)
    if recipe is None:
        return
    version = recipe_codecs(recipe)[1]
    if version != format_version:
        where_ = "above" if version > format_version else "not"
        raise CodecError(f"{where(path)}codec {codec.name!r} writes OpenZL frame format {version}, {where_} the "
                         f"frame_format_version {format_version} asked for (geozl writes a recipe at its own "
                         f"version); pass frame_format_version={version}, or a codec of OpenZL's built-ins "
                         "(\"portable\"), which writes any version")

def write(path: StrPath, array: ArrayLike | SliceableArray, *, tile: Tile = 512, unit: Unit | int = "tile",
          transform: Sequence[float] | None = None, crs: CRSArg = None, pixel_is_point: bool = False,
          codec: CodecArg = None, frame_format_version: int | None = None, threads: int | None = None,
          verify: bool = False, progress: ProgressArg = None, nodata: float | Sequence[float | None] | None = None,
          descriptions: Sequence[str | None] | None = None, colorinterp: Sequence[str | Enum | None] | None = None,
          scales: Sequence[float | None] | None = None, offsets: Sequence[float | None] | None = None,
          units: Sequence[str | None] | None = None,
          colormaps: Mapping[int, Mapping[int, tuple[int, ...]]] | None = None,
          tags: Mapping[str, Any] | None = None, band_tags: Mapping[int, Mapping[str, Any]] | None = None,
          spec: SpecName | None = None, time: TimeArg | np.ndarray = None,
          storage_options: Mapping[str, Any] | None = None, overwrite: bool = True, format_version: object = UNSET,
          format: object = UNSET, bands: object = UNSET) -> bytes:
    """Write ``array`` as a rumi file and return its header blob.

    Parameters
    ----------
    path : str or os.PathLike
        The ``.rumi`` file to create or replace atomically.
    array : array-like, shape (B, Y, X) or (Y, X); (T, B, Y, X) with ``spec="0.2"``
        Any of the 28 rumi sample dtypes (spec 0.2: its 21).  A ``np.memmap`` or any
        array-like with ``shape``, ``dtype`` and slicing (zarr, h5py, xarray) is read one
        row of tiles at a time, so it may be larger than RAM.  A Dask array (or a
        Dask-backed DataArray) on an active ``dask.distributed`` client is compressed on
        the workers, chunk by chunk (:mod:`rumimm.writer.distributed`).
    tile, unit, transform, crs, pixel_is_point, codec, frame_format_version, threads, verify, progress
        As for :class:`Writer`; ``progress`` advances once per row of tiles.
    nodata : number or sequence of numbers, optional
        The value marking missing samples: one for every band, or one per band
        (None for a band without).  It must be a value of the array's dtype.
    descriptions : sequence of str or None, optional
        One per band (GDAL's band description, rasterio's ``descriptions``).  Spec 0.1: kept
        in the sidecar (below).  Spec 0.2: required, one non-empty, unique text per band,
        stored in the file's trailer.
    units : sequence of str or None, optional
        One per band (GDAL's unit type).
    colorinterp : sequence of str or None, optional
        One per band: a rasterio ``ColorInterp`` name (``"red"``, ``"alpha"``, ...) or member.
    scales, offsets : sequence of float or None, optional
        One per band: physical value = sample * scale + offset.
    colormaps : dict, optional
        ``{band (1-based): {value: (r, g, b[, a])}}``.
    tags, band_tags : dict, optional
        Dataset tags ``{key: value}`` and ``{band (1-based): {key: value}}``.

        rumi 0.1.0 has no place for these, so they go into a GDAL PAM sidecar,
        ``path + ".aux.xml"``, written with the file (its rename comes just before the
        file's); GDAL, rasterio and :func:`rumimm.open` read it.  Without any of them an
        earlier sidecar at that path is removed.
    storage_options, overwrite
        As for :class:`Writer`: a URI ``path`` is uploaded, the object visible only once complete.
    spec, time
        As for :class:`Writer`: ``spec="0.2"`` writes today's reference format
        (rumi-eo 0.18 and later), which needs a text per band (``descriptions``) and a
        coordinate per step.
    format_version, format, bands
        Deprecated names of ``frame_format_version``, ``spec`` and ``descriptions``.

    Returns
    -------
    bytes
        The canonical header blob (equal to ``rumimm.build_blob(path)``).

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
    from rumimm.format.pam import Metadata
    from rumimm.writer import distributed

    frame_format_version = renamed_keyword("write", "format_version", "frame_format_version", format_version,
                                           frame_format_version)
    spec = renamed_keyword("write", "format", "spec", format, spec)
    descriptions = renamed_keyword("write", "bands", "descriptions", bands, descriptions)
    texts, descriptions = (descriptions, None) if spec == "0.2" else (None, descriptions)  # 0.2: the trailer's
    distributed.check_dask_source(path, array)
    client = distributed.client_for(array)  # a Dask array on a cluster: encoded where its chunks are
    if client is not None:
        threads = 1
    src = _source(array)
    two_d = len(src.shape) == 2
    four_d = len(src.shape) == 4
    count = 1 if two_d else int(src.shape[1] if four_d else src.shape[0])
    metadata = Metadata.from_args(count, nodata=nodata, descriptions=descriptions,
                                  colorinterp=colorinterp, scales=scales, offsets=offsets, units=units,
                                  colormaps=colormaps, tags=tags, band_tags=band_tags) if len(src.shape) in (2, 3, 4) \
        else None
    with Writer(path, src.shape, src.dtype, tile=tile, unit=unit, transform=transform, crs=crs,
                spec=spec, descriptions=cast("Sequence[str] | None", texts), time=time,
                pixel_is_point=pixel_is_point, codec=codec, frame_format_version=frame_format_version, threads=threads,
                verify=verify, progress=progress, metadata=metadata, storage_options=storage_options,
                overwrite=overwrite) as w:
        if client is not None:
            distributed.write_on_client(w, src, client)
        for r in range(w.rows_written, w.rows):
            y0, y1 = w.row_span(r)
            block = src[y0:y1, :] if two_d else src[:, :, y0:y1, :] if four_d else src[:, y0:y1, :]
            w.write_row(r, np.asarray(block))
            del block
    return w.close()  # closed by the with block: the same blob again
