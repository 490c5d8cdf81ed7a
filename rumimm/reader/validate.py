"""Check a rumi file (and optionally its blob) against the spec; rebuild its blob.

One walk over the file serves two callers: :func:`index` stops at the first rule
broken and raises :class:`FormatError`; :func:`validate` keeps going and returns
every violation it can find.  Nothing larger than the file itself is allocated,
whatever sizes the IFD claims.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

import numpy as np

from rumimm.errors import BlobError, FormatError, RumiError, where
from rumimm.format import dtypes, units
from rumimm.format.bigtiff import entry_offset, value_offset
from rumimm.format.blob import Header, build_header
from rumimm.format.georef import Georef, parse_geokeys
from rumimm.format.grid import IFD_END, FrameUnit, Grid, ceildiv
from rumimm.format.tiff import (
    FIXED_TAGS,
    OPENZL_FORMAT_VERSIONS,
    OPENZL_MAGIC,
    PROFILE_V1,
    PROFILE_V2,
    Profile,
    Tag,
    TagV2,
    TiffType,
    read_entries,
)
from rumimm.format.trailer import Trailer, max_trailer_bytes, parse_trailer
from rumimm.format.v2 import FILE_MAGIC, Grid2, build_header2, parse_header
from rumimm.store import LocalStore, is_remote, open_store

__all__ = [
    "PREFIX_BYTES",
    "Report",
    "index",
    "index_mapping",
    "inspect_file",
    "inspect_mapping",
    "inspect_store",
    "validate",
]

_FORBIDDEN_GEOTIFF = {
    33550: "ModelPixelScaleTag",
    33922: "ModelTiepointTag",
    34736: "GeoDoubleParamsTag",
    34737: "GeoAsciiParamsTag",
}


#: What a Report's ``checked`` may list.
CHECKED_PROFILE = "file profile: BigTIFF header, the one IFD, tag types, counts and values, frame layout"
CHECKED_PROFILE_V2 = ("file profile (spec 0.2): RUMI header, the 13-tag IFD, tag types, counts and values, frame "
                      "layout, trailer (band texts, time)")
CHECKED_MAGIC = "frame magics: every frame starts with OpenZL's magic, one format version"
CHECKED_HEADERS = "frame headers: one output of the sample type and the byte size of the frame's position"
CHECKED_DECODE = "frame payloads: every frame decoded, checksums verified, type, element width and size checked"
CHECKED_BLOB = "header blob: valid and equal to the file's canonical blob"


class _Stop(Exception):
    """Internal: the file is too broken to check further."""


@dataclass
class Report:
    """What a check found: violations (empty when compliant) and what was parsed."""

    path: str
    violations: list[str] = field(default_factory=list)
    blob: bytes | None = None
    georef: Georef | None = None
    format_version: int | None = None
    header_violations: list[str] = field(default_factory=list)
    #: The specification the file follows, ``"0.1"`` or ``"0.2"`` (None when not even that is clear).
    spec: str | None = None
    #: Spec 0.2: the band texts and time coordinates.
    trailer: Trailer | None = None
    #: What was checked, in order (``CHECKED_*``); a check is listed once it ran over the whole file.
    checked: list[str] = field(default_factory=list)
    #: The readers (``rumimm.codec.READERS``) that decode the file: its spec and the codecs its
    #: sampled frames reference (None when the frames were not looked at).
    readers: tuple[str, ...] | None = None
    #: The geozl codecs the sampled frames reference (empty: OpenZL built-ins only).
    codecs: frozenset | None = None
    #: The frame indices sampled to find ``readers`` and ``codecs``.
    sampled_frames: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations and not self.header_violations

    @property
    def header(self) -> Header | None:
        return None if self.blob is None else parse_header(self.blob, spec=self.spec, path=self.path)

    def __str__(self) -> str:
        if self.ok:
            return f"{self.path}: compliant"
        return "\n".join(f"{self.path}: {v}" for v in self.violations + self.header_violations)


class _Findings:
    def __init__(self, path, strict: bool):
        self.path, self.strict = path, strict
        self.items: list[str] = []

    def add(self, msg: str, *, stop: bool = False):
        if self.strict:
            raise FormatError(f"{where(self.path)}{msg}")
        self.items.append(msg)
        if stop:
            raise _Stop


def _tag_name(tag: int) -> str:
    for enum in (Tag, TagV2):
        try:
            return f"{tag} ({enum(tag).name})"
        except ValueError:
            pass
    return f"{tag} ({_FORBIDDEN_GEOTIFF[tag]})" if tag in _FORBIDDEN_GEOTIFF else str(tag)


def _read(buf, off: int, n: int, typ: TiffType) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.dtype(typ.code).newbyteorder("<"), count=n, offset=off)


def inspect_file(path, *, strict: bool, frames: str = "magic", header=None, storage_options=None) -> Report:
    """Walk ``path`` and check every rule; see :func:`validate` and :func:`index`.

    The file is opened once and measured and mapped through that one descriptor.  A
    remote URI (``store.remote``) is read by ranged requests: the first bytes for the
    profile, then the frames in spans when ``frames`` asks for them.
    """
    if is_remote(path):
        rep = inspect_remote(open_store(path, storage_options), strict=strict, frames=frames)
        return _with_header(rep, header, strict)
    if storage_options:
        raise ValueError(f"storage_options apply to remote URIs only, got a local path {os.fspath(path)!r}")
    path = os.fspath(path)
    try:
        file = LocalStore(path)
    except FormatError as exc:  # an empty file
        if strict:
            raise
        rep = Report(path, violations=[str(exc).removeprefix(where(path))])
    except OSError as exc:
        raise RumiError(f"{where(path)}cannot read file: {exc.strerror or exc}") from exc
    else:
        try:
            rep = inspect_mapping(file.mapping(), path, strict=strict, frames=frames)
        finally:
            file.close()  # the map goes now, or with the last view a traceback still holds
    return _with_header(rep, header, strict)


def _with_header(rep: Report, header, strict: bool) -> Report:
    if header is not None:
        rep.header_violations = compare_header(header, rep.blob, rep.path, spec=rep.spec)
        rep.checked.append(CHECKED_BLOB)
        if strict and rep.header_violations:
            raise BlobError(f"{where(rep.path)}{rep.header_violations[0]}")
    return rep


def inspect_mapping(buf: np.ndarray, path, *, strict: bool, frames: str = "magic") -> Report:
    """:func:`inspect_file` on a file already mapped (``buf``, uint8, the whole file)."""
    rep = Report(os.fspath(path))
    f = _Findings(rep.path, strict)
    try:
        _check(buf, buf.shape[0], f, rep, frames)
    except _Stop:
        pass
    rep.violations = f.items
    return rep


#: A remote object's first request asks for this many bytes: the BigTIFF header, the IFD and
#: the external values of a file of up to ~5,400 frames (more frames: one more request).
PREFIX_BYTES = 64 << 10


def inspect_store(store, *, strict: bool, trailer: bool = False) -> Report:
    """The file profile of a store's object (``store.Store``) from its first bytes.

    One request for ``PREFIX_BYTES`` (a second one when the external values run past
    them); the object's size comes with that answer.  Frames are not read, so only the
    profile is listed in ``checked``.  Nothing is fetched past the object's size,
    whatever the IFD claims.  A spec 0.2 object's ``TAIL`` trailer (band texts and time,
    after the frames) comes with the first request when the object is that small;
    otherwise ``trailer=True`` fetches it with one more request, and without it
    ``report.trailer`` is left None for the caller to fetch when it is asked for
    (``Image`` does).
    """
    head = np.frombuffer(store.read(0, PREFIX_BYTES), np.uint8)
    size = store.size
    v2 = bytes(head[:4]) == FILE_MAGIC
    rep = Report(store.name)
    f = _Findings(rep.path, strict)
    buf = head
    if head.shape[0] < size:
        try:  # where do the external values end?  A broken IFD is reported by _check below
            peek = _Findings(rep.path, False)
            if v2:
                _check_rumi_header(head, size, peek)
                base = _check_image_v2(_check_ifd(head, size, peek, PROFILE_V2), peek).base_frame_offset
            else:
                _check_bigtiff_header(head, size, peek)
                base = _check_image(_check_ifd(head, size, peek), peek).base_frame_offset
        except (_Stop, FormatError):
            base = 0
        if head.shape[0] < base <= size:
            buf = np.concatenate([head, store.get_ranges([(head.shape[0], base - head.shape[0])])[0]])

    def tail(end: int, grid: Grid2):
        """The trailer's bytes ``end..size``: from the first answer, fetched (``trailer``), or None (left for later)."""
        if size <= buf.shape[0]:
            return buf[end:size]
        if not trailer:
            return None
        most = max_trailer_bytes(grid.bands, grid.times)
        if size - end > most:
            f.add(f"trailer is {size - end} bytes (from byte {end} to the end), more than the {most} a trailer of "
                  f"{grid.bands} band texts and {grid.times} time steps can hold", stop=True)
        return store.get_ranges([(end, size - end)])[0]

    try:
        _check(buf, size, f, rep, "none", tail=tail if v2 else None)
    except _Stop:
        pass
    rep.violations = f.items
    return rep


class _Spans:
    """A store's object read in spans of ``SPAN_BYTES`` as a frame check walks it in order.

    Stands in for the mapping in the frame checks (``buf[a:b]`` and ``buf[index_array]``):
    one request a span, at most one span held, so a remote object is checked without
    holding it whole.
    """

    SPAN_BYTES = 32 << 20

    def __init__(self, store, size: int):
        self.store, self.size = store, size
        self.start, self.data = 0, np.empty(0, np.uint8)

    def _span(self, a: int, b: int) -> np.ndarray:
        """Bytes a..b (b - a <= SPAN_BYTES, or a whole frame) from the span held, fetching one if needed."""
        if not (self.start <= a and b <= self.start + self.data.shape[0]):
            end = min(self.size, max(b, a + self.SPAN_BYTES))
            self.start, self.data = a, self.store.get_ranges([(a, end - a)])[0]
        return self.data[a - self.start:b - self.start]

    def __getitem__(self, key):
        if isinstance(key, slice):
            return self._span(key.start, key.stop)
        idx = np.asarray(key, np.int64)  # rising offsets (the frame magics)
        out = np.empty(idx.shape, np.uint8)
        flat, dst = idx.reshape(-1), out.reshape(-1)
        i = 0
        while i < flat.shape[0]:
            a = int(flat[i])
            j = int(np.searchsorted(flat, a + self.SPAN_BYTES, side="left"))
            j = max(j, i + 1)
            dst[i:j] = self._span(a, int(flat[j - 1]) + 1)[flat[i:j] - a]
            i = j
        return out


def inspect_remote(store, *, strict: bool, frames: str) -> Report:
    """:func:`inspect_store`, then the frame checks ``frames`` asks for, over the object in spans."""
    rep = inspect_store(store, strict=strict, trailer=True)
    if rep.violations or rep.blob is None:
        return rep
    f = _Findings(rep.path, strict)
    try:
        _check_frames(_Spans(store, store.size), f, rep, frames)
    except _Stop:
        pass
    rep.checked = list(dict.fromkeys(rep.checked))  # the profile is listed once
    rep.violations = f.items
    return rep


def index_mapping(buf: np.ndarray, path) -> bytes:
    """:func:`index` of a file already mapped: its canonical blob, or FormatError."""
    return _strict_blob(inspect_mapping(buf, path, strict=True))


def _check(buf, size: int, f: _Findings, rep: Report, frames: str, tail=None) -> None:
    """Every rule of the spec, one function per section, in file order.

    ``tail(end, grid)``: a spec 0.2 trailer's bytes when ``buf`` does not hold the whole
    object (None: not checked now).
    """
    if size >= 4 and bytes(buf[:4]) == FILE_MAGIC:
        return _check_v2(buf, size, f, rep, frames, tail)
    rep.spec = "0.1"
    _check_bigtiff_header(buf, size, f)
    by_tag = _check_ifd(buf, size, f)
    grid = _check_image(by_tag, f)
    values = _check_placement(buf, size, by_tag, grid, f)
    enc = _check_sample_encoding(values, f)
    rep.georef = _check_georeferencing(values, f)
    rep.blob = build_header(grid, enc, _check_frame_layout(size, values, grid, f))
    _check_frames(buf, f, rep, frames)


def _check_v2(buf, size: int, f: _Findings, rep: Report, frames: str, tail=None) -> None:
    """Spec 0.2: the RUMI header, the 13-tag IFD, the frames, then the TAIL trailer."""
    rep.spec = "0.2"
    _check_rumi_header(buf, size, f)
    by_tag = _check_ifd(buf, size, f, PROFILE_V2)
    grid = _check_image_v2(by_tag, f)
    values = _check_placement(buf, size, by_tag, grid, f, PROFILE_V2)
    enc = _check_sample_encoding(values, f, spec="0.2")
    rep.georef = _check_georeferencing(values, f)
    counts = _check_frame_layout(size, values, grid, f, trailer=True)
    end = grid.base_frame_offset + int(counts.sum())
    data = buf[end:size] if tail is None else tail(end, grid)
    if data is not None:
        try:
            rep.trailer = parse_trailer(data, grid.bands, grid.times)
        except FormatError as exc:
            f.add(str(exc), stop=True)
    rep.blob = build_header2(grid, enc, counts)
    _check_frames(buf, f, rep, frames)


def _check_rumi_header(buf, size: int, f: _Findings) -> None:
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


def _check_bigtiff_header(buf, size: int, f: _Findings) -> None:
    """File profile: a little-endian BigTIFF header whose first IFD is at byte 16."""
    if size < 16:
        f.add(f"file is {size} bytes, shorter than the 16-byte BigTIFF header", stop=True)
    order = bytes(buf[:2])
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



def _check_ifd(buf, size: int, f: _Findings, profile: Profile = PROFILE_V1) -> dict:
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
        raise _Stop
    by_tag = {e.tag: e for e in entries}
    scalars = [Tag.IMAGE_WIDTH, Tag.IMAGE_LENGTH, Tag.SAMPLES_PER_PIXEL, Tag.TILE_WIDTH, Tag.TILE_LENGTH]
    for tag in scalars + [t for t in (TagV2.FRAME_UNIT, TagV2.TIME_COUNT) if t in profile.tags]:
        typ, _ = profile.tags[tag]
        e = by_tag[tag]
        if e.type != typ or e.count != 1:
            f.add(f"tag {_tag_name(tag)} has type {e.type} and count {e.count}, expected {typ.name} ({int(typ)}) and 1",
                  stop=True)
    return by_tag


def _check_image(by_tag: dict, f: _Findings) -> Grid:
    """Image, tiles and bands; the frame unit from the TileOffsets count; every tag's type and count."""
    def scalar(tag):
        typ, _ = FIXED_TAGS[tag]
        return int(np.frombuffer(by_tag[tag].field, dtype=np.dtype(typ.code).newbyteorder("<"), count=1)[0])

    width, length = scalar(Tag.IMAGE_WIDTH), scalar(Tag.IMAGE_LENGTH)
    bands, tw, tl = scalar(Tag.SAMPLES_PER_PIXEL), scalar(Tag.TILE_WIDTH), scalar(Tag.TILE_LENGTH)
    _check_dimensions(f, width, length, tw, tl, bands)
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


def _check_types_and_counts(by_tag: dict, profile: Profile, bands: int, n: int, f: _Findings) -> None:
    for tag, (typ, cnt) in profile.tags.items():
        e = by_tag[tag]
        want = cnt(bands, n)
        if e.type != typ or e.count != want:
            f.add(f"tag {_tag_name(tag)} has type {e.type} and count {e.count}, expected {typ.name} ({int(typ)}) "
                  f"and {want}", stop=True)


def _scalar(by_tag: dict, profile: Profile, tag) -> int:
    typ, _ = profile.tags[tag]
    return int(np.frombuffer(by_tag[tag].field, dtype=np.dtype(typ.code).newbyteorder("<"), count=1)[0])


def _check_image_v2(by_tag: dict, f: _Findings) -> Grid2:
    """Image, tiles, bands, time steps and the frame unit (spec 0.2); every tag's type and count."""
    def scalar(tag):
        return _scalar(by_tag, PROFILE_V2, tag)

    width, length = scalar(Tag.IMAGE_WIDTH), scalar(Tag.IMAGE_LENGTH)
    bands, tw, tl = scalar(Tag.SAMPLES_PER_PIXEL), scalar(Tag.TILE_WIDTH), scalar(Tag.TILE_LENGTH)
    unit, times = scalar(TagV2.FRAME_UNIT), scalar(TagV2.TIME_COUNT)
    _check_dimensions(f, width, length, tw, tl, bands)
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


def _check_placement(buf, size: int, by_tag: dict, grid: Grid, f: _Findings, profile: Profile = PROFILE_V1):
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

    def values(tag):
        typ, cnt = profile.tags[tag]
        return _read(buf, where_value[tag], cnt(bands, n), typ)

    return values


def _check_sample_encoding(values, f: _Findings, spec: str = "0.1"):
    """Sample encodings: one valid (SampleFormat, BitsPerSample) pair for every band."""
    bps, sfs = values(Tag.BITS_PER_SAMPLE), values(Tag.SAMPLE_FORMAT)
    if np.any(bps != bps[0]) or np.any(sfs != sfs[0]):
        f.add("bands use different (SampleFormat, BitsPerSample) pairs; all bands must use the same pair", stop=True)
    try:
        enc = dtypes.encoding(int(sfs[0]), int(bps[0]), spec=spec)
    except FormatError as exc:
        f.add(str(exc), stop=True)
    return enc


def _check_georeferencing(values, f: _Findings):
    """Georeferencing: the matrix and the key directory, EPSG codes only."""
    georef, bad = parse_geokeys(values(Tag.GEO_KEY_DIRECTORY), values(Tag.MODEL_TRANSFORMATION))
    for msg in bad:
        f.add(msg)
    return georef


def _check_frame_layout(size: int, values, grid: Grid, f: _Findings, *, trailer: bool = False) -> np.ndarray:
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


def _check_frames(buf, f: _Findings, rep: Report, frames: str) -> None:
    """What each frame holds, as far as ``frames`` asks: magics, headers or whole payloads."""
    hdr = parse_header(rep.blob, spec=rep.spec, path=rep.path)
    offsets, counts, grid = hdr.offsets[:-1], hdr.counts, hdr.grid
    rep.checked.append(CHECKED_PROFILE_V2 if rep.spec == "0.2" else CHECKED_PROFILE)
    if frames in ("magic", "headers", "decode"):
        if not _check_frame_magic(buf, offsets, counts, grid, f, rep):
            return
        rep.checked.append(CHECKED_MAGIC)
    if frames == "headers":
        _check_frame_headers(buf, hdr, f)
        rep.checked.append(CHECKED_HEADERS)
    if frames == "decode":
        _check_frame_decode(buf, hdr, f)
        rep.checked.append(CHECKED_DECODE)
    if frames in ("headers", "decode") and not f.items:
        ks = sample_frames(hdr.n_frames)
        spans = [(int(hdr.offsets[k]), int(hdr.offsets[k + 1]) - int(hdr.offsets[k])) for k in ks]
        # a remote object: just these frames, in one call (a span each would be 32 MiB)
        sampled = buf.store.get_ranges(spans) if isinstance(buf, _Spans) else [buf[a:a + n] for a, n in spans]
        rep.codecs, rep.readers = file_readers(sampled,
                                               rep.spec or "0.1",
                                               [hdr.grid.frame_samples(k) * hdr.encoding.itemsize for k in ks])
        rep.sampled_frames = tuple(ks)


#: Frames sampled to find which readers decode a file (the first, middle and last).
READER_SAMPLE = 3


def sample_frames(n_frames: int) -> list[int]:
    """Up to :data:`READER_SAMPLE` distinct frame indices spread over ``n_frames`` (first, middle, last)."""
    return sorted({0, n_frames // 2, n_frames - 1}) if n_frames > 0 else []


def file_readers(frames, spec: str, frame_bytes) -> tuple[frozenset, tuple[str, ...]]:
    """(geozl codecs referenced, readers that decode a file of ``spec``) from some of its frames.

    Each frame's codecs are found by trial decodes (``rumimm.codec.frame_codecs``, ~1-30 ms a
    frame), none declaring more than its ``frame_bytes`` entry; a reader is listed when it
    opens files of ``spec`` and decodes every frame given.
    """
    from rumimm.codec import READER_SPECS, READERS, frame_codecs

    codecs: set = set()
    ok = {r for r in READERS if spec in READER_SPECS[r]}
    for frame, nbytes in zip(frames, frame_bytes, strict=True):
        found = frame_codecs(frame, max_bytes=int(nbytes))
        codecs |= found.codecs
        ok &= set(found.readers)
    return frozenset(codecs), tuple(r for r in READERS if r in ok)


def _check_frame_magic(buf, offsets, counts, grid, f: _Findings, rep: Report) -> bool:
    """Every frame starts with the OpenZL magic of one format version; False when not."""
    MIN_FORMAT_VERSION, MAX_FORMAT_VERSION = OPENZL_FORMAT_VERSIONS

    short = np.flatnonzero(counts < 4)
    if short.size:
        f.add(f"frame {int(short[0])} is {int(counts[short[0]])} bytes, too short to be an OpenZL frame")
        return False
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
        return False
    mixed = np.flatnonzero(version != version[0])
    if mixed.size:
        k = int(mixed[0])
        f.add(f"frame {k} uses OpenZL format version {int(version[k])} but frame 0 uses {int(version[0])}; "
              "all frames must use one pinned format version")
        return False
    rep.format_version = int(version[0])
    return True


def _check_frame_headers(buf, hdr: Header, f: _Findings) -> None:
    """Each frame's OpenZL header declares one output of the right type and byte size.

    Reads only the header (~5 us a frame): no payload is decoded, so checksums and
    the element width are left to ``decode=True``.
    """
    from rumimm.codec import check_frame_header

    offs, grid = hdr.offsets, hdr.grid
    for k in range(hdr.n_frames):
        row, col, band = grid.frame_position(k)
        label = f"frame {k} (row {row}, col {col}, band {band})"
        try:
            check_frame_header(buf[int(offs[k]):int(offs[k + 1])], hdr.encoding, grid.frame_samples(k), label=label,
                               components=hdr.spec == "0.2")
        except RumiError as exc:
            f.add(str(exc))


def _check_frame_decode(buf, hdr: Header, f: _Findings) -> None:
    from rumimm.codec import FrameDecoder

    dec = FrameDecoder()
    offs = hdr.offsets
    for k in range(hdr.n_frames):
        frame = np.asarray(buf[int(offs[k]) : int(offs[k + 1])])
        try:
            dec.decode(frame, hdr.encoding, hdr.grid.frame_samples(k), index=k, components=hdr.spec == "0.2")
        except RumiError as exc:
            f.add(str(exc))


def compare_header(header, blob: bytes | None, path, spec: str | None = "0.1") -> list[str]:
    """How ``header`` (blob bytes or a Header) differs from a file's canonical ``blob``: [] or the first difference.

    ``spec`` is the file's specification (None: unknown, the blob's own layout decides).
    """
    try:
        given = parse_header(header, spec=spec, path=path)
    except BlobError as exc:
        return [str(exc).removeprefix(where(path))]
    if blob is None:
        return []
    if given.blob == blob:
        return []
    canon = parse_header(blob, spec=given.spec)
    diffs = [name for name in ("image_width", "image_length", "time_count", "tile_width", "tile_length",
                               "samples_per_pixel", "bits_per_sample", "sample_format", "frame_unit", "layout",
                               "count_min", "count_bits")
             if hasattr(canon, name)
             if getattr(given, name) != getattr(canon, name)
             # with one band the tile and cell layouts are the same bytes: either unit describes the file
             and not (name == "frame_unit" and canon.samples_per_pixel == 1)]
    if diffs:
        name = diffs[0]
        return [f"header blob field {name} is {int(getattr(given, name))} but the file gives "
                f"{int(getattr(canon, name))}"]
    differ = np.flatnonzero(given.counts != canon.counts)
    if differ.size == 0:
        return []
    k = int(differ[0])
    return [f"header blob byte count of frame {k} is {int(given.counts[k])} but the file has {int(canon.counts[k])}"]


def validate(path, header=None, *, decode: bool = False, storage_options=None) -> Report:
    """Check a file against every rule of the spec and report all violations.

    Parameters
    ----------
    path : str or os.PathLike
        The rumi file, or a remote URI (``s3://``, ``gs://``, ``az://``,
        ``http(s)://``): then the whole object is read, in spans of 32 MiB
        (``docs/remote.md``).
    header : bytes or Header, optional
        A blob to check too: it must be valid and equal the file's canonical blob.
    decode : bool
        Also decode every frame: checksums, element width, type and size (slow).
        By default each frame's OpenZL header is read (declared outputs, type
        and byte size), which is cheap.
    storage_options : dict, optional
        Remote URIs only: client settings (``store.remote.RemoteStore``).

    Returns
    -------
    Report
        ``report.ok`` is True when compliant; ``report.violations`` lists each rule
        broken, ``report.blob`` the canonical blob when the frame layout is sound,
        ``report.checked`` what was checked.
    """
    return inspect_file(path, strict=False, frames="decode" if decode else "headers", header=header,
                        storage_options=storage_options)


def index(path, *, storage_options=None) -> bytes:
    """Parse a file's IFD, check the whole file profile and return its canonical blob.

    A remote URI costs one ranged request (two for files of more than ~5,400 frames);
    its frames are not read, so their magics are left to the first read or
    :func:`validate`, and so is a spec 0.2 object's trailer unless the object fits in
    that first request.  ``storage_options`` as for :func:`validate`.

    Raises
    ------
    FormatError
        At the first rule the file breaks, naming the file, the field and the rule.
    """
    if is_remote(path):
        return _strict_blob(inspect_store(open_store(path, storage_options), strict=True))
    return _strict_blob(inspect_file(path, strict=True, storage_options=storage_options))


def _strict_blob(rep: Report) -> bytes:
    assert rep.blob is not None  # a strict inspection raises FormatError where it would leave none
    return rep.blob


def _check_dimensions(f, width: int, length: int, tw: int, tl: int, bands: int) -> None:
    """Image, tile and band counts must be positive (both specifications)."""
    if width == 0 or length == 0:
        f.add(f"image is {width} x {length} pixels; a rumi image has at least one pixel", stop=True)
    if tw == 0 or tl == 0:
        f.add(f"tile is {tw} x {tl}; TileWidth and TileLength must be > 0", stop=True)
    if bands == 0:
        f.add("SamplesPerPixel is 0, expected at least 1", stop=True)
