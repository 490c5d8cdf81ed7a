"""Reading: files, the frame planner and its executors, the decoded-frame cache, ``Image`` and ``Cube``.

Builds on ``format`` (what the bytes mean), ``codec`` (OpenZL frames) and ``kernels`` (numba).
"""
