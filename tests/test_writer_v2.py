"""``rumimm.write(..., spec="0.2")`` and ``Writer(spec="0.2")``: spec 0.2 files from rumimm alone.

The bytes are checked with the independent ``spec_reader_v2``; arguments are refused
before any file exists.  Interop with rumi-eo 0.26.1 is in ``test_interop_v2.py``.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import spec_reader_v2 as spec

import rumimm
from rumimm.errors import RumiError


@pytest.fixture
def cube(rng):
    return rng.integers(0, 4000, (3, 4, 37, 29)).astype(np.uint16)


@pytest.mark.parametrize(
    ("unit", "layout", "frames"), [("tile", 0, 3 * 2 * 4 * 3), ("cell", 4, 6), (3, 3, 6), (4, 4, 6),
                                                  (9, 9, 72), (0, 0, 72)])
def test_a_cube_writes_every_planar_unit_and_reads_back(tmp_path, cube, unit, layout, frames):
    path = tmp_path / "c.rumi"
    blob = rumimm.write(path, cube, tile=16, unit=unit, spec="0.2", descriptions=["a", "b", "c", "d"],
                        time=["2026-01-01", "2026-01-11", "2026-01-21"])
    p = spec.parse_file(path)
    assert p["unit"] == layout and p["frames"] == frames == len(p["counts"])
    assert (p["times"], p["bands"], p["length"], p["width"]) == (3, 4, 37, 29)
    assert p["texts"] == ["a", "b", "c", "d"]
    assert spec.blob_of(p) == blob == rumimm.build_blob(path)
    assert p["seconds"] == [1767225600 + 864000 * i for i in range(3)]
    with rumimm.open(path, blob) as img:
        np.testing.assert_array_equal(img[...], cube)


def test_an_image_writes_tile_and_cell_frames_as_units_0_and_1(tmp_path, rng):
    arr = rng.integers(0, 255, (3, 20, 30)).astype(np.uint8)
    for unit, layout in (("tile", 0), ("cell", 1)):
        blob = rumimm.write(tmp_path / "i.rumi", arr, tile=8, unit=unit, spec="0.2", descriptions=["r", "g", "b"],
                            time=[dt.datetime(2026, 5, 1, 10, 30)])
        p = spec.parse_file(tmp_path / "i.rumi")
        assert p["unit"] == layout and p["times"] == 1 and p["time_fields"][3] == 1  # seconds: not a whole day
        with rumimm.open(tmp_path / "i.rumi", blob) as img:
            assert img.shape == (3, 20, 30)
            np.testing.assert_array_equal(img[...], arr)


def test_spec_02_writes_the_fnuz_floats_that_spec_01_has_not(tmp_path, rng):
    arr = rng.integers(0, 100, (2, 9, 9)).astype(np.float32).astype(ml_dtypes.float8_e4m3fnuz)
    rumimm.write(tmp_path / "f.rumi", arr, tile=4, spec="0.2", descriptions=["a", "b"], time=["2026-01-01"])
    with rumimm.open(tmp_path / "f.rumi") as img:
        assert img.dtype == arr.dtype
        np.testing.assert_array_equal(img[...].view(np.uint8), arr.view(np.uint8))
    with pytest.raises(RumiError, match="no rumi sample encoding"):
        rumimm.write(tmp_path / "g.rumi", arr, tile=4)
    with pytest.raises(RumiError, match=r"in spec 0.2"):
        rumimm.write(tmp_path / "g.rumi", np.zeros((1, 4, 4), ml_dtypes.int4), spec="0.2", descriptions=["a"],
                     time=["2026-01-01"])


@pytest.mark.parametrize(("kw", "exc", "msg"), [
    ({}, TypeError, "pass descriptions=\\[...\\]"),
    ({"descriptions": ["a", "b", "c", "d"]}, TypeError, "pass time=\\[...\\]"),
    ({"descriptions": ["a", "b"], "time": ["2026-01-01"] * 3}, ValueError, "one text per band, so 4; got 2"),
    ({"descriptions": ["a", "a", "b", "c"], "time": ["2026-01-01"] * 3}, ValueError, "repeats band 0"),
    ({"descriptions": ["a", "", "b", "c"], "time": ["2026-01-01"] * 3}, ValueError, "band text 1 is empty"),
    ({"descriptions": "abcd", "time": ["2026-01-01"] * 3}, TypeError, "wrap a single text"),
    ({"descriptions": list("abcd"), "time": ["2026-01-01"]}, ValueError, "one entry per time step, so 3; got 1"),
    ({"descriptions": list("abcd"), "time": "2026-01-01"}, TypeError, "wrap a single coordinate"),
    ({"descriptions": list("abcd"), "time": ["2026-01-03", "2026-01-02", "2026-01-04"]}, ValueError, "goes backwards"),
    ({"descriptions": list("abcd"), "time": ["2026-01-01", ("2026-01-02", "2026-01-03"), "2026-01-04"]}, ValueError,
     "not a mix"),
    ({"descriptions": list("abcd"), "time": [dt.datetime(2026, 1, 1, 0, 0, 0, 5)] * 3}, ValueError,
     "fraction of a second"),
    ({"descriptions": list("abcd"), "time": [1, 2, 3]}, TypeError, "got int"),
    ({"descriptions": list("abcd"), "time": ["2026-13-01"] * 3}, ValueError, "not an ISO date"),
    ({"descriptions": list("abcd"), "time": ["2026-01-01"] * 3, "unit": 7}, ValueError, "writes the planar units"),
    ({"descriptions": list("abcd"), "time": ["2026-01-01"] * 3, "unit": 1}, ValueError, "exactly one of B and T"),
])
def test_bad_spec_02_arguments_are_refused_before_a_file_exists(tmp_path, cube, kw, exc, msg):
    path = tmp_path / "x.rumi"
    with pytest.raises(exc, match=msg):
        rumimm.write(path, cube, tile=16, spec="0.2", **kw)
    assert not path.exists() and not list(tmp_path.iterdir())


def test_spec_01_refuses_time_and_four_dimensions_and_keeps_descriptions_in_the_sidecar(tmp_path, cube):
    with pytest.raises(ValueError, match=r"spec 0.2 files only"):
        rumimm.write(tmp_path / "x.rumi", cube[0], time=["2026-01-01"])
    with pytest.raises(ValueError, match=r"spec 0.2 files only"):
        rumimm.Writer(tmp_path / "x.rumi", cube[0].shape, cube.dtype, descriptions=list("abcd"))
    rumimm.write(tmp_path / "d.rumi", cube[0], descriptions=list("abcd"))  # spec 0.1: the PAM sidecar's
    with rumimm.open(tmp_path / "d.rumi") as img:
        assert img.spec == "0.1" and img.descriptions == tuple("abcd")
    assert (tmp_path / "d.rumi.aux.xml").exists()
    with pytest.raises(RumiError, match="4-D shape"):
        rumimm.write(tmp_path / "x.rumi", cube)
    with pytest.raises(ValueError, match="spec must be"):
        rumimm.write(tmp_path / "x.rumi", cube[0], spec="0.3")


def test_aware_and_naive_times_are_stored_in_utc(tmp_path, rng):
    arr = rng.integers(0, 9, (1, 4, 4)).astype(np.uint8)
    plus2 = dt.timezone(dt.timedelta(hours=2))
    rumimm.write(tmp_path / "t.rumi", arr, tile=4, spec="0.2", descriptions=["x"],
                 time=[dt.datetime(2026, 1, 3, 10, 30, tzinfo=plus2)])
    with rumimm.open(tmp_path / "t.rumi") as img:
        assert img.time == [dt.datetime(2026, 1, 3, 8, 30, tzinfo=dt.UTC)]


PARALLEL = """
import sys, numpy as np, rumimm, rumimm.writer.writer as W
W.PROCESS_MIN_BYTES = W.PROCESS_START_MIN_BYTES = 0  # the thresholds are about speed only
a = (np.arange(3 * 2 * 90 * 70, dtype=np.int64) % 977).astype(np.complex128).reshape(3, 2, 90, 70)
kw = dict(tile=16, unit="cell", spec="0.2", descriptions=["a", "b"], time=["2026-01-01", "2026-01-02", "2026-01-03"])
w = rumimm.Writer(sys.argv[1], a.shape, a.dtype, threads=2, **kw)
assert w.backend_name == "processes", w.backend_name
for r in range(w.rows):
    w.write_row(r, a[:, :, slice(*w.row_span(r))])
assert w.close() == rumimm.write(sys.argv[1] + ".serial", a, threads=1, **kw)
assert open(sys.argv[1], "rb").read() == open(sys.argv[1] + ".serial", "rb").read()
with rumimm.open(sys.argv[1]) as img:
    assert np.array_equal(img[...], a)
print("ok")
"""


@pytest.mark.slow
def test_encoding_processes_write_the_same_02_bytes_as_one_process(tmp_path):
    root = str(Path(__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", PARALLEL, str(tmp_path / "p.rumi")], capture_output=True, text=True,
                         timeout=300, check=False, cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": root})
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
