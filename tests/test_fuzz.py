"""Replay of every fuzz target's seeds, grown corpus and regressions (tests/fuzz), without atheris.

Each input goes through its target function as the fuzzer calls it: only the exceptions the
target lists, no hang (an alarm per input), and no input allocating more than a few MiB
(tracemalloc, per input).  The seeds must exercise both outcomes where a target has two.
"""

from __future__ import annotations

import signal
import tracemalloc

import pytest
from fuzz.seeds import kept, seeds
from fuzz.targets import TARGETS

#: Per-input bounds of the replay (the fuzzer's own: libFuzzer -timeout and -rss_limit_mb, see tests/fuzz/main.py)
SECONDS = 30
PEAK_BYTES = 32 << 20


#: Targets whose refusal reaches the caller (the others try several entry points and catch each)
_REFUSING = ("trailer", "geotiff", "catalog", "pam", "remote", "remote_read")


class _Hang(Exception):
    pass


def _alarm(*_):
    raise _Hang


def replay(name: str, items) -> int:
    t = TARGETS[name]
    allowed = t.allowed_types()
    refused = 0
    for _, data in items[:2]:  # imports, JIT compilation and caches outside the measurement
        try:
            t.run(data)
        except allowed:
            pass
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for label, data in items:
            tracemalloc.start()
            signal.alarm(SECONDS)
            try:
                t.run(data)
            except allowed:
                refused += 1
            except _Hang:
                pytest.fail(f"{name}/{label}: no answer within {SECONDS} s")
            except Exception as exc:
                pytest.fail(f"{name}/{label}: {type(exc).__name__}: {exc}")
            finally:
                signal.alarm(0)
                peak = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            assert peak < PEAK_BYTES, f"{name}/{label}: {peak} bytes allocated"
    finally:
        signal.signal(signal.SIGALRM, old)
    return refused


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_seed_and_kept_input_of_each_fuzz_target_holds_its_invariants(name):
    items = seeds(name)
    assert len(items) >= 4, items
    refused = replay(name, items + kept(name))
    if name in _REFUSING:  # both outcomes are seeded: valid inputs and known-bad ones
        assert 0 < refused < len(items) + len(kept(name)), (name, refused, len(items))


def test_the_seeds_are_the_same_on_every_run():
    for name in ("header", "trailer", "frame", "pam", "remote"):
        assert seeds(name) == seeds(name)


@pytest.mark.slow
def test_spec_02_seed_files_read_the_same_pixels_in_rumimm_and_rumi_eo_0_26_1(tmp_path):
    # the differential the long run makes over its grown corpus (tests/fuzz/peer026.py), on the seeds
    import peer026
    from fuzz.peer026 import compare_folders
    from fuzz.seeds import CORPUS, REGRESSIONS, write_seeds

    peer026.require()
    write_seeds(tmp_path, ["open_read"])
    folders = [tmp_path / "open_read"] + [d / "open_read" for d in (CORPUS, REGRESSIONS) if (d / "open_read").is_dir()]
    got = compare_folders(folders)
    assert got["read_by_both"] >= 20, got
    assert got["mismatches"] == [], got
