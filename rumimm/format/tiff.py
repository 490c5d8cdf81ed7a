"""The BigTIFF side of rumi: the 16-byte header, the fixed 11-tag IFD and its values.

``build_prefix`` lays out everything before the frame data exactly as the spec
places it (IFD at byte 16, 236 bytes, external values in rising tag order with no
gaps).  ``read_entries`` decodes raw IFD entries without judging them;
``profile_checks.py`` holds the rules.
"""

from __future__ import annotations

import enum
import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rumimm.errors import BlobError, FormatError, where
from rumimm.format.bigtiff import TIFF_HEADER_SIZE, entry_offset, ifd_end, value_offset
from rumimm.format.dtypes import Encoding
from rumimm.format.grid import IFD_END, Grid

__all__ = [
    "BIGTIFF_MAGIC",
    "FIXED_TAGS",
    "FIXED_TAGS_V2",
    "N_TAGS",
    "OPENZL_FORMAT_VERSIONS",
    "OPENZL_MAGIC",
    "PROFILE_V1",
    "PROFILE_V2",
    "IfdEntry",
    "Profile",
    "Tag",
    "TagV2",
    "TiffType",
    "build_prefix",
    "check_blob_prefix",
    "explain_blob_mismatch",
    "read_entries",
]

BIGTIFF_MAGIC = b"II\x2b\x00\x08\x00\x00\x00"
N_TAGS = 11


class TiffType(enum.IntEnum):
    """TIFF field types used by rumi."""

    SHORT = 3
    """16-bit unsigned integer."""
    LONG = 4
    """32-bit unsigned integer."""
    DOUBLE = 12
    """IEEE 64-bit float."""
    LONG8 = 16
    """64-bit unsigned integer (BigTIFF)."""

    @property
    def size(self) -> int:
        return {3: 2, 4: 4, 12: 8, 16: 8}[int(self)]

    @property
    def code(self) -> str:
        return {3: "H", 4: "I", 12: "d", 16: "Q"}[int(self)]


class Tag(enum.IntEnum):
    """The eleven tags of a rumi IFD, in rising order (spec 0.2 adds :class:`TagV2`)."""

    IMAGE_WIDTH = 256
    """Image width in pixels."""
    IMAGE_LENGTH = 257
    """Image height in pixels."""
    BITS_PER_SAMPLE = 258
    """Bits per sample, one per band."""
    SAMPLES_PER_PIXEL = 277
    """Band count B."""
    TILE_WIDTH = 322
    """Nominal tile width."""
    TILE_LENGTH = 323
    """Nominal tile height."""
    TILE_OFFSETS = 324
    """Frame offsets, N entries in frame-index order."""
    TILE_BYTE_COUNTS = 325
    """Frame byte counts, N entries in frame-index order."""
    SAMPLE_FORMAT = 339
    """Sample format, one per band."""
    MODEL_TRANSFORMATION = 34264
    """GeoTIFF 4 x 4 model transformation matrix."""
    GEO_KEY_DIRECTORY = 34735
    """GeoTIFF key directory."""


#: tag -> (type, count as a function of (B, N)); the order is the file order.
FIXED_TAGS: dict[Tag, tuple[TiffType, Callable[[int, int], int]]] = {
    Tag.IMAGE_WIDTH: (TiffType.LONG, lambda b, n: 1),
    Tag.IMAGE_LENGTH: (TiffType.LONG, lambda b, n: 1),
    Tag.BITS_PER_SAMPLE: (TiffType.SHORT, lambda b, n: b),
    Tag.SAMPLES_PER_PIXEL: (TiffType.SHORT, lambda b, n: 1),
    Tag.TILE_WIDTH: (TiffType.SHORT, lambda b, n: 1),
    Tag.TILE_LENGTH: (TiffType.SHORT, lambda b, n: 1),
    Tag.TILE_OFFSETS: (TiffType.LONG8, lambda b, n: n),
    Tag.TILE_BYTE_COUNTS: (TiffType.LONG, lambda b, n: n),
    Tag.SAMPLE_FORMAT: (TiffType.SHORT, lambda b, n: b),
    Tag.MODEL_TRANSFORMATION: (TiffType.DOUBLE, lambda b, n: 16),
    Tag.GEO_KEY_DIRECTORY: (TiffType.SHORT, lambda b, n: 16),
}

class TagV2(enum.IntEnum):
    """The two tags spec 0.2 adds after the eleven of :class:`Tag`."""

    FRAME_UNIT = 65000
    """The frame layout, 0 to 9 (``rumimm.format.units``)."""
    TIME_COUNT = 65001
    """The time step count T."""


#: Spec 0.2 adds two tags after the eleven of 0.1.
FIXED_TAGS_V2: dict[Tag, tuple[TiffType, object]] = {
    **FIXED_TAGS,
    TagV2.FRAME_UNIT: (TiffType.SHORT, lambda b, n: 1),
    TagV2.TIME_COUNT: (TiffType.LONG, lambda b, n: 1),
}

_ENTRY = struct.Struct("<HHQ8s")


@dataclass(frozen=True)
class Profile:
    """The envelope of one spec version: the file's first 16 bytes and its fixed tags."""

    spec: str
    head: bytes
    tags: dict

    @property
    def n_tags(self) -> int:
        return len(self.tags)

    @property
    def ifd_end(self) -> int:
        """Byte after the IFD (header 16 + count 8 + 20 per entry + next-IFD 8)."""
        return ifd_end(len(self.tags))


PROFILE_V1 = Profile("0.1", BIGTIFF_MAGIC + struct.pack("<Q", TIFF_HEADER_SIZE), FIXED_TAGS)
PROFILE_V2 = Profile("0.2", b"RUMI" + struct.pack("<HHQ", 1, 0, TIFF_HEADER_SIZE), FIXED_TAGS_V2)


@dataclass(frozen=True)
class IfdEntry:
    """One raw IFD entry: tag, type code, count and the 8-byte value field."""

    tag: int
    type: int
    count: int
    field: bytes

    @property
    def pointer(self) -> int:
        return int.from_bytes(self.field, "little")


def build_prefix(grid: Grid, enc: Encoding, offsets: np.ndarray, counts: np.ndarray,
                 matrix: tuple[float, ...], keys: tuple[int, ...], *, profile: Profile = PROFILE_V1,
                 bands: int | None = None, extra: dict | None = None) -> bytes:
    """File header + IFD + external values: every byte before the first frame.

    Spec 0.1 by default; ``profile=PROFILE_V2`` with the file's band count ``bands`` and
    the values of the two 0.2 tags in ``extra`` for spec 0.2.
    """
    b = grid.samples_per_pixel if bands is None else bands
    values: dict[int, bytes] = {
        Tag.IMAGE_WIDTH: struct.pack("<I", grid.image_width),
        Tag.IMAGE_LENGTH: struct.pack("<I", grid.image_length),
        Tag.BITS_PER_SAMPLE: np.full(b, enc.bits_per_sample, dtype="<u2").tobytes(),
        Tag.SAMPLES_PER_PIXEL: struct.pack("<H", b),
        Tag.TILE_WIDTH: struct.pack("<H", grid.tile_width),
        Tag.TILE_LENGTH: struct.pack("<H", grid.tile_length),
        Tag.TILE_OFFSETS: np.ascontiguousarray(offsets, dtype="<u8").tobytes(),
        Tag.TILE_BYTE_COUNTS: np.ascontiguousarray(counts, dtype="<u4").tobytes(),
        Tag.SAMPLE_FORMAT: np.full(b, enc.sample_format, dtype="<u2").tobytes(),
        Tag.MODEL_TRANSFORMATION: struct.pack("<16d", *matrix),
        Tag.GEO_KEY_DIRECTORY: struct.pack("<16H", *keys),
        **(extra or {}),
    }
    head, external = _layout(grid, values.__getitem__, external=True, profile=profile, bands=b)
    out = head + b"".join(external)
    if len(out) != grid.base_frame_offset:
        raise ValueError(f"prefix is {len(out)} bytes, expected base_frame_offset {grid.base_frame_offset}")
    return out


def _layout(grid: Grid, value_of, *, external: bool, profile: Profile = PROFILE_V1,
            bands: int | None = None) -> tuple[bytes, list[bytes]]:
    """(header + IFD bytes, external values) with ``value_of(tag)`` giving each value's bytes.

    External values are asked for only when ``external``: the IFD holds just their
    pointers, which depend on (B, N) alone, so the expected IFD of a file is built
    without materialising its N-entry arrays.
    """
    b, n = (grid.samples_per_pixel if bands is None else bands), grid.n_frames
    ifd = [struct.pack("<Q", profile.n_tags)]
    values: list[bytes] = []
    cursor = profile.ifd_end
    for tag, (typ, count) in profile.tags.items():
        c = count(b, n)
        nbytes = c * typ.size
        data = value_of(tag) if nbytes <= 8 or external else None
        if data is not None and len(data) != nbytes:  # not an assert: python -O must not write a broken IFD
            raise ValueError(f"tag {int(tag)}: {len(data)} value bytes, expected {c} x {typ.size}")
        if nbytes <= 8:
            field = data.ljust(8, b"\0")
        else:
            field = struct.pack("<Q", cursor)
            cursor += nbytes
            if external:
                values.append(data)
        ifd.append(_ENTRY.pack(int(tag), int(typ), c, field))
    ifd.append(struct.pack("<Q", 0))  # no next IFD
    return profile.head + b"".join(ifd), values


#: (header + IFD bytes, external values) of a grid under a profile (see ``_layout``).
layout_ifd = _layout


def read_entries(buf, count: int) -> list[IfdEntry]:
    """Decode ``count`` raw entries from the IFD at byte 16 of ``buf``."""
    out = []
    for i in range(count):
        pos = entry_offset(i)
        tag, typ, cnt, field = _ENTRY.unpack_from(buf, pos)
        out.append(IfdEntry(tag, typ, cnt, field))
    return out


# --------------------------------------------------------------------------- a blob against an IFD

OPENZL_MAGIC = 0xD7B1A5C0  # first 4 bytes of an OpenZL frame: this + its format version
#: Frame format versions openzl 0.3.0 (pinned) reads, so files are checked without importing it;
#: ``codec.MIN_FORMAT_VERSION`` / ``MAX_FORMAT_VERSION`` come from openzl itself (a test ties them).
OPENZL_FORMAT_VERSIONS = (8, 27)


def _inline_values(g: Grid, bits_per_sample: int, sample_format: int, counts) -> dict:
    """The values a rumi IFD holds inline (<= 8 bytes) for grid ``g``; ``counts`` when N <= 2."""
    b, n = g.samples_per_pixel, g.n_frames
    values = {
        Tag.IMAGE_WIDTH: struct.pack("<I", g.image_width),
        Tag.IMAGE_LENGTH: struct.pack("<I", g.image_length),
        Tag.BITS_PER_SAMPLE: struct.pack(f"<{b}H", *[bits_per_sample] * b) if b <= 4 else None,
        Tag.SAMPLES_PER_PIXEL: struct.pack("<H", b),
        Tag.TILE_WIDTH: struct.pack("<H", g.tile_width),
        Tag.TILE_LENGTH: struct.pack("<H", g.tile_length),
        Tag.SAMPLE_FORMAT: struct.pack(f"<{b}H", *[sample_format] * b) if b <= 4 else None,
    }
    if n == 1:
        values[Tag.TILE_OFFSETS] = struct.pack("<Q", g.base_frame_offset)
    if n <= 2:
        values[Tag.TILE_BYTE_COUNTS] = struct.pack(f"<{n}I", *counts)
    return values


def _ifd_template(g: Grid, bits_per_sample: int, sample_format: int, counts) -> list:
    """(tag, type, count, value bytes) of each IFD entry of a file of grid ``g``.

    Inline values are their used bytes; an external value is its 8-byte pointer.
    """
    ifd, _ = _layout(g, _inline_values(g, bits_per_sample, sample_format, counts).get, external=False)
    b, n = g.samples_per_pixel, g.n_frames
    out = []
    for i, (tag, (typ, count)) in enumerate(FIXED_TAGS.items()):
        at, cnt = entry_offset(i), count(b, n)
        out.append((tag, typ, cnt, ifd[at + 12:at + 12 + min(cnt * typ.size, 8)]))
    return out


@functools.lru_cache(maxsize=4096)
def _expected_ifd(grid: Grid, bits_per_sample: int, sample_format: int, counts) -> tuple[int, int]:
    """(expected bytes 0..252, mask) of a file's header and IFD, as little-endian ints.

    The expected bytes are the writer's own layout (:func:`_layout`); the mask keeps the
    header, every entry's tag, type and count, the used bytes of its value or pointer,
    and the next-IFD offset, and hides the unused bytes of inline values.
    """
    prefix, _ = _layout(grid, _inline_values(grid, bits_per_sample, sample_format, counts).get, external=False)
    b, n = grid.samples_per_pixel, grid.n_frames
    mask = bytearray(IFD_END)
    mask[:24] = b"\xff" * 24
    for i, (typ, count) in enumerate(FIXED_TAGS.values()):
        used = 12 + min(count(b, n) * typ.size, 8)
        mask[entry_offset(i):entry_offset(i) + used] = b"\xff" * used
    mask[IFD_END - 8:IFD_END] = b"\xff" * 8  # next-IFD offset 0
    m = int.from_bytes(mask, "little")
    return int.from_bytes(bytes(prefix[:IFD_END]), "little") & m, m


@functools.lru_cache(maxsize=256)
def _expected_for(hdr) -> tuple[int, int]:
    """:func:`_expected_ifd` of a Header, remembered by the Header object (blobs parsed again are reused)."""
    return _expected_ifd(hdr.grid, hdr.bits_per_sample, hdr.sample_format, _inline_counts(hdr))


def _inline_counts(hdr) -> tuple[int, ...] | None:
    return tuple(int(hdr.byte_count(k)) for k in range(hdr.n_frames)) if hdr.n_frames <= 2 else None


def _sample_pair(read, b: int, n: int) -> tuple[int, int]:
    """Band 0's (BitsPerSample, SampleFormat) when B >= 5: stored after the IFD, not inline."""
    sf_at = IFD_END + 2 * b + (8 * n if n >= 2 else 0) + (4 * n if n >= 3 else 0)
    return struct.unpack("<H", read(IFD_END, 2))[0], struct.unpack("<H", read(sf_at, 2))[0]


def check_blob_prefix(read, hdr, path) -> int | None:
    """Check that a blob describes this file from its first bytes: the IFD and frame 0's magic.

    ``read(offset, n)`` returns ``n`` bytes of the file at ``offset`` (fewer at its
    end); the file must hold ``hdr.base_frame_offset`` bytes (the caller checks its
    size first).  Reads the 252 bytes of header and IFD (plus, for B >= 5, the sample pair
    after it) and frame 0's magic, nothing proportional to the frame count.  The IFD
    is a function of the blob, so its expected bytes (and a mask hiding the unused
    bytes of inline fields, which the spec leaves open) are built once per layout and
    compared as one masked integer (~2 us); only a mismatch pays for
    :func:`explain_blob_mismatch`, which names the field.  Returns frame 0's magic (None if the file ends before it: the
    caller's size check says so).
    """
    want, mask = _expected_for(hdr)
    b, n = hdr.samples_per_pixel, hdr.n_frames
    head = read(0, IFD_END)
    same = int.from_bytes(head, "little") & mask == want
    if same and b >= 5:  # the sample pair is stored after the IFD: check band 0's
        same = _sample_pair(read, b, n) == (hdr.bits_per_sample, hdr.sample_format)
    if not same:
        explain_blob_mismatch(read, hdr, path)
        raise BlobError(f"{where(path)}the header blob does not describe this file: its IFD differs")  # unreachable
    if hdr.byte_count(0) < 4:  # the magic alone is 4 bytes (and a 1-frame file ends right after frame 0)
        raise FormatError(f"{where(path)}frame 0 is {hdr.byte_count(0)} bytes, too short to be an OpenZL frame")
    head = read(hdr.base_frame_offset, 4)
    if len(head) < 4:
        return None
    (magic,) = struct.unpack("<I", head)
    if not 0 < magic - OPENZL_MAGIC < 256:
        raise FormatError(f"{where(path)}frame 0 does not start with an OpenZL frame magic (found {magic:#010x}); "
                          "the header blob belongs to another file or the file is corrupt")
    return magic


def explain_blob_mismatch(read, hdr, path) -> None:
    """Raise the BlobError that says which part of the IFD does not match the blob (``read`` as above)."""
    g = hdr.grid
    buf = bytes(read(0, IFD_END))
    mismatch = []
    if buf[:16] != BIGTIFF_MAGIC + struct.pack("<Q", TIFF_HEADER_SIZE):
        raise BlobError(f"{where(path)}file does not start with a little-endian BigTIFF header whose IFD is at "
                        "byte 16; it is not a rumi file")
    (count,) = struct.unpack_from("<Q", buf, 16)
    if count != N_TAGS:
        raise BlobError(f"{where(path)}IFD has {count} entries, expected {N_TAGS}; the header blob belongs to "
                        "another file")

    def field(i, fmt):
        return struct.unpack_from(fmt, buf, value_offset(i))[0]

    for name, got, want in (("image_width", field(0, "<I"), g.image_width),
                            ("image_length", field(1, "<I"), g.image_length),
                            ("samples_per_pixel", field(3, "<H"), g.samples_per_pixel),
                            ("tile_width", field(4, "<H"), g.tile_width),
                            ("tile_length", field(5, "<H"), g.tile_length),
                            ("frame count", struct.unpack_from("<Q", buf, entry_offset(6) + 4)[0], g.n_frames)):
        if got != want:
            mismatch.append(f"{name} is {got} in the file but {want} in the blob")
    b, n = g.samples_per_pixel, g.n_frames
    bps, sf = (field(2, "<H"), field(8, "<H")) if b <= 4 else _sample_pair(read, b, n)
    if (sf, bps) != (hdr.sample_format, hdr.bits_per_sample):
        mismatch.append(f"(sample_format, bits_per_sample) is ({sf}, {bps}) in the file but "
                        f"({hdr.sample_format}, {hdr.bits_per_sample}) in the blob")
    if mismatch:
        raise BlobError(f"{where(path)}the header blob does not describe this file: {'; '.join(mismatch)}")
    # The whole IFD is a function of the blob: every (tag, type, count), the inline values and
    # the pointers to the external ones.  Compare all of it (but not the unused bytes of
    # inline fields, which the spec leaves open).
    for i, (tag, typ, cnt, value) in enumerate(_ifd_template(g, hdr.bits_per_sample, hdr.sample_format,
                                                             _inline_counts(hdr))):
        at = entry_offset(i)
        got = struct.unpack_from("<HHQ", buf, at)
        name = f"{int(tag)} ({tag.name})"
        if got != (int(tag), int(typ), cnt):
            raise BlobError(f"{where(path)}the header blob does not describe this file: IFD entry {i} is tag "
                            f"{got[0]}, type {got[1]}, count {got[2]}; expected tag {name}, type {typ.name} "
                            f"({int(typ)}), count {cnt}")
        value_field = buf[at + 12:at + 12 + len(value)]
        if value_field != value:
            if cnt * typ.size > 8:
                what = (f"value is at byte {int.from_bytes(value_field, 'little')}, expected "
                        f"{int.from_bytes(value, 'little')} (external values follow the IFD in rising tag order "
                        "with no gaps)")
            else:
                fmt = f"<{cnt}{typ.code}"
                what = f"holds {struct.unpack(fmt, value_field)}, the blob gives {struct.unpack(fmt, value)}"
            raise BlobError(f"{where(path)}the header blob does not describe this file: tag {name} {what}")
    (next_ifd,) = struct.unpack_from("<Q", buf, IFD_END - 8)
    if next_ifd != 0:
        raise FormatError(f"{where(path)}next-IFD offset is {next_ifd}; a rumi file has exactly one IFD (no "
                          "overviews, masks or auxiliary IFDs)")
