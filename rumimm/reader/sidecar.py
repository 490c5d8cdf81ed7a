"""Reading a rumi file's PAM sidecar (``NAME.rumi.aux.xml``): band metadata, never a failed read.

A remote file's sidecar is the object next to it (its URI + ``.aux.xml``), read with
one ranged GET when the metadata is first asked for; a 404 means no sidecar.
No sidecar means no metadata.  A sidecar that cannot be read (not a regular file,
permissions, not XML, a band the file does not have) or that was written for other
content than the file's means no metadata and one :class:`rumimm.RumiWarning` saying
why: the pixels are still readable, and a broken sidecar must not make them unreadable.
Only a regular file is read, opened without blocking: a FIFO or a device at the
sidecar's name is refused, never waited on.

Binding.  The header blob holds only the frames' sizes, so two files (constant or masked
tiles, two rewrites of one product) can share it.  rumimm's writer therefore records in
the sidecar's ``RUMIMM`` domain the SHA-256 of every byte of the file it wrote
(``FILE_SHA256``) and that file's ``"<size> <mtime_ns> <inode>"`` (``FILE_STAT``).  On
read, a local file whose open descriptor has that stat is the file written (a rename
keeps all three; a rewrite or a copy changes the inode or the time): applied at the cost
of one ``fstat``.  Otherwise (a copy, a file fetched from elsewhere, a remote object)
the file's bytes are hashed once, when the metadata is first asked for, and the sidecar
applies only if the digest matches (a remote object once per process and ETag: reads are
pinned to it with If-Match).

A sidecar without ``FILE_SHA256`` (written by GDAL, e.g. ``gdal_edit.py -a_nodata``, by
other tools next to a rumi-eo file, or by rumimm before 0.x) cannot be bound to content:
it is applied as GDAL applies it, after the checks above (and after the header blob
digest check when it has one).  Its numbers are read as GDAL reads them (``c_strtod``),
and a nodata that is not a value of the file's dtype is dropped with a warning.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import warnings

from rumimm.errors import FormatError, RumiWarning
from rumimm.format.pam import (
    DOMAIN,
    FILE_DIGEST_KEY,
    FILE_STAT_KEY,
    MAX_BYTES,
    SUFFIX,
    Metadata,
    blob_digest,
    parse_pam,
    sidecar_path,
)
from rumimm.store import LocalStore

__all__ = ["file_binding", "read_metadata", "read_remote_metadata"]

_CHUNK = 16 << 20  # bytes hashed per read of a file without a mapping (a remote object)
#: (object name, ETag, size, FILE_SHA256) of remote objects already hashed to that digest in this process: the
#: object is pinned to its ETag (every read carries If-Match), so a reopened image needs no second download.
_VERIFIED: dict[tuple, None] = {}
_MAX_VERIFIED = 4096


def _ignored(name: str, why: str) -> Metadata | None:
    warnings.warn(f"{name}: {why}; the file's band metadata (nodata, descriptions, ...) is not applied",
                  RumiWarning, stacklevel=4)
    return None


def file_binding(fd: int) -> dict[str, str]:
    """The ``FILE_SHA256`` and ``FILE_STAT`` entries for the complete file open (readable) at ``fd``."""
    st = os.fstat(fd)
    h = hashlib.sha256()
    offset = 0
    while offset < st.st_size:
        chunk = os.pread(fd, min(_CHUNK, st.st_size - offset), offset)
        if not chunk:
            break
        h.update(chunk)
        offset += len(chunk)
    return {FILE_DIGEST_KEY: h.hexdigest(), FILE_STAT_KEY: _stat_text(st)}


def _stat_text(st: os.stat_result) -> str:
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino}"


def _read_regular(name: str) -> bytes:
    """The first MAX_BYTES + 1 bytes of the sidecar; OSError (ENODEV-like) unless it is a regular file."""
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "it is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "it is not a regular file (a FIFO, socket or device is never read)")
        parts, left = [], MAX_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_metadata(path: str, count: int, blob: bytes, dtype=None, store=None) -> Metadata:
    """The metadata of the file at ``path`` (``count`` bands, header blob ``blob``) from its sidecar.

    ``dtype``: the file's sample type (nodata outside it is dropped, with a warning).
    ``store``: the file as opened (``rumimm.store``), against which a sidecar's binding
    is checked; without it a sidecar carrying a binding is not applied.
    """
    name = sidecar_path(path)
    try:
        data = _read_regular(name)
    except FileNotFoundError:
        return Metadata.empty(count)
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # a file name this long can have no sidecar
            return Metadata.empty(count)
        return _ignored(name, f"cannot read the sidecar ({exc.strerror or exc})") or Metadata.empty(count)
    return _checked(data, name, count, blob, dtype, store)


def read_remote_metadata(uri: str, storage_options, count: int, blob: bytes, dtype=None, store=None) -> Metadata:
    """:func:`read_metadata` of a remote file: its sidecar object, one ranged GET; 404 is no sidecar."""
    from rumimm.store import RemoteError, RemoteStore
    from rumimm.store.uri import public_name, sibling

    side = sibling(uri, SUFFIX)
    name = public_name(side)
    side_store = RemoteStore(side, storage_options)
    try:
        data = bytes(side_store.read(0, MAX_BYTES + 1))
    except RemoteError as exc:
        if exc.status == 404:
            return Metadata.empty(count)
        return _ignored(name, f"cannot read the sidecar ({str(exc).removeprefix(name + ': ')})") or \
            Metadata.empty(count)
    except FormatError as exc:  # an empty object: the range starts past its end
        return _ignored(name, str(exc).removeprefix(name + ": ")) or Metadata.empty(count)
    finally:
        side_store.close()
    return _checked(data, name, count, blob, dtype, store)


def _checked(data: bytes, name: str, count: int, blob: bytes, dtype, store) -> Metadata:
    try:
        meta = parse_pam(data, count, name)
    except FormatError as exc:
        return _ignored(name, str(exc).removeprefix(f"{name}: ")) or Metadata.empty(count)
    if meta.digest is not None and meta.digest != blob_digest(blob):
        return _ignored(name, "the sidecar was written for another version of the file (its header blob digest "
                        "differs)") or Metadata.empty(count)
    why = _unbound(meta, store)
    if why:
        return _ignored(name, why) or Metadata.empty(count)
    if dtype is not None:
        meta, dropped = meta.without_bad_nodata(dtype)
        for reason in dropped:
            warnings.warn(f"{name}: {reason}; that nodata is not applied", RumiWarning, stacklevel=3)
    return meta


def _unbound(meta: Metadata, store) -> str | None:
    """Why the sidecar does not belong to the file's content (None: it does, or it records no binding)."""
    own = meta.domains.get(DOMAIN, {})
    digest = own.get(FILE_DIGEST_KEY)
    if digest is None:
        return None  # GDAL's, another tool's or an older rumimm's sidecar: applied as GDAL applies it
    if store is None:
        return "the sidecar is bound to a file's content and no open file was given to check it against"
    local = isinstance(store, LocalStore)
    if local and store.fd >= 0 and own.get(FILE_STAT_KEY) == _stat_text(os.fstat(store.fd)):
        return None  # the very file written: a rename keeps size, time and inode

    def key():
        version = store.version
        return None if not version else (store.name, version, int(store.size), digest.lower())

    if not local and not store.version:
        store.read(0, 16)  # a remote object not read yet: one small GET pins its ETag (the key below)
    known = key()
    if known is not None and known in _VERIFIED:
        return None
    if _store_digest(store) != digest.lower():
        return "the sidecar was written with another file's content (its FILE_SHA256 differs from the file's)"
    known = key()
    if known is not None:
        if len(_VERIFIED) >= _MAX_VERIFIED:
            _VERIFIED.pop(next(iter(_VERIFIED)))
        _VERIFIED[known] = None
    return None


def _store_digest(store) -> str:
    h = hashlib.sha256()
    if isinstance(store, LocalStore):
        h.update(memoryview(store.mapping()).cast("B"))
        return h.hexdigest()
    offset, size = 0, int(store.size)
    while offset < size:
        n = min(_CHUNK, size - offset)
        h.update(bytes(store.read(offset, n)))
        offset += n
    return h.hexdigest()
