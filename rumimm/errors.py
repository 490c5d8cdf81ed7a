"""Exception and warning classes of rumimm.

Every error about a file, a blob or a frame derives from :class:`RumiError`, itself
a :class:`ValueError`, so callers can catch one class for "the data is bad".
Subclasses also inherit the builtin a caller would catch anyway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rumimm._typing import StrPath

__all__ = [
    "BlobError",
    "CRSError",
    "CodecError",
    "FormatError",
    "RenamedWarning",
    "RumiError",
    "RumiWarning",
    "WindowError",
    "where",
]


class RumiError(ValueError):
    """Root of every rumimm error: the data, file or argument breaks a rumi rule."""


class FormatError(RumiError):
    """A rumi file breaks the file profile (IFD, placement, frames, georeferencing)."""


class BlobError(FormatError):
    """A header blob breaks the blob layout (magic, version, fields, size, padding)."""


class CodecError(RumiError):
    """An OpenZL frame failed to compress or decode, or decoded to the wrong shape."""


class WindowError(RumiError, IndexError):
    """A selection is outside the image or not a valid index."""


class CRSError(RumiError):
    """A CRS or transform rumi cannot store (non-EPSG, vertical, compound, ...)."""


class RumiWarning(UserWarning):
    """A recoverable oddity, such as a non-canonical but readable blob."""


class RenamedWarning(DeprecationWarning):
    """A public name was renamed; the old one works for one release (docs/migration.md names its successor)."""


def where(path: StrPath | None) -> str:
    """Prefix for messages about a file: ``"scene.rumi: "`` or ``""``."""
    return f"{path}: " if path else ""
