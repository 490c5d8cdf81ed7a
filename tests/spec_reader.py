"""An independent reader of rumi files and header blobs, written only from the spec.

This module re-reads ``rumi-spec-0.1.0`` with ``struct`` and plain Python loops,
without importing rumimm, so a bug shared by rumimm's reader and writer still
fails the tests.  It is slow on purpose: every packed bit is read one at a time.

* ``parse_blob(blob)``: the 28-byte header fields and the list of frame byte counts;
  raises ``SpecViolation`` (a ``ValueError``) listing every broken blob rule.
* ``check_blob(blob)``: the same rules, returned as a list of messages.
* ``parse_file(path)``: the BigTIFF header, the IFD entries as
  ``(tag, type, count, value_or_offset)``, the decoded tag values, the frame offsets
  and byte counts, and the georeferencing.  It parses any little-endian BigTIFF with
  one IFD and raises ``SpecViolation`` only when the bytes cannot be parsed at all.
* ``check_file(path, blob=None)``: every spec violation found (empty list: compliant).
* ``blob_from_file(path)``: the canonical header blob built from the file's IFD.
* ``build_file(path, entries, frames, ...)``: lay out a BigTIFF from raw entries, for
  tests that need hand-made, non-compliant files.
"""

from __future__ import annotations

import os
import struct

__all__ = [
    "BLOB_HEADER_SIZE",
    "BLOB_MAGIC",
    "BLOB_VERSION",
    "FIXED_TAGS",
    "IFD_OFFSET",
    "IFD_SIZE",
    "OPENZL_MAGIC_BASE",
    "TIFF_TYPE_SIZES",
    "UNDEFINED_MATRIX",
    "VALID_PAIRS",
    "SpecViolation",
    "blob_from_file",
    "build_blob",
    "build_file",
    "check_blob",
    "check_file",
    "entries_of",
    "expected_base_frame_offset",
    "parse_blob",
    "parse_file",
]


class SpecViolation(ValueError):
    """A blob or file that breaks rumi-spec-0.1.0."""


# --- constants, copied from the spec text --------------------------------------

BLOB_MAGIC = 0x45564F4C  # on the wire: 4C 4F 56 45 ("LOVE")
BLOB_VERSION = 1
BLOB_HEADER_SIZE = 28
# magic, version, image_width, image_length, tile_width, tile_length,
# samples_per_pixel, bits_per_sample, sample_format, frame_unit, count_min, count_bits
_BLOB_HEADER = struct.Struct("<I H I I H H H B B B I B")
assert _BLOB_HEADER.size == BLOB_HEADER_SIZE
_BLOB_FIELDS = (
    "magic",
    "version",
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
)

IFD_OFFSET = 16
IFD_SIZE = 8 + 20 * 11 + 8  # 236
assert IFD_SIZE == 236

#: OpenZL frames start with the little-endian uint32 OPENZL_MAGIC_BASE + format_version.
OPENZL_MAGIC_BASE = 0xD7B1A5C0
_OPENZL_MAX_VERSION = 255  # a generous bound: magic - base must be a small version number

#: The valid (sample_format, bits_per_sample) pairs of the "Sample encodings" table.
VALID_PAIRS = frozenset(
    {
        (1, 1), (1, 2), (1, 4), (1, 8), (1, 16), (1, 32), (1, 64),
        (2, 2), (2, 4), (2, 8), (2, 16), (2, 32), (2, 64),
        (3, 16), (3, 32), (3, 64),
        (5, 32), (5, 64),
        (6, 32), (6, 64), (6, 128),
        (100, 8), (101, 8), (102, 16), (103, 8), (104, 6), (105, 6), (106, 4),
    }
)  # fmt: skip
assert len(VALID_PAIRS) == 28

# TIFF field types and their sizes in bytes (TIFF 6.0 + BigTIFF).
BYTE, ASCII, SHORT, LONG, RATIONAL = 1, 2, 3, 4, 5
SBYTE, UNDEFINED, SSHORT, SLONG, SRATIONAL = 6, 7, 8, 9, 10
FLOAT, DOUBLE, IFD, LONG8, SLONG8, IFD8 = 11, 12, 13, 16, 17, 18
TIFF_TYPE_SIZES = {
    BYTE: 1, ASCII: 1, SHORT: 2, LONG: 4, RATIONAL: 8, SBYTE: 1, UNDEFINED: 1,
    SSHORT: 2, SLONG: 4, SRATIONAL: 8, FLOAT: 4, DOUBLE: 8, IFD: 4,
    LONG8: 8, SLONG8: 8, IFD8: 8,
}  # fmt: skip
_TYPE_FORMATS = {
    BYTE: "B", ASCII: "B", SHORT: "H", LONG: "I", RATIONAL: "II", SBYTE: "b",
    UNDEFINED: "B", SSHORT: "h", SLONG: "i", SRATIONAL: "ii", FLOAT: "f",
    DOUBLE: "d", IFD: "I", LONG8: "Q", SLONG8: "q", IFD8: "Q",
}  # fmt: skip
_TYPE_NAMES = {SHORT: "SHORT", LONG: "LONG", DOUBLE: "DOUBLE", LONG8: "LONG8"}

IMAGE_WIDTH, IMAGE_LENGTH, BITS_PER_SAMPLE, SAMPLES_PER_PIXEL = 256, 257, 258, 277
TILE_WIDTH, TILE_LENGTH, TILE_OFFSETS, TILE_BYTE_COUNTS = 322, 323, 324, 325
SAMPLE_FORMAT, MODEL_TRANSFORMATION, GEO_KEY_DIRECTORY = 339, 34264, 34735
FORBIDDEN_GEO_TAGS = {
    33550: "ModelPixelScaleTag",
    33922: "ModelTiepointTag",
    34736: "GeoDoubleParamsTag",
    34737: "GeoAsciiParamsTag",
}

#: tag -> (name, type, count), count being "1", "B", "N" or a number, from "Fixed IFD".
FIXED_TAGS = {
    IMAGE_WIDTH: ("ImageWidth", LONG, 1),
    IMAGE_LENGTH: ("ImageLength", LONG, 1),
    BITS_PER_SAMPLE: ("BitsPerSample", SHORT, "B"),
    SAMPLES_PER_PIXEL: ("SamplesPerPixel", SHORT, 1),
    TILE_WIDTH: ("TileWidth", SHORT, 1),
    TILE_LENGTH: ("TileLength", SHORT, 1),
    TILE_OFFSETS: ("TileOffsets", LONG8, "N"),
    TILE_BYTE_COUNTS: ("TileByteCounts", LONG, "N"),
    SAMPLE_FORMAT: ("SampleFormat", SHORT, "B"),
    MODEL_TRANSFORMATION: ("ModelTransformationTag", DOUBLE, 16),
    GEO_KEY_DIRECTORY: ("GeoKeyDirectoryTag", SHORT, 16),
}

#: The matrix of "Undefined georeferencing", row-major.
UNDEFINED_MATRIX = (1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)

GT_MODEL_TYPE, GT_RASTER_TYPE, GEOGRAPHIC_TYPE, PROJECTED_CS_TYPE = 1024, 1025, 2048, 3072


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _bit_length(x: int) -> int:
    """Minimum number of bits to represent x >= 0 (0 for x == 0), counted by shifting."""
    n = 0
    while x > 0:
        x >>= 1
        n += 1
    return n


# --- blob ------------------------------------------------------------------------


def _blob_rules(blob: bytes) -> tuple[dict | None, list[str]]:
    """Decode a blob and list every rule it breaks; fields is None when unreadable."""
    problems: list[str] = []
    if len(blob) < BLOB_HEADER_SIZE:
        return None, [f"blob is {len(blob)} bytes, expected at least the {BLOB_HEADER_SIZE}-byte header"]
    fields = dict(zip(_BLOB_FIELDS, _BLOB_HEADER.unpack_from(blob, 0), strict=True))
    if fields["magic"] != BLOB_MAGIC:
        problems.append(f"blob magic is {blob[0:4].hex(' ')}, expected 4c 4f 56 45")
    if fields["version"] != BLOB_VERSION:
        problems.append(f"blob version is {fields['version']}, expected {BLOB_VERSION}")
    if fields["tile_width"] == 0 or fields["tile_length"] == 0:
        problems.append(f"blob tile is {fields['tile_length']} x {fields['tile_width']}, expected both > 0")
    if fields["samples_per_pixel"] < 1:
        problems.append("blob samples_per_pixel is 0, expected at least 1")
    pair = (fields["sample_format"], fields["bits_per_sample"])
    if pair not in VALID_PAIRS:
        problems.append(f"blob (sample_format, bits_per_sample) = {pair} is not a valid pair")
    if fields["frame_unit"] not in (0, 1):
        problems.append(f"blob frame_unit is {fields['frame_unit']}, expected 0 (tile) or 1 (cell)")
    if fields["count_bits"] > 32:
        problems.append(f"blob count_bits is {fields['count_bits']}, expected 0..32")
    if fields["image_width"] == 0 or fields["image_length"] == 0:
        problems.append(f"blob image is {fields['image_length']} x {fields['image_width']}, expected both > 0")

    if fields["tile_width"] == 0 or fields["tile_length"] == 0:
        return fields, problems
    across = _ceil_div(fields["image_width"], fields["tile_width"])
    down = _ceil_div(fields["image_length"], fields["tile_length"])
    n = across * down * (fields["samples_per_pixel"] if fields["frame_unit"] == 0 else 1)
    fields["tiles_across"] = across
    fields["tiles_down"] = down
    fields["frames"] = n
    bits = fields["count_bits"]
    packed_size = _ceil_div(n * bits, 8)
    if len(blob) != BLOB_HEADER_SIZE + packed_size:
        problems.append(
            f"blob is {len(blob)} bytes, expected {BLOB_HEADER_SIZE} + ceil({n} * {bits} / 8) = "
            f"{BLOB_HEADER_SIZE + packed_size}"
        )
        return fields, problems
    packed = blob[BLOB_HEADER_SIZE:]

    def bit(position: int) -> int:
        return (packed[position // 8] >> (position % 8)) & 1

    residuals = []
    for i in range(n):
        value = 0
        for j in range(bits):
            value |= bit(i * bits + j) << j
        residuals.append(value)
    for position in range(n * bits, 8 * packed_size):
        if bit(position):
            problems.append(f"blob has a set unused bit at bit {position} of the packed region, expected 0")
            break
    counts = [fields["count_min"] + r for r in residuals]
    fields["residuals"] = residuals
    fields["counts"] = counts
    if n and fields["count_min"] == 0:
        problems.append("blob count_min is 0, expected every frame byte count > 0")
    if n and min(residuals) != 0:
        problems.append(f"blob count_min is {fields['count_min']}, expected the smallest count {min(counts)}")
    if n and bits != _bit_length(max(residuals) - min(residuals)):
        problems.append(
            f"blob count_bits is {bits}, expected the minimum width "
            f"{_bit_length(max(counts) - min(counts))} of the largest residual"
        )
    return fields, problems


def check_blob(blob: bytes) -> list[str]:
    """Every header blob rule that ``blob`` breaks (empty list: compliant)."""
    return _blob_rules(bytes(blob))[1]


def parse_blob(blob: bytes) -> dict:
    """Decode a header blob into its fields plus ``counts`` (frame byte counts).

    Also returns ``tiles_across``, ``tiles_down``, ``frames`` (N) and ``residuals``.
    Raises SpecViolation (a ValueError) naming every broken rule.
    """
    fields, problems = _blob_rules(bytes(blob))
    if problems:
        raise SpecViolation("; ".join(problems))
    return fields


def build_blob(fields: dict, counts: list[int]) -> bytes:
    """Encode a blob by the spec's Encoding and Packing rules (canonical count_min/bits).

    ``fields`` needs image_width, image_length, tile_width, tile_length,
    samples_per_pixel, bits_per_sample, sample_format, frame_unit.
    """
    count_min = min(counts)
    count_bits = 0 if max(counts) == count_min else _bit_length(max(counts) - count_min)
    header = _BLOB_HEADER.pack(
        BLOB_MAGIC,
        BLOB_VERSION,
        fields["image_width"],
        fields["image_length"],
        fields["tile_width"],
        fields["tile_length"],
        fields["samples_per_pixel"],
        fields["bits_per_sample"],
        fields["sample_format"],
        fields["frame_unit"],
        count_min,
        count_bits,
    )
    packed = bytearray(_ceil_div(len(counts) * count_bits, 8))
    for i, count in enumerate(counts):
        residual = count - count_min
        for j in range(count_bits):
            if (residual >> j) & 1:
                position = i * count_bits + j
                packed[position // 8] |= 1 << (position % 8)
    return header + bytes(packed)


# --- file ------------------------------------------------------------------------


def expected_base_frame_offset(samples_per_pixel: int, frames: int) -> int:
    """``base_frame_offset`` by the formula of "Deriving base_frame_offset"."""
    b, n = samples_per_pixel, frames
    external = (
        (2 * b if b >= 5 else 0)  # 258 BitsPerSample
        + (8 * n if n >= 2 else 0)  # 324 TileOffsets
        + (4 * n if n >= 3 else 0)  # 325 TileByteCounts
        + (2 * b if b >= 5 else 0)  # 339 SampleFormat
        + 128  # 34264 ModelTransformationTag
        + 32  # 34735 GeoKeyDirectoryTag
    )
    return 252 + external


def _decode_values(raw: bytes, tiff_type: int, count: int) -> tuple:
    fmt = _TYPE_FORMATS.get(tiff_type)
    if fmt is None:
        return tuple(raw)
    return struct.unpack("<" + fmt * count, raw[: TIFF_TYPE_SIZES[tiff_type] * count])


def parse_file(path) -> dict:
    """Parse a little-endian BigTIFF with one IFD into a plain dict.

    Keys: ``file_size``, ``byte_order``, ``tiff_version``, ``offset_size``, ``reserved``,
    ``ifd_offset``, ``entry_count``, ``entries`` (list of (tag, type, count,
    value_or_offset) with the 8-byte field as a little-endian uint64), ``inline``
    (tag -> True when the value sits in the entry), ``value_offsets`` (tag -> offset of
    the value bytes), ``value_sizes`` (tag -> bytes), ``external`` (list of (tag, offset,
    size) of the out-of-line values, in IFD order), ``next_ifd``, ``ifd_end``,
    ``values`` (tag -> tuple), the named fields of the fixed tags (``image_width``,
    ``bits_per_sample`` (tuple), ``tile_offsets`` (list), ``tile_byte_counts`` (list),
    ``matrix`` (16 floats), ``geokeys`` (tuple of shorts), ...), ``tiles_across``,
    ``tiles_down``, ``grid``, ``frame_unit`` ("tile", "cell" or None), ``frames``
    (list of (offset, count)), ``frame_magics`` (first 4 bytes of each frame as a
    little-endian uint32, None past the end), and ``georef`` (see ``_georef``).
    Raises SpecViolation only when the bytes are not a parseable LE BigTIFF.
    """
    with open(os.fspath(path), "rb") as f:
        data = f.read()
    out: dict = {"file_size": len(data)}
    if len(data) < 16:
        raise SpecViolation(f"file is {len(data)} bytes, too short for a BigTIFF header")
    out["byte_order"] = data[0:2]
    if data[0:2] != b"II":
        raise SpecViolation(f"byte order mark is {data[0:2]!r}, expected b'II' (little-endian)")
    version, offset_size, reserved, ifd_offset = struct.unpack_from("<HHHQ", data, 2)
    out.update(tiff_version=version, offset_size=offset_size, reserved=reserved, ifd_offset=ifd_offset)
    if version != 43:
        raise SpecViolation(f"TIFF version is {version}, expected 43 (BigTIFF)")
    if ifd_offset + 8 > len(data):
        raise SpecViolation(f"first IFD offset {ifd_offset} lies past the end of the {len(data)}-byte file")
    (entry_count,) = struct.unpack_from("<Q", data, ifd_offset)
    out["entry_count"] = entry_count
    end = ifd_offset + 8 + 20 * entry_count + 8
    if end > len(data):
        raise SpecViolation(f"IFD of {entry_count} entries at {ifd_offset} runs past the end of the file")
    entries, values, inline, value_offsets, value_sizes = [], {}, {}, {}, {}
    for i in range(entry_count):
        at = ifd_offset + 8 + 20 * i
        tag, tiff_type, count = struct.unpack_from("<HHQ", data, at)
        field = data[at + 12 : at + 20]
        (value_or_offset,) = struct.unpack("<Q", field)
        entries.append((tag, tiff_type, count, value_or_offset))
        size = TIFF_TYPE_SIZES.get(tiff_type, 1) * count
        value_sizes[tag] = size
        if size <= 8:
            inline[tag] = True
            value_offsets[tag] = at + 12
            raw = field[:size]
        else:
            inline[tag] = False
            value_offsets[tag] = value_or_offset
            raw = data[value_or_offset : value_or_offset + size]
            if len(raw) != size:
                raise SpecViolation(f"tag {tag} value at {value_or_offset} runs past the end of the file")
        values[tag] = _decode_values(raw, tiff_type, count)
    (out["next_ifd"],) = struct.unpack_from("<Q", data, ifd_offset + 8 + 20 * entry_count)
    out.update(entries=entries, values=values, inline=inline, value_offsets=value_offsets)
    out.update(value_sizes=value_sizes, ifd_end=end)
    out["external"] = [(tag, value_offsets[tag], value_sizes[tag]) for tag, *_ in entries if not inline[tag]]

    def one(tag):
        v = values.get(tag)
        return v[0] if v else None

    out["image_width"] = one(IMAGE_WIDTH)
    out["image_length"] = one(IMAGE_LENGTH)
    out["bits_per_sample"] = values.get(BITS_PER_SAMPLE)
    out["samples_per_pixel"] = one(SAMPLES_PER_PIXEL)
    out["tile_width"] = one(TILE_WIDTH)
    out["tile_length"] = one(TILE_LENGTH)
    out["tile_offsets"] = list(values.get(TILE_OFFSETS, ()))
    out["tile_byte_counts"] = list(values.get(TILE_BYTE_COUNTS, ()))
    out["sample_format"] = values.get(SAMPLE_FORMAT)
    out["matrix"] = values.get(MODEL_TRANSFORMATION)
    out["geokeys"] = values.get(GEO_KEY_DIRECTORY)

    across = down = grid = None
    unit = None
    if out["image_width"] and out["image_length"] and out["tile_width"] and out["tile_length"]:
        across = _ceil_div(out["image_width"], out["tile_width"])
        down = _ceil_div(out["image_length"], out["tile_length"])
        grid = across * down
        n = len(out["tile_offsets"])
        b = out["samples_per_pixel"] or 0
        if n == grid:
            unit = "cell"  # also the tile reading when B == 1: the layouts are identical
        elif b and n == grid * b:
            unit = "tile"
    out.update(tiles_across=across, tiles_down=down, grid=grid, frame_unit=unit)

    # counts that differ are a problem the checks report (TileOffsets has n entries and TileByteCounts m)
    frames = list(zip(out["tile_offsets"], out["tile_byte_counts"], strict=False))
    out["frames"] = frames
    magics = []
    for offset, _ in frames:
        magics.append(struct.unpack_from("<I", data, offset)[0] if offset + 4 <= len(data) else None)
    out["frame_magics"] = magics
    out["georef"] = _georef(out["matrix"], out["geokeys"])
    return out


def _georef(matrix, geokeys) -> dict | None:
    """Read the three keys and the affine, or None when the tags are missing/short."""
    if matrix is None or geokeys is None or len(matrix) != 16 or len(geokeys) != 16:
        return None
    keys = {}
    for k in range(4, 16, 4):
        key_id, location, count, value = geokeys[k : k + 4]
        keys[key_id] = (location, count, value)
    model_type = keys.get(GT_MODEL_TYPE, (None, None, None))[2]
    raster_type = keys.get(GT_RASTER_TYPE, (None, None, None))[2]
    crs_key = PROJECTED_CS_TYPE if PROJECTED_CS_TYPE in keys else GEOGRAPHIC_TYPE
    epsg = keys.get(crs_key, (None, None, None))[2]
    m = matrix
    return {
        "header": tuple(geokeys[0:4]),
        "keys": keys,
        "model_type": model_type,
        "raster_type": raster_type,
        "pixel_is_point": raster_type == 2,
        "crs_key": crs_key,
        "epsg": epsg if model_type in (1, 2) else None,
        # (x_res, row_rot, x_origin, col_rot, y_res, y_origin)
        "affine": (m[0], m[1], m[3], m[4], m[5], m[7]) if model_type in (1, 2) else None,
    }


def _epsg_kind(code: int) -> str | None:
    """'geographic', 'projected', 'other', 'unknown' (not in the registry), or None without pyproj."""
    try:
        import pyproj
    except ImportError:  # the registry check needs a PROJ database
        return None
    try:
        crs = pyproj.CRS.from_epsg(code)
    except Exception:
        return "unknown"
    if crs.is_projected:
        return "projected"
    if crs.is_geographic:
        return "geographic"
    return "other"


def check_file(path, blob: bytes | None = None) -> list[str]:
    """Every rumi-spec violation found in the file at ``path`` (empty list: compliant).

    With ``blob``, the blob's own rules are checked too, and that it agrees with the
    file (same fields, same counts).
    """
    name = os.path.basename(os.fspath(path))
    try:
        f = parse_file(path)
    except SpecViolation as exc:
        return [f"{name}: {exc}"]
    problems: list[str] = []
    add = problems.append
    size = f["file_size"]

    # File profile: BigTIFF, little-endian, one IFD, placed at 16
    if f["offset_size"] != 8 or f["reserved"] != 0:
        add(f"BigTIFF header has offset size {f['offset_size']} and reserved {f['reserved']}, expected 8 and 0")
    if f["ifd_offset"] != IFD_OFFSET:
        add(f"IFD starts at byte {f['ifd_offset']}, expected {IFD_OFFSET}")
    if f["next_ifd"] != 0:
        add(f"next IFD offset is {f['next_ifd']}, expected 0 (exactly one IFD)")

    # Fixed IFD: exactly the 11 tags, rising order, types, counts
    tags = [e[0] for e in f["entries"]]
    if f["entry_count"] != 11:
        add(f"IFD has {f['entry_count']} entries, expected 11")
    for tag in tags:
        if tag not in FIXED_TAGS:
            label = FORBIDDEN_GEO_TAGS.get(tag, "not in Fixed IFD")
            add(f"tag {tag} ({label}) must not appear")
    for tag in FIXED_TAGS:
        if tag not in tags:
            add(f"tag {tag} ({FIXED_TAGS[tag][0]}) is missing")
    if any(tags[i] >= tags[i + 1] for i in range(len(tags) - 1)):
        add(f"IFD tags are {tags}, expected strictly rising tag order")
    if len(tags) != len(set(tags)):
        add("IFD repeats a tag")

    b = f["samples_per_pixel"]
    grid = f["grid"]
    n = len(f["tile_offsets"])
    for tag, tiff_type, count, _ in f["entries"]:
        if tag not in FIXED_TAGS:
            continue
        tname, want_type, want_count = FIXED_TAGS[tag]
        if tiff_type != want_type:
            add(f"tag {tag} ({tname}) has type {tiff_type}, expected {want_type} ({_TYPE_NAMES[want_type]})")
        if want_count == "B":
            want = b
        elif want_count == "N":
            want = None  # checked against the grid below
        else:
            want = want_count
        if want is not None and count != want:
            add(f"tag {tag} ({tname}) has {count} values, expected {want}")

    # image, tiles, samples
    for key, label in (("image_width", "ImageWidth"), ("image_length", "ImageLength")):
        if not f[key]:
            add(f"{label} is {f[key]}, expected > 0")
    for key, label in (("tile_width", "TileWidth"), ("tile_length", "TileLength")):
        if not f[key]:
            add(f"{label} is {f[key]}, expected > 0 (the image is tiled)")
    if not b:
        add(f"SamplesPerPixel is {b}, expected at least 1")
    bps, sf = f["bits_per_sample"], f["sample_format"]
    if bps is not None and sf is not None:
        if len(set(bps)) > 1 or len(set(sf)) > 1:
            add(f"bands use different encodings (BitsPerSample {bps}, SampleFormat {sf}), expected one pair")
        if bps and sf:
            pair = (sf[0], bps[0])
            if pair not in VALID_PAIRS:
                add(f"(sample_format, bits_per_sample) = {pair} is not a valid pair")

    # frame count: N entries in both tags, N matches cell or tile
    counts = f["tile_byte_counts"]
    if len(counts) != n:
        add(f"TileOffsets has {n} entries and TileByteCounts {len(counts)}, expected the same N")
    if grid is not None and b and f["frame_unit"] is None:
        add(f"TileOffsets has {n} entries, expected {grid} (cell) or {grid * b} (tile)")
    for i, c in enumerate(counts):
        if c == 0:
            add(f"TileByteCounts[{i}] is 0, expected > 0 (no sparse frames)")

    # Placement: external values right after the IFD in rising tag order, no gaps
    cursor = IFD_OFFSET + IFD_SIZE
    for tag, _tiff_type, _count, value_or_offset in sorted(f["entries"]):
        if f["inline"][tag]:
            continue
        if value_or_offset != cursor:
            add(f"tag {tag} value is at byte {value_or_offset}, expected {cursor} (rising tag order, no gaps)")
        cursor = max(cursor, value_or_offset) + f["value_sizes"][tag]
    external_end = cursor
    if b and n:
        base = expected_base_frame_offset(b, n)
        if f["tile_offsets"][0] != base:
            add(f"TileOffsets[0] is {f['tile_offsets'][0]}, expected base_frame_offset {base}")
        if external_end != base:
            add(f"external values end at byte {external_end}, expected base_frame_offset {base}")
        if f["tile_offsets"][0] != external_end:
            add(f"frame data starts at byte {f['tile_offsets'][0]}, expected {external_end} right after the values")

    # frames: one contiguous run in frame-index order (never sorted), inside the file
    if n and len(counts) == n:
        for i in range(n - 1):
            if f["tile_offsets"][i + 1] != f["tile_offsets"][i] + counts[i]:
                add(
                    f"frame {i + 1} starts at byte {f['tile_offsets'][i + 1]}, expected "
                    f"{f['tile_offsets'][i] + counts[i]} right after frame {i} (frame-index order)"
                )
                break
        last_end = f["tile_offsets"][-1] + counts[-1]
        if last_end != size:
            add(f"file is {size} bytes, expected {last_end} (the end of the last frame)")
        versions = set()
        for i, magic in enumerate(f["frame_magics"]):
            if magic is None or not OPENZL_MAGIC_BASE <= magic <= OPENZL_MAGIC_BASE + _OPENZL_MAX_VERSION:
                shown = "nothing" if magic is None else f"0x{magic:08X}"
                add(f"frame {i} starts with {shown}, expected an OpenZL magic 0xD7B1A5C0 + format_version")
            else:
                versions.add(magic - OPENZL_MAGIC_BASE)
        if len(versions) > 1:
            add(f"frames use OpenZL format versions {sorted(versions)}, expected one pinned version")

    # Georeferencing
    problems.extend(_georef_problems(f["matrix"], f["geokeys"]))

    if blob is not None:
        problems.extend(_blob_against_file(bytes(blob), f))
    return [f"{name}: {p}" for p in problems]


def _georef_problems(matrix, geokeys) -> list[str]:
    problems: list[str] = []
    add = problems.append
    if matrix is None or geokeys is None or len(matrix) != 16 or len(geokeys) != 16:
        return problems  # already reported as a missing tag or a wrong count
    m = matrix
    if m[2] != 0 or m[6] != 0:
        add(f"matrix Z column of rows 0 and 1 is ({m[2]}, {m[6]}), expected zeros")
    if tuple(m[8:12]) != (0.0, 0.0, 0.0, 0.0):
        add(f"matrix third row is {tuple(m[8:12])}, expected all zeros")
    if tuple(m[12:16]) != (0.0, 0.0, 0.0, 1.0):
        add(f"matrix fourth row is {tuple(m[12:16])}, expected (0, 0, 0, 1)")
    version, revision, minor, nkeys = geokeys[0:4]
    if version != 1 or revision != 1 or minor != 0:
        add(f"GeoKey directory header is {tuple(geokeys[0:4])}, expected version 1, revision 1.0 (1, 1, 0)")
    if nkeys != 3:
        add(f"GeoKey directory declares {nkeys} keys, expected 3")
    keys = [tuple(geokeys[k : k + 4]) for k in range(4, 16, 4)]
    ids = [k[0] for k in keys]
    for key_id, location, count, _ in keys:
        if location != 0 or count != 1:
            add(f"GeoKey {key_id} has location {location} and count {count}, expected an inline short (0, 1)")
    if ids[0:2] != [GT_MODEL_TYPE, GT_RASTER_TYPE] or ids[2] not in (GEOGRAPHIC_TYPE, PROJECTED_CS_TYPE):
        add(f"GeoKey ids are {ids}, expected [1024, 1025, 2048 or 3072]")
        return problems
    model_type, raster_type, code = keys[0][3], keys[1][3], keys[2][3]
    if raster_type not in (1, 2):
        add(f"GTRasterTypeGeoKey is {raster_type}, expected 1 (PixelIsArea) or 2 (PixelIsPoint)")
    if model_type == 0:
        if ids[2] != GEOGRAPHIC_TYPE or code != 0:
            add(f"undefined georeferencing has key {ids[2]} = {code}, expected GeographicTypeGeoKey 2048 = 0")
        if tuple(m) != UNDEFINED_MATRIX:
            add(f"undefined georeferencing has matrix {tuple(m)}, expected {UNDEFINED_MATRIX}")
        return problems
    if model_type not in (1, 2):
        add(f"GTModelTypeGeoKey is {model_type}, expected 0 (none), 1 (projected) or 2 (geographic)")
        return problems
    want_key = PROJECTED_CS_TYPE if model_type == 1 else GEOGRAPHIC_TYPE
    if ids[2] != want_key:
        add(f"GTModelTypeGeoKey {model_type} comes with key {ids[2]}, expected {want_key}")
    if not 1024 <= code <= 32766:
        add(f"EPSG code {code} is outside 1024..32766")
        return problems
    kind = _epsg_kind(code)
    if kind == "unknown":
        add(f"EPSG code {code} is not in the EPSG registry")
    elif kind is not None:
        want_kind = "projected" if model_type == 1 else "geographic"
        if kind != want_kind:
            add(f"EPSG:{code} is {kind} but GTModelTypeGeoKey says {want_kind}")
    return problems


def _blob_against_file(blob: bytes, f: dict) -> list[str]:
    fields, problems = _blob_rules(blob)
    problems = [p for p in problems]
    if fields is None:
        return problems
    for key in ("image_width", "image_length", "tile_width", "tile_length", "samples_per_pixel"):
        if fields[key] != f[key]:
            problems.append(f"blob {key} is {fields[key]}, the file says {f[key]}")
    if f["bits_per_sample"] and fields["bits_per_sample"] != f["bits_per_sample"][0]:
        problems.append(f"blob bits_per_sample is {fields['bits_per_sample']}, the file says {f['bits_per_sample'][0]}")
    if f["sample_format"] and fields["sample_format"] != f["sample_format"][0]:
        problems.append(f"blob sample_format is {fields['sample_format']}, the file says {f['sample_format'][0]}")
    if "counts" in fields and fields["counts"] != f["tile_byte_counts"]:
        problems.append("blob frame byte counts differ from TileByteCounts")
    if f["samples_per_pixel"] != 1 and f["frame_unit"] is not None:
        unit = {"tile": 0, "cell": 1}[f["frame_unit"]]
        if fields["frame_unit"] != unit:
            problems.append(f"blob frame_unit is {fields['frame_unit']}, the file's entry count says {unit}")
    return problems


def blob_from_file(path, frame_unit: int | None = None) -> bytes:
    """The canonical header blob of the file at ``path``, built from its IFD.

    The frame unit comes from the TileOffsets entry count.  With one band the two
    units are indistinguishable in the file; pass ``frame_unit`` (0 or 1) to choose,
    otherwise 0 (tile) is used.
    """
    f = parse_file(path)
    if f["frame_unit"] is None:
        raise SpecViolation("TileOffsets entry count matches neither the cell nor the tile frame count")
    if frame_unit is None:
        frame_unit = 0 if f["samples_per_pixel"] == 1 else {"tile": 0, "cell": 1}[f["frame_unit"]]
    fields = {
        "image_width": f["image_width"],
        "image_length": f["image_length"],
        "tile_width": f["tile_width"],
        "tile_length": f["tile_length"],
        "samples_per_pixel": f["samples_per_pixel"],
        "bits_per_sample": f["bits_per_sample"][0],
        "sample_format": f["sample_format"][0],
        "frame_unit": frame_unit,
    }
    return build_blob(fields, f["tile_byte_counts"])


# --- building hand-made files ------------------------------------------------------


def build_file(
    path, entries, frames, *, frame_order=None, gap: int = 0, next_ifd: int = 0, tail: bytes = b"", fill: bool = True
) -> None:
    """Write a little-endian BigTIFF with one IFD at byte 16, for tests.

    ``entries`` is a list of ``(tag, type, count, value_bytes)`` written in the given
    order; values over 8 bytes go right after the IFD in that order.  ``frames`` is the
    list of frame bytes in frame-index order, laid out physically in ``frame_order``
    (default: index order) after ``gap`` zero bytes; ``tail`` is appended after the
    last frame.  With ``fill``, the values of TileOffsets (324, as LONG8) and
    TileByteCounts (325, as LONG) are replaced by the frames' real positions and
    sizes, so their count must be len(frames).
    """
    frames = [bytes(x) for x in frames]
    order = list(range(len(frames))) if frame_order is None else list(frame_order)
    ifd_size = 8 + 20 * len(entries) + 8
    external_size = sum(len(v) for _, _, _, v in entries if len(v) > 8)
    start = IFD_OFFSET + ifd_size + external_size + gap
    offsets = [0] * len(frames)
    cursor = start
    for i in order:
        offsets[i] = cursor
        cursor += len(frames[i])
    fixed = []
    for tag, tiff_type, count, value in entries:
        if fill and tag == TILE_OFFSETS:
            value = struct.pack(f"<{len(offsets)}Q", *offsets)
        elif fill and tag == TILE_BYTE_COUNTS:
            value = struct.pack(f"<{len(frames)}I", *(len(x) for x in frames))
        fixed.append((tag, tiff_type, count, value))
    body = lay_out_ifd(fixed, next_ifd) + bytes(gap) + b"".join(frames[i] for i in order) + tail
    with open(os.fspath(path), "wb") as out:
        out.write(body)


def lay_out_ifd(entries, next_ifd: int = 0) -> bytes:
    """The BigTIFF header, one IFD at byte 16 and its external values, as the spec places them.

    ``entries`` are ``(tag, type, count, value_bytes)`` in file order: values of up to
    8 bytes sit in their entry (zero-padded), longer ones right after the IFD in
    entry order, with no gaps.
    """
    ifd = bytearray(struct.pack("<Q", len(entries)))
    external = bytearray()
    ext_at = IFD_OFFSET + 8 + 20 * len(entries) + 8
    for tag, tiff_type, count, value in entries:
        if len(value) <= 8:
            field = value + bytes(8 - len(value))
        else:
            field = struct.pack("<Q", ext_at + len(external))
            external += value
        ifd += struct.pack("<HHQ", tag, tiff_type, count) + field
    ifd += struct.pack("<Q", next_ifd)
    return b"II" + struct.pack("<HHHQ", 43, 8, 0, IFD_OFFSET) + bytes(ifd) + bytes(external)


def entries_of(path) -> tuple[list, list]:
    """A file's IFD as ``build_file`` entries, and its frames' bytes in frame-index order."""
    f = parse_file(path)
    with open(os.fspath(path), "rb") as fh:
        data = fh.read()
    entries = []
    for tag, tiff_type, count, _ in f["entries"]:
        at = f["value_offsets"][tag]
        entries.append((tag, tiff_type, count, data[at : at + f["value_sizes"][tag]]))
    frames = [data[o : o + c] for o, c in f["frames"]]
    return entries, frames
