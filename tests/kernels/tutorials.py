"""Triton tutorial kernels (vector add, fused softmax, layer norm, grouped matmul) and a None-argument kernel.

The tutorial kernels are the examples' own (examples/*.py), taken as the plain functions under their
decorators: the examples show them to users, the tests check them, and there is one copy of each.
"""
from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import torch
import triton
import triton.language as tl

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str):
    """examples/<name>.py as a module (its main() does not run)."""
    spec = importlib.util.spec_from_file_location(f"triton_trace_example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _plain(kernel):
    """The Python function under a kernel's @triton_trace.trace / @triton.autotune / @triton.jit."""
    while not isinstance(kernel, types.FunctionType):
        kernel = kernel.fn
    return kernel


_vector_add, _softmax, _layer_norm, _matmul = (_example(n) for n in ("vector_add", "fused_softmax", "layer_norm",
                                                                      "matmul_grouped"))
add_kernel = _plain(_vector_add.add_kernel)
softmax_kernel = _plain(_softmax.softmax_kernel)
layer_norm_fwd_kernel = _plain(_layer_norm.layer_norm_fwd)
layer_norm_bwd_dx_kernel = _plain(_layer_norm.layer_norm_bwd_dx)
layer_norm_bwd_dwdb_kernel = _plain(_layer_norm.layer_norm_bwd_dwdb)
matmul_kernel = _plain(_matmul.matmul_kernel)


# ------------------------------------------------------------------------------------------------------
# vector add
# ------------------------------------------------------------------------------------------------------
def make_add():
    return triton.jit(add_kernel)


def bias_kernel(x_ptr, bias_ptr, out_ptr, n, scale, BLOCK: tl.constexpr):
    """out = x * scale (+ bias when a bias tensor is passed, None otherwise)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask) * scale
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x, mask=mask)


def make_bias():
    return triton.jit(bias_kernel)


def scale_bias(x, bias=None, scale=2.0, kernel=None, block=64):
    kernel = kernel or make_bias()
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, bias, out, x.numel(), scale, BLOCK=block)
    return out


def add(x, y, kernel=None, block=128, lambda_grid=False):
    kernel = kernel or make_add()
    out = torch.empty_like(x)
    n = x.numel()
    grid = (lambda meta: (triton.cdiv(n, meta["BLOCK"]),)) if lambda_grid else (triton.cdiv(n, block),)
    kernel[grid](x, y, out, n, BLOCK=block)
    return out


# ------------------------------------------------------------------------------------------------------
# fused row softmax (tutorial 02), rows read through an explicit row stride
# ------------------------------------------------------------------------------------------------------
def make_softmax():
    return triton.jit(softmax_kernel)


def softmax(x, kernel=None):
    """Row softmax of a 2-D tensor whose rows are contiguous (x.stride(1) == 1) but may be padded."""
    kernel = kernel or make_softmax()
    rows, cols = x.shape
    out = torch.empty(rows, cols, dtype=x.dtype, device=x.device)
    kernel[(rows,)](out, x, x.stride(0), out.stride(0), cols, BLOCK=triton.next_power_of_2(cols))
    return out


# ------------------------------------------------------------------------------------------------------
# layer norm (tutorial 05): forward, backward dX with a lock per group, then the dW/dB reduction
# ------------------------------------------------------------------------------------------------------
def make_layer_norm_fwd():
    return triton.jit(layer_norm_fwd_kernel)


def make_layer_norm_bwd_dx():
    return triton.jit(layer_norm_bwd_dx_kernel)


def make_layer_norm_bwd_dwdb():
    return triton.jit(layer_norm_bwd_dwdb_kernel)


def layer_norm_fwd(x, w, b, eps=1e-5, kernel=None, block=32):
    """Returns (y, mean, rstd); rows must be contiguous (x.stride(1) == 1) and may be padded. ``block``
    smaller than the row makes the column loops iterate."""
    kernel = kernel or make_layer_norm_fwd()
    M, N = x.shape
    # the kernel walks X and Y with one row stride
    y = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    mean = torch.empty(M, dtype=torch.float32, device=x.device)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    kernel[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, eps, BLOCK_SIZE=block)
    return y, mean, rstd


def layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=4, dx_kernel=None, dwdb_kernel=None,
                   block_m=8, block_n=16):
    """Returns (dx, dw, db, partial_dw, partial_db, locks)."""
    dx_kernel = dx_kernel or make_layer_norm_bwd_dx()
    dwdb_kernel = dwdb_kernel or make_layer_norm_bwd_dwdb()
    M, N = x.shape
    locks = torch.zeros(2 * group_size_m, dtype=torch.int32, device=x.device)
    _dw = torch.zeros((group_size_m, N), dtype=w.dtype, device=x.device)
    _db = torch.zeros((group_size_m, N), dtype=w.dtype, device=x.device)
    dw = torch.empty((N,), dtype=w.dtype, device=x.device)
    db = torch.empty((N,), dtype=w.dtype, device=x.device)
    if dy.stride() != x.stride():
        raise ValueError("layer_norm_bwd walks X, DY and DX with one row stride; pass dy laid out like x")
    dx = torch.empty_strided(dy.shape, dy.stride(), dtype=dy.dtype, device=dy.device)
    dx_kernel[(M,)](dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), N,
                    GROUP_SIZE_M=group_size_m, BLOCK_SIZE_N=triton.next_power_of_2(N))
    dwdb_kernel[lambda meta: (triton.cdiv(N, meta["BLOCK_SIZE_N"]),)](
        _dw, _db, dw, db, group_size_m, N, BLOCK_SIZE_M=block_m, BLOCK_SIZE_N=block_n)
    return dx, dw, db, _dw, _db, locks


# ------------------------------------------------------------------------------------------------------
# blocked matmul with tl.dot and grouped program order (tutorial 03); GROUP_M=1 means no reordering
# ------------------------------------------------------------------------------------------------------
def make_matmul():
    return triton.jit(matmul_kernel)


def matmul(a, b, kernel=None, block_m=16, block_n=16, block_k=16, group_m=2):
    kernel = kernel or make_matmul()
    M, K = a.shape
    _, N = b.shape
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                 BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m)
    return c
