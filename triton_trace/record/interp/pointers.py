"""Pointer arithmetic in a batched chunk, and what it tells the recorder about each pointer block.

``p + offs`` in the interpreter widens both operands to the full block before adding (three passes over
every lane of every program). Most operands are broadcasts: a scalar pointer splat to the block, a row of
offsets broadcast down a tile, a loop's step ``BLOCK_K * stride`` splat to the tile. Here the arithmetic
runs on each operand's own (unbroadcast) core and only the sum is widened, which gives the same bits.

A pointer block whose lanes are every program's first address plus one pattern of strides (record/affine.py
finds that when the block is first loaded or stored) keeps that description, and ``p + step`` with a step
that is the same over a program's block passes it on to the result. A loop's ``a_ptrs += BLOCK_K * stride``
then reaches its loads already described: the recorder skips rebuilding and comparing every lane.
The description is tied to the handle's data array (not just to the handle), so it never outlives it.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .lowp import inner_method

TAG = "_tt_affine"        # (the data array described, first address per row (int64), byte strides)
MEMORY = ("create_load", "create_store", "create_masked_load", "create_masked_store", "create_atomic_rmw",
          "create_atomic_cas")


def known(handle) -> Optional[tuple]:
    """(first address of each row of the handle's data as int64, byte strides), or None."""
    tag = getattr(handle, TAG, None)
    if tag is None or tag[0] is not getattr(handle, "data", None):
        return None
    return tag[1], tag[2]


def describe(handle, first: np.ndarray, strides: tuple) -> None:
    setattr(handle, TAG, (handle.data, first, tuple(strides)))


def core(d: np.ndarray) -> np.ndarray:
    """``d`` without the dimensions it only broadcasts along (stride 0): those become size 1."""
    if not d.ndim or all(st or n == 1 for st, n in zip(d.strides, d.shape)):
        return d
    return d[tuple(slice(0, 1) if st == 0 and n > 1 else slice(None) for st, n in zip(d.strides, d.shape))]


def addptr(handle_cls, ptr, offset):
    """The interpreter's ``create_addptr`` (``ptr + bytes * offset.astype(uint64)``), bit for bit, computed on
    the operands' cores; the result keeps ``ptr``'s affine description when the offset is the same over
    each program's block."""
    element_bytewidth = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
    p, o = np.asarray(ptr.data), np.asarray(offset.data)
    shape = np.broadcast_shapes(p.shape, o.shape)
    oc = core(o)
    data = core(p) + element_bytewidth * oc.astype(np.uint64)
    if data.shape != shape:
        data = np.ascontiguousarray(np.broadcast_to(data, shape))
    out = handle_cls(data, ptr.dtype)
    k = known(ptr)
    if k is not None and shape[1:] == p.shape[1:] and oc.ndim >= 1 and oc[0].size == 1:
        first, strides = k
        step = (element_bytewidth * oc.reshape(len(oc)).astype(np.uint64)).view(np.int64)
        describe(out, np.broadcast_to(first, (shape[0],)) + step, strides)
    return out


def install(scope, builder, rec) -> None:
    """Memory ops hand their pointers' description to the recorder, and keep the one it finds."""
    for name in MEMORY:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _memory(inner_method(builder, name), rec))


def _memory(inner, rec):
    def run(*args, **kwargs):
        ptrs = next((a for a in args if hasattr(a, "data") and _is_pointer(a)), None)
        memory = rec.memory
        memory.known_affine = k = known(ptrs) if ptrs is not None else None
        memory.found_affine = None
        try:
            out = inner(*args, **kwargs)
        finally:
            memory.known_affine = None
        found = memory.found_affine
        if found is not None and ptrs is not None and k is None:
            first, strides = found
            rows = np.shape(ptrs.data)[:1]
            if rows and rows[0] in (1, len(first)):
                describe(ptrs, first[:rows[0]].copy(), strides)
        return out
    return run


def _is_pointer(handle) -> bool:
    is_ptr = getattr(getattr(handle, "dtype", None), "is_ptr", None)
    return bool(is_ptr and is_ptr())
