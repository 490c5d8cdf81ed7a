"""What the read engine knows of one open file, and what both of its read paths share.

:class:`FrameSource` is handed to the engine by every reader (``Image``, ``Cube``,
``ImageCollection``, ``read_batch``): the open file (``mapped.OpenFile``), its header,
its cache and the per-frame "header checked" flags.  Both read paths (the numba kernels
in ``engine`` and chips in ``small_reads``) decode into this thread's scratch buffer
(:func:`thread_scratch`), look frames up in the cache the same way (:func:`lookup`) and go
parallel past the same size (:data:`PARALLEL_MIN_BYTES`).
"""

from __future__ import annotations

import threading

import numpy as np

from rumimm.errors import RumiError, where
from rumimm.format.grid import FrameUnit
from rumimm.reader.store import RemoteStore, read_many

__all__ = ["FrameSource", "thread_scratch", "lookup", "fetch_frames", "align", "PARALLEL_MIN_BYTES", "SCRATCH_KEEP_BYTES"]

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
    """What the engine needs of one open file: the file, its frame table and caching.

    ``Image`` makes one at open (``file`` is a ``mapped.OpenFile``, None once closed);
    the per-frame "header checked" flags and, for the kernels, the frames' addresses in
    the mapping are built on first use.
    """

    __slots__ = ("path", "header", "file", "cache", "token", "verify", "magic0", "grid", "enc", "dtype", "isz",
                 "mask", "n_frames", "cell", "_grid_rows", "src", "typed", "remote")

    def __init__(self, path: str, header, file, cache, token: int, verify: bool, magic0: int):
        self.path = path
        self.header = header  # rumimm.format.blob.Header
        self.file = file  # mapped.OpenFile, or a store.RemoteStore
        self.remote = isinstance(file, RemoteStore)  # frames are fetched (fetch_frames), never mapped
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
        self._grid_rows = None
        self.src = None  # uint64 frame addresses in the mapping
        self.typed = None  # uint8 per frame: its OpenZL header was checked

    @property
    def grid_rows(self) -> np.ndarray:
        """The grid as one int64 (1, GRID_COLS) row, for the planning kernels."""
        if self._grid_rows is None:
            g = self.grid
            self._grid_rows = np.array([[g.tile_length, g.tile_width, g.tiles_across, g.tiles_down,
                                         g.samples_per_pixel, int(g.unit == FrameUnit.CELL),
                                         g.image_length, g.image_width]], np.int64)
        return self._grid_rows

    def opened(self):
        """The open file (``mapped.OpenFile``); RumiError once closed."""
        f = self.file
        if f is None:
            raise RumiError(f"{where(self.path)}image is closed")
        return f

    def mapping(self) -> np.ndarray:
        """The file mapping (made on first use); RumiError once closed."""
        return self.opened().mapping()

    def checked(self) -> np.ndarray:
        """The per-frame "header checked" flags, allocated on first use."""
        if self.typed is None:
            self.typed = np.zeros(self.n_frames, np.uint8)
        return self.typed

    def frame_table(self):
        """(src, size, typed) for the kernels: frame addresses in the mapping, byte counts, flags."""
        if self.src is None:
            buf = self.mapping()
            self.src = self.header.offsets[:-1] + np.uint64(buf.ctypes.data)
        return self.src, self.header._frame_bytes, self.checked()

    def position(self, k: int) -> str:
        row, col, band = self.grid.frame_position(k)
        if self.grid.unit == FrameUnit.CELL:
            return f"row {row}, col {col}"
        return f"row {row}, col {col}, band {band}"

    def label(self, k: int) -> str:
        return f"{where(self.path)}frame {k} of {self.n_frames} ({self.position(k)})"

    def frame_bytes(self, k: int) -> np.ndarray:
        start = int(self.header.offsets[k])
        if self.remote:  # one request; the read paths fetch their frames together instead
            return self.opened().read(start, int(self.header.byte_count(k)))
        return self.mapping()[start:start + int(self.header.byte_count(k))]


def fetch_frames(sources, owners, klist, idx) -> dict:
    """``{i: compressed bytes of frame klist[i]}`` for each i in ``idx`` whose source is remote.

    The frames of every remote source are fetched together (``store.read_many``): one
    ranged request per run of nearby frames, all in flight at once.  Local sources are
    left out (their frames are read from the mapping or with pread).
    """
    per: dict = {}
    for i in idx:
        o = owners[i]
        if sources[o].remote:
            per.setdefault(o, []).append(i)
    if not per:
        return {}
    requests, order = [], []
    for o, items in per.items():
        fs = sources[o]
        off = fs.header.offsets
        ranges = [(int(off[klist[i]]), int(off[klist[i] + 1]) - int(off[klist[i]])) for i in items]
        requests.append((fs.opened(), ranges))
        order.append(items)
    got = read_many(requests)
    return {i: raw for items, raws in zip(order, got) for i, raw in zip(items, raws)}


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



def lookup(sources, owners, klist):
    """Cached frames of each group, or None when no source caches."""
    first = sources[0].cache
    if len(sources) == 1:
        if first is None:
            return None
        token = sources[0].token
        return first.get_many([(token, k) for k in klist])
    if all(s.cache is first for s in sources):
        if first is None:
            return None
        return first.get_many([(sources[o].token, k) for o, k in zip(owners, klist)])
    return [None if sources[o].cache is None else sources[o].cache.get((sources[o].token, k))
            for o, k in zip(owners, klist)]
