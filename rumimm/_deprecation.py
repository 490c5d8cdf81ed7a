"""Renamed public names: the old one keeps working for one release and warns, naming its successor.

Every message reads ``"<old> is deprecated; use <new>"``, as a ``RenamedWarning`` (a
DeprecationWarning) so that one warning filter (``pyproject.toml``'s pytest
``filterwarnings``) turns any use of an old name inside rumimm, its tests and its docs
into an error, and no other library's warning; docs/migration.md lists the renames.
"""

from __future__ import annotations

import warnings

from rumimm.errors import RenamedWarning

__all__ = ["UNSET", "renamed", "renamed_keyword"]


class _Unset:
    """The default of a deprecated keyword: tells "not given" from any value, None included."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET = _Unset()


def renamed(old: str, new: str, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new`` (``stacklevel`` 3: the caller of the shim)."""
    warnings.warn(f"{old} is deprecated; use {new}", RenamedWarning, stacklevel=stacklevel)


def renamed_keyword(func: str, old: str, new: str, old_value, new_value, default=None, stacklevel: int = 4):
    """The value of keyword ``new``, taken from deprecated keyword ``old`` when only that was given.

    ``old_value`` is ``UNSET`` when the caller left the old keyword out; giving both is a TypeError.
    """
    if old_value is UNSET:
        return new_value
    if new_value is not default:
        raise TypeError(f"{func}() got both {old}= and {new}= (its new name); pass only {new}=")
    renamed(f"{func}({old}=)", f"{func}({new}=)", stacklevel=stacklevel)
    return old_value
