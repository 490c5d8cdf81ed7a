"""Where a rumi file's bytes live: the ``Store`` interface, local files and remote objects.

``base`` (the :class:`Store` and :class:`StoreWriter` interfaces, :func:`get_ranges_many`),
``local`` (a file: ``pread`` and ``mmap``; atomic writes through ``atomic``), ``remote``
(an object read through obstore), with the remote machinery in modules of their own:
``uri`` (which paths are remote, names safe for messages), ``options`` (storage_options
and the shared clients), ``coalesce`` (which ranges share a request), ``loop`` (the
background event loop) and ``failures`` (``RemoteError``).  :func:`open_store` and
:func:`open_writer` pick one.
"""

from __future__ import annotations

import os

from rumimm.store.base import Buffers, Pending, RangeViews, Store, StoreWriter, buffer_addresses, get_ranges_many
from rumimm.store.failures import RemoteError
from rumimm.store.local import LocalStore, LocalWriter
from rumimm.store.remote import RemoteStore
from rumimm.store.uri import is_remote

__all__ = [
    "Buffers",
    "LocalStore",
    "LocalWriter",
    "Pending",
    "RangeViews",
    "RemoteError",
    "RemoteStore",
    "Store",
    "StoreWriter",
    "buffer_addresses",
    "get_ranges_many",
    "is_remote",
    "open_store",
    "open_writer",
]


def open_store(path, storage_options=None) -> Store:
    """The store for ``path``: a local file opened read-only, or a remote object.

    Remote URIs (``s3://``, ``gs://``, ``az://``, ``http(s)://``) give a
    :class:`RemoteStore` (no request is sent until the first read);
    ``storage_options`` apply to them only.
    """
    if is_remote(path):
        return RemoteStore(path, storage_options)
    if storage_options:
        raise ValueError(f"storage_options apply to remote URIs only, got a local path {os.fspath(path)!r}")
    return LocalStore(os.fspath(path))


def open_writer(path, storage_options=None, *, overwrite: bool = True) -> StoreWriter:
    """A :class:`StoreWriter` for a new version of ``path``: nothing visible until ``commit``.

    A local file (:class:`LocalWriter`: a temporary file renamed into place) or an object
    in an object store (:class:`~rumimm.store.remote_writer.RemoteWriter`: an upload that
    appears only when complete).  ``overwrite=False`` refuses an existing file or object
    at ``commit`` (``FileExistsError``).
    """
    if is_remote(path):
        from rumimm.store.remote_writer import RemoteWriter

        return RemoteWriter(path, storage_options, overwrite=overwrite)
    if storage_options:
        raise ValueError(f"storage_options apply to remote URIs only, got a local path {os.fspath(path)!r}")
    return LocalWriter(path, overwrite=overwrite)
