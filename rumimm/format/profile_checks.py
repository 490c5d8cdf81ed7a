"""The rumi file profile, checked from the file's bytes: one function per section of the spec.

Bytes in, violations out: each ``check_*`` reads the buffer it is given (the file's first
bytes, or the whole mapping) and reports what it finds to a :class:`Findings`, which
either collects them (``validate``) or raises :class:`FormatError` at the first
(``build_blob``).  Nothing here opens, maps or fetches a file, and nothing decodes a frame:
``reader/validate.py`` does that plumbing and the frame payload checks.  Nothing larger
than the buffer is allocated, whatever sizes the IFD claims.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from rumimm.errors import BlobError, FormatError, where
from rumimm.format import dtypes, units
from rumimm.format.bigtiff import entry_offset, value_offset
from rumimm.format.blob import Header
from rumimm.format.georef import Georef, parse_geokeys
from rumimm.format.grid import IFD_END, FrameUnit, Grid, ceildiv
from rumimm.format.spec import V01, V02, HeaderRecord, spec_of
from rumimm.format.tiff import (
    FIXED_TAGS,
    OPENZL_FORMAT_VERSIONS,
    OPENZL_MAGIC,
    PROFILE_V1,
    PROFILE_V2,
    IfdEntry,
    Profile,
    Tag,
    TagV2,
    TiffType,
    read_entries,
)
from rumimm.format.trailer import Trailer, parse_trailer
from rumimm.format.v2 import Grid2, Header2, parse_header

__all__ = [
    "Findings",
    "Parsed",
    "Stop",
    "check_bigtiff_header",
    "check_dimensions",
    "check_file",
    "check_frame_layout",
    "check_frame_magic",
    "check_georeferencing",
    "check_ifd",
    "check_image",
    "check_image_v2",
    "check_placement",
    "check_rumi_header",
    "check_sample_encoding",
    "compare_header",
    "describe_header",
]


#: The file's bytes as the checks read them: a uint8 ndarray (a mapping or a prefix of the file) or
#: anything sliced and indexed like one.
FileBytes = Any
#: ``tail(end, grid)``: a spec 0.2 trailer's bytes from ``end`` to the end of the file, or None (not checked now).
Tail = Callable[[int, Grid2], Any]
#: ``values(tag)``: a tag's values, read from where the IFD places them.
Values = Callable[[int], np.ndarray]


@dataclass
class Parsed:
    """What the profile checks parsed, filled in as they pass (a check that stops leaves the rest None)."""

    #: ``"0.1"`` or ``"0.2"``, from the file's first bytes.
    spec: str | None = None
    #: The file's canonical header blob, once the frame layout is sound.
    blob: bytes | None = None
    #: The header record the walk made (``format.spec.Spec.header_of``), with ``blob``.
    header: HeaderRecord | None = None
    georef: Georef | None = None
    #: Spec 0.2: the band texts and time coordinates.
    trailer: Trailer | None = None


_FORBIDDEN_GEOTIFF = {
    33550: "ModelPixelScaleTag",
    33922: "ModelTiepointTag",
    34736: "GeoDoubleParamsTag",
    34737: "GeoAsciiParamsTag",
}


class Stop(Exception):
    """The file is too broken to check further (raised by ``Findings.add(..., stop=True)``)."""


class Findings:
    """The violations found so far; ``strict`` raises FormatError at the first instead."""

    def __init__(self, path: str | None, strict: bool) -> None:
        self.path, self.strict = path, strict
        self.items: list[str] = []

    def add(self, msg: str, *, stop: bool = False) -> None:
        if self.strict:
            raise FormatError(f"{where(self.path)}{msg}")
        self.items.append(msg)
        if stop:
            raise Stop


def _tag_name(tag: int) -> str:
    for enum in (Tag, TagV2):
        try:
            return f"{tag} ({enum(tag).name})"
        except ValueError:
            pass
    return f"{tag} ({_FORBIDDEN_GEOTIFF[tag]})" if tag in _FORBIDDEN_GEOTIFF else str(tag)


def _read(buf: FileBytes, off: int, n: int, typ: TiffType) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.dtype(typ.code).newbyteorder("<"), count=n, offset=off)


def check_file(buf: FileBytes, size: int, f: Findings, rep: Parsed, tail: Tail | None = None) -> None:
    """Every rule of the file profile, one function per section, in file order; ``rep`` gets what they parse.

    ``buf`` holds the file's first bytes, at least up to its frames (``size`` is the whole
    file's).  ``tail(end, grid)``: a spec 0.2 trailer's bytes when ``buf`` does not hold the
    whole object (None: not checked now).  What the frames hold is the reader's to check.
    """
    if size >= 4 and spec_of(bytes(buf[:4]), fallback=V01) is V02:  # anything else: 0.1's rules say what is wrong
        return _check_file_v2(buf, size, f, rep, tail)
    rep.spec = V01.name
    check_bigtiff_header(buf, size, f)
    by_tag = check_ifd(buf, size, f)
    grid = check_image(by_tag, f)
    values = check_placement(buf, size, by_tag, grid, f)
    enc = check_sample_encoding(values, f)
    rep.georef = check_georeferencing(values, f)
    _keep_header(rep, V01.header_of(grid, enc, check_frame_layout(size, values, grid, f)))


def _check_file_v2(buf: FileBytes, size: int, f: Findings, rep: Parsed, tail: Tail | None = None) -> None:
    """Spec 0.2: the RUMI header, the 13-tag IFD, the frames, then the TAIL trailer."""
    rep.spec = V02.name
    check_rumi_header(buf, size, f)
    by_tag = check_ifd(buf, size, f, PROFILE_V2)
    grid = check_image_v2(by_tag, f)
    check_inline_spare_bytes(by_tag, f)
    values = check_placement(buf, size, by_tag, grid, f, PROFILE_V2)
    enc = check_sample_encoding(values, f, spec=V02.name)
    rep.georef = check_georeferencing(values, f)
    counts = check_frame_layout(size, values, grid, f, trailer=True)
    end = grid.base_frame_offset + int(counts.sum())
    data = buf[end:size] if tail is None else tail(end, grid)
    if data is not None:
        try:
            rep.trailer = parse_trailer(data, grid.bands, grid.times)
        except FormatError as exc:
            f.add(str(exc), stop=True)
    _keep_header(rep, V02.header_of(grid, enc, counts))


def _keep_header(rep: Parsed, hdr: HeaderRecord) -> None:
    """The walk's header record (made from the IFD, not parsed back from a blob) and its canonical blob."""
    rep.header, rep.blob = hdr, hdr.blob


def check_rumi_header(buf: FileBytes, size: int, f: Findings) -> None:
    """File header (spec 0.2): ``RUMI``, version 1, reserved 0, the IFD at byte 16."""
    if size < 16:
        f.add(f"file is {size} bytes, shorter than the 16-byte RUMI header", stop=True)
    version, reserved, first_ifd = struct.unpack_from("<HHQ", buf, 4)
    if version != 1:
        f.add(f"file header version is {version}, expected 1", stop=True)
    if reserved != 0:
        f.add(f"file header reserved field is {reserved}, expected 0")
    if first_ifd != 16:
        f.add(f"IFD offset is {first_ifd}; the rumi IFD starts at byte 16", stop=True)
    if size < PROFILE_V2.ifd_end:
        f.add(f"file is {size} bytes, too short for the 276-byte IFD at byte 16 (truncated)", stop=True)


def check_bigtiff_header(buf: FileBytes, size: int, f: Findings) -> None:
    """File profile: a little-endian BigTIFF header whose first IFD is at byte 16."""
    order = bytes(buf[:2])
    if size >= 2 and order not in (b"II", b"MM"):  # a short text file is not a TIFF either, not a truncated one
        f.add(f"not a TIFF file (starts with {order!r}, expected b'II')", stop=True)
    if size < 16:
        f.add(f"file is {size} bytes, shorter than the 16-byte BigTIFF header", stop=True)
    if order == b"MM":
        f.add("byte order is big-endian (MM); rumi files are little-endian (II)", stop=True)
    if order != b"II":
        f.add(f"not a TIFF file (starts with {order!r}, expected b'II')", stop=True)
    version, bytesize, reserved, first_ifd = struct.unpack_from("<HHHQ", buf, 2)
    if version == 42:
        f.add("file is classic TIFF (version 42); rumi files are BigTIFF (version 43)", stop=True)
    if version != 43:
        f.add(f"TIFF version is {version}, expected 43 (BigTIFF)", stop=True)
    if bytesize != 8 or reserved != 0:
        f.add(f"BigTIFF header has offset size {bytesize} and reserved {reserved}, expected 8 and 0")
    if first_ifd != 16:
        f.add(f"first IFD is at byte {first_ifd}; the rumi IFD starts at byte 16, before the frame data", stop=True)
    if size < IFD_END:
        f.add(f"file is {size} bytes, too short for the 236-byte IFD at byte 16 (truncated)", stop=True)


def check_ifd(buf: FileBytes, size: int, f: Findings, profile: Profile = PROFILE_V1) -> dict[int, IfdEntry]:
    """Fixed IFD: exactly the 11 tags (13 in spec 0.2), in rising order, and one IFD; returns the entries by tag."""
    (count,) = struct.unpack_from("<Q", buf, 16)
    readable = min(count, (size - 24) // 20, 64)
    entries = read_entries(buf, readable)
    tags = [e.tag for e in entries]
    expected = list(profile.tags)
    if count != profile.n_tags:
        extra = [t for t in tags if t not in expected]
        missing = [t for t in expected if t not in tags]
        detail = "".join([f"; extra tags: {', '.join(_tag_name(t) for t in extra)}" if extra else "",
                          f"; missing tags: {', '.join(_tag_name(t) for t in missing)}" if missing else ""])
        f.add(f"IFD has {count} tags, expected exactly {profile.n_tags}{detail}", stop=True)
    (next_ifd,) = struct.unpack_from("<Q", buf, entry_offset(profile.n_tags))
    if next_ifd != 0:
        f.add(f"next-IFD offset is {next_ifd}; a rumi file has exactly one IFD (no overviews, masks or auxiliary IFDs)")
    if tags != expected:
        for t in tags:
            if t not in expected:
                f.add(f"tag {_tag_name(t)} is not allowed in a rumi IFD")
        for t in expected:
            if t not in tags:
                f.add(f"required tag {_tag_name(t)} is missing")
        if sorted(tags) == expected:
            f.add("IFD tags are not in rising tag order")
        raise Stop
    by_tag = {e.tag: e for e in entries}
    scalars = [Tag.IMAGE_WIDTH, Tag.IMAGE_LENGTH, Tag.SAMPLES_PER_PIXEL, Tag.TILE_WIDTH, Tag.TILE_LENGTH]
    for tag in scalars + [t for t in (TagV2.FRAME_UNIT, TagV2.TIME_COUNT) if t in profile.tags]:
        typ, _ = profile.tags[tag]
        e = by_tag[tag]
        if e.type != typ or e.count != 1:
            f.add(f"tag {_tag_name(tag)} has type {e.type} and count {e.count}, expected {typ.name} ({int(typ)}) and 1",
                  stop=True)
    return by_tag


def check_inline_spare_bytes(by_tag: dict[int, IfdEntry], f: Findings) -> None:
    """Spec 0.2: the bytes of an inline value field after the value are zero (0.1 leaves them open)."""
    for tag, e in by_tag.items():
        try:
            used = e.count * TiffType(e.type).size
        except ValueError:
            continue  # a type rumi does not use: the tag's own check says so
        rest = e.field[used:] if used < 8 else b""
        if any(rest):
            at = used + next(i for i, v in enumerate(rest) if v)
            f.add(f"tag {_tag_name(tag)} fills {used} of its 8 inline bytes and byte {at} of the field is "
                  f"{rest[at - used]:#04x}; spec 0.2 requires the spare bytes of an inline value to be zero")


def check_dimensions(f: Findings, width: int, length: int, tw: int, tl: int, bands: int) -> None:
    """Image, tile and band counts must be positive (both specifications)."""
    if width == 0 or length == 0:
        f.add(f"image is {width} x {length} pixels; a rumi image has at least one pixel", stop=True)
    if tw == 0 or tl == 0:
        f.add(f"tile is {tw} x {tl}; TileWidth and TileLength must be > 0", stop=True)
    if bands == 0:
        f.add("SamplesPerPixel is 0, expected at least 1", stop=True)


def check_image(by_tag: dict[int, IfdEntry], f: Findings) -> Grid:
    """Image, tiles and bands; the frame unit from the TileOffsets count; every tag's type and count."""
    def scalar(tag: Tag) -> int:
        typ, _ = FIXED_TAGS[tag]
        return int(np.frombuffer(by_tag[tag].field, dtype=np.dtype(typ.code).newbyteorder("<"), count=1)[0])

    width, length = scalar(Tag.IMAGE_WIDTH), scalar(Tag.IMAGE_LENGTH)
    bands, tw, tl = scalar(Tag.SAMPLES_PER_PIXEL), scalar(Tag.TILE_WIDTH), scalar(Tag.TILE_LENGTH)
    check_dimensions(f, width, length, tw, tl, bands)
    n_entries = by_tag[Tag.TILE_OFFSETS].count
    g = ceildiv(width, tw) * ceildiv(length, tl)
    if n_entries == g * bands:
        unit = FrameUnit.TILE
    elif n_entries == g:
        unit = FrameUnit.CELL
    else:
        f.add(f"tag {_tag_name(Tag.TILE_OFFSETS)} has {n_entries} entries; expected {g} (cell frames) or "
              f"{g * bands} (tile frames) for a {tl} x {tw} grid of {g} positions and {bands} bands", stop=True)
    grid = Grid(width, length, tw, tl, bands, unit)
    _check_types_and_counts(by_tag, PROFILE_V1, bands, grid.n_frames, f)
    return grid


def _check_types_and_counts(by_tag: dict[int, IfdEntry], profile: Profile, bands: int, n: int, f: Findings) -> None:
    for tag, (typ, cnt) in profile.tags.items():
        e = by_tag[tag]
        want = cnt(bands, n)
        if e.type != typ or e.count != want:
            f.add(f"tag {_tag_name(tag)} has type {e.type} and count {e.count}, expected {typ.name} ({int(typ)}) "
                  f"and {want}", stop=True)


def _scalar(by_tag: dict[int, IfdEntry], profile: Profile, tag: int) -> int:
    typ, _ = profile.tags[tag]
    return int(np.frombuffer(by_tag[tag].field, dtype=np.dtype(typ.code).newbyteorder("<"), count=1)[0])


def check_image_v2(by_tag: dict[int, IfdEntry], f: Findings) -> Grid2:
    """Image, tiles, bands, time steps and the frame unit (spec 0.2); every tag's type and count."""
    def scalar(tag: int) -> int:
        return _scalar(by_tag, PROFILE_V2, tag)

    width, length = scalar(Tag.IMAGE_WIDTH), scalar(Tag.IMAGE_LENGTH)
    bands, tw, tl = scalar(Tag.SAMPLES_PER_PIXEL), scalar(Tag.TILE_WIDTH), scalar(Tag.TILE_LENGTH)
    unit, times = scalar(TagV2.FRAME_UNIT), scalar(TagV2.TIME_COUNT)
    check_dimensions(f, width, length, tw, tl, bands)
    if times == 0:
        f.add("TimeCount is 0, expected at least 1", stop=True)
    rule = units.check_unit(unit, bands, times)
    if rule:
        f.add(f"tag {_tag_name(TagV2.FRAME_UNIT)}: {rule}", stop=True)
    grid = Grid2.of(width, length, tw, tl, bands, times, unit)
    n_entries = by_tag[Tag.TILE_OFFSETS].count
    if n_entries != grid.n_frames:
        f.add(f"tag {_tag_name(Tag.TILE_OFFSETS)} has {n_entries} entries; frame_unit {unit} of a {tl} x {tw} grid "
              f"of {grid.n_positions} positions, {bands} bands and {times} time steps has {grid.n_frames} frames",
              stop=True)
    _check_types_and_counts(by_tag, PROFILE_V2, bands, grid.n_frames, f)
    return grid


def check_placement(buf: FileBytes, size: int, by_tag: dict[int, IfdEntry], grid: Grid | Grid2, f: Findings,
                    profile: Profile = PROFILE_V1) -> Values:
    """Placement: values over 8 bytes follow the IFD in rising tag order with no gaps.

    Returns ``values(tag)``, the tag's values read from where they are.
    """
    bands, n = (grid.bands if isinstance(grid, Grid2) else grid.samples_per_pixel), grid.n_frames
    cursor = profile.ifd_end
    where_value: dict[int, int] = {}
    order = list(profile.tags)
    for tag, (typ, _cnt) in profile.tags.items():
        e = by_tag[tag]
        nbytes = e.count * typ.size
        if nbytes <= 8:
            where_value[tag] = value_offset(order.index(tag))  # inline field
            continue
        if e.pointer != cursor:
            f.add(f"tag {_tag_name(tag)} value is at byte {e.pointer}, expected {cursor}: external values follow the "
                  "IFD in rising tag order with no gaps", stop=True)
        if cursor + nbytes > size:
            f.add(f"tag {_tag_name(tag)} value ends at byte {cursor + nbytes}, past the end of the "
                  f"{size}-byte file (truncated)", stop=True)
        where_value[tag] = cursor
        cursor += nbytes
    base = grid.base_frame_offset
    if cursor != base:  # cannot differ once types and counts are right; kept as a guard
        f.add(f"external values end at byte {cursor}, but base_frame_offset is {base}", stop=True)

    def values(tag: int) -> np.ndarray:
        typ, cnt = profile.tags[tag]
        return _read(buf, where_value[tag], cnt(bands, n), typ)

    return values


def check_sample_encoding(values: Values, f: Findings, spec: str = "0.1") -> dtypes.Encoding:
    """Sample encodings: one valid (SampleFormat, BitsPerSample) pair for every band."""
    bps, sfs = values(Tag.BITS_PER_SAMPLE), values(Tag.SAMPLE_FORMAT)
    if np.any(bps != bps[0]) or np.any(sfs != sfs[0]):
        f.add("bands use different (SampleFormat, BitsPerSample) pairs; all bands must use the same pair", stop=True)
    try:
        enc = dtypes.encoding(int(sfs[0]), int(bps[0]), spec=spec)
    except FormatError as exc:
        f.add(str(exc), stop=True)
    return enc


def check_georeferencing(values: Values, f: Findings) -> Georef | None:
    """Georeferencing: the matrix and the key directory, EPSG codes only."""
    georef, bad = parse_geokeys(values(Tag.GEO_KEY_DIRECTORY), values(Tag.MODEL_TRANSFORMATION))
    for msg in bad:
        f.add(msg)
    return georef


def check_frame_layout(size: int, values: Values, grid: Grid | Grid2, f: Findings, *,
                       trailer: bool = False) -> np.ndarray:
    """Frames: no sparse frame, one contiguous run in frame-index order from base_frame_offset
    to the end of the file; returns the byte counts."""
    n, base = grid.n_frames, grid.base_frame_offset
    offsets = values(Tag.TILE_OFFSETS).astype(np.uint64)
    counts = values(Tag.TILE_BYTE_COUNTS).astype(np.uint64)
    zero = np.flatnonzero(counts == 0)
    if zero.size:
        k = int(zero[0])
        f.add(f"frame {k} has TileByteCounts 0; no frame may be sparse (every count is > 0)", stop=True)
    if int(offsets[0]) != base:
        f.add(f"TileOffsets[0] is {int(offsets[0])}, but frame data starts at base_frame_offset {base} "
              "(no padding before the frames)", stop=True)
    expect = np.empty(n, dtype=np.uint64)
    expect[0] = base
    np.cumsum(counts[:-1], out=expect[1:])
    expect[1:] += np.uint64(base)
    off_by = np.flatnonzero(offsets != expect)
    if off_by.size:
        k = int(off_by[0])
        row, col, band = grid.frame_position(k)
        hint = ""
        order = np.argsort(offsets, kind="stable")
        if np.array_equal(offsets[order][1:], (offsets[order] + counts[order])[:-1]):
            hint = ("; the frames are contiguous only when sorted, so they are not in frame-index order "
                    "(band-interleaved?)")
        f.add(f"TileOffsets[{k}] (row {row}, col {col}, band {band}) is {int(offsets[k])}, expected {int(expect[k])}: "
              f"frames must form one contiguous run in frame-index order{hint}", stop=True)
    end = int(expect[-1]) + int(counts[-1])
    if end > size:
        f.add(f"last frame ends at byte {end} but the file has {size} bytes (truncated)", stop=True)
    if end < size and not trailer:  # spec 0.2: the trailer follows (checked by the caller)
        f.add(f"{size - end} bytes follow the last frame (ends at byte {end}); nothing may follow the frame run")
    return counts


def check_frame_magic(buf: FileBytes, offsets: np.ndarray, counts: np.ndarray, grid: Grid | Grid2,
                      f: Findings) -> int | None:
    """Every frame starts with the OpenZL magic of one format version: that version, or None when not."""
    MIN_FORMAT_VERSION, MAX_FORMAT_VERSION = OPENZL_FORMAT_VERSIONS

    short = np.flatnonzero(counts < 4)
    if short.size:
        f.add(f"frame {int(short[0])} is {int(counts[short[0]])} bytes, too short to be an OpenZL frame")
        return None
    idx = offsets.astype(np.int64)[:, None] + np.arange(4)
    magic: np.ndarray = np.asarray(buf[idx]).astype(np.uint32)
    magic = magic[:, 0] | (magic[:, 1] << 8) | (magic[:, 2] << 16) | (magic[:, 3] << 24)
    version = magic.astype(np.int64) - OPENZL_MAGIC  # magic = FRAME_MAGIC + format version
    bad = np.flatnonzero((version < MIN_FORMAT_VERSION) | (version > MAX_FORMAT_VERSION))
    if bad.size:
        k = int(bad[0])
        row, col, band = grid.frame_position(k)
        f.add(f"frame {k} (row {row}, col {col}, band {band}) does not start with an OpenZL frame magic "
              f"(found {int(magic[k]):#010x})")
        return None
    mixed = np.flatnonzero(version != version[0])
    if mixed.size:
        k = int(mixed[0])
        f.add(f"frame {k} uses OpenZL format version {int(version[k])} but frame 0 uses {int(version[0])}; "
              "all frames must use one pinned format version")
        return None
    return int(version[0])


def compare_header(header: bytes | Header, blob: bytes | None, path: str | None, spec: str | None = "0.1") -> list[str]:
    """How ``header`` (blob bytes or a Header) differs from a file's canonical ``blob``: [] or one violation.

    ``spec`` is the file's specification (None: unknown, the blob's own layout decides).  A blob
    of another file, of either specification, is one violation naming both images.
    """
    try:
        given = parse_header(header, spec=spec, path=path)
    except BlobError as exc:
        other = _as_other_spec(header, spec)
        if other is None:
            return [str(exc).removeprefix(where(path))]
        file = "" if blob is None else f", {describe_header(parse_header(blob, spec=spec))}"
        return [f"header blob is a spec {other.spec} blob of {describe_header(other)}, but the file is spec "
                f"{spec}{file}; the blob belongs to another file"]
    if blob is None:
        return []
    if given.blob == blob:
        return []
    canon = parse_header(blob, spec=given.spec)
    if any(getattr(given, name) != getattr(canon, name)
           for name in ("image_width", "image_length", "time_count", "tile_width", "tile_length",
                        "samples_per_pixel", "bits_per_sample", "sample_format", "frame_unit", "layout")
           if hasattr(canon, name)
           # with one band the tile and cell layouts are the same bytes: either unit describes the file
           and not (name == "frame_unit" and canon.samples_per_pixel == 1)):
        return [f"header blob describes {describe_header(given)}, but the file is {describe_header(canon)}; "
                "the blob belongs to another file"]
    differ = np.flatnonzero(given.frame_byte_counts != canon.frame_byte_counts)
    if differ.size == 0:
        return []
    k = int(differ[0])
    return [f"header blob byte count of frame {k} is {int(given.frame_byte_counts[k])} but the file has "
            f"{int(canon.frame_byte_counts[k])}"]


def _as_other_spec(header: bytes | Header, spec: str | None) -> Header | None:
    """``header`` parsed as a blob of the specification other than ``spec``, or None when it is not one."""
    if spec is None:
        return None
    try:
        return parse_header(header, spec="0.2" if spec == "0.1" else "0.1")
    except (BlobError, TypeError):
        return None


def describe_header(h: Header) -> str:
    """What a blob describes: ``a 4 x 600 x 800 uint16 image in 256 x 256 tiles (48 tile frames)``."""
    shape = " x ".join(str(v) for v in h.shape)
    unit = f"'{h.layout_name}' " if isinstance(h, Header2) else f"{h.frame_unit.name.lower()} "
    return (f"a {shape} {h.encoding.name} image in {h.tile_length} x {h.tile_width} tiles "
            f"({h.n_frames} {unit}frames)")
