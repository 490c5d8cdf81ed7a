"""The background event loop remote requests run on, and waiting for them within a bound.

One loop per process, on a daemon thread started by the first request; obstore's
coroutines release the GIL while they wait.  A forked child starts with no loop and a
new lock (an ``os.register_at_fork`` handler: the parent's loop thread does not exist
there, and a lock another thread held at the fork would stay held).  obstore's runtime
does not survive ``fork``: a child of a process that already sent a request is refused
with a ``RemoteError`` instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

from rumimm.store.failures import RemoteError

__all__ = ["no_answer", "submit", "time_bound", "wait"]

T = TypeVar("T")

_loop: asyncio.AbstractEventLoop | None = None
_used_pid: int | None = None  # the process that sent obstore's first request (its runtime runs there)
_loop_lock = threading.Lock()


def _event_loop() -> asyncio.AbstractEventLoop:
    """The process's background event loop, started on first use."""
    global _loop
    loop = _loop
    if loop is None:
        with _loop_lock:
            loop = _loop
            if loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="rumimm-remote", daemon=True).start()
                _loop = loop
    return loop


def _after_fork_in_child() -> None:
    """No loop thread runs in a forked child, and the lock may have been held at the fork: start afresh."""
    global _loop, _loop_lock
    _loop = None
    _loop_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def submit(coro: Coroutine[Any, Any, T], name: str) -> Future[T]:
    """Start ``coro`` on the background loop: a concurrent future (``name``: the object, for the fork error)."""
    global _used_pid
    pid = os.getpid()
    if _used_pid is not None and _used_pid != pid:
        coro.close()
        raise RemoteError(
            f"{name}: this process was forked from one that had already read remotely; obstore's "
            "runtime does not survive fork (its requests would hang); open remote images in the child, "
            "pass header= so the parent sends no request, or use the 'spawn' or 'forkserver' start method")
    _used_pid = pid
    return asyncio.run_coroutine_threadsafe(coro, _event_loop())


def time_bound(request_seconds: float, max_concurrency: int, n_requests: int) -> float:
    """A safety net over the client's own per-request timeouts: waves of requests x (retries + timeout)."""
    waves = -(-n_requests // max_concurrency)
    return waves * request_seconds + 10.0


def no_answer(name: str, bound: float) -> RemoteError:
    return RemoteError(f"{name}: no answer within {bound:.0f} s; the server is not responding")


def wait(fut: Future[T], bound: float, name: str) -> T:
    """The result of ``fut``, waited for no longer than ``bound`` seconds (then cancelled: RemoteError)."""
    try:
        return fut.result(timeout=bound)
    except TimeoutError:
        fut.cancel()
        raise no_answer(name, bound) from None
