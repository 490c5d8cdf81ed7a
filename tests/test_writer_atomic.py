"""Writes are atomic: every failure leaves the old file and no temporary one.

Also: writing through symlinks, permission bits, writers and encoders dropped or left in cycles.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from conftest import UTM33N
from writer_helpers import no_temp_files

import rumimm
import rumimm.writer.writer as W
from rumimm import build_blob, codec
from rumimm.errors import CodecError, RumiError
from rumimm.format.spec import Spec
from rumimm.store import atomic
from rumimm.writer import frame_job


# -- atomicity --------------------------------------------------------------------------
def _failing_encode(fail_at: int, exc: BaseException):
    original = codec.FrameEncoder.encode
    calls = {"n": 0}

    def encode(self, frame):
        calls["n"] += 1
        if calls["n"] == fail_at:
            raise exc
        return original(self, frame)

    return encode


def test_a_codec_error_mid_file_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    path = tmp_path / "keep.rumi"
    old = rumimm.write(path, scene[:1], tile=16)
    before = path.read_bytes()
    monkeypatch.setattr(codec.FrameEncoder, "encode", _failing_encode(5, CodecError("boom")))
    with pytest.raises(CodecError, match="frame 4 of 27: boom"):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == before and build_blob(path) == old and no_temp_files(tmp_path)


def test_an_unexpected_codec_exception_becomes_a_codec_error_naming_the_frame(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(codec.FrameEncoder, "encode", _failing_encode(2, RuntimeError("native failure")))
    with pytest.raises(CodecError, match="frame 1 of 27 failed to compress: native failure"):
        rumimm.write(tmp_path / "e.rumi", scene, tile=16)
    assert not (tmp_path / "e.rumi").exists() and no_temp_files(tmp_path)


def test_a_keyboard_interrupt_mid_file_leaves_no_partial_file(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(codec.FrameEncoder, "encode", _failing_encode(10, KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        rumimm.write(tmp_path / "k.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_a_full_disk_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    path = tmp_path / "disk.rumi"
    path.write_bytes(b"previous")
    real = atomic.AtomicFile.__init__

    def init(self, p):
        real(self, p)
        fh = self.fh

        class Full:
            def __getattr__(self, name):
                return getattr(fh, name)

            def write(self, data):
                raise OSError(28, "No space left on device")

        self.fh = Full()

    monkeypatch.setattr(atomic.AtomicFile, "__init__", init)
    with pytest.raises(OSError, match="No space left"):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == b"previous" and no_temp_files(tmp_path)


def test_a_failed_rename_leaves_no_temporary_file(tmp_path, scene, monkeypatch):
    def replace(src, dst):
        raise PermissionError(13, "denied", dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(PermissionError):
        rumimm.write(tmp_path / "r.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_a_failure_while_finishing_the_file_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    # everything is compressed and on disk in the temporary file when the prefix fails
    path = tmp_path / "late.rumi"
    old = rumimm.write(path, scene[:1], tile=16)
    before = path.read_bytes()

    def broken_prefix(*args, **kwargs):
        raise ValueError("georeferencing found bad at the last moment")

    monkeypatch.setattr(Spec, "build_prefix", broken_prefix)  # the writer builds the prefix through its spec
    with pytest.raises(ValueError, match="at the last moment"):
        rumimm.write(path, scene, tile=16, transform=UTM33N, crs=32633)
    assert path.read_bytes() == before and build_blob(path) == old and no_temp_files(tmp_path)


def test_a_keyboard_interrupt_while_syncing_leaves_the_old_file_untouched(tmp_path, scene, monkeypatch):
    path = tmp_path / "sync.rumi"
    path.write_bytes(b"previous")

    def fsync(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "fsync", fsync)
    with pytest.raises(KeyboardInterrupt):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == b"previous" and no_temp_files(tmp_path)


@pytest.mark.slow
def test_a_writer_dropped_without_close_leaves_nothing_behind(tmp_path, scene):
    import gc

    w = rumimm.Writer(tmp_path / "dropped.rumi", scene.shape, scene.dtype, tile=16)
    w.write_row(0, scene[:, :16])
    assert len(os.listdir(tmp_path)) == 1  # the temporary file
    del w
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_frames_that_do_not_end_where_the_counts_say_are_never_committed(tmp_path, scene, monkeypatch):
    path = tmp_path / "gap.rumi"
    path.write_bytes(b"previous")
    real = W.Writer._flush_one

    def flush_with_a_stray_byte(self):
        real(self)
        self._file.write(b"\0")  # a gap the counts do not know about

    monkeypatch.setattr(W.Writer, "_flush_one", flush_with_a_stray_byte)
    with pytest.raises(RumiError, match="internal error: 27 of 27 frames end at byte"):
        rumimm.write(path, scene, tile=16)
    assert path.read_bytes() == b"previous" and no_temp_files(tmp_path)


def test_a_frame_that_compresses_to_nothing_is_refused(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(codec.FrameEncoder, "encode", lambda self, frame: b"")
    with pytest.raises(CodecError, match="frame 0 of 27 compressed to 0 bytes; every frame must be non-empty"):
        rumimm.write(tmp_path / "z.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_a_frame_larger_than_a_tile_byte_count_can_hold_is_refused(tmp_path, scene, monkeypatch):
    monkeypatch.setattr(frame_job, "MAX_COUNT", 20)  # stands in for 2**32 - 1: TileByteCounts is LONG
    with pytest.raises(RumiError, match=r"frame 0 of 27 compressed to .* bytes, more than the 20 a TileByteCounts"):
        rumimm.write(tmp_path / "o.rumi", scene, tile=16)
    assert os.listdir(tmp_path) == []


def test_verify_catches_a_frame_that_does_not_decode_to_its_samples(tmp_path, scene, monkeypatch):
    original = codec.FrameEncoder.encode

    def lossy(self, frame):
        return original(self, np.zeros_like(frame))

    monkeypatch.setattr(codec.FrameEncoder, "encode", lossy)
    with pytest.raises(CodecError, match="frame 0 of 27 does not decode to the samples written"):
        rumimm.write(tmp_path / "v.rumi", scene, tile=16, verify=True)
    assert os.listdir(tmp_path) == []


def test_a_file_name_near_the_length_limit_is_written(tmp_path, scene):
    path = tmp_path / ("n" * 245 + ".rumi")  # 250 bytes: the temporary name must not exceed 255
    blob = rumimm.write(path, scene, tile=16)
    assert build_blob(path) == blob and os.listdir(tmp_path) == [path.name]


def test_the_written_file_gets_the_usual_permissions(tmp_path, scene):
    rumimm.write(tmp_path / "p.rumi", scene, tile=16)
    mask = os.umask(0)
    os.umask(mask)
    assert (tmp_path / "p.rumi").stat().st_mode & 0o777 == 0o666 & ~mask


# -- replacing through symlinks, keeping permission bits ------------------------------------
def test_writing_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path, scene):
    target = tmp_path / "data" / "real.rumi"
    target.parent.mkdir()
    target.write_bytes(b"old")
    link = tmp_path / "link.rumi"
    link.symlink_to(target)
    blob = rumimm.write(link, scene, tile=16)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert build_blob(target) == blob and os.listdir(target.parent) == ["real.rumi"]
    dangling = tmp_path / "dangling.rumi"
    dangling.symlink_to(tmp_path / "data" / "new.rumi")
    rumimm.write(dangling, scene, tile=16)
    assert dangling.is_symlink() and build_blob(tmp_path / "data" / "new.rumi") == blob


def test_replacing_a_file_keeps_its_permission_bits(tmp_path, scene):
    path = tmp_path / "ro.rumi"
    rumimm.write(path, scene[:1], tile=16)
    path.chmod(0o444)
    rumimm.write(path, scene, tile=16)
    assert path.stat().st_mode & 0o777 == 0o444
    path.chmod(0o640)
    rumimm.write(path, scene, tile=16)
    assert path.stat().st_mode & 0o777 == 0o640


# -- writers and encoders dropped or left in reference cycles ------------------------------
_CYCLES_SCRIPT = r"""
import gc, os, sys
import numpy as np
import rumimm
from rumimm.store import atomic
from rumimm.synthetic import eo_scene
scene = eo_scene(3, 64, 64, dtype="uint16", seed=1)
folder = sys.argv[1]
def fsync(fd):
    raise KeyboardInterrupt
real = atomic.os.fsync
kept = []
for i in range(20):
    atomic.os.fsync = fsync
    try:
        rumimm.write(os.path.join(folder, f"x{i}.rumi"), scene, tile=16)
    except KeyboardInterrupt as exc:
        kept.append(exc)  # the traceback keeps the writer, its encoder and OpenZL contexts in a cycle
    atomic.os.fsync = real
    w = rumimm.Writer(os.path.join(folder, f"y{i}.rumi"), scene.shape, scene.dtype, tile=16)
    w.write_row(0, scene[:, :16])
    w.self = w  # dropped without close, in a cycle
    del w
kept.clear()
gc.collect()
print("ok")
"""


@pytest.mark.slow
def test_writers_and_encoders_left_in_reference_cycles_are_collected_without_a_crash(tmp_path):
    # the cycle collector used to clear a Compressor and the CCtx referencing it in either order,
    # and OpenZL's extension aborts the process ("intrusive_counter::dec_ref ... underflow")
    script = tmp_path / "cycles.py"
    script.write_text(_CYCLES_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, (out.returncode, out.stderr[-2000:])
    assert out.stdout.split() == ["ok"]


def test_an_encoder_closed_frees_its_contexts_and_still_encodes():
    enc = codec.FrameEncoder(None, "uint16")
    frame = np.arange(256, dtype=np.uint16).reshape(16, 16)
    first = enc.encode(frame)
    assert len(enc._contexts) == 1
    enc.close()
    enc.close()
    assert enc._contexts == {}
    assert enc.encode(frame) == first
