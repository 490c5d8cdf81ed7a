"""The rumimm command: info, validate and index, in process and once as ``python -m rumimm``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import craft

from rumimm import cli, georef
from rumimm.blob import Header
from rumimm.validate import index, validate


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
    d, paths, crafted = files
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
    assert lines["crs"] == "EPSG:32633 (projected)"
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


def test_info_with_a_header_for_another_file_fails_with_status_2(capsys, files):
    d, paths, _ = files
    code, out, err = run(capsys, "info", paths["plain"], "--header", d / "geo.blob")
    assert code == 2 and out == ""
    assert err.startswith("rumimm: ") and "header blob field" in err


def test_info_on_a_broken_file_names_the_first_violation_and_exits_2(capsys, files):
    _, paths, _ = files
    code, out, err = run(capsys, "info", paths["bad"])
    assert code == 2 and out == ""
    assert err == f"rumimm: {paths['bad']}: tag 34735: GTRasterTypeGeoKey is 3, expected 1 (PixelIsArea) or " \
                  "2 (PixelIsPoint)\n"


def test_validate_says_compliant_and_exits_0(capsys, files):
    d, paths, _ = files
    assert run(capsys, "validate", paths["geo"]) == (0, f"{paths['geo']}: compliant\n", "")
    assert run(capsys, "validate", paths["geo"], "--header", d / "geo.blob", "--decode")[:2] == (
        0, f"{paths['geo']}: compliant\n")


def test_validate_lists_every_violation_one_per_line_and_exits_1(capsys, files):
    _, paths, _ = files
    code, out, err = run(capsys, "validate", paths["bad"])
    assert code == 1 and err == ""
    lines = out.splitlines()
    assert len(lines) == 2
    assert all(line.startswith(f"{paths['bad']}: ") for line in lines)
    assert "GTRasterTypeGeoKey is 3" in lines[0] and "2 bytes follow the last frame" in lines[1]


def test_validate_reports_a_mismatched_header_as_a_violation(capsys, files):
    d, paths, _ = files
    code, out, _ = run(capsys, "validate", paths["plain"], "--header", d / "geo.blob")
    assert code == 1 and "header blob field" in out


def test_index_writes_the_canonical_blob(capsys, files, tmp_path):
    _, paths, crafted = files
    out_path = tmp_path / "geo.blob"
    code, out, err = run(capsys, "index", paths["geo"], "-o", out_path)
    assert code == 0 and err == ""
    assert out_path.read_bytes() == crafted["geo"].blob == index(paths["geo"])
    assert str(out_path) in out and "12 frames" in out


def test_index_of_a_broken_file_writes_nothing_and_exits_2(capsys, files, tmp_path):
    _, paths, _ = files
    out_path = tmp_path / "bad.blob"
    code, out, err = run(capsys, "index", paths["bad"], "--output", out_path)
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
    assert "No such file or directory" in err


@pytest.mark.parametrize("argv", [[], ["frobnicate"], ["info"], ["index", "x.rumi"], ["info", "--bogus", "x"]])
def test_usage_errors_exit_2(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert "usage: rumimm" in err


def test_help_and_version_exit_0(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for name in ("info", "validate", "index"):
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


def test_python_dash_m_rumimm_runs_the_command_line(files):
    d, paths, _ = files
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "rumimm", "validate", paths["bad"]], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 1
    assert proc.stdout.splitlines()[0].startswith(f"{paths['bad']}: tag 34735")
    assert len(proc.stdout.splitlines()) == 2 and proc.stderr == ""


def test_the_demo_subcommand_writes_reads_and_checks_every_pixel(tmp_path, capsys):
    assert cli.main(["demo", "--out", str(tmp_path), "--size", "300", "--tile", "64", "--bands", "3"]) == 0
    out = capsys.readouterr().out
    assert "validate: compliant" in out
    assert out.count("exact=True") == 4 and "exact=False" not in out
    assert index(tmp_path / "demo.rumi") == validate(tmp_path / "demo.rumi").blob
