"""Reading a rumi file's PAM sidecar (``NAME.rumi.aux.xml``): band metadata, never a failed read.

No sidecar means no metadata.  A sidecar that cannot be read (permissions, not XML,
a band the file does not have, a blob digest of another version of the file) means
no metadata and one :class:`rumimm.RumiWarning` saying why: the pixels are still
readable, and a broken sidecar must not make them unreadable.
"""

from __future__ import annotations

import errno
import warnings

from rumimm.errors import FormatError, RumiWarning
from rumimm.format.pam import MAX_BYTES, Metadata, blob_digest, parse_pam, sidecar_path

__all__ = ["read_metadata"]


def _ignored(name: str, why: str) -> Metadata | None:
    warnings.warn(f"{name}: {why}; the file's band metadata (nodata, descriptions, ...) is not applied",
                  RumiWarning, stacklevel=4)
    return None


def read_metadata(path: str, count: int, blob: bytes) -> Metadata:
    """The metadata of the file at ``path`` (``count`` bands, header blob ``blob``) from its sidecar."""
    name = sidecar_path(path)
    try:
        with open(name, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return Metadata.empty(count)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # a file name this long can have no sidecar
            return Metadata.empty(count)
        return _ignored(name, f"cannot read the sidecar ({exc.strerror or exc})") or Metadata.empty(count)
    try:
        meta = parse_pam(data, count, name)
    except FormatError as exc:
        return _ignored(name, str(exc).removeprefix(f"{name}: ")) or Metadata.empty(count)
    if meta.digest is not None and meta.digest != blob_digest(blob):
        return _ignored(name, "the sidecar was written for another version of the file (its header blob digest "
                        "differs)") or Metadata.empty(count)
    return meta
