"""``rumimm.torchgeo``: :class:`RumiDataset`, a TorchGeo ``GeoDataset`` over a rumi catalog, and
:func:`stack_samples`, its copy-free collate function.

The implementation is :mod:`rumimm.integrations.torchgeo`; this name is the one users
import (``from rumimm.torchgeo import RumiDataset``).  Needs ``pip install rumimm[torchgeo]``.
"""

from rumimm.integrations.torchgeo import RumiDataset, stack_samples

__all__ = ["RumiDataset", "stack_samples"]
