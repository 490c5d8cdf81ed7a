"""Spec 0.2.0-draft (rumi-eo 0.18 and later): the ``RUMI`` file header, the 13-tag IFD and the 32-byte blob.

A 0.2 file starts with a 16-byte header (``RUMI``, u16 version 1, u16 reserved 0, u64
IFD offset 16) instead of a BigTIFF header; its IFD adds FrameUnit (65000, SHORT) and
TimeCount (65001, LONG) to the eleven tags of 0.1.0 (276 bytes, external values from
byte 292); frames are followed by the ``TAIL`` trailer (``format.trailer``).  The
header blob is 32 bytes: a u32 ``time_count`` at offset 14 moves every later field.

:class:`Header2` is a :class:`~rumimm.format.blob.Header` whose grid is a
:class:`Grid2`: the spec 0.1 grid of *virtual bands* (``format.units``), so the read
engine locates, plans and places 0.2 frames exactly as 0.1 frames.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np

from rumimm.errors import BlobError, FormatError, where
from rumimm.format import units
from rumimm.format.bigtiff import entry_offset, ifd_end, ifd_size
from rumimm.format.blob import (
    MAGIC,
    MAX_FRAMES,
    UINT32_MAX,
    VERSION,
    Header,
    RecentHeaders,
    blob_bytes,
    canonical_count_encoding,
)
from rumimm.format.dtypes import SPEC_ENCODINGS, Encoding, encoding
from rumimm.format.georef import GEOREF_BYTES
from rumimm.format.grid import FrameUnit, Grid, ceildiv
from rumimm.format.packing import pack_residuals, residual_extent
from rumimm.format.spec import V02, Spec, parse_any, register_header_type, spec_of
from rumimm.format.tiff import OPENZL_MAGIC, PROFILE_V2, Tag, TagV2, TiffType, build_prefix, layout_ifd

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from rumimm._typing import BlobArg, SpecName, StrPath

__all__ = [
    "FILE_HEADER",
    "FILE_MAGIC",
    "HEADER_SIZE2",
    "IFD_END2",
    "N_TAGS2",
    "Grid2",
    "Header2",
    "base_frame_offset2",
    "build_header2",
    "build_prefix2",
    "check_blob2",
    "parse_header",
    "spec_of_file",
]

FILE_MAGIC = b"RUMI"
FILE_VERSION = 1
#: The 16 bytes every 0.2 file starts with.
FILE_HEADER = FILE_MAGIC + struct.pack("<HHQ", FILE_VERSION, 0, 16)
N_TAGS2 = 13
IFD_SIZE2 = ifd_size(N_TAGS2)  # 276
IFD_END2 = ifd_end(N_TAGS2)  # 292
HEADER_SIZE2 = 32
#: The largest decoded frame a 0.2 header may imply (the reference reader's default limit is 1 GiB too).
MAX_FRAME_DECODED = 1 << 30
_HEADER2 = struct.Struct("<IHIIIHHHBBBIB")
assert _HEADER2.size == HEADER_SIZE2

_recent2 = RecentHeaders()


def spec_of_file(head: bytes) -> SpecName | None:
    """``"0.2"`` for a file starting with ``RUMI``, ``"0.1"`` for a BigTIFF, else None (``spec.spec_of`` raises)."""
    try:
        return spec_of(head).name
    except FormatError:
        return None


def base_frame_offset2(bands: int, n_frames: int) -> int:
    """Byte where a 0.2 file's frames start (292 + the external values)."""
    b, n = bands, n_frames
    return IFD_END2 + (4 * b if b >= 5 else 0) + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0) + GEOREF_BYTES


@dataclass(frozen=True)
class Grid2(Grid):
    """A 0.2 grid seen as a 0.1 grid of ``bands * times`` virtual bands.

    ``samples_per_pixel`` and ``unit`` are the virtual ones the read engine uses (tile
    frames for units 0 and 9, cell frames otherwise); ``bands``, ``times`` and
    ``layout`` are the file's.
    """

    bands: int = 1
    times: int = 1
    layout: int = 0

    @classmethod
    def of(cls, image_width: int, image_length: int, tile_width: int, tile_length: int, bands: int, times: int,
           layout: int) -> Grid2:
        unit = FrameUnit.TILE if units.is_tile(layout) else FrameUnit.CELL
        return cls(image_width, image_length, tile_width, tile_length, bands * times, unit, bands, times,
                   int(layout))

    @cached_property
    def base_frame_offset(self) -> int:
        return base_frame_offset2(self.bands, self.n_frames)

    @property
    def band_major(self) -> bool:
        return units.band_major(self.layout, self.bands, self.times)

    @property
    def interleaved(self) -> bool:
        return units.interleaved(self.layout)

    def virtual_bands(self, t_list: ArrayLike, b_list: ArrayLike) -> np.ndarray:
        """Virtual band of each (step, band) pair of the outer product, shape (len(t), len(b))."""
        t = np.asarray(t_list, np.int64)[:, None]
        b = np.asarray(b_list, np.int64)[None, :]
        return b * self.times + t if self.band_major else t * self.bands + b

    @property
    def shape4(self) -> tuple[int, int, int, int]:
        """(T, B, Y, X) of the file."""
        return (self.times, self.bands, self.image_length, self.image_width)


# --------------------------------------------------------------------------- the 32-byte blob


def _fields(data: bytes) -> dict:
    (magic, version, width, length, times, tw, tl, bands, bps, sf, unit, cmin, bits) = _HEADER2.unpack_from(
        data.ljust(HEADER_SIZE2, b"\0"))
    return {"magic": magic, "version": version, "image_width": width, "image_length": length,
            "time_count": times, "tile_width": tw, "tile_length": tl, "samples_per_pixel": bands,
            "bits_per_sample": bps, "sample_format": sf, "frame_unit": unit, "count_min": cmin,
            "count_bits": bits, "n_frames": 0, "blob_size": len(data)}


def check_blob2(data: bytes) -> tuple[str | None, dict]:
    """(the first rule ``data`` breaks as a 0.2 blob, or None; its fields).

    The rules of 0.1.0's blob plus a time count of at least 1 and a frame unit
    registered and valid for B and T.  For at most 65536 frames ``fields["residuals"]``
    keeps the unpacked residuals.
    """
    f = _fields(data)
    if len(data) < HEADER_SIZE2:
        return f"blob is {len(data)} bytes, shorter than the 32-byte header", f
    if f["magic"] != MAGIC:
        return "magic is not 4C 4F 56 45 (0x45564F4C); this is not a rumi header blob", f
    if f["version"] != VERSION:
        return f"version must be {VERSION}, got {f['version']}", f
    if f["image_width"] == 0 or f["image_length"] == 0:
        return f"image is {f['image_width']} x {f['image_length']}; a rumi image has at least one pixel", f
    if f["tile_width"] == 0 or f["tile_length"] == 0:
        return f"tile_width and tile_length must be > 0, got {f['tile_width']} x {f['tile_length']}", f
    if f["samples_per_pixel"] == 0:
        return "samples_per_pixel must be >= 1, got 0", f
    if f["time_count"] == 0:
        return "time_count must be >= 1, got 0", f
    if (f["sample_format"], f["bits_per_sample"]) not in SPEC_ENCODINGS["0.2"]:
        return (f"(sample_format, bits_per_sample) = ({f['sample_format']}, {f['bits_per_sample']}) is not a "
                "sample type of spec 0.2"), f
    rule = units.check_unit(f["frame_unit"], f["samples_per_pixel"], f["time_count"])
    if rule:
        return rule, f
    if f["count_bits"] > 32:
        return f"count_bits must be between 0 and 32, got {f['count_bits']}", f
    across = ceildiv(f["image_width"], f["tile_width"])
    down = ceildiv(f["image_length"], f["tile_length"])
    per = f["samples_per_pixel"] * f["time_count"] if units.is_tile(f["frame_unit"]) else 1
    if across * down > MAX_FRAMES // per:
        return (f"a {f['image_width']} x {f['image_length']} image in {f['tile_width']} x {f['tile_length']} "
                "tiles has more than 2**40 frames, beyond what rumimm can address"), f
    n = across * down * per
    f["n_frames"] = n
    frame = ((1 if units.is_tile(f["frame_unit"]) else f["samples_per_pixel"] * f["time_count"])
             * min(f["tile_length"], f["image_length"]) * min(f["tile_width"], f["image_width"])
             * SPEC_ENCODINGS["0.2"][(f["sample_format"], f["bits_per_sample"])].itemsize)
    if frame > MAX_FRAME_DECODED:
        return (f"a frame decodes to {frame} bytes, more than the {MAX_FRAME_DECODED} bytes rumimm decodes at "
                "once"), f
    bits, cmin = f["count_bits"], f["count_min"]
    want = HEADER_SIZE2 + -(-n * bits // 8)
    if len(data) != want:
        return (f"blob is {len(data)} bytes, expected 32 + ceil(N * count_bits / 8) = {want} for N = {n} "
                f"frames at {bits} bits"), f
    if cmin == 0:
        return "count_min must be > 0; every frame byte count is greater than zero", f
    if n == 1 and bits:
        return f"a blob with one frame must have count_bits 0, got {bits}", f
    if (n * bits) & 7 and data[-1] >> ((n * bits) & 7):
        return "unused bits in the final byte of the packed counts must be zero", f
    if bits:
        rmin, rmax, whole = residual_extent(np.frombuffer(data, np.uint8, offset=HEADER_SIZE2), n, bits)
        if whole is not None:
            f["residuals"] = whole
        if rmin != 0:
            return "count_min is not the smallest frame byte count (no residual is 0); the encoding is not canonical", f
        if rmax.bit_length() != bits:
            return f"count_bits = {bits} is not the minimum width of the largest residual; not canonical", f
        if cmin + rmax > UINT32_MAX:
            return "a frame byte count exceeds 2**32 - 1, the range of TileByteCounts (LONG)", f
    return None, f


@dataclass(frozen=True, eq=False)
class Header2(Header):
    """A checked spec 0.2 header blob (32 bytes + packed frame sizes).

    ``frame_unit`` is the virtual 0.1 unit the engine reads by; ``layout`` is the
    file's ``frame_unit`` (0 to 9) and ``time_count`` its T.
    """

    time_count: int = 1
    layout: int = 0

    format_spec: ClassVar[Spec] = V02
    spec: ClassVar[str] = V02.name
    _recent_headers: ClassVar[RecentHeaders] = _recent2

    @classmethod
    def parse(cls, blob: BlobArg, *, path: StrPath | None = None) -> Header2:
        """Check ``blob`` against every rule of spec 0.2 and return its Header2."""
        if isinstance(blob, Header2):
            return blob
        if isinstance(blob, Header):
            raise BlobError(f"{where(path)}header blob: a spec 0.1 header was given where spec 0.2 is needed")
        data = blob_bytes(blob)
        hdr = _recent2.get(data)
        if hdr is not None:
            return hdr
        rule, f = check_blob2(data)
        if rule:
            raise BlobError(f"{where(path)}header blob (spec 0.2): {rule}")
        virtual = FrameUnit.TILE if units.is_tile(f["frame_unit"]) else FrameUnit.CELL
        hdr = cls(blob=data, image_width=f["image_width"], image_length=f["image_length"],
                  tile_width=f["tile_width"], tile_length=f["tile_length"],
                  samples_per_pixel=f["samples_per_pixel"], bits_per_sample=f["bits_per_sample"],
                  sample_format=f["sample_format"], frame_unit=virtual, count_min=f["count_min"],
                  count_bits=f["count_bits"], time_count=f["time_count"], layout=f["frame_unit"])
        if f.get("residuals") is not None:
            hdr.__dict__["_residuals"] = f["residuals"]
        _recent2.keep(data, hdr)
        return hdr

    @staticmethod
    def build_blob(grid: Grid, enc: Encoding, counts: np.ndarray) -> bytes:
        """The canonical 0.2 blob (``build_header2``)."""
        assert isinstance(grid, Grid2)
        return build_header2(grid, enc, counts)

    @staticmethod
    def build_file_prefix(grid: Grid, enc: Encoding, offsets: np.ndarray, counts: np.ndarray,
                          matrix: tuple[float, ...], keys: tuple[int, ...]) -> bytes:
        """Every byte of a 0.2 file before frame 0 (``build_prefix2``)."""
        assert isinstance(grid, Grid2)
        return build_prefix2(grid, enc, offsets, counts, matrix, keys)

    @classmethod
    def from_layout(cls, blob: bytes, grid: Grid, enc: Encoding, counts: np.ndarray) -> Header2:
        """The header of a 0.2 file whose IFD was walked and checked (see ``Header.from_layout``)."""
        assert isinstance(grid, Grid2)
        known = cls._recent_headers.get(blob)
        if known is not None:
            return known
        cmin, cmax = int(counts.min()), int(counts.max())
        hdr = cls(blob=blob, image_width=grid.image_width, image_length=grid.image_length,
                  tile_width=grid.tile_width, tile_length=grid.tile_length, samples_per_pixel=grid.bands,
                  bits_per_sample=enc.bits_per_sample, sample_format=enc.sample_format, frame_unit=grid.unit,
                  count_min=cmin, count_bits=0 if cmax == cmin else (cmax - cmin).bit_length(),
                  time_count=grid.times, layout=grid.layout)
        hdr._keep_layout(grid, enc, counts)
        cls._recent_headers.keep(blob, hdr)
        return hdr

    @cached_property
    def grid(self) -> Grid2:
        return Grid2.of(self.image_width, self.image_length, self.tile_width, self.tile_length,
                        self.samples_per_pixel, self.time_count, self.layout)

    @cached_property
    def encoding(self) -> Encoding:
        return encoding(self.sample_format, self.bits_per_sample, spec="0.2")

    @property
    def shape(self) -> tuple[int, ...]:
        """(B, Y, X) when T is 1, else (T, B, Y, X): the shape ``rumimm.open`` gives."""
        b, y, x = self.samples_per_pixel, self.image_length, self.image_width
        return (b, y, x) if self.time_count == 1 else (self.time_count, b, y, x)

    @property
    def packed(self) -> np.ndarray:
        p = np.frombuffer(self.blob, dtype=np.uint8)[HEADER_SIZE2:]
        return p if p.size else np.zeros(1, dtype=np.uint8)

    @property
    def frames_end(self) -> int:
        """Byte where the last frame ends and the trailer starts."""
        return self.offset(self.n_frames)

    @property
    def file_size(self) -> None:  # type: ignore[override]  # Header's is an int: a 0.1 blob gives it
        """Unknown from a 0.2 blob: the trailer after the frames is not described by it (see ``frames_end``)."""
        return None

    @property
    def layout_name(self) -> str:
        """The decoded frame's axes (rumi-eo's ``frame_layout``), e.g. ``"t b h w"``."""
        return units.unit_axes(self.layout, self.samples_per_pixel, self.time_count)

    @property
    def frame_unit_name(self) -> str:
        """The decoded frame's axes, as ``layout_name``: what ``Image.frame_unit`` reports for spec 0.2."""
        return self.layout_name

    @property
    def interleaved(self) -> bool:
        """Whether cells interleave bands per pixel (``h w b`` and the like): placed by ``reader.layouts``."""
        return units.interleaved(self.layout)

    def __repr__(self) -> str:
        shape = ", ".join(str(v) for v in self.shape)
        return (f"<rumimm.Header spec 0.2 ({shape}) {self.encoding.name} tile {self.tile_length}x"
                f"{self.tile_width} frame_unit {self.layout} ({self.layout_name}) frames={self.n_frames} "
                f"bytes={len(self.blob)}>")

    def to_dict(self) -> dict:
        g = self.grid
        return {
            "spec": "0.2",
            "shape": list(self.shape),
            "dtype": self.encoding.name,
            "sample_format": self.sample_format,
            "bits_per_sample": self.bits_per_sample,
            "tile": [self.tile_length, self.tile_width],
            "tiles_across": g.tiles_across,
            "tiles_down": g.tiles_down,
            "time_count": self.time_count,
            "frame_unit": self.layout,
            "frame_layout": self.layout_name,
            "frames": self.n_frames,
            "base_frame_offset": self.base_frame_offset,
            "count_min": self.count_min,
            "count_bits": self.count_bits,
            "frames_end": self.frames_end,
            "blob_size": len(self.blob),
        }


def build_prefix2(grid: Grid2, enc: Encoding, offsets: np.ndarray, counts: np.ndarray, matrix: tuple[float, ...],
                  keys: tuple[int, ...]) -> bytes:
    """The 16-byte file header, the 13-tag IFD and its external values: every byte before frame 0."""
    extra = {TagV2.FRAME_UNIT: struct.pack("<H", grid.layout), TagV2.TIME_COUNT: struct.pack("<I", grid.times)}
    return build_prefix(grid, enc, offsets, counts, matrix, keys, profile=PROFILE_V2, bands=grid.bands, extra=extra)


def build_header2(grid: Grid2, enc: Encoding, counts: ArrayLike) -> bytes:
    """The canonical 0.2 blob of a grid, a sample type and the frame byte counts."""
    counts = np.ascontiguousarray(counts, dtype=np.uint64).reshape(-1)
    n = grid.n_frames
    if counts.size != n or n == 0:
        raise ValueError(f"expected {n} frame byte counts, got {counts.size}")
    if counts.min() == 0 or counts.max() > UINT32_MAX:
        raise ValueError("every frame byte count must be in [1, 2**32 - 1]")
    cmin, bits = canonical_count_encoding(counts)
    head = _HEADER2.pack(MAGIC, VERSION, grid.image_width, grid.image_length, grid.times, grid.tile_width,
                         grid.tile_length, grid.bands, enc.bits_per_sample, enc.sample_format, grid.layout,
                         cmin, bits)
    return head + pack_residuals(counts, cmin, bits).tobytes()


def parse_header(blob: BlobArg, *, spec: Spec | str | None = None, path: StrPath | None = None) -> Header:
    """Parse and check a header blob of either rumi spec, without the file.

    Parameters
    ----------
    blob : bytes or Header
        A spec 0.1.0 blob (28 bytes + packed frame sizes, what rumimm and rumi-eo 0.16
        write) or a spec 0.2 blob (32 bytes + packed sizes, rumi-eo 0.18 and later).
    spec : {None, "0.1", "0.2"} or Spec
        Which one it is (a name or a ``format.spec.Spec``).  Without it the blob must be
        valid as exactly one of them: the length and the fields decide in practice (a 0.1
        blob read as 0.2 takes its tile size as the time count, a 0.2 blob read as 0.1 a
        zero tile length).
    path : str, optional
        Named in error messages.

    Returns
    -------
    Header
        ``Header`` for spec 0.1 (``.spec == "0.1"``), ``Header2`` for spec 0.2, with
        ``shape`` (``(B, Y, X)``, or ``(T, B, Y, X)`` for several time steps), ``offsets``
        and ``counts`` of every frame.

    Raises
    ------
    BlobError
        The blob breaks a rule of the spec asked for (or of both), or is valid as both
        and ``spec`` was not given.

    Examples
    --------
    >>> hdr = rumimm.parse_header(blob)              # doctest: +SKIP
    >>> hdr.spec, hdr.shape, hdr.n_frames             # doctest: +SKIP
    ('0.2', (3, 4, 2048, 2048), 16)
    """
    return cast(Header, parse_any(blob, spec=spec, path=path))


register_header_type(V02, Header2)

# --------------------------------------------------------------------------- a blob against a file


@functools.lru_cache(maxsize=256)
def expected_head2(hdr: Header2) -> bytes:
    """The 292 bytes (file header and IFD) of the file ``hdr`` describes; external values are pointers."""
    g, b, n = hdr.grid, hdr.samples_per_pixel, hdr.n_frames
    inline = {
        Tag.IMAGE_WIDTH: struct.pack("<I", g.image_width),
        Tag.IMAGE_LENGTH: struct.pack("<I", g.image_length),
        Tag.BITS_PER_SAMPLE: struct.pack(f"<{b}H", *[hdr.bits_per_sample] * b) if b <= 4 else None,
        Tag.SAMPLES_PER_PIXEL: struct.pack("<H", b),
        Tag.TILE_WIDTH: struct.pack("<H", g.tile_width),
        Tag.TILE_LENGTH: struct.pack("<H", g.tile_length),
        Tag.TILE_OFFSETS: struct.pack("<Q", g.base_frame_offset) if n == 1 else None,
        Tag.TILE_BYTE_COUNTS: struct.pack(f"<{n}I", *[hdr.byte_count(k) for k in range(n)]) if n <= 2 else None,
        Tag.SAMPLE_FORMAT: struct.pack(f"<{b}H", *[hdr.sample_format] * b) if b <= 4 else None,
        TagV2.FRAME_UNIT: struct.pack("<H", hdr.layout),
        TagV2.TIME_COUNT: struct.pack("<I", hdr.time_count),
    }
    head, _ = layout_ifd(g, inline.get, external=False, profile=PROFILE_V2, bands=b)
    return head


def check_blob_prefix2(read: Callable[[int, int], BlobArg], hdr: Header2, path: StrPath | None) -> int:
    """A 0.2 blob must describe this file: its 292 bytes of header and IFD, band 0's sample pair, frame 0's magic.

    ``read(offset, n)`` returns file bytes; the caller checked that the file holds the
    frames.  Reads nothing proportional to the frame count.  Returns frame 0's magic.
    """
    want = expected_head2(hdr)
    head = bytes(read(0, IFD_END2))
    if head != want:
        _explain(head, want, hdr, path)
    b, n = hdr.samples_per_pixel, hdr.n_frames
    if b >= 5:
        sf_at = IFD_END2 + 2 * b + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0)
        pair = (struct.unpack("<H", bytes(read(IFD_END2, 2)))[0], struct.unpack("<H", bytes(read(sf_at, 2)))[0])
        if pair != (hdr.bits_per_sample, hdr.sample_format):
            raise BlobError(f"{where(path)}the header blob does not describe this file: (BitsPerSample, "
                            f"SampleFormat) is {pair} in the file but ({hdr.bits_per_sample}, {hdr.sample_format}) "
                            "in the blob")
    if hdr.byte_count(0) < 4:
        raise FormatError(f"{where(path)}frame 0 is {hdr.byte_count(0)} bytes, too short to be an OpenZL frame")
    (magic,) = struct.unpack("<I", bytes(read(hdr.base_frame_offset, 4)))
    if not 0 < magic - OPENZL_MAGIC < 256:
        raise FormatError(f"{where(path)}frame 0 does not start with an OpenZL frame magic (found {magic:#010x}); "
                          "the header blob belongs to another file or the file is corrupt")
    return magic


def _explain(head: bytes, want: bytes, hdr: Header2, path: StrPath | None) -> None:
    if head[:16] != want[:16]:
        raise BlobError(f"{where(path)}file does not start with the 16-byte RUMI header of spec 0.2 (found "
                        f"{head[:16].hex(' ')}); it is not a rumi 0.2 file")
    if head[16:24] != want[16:24]:
        raise BlobError(f"{where(path)}IFD has {struct.unpack_from('<Q', head, 16)[0]} entries, expected 13; "
                        "the header blob belongs to another file")
    for i, tag in enumerate(PROFILE_V2.tags):
        at = entry_offset(i)
        typ, count = struct.unpack_from("<HQ", want, at + 2)
        used = 12 + min(count * TiffType(typ).size, 8)  # the blob's own entry: a type rumi writes
        if head[at:at + used] == want[at:at + used] and head[at + used:at + 20] != want[at + used:at + 20]:
            raise FormatError(f"{where(path)}IFD entry {i} (tag {int(tag)}) fills {used - 12} of its 8 inline bytes "
                              f"and the rest are {head[at + used:at + 20].hex()}; spec 0.2 requires the spare bytes "
                              "of an inline value to be zero")
        if head[at:at + 20] != want[at:at + 20]:
            got = (*struct.unpack_from("<HHQ", head, at), head[at + 12:at + 20].hex())
            exp = (*struct.unpack_from("<HHQ", want, at), want[at + 12:at + 20].hex())
            raise BlobError(f"{where(path)}the header blob does not describe this file: IFD entry {i} (tag {int(tag)}) "
                            f"is (tag, type, count, value) {got}, the blob implies {exp}")
    raise FormatError(f"{where(path)}next-IFD offset is {struct.unpack_from('<Q', head, IFD_END2 - 8)[0]}; a rumi "
                      "file has exactly one IFD")
