"""geozl's C frame decoder through ctypes: no numba, no geozl import.

``libgeozl`` (shipped inside the geozl package) exports a plain C entry point that
decodes any single-output OpenZL frame, built-in or geozl codecs, into a caller
buffer, and one that reads the decoded size a frame declares::

    int geozl_2d_decompress_c(const void *frame, size_t frame_size,
                              void *dst, size_t dst_capacity, size_t *out_size,
                              int verify, char *err_ctx, size_t err_ctx_size);
    size_t geozl_2d_frame_dsize_c(const void *frame, size_t frame_size);

This module finds and opens the library (``RTLD_LOCAL``, once, kept for the life of
the process) and calls it with ctypes, which releases the GIL during the call.  It is
the one decode primitive of the reader: small reads call :func:`decompress` directly,
so a process that only reads chips never loads numba, and ``codec.native`` registers
the same two entry points for the numba kernels of larger reads.

Statuses: the decoded byte count (>= 0) or a negative code: ``-ZL_ErrorCode``
(1..99) for an OpenZL failure, or one of the ``STATUS_*`` values below.
:func:`status_message` turns a code into words; the caller raises.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from pathlib import Path

__all__ = [
    "DECOMPRESS",
    "DSIZE",
    "STATUS_SIZE_MISMATCH",
    "STATUS_UNAVAILABLE",
    "available",
    "decompress",
    "functions",
    "library_path",
    "status_message",
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
DECOMPRESS = "geozl_2d_decompress_c"
DSIZE = "geozl_2d_frame_dsize_c"
_LIB_NAMES = ("libgeozl.so", "libgeozl.dylib", "geozl.dll")

# ---------------------------------------------------------------------------
# locating and loading the library (no geozl/openzl import)
# ---------------------------------------------------------------------------

_lock = threading.Lock()
_path: str | None = None
_path_searched = False
_keep: list = []  # the opened library, never unloaded


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


DECOMPRESS_T = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_size_t), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)
DSIZE_T = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t)
_functions: tuple | None = None  # (decompress, dsize) once opened
_opened = False


def functions():
    """Open libgeozl once; return its ``(decompress, dsize)`` ctypes functions, or None.

    Opened ``RTLD_LOCAL`` (``RTLD_GLOBAL`` would export libgeozl's bundled zstd and
    OpenZL symbols to every library loaded later) and never closed.
    """
    global _functions, _opened
    if _opened:
        return _functions
    with _lock:
        if not _opened:
            path = library_path()
            try:
                if path is None:
                    raise OSError("libgeozl not found")
                lib = ctypes.CDLL(path, mode=getattr(os, "RTLD_LOCAL", 0))
                decompress = getattr(lib, DECOMPRESS)
                dsize = getattr(lib, DSIZE)
            except (OSError, AttributeError):
                pass
            else:
                decompress.restype = ctypes.c_int
                decompress.argtypes = list(DECOMPRESS_T._argtypes_)
                dsize.restype = ctypes.c_size_t
                dsize.argtypes = list(DSIZE_T._argtypes_)
                _functions = (decompress, dsize)
                _keep.append(lib)  # held for the life of the process: never unloaded
            _opened = True
    return _functions



def available() -> bool:
    """Return True when libgeozl is loaded (opening it on first call)."""
    return functions() is not None


def decompress(src: int, src_size: int, dst: int, capacity: int, verify: bool) -> int:
    """Decode the frame at address ``src`` into ``capacity`` bytes at address ``dst``.

    Returns the decoded byte count or ``-ZL_ErrorCode``; :data:`STATUS_UNAVAILABLE`
    without the library.  The GIL is released during the call.  ``dst`` must be
    aligned to the frame's element width (8 bytes always suffices).
    """
    fns = functions()
    if fns is None:
        return STATUS_UNAVAILABLE
    if src_size == 0:
        return -3  # -ZL_ErrorCode_srcSize_tooSmall
    got = ctypes.c_size_t(0)
    rc = fns[0](src, src_size, dst, capacity, ctypes.byref(got), 1 if verify else 0, None, 0)
    return got.value if rc == 0 else -rc


def status_message(code: int) -> str:
    """Describe a status: ``"OpenZL: corruption"``, ``"decoded 12 bytes"``."""
    code = int(code)
    if code >= 0:
        return f"decoded {code} bytes"
    if code in _OWN_STATUS:
        return _OWN_STATUS[code]
    name = _ZL_ERRORS.get(-code, f"error code {-code}")
    return f"OpenZL: {name}"
