"""The asv suite's decode-floor ratios (asv_benchmarks/benchmarks/bench_floor.py) measure what they say.

The floor decodes exactly the frames a window touches (the same ones as the side-by-side
scripts' floor, compare/decode_floor.py) into the bytes of the scene; the benchmark runs
end to end on a small scene for every row; check.sh's ratio subset names it.  Nothing
here is timed: the ratios themselves are asv's to track.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import rumimm
from asv_benchmarks.benchmarks import bench_floor
from asv_benchmarks.compare.decode_floor import touched_frames
from rumimm.synthetic import eo_scene

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("floor")
    arr = eo_scene(4, 1024, 1024, "uint16", seed=3)
    path = str(d / "s.rumi")
    return path, rumimm.write(path, arr, tile=256, codec="fast"), arr


@pytest.mark.parametrize("row", list(bench_floor.ROWS))
def test_the_floor_decodes_the_frames_of_each_window_to_the_scene(small_file, row):
    path, blob, arr = small_file
    with rumimm.open(path, header=blob) as img:
        header = img.header
    floor = bench_floor.DecodeFloor(path, header, threads=2)
    try:
        g = header.grid
        for w in bench_floor.windows(row, 1024, n=3):
            ks = floor.frames(w)
            assert sorted(ks) == sorted(touched_frames(header, w).tolist())
            assert floor(w) > 0
            at = 0
            for k in ks:
                r, c, b = g.frame_position(k)
                want = arr[b, r * 256:(r + 1) * 256, c * 256:(c + 1) * 256]
                got = floor.dst[at:at + want.nbytes].view(np.uint16).reshape(want.shape)
                assert np.array_equal(got, want), f"frame {k} of window {w}"
                at += (want.nbytes + 63) // 64 * 64
    finally:
        floor.close()


def test_windows_are_seeded_inside_the_image_with_the_rows_bands():
    for row, (win, rule) in bench_floor.ROWS.items():
        ws = bench_floor.windows(row, 2048, n=5)
        assert ws == bench_floor.windows(row, 2048, n=5) and len(ws) == 6
        for b0, b1, y0, y1, x0, x1 in ws:
            assert 0 <= y0 < y1 <= 2048 and 0 <= x0 < x1 <= 2048
            assert (y1 - y0, x1 - x0) == ((2048, 2048) if win is None else (win, win))
            assert b1 - b0 == {"all": 4, "one": 1, "two": 2}[rule]


@pytest.mark.parametrize("codec", bench_floor.CODECS)
def test_the_benchmark_runs_every_row_and_returns_a_ratio(tmp_path, monkeypatch, codec):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(bench_floor, "PAIRS", {})
    monkeypatch.setattr(bench_floor, "DEFAULT_PAIRS", 3)

    class Small(bench_floor.DecodeFloorRatio):
        scene_size = 1024

    bench = Small()
    files = bench.setup_cache()
    assert bench.unit == "ratio"
    for row in bench_floor.ROWS:
        for threads in (1, 2):
            bench.setup(files, codec, row, threads)
            try:
                assert rumimm.get_num_threads() == threads
                ratio = bench.track_read_over_decode(files, codec, row, threads)
            finally:
                bench.teardown(files, codec, row, threads)
            assert isinstance(ratio, float) and math.isfinite(ratio) and ratio > 0, (row, threads, ratio)


def test_check_sh_compares_the_ratios_with_their_own_factor():
    subset = (ROOT / "asv_benchmarks" / "subset.sh").read_text()
    ratios = re.search(r"^QUICK_RATIOS='([^']*)'", subset, re.M).group(1)
    quick = re.search(r"^QUICK_BENCH='([^']*)'", subset, re.M).group(1)
    name = "bench_floor.DecodeFloorRatio.track_read_over_decode"
    assert re.search(ratios, name) and not re.search(quick, name)
    check = (ROOT / "asv_benchmarks" / "check.sh").read_text()
    assert '--factor "$ratio_factor"' in check and '--bench "$ratio_bench"' in check
    assert "QUICK_RATIOS" in (ROOT / "asv_benchmarks" / "history.sh").read_text()
