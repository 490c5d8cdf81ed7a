"""Named compression graphs (presets) and how a ``codec=`` argument resolves to one.

Chosen by measurement on ``rumimm.synthetic.eo_scene`` (``docs/dev/codec-measurements.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

import openzl.ext as zl
from openzl.ext import graphs as _g
from openzl.ext import nodes as _n

from rumimm.codec.frames import STRUCT_WIDTH, as_encoding
from rumimm.format.dtypes import ENCODINGS, Encoding

# ------------------------------------------------------------------------- readers

#: The readers a codec's frames are checked against (tests decode them in each one's own venv).
READER_RUMIMM = "rumimm"
READER_RUMI_016 = "rumi-eo 0.16.0"
READER_RUMI_026 = "rumi-eo 0.26.1"
READERS: tuple[str, ...] = (READER_RUMIMM, READER_RUMI_016, READER_RUMI_026)
_EVERY_READER = frozenset(READERS)
#: The file specifications each reader opens (measured: each reference refuses the other's
#: files with "invalid sample format").
READER_SPECS: dict[str, tuple[str, ...]] = {
    READER_RUMIMM: ("0.1", "0.2"),
    READER_RUMI_016: ("0.1",),
    READER_RUMI_026: ("0.2",),
}

#: The newest OpenZL frame format both reference readers decode.
REFERENCE_MAX_FORMAT_VERSION = 24
#: Stands for the codecs only geozl 0.19's C library decodes (``pivco``); frames using
#: them are written at frame format 27.
C_ONLY = "geozl 0.19 C codecs (pivco)"
#: The geozl codecs each reference decodes besides OpenZL's built-ins, as measured by
#: decoding frames in each one's own environment (tests/test_codec_readers.py):
#: rumi-eo 0.16.0's own library carries some geozl codecs, rumi-eo 0.26.1 registers
#: geozl 0.18's.  Codecs not measured (deinterleave, nodata, planar, med) are left out.
REFERENCE_CODECS: dict[str, frozenset] = {
    READER_RUMI_016: frozenset({"delta_w", "delta_n", "average", "wp_static", "pfor"}),
    READER_RUMI_026: frozenset({"delta_w", "delta_n", "average", "wp_static", "pfor", "planar_zigzag",
                                "planar_zigzag_pfor", "med_zigzag"}),
}


def readers_of(codecs, format_version: int) -> frozenset:
    """The readers that decode a frame of ``format_version`` referencing geozl ``codecs``."""
    codecs = frozenset(codecs)
    out = {READER_RUMIMM}
    if format_version <= REFERENCE_MAX_FORMAT_VERSION:
        out |= {reader for reader, known in REFERENCE_CODECS.items() if codecs <= known}
    return frozenset(out)


# -------------------------------------------------------------------------- graphs

_NUMERIC_WIDTHS = frozenset((1, 2, 4, 8))
_ALL_WIDTHS = frozenset((1, 2, 4, 8, 16))
_INTEGER_FORMATS = frozenset((1, 2))
_FLOAT_FORMATS = frozenset((3, 102))  # IEEE floats and bfloat16


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
    if width == 1 or (width == 2 and enc.sample_format in _INTEGER_FORMATS):
        return _g.Entropy()(c)
    return _bytes_entropy(c, width)


def _build_delta(c, enc, shape):
    return _n.DeltaInt()(c, _n.Zigzag()(c, _delta_tail(c, enc)))


def _build_delta_huffman(c, enc, shape):
    return _n.DeltaInt()(c, _n.Zigzag()(c, _g.Huffman()(c)))


def _build_delta_fieldlz(c, enc, shape):
    return _n.DeltaInt()(c, _g.FieldLz()(c))


def _build_transpose(c, enc, shape):
    return _bytes_entropy(c, enc.storage_dtype.itemsize)


def _build_generic(c, enc, shape):
    return _g.Compress()(c)


def _build_store(c, enc, shape):
    return _g.Store()(c)


def _build_float(c, enc, shape):
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


def geozl_module():
    try:
        import geozl
    except ImportError as exc:  # pragma: no cover - geozl is installed in the test env
        raise ImportError("this codec needs the geozl package; install geozl or choose a portable codec") from exc
    return geozl


def geozl_lossless():
    try:
        import geozl.lossless as lossless
    except ImportError as exc:  # pragma: no cover - geozl is installed in the test env
        raise ImportError("this codec needs the geozl package; install geozl or choose a portable codec") from exc
    return lossless


def _build_geozl_planar(c, enc, shape):
    width, planes = _geometry(shape)
    node = geozl_lossless().PlanarZigzag(width, planes)
    return node(c, _delta_tail(c, enc))


def _build_geozl_average(c, enc, shape):
    width, planes = _geometry(shape)
    node = geozl_lossless().Average(width, planes)
    return node(c, _n.Zigzag()(c, _delta_tail(c, enc)))


def _no_key(shape: tuple[int, ...]) -> Hashable:
    return None


def _no_builder(c, enc, shape):
    raise TypeError("this codec is a geozl recipe: geozl builds and runs its graph, not an openzl.ext Compressor")


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
    widths: frozenset = _ALL_WIDTHS
    formats: frozenset | None = None
    builder: Callable = field(default=_build_generic, repr=False, compare=False)
    graph_key: Callable = field(default=_no_key, repr=False, compare=False)
    recipe: str | None = None
    readers: frozenset = _EVERY_READER
    members: Mapping | None = field(default=None, repr=False, compare=False)

    def for_encoding(self, encoding) -> Codec:
        """The codec frames of ``encoding`` go through: a table's member, else this codec."""
        if self.members is None:
            return self
        enc = as_encoding(encoding)
        member = self.members.get(enc.name)
        return member if member is not None else _default_for(enc)  # a dtype the table has not listed

    def readers_for(self, encoding) -> frozenset:
        """Which of :data:`READERS` decode frames of ``encoding`` written with this codec."""
        return self.for_encoding(encoding).readers

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


def _geo_key(shape: tuple[int, ...]) -> Hashable:
    return _geometry(shape)


def _preset(name, description, *, builder, portable=True, geozl=False, widths=_NUMERIC_WIDTHS, formats=None,
            key=_no_key, readers=_EVERY_READER):
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
    builder=_build_delta,
)
_DELTA_HUFFMAN = _preset(
    "delta-huffman",
    "DeltaInt > Zigzag > Huffman; built-ins, portable; 1- and 2-byte samples only. "
    "uint16 0.487 like 'delta', but Huffman spends >= 1 bit a sample: bool 0.129",
    builder=_build_delta_huffman,
    widths=(1, 2),
)
_DELTA_FIELDLZ = _preset(
    "delta-fieldlz",
    "DeltaInt > FieldLz (LZ over whole samples); built-ins, portable; encodes at "
    "~25 MiB/s. uint16 0.548",
    builder=_build_delta_fieldlz,
)
_TRANSPOSE = _preset(
    "transpose",
    "TransposeSplit into byte lanes > Entropy, no prediction; built-ins, portable; "
    "the default for float64 (0.376, GeoTIFF 0.375) and complex128 (0.412, generic 0.543)",
    builder=_build_transpose,
    widths=_ALL_WIDTHS,
)
_GENERIC = _preset(
    "generic",
    "OpenZL's generic graphs.Compress; built-ins, portable; encodes at ~25-80 MiB/s. "
    "uint16 0.583, float32 0.690, float64 0.343",
    builder=_build_generic,
    widths=_ALL_WIDTHS,
)
_STORE = _preset(
    "store",
    "graphs.Store: no compression, for debugging; portable",
    builder=_build_store,
    widths=_ALL_WIDTHS,
)
_FLOAT = _preset(
    "float",
    "Float32/Float16/BFloat16Deconstruct: exponents and sign+mantissa coded apart "
    "(byte lanes for float64); built-ins, portable. For floats with few exponents and "
    "smooth mantissas; on the synthetic scene larger than 'delta': float32 0.759, "
    "float16 0.715, bfloat16 0.627",
    builder=_build_float,
    formats=_FLOAT_FORMATS,
)
_GEOZL_PLANAR = _preset(
    "geozl-planar",
    "geozl PlanarZigzag 2D predictor (W + N - NW, reset per band) > Entropy; needs geozl "
    "to encode; NOT portable: rumi-eo 0.26.1 decodes it, rumi-eo 0.16.0 does not. uint16 0.498",
    builder=_build_geozl_planar,
    portable=False,
    geozl=True,
    formats=_INTEGER_FORMATS,
    key=_geo_key,
    readers=readers_of({"planar_zigzag"}, REFERENCE_MAX_FORMAT_VERSION),
)
_GEOZL_AVERAGE = _preset(
    "geozl-average",
    "geozl Average 2D predictor ((W + N) / 2, reset per band) > Zigzag > Entropy; needs "
    "geozl to encode; NOT portable, though rumi-eo 0.16.0 and 0.26.1 both decode it (their "
    "libraries carry the average codec); uint16 0.477, uint8 0.429, decode ~450 MiB/s",
    builder=_build_geozl_average,
    portable=False,
    geozl=True,
    formats=_INTEGER_FORMATS,
    key=_geo_key,
    readers=readers_of({"average"}, REFERENCE_MAX_FORMAT_VERSION),
)


# --------------------------------------------------------------- geozl recipes

#: Prefix of a codec name that is a geozl 2D recipe: ``"geozl:planar>zigzag>pfor"``.
RECIPE_PREFIX = "geozl:"
# geozl's fused codecs: a recipe's "<predictor>>zigzag" or "planar>zigzag>pfor" is one codec
_FUSED = (("planar", "zigzag", "pfor"), ("planar", "zigzag"), ("med", "zigzag"))
_PREDICTOR_CODECS = {"delta_w": "delta_w", "delta_n": "delta_n", "average": "average", "wp_static": "wp_static",
                     "planar": "planar", "med": "med", "pfor": "pfor"}  # id, delta_1d, zigzag, ...: built-ins
_V27_PARTS = frozenset({"pivco", "sparse"})  # written at frame format 27 (measured)


def recipe_codecs(recipe: str) -> tuple[frozenset, int]:
    """(geozl codecs a recipe's frames reference, their frame format version), from the recipe's name.

    The tests check this against :func:`rumimm.codec.frame_codecs` on real frames.
    """
    parts = recipe.split(">")
    codecs = set()
    i = 0
    while i < len(parts):
        for fused in _FUSED:
            if tuple(parts[i:i + len(fused)]) == fused:
                codecs.add("_".join(fused))
                i += len(fused)
                break
        else:
            if parts[i] == "pivco":
                codecs.add(C_ONLY)
            elif parts[i] in _PREDICTOR_CODECS:
                codecs.add(_PREDICTOR_CODECS[parts[i]])
            i += 1
    version = 27 if _V27_PARTS & set(parts) else REFERENCE_MAX_FORMAT_VERSION
    return frozenset(codecs), version


def _recipe_key(shape: tuple[int, ...]) -> Hashable:
    return tuple(int(n) for n in shape)


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
        widths=_NUMERIC_WIDTHS,
        formats=None,
        builder=_no_builder,
        graph_key=_recipe_key,
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


def _build_auto(c, enc, shape):
    return _default_for(enc).build(c, enc, shape)


_AUTO = Codec(
    name="auto",
    description="the default preset of each dtype: 'delta', or 'transpose' for float64 and complex128; portable",
    portable=True,
    requires_geozl=False,
    lossless=True,
    widths=_ALL_WIDTHS,
    builder=_build_auto,
)

# ---------------------------------------------------------- per-dtype tables

# Chosen from asv_benchmarks/recipes.py (docs/dev/codec-measurements.md, "Recipes"):
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
        widths=_ALL_WIDTHS,
        builder=_no_builder,
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


def resolve_codec(codec, encoding, spec: str = "0.1") -> Codec:
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
            widths=_ALL_WIDTHS,
            builder=lambda c, e, s: fn(c),
            readers=frozenset(),  # unknown: rumimm.codec.frame_codecs finds them from a frame
        )
    if codec.members is not None and codec.supports(enc):
        return codec.for_encoding(enc)
    if not codec.supports(enc):
        usable = ", ".join(n for n, c in PRESETS.items() if c.supports(enc))
        raise ValueError(f"codec {codec.name!r} does not support {enc.name} samples; use one of: {usable}")
    return codec
