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
suffices), else the frame fails with ``-6``.  Threads: :func:`decode_many` runs
on numba's threading layer (``omp`` here: numba prefers tbb, then omp, then
workqueue); :func:`decode_frames` is the safe front door, see there.

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

import numba
import numpy as np
from llvmlite import binding as _llvm
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from ._env import env_int

__all__ = [
    "available",
    "library_path",
    "decode_one",
    "decode_many",
    "decode_serial",
    "frame_sizes",
    "decode_frames",
    "error_context",
    "status_message",
    "get_num_threads",
    "set_num_threads",
    "threading_layer",
    "STATUS_SIZE_MISMATCH",
    "STATUS_SOURCE_RANGE",
    "STATUS_DEST_RANGE",
    "STATUS_UNAVAILABLE",
]

# Codes of our own, below every -ZL_ErrorCode (those are -1..-99).
STATUS_SIZE_MISMATCH = -1001  # decoded fine, but not to the expected byte count
STATUS_SOURCE_RANGE = -1002  # offsets[i] + sizes[i] runs past the source buffer
STATUS_DEST_RANGE = -1003  # dst_offsets[i] + dst_sizes[i] runs past dst, or is negative
STATUS_UNAVAILABLE = -1004  # libgeozl could not be loaded (Python layer only)

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
    STATUS_SOURCE_RANGE: "frame runs past the end of the source buffer",
    STATUS_DEST_RANGE: "output slot runs past the end of the destination buffer",
    STATUS_UNAVAILABLE: "libgeozl is not available",
}

_ERROR_CONTEXT_CAPACITY = 1 << 28
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


@intrinsic
def _zl_frame_dsize(typingctx, src, src_size):
    """Call geozl_2d_frame_dsize_c: the decoded size a frame declares, 0 if unreadable."""
    sig = types.uint64(types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(_size_t, [_void_p, _size_t])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _DSIZE)
        return builder.call(fn, [builder.inttoptr(args[0], _void_p), args[1]])

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


@njit(cache=True, nogil=True, inline="always")
def _decode_slot(buf_base, nbuf, off, size, dst_base, ndst, doff, dsize, flag):
    """Range-check one frame and its slot, decode it, and return its status."""
    if size == 0 or off > nbuf or size > nbuf - off:
        return STATUS_SOURCE_RANGE
    if doff < 0 or dsize < 0 or doff > ndst or dsize > ndst - doff:
        return STATUS_DEST_RANGE
    got = _zl_decompress(buf_base + off, size, dst_base + np.uint64(doff),
                         np.uint64(dsize), flag)
    if got >= 0 and got != dsize:
        return STATUS_SIZE_MISMATCH
    return got


@njit(cache=True, nogil=True, parallel=True)
def decode_many(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status, verify=True):
    """Decode frame i of ``buf`` into its slot of ``dst``, all frames in parallel.

    Frame i is ``buf[offsets[i]:offsets[i] + sizes[i]]``; it is decoded into
    ``dst[dst_offsets[i]:dst_offsets[i] + dst_sizes[i]]`` with exactly that
    capacity.  ``status[i]`` becomes ``dst_sizes[i]`` on success, or a negative
    code; a frame that decodes to any other size is a failure
    (:data:`STATUS_SIZE_MISMATCH`, or ``-5`` when it would not fit).  Ranges are
    checked before any call, so a bad offset never reads or writes out of bounds.
    Each slot must be aligned to the element width (start slots on multiples of
    8 in an 8-byte aligned ``dst``), else that frame fails with ``-6``.
    Runs on numba's threading layer with numba's current thread count; prefer
    :func:`decode_frames`, which applies :func:`get_num_threads` and avoids the
    threading layer where it is unsafe (one thread, or a forked child).
    """
    nbuf = np.uint64(buf.size)
    ndst = np.int64(dst.size)
    flag = np.intc(1 if verify else 0)
    buf_base = buf.ctypes.data
    dst_base = dst.ctypes.data
    for i in prange(offsets.size):
        status[i] = _decode_slot(buf_base, nbuf, np.uint64(offsets[i]), np.uint64(sizes[i]),
                                 dst_base, ndst, np.int64(dst_offsets[i]),
                                 np.int64(dst_sizes[i]), flag)


@njit(cache=True, nogil=True)
def decode_serial(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status, verify=True):
    """:func:`decode_many` on the calling thread only, without numba's thread pool."""
    nbuf = np.uint64(buf.size)
    ndst = np.int64(dst.size)
    flag = np.intc(1 if verify else 0)
    buf_base = buf.ctypes.data
    dst_base = dst.ctypes.data
    for i in range(offsets.size):
        status[i] = _decode_slot(buf_base, nbuf, np.uint64(offsets[i]), np.uint64(sizes[i]),
                                 dst_base, ndst, np.int64(dst_offsets[i]),
                                 np.int64(dst_sizes[i]), flag)


@njit(cache=True, nogil=True)
def frame_sizes(buf, offsets, sizes, out):
    """Store in ``out[i]`` the decoded byte count frame i declares (0: unreadable).

    A frame outside ``buf`` also gets 0.  The size comes from the frame header and
    is not verified; use it to size buffers, then check the decode status.
    """
    nbuf = np.uint64(buf.size)
    base = buf.ctypes.data
    for i in range(offsets.size):
        off = np.uint64(offsets[i])
        size = np.uint64(sizes[i])
        if size == 0 or off > nbuf or size > nbuf - off:
            out[i] = 0
        else:
            out[i] = _zl_frame_dsize(base + off, size)


# ---------------------------------------------------------------------------
# Python layer: messages, threads, a checked batch call
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


def error_context(frame, capacity: int | None = None, verify: bool = True) -> str:
    """Decode ``frame`` once more through ctypes and return OpenZL's error text.

    For the slow path after a kernel reported a failure; "" when it decodes.
    """
    if not _load():
        return _OWN_STATUS[STATUS_UNAVAILABLE]
    src = np.frombuffer(frame, np.uint8)
    if capacity is None:
        declared = int(_cdll.geozl_2d_frame_dsize_c(src.ctypes.data, src.size))
        capacity = min(declared, _ERROR_CONTEXT_CAPACITY)  # a corrupt header may lie
    dst = np.empty((capacity + 7) // 8 + 1, np.uint64)
    out = ctypes.c_size_t(0)
    err = ctypes.create_string_buffer(512)
    rc = _cdll.geozl_2d_decompress_c(
        src.ctypes.data, src.size, dst.ctypes.data, capacity, ctypes.byref(out),
        int(bool(verify)), err, len(err))
    return "" if rc == 0 else err.value.decode("utf-8", "replace").strip()


# Process-wide thread count: numba's own setting is per calling thread.
_threads: int | None = None


def _default_threads() -> int:
    limit = numba.config.NUMBA_NUM_THREADS
    wanted = env_int("RUMIMM_NUM_THREADS", 1)
    return limit if wanted is None else min(wanted, limit)


def get_num_threads() -> int:
    """Return the number of threads the batch decoder uses.

    ``set_num_threads`` wins; else ``RUMIMM_NUM_THREADS`` (clamped to numba's
    ``NUMBA_NUM_THREADS``); else all of numba's threads (one per core by default).
    """
    return _threads if _threads is not None else _default_threads()


def set_num_threads(n: int) -> None:
    """Set the number of threads the batch decoder uses, for every calling thread.

    ``n`` must be in ``[1, numba.config.NUMBA_NUM_THREADS]``.
    """
    global _threads
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"number of threads must be an integer, got {type(n).__name__}")
    limit = numba.config.NUMBA_NUM_THREADS
    if not 1 <= int(n) <= limit:
        raise ValueError(f"number of threads must be in [1, {limit}], got {n}")
    _threads = int(n)
    numba.set_num_threads(_threads)


def threading_layer() -> str:
    """Return the numba threading layer in use ("workqueue", "omp" or "tbb")."""
    from numba.np.ufunc import parallel

    parallel._launch_threads()
    return numba.threading_layer()


def _apply_threads() -> None:
    wanted = get_num_threads()
    if numba.get_num_threads() != wanted:
        numba.set_num_threads(wanted)


# GNU OpenMP cannot run a parallel region in a child forked after the parent
# started its pool (numba terminates the child), and numba's workqueue layer
# aborts the process when two threads enter it at once.  decode_frames steers
# around both: serial in such a child, one caller at a time on workqueue.
_forked_after_omp = False
_workqueue_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _forked_after_omp
    from numba.np.ufunc import parallel

    if parallel._is_initialized and parallel._threading_layer == "omp":
        _forked_after_omp = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def decode_frames(buf, offsets, sizes, dst, dst_offsets, dst_sizes, *, verify=True):
    """Decode many frames with the configured thread count and return their statuses.

    Arguments as :func:`decode_many`, coerced to the types the kernel expects
    (``buf``/``dst`` 1-d contiguous uint8, ``offsets``/``sizes`` uint64,
    ``dst_offsets``/``dst_sizes`` int64).  With one thread, or in a child forked
    after the parent used GNU OpenMP, the frames are decoded by
    :func:`decode_serial` on the calling thread.  Returns the int64 status array;
    the caller raises on a negative entry.
    """
    if not available():
        raise RuntimeError("libgeozl is not available; decode with openzl.ext instead")
    buf = _as_bytes(buf, "buf", writable=False)
    dst = _as_bytes(dst, "dst", writable=True)
    offsets = np.ascontiguousarray(offsets, np.uint64)
    sizes = np.ascontiguousarray(sizes, np.uint64)
    dst_offsets = np.ascontiguousarray(dst_offsets, np.int64)
    dst_sizes = np.ascontiguousarray(dst_sizes, np.int64)
    n = offsets.size
    if not (offsets.ndim == sizes.ndim == dst_offsets.ndim == dst_sizes.ndim == 1):
        raise ValueError("offsets, sizes, dst_offsets and dst_sizes must be 1-d")
    if not (sizes.size == dst_offsets.size == dst_sizes.size == n):
        raise ValueError(
            f"offsets, sizes, dst_offsets and dst_sizes must have one length, got "
            f"{n}, {sizes.size}, {dst_offsets.size}, {dst_sizes.size}")
    status = np.empty(n, np.int64)
    verify = bool(verify)
    if n <= 1 or _forked_after_omp or get_num_threads() == 1:
        decode_serial(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status, verify)
        return status
    _apply_threads()
    if numba.threading_layer() == "workqueue":
        with _workqueue_lock:
            decode_many(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status, verify)
    else:
        decode_many(buf, offsets, sizes, dst, dst_offsets, dst_sizes, status, verify)
    return status


def _as_bytes(arr, name: str, *, writable: bool) -> np.ndarray:
    a = np.asarray(arr) if isinstance(arr, np.ndarray) else np.frombuffer(arr, np.uint8)
    if a.ndim != 1 or a.dtype != np.uint8 or not a.flags.c_contiguous:
        raise TypeError(f"{name} must be a 1-d contiguous uint8 array, got "
                        f"{a.dtype} with shape {a.shape}")
    if writable and not a.flags.writeable:
        raise ValueError(f"{name} must be writable")
    return a
