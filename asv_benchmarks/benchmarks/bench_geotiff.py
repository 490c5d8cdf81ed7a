"""GeoTIFF conversion: ``from_geotiff`` and ``to_geotiff`` against the whole-array recipe.

``asv_benchmarks/compare/geotiff_convert.py`` runs the same comparison in fresh processes with
peak-memory columns; these are the asv rows for tracking it over commits.
"""

from __future__ import annotations

import os

import rumimm

from ._common import BANDS, CRS, SIZE, TILE, TRANSFORM, need, scene, write_scene


def _source(path: str) -> None:
    import rasterio
    from affine import Affine

    with rasterio.open(path, "w", driver="GTiff", count=BANDS, height=SIZE, width=SIZE, dtype="uint16",
                       crs=f"EPSG:{CRS}", transform=Affine(*TRANSFORM), tiled=True, blockxsize=TILE,
                       blockysize=TILE, compress="deflate", interleave="band", photometric="minisblack") as ds:
        ds.write(scene())


class GeoTIFFConvert:
    """GeoTIFF -> rumi of the 4 x 2048 x 2048 scene: streamed, and read whole then written."""

    timeout = 240
    number = 1
    repeat = (1, 5, 60.0)

    def setup_cache(self):
        need("from_geotiff")
        _source("source.tif")
        return os.path.abspath("source.tif")

    def setup(self, source):
        need("from_geotiff")
        write_scene("warm.rumi", scene(1, 64))  # load the kernels outside the timer

    def time_from_geotiff(self, source):
        rumimm.from_geotiff(source, "converted.rumi", tile=TILE)

    def time_read_then_write(self, source):
        import rasterio

        with rasterio.open(source) as ds:
            rumimm.write("converted.rumi", ds.read(), tile=TILE, transform=ds.transform, crs=CRS)

    def peakmem_from_geotiff(self, source):
        rumimm.from_geotiff(source, "converted.rumi", tile=TILE)

    def peakmem_read_then_write(self, source):
        self.time_read_then_write(source)


class GeoTIFFExport:
    """rumi -> tiled zstd GeoTIFF of the 4 x 2048 x 2048 scene: streamed, and read whole then written."""

    timeout = 240
    number = 1
    repeat = (1, 5, 60.0)

    def setup_cache(self):
        need("to_geotiff")
        write_scene("scene.rumi", scene())
        return os.path.abspath("scene.rumi")

    def time_to_geotiff(self, source):
        rumimm.to_geotiff(source, "exported.tif")

    def time_read_then_write(self, source):
        import rasterio

        with rumimm.open(source) as img, rasterio.open("exported.tif", "w", driver="GTiff", **img.profile) as out:
            out.write(img[:])

    def peakmem_to_geotiff(self, source):
        rumimm.to_geotiff(source, "exported.tif")

    def peakmem_read_then_write(self, source):
        self.time_read_then_write(source)
