"""The arithmetic hooks behind record/nonfinite.py: every float result the builder makes gets one
vectorised ``isfinite`` check; lanes that turned non-finite from finite operands are handed to the
recorder as births, with the operation and the operands."""
from __future__ import annotations

import numpy as np

from ..frames import where
from ..nonfinite import all_finite
from .described import core
from .lowp import inner_method

# builder entry points that compute float values, and the name a finding gives each
OPS = ("binary_op", "unary_op", "ternary_op", "create_fma", "cast_impl", "create_fp_to_fp")


def install(scope, builder, rec) -> None:
    for name in OPS:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _checked(inner_method(builder, name), name, rec))


def _op_name(name: str, args) -> str:
    fn = args[-1] if name in ("binary_op", "unary_op", "ternary_op") and callable(args[-1]) else None
    if fn is not None:
        return getattr(fn, "__name__", name)
    if name in ("cast_impl", "create_fp_to_fp") and len(args) > 1:
        return f"conversion to {getattr(getattr(args[1], 'scalar', args[1]), 'name', args[1])}"
    return "fma" if name == "create_fma" else name


def _checked(inner, name, rec):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        data = getattr(out, "data", None)
        if data is None or not rec.recording or rec.nonfinite.lazy or data.dtype.kind != "f" or not data.size:
            return out
        if all_finite(core(data)):          # a broadcast result: its distinct values only
            return out
        active = rec.active_programs()
        if active is not None and data.ndim and data.shape[0] == len(active):
            if np.isfinite(data[active]).all():       # what programs sitting out a trip compute is unused
                return out
        operands = [a.data for a in args if hasattr(a, "data") and hasattr(a, "dtype")]
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
