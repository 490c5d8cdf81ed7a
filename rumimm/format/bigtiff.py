"""The BigTIFF byte layout both rumi profiles share: header, IFD entries and their offsets.

Every module that reads or writes IFD bytes takes its sizes and offsets from here, so
``24 + 20 * i`` is written once.  A rumi file is a 16-byte header (BigTIFF's, or spec
0.2's ``RUMI`` header of the same size), one IFD at byte 16 (an 8-byte entry count,
20-byte entries, an 8-byte next-IFD offset), then the external tag values and the
frames.
"""

from __future__ import annotations

__all__ = ["ENTRY_SIZE", "FIRST_ENTRY", "TIFF_HEADER_SIZE", "entry_offset", "ifd_end", "ifd_size", "value_offset"]

#: Bytes of the file header (BigTIFF's, or spec 0.2's RUMI header).
TIFF_HEADER_SIZE = 16
#: Bytes of one IFD entry: tag u16, type u16, count u64, value or offset (8 bytes).
ENTRY_SIZE = 20
#: Where the first entry starts: after the header and the IFD's u64 entry count.
FIRST_ENTRY = TIFF_HEADER_SIZE + 8


def entry_offset(i: int) -> int:
    """Byte offset of entry ``i`` of the IFD."""
    return FIRST_ENTRY + ENTRY_SIZE * i


def value_offset(i: int) -> int:
    """Byte offset of entry ``i``'s inline value (or of the offset to its external values)."""
    return entry_offset(i) + 12


def ifd_size(n_tags: int) -> int:
    """Bytes of an IFD of ``n_tags`` entries: count, entries, next-IFD offset."""
    return 8 + ENTRY_SIZE * n_tags + 8


def ifd_end(n_tags: int) -> int:
    """Where the external tag values start: the header and the IFD."""
    return TIFF_HEADER_SIZE + ifd_size(n_tags)
