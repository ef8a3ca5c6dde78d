"""The hooks behind record/checks/mathvalues.py: every float result of the builder's arithmetic (the ops
nonfinite_ops.py watches), reduced per program with numpy and handed to the monitor under its source line.

The cost is on every float op of every launch, so the common case is two passes: the minimum and the maximum
of each row (NaN and infinities pass into them), over the result's unbroadcast core (a broadcast block
costs its distinct values, its counts scaled). Only rows whose minimum or maximum is not finite are looked at
lane by lane: their NaN and infinity counts, their finite range and their first non-finite lane. Two numpy
reductions are about what the op itself costs when the op is cheap (a subtraction), so a launch of little
but elementwise math paid up to about 1.25x. Where the machine's C compiler builds native/rowstats.c, one C
pass per result does all of it instead (the same numbers; bfloat16 read as its bits, float16 without a cast),
and numpy's passes are the fallback. ``TRITON_TRACE_MATH_VALUES=0`` turns the hooks off.
"""
from __future__ import annotations

import os

import numpy as np

from ..frames import where
from ..gpu.lowp import floats, inner_method, is_bf16
from ...native import rowstats
from ...model.lanes.encoding import core
from .mathvalues import COUNT, FIRST, KIND, LANE, NAN, NINF, PINF
from .nonfinite_ops import OPS, _op_name


# "0" turns the hooks off for the launches that start while it is set: reading every float result once more
# costs a launch of cheap elementwise math 10-16% (a traced 4096x4096 softmax; numpy's two passes: 12-19%),
# a 1024^3 fp16 matmul 3-5% (benchmarks/speed/bench_math_values.py)
ENV = "TRITON_TRACE_MATH_VALUES"


def install(scope, builder, rec) -> None:
    if os.environ.get(ENV, "").strip() == "0":
        return
    inside = [False]        # one result per op: an op the interpreter computes through another (rsqrt) is one
    for name in OPS:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _watched(inner_method(builder, name), name, rec, inside))


def _watched(inner, name: str, rec, inside: list):
    def run(*args, **kwargs):
        if inside[0]:
            return inner(*args, **kwargs)
        inside[0] = True
        try:
            out = inner(*args, **kwargs)
        finally:
            inside[0] = False
        if not rec.recording or getattr(out, "data", None) is None:
            return out
        fn = rowstats.library()
        fmt = None if fn is None else (rowstats.BF16 if is_bf16(out) else rowstats.FORMATS.get(out.data.dtype))
        data = floats(out) if fmt is None else np.asarray(out.data)   # (numpy's: bfloat16 decoded; None for ints)
        if data is None or not data.size:
            return out
        batched = rec.batched and data.ndim > 0
        stats = row_stats(data, batched) if fmt is None else native_stats(fn, data, batched, fmt)
        file, line = where()
        rec.math_values.note(file, line, _op_name(name, args), data.shape[1:] if batched else data.shape, stats)
        return out
    return run


def row_stats(data: np.ndarray, batched: bool) -> tuple:
    """Per row of ``data`` (its first axis when ``batched``, else one row): int64 columns (COUNT, NAN, PINF,
    NINF, LANE: the first non-finite lane in row-major order of the row's block, -1 for none; KIND: 1 NaN,
    2 +Inf, 3 -Inf; FIRST: -1, the monitor's) and the finite minimum and maximum (+inf / -inf for none)."""
    d = np.asarray(data) if batched else np.asarray(data).reshape((1,) + np.shape(data))
    block = d.shape[1:]
    c = core(d)
    shape = c.shape[1:]
    n = int(np.prod(shape, dtype=np.int64))
    scale = int(np.prod(block, dtype=np.int64)) // max(n, 1)      # lanes per distinct value
    flat = c.reshape(c.shape[0], n)
    if flat.dtype == np.float16:
        flat = flat.astype(np.float32)   # (numpy's half reductions are several times slower; exact)
    rows = flat.shape[0]
    ints = np.zeros((rows, 7), np.int64)
    ints[:, COUNT] = n * scale
    ints[:, LANE] = ints[:, FIRST] = -1
    lo, hi = flat.min(axis=1).astype(np.float64), flat.max(axis=1).astype(np.float64)
    bad = np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi)))
    if not len(bad):
        return ints, _unsigned_zero(lo), _unsigned_zero(hi)
    sub = flat[bad]
    nan, pinf, ninf = np.isnan(sub), sub == np.inf, sub == -np.inf
    finite = ~(nan | pinf | ninf)
    ints[bad, NAN] = nan.sum(axis=1) * scale
    ints[bad, PINF] = pinf.sum(axis=1) * scale
    ints[bad, NINF] = ninf.sum(axis=1) * scale
    lo[bad] = np.where(finite, sub, np.inf).min(axis=1)
    hi[bad] = np.where(finite, sub, -np.inf).max(axis=1)
    at = np.argmax(~finite, axis=1)
    # the first non-finite distinct value's index is also the first such lane of the whole block: a broadcast
    # dimension's index 0 comes first in row-major order
    ints[bad, LANE] = np.ravel_multi_index(np.unravel_index(at, shape), block) if shape else 0
    first = sub[np.arange(len(bad)), at]
    ints[bad, KIND] = np.where(np.isnan(first), 1, np.where(first > 0, 2, 3))
    return ints, _unsigned_zero(lo), _unsigned_zero(hi)


def _unsigned_zero(x: np.ndarray) -> np.ndarray:
    # a range of 0.0 and -0.0 is one zero: numpy's minimum keeps whichever its reduction order met last
    x += 0.0
    return x


def native_stats(fn, data: np.ndarray, batched: bool, fmt: int) -> tuple:
    """``row_stats`` in one C pass (native/rowstats.c): ``data`` float16/32/64, or bfloat16's bits (``fmt``
    rowstats.BF16); the same numbers."""
    d = data if batched else data.reshape((1,) + data.shape)
    ints, lo, hi, bad = rowstats.row_stats(fn, d, fmt)
    if bad:
        block = d.shape[1:]
        shape = tuple(1 if st == 0 else n for n, st in zip(block, d.strides[1:]))
        rows = np.flatnonzero(ints[:, LANE] >= 0)
        if shape != block and len(rows):        # the first lane among distinct values -> among the block's lanes
            at = ints[rows, LANE]
            ints[rows, LANE] = np.ravel_multi_index(np.unravel_index(at, shape), block)
    return ints, lo, hi
