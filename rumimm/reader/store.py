"""Where frame bytes come from: the ``Store`` interface, and a local file opened read-only.

A :class:`Store` is one object holding a rumi file: ``name`` (for messages), ``size``,
``version`` (changes when the object changes, so the frame cache never serves an old
object), ``read(offset, nbytes)`` (fewer bytes at the end), ``read_into(dst, offset)`` (exactly
``len(dst)`` bytes or ``FormatError``), ``read_ranges(ranges)`` (many ranges at once: a remote
store coalesces and fetches them concurrently), ``mapping()`` (the whole file as an array,
local files only, for the numba kernels; None elsewhere) and ``close()``.  The planner
(``reader.planner``) and its executors read frames only through it.

:class:`LocalStore` is a local file: one descriptor, positional reads, the mapping on demand.
``remote.RemoteStore`` is an object in an object store or at an HTTP(S) URL; :func:`open_store`
picks one.

Opening, ``fstat``, positional reads (``pread``) and ``mmap`` all use one descriptor,
so a reader sees one file whole even while another process replaces it by rename
(the old inode stays open; its size is the one measured at open).

Two ways in, chosen by cost (``docs/dev/engine.md``):

* :meth:`LocalStore.read` / :meth:`LocalStore.read_into` copy a byte range with one
  ``pread``: what opening (the 252 bytes of header and IFD, the georeferencing) and a
  chip's frames need.  Copying a 300 KB frame out of the page cache costs ~20 us;
  faulting the same pages into a fresh mapping ~50 us, plus ~20 us to map and unmap.
* :meth:`LocalStore.mapping` maps the whole file (``np.frombuffer`` over an ``mmap``)
  on first use, for the numba kernels of larger reads, which decode straight from it.

An open file holds its descriptor until the last holder lets go: a read in flight
holds the ``LocalStore`` (and any array of the mapping holds the map), so closing an
image never pulls a descriptor or a map from under a read.  Python's ``mmap`` keeps a
duplicate descriptor of its own before Python 3.13 (``trackfd=False`` avoids it
since), so a mapped file holds two descriptors there.
"""

from __future__ import annotations

import errno
import mmap
import os
import stat
import sys
from typing import Protocol

import numpy as np

from rumimm.errors import FormatError, RumiError, where
from rumimm.reader.remote import RemoteStore, is_remote

__all__ = ["LocalStore", "Store", "open_store"]

_PREAD = hasattr(os, "preadv")
_TRACKFD = {"trackfd": False} if sys.version_info >= (3, 13) else {}


class Store(Protocol):
    """What the read path needs of the object holding a rumi file (see the module docstring)."""

    name: str
    size: int
    version: str | None

    def read(self, offset: int, nbytes: int) -> bytes: ...

    def read_into(self, dst: np.ndarray, offset: int) -> None: ...

    def read_ranges(self, ranges) -> list[np.ndarray]: ...

    def mapping(self) -> np.ndarray | None: ...

    def close(self) -> None: ...


def open_store(path, storage_options=None):
    """The store for ``path``: a local file opened read-only, or a remote object.

    Remote URIs (``s3://``, ``gs://``, ``az://``, ``http(s)://``) give a
    ``remote.RemoteStore`` (no request is sent until the first read);
    ``storage_options`` apply to them only.
    """
    if is_remote(path):
        return RemoteStore(path, storage_options)
    if storage_options:
        raise ValueError(f"storage_options apply to remote URIs only, got a local path {os.fspath(path)!r}")
    return LocalStore(os.fspath(path))


class LocalStore:
    """The file at ``path`` opened read-only; ``size`` is its size at open.

    Raises
    ------
    FileNotFoundError, PermissionError
        As ``open`` does.
    FormatError
        The file is empty.
    """

    __slots__ = ("_buf", "_made", "fd", "path", "size", "version")

    def __init__(self, path: str):
        self.path = path
        self.fd = -1
        self._buf = None
        self._made = []  # mappings made by racing threads: the first one made is the one used
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused just below); no effect on files
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise IsADirectoryError(errno.EISDIR, "is a directory, not a rumi file", path)
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device cannot be mapped or read at offsets
                raise FormatError(f"{where(path)}not a regular file; a rumi file is read at offsets and mapped")
            self.size = st.st_size
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.version = None  # a local file is read through one descriptor: its inode cannot change under it
        if self.size == 0:
            self.close()
            raise FormatError(f"{where(path)}file is empty; expected a BigTIFF header")

    def close(self) -> None:
        """Close the descriptor and drop the mapping now (only when no read can be using them)."""
        self._buf = None
        self._made = []
        self.__del__()

    def __del__(self):
        fd, self.fd = getattr(self, "fd", -1), -1
        if fd >= 0:
            try:
                os.close(fd)
            except (OSError, TypeError):  # TypeError: os is gone at interpreter exit
                pass

    def mapping(self) -> np.ndarray:
        """The whole file as a read-only uint8 array, mapped on first use.

        No lock (a lock held by another thread at ``fork`` would stay held in the child):
        threads that race here each map the file, and all use the first mapping made
        (``list.append`` and indexing are atomic), so frame addresses never change.
        """
        buf = self._buf
        if buf is None:
            now = os.fstat(self.fd).st_size
            if now < self.size:
                raise FormatError(f"{where(self.path)}file has {now} bytes, {self.size} when it was opened; "
                                  "it was truncated after it was opened")
            made = self._made
            made.append(np.frombuffer(_mmap(self.fd, self.size, self.path), np.uint8))
            buf = self._buf = made[0]
            del made[1:]
        return buf

    def read(self, offset: int, n: int) -> bytes:
        """``n`` bytes at ``offset``; fewer at the end of the file."""
        if _PREAD:
            return os.pread(self.fd, n, offset)
        return bytes(self.mapping()[offset:offset + n])

    @property
    def name(self) -> str:
        return self.path

    def read_ranges(self, ranges) -> list[np.ndarray]:
        """The bytes of each (offset, nbytes) range, in order; one ``pread`` each."""
        out = []
        for offset, nbytes in ranges:
            buf = np.empty(int(nbytes), np.uint8)
            self.read_into(buf, int(offset))
            out.append(buf)
        return out

    def read_into(self, dst: np.ndarray, offset: int) -> None:
        """Fill ``dst`` (uint8, contiguous) with the bytes at ``offset``; FormatError if the file ends first."""
        n = dst.shape[0]
        if _PREAD:
            got = os.preadv(self.fd, [dst], offset)
        else:  # no positional reads (Windows): copy from the mapping
            got = min(n, max(0, self.size - offset))
            dst[:got] = self.mapping()[offset:offset + got]
        if got != n:
            raise FormatError(f"{where(self.path)}file ends at byte {offset + got}, inside a frame that should "
                              f"end at byte {offset + n}; it was truncated after it was opened")


def _mmap(fd: int, size: int, path) -> mmap.mmap:
    try:
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ, **_TRACKFD)
    except (OSError, ValueError) as exc:
        raise RumiError(f"{where(path)}cannot map file: {getattr(exc, 'strerror', None) or exc}") from exc
