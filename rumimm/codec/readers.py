"""Which readers decode a frame: the codecs an OpenZL frame references, found by decoding it.

A frame does not name its preset, and ``openzl.ext`` exposes no parser of the decoder
graph a frame header carries.  What a frame needs is learnt by trial decodes, each one
authoritative: with OpenZL's built-in decoders alone; then with geozl's Python-registered
decoders, leaving each out in turn to find the ones the frame cannot do without; then
with geozl's C library (``libgeozl``, which also holds codecs newer than its Python
registry, such as ``pivco``).  About 15 decodes of one frame at worst (a 512 x 512
uint16 frame: ~10-30 ms), so callers sample a few frames, not all.

Which readers decode a frame follows from those codecs and the frame format version
(:func:`~rumimm.codec.compat.readers_of`): rumimm decodes every frame geozl 0.19 or
``openzl.ext`` decodes; each reference decodes frame format <= 24 with OpenZL's built-ins
and the geozl codecs its library was measured to carry
(:data:`~rumimm.codec.compat.REFERENCE_CODECS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import openzl.ext as zl

from rumimm.codec import geozl_lib
from rumimm.codec.compat import C_ONLY, READERS, readers_of
from rumimm.codec.frames import as_bytes, frame_declaration, frame_format_version
from rumimm.errors import CodecError

__all__ = ["FrameCodecs", "frame_codecs"]


@dataclass(frozen=True)
class FrameCodecs:
    """What one frame needs.

    Attributes
    ----------
    format_version : int
        OpenZL frame format version from the frame's magic.
    codecs : frozenset of str
        geozl codecs the frame cannot be decoded without (``"planar_zigzag"``, ``"pfor"``),
        empty for a frame of OpenZL built-ins only; ``{C_ONLY}`` alone when only geozl's C
        library decodes it (the trial then cannot tell which other codecs it uses).
    decodable : bool
        Whether rumimm decoded it at all.
    """

    format_version: int
    codecs: frozenset
    decodable: bool

    @property
    def readers(self) -> tuple[str, ...]:
        """The readers (in the order of :data:`~rumimm.codec.compat.READERS`) that decode this frame."""
        if not self.decodable:
            return ()
        ok = readers_of(self.codecs, self.format_version)
        return tuple(r for r in READERS if r in ok)


def _decoder_classes() -> dict[str, type]:
    try:
        import geozl.lossless as lossless
    except ImportError:  # pragma: no cover - geozl is a dependency
        return {}
    out = {}
    for attr in dir(lossless):
        if attr.endswith("Decoder") and not attr.startswith("_"):
            cls = getattr(lossless, attr)
            if isinstance(cls, type) and issubclass(cls, zl.CustomDecoder):
                out[_snake(attr[: -len("Decoder")])] = cls
    return out


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(name))


def _decodes(frame: bytes, decoders) -> bool:
    dctx = zl.DCtx()
    for cls in decoders:
        dctx.register_custom_decoder(cls())
    try:
        dctx.decompress(frame)
    except Exception:
        return False
    return True


def _c_decodes(frame: bytes) -> bool:
    if not geozl_lib.available():
        return False
    fns = geozl_lib.functions()
    src = np.frombuffer(frame, np.uint8)
    need = int(fns[1](src.ctypes.data, src.size))
    if need <= 0 or need > (1 << 31):
        return False
    dst = np.empty(need // 8 + 1, np.uint64)
    return geozl_lib.decompress(src.ctypes.data, src.size, dst.ctypes.data, need, True) == need


def frame_codecs(frame, max_bytes: int | None = None) -> FrameCodecs:
    """Find what ``frame`` needs to be decoded, by trial decodes (module docstring).

    Parameters
    ----------
    frame : bytes, memoryview or numpy.ndarray of uint8
        One whole OpenZL frame.
    max_bytes : int, optional
        The most decoded bytes the frame may declare (a rumi frame: its samples times
        the sample width).  A frame declaring more, or not one output, is not decoded
        (``decodable=False``): a hostile header cannot make this allocate.

    Raises
    ------
    CodecError
        The bytes are not an OpenZL frame (bad magic or version).
    """
    data = as_bytes(frame)
    version = frame_format_version(data)
    if max_bytes is not None:
        try:
            outputs, _, size = frame_declaration(data)
        except CodecError:
            return FrameCodecs(version, frozenset(), False)
        if outputs != 1 or size > max_bytes:
            return FrameCodecs(version, frozenset(), False)
    if _decodes(data, ()):
        return FrameCodecs(version, frozenset(), True)
    classes = _decoder_classes()
    if classes and _decodes(data, classes.values()):
        needed = frozenset(name for name in classes
                           if not _decodes(data, [c for n, c in classes.items() if n != name]))
        return FrameCodecs(version, needed, True)
    if _c_decodes(data):
        return FrameCodecs(version, frozenset({C_ONLY}), True)
    return FrameCodecs(version, frozenset(), False)
