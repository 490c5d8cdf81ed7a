"""Regenerate the rumi fixtures in this folder.

The fixtures are written by the reference implementation rumi-eo 0.16.0.  Most of
them have frames compressed by geozl 0.14.x (the version rumi-eo's "write" extra
pins), two by plain OpenZL built-in graphs.  Run it in a separate environment::

    python -m venv .venv-geozl14
    .venv-geozl14/bin/pip install "rumi-eo==0.16.0" "geozl>=0.14,<0.15" numpy
    .venv-geozl14/bin/python tests/data/make_fixtures.py

Importing this module needs only numpy: tests call ``source(name)`` to rebuild a
fixture's source array (pure integer arithmetic, no RNG, so it is the same on every
numpy version) and ``FIXTURES`` for its parameters.  ``manifest.json`` records the
parameters plus SHA-256 digests of the source bytes, the file and the blob.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

#: name -> parameters.  codec is ("geozl", method) or ("openzl", "generic" | "delta").
FIXTURES: dict[str, dict] = {
    "u16_tile_b4": dict(
        dtype="uint16", shape=(4, 100, 150), tile=64, unit="tile", codec=("geozl", "med>zigzag>transpose>entropy"),
    ),
    "u16_cell_b3": dict(
        dtype="uint16", shape=(3, 70, 90), tile=32, unit="cell", codec=("geozl", "delta_n>zigzag>transpose>zstd"),
    ),
    "i16_tile_b2": dict(
        dtype="int16", shape=(2, 50, 70), tile=32, unit="tile", codec=("geozl", "delta_w>zigzag>field_lz"),
    ),
    "f32_tile_b1": dict(
        dtype="float32", shape=(1, 40, 60), tile=32, unit="tile", codec=("geozl", "delta_1d>field_lz"),
    ),
    "u8_geo_utm33n": dict(
        dtype="uint8", shape=(3, 40, 50), tile=32, unit="tile", codec=("geozl", "planar>zigzag>entropy"),
        transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4100000.0), crs=32633, pixel_is_point=False,
    ),
    "f32_geo_wgs84_point": dict(
        dtype="float32", shape=(2, 30, 40), tile=16, unit="cell", codec=("geozl", "wp_static>zigzag>transpose>entropy"),
        transform=(0.01, 0.0, 12.0, 0.0, -0.01, 45.0), crs=4326, pixel_is_point=True,
    ),
    "u16_openzl_generic_b5": dict(
        dtype="uint16", shape=(5, 30, 45), tile=16, unit="tile", codec=("openzl", "generic"),
    ),
    "i32_openzl_delta_cell_b2": dict(
        dtype="int32", shape=(2, 33, 17), tile=16, unit="cell", codec=("openzl", "delta"),
    ),
}  # fmt: skip


def source(name: str) -> np.ndarray:
    """The (B, Y, X) source array of fixture ``name``, rebuilt exactly.

    A smooth ramp per band plus a small hash "noise", in int64 arithmetic, then
    cast (floats: scaled by a power of two, so every value is exact).
    """
    spec = FIXTURES[name]
    shape = spec["shape"]
    seed = sum(name.encode())
    b, y, x = np.indices(shape, dtype=np.int64)
    noise = ((x * 73856093) ^ (y * 19349663) ^ ((b + seed) * 83492791)) % 13
    ramp = x * 3 + y * 2 + b * 40
    value = ramp + noise
    dtype = np.dtype(spec["dtype"])
    if dtype.kind == "f":
        return (value * 0.25 - 100.0).astype(dtype)
    if dtype.kind == "i":
        return (value - value.max() // 2).astype(dtype)
    return (value % (np.iinfo(dtype).max + 1)).astype(dtype)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _geozl_frame(frame: np.ndarray, method: str) -> bytes:
    import geozl

    tile = np.ascontiguousarray(frame)
    graph = geozl.graph(tile, method)  # lossless (error=None); width/planes from the frame's shape
    return bytes(geozl.compress(tile, graph=graph))


def write_fixture(name: str, folder: str = HERE) -> dict:
    import rumi

    sys.path.insert(0, os.path.dirname(HERE))  # tests/, for peer.compress_frame
    import peer

    spec = FIXTURES[name]
    array = source(name)
    table = rumi.frames(array, spec["tile"], unit=spec["unit"])
    kind, method = spec["codec"]
    for frame in table:
        if kind == "geozl":
            frame.compressed = _geozl_frame(frame.data, method)
        else:
            frame.compressed = peer.compress_frame(frame.data, graph=method, format_version=24)
    kwargs = {"pixel_is_point": spec.get("pixel_is_point", False)}
    if spec.get("crs") is not None:
        kwargs.update(transform=spec["transform"], crs=spec["crs"])
    path = os.path.join(folder, name + ".rumi")
    _, header = rumi.write(path, table, **kwargs)
    header = bytes(header)
    with open(os.path.join(folder, name + ".blob"), "wb") as f:
        f.write(header)
    back = rumi.read(path, header)
    assert back.dtype == array.dtype and np.array_equal(back, array), name
    with open(path, "rb") as f:
        file_bytes = f.read()
    return {
        "file": name + ".rumi",
        "blob": name + ".blob",
        "dtype": spec["dtype"],
        "shape": list(spec["shape"]),
        "tile": spec["tile"],
        "unit": spec["unit"],
        "codec": f"geozl {_version('geozl')} {method}" if kind == "geozl" else f"openzl {_version('openzl')} {method}",
        "transform": list(spec["transform"]) if spec.get("transform") else None,
        "crs": spec.get("crs"),
        "pixel_is_point": spec.get("pixel_is_point", False),
        "source_sha256": _sha256(array.tobytes()),
        "file_sha256": _sha256(file_bytes),
        "blob_sha256": _sha256(header),
        "writer": f"rumi-eo {_version('rumi-eo')}",
    }


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def main() -> None:
    import geozl

    if not _version("geozl").startswith("0.14."):
        raise SystemExit(f"run this with geozl 0.14.x (found {_version('geozl')}); see the module docstring")
    del geozl
    manifest = {name: write_fixture(name) for name in FIXTURES}
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(HERE, n)) for n in os.listdir(HERE))
    print(f"wrote {len(manifest)} fixtures, folder is {total} bytes")


if __name__ == "__main__":
    main()
