"""Kernels for the storage and program-tiles views (tests/view/test_web_layouts.py,
tests/view/test_browser_layouts.py): a strided 2-D read that takes any row and column stride (a padded row
stride, a transposed or sliced view, an expanded dim), and a tiled matmul on a 2-D grid whose K loop makes
``K // BLOCK_K`` trips. The tests compute what each program touches from these parameters, never from the tool.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def strided_read(x_ptr, out_ptr, M, N, sxm, sxn, BM: tl.constexpr, BN: tl.constexpr):
    """out[i, j] = x[i, j] * 2 for i < M, j < N, through x's own strides; out is contiguous (M, N)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], x * 2, mask=mask)


def read_rows(kernel, x, rows=None, block=8):
    """Launch ``kernel`` (``strided_read``, traced) over the first ``rows`` rows of the 2-D ``x`` (all of them
    by default); returns the output."""
    m, n = (rows if rows is not None else x.shape[0]), x.shape[1]
    out = torch.empty(m, n)
    kernel[(triton.cdiv(m, block), triton.cdiv(n, block))](x, out, m, n, x.stride(0), x.stride(1), BM=block, BN=block)
    return out


@triton.jit
def tiled_matmul(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C = A @ B, one BLOCK_M x BLOCK_N tile of C per program (pid_m = program_id(0), pid_n = program_id(1)),
    A's row panel and B's column panel read BLOCK_K columns / rows per trip of the K loop."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc)


def matmul(kernel, a, b, block=32, block_k=32):
    """Launch ``kernel`` (``tiled_matmul``, traced) on a (cdiv(M, block), cdiv(N, block)) grid; returns C."""
    (m, k), (_, n) = a.shape, b.shape
    c = torch.empty(m, n)
    kernel[(triton.cdiv(m, block), triton.cdiv(n, block))](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
        BLOCK_M=block, BLOCK_N=block, BLOCK_K=block_k)
    return c
