"""What a rumi file is: sample encodings, the grid, the header blob, the IFD, georeferencing, selections.

Pure arithmetic and byte layouts, no I/O policy; neither numba nor OpenZL is imported here.
"""
