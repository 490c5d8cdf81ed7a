"""GeoTIFF in and out: stream a GeoTIFF (or COG) into a rumi file and a rumi file into a GeoTIFF.

Both directions move one row of tiles (or GeoTIFF blocks) at a time through rasterio
windows and :class:`rumimm.Writer`, so peak memory is about one row of tiles whatever
the image size, and both write atomically.  The transform is carried exactly (its six
coefficients as GDAL reads them); the CRS as its EPSG code, found as GDAL identifies
CRSs without a code of their own (:mod:`rumimm.format.crs_identify`: one warning names
the code).  PixelIsPoint files are read and written with ``GTIFF_POINT_GEO_IGNORE`` so
their matrix is not shifted by half a pixel on the way.  Nodata, band descriptions,
colour interpretation, scales, offsets, units, colour maps and tags go into the rumi
file's PAM sidecar (``NAME.rumi.aux.xml``) and come back out on export; what neither
holds (overviews, mask bands, GCPs, RPCs) is listed in one warning.  A file with a CRS
but no geotransform (rasterio's identity) is stored without georeferencing, with a
warning.  An export replaces what GDAL would read as part of the old file (its
``.aux.xml``, ``.msk`` and ``.ovr``).

Sample types map one to one where GDAL has them: the 8 to 64-bit integers, float32/64,
complex64/128; rumi's bool, uint2 and uint4 are GDAL ``Byte`` with ``NBITS`` 1, 2, 4,
and float16 is ``Float32`` with ``NBITS=16`` (GDAL stores it as half floats).
"""

from __future__ import annotations

import errno
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from rumimm._deprecation import UNSET, renamed_keyword
from rumimm.errors import CRSError, RumiError, RumiWarning, where
from rumimm.reader.rasterio_surface import (
    COMPRESSIONS_WITH_PREDICTOR,
    GDAL_NATIVE,
    NBITS_IN,
    gtiff_profile,
    nodata_key,
    require,
)
from rumimm.writer.atomic import replacing, temp_path

__all__ = ["COMPRESSIONS_WITH_PREDICTOR", "from_geotiff", "gtiff_profile", "to_geotiff"]

if TYPE_CHECKING:
    from numpy.typing import NDArray
    from rasterio.env import Env
    from rasterio.io import DatasetReader, DatasetWriter
    from rasterio.windows import Window

    from rumimm._typing import CRSArg, ProgressArg, SpecName, StrPath, Tile, TimeArg, Unit
    from rumimm.codec import Codec
    from rumimm.format.pam import Metadata
    from rumimm.reader.image import Image

#: larger cache only holds blocks that are never needed again (GDAL's default is 5 % of RAM).
GDAL_CACHE_BYTES = 16 << 20
#: Files GDAL reads as part of a GeoTIFF ``NAME``: ``NAME.msk`` (mask) and ``NAME.ovr`` (overviews), in
#: either case (GDAL looks for ``.OVR``/``.MSK`` when the lower-case one is missing).
ASSOCIATED = (".msk", ".MSK", ".ovr", ".OVR")


def _env(rasterio: ModuleType, **options: object) -> Env:
    """A rasterio Env that keeps PixelIsPoint matrices as stored and GDAL's block cache bounded."""
    return rasterio.Env(GTIFF_POINT_GEO_IGNORE=True, GDAL_CACHEMAX=GDAL_CACHE_BYTES, **options)


# --------------------------------------------------------------------------- #
# rumi -> GeoTIFF
# --------------------------------------------------------------------------- #
def _restore_metadata(out: DatasetWriter, img: Image) -> list[str]:
    """Put an image's sidecar metadata on a GeoTIFF being created; return what a GeoTIFF cannot take."""
    meta = getattr(img, "metadata", None)
    if meta is None or meta.is_empty():
        return []
    from rasterio.enums import ColorInterp

    lost = []
    bands = meta.bands
    if len({nodata_key(b.nodata) for b in bands}) > 1:
        lost.append(f"per-band nodata {[b.nodata for b in bands]} (a GeoTIFF has one nodata; none was written)")
    for i, b in enumerate(bands, 1):
        if b.description:
            out.set_band_description(i, b.description)
        if b.unit:
            out.set_band_unit(i, b.unit)
        if b.tags:
            out.update_tags(i, **b.tags)
        if b.colormap:
            try:
                out.write_colormap(i, b.colormap)
            except Exception as exc:
                lost.append(f"the colour map of band {i} ({' '.join(str(exc).split())})")
    if any(b.scale is not None for b in bands):
        out.scales = tuple(1.0 if b.scale is None else b.scale for b in bands)
    if any(b.offset is not None for b in bands):
        out.offsets = tuple(0.0 if b.offset is None else b.offset for b in bands)
    if any(b.colorinterp is not None for b in bands):
        out.colorinterp = [ColorInterp[b.colorinterp or ("gray" if i == 0 else "undefined")]
                           for i, b in enumerate(bands)]
    if meta.tags:
        out.update_tags(**meta.tags)
    for domain, items in meta.domains.items():
        if domain != "RUMIMM" and items:
            out.update_tags(ns=domain, **items)
    return lost


def _to_gdal(block: np.ndarray, gdal_dtype: str) -> np.ndarray:
    """A block of rumi samples as the GDAL dtype that holds them (a view for the 1-byte types)."""
    if block.dtype == np.dtype(gdal_dtype):
        return block
    if block.dtype.itemsize == 1 and gdal_dtype == "uint8":
        return block.view(np.uint8)  # bool, uint2, uint4: one sample per byte, low bits
    return block.astype(gdal_dtype)  # float16 -> float32, exact


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def cog_available() -> bool:
    """Whether rasterio's GDAL has the COG driver (GDAL >= 3.1)."""
    rasterio = require("rasterio")
    with rasterio.Env() as env:
        return "COG" in env.drivers()


def to_geotiff(src: StrPath | Image, dst: StrPath, *, header: bytes | None = None, compress: str | None = "zstd",
               predictor: int | None = None, tile: Tile | None = None, interleave: str | None = None,
               cog: bool = False, bigtiff: str = "IF_SAFER", threads: int | None = None,
               progress: ProgressArg = None, storage_options: Mapping[str, Any] | None = None,
               overwrite: bool = True) -> None:
    """Write a rumi image as a tiled, compressed GeoTIFF (or a COG), one row of blocks at a time.

    Parameters
    ----------
    src : str, os.PathLike or Image
        The rumi file (opened with ``header`` if given) or an open Image.  The
        frames are read through a handle of their own, without a frame cache.
    dst : str or os.PathLike
        The GeoTIFF to create or replace (atomically), or a URI (``s3://``, ``gs://``, ``az://``):
        GDAL writes a GeoTIFF out of order, so it is written to a local temporary file, then
        uploaded (visible only once complete).  A replaced file's ``.aux.xml``, ``.msk``
        and ``.ovr``, which GDAL would read as part of the new one, are removed once it
        is in place.
    header : bytes, optional
        ``src``'s header blob.
    storage_options, overwrite
        A remote ``src``'s or ``dst``'s client settings (as for :func:`rumimm.write`);
        ``overwrite=False`` refuses an existing ``dst``.
    compress, predictor, tile, interleave, bigtiff
        As for :func:`gtiff_profile`: zstd with the predictor that suits the dtype by default.
    cog : bool
        Write a Cloud Optimized GeoTIFF (with overviews) through GDAL's COG driver;
        needs GDAL >= 3.1.  The image is first streamed into a temporary GeoTIFF.
    threads : int, optional
        Threads GDAL compresses blocks on (default ``rumimm.get_num_threads()``),
        checked as ``rumimm.write`` checks its own.
    progress : None, bool or callable
        ``True`` for a bar, or ``progress(done, total)`` per row of blocks.

    Raises
    ------
    RumiError
        GeoTIFF has no sample type for the image's dtype.
    TypeError, ValueError
        ``threads`` is not an int >= 1 (or None).
    ImportError
        rasterio is missing, or ``cog=True`` and GDAL has no COG driver.

    Warns
    -----
    RumiWarning
        Once, listing what the GeoTIFF does not get: per-band nodata, a colour map GDAL
        refuses, or a 64-bit integer nodata beyond 2**53 (rasterio sets nodata as a
        float64, which GDAL would read back as another value).
    """
    from rumimm.reader.image import Image
    from rumimm.reader.image import open as open_image
    from rumimm.store import is_remote, open_writer
    from rumimm.writer.args import resolve_threads

    if isinstance(dst, str) and is_remote(dst):
        import tempfile

        with tempfile.TemporaryDirectory(prefix="rumimm-export-") as folder:
            local = os.path.join(folder, "export.tif")
            to_geotiff(src, local, header=header, compress=compress, predictor=predictor, tile=tile,
                       interleave=interleave, cog=cog, bigtiff=bigtiff, threads=threads, progress=progress,
                       storage_options=storage_options)
            with open(local, "rb") as fh, open_writer(dst, storage_options, overwrite=overwrite) as out:
                for chunk in iter(lambda: fh.read(8 << 20), b""):
                    out.write(chunk)
        return
    if not overwrite and os.path.lexists(os.fspath(dst)):
        raise FileExistsError(f"{os.fspath(dst)!s}: the file exists and overwrite=False; pass overwrite=True to "
                              "replace it")
    rasterio = require("rasterio")
    if cog and not cog_available():
        raise ImportError("cog=True needs GDAL >= 3.1 (the COG driver); this rasterio's GDAL has none")
    if isinstance(src, Image):  # a private handle: streaming every frame once must not fill the shared cache
        header = bytes(src.header)
        src = src.path
    threads = resolve_threads(threads)
    remote_src = isinstance(src, str) and is_remote(src)
    own = None
    try:
        with open_image(src, header=header, cache_bytes=0,
                        storage_options=storage_options if remote_src else None) as img, replacing(dst) as tmp:
            own = tmp + ".aux.xml"  # what GDAL keeps beside the GeoTIFF it writes, if anything
            _one_step(img)
            profile = gtiff_profile(img, compress=compress, predictor=predictor, tile=tile, interleave=interleave,
                                    bigtiff=bigtiff)
            profile["num_threads"] = threads  # a creation option: GDAL compresses blocks in parallel
            lost = _inexact_nodata(profile)
            with _env(rasterio):
                if not cog:
                    _write_gtiff(rasterio, img, tmp, profile, progress, lost)
                else:
                    _write_cog(rasterio, img, dst, tmp, profile, progress, lost)
    except BaseException:
        if own is not None:
            _remove(own)
        raise
    # the GeoTIFF replaced: a sidecar of the file it replaced (nodata, descriptions) must not describe it,
    # nor may its external mask or overviews be applied to the new one (GDAL's Create deletes them too)
    side = os.fspath(dst) + ".aux.xml"
    if os.path.exists(own):
        os.replace(own, side)
    else:
        _remove(side)
    for ext in ASSOCIATED:
        _remove(os.fspath(dst) + ext)


def _inexact_nodata(profile: dict[str, Any]) -> list[str]:
    """Take out of ``profile`` a nodata GDAL would read back as another value; say so (for the warning).

    rasterio sets nodata as a float64, whose text (``-9.2233720368547758e+18``) GDAL reads
    for a 64-bit integer band with ``strtoll`` (-9): an integer beyond 2**53 is not carried.
    """
    v = profile.get("nodata")
    if not (isinstance(v, int) and abs(v) > 2**53 and np.dtype(profile["dtype"]).kind in "iu"):
        return []
    profile["nodata"] = None
    return [f"rasterio cannot write nodata {v} exactly (it sets a nodata as a float64, which GDAL reads back "
            "as another value for an integer beyond 2**53): none was written"]


def _write_cog(rasterio: ModuleType, img: Image, dst: StrPath, tmp: str, profile: dict[str, Any],
               progress: ProgressArg, lost: list[str]) -> None:
    """A Cloud Optimized GeoTIFF at ``tmp``: GDAL's COG driver copies from a finished GeoTIFF."""
    staged = temp_path(dst)
    try:
        _write_gtiff(rasterio, img, staged, profile, progress, lost)
        opts = {k.upper(): v for k, v in profile.items() if k in ("compress", "predictor", "bigtiff", "num_threads")}
        opts.setdefault("COMPRESS", "NONE")  # the COG driver's own default is LZW, not "none"
        opts["BLOCKSIZE"] = max(profile["blockxsize"], profile["blockysize"])
        require("rasterio.shutil").copy(staged, tmp, driver="COG", **opts)
    finally:
        _remove(staged)
        _remove(staged + ".aux.xml")


def _write_gtiff(rasterio: ModuleType, img: Image, path: str, profile: dict[str, Any], progress: ProgressArg,
                 lost: list[str]) -> None:
    """Stream ``img`` into a GeoTIFF at ``path``, one row of blocks at a time; ``lost``: what to warn of."""
    from rumimm.progress import Progress

    height, width = img.shape[1:]
    step = profile["blockysize"]
    rows = range(0, height, step)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        out = rasterio.open(path, "w", driver="GTiff", **profile)
    with out, Progress(progress, len(rows), desc="export", unit="row") as bar:
        if img.pixel_is_point:
            out.update_tags(AREA_OR_POINT="Point")
        unheld = _restore_metadata(out, img)
        said = lost + ([f"a GeoTIFF cannot hold {'; '.join(unheld)}"] if unheld else [])
        if said:
            warnings.warn(f"{where(img.path)}{'; '.join(said)}", RumiWarning, stacklevel=3)
        for y0 in rows:
            y1 = min(y0 + step, height)
            out.write(_to_gdal(img[:, y0:y1, :], profile["dtype"]),
                      window=rasterio.windows.Window(0, y0, width, y1 - y0))
            bar.advance()


# --------------------------------------------------------------------------- #
# GeoTIFF -> rumi
# --------------------------------------------------------------------------- #
def _source_dtype(ds: DatasetReader) -> np.dtype:
    """The rumi dtype that holds a GDAL dataset's samples exactly."""
    from rumimm.format.dtypes import DTYPES

    kinds = set(ds.dtypes)
    if len(kinds) != 1:
        raise RumiError(f"{where(ds.name)}bands have different dtypes {sorted(kinds)}; rumi holds one dtype per file")
    name = kinds.pop()
    structure = ds.tags(1, ns="IMAGE_STRUCTURE")
    nbits = int(structure.get("NBITS", 0) or 0)
    if (name, nbits) in NBITS_IN:
        return DTYPES[NBITS_IN[(name, nbits)]]
    if name == "uint8" and structure.get("PIXELTYPE") == "SIGNEDBYTE":
        return np.dtype(np.int8)
    if name == "float16":  # GDAL >= 3.11 presents half floats as its own Float16 type, no NBITS
        return np.dtype(np.float16)
    if name not in GDAL_NATIVE:
        raise RumiError(f"{where(ds.name)}GDAL sample type {name} has no rumi encoding in this converter; "
                        "convert it to another type with gdal_translate -ot first")
    return np.dtype(name)


def _source_georef(ds: DatasetReader, crs: CRSArg,
                   drop_georef: bool) -> tuple[tuple[float, ...] | None, int | None, str | None]:
    """(transform, EPSG code, note) to store, or CRSError saying what to do.

    ``note`` says how a CRS without a code of its own was identified (for one warning).
    """
    from rumimm.format.crs_identify import identify, short_name
    from rumimm.format.georef import resolve_crs, resolve_transform

    if drop_georef:
        return None, None, None
    identity = ds.transform.is_identity
    if not identity:  # the file's own values: a CRSError about the file, not the Writer's ValueError about an argument
        try:
            resolve_transform(ds.transform)
        except ValueError as exc:
            raise CRSError(f"{where(ds.name)}the geotransform cannot be stored ({exc}); drop_georef=True "
                           "(--drop-georef) converts the pixels without it") from None
    if crs is not None:
        if identity:
            raise CRSError(f"{where(ds.name)}crs={crs!r} was given but the file has no geotransform")
        code = resolve_crs(crs)
        if ds.crs is not None:
            try:
                found = identify(ds.crs, _centre(ds))
            except CRSError:
                found = None  # the file's CRS has no code: the caller says which it is
            if found is not None and found.epsg != code:
                raise CRSError(f"{where(ds.name)}crs=EPSG:{code} was given, but the file's CRS "
                               f"({short_name(ds.crs)}) is EPSG:{found.epsg} ({found.name}); drop crs= to keep it, "
                               "or reproject the file (gdalwarp -t_srs) if it is to be in another CRS")
        return tuple(ds.transform)[:6], code, None
    if identity:  # rasterio's identity stands for no geotransform: a CRS alone places no pixel
        note = None if ds.crs is None else (
            f"{where(ds.name)}the CRS ({short_name(ds.crs)}) is dropped: the file has no geotransform, so "
            "nothing places its pixels in it; stored without georeferencing")
        return None, None, note
    if ds.crs is None:
        raise CRSError(f"{where(ds.name)}the file has a geotransform but no CRS; pass crs=<EPSG code> "
                       "(rumimm convert --crs EPSG:<code>) with the CRS it is in, or drop_georef=True "
                       "(--drop-georef) to convert the pixels without georeferencing")
    try:
        found = identify(ds.crs, _centre(ds))
        code = resolve_crs(found.epsg)
    except CRSError as exc:
        raise CRSError(f"{where(ds.name)}{exc}") from None
    note = None if found.exact else f"{where(ds.name)}the CRS ({short_name(ds.crs)}) has no EPSG code of its own; " \
                                    f"stored as EPSG:{code}: {found.note}"
    return tuple(ds.transform)[:6], code, note


def _centre(ds: DatasetReader) -> tuple[float, float]:
    """The image centre in CRS units."""
    a, b, c, d, e, f = tuple(ds.transform)[:6]
    u, v = ds.width / 2.0, ds.height / 2.0
    return (a * u + b * v + c, d * u + e * v + f)


def _source_metadata(ds: DatasetReader, dtype: np.dtype) -> tuple[Metadata, list[str]]:
    """(Metadata for the sidecar, what of it does not fit the rumi dtype) of a GDAL dataset."""
    from rasterio.enums import ColorInterp

    from rumimm.format.pam import Metadata

    count = ds.count
    lost: list[str] = []
    exact = _exact_nodata(ds, dtype, lost)
    nodata: list | None = exact
    if any(v is not None for v in exact):
        try:
            Metadata.from_args(count, nodata=nodata).check_dtype(dtype)
        except ValueError as exc:
            lost.append(str(exc))
            nodata = None
    interp: list | None = [c.name for c in ds.colorinterp]
    if all(c in (ColorInterp.gray, ColorInterp.undefined) for c in ds.colorinterp):
        interp = None  # what GDAL reports for any file without a colour interpretation
    maps = {}
    for i in ds.indexes:
        try:
            maps[i] = {int(k): tuple(int(c) for c in v) for k, v in ds.colormap(i).items()}
        except ValueError:
            pass
    scales, offsets = list(ds.scales), list(ds.offsets)

    def held(what: str, text: str, **kw: Any) -> str | None:
        """``text``, or None (noted in ``lost``) when a sidecar cannot hold it (a control character)."""
        try:
            Metadata.from_args(1, **kw)
            return text
        except ValueError:
            lost.append(f"{what} {text[:40]!r} (a control character XML cannot hold)")
            return None

    def held_tags(what: str, tags: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in tags.items() if held(f"{what} {k[:40]!r}", v, tags={k: v}) is not None}

    units = [held(f"band {i} unit", u, units=[u]) if u else None for i, u in enumerate(ds.units, 1)]
    descriptions = [held(f"band {i} description", d, descriptions=[d]) if d else None
                    for i, d in enumerate(ds.descriptions, 1)]
    tags = held_tags("tag", {k: v for k, v in ds.tags().items() if k != "AREA_OR_POINT"})
    band_tags = {i: held_tags(f"band {i} tag", ds.tags(i)) for i in ds.indexes}
    meta = Metadata.from_args(
        count, nodata=nodata, descriptions=descriptions, colorinterp=interp,
        scales=scales if any(v != 1 for v in scales) else None,
        offsets=offsets if any(v != 0 for v in offsets) else None,
        units=units if any(units) else None, colormaps=maps or None, tags=tags,
        band_tags={i: t for i, t in band_tags.items() if t} or None)
    return meta, lost


def _exact_nodata(ds: DatasetReader, dtype: np.dtype, lost: list[str]) -> list:
    """The bands' nodata as GDAL holds them: a 64-bit integer one beyond 2**53 exactly, not rasterio's float.

    rasterio rounds such a nodata through a float64 (and gives None for 2**64 - 1).  GDAL
    gives its exact text to a copy: a VRT of ``ds`` (no pixels) lists each band's
    ``NoDataValue`` as GDAL reads it, whichever of the TIFF tag or the PAM sidecar holds
    it.  When that fails, rasterio's value is kept and said in ``lost``.
    """
    values = list(ds.nodatavals)
    doubt = [i for i, v in enumerate(values) if v is None or (math.isfinite(v) and abs(v) > 2**53)]
    if dtype.kind not in "iu" or dtype.itemsize != 8 or not doubt:
        return values
    import re
    import tempfile
    import xml.etree.ElementTree as ET

    wide = [i for i in doubt if values[i] is not None]
    try:
        with tempfile.TemporaryDirectory(prefix="rumimm-nodata-") as folder:
            vrt = os.path.join(folder, "nodata.vrt")
            require("rasterio.shutil").copy(ds, vrt, driver="VRT")
            root = ET.parse(vrt).getroot()
        texts = [(el.findtext("NoDataValue") or "").strip() for el in root.findall("VRTRasterBand")]
        if len(texts) != len(values):
            raise ValueError("another band count")
        exact = {i: int(texts[i]) for i in doubt if re.fullmatch(r"[+-]?[0-9]{1,20}", texts[i], re.ASCII)}
        if any(i not in exact or float(exact[i]) != values[i] for i in wide):  # not the value rasterio rounded
            raise ValueError("another nodata")
    except Exception:
        if wide:
            lost.append(f"the exact nodata of band{'s' if len(wide) > 1 else ''} "
                        f"{', '.join(str(i + 1) for i in wide)} (GDAL did not give its text; "
                        f"{values[wide[0]]!r} is kept, which may be rounded)")
        return values
    for i, v in exact.items():
        values[i] = v
    return values


def _unheld(ds: DatasetReader) -> list[str]:
    """What a dataset carries that neither rumi nor its PAM sidecar holds, as short phrases."""
    from rasterio.enums import MaskFlags

    found = []
    levels = ds.overviews(1)
    if levels:
        found.append(f"overviews ({len(levels)} level{'s' if len(levels) != 1 else ''})")
    flags = ds.mask_flag_enums
    if any(MaskFlags.per_dataset in f and MaskFlags.alpha not in f for f in flags):
        found.append("a mask band (convert it to a band, or to nodata, first)")
    if ds.gcps[0]:
        found.append("ground control points")
    if ds.rpcs:
        found.append("RPCs")
    return found


def from_geotiff(src: StrPath, dst: StrPath, *, tile: Tile = 512, unit: Unit = "tile", codec: str | Codec | None = None,
                 crs: CRSArg = None, header_out: StrPath | None = None, progress: ProgressArg = None,
                 threads: int | None = None, verify: bool = False, drop_georef: bool = False,
                 spec: SpecName | None = None, descriptions: Sequence[str] | None = None, time: TimeArg = None,
                 storage_options: Mapping[str, Any] | None = None, overwrite: bool = True,
                 format: Any = UNSET, bands: Any = UNSET) -> bytes:
    """Convert a GeoTIFF (or anything GDAL reads) into a rumi file, one row of tiles at a time.

    Parameters
    ----------
    src : str or os.PathLike
        The GeoTIFF, COG or other GDAL raster.
    dst : str or os.PathLike
        The rumi file to create or replace (atomically), or a URI (``s3://``, ``gs://``,
        ``az://``): uploaded as it is written, visible only once complete; a COG in a bucket
        (GDAL's ``/vsis3/`` and friends, or ``s3://``) goes to a bucket with no local copy.
    storage_options, overwrite
        As for :func:`rumimm.write`: a remote ``dst``'s client settings; False refuses an
        existing ``dst``.
    tile, unit, codec, threads, verify
        As for :func:`rumimm.write`.
    crs : int or str, optional
        The EPSG code to store for a file with a geotransform but no CRS, or with a
        CRS no EPSG code fits.  A file whose CRS is identified as another code is refused.
    header_out : str or os.PathLike, optional
        Also write the header blob to this file.
    progress : None, bool or callable
        ``True`` for a bar, or ``progress(done, total)`` after each row of tiles.
    drop_georef : bool
        Convert the pixels only, without georeferencing (for a file with a geotransform
        but no CRS, or a CRS no EPSG code fits).
    spec, descriptions, time
        As for :func:`rumimm.write`: ``spec="0.2"`` writes spec 0.2, which needs
        ``time`` (one coordinate) and keeps a text per band: ``descriptions``, else the
        file's band descriptions when every band has a distinct one, else
        ``"band 1"``, ``"band 2"``, ...
    format, bands
        Deprecated names of ``spec`` and ``descriptions``.

    Returns
    -------
    bytes
        The header blob.

    Raises
    ------
    FileNotFoundError
        No such ``src`` (as :func:`rumimm.open`).
    CRSError
        No EPSG code has the file's projection, parameters and ellipsoid, or the file
        has a transform but no CRS, or ``crs`` contradicts the file's CRS or its
        coordinates; the message says what to pass or how to reproject.
    RumiError
        A file GDAL cannot open, bands of different dtypes, a GDAL type rumi has no
        encoding for, or a block GDAL cannot read (the message names the file, the
        rows and GDAL's reason).

    Warns
    -----
    RumiWarning
        When the CRS has no EPSG code of its own but has one's projection, parameters
        and ellipsoid (the warning names the code stored); when the file has a CRS but
        no geotransform (stored without georeferencing: nothing places the pixels in
        the CRS); and once listing what neither rumi nor its sidecar holds (overviews,
        mask bands, GCPs, RPCs, a complex band's nodata).

    Notes
    -----
    Nodata, band descriptions, colour interpretation (alpha included), scales, offsets,
    units, colour maps and tags go into the PAM sidecar ``dst + ".aux.xml"`` (see
    :func:`rumimm.write`); :func:`to_geotiff` puts them back.  A 64-bit integer nodata
    is taken as GDAL holds it, not as rasterio's float64 (which rounds one beyond 2**53).
    """
    from rumimm.progress import Progress
    from rumimm.reader.inputs import not_the_source
    from rumimm.writer.writer import Writer

    spec = renamed_keyword("from_geotiff", "format", "spec", format, spec)
    descriptions = renamed_keyword("from_geotiff", "bands", "descriptions", bands, descriptions)
    not_the_source(src, dst)
    if header_out is not None:  # before anything is written: a failure leaves no output
        from rumimm.reader.inputs import check_destination

        check_destination(header_out)
    rasterio = require("rasterio")
    with _env(rasterio):
        ds = _open_source(rasterio, src)
        with ds:
            dtype = _source_dtype(ds)
            transform, epsg, crs_note = _source_georef(ds, crs, drop_georef)
            point = ds.tags().get("AREA_OR_POINT", "Area").lower() == "point"
            metadata, unfit = _source_metadata(ds, dtype)
            lost = unfit + _unheld(ds)
            if spec == "0.2" and descriptions is None:
                named = [d for d in ds.descriptions if d]
                descriptions = (list(ds.descriptions) if len(named) == ds.count and len(set(named)) == ds.count
                         else [f"band {i + 1}" for i in range(ds.count)])
            height, width = ds.height, ds.width
            Window = rasterio.windows.Window
            # the Writer checks every argument before anything is said about the file
            with Writer(dst, (ds.count, height, width), dtype, tile=tile, unit=unit, transform=transform, crs=epsg,
                        pixel_is_point=point, codec=codec, threads=threads, verify=verify, metadata=metadata,
                        spec=spec, descriptions=descriptions, time=time, storage_options=storage_options,
                        overwrite=overwrite) as w, \
                    Progress(progress, w.rows, desc="convert", unit="row") as bar:
                if crs_note:
                    warnings.warn(crs_note, RumiWarning, stacklevel=2)
                if lost:
                    warnings.warn(f"{where(ds.name)}rumi cannot hold {'; '.join(lost)}: not in {os.fspath(dst)}",
                                  RumiWarning, stacklevel=2)
                for r in range(w.rows):
                    y0, y1 = w.row_span(r)
                    block = _read_rows(rasterio, ds, Window(0, y0, width, y1 - y0))
                    w.write_row(r, block if block.dtype == dtype else _from_gdal(block, dtype))
                    del block
                    bar.advance()
    blob = w.close()  # closed by the with block: the same blob again
    if header_out is not None:
        with replacing(header_out) as tmp, open(tmp, "wb") as fh:
            fh.write(blob)
    return blob


def _open_source(rasterio: ModuleType, src: StrPath) -> DatasetReader:
    """``src`` opened by rasterio; else FileNotFoundError (as ``rumimm.open``) or RumiError naming the file."""
    from rumimm.reader.inputs import gdal_refusal
    from rumimm.store import is_remote

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
            return rasterio.open(src)
    except rasterio.errors.RasterioIOError as exc:
        path = os.fspath(src)
        local = not (is_remote(path) or path.startswith("/vsi"))
        if local and not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
        if local and os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "is a directory; name the raster file to read", path) from None
        refusal = gdal_refusal(path, exc) if local else None
        why = " ".join(str(exc).split())
        raise refusal or RumiError(f"{where(path)}GDAL cannot open it as a raster: {why}") from None


def _read_rows(rasterio: ModuleType, ds: DatasetReader, window: Window) -> NDArray[Any]:
    """Rows of a GDAL dataset, or RumiError naming the file, the rows and GDAL's own reason."""
    try:
        return ds.read(window=window)
    except rasterio.errors.RasterioError as exc:
        reasons: list[str] = []
        e: BaseException | None = exc
        while e is not None and len(reasons) < 4:  # rasterio chains GDAL's message as the cause
            text = " ".join(str(e).split())
            if text and "See previous exception" not in text:
                reasons.append(text)
            e = e.__cause__ or e.__context__
        why = "; ".join(dict.fromkeys(reasons)) or type(exc).__name__
        rows = f"rows {window.row_off} to {window.row_off + window.height - 1}"
        raise RumiError(f"{where(ds.name)}GDAL cannot read {rows}: {why}; the file may be truncated or "
                        "corrupt") from None


def _from_gdal(block: NDArray[Any], dtype: np.dtype) -> NDArray[Any]:
    """GDAL samples as the rumi dtype that holds them (a view for the 1-byte types)."""
    if block.dtype.itemsize == 1 and dtype.itemsize == 1:
        return block.view(dtype)
    return block.astype(dtype)  # float32 holding NBITS=16 halves -> float16, exact


def _one_step(img: Image) -> None:
    if img.ndim == 4:
        raise RumiError(f"{img.path} has {img.shape[0]} time steps (T, B, Y, X); a GeoTIFF holds one (B, Y, X) "
                        "image: write a step of it (rumimm.write(path, img[t], spec='0.2', ...)) and export that")
