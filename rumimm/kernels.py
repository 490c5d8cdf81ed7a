"""numba kernels: the batch blob check, and the read engine's window planning and
decode-and-copy.

Kernels take arrays and scalars and return arrays or status codes; the Python
layers above (``blob.py``, ``engine.py``) validate arguments first and turn codes
into errors.  Only ``engine.load`` imports this module (numba loads with it).
All are compiled with ``cache=True`` so a fresh process pays no JIT cost once the
cache is warm.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .blob import (  # noqa: F401  (the status codes, named once in blob.py)
    BAD_COUNT_BITS, BAD_MAGIC, BAD_PAIR, BAD_SIZE, BAD_UNIT, BAD_VERSION, COUNT_OVERFLOW, EMPTY_IMAGE, HEADER_SIZE,
    MAGIC, MAX_FRAMES, NOT_MIN, NOT_MIN_BITS, OK, PADDING_BITS, SINGLE_FRAME_BITS, TOO_MANY_FRAMES, TOO_SHORT,
    UINT32_MAX, VERSION, ZERO_BANDS, ZERO_COUNT, ZERO_TILE)


@njit(cache=True, nogil=True, inline="always")
def _u(buf, pos, nbytes):
    """Little-endian unsigned integer of ``nbytes`` bytes at ``pos``."""
    v = np.uint64(0)
    for j in range(nbytes):
        v |= np.uint64(buf[pos + j]) << np.uint64(8 * j)
    return v


@njit(cache=True, nogil=True, inline="always")
def _residual(packed, i, bits):
    """Residual ``i``: ``bits`` bits from bit ``i * bits``, LSB first, staying in ``packed``."""
    lo = np.int64(i) * bits
    byte = lo >> 3
    shift = lo & 7
    need = (shift + bits + 7) >> 3
    v = np.uint64(0)
    for j in range(need):
        v |= np.uint64(packed[byte + j]) << np.uint64(8 * j)
    v >>= np.uint64(shift)
    if bits < 64:
        v &= (np.uint64(1) << np.uint64(bits)) - np.uint64(1)
    return v


@njit(cache=True, nogil=True)
def _bit_length(x):
    n = 0
    while x:
        x >>= np.uint64(1)
        n += 1
    return n


@njit(cache=True, nogil=True)
def _ceildiv(a, b):
    return -(-a // b)


@njit(cache=True, nogil=True)
def check_blobs(data, starts, valid_pairs, fields, status):
    """Parse and check every blob ``data[starts[i]:starts[i+1]]``.

    ``fields`` is int64 (M, 12): width, length, tile_width, tile_length, bands,
    bits_per_sample, sample_format, frame_unit, count_min, count_bits, n_frames,
    blob_size.  ``status[i]`` receives OK or the first rule broken.  Checks every
    reader MUST of the spec and the canonical encoding (min residual 0, minimal
    width), without allocating per blob.
    """
    m = starts.shape[0] - 1
    for i in range(m):
        s = starts[i]
        size = starts[i + 1] - s
        fields[i, 11] = size
        if size < HEADER_SIZE:
            status[i] = TOO_SHORT
            continue
        magic = _u(data, s, 4)
        version = _u(data, s + 4, 2)
        width = np.int64(_u(data, s + 6, 4))
        length = np.int64(_u(data, s + 10, 4))
        tw = np.int64(_u(data, s + 14, 2))
        tl = np.int64(_u(data, s + 16, 2))
        bands = np.int64(_u(data, s + 18, 2))
        bps = np.int64(data[s + 20])
        sf = np.int64(data[s + 21])
        unit = np.int64(data[s + 22])
        cmin = np.int64(_u(data, s + 23, 4))
        bits = np.int64(data[s + 27])
        fields[i, 0] = width
        fields[i, 1] = length
        fields[i, 2] = tw
        fields[i, 3] = tl
        fields[i, 4] = bands
        fields[i, 5] = bps
        fields[i, 6] = sf
        fields[i, 7] = unit
        fields[i, 8] = cmin
        fields[i, 9] = bits
        if magic != MAGIC:
            status[i] = BAD_MAGIC
            continue
        if version != VERSION:
            status[i] = BAD_VERSION
            continue
        if tw == 0 or tl == 0:
            status[i] = ZERO_TILE
            continue
        if bands == 0:
            status[i] = ZERO_BANDS
            continue
        if valid_pairs[sf, bps] == 0:
            status[i] = BAD_PAIR
            continue
        if unit > 1:
            status[i] = BAD_UNIT
            continue
        if bits > 32:
            status[i] = BAD_COUNT_BITS
            continue
        if width == 0 or length == 0:
            status[i] = EMPTY_IMAGE
            continue
        across = _ceildiv(width, tw)
        down = _ceildiv(length, tl)
        if across > MAX_FRAMES // down:  # the int64 product below would overflow
            status[i] = TOO_MANY_FRAMES
            continue
        g = across * down
        n = g * bands if unit == 0 else g
        fields[i, 10] = n
        if n > MAX_FRAMES:
            status[i] = TOO_MANY_FRAMES
            continue
        packed_size = _ceildiv(n * bits, 8)
        if size != HEADER_SIZE + packed_size:
            status[i] = BAD_SIZE
            continue
        if cmin == 0:
            status[i] = ZERO_COUNT
            continue
        if n == 1 and bits != 0:
            status[i] = SINGLE_FRAME_BITS
            continue
        used = n * bits
        if used & 7:
            last = data[s + HEADER_SIZE + packed_size - 1]
            if last >> (used & 7):
                status[i] = PADDING_BITS
                continue
        if bits:
            packed = data[s + HEADER_SIZE : s + size]
            rmin = _residual(packed, 0, bits)
            rmax = rmin
            for k in range(1, n):
                r = _residual(packed, k, bits)
                if r < rmin:
                    rmin = r
                if r > rmax:
                    rmax = r
            if rmin != 0:
                status[i] = NOT_MIN
                continue
            if _bit_length(rmax) != bits:
                status[i] = NOT_MIN_BITS
                continue
            if np.uint64(cmin) + rmax > np.uint64(UINT32_MAX):
                status[i] = COUNT_OVERFLOW
                continue
        status[i] = OK


# ---------------------------------------------------------------------------------------
# Window planning and the decode-and-copy engine of the reader
# ---------------------------------------------------------------------------------------
#
# A read is planned as a list of *copy entries*, one per (frame, output slot): which
# rectangle of a decoded frame goes where in the output block.  Entries that share a
# frame form a *group*; the engine decodes each group's frame once (or takes it from the
# cache) and copies every entry of the group while the frame is still hot in the CPU
# cache.  Frames are addressed by raw addresses (file mapping + offset, decoded buffer),
# so one kernel call serves one image, a stack of images or a batch of many files.
# ``reader.py`` builds the arrays, holds every buffer alive across the call and checks
# all ranges before; kernels trust their input.

from numba import carray, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from . import _native  # noqa: E402  (registers geozl's decoder symbols before any kernel loads)

#: Columns of a plan (int64, one row per copy entry).
P_FRAME = 0  # frame index k inside its file
P_FH = 1  # actual frame height (edge frames are cut)
P_FW = 2  # actual frame width
P_FY = 3  # first selected row inside the frame
P_FX = 4  # first selected column inside the frame
P_CY = 5  # selected rows inside the frame
P_CX = 6  # selected columns inside the frame
P_DY = 7  # destination row of the first selected row
P_DX = 8  # destination column of the first selected column
P_SLOT = 9  # tile frames: destination band slot; cell frames: -1 (all slots)
P_PLANES = 10  # cell frames: bands in the frame (B); tile frames: 0
P_NBYTES = 11  # decoded byte count of the frame
P_ITEM = 12  # destination item (first axis of the 4-D output)
P_IMAGE = 13  # which image (file) of the call the frame belongs to
PLAN_COLS = 14

#: Columns of a grid row handed to the planner (int64).
G_TILE_LENGTH = 0
G_TILE_WIDTH = 1
G_TILES_ACROSS = 2
G_TILES_DOWN = 3
G_BANDS = 4
G_CELL = 5
G_LENGTH = 6
G_WIDTH = 7
GRID_COLS = 8

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


@njit(cache=True, nogil=True)
def _segments(start, step, count, tile, size):
    """Split the selection ``start + i * step`` (i < count) at tile edges.

    Returns int64 (m, 4): tile index, first index inside the tile, number of selected
    indices inside it, destination index of the first one.  Tiles without a selected
    index are skipped, so a large step decodes only the frames it touches.
    """
    if count == 0:
        return np.empty((0, 4), np.int64)
    last = start + (count - 1) * step
    t0 = start // tile
    t1 = last // tile
    out = np.empty((t1 - t0 + 1, 4), np.int64)
    m = 0
    for t in range(t0, t1 + 1):
        lo = t * tile
        hi = min(lo + tile, size) - 1
        # first i with start + i * step >= lo, last i with start + i * step <= hi
        i0 = 0 if lo <= start else (lo - start + step - 1) // step
        i1 = min((hi - start) // step, count - 1)
        if i0 > i1:
            continue
        out[m, 0] = t
        out[m, 1] = start + i0 * step - lo
        out[m, 2] = i1 - i0 + 1
        out[m, 3] = i0
        m += 1
    return out[:m]


@njit(cache=True, nogil=True)
def _plan_item(grid, bands, y0, ys, ny, x0, xs, nx, itemsize, item, image, out, m):
    """Append the copy entries of one window of one image to ``out`` from row ``m``."""
    tl = grid[G_TILE_LENGTH]
    tw = grid[G_TILE_WIDTH]
    ta = grid[G_TILES_ACROSS]
    nbands = grid[G_BANDS]
    cell = grid[G_CELL]
    rows = _segments(y0, ys, ny, tl, grid[G_LENGTH])
    cols = _segments(x0, xs, nx, tw, grid[G_WIDTH])
    nb = bands.shape[0]
    for i in range(rows.shape[0]):
        r = rows[i, 0]
        fh = min(tl, grid[G_LENGTH] - r * tl)
        for j in range(cols.shape[0]):
            c = cols[j, 0]
            fw = min(tw, grid[G_WIDTH] - c * tw)
            pos = r * ta + c
            reps = 1 if cell else nb
            for s in range(reps):
                e = out[m]
                if cell:
                    e[P_FRAME] = pos
                    e[P_SLOT] = -1
                    e[P_PLANES] = nbands
                    e[P_NBYTES] = nbands * fh * fw * itemsize
                else:
                    e[P_FRAME] = pos * nbands + bands[s]
                    e[P_SLOT] = s
                    e[P_PLANES] = 0
                    e[P_NBYTES] = fh * fw * itemsize
                e[P_FH] = fh
                e[P_FW] = fw
                e[P_FY] = rows[i, 1]
                e[P_FX] = cols[j, 1]
                e[P_CY] = rows[i, 2]
                e[P_CX] = cols[j, 2]
                e[P_DY] = rows[i, 3]
                e[P_DX] = cols[j, 3]
                e[P_ITEM] = item
                e[P_IMAGE] = image
                m += 1
    return m


@njit(cache=True, nogil=True, inline="always")
def _touched(start, step, count, tile):
    if count == 0:
        return 0
    return (start + (count - 1) * step) // tile - start // tile + 1


@njit(cache=True, nogil=True)
def plan_window(grid, bands, y0, ys, ny, x0, xs, nx, itemsize):
    """Copy entries (int64 (C, PLAN_COLS)) of one window of one image.

    ``grid`` is one int64 row of ``GRID_COLS``; ``bands`` (int64) the band of each
    output slot, in output order (unique); rows ``y0 + i * ys`` (i < ny) and columns
    ``x0 + i * xs`` (i < nx) with positive steps, all inside the image.  Entries come in
    frame-index order for ascending bands (file order), one per frame for tile frames
    and one per grid position for cell frames.
    """
    per = 1 if grid[G_CELL] else bands.shape[0]
    cap = _touched(y0, ys, ny, grid[G_TILE_LENGTH]) * _touched(x0, xs, nx, grid[G_TILE_WIDTH]) * per
    out = np.empty((cap, PLAN_COLS), np.int64)
    m = _plan_item(grid, bands, y0, ys, ny, x0, xs, nx, itemsize, 0, 0, out, 0)
    return out[:m]


@njit(cache=True, nogil=True)
def plan_batch(grids, images, bands, y0, ys, ny, x0, xs, nx, itemsize):
    """Copy entries of N equal-size windows: item n reads window (y0[n], x0[n]) of image
    ``images[n]`` whose grid row is ``grids[images[n]]``."""
    n = y0.shape[0]
    cap = 0
    for i in range(n):
        g = grids[images[i]]
        per = 1 if g[G_CELL] else bands.shape[0]
        cap += _touched(y0[i], ys, ny, g[G_TILE_LENGTH]) * _touched(x0[i], xs, nx, g[G_TILE_WIDTH]) * per
    out = np.empty((cap, PLAN_COLS), np.int64)
    m = 0
    for i in range(n):
        m = _plan_item(grids[images[i]], bands, y0[i], ys, ny, x0[i], xs, nx, itemsize, i, images[i], out, m)
    return out[:m]


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


@njit(cache=True, nogil=True)
def _run_group(g, src, size, fidx, dec, need, gstart, plan, bands, out, ys, xs, isz, mask, verify, scratch, stride,
               slot, status):
    """Decode group ``g``'s frame (unless cached), then copy each of its entries."""
    head = gstart[g]
    n = plan[head, P_NBYTES]
    addr = dec[g]
    if addr == 0:
        addr = np.uint64(scratch.ctypes.data) + np.uint64(slot * stride)
    if need[g]:
        f = fidx[g]
        frame = _bytes_at(addr, n)
        got = _native.decode_one(_bytes_at(src[f], size[f]), frame, verify)
        if got != n:
            status[g] = got if got < 0 else STATUS_SIZE_MISMATCH
            return False
        if mask != 0xFF:
            m8 = np.uint8(mask)
            for i in range(n):
                frame[i] &= m8
    status[g] = n
    base = np.int64(out.ctypes.data)
    s_item, s_slot, s_row = out.strides[0], out.strides[1], out.strides[2]
    iaddr = np.int64(addr)
    for j in range(head, gstart[g + 1]):
        e = plan[j]
        rowbytes = e[P_FW] * isz
        item = base + e[P_ITEM] * s_item
        if e[P_SLOT] >= 0:
            _copy_rows(iaddr, 0, rowbytes, e[P_FY], e[P_FX], e[P_CY], e[P_CX], ys, xs, isz,
                       item + e[P_SLOT] * s_slot, s_row, e[P_DY], e[P_DX])
        else:
            plane = e[P_FH] * rowbytes
            for s in range(bands.shape[0]):
                _copy_rows(iaddr, bands[s] * plane, rowbytes, e[P_FY], e[P_FX], e[P_CY], e[P_CX], ys, xs,
                           isz, item + s * s_slot, s_row, e[P_DY], e[P_DX])
    return True


@njit(cache=True, nogil=True)
def decode_copy(src, size, fidx, dec, need, gstart, plan, bands, out, ys, xs, isz, mask, verify, scratch, stride,
                status, first, last, step, slot):
    """Run groups ``range(first, last, step)`` on the calling thread, without the GIL.

    Group g (entries ``plan[gstart[g]:gstart[g+1]]``, all of one frame) takes its
    compressed frame from address ``src[fidx[g]]`` (``size[fidx[g]]`` bytes) and its
    decoded bytes (``plan[gstart[g], P_NBYTES]``) at address ``dec[g]``, or, when
    that is 0, in slot ``slot`` of ``scratch`` (slots ``stride`` bytes apart).  The
    frame is decoded there when ``need[g]`` (else it is already there, from the
    cache), sub-byte samples are masked to their low bits with ``mask``, and each
    entry's rectangle is copied into ``out`` (uint8, 4-D: item, slot, row, column
    byte).  ``status[g]`` becomes the decoded byte count or a negative code; a failed
    group copies nothing.  Returns the first failed group, or -1.

    Threads running the same call on disjoint groups with their own scratch slots
    share nothing but ``out``, where their rectangles never overlap.
    """
    bad = -1
    for g in range(first, last, step):
        ok = _run_group(g, src, size, fidx, dec, need, gstart, plan, bands, out, ys, xs, isz, mask, verify,
                        scratch, stride, slot, status)
        if not ok and bad < 0:
            bad = g
    return bad


@njit(cache=True, nogil=True)
def decode_copy_shared(src, size, fidx, dec, need, gstart, plan, bands, out, ys, xs, isz, mask, verify, scratch,
                       stride, status, counter, slot):
    """As :func:`decode_copy`, taking groups one at a time from ``counter[0]`` (atomic).

    Several threads run this at once on one ``counter`` (each with its own scratch
    ``slot``) until every group is taken; a thread that starts late takes fewer.
    Returns the first failed group this thread ran, or -1.
    """
    n = gstart.shape[0] - 1
    bad = -1
    while True:
        g = _fetch_add(counter, 0, 1)
        if g >= n:
            return bad
        ok = _run_group(g, src, size, fidx, dec, need, gstart, plan, bands, out, ys, xs, isz, mask, verify,
                        scratch, stride, slot, status)
        if not ok and bad < 0:
            bad = g
