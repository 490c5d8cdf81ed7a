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

The kernels here bind those symbols *by name*: an ``@intrinsic`` declares the
external function in the LLVM module and numba resolves it when the code is
linked, from a cache file or fresh.  Nothing process-specific (no ctypes or cffi
function pointer) is baked into the code, so ``cache=True`` works.  The library
is opened once with ``RTLD_LOCAL`` and kept for the life of the process, and only
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
import importlib.util
import os
import threading
from pathlib import Path

import numpy as np
from llvmlite import binding as _llvm
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = [
    "available",
    "library_path",
    "decode_one",
    "status_message",
    "STATUS_SIZE_MISMATCH",
    "STATUS_UNAVAILABLE",
]

# Codes of our own, below every -ZL_ErrorCode (those are -1..-99).
STATUS_SIZE_MISMATCH = -1001  # decoded fine, but not to the expected byte count
STATUS_UNAVAILABLE = -1004  # libgeozl could not be loaded

# ZL_ErrorCode, read from the DWARF of the libgeozl.so shipped with geozl 0.19.0.
_ZL_ERRORS = {
    1: "GENERIC",
    3: "srcSize_tooSmall",
    4: "srcSize_tooLarge",
    5: "dstCapacity_tooSmall",
    6: "userBuffer_alignmentIncorrect",
    7: "decompression_incorrectAPI",
    8: "userBuffers_invalidNum",
    9: "invalidName",
    10: "header_unknown",
    11: "frameParameter_unsupported",
    12: "corruption",
    13: "compressedChecksumWrong",
    14: "contentChecksumWrong",
    15: "outputs_tooNumerous",
    20: "compressionParameter_invalid",
    21: "parameter_invalid",
    22: "outputID_invalid",
    23: "invalidRequest_singleOutputFrameOnly",
    24: "outputNotCommitted",
    25: "outputNotReserved",
    26: "segmenter_inputNotConsumed",
    27: "segmenter_noSegments",
    30: "graph_invalid",
    31: "graph_nonserializable",
    32: "invalidTransform",
    33: "graph_invalidNumInputs",
    34: "graph_parser_malformedInput",
    35: "graph_parser_unhandledInput",
    40: "successor_invalid",
    41: "successor_alreadySet",
    42: "successor_invalidNumInputs",
    43: "inputType_unsupported",
    44: "graphParameter_invalid",
    50: "nodeParameter_invalid",
    51: "nodeParameter_invalidValue",
    52: "transform_executionFailure",
    53: "customNode_definitionInvalid",
    54: "node_unexpected_input_type",
    55: "node_invalid_input",
    56: "node_invalid",
    57: "nodeExecution_invalidOutputs",
    58: "nodeRegen_countIncorrect",
    60: "formatVersion_unsupported",
    61: "formatVersion_notSet",
    62: "node_versionMismatch",
    65: "dict_corruption",
    66: "dict_materialization",
    67: "noValidMaterialization",
    68: "dictNoRecord",
    70: "allocation",
    71: "internalBuffer_tooSmall",
    72: "integerOverflow",
    73: "stream_wrongInit",
    74: "streamType_incorrect",
    75: "streamCapacity_tooSmall",
    76: "streamParameter_invalid",
    80: "logicError",
    81: "temporaryLibraryLimitation",
}

_OWN_STATUS = {
    STATUS_SIZE_MISMATCH: "decoded to a different byte count than the frame should hold",
    STATUS_UNAVAILABLE: "libgeozl is not available",
}
_DECOMPRESS = "geozl_2d_decompress_c"
_DSIZE = "geozl_2d_frame_dsize_c"
_LIB_NAMES = ("libgeozl.so", "libgeozl.dylib", "geozl.dll")

# ---------------------------------------------------------------------------
# locating and loading the library (no geozl/openzl import)
# ---------------------------------------------------------------------------

_lock = threading.Lock()
_path: str | None = None
_path_searched = False
_cdll: ctypes.CDLL | None = None


def library_path() -> str | None:
    """Return the path of geozl's ``libgeozl`` shared library, or None.

    ``GEOZL_FULL_LIB`` (the variable geozl itself honours) overrides the search;
    otherwise the library is looked up in the ``_lib`` folder of the installed
    geozl package, found with ``importlib.util.find_spec`` without importing it.
    """
    global _path, _path_searched
    if _path_searched:
        return _path
    found = None
    override = os.environ.get("GEOZL_FULL_LIB")
    if override:
        found = override if Path(override).is_file() else None
    else:
        try:
            spec = importlib.util.find_spec("geozl")
        except (ImportError, ValueError):
            spec = None
        for folder in (spec.submodule_search_locations or []) if spec else []:
            for name in _LIB_NAMES:
                candidate = Path(folder) / "_lib" / name
                if candidate.is_file():
                    found = str(candidate)
                    break
            if found:
                break
    _path, _path_searched = found, True
    return found


_DECOMPRESS_T = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_size_t), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
_DSIZE_T = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
_stubs: tuple | None = None


def _register_stubs() -> None:
    """Bind the symbols to stubs that fail cleanly, so a kernel never jumps to 0."""
    global _stubs
    if _stubs is not None:
        return
    decompress = _DECOMPRESS_T(lambda *args: -STATUS_UNAVAILABLE)
    dsize = _DSIZE_T(lambda *args: 0)
    for name, fn in ((_DECOMPRESS, decompress), (_DSIZE, dsize)):
        _llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
    _stubs = (decompress, dsize)  # ctypes callbacks must outlive every caller


def _load() -> bool:
    """Open libgeozl once and register its two entry points with LLVM.

    When the library is missing the symbols are bound to stubs that return
    :data:`STATUS_UNAVAILABLE` (decode) and 0 (size), because a kernel linked
    against an unresolved symbol crashes the process when called.
    """
    global _cdll
    if _cdll is not None:
        return True
    with _lock:
        if _cdll is not None:
            return True
        if _stubs is not None:
            return False
        path = library_path()
        try:
            if path is None:
                raise OSError("libgeozl not found")
            lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
            decompress = getattr(lib, _DECOMPRESS)
            dsize = getattr(lib, _DSIZE)
        except (OSError, AttributeError):
            _register_stubs()
            return False
        for name, fn in ((_DECOMPRESS, decompress), (_DSIZE, dsize)):
            _llvm.add_symbol(name, ctypes.cast(fn, ctypes.c_void_p).value)
        decompress.restype = ctypes.c_int
        decompress.argtypes = list(_DECOMPRESS_T._argtypes_)
        dsize.restype = ctypes.c_size_t
        dsize.argtypes = list(_DSIZE_T._argtypes_)
        _cdll = lib  # held for the life of the process: never unloaded
        return True


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
        fn = cgutils.get_or_insert_function(builder.module, fnty, _DECOMPRESS)
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


# ---------------------------------------------------------------------------
# Python layer: messages
# ---------------------------------------------------------------------------


def status_message(code: int) -> str:
    """Describe a kernel status: ``"OpenZL: corruption"``, ``"frame runs past ..."``."""
    code = int(code)
    if code >= 0:
        return f"decoded {code} bytes"
    if code in _OWN_STATUS:
        return _OWN_STATUS[code]
    name = _ZL_ERRORS.get(-code, f"error code {-code}")
    return f"OpenZL: {name}"
