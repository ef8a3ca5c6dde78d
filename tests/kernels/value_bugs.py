"""Kernels with value bugs, each beside its corrected twin, for tests/record/test_value_bugs.py: a softmax
without the max subtraction, a layer norm without eps, an fp16 store of a large fp32 accumulator
(``sum_of_squares``: a bug only when ``out`` is float16), an int32 index that wraps, a float-to-int conversion
out of range. The line where the bad value is made is marked ``# BUG``."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def softmax_no_max(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    num = tl.exp(x)  # BUG
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def softmax(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    num = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=cols < n_cols)


@triton.jit
def layer_norm_no_eps(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols)  # BUG
    tl.store(y_ptr + row * n_cols + cols, d * rstd, mask=mask)


@triton.jit
def layer_norm(x_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    tl.store(y_ptr + row * n_cols + cols, d * rstd, mask=mask)


@triton.jit
def sum_of_squares(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        acc += x * x
    tl.store(out_ptr + row, tl.sum(acc, axis=0))  # BUG


@triton.jit
def mean_of_squares_fp16(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        acc += x * x
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / n_cols)


@triton.jit
def hashed_gather(x_ptr, out_ptr, n, MULT: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    j = (i * MULT) % n  # BUG
    tl.store(out_ptr + i, tl.load(x_ptr + j, mask=i < n), mask=i < n)


@triton.jit
def hashed_gather_int64(x_ptr, out_ptr, n, MULT: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    j = (i.to(tl.int64) * MULT) % n
    tl.store(out_ptr + i, tl.load(x_ptr + j, mask=i < n), mask=i < n)


@triton.jit
def quantize(x_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    q = (tl.load(x_ptr + i, mask=i < n) * scale).to(tl.int32)  # BUG
    tl.store(out_ptr + i, q, mask=i < n)


@triton.jit
def row_sum_wide_block(x_ptr, out_ptr, n_cols, stride_row, stride_col, BLOCK: tl.constexpr):
    """A row sum whose BLOCK is 4x the row (wasted lanes), read along a transposed view (strided lanes)."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride_row + cols * stride_col, mask=cols < n_cols, other=0.0)  # HINT
    tl.store(out_ptr + row, tl.sum(x, axis=0))
