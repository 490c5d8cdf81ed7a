"""Writing a rumi file's PAM sidecar (``NAME.rumi.aux.xml``) with the file.

The writer calls :func:`write_sidecar` just before it renames the rumi file into
place, so the sidecar's rename comes first; the sidecar records the new header blob's
digest and the digest and stat of the complete new file, so if the process dies between
the two renames (or another process renames its own file over it) the file in place has
a sidecar that is recognisably not its own (``rumimm.open`` ignores it, with a warning).
A write without metadata removes a sidecar left from the file it replaced.
"""

from __future__ import annotations

import errno
import os
import warnings

from rumimm.errors import RumiWarning
from rumimm.format.pam import Metadata, build_pam, sidecar_path
from rumimm.writer.atomic import replacing

__all__ = ["remove_sidecar", "resolve_metadata", "write_remote_sidecar", "write_sidecar"]


def resolve_metadata(metadata, count: int, dtype) -> Metadata | None:
    """``metadata`` checked against the image (band count, nodata a value of ``dtype``); None when empty."""
    if metadata is None:
        return None
    if not isinstance(metadata, Metadata):
        raise TypeError(f"metadata must be a rumimm.format.pam.Metadata, got {type(metadata).__name__}")
    if len(metadata.bands) != count:
        raise ValueError(f"metadata describes {len(metadata.bands)} bands, the image has {count}")
    metadata.check_dtype(dtype)
    return None if metadata.is_empty() else metadata


def write_sidecar(path: str, metadata: Metadata | None, blob: bytes, written: str | None = None) -> bool:
    """Write (fsynced, renamed into place) the sidecar of ``path``; False when there is nothing to write.

    ``written``: the complete file (its temporary name) whose digest and stat bind the
    sidecar to that content (``rumimm.reader.sidecar``).
    """
    if metadata is None:
        return False
    binding = None
    if written is not None:
        from rumimm.reader.sidecar import file_binding

        fd = os.open(written, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            binding = file_binding(fd)
        finally:
            os.close(fd)
    data = build_pam(metadata, blob, binding)
    with replacing(sidecar_path(path)) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return True


def remove_sidecar(path: str) -> None:
    """Remove the sidecar of ``path`` if there is one (a warning if it cannot be removed: the file is written)."""
    name = sidecar_path(path)
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # a name this long can have no sidecar
            return
        warnings.warn(f"{name}: cannot remove the sidecar of the file replaced ({exc.strerror or exc}); it no longer "
                      "describes the file (rumimm.open ignores it) but GDAL would apply it", RumiWarning, stacklevel=4)


def write_remote_sidecar(uri: str, storage_options, metadata: Metadata | None, blob: bytes) -> None:
    """Put the sidecar object next to the object at ``uri`` just written, or delete the one left from its last version.

    It comes after the object (an object store has no rename to order the two): a reader
    that finds the object without its sidecar, or with the previous version's (whose
    header blob digest is not the new object's), applies none (``rumimm.reader.sidecar``).
    """
    from rumimm.store.remote_writer import delete, put_small
    from rumimm.store.uri import sibling

    side = sibling(uri, ".aux.xml")
    if metadata is None:
        delete(side, storage_options)
        return
    put_small(side, build_pam(metadata, blob, None), storage_options)
