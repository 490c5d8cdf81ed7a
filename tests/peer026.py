"""rumi-eo 0.26.1 (spec 0.2) as a black-box peer, run in its own interpreter.

rumi-eo 0.26.1 pins geozl 0.18 / openzl 0.2, which cannot share a venv with rumimm's
openzl 0.3 and geozl 0.19, so the peer runs in a separate venv (``.ci/peer026.sh``
creates ``.venv-rumi026`` in the repository).  Its interpreter is
``$RUMIMM_PEER026_PYTHON``, else ``.venv-rumi026/bin/python`` under the repository.
Without it the peer tests skip, except in CI (``CI=true``), where they fail.

Each helper runs one short script in that interpreter (only rumi's public API:
``frames``, ``write``, ``read``, ``read_many``, ``info``) and exchanges arrays as
``.npy`` files and results as JSON.  Batch work into one call: each call starts a
process (about half a second).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

__all__ = ["PYTHON", "available", "peer_info", "peer_read", "peer_write", "require", "run"]

ROOT = Path(__file__).resolve().parent.parent
PYTHON = os.environ.get("RUMIMM_PEER026_PYTHON") or str(ROOT / ".venv-rumi026" / "bin" / "python")

_PRELUDE = r'''
import json, os, sys
import numpy as np
import rumi
assert rumi.__version__ == "0.26.1", rumi.__version__
args = json.loads(sys.argv[1])
'''

_WRITE = _PRELUDE + r'''
import geozl
out = []
for job in args["jobs"]:
    arr = np.load(job["npy"], allow_pickle=False)
    if job.get("view"):
        arr = arr.view(job["view"])
    table = rumi.frames(arr, job["pattern"], tile_size=job["tile"])
    for frame in table:
        data = frame.data.view(np.float64) if frame.data.dtype == np.complex128 else frame.data
        frame.compressed = geozl.compress(data, graph=geozl.graph(data, job.get("recipe", "planar>zigzag>zstd")))
    time = [tuple(t) if isinstance(t, list) else t for t in job["time"]]
    geo = job.get("geo") or {}
    if "transform" in geo:
        geo["transform"] = tuple(geo["transform"])
    _, header = rumi.write(job["path"], table, bands=job["bands"], time=time, **geo)
    out.append(bytes(header).hex())
print(json.dumps(out))
'''

_READ = _PRELUDE + r'''
out = []
for job in args["jobs"]:
    header = bytes.fromhex(job["header"]) if job.get("header") else rumi.info(source=job["path"]).header
    kw = {}
    for k in ("bands", "time"):
        if job.get(k) is not None:
            kw[k] = job[k]
    if job.get("window") is not None:
        kw["window"] = tuple(job["window"])
    arr = rumi.read(job["path"], header, **kw)
    np.save(job["npy"], arr if arr.dtype.kind != "V" else arr.view(np.uint8))
    out.append(str(arr.dtype))
print(json.dumps(out))
'''

_INFO = _PRELUDE + r'''
out = []
for path in args["paths"]:
    m = rumi.info(source=path)
    out.append({"header": bytes(m.header).hex(), "shape": list(m.shape), "time_count": m.time_count,
                "dtype": str(m.dtype), "tile": list(m.tile), "frame_layout": m.frame_layout,
                "frames": m.frames, "bands": m.bands, "time": [str(t) for t in m.time], "time_kind": m.time_kind,
                "transform": m.transform, "crs": m.crs, "pixel_is_point": m.pixel_is_point})
print(json.dumps(out))
'''


def available() -> bool:
    return Path(PYTHON).is_file() and os.access(PYTHON, os.X_OK)


def require() -> None:
    """Skip the calling test without the peer; in CI (``CI=true``) fail instead."""
    if available():
        return
    msg = (f"rumi-eo 0.26.1 peer interpreter not found at {PYTHON}; run .ci/peer026.sh or set "
           "RUMIMM_PEER026_PYTHON")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def run(script: str, args: dict, timeout: float = 300) -> object:
    """Run ``script`` in the peer interpreter with ``args`` (JSON) and return its JSON output."""
    require()
    proc = subprocess.run([PYTHON, "-c", script, json.dumps(args)], capture_output=True, text=True, check=False,
                          timeout=timeout, cwd=tempfile.gettempdir())
    if proc.returncode:
        raise PeerError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}",
                        proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


class PeerError(RuntimeError):
    """The peer raised: ``args[0]`` is its last stderr line, ``args[1]`` the whole stderr."""


def peer_write(jobs: list[dict], workdir) -> list[bytes]:
    """Write files with the peer.  Each job: ``path``, ``array``, ``pattern`` (rumi.frames), ``tile``,
    ``bands``, ``time`` and optional ``geo`` (transform, crs, pixel_is_point) and ``recipe``.
    Returns the headers ``rumi.write`` returned."""
    spec = []
    for i, job in enumerate(jobs):
        arr = np.ascontiguousarray(job["array"])
        npy = os.path.join(workdir, f"peer-in-{i}.npy")
        view = None
        if arr.dtype.kind == "V" or arr.dtype.names:
            raise ValueError("structured arrays cannot pass to the peer")
        np.save(npy, arr)
        spec.append({k: v for k, v in job.items() if k != "array"} | {"npy": npy, "view": view,
                                                                       "path": os.path.abspath(job["path"])})
    return [bytes.fromhex(h) for h in run(_WRITE, {"jobs": spec})]


def peer_read(jobs: list[dict], workdir) -> list[np.ndarray]:
    """Read files with the peer.  Each job: ``path`` and optional ``header`` (bytes; else the peer
    rebuilds it), ``bands``, ``time`` (lists of positions) and ``window`` (row, col, height, width)."""
    spec = []
    for i, job in enumerate(jobs):
        npy = os.path.join(workdir, f"peer-out-{i}.npy")
        header = job.get("header")
        spec.append({"path": os.path.abspath(job["path"]), "npy": npy,
                     "header": bytes(header).hex() if header else None,
                     "bands": job.get("bands"), "time": job.get("time"), "window": job.get("window")})
    run(_READ, {"jobs": spec})
    return [np.load(s["npy"]) for s in spec]


def peer_info(paths) -> list[dict]:
    """``rumi.info(source=path)`` of each path, as JSON-safe dicts (``header`` as hex)."""
    return run(_INFO, {"paths": [os.path.abspath(p) for p in paths]})


if __name__ == "__main__":  # a quick check of the setup
    print(PYTHON, available())
    sys.exit(0 if available() else 1)
