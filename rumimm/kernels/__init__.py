"""numba kernels of rumimm, by concern: the batch blob check (``blob``), window
planning (``plan``) and decode-and-place (``copy``).

Kernels take arrays, scalars and small records and return arrays or status codes;
the Python layers above (``blob.py``, ``engine.py``) validate arguments first and
turn codes into errors.  Only ``reader.jit`` imports this package (numba loads with
it), on a background thread.  All are compiled with ``cache=True``.
"""

import numpy as np

from rumimm.format.window import Run
from rumimm.kernels import blob as _blob_mod
from rumimm.kernels import copy as _copy_mod
from rumimm.kernels import native as _native_mod
from rumimm.kernels import plan as _plan_mod
from rumimm.kernels._stale import drop_stale_indexes
from rumimm.kernels.blob import *  # noqa: F403
from rumimm.kernels.blob import check_blobs  # noqa: F401
from rumimm.kernels.copy import STATUS_SIZE_MISMATCH, Frames, Placement, decode_copy  # noqa: F401
from rumimm.kernels.plan import *  # noqa: F403
from rumimm.kernels.plan import GRID_COLS, PLAN_COLS, WINDOW_COLS, plan_batch, plan_window  # noqa: F401

drop_stale_indexes([f for m in (_blob_mod, _copy_mod, _native_mod, _plan_mod)
                    for f in vars(m).values() if hasattr(f, "_cache")])


def warm() -> None:
    """Run every kernel a read runs once, on empty input, with the argument types of a real read.

    Loads them from numba's cache, or compiles them, with every lazy import numba's
    dispatch makes on a first call (``numpy.ma``, for one): afterwards a read
    imports and compiles nothing.  Two kernels, one specialisation each (a window
    is a one-window batch; one thread or several run the same decode kernel).
    """
    for step in WARM_STEPS:
        step()


def _warm_plan() -> None:
    import numpy.ma  # noqa: F401  (numba's typeof of an ndarray imports it on first use)

    one = Run(0, 1, 1)
    plan_batch(np.ones((1, GRID_COLS), np.int64), np.zeros((1, WINDOW_COLS), np.int64), np.zeros(1, np.int64),
               one, one, 1)


def _warm_decode() -> None:
    u64, i64 = np.zeros(1, np.uint64), np.zeros(1, np.int64)
    frames = Frames(u64, u64, i64, u64, np.zeros(1, np.uint8), i64, i64, np.zeros(1, np.uint8))
    place = Placement(np.zeros((1, PLAN_COLS), np.int64), i64, np.zeros((1, 1, 1, 1), np.uint8), 1, 1, 1, 0xFF, True)
    decode_copy(frames, place, np.zeros(1, np.uint8), 0, np.zeros(1, np.int64), 0)


#: :func:`warm` one kernel at a time (``reader.jit`` can stop between them when the process exits).
WARM_STEPS = (_warm_plan, _warm_decode)
