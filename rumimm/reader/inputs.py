"""What a path given to a command is, before a command reads it: one message per kind of bad input.

Every entry point that takes a path (``rumimm info``, ``validate``, ``index``, ``convert``,
``export``, ``quicklook``, ``profile``, ``clean``) asks :func:`classify` first, so a
missing file, a directory, an empty file, a text file, a classic TIFF and a truncated rumi
file each get the same rumimm message whichever command met them, and GDAL is asked only
about files rumimm cannot identify (a GeoTIFF, or another raster format GDAL reads).

A rumi file is recognised by its first 252 bytes: a BigTIFF whose one IFD at byte 16 has
exactly rumi's 11 tags (spec 0.1), or the ``RUMI`` magic (spec 0.2).  Such a file that the
IFD walk (``rumimm.build_blob``) refuses is a broken rumi file, never handed to GDAL.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rumimm.errors import FormatError, RumiError, where

if TYPE_CHECKING:
    from rumimm._typing import SpecName, StrPath

__all__ = [
    "Input", "check_clean_target", "check_destination", "classify", "gdal_refusal", "not_the_source", "remote_spec",
    "require_rumi",
]

#: The tags of rumi 0.1.0's one IFD, in order (spec: Fixed IFD).
RUMI_TAGS = (256, 257, 258, 277, 322, 323, 324, 325, 339, 34264, 34735)
_BIGTIFF = b"II+\x00\x08\x00\x00\x00"


@dataclass(frozen=True)
class Input:
    """A readable input: ``kind`` is "rumi", "tiff" (a TIFF that is not rumi) or "other"; ``spec`` for rumi."""

    path: str
    kind: Literal["rumi", "tiff", "other"]
    spec: SpecName | None = None
    head: bytes = b""

    def not_tiff(self) -> str:
        """The message for a file that is no TIFF (what ``rumimm.open`` says of it)."""
        return f"{where(self.path)}not a TIFF file (starts with {self.head[:2]!r}, expected b'II')"


def _head(path: str) -> bytes:
    """The first 16 + 8 + 11 * 20 bytes of a regular file; OSError / FormatError for anything else."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a rumi file", path)
        if not stat.S_ISREG(st.st_mode):
            raise FormatError(f"{where(path)}not a regular file (a FIFO, socket or device)")
        if st.st_size == 0:
            raise FormatError(f"{where(path)}file is empty; expected a BigTIFF header")
        return os.pread(fd, 16 + 8 + 20 * len(RUMI_TAGS), 0)
    finally:
        os.close(fd)


def _rumi_ifd(head: bytes) -> bool:
    """Whether ``head`` starts a BigTIFF whose IFD at byte 16 has exactly rumi's 11 tags."""
    if not head.startswith(_BIGTIFF) or len(head) < 24 + 20 * len(RUMI_TAGS):
        return False
    if struct.unpack_from("<Q", head, 8)[0] != 16 or struct.unpack_from("<Q", head, 16)[0] != len(RUMI_TAGS):
        return False
    return tuple(struct.unpack_from("<H", head, 24 + 20 * i)[0] for i in range(len(RUMI_TAGS))) == RUMI_TAGS


def classify(path: StrPath, walk: bool = True) -> Input | None:
    """What ``path`` holds (None for a remote URI or a GDAL virtual path: left to their readers).

    ``walk=False`` skips the IFD walk of a rumi-shaped file (``validate`` reports its violations itself).

    Raises
    ------
    FileNotFoundError
        No such file.
    IsADirectoryError
        A directory.
    FormatError
        A FIFO or device, an empty file, or a rumi file the IFD walk refuses
        (truncated, a frame out of place, ...: the walk's message).
    """
    from rumimm.store import is_remote

    path = os.fspath(path)
    if is_remote(path) or path.startswith("/vsi"):
        return None
    try:
        head = _head(path)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
    if head.startswith(b"RUMI"):
        return Input(path, "rumi", "0.2", head)
    if _rumi_ifd(head):
        from rumimm.reader.validate import build_blob

        if walk:
            build_blob(path)  # a rumi file: its own errors (truncated, ...), never GDAL's
        return Input(path, "rumi", "0.1", head)
    if head[:4] in (b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"):
        return Input(path, "tiff", None, head)
    return Input(path, "other", None, head)


def require_rumi(path: StrPath) -> Input | None:
    """:func:`classify`, and FormatError unless ``path`` is a rumi file (the message ``rumimm.open`` gives)."""
    got = classify(path)
    if got is None or got.kind == "rumi":
        return got
    from rumimm.reader.validate import build_blob

    build_blob(got.path)  # raises the IFD walk's message: not a TIFF, classic TIFF, extra tags, ...
    raise FormatError(f"{where(got.path)}not a rumi file")  # pragma: no cover - build_blob refuses every non-rumi file


def gdal_refusal(path: StrPath, exc: BaseException) -> RumiError | None:
    """rumimm's message for a file GDAL does not recognise (``exc``, GDAL's error), or None for other errors.

    Raises :func:`classify`'s error for an input that is no file to read at all (empty, a directory, ...).
    """
    if "not recognized" not in str(exc):
        return None
    found = classify(path)
    if found is None or found.kind != "other":
        return None
    return RumiError(f"{found.not_tiff()}, nor a raster format GDAL reads")


def check_destination(path: StrPath) -> None:
    """FileNotFoundError naming the output when the directory to write it into does not exist;
    IsADirectoryError when the output names a directory."""
    from rumimm.store import is_remote

    if is_remote(path):  # an object store has no directories; a missing bucket fails the upload
        return
    path = os.fspath(path)
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "is a directory; name the file to write", path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(errno.ENOENT, "the directory to write into does not exist", path)


def not_the_source(source: StrPath, dest: StrPath) -> None:
    """A conversion writes a new file: ``dest`` must not be ``source`` (replacing it would lose the input)."""
    from rumimm.store import is_remote

    src, dst = os.fspath(source), os.fspath(dest)
    if is_remote(src) or is_remote(dst):
        from rumimm.store.uri import public_name, same_object

        if is_remote(src) and is_remote(dst) and same_object(src, dst):
            raise RumiError(f"{public_name(dst)}: convert writes a new object; dest must not be the source")
        return
    try:
        same = os.path.samefile(src, dst)
    except OSError:  # one of them does not exist (or is a GDAL virtual path)
        same = False
    if same:
        raise RumiError(f"{dst}: convert writes a new file; dest must not be the source")


def check_clean_target(path: StrPath) -> None:
    """Refuse what ``rumimm clean`` must not take: a missing path, or a file, that is not a ``.rumi`` file.

    A ``.rumi`` path may be missing (its writer was killed before the file appeared: its temporary
    files are what is cleaned); a directory is cleaned of every stale temporary file in it.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        if not path.endswith(".rumi"):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory (give a directory or a .rumi file)", path)
        return
    if not os.path.isdir(path) and not path.endswith(".rumi"):
        raise FormatError(f"{path}: not a directory nor a .rumi file; clean removes the temporary files rumimm "
                          "writers leave next to a .rumi file")


def remote_spec(uri: StrPath) -> SpecName | None:
    """``"0.1"`` or ``"0.2"`` when the remote ``uri`` is a rumi file (its first 4 bytes), else None."""
    from rumimm.store import is_remote

    if not is_remote(uri):
        return None
    from rumimm.format.v2 import spec_of_file
    from rumimm.store import open_store

    store = open_store(uri)
    try:
        return spec_of_file(bytes(store.read(0, 4)))
    finally:
        store.close()
