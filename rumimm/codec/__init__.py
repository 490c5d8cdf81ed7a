"""The frame codec: OpenZL frames of rumi tiles and cells.

Modules: ``frames`` (what a frame declares: magic, version, header), ``presets`` (named
compression graphs and per-dtype preset tables), ``graphs`` (the OpenZL graph each built-in
preset builds), ``compat`` (which reader decodes which codecs and frame formats), ``readers`` (which readers decode a
frame, from the codecs it references), ``wrapper`` (``FrameEncoder``/``FrameDecoder`` over ``openzl.ext``) and
``geozl_lib`` (geozl's GIL-free C decoder through ctypes, no numba) and ``native`` (the same
decoder bound for numba kernels).

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

from rumimm.codec.compat import READER_SPECS, READERS
from rumimm.codec.frames import (
    DEFAULT_FORMAT_VERSION,
    FRAME_MAGIC,
    MAX_FORMAT_VERSION,
    MIN_FORMAT_VERSION,
    check_frame_header,
    frame_declaration,
    frame_format_version,
)
from rumimm.codec.frames import zl as zl  # openzl.ext, re-exported: the reader checks frames against codec.zl.Type
from rumimm.codec.presets import (
    DEFAULT_PRESET_BY_SPEC,
    DEFAULT_PRESETS,
    PRESETS,
    Codec,
    recipe_codec,
    resolve_codec,
)
from rumimm.codec.readers import FrameCodecs, frame_codecs
from rumimm.codec.wrapper import FrameDecoder, FrameEncoder

__all__ = [
    "DEFAULT_FORMAT_VERSION",
    "DEFAULT_PRESETS",
    "DEFAULT_PRESET_BY_SPEC",
    "FRAME_MAGIC",
    "MAX_FORMAT_VERSION",
    "MIN_FORMAT_VERSION",
    "PRESETS",
    "READERS",
    "READER_SPECS",
    "Codec",
    "FrameCodecs",
    "FrameDecoder",
    "FrameEncoder",
    "check_frame_header",
    "frame_codecs",
    "frame_declaration",
    "frame_format_version",
    "recipe_codec",
    "resolve_codec",
]
