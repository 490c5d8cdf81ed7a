"""The one planner: which frames a read needs, which the cache holds, where new ones decode, and finishing.

Every read (a chip, a window, chips from many files, whole frames) takes the same steps,
whatever executes the decoding:

1. :func:`plan_frames`: the read's frames, each once (its source, index and decoded size);
   the cache's hits; whether the new frames are kept (the cache's admission rule applies to
   the read's new bytes as a whole); a buffer for each new frame: an array of its own when
   the cache keeps it, else a slot of this thread's scratch memory.
2. :func:`check_new`: each new frame's OpenZL header, once per open image.
3. An executor decodes the new frames into their buffers and places the rectangles:
   ``engine`` (numba kernels, for larger reads) or ``small_reads`` (geozl's C decoder through
   ctypes, numpy placement, for chips and whole frames).  Both get frame bytes only through
   ``Store.get_ranges`` (``source.frame_bytes`` for a read spanning several files).
4. :func:`finish`: the first failure as one ``CodecError``; the new frames into the cache.
"""

from __future__ import annotations

import numpy as np

from rumimm.reader.source import align, thread_scratch

__all__ = ["FrameBatch", "check_new", "finish", "plan_frames", "uncached"]


class FrameBatch:
    """The frames of one read, each once, and where each one's decoded bytes are or will be.

    Per frame (a "group": every rectangle cut from it): ``owners`` (index into
    ``sources``), ``frames`` (its index in that file), ``sizes`` (decoded bytes),
    ``decoded`` (the cached array, or the buffer it decodes into) and ``addresses`` (ints,
    where ``decoded`` starts).  ``missing`` lists the groups to decode; ``store`` says
    whether the cache keeps them.  Frames the cache does not keep share ``scratch``: slot
    ``i % slots`` of ``stride`` bytes for the i-th missing frame.
    """

    __slots__ = (
        "addresses",
        "decoded",
        "frame_array",
        "frames",
        "missing",
        "owners",
        "scratch",
        "sizes",
        "slots",
        "sources",
        "store",
        "stride",
    )

    def __init__(self, sources, owners, frames, sizes):
        self.sources = sources
        self.owners = owners
        self.frames = frames
        self.frame_array = None  # the frames as int64, when the executor has them so (checks vectorised)
        self.sizes = sizes
        self.decoded: list = [None] * len(frames)
        self.addresses = [0] * len(frames)
        self.missing: list[int] = []
        self.store = False
        self.scratch = None
        self.stride = 0
        self.slots = 0

    def source(self, g: int):
        return self.sources[self.owners[g]]


def plan_frames(sources, owners: list[int], frames: list[int], sizes: list[int], slots: int | None = None,
                own: bool = False, by_slot: bool = False) -> FrameBatch:
    """Look the frames up in the cache and give every new one a buffer.

    ``slots``: how many new frames must be held at once when the cache does not keep
    them (one per decoding thread for the kernels, which place a frame as soon as it is
    decoded); None holds all of them (decode first, place after).  ``own``: every frame
    decodes into a new array the caller keeps; the cache is neither asked nor filled.
    ``by_slot``: the executor finds a new frame's scratch slot itself (the kernels: slot
    ``thread``), so frames the cache does not keep get no view and their address stays 0;
    a read of many frames then costs no Python per frame here.
    """
    batch = FrameBatch(sources, owners, frames, sizes)
    if own:
        for g, size in enumerate(sizes):
            buf = np.empty(size, np.uint8)
            batch.decoded[g] = buf
            batch.addresses[g] = buf.ctypes.data
        batch.missing.extend(range(len(frames)))
        return batch
    hits = _lookup(sources, owners, frames)
    decoded, addresses = batch.decoded, batch.addresses
    if hits is None:  # no cache: every frame is new
        missing = batch.missing = list(range(len(frames)))
    else:
        missing = batch.missing
        for g, hit in enumerate(hits):
            if hit is None:
                missing.append(g)
            else:
                decoded[g] = hit[0]
                addresses[g] = hit[1]
    if not missing:
        return batch
    new_bytes = sum(sizes) if len(missing) == len(sizes) else sum(sizes[g] for g in missing)
    batch.store = hits is not None and all(s.cache is not None and s.cache.admits(new_bytes) for s in sources)
    if batch.store:
        for g in missing:
            buf = np.empty(sizes[g], np.uint8)
            decoded[g] = buf
            addresses[g] = buf.ctypes.data
        return batch
    n = len(missing) if slots is None else max(1, min(slots, len(missing)))
    stride = align(max(sizes) if len(missing) == len(sizes) else max(sizes[g] for g in missing))
    scratch, base = thread_scratch(stride * n)
    batch.scratch, batch.stride, batch.slots = scratch, stride, n
    if by_slot:
        return batch
    for i, g in enumerate(missing):
        at = (i % n) * stride
        decoded[g] = scratch[at:at + sizes[g]]
        addresses[g] = base + at
    return batch


def check_new(batch: FrameBatch, raw=None, groups=None) -> None:
    """Check each new frame's OpenZL header (once per open image); ``raw[g]``: its bytes when read already,
    else they are read from its store while the frame is unchecked.

    ``groups``: only these new frames (default all).
    """
    from rumimm.reader.frame_checks import check_header  # OpenZL loads with the first pixel read, not at open

    todo = batch.missing if groups is None else groups
    if len(batch.sources) == 1 and batch.frame_array is not None and len(todo) > 1:
        # one file: its unchecked frames found by one array lookup, not a test per frame (a read is mostly checked)
        todo = np.asarray(todo, np.intp)
        todo = todo[batch.sources[0].header_checked[batch.frame_array[todo]] == 0].tolist()
    for g in todo:
        fs, k = batch.source(g), batch.frames[g]
        if fs.header_checked[k]:  # a batch re-reads mostly checked frames: no view built for them
            continue
        frame = raw[g] if raw is not None and g in raw else None
        check_header(fs, k, frame, batch.sizes[g])


def finish(batch: FrameBatch, bad: int = -1, status: int = 0) -> None:
    """Raise the failure of group ``bad`` (its decoder status), or keep the new frames in the cache."""
    if bad >= 0:
        from rumimm.reader.frame_checks import frame_error

        raise frame_error(batch.source(bad), batch.frames[bad], int(status))
    if not (batch.store and batch.missing):
        return
    by_cache: dict = {}
    for g in batch.missing:
        fs = batch.source(g)
        keys, arrays, addrs = by_cache.setdefault(id(fs.cache), (fs.cache, [], [], []))[1:]
        keys.append((fs.token, batch.frames[g]))
        arrays.append(batch.decoded[g])
        addrs.append(batch.addresses[g])
    for cache, keys, arrays, addrs in by_cache.values():
        cache.put_many(keys, arrays, addrs)


def uncached(sources, owners: list[int], frames: list[int]) -> list[int]:
    """The indices of the frames (of ``sources[owners[i]]``) no cache holds: what a read must get bytes for."""
    hits = _lookup(sources, owners, frames)
    return list(range(len(frames))) if hits is None else [i for i, h in enumerate(hits) if h is None]


def _lookup(sources, owners, frames):
    """(array, address) or None per frame from the cache, or None when no source caches."""
    first = sources[0].cache
    if len(sources) == 1:
        if first is None:
            return None
        token = sources[0].token
        return first.get_many([(token, k) for k in frames])
    if all(s.cache is first for s in sources):
        if first is None:
            return None
        return first.get_many([(sources[o].token, k) for o, k in zip(owners, frames, strict=True)])
    return [None if sources[o].cache is None else sources[o].cache.get((sources[o].token, k))
            for o, k in zip(owners, frames, strict=True)]
