"""rumimm in other tools' worlds: GeoTIFF, xarray, Dask, Parquet catalogs, training chips, previews.

Each module imports its optional packages only when used.
"""
