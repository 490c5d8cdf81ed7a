"""Side-by-side comparisons of rumimm with its peers (GDAL, rumi-eo, zarr, xarray, TorchGeo).

One module per comparison, each run from the repository root as ``python -m
asv_benchmarks.compare.<name>``; what they share is in :mod:`asv_benchmarks.compare.common`.
README.md in this folder lists them.  The asv suite (``asv_benchmarks/benchmarks``) is separate.
"""
