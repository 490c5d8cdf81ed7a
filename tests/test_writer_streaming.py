"""rumimm.Writer streams rows of tiles: order, bounded memory, one row of the source read at a time, progress."""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pytest
from writer_helpers import assert_round_trip, no_temp_files

import rumimm
from rumimm import build_blob
from rumimm.errors import RumiError


# -- streaming Writer ---------------------------------------------------------------------
def test_the_writer_streams_rows_and_returns_the_blob_on_close(tmp_path, scene, spec):
    path = tmp_path / "s.rumi"
    data, kw = scene, {"spec": spec.name}
    if spec.has_time:  # three steps of the scene, labelled with intervals
        data = np.stack([scene, scene // 2, scene // 3])
        kw.update(descriptions=[f"b{i}" for i in range(scene.shape[0])],
                  time=[("2026-01-01", "2026-01-05"), ("2026-01-05", "2026-01-09"), ("2026-02-01", "2026-03-01")])
    with rumimm.Writer(path, data.shape, data.dtype, tile=(16, 20), unit="cell", **kw) as w:
        assert w.shape == data.shape and w.rows == 3 and w.row_span(2) == (32, 37)
        for r in range(w.rows):
            y0, y1 = w.row_span(r)
            w.write_row(r, data[..., y0:y1, :])
    assert w.closed and w.header == build_blob(path)
    assert w.header == rumimm.write(tmp_path / "w.rumi", data, tile=(16, 20), unit="cell", **kw)
    assert path.read_bytes() == (tmp_path / "w.rumi").read_bytes()
    with rumimm.open(path, w.header) as img:
        np.testing.assert_array_equal(img[...], data)
        assert img.time_kind == ("interval" if spec.has_time else None)
        assert img.time == (None if not spec.has_time else
                            [(dt.date(2026, 1, 1), dt.date(2026, 1, 5)), (dt.date(2026, 1, 5), dt.date(2026, 1, 9)),
                             (dt.date(2026, 2, 1), dt.date(2026, 3, 1))])


def test_the_writer_keeps_at_most_one_finished_row_of_frames_unwritten(tmp_path, rng):
    a = rng.integers(0, 50, (2, 40, 24), dtype=np.uint8)
    w = rumimm.Writer(tmp_path / "m.rumi", a.shape, a.dtype, tile=8)
    per_row = w.grid.tiles_across * 2
    for r in range(w.rows):
        w.write_row(r, a[:, slice(*w.row_span(r))])
        # rows before r are on disk, row r is the only one in flight
        assert int(np.count_nonzero(w.counts)) == r * per_row
    assert_round_trip(tmp_path / "m.rumi", w.close(), a)


def test_rows_out_of_order_are_refused_and_the_writer_stays_usable(tmp_path, scene):
    w = rumimm.Writer(tmp_path / "o.rumi", scene.shape, scene.dtype, tile=16)
    with pytest.raises(RumiError, match=r"row 1 arrived out of order.*expected row 0"):
        w.write_row(1, scene[:, 16:32])
    with pytest.raises(RumiError, match=r"block has shape \(3, 15, 45\), expected \(B, h, X\) = \(3, 16, 45\)"):
        w.write_row(0, scene[:, :15])
    with pytest.raises(RumiError, match="block dtype is float32"):
        w.write_row(0, scene[:, :16].astype(np.float32))
    for r in range(w.rows):
        w.write_row(r, scene[:, slice(*w.row_span(r))])
    assert_round_trip(tmp_path / "o.rumi", w.close(), scene)


def test_closing_before_every_row_raises_and_leaves_no_file(tmp_path, scene):
    path = tmp_path / "short.rumi"
    w = rumimm.Writer(path, scene.shape, scene.dtype, tile=16)
    w.write_row(0, scene[:, :16])
    with pytest.raises(RumiError, match="only 1 of 3 grid rows were written"):
        w.close()
    assert not path.exists() and no_temp_files(tmp_path)
    with pytest.raises(RumiError, match="writer is closed"):
        w.write_row(1, scene[:, 16:32])


def test_an_exception_inside_the_with_block_discards_the_file(tmp_path, scene):
    path = tmp_path / "x.rumi"
    path.write_bytes(b"old contents")
    with pytest.raises(ZeroDivisionError), rumimm.Writer(path, scene.shape, scene.dtype, tile=16) as w:
        w.write_row(0, scene[:, :16])
        1 / 0
    assert path.read_bytes() == b"old contents" and no_temp_files(tmp_path)
    assert w.closed and w.header is None


def test_write_reads_its_source_one_row_of_tiles_at_a_time(tmp_path, scene):
    class Source:
        """An array-like that records the slices read from it."""

        shape, dtype = scene.shape, scene.dtype
        reads: list = []

        def __getitem__(self, key):
            self.reads.append(key)
            return scene[key]

    src = Source()
    blob = rumimm.write(tmp_path / "src.rumi", src, tile=16)
    assert [k[1] for k in src.reads] == [slice(0, 16), slice(16, 32), slice(32, 37)]
    assert_round_trip(tmp_path / "src.rumi", blob, scene)


def test_a_memmap_streams_to_the_same_file_as_the_array(tmp_path, scene):
    mm = np.memmap(tmp_path / "raw.bin", dtype=scene.dtype, mode="w+", shape=scene.shape)
    mm[:] = scene
    mm.flush()
    ro = np.memmap(tmp_path / "raw.bin", dtype=scene.dtype, mode="r", shape=scene.shape)
    assert rumimm.write(tmp_path / "mm.rumi", ro, tile=16) == rumimm.write(tmp_path / "a.rumi", scene, tile=16)
    assert (tmp_path / "mm.rumi").read_bytes() == (tmp_path / "a.rumi").read_bytes()


@pytest.mark.slow
def test_a_memmap_much_larger_than_a_row_is_written_in_bounded_memory(tmp_path, rng):
    import tracemalloc

    from rumimm.reader import jit

    shape = (2, 2048, 1024)  # 8 MiB of uint16; one row of 64-pixel tiles is 256 KiB
    mm = np.memmap(tmp_path / "big.bin", dtype=np.uint16, mode="w+", shape=shape)
    mm[:] = rng.integers(0, 1000, shape[1:], dtype=np.uint16)
    mm.flush()
    del mm
    src = np.memmap(tmp_path / "big.bin", dtype=np.uint16, mode="r", shape=shape)
    if jit.state() == "loading":  # an earlier read started loading the kernels: not this write's memory
        jit.wait()
    tracemalloc.start()
    try:
        blob = rumimm.write(tmp_path / "big.rumi", src, tile=64, threads=1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20) + 4 * 256 * 1024  # the 1 MiB file buffer and a few rows, never the 8 MiB image
    assert_round_trip(tmp_path / "big.rumi", blob, np.asarray(src))


def test_progress_advances_once_per_row_of_tiles(tmp_path, scene):
    seen = []
    rumimm.write(tmp_path / "p.rumi", scene, tile=16, progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
    with pytest.raises(TypeError, match="progress must be None, a bool or a callable"):
        rumimm.write(tmp_path / "q.rumi", scene, progress="yes")
    assert os.listdir(tmp_path) == ["p.rumi"]


def test_progress_true_draws_a_bar_on_stderr(tmp_path, scene, capsys):
    rumimm.write(tmp_path / "p.rumi", scene, tile=16, progress=True)
    err = capsys.readouterr().err
    assert "write:" in err and "/3 " in err  # a tqdm bar over the 3 rows
