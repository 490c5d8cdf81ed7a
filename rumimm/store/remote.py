"""Remote objects: a rumi file in an object store or at an HTTP(S) URL, read by ranged GETs.

:class:`RemoteStore` is the :class:`~rumimm.store.base.Store` of an object in an object
store (``s3://``, ``gs://``, ``az://``) or at an ``http(s)://`` URL, read through obstore
(the Rust ``object_store`` crate): only ranged GETs (no HEAD when the caller knows the
size), ranges closer than ``coalesce`` bytes merged into one request
(``store.coalesce``), the requests in flight together on one background event loop
(``store.loop``) with the GIL released.  Its options and client come from
``store.options``.

A remote object is pinned to the version its first response reports: that response's
ETag becomes :attr:`RemoteStore.version` and every later request carries ``If-Match``
with it, so an object replaced while it is open fails the next read with a
:class:`RemoteError` instead of mixing bytes of two versions; cached frames belong to
one open image (``cache``), so a reopened image never sees frames of an older version.
A server without ETags cannot be checked (``docs/remote.md``).  Messages name the URI
without its query string or credentials and never repeat the client's own message,
which holds both (``store.failures``).  obstore is imported on the first request, never
at import.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from rumimm.errors import BlobError, FormatError, RumiError, where
from rumimm.store import loop
from rumimm.store.base import Pending, Store
from rumimm.store.coalesce import Link, link_for, plan_requests
from rumimm.store.failures import RemoteError, remote_error
from rumimm.store.options import client_settings
from rumimm.store.uri import public_name

__all__ = ["RemoteStore"]


class RemoteStore(Store):
    """An object in an object store or at an HTTP(S) URL, read by ranged GETs through obstore.

    Parameters
    ----------
    uri : str
        ``s3://bucket/key``, ``gs://bucket/key``, ``az://container/key`` (and the other
        schemes obstore reads), or an ``http(s)://`` URL.
    storage_options : dict, optional
        Client settings on top of those the client reads from the environment
        (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``GOOGLE_SERVICE_ACCOUNT``, ...):
        store keys as obstore names them (``endpoint``, ``region``, ``skip_signature``,
        ...), client keys (``allow_http``, ``timeout``, ``connect_timeout``, ...), and
        rumimm's: ``coalesce`` (bytes, default 1 MiB; or ``"auto"``: the bytes the link
        carries in one round trip, measured, see ``store.coalesce.Link``), ``max_concurrency``
        (default 64), ``max_retries`` (5), ``retry_timeout`` (s, 60), ``init_backoff`` (s, 0.1),
        ``max_backoff`` (s, 5).  Durations are seconds or ``timedelta``; ``timeout``
        (default 30 s) bounds one request, ``connect_timeout`` (5 s) its connection.
    size : int, optional
        The object's size when the caller knows it (from a catalog); otherwise the
        first response reports it, or :attr:`size` asks with one HEAD request.
    version : str, optional
        The ETag the object must have; otherwise the first response's ETag.
    min_size : int, optional
        When the size is not known: the fewest bytes the object may have (a spec 0.2
        blob locates the frames but not the trailer after them); the first response
        reporting fewer fails with a ``BlobError``.
    name : str, optional
        ``public_name(uri)`` when the caller has it already (an Image names its file so).
    """

    def __init__(self, uri: str, storage_options=None, *, size: int | None = None, version: str | None = None,
                 min_size: int = 0, name: str | None = None):
        self.uri = uri
        self.name = public_name(uri) if name is None else name
        settings = client_settings(uri, storage_options)
        self.coalesce = settings.coalesce
        self.max_concurrency = settings.max_concurrency
        self._client, self._path = settings.client, settings.path
        self._request_seconds = settings.request_seconds
        self._auto = settings.auto
        self.link: Link = link_for(self._client)  # round trips and throughput measured on this client's answers
        self._size = None if size is None else int(size)
        self._min_size = int(min_size)
        self._etag = version
        self._lock = threading.Lock()
        self.requests = 0  # requests sent (GET and HEAD), retries not counted
        self.closed = False

    @property
    def version(self) -> str | None:
        """The ETag the object is pinned to, or None before the first response (or without ETags)."""
        return self._etag

    @property
    def known_size(self) -> int | None:
        """The object's size if a response (or the caller) gave it, else None; never a request."""
        return self._size

    @property
    def size(self) -> int:
        """The object's size; one HEAD request if no response has reported it yet."""
        if self._size is None:
            meta = self.wait(loop.submit(self._head(), self.name), 1)
            self._note(meta)
        assert self._size is not None
        return self._size

    def wait(self, fut, n_requests: int):
        """The result of ``fut`` (``n_requests`` of this store's requests), within their time bound."""
        return loop.wait(fut, loop.time_bound(self._request_seconds, self.max_concurrency, n_requests), self.name)

    def get_ranges(self, ranges, scratch=None) -> Sequence[np.ndarray]:
        """Each range's bytes (views into the merged requests' answers); ``scratch`` is not needed."""
        return self.start_ranges(ranges).result()

    def start_ranges(self, ranges) -> Pending:
        """Send the merged requests for ``ranges`` now; the result waits for their answers."""
        checked, groups = self._plan(ranges)
        if not groups:
            return Pending(_slice(checked, groups, []))
        return _InFlight(self, checked, groups, loop.submit(self._fetch_all(groups), self.name))

    def iter_ranges(self, ranges, scratch=None):
        """``(index, bytes)`` of each range as its request completes (``scratch`` is not needed)."""
        checked, groups = self._plan(ranges)
        for i, (_, n) in enumerate(checked):
            if n == 0:
                yield i, np.empty(0, np.uint8)
        if not groups:
            return
        arrived: queue.SimpleQueue = queue.SimpleQueue()
        fut = loop.submit(self._fetch_each(groups, arrived), self.name)
        bound = loop.time_bound(self._request_seconds, self.max_concurrency, len(groups))
        deadline = time.monotonic() + bound
        try:
            for _ in groups:
                try:
                    g, buf, exc = arrived.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise loop.no_answer(self.name, bound) from None
                if exc is not None:
                    raise exc
                start, _, members = groups[g]
                arr = np.frombuffer(buf, np.uint8)
                for i in members:
                    o, n = checked[i]
                    yield i, arr[o - start:o - start + n]
        finally:
            fut.cancel()  # an error, or the caller stopped early: the requests left are dropped

    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes at ``offset``; fewer at the end of the object (one request)."""
        offset, nbytes = _check_range(offset, nbytes, self.name)
        if self._size is not None:
            nbytes = max(0, min(nbytes, self._size - offset))
            if nbytes == 0:
                return b""
            return bytes(self.get_ranges([(offset, nbytes)])[0])
        if self.closed:
            raise RumiError(f"{self.name}: store is closed")
        if nbytes == 0:
            return b""
        return bytes(self.wait(loop.submit(self._get(offset, offset + nbytes, True), self.name), 1))

    def read_into(self, dst: np.ndarray, offset: int) -> None:
        """Fill ``dst`` (uint8) with the bytes at ``offset``: exactly ``len(dst)`` or FormatError/RemoteError."""
        dst[:] = self.get_ranges([(offset, dst.shape[0])])[0]

    def _plan(self, ranges):
        checked = [_check_range(o, n, self.name) for o, n in ranges]
        if self.closed:
            raise RumiError(f"{self.name}: store is closed")
        if self._size is not None:
            for o, n in checked:
                if o + n > self._size:
                    raise FormatError(f"{self.name}: bytes {o}..{o + n} are past the end of the object "
                                      f"({self._size} bytes); the header does not match the object")
        return checked, plan_requests(checked, self.link.coalesce() if self._auto else self.coalesce)

    def close(self) -> None:
        self.closed = True

    def __reduce__(self):
        raise TypeError("a RemoteStore holds a client; pickle the URI and options and open a new one")

    # -- requests -------------------------------------------------------------------
    async def _head(self):
        import obstore

        self.requests += 1
        try:
            return await obstore.head_async(self._client, self._path)
        except Exception as exc:
            raise remote_error(exc, self.name, "HEAD") from None

    async def _fetch_all(self, groups):
        sem = asyncio.Semaphore(self.max_concurrency)

        async def one(start, end):
            async with sem:
                return await self._get(start, end)

        tasks = [asyncio.ensure_future(one(s, e)) for s, e, _ in groups]
        try:
            return await asyncio.gather(*tasks)
        finally:
            for t in tasks:  # one failed: cancel the rest rather than leave them running
                t.cancel()

    async def _fetch_each(self, groups, arrived):
        """Fetch the groups, putting ``(group, bytes, None)`` or ``(group, None, error)`` on ``arrived``."""
        sem = asyncio.Semaphore(self.max_concurrency)

        async def one(g, start, end):
            async with sem:
                try:
                    arrived.put((g, await self._get(start, end), None))
                except Exception as exc:
                    arrived.put((g, None, exc))
                    raise

        tasks = [asyncio.ensure_future(one(g, s, e)) for g, (s, e, _) in enumerate(groups)]
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    async def _get(self, start: int, end: int, to_end: bool = False):
        """Bytes ``start..end``; with ``to_end``, fewer when the object ends first."""
        import obstore

        options: Any = {"range": (start, end)}
        etag = self._etag
        if etag is not None:
            options["if_match"] = etag
        self.requests += 1
        t0 = time.perf_counter()
        try:
            result = await obstore.get_async(self._client, self._path, options=options)
            t1 = time.perf_counter()
            meta = result.meta
            self._note(meta)
            buf = await result.bytes_async()
        except Exception as exc:
            raise remote_error(exc, self.name, f"GET bytes {start}..{end}") from None
        got = len(memoryview(buf))
        self.link.note(t1 - t0, got, time.perf_counter() - t0)
        if to_end and self._size is not None and got == max(0, min(end, self._size) - start):
            return buf
        if got != end - start:
            size = self._size
            if size is not None and end > size:  # the answer said where the object ends: before these bytes
                raise FormatError(f"{self.name}: bytes {start}..{end} are past the end of the object ({size} bytes); "
                                  "the header does not match the object")
            tail = f"; the object has {size} bytes" if size is not None else ""
            raise RemoteError(f"{self.name}: expected {end - start} bytes at offset {start}, the server sent "
                              f"{got}{tail}; the header does not match the object or the server cut the answer")
        return buf

    def _note(self, meta) -> None:
        """Pin the version and size the first response reports; refuse a changed object."""
        etag = meta.get("e_tag")
        size = meta.get("size")
        with self._lock:
            if etag:
                if self._etag is None:
                    self._etag = etag
                elif etag != self._etag:
                    raise RemoteError(f"{self.name}: the object changed while it was open (ETag {etag}, "
                                      f"opened as {self._etag}); open it again")
            if size is not None:
                if self._size is None:
                    if int(size) < self._min_size:
                        raise BlobError(f"{self.name}: the object has {size} bytes but the header blob's frames "
                                        f"and trailer need at least {self._min_size}; truncated, or the blob "
                                        "belongs to another file")
                    self._size = int(size)
                elif int(size) != self._size:
                    raise RemoteError(f"{self.name}: the object has {size} bytes, expected {self._size}; "
                                      "it changed or the header does not match it")


class _InFlight(Pending):
    """A remote store's merged requests, sent: ``result`` waits for them and cuts each range out."""

    def __init__(self, store: RemoteStore, checked, groups, fut):
        super().__init__([])
        self._store, self._checked, self._groups, self._fut = store, checked, groups, fut

    def result(self, stores_waiting: int = 1) -> list[np.ndarray]:
        bufs = self._store.wait(self._fut, len(self._groups) * stores_waiting)
        return _slice(self._checked, self._groups, bufs)

    def cancel(self) -> None:
        self._fut.cancel()


def _slice(checked, groups, bufs) -> list[np.ndarray]:
    """Each range's bytes cut out of its merged request's answer (empty ranges: empty arrays)."""
    out: list = [np.empty(0, np.uint8) if n == 0 else None for _, n in checked]
    for (start, _, members), buf in zip(groups, bufs, strict=True):
        arr = np.frombuffer(buf, np.uint8)
        for i in members:
            o, n = checked[i]
            out[i] = arr[o - start:o - start + n]
    return out


def _check_range(offset, nbytes, name) -> tuple[int, int]:
    o, n = int(offset), int(nbytes)
    if o < 0 or n < 0:
        raise RumiError(f"{where(name)}byte range ({o}, {n}) is negative")
    return o, n
