"""Write throughput per codec preset, per thread count and frame unit; compressed size."""

from __future__ import annotations

import os

import numpy as np

import rumimm

from ._common import BANDS, need, scene, write_scene

WRITE_SIZE = 1024  # 4 x 1024 x 1024: 8 MiB of uint16, 16 MiB of float32
PRESETS = sorted(getattr(rumimm, "PRESETS", ()))


def _skip_unsupported(preset: str, array: np.ndarray, path: str) -> None:
    """Write a 64 x 64 corner with ``preset`` (builds its graph); skip a preset this commit lacks or refuses.

    asv skips a parameter combination whose setup raises NotImplementedError.
    """
    need("PRESETS")
    if preset not in rumimm.PRESETS:
        raise NotImplementedError(f"no preset {preset!r} in this rumimm")
    try:
        write_scene(path, array[:, :64, :64], codec=preset)
    except (TypeError, ValueError) as exc:  # RumiError is a ValueError
        raise NotImplementedError(f"preset {preset!r} refuses {array.dtype}: {exc}") from None


class WritePreset:
    """``rumimm.write`` of a 4 x 1024 x 1024 scene with each codec preset (2 threads)."""

    params = (PRESETS, ["uint16", "float32"])
    param_names = ["preset", "dtype"]
    timeout = 240
    number = 1
    repeat = (1, 5, 60.0)

    def setup_cache(self):
        out = {}
        for dtype in ("uint16", "float32"):
            path = f"scene-{dtype}.npy"
            np.save(path, scene(BANDS, WRITE_SIZE, dtype=dtype))
            out[dtype] = path
        return out

    def setup(self, sources, preset, dtype):
        self.array = np.load(sources[dtype])
        self.path = f"write-{preset}-{dtype}.rumi"
        _skip_unsupported(preset, self.array, self.path)

    def teardown(self, sources, preset, dtype):
        path = getattr(self, "path", None)  # asv tears down a skipped combination too
        if path and os.path.exists(path):
            os.remove(path)

    def time_write(self, sources, preset, dtype):
        write_scene(self.path, self.array, codec=preset)

    def track_size_ratio(self, sources, preset, dtype):
        """File size over raw size (lower is better)."""
        write_scene(self.path, self.array, codec=preset)
        return os.path.getsize(self.path) / self.array.nbytes

    track_size_ratio.unit = "file / raw"


class WriteThreads:
    """``rumimm.write`` with the default preset on 1 and 2 threads, tile and cell frames."""

    params = ([1, 2], ["tile", "cell"])
    param_names = ["threads", "unit"]
    timeout = 240
    number = 1
    repeat = (1, 5, 60.0)

    def setup_cache(self):
        np.save("scene.npy", scene(BANDS, WRITE_SIZE))
        return "scene.npy"

    def setup(self, source, threads, unit):
        self.array = np.load(source)
        self.path = f"write-{threads}-{unit}.rumi"
        rumimm.write(self.path, self.array[:, :64, :64], tile=512, unit=unit, threads=threads)

    def teardown(self, source, threads, unit):
        if os.path.exists(self.path):
            os.remove(self.path)

    def time_write(self, source, threads, unit):
        rumimm.write(self.path, self.array, tile=512, unit=unit, threads=threads)
