"""The single-file comparison script end to end on a small scene: every engine, a codec column, the report."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("rasterio")
pytest.importorskip("rumi")  # rumi-eo 0.16.0, the reference column (the test extra installs it)

from asv_benchmarks.compare import engines  # the package, from the checkout (pytest's pythonpath)


@pytest.mark.slow
def test_a_codec_column_reads_its_own_file_exactly_beside_every_engine_in_the_same_run(tmp_path):
    out = tmp_path / "out"
    rc = engines.main(["--size", "1024", "--tile", "512", "--bands", "2", "--repeats", "2", "--rounds", "1",
                       "--cold-repeats", "1", "--threads", "1", "--codec-column", "transpose", "--out", str(out),
                       "--no-chart", "--quiet"])
    assert rc == 0
    results = json.loads((out / "performance.json").read_text())
    engine = engines.CODEC_PREFIX + "transpose"
    assert results["setup"]["engines"] == [*engines.ENGINES, engine]
    cell = results["timings"]["1"][engine]
    assert all(entry["exact"] for entry in cell.values())  # every row's warm-up read checked pixel for pixel
    assert all(entry["seconds"] for entry in cell.values())
    assert results["files"][engine]["bytes"] != results["files"]["rumimm"]["bytes"]
    table = (out / "performance-table.md").read_text()
    header = next(line for line in table.splitlines() if line.startswith("| operation |"))
    assert f" {engine} |" in header
    assert "WRONG PIXELS" not in table


def test_the_open_read_script_times_every_engine_on_the_same_chips_and_checks_them():
    from asv_benchmarks.compare import open_read

    times = open_read.main(["--windows", "3", "--size", "1024", "--chip", "32"])
    assert set(times) == {"rumi-eo on its file", "rumimm, default codec", "rumimm on reference file",
                          "rumimm, codec=fast"}
    assert all(len(t) == 3 and min(t) > 0 for t in times.values())
