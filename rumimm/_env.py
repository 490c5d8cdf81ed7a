"""Integer settings read from ``RUMIMM_*`` environment variables."""

from __future__ import annotations

import os


def env_int(name: str, minimum: int) -> int | None:
    """The integer in environment variable ``name``, or None when it is unset or blank.

    Raises ``ValueError`` naming the variable when it is not an integer >= ``minimum``
    (0: "non-negative", 1: "positive").
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    kind = "positive" if minimum == 1 else "non-negative" if minimum == 0 else f">= {minimum}"
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name} must be a {kind} integer, got {raw!r}") from None
    if value < minimum:
        raise ValueError(f"{name} must be a {kind} integer, got {raw!r}")
    return value
