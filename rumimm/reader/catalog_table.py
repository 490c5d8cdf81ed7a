"""Reading a catalog: its Parquet table, row selection, and its rows opened as images with their blobs.

The read side of ``rumimm.integrations.catalogs`` (which builds and writes catalogs): the
reader layer needs it for ``ImageCollection.from_catalog``.  pyarrow is imported only when
a catalog is read (``pip install rumimm[catalog]``).
"""

from __future__ import annotations

import os

from rumimm.errors import RumiError

__all__ = ["read_catalog", "select_bbox", "catalog_images"]


def read_catalog(path, *, columns=None, bbox=None):
    """Read a catalog written by :func:`write_catalog` (optionally only rows meeting ``bbox``).

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file.
    columns : sequence of str, optional
        Columns to read (default all).
    bbox : (xmin, ymin, xmax, ymax), optional
        Keep rows whose footprint's bounding box intersects it, in the catalog's CRS
        (see :func:`select_bbox`); row groups outside it are skipped unread.
    """
    import pyarrow.parquet as pq

    filters = None if bbox is None else _bbox_expression(bbox)
    return pq.read_table(os.fspath(path), columns=columns, filters=filters)


def _bbox_expression(bbox):
    import pyarrow.compute as pc

    xmin, ymin, xmax, ymax = (float(v) for v in bbox)
    if not (xmin <= xmax and ymin <= ymax):
        raise ValueError(f"bbox must be (xmin, ymin, xmax, ymax) with min <= max, got {tuple(bbox)}")
    f = pc.field
    return ((f("bbox", "xmin") <= xmax) & (f("bbox", "xmax") >= xmin)
            & (f("bbox", "ymin") <= ymax) & (f("bbox", "ymax") >= ymin))


def select_bbox(table, bbox):
    """Rows of a catalog whose footprint's bounding box intersects ``bbox``.

    ``bbox`` is (xmin, ymin, xmax, ymax) in the catalog's CRS (the geometry column's:
    the files' CRS when they share one, else longitude/latitude).  Files without
    georeferencing never match.
    """
    return table.filter(_bbox_expression(bbox))


def _where(table, where):
    """Apply ``where``: None, a bbox 4-tuple, a pyarrow Expression or a boolean mask."""
    if where is None:
        return table
    if isinstance(where, tuple) and len(where) == 4:
        return select_bbox(table, where)
    return table.filter(where)


def catalog_images(table_or_path, where=None, *, cache_bytes=None, verify: bool = True):
    """(paths, blobs, Images) of a catalog's rows, opened with their blobs (no IFD is read).

    ``where`` selects rows first: a bbox ``(xmin, ymin, xmax, ymax)``, a pyarrow compute
    expression (``pc.field("epsg") == 32633``) or a boolean mask.  Every blob is checked
    by one :func:`rumimm.parse_blobs` call before any file is opened.
    """
    from rumimm.reader.blob_column import parse_blobs
    from rumimm.reader.image import Image

    table = read_catalog(table_or_path) if isinstance(table_or_path, (str, os.PathLike)) else table_or_path
    table = _where(table, where)
    paths = table.column("path").to_pylist()
    column = table.column("blob")
    parse_blobs(column)  # every blob checked in one pass, before any file is touched
    blobs = column.to_pylist()
    if any(p is None for p in paths):
        raise RumiError(f"catalog row {paths.index(None)} has no path")
    images = []
    try:
        for path, blob in zip(paths, blobs):
            images.append(Image(path, blob, cache_bytes=cache_bytes, verify=verify))
    except BaseException:
        for img in images:
            img.close()
        raise
    return paths, blobs, images
