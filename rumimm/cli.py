"""The ``rumimm`` command: a thin layer over the public API.

Subcommands::

    rumimm info PATH [--header BLOB] [--json]        what a file holds and how big it is
    rumimm validate PATH [--header BLOB] [--decode]  every spec violation, one per line
    rumimm index PATH [-o BLOB | --hex]              rebuild a file's header blob from its IFD
    rumimm convert IN.tif OUT.rumi [--tile ...]      a GeoTIFF (anything GDAL reads) into rumi
    rumimm convert IN.rumi OUT.rumi --codec NAME     re-encode every frame with another preset
    rumimm export IN.rumi OUT.tif [--cog ...]        a rumi file into a tiled, compressed GeoTIFF
    rumimm quicklook PATH OUT.png [--bands 3,2,1]    a stretched PNG preview
    rumimm profile PATH [--samples 8] [--json]       every codec recipe timed on a file's own frames
    rumimm demo [--out DIR]                          write, read back and check a synthetic scene

``info``, ``validate``, ``index`` and ``convert`` (of a rumi file) also read remote URIs (``s3://``,
``gs://``, ``az://``, ``http(s)://``; credentials and endpoints from the environment,
``docs/remote.md``).

Exit status: 0 on success (``validate``: the file is compliant), 1 when ``validate``
finds violations, 2 for usage errors, unreadable files and files too broken to
describe.  Every error is one line on stderr, ``rumimm: <message>`` (usage errors
``rumimm <command>: error: <message> (see rumimm <command> --help)``), never a
traceback; warnings are one line each, ``rumimm: warning: <message>``.  Subcommands
import what they need when they run, so ``rumimm --help`` stays fast.

This module parses arguments, calls the library and renders its answers: what ``info``
computes is ``reader.describe``, what ``convert`` (and ``convert --to``) decides is
``integrations.conversion``, where ``index`` writes a blob is ``reader.index_output``, the bands
``quicklook`` takes are ``integrations.preview``'s, what kind of input a path is (one message per
kind of bad input, and what ``clean`` refuses) is ``reader.inputs``; errors map to exit
statuses in :func:`main`.

Each subcommand is registered with :func:`register` (name, help, a function adding
its arguments, a function running it); add new ones at the end of this module.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Callable
from typing import TypeVar

from rumimm import __version__
from rumimm.errors import FormatError, RumiWarning, where
from rumimm.reader.describe import describe, recognise_preset

__all__ = ["build_parser", "describe", "main", "recognise_preset", "register"]

Configure = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]
_T = TypeVar("_T")

#: name -> (one-line help, add arguments, run); filled by ``register`` below.
COMMANDS: dict[str, tuple[str, Configure, Run]] = {}


def register(name: str, help: str, configure: Configure, run: Run) -> None:
    """Add a subcommand: ``configure(parser)`` adds its arguments, ``run(args)`` returns the exit status."""
    COMMANDS[name] = (help, configure, run)


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line usage error that points to ``--help``; ``commands`` holds the subcommands' parsers."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.commands: dict[str, argparse.ArgumentParser] = {}

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rumimm", description="Inspect, validate, index, convert and preview rumi raster files.")
    parser.add_argument("--version", action="version", version=f"rumimm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, configure, run) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        configure(p)
        p.set_defaults(run=run)
        parser.commands[name] = p
    return parser


def _parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parse_args``, with an unrecognised argument reported by the parser of the command it was given to.

    ``rumimm info x --bogus`` is ``rumimm info``'s usage error (see ``rumimm info --help``), not ``rumimm``'s.
    """
    args, extras = parser.parse_known_args(argv)
    if extras:
        tokens = list(sys.argv[1:] if argv is None else argv)
        command = getattr(args, "command", None)
        before = tokens[:tokens.index(command)] if command in tokens else tokens  # rumimm's own options
        commands = getattr(parser, "commands", {})
        owner = commands[command] if command in commands and not set(extras) & set(before) else parser
        owner.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status instead of exiting."""
    parser = build_parser()
    try:
        args = _parse(parser, argv)
    except SystemExit as exc:  # --help, --version or a usage error (argparse printed it)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if getattr(args, "run", None) is None:
        print("rumimm: error: a command is required (see rumimm --help)", file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.filterwarnings("always", category=RumiWarning)
        warnings.showwarning = _warn
        try:
            return args.run(args)
        except BrokenPipeError:  # the reader of our output left (rumimm info x | head -1): not an error
            return _quiet_pipe()
        except UsageError as exc:
            prog = f"rumimm {args.command}"
            print(f"{prog}: error: {exc} (see {prog} --help)", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            return _fail("interrupted", 130)
        except ValueError as exc:  # RumiError and its subclasses, and bad argument values
            return _fail(str(exc))
        except OSError as exc:
            name = exc.filename if exc.filename is not None else ""
            return _fail(f"{name}: {exc.strerror or exc}" if name else str(exc.strerror or exc))
        except ImportError as exc:  # an optional dependency; the message says what to install
            return _fail(str(exc))
        except Exception as exc:
            if type(exc).__module__.startswith("rasterio"):  # GDAL's own word on a file it cannot use
                return _fail(" ".join(str(exc).split()))
            raise


class UsageError(ValueError):
    """An argument a command can only check once it has opened its file; reported as argparse reports usage."""


def _quiet_pipe() -> int:
    """Exit quietly after a closed pipe: point stdout at /dev/null so the final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (captured in tests)
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a command a closed pipe ended


def _fail(message: str, status: int = 2) -> int:
    print(f"rumimm: {message}", file=sys.stderr)
    return status


def _warn(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"rumimm: warning: {message}", file=sys.stderr)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _existing_dir(text: str) -> str:
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing directory")
    return text


def _warn_small_tile(tile: int) -> None:
    from rumimm.integrations.conversion import small_tile_warning

    text = small_tile_warning(tile)
    if text:
        _warn(text, None, None, None)


def _progress() -> bool:
    from rumimm.progress import on_terminal

    return on_terminal()


def _read_blob(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as fh:
        return fh.read()


def _readable(path: str, walk: bool = True, *, violations: bool = False, gdal: bool = False):
    """``reader.inputs.classify``: missing, directory, FIFO, empty and broken rumi files refused alike.

    A file shorter than the 16-byte header is refused as a longer one is: ``not a TIFF file``
    unless it starts as a TIFF or rumi file does, else the IFD walk's truncated header.
    ``violations``: left to ``validate``, which reports them as the file's; ``gdal``: a short
    file that is no TIFF is returned, for ``convert`` to refuse as any file GDAL does not read.
    """
    from rumimm.reader.inputs import classify

    found = classify(path, walk)
    short = None if violations else _short(found)
    if short == "truncated":
        from rumimm.reader.validate import build_blob

        build_blob(path)  # raises: the walk's words for a header cut short
    if short == "text" and not gdal:
        raise FormatError(found.not_tiff())
    return found


def _short(found) -> str | None:
    """``"text"`` for a file shorter than the 16-byte header that does not start as a TIFF (II, MM) or a rumi 0.2
    file (RUMI) does (not a TIFF file, whatever its length), ``"truncated"`` for one that does, else None."""
    if found is None or found.kind == "rumi" or len(found.head) >= 16:  # a rumi file's walk says what it lacks
        return None
    head = found.head
    return "truncated" if any(head[:len(magic)] == magic[:len(head)] for magic in (b"II", b"MM", b"RUMI")) else "text"


def _refused_as_everywhere(path: str, call: Callable[[], _T]) -> _T:
    """``call()``; when it fails, the pre-check's message for ``path`` if it has one (a missing file, a FIFO, ...),
    so that every command refuses a kind of bad input in the same words.  A readable file is opened once."""
    try:
        return call()
    except (OSError, ValueError):
        _readable(path, walk=False)
        raise


def _size(path: str) -> int:
    """The size of a file written, or of an object uploaded (one HEAD)."""
    from rumimm.store import is_remote, open_store

    if is_remote(path):
        store = open_store(path)
        try:
            return store.size
        finally:
            store.close()
    return os.path.getsize(path)


def _destination(path: str) -> None:
    from rumimm.reader.inputs import check_destination

    check_destination(path)


def _shown(path: object) -> str:
    """A path as the output names it: a URI without credentials or query string (``public_name``)."""
    from rumimm.store.uri import is_remote, public_name

    text = os.fspath(path) if isinstance(path, os.PathLike) else str(path)
    return public_name(text) if is_remote(text) else text


def _add_path(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="the rumi file")


def _add_header(p: argparse.ArgumentParser) -> None:
    p.add_argument("--header", metavar="BLOB", help="a header blob file to check against the file")


# -- info ----------------------------------------------------------------------------------
def _info_args(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    _add_header(p)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def _info(args: argparse.Namespace) -> int:
    d = _refused_as_everywhere(args.path, lambda: describe(args.path, _read_blob(args.header)))
    if args.json:
        print(json.dumps(d, indent=2))
        return 0
    from rumimm.format.units import is_tile

    kind = "" if d["geographic"] is None else (" (geographic)" if d["geographic"] else " (projected)")
    rows = [
        ("path", d["path"]),
        ("spec", f"rumi {d['spec']}"),
        ("shape", f"{tuple(d['shape'])} ({'time, ' if len(d['shape']) == 4 else ''}band, y, x)"),
        ("dtype", f"{d['dtype']} (sample_format {d['sample_format']}, bits_per_sample {d['bits_per_sample']})"),
        ("grid", f"{d['tile'][0]} x {d['tile'][1]} tiles (y x x), {d['tiles_down']} down x {d['tiles_across']} across"),
        ("frame unit", f"{d['frame_unit']} ({'tile' if is_tile(d['frame_unit_number']) else 'cell'} frames, "
                       f"frame_unit {d['frame_unit_number']})" if "frame_unit_number" in d else d["frame_unit"]),
        *([("bands", "; ".join(d["bands"])), ("time", f"{d['time_kind']}: " + ", ".join(
            "/".join(t) if isinstance(t, list) else t for t in d["time"]))] if "bands" in d else []),
        ("frames", f"{d['frames']} from byte {d['base_frame_offset']} "
                   f"(count_min {d['count_min']}, count_bits {d['count_bits']})"),
        ("crs", f"{d['crs']} {d['crs_name']}{kind}" if d["crs"] else "none"),
        ("transform", "(" + ", ".join(repr(v) for v in d["transform"]) + ") (x_res, row_rot, x_origin, col_rot, "
         "y_res, y_origin)" if d["transform"] else "none"),
        ("bounds", "(" + ", ".join(f"{v:.12g}" for v in d["bounds"]) + ") (left, bottom, right, top)"
         if d["bounds"] else "none"),
        ("resolution", f"{d['res'][0]:.12g} x {d['res'][1]:.12g} (x, y)" if d["res"] else "none"),
        ("pixels", "points" if d["pixel_is_point"] else "areas"),
        ("nodata", ", ".join(str(v) for v in d["nodata"]) if any(v is not None for v in d["nodata"]) else "none"),
        ("descriptions", ", ".join(str(v) for v in d["descriptions"]) if any(d["descriptions"]) else "none"),
        ("codec", f"preset {d['codec']!r}" if d["codec"] else "not a rumimm preset (another writer's graph)"),
        ("readers", (", ".join(d["readers"]) or "none") + f" (from the codecs of frames "
         f"{', '.join(map(str, d['sampled_frames']))} of {d['frames']})"),
        ("geozl codecs", ", ".join(d["codecs"]) or "none (OpenZL built-ins only)"),
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
    from rumimm.reader.validate import validate

    # nothing to validate: missing, a directory, a FIFO, empty (exit 2, as everywhere)
    found = _readable(args.path, walk=False, violations=True)
    rep = validate(args.path, header=_read_blob(args.header), decode=args.decode)
    if _short(found) == "text" and rep.violations:  # a short text file: not a TIFF, as a longer one
        rep.violations[0] = found.not_tiff().removeprefix(where(found.path))
    print(rep)  # "PATH: compliant", or one "PATH: violation" line each
    for what in rep.checked:  # what "compliant" covers: decoding every frame only with --decode
        print(f"  checked {what}")
    if rep.readers is not None:
        frames = ", ".join(map(str, rep.sampled_frames))
        print(f"  readers {', '.join(rep.readers) or 'none'} (from the codecs of frames {frames}: "
              f"{', '.join(sorted(rep.codecs or ())) or 'OpenZL built-ins only'})")
    return 0 if rep.ok else 1


# -- index ------------------------------------------------------------------------------------
def _index_args(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", metavar="BLOB", help="write the blob to this file (default: standard output)")
    out.add_argument("--hex", action="store_true", help="print the blob as one line of hex")


def _index(args: argparse.Namespace) -> int:
    from rumimm.reader.index_output import blob_destination, write_index

    dest = blob_destination(args.output, args.hex, sys.stdout.isatty())
    _readable(args.path, walk=False)  # missing, a directory, a FIFO, ...: the message every command gives
    done = write_index(args.path, args.output)
    if dest == "hex":
        print(done.blob.hex())
    elif dest == "stdout":
        sys.stdout.flush()
        sys.stdout.buffer.write(done.blob)
        sys.stdout.buffer.flush()
    else:
        print(f"{args.output}: {len(done.blob)}-byte header blob for {done.n_frames} frames of {args.path}")
    return 0


register("info", "describe a rumi file: shape, dtype, grid, frames, CRS and sizes", _info_args, _info)
register("validate", "check a rumi file (and its header blob) against the spec", _validate_args, _validate)
# -- demo -------------------------------------------------------------------------------------
def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", metavar="DIR", type=_existing_dir,
                   help="keep demo.rumi in this existing directory (default: a temporary one, deleted at the end)")
    p.add_argument("--size", type=_positive_int, default=2048, help="scene height and width in pixels (default 2048)")
    p.add_argument("--count", type=_positive_int, default=4, help="band count (default 4), as rasterio's count")
    # --bands elsewhere lists 1-based band numbers; here it was the count: still taken, with a warning
    p.add_argument("--bands", dest="old_bands", type=_positive_int, help=argparse.SUPPRESS)
    p.add_argument("--tile", type=_positive_int, default=512, help="tile size (default 512)")


def _demo(args: argparse.Namespace) -> int:
    from rumimm.demo import check_args, run

    if args.old_bands is not None:
        _warn("demo --bands N is the band count, now --count N (--bands lists band numbers in other commands)",
              None, None, None)
        args.count = args.old_bands
    args.bands = args.count
    check_args(args.bands, args.size, args.tile)  # its ValueError is reported by main, before any warning
    _warn_small_tile(args.tile)
    run(args.out, bands=args.bands, size=args.size, tile=args.tile)
    return 0


register("index", "rebuild a rumi file's header blob from its IFD", _index_args, _index)


# -- convert / export / quicklook -------------------------------------------------------------
def _convert_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="IN", nargs="+", help="the GeoTIFF or COG (anything GDAL reads), or a rumi file "
                   "of either spec to convert to the other (frames kept as they are) or, with --codec, to re-encode; "
                   "with --to, any number of them")
    p.add_argument("dest", metavar="OUT", nargs="?", help="the rumi file to write (without --to)")
    p.add_argument("--to", metavar="DIR", help="convert every IN into DIR/<name>.rumi, skipping outputs an earlier run "
                   "finished, listing the files that fail, and write DIR/catalog.parquet (on a Dask client, if one "
                   "is active, the files spread over its workers)")
    p.add_argument("-j", "--jobs", type=_positive_int,
                   help="with --to: files converted at once (default: one per core)")
    p.add_argument("--format", choices=("0.1", "0.2"),
                   help="the rumi spec to write: a rumi IN is written in the other spec by default; a GeoTIFF as "
                   "0.1 (0.2 with --time)")
    p.add_argument("--band", action="append", metavar="TEXT", dest="band_texts",
                   help="spec 0.2: a band's text, once per band in band order (default: the source's texts, "
                   "else 'band 1', 'band 2', ...)")
    p.add_argument("--time", nargs="+", metavar="ISO",
                   help="spec 0.2: one ISO date or datetime per time step, or START/END for an interval "
                   "(default: the source's; required from spec 0.1)")
    p.add_argument("--tile", type=_positive_int, default=512, help="tile size (default 512)")
    p.add_argument("--unit", choices=("tile", "cell"), default="tile", help="frame unit (default tile)")
    p.add_argument("--codec", help="a codec preset (default: the lossless default); for a rumi IN, re-encode every "
                   "frame with it (the spec is kept unless --format says otherwise)")
    p.add_argument("--blob", metavar="PATH", help="also write the header blob to PATH")
    p.add_argument("--crs", help="the EPSG code of a file with a geotransform but no CRS, or with a CRS no EPSG code "
                   "fits, e.g. EPSG:32633 (checked against the file's CRS and coordinates)")
    p.add_argument("--drop-georef", action="store_true",
                   help="convert the pixels only, without georeferencing (a file without a usable CRS)")


def _convert_many(args: argparse.Namespace) -> int:
    from rumimm.integrations.conversion import convert_into

    result = convert_into(args.source, args.to, times=args.time, tile=args.tile, unit=args.unit, codec=args.codec,
                          spec=args.format, jobs=args.jobs, progress=_progress())
    for source, error in result.errors:
        if "spec='0.2' labels every time step" in error:  # the Python API's words: the command's option instead
            from rumimm.integrations.conversion import TIME_HINT

            error = f"RumiError: spec 0.2 labels every time step and a spec 0.1 file has none: {TIME_HINT}, " \
                    "or --format 0.1 to keep its spec"
        print(f"rumimm convert: {_shown(source)}: {error}", file=sys.stderr)
    catalog = f"; catalog {result.catalog}" if result.catalog else ""
    print(f"{args.to}: {len(result.written)} written, {len(result.skipped)} kept, {len(result.errors)} failed{catalog}")
    return 1 if result.errors else 0


def _convert(args: argparse.Namespace) -> int:
    import time

    from rumimm.integrations.conversion import convert_any

    if args.to is not None:
        return _convert_many(args)
    if len(args.source) != 2 or args.dest is not None:
        raise UsageError("convert takes one IN and one OUT, or any number of IN with --to DIR")
    args.source, args.dest = args.source
    _readable(args.source, walk=False, gdal=True)  # missing, a FIFO, a header cut short, ...: as every command
    t0 = time.perf_counter()
    try:
        done = convert_any(args.source, args.dest, spec=args.format, codec=args.codec, descriptions=args.band_texts,
                           times=args.time, tile=args.tile, unit=args.unit, crs=args.crs, header_out=args.blob,
                           drop_georef=args.drop_georef, progress=_progress())
    except TypeError as exc:  # an argument of the wrong kind (the message says which)
        return _fail(str(exc))
    seconds = time.perf_counter() - t0
    size = _size(args.dest)
    if done.source_spec is not None:
        recoded = f", frames re-encoded with {args.codec!r}" if done.recoded else ""
        print(f"{_shown(args.dest)}: rumi spec {done.target_spec} from {_shown(args.source)} (spec "
              f"{done.source_spec}{recoded}), {size:,} bytes; header blob {len(done.blob)} bytes (rumimm index "
              f"{_shown(args.dest)} -o BLOB)")
        return 0
    where_blob = f"header blob in {args.blob}" if args.blob else \
        f"header blob: rumimm index {_shown(args.dest)} -o BLOB"
    # a GDAL virtual path (/vsizip/..., /vsicurl/...) has no size on this file system
    source = f"{args.source} ({os.path.getsize(args.source):,} bytes)" if os.path.isfile(args.source) else \
        _shown(args.source)
    print(f"{_shown(args.dest)}: {size:,} bytes from {source} in {seconds:.2f} s; {where_blob} ({len(done.blob)} "
          "bytes)")
    return 0


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", metavar="IN", help="the rumi file")
    p.add_argument("dest", metavar="OUT", help="the GeoTIFF to write")
    _add_header(p)
    p.add_argument("--compress", default="zstd", help="GDAL compression (default zstd; 'none' for none)")
    p.add_argument("--tile", type=_positive_int, help="GeoTIFF block size (default: the rumi tile, rounded up to 16s)")
    p.add_argument("--cog", action="store_true", help="write a Cloud Optimized GeoTIFF with overviews")


def _export(args: argparse.Namespace) -> int:
    import time

    from rumimm.integrations.geotiff import to_geotiff

    _destination(args.dest)
    t0 = time.perf_counter()
    _refused_as_everywhere(args.source, lambda: to_geotiff(
        args.source, args.dest, header=_read_blob(args.header), compress=args.compress, tile=args.tile,
        cog=args.cog, progress=_progress()))
    kind = "Cloud Optimized GeoTIFF" if args.cog else "GeoTIFF"
    print(f"{_shown(args.dest)}: {kind}, {_size(args.dest):,} bytes from {_shown(args.source)} "
          f"in {time.perf_counter() - t0:.2f} s")
    return 0


def _band_list(text: str) -> list[int]:
    try:
        bands = [int(v) for v in text.split(",")]
    except ValueError:
        bands = []
    if len(bands) not in (1, 3) or min(bands) < 1:
        raise argparse.ArgumentTypeError(f"must be one or three 1-based band numbers like 3,2,1, got {text!r}")
    return bands


def _quicklook_args(p: argparse.ArgumentParser) -> None:
    _add_path(p)
    p.add_argument("dest", metavar="OUT", help="the picture to write: .png, .jpg, .tif or .webp")
    _add_header(p)
    p.add_argument("--bands", type=_band_list, help="1-based bands, one (grey) or three (red,green,blue), e.g. 3,2,1 "
                   "(default 1,2,3, or 1 for fewer than three bands)")
    p.add_argument("--max-size", type=_positive_int, default=1024, help="longest side in pixels (default 1024)")


def _quicklook(args: argparse.Namespace) -> int:
    from rumimm.integrations.preview import BandNumberError, picture_format, preview_file

    try:
        kind = picture_format(args.dest)  # before the file is read
    except ValueError as exc:
        raise UsageError(f"argument OUT: {exc}") from None
    try:
        h, w = _refused_as_everywhere(args.path, lambda: preview_file(
            args.path, args.dest, bands=args.bands, max_size=args.max_size, header=_read_blob(args.header)))
    except BandNumberError as exc:
        raise UsageError(f"argument --bands: {exc}") from None
    print(f"{args.dest}: {w} x {h} {kind} of {_shown(args.path)}")
    return 0


register("convert", "convert a GeoTIFF (or any raster GDAL reads) into a rumi file, a rumi file to the other spec, "
         "or re-encode a rumi file with another codec",
         _convert_args, _convert)
register("export", "export a rumi file as a tiled, compressed GeoTIFF or COG", _export_args, _export)
register("quicklook", "write a percentile-stretched PNG preview of a rumi file", _quicklook_args, _quicklook)
register("demo", "write a synthetic EO scene, read windows back and check every pixel", _demo_args, _demo)
# More subcommands register here, with the same register(name, help, configure, run).


# -- clean (temporary files of killed writers) ------------------------------------------------
def _clean_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="a directory, or a .rumi file (existing or not)")


def _clean(args: argparse.Namespace) -> int:
    from rumimm.reader.inputs import check_clean_target
    from rumimm.store.atomic import clean

    for path in args.paths:
        check_clean_target(path)
        removed = clean(path)
        for name in removed:
            print(f"removed {name}")
        if not removed:
            print(f"{path}: no temporary files of killed writers")
    return 0


register("clean", "remove the temporary files that killed rumimm writers left behind", _clean_args, _clean)


# -- profile (codec recipes measured on a file's own frames) --------------------------------------
def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text}")
    return value


def _profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", metavar="PATH", help="a rumi file or URI (its frames are decoded), a .npy array file or a "
                   "GeoTIFF")
    p.add_argument("--samples", type=_positive_int, default=8, help="frames to measure, at most (default 8)")
    p.add_argument("--seed", type=int, default=0, help="seed of the frame positions (default 0)")
    p.add_argument("--tile", type=_positive_int, help="frame size (default: a rumi file's tile, else 512)")
    p.add_argument("--unit", choices=("tile", "cell"), help="frame unit (default: a rumi file's, else tile)")
    p.add_argument("--preset", action="append", metavar="NAME", dest="presets",
                   help="measure this preset (repeat; default: every preset that takes the dtype)")
    p.add_argument("--no-geozl", action="store_true", help="measure the presets only, not geozl's recipes")
    p.add_argument("--tolerance", type=float, default=1.10,
                   help="the recommendation is the fastest decoder within this factor of the smallest size "
                   "(default 1.10)")
    p.add_argument("--require", action="append", metavar="READER", default=[],
                   help="a reader the recommendation must suit: 'rumi-eo 0.16.0' or 'rumi-eo 0.26.1' (repeat)")
    p.add_argument("--budget", type=_positive_float, default=60.0,
                   help="seconds of measuring; sample frames not started by then are left out (default 60)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")


def _profile(args: argparse.Namespace) -> int:
    from rumimm.writer.profile import profile_codecs

    _readable(args.path)  # a truncated rumi file is refused as every command refuses it, not read by GDAL
    result = profile_codecs(args.path, tile=args.tile, unit=args.unit, samples=args.samples, seed=args.seed,
                     presets=args.presets, geozl=not args.no_geozl, budget=args.budget,
                     tolerance=args.tolerance, require=args.require)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.table())
    return 0


register("profile", "time every codec preset and geozl recipe on sample frames of a file and recommend one "
         "for training reads", _profile_args, _profile)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
