"""Tensor-level patches for batched chunks (every value with a leading program axis, batch/chunk.py): Python control
flow on tensors (one value for every program, else the chunk splits), transposes, and reductions and scans
(one numpy call over the chunk where that sums in the order one program alone uses, else one per program)."""
from __future__ import annotations

import numpy as np

import triton.language as tl

from ...errors import BatchFallback
from ..interp.access import COMBINE_KINDS, TensorHandle, builder as interpreter_builder, combine_kind, np_dtype
from .running import agree, running


def tensor_bool(original, builder):
    def __bool__(self):
        if running(builder) is None:
            return original(self)
        chunk = running(builder)
        v = agree(self.handle.data, chunk.active)
        return bool(v) if np.size(v) == 1 else True
    return __bool__


def tensor_index(original, builder):
    def __index__(self):
        if running(builder) is None:
            return original(self)
        return int(np.asarray(agree(self.handle.data, running(builder).active)).reshape(-1)[0])
    return __index__


def tensor_transpose(original, builder):
    def T(self):
        if running(builder) is None:
            return original.fget(self) if isinstance(original, property) else original(self)
        shape = list(self.type.shape)
        shape[-1], shape[-2] = shape[-2], shape[-1]
        handle = TensorHandle(np.swapaxes(self.handle.data, -1, -2), self.handle.dtype)
        return tl.core.tensor(handle, tl.core.block_type(self.dtype, shape))
    return property(T)


_REDUCED = ("sum", "max", "min", "argmin", "argmax")     # in one numpy call over the chunk (a product: not)


def _reduce_table() -> dict:
    """id(combine function) -> what it computes (checks/padding looks reductions up here)."""
    return COMBINE_KINDS


def _to_tensor(data, dtype, shape):
    data = np.asarray(data).astype(np_dtype(dtype), copy=False)
    if shape:
        return tl.core.tensor(TensorHandle(data, dtype.scalar), tl.core.block_type(dtype, list(shape)))
    return tl.core.tensor(TensorHandle(data.reshape(-1, 1), dtype.scalar), dtype)


def _sitting_out_as_running(data):
    """``data`` with the rows of programs sitting out a masked loop's trip replaced by a running program's:
    their values are never used, and garbage (an all-NaN row) could make a reduction raise or warn."""
    chunk = running(interpreter_builder())
    act = None if chunk is None else chunk.active
    if act is None or np.ndim(data) == 0 or data.shape[0] != len(act) or act.all() or not act.any():
        return data
    keep = act.reshape((-1,) + (1,) * (data.ndim - 1))
    return np.where(keep, data, data[int(np.flatnonzero(act)[0])])


def reduce_apply(op, inputs: tuple):
    """``ReduceOps.apply`` on batched tensors, for the reductions Triton's interpreter vectorises."""
    kind = combine_kind(op.combine_fn)
    if kind not in _REDUCED:
        raise BatchFallback("a reduction with a custom combine function is not batched")
    x = inputs[0]
    data, shape = _sitting_out_as_running(x.handle.data), list(x.type.shape) if x.type.is_block() else []
    b = data.shape[0]
    if op.axis is None:
        flat, axis = data.reshape(b, -1), 1
        out_shape = [1] * len(shape) if op.keep_dims else []
    else:
        axis = op.axis + 1 if op.axis >= 0 else op.axis + len(shape) + 1
        flat = data
        out_shape = list(shape)
        if op.keep_dims:
            out_shape[axis - 1] = 1
        else:
            del out_shape[axis - 1]
    keep = op.keep_dims and op.axis is not None

    def shaped(v):
        if op.keep_dims and op.axis is None:
            v = v.reshape((b,) + (1,) * len(shape))
        return v
    if kind == "sum":
        if np.issubdtype(flat.dtype, np.floating) and not (axis == flat.ndim - 1 and flat.flags.c_contiguous):
            # per program, so the summation order is the one a program alone gets (along the last axis of
            # contiguous data numpy sums each row alike either way: one pairwise sum per row)
            v = np.stack([np.sum(flat[p], axis=axis - 1, keepdims=keep) for p in range(b)])
        else:
            v = np.sum(flat, axis=axis, keepdims=keep)
        return (_to_tensor(shaped(v), x.dtype, out_shape),)
    val_op = np.nanmax if kind in ("max", "argmax") else np.nanmin
    out = [_to_tensor(shaped(val_op(flat, axis=axis, keepdims=keep)), x.dtype, out_shape)]
    if kind in ("argmin", "argmax"):
        idx_op = np.nanargmax if kind == "argmax" else np.nanargmin
        out.append(_to_tensor(shaped(idx_op(flat, axis=axis, keepdims=keep)), tl.int32, out_shape))
    return tuple(out)


def scan_apply(op, inputs: tuple):
    """``ScanOps.apply`` on batched tensors: cumulative sums and products along the shifted axis."""
    kind = combine_kind(op.combine_fn)
    if kind == "sum":
        fn = np.cumsum
    elif kind == "prod":
        fn = np.cumprod
    else:
        raise BatchFallback("a scan with a custom combine function is not batched")
    x = inputs[0]
    shape = list(x.type.shape)
    axis = (op.axis if op.axis >= 0 else op.axis + len(shape)) + 1
    data = _sitting_out_as_running(x.handle.data)
    if op.reverse:
        data = np.flip(data, axis=axis)
    v = np.stack([fn(data[p], axis=axis - 1) for p in range(data.shape[0])]) \
        if np.issubdtype(data.dtype, np.floating) else fn(data, axis=axis)
    if op.reverse:
        v = np.flip(v, axis=axis)
    return (_to_tensor(np.ascontiguousarray(v), x.dtype, shape),)
