"""The background event loop remote requests run on, and waiting for them within a bound.

One loop per process, on a daemon thread started by the first request; obstore's
coroutines release the GIL while they wait.  obstore's runtime does not survive
``fork``: a child of a process that already sent a request is refused with a
``RemoteError`` instead of hanging.
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
_loop_pid: int | None = None
_used_pid: int | None = None  # the process that sent obstore's first request (its runtime runs there)
_loop_lock = threading.Lock()


def _event_loop() -> asyncio.AbstractEventLoop:
    """The process's background event loop, started on first use."""
    global _loop, _loop_pid
    pid = os.getpid()
    if _loop is None or _loop_pid != pid:
        with _loop_lock:
            if _loop is None or _loop_pid != pid:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="rumimm-remote", daemon=True).start()
                _loop, _loop_pid = loop, pid
    return _loop


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
