"""Band metadata in a GDAL PAM sidecar: ``NAME.rumi.aux.xml``.

rumi 0.1.0 has one fixed IFD, so what a GeoTIFF keeps in GDAL_NODATA, GDAL_METADATA and
the photometric tags (nodata, band descriptions, colour interpretation, scale and
offset, units, colour tables and tags) goes where GDAL itself puts what a format
cannot hold: a Persistent Auxiliary Metadata file next to it, ``<file>.aux.xml``.
GDAL opens a rumi file as a GeoTIFF and reads this sidecar, so ``gdalinfo`` and
rasterio see the same nodata and descriptions rumimm does.

The XML is GDAL's ``PAMDataset`` element: dataset ``<Metadata>`` (one per domain, of
``<MDI key="...">`` items) and one ``<PAMRasterBand band="n">`` per band with
``Description``, ``UnitType``, ``Offset``, ``Scale``, ``NoDataValue``, ``ColorInterp``,
``ColorTable`` and its own ``<Metadata>``.  Elements GDAL writes that rumimm has no use
for (statistics, histograms, SRS, GeoTransform) are ignored when read.

A sidecar written by rumimm also records, in the ``RUMIMM`` metadata domain, the SHA-256
of the file's header blob: a sidecar left from an older version of the file (a write
interrupted between the two renames, a file copied without it) is then recognised and
not applied.  Parsing is bounded: at most ``MAX_BYTES``, no DTD or entity declarations,
band numbers checked against the band count, every number checked.  Pure Python
(xml.etree), no I/O besides reading and building bytes.
"""

from __future__ import annotations

import hashlib
import math
import re
import struct
from dataclasses import dataclass, field, replace
from xml.etree import ElementTree as ET

from rumimm.errors import FormatError, where

__all__ = [
    "COLORINTERP",
    "MAX_BYTES",
    "SUFFIX",
    "BandMetadata",
    "Metadata",
    "blob_digest",
    "build_pam",
    "parse_pam",
    "sidecar_path",
]

#: A sidecar's name: the rumi file's name plus this (GDAL's PAM convention).
SUFFIX = ".aux.xml"
#: Largest sidecar read (GDAL's own PAM files are a few kB; statistics and histograms add a few more).
MAX_BYTES = 16 << 20
#: Metadata domain holding rumimm's own keys (the header blob digest).
DOMAIN = "RUMIMM"
DIGEST_KEY = "HEADER_BLOB_SHA256"
#: SHA-256 of every byte of the rumi file the sidecar was written with: what binds it to that content.
FILE_DIGEST_KEY = "FILE_SHA256"
#: ``"<size> <mtime_ns> <inode>"`` of that file as written: a match skips hashing the file on read.
FILE_STAT_KEY = "FILE_STAT"

#: GDAL colour interpretation names (GDALGetColorInterpretationName) -> rasterio ``ColorInterp`` names.
COLORINTERP = {
    "Undefined": "undefined", "Gray": "gray", "Palette": "palette", "Red": "red", "Green": "green",
    "Blue": "blue", "Alpha": "alpha", "Hue": "hue", "Saturation": "saturation", "Lightness": "lightness",
    "Cyan": "cyan", "Magenta": "magenta", "Yellow": "yellow", "Black": "black", "YCbCr_Y": "Y",
    "YCbCr_Cb": "Cb", "YCbCr_Cr": "Cr",
}
_GDAL_NAME = {v.lower(): k for k, v in COLORINTERP.items()} | {"grey": "Gray"}
_MAX_BANDS = 65535  # a TIFF's SamplesPerPixel


def sidecar_path(path: str) -> str:
    """Where the sidecar of ``path`` lives: ``path + ".aux.xml"``."""
    return path + SUFFIX


def blob_digest(blob: bytes) -> str:
    """Hex SHA-256 of a header blob, the key pairing a sidecar with one version of its file."""
    return hashlib.sha256(bytes(blob)).hexdigest()


@dataclass(frozen=True)
class BandMetadata:
    """What GDAL keeps about one band.  Every field None (or empty) when absent."""

    description: str | None = None
    nodata: int | float | None = None
    colorinterp: str | None = None  # a rasterio ColorInterp name: "gray", "red", "alpha", ...
    scale: float | None = None
    offset: float | None = None
    unit: str | None = None
    colormap: dict[int, tuple[int, int, int, int]] | None = None
    tags: dict[str, str] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return self == BandMetadata()


@dataclass(frozen=True)
class Metadata:
    """A sidecar's content: dataset tags by domain ("" is the default domain) and per-band metadata.

    ``bands`` has one entry per band of the file (``BandMetadata()`` where the sidecar says
    nothing about a band).
    """

    bands: tuple[BandMetadata, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    domains: dict[str, dict[str, str]] = field(default_factory=dict)
    digest: str | None = None

    def is_empty(self) -> bool:
        return not self.tags and not self.domains and all(b.is_empty() for b in self.bands)

    def check_dtype(self, dtype) -> None:
        """ValueError unless every band's nodata is a value of ``dtype`` (as GDAL and rasterio require).

        rumi keeps none for complex samples (GDAL does mask those equal to a nodata).
        """
        import numpy as np

        dtype = np.dtype(dtype)
        for i, b in enumerate(self.bands, 1):
            v = b.nodata
            if v is None:
                continue
            if dtype.kind in "iub":
                lo, hi = (0, 1) if dtype.kind == "b" else (int(np.iinfo(dtype).min), int(np.iinfo(dtype).max))
                if not (float(v).is_integer() if isinstance(v, float) else True) or not lo <= int(v) <= hi:
                    raise ValueError(f"nodata {v!r} of band {i} is not a {dtype} value ({lo} to {hi})")
            elif dtype.kind == "f":
                if (isinstance(v, int) and abs(v) > 2**1024) or (math.isfinite(v) and abs(float(v)) > float(
                        np.finfo(dtype).max)):
                    raise ValueError(f"nodata {v!r} of band {i} is beyond the range of {dtype}")
            else:
                raise ValueError(f"nodata {v!r} of band {i}: rumi keeps no nodata for {dtype} samples")

    def without_bad_nodata(self, dtype) -> tuple[Metadata, list[str]]:
        """This metadata less each band's nodata that is not a value of ``dtype``, and why each was dropped."""
        bands, why = list(self.bands), []
        for i, b in enumerate(self.bands):
            if b.nodata is None:
                continue
            try:
                Metadata(bands=(b,)).check_dtype(dtype)
            except ValueError as exc:
                bands[i] = replace(b, nodata=None)
                why.append(str(exc).replace("of band 1", f"of band {i + 1}"))
        return replace(self, bands=tuple(bands)), why

    @classmethod
    def empty(cls, count: int) -> Metadata:
        return cls(bands=(BandMetadata(),) * count)

    @classmethod
    def from_args(cls, count: int, *, nodata=None, descriptions=None, colorinterp=None, scales=None, offsets=None,
                  units=None, colormaps=None, tags=None, band_tags=None) -> Metadata:
        """Metadata from ``rumimm.write``'s keyword arguments, each checked (ValueError/TypeError).

        ``nodata`` is one value for every band (or a sequence, one per band); the other
        per-band arguments are sequences of ``count`` values (None for "not set");
        ``colormaps`` and ``band_tags`` map 1-based band numbers to a colour map / tags.
        """
        def per_band(name, value, check):
            if value is None:
                return [None] * count
            if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
                if name != "nodata":
                    raise TypeError(f"{name} must be a sequence of one value per band ({count}), "
                                    f"got {type(value).__name__}")
                value = [value] * count
            values = list(value)
            if len(values) != count:
                raise ValueError(f"{name} must have one entry per band ({count}), got {len(values)}")
            return [None if v is None else check(name, v) for v in values]

        nod = per_band("nodata", nodata, _check_number)
        desc = per_band("descriptions", descriptions, _check_text)
        interp = per_band("colorinterp", colorinterp, _check_interp)
        scl = per_band("scales", scales, _check_float)
        off = per_band("offsets", offsets, _check_float)
        unit = per_band("units", units, _check_text)
        maps = _band_map("colormaps", colormaps, count, _check_colormap)
        btags = _band_map("band_tags", band_tags, count, lambda n, v: _check_tags(n, v))
        bands = tuple(BandMetadata(description=desc[i] or None, nodata=nod[i], colorinterp=interp[i],
                                   scale=scl[i], offset=off[i], unit=unit[i] or None, colormap=maps.get(i + 1),
                                   tags=btags.get(i + 1, {})) for i in range(count))
        return cls(bands=bands, tags=_check_tags("tags", tags or {}))


# -- checks of arguments -----------------------------------------------------------------
def _check_number(name, v):
    if isinstance(v, bool):
        raise TypeError(f"{name} must be a number, got {v!r}")
    if hasattr(v, "item") and getattr(v, "ndim", 0) == 0:
        v = v.item()  # a numpy scalar
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return v
    raise TypeError(f"{name} must be a number, got {type(v).__name__}")


def _check_float(name, v):
    v = _check_number(name, v)
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def _check_text(name, v):
    if not isinstance(v, str):
        raise TypeError(f"{name} must be strings, got {type(v).__name__}")
    if _BAD_CHARS.search(v):
        raise ValueError(f"{name}: {v[:40]!r} has a control character XML cannot hold")
    return v


def _check_interp(name, v):
    key = getattr(v, "name", v)  # a rasterio ColorInterp member
    if not isinstance(key, str) or key.lower() not in _GDAL_NAME:
        raise ValueError(f"{name}: {v!r} is not a colour interpretation; expected one of "
                         f"{', '.join(sorted(set(COLORINTERP.values())))}")
    return COLORINTERP[_GDAL_NAME[key.lower()]]


def _check_colormap(name, v):
    if not isinstance(v, dict):
        raise TypeError(f"{name} must map a value to (r, g, b[, a]), got {type(v).__name__}")
    out = {}
    for k, rgba in v.items():
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < 65536:
            raise ValueError(f"{name}: entry {k!r} must be an int in [0, 65535]")
        rgba = tuple(rgba)
        if len(rgba) == 3:
            rgba = (*rgba, 255)
        if len(rgba) != 4 or not all(isinstance(c, int) and 0 <= c <= 255 for c in rgba):
            raise ValueError(f"{name}: entry {k} must be (r, g, b[, a]) of ints 0..255, got {rgba!r}")
        out[k] = rgba
    return out


def _check_tags(name, v):
    if not isinstance(v, dict):
        raise TypeError(f"{name} must be a dict of str to str, got {type(v).__name__}")
    out = {}
    for k, val in v.items():
        if not isinstance(k, str) or not _KEY.fullmatch(k):
            raise ValueError(f"{name}: key {k!r} must be a non-empty string without '=' or control characters")
        out[k] = _check_text(f"{name}[{k!r}]", val if isinstance(val, str) else str(val))
    return out


def _band_map(name, value, count, check) -> dict[int, object]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{name} must map 1-based band numbers to values, got {type(value).__name__}")
    out = {}
    for b, v in value.items():
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= count:
            raise ValueError(f"{name}: band {b!r} is not a band number 1..{count}")
        out[b] = check(f"{name}[{b}]", v)
    return out


# XML 1.0 cannot hold C0 controls other than tab, newline and carriage return
_BAD_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_KEY = re.compile(r"[^=\x00-\x1f]+")


# -- building ----------------------------------------------------------------------------
def _number_text(v) -> str:
    """A number as GDAL's CPLAtof reads it back exactly: integers as such, floats by repr."""
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v.is_integer() and abs(v) < 2**53:
        return str(int(v))
    return repr(v)


def _metadata_element(parent, items: dict[str, str], domain: str | None = None):
    if not items:
        return
    md = ET.SubElement(parent, "Metadata", {"domain": domain} if domain else {})
    for k, v in items.items():
        ET.SubElement(md, "MDI", {"key": k}).text = v


def build_pam(meta: Metadata, blob: bytes | None = None, binding: dict[str, str] | None = None) -> bytes:
    """The sidecar's bytes for ``meta`` (UTF-8 XML, GDAL's element names and order).

    With ``blob``, its SHA-256 is recorded; ``binding`` adds the file's digest and stat
    (``FILE_DIGEST_KEY``, ``FILE_STAT_KEY``) so a reader can tell the sidecar belongs to
    this content of the file (see ``rumimm.reader.sidecar``).
    """
    root = ET.Element("PAMDataset")
    _metadata_element(root, meta.tags)
    for domain, items in meta.domains.items():
        if domain != DOMAIN:
            _metadata_element(root, items, domain)
    own = {} if blob is None else {DIGEST_KEY: blob_digest(blob)}
    own.update(binding or {})
    _metadata_element(root, own, DOMAIN)
    for i, b in enumerate(meta.bands, 1):
        if b.is_empty():
            continue
        el = ET.SubElement(root, "PAMRasterBand", {"band": str(i)})
        if b.description:
            ET.SubElement(el, "Description").text = b.description
        if b.unit:
            ET.SubElement(el, "UnitType").text = b.unit
        if b.offset is not None:
            ET.SubElement(el, "Offset").text = _number_text(b.offset)
        if b.scale is not None:
            ET.SubElement(el, "Scale").text = _number_text(b.scale)
        if b.nodata is not None:
            attrs = {}
            if isinstance(b.nodata, float) and math.isnan(b.nodata):
                # GDAL records a NaN's exact bits (little-endian double, in hex)
                attrs["le_hex_equiv"] = struct.pack("<d", b.nodata).hex().upper()
            ET.SubElement(el, "NoDataValue", attrs).text = _number_text(b.nodata)
        if b.colorinterp is not None:
            ET.SubElement(el, "ColorInterp").text = _GDAL_NAME[b.colorinterp.lower()]
        if b.colormap:
            table = ET.SubElement(el, "ColorTable")
            for k in range(max(b.colormap) + 1):
                r, g, bl, a = b.colormap.get(k, (0, 0, 0, 0))
                ET.SubElement(table, "Entry", {"c1": str(r), "c2": str(g), "c3": str(bl), "c4": str(a)})
        _metadata_element(el, b.tags)
    ET.indent(root, "  ")
    # a raw CR in text reads back as LF (XML's line-end rule): written as a reference, as GDAL reads it
    return ET.tostring(root, encoding="unicode").replace("\r", "&#13;").encode("utf-8") + b"\n"


# -- parsing -----------------------------------------------------------------------------
def parse_pam(data: bytes, count: int, path: str | None = None) -> Metadata:
    """Read a sidecar's bytes for a file of ``count`` bands.

    Raises
    ------
    FormatError
        The sidecar is too large, is not XML, declares a DTD or entities, is not a
        ``PAMDataset``, or has a band number, number or colour table entry that is
        out of range (the message names the sidecar and the element).
    """
    name = where(path)
    if len(data) > MAX_BYTES:
        raise FormatError(f"{name}sidecar has {len(data)} bytes, more than the {MAX_BYTES} read")
    _refuse_dtd(data, name)
    try:
        root = ET.fromstring(data)
    except (LookupError, ValueError) as exc:
        raise FormatError(f"{name}sidecar's XML declaration names an encoding that cannot be read ({exc}); "
                          "GDAL writes UTF-8") from None
    except ET.ParseError as exc:
        raise FormatError(f"{name}sidecar is not well-formed XML ({exc})") from None
    if root.tag != "PAMDataset":
        raise FormatError(f"{name}sidecar's root element is <{root.tag[:40]}>, expected <PAMDataset>")
    tags: dict[str, str] = {}
    domains: dict[str, dict[str, str]] = {}
    for md in root.findall("Metadata"):
        domain = md.get("domain", "")
        items = _mdi(md, name)
        if domain == "":
            tags.update(items)
        else:
            domains.setdefault(domain, {}).update(items)
    digest = domains.get(DOMAIN, {}).get(DIGEST_KEY)
    bands = [BandMetadata()] * count
    for el in root.findall("PAMRasterBand"):
        text = el.get("band", "")
        b = c_atoi(text)  # GDAL: atoi(), leading ASCII digits only
        if not 1 <= b <= _MAX_BANDS:
            raise FormatError(f"{name}sidecar: PAMRasterBand band={text[:20]!r} is not a band number")
        if b > count:
            raise FormatError(f"{name}sidecar describes band {b}, but the file has {count} bands; "
                              "it belongs to another file")
        bands[b - 1] = _band(el, b, name)
    return Metadata(bands=tuple(bands), tags=tags, domains=domains, digest=digest)


def _refuse_dtd(data: bytes, name: str) -> None:
    """FormatError for a document type or entity declaration, in whatever encoding the XML declares.

    A pass of expat that stops at the first declaration, before ElementTree builds
    anything: entity expansion (billion laughs) never starts.
    """
    import xml.parsers.expat as expat

    class _Declared(Exception):
        pass

    def refuse(*_):
        raise _Declared

    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.UnparsedEntityDeclHandler = refuse
    try:
        parser.Parse(data, True)
    except _Declared:
        raise FormatError(f"{name}sidecar declares a DTD or entities; a PAM sidecar has none") from None
    except expat.ExpatError as exc:
        raise FormatError(f"{name}sidecar is not well-formed XML ({expat.ErrorString(exc.code)})") from None
    except (LookupError, ValueError) as exc:  # an encoding Python has no codec for, or a multi-byte one expat refuses
        raise FormatError(f"{name}sidecar's XML declaration names an encoding that cannot be read ({exc}); "
                          "GDAL writes UTF-8") from None


def _mdi(md, name) -> dict[str, str]:
    out = {}
    for item in md.findall("MDI"):
        key = item.get("key")
        if key is None:
            raise FormatError(f"{name}sidecar: an <MDI> element has no key")
        out[key] = _gdal_text(item.text)
    return out


def _gdal_text(text: str | None) -> str:
    """An element's text as GDAL reads it: whitespace before it dropped (a CR written as ``&#13;`` kept)."""
    return (text or "").lstrip(" \t\n")


# C's isspace, then what strtod reads in the C locale: ASCII digits only, no "_" separators
_SPACE = "\t\n\v\f\r "
_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
                    r"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan)", re.ASCII | re.IGNORECASE)


def c_atoi(text: str) -> int:
    """``text`` as C's ``atoi`` reads it (GDAL's band numbers): the leading ASCII digits, 0 when none.

    "1_000" is 1 and "\\u00b2" or "\\u0661" are 0: Python's ``int`` would read other scripts' digits.
    """
    m = _INT.match(text.lstrip(_SPACE))
    return int(m.group()) if m else 0


def c_strtod(text: str) -> int | float | None:
    """The number at the start of ``text`` as GDAL's ``CPLAtof`` reads it (C locale ``strtod``); None if none.

    An integer prefix not followed by a fraction or exponent is returned as an int,
    so int64 and uint64 nodata stay exact (GDAL reads those with ``strtoll``).
    Trailing characters are ignored, as C does ("1_000" is 1).
    """
    m = _FLOAT.match(text.lstrip(_SPACE))
    if m is None:
        return None
    word = m.group()
    if _INT.fullmatch(word):
        return int(word)
    body = word.lstrip("+-")
    if body[:2].lower() == "0x":
        try:
            value = float.fromhex(body)
        except OverflowError:  # strtod gives HUGE_VAL (and ERANGE) for a value past the double range
            value = math.inf
        return -value if word.startswith("-") else value
    return float(word)


def _float(el, what, name, b) -> float:
    text = el.text or ""
    value = c_strtod(text)
    if value is None:
        raise FormatError(f"{name}sidecar: band {b} {what} {text.strip()[:40]!r} is not a number")
    return float(value)


def _band(el, b: int, name: str) -> BandMetadata:
    values: dict = {}
    for child in el:
        tag = child.tag
        if tag == "Description":
            values["description"] = _gdal_text(child.text) or None
        elif tag == "UnitType":
            values["unit"] = _gdal_text(child.text) or None
        elif tag == "Offset":
            values["offset"] = _float(child, "Offset", name, b)
        elif tag == "Scale":
            values["scale"] = _float(child, "Scale", name, b)
        elif tag == "NoDataValue":
            values["nodata"] = _nodata(child, name, b)
        elif tag == "ColorInterp":
            text = (child.text or "").strip()
            key = text.lower()
            gdal = {k.lower(): k for k in COLORINTERP}.get(key)
            # GDAL >= 3.10 names more (NIR, SWIR, ...); rasterio has no member for them
            values["colorinterp"] = COLORINTERP[gdal] if gdal else "undefined"
        elif tag == "ColorTable":
            values["colormap"] = _colortable(child, name, b) or None  # no entries: no colour map (none is written)
        elif tag == "Metadata" and child.get("domain", "") == "":
            values["tags"] = _mdi(child, name)
    return BandMetadata(**values)


def _nodata(el, name, b):
    hexa = el.get("le_hex_equiv")
    if hexa is not None:
        try:
            raw = bytes.fromhex(hexa)
        except ValueError:
            raw = b""
        if len(raw) != 8:
            raise FormatError(f"{name}sidecar: band {b} NoDataValue le_hex_equiv {hexa[:40]!r} is not 8 bytes of hex")
        return struct.unpack("<d", raw)[0]
    text = el.text or ""
    value = c_strtod(text)  # an int for an integer: int64 / uint64 nodata exactly (GDAL >= 3.5 writes them so)
    if value is None:
        raise FormatError(f"{name}sidecar: band {b} NoDataValue {text.strip()[:40]!r} is not a number")
    return value


def _colortable(el, name, b) -> dict[int, tuple[int, int, int, int]]:
    out = {}
    for i, entry in enumerate(el.findall("Entry")):
        if i >= 65536:
            raise FormatError(f"{name}sidecar: band {b} ColorTable has more than 65536 entries")
        rgba = []
        for c, default in (("c1", None), ("c2", None), ("c3", None), ("c4", "255")):
            text = entry.get(c, default)
            if text is None or not (0 < len(text.strip()) <= 3 and text.strip().isdigit()) or int(text) > 255:
                raise FormatError(f"{name}sidecar: band {b} ColorTable entry {i} {c}={text!r} is not 0..255")
            rgba.append(int(text))
        out[i] = tuple(rgba)
    return out


def with_bands(meta: Metadata, count: int) -> Metadata:
    """``meta`` with exactly ``count`` band entries (missing ones empty)."""
    bands = tuple(meta.bands[:count]) + (BandMetadata(),) * max(0, count - len(meta.bands))
    return replace(meta, bands=bands)
