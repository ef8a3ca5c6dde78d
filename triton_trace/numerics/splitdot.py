"""fp32 ``tl.dot`` at ``input_precision`` "tf32x3", "bf16x3" and "bf16x6", as the compiled kernel splits it.

The NVIDIA backend (its F32DotTC pass) rewrites such a dot into several tensor-core dots of narrower parts
of each operand. Read from the TTGIR Triton 3.6 and 3.9 emit for sm_90 (tests/record/test_splitdot.py
compiles it on the CPU and checks this order):

- bf16: a part is the operand rounded to bf16 (``arith.truncf``: nearest-even), the next part the same of
  the fp32 remainder ``x - part``; tf32x3: ``hi = cvt.rna.tf32.f32(x)`` (nearest, ties away) and
  ``lo = x - hi`` unrounded;
- the dots run low-order products first, each accumulating into the last, starting from zeros:
  tf32x3 ``lo*hi, hi*lo``; bf16x3 ``mid*hi, hi*mid``; bf16x6 ``mid*mid, lo*hi, hi*lo, mid*hi, hi*mid``;
- a NaN in that sum becomes 0 (an ``inf - inf`` among the small products must not poison the result), then
  ``hi*hi`` accumulates into it, and the dot's own accumulator is added last (``arith.addf``).

Products of bf16 parts are exact in fp32; tf32 parts go through the TF32 path, which drops each input's
low 13 bits (``compiled.tf32_truncated``). Each partial dot is ``matmul(a part, b part, acc)``: a float32
matmul unless the caller passes the tensor cores' own sum (numerics/tensorcore.py, as record/gpu/ascompiled.py
does under ``numerics="compiled"``).
"""
from __future__ import annotations

import numpy as np

from . import compiled
from .rounding import bf16_to_f32, f32_to_bf16

SPLIT = ("tf32x3", "bf16x3", "bf16x6")
# (parts per operand, the products before the NaN fix-up as (a part, b part); 0 = hi, 1 = mid/lo, 2 = lo)
_ORDER = {"tf32x3": (2, ((1, 0), (0, 1))),
          "bf16x3": (2, ((1, 0), (0, 1))),
          "bf16x6": (3, ((1, 1), (2, 0), (0, 2), (1, 0), (0, 1)))}


def tf32_rna(x) -> np.ndarray:
    """``cvt.rna.tf32.f32``: fp32 rounded to 10 mantissa bits, ties away from zero; NaN and Inf kept."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    with np.errstate(over="ignore"):
        r = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return np.where(finite, r, bits).view(np.float32)


def _bf16(x) -> np.ndarray:
    return bf16_to_f32(f32_to_bf16(x))


def parts(x, precision: str) -> list:
    """The operand's parts, high first, each as float32 values."""
    x = np.asarray(x, dtype=np.float32)
    if precision == "tf32x3":
        # hi = cvt.rna(x), lo = x - hi as it is; the TF32 path reads both with the low 13 bits dropped
        hi = tf32_rna(x)
        with np.errstate(all="ignore"):
            lo = (x - hi).astype(np.float32)
        return [compiled.tf32_truncated(hi), compiled.tf32_truncated(lo)]
    out, rest = [], x
    with np.errstate(all="ignore"):
        for i in range(_ORDER[precision][0]):
            p = _bf16(rest).astype(np.float32)
            out.append(p)
            rest = (rest - p).astype(np.float32)
    return out


def _matmul(a, b, acc) -> np.ndarray:
    with np.errstate(all="ignore"):
        return (np.matmul(a, b, dtype=np.float32) + acc).astype(np.float32)


def split_dot(a, b, c, precision: str, matmul=None) -> np.ndarray:
    """``tl.dot(a, b, c, input_precision=precision)`` for fp32 ``a`` [.., M, K], ``b`` [.., K, N] and
    accumulator ``c`` [.., M, N] (a leading program axis broadcasts), as the compiled kernel computes it;
    ``matmul(x, y, acc)`` computes one partial dot of the parts (default: in float32)."""
    matmul = matmul or _matmul
    pa, pb = parts(a, precision), parts(b, precision)
    shape = np.broadcast_shapes(np.shape(a)[:-1] + np.shape(b)[-1:], np.shape(c))
    acc = np.zeros(shape, dtype=np.float32)
    for i, j in _ORDER[precision][1]:
        acc = matmul(pa[i], pb[j], acc)
    acc = np.where(np.isnan(acc), np.float32(0), acc)
    acc = matmul(pa[0], pb[0], acc)
    with np.errstate(all="ignore"):
        return (acc + np.asarray(c, dtype=np.float32)).astype(np.float32)
