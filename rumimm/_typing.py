"""Type aliases the annotations of several modules share.

Imported under ``TYPE_CHECKING`` only (the annotations are strings at run time), so none of this
costs ``import rumimm`` anything.  In the base layer: it imports no other rumimm module.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, SupportsBytes, TypeAlias

import numpy as np

if TYPE_CHECKING:
    from typing_extensions import Buffer

__all__ = ["AnyPath", "BlobArg", "CRSArg", "ProgressArg", "SliceableArray", "SpecName", "StrPath", "Tile", "TimeArg",
           "TimeCoord", "Unit"]

#: A file system path as the public functions take it.
StrPath: TypeAlias = str | os.PathLike[str]
#: A path that may also be bytes (decoded as the file system does).
AnyPath: TypeAlias = str | bytes | os.PathLike[str] | os.PathLike[bytes]
#: A header blob: bytes, any buffer, or a parsed header (anything ``bytes()`` takes but an int or a str).
BlobArg: TypeAlias = "Buffer | SupportsBytes"
#: The ``progress=`` argument of long operations (rumimm.progress): nothing, a bar, or ``f(done, total)``.
ProgressArg: TypeAlias = bool | Callable[[int, int], object] | None
#: ``spec=``: the rumi specification a file follows.
SpecName: TypeAlias = Literal["0.1", "0.2"]
#: ``tile=``: one size for square frames, or (height, width).
Tile: TypeAlias = int | tuple[int, int]
#: ``unit=`` of a spec 0.1 write: a frame per band and position, or one holding every band.
Unit: TypeAlias = Literal["tile", "cell"]
#: ``crs=``: an EPSG code, or a string naming one (``"EPSG:32633"``).
CRSArg: TypeAlias = int | str | None
#: One time coordinate of a spec 0.2 write: an instant, or a (start, end) interval.
TimeCoord: TypeAlias = dt.date | dt.datetime | str | np.datetime64
TimeArg: TypeAlias = Sequence[TimeCoord | tuple[TimeCoord, TimeCoord]] | None


class SliceableArray(Protocol):
    """An array read a slice at a time (``np.memmap``, zarr, h5py, xarray): ``shape``, ``dtype`` and ``[...]``."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    def __getitem__(self, key: Any, /) -> Any: ...
