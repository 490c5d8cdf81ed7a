"""Helpers of the writer tests (tests/test_writer_*.py): decode a written file by hand, check it is compliant.

Files are decoded frame by frame with ``codec.FrameDecoder`` twice: with rumimm's
``Header.parse(blob).frame_offsets`` and with the offsets that the independent
``tests/spec_reader.py`` parses from the IFD.
"""

from __future__ import annotations

import os

import numpy as np
import spec_reader

from rumimm import build_blob, codec, validate
from rumimm.format.blob import Header
from rumimm.format.grid import FrameUnit


def storage_bytes(a: np.ndarray) -> np.ndarray:
    """What a frame stores for ``a``: its bytes, one per sub-byte sample."""
    return np.ascontiguousarray(a).view(np.uint8)


def decode(path, blob, offsets=None) -> np.ndarray:
    """Rebuild the (B, Y, X) storage bytes of a file frame by frame with codec.FrameDecoder."""
    h = Header.parse(blob)
    g, enc = h.grid, h.encoding
    offs = h.frame_offsets if offsets is None else np.asarray(offsets, dtype=np.uint64)
    data = np.fromfile(path, dtype=np.uint8)
    out = np.zeros(h.shape, dtype=enc.storage_dtype)
    dec = codec.FrameDecoder()
    for k in range(h.n_frames):
        row, col, band = g.frame_position(k)
        hh, ww = g.edge_size(row, col)
        flat = dec.decode(data[int(offs[k]) : int(offs[k + 1])], enc, g.frame_samples(k), index=k)
        y0, x0 = row * g.tile_length, col * g.tile_width
        if g.unit == FrameUnit.TILE:
            out[band, y0 : y0 + hh, x0 : x0 + ww] = flat.reshape(hh, ww)
        else:
            out[:, y0 : y0 + hh, x0 : x0 + ww] = flat.reshape(g.samples_per_pixel, hh, ww)
    return out.view(np.uint8)


def spec_offsets(path) -> list[int]:
    """Frame offsets (length N + 1) from the independent spec reader."""
    frames = spec_reader.parse_file(path)["frames"]
    return [off for off, _ in frames] + [frames[-1][0] + frames[-1][1]]


def assert_compliant(path, blob) -> None:
    assert build_blob(path) == blob
    report = validate(path, header=blob)
    assert report.ok, report.violations
    assert report.frame_format_version == codec.DEFAULT_FORMAT_VERSION
    assert spec_reader.check_file(path, blob) == []
    assert spec_reader.blob_from_file(path) == blob


def assert_round_trip(path, blob, array) -> None:
    a = array if array.ndim == 3 else array[np.newaxis]
    want = storage_bytes(a)
    assert np.array_equal(decode(path, blob), want)
    assert np.array_equal(decode(path, blob, spec_offsets(path)), want)


def no_temp_files(directory) -> bool:
    return not [n for n in os.listdir(directory) if n.endswith(".tmp")]
