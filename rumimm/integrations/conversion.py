"""What ``rumimm convert`` decides: which writer a source goes to, and in which spec.

A rumi source (either spec) goes to :func:`rumimm.convert` (frames kept, or re-encoded
with ``codec``); anything else to :func:`rumimm.from_geotiff` (GDAL reads it).  The
input is classified first (``reader.inputs``), so a broken rumi file is refused with
rumimm's message and a file GDAL does not know gets one rumimm message, never GDAL's.
The command line only parses arguments and renders :class:`Conversion`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rumimm.errors import RumiError

if TYPE_CHECKING:
    from rumimm._typing import CRSArg, ProgressArg, SpecName, StrPath, Unit
    from rumimm.codec import Codec
    from rumimm.integrations.bulk import BulkResult

__all__ = [
    "SMALL_TILE", "TIME_HINT", "Conversion", "convert_any", "convert_into", "parse_times", "rumi_target",
    "small_tile_warning",
]

#: Tiles below this size make frames whose overhead outweighs compression (warned about).
SMALL_TILE = 64


def small_tile_warning(tile: int) -> str | None:
    """Why ``tile`` is too small, or None."""
    if tile >= SMALL_TILE:
        return None
    return (f"tile {tile} is small: per-frame overhead makes the file larger than it need be and the header "
            f"blob large; {SMALL_TILE} to 1024 (usually 256 or 512) suits most images")


@dataclass(frozen=True)
class Conversion:
    """What a conversion did: the blob written, the source's spec (None: a raster GDAL read) and the target's."""

    blob: bytes
    source_spec: str | None
    target_spec: str
    recoded: bool


def parse_times(texts: Sequence[str] | None) -> list[str | tuple[str, str]] | None:
    """``--time`` arguments: each an ISO date or datetime, or ``START/END`` for an interval."""
    if not texts:
        return None
    return [t.partition("/")[::2] if "/" in t else t for t in texts]  # (START, END)


def rumi_target(source_spec: SpecName, codec: str | Codec | None, spec: SpecName | None) -> SpecName:
    """The spec a rumi source is written in: ``spec``; else re-encoding keeps the spec, a copy goes to the other."""
    from rumimm.format.spec import spec_named

    return spec or (source_spec if codec else spec_named(source_spec).other.name)


TIME_HINT = "pass --time ISO (a date or datetime, or START/END for an interval), e.g. --time 2026-01-01"


def convert_any(source: StrPath, dest: StrPath, *, spec: SpecName | None = None, codec: str | Codec | None = None,
                descriptions: Sequence[str] | None = None, times: Sequence[str] | None = None, tile: int = 512,
                unit: Unit = "tile", crs: CRSArg = None, header_out: StrPath | None = None, drop_georef: bool = False,
                progress: ProgressArg = None) -> Conversion:
    """Convert ``source`` (a rumi file or URI, or a raster GDAL reads) into the rumi file ``dest``.

    ``times``: ``--time`` texts (see :func:`parse_times`).  ``progress`` is used for a
    GeoTIFF and for re-encoding (a copy of frames is too quick to need one).

    Raises
    ------
    RumiError
        A source no reader takes (one message per kind, ``reader.inputs``), spec 0.2
        asked for without the time it needs, or what the writer refuses.
    FileNotFoundError
        No such source, or no directory for ``dest``.
    """
    from rumimm.reader.inputs import check_destination, classify, not_the_source, remote_spec

    found = classify(source)
    check_destination(dest)
    if header_out is not None:  # checked before anything is written: a failure leaves no output
        check_destination(header_out)
    not_the_source(source, dest)
    source_spec = found.spec if found is not None else remote_spec(source)
    time = parse_times(times)
    if source_spec is not None:
        from rumimm.format.spec import spec_named
        from rumimm.writer.convert import convert

        target = rumi_target(source_spec, codec, spec)
        if spec_named(target).has_time and not spec_named(source_spec).has_time and time is None:
            raise RumiError(f"spec 0.2 labels every time step and a spec 0.1 file has none: {TIME_HINT}")
        blob = convert(source, dest, spec=target, codec=codec, descriptions=descriptions, time=time,
                       progress=progress if codec else None)
        if header_out is not None:
            from rumimm.writer.atomic import replacing

            with replacing(header_out) as tmp, open(tmp, "wb") as fh:
                fh.write(bytes(blob))
        return Conversion(bytes(blob), source_spec, target, bool(codec))
    from rumimm.integrations.geotiff import from_geotiff

    fmt = spec or ("0.2" if descriptions or times else None)
    if fmt == "0.2" and time is None:
        raise RumiError(f"spec 0.2 labels the image's time step: {TIME_HINT}")
    small = small_tile_warning(tile)
    if small:
        import warnings

        from rumimm.errors import RumiWarning

        warnings.warn(small, RumiWarning, stacklevel=2)
    try:
        blob = from_geotiff(source, dest, tile=tile, unit=unit, codec=codec, crs=crs, header_out=header_out,
                            progress=progress, drop_georef=drop_georef, spec=fmt, descriptions=descriptions, time=time)
    except Exception as exc:
        from rumimm.reader.inputs import gdal_refusal

        refusal = gdal_refusal(source, exc) if found is not None else None
        if refusal is not None:
            raise refusal from None
        raise
    return Conversion(bytes(blob), None, fmt or "0.1", bool(codec))


def convert_into(sources: Sequence[StrPath], dest_dir: StrPath, *, times: Sequence[str] | None = None,
                 tile: int = 512, unit: Unit = "tile", codec: str | None = None, spec: SpecName | None = None,
                 jobs: int | None = None, progress: ProgressArg = None) -> BulkResult:
    """``rumimm convert IN... --to DIR``: :func:`rumimm.convert_many` with ``--time`` texts (:func:`parse_times`).

    A file that fails is in the result's ``errors`` and the others go on.
    """
    from rumimm.integrations.bulk import convert_many

    return convert_many(list(sources), dest_dir, tile=tile, unit=unit, codec=codec, spec=spec,
                        time=parse_times(times), jobs=jobs, progress=progress)
