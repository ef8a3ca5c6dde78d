"""The arithmetic hooks behind record/checks/nonfinite.py: every float result the builder makes gets one
vectorised ``isfinite`` check; lanes that turned non-finite from finite operands are handed to the
recorder as births, with the operation and the operands."""
from __future__ import annotations

import numpy as np

from ..frames import where
from .nonfinite import all_finite
from ..batch.described import core
from ...numerics import rounding
from ..gpu.lowp import floats, inner_method, is_bf16

# builder entry points that compute float values, and the name a finding gives each
# create_rsqrt and create_erf are builder methods of their own, not unary_op, and libdevice calls end in
# create_extern_elementwise (record/gpu/libdevice.py): without them a NaN born in rsqrt had no birth and its
# store was taken for a non-finite constant written on purpose
OPS = ("binary_op", "unary_op", "ternary_op", "create_fma", "cast_impl", "create_fp_to_fp",
       "create_rsqrt", "create_erf", "create_extern_elementwise")


def install(scope, builder, rec) -> None:
    for name in OPS:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _checked(inner_method(builder, name), name, rec))


def _op_name(name: str, args) -> str:
    if name == "create_extern_elementwise" and len(args) > 2:
        return str(args[2])                       # the libdevice symbol, e.g. __nv_rsqrtf
    if name in ("create_rsqrt", "create_erf"):
        return name[len("create_"):]
    fn = args[-1] if name in ("binary_op", "unary_op", "ternary_op") and callable(args[-1]) else None
    if fn is not None:
        return getattr(fn, "__name__", name)
    if name in ("cast_impl", "create_fp_to_fp") and len(args) > 1:
        return f"conversion to {getattr(getattr(args[1], 'scalar', args[1]), 'name', args[1])}"
    return "fma" if name == "create_fma" else name


def _values(h):
    f = floats(h)
    return h.data if f is None else f


def _checked(inner, name, rec):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        if getattr(out, "data", None) is None or not rec.recording or rec.nonfinite.lazy:
            return out
        data = out.data
        bf16 = is_bf16(out)             # judged by its values, not by the bit patterns it holds
        if not (bf16 or data.dtype.kind == "f") or not data.size:
            return out
        distinct = core(data)           # a broadcast result: its distinct values only
        if all_finite(rounding.bf16_to_f32(distinct) if bf16 else distinct):
            return out
        data = floats(out)
        active = rec.active_programs()
        if active is not None and data.ndim and data.shape[0] == len(active):
            if np.isfinite(data[active]).all():       # what programs sitting out a trip compute is unused
                return out
        flat = [x for a in args for x in (a if isinstance(a, (list, tuple)) else (a,))]   # extern: a list
        operands = [_values(a) for a in flat if hasattr(a, "data") and hasattr(a, "dtype")]
        born = ~np.isfinite(data)          # and, below, every float operand of the lane finite
        for o in operands:
            o = np.asarray(o)
            if o.dtype.kind == "f":
                try:
                    born = born & np.isfinite(o)
                except ValueError:
                    return out
        if born.any():
            file, line = where()
            rec.nonfinite.birth(_op_name(name, args), file, line, np.asarray(born), operands, data)
        return out
    return run
