"""Writing a rumi file to an object store: staged bytes, then one upload that appears only when complete.

A rumi file's prefix (header, IFD, frame offsets and byte counts) is known only once
every frame is compressed, and it comes first in the object.  obstore, the client rumimm
reads with, uploads a stream of buffers as a multipart upload whose parts go in stream
order (it exposes no way to send part 1 last), so the prefix cannot follow the frames
on the wire.  :class:`RemoteWriter` therefore stages what the writer produces (the
compressed frames, then the prefix written over the space reserved for it) in a spool
that stays in memory up to :data:`SPOOL_MEMORY` bytes and beyond that in an anonymous
temporary file (unlinked at creation: a killed process leaves nothing on local disk),
and ``commit`` streams it to the object: one PUT when it fits in one part, else a
multipart upload of ``part_size`` parts (at least the 5 MiB S3 and GCS ask of every part
but the last), ``max_concurrency`` in flight.  The object store makes the object visible
only when the upload completes; a failed upload is aborted by the client, so no object
appears.  docs/remote.md ("Writing") has the costs and the reasoning.

``overwrite=False`` refuses an existing object: a HEAD just before the upload starts
finds one, and an object that fits in one PUT is also sent as a conditional create
(``If-None-Match: *``), so a store that honours it refuses a writer that got there
between the HEAD and the PUT; the HEAD covers the S3-compatible servers that ignore the
header (moto before 5.0.15, for one) and multipart uploads, which cannot carry it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Literal

from rumimm.errors import RumiError
from rumimm.store import loop
from rumimm.store.base import StoreWriter
from rumimm.store.failures import remote_error
from rumimm.store.options import client_settings, int_option
from rumimm.store.uri import HTTP_SCHEMES, public_name

__all__ = ["DEFAULT_PART_SIZE", "MIN_PART_SIZE", "SPOOL_MEMORY", "RemoteWriter", "delete", "exists", "put_small"]

#: The smallest part S3 and GCS accept (every part but the last).
MIN_PART_SIZE = 5 << 20
#: Bytes per part of a multipart upload, unless ``storage_options["part_size"]`` says otherwise.
DEFAULT_PART_SIZE = 16 << 20
#: Parts in flight at once, unless ``storage_options["max_concurrency"]`` says otherwise.
DEFAULT_UPLOADS = 8
#: Staged bytes kept in memory; beyond this the spool moves to an anonymous temporary file.
SPOOL_MEMORY = 64 << 20


class RemoteWriter(StoreWriter):
    """A new version of the object at ``uri``: staged locally, uploaded on ``commit``, visible only when complete.

    Parameters
    ----------
    uri : str
        ``s3://bucket/key``, ``gs://bucket/key`` or ``az://container/key`` (not ``http(s)://``).
    storage_options : dict, optional
        As for reading (:class:`~rumimm.store.RemoteStore`), plus ``part_size`` (bytes per
        part of a multipart upload, at least 5 MiB, default 16 MiB); ``max_concurrency``
        here is the parts in flight (default 8).
    overwrite : bool
        False: refuse to replace an existing object (``FileExistsError``).
    """

    def __init__(self, uri: str, storage_options=None, *, overwrite: bool = True) -> None:
        scheme = uri.split("://", 1)[0].lower()
        self.name = public_name(uri)
        if scheme in HTTP_SCHEMES:
            raise RumiError(f"{self.name}: an http(s):// URL is read-only; write to s3://, gs:// or az://")
        opts = dict(storage_options or {})
        part_size = int_option(opts, "part_size", DEFAULT_PART_SIZE, MIN_PART_SIZE)
        opts.pop("part_size", None)
        uploads = int_option(opts, "max_concurrency", DEFAULT_UPLOADS, 1)
        settings = client_settings(uri, opts)
        self.uri = uri
        self.part_size = part_size
        self.max_concurrency = uploads
        self.overwrite = bool(overwrite)
        self._client, self._path = settings.client, settings.path
        self._request_seconds = settings.request_seconds
        self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)  # noqa: SIM115 - closed by commit/abort
        self._done = False
        self.requests = 0  # requests of the upload (one PUT, or the parts plus create and complete)
        self.etag: str | None = None  # the object's ETag once committed

    # -- staging ----------------------------------------------------------------------
    def write(self, data) -> int:
        self._check_open()
        return self._spool.write(data)

    def tell(self) -> int:
        return self._spool.tell()

    def seekable(self) -> bool:
        """True: the staged bytes are local, so the prefix is written over its reserved space at the end."""
        return True

    def seek(self, offset: int) -> None:
        self._check_open()
        self._spool.seek(offset)

    def _check_open(self) -> None:
        if self._done:
            raise RumiError(f"{self.name}: the upload is finished; nothing more can be written")

    # -- upload -----------------------------------------------------------------------
    def commit(self) -> None:
        """Upload the staged bytes: the object appears, complete, when this returns."""
        self._check_open()
        try:
            size = self._spool.seek(0, 2)
            self._spool.seek(0)
            single = size <= self.part_size
            if not self.overwrite and exists(self._client, self._path, self.name):
                raise _exists(self.name)
            n_requests = 1 if single else 2 + -(-size // self.part_size)
            bound = loop.time_bound(self._request_seconds, self.max_concurrency, n_requests)
            fut = loop.submit(self._put(size, single), self.name)
            result = loop.wait(fut, bound, self.name)
            self.requests += n_requests
            self.etag = result.get("e_tag")
        finally:
            self._close_spool()

    async def _put(self, size: int, single: bool):
        import obstore

        mode: Literal["overwrite", "create"] = "overwrite" if self.overwrite else "create"
        try:
            if single:
                return await obstore.put_async(self._client, self._path, self._spool.read(size), mode=mode,
                                               use_multipart=False)
            return await obstore.put_async(self._client, self._path, self._chunks(), use_multipart=True,
                                           chunk_size=self.part_size, max_concurrency=self.max_concurrency)
        except Exception as exc:
            if type(exc).__name__ == "AlreadyExistsError":
                raise _exists(self.name) from None
            raise remote_error(exc, self.name, "PUT") from None

    def _chunks(self) -> Iterator[bytes]:
        """The staged bytes a part at a time (the client holds at most ``max_concurrency`` of them)."""
        while True:
            chunk = self._spool.read(self.part_size)
            if not chunk:
                return
            yield chunk

    def abort(self) -> None:
        """Drop the staged bytes; nothing was sent, so nothing is left in the store."""
        self._close_spool()

    def _close_spool(self) -> None:
        if self._done:
            return
        self._done = True
        self._spool.close()


def _exists(name: str) -> FileExistsError:
    return FileExistsError(f"{name}: the object exists and overwrite=False; pass overwrite=True to replace it")


def exists(client, path: str, name: str) -> bool:
    """Whether the object ``path`` exists in ``client``'s store (one HEAD; a refused HEAD is an error)."""
    import obstore

    async def head():
        try:
            await obstore.head_async(client, path)
        except FileNotFoundError:
            return False
        except Exception as exc:
            if type(exc).__name__ == "NotFoundError":
                return False
            raise remote_error(exc, name, "HEAD") from None
        return True

    return bool(loop.wait(loop.submit(head(), name), 60.0, name))


def delete(uri: str, storage_options=None) -> bool:
    """Delete the object at ``uri`` if it exists (a stale sidecar); whether there was one."""
    import obstore

    name = public_name(uri)
    settings = client_settings(uri, {k: v for k, v in (storage_options or {}).items() if k != "part_size"})

    async def remove():
        try:
            await obstore.delete_async(settings.client, settings.path)
        except Exception as exc:
            if isinstance(exc, FileNotFoundError) or type(exc).__name__ == "NotFoundError":
                return False
            raise remote_error(exc, name, "DELETE") from None
        return True

    return bool(loop.wait(loop.submit(remove(), name), 60.0, name))


def put_small(uri: str, data: bytes, storage_options=None) -> None:
    """One PUT of ``data`` at ``uri`` (a sidecar next to an object just written)."""
    w = RemoteWriter(uri, storage_options)
    try:
        w.write(data)
    except BaseException:
        w.abort()
        raise
    w.commit()

