"""Decode and place: one nogil call decodes a call's frames and copies their rectangles out.

Frames are addressed by raw addresses (file mapping + offset, decoded buffer), so one
kernel call serves one image, a stack of images or a batch of many files.
``engine.py`` builds the records, holds every buffer alive across the call and checks
all ranges before; kernels trust their input.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from rumimm.kernels import native as _native  # registers geozl's decoder symbols before any kernel loads
from rumimm.kernels.plan import P_CX, P_CY, P_DX, P_DY, P_FH, P_FW, P_FX, P_FY, P_ITEM, P_NBYTES, P_SLOT

#: A frame decoded without error but to another byte count (same code as ``_native``).
STATUS_SIZE_MISMATCH = _native.STATUS_SIZE_MISMATCH


@intrinsic
def _voidptr(typingctx, addr):
    """Reinterpret an integer address as ``void*`` (cacheable: no constant is baked in)."""
    sig = types.voidptr(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _bytes_at(addr, n):
    """``n`` bytes at a raw address as a uint8 array (no ownership)."""
    return carray(_voidptr(np.uint64(addr)), (n,), np.uint8)


@intrinsic
def _fetch_add(typingctx, arr, idx, val):
    """Atomically add ``val`` to ``arr[idx]`` (int64) and return the old value."""
    sig = types.int64(arr, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]])
        return builder.atomic_rmw("add", ptr, args[2], "monotonic")

    return sig, codegen


@intrinsic
def _memcpy(typingctx, dst, src, n):
    """memcpy(dst, src, n) on raw addresses (llvm.memcpy: the fastest copy LLVM knows)."""
    sig = types.void(types.uint64, types.uint64, types.int64)

    def codegen(context, builder, signature, args):
        d = builder.inttoptr(args[0], cgutils.voidptr_t)
        s = builder.inttoptr(args[1], cgutils.voidptr_t)
        cgutils.raw_memcpy(builder, d, s, args[2], 1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _copy_rows(frame, base, rowbytes, fy, fx, cy, cx, ys, xs, isz, dst, row_stride, dy, dx):
    """Copy a (cy, cx) rectangle of one plane of a decoded frame (address ``frame``)
    to the rows starting at address ``dst`` (``row_stride`` bytes apart)."""
    if xs == 1:
        nbytes = cx * isz
        for r in range(cy):
            s = frame + base + (fy + r * ys) * rowbytes + fx * isz
            _memcpy(np.uint64(dst + (dy + r) * row_stride + dx * isz), np.uint64(s), nbytes)
    else:
        step = xs * isz
        for r in range(cy):
            s = frame + base + (fy + r * ys) * rowbytes + fx * isz
            d = dst + (dy + r) * row_stride + dx * isz
            for c in range(cx):
                _memcpy(np.uint64(d + c * isz), np.uint64(s + c * step), isz)


class Frames(NamedTuple):
    """The frames of one engine call, one group (entries sharing a frame) each.

    Group g takes its compressed frame from address ``src[fidx[g]]`` (``size[fidx[g]]``
    bytes) and its decoded bytes at address ``dec[g]`` (0: a scratch slot); it is
    decoded only when ``need[g]`` (else it is there already, from the cache); its copy
    entries are ``plan[gstart[g]:gstart[g + 1]]``; ``status[g]`` receives the decoded
    byte count or a negative code.  A new frame bound for a scratch slot whose one entry is
    the whole frame, landing on whole, contiguous output rows (a tile-aligned window as wide
    as the tile, or any tile-aligned read of a one-column grid), decodes straight into the
    output instead (``direct[g]`` = 1): no scratch, no copy.
    """

    src: np.ndarray  # uint64: compressed frame addresses
    size: np.ndarray  # uint64: compressed frame byte counts
    fidx: np.ndarray  # int64: group -> index into src and size
    dec: np.ndarray  # uint64: decoded frame address per group, 0 for a scratch slot
    need: np.ndarray  # uint8: 1 = decode the group's frame
    gstart: np.ndarray  # int64: first plan entry of each group, and the end
    status: np.ndarray  # int64: out, per group
    direct: np.ndarray  # uint8: out, per group: 1 = decoded straight into the output (a whole, aligned frame)


class Placement(NamedTuple):
    """Where decoded frames go: the plan, the output and how samples are read."""

    plan: np.ndarray  # int64 (entries, PLAN_COLS), grouped by frame
    bands: np.ndarray  # int64: the band of each output slot
    out: np.ndarray  # uint8 (items, slots, rows, row bytes)
    ys: int  # row step
    xs: int  # column step
    itemsize: int
    mask: int  # 0xFF, or the low-bit mask of sub-byte samples
    verify: bool  # OpenZL checksums


@njit(cache=True, nogil=True, inline="always")
def _run_group(g, frames, place, scratch, stride, slot):
    """Decode group ``g``'s frame (unless cached), then copy each of its entries."""
    plan, bands, out, ys, xs, isz, mask, verify = place
    gstart, status = frames.gstart, frames.status
    head = gstart[g]
    n = plan[head, P_NBYTES]
    base = np.int64(out.ctypes.data)
    s_item, s_slot, s_row = out.strides[0], out.strides[1], out.strides[2]
    addr = frames.dec[g]
    if addr == 0 and frames.need[g]:
        # a whole tile frame whose rows are contiguous in the output decodes straight into it: no copy
        e = plan[head]
        if (gstart[g + 1] - head == 1 and ys == 1 and xs == 1 and e[P_SLOT] >= 0 and e[P_FY] == 0 and e[P_FX] == 0
                and e[P_CY] == e[P_FH] and e[P_CX] == e[P_FW] and e[P_DX] == 0 and s_row == e[P_FW] * isz
                and out.strides[3] == 1):
            dst = base + e[P_ITEM] * s_item + e[P_SLOT] * s_slot + e[P_DY] * s_row
            if dst % 8 == 0:  # the decoder's alignment rule (a caller's ``out`` may be offset)
                addr = np.uint64(dst)
                frames.direct[g] = 1
    if addr == 0:
        addr = np.uint64(scratch.ctypes.data) + np.uint64(slot * stride)
    if frames.need[g]:
        f = frames.fidx[g]
        frame = _bytes_at(addr, n)
        got = _native.decode_one(_bytes_at(frames.src[f], frames.size[f]), frame, verify)
        if got != n:
            status[g] = got if got < 0 else STATUS_SIZE_MISMATCH
            return False
        if mask != 0xFF:
            m8 = np.uint8(mask)
            for i in range(n):
                frame[i] &= m8
    status[g] = n
    if frames.direct[g]:
        return True
    iaddr = np.int64(addr)
    for j in range(head, gstart[g + 1]):
        e = plan[j]
        rowbytes = e[P_FW] * isz
        item = base + e[P_ITEM] * s_item
        slot0, nslots, plane = e[P_SLOT], 1, 0  # a tile frame: one plane, to one slot
        if slot0 < 0:  # a cell frame: the selected band planes, to every slot
            slot0, nslots, plane = 0, bands.shape[0], e[P_FH] * rowbytes
        for s in range(nslots):  # one copy site: each inlined copy costs compile time on a first run
            _copy_rows(iaddr, bands[s] * plane, rowbytes, e[P_FY], e[P_FX], e[P_CY], e[P_CX], ys, xs, isz,
                       item + (slot0 + s) * s_slot, s_row, e[P_DY], e[P_DX])
    return True


@njit(cache=True, nogil=True)
def decode_copy(frames, place, scratch, stride, counter, slot):
    """Run the groups of ``frames`` on the calling thread, without the GIL, taking them one at a
    time from ``counter[0]`` (int64, atomic); returns the first failed group it ran, or -1.

    Each group's frame is decoded (at its ``dec`` address, or, when that is 0, in slot
    ``slot`` of ``scratch``, slots ``stride`` bytes apart), sub-byte samples are masked
    to their low bits, and each entry's rectangle is copied into ``place.out`` (uint8,
    4-D: item, slot, row, column byte).  A failed group copies nothing.

    One thread with a counter at 0 runs every group.  Several threads run it at once on
    one ``counter`` (each with its own scratch ``slot``) until every group is taken; a
    thread that starts late takes fewer.  They share nothing but the output, where their
    rectangles never overlap.  (One kernel for both: each kernel costs compile time.)
    """
    n = frames.gstart.shape[0] - 1
    bad = -1
    while True:
        g = _fetch_add(counter, 0, 1)
        if g >= n:
            return bad
        ok = _run_group(g, frames, place, scratch, stride, slot)
        if not ok and bad < 0:
            bad = g
