"""The rumi header blob: a 28-byte header plus bit-packed frame byte counts.

The blob locates every frame of a file without opening it.  ``Header`` parses
and checks one blob (every reader MUST of the spec plus the canonical encoding)
and answers offsets; ``build_header`` makes the canonical bytes from the frame
byte counts; ``parse_blobs`` (in :mod:`rumimm.reader.blob_column`) checks a
whole catalog column of blobs in one numba pass, without a Python loop per blob.

One blob is parsed with numpy alone (no numba): opening a file and reading its
metadata must stay light, and unpacking one blob's residuals is a few vector
operations.  ``parse_blobs`` applies the same rules, in the same order and with the
same status codes (defined here), in ``kernels.check_blobs``.
"""

from __future__ import annotations

import numbers
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from rumimm._deprecation import renamed
from rumimm.errors import BlobError, where
from rumimm.format.dtypes import ENCODINGS, Encoding, encoding
from rumimm.format.grid import FrameUnit, Grid
from rumimm.format.packing import (  # noqa: F401
    RESIDUAL_CHUNK,
    pack_residuals,
    residual_chunks,
    residual_extent,
    residual_sum,
    residuals,
)
from rumimm.format.spec import V01, Spec, register_header_type
from rumimm.format.tiff import build_prefix

if TYPE_CHECKING:
    from rumimm._typing import BlobArg, StrPath

__all__ = [
    "BLOB_FIELDS",
    "HEADER_SIZE",
    "MAGIC",
    "VALID_PAIRS",
    "VERSION",
    "Header",
    "RecentHeaders",
    "blob_bytes",
    "build_header",
    "rule_broken",
]

MAGIC = 0x45564F4C
VERSION = 1
HEADER_SIZE = 28
UINT32_MAX = 0xFFFFFFFF
#: Largest N a blob may claim: keeps N * count_bits and frame ends inside int64.
MAX_FRAMES = 1 << 40
_HEADER = struct.Struct("<IHIIHHHBBBIB")
assert _HEADER.size == HEADER_SIZE

# Status codes of a blob check (``check_one`` and ``kernels.check_blobs``); ``rule_broken`` words them.
OK = 0
TOO_SHORT = 1
BAD_MAGIC = 2
BAD_VERSION = 3
ZERO_TILE = 4
ZERO_BANDS = 5
BAD_PAIR = 6
BAD_UNIT = 7
BAD_COUNT_BITS = 8
BAD_SIZE = 9
PADDING_BITS = 10
ZERO_COUNT = 11
EMPTY_IMAGE = 12
COUNT_OVERFLOW = 13
NOT_MIN = 14
NOT_MIN_BITS = 15
SINGLE_FRAME_BITS = 16
TOO_MANY_FRAMES = 17

# Headers of recently parsed small blobs: a data loader reopens the same files with the same
# blobs, and a Header is immutable (its offsets are computed once and shared, read-only).
_RECENT_SIZE = 256
_RECENT_MAX_BLOB = 4096  # bytes: at most ~32k frames, so the shared offsets stay small


class RecentHeaders(dict[bytes, Any]):
    """Headers of recently parsed small blobs, by their bytes (oldest evicted first, no lock)."""

    def keep(self, data: bytes, hdr: Header) -> None:
        if len(data) > _RECENT_MAX_BLOB:
            return
        if len(self) >= _RECENT_SIZE:
            try:
                self.pop(next(iter(self)))  # the oldest
            except (KeyError, RuntimeError, StopIteration):
                pass  # another thread evicted first
        self[data] = hdr


def blob_bytes(blob: BlobArg) -> bytes:
    """The bytes of a blob given as bytes or any buffer; TypeError for an int or a str."""
    if isinstance(blob, (numbers.Integral, str)):
        # bytes(n) of an int would allocate n zero bytes (a hostile or mistaken 10**12 included)
        raise TypeError(f"a header blob must be bytes or a buffer, got {type(blob).__name__}")
    return bytes(blob)


_recent = RecentHeaders()

#: Column names of the arrays ``parse_blobs`` returns, in order.
BLOB_FIELDS = (
    "image_width",
    "image_length",
    "tile_width",
    "tile_length",
    "samples_per_pixel",
    "bits_per_sample",
    "sample_format",
    "frame_unit",
    "count_min",
    "count_bits",
    "n_frames",
    "blob_size",
)

VALID_PAIRS = np.zeros((256, 256), dtype=np.uint8)
for _sf, _bps in ENCODINGS:
    VALID_PAIRS[_sf, _bps] = 1


def rule_broken(code: int, f: dict) -> str:
    """The message for a ``check_blobs`` status, given the parsed fields."""
    n = f.get("n_frames", 0)
    bits = f.get("count_bits", 0)
    msgs = {
        TOO_SHORT: f"blob is {f['blob_size']} bytes, shorter than the 28-byte header",
        BAD_MAGIC: "magic is not 4C 4F 56 45 (0x45564F4C); this is not a rumi header blob",
        BAD_VERSION: "version must be 1",
        ZERO_TILE: f"tile_width and tile_length must be > 0, got {f['tile_width']} x {f['tile_length']}",
        ZERO_BANDS: "samples_per_pixel must be >= 1, got 0",
        BAD_PAIR: f"(sample_format, bits_per_sample) = ({f['sample_format']}, {f['bits_per_sample']}) "
        "is not a valid rumi sample encoding",
        BAD_UNIT: f"frame_unit must be 0 (tile) or 1 (cell), got {f['frame_unit']}",
        BAD_COUNT_BITS: f"count_bits must be between 0 and 32, got {bits}",
        BAD_SIZE: f"blob is {f['blob_size']} bytes, expected 28 + ceil(N * count_bits / 8) = "
        f"{HEADER_SIZE + -(-n * bits // 8)} for N = {n} frames at {bits} bits",
        PADDING_BITS: "unused bits in the final byte of the packed counts must be zero",
        ZERO_COUNT: "count_min must be > 0; every frame byte count is greater than zero",
        EMPTY_IMAGE: f"image is {f['image_width']} x {f['image_length']}; a rumi image has at least one pixel",
        COUNT_OVERFLOW: "a frame byte count exceeds 2**32 - 1, the range of TileByteCounts (LONG)",
        NOT_MIN: "count_min is not the smallest frame byte count (no residual is 0); "
        "the encoding is not canonical",
        NOT_MIN_BITS: f"count_bits = {bits} is not the minimum width of the largest residual; "
        "the encoding is not canonical",
        SINGLE_FRAME_BITS: f"a blob with one frame must have count_bits 0, got {bits}",
        TOO_MANY_FRAMES: f"a {f['image_width']} x {f['image_length']} image in {f['tile_width']} x "
        f"{f['tile_length']} tiles has more than 2**40 frames, beyond what rumimm can address",
    }
    return msgs[code]


@dataclass(frozen=True, eq=False)
class Header:
    """A checked header blob: the fields, the grid and the frame locations.

    Holds only the blob bytes; counts and offsets are unpacked on first use.
    Construct with :meth:`Header.parse` (or ``Header(blob)`` via ``from_bytes``).
    """

    blob: bytes
    image_width: int
    image_length: int
    tile_width: int
    tile_length: int
    samples_per_pixel: int
    bits_per_sample: int
    sample_format: int
    frame_unit: FrameUnit
    count_min: int
    count_bits: int

    #: The specification this blob follows (``format.v2.Header2``'s is ``spec.V02``).
    format_spec: ClassVar[Spec] = V01
    #: Its name, ``"0.1"`` (``"0.2"`` for a ``Header2``): the public report.
    spec: ClassVar[str] = V01.name
    #: Headers of recent blobs of this spec, by their bytes (reused by ``parse`` and ``from_layout``).
    _recent_headers: ClassVar[RecentHeaders] = _recent
    #: Time steps: always one in spec 0.1.
    time_count = 1

    @classmethod
    def parse(cls, blob: BlobArg, *, path: StrPath | None = None) -> Header:
        """Check ``blob`` against every rule of the spec and return its Header."""
        if type(blob) is bytes:  # the common case first: a blob parsed recently is reused as is
            hdr = _recent.get(blob)
            if hdr is not None:
                return hdr
        if isinstance(blob, Header):
            return blob
        data = blob_bytes(blob)
        hdr = _recent.get(data)
        if hdr is not None:
            return hdr
        code, f = check_one(data)
        if code:
            raise BlobError(f"{where(path)}header blob: {rule_broken(code, f)}")
        residual_array = f.get("residuals")
        hdr = cls(
            blob=data,
            image_width=f["image_width"],
            image_length=f["image_length"],
            tile_width=f["tile_width"],
            tile_length=f["tile_length"],
            samples_per_pixel=f["samples_per_pixel"],
            bits_per_sample=f["bits_per_sample"],
            sample_format=f["sample_format"],
            frame_unit=FrameUnit(f["frame_unit"]),
            count_min=f["count_min"],
            count_bits=f["count_bits"],
        )
        if residual_array is not None:
            hdr.__dict__["_residuals"] = residual_array  # unpacked once, by the check
        _recent.keep(data, hdr)
        return hdr

    @staticmethod
    def blob_bytes(blob: Any) -> bytes:
        """The bytes of a blob given as bytes or any buffer (TypeError for an int or a str)."""
        return blob_bytes(blob)

    @staticmethod
    def build_blob(grid: Grid, enc: Encoding, counts: np.ndarray) -> bytes:
        """The canonical blob of this spec (``build_header``)."""
        return build_header(grid, enc, counts)

    @staticmethod
    def build_file_prefix(grid: Grid, enc: Encoding, offsets: np.ndarray, counts: np.ndarray,
                          matrix: tuple[float, ...], keys: tuple[int, ...]) -> bytes:
        """Every byte of a file of this spec before frame 0 (``tiff.build_prefix``)."""
        return build_prefix(grid, enc, offsets, counts, matrix, keys)

    @classmethod
    def from_layout(cls, blob: bytes, grid: Grid, enc: Encoding, counts: np.ndarray) -> Header:
        """The header of a file whose IFD was walked and checked: its canonical ``blob`` (built from
        the same ``grid``, ``enc`` and ``counts``), with the grid and counts kept rather than parsed back."""
        known = cls._recent_headers.get(blob)
        if known is not None:  # the same file walked again: its offsets are already made
            return known
        cmin = int(counts.min())
        hdr = cls(blob=blob, image_width=grid.image_width, image_length=grid.image_length,
                  tile_width=grid.tile_width, tile_length=grid.tile_length,
                  samples_per_pixel=grid.samples_per_pixel, bits_per_sample=enc.bits_per_sample,
                  sample_format=enc.sample_format, frame_unit=FrameUnit(grid.unit), count_min=cmin,
                  count_bits=0 if int(counts.max()) == cmin else (int(counts.max()) - cmin).bit_length())
        hdr._keep_layout(grid, enc, counts)
        cls._recent_headers.keep(blob, hdr)
        return hdr

    def _keep_layout(self, grid: Grid, enc: Encoding, counts: np.ndarray) -> None:
        """Cache what ``from_layout`` already knows (the dataclass is frozen: through ``__dict__``)."""
        self.__dict__["grid"] = grid
        self.__dict__["encoding"] = enc
        self.__dict__["_residuals"] = counts - np.uint64(self.count_min)

    # -- derived layout -------------------------------------------------------
    @cached_property
    def grid(self) -> Grid:
        return Grid(self.image_width, self.image_length, self.tile_width, self.tile_length,
                    self.samples_per_pixel, self.frame_unit)

    @cached_property
    def encoding(self) -> Encoding:
        return encoding(self.sample_format, self.bits_per_sample)

    @property
    def dtype(self) -> np.dtype:
        return self.encoding.dtype

    @property
    def itemsize(self) -> int:
        """Bytes of one decoded sample."""
        return self.encoding.itemsize

    @property
    def frame_unit_name(self) -> str:
        """``"tile"`` or ``"cell"``; a spec 0.2 header gives the decoded frame's axes (``"t b h w"``)."""
        return self.frame_unit.name.lower()

    @property
    def interleaved(self) -> bool:
        """Whether cells interleave bands per pixel: never in spec 0.1 (``Header2`` says for 0.2)."""
        return False

    @cached_property
    def grid_rows(self) -> np.ndarray:
        """The grid as one int64 (1, GRID_COLS) row, for the planning kernels (shared by every reader of it)."""
        g = self.grid
        row = np.array([[g.tile_length, g.tile_width, g.tiles_across, g.tiles_down, g.samples_per_pixel,
                         int(g.unit == FrameUnit.CELL), g.image_length, g.image_width]], np.int64)
        return row

    @property
    def shape(self) -> tuple[int, ...]:  # (B, Y, X); a 0.2 Header2 of several steps adds T first
        return self.grid.shape

    @cached_property
    def n_frames(self) -> int:
        return self.grid.n_frames

    @cached_property
    def base_frame_offset(self) -> int:
        return self.grid.base_frame_offset

    @property
    def packed(self) -> np.ndarray:
        """The packed residuals as uint8 (a view of the blob, at least one byte)."""
        p = np.frombuffer(self.blob, dtype=np.uint8)[HEADER_SIZE:]
        return p if p.size else np.zeros(1, dtype=np.uint8)

    # -- counts and offsets ----------------------------------------------------
    def byte_count(self, k: int) -> int:
        """Compressed size of frame k, decoded independently of the others."""
        k = self._check_frame(k)
        if "_residuals" in self.__dict__ or self.count_bits == 0:
            return int(self.frame_byte_counts[k])
        return self.count_min + int(residuals(self.packed, k, k + 1, self.count_bits)[0])

    def offset(self, k: int) -> int:
        """Offset of frame k: base + k * count_min + sum(residual[0:k]), no walk of offsets."""
        if not 0 <= k <= self.n_frames:
            raise IndexError(f"frame {k} out of range for {self.n_frames} frames")
        if "_residuals" in self.__dict__:
            return int(self.frame_offsets[k])
        return self.base_frame_offset + k * self.count_min + residual_sum(self.packed, k, self.count_bits)

    @cached_property
    def _residuals(self) -> np.ndarray:
        return residuals(self.packed, 0, self.n_frames, self.count_bits)

    @cached_property
    def frame_byte_counts(self) -> np.ndarray:
        """Every frame's byte count (TileByteCounts) in frame-index order (uint64, read-only)."""
        if self.count_bits == 0:
            out = np.broadcast_to(np.uint64(self.count_min), (self.n_frames,))
            return out
        out = self._residuals + np.uint64(self.count_min)
        out.flags.writeable = False
        return out

    @cached_property
    def counts_u64(self) -> np.ndarray:
        """The byte counts as one contiguous uint64 array for the read engine, shared by its images.

        Writable only so that the kernels see one array type; nothing writes to it.
        """
        return np.array(self.frame_byte_counts, dtype=np.uint64)

    @cached_property
    def frame_offsets(self) -> np.ndarray:
        """Frame byte offsets (TileOffsets), length N + 1: ``frame_offsets[N]`` is the end of the last frame."""
        out = np.empty(self.n_frames + 1, dtype=np.uint64)
        out[0] = self.base_frame_offset
        np.cumsum(self.frame_byte_counts, out=out[1:])
        out[1:] += np.uint64(self.base_frame_offset)
        out.flags.writeable = False
        return out

    @property
    def offsets(self) -> np.ndarray:
        """Deprecated: ``frame_offsets`` (an Image's ``offsets`` are its bands' scale offsets)."""
        renamed("Header.offsets", "Header.frame_offsets")
        return self.frame_offsets

    @property
    def counts(self) -> np.ndarray:
        """Deprecated: ``frame_byte_counts`` (an Image's ``count`` is its band count)."""
        renamed("Header.counts", "Header.frame_byte_counts")
        return self.frame_byte_counts

    @cached_property
    def file_size(self) -> int:
        """Exact size of the rumi file this blob describes (end of the last frame)."""
        return self.offset(self.n_frames)

    def _check_frame(self, k: int) -> int:
        k = int(k)
        if not 0 <= k < self.n_frames:
            raise IndexError(f"frame {k} out of range for {self.n_frames} frames")
        return k

    # -- presentation ----------------------------------------------------------
    def to_bytes(self) -> bytes:
        return self.blob

    def __bytes__(self) -> bytes:
        return self.blob

    def __len__(self) -> int:
        return len(self.blob)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Header):
            return self.blob == other.blob
        if isinstance(other, (bytes, bytearray, memoryview)):
            return self.blob == bytes(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.blob)

    def __repr__(self) -> str:
        b, y, x = self.shape
        return (f"<rumimm.Header ({b}, {y}, {x}) {self.encoding.name} tile "
                f"{self.tile_length}x{self.tile_width} {self.frame_unit.name.lower()} "
                f"frames={self.n_frames} bytes={len(self.blob)}>")

    def to_dict(self) -> dict:
        """JSON-safe summary of the blob."""
        g = self.grid
        return {
            "spec": "0.1",
            "shape": list(self.shape),
            "dtype": self.encoding.name,
            "sample_format": self.sample_format,
            "bits_per_sample": self.bits_per_sample,
            "tile": [self.tile_length, self.tile_width],
            "tiles_across": g.tiles_across,
            "tiles_down": g.tiles_down,
            "frame_unit": self.frame_unit.name.lower(),
            "frames": self.n_frames,
            "base_frame_offset": self.base_frame_offset,
            "count_min": self.count_min,
            "count_bits": self.count_bits,
            "file_size": self.file_size,
            "blob_size": len(self.blob),
        }


def canonical_count_encoding(counts: np.ndarray) -> tuple[int, int]:
    """(count_min, count_bits) exactly as the spec's Encoding section defines them."""
    cmin = int(counts.min())
    cmax = int(counts.max())
    return cmin, (0 if cmax == cmin else (cmax - cmin).bit_length())


def build_header(grid: Grid, enc: Encoding, counts: Iterable[int] | np.ndarray) -> bytes:
    """The canonical blob for a grid, an encoding and its frame byte counts."""
    counts = np.ascontiguousarray(counts, dtype=np.uint64).reshape(-1)
    n = grid.n_frames
    if counts.size != n:
        raise ValueError(f"expected {n} frame byte counts, got {counts.size}")
    if n == 0:
        raise ValueError("a rumi image has at least one frame")
    if counts.min() == 0:
        raise ValueError("every frame byte count must be > 0")
    if counts.max() > UINT32_MAX:
        raise ValueError("a frame byte count exceeds 2**32 - 1 (TileByteCounts is LONG)")
    for name, v, hi in (("image_width", grid.image_width, 0xFFFFFFFF), ("image_length", grid.image_length, 0xFFFFFFFF),
                        ("tile_width", grid.tile_width, 0xFFFF), ("tile_length", grid.tile_length, 0xFFFF),
                        ("samples_per_pixel", grid.samples_per_pixel, 0xFFFF)):
        if not 1 <= v <= hi:
            raise ValueError(f"{name} must be in [1, {hi}], got {v}")
    cmin, bits = canonical_count_encoding(counts)
    packed = pack_residuals(counts, cmin, bits)
    head = _HEADER.pack(MAGIC, VERSION, grid.image_width, grid.image_length, grid.tile_width,
                        grid.tile_length, grid.samples_per_pixel, enc.bits_per_sample,
                        enc.sample_format, int(grid.unit), cmin, bits)
    return head + packed.tobytes()


def _bits_of(data: bytes) -> dict:
    (magic, version, width, length, tw, tl, bands, bps, sf, unit, cmin, bits) = _HEADER.unpack_from(data)
    return {"magic": magic, "version": version, "image_width": width, "image_length": length, "tile_width": tw,
            "tile_length": tl, "samples_per_pixel": bands, "bits_per_sample": bps, "sample_format": sf,
            "frame_unit": unit, "count_min": cmin, "count_bits": bits, "n_frames": 0, "blob_size": len(data)}


def check_one(data: bytes) -> tuple[int, dict]:
    """(status, fields) of one blob: every reader MUST of the spec and the canonical encoding.

    The rules and their order are those of ``kernels.check_blobs`` (the batch check).
    For a blob of at most 65536 frames ``fields["residuals"]`` keeps the unpacked
    residuals (uint64), so a Header need not unpack them again.
    """
    f = _bits_of(data.ljust(HEADER_SIZE, b"\0"))
    f["blob_size"] = len(data)
    if len(data) < HEADER_SIZE:
        return TOO_SHORT, f
    bits, cmin = f["count_bits"], f["count_min"]
    if f["magic"] != MAGIC:
        return BAD_MAGIC, f
    if f["version"] != VERSION:
        return BAD_VERSION, f
    if f["tile_width"] == 0 or f["tile_length"] == 0:
        return ZERO_TILE, f
    if f["samples_per_pixel"] == 0:
        return ZERO_BANDS, f
    if (f["sample_format"], f["bits_per_sample"]) not in ENCODINGS:
        return BAD_PAIR, f
    if f["frame_unit"] > 1:
        return BAD_UNIT, f
    if bits > 32:
        return BAD_COUNT_BITS, f
    if f["image_width"] == 0 or f["image_length"] == 0:
        return EMPTY_IMAGE, f
    across = -(-f["image_width"] // f["tile_width"])
    down = -(-f["image_length"] // f["tile_length"])
    if across > MAX_FRAMES // down:
        return TOO_MANY_FRAMES, f
    n = across * down * (f["samples_per_pixel"] if f["frame_unit"] == 0 else 1)
    f["n_frames"] = n
    if n > MAX_FRAMES:
        return TOO_MANY_FRAMES, f
    packed_size = -(-n * bits // 8)
    if len(data) != HEADER_SIZE + packed_size:
        return BAD_SIZE, f
    if cmin == 0:
        return ZERO_COUNT, f
    if n == 1 and bits != 0:
        return SINGLE_FRAME_BITS, f
    if (n * bits) & 7 and data[-1] >> ((n * bits) & 7):
        return PADDING_BITS, f
    if bits:
        rmin, rmax, whole = residual_extent(np.frombuffer(data, np.uint8, offset=HEADER_SIZE), n, bits)
        if whole is not None:
            f["residuals"] = whole
        if rmin != 0:
            return NOT_MIN, f
        if rmax.bit_length() != bits:
            return NOT_MIN_BITS, f
        if cmin + rmax > UINT32_MAX:
            return COUNT_OVERFLOW, f
    return OK, f


register_header_type(V01, Header)
