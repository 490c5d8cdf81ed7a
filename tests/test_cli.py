"""The rumimm command: info, validate and index, in process and once as ``python -m rumimm``."""

from __future__ import annotations

import builtins
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import craft

import rumimm
from rumimm import cli, demo
from rumimm.format import georef
from rumimm.format.blob import Header
from rumimm.reader.validate import build_blob, validate


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    geo = craft((4, 20, 30), 8, "cell", "int16", epsg=32633)
    plain = craft((3, 20, 30), (8, 16), "tile", "float32")
    bad = craft(epsg=32633)
    bad.set_values(34735, [*georef.geokeys(32633)[:11], 3, *georef.geokeys(32633)[12:]])  # raster type 3
    bad.tail = b"\0" * 2
    paths = {
        "geo": geo.write(d / "geo.rumi"),
        "plain": plain.write(d / "plain.rumi"),
        "bad": bad.write(d / "bad.rumi"),
    }
    (d / "geo.blob").write_bytes(geo.blob)
    (d / "plain.blob").write_bytes(plain.blob)
    return d, paths, {"geo": geo, "plain": plain}


def run(capsys, *argv):
    code = cli.main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return code, out, err


def test_info_prints_shape_dtype_grid_frames_crs_and_sizes(capsys, files):
    _d, paths, crafted = files
    code, out, err = run(capsys, "info", paths["geo"])
    assert code == 0 and err == ""
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())  # "label  value"
    c = crafted["geo"]
    size = os.path.getsize(paths["geo"])
    assert lines["shape"].startswith("(4, 20, 30)")
    assert lines["dtype"].startswith("int16")
    assert lines["grid"].startswith("8 x 8 tiles") and "3 down x 4 across" in lines["grid"]
    assert lines["frame unit"] == "cell"
    assert lines["frames"].startswith(f"12 from byte {c.grid.base_frame_offset}")
    assert lines["crs"] == "EPSG:32633 WGS 84 / UTM zone 33N (projected)"
    assert lines["transform"].startswith("(10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)")
    assert lines["file size"] == f"{size:,} bytes"
    assert lines["raw size"] == f"{4 * 20 * 30 * 2:,} bytes"
    assert lines["ratio"].startswith(f"{4 * 20 * 30 * 2 / size:.3f}")
    assert lines["blob size"] == f"{len(c.blob)} bytes"
    assert lines["OpenZL format"] == "24"


def test_info_json_is_one_object_with_every_field(capsys, files):
    d, paths, crafted = files
    code, out, _ = run(capsys, "info", paths["plain"], "--json", "--header", d / "plain.blob")
    assert code == 0
    info = json.loads(out)
    c = crafted["plain"]
    assert info["shape"] == [3, 20, 30] and info["dtype"] == "float32"
    assert info["tile"] == [8, 16] and info["tiles_across"] == 2 and info["tiles_down"] == 3
    assert info["frame_unit"] == "tile" and info["frames"] == 18
    assert info["crs"] is None and info["transform"] is None and info["pixel_is_point"] is False
    assert info["file_size"] == os.path.getsize(paths["plain"]) == Header.parse(c.blob).file_size
    assert info["raw_size"] == 3 * 20 * 30 * 4
    assert info["ratio"] == pytest.approx(info["raw_size"] / info["file_size"])
    assert info["blob_size"] == len(c.blob) and info["format_version"] == 24


def test_info_json_has_the_spec_and_a_string_frame_unit_for_both_specs(capsys, tmp_path):
    """The same keys and types for both specs: "spec" as the text row shows it, "frame_unit" as Image.frame_unit."""
    arr = np.arange(2 * 3 * 32 * 32, dtype=np.uint16).reshape(2, 3, 32, 32)
    rumimm.write(tmp_path / "a.rumi", arr[0], tile=16)
    rumimm.write(tmp_path / "b.rumi", arr, tile=16, spec="0.2", time=["2026-06-01", "2026-06-11"],
                 descriptions=["a", "b", "c"])
    rumimm.write(tmp_path / "c.rumi", arr, tile=16, spec="0.2", unit="cell",
                 time=["2026-06-01", "2026-06-11"], descriptions=["a", "b", "c"])
    want = {"a.rumi": ("0.1", "tile", "tile"), "b.rumi": ("0.2", "h w", "h w (tile frames, frame_unit 0)"),
            "c.rumi": ("0.2", "t b h w", "t b h w (cell frames, frame_unit 4)")}
    for name, (spec, unit, row) in want.items():
        path = tmp_path / name
        code, out, _ = run(capsys, "info", path, "--json")
        info = json.loads(out)
        with rumimm.open(path) as img:
            assert (info["spec"], info["frame_unit"]) == (img.spec, img.frame_unit) == (spec, unit)
        assert cli.describe(path)["spec"] == spec and cli.describe(path)["frame_unit"] == unit
        if spec == "0.2":
            assert info["frame_layout"] == unit and isinstance(info["frame_unit_number"], int)
        else:
            assert "frame_layout" not in info and "frame_unit_number" not in info
        code, out, _ = run(capsys, "info", path)
        lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
        assert code == 0 and lines["spec"] == f"rumi {spec}" and lines["frame unit"] == row


def test_info_opens_the_file_once(capsys, files, monkeypatch):
    d, paths, _ = files
    opened = []
    real_os_open, real_open = os.open, builtins.open

    def os_open(path, *args, **kwargs):
        opened.append(os.fspath(path))
        return real_os_open(path, *args, **kwargs)

    def py_open(file, *args, **kwargs):
        if not isinstance(file, int):
            opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", py_open)
    for argv in (["info", paths["geo"]], ["info", paths["geo"], "--json", "--header", d / "geo.blob"]):
        opened.clear()
        code, out, _ = run(capsys, *argv)
        assert code == 0 and "32633" in out
        assert opened.count(str(paths["geo"])) == 1, opened


def test_info_with_a_header_for_another_file_fails_with_status_2(capsys, files):
    d, paths, _ = files
    code, out, err = run(capsys, "info", paths["plain"], "--header", d / "geo.blob")
    assert code == 2 and out == ""
    assert err.startswith("rumimm: ") and "the blob belongs to another file" in err


def test_info_on_a_broken_file_names_the_first_violation_and_exits_2(capsys, files):
    _, paths, _ = files
    code, out, err = run(capsys, "info", paths["bad"])
    assert code == 2 and out == ""
    assert err == f"rumimm: {paths['bad']}: tag 34735: GTRasterTypeGeoKey is 3, expected 1 (PixelIsArea) or " \
                  "2 (PixelIsPoint)\n"


def test_validate_says_compliant_and_what_it_checked_and_exits_0(capsys, files):
    from rumimm.reader.validate import CHECKED_BLOB, CHECKED_DECODE, CHECKED_HEADERS, CHECKED_MAGIC, CHECKED_PROFILE

    d, paths, _ = files
    code, out, err = run(capsys, "validate", paths["geo"])
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"{paths['geo']}: compliant",
                                *(f"  checked {c}" for c in (CHECKED_PROFILE, CHECKED_MAGIC, CHECKED_HEADERS)),
                                "  readers rumimm, rumi-eo 0.16.0 (from the codecs of frames 0, 6, 11: "
                                "OpenZL built-ins only)"]
    code, out, _ = run(capsys, "validate", paths["geo"], "--header", d / "geo.blob", "--decode")
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"{paths['geo']}: compliant"
    assert f"  checked {CHECKED_DECODE}" in lines and f"  checked {CHECKED_BLOB}" in lines


def test_validate_lists_every_violation_one_per_line_and_exits_1(capsys, files):
    _, paths, _ = files
    code, out, err = run(capsys, "validate", paths["bad"])
    assert code == 1 and err == ""
    lines = [line for line in out.splitlines() if not line.startswith("  checked ")]
    assert len(lines) == 2
    assert all(line.startswith(f"{paths['bad']}: ") for line in lines)
    assert "GTRasterTypeGeoKey is 3" in lines[0] and "2 bytes follow the last frame" in lines[1]


def test_validate_reports_a_mismatched_header_as_a_violation(capsys, files):
    d, paths, _ = files
    code, out, _ = run(capsys, "validate", paths["plain"], "--header", d / "geo.blob")
    assert code == 1 and "the blob belongs to another file" in out


def test_index_writes_the_canonical_blob(capsys, files, tmp_path):
    _, paths, crafted = files
    out_path = tmp_path / "geo.blob"
    code, out, err = run(capsys, "index", paths["geo"], "-o", out_path)
    assert code == 0 and err == ""
    assert out_path.read_bytes() == crafted["geo"].blob == build_blob(paths["geo"])
    assert str(out_path) in out and "12 frames" in out


def test_index_of_a_broken_file_writes_nothing_and_exits_2(capsys, files, tmp_path):
    _, paths, _ = files
    out_path = tmp_path / "bad.blob"
    code, _out, err = run(capsys, "index", paths["bad"], "--output", out_path)
    assert code == 2 and not out_path.exists()
    assert err.startswith(f"rumimm: {paths['bad']}: ")


@pytest.mark.parametrize("argv", [["info", "{missing}"], ["validate", "{missing}"], ["index", "{missing}", "-o", "x"],
                                  ["info", "{geo}", "--header", "{missing}"],
                                  ["index", "{geo}", "-o", "{missing_dir}/x.blob"]])
def test_missing_files_are_reported_on_stderr_with_status_2(capsys, files, tmp_path, argv):
    _, paths, _ = files
    subs = {"missing": tmp_path / "nope.rumi", "geo": paths["geo"], "missing_dir": tmp_path / "no" / "dir"}
    code, out, err = run(capsys, *[a.format(**subs) for a in argv])
    assert code == 2 and out == ""
    assert err.startswith("rumimm: ") and err.count("\n") == 1
    assert ("the directory to write into does not exist" if "missing_dir" in argv[-1] else
            "No such file or directory") in err


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["info"], ["index"], ["info", "--bogus", "x"],
                                  ["index", "x.rumi", "-o", "b", "--hex"], ["demo", "--size", "0"],
                                  ["demo", "--count", "0"], ["demo", "--tile", "0"], ["demo", "--size", "big"],
                                  ["demo", "--out", "/missing/dir"], ["quicklook", "x.rumi", "x.png", "--bands", "1,2"],
                                  ["quicklook", "x.rumi", "x.png", "--bands", "0"], ["convert", "in.tif"],
                                  ["export", "x.rumi", "x.tif", "--tile", "-16"],
                                  ["convert", "a", "b", "--unit", "row"]])
def test_usage_errors_are_one_line_and_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("rumimm") and "error: " in err and "--help)" in err


@pytest.mark.parametrize(("argv", "prog", "extras"), [
    (["info", "{geo}", "--bogus"], "rumimm info", "--bogus"),
    (["info", "--bogus", "{geo}"], "rumimm info", "--bogus"),
    (["info", "{geo}", "{geo}"], "rumimm info", "{geo}"),
    (["validate", "{geo}", "--json"], "rumimm validate", "--json"),
    (["demo", "--size", "16", "-x"], "rumimm demo", "-x"),
    (["--bogus", "info", "{geo}"], "rumimm", "--bogus"),  # an option of rumimm itself, before the command
])
def test_an_unrecognised_argument_is_the_usage_error_of_the_command_it_was_given_to(capsys, files, argv, prog, extras):
    _, paths, _ = files
    code, out, err = run(capsys, *[a.format(geo=paths["geo"]) for a in argv])
    assert (code, out) == (2, "")
    assert err == f"{prog}: error: unrecognized arguments: {extras.format(geo=paths['geo'])} (see {prog} --help)\n"


def test_help_and_version_exit_0(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("info", "validate", "index", "convert", "export", "quicklook", "demo"):
        assert name in out
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.startswith("rumimm ")


def test_subcommands_register_in_one_place():
    assert list(cli.COMMANDS)[:3] == ["info", "validate", "index"]
    seen = []
    cli.register("_probe", "a test command", lambda p: p.add_argument("word"), lambda a: seen.append(a.word) or 5)
    try:
        assert cli.main(["_probe", "hello"]) == 5 and seen == ["hello"]
    finally:
        del cli.COMMANDS["_probe"]


@pytest.mark.slow
def test_python_dash_m_rumimm_runs_the_command_line(files):
    _d, paths, _ = files
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "rumimm", "validate", paths["bad"]], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[0].startswith(f"{paths['bad']}: tag 34735")
    assert len([ln for ln in proc.stdout.splitlines() if not ln.startswith("  checked ")]) == 2 and proc.stderr == ""


def test_the_demo_subcommand_writes_reads_and_checks_every_pixel(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path), "--size", "300", "--tile", "64", "--count", "3"]) == 0
    out, err = capsys.readouterr()
    assert "validate: compliant" in out and err == ""
    assert out.count("exact=True") == 4 and "exact=False" not in out
    assert build_blob(tmp_path / "demo.rumi") == validate(tmp_path / "demo.rumi").blob
    assert "temporary" not in out


def test_the_demo_labels_its_reads_by_what_they_read_and_says_its_file_is_temporary(capsys):
    assert cli.main(["demo", "--size", "100", "--count", "2", "--tile", "64"]) == 0
    out = capsys.readouterr().out
    reads = re.findall(r"read (\d+)x(\d+) .*?-> \((?:\d+, )?(\d+), (\d+)\)", out)
    assert len(reads) == 3 and all(a == c and b == d for a, b, c, d in reads), reads
    path = re.search(r"wrote (\S+) \(a temporary file, deleted at the end; keep it with --out DIR\)", out).group(1)
    assert not os.path.exists(path)


def test_a_small_demo_tile_is_warned_about_in_one_line(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path), "--size", "40", "--count", "1", "--tile", "7"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("rumimm: warning: tile 7 is small") and err.count("\n") == 1


def test_a_demo_larger_than_its_cap_is_refused_before_allocating(capsys):
    code, out, err = run(capsys, "demo", "--size", "100000")
    assert code == 2 and out == "" and err.startswith("rumimm: a 4 x 100000 x 100000 uint16 demo scene is 74.5 GiB")
    with pytest.raises(ValueError) as by_run:
        demo.run(size=100000)
    assert err == f"rumimm: {by_run.value}\n"  # one check, the demo's, reported by the command line
    code, out, err = run(capsys, "demo", "--size", "100000", "--tile", "7")
    assert code == 2 and err == f"rumimm: {by_run.value}\n"  # refused before the small tile is warned about


def test_index_writes_the_blob_to_stdout_or_as_hex(capsysbinary, files):
    _, paths, crafted = files
    assert cli.main(["index", str(paths["geo"])]) == 0
    assert capsysbinary.readouterr().out == crafted["geo"].blob
    assert cli.main(["index", str(paths["geo"]), "--hex"]) == 0
    assert capsysbinary.readouterr().out == crafted["geo"].blob.hex().encode() + b"\n"


def test_index_does_not_write_binary_to_a_terminal(capsys, files, monkeypatch):
    _, paths, _ = files
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    code, out, err = run(capsys, "index", paths["geo"])
    assert code == 2 and out == "" and "-o BLOB" in err and "--hex" in err and err.count("\n") == 1


def test_info_names_the_crs_and_gives_bounds_and_resolution(capsys, files):
    _, paths, _ = files
    code, out, _ = run(capsys, "info", paths["geo"])
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert code == 0 and lines["crs"] == "EPSG:32633 WGS 84 / UTM zone 33N (projected)"
    assert lines["bounds"] == "(500000, 4199800, 500300, 4200000) (left, bottom, right, top)"
    assert lines["resolution"] == "10 x 10 (x, y)"
    code, out, _ = run(capsys, "info", paths["geo"], "--json")
    info = json.loads(out)
    assert info["crs_name"] == "WGS 84 / UTM zone 33N" and info["bounds"] == [500000, 4199800, 500300, 4200000]
    assert info["res"] == [10, 10]


# ------------------------------------------------------------------ convert, export, quicklook
@pytest.fixture
def tif(tmp_path):
    import rasterio
    from affine import Affine

    data = np.random.default_rng(0).integers(0, 4000, (4, 70, 90), dtype=np.uint16)
    path = tmp_path / "in.tif"
    with rasterio.open(path, "w", driver="GTiff", dtype="uint16", count=4, height=70, width=90, crs="EPSG:32633",
                       transform=Affine(10, 0, 500000, 0, -10, 4200000), nodata=0, photometric="minisblack") as ds:
        ds.write(data)
    return path, data


def test_convert_then_export_round_trips_through_the_command_line(capsys, tif, tmp_path):
    import rasterio

    src, data = tif
    code, out, err = run(capsys, "convert", src, tmp_path / "x.rumi", "--tile", "64", "--unit", "cell",
                         "--blob", tmp_path / "x.blob")
    assert code == 0
    assert out.startswith(f"{tmp_path / 'x.rumi'}: ") and f"header blob in {tmp_path / 'x.blob'}" in out
    assert err == ""  # the nodata goes into the sidecar x.rumi.aux.xml
    assert (tmp_path / "x.rumi.aux.xml").is_file()
    assert (tmp_path / "x.blob").read_bytes() == build_blob(tmp_path / "x.rumi")
    code, out, err = run(capsys, "export", tmp_path / "x.rumi", tmp_path / "x.tif", "--header", tmp_path / "x.blob",
                         "--compress", "deflate")
    assert code == 0 and err == "" and out.startswith(f"{tmp_path / 'x.tif'}: GeoTIFF, ")
    with rasterio.open(tmp_path / "x.tif") as ds:
        assert np.array_equal(ds.read(), data) and ds.crs.to_epsg() == 32633 and ds.profile["compress"] == "deflate"
        assert ds.nodata == 0


def test_convert_reads_a_gdal_virtual_path(capsys, tif, tmp_path):
    import zipfile

    src, data = tif
    with zipfile.ZipFile(tmp_path / "t.zip", "w") as z:
        z.write(src, "d.tif")
    vsi = f"/vsizip/{tmp_path / 't.zip'}/d.tif"
    code, out, _err = run(capsys, "convert", vsi, tmp_path / "z.rumi")
    assert code == 0 and out.startswith(f"{tmp_path / 'z.rumi'}: ") and f"from {vsi} in " in out
    assert np.array_equal(rumimm.open(tmp_path / "z.rumi")[:], data)


def test_convert_and_export_errors_are_one_line_with_status_2(capsys, tif, tmp_path):
    src, _ = tif
    (tmp_path / "not.tif").write_bytes(b"not a tiff")
    cases = [
        (["convert", tmp_path / "missing.tif", tmp_path / "y.rumi"], "No such file or directory"),
        (["convert", tmp_path / "not.tif", tmp_path / "y.rumi"], "not.tif"),
        (["convert", src, tmp_path / "y.rumi", "--codec", "bogus"], "codec 'bogus' is not a preset"),
        (["convert", src, tmp_path / "y.rumi", "--crs", "EPSG:5773"], "EPSG:5773"),
        (["export", tmp_path / "missing.rumi", tmp_path / "y.tif"], "No such file or directory"),
        (["export", src, tmp_path / "y.tif"], "in.tif"),
        (["quicklook", tmp_path / "missing.rumi", tmp_path / "y.png"], "No such file or directory"),
    ]
    for argv, text in cases:
        code, out, err = run(capsys, *argv)
        lines = [ln for ln in err.splitlines() if not ln.startswith("rumimm: warning: ")]
        assert code == 2 and out == "" and len(lines) == 1 and text in lines[0], (argv, err)
        assert lines[0].startswith("rumimm: ") and "Traceback" not in err
    assert not list(tmp_path.glob("y.*")) and not list(tmp_path.glob(".y.*"))


def test_convert_checks_the_blob_path_first_writes_the_blob_of_a_rumi_source_and_never_over_its_source(
        capsys, tif, tmp_path):
    src, _ = tif
    (tmp_path / "dir").mkdir()
    for blob, text in ((tmp_path / "nodir" / "b.blob", "the directory to write into does not exist"),
                       (tmp_path / "dir", "is a directory; name the file to write")):
        code, _, err = run(capsys, "convert", src, tmp_path / "c.rumi", "--blob", blob)
        assert code == 2 and text in err and str(blob) in err, err
        assert not (tmp_path / "c.rumi").exists()  # refused before anything was written
    code, _, _ = run(capsys, "convert", src, tmp_path / "c.rumi", "--tile", "64")
    assert code == 0
    code, _, err = run(capsys, "convert", tmp_path / "c.rumi", tmp_path / "d.rumi", "--codec", "fast", "--blob",
                         tmp_path / "d.blob")
    assert code == 0 and (tmp_path / "d.blob").read_bytes() == rumimm.build_blob(tmp_path / "d.rumi"), err
    copy = tmp_path / "copy.tif"
    copy.write_bytes(Path(src).read_bytes())
    code, _, err = run(capsys, "convert", copy, copy, "--tile", "64")
    assert code == 2 and "dest must not be the source" in err
    assert copy.read_bytes() == Path(src).read_bytes()
    code, _, err = run(capsys, "convert", tmp_path / "c.rumi", "--to", copy)
    assert code == 2 and "the destination is a file, not a directory" in err, err


def test_the_command_line_shows_a_progress_bar_only_on_a_terminal(capsys, tif, tmp_path, monkeypatch):
    import rumimm.progress

    src, _ = tif
    run(capsys, "convert", src, tmp_path / "a.rumi", "--tile", "64")
    assert "convert" not in capsys.readouterr().err
    monkeypatch.setattr(rumimm.progress, "on_terminal", lambda stream=None: True)
    code, _, err = run(capsys, "convert", src, tmp_path / "b.rumi", "--tile", "64")
    assert code == 0 and "convert" in err


def test_quicklook_writes_a_stretched_png(capsys, tif, tmp_path):
    from PIL import Image as PILImage

    from rumimm.integrations.preview import stretch

    src, data = tif
    run(capsys, "convert", src, tmp_path / "x.rumi", "--tile", "64")
    code, out, err = run(capsys, "quicklook", tmp_path / "x.rumi", tmp_path / "x.png", "--bands", "3,2,1",
                         "--max-size", "30")
    assert code == 0 and out == f"{tmp_path / 'x.png'}: 30 x 24 PNG of {tmp_path / 'x.rumi'}\n"
    with PILImage.open(tmp_path / "x.png") as png:
        assert png.mode == "RGB" and png.size == (30, 24)
        pixels = np.asarray(png)
    assert pixels.min() == 0 and pixels.max() == 255
    assert np.array_equal(pixels, np.moveaxis(stretch(data[[2, 1, 0], ::3, ::3]), 0, -1))
    code, _, err = run(capsys, "quicklook", tmp_path / "x.rumi", tmp_path / "y.png", "--bands", "5")
    assert code == 2 and err == (f"rumimm quicklook: error: argument --bands: band 5 does not exist; "
                                 f"{tmp_path / 'x.rumi'} has 4 bands (numbered 1 to 4) (see rumimm quicklook --help)\n")


# ------------------------------------------------------------------ frictions of issue 21
def test_convert_of_a_corrupt_tiff_names_the_file_and_gdals_reason(capsys, tmp_path):
    import rasterio

    data = np.random.default_rng(1).integers(0, 4000, (1, 64, 64), dtype=np.uint16)
    with rasterio.open(tmp_path / "t.tif", "w", driver="GTiff", dtype="uint16", count=1, height=64, width=64,
                       tiled=True, blockxsize=16, blockysize=16, compress="deflate") as ds:
        ds.write(data)
    raw = bytearray((tmp_path / "t.tif").read_bytes())
    raw[-600:] = b"\xff" * 600
    (tmp_path / "corrupt.tif").write_bytes(bytes(raw))
    code, out, err = run(capsys, "convert", tmp_path / "corrupt.tif", tmp_path / "c.rumi")
    assert code == 2 and out == ""
    assert err.startswith(f"rumimm: {tmp_path / 'corrupt.tif'}: GDAL cannot read rows ")
    assert "See previous exception" not in err and len(err.splitlines()) == 1
    assert not (tmp_path / "c.rumi").exists()


def test_export_to_a_directory_fails_before_writing_and_names_the_directory(capsys, tif, tmp_path):
    src, _ = tif
    run(capsys, "convert", src, tmp_path / "x.rumi", "--tile", "64")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, _out, err = run(capsys, "export", tmp_path / "x.rumi", out_dir)
    assert code == 2 and err == f"rumimm: {out_dir}: is a directory; name the file to write\n"
    assert os.listdir(out_dir) == []


def test_info_of_a_directory_or_a_fifo_says_what_it_is(capsys, tmp_path):
    code, _, err = run(capsys, "info", tmp_path)
    assert code == 2 and err == f"rumimm: {tmp_path}: is a directory, not a rumi file\n"
    os.mkfifo(tmp_path / "pipe")
    code, _, err = run(capsys, "info", tmp_path / "pipe")  # opening it must not wait for a writer
    assert code == 2 and err == f"rumimm: {tmp_path / 'pipe'}: not a regular file (a FIFO, socket or device)\n"


def test_a_geographic_crs_on_a_metre_grid_is_refused(capsys, tmp_path):
    import rasterio
    from affine import Affine

    with rasterio.open(tmp_path / "m.tif", "w", driver="GTiff", dtype="uint8", count=1, height=8, width=8,
                       transform=Affine(10, 0, 500000, 0, -10, 4200000)) as ds:  # a transform, no CRS
        ds.write(np.zeros((1, 8, 8), np.uint8))
    code, _, err = run(capsys, "convert", tmp_path / "m.tif", tmp_path / "m.rumi", "--crs", "4326")
    assert code == 2 and "EPSG:4326 is geographic (degrees), but the transform puts the image at x 500000" in err
    code, _, err = run(capsys, "convert", tmp_path / "m.tif", tmp_path / "m.rumi", "--drop-georef")
    assert code == 0 and err == ""
    with rumimm.open(tmp_path / "m.rumi") as img:
        assert img.crs is None


def test_argument_errors_come_before_any_warning_about_the_file(capsys, tmp_path):
    import rasterio
    from affine import Affine

    with rasterio.open(tmp_path / "o.tif", "w", driver="GTiff", dtype="uint8", count=1, height=64, width=64,
                       crs="EPSG:32633", transform=Affine(10, 0, 500000, 0, -10, 4200000)) as ds:
        ds.write(np.zeros((1, 64, 64), np.uint8))
        ds.build_overviews([2])  # a warning: overviews are not kept
    code, _, err = run(capsys, "convert", tmp_path / "o.tif", tmp_path / "o.rumi", "--codec", "bogus")
    assert code == 2 and err.startswith("rumimm: codec 'bogus' is not a preset") and "warning" not in err
    code, _, err = run(capsys, "convert", tmp_path / "o.tif", tmp_path / "o.rumi")
    assert code == 0 and err == (f"rumimm: warning: {tmp_path / 'o.tif'}: rumi cannot hold overviews (1 level): "
                                 f"not in {tmp_path / 'o.rumi'}\n")


@pytest.mark.slow
def test_a_closed_output_pipe_ends_quietly(tmp_path):
    path = tmp_path / "x.rumi"
    rumimm.write(path, np.zeros((1, 8, 8), np.uint8), tile=8)
    r, w = os.pipe()
    os.close(r)  # what `rumimm info x | head -1` leaves once head has its line
    proc = subprocess.run([sys.executable, "-m", "rumimm", "info", str(path)], stdout=w, stderr=subprocess.PIPE,
                          cwd=Path(rumimm.__file__).parent.parent)
    os.close(w)
    assert proc.stderr == b"" and proc.returncode == 141  # was "rumimm: Broken pipe", status 2


def test_quicklook_writes_the_format_its_name_says_or_refuses_it(capsys, tif, tmp_path):
    from PIL import Image as PILImage

    src, _ = tif
    run(capsys, "convert", src, tmp_path / "x.rumi", "--tile", "64")
    code, out, _ = run(capsys, "quicklook", tmp_path / "x.rumi", tmp_path / "x.jpg")
    assert code == 0 and out.endswith(f"JPEG of {tmp_path / 'x.rumi'}\n")
    with PILImage.open(tmp_path / "x.jpg") as pic:
        assert pic.format == "JPEG"
    code, _, err = run(capsys, "quicklook", tmp_path / "x.rumi", tmp_path / "x.gif")
    assert code == 2 and err.startswith("rumimm quicklook: error: argument OUT: ") and "(got '.gif')" in err
    assert not (tmp_path / "x.gif").exists()


def test_clean_of_a_missing_path_is_an_error_and_of_a_clean_folder_says_so(capsys, tmp_path):
    code, _, err = run(capsys, "clean", tmp_path / "missing")
    assert code == 2 and err == f"rumimm: {tmp_path / 'missing'}: no such file or directory (give a directory or a " \
                                ".rumi file)\n"
    code, out, _ = run(capsys, "clean", tmp_path)
    assert code == 0 and out == f"{tmp_path}: no temporary files of killed writers\n"
    code, out, _ = run(capsys, "clean", tmp_path / "gone.rumi")  # a .rumi file may be gone: its temp files are not
    assert code == 0


def test_stretch_maps_percentiles_to_0_and_255_and_non_finite_to_0():
    from rumimm.integrations.preview import stretch

    band = np.arange(101, dtype=np.float32).reshape(1, 1, 101)
    band[0, 0, 50] = np.nan
    out = stretch(band, (10, 90))
    assert out.dtype == np.uint8 and out[0, 0, 50] == 0
    assert out[0, 0, :11].tolist() == [0] * 11 and out[0, 0, 91:].tolist() == [255] * 10
    assert out[0, 0, 49] == round((49 - 10) / 80 * 255)
    assert stretch(np.full((1, 2, 2), 7, np.uint16)).tolist() == [[[0, 0], [0, 0]]]
    with pytest.raises(ValueError, match="real samples"):
        stretch(np.zeros((1, 2, 2), np.complex64))
    with pytest.raises(ValueError, match="percentiles"):
        stretch(band, (90, 10))


@pytest.mark.parametrize("codec", ["transpose", "store", "geozl-planar"])
def test_info_recognises_the_codec_preset_that_wrote_the_frames(capsys, tmp_path, codec):
    data = np.random.default_rng(3).integers(0, 900, (2, 40, 56), dtype=np.uint16)
    import rumimm

    rumimm.write(tmp_path / "c.rumi", data, tile=32, codec=codec)
    code, out, _ = run(capsys, "info", tmp_path / "c.rumi")
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert code == 0 and lines["codec"] == f"preset {codec!r}"
    assert json.loads(run(capsys, "info", tmp_path / "c.rumi", "--json")[1])["codec"] == codec


def test_info_says_when_frames_come_from_another_writers_graph(capsys, tmp_path):
    import openzl.ext as zl

    import rumimm

    def zigzag_then_compress(compressor):  # a graph no preset builds
        return zl.nodes.Zigzag().build_graph(compressor, [zl.graphs.Compress().parameterize(compressor)])

    data = np.random.default_rng(4).integers(0, 900, (1, 40, 56), dtype=np.uint16)
    rumimm.write(tmp_path / "p.rumi", data, tile=32, codec=zigzag_then_compress)
    code, out, _ = run(capsys, "info", tmp_path / "p.rumi")
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert code == 0 and lines["codec"] == "not a rumimm preset (another writer's graph)", out


@pytest.mark.slow
def test_the_command_line_imports_its_optional_packages_only_for_the_commands_that_need_them():
    code = ("import sys; from rumimm.cli import main; main(['--help']); "
            "heavy = ('rumimm.writer.writer', 'rumimm.integrations.geotiff', 'rumimm.integrations.preview', "
            "'rasterio', 'affine', 'PIL', 'tqdm'); "
            "print([m for m in heavy if m in sys.modules])")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr


def test_info_shows_the_sidecars_nodata_and_descriptions(capsys, tmp_path):
    path = tmp_path / "m.rumi"
    rumimm.write(path, np.zeros((2, 8, 8), np.float32), tile=8, nodata=float("nan"), descriptions=["a", "b"])
    code, out, _ = run(capsys, "info", path)
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert code == 0 and lines["nodata"] == "nan, nan" and lines["descriptions"] == "a, b"
    code, out, _ = run(capsys, "info", path, "--json")
    d = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))  # NaN as GDAL writes it
    assert d["nodata"] == ["nan", "nan"] and d["descriptions"] == ["a", "b"]


def test_demo_takes_the_band_count_as_count_and_the_old_bands_with_a_warning(capsys, tmp_path):
    assert cli.main(["demo", "--out", str(tmp_path), "--size", "64", "--tile", "64", "--bands", "2"]) == 0
    err = capsys.readouterr().err
    assert "rumimm: warning: demo --bands N is the band count, now --count N" in err
    with rumimm.open(tmp_path / "demo.rumi") as img:
        assert img.count == 2


@pytest.mark.parametrize(("codec", "fmt", "readers", "codecs"), [
    ("auto", "0.1", ["rumimm", "rumi-eo 0.16.0"], []),
    ("fast", "0.1", ["rumimm", "rumi-eo 0.16.0"], ["delta_n", "pfor"]),
    ("small", "0.1", ["rumimm"], ["med_zigzag"]),
    (None, "0.2", ["rumimm", "rumi-eo 0.26.1"], ["delta_n", "pfor"]),
    ("small", "0.2", ["rumimm", "rumi-eo 0.26.1"], ["med_zigzag"]),
])
def test_info_and_validate_name_the_readers_from_the_codecs_of_sampled_frames(capsys, tmp_path, codec, fmt, readers,
                                                                             codecs):
    from rumimm.synthetic import eo_scene

    path = tmp_path / "r.rumi"
    kw = {"spec": "0.2", "descriptions": ["a", "b"], "time": ["2026-01-01"]} if fmt == "0.2" else {}
    rumimm.write(path, eo_scene(2, 48, 80, "uint16"), tile=16, codec=codec, **kw)  # 30 frames
    code, out, _ = run(capsys, "info", path, "--json")
    info = json.loads(out)
    assert code == 0 and info["readers"] == readers and info["codecs"] == codecs
    assert info["sampled_frames"] == [0, 15, 29]
    code, out, _ = run(capsys, "info", path)
    lines = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert lines["readers"] == f"{', '.join(readers)} (from the codecs of frames 0, 15, 29 of 30)"
    assert lines["geozl codecs"] == (", ".join(codecs) or "none (OpenZL built-ins only)")
    code, out, _ = run(capsys, "validate", path)
    assert code == 0 and f"  readers {', '.join(readers)} (from the codecs of frames 0, 15, 29: " in out
    rep = validate(path)
    assert list(rep.readers) == readers and sorted(rep.codecs) == codecs and rep.sampled_frames == (0, 15, 29)


# -- one message per kind of bad input, whichever command meets it (issue "edges a user hits") ----
@pytest.fixture(scope="module")
def bad_inputs(tmp_path_factory):
    """{kind: path} of the inputs every command must refuse alike."""
    rasterio = pytest.importorskip("rasterio")
    d = tmp_path_factory.mktemp("bad")
    (d / "dir").mkdir()
    (d / "empty.rumi").write_bytes(b"")
    (d / "text.txt").write_text("hello world\n" * 10)
    (d / "short.txt").write_bytes(b"hello\n")  # shorter than a BigTIFF header, and no TIFF either
    (d / "short.tif").write_bytes(b"II+\x00\x08\x00")  # a TIFF's first bytes, cut short
    os.mkfifo(d / "fifo.rumi")
    with rasterio.open(d / "classic.tif", "w", driver="GTiff", width=32, height=32, count=1, dtype="uint8") as ds:
        ds.write(np.ones((1, 32, 32), np.uint8))
    rumimm.write(d / "good.rumi", np.arange(2 * 64 * 64, dtype=np.uint16).reshape(2, 64, 64), tile=16)
    data = (d / "good.rumi").read_bytes()
    (d / "trunc.rumi").write_bytes(data[:-100])
    return {"missing": d / "missing.rumi", "directory": d / "dir", "empty": d / "empty.rumi", "text": d / "text.txt",
            "short text": d / "short.txt", "short tiff": d / "short.tif", "fifo": d / "fifo.rumi",
            "classic": d / "classic.tif", "truncated": d / "trunc.rumi", "out": d}


#: kind -> (the whole message after the path, whether commands that take any raster accept it)
NOT_TIFF = r": not a TIFF file \(starts with b'he', expected b'II'\)(, nor a raster format GDAL reads)?"
BAD_INPUT = {
    "missing": (r": No such file or directory", False),
    "directory": (r": is a directory, not a rumi file", False),
    "fifo": (r": not a regular file \(a FIFO, socket or device\)", False),
    "empty": (r": file is empty; expected a BigTIFF header", False),
    "text": (NOT_TIFF, False),
    "short text": (NOT_TIFF, False),  # not a TIFF whatever its length
    "short tiff": (r": file is 6 bytes, shorter than the 16-byte BigTIFF header", False),
    "classic": (r": file is classic TIFF \(version 42\); rumi files are BigTIFF \(version 43\)", True),
    "truncated": (r": last frame ends at byte \d+ but the file has \d+ bytes \(truncated\)", False),
}
COMMANDS = {
    "info": (lambda p, o: ["info", p], False),
    "validate": (lambda p, o: ["validate", p], False),
    "index": (lambda p, o: ["index", p, "--hex"], False),
    "convert": (lambda p, o: ["convert", p, str(o / "c.rumi")], True),
    "convert --codec": (lambda p, o: ["convert", p, str(o / "k.rumi"), "--codec", "fast"], True),
    "export": (lambda p, o: ["export", p, str(o / "e.tif")], False),
    "quicklook": (lambda p, o: ["quicklook", p, str(o / "q.png")], False),
    "profile": (lambda p, o: ["profile", p, "--budget", "1", "--samples", "1", "--no-geozl"], True),
}


@pytest.mark.parametrize("kind", sorted(BAD_INPUT))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_kind_of_bad_input_gets_one_message_and_exit_status_in_every_command(bad_inputs, command, kind, capsys):
    words, raster_ok = BAD_INPUT[kind]
    argv, takes_rasters = COMMANDS[command]
    path = str(bad_inputs[kind])
    status = cli.main(argv(path, bad_inputs["out"]))
    out, err = capsys.readouterr()
    if raster_ok and takes_rasters:
        assert status == 0, err
        return
    if command == "validate" and kind in ("text", "short text", "short tiff", "classic", "truncated"):
        assert status == 1  # violations of a file: exit 1, on stdout
        assert re.fullmatch(re.escape(path) + words.removesuffix("(, nor a raster format GDAL reads)?"),
                            out.splitlines()[0]), out
        return
    assert status == 2
    assert err.count("\n") == 1, err  # one line, whatever warned before
    line = err.strip()
    assert re.fullmatch(re.escape(f"rumimm: {path}") + words, line), line  # the words exactly, nothing before
    assert words.endswith("GDAL reads)?") or "GDAL" not in line, line  # only a file GDAL does not read names GDAL
    assert "not recognized as being in a supported file format" not in err  # GDAL's words never reach the user
    assert "Read error" not in err


@pytest.mark.parametrize("command", ["export", "quicklook", "index"])
def test_an_output_in_a_missing_directory_gets_the_message_convert_gives(bad_inputs, command, capsys):
    good = str(bad_inputs["out"] / "good.rumi")
    dest = str(bad_inputs["out"] / "nowhere" / "x.out")
    argv = {"export": ["export", good, dest], "quicklook": ["quicklook", good, dest + ".png"],
            "index": ["index", good, "-o", dest]}[command]
    assert cli.main(argv) == 2
    assert cli.main(["convert", str(bad_inputs["classic"]), dest + ".rumi"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert all(line.endswith(": the directory to write into does not exist") for line in err), err


@pytest.mark.parametrize("kind", ["text", "classic"])
def test_clean_of_a_file_that_is_neither_a_directory_nor_rumi_fails(bad_inputs, kind, capsys):
    assert cli.main(["clean", str(bad_inputs[kind])]) == 2
    assert "not a directory nor a .rumi file" in capsys.readouterr().err


# -- docs/cli.md's transcripts are what the commands print -------------------------------------
def _transcript(command: str) -> list[str]:
    """The lines docs/cli.md shows after ``$ <command>`` in a console block, up to the next prompt."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = lines.index(f"$ {command}") + 1
    out = []
    for line in lines[start:]:
        if line.startswith(("$ ", "```")):
            break
        out.append(line)
    return out


def test_the_info_transcript_shows_every_row_info_prints(tmp_path, capsys):
    path = tmp_path / "s2.rumi"
    rumimm.write(path, np.zeros((4, 60, 80), np.uint16), tile=32, transform=(10.0, 0, 399960.0, 0, -10.0, 5000040.0),
                 crs=32632)
    assert cli.main(["info", str(path)]) == 0
    printed = [line.split("  ")[0] for line in capsys.readouterr().out.splitlines()]
    shown = [line.split("  ")[0] for line in _transcript("rumimm info s2.rumi")]
    assert shown == printed


@pytest.mark.parametrize("command", ["rumimm convert scene.rumi scene_transpose.rumi --codec fastest",
                                     "rumimm demo --size 0", "rumimm info missing.rumi",
                                     "rumimm info s2.rumi --bogus"])
def test_an_error_transcript_is_what_the_command_prints(tmp_path, monkeypatch, capsys, command):
    monkeypatch.chdir(tmp_path)
    rumimm.write("scene.rumi", np.zeros((1, 16, 16), np.uint16), tile=16)
    status = cli.main(command.split()[1:])
    assert status == 2
    assert capsys.readouterr().err.splitlines() == _transcript(command)


# -- the library the command renders: reader.inputs, integrations.conversion ----------------------------
def test_classify_tells_rumi_files_tiffs_and_other_files_apart(bad_inputs):
    from rumimm.reader.inputs import classify

    good = classify(bad_inputs["out"] / "good.rumi")
    assert (good.kind, good.spec) == ("rumi", "0.1")
    assert classify(bad_inputs["classic"]).kind == "tiff"
    assert classify(bad_inputs["text"]).kind == "other"
    assert classify(bad_inputs["truncated"], walk=False).kind == "rumi"  # what validate reports itself
    assert classify("s3://bucket/x.rumi") is None  # a remote URI: left to the remote reader
    with pytest.raises(rumimm.FormatError, match="truncated"):
        classify(bad_inputs["truncated"])
    with pytest.raises(rumimm.FormatError, match="not a regular file"):
        classify(bad_inputs["fifo"])  # refused without waiting for a writer


@pytest.mark.parametrize(("spec", "codec", "fmt", "target"), [
    ("0.1", None, None, "0.2"), ("0.2", None, None, "0.1"), ("0.1", "fast", None, "0.1"), ("0.2", "fast", None, "0.2"),
    ("0.1", "fast", "0.2", "0.2"), ("0.2", None, "0.2", "0.2"),
])
def test_a_rumi_source_is_copied_to_the_other_spec_or_re_encoded_in_its_own(spec, codec, fmt, target):
    from rumimm.integrations.conversion import rumi_target

    assert rumi_target(spec, codec, fmt) == target


def test_convert_any_says_what_it_did(bad_inputs, tmp_path):
    from rumimm.integrations.conversion import convert_any

    done = convert_any(bad_inputs["out"] / "good.rumi", tmp_path / "a.rumi", codec="fast")
    assert (done.source_spec, done.target_spec, done.recoded) == ("0.1", "0.1", True)
    done = convert_any(bad_inputs["classic"], tmp_path / "b.rumi", tile=64)
    assert (done.source_spec, done.target_spec, done.recoded) == (None, "0.1", False)
    with pytest.raises(rumimm.RumiError, match="pass --time ISO"):
        convert_any(bad_inputs["out"] / "good.rumi", tmp_path / "c.rumi", spec="0.2")


def test_info_of_a_file_with_a_fifo_as_its_sidecar_warns_and_ends(tmp_path, capsys):
    path = tmp_path / "f.rumi"
    rumimm.write(path, np.zeros((1, 16, 16), np.uint8), tile=16)
    os.mkfifo(tmp_path / "f.rumi.aux.xml")  # a blocking open would wait for a writer forever
    assert cli.main(["info", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "rumimm: warning: " in err and "not a regular file" in err
    assert re.search(r"^nodata +none$", out, re.M)


def test_the_validate_and_index_transcripts_are_what_the_commands_print(tmp_path, monkeypatch, capsys):
    from rumimm.synthetic import eo_scene

    monkeypatch.chdir(tmp_path)
    blob = rumimm.write("s2.rumi", eo_scene(bands=4, height=600, width=800, dtype="uint16", seed=0), tile=256,
                        transform=(10.0, 0.0, 399960.0, 0.0, -10.0, 5000040.0), crs=32632)
    Path("s2.blob").write_bytes(blob)
    for command in ("rumimm validate s2.rumi --header s2.blob", "rumimm index s2.rumi -o s2.blob"):
        assert cli.main(command.split()[1:]) == 0
        assert capsys.readouterr().out.splitlines() == _transcript(command)


def test_index_output_refuses_raw_bytes_on_a_terminal_and_writes_a_file(bad_inputs, tmp_path):
    from rumimm.reader.index_output import blob_destination, write_index

    assert [blob_destination("b", False, True), blob_destination(None, True, True),
            blob_destination(None, False, False)] == ["file", "hex", "stdout"]
    with pytest.raises(rumimm.RumiError, match="the header blob is binary"):
        blob_destination(None, False, True)
    done = write_index(bad_inputs["out"] / "good.rumi", tmp_path / "good.blob")
    assert (tmp_path / "good.blob").read_bytes() == done.blob == build_blob(bad_inputs["out"] / "good.rumi")
    assert done.n_frames == 2 * 4 * 4


def test_clean_targets_are_directories_and_rumi_paths_existing_or_not(bad_inputs):
    from rumimm.reader.inputs import check_clean_target

    check_clean_target(bad_inputs["directory"])
    check_clean_target(bad_inputs["out"] / "gone.rumi")
    with pytest.raises(FileNotFoundError, match=r"give a directory or a \.rumi file"):
        check_clean_target(bad_inputs["out"] / "gone.txt")
    with pytest.raises(rumimm.FormatError, match=r"not a directory nor a \.rumi file"):
        check_clean_target(bad_inputs["text"])


def test_quicklook_bands_are_one_based_and_checked_against_the_file():
    from rumimm.integrations.preview import BandNumberError, one_based_bands

    assert one_based_bands([3, 2, 1], 4, "s.rumi") == [2, 1, 0]
    assert one_based_bands(None, 4, "s.rumi") is None
    with pytest.raises(BandNumberError, match=r"band 5 does not exist; s.rumi has 4 bands \(numbered 1 to 4\)"):
        one_based_bands([5], 4, "s.rumi")
