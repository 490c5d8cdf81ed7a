"""OpenZL frame inspection: magic, format version and what a frame's header declares.

Reads only a frame's first bytes and its OpenZL header (``openzl.ext.FrameInfo``);
nothing is decoded.  The read engine checks each frame with
:func:`frame_declaration` before its first decode; ``validate`` words a bad frame
with :func:`check_frame_header`.
"""

from __future__ import annotations

import numpy as np
import openzl.ext as zl

from rumimm.errors import CodecError
from rumimm.format.dtypes import Encoding, encoding_for_dtype
from rumimm.format.tiff import OPENZL_MAGIC

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
MIN_NUMERIC_FORMAT_VERSION = 14

STRUCT_WIDTH = 16  # complex128 is stored as Struct of width 16


# --------------------------------------------------------------------------- errors


def failure_reason(exc: BaseException) -> str:
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


def as_bytes(frame) -> bytes:
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






def frame_declaration(frame) -> tuple[int, zl.Type | None, int]:
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
        except Exception as exc:
            reason = failure_reason(exc)
    raise CodecError(reason)


def check_frame_header(frame, encoding, n_samples: int, *, label: str = "frame", components: bool = False) -> None:
    """Check what an OpenZL frame declares before it is decoded.

    A rumi frame must hold one output of ``Type.Numeric`` (``Type.Struct`` for
    complex128) whose content is exactly ``n_samples`` samples of the encoding's
    storage width.  The header says the type and the byte size, not the element
    width, so this rules out a frame of the right byte count but the wrong type
    (Serial, String) without decoding it; the width is checked after decoding.
    ``frame`` is read as :func:`frame_declaration` reads it.  ``components``: spec 0.2
    also lets a complex128 frame hold its float64 components as ``Type.Numeric``.

    Raises
    ------
    CodecError
        Bad magic or version, unreadable header, not one output, wrong type or
        wrong size; ``label`` starts the message (e.g. ``"scene.rumi: frame 9"``).
    """
    enc = as_encoding(encoding)
    width = enc.storage_dtype.itemsize
    want_type = zl.Type.Struct if width == STRUCT_WIDTH else zl.Type.Numeric
    expected = int(n_samples) * width
    if components and width == STRUCT_WIDTH:
        want_type = (zl.Type.Struct, zl.Type.Numeric)
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
    if out_type not in (want_type if isinstance(want_type, tuple) else (want_type,)):
        names = " or ".join(t.name for t in (want_type if isinstance(want_type, tuple) else (want_type,)))
        raise CodecError(f"{label} decodes to {out_type.name} data, expected {names}")
    if size != expected:
        raise CodecError(
            f"{label} declares {size} bytes of samples, expected {expected} ({n_samples} samples of width {width})"
        )


def as_encoding(encoding) -> Encoding:
    if isinstance(encoding, Encoding):
        return encoding
    return encoding_for_dtype(encoding)
