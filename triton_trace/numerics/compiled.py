"""Arithmetic as the compiled kernel performs it (``numerics="compiled"``), where that differs from the
correctly rounded numpy the interpreter runs, and is deterministic.

What Triton 3.6 emits for sm_90 (read from its PTX; docs/fidelity.md lists the
launches each one explains):

- ``a * b + c`` on fp32 (and fp64) becomes ``fma.rn`` - one rounding instead of two. Triton compiles with
  ``enable_fp_fusion`` on, and LLVM's NVPTX backend contracts aggressively: an fadd/fsub whose operand is
  an fmul is fused even when the product has other uses. Where both operands are products
  (``a * b + c * d``) LLVM fuses the one with fewer uses, the left one on a tie. ``fma_f32`` /
  ``fma_f64`` are those single-rounded results; ``mul_add`` and ``mul_sub`` spell the fused forms.
- ``tl.dot`` of fp32 blocks at ``input_precision="tf32"`` passes the fp32 registers to ``wgmma``/``mma``
  ``.tf32``, which drops each input's low 13 mantissa bits (``tf32_truncated``).
- ``x / y`` and ``tl.fdiv`` on fp32 become ``div.full.f32`` (at most 2 ulp from the quotient),
  ``tl.exp``/``tl.exp2`` ``ex2.approx.f32``, ``tl.sqrt`` ``sqrt.approx.ftz.f32``, ``tl.rsqrt``
  ``rsqrt.approx.ftz.f32``: hardware approximations (the MUFU unit) whose bits NVIDIA does not specify;
  ``benchmarks/fidelity/record_intrinsics.py`` records them on a GPU. Until an emulation matches those
  records bit for bit they stay correctly rounded here, and the comparison's table counts them apart.

The functions take and return numpy arrays of the kernel's dtype and broadcast like numpy, so they run on
a block with a leading program axis as on one program's block.
"""
from __future__ import annotations

import numpy as np

from .rounding import fma64, round_to, two_sum


def fma_f32(a, b, c) -> np.ndarray:
    """fp32 ``fma.rn.f32``: a * b + c rounded once to nearest-even. The product of two fp32 values is exact
    in fp64 (48 bits of 53), its sum with c is carried exactly as a float64 pair, then rounded once."""
    a, b, c = (np.asarray(v, dtype=np.float32) for v in (a, b, c))
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        s, e = two_sum(p, c.astype(np.float64))
        r = round_to(s, e, np.float32, "rn")
        # Inf and NaN operands, and an fp64 sum that overflowed: IEEE's answer is the plain expression's
        special = ~np.isfinite(p) | ~np.isfinite(c) | ~np.isfinite(s)
        plain = (p + c.astype(np.float64)).astype(np.float32)
    return np.where(special, plain, r).astype(np.float32)


def fma_f64(a, b, c) -> np.ndarray:
    """fp64 ``fma.rn.f64``, single-rounded (rounding.fma64: exact product and sum, round to odd)."""
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    return np.asarray(fma64(a, b, c)[0], dtype=np.float64)


def fma(a, b, c) -> np.ndarray:
    """``fma.rn`` in the operands' float type (fp32 or fp64)."""
    if np.result_type(a, b, c) == np.float64:
        return fma_f64(a, b, c)
    return fma_f32(a, b, c)


def mul_add(a, b, c) -> np.ndarray:
    """``a * b + c`` as the contracted kernel computes it."""
    return fma(a, b, c)


def mul_sub(a, b, c, product_first: bool = True) -> np.ndarray:
    """``a * b - c`` (``product_first``) or ``c - a * b``, contracted: fma(a, b, -c) or fma(-a, b, c)."""
    return fma(a, b, -np.asarray(c)) if product_first else fma(-np.asarray(a), b, c)


def tf32_truncated(x) -> np.ndarray:
    """fp32 values as a TF32 tensor-core operand reads them: the low 13 mantissa bits dropped (toward zero;
    "wgmma.mma_async operation involving type .tf32 will truncate lower 13 bits", PTX ISA). NaN and Inf are
    left as they are (a NaN whose payload lies only in those bits stays NaN)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    finite = (bits & np.uint32(0x7F800000)) != np.uint32(0x7F800000)
    return np.where(finite, bits & np.uint32(0xFFFFE000), bits).view(np.float32)
