"""A remote URI's ``storage_options``: rumimm's own keys, the client's, and one client per bucket or host.

``storage_options`` mixes three kinds of keys: rumimm's (how requests are merged, run
and retried), obstore's ``ClientConfig`` keys (timeouts, HTTP versions, proxies) and
the store's own (``endpoint``, ``region``, credentials), which go to obstore as they
are.  Clients are shared by the objects of one bucket or host with the same options
and environment, per process, so they share connections.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np

from rumimm.errors import RumiError
from rumimm.store.per_process import ProcessCache
from rumimm.store.uri import HTTP_SCHEMES, OBJECT_SCHEMES, plain_parts, public_name

__all__ = ["DEFAULT_COALESCE", "DEFAULT_CONCURRENCY", "ClientSettings", "client_settings"]

#: Ranges closer than this many bytes are fetched by one request (the reference's 1 MiB).
DEFAULT_COALESCE = 1 << 20
#: Requests in flight at once, per call of ``get_ranges``.
DEFAULT_CONCURRENCY = 64

#: Hosts obstore reads as an object store, not a plain HTTP server: never shared per host.
_STORE_HOSTS = ("amazonaws.com", "r2.cloudflarestorage.com", "core.windows.net", "fabric.microsoft.com")
#: obstore ClientConfig keys (the rest of storage_options configures the store itself).
_CLIENT_KEYS = {"allow_http", "allow_invalid_certificates", "connect_timeout", "default_content_type",
                "default_headers", "http1_only", "http2_keep_alive_interval", "http2_keep_alive_timeout",
                "http2_keep_alive_while_idle", "http2_only", "pool_idle_timeout", "pool_max_idle_per_host",
                "proxy_url", "proxy_ca_certificate", "proxy_excludes", "root_certificate",
                "randomize_addresses", "read_timeout", "timeout", "user_agent"}
#: rumimm's own keys: how requests are merged, run and retried.
_OWN_KEYS = {"coalesce", "max_concurrency", "max_retries", "retry_timeout", "init_backoff", "max_backoff",
             "part_size"}  # part_size: writes only (store.remote_writer)
_DEFAULT_CLIENT = {"timeout": 30.0, "connect_timeout": 5.0}  # seconds; obstore's own defaults too
_ALLOW_HTTP_ENV = {"s3": "AWS_ALLOW_HTTP", "s3a": "AWS_ALLOW_HTTP", "gs": "GOOGLE_ALLOW_HTTP"}
_DEFAULT_RETRY = {"max_retries": 5, "retry_timeout": 60.0, "init_backoff": 0.1, "max_backoff": 5.0}
_ENV_PREFIXES = ("AWS_", "GOOGLE_", "AZURE_", "AZURITE_")  # what the clients read: a change makes a new client

#: The process's one cache (emptied in a forked child: obstore's clients do not survive fork):
#: ``("client", root, options..., environment)`` -> an obstore client, shared by the objects of one bucket
#: or host with the same options and environment; ``("http", scheme://host, storage_options)`` -> the
#: ClientSettings (path "") of a plain HTTP server's URLs, whose settings depend on the host and options alone.
_cache = ProcessCache()


@dataclass(frozen=True)
class ClientSettings:
    """What a remote store is built from: its client, its path in it, and how requests are merged and bounded."""

    client: Any  # an obstore store, shared per bucket or host and options
    path: str  # the object's path in the client ("" when the client holds the whole URI)
    request_seconds: float  # one request with its retries may take this long at most
    coalesce: int  # bytes between ranges that one request still spans
    auto: bool  # coalesce measured from the link (``coalesce="auto"``)
    max_concurrency: int  # requests in flight at once, per call


def client_settings(uri: str, storage_options: Mapping[str, Any] | None) -> ClientSettings:
    """Parse ``storage_options`` for ``uri`` (ValueError naming a bad key) and find or make its client.

    The settings of a plain HTTP server's URLs (no query string) depend on the scheme, the host and
    the options only: they are worked out once per host and options, and each further URL of that
    host costs a dictionary look-up (a STAC search result opens tens of objects of one host).
    """
    plain = plain_parts(uri)
    key = None
    if plain is not None and plain[0].startswith("http") and plain[1].lstrip("/"):
        try:
            key = ("http", plain[0], repr(sorted(storage_options.items())) if storage_options else "")
        except TypeError:  # keys that do not sort: the long way, which names them
            key = None
        known = None if key is None else _cache.get(key)
        if known is not None:
            return ClientSettings(known.client, unquote(plain[1].lstrip("/")), known.request_seconds,
                                  known.coalesce, known.auto, known.max_concurrency)
    opts = dict(storage_options or {})
    own = {k: opts.pop(k) for k in list(opts) if k in _OWN_KEYS}
    auto = own.get("coalesce") == "auto"
    if isinstance(own.get("coalesce"), str) and not auto:
        raise ValueError(f"storage option coalesce must be an integer >= 0 or 'auto', got {own['coalesce']!r}")
    coalesce = DEFAULT_COALESCE if auto else int_option(own, "coalesce", DEFAULT_COALESCE, 0)
    concurrency = int_option(own, "max_concurrency", DEFAULT_CONCURRENCY, 1)
    client, path, bound, per_host = _client_for(uri, opts, own)
    settings = ClientSettings(client, path, bound, coalesce, auto, concurrency)
    if key is not None and per_host:  # only settings the long way gave (bad options raised above)
        _cache.get_or_make(key, lambda: ClientSettings(client, "", bound, coalesce, auto, concurrency))
    return settings


def int_option(own: Mapping[str, Any], key: str, default: int, minimum: int) -> int:
    value = own.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"storage option {key} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _duration(key: str, value: object) -> timedelta:
    if isinstance(value, timedelta) and value.total_seconds() > 0:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"storage option {key} must be seconds > 0 or a timedelta, got {value!r}")
    return timedelta(seconds=float(value))


def _client_for(uri: str, opts: dict[str, Any], own: dict[str, Any]) -> tuple[Any, str, float, bool]:
    """(obstore store, path in it, seconds one request may take with its retries, whether ``uri`` is an object of
    a plain HTTP server, whose settings hold for every object of its host and options) for ``uri``."""
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme not in OBJECT_SCHEMES | HTTP_SCHEMES:
        raise ValueError(f"{public_name(uri)}: scheme {scheme!r} is not one rumimm reads; "
                         f"expected one of {sorted(OBJECT_SCHEMES | HTTP_SCHEMES)}")
    # Client options given replace those the client reads from the environment (obstore),
    # so the one that matters there, plain HTTP allowed, is carried over.
    client_opts = {k: opts.pop(k) for k in list(opts) if k in _CLIENT_KEYS}
    for key in ("timeout", "connect_timeout", "read_timeout", "pool_idle_timeout"):
        if key in client_opts:
            client_opts[key] = _duration(key, client_opts[key])
    timeouts = {k: client_opts.get(k, timedelta(seconds=v)) for k, v in _DEFAULT_CLIENT.items()}
    retry = dict(_DEFAULT_RETRY)
    retry.update({k: own[k] for k in ("max_retries", "retry_timeout", "init_backoff", "max_backoff") if k in own})
    retry_config = {"max_retries": int_option(retry, "max_retries", 5, 0),
                    "retry_timeout": _duration("retry_timeout", retry["retry_timeout"]),
                    "backoff": {"init_backoff": _duration("init_backoff", retry["init_backoff"]),
                                "max_backoff": _duration("max_backoff", retry["max_backoff"]), "base": 2}}
    host = (parts.hostname or "").lower()
    plain_http = scheme in HTTP_SCHEMES and not host.endswith(_STORE_HOSTS)
    if scheme in HTTP_SCHEMES:
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
    # an HTTP server's client reads none of those variables, and walking os.environ is the
    # largest cost of opening an asset over HTTP from its blob (about 0.1 ms each)
    env = () if plain_http else sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES))
    shared = ("client", root, repr(sorted(opts.items())), repr(sorted(client_opts.items())), repr(retry_config),
              hash(repr(env)))
    client = _cache.get_or_make(shared, lambda: _make_client(root, opts, client_opts, retry_config, public_name(uri)))
    bound = (retry_config["retry_timeout"] + timeouts["timeout"] + timeouts["connect_timeout"]).total_seconds()
    return client, path, bound, plain_http and root != uri


def _make_client(root: str, config: dict[str, Any], client_opts: Any, retry_config: Any, name: str) -> Any:
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
