"""GDAL-style identification of CRSs without an EPSG code of their own (rumimm.format.crs_identify)."""

from __future__ import annotations

import re

import pyproj
import pytest

from rumimm.errors import CRSError
from rumimm.format.crs_identify import identify


def test_an_epsg_crs_is_itself_exactly():
    found = identify(pyproj.CRS.from_epsg(32633))
    assert found.epsg == 32633 and found.exact


@pytest.mark.parametrize(("crs", "centre", "code"), [
    ("+proj=utm +zone=18 +ellps=WGS84 +units=m", (500000, 4500000), 32618),  # JAD2001 fits too, narrower
    ("+proj=utm +zone=18 +ellps=WGS84 +units=m", None, 32618),
    ("+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80 +units=m", (4321000, 3210000), 3035),
    ("+proj=longlat +ellps=WGS84", (10.0, 50.0), 4326),
    ("+proj=utm +zone=18 +ellps=intl +units=m", (280000, 800000), 24818),  # in Venezuela: PSAD56 the widest
])
def test_a_crs_with_one_codes_projection_parameters_and_ellipsoid_is_that_code(crs, centre, code):
    found = identify(pyproj.CRS.from_user_input(crs), centre)
    assert found.epsg == code and not found.exact
    assert f"EPSG:{code}'s projection, parameters and ellipsoid" in found.note


def test_several_datums_none_of_which_covers_the_image_are_refused():
    with pytest.raises(CRSError, match="fits several EPSG codes on different datums, none of whose area of use"):
        identify(pyproj.CRS.from_user_input("+proj=utm +zone=18 +ellps=intl +units=m"), (500000, 4500000))


@pytest.mark.parametrize(("crs", "match"), [
    ("+proj=utm +zone=18 +ellps=GRS67 +units=m", "no EPSG|nearest"),
    ("+proj=geos +h=35785831 +lon_0=0 +ellps=WGS84 +units=m", "has no EPSG equivalent"),
    ("+proj=utm +zone=18 +ellps=WGS84 +units=us-ft", "no EPSG|nearest"),
    ("+proj=tmerc +lat_0=0 +lon_0=-75 +k=0.9996 +x_0=500001 +y_0=0 +ellps=WGS84 +units=m", "another false easting"),
])
def test_a_crs_that_differs_in_anything_is_refused(crs, match):
    with pytest.raises(CRSError, match=match):
        identify(pyproj.CRS.from_user_input(crs), (500000, 4500000))


def test_a_named_datum_must_match():
    # NAD27 is on the Clarke 1866 ellipsoid; a UTM on a named NAD27 datum is EPSG:26718, never a WGS 84 code
    found = identify(pyproj.CRS.from_user_input("+proj=utm +zone=18 +datum=NAD27 +units=m"), (500000, 4500000))
    assert found.epsg == 26718


# -- CRS text: EPSG, WKT, PROJJSON, PROJ strings; nothing that reads a file or the network --------
@pytest.mark.parametrize(("text", "match"), [
    ("+init=/etc/hosts:x", "init= makes PROJ read a file"),
    ("+proj=utm +zone=18 +init=epsg:32618", "init= makes PROJ read a file"),
    ("+proj=pipeline +step +proj=utm +zone=18 +ellps=WGS84", "a pipeline is a transformation"),
    ("+proj=longlat +ellps=WGS84 +nadgrids=https://example.invalid/grid.tif", "names a grid"),
    ("+proj=longlat +ellps=WGS84 +geoidgrids=/tmp/g.gtx", "names a grid"),
    ('GEOGCS["x",EXTENSION["PROJ4","+init=/etc/hosts:x"]]', "init= makes PROJ read a file"),
    ("GEOGCS[bad", "not a CRS PROJ can read"),
    ("{", "not a CRS PROJ can read"),
    ("not a crs", "not a CRS PROJ can read"),
    ("x" * 70000, "more than"),
])
def test_crs_text_that_reads_files_or_is_malformed_is_a_crs_error(text, match):
    from rumimm.format.crs_identify import parse_crs

    with pytest.raises(CRSError, match=match):
        parse_crs(text)
    with pytest.raises(CRSError, match=match):
        identify(text)


@pytest.mark.parametrize("text", [
    "EPSG:32618", 4326, "+proj=utm +zone=18 +ellps=WGS84 +units=m +no_defs",
    "+proj=merc +a=6378137 +b=6378137 +lat_ts=0 +lon_0=0 +x_0=0 +y_0=0 +k=1 +units=m +nadgrids=@null +wktext +no_defs",
])
def test_crs_text_without_files_is_accepted(text):
    from rumimm.format.crs_identify import parse_crs

    assert parse_crs(text).is_projected or parse_crs(text).is_geographic


def test_projjson_text_and_dict_are_accepted():
    import json

    import pyproj

    from rumimm.format.crs_identify import parse_crs

    text = pyproj.CRS.from_epsg(3035).to_json()
    assert parse_crs(text).to_epsg() == 3035
    assert parse_crs(json.loads(text)).to_epsg() == 3035


def test_the_code_with_the_sources_axis_order_is_preferred_and_the_others_described_truly():
    """An easting-northing UTM on GRS80 fits EPSG:25833 and its northing-easting twin EPSG:3045 (same datum,
    wider area of use): pyproj's own to_epsg says 25833, and the note says how each other fit differs."""
    src = pyproj.CRS.from_user_input("+proj=tmerc +lat_0=0 +lon_0=15 +k=0.9996 +x_0=500000 +y_0=0 +ellps=GRS80 "
                                     "+units=m +no_defs")
    found = identify(src, (500000, 5540000))  # 50 N: 25833's area in every EPSG release (older ones end at 46.4 N)
    assert found.epsg == src.to_epsg(min_confidence=20) == 25833 and not found.exact
    best = pyproj.CRS.from_epsg(found.epsg)
    assert [a.direction for a in best.axis_info] == [a.direction for a in src.axis_info]
    listed = found.note.split("; ", 1)[1]
    assert listed.endswith("also fit") and "other datums" not in listed
    for code, why in re.findall(r"EPSG:(\d+) \(([^)]*)\)", listed):
        other = pyproj.CRS.from_epsg(code)
        assert ("another datum" in why) == (other.datum.name != best.datum.name)
        assert ("N-E axes" in why) == ([a.direction for a in other.axis_info] == ["north", "east"])


def test_an_axis_twin_on_the_same_datum_is_described_as_such():
    from rumimm.format.crs_identify import _unlike

    assert _unlike(pyproj.CRS.from_epsg(3045), pyproj.CRS.from_epsg(25833)) == "N-E axes"
    assert _unlike(pyproj.CRS.from_epsg(3065), pyproj.CRS.from_epsg(25833)) == "another datum"
