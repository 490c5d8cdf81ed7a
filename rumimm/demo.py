"""The built-in example: write a synthetic EO scene, read windows back, say what happened.

Run with ``python -m rumimm demo``.  It touches only a temporary directory, deleted at
the end (or an existing ``--out DIR``, where the file stays), and checks every pixel it
reads against the array it wrote.
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

#: The largest scene the demo makes (raw bytes): it is held in memory to check reads.
MAX_RAW_BYTES = 1 << 30


def check_args(bands: int, size: int, tile: int) -> None:
    """Refuse a scene the demo cannot make (ValueError), before anything is allocated."""
    for name, value in (("bands", bands), ("size", size), ("tile", tile)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    raw = bands * size * size * 2
    if raw > MAX_RAW_BYTES:
        raise ValueError(f"a {bands} x {size} x {size} uint16 demo scene is {raw / 2**30:.1f} GiB; the demo makes "
                         f"at most {MAX_RAW_BYTES / 2**30:g} GiB (lower the size or the band count)")


def run(out_dir: str | None = None, *, bands: int = 4, size: int = 2048, tile: int = 512, echo=print) -> dict:
    """Write a (bands, size, size) uint16 scene, read windows, verify, report.

    ``out_dir`` must exist (the file stays there); by default a temporary directory
    is used and deleted at the end.
    """
    import rumimm
    from rumimm.synthetic import eo_scene

    check_args(bands, size, tile)
    owned = out_dir is None
    if not owned and not os.path.isdir(out_dir):
        raise FileNotFoundError(2, "No such directory", os.fspath(out_dir))
    out_dir = out_dir or tempfile.mkdtemp(prefix="rumimm-demo-")
    path = os.path.join(out_dir, "demo.rumi")

    t0 = time.perf_counter()
    scene = eo_scene(bands=bands, height=size, width=size, dtype="uint16", seed=0)
    t1 = time.perf_counter()
    blob = rumimm.write(path, scene, tile=tile, transform=(10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0),
                        crs="EPSG:32633")
    t2 = time.perf_counter()
    file_size = os.path.getsize(path)
    echo(f"wrote {path}" + (" (a temporary file, deleted at the end; keep it with --out DIR)" if owned else ""))
    echo(f"  scene {scene.shape} {scene.dtype}, {scene.nbytes / 2**20:.1f} MiB raw, made in {t1 - t0:.2f} s")
    echo(f"  file {file_size / 2**20:.2f} MiB ({file_size / scene.nbytes:.3f} of raw) in {t2 - t1:.2f} s; "
         f"header blob {len(blob)} bytes")

    report = rumimm.validate(path, header=blob)
    echo(f"  validate: {'compliant' if report.ok else report}")

    y0, x0 = size // 3, size // 5
    mid, small, big, last = min(256, size - y0), min(64, size - y0), min(1024, size), bands - 1
    mid_x, small_x = min(256, size - x0), min(64, size - x0)
    pair = [0, last] if last else [0]
    windows = {
        f"{mid}x{mid_x} all bands": (slice(None), slice(y0, y0 + mid), slice(x0, x0 + mid_x)),
        f"{small}x{small_x} band {last}": (last, slice(y0, y0 + small), slice(x0, x0 + small_x)),
        f"{big}x{big} bands {','.join(map(str, pair))}": (pair, slice(0, big), slice(size - big, size)),
        "whole image": (Ellipsis,),
    }
    results = {}
    with rumimm.open(path, header=blob) as img:
        echo(f"opened {img.shape} {img.dtype} tile {img.tile} {img.frame_unit} frames, crs {img.crs}, "
             f"bounds {tuple(round(v) for v in img.bounds)}")
        for name, key in windows.items():
            t = time.perf_counter()
            got = img[key]
            dt = time.perf_counter() - t
            ok = np.array_equal(got, scene[key])
            results[name] = {"shape": got.shape, "seconds": dt, "exact": ok}
            echo(f"  read {name:<22} -> {got.shape!s:<20} {dt * 1e3:8.2f} ms  exact={ok}")
        echo("  (the first read compiles the numba kernels on a first-ever run, or loads them from the "
             "on-disk cache after; overlapping reads reuse decoded frames from the frame cache)")
    if not all(r["exact"] for r in results.values()) or not report.ok:
        raise SystemExit("demo failed: a read did not match what was written")
    if owned:
        for name in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, name))
        os.rmdir(out_dir)
    return {"path": path, "file_size": file_size, "blob": blob, "reads": results}
