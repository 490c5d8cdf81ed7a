"""Reading a rumi file's PAM sidecar (``NAME.rumi.aux.xml``): band metadata, never a failed read.

A remote file's sidecar is the object next to it (its URI + ``.aux.xml``), read with
one ranged GET when the metadata is first asked for; a 404 means no sidecar.
No sidecar means no metadata.  A sidecar that cannot be read (permissions, not XML,
a band the file does not have, a blob digest of another version of the file) means
no metadata and one :class:`rumimm.RumiWarning` saying why: the pixels are still
readable, and a broken sidecar must not make them unreadable.
"""

from __future__ import annotations

import errno
import warnings

from rumimm.errors import FormatError, RumiWarning
from rumimm.format.pam import MAX_BYTES, SUFFIX, Metadata, blob_digest, parse_pam, sidecar_path

__all__ = ["read_metadata", "read_remote_metadata"]


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
    return _checked(data, name, count, blob)


def read_remote_metadata(uri: str, storage_options, count: int, blob: bytes) -> Metadata:
    """:func:`read_metadata` of a remote file: its sidecar object, one ranged GET; 404 is no sidecar."""
    from rumimm.store import RemoteError, RemoteStore
    from rumimm.store.uri import public_name, sibling

    side = sibling(uri, SUFFIX)
    name = public_name(side)
    store = RemoteStore(side, storage_options)
    try:
        data = bytes(store.read(0, MAX_BYTES + 1))
    except RemoteError as exc:
        if exc.status == 404:
            return Metadata.empty(count)
        return _ignored(name, f"cannot read the sidecar ({str(exc).removeprefix(name + ': ')})") or \
            Metadata.empty(count)
    except FormatError as exc:  # an empty object: the range starts past its end
        return _ignored(name, str(exc).removeprefix(name + ": ")) or Metadata.empty(count)
    finally:
        store.close()
    return _checked(data, name, count, blob)


def _checked(data: bytes, name: str, count: int, blob: bytes) -> Metadata:
    try:
        meta = parse_pam(data, count, name)
    except FormatError as exc:
        return _ignored(name, str(exc).removeprefix(f"{name}: ")) or Metadata.empty(count)
    if meta.digest is not None and meta.digest != blob_digest(blob):
        return _ignored(name, "the sidecar was written for another version of the file (its header blob digest "
                        "differs)") or Metadata.empty(count)
    return meta
