"""The fuzz targets: one function per parser, bytes in, every invariant checked inside.

A target returns normally when rumimm parsed the input or refused it with one of the
exceptions its ``Target.allowed`` lists; any other exception escapes and is a finding
(under atheris: a crash report and the input saved).  Crashes, hangs and memory are
bounded by the runner (``main``: libFuzzer's ``-timeout`` and ``-rss_limit_mb``, and an
address-space limit so that no single allocation of more than ``ALLOC_LIMIT`` can
succeed); ``tests/test_fuzz.py`` replays the seeds with ``tracemalloc`` and an alarm.

Inputs that carry more than one field are read with :class:`Reader`, front to back; a
short input reads as zeros, so every byte string is a valid input.  Nothing here needs
atheris: the replay test and the runner call the same functions.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

#: Bytes any one allocation may take while a target runs under ``main`` (the process's
#: address space is capped at what it had after start-up plus this).
ALLOC_LIMIT = 1 << 30


@dataclass(frozen=True)
class Target:
    name: str
    fn: Callable[[bytes], None]
    doc: str
    allowed: tuple[str, ...]  # dotted names of the exception classes a refusal may raise
    modules: tuple[str, ...] = ()  # rumimm modules to import (and instrument) before fuzzing
    max_len: int = 4096  # libFuzzer's -max_len

    def allowed_types(self) -> tuple[type, ...]:
        import importlib

        out = []
        for dotted in self.allowed:
            mod, _, name = dotted.rpartition(".")
            out.append(getattr(importlib.import_module(mod), name))
        return tuple(out)

    def run(self, data: bytes) -> None:
        """The target on ``data``; warnings (GDAL's about a file without georeferencing, ...) are not findings."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.fn(data)

    def __call__(self, data: bytes) -> None:
        try:
            self.run(data)
        except self.allowed_types():
            pass


TARGETS: dict[str, Target] = {}


def target(name: str, allowed=("rumimm.errors.RumiError",), modules=(), max_len=4096):
    def add(fn):
        TARGETS[name] = Target(name, fn, (fn.__doc__ or "").strip().splitlines()[0], tuple(allowed),
                               tuple(modules), max_len)
        return fn

    return add


class Reader:
    """Fields read front to back from a fuzz input; past its end every field is zero."""

    def __init__(self, data: bytes):
        self.data, self.at = bytes(data), 0

    def take(self, n: int) -> bytes:
        out = self.data[self.at:self.at + n]
        self.at += n
        return out.ljust(n, b"\0")

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self.take(2), "little")

    def chunk(self) -> bytes:  # a u16 length, then that many bytes (fewer at the end)
        n = self.u16()
        out = self.data[self.at:self.at + n]
        self.at += n
        return out

    def rest(self) -> bytes:
        out = self.data[self.at:]
        self.at = len(self.data)
        return out


_scratch: str | None = None


def scratch(name: str, data: bytes = b"") -> str:
    """A path in this process's scratch folder (in memory when /dev/shm exists), holding ``data``."""
    global _scratch
    if _scratch is None:
        given = os.environ.get("RUMIMM_FUZZ_SCRATCH")  # the runner's, removed when the target's process ends
        if given:
            os.makedirs(given, exist_ok=True)
            _scratch = given
        else:
            _scratch = tempfile.mkdtemp(prefix="rumimm-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
            atexit.register(shutil.rmtree, _scratch, True)
    path = os.path.join(_scratch, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def _same_pixels(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype.itemsize == b.dtype.itemsize and np.array_equal(
        np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))


# -- header blobs, both specs --------------------------------------------------------------

@target("header", modules=("rumimm.format.blob", "rumimm.format.v2", "rumimm.reader.blob_column"))
def header(data: bytes) -> None:
    """Header blobs of spec 0.1 (28 bytes + sizes) and 0.2 (32 bytes + sizes): parse_header, Header.parse,
    parse_blobs and parse_blobs_any agree on what is valid."""
    from rumimm.errors import BlobError
    from rumimm.format.blob import Header
    from rumimm.format.v2 import Header2, parse_header
    from rumimm.reader.blob_column import parse_blobs, parse_blobs_any

    results = {}
    for spec in (None, "0.1", "0.2"):
        try:
            results[spec] = parse_header(data, spec=spec)
        except BlobError:
            results[spec] = None
    one, two = results["0.1"], results["0.2"]
    auto = results[None]
    # without a spec: valid as exactly one of them
    assert (auto is not None) == ((one is None) != (two is None)), (auto, one, two)
    try:
        direct = Header.parse(data)
    except BlobError:
        direct = None
    assert (direct is None) == (one is None)
    status = int(parse_blobs([data], errors="status")["status"][0])
    assert (status == 0) == (one is not None), status  # the numba pass and the Python parser agree
    try:
        anyf = parse_blobs_any([data])
        assert one is not None or two is not None
        assert int(anyf["spec"][0]) == (1 if one is not None else 2)
    except BlobError:
        assert one is None and two is None
    for h in (one, two):
        if h is None:
            continue
        assert isinstance(h, Header2) == (h is two)
        n = h.n_frames
        _ = h.to_dict(), repr(h), h.file_size, h.shape
        end = h.offset(n)  # the end of the last frame
        for k in {0, n // 2, n - 1}:
            assert h.base_frame_offset <= h.offset(k) <= end and h.byte_count(k) >= 0
        if n <= 1 << 16:  # the arrays of every frame: only for a blob whose size bounds the count
            offsets, counts = np.asarray(h.frame_offsets), np.asarray(h.frame_byte_counts)
            assert offsets.shape == (n + 1,) and counts.shape == (n,)
            assert int(offsets[-1]) == end and int(offsets[-2]) + int(counts[-1]) == end


# -- the 0.2 trailer ----------------------------------------------------------------------

_TIMES = [0, 1, 2, 3, 4, 5, 6, 7, 8, 64, 255, 65535, 2**31, 2**32 - 1]


@target("trailer", modules=("rumimm.format.trailer",))
def trailer(data: bytes) -> None:
    """The spec 0.2 trailer (band texts, time kind, regular or explicit times) for a given band and time count."""
    from rumimm.format.trailer import parse_trailer

    r = Reader(data)
    bands = r.u8() % 10
    times = _TIMES[r.u8() % len(_TIMES)]
    buf = r.rest()
    tr = parse_trailer(buf, bands, times, path="fuzz.rumi")
    assert tr.count in (times, 2 * times), (tr.count, times)  # instants, or interval ends
    assert len(tr.bands) == bands
    assert tr.residuals is None or len(tr.residuals) == tr.count <= 8 * len(buf)
    _ = tr.time_kind, repr(tr)
    if tr.count <= 4096:
        seconds = tr.seconds
        assert len(seconds) == tr.count
        _ = tr.time, tr.datetime64


# -- frame headers ------------------------------------------------------------------------

@target("frame", modules=("rumimm.codec.frames", "rumimm.codec.geozl_lib", "rumimm.codec.readers",
                          "rumimm.reader.frame_checks"))
def frame(data: bytes) -> None:
    """An OpenZL frame for a frame position of a given encoding and sample count: check_frame_header,
    reader/frame_checks.check_header, codec.readers.frame_codecs (which geozl codecs and readers it needs),
    then a decode into exactly the checked size."""
    from rumimm import codec
    from rumimm.codec import geozl_lib
    from rumimm.codec import readers as codec_readers
    from rumimm.errors import CodecError
    from rumimm.format.dtypes import ENCODINGS
    from rumimm.format.spec import spec_named
    from rumimm.reader import frame_checks

    r = Reader(data)
    encs = sorted(ENCODINGS.values(), key=lambda e: (e.sample_format, e.bits_per_sample))
    enc = encs[r.u8() % len(encs)]
    n_samples = r.u16() + 1
    flags = r.u8()
    components = bool(flags & 1)
    spec = "0.2" if flags & 2 else "0.1"
    body = r.rest()
    isz = enc.itemsize
    passed = True
    try:
        codec.check_frame_header(body, enc, n_samples, label="fuzz: frame 0", components=components)
    except CodecError:
        passed = False
    arr = np.frombuffer(body, np.uint8)
    fs = SimpleNamespace(header_checked=np.zeros(1, np.uint8), magic0=None, isz=isz, enc=enc,
                         header=SimpleNamespace(spec=spec, format_spec=spec_named(spec)),
                         grid=SimpleNamespace(frame_samples=lambda k: n_samples),
                         label=lambda k: "fuzz: frame 0", read_frame=lambda k: arr)
    try:
        frame_checks.check_header(fs, 0, arr)
        checked = True
    except CodecError:
        checked = False
    try:  # which codecs and readers the frame needs (info, validate): trial decodes bounded by the checked size
        found = codec_readers.frame_codecs(body, max_bytes=n_samples * isz)
        assert isinstance(found.codecs, frozenset) and isinstance(found.readers, tuple)
        assert found.decodable or not found.codecs
    except CodecError:
        pass
    if checked:
        assert fs.header_checked[0] == 1
        if not (isz == 16 and spec == "0.2"):  # the same rule as check_frame_header without components
            assert passed or components, "check_header passed a frame check_frame_header refused"
        expected = n_samples * isz
        dst = np.empty(expected + 64, np.uint8)  # decode into exactly the size the header was checked against
        src = np.ascontiguousarray(arr) if arr.size else np.zeros(1, np.uint8)
        got = geozl_lib.decompress(src.ctypes.data, arr.size, dst.ctypes.data, expected, True)
        assert got < 0 or got == expected or got == geozl_lib.STATUS_UNAVAILABLE, (got, expected)


# -- the IFD: index and validate -----------------------------------------------------------

@target("ifd", modules=("rumimm.format.tiff", "rumimm.format.bigtiff", "rumimm.format.v2", "rumimm.reader.validate",
                        "rumimm.format.profile_checks", "rumimm.store.local"), max_len=1 << 16)
def ifd(data: bytes) -> None:
    """A whole file's bytes (spec 0.1 BigTIFF or spec 0.2): index and validate; a blob index returns parses."""
    import rumimm
    from rumimm.format.v2 import parse_header

    path = scratch("ifd.rumi", data)
    try:
        blob = rumimm.build_blob(path)
    except rumimm.RumiError:
        blob = None
    rep = rumimm.validate(path)
    _ = rep.ok, str(rep), getattr(rep, "readers", None), getattr(rep, "codecs", None)
    if blob is not None:
        hdr = parse_header(blob)  # index returns a canonical blob: it parses, and its frames lie in the file
        assert hdr.offset(hdr.n_frames) <= len(data), (hdr.offset(hdr.n_frames), len(data))


# -- open and read ------------------------------------------------------------------------

def _read_all(img):
    whole = img[...]
    shape = img.shape
    win = tuple(slice(s // 3, s - s // 4) for s in shape)
    part = img[win]
    assert _same_pixels(part, whole[win])
    _ = img.crs, img.transform, img.to_dict()
    return whole


def _peer016(path: str, blob: bytes, shape):
    """rumi-eo 0.16.0's read of a spec 0.1 file, or None when it refuses (any exception: not ours)."""
    try:
        import rumi
    except ImportError:
        return None
    try:
        return np.asarray(rumi.read(path, blob))
    except Exception:
        return None


@target("open_read", modules=("rumimm.reader.image", "rumimm.reader.planner", "rumimm.reader.source",
                              "rumimm.reader.frame_checks", "rumimm.reader.small_reads", "rumimm.format.georef",
                              "rumimm.format.trailer", "rumimm.reader.validate", "rumimm.format.profile_checks"),
         max_len=1 << 16)
def open_read(data: bytes) -> None:
    """A small file of either spec with mutated bytes: open, read whole and a window, with and without the
    blob index gives; both reads agree, and a spec 0.1 read agrees with rumi-eo 0.16.0 where both succeed."""
    import rumimm

    path = scratch("open.rumi", data)
    whole = None
    try:
        with rumimm.open(path, cache_bytes=0) as img:
            spec = img.header.spec
            whole = _read_all(img)
            blob = bytes(img.header)
    except rumimm.RumiError:
        blob = None
    if blob is None:
        try:
            blob = rumimm.build_blob(path)
        except rumimm.RumiError:
            return
    try:
        with rumimm.open(path, blob, cache_bytes=0) as img:
            spec = img.header.spec
            other = _read_all(img)
    except rumimm.RumiError:
        return
    if whole is not None:
        assert _same_pixels(whole, other), "the IFD read and the blob read of one file differ"
    if spec == "0.1":
        peer = _peer016(path, blob, other.shape)
        if peer is not None and peer.size == other.size and peer.dtype.itemsize == other.dtype.itemsize:
            assert _same_pixels(peer.reshape(other.shape), other), "rumimm and rumi-eo 0.16.0 read different pixels"


# -- GeoTIFF import -----------------------------------------------------------------------

@target("geotiff", allowed=("rumimm.errors.RumiError", "rasterio.errors.RasterioError"),
        modules=("rumimm.integrations.geotiff", "rumimm.format.georef", "rumimm.format.crs_identify",
                 "rumimm.writer.writer"), max_len=1 << 14)
def geotiff(data: bytes) -> None:
    """A small GeoTIFF's bytes that rasterio opens: from_geotiff converts it or refuses; a converted file reads
    GDAL's pixels.  Files rasterio alone cannot open are skipped: GDAL's side, not rumimm's."""
    import rasterio

    import rumimm

    src = scratch("in.tif", data)
    dst = os.path.join(os.path.dirname(src), "out.rumi")
    # GDAL's block cache (5 % of RAM by default) would grow the process over thousands of inputs
    # until libFuzzer's resident-memory limit calls an out-of-memory that no single input caused
    with rasterio.Env(GDAL_DISABLE_READDIR_ON_OPEN="EMPTY_DIR", CPL_DEBUG="OFF", GDAL_CACHEMAX=8):
        try:
            with rasterio.open(src) as ds:
                if ds.count * ds.width * ds.height > 1 << 20:
                    return  # a header claiming a large raster: GDAL would decode it all, rumimm streams it
        except Exception:
            return
        blob = rumimm.from_geotiff(src, dst, tile=16, threads=1)
        with rasterio.open(src) as ds:
            want = ds.read()
    with rumimm.open(dst, blob) as img:
        got = img[...]
    assert _same_pixels(got, want), "from_geotiff changed the pixels"


# -- catalog rows -------------------------------------------------------------------------

_CAT_FILES: list = []


def _catalog_files():
    """(path, blob, pixels) of two small real files the rows may point at (one per spec)."""
    if not _CAT_FILES:
        import rumimm

        a = (np.arange(2 * 9 * 11, dtype=np.uint16) * 37).reshape(2, 9, 11)
        p1 = scratch("cat1.rumi")
        b1 = rumimm.write(p1, a, tile=8, unit="tile", threads=1)
        p2 = scratch("cat2.rumi")
        b2 = rumimm.write(p2, a[:1], tile=8, unit="cell", threads=1, spec="0.2", time=["2024-01-01"],
                          descriptions=["b1"])
        with rumimm.open(p2, b2) as img:
            a2 = img[...]
        _CAT_FILES.extend([(p1, b1, a), (p2, b2, a2)])
    return _CAT_FILES


#: URIs a catalog row may hold: malformed or of unknown schemes, none naming a bucket or host (no request
#: leaves the machine).  No reachable address either: a connection
#: refused is retried with backoff, per range, which for a blob claiming a large file took 37 s.
_CATALOG_URIS = ("http://", "s3://", "s3:///x.rumi", "az://", "://x.rumi", "file:///nonexistent/x.rumi",
                 "http://[::1", "http://h:99999/x.rumi", "ftp://127.0.0.1/x.rumi", "HTTP://?a=b#c", "az:///c")


@target("catalog", allowed=("rumimm.errors.RumiError", "builtins.FileNotFoundError"),
        modules=("rumimm.reader.catalog_table", "rumimm.reader.blob_column", "rumimm.reader.image"))
def catalog(data: bytes) -> None:
    """Rows of a catalog (path, blob, spec): check_rows, then each row's image opened from its blob and
    read; an image a blob opens reads the file's pixels."""
    import pyarrow as pa

    from rumimm.reader.catalog_table import check_rows
    from rumimm.reader.image import Image

    files = _catalog_files()
    r = Reader(data)
    n = r.u8() % 6 + 1
    flags = r.u8()
    paths, blobs, specs = [], [], []
    for _ in range(n):
        kind = r.u8()
        if kind & 0x80:  # a URI that is refused before any request (a reachable one is the remote_read target's)
            paths.append(_CATALOG_URIS[(kind >> 2) % len(_CATALOG_URIS)])
        else:
            paths.append(files[kind % 2][0] if kind % 4 < 2 else
                         (scratch("missing.rumi") + ".x" if kind % 4 == 2 else ""))
        blobs.append(r.chunk())
        specs.append([None, "0.1", "0.2"][r.u8() % 3])
    cols = {"path": pa.array(paths, pa.string()), "blob": pa.array(blobs, pa.binary())}
    if flags & 1:
        cols["spec"] = pa.array(specs, pa.string())
    table = pa.table(cols)
    got_paths, got_blobs, fields = check_rows(table)
    assert got_paths == paths and got_blobs == blobs
    assert all(len(v) == n for v in fields.values())
    for path, blob in zip(paths, blobs, strict=True):
        truth = next((t for p, _, t in files if p == path), None)
        img = Image(path, blob, cache_bytes=0)
        try:
            got = img[...]
        finally:
            img.close()
        if truth is not None:
            assert _same_pixels(got, truth), "a catalog row's blob opened its file with other pixels"


# -- the PAM sidecar ----------------------------------------------------------------------

@target("pam", modules=("rumimm.format.pam",), max_len=1 << 13)
def pam(data: bytes) -> None:
    """A .aux.xml sidecar's bytes for a file of 1-8 bands: parse_pam refuses it or its metadata survive
    build_pam and parse_pam again unchanged."""
    from rumimm.format.pam import build_pam, parse_pam

    r = Reader(data)
    count = r.u8() % 8 + 1
    xml = r.rest()
    meta = parse_pam(xml, count, "fuzz.rumi.aux.xml")
    assert len(meta.bands) == count
    for dt in ("uint8", "int16", "int64", "uint64", "float16", "float32"):
        dtype = np.dtype(dt)
        try:
            meta.check_dtype(dtype)
        except (ValueError, TypeError):  # a nodata the dtype cannot hold: the documented refusal
            pass
        kept, _ = meta.without_bad_nodata(dtype)  # what open applies: every nodata left is a value of dtype
        kept.check_dtype(dtype)
        for b in kept.bands:
            if b.nodata is not None and dtype.kind in "iu":
                assert np.asarray(b.nodata).astype(dtype) == b.nodata, "a kept nodata is not a value of the dtype"
    for el in _band_elements(xml):  # band numbers as GDAL's atoi reads them: ASCII digits only
        text = el.get("band", "")
        n = _c_atoi_reference(text)
        descs = el.findall("Description")  # the last one is what GDAL and parse_pam keep
        if 1 <= n <= count and descs and descs[-1].text:
            assert meta.bands[n - 1].description is not None, f"band={text!r} read as another band than {n}"
    again = parse_pam(build_pam(meta), count, "again.aux.xml")
    assert _pam_key(again) == _pam_key(meta), "the sidecar's metadata changed on a rewrite"


def _band_elements(xml: bytes) -> list:
    """The <PAMRasterBand> elements of a sidecar parse_pam accepted (the last of each number wins there too)."""
    from xml.etree import ElementTree as ET

    seen = {}
    for el in ET.fromstring(xml).findall("PAMRasterBand"):
        seen[_c_atoi_reference(el.get("band", ""))] = el
    return list(seen.values())


def _c_atoi_reference(text: str) -> int:
    """C's atoi, written out character by character (the reference for rumimm.format.pam.c_atoi)."""
    i = 0
    while i < len(text) and text[i] in " \t\n\v\f\r":
        i += 1
    sign = 1
    if i < len(text) and text[i] in "+-":
        sign = -1 if text[i] == "-" else 1
        i += 1
    n = 0
    while i < len(text) and text[i] in "0123456789":
        n = n * 10 + "0123456789".index(text[i])
        i += 1
    return sign * n


# -- CRS text -----------------------------------------------------------------------------

@target("crs", modules=("rumimm.format.crs_identify",), max_len=1 << 12)
def crs(data: bytes) -> None:
    """CRS text (EPSG, WKT, PROJJSON, PROJ strings, mutated): parse_crs refuses it with a CRSError or gives a
    CRS, never reading a file (init=, grids) nor taking a pipeline; identify refuses or gives an EPSG code."""
    from rumimm.errors import CRSError
    from rumimm.format.crs_identify import identify, parse_crs

    r = Reader(data)
    mode = r.u8()
    text = r.rest().decode("utf-8", "replace")
    lowered = text.lower().replace(" ", "")
    try:
        got = parse_crs(text)
    except CRSError:
        return
    assert "init=" not in lowered and "proj=pipeline" not in lowered, f"{text[:80]!r} was parsed"
    assert got.is_geographic or got.is_projected or got.type_name, "not a CRS"
    if mode & 1:
        try:
            found = identify(got)
        except CRSError:
            return
        assert 1024 <= found.epsg <= 32767 or found.epsg > 0


@target("stac", modules=("rumimm.integrations.stac",), max_len=1 << 14)
def stac(data: bytes) -> None:
    """STAC Item JSON (valid Items of rumi files, mutated): from_items refuses it with a RumiError or gives one
    catalog row per Item whose blob parses; no message shows an href's query string; no file is read."""
    import json

    from rumimm.errors import RumiError
    from rumimm.format.v2 import parse_header
    from rumimm.stac import from_items

    try:
        obj = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):  # not JSON (json's own limits): nothing reaches rumimm
        return
    items = obj if isinstance(obj, list) else [obj]
    try:
        table = from_items(items)
    except RumiError as exc:
        for query in _href_queries(obj):
            assert f"?{query}" not in str(exc), f"a query string in a message: {str(exc)[:200]!r}"
        return
    assert table.num_rows == len(items)
    for blob, spec in zip(table.column("blob").to_pylist(), table.column("spec").to_pylist(), strict=True):
        parse_header(blob, spec=spec)


def _href_queries(obj) -> list[str]:
    """The query strings (after ``?``, 6 characters or more) of every ``href`` in a JSON value."""
    found, stack = [], [obj]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            href = v.get("href")
            if isinstance(href, str) and "?" in href and len(href.split("?", 1)[1]) >= 6:
                found.append(href.split("?", 1)[1])
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return found


def _pam_key(meta):
    """What a sidecar says, compared by value: -9999.0 written as GDAL writes it, "-9999", reads back as an int."""
    from rumimm.format.pam import DOMAIN

    def norm(v):
        if isinstance(v, float) and v != v:
            return "nan"
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, (tuple, list)):
            return tuple(norm(x) for x in v)
        return v

    bands = tuple(norm(dict(vars(b))) for b in meta.bands)
    # an empty <Metadata domain=...> is not written again: the same metadata
    return bands, meta.tags, {k: v for k, v in meta.domains.items() if k != DOMAIN and v}


# -- answers of a remote server -----------------------------------------------------------

REMOTE_OBJECT = bytes((i * 131 + (i >> 8) * 7) & 0xFF for i in range(4096))
REMOTE_OBJECT_V2 = bytes(v ^ 0xFF for v in REMOTE_OBJECT)  # what answers with ETag "v2" serve: the object changed
_STATUS = [206, 206, 206, 206, 200, 404, 412, 416, 500, 503, 304, 302, 403]


@dataclass
class _Answers:
    """The scripted answers of the next requests (one fuzz input's), and what was served."""

    script: list = field(default_factory=list)
    key: str = "obj-0"  # this input's object name: a late request of an earlier input gets an honest answer
    obj: bytes = REMOTE_OBJECT  # what the object holds
    obj2: bytes = REMOTE_OBJECT_V2  # what answers with ETag "v2" serve: the object changed
    lies: int = 0  # answers whose bytes were wrong under right framing (no client can tell)
    etags: set = field(default_factory=set)  # of the 200/206 answers sent (None: no ETag header)
    lock: threading.Lock = field(default_factory=threading.Lock)


class AnswerServer:
    """A one-answer-per-connection HTTP server on 127.0.0.1 whose answers come from a fuzz input."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.answers = _Answers()
        self.requests = 0
        self.inputs = 0
        self.thread = threading.Thread(target=self._loop, daemon=True, name="fuzz-answers")
        self.thread.start()

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{self.answers.key}.rumi"

    def _loop(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn):
        try:
            conn.settimeout(2.0)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 1 << 14:
                got = conn.recv(4096)
                if not got:
                    return
                head += got
            lines = head.split(b"\r\n")
            method, target = ([*lines[0].split(b" "), b"", b""])[:2]
            method = method.decode("latin-1")
            rng = next((ln.split(b":", 1)[1].strip().decode("latin-1") for ln in lines[1:]
                        if ln.lower().startswith(b"range:")), None)
            with self.answers.lock:
                self.requests += 1
                script = self.answers.script
                current = target.decode("latin-1") == f"/{self.answers.key}.rumi"
                # the answer is a function of the request, not of the order concurrent requests arrive in
                at = int(rng[6:].partition("-")[0]) if rng and rng[6:].partition("-")[0].isdigit() else 0
                spec = script[(at * 31 + (method == "HEAD")) % len(script)] if script and current else None
            conn.sendall(self._answer(method, rng, spec, current))
        except OSError:
            pass
        finally:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def _answer(self, method: str, rng: str | None, spec, current: bool = True) -> bytes:
        obj = self.answers.obj
        size = len(obj)
        r = Reader(spec or b"")
        status_i, cr_mode, len_mode, body_mode, etag_mode, delta = (r.u8() for _ in range(6))
        if spec is not None and status_i % 16 == 15:
            return b""  # the connection closes without an answer
        a, b = 0, size - 1
        if rng and rng.startswith("bytes="):
            lo, _, hi = rng[6:].partition("-")
            a = int(lo) if lo.isdigit() else 0
            b = min(int(hi), size - 1) if hi.isdigit() else size - 1
        status = _STATUS[status_i % len(_STATUS)] if rng else 200
        etag = ['"v1"', '"v1"', '"v2"', None][etag_mode % 4]
        if spec is None:
            status, cr_mode, len_mode, body_mode, etag = (206 if rng else 200), 0, 0, 0, '"v1"'
        # what the answer claims: the range asked for, or a shifted / shortened / lengthened one
        ca, cb, total = a, b, size
        mode = cr_mode % 8
        if mode == 1:
            ca = max(0, a + (delta % 9) - 4)
        elif mode == 2:
            cb = max(ca, b - (delta % 5))
        elif mode == 3:
            total = size + (delta % 5) - 2
        if etag == '"v2"':
            obj = self.answers.obj2
        body = obj[ca:cb + 1] if status in (200, 206) else b""
        if status == 200:
            body = obj
        bm = body_mode % 6
        lie = False
        if bm == 1 and body:
            body = body[: max(0, len(body) - 1 - delta % 4)]
        elif bm == 2:
            body = body + bytes([delta]) * (1 + delta % 3)
        elif bm == 3 and body:
            i = delta % len(body)
            body = body[:i] + bytes([body[i] ^ 0x5A]) + body[i + 1:]
            lie = True
        headers = [f"HTTP/1.1 {status} X"]
        if status == 206 or status == 416:
            if mode == 4:
                pass  # no Content-Range
            elif mode == 5 or status == 416:
                headers.append(f"Content-Range: bytes */{total}")
            elif mode == 6:
                headers.append("Content-Range: bytes x-y/z")
            else:
                headers.append(f"Content-Range: bytes {ca}-{cb}/{total}")
        if etag is not None:
            headers.append(f"ETag: {etag}")
        lm = len_mode % 4
        if lm == 0:
            headers.append(f"Content-Length: {len(body)}")
        elif lm == 1:
            headers.append(f"Content-Length: {len(body) + 1 + delta % 7}")  # then the connection ends early
        elif lm == 2:
            headers.append(f"Content-Length: {max(0, len(body) - 1 - delta % 3)}")
        headers.append("Accept-Ranges: bytes")
        headers.append("Connection: close")
        with self.answers.lock:
            if status in (200, 206) and current:
                self.answers.lies += lie
                self.answers.etags.add(etag)
        out = ("\r\n".join(headers) + "\r\n\r\n").encode("latin-1")
        return out if method == "HEAD" else out + body

    def close(self):
        self.sock.close()


_server: AnswerServer | None = None


def remote_server() -> AnswerServer:
    global _server
    if _server is None:
        _server = AnswerServer()
    return _server


def _script(srv: AnswerServer, r: Reader, obj: bytes) -> None:
    """The rest of the input as the answers (6 bytes each) to this input's requests for ``obj``."""
    script = []
    while r.at < len(r.data) and len(script) < 16:
        script.append(r.take(6))
    with srv.answers.lock:
        srv.inputs += 1
        srv.answers.key = f"obj-{srv.inputs}"
        srv.answers.script = script
        srv.answers.lies = 0
        srv.answers.etags = set()
        srv.answers.obj = obj
        srv.answers.obj2 = bytes(v ^ 0xFF for v in obj)


@target("remote", modules=("rumimm.store.remote", "rumimm.store.coalesce", "rumimm.store.failures"))
def remote(data: bytes) -> None:
    """Answers of an HTTP server to ranged reads (status, Content-Range, Content-Length, ETag, body):
    each read gives exactly the bytes asked for, the object's own bytes unless the server lied under
    right framing, and never bytes of two versions."""
    from rumimm.store import RemoteStore

    srv = remote_server()
    r = Reader(data)
    flags = r.u8()
    n_ops = r.u8() % 3 + 1
    ops = []
    for _ in range(n_ops):
        kind = r.u8() % 3
        ranges = [(r.u16() % (len(REMOTE_OBJECT) + 16), r.u16() % 2048) for _ in range(r.u8() % 3 + 1)]
        ops.append((kind, ranges))
    _script(srv, r, REMOTE_OBJECT)
    opts = {"max_retries": 0, "timeout": 2, "connect_timeout": 1, "coalesce": [0, 64, 1 << 20, "auto"][flags % 4]}
    store = RemoteStore(srv.url(), opts, size=len(REMOTE_OBJECT) if flags & 4 else None,
                        version='"v1"' if flags & 8 else None)
    try:
        for kind, ranges in ops:
            if kind == 0:
                assert store.size >= 0  # what the server says (a HEAD answer's length cannot be checked)
                continue
            if kind == 1:
                got = [bytes(b) for b in store.get_ranges(ranges)]
                assert len(got) == len(ranges)
            else:
                got = [store.read(*ranges[0])]
                # fewer bytes at the end of the object, as long as the server says it is (its size may be a lie)
                ranges = [(ranges[0][0], max(0, min(ranges[0][1], store.size - ranges[0][0])))]
            served = srv.answers.etags
            # no client can tell: bytes changed under right framing, or an answer without an ETag
            # mixed with answers of a new version
            blind = srv.answers.lies or (None in served and '"v2"' in served)
            obj = REMOTE_OBJECT_V2 if store.version == '"v2"' else REMOTE_OBJECT
            for (o, n), buf in zip(ranges, got, strict=True):
                assert len(buf) == n, ("wrong length", o, n, len(buf))
                assert blind or buf == obj[o:o + n], ("wrong bytes", o, n, store.version, served)
    finally:
        store.close()


_REMOTE_FILES: list = []


def _remote_files():
    """(file bytes, blob, pixels) of small files of both specs that the remote_read server serves."""
    if not _REMOTE_FILES:
        import rumimm

        a = (np.arange(3 * 11 * 13, dtype=np.int16) * 97 - 900).reshape(3, 11, 13)
        for i, kw in enumerate([{}, {"unit": "cell"}, {"spec": "0.2", "time": ["2024-05-01"],
                                                        "descriptions": ["a", "b", "c"]}]):
            path = scratch(f"remote{i}.rumi")
            blob = rumimm.write(path, a, tile=8, threads=1, **kw)
            with open(path, "rb") as f:
                _REMOTE_FILES.append((f.read(), bytes(blob), a))
    return _REMOTE_FILES


@target("remote_read", modules=("rumimm.store.remote", "rumimm.reader.image", "rumimm.reader.planner",
                                "rumimm.reader.source", "rumimm.reader.validate", "rumimm.format.profile_checks"))
def remote_read(data: bytes) -> None:
    """A small rumi file of either spec served over HTTP with scripted answers: open (with or without its
    blob) and read; the pixels are the file's unless the server altered bytes under right framing."""
    import rumimm

    srv = remote_server()
    files = _remote_files()
    r = Reader(data)
    flags = r.u8()
    content, blob, truth = files[r.u8() % len(files)]
    _script(srv, r, content)
    opts = {"max_retries": 0, "timeout": 2, "connect_timeout": 1,
            "coalesce": [0, 64, 1 << 20, "auto"][(flags >> 2) % 4]}
    with rumimm.open(srv.url(), blob if flags & 16 else None, storage_options=opts, cache_bytes=0) as img:
        got = img[...] if flags & 32 else img[:, 2:9, 3:12]
        if flags & 64:
            _ = img.descriptions  # the sidecar next to it: one more request (the server's answer, scripted)
    served = srv.answers.etags
    blind = srv.answers.lies or (None in served and '"v2"' in served) or '"v2"' in served
    want = truth if flags & 32 else truth[:, 2:9, 3:12]
    assert blind or _same_pixels(got, want), "a remote read gave other pixels than the file's"
