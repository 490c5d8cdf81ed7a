"""Named compression graphs (presets) and how a ``codec=`` argument resolves to one.

A :class:`Codec` is one of three kinds: a graph built on an OpenZL compressor (its builder
is in ``graphs.py``), a geozl 2D recipe, or a per-dtype table of the other two.  Which
readers decode each comes from ``compat.py``.  Chosen by measurement on
``rumimm.synthetic.eo_scene`` (``docs/dev/codec-measurements.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import openzl.ext as zl

from rumimm.codec.compat import (
    EVERY_READER,
    RECIPE_PREFIX,
    REFERENCE_MAX_FORMAT_VERSION,
    readers_of,
    reads_sample_type,
    recipe_codecs,
)
from rumimm.codec.frames import STRUCT_WIDTH, as_encoding
from rumimm.codec.graphs import (
    ALL_WIDTHS,
    FLOAT_FORMATS,
    INTEGER_FORMATS,
    NUMERIC_WIDTHS,
    build_delta,
    build_delta_fieldlz,
    build_delta_huffman,
    build_float,
    build_generic,
    build_geozl_average,
    build_geozl_planar,
    build_store,
    build_transpose,
    geometry_key,
    no_builder,
    no_key,
    recipe_key,
)
from rumimm.format.dtypes import ENCODINGS, Encoding

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

#: How a graph is built: ``f(compressor, encoding, frame shape) -> GraphID``.
GraphBuilder: TypeAlias = Callable[[zl.Compressor, Encoding, tuple[int, ...]], zl.GraphID]
#: The ``codec=`` argument: None (the spec's default), a preset or ``"geozl:<recipe>"`` name, a Codec,
#: or ``f(compressor) -> GraphID``.
CodecArg: TypeAlias = "str | Codec | Callable[[Any], Any] | None"


@dataclass(frozen=True)
class Codec:
    """A named way to build an OpenZL graph for one frame.

    Three kinds: a graph built on an ``openzl.ext.Compressor`` (``builder``), a geozl
    2D recipe that geozl builds and runs itself (``recipe``, e.g.
    ``"delta_w>zigzag>pfor"``), or a per-dtype table (``members``) that resolves to
    one of the other two for each encoding (:meth:`for_encoding`).

    Attributes
    ----------
    name : str
        Preset name (a key of :data:`PRESETS`), ``"geozl:<recipe>"`` or ``"custom:<callable name>"``.
    description : str
        What the graph does and its measured numbers.
    portable : bool
        True when its frames use OpenZL's built-in codecs only, at frame format <= 24:
        any OpenZL decoder reads them, rumi-eo 0.16.0 and 0.26.1 included (a table: for
        every dtype).  geozl codecs are versioned with geozl, not OpenZL, so a frame
        using one is never called portable, even where a reference reads it: see
        ``readers`` for what was measured.
    requires_geozl : bool
        True when encoding and decoding need the geozl package.
    lossless : bool or None
        True for every preset; None for a user graph, whose losslessness is the
        user's responsibility.
    widths : frozenset of int
        Storage itemsizes (1, 2, 4, 8, 16) the graph accepts.
    formats : frozenset of int or None
        Sample formats the preset is meant for, or None for any.
    recipe : str or None
        The geozl recipe, for a codec geozl builds.
    readers : frozenset of str
        Which of :data:`READERS` decode its frames (a table: see :meth:`readers_for`);
        the tests decode frames in each reader to hold this true.
    members : mapping or None
        For a table: encoding name -> the :class:`Codec` that encoding uses.
    """

    name: str
    description: str
    portable: bool
    requires_geozl: bool
    lossless: bool | None
    widths: frozenset[int] = ALL_WIDTHS
    formats: frozenset[int] | None = None
    builder: GraphBuilder = field(default=build_generic, repr=False, compare=False)
    graph_key: Callable[[tuple[int, ...]], Hashable] = field(default=no_key, repr=False, compare=False)
    recipe: str | None = None
    readers: frozenset[str] = EVERY_READER
    members: Mapping[str, Codec] | None = field(default=None, repr=False, compare=False)

    def for_encoding(self, encoding: Encoding | DTypeLike) -> Codec:
        """The codec frames of ``encoding`` go through: a table's member, else this codec."""
        if self.members is None:
            return self
        enc = as_encoding(encoding)
        member = self.members.get(enc.name)
        return member if member is not None else _default_for(enc)  # a dtype the table has not listed

    def readers_for(self, encoding: Encoding | DTypeLike) -> frozenset[str]:
        """Which of :data:`READERS` decode frames of ``encoding`` written with this codec (and read that sample
        type at all: :data:`~rumimm.codec.compat.UNREAD_SAMPLE_TYPES`)."""
        name = as_encoding(encoding).name
        return frozenset(r for r in self.for_encoding(encoding).readers if reads_sample_type(r, name))

    def supports(self, encoding: Encoding) -> bool:
        """Whether frames of ``encoding`` can go through this codec."""
        if self.members is not None:
            return self.for_encoding(encoding).supports(encoding)
        if encoding.storage_dtype.itemsize not in self.widths:
            return False
        return self.formats is None or encoding.sample_format in self.formats

    def build(self, compressor: zl.Compressor, encoding: Encoding, shape: tuple[int, ...] = ()) -> zl.GraphID:
        """Build this codec's graph on ``compressor`` for frames of ``shape``.

        Raises
        ------
        TypeError
            For a geozl recipe (geozl builds those; :class:`FrameEncoder` runs them).
        """
        if self.members is not None:
            return self.for_encoding(encoding).build(compressor, encoding, shape)
        gid = self.builder(compressor, encoding, tuple(shape))
        if not isinstance(gid, zl.GraphID):
            raise TypeError(f"codec {self.name!r} built {type(gid).__name__}, expected openzl.ext.GraphID")
        return gid


def _preset(name: str, description: str, *, builder: GraphBuilder, portable: bool = True, geozl: bool = False,
            widths: Iterable[int] = NUMERIC_WIDTHS, formats: Iterable[int] | None = None,
            key: Callable[[tuple[int, ...]], Hashable] = no_key, readers: Iterable[str] = EVERY_READER) -> Codec:
    return Codec(
        name=name,
        description=description,
        portable=portable,
        requires_geozl=geozl,
        lossless=True,
        widths=frozenset(widths),
        formats=None if formats is None else frozenset(formats),
        builder=builder,
        graph_key=key,
        readers=frozenset(readers),
    )


# Measured on eo_scene(4, 2048, 2048) (uint16, float32) or (4, 1024, 1024), tile
# frames 512 x 512, one core, noisy machine (speeds +-20%); size is compressed/raw,
# speeds MiB/s of raw samples.  docs/dev/codec-measurements.md has the full tables
# and the command that reproduces them.
_DELTA = _preset(
    "delta",
    "DeltaInt > Zigzag > Entropy; wider samples and 16-bit floats code the residual "
    "bytes as TransposeSplit lanes > Entropy. OpenZL built-ins, portable; the default "
    "for every dtype but float64 and complex128. uint16 0.487 (GeoTIFF zstd9+predictor2 "
    "0.583, generic 0.583), decode ~600 MiB/s, encode ~300 MiB/s; float32 0.683 "
    "(GeoTIFF zstd9+predictor3 0.738); bool 0.028",
    builder=build_delta,
)
_DELTA_HUFFMAN = _preset(
    "delta-huffman",
    "DeltaInt > Zigzag > Huffman; built-ins, portable; 1- and 2-byte samples only. "
    "uint16 0.487 like 'delta', but Huffman spends >= 1 bit a sample: bool 0.129",
    builder=build_delta_huffman,
    widths=(1, 2),
)
_DELTA_FIELDLZ = _preset(
    "delta-fieldlz",
    "DeltaInt > FieldLz (LZ over whole samples); built-ins, portable; encodes at "
    "~25 MiB/s. uint16 0.548",
    builder=build_delta_fieldlz,
)
_TRANSPOSE = _preset(
    "transpose",
    "TransposeSplit into byte lanes > Entropy, no prediction; built-ins, portable; "
    "the default for float64 (0.376, GeoTIFF 0.375) and complex128 (0.412, generic 0.543)",
    builder=build_transpose,
    widths=ALL_WIDTHS,
)
_GENERIC = _preset(
    "generic",
    "OpenZL's generic graphs.Compress; built-ins, portable; encodes at ~25-80 MiB/s. "
    "uint16 0.583, float32 0.690, float64 0.343",
    builder=build_generic,
    widths=ALL_WIDTHS,
)
_STORE = _preset(
    "store",
    "graphs.Store: no compression, for debugging; portable",
    builder=build_store,
    widths=ALL_WIDTHS,
)
_FLOAT = _preset(
    "float",
    "Float32/Float16/BFloat16Deconstruct: exponents and sign+mantissa coded apart "
    "(byte lanes for float64); built-ins, portable. For floats with few exponents and "
    "smooth mantissas; on the synthetic scene larger than 'delta': float32 0.759, "
    "float16 0.715, bfloat16 0.627",
    builder=build_float,
    formats=FLOAT_FORMATS,
)
_GEOZL_PLANAR = _preset(
    "geozl-planar",
    "geozl PlanarZigzag 2D predictor (W + N - NW, reset per band) > Entropy; needs geozl "
    "to encode; NOT portable: rumi-eo 0.26.1 decodes it, rumi-eo 0.16.0 does not. uint16 0.498",
    builder=build_geozl_planar,
    portable=False,
    geozl=True,
    formats=INTEGER_FORMATS,
    key=geometry_key,
    readers=readers_of({"planar_zigzag"}, REFERENCE_MAX_FORMAT_VERSION),
)
_GEOZL_AVERAGE = _preset(
    "geozl-average",
    "geozl Average 2D predictor ((W + N) / 2, reset per band) > Zigzag > Entropy; needs "
    "geozl to encode; NOT portable, though rumi-eo 0.16.0 and 0.26.1 both decode it (their "
    "libraries carry the average codec); uint16 0.477, uint8 0.429, decode ~450 MiB/s",
    builder=build_geozl_average,
    portable=False,
    geozl=True,
    formats=INTEGER_FORMATS,
    key=geometry_key,
    readers=readers_of({"average"}, REFERENCE_MAX_FORMAT_VERSION),
)


# --------------------------------------------------------------- geozl recipes

def recipe_codec(recipe: str, description: str = "") -> Codec:
    """A codec whose frames geozl writes with its 2D ``recipe`` (``geozl.graph(tile, recipe)``).

    ``recipe`` is one of the names ``geozl.profile(tile, prior=None)`` lists, e.g.
    ``"delta_w>zigzag>pfor"``.  Its row width and band count come from each frame's
    shape (``(h, w)`` or ``(B, h, w)``); the graph does not depend on the samples, so
    frames are deterministic.  Lossless recipes only: geozl's lossy quantisers are
    never selected.  ``readers`` follow from the codecs the recipe references
    (:func:`recipe_codecs`, :func:`readers_of`).
    """
    if not isinstance(recipe, str) or not recipe or recipe.strip() != recipe:
        raise ValueError(f"recipe must be a geozl recipe name such as 'planar>zigzag>pfor', got {recipe!r}")
    codecs, version = recipe_codecs(recipe)
    readers = readers_of(codecs, version)
    return Codec(
        name=RECIPE_PREFIX + recipe,
        description=description or f"geozl recipe {recipe}",
        portable=not codecs and version <= REFERENCE_MAX_FORMAT_VERSION,
        requires_geozl=True,
        lossless=True,
        widths=NUMERIC_WIDTHS,
        formats=None,
        builder=no_builder,
        graph_key=recipe_key,
        recipe=recipe,
        readers=readers,
    )


def _default_for(encoding: Encoding) -> Codec:
    w = encoding.storage_dtype.itemsize
    if w == STRUCT_WIDTH or encoding.name == "float64":
        return _TRANSPOSE
    return _DELTA


#: The default preset of every encoding name (what ``codec=None`` and ``"auto"`` pick).
DEFAULT_PRESETS: dict[str, str] = {e.name: _default_for(e).name for e in ENCODINGS.values()}


def _build_auto(c: zl.Compressor, enc: Encoding, shape: tuple[int, ...]) -> zl.GraphID:
    return _default_for(enc).build(c, enc, shape)


_AUTO = Codec(
    name="auto",
    description="the default preset of each dtype: 'delta', or 'transpose' for float64 and complex128; portable",
    portable=True,
    requires_geozl=False,
    lossless=True,
    widths=ALL_WIDTHS,
    builder=_build_auto,
)

# ---------------------------------------------------------- per-dtype tables

# Chosen from asv_benchmarks/compare/recipes.py (docs/dev/codec-measurements.md, "Recipes"):
# 16 tile frames of 512 x 512 per dtype, one core, rumimm's own decoder.  A dtype not
# listed falls back to its default preset (no faster recipe was measured for it).
#
# fast: the fastest decode at most 6% (or 0.005 of raw) larger than the default, among
# recipes at frame format 24 that encode at >= 40 MiB/s; on near-ties the one more
# readers decode and that encodes faster.  Every pick is read by both references too
# (their libraries carry delta_n, delta_w and pfor; tests/test_codec_readers.py).
# Speeds move +-30% between runs on the shared machine: the choices rest on margins
# of 1.5-7x (uint8 and uint4: 1.3-2x) seen in two runs.
_FAST = {
    "uint8": "delta_n>zigzag>entropy",
    "uint16": "delta_n>zigzag>pfor",
    "int16": "delta_n>zigzag>pfor",
    "uint32": "delta_n>zigzag>pfor",
    "float32": "delta_n>zigzag>pfor",
    "bfloat16": "delta_w>zigzag>transpose>zstd",
    "bool": "generic",  # tied with delta_n>zigzag>zstd (0.031) in speed, smaller, and OpenZL built-ins only
    "uint4": "delta_n>zigzag>entropy",
}
# small: the smallest recipe at frame format 24 that encodes at >= 100 MiB/s.
_SMALL = {
    "uint8": "med>zigzag>entropy",
    "uint16": "med>zigzag>transpose>entropy",
    "int16": "med>zigzag>transpose>entropy",
    "uint32": "med>zigzag>transpose>entropy",
    "float32": "med>zigzag>transpose>entropy",
    "float64": "delta_1d>transpose>entropy",
    "bfloat16": "med>zigzag>transpose>entropy",
    "bool": "med>zigzag>entropy",
    "uint4": "med>zigzag>entropy",
}


def _table(name: str, description: str, picks: Mapping[str, str]) -> Codec:
    """A per-dtype table: each pick is a geozl recipe, or a built-in preset named in ``_BUILT_IN``."""
    members = {e.name: (_BUILT_IN[picks[e.name]] if picks.get(e.name) in _BUILT_IN
                        else recipe_codec(picks[e.name]) if e.name in picks else _default_for(e))
               for e in ENCODINGS.values()}
    return Codec(
        name=name,
        description=description,
        portable=all(m.portable for m in members.values()),
        requires_geozl=any(m.requires_geozl for m in members.values()),
        lossless=True,
        widths=ALL_WIDTHS,
        builder=no_builder,
        readers=frozenset.intersection(*(m.readers for m in members.values())),
        members=members,
    )


_BUILT_IN = {c.name: c for c in (_DELTA, _TRANSPOSE, _GENERIC)}
_FAST_TABLE = _table(
    "fast",
    "per dtype, the fastest-decoding recipe at about the default's size (geozl recipes written at frame "
    "format 24): delta_n > zigzag > pfor for uint16/int16/uint32/float32 (uint16: ~4x the decode speed of "
    "'delta' at +5% size), delta_n > zigzag > entropy for uint8 and uint4, delta_w > zigzag > transpose > zstd "
    "for bfloat16, OpenZL's generic graph for bool; every other dtype uses its default. Not portable (geozl "
    "codecs), but rumimm, rumi-eo 0.16.0 and rumi-eo 0.26.1 all decode it (measured); needs geozl to encode. "
    "The default of spec 0.2 files",
    _FAST,
)
_SMALL_TABLE = _table(
    "small",
    "per dtype, the smallest recipe that encodes at >= 100 MiB/s: med > zigzag (> transpose) > entropy for "
    "integers, bool, float32 and bfloat16 (uint16 -3% vs 'delta'), delta_1d > transpose > entropy for float64; "
    "every other dtype uses its default. Decodes slower than 'delta'; the med codec is read by rumimm and "
    "rumi-eo 0.26.1, not rumi-eo 0.16.0; needs geozl",
    _SMALL,
)
_PORTABLE_TABLE = _table(
    "portable",
    "the spec 0.1.0 default of each dtype ('delta', or 'transpose' for float64 and complex128): OpenZL built-in "
    "codecs only at frame format 24, so any OpenZL reader decodes it without geozl, rumi-eo 0.16.0 and 0.26.1 "
    "included",
    {},
)

#: Every named preset.
PRESETS: dict[str, Codec] = {
    c.name: c
    for c in (
        _AUTO,
        _DELTA,
        _DELTA_HUFFMAN,
        _DELTA_FIELDLZ,
        _TRANSPOSE,
        _FLOAT,
        _GENERIC,
        _STORE,
        _GEOZL_PLANAR,
        _GEOZL_AVERAGE,
        _FAST_TABLE,
        _SMALL_TABLE,
        _PORTABLE_TABLE,
    )
}


#: The preset ``codec=None`` picks, by the file's specification: spec 0.1.0 files stay
#: readable by rumi-eo 0.16.0; spec 0.2 files take the fastest recipes rumi-eo 0.26.1 reads.
DEFAULT_PRESET_BY_SPEC: dict[str, str] = {"0.1": "auto", "0.2": "fast"}


def resolve_codec(codec: CodecArg, encoding: Encoding | DTypeLike, spec: str = "0.1") -> Codec:
    """Turn a codec argument into a :class:`Codec` that supports ``encoding``.

    Parameters
    ----------
    codec : None, str, Codec or callable
        ``None`` or ``"auto"`` picks the default preset of the dtype; a string
        names a preset in :data:`PRESETS`; a :class:`Codec` is checked and
        returned; a callable ``f(compressor: openzl.ext.Compressor) -> GraphID``
        is wrapped as a custom codec (``portable=False``, ``lossless=None``: the
        user answers for both, and for registering any custom decoders).
    encoding : Encoding or dtype-like
        The sample encoding of the frames.
    spec : {"0.1", "0.2"}
        The file's specification; ``codec=None`` picks :data:`DEFAULT_PRESET_BY_SPEC`
        of it (``"auto"`` for 0.1, ``"fast"`` for 0.2).  A per-dtype table preset
        (``"fast"``, ``"small"``, ``"portable"``) resolves to its member for ``encoding``.

    Returns
    -------
    Codec

    Raises
    ------
    ValueError
        Unknown preset name, or a preset that does not support the encoding.
    TypeError
        ``codec`` is none of the accepted kinds.
    """
    enc = as_encoding(encoding)
    if codec is None:
        name = DEFAULT_PRESET_BY_SPEC.get(spec)
        if name is None:
            raise ValueError(f"spec must be one of {sorted(DEFAULT_PRESET_BY_SPEC)}, got {spec!r}")
        codec = name
    if isinstance(codec, str) and codec == "auto":
        return _default_for(enc)
    if isinstance(codec, str) and codec.startswith(RECIPE_PREFIX):
        codec = recipe_codec(codec[len(RECIPE_PREFIX):])
    elif isinstance(codec, str):
        found = PRESETS.get(codec)
        if found is None:
            names = ", ".join(sorted(PRESETS))
            raise ValueError(f"codec {codec!r} is not a preset; expected one of: {names}, or 'geozl:<recipe>'")
        codec = found
    elif not isinstance(codec, Codec):
        if not callable(codec):
            raise TypeError(
                "codec must be None, a preset name, a Codec or a callable returning a GraphID, "
                f"got {type(codec).__name__}"
            )
        fn = codec
        label = getattr(fn, "__qualname__", None) or type(fn).__name__
        codec = Codec(
            name=f"custom:{label}",
            description="a user graph; losslessness and decodability are the user's responsibility",
            portable=False,
            requires_geozl=False,
            lossless=None,
            widths=ALL_WIDTHS,
            builder=lambda c, e, s: fn(c),
            readers=frozenset(),  # unknown: rumimm.codec.frame_codecs finds them from a frame
        )
    if codec.members is not None and codec.supports(enc):
        return codec.for_encoding(enc)
    if not codec.supports(enc):
        usable = ", ".join(n for n, c in PRESETS.items() if c.supports(enc))
        raise ValueError(f"codec {codec.name!r} does not support {enc.name} samples; use one of: {usable}")
    return codec
