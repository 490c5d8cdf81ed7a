"""The STAC comparison script runs end to end on two small scenes, every engine's pixels checked."""

from __future__ import annotations

import pytest

pytest.importorskip("obstore")  # the "remote" extra; CI installs it
pytest.importorskip("rasterio")
pytest.importorskip("pystac")
pytest.importorskip("odc.stac")  # the "bench" extra

from asv_benchmarks.compare import stac as bench


def test_rumimm_and_odc_stac_read_the_same_chips_and_rumimm_needs_one_request_to_its_first_chip(tmp_path):
    work = str(tmp_path)
    files = bench.write_files(work, 2, 512)
    server = bench.Served(work)
    try:
        items = {"v1": bench.rumi_items(files, "v1", server.url, work),
                 "v2": bench.rumi_items(files, "v2", server.url, work), "cog": bench.cog_items(files, server.url, work)}
        res = bench.run(files, items, server, 0, 1, 0)  # first chips and the warm-up batch checked pixel for pixel
    finally:
        server.stop()
    assert "odc-stac on COGs" in res
    for name, r in res.items():
        assert r["chips/s"] > 0 and r["first chip s"] > 0, name
    for spec in ("0.1", "0.2"):  # the blob is in the Item: the first request is for the chip's frames
        assert res[f"rumimm.stac.load, spec {spec} Items"]["requests to first chip"] == 1
    assert res["odc-stac on COGs"]["requests to first chip"] > 1  # GDAL reads each COG's header first
