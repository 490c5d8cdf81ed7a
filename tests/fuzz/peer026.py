"""The spec 0.2 differential: files of a corpus that rumimm reads are read by rumi-eo 0.26.1, in one batch.

rumi-eo 0.26.1 cannot share rumimm's venv (its openzl and geozl pins differ), so it runs
in its own interpreter (``tests/peer026.py`` finds it) over every spec 0.2 file of the
given folders at once, not per input.  Each file rumimm reads is read by the peer with its
own header (``rumi.info``); where both succeed the pixels must be equal byte for byte.
The peer's refusals, and its crashes (the batch resumes after the file it died on), are
counted but are not findings.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

MAX_FILES = 4000

_SCRIPT = r'''
import json, sys
import numpy as np
import rumi
assert rumi.__version__ == "0.26.1", rumi.__version__
jobs = json.loads(open(sys.argv[1]).read())
start = int(sys.argv[2])
for i in range(start, len(jobs)):
    path, npy = jobs[i]
    print(json.dumps({"i": i, "start": True}), flush=True)
    try:
        header = rumi.info(source=path).header
        arr = np.asarray(rumi.read(path, header))
        np.save(npy, arr if arr.dtype.kind != "V" else arr.view(np.uint8))
        print(json.dumps({"i": i, "ok": True, "dtype": str(arr.dtype), "shape": list(arr.shape)}), flush=True)
    except Exception as exc:
        print(json.dumps({"i": i, "ok": False, "error": type(exc).__name__}), flush=True)
'''


def _files(folders) -> list[Path]:
    seen, out = set(), []
    for folder in folders:
        for p in sorted(Path(folder).iterdir()):
            if not p.is_file():
                continue
            data = p.read_bytes()
            h = hashlib.sha1(data).hexdigest()
            if data[:4] == b"RUMI" and h not in seen:
                seen.add(h)
                out.append(p)
    return out[:MAX_FILES]


def _rumimm_read(path: Path):
    import rumimm

    try:
        with rumimm.open(path, cache_bytes=0) as img:
            return img[...]
    except rumimm.RumiError:
        return None


def compare_folders(folders, python: str | None = None) -> dict:
    """Compare rumimm's and the peer's reads of the spec 0.2 files in ``folders``.

    Returns counts (``files``, ``read_by_rumimm``, ``read_by_both``, ``peer_refused``,
    ``peer_crashed``) and ``mismatches`` (file names), or ``{"note": ...}`` without the peer.
    """
    tests = str(Path(__file__).resolve().parents[1])
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from peer026 import PYTHON

    python = python or PYTHON
    if not os.path.exists(python):
        return {"note": "skipped: rumi-eo 0.26.1's venv is absent (set RUMIMM_PEER026_PYTHON; .ci/peer026.sh makes it)"}
    files = _files(folders)
    ours = {}
    with tempfile.TemporaryDirectory(prefix="rumimm-peer026-") as d:
        jobs = []
        for p in files:
            got = _rumimm_read(p)
            if got is not None:
                ours[len(jobs)] = got
                jobs.append((str(p.resolve()), os.path.join(d, f"{len(jobs)}.npy")))
        job_file = os.path.join(d, "jobs.json")
        Path(job_file).write_text(json.dumps(jobs))
        results: dict[int, dict] = {}
        crashed = 0
        start = 0
        while start < len(jobs):
            proc = subprocess.run([python, "-c", _SCRIPT, job_file, str(start)], capture_output=True, text=True,
                                  check=False, timeout=1800, cwd=d)
            last = start - 1
            for line in proc.stdout.splitlines():
                rec = json.loads(line)
                last = rec["i"]
                if "ok" in rec:
                    results[rec["i"]] = rec
            if proc.returncode == 0:
                break
            if last < start and not proc.stdout:
                raise RuntimeError(f"rumi-eo 0.26.1 did not start: {proc.stderr.strip()[-400:]}")
            crashed += 1  # died on job `last`: go on after it
            start = last + 1
        mismatches = []
        both = 0
        for i, rec in results.items():
            if not rec["ok"]:
                continue
            theirs = np.load(jobs[i][1])
            mine = ours[i]
            both += 1
            a = np.ascontiguousarray(mine).view(np.uint8).reshape(-1)
            b = np.ascontiguousarray(theirs).view(np.uint8).reshape(-1)
            if a.shape != b.shape or not np.array_equal(a, b):
                mismatches.append(Path(jobs[i][0]).name)
    return {"files": len(files), "read_by_rumimm": len(jobs), "read_by_both": both,
            "peer_refused": sum(1 for r in results.values() if not r["ok"]), "peer_crashed": crashed,
            "mismatches": mismatches}
