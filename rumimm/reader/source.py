"""What the read path knows of one open file: its store, header, cache and per-frame checks.

:class:`FrameSource` is handed to the planner by every reader (``Image``, ``Cube``,
``ImageCollection``, ``read_batch``): the store its frame bytes come from
(``store.Store``), its header, its cache and the per-frame "header checked" flags;
:func:`frame_bytes` gets the compressed bytes of a read's new frames, whatever their stores.
Both executors decode into buffers the planner hands out (:func:`thread_scratch` for
frames the cache does not keep) and go parallel past the same size
(:data:`PARALLEL_MIN_BYTES`).
"""

from __future__ import annotations

import threading

import numpy as np

from rumimm.errors import RumiError, where
from rumimm.format.grid import FrameUnit
from rumimm.store import buffer_addresses, get_ranges_many

__all__ = [
    "PARALLEL_MIN_BYTES",
    "SCRATCH_KEEP_BYTES",
    "FrameSource",
    "GotFrames",
    "align",
    "frame_buffers",
    "frame_bytes",
    "thread_scratch",
]

#: A read decodes on several threads only when its new frames hold at least this many bytes.
PARALLEL_MIN_BYTES = 1 << 20
#: A thread keeps its decode scratch buffer between reads up to this size.
SCRATCH_KEEP_BYTES = 4 << 20
_ALIGN = 64
_local = threading.local()


def align(n: int) -> int:
    """``n`` rounded up to a multiple of ``_ALIGN`` (scratch slots start on cache lines)."""
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class FrameSource:
    """What the planner needs of one open file: its store, frame table and caching.

    ``Image`` makes one at open (``store`` is a ``store.Store``, None once closed); the
    per-frame "header checked" flags are allocated on first use.
    """

    __slots__ = (
        "_checked",
        "cache",
        "cell",
        "dtype",
        "enc",
        "grid",
        "header",
        "isz",
        "magic0",
        "mask",
        "n_frames",
        "path",
        "store",
        "token",
        "verify",
    )

    def __init__(self, path: str, header, store, cache, token: int, verify: bool, magic0: int | None):
        self.path = path
        self.header = header  # rumimm.format.blob.Header
        self.store = store
        self.cache = cache  # rumimm.reader.cache.FrameCache or None
        self.token = token  # this source's key in the cache
        self.verify = verify
        self.magic0 = magic0  # frame 0's first 4 bytes: every frame must start with them (remote: the first read's)
        self.grid = g = header.grid
        self.enc = enc = header.encoding
        self.dtype = enc.dtype
        self.isz = enc.itemsize
        self.mask = (1 << enc.bits_per_sample) - 1 if enc.subbyte else 0xFF
        self.n_frames = g.n_frames
        self.cell = g.unit == FrameUnit.CELL
        self._checked = None  # uint8 per frame: its OpenZL header was checked

    @property
    def grid_rows(self) -> np.ndarray:
        """The grid as one int64 (1, GRID_COLS) row, for the planning kernels."""
        return self.header.grid_rows  # made once per header record, shared by every source of it

    def live_store(self):
        """The store (``store.Store``); RumiError once the image is closed.

        A read holds what this returns until it ends, so closing the image never pulls
        a descriptor or a mapping from under it.
        """
        st = self.store
        if st is None:
            raise RumiError(f"{where(self.path)}image is closed")
        return st

    @property
    def header_checked(self) -> np.ndarray:
        """uint8 per frame: 1 once its OpenZL header was checked on this image (allocated on first use)."""
        if self._checked is None:
            self._checked = np.zeros(self.n_frames, np.uint8)
        return self._checked

    def position(self, k: int) -> str:
        row, col, band = self.grid.frame_position(k)
        if self.grid.unit == FrameUnit.CELL:
            return f"row {row}, col {col}"
        return f"row {row}, col {col}, band {band}"

    def label(self, k: int) -> str:
        return f"{where(self.path)}frame {k} of {self.n_frames} ({self.position(k)})"

    def frame_range(self, k: int) -> tuple[int, int]:
        """(offset, byte count) of frame k in its file."""
        off = self.header.frame_offsets
        start = int(off[k])
        return start, int(off[k + 1]) - start

    def read_frame(self, k: int) -> np.ndarray:
        """Frame k's bytes from the store (read-only: a view into a mapping or a fetched buffer)."""
        return self.live_store().get_ranges([self.frame_range(k)])[0]


def frame_bytes(sources, owners, frames, groups) -> dict:
    """``{g: compressed bytes of frame frames[g] of sources[owners[g]]}`` for each g in ``groups``.

    One ``Store.get_ranges`` call per store, all stores' requests in flight together
    (``store.get_ranges_many``): views into a local file's mapping, the answers of a
    remote object's merged requests.
    """
    got = frame_buffers(sources, owners, frames, groups)[0]
    return {g: got[g] for g in groups}


class GotFrames:
    """The compressed bytes of a read's new frames, by group: ``g in got``, ``got[g]``.

    Holds every store's answer (a local file's :class:`~rumimm.store.RangeViews` keeps its
    mapping alive) and makes a frame's view only when one is asked for: the kernels take
    addresses, and only a frame whose header is still unchecked is looked at here.
    """

    __slots__ = ("_answers", "_groups", "_index", "_n", "_request")

    def __init__(self, n: int, answers: list, groups: list[np.ndarray]):
        self._answers = answers
        self._groups = groups
        self._n = n
        self._request: np.ndarray | None = None  # which answer holds group g (made on first use)
        self._index: np.ndarray | None = None  # its position in that answer

    def _where(self, g) -> tuple[int, int]:
        if self._request is None:
            self._request = np.full(self._n, -1, np.intp)
            self._index = np.zeros(self._n, np.intp)
            for r, gs in enumerate(self._groups):
                self._request[gs] = r
                self._index[gs] = np.arange(gs.shape[0])
        if not 0 <= g < self._n:
            return -1, 0
        return int(self._request[g]), int(self._index[g])  # type: ignore[index]

    def __contains__(self, g) -> bool:
        return self._where(g)[0] >= 0

    def __getitem__(self, g) -> np.ndarray:
        r, i = self._where(g)
        if r < 0:
            raise KeyError(g)
        return self._answers[r][i]


def frame_buffers(sources, owners, frames, groups, frame_array: np.ndarray | None = None):
    """:func:`frame_bytes` for the kernels: ``(got, order, addresses, sizes)``: the bytes (:class:`GotFrames`),
    the groups in the order got (intp) and their bytes' addresses and sizes (uint64).

    ``frame_array``: ``frames`` as int64, when the caller has it.  A read from one file
    costs no Python per frame: its ranges are one expression over the frame table, and a
    local file's answer gives the addresses without a view per frame.
    """
    n = len(frames)
    groups = np.asarray(groups, np.intp)
    if not groups.shape[0]:
        return GotFrames(n, [], []), groups, np.zeros(0, np.uint64), np.zeros(0, np.uint64)
    if len(sources) == 1:
        per = [(sources[0], groups)]
    else:
        own = np.asarray(owners, np.intp)[groups]
        per = [(sources[o], groups[own == o]) for o in np.unique(own).tolist()]
    ks_all = np.asarray(frames, np.int64) if frame_array is None else frame_array
    requests, sizes = [], []
    for fs, gs in per:
        off = fs.header.frame_offsets
        ks = ks_all[gs]
        spans = np.empty((ks.shape[0], 2), np.int64)
        spans[:, 0] = off[ks]
        spans[:, 1] = off[ks + 1]
        spans[:, 1] -= spans[:, 0]
        sizes.append(spans[:, 1])
        requests.append((fs.live_store(), spans))
    got = get_ranges_many(requests)
    order = groups if len(per) == 1 else np.concatenate([gs for _, gs in per])
    addresses = np.concatenate([buffer_addresses(bufs) for bufs in got]).astype(np.uint64, copy=False)
    return (GotFrames(n, got, [gs for _, gs in per]), order, addresses,
            np.concatenate(sizes).astype(np.uint64, copy=False))


def thread_scratch(nbytes: int) -> tuple[np.ndarray, int]:
    """This thread's decode scratch buffer and its address (reused up to SCRATCH_KEEP_BYTES)."""
    held = getattr(_local, "scratch", None)
    if held is not None and held[0].shape[0] >= nbytes:
        return held
    buf = np.empty(nbytes, np.uint8)
    held = (buf, buf.ctypes.data)
    if nbytes <= SCRATCH_KEEP_BYTES:
        _local.scratch = held
    return held
