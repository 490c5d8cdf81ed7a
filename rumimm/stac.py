"""``rumimm.stac``: STAC Items for rumi files (the header blob in the Item), catalogs as ItemCollections
and back, and STAC search results loaded with no header request.

The implementation is :mod:`rumimm.integrations.stac`; this name is the one users import
(``from rumimm import stac``).  Needs ``pip install rumimm[stac]``.
"""

from rumimm.integrations.stac import (
    ASSET_KEY,
    CODEC_FIELD,
    EO,
    FILE,
    HEADER_FIELD,
    MEDIA_TYPE,
    PROJECTION,
    RASTER,
    SPEC_FIELD,
    collection,
    from_items,
    item,
    items,
    load,
    read_stac_geoparquet,
    redact,
    to_item_collection,
    to_items,
    to_stac_geoparquet,
)

__all__ = ["ASSET_KEY", "CODEC_FIELD", "EO", "FILE", "HEADER_FIELD", "MEDIA_TYPE", "PROJECTION", "RASTER", "SPEC_FIELD",
           "collection", "from_items", "item", "items", "load", "read_stac_geoparquet", "redact", "to_item_collection",
           "to_items", "to_stac_geoparquet"]
