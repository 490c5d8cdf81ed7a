"""The spec 0.2 ``TAIL`` trailer: band texts and time coordinates, after the last frame.

Layout (little-endian), from the end of the last frame to the end of the file::

    0       u32  magic 0x4C494154 ("TAIL")
    4       u16  version 1
    6       S    B band texts, each a u16 byte length then that many UTF-8 bytes
    6 + S   u8   time_type: 1 interval, 2 instant
    7 + S   u8   time_bits, 0 to 64
    8 + S   i64  time_epoch
    16 + S  i64  time_step
    24 + S  u32  time_scale: 86400 when every coordinate is a whole UTC day, else 1
    28 + S       C residuals, zigzag-mapped, packed LSB first at time_bits bits each

``C`` is T (instants) or 2T (interval starts and ends, interleaved).  Coordinate i is
``(time_epoch + i * time_step + residual(i)) * time_scale`` seconds since
1970-01-01T00:00:00 UTC.  Every value is canonical: ``time_epoch`` is the first
coordinate, ``time_step`` the rounded mean step (halves up), ``time_bits`` the
minimum width, the scale the largest that holds every coordinate, and no byte
follows the residuals.  Nothing here locates or decodes a frame.

The step count T comes from the IFD and is not bounded by the file size when the
residuals take 0 bits (a regular series costs nothing), so such a series is checked
in constant time and its coordinates are computed only when asked for.
"""

from __future__ import annotations

import datetime as _dt
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rumimm.errors import FormatError, RumiError, where
from rumimm.format.packing import pack_bits, unpack_bits

if TYPE_CHECKING:
    from rumimm._typing import StrPath

__all__ = [
    "DAY",
    "HEAD_SIZE",
    "INSTANT",
    "INTERVAL",
    "MAGIC",
    "VERSION",
    "Trailer",
    "build_trailer",
    "canonical_time",
    "check_band_texts",
    "check_time_order",
    "max_trailer_bytes",
    "min_trailer_bytes",
    "parse_trailer",
]

MAGIC = 0x4C494154
VERSION = 1
INTERVAL = 1
INSTANT = 2
DAY = 86400
HEAD_SIZE = 6  # magic and version
_FIXED = struct.Struct("<BBqqI")  # time_type, time_bits, time_epoch, time_step, time_scale
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
#: The largest band text a u16 length holds.
MAX_TEXT_BYTES = 0xFFFF
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


@dataclass(frozen=True)
class Trailer:
    """A checked trailer: band texts and the canonical time fields.

    ``count`` coordinates (T instants or 2T interval ends) are
    ``(epoch + i * step + residual[i]) * scale`` seconds; ``residuals`` is None when
    they are all 0 (``bits == 0``).
    """

    bands: tuple[str, ...]
    kind: int  # INTERVAL or INSTANT
    scale: int
    epoch: int
    step: int
    bits: int
    count: int
    residuals: tuple[int, ...] | None = None

    @property
    def time_kind(self) -> str:
        """``"instant"`` or ``"interval"`` (rumi-eo's ``time_kind``)."""
        return "interval" if self.kind == INTERVAL else "instant"

    @property
    def seconds(self) -> list[int]:
        """Every coordinate in seconds since 1970-01-01 UTC (2T values for intervals: start, end, ...)."""
        r = self.residuals
        return [(self.epoch + i * self.step + (r[i] if r else 0)) * self.scale for i in range(self.count)]

    @property
    def time(self) -> list:
        """Coordinates as rumi-eo gives them: ``datetime.date`` when the file stores days
        (scale 86400), else UTC ``datetime``; intervals as ``(start, end)`` tuples."""
        vals = [_as_python(s, self.scale == DAY) for s in self.seconds]
        if self.kind == INTERVAL:
            return [(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
        return vals

    def datetime64(self) -> np.ndarray:
        """Coordinates as ``datetime64[s]``: shape (T,) for instants, (T, 2) for intervals."""
        arr = np.array(self.seconds, dtype="datetime64[s]")
        return arr.reshape(-1, 2) if self.kind == INTERVAL else arr


def _as_python(seconds: int, days: bool) -> _dt.date | _dt.datetime:
    try:
        if days:
            return _dt.date(1970, 1, 1) + _dt.timedelta(days=seconds // DAY)
        return _EPOCH + _dt.timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        raise RumiError(f"time coordinate {seconds} s from 1970 is outside the years 1 to 9999 a Python date "
                        "holds; read the trailer's seconds (or datetime64()) instead") from None


def canonical_time(seconds: Iterable[int]) -> tuple[int, int, int, int, list[int]]:
    """(scale, epoch, step, bits, zigzag residuals) of coordinates in seconds, as the spec fixes them."""
    seconds = [int(s) for s in seconds]
    scale = DAY if all(s % DAY == 0 for s in seconds) else 1
    units = [s // scale for s in seconds]
    c = len(units)
    epoch = units[0] if c else 0
    step = 0
    if c >= 2:
        num, den = units[-1] - units[0], c - 1
        step = (2 * num + den) // (2 * den)  # round half toward +infinity
    zig = []
    for i, u in enumerate(units):
        r = u - (epoch + i * step)
        zig.append(2 * r if r >= 0 else -2 * r - 1)
    bits = max(zig, default=0).bit_length()
    return scale, epoch, step, bits, zig


def min_trailer_bytes(bands: int) -> int:
    """The fewest bytes a trailer of ``bands`` band texts takes (one-byte texts, 0-bit residuals)."""
    return HEAD_SIZE + 3 * bands + _FIXED.size


def max_trailer_bytes(bands: int, times: int) -> int:
    """The most bytes a trailer of ``bands`` texts and ``times`` steps can take (a bound on what to fetch)."""
    return HEAD_SIZE + bands * (2 + MAX_TEXT_BYTES) + _FIXED.size + 2 * times * 8


def check_band_texts(bands: Iterable[object]) -> list[bytes]:
    """The UTF-8 bytes of each band text; ValueError/TypeError naming the text that breaks a rule."""
    out = []
    seen: dict[str, int] = {}
    for i, t in enumerate(bands):
        if not isinstance(t, str):
            raise TypeError(f"band text {i} must be a str, got {type(t).__name__}")
        try:
            raw = t.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"band text {i} cannot be encoded as UTF-8") from None
        if not raw:
            raise ValueError(f"band text {i} is empty; every band needs a non-empty text")
        if b"\0" in raw:
            raise ValueError(f"band text {i} contains a NUL character, which band texts may not hold")
        if len(raw) > MAX_TEXT_BYTES:
            raise ValueError(f"band text {i} is {len(raw)} UTF-8 bytes, more than the {MAX_TEXT_BYTES} a text holds")
        if t in seen:
            raise ValueError(f"band text {i} ({t!r}) repeats band {seen[t]}; band texts are unique")
        seen[t] = i
        out.append(raw)
    return out


def check_time_order(kind: int, seconds: Sequence[int]) -> None:
    """ValueError unless instants never decrease, or intervals have start < end and never overlap."""
    if kind == INSTANT:
        for i in range(1, len(seconds)):
            if seconds[i] < seconds[i - 1]:
                raise ValueError(f"time coordinate {i} goes backwards; instants never decrease")
    elif kind == INTERVAL:
        if len(seconds) % 2:
            raise ValueError("intervals need a start and an end per step")
        for i in range(0, len(seconds), 2):
            if seconds[i] >= seconds[i + 1]:
                raise ValueError(f"time step {i // 2} does not end after it starts; an interval has start < end")
            if i and seconds[i] < seconds[i - 1]:
                raise ValueError(f"time step {i // 2 - 1} ends after step {i // 2} starts; steps may meet or "
                                 "leave a gap, never overlap")
    else:
        raise ValueError(f"time kind must be {INTERVAL} (interval) or {INSTANT} (instant), got {kind}")


def build_trailer(bands: Iterable[str], kind: int, seconds: Iterable[int]) -> bytes:
    """The canonical trailer for band texts, a time kind and coordinates in seconds.

    Raises TypeError or ValueError when a value breaks a rule (texts, order, range).
    """
    texts = check_band_texts(list(bands))
    seconds = [int(s) for s in seconds]
    check_time_order(kind, seconds)
    scale, epoch, step, bits, zig = canonical_time(seconds)
    if bits > 64 or not (_I64_MIN <= epoch <= _I64_MAX and _I64_MIN <= step <= _I64_MAX):
        raise ValueError("time coordinates span more than the trailer's 64-bit fields hold")
    head = struct.pack("<IH", MAGIC, VERSION)
    body = b"".join(struct.pack("<H", len(t)) + t for t in texts)
    packed = pack_bits(np.array(zig, dtype=np.uint64), bits).tobytes()
    return head + body + _FIXED.pack(kind, bits, epoch, step, scale) + packed


# Trailers parsed recently: a data loader reopens the same files, and a Trailer is immutable.
_RECENT: dict[tuple[bytes, int, int], Trailer] = {}
_RECENT_SIZE = 256
_RECENT_MAX_BYTES = 4096


def parse_trailer(buf: bytes | bytearray | memoryview, bands: int, times: int, *,
                  path: StrPath | None = None) -> Trailer:
    """Parse and check a whole trailer: ``buf`` holds the bytes from the last frame's end to the file's end.

    ``bands`` and ``times`` come from the IFD.  Work and memory are bounded by the
    size of ``buf`` (a regular time series is checked in constant time).  A small trailer
    parsed before (the same file opened again) is answered from a cache.

    Raises
    ------
    FormatError
        Naming the field and the rule broken.
    """
    key = None
    if len(buf) <= _RECENT_MAX_BYTES:
        key = (bytes(buf), int(bands), int(times))
        hit = _RECENT.get(key)
        if hit is not None:
            return hit
    tr = _parse_trailer(buf, bands, times, path)
    if key is not None:
        if len(_RECENT) >= _RECENT_SIZE:
            try:
                _RECENT.pop(next(iter(_RECENT)))
            except (KeyError, RuntimeError, StopIteration):
                pass  # another thread evicted first
        _RECENT[key] = tr
    return tr


def _parse_trailer(buf: bytes | bytearray | memoryview, bands: int, times: int,
                   path: StrPath | None) -> Trailer:
    mv = memoryview(buf).cast("B") if not isinstance(buf, (bytes, bytearray)) else memoryview(buf)
    size = len(mv)

    def bad(msg: str) -> FormatError:
        return FormatError(f"{where(path)}trailer: {msg}")

    if size < HEAD_SIZE:
        raise bad(f"{size} bytes follow the last frame, fewer than the trailer's 6-byte head; "
                  "the file is truncated")
    magic, version = struct.unpack_from("<IH", mv, 0)
    if magic != MAGIC:
        raise bad(f"magic is {bytes(mv[:4])!r}, expected b'TAIL' where the frames end; "
                  "the file is truncated or its frame sizes are wrong")
    if version != VERSION:
        raise bad(f"version is {version}, expected {VERSION}")
    pos = HEAD_SIZE
    texts: list[str] = []
    seen: dict[str, int] = {}
    for b in range(bands):
        if pos + 2 > size:
            raise bad(f"ends inside band text {b} of {bands}; the file is truncated")
        (n,) = struct.unpack_from("<H", mv, pos)
        if pos + 2 + n > size:
            raise bad(f"band text {b} claims {n} bytes, past the end of the file; the file is truncated")
        raw = bytes(mv[pos + 2:pos + 2 + n])
        if n == 0:
            raise bad(f"band text {b} is empty; every band has a non-empty text")
        if b"\0" in raw:
            raise bad(f"band text {b} contains a 0x00 byte")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise bad(f"band text {b} is not valid UTF-8") from None
        if text in seen:
            raise bad(f"band text {b} ({text!r}) repeats band {seen[text]}; band texts are unique")
        seen[text] = b
        texts.append(text)
        pos += 2 + n
    if pos + _FIXED.size > size:
        raise bad("ends inside the time fields; the file is truncated")
    kind, bits, epoch, step, scale = _FIXED.unpack_from(mv, pos)
    pos += _FIXED.size
    if kind not in (INTERVAL, INSTANT):
        raise bad(f"time_type is {kind}, expected {INTERVAL} (interval) or {INSTANT} (instant)")
    if bits > 64:
        raise bad(f"time_bits is {bits}, expected 0 to 64")
    if scale not in (1, DAY):
        raise bad(f"time_scale is {scale}, expected 1 or {DAY}")
    count = times * (2 if kind == INTERVAL else 1)
    want = pos + -(-count * bits // 8)
    if size != want:
        more = "the file is truncated" if size < want else "nothing may follow the residuals"
        raise bad(f"is {size} bytes, expected {want} for {count} time coordinates at {bits} bits; {more}")
    packed = np.frombuffer(mv, np.uint8, size - pos, pos)
    used = count * bits
    if used % 8 and int(packed[-1]) >> (used % 8):
        raise bad("unused bits after the last time residual must be zero")
    if bits == 0:
        _check_regular(kind, count, epoch, step, scale, bad)
        return Trailer(tuple(texts), kind, scale, epoch, step, 0, count)
    # bits > 0: count <= 8 * size / bits, so the file bounds the work below
    zig = unpack_bits(packed, count, bits).tolist()
    res = tuple((z >> 1) if z % 2 == 0 else -((z >> 1) + 1) for z in zig)
    tr = Trailer(tuple(texts), kind, scale, epoch, step, bits, count, res)
    seconds = tr.seconds
    try:
        check_time_order(kind, seconds)
    except ValueError as exc:
        raise bad(str(exc)) from None
    canon = canonical_time(seconds)[:4]
    if canon != (scale, epoch, step, bits):
        raise bad(f"time fields (scale {scale}, epoch {epoch}, step {step}, bits {bits}) are not canonical; "
                  f"the coordinates give scale {canon[0]}, epoch {canon[1]}, step {canon[2]}, bits {canon[3]}")
    return tr


def _check_regular(kind: int, count: int, epoch: int, step: int, scale: int,
                   bad: Callable[[str], FormatError]) -> None:
    """The rules for coordinates ``(epoch + i * step) * scale``, in constant time."""
    if count < 2 and step != 0:
        raise bad(f"time_step is {step} with {count} coordinate(s); it must be 0 below two coordinates")
    if kind == INSTANT and step < 0:
        raise bad("time coordinate 1 goes backwards; instants never decrease")
    if kind == INTERVAL and step <= 0:
        raise bad("time step 0 does not end after it starts; an interval has start < end")
    if count == 0:
        if epoch != 0:
            raise bad("time_epoch must be 0 without coordinates")
        return
    if scale == 1 and epoch % DAY == 0 and step % DAY == 0:
        raise bad(f"time_scale is 1 but every coordinate is a whole day; the canonical scale is {DAY}")
    last = epoch + (count - 1) * step
    if not (_I64_MIN <= last <= _I64_MAX):
        raise bad("the last time coordinate is outside the 64-bit range")
