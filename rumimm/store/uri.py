"""Remote URIs: which paths are read through an object store, and how to name them in a message."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from rumimm.errors import RumiError

__all__ = ["HTTP_SCHEMES", "OBJECT_SCHEMES", "is_remote", "plain_parts", "public_name", "same_object", "sibling"]

OBJECT_SCHEMES = frozenset({"s3", "s3a", "gs", "az", "azure", "abfs", "abfss", "adl"})
HTTP_SCHEMES = frozenset({"http", "https"})
#: A plain URI (see :func:`plain_parts`): group 1 is scheme://host[:port], 2 the port, 3 the path.
_PLAIN = re.compile(r"((?:https?|s3|gs|az)://[a-z0-9][a-z0-9.\-]*(?::([1-9][0-9]{0,4}))?)(/[^?#@\s\\]*)?\Z",
                    re.ASCII)


def is_remote(path: object) -> bool:
    """Whether ``path`` is a URI rumimm reads through a remote store (not a local path)."""
    if not isinstance(path, str) or "://" not in path:
        return False
    return path.split("://", 1)[0].lower() in OBJECT_SCHEMES | HTTP_SCHEMES


def plain_parts(uri: object) -> tuple[str, str] | None:
    """``(scheme://host[:port], path)`` of a plain URI, else None.

    Plain: a lower-case scheme and host, a port without a leading zero, a path, and no
    credentials, query string, fragment, white space or backslash.  Such a URI needs no
    parsing to be shown (``public_name`` gives it back as it is) nor to find its client
    (its settings depend on its scheme, host and options alone): the fast path of both,
    since a search result opens tens of such URLs.
    """
    plain = _PLAIN.match(uri) if isinstance(uri, str) else None
    if plain is None or (plain.group(2) is not None and int(plain.group(2)) > 65535):
        return None
    return plain.group(1), plain.group(3) or ""


def public_name(uri: str) -> str:
    """``uri`` without credentials, query string or fragment: safe to show in a message."""
    if plain_parts(uri) is not None:
        return uri  # what the long way gives back unchanged
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


def same_object(a: str, b: str) -> bool:
    """Whether two URIs name one object: scheme and host alike (case aside), and paths alike once empty
    segments are dropped (``s3://b//k`` is key ``k`` to the store client); credentials and query aside."""
    pa, pb = urlsplit(public_name(a)), urlsplit(public_name(b))

    def key(p: SplitResult) -> tuple[str, str, str]:
        return (p.scheme.lower(), p.netloc.lower(), "/".join(seg for seg in p.path.split("/") if seg))

    return key(pa) == key(pb)


def sibling(uri: str, suffix: str) -> str:
    """The URI of the object named ``uri``'s path + ``suffix`` (a sidecar), query string kept."""
    parts = urlsplit(uri)
    return parts._replace(path=parts.path + suffix).geturl()
