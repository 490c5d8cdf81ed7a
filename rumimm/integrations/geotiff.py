"""GeoTIFF in and out: stream a GeoTIFF (or COG) into a rumi file and a rumi file into a GeoTIFF.

Both directions move one row of tiles (or GeoTIFF blocks) at a time through rasterio
windows and :class:`rumimm.Writer`, so peak memory is about one row of tiles whatever
the image size, and both write atomically.  Transform and CRS are carried exactly (the
transform's six coefficients as GDAL reads them, the CRS only if it *is* an EPSG code).
PixelIsPoint files are read and written with ``GTIFF_POINT_GEO_IGNORE`` so their
matrix is not shifted by half a pixel on the way.  What rumi cannot hold (nodata,
descriptions, tags, overviews, masks, colour maps, ...) is listed in one warning.

Sample types map one to one where GDAL has them: the 8 to 64-bit integers, float32/64,
complex64/128; rumi's bool, uint2 and uint4 are GDAL ``Byte`` with ``NBITS`` 1, 2, 4,
and float16 is ``Float32`` with ``NBITS=16`` (GDAL stores it as half floats).
"""

from __future__ import annotations

import os
import warnings

import numpy as np

from rumimm.writer.atomic import replacing, temp_path
from rumimm.errors import CRSError, RumiError, RumiWarning, where
from rumimm.reader.rasterio_surface import COMPRESSIONS_WITH_PREDICTOR, GDAL_NATIVE, NBITS_IN, gtiff_profile, require

__all__ = ["COMPRESSIONS_WITH_PREDICTOR", "from_geotiff", "gtiff_profile", "to_geotiff"]

#: larger cache only holds blocks that are never needed again (GDAL's default is 5 % of RAM).
GDAL_CACHE_BYTES = 16 << 20


def _env(rasterio, **options):
    """A rasterio Env that keeps PixelIsPoint matrices as stored and GDAL's block cache bounded."""
    return rasterio.Env(GTIFF_POINT_GEO_IGNORE=True, GDAL_CACHEMAX=GDAL_CACHE_BYTES, **options)


# --------------------------------------------------------------------------- #
# rumi -> GeoTIFF
# --------------------------------------------------------------------------- #
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


def to_geotiff(src, dst, *, header=None, compress: str | None = "zstd", predictor=None, tile=None, interleave=None,
               cog: bool = False, bigtiff: str = "IF_SAFER", threads=None, progress=None) -> None:
    """Write a rumi image as a tiled, compressed GeoTIFF (or a COG), one row of blocks at a time.

    Parameters
    ----------
    src : str, os.PathLike or Image
        The rumi file (opened with ``header`` if given) or an open Image.  The
        frames are read through a handle of their own, without a frame cache.
    dst : str or os.PathLike
        The GeoTIFF to create or replace (atomically).
    header : bytes, optional
        ``src``'s header blob.
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
    """
    from rumimm.reader.image import Image
    from rumimm.reader.image import open as open_image
    from rumimm.writer.args import resolve_threads

    rasterio = require("rasterio")
    if cog and not cog_available():
        raise ImportError("cog=True needs GDAL >= 3.1 (the COG driver); this rasterio's GDAL has none")
    if isinstance(src, Image):  # a private handle: streaming every frame once must not fill the shared cache
        src, header = src.path, bytes(src.header)
    threads = resolve_threads(threads)
    with open_image(src, header=header, cache_bytes=0) as img, replacing(dst) as tmp:
        profile = gtiff_profile(img, compress=compress, predictor=predictor, tile=tile, interleave=interleave,
                                bigtiff=bigtiff)
        profile["num_threads"] = threads  # a creation option: GDAL compresses blocks in parallel
        with _env(rasterio):
            if not cog:
                _write_gtiff(rasterio, img, tmp, profile, progress)
                return
            staged = temp_path(dst)  # GDAL's COG driver copies from a finished dataset
            try:
                _write_gtiff(rasterio, img, staged, profile, progress)
                opts = {k.upper(): v for k, v in profile.items()
                        if k in ("compress", "predictor", "bigtiff", "num_threads")}
                opts.setdefault("COMPRESS", "NONE")  # the COG driver's own default is LZW, not "none"
                opts["BLOCKSIZE"] = max(profile["blockxsize"], profile["blockysize"])
                require("rasterio.shutil").copy(staged, tmp, driver="COG", **opts)
            finally:
                _remove(staged)


def _write_gtiff(rasterio, img, path: str, profile: dict, progress) -> None:
    """Stream ``img`` into a GeoTIFF at ``path``, one row of blocks at a time."""
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
        for y0 in rows:
            y1 = min(y0 + step, height)
            out.write(_to_gdal(img[:, y0:y1, :], profile["dtype"]), window=rasterio.windows.Window(0, y0, width, y1 - y0))
            bar.advance()


# --------------------------------------------------------------------------- #
# GeoTIFF -> rumi
# --------------------------------------------------------------------------- #
def _source_dtype(ds) -> np.dtype:
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


def _exact_crs(ds, crs) -> tuple[object, object]:
    """(transform, crs) to store, or CRSError saying what to do."""
    from rumimm.format.georef import resolve_crs

    identity = ds.transform.is_identity
    if crs is not None:
        if identity:
            raise CRSError(f"{where(ds.name)}crs={crs!r} was given but the file has no geotransform")
        return tuple(ds.transform)[:6], resolve_crs(crs)
    if ds.crs is None:
        if identity:
            return None, None
        raise CRSError(f"{where(ds.name)}the file has a geotransform but no CRS; pass crs=<EPSG code> "
                       "(rumimm convert --crs EPSG:<code>) with the CRS it is in")
    exact = ds.crs.to_epsg(100)
    if exact is None:
        near = ds.crs.to_epsg()
        name = " ".join(ds.crs.to_proj4().replace("=True", "").split())  # to_string() names the near EPSG code
        name = name if len(name) <= 80 else name[:77] + "..."
        if near is not None:
            raise CRSError(f"{where(ds.name)}the CRS ({name}) is not exactly an EPSG code, only close to "
                           f"EPSG:{near}; if it is EPSG:{near}, pass crs={near} (rumimm convert --crs "
                           f"EPSG:{near}), else reproject it first (gdalwarp -t_srs EPSG:<code>)")
        raise CRSError(f"{where(ds.name)}the CRS ({name}) has no EPSG code and rumi stores only EPSG codes; "
                       "reproject it first (gdalwarp -t_srs EPSG:<code>), or pass crs=<code> if it is one")
    try:
        return tuple(ds.transform)[:6], resolve_crs(exact)
    except CRSError as exc:
        raise CRSError(f"{where(ds.name)}{exc}") from None


def _unheld(ds) -> list[str]:
    """What a dataset carries that rumi cannot hold, as short phrases."""
    from rasterio.enums import ColorInterp, MaskFlags

    found = []
    if any(v is not None for v in ds.nodatavals):
        found.append(f"nodata {ds.nodata!r}")
    if any(ds.descriptions):
        found.append("band descriptions")
    tags = {k for k in ds.tags() if k != "AREA_OR_POINT"}
    band_tags = any(ds.tags(i) for i in ds.indexes)
    if tags or band_tags:
        found.append("tags" + (f" ({', '.join(sorted(tags))})" if tags else ""))
    if any(ds.units) or any(s != 1 for s in ds.scales) or any(o != 0 for o in ds.offsets):
        found.append("units, scales or offsets")
    levels = ds.overviews(1)
    if levels:
        found.append(f"overviews ({len(levels)} levels)")
    flags = ds.mask_flag_enums
    if any(MaskFlags.per_dataset in f and MaskFlags.alpha not in f for f in flags):
        found.append("a mask band")
    if any(MaskFlags.alpha in f for f in flags):
        found.append("the alpha role of a band (its samples are kept)")
    try:
        ds.colormap(1)
        found.append("a colour map")
    except ValueError:
        pass
    interp = [c for c in ds.colorinterp if c not in (ColorInterp.gray, ColorInterp.undefined, ColorInterp.alpha)]
    if interp:
        found.append(f"colour interpretation ({', '.join(c.name for c in ds.colorinterp)})")
    if ds.gcps[0]:
        found.append("ground control points")
    if ds.rpcs:
        found.append("RPCs")
    return found


def from_geotiff(src, dst, *, tile=512, unit="tile", codec=None, crs=None, header_out=None, progress=None,
                 threads=None, verify: bool = False) -> bytes:
    """Convert a GeoTIFF (or anything GDAL reads) into a rumi file, one row of tiles at a time.

    Parameters
    ----------
    src : str or os.PathLike
        The GeoTIFF, COG or other GDAL raster.
    dst : str or os.PathLike
        The rumi file to create or replace (atomically).
    tile, unit, codec, threads, verify
        As for :func:`rumimm.write`.
    crs : int or str, optional
        The EPSG code to store when the file's CRS is not exactly one (see Raises).
    header_out : str or os.PathLike, optional
        Also write the header blob to this file.
    progress : None, bool or callable
        ``True`` for a bar, or ``progress(done, total)`` after each row of tiles.

    Returns
    -------
    bytes
        The header blob.

    Raises
    ------
    CRSError
        The CRS is not exactly an EPSG projected or geographic CRS, or the file has a
        transform but no CRS; the message says what to pass or how to reproject.
    RumiError
        Bands of different dtypes, or a GDAL type rumi has no encoding for.

    Warns
    -----
    RumiWarning
        Once, listing what the file carries that rumi cannot hold (nodata, band
        descriptions, tags, overviews, masks, colour maps, ...).
    """
    from rumimm.progress import Progress
    from rumimm.writer.writer import Writer

    rasterio = require("rasterio")
    with _env(rasterio):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
            ds = rasterio.open(src)
        with ds:
            dtype = _source_dtype(ds)
            transform, epsg = _exact_crs(ds, crs)
            point = ds.tags().get("AREA_OR_POINT", "Area").lower() == "point"
            lost = _unheld(ds)
            if lost:
                warnings.warn(f"{where(ds.name)}rumi cannot hold {'; '.join(lost)}: they are not in "
                              f"{os.fspath(dst)}", RumiWarning, stacklevel=2)
            height, width = ds.height, ds.width
            Window = rasterio.windows.Window
            with Writer(dst, (ds.count, height, width), dtype, tile=tile, unit=unit, transform=transform, crs=epsg,
                        pixel_is_point=point, codec=codec, threads=threads, verify=verify) as w, \
                    Progress(progress, w.rows, desc="convert", unit="row") as bar:
                for r in range(w.rows):
                    y0, y1 = w.row_span(r)
                    block = ds.read(window=Window(0, y0, width, y1 - y0))
                    w.write_row(r, block if block.dtype == dtype else _from_gdal(block, dtype))
                    del block
                    bar.advance()
    blob = w.header
    if header_out is not None:
        with replacing(header_out) as tmp, open(tmp, "wb") as fh:
            fh.write(blob)
    return blob


def _from_gdal(block: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """GDAL samples as the rumi dtype that holds them (a view for the 1-byte types)."""
    if block.dtype.itemsize == 1 and dtype.itemsize == 1:
        return block.view(dtype)
    return block.astype(dtype)  # float32 holding NBITS=16 halves -> float16, exact
