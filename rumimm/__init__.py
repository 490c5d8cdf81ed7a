"""rumimm: a numba-JIT, memory-mapped reader and writer for rumi rasters.

>>> import rumimm
>>> blob = rumimm.write("scene.rumi", array)            # doctest: +SKIP
>>> with rumimm.open("scene.rumi", header=blob) as img:   # doctest: +SKIP
...     chip = img[:, 1024:1280, 2048:2304]

Most public names are imported on first use (the writer, reader, cube and codec
modules); ``index``/``validate`` are bound at import.  Importing rumimm, opening a
file and reading its metadata load neither numba nor OpenZL: the read engine loads
them at the first pixel read (``rumimm.engine.load``).
"""

from __future__ import annotations

import importlib

from .errors import BlobError, CodecError, CRSError, FormatError, RumiError, RumiWarning, WindowError

# Bound eagerly: ``validate`` is also a submodule name, and a lazy binding would be
# replaced by the module object the first time anything imports ``rumimm.validate``.
from .validate import Report, index, validate  # noqa: E402

__version__ = "0.1.0"

_LAZY = {
    "open": "rumimm.reader",
    "Image": "rumimm.reader",
    "write": "rumimm.writer",
    "Writer": "rumimm.writer",
    "Header": "rumimm.blob",
    "parse_blobs": "rumimm.blob",
    "Cube": "rumimm.cube",
    "ImageCollection": "rumimm.cube",
    "read_batch": "rumimm.cube",
    "set_num_threads": "rumimm.threads",
    "get_num_threads": "rumimm.threads",
    "DTYPES": "rumimm.dtypes",
    "PRESETS": "rumimm.codec",
    "to_dask": "rumimm.dask_array",
    "to_rumi": "rumimm.xarray_write",
    "from_geotiff": "rumimm.geotiff",
    "to_geotiff": "rumimm.geotiff",
    "quicklook": "rumimm.preview",
    "catalog": "rumimm.catalogs",
    "write_catalog": "rumimm.catalogs",
    "read_catalog": "rumimm.catalogs",
    "select_bbox": "rumimm.catalogs",
    "ChipDataset": "rumimm.chips",
    "clean": "rumimm.atomic",
}

__all__ = sorted(
    [*_LAZY, "index", "validate", "Report", "RumiError", "FormatError", "BlobError", "CodecError", "WindowError", "CRSError", "RumiWarning",
     "__version__"]
)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rumimm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
