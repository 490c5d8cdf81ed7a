"""Graph builders: how each built-in preset lays out its OpenZL graph on a ``Compressor``.

A builder is ``f(compressor, encoding, shape) -> GraphID``; a graph key says which frame
shapes share one built graph (geozl's 2D predictors depend on the row width and band
count).  The measurements behind each choice are in ``docs/dev/codec-measurements.md``;
which presets use which builder is ``presets.py``'s.
"""

from __future__ import annotations

from collections.abc import Hashable
from types import ModuleType

import openzl.ext as zl
from openzl.ext import graphs as _g
from openzl.ext import nodes as _n

from rumimm.codec.frames import STRUCT_WIDTH
from rumimm.format.dtypes import Encoding

__all__ = [
    "ALL_WIDTHS",
    "FLOAT_FORMATS",
    "INTEGER_FORMATS",
    "NUMERIC_WIDTHS",
    "build_delta",
    "build_delta_fieldlz",
    "build_delta_huffman",
    "build_float",
    "build_generic",
    "build_geozl_average",
    "build_geozl_planar",
    "build_store",
    "build_transpose",
    "geometry_key",
    "geozl_lossless",
    "geozl_module",
    "no_builder",
    "no_key",
    "recipe_key",
]

NUMERIC_WIDTHS = frozenset((1, 2, 4, 8))
ALL_WIDTHS = frozenset((1, 2, 4, 8, 16))
INTEGER_FORMATS = frozenset((1, 2))
FLOAT_FORMATS = frozenset((3, 102))  # IEEE floats and bfloat16


def _bytes_entropy(c: zl.Compressor, width: int) -> zl.GraphID:
    """Order-0 entropy coding, on byte lanes (a transpose) for samples wider than a byte."""
    if width == 1:
        return _g.Entropy()(c)
    if width == STRUCT_WIDTH:
        return _n.TransposeSplit()(c, _g.Entropy()(c))
    return _n.ConvertNumToStructLE()(c, _n.TransposeSplit()(c, _g.Entropy()(c)))


def _delta_tail(c: zl.Compressor, enc: Encoding) -> zl.GraphID:
    # Entropy takes Numeric of width 1 or 2 directly.  On 16-bit integer residuals
    # byte lanes were no smaller (0.485 vs 0.487) and slower to decode; on 16-bit
    # float residuals they were smaller and 2-5x faster (bfloat16 0.487 vs 0.504).
    width = enc.storage_dtype.itemsize
    if width == 1 or (width == 2 and enc.sample_format in INTEGER_FORMATS):
        return _g.Entropy()(c)
    return _bytes_entropy(c, width)


def build_delta(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    return _n.DeltaInt()(c, _n.Zigzag()(c, _delta_tail(c, enc)))


def build_delta_huffman(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    return _n.DeltaInt()(c, _n.Zigzag()(c, _g.Huffman()(c)))


def build_delta_fieldlz(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    return _n.DeltaInt()(c, _g.FieldLz()(c))


def build_transpose(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    return _bytes_entropy(c, enc.storage_dtype.itemsize)


def build_generic(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    return _g.Compress()(c)


def build_store(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    return _g.Store()(c)


def build_float(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    # the sign+mantissa output is a Struct (3 bytes for float32, 2 for float16)
    if enc.name == "float32":
        return _n.Float32Deconstruct()(c, _n.TransposeSplit()(c, _g.Entropy()(c)), _g.Entropy()(c))
    if enc.name == "float16":
        return _n.Float16Deconstruct()(c, _n.TransposeSplit()(c, _g.Entropy()(c)), _g.Entropy()(c))
    if enc.name == "bfloat16":
        return _n.BFloat16Deconstruct()(c, _g.Entropy()(c), _g.Entropy()(c))
    return _bytes_entropy(c, enc.storage_dtype.itemsize)  # float64: no deconstruct node, byte lanes


def _geometry(shape: tuple[int, ...]) -> tuple[int, int]:
    """Row width and plane count of a (h, w) or (B, h, w) frame."""
    width = int(shape[-1]) if shape else 0
    planes = int(shape[0]) if len(shape) == 3 else 1
    return width, planes


def geozl_module() -> ModuleType:
    """The geozl package, imported when a codec first needs it."""
    try:
        import geozl
    except ImportError as exc:  # pragma: no cover - geozl is installed in the test env
        raise ImportError("this codec needs the geozl package; install geozl or choose a portable codec") from exc
    return geozl


def geozl_lossless() -> ModuleType:
    """geozl's lossless 2D predictor nodes, imported when a codec first needs them."""
    try:
        import geozl.lossless as lossless
    except ImportError as exc:  # pragma: no cover - geozl is installed in the test env
        raise ImportError("this codec needs the geozl package; install geozl or choose a portable codec") from exc
    return lossless


def build_geozl_planar(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    width, planes = _geometry(shape)
    node = geozl_lossless().PlanarZigzag(width, planes)
    return node(c, _delta_tail(c, enc))


def build_geozl_average(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    width, planes = _geometry(shape)
    node = geozl_lossless().Average(width, planes)
    return node(c, _n.Zigzag()(c, _delta_tail(c, enc)))


def no_key(shape: tuple[int, ...]) -> Hashable:
    """Graph key of a graph that does not depend on the frame shape: every frame shares one."""
    return None


def no_builder(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    """The builder of a codec geozl builds itself (a recipe) or that only names others (a table)."""
    raise TypeError("this codec is a geozl recipe: geozl builds and runs its graph, not an openzl.ext Compressor")


def geometry_key(shape: tuple[int, ...]) -> Hashable:
    """Graph key of geozl's 2D predictors: frames of one row width and band count share a graph."""
    return _geometry(shape)


def recipe_key(shape: tuple[int, ...]) -> Hashable:
    """Graph key of a geozl recipe: geozl builds one graph per frame shape."""
    return tuple(int(n) for n in shape)
