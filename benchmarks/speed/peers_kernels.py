"""The kernels of ``peers.py``, written for it: each case builds its inputs from a seed, launches its
kernel through whatever wrapper a tool puts around ``@triton.jit`` functions, and has a torch eager
version (the timing reference and the check) and a numpy version (the arithmetic as Triton's
interpreter does it: half of the benchmark's floor).

Imported by the children of ``peers.py`` in three virtual environments (Triton 3.6, 3.8 and 3.9), so it
uses only what all three have: ``triton``, ``triton.language``, ``torch`` and ``numpy``.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl


# ------------------------------------------------------------------------------------------------------
# kernels
# ------------------------------------------------------------------------------------------------------
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


@triton.jit
def ln_fwd_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, stride, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / N
    xc = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    tl.store(y_ptr + row * stride + cols, xc * rstd * w + b, mask=mask)
    tl.store(mean_ptr + row, mean)
    tl.store(rstd_ptr + row, rstd)


@triton.jit
def ln_bwd_dx_kernel(x_ptr, dy_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, pdw_ptr, pdb_ptr, stride, M, N,
                     ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """dx of ROWS rows, and this program's partial dw, db (one row of pdw/pdb per program: no locks)."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    dw = tl.zeros((BLOCK,), dtype=tl.float32)
    db = tl.zeros((BLOCK,), dtype=tl.float32)
    for i in range(0, ROWS):
        row = pid * ROWS + i
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + row * stride + cols, mask=mask, other=0.0)
        mean = tl.load(mean_ptr + row)
        rstd = tl.load(rstd_ptr + row)
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        wdy = w * dy
        c1 = tl.sum(xhat * wdy, axis=0) / N
        c2 = tl.sum(wdy, axis=0) / N
        tl.store(dx_ptr + row * stride + cols, (wdy - (xhat * c1 + c2)) * rstd, mask=mask)
        dw += dy * xhat
        db += dy
    tl.store(pdw_ptr + pid * N + cols, dw, mask=mask)
    tl.store(pdb_ptr + pid * N + cols, db, mask=mask)


@triton.jit
def ln_bwd_dwdb_kernel(pdw_ptr, pdb_ptr, dw_ptr, db_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)
    db = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for p0 in range(0, P, BLOCK_P):
        rows = p0 + tl.arange(0, BLOCK_P)
        m = (rows[:, None] < P) & (cols[None, :] < N)
        dw += tl.sum(tl.load(pdw_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0.0), axis=0)
        db += tl.sum(tl.load(pdb_ptr + rows[:, None] * N + cols[None, :], mask=m, other=0.0), axis=0)
    tl.store(dw_ptr + cols, dw, mask=cols < N)
    tl.store(db_ptr + cols, db, mask=cols < N)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    group = pid // (GROUP_M * num_pid_n)
    first_m = group * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % size_m)
    pid_n = (pid % (GROUP_M * num_pid_n)) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :], mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :], mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, sm_scale, stride_h, stride_s, S, D: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1) * stride_h
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :])
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
    hi = (start_m + 1) * BLOCK_M if CAUSAL else S
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(k_ptr + base + cols[None, :] * stride_s + offs_d[:, None])      # K^T tile (D, BLOCK_N)
        s = tl.dot(q, k) * sm_scale
        if CAUSAL:
            s = tl.where(offs_m[:, None] >= cols[None, :], s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + cols[:, None] * stride_s + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_new
    tl.store(o_ptr + base + offs_m[:, None] * stride_s + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


@triton.jit
def grouped_gemm_kernel(x_ptr, w_ptr, out_ptr, tile_group_ptr, tile_row_ptr, group_end_ptr, K, N,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """MoE-style grouped GEMM: rows of x sorted by group, out[rows of g] = x[rows of g] @ w[g]; each program
    one (row tile, column tile) of one group, its group and first row read from a tile table."""
    tile = tl.program_id(0)
    g = tl.load(tile_group_ptr + tile)
    row0 = tl.load(tile_row_ptr + tile)
    row_end = tl.load(group_end_ptr + g)
    rm = row0 + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        a = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=rm[:, None] < row_end, other=0.0)
        b = tl.load(w_ptr + g * K * N + kk[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=rm[:, None] < row_end)


# ------------------------------------------------------------------------------------------------------
# cases: name -> setup(size, seed) -> Case
# ------------------------------------------------------------------------------------------------------
class Case:
    """``run(wrap)`` launches the kernels (each passed through ``wrap`` once, before the clock) and returns a
    callable giving the outputs; ``eager()`` is torch's version (for fp16 kernels on fp32 copies of the inputs,
    made before the clock: torch's CPU fp16 matmul took over 5 s for 1024^3 here, no reference anyone would
    pick); ``numpy()`` the interpreter's arithmetic (fp16 ``tl.dot`` operands as fp32, as the interpreter does);
    ``check(out)`` the largest error against the fp32/fp64 reference and whether it is within tolerance."""

    def __init__(self, desc, make, eager, numpy_fn, reference, atol, rtol):
        self.desc, self.make, self.eager, self.numpy = desc, make, eager, numpy_fn
        self.reference, self.atol, self.rtol = reference, atol, rtol

    def check(self, out):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        refs = self.reference()
        refs = refs if isinstance(refs, (tuple, list)) else (refs,)
        worst, ok = 0.0, True
        for o, r in zip(outs, refs):
            o, r = o.double(), r.double()
            if not torch.isfinite(o).all():
                return float("nan"), False
            err = (o - r).abs()
            worst = max(worst, float(err.max()))
            ok = ok and bool((err <= self.atol + self.rtol * r.abs()).all())
        return worst, ok


def _add(size, seed):
    n = {"small": 1 << 16, "full": 1 << 24}[size]
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)

    def make(wrap):
        k = wrap(add_kernel)

        def run():
            out = torch.empty_like(x)
            k[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
            return out
        return run
    xn, yn = x.numpy(), y.numpy()
    return Case(f"vector add {n:,} fp32, BLOCK 1024", make, lambda: x + y, lambda: xn + yn,
                lambda: x + y, 0.0, 0.0)


def _softmax(size, seed):
    m, n = {"small": (256, 512), "full": (4096, 4096)}[size]
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(seed))

    def make(wrap):
        k = wrap(softmax_kernel)

        def run():
            out = torch.empty_like(x)
            k[(m,)](x, out, x.stride(0), n, BLOCK=triton.next_power_of_2(n))
            return out
        return run
    xn = x.numpy()

    def with_numpy():
        e = np.exp(xn - xn.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return Case(f"softmax {m}x{n} fp32, one row per program", make, lambda: torch.softmax(x, dim=1), with_numpy,
                lambda: torch.softmax(x.double(), dim=1), 1e-6, 1e-4)


def _ln_inputs(size, seed):
    m, n = {"small": (256, 512), "full": (4096, 1024)}[size]
    g = torch.Generator().manual_seed(seed)
    return m, n, torch.randn(m, n, generator=g), torch.randn(n, generator=g), torch.randn(n, generator=g), g


def _ln_fwd(size, seed):
    m, n, x, w, b, _ = _ln_inputs(size, seed)
    eps = 1e-5

    def make(wrap):
        k = wrap(ln_fwd_kernel)

        def run():
            y = torch.empty_like(x)
            mean, rstd = torch.empty(m), torch.empty(m)
            k[(m,)](x, w, b, y, mean, rstd, x.stride(0), n, eps, BLOCK=triton.next_power_of_2(n))
            return y
        return run
    xn, wn, bn = x.numpy(), w.numpy(), b.numpy()

    def with_numpy():
        xc = xn - xn.mean(axis=1, keepdims=True)
        return xc / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + eps) * wn + bn
    return Case(f"layer norm forward {m}x{n} fp32 (y, mean, rstd)", make,
                lambda: torch.nn.functional.layer_norm(x, (n,), w, b, eps), with_numpy,
                lambda: torch.nn.functional.layer_norm(x.double(), (n,), w.double(), b.double(), eps), 1e-4, 1e-4)


def _ln_bwd(size, seed):
    m, n, x, w, b, g = _ln_inputs(size, seed)
    eps = 1e-5
    dy = torch.randn(m, n, generator=g)
    mean = x.mean(dim=1)
    rstd = 1 / torch.sqrt(x.var(dim=1, unbiased=False) + eps)
    rows = 16                                   # rows per program of the dx kernel: m / 16 partial sums
    p = m // rows

    def make(wrap):
        kdx, kdw = wrap(ln_bwd_dx_kernel), wrap(ln_bwd_dwdb_kernel)

        def run():
            dx = torch.empty_like(x)
            pdw, pdb = torch.empty(p, n), torch.empty(p, n)
            dw, db = torch.empty(n), torch.empty(n)
            kdx[(p,)](x, dy, w, mean, rstd, dx, pdw, pdb, x.stride(0), m, n, ROWS=rows,
                      BLOCK=triton.next_power_of_2(n))
            kdw[(triton.cdiv(n, 128),)](pdw, pdb, dw, db, p, n, BLOCK_P=32, BLOCK_N=128)
            return dx, dw, db
        return run

    def eager():
        xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
        torch.nn.functional.layer_norm(xr, (n,), wr, br, eps).backward(dy)
        return xr.grad, wr.grad, br.grad

    def reference():
        xr, wr, br = (t.double().requires_grad_() for t in (x, w, b))
        torch.nn.functional.layer_norm(xr, (n,), wr, br, eps).backward(dy.double())
        return xr.grad, wr.grad, br.grad
    xn, wn, dyn, mn, rn = x.numpy(), w.numpy(), dy.numpy(), mean.numpy(), rstd.numpy()

    def with_numpy():
        xhat = (xn - mn[:, None]) * rn[:, None]
        wdy = wn * dyn
        c1 = (xhat * wdy).sum(axis=1, keepdims=True) / n
        c2 = wdy.sum(axis=1, keepdims=True) / n
        dx = (wdy - (xhat * c1 + c2)) * rn[:, None]
        return dx, (dyn * xhat).sum(axis=0), dyn.sum(axis=0)
    return Case(f"layer norm backward {m}x{n} fp32 (dx + partial dw/db, then their sum: 2 launches)", make,
                eager, with_numpy, reference, 1e-3, 1e-4)


def _matmul(size, seed):
    n = {"small": 128, "full": 1024}[size]
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(n, n, generator=g).half(), torch.randn(n, n, generator=g).half()

    def make(wrap):
        k = wrap(matmul_kernel)

        def run():
            c = torch.empty(n, n, dtype=torch.float16)
            k[(triton.cdiv(n, 64) * triton.cdiv(n, 64),)](a, b, c, n, n, n, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32,
                                                           GROUP_M=8)
            return c
        return run
    a32, b32 = a.float(), b.float()
    an, bn = a32.numpy(), b32.numpy()
    return Case(f"matmul {n}^3 fp16 (fp32 accumulation, fp16 out), 64x64x32 tiles, GROUP_M 8", make,
                lambda: a32 @ b32, lambda: (an @ bn).astype(np.float16),
                lambda: a.double() @ b.double(), 0.05, 2e-3)   # one fp16 rounding of the result


def _attention(causal):
    def setup(size, seed):
        h, s, d = {"small": (2, 256, 64), "full": (8, 2048, 64)}[size]
        g = torch.Generator().manual_seed(seed)
        q, k, v = (torch.randn(h, s, d, generator=g).half() for _ in range(3))
        scale = d ** -0.5

        def make(wrap):
            kern = wrap(attn_fwd_kernel)

            def run():
                o = torch.empty_like(q)
                kern[(s // 64, h)](q, k, v, o, scale, q.stride(0), q.stride(1), s, D=d, BLOCK_M=64, BLOCK_N=64,
                                   CAUSAL=causal)
                return o
            return run
        q32, k32, v32 = (t.float() for t in (q, k, v))
        qn, kn, vn = (t.numpy() for t in (q32, k32, v32))

        def with_numpy():
            sc = qn @ kn.transpose(0, 2, 1) * scale
            if causal:
                sc = np.where(np.tril(np.ones((s, s), bool)), sc, -np.inf)
            p = np.exp(sc - sc.max(axis=2, keepdims=True))
            return ((p / p.sum(axis=2, keepdims=True)) @ vn).astype(np.float16)

        def reference():
            return torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                                                    is_causal=causal)
        return Case(f"flash attention forward{' causal' if causal else ''}, {h} heads, S={s}, D={d}, fp16, "
                    f"64x64 tiles", make,
                    lambda: torch.nn.functional.scaled_dot_product_attention(q32, k32, v32, is_causal=causal),
                    with_numpy, reference, 1e-2, 1e-2)       # p is rounded to fp16 before p @ v
    return setup


def _grouped_gemm(size, seed):
    groups, k, n = {"small": (4, 64, 64), "full": (8, 1024, 1024)}[size]
    g = torch.Generator().manual_seed(seed)
    per_group = 4096 // groups if size == "full" else 96
    counts = [max(1, int(per_group * (0.5 + (i * 0.37) % 1.0))) for i in range(groups)]   # uneven groups
    total = sum(counts)
    x = torch.randn(total, k, generator=g).half()
    w = torch.randn(groups, k, n, generator=g).half()
    ends = torch.tensor(np.cumsum(counts), dtype=torch.int32)
    starts = [0] + ends.tolist()[:-1]
    bm = 64
    tile_group = torch.tensor([gi for gi, c in enumerate(counts) for _ in range(triton.cdiv(c, bm))],
                              dtype=torch.int32)
    tile_row = torch.tensor([starts[gi] + t * bm for gi, c in enumerate(counts) for t in range(triton.cdiv(c, bm))],
                            dtype=torch.int32)

    def make(wrap):
        kern = wrap(grouped_gemm_kernel)

        def run():
            out = torch.empty(total, n, dtype=torch.float16)
            kern[(len(tile_group), triton.cdiv(n, 64))](x, w, out, tile_group, tile_row, ends, k, n,
                                                         BLOCK_M=bm, BLOCK_N=64, BLOCK_K=32)
            return out
        return run

    x32, w32 = x.float(), w.float()

    def eager():
        return torch.cat([x32[s0:e] @ w32[gi] for gi, (s0, e) in enumerate(zip(starts, ends.tolist()))])

    def reference():
        return torch.cat([x[s0:e].double() @ w[gi].double() for gi, (s0, e) in enumerate(zip(starts, ends.tolist()))])
    xn, wn = x.float().numpy(), w.float().numpy()

    def with_numpy():
        return np.concatenate([(xn[s0:e] @ wn[gi]).astype(np.float16)
                               for gi, (s0, e) in enumerate(zip(starts, ends.tolist()))])
    return Case(f"grouped GEMM, {groups} groups of {min(counts)}-{max(counts)} rows ({total} in all), "
                f"K={k}, N={n}, fp16, 64x64x32 tiles", make, eager, with_numpy, reference, 0.05, 2e-3)


CASES = {
    "add": _add,
    "softmax": _softmax,
    "ln_fwd": _ln_fwd,
    "ln_bwd": _ln_bwd,
    "matmul": _matmul,
    "attn": _attention(False),
    "attn_causal": _attention(True),
    "grouped_gemm": _grouped_gemm,
}
