"""Kernels for access patterns: strided views on a 2-D grid, block pointers, tensor descriptors, atomics, scans."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


# ------------------------------------------------------------------------------------------------------
# 2-D grid transpose of a strided (non-contiguous) input view
# ------------------------------------------------------------------------------------------------------
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym, stride_yn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * stride_xm + rn[None, :] * stride_xn, mask=mask)
    tl.store(y_ptr + rn[None, :] * stride_ym + rm[:, None] * stride_yn, x, mask=mask)


def make_transpose():
    return triton.jit(transpose_kernel)


def transpose(x, kernel=None, block_m=8, block_n=16):
    """y = x.T as a new contiguous tensor; ``x`` may be any strided 2-D view."""
    kernel = kernel or make_transpose()
    M, N = x.shape
    y = torch.empty((N, M), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n))
    kernel[grid](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1), BLOCK_M=block_m, BLOCK_N=block_n)
    return y


# ------------------------------------------------------------------------------------------------------
# block pointers: y = 2 * x, walking each row band with tl.advance
# ------------------------------------------------------------------------------------------------------
def block_ptr_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_xn, stride_ym, stride_yn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    x_bp = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(stride_xm, stride_xn), offsets=(pid * BLOCK_M, 0),
                             block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    y_bp = tl.make_block_ptr(base=y_ptr, shape=(M, N), strides=(stride_ym, stride_yn), offsets=(pid * BLOCK_M, 0),
                             block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
    for _ in range(0, tl.cdiv(N, BLOCK_N)):
        x = tl.load(x_bp, boundary_check=(0, 1), padding_option="zero")
        tl.store(y_bp, x * 2, boundary_check=(0, 1))
        x_bp = tl.advance(x_bp, (0, BLOCK_N))
        y_bp = tl.advance(y_bp, (0, BLOCK_N))


def make_block_ptr():
    return triton.jit(block_ptr_kernel)


def block_ptr_scale(x, kernel=None, block_m=8, block_n=16):
    kernel = kernel or make_block_ptr()
    M, N = x.shape
    y = torch.empty((M, N), dtype=x.dtype, device=x.device)
    kernel[(triton.cdiv(M, block_m),)](x, y, M, N, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                       BLOCK_M=block_m, BLOCK_N=block_n)
    return y


# ------------------------------------------------------------------------------------------------------
# tensor descriptors: y = x + 1 through device-side descriptors
# ------------------------------------------------------------------------------------------------------
def tensor_desc_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    y_desc = tl.make_tensor_descriptor(y_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    x = x_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N])
    y_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], x + 1)


def make_tensor_desc():
    return triton.jit(tensor_desc_kernel)


def tensor_desc_add_one(x, kernel=None, block_m=8, block_n=16):
    """``x`` contiguous 2-D; its row length times the element size must be a multiple of 16 bytes."""
    kernel = kernel or make_tensor_desc()
    M, N = x.shape
    y = torch.empty_like(x)
    kernel[(triton.cdiv(M, block_m), triton.cdiv(N, block_n))](x, y, M, N, BLOCK_M=block_m, BLOCK_N=block_n)
    return y


def host_desc_kernel(x_desc, y_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    x = x_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N])
    y_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], x * 3)


def make_host_desc():
    return triton.jit(host_desc_kernel)


def host_desc_scale(x, kernel=None, block_m=8, block_n=16):
    """y = 3 * x through host-side ``TensorDescriptor`` arguments."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    kernel = kernel or make_host_desc()
    M, N = x.shape
    y = torch.empty_like(x)
    xd = TensorDescriptor.from_tensor(x, [block_m, block_n])
    yd = TensorDescriptor.from_tensor(y, [block_m, block_n])
    kernel[(triton.cdiv(M, block_m), triton.cdiv(N, block_n))](xd, yd, BLOCK_M=block_m, BLOCK_N=block_n)
    return y


# ------------------------------------------------------------------------------------------------------
# atomics (a histogram with running min / max / or) and a scan
# ------------------------------------------------------------------------------------------------------
def histogram_kernel(x_ptr, bins_ptr, stats_ptr, n, BLOCK: tl.constexpr):
    """bins[v] += 1 for every value v; stats = [max, min, bitwise or] of all values."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0)
    tl.atomic_add(bins_ptr + x, 1, mask=mask)
    zero = tl.zeros([BLOCK], dtype=tl.int32)
    tl.atomic_max(stats_ptr + zero, x, mask=mask)
    tl.atomic_min(stats_ptr + 1 + zero, x, mask=mask)
    tl.atomic_or(stats_ptr + 2 + zero, x, mask=mask)


def make_histogram():
    return triton.jit(histogram_kernel)


def histogram(x, nbins, kernel=None, block=32):
    """``x``: int32 values in [0, nbins). Returns (counts, [max, min, or])."""
    kernel = kernel or make_histogram()
    bins = torch.zeros(nbins, dtype=torch.int32, device=x.device)
    stats = torch.tensor([-(2 ** 31), 2 ** 31 - 1, 0], dtype=torch.int32, device=x.device)
    kernel[(triton.cdiv(x.numel(), block),)](x, bins, stats, x.numel(), BLOCK=block)
    return bins, stats


def cumsum_kernel(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.)
    tl.store(out_ptr + row * n_cols + cols, tl.cumsum(x, axis=0), mask=cols < n_cols)


def make_cumsum():
    return triton.jit(cumsum_kernel)


def cumsum(x, kernel=None):
    """Row-wise cumulative sum of a 2-D tensor with contiguous (possibly padded) rows."""
    kernel = kernel or make_cumsum()
    rows, cols = x.shape
    out = torch.empty(rows, cols, dtype=x.dtype, device=x.device)
    kernel[(rows,)](x, out, cols, x.stride(0), BLOCK=triton.next_power_of_2(cols))
    return out
