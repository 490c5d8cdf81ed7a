"""Atomic replacement of files, and cleaning up after killed writers (``rumimm.store.atomic``, kept here by name)."""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rumimm._typing import AnyPath, StrPath

__all__ = ["TEMP_PATTERN", "AtomicFile", "clean", "path_str", "replacing", "stale_temp_files", "temp_path"]

#: What a rumimm temporary file is called: ``.<target name>.rumimm-<pid>-<random>.tmp``.
TEMP_PATTERN = re.compile(r"^\.(?P<name>.*)\.rumimm-(?P<pid>\d+)-[0-9a-f]{8}\.tmp$")
_NAME_ROOM = 200  # a target name near NAME_MAX (255) still leaves room for the temp name


def path_str(path: AnyPath) -> str:
    """``path`` as a non-empty ``str`` (bytes decoded as the file system does), as every write and clean takes it."""
    p = os.fspath(path)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not p:
        raise FileNotFoundError(errno.ENOENT, "an empty path names no file or directory", p)
    return p


def _temp_name(target_name: str) -> str:
    return f".{target_name[:_NAME_ROOM]}.rumimm-{os.getpid()}-{secrets.token_hex(4)}.tmp"


def _target(path: StrPath) -> tuple[str, int | None]:
    """The file a write of ``path`` replaces (through a symlink: its target, the link kept) and its mode.

    The mode is None for a new file, which gets ``0o666 & ~umask`` from the kernel.
    """
    target = os.path.realpath(os.fspath(path))
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        return target, None
    if stat.S_ISDIR(st.st_mode):  # refused before anything is written, not at the final rename
        raise IsADirectoryError(errno.EISDIR, "is a directory; name the file to write", os.fspath(path))
    return target, st.st_mode & 0o7777


def temp_path(dst: StrPath) -> str:
    """A fresh temporary path next to ``dst``'s target, named so that :func:`clean` finds it if its writer dies.

    Only a name: whoever creates the file (GDAL, Pillow, ``open``) applies the umask.
    """
    folder, name = os.path.split(os.path.realpath(os.fspath(dst)))
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", folder)
    return os.path.join(folder, _temp_name(name))


@contextmanager
def replacing(dst: StrPath) -> Iterator[str]:
    """Yield a :func:`temp_path` for ``dst``; it replaces ``dst`` if the block succeeds, else is removed.

    For outputs written by other libraries (GeoTIFFs, PNGs, blob files); rumi files
    go through :class:`AtomicFile`, which also locks and fsyncs.  Like it, a write
    through a symlink replaces the link's target, a replaced file keeps its mode, and
    what killed writers of the same target left is removed.
    """
    target, mode = _target(dst)
    tmp = temp_path(dst)
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        _remove([tmp])
        raise
    _remove(stale_temp_files(*os.path.split(target)))


def _lock(fd: int, blocking: bool) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the pid alone decides
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):  # a file system without locks
            return True
        raise
    return True


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    except OverflowError:
        return False
    return True


def _is_stale(path: str, pid: int) -> bool:
    if _pid_alive(pid):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        return _lock(fd, blocking=False)  # a live writer in another pid namespace holds it
    finally:
        os.close(fd)


def stale_temp_files(directory: str, target_name: str | None = None) -> list[str]:
    """Paths of stale rumimm temporary files in ``directory`` (of ``target_name`` only, if given)."""
    try:
        names = os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []
    prefix = None if target_name is None else target_name[:_NAME_ROOM]
    out = []
    for name in names:
        m = TEMP_PATTERN.match(name)
        if m is None or (prefix is not None and m["name"] != prefix):
            continue
        path = os.path.join(directory, name)
        if _is_stale(path, int(m["pid"])):
            out.append(path)
    return out


def _remove(paths: Iterable[str]) -> list[str]:
    removed = []
    for p in paths:
        try:
            os.unlink(p)
        except FileNotFoundError:
            continue
        removed.append(p)
    return removed


def clean(path: AnyPath) -> list[str]:
    """Remove the temporary files that killed rumimm writers left behind.

    Parameters
    ----------
    path : str or os.PathLike
        A directory (every stale rumimm temporary file directly in it) or a
        ``.rumi`` file, existing or not (the stale temporary files of that file).

    Returns
    -------
    list of str
        The paths removed.  Files of writers still running are never removed.

    Examples
    --------
    >>> import rumimm, tempfile
    >>> rumimm.clean(tempfile.gettempdir())  # doctest: +SKIP
    []
    """
    p = path_str(path)
    if os.path.isdir(p):
        return _remove(stale_temp_files(p))
    target = os.path.realpath(p)
    return _remove(stale_temp_files(os.path.dirname(target), os.path.basename(target)))


class AtomicFile:
    """A locked temporary file next to ``path``'s target; ``commit`` renames it over the target."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.target, mode = _target(path)  # through a symlink: replace its target, keep the link
        directory, name = os.path.split(self.target)
        self.tmp = os.path.join(directory, _temp_name(name))
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(self.tmp, flags, 0o666)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "the directory to write into does not exist", path) from None
        except PermissionError as exc:
            raise PermissionError(exc.errno, "cannot create a file in the directory", path) from None
        try:
            _lock(fd, blocking=True)
            if mode is not None:
                os.fchmod(fd, mode)
            self.fh = os.fdopen(fd, "wb", buffering=1 << 20)
        except BaseException:
            os.close(fd)
            os.unlink(self.tmp)
            raise
        self.done = False
        _remove(stale_temp_files(directory, name))  # what killed writers of this file left

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        os.replace(self.tmp, self.target)
        self.done = True
        self.fh.close()  # releases the lock, after the rename: the name never shows a free lock
        try:  # make the rename itself durable
            dfd = os.open(os.path.dirname(self.target), os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(dfd)
        except OSError:
            pass
        finally:
            os.close(dfd)

    def discard(self) -> None:
        if self.done:
            return
        self.done = True
        try:
            os.unlink(self.tmp)
        except FileNotFoundError:
            pass
        try:
            self.fh.close()
        except OSError:
            pass
