"""What went wrong with a remote object, said without the client's own message (it holds the full URL)."""

from __future__ import annotations

import re

from rumimm.errors import BlobError, RumiError

__all__ = ["RemoteError", "remote_error"]


class RemoteError(RumiError, OSError):
    """A remote object could not be read: missing, refused, changed, or the server failed.

    ``status`` is the HTTP status when the server's answer gave one that decided the error
    (404, 403, ...), else None.
    """

    status: int | None = None


_STATUS = re.compile(r"status code: (\d{3})")
_RANGES = re.compile(r"Requested (\d+)\.\.(\d+), got (\d+)\.\.(\d+)")


def remote_error(exc: BaseException, name: str, what: str) -> RumiError:
    """A RemoteError naming the object (``name``, already public) for the client's ``exc``; a
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
