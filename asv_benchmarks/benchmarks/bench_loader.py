"""Training loaders and catalogs: batches of random chips, and a million-row catalog.

``ChipBatch`` reads one batch of 16 random 256 x 256 all-band chips from 8 files of the
synthetic scene, three ways (the dataset's ``__getitems__``, ``read_batch`` over images
kept open, and opening each chip's file with its blob), on 1 and 2 threads, frame cache
off.  ``CatalogScale`` loads a 1,000,000-row catalog from Parquet and checks every blob
(the goal is under a second on 2 cores, everything included), and selects about 1,000
rows by bounding box and opens them.  ``asv_benchmarks/compare/loaders.py`` puts the
chip numbers side by side with rumi-eo, GDAL and zarr.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ._common import TRANSFORM, need, rumimm, scene, write_scene

N_FILES = 8
CHIP = 256
BATCH = 16
ROWS = 1_000_000
GRID = 1000  # the synthetic catalog's footprints: a 1000 x 1000 raster of 20.48 km squares


def _write_files(n: int) -> list[tuple[str, bytes]]:
    out = []
    for i in range(n):
        path = os.path.abspath(f"loader{i}.rumi")
        out.append((path, write_scene(path, scene(seed=i))))
    return out


class ChipBatch:
    params = (["dataset", "read_batch", "open_per_chip"], [1, 2])
    param_names = ["path", "threads"]
    timeout = 300

    def setup_cache(self):
        need("ChipDataset")
        files = _write_files(N_FILES)
        return [p for p, _ in files], [b for _, b in files]

    def setup(self, cache, path, threads):
        need("ChipDataset")
        paths, blobs = cache
        rumimm.set_num_threads(threads)
        self.ds = rumimm.ChipDataset(paths, CHIP, headers=blobs, n=BATCH * 64, seed=0, cache_bytes=0)
        self.paths, self.blobs = paths, blobs
        self.images = [rumimm.open(p, header=b, cache_bytes=0) for p, b in zip(paths, blobs, strict=True)]
        self.batch = 0
        self.ds.__getitems__(range(BATCH))  # JIT and first-touch outside the timing

    def teardown(self, cache, path, threads):
        self.ds.close()
        for img in self.images:
            img.close()

    def _next(self) -> np.ndarray:
        """The next batch's chip rows (fresh positions on every call, cycling through 64 batches)."""
        self.batch = (self.batch + 1) % 64
        return np.arange(self.batch * BATCH, (self.batch + 1) * BATCH)

    def time_batch(self, cache, path, threads):
        idx = self._next()
        if path == "dataset":
            self.ds.__getitems__(idx)
            return
        rows = self.ds.chips[idx]
        if path == "read_batch":
            rumimm.read_batch([self.images[f] for f in rows[:, 0]], rows[:, 1:], size=(CHIP, CHIP))
            return
        out = np.empty((BATCH, 4, CHIP, CHIP), np.uint16)
        for i, (f, y, x) in enumerate(rows):
            with rumimm.open(self.paths[f], header=self.blobs[f], cache_bytes=0) as img:
                img.read(window=((y, y + CHIP), (x, x + CHIP)), out=out[i])


def _random_blobs(blob: bytes, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` distinct canonical blobs shaped like ``blob`` (same grid and count_bits, random
    residuals, LSB-first as the spec packs them): (data, int32 offsets) of a binary column."""
    from rumimm.format.blob import HEADER_SIZE, Header

    h = Header.parse(blob)
    m, bits = h.n_frames, h.count_bits
    size = len(blob)
    out = np.empty((n, size), np.uint8)
    out[:, :HEADER_SIZE] = np.frombuffer(blob[:HEADER_SIZE], np.uint8)
    rng = np.random.default_rng(seed)
    shifts = np.arange(bits, dtype=np.uint32)
    for a in range(0, n, 1 << 16):
        b = min(n, a + (1 << 16))
        r = rng.integers(0, 1 << bits, (b - a, m), dtype=np.uint32)
        r[:, 0] = 0                   # canonical: the smallest count is count_min
        r[:, 1] = (1 << bits) - 1     # and the largest residual needs all count_bits
        bitplanes = ((r[:, :, None] >> shifts) & 1).astype(np.uint8).reshape(b - a, m * bits)
        out[a:b, HEADER_SIZE:] = np.packbits(bitplanes, axis=1, bitorder="little")
    return out.reshape(-1), np.arange(n + 1, dtype=np.int32) * size


def synthetic_catalog(real, n: int, keep: np.ndarray):
    """An ``n``-row catalog table, footprints on a GRID x GRID raster of 20.48 km squares (UTM 33N).

    Rows ``keep`` point at the ``real`` catalog's files with their blobs (they can be opened);
    every other row has its own path and a distinct random blob of the same shape, so
    neither column compresses better than a real catalog's would.
    """
    import pyarrow as pa

    pick = np.arange(n) % real.num_rows
    table = real.take(pa.array(pick))
    data, offsets = _random_blobs(real.column("blob")[0].as_py(), n)
    blobs = np.array(table.column("blob").to_pylist(), dtype=object)
    fake = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]).to_numpy(False)
    real_rows = np.zeros(n, bool)
    real_rows[keep] = True
    blobs = np.where(real_rows, blobs, fake)
    paths = np.where(real_rows, np.array(table.column("path").to_pylist(), dtype=object),
                     np.char.add(np.char.add("scenes/s", np.char.zfill(np.arange(n).astype(str), 7)), ".rumi"))
    size = 20480.0
    col, row = np.arange(n) % GRID, np.arange(n) // GRID
    left = TRANSFORM[2] + col * size
    top = TRANSFORM[5] - row * size
    right, bottom = left + size, top - size
    ring = np.stack([np.stack(p, 1) for p in ((left, top), (left, bottom), (right, bottom), (right, top),
                                                (left, top))], 1)  # (n, 5, 2) counter-clockwise
    head = np.frombuffer(np.array([1], "<u1").tobytes() + np.array([3, 1, 5], "<u4").tobytes(), np.uint8)
    wkb = np.concatenate([np.broadcast_to(head, (n, head.size)),
                          np.ascontiguousarray(ring, "<f8").reshape(n, 10).view(np.uint8)], 1)
    geometry = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * 93),
                                                      pa.py_buffer(np.ascontiguousarray(wkb))])
    bbox = pa.StructArray.from_arrays([pa.array(v) for v in (left, bottom, right, top)],
                                      names=["xmin", "ymin", "xmax", "ymax"])
    transform = pa.FixedSizeListArray.from_arrays(
        pa.array(np.stack([np.full(n, 10.0), np.zeros(n), left, np.zeros(n), np.full(n, -10.0), top], 1).ravel()), 6)
    for name, values in (("path", pa.array(paths.tolist(), pa.string())),
                         ("blob", pa.array(blobs.tolist(), pa.binary())), ("transform", transform),
                         ("left", pa.array(left)), ("bottom", pa.array(bottom)),
                         ("right", pa.array(right)), ("top", pa.array(top)), ("bbox", bbox), ("geometry", geometry)):
        table = table.set_column(table.column_names.index(name), name, values)
    geo = json.loads(real.schema.metadata[b"geo"])
    geo["columns"]["geometry"]["bbox"] = [float(left.min()), float(bottom.min()), float(right.max()), float(top.max())]
    return table.replace_schema_metadata({b"geo": json.dumps(geo).encode()})


def _box_rows() -> tuple[tuple[float, float, float, float], np.ndarray]:
    """A bbox meeting exactly 32 x 32 = 1,024 footprints in the middle of the grid, and their rows."""
    size = 20480.0
    x0 = TRANSFORM[2] + 484 * size + 1.0
    y1 = TRANSFORM[5] - 484 * size - 1.0
    rows = (np.arange(484, 516)[:, None] * GRID + np.arange(484, 516)[None, :]).ravel()
    return (x0, y1 - 32 * size + 2.0, x0 + 32 * size - 2.0, y1), rows


class CatalogScale:
    timeout = 600
    number = 1
    repeat = 5

    def setup_cache(self):
        need("catalog", "read_catalog", "write_catalog")
        files = _write_files(4)
        real = rumimm.catalog([p for p, _ in files], blobs=[b for _, b in files])
        path = os.path.abspath("catalog-1m.parquet")
        rumimm.write_catalog(synthetic_catalog(real, ROWS, _box_rows()[1]), path, row_group_size=1 << 16)
        return path

    def setup(self, path):
        need("catalog", "read_catalog", "write_catalog")
        rumimm.parse_blobs([rumimm.read_catalog(path).column("blob")[0].as_py()])  # JIT outside the timing
        self.box = _box_rows()[0]

    def time_load_and_parse_every_blob(self, path):
        rumimm.parse_blobs(rumimm.read_catalog(path).column("blob"))

    def time_load_blobs_only_and_parse(self, path):
        rumimm.parse_blobs(rumimm.read_catalog(path, columns=["blob"]).column("blob"))

    def time_bbox_select_and_open_1000(self, path):
        with rumimm.ImageCollection.from_catalog(rumimm.read_catalog(path, bbox=self.box)) as coll:
            assert len(coll) == 1024
