"""The training-loader comparison script's arithmetic: what it times and how it reports it."""

from __future__ import annotations

import numpy as np
import pytest

import rumimm
from asv_benchmarks.compare import loaders
from rumimm.cli import recognise_preset
from rumimm.reader.image import raw_frame
from rumimm.synthetic import eo_scene

ENGINE = "rumimm kept open (read_batch)"


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    """One scene the size of a chip, in the files the rumimm engines read."""
    d = tmp_path_factory.mktemp("loaders")
    scene = eo_scene(loaders.BANDS, loaders.CHIP, loaders.CHIP, "uint16", seed=1)
    np.save(d / "scene.npy", scene)
    blob = rumimm.write(d / "s.rumi", scene, tile=loaders.CHIP)
    return {"files": {"scenes": [str(d / "scene.npy")], "tiles": {"512 tile": [(str(d / "s.rumi"), blob.hex())]}}}


@pytest.mark.parametrize("timed", [0, 1, 3, 4])
def test_two_workers_time_every_batch_after_the_warm_up(spec, timed):
    # one batch is the untimed warm-up; a step gives each worker a batch, and after an odd
    # count the last step's second worker has none and adds no time
    spec = dict(spec, chips=[[0, 0, 0]] * (loaders.BATCH * (timed + 1)))
    got = loaders.run_mode("2 workers", [ENGINE], spec)[ENGINE]
    assert got["exact"] and got["chips"] == timed * loaders.BATCH
    assert (got["seconds"] > 0) == (timed > 0)
    rate = loaders.chips_per_s(got)
    assert rate is None if timed == 0 else rate == got["chips"] / got["seconds"]


def test_a_mode_that_timed_nothing_is_reported_as_n_a():
    nothing = {"seconds": 0.0, "chips": 0, "exact": True, "floor_seconds": 0.0}
    timed = {"seconds": 2.0, "chips": 32, "exact": True, "floor_seconds": 1.0}
    table = loaders.summarize({"samples": {f"{ENGINE}|2 workers": [nothing],
                                           f"{ENGINE}|1 thread": [nothing, timed]}})
    assert table[ENGINE]["2 workers"] == {"chips_per_s": None, "exact": True, "read_over_floor": None}
    assert table[ENGINE]["1 thread"] == {"chips_per_s": 16.0, "exact": True, "read_over_floor": 2.0}
    assert loaders._text(None) == "n/a" and loaders._text(16.4) == "16" and loaders._text(2.0, ".2f", "x") == "2.00x"


def test_the_torchgeo_table_gives_medians_and_ratios_to_the_geotiff_dataset_of_the_same_column():
    samples = {}
    for k, engine in enumerate(loaders.TG_ENGINES):
        for sampler in loaders.TG_SAMPLERS:
            for mode in loaders.TG_MODES:
                seconds = [2.0, 1.0, 4.0] if k < 2 else [4.0, 8.0, 6.0]   # medians 2 s and 6 s for 48 samples
                samples[f"{engine}|{sampler}|{mode}"] = {"seconds": seconds, "samples": 48, "exact": k != 1}
    table = loaders.build_torchgeo_table({"samples": samples}).splitlines()
    assert table[2] == f"| {loaders.TG_ENGINES[0]} | " + " | ".join(["24 (3.0x)"] * 4) + " |"
    assert table[3] == f"| {loaders.TG_ENGINES[1]} | " + " | ".join(["24 (3.0x) NOT EXACT"] * 4) + " |"
    assert table[4] == f"| {loaders.TG_ENGINES[2]} | " + " | ".join(["8"] * 4) + " |"


def test_codec_rows_read_the_files_written_with_their_preset(tmp_path):
    files = loaders.write_files(str(tmp_path), 1, loaders.CHIP, skip_zarr=True, codecs=["transpose"])
    for tile in loaders.CODEC_TILES:
        (path, blob), = files["tiles"][f"{tile} tile codec=transpose"]
        with rumimm.open(path, bytes.fromhex(blob)) as img:
            assert img.tile == (tile, tile)
            assert recognise_preset(raw_frame(img, 0), img.header) == "transpose"
    spec = {"files": files, "chips": [[0, 0, 0]] * (2 * loaders.BATCH)}
    engines = loaders.codec_engines(["transpose"])
    got = loaders.run_mode("1 thread", engines, spec)
    assert all(got[e]["exact"] and got[e]["chips"] == loaders.BATCH for e in engines)
    sizes = loaders.file_sizes(files, loaders.BANDS * loaders.CHIP * loaders.CHIP * 2)
    assert all(0 < sizes[e]["ratio"] < 1.5 for e in engines)


def test_torchgeo_rows_with_rumimms_collate_are_measured_against_the_geotiff_row_of_the_same_collate():
    engines = loaders.tg_engines(["fast"], ["torchgeo", "rumimm"])
    assert len(engines) == 12 and engines[5] == loaders.TG_ENGINES[-1]
    assert engines[4] == "rumimm.torchgeo, tile 128 cell, codec=fast"
    assert engines[11] == loaders.TG_ENGINES[-1] + loaders.RUMI_COLLATE
    samples = {}
    for e in engines:
        geotiff = e.startswith("TorchGeo")
        seconds = [6.0] if geotiff and e.endswith(loaders.RUMI_COLLATE) else [12.0] if geotiff else [2.0]
        for sampler in loaders.TG_SAMPLERS:
            for mode in loaders.TG_MODES:
                samples[f"{e}|{sampler}|{mode}"] = {"seconds": seconds, "samples": 48, "exact": True}
    table = loaders.build_torchgeo_table({"samples": samples, "config": {"engines": engines}}).splitlines()
    assert table[2].endswith(" | ".join(["24 (6.0x)"] * 4) + " |")  # TorchGeo's collate: 24 / 4 samples/s
    assert table[8].endswith(" | ".join(["24 (3.0x)"] * 4) + " |")  # rumimm's collate: 24 / 8 samples/s


def test_torchgeo_rows_read_catalogs_of_their_own_tile_unit_and_preset(tmp_path):
    files = loaders.write_torchgeo_files(str(tmp_path), 2, 256, codecs=["fast"])
    rows = [e for e in loaders.tg_engines(["fast"]) if e.startswith("rumimm")]
    assert sorted(files["catalogs"]) == sorted(rows)
    for engine in rows:
        table = rumimm.read_catalog(files["catalogs"][engine])
        assert table.num_rows == 2
        for path, blob in zip(table.column("path").to_pylist(), table.column("blob").to_pylist(), strict=True):
            with rumimm.open(path, bytes(blob)) as img:
                want = "tile 128 cell" if "cell" in engine else f"tile {img.tile[0]}"
                assert f"{want}," in engine + "," and img.frame_unit == ("cell" if "cell" in engine else "tile")
                assert ("codec=fast" in engine) == (recognise_preset(raw_frame(img, 0), img.header) == "fast")
