"""``ex2.approx`` (the special-function unit's MUFU.EX2) bit for bit, and fp32 ``tl.exp``/``tl.exp2`` as an
sm_90 kernel computes them.

Measured on an H100 (``gpu_2026-12-07b/tables/``: every fp32 input of [1, 2), [0.5, 1) and [-1, -0.5)): the
unit reads its input as a fixed-point number with 23 fraction bits, the magnitude truncated, and a negative
one in one's complement (the bits of ``|x|`` inverted: ``-|x| - 2^-23``). Its integer part ``n`` scales, its
fraction ``F * 2^-23`` indexes one function ``T``: ``ex2(x) = 2^n * T(F)``. So the results over [1, 2), where
``n = 1`` and every ``F`` occurs once, are the whole table (``mufu_tables.npz`` "ex2": the GPU's result minus
the correctly rounded one, in ulps), and the two other binades are held out: [0.5, 1) (24 fraction bits,
truncated to 23) and [-1, -0.5) (one's complement) follow from it for all 16,777,216 inputs
(tests/record/test_ex2_gpu_bits.py). MUFU flushes: a subnormal input reads as zero, a result below 2^-126
is a zero.

The PTX forms, as ptxas emits them for sm_90 (``cuobjdump -sass`` of Triton 3.6's kernels):
``ex2.approx.ftz.f32`` (``tl.exp2``) is MUFU.EX2 alone; ``ex2.approx.f32`` (``tl.exp``, after ``mul.f32`` by
log2(e) = 0x3FB8AA3B) guards small results: ``x < -126``: ``MUFU.EX2(x * 0.5)`` squared by a plain FMUL
(subnormal results kept).
"""
from __future__ import annotations

import numpy as np

from .mufu import offsets

_U32 = np.uint32
_NAN = _U32(0x7FFFFFFF)
LOG2E = np.float32(np.uint32(0x3FB8AA3B).view(np.float32))
_FRAC = 1 << 23


def _mufu_ex2(x) -> np.ndarray:
    """MUFU.EX2: ``ex2.approx.ftz.f32``."""
    x = np.asarray(x, dtype=np.float32)
    shape, x = x.shape, np.atleast_1d(x)
    with np.errstate(all="ignore"):
        flushed = np.where(np.abs(x) < np.float32(2.0 ** -126), np.float32(0), x)
        big = np.abs(flushed) >= 256                               # past any finite result: inf or 0
        mag = np.where(big, 0, np.abs(flushed)).astype(np.float64)
        fixed = np.floor(mag * _FRAC).astype(np.int64)             # 23 fraction bits, truncated
        neg = flushed < 0
        fixed = np.where(neg, -fixed - 1, fixed)                   # one's complement
        n, frac = fixed >> 23, fixed & (_FRAC - 1)
        rep = (np.int64(0x3F800000) + frac).astype(np.uint32).view(np.float32)     # 1 + F * 2^-23
        cr = np.exp2(rep.astype(np.float64)).astype(np.float32).view(_U32).astype(np.int64)
        t = cr + offsets("ex2", frac)                              # the GPU's 2^(1 + F 2^-23), in [2, 4]
        r = t + ((n - 1) << 23)                                    # times 2^(n - 1): the exponent field
        r = np.where(r < (1 << 23), 0, np.where(r >= 0x7F800000, 0x7F800000, r))
        r = np.where(big, np.where(neg, 0, 0x7F800000), r)
        out = r.astype(_U32)
    return np.where(np.isnan(x), _NAN, out).astype(_U32).view(np.float32).reshape(shape)


def ex2_approx(x, ftz: bool = False) -> np.ndarray:
    """``ex2.approx[.ftz].f32``: MUFU.EX2, with the non-ftz form's guard for results below 2^-126."""
    x = np.asarray(x, dtype=np.float32)
    if ftz:
        return _mufu_ex2(x)
    with np.errstate(all="ignore"):
        small = x < np.float32(-126)
        half = _mufu_ex2(np.where(small, x * np.float32(0.5), x))
        return np.where(small, half * half, half).astype(np.float32)


def exp_approx(x) -> np.ndarray:
    """fp32 ``tl.exp``: ``mul.f32`` by log2(e), then ``ex2.approx.f32``."""
    with np.errstate(all="ignore"):
        return ex2_approx(np.asarray(x, dtype=np.float32) * LOG2E, ftz=False)
