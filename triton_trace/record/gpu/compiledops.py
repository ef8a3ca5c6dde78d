"""Single ops where Triton's interpreter computes something other than the compiled kernel (found bit for bit
on an H100, docs/fidelity.md), each as the PTX the compiler emits defines it:

- ``tl.maximum``/``tl.minimum``/``tl.clamp``: with ``propagate_nan=NONE`` (the default) they are
  ``max.f32``/``min.f32`` (LLVM maxnum/minnum; clamp is ``minnum(maxnum(x, lo), hi)``), which return the
  operand that is not NaN; Triton 3.6's interpreter propagates the NaN. A NaN result, either mode, is PTX's
  canonical NaN (0x7fffffff, fp16/bf16 0x7fff), where numpy keeps the operand's NaN (0x7fc00000).
- ``padding_option="nan"`` on a bfloat16 or fp8 block pointer or descriptor: the padding is the type's NaN
  (bf16 0x7fc0); the interpreter fills the uint16/uint8 bit patterns with ``float('nan')``, which is 0.
- ``tl.histogram``: values outside ``[0, num_bins)`` are dropped; Triton 3.6's interpreter counts a value
  equal to ``num_bins`` in the last bin (numpy's last bin is closed).
- ``tl.sum``/``tl.cumsum`` of integers: the compiled reduction adds in the reduction's type and wraps
  (int1 sums modulo 2); the interpreter sums in int64 and then converts (1024 int1 ones gave 1, an int8 sum
  raised OverflowError).
- ``tl.dot_scaled``: computed as the sm_90 compiled decomposition does (``dotscaled.py``), on every release,
  including Triton 3.6 whose interpreter has no ``create_dot_scaled``.
- ``tl.dot(..., input_precision="bf16x3" | "bf16x6")``: the NVIDIA backend accepts them, the interpreter's
  options do not (an AssertionError at the dot); they are allowed here and, like "tf32", computed in
  float32 unless ``numerics="compiled"`` splits them as the compiler does (numerics/splitdot.py).
- ``numerics="compiled"`` only: a float add, subtract, multiply, divide, negation or fma whose result is NaN
  writes the canonical NaN, as ``add.f32``/``fma.rn.f32`` do (FlagGems' softmax backward on an H100 wrote
  0x7fffffff where numpy made 0xffc00000, x86's default NaN, or kept the operand's payload). A float ``%``
  is LLVM's expansion of ``frem`` for sm_90, read from the PTX of 3.6 and 3.9: ``div.rn``, ``cvt.rzi``,
  ``fma.rn(-q, y, x)``, ``x`` where ``y`` is infinite, in fp32 for fp16/bf16 (so ``-4 % 2`` is +0 where C's
  fmod is -0, and a quotient past 2^24 is not exact).
"""
from __future__ import annotations

import dataclasses

import numpy as np
import triton.language as tl

from ...numerics import compiled, rounding
from ..interp.access import ReduceOps, ScanOps, TensorHandle as _TH, combine_kind, np_dtype
from . import dotscaled
from .lowp import inner_method

_CANONICAL_NAN = {np.dtype(np.float32): np.uint32(0x7FFFFFFF), np.dtype(np.float16): np.uint16(0x7FFF)}
_BF16_CANONICAL = np.uint16(0x7FFF)
# the NaN an MLIR constant of the type holds (APFloat::getNaN): what the compiled load pads with
_PAD_NAN_BITS = {"bf16": 0x7FC0, "fp8e5": 0x7E, "fp8e4nv": 0x7F}


def _name(dtype) -> str:
    return getattr(getattr(dtype, "scalar", dtype), "name", "")


# what the NVIDIA backend's options allow beyond the interpreter's (CUDAOptions.allowed_dot_input_precisions)
_GPU_DOT_PRECISIONS = ("bf16x3", "bf16x6")


def install(scope, builder) -> None:
    _dot_precisions(scope, builder)
    _nan_minmax(scope, builder)
    _nan_padding(scope, builder)
    _histogram(scope, builder)
    _integer_sums(scope)
    _comparisons(scope, builder)
    dotscaled.install(scope, builder)


def _dot_precisions(scope, builder) -> None:
    options = getattr(builder, "options", None)
    allowed = tuple(getattr(options, "allowed_dot_input_precisions", ()) or ())
    if not dataclasses.is_dataclass(options) or not allowed:
        return
    more = tuple(p for p in _GPU_DOT_PRECISIONS if p not in allowed)
    if more:
        scope.set_attr(builder, "options", dataclasses.replace(options, allowed_dot_input_precisions=allowed + more))


def _comparisons(scope, builder) -> None:
    """A comparison's handle is an i1, as compiled: the interpreter tags it with its operands' type, so a
    scalar comparison broadcast against a block one (``(x < 0) ^ (y < 0)``, ``y`` a scalar) is splat as
    1.0/0.0 floats and the xor fails in numpy (FlagGems' floor division)."""
    for name in dir(type(builder)):
        if name.startswith(("create_icmp", "create_fcmp")):
            scope.set_attr(builder, name, _bool_typed(inner_method(builder, name)))


def _bool_typed(inner):
    def compare(lhs, rhs):
        out = inner(lhs, rhs)
        if isinstance(out, _TH) and out.dtype != tl.int1:
            out.dtype = tl.int1         # in place: the checks' tags (a division by zero it decides) stay on it
        return out
    return compare


_ARITHMETIC = ("create_fadd", "create_fsub", "create_fmul", "create_fdiv", "create_fneg", "create_fma")


def install_compiled(scope, builder) -> None:
    """numerics="compiled": installed after ascompiled, so a contracted fma and a MUFU division are covered."""
    for name in _ARITHMETIC:
        if hasattr(type(builder), name):
            inner = inner_method(builder, name)
            scope.set_attr(builder, name, lambda *args, _inner=inner, **kw: canonical_nan(_inner(*args, **kw)))
    scope.set_attr(builder, "create_frem", _remainder(inner_method(builder, "create_frem")))


def _remainder(inner):
    def create_frem(lhs, rhs):
        out = inner(lhs, rhs)       # the interpreter's, through every hook: its shape, dtype and recording
        name = _name(out.dtype)
        if name not in ("fp16", "bf16", "fp32", "fp64"):
            return out
        x, y = (rounding.bf16_to_f32(h.data) if name == "bf16" else
                np.asarray(h.data, np.float64 if name == "fp64" else np.float32) for h in (lhs, rhs))
        with np.errstate(all="ignore"):
            r = np.where(np.isinf(y), x, compiled.fma(-np.trunc(x / y), y, x))
        if name == "bf16":
            r = rounding.f32_to_bf16(r)
        elif name == "fp16":
            r = r.astype(np.float16)
        return canonical_nan(_TH(np.asarray(r).reshape(np.shape(out.data)), out.dtype))
    return create_frem


# --------------------------------------------------------------------------------------------------------
# min / max / clamp
# --------------------------------------------------------------------------------------------------------
def canonical_nan(h):
    """The handle with every NaN of an fp32/fp16/bf16 result replaced by PTX's canonical NaN."""
    if not isinstance(h, _TH):
        return h
    data = np.asarray(h.data)
    if _name(h.dtype) == "bf16":
        nan = (data & np.uint16(0x7FFF)) > np.uint16(0x7F80)
        return _TH(np.where(nan, _BF16_CANONICAL, data).astype(np.uint16), h.dtype) if nan.any() else h
    bits = _CANONICAL_NAN.get(data.dtype)
    if bits is None:
        return h
    nan = np.isnan(data)
    if not nan.any():
        return h
    out = data.copy()
    out.view(bits.dtype)[nan] = bits
    return _TH(out, h.dtype)


def _nan_minmax(scope, builder) -> None:
    def via(fn):
        # builder.binary_op at call time: the bf16 decoding (lowp) and the flop counter wrap it
        return lambda lhs, rhs: canonical_nan(builder.binary_op(lhs, rhs, fn))
    for name, fn in (("create_maxnumf", np.fmax), ("create_minnumf", np.fmin),
                     ("create_maximumf", np.maximum), ("create_minimumf", np.minimum)):
        if hasattr(type(builder), name):
            scope.set_attr(builder, name, via(fn))

    def create_clampf(arg, lo, hi, propagate_nans):
        if getattr(propagate_nans, "name", str(propagate_nans)).upper().endswith("NONE"):
            return canonical_nan(builder.binary_op(builder.binary_op(arg, lo, np.fmax), hi, np.fmin))
        return canonical_nan(builder.binary_op(builder.binary_op(arg, lo, np.maximum), hi, np.minimum))
    scope.set_attr(builder, "create_clampf", create_clampf)


# --------------------------------------------------------------------------------------------------------
# NaN padding of block pointer and descriptor loads
# --------------------------------------------------------------------------------------------------------
def _is_pad_nan(option) -> bool:
    return getattr(option, "name", "").upper() == "PAD_NAN"


def _nan_padding(scope, builder) -> None:
    if hasattr(type(builder), "create_tensor_pointer_load"):
        inner_ptr = inner_method(builder, "create_tensor_pointer_load")

        def create_tensor_pointer_load(ptr, boundary_check, padding_option, *rest, **kwargs):
            call = lambda: inner_ptr(ptr, boundary_check, padding_option, *rest, **kwargs)  # noqa: E731
            return _padded_with_nan(builder, call) if _is_pad_nan(padding_option) else call()
        scope.set_attr(builder, "create_tensor_pointer_load", create_tensor_pointer_load)
    if hasattr(type(builder), "create_descriptor_load"):
        inner_desc = inner_method(builder, "create_descriptor_load")

        def create_descriptor_load(desc, *args, **kwargs):
            call = lambda: inner_desc(desc, *args, **kwargs)  # noqa: E731
            return _padded_with_nan(builder, call) if _is_pad_nan(getattr(desc, "padding", None)) else call()
        scope.set_attr(builder, "create_descriptor_load", create_descriptor_load)


def _padded_with_nan(builder, call):
    """Run ``call`` (the interpreter's load, which builds ``other`` and calls ``create_masked_load``) with
    that ``other`` holding the type's NaN bits where the interpreter made them 0."""
    had = "create_masked_load" in vars(builder)
    current = vars(builder).get("create_masked_load")

    def create_masked_load(ptrs, mask, other, *args, **kwargs):
        bits = _PAD_NAN_BITS.get(_name(getattr(other, "dtype", None)))
        if bits is not None:
            data = np.asarray(other.data)
            other = _TH(np.full(data.shape, bits, dtype=data.dtype), other.dtype)
        if current is not None:
            return current(ptrs, mask, other, *args, **kwargs)
        return type(builder).create_masked_load(builder, ptrs, mask, other, *args, **kwargs)
    builder.create_masked_load = create_masked_load
    try:
        return call()
    finally:
        if had:
            builder.create_masked_load = current
        else:
            del builder.create_masked_load


# --------------------------------------------------------------------------------------------------------
# histogram
# --------------------------------------------------------------------------------------------------------
def _histogram(scope, builder) -> None:
    inner = inner_method(builder, "create_histogram")

    def create_histogram(data, bins, mask):
        # out-of-range values are masked off: the compiled histogram drops them (Triton 3.9's interpreter does)
        values = np.asarray(data.data)
        in_range = (values >= 0) & (values < bins)
        keep = in_range if mask is None else np.logical_and(np.asarray(mask.data), in_range)
        return inner(data, bins, _TH(np.asarray(keep, dtype=np.bool_), tl.int1))
    scope.set_attr(builder, "create_histogram", create_histogram)


# --------------------------------------------------------------------------------------------------------
# integer sums and cumulative sums
# --------------------------------------------------------------------------------------------------------
def _narrow_int(t) -> bool:
    dtype = getattr(t, "dtype", None)
    scalar = getattr(dtype, "scalar", dtype)
    return (isinstance(t, tl.core.tensor) and scalar is not None and scalar.is_int()
            and scalar.primitive_bitwidth < 64)


def _retyped(t, dtype, data):
    ty = t.type.with_element_ty(dtype) if t.type.is_block() else dtype
    return tl.core.tensor(_TH(data, dtype), ty)


def wrap_int(values, dtype) -> np.ndarray:
    """int64 values wrapped to an integer type as the GPU's adds in that type wrap (int1: modulo 2)."""
    want = np_dtype(dtype)
    values = np.asarray(values, dtype=np.int64)
    if want == np.bool_:
        return (values & 1).astype(np.bool_)
    return values.astype(want)        # numpy's integer narrowing keeps the low bits


def _integer_sums(scope) -> None:
    for ops_cls in (ReduceOps, ScanOps):
        inner = ops_cls.apply

        def apply(self, input, _inner=inner):
            if combine_kind(self.combine_fn) != "sum" or isinstance(input, tuple) and len(input) != 1:
                return _inner(self, input)
            x = input[0] if isinstance(input, tuple) else input
            if not _narrow_int(x):
                return _inner(self, input)
            wide = _retyped(x, tl.int64, np.asarray(x.handle.data).astype(np.int64))
            out = _inner(self, (wide,) if isinstance(input, tuple) else wide)
            res = out[0] if isinstance(out, tuple) else out
            res = _retyped(res, x.dtype.scalar, wrap_int(res.handle.data, x.dtype))
            return (res,) if isinstance(out, tuple) else res
        scope.set_attr(ops_cls, "apply", apply)
