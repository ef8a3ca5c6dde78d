"""Kernels launched in different ways: autotuned, heuristics, through torch.library.triton_op, with a nested
@triton.jit helper, on a 3-D grid, and with loop bounds loaded at run time."""
from __future__ import annotations

import itertools

import torch
import triton
import triton.language as tl

from .tutorials import _example, _plain


# ------------------------------------------------------------------------------------------------------
# autotune and heuristics
# ------------------------------------------------------------------------------------------------------
scale_kernel = _plain(_example("autotune").scale_kernel)      # the example's kernel, one copy of it


AUTOTUNE_CONFIGS = [triton.Config({"BLOCK": 32}, num_warps=1), triton.Config({"BLOCK": 64}, num_warps=2)]


def make_autotuned():
    return triton.autotune(configs=AUTOTUNE_CONFIGS, key=["n"])(triton.jit(scale_kernel))


def scale(x, alpha, kernel=None):
    """out = alpha * x; the grid is a lambda because the autotuner picks BLOCK."""
    kernel = kernel or make_autotuned()
    out = torch.empty_like(x)
    n = x.numel()
    kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](x, out, n, alpha)
    return out


def even_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        x = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, x * x)
    else:
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * x, mask=mask)


def make_heuristics():
    return triton.heuristics({"EVEN": lambda args: args["n"] % args["BLOCK"] == 0})(triton.jit(even_kernel))


def square(x, kernel=None, block=32):
    kernel = kernel or make_heuristics()
    out = torch.empty_like(x)
    n = x.numel()
    kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
    return out


# ------------------------------------------------------------------------------------------------------
# torch.library.triton_op + wrap_triton, called eagerly
# ------------------------------------------------------------------------------------------------------
_OP_IDS = itertools.count()


def make_triton_op_add(kernel):
    """Register a fresh custom op ``triton_trace_tests::add_<n>`` that launches ``kernel`` (an add kernel)."""
    from torch.library import triton_op, wrap_triton
    name = f"triton_trace_tests::add_{next(_OP_IDS)}"

    @triton_op(name, mutates_args={})
    def op(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        wrap_triton(kernel)[(triton.cdiv(n, 64),)](x, y, out, n, BLOCK=64)
        return out

    return op


# ------------------------------------------------------------------------------------------------------
# nested @triton.jit helper, 3-D grid, loop with runtime bounds
# ------------------------------------------------------------------------------------------------------
@triton.jit
def _poly(x, a, b):
    return x * x * a + b


def nested_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, _poly(x, 2.0, 1.0), mask=mask)


def make_nested():
    return triton.jit(nested_kernel)


def poly(x, kernel=None, block=32):
    """out = 2 x^2 + 1 through a nested @triton.jit helper."""
    kernel = kernel or make_nested()
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
    return out


def grid3d_kernel(x_ptr, y_ptr, out_ptr, M, N, stride_b, stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_b = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_n = tl.program_id(2)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = pid_b * stride_b + rm[:, None] * stride_m + rn[None, :]
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x - y, mask=mask)


def make_grid3d():
    return triton.jit(grid3d_kernel)


def sub3d(x, y, kernel=None, block_m=4, block_n=8):
    """out = x - y for contiguous 3-D tensors, one program per (batch, row block, column block)."""
    kernel = kernel or make_grid3d()
    B, M, N = x.shape
    out = torch.empty_like(x)
    kernel[(B, triton.cdiv(M, block_m), triton.cdiv(N, block_n))](
        x, y, out, M, N, x.stride(0), x.stride(1), BLOCK_M=block_m, BLOCK_N=block_n)
    return out


def segment_sum_kernel(x_ptr, starts_ptr, out_ptr, BLOCK: tl.constexpr):
    seg = tl.program_id(0)
    start = tl.load(starts_ptr + seg)
    end = tl.load(starts_ptr + seg + 1)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(start, end, BLOCK):
        offs = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offs, mask=offs < end, other=0.)
    tl.store(out_ptr + seg, tl.sum(acc, axis=0))


def make_segment_sum():
    return triton.jit(segment_sum_kernel)


def segment_sum(x, starts, kernel=None, block=8):
    """out[i] = x[starts[i]:starts[i+1]].sum(); the loop bounds are loaded at run time."""
    kernel = kernel or make_segment_sum()
    out = torch.empty(len(starts) - 1, dtype=torch.float32, device=x.device)
    kernel[(len(starts) - 1,)](x, starts, out, BLOCK=block)
    return out
