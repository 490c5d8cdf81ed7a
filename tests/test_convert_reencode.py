"""``rumimm.convert(src, dst, codec=...)`` and ``rumimm convert IN OUT --codec NAME``: every frame re-encoded.

Without ``codec`` convert keeps the frame bytes (``test_convert_v2.py``); with it the frames
are decoded and written again with another preset, in either spec, keeping the pixels,
grid, frame unit, georeferencing tags, band texts, time and sidecar metadata.  The
references read what a portable preset re-encoded: rumi-eo 0.16.0 (``import rumi``) the
spec 0.1.0 files, rumi-eo 0.26.1 (in its own venv, ``peer026``) the spec 0.2 files.
"""

from __future__ import annotations

import os

import numpy as np
import peer026
import pytest
import rumi
from affine import Affine

import rumimm
from rumimm.cli import main, recognise_preset
from rumimm.reader.image import georef_block, raw_frame
from rumimm.synthetic import eo_scene

UTM33N = (10.0, 0.0, 500000.0, 0.0, -10.0, 4200000.0)


@pytest.fixture(scope="module")
def scene():
    return eo_scene(3, 70, 58, "uint16", seed=11)


def _frames(path) -> list[bytes]:
    with rumimm.open(path) as img:
        return [raw_frame(img, k) for k in range(img.n_frames)]


def _codec_of(path) -> str | None:
    with rumimm.open(path) as img:
        return recognise_preset(raw_frame(img, 0), img.header)


@pytest.mark.parametrize("unit", ["tile", "cell"])
@pytest.mark.parametrize("codec", ["transpose", "geozl-average"])
def test_a_01_file_re_encodes_pixel_exact_with_new_frames_and_everything_else_kept(tmp_path, scene, unit, codec):
    src, dst = tmp_path / "a.rumi", tmp_path / "b.rumi"
    rumimm.write(src, scene, tile=32, unit=unit, transform=UTM33N, crs=32633, nodata=0,
                 descriptions=["B2", "B3", "B4"])
    blob = rumimm.convert(src, dst, codec=codec)
    assert blob == rumimm.build_blob(dst)
    assert _codec_of(src) == "delta" and _codec_of(dst) == codec
    old, new = _frames(src), _frames(dst)
    assert len(old) == len(new) and all(a != b for a, b in zip(old, new, strict=True))
    with rumimm.open(src) as a, rumimm.open(dst, blob) as b:
        assert b.spec == "0.1" and b.frame_unit == a.frame_unit and b.tile == a.tile
        np.testing.assert_array_equal(b[...], scene)
        assert georef_block(b) == georef_block(a)
        assert b.crs == "EPSG:32633" and b.transform == Affine(*UTM33N)
        assert b.nodata == 0 and b.descriptions == ("B2", "B3", "B4")
    assert os.path.exists(f"{dst}.aux.xml")


def test_a_02_file_of_several_steps_keeps_its_layout_bands_and_time(tmp_path, rng):
    arr = rng.integers(0, 3000, (2, 3, 40, 36)).astype(np.uint16)
    src, dst = tmp_path / "a.rumi", tmp_path / "b.rumi"
    time = [("2026-01-01", "2026-02-01"), ("2026-02-01", "2026-03-01")]
    rumimm.write(src, arr, tile=16, unit="cell", spec="0.2", descriptions=["r", "g", "b"], time=time,
                 transform=UTM33N, crs=32633)
    blob = rumimm.convert(src, dst, codec="transpose")
    assert blob == rumimm.build_blob(dst)
    assert all(a != b for a, b in zip(_frames(src), _frames(dst), strict=True))
    with rumimm.open(src) as a, rumimm.open(dst) as b:
        assert b.spec == "0.2" and b.frame_unit == a.frame_unit == "t b h w"
        assert b.descriptions == ("r", "g", "b") and b.time == a.time and b.time_kind == "interval"
        assert georef_block(b) == georef_block(a)
        np.testing.assert_array_equal(b[...], arr)


def test_re_encoding_can_change_the_spec_too(tmp_path, scene):
    src = tmp_path / "a.rumi"
    rumimm.write(src, scene, tile=32, transform=UTM33N, crs=32633)
    rumimm.convert(src, tmp_path / "b.rumi", codec="transpose", spec="0.2", time=["2026-06-01"])
    with rumimm.open(tmp_path / "b.rumi") as b:
        assert b.spec == "0.2" and b.descriptions == ("band 1", "band 2", "band 3") and b.crs == "EPSG:32633"
        np.testing.assert_array_equal(b[...], scene)
    rumimm.convert(tmp_path / "b.rumi", tmp_path / "c.rumi", codec="delta", spec="0.1")
    assert (tmp_path / "c.rumi").read_bytes() == src.read_bytes()  # the same writer, the same frames: same bytes


def test_re_encoding_in_worker_processes_writes_the_same_bytes(tmp_path, scene, monkeypatch):
    import rumimm.writer.writer as W

    src = tmp_path / "a.rumi"
    rumimm.write(src, scene, tile=16)
    rumimm.convert(src, tmp_path / "one.rumi", codec="transpose", threads=1)
    monkeypatch.setattr(W, "PROCESS_MIN_BYTES", 0)
    monkeypatch.setattr(W, "PROCESS_START_MIN_BYTES", 0)
    made = []

    class Counting(W.encode_pool.ProcessBackend):
        def __init__(self, *args, **kwargs):
            made.append(args[2])  # threads
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(W.encode_pool, "ProcessBackend", Counting)
    seen = []
    rumimm.convert(src, tmp_path / "two.rumi", codec="transpose", threads=2, progress=lambda d, n: seen.append(d))
    assert (tmp_path / "two.rumi").read_bytes() == (tmp_path / "one.rumi").read_bytes()
    assert made == [2] and seen[-1] == 5  # worker processes compressed; 5 rows of 16-pixel tiles in 70 rows


def test_bad_codecs_are_refused_before_the_destination_is_touched(tmp_path, scene):
    src, dst = tmp_path / "a.rumi", tmp_path / "b.rumi"
    rumimm.write(src, scene, tile=32)
    dst.write_bytes(b"keep me")
    with pytest.raises(ValueError, match=r"codec 'fastest' is not a preset; expected one of: .*delta"):
        rumimm.convert(src, dst, codec="fastest")
    floats = tmp_path / "f.rumi"
    rumimm.write(floats, scene.astype(np.float32), tile=32)
    with pytest.raises(ValueError, match="codec 'geozl-planar' does not support float32 samples; use one of"):
        rumimm.convert(floats, dst, codec="geozl-planar")
    with pytest.raises(ValueError, match="threads= and progress= apply to re-encoding"):
        rumimm.convert(src, dst, threads=2)
    with pytest.raises(ValueError, match=r"spec 0.1 stores no band texts or time"):
        rumimm.convert(src, dst, codec="delta", descriptions=["a", "b", "c"])
    assert dst.read_bytes() == b"keep me"
    assert sorted(os.listdir(tmp_path)) == ["a.rumi", "b.rumi", "f.rumi"]


def test_the_command_re_encodes_keeping_the_spec(tmp_path, scene, capsys):
    src, dst = tmp_path / "a.rumi", tmp_path / "b.rumi"
    rumimm.write(src, scene, tile=32)
    assert main(["convert", str(src), str(dst), "--codec", "transpose"]) == 0
    out = capsys.readouterr().out
    assert "rumi spec 0.1" in out and "frames re-encoded with 'transpose'" in out
    assert _codec_of(dst) == "transpose"
    with rumimm.open(dst) as img:
        np.testing.assert_array_equal(img[...], scene)
    assert main(["convert", str(src), str(dst), "--codec", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rumimm: codec 'nope' is not a preset") and err.count("\n") == 1


def test_rumi_eo_016_reads_a_01_file_re_encoded_with_a_portable_preset(tmp_path, scene):
    src, dst = tmp_path / "a.rumi", tmp_path / "b.rumi"
    rumimm.write(src, scene, tile=32, transform=UTM33N, crs=32633)
    blob = rumimm.convert(src, dst, codec="transpose")
    assert rumimm.PRESETS["transpose"].portable
    np.testing.assert_array_equal(rumi.read(os.fspath(dst), blob), scene)


def test_rumi_eo_026_reads_a_02_file_re_encoded_with_a_portable_preset(tmp_path, rng):
    peer026.require()
    arr = rng.integers(0, 3000, (2, 3, 40, 36)).astype(np.uint16)
    src, dst = tmp_path / "a.rumi", tmp_path / "b.rumi"
    rumimm.write(src, arr, tile=16, spec="0.2", descriptions=["r", "g", "b"], time=["2026-01-01", "2026-01-02"],
                 transform=UTM33N, crs=32633)
    blob = rumimm.convert(src, dst, codec="transpose")
    (info,) = peer026.peer_info([dst])
    (got,) = peer026.peer_read([{"path": dst, "header": blob}], tmp_path)
    assert bytes.fromhex(info["header"]) == blob and info["bands"] == ["r", "g", "b"]
    np.testing.assert_array_equal(got, arr)
