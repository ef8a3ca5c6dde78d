"""Kernels for tests/record/test_new_checks.py, each bug beside its fixed twin: an integer division by a zero
the mask does not cover, ``INT_MIN // -1``, a float division by zero, two lanes of one store writing one
address with different values, int32 offsets that pass 2^31 at a large size, an int32 product that wraps in
some programs (every lane) or some lanes. The line of each bug is marked
``# BUG``. (The looped accumulator those tests also run is value_bugs.sum_of_squares.)"""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def bucket(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    w = tl.load(w_ptr + offs, mask=m, other=0)
    tl.store(out_ptr + offs, x // w, mask=m)  # BUG


@triton.jit
def bucket_guarded(x_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0)
    w = tl.load(w_ptr + offs, mask=m, other=1)
    tl.store(out_ptr + offs, tl.where(w != 0, x // tl.where(w != 0, w, 1), 0), mask=m)


@triton.jit
def wrap_gather(x_ptr, out_ptr, n, period, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    j = offs % period  # BUG
    x = tl.load(x_ptr + j, mask=m)
    tl.store(out_ptr + offs, x, mask=m)


@triton.jit
def wrap_gather_guarded(x_ptr, out_ptr, n, period, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    j = offs % tl.maximum(period, 1)
    x = tl.load(x_ptr + j, mask=m)
    tl.store(out_ptr + offs, x, mask=m)


@triton.jit
def float_ratio(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=1.0)
    y = tl.load(y_ptr + offs, mask=m, other=1.0)
    tl.store(out_ptr + offs, x / y, mask=m)  # BUG


@triton.jit
def row_sums_to_slots(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # every row of a 2-row tile stores its sum to the same slot: one address, two values
    row = tl.program_id(0) * 2 + tl.arange(0, 2)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row[:, None] * n_cols + cols[None, :], mask=cols[None, :] < n_cols, other=0.0)
    s = tl.sum(x, axis=1)
    tl.store(out_ptr + tl.program_id(0) + row * 0, s)  # BUG


@triton.jit
def row_sums_to_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0) * 2 + tl.arange(0, 2)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row[:, None] * n_cols + cols[None, :], mask=cols[None, :] < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(x, axis=1))


@triton.jit
def broadcast_row_max(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # a value broadcast along a tile, stored to one slot by every lane: one address, one value (fine)
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=-float("inf"))
    mx = tl.max(x, axis=0) + tl.zeros([BLOCK], tl.float32)
    tl.store(out_ptr + row + cols * 0, mx)


@triton.jit
def add_matrix(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = rm[:, None] * N + rn[None, :]          # int32: wraps once M * N passes 2^31
    m = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


@triton.jit
def add_matrix_int64(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = rm[:, None] * N + rn[None, :]
    m = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) + 1.0, mask=m)


@triton.jit
def exchange_into_one_slot(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_xchg(out_ptr + offs * 0, tl.load(x_ptr + offs))  # BUG


@triton.jit
def add_into_one_slot(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + offs * 0, tl.load(x_ptr + offs))


@triton.jit
def copy_strided_rows(x_ptr, out_ptr, stride, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < N)        # int32: row * stride wraps at large sizes
    tl.store(out_ptr + row * N + cols, x, mask=cols < N)


@triton.jit
def tile_matmul(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b))  # BUG


@triton.jit
def tile_matmul_ieee(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    r = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + r[:, None] * BLOCK + r[None, :])
    b = tl.load(b_ptr + r[:, None] * BLOCK + r[None, :])
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], tl.dot(a, b, input_precision="ieee"))


@triton.jit
def variance_padded(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = x - mean
    tl.store(out_ptr + row, tl.sum(d * d, axis=0) / n_cols)  # BUG


@triton.jit
def variance_masked(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(cols < n_cols, x - mean, 0.0)
    tl.store(out_ptr + row, tl.sum(d * d, axis=0) / n_cols)


@triton.jit
def max_of_shifted(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.max(x - 1.0, axis=0))  # BUG


@triton.jit
def scaled_rows(k_ptr, out_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    # one int32 base per program: ``k * STRIDE`` wraps in every lane of a program whose k is large
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    base = tl.load(k_ptr + pid) * STRIDE  # BUG
    tl.store(out_ptr + offs, base + tl.arange(0, BLOCK), mask=offs < n)


@triton.jit
def scaled_lanes(k_ptr, out_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    # ``k * STRIDE`` per lane: wraps in the lanes whose k is large, a few per program
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(k_ptr + offs, mask=m, other=0) * STRIDE, mask=m)  # BUG


@triton.jit
def scaled_lanes_int64(k_ptr, out_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(k_ptr + offs, mask=m, other=0).to(tl.int64) * STRIDE, mask=m)


@triton.jit
def doubled_in_place(k_ptr, x_ptr, n, MULT: tl.constexpr, BLOCK: tl.constexpr):
    # one line loads and stores through the same wrapped index: the recorder adds both ops' lanes up
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    j = (tl.load(k_ptr + offs) * MULT) & (n - 1)  # BUG
    tl.store(x_ptr + j, tl.load(x_ptr + j) * 2.0)
