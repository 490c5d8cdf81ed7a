"""rumimm: a numba-JIT, memory-mapped reader and writer for rumi rasters.

>>> import rumimm
>>> blob = rumimm.write("scene.rumi", array)            # doctest: +SKIP
>>> with rumimm.open("scene.rumi", header=blob) as img:   # doctest: +SKIP
...     chip = img[:, 1024:1280, 2048:2304]

Most public names are imported on first use (the writer, reader, cube and codec
modules); ``build_blob``/``validate`` are bound at import.  Renamed names keep
working for one release through ``_DEPRECATED`` (a DeprecationWarning naming the
successor; docs/migration.md).  Importing rumimm, opening a
file and reading its metadata load neither numba nor OpenZL: the read engine loads
them at the first pixel read (``rumimm.reader.engine.load``).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from rumimm._version import __version__
from rumimm.errors import BlobError, CodecError, CRSError, FormatError, RumiError, RumiWarning, WindowError

# Bound eagerly: ``validate`` is also a submodule name, and a lazy binding would be
# replaced by the module object the first time anything imports ``rumimm.validate``.
from rumimm.reader.validate import Report, build_blob, validate

_LAZY = {
    "open": "rumimm.reader.image",
    "Image": "rumimm.reader.image",
    "write": "rumimm.writer.writer",
    "Writer": "rumimm.writer.writer",
    "Header": "rumimm.format.blob",
    "parse_header": "rumimm.format.v2",
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
    "convert": "rumimm.writer.convert",
    "convert_many": "rumimm.integrations.bulk",
    "profile_codecs": "rumimm.writer.profile",
}

if TYPE_CHECKING:  # the lazy names as type checkers and editors see them; never run
    from rumimm.codec import PRESETS
    from rumimm.format.blob import Header
    from rumimm.format.dtypes import DTYPES
    from rumimm.format.v2 import parse_header
    from rumimm.integrations.bulk import convert_many
    from rumimm.integrations.catalogs import catalog, read_catalog, select_bbox, write_catalog
    from rumimm.integrations.chips import ChipDataset
    from rumimm.integrations.dask_array import to_dask
    from rumimm.integrations.geotiff import from_geotiff, to_geotiff
    from rumimm.integrations.preview import quicklook
    from rumimm.integrations.xarray_write import to_rumi
    from rumimm.reader.blob_column import parse_blobs
    from rumimm.reader.cube import Cube, ImageCollection, read_batch
    from rumimm.reader.image import Image, open
    from rumimm.reader.threads import get_num_threads, set_num_threads
    from rumimm.writer.atomic import clean
    from rumimm.writer.convert import convert
    from rumimm.writer.profile import profile_codecs
    from rumimm.writer.writer import Writer, write

# A literal list (ruff and mypy read it): the names of _LAZY, the eager ones above, and __version__.
__all__ = [
    "DTYPES", "PRESETS", "BlobError", "CRSError", "ChipDataset", "CodecError", "Cube", "FormatError", "Header",
    "Image", "ImageCollection", "Report", "RumiError", "RumiWarning", "WindowError", "Writer", "__version__",
    "build_blob", "catalog", "clean", "convert", "convert_many", "from_geotiff", "get_num_threads", "open",
    "parse_blobs", "parse_header", "profile_codecs", "quicklook", "read_batch", "read_catalog", "select_bbox",
    "set_num_threads", "to_dask", "to_geotiff", "to_rumi", "validate", "write", "write_catalog",
]


#: Old top-level name -> its successor (PEP 562: the old name warns on every use, so it is never cached).
_DEPRECATED = {
    "index": "build_blob",        # rebuilds a file's blob; Image.index(x, y) is rasterio's pixel lookup
    "profile": "profile_codecs",  # times codec recipes; Image.profile is rasterio's creation options
}


def __getattr__(name: str) -> Any:
    new = _DEPRECATED.get(name)
    if new is not None:
        from rumimm._deprecation import renamed

        renamed(f"rumimm.{name}", f"rumimm.{new}")
        return getattr(sys.modules[__name__], new)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'rumimm' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
