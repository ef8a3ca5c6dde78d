"""The memory ops of a batched chunk (batch/chunk.py): every program gets its own lanes, so uniform operands are
widened to the whole chunk; a described (lazy) pointer block goes to the memory seam as its description, and
its mask and ``other`` as the broadcast views they are."""
from __future__ import annotations

import numpy as np

import triton.language as tl

from ...errors import BatchFallback
from ..interp.access import TensorHandle, memory, np_dtype
from . import described


def _full(h, n: int) -> TensorHandle:
    """``h`` widened to ``n`` programs, contiguous (the C++ memory functions want plain arrays)."""
    d = h.data
    if d.shape[0] != n:
        d = np.broadcast_to(d, (n,) + d.shape[1:])
    return TensorHandle(np.ascontiguousarray(d), h.dtype)


def _wide(h, n: int) -> TensorHandle:
    """``h`` widened to ``n`` programs, as a broadcast view where it is one."""
    d = h.data
    return h if d.shape[0] == n else TensorHandle(np.broadcast_to(d, (n,) + d.shape[1:]), h.dtype)


def _lazy_wide(ptrs, n: int):
    """A lazy pointer block widened to ``n`` programs, still lazy."""
    if ptrs.shape[0] == n:
        return ptrs
    return described.LazyPointers(ptrs.dtype, (n,) + ptrs.shape[1:], ptrs._first, ptrs._strides)


class MemoryOps:
    """The builder's memory methods on batched handles (mixed into batch/chunk.py's overrides)."""

    def create_load(self, ptr, *args):
        # the interpreter's, without reading a lazy block's lanes for the shape of its all-true mask
        mask = TensorHandle(np.ones(described.shape_of(ptr), dtype=bool), tl.int1)
        return self.create_masked_load(ptr, mask, None, *args)

    def create_masked_load(self, ptrs, mask, other, *args):
        chunk = self._tt_chunk
        n = chunk.size
        if described.lazy(ptrs) and ptrs.shape[0] in (1, n):
            # the interpreter's create_masked_load, handing the memory seam the description, not the lanes
            dtype_tt = ptrs.get_element_ty()
            dtype_np = np_dtype(dtype_tt)
            ptrs = _lazy_wide(ptrs, n)
            # (``other`` and the mask as broadcast views: the memory seam reads them as they are)
            other = np.broadcast_to(np.zeros((), dtype_np), ptrs.shape) if other is None else _wide(other, n).data
            mask = chunk.masked(_wide(mask, n)).data
            return TensorHandle(memory().load(ptrs.addresses(), mask, other, dtype_np), dtype_tt)
        other = None if other is None else _full(other, n)
        return chunk.base.create_masked_load(self, _full(ptrs, n), chunk.masked(_full(mask, n)), other, *args)

    def create_store(self, ptr, val, *args):
        # as create_load: the all-true mask's shape without the lanes
        mask = TensorHandle(np.ones(described.shape_of(ptr), dtype=bool), tl.int1)
        return self.create_masked_store(ptr, val, mask, *args)

    def create_masked_store(self, ptrs, value, mask, *args):
        chunk = self._tt_chunk
        n = chunk.size
        if described.lazy(ptrs) and ptrs.shape[0] in (1, n):
            # the interpreter's create_masked_store, handing the memory seam the description, not the lanes
            ptrs = _lazy_wide(ptrs, n)
            return memory().store(ptrs.addresses(), _full(value, n).data, chunk.masked(_full(mask, n)).data)
        return chunk.base.create_masked_store(self, _full(ptrs, n), _full(value, n), chunk.masked(_full(mask, n)),
                                              *args)

    def create_atomic_rmw(self, op, ptr, val, mask, *args):
        chunk = self._tt_chunk
        n = chunk.size
        return chunk.base.create_atomic_rmw(self, op, _full(ptr, n), _full(val, n), chunk.masked(_full(mask, n)),
                                            *args)

    def create_atomic_cas(self, ptr, cmp, val, *args):
        chunk = self._tt_chunk
        n = chunk.size
        if chunk.active is not None:
            raise BatchFallback("a compare-and-swap in a loop whose trip count differs between programs")
        return chunk.base.create_atomic_cas(self, _full(ptr, n), _full(cmp, n), _full(val, n), *args)
