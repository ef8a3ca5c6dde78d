"""The hooks of the float64 shadow (shadow.py): each builder op that makes a floating value computes it
again in float64, on its operands' shadows and on each line's part of them, and tags the result.

Arithmetic, math functions (numpy's, libdevice's float64 twin of a float32 symbol), ``fma``, ``where`` and
clamps, casts (an integer cast to a float is its exact value), ``tl.dot`` and the standard reductions run
their own float64 version; shape ops (splat, broadcast, reshape, trans, expand_dims, join, split, cat,
gather) run the builder class's own method on float64 handles, so a batched chunk's program axis is shifted
exactly as for the real value. Stores report the stored lanes (the mask, the programs recorded and running).
Nothing is installed unless the monitor is active: a launch traced without the shadow pays nothing here.
"""
from __future__ import annotations

import functools

import numpy as np
import triton.language as tl

from ...numerics import libdevice_exact  # noqa: F401  (registers the exact symbols in OPS)
from ...numerics import rounding
from ...numerics.libdevice_ops import OPS
from ..batch import described
from ..frames import where
from ..gpu.lowp import floats, inner_method
from ..interp.access import ReduceOps, TensorHandle, combine_kind
from ..patching import carried
from .outermost import hook_outermost
from .shadow import TAG, TYPES, Shadow, capped, ulp

_FP8 = ("fp8e5", "fp8e4nv")
_SHAPE_OPS = ("create_splat", "create_unsplat", "create_broadcast", "create_expand_dims", "create_reshape",
              "create_trans", "create_cat", "create_join", "create_gather")
_BITS = (np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.left_shift, np.right_shift, np.invert)
_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.fmax.reduce, "min": np.fmin.reduce, "argmax": np.fmax.reduce,
           "argmin": np.fmin.reduce}


def _type(h) -> str:
    return getattr(getattr(getattr(h, "dtype", None), "scalar", None), "name", "")


def real(h):
    """The float64 values of a floating handle (bf16 and fp8 decoded), else None."""
    name = _type(h)
    if name in _FP8:
        return rounding.fp8_to_f32(np.asarray(h.data), name).astype(np.float64)
    if name not in TYPES:
        return None
    return np.asarray(floats(h), dtype=np.float64)


class _Operand:
    __slots__ = ("real", "exact", "parts", "path", "tagged")

    def __init__(self, h):
        self.real = real(h)
        tag = carried(h, TAG)
        self.tagged = tag is not None and np.shape(tag.exact) == np.shape(self.real)
        self.exact, self.parts, self.path = (tag.exact, tag.parts, tag.path) if self.tagged else \
            (self.real, {}, frozenset())

    def at(self, line):
        d = self.parts.get(line)
        return self.exact if d is None else self.exact + d

    def error(self, type_name: str) -> np.ndarray:
        """Its error against its shadow in ulps of ``type_name`` (0 when it is its own shadow)."""
        if not self.tagged:
            return np.zeros(())
        return np.abs(self.real - self.exact) / ulp(self.exact, type_name)


def _operands(args) -> list:
    out = []
    for a in args:
        o = _Operand(a) if isinstance(a, TensorHandle) else None
        out.append(o if o is not None and o.real is not None else None)
    return out


def _finite(x: np.ndarray) -> np.ndarray:
    return np.nan_to_num(x, copy=False, nan=0.0, posinf=0.0, neginf=0.0)


def _elementwise(errors: list):
    return functools.reduce(np.maximum, errors)


def follow(rec, out, fn, args, op: str, spread=_elementwise) -> None:
    """Tag ``out``, the real result of ``fn`` (its float64 version) over ``args``, and note its line.
    ``spread`` maps the operands' errors to the result's shape (a reduction reduces them)."""
    t = _type(out)
    if t not in TYPES:
        return
    r_out = real(out)
    ops = _operands(args)
    if fn in _BITS or not (any(ops) or op == "cast"):
        return          # no float64 meaning (bits of a value, or ints the front end typed as a float)
    file, line = where()
    key = (file, int(line or 0))

    def call(pick):
        vals = [pick(o) if o is not None else (np.asarray(a.data) if isinstance(a, TensorHandle) else a)
                for a, o in zip(args, ops)]
        return np.asarray(fn(*vals), dtype=np.float64)
    with np.errstate(all="ignore"):
        local_exact = call(lambda o: o.real)
        exact = call(lambda o: o.exact) if any(o is not None and o.tagged for o in ops) else local_exact
        if exact.shape != r_out.shape:
            try:
                exact, local_exact = np.broadcast_to(exact, r_out.shape), np.broadcast_to(local_exact, r_out.shape)
            except ValueError:
                return
        # a part is an error: where a value is not finite (an overflow, a NaN born here) it has none
        local = _finite(r_out - local_exact)
        parts = {}
        for k in set().union(*(o.parts for o in ops if o is not None)):
            d = _finite(call(lambda o: o.at(k)) - exact)
            parts[k] = d + local if k == key else d
        if key not in parts and np.any(local != 0):
            parts[key] = local
    path = frozenset().union(*(o.path for o in ops if o is not None)) | {key}
    setattr(out, TAG, Shadow(exact, capped(parts), path))
    m = rec.shadow
    m.ops += 1
    if rec.recording:
        errors = [o.error(t) for o in ops if o is not None]
        operands = spread(errors) if errors else np.zeros(())
        m.line(key + (t,), op, r_out, local_exact, exact, operands)


def _shape_copy(builder, name: str, args, out) -> None:
    """Tag ``out`` (a handle or a tuple of them) of the shape op ``name`` with the same op on the shadows."""
    if not any(carried(a, TAG) is not None for a in args if isinstance(a, TensorHandle)):
        return          # an untagged value is its own shadow, and so is its copy
    ops = _operands(args)
    raw = getattr(type(builder), name)

    def run(pick):
        res = raw(builder, *[TensorHandle(pick(o), tl.float64) if o is not None else a for a, o in zip(args, ops)])
        return [h.data for h in res] if isinstance(res, tuple) else [res.data]
    exact = run(lambda o: o.exact)
    parts = [{} for _ in exact]
    for k in set().union(*(o.parts for o in ops if o is not None)):
        for i, d in enumerate(run(lambda o: o.parts.get(k, np.zeros_like(o.exact)))):
            parts[i][k] = d
    path = frozenset().union(*(o.path for o in ops if o is not None))
    for h, e, p in zip(out if isinstance(out, tuple) else (out,), exact, parts):
        if real(h) is not None and np.shape(e) == np.shape(h.data):
            setattr(h, TAG, Shadow(np.asarray(e, np.float64), p, path))


def _extern64(symbol: str):
    """The float64 function of a libdevice symbol: ``__nv_logf`` -> ``__nv_log``, else the symbol's own."""
    if symbol.endswith("f") and symbol[:-1] in OPS:
        return OPS[symbol[:-1]]
    return OPS.get(symbol)


def _dot_errors(errors: list):
    """A dot's output element reads a row of ``a`` and a column of ``b``: their largest error, and the
    accumulator's own."""
    ea, eb, ed = (list(errors) + [np.zeros(())] * 3)[:3]
    ea = np.max(ea, axis=-1, keepdims=True) if np.ndim(ea) >= 2 else ea
    eb = np.max(eb, axis=-2, keepdims=True) if np.ndim(eb) >= 2 else eb
    return np.maximum(np.maximum(ea, eb), ed)


def install(scope, builder, rec) -> None:
    if rec.shadow.mode is None:
        return

    def hook(name, make):
        if hasattr(builder, name):
            scope.set_attr(builder, name, make(inner_method(builder, name)))

    def simple(name, fn, n_args, op=None, spread=_elementwise):
        def make(inner):
            def run(*args, **kwargs):
                out = inner(*args, **kwargs)
                follow(rec, out, fn, args[:n_args], op or name[7:], spread)
                return out
            return run
        hook(name, make)

    def with_op(name, n_args):       # binary_op(lhs, rhs, fn), unary_op(arg, fn), ternary_op(a, b, c, fn)
        def make(inner):
            def run(*args, **kwargs):
                out = inner(*args, **kwargs)
                fn = args[n_args]
                follow(rec, out, fn, args[:n_args], getattr(fn, "__name__", name))
                return out
            return run
        hook(name, make)

    with_op("binary_op", 2)
    with_op("unary_op", 1)
    with_op("ternary_op", 3)
    simple("create_fma", lambda x, y, z: x * y + z, 3)
    simple("create_fabs", np.abs, 1)
    simple("create_rsqrt", lambda x: 1.0 / np.sqrt(x), 1)
    if OPS.get("__nv_erf") is not None:
        simple("create_erf", OPS["__nv_erf"], 1)
    for name in ("cast_impl", "create_fp_to_fp"):
        simple(name, lambda x: x, 1, "cast")
    simple("create_dot", lambda a, b, d: np.matmul(a, b) + d, 3, "dot", _dot_errors)

    def extern(inner):
        def run(lib_name, lib_path, symbol, arg_list, *args, **kwargs):
            out = inner(lib_name, lib_path, symbol, arg_list, *args, **kwargs)
            fn = _extern64(symbol)
            if fn is not None:
                follow(rec, out, fn, tuple(arg_list), symbol[5:])
            return out
        return run
    hook("create_extern_elementwise", extern)

    def shaped(inner, name):
        def run(*args, **kwargs):
            out = inner(*args, **kwargs)
            _shape_copy(builder, name, args, out)
            return out
        return run
    for name in _SHAPE_OPS + ("create_split",):
        hook(name, lambda inner, _name=name: shaped(inner, _name))
    scope.set_attr(ReduceOps, "apply", _reduce(ReduceOps.apply, rec))
    hook_outermost(scope, builder, ("create_store", "create_masked_store"),
                   lambda name, args, kwargs: _store(rec, name, args))


def _reduce(original, rec):
    depth = [0]      # tl.sum re-enters apply with its input in a 1-tuple (and widened): follow the outer call

    def apply(self, input):
        depth[0] += 1
        try:
            ret = original(self, input)
        finally:
            depth[0] -= 1
        kind = combine_kind(self.combine_fn)
        if depth[0] or kind not in _REDUCE:
            return ret
        items = input if isinstance(input, tuple) else (input,)
        outs = ret if isinstance(ret, (tuple, list)) else (ret,)
        h, out = getattr(items[0], "handle", None), getattr(outs[0], "handle", None)
        if isinstance(h, TensorHandle) and isinstance(out, TensorHandle):
            shape = np.shape(out.data)

            def along(fn):
                def run(x):
                    x = np.asarray(x)
                    lead = 1 if rec.batched and x.ndim else 0
                    if self.axis is None:
                        x, axis = x.reshape(x.shape[:lead] + (-1,)), lead
                    else:
                        axis = self.axis + lead if self.axis >= 0 else self.axis + x.ndim
                    return np.reshape(fn(x, axis=axis), shape)
                return run
            follow(rec, out, along(_REDUCE[kind]), (h,), kind,
                   lambda errors: along(np.max)(np.broadcast_to(errors[0], np.shape(h.data))))
        return ret
    return apply


def _store(rec, name: str, args) -> None:
    if rec.recording and len(args) > 1 and carried(args[1], TAG) is not None:
        _judge(rec, args[0], args[1], args[2] if name == "create_masked_store" and len(args) > 2 else None)


def _judge(rec, ptr, value, mask) -> None:
    o = _Operand(value)
    if o.real is None or not o.tagged:
        return
    try:
        full = np.broadcast_shapes(described.shape_of(ptr), np.shape(o.real))
        lanes = np.ones(full, bool) if mask is None else np.broadcast_to(np.asarray(mask.data, bool), full)
    except ValueError:
        return
    file, line = where()
    tensor = rec.origin if rec.origin is not None else -1
    rec.shadow.stored((file, int(line or 0), tensor, _type(value)), o.real, o.exact, o.parts, o.path, lanes)
