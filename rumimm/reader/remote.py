"""Remote objects: a rumi file in an object store or at an HTTP(S) URL, read by ranged GETs.

:class:`RemoteStore` is the ``store.Store`` of an object in an object store (``s3://``,
``gs://``, ``az://``) or at an ``http(s)://`` URL, read through obstore (the Rust
``object_store`` crate): only ranged GETs (no HEAD when the caller knows the size),
ranges closer than ``coalesce`` bytes merged into one request, the requests in flight
together on one background event loop with the GIL released; :func:`read_many` sends
the requests of several objects at once (a batch of chips from many files).

A remote object is pinned to the version its first response reports: that response's
ETag becomes :attr:`RemoteStore.version` and every later request carries ``If-Match``
with it, so an object replaced while it is open fails the next read with a
:class:`RemoteError` instead of mixing bytes of two versions; cached frames belong to
one open image (``cache``), so a reopened image never sees frames of an older version.
A server without ETags cannot be checked (``docs/remote.md``).  Messages name the URI
without its query string or credentials and never repeat the client's own message,
which holds both.  obstore is imported on the first request, never at import.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import threading
import time
from datetime import timedelta
from urllib.parse import unquote, urlsplit

import numpy as np

from rumimm.errors import BlobError, FormatError, RumiError, where

__all__ = [
    "DEFAULT_COALESCE",
    "DEFAULT_CONCURRENCY",
    "Link",
    "RemoteError",
    "RemoteStore",
    "is_remote",
    "plan_requests",
    "public_name",
    "read_many",
    "sibling",
]

#: Ranges closer than this many bytes are fetched by one request (the reference's 1 MiB).
DEFAULT_COALESCE = 1 << 20
#: Requests in flight at once, per call of ``read_ranges``.
DEFAULT_CONCURRENCY = 64
#: One merged request never spans more than this many bytes (unless one range alone does).
MAX_REQUEST_BYTES = 64 << 20

_OBJECT_SCHEMES = {"s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl"}
_HTTP_SCHEMES = {"http", "https"}
#: Hosts obstore reads as an object store, not a plain HTTP server: never shared per host.
_STORE_HOSTS = ("amazonaws.com", "r2.cloudflarestorage.com", "core.windows.net", "fabric.microsoft.com")

#: obstore ClientConfig keys (the rest of storage_options configures the store itself).
_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
                "default_headers", "http1_only", "http2_keep_alive_interval", "http2_keep_alive_timeout",
                "http2_keep_alive_while_idle", "http2_only", "pool_idle_timeout", "pool_max_idle_per_host",
                "proxy_url", "proxy_ca_certificate", "proxy_excludes", "root_certificate",
                "randomize_addresses", "read_timeout", "timeout", "user_agent"}
#: rumimm's own keys: how requests are merged, run and retried.
_OWN_KEYS = {"coalesce", "max_concurrency", "max_retries", "retry_timeout", "init_backoff", "max_backoff"}
_DEFAULT_CLIENT = {"timeout": 30.0, "connect_timeout": 5.0}  # seconds; obstore's own defaults too
_ALLOW_HTTP_ENV = {"s3": "AWS_ALLOW_HTTP", "s3a": "AWS_ALLOW_HTTP", "gs": "GOOGLE_ALLOW_HTTP"}
_DEFAULT_RETRY = {"max_retries": 5, "retry_timeout": 60.0, "init_backoff": 0.1, "max_backoff": 5.0}


class RemoteError(RumiError, OSError):
    """A remote object could not be read: missing, refused, changed, or the server failed.

    ``status`` is the HTTP status when the server's answer gave one that decided the error
    (404, 403, ...), else None.
    """

    status: int | None = None


# -- remote ---------------------------------------------------------------------------

def is_remote(path) -> bool:
    """Whether ``path`` is a URI rumimm reads through a remote store (not a local path)."""
    if not isinstance(path, str) or "://" not in path:
        return False
    return path.split("://", 1)[0].lower() in _OBJECT_SCHEMES | _HTTP_SCHEMES


def public_name(uri: str) -> str:
    """``uri`` without credentials, query string or fragment: safe to show in a message."""
    try:
        parts = urlsplit(uri)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", a port out of range: the URI cannot be parsed
        scheme = uri.split("://", 1)[0]
        raise RumiError(f"{scheme}://...: not a URI that can be parsed ({exc})") from None
    host = parts.hostname or ""
    if port is not None:
        host = f"{host}:{port}"
    return f"{parts.scheme}://{host}{parts.path}"


def sibling(uri: str, suffix: str) -> str:
    """The URI of the object named ``uri``'s path + ``suffix`` (a sidecar), query string kept."""
    parts = urlsplit(uri)
    return parts._replace(path=parts.path + suffix).geturl()


class RemoteStore:
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
        carries in one round trip, measured, see :class:`Link`), ``max_concurrency`` (default 64),
        ``max_retries`` (5), ``retry_timeout`` (s, 60), ``init_backoff`` (s, 0.1),
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
    """

    def __init__(self, uri: str, storage_options=None, *, size: int | None = None, version: str | None = None,
                 min_size: int = 0):
        self.uri = uri
        self.name = public_name(uri)
        opts = dict(storage_options or {})
        own = {k: opts.pop(k) for k in list(opts) if k in _OWN_KEYS}
        auto = own.get("coalesce") == "auto"
        if isinstance(own.get("coalesce"), str) and not auto:
            raise ValueError(f"storage option coalesce must be an integer >= 0 or 'auto', got {own['coalesce']!r}")
        self.coalesce = DEFAULT_COALESCE if auto else _int_option(own, "coalesce", DEFAULT_COALESCE, 0)
        self.max_concurrency = _int_option(own, "max_concurrency", DEFAULT_CONCURRENCY, 1)
        self._client, self._path, self._bound = _client_for(uri, opts, own)
        self.link = _link_for(self._client)  # round trips and throughput measured on this client's answers
        self._auto = auto
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
            meta = _wait(_submit(self._head(), self), 1, self)
            self._note(meta)
        return self._size

    def read_ranges(self, ranges) -> list[np.ndarray]:
        checked, groups = self._plan(ranges)
        bufs = _wait(_submit(self._fetch_all(groups), self), len(groups), self) if groups else []
        return self._slice(checked, groups, bufs)

    @staticmethod
    def _slice(checked, groups, bufs) -> list[np.ndarray]:
        """Each range's bytes cut out of its merged request's answer (empty ranges: empty arrays)."""
        out: list = [np.empty(0, np.uint8) if n == 0 else None for _, n in checked]
        for (start, _, members), buf in zip(groups, bufs, strict=True):
            arr = np.frombuffer(buf, np.uint8)
            for i in members:
                o, n = checked[i]
                out[i] = arr[o - start:o - start + n]
        return out

    def iter_ranges(self, ranges):
        checked, groups = self._plan(ranges)
        for i, (_, n) in enumerate(checked):
            if n == 0:
                yield i, np.empty(0, np.uint8)
        if not groups:
            return
        arrived: queue.SimpleQueue = queue.SimpleQueue()
        fut = _submit(self._fetch_each(groups, arrived), self)
        deadline = time.monotonic() + _time_bound(self, len(groups))
        try:
            for _ in groups:
                try:
                    g, buf, exc = arrived.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise _no_answer(self, _time_bound(self, len(groups))) from None
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
            return bytes(self.read_ranges([(offset, nbytes)])[0])
        if self.closed:
            raise RumiError(f"{self.name}: store is closed")
        if nbytes == 0:
            return b""
        return bytes(_wait(_submit(self._get(offset, offset + nbytes, True), self), 1, self))

    def read_into(self, dst: np.ndarray, offset: int) -> None:
        """Fill ``dst`` (uint8) with the bytes at ``offset``: exactly ``len(dst)`` or RumiError."""
        dst[:] = self.read_ranges([(offset, dst.shape[0])])[0]

    def mapping(self) -> None:
        """None: a remote object is never mapped (the planner fetches its frames)."""
        return

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
            raise _error(exc, self.name, "HEAD") from None

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

        options = {"range": (start, end)}
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
            raise _error(exc, self.name, f"GET bytes {start}..{end}") from None
        got = len(memoryview(buf))
        self.link.note(t1 - t0, got, time.perf_counter() - t0)
        if to_end and self._size is not None and got == max(0, min(end, self._size) - start):
            return buf
        if got != end - start:
            size = self._size
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


def read_many(requests) -> list[list[np.ndarray]]:
    """``store.read_ranges(ranges)`` for each ``(store, ranges)`` in ``requests``, remote ones all in flight together.

    A batch of chips from several remote objects costs one wait, not one per object:
    every object's merged requests go out at once (each store still caps its own
    requests in flight).
    """
    out: list = [None] * len(requests)
    waiting = []
    for i, (store, ranges) in enumerate(requests):
        if isinstance(store, RemoteStore):
            checked, groups = store._plan(ranges)
            if groups:
                waiting.append((i, store, checked, groups, _submit(store._fetch_all(groups), store)))
                continue
        out[i] = store.read_ranges(ranges)
    try:
        for i, store, checked, groups, fut in waiting:
            out[i] = store._slice(checked, groups, _wait(fut, len(groups) * len(waiting), store))
    finally:
        for *_, fut in waiting:
            fut.cancel()  # a failure: drop the requests still in flight
    return out


class Link:
    """What the answers of one client (a bucket or host) say of the link: round trip and throughput.

    ``coalesce="auto"`` merges two ranges when the bytes between them take less time to
    arrive than one more round trip would: the threshold is the round trip times one
    answer's throughput.  The round trip is the shortest time to an answer's headers
    among the client's last ``WINDOW`` answers (queueing at a busy server lengthens the
    others); an answer's throughput is its bytes over the time it took beyond that round
    trip (the server's work on them and their transfer, while the answers in flight with
    it share the link), a moving average over answers of at least ``MIN_SAMPLE`` bytes.
    Until both are known, and never below it, the threshold is ``DEFAULT_COALESCE``;
    never above ``MAX_REQUEST_BYTES / 4``.
    """

    MIN_SAMPLE = 256 << 10
    WINDOW = 32
    WEIGHT = 0.2  # of a new sample in the moving average

    def __init__(self):
        self.rtts: list[float] = []  # seconds to the headers, the last WINDOW answers
        self.rate: float | None = None  # bytes per second of one answer

    @property
    def rtt(self) -> float | None:
        return min(self.rtts) if self.rtts else None

    def note(self, headers_seconds: float, nbytes: int, total_seconds: float) -> None:
        """One answer: ``nbytes`` whose headers came after ``headers_seconds``, the whole after ``total_seconds``."""
        self.rtts = [*self.rtts[1 - self.WINDOW:], headers_seconds]
        rtt = min(self.rtts)
        if nbytes >= self.MIN_SAMPLE:
            rate = nbytes / max(total_seconds - rtt, 1e-4)
            w = self.WEIGHT
            self.rate = rate if self.rate is None else (1 - w) * self.rate + w * rate

    def reset(self) -> None:
        self.rtts, self.rate = [], None

    def coalesce(self) -> int:
        """The merging threshold in bytes: one round trip's worth of the link, within bounds."""
        rtt = self.rtt
        if rtt is None or self.rate is None:
            return DEFAULT_COALESCE
        return int(min(MAX_REQUEST_BYTES // 4, max(DEFAULT_COALESCE, rtt * self.rate)))


_links: dict = {}


def _link_for(client) -> Link:
    with _clients_lock:
        return _links.setdefault(id(client), Link())


def plan_requests(ranges, coalesce: int):
    """Merge ``(offset, nbytes)`` ranges closer than ``coalesce`` bytes: ``[(start, end, [indices])]``.

    Empty ranges need no request and are left out; a merged request stops growing at
    MAX_REQUEST_BYTES.
    """
    order = sorted((o, i) for i, (o, n) in enumerate(ranges) if n > 0)
    groups = []
    for o, i in order:
        end = o + ranges[i][1]
        if groups:
            g = groups[-1]
            if o - g[1] <= coalesce and max(g[1], end) - g[0] <= MAX_REQUEST_BYTES:
                g[1] = max(g[1], end)
                g[2].append(i)
                continue
        groups.append([o, end, [i]])
    return [(s, e, m) for s, e, m in groups]


def _check_range(offset, nbytes, name) -> tuple[int, int]:
    o, n = int(offset), int(nbytes)
    if o < 0 or n < 0:
        raise RumiError(f"{where(name)}byte range ({o}, {n}) is negative")
    return o, n


def _int_option(own: dict, key: str, default: int, minimum: int) -> int:
    value = own.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"storage option {key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _duration(key: str, value) -> timedelta:
    if isinstance(value, timedelta) and value.total_seconds() > 0:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"storage option {key} must be seconds > 0 or a timedelta, got {value!r}")
    return timedelta(seconds=float(value))


# -- clients: one per bucket or host and options, per process ---------------------------

_clients: dict = {}
_ENV_PREFIXES = ("AWS_", "GOOGLE_", "AZURE_")  # what the clients read: a change makes a new client
_clients_pid = os.getpid()
_clients_lock = threading.Lock()


def _client_for(uri: str, opts: dict, own: dict):
    """(obstore store, path in it, seconds one request may take with its retries) for ``uri``.

    Stores are shared by the objects of one bucket or host with the same options, so
    they share connections.
    """
    global _clients_pid
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in _OBJECT_SCHEMES | _HTTP_SCHEMES:
        raise ValueError(f"{public_name(uri)}: scheme {scheme!r} is not one rumimm reads; "
                         f"expected one of {sorted(_OBJECT_SCHEMES | _HTTP_SCHEMES)}")
    # Client options given replace those the client reads from the environment (obstore),
    # so the one that matters there, plain HTTP allowed, is carried over.
    client_opts = {k: opts.pop(k) for k in list(opts) if k in _CLIENT_KEYS}
    for key in ("timeout", "connect_timeout", "read_timeout", "pool_idle_timeout"):
        if key in client_opts:
            client_opts[key] = _duration(key, client_opts[key])
    timeouts = {k: client_opts.get(k, timedelta(seconds=v)) for k, v in _DEFAULT_CLIENT.items()}
    retry = dict(_DEFAULT_RETRY)
    retry.update({k: own[k] for k in ("max_retries", "retry_timeout", "init_backoff", "max_backoff") if k in own})
    retry_config = {"max_retries": _int_option(retry, "max_retries", 5, 0),
                    "retry_timeout": _duration("retry_timeout", retry["retry_timeout"]),
                    "backoff": {"init_backoff": _duration("init_backoff", retry["init_backoff"]),
                                "max_backoff": _duration("max_backoff", retry["max_backoff"]), "base": 2}}
    host = (parts.hostname or "").lower()
    plain_http = scheme in _HTTP_SCHEMES and not host.endswith(_STORE_HOSTS)
    if scheme in _HTTP_SCHEMES:
        client_opts.setdefault("allow_http", scheme == "http")
    elif client_opts and "allow_http" not in client_opts:
        allow = os.environ.get(_ALLOW_HTTP_ENV.get(scheme, "AZURE_ALLOW_HTTP"), "").strip().lower()
        if allow in ("1", "true", "yes", "on"):
            client_opts["allow_http"] = True
    if plain_http and opts:
        raise ValueError(f"{public_name(uri)}: storage options {sorted(opts)} do not apply to an HTTP URL")
    if scheme in ("s3", "s3a", "gs") or (plain_http and not parts.query):
        root = f"{scheme}://{parts.netloc}"
        path = unquote(parts.path.lstrip("/")) if plain_http else parts.path.lstrip("/")
    else:  # obstore parses the whole URI (Azure's account and container, signed URLs)
        root, path = uri, ""
    if not path and root != uri:
        raise ValueError(f"{public_name(uri)}: the URI names no object")
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES))
    key = (root, repr(sorted(opts.items())), repr(sorted(client_opts.items())), repr(retry_config), hash(repr(env)))
    with _clients_lock:
        if _clients_pid != os.getpid():
            _clients.clear()
            _links.clear()
            _clients_pid = os.getpid()
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = _make_client(root, opts, client_opts, retry_config, public_name(uri))
    bound = (retry_config["retry_timeout"] + timeouts["timeout"] + timeouts["connect_timeout"]).total_seconds()
    return client, path, bound


def _make_client(root, config, client_opts, retry_config, name):
    try:
        from obstore.store import from_url
    except ImportError:
        raise ImportError(f"{name}: reading remote files needs obstore; pip install 'rumimm[remote]'") from None
    try:
        return from_url(root, client_options=client_opts or None, retry_config=retry_config, **config)
    except Exception as exc:
        kind = type(exc).__name__
        raise RumiError(f"{name}: cannot configure the client ({kind}); check storage_options and the "
                         "AWS_/GOOGLE_/AZURE_ environment variables") from None


# -- the event loop the requests run on ---------------------------------------------------

_loop = None
_loop_pid = None
_used_pid = None  # the process that sent obstore's first request (its runtime runs there)
_loop_lock = threading.Lock()


def _event_loop():
    """The process's background event loop, started on first use."""
    global _loop, _loop_pid
    pid = os.getpid()
    if _loop is None or _loop_pid != pid:
        with _loop_lock:
            if _loop is None or _loop_pid != pid:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="rumimm-remote", daemon=True).start()
                _loop, _loop_pid = loop, pid
    return _loop


def _submit(coro, store: RemoteStore):
    """Start ``coro`` on the background loop: a concurrent future."""
    global _used_pid
    pid = os.getpid()
    if _used_pid is not None and _used_pid != pid:
        coro.close()
        raise RemoteError(
            f"{store.name}: this process was forked from one that had already read remotely; obstore's "
            "runtime does not survive fork (its requests would hang); open remote images in the child, "
            "pass header= so the parent sends no request, or use the 'spawn' or 'forkserver' start method")
    _used_pid = pid
    return asyncio.run_coroutine_threadsafe(coro, _event_loop())


def _wait(fut, n_requests: int, store: RemoteStore):
    """The result of ``fut``, waited for no longer than the store's timeouts allow."""
    bound = _time_bound(store, n_requests)
    try:
        return fut.result(timeout=bound)
    except TimeoutError:
        fut.cancel()
        raise _no_answer(store, bound) from None


def _no_answer(store: RemoteStore, bound: float) -> RemoteError:
    return RemoteError(f"{store.name}: no answer within {bound:.0f} s; the server is not responding")


def _time_bound(store: RemoteStore, n_requests: int) -> float:
    """A safety net over obstore's own per-request timeouts: waves of requests x (retries + timeout)."""
    waves = -(-n_requests // store.max_concurrency)
    return waves * store._bound + 10.0


_STATUS = re.compile(r"status code: (\d{3})")
_RANGES = re.compile(r"Requested (\d+)\.\.(\d+), got (\d+)\.\.(\d+)")


def _error(exc: BaseException, name: str, what: str) -> RumiError:
    """A RemoteError naming the object, without the client's message (it holds the full URL); a
    ``BlobError`` for a range past the object's end."""
    if isinstance(exc, RumiError):
        return exc
    kind = type(exc).__name__
    text = str(exc)
    status = _STATUS.search(text)
    code = f"HTTP {status.group(1)}" if status else None
    if isinstance(exc, FileNotFoundError) or kind == "NotFoundError":
        err = RemoteError(f"{name}: not found ({code or 'HTTP 404'}); check the URI")
        err.status = 404
        return err
    if kind in ("PermissionDeniedError", "UnauthenticatedError"):
        return RemoteError(f"{name}: access denied ({code or kind}); check the credentials and the "
                           "object's permissions")
    if kind == "PreconditionError":
        return RemoteError(f"{name}: the object changed since it was opened ({code or 'HTTP 412'}); open it again")
    if kind == "NotSupportedError":
        return RemoteError(f"{name}: the server answered a ranged {what} with the whole object (no Range "
                           "support); rumimm reads only from servers that honour Range requests")
    if code == "HTTP 416":  # the range starts past the object's end: only a header of another object asks that
        return BlobError(f"{name}: the object ends before the bytes asked for ({what}, HTTP 416); the header "
                         "blob does not match the object: truncated, or the blob belongs to another file")
    got = _RANGES.search(text)
    if got:
        return RemoteError(f"{name}: the server answered {what} with bytes {got.group(3)}..{got.group(4)}; "
                           "the object is shorter than the header says, or the server is broken")
    if "TimedOut" in text or "timed out" in text.lower():
        reason = "timed out"
    elif code:
        reason = code
    elif "error sending request" in text or "connect" in text.lower():
        reason = "connection failed"
    elif "body" in text.lower():
        reason = "the answer was cut short"
    else:
        reason = kind
    return RemoteError(f"{name}: {what} failed ({reason}; retried with backoff where that can help)")
