"""What ``rumimm index`` decides: where a rebuilt header blob goes, and writing it there.

The blob is binary: it goes to a file (written atomically), as one line of hex, or raw
to standard output, which is refused when that is a terminal (bytes a terminal would
mangle, and no way to save them).  The command line renders what :func:`write_index` did.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from rumimm.errors import RumiError

if TYPE_CHECKING:
    from rumimm._typing import StrPath

__all__ = ["IndexedBlob", "blob_destination", "write_index"]

BlobDestination = Literal["file", "hex", "stdout"]


def blob_destination(output: StrPath | None, hex: bool, stdout_is_terminal: bool) -> BlobDestination:
    """Where the blob goes: a file, hex text or raw bytes; RumiError for raw bytes on a terminal."""
    if output is not None:
        return "file"
    if hex:
        return "hex"
    if stdout_is_terminal:
        raise RumiError("the header blob is binary; write it to a file with -o BLOB, pipe it, or print it with --hex")
    return "stdout"


@dataclass(frozen=True)
class IndexedBlob:
    """A rebuilt header blob and how many frames it indexes."""

    blob: bytes
    n_frames: int


def write_index(path: StrPath, output: StrPath | None = None) -> IndexedBlob:
    """Rebuild ``path``'s header blob from its IFD; with ``output``, also write it there atomically.

    The output's directory is checked before the file is read, so a typo costs no walk.
    """
    from rumimm.format.v2 import parse_header
    from rumimm.reader.inputs import check_destination
    from rumimm.reader.validate import build_blob

    if output is not None:
        check_destination(output)
    blob = bytes(build_blob(path))
    if output is not None:
        from rumimm.store.atomic import replacing

        with replacing(output) as tmp, open(tmp, "wb") as fh:
            fh.write(blob)
    return IndexedBlob(blob, parse_header(blob).n_frames)
