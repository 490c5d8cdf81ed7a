"""Convert many rasters (GeoTIFFs, COGs, rumi files; paths or URIs) into a folder of rumi files.

One output per input, ``<dest_dir>/<name>.rumi``, each written atomically as every rumimm
write is, so a run that is killed leaves finished outputs and no partial one (its
temporary files are removed by the next run, or by ``rumimm clean``).  A rerun skips
the outputs that exist and are rumi files, so a long conversion resumes where it
stopped.  A file that fails is recorded with its error and the run goes on; the
catalog of every output (``catalog.parquet``, :func:`rumimm.catalog`) is written at the end.

Files are converted in ``jobs`` processes here, or, when a ``dask.distributed`` client is
active, as one task per file on its workers (which must see the sources and ``dest_dir``
at the same paths: a shared file system, or URIs for the sources).  Only the file names
and the header blobs travel between processes.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any, NamedTuple

from rumimm.errors import RumiError

__all__ = ["BulkResult", "convert_many"]

#: Source file name endings taken from a folder (case-insensitive).
SOURCE_SUFFIXES = (".tif", ".tiff", ".rumi")


class BulkResult(NamedTuple):
    """What :func:`convert_many` did: outputs written, outputs kept from an earlier run, failures."""

    written: list[str]
    skipped: list[str]
    errors: list[tuple[str, str]]
    catalog: str | None

    @property
    def outputs(self) -> list[str]:
        """Every output now in the folder: the ones written and the ones kept, in source order."""
        return sorted(self.written + self.skipped)


def _sources(sources: Any) -> list[str]:
    """A list of paths or URIs from a list, a glob pattern or a folder (its rasters, not recursively)."""
    import glob

    if isinstance(sources, (str, os.PathLike)):
        text = os.fspath(sources)
        if os.path.isdir(text):
            return sorted(os.path.join(text, n) for n in os.listdir(text) if n.lower().endswith(SOURCE_SUFFIXES))
        if glob.has_magic(text) and "://" not in text:
            return sorted(glob.glob(text, recursive=True))
        return [text]
    return [os.fspath(s) for s in sources]


def _output_name(source: str) -> str:
    """``scene.tif`` -> ``scene.rumi``; a URI's query string is not part of the name."""
    name = source.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1] if "://" in source else os.path.basename(source)
    stem = name.rsplit(".", 1)[0] if "." in name else name
    return f"{stem}.rumi"


def _is_rumi(source: str) -> bool:
    """Whether ``source`` is a rumi file (either spec); anything else goes to GDAL."""
    from rumimm.store import is_remote

    if is_remote(source):
        return source.split("?", 1)[0].lower().endswith(".rumi")
    try:
        with open(source, "rb") as fh:
            head = fh.read(4)
    except OSError:
        return False  # missing: from_geotiff says so
    if head == b"RUMI":
        return True
    if head != b"II+\x00":
        return False
    from rumimm.errors import FormatError
    from rumimm.reader.validate import build_blob

    try:
        build_blob(source)
    except FormatError:
        return False  # a BigTIFF GeoTIFF
    return True


def _finished(dest: str) -> bytes | None:
    """The blob of an output an earlier run finished (written atomically: present means whole), else None."""
    from rumimm.reader.validate import build_blob

    if not os.path.isfile(dest):
        return None
    try:
        return bytes(build_blob(dest))
    except (RumiError, OSError):
        return None  # not a rumi file: converted again, replacing it


def convert_one(source: str, dest: str, options: dict) -> bytes:
    """Convert ``source`` into ``dest`` (a task of :func:`convert_many`); return the header blob."""
    if _is_rumi(source):
        from rumimm.writer.convert import convert

        return convert(source, dest, spec=options.get("spec"), codec=options.get("codec"),
                       time=options.get("time"), storage_options=options.get("storage_options"),
                       threads=options.get("threads") if options.get("codec") is not None else None)
    from rumimm.integrations.geotiff import from_geotiff

    try:
        return from_geotiff(source, dest, tile=options["tile"], unit=options["unit"], codec=options.get("codec"),
                            spec=options.get("spec"), time=options.get("time"), threads=options.get("threads"))
    except Exception as exc:  # a file GDAL does not know: rumimm's one message for it, as rumimm convert gives
        from rumimm.reader.inputs import gdal_refusal

        refusal = gdal_refusal(source, exc) if "://" not in source else None
        if refusal is not None:
            raise refusal from None
        raise


def _task(source: str, dest: str, options: dict) -> bytes:
    """:func:`convert_one` in another process, found there by name (as the process imports it)."""
    return convert_one(source, dest, options)


def _client(client: Any) -> Any:
    if client is None or client is False:
        return None
    if client != "auto":
        return client
    try:
        from distributed import default_client
    except ImportError:
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def convert_many(sources: Any, dest_dir: str | os.PathLike, *, tile: int | tuple[int, int] = 512,
                 unit: str = "tile", codec: Any = None, spec: str | None = None, time: Any = None,
                 jobs: int | None = None, overwrite: bool = False, catalog: str | None = "catalog.parquet",
                 progress: Any = None, client: Any = "auto", storage_options: dict | None = None) -> BulkResult:
    """Convert many rasters into rumi files in ``dest_dir``, one per source; resumable.

    Parameters
    ----------
    sources : sequence of str or os.PathLike, or str
        GeoTIFFs, COGs (anything GDAL reads) and rumi files, as paths or URIs; or a glob
        pattern; or a folder (its ``.tif``, ``.tiff`` and ``.rumi`` files).
    dest_dir : str or os.PathLike
        An existing folder; source ``a/scene.tif`` becomes ``dest_dir/scene.rumi``.
    tile, unit, codec
        For GeoTIFF sources, as for :func:`rumimm.write`; ``codec`` also re-encodes rumi sources.
    spec, time
        The rumi spec to write and, for spec 0.2, the time step(s) (as :func:`rumimm.convert`
        and :func:`rumimm.from_geotiff`); a rumi source goes to the other spec by default.
    jobs : int, optional
        Files converted at once in this process's worker processes (default: one per core;
        1 converts here).  Ignored on a Dask client.
    overwrite : bool
        Convert again even where an output exists (default: keep it; a rerun resumes).
    catalog : str or None
        File name in ``dest_dir`` of the GeoParquet catalog of every output, written last
        (:func:`rumimm.catalog`; needs pyarrow); None for none.
    progress : None, bool or callable
        ``True`` draws a bar of files; a callable is called as ``progress(done, total)``.
    client : "auto", distributed.Client or None
        Where to convert: ``"auto"`` uses the active Dask client if there is one (a task per
        file on its workers), None never does.
    storage_options : dict, optional
        Client settings of remote rumi sources (see :func:`rumimm.open`).

    Returns
    -------
    BulkResult
        ``written`` and ``skipped`` output paths, ``errors`` as ``(source, "Error: message")``
        pairs (a bad file does not stop the others) and the ``catalog`` path (None without one
        or without outputs).

    Raises
    ------
    FileNotFoundError
        ``dest_dir`` does not exist (nothing is converted).
    RumiError
        Two sources would write the same output name.

    Examples
    --------
    >>> result = rumimm.convert_many("tiffs/*.tif", "rumi/", jobs=4)   # doctest: +SKIP
    >>> result.errors                                                  # doctest: +SKIP
    []
    """
    from rumimm.progress import Progress
    from rumimm.writer.atomic import clean

    folder = os.fspath(dest_dir)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(20, "the destination is a file, not a directory", folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(2, "destination directory does not exist; create it first", folder)
    paths = _sources(sources)
    dests = [os.path.join(folder, _output_name(p)) for p in paths]
    seen: dict[str, str] = {}
    for src, dst in zip(paths, dests, strict=True):
        if dst in seen:
            raise RumiError(f"{src} and {seen[dst]} would both be written to {dst}; convert them into separate "
                            "folders or rename one")
        seen[dst] = src
    clean(folder)  # temporary files of a killed earlier run (files of live writers are kept)
    options = {"tile": tile, "unit": unit, "codec": codec, "spec": spec, "time": time,
               "storage_options": storage_options}
    blobs: dict[str, bytes] = {}
    skipped: list[str] = []
    todo: list[tuple[str, str]] = []
    for src, dst in zip(paths, dests, strict=True):
        done = None if overwrite else _finished(dst)
        if done is None:
            todo.append((src, dst))
        else:
            blobs[dst] = done
            skipped.append(dst)
    written: list[str] = []
    errors: list[tuple[str, str]] = []
    dask_client = _client(client)
    with Progress(progress, len(paths), desc="convert", unit="file") as bar:
        if skipped:
            bar.advance(len(skipped))

        def finish(src: str, dst: str, fut: Any) -> None:
            exc = fut.exception()
            if exc is None:
                blobs[dst] = fut.result()
                written.append(dst)
            else:
                errors.append((src, _describe(exc)))
            bar.advance()

        if dask_client is not None:
            _on_client(dask_client, todo, options, finish)
        else:
            _in_processes(todo, options, jobs, finish)
    out = [d for d in dests if d in blobs]
    catalog_path = None
    if catalog is not None and out:
        from rumimm.integrations.catalogs import catalog as build_catalog
        from rumimm.integrations.catalogs import write_catalog

        catalog_path = os.path.join(folder, catalog)
        write_catalog(build_catalog(out, blobs=[blobs[d] for d in out]), catalog_path)
    order = {d: i for i, d in enumerate(dests)}
    return BulkResult(sorted(written, key=order.__getitem__), skipped, errors, catalog_path)


def _in_processes(todo: list[tuple[str, str]], options: dict, jobs: int | None, finish: Any) -> None:
    """Convert here (``jobs`` 1) or in ``jobs`` spawned processes, each compressing on one core."""
    jobs = min(len(todo), jobs or os.cpu_count() or 1)
    if jobs <= 1:
        for src, dst in todo:
            fut: Future = Future()
            try:
                fut.set_result(convert_one(src, dst, options))
            except Exception as exc:
                fut.set_exception(exc)
            finish(src, dst, fut)
        return
    import multiprocessing

    # spawned, not forked: this process may run decode threads; one core each
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_task, src, dst, {**options, "threads": 1}): (src, dst) for src, dst in todo}
        for fut in as_completed(futures):
            finish(*futures[fut], fut)


def _on_client(client: Any, todo: list[tuple[str, str]], options: dict, finish: Any) -> None:
    """A task per file on the client's workers; each compresses on one core (a worker thread)."""
    from distributed import as_completed as dask_completed

    futures = {}
    for src, dst in todo:
        fut = client.submit(_task, src, dst, {**options, "threads": 1}, pure=False, retries=0)
        futures[fut] = (src, dst)
    for fut in dask_completed(list(futures)):
        finish(*futures[fut], fut)
        fut.release()
