"""The rumi header blob: a 28-byte header plus bit-packed frame byte counts.

The blob locates every frame of a file without opening it.  ``Header`` parses
and checks one blob (every reader MUST of the spec plus the canonical encoding)
and answers offsets; ``build_header`` makes the canonical bytes from the frame
byte counts; ``parse_blobs`` checks a whole catalog column of blobs in one numba
pass, without a Python loop per blob.
"""

from __future__ import annotations

import numbers
import struct
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable

import numpy as np

from . import kernels as K
from .dtypes import ENCODINGS, Encoding, encoding
from .errors import BlobError, where
from .grid import FrameUnit, Grid

__all__ = ["Header", "build_header", "parse_blobs", "HEADER_SIZE", "MAGIC", "VERSION", "BLOB_FIELDS"]

HEADER_SIZE = K.HEADER_SIZE
MAGIC = K.MAGIC
VERSION = K.VERSION
_HEADER = struct.Struct("<IHIIHHHBBBIB")
assert _HEADER.size == HEADER_SIZE

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

_VALID_PAIRS = np.zeros((256, 256), dtype=np.uint8)
for _sf, _bps in ENCODINGS:
    _VALID_PAIRS[_sf, _bps] = 1


def _rule(code: int, f: dict) -> str:
    """The message for a ``check_blobs`` status, given the parsed fields."""
    n = f.get("n_frames", 0)
    bits = f.get("count_bits", 0)
    msgs = {
        K.TOO_SHORT: f"blob is {f['blob_size']} bytes, shorter than the 28-byte header",
        K.BAD_MAGIC: "magic is not 4C 4F 56 45 (0x45564F4C); this is not a rumi header blob",
        K.BAD_VERSION: "version must be 1",
        K.ZERO_TILE: f"tile_width and tile_length must be > 0, got {f['tile_width']} x {f['tile_length']}",
        K.ZERO_BANDS: "samples_per_pixel must be >= 1, got 0",
        K.BAD_PAIR: f"(sample_format, bits_per_sample) = ({f['sample_format']}, {f['bits_per_sample']}) "
        "is not a valid rumi sample encoding",
        K.BAD_UNIT: f"frame_unit must be 0 (tile) or 1 (cell), got {f['frame_unit']}",
        K.BAD_COUNT_BITS: f"count_bits must be between 0 and 32, got {bits}",
        K.BAD_SIZE: f"blob is {f['blob_size']} bytes, expected 28 + ceil(N * count_bits / 8) = "
        f"{HEADER_SIZE + -(-n * bits // 8)} for N = {n} frames at {bits} bits",
        K.PADDING_BITS: "unused bits in the final byte of the packed counts must be zero",
        K.ZERO_COUNT: "count_min must be > 0; every frame byte count is greater than zero",
        K.EMPTY_IMAGE: f"image is {f['image_width']} x {f['image_length']}; a rumi image has at least one pixel",
        K.COUNT_OVERFLOW: "a frame byte count exceeds 2**32 - 1, the range of TileByteCounts (LONG)",
        K.NOT_MIN: "count_min is not the smallest frame byte count (no residual is 0); "
        "the encoding is not canonical",
        K.NOT_MIN_BITS: f"count_bits = {bits} is not the minimum width of the largest residual; "
        "the encoding is not canonical",
        K.SINGLE_FRAME_BITS: f"a blob with one frame must have count_bits 0, got {bits}",
        K.TOO_MANY_FRAMES: f"a {f['image_width']} x {f['image_length']} image in {f['tile_width']} x "
        f"{f['tile_length']} tiles has more than 2**40 frames, beyond what rumimm can address",
    }
    return msgs[code]


def _as_uint8(blob) -> np.ndarray:
    if isinstance(blob, np.ndarray):
        return np.ascontiguousarray(blob).view(np.uint8).reshape(-1)
    return np.frombuffer(blob, dtype=np.uint8)


def parse_blobs(blobs, offsets=None, *, errors: str = "raise"):
    """Check and parse many blobs at once, e.g. a catalog column.

    Parameters
    ----------
    blobs : sequence of bytes, a 1-D uint8 array of concatenated blobs, or a pyarrow column
        With a flat array, ``offsets`` (length M + 1, Arrow-style) marks each blob.
        A pyarrow ``BinaryArray``, ``LargeBinaryArray`` or ``ChunkedArray`` of them
        (a Parquet column) is read from its buffers without a copy per blob.
    offsets : array of int, optional
        Start of blob i at ``offsets[i]``, end at ``offsets[i + 1]``.
    errors : {"raise", "status"}
        ``"raise"``: BlobError for the first bad blob.  ``"status"``: return
        a ``status`` column (0 = valid) instead.

    Returns
    -------
    dict of str to ndarray
        One int64 column of length M per name in ``BLOB_FIELDS``, plus
        ``status`` (int64, with ``errors="status"``).
    """
    if offsets is None and type(blobs).__module__.startswith("pyarrow"):
        blobs, offsets = _arrow_buffers(blobs)
    if offsets is None:
        if isinstance(blobs, np.ndarray):
            raise TypeError("a flat uint8 array needs offsets")
        blobs = list(blobs)
        lengths = np.fromiter(map(len, blobs), dtype=np.int64, count=len(blobs))
        data = np.frombuffer(b"".join(blobs), dtype=np.uint8)
        starts = np.zeros(len(blobs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
    else:
        data = _as_uint8(blobs)
        starts = np.ascontiguousarray(offsets, dtype=np.int64)
        if starts.ndim != 1 or starts.size < 1 or starts[0] < 0 or starts[-1] > data.size or np.any(np.diff(starts) < 0):
            raise ValueError("offsets must be non-decreasing, start >= 0 and end inside the data")
    m = starts.size - 1
    fields = np.zeros((m, len(BLOB_FIELDS)), dtype=np.int64)
    status = np.zeros(m, dtype=np.int64)
    if data.size == 0:
        data = np.zeros(1, dtype=np.uint8)  # numba needs a non-empty buffer to slice
    _check_in_parallel(data, starts, fields, status)
    out = {name: fields[:, j] for j, name in enumerate(BLOB_FIELDS)}
    if errors == "status":
        out["status"] = status
        return out
    bad = np.flatnonzero(status)
    if bad.size:
        i = int(bad[0])
        f = {name: int(fields[i, j]) for j, name in enumerate(BLOB_FIELDS)}
        raise BlobError(f"blob {i} of {m}: {_rule(int(status[i]), f)}")
    return out


def _arrow_buffers(column) -> tuple[np.ndarray, np.ndarray]:
    """(data, offsets) of a pyarrow binary column, zero-copy for a single chunk.

    Chunks are joined into one buffer (one copy of the bytes) so the whole column is
    checked in one pass; a null blob is refused, since no file can be opened with it.
    """
    chunks = list(column.chunks) if hasattr(column, "chunks") else [column]
    datas, starts, base = [], [np.zeros(1, np.int64)], 0
    for chunk in chunks:
        kind = str(chunk.type)
        if kind not in ("binary", "large_binary"):
            raise TypeError(f"a pyarrow blob column must be binary or large_binary, got {kind}")
        if chunk.null_count:
            first = next(i for i, v in enumerate(chunk.is_valid().to_pylist()) if not v)
            raise BlobError(f"blob {base + first} is null; every row of a blob column needs a blob")
        _, off_buf, data_buf = chunk.buffers()
        n = len(chunk)
        off = np.frombuffer(off_buf, np.int32 if kind == "binary" else np.int64)[chunk.offset:chunk.offset + n + 1] \
            if off_buf is not None else np.zeros(n + 1, np.int64)
        data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        if n:
            data = data[int(off[0]):int(off[-1])]
            starts.append(off[1:].astype(np.int64) - int(off[0]) + base)
            datas.append(data)
            base += data.size
    data = datas[0] if len(datas) == 1 else (np.concatenate(datas) if datas else np.zeros(0, np.uint8))
    return data, np.concatenate(starts)


_PARALLEL_ROWS = 1 << 16  # below this a second thread costs more than it saves


def _check_in_parallel(data, starts, fields, status) -> None:
    """``check_blobs`` over row ranges on the reader's decode threads (the kernel is nogil)."""
    from .threads import parallel_slot, release_parallel, run_workers

    m = starts.size - 1
    workers = parallel_slot(m // _PARALLEL_ROWS) if m >= 2 * _PARALLEL_ROWS else 1
    if workers < 2:
        K.check_blobs(data, starts, _VALID_PAIRS, fields, status)
        return
    try:
        bounds = np.linspace(0, m, workers + 1).astype(np.int64)

        def part(w):
            a, b = bounds[w], bounds[w + 1]
            K.check_blobs(data, starts[a:b + 1], _VALID_PAIRS, fields[a:b], status[a:b])

        run_workers(part, workers)
    finally:
        release_parallel()


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

    @classmethod
    def parse(cls, blob, *, path=None) -> "Header":
        """Check ``blob`` against every rule of the spec and return its Header."""
        if isinstance(blob, Header):
            return blob
        if isinstance(blob, (numbers.Integral, str)):
            # bytes(n) of an int would allocate n zero bytes (a hostile or mistaken 10**12 included)
            raise TypeError(f"a header blob must be bytes or a buffer, got {type(blob).__name__}")
        data = bytes(blob)
        starts = np.array([0, len(data)], dtype=np.int64)
        fields = np.zeros((1, len(BLOB_FIELDS)), dtype=np.int64)
        status = np.zeros(1, dtype=np.int64)
        buf = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(1, dtype=np.uint8)
        K.check_blobs(buf, starts, _VALID_PAIRS, fields, status)
        f = {name: int(fields[0, j]) for j, name in enumerate(BLOB_FIELDS)}
        if status[0]:
            raise BlobError(f"{where(path)}header blob: {_rule(int(status[0]), f)}")
        return cls(
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

    # -- derived layout -------------------------------------------------------
    @cached_property
    def grid(self) -> Grid:
        return Grid(self.image_width, self.image_length, self.tile_width, self.tile_length,
                    self.samples_per_pixel, self.frame_unit)

    @property
    def encoding(self) -> Encoding:
        return encoding(self.sample_format, self.bits_per_sample)

    @property
    def dtype(self) -> np.dtype:
        return self.encoding.dtype

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.grid.shape

    @property
    def n_frames(self) -> int:
        return self.grid.n_frames

    @property
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
        return self.count_min + int(K.residual_at(self.packed, k, self.count_bits))

    def offset(self, k: int) -> int:
        """Offset of frame k: base + k * count_min + sum(residual[0:k]), no walk of offsets."""
        if not 0 <= k <= self.n_frames:
            raise IndexError(f"frame {k} out of range for {self.n_frames} frames")
        return self.base_frame_offset + k * self.count_min + int(K.residual_sum(self.packed, k, self.count_bits))

    @cached_property
    def counts(self) -> np.ndarray:
        """Every frame byte count in frame-index order (uint64, read-only)."""
        if self.count_bits == 0:
            out = np.broadcast_to(np.uint64(self.count_min), (self.n_frames,))
            return out
        out = np.empty(self.n_frames, dtype=np.uint64)
        K.unpack_counts(self.packed, self.n_frames, self.count_bits, self.count_min, out)
        out.flags.writeable = False
        return out

    @cached_property
    def offsets(self) -> np.ndarray:
        """Frame offsets, length N + 1: ``offsets[N]`` is the end of the last frame."""
        out = np.empty(self.n_frames + 1, dtype=np.uint64)
        K.prefix_offsets(self.packed, self.n_frames, self.count_bits, self.count_min,
                         self.base_frame_offset, out)
        out.flags.writeable = False
        return out

    @property
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

    def __eq__(self, other) -> bool:
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
    if counts.max() > K.UINT32_MAX:
        raise ValueError("a frame byte count exceeds 2**32 - 1 (TileByteCounts is LONG)")
    for name, v, hi in (("image_width", grid.image_width, 0xFFFFFFFF), ("image_length", grid.image_length, 0xFFFFFFFF),
                        ("tile_width", grid.tile_width, 0xFFFF), ("tile_length", grid.tile_length, 0xFFFF),
                        ("samples_per_pixel", grid.samples_per_pixel, 0xFFFF)):
        if not 1 <= v <= hi:
            raise ValueError(f"{name} must be in [1, {hi}], got {v}")
    cmin, bits = canonical_count_encoding(counts)
    packed = np.zeros(-(-n * bits // 8), dtype=np.uint8)
    if bits:
        K.pack_residuals(counts, cmin, bits, packed)
    head = _HEADER.pack(MAGIC, VERSION, grid.image_width, grid.image_length, grid.tile_width,
                        grid.tile_length, grid.samples_per_pixel, enc.bits_per_sample,
                        enc.sample_format, int(grid.unit), cmin, bits)
    return head + packed.tobytes()
