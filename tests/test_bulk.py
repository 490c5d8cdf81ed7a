"""rumimm.convert_many and ``rumimm convert SRC... --to DIR``: many files, resumable, errors listed."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import rasterio
from affine import Affine
from conftest import same_bits

import rumimm
from rumimm.synthetic import eo_scene

UTM = Affine(10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)


def make_tif(path, array, *, cog=False):
    b, h, w = array.shape
    profile = dict(driver="COG" if cog else "GTiff", dtype=array.dtype.name, count=b, height=h, width=w,
                   crs="EPSG:32633", transform=UTM)
    if not cog:
        profile.update(tiled=True, blockxsize=32, blockysize=32, photometric="minisblack")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rasterio.open(path, "w", **profile) as ds:
            ds.write(array)
    return str(path)


@pytest.fixture
def sources(tmp_path):
    """Three GeoTIFFs (one a COG), a rumi file and a file that is no raster, in ``src/``; an empty ``out/``."""
    src = tmp_path / "src"
    src.mkdir()
    (tmp_path / "out").mkdir()
    arrays = {}
    for i in range(3):
        arrays[f"t{i}"] = eo_scene(2, 70 + i, 90, "uint16", seed=i)
        make_tif(src / f"t{i}.tif", arrays[f"t{i}"], cog=i == 2)
    arrays["r"] = eo_scene(3, 40, 50, "int16", seed=9)
    rumimm.write(src / "r.rumi", arrays["r"], tile=16, transform=tuple(UTM)[:6], crs=32633, threads=1)
    (src / "bad.tif").write_bytes(b"not a tiff at all")
    return src, tmp_path / "out", arrays


def _check_outputs(out, arrays, names):
    for name in names:
        with rumimm.open(out / f"{name}.rumi") as img:
            assert same_bits(img[:], arrays[name]), name
            assert img.crs == "EPSG:32633"


@pytest.mark.parametrize("jobs", [1, 2])
def test_many_files_one_output_each_errors_listed_and_a_catalog(sources, jobs):
    src, out, arrays = sources
    seen = []
    result = rumimm.convert_many(src, out, tile=32, spec="0.1", jobs=jobs, progress=lambda d, t: seen.append((d, t)))
    names = ["r", "t0", "t1", "t2"]
    assert result.written == [str(out / f"{n}.rumi") for n in names] and result.skipped == []
    assert [s for s, _ in result.errors] == [str(src / "bad.tif")]
    assert result.errors[0][1].endswith("bad.tif: not a TIFF file (starts with b'no', expected b'II'), nor a raster "
                                        "format GDAL reads")  # rumimm's message, as rumimm convert gives, not GDAL's
    assert seen[-1] == (5, 5) and len(seen) == 5
    _check_outputs(out, arrays, names)
    table = rumimm.read_catalog(result.catalog)
    assert result.catalog == str(out / "catalog.parquet")
    assert sorted(table.column("path").to_pylist()) == result.outputs
    assert sorted(os.listdir(out)) == ["catalog.parquet", *(f"{n}.rumi" for n in names)]


def test_a_rerun_skips_finished_outputs_and_redoes_partial_ones(sources):
    src, out, arrays = sources
    first = rumimm.convert_many([src / "t0.tif", src / "t1.tif"], out, tile=32, jobs=1)
    mtime = os.stat(out / "t0.rumi").st_mtime_ns
    (out / "t1.rumi").write_bytes(b"garbage from elsewhere")  # not a rumi file: converted again
    stale = out / ".t2.rumi.rumimm-999999-abcdef12.tmp"  # a killed run's temporary file (dead pid)
    stale.write_bytes(b"partial")
    again = rumimm.convert_many(sorted(src.glob("t*.tif")), out, tile=32, jobs=1)
    assert again.skipped == [str(out / "t0.rumi")] and again.errors == []
    assert again.written == [str(out / "t1.rumi"), str(out / "t2.rumi")]
    assert os.stat(out / "t0.rumi").st_mtime_ns == mtime and not stale.exists()
    _check_outputs(out, arrays, ["t0", "t1", "t2"])
    assert len(rumimm.read_catalog(again.catalog)) == 3 and first.catalog == again.catalog
    forced = rumimm.convert_many([src / "t0.tif"], out, tile=32, jobs=1, overwrite=True, catalog=None)
    assert forced.written == [str(out / "t0.rumi")] and forced.catalog is None


def test_rumi_sources_convert_to_the_other_spec(sources):
    src, out, arrays = sources
    result = rumimm.convert_many([src / "r.rumi"], out, time=["2026-01-01"], jobs=1)
    assert result.errors == []
    with rumimm.open(out / "r.rumi") as img:
        assert img.header.spec == "0.2" and same_bits(img[:], arrays["r"])


def test_bad_destinations_and_names_are_refused_before_any_work(sources, tmp_path):
    src, out, _ = sources
    with pytest.raises(FileNotFoundError, match=r"destination directory does not exist.*nowhere"):
        rumimm.convert_many(src, tmp_path / "nowhere", jobs=1)
    other = tmp_path / "other"
    other.mkdir()
    make_tif(other / "t0.tif", eo_scene(1, 8, 8, "uint8", seed=1))
    with pytest.raises(rumimm.RumiError, match=r"t0.tif and .*t0.tif would both be written to .*t0.rumi"):
        rumimm.convert_many([src / "t0.tif", other / "t0.tif"], out, jobs=1)
    assert os.listdir(out) == []


def test_the_command_line_converts_many_files_into_a_folder(sources, capsys):
    from rumimm.cli import main

    src, out, arrays = sources
    files = [str(src / n) for n in ("t0.tif", "t1.tif", "bad.tif")]
    assert main(["convert", *files, "--to", str(out), "--tile", "32", "-j", "2"]) == 1
    captured = capsys.readouterr()
    assert "2 written, 0 kept, 1 failed" in captured.out and "catalog.parquet" in captured.out
    assert "bad.tif" in captured.err
    _check_outputs(out, arrays, ["t0", "t1"])
    assert main(["convert", *files[:2], "--to", str(out), "-j", "1"]) == 0
    assert "0 written, 2 kept, 0 failed" in capsys.readouterr().out
    assert main(["convert", files[0], files[1], files[2], str(out / "x.rumi")]) == 2
    assert "one IN and one OUT" in capsys.readouterr().err


@pytest.mark.slow
def test_on_a_dask_client_the_files_spread_over_the_workers(sources, monkeypatch, dask_session_client):
    from rumimm.integrations import bulk

    def no_local_conversion(*args, **kwargs):
        raise AssertionError("converted in this process")

    monkeypatch.setattr(bulk, "convert_one", no_local_conversion)  # the workers import their own
    monkeypatch.setattr(bulk, "_in_processes", no_local_conversion)
    src, out, arrays = sources
    with dask_session_client.as_current():
        result = rumimm.convert_many(src, out, tile=32, spec="0.1")
    assert len(result.written) == 4 and [s for s, _ in result.errors] == [str(src / "bad.tif")]
    _check_outputs(out, arrays, ["r", "t0", "t1", "t2"])
    assert len(rumimm.read_catalog(result.catalog)) == 4
    assert not np.any([n.endswith(".tmp") for n in os.listdir(out)])
