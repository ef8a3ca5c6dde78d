"""GPU semantics where Triton's plain interpreter differs from compiled code.

``kernel_arg`` converts one non-constexpr kernel argument the way a compiled launch types it; ``install``
patches the interpreter's builder for one launch (everything goes through ``scope``, so it is undone when
the launch ends). What is fixed, and why:

- scalar arguments are tensors, typed by Triton's specialisation rules (ints i32/i64/u64 by value, floats
  fp32, bools i1), so ``eps.to(tl.float32)``, ``n.dtype`` and fp16-block-times-float-argument promotion
  behave as compiled (the interpreter passes a float as a Python float, which has no ``.to`` and promotes
  as a weak constant);
- integer constants wrap to their type (``tl.full(..., -1, tl.uint32)`` is 0xFFFFFFFF on the GPU, an
  OverflowError in numpy 2), and numpy's overflow/invalid warnings are silenced while a kernel runs, since
  the GPU wraps integers and makes inf/NaN silently; float to integer conversion saturates, NaN giving 0
  (``lowp``);
- bfloat16 and float16 round where compiled code rounds (``lowp``);
- ``libdevice`` math runs on numpy (``libdevice``, ``libdevice_ops``);
- min/max/clamp NaN handling, NaN padding of bf16/fp8 loads, histogram range, integer sums that wrap in
  their type, and ``tl.dot_scaled`` as the sm_90 decomposition computes it (``compiledops``, ``dotscaled``);
- ``numerics="compiled"``: fp32/fp64 ``a * b + c`` contracted to one ``fma.rn`` and fp32 ``tl.dot`` inputs
  read as TF32, as the compiled kernel computes them (``ascompiled``);
- ``tl.inline_asm_elementwise`` runs its PTX on numpy (``inlineasm``, numerics/ptx.py);
- what cannot be emulated (a PTX instruction outside that subset, a libdevice function with no numpy
  equivalent) raises NotImplementedError from inside Triton, which the session reports as ``UnsupportedOp``
  with the op and line.
"""
from __future__ import annotations

import numpy as np
import triton.language as tl
from triton.runtime import interpreter as _ti

from ..gpu import ascompiled, compiledops, inlineasm, libdevice, lowp, reduceorder
from ..gpu.lowp import inner_method

_TH = _ti.TensorHandle
_INT_CONSTANTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")


def kernel_arg(value):
    """A non-constexpr kernel argument as the compiled kernel sees it."""
    if isinstance(value, bool):
        return _scalar(np.array([value], dtype=np.bool_), tl.int1)
    if isinstance(value, int):
        if -2**31 <= value < 2**31:
            return _scalar(np.array([value], dtype=np.int32), tl.int32)
        if -2**63 <= value < 2**63:
            return _scalar(np.array([value], dtype=np.int64), tl.int64)
        if 2**63 <= value < 2**64:
            return _scalar(np.array([value], dtype=np.uint64), tl.uint64)
        raise ValueError(f"integer kernel argument {value} does not fit in 64 bits; Triton cannot pass it")
    if isinstance(value, float):
        with np.errstate(over="ignore"):      # the launcher packs a C float: out of range becomes inf
            return _scalar(np.array([value], dtype=np.float32), tl.float32)
    if isinstance(value, tuple):
        items = [kernel_arg(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    return _ti._implicit_cvt(value)


def _scalar(data, dtype):
    return tl.tensor(_TH(data, dtype), dtype)


def install(scope, builder, numerics: str = "interpreter", rec=None, num_warps: int = 4) -> None:
    _quiet_numpy(scope)
    _wrapping_constants(scope, builder)
    _bf16_constants(scope, builder)
    if numerics == "compiled":      # before lowp: its bf16 widening wraps the reordering
        reduceorder.install(scope, rec)
    lowp.install(scope, builder)
    compiledops.install(scope, builder)
    libdevice.install(scope, builder)
    if numerics == "compiled":
        ascompiled.install(scope, builder, num_warps)      # the dot's instruction (wgmma or mma.sync) needs it
        compiledops.install_compiled(scope, builder)
    inlineasm.install(scope, builder, rec)


def _quiet_numpy(scope) -> None:
    # numpy's error state is per thread (a context variable), like the launch itself
    old = np.seterr(all="ignore")
    scope.on_restore(lambda: np.seterr(**old))


def _wrapping_constants(scope, builder) -> None:
    for name in _INT_CONSTANTS:
        method = f"get_{name}"
        if hasattr(builder, method):
            scope.set_attr(builder, method, _constant(np.dtype(name), inner_method(builder, method)))


def _bf16_constants(scope, builder) -> None:
    """A bfloat16 constant (``x * scale`` with ``x`` bf16 and ``scale: tl.constexpr`` a float): Triton 3.6's
    builder has no ``get_bf16``; 3.9's rounds the fp32 constant, as compiled code does."""
    if not hasattr(builder, "get_bf16"):
        scope.set_attr(builder, "get_bf16", lambda value: builder.create_fp_trunc(builder.get_fp32(value),
                                                                                   tl.bfloat16))


def _constant(np_dtype, inner):
    bits = np_dtype.itemsize * 8
    signed = np_dtype.kind == "i"

    def get(value):
        v = int(value) & ((1 << bits) - 1)      # two's complement wrap, as an MLIR constant of that width
        if signed and v >= 1 << (bits - 1):
            v -= 1 << bits
        return inner(v)
    return get
