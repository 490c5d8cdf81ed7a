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


def test_the_stackstac_worker_makes_one_band_assets_of_the_same_cog():
    # stackstac 0.5.1 refuses multi-band assets and reads proj:epsg only: the worker (which runs in
    # stackstac's venv, importing nothing of rumimm) turns the COG Items into GDAL band subsets
    from asv_benchmarks.compare import stac_stackstac as worker

    url = "http://127.0.0.1:1/s0.tif"
    item = {"type": "Feature", "id": "s0", "properties": {"proj:code": "EPSG:32633", "proj:shape": [8, 8]},
            "assets": {"data": {"href": url, "roles": ["data"],
                                "raster:bands": [{"data_type": "uint16"}, {"data_type": "uint16", "scale": 2}]}}}
    got = worker.for_stackstac(item)
    assert got["properties"]["proj:epsg"] == 32633 and "proj:epsg" not in item["properties"]  # the input is kept
    assert worker.band_names(got) == ["b1", "b2"] and "data" in item["assets"]
    assert got["assets"]["b2"] == {"href": f"vrt:///vsicurl/{url}?bands=2", "roles": ["data"],
                                   "raster:bands": [{"data_type": "uint16", "scale": 2}]}
    assert worker.band_href("/data/s0.tif", 1) == "vrt:///data/s0.tif?bands=1"
    with pytest.raises(ValueError, match="query string"):
        worker.band_href(url + "?sig=x", 1)


def test_the_stackstac_worker_answers_one_json_line_a_request():
    import io
    import json

    from asv_benchmarks.compare import stac_stackstac as worker

    out = io.StringIO()
    with pytest.raises(RuntimeError, match="before load"):
        worker.serve(io.StringIO(json.dumps({"op": "first"}) + "\n"), out)
    worker.serve(io.StringIO(json.dumps({"op": "quit"}) + "\n" + json.dumps({"op": "first"}) + "\n"), out)
    assert out.getvalue() == ""  # quit stops before the next request
    assert set(worker.versions()) == {*worker.PACKAGES, "GDAL"}
