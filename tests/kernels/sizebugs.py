"""Kernels whose bugs appear only at some sizes or layouts, each with its correct twin, for the shape
fuzzer's tests (tests/cli/test_fuzzing.py): a missing mask that matters only when n % BLOCK != 0, a row stride
assumed to be the row length, and an int32 index that overflows only for large n."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def scale_unmasked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * 2)          # no mask: past n when n % BLOCK != 0


@triton.jit
def scale_masked(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=m) * 2, mask=m)


def run_scale(kernel, case, block=64):
    x = case.make((case["n"],))
    y = torch.empty(case["n"], dtype=x.dtype)
    kernel[(triton.cdiv(case["n"], block),)](x, y, case["n"], BLOCK=block)
    return y


def scale_reference(case):
    return case.make((case["n"],)) * 2


@triton.jit
def rows_contiguous_only(x_ptr, y_ptr, N, stride_x, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(x_ptr + r * N + cols, mask=m)                 # assumes the row stride is N
    tl.store(y_ptr + r * N + cols, x + 1, mask=m)


@triton.jit
def rows_strided(x_ptr, y_ptr, N, stride_x, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < N
    x = tl.load(x_ptr + r * stride_x + cols, mask=m)
    tl.store(y_ptr + r * N + cols, x + 1, mask=m)


def run_rows(kernel, case):
    x = case.make((case["m"], case["n"]))
    y = torch.empty(case["m"], case["n"], dtype=x.dtype)
    if x.stride(1) != 1:          # a transposed input: the kernel reads rows of unit stride
        x = x.contiguous()
    kernel[(case["m"],)](x, y, case["n"], x.stride(0), BLOCK=triton.next_power_of_2(case["n"]))
    return y


def rows_reference(case):
    return case.make((case["m"], case["n"])) + 1


@triton.jit
def square_index_i32(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    sq = offs * offs                                          # int32: wraps once offs >= 46341
    tl.store(y_ptr + offs, tl.load(x_ptr + sq % n, mask=m), mask=m)


@triton.jit
def square_index_i64(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    o = offs.to(tl.int64)
    sq = o * o
    tl.store(y_ptr + offs, tl.load(x_ptr + sq % n, mask=m), mask=m)


def run_square(kernel, case, block=1024):
    x = case.make((case["n"],))
    y = torch.empty(case["n"], dtype=x.dtype)
    kernel[(triton.cdiv(case["n"], block),)](x, y, case["n"], BLOCK=block)
    return y


def square_reference(case):
    x = case.make((case["n"],))
    i = torch.arange(case["n"], dtype=torch.int64)
    return x[(i * i) % case["n"]]
