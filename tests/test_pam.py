"""PAM sidecars (rumimm.format.pam): GDAL's .aux.xml built and parsed, hostile input refused."""

from __future__ import annotations

import math
import struct
import warnings

import numpy as np
import pytest

import rumimm
from rumimm.errors import FormatError, RumiWarning
from rumimm.format.pam import BandMetadata, Metadata, blob_digest, build_pam, parse_pam

rasterio = pytest.importorskip("rasterio")  # CI installs the geotiff extra


def full_meta() -> Metadata:
    return Metadata.from_args(
        3, nodata=-9999.5, descriptions=["red", "green", None], colorinterp=["palette", "green", "alpha"],
        scales=[0.5, 0.25, None], offsets=[1.0, -2.0, None], units=["m", "", None],
        colormaps={1: {0: (255, 0, 0), 2: (0, 0, 255, 128)}}, tags={"SENSOR": "test", "DATE": "2020"},
        band_tags={2: {"WAVELENGTH": "0.56"}})


def test_a_sidecar_round_trips_every_field():
    meta = full_meta()
    back = parse_pam(build_pam(meta), 3)
    assert back.tags == {"SENSOR": "test", "DATE": "2020"}
    assert [b.description for b in back.bands] == ["red", "green", None]
    assert [b.nodata for b in back.bands] == [-9999.5] * 3
    assert [b.colorinterp for b in back.bands] == ["palette", "green", "alpha"]
    assert [b.scale for b in back.bands] == [0.5, 0.25, None]
    assert [b.offset for b in back.bands] == [1.0, -2.0, None]
    assert [b.unit for b in back.bands] == ["m", None, None]
    assert back.bands[0].colormap == {0: (255, 0, 0, 255), 1: (0, 0, 0, 0), 2: (0, 0, 255, 128)}
    assert back.bands[1].tags == {"WAVELENGTH": "0.56"}
    assert back.digest is None


def test_nan_nodata_keeps_its_bits_and_int64_nodata_is_exact():
    payload = struct.unpack("<d", bytes.fromhex("010000000000F87F"))[0]  # a NaN with a payload
    meta = Metadata.from_args(2, nodata=[payload, 2**63 - 25])
    text = build_pam(meta)
    assert b'le_hex_equiv="010000000000F87F"' in text
    back = parse_pam(text, 2)
    assert struct.pack("<d", back.bands[0].nodata).hex().upper() == "010000000000F87F"
    assert back.bands[1].nodata == 2**63 - 25 and isinstance(back.bands[1].nodata, int)


def test_the_blob_digest_is_recorded_and_read_back():
    text = build_pam(Metadata.from_args(1, nodata=0), blob=b"\x01" * 28)
    assert parse_pam(text, 1).digest == blob_digest(b"\x01" * 28)


def test_gdal_reads_the_sidecar_rumimm_writes(tmp_path):
    import rumimm

    path = tmp_path / "x.rumi"
    rumimm.write(path, np.zeros((3, 20, 30), np.float32), tile=16, transform=(30, 0, 500000, 0, -30, 4500000),
                 crs=32618)
    (tmp_path / "x.rumi.aux.xml").write_bytes(build_pam(full_meta()))
    with rasterio.open(path) as ds:  # GDAL opens a rumi file as a GeoTIFF and reads its PAM sidecar
        assert ds.nodatavals == (-9999.5,) * 3
        assert ds.descriptions == ("red", "green", None)
        assert [c.name for c in ds.colorinterp] == ["palette", "green", "alpha"]
        assert ds.scales == (0.5, 0.25, 1.0) and ds.offsets == (1.0, -2.0, 0.0)
        assert ds.units == ("m", None, None)
        assert ds.tags()["SENSOR"] == "test" and ds.tags(2) == {"WAVELENGTH": "0.56"}
        assert ds.colormap(1)[2] == (0, 0, 255, 128)


def test_text_and_nodata_read_back_as_gdal_reads_the_same_sidecar(tmp_path):
    """A carriage return survives (written as a reference: a raw one reads back as a line feed), leading
    whitespace goes as GDAL drops it, and a float band's integer nodata beyond 2**53 is its nearest float."""
    import rumimm

    path = tmp_path / "x.rumi"
    rumimm.write(path, np.zeros((2, 16, 16), np.float64), tile=16, nodata=2**53 + 1,
                 descriptions=["a\rb", "  red"], units=["\tm", "s"], tags={"k": "x\r\ny", "lead": "  v"})
    with rumimm.open(path) as img, rasterio.open(path) as ds:  # GDAL reads the rumi file's PAM sidecar
        assert img.descriptions == ds.descriptions == ("a\rb", "red")
        assert img.units == ds.units == ("m", "s")
        assert img.tags()["k"] == ds.tags()["k"] == "x\r\ny" and img.tags()["lead"] == ds.tags()["lead"] == "v"
        assert img.nodata == ds.nodata == 9007199254740992.0 and isinstance(img.nodata, float)


def test_a_sidecar_gdal_writes_is_read(tmp_path):
    from rasterio.enums import ColorInterp
    from rasterio.transform import from_origin

    profile = dict(driver="EHdr", width=8, height=8, count=2, dtype="float32", nodata=float("nan"), crs="EPSG:4326",
                   transform=from_origin(10, 50, 0.1, 0.1))
    with rasterio.open(tmp_path / "e.bil", "w", **profile) as ds:  # EHdr keeps all this in its PAM sidecar
        ds.write(np.zeros((2, 8, 8), np.float32))
        ds.descriptions = ("a", "b")
        ds.scales, ds.offsets, ds.units = (2.0, 3.0), (1.0, 0.5), ("K", "K")
        ds.colorinterp = (ColorInterp.gray, ColorInterp.alpha)
        ds.update_tags(X="1")
        ds.update_tags(2, Y="2")
        ds.update_tags(ns="foo", Z="3")
    meta = parse_pam((tmp_path / "e.bil.aux.xml").read_bytes(), 2)
    assert all(math.isnan(b.nodata) for b in meta.bands)
    assert [b.description for b in meta.bands] == ["a", "b"]
    assert [(b.scale, b.offset, b.unit) for b in meta.bands] == [(2.0, 1.0, "K"), (3.0, 0.5, "K")]
    assert meta.tags == {"X": "1"} and meta.domains == {"foo": {"Z": "3"}}
    assert meta.bands[1].tags == {"Y": "2"}


@pytest.mark.parametrize(("text", "match"), [
    (b"not xml", "not well-formed XML"),
    (b"<Other/>", "root element is <Other>"),
    (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa">]><PAMDataset>&a;</PAMDataset>', "DTD or entities"),
    (b'<PAMDataset><PAMRasterBand band="0"/></PAMDataset>', "band='0' is not a band number"),
    (b'<PAMDataset><PAMRasterBand band="99999999999999999999"/></PAMDataset>', "is not a band number"),
    (b'<PAMDataset><PAMRasterBand band="4"/></PAMDataset>', "describes band 4, but the file has 3 bands"),
    (b'<PAMDataset><PAMRasterBand band="1"><Scale>big</Scale></PAMRasterBand></PAMDataset>', "Scale 'big' is not"),
    (b'<PAMDataset><PAMRasterBand band="1"><NoDataValue le_hex_equiv="zz">nan</NoDataValue></PAMRasterBand>'
     b'</PAMDataset>', "le_hex_equiv 'zz'"),
    (b'<PAMDataset><PAMRasterBand band="1"><ColorTable><Entry c1="9' + b"9" * 5000 + b'" c2="0" c3="0"/>'
     b'</ColorTable></PAMRasterBand></PAMDataset>', "c1="),
    (b'<PAMDataset><Metadata><MDI>v</MDI></Metadata></PAMDataset>', "has no key"),
])
def test_hostile_sidecars_are_format_errors_naming_the_file(text, match):
    with pytest.raises(FormatError, match=match) as info:
        parse_pam(text, 3, "x.rumi.aux.xml")
    assert str(info.value).startswith("x.rumi.aux.xml: ")


def test_a_dtd_in_another_encoding_is_refused_too():
    laughs = ('<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE PAMDataset [<!ENTITY a "aaaaaaaaaa">'
              '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>'
              '<PAMDataset><Metadata><MDI key="x">&c;</MDI></Metadata></PAMDataset>').encode("utf-16")
    assert b"<!DOCTYPE" not in laughs
    with pytest.raises(FormatError, match="declares a DTD or entities"):
        parse_pam(laughs, 1)


def test_an_oversized_sidecar_is_refused_before_parsing():
    from rumimm.format import pam

    with pytest.raises(FormatError, match="more than"):
        parse_pam(b" " * (pam.MAX_BYTES + 1), 1)


def test_unknown_elements_gdal_writes_are_ignored():
    text = (b'<PAMDataset><SRS>GEOGCS[]</SRS><GeoTransform>0,1,0,0,0,-1</GeoTransform>'
            b'<PAMRasterBand band="1"><Histograms><HistItem/></Histograms><Metadata>'
            b'<MDI key="STATISTICS_MEAN">3</MDI></Metadata><ColorInterp>NIR</ColorInterp></PAMRasterBand></PAMDataset>')
    meta = parse_pam(text, 1)
    assert meta.bands[0].tags == {"STATISTICS_MEAN": "3"}
    assert meta.bands[0].colorinterp == "undefined"  # GDAL >= 3.10 names rasterio has no member for


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    (dict(nodata=[1, 2]), ValueError, "one entry per band"),
    (dict(nodata=True), TypeError, "must be a number"),
    (dict(descriptions=["a", 3, None]), TypeError, "must be strings"),
    (dict(descriptions=["a\x00", None, None]), ValueError, "control character"),
    (dict(colorinterp=["red", "purple", None]), ValueError, "not a colour interpretation"),
    (dict(scales=[1.0, float("inf"), None]), ValueError, "finite"),
    (dict(colormaps={4: {}}), ValueError, "band 4 is not a band number"),
    (dict(colormaps={1: {0: (300, 0, 0)}}), ValueError, "ints 0..255"),
    (dict(tags={"a=b": "x"}), ValueError, "key 'a=b'"),
])
def test_bad_metadata_arguments_are_refused(kwargs, error, match):
    with pytest.raises(error, match=match):
        Metadata.from_args(3, **kwargs)


@pytest.mark.parametrize(("dtype", "nodata", "ok"), [
    ("uint8", 255, True), ("uint8", 256, False), ("uint8", -1, False), ("uint8", 1.5, False),
    ("int16", -32768.0, True), ("uint64", 2**64 - 1, True), ("int64", 2**63, False),
    ("float32", float("nan"), True), ("float32", 1e39, False), ("float32", -9999.5, True),
    ("float64", float("-inf"), True), ("bool", 1, True), ("bool", 2, False), ("complex64", 0, False),
])
def test_nodata_must_be_a_value_of_the_image_dtype(dtype, nodata, ok):
    meta = Metadata.from_args(1, nodata=nodata)
    if ok:
        meta.check_dtype(np.dtype(dtype))
    else:
        with pytest.raises(ValueError, match="nodata"):
            meta.check_dtype(np.dtype(dtype))


def test_empty_metadata_is_empty():
    assert Metadata.empty(2).is_empty()
    assert not Metadata.from_args(2, nodata=0).is_empty()
    assert BandMetadata().is_empty()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert parse_pam(b"<PAMDataset/>", 2).is_empty()


def test_mutated_sidecars_parse_or_are_format_errors():
    """Seeded byte flips, cuts and splices of a full sidecar: a Metadata or a FormatError, nothing else."""
    good = build_pam(full_meta(), blob=b"\x02" * 28)
    rng = np.random.default_rng(21)
    outcomes = {"parsed": 0, "refused": 0}
    for _ in range(3000):
        data = bytearray(good)
        kind = rng.integers(4)
        if kind == 0:
            for i in rng.integers(0, len(data), rng.integers(1, 6)):
                data[i] = int(rng.integers(0, 256))
        elif kind == 1:
            data = data[: rng.integers(0, len(data))]
        elif kind == 2:
            i, j = sorted(rng.integers(0, len(data), 2))
            data[i:i] = data[i:j] * int(rng.integers(1, 4))
        else:
            text = bytes(data).replace(b'band="2"', f'band="{rng.integers(-5, 10**6)}"'.encode())
            data = bytearray(text.replace(b">0.5<", b">" + str(rng.normal() * 10.0**rng.integers(-300, 300)).encode()
                                          + b"<"))
        try:
            meta = parse_pam(bytes(data), 3, "x.aux.xml")
        except FormatError:
            outcomes["refused"] += 1
            continue
        assert len(meta.bands) == 3
        outcomes["parsed"] += 1
    assert outcomes["parsed"] > 20 and outcomes["refused"] > 100, outcomes  # both paths were taken


@pytest.mark.parametrize("encoding", ["UTF-06", "no-such-codec", "shift_jis", "utf-7", "utf-16"])
def test_issue_24_a_sidecar_declaring_an_encoding_python_lacks_is_a_format_error(encoding):
    # found by the pam fuzz target: expat and ElementTree raise LookupError for an XML
    # declaration naming an encoding Python has no codec for (tests/fuzz/regressions/pam)
    text = f'<?xml version="1.0" encoding="{encoding}"?><PAMDataset/>'
    for data in (text.encode("ascii"), text.encode("utf-16"), b"\xff\xfe" + text.encode("utf-16-le")):
        try:
            parse_pam(data, 1, "x.tif.aux.xml")
        except FormatError as exc:
            assert "x.tif.aux.xml" in str(exc)


def test_issue_24_an_empty_colour_table_reads_as_none_as_it_is_written_back():
    # found by the pam fuzz target (read, build_pam, read again must agree): an empty
    # <ColorTable/> read as {} and was not written back, so the second read said None
    data = b'<PAMDataset><PAMRasterBand band="1"><ColorTable></ColorTable></PAMRasterBand></PAMDataset>'
    meta = parse_pam(data, 1)
    assert meta.bands[0].colormap is None
    assert parse_pam(build_pam(meta), 1) == meta


# -- numbers read as GDAL reads them (CPLAtof / atoi: leading ASCII digits only) ----------------
@pytest.mark.parametrize(("text", "value"), [
    ("1_000", 1), ("  12abc", 12), ("-3", -3), ("1.5e2x", 150.0), ("0x10", 16.0), ("+.5", 0.5),
    ("nan", "nan"), ("-inf", float("-inf")), ("Infinity", float("inf")), ("18446744073709551615", 2**64 - 1),
])
def test_nodata_text_is_read_as_gdal_reads_it(text, value):
    xml = f'<PAMDataset><PAMRasterBand band="1"><NoDataValue>{text}</NoDataValue></PAMRasterBand></PAMDataset>'
    got = parse_pam(xml.encode(), 1).bands[0].nodata
    if value == "nan":
        assert math.isnan(got)
    else:
        assert got == value
        assert type(got) is type(value)


@pytest.mark.parametrize("band", ["\u00b2", "\u0661", "\u0663", "0", "-1", "", "x1"])
def test_a_band_number_gdal_reads_as_no_band_is_refused_as_a_format_error(band):
    xml = f'<PAMDataset><PAMRasterBand band="{band}"><Description>d</Description></PAMRasterBand></PAMDataset>'
    with pytest.raises(FormatError, match="not a band number"):
        parse_pam(xml.encode("utf-8"), 3)


def test_a_band_number_with_trailing_characters_is_its_leading_digits():
    xml = b'<PAMDataset><PAMRasterBand band="2_0"><Description>d</Description></PAMRasterBand></PAMDataset>'
    assert parse_pam(xml, 3).bands[1].description == "d"


def test_a_bad_band_number_in_a_sidecar_is_a_warning_not_an_error(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, np.zeros((1, 8, 8), np.uint8), tile=8)
    (tmp_path / "x.rumi.aux.xml").write_bytes(
        '<PAMDataset><PAMRasterBand band="²"><NoDataValue>0</NoDataValue></PAMRasterBand></PAMDataset>'.encode())
    with rumimm.open(path) as img, pytest.warns(RumiWarning, match="not a band number"):
        assert img.nodata is None


@pytest.mark.parametrize(("dtype", "text"), [
    ("uint8", "300"), ("uint8", "-1"), ("uint8", "1.5"), ("uint8", "inf"), ("int64", "nan"), ("int64", "1e20"),
    ("float32", "1e300"),
])
def test_a_nodata_outside_the_dtype_is_dropped_with_a_warning(tmp_path, dtype, text):
    path = tmp_path / "x.rumi"
    rumimm.write(path, np.zeros((2, 8, 8), dtype), tile=8)
    (tmp_path / "x.rumi.aux.xml").write_bytes(
        f'<PAMDataset><PAMRasterBand band="1"><NoDataValue>{text}</NoDataValue><Description>a</Description>'
        f'</PAMRasterBand><PAMRasterBand band="2"><NoDataValue>0</NoDataValue></PAMRasterBand></PAMDataset>'.encode())
    with rumimm.open(path) as img, pytest.warns(RumiWarning, match=r"band 1 .*nodata is not applied"):
        assert img.nodatavals == (None, 0)
        assert img.descriptions == ("a", None)
