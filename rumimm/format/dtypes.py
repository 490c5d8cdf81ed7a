"""The single table of rumi sample encodings.

Each of the 28 valid ``(sample_format, bits_per_sample)`` pairs maps to the numpy
dtype a user sees and to the *storage* dtype a frame holds.  Sub-byte samples are
held one per byte, in the byte's low bits (the layout ml_dtypes uses and the
reference implementation expects).  Frames decode to OpenZL Numeric outputs whose
element width is the storage itemsize; the 16-byte complex128 sample, wider than
any OpenZL Numeric, is stored as a Struct of width 16.

Representations numpy lacks:

* 1-bit samples are ``bool`` (byte 0 or 1 on disk; a reader takes the low bit).
* complex integers and complex float16 are structured dtypes with fields
  ``real`` and ``imag`` (``[("real", "<i2"), ("imag", "<i2")]`` and so on).
* bfloat16, float8/6/4 and int2/int4 (uint2/uint4) are ml_dtypes types.

ml_dtypes is imported only when one of its types is first asked for (an encoding's
``dtype``, ``DTYPES[name]``, ``encoding_for_dtype``): its import costs 0.15 s (0.6)
to over 1 s (0.7), more than the rest of ``import rumimm`` and a first chip read
together.  Everything else an encoding knows (pair, name, itemsize, storage dtype)
comes from the pair alone, so a blob, an index or a validation of any file needs no
ml_dtypes; opening a file of an ml_dtypes type does.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from rumimm.errors import FormatError, RumiError, where

__all__ = ["Encoding", "ENCODINGS", "encoding", "encoding_for_dtype", "DTYPES"]


def _complex(component: str) -> np.dtype:
    return np.dtype([("real", component), ("imag", component)])


@dataclass(frozen=True)
class Encoding:
    """One valid (sample_format, bits_per_sample) pair and its numpy mapping."""

    sample_format: int
    bits_per_sample: int
    name: str  # short stable name, used by the CLI and docs

    @property
    def dtype(self) -> np.dtype:
        """What users get, little-endian (an ml_dtypes type imports ml_dtypes here, once)."""
        dt = _DTYPE.get(self.name)
        return dt if dt is not None else _load_ml()[self.name]

    @property
    def itemsize(self) -> int:
        """Bytes per sample in memory and inside frames (sub-byte: one byte)."""
        return max(1, self.bits_per_sample // 8)

    @property
    def storage_dtype(self) -> np.dtype:
        """Unsigned integer (or 16-byte void) dtype with the sample's byte width."""
        if self.itemsize == 16:
            return np.dtype("V16")
        return np.dtype(f"<u{self.itemsize}")

    @property
    def subbyte(self) -> bool:
        """True for samples narrower than 8 bits, held in a byte's low bits."""
        return self.bits_per_sample < 8

    @property
    def key(self) -> tuple[int, int]:
        return (self.sample_format, self.bits_per_sample)


#: A table entry whose type is ml_dtypes' type of the entry's name, imported on first use.
_ML = None

_TABLE: list[tuple[int, int, Any, str]] = [
    (1, 1, np.bool_, "bool"),
    (1, 2, _ML, "uint2"),
    (1, 4, _ML, "uint4"),
    (1, 8, np.uint8, "uint8"),
    (1, 16, np.uint16, "uint16"),
    (1, 32, np.uint32, "uint32"),
    (1, 64, np.uint64, "uint64"),
    (2, 2, _ML, "int2"),
    (2, 4, _ML, "int4"),
    (2, 8, np.int8, "int8"),
    (2, 16, np.int16, "int16"),
    (2, 32, np.int32, "int32"),
    (2, 64, np.int64, "int64"),
    (3, 16, np.float16, "float16"),
    (3, 32, np.float32, "float32"),
    (3, 64, np.float64, "float64"),
    (5, 32, _complex("<i2"), "complex_int16"),
    (5, 64, _complex("<i4"), "complex_int32"),
    (6, 32, _complex("<f2"), "complex_float16"),
    (6, 64, np.complex64, "complex64"),
    (6, 128, np.complex128, "complex128"),
    (100, 8, _ML, "float8_e4m3fn"),
    (101, 8, _ML, "float8_e5m2"),
    (102, 16, _ML, "bfloat16"),
    (103, 8, _ML, "float8_e8m0fnu"),
    (104, 6, _ML, "float6_e2m3fn"),
    (105, 6, _ML, "float6_e3m2fn"),
    (106, 4, _ML, "float4_e2m1fn"),
]

#: Every valid encoding keyed by (sample_format, bits_per_sample).
ENCODINGS: dict[tuple[int, int], Encoding] = {(sf, bps): Encoding(sf, bps, name) for sf, bps, _, name in _TABLE}

_BY_NAME: dict[str, Encoding] = {e.name: e for e in ENCODINGS.values()}
_ML_NAMES: tuple[str, ...] = tuple(name for _, _, dt, name in _TABLE if dt is _ML)


def _little(dt) -> np.dtype:
    dt = np.dtype(dt)
    return dt.newbyteorder("<") if dt.fields is None else dt


#: The user-facing dtype of each name: numpy's at import, ml_dtypes' added by ``_load_ml``.
_DTYPE: dict[str, np.dtype] = {name: _little(dt) for _, _, dt, name in _TABLE if dt is not _ML}
_BY_DTYPE: dict[np.dtype, Encoding] = {_DTYPE[e.name]: e for e in ENCODINGS.values() if e.name in _DTYPE}
_ml_lock = threading.Lock()


def _load_ml() -> dict[str, np.dtype]:
    """Import ml_dtypes and add its types to the lookups, once; return the name -> dtype table."""
    if _ML_NAMES[0] not in _DTYPE:
        with _ml_lock:
            if _ML_NAMES[0] not in _DTYPE:
                import ml_dtypes

                found = {name: _little(getattr(ml_dtypes, name)) for name in _ML_NAMES}
                _BY_DTYPE.update({dt: _BY_NAME[name] for name, dt in found.items()})
                _DTYPE.update(found)  # last: a reader that sees one ML name here finds all
    return _DTYPE


class _Dtypes(Mapping):
    """The read-only name -> dtype table; an ml_dtypes value imports ml_dtypes when first read."""

    def __getitem__(self, name: str) -> np.dtype:
        return _BY_NAME[name].dtype

    def __iter__(self) -> Iterator[str]:
        return iter(_BY_NAME)

    def __len__(self) -> int:
        return len(_BY_NAME)

    def __contains__(self, name) -> bool:
        return name in _BY_NAME

    def __repr__(self) -> str:
        return f"DTYPES({', '.join(_BY_NAME)})"


#: The user-facing dtype of every encoding, keyed by its short name.
DTYPES: Mapping[str, np.dtype] = _Dtypes()


def encoding(sample_format: int, bits_per_sample: int, *, path=None) -> Encoding:
    """Return the encoding of a pair, or raise FormatError for any unlisted pair."""
    try:
        return ENCODINGS[(int(sample_format), int(bits_per_sample))]
    except KeyError:
        raise FormatError(
            f"{where(path)}(sample_format, bits_per_sample) = ({sample_format}, {bits_per_sample}) "
            "is not a valid rumi sample encoding; see the spec's Sample encodings table"
        ) from None


def encoding_for_dtype(dtype) -> Encoding:
    """Return the encoding that stores ``dtype`` exactly, or raise RumiError."""
    if isinstance(dtype, str) and dtype in _ML_NAMES:
        _load_ml()  # numpy knows the name only once ml_dtypes registered it
    dt = np.dtype(dtype)
    if dt.fields is None and dt.byteorder == ">":
        dt = dt.newbyteorder("<")
    enc = _BY_DTYPE.get(dt)
    if enc is None and "ml_dtypes" in sys.modules:  # a caller holding an ml_dtypes type imported it
        _load_ml()
        enc = _BY_DTYPE.get(dt)
    if enc is None:
        names = ", ".join(sorted(DTYPES))
        raise RumiError(f"dtype {dt} has no rumi sample encoding; expected one of: {names}")
    return enc
