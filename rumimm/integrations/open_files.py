"""The files (open images) a dataset keeps in one process: least recently used first, reopened after a fork.

Training datasets (``ChipDataset``, ``rumimm.torchgeo.RumiDataset``) open each file once per
process, with its blob, and keep it open for the next chip.  A DataLoader worker must not use
its parent's descriptors, so a pool seen from a new process starts empty (and sets that
process's decode threads); a pickled pool carries no image.

Threads may share a dataset: a read takes its images inside :meth:`OpenFiles.reading`, which
holds each one until the read returns, so making room for another thread's files never closes
an image a read is about to use (it is closed when its last read lets go).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from rumimm.reader.threads import set_num_threads

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = ["OpenFiles"]


class OpenFiles:
    """Open images by key, at most ``max_open`` once no read holds more; ``worker_threads`` decode threads in a
    worker."""

    def __init__(self, max_open: int, worker_threads: int):
        self.max_open = max_open
        self.worker_threads = worker_threads
        self._reset()

    def _reset(self) -> None:
        """An empty pool for this process, with a lock of its own (one a thread held at a fork stays held)."""
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._images: OrderedDict = OrderedDict()
        self._holds: dict[int, int] = {}  # id(image) -> reads holding it
        self._retired: dict[int, Any] = {}  # images made room for while held: closed when let go
        self._local = threading.local()  # the images the current thread's read holds

    def get(self, key: Any, open_image: Callable[[], Any]) -> Any:
        """The image under ``key``, opened by ``open_image()`` the first time this process asks; held until the
        read returns when asked inside :meth:`reading`."""
        if self._pid != os.getpid():  # a worker: the parent's handles are not ours to use
            self._reset()
            set_num_threads(self.worker_threads)
        with self._lock:
            img = self._images.get(key)
            if img is not None:
                self._images.move_to_end(key)
                self._hold(img)
                return img
        new = open_image()  # outside the lock: opening a remote file waits on the network
        with self._lock:
            img = self._images.get(key)
            if img is None:
                img = self._images[key] = new
            self._hold(img)
        if img is not new:  # another thread opened it meanwhile: keep one
            new.close()
        return img

    def _hold(self, img: Any) -> None:
        held = getattr(self._local, "held", None)
        if held is not None:
            held.append(img)
            self._holds[id(img)] = self._holds.get(id(img), 0) + 1

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the images :meth:`get` gives inside the block; after it, close the least recently used beyond
        ``max_open`` that no other read holds."""
        outer = getattr(self._local, "held", None)
        held: list[Any] = []
        self._local.held = held
        try:
            yield
        finally:
            self._local.held = outer
            closing = []
            with self._lock:
                for img in held:
                    left = self._holds.pop(id(img)) - 1
                    if left:
                        self._holds[id(img)] = left
                    elif id(img) in self._retired:
                        closing.append(self._retired.pop(id(img)))
                while len(self._images) > self.max_open:
                    _, img = self._images.popitem(last=False)
                    if id(img) in self._holds:
                        self._retired[id(img)] = img
                    else:
                        closing.append(img)
            for img in closing:
                img.close()

    def close(self) -> None:
        """Close every image this process opened (they reopen on the next read)."""
        with self._lock:
            images, self._images = self._images, OrderedDict()
        for img in images.values():
            img.close()

    def __len__(self) -> int:
        return len(self._images)

    def __getstate__(self) -> dict:
        return {"max_open": self.max_open, "worker_threads": self.worker_threads, "pid": self._pid}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["max_open"], state["worker_threads"])  # reopened where the dataset lands
        self._pid = state["pid"]  # unpickled in a worker: its first get() sets the worker's decode threads
