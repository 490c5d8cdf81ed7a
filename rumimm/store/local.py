"""A local file as a :class:`~rumimm.store.base.Store`: one descriptor, positional reads, the mapping on demand.

Opening, ``fstat``, positional reads (``pread``) and ``mmap`` all use one descriptor,
so a reader sees one file whole even while another process replaces it by rename
(the old inode stays open; its size is the one measured at open).

Two ways in, chosen by cost (``docs/dev/read-path.md``):

* ``pread`` copies a byte range: what opening (the 252 bytes of header and IFD, the
  georeferencing) and a chip's frames need (:meth:`LocalStore.get_ranges` with a
  ``scratch`` buffer, :meth:`LocalStore.read`, :meth:`LocalStore.read_into`).  Copying a
  300 KB frame out of the page cache costs ~20 us; faulting the same pages into a fresh
  mapping ~50 us, plus ~20 us to map and unmap.
* :meth:`LocalStore.mapping` maps the whole file (``np.frombuffer`` over an ``mmap``)
  on first use; :meth:`LocalStore.get_ranges` without ``scratch`` answers with views into
  it (no copy), which the numba kernels of larger reads decode straight from.

An open file holds its descriptor until the last holder lets go: a read in flight
holds the ``LocalStore`` (and any array of the mapping holds the map), so closing an
image never pulls a descriptor or a map from under a read.  Python's ``mmap`` keeps a
duplicate descriptor of its own before Python 3.13 (``trackfd=False`` avoids it
since), so a mapped file holds two descriptors there.

:class:`LocalWriter` writes a file atomically (``store.atomic``: a locked temporary
file next to the target, fsynced and renamed over it at ``commit``).
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import sys
from typing import TYPE_CHECKING

import numpy as np

from rumimm.errors import FormatError, RumiError, where
from rumimm.store.atomic import AtomicFile
from rumimm.store.base import Buffers, RangeViews, Store, StoreWriter

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from typing_extensions import Buffer

    from rumimm._typing import StrPath
    from rumimm.store.base import Ranges

__all__ = ["LocalStore", "LocalWriter"]

_PREAD = hasattr(os, "preadv")
_TRACKFD = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class LocalStore(Store):
    """The file at ``path`` opened read-only; ``size`` is its size at open.

    Raises
    ------
    FileNotFoundError, PermissionError
        As ``open`` does.
    FormatError
        The file is empty, or not a regular file.
    """

    __slots__ = ("_buf", "_made", "_size", "fd", "path")

    def __init__(self, path: str):
        self.path = path
        self.fd = -1
        self._buf: np.ndarray | None = None
        self._made: list = []  # mappings made by racing threads: the first one made is the one used
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below); no effect on files
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory, not a rumi file", path)
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device cannot be mapped or read at offsets
                raise FormatError(f"{where(path)}not a regular file (a FIFO, socket or device)")
            self._size = st.st_size
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        if self._size == 0:
            self.close()
            raise FormatError(f"{where(path)}file is empty; expected a BigTIFF header")

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.path

    @property
    def size(self) -> int:
        return self._size

    @property
    def version(self) -> None:
        """None: a local file is read through one descriptor, so its inode cannot change under it."""
        return None

    def close(self) -> None:
        """Close the descriptor and drop the mapping now (only when no read can be using them)."""
        self._buf = None
        self._made = []
        self.__del__()

    def __del__(self) -> None:
        fd, self.fd = getattr(self, "fd", -1), -1
        if fd >= 0:
            try:
                os.close(fd)
            except (OSError, TypeError):  # TypeError: os is gone at interpreter exit
                pass

    def __reduce__(self) -> tuple[type[LocalStore], tuple[str]]:
        return (LocalStore, (self.path,))  # a worker opens the path again (its size measured there)

    def mapping(self) -> np.ndarray:
        """The whole file as a read-only uint8 array, mapped on first use.

        No lock (a lock held by another thread at ``fork`` would stay held in the child):
        threads that race here each map the file, and all use the first mapping made
        (``list.append`` and indexing are atomic), so frame addresses never change.
        """
        buf = self._buf
        if buf is None:
            if self.fd < 0:
                raise RumiError(f"{where(self.path)}store is closed")
            now = os.fstat(self.fd).st_size
            if now < self._size:
                raise FormatError(f"{where(self.path)}file has {now} bytes, {self._size} when it was opened; "
                                  "it was truncated after it was opened")
            made = self._made
            made.append(np.frombuffer(_mmap(self.fd, self._size, self.path), np.uint8))
            buf = self._buf = made[0]
            del made[1:]
        return buf

    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes at ``offset``; fewer at the end of the file."""
        offset, nbytes = _check_range(offset, nbytes, self.path)
        if _PREAD:
            return os.pread(self._fd(), nbytes, offset)
        return bytes(self.mapping()[offset:offset + nbytes])

    def get_ranges(self, ranges: Ranges, scratch: np.ndarray | None = None) -> Sequence[np.ndarray]:
        """Each range's bytes: views into the mapping, or with ``scratch``, one ``pread`` per range into it."""
        if scratch is None:
            buf = self.mapping()
            spans = ranges if isinstance(ranges, np.ndarray) else np.asarray(ranges, np.int64)
            spans = spans.reshape(-1, 2)
            if not spans.shape[0]:
                return Buffers()
            starts, counts = spans[:, 0], spans[:, 1]
            if spans.min() < 0 or int((starts + counts).max()) > self._size:
                for o, n in spans.tolist():  # the first bad range, named
                    o, n = _check_range(o, n, self.path)
                    if o + n > self._size:
                        raise FormatError(f"{where(self.path)}bytes {o}..{o + n} are past the end of the file "
                                          f"({self._size} bytes); the header does not match the file")
            return RangeViews(buf, starts, counts)  # views made when asked for: the kernels take the addresses
        out: list[np.ndarray] = []
        at = 0
        if not _PREAD:
            for o, n in ranges:
                o, n = _check_range(o, n, self.path)
                out.append(scratch[at:at + n])
                self.read_into(out[-1], o)
                at += n
            return out
        pairs = ranges.reshape(-1, 2).tolist() if isinstance(ranges, np.ndarray) else ranges
        fd = self._fd()
        for o, n in pairs:  # the chip executor's few frames: kept to one pread each and little else
            if o < 0 or n < 0:
                _check_range(o, n, self.path)
            dst = scratch[at:at + n]
            if n and os.preadv(fd, [dst], o) != n:  # type: ignore[list-item]  # an ndarray is a buffer
                self.read_into(dst, o)  # says where the file ends
            out.append(dst)
            at += n
        return out

    def iter_ranges(self, ranges: Ranges, scratch: np.ndarray | None = None) -> Iterator[tuple[int, np.ndarray]]:
        """Each range in order: one ``pread`` into the start of ``scratch`` (a frame at a time through one
        buffer that stays in the CPU caches), or, without it, views into the mapping."""
        if scratch is None or not _PREAD:
            yield from enumerate(self.get_ranges(ranges))
            return
        fd = self._fd()
        for i, (o, n) in enumerate(ranges):
            if o < 0 or n < 0:
                _check_range(o, n, self.path)
            dst = scratch[:n]
            if n and os.preadv(fd, [dst], o) != n:  # type: ignore[list-item]  # an ndarray is a buffer
                self.read_into(dst, o)  # says where the file ends
            yield i, dst

    def read_into(self, dst: np.ndarray, offset: int) -> None:
        """Fill ``dst`` (uint8, contiguous) with the bytes at ``offset``; FormatError if the file ends first."""
        n = dst.shape[0]
        if _PREAD:
            got = os.preadv(self._fd(), [dst], offset) if n else 0  # type: ignore[list-item]
        else:  # no positional reads (Windows): copy from the mapping
            got = min(n, max(0, self._size - offset))
            dst[:got] = self.mapping()[offset:offset + got]
        if got != n:
            raise FormatError(f"{where(self.path)}file ends at byte {offset + got}, inside a frame that should "
                              f"end at byte {offset + n}; it was truncated after it was opened")

    def _fd(self) -> int:
        fd = self.fd
        if fd < 0:
            raise RumiError(f"{where(self.path)}store is closed")
        return fd


class LocalWriter(StoreWriter):
    """A new version of the file at ``path``, written to a locked temporary file next to it.

    ``commit`` fsyncs it and renames it over ``path`` (through a symlink: its target),
    keeping an existing file's permission bits; ``abort`` removes it.  Writes go at
    the current position: ``seek`` moves it (the prefix of a rumi file is written last).
    """

    def __init__(self, path: StrPath, *, overwrite: bool = True) -> None:
        self.name = os.fspath(path)
        if not overwrite and os.path.lexists(self.name):
            raise FileExistsError(f"{self.name}: the file exists and overwrite=False; pass overwrite=True to "
                                  "replace it")
        self._file = AtomicFile(os.fspath(path))
        self._overwrite = overwrite

    @property
    def tmp(self) -> str:
        """The temporary file being written (``store.atomic.clean`` finds it if this process dies)."""
        return self._file.tmp

    @property
    def staged(self) -> str:
        return self._file.tmp

    def write(self, data: Buffer) -> int:
        return self._file.fh.write(data)

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int) -> None:
        self._file.fh.seek(offset)

    def tell(self) -> int:
        return self._file.fh.tell()

    def flush(self) -> None:
        """Hand buffered bytes to the temporary file, so that :attr:`tmp` can be read (a sidecar's digest)."""
        self._file.fh.flush()

    def commit(self) -> None:
        if not self._overwrite and os.path.lexists(self.name):  # another writer got there first
            self.abort()
            raise FileExistsError(f"{self.name}: the file exists and overwrite=False; pass overwrite=True to "
                                  "replace it")
        self._file.commit()

    def abort(self) -> None:
        self._file.discard()


def _check_range(offset: int, nbytes: int, name: StrPath) -> tuple[int, int]:
    o, n = int(offset), int(nbytes)
    if o < 0 or n < 0:
        raise RumiError(f"{where(name)}byte range ({o}, {n}) is negative")
    return o, n


def _mmap(fd: int, size: int, path: StrPath) -> mmap.mmap:
    try:
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ, **_TRACKFD)
    except (OSError, ValueError) as exc:
        raise RumiError(f"{where(path)}cannot map file: {getattr(exc, 'strerror', None) or exc}") from exc
