"""Dask arrays over rumi files: frame-aligned chunks, one task per chunk, files kept open.

:func:`to_dask` builds the graph rather than wrapping an open image in ``da.from_array``:
one blockwise layer whose keywords carry the file's path (or URI) and blob once, and each
chunk's window as integers, never an open image or decoded data.  A task takes the image
its process already holds (:mod:`rumimm.integrations.worker_images`; a worker opens each
file once, not once a task), reads its window with the GIL released while frames decode,
and Dask fuses that read with the first step that consumes it (a sum's per-chunk sum).

Chunks are what Dask users expect of a chunked store (zarr's ``from_zarr``): ``"auto"``
sizes them by Dask's ``array.chunk-size`` setting, capped at 32 MiB (``rumimm.chunk-size``
overrides both), in whole frames, all bands together where they fit, so a 512 MiB file is
16 tasks, not a thousand (a task of one 512 KB frame costs the scheduler more than its decode).  Explicit chunks
are honoured; one that splits frames warns, since each task then decodes frames it only
partly uses.  Slicing the returned array (``arr[:, 100:612, :512]``, or xarray's ``isel`` on
a DataArray wrapping it) becomes a read of that window, so only the frames it touches decode.

Writing a Dask array goes through :func:`rumimm.write` (:mod:`rumimm.writer.distributed`
on a Dask client).
"""

from __future__ import annotations

import itertools
import math
import os
import warnings
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from rumimm._typing import StrPath
    from rumimm.format.blob import Header

    #: A header as ``rumimm.open`` takes it: the blob, a parsed Header, a path to a blob file, or None.
    HeaderArg: TypeAlias = bytes | Header | StrPath | None

from rumimm.errors import RumiError, RumiWarning, where
from rumimm.integrations.worker_images import held

__all__ = ["auto_chunks", "frame_chunks", "resolve_chunks", "to_dask"]


def frame_chunks(img: Any) -> tuple[int, ...]:
    """The frame grid as Dask chunk sizes: (1 or B, tile_length, tile_width); for a spec 0.2
    file of several steps (1 or T, 1 or B, tile_length, tile_width)."""
    from rumimm.format.grid import FrameUnit

    cell = img.header.frame_unit == FrameUnit.CELL
    tl, tw = img.tile
    return (*tuple(n if cell else 1 for n in img.shape[:-2]), tl, tw)


#: The most bytes an automatic chunk holds unless Dask's ``rumimm.chunk-size`` setting says otherwise.
#: Decoding into a chunk and reducing it runs faster when the chunk stays near the cache:
#: a full-image sum of 512 MiB in 4 x 4096 x 4096 windows took 1.5 s here, in 4 x 2048 x 2048
#: (32 MiB) windows 1.0 s, in 4 x 1024 x 1024 windows 0.95 s (docs/scaling.md).
CHUNK_BYTES = 32 << 20


def _limit_bytes(limit: int | str | None) -> int:
    """The byte budget of a chunk: ``limit``, else ``rumimm.chunk-size``, else the smaller of
    Dask's ``array.chunk-size`` and :data:`CHUNK_BYTES`."""
    import dask
    from dask.utils import parse_bytes

    def as_int(value: int | str) -> int:
        return int(parse_bytes(value)) if isinstance(value, str) else int(value)

    if limit is not None:
        return as_int(limit)
    own = dask.config.get("rumimm.chunk-size", None)
    if own is not None:
        return as_int(own)
    return min(as_int(dask.config.get("array.chunk-size")), CHUNK_BYTES)


def auto_chunks(shape: tuple[int, ...], dtype: Any, frame: tuple[int, ...],
                limit: int | str | None = None) -> tuple[int, ...]:
    """One chunk shape of whole frames, at most ``limit`` bytes.

    The default budget is Dask's ``array.chunk-size`` setting, capped at :data:`CHUNK_BYTES`
    (32 MiB) unless ``dask.config.set({"rumimm.chunk-size": ...})`` sets rumimm's own.

    Every leading axis (bands, steps) whole where one frame position of them fits, else the
    frame's own; then as many frame rows and columns as fit, about as many of each (square
    chunks serve windows in either direction).  Never less than one frame.
    """
    itemsize = np.dtype(dtype).itemsize
    budget = _limit_bytes(limit)
    *lead_shape, height, width = shape
    *lead_frame, tl, tw = frame
    lead = tuple(lead_shape) if math.prod(lead_shape) * tl * tw * itemsize <= budget else tuple(lead_frame)
    position = max(1, math.prod(lead) * tl * tw * itemsize)
    down, across = -(-height // tl), -(-width // tw)
    cells = max(1, budget // position)
    ny = max(1, min(down, math.isqrt(cells)))
    nx = max(1, min(across, cells // ny))
    ny = max(1, min(down, cells // nx))  # a narrow image: the columns left over become rows
    return (*lead, min(height, ny * tl), min(width, nx * tw))


def resolve_chunks(chunks: Any, shape: tuple[int, ...], dtype: Any, frame: tuple[int, ...],
                   path: str = "") -> tuple[tuple[int, ...], ...]:
    """Dask's normalized chunks of ``chunks`` (``None``/``"auto"``: :func:`auto_chunks`).

    Raises RumiError for a spec that does not fit the array; warns when chunks split frames.
    """
    import dask.array as da

    if chunks is None or (isinstance(chunks, str) and chunks == "auto"):
        chunks = auto_chunks(shape, dtype, frame)
    try:
        out = da.core.normalize_chunks(chunks, shape, dtype=np.dtype(dtype), previous_chunks=frame)
    except (ValueError, TypeError, IndexError, KeyError, ZeroDivisionError) as exc:
        raise RumiError(f"{where(path)}chunks {chunks!r} do not fit the array of shape {tuple(shape)}: {exc}; "
                        f"pass 'auto', one size per axis ({len(shape)} axes) or sizes per axis that add up to "
                        "the shape") from exc
    if len(out) != len(shape) or any(sum(c) != n for c, n in zip(out, shape, strict=False)):
        raise RumiError(f"{where(path)}chunks {chunks!r} do not fit the array of shape {tuple(shape)}")
    split = [axis for axis, (c, f, n) in enumerate(zip(out, frame, shape, strict=True))
             if any(edge % f for edge in np.cumsum(c)[:-1])]
    if split:
        warnings.warn(f"{where(path)}chunks {tuple(c[0] for c in out)} split frames of shape {tuple(frame)} along "
                      f"axis {', '.join(map(str, split))}: each task decodes whole frames and keeps part; use "
                      "multiples of the frame shape (or chunks='auto')", RumiWarning, stacklevel=3)
    return tuple(tuple(int(v) for v in c) for c in out)


def _read_block(source: tuple = (), edges: tuple = (), block_id: tuple = ()) -> np.ndarray:
    """The task of chunk ``block_id``: its window, from the chunk ``edges`` of each axis, of the process's image."""
    window = tuple(slice(int(e[i]), int(e[i + 1])) for e, i in zip(edges, block_id, strict=True))
    with held(source) as img:  # open until read, whatever other threads open meanwhile
        return img[window]


def read_chunk(source: tuple, *bounds: tuple[int, int]) -> np.ndarray:
    """``[b0:b1, y0:y1, x0:x1]`` (one (start, stop) per axis) of ``source = (path, blob[, storage_options])``."""
    with held(source) as img:
        return img[tuple(slice(a, b) for a, b in bounds)]


def _window_chunks(chunks: tuple[int, ...], start: int, stop: int) -> tuple[int, ...]:
    """The chunks of ``[start, stop)`` of an axis chunked ``chunks``: cut where the axis is cut."""
    cuts = [int(e) for e in np.cumsum(chunks)[:-1] if start < e < stop]
    bounds = [start, *cuts, stop]
    return tuple(b - a for a, b in itertools.pairwise(bounds))


def _dask_array_type() -> type:
    """:class:`RumiArray`, defined on first use so that importing this module needs no Dask."""
    global _RUMI_ARRAY
    if _RUMI_ARRAY is not None:
        return _RUMI_ARRAY
    import dask.array as da

    class RumiArray(da.Array):
        """A Dask array read from a rumi file whose basic slices become reads of the window.

        ``arr[:, 100:612, 0:512]`` is a new read graph over that window (chunks cut where
        ``arr``'s are), not a read of every chunk it touches followed by a slice, so only the
        frames it covers decode.  Anything else (steps, index arrays, arithmetic) is Dask's.
        """

        rumi_source: tuple = ()
        rumi_origin: tuple[int, ...] = ()

        def __getitem__(self, index: Any) -> Any:
            pushed = self._read_window(index)
            return super().__getitem__(index) if pushed is None else pushed

        def _read_window(self, index: Any) -> Any:
            from dask.array.slicing import normalize_index

            if not self.rumi_source:
                return None
            try:
                idx = normalize_index(index if isinstance(index, tuple) else (index,), self.shape)
            except Exception:  # Dask raises its own error on the plain path
                return None
            if len(idx) != self.ndim or not all(
                    isinstance(k, (int, np.integer)) or (isinstance(k, slice) and k.step in (None, 1)) for k in idx):
                return None
            spans: list[tuple[int, int]] = []
            drop: list[slice | int] = []
            for k, n in zip(idx, self.shape, strict=True):
                if isinstance(k, slice):
                    a, b, _ = k.indices(n)
                    spans.append((a, max(a, b)))
                    drop.append(slice(None))
                else:
                    a = int(k) + n if k < 0 else int(k)
                    spans.append((a, a + 1))
                    drop.append(0)
            if any(b <= a for a, b in spans):
                return None
            chunks = tuple(_window_chunks(c, a, b) for c, (a, b) in zip(self.chunks, spans, strict=True))
            origin = tuple(o + a for o, (a, _) in zip(self.rumi_origin, spans, strict=True))
            out = _build(self.rumi_source, origin, chunks, self.dtype)
            if any(d == 0 for d in drop):
                return da.Array.__getitem__(out, tuple(drop))
            return out

    _RUMI_ARRAY = RumiArray
    return RumiArray


_RUMI_ARRAY: type | None = None


def _build(source: tuple, origin: tuple[int, ...], chunks: tuple[tuple[int, ...], ...], dtype: Any,
           name: str | None = None) -> Any:
    """The read graph of the window at ``origin`` with ``chunks``: one blockwise layer, source and edges once."""
    import dask.array as da
    from dask.base import tokenize

    dtype = np.dtype(dtype)
    name = name or f"rumimm-{tokenize(source[0], source[1], origin, chunks)}"
    edges = tuple(tuple(int(v) + o for v in np.cumsum((0, *c))) for c, o in zip(chunks, origin, strict=True))
    # a blockwise layer with no inputs: Dask fuses each read with the first step of what
    # consumes it, one task per chunk instead of two.  The source and the edges are
    # layer-wide keywords, pickled once with the graph, not per task.
    arr = da.map_blocks(_read_block, dtype=dtype, chunks=chunks, name=name,
                        meta=np.empty((0,) * len(chunks), dtype), source=source, edges=edges)
    out = _dask_array_type()(arr.dask, arr.name, arr.chunks, meta=np.empty((0,) * len(chunks), dtype))
    out.rumi_source, out.rumi_origin = source, tuple(origin)
    return out


def to_dask(source: Any, header: Any = None, chunks: Any = "auto", *, name: str | None = None,
            storage_options: dict | None = None) -> Any:
    """A Dask array of a rumi file, one task per chunk.

    Parameters
    ----------
    source : str, os.PathLike or Image
        The ``.rumi`` file or a remote URI, or an open :class:`rumimm.Image` (only its
        path or URI, blob and storage options go into the graph).
    header : bytes, Header or path, optional
        The header blob, or a path to a blob file; with it the IFD is never parsed,
        neither here nor on the workers.  Without it the file is indexed once here.
    chunks : optional
        ``"auto"`` (default; ``None`` too): whole frames, all bands together where they fit,
        sized by Dask's ``array.chunk-size`` setting capped at 32 MiB, or by
        ``dask.config.set({"rumimm.chunk-size": "128MiB"})``; see :func:`auto_chunks`.  Anything
        else ``dask.array`` accepts
        (``(1, 1024, 1024)``, a dict, sizes per axis) is honoured; chunks that split frames warn.
    name : str, optional
        The graph's key prefix (default: derived from the path, blob and chunks, so two
        calls on the same file share keys).
    storage_options : dict, optional
        For a remote URI (see :func:`rumimm.open`); they travel with the graph, so
        pass credentials through the workers' environment instead where that matters.

    Returns
    -------
    dask.array.Array
        Shape ``(B, Y, X)`` (``(T, B, Y, X)`` for a spec 0.2 file of several steps), the
        file's dtype.  Basic slices of it read only their window.

    Raises
    ------
    RumiError
        ``chunks`` does not fit the array (wrong number of axes, sizes that do not add up).

    Examples
    --------
    >>> arr = rumimm.to_dask("scene.rumi", header=blob)          # doctest: +SKIP
    >>> arr.mean(axis=(1, 2)).compute()                          # per-band means
    """
    from rumimm.reader.image import Image
    from rumimm.reader.image import open as open_image

    if isinstance(source, Image):
        img, owned = source, False
    elif isinstance(source, (str, os.PathLike)):
        img, owned = open_image(source, header, storage_options=storage_options), True  # header= as rumimm.open
    else:
        raise TypeError(f"source must be a path or a rumimm.Image, got {type(source).__name__}")
    try:
        path = img.uri if img.remote else os.path.abspath(img.path)
        blob = bytes(img.header.blob)
        options = img.storage_options
        shape, dtype = tuple(img.shape), img.dtype
        frame = frame_chunks(img)
        label = img.path
    finally:
        if owned:
            img.close()
    resolved = resolve_chunks(chunks, shape, dtype, frame, path=label)
    graph_source = (path, blob) if options is None else (path, blob, options)
    return _build(graph_source, (0,) * len(shape), resolved, dtype, name)
