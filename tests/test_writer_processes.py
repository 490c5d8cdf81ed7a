"""Encoding worker processes and killed writers: no script runs twice, nothing outlives a SIGKILL.

Each test runs a small writer script in a child Python (so it can be killed or run
without an ``if __name__ == "__main__":`` guard) and checks what is left afterwards,
within a few seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import rumimm
from rumimm.cli import main as cli_main
from rumimm.store import atomic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Top-level code only, no __main__ guard: a multiprocessing spawn or forkserver child would
# import this script again and append a second line to the marker file.
UNGUARDED = """
import numpy as np, rumimm, rumimm.writer.writer as W
with open({marker!r}, "a") as fh:
    fh.write("ran\\n")
W.PROCESS_MIN_BYTES = W.PROCESS_START_MIN_BYTES = 0  # the thresholds are about speed only
a = (np.arange(3 * 200 * 150, dtype=np.uint16) % 977).reshape(3, 200, 150)
w = rumimm.Writer({path!r}, a.shape, a.dtype, tile=32, threads=2)
assert w.backend_name == "processes", w.backend_name
for r in range(w.rows):
    w.write_row(r, a[:, slice(*w.row_span(r))])
assert w.close() == rumimm.write({path!r} + ".serial", a, tile=32, threads=1)
assert open({path!r}, "rb").read() == open({path!r} + ".serial", "rb").read()
from rumimm.writer import encode_pool
print("wrote", *[wk.proc.pid for wk in encode_pool._POOL.workers])
"""

# Writes some rows, reports its workers and temporary file, then waits to be killed.
KILLED = """
import os, sys, threading, time, numpy as np, rumimm, rumimm.writer.writer as W
from rumimm.writer import encode_pool
W.PROCESS_MIN_BYTES = W.PROCESS_START_MIN_BYTES = 0
a = (np.arange(2 * 256 * 256, dtype=np.uint16) % 1013).reshape(2, 256, 256)

def run():
    w = rumimm.Writer({path!r}, a.shape, a.dtype, tile=32, threads={threads})
    for r in range(3):
        w.write_row(r, a[:, slice(*w.row_span(r))])
    pids = [wk.proc.pid for wk in encode_pool._POOL.workers] if encode_pool._POOL else []
    print(" ".join(map(str, pids)), "|", w._file.tmp, flush=True)
    time.sleep(60)

if {in_thread}:
    threading.Thread(target=run).start()
else:
    run()
"""


def run_script(tmp_path, source: str, stdin: bool = False, timeout: float = 60) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    if stdin:  # python - < script.py: the case a forkserver child could not even start from
        with open(script) as fh:
            return subprocess.run([sys.executable, "-"], stdin=fh, capture_output=True, text=True, env=env,
                                  cwd=tmp_path, timeout=timeout)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("stdin", [False, True], ids=["script-file", "script-on-stdin"])
def test_an_unguarded_script_writing_with_two_processes_runs_exactly_once(tmp_path, stdin):
    marker = tmp_path / "runs.txt"
    done = run_script(tmp_path, UNGUARDED.format(marker=str(marker), path=str(tmp_path / "out.rumi")), stdin=stdin)
    assert done.returncode == 0, done.stderr
    word, *workers = done.stdout.split()
    assert word == "wrote" and len(workers) == 1
    assert marker.read_text() == "ran\n"
    assert "Traceback" not in done.stderr and "leaked" not in done.stderr
    if sys.platform.startswith("linux"):  # the workers ended with the script
        deadline = time.monotonic() + 10
        while not _gone(int(workers[0])) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(int(workers[0]))


def _gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _shm_paths(pid: int) -> list[str]:
    """Named shared memory and semaphores a process holds open or mapped."""
    found = []
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                pass
        with open(f"/proc/{pid}/maps") as fh:
            found += [line.split(None, 5)[-1].strip() for line in fh if "/" in line]
    except (FileNotFoundError, PermissionError):
        pass
    return [p for p in found if p.startswith("/dev/shm")]


def _start_killable(tmp_path, threads: int, in_thread: bool):
    path = tmp_path / "killed.rumi"
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(KILLED.format(path=str(path), threads=threads, in_thread=in_thread)))
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    assert line, "the writer script died before writing its rows"
    pids, tmp = line.split("|")
    return proc, [int(p) for p in pids.split()], tmp.strip(), path


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("in_thread", [False, True], ids=["main-thread", "other-thread"])
def test_sigkill_of_a_writer_leaves_no_worker_and_no_shared_memory(tmp_path, in_thread):
    proc, workers, tmp, path = _start_killable(tmp_path, threads=2, in_thread=in_thread)
    try:
        assert len(workers) == 1 and not _gone(workers[0])
        for pid in [proc.pid, *workers]:
            assert _shm_paths(pid) == []  # rows travel in a memfd, which has no name to leak
        assert os.path.exists(tmp)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_gone(p) for p in workers)
    # the killed writer's temporary file stays, recognisably named, until a clean or the next write
    assert atomic.TEMP_PATTERN.match(os.path.basename(tmp))
    assert atomic.clean(tmp_path) == [tmp]
    assert not os.path.exists(tmp) and not path.exists()


@pytest.mark.slow
def test_the_next_write_of_a_path_removes_a_killed_serial_writers_temporary_file(tmp_path):
    proc, workers, tmp, path = _start_killable(tmp_path, threads=1, in_thread=False)
    proc.kill()
    proc.wait()
    assert workers == [] and os.path.exists(tmp)
    other = tmp_path / "other.rumi"
    rumimm.write(other, np.zeros((8, 8), np.uint8))
    assert os.path.exists(tmp)  # another file's write leaves it alone
    rumimm.write(path, np.zeros((8, 8), np.uint8))
    assert not os.path.exists(tmp)
    assert sorted(os.listdir(tmp_path)) == ["killed.rumi", "other.rumi", "writer.py"]


def test_a_live_writers_temporary_file_is_never_cleaned(tmp_path):
    a = np.zeros((2, 40, 40), np.uint16)
    with rumimm.Writer(tmp_path / "live.rumi", a.shape, a.dtype, tile=16) as w:
        assert atomic.clean(tmp_path) == [] and atomic.clean(tmp_path / "live.rumi") == []
        rumimm.write(tmp_path / "live.rumi", a, tile=16)  # a second writer of the same path
        assert os.path.exists(w._file.tmp)
        for r in range(w.rows):
            w.write_row(r, a[:, slice(*w.row_span(r))])
    assert sorted(os.listdir(tmp_path)) == ["live.rumi"]


def test_a_dead_pid_whose_file_is_still_locked_is_not_stale(tmp_path):
    # a writer in another pid namespace looks dead by pid but holds the lock
    import fcntl

    dead = _a_dead_pid()
    tmp = tmp_path / f".x.rumi.rumimm-{dead}-0123abcd.tmp"
    tmp.write_bytes(b"partial")
    with open(tmp, "rb") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        assert atomic.clean(tmp_path) == []
    assert atomic.clean(tmp_path / "x.rumi") == [str(tmp)]


def _a_dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_clean_only_touches_rumimm_temporary_files(tmp_path):
    dead = _a_dead_pid()
    keep = [".a.rumi.1234.tmp", "a.rumi", f".a.rumi.rumimm-{dead}-zzzzzzzz.tmp", f"b.rumimm-{dead}-0123abcd.tmp"]
    for name in keep:
        (tmp_path / name).write_bytes(b"x")
    stale = tmp_path / f".a.rumi.rumimm-{dead}-0123abcd.tmp"
    stale.write_bytes(b"x")
    assert atomic.clean(tmp_path / "b.rumi") == []
    assert atomic.clean(str(tmp_path)) == [str(stale)]
    assert sorted(os.listdir(tmp_path)) == sorted(keep)
    assert atomic.clean(tmp_path / "missing-dir" / "x.rumi") == []
    with pytest.raises(FileNotFoundError):
        atomic.clean("")


def test_the_clean_command_lists_what_it_removed(tmp_path, capsys):
    stale = tmp_path / f".s.rumi.rumimm-{_a_dead_pid()}-0123abcd.tmp"
    stale.write_bytes(b"x")
    assert cli_main(["clean", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"removed {stale}\n"
    assert cli_main(["clean", str(tmp_path / "s.rumi")]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 's.rumi'}: no temporary files of killed writers\n"
