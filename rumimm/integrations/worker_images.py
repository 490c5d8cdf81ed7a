"""The images a Dask worker keeps open between tasks, keyed by what the graph carries.

A read task names its file by ``(path or URI, blob[, storage_options])``; opening it
from the blob is cheap, but a task per chunk opening and closing the file (and, for a
URI, a new HTTP client) is not: mappings, descriptors and connections would come and go
thousands of times a computation.  Each process therefore keeps the images it opened,
least recently used closed first beyond :data:`MAX_OPEN`.  A local file is also keyed
by its inode and modification time, so a file replaced at the same path (rumimm writes
by rename) is opened again and the old image closed.  A forked child starts empty, with a
new lock (an ``os.register_at_fork`` handler): the parent's descriptors are not its own, and
a lock another thread held at the fork would stay held.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict
from typing import Any

__all__ = ["MAX_OPEN", "close_all", "image_for", "open_count"]

#: Open images a process keeps; a Dask computation over more files reopens the oldest.
MAX_OPEN = 32

_lock = threading.Lock()
_images: OrderedDict[tuple, Any] = OrderedDict()


def _key(path: str, blob: bytes, options: dict | None) -> tuple:
    from rumimm.store import is_remote

    digest = hashlib.blake2b(blob, digest_size=16).digest()
    opts = None if options is None else repr(sorted(options.items()))
    if is_remote(path):
        return (path, digest, opts, None)
    st = os.stat(path)  # a path replaced by another file is another key
    return (path, digest, opts, (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))


def image_for(source: tuple) -> Any:
    """The open image of ``source = (path, blob[, storage_options])`` in this process."""
    from rumimm.reader.image import open as open_image

    path, blob, *rest = source
    options = rest[0] if rest else None
    key = _key(path, blob, options)
    stale = []
    with _lock:
        img = _images.get(key)
        if img is not None:
            _images.move_to_end(key)
            return img
    img = open_image(path, blob, cache_bytes=0, storage_options=options)
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
    for old in stale:
        old.close()  # an image still reading in another thread finishes first (Image.close waits)
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
    global _images, _lock
    _images = OrderedDict()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
