"""rumimm: a numba-JIT, memory-mapped reader and writer for rumi rasters.

>>> import rumimm
>>> blob = rumimm.write("scene.rumi", array)            # doctest: +SKIP
>>> with rumimm.open("scene.rumi", header=blob) as img:   # doctest: +SKIP
...     chip = img[:, 1024:1280, 2048:2304]

Most public names are imported on first use (the writer, reader, cube and codec
modules); ``index``/``validate`` are bound at import.  Importing rumimm, opening a
file and reading its metadata load neither numba nor OpenZL: the read engine loads
them at the first pixel read (``rumimm.reader.engine.load``).
"""

from __future__ import annotations

import importlib

from rumimm.errors import BlobError, CodecError, CRSError, FormatError, RumiError, RumiWarning, WindowError

# Bound eagerly: ``validate`` is also a submodule name, and a lazy binding would be
# replaced by the module object the first time anything imports ``rumimm.validate``.
from rumimm.reader.validate import Report, index, validate  # noqa: E402

__version__ = "0.1.0"

_LAZY = {
    "open": "rumimm.reader.image",
    "Image": "rumimm.reader.image",
    "write": "rumimm.writer.writer",
    "Writer": "rumimm.writer.writer",
    "Header": "rumimm.format.blob",
    "parse_blobs": "rumimm.reader.blob_column",
    "Cube": "rumimm.reader.cube",
    "ImageCollection": "rumimm.reader.cube",
    "read_batch": "rumimm.reader.cube",
    "set_num_threads": "rumimm.reader.threads",
    "get_num_threads": "rumimm.reader.threads",
    "DTYPES": "rumimm.format.dtypes",
    "PRESETS": "rumimm.codec",
    "to_dask": "rumimm.integrations.dask_array",
    "to_rumi": "rumimm.integrations.xarray_write",
    "from_geotiff": "rumimm.integrations.geotiff",
    "to_geotiff": "rumimm.integrations.geotiff",
    "quicklook": "rumimm.integrations.preview",
    "catalog": "rumimm.integrations.catalogs",
    "write_catalog": "rumimm.integrations.catalogs",
    "read_catalog": "rumimm.integrations.catalogs",
    "select_bbox": "rumimm.integrations.catalogs",
    "ChipDataset": "rumimm.integrations.chips",
    "clean": "rumimm.writer.atomic",
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
