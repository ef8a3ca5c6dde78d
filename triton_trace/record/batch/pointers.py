"""Pointer arithmetic in a batched chunk, and what memory ops tell the recorder about their pointers.

``p + offs`` in the interpreter widens both operands to the full block before adding (three passes over
every lane of every program). Most operands are broadcasts: a scalar pointer splat to the block, a row of
offsets broadcast down a tile, a loop's step ``BLOCK_K * stride`` splat to the tile. Here the arithmetic
runs on each operand's own (unbroadcast) core and only the sum is widened, which gives the same bits.

The result is described (batch/described.py) when the pointer and the offsets are: a loop's
``a_ptrs += BLOCK_K * stride`` keeps the description of ``a_ptrs``. A memory op hands its pointers'
description to the recorder; pointers without one are probed there (record/batch/affine.py), and a block found
affine keeps that description for the ops that follow (the next trips of a loop).
"""
from __future__ import annotations

import numpy as np

from ..interp.access import TensorHandle
from .described import core, describe, known
from . import described
from ..gpu.lowp import inner_method

MEMORY = ("create_load", "create_store", "create_masked_load", "create_masked_store", "create_atomic_rmw",
          "create_atomic_cas")


def addptr(handle_cls, ptr, offset):
    """The interpreter's ``create_addptr`` (``ptr + bytes * offset.astype(uint64)``), bit for bit: a lazy
    block when the result is described (its lanes computed from the description if anything reads them),
    else computed on the operands' cores."""
    element_bytewidth = max(1, ptr.get_element_ty().primitive_bitwidth // 8)
    shape = np.broadcast_shapes(described.shape_of(ptr), described.shape_of(offset))
    k = described.addptr(ptr, offset, element_bytewidth, shape)
    if k is not None and len(shape) > 1:
        out = described.LazyPointers(ptr.dtype, shape, *k)
        if described._CHECK:
            describe(handle_cls(out.data, ptr.dtype), *k)     # compares the lanes with the description
        return out
    p, o = np.asarray(ptr.data), np.asarray(offset.data)
    data = core(p) + element_bytewidth * core(o).astype(np.uint64)
    if data.shape != shape:
        data = np.ascontiguousarray(np.broadcast_to(data, shape))
    out = handle_cls(data, ptr.dtype)
    if k is not None:
        describe(out, *k)
    return out


def install(scope, builder, rec) -> None:
    """Memory ops hand their pointers' description to the recorder, and keep the one it finds."""
    for name in MEMORY:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _memory(inner_method(builder, name), rec))


def _memory(inner, rec):
    def run(*args, **kwargs):
        ptrs = next((a for a in args if isinstance(a, TensorHandle) and described.is_pointer(a)), None)
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
            rows = described.shape_of(ptrs)[:1]
            if rows and rows[0] in (1, len(first)):
                describe(ptrs, first[:rows[0]].copy(), strides)
        return out
    return run
