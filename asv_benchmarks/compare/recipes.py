"""Frame recipes per sample type: size and encode/decode speed of rumimm's presets and geozl's recipes.

For each dtype, 16 tile frames of 512 x 512 from ``rumimm.synthetic.eo_scene(4, 2048, 2048, dtype)``
go through every candidate: rumimm's own presets (``rumimm.codec.PRESETS``, resolved per dtype)
and every lossless recipe ``geozl.profile(tile, prior=None)`` lists, written through rumimm's
``FrameEncoder`` (``"geozl:<recipe>"``).  Frames are decoded by rumimm's own decoder (geozl's C
entry point, ``rumimm.codec.geozl_lib``, checksums verified), one thread, into one buffer;
each round-trip is checked.  Speeds are MiB/s of raw samples, best of ``--repeats`` passes.

    python -m asv_benchmarks.compare.recipes                  # every dtype, table on stdout
    python -m asv_benchmarks.compare.recipes --dtypes uint16 --json out.json
    python -m asv_benchmarks.compare.recipes --presets-only   # only the named presets (fast)
    python -m asv_benchmarks.compare.recipes --scene          # 4 x 4096 x 4096 uint16: floor + full reads per preset

Pin to one core with ``taskset -c 0`` for steadier numbers; the machine's noise still
moves speeds by +-20%, so compare rows of the same run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from asv_benchmarks.compare.decode_floor import decode_frames

DTYPES = ("uint8", "uint16", "uint32", "int16", "float32", "float64", "bfloat16", "bool", "uint4")
TILE = 512
SCENE = 2048
MIB = 1 << 20


def tiles(dtype: str, tile: int = TILE, size: int = SCENE) -> tuple[list[np.ndarray], object]:
    """16 frames (4 bands x 4 tiles, one from each quarter) of the synthetic scene in ``dtype``, and its encoding."""
    from rumimm.format.dtypes import encoding_for_dtype
    from rumimm.synthetic import eo_scene

    scene = eo_scene(4, size, size, dtype)
    enc = encoding_for_dtype(scene.dtype)
    half = size // 2
    out = [np.ascontiguousarray(scene[b, y:y + tile, x:x + tile])
           for b in range(scene.shape[0]) for y in (0, half) for x in (0, half)]
    return out, enc


def geozl_recipes(sample: np.ndarray) -> list[str]:
    """The lossless recipes geozl lists for samples of this width (``geozl.profile`` names them)."""
    import geozl

    rows = geozl.profile(sample, prior=None, reps=1)
    return sorted(r["graph"] for r in rows)


def candidates(enc, frame: np.ndarray, presets_only: bool = False) -> list[tuple[str, object]]:
    """(label, codec) pairs: rumimm's presets resolved for ``enc``, then geozl's recipes."""
    from rumimm.codec import PRESETS, resolve_codec

    out, seen = [], set()
    for name, codec in PRESETS.items():
        if name == "store" or not codec.supports(enc):
            continue
        concrete = resolve_codec(name, enc)
        label = name if concrete.name == name else f"{name} ({concrete.name})"
        out.append((label, concrete))
        seen.add(concrete.name)
    if presets_only or enc.storage_dtype.itemsize not in (1, 2, 4, 8):
        return out
    storage = np.ascontiguousarray(frame).view(enc.storage_dtype)
    for recipe in geozl_recipes(storage):
        if "geozl:" + recipe not in seen:
            out.append(("geozl:" + recipe, "geozl:" + recipe))
    return out


def measure(codec, enc, frames: list[np.ndarray], repeats: int = 3) -> dict:
    """Size / raw, encode and decode MiB/s (best of ``repeats``) of ``frames`` through ``codec``."""
    from rumimm.codec import DEFAULT_FORMAT_VERSION, MAX_FORMAT_VERSION, FrameEncoder, frame_format_version, geozl_lib

    # built-in graphs at rumimm's default frame format (24); a geozl recipe writes its own (24 or 27)
    recipe = isinstance(codec, str) or codec.recipe is not None
    encoder = FrameEncoder(codec, enc, MAX_FORMAT_VERSION if recipe else DEFAULT_FORMAT_VERSION)
    raw = sum(f.nbytes for f in frames)
    best_enc = float("inf")
    for _ in range(max(1, repeats - 1)):
        t0 = time.perf_counter()
        blobs = [encoder.encode(f) for f in frames]
        best_enc = min(best_enc, time.perf_counter() - t0)
    encoder.close()
    srcs = [np.frombuffer(b, np.uint8) for b in blobs]
    sizes = [f.size * enc.storage_dtype.itemsize for f in frames]
    dst = np.empty(max(sizes) // 8 + 1, np.uint64)
    addr = dst.ctypes.data
    for src, f, n in zip(srcs, frames, sizes, strict=True):  # every frame round-trips
        got = geozl_lib.decompress(src.ctypes.data, src.size, addr, n, True)
        if got != n:
            raise RuntimeError(f"{codec}: decode failed ({geozl_lib.status_message(got)})")
        back = dst.view(np.uint8)[:n].view(enc.storage_dtype)
        want = np.ascontiguousarray(f).reshape(-1).view(enc.storage_dtype)
        if enc.subbyte:
            want = want & np.uint8((1 << enc.bits_per_sample) - 1) if enc.bits_per_sample > 1 else (want != 0)
            want = want.astype(np.uint8)
        if not np.array_equal(back, want):
            raise RuntimeError(f"{codec}: frame did not round-trip")
    best_dec = float("inf")
    ptrs = [(s.ctypes.data, s.size, n) for s, n in zip(srcs, sizes, strict=True)]
    for _ in range(repeats):
        t0 = time.perf_counter()
        for p, s, n in ptrs:
            geozl_lib.decompress(p, s, addr, n, True)
        best_dec = min(best_dec, time.perf_counter() - t0)
    versions = sorted({frame_format_version(b) for b in blobs})
    return {"size": sum(len(b) for b in blobs) / raw, "encode_mibs": raw / MIB / best_enc,
            "decode_mibs": raw / MIB / best_dec, "format_version": max(versions)}


def run(dtypes=DTYPES, repeats: int = 3, presets_only: bool = False, quiet: bool = False, *, tile: int = TILE,
        size: int = SCENE) -> dict:
    """{dtype: [row of :func:`measure` plus "codec"]} for every candidate of every dtype."""
    out = {}
    for name in dtypes:
        frames, enc = tiles(name, tile, size)
        rows = []
        for label, codec in candidates(enc, frames[0], presets_only):
            try:
                r = measure(codec, enc, frames, repeats)
            except Exception as exc:
                if not quiet:
                    print(f"  {name} {label}: skipped ({str(exc)[:80]})", file=sys.stderr)
                continue
            rows.append({"codec": label, **r})
            if not quiet:
                print(f"  {name:9s} {label:45s} {r['size']:.3f} enc {r['encode_mibs']:7.0f} "
                      f"dec {r['decode_mibs']:7.0f}", file=sys.stderr)
        out[name] = rows
    return out


def table(results: dict) -> str:
    lines = []
    for name, rows in results.items():
        lines += [f"### {name}", "", "| codec | size / raw | decode MiB/s | encode MiB/s | frame format |",
                  "|---|---:|---:|---:|---:|"]
        for r in sorted(rows, key=lambda r: -r["decode_mibs"]):
            lines.append(f"| `{r['codec']}` | {r['size']:.3f} | {r['decode_mibs']:,.0f} | {r['encode_mibs']:,.0f} | "
                         f"{r['format_version']} |")
        lines.append("")
    return "\n".join(lines)


def scene_read(presets=("auto", "fast", "small"), bands: int = 4, size: int = 4096, repeats: int = 3,
               threads=(1, 2), workdir: str | None = None, quiet: bool = False, tile: int = TILE) -> dict:
    """Whole-scene numbers per preset: the uint16 scene written with each preset (512 tiles).

    For each: size / raw; the decode floor (every frame, in memory, decoded serially by
    rumimm's per-frame decoder, ``decode_floor.decode_frames``, MiB/s of raw per core);
    and the full-image read ``img[:]`` at each thread count (fresh ``open``, no frame cache).
    Presets alternate within each repeat and the best time is kept, so the ratios are
    between runs of the same minute.
    """
    import os
    import tempfile

    import rumimm
    from rumimm.format.blob import Header
    from rumimm.synthetic import eo_scene

    log = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr, flush=True))
    work = workdir or tempfile.mkdtemp(prefix="rumimm-recipes-")
    scene = eo_scene(bands, size, size, "uint16")
    raw = scene.nbytes
    files = {}
    for name in presets:
        path = os.path.join(work, f"{name}.rumi")
        t0 = time.perf_counter()
        blob = rumimm.write(path, scene, tile=tile, codec=name)
        files[name] = {"path": path, "header": Header.parse(blob), "write_s": time.perf_counter() - t0,
                       "size": os.path.getsize(path) / raw}
        log(f"  {name}: {files[name]['size']:.3f} of raw, written in {files[name]['write_s']:.1f} s")
    best: dict = {n: {"floor": float("inf"), **{f"read{t}": float("inf") for t in threads}} for n in presets}
    for r in range(repeats + 1):  # round 0 warms up (numba JIT, page cache) and checks the pixels
        for name in presets:
            f = files[name]
            h = f["header"]
            data = np.fromfile(f["path"], np.uint8)
            sizes = h.grid.frame_samples_array * h.encoding.itemsize
            dst_off = np.zeros(sizes.size, np.int64)
            np.cumsum(sizes[:-1], out=dst_off[1:])
            dst = np.ones(int(sizes.sum()) + 8, np.uint8)
            t0 = time.perf_counter()
            status = decode_frames(data, h.frame_offsets[:-1], h.frame_byte_counts, dst, dst_off, sizes)
            if r:
                best[name]["floor"] = min(best[name]["floor"], time.perf_counter() - t0)
            if np.any(status < 0):
                raise RuntimeError(f"{name}: a frame failed to decode")
            for t in threads:
                rumimm.set_num_threads(t)
                with rumimm.open(f["path"], cache_bytes=0) as img:
                    t0 = time.perf_counter()
                    out = img[:]
                    if r:
                        best[name][f"read{t}"] = min(best[name][f"read{t}"], time.perf_counter() - t0)
                if r == 0 and not np.array_equal(out, scene):
                    raise RuntimeError(f"{name}: the read differs from the scene")
        log(f"  round {r}/{repeats} done")
    out = {}
    for name in presets:
        b = best[name]
        out[name] = {"size": files[name]["size"], "write_s": files[name]["write_s"],
                     "floor_mibs": raw / MIB / b["floor"],
                     **{f"read_s_{t}t": b[f"read{t}"] for t in threads}}
    return out


def scene_table(res: dict, base: str = "auto") -> str:
    keys = [k for k in next(iter(res.values())) if k.startswith("read_s_")]
    lines = ["| preset | size / raw | decode floor MiB/s (1 core) | " + " | ".join(
        f"full read s ({k[7:-1]} thr) | vs {base}" for k in keys) + " |",
        "|---|---:|---:|" + "---:|---:|" * len(keys)]
    for name, r in res.items():
        cells = [f"{r[k]:.3f} | {res[base][k] / r[k]:.2f}x" for k in keys]
        lines.append(f"| `{name}` | {r['size']:.3f} | {r['floor_mibs']:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="recipes", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated dtype names (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="timed passes, best kept (default %(default)s)")
    ap.add_argument("--presets-only", action="store_true", help="only rumimm's named presets")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--scene", action="store_true",
                    help="instead: write the 4 x SIZE x SIZE uint16 scene with each of --presets and time the "
                         "decode floor and full-image reads")
    ap.add_argument("--presets", default="auto,fast,small", help="with --scene (default: %(default)s)")
    ap.add_argument("--size", type=int, default=4096, help="with --scene: scene height and width (default 4096)")
    args = ap.parse_args(argv)
    if args.scene:
        res = scene_read(tuple(args.presets.split(",")), size=args.size, repeats=args.repeats, quiet=args.quiet)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(res, fh, indent=1)
        print(scene_table(res))
        return 0
    res = run(args.dtypes.split(","), args.repeats, args.presets_only, args.quiet)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)
    print(table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
