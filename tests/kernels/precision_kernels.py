"""Kernels for the float64 shadow (tests/record/test_shadow.py, tests/analysis/test_shadow_report.py): where
precision is lost, each line the tests look at marked at its end (``# ADD``, ``# LOG``, ...).

- ``log(1 + x)`` for tiny ``x``: the addition rounds ``x`` away next to 1, the log turns that rounding into the
  whole answer (``log1p`` is the fix);
- a variance as E[x^2] - E[x]^2 in float32: the subtraction of two nearly equal sums cancels;
- an fp16 accumulator over a long loop: every addition rounds a little, and it adds up;
- a product plus an offset of positive values: nothing to lose;
- a dot of a block with a transposed one, plus a broadcast bias: the shape ops and the dot in float64;
- ``exp(x - max(x))`` over a wide range: the tiny results are many of their own ulps off, and lose nothing
  next to the largest.
"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def naive_log1p(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    t = 1.0 + x  # ADD
    y = tl.log(t)  # LOG
    tl.store(y_ptr + offs, y, mask=m)  # STORE


@triton.jit
def variance(x_ptr, out_ptr, N: tl.constexpr):
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * N + tl.arange(0, N))
    mean = tl.sum(x, axis=0) / N  # MEAN
    ex2 = tl.sum(x * x, axis=0) / N  # EX2
    var = ex2 - mean * mean  # SUB
    tl.store(out_ptr + row, var)  # STORE


@triton.jit
def fp16_sum(x_ptr, out_ptr, K, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    width = tl.num_programs(0) * BLOCK
    acc = tl.zeros((BLOCK,), tl.float16)
    for k in range(0, K):
        acc += tl.load(x_ptr + k * width + offs)  # ADD
    tl.store(out_ptr + offs, acc)  # STORE


@triton.jit
def scale_shift(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(a_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs, mask=m)
    c = tl.load(c_ptr + offs, mask=m)
    y = a * b  # MUL
    z = y + c  # ADD
    tl.store(out_ptr + offs, z, mask=m)  # STORE


@triton.jit
def dot_bias(a_ptr, b_ptr, bias_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + rm[:, None] * K + rk[None, :])
    b = tl.load(b_ptr + rn[:, None] * K + rk[None, :])          # (N, K): used transposed
    bias = tl.load(bias_ptr + rn)
    acc = tl.dot(a, tl.trans(b)) + bias[None, :]  # DOT
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16))  # STORE


@triton.jit
def shifted_exp(x_ptr, y_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.exp(x - tl.max(x, axis=0))  # EXP
    tl.store(y_ptr + offs, y)  # STORE
