"""Footprints of grids in longitude/latitude as RFC 7946 (GeoJSON) and GeoParquet 1.1 have them.

Shared by STAC Items and catalogs written in OGC:CRS84: a grid across the antimeridian, lying
past it (0..360 longitudes) or holding a pole needs more than its outline's min and max, or
searches miss it (or match it everywhere on its latitudes).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["EDGE_POINTS", "Footprint", "box_ring", "clip_strip", "pole_cap", "poles_inside", "rfc7946_footprint",
           "wgs84_footprints"]

EDGE_POINTS = 8  # points per footprint edge when reprojecting to WGS 84 (a UTM tile's edges bend in degrees)

def wgs84_footprints(epsgs: Sequence[int], transforms: Sequence[Sequence[float]], heights: Sequence[int],
                     widths: Sequence[int], *, nearest: bool = False
                     ) -> tuple[np.ndarray, np.ndarray, dict[int, Footprint]]:
    """(G, 4 * EDGE_POINTS + 1 (+ 2), 2) outlines in longitude/latitude, counter-clockwise, one per distinct grid,
    each row's grid index, and the RFC 7946 footprint of every grid the plain outline misdescribes (one
    crossing the antimeridian, lying past it, or holding a pole), by grid index: one pyproj call per CRS,
    over the distinct grids only (a time series of one tile has one footprint).  ``nearest`` adds to every
    outline its points nearest the North and the South Pole in the grid's CRS (2 more points): a polar tile's
    northernmost point lies mid-edge, between the samples, and its bbox would stop short of it."""
    import pyproj

    grids = np.column_stack([np.asarray(epsgs, np.float64), np.asarray(transforms, np.float64).reshape(-1, 6),
                             np.asarray(heights, np.float64), np.asarray(widths, np.float64)])
    grids, inverse = np.unique(grids, axis=0, return_inverse=True)
    n = EDGE_POINTS
    t = np.arange(n) / n
    fx = np.concatenate([t, np.ones(n), 1 - t, np.zeros(n), [0.0]])  # fractions of width and height
    fy = np.concatenate([np.zeros(n), t, np.ones(n), 1 - t, [0.0]])
    if nearest:
        fx, fy = _with_nearest(grids, n)
    tr = grids[:, 1:7]
    px = np.atleast_2d(fx) * grids[:, 8:9]
    py = np.atleast_2d(fy) * grids[:, 7:8]
    x = tr[:, 2:3] + tr[:, 0:1] * px + tr[:, 1:2] * py
    y = tr[:, 5:6] + tr[:, 3:4] * px + tr[:, 4:5] * py
    codes = grids[:, 0].astype(np.int64)
    for epsg in np.unique(codes):
        if epsg == 4326:
            continue
        rows = codes == epsg
        lon, lat = pyproj.Transformer.from_crs(int(epsg), 4326, always_xy=True).transform(x[rows], y[rows])
        x[rows], y[rows] = lon, lat
    poles = poles_inside(grids)
    special: dict[int, Footprint] = {}
    odd = poles.any(axis=1) | (np.abs(np.diff(x, axis=1)) > 180.0).any(axis=1) | (x.min(axis=1) < -180.0) \
        | (x.max(axis=1) > 180.0)
    odd &= np.isfinite(x).all(axis=1) & np.isfinite(y).all(axis=1)  # an outline leaving the CRS's area: as before
    for g in np.flatnonzero(odd).tolist():
        fp = rfc7946_footprint(x[g], y[g], poles[g])
        if fp is not None:
            special[g] = fp
    rings = np.stack([x, y], axis=-1)
    area = np.sum(x[:, :-1] * y[:, 1:] - x[:, 1:] * y[:, :-1], axis=1)
    rings[area < 0] = rings[area < 0, ::-1]  # GeoJSON's exterior ring is counter-clockwise
    return rings, inverse.reshape(-1), special


def _with_nearest(grids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(G, 4n + 3) fractions of width and height along each grid's outline: the ``n`` samples an edge and, in
    their place along it, the outline's points nearest each pole in the grid's CRS (furthest north or south in
    a polar or conic projection, where distance from the pole grows with colatitude); the middle of the top
    and bottom edges for a grid in a geographic CRS or one whose CRS cannot hold the pole."""

    # an outline point's place: edge k (top, right, bottom, left) plus the fraction along it, in [0, 4)
    places = np.tile(np.arange(4 * n, dtype=np.float64) / n, (grids.shape[0], 1))
    extra = np.tile([0.5 / n, 2.0 + 0.5 / n], (grids.shape[0], 1))
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
    for rows, px, py in _projected_poles(grids[:, 0].astype(np.int64)):
        a, b, c, d, e, f = (grids[rows, k][:, None] for k in range(1, 7))
        h, w = grids[rows, 7][:, None], grids[rows, 8][:, None]
        cx = c + a * corners[:, 0] * w + b * corners[:, 1] * h  # (R, 5) corners in CRS units, closed
        cy = f + d * corners[:, 0] * w + e * corners[:, 1] * h
        for k in range(2):
            if not (np.isfinite(px[k]) and np.isfinite(py[k])):
                continue
            ex, ey = np.diff(cx, axis=1), np.diff(cy, axis=1)  # (R, 4) edges
            with np.errstate(all="ignore"):
                u = np.clip(((px[k] - cx[:, :4]) * ex + (py[k] - cy[:, :4]) * ey) / (ex * ex + ey * ey), 0.0, 1.0)
            u = np.nan_to_num(u)
            dist = np.hypot(cx[:, :4] + u * ex - px[k], cy[:, :4] + u * ey - py[k])
            edge = np.argmin(dist, axis=1)
            extra[rows, k] = (edge + u[np.arange(rows.size), edge]) % 4.0
    on_sample = np.abs(extra * n - np.round(extra * n)) < 1e-9
    extra[on_sample] += 0.5 / n  # a sample already: a point between two samples instead (no repeated vertex)
    places = np.sort(np.concatenate([places, extra % 4.0], axis=1), axis=1)
    edge, frac = np.minimum(np.floor(places), 3).astype(np.int64), places - np.minimum(np.floor(places), 3)
    fx = np.choose(edge, [frac, np.ones_like(frac), 1 - frac, np.zeros_like(frac)])
    fy = np.choose(edge, [np.zeros_like(frac), frac, np.ones_like(frac), 1 - frac])
    close = np.zeros((grids.shape[0], 1))
    return np.concatenate([fx, close], axis=1), np.concatenate([fy, close], axis=1)


def _projected_poles(codes: np.ndarray) -> Iterator[tuple[np.ndarray, Any, Any]]:
    """(rows, x, y of the North and South Pole) for each projected CRS among the grids' EPSG ``codes``: where
    each pole is in that CRS's coordinates (non-finite where the CRS cannot hold it)."""
    import pyproj

    for epsg in np.unique(codes):
        crs = pyproj.CRS.from_epsg(int(epsg))
        if crs.is_geographic:
            continue
        px, py = pyproj.Transformer.from_crs(4326, crs, always_xy=True).transform([0.0, 0.0], [90.0, -90.0])
        yield np.flatnonzero(codes == epsg), px, py


# (geometry type, parts: each a list of rings of [lon, lat], bbox): a footprint that is not one plain ring
Footprint = tuple[str, list[list[list[list[float]]]], list[float]]


def poles_inside(grids: np.ndarray) -> np.ndarray:
    """(G, 2) whether each grid (rows of EPSG code, 6 affine coefficients, height, width) holds the North and the
    South Pole strictly inside: the pole projected to the grid's CRS, mapped back to fractional pixels.  A grid
    in a geographic CRS holds none (its top or bottom edge at most runs along a pole)."""
    out = np.zeros((grids.shape[0], 2), bool)
    for rows, px, py in _projected_poles(grids[:, 0].astype(np.int64)):
        a, b, c, d, e, f = (grids[rows, k] for k in range(1, 7))
        h, w = grids[rows, 7], grids[rows, 8]
        det = a * e - b * d
        with np.errstate(all="ignore"):
            for k in range(2):
                dx, dy = px[k] - c, py[k] - f
                col, row = (e * dx - b * dy) / det, (a * dy - d * dx) / det
                out[rows, k] = (col > 0) & (col < w) & (row > 0) & (row < h)  # False for a non-finite pole
    return out


def rfc7946_footprint(lon: np.ndarray, lat: np.ndarray, poles: np.ndarray) -> Footprint | None:
    """A closed outline's (longitudes, latitudes) geometry and bbox as RFC 7946 has them, or None for an
    outline that crosses nothing (its plain ring and bounds are right).  An outline holding a pole gets the
    bbox from -180 to 180 reaching 90 or -90 (section 5.3) and a Polygon cut at the antimeridian, closed along
    the pole's parallel; one crossing the antimeridian (consecutive longitudes more than 180 degrees apart) or
    lying past it (a geographic grid in 0..360 longitudes) gets a bbox with west > east (section 5.2) and a
    MultiPolygon of its parts on either side, each within -180..180 (section 3.1.9)."""
    south, north = float(lat.min()), float(lat.max())
    if poles[0] and poles[1]:
        world = box_ring(-180.0, -90.0, 180.0, 90.0)
        return "Polygon", [[world]], [-180.0, -90.0, 180.0, 90.0]
    if poles[0] or poles[1]:
        pole = 90.0 if poles[0] else -90.0
        bbox = [-180.0, south, 180.0, 90.0] if poles[0] else [-180.0, -90.0, 180.0, north]
        return "Polygon", [[pole_cap(lon, lat, pole, south, north)]], bbox
    jumps = np.abs(np.diff(lon)) > 180.0
    if not jumps.any() and lon.min() >= -180.0 and lon.max() <= 180.0:
        return None
    x = np.unwrap(lon, period=360.0)  # continuous across the antimeridian, net change 0 (no pole inside)
    lo, hi = float(x.min()), float(x.max())
    if hi - lo >= 360.0:
        return "Polygon", [[box_ring(-180.0, south, 180.0, north)]], [-180.0, south, 180.0, north]
    west = lo - 360.0 * math.floor((lo + 180.0) / 360.0)  # in [-180, 180)
    east = hi - 360.0 * math.ceil((hi - 180.0) / 360.0)  # in (-180, 180]
    parts = []
    for k in range(math.floor((lo + 180.0) / 360.0), math.ceil((hi - 180.0) / 360.0) + 1):
        ring = clip_strip(x - 360.0 * k, lat)
        if ring is not None:
            parts.append([ring])
    if len(parts) == 1:
        return "Polygon", parts, [west, south, east, north]
    return "MultiPolygon", parts, [west, south, east, north]


def box_ring(w: float, s: float, e: float, n: float) -> list[list[float]]:
    return [[w, s], [e, s], [e, n], [w, n], [w, s]]


def pole_cap(lon: np.ndarray, lat: np.ndarray, pole: float, south: float, north: float) -> list[list[float]]:
    """The ring of an outline around a pole, in longitudes from -180 to 180: the outline cut where it crosses
    the antimeridian, closed along the antimeridian and the pole's parallel."""
    x = np.unwrap(lon, period=360.0)
    if x[-1] < x[0]:  # make the outline run eastwards
        lon, lat = lon[::-1], lat[::-1]
        x = np.unwrap(lon, period=360.0)
    if abs(x[-1] - x[0] - 360.0) > 1e-6:  # no single turn around the pole (too coarse an outline): its bbox
        return box_ring(-180.0, south, 180.0, 90.0) if pole > 0 else box_ring(-180.0, -90.0, 180.0, north)
    jump = int(np.flatnonzero(np.diff(lon) < -180.0)[0])  # the step crossing 180 eastwards
    n = lon.size - 1
    order = (np.arange(n) + jump + 1) % n  # the open outline from the first point past the antimeridian
    px, py = np.unwrap(lon[order], period=360.0), lat[order]
    px = px - 360.0 * math.floor((px[0] + 180.0) / 360.0)  # starts in [-180, 180)
    x0, y0, x1, y1 = px[-1] - 360.0, py[-1], px[0], py[0]  # the crossing step, shifted to end at the start
    yc = y1 if x1 == x0 else y0 + (y1 - y0) * (-180.0 - x0) / (x1 - x0)
    xs = np.concatenate([[-180.0], px, [180.0, 180.0, -180.0, -180.0]])
    ys = np.concatenate([[yc], py, [yc, pole, pole, yc]])
    ring = clip_strip(xs, ys)
    assert ring is not None
    return ring


def clip_strip(x: np.ndarray, y: np.ndarray) -> list[list[float]] | None:
    """The part of the closed ring (x, y) with -180 <= x <= 180, counter-clockwise and closed, or None when
    nothing of it (no area) is there: Sutherland-Hodgman, the strip being convex."""
    pts = list(zip(x[:-1].tolist(), y[:-1].tolist(), strict=True))
    for edge, sign in ((-180.0, 1.0), (180.0, -1.0)):
        out: list[tuple[float, float]] = []
        for i, (cx, cy) in enumerate(pts):
            qx, qy = pts[i - 1]
            cur, prev = sign * (cx - edge) >= 0, sign * (qx - edge) >= 0
            if cur != prev:
                out.append((edge, qy + (cy - qy) * (edge - qx) / (cx - qx)))
            if cur:
                out.append((cx, cy))
        pts = [p for i, p in enumerate(out) if p != out[i - 1]] if len(out) > 1 else out
    if len(pts) < 3:
        return None
    area = sum(pts[i - 1][0] * p[1] - p[0] * pts[i - 1][1] for i, p in enumerate(pts))
    if area == 0:
        return None
    if area < 0:
        pts.reverse()
    return [list(p) for p in pts] + [list(pts[0])]
