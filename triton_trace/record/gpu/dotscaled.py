"""``tl.dot_scaled`` as an sm_90 GPU computes it, for the interpreter's builder (``create_dot_scaled``).

Triton 3.6's interpreter builder has no ``create_dot_scaled``; Triton 3.9's has one that computes in float32
(exact powers of two for the scales, the byte 0 as 2^-127, operands never rounded to 16 bits) and records
no dot. Here one implementation serves both: it follows what Triton compiles for a GPU without MX tensor
cores (sm_80, sm_90: the ``DecomposeScaledBlocked`` rewrite, whose bf16/fp16 ``mma``/``wgmma`` test_core's
test_scaled_dot checks in the PTX), step by step:

1. each operand is converted to the compute type, fp16 if either format is fp16, else bf16: fp4 (two
   codes a byte, low nibble first, unpacked along K, or along M/N where ``lhs_k_pack``/``rhs_k_pack`` is
   false), fp6 (a code a byte), fp8 (e4m3fn, e5m2) exactly; bf16 to fp16 rounded to nearest even;
2. a scaled operand is multiplied, in the compute type (one rounding), by its scale as compiled code builds
   it there: an e8m0 byte ``s`` shifted into the exponent field (bf16: ``s << 7``, so 0 gives 0 and 0xFF
   Inf; fp16: the float32 ``s << 23`` rounded to fp16), an e4m3 scale converted; the scale of ``rhs``,
   given as [N, K/group], is transposed onto [K, N];
3. unless ``fast_math``, the elements whose e8m0 scale is 0xFF (e4m3: NaN) become the type's quiet NaN;
4. the two 16-bit operands and the accumulator go to the builder's ``create_dot``, as the rewrite's
   ``tt.dot``: the recorder writes its "dot" row (FLOPs, roofline), bf16 is decoded, a batched chunk
   stacks its programs, exactly as for a ``tl.dot`` in the kernel.

The numbers are triton_trace/numerics/mx.py's. Bit-exact: steps 1 to 3 (every code, subnormals, Inf and
NaN rules, the scale's rounding). Not bit-exact: the float32 accumulation in step 4, which is the tracer's
``tl.dot`` (products exact where float32 holds them, summed in numpy's order; the tensor cores sum in
their own order, and a product below float32's normal range, which numpy rounds to a float32 subnormal,
need not round there alike), and the NaN payload of a NaN result.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl

from ...numerics import mx
from ..interp.access import TensorHandle as _TH, semantic

_STORAGE = {"bf16": tl.bfloat16, "fp16": tl.float16}
# the decomposed dot's operands are bf16 or fp16, for which input_precision means nothing; the tf32 monitor
# reads its name, the interpreter ignores it
_PRECISION = "ieee"


def install(scope, builder) -> None:
    """Give the interpreter's builder this ``create_dot_scaled`` for one launch (an instance attribute: it
    stands before the builder class's own, and before a batched chunk's class), and let the front end take
    the formats the interpreter passes it."""
    def create_dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math, lhs_k_pack,
                          rhs_k_pack, acc):
        return dot_scaled(builder, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math,
                          lhs_k_pack, rhs_k_pack, acc)
    scope.set_attr(builder, "create_dot_scaled", create_dot_scaled)
    _format_arguments(scope)


class _Format(str):
    """A format name that is also its own ``.value``. The interpreter hands a builtin its constexpr
    arguments unwrapped (a plain str); Triton 3.6's front end reads ``lhs_format.value`` (compiled, a
    constexpr has one), 3.9's uses the str itself: this passes both."""

    @property
    def value(self) -> str:
        return str(self)


def _format_arguments(scope) -> None:
    # each patched builtin holds its own semantic object: the method is wrapped on their class
    sem = semantic()
    if sem is None or not hasattr(type(sem), "dot_scaled"):
        return
    inner = type(sem).dot_scaled

    def dot_scaled_front_end(self, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, *args, **kwargs):
        return inner(self, lhs, lhs_scale, _as_format(lhs_format), rhs, rhs_scale, _as_format(rhs_format),
                     *args, **kwargs)
    scope.set_attr(type(sem), "dot_scaled", dot_scaled_front_end)


def _as_format(fmt):
    return _Format(fmt) if isinstance(fmt, str) else fmt


def format_name(fmt) -> str:
    """"e2m1", "bf16", ... from the front end's format enum (ScaleDotElemTypeTY) or a string."""
    return str(getattr(fmt, "name", fmt)).split(".")[-1].lower()


def _flag(value) -> bool:
    return bool(getattr(value, "value", value))


def dot_scaled(builder, lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, fast_math, lhs_k_pack,
               rhs_k_pack, acc):
    """``acc + lhs @ rhs`` (float32) as the decomposed dot computes it. Handles may carry a batched chunk's
    leading program axis: everything here works on the last two axes and broadcasts over the rest."""
    lf, rf = format_name(lhs_format), format_name(rhs_format)
    compute = mx.compute_type(lf, rf)
    fast = _flag(fast_math)
    a = operand(lhs, lhs_scale, lf, _flag(lhs_k_pack), compute, fast, is_rhs=False)
    b = operand(rhs, rhs_scale, rf, _flag(rhs_k_pack), compute, fast, is_rhs=True)
    # through the builder attribute, looked up now: the recording hook, bf16 decoding and batching wrap it
    return builder.create_dot(a, b, acc, _PRECISION, 0)


def operand(h, scale, fmt: str, k_pack: bool, compute: str, fast_math: bool, is_rhs: bool):
    """One operand of the decomposed dot as a compute-type handle: lhs [..., M, K], rhs [..., K, N]."""
    k_axis = -2 if is_rhs else -1
    data = np.asarray(h.data)
    if fmt == "e2m1":
        packed_axis = k_axis if k_pack else (-1 if is_rhs else -2)
        values = mx.decode(mx.unpack_fp4(data, packed_axis), "e2m1")
    else:
        values = mx.decode(data, fmt)
    bits = None
    if scale is not None:
        bits = np.asarray(scale.data)
        group = values.shape[k_axis] // bits.shape[-1]
        bits = np.repeat(bits, group, axis=-1)        # [..., M or N, K]
        if is_rhs:
            bits = np.swapaxes(bits, -1, -2)          # rhs_scale comes as [N, K/group]
    scale_fmt = "e4m3" if scale is not None and _scalar_name(scale.dtype) == "fp8e4nv" else "e8m0"
    out = mx.scaled_operand(values, bits, scale_fmt, compute, fast_math)
    return _TH(np.ascontiguousarray(out), _STORAGE[compute])


def _scalar_name(dtype) -> str:
    return getattr(getattr(dtype, "scalar", dtype), "name", "")
