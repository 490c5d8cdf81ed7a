"""The ``Store`` interface: one object holding a rumi file, read by byte ranges, written atomically.

Every reader gets frame bytes through :meth:`Store.get_ranges` (or, for a batch spanning
several stores, :func:`get_ranges_many`): a local file answers with views into its
mapping (or with ``pread`` into a buffer the caller hands it), a remote object with
the buffers of merged, concurrent requests.  To the executors both are just uint8
buffers.  Writers get a :class:`StoreWriter` from ``store.open_writer``: nothing is
visible at the destination until ``commit``; ``abort`` leaves nothing behind.
Writers come from ``store.open_writer(path)`` (a destination need not exist to be written).
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from rumimm.errors import RumiError

if TYPE_CHECKING:
    from types import TracebackType

    from typing_extensions import Buffer

__all__ = ["Buffers", "Pending", "RangeViews", "Store", "StoreWriter", "buffer_addresses", "get_ranges_many"]

#: ``(offset, nbytes)`` pairs, or the same as an int64 (n, 2) array (a read's frames, made by one expression).
Ranges = Sequence[tuple[int, int]] | np.ndarray


class Buffers(list):
    """What ``get_ranges`` may return: the ranges' bytes in order, and ``addresses`` (uint64, where each
    starts in memory) when the store knows them at no cost (a local mapping: its base plus the offsets).

    The kernels take frames by address; asking each array for its own costs ~1-3 us.
    """

    addresses: np.ndarray | None = None


class RangeViews(Sequence):
    """What ``get_ranges`` returns for ranges of one buffer already in memory (a local file's mapping): each
    range's view is made only when asked for, and ``addresses`` (uint64) is one vectorised expression, the
    buffer's address plus the offsets.

    The kernels decode straight from ``addresses`` and never ask for a view, so a read of many
    frames makes no Python object per frame; holding this keeps ``base`` (and its mapping) alive.
    """

    __slots__ = ("addresses", "base", "counts", "starts")

    def __init__(self, base: np.ndarray, starts: np.ndarray, counts: np.ndarray):
        self.base = base
        self.starts = starts  # int64
        self.counts = counts  # int64
        self.addresses = starts.astype(np.uint64) + np.uint64(base.__array_interface__["data"][0])

    def __len__(self) -> int:
        return self.starts.shape[0]

    @overload
    def __getitem__(self, i: int) -> np.ndarray: ...
    @overload
    def __getitem__(self, i: slice) -> list[np.ndarray]: ...
    def __getitem__(self, i: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        o = int(self.starts[i])
        return self.base[o:o + int(self.counts[i])]

    def __iter__(self) -> Iterator[np.ndarray]:
        base = self.base
        for o, n in zip(self.starts.tolist(), self.counts.tolist(), strict=True):
            yield base[o:o + n]


def buffer_addresses(bufs: Sequence[np.ndarray]) -> np.ndarray:
    """Where each array of ``bufs`` starts in memory (uint64): ``bufs.addresses`` when given, else asked of each."""
    known = getattr(bufs, "addresses", None)
    if known is not None:
        return known
    return np.array([b.__array_interface__["data"][0] for b in bufs], np.uint64)


class Pending:
    """Ranges asked for with :meth:`Store.start_ranges`: ``result()`` waits for their bytes, ``cancel()`` drops them.

    This one holds bytes already read (a store with nothing to wait for).
    """

    def __init__(self, bufs: Sequence[np.ndarray]):
        self._bufs = bufs

    def result(self, stores_waiting: int = 1) -> Sequence[np.ndarray]:
        """The ranges' bytes; ``stores_waiting``: how many stores' requests are in flight with these (a time bound)."""
        return self._bufs

    def cancel(self) -> None:
        """Drop the requests still in flight (nothing to drop here)."""


class Store(abc.ABC):
    """A rumi file's bytes: a local file or an object in an object store.

    ``name`` is safe to show in a message (no credentials, no query string); ``size`` the
    object's size in bytes; ``version`` changes when the object is replaced (an ETag; None
    for a local file, whose inode cannot change under its open descriptor), so a cache
    never serves frames of an older object.
    """

    name: str

    @property
    @abc.abstractmethod
    def size(self) -> int:
        """The object's size in bytes."""

    @property
    @abc.abstractmethod
    def version(self) -> str | None:
        """What identifies this object's content (an ETag), or None when nothing can replace it."""

    @abc.abstractmethod
    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes at ``offset``; fewer at the end of the object, none past it."""

    @abc.abstractmethod
    def read_into(self, dst: np.ndarray, offset: int) -> None:
        """Fill ``dst`` (uint8, contiguous) with the bytes at ``offset``; ``FormatError`` if the object ends first."""

    @abc.abstractmethod
    def get_ranges(self, ranges: Ranges, scratch: np.ndarray | None = None) -> Sequence[np.ndarray]:
        """Each ``(offset, nbytes)`` range's bytes, in order, as read-only-by-contract uint8 arrays.

        ``ranges`` may be an int64 (n, 2) array.  The answer is a sequence (a ``list``, or a
        :class:`RangeViews` whose views are made when asked for) and may carry ``addresses``
        (:func:`buffer_addresses`).

        The one call every executor gets frame bytes through.  ``scratch``: a uint8 buffer
        of at least the ranges' total size the store may fill (range after range) instead
        of handing out buffers of its own; the arrays returned may be views into it.  A
        range past the object's end is a ``FormatError`` (the header does not match the
        object); an empty range gives an empty array.
        """

    def iter_ranges(self, ranges: Ranges, scratch: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """``(index, bytes)`` of each range, in the order the store has them, for a reader that uses each
        range before asking for the next (it decodes each frame while its bytes are still in the CPU caches).

        With ``scratch`` (a uint8 buffer of at least the largest range) the store may read every range
        into its start, so a buffer is valid only until the next one is asked for.  This default hands
        out :meth:`get_ranges`' buffers in order.
        """
        yield from enumerate(self.get_ranges(ranges))

    def start_ranges(self, ranges: Ranges) -> Pending:
        """Ask for the ranges now, wait later (:func:`get_ranges_many`); this default reads them at once."""
        return Pending(self.get_ranges(ranges))

    @abc.abstractmethod
    def close(self) -> None:
        """Release what the store holds; a second call does nothing."""


class StoreWriter(abc.ABC):
    """Bytes on their way to a store, all or nothing: ``write`` in order, then ``commit`` or ``abort``.

    Nothing is visible at the destination before ``commit``; ``abort`` (or an error
    leaving a ``with`` block) leaves nothing behind.  ``name`` is safe to show in a message.
    """

    name: str

    @abc.abstractmethod
    def write(self, data: Buffer) -> int:
        """Append ``data`` (bytes-like); the number of bytes written."""

    @abc.abstractmethod
    def tell(self) -> int:
        """Where the next ``write`` goes."""

    def seekable(self) -> bool:
        """Whether :meth:`seek` can move back (a local file; not a multipart upload, which only appends)."""
        return False

    def seek(self, offset: int) -> None:
        """Move where the next ``write`` goes (only where :meth:`seekable`)."""
        raise RumiError(f"{self.name}: this destination is written in order only; it cannot seek")

    @property
    def staged(self) -> str | None:
        """A local file holding the bytes written so far, once :meth:`flush`ed (None: the destination has none).

        A local destination's temporary file: what a PAM sidecar's binding digests before ``commit``.
        """
        return None

    def flush(self) -> None:
        """Hand buffered bytes on (a local file: to its temporary file, :attr:`staged`); nothing becomes visible."""
        return None

    @abc.abstractmethod
    def commit(self) -> None:
        """Make the written bytes the destination's content, at once."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Drop everything written; a second call, or one after ``commit``, does nothing."""

    def __enter__(self) -> StoreWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


def get_ranges_many(requests: Iterable[tuple[Store, Ranges]]) -> list[Sequence[np.ndarray]]:
    """``store.get_ranges(ranges)`` for each ``(store, ranges)`` in ``requests``, all requests in flight together.

    A batch of chips from several remote objects costs one wait, not one per object (each
    store still caps its own requests in flight); a local store reads at once.
    """
    pending: list[Pending] = []
    try:
        for store, ranges in requests:
            pending.append(store.start_ranges(ranges))
        n = len(pending)
        return [p.result(n) for p in pending]
    finally:
        for p in pending:
            p.cancel()  # a failure: drop the requests still in flight (a no-op for those answered)
