"""numba kernels of rumimm, by concern: the batch blob check (``blob``), window
planning (``plan``) and decode-and-place (``copy``).

Kernels take arrays, scalars and small records and return arrays or status codes;
the Python layers above (``blob.py``, ``engine.py``) validate arguments first and
turn codes into errors.  Only ``engine.load`` imports this package (numba loads with
it).  All are compiled with ``cache=True``.
"""

from rumimm.kernels.blob import *  # noqa: F401,F403
from rumimm.kernels.blob import check_blobs  # noqa: F401
from rumimm.kernels.copy import STATUS_SIZE_MISMATCH, Frames, Placement, decode_copy, decode_copy_shared  # noqa: F401
from rumimm.kernels.plan import *  # noqa: F401,F403
from rumimm.kernels.plan import plan_batch, plan_window  # noqa: F401

from rumimm.kernels import blob as _blob_mod  # noqa: E402
from rumimm.kernels import copy as _copy_mod  # noqa: E402
from rumimm.kernels import native as _native_mod  # noqa: E402
from rumimm.kernels import plan as _plan_mod  # noqa: E402
from rumimm.kernels._stale import drop_stale_indexes  # noqa: E402

drop_stale_indexes([f for m in (_blob_mod, _copy_mod, _native_mod, _plan_mod) for f in vars(m).values() if hasattr(f, "_cache")])
