"""The frame cache (rumimm.reader.cache): code that runs while it holds its lock may call it again."""

from __future__ import annotations

import threading
import weakref

import numpy as np

from rumimm.reader.cache import FrameCache


class _Buffer(bytearray):
    """A buffer that can carry a finaliser (plain bytearrays take no weak references)."""


def test_a_finaliser_that_runs_while_put_many_evicts_may_call_the_cache():
    # An image's finaliser calls discard_owner.  It runs whenever its image becomes garbage:
    # also inside put_many, when an eviction frees the last array keeping it alive or an
    # allocation there starts a garbage collection.  With a plain lock that call waited on the
    # lock its own thread held, for ever (seen in a DataLoader-style forked worker).
    cache = FrameCache(400)  # frames of up to 100 bytes are kept
    buf = _Buffer(100)
    weakref.finalize(buf, cache.discard_owner, "closed image")
    cache.put_many([("closed image", 0)], [np.frombuffer(buf, np.uint8)])  # the cache holds the last reference
    cache.put_many([("open image", i) for i in range(3)], [np.zeros(100, np.uint8) for _ in range(3)])  # full
    del buf
    done = threading.Event()

    def evict():
        # two new frames evict two old ones: the first evicted array is freed (and the
        # finaliser runs) when the loop takes the second, under the cache's lock
        keys = [("other", i) for i in range(2)]
        cache.put_many(keys, [np.zeros(100, np.uint8) for _ in keys])
        done.set()

    worker = threading.Thread(target=evict, daemon=True)  # a deadlock fails the test instead of hanging it
    worker.start()
    worker.join(timeout=10)
    assert done.is_set(), "put_many deadlocked on a finaliser that called the cache"
    assert len(cache) == 4 and cache.nbytes == 400
    assert cache.get(("closed image", 0)) is None and cache.get(("open image", 0)) is None
