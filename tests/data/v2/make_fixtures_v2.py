"""Write the spec 0.2 fixtures with rumi-eo 0.26.1 (run with that peer's interpreter).

    <rumi-eo 0.26.1 python> tests/data/v2/make_fixtures_v2.py tests/data/v2

Each fixture is ``<name>.rumi`` plus the header ``rumi.write`` returned (``<name>.header``);
``manifest.json`` records the parameters and what ``rumi.info(source=...)`` reported.  The
source arrays are rebuilt exactly by :func:`source` (integer arithmetic, no RNG), so this
file is also imported by the tests (it imports rumi and geozl only when run).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

#: name -> (array kind, shape, dtype, frame pattern output side, tile, bands, time, georef)
TIME3 = ["2026-01-01", "2026-02-01", "2026-03-01"]
GEO = {"transform": (10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0), "crs": 32633}
FIXTURES = {
    "img_u0": ((3, 20, 18), "uint16", "row col b (h w)", 8, ["B2, Blue", "B3, Green", "B4, Red"], ["2026-01-01"], GEO),
    "img_u1": ((3, 20, 18), "uint16", "row col (b h w)", 8, ["a", "b", "c"], ["2026-01-01"], None),
    "img_u2": ((3, 20, 18), "int16", "row col (h w b)", 8, ["a", "b", "c"], ["2026-01-01T10:30:00"], None),
    "img_b1": ((1, 13, 11), "float32", "row col b (h w)", 8, ["only"], [("2026-01-01", "2027-01-01")], None),
    "img_b6": ((6, 9, 10), "uint8", "row col b (h w)", 8, [f"band {i}" for i in range(6)], ["2026-01-01"], None),
    "cube_u0": ((3, 2, 20, 18), "uint16", "row col b t (h w)", 8, ["x", "y"], TIME3, None),
    "cube_u9": ((3, 2, 20, 18), "uint16", "row col t b (h w)", 8, ["x", "y"], TIME3, None),
    "cube_u3": ((3, 2, 20, 18), "uint16", "row col (b t h w)", 8, ["x", "y"], TIME3, None),
    "cube_u4": ((3, 2, 20, 18), "uint16", "row col (t b h w)", 8, ["x", "y"], TIME3, None),
    "cube_u5": ((3, 2, 20, 18), "uint16", "row col (b h w t)", 8, ["x", "y"], TIME3, None),
    "cube_u6": ((3, 2, 20, 18), "uint16", "row col (t h w b)", 8, ["x", "y"], TIME3, None),
    "cube_u7": ((3, 2, 20, 18), "uint16", "row col (h w b t)", 8, ["x", "y"], TIME3, None),
    "cube_u8": ((3, 2, 20, 18), "uint16", "row col (h w t b)", 8, ["x", "y"], TIME3, None),
    "cube_b1_u1": ((3, 1, 20, 18), "uint16", "row col (t b h w)", 8, ["x"], TIME3, None),
    "cube_b1_u2": ((3, 1, 20, 18), "uint16", "row col (h w t b)", 8, ["x"], TIME3, None),
    "cube_b1_u0": ((3, 1, 20, 18), "uint16", "row col b t (h w)", 8, ["x"], TIME3, None),
    "cube_seconds": ((3, 2, 9, 7), "float64", "row col (t b h w)", 4, ["x", "y"],
                     ["2026-01-01T00:00:00", "2026-01-01T06:00:07", "2026-03-01T12:00:00"], None),
    "cube_interval": ((2, 2, 9, 7), "int32", "row col b t (h w)", 4, ["x", "y"],
                      [("2026-01-01", "2026-01-16"), ("2026-02-01", "2026-02-15")], None),
    "dtype_bool": ((2, 9, 7), "bool", "row col b (h w)", 4, ["a", "b"], ["2026-01-01"], None),
    "dtype_complex64": ((2, 9, 7), "complex64", "row col b (h w)", 4, ["a", "b"], ["2026-01-01"], None),
    "dtype_complex128": ((2, 9, 7), "complex128", "row col (b h w)", 4, ["a", "b"], ["2026-01-01"], None),
    "dtype_uint64": ((2, 9, 7), "uint64", "row col b (h w)", 4, ["a", "b"], ["2026-01-01"], None),
    "one_frame": ((2, 5, 6), "int8", "row col (b h w)", 512, ["a", "b"], ["1969-07-20"],
                  {"transform": (0.5, 0.0, 10.0, 0.0, -0.5, 50.0), "crs": 4326, "pixel_is_point": True}),
}


def source(name: str) -> np.ndarray:
    """The fixture's array, (B, Y, X) or (T, B, Y, X), from integer arithmetic only."""
    shape, dtype = FIXTURES[name][0], np.dtype(FIXTURES[name][1])
    idx = np.indices(shape).astype(np.int64)
    v = sum((k + 3) * (7 ** k) * idx[k] for k in range(len(shape))) + idx[-1] * idx[-2]
    if dtype == np.bool_:
        return ((v % 3) == 0)
    if dtype.kind == "c":
        return (v % 97).astype(dtype) + 1j * (v % 13).astype(dtype)
    if dtype.kind == "f":
        return ((v % 1000) / 4).astype(dtype)
    return (v % 100).astype(dtype)


def _pattern(name: str) -> str:
    shape, out = FIXTURES[name][0], FIXTURES[name][2]
    left = "t b (row h) (col w)" if len(shape) == 4 else "b (row h) (col w)"
    return f"{left} -> {out}"


def main(out: str) -> None:
    import geozl
    import rumi

    manifest = {}
    for name, (_, _, _, tile, bands, time, geo) in FIXTURES.items():
        arr = source(name)
        table = rumi.frames(arr, _pattern(name), tile_size=tile)
        for frame in table:
            data = frame.data.view(np.float64) if frame.data.dtype == np.complex128 else frame.data
            frame.compressed = geozl.compress(data, graph=geozl.graph(data, "planar>zigzag>zstd"))
        path = os.path.join(out, name + ".rumi")
        _, header = rumi.write(path, table, bands=bands, time=time, **(geo or {}))
        with open(os.path.join(out, name + ".header"), "wb") as fh:
            fh.write(bytes(header))
        m = rumi.info(source=path)
        manifest[name] = {"pattern": _pattern(name), "tile": tile, "shape": list(m.shape), "dtype": str(m.dtype),
                          "frame_layout": m.frame_layout, "frames": m.frames, "bands": m.bands,
                          "time": [str(t) for t in m.time], "time_kind": m.time_kind,
                          "transform": m.transform, "crs": m.crs, "pixel_is_point": m.pixel_is_point,
                          "rumi": rumi.__version__, "geozl": geozl.__version__}
    with open(os.path.join(out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1, default=str)
        fh.write("\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
