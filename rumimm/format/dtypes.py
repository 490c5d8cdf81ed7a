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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ml_dtypes
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
    dtype: np.dtype  # what users get, little-endian
    name: str  # short stable name, used by the CLI and docs

    @property
    def itemsize(self) -> int:
        """Bytes per sample in memory and inside frames (sub-byte: one byte)."""
        return self.dtype.itemsize

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


_TABLE: list[tuple[int, int, Any, str]] = [
    (1, 1, np.bool_, "bool"),
    (1, 2, ml_dtypes.uint2, "uint2"),
    (1, 4, ml_dtypes.uint4, "uint4"),
    (1, 8, np.uint8, "uint8"),
    (1, 16, np.uint16, "uint16"),
    (1, 32, np.uint32, "uint32"),
    (1, 64, np.uint64, "uint64"),
    (2, 2, ml_dtypes.int2, "int2"),
    (2, 4, ml_dtypes.int4, "int4"),
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
    (100, 8, ml_dtypes.float8_e4m3fn, "float8_e4m3fn"),
    (101, 8, ml_dtypes.float8_e5m2, "float8_e5m2"),
    (102, 16, ml_dtypes.bfloat16, "bfloat16"),
    (103, 8, ml_dtypes.float8_e8m0fnu, "float8_e8m0fnu"),
    (104, 6, ml_dtypes.float6_e2m3fn, "float6_e2m3fn"),
    (105, 6, ml_dtypes.float6_e3m2fn, "float6_e3m2fn"),
    (106, 4, ml_dtypes.float4_e2m1fn, "float4_e2m1fn"),
]

#: Every valid encoding keyed by (sample_format, bits_per_sample).
ENCODINGS: dict[tuple[int, int], Encoding] = {
    (sf, bps): Encoding(sf, bps, np.dtype(dt).newbyteorder("<") if np.dtype(dt).fields is None else np.dtype(dt), name)
    for sf, bps, dt, name in _TABLE
}

#: The user-facing dtype of every encoding, keyed by its short name.
DTYPES: dict[str, np.dtype] = {e.name: e.dtype for e in ENCODINGS.values()}

_BY_DTYPE: dict[np.dtype, Encoding] = {e.dtype: e for e in ENCODINGS.values()}


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
    dt = np.dtype(dtype)
    if dt.fields is None and dt.byteorder == ">":
        dt = dt.newbyteorder("<")
    enc = _BY_DTYPE.get(dt)
    if enc is None:
        names = ", ".join(sorted(DTYPES))
        raise RumiError(f"dtype {dt} has no rumi sample encoding; expected one of: {names}")
    return enc
