"""Band metadata written with a rumi file (PAM sidecar) and read by open.

Modules: rumimm.writer.sidecar, rumimm.reader.sidecar.
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest

import rumimm
from rumimm.errors import CRSError, RumiWarning
from rumimm.format.pam import Metadata, build_pam

UTM = (30.0, 0.0, 500000.0, 0.0, -30.0, 4500000.0)


def scene(dtype="float32", bands=3):
    return np.arange(bands * 20 * 30, dtype=dtype).reshape(bands, 20, 30)


def write_full(path):
    return rumimm.write(path, scene(), tile=16, transform=UTM, crs=32618, nodata=-9999.0,
                        descriptions=["red", "green", "nir"], colorinterp=["red", "green", "undefined"],
                        scales=[0.5, 0.25, 1.0], offsets=[1.0, 0.0, -2.0], units=["K", "K", None],
                        tags={"SENSOR": "test"}, band_tags={3: {"WAVELENGTH": "0.86"}})




def test_write_puts_band_metadata_in_a_sidecar_open_reads(tmp_path):
    path = tmp_path / "x.rumi"
    write_full(path)
    assert (tmp_path / "x.rumi.aux.xml").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rumimm.open(path) as img:
            assert img.nodata == -9999.0 and img.nodatavals == (-9999.0,) * 3
            assert img.descriptions == ("red", "green", "nir")
            assert img.colorinterp == ("red", "green", "undefined")
            assert img.scales == (0.5, 0.25, 1.0) and img.offsets == (1.0, 0.0, -2.0)
            assert img.units == ("K", "K", None)
            assert img.tags() == {"SENSOR": "test"} and img.tags(3) == {"WAVELENGTH": "0.86"} and img.tags(1) == {}


def test_gdal_reads_the_metadata_rumimm_write_gives(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    path = tmp_path / "x.rumi"
    write_full(path)
    with rasterio.open(path) as ds:
        assert ds.nodatavals == (-9999.0,) * 3
        assert ds.descriptions == ("red", "green", "nir")
        assert ds.scales == (0.5, 0.25, 1.0) and ds.offsets == (1.0, 0.0, -2.0)
        assert ds.tags()["SENSOR"] == "test" and ds.tags(3) == {"WAVELENGTH": "0.86"}


def test_a_file_without_metadata_has_none_and_no_sidecar(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, scene("uint16"), tile=16)
    assert not (tmp_path / "x.rumi.aux.xml").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rumimm.open(path) as img:
            assert img.nodata is None and img.nodatavals == (None,) * 3
            assert img.descriptions == (None,) * 3 and img.scales == (1.0,) * 3 and img.offsets == (0.0,) * 3
            assert img.colorinterp == ("gray", "undefined", "undefined") and img.tags() == {}
            with pytest.raises(ValueError, match="no colour map"):
                img.colormap(1)


def test_rewriting_without_metadata_removes_the_old_sidecar(tmp_path):
    path = tmp_path / "x.rumi"
    write_full(path)
    rumimm.write(path, scene(), tile=16)
    assert not (tmp_path / "x.rumi.aux.xml").exists()
    with rumimm.open(path) as img:
        assert img.nodata is None


def test_a_sidecar_of_another_version_of_the_file_is_ignored_with_a_warning(tmp_path):
    path = tmp_path / "x.rumi"
    write_full(path)
    stale = (tmp_path / "x.rumi.aux.xml").read_bytes()
    rumimm.write(path, scene() + 1, tile=16, nodata=5.0)  # another file (other frames, another blob)
    (tmp_path / "x.rumi.aux.xml").write_bytes(stale)      # what a crash between the two renames would leave
    with rumimm.open(path) as img, pytest.warns(RumiWarning, match="another version of the file"):
        assert img.nodata is None


@pytest.mark.parametrize("content", [b"garbage", b'<PAMDataset><PAMRasterBand band="9"/></PAMDataset>', None])
def test_an_unreadable_sidecar_warns_and_the_pixels_still_read(tmp_path, content):
    path = tmp_path / "x.rumi"
    rumimm.write(path, scene(), tile=16)
    side = tmp_path / "x.rumi.aux.xml"
    if content is None:
        side.mkdir()  # a directory where the sidecar should be
    else:
        side.write_bytes(content)
    with rumimm.open(path) as img:
        with pytest.warns(RumiWarning, match="x.rumi.aux.xml: .*band metadata .* is not applied"):
            assert img.nodata is None
        assert np.array_equal(img[:], scene())


def test_a_sidecar_gdal_tools_wrote_without_a_digest_is_applied(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, scene("int16"), tile=16)
    (tmp_path / "x.rumi.aux.xml").write_bytes(build_pam(Metadata.from_args(3, nodata=-1)))  # as gdal_edit -a_nodata
    with rumimm.open(path) as img:
        assert img.nodatavals == (-1.0,) * 3


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"nodata": 300}, ValueError, "not a uint8 value"),
    ({"nodata": [0, 1]}, ValueError, "one entry per band"),
    ({"descriptions": "red"}, TypeError, "sequence of one value per band"),
    ({"colorinterp": ["red", "blue", "mauve"]}, ValueError, "colour interpretation"),
])
def test_bad_metadata_is_refused_before_a_file_is_created(tmp_path, kwargs, error, match):
    path = tmp_path / "x.rumi"
    with pytest.raises(error, match=match):
        rumimm.write(path, scene("uint8"), tile=16, **kwargs)
    assert os.listdir(tmp_path) == []


def test_int64_nodata_beyond_a_double_is_exact(tmp_path):
    path = tmp_path / "x.rumi"
    big = 2**62 + 1
    rumimm.write(path, np.zeros((1, 4, 4), np.int64), tile=16, nodata=big)
    with rumimm.open(path) as img:
        assert img.nodata == big and isinstance(img.nodata, int)


def test_nan_nodata_round_trips(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, scene(), tile=16, nodata=float("nan"))
    with rumimm.open(path) as img:
        assert all(math.isnan(v) for v in img.nodatavals)


def test_a_colour_map_round_trips(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, np.zeros((1, 8, 8), np.uint8), tile=16, colorinterp=["palette"],
                 colormaps={1: {0: (0, 0, 0), 1: (255, 0, 0, 128)}})
    with rumimm.open(path) as img:
        assert img.colormap(1) == {0: (0, 0, 0, 255), 1: (255, 0, 0, 128)}
        assert img.colorinterp == ("palette",)


@pytest.mark.parametrize("colorinterp", [None, ["gray", "undefined", "undefined"]])
def test_a_band_with_a_colour_map_is_palette_as_gdal_reports_it(tmp_path, colorinterp):
    path = tmp_path / "x.rumi"
    rumimm.write(path, np.zeros((3, 8, 8), np.uint8), tile=16, colorinterp=colorinterp,
                 colormaps={2: {0: (0, 0, 0), 1: (255, 0, 0)}})
    with rumimm.open(path) as img:
        got = img.colorinterp
    rasterio = pytest.importorskip("rasterio")
    with rasterio.open(path) as ds:  # GDAL reads a rumi file as a GeoTIFF with its PAM sidecar
        assert got == tuple(c.name for c in ds.colorinterp) == ("gray", "palette", "undefined")


def test_a_geographic_crs_with_metre_coordinates_is_refused(tmp_path):
    with pytest.raises(CRSError, match=r"EPSG:4326 is geographic .* beyond longitudes"):
        rumimm.write(tmp_path / "x.rumi", scene(), tile=16, transform=UTM, crs=4326)
    # a global grid, pixel centres from -180 to 180, and a 0..360 grid are degrees
    rumimm.write(tmp_path / "g.rumi", np.zeros((1, 181, 361), np.uint8), tile=64,
                 transform=(1.0, 0.0, -180.5, 0.0, -1.0, 90.5), crs=4326)
    rumimm.write(tmp_path / "h.rumi", np.zeros((1, 180, 360), np.uint8), tile=64,
                 transform=(1.0, 0.0, 0.0, 0.0, -1.0, 90.0), crs=4326)


# -- issue "edges a user hits": sidecars that are not regular files or not the file's own ------------
def test_a_fifo_at_the_sidecar_name_is_refused_without_blocking(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, scene(), tile=16)
    os.mkfifo(tmp_path / "x.rumi.aux.xml")  # nobody ever writes to it: a blocking open would wait forever
    with rumimm.open(path) as img, pytest.warns(RumiWarning, match="not a regular file"):
        assert img.nodata is None
    # the other entry points that read metadata go through the same function
    with pytest.warns(RumiWarning, match="not a regular file"):
        rumimm.convert(path, tmp_path / "y.rumi", codec="fast")


def test_a_directory_at_the_sidecar_name_warns(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, scene(), tile=16)
    (tmp_path / "x.rumi.aux.xml").mkdir()
    with rumimm.open(path) as img, pytest.warns(RumiWarning, match="directory"):
        assert img.nodata is None


def constant_pair(tmp_path):
    """Two files of equal header blobs (constant tiles compress to equal sizes), a's with metadata."""
    a, b = tmp_path / "a.rumi", tmp_path / "b.rumi"
    blob_a = rumimm.write(a, np.full((2, 20, 30), 7, np.uint16), tile=16, nodata=7, descriptions=["x", "y"])
    blob_b = rumimm.write(b, np.full((2, 20, 30), 9, np.uint16), tile=16)
    assert bytes(blob_a) == bytes(blob_b)
    return a, b


def test_a_sidecar_of_another_file_with_an_equal_blob_is_not_applied(tmp_path):
    a, b = constant_pair(tmp_path)
    (tmp_path / "b.rumi.aux.xml").write_bytes((tmp_path / "a.rumi.aux.xml").read_bytes())
    with rumimm.open(b) as img, pytest.warns(RumiWarning, match="another file's content"):
        assert img.nodata is None
        assert img.descriptions == (None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rumimm.open(a) as img:
            assert img.nodata == 7


def test_a_copy_of_the_file_and_its_sidecar_keeps_the_metadata(tmp_path):
    import shutil

    a, _ = constant_pair(tmp_path)
    c = tmp_path / "c.rumi"
    shutil.copyfile(a, c)  # a new inode and time: the file is hashed, and its digest matches
    shutil.copyfile(tmp_path / "a.rumi.aux.xml", tmp_path / "c.rumi.aux.xml")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rumimm.open(c) as img:
            assert img.nodata == 7
            assert img.descriptions == ("x", "y")


def test_a_rewrite_racing_a_read_never_pairs_pixels_with_the_other_writes_sidecar(tmp_path):
    """Two writers of one path (equal blobs, different pixels and nodata); each read sees its own pair or a warning."""
    import threading

    path = tmp_path / "r.rumi"
    values = {3: 30, 5: 50}
    stop = threading.Event()

    def writer(v):
        while not stop.is_set():
            rumimm.write(path, np.full((1, 20, 30), v, np.uint16), tile=16, nodata=values[v])

    rumimm.write(path, np.full((1, 20, 30), 3, np.uint16), tile=16, nodata=30)
    threads = [threading.Thread(target=writer, args=(v,)) for v in values]
    for t in threads:
        t.start()
    try:
        mismatched = applied = 0
        for _ in range(150):
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                try:
                    img = rumimm.open(path)
                except (FileNotFoundError, rumimm.RumiError):
                    continue
                with img:
                    pixel = int(img.read(window=((0, 1), (0, 1)))[0, 0, 0])
                    nodata = img.nodata
            if nodata is not None:
                applied += 1
                mismatched += nodata != values[pixel]
            else:
                assert any(issubclass(w.category, RumiWarning) for w in seen)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert mismatched == 0
    assert applied > 0


def test_a_sidecar_gdal_wrote_next_to_a_rumi_eo_file_still_applies(tmp_path):
    """rumi-eo 0.16.0 writes and reads no sidecar; one GDAL wrote next to its file (no binding) is applied."""
    from peer import peer_read, peer_write

    path = tmp_path / "p.rumi"
    array = np.arange(2 * 20 * 30, dtype=np.uint16).reshape(2, 20, 30)
    peer_write(path, array, tile=16)
    assert not (tmp_path / "p.rumi.aux.xml").exists()
    (tmp_path / "p.rumi.aux.xml").write_text(  # what `gdal_edit.py -a_nodata 5` and a band description leave
        "<PAMDataset>\n  <PAMRasterBand band=\"1\">\n    <NoDataValue>5</NoDataValue>\n  </PAMRasterBand>\n"
        "  <PAMRasterBand band=\"2\">\n    <Description>nir</Description>\n    <NoDataValue>5</NoDataValue>\n"
        "  </PAMRasterBand>\n</PAMDataset>\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rumimm.open(path) as img:
            assert img.nodatavals == (5, 5)
            assert img.descriptions == (None, "nir")
    assert np.array_equal(peer_read(path), array)  # and the peer still reads its file
