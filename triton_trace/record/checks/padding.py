"""A reduction over padded lanes: a masked load's ``other=`` value that flows through arithmetic into
``tl.sum`` / ``tl.max`` / ``tl.min`` where it no longer is the reduction's neutral value.

``x = tl.load(p, mask=m, other=0.0)`` pads the masked-off lanes with 0, which a sum ignores; but
``tl.sum((x - mean) * (x - mean))`` adds ``mean^2`` for every padded lane, and a variance comes out too
large. The hooks mark the padded lanes of a masked load with an explicit ``other`` (the lanes its mask
leaves out), carry the mark through elementwise arithmetic (the builder's binary, unary and ternary ops,
the math ops that are builder methods of their own: ``tl.abs``, ``erf``, ``rsqrt``, ``umulhi``, integer
``//``, ``>>``, ``clamp``, and libdevice calls, which end in ``create_extern_elementwise``: a softcap
``cap * libdevice.tanh(x / cap)`` turns ``other=-inf`` into ``-cap``), conversions, broadcasts, reshapes,
``tl.join``/``tl.split``/``tl.cat``, and let ``tl.where(cond, a, b)`` take each lane's mark from the side
it picks (re-masking clears it). At a sum, max or min (its one block, bare or in a 1-tuple: an integer
``tl.sum`` arrives bare) the result is compared with the same reduction over the real lanes only: an output
that has real lanes and differs is a finding, with the padded lanes' contribution (sum: their sum; max/min:
how far the result moved). Outputs made of padding alone are padding themselves and are not judged. The
report keeps the first program of each reduction line; results go to ``Launch.meta["padded_reduction"]``.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from ..frames import where
from ..batch.tensor import _reduce_table
from ..batch.described import core
from ..gpu.lowp import floats, inner_method
from ..interp.access import ReduceOps, TensorHandle
from .monitor import MAX_REPORTS, ROWS_MERGE, ProgramRows, rows_of
from ..patching import carried

SPLAT = "_tt_splat"        # a block made by splatting one value per program
PAD = "_tt_padded"        # (bool lanes of the handle's data that hold padding, (file, line, other) of the load)
_ELEMENTWISE = ("binary_op", "unary_op", "create_fma", "cast_impl", "create_fp_to_fp", "create_bitcast",
                # builder methods that compute without binary_op/unary_op/ternary_op (in some release, or
                # after the GPU semantics replaced them): a mark that skips one is lost
                "create_fabs", "create_erf", "create_rsqrt", "create_umulhi", "create_idiv", "create_ashr",
                "create_clampf")
_EXTERN = "create_extern_elementwise"      # (lib, path, symbol, [operands], ret_type, pure): libdevice math
_COMBINING = ("create_join", "create_cat")  # two blocks side by side: each lane keeps its own mark
_RESHAPING = ("create_expand_dims", "create_reshape", "create_trans", "create_permute")


class PaddedReductions(ProgramRows):
    fork_point, since, mergeable, merge = ROWS_MERGE     # (reports only: record/parallel/)
    def records(self) -> dict:
        return {"padded_reduction": self.finished(self.reports)}

    def reduced(self, kind: str, file, line, source: tuple, affected: np.ndarray, lanes: np.ndarray,
                contribution: np.ndarray, result: np.ndarray, without: np.ndarray) -> None:
        """``affected``: outputs with real lanes whose value the padding changed (program axis first when
        batched); ``lanes``: per output, the padded lanes that are not neutral; the rest: per output."""
        key = (file, int(line or 0))
        if not affected.any():
            return
        for row, pid in self.programs(affected):
            mine = np.atleast_1d(rows_of(affected, row, self.batched))
            if not mine.any():
                continue

            def pick_all(a):
                return np.atleast_1d(rows_of(np.broadcast_to(a, affected.shape), row, self.batched))
            padded = int(pick_all(lanes)[mine].sum())
            self.reach(key, pid, padded)
            if key in self._seen or len(self.reports) >= MAX_REPORTS:
                continue
            first = tuple(int(v) for v in np.argwhere(mine)[0])
            self.report(self.reports, key, {
                "kind": "padded_reduction", "op": kind, "program": list(pid), "file": file, "line": int(line or 0),
                "load": {"file": source[0], "line": int(source[1] or 0), "other": _plain(source[2])},
                "outputs": int(mine.sum()), "output": list(first), "lanes": padded,
                "contribution": _plain(pick_all(contribution)[first]), "result": _plain(pick_all(result)[first]),
                "without": _plain(pick_all(without)[first])})


def _plain(v):
    v = np.asarray(v).reshape(-1)[0].item()
    return v if not isinstance(v, float) or np.isfinite(v) else repr(v)


def install(scope, builder, rec) -> None:
    if hasattr(builder, "create_masked_load"):
        scope.set_attr(builder, "create_masked_load", _load(inner_method(builder, "create_masked_load"), rec))
    for name in _ELEMENTWISE:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _elementwise(inner_method(builder, name), rec))
    if hasattr(builder, _EXTERN):
        scope.set_attr(builder, _EXTERN, _extern(inner_method(builder, _EXTERN), rec))
    if hasattr(builder, "ternary_op"):
        scope.set_attr(builder, "ternary_op", _ternary(inner_method(builder, "ternary_op"), rec))
    for name in _COMBINING:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _combining(inner_method(builder, name)))
    if hasattr(builder, "create_split"):
        scope.set_attr(builder, "create_split", _split(inner_method(builder, "create_split")))
    if hasattr(builder, "create_broadcast"):
        scope.set_attr(builder, "create_broadcast", _elementwise(inner_method(builder, "create_broadcast"), rec))
    for name in _RESHAPING:
        if hasattr(builder, name):
            scope.set_attr(builder, name, _reshaping(inner_method(builder, name)))
    if hasattr(builder, "create_splat"):
        scope.set_attr(builder, "create_splat", _splat(inner_method(builder, "create_splat")))
    scope.set_attr(ReduceOps, "apply", _reduce(ReduceOps.apply, rec))


def _mark(out, pad, source) -> None:
    if pad is not None and pad.any():
        setattr(out, PAD, (pad, source))


def _load(inner, rec):
    def run(ptrs, mask, other, *args, **kwargs):
        out = inner(ptrs, mask, other, *args, **kwargs)
        if other is None or not rec.recording or getattr(out, "data", None) is None:
            return out
        try:
            pad = ~np.broadcast_to(np.asarray(mask.data, bool), np.shape(out.data))
        except ValueError:
            return out
        if pad.any():
            file, line = where()
            value = floats(other)
            _mark(out, pad, (file, line, np.asarray(other.data if value is None else value).reshape(-1)[0]))
        return out
    return run


def _union(out, args, batched: bool):
    """The padded lanes of ``out`` from its operands' (the first marked operand's load), or (None, None).
    A lane is padding where every operand that varies along the block is: ``x - mean`` (a scalar mean) keeps
    ``x``'s padding, ``acc + x * x`` with a real accumulator does not (its lanes hold real data, and the
    padding added to them is judged by its value when it is reduced: 0 there)."""
    pad, source = None, None
    shape = np.shape(getattr(out, "data", None))
    for a in args:
        tag = carried(a, PAD, None)
        if tag is None:
            if _varies(a, batched):
                return None, None
            continue
        try:
            lanes = np.broadcast_to(tag[0], shape)
        except ValueError:
            return None, None
        pad, source = (lanes, tag[1]) if pad is None else (pad & lanes, source)
    return pad, source


def _varies(handle, batched: bool) -> bool:
    """Whether a handle's lanes may hold different values: not a splat (one value per program, which the
    interpreter may hold as a full array), nor a broadcast view of one. Judged by how the block was made,
    not by its values: an accumulator that happens to hold one value in every lane still varies."""
    data = getattr(handle, "data", None)
    if data is None or not hasattr(handle, "dtype") or carried(handle, SPLAT, False):
        return False
    c = core(np.asarray(data))
    return int(np.prod(c.shape[1:] if batched and c.ndim else c.shape)) > 1


def _splat(inner):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        if out is not None:
            setattr(out, SPLAT, True)
        return out
    return run


def _elementwise(inner, rec):
    def run(*args, **kwargs):
        out = inner(*args, **kwargs)
        for a in args:                 # (a loop, not a generator: this runs on every arithmetic op)
            if carried(a, PAD, None) is not None:
                if getattr(out, "data", None) is not None:
                    _mark(out, *_union(out, args, rec.batched))
                break
        return out
    return run


def _extern(inner, rec):
    """A libdevice call: its operands are the list it is handed, judged as an elementwise op's are."""
    def run(lib_name, lib_path, symbol, arg_list, *args, **kwargs):
        out = inner(lib_name, lib_path, symbol, arg_list, *args, **kwargs)
        operands = tuple(arg_list) if isinstance(arg_list, (list, tuple)) else (arg_list,)
        for a in operands:
            if carried(a, PAD, None) is not None:
                if getattr(out, "data", None) is not None:
                    _mark(out, *_union(out, operands, rec.batched))
                break
        return out
    return run


def _lanes(handle, tag):
    """A block's marks as an int1 handle of its own shape (no padding where it has no mark)."""
    shape = np.shape(handle.data)
    lanes = np.zeros(shape, bool) if tag is None else np.broadcast_to(tag[0], shape)
    return TensorHandle(np.ascontiguousarray(lanes), tl.int1)


def _combining(inner):
    """``tl.join`` / ``tl.cat`` of two blocks: the same op on their marks."""
    def run(lhs, rhs, *args, **kwargs):
        out = inner(lhs, rhs, *args, **kwargs)
        tags = (carried(lhs, PAD, None), carried(rhs, PAD, None))
        if all(t is None for t in tags) or getattr(out, "data", None) is None:
            return out
        try:
            moved = inner(_lanes(lhs, tags[0]), _lanes(rhs, tags[1]), *args, **kwargs)
            _mark(out, np.asarray(moved.data, bool).reshape(np.shape(out.data)),
                  next(t[1] for t in tags if t is not None))
        except (ValueError, TypeError):
            pass                           # a shape the marks do not follow: the mark is dropped
        return out
    return run


def _split(inner):
    """``tl.split``: each half keeps its lanes' marks."""
    def run(arg, *args, **kwargs):
        outs = inner(arg, *args, **kwargs)
        tag = carried(arg, PAD, None)
        if tag is None or not isinstance(outs, tuple):
            return outs
        try:
            moved = inner(_lanes(arg, tag), *args, **kwargs)
            for out, m in zip(outs, moved):
                if getattr(out, "data", None) is not None:
                    _mark(out, np.asarray(m.data, bool).reshape(np.shape(out.data)), tag[1])
        except (ValueError, TypeError):
            pass
        return outs
    return run


def _ternary(inner, rec):
    def run(cond, lhs, rhs, op, *args, **kwargs):
        out = inner(cond, lhs, rhs, op, *args, **kwargs)
        tags = [carried(h, PAD, None) for h in (lhs, rhs)]
        if all(t is None for t in tags) or getattr(out, "data", None) is None:
            return out
        if op is not np.where:                       # a clamp: every operand's padding reaches the result
            _mark(out, *_union(out, (lhs, rhs, cond), rec.batched))
            return out
        shape = np.shape(out.data)
        try:
            pick = np.broadcast_to(np.asarray(cond.data, bool), shape)
            pads = [np.zeros(shape, bool) if t is None else np.broadcast_to(t[0], shape) for t in tags]
        except ValueError:
            return out
        _mark(out, np.where(pick, pads[0], pads[1]), next(t[1] for t in tags if t is not None))
        return out
    return run


def _reshaping(inner):
    """A reshape, transpose or new axis of a marked block: the same op on its marks."""
    def run(arg, *args, **kwargs):
        out = inner(arg, *args, **kwargs)
        tag = carried(arg, PAD, None)
        if tag is None or getattr(out, "data", None) is None:
            return out
        try:
            lanes = np.broadcast_to(tag[0], np.shape(arg.data))
            moved = inner(TensorHandle(np.ascontiguousarray(lanes), tl.int1), *args, **kwargs)
            _mark(out, np.asarray(moved.data, bool).reshape(np.shape(out.data)), tag[1])
        except (ValueError, TypeError):
            pass                           # a shape the marks do not follow: the mark is dropped
        return out
    return run


_NEUTRAL = {"sum": "sum", "max": "max", "min": "min"}


def _reduce(original, rec):
    table = _reduce_table()

    busy: set = set()        # the handles being reduced now: a reduction that calls itself again is judged once

    def apply(self, input):
        # one block, bare or in a 1-tuple (an integer tl.sum arrives bare, and the GPU semantics' wrapping
        # sum calls apply again on a widened copy, which carries no mark)
        one = input[0] if isinstance(input, tuple) and len(input) == 1 else input
        h = None if isinstance(one, tuple) else getattr(one, "handle", None)
        tag = carried(h, PAD, None) if rec.recording else None
        kind = table.get(id(self.combine_fn))
        if tag is None or kind not in _NEUTRAL or id(h) in busy:
            return original(self, input)
        busy.add(id(h))
        try:
            ret = original(self, input)
        finally:
            busy.discard(id(h))
        _judge(rec, self, kind, h, tag)
        return ret
    return apply


def _judge(rec, op, kind, h, tag) -> None:
    v = floats(h)
    v = np.asarray(h.data if v is None else v)
    pad = np.broadcast_to(tag[0], v.shape)
    lead = 1 if rec.batched and v.ndim else 0
    if op.axis is None:
        v, pad = v.reshape(v.shape[:lead] + (-1,)), pad.reshape(pad.shape[:lead] + (-1,))
        axis = lead
    else:
        axis = op.axis + lead if op.axis >= 0 else op.axis + v.ndim
    lowest = -np.inf if v.dtype.kind == "f" else np.iinfo(v.dtype).min
    highest = np.inf if v.dtype.kind == "f" else np.iinfo(v.dtype).max
    neutral = {"sum": 0, "max": lowest, "min": highest}[kind]
    if (v[pad] == neutral).all():
        return                       # the padding still holds the neutral value (most kernels): nothing moved
    real = ~pad
    with np.errstate(all="ignore"):
        if kind == "sum":
            contribution = np.where(pad, v, 0).sum(axis=axis)
            moved = contribution != 0
            full = v.sum(axis=axis)
            without = full - contribution
            neutral_off = pad & (v != 0)
        else:
            fill, fn = (lowest, np.max) if kind == "max" else (highest, np.min)
            full = fn(v, axis=axis)
            without = fn(np.where(real, v, fill), axis=axis)
            moved = full != without
            contribution = full - without
            neutral_off = pad & (v != fill)
    affected = moved & real.any(axis=axis)
    if affected.any():
        file, line = where()
        rec.padded.reduced(kind, file, line, tag[1], affected, neutral_off.sum(axis=axis), contribution, full,
                           without)
