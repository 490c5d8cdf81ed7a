"""How many threads the reader decodes with, and the pool that runs them.

The count is process-wide: :func:`set_num_threads` wins, else the environment
variable ``RUMIMM_NUM_THREADS`` (read when a read asks), else one per core.  It is
rumimm's own setting: numba's thread count is left alone.

In a parallel read the calling thread and a small persistent pool of Python threads
each make one call of the ``nogil`` decode kernel, which takes frames one at a time
from a shared atomic counter, so a thread the OS schedules late simply takes fewer
frames and no thread needs the GIL until its call returns.  Plain threads (not numba's ``prange``) were
chosen because they never spin: on a busy machine OpenMP workers spinning at a
barrier cost more than the parallelism gained (measured on the 2-core build host),
they need no thread-safe numba threading layer, and they survive ``fork``.

Two rules keep reads well-behaved:

* One parallel read at a time.  A read that finds another one running decodes on
  its own thread instead (still without the GIL), so many Python threads reading
  at once spread over the cores without oversubscribing them.
* In a forked child (a PyTorch DataLoader worker, say) reads use one thread unless
  the child calls :func:`set_num_threads` itself: workers already run in parallel.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

from rumimm._env import env_int

__all__ = ["get_num_threads", "max_threads", "parallel_slot", "release_parallel", "run_workers", "set_num_threads"]

_T = TypeVar("_T")

_parallel_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None  # made on the first parallel read
_pool_size = 0
_pool_lock = threading.Lock()
_forked_default = False  # a forked child reads on one thread until told otherwise
_threads: int | None = None  # set_num_threads


def get_num_threads() -> int:
    """Return the number of threads a read decodes with (1 = the calling thread only).

    ``set_num_threads`` wins; else ``RUMIMM_NUM_THREADS`` (clamped to the core
    count); else one per core.  In a forked child the default is 1.
    """
    if _threads is not None:
        return _threads
    if _forked_default:
        return 1
    wanted = env_int("RUMIMM_NUM_THREADS", 1)
    limit = max_threads()
    return limit if wanted is None else min(wanted, limit)


def max_threads() -> int:
    """The largest thread count :func:`set_num_threads` accepts: the core count."""
    return os.cpu_count() or 1


def set_num_threads(n: int) -> None:
    """Set the number of decode threads for every read in this process.

    Parameters
    ----------
    n : int
        In ``[1, max_threads()]`` (the core count).  1 decodes on the calling
        thread only, with no thread pool at all.

    Raises
    ------
    TypeError, ValueError
        ``n`` is not an integer in range.
    """
    global _threads
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"number of threads must be an integer, got {type(n).__name__}")
    limit = max_threads()
    if not 1 <= int(n) <= limit:
        raise ValueError(f"number of threads must be in [1, {limit}], got {n}")
    _threads = int(n)


def parallel_slot(n_jobs: int) -> int:
    """Threads to use for ``n_jobs`` independent frames: 1 (serial) or more (parallel).

    Returns more than 1 only when the caller now holds the parallel slot; it must
    then call :func:`release_parallel` when done.
    """
    if n_jobs < 2:
        return 1
    n = get_num_threads()
    if n < 2:
        return 1
    if not _parallel_lock.acquire(blocking=False):
        return 1
    return min(n, n_jobs)


def release_parallel() -> None:
    _parallel_lock.release()


def _get_pool(workers: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="rumimm-decode")
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def run_workers(fn: Callable[[int], _T], workers: int) -> list[_T]:
    """Call ``fn(w)`` for w in 0..workers-1: w = 0 on this thread, the rest on the pool.

    Returns the results in worker order, after every call has returned.
    """
    pool = _get_pool(workers - 1)
    futures = [pool.submit(fn, w) for w in range(1, workers)]
    try:
        first = fn(0)
    finally:
        rest = [f.result() for f in futures]
    return [first, *rest]


def _after_fork_in_child() -> None:
    global _parallel_lock, _pool, _pool_size, _pool_lock, _forked_default, _threads
    _parallel_lock = threading.Lock()  # a lock held by a parent thread would never be released
    _pool_lock = threading.Lock()
    _pool, _pool_size = None, 0  # the parent's pool threads do not exist here
    _forked_default = True
    _threads = None  # the parent's setting does not carry over: the child calls set_num_threads itself


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
