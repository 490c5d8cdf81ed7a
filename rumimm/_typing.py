"""Type aliases the annotations of several modules share (for type checkers; nothing at run time)."""

from __future__ import annotations

import os
from typing import TypeAlias

#: A file system path as the public functions take it.
StrPath: TypeAlias = str | os.PathLike[str]
#: A path that may also be bytes (decoded as the file system does).
AnyPath: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]
