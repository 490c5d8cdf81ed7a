"""Run one fuzz target under atheris (libFuzzer): ``python -m tests.fuzz.main TARGET [libFuzzer flags] [CORPUS...]``.

rumimm's modules the target names are imported inside ``atheris.instrument_imports`` so
libFuzzer sees their branch coverage (``rumimm.kernels``, numba's, is left alone: numba
compiles those functions from their bytecode).  Before fuzzing, the target runs once on
each seed of its own (imports, JIT compilation, caches), then the process's address space
is capped at its size then plus ``ALLOC_LIMIT`` (1 GiB): an allocation sized from an
unchecked header field fails with ``MemoryError``, which no target allows, so it is a
finding.  ``-rss_limit_mb``, unless given, is the warm process's resident size plus
``RSS_MARGIN_MB`` (200 MB).
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RSS_MARGIN_MB = 200  # resident memory any one input may add (inputs are < 64 KiB)


def _vm_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _self_command(name: str) -> str:
    """An executable that runs this target again: libFuzzer's -merge, -fork and -minimize_crash
    start their inner runs as ``argv[0] flags...`` through the shell."""
    import shlex
    import tempfile

    fd, tmp = tempfile.mkstemp(prefix=f"rumimm-fuzz-{name}-", suffix=".sh")
    with os.fdopen(fd, "w") as f:
        f.write(f"#!/bin/sh\ncd {shlex.quote(str(ROOT))} && exec {shlex.quote(sys.executable)} -m tests.fuzz.main "
                f"{shlex.quote(name)} \"$@\"\n")
    os.chmod(tmp, 0o755)
    path = os.path.join(tempfile.gettempdir(), f"rumimm-fuzz-{os.getuid()}-{name}.sh")  # one per target, replaced
    os.replace(tmp, path)
    return path


def main(argv: list[str]) -> None:
    import atheris

    for p in (str(ROOT), str(ROOT / "tests")):
        if p not in sys.path:
            sys.path.insert(0, p)
    name = argv[1]
    from fuzz.targets import ALLOC_LIMIT, TARGETS  # the registry itself is not instrumented

    t = TARGETS[name]
    with atheris.instrument_imports(include=["rumimm"], exclude=["rumimm.kernels"]):
        import importlib

        for mod in ("rumimm", "rumimm.errors", *t.modules):
            importlib.import_module(mod)
    from fuzz.seeds import seeds

    for _, data in seeds(name):  # warm up outside the limits
        t(data)
    # The numba kernels load on the first read of more than a few frames, which small seeds may never
    # make: load them now, so the resident-memory limit below counts them (about 100 MB of LLVM and
    # compiled code) and a later input that reads them is not called out of memory for it.
    from rumimm.reader import engine

    engine.load()
    flags = argv[2:]
    if not any(f.startswith("-rss_limit_mb=") for f in flags):  # resident memory: what the warm process has + 200 MB
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        flags.append(f"-rss_limit_mb={rss + RSS_MARGIN_MB}")
    if os.environ.get("RUMIMM_FUZZ_NO_ALLOC_LIMIT") != "1" and sys.platform == "linux":
        cap = _vm_bytes() + ALLOC_LIMIT
        # the soft limit only: libFuzzer's inner runs (-merge) inherit it and set their own
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
    atheris.Setup([_self_command(name), *flags], t)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
