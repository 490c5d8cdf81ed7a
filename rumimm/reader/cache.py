"""Memory for decoded frames: an LRU cache with a byte budget, and the allocator setting.

:class:`FrameCache` keeps recently decoded frames so that neighbouring small windows
do not decode the same frame twice.  By default every image shares one process-wide
cache (:data:`SHARED`, 64 MiB, or ``RUMIMM_CACHE_BYTES``), so opening thousands of
images does not multiply the memory held; ``rumimm.open(path, cache_bytes=n)`` gives
an image a private cache of ``n`` bytes, and ``cache_bytes=0`` turns caching off.
Cached frames are read-only arrays; readers copy out of them.

:func:`tune_malloc` stops glibc from handing the OpenZL decoder's scratch memory
back to the kernel after every frame.  Without it every frame decode may page-fault
its work buffers in again (measured: ~340 minor faults per 512 x 512 uint16 frame).
It raises glibc's mmap threshold to 32 MiB and its trim threshold to 128 MiB for the
whole process, once, when the read engine loads (the first pixel read, never at import
or open); ``RUMIMM_TUNE_MALLOC=0`` leaves the allocator alone.  It is the one
process-wide setting rumimm makes, kept because it halves the decode time of a frame
(``docs/performance.md``).
"""

from __future__ import annotations

import ctypes
import os
import platform
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

from rumimm._env import env_int

__all__ = ["DEFAULT_CACHE_BYTES", "SHARED", "FrameCache", "check_size", "default_cache_bytes", "shared", "tune_malloc"]

DEFAULT_CACHE_BYTES = 64 << 20


def default_cache_bytes() -> int:
    """The shared cache budget: ``RUMIMM_CACHE_BYTES`` if set, else 64 MiB."""
    n = env_int("RUMIMM_CACHE_BYTES", 0)
    return DEFAULT_CACHE_BYTES if n is None else n


class FrameCache:
    """A thread-safe LRU of decoded frames, bounded by their total size in bytes.

    Keys are ``(owner, frame_index)``; values are read-only uint8 arrays, returned
    with their data address as ``(array, address)`` (the decode kernel works on
    addresses; computing one costs more than a dict lookup).  A frame larger than a
    quarter of the budget is never stored: one large read would otherwise flush
    everything the small reads around it need.

    Parameters
    ----------
    max_bytes : int
        The budget; 0 stores nothing.
    """

    def __init__(self, max_bytes: int):
        check_size(max_bytes)
        self.max_bytes = max_bytes
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        # reentrant: an image's finaliser (discard_owner) can run inside put_many, when an evicted
        # frame frees the last reference to a closed image or an allocation there starts a collection
        self._lock = threading.RLock()
        self.hits = 0
        self.misses = 0
        _ALL.add(self)

    @property
    def nbytes(self) -> int:
        """Bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def admits(self, nbytes: int) -> bool:
        """Whether a read that decodes ``nbytes`` new bytes should store them."""
        return 0 < nbytes <= self.max_bytes >> 2

    def get(self, key):
        """``(array, address)`` of the cached frame (now most recently used), or None."""
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def get_many(self, keys) -> list:
        """``get`` for each key, under one lock acquisition."""
        out = []
        with self._lock:
            items = self._items
            for key in keys:
                value = items.get(key)
                if value is None:
                    self.misses += 1
                else:
                    items.move_to_end(key)
                    self.hits += 1
                out.append(value)
        return out

    def put_many(self, keys, arrays, addresses=None) -> None:
        """Store frames (made read-only), evicting the least recently used past the budget."""
        if addresses is None:
            addresses = [a.ctypes.data for a in arrays]
        with self._lock:
            items = self._items
            limit = self.max_bytes >> 2
            for key, array, addr in zip(keys, arrays, addresses, strict=True):
                n = array.nbytes
                if n > limit:
                    continue
                array.flags.writeable = False
                old = items.pop(key, None)
                if old is not None:
                    self._bytes -= old[0].nbytes
                items[key] = (array, addr)
                self._bytes += n
            while self._bytes > self.max_bytes and items:
                _, old = items.popitem(last=False)
                self._bytes -= old[0].nbytes

    def discard_owner(self, owner) -> None:
        """Drop every frame of one owner (an image being closed)."""
        with self._lock:
            for key in [k for k in self._items if k[0] == owner]:
                self._bytes -= self._items.pop(key)[0].nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def resize(self, max_bytes: int) -> None:
        """Change the budget, evicting as needed."""
        check_size(max_bytes)
        with self._lock:
            self.max_bytes = max_bytes
            while self._bytes > max_bytes and self._items:
                _, old = self._items.popitem(last=False)
                self._bytes -= old[0].nbytes

    def after_fork(self) -> None:
        """Give the cache a fresh lock in a forked child."""
        # reentrant: an image's finaliser (discard_owner) can run inside put_many, when an evicted
        # frame frees the last reference to a closed image or an allocation there starts a collection
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"<rumimm.FrameCache {len(self._items)} frames, {self._bytes} of {self.max_bytes} bytes>"


def check_size(max_bytes) -> None:
    """ValueError unless ``max_bytes`` is a non-negative int."""
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"cache size must be a non-negative int of bytes, got {max_bytes!r}")


_ALL: weakref.WeakSet = weakref.WeakSet()  # every cache, so a forked child can renew their locks

_shared: FrameCache | None = None
_shared_lock = threading.Lock()


def shared() -> FrameCache:
    """The process-wide cache every image uses unless opened with ``cache_bytes``.

    Made on first use (the first ``rumimm.open``), so ``RUMIMM_CACHE_BYTES`` is read
    then and a bad value is a ValueError naming the variable at that call.
    """
    global _shared
    if _shared is None:
        with _shared_lock:
            if _shared is None:
                _shared = FrameCache(default_cache_bytes())
    return _shared


if TYPE_CHECKING:
    SHARED: FrameCache  # for checkers and linters; at run time the module __getattr__ below makes it on first use


def __getattr__(name: str):
    if name == "SHARED":  # ``rumimm.reader.cache.SHARED``: the shared cache, made on first use
        return shared()
    raise AttributeError(f"module 'rumimm.reader.cache' has no attribute {name!r}")


def _after_fork_in_child() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()
    for c in list(_ALL):
        c.after_fork()  # a lock held by a parent thread at fork time would never be released


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_tuned: bool | None = None
_tune_lock = threading.Lock()


def tune_malloc() -> bool:
    """Keep glibc from returning decoder scratch memory to the OS after every frame.

    Process-wide and permanent; idempotent.  Returns True when the setting is in
    effect, False on other C libraries.
    """
    global _tuned
    if _tuned is not None:
        return _tuned
    with _tune_lock:
        if _tuned is not None:
            return _tuned
        ok = False
        if platform.libc_ver()[0] == "glibc":
            try:
                mallopt = ctypes.CDLL(None).mallopt
                mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
                mallopt.restype = ctypes.c_int
                ok = bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 128 << 20))
            except (OSError, AttributeError):  # pragma: no cover - exotic libc
                ok = False
        _tuned = ok
        return ok
