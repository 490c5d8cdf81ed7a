"""The files (open images) a dataset keeps in one process: least recently used first, reopened after a fork.

Training datasets (``ChipDataset``, ``rumimm.torchgeo.RumiDataset``) open each file once per
process, with its blob, and keep it open for the next chip.  A DataLoader worker must not use
its parent's descriptors, so a pool seen from a new process starts empty (and sets that
process's decode threads); a pickled pool carries no image.
"""

from __future__ import annotations

import os
from collections import OrderedDict

from rumimm.reader.threads import set_num_threads

__all__ = ["OpenFiles"]


class OpenFiles:
    """Open images by key, at most ``max_open`` after :meth:`trim`; ``worker_threads`` decode threads in a worker."""

    def __init__(self, max_open: int, worker_threads: int):
        self.max_open = max_open
        self.worker_threads = worker_threads
        self._pid = os.getpid()
        self._images: OrderedDict = OrderedDict()

    def get(self, key, open_image):
        """The image under ``key``, opened by ``open_image()`` the first time this process asks."""
        if self._pid != os.getpid():  # a worker: the parent's handles are not ours to use
            self._images = OrderedDict()
            self._pid = os.getpid()
            set_num_threads(self.worker_threads)
        img = self._images.get(key)
        if img is None:
            img = self._images[key] = open_image()
        else:
            self._images.move_to_end(key)
        return img

    def trim(self) -> None:
        """Close the least recently used images beyond ``max_open``."""
        while len(self._images) > self.max_open:
            _, img = self._images.popitem(last=False)
            img.close()

    def close(self) -> None:
        """Close every image this process opened (they reopen on the next read)."""
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
