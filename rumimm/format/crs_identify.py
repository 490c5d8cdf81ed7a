"""Which EPSG code a CRS is: GDAL-style identification of CRSs that carry no code of their own.

rumi stores a CRS only as an EPSG code.  A GeoTIFF often carries a CRS that is an EPSG
CRS in all but name: ``+proj=utm +zone=18 +ellps=WGS84`` (a datum GDAL calls "Unknown
based on WGS 84 ellipsoid"), a LAEA on GRS80 with EPSG:3035's parameters, an ESRI WKT
of EPSG:5070.  :func:`identify` accepts such a CRS when exactly one EPSG code has the
same kind (projected or geographic), the same ellipsoid and prime meridian, the same
projection method with the same parameter values and the same linear unit, and, when
the CRS names a known datum, that datum.  The candidates are the codes PROJ's own
identification proposes plus the EPSG CRSs whose area of use holds the image's centre;
when several fit, those with the CRS's own axis order come first (an easting-northing
UTM on GRS80 is EPSG:25833, not its northing-easting twin EPSG:3045, as pyproj's
``to_epsg`` says), and of those the one with the widest area of use is taken (a UTM zone
on the WGS 84 ellipsoid is WGS 84's, not a national datum's on the same ellipsoid),
unless two are equally wide.  The note names the others that fit and how each differs
(datum, axis order).  Nothing fits: :class:`rumimm.CRSError` listing the nearest codes
and why each differs.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache

from rumimm.errors import CRSError

__all__ = ["Identified", "identify", "parse_crs", "short_name"]

_A_TOL = 1e-3          # metres on the semi-major axis
_RF_TOL = 1e-8         # inverse flattening (GRS80 and WGS84 differ by 1.5e-6)
_ANGLE_TOL = 1e-9      # radians (about 6 micrometres on the ground)
_LENGTH_TOL = 1e-3     # metres (1 mm) in false eastings/northings
_SCALE_TOL = 1e-10     # scale factors
_MAX_AREA_CANDIDATES = 4000
_AREA_MARGIN = 1.0    # degrees around an area of use still counted as in it


@dataclass(frozen=True)
class Identified:
    """The EPSG code a CRS was found to be, and whether that was exact."""

    epsg: int
    exact: bool
    name: str
    note: str  # why it is that code, for the warning


# What would make PROJ read a file or the network while parsing: an init file, a grid
# (other than the built-in @null), a pipeline (a transformation, not a CRS), a WKT/PROJJSON
# parameter file.  Matched anywhere in the text: WKT1 carries PROJ strings in EXTENSION["PROJ4", ...].
_REFUSED = re.compile(
    r"(?<![a-z_])(?P<what>init)\s*=|proj\s*=\s*(?P<pipeline>pipeline)\b"
    r"|(?P<grid>(?:nad|geoid|xy_|z_|)grids)\s*=\s*(?!@null\b)"
    r"|(?P<file>PARAMETERFILE|parameter_file)",
    re.IGNORECASE | re.ASCII,
)
_MAX_TEXT = 1 << 16  # characters: a WKT of a CRS is a few kB


def parse_crs(crs):
    """A pyproj CRS from what rumimm accepts, with no file or network access; else :class:`rumimm.CRSError`.

    Accepted: a ``pyproj.CRS``, a rasterio CRS (its WKT), an EPSG code (int or
    ``"EPSG:n"``), WKT, PROJJSON (text or dict) and PROJ strings.  Refused: ``init=``
    (PROJ reads a local file), grids other than ``@null`` (a file or a URL), pipelines
    (a transformation, not a CRS), WKT or PROJJSON parameter files, and anything that
    parses to something other than a CRS.
    """
    import pyproj

    if isinstance(crs, pyproj.CRS):
        return crs
    if isinstance(crs, bool):
        raise CRSError(f"crs must be an EPSG code, WKT, PROJJSON or a PROJ string, got {crs!r}")
    if isinstance(crs, int):
        text = f"EPSG:{crs}"
    elif hasattr(crs, "to_wkt"):  # a rasterio CRS: its WKT keeps the names GDAL read
        text = crs.to_wkt()
    elif isinstance(crs, dict):
        import json

        text = json.dumps(crs)
    elif isinstance(crs, str):
        text = crs
    else:
        raise CRSError(f"crs must be an EPSG code, WKT, PROJJSON or a PROJ string, got {type(crs).__name__}")
    if len(text) > _MAX_TEXT:
        raise CRSError(f"crs text has {len(text)} characters, more than the {_MAX_TEXT} a CRS needs")
    if "\x00" in text:
        raise CRSError("crs text holds a NUL character")
    m = _REFUSED.search(text)
    if m:
        why = ("init= makes PROJ read a file" if m.group("what") else
               "a pipeline is a transformation, not a CRS" if m.group("pipeline") else
               f"{m.group('grid')}= names a grid PROJ would read from a file or the network" if m.group("grid") else
               "a parameter file is read from disk")
        raise CRSError(f"crs {short_text(text)} is refused: {why}; give an EPSG code, WKT, PROJJSON or a PROJ "
                       "string without files")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = pyproj.CRS.from_user_input(text)
    except Exception as exc:  # pyproj's CRSError, and whatever PROJ raises on text it cannot take
        raise CRSError(f"crs {short_text(text)} is not a CRS PROJ can read ({short_text(str(exc))})") from None
    if out.type_name in ("Unknown", "") or "Transformation" in out.type_name or "Conversion" in out.type_name:
        raise CRSError(f"crs {short_text(text)} is a {out.type_name or 'object'}, not a CRS")
    return out


def short_text(text: str) -> str:
    """``text`` on one line, at most 80 characters, quoted."""
    text = " ".join(str(text).split())
    return repr(text if len(text) <= 80 else text[:77] + "...")


_pyproj_crs = parse_crs


def short_name(crs) -> str:
    """A one-line PROJ-string (or WKT) name of a CRS for messages, at most 100 characters."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyproj's "you will likely lose information": this is only a name
            text = crs.to_proj4() if hasattr(crs, "to_proj4") else crs.to_string()
    except Exception:
        text = str(crs)
    text = " ".join(str(text).replace("+type=crs", "").replace("=True", "").split())
    return text if len(text) <= 100 else text[:97] + "..."


def _param_kind(p) -> str:
    category = (p.unit_category or "").lower()
    return {"angular": "angle", "linear": "length"}.get(category, "scale")


def _params(conversion) -> dict[str, tuple[str, float]]:
    """{parameter key: (kind, value in SI units)} of a conversion."""
    out = {}
    for p in conversion.params:
        key = f"{p.auth_name}:{p.code}" if p.code else p.name.lower()
        out[key] = (_param_kind(p), float(p.value) * float(p.unit_conversion_factor or 1.0))
    return out


def _close(kind: str, a: float, b: float) -> bool:
    tol = {"angle": _ANGLE_TOL, "length": _LENGTH_TOL}.get(kind, _SCALE_TOL)
    return abs(a - b) <= tol


def _method(conversion) -> str:
    m = conversion.method_code
    return f"{conversion.method_auth_name}:{m}" if m else conversion.method_name.lower()


def _linear_unit(crs) -> float | None:
    axes = crs.axis_info
    return float(axes[0].unit_conversion_factor) if axes else None


def _datum_code(crs) -> str | None:
    """The source datum's EPSG code, or None for an unknown datum ("Unknown based on ... ellipsoid")."""
    try:
        datum = crs.datum
    except Exception:
        return None
    if datum is None:
        return None
    name = (datum.name or "").lower()
    if not name or name.startswith(("unknown", "unnamed", "not specified", "not_specified")) or name == "unknown":
        return None
    try:
        code = datum.to_epsg(min_confidence=90)
    except Exception:
        code = None
    return None if code is None else str(code)


def _contains(cand, lonlat) -> bool:
    aou = cand.area_of_use
    if lonlat is None or aou is None:
        return True
    lon, lat = lonlat
    w, s, e, n = aou.bounds
    m = _AREA_MARGIN
    inside_lon = (w - m <= lon <= e + m) if w <= e else (lon >= w - m or lon <= e + m)
    return inside_lon and s - m <= lat <= n + m


def _difference(src, cand, want_datum: str | None) -> str | None:
    """None when ``cand`` has ``src``'s kind, ellipsoid, meridian, projection, parameters and unit; else why not."""
    if src.is_projected != cand.is_projected or src.is_geographic != cand.is_geographic:
        return "another kind of CRS"
    e1, e2 = src.ellipsoid, cand.ellipsoid
    if e1 is None or e2 is None or abs(e1.semi_major_metre - e2.semi_major_metre) > _A_TOL or \
            abs(e1.inverse_flattening - e2.inverse_flattening) > _RF_TOL:
        return f"another ellipsoid ({e2.name if e2 is not None else 'none'})"
    p1, p2 = src.prime_meridian, cand.prime_meridian
    if p1 is not None and p2 is not None and abs(math.radians(p1.longitude) - math.radians(p2.longitude)) > _ANGLE_TOL:
        return "another prime meridian"
    if want_datum is not None and _datum_code(cand) != want_datum:
        return f"another datum ({cand.datum.name})"
    if src.is_projected:
        c1, c2 = src.coordinate_operation, cand.coordinate_operation
        if c1 is None or c2 is None:
            return "no projection to compare"
        if _method(c1) != _method(c2):
            return f"another projection ({c2.method_name})"
        a, b = _params(c1), _params(c2)
        if set(a) != set(b):
            return "other projection parameters"
        for k, (kind, v) in a.items():
            if not _close(kind, v, b[k][1]):
                name = next((p.name for p in c2.params if f"{p.auth_name}:{p.code}" == k or p.name.lower() == k), k)
                return f"another {name.lower()}"
        u1, u2 = _linear_unit(src), _linear_unit(cand)
        if u1 is not None and u2 is not None and abs(u1 - u2) > 1e-12 * max(u1, u2):
            return "another unit"
    elif src.is_geographic:
        u1, u2 = _linear_unit(src), _linear_unit(cand)
        if u1 is not None and u2 is not None and abs(u1 - u2) > 1e-15:
            return "another angular unit"
        if len(src.axis_info) != len(cand.axis_info):
            return "another number of axes"
    return None


def _area(crs) -> float:
    aou = crs.area_of_use
    if aou is None:
        return 0.0
    w, s, e, n = aou.bounds
    width = (e - w) if e >= w else (e + 360 - w)
    return width * (n - s)


def _area_codes(src, lonlat) -> list[str]:
    """EPSG codes of src's kind whose area of use holds the point ``lonlat``."""
    if lonlat is None:
        return []
    lon, lat = lonlat
    if not (math.isfinite(lon) and math.isfinite(lat) and -180 <= lon <= 180 and -90 <= lat <= 90):
        return []
    return list(_cell_codes(bool(src.is_projected), math.floor(lon), math.floor(lat)))


@lru_cache(maxsize=1024)
def _cell_codes(projected: bool, lon0: int, lat0: int) -> tuple[str, ...]:
    """EPSG codes whose area of use meets the 1-degree cell at (lon0, lat0): a superset of those holding any
    point of it, queried once per cell (a query takes a quarter of a second)."""
    from pyproj.aoi import AreaOfInterest
    from pyproj.database import query_crs_info
    from pyproj.enums import PJType

    kinds = [PJType.PROJECTED_CRS] if projected else [PJType.GEOGRAPHIC_2D_CRS]
    box = AreaOfInterest(max(-180.0, lon0), max(-90.0, lat0), min(180.0, lon0 + 1.0), min(90.0, lat0 + 1.0))
    infos = query_crs_info(auth_name="EPSG", pj_types=kinds, area_of_interest=box, contains=False,
                           allow_deprecated=False)
    return tuple(i.code for i in infos)[:_MAX_AREA_CANDIDATES]


def _centre_lonlat(src, centre):
    """The image centre (x, y in CRS units) as (lon, lat) on the CRS's own geodetic CRS, or None."""
    if centre is None:
        return None
    import pyproj

    if src.is_geographic:
        lon, lat = centre
        return (lon, lat) if -180 <= lon <= 180 and -90 <= lat <= 90 else None
    try:
        tr = pyproj.Transformer.from_crs(src, src.geodetic_crs, always_xy=True)
        lon, lat = tr.transform(*centre)
    except Exception:
        return None
    ok = math.isfinite(lon) and math.isfinite(lat) and -180 <= lon <= 180 and -90 <= lat <= 90
    return (lon, lat) if ok else None


@lru_cache(maxsize=8192)
def _epsg_crs(code: str):
    """The pyproj CRS of an EPSG code, built once per process (identifying compares hundreds), or None."""
    import pyproj

    try:
        return pyproj.CRS.from_epsg(code)
    except pyproj.exceptions.CRSError:
        return None


def _axes(crs) -> tuple[str, ...]:
    """The directions of a CRS's axes, in order (``("east", "north")``)."""
    return tuple((a.direction or "").lower() for a in crs.axis_info)


def _datum_key(crs) -> str:
    try:
        datum = crs.datum
    except Exception:
        return ""
    return "" if datum is None else (_datum_code(crs) or datum.name or "")


def _unlike(cand, best) -> str:
    """How ``cand``, which fits too, differs from ``best``: its datum, its axis order, or its area of use."""
    why = []
    if _datum_key(cand) != _datum_key(best):
        why.append("another datum")
    if _axes(cand) != _axes(best):
        why.append("-".join(d[:1].upper() for d in _axes(cand)) + " axes")
    if why:
        return ", ".join(why)
    return "a narrower area of use" if _area(cand) < _area(best) else "ranked lower by PROJ"


def _rank(ranked: list[str], code: str) -> int:
    return ranked.index(code) if code in ranked else len(ranked)


def identify(crs, centre=None) -> Identified:
    """The EPSG code ``crs`` is, exactly or by GDAL-style identification (see the module notes).

    Parameters
    ----------
    crs : pyproj.CRS, rasterio CRS, WKT or PROJ string
    centre : (x, y), optional
        A point of the image in ``crs`` units (its centre), to find codes by area of use.

    Raises
    ------
    CRSError
        No EPSG code has the same projection, parameters and ellipsoid; the message
        lists the nearest codes and how each differs.
    """
    src = _pyproj_crs(crs)
    lonlat = _centre_lonlat(src, centre)
    return _identify(src, lonlat)


@lru_cache(maxsize=256)
def _matches(src) -> tuple:
    """PROJ's identification of ``src`` among EPSG codes, best first: about half a second, so done once per CRS."""
    return tuple(src.list_authority(auth_name="EPSG", min_confidence=20))


def _identify(src, lonlat) -> Identified:
    matches = _matches(src)
    if matches and matches[0].confidence == 100:
        cand = _epsg_crs(matches[0].code)
        return Identified(int(matches[0].code), True, cand.name if cand is not None else matches[0].code, "")
    ranked = [m.code for m in matches]
    codes = list(dict.fromkeys(ranked + _area_codes(src, lonlat)))
    fits, near = [], []  # fits: (code, CRS), codes as strings
    want_datum = _datum_code(src)
    for code in codes:
        cand = _epsg_crs(code)
        if cand is None:
            continue
        why = _difference(src, cand, want_datum)
        if why is None:
            fits.append((code, cand))
        elif code in ranked:
            near.append((code, cand.name, why))
    name = short_name(src)
    if len(fits) > 1 and lonlat is not None:
        inside = [(k, c) for k, c in fits if _contains(c, lonlat)]
        if not inside:
            names = ", ".join(f"EPSG:{k} ({c.name})" for k, c in fits[:4])
            raise CRSError(f"the CRS ({name}) fits several EPSG codes on different datums, none of whose area of "
                           f"use holds the image: {names}; pass crs=<code> with the one it is")
        fits = inside
    if fits:
        # the source's axis order first (EPSG:25833 for an easting-northing UTM, not its northing-easting
        # twin EPSG:3045), then the widest area of use; among equally wide ones, PROJ's own ranking
        axes = _axes(src)
        fits.sort(key=lambda kc: (_axes(kc[1]) != axes, -_area(kc[1]), _rank(ranked, kc[0])))
        (code, best), rest = fits[0], fits[1:]
        ties = [(k, c) for k, c in rest if _area(c) == _area(best) and _rank(ranked, k) == _rank(ranked, code)
                and _axes(c) == _axes(best)]
        if ties:
            names = ", ".join(f"EPSG:{k} ({c.name})" for k, c in [fits[0], *ties][:4])
            raise CRSError(f"the CRS ({name}) fits several EPSG codes equally: {names}; pass crs=<code> with the "
                           "one it is")
        others = ", ".join(f"EPSG:{k} ({_unlike(c, best)})" for k, c in rest[:3]) + (", ..." if len(rest) > 3 else "")
        others = f"; {others} also fit" if others else ""
        return Identified(int(code), False, best.name,
                          f"it has EPSG:{code}'s projection, parameters and ellipsoid ({best.name}){others}")
    if near:
        listed = "; ".join(f"EPSG:{c} ({n}): {why}" for c, n, why in near[:3])
        raise CRSError(f"the CRS ({name}) has no EPSG code with the same projection, parameters and ellipsoid; "
                       f"nearest: {listed}; reproject it (gdalwarp -t_srs EPSG:<code>) or pass crs=<code> if it "
                       "is one")
    raise CRSError(f"the CRS ({name}) has no EPSG equivalent: no code PROJ proposes, nor any used where the image "
                   "is, has its projection; reproject it (gdalwarp -t_srs EPSG:<code>) or pass crs=<code> if it "
                   "is one")
