"""Deterministic seed inputs of every fuzz target, built from the test fixtures and rumimm's writer.

Nothing here is stored as an opaque binary: the seeds are the rumi-eo fixtures of
``tests/data`` (spec 0.1) and ``tests/data/v2`` (spec 0.2), small files rumimm writes of
every layout and more dtypes, the blobs, frames and trailers cut out of them, small
GeoTIFFs GDAL writes, sidecars, catalog rows and scripted server answers, plus the
known-bad cases of ``tests/test_hostile*.py`` (cut files, extreme IFD values, hostile
blobs).  ``seeds(name)`` returns ``[(label, bytes)]`` in a fixed order;
``python -m tests.fuzz.seeds DIR`` writes them as ``DIR/<target>/<label>``.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import struct
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

TESTS = Path(__file__).resolve().parent.parent
DATA = TESTS / "data"
DATA2 = DATA / "v2"
HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"  # inputs the fuzzer found that add coverage (kept, minimised by -merge)
REGRESSIONS = HERE / "regressions"  # inputs that once broke an invariant (each fixed)


@functools.cache
def _workdir() -> str:
    given = os.environ.get("RUMIMM_FUZZ_SCRATCH")  # under the fuzz runner: its folder, which it removes
    if given:
        d = os.path.join(given, "seeds")
        os.makedirs(d, exist_ok=True)
        return d
    d = tempfile.mkdtemp(prefix="rumimm-seeds-")
    atexit.register(shutil.rmtree, d, True)
    return d


@functools.cache
def files() -> list[tuple[str, bytes, bytes]]:
    """(label, file bytes, blob) of small valid files: both specs, every layout, many dtypes."""
    import rumimm

    out = []
    for p in sorted(DATA.glob("*.rumi")):
        out.append((f"v1-{p.stem}", p.read_bytes(), p.with_suffix(".blob").read_bytes()))
    for p in sorted(DATA2.glob("*.rumi")):
        out.append((f"v2-{p.stem}", p.read_bytes(), p.with_suffix(".header").read_bytes()))
    d = _workdir()
    rng = np.random.default_rng(24)
    made = [  # name, dtype, shape, tile, unit, spec
        ("u8-tile", "uint8", (1, 9, 13), 8, "tile", "0.1"),
        ("i8-cell", "int8", (2, 7, 10), 4, "cell", "0.1"),
        ("u32-tile", "uint32", (2, 6, 5), 4, "tile", "0.1"),
        ("f64-cell", "float64", (1, 5, 9), 4, "cell", "0.1"),
        ("u4-tile", "uint4", (1, 8, 9), 8, "tile", "0.1"),
        ("i2-tile", "int2", (1, 6, 8), 4, "tile", "0.1"),
        ("bf16-tile", "bfloat16", (1, 5, 6), 4, "tile", "0.1"),
        ("c64-tile", "complex64", (1, 4, 5), 4, "tile", "0.1"),
        ("f16-cell-v2", "float16", (2, 6, 7), 4, "cell", "0.2"),
        ("u16-tile-v2", "uint16", (3, 5, 9), 4, "tile", "0.2"),
    ]
    for name, dt, shape, tile, unit, spec in made:
        dtype = rumimm.DTYPES[dt] if hasattr(rumimm, "DTYPES") else np.dtype(dt)
        if dtype.kind in "iu" and dtype.itemsize >= 1 and dt not in ("uint4", "int2"):
            a = rng.integers(np.iinfo(dtype).min // 2, np.iinfo(dtype).max // 2, shape, endpoint=True).astype(dtype)
        elif dt in ("uint4", "int2"):
            a = rng.integers(0, 2, shape).astype(dtype)
        elif dt == "complex64":
            a = (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
        else:
            a = rng.normal(size=shape).astype(np.float32).astype(dtype)
        path = os.path.join(d, f"{name}.rumi")
        kw = {}
        if spec == "0.2":
            kw = {"spec": "0.2", "time": ["2024-01-01"], "descriptions": [f"b{i}" for i in range(shape[0])]}
        blob = rumimm.write(path, a, tile=tile, unit=unit, threads=1, **kw)
        out.append((f"{'v2' if spec == '0.2' else 'v1'}-made-{name}", Path(path).read_bytes(), bytes(blob)))
    return out


def _damaged(data: bytes, base: int) -> list[tuple[str, bytes]]:
    """The known-bad kinds of tests/test_hostile*.py, deterministically: cuts, extreme IFD values, flips."""
    out = [("cut-header", data[:16]), ("cut-ifd", data[: min(base, len(data)) - 7]), ("cut-frames", data[:-5])]
    for i, (at, fmt, v) in enumerate([(2, "<H", 0xFFFF), (4, "<Q", 2**64 - 1), (12, "<I", 2**32 - 1),
                                      (12, "<Q", 2**63), (4, "<Q", 0)]):
        b = bytearray(data)
        off = 24 + 20 * (i * 2) + at
        if off + struct.calcsize(fmt) <= len(b):
            struct.pack_into(fmt, b, off, v)
            out.append((f"extreme-{i}", bytes(b)))
    b = bytearray(data)
    b[base] ^= 0xFF  # frame 0's magic
    out.append(("bad-magic", bytes(b)))
    return out


def _base(blob: bytes) -> int:
    from rumimm.format.v2 import parse_header

    return parse_header(blob).base_frame_offset


def _hostile_blobs() -> list[tuple[str, bytes]]:
    from rumimm.format.blob import MAGIC

    out = []
    for i, (w, ln, tw, tl, bands, bits) in enumerate([(2**32 - 1, 2**32 - 1, 1, 1, 65535, 0), (1, 1, 0, 0, 1, 0),
                                                      (300, 7, 8, 8, 3, 33), (2**16, 2**20, 65535, 1, 5, 255)]):
        out.append((f"hostile-{i}", struct.pack("<IHIIHHHBBBIB", MAGIC, 1, w, ln, tw, tl, bands, 16, 1, 1, 100, bits)))
    out.append(("v2-hostile", struct.pack("<IHIIIHHHBBBIB", 0x45564F4C, 1, 2**32 - 1, 1, 1, 1, 1, 1, 16, 1, 9,
                                          2**32 - 1, 7)))
    return out


def _header() -> list[tuple[str, bytes]]:
    return [(label, blob) for label, _, blob in files()] + _hostile_blobs()


def _trailer() -> list[tuple[str, bytes]]:
    from rumimm.format.v2 import Header2

    from .targets import _TIMES

    out = []
    for label, data, blob in files():
        if not label.startswith("v2-"):
            continue
        h = Header2.parse(blob)
        bands = h.shape[-3]
        if bands >= 10 or h.time_count not in _TIMES:
            continue
        out.append((label, bytes([bands, _TIMES.index(h.time_count)]) + data[h.frames_end:]))
    out.append(("truncated", bytes([2, 3]) + b"TAIL\x01\x00"))
    return out


def _frame() -> list[tuple[str, bytes]]:
    from rumimm.format.dtypes import ENCODINGS
    from rumimm.format.v2 import parse_header

    encs = sorted(ENCODINGS.values(), key=lambda e: (e.sample_format, e.bits_per_sample))
    keys = [(e.sample_format, e.bits_per_sample) for e in encs]
    out = []
    for label, data, blob in files():
        h = parse_header(blob)
        enc = h.encoding
        key = (enc.sample_format, enc.bits_per_sample)
        if key not in keys:
            continue
        for k in sorted({0, h.n_frames - 1}):
            n = h.grid.frame_samples(k) if hasattr(h.grid, "frame_samples") else None
            if n is None or not 1 <= n <= 1 << 16:
                continue
            o, c = int(h.offset(k)), int(h.byte_count(k))
            flags = (2 if h.spec == "0.2" else 0) | (1 if h.spec == "0.2" and enc.itemsize == 16 else 0)
            out.append((f"{label}-{k}", bytes([keys.index(key)]) + (n - 1).to_bytes(2, "little") + bytes([flags])
                        + data[o:o + c]))
    return out


def _file_seeds(damaged: bool) -> list[tuple[str, bytes]]:
    out = []
    for label, data, blob in files():
        out.append((label, data))
        if damaged and label in ("v1-u16_tile_b4", "v1-u8_geo_utm33n", "v2-cube_u0", "v2-img_b6", "v1-made-u4-tile"):
            out += [(f"{label}-{k}", d) for k, d in _damaged(data, _base(blob))]
    return out


def _geotiff() -> list[tuple[str, bytes]]:
    with warnings.catch_warnings():  # rasterio's about a file without a transform, and about its own Affine use
        warnings.simplefilter("ignore")
        return _geotiff_files()


def _geotiff_files() -> list[tuple[str, bytes]]:
    import rasterio
    from rasterio.transform import from_origin

    d = _workdir()
    out = []
    rng = np.random.default_rng(5)
    for i, (dt, count, kw) in enumerate([("uint8", 1, {}), ("uint16", 3, {"tiled": True, "blockxsize": 16,
                                                                             "blockysize": 16, "compress": "deflate"}),
                                         ("int16", 2, {"compress": "lzw", "predictor": 2}),
                                         ("float32", 1, {"nodata": -9999.0}),
                                         ("float64", 1, {"compress": "deflate", "predictor": 3})]):
        path = os.path.join(d, f"g{i}.tif")
        a = (rng.normal(size=(count, 20, 23)) * 50).astype(dt) if dt.startswith("float") else \
            rng.integers(0, 200, (count, 20, 23)).astype(dt)
        crs = [None, "EPSG:32633", "EPSG:4326", "EPSG:3857", None][i]
        with rasterio.open(path, "w", driver="GTiff", width=23, height=20, count=count, dtype=dt,
                           crs=crs, transform=from_origin(500000.0, 4100000.0, 10.0, 10.0) if crs else None,
                           **kw) as ds:
            ds.write(a)
        out.append((f"gtiff-{i}-{dt}", Path(path).read_bytes()))
    return out


def _catalog() -> list[tuple[str, bytes]]:
    import rumimm

    from .targets import _catalog_files

    cat = _catalog_files()
    b1, b2 = cat[0][1], cat[1][1]
    blob = next(b for label, _, b in files() if label == "v1-u16_tile_b4")

    def row(kind, blob, spec):
        return bytes([kind]) + len(blob).to_bytes(2, "little") + blob + bytes([spec])

    assert rumimm.parse_header(b1) is not None
    return [("one-row", bytes([0, 0]) + row(0, b1, 0)),
            ("two-specs", bytes([1, 1]) + row(0, b1, 1) + row(1, b2, 2)),
            ("foreign-blob", bytes([0, 0]) + row(0, blob, 0)),
            ("missing-path", bytes([0, 0]) + row(2, b1, 0)),
            ("empty-path", bytes([0, 0]) + row(3, b2, 0)),
            ("bad-blob", bytes([0, 0]) + row(0, b1[:20], 0)),
            ("uri-refused", bytes([1, 0]) + row(0x80, b1, 0) + row(0x84, b2, 0)),
            ("uri-malformed", bytes([1, 1]) + row(0x88, b1, 1) + row(0x98, b2, 2))]


def _pam() -> list[tuple[str, bytes]]:
    from rumimm.format.pam import Metadata, build_pam

    metas = [
        (1, Metadata.from_args(1, nodata=0, descriptions=["red"], colorinterp=["red"])),
        (3, Metadata.from_args(3, nodata=-9999.5, scales=[0.1, None, 2.0], offsets=[1.0, None, -3.0],
                               units=["m", None, "K"], tags={"AREA_OR_POINT": "Area", "x": "y"})),
        (2, Metadata.from_args(2, colormaps={1: {0: (0, 0, 0, 255), 1: (255, 0, 0, 255)}},
                               band_tags={2: {"k": "v"}})),
        (1, Metadata.from_args(1, nodata=float("nan"))),
    ]
    out = [(f"built-{i}", bytes([count - 1]) + build_pam(m, b"blob")) for i, (count, m) in enumerate(metas)]
    out += [
        ("gdal-style", b"\x02<PAMDataset><Metadata><MDI key=\"AREA_OR_POINT\">Point</MDI></Metadata>"
                       b"<PAMRasterBand band=\"2\"><NoDataValue>nan</NoDataValue><Description>b</Description>"
                       b"<ColorInterp>Gray</ColorInterp></PAMRasterBand></PAMDataset>"),
        ("dtd", b"\x00<?xml version=\"1.0\"?><!DOCTYPE x [<!ENTITY a \"aaaa\">]><PAMDataset>&a;</PAMDataset>"),
        ("utf16", b"\x00" + "<?xml version=\"1.0\" encoding=\"UTF-16\"?><PAMDataset/>".encode("utf-16")),
        ("band-too-high", b"\x00<PAMDataset><PAMRasterBand band=\"9\"/></PAMDataset>"),
        ("numbers", b"\x02<PAMDataset><PAMRasterBand band=\" 2_0\"><NoDataValue>1_000</NoDataValue>"
                    b"<Description>d</Description><Scale>0x1p3</Scale></PAMRasterBand>"
                    b"<PAMRasterBand band=\"1\"><NoDataValue>1e20</NoDataValue></PAMRasterBand></PAMDataset>"),
        ("digits", "\x02<PAMDataset><PAMRasterBand band=\"\u00b2\"><NoDataValue>\u0661</NoDataValue>"
                   "</PAMRasterBand></PAMDataset>".encode()),
    ]
    return out


def _crs() -> list[tuple[str, bytes]]:
    import pyproj

    texts = ["EPSG:32633", "+proj=utm +zone=33 +ellps=WGS84 +units=m +no_defs", pyproj.CRS(3035).to_wkt(),
             pyproj.CRS(4326).to_json(), "+init=epsg:4326", "+proj=pipeline +step +proj=utm +zone=33",
             "+proj=longlat +nadgrids=@null", "+proj=longlat +nadgrids=http://127.0.0.1:9/g.tif", "GEOGCS[",
             pyproj.CRS(32633).to_wkt("WKT1_GDAL")]
    return [(f"crs-{i}", bytes([i % 2]) + t.encode()) for i, t in enumerate(texts)]


def _stac() -> list[tuple[str, bytes]]:
    import datetime as dt
    import json

    from rumimm.stac import item

    when = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
    out = []
    for name in ("u8_geo_utm33n", "f32_geo_wgs84_point"):
        d = item(DATA / f"{name}.rumi", datetime=when).to_dict(include_self_link=False, transform_hrefs=False)
        for asset in d["assets"].values():  # a signed URL: its query string must never reach a message
            asset["href"] = f"https://127.0.0.1:9/{name}.rumi?X-Amz-Signature=SECRET"
        text = json.dumps(d)
        out += [(f"{name}", text.encode()), (f"{name}-cut", text[: len(text) // 2].encode())]
    out.append(("two-items", json.dumps([json.loads(out[0][1]), json.loads(out[2][1])]).encode()))
    return out


def _remote() -> list[tuple[str, bytes]]:
    def ops(flags, *items):
        body = bytes([flags, len(items) - 1])
        for kind, ranges in items:
            body += bytes([kind, len(ranges) - 1])
            for o, n in ranges:
                body += o.to_bytes(2, "little") + n.to_bytes(2, "little")
        return body

    honest = bytes(6)
    plain = ops(0, (1, [(0, 100), (3000, 1000)]))
    return [
        ("honest", plain + honest * 2),
        ("head-then-read", ops(0, (0, [(0, 1)]), (2, [(4000, 500)])) + honest * 3),
        ("sized-pinned", ops(12, (1, [(10, 10), (20, 30), (4000, 96)]))),
        ("shifted-range", plain + bytes([0, 1, 0, 0, 0, 5])),
        ("short-body", plain + bytes([0, 0, 0, 1, 0, 2])),
        ("long-length", plain + bytes([0, 0, 1, 0, 0, 3])),
        ("changed-etag", plain + honest + bytes([0, 0, 0, 0, 2, 0])),
        ("whole-object", plain + bytes([4, 0, 0, 0, 0, 0])),
        ("not-found", plain + bytes([5, 0, 0, 0, 0, 0])),
        ("dropped", plain + bytes([15, 0, 0, 0, 0, 0])),
        ("lying-bytes", plain + bytes([0, 0, 0, 3, 0, 9])),
    ]


def _remote_read() -> list[tuple[str, bytes]]:
    honest = bytes(6)
    out = []
    for f in range(3):  # flags (16: with the blob, 32: the whole image, 4 and 8: coalescing), file, answers
        for blob in (0, 16):
            out.append((f"file{f}-blob{blob}-whole", bytes([blob | 32, f]) + honest))
            out.append((f"file{f}-blob{blob}-window", bytes([blob | 4, f]) + honest))
    out += [("cut-answer", bytes([32, 0]) + bytes([0, 0, 0, 1, 0, 2])),
            ("changed-etag", bytes([32, 1]) + honest + bytes([0, 0, 0, 0, 2, 0])),
            ("not-found", bytes([16, 1]) + bytes([5, 0, 0, 0, 0, 0])),
            ("lying-bytes", bytes([16 | 32, 0]) + bytes([0, 0, 0, 3, 0, 9])),
            ("auto-coalesce-sidecar", bytes([12 | 64, 2]) + honest)]
    return out


_MAKERS = {
    "header": _header,
    "trailer": _trailer,
    "frame": _frame,
    "ifd": lambda: _file_seeds(True),
    "open_read": lambda: _file_seeds(True),
    "geotiff": _geotiff,
    "catalog": _catalog,
    "pam": _pam,
    "crs": _crs,
    "stac": _stac,
    "remote": _remote,
    "remote_read": _remote_read,
}


def seeds(name: str) -> list[tuple[str, bytes]]:
    """Target ``name``'s seeds: ``[(label, input)]``, the same on every run."""
    return _MAKERS[name]()


def kept(name: str) -> list[tuple[str, bytes]]:
    """Inputs kept in the repository for ``name``: the grown corpus and the regressions."""
    out = []
    for folder in (CORPUS / name, REGRESSIONS / name):
        if folder.is_dir():
            out += [(f"{folder.name}/{p.name}", p.read_bytes()) for p in sorted(folder.iterdir()) if p.is_file()]
    return out


def write_seeds(out: str | os.PathLike, names=None) -> dict[str, int]:
    """Write each target's seeds as ``out/<target>/<label>``; returns how many per target."""
    counts = {}
    for name in names or _MAKERS:
        folder = Path(out) / name
        folder.mkdir(parents=True, exist_ok=True)
        items = seeds(name)
        for label, data in items:
            (folder / label).write_bytes(data)
        counts[name] = len(items)
    return counts


if __name__ == "__main__":
    print(write_seeds(sys.argv[1], sys.argv[2:] or None))
