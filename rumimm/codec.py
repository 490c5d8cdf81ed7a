"""The OpenZL wrapper: compress and decompress one rumi frame.

A frame is one self-contained OpenZL frame holding the samples of one tile
``(h, w)`` or one cell ``(B, h, w)`` in row-major order.  It decodes to exactly one
OpenZL output: ``Type.Numeric`` whose element width is the sample's storage itemsize
(1, 2, 4 or 8 bytes), or ``Type.Struct`` of width 16 for complex128.  Sub-byte
samples are stored one per byte in the byte's low bits, with the high bits zero.

This module owns the OpenZL details the rest of rumimm must not know: the pinned
frame format version (24, the newest the reference reader decodes), sticky CCtx
parameters, keeping input arrays alive across ``compress``, content and compressed
checksums, allocation bounds for hostile frames, and translating every OpenZL
failure into :class:`~rumimm.errors.CodecError`.  Compression graphs are named
presets (:data:`PRESETS`), chosen by measurement on :func:`rumimm.synthetic.eo_scene`
(see ``docs/dev/codec-measurements.md``); a user may also pass any callable that
builds a graph on an ``openzl.ext.Compressor``.

``openzl.ext`` holds the GIL inside ``CCtx.compress`` and ``DCtx.decompress``
(measured, openzl 0.3.0), so threads do not speed up encoding or decoding.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np
import openzl.ext as zl
from openzl.ext import graphs as _g
from openzl.ext import nodes as _n

from .dtypes import ENCODINGS, Encoding, encoding_for_dtype
from .errors import CodecError
from .tiff import OPENZL_MAGIC

__all__ = [
    "DEFAULT_FORMAT_VERSION",
    "MIN_FORMAT_VERSION",
    "MAX_FORMAT_VERSION",
    "FRAME_MAGIC",
    "Codec",
    "PRESETS",
    "DEFAULT_PRESETS",
    "resolve_codec",
    "frame_format_version",
    "check_frame_header",
    "frame_declaration",
    "FrameEncoder",
    "FrameDecoder",
]

#: The OpenZL frame format version rumimm writes: the newest rumi-eo 0.16.0 decodes.
DEFAULT_FORMAT_VERSION = 24
#: Oldest frame format version the installed OpenZL knows.
MIN_FORMAT_VERSION: int = zl.MIN_FORMAT_VERSION
#: Newest frame format version the installed OpenZL writes and reads.
MAX_FORMAT_VERSION: int = zl.MAX_FORMAT_VERSION
#: First four bytes of an OpenZL frame, little-endian, are FRAME_MAGIC + version.
FRAME_MAGIC = OPENZL_MAGIC

# Versions before 14 accept only one Serial input (measured, openzl 0.3.0), so a
# Numeric frame cannot be written at them.
_MIN_NUMERIC_FORMAT_VERSION = 14

_STRUCT_WIDTH = 16  # complex128 is stored as Struct of width 16


# --------------------------------------------------------------------------- errors


def _reason(exc: BaseException) -> str:
    """The short OpenZL reason from an exception text, for a one-line message."""
    text = str(exc)
    for line in text.splitlines():
        if line.startswith("OpenZL error string:"):
            return line.split(":", 1)[1].strip().rstrip(".").lower()
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Message:"):
            line = line.split(":", 1)[1].strip()
        if line:
            return line[:200].rstrip(".").lower()
    return type(exc).__name__.lower()


# ------------------------------------------------------------------------- versions


def _as_bytes(frame) -> bytes:
    if isinstance(frame, bytes):
        return frame
    if isinstance(frame, np.ndarray):
        if frame.dtype != np.uint8:
            raise TypeError(f"frame must be bytes or a uint8 array, got a {frame.dtype} array")
        return frame.tobytes()
    if isinstance(frame, (bytearray, memoryview)):
        return bytes(frame)
    raise TypeError(f"frame must be bytes, memoryview or a uint8 array, got {type(frame).__name__}")


def frame_format_version(frame) -> int:
    """Return the OpenZL frame format version written in a frame's magic.

    Parameters
    ----------
    frame : bytes, memoryview or numpy.ndarray of uint8
        At least the first four bytes of an OpenZL frame.

    Returns
    -------
    int
        The format version, in ``[MIN_FORMAT_VERSION, MAX_FORMAT_VERSION]``.

    Raises
    ------
    CodecError
        If the bytes do not start with the OpenZL magic or the version is outside
        the range the installed OpenZL knows.

    Examples
    --------
    >>> frame_format_version(bytes.fromhex("d8a5b1d7"))
    24
    """
    if isinstance(frame, np.ndarray):
        if frame.dtype != np.uint8:
            raise TypeError(f"frame must be bytes or a uint8 array, got a {frame.dtype} array")
        head = bytes(frame.reshape(-1)[:4])
    else:
        head = bytes(frame[:4])
    if len(head) < 4:
        raise CodecError(f"expected at least 4 bytes for the OpenZL magic, found {len(head)}; the frame is truncated")
    version = int.from_bytes(head, "little") - FRAME_MAGIC
    if not MIN_FORMAT_VERSION <= version <= MAX_FORMAT_VERSION:
        raise CodecError(
            f"expected the OpenZL magic 0x{FRAME_MAGIC:08X} + version {MIN_FORMAT_VERSION}..{MAX_FORMAT_VERSION} "
            f"(little-endian), found bytes {head.hex()}; the bytes are not an OpenZL frame"
        )
    return version


# -------------------------------------------------------------------------- graphs

_NUMERIC_WIDTHS = frozenset((1, 2, 4, 8))
_ALL_WIDTHS = frozenset((1, 2, 4, 8, 16))
_INTEGER_FORMATS = frozenset((1, 2))
_FLOAT_FORMATS = frozenset((3, 102))  # IEEE floats and bfloat16



def frame_declaration(frame) -> tuple[int, "zl.Type | None", int]:
    """(outputs, type of output 0, its byte size) that an OpenZL frame's header declares.

    ``frame`` may be the whole frame or any prefix of it holding the header: the
    first 64 bytes are tried first (the header of a one-output frame is about a
    dozen bytes, so this is the common case, ~3 us), then the whole of ``frame``.

    Raises
    ------
    CodecError
        The header is unreadable (the message is OpenZL's reason alone).
    """
    for head in (frame[:64], frame) if len(frame) > 64 else (frame,):
        try:
            info = zl.FrameInfo(head if isinstance(head, bytes) else bytes(head))
            outputs = info.num_outputs
            if outputs < 1:
                return outputs, None, 0
            return outputs, info.output_type(0), info.output_content_size(0)
        except Exception as exc:  # noqa: BLE001 - nanobind raises plain RuntimeError/ValueError
            reason = _reason(exc)
    raise CodecError(reason)


def check_frame_header(frame, encoding, n_samples: int, *, label: str = "frame") -> None:
    """Check what an OpenZL frame declares before it is decoded.

    A rumi frame must hold one output of ``Type.Numeric`` (``Type.Struct`` for
    complex128) whose content is exactly ``n_samples`` samples of the encoding's
    storage width.  The header says the type and the byte size, not the element
    width, so this rules out a frame of the right byte count but the wrong type
    (Serial, String) without decoding it; the width is checked after decoding.
    ``frame`` is read as :func:`frame_declaration` reads it.

    Raises
    ------
    CodecError
        Bad magic or version, unreadable header, not one output, wrong type or
        wrong size; ``label`` starts the message (e.g. ``"scene.rumi: frame 9"``).
    """
    enc = _as_encoding(encoding)
    width = enc.storage_dtype.itemsize
    want_type = zl.Type.Struct if width == _STRUCT_WIDTH else zl.Type.Numeric
    expected = int(n_samples) * width
    try:
        frame_format_version(frame)
    except CodecError as exc:
        raise CodecError(f"{label}: {exc}") from None
    try:
        outputs, out_type, size = frame_declaration(frame)
    except CodecError as exc:
        raise CodecError(f"{label} has an unreadable header (OpenZL: {exc}); the file may be truncated or corrupt") \
            from None
    if outputs != 1:
        raise CodecError(f"{label} holds {outputs} outputs, expected 1")
    if out_type != want_type:
        raise CodecError(f"{label} decodes to {out_type.name} data, expected {want_type.name}")
    if size != expected:
        raise CodecError(
            f"{label} declares {size} bytes of samples, expected {expected} ({n_samples} samples of width {width})"
        )


def _bytes_entropy(c: zl.Compressor, width: int) -> zl.GraphID:
    """Order-0 entropy coding, on byte lanes (a transpose) for samples wider than a byte."""
    if width == 1:
        return _g.Entropy()(c)
    if width == _STRUCT_WIDTH:
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


def _geozl_lossless():
    try:
        import geozl.lossless as lossless
    except ImportError as exc:  # pragma: no cover - geozl is installed in the test env
        raise ImportError("this codec needs the geozl package; install geozl or choose a portable codec") from exc
    return lossless


def _build_geozl_planar(c, enc, shape):
    width, planes = _geometry(shape)
    node = _geozl_lossless().PlanarZigzag(width, planes)
    return node(c, _delta_tail(c, enc))


def _build_geozl_average(c, enc, shape):
    width, planes = _geometry(shape)
    node = _geozl_lossless().Average(width, planes)
    return node(c, _n.Zigzag()(c, _delta_tail(c, enc)))


def _no_key(shape: tuple[int, ...]) -> Hashable:
    return None


@dataclass(frozen=True)
class Codec:
    """A named way to build an OpenZL graph for one frame.

    Attributes
    ----------
    name : str
        Preset name (a key of :data:`PRESETS`) or ``"custom:<callable name>"``.
    description : str
        What the graph does and its measured numbers.
    portable : bool
        True when the reference reader (rumi-eo 0.16.0) decodes its frames.
    requires_geozl : bool
        True when encoding and decoding need the geozl package.
    lossless : bool or None
        True for every preset; None for a user graph, whose losslessness is the
        user's responsibility.
    widths : frozenset of int
        Storage itemsizes (1, 2, 4, 8, 16) the graph accepts.
    formats : frozenset of int or None
        Sample formats the preset is meant for, or None for any.
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

    def supports(self, encoding: Encoding) -> bool:
        """Whether frames of ``encoding`` can go through this codec."""
        if encoding.storage_dtype.itemsize not in self.widths:
            return False
        return self.formats is None or encoding.sample_format in self.formats

    def build(self, compressor: zl.Compressor, encoding: Encoding, shape: tuple[int, ...] = ()) -> zl.GraphID:
        """Build this codec's graph on ``compressor`` for frames of ``shape``."""
        gid = self.builder(compressor, encoding, tuple(shape))
        if not isinstance(gid, zl.GraphID):
            raise TypeError(f"codec {self.name!r} built {type(gid).__name__}, expected openzl.ext.GraphID")
        return gid


def _geo_key(shape: tuple[int, ...]) -> Hashable:
    return _geometry(shape)


def _preset(name, description, *, builder, portable=True, geozl=False, widths=_NUMERIC_WIDTHS, formats=None, key=_no_key):
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
    "to encode and decode, NOT portable. uint16 0.498",
    builder=_build_geozl_planar,
    portable=False,
    geozl=True,
    formats=_INTEGER_FORMATS,
    key=_geo_key,
)
_GEOZL_AVERAGE = _preset(
    "geozl-average",
    "geozl Average 2D predictor ((W + N) / 2, reset per band) > Zigzag > Entropy; needs "
    "geozl, NOT portable; the smallest integer preset measured: uint16 0.477, uint8 0.429, "
    "decode ~450 MiB/s",
    builder=_build_geozl_average,
    portable=False,
    geozl=True,
    formats=_INTEGER_FORMATS,
    key=_geo_key,
)


def _default_for(encoding: Encoding) -> Codec:
    w = encoding.storage_dtype.itemsize
    if w == _STRUCT_WIDTH or encoding.name == "float64":
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
    )
}


def _as_encoding(encoding) -> Encoding:
    if isinstance(encoding, Encoding):
        return encoding
    return encoding_for_dtype(encoding)


def resolve_codec(codec, encoding) -> Codec:
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
    enc = _as_encoding(encoding)
    if codec is None or (isinstance(codec, str) and codec == "auto"):
        return _default_for(enc)
    if isinstance(codec, str):
        found = PRESETS.get(codec)
        if found is None:
            names = ", ".join(sorted(PRESETS))
            raise ValueError(f"codec {codec!r} is not a preset; expected one of: {names}")
        codec = found
    elif not isinstance(codec, Codec):
        if not callable(codec):
            raise TypeError(
                f"codec must be None, a preset name, a Codec or a callable returning a GraphID, got {type(codec).__name__}"
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
        )
    if not codec.supports(enc):
        usable = ", ".join(n for n, c in PRESETS.items() if c.supports(enc))
        raise ValueError(f"codec {codec.name!r} does not support {enc.name} samples; use one of: {usable}")
    return codec


# ------------------------------------------------------------------------ encoding


def _check_version(format_version) -> int:
    v = int(format_version)
    if v != format_version or not _MIN_NUMERIC_FORMAT_VERSION <= v <= MAX_FORMAT_VERSION:
        raise ValueError(
            f"format_version must be an int in [{_MIN_NUMERIC_FORMAT_VERSION}, {MAX_FORMAT_VERSION}], "
            f"got {format_version!r}; rumi-eo 0.16.0 reads up to {DEFAULT_FORMAT_VERSION}"
        )
    return v


class FrameEncoder:
    """Compress frames of one encoding with one codec into OpenZL frames.

    Owns its OpenZL ``Compressor`` and ``CCtx`` objects (one pair per graph: a
    geozl graph depends on the frame's row width and band count).  Not
    thread-safe: use one encoder per thread.  Every frame is written at
    ``format_version`` with the content and compressed checksums on.

    Parameters
    ----------
    codec : None, str, Codec or callable
        See :func:`resolve_codec`.
    encoding : Encoding or dtype-like
        The sample encoding; frames passed to :meth:`encode` must have its dtype.
    format_version : int, optional
        OpenZL frame format version, default :data:`DEFAULT_FORMAT_VERSION` (24,
        the newest rumi-eo 0.16.0 reads); 14..MAX_FORMAT_VERSION is accepted.

    Examples
    --------
    >>> enc = FrameEncoder(None, "uint16")
    >>> frame = enc.encode(np.zeros((512, 512), np.uint16))
    >>> frame_format_version(frame)
    24
    """

    def __init__(self, codec, encoding, format_version: int = DEFAULT_FORMAT_VERSION):
        self.encoding: Encoding = _as_encoding(encoding)
        self.codec: Codec = resolve_codec(codec, self.encoding)
        self.format_version: int = _check_version(format_version)
        if self.codec.requires_geozl:
            _geozl_lossless()  # fail now, not at the first frame
        self._contexts: dict[Hashable, tuple[zl.Compressor, zl.CCtx]] = {}
        self._struct = self.encoding.storage_dtype.itemsize == _STRUCT_WIDTH
        self._mask = (1 << self.encoding.bits_per_sample) - 1 if self.encoding.subbyte else None

    @property
    def portable(self) -> bool:
        """True when the reference reader decodes this encoder's frames."""
        return self.codec.portable and self.format_version <= DEFAULT_FORMAT_VERSION

    def _context(self, shape: tuple[int, ...]) -> zl.CCtx:
        key = self.codec.graph_key(shape)
        ctx = self._contexts.get(key)
        if ctx is None:
            compressor = zl.Compressor()
            try:
                gid = self.codec.build(compressor, self.encoding, shape)
                compressor.select_starting_graph(gid)
                cctx = zl.CCtx()
                cctx.ref_compressor(compressor)
                # without StickyParameters a CCtx forgets these after one compress
                cctx.set_parameter(zl.CParam.StickyParameters, 1)
                cctx.set_parameter(zl.CParam.FormatVersion, self.format_version)
                cctx.set_parameter(zl.CParam.ContentChecksum, 1)
                cctx.set_parameter(zl.CParam.CompressedChecksum, 1)
            except (TypeError, ImportError):
                raise
            except Exception as exc:
                raise CodecError(
                    f"codec {self.codec.name!r} failed to build its graph for {self.encoding.name} "
                    f"frames of shape {shape} (OpenZL: {_reason(exc)})"
                ) from exc
            ctx = (compressor, cctx)
            self._contexts[key] = ctx
        return ctx[1]

    def _storage(self, frame) -> np.ndarray:
        """The frame's samples as a flat, C-contiguous array of the storage dtype."""
        arr = np.asarray(frame)
        enc = self.encoding
        if arr.dtype != enc.dtype:
            raise ValueError(f"frame dtype is {arr.dtype}, expected {enc.dtype} ({enc.name})")
        if arr.ndim not in (2, 3):
            raise ValueError(f"frame must be (h, w) or (B, h, w), got shape {arr.shape}")
        if arr.size == 0:
            raise ValueError(f"frame shape {arr.shape} has no samples")
        if not (arr.flags.c_contiguous and arr.flags.aligned):
            arr = arr.copy(order="C")  # OpenZL refuses unaligned buffers; a copy is aligned
        if self._struct:
            return arr.reshape(-1).view(np.uint8)
        flat = arr.reshape(-1).view(enc.storage_dtype)
        if enc.bits_per_sample == 1:
            return np.not_equal(flat, 0).view(np.uint8)  # bool: exactly 0 or 1
        if self._mask is not None:
            return np.bitwise_and(flat, np.uint8(self._mask))  # zero the unused high bits
        return flat

    def encode(self, frame: np.ndarray) -> bytes:
        """Compress one frame and return the OpenZL frame bytes.

        Parameters
        ----------
        frame : numpy.ndarray
            Samples of the encoder's dtype, shape ``(h, w)`` (a tile frame) or
            ``(B, h, w)`` (a cell frame), any strides.

        Returns
        -------
        bytes
            One OpenZL frame that decodes to ``frame.size`` samples.

        Raises
        ------
        ValueError
            Wrong dtype, rank or an empty frame.
        CodecError
            OpenZL failed to compress (the message carries OpenZL's reason).
        """
        data = self._storage(frame)
        shape = np.shape(frame)
        cctx = self._context(shape)
        if self._struct:
            # openzl.ext reads a 2-D uint8 array as (struct width, count)
            data = data.reshape(_STRUCT_WIDTH, -1)
            inp = zl.Input(zl.Type.Struct, data)
        else:
            inp = zl.Input(zl.Type.Numeric, data)
        # Input does not keep `data` alive: `data` stays referenced until compress returns
        try:
            out = cctx.compress([inp])
        except Exception as exc:
            raise CodecError(
                f"frame of shape {shape} failed to compress with codec {self.codec.name!r} (OpenZL: {_reason(exc)})"
            ) from exc
        finally:
            del inp, data
        return out


# ------------------------------------------------------------------------ decoding


class FrameDecoder:
    """Decompress OpenZL frames, checking what they decode to before and after.

    Owns one OpenZL ``DCtx``, with the geozl decoders registered when geozl can be
    imported (frames of the ``geozl-*`` presets need them).  Not thread-safe:
    use one decoder per thread.  Content and compressed checksums are verified.

    Parameters
    ----------
    decoders : iterable of openzl.ext.CustomDecoder, optional
        Extra custom decoders a user graph needs.
    """

    def __init__(self, decoders=()):
        self._dctx = zl.DCtx()
        self._dctx.set_parameter(zl.DParam.StickyParameters, 1)
        self._dctx.set_parameter(zl.DParam.CheckCompressedChecksum, 1)
        self._dctx.set_parameter(zl.DParam.CheckContentChecksum, 1)
        self.geozl = False
        try:
            import geozl
        except ImportError:  # pragma: no cover - optional dependency
            pass
        else:
            geozl.register_decoders(self._dctx)
            self.geozl = True
        for d in decoders:
            self._dctx.register_custom_decoder(d)

    def decode(
        self,
        frame,
        encoding,
        n_samples: int,
        *,
        index: int | None = None,
        where: str = "",
    ) -> np.ndarray:
        """Decode one frame to a flat array of ``encoding.storage_dtype``.

        Parameters
        ----------
        frame : bytes, memoryview or numpy.ndarray of uint8
            One OpenZL frame.  ``DCtx.decompress`` takes only ``bytes``, so other
            buffers are copied once.
        encoding : Encoding or dtype-like
            The sample encoding the frame must hold.
        n_samples : int
            Exact number of samples expected (``h * w`` or ``B * h * w``).
        index, where : optional
            Frame index and message prefix (``rumimm.errors.where(path)``) for errors.

        Returns
        -------
        numpy.ndarray
            Flat, read-only array of ``n_samples`` elements of the storage dtype
            (``<u1``/``<u2``/``<u4``/``<u8``, or ``V16`` for complex128).  For
            sub-byte encodings only the low ``bits_per_sample`` bits are kept.

        Raises
        ------
        CodecError
            The bytes are not an OpenZL frame, are corrupt or truncated, or decode
            to anything but ``n_samples`` samples of the encoding's width.  The
            declared output size is checked before decompressing, so a hostile
            frame cannot make this allocate more than the expected samples.
        """
        enc = _as_encoding(encoding)
        n = int(n_samples)
        if n < 0:
            raise ValueError(f"n_samples must be >= 0, got {n_samples}")
        label = f"{where}frame {index}" if index is not None else f"{where}frame"
        width = enc.storage_dtype.itemsize
        struct = width == _STRUCT_WIDTH
        want_type = zl.Type.Struct if struct else zl.Type.Numeric

        data = _as_bytes(frame)
        check_frame_header(data, enc, n, label=label)
        try:
            outs = self._dctx.decompress(data)
        except Exception as exc:
            hint = "" if self.geozl else "; if it was written with a geozl codec, install geozl"
            raise CodecError(
                f"{label} failed to decode (OpenZL: {_reason(exc)}); the file may be truncated or corrupt{hint}"
            ) from None
        if len(outs) != 1:
            raise CodecError(f"{label} decoded to {len(outs)} outputs, expected 1")
        out = outs[0]
        if out.type != want_type or out.elt_width != width or out.num_elts != n:
            raise CodecError(
                f"{label}: decoded {out.num_elts} samples of width {out.elt_width}, expected {n} of width {width}"
            )
        arr = out.content.as_nparray()  # a view that keeps the OpenZL buffer alive
        if struct:
            return arr.reshape(-1).view(enc.storage_dtype)
        arr = arr.reshape(-1)
        if arr.dtype != enc.storage_dtype:
            arr = arr.view(enc.storage_dtype)
        if enc.subbyte:
            # a foreign writer may leave high bits set: readers take the low bits
            arr = np.bitwise_and(arr, np.uint8((1 << enc.bits_per_sample) - 1))
            arr.flags.writeable = False
        return arr
