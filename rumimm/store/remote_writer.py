"""Writing a rumi file to an object store: staged bytes, then one upload that appears only when complete.

A rumi file's prefix (header, IFD, frame offsets and byte counts) is known only once
every frame is compressed, and it comes first in the object.  obstore, the client rumimm
reads with, uploads a stream of buffers as a multipart upload whose parts go in stream
order (it exposes no way to send part 1 last), so the prefix cannot follow the frames
on the wire.  :class:`RemoteWriter` therefore stages what the writer produces (the
compressed frames, then the prefix written over the space reserved for it) in a
:class:`Spool`: its first :data:`SPOOL_MEMORY` bytes in memory (the frames' own ``bytes``
objects, kept rather than copied), the rest in an anonymous temporary file (unlinked at
creation: a killed process leaves nothing on local disk).  ``commit`` hands obstore views
of the staged bytes (the memory head as it is, the file through a read-only memory map),
so no part is copied on its way to the socket: one PUT when the whole fits in one part,
else a multipart upload of ``part_size`` parts (at least the 5 MiB S3 and GCS ask of every
part but the last), ``max_concurrency`` in flight.  The object store makes the object
visible only when the upload completes; a failed upload is aborted by the client, so no
object appears.  docs/remote.md ("Writing") has the costs and the reasoning.

``overwrite=False`` refuses an existing object: a HEAD just before the upload starts
finds one, and an object that fits in one PUT is also sent as a conditional create
(``If-None-Match: *``), so a store that honours it refuses a writer that got there
between the HEAD and the PUT; the HEAD covers the S3-compatible servers that ignore the
header (moto before 5.0.15, for one) and multipart uploads, which cannot carry it.
"""

from __future__ import annotations

import bisect
import hashlib
import mmap
import tempfile
from typing import IO, Literal

from rumimm.errors import RumiError
from rumimm.store import loop
from rumimm.store.base import StoreWriter
from rumimm.store.failures import remote_error
from rumimm.store.options import client_settings, int_option
from rumimm.store.uri import HTTP_SCHEMES, public_name

__all__ = ["DEFAULT_PART_SIZE", "MIN_PART_SIZE", "SPOOL_MEMORY", "RemoteWriter", "Spool", "delete", "exists",
           "put_small"]

#: The smallest part S3 and GCS accept (every part but the last).
MIN_PART_SIZE = 5 << 20
#: Bytes per part of a multipart upload, unless ``storage_options["part_size"]`` says otherwise.
DEFAULT_PART_SIZE = 16 << 20
#: Parts in flight at once, unless ``storage_options["max_concurrency"]`` says otherwise.
DEFAULT_UPLOADS = 8
#: Staged bytes kept in memory; the bytes past this go to an anonymous temporary file.
SPOOL_MEMORY = 64 << 20
#: Writes smaller than this are gathered into one buffer (a copy) rather than kept one object each.
_GATHER = 256 << 10


class Spool:
    """Bytes staged for an upload: the first ``memory`` bytes in memory, the rest in an anonymous temporary file.

    Written like a file (``write``, ``seek``, ``tell``; a seek past the end leaves zeros),
    then read once as :meth:`views`: buffers over the staged bytes, in order, that an
    upload can send without copying them.  A ``bytes`` object written whole is kept,
    not copied (it cannot change); other buffers (a ``memoryview`` of shared memory the
    caller reuses, a ``bytearray``) are copied, small writes gathered into one buffer.
    Memory held: at most ``memory`` staged bytes; the file's bytes stay in the page
    cache, mapped read-only when viewed.
    """

    def __init__(self, memory: int = SPOOL_MEMORY) -> None:
        self._memory = memory
        self._chunks: list[bytes | bytearray] = []  # the memory head, in order
        self._starts: list[int] = []  # where each chunk starts
        self._head = 0  # bytes in memory: the file holds [head, size)
        self._file: IO[bytes] | None = None
        self._map: mmap.mmap | None = None
        self._file_at_end = True  # False after a write over the file's bytes
        self._size = 0
        self._pos = 0

    @property
    def size(self) -> int:
        return self._size

    @property
    def in_memory(self) -> bool:
        """Whether every staged byte is in memory (nothing went to the temporary file)."""
        return self._file is None

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int) -> int:
        if offset < 0:
            raise ValueError(f"negative seek position {offset}")
        self._pos = offset
        return offset

    def write(self, data) -> int:
        view = memoryview(data)
        if not view.c_contiguous:
            raise BufferError("spool writes need a contiguous buffer")
        n = view.nbytes
        if n == 0:
            return 0
        if self._pos > self._size:  # a hole: zeros, in a buffer later writes patch in place
            self._append(bytearray(self._pos - self._size))
        at = self._pos
        inside = min(self._size - at, n)
        if inside > 0:
            self._patch(at, view.cast("B")[:inside])
        if inside < n:
            rest = data if inside == 0 and type(data) is bytes else view.cast("B")[max(inside, 0):]
            self._append(rest)
        self._pos = at + n
        return n

    def _append(self, data) -> None:
        n = memoryview(data).nbytes
        if self._file is None and self._head + n <= self._memory:
            last = self._chunks[-1] if self._chunks else None
            if n < _GATHER and type(last) is bytearray and len(last) < _GATHER:
                last += data  # small writes: one buffer, not thousands of objects
            else:
                self._chunks.append(data if type(data) is bytes else bytearray(data))
                self._starts.append(self._head)
            self._head += n
        else:
            if self._file is None:
                self._file = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
            elif not self._file_at_end:
                self._file.seek(0, 2)
                self._file_at_end = True
            self._file.write(data)
        self._size += n

    def _patch(self, at: int, view: memoryview) -> None:
        """Write ``view`` over staged bytes from ``at`` (within the staged size)."""
        while view.nbytes and at < self._head:
            i = bisect.bisect_right(self._starts, at) - 1
            chunk = self._chunks[i]
            if not isinstance(chunk, bytearray):  # kept by reference: this one is copied before it changes
                chunk = self._chunks[i] = bytearray(chunk)
            off = at - self._starts[i]
            k = min(len(chunk) - off, view.nbytes)
            chunk[off:off + k] = view[:k]
            at += k
            view = view[k:]
        if view.nbytes:
            assert self._file is not None
            self._file.seek(at - self._head)
            self._file.write(view)
            self._file_at_end = False

    def views(self, piece: int) -> list:
        """The staged bytes as buffers in order, none longer than ``piece`` (no copy); the spool is then read-only."""
        out: list = []
        for chunk in self._chunks:
            if len(chunk) <= piece:
                out.append(chunk)
            else:
                v = memoryview(chunk)
                out.extend(v[i:i + piece] for i in range(0, len(chunk), piece))
        if self._file is not None and self._size > self._head:
            self._file.flush()
            self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
            v = memoryview(self._map)
            out.extend(v[i:i + piece] for i in range(0, len(v), piece))
        return out

    def close(self) -> None:
        """Drop the staged bytes and the temporary file."""
        self._chunks.clear()
        self._starts.clear()
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass  # a view still held by a request being torn down: the map goes with the last view
            self._map = None
        if self._file is not None:
            self._file.close()
            self._file = None


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
        self._spool = Spool(SPOOL_MEMORY)
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
            size = self._spool.size
            single = size <= self.part_size
            if not self.overwrite and exists(self._client, self._path, self.name):
                raise _exists(self.name)
            n_requests = 1 if single else 2 + -(-size // self.part_size)
            bound = loop.time_bound(self._request_seconds, self.max_concurrency, n_requests)
            fut = loop.submit(self._put(self._spool.views(self.part_size), single), self.name)
            result = loop.wait(fut, bound, self.name)
            self.requests += n_requests
            self.etag = result.get("e_tag")
        finally:
            self._close_spool()

    async def _put(self, views: list, single: bool):
        import obstore

        # views of at most part_size bytes: obstore cuts parts from them without copying, and
        # waits for a free slot before taking the next, so at most max_concurrency parts are out
        mode: Literal["overwrite", "create"] = "overwrite" if self.overwrite else "create"
        try:
            if single:
                return await obstore.put_async(self._client, self._path, views, mode=mode, use_multipart=False)
            return await obstore.put_async(self._client, self._path, views, use_multipart=True,
                                           chunk_size=self.part_size, max_concurrency=self.max_concurrency)
        except Exception as exc:
            if type(exc).__name__ == "AlreadyExistsError":
                raise _exists(self.name) from None
            if not single:  # a completion whose answer was lost: is the object there, and ours?
                done = await self._completed_before(views)
                if done is not None:
                    return done
            raise remote_error(exc, self.name, "PUT") from None

    async def _completed_before(self, views: list) -> dict | None:
        """The object's HEAD if an upload of exactly ``views`` completed although the client heard no success.

        A completion whose answer is lost is sent again; S3 answers the retry with success, but
        stores that forget a completed upload at once (MinIO, older moto releases) answer "no such
        upload" or an error.  After any failed multipart upload the object is therefore looked
        at: it holds these bytes if its ETag is their multipart ETag (the MD5 of the parts' MD5s,
        "-" and the part count, as S3 computes it), and the write succeeded; anything else
        (no object, another writer's, a store with other ETags) stays a failure.
        """
        import obstore

        try:
            meta = await obstore.head_async(self._client, self._path)
        except Exception:
            return None
        etag = str(meta.get("e_tag") or "").strip('"')
        if etag and etag == multipart_etag(views, self.part_size):
            return {"e_tag": meta.get("e_tag")}
        return None

    def abort(self) -> None:
        """Drop the staged bytes; nothing was sent, so nothing is left in the store."""
        self._close_spool()

    def _close_spool(self) -> None:
        if self._done:
            return
        self._done = True
        self._spool.close()


def multipart_etag(views: list, part_size: int) -> str:
    """S3's ETag of a multipart upload of ``views`` in parts of ``part_size`` bytes (the last shorter)."""
    digests: list[bytes] = []
    h = hashlib.md5(usedforsecurity=False)
    filled = 0
    for buf in views:
        view = memoryview(buf).cast("B")
        while view.nbytes:
            k = min(part_size - filled, view.nbytes)
            h.update(view[:k])
            filled += k
            view = view[k:]
            if filled == part_size:
                digests.append(h.digest())
                h, filled = hashlib.md5(usedforsecurity=False), 0
    if filled:
        digests.append(h.digest())
    return f"{hashlib.md5(b''.join(digests), usedforsecurity=False).hexdigest()}-{len(digests)}"


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

