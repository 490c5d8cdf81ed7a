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
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rumimm.errors import FormatError, RumiError, where

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

    from rumimm._typing import StrPath

__all__ = ["DTYPES", "ENCODINGS", "SPECS", "SPEC_ENCODINGS", "Encoding", "encoding", "encoding_for_dtype"]


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

#: Pairs of spec 0.1.0 that spec 0.2 (rumi-eo 0.18 and later) dropped from its registry.
_NOT_IN_02 = {(1, 2), (1, 4), (2, 2), (2, 4), (5, 32), (5, 64), (104, 6), (105, 6), (106, 4)}
#: Pairs spec 0.2 added (rumi-eo 0.26 registry codes 29 and 30).
_ONLY_02: list[tuple[int, int, Any, str]] = [
    (107, 8, _ML, "float8_e4m3fnuz"),
    (108, 8, _ML, "float8_e5m2fnuz"),
]

#: Every valid encoding of spec 0.1.0 keyed by (sample_format, bits_per_sample).
ENCODINGS: dict[tuple[int, int], Encoding] = {(sf, bps): Encoding(sf, bps, name) for sf, bps, _, name in _TABLE}

#: The specifications rumimm reads and writes.
SPECS = ("0.1", "0.2")

#: The encodings of each specification (one Encoding object per pair, shared between them).
SPEC_ENCODINGS: dict[str, dict[tuple[int, int], Encoding]] = {
    "0.1": ENCODINGS,
    "0.2": {**{k: e for k, e in ENCODINGS.items() if k not in _NOT_IN_02},
            **{(sf, bps): Encoding(sf, bps, name) for sf, bps, _, name in _ONLY_02}},
}

_BY_NAME: dict[str, Encoding] = {e.name: e for table in SPEC_ENCODINGS.values() for e in table.values()}
_ML_NAMES: tuple[str, ...] = tuple(name for _, _, dt, name in _TABLE + _ONLY_02 if dt is _ML)


def _little(dt: DTypeLike) -> np.dtype:
    dt = np.dtype(dt)
    return dt.newbyteorder("<") if dt.fields is None else dt


#: The user-facing dtype of each name: numpy's at import, ml_dtypes' added by ``_load_ml``.
_DTYPE: dict[str, np.dtype] = {name: _little(dt) for _, _, dt, name in _TABLE if dt is not _ML}
#: Per specification, dtype -> encoding (ml_dtypes' types added by ``_load_ml``).
_BY_DTYPE: dict[str, dict[np.dtype, Encoding]] = {
    spec: {_DTYPE[e.name]: e for e in table.values() if e.name in _DTYPE} for spec, table in SPEC_ENCODINGS.items()}
_ml_lock = threading.Lock()


def _load_ml() -> dict[str, np.dtype]:
    """Import ml_dtypes and add its types to the lookups, once; return the name -> dtype table."""
    if _ML_NAMES[0] not in _DTYPE:
        with _ml_lock:
            if _ML_NAMES[0] not in _DTYPE:
                import ml_dtypes

                found = {name: _little(getattr(ml_dtypes, name)) for name in _ML_NAMES}
                for spec, table in SPEC_ENCODINGS.items():
                    _BY_DTYPE[spec].update({found[e.name]: e for e in table.values() if e.name in found})
                _DTYPE.update(found)  # last: a reader that sees one ML name here finds all
    return _DTYPE


class _Dtypes(Mapping):
    """The read-only name -> dtype table of spec 0.1.0's encodings.

    An ml_dtypes value imports ml_dtypes when first read.
    """

    _names: ClassVar[dict] = {e.name: e for e in ENCODINGS.values()}

    def __getitem__(self, name: str) -> np.dtype:
        return self._names[name].dtype

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __repr__(self) -> str:
        return f"DTYPES({', '.join(self._names)})"


#: The user-facing dtype of every spec 0.1.0 encoding, keyed by its short name.
DTYPES: Mapping[str, np.dtype] = _Dtypes()


def _table(spec: str) -> dict[tuple[int, int], Encoding]:
    try:
        return SPEC_ENCODINGS[spec]
    except KeyError:
        raise ValueError(f"spec must be one of {', '.join(SPECS)}, got {spec!r}") from None


def spec_qualifier(spec: str) -> str:
    """How a message names a spec's rules: the default (oldest) spec goes unnamed, another is `` in spec X``."""
    return "" if spec == SPECS[0] else f" in spec {spec}"



def encoding(sample_format: int, bits_per_sample: int, *, path: StrPath | None = None,
             spec: str = "0.1") -> Encoding:
    """Return the encoding of a pair in ``spec``, or raise FormatError for any unlisted pair."""
    try:
        return _table(spec)[(int(sample_format), int(bits_per_sample))]
    except KeyError:
        raise FormatError(
            f"{where(path)}(sample_format, bits_per_sample) = ({sample_format}, {bits_per_sample}) "
            f"is not a valid rumi sample encoding{spec_qualifier(spec)}; see the spec's Sample encodings table"
        ) from None


def encoding_for_dtype(dtype: DTypeLike, spec: str = "0.1") -> Encoding:
    """Return the encoding of ``spec`` that stores ``dtype`` exactly, or raise RumiError."""
    table = _table(spec)
    if isinstance(dtype, str) and dtype in _ML_NAMES:
        _load_ml()  # numpy knows the name only once ml_dtypes registered it
    dt = np.dtype(dtype)
    if dt.fields is None and dt.byteorder == ">":
        dt = dt.newbyteorder("<")
    enc = _BY_DTYPE[spec].get(dt)
    if enc is None and "ml_dtypes" in sys.modules:  # a caller holding an ml_dtypes type imported it
        _load_ml()
        enc = _BY_DTYPE[spec].get(dt)
    if enc is None:
        names = ", ".join(sorted(e.name for e in table.values()))
        raise RumiError(f"dtype {dt} has no rumi sample encoding{spec_qualifier(spec)}; expected one of: {names}")
    return enc
