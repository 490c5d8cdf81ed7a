"""Header blobs: parse one, parse a catalog column of 1,000,000, rebuild one from a file."""

from __future__ import annotations

import numpy as np

from ._common import BANDS, SIZE, scene, write_scene

import rumimm
from rumimm.blob import Header, build_header
from rumimm.dtypes import encoding_for_dtype
from rumimm.grid import Grid

N_BLOBS = 1_000_000


def _catalog_blobs(m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``m`` valid blobs of varied shapes as an Arrow-style (flat uint8, int64 offsets) column.

    Shapes are those of a training-chip catalog: 1..12 bands, 256..2560 pixels a
    side, 256- or 512-pixel tiles, tile and cell frames; blobs of 33..1216 bytes, 200 on average.
    """
    rng = np.random.default_rng(seed)
    enc = encoding_for_dtype("uint16")
    kinds = []
    for _ in range(32):
        b = int(rng.integers(1, 13))
        y, x = (int(v) for v in rng.integers(256, 2561, size=2))
        tile = int(rng.choice([256, 512]))
        unit = int(rng.integers(0, 2))
        grid = Grid(x, y, tile, tile, b, unit)
        counts = rng.integers(20_000, 400_000, size=grid.n_frames)
        kinds.append(np.frombuffer(build_header(grid, enc, counts), np.uint8))
    source = np.concatenate(kinds)
    kind_len = np.array([k.size for k in kinds], np.int64)
    kind_start = np.concatenate([[0], np.cumsum(kind_len)[:-1]])
    pick = rng.integers(0, len(kinds), size=m)
    lengths = kind_len[pick]
    offsets = np.zeros(m + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    # gather every blob's bytes at once: source index = its kind's start + position in blob
    shift = np.repeat(kind_start[pick] - offsets[:-1], lengths)
    flat = source[shift + np.arange(offsets[-1], dtype=np.int64)]
    return flat, offsets


class BlobParse:
    """``Header.parse`` of one blob (the per-file cost of a catalog lookup)."""

    def setup(self):
        flat, offsets = _catalog_blobs(1, seed=1)
        self.blob = flat.tobytes()
        self.header = Header.parse(self.blob)
        # load the numba kernels here, not in the first timed call (asv --quick times one call)
        Header.parse(self.blob).offset(1)
        Header.parse(self.blob).offsets

    def time_parse_one(self):
        Header.parse(self.blob)

    def time_parse_one_and_locate_a_frame(self):
        Header.parse(self.blob).offset(self.header.n_frames // 2)

    def time_unpack_all_offsets(self):
        # offsets are unpacked lazily: this is parse + the numba prefix-offset kernel
        Header.parse(self.blob).offsets


class BlobBatch:
    """``parse_blobs`` over a catalog column of 1,000,000 blobs (200 MB)."""

    timeout = 300
    number = 1
    repeat = (1, 5, 60.0)

    def setup(self):
        self.flat, self.offsets = _catalog_blobs(N_BLOBS)
        rumimm.parse_blobs(self.flat, self.offsets[:11])

    def time_parse_blobs_arrow_column(self):
        # the layout of an Arrow/Parquet binary column: one buffer + offsets, no copies
        rumimm.parse_blobs(self.flat, self.offsets)

    def time_parse_blobs_status_column(self):
        rumimm.parse_blobs(self.flat, self.offsets, errors="status")


class BlobBatchList:
    """``parse_blobs`` over a Python list of 1,000,000 ``bytes`` (joins them first)."""

    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup(self):
        flat, offsets = _catalog_blobs(N_BLOBS)
        self.blobs = [flat[offsets[i]:offsets[i + 1]].tobytes() for i in range(N_BLOBS)]
        rumimm.parse_blobs(self.blobs[:10])

    def time_parse_blobs_list(self):
        rumimm.parse_blobs(self.blobs)


class Index:
    """``rumimm.index(path)``: parse the IFD, check the whole profile, rebuild the blob."""

    params = (["tile", "cell"],)
    param_names = ["unit"]

    def setup_cache(self):
        arr = scene(BANDS, SIZE)
        return {unit: (f"index-{unit}.rumi", write_scene(f"index-{unit}.rumi", arr, unit=unit))
                for unit in ("tile", "cell")}

    def setup(self, files, unit):
        self.path, self.blob = files[unit]
        rumimm.validate(self.path, header=self.blob)

    def time_index(self, files, unit):
        rumimm.index(self.path)

    def time_validate(self, files, unit):
        rumimm.validate(self.path, header=self.blob)
