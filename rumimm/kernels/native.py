"""GIL-free OpenZL frame decoding through geozl's shared library.

``openzl.ext.DCtx.decompress`` holds the GIL, so Python threads cannot decode frames
in parallel.  geozl ships ``libgeozl.so`` (OpenZL linked in, geozl's decoders
registered) with a plain C entry point that decodes any single-output OpenZL frame,
built-in codecs or geozl codecs, straight into a caller buffer::

    int geozl_2d_decompress_c(const void *frame, size_t frame_size,
                              void *dst, size_t dst_capacity, size_t *out_size,
                              int verify, char *err_ctx, size_t err_ctx_size);
    size_t geozl_2d_frame_dsize_c(const void *frame, size_t frame_size);

It returns 0 or an OpenZL ``ZL_ErrorCode`` and creates, uses and frees one
``ZL_DCtx`` per call (no globals, no thread-local state), so it is safe to call
from many threads at once.  ``verify=0`` turns both checksum checks (compressed
and content) off; any other value keeps OpenZL's defaults, which check both.
``*out_size`` is the decoded byte count; the output type and element width are
not reported.  ``geozl_2d_frame_dsize_c`` returns the decoded size a frame
declares, or 0 for an unreadable frame.

``codec.geozl_lib`` finds and opens the library (numba-free: small reads call it
through ctypes).  The kernels here bind the same symbols *by name*: an ``@intrinsic`` declares the
external function in the LLVM module and numba resolves it when the code is
linked, from a cache file or fresh.  Nothing process-specific (no ctypes or cffi
function pointer) is baked into the code, so ``cache=True`` works.  The library
is opened once with ``RTLD_LOCAL`` (by ``geozl_lib``) and kept for the life of the process, and only
its two entry points are registered with LLVM (``llvmlite.binding.add_symbol``,
which LLVM searches before anything else); ``load_library_permanently`` would
work too but opens it ``RTLD_GLOBAL``, exporting libgeozl's bundled zstd and
OpenZL symbols to every library loaded later.

The symbols are registered at import, before any kernel is compiled or loaded
from the cache.  Without libgeozl they are bound to stubs returning
:data:`STATUS_UNAVAILABLE` (a kernel linked against an unresolved symbol would
crash the process); :func:`available` says which, and a reader falls back to
``openzl.ext`` when it is False.

Output buffers must be aligned to the frame's element width (8 bytes always
suffices), else the frame fails with ``-6``.  ``decode_one`` is ``nogil`` and keeps
no state, so the read engine's threads call it at once (``kernels.decode_copy``).

Statuses: a kernel returns the decoded byte count (>= 0) or a negative code:
``-ZL_ErrorCode`` (1..99) for an OpenZL failure, or one of the ``STATUS_*``
values below.  :func:`status_message` turns a code into words; the caller raises.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from llvmlite import binding as _llvm
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from rumimm.codec.geozl_lib import (
    DECOMPRESS,
    DECOMPRESS_T,
    DSIZE,
    DSIZE_T,
    STATUS_SIZE_MISMATCH,
    STATUS_UNAVAILABLE,
    functions,
    library_path,
    status_message,
)

__all__ = [
    "STATUS_SIZE_MISMATCH",
    "STATUS_UNAVAILABLE",
    "available",
    "decode_one",
    "library_path",
    "status_message",
]

_lock = threading.Lock()
_stubs: tuple | None = None
_registered = False


def _register(fns) -> None:
    for name, fn in zip((DECOMPRESS, DSIZE), fns, strict=True):
        _llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)


def _load() -> bool:
    """Register libgeozl's two entry points with LLVM (``geozl_lib.functions`` opens it).

    When the library is missing the symbols are bound to stubs that return
    :data:`STATUS_UNAVAILABLE` (decode) and 0 (size), because a kernel linked
    against an unresolved symbol crashes the process when called.
    """
    global _stubs, _registered
    with _lock:
        if not _registered:
            fns = functions()
            if fns is None:
                _stubs = (DECOMPRESS_T(lambda *args: -STATUS_UNAVAILABLE), DSIZE_T(lambda *args: 0))
                fns = _stubs  # ctypes callbacks must outlive every caller
            _register(fns)
            _registered = True
    return _stubs is None


def available() -> bool:
    """Return True when libgeozl is loaded, False when the kernels only report
    :data:`STATUS_UNAVAILABLE`."""
    return _load()


# Register the symbols now: a kernel loaded from the cache links against them.
_load()

# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------

_size_t = ir.IntType(64)
_int = ir.IntType(32)
_void_p = ir.IntType(8).as_pointer()


@intrinsic
def _zl_decompress(typingctx, src, src_size, dst, capacity, verify):
    """Call geozl_2d_decompress_c on raw addresses; return bytes or -ZL_ErrorCode."""
    sig = types.int64(types.uintp, types.uintp, types.uintp, types.uintp, types.intc)

    def codegen(context, builder, signature, args):
        src_v, size_v, dst_v, cap_v, verify_v = args
        fnty = ir.FunctionType(
            _int, [_void_p, _size_t, _void_p, _size_t, _size_t.as_pointer(), _int,
                   _void_p, _size_t])
        fn = cgutils.get_or_insert_function(builder.module, fnty, DECOMPRESS)
        out = cgutils.alloca_once_value(builder, _size_t(0))
        rc = builder.call(fn, [
            builder.inttoptr(src_v, _void_p), size_v,
            builder.inttoptr(dst_v, _void_p), cap_v, out, verify_v,
            _void_p(None), _size_t(0)])
        ok = builder.icmp_signed("==", rc, _int(0))
        failed = builder.neg(builder.sext(rc, _size_t))
        return builder.select(ok, builder.load(out), failed)

    return sig, codegen


@njit(cache=True, nogil=True)
def decode_one(src, dst, verify=True):
    """Decode one frame ``src`` (uint8[:]) into ``dst`` (uint8[:], its full size).

    Returns the decoded byte count, or a negative status.  The decoder never
    writes past ``dst.size``: a frame that decodes to more fails with ``-5``
    (dstCapacity_tooSmall).  ``dst`` must be aligned to the frame's element
    width (8 bytes is always enough), else ``-6`` (userBuffer_alignmentIncorrect).
    ``verify`` checks the frame's compressed and content checksums.
    """
    if src.size == 0:
        return -3  # -ZL_ErrorCode_srcSize_tooSmall
    return _zl_decompress(src.ctypes.data, src.size, dst.ctypes.data, dst.size,
                          np.intc(1 if verify else 0))
