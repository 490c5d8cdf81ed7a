"""STAC in and out: Items for rumi files, catalogs as ItemCollections, and search results loaded as cubes.

An Item made here carries the file's header blob (base64) in its asset's ``rumi:header``
field, with ``rumi:spec`` (the rumi specification, "0.1" or "0.2"), so a reader goes from a
search result to pixels without a header request: :func:`load` opens every asset with its
blob.  The Item also carries the STAC fields other tools read: geometry and bbox in WGS 84,
the projection extension (``proj:code``, ``proj:shape``, ``proj:transform``, ``proj:bbox``),
the raster extension per band (data type, nodata, scale, offset, unit), eo band names when
the bands have descriptions, and the file extension's ``file:size`` (and ``file:checksum`` when a
rumimm sidecar binds the file's SHA-256) for local files.  :func:`load` takes each file's
georeferencing from its Item's projection fields (the file's own copy sits before its first
frame and would cost a request), so those fields are trusted as the blob is.

Items are built from a :func:`rumimm.catalog` table (``items`` catalogs the paths first), so
a catalog and an ItemCollection hold the same facts and convert both ways
(:func:`to_item_collection`, :func:`from_items`).  Needs pystac and pyarrow
(``pip install rumimm[stac]``); both are imported only here.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import functools
import gc
import itertools
import math
import os
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rumimm.errors import RumiError
from rumimm.integrations.footprints import wgs84_footprints

if TYPE_CHECKING:
    import pyarrow as pa
    import pystac
    import xarray as xr

    from rumimm._typing import StrPath
    from rumimm.reader.cube import Cube

__all__ = ["ASSET_KEY", "CODEC_FIELD", "EO", "FILE", "HEADER_FIELD", "MEDIA_TYPE", "PROJECTION", "RASTER", "SPEC_FIELD",
           "collection", "from_items", "item", "items", "load", "read_stac_geoparquet", "redact", "to_item_collection",
           "to_items", "to_stac_geoparquet"]

#: The asset field holding the file's header blob, base64 (standard alphabet, padded).
HEADER_FIELD = "rumi:header"
#: The asset field naming the rumi specification the file follows ("0.1" or "0.2").
SPEC_FIELD = "rumi:spec"
#: The asset field naming a rumi file's frame codec recipe (when the caller gives it: the file does not record it).
CODEC_FIELD = "rumi:codec"
#: A rumi file's media type: a BigTIFF (GeoTIFF) profile.
MEDIA_TYPE = "image/tiff; application=geotiff; profile=rumi"
#: The key of the rumi asset in Items made here.
ASSET_KEY = "data"

PROJECTION = "https://stac-extensions.github.io/projection/v2.0.0/schema.json"
RASTER = "https://stac-extensions.github.io/raster/v1.1.0/schema.json"
EO = "https://stac-extensions.github.io/eo/v1.1.0/schema.json"
FILE = "https://stac-extensions.github.io/file/v2.1.0/schema.json"

_BBOX_POINTS = 101  # points per edge of a load bbox projected to a file's CRS (transform_bounds densifies too)
_ALIGNED = 1e-6  # a bbox edge within this many pixels of a pixel edge is on it (float noise of the projection)
_MAX_BLOB_CHARS = 1 << 27  # a base64 header longer than this (96 MiB of blob) is refused unread
_MAX_BANDS = 1 << 16
_RASTER_TYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
                 "float64", "complex64", "complex128"}
_ITEM_COLUMNS = ("path", "blob", "bands", "height", "width", "dtype", "epsg", "transform", "left", "bottom", "right",
                 "top", "nodata", "descriptions", "scales", "offsets", "units", "spec", "time")
_COMPLEX = {"complex64": "cfloat32", "complex128": "cfloat64"}


def _pystac() -> Any:
    try:
        import pystac
    except ImportError as exc:  # pragma: no cover - the stac extra is installed in tests
        raise ImportError("rumimm.stac needs pystac: pip install rumimm[stac]") from exc
    return pystac


def redact(href: str) -> str:
    """``href`` (or an Item id) without a URL's user:password, query string or fragment: a presigned URL's
    signature and a URL's credentials are never printed."""
    text = str(href)
    for sep in ("?", "#"):
        text = text.split(sep, 1)[0]
    if "://" in text:
        scheme, rest = text.split("://", 1)
        authority, slash, path = rest.partition("/")
        if "@" in authority:
            text = f"{scheme}://{authority.rsplit('@', 1)[1]}{slash}{path}"
    return text


# ---------------------------------------------------------------------------------------------------------------
# Items out


def item(path_or_uri: StrPath, *, blob: bytes | None = None, datetime: dt.datetime | None = None,
         id: str | None = None, collection: str | None = None, codec: str | None = None,
         storage_options: Mapping[str, Any] | None = None) -> pystac.Item:
    """A STAC Item for one rumi file (either spec); see :func:`items`."""
    return items([path_or_uri], blobs=None if blob is None else [blob], datetime=datetime,
                 ids=None if id is None else [id], collection=collection, codec=codec,
                 storage_options=storage_options)[0]


def items(paths: StrPath | Iterable[StrPath], *, blobs: Iterable[bytes] | None = None,
          datetime: dt.datetime | Sequence[dt.datetime | None] | None = None, ids: Sequence[str] | None = None,
          collection: str | None = None, codec: str | None = None,
          storage_options: Mapping[str, Any] | None = None) -> list[pystac.Item]:
    """STAC Items for rumi files: the files are catalogued (:func:`rumimm.catalog`), then made Items.

    Parameters
    ----------
    paths : path, URI, glob or folder, or a sequence of them
        As :func:`rumimm.catalog` takes them.
    blobs : sequence of bytes, optional
        The files' header blobs (what ``rumimm.write`` returned): the files are then not indexed.
    datetime : datetime or one per file, optional
        The Item's datetime.  A spec 0.2 file's time values come first (one instant: ``datetime``;
        an interval or several steps: ``start_datetime``/``end_datetime``); a file without them
        needs this argument.
    ids : sequence of str, optional
        Item ids (default: the file names without their extension).
    collection : str, optional
        The collection id the Items name.
    codec : str, optional
        The frame codec recipe the files were written with (``rumi:codec``); files do not record it.
    storage_options : dict, optional
        For remote URIs, as in :func:`rumimm.open`.

    Raises
    ------
    RumiError
        A file without georeferencing (an Item needs a footprint), or without a time and no
        ``datetime`` given.
    """
    from rumimm.integrations.catalogs import catalog

    table = catalog(paths, blobs=blobs, storage_options=storage_options)
    return to_items(table, datetime=datetime, ids=ids, collection=collection, codec=codec)


_gc_lock = threading.Lock()
_gc_pauses = 0  # builds running now, in any thread
_gc_was_enabled = False  # the collector's state when the first of them began


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """The cyclic garbage collector paused while a bulk build allocates: 10,000 Items are some 500,000 small
    lists and dicts, none of them garbage, and the collector's passes over them were two thirds of the
    build's time.  Objects freed meanwhile still go by reference counting.  Builds in several threads share
    one pause: the collector is restored to its state before the first when the last one ends."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


def _gc_after_fork_in_child() -> None:
    """A child forked during a build has none running: its collector goes back on, with a new lock."""
    global _gc_lock, _gc_pauses
    _gc_lock = threading.Lock()
    if _gc_pauses and _gc_was_enabled:
        gc.enable()
    _gc_pauses = 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_gc_after_fork_in_child)


def _times(row_time: list[str] | None, given: dt.datetime | None, name: str) -> dict[str, Any]:
    """(datetime, start, end) properties from a spec 0.2 file's time values or the argument."""
    if row_time:
        if "/" in row_time[0]:
            starts = [t.split("/")[0] for t in row_time]
            ends = [t.split("/")[1] for t in row_time]
        else:
            starts = ends = row_time
        start, end = _utc(min(starts)), _utc(max(ends))
        if start == end:
            return {"datetime": start}
        return {"datetime": None, "start": start, "end": end}
    if given is None:
        raise RumiError(f"{name}: the file has no time values; give datetime= for its Item")
    return {"datetime": _utc(given)}


def _utc(value: str | dt.datetime, where: str = "") -> dt.datetime:
    """``value`` (ISO 8601 text or a datetime) in UTC; naive means UTC.  RumiError for text that is not a time."""
    try:
        t = dt.datetime.fromisoformat(value) if isinstance(value, str) else value
    except ValueError:
        raise RumiError(f"{where}{_show(value)} is not an ISO 8601 date or datetime") from None
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def _raster_type(dtype: str) -> str:
    return _COMPLEX.get(dtype, dtype if dtype in _RASTER_TYPES else "other")


def to_items(table: pa.Table, *, datetime: dt.datetime | Sequence[dt.datetime | None] | None = None,
             ids: Sequence[str] | None = None, collection: str | None = None,
             codec: str | None = None) -> list[pystac.Item]:
    """STAC Items for the rows of a :func:`rumimm.catalog` table; see :func:`items`.

    No rumi file is read: local files are only stat'ed (``file:size``), and their PAM sidecars read
    for the checksum they bind (``file:checksum``).
    """
    pystac = _pystac()
    with _gc_paused():
        return _build_items(pystac, table, datetime, ids, collection, codec)


def _build_items(pystac: Any, table: pa.Table, datetime: dt.datetime | Sequence[dt.datetime | None] | None,
                 ids: Sequence[str] | None, collection: str | None, codec: str | None) -> list[pystac.Item]:
    """The Items of :func:`to_items`.  What rows share (a grid's footprint, a band layout's raster and eo
    fields) is built once and copied: every Item owns its lists and dicts."""
    cols = {name: table.column(name).to_pylist() for name in _ITEM_COLUMNS}
    n = table.num_rows
    # each band's nodata, exact; a catalog written before the column holds only the first band's (for every band)
    per_band = table.column("nodatavals").to_pylist() if "nodatavals" in table.column_names else [None] * n
    paths = cols["path"]
    if ids is not None and len(ids) != n:
        raise ValueError(f"got {n} rows but {len(ids)} ids")
    given: list[dt.datetime | None] = list(datetime) if isinstance(datetime, (list, tuple)) \
        else [cast("dt.datetime | None", datetime)] * n
    if len(given) != n:
        raise ValueError(f"got {n} rows but {len(given)} datetimes")
    missing = [i for i in range(n) if cols["epsg"][i] is None or cols["transform"][i] is None]
    if missing:
        raise RumiError(f"{redact(paths[missing[0]])}: the file has no georeferencing (EPSG code and transform); "
                        "a STAC Item needs a footprint")
    rings, grid_of, special = wgs84_footprints(cols["epsg"], cols["transform"], cols["height"], cols["width"])
    lows, highs = rings.min(axis=1).tolist(), rings.max(axis=1).tolist()
    outlines = rings.tolist()
    taken = [False] * len(outlines)  # whether an Item holds the grid's ring (later Items get copies)
    grid_of = grid_of.tolist()
    local = _local_files(paths)
    hrefs = _hrefs(paths)
    layouts: dict[tuple[Any, ...], tuple[list[dict[str, Any]], list[dict[str, Any]] | None]] = {}
    base_extensions = [PROJECTION, RASTER]
    out = []
    for i in range(n):
        path = paths[i]
        time = _times(cols["time"][i], given[i], redact(path))
        bands = cols["bands"][i]
        texts = per_band[i]
        nodata: list[Any] = texts if texts is not None and len(texts) == bands \
            else [_held(cols["nodata"][i], cols["dtype"][i])] * bands
        key = (bands, cols["dtype"][i], nodata, cols["scales"][i], cols["offsets"][i], cols["units"][i],
               cols["descriptions"][i])
        hashable = tuple(tuple(v) if isinstance(v, list) else v for v in key)
        layout = layouts.get(hashable)
        if layout is None:
            layout = layouts[hashable] = _band_fields(*key)
        raster_bands, eo_bands = layout
        asset_fields: dict[str, Any] = {HEADER_FIELD: base64.b64encode(cols["blob"][i]).decode("ascii"),
                                        SPEC_FIELD: cols["spec"][i],
                                        "raster:bands": [band.copy() for band in raster_bands]}
        extensions = base_extensions.copy()
        if eo_bands is not None:
            asset_fields["eo:bands"] = [band.copy() for band in eo_bands]
            extensions.append(EO)
        if codec is not None:
            asset_fields[CODEC_FIELD] = codec
        if i in local:
            size, checksum = local[i]
            asset_fields["file:size"] = size
            if checksum is not None:
                asset_fields["file:checksum"] = checksum
            extensions.append(FILE)
        transform = cols["transform"][i]
        props = {"proj:code": f"EPSG:{cols['epsg'][i]}", "proj:shape": [cols["height"][i], cols["width"][i]],
                 "proj:transform": [float(v) for v in transform],
                 "proj:bbox": [cols["left"][i], cols["bottom"][i], cols["right"][i], cols["top"][i]]}
        if time["datetime"] is None:
            props["start_datetime"] = time["start"].isoformat().replace("+00:00", "Z")
            props["end_datetime"] = time["end"].isoformat().replace("+00:00", "Z")
        g = grid_of[i]
        fp = special.get(g)
        if fp is None:
            lo, hi = lows[g], highs[g]
            ring = [[x, y] for x, y in outlines[g]] if taken[g] else outlines[g]
            taken[g] = True
            geometry: dict[str, Any] = {"type": "Polygon", "coordinates": [ring]}
            bbox = [lo[0], lo[1], hi[0], hi[1]]
        else:  # crossing the antimeridian or holding a pole: RFC 7946's shapes, a copy for each Item
            parts = [[[list(p) for p in r] for r in part] for part in fp[1]]
            geometry = {"type": fp[0], "coordinates": parts[0] if fp[0] == "Polygon" else parts}
            bbox = list(fp[2])
        it = pystac.Item(
            id=ids[i] if ids is not None else _stem(path),
            geometry=geometry,
            bbox=bbox,
            datetime=time["datetime"], properties=props, stac_extensions=extensions, collection=collection)
        it.add_asset(ASSET_KEY, pystac.Asset(href=hrefs[i], media_type=MEDIA_TYPE, roles=["data"],
                                             extra_fields=asset_fields))
        out.append(it)
    return out


def _held(value: float | None, dtype: str) -> float | int | None:
    """An old catalog's float64 ``nodata`` as the band's dtype holds it: a 64-bit integer's rounded through the
    float (2**64 for uint64's largest) clamped into the dtype's range, a NaN of an integer band dropped."""
    if value is None or np.dtype(dtype).kind not in "iu":
        return value
    if value != value or value in (np.inf, -np.inf):
        return None
    info = np.iinfo(dtype)
    return min(max(int(value), int(info.min)), int(info.max))


def _band_fields(bands: int, dtype: str, nodata: list[float | str | None], scales: list[float] | None,
                 offsets: list[float] | None, units: list[str] | None, descriptions: list[str] | None
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """An asset's ``raster:bands`` and ``eo:bands`` (None without descriptions) for one band layout; ``nodata``
    holds each band's (a number, or the catalog's text of one)."""
    raster_bands = []
    for b in range(bands):
        band: dict[str, Any] = {"data_type": _raster_type(dtype)}
        value = nodata[b]
        if value is not None:
            band["nodata"] = _json_number(value)
        if scales and scales[b] != 1.0:
            band["scale"] = scales[b]
        if offsets and offsets[b] != 0.0:
            band["offset"] = offsets[b]
        if units and units[b]:
            band["unit"] = units[b]
        raster_bands.append(band)
    eo_bands = None
    if descriptions and any(descriptions):
        eo_bands = [{"name": d or f"b{b + 1}"} for b, d in enumerate(descriptions)]
    return raster_bands, eo_bands


def _json_number(v: float | str) -> float | str:
    """A nodata value as the raster extension writes it: NaN and infinities as strings, an integer exact (a
    64-bit one is not rounded through a float)."""
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            v = float(v)
    if v != v:
        return "nan"
    if v in (np.inf, -np.inf):
        return "inf" if v > 0 else "-inf"
    return int(v) if float(v).is_integer() else float(v)


def _hrefs(paths: Sequence[str]) -> list[str]:
    """Asset hrefs: a local path made absolute (a relative one would be read against the Item JSON's location,
    not the working directory it was given in), a URI as given."""
    return [p if "://" in p else os.path.abspath(p) for p in paths]


def _local_files(paths: Sequence[str]) -> dict[int, tuple[int, str | None]]:
    """(size, multihash SHA-256 or None) of the local files among ``paths``: one stat each, and the digest
    only where it is free: a rumimm PAM sidecar's ``FILE_SHA256``, trusted while its ``FILE_STAT`` (size,
    mtime, inode) still matches the file.  Remote URIs and missing files are skipped."""
    import re

    from rumimm.store import is_remote

    seen: dict[str, tuple[int, str | None] | None] = {}  # a path's answer, for a path on several rows
    out: dict[int, tuple[int, str | None]] = {}
    for i, p in enumerate(paths):
        if p in seen:
            got = seen[p]
            if got is not None:
                out[i] = got
            continue
        seen[p] = None
        if is_remote(p):
            continue
        try:
            st = os.stat(p)
        except OSError:
            continue
        digest = None
        try:
            with open(p + ".aux.xml", "rb") as f:
                text = f.read(1 << 20).decode("utf-8", "replace")
        except OSError:
            text = ""
        sha = re.search(r'key="FILE_SHA256">([0-9a-f]{64})<', text) if text else None
        stat = re.search(r'key="FILE_STAT">([0-9 ]+)<', text) if sha else None
        if sha and stat and stat.group(1).split() == [str(st.st_size), str(st.st_mtime_ns), str(st.st_ino)]:
            digest = "1220" + sha.group(1)  # multihash: sha2-256 (0x12), 32 bytes (0x20)
        out[i] = seen[p] = (st.st_size, digest)
    return out


def _stem(path: str) -> str:
    name = redact(path).rstrip("/").rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[0] if "." in name else name


def to_item_collection(table: pa.Table | StrPath, **kwargs: Any) -> pystac.ItemCollection:
    """A catalog table (or its GeoParquet file) as a ``pystac.ItemCollection`` (keywords of :func:`to_items`)."""
    from rumimm.integrations.catalogs import read_catalog

    if isinstance(table, (str, os.PathLike)):
        table = read_catalog(table)
    return _pystac().ItemCollection(to_items(table, **kwargs))


def collection(items: Iterable[pystac.Item], *, id: str, description: str | None = None,
               license: str = "other", title: str | None = None) -> pystac.Collection:
    """A ``pystac.Collection`` holding ``items``, its extent their bbox union and time span.

    When an Item's bbox crosses the antimeridian (west > east, as RFC 7946 has it), the extent is the
    narrowest span of longitudes holding every Item's, west > east when it crosses too.
    """
    pystac = _pystac()
    members = list(items)
    if not members:
        raise ValueError("a collection needs at least one Item")
    boxes = np.array([it.bbox for it in members], dtype=float)
    bbox = [float(boxes[:, 0].min()), float(boxes[:, 1].min()), float(boxes[:, 2].max()), float(boxes[:, 3].max())]
    if (boxes[:, 0] > boxes[:, 2]).any():
        bbox[0], bbox[2] = _longitude_span(boxes[:, 0], boxes[:, 2])
    starts: list[dt.datetime] = []
    ends: list[dt.datetime] = []
    for it in members:
        s = it.common_metadata.start_datetime or it.datetime
        e = it.common_metadata.end_datetime or it.datetime
        if s is None or e is None:
            raise RumiError(f"item {redact(it.id)[:80]!r} has no datetime")
        starts.append(s)
        ends.append(e)
    extent = pystac.Extent(pystac.SpatialExtent([bbox]), pystac.TemporalExtent([[min(starts), max(ends)]]))
    col = pystac.Collection(id=id, description=description or f"{len(members)} rumi files", extent=extent,
                            license=license, title=title)
    exts = sorted({e for it in members for e in it.stac_extensions})
    col.stac_extensions = exts
    for it in members:
        it.collection_id = id
        col.add_item(it)
    return col


# ---------------------------------------------------------------------------------------------------------------
# Items in


class _Asset:
    """What loading needs of one Item's rumi asset, every field checked."""

    __slots__ = ("blob", "bounds", "end", "epsg", "header", "href", "id", "names", "shape", "spec", "start",
                 "time_count", "transform")

    def __init__(self, obj: pystac.Item | Mapping[str, Any]) -> None:
        d = obj.to_dict(include_self_link=False, transform_hrefs=False) if hasattr(obj, "to_dict") else obj
        if not isinstance(d, Mapping):
            raise RumiError(f"a STAC Item is a pystac.Item or a dict, got {type(obj).__name__}")
        self_href = obj.get_self_href() if hasattr(obj, "get_self_href") else _self_link(d)
        self.id = _text(d.get("id"), "item", "id")
        name = f"item {redact(self.id)[:80]!r}"  # an id may hold a signed URL too
        assets = d.get("assets")
        if not isinstance(assets, Mapping) or not assets:
            raise RumiError(f"{name}: no assets")
        rumi = [a for a in assets.values() if isinstance(a, Mapping) and HEADER_FIELD in a]
        if not rumi:
            hrefs = [redact(str(a.get("href"))) for a in assets.values() if isinstance(a, Mapping)]
            raise RumiError(f"{name}: no rumi asset (an asset with {HEADER_FIELD!r}); its assets "
                            f"({', '.join(hrefs[:3])}) are not rumi files: convert them with `rumimm convert`")
        asset = rumi[0]
        self.href = _absolute(_text(asset.get("href"), name, "href"), self_href)
        name = f"{name} ({redact(self.href)})"
        text = _text(asset.get(HEADER_FIELD), name, HEADER_FIELD, limit=_MAX_BLOB_CHARS)
        try:
            self.blob = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise RumiError(f"{name}: {HEADER_FIELD} is not base64 ({exc})") from None
        spec = asset.get(SPEC_FIELD)
        if spec not in ("0.1", "0.2", None):
            raise RumiError(f"{name}: {SPEC_FIELD} must be '0.1' or '0.2', got {_show(spec)}")
        self.spec = spec
        props = d.get("properties")
        if not isinstance(props, Mapping):
            raise RumiError(f"{name}: properties must be an object")
        code = props.get("proj:code")
        if code is None:
            raise RumiError(f"{name}: no proj:code (the projection extension); rumimm.stac.load needs each Item's "
                            "CRS, shape and transform")
        code = _text(code, name, "proj:code")
        if not code.upper().startswith("EPSG:") or not code[5:].isdigit() or len(code) > 15:
            raise RumiError(f"{name}: proj:code must be 'EPSG:<number>', got {_show(code)}")
        self.epsg = int(code[5:])
        unknown = _epsg_unknown(self.epsg)  # in PROJ's EPSG registry: the footprint is computed from it
        if unknown:
            raise RumiError(f"{name}: proj:code {code!r} is not a CRS of the EPSG registry ({unknown})")
        self.shape = tuple(_numbers(props.get("proj:shape"), name, "proj:shape", (2,), int))
        self.transform = tuple(_numbers(props.get("proj:transform"), name, "proj:transform", (6, 9), float))[:6]
        box = props.get("proj:bbox")
        self.bounds = None if box is None else tuple(_numbers(box, name, "proj:bbox", (4,), float))
        start = props.get("start_datetime") or props.get("datetime")
        end = props.get("end_datetime") or props.get("datetime")
        when = f"{name}: datetime "
        self.start = None if start is None else _utc(_text(start, name, "datetime", limit=64).replace("Z", "+00:00"),
                                                     when)
        self.end = None if end is None else _utc(_text(end, name, "datetime", limit=64).replace("Z", "+00:00"), when)
        self._check_blob(name, asset)
        eo = asset.get("eo:bands")
        self.names = None
        if isinstance(eo, list) and len(eo) <= _MAX_BANDS and all(isinstance(b, Mapping) for b in eo):
            names = [b.get("name") for b in eo]
            if all(isinstance(n, str) and len(n) <= 256 for n in names):
                self.names = names

    def _check_blob(self, name: str, asset: Mapping[str, Any]) -> None:
        """The blob must describe this asset: the grid the Item states and its file size."""
        from rumimm.format.v2 import parse_header

        try:
            hdr = parse_header(self.blob, spec=self.spec, path=name)
        except ValueError as exc:
            raise RumiError(f"{name}: {HEADER_FIELD} is not a rumi header blob ({exc})") from None
        if tuple(hdr.shape[-2:]) != self.shape:
            raise RumiError(f"{name}: {HEADER_FIELD} describes a {hdr.shape[-2]} x {hdr.shape[-1]} grid but "
                            f"proj:shape is {list(self.shape)}: the blob is not this asset's")
        size = asset.get("file:size")
        if isinstance(size, int) and hdr.spec == "0.1" and hdr.file_size != size:
            raise RumiError(f"{name}: {HEADER_FIELD} describes a file of {hdr.file_size} bytes but file:size is "
                            f"{size}: the blob is not this asset's")
        self.spec = hdr.spec
        self.time_count = int(hdr.time_count)
        self.header = hdr  # the Image opens from the checked record: the blob is not parsed twice


def _self_link(d: Mapping[str, Any]) -> str | None:
    """The href of an Item dict's "self" link (what its relative asset hrefs are relative to), or None."""
    links = d.get("links")
    if isinstance(links, list):
        for link in links:
            if isinstance(link, Mapping) and link.get("rel") == "self" and isinstance(link.get("href"), str):
                return cast("str", link["href"])
    return None


def _absolute(href: str, self_href: str | None) -> str:
    """An asset href resolved as STAC and pystac do: a relative one against the Item's self href (the Item
    JSON's location), not the process's working directory; relative with no self href, it stays as given."""
    if self_href is None or "://" in href or os.path.isabs(href):
        return href
    from urllib.parse import unquote, urlsplit

    out = str(_pystac().utils.make_absolute_href(href, self_href))
    return unquote(urlsplit(out).path) if out.startswith("file://") else out  # a local file, as rumimm opens it


@functools.lru_cache(maxsize=256)
def _epsg_unknown(code: int) -> str:
    """Why PROJ's EPSG registry does not hold ``code`` as a CRS, or "" when it does: asked once per code
    (the registry does not change while a process runs; a search result's Items share a few CRSs)."""
    from rumimm.errors import CRSError
    from rumimm.format.crs_identify import parse_crs

    try:
        parse_crs(code)
    except CRSError as exc:
        return str(exc)
    return ""


def _georef_block(a: _Asset) -> bytes:
    """The 160 bytes of georeferencing tags a writer stores for the Item's CRS and transform (pixel is area)."""
    key = (repr(a.transform), a.epsg)  # repr: -0.0 and 0.0 are stored as given, though they compare equal
    block = _GEOREF_BLOCKS.get(key)
    if block is None:  # made once per grid: a search result's Items share a few
        from rumimm.format.georef import geokeys, matrix_from_transform

        if len(_GEOREF_BLOCKS) >= 1024:
            _GEOREF_BLOCKS.clear()
        block = _GEOREF_BLOCKS[key] = (np.asarray(matrix_from_transform(a.transform), "<f8").tobytes()
                                       + np.asarray(geokeys(a.epsg), "<u2").tobytes())
    return block


_GEOREF_BLOCKS: dict[tuple[str, int], bytes] = {}


def _show(value: Any) -> str:
    """A value of the Item, as a message shows it: at most 60 characters, and a string without what follows a
    ``?`` or ``#`` (a mutated or careless Item can hold a presigned URL's signature in any field)."""
    if isinstance(value, str) and redact(value) != value:
        value = redact(value) + "?..."
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _text(value: Any, name: str, field: str, limit: int = 8192) -> str:
    if not isinstance(value, str):
        raise RumiError(f"{name}: {field} must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise RumiError(f"{name}: {field} is {len(value)} characters, more than {limit}")
    return value


def _numbers(value: Any, name: str, field: str, lengths: tuple[int, ...], kind: type) -> list[Any]:
    if not isinstance(value, (list, tuple)) or len(value) not in lengths:
        size = len(value) if isinstance(value, (list, tuple)) else type(value).__name__
        raise RumiError(f"{name}: {field} must be a list of {' or '.join(map(str, lengths))} numbers, got {size}")
    for v in value:
        if type(v) is float:  # the common case first: a float from JSON
            if not math.isfinite(v):
                raise RumiError(f"{name}: {field} must hold finite numbers")
        elif not isinstance(v, (int, float)) or isinstance(v, bool):
            raise RumiError(f"{name}: {field} must hold numbers only")
        elif not (math.isfinite(v) if isinstance(v, float) else abs(v) <= sys.float_info.max):
            raise RumiError(f"{name}: {field} must hold finite numbers")
    if kind is int and not all(float(v).is_integer() and 0 < v < 1 << 31 for v in value):
        raise RumiError(f"{name}: {field} must hold positive integers")
    return [kind(v) for v in value]


def _assets(items: Any) -> list[_Asset]:
    return [_Asset(it) for it in _item_list(items)]


def _longitude_span(wests: np.ndarray, easts: np.ndarray) -> tuple[float, float]:
    """(west, east) of the narrowest span of longitudes holding every (west, east) one (west > east: across
    the antimeridian): the circle less the widest gap between them, (-180, 180) when there is none."""
    starts = (wests + 180.0) % 360.0  # degrees east of the antimeridian
    widths = np.where(easts - wests >= 360.0, 360.0, (easts - wests) % 360.0)
    # the circle unrolled three times (a span wraps into the middle lap); each span keeps its own west and east
    spans = sorted((float(s) + k, float(s + w) + k, float(wv), float(ev))
                   for s, w, wv, ev in zip(starts, widths, wests, easts, strict=True) for k in (-360.0, 0.0, 360.0))
    merged = [list(spans[0])]
    for lo, hi, wv, ev in spans[1:]:
        if lo > merged[-1][1]:
            merged.append([lo, hi, wv, ev])
        elif hi > merged[-1][1]:
            merged[-1][1], merged[-1][3] = hi, ev
    # gaps (from, to, east before, west after) clipped to the middle lap
    gaps = [[max(m0[1], 0.0), min(m1[0], 360.0), m0[3], m1[2]] for m0, m1 in itertools.pairwise(merged)
            if min(m1[0], 360.0) > max(m0[1], 0.0)]
    if not gaps:
        return -180.0, 180.0
    if len(gaps) > 1 and gaps[0][0] == 0.0 and gaps[-1][1] == 360.0:  # one gap across the antimeridian
        first = gaps.pop(0)
        gaps[-1][1], gaps[-1][3] = 360.0 + first[1], first[3]
    _, _, east, west = max(gaps, key=lambda g: g[1] - g[0])
    return west, east


def _select(assets: list[_Asset], bbox: Sequence[float] | None, time: Any) -> list[_Asset]:
    """The assets whose footprint meets ``bbox`` (WGS 84) and whose time meets ``time``."""
    if bbox is not None:
        assets = [a for a in assets if _meets(a, bbox)]
    if time is not None:
        lo, hi = _time_range(time)
        assets = [a for a in assets if a.start is not None and a.end is not None
                  and (lo is None or a.end >= lo) and (hi is None or a.start <= hi)]
    return assets


def _time_range(time: Any) -> tuple[dt.datetime | None, dt.datetime | None]:
    """(start, end) in UTC of a ``time`` argument (None: open).  A date (text of 10 characters, a
    ``datetime.date``, a day's ``numpy.datetime64``) is the whole day; naive times are UTC, as the writer has them."""
    if isinstance(time, str):
        parts = time.split("/") if "/" in time else [time, time]
        if len(parts) != 2:
            raise ValueError(f"time must be 'start/end', got {time!r}")
        lo, hi = (None if p in ("", "..") else p for p in parts)
    elif isinstance(time, (tuple, list)) and len(time) == 2:
        lo, hi = time
    else:
        lo = hi = time

    def conv(v: Any, end: bool) -> dt.datetime | None:
        if v is None:
            return None
        day = None
        if isinstance(v, np.datetime64):
            if np.isnat(v):
                raise RumiError("time: NaT is not a time (give None for an open end)")
            unit = np.datetime_data(v.dtype)[0]
            if unit in ("Y", "M", "W"):
                raise RumiError(f"time: {v} is a {unit} datetime64; give a day or a finer unit")
            if unit == "D":
                day = dt.date.fromisoformat(str(v))
            else:
                v = v.astype("datetime64[us]").astype(dt.datetime)  # naive: UTC
        elif isinstance(v, str) and len(v) == 10:
            try:
                day = dt.date.fromisoformat(v)
            except ValueError:
                raise RumiError(f"time {_show(v)} is not an ISO 8601 date or datetime") from None
        elif isinstance(v, dt.date) and not isinstance(v, dt.datetime):
            day = v
        if day is not None:  # the whole day: from its first instant to its last
            t = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
            return t + dt.timedelta(days=1) - dt.timedelta(microseconds=1) if end else t
        if isinstance(v, str):
            return _utc(v.replace("Z", "+00:00"), "time ")
        if not isinstance(v, dt.datetime):
            raise RumiError(f"time must be a datetime, a date, a numpy.datetime64 or ISO 8601 text, got "
                            f"{type(v).__name__}")
        return _utc(v, "time ")

    return conv(lo, False), conv(hi, True)


def _meets(a: _Asset, bbox: Sequence[float]) -> bool:
    return _window(a, bbox) is not None


@functools.lru_cache(maxsize=64)
def _bbox_outline(bbox: tuple[float, float, float, float], epsg: int) -> tuple[np.ndarray, np.ndarray]:
    """A WGS 84 bbox's outline in the CRS ``epsg``, each edge densified (a parallel or meridian bends there:
    its four corners alone miss the bulge), as rasterio's ``transform_bounds`` does; points with no image in
    the CRS are dropped.  Cached: a search result's Items share a few CRSs."""
    import pyproj

    w, s, e, n = bbox
    t = np.linspace(0.0, 1.0, _BBOX_POINTS)
    lon = np.concatenate([w + (e - w) * t, np.full(_BBOX_POINTS, e), e - (e - w) * t, np.full(_BBOX_POINTS, w)])
    lat = np.concatenate([np.full(_BBOX_POINTS, s), s + (n - s) * t, np.full(_BBOX_POINTS, n), n - (n - s) * t])
    if epsg == 4326:
        return lon, lat
    xs, ys = pyproj.Transformer.from_crs(4326, epsg, always_xy=True).transform(lon, lat)
    xs, ys = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    ok = np.isfinite(xs) & np.isfinite(ys)
    return xs[ok], ys[ok]


def _window(a: _Asset, bbox: Sequence[float]) -> tuple[slice, slice] | None:
    """The rows and columns of ``a``'s grid that a WGS 84 bbox meets, or None: every pixel the bbox touches
    (snapped outward, so a bbox inside one pixel gives that pixel, as odc-stac does).  Worked out in pixel
    space, so a rotated or sheared grid gets the window of pixels holding the bbox too.  A bbox missing a grid
    in EPSG:4326 is tried a turn east and west too (a grid in 0..360 longitudes)."""
    w, s, e, n = (float(v) for v in bbox)
    for turn in (0.0, 360.0, -360.0) if a.epsg == 4326 else (0.0,):
        win = _window_part(a, (w + turn, s, e + turn, n))
        if win is not None:
            return win
    return None


def _window_part(a: _Asset, bbox: tuple[float, float, float, float]) -> tuple[slice, slice] | None:
    """:func:`_window` of one bbox as given."""
    xs, ys = _bbox_outline(bbox, a.epsg)
    if not xs.size:
        return None
    ga, gb, gc, gd, ge, gf = a.transform
    det = ga * ge - gb * gd
    if det == 0 or not math.isfinite(det):
        raise RumiError(f"item {redact(a.id)[:80]!r} ({redact(a.href)}): proj:transform {list(a.transform)} is "
                        "singular (no pixel maps back to it): the grid cannot be cut to a bbox")
    dx, dy = xs - gc, ys - gf
    cols = (ge * dx - gb * dy) / det  # the inverse affine: fractional column and row of each outline point
    rows = (ga * dy - gd * dx) / det
    h, w = a.shape
    out = []
    for frac, size in ((rows, h), (cols, w)):
        first = math.floor(float(frac.min()) + _ALIGNED)
        last = max(math.ceil(float(frac.max()) - _ALIGNED), first + 1)  # exclusive; a point still meets a pixel
        lo, hi = max(first, 0), min(last, size)
        if lo >= hi:
            return None
        out.append(slice(lo, hi))
    return out[0], out[1]


def load(items: Any, *, bands: Sequence[int | str] | None = None,
         bbox: Sequence[float] | None = None, time: Any = None, output: str = "xarray",
         chunks: Any = None, groupby: str | None = None, cache_bytes: int | None = None, verify: bool = True,
         storage_options: Mapping[str, Any] | None = None) -> Any:
    """Load STAC Items of rumi files lazily, each asset opened with the header blob its Item carries.

    No header is requested: the first request of each file is for pixels.

    Parameters
    ----------
    items : pystac Items or their dicts, or an ItemCollection
        Items made by :func:`item` (any Item whose asset carries ``rumi:header``).  A relative
        asset href is resolved against the Item's self link, as pystac resolves it.
    bands : sequence of int (1-based) or str (eo band names), optional
        Bands of the xarray output (default all).
    bbox : (west, south, east, north) in WGS 84, optional
        Keep Items whose grid meets it; the xarray output is also cut to every pixel it touches
        (snapped outward, as odc-stac does).  Its edges are densified when projected to each
        file's CRS: a parallel bends there, and four corners would miss pixels.  West > east (a
        bbox across the antimeridian, as an Item's may be) is refused: load each side.  A grid
        in 0..360 longitudes is met a turn east too.
    time : datetime, date, numpy.datetime64, ISO text, ``"start/end"`` or a (start, end) pair, optional
        Keep Items whose time meets it.  A date is the whole day; naive times are UTC.
    output : {"xarray", "cube", "collection"}
        An ``xarray.Dataset`` (dims time, band, y, x; a rioxarray CRS; Dask-backed), a
        :class:`rumimm.Cube` (the Items must share a grid) or a :class:`rumimm.ImageCollection`.
    chunks : optional
        The xarray output's Dask chunks (default ``{}``: whole frames).
    groupby : {None, "crs"}
        Items in several CRSs are refused unless ``groupby="crs"``: then a dict from EPSG
        code to one output per CRS.  Nothing is ever reprojected.

    Raises
    ------
    RumiError
        An Item without a rumi asset (a COG: convert it with ``rumimm convert``), without
        the projection fields, with a blob that does not describe its asset, or Items in
        several CRSs (without ``groupby``).
    """
    if output not in ("xarray", "cube", "collection"):
        raise ValueError(f"output must be 'xarray', 'cube' or 'collection', got {output!r}")
    if groupby not in (None, "crs"):
        raise ValueError(f"groupby must be None or 'crs', got {groupby!r}")
    if bbox is not None and (not isinstance(bbox, (list, tuple)) or len(bbox) != 4
                             or not all(isinstance(v, (int, float)) and np.isfinite(v) for v in bbox)
                             or bbox[0] > bbox[2] or bbox[1] > bbox[3]):
        across = " (one across the antimeridian, west > east, is not taken: load each side, up to 180 and from " \
            "-180)" if isinstance(bbox, (list, tuple)) and len(bbox) == 4 and bbox[1] <= bbox[3] else ""
        raise ValueError(f"bbox must be (west, south, east, north) in degrees, got {_show(bbox)}{across}")
    assets = _select(_assets(items), bbox, time)
    if not assets:
        raise RumiError("no Item meets the bbox and time asked for")
    crss = sorted({a.epsg for a in assets})
    if len(crss) > 1 and groupby is None:
        raise RumiError(f"the Items are in {len(crss)} CRSs (EPSG {', '.join(map(str, crss[:8]))}); rumimm.stac.load "
                        "never reprojects: pass groupby='crs' for one result per CRS, or select Items of one CRS")
    kw = {"bands": bands, "bbox": bbox, "output": output, "chunks": chunks, "cache_bytes": cache_bytes,
          "verify": verify, "storage_options": storage_options}
    if groupby == "crs":
        return {epsg: _load_one([a for a in assets if a.epsg == epsg], **kw) for epsg in crss}
    return _load_one(assets, **kw)


def _load_one(assets: list[_Asset], *, bands: Sequence[int | str] | None, bbox: Sequence[float] | None,
              output: str, chunks: Any, cache_bytes: int | None, verify: bool,
              storage_options: Mapping[str, Any] | None) -> Any:
    from rumimm.reader.cube import Cube, ImageCollection
    from rumimm.reader.image import Image, state_georef

    assets = sorted(assets, key=lambda a: (a.start or dt.datetime.min.replace(tzinfo=dt.UTC), a.id))
    images: list[Image] = []
    try:
        for a in assets:
            img = Image(a.href, a.header, cache_bytes=cache_bytes, verify=verify, spec=a.spec,
                        storage_options=storage_options)
            state_georef(img, _georef_block(a))  # the Item states it: no request for the file's copy
            images.append(img)
    except BaseException:
        for img in images:
            img.close()
        raise
    if output == "collection":
        return ImageCollection(images)
    grids = {(a.shape, a.transform) for a in assets}
    if len(grids) > 1:
        for img in images:
            img.close()
        raise RumiError(f"the Items lie on {len(grids)} grids; output={output!r} needs one grid: use "
                        "output='collection' (ImageCollection.cubes() groups them)")
    cube = Cube(images)
    if output == "cube":
        return cube
    return _dataset(cube, assets, bands, bbox, chunks)


def _dataset(cube: Cube, assets: list[_Asset], bands: Sequence[int | str] | None, bbox: Sequence[float] | None,
             chunks: Any) -> xr.Dataset:
    import xarray as xr

    labels = None  # the Items' times label the stack (a spec 0.2 file's trailer would cost a request each)
    if all(a.start is not None and a.time_count == 1 for a in assets):
        labels = np.array([np.datetime64(_naive(cast("dt.datetime", a.start))) for a in assets], "datetime64[ns]")
    ds = xr.open_dataset(cast("Any", cube), engine="rumimm", stack_labels=labels,
                         chunks={} if chunks is None else chunks)
    names = assets[0].names
    if names is not None and len(names) == ds.sizes["band"]:
        ds = ds.assign_coords(description=("band", np.array(names, dtype=object)))
    if bands is not None:
        ds = ds.isel(band=[_band_index(ds, b) for b in bands])
    if bbox is not None:
        window = _window(assets[0], bbox)  # the Items share one grid
        rows, cols = window if window is not None else (slice(0, 0), slice(0, 0))
        ds = ds.isel(y=rows, x=cols)
    return ds


def _band_index(ds: xr.Dataset, band: int | str) -> int:
    n = ds.sizes["band"]
    if isinstance(band, str):
        names = list(ds["description"].values) if "description" in ds.coords else []
        if band not in names:
            raise RumiError(f"no band named {band!r}; the bands are {names}")
        return names.index(band)
    if not 1 <= int(band) <= n:
        raise RumiError(f"band {band} is outside 1..{n}")
    return int(band) - 1


def from_items(items: Any) -> pa.Table:
    """A :func:`rumimm.catalog` table of STAC Items of rumi files (a search result becomes a catalog).

    Built from the Items alone (paths are the asset hrefs, a relative one resolved against the Item's
    self link; blobs their ``rumi:header``): no file is read.  Band metadata comes from the raster and
    eo extensions; a spec 0.2 file's single time from the Item's datetime (files of several time
    steps get none: their trailer holds them).
    """
    from rumimm.format.v2 import parse_header
    from rumimm.integrations.catalogs import catalog_from_rows

    dicts = [it.to_dict(include_self_link=True, transform_hrefs=False) if hasattr(it, "to_dict") else it
             for it in _item_list(items)]  # the self link: relative hrefs are resolved against it
    assets = [_Asset(d) for d in dicts]
    rows = []
    for a, d in zip(assets, dicts, strict=True):
        hdr = parse_header(a.blob, spec=a.spec)
        asset = next(x for x in d["assets"].values() if isinstance(x, Mapping) and HEADER_FIELD in x)
        bands = int(hdr.samples_per_pixel)
        raster = asset.get("raster:bands")
        raster = raster if isinstance(raster, list) and len(raster) == bands else [{}] * bands
        for b in raster:
            ok = isinstance(b, Mapping) and all(isinstance(b.get(k, 0.0), (int, float))
                                                and not isinstance(b.get(k), bool) for k in ("scale", "offset")) \
                and isinstance(b.get("unit", ""), str) and isinstance(b.get("nodata", 0), (int, float, str))
            if not ok:
                raise RumiError(f"item {redact(a.id)[:80]!r} ({redact(a.href)}): raster:bands entries must be objects "
                                "with numeric scale/offset, a text unit and a number (or nan/inf text) nodata")
        eo = asset.get("eo:bands")
        names = [b.get("name") if isinstance(b, Mapping) else None for b in eo] if isinstance(eo, list) else []
        names = names if len(names) == bands else []
        nodata = [_nodata_of(b.get("nodata"), a) for b in raster]  # each band's; an integer stays exact
        meta = (nodata, [str(n or "") for n in names] or [""] * bands,
                [float(b.get("scale", 1.0)) for b in raster], [float(b.get("offset", 0.0)) for b in raster],
                [str(b.get("unit", "")) for b in raster])
        if not any(meta[1]) and all(v is None for v in nodata) and all(s == 1.0 for s in meta[2]) and not any(meta[3]) \
                and not any(meta[4]):
            meta = ([], [], [], [], [])  # as a file without a sidecar catalogues
        time = None
        if hdr.spec == "0.2" and hdr.time_count == 1 and a.start is not None and a.end is not None:
            time = [_naive(a.start)] if a.start == a.end else [f"{_naive(a.start)}/{_naive(a.end)}"]
        bounds = a.bounds or _bounds(a.transform, a.shape)
        rows.append((a.href, a.blob, (bands, a.shape[0], a.shape[1]), str(hdr.dtype),
                     (hdr.tile_length, hdr.tile_width), hdr.frame_unit_name, a.epsg, a.transform, bounds, meta,
                     (hdr.spec, hdr.time_count, time)))
    import pyarrow as pa

    table = catalog_from_rows(rows)
    meta = table.schema.metadata
    for name, values in (("start_datetime", [a.start for a in assets]), ("end_datetime", [a.end for a in assets])):
        table = table.append_column(name, pa.array(values, pa.timestamp("us", tz="UTC")))
    return table.replace_schema_metadata(meta)


def _nodata_of(value: Any, a: _Asset) -> int | float | None:
    """A raster:bands nodata as a number: an integer as given (exact beyond 2**53), NaN and infinities from
    their text."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RumiError(f"item {redact(a.id)[:80]!r} ({redact(a.href)}): raster:bands nodata {_show(value)} "
                        "is not a number") from None


def to_stac_geoparquet(items: Iterable[pystac.Item | Mapping[str, Any]], path: StrPath) -> None:
    """Write Items as stac-geoparquet (``pip install stac-geoparquet``): the STAC community's Parquet layout."""
    from stac_geoparquet.arrow import parse_stac_items_to_arrow, to_parquet

    dicts = [it.to_dict(include_self_link=False, transform_hrefs=False) if hasattr(it, "to_dict") else dict(it)
             for it in _item_list(items)]
    to_parquet(parse_stac_items_to_arrow(dicts), os.fspath(path))


def read_stac_geoparquet(path: StrPath) -> list[dict[str, Any]]:
    """The Item dicts of a stac-geoparquet file, for :func:`load` or :func:`from_items`."""
    import pyarrow.parquet as pq
    from stac_geoparquet.arrow import stac_table_to_items

    return list(stac_table_to_items(pq.read_table(os.fspath(path))))


def _naive(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).replace(tzinfo=None).isoformat()


def _bounds(transform: Sequence[float], shape: Sequence[int]) -> tuple[float, float, float, float]:
    a, _, c, _, e, f = transform
    xs, ys = (c, c + a * shape[1]), (f, f + e * shape[0])
    return (min(xs), min(ys), max(xs), max(ys))


def is_items(obj: Any) -> bool:
    """Whether ``obj`` is STAC Items as :func:`load` and :func:`from_items` take them: pystac objects, a
    FeatureCollection dict, or a list of pystac Items or Item dicts (what ``item.to_dict()`` and
    :func:`read_stac_geoparquet` give), so the datasets taking Items take their dicts too."""
    def one(x: Any) -> bool:
        return type(x).__module__.startswith("pystac") or (
            isinstance(x, Mapping) and ((x.get("type") == "Feature" and "assets" in x)
                                        or (x.get("type") == "FeatureCollection" and "features" in x)))

    return one(obj) or (isinstance(obj, (list, tuple)) and bool(obj) and one(obj[0]))


def _item_list(items: Any) -> list[Any]:
    if isinstance(items, Mapping) and items.get("type") == "FeatureCollection":
        items = items.get("features")
    elif hasattr(items, "items") and not isinstance(items, Mapping):
        items = items.items
    if not isinstance(items, Iterable) or isinstance(items, (str, bytes, Mapping)):
        raise RumiError(f"expected STAC Items (a list, an ItemCollection), got {type(items).__name__}")
    return list(items)
