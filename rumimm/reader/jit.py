"""The numba kernels, loaded on a background thread while reads go on without them.

Importing numba and compiling the kernels costs seconds on a first run (an empty
numba cache: about 3 s of CPU on the 2-core build host) and a few tenths of a second
after, when they load from numba's on-disk cache.  A read does not wait for that: the
first read that would use the kernels starts :func:`kernels` loading them on a thread
and is itself read by the chip executor (``small_reads``: geozl's C decoder through
ctypes, numpy placement), as is every read until they are ready, up to
``engine.LOADING_READ_BYTES`` of frames a window.  Only what needs them blocks
(:func:`wait`: a larger window, the catalog's blob check).

Forks.  A fork never waits for the loader.  A child forked while it runs inherits
numba half imported or half compiled, and possibly the compiler's and LLVM's locks
held by a thread it does not have: such a child never touches numba (:func:`kernels`
returns None, :func:`wait` raises), reads everything through the chip executor and
checks blob columns with numpy (``blob_column``).  When the loader is not running,
the fork hook holds numba's compiler lock across the fork (so a compile on another
thread, ``check_blobs`` say, finishes first and the child inherits the lock free),
as before.

Exit.  The loader thread is a daemon; an ``atexit`` handler (registered after numba's
own, so it runs before them) tells it to stop after the kernel it is compiling
(``kernels.WARM_STEPS``) and waits for that, so the interpreter never tears numba and
LLVM down under a compile, a short script waits at most one kernel's compile at exit,
and what was compiled lands in the cache for the next process.
"""

from __future__ import annotations

import atexit
import sys
import threading

from rumimm.errors import RumiError

__all__ = ["kernels", "ready", "state", "wait"]

_NAME = "rumimm-kernels"
_state = threading.Lock()  # guards the fields below; a fork holds it (before_fork)
_thread: threading.Thread | None = None  # the loader, once started
_done = threading.Event()
_stop = threading.Event()  # the interpreter is exiting: no next kernel
_kernels = None  # rumimm.kernels once loaded and warmed
_error: BaseException | None = None  # what the loader raised
_forked_mid_load = False  # this process was forked while the loader ran: numba is off limits
_fork = threading.local()  # what before_fork took, for after_fork


def ready() -> bool:
    """True once the kernels are loaded (a read can use them without waiting)."""
    return _kernels is not None


def state() -> str:
    """``"idle"`` (not started), ``"loading"``, ``"ready"``, ``"failed"``, or ``"off"``
    (this process was forked while its parent loaded them: it never will)."""
    if _kernels is not None:
        return "ready"
    if _forked_mid_load:
        return "off"
    if _thread is None:
        return "idle"
    return "failed" if _done.is_set() else "loading"


def kernels():
    """The kernels module when loaded, else None, having started the loader if it was idle."""
    if _kernels is None:
        _start()
    return _kernels


def wait():
    """Load the kernels (or wait for the loader) and return them; raise what loading raised."""
    if _kernels is not None:
        return _kernels
    _start()
    if _forked_mid_load:
        raise RumiError("the numba kernels cannot load in a process forked while its parent was loading them; "
                        "call rumimm.reader.engine.load() in the parent before forking, or start the worker "
                        "with the 'spawn' or 'forkserver' method")
    _done.wait()
    if _error is not None:
        raise _error
    return _kernels


def _start() -> None:
    global _thread
    inline = False
    with _state:
        if _thread is None and not _forked_mid_load:
            atexit.register(_join)  # an exit during numba's import waits for it too
            _thread = threading.Thread(target=_load, name=_NAME, daemon=True)
            try:
                _thread.start()
            except RuntimeError:  # no new threads (interpreter shutdown): load here, as callers wait anyway
                _thread = threading.current_thread()
                inline = True
    if inline:
        _load(stoppable=False)


def _load(stoppable: bool = True) -> None:
    global _kernels, _error
    try:
        from rumimm import kernels as kern

        atexit.register(_join)  # after numba's handlers, so before them at exit
        for step in kern.WARM_STEPS:
            if stoppable and _stop.is_set():
                raise RumiError("the numba kernels were still loading when the interpreter exited")
            step()
        _kernels = kern
    except BaseException as exc:
        _error = exc
    finally:
        _done.set()


def _join() -> None:
    _stop.set()
    t = _thread
    if t is not None and t.name == _NAME and t is not threading.current_thread():  # not an inline load's caller
        t.join()


def _loading() -> bool:
    return _thread is not None and not _done.is_set()


def _compiler_lock():
    mod = sys.modules.get("numba.core.compiler_lock")
    return None if mod is None else mod.global_compiler_lock


def before_fork() -> None:
    """Fork hook (``engine`` registers it): never waits for the loader."""
    _state.acquire()
    mid_load = _loading()
    lock = None if mid_load else _compiler_lock()
    if lock is not None:
        lock.acquire()
    _fork.held = lock
    _fork.mid_load = mid_load


def after_fork_in_parent() -> None:
    _release()


def after_fork_in_child() -> None:
    global _forked_mid_load
    if _fork.mid_load:
        _forked_mid_load = True  # the loader thread is not here; its half-done state is
    _release()


def _release() -> None:
    lock = _fork.held
    _fork.held = None
    if lock is not None:
        lock.release()
    _state.release()
