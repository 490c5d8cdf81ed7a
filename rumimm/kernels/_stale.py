"""Drop numba cache indexes that no longer load, so an upgraded rumimm never fails on an old cache.

numba unpickles a kernel's cache index before it compares the source's stamp, so an index
written by an older rumimm whose argument records lived in another module (``Run`` moved
from ``rumimm.window`` to ``rumimm.format.window``) raises ``ModuleNotFoundError`` at the
first read instead of recompiling.  pip replaces the sources on an upgrade but not the cache
files numba wrote beside them.  Checking each kernel's index once, when the kernels load,
costs a few small file reads; an index that does not unpickle is removed and recompiled.
"""

from __future__ import annotations

import os
import pickle

__all__ = ["drop_stale_indexes"]


def drop_stale_indexes(dispatchers) -> list[str]:
    """Remove the cache index of each dispatcher that cannot be unpickled; return the paths removed."""
    removed = []
    for disp in dispatchers:
        path = getattr(getattr(getattr(disp, "_cache", None), "_cache_file", None), "_index_path", None)
        if not path:
            continue
        try:
            with open(path, "rb") as fh:
                pickle.load(fh)  # numba's version tag
                pickle.loads(fh.read())
        except FileNotFoundError:
            continue
        except Exception:  # a type that moved or vanished, a truncated file: numba would fail the same way
            try:
                os.remove(path)
                removed.append(path)
            except OSError:
                pass
    return removed
