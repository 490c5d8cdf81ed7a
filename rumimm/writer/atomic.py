"""Atomic replacement of files, and cleaning up after killed writers (``rumimm.store.atomic``, kept here by name)."""

from __future__ import annotations

from rumimm.store.atomic import TEMP_PATTERN, AtomicFile, clean, path_str, replacing, stale_temp_files, temp_path

__all__ = ["TEMP_PATTERN", "AtomicFile", "clean", "path_str", "replacing", "stale_temp_files", "temp_path"]
