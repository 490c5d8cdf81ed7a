"""The remote comparison script runs end to end on one small file and counts what it fetched."""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("obstore")  # the "remote" extra; CI installs it
pytest.importorskip("zarr")
pytest.importorskip("rasterio")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout, as the script does
from asv_benchmarks import compare_remote as remote  # noqa: E402


def test_every_engine_reads_the_same_chips_exactly_and_is_counted(tmp_path):
    work = str(tmp_path)
    files = remote.write_files(work, 2, 512)
    server = remote.Served(work)
    try:
        remote.add_urls(files, work, server.url)
        res = remote.run(files, server, 0, 1, 0)  # the warm-up batch is checked pixel for pixel
    finally:
        server.stop()
    assert set(res) == {e.name for e in remote.ENGINES}
    for name, r in res.items():
        assert r["chips/s"] > 0 and r["requests/chip"] >= 0 and r["MB/chip"] >= 0, name
    # a chip of a 512-pixel-tile file is one tile position: at most one request for all its bands
    # (GDAL may fetch nothing: it keeps what it read of a file this small when it opened it)
    assert 0 < res[remote.RumimmBatch.name]["requests/chip"] <= 1
