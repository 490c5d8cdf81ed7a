"""Cold start in a fresh interpreter: import, open, first 64 x 64 read (``timeraw_``).

Each sample runs in a new Python process, so nothing is imported or compiled yet;
numba's on-disk kernel cache (``cache=True``) is warm, as it is on any machine
after the first run (``setup_cache`` reads once to make sure).  The time covers
importing rumimm, loading the cached kernels, opening the file and decoding one
frame: what a freshly forked or spawned data-loader worker pays before its first chip.
"""

from __future__ import annotations

import os

import rumimm

from ._common import BANDS, SIZE, scene, write_scene

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the child process must find rumimm even when it is not installed (a plain checkout)
_SETUP = f"import sys; sys.path.append({_ROOT!r})"


class ColdStart:
    params = (["tile", "cell"],)
    param_names = ["unit"]
    timeout = 120
    # each sample is a new interpreter (~0.6-1.5 s); 5 per round keeps check.sh's 4 rounds at 20 per build
    repeat = (2, 5, 30.0)

    def setup_cache(self):
        arr = scene(BANDS, SIZE)
        files = {}
        for unit in ("tile", "cell"):
            path = os.path.abspath(f"cold-{unit}.rumi")
            blob = write_scene(path, arr, unit=unit)
            with rumimm.open(path, header=blob) as img:  # compile and cache the kernels on disk
                img[0, :64, :64]
            files[unit] = (path, blob)
        return files

    def timeraw_import(self, files, unit):
        return "import rumimm", _SETUP

    def timeraw_import_open_read_64(self, files, unit):
        path, blob = files[unit]
        return (f"import rumimm\n"
                f"img = rumimm.open({path!r}, header=BLOB)\n"
                f"img[0, :64, :64]\n"), f"{_SETUP}; BLOB = bytes.fromhex({blob.hex()!r})"

    def timeraw_import_open_no_blob_read_64(self, files, unit):
        path, _ = files[unit]
        return (f"import rumimm\n"
                f"img = rumimm.open({path!r})\n"
                f"img[0, :64, :64]\n"), _SETUP
