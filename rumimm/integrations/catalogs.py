"""Catalogs: one row per rumi file (path, header blob, grid, georeferencing, footprint).

A catalog is a ``pyarrow.Table`` written as GeoParquet, so ``geopandas.read_parquet``
reads it with its CRS, and a data loader opens any row's file with its blob, without
reading the file's header.  The footprint geometry is in the files' own CRS when all
georeferenced files share one, else in OGC:CRS84 (longitude, latitude) with each file's
own EPSG code in the ``epsg`` column; those footprints follow RFC 7946 as STAC Items do
(a pole cap's bbox reaches 90, a grid across the antimeridian is a MultiPolygon with a bbox
west > east), or searches miss the file or match it on every longitude.

Needs pyarrow (``pip install rumimm[catalog]``); pyarrow is imported only here.
"""

from __future__ import annotations

import glob
import json
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from rumimm.reader.catalog_table import catalog_images, read_catalog, select_bbox
from rumimm.writer.atomic import replacing

if TYPE_CHECKING:
    import pyarrow as pa
    from numpy.typing import NDArray

    from rumimm._typing import ProgressArg, StrPath

#: One file's catalog entries, as ``_row`` gathers them for ``_table``: path, blob, (bands, height,
#: width), dtype, tile, unit, epsg, transform, bounds, (nodatavals, descriptions, scales, offsets, units),
#: (spec, time_count, time).
_Row: TypeAlias = tuple[Any, ...]
#: A GDAL-ordered affine transform (a, b, c, d, e, f).
_Transform: TypeAlias = Sequence[float]

__all__ = ["CATALOG_COLUMNS", "catalog", "catalog_from_rows", "catalog_images", "read_catalog", "select_bbox",
           "write_catalog"]

#: Columns of a catalog table, in order.
CATALOG_COLUMNS = ("path", "blob", "bands", "height", "width", "dtype", "tile_height", "tile_width", "unit",
                   "epsg", "transform", "left", "bottom", "right", "top", "bbox", "geometry", "nodata",
                   "nodatavals", "descriptions", "scales", "offsets", "units", "spec", "time_count", "time")

_CRS84 = "OGC:CRS84"


def _paths(paths_or_glob: StrPath | Iterable[StrPath]) -> list[str]:
    """A list of paths from a list, a glob pattern or a folder (its ``*.rumi`` files, recursively)."""
    if isinstance(paths_or_glob, (str, os.PathLike)):
        from rumimm.store import is_remote

        text = os.fspath(paths_or_glob)
        if is_remote(text):
            return [text]
        if os.path.isdir(text):
            return sorted(glob.glob(os.path.join(glob.escape(text), "**", "*.rumi"), recursive=True))
        if glob.has_magic(text):
            return sorted(glob.glob(text, recursive=True))
        return [text]
    return [os.fspath(p) for p in paths_or_glob]


def _row(path: str, blob: bytes | None, storage_options: Mapping[str, Any] | None = None) -> _Row:
    """Everything a catalog row holds for one file; the file is opened with its blob (no IFD walk)."""
    from rumimm.reader.image import Image
    from rumimm.reader.validate import build_blob
    from rumimm.store import is_remote

    options = storage_options if is_remote(path) else None
    if blob is None:
        blob = build_blob(path, storage_options=options)
    with Image(path, blob, cache_bytes=0, storage_options=options) as img:
        geo = img.georef
        meta = (img.nodatavals, list(img.descriptions), list(img.scales), list(img.offsets), list(img.units))
        time = None if img.time is None else [
            "/".join(v.isoformat() for v in t) if isinstance(t, tuple) else t.isoformat() for t in img.time]
        transform = geo.transform
        if transform is not None and img.pixel_is_point:  # the pixel corners, as rasterio reads the file
            from rumimm.reader.rasterio_surface import area_coefficients

            transform = area_coefficients(transform, True)
        return (path, bytes(img.header), (img.count, img.height, img.width), str(img.dtype), img.tile,
                img.frame_unit, geo.epsg, transform, img.bounds, meta, (img.spec, img.time_count, time))


def _number_text(v: float | int | None) -> str | None:
    """A nodata value as the ``nodatavals`` column holds it: text, so a 64-bit integer stays exact."""
    if v is None:
        return None
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return str(int(v))
    return repr(float(v))


def _transform_column(pa: ModuleType, transforms: Sequence[_Transform | None]) -> pa.Array:
    """The ``transform`` column: a list of 6 floats a row, null for a file without georeferencing.

    A variable-size list, not a fixed-size one: pyarrow's Parquet writer before 24 refuses
    a null entry of a fixed-size list column ("non-zero length null components").
    """
    return pa.array([None if t is None else [float(v) for v in t] for t in transforms], pa.list_(pa.float64()))


def _corners(transform: _Transform, height: int, width: int, n: int = 1) -> NDArray[np.float64]:
    """(4n + 1, 2) ring of the image outline in CRS units, closed, ``n`` points per edge."""
    a, b, c, d, e, f = transform
    t = np.arange(n) / n
    px = np.concatenate([t * width, np.full(n, width), (1 - t) * width, np.zeros(n), [0.0]])
    py = np.concatenate([np.zeros(n), t * height, np.full(n, height), (1 - t) * height, [0.0]])
    return np.column_stack([c + a * px + b * py, f + d * px + e * py])


def _wkb_polygon(ring: NDArray[np.float64]) -> bytes:
    """ISO WKB of a one-ring polygon (little endian), exterior counter-clockwise as GeoParquet advises."""
    x, y = ring[:, 0], ring[:, 1]
    if np.sum(x[:-1] * y[1:] - x[1:] * y[:-1]) < 0:
        ring = ring[::-1]
    return struct.pack("<BIII", 1, 3, 1, ring.shape[0]) + np.ascontiguousarray(ring, "<f8").tobytes()


def _box(xmin: float, ymin: float, xmax: float, ymax: float) -> dict[str, float]:
    return {"xmin": float(xmin), "ymin": float(ymin), "xmax": float(xmax), "ymax": float(ymax)}


def _projjson(crs: str) -> dict[str, Any]:
    import pyproj

    return json.loads(pyproj.CRS.from_user_input(crs).to_json())


def catalog(paths_or_glob: StrPath | Iterable[StrPath], *, blobs: Iterable[bytes] | None = None,
            progress: ProgressArg = None, workers: int | None = None,
            storage_options: Mapping[str, Any] | None = None) -> pa.Table:
    """Build a catalog table of rumi files.

    Parameters
    ----------
    paths_or_glob : str, os.PathLike or sequence of them
        Files; a glob pattern (``"scenes/**/*.rumi"``); or a folder, for every
        ``*.rumi`` file under it.  Paths are stored as given.
    blobs : sequence of bytes, optional
        The header blobs ``rumimm.write`` returned, one per path: the files are then
        not indexed again (only the 252-byte prefix and the georeferencing are read).
        Without them each file's blob is rebuilt by :func:`rumimm.build_blob`, in parallel.
    progress : None, bool or callable
        Report files done (see :mod:`rumimm.progress`).
    workers : int, optional
        Threads indexing files (default: ``min(8, os.cpu_count())``).
    storage_options : dict, optional
        For paths that are remote URIs (``s3://``, ``gs://``, ``az://``, ``http(s)://``),
        as in :func:`rumimm.open`; a URI is taken as given, never globbed.

    Returns
    -------
    pyarrow.Table
        Columns ``CATALOG_COLUMNS``: path, blob, bands, height, width, dtype (numpy name),
        tile_height, tile_width, unit ("tile"/"cell"), epsg (null when the file has no CRS),
        transform (6 floats, GDAL/affine order, of the pixel corners as rasterio reads the file: a
        PixelIsPoint file's stored one moved half a pixel), left/bottom/right/top (in the file's
        CRS, as rasterio's ``bounds``), bbox (GeoParquet covering of the geometry), geometry (WKB
        footprint), and from each file's PAM sidecar: nodata (the first band's, null without),
        nodatavals (each band's, as text: exact for 64-bit integers, ``"nan"``; null without),
        descriptions, scales, offsets and units (one entry per band; a spec 0.2 file's band texts
        are its descriptions); spec ("0.1" or "0.2"), time_count and, for spec 0.2 files, time (ISO
        strings, ``start/end`` for intervals; null for spec 0.1). The schema carries GeoParquet 1.1
        metadata.
    """
    from rumimm.progress import Progress

    paths = _paths(paths_or_glob)
    given: list[bytes | None] = [None] * len(paths) if blobs is None else list(blobs)
    if len(given) != len(paths):
        raise ValueError(f"got {len(paths)} paths but {len(given)} blobs")
    workers = workers or min(8, os.cpu_count() or 1)
    rows = []
    with Progress(progress, len(paths), desc="catalog", unit="file") as bar, ThreadPoolExecutor(workers) as pool:
        for row in pool.map(_row, paths, given, [storage_options] * len(paths)):
            rows.append(row)
            bar.advance()
    return _table(rows)


def catalog_from_rows(rows: list[_Row]) -> pa.Table:
    """A catalog table of rows gathered elsewhere (``rumimm.stac.from_items``: from STAC Items, no file read)."""
    return _table(rows)


def _table(rows: list[_Row]) -> pa.Table:
    import pyarrow as pa

    n = len(rows)
    epsgs = {r[6] for r in rows if r[6] is not None}
    crs = f"EPSG:{next(iter(epsgs))}" if len(epsgs) == 1 else _CRS84
    geoms: list[bytes | None] = [None] * n
    boxes: list[dict[str, float] | None] = [None] * n
    georef = [i for i, r in enumerate(rows) if r[6] is not None]
    if crs == _CRS84 and georef:  # RFC 7946's shapes, as STAC Items have them (GeoParquet 1.1 follows it)
        from rumimm.integrations.footprints import wgs84_footprints

        rings, grid_of, special = wgs84_footprints(
            [rows[i][6] for i in georef], [rows[i][7] for i in georef], [rows[i][2][1] for i in georef],
            [rows[i][2][2] for i in georef], nearest=True)
        lows, highs = rings.min(axis=1), rings.max(axis=1)
        for i, g in zip(georef, grid_of.tolist(), strict=True):
            fp = special.get(g)
            if fp is None:
                geoms[i] = _wkb_polygon(rings[g])
                boxes[i] = _box(lows[g][0], lows[g][1], highs[g][0], highs[g][1])
            else:  # crossing the antimeridian (bbox west > east), lying past it, or holding a pole
                polygons = [_wkb_polygon(np.asarray(part[0], np.float64)) for part in fp[1]]
                geoms[i] = polygons[0] if fp[0] == "Polygon" else \
                    struct.pack("<BII", 1, 6, len(polygons)) + b"".join(polygons)
                boxes[i] = _box(*fp[2])
    for i in georef if crs != _CRS84 else ():
        r = rows[i]
        ring = _corners(r[7], r[2][1], r[2][2])
        geoms[i] = _wkb_polygon(ring)
        lo, hi = ring.min(axis=0), ring.max(axis=0)
        boxes[i] = _box(lo[0], lo[1], hi[0], hi[1])

    def col(i: int, j: int | None = None) -> list[Any]:
        return [r[i] if j is None else (None if r[i] is None else r[i][j]) for r in rows]

    box_type = pa.struct([(k, pa.float64()) for k in ("xmin", "ymin", "xmax", "ymax")])
    table = pa.table({
        "path": pa.array(col(0), pa.string()),
        "blob": pa.array(col(1), pa.binary()),
        "bands": pa.array(col(2, 0), pa.int32()),
        "height": pa.array(col(2, 1), pa.int64()),
        "width": pa.array(col(2, 2), pa.int64()),
        "dtype": pa.array(col(3), pa.string()),
        "tile_height": pa.array(col(4, 0), pa.int32()),
        "tile_width": pa.array(col(4, 1), pa.int32()),
        "unit": pa.array(col(5), pa.string()),
        "epsg": pa.array(col(6), pa.int32()),
        "transform": _transform_column(pa, col(7)),
        "left": pa.array(col(8, 0), pa.float64()),
        "bottom": pa.array(col(8, 1), pa.float64()),
        "right": pa.array(col(8, 2), pa.float64()),
        "top": pa.array(col(8, 3), pa.float64()),
        "bbox": pa.array(boxes, box_type),
        "geometry": pa.array(geoms, pa.binary()),
        "nodata": pa.array([None if not r[9][0] or r[9][0][0] is None else float(r[9][0][0]) for r in rows],
                           pa.float64()),
        "nodatavals": pa.array([[_number_text(v) for v in r[9][0] or ()] for r in rows], pa.list_(pa.string())),
        "descriptions": pa.array([r[9][1] for r in rows], pa.list_(pa.string())),
        "scales": pa.array([r[9][2] for r in rows], pa.list_(pa.float64())),
        "offsets": pa.array([r[9][3] for r in rows], pa.list_(pa.float64())),
        "units": pa.array([r[9][4] for r in rows], pa.list_(pa.string())),
        "spec": pa.array([r[10][0] for r in rows], pa.string()),
        "time_count": pa.array([r[10][1] for r in rows], pa.int64()),
        "time": pa.array([r[10][2] for r in rows], pa.list_(pa.string())),
    })
    assert table.num_rows == n
    return table.replace_schema_metadata({b"geo": json.dumps(_geo_metadata(table, crs)).encode()})


def _geo_metadata(table: pa.Table, crs: str) -> dict[str, Any]:
    import pyarrow.compute as pc

    box = table.column("bbox")
    extent = [pc.min(pc.struct_field(box, [0])).as_py(), pc.min(pc.struct_field(box, [1])).as_py(),
              pc.max(pc.struct_field(box, [2])).as_py(), pc.max(pc.struct_field(box, [3])).as_py()]
    types = ["Polygon"]
    if pc.any(pc.greater(pc.struct_field(box, [0]), pc.struct_field(box, [2]))).as_py():
        extent[0], extent[2] = -180.0, 180.0  # a row across the antimeridian: all longitudes, conservatively
    if any(g is not None and g[1] == 6 for g in _wkb_types(table.column("geometry"))):
        types = ["MultiPolygon", "Polygon"]
    column = {"encoding": "WKB", "geometry_types": types, "crs": _projjson(crs),
              "covering": {"bbox": {k: ["bbox", k] for k in ("xmin", "ymin", "xmax", "ymax")}}}
    if None not in extent:
        column["bbox"] = extent
    return {"version": "1.1.0", "primary_column": "geometry", "columns": {"geometry": column}}


def _wkb_types(column: Any) -> list[tuple[int, int] | None]:
    """(byte order, geometry type) of each WKB value (None for a null), read from its first 5 bytes."""
    out: list[tuple[int, int] | None] = []
    for v in column.to_pylist():
        out.append(None if v is None or len(v) < 5 else (v[0], struct.unpack("<I" if v[0] == 1 else ">I", v[1:5])[0]))
    return out


def write_catalog(table: pa.Table, path: StrPath, *, row_group_size: int | None = None,
                  storage_options: Mapping[str, Any] | None = None, overwrite: bool = True) -> None:
    """Write a catalog table as GeoParquet, atomically (a temporary file renamed into place).

    ``geopandas.read_parquet(path)`` reads it as a GeoDataFrame with the catalog's CRS.
    ``path`` may be a URI (``s3://``, ``gs://``, ``az://``; ``storage_options`` as for
    :func:`rumimm.write`): the object appears only once complete.  ``overwrite=False``
    refuses an existing file or object (``FileExistsError``).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rumimm.store import is_remote

    if b"geo" not in (table.schema.metadata or {}):
        raise ValueError("the table has no GeoParquet metadata; build it with rumimm.catalog")
    if is_remote(path) or not overwrite:
        from rumimm.store import open_writer

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=row_group_size, compression="zstd")
        with open_writer(path, storage_options, overwrite=overwrite) as out:
            out.write(sink.getvalue())
        return
    with replacing(path) as tmp:  # named like every rumimm temp file: rumimm clean finds a killed write's
        pq.write_table(table, tmp, row_group_size=row_group_size, compression="zstd")
