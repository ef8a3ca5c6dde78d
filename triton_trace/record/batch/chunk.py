"""Batched execution: a chunk of programs runs in one numpy pass.

While a chunk runs, the interpreter's builder instance takes a subclass of its own class
(``InterpreterBuilder``) in which every ``TensorHandle.data`` carries one extra LEADING program axis: size
P (the chunk's programs) for values that differ between programs, size 1 for values that are the same in
every program, so uniform work is done once. Triton's semantic layer already splats and broadcasts
operands to equal block shapes before calling the builder, so elementwise builder methods work unchanged
through numpy broadcasting; the methods that know about shapes (splat, broadcast, reshape, trans, cat,
gather, reductions...) shift their axes by one here, and memory ops widen their operands to all P programs
so every program gets its own record.

What cannot be batched raises ``BatchFallback``, and the executor re-runs the chunk program by program:
a per-program scalar turned into a Python bool or int whose values differ across the chunk (``if pid == 0``,
loop bounds from the program id, spin locks), ops listed in ``_UNBATCHABLE`` or unknown to this module,
and printing (its output order would change).
"""
from __future__ import annotations

import numpy as np

import triton.language as tl

from ...errors import BatchFallback
from ..interp.access import TensorHandle, np_dtype
from ..memory import provenance
from . import dot as batchdot, memops as batchmemory, described, pointers
# the running chunk's state lives in running.py; the executor and interp/compute read it through this module
from .running import Chunk, program_shape, program_size, running, stop, switch, widen  # noqa: F401


def start(builder, pids: np.ndarray) -> Chunk:
    """Run ``builder`` batched over the programs ``pids`` ((P, 3) ints, in execution order)."""
    chunk = Chunk(pids, type(builder))
    builder.__class__ = batched_class(chunk.base)
    switch(builder, chunk)
    return chunk


# --------------------------------------------------------------------------------------------------------
# helpers on batched handles
# --------------------------------------------------------------------------------------------------------
def _b(h) -> int:
    return h.data.shape[0]


def _uniform(h) -> TensorHandle:
    return TensorHandle(h.data[None], h.dtype)


def _slice(h, p: int) -> TensorHandle:
    return TensorHandle(h.data[p if h.data.shape[0] > 1 else 0], h.dtype)


def _stack(outs: list) -> TensorHandle:
    return TensorHandle(np.stack([o.data for o in outs]), outs[0].dtype)


def _handles(args) -> list:
    out = []
    for a in args:
        if isinstance(a, TensorHandle):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            out += _handles(a)
    return out


# --------------------------------------------------------------------------------------------------------
# the builder subclass
# --------------------------------------------------------------------------------------------------------
_UNIFORM = ("get_int1", "get_uint8", "get_int8", "get_uint16", "get_int16", "get_uint32", "get_int32",
            "get_uint64", "get_int64", "get_fp16", "get_bf16", "get_fp32", "get_fp64", "get_null_value",
            "get_all_ones_value", "create_get_num_programs", "create_make_range")
# elementwise or shape-agnostic: inherited unchanged (numpy broadcasting handles the program axis)
_ELEMENTWISE = {"binary_op", "unary_op", "ternary_op", "cast_impl", "create_fp_to_fp", "create_bitcast",
                "create_int_to_ptr", "create_ptr_to_int", "create_idiv", "create_ashr", "create_umulhi",
                "create_clampf", "create_fma", "create_fabs", "create_erf", "create_rsqrt", "create_addptr",
                "create_split", "create_assert", "create_assume", "create_barrier", "create_load",
                "create_store", "create_atomic_load", "create_atomic_store", "create_extern_elementwise",
                "create_inline_asm"}
_PER_PROGRAM = {"create_histogram", "create_dot_scaled"}     # pure: run per program and stacked


def _per_program(base_method, name):
    def run(self, *args):
        hs = _handles(args)
        if all(_b(h) == 1 for h in hs):
            n = 1
        else:
            n = max(_b(h) for h in hs)

        def pick(a, p):
            if isinstance(a, TensorHandle):
                return _slice(a, p)
            if isinstance(a, (list, tuple)):
                return type(a)(pick(x, p) for x in a)
            return a
        outs = [base_method(self, *[pick(a, p) for a in args]) for p in range(n)]
        return _stack(outs)
    run.__name__ = name
    return run


def _refuse(name):
    def run(self, *args, **kwargs):
        raise BatchFallback(f"{name} is not batched")
    run.__name__ = name
    return run


def _wrap_uniform(base_method, name):
    def run(self, *args, **kwargs):
        return _uniform(base_method(self, *args, **kwargs))
    run.__name__ = name
    return run


class _Overrides(batchmemory.MemoryOps):
    """Shape-aware builder methods; ``self`` is the interpreter's builder instance."""

    def create_get_program_id(self, axis):
        return TensorHandle(self._tt_chunk.pid_data[axis], tl.int32)

    def create_make_range(self, ret_ty, start, stop):
        out = _uniform(self._tt_chunk.base.create_make_range(self, ret_ty, start, stop))
        described.make_range(out, start)
        return out

    def create_splat(self, ret_ty, arg):
        d = arg.data
        b = d.shape[0]
        first = d.reshape(b, -1)[:, :1]
        shape = tuple(ret_ty.shape)
        first = first.astype(np_dtype(arg.dtype), copy=False)
        out = TensorHandle(np.broadcast_to(first.reshape((b,) + (1,) * len(shape)),
                                           (b,) + shape), arg.dtype.scalar)
        described.splat(out, arg)
        return out

    def create_unsplat(self, arg):
        d = arg.data
        return TensorHandle(d.reshape(d.shape[0], -1)[:, :1].copy(), arg.dtype.scalar)

    def create_broadcast(self, arg, shape):
        out = TensorHandle(np.broadcast_to(arg.data, (_b(arg),) + tuple(shape)), arg.dtype.scalar)
        described.broadcast(out, arg)
        return out

    def create_expand_dims(self, arg, axis):
        out = TensorHandle(np.expand_dims(arg.data, axis + 1 if axis >= 0 else axis), arg.dtype.scalar)
        described.expand_dims(out, arg, axis)
        return out

    def create_reshape(self, arg, shape, allow_reorder):
        return TensorHandle(arg.data.reshape((_b(arg),) + tuple(shape)), arg.dtype.scalar)

    def create_trans(self, arg, perm):
        out = TensorHandle(np.transpose(arg.data, (0,) + tuple(p + 1 for p in perm)), arg.dtype.scalar)
        described.trans(out, arg, perm)
        return out

    def create_cat(self, lhs, rhs):
        b = max(_b(lhs), _b(rhs))
        parts = [np.broadcast_to(h.data, (b,) + h.data.shape[1:]) for h in (lhs, rhs)]
        return TensorHandle(np.concatenate(parts, axis=1), lhs.dtype.scalar)

    def create_join(self, lhs, rhs):
        a, c = np.broadcast_arrays(lhs.data, rhs.data)
        return TensorHandle(np.stack([a, c], axis=-1), lhs.dtype.scalar)

    def create_gather(self, src, indices, axis):
        b = max(_b(src), _b(indices))
        s = np.broadcast_to(src.data, (b,) + src.data.shape[1:])
        i = np.broadcast_to(indices.data, (b,) + indices.data.shape[1:])
        return TensorHandle(np.take_along_axis(s, i, axis=axis + 1), src.dtype.scalar)

    def binary_op(self, lhs, rhs, op):
        # elementwise, so computed on the operands' unbroadcast cores (same bits); the result is a broadcast
        # view, as the semantic layer's own broadcasts are
        ld, rd = np.asarray(lhs.data), np.asarray(rhs.data)
        lc, rc = described.core(ld), described.core(rd)
        base = self._tt_chunk.base.binary_op
        same = described.identity_side(lc, rc, op)
        if same is not None:        # a mask and'ed with an all-true one (a full tile's bounds): itself
            return TensorHandle(np.broadcast_to(same, np.broadcast_shapes(ld.shape, rd.shape)), lhs.dtype.scalar)
        if lc is ld and rc is rd:
            out = base(self, lhs, rhs, op)
        else:
            out = base(self, TensorHandle(lc, lhs.dtype), TensorHandle(rc, rhs.dtype), op)
            shape = np.broadcast_shapes(ld.shape, rd.shape)
            if out.data.shape != shape:
                out = TensorHandle(np.broadcast_to(out.data, shape), out.dtype)
        described.binary(out, lhs, rhs, op)
        return out

    def create_addptr(self, ptr, offset):
        return pointers.addptr(TensorHandle, ptr, offset)

    def create_dot(self, a, b, d, *args):
        chunk = self._tt_chunk
        return batchdot.chunk_dot(self, chunk.base.create_dot, a, b, d, args, chunk.active, chunk.scratch)


_CLASSES: dict = {}


def batched_class(base: type) -> type:
    """The batched subclass of the interpreter's builder class (built once per class)."""
    cls = _CLASSES.get(base)
    if cls is not None:
        return cls
    ns = {name: fn for klass in reversed(_Overrides.__mro__[:-1]) for name, fn in vars(klass).items()
          if callable(fn)}
    for name in dir(base):
        if name in ns or not name.startswith(("create_", "get_")):
            continue
        member = getattr(base, name)
        if not callable(member) or name.endswith("_ty") or name in ("get_cache_policy",):
            continue
        if name in _UNIFORM:
            ns[name] = _wrap_uniform(member, name)
        elif name in _PER_PROGRAM:
            ns[name] = _per_program(member, name)
        elif name in _ELEMENTWISE or getattr(member, "__name__", "") == "<lambda>":
            continue        # binary/unary ops and casts, written as lambdas over binary_op / cast_impl
        else:
            ns[name] = _refuse(name)
    cls = _CLASSES[base] = type(f"Batched{base.__name__}", (base,), ns)
    return cls


def batch_args(call_args: dict) -> dict:
    """Kernel arguments with the program axis added (they are the same in every program)."""
    def conv(v):
        if isinstance(v, tl.core.tensor) and isinstance(v.handle, TensorHandle):
            h = _uniform(v.handle)
            provenance.tag(h, provenance.origin(v.handle))
            return tl.core.tensor(h, v.type)
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(conv(x) for x in v)
        if isinstance(v, tl.core.tensor_descriptor_base) or hasattr(v, "handle"):
            raise BatchFallback("tensor descriptor arguments are not batched")
        return v
    return {k: conv(v) for k, v in call_args.items()}
