"""fp16 and bf16 sums measured against the same sum in float64, where their result reaches memory.

``acc = tl.zeros((BN,), tl.float16)`` then ``acc += a * b`` over K rounds the running sum to 11 bits
(bf16: 8) at every step: once the sum is large, each addend loses its low bits, and over thousands of steps
the stored result drifts far from the true sum. The GPU computes exactly this (``add.f16``), and so does the
trace, so no value looks wrong; the fix is a float32 accumulator cast once at the end.

The hooks keep a float64 shadow beside every fp16/bf16 value an addition produced: the result of the same
additions done in float64, from the same addends (each as the kernel computed it, already rounded: a
product's own rounding is not the sum's). ``x + y`` and ``x - y`` give ``shadow(x) +- shadow(y)`` (a value
no addition produced is its own shadow), ``tl.fma`` ``x * y + shadow(z)``, ``tl.dot`` into an fp16/bf16
accumulator the float64 product plus ``shadow(acc)``; ``tl.where`` and widening casts carry the shadow
(``acc.to(tl.float32)`` stored is still the fp16 sum). Anything else (a product of a sum, a reduction)
starts afresh. So a loop-carried accumulator's shadow is its sum in float64, and nothing else is followed:
kernels without fp16/bf16 additions pay one type test per op. Lost shadows (a divergent loop's merge, a
compacted chunk) only miss a report.

Where a shadowed value of two or more additions is stored (``tl.store``; a lone ``x + y`` is one rounding),
each active lane's error is counted in ulps of the accumulator's type at the float64 value (a single
rounding is at most 0.5), into a histogram by powers of two, with the largest ulps and absolute error and
the program and values of the worst: the threshold is the analysis' choice (analysis/advice/precision.py).
One entry per (store line, tensor, the line of the last addition, type) goes to
``Launch.meta["lowp_accumulation"]``; an undone chunk's counts are rolled back.
"""
from __future__ import annotations

import copy

import numpy as np

from ..batch import described
from ..frames import where
from ..gpu.lowp import floats, inner_method
from ..patching import carried
from .monitor import ProgramRows
from .outermost import hook_outermost

TAG = "_tt_lowp_sum"            # the _Sum a value carries
BUCKETS = 32                    # histogram: [0] ulps <= 1, [b] ulps in (2^(b-1), 2^b], the last one open
# (significand bits after the leading one, smallest normal exponent) of the types followed
_TYPES = {"fp16": (10, -14), "bf16": (7, -126)}
_WIDER = ("fp32", "fp64")
MAX_ENTRIES = 1 << 14           # entries kept (table.py's MAX_LINES: the record's own bound)


class _Sum:
    """What an fp16/bf16 sum carries: its float64 shadow, the additions in its chain, the line of the last
    one, the type it was summed in. A first addition keeps its operands and makes the shadow only when a
    second one (or a store) asks: a lone ``x + y`` is one rounding, and most never need it."""
    __slots__ = ("_exact", "_pending", "adds", "file", "line", "type")

    def __init__(self, exact, adds: int, file, line: int, type_name: str, pending=None):
        self._exact, self._pending, self.adds, self.file, self.line, self.type = \
            exact, pending, adds, file, line, type_name

    @property
    def exact(self) -> np.ndarray:
        if self._exact is None:
            op, a, b = self._pending
            with np.errstate(all="ignore"):
                self._exact = op(_shadow(a), _shadow(b))
            self._pending = None
        return self._exact

    def widened(self) -> "_Sum":
        return _Sum(self.exact, self.adds, self.file, self.line, self.type)


def _name(dtype) -> str:
    return getattr(getattr(dtype, "scalar", dtype), "name", "")


def _shadow(h) -> np.ndarray:
    """A value's float64 shadow: its tag's, or its own value."""
    tag = carried(h, TAG)
    if tag is not None:
        return tag.exact
    v = floats(h)
    return np.asarray(h.data if v is None else v, dtype=np.float64)


def _chain(*handles) -> int:
    """The longest chain of additions behind any of ``handles``."""
    return max(getattr(carried(h, TAG), "adds", 0) for h in handles)


def ulps(value: np.ndarray, exact: np.ndarray, type_name: str) -> np.ndarray:
    """|value - exact| in units in the last place of ``type_name`` at ``exact`` (subnormal spacing below the
    smallest normal)."""
    bits, emin = _TYPES[type_name]
    _, e = np.frexp(exact)
    exp = np.where(exact == 0, emin, np.maximum(e.astype(np.int64) - 1, emin))
    return np.abs(value - exact) / np.ldexp(1.0, exp - bits)


class LowpSums(ProgramRows):
    lists = ()

    def __init__(self, tensors=(), outputs=()):
        super().__init__(tensors, outputs)
        self.entries: dict = {}       # key -> entry (records() lists them)

    def mark(self):
        return copy.deepcopy(self.entries)

    def rollback(self, mark) -> None:
        self.entries = mark

    def fork_point(self):
        return copy.deepcopy(self.entries)

    def since(self, point) -> list:
        return [(key, point.get(key), e) for key, e in self.entries.items() if e != point.get(key)]

    def mergeable(self, added):
        return None

    def merge(self, added) -> None:
        # counts add what the worker counted after it forked; maxima merge; the worst lane is the worker's only
        # where strictly worse (the first worst in program order, as stored() keeps it). A key new here is
        # left out once the table is full: the worker's table, full, had no room for it either.
        for key, before, e in added:
            mine = self.entries.get(key)
            if mine is None:
                if len(self.entries) >= MAX_ENTRIES:
                    continue
                mine = self.entries[key] = {**e, "adds": 0, "checked": 0, "hist": [0] * BUCKETS, "max_ulps": 0.0,
                                            "max_abs": 0.0}
            base = before or {"checked": 0, "hist": [0] * BUCKETS}
            mine["adds"] = max(mine["adds"], e["adds"])
            mine["checked"] += e["checked"] - base["checked"]
            mine["hist"] = [a + b - c for a, b, c in zip(mine["hist"], e["hist"], base["hist"])]
            mine["max_abs"] = max(mine["max_abs"], e["max_abs"])
            if e["max_ulps"] > mine["max_ulps"]:
                mine.update(max_ulps=e["max_ulps"], value=e["value"], exact=e["exact"], program=list(e["program"]))

    def running(self, rows: int):
        """Bool over ``rows`` rows of a batched block: the programs kept (the program filter) and running
        the op (a masked loop's trip)."""
        keep = np.ones(rows, bool)
        for sel in (self._keep, self._active):
            if sel is not None and len(sel) == rows:
                keep &= sel
        return keep

    def stored(self, key: tuple, type_name: str, adds: int, value, exact, lanes) -> None:
        """The lanes ``lanes`` (bool, the value's shape; the program axis first when batched) of a stored sum
        ``value`` whose float64 shadow is ``exact``."""
        with np.errstate(all="ignore"):
            ok = lanes & np.isfinite(value) & np.isfinite(exact)
            if not ok.any():
                return
            u = ulps(value, exact, type_name)
        bucket = np.where(u <= 1, 0, np.minimum(np.ceil(np.log2(np.maximum(u, 1))), BUCKETS - 1)).astype(np.int64)
        hist = np.bincount(bucket[ok], minlength=BUCKETS)
        e = self.entries.get(key)
        if e is None:
            if len(self.entries) >= MAX_ENTRIES:
                return
            e = self.entries[key] = {"type": type_name, "adds": 0, "checked": 0, "hist": [0] * BUCKETS,
                                     "max_ulps": 0.0, "max_abs": 0.0, "program": [0, 0, 0], "value": 0.0,
                                     "exact": 0.0}
        e["adds"] = max(e["adds"], int(adds))
        e["checked"] += int(ok.sum())
        e["hist"] = [a + int(b) for a, b in zip(e["hist"], hist)]
        e["max_abs"] = max(e["max_abs"], float(np.abs(value - exact)[ok].max()))
        worst = np.unravel_index(int(np.argmax(np.where(ok, u, -1.0))), u.shape)
        if float(u[worst]) > e["max_ulps"]:
            row = worst[0] if self.batched and u.ndim else 0
            e.update(max_ulps=float(u[worst]), value=float(value[worst]), exact=float(exact[worst]),
                     program=[int(v) for v in self._pids[min(row, len(self._pids) - 1)]])

    def records(self) -> dict:
        order = sorted(self.entries.items(), key=lambda kv: (str(kv[0][0]), kv[0][1], kv[0][2], str(kv[0][3]),
                                                              kv[0][4], kv[0][5]))
        return {"lowp_accumulation": [
            {"file": k[0], "line": k[1], "tensor": self.tensor_name(k[2]), "add_file": k[3], "add_line": k[4], **e}
            for k, e in order]}


def install(scope, builder, rec) -> None:
    hooks = {"binary_op": _binary, "ternary_op": _ternary, "create_fma": _fma, "create_dot": _dot,
             "cast_impl": _cast, "create_fp_to_fp": _cast}
    for name, hook in hooks.items():
        if hasattr(builder, name):
            scope.set_attr(builder, name, hook(inner_method(builder, name), rec))
    hook_outermost(scope, builder, ("create_store", "create_masked_store"),
                   lambda name, args, kwargs: _store(rec, name, args))


def _tag(out, exact, adds: int, pending=None) -> None:
    file, line = where()
    setattr(out, TAG, _Sum(exact, adds, file, int(line or 0), _name(out.dtype), pending))


def _binary(inner, rec):
    def binary_op(lhs, rhs, op, *args, **kwargs):
        out = inner(lhs, rhs, op, *args, **kwargs)
        if (op is np.add or op is np.subtract) and _name(getattr(out, "dtype", None)) in _TYPES and rec.recording:
            adds = _chain(lhs, rhs) + 1
            if adds == 1:
                _tag(out, None, 1, (op, lhs, rhs))
            else:
                with np.errstate(all="ignore"):
                    _tag(out, op(_shadow(lhs), _shadow(rhs)), adds)
        return out
    return binary_op


def _fma(inner, rec):
    def create_fma(x, y, z, *args, **kwargs):
        out = inner(x, y, z, *args, **kwargs)
        if _name(getattr(out, "dtype", None)) in _TYPES and rec.recording:
            with np.errstate(all="ignore"):
                _tag(out, _shadow(x) * _shadow(y) + _shadow(z), _chain(z) + 1)
        return out
    return create_fma


def _dot(inner, rec):
    def create_dot(a, b, d, *args, **kwargs):
        out = inner(a, b, d, *args, **kwargs)
        if _name(getattr(d, "dtype", None)) in _TYPES and _name(getattr(out, "dtype", None)) in _TYPES \
                and rec.recording:
            with np.errstate(all="ignore"):
                _tag(out, np.matmul(_shadow(a), _shadow(b)) + _shadow(d), _chain(d) + 1)
        return out
    return create_dot


def _ternary(inner, rec):
    def ternary_op(cond, x, y, op, *args, **kwargs):
        out = inner(cond, x, y, op, *args, **kwargs)
        tag = carried(x, TAG) or carried(y, TAG)
        if op is np.where and tag is not None and _name(getattr(out, "dtype", None)) == tag.type:
            setattr(out, TAG, _Sum(np.where(np.asarray(cond.data, bool), _shadow(x), _shadow(y)), _chain(x, y),
                                   tag.file, tag.line, tag.type))
        return out
    return ternary_op


def _cast(inner, rec):
    def cast(src, dst_type, *args, **kwargs):
        out = inner(src, dst_type, *args, **kwargs)
        tag = carried(src, TAG)
        if tag is not None and _name(dst_type) in _WIDER:      # exact: the stored value is still the sum's
            setattr(out, TAG, tag.widened())
        return out
    return cast


def _store(rec, name: str, args) -> None:
    tag = carried(args[1], TAG) if len(args) > 1 else None
    if tag is not None and tag.adds > 1 and rec.recording:      # (one addition: one rounding)
        _judge(rec, args[0], args[1], args[2] if name == "create_masked_store" and len(args) > 2 else None, tag)


def _judge(rec, ptr, value, mask, tag: _Sum) -> None:
    exact = tag.exact
    v = floats(value)
    shape = described.shape_of(ptr)
    try:
        full = np.broadcast_shapes(shape, np.shape(v), np.shape(exact))
        v, exact = np.broadcast_to(np.asarray(v, np.float64), full), np.broadcast_to(exact, full)
        lanes = np.ones(full, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), full)
    except ValueError:
        return
    m = rec.lowp_sums
    if m.batched and len(full):
        lanes = lanes & m.running(full[0]).reshape((-1,) + (1,) * (len(full) - 1))
    sfile, sline = where()
    tensor = rec.origin if rec.origin is not None else -1
    m.stored((sfile, int(sline or 0), tensor, tag.file, tag.line, tag.type), tag.type, tag.adds, v, exact, lanes)

