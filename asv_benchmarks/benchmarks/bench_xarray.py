"""xarray and Dask: a chip through the xarray backend next to the direct read; Dask sums.

The scene is the shared 4 x 2048 x 2048 uint16 one in 512-pixel tile frames.  Each
class times the rumimm peer of its xarray or Dask path in the same class, so
``asv compare`` and the side-by-side script (``compare/xarray_dask.py``) read ratios.
Needs the ``xarray`` and ``dask`` extras, and ``distributed`` for ``DaskSumCluster``.
"""

from __future__ import annotations

import rumimm

from ._common import BANDS, SIZE, TILE, need, scene, window_origin, write_scene


def _file():
    return ("xarray.rumi", write_scene("xarray.rumi", scene(BANDS, SIZE)))


class XarrayChip:
    """A 256 x 256 all-band chip: ``ds.isel(...).values`` against ``img[:, y0:y1, x0:x1]``.

    ``cache="off"``: frames decoded on every call; ``"on"``: served from the
    decoded-frame cache, where only the per-call overhead of each path is left.
    """

    params = (["off", "on"],)
    param_names = ["cache"]

    def setup_cache(self):
        need("to_dask")
        return _file()

    def setup(self, file, cache):
        need("to_dask")
        import xarray as xr

        path, blob = file
        self.img = rumimm.open(path, header=blob, cache_bytes=0 if cache == "off" else None)
        self.ds = xr.open_dataset(self.img, engine="rumimm")
        o = window_origin(256, "unaligned", TILE)
        self.ys = self.xs = slice(o, o + 256)
        self.ds.isel(y=self.ys, x=self.xs)["band_data"].values

    def teardown(self, file, cache):
        self.ds.close()
        self.img.close()

    def time_xarray_isel(self, file, cache):
        self.ds.isel(y=self.ys, x=self.xs)["band_data"].values

    def time_direct(self, file, cache):
        self.img[:, self.ys, self.xs]


class DaskSum:
    """Full-image sum: ``to_dask(...)`` on Dask's threaded scheduler against a direct read."""

    timeout = 120

    def setup_cache(self):
        need("to_dask")
        return _file()

    def setup(self, file):
        need("to_dask")
        self.path, self.blob = file
        self.arr = rumimm.to_dask(self.path, header=self.blob)
        self.arr.sum(dtype="u8").compute(scheduler="threads")

    def time_dask_threads(self, file):
        self.arr.sum(dtype="u8").compute(scheduler="threads")

    def time_direct(self, file):
        with rumimm.open(self.path, header=self.blob, cache_bytes=0) as img:
            img[:].sum(dtype="u8")


class DaskSumCluster:
    """Full-image sum of ``to_dask(...)`` on a LocalCluster of 2 single-thread worker processes."""

    timeout = 300
    number = 1
    repeat = (3, 5, 120.0)

    def setup_cache(self):
        need("to_dask")
        return _file()

    def setup(self, file):
        need("to_dask")
        from dask.distributed import Client, LocalCluster

        path, blob = file
        self.cluster = LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None,
                                    silence_logs=40)
        self.client = Client(self.cluster)
        self.arr = rumimm.to_dask(path, header=blob)
        self.arr.sum(dtype="u8").compute()

    def teardown(self, file):
        self.client.close()
        self.cluster.close()

    def time_cluster_sum(self, file):
        self.arr.sum(dtype="u8").compute()
