"""Reading a catalog: its Parquet table, row selection, and its rows opened as images with their blobs.

The read side of ``rumimm.integrations.catalogs`` (which builds and writes catalogs): the
reader layer needs it for ``ImageCollection.from_catalog``.  pyarrow is imported only when
a catalog is read (``pip install rumimm[catalog]``).
"""

from __future__ import annotations

import os

import numpy as np

from rumimm.errors import RumiError

__all__ = ["catalog_images", "check_rows", "is_bbox", "read_catalog", "select_bbox", "select_rows"]


def read_catalog(path, *, columns=None, bbox=None, storage_options=None):
    """Read a catalog written by :func:`write_catalog` (optionally only rows meeting ``bbox``).

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file, or its URI (``s3://``, ``gs://``, ``az://``, ``http(s)://``): read
        whole into memory through rumimm's store, as the catalog's files are.
    columns : sequence of str, optional
        Columns to read (default all).
    bbox : (xmin, ymin, xmax, ymax), optional
        Keep rows whose footprint's bounding box intersects it, in the catalog's CRS
        (see :func:`select_bbox`); row groups outside it are skipped unread.
    storage_options : dict, optional
        For a URI, as in :func:`rumimm.open`.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rumimm.store import is_remote, open_store

    name = os.fspath(path)
    if is_remote(name):
        store = open_store(name, storage_options)  # pyarrow's own clients would take neither options nor http
        try:
            data = store.read(0, store.size)
        finally:
            store.close()

        def source():
            return pa.BufferReader(data)
    else:
        if storage_options:
            raise RumiError(f"storage_options apply to remote URIs only, got a local path {name!r}")

        def source():
            return name
    if bbox is None:
        return pq.read_table(source(), columns=columns)
    schema = pq.read_schema(source())
    if "bbox" not in schema.names:
        raise RumiError("the catalog has no 'bbox' column, so bbox= cannot select its rows")
    return pq.read_table(source(), columns=columns, filters=_bbox_expression(bbox, _geographic(schema)))


def _geographic(schema) -> bool:
    """Whether a catalog's footprints are in longitude/latitude (GeoParquet metadata; without it, maybe)."""
    import json

    geo = (schema.metadata or {}).get(b"geo")
    if geo is None:
        return True
    try:
        meta = json.loads(geo)
        crs = meta["columns"][meta.get("primary_column", "geometry")].get("crs")
    except (ValueError, KeyError, TypeError, AttributeError):
        return True
    return not isinstance(crs, dict) or crs.get("type") == "GeographicCRS"


def _bbox_expression(bbox, geographic=True):
    """The filter of rows whose bbox meets ``bbox``.  In longitude/latitude either bbox may cross the
    antimeridian (west > east, as RFC 7946 has it): then it spans west..180 and -180..east."""
    import pyarrow.compute as pc

    try:
        xmin, ymin, xmax, ymax = (float(v) for v in bbox)
    except (TypeError, ValueError):
        raise RumiError(f"bbox must be four numbers (xmin, ymin, xmax, ymax), got {bbox!r}") from None
    wraps = geographic and xmin > xmax and xmax >= -180.0 and xmin <= 180.0
    if not ((xmin <= xmax or wraps) and ymin <= ymax):
        raise RumiError(f"bbox must be (xmin, ymin, xmax, ymax) with min <= max (in longitude/latitude, west > east "
                        f"within -180..180 crosses the antimeridian), got {tuple(bbox)}")
    f = pc.field
    west, east = f("bbox", "xmin"), f("bbox", "xmax")
    rows_wrap = west > east
    if wraps:
        x_ok = rows_wrap | (east >= xmin) | (west <= xmax)
    else:
        x_ok = ((west <= xmax) & (east >= xmin)) | (rows_wrap & ((west <= xmax) | (east >= xmin)))
    return x_ok & (f("bbox", "ymin") <= ymax) & (f("bbox", "ymax") >= ymin)


def select_bbox(table, bbox):
    """Rows of a catalog whose footprint's bounding box intersects ``bbox``.

    ``bbox`` is (xmin, ymin, xmax, ymax) in the catalog's CRS (the geometry column's:
    the files' CRS when they share one, else longitude/latitude, where a bbox with
    xmin > xmax crosses the antimeridian, as a row's may).  Files without
    georeferencing never match.
    """
    if "bbox" not in table.column_names:
        raise RumiError("the catalog has no 'bbox' column, so a bbox cannot select its rows; "
                        "read it with its bbox column")
    return table.filter(_bbox_expression(bbox, _geographic(table.schema)))


def is_bbox(where) -> bool:
    """Whether ``where`` is a bbox: a tuple, list or 1-d array of four numbers (booleans are a row mask)."""
    if isinstance(where, np.ndarray):
        return where.ndim == 1 and where.size == 4 and where.dtype.kind in "iuf"
    return isinstance(where, (tuple, list)) and len(where) == 4 and all(
        isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)) for v in where)


def select_rows(table, where):
    """Apply ``where``: None, a bbox 4-tuple, a pyarrow Expression or a boolean mask."""
    if where is None:
        return table
    if is_bbox(where):
        return select_bbox(table, where)
    if isinstance(where, (tuple, list)):  # a mask as a sequence: older pyarrow filters only arrays
        where = np.asarray(where, bool)
    return table.filter(where)


def check_rows(table):
    """(paths, blobs, fields) of a catalog table, every row checked before anything is sized from it.

    The ``path`` column must be strings and the ``blob`` column binary, neither with a
    null; every blob is parsed (``fields``: :func:`rumimm.reader.blob_column.parse_blobs_any`,
    spec 0.1 blobs in one :func:`rumimm.parse_blobs` pass, spec 0.2 ones one by one).  A
    ``transform`` column, if any, must be lists of 6 floats.

    Raises
    ------
    RumiError
        A missing column, a column of another type, a null, or a bad blob (BlobError),
        naming the column and the first bad row.
    """
    import pyarrow as pa

    from rumimm.reader.blob_column import parse_blobs_any

    names = getattr(table, "column_names", None)
    if names is None:
        raise RumiError(f"a catalog is a pyarrow Table, got {type(table).__name__}")
    for name, ok, kind in (("path", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "strings"),
                           ("blob", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "binary")):
        if name not in names:
            raise RumiError(f"catalog has no {name!r} column; build it with rumimm.catalog")
        column = table.column(name)
        if not ok(column.type):
            raise RumiError(f"catalog column {name!r} must be {kind}, got {column.type}")
        if column.null_count:
            row = next(i for i, v in enumerate(column.is_null().to_pylist()) if v)
            raise RumiError(f"catalog row {row} has no {name}")
    if "transform" in names:
        t = table.column("transform").type
        if not ((pa.types.is_list(t) or pa.types.is_fixed_size_list(t) or pa.types.is_large_list(t))
                and pa.types.is_floating(t.value_type)):
            raise RumiError(f"catalog column 'transform' must be lists of 6 floats, got {t}")
        bad = [i for i, v in enumerate(table.column("transform").to_pylist()) if v is not None and len(v) != 6]
        if bad:
            raise RumiError(f"catalog row {bad[0]}: transform must have 6 values")
    column = table.column("blob")
    specs = table.column("spec").to_pylist() if "spec" in names else None
    fields = parse_blobs_any(column, specs)  # every blob checked before any file is touched (spec 0.1 in one pass)
    return table.column("path").to_pylist(), column.to_pylist(), fields


def catalog_images(table_or_path, where=None, *, cache_bytes=None, verify: bool = True, storage_options=None):
    """(paths, blobs, Images) of a catalog's rows, opened with their blobs (no IFD is read).

    ``where`` selects rows first: a bbox ``(xmin, ymin, xmax, ymax)`` (four numbers), a pyarrow compute
    expression (``pc.field("epsg") == 32633``) or a boolean mask.  Every blob is checked
    by one :func:`rumimm.parse_blobs` call before any file is opened.  The catalog and its
    paths may be remote URIs (``storage_options`` as for :func:`rumimm.open`): opened with
    their blobs, the paths cost no request.
    """
    from rumimm.reader.image import Image
    from rumimm.store import is_remote

    table = read_catalog(table_or_path, storage_options=storage_options if is_remote(table_or_path) else None) \
        if isinstance(table_or_path, (str, os.PathLike)) else table_or_path
    table = select_rows(table, where)
    paths, blobs, _ = check_rows(table)
    images = []
    try:
        for path, blob in zip(paths, blobs, strict=True):
            images.append(Image(path, blob, cache_bytes=cache_bytes, verify=verify, storage_options=storage_options))
    except BaseException:
        for img in images:
            img.close()
        raise
    return paths, blobs, images
