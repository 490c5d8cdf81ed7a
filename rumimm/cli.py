"""The ``rumimm`` command: a thin layer over the public API.

Subcommands::

    rumimm info PATH [--header BLOB] [--json]      what a file holds and how big it is
    rumimm validate PATH [--header BLOB] [--decode]  every spec violation, one per line
    rumimm index PATH -o BLOB                        rebuild a file's header blob from its IFD

Exit status: 0 on success (``validate``: the file is compliant), 1 when ``validate``
finds violations, 2 for usage errors, unreadable files and files too broken to
describe (the message goes to stderr as ``rumimm: <message>``).

Each subcommand is registered with :func:`register` (name, help, a function adding
its arguments, a function running it); add new ones at the end of this module.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable

from . import __version__
from .errors import RumiError

__all__ = ["main", "register", "build_parser", "describe"]

Configure = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]

#: name -> (one-line help, add arguments, run); filled by ``register`` below.
COMMANDS: dict[str, tuple[str, Configure, Run]] = {}


def register(name: str, help: str, configure: Configure, run: Run) -> None:
    """Add a subcommand: ``configure(parser)`` adds its arguments, ``run(args)`` returns the exit status."""
    COMMANDS[name] = (help, configure, run)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rumimm", description="Inspect, validate and index rumi raster files.")
    parser.add_argument("--version", action="version", version=f"rumimm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, configure, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        configure(p)
        p.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status instead of exiting."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version or a usage error (argparse printed it)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "run", None) is None:
        parser.print_usage(sys.stderr)
        print("rumimm: error: a command is required; see rumimm --help", file=sys.stderr)
        return 2
    try:
        return args.run(args)
    except RumiError as exc:
        return _fail(str(exc))
    except OSError as exc:
        name = exc.filename if exc.filename is not None else ""
        return _fail(f"{name}: {exc.strerror or exc}" if name else str(exc.strerror or exc))


def _fail(message: str) -> int:
    print(f"rumimm: {message}", file=sys.stderr)
    return 2


def _read_blob(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as fh:
        return fh.read()


def _add_path(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="the rumi file")


def _add_header(p: argparse.ArgumentParser) -> None:
    p.add_argument("--header", metavar="BLOB", help="a header blob file to check against the file")


# -- info ----------------------------------------------------------------------------------
def describe(path, header: bytes | None = None) -> dict:
    """JSON-safe summary of a compliant file (raises FormatError/BlobError otherwise)."""
    from .validate import inspect_file

    rep = inspect_file(path, strict=True, frames="magic", header=header)
    h = rep.header
    g = rep.georef
    out = {"path": os.fspath(path), **h.to_dict()}
    file_size = os.path.getsize(path)
    raw = h.samples_per_pixel * h.image_length * h.image_width * h.encoding.itemsize
    out.update(
        crs=None if g is None else g.crs,
        geographic=None if g is None else g.geographic,
        transform=None if g is None or g.transform is None else list(g.transform),
        pixel_is_point=None if g is None else g.pixel_is_point,
        file_size=file_size,
        raw_size=raw,
        ratio=raw / file_size,
        blob_size=len(rep.blob),
        format_version=rep.format_version,
    )
    return out


def _info_args(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_header(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _info(args: argparse.Namespace) -> int:
    d = describe(args.path, _read_blob(args.header))
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    kind = "" if d["geographic"] is None else (" (geographic)" if d["geographic"] else " (projected)")
    rows = [
        ("path", d["path"]),
        ("shape", f"{tuple(d['shape'])} (band, y, x)"),
        ("dtype", f"{d['dtype']} (sample_format {d['sample_format']}, bits_per_sample {d['bits_per_sample']})"),
        ("grid", f"{d['tile'][0]} x {d['tile'][1]} tiles (y x x), {d['tiles_down']} down x {d['tiles_across']} across"),
        ("frame unit", d["frame_unit"]),
        ("frames", f"{d['frames']} from byte {d['base_frame_offset']} "
                   f"(count_min {d['count_min']}, count_bits {d['count_bits']})"),
        ("crs", f"{d['crs']}{kind}" if d["crs"] else "none"),
        ("transform", "(" + ", ".join(repr(v) for v in d["transform"]) + ") (x_res, row_rot, x_origin, col_rot, "
         "y_res, y_origin)" if d["transform"] else "none"),
        ("pixels", "points" if d["pixel_is_point"] else "areas"),
        ("file size", f"{d['file_size']:,} bytes"),
        ("raw size", f"{d['raw_size']:,} bytes"),
        ("ratio", f"{d['ratio']:.3f} (raw / file)"),
        ("blob size", f"{d['blob_size']:,} bytes"),
        ("OpenZL format", str(d["format_version"])),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    return 0


# -- validate ---------------------------------------------------------------------------------
def _validate_args(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_header(p)
    p.add_argument("--decode", action="store_true", help="also decode every frame and check its size (slow)")


def _validate(args: argparse.Namespace) -> int:
    from .validate import validate

    rep = validate(args.path, header=_read_blob(args.header), decode=args.decode)
    print(rep)  # "PATH: compliant", or one "PATH: violation" line each
    return 0 if rep.ok else 1


# -- index ------------------------------------------------------------------------------------
def _index_args(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    p.add_argument("-o", "--output", metavar="BLOB", required=True, help="where to write the header blob")


def _index(args: argparse.Namespace) -> int:
    from .blob import Header
    from .validate import index

    blob = index(args.path)
    with open(args.output, "wb") as fh:
        fh.write(blob)
    print(f"{args.output}: {len(blob)}-byte header blob for {Header.parse(blob).n_frames} frames of {args.path}")
    return 0


register("info", "describe a rumi file: shape, dtype, grid, frames, CRS and sizes", _info_args, _info)
register("validate", "check a rumi file (and its header blob) against the spec", _validate_args, _validate)
# -- demo -------------------------------------------------------------------------------------
def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", help="keep the demo file in DIR (default: a temporary directory)")
    p.add_argument("--size", type=int, default=2048, help="scene height and width in pixels (default 2048)")
    p.add_argument("--bands", type=int, default=4, help="band count (default 4)")
    p.add_argument("--tile", type=int, default=512, help="tile size (default 512)")


def _demo(args: argparse.Namespace) -> int:
    from .demo import run

    run(args.out, bands=args.bands, size=args.size, tile=args.tile)
    return 0


register("index", "rebuild a rumi file's header blob from its IFD", _index_args, _index)
register("demo", "write a synthetic EO scene, read windows back and check every pixel", _demo_args, _demo)
# More subcommands register here, with the same register(name, help, configure, run).


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


# -- clean (temporary files of killed writers) ------------------------------------------------
def _clean_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="a directory, or a .rumi file (existing or not)")


def _clean(args: argparse.Namespace) -> int:
    from .atomic import clean

    for path in args.paths:
        for removed in clean(path):
            print(f"removed {removed}")
    return 0


register("clean", "remove the temporary files that killed rumimm writers left behind", _clean_args, _clean)
