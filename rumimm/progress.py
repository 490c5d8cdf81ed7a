"""Progress of long operations (writes, conversions, catalogs): a callback, a bar, or nothing.

Every long-running public function takes ``progress=None``: ``None`` or ``False`` shows
nothing, ``True`` draws a tqdm bar on standard error (tqdm is optional: ``pip install
tqdm``), and a callable is called as ``progress(done, total)`` after each step, with
``total`` fixed for the whole operation.  The command line passes ``True`` only when
standard error is a terminal, so pipes, logs and tests never see a bar.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

__all__ = ["Progress", "on_terminal"]


def on_terminal(stream=None) -> bool:
    """Whether ``stream`` (standard error by default) is an interactive terminal."""
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """Counts steps of one operation and reports them as ``progress`` asks.

    Use as a context manager around the operation and call :meth:`advance` after each
    step; the bar (if any) is closed on exit, also when the operation fails.

    Parameters
    ----------
    progress : None, bool or callable
        What to report to (see the module docstring).
    total : int
        Number of steps of the whole operation.
    desc, unit : str
        The bar's label and step unit (ignored by callbacks).
    """

    def __init__(self, progress, total: int, *, desc: str = "", unit: str = "it"):
        if progress is not None and not isinstance(progress, bool) and not callable(progress):
            raise TypeError(f"progress must be None, a bool or a callable, got {type(progress).__name__}")
        self.total = int(total)
        self.done = 0
        self._callback: Callable[[int, int], object] | None = None
        self._bar = None
        if progress is True:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                raise ImportError("progress=True needs tqdm; pip install tqdm, or pass a callable") from None
            self._bar = tqdm(total=self.total, desc=desc or None, unit=unit, file=sys.stderr, leave=False)
        elif callable(progress):
            self._callback = progress

    def advance(self, n: int = 1) -> None:
        """Record ``n`` more finished steps."""
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._callback is not None:
            self._callback(self.done, self.total)

    def close(self) -> None:
        """Close the bar, if one was drawn (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
