"""Per-frame checks and error mapping, shared by every read path of the engine.

Each new frame's OpenZL header is checked once per open image before its first decode
(:func:`check_header`); a failed decode becomes one :class:`~rumimm.errors.CodecError`
naming the file, the frame and its position (:func:`frame_error`), whichever path
decoded it: the numba kernels, a small read through ctypes, or the ``openzl.ext``
fallback (:func:`fallback_frames`) when geozl's library is missing.  Imported by
``engine._load_decoder`` (under the engine's load lock), with OpenZL.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

import numpy as np

from rumimm import codec
from rumimm.codec import geozl_lib
from rumimm.errors import CodecError
from rumimm.format.tiff import OPENZL_FORMAT_VERSIONS, OPENZL_MAGIC

if TYPE_CHECKING:
    from rumimm.reader.source import FrameSource

__all__ = ["check_header", "check_pinned", "fallback_frames", "frame_error"]


def frame_error(fs: FrameSource, k: int, code: int) -> CodecError:
    """The error for frame k's kernel status, from what is known (no second decode)."""
    if code == geozl_lib.STATUS_SIZE_MISMATCH:
        reason = f"decoded to a different size than the {fs.grid.frame_shape(k)} frame at this position holds"
    else:
        reason = geozl_lib.status_message(code)
    return CodecError(f"{fs.label(k)} failed to decode ({reason}); the file may be corrupt or truncated")


def check_pinned(fs: FrameSource, k: int, frame) -> None:
    """Frame k must start with frame 0's magic: one pinned OpenZL format version per file."""
    if frame.shape[0] < 4:
        return  # not an OpenZL frame at all: the decoder says so
    (magic,) = struct.unpack_from("<I", frame, 0)
    if fs.magic0 is None:  # a remote image opened with a blob: the first frame read sets it
        lo, hi = OPENZL_FORMAT_VERSIONS
        if not lo <= magic - OPENZL_MAGIC <= hi:
            raise CodecError(f"{fs.label(k)} does not start with an OpenZL frame magic (found {magic:#010x}); "
                             "the header blob belongs to another file or the file is corrupt")
        fs.magic0 = magic
    if magic != fs.magic0:
        raise CodecError(f"{fs.label(k)} starts with {magic:#010x} but frame 0 with {fs.magic0:#010x} (OpenZL format "
                         f"version {fs.magic0 - OPENZL_MAGIC}); all frames of a file must use one pinned OpenZL "
                         "format version")


def check_header(fs: FrameSource, k: int, frame=None, nbytes: int | None = None) -> None:
    """Check frame k's OpenZL header (one output, its type and byte size) once per image.

    geozl's C decoder reports only the decoded byte count, so a frame of the right size
    but the wrong type (Serial, String) would otherwise decode silently.  A frame that
    declares what it should costs one ``codec.frame_declaration`` (~3 us); any other goes
    through ``codec.check_frame_header``, which says what is wrong.  A frame already
    checked on this image returns at once.  ``frame``: its bytes when the caller has
    them, else they are read from the store; ``nbytes``: its decoded byte count, when
    the caller knows it.
    """
    checked = fs.header_checked
    if checked[k]:
        return
    if frame is None:
        frame = fs.read_frame(k)
    check_pinned(fs, k, frame)
    want = codec.zl.Type.Struct if fs.isz == 16 else codec.zl.Type.Numeric
    # spec 0.2 lets a complex128 frame hold its float64 components (Numeric, same bytes)
    components = fs.header.format_spec.component_frames(fs.isz)
    if nbytes is None:
        nbytes = fs.grid.frame_samples(k) * fs.isz
    try:
        outputs, typ, size = _declaration(frame)
        ok = outputs == 1 and size == nbytes and (typ == want or (components and typ == codec.zl.Type.Numeric))
    except CodecError:
        ok = False
    if not ok:  # the label costs a few us: build it only for the error
        try:
            codec.check_frame_header(frame, fs.enc, nbytes // fs.isz, label=fs.label(k), components=components)
        except CodecError as exc:
            msg = str(exc)  # an unreadable header already says the file may be truncated
            raise CodecError(msg if "may be truncated" in msg else f"{msg}; the file may be corrupt or truncated") \
                from None
    checked[k] = 1


_DECLARED: dict = {}  # a frame's first 64 bytes -> what its header declares
_DECLARED_MAX = 4096


def _declaration(frame) -> tuple:
    """``codec.frame_declaration``, remembered by the frame's first 64 bytes.

    The declaration is a function of the header bytes alone, and a one-output frame's
    header fits in 64 bytes, so a frame read again (the same file opened again, or a
    copy) skips OpenZL's header parser (~30 us when its code is out of the CPU caches).
    A header longer than 64 bytes is parsed from the whole frame, every time.
    """
    head = bytes(frame[:64])
    got = _DECLARED.get(head)
    if got is None:
        if len(head) < 64:
            return codec.frame_declaration(frame)
        try:
            got = codec.frame_declaration(head)
        except CodecError:
            return codec.frame_declaration(frame)
        if len(_DECLARED) >= _DECLARED_MAX:
            _DECLARED.clear()
        _DECLARED[head] = got
    return got


def fallback_frames(sources, ks, owners) -> list[np.ndarray]:
    """Decode frames with openzl.ext (holds the GIL) when geozl's library is missing."""
    from rumimm.reader.source import frame_bytes

    dec = codec.FrameDecoder()  # per call: an OpenZL DCtx kept in a thread-local could outlive openzl at exit
    raw = frame_bytes(sources, owners, ks, range(len(ks)))  # one get_ranges per store, as the other executors
    out = []
    for g, (k, i) in enumerate(zip(ks, owners, strict=True)):
        fs = sources[i]
        frame = raw[g]
        check_pinned(fs, k, frame)
        try:
            arr = dec.decode(frame, fs.enc, fs.grid.frame_samples(k), components=fs.header.format_spec.components)
        except CodecError as exc:
            msg = str(exc).removeprefix("frame ")
            raise CodecError(f"{fs.label(k)}: {msg}") from None
        out.append(np.ascontiguousarray(arr).view(np.uint8).reshape(-1))
    return out
