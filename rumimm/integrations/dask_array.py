"""Dask arrays over rumi files, read by path and blob on any worker.

:func:`to_dask` builds the graph rather than wrapping an open image in
``da.from_array``: one task per chunk, each reading its window from a ``(path, blob)``
pair the whole layer shares, so the graph carries the path, one blob per file and
integers, never an open image or decoded data.  A task opens the file from its blob (no IFD walk), reads its window
with the GIL released while frames decode, and closes the file before returning,
so no handle or mapping outlives the task.  Chunks default to the frame grid.

Writing goes through :func:`rumimm.write`, which computes one row of tiles at a
time; :func:`rumimm.to_rumi` adds xarray metadata.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

if TYPE_CHECKING:
    import dask.array
    from numpy.typing import NDArray

    from rumimm._typing import StrPath
    from rumimm.format.blob import Header
    from rumimm.reader.image import Image

    #: A header as ``rumimm.open`` takes it: the blob, a parsed Header, a path to a blob file, or None.
    HeaderArg: TypeAlias = bytes | Header | StrPath | None

__all__ = ["frame_chunks", "to_dask"]

#: What a task opens: (path or URI, header blob[, storage options]).
_Source: TypeAlias = tuple[str, bytes] | tuple[str, bytes, Mapping[str, Any]]
#: ``chunks=`` as ``dask.array`` takes it ("auto", a size, sizes per axis, a dict of axis -> size, ...).
Chunks: TypeAlias = str | int | Sequence[int | str | Sequence[int]] | Mapping[int, Any]


def frame_chunks(img: Image) -> tuple[int, ...]:
    """The frame grid as Dask chunk sizes: (1 or B, tile_length, tile_width); for a spec 0.2
    file of several steps (1 or T, 1 or B, tile_length, tile_width)."""
    from rumimm.format.grid import FrameUnit

    cell = img.header.frame_unit == FrameUnit.CELL
    tl, tw = img.tile
    return (*tuple(n if cell else 1 for n in img.shape[:-2]), tl, tw)


def read_chunk(source: _Source, *bounds: tuple[int, int]) -> NDArray[Any]:
    """One task: open ``source = (path, blob[, storage_options])``, read ``[b0:b1, y0:y1, x0:x1]`` (one
    (start, stop) per axis), close."""
    from rumimm.reader.image import open as open_image

    path, blob, *options = source
    with open_image(path, blob, cache_bytes=0, storage_options=options[0] if options else None) as img:
        return img[tuple(slice(a, b) for a, b in bounds)]


def _read_block(*, source: _Source, edges: tuple[tuple[int, ...], ...], block_id: tuple[int, ...]) -> NDArray[Any]:
    """The task of chunk ``block_id``: its window from the chunk ``edges`` of each axis."""
    return read_chunk(source, *((int(e[i]), int(e[i + 1])) for e, i in zip(edges, block_id, strict=True)))


def to_dask(source: StrPath | Image, header: HeaderArg = None, chunks: Chunks | None = None, *,
            name: str | None = None, storage_options: Mapping[str, Any] | None = None) -> dask.array.Array:
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
        Anything ``dask.array`` accepts (``"auto"``, ``(1, 1024, 1024)``, a dict,
        ...).  Default: the frame grid, ``(1, tile_length, tile_width)`` for tile
        frames, ``(B, tile_length, tile_width)`` for cell frames.
    name : str, optional
        The graph's key prefix (default: derived from the path and blob, so two
        calls on the same file share keys).
    storage_options : dict, optional
        For a remote URI (see :func:`rumimm.open`); they travel with the graph, so
        pass credentials through the workers' environment instead where that matters.

    Returns
    -------
    dask.array.Array
        Shape ``(B, Y, X)`` (``(T, B, Y, X)`` for a spec 0.2 file of several steps), the file's dtype.

    Examples
    --------
    >>> arr = rumimm.to_dask("scene.rumi", header=blob)          # doctest: +SKIP
    >>> arr.mean(axis=(1, 2)).compute()                          # per-band means
    """
    import dask.array as da
    from dask.base import tokenize

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
        shape, dtype = img.shape, img.dtype
        default = frame_chunks(img)
    finally:
        if owned:
            img.close()
    grid: tuple[tuple[int, ...], ...] = da.core.normalize_chunks(default if chunks is None else chunks, shape,
                                                                 dtype=dtype, previous_chunks=default)
    # a blockwise layer with no inputs: Dask fuses each read with the first step of what
    # consumes it (a sum's per-chunk sum), one task per chunk instead of two.  The source
    # and the edges are layer-wide keywords, pickled once with the graph, not per task.
    name = name or f"rumimm-{tokenize(path, blob, grid)}"
    edges = tuple(tuple(int(v) for v in np.cumsum((0, *c))) for c in grid)
    return da.map_blocks(_read_block, dtype=dtype, chunks=grid, name=name, meta=np.empty((0,) * len(shape), dtype),
                         source=(path, blob) if options is None else (path, blob, options), edges=edges)
