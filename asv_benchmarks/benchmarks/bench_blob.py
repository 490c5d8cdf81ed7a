"""Header blobs: parse one, parse a catalog column of 1,000,000, rebuild one from a file."""

from __future__ import annotations

import os

import numpy as np

import rumimm

from ._common import BANDS, SIZE, need, scene, write_scene

N_BLOBS = 1_000_000
SCALE = 8  # catalog shapes are written at 1/8 scale: same frame counts, a fraction of the pixels


def _catalog_kinds(seed: int = 0) -> list[bytes]:
    """32 real blobs of a training-chip catalog's shapes, written with ``rumimm.write``.

    Shapes: 1..12 bands, 256..2560 pixels a side, 256- or 512-pixel tiles, tile and
    cell frames, each written at 1/8 scale (32/64-pixel tiles) so the frame count and
    the blob layout are those of the full-size file; blobs are 30..1600 bytes.
    Only public API, so the catalog builds on every commit that has ``write``.
    """
    rng = np.random.default_rng(seed)
    kinds = []
    for i in range(32):
        b = int(rng.integers(1, 13))
        y, x = (int(v) // SCALE for v in rng.integers(256, 2561, size=2))
        tile = int(rng.choice([256, 512])) // SCALE
        unit = "cell" if rng.integers(0, 2) else "tile"
        arr = scene(b, y, x, seed=seed + i)
        kinds.append(rumimm.write(f"kind-{i}.rumi", arr, tile=tile, unit=unit))
    return kinds


def _catalog_blobs(kinds: list[bytes], m: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``m`` blobs drawn from ``kinds`` as an Arrow-style (flat uint8, int64 offsets) column."""
    rng = np.random.default_rng(seed)
    source = np.frombuffer(b"".join(kinds), np.uint8)
    kind_len = np.array([len(k) for k in kinds], np.int64)
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

    def setup_cache(self):
        return _catalog_kinds()

    def setup(self, kinds):
        need("Header")
        Header = rumimm.Header
        self.blob = sorted(kinds, key=len)[len(kinds) // 2]  # a median-sized blob
        self.header = Header.parse(self.blob)
        # load the numba kernels here, not in the first timed call (asv --quick times one call)
        Header.parse(self.blob).offset(1)
        Header.parse(self.blob).frame_offsets

    def time_parse_one(self, kinds):
        rumimm.Header.parse(self.blob)

    def time_parse_one_and_locate_a_frame(self, kinds):
        rumimm.Header.parse(self.blob).offset(self.header.n_frames // 2)

    def time_unpack_all_offsets(self, kinds):
        # offsets are unpacked lazily: this is parse + the numba prefix-offset kernel
        rumimm.Header.parse(self.blob).frame_offsets


class BlobBatch:
    """``parse_blobs`` over a catalog column of 1,000,000 blobs (about 160 MB)."""

    timeout = 300
    number = 1
    repeat = (1, 5, 60.0)

    def setup_cache(self):
        # built once and saved: asv runs setup before every sample, and the gather takes seconds
        flat, offsets = _catalog_blobs(_catalog_kinds(), N_BLOBS)
        np.save("catalog-flat.npy", flat)
        np.save("catalog-offsets.npy", offsets)
        return {"flat": os.path.abspath("catalog-flat.npy"), "offsets": os.path.abspath("catalog-offsets.npy")}

    def setup(self, files):
        need("parse_blobs")
        self.flat, self.offsets = np.load(files["flat"]), np.load(files["offsets"])
        rumimm.parse_blobs(self.flat, self.offsets[:11])

    def time_parse_blobs_arrow_column(self, files):
        # the layout of an Arrow/Parquet binary column: one buffer + offsets, no copies
        rumimm.parse_blobs(self.flat, self.offsets)

    def time_parse_blobs_status_column(self, files):
        rumimm.parse_blobs(self.flat, self.offsets, errors="status")


class BlobBatchList:
    """``parse_blobs`` over a Python list of 1,000,000 ``bytes`` (joins them first)."""

    timeout = 300
    number = 1
    repeat = (1, 3, 60.0)

    def setup_cache(self):
        return _catalog_kinds()

    def setup(self, kinds):
        need("parse_blobs")
        flat, offsets = _catalog_blobs(kinds, N_BLOBS)
        self.blobs = [flat[offsets[i]:offsets[i + 1]].tobytes() for i in range(N_BLOBS)]
        rumimm.parse_blobs(self.blobs[:10])

    def time_parse_blobs_list(self, kinds):
        rumimm.parse_blobs(self.blobs)


class Index:
    """``rumimm.build_blob(path)``: parse the IFD, check the whole profile, rebuild the blob."""

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
        rumimm.build_blob(self.path)

    def time_validate(self, files, unit):
        rumimm.validate(self.path, header=self.blob)
