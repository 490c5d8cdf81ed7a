"""The remote comparison script runs end to end on one small file and counts what it fetched."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("obstore")  # the "remote" extra; CI installs it
pytest.importorskip("zarr")
pytest.importorskip("rasterio")

import peer026

from asv_benchmarks.compare import remote_chips as remote

PEER_ENGINES = {remote.RumimmBatchV2.name, remote.RumiEo.name}


def _run(tmp_path, engines, codecs=()):
    work = str(tmp_path)
    files = remote.write_files(work, 2, 512, codecs)
    server = remote.Served(work)
    try:
        remote.add_urls(files, work, server.url)
        return remote.run(files, server, 0, 1, 0, engines)  # the warm-up batch is checked pixel for pixel
    finally:
        server.stop()


def test_every_engine_reads_the_same_chips_exactly_and_is_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "PEER", os.path.join(str(tmp_path), "no-peer"))  # the peer's rows: the test below
    engines = [e for e in remote.ENGINES if e.name not in PEER_ENGINES] + [remote.coalescing(8 << 20)]
    res = _run(tmp_path, engines)
    assert set(res) == {e.name for e in engines}
    for name, r in res.items():
        assert r["chips/s"] > 0 and r["requests/chip"] >= 0 and r["MB/chip"] >= 0, name
    # a chip of a 512-pixel-tile file is one tile position: at most one request for all its bands
    # (GDAL may fetch nothing: it keeps what it read of a file this small when it opened it)
    assert 0 < res[remote.RumimmBatch.name]["requests/chip"] <= 1


def test_rumi_eo_reads_its_own_02_files_over_the_same_server_and_rumimm_the_same_bytes(tmp_path, monkeypatch):
    peer026.require()
    monkeypatch.setattr(remote, "PEER", peer026.PYTHON)
    engines = [remote.RumimmBatchV2, remote.RumiEo]
    res = _run(tmp_path, engines)
    assert set(res) == PEER_ENGINES
    for name, r in res.items():
        assert r["chips/s"] > 0 and 0 < r["requests/chip"] <= 1, name  # 512-pixel tiles: one position a chip


def test_a_codec_row_reads_the_files_written_with_its_preset(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "PEER", os.path.join(str(tmp_path), "no-peer"))
    engine = remote.with_codec("transpose")
    res = _run(tmp_path, [engine], codecs=["transpose"])  # the warm-up batch is checked pixel for pixel
    assert 0 < res[engine.name]["requests/chip"] <= 1 and res[engine.name]["chips/s"] > 0
    assert os.path.getsize(tmp_path / "s0_transpose.rumi") != os.path.getsize(tmp_path / "s0.rumi")
