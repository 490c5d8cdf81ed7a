"""Many header blobs at once: a catalog column checked and parsed in one numba pass.

``parse_blobs`` takes a list of blobs, one flat buffer with Arrow-style offsets, or a
pyarrow binary column straight from Parquet (zero-copy for one chunk), and applies the
rules of :class:`rumimm.format.blob.Header` with the same status codes in
``kernels.check_blobs``; more than ``2 * _PARALLEL_ROWS`` blobs are split over the
decode threads (the kernel is nogil).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, cast

import numpy as np

from rumimm.errors import BlobError
from rumimm.format.blob import BLOB_FIELDS, TOO_SHORT, VALID_PAIRS, check_one, rule_broken

__all__ = ["parse_blobs", "parse_blobs_any"]

if TYPE_CHECKING:
    from numpy.typing import ArrayLike, NDArray

    #: Blobs one by one (a pyarrow binary column, untyped, is iterable and passes as one of these).
    BlobList: TypeAlias = Iterable[bytes | bytearray | memoryview]
    #: What ``parse_blobs`` takes: blobs one by one, or one flat uint8 buffer with offsets.
    Blobs: TypeAlias = BlobList | NDArray[np.uint8]
    Columns: TypeAlias = dict[str, NDArray[np.int64]]


def _as_uint8(blob: NDArray[Any] | bytes | bytearray | memoryview) -> NDArray[np.uint8]:
    if isinstance(blob, np.ndarray):
        return np.ascontiguousarray(blob).view(np.uint8).reshape(-1)
    return np.frombuffer(blob, dtype=np.uint8)


def parse_blobs(blobs: Blobs, offsets: ArrayLike | None = None, *,
                errors: Literal["raise", "status"] = "raise") -> Columns:
    """Check and parse many blobs at once, e.g. a catalog column.

    Parameters
    ----------
    blobs : sequence of bytes, a 1-D uint8 array of concatenated blobs, or a pyarrow column
        With a flat array, ``offsets`` (length M + 1, Arrow-style) marks each blob.
        A pyarrow ``BinaryArray``, ``LargeBinaryArray`` or ``ChunkedArray`` of them
        (a Parquet column) is read from its buffers without a copy per blob.
    offsets : array of int, optional
        Start of blob i at ``offsets[i]``, end at ``offsets[i + 1]``.
    errors : {"raise", "status"}
        ``"raise"``: BlobError for the first bad blob.  ``"status"``: return
        a ``status`` column (0 = valid) instead.

    Returns
    -------
    dict of str to ndarray
        One int64 column of length M per name in ``BLOB_FIELDS``, plus
        ``status`` (int64, with ``errors="status"``).
    """
    if offsets is None and type(blobs).__module__.startswith("pyarrow"):
        blobs, offsets = _arrow_buffers(blobs)
    if offsets is None:
        if isinstance(blobs, np.ndarray):
            raise TypeError("a flat uint8 array needs offsets")
        blobs = list(blobs)
        lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
        data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        starts = np.zeros(len(blobs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
    else:
        data = _as_uint8(cast("NDArray[Any] | bytes", blobs))  # with offsets: one flat buffer
        starts = np.ascontiguousarray(offsets, dtype=np.int64)
        if (starts.ndim != 1 or starts.size < 1 or starts[0] < 0 or starts[-1] > data.size
                or np.any(np.diff(starts) < 0)):
            raise ValueError("offsets must be non-decreasing, start >= 0 and end inside the data")
    m = starts.size - 1
    fields = np.zeros((m, len(BLOB_FIELDS)), dtype=np.int64)
    status = np.zeros(m, dtype=np.int64)
    if data.size == 0:
        data = np.zeros(1, dtype=np.uint8)  # numba needs a non-empty buffer to slice
    _check_in_parallel(data, starts, fields, status)
    out = {name: fields[:, j] for j, name in enumerate(BLOB_FIELDS)}
    if errors == "status":
        out["status"] = status
        return out
    bad = np.flatnonzero(status)
    if bad.size:
        i = int(bad[0])
        f = {name: int(fields[i, j]) for j, name in enumerate(BLOB_FIELDS)}
        raise BlobError(f"blob {i} of {m}: {rule_broken(int(status[i]), f)}")
    return out


def _arrow_buffers(column: Any) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """(data, offsets) of a pyarrow binary column, zero-copy for a single chunk.

    Chunks are joined into one buffer (one copy of the bytes) so the whole column is
    checked in one pass; a null blob is refused, since no file can be opened with it.
    """
    chunks = list(column.chunks) if hasattr(column, "chunks") else [column]
    datas, starts, base = [], [np.zeros(1, np.int64)], 0
    for chunk in chunks:
        kind = str(chunk.type)
        if kind not in ("binary", "large_binary"):
            raise TypeError(f"a pyarrow blob column must be binary or large_binary, got {kind}")
        if chunk.null_count:
            first = next(i for i, v in enumerate(chunk.is_valid().to_pylist()) if not v)
            raise BlobError(f"blob {base + first} is null; every row of a blob column needs a blob")
        _, off_buf, data_buf = chunk.buffers()
        n = len(chunk)
        off = np.frombuffer(off_buf, np.int32 if kind == "binary" else np.int64)[chunk.offset:chunk.offset + n + 1] \
            if off_buf is not None else np.zeros(n + 1, np.int64)
        data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        if n:
            data = data[int(off[0]):int(off[-1])]
            starts.append(off[1:].astype(np.int64) - int(off[0]) + base)
            datas.append(data)
            base += data.size
    data = datas[0] if len(datas) == 1 else (np.concatenate(datas) if datas else np.zeros(0, np.uint8))
    return data, np.concatenate(starts)


_PARALLEL_ROWS = 1 << 16  # below this a second thread costs more than it saves


def _check_in_parallel(data: NDArray[np.uint8], starts: NDArray[np.int64], fields: NDArray[np.int64],
                       status: NDArray[np.int64]) -> None:
    """``check_blobs`` over row ranges on the reader's decode threads (the kernel is nogil)."""
    from rumimm.reader import jit
    from rumimm.reader.engine import load
    from rumimm.reader.threads import parallel_slot, release_parallel, run_workers

    if jit.state() == "off":  # forked while the parent loaded the kernels: this process never will
        _check_each(data, starts, fields, status)
        return
    K = load()
    m = starts.size - 1
    workers = parallel_slot(m // _PARALLEL_ROWS) if m >= 2 * _PARALLEL_ROWS else 1
    if workers < 2:
        K.check_blobs(data, starts, VALID_PAIRS, fields, status)
        return
    try:
        bounds = np.linspace(0, m, workers + 1).astype(np.int64)

        def part(w: int) -> None:
            a, b = bounds[w], bounds[w + 1]
            K.check_blobs(data, starts[a:b + 1], VALID_PAIRS, fields[a:b], status[a:b])

        run_workers(part, workers)
    finally:
        release_parallel()


def _check_each(data: NDArray[np.uint8], starts: NDArray[np.int64], fields: NDArray[np.int64],
                status: NDArray[np.int64]) -> None:
    """``check_blobs`` blob by blob with numpy (``blob.check_one``: the same rules, order and codes)."""
    for i in range(starts.size - 1):
        code, f = check_one(data[starts[i]:starts[i + 1]].tobytes())
        status[i] = code
        if code == TOO_SHORT:  # the kernel reads no field of a blob shorter than its header
            f = {"blob_size": f["blob_size"]}
        fields[i] = [f.get(name, 0) for name in BLOB_FIELDS]


def parse_blobs_any(blobs: BlobList, specs: Sequence[str | None] | None = None) -> Columns:
    """:func:`parse_blobs` for a column that may hold spec 0.2 blobs (rumi-eo 0.18+ headers).

    Spec 0.1 blobs are checked in the one numba pass; a blob that is not a valid 0.1 blob,
    or whose row says ``specs[i] == "0.2"``, is parsed as a spec 0.2 blob
    (``format.v2.Header2``), one at a time.  Returns the ``BLOB_FIELDS`` columns plus
    ``time_count`` (1 for spec 0.1) and ``spec`` (1 or 2); ``frame_unit`` of a spec 0.2 row is its
    frame unit (0 to 9).  BlobError names the first
    blob that is valid in neither spec.
    """
    from rumimm.format.v2 import Header2

    if type(blobs).__module__.startswith("pyarrow"):
        blobs = cast(Any, blobs).to_pylist()
    blobs = list(blobs)
    m = len(blobs)
    out = parse_blobs(blobs, errors="status")
    status = out.pop("status")
    out["time_count"] = np.ones(m, np.int64)
    out["spec"] = np.ones(m, np.int64)
    specs = [None] * m if specs is None else list(specs)
    for i in range(m):
        if not status[i] and specs[i] != "0.2":
            continue
        rule1 = None if not status[i] else rule_broken(int(status[i]), {k: int(out[k][i]) for k in BLOB_FIELDS})
        if specs[i] == "0.1":
            raise BlobError(f"blob {i} of {m}: {rule1}")
        try:
            hdr = Header2.parse(blobs[i])
        except BlobError as exc:
            rule2 = str(exc).removeprefix("header blob (spec 0.2): ")
            if specs[i] == "0.2":
                raise BlobError(f"blob {i} of {m}: {rule2} (spec 0.2)") from None
            raise BlobError(f"blob {i} of {m}: {rule1} (nor a spec 0.2 blob: {rule2})") from None
        for name in BLOB_FIELDS:
            out[name][i] = len(hdr.blob) if name == "blob_size" else int(getattr(hdr, name))
        out["frame_unit"][i] = hdr.layout
        out["time_count"][i] = hdr.time_count
        out["spec"][i] = 2
    return out
