"""The reference implementation ``rumi`` (rumi-eo 0.16.0) used as a black-box peer.

Tests write files with the peer and read them with rumimm, and the other way round.
Only the peer's public API is used: ``rumi.frames`` cuts an array into a frame
table, each frame is compressed here with ``openzl.ext`` (one OpenZL ``Numeric``
input whose element width is the sample itemsize, 16-byte samples as a ``Struct``),
and ``rumi.write`` lays the frames out and returns the header blob.

What the peer can do was measured with rumi-eo 0.16.0 (numpy 1.26 with ml_dtypes
0.5, numpy 2.4 and 2.5 with ml_dtypes 0.7); see ``PEER_WRITABLE``, ``PEER_READABLE`` and tests/data/README.md.  What it
reads depends on numpy: it hands samples over through DLPack, and numpy takes bfloat16
and the byte-wide float8 types through DLPack from numpy 2.5 on.
"""

from __future__ import annotations

import os

import numpy as np
import openzl.ext as zl
import rumi

__all__ = [
    "PEER_MAX_FORMAT_VERSION",
    "PEER_ML_BY_DLPACK",
    "PEER_READABLE",
    "PEER_READABLE_ALWAYS",
    "PEER_WRITABLE",
    "compress_frame",
    "numpy_takes_through_dlpack",
    "peer_frames",
    "peer_header",
    "peer_read",
    "peer_write",
]

#: Dtype names (as in ``rumimm.format.dtypes.DTYPES``) the peer writes: ``rumi.frames``
#: accepts them and ``rumi.write`` produces a file.  Not: ``bool`` (rejected by
#: ``rumi.frames``) and the structured complex types ``complex_int16``,
#: ``complex_int32``, ``complex_float16`` (numpy has no such dtype; rejected).
PEER_WRITABLE = frozenset(
    {
        "uint2", "uint4", "uint8", "uint16", "uint32", "uint64",
        "int2", "int4", "int8", "int16", "int32", "int64",
        "float16", "float32", "float64",
        "complex64", "complex128",
        "float8_e4m3fn", "float8_e5m2", "bfloat16", "float8_e8m0fnu",
        "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn",
    }
)  # fmt: skip

#: Dtype names the peer reads back exactly with every numpy: full image and windows.
#: Not: sub-byte types (windows fail: OSError), complex128 (the peer expects a Numeric
#: output of width 16, which OpenZL cannot make: OSError), and the ML types below
#: where numpy cannot take them.
PEER_READABLE_ALWAYS = frozenset(
    {
        "uint8", "uint16", "uint32", "uint64",
        "int8", "int16", "int32", "int64",
        "float16", "float32", "float64",
        "complex64",
    }
)  # fmt: skip

#: The whole-byte ML types.  The peer returns samples through ``numpy.from_dlpack``,
#: which fails on these (SystemError) unless numpy knows their DLPack codes (numpy 2.5
#: does, for all four); the sub-byte ML types (int2/int4, float4/float6) never pass.
PEER_ML_BY_DLPACK = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu")


def numpy_takes_through_dlpack(name: str) -> bool:
    """Whether this numpy hands an ``ml_dtypes`` array of ``name`` through DLPack (asked of numpy, not the peer)."""
    import ml_dtypes

    try:
        np.from_dlpack(np.zeros(1, getattr(ml_dtypes, name)))
    except (BufferError, TypeError, ValueError, SystemError):
        return False
    return True


#: Dtype names the peer reads back into a numpy array equal to what was written,
#: full image and windows alike, with the installed numpy.
PEER_READABLE = PEER_READABLE_ALWAYS | frozenset(n for n in PEER_ML_BY_DLPACK if numpy_takes_through_dlpack(n))

#: The newest OpenZL frame format version the peer decodes.
PEER_MAX_FORMAT_VERSION = 24

_COMPRESSOR_CACHE: dict[str, tuple[object, object]] = {}


def _graph(graph: str):
    """Return (compressor, graph id) for "generic" or "delta", built once."""
    if graph not in _COMPRESSOR_CACHE:
        compressor = zl.Compressor()
        generic = zl.graphs.Compress().parameterize(compressor)
        if graph == "generic":
            gid = generic
        elif graph == "delta":
            gid = zl.nodes.DeltaInt().build_graph(compressor, [generic])
        else:
            raise ValueError(f"graph must be 'generic' or 'delta', got {graph!r}")
        compressor.select_starting_graph(gid)
        _COMPRESSOR_CACHE[graph] = (compressor, gid)
    return _COMPRESSOR_CACHE[graph]


def compress_frame(samples: np.ndarray, *, graph: str = "generic", format_version: int = 24) -> bytes:
    """Compress one frame's samples into one OpenZL frame.

    The samples are flattened in C order.  1/2/4/8-byte samples become one
    ``Numeric`` input of that element width (bits reinterpreted as unsigned
    integers, so floats and ML types are stored bit-exactly); 16-byte samples
    (complex128) become one ``Struct`` input of width 16.  ``delta`` applies to
    ``Numeric`` inputs only; a ``Struct`` always uses the generic graph.
    """
    flat = np.ascontiguousarray(samples).reshape(-1)
    width = flat.dtype.itemsize
    if width in (1, 2, 4, 8):
        held = flat.view(f"<u{width}")
        kind = zl.Type.Numeric
    elif width == 16:
        # openzl.ext.Input reads a 2-D byte array as (elt_width, num_elts);
        # the bytes are the same either way, element i is bytes [16 i, 16 i + 16).
        held = flat.view(np.uint8).reshape(16, flat.size)
        kind = zl.Type.Struct
        graph = "generic"
    else:
        raise ValueError(f"sample width must be 1, 2, 4, 8 or 16 bytes, got {width}")
    compressor, gid = _graph(graph)
    cctx = zl.CCtx()
    cctx.set_parameter(zl.CParam.FormatVersion, int(format_version))
    cctx.select_starting_graph(compressor, gid)
    # openzl.ext.Input does not keep its array alive: `held` must outlive compress
    inp = zl.Input(kind, held)
    frame = cctx.compress([inp])
    del inp
    return bytes(frame)


def _as_bands(array) -> np.ndarray:
    arr = np.asarray(array)
    if arr.ndim == 2:
        arr = arr[np.newaxis]
    if arr.ndim != 3:
        raise ValueError(f"array must be (B, Y, X) or (Y, X), got shape {arr.shape}")
    return arr


def peer_frames(array, *, tile: int = 512, unit: str = "tile", graph: str = "generic", format_version: int = 24):
    """Cut ``array`` with ``rumi.frames`` and compress every frame; return the FrameTable."""
    table = rumi.frames(_as_bands(array), tile, unit=unit)
    for frame in table:
        frame.compressed = compress_frame(frame.data, graph=graph, format_version=format_version)
    return table


def peer_write(
    path,
    array,
    *,
    tile: int = 512,
    unit: str = "tile",
    graph: str = "generic",
    format_version: int = 24,
    transform=None,
    crs=None,
    pixel_is_point: bool = False,
) -> bytes:
    """Write ``array`` (B, Y, X) as a rumi file with the peer; return the header blob.

    ``transform`` is the affine (x_res, row_rot, x_origin, col_rot, y_res, y_origin)
    and ``crs`` an EPSG code (int or "EPSG:nnnn"); pass both or neither.
    """
    table = peer_frames(array, tile=tile, unit=unit, graph=graph, format_version=format_version)
    kwargs = {"pixel_is_point": pixel_is_point}
    if transform is not None:
        kwargs["transform"] = tuple(float(v) for v in transform)
    if crs is not None:
        kwargs["crs"] = crs
    _, header = rumi.write(os.fspath(path), table, **kwargs)
    return bytes(header)


def peer_read(path, header: bytes | None = None, **window) -> np.ndarray:
    """Read a rumi file (or a window ``b=(b0, b1), y=(y0, y1), x=(x0, x1)``) with the peer."""
    return rumi.read(os.fspath(path), header, **window)


def peer_header(path) -> dict:
    """The peer's view of a file's header (``RumiHeader.from_path(path).to_dict()``)."""
    return rumi.RumiHeader.from_path(os.fspath(path)).to_dict()
