"""Caches of what a process made for itself (obstore clients, link estimates), emptied in a forked child.

obstore's clients do not survive ``fork``, and a lock that another thread held when the
process forked stays held forever in the child.  So each cache's entries and its lock are
replaced in the child by an ``os.register_at_fork`` handler, as the reader's thread pool
and frame cache do, rather than by a process-id test on every look-up.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable
from typing import Any

__all__ = ["ProcessCache"]


class ProcessCache:
    """A dictionary of values made on first use and shared by this process's threads; empty in a forked child."""

    def __init__(self) -> None:
        self._items: dict[Hashable, Any] = {}
        self._lock = threading.Lock()
        _caches.add(self)

    def get(self, key: Hashable) -> Any:
        """The value kept for ``key``, or None."""
        return self._items.get(key)

    def get_or_make(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value kept for ``key``, made by ``make()`` (under the cache's lock: once) when there is none."""
        with self._lock:
            value = self._items.get(key)
            if value is None:
                value = self._items[key] = make()
            return value

    def values(self) -> Iterable[Any]:
        return list(self._items.values())

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def forget(self) -> None:
        """Drop every entry and take a new lock (in a forked child, by the fork handler)."""
        self._items = {}
        self._lock = threading.Lock()  # a parent thread may have held the old one at the fork


_caches: weakref.WeakSet[ProcessCache] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Empty every cache: the parent's clients are unusable here."""
    for cache in list(_caches):
        cache.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
