"""bfloat16 and float16 as compiled code computes them.

Triton's interpreter stores a bfloat16 value as its uint16 bit pattern and hands those bits to numpy as
if they were numbers: bfloat16 arithmetic, comparisons, reductions, dot products and conversions to or from
anything but float32 come out as garbage, and float32 to bfloat16 truncates where the GPU rounds to nearest
even. Here every builder entry point that computes on values decodes bfloat16 operands to float32 (exact),
computes, and rounds the result back once, to nearest even, which is what the GPU's bf16 instructions
(``add.rn.bf16``, ``cvt.rn.bf16.f32``, ...) give for a single operation. Float conversions between
fp16/bf16/fp32/fp64 round once, in the requested mode (nearest-even or toward zero), instead of going
through the interpreter's bit-twiddling converter; fp8 (e5m2, e4m3fn) widens exactly, from the value of
each code (the interpreter's converter flushed e5m2 subnormals). A fused multiply-add rounds once in every
float type.

The wrappers go around whatever the builder holds when the launch starts (the recording hooks' counters
included), so flop counting and recording see the same calls as before.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from ...numerics import rounding
from ...numerics.ptx_formats import fp8_encode
from ..batch import dot as batchdot
from ..interp.access import ReduceOps, ScanOps, TensorHandle as _TH, combine_kind, np_dtype

_NARROW = {"fp16": np.float16, "bf16": np.uint16}
_STD = {"fp16", "bf16", "fp32", "fp64"}


def _name(dtype) -> str:
    return getattr(getattr(dtype, "scalar", dtype), "name", "")


def is_bf16(h) -> bool:
    return isinstance(h, _TH) and _name(h.dtype) == "bf16"


def decode(h):
    """A float32 handle with the value of a bfloat16 handle; other handles unchanged."""
    return _TH(rounding.bf16_to_f32(h.data), tl.float32) if is_bf16(h) else h


def floats(h):
    """The float values a handle holds (bfloat16 decoded to float32, exactly), or None for other types."""
    if is_bf16(h):
        return rounding.bf16_to_f32(h.data)
    data = np.asarray(getattr(h, "data", None))
    return data if data.dtype.kind == "f" else None


def encode(h):
    """The bfloat16 handle nearest a float32 result handle (booleans and others unchanged)."""
    if isinstance(h, _TH) and h.data.dtype == np.float32:
        return _TH(rounding.f32_to_bf16(h.data), tl.bfloat16)
    return h


def _as_f64(h) -> np.ndarray:
    if is_bf16(h):
        return rounding.bf16_to_f32(h.data).astype(np.float64)
    return h.data.astype(np.float64)


def from_f64(x, dtype, mode: str = "rn"):
    """float64 values (exact) rounded once to a standard float type, as a handle of that type."""
    name = _name(dtype)
    if name == "fp64":
        return _TH(np.asarray(x, dtype=np.float64), tl.float64)
    if name == "fp32":
        x = np.asarray(x, dtype=np.float64)
        with np.errstate(over="ignore"):
            data = x.astype(np.float32) if mode == "rn" else rounding.round_to(x, 0.0, np.float32, mode)
        return _TH(data, tl.float32)
    return _TH(rounding.f64_to_narrow(x, _NARROW[name], name == "bf16", mode), dtype.scalar)


def _mode(rounding_mode) -> str:
    return "rz" if getattr(rounding_mode, "name", str(rounding_mode)).upper().endswith("RTZ") else "rn"


# --------------------------------------------------------------------------------------------------------
# the builder
# --------------------------------------------------------------------------------------------------------
def inner_method(builder, name: str):
    """What ``builder.<name>`` does before we wrap it: an earlier hook's own wrapper if there is one, else the
    method of the builder's class looked up at call time (a batched chunk swaps that class)."""
    own = vars(builder).get(name)
    if own is not None:
        return own
    return lambda *args, **kwargs: getattr(type(builder), name)(builder, *args, **kwargs)


def install(scope, builder) -> None:
    cls = type(builder)
    for name in ("binary_op", "unary_op", "ternary_op"):
        scope.set_attr(builder, name, _via_f32(inner_method(builder, name)))
    scope.set_attr(builder, "cast_impl", _cast(inner_method(builder, "cast_impl")))
    scope.set_attr(builder, "create_fp_to_fp", _fp_to_fp(inner_method(builder, "create_fp_to_fp")))
    scope.set_attr(builder, "create_fma", _fma(inner_method(builder, "create_fma")))
    if hasattr(cls, "get_bf16"):
        get_u16 = inner_method(builder, "get_uint16")

        def get_bf16(value):     # nearest-even, where the interpreter truncates a float32
            bits = rounding.f64_to_narrow(np.float64(value), np.uint16, True)
            return _TH(get_u16(int(bits)).data, tl.bfloat16)
        scope.set_attr(builder, "get_bf16", get_bf16)
    orig_dot = cls.create_dot

    def create_dot(self, a, b, d, *args, **kwargs):
        a, b = _aligned(a), _aligned(b)        # the accumulator is only added, element by element
        if not (is_bf16(a) or is_bf16(b) or is_bf16(d)):
            return orig_dot(self, a, b, d, *args, **kwargs)
        out = orig_dot(self, decode(a), decode(b), decode(d), *args, **kwargs)
        return encode(out) if is_bf16(d) else out
    scope.set_attr(cls, "create_dot", create_dot)
    _install_reductions(scope)


_ALIGN = batchdot.ALIGN


def _aligned(h):
    """The handle with its data C-contiguous at a 64-byte boundary (a chunk's stacked blocks: each block so,
    batch/dot.py). numpy's matmul (OpenBLAS) may sum in an order that depends on where the operands sit in
    memory: the same tile gave results differing in the last bits when run alone and when sliced out of a
    batched chunk. Fixed placement makes a dot a function of its values only."""
    x = h.data
    if batchdot.items_placed(x):
        return h
    raw = np.empty(x.nbytes + _ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % _ALIGN
    out = raw[start:start + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return _TH(out, h.dtype.scalar)


def _via_f32(inner):
    # binary_op(lhs, rhs, fn), unary_op(arg, fn), ternary_op(a, b, c, fn): the numpy function comes last
    def op(*handles):
        *args, fn = handles
        if not any(is_bf16(h) for h in args):
            return inner(*handles)
        return encode(inner(*[decode(h) for h in args], fn))    # comparisons stay boolean
    return op


_FP8 = ("fp8e5", "fp8e4nv")


def _from_fp8(src, dst_type):
    """An fp8 handle converted to a standard float type: the exact value of every code (the interpreter
    loses e5m2 subnormals: 0x01 gave 0), rounded once (a no-op: every fp8 value is exact in fp16 and bf16).
    e5m2 to fp16 is the GPU's exact shift of the bits (``cvt.rn.f16x2.e5m2x2``), NaN payloads included."""
    name = _name(src.dtype)
    if name == "fp8e5" and _name(dst_type) == "fp16":
        bits = (np.asarray(src.data).astype(np.uint16) << np.uint16(8)).astype(np.uint16)
        return _TH(bits.view(np.float16), dst_type.scalar)
    return from_f64(rounding.fp8_to_f32(src.data, name).astype(np.float64), dst_type)


def _cast(inner):
    def cast_impl(src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if _name(s) in _FP8 and _name(d) in _STD:
            return _from_fp8(src, dst_type)
        std_src = _name(s) in _STD
        if std_src and d.is_int():
            return _fp_to_int(_as_f64(src), dst_type)
        if "bf16" in (_name(s), _name(d)) and _name(d) in _STD and (std_src or s.is_int()):
            return from_f64(_as_f64(src) if std_src else src.data.astype(np.float64), dst_type)
        return inner(src, dst_type)
    return cast_impl


def _fp_to_int(x, dst_type):
    """float64 values to an integer type as cvt.rzi does on the GPU: toward zero, saturating at the type's
    range, NaN to 0 (numpy's cast wraps, or gives INT_MIN, and warns)."""
    want = np_dtype(dst_type)
    if want == np.bool_:
        return _TH(x != 0, dst_type.scalar)
    info = np.iinfo(want)
    with np.errstate(invalid="ignore"):
        t = np.trunc(np.where(np.isnan(x), 0.0, x))
        lo_hit, hi_hit = t < float(info.min), t >= float(info.max) + 1.0
        safe = np.where(lo_hit | hi_hit, 0.0, t).astype(want)
    out = np.where(lo_hit, np.array(info.min, want), np.where(hi_hit, np.array(info.max, want), safe))
    return _TH(out.astype(want), dst_type.scalar)


def _fp_to_fp(inner):
    def create_fp_to_fp(src, dst_type, rounding_mode):
        if _name(src.dtype) in _FP8 and _name(dst_type) in _STD:
            return _from_fp8(src, dst_type)
        if _name(src.dtype) in _STD and _name(dst_type) in _STD:
            return from_f64(_as_f64(src), dst_type, _mode(rounding_mode))
        if _name(src.dtype) in _STD and _name(dst_type) in _FP8 and _mode(rounding_mode) == "rn":
            return _to_fp8(src, dst_type)
        return inner(src, dst_type, rounding_mode)
    return create_fp_to_fp


def _to_fp8(src, dst_type):
    """fp32/fp16/bf16 to fp8 as sm_90 converts: ``cvt.rn.satfinite.e4m3x2`` / ``.e5m2x2`` (from f32, f16x2,
    and bf16 through f32: read from Triton 3.6's PTX), nearest-even from the exact value, magnitudes past the
    largest finite (infinities too) clamped to it, NaN 0x7F. The interpreter's conversion gave 256 for 1000.0
    and 500.0 into e4m3 (the GPU: 448)."""
    fmt = "e4m3" if _name(dst_type) == "fp8e4nv" else "e5m2"
    codes = fp8_encode(_as_f64(src), fmt, satfinite=True).astype(np.uint8)
    return _TH(codes, dst_type.scalar if hasattr(dst_type, "scalar") else dst_type)


def _fma(inner):
    def create_fma(x, y, z):
        name = _name(z.dtype)
        if name not in _STD:
            return inner(x, y, z)
        a, b, c = (_as_f64(h) for h in (x, y, z))
        a, b, c = np.broadcast_arrays(a, b, c)
        if name == "fp64":       # the interpreter's native fma_fp64 is not single-rounded everywhere
            return _TH(rounding.fma64(a, b, c)[0], tl.float64)
        with np.errstate(all="ignore"):
            s, e = rounding.two_sum(a * b, c)     # the product of two floats of <= 24 bits is exact
        if name == "fp32":
            return _TH(rounding.round_to(s, e, np.float32, "rn"), tl.float32)
        mid = rounding.to_odd_f32(s, e)
        data = rounding.f32_to_bf16(mid) if name == "bf16" else mid.astype(np.float16)
        return _TH(data, z.dtype.scalar)
    return create_fma


# --------------------------------------------------------------------------------------------------------
# reductions and scans with a numpy fast path (sum, min/max/argmin/argmax, cumsum, cumprod)
# --------------------------------------------------------------------------------------------------------
def _tensor_f32(t):
    if not (isinstance(t, tl.core.tensor) and _name(t.dtype) == "bf16"):
        return t
    return tl.core.tensor(decode(t.handle), t.type.with_element_ty(tl.float32) if t.type.is_block() else tl.float32)


def _tensor_bf16(t):
    if not isinstance(t, tl.core.tensor) or t.handle.data.dtype != np.float32:
        return t
    ty = t.type.with_element_ty(tl.bfloat16) if t.type.is_block() else tl.bfloat16
    return tl.core.tensor(encode(t.handle), ty)


def _install_reductions(scope) -> None:
    for ops_cls in (ReduceOps, ScanOps):
        inner = ops_cls.apply

        def apply(self, input, _inner=inner):
            items = input if isinstance(input, tuple) else (input,)
            # the standard combines (sum, max, argmin...) are the ones the interpreter and the batched
            # executor compute with numpy on the data
            if combine_kind(self.combine_fn) is None or \
                    not any(_name(getattr(t, "dtype", None)) == "bf16" for t in items):
                return _inner(self, input)
            # numpy on bf16 bit patterns: decode, reduce in float32, round the values back once
            out = _inner(self, tuple(_tensor_f32(t) for t in items) if isinstance(input, tuple)
                         else _tensor_f32(input))
            return tuple(_tensor_bf16(t) for t in out) if isinstance(out, tuple) else _tensor_bf16(out)
        scope.set_attr(ops_cls, "apply", apply)
