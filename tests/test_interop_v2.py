"""rumimm against rumi-eo 0.26.1 (spec 0.2), both directions, in the peer's own venv (``peer026``).

* The peer writes every frame layout and every dtype its NumPy writer takes; rumimm
  reads each exactly, its ``index`` equals the peer's header byte for byte, and its band
  texts, time and georeferencing equal what the peer reports.
* rumimm writes spec 0.2 files (every unit it writes, every dtype both sides hold);
  the peer's ``info`` rebuilds rumimm's header exactly and its ``read`` returns the source.

One peer process writes (or reads) everything a test module needs.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import peer026
import pytest
from affine import Affine

import rumimm

pytestmark = pytest.mark.usefixtures("_peer")

T3 = ["2026-01-01", "2026-02-01", "2026-03-01"]
GEO = {"transform": [10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0], "crs": 32633}


@pytest.fixture(scope="module")
def _peer():
    peer026.require()


def _source(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind == "c":
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return rng.normal(100, 30, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -5000), min(info.max, 5000), shape, endpoint=True).astype(dtype)


# (name, shape, dtype, pattern output, tile, time, geo)
PEER_CASES = [
    ("img_hw", (3, 70, 50), "uint16", "row col b (h w)", 32, ["2026-01-01"], GEO),
    ("img_bhw", (3, 70, 50), "int16", "row col (b h w)", 32, ["2026-01-01T10:30:00"], None),
    ("img_hwb", (4, 45, 61), "float32", "row col (h w b)", 16, [("2026-01-01", "2027-01-01")], None),
    ("img_b1", (1, 33, 20), "uint8", "row col (b h w)", 8, ["2026-05-05"], None),
    ("img_b7", (7, 40, 40), "uint16", "row col b (h w)", 16, ["2026-01-01"], None),
    ("one_frame", (2, 20, 30), "int32", "row col (b h w)", 512, ["1969-07-20"],
     {"transform": [0.5, 0.0, 10.0, 0.0, -0.5, 50.0], "crs": 4326, "pixel_is_point": True}),
] + [
    (f"cube_{u}", (3, 4, 70, 50), "uint16", out, 32, T3, None)
    for u, out in [(0, "row col b t (h w)"), (9, "row col t b (h w)"), (3, "row col (b t h w)"),
                   (4, "row col (t b h w)"), (5, "row col (b h w t)"), (6, "row col (t h w b)"),
                   (7, "row col (h w b t)"), (8, "row col (h w t b)")]
] + [
    ("cube_b1_thw", (3, 1, 40, 30), "uint16", "row col (t b h w)", 16, T3, None),
    ("cube_b1_hwt", (3, 1, 40, 30), "uint16", "row col (h w t b)", 16, T3, None),
    ("cube_b1_hw", (3, 1, 40, 30), "uint16", "row col b t (h w)", 16, T3, None),
    ("cube_t1", (1, 2, 40, 30), "uint8", "row col b t (h w)", 16, ["2026-01-01"], None),
    ("cube_seconds", (3, 2, 17, 23), "float64", "row col (t b h w)", 8, ["2026-01-01T00:00:00",
                                                                        "2026-01-01T06:00:07",
                                                                        "2026-03-01T12:00:00"], None),
    ("cube_interval", (2, 2, 17, 23), "int64", "row col t b (h w)", 8,
     [("2026-01-01", "2026-01-16"), ("2026-02-01", "2026-02-15")], None),
] + [
    (f"dtype_{d}", (2, 40, 33), d, "row col b (h w)", 16, ["2026-01-01"], None)
    for d in ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float32",
              "float64", "complex64", "complex128", "bool"]
]


@pytest.fixture(scope="module")
def peer_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("peer026")
    jobs, sources = [], {}
    for i, (name, shape, dtype, out, tile, time, geo) in enumerate(PEER_CASES):
        arr = _source(shape, dtype, i)
        left = "t b (row h) (col w)" if len(shape) == 4 else "b (row h) (col w)"
        bands = [f"band {b}, {name}" for b in range(shape[-3])]
        jobs.append({"path": d / f"{name}.rumi", "array": arr, "pattern": f"{left} -> {out}", "tile": tile,
                     "bands": bands, "time": time, "geo": geo})
        sources[name] = arr
    headers = peer026.peer_write(jobs, d)
    infos = peer026.peer_info([j["path"] for j in jobs])
    return {name: (job["path"], arr, header, info) for (name, *_), job, arr, header, info
            in zip(PEER_CASES, jobs, sources.values(), headers, infos, strict=True)}


@pytest.mark.parametrize("name", [c[0] for c in PEER_CASES])
def test_rumimm_reads_what_rumi_eo_wrote(peer_files, name):
    path, arr, header, info = peer_files[name]
    arr = arr.reshape(info["shape"])  # a cube of one step reads as (B, Y, X), as rumi-eo reads it
    assert rumimm.build_blob(path) == header == bytes.fromhex(info["header"])
    assert rumimm.validate(path, header=header, decode=True).ok
    for blob in (header, None):
        with rumimm.open(path, blob) as img:
            assert img.shape == tuple(info["shape"]) == arr.shape
            assert img.dtype == arr.dtype
            assert img.frame_unit == info["frame_layout"]
            np.testing.assert_array_equal(img[...], arr)
            key = (Ellipsis, slice(5, 33, 3), slice(2, 19))
            np.testing.assert_array_equal(img[key], arr[key])
            if arr.ndim == 4:
                np.testing.assert_array_equal(img[-1, ::-1, 3:9], arr[-1, ::-1, 3:9])
            assert list(img.descriptions) == info["bands"]
            assert [str(t) for t in img.time] == info["time"]
            assert img.time_kind == info["time_kind"]
            assert img.transform == (Affine(*info["transform"]) if info["transform"] else None)
            assert img.epsg == info["crs"]
            assert img.pixel_is_point == info["pixel_is_point"]


# -- rumimm writes, the peer reads ------------------------------------------------------------

WRITE_CASES = [
    ("w_img_tile", (3, 70, 50), "uint16", "tile", 32),
    ("w_img_cell", (3, 70, 50), "uint16", "cell", 32),
    ("w_img_b1", (1, 33, 20), "float32", "cell", 16),
    ("w_cube_tile", (3, 4, 70, 50), "uint16", "tile", 32),
    ("w_cube_cell", (3, 4, 70, 50), "int16", "cell", 32),
    ("w_cube_u3", (3, 4, 70, 50), "uint8", 3, 32),
    ("w_cube_u9", (3, 4, 70, 50), "float32", 9, 32),
    ("w_cube_b1", (3, 1, 40, 30), "uint16", "cell", 16),
    ("w_cube_t1", (1, 2, 40, 30), "uint16", "cell", 16),
] + [
    (f"w_dtype_{d}", (2, 40, 33), d, "tile", 16)
    for d in ["uint8", "int8", "uint16", "int16", "uint32", "int32", "uint64", "int64", "float16", "float32",
              "float64", "complex64", "complex128", "bool"]
]


def _time_for(t):
    return [dt.date(2026, 1, 1) + dt.timedelta(days=10 * i) for i in range(t)]


@pytest.fixture(scope="module")
def rumimm_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("rumimm02")
    out = {}
    for i, (name, shape, dtype, unit, tile) in enumerate(WRITE_CASES):
        arr = _source(shape, dtype, 100 + i)
        t = shape[0] if len(shape) == 4 else 1
        bands = [f"{name} {b}" for b in range(shape[-3])]
        kw = {"transform": (10.0, 0.0, 300000.0, 0.0, -10.0, 5000000.0), "crs": 32618} if i % 3 == 0 else {}
        blob = rumimm.write(d / f"{name}.rumi", arr, tile=tile, unit=unit, spec="0.2", descriptions=bands,
                            time=_time_for(t), **kw)
        out[name] = (d / f"{name}.rumi", arr, blob, bands, kw)
    infos = peer026.peer_info([v[0] for v in out.values()])
    reads = peer026.peer_read([{"path": v[0], "header": v[2]} for v in out.values()], d)
    windows = peer026.peer_read([{"path": v[0], "header": v[2], "window": [5, 2, 20, 15],
                                  "bands": [v[1].shape[-3] - 1, 0]} for v in out.values()], d)
    return {name: (*out[name], info, full, win)
            for name, info, full, win in zip(out, infos, reads, windows, strict=True)}


@pytest.mark.parametrize("name", [c[0] for c in WRITE_CASES])
def test_rumi_eo_reads_what_rumimm_wrote(rumimm_files, name):
    _, arr, blob, bands, kw, info, full, win = rumimm_files[name]
    t = arr.shape[0] if arr.ndim == 4 else 1
    arr = arr.reshape(info["shape"])  # a cube of one step reads as (B, Y, X)
    assert bytes.fromhex(info["header"]) == blob
    assert info["bands"] == bands
    assert info["time"] == [str(v) for v in _time_for(t)]
    assert info["crs"] == kw.get("crs")
    assert full.dtype == arr.dtype
    np.testing.assert_array_equal(full, arr)
    want = arr[..., [arr.shape[-3] - 1, 0], 5:25, 2:17]
    np.testing.assert_array_equal(win, want)


# -- spec 0.1 files converted to 0.2 ----------------------------------------------------------


@pytest.mark.slow
def test_rumi_eo_reads_01_files_rumimm_converted_to_02(tmp_path):
    cases = [("tile", "uint16"), ("cell", "uint16"), ("tile", "complex128"), ("cell", "float32"), ("tile", "int8")]
    jobs, arrays, blobs = [], [], []
    for i, (unit, dtype) in enumerate(cases):
        arr = _source((3, 37, 29), dtype, 200 + i)
        rumimm.write(tmp_path / f"v1_{i}.rumi", arr, tile=16, unit=unit, transform=(1, 0, 0, 0, -1, 0), crs=3857)
        blobs.append(rumimm.convert(tmp_path / f"v1_{i}.rumi", tmp_path / f"v2_{i}.rumi", descriptions=["r", "g", "b"],
                                    time=["2026-01-01"]))
        jobs.append({"path": tmp_path / f"v2_{i}.rumi"})
        arrays.append(arr)
    infos = peer026.peer_info([j["path"] for j in jobs])
    reads = peer026.peer_read(jobs, tmp_path)
    for arr, blob, info, got in zip(arrays, blobs, infos, reads, strict=True):
        assert bytes.fromhex(info["header"]) == blob
        assert info["crs"] == 3857 and info["bands"] == ["r", "g", "b"]
        np.testing.assert_array_equal(got, arr)
