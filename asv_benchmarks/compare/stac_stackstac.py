"""The stackstac row of ``compare/stac.py``, in stackstac's own interpreter.

stackstac 0.5.1 pins pandas < 3, so it runs in a venv of its own (``.venv-stackstac``, made by
``asv_benchmarks/compare/stackstac_venv.sh``), where rumimm is not installed: this module imports
nothing of rumimm, and nothing beyond numpy and the standard library at module level.

``stac.py`` starts it as ``python -m asv_benchmarks.compare.stac_stackstac`` (``cwd`` the
repository root) and drives it over stdin and stdout, one JSON object a line, so its batches
interleave with the other engines' as in-process engines' do:

- ``{"op": "load", "items": PATH, "chip": 256, "tile": 256}``: read the Item dicts (JSON) and
  import stackstac, dask and rasterio (both out of the timings); answers ``{"ok": true}``;
- ``{"op": "first", "out": NPY}``: time Item list -> the first chip of the first Item, writes
  it to ``NPY``; answers ``{"seconds": s}``;
- ``{"op": "batch", "chips": [[item, y, x], ...], "out": NPY or null}``: time one batch of
  chips (one ``dask.compute``), written to ``NPY`` when given; answers ``{"seconds": s}``;
- ``{"op": "quit"}``.

``python -m asv_benchmarks.compare.stac_stackstac --versions`` prints the versions it runs with.

stackstac reads one band per asset (a multi-band asset is refused: "Assets must have exactly 1
band"), and reads the CRS from ``proj:epsg`` only, so ``for_stackstac`` turns each Item of the
comparison (one 4-band COG asset, ``proj:code``) into what stackstac takes: one asset per band,
each a GDAL ``vrt://`` band subset of the same COG at the same URL (``?bands=k``), and
``proj:epsg``.  It is a few dict operations an Item and is timed with the first chip.
"""

from __future__ import annotations

import copy
import json
import sys
import time

import numpy as np

#: The distributions whose versions the row records.
PACKAGES = ("stackstac", "dask", "xarray", "rasterio", "pystac", "pandas", "numpy", "pyproj")


def band_href(href: str, band: int) -> str:
    """GDAL's name for band ``band`` (1-based) of the raster at ``href`` alone: a ``vrt://`` band
    subset, over ``/vsicurl/`` for an http(s) URL."""
    if "?" in href:
        raise ValueError(f"{href}: a URL with a query string cannot take vrt:// options")
    path = f"/vsicurl/{href}" if href.startswith(("http://", "https://")) else href
    return f"vrt://{path}?bands={band}"


def for_stackstac(item: dict, asset: str = "data") -> dict:
    """``item`` (a STAC Item dict whose ``asset`` holds every band, ``raster:bands`` listing them)
    as stackstac 0.5.1 takes it: assets ``b1``, ``b2``, ... of one band each, and ``proj:epsg``
    from ``proj:code`` (``EPSG:<n>``)."""
    out = copy.deepcopy(item)
    props = out["properties"]
    code = props.get("proj:code")
    if "proj:epsg" not in props and isinstance(code, str) and code.upper().startswith("EPSG:"):
        props["proj:epsg"] = int(code.split(":", 1)[1])
    whole = out["assets"].pop(asset)
    bands = whole.get("raster:bands") or [{}]
    for k, band in enumerate(bands, start=1):
        one = {key: v for key, v in whole.items() if key not in ("href", "raster:bands")}
        out["assets"][f"b{k}"] = {**one, "href": band_href(whole["href"], k), "raster:bands": [band]}
    return out


def band_names(item: dict) -> list[str]:
    """The assets ``for_stackstac`` made, in band order."""
    return sorted((k for k in item["assets"] if k[1:].isdigit() and k.startswith("b")), key=lambda k: int(k[1:]))


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    try:
        import rasterio

        out["GDAL"] = rasterio.__gdal_version__
    except ImportError:
        out["GDAL"] = None
    return out


class Engine:
    """stackstac on the comparison's COG Items: Dask chunks of one block, a chip an ``.isel``,
    a batch one ``dask.compute`` (as odc-stac's row)."""

    def __init__(self, items: list[dict], chip: int, tile: int):
        import dask  # noqa: F401  (imports out of the timings)
        import rasterio  # noqa: F401
        import stackstac  # noqa: F401

        self.items, self.chip, self.tile, self.da = items, chip, tile, None

    def first_chip(self) -> np.ndarray:
        import stackstac

        items = [for_stackstac(it) for it in self.items]
        self.da = stackstac.stack(items, assets=band_names(items[0]), chunksize=self.tile, dtype="uint16",
                                  fill_value=np.uint16(0), rescale=False)
        c = self.chip
        return self.da.isel(time=0, x=slice(0, c), y=slice(0, c)).values

    def batch(self, chips: list[list[int]]) -> np.ndarray:
        import dask

        c = self.chip
        parts = [self.da.isel(time=i, y=slice(y, y + c), x=slice(x, x + c)).data for i, y, x in chips]
        (stack,) = dask.compute(parts)
        return np.stack(stack)


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    """Answer ``stac.py``'s requests (see the module's docstring) until ``quit`` or end of input."""
    engine: Engine | None = None
    for line in stdin:
        req = json.loads(line)
        op = req["op"]
        if op == "quit":
            break
        if op == "load":
            with open(req["items"], encoding="utf-8") as fh:
                engine = Engine(json.load(fh), req["chip"], req["tile"])
            answer: dict = {"ok": True}
        elif engine is None:
            raise RuntimeError(f"{op} before load")
        else:
            t = time.perf_counter()
            got = engine.first_chip() if op == "first" else engine.batch(req["chips"])
            answer = {"seconds": time.perf_counter() - t}
            if req.get("out"):
                np.save(req["out"], got)
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--versions"]:
        print(json.dumps(versions()))
        return 0
    serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
