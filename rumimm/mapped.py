"""Map a file read-only through one descriptor.

Opening, ``fstat`` and ``mmap`` all use the same descriptor, so a reader sees one
file whole even while another process replaces it by rename (the old inode stays
mapped; its size is the one measured).  Arrays are made with ``np.frombuffer``,
which holds a buffer export of the map: ``mmap.close()`` then raises BufferError and
leaves the map in place while any array of it lives, instead of unmapping memory a
read in flight still uses.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from .errors import FormatError, RumiError, where

__all__ = ["map_file"]


def map_file(path) -> tuple[mmap.mmap, np.ndarray]:
    """(mmap, uint8 array over it) of the whole file at ``path``.

    Raises
    ------
    FileNotFoundError, PermissionError
        As ``open`` does.
    FormatError
        The file is empty (nothing to map).
    """
    path = os.fspath(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            raise FormatError(f"{where(path)}file is empty; expected a BigTIFF header")
        try:
            mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise RumiError(f"{where(path)}cannot map file: {getattr(exc, 'strerror', None) or exc}") from exc
    finally:
        os.close(fd)
    return mm, np.frombuffer(mm, np.uint8)
