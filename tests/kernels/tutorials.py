"""Triton tutorial kernels (vector add, fused softmax, layer norm, grouped matmul) and a None-argument kernel."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


# ------------------------------------------------------------------------------------------------------
# vector add
# ------------------------------------------------------------------------------------------------------
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


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
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, num / den, mask=mask)


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
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        tl.store(Y + cols, x_hat * w + b, mask=mask)


def layer_norm_bwd_dx_kernel(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                             GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = dy.to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


def layer_norm_bwd_dwdb_kernel(DW, DB, FINAL_DW, FINAL_DB, M, N,
                               BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.)
        db += tl.load(DB + offs, mask=mask, other=0.)
    tl.store(FINAL_DW + cols, tl.sum(dw, axis=0), mask=cols < N)
    tl.store(FINAL_DB + cols, tl.sum(db, axis=0), mask=cols < N)


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
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_pid_in_group = GROUP_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.)
        acc = tl.dot(a, b, acc, input_precision="ieee")
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


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
