"""Where a storage offset sits in a tensor's view: the inverse of ``offset = storage_offset + sum(i * stride)``,
for layouts where it is unique (no two view elements share storage, every stride positive). The views
(view/tensormap.py, view/blockview.py) and the trace diff (analysis/diff.py) name elements by view index.
"""
from __future__ import annotations

import numpy as np

from .trace import TensorInfo


def invertible(info: TensorInfo) -> bool:
    """True when no two view elements share a storage element and every stride is positive."""
    dims = sorted((abs(int(st)), int(sz), int(st)) for sz, st in zip(info.shape, info.strides) if sz > 1)
    span = 0
    for a, size, stride in dims:
        if stride <= 0 or a <= span:
            return False
        span += (size - 1) * a
    return True


def view_index(info: TensorInfo, offsets: np.ndarray) -> tuple:
    """Invert an invertible layout: (index array of shape (n, rank), ok mask). ``ok`` is False for
    offsets that are not an element of the view (out of bounds, or padding between strided rows)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    rank = len(info.shape)
    idx = np.zeros((len(offsets), rank), dtype=np.int64)
    rem = offsets - int(info.storage_offset)
    ok = rem >= 0
    order = sorted((d for d in range(rank) if info.shape[d] > 1), key=lambda d: -int(info.strides[d]))
    for d in order:
        st = int(info.strides[d])
        q = np.floor_divide(rem, st)
        idx[:, d] = q
        rem = rem - q * st
        ok &= (q >= 0) & (q < info.shape[d])
    ok &= rem == 0
    return idx, ok
