"""The images a Dask worker keeps open between tasks, keyed by what the graph carries.

A read task names its file by ``(path or URI, blob[, storage_options])``; opening it
from the blob is cheap, but a task per chunk opening and closing the file (and, for a
URI, a new HTTP client) is not: mappings, descriptors and connections would come and go
thousands of times a computation.  Each process therefore keeps the images it opened,
least recently used closed first beyond :data:`MAX_OPEN`.  A local file is also keyed
by its inode and modification time, so a file replaced at the same path (rumimm writes
by rename) is opened again and the old image closed.  A forked child starts empty, with a
new lock (an ``os.register_at_fork`` handler): the parent's descriptors are not its own, and
a lock another thread held at the fork would stay held.  A task reads inside :func:`held`,
which keeps its image open until the read returns: an image another thread makes room for
meanwhile is closed when its last read lets go, never under one.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MAX_OPEN", "close_all", "held", "open_count"]

#: Open images a process keeps; a Dask computation over more files reopens the oldest.
MAX_OPEN = 32

_lock = threading.Lock()
_images: OrderedDict[tuple, Any] = OrderedDict()
_holds: dict[int, int] = {}  # id(image) -> reads holding it (held)
_retired: dict[int, Any] = {}  # images made room for while held: closed when their last read lets go


def _key(path: str, blob: bytes, options: dict | None) -> tuple:
    from rumimm.store import is_remote

    digest = hashlib.blake2b(blob, digest_size=16).digest()
    opts = None if options is None else repr(sorted(options.items()))
    if is_remote(path):
        return (path, digest, opts, None)
    st = os.stat(path)  # a path replaced by another file is another key
    return (path, digest, opts, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))


@contextlib.contextmanager
def held(source: tuple) -> Iterator[Any]:
    """The open image of ``source = (path, blob[, storage_options])`` in this process, kept open until the block
    ends: another thread making room never closes it under a read."""
    img = _take(source)
    try:
        yield img
    finally:
        closing = None
        with _lock:
            left = _holds.pop(id(img), 1) - 1
            if left:
                _holds[id(img)] = left
            else:
                closing = _retired.pop(id(img), None)
        if closing is not None:
            closing.close()


def _take(source: tuple) -> Any:
    """The image of ``source``, opened if this process has none, with one more hold on it."""
    from rumimm.reader.image import open as open_image

    path, blob, *rest = source
    options = rest[0] if rest else None
    key = _key(path, blob, options)
    with _lock:
        img = _images.get(key)
        if img is not None:
            _images.move_to_end(key)
            _holds[id(img)] = _holds.get(id(img), 0) + 1
            return img
    img = open_image(path, blob, cache_bytes=0, storage_options=options)
    stale = []
    with _lock:
        other = _images.get(key)
        if other is not None:  # another thread opened it meanwhile: keep one
            stale.append(img)
            img = other
        else:
            _images[key] = img
            stale += [_images.pop(k) for k in [k for k in _images if k[0] == path and k != key]]
            while len(_images) > MAX_OPEN:
                stale.append(_images.popitem(last=False)[1])
        _holds[id(img)] = _holds.get(id(img), 0) + 1
        closing = []
        for old in stale:  # one a read holds is closed when that read lets go
            if id(old) in _holds:
                _retired[id(old)] = old
            else:
                closing.append(old)
    for old in closing:
        old.close()
    return img


def open_count(path: str | os.PathLike | None = None) -> int:
    """How many images this process holds open (of ``path`` only, if given)."""
    with _lock:
        keys = list(_images)
    return len(keys) if path is None else sum(k[0] == os.fspath(path) for k in keys)


def close_all() -> None:
    """Close every image this process keeps (they reopen on the next read)."""
    global _images
    with _lock:
        images, _images = _images, OrderedDict()
    for img in images.values():
        img.close()


def _after_fork_in_child() -> None:
    """Forget the parent's images (the child's copies of their descriptors close as they are collected) and its lock."""
    global _images, _lock, _holds, _retired
    _images = OrderedDict()
    _holds = {}
    _retired = {}
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
