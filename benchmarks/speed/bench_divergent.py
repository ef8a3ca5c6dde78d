"""Divergent programs: a flash-attention forward (Triton's fused-attention tutorial, written with pointers),
causal, not causal and with every head its own key count (varlen), and a persistent matmul (Triton's
persistent-matmul tutorial: each program its own start tile), and rows routed at random between the two sides
of an ``if`` (with a shared atomic counter), and MoE experts whose tiles past the expert's token count
``return`` at once, traced batched (the default), beside torch on the same inputs,
in one process (ratios, not absolute times, are the result).

Causal attention gives each program a loop count that depends on its id (hi = (start_m + 1) * BLOCK_M), a
persistent kernel a loop start (tl.range(pid, num_tiles, NUM_SMS)): every program stays in one chunk, the
loop masked per program and its later trips run on the programs still running. Outputs are compared bit
for bit with ``batch=False``.

    python benchmarks/speed/bench_divergent.py [--seq 2048] [--heads 8] [--repeat 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import triton
import triton.language as tl

import triton_trace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))        # the test kernels
from kernels import moe  # noqa: E402  (tests/kernels: the MoE kernel its tests use too)


@triton.jit
def attn_fwd(Q, K, V, Out, sm_scale, stride_h, stride_m, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
             BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    base = off_h * stride_h
    q = tl.load(Q + base + offs_m[:, None] * stride_m + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = (start_m + 1) * BLOCK_M if CAUSAL else N_CTX
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_m + offs_d[:, None])
        qk = tl.dot(q, k)
        if CAUSAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk * qk_scale, -1.0e6)
        else:
            qk = qk * qk_scale
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_m + offs_d[None, :])
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_m + offs_d[None, :], acc.to(tl.float16))


@triton.jit
def attn_fwd_varlen(Q, K, V, Out, Lens, sm_scale, stride_h, stride_m, HEAD_DIM: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Each head attends to its own number of keys (a batch of sequences of different lengths)."""
    start_m = tl.program_id(0)
    off_h = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    base = off_h * stride_h
    kv_len = tl.load(Lens + off_h)
    q = tl.load(Q + base + offs_m[:, None] * stride_m + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    for start_n in range(0, kv_len, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * stride_m + offs_d[:, None], mask=cols[None, :] < kv_len, other=0.0)
        qk = tl.where(cols[None, :] < kv_len, tl.dot(q, k) * qk_scale, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + base + cols[:, None] * stride_m + offs_d[None, :], mask=cols[:, None] < kv_len, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), v)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * stride_m + offs_d[None, :], acc.to(tl.float16))


def run_varlen(q, k, v, lens, **opts):
    out = torch.empty_like(q)
    H, S, D = q.shape
    triton_trace.trace(attn_fwd_varlen, values=False, **opts)[(S // 64, H)](
        q, k, v, out, lens, D ** -0.5, q.stride(0), q.stride(1), HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64)
    return out


@triton.jit
def matmul_persistent(a_ptr, b_ptr, c_ptr, M, N, K, NUM_SMS: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """Triton's persistent matmul tutorial (pointers): NUM_SMS programs walk the tiles pid, pid + NUM_SMS, ..."""
    start_pid = tl.program_id(0)
    num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    offs_k = tl.arange(0, BLOCK_K)
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        group_id = tile_id // (GROUP_M * num_pid_n)
        first_m = group_id * GROUP_M
        group_size_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile_id % group_size_m)
        pid_n = (tile_id % (GROUP_M * num_pid_n)) // group_size_m
        offs_am = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_bn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(0, tl.cdiv(K, BLOCK_K)):
            kk = ki * BLOCK_K + offs_k
            a = tl.load(a_ptr + offs_am[:, None] * K + kk[None, :], mask=kk[None, :] < K, other=0.0)
            b = tl.load(b_ptr + kk[:, None] * N + offs_bn[None, :], mask=kk[:, None] < K, other=0.0)
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + offs_am[:, None] * N + offs_bn[None, :], acc,
                 mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


@triton.jit
def routed_rows(x_ptr, route_ptr, w_ptr, out_ptr, count_ptr, N: tl.constexpr):
    """Each row takes the side its route (read from memory, random) picks, and counts itself in its
    route's shared counter: a branch the programs of a chunk take differently, and one shared atomic."""
    row = tl.program_id(0)
    cols = tl.arange(0, N)
    x = tl.load(x_ptr + row * N + cols)
    r = tl.load(route_ptr + row)
    if r == 0:
        y = x * tl.load(w_ptr + cols)
    else:
        y = tl.exp(x) - 1.0
    tl.store(out_ptr + row * N + cols, y)
    tl.atomic_add(count_ptr + r, 1)


def run_experts(x, counts, w, **opts):
    return moe.expert_tiles(x, counts, w, kernel=triton_trace.trace(moe.make_expert_tiles(), values=False, **opts))


def run_routed(x, route, w, **opts):
    out, count = torch.empty_like(x), torch.zeros(2, dtype=torch.int32)
    triton_trace.trace(routed_rows, values=False, **opts)[(x.shape[0],)](x, route, w, out, count, N=x.shape[1])
    return out, count


def run_persistent(a, b, **opts):
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N)
    triton_trace.trace(matmul_persistent, values=False, **opts)[(132,)](
        a, b, c, M, N, K, NUM_SMS=132, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=8)
    return c


def run(q, k, v, causal: bool, **opts):
    out = torch.empty_like(q)
    H, S, D = q.shape
    triton_trace.trace(attn_fwd, values=False, **opts)[(S // 64, H)](
        q, k, v, out, D ** -0.5, q.stride(0), q.stride(1), S, HEAD_DIM=D, BLOCK_M=64, BLOCK_N=64, CAUSAL=causal)
    return out


def row(case: str, torch_fn, traced_fn, repeat: int) -> None:
    """Time the torch reference, the traced launch and its analysis; print one table row."""
    t0 = time.perf_counter()
    for _ in range(repeat):
        torch_fn()
    t_torch = (time.perf_counter() - t0) / repeat
    triton_trace.reset()
    t0 = time.perf_counter()
    traced_fn()
    t_trace = time.perf_counter() - t0
    lc = triton_trace.current_trace().launches[-1]
    t0 = time.perf_counter()
    triton_trace.analyze(lc)
    t_an = time.perf_counter() - t0
    ex = lc.meta["execution"]
    print(f"{case:>12} {t_torch:9.3f} {t_trace:9.2f} {t_an:10.2f} {t_trace / t_torch:8.0f}x "
          f"{(t_trace + t_an) / t_torch:12.0f}x {ex['batched_programs']:>9} {ex.get('diverged_chunks', 0):>8} "
          f"{len(ex['fallbacks']):>9}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--check-seq", type=int, default=512, help="size of the bit-for-bit check against batch=False")
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    q, k, v = (torch.randn(args.heads, args.seq, 64).half() for _ in range(3))
    print(f"# python benchmarks/speed/bench_divergent.py --seq {args.seq} --heads {args.heads}; triton "
          f"{triton.__version__}, torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'case':>12} {'torch s':>9} {'traced s':>9} {'analysed s':>10} {'tr/torch':>9} {'(tr+an)/torch':>13} "
          f"{'batched':>9} {'diverged':>8} {'fallbacks':>9}")
    torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())       # warm-up
    # varlen: every head its own key count (1/4 to all of S, in steps of 64: neighbours in launch order differ)
    lens = torch.tensor([args.seq // 4 + (i * 7 % 13) * (3 * args.seq // 4) // 12 // 64 * 64
                         for i in range(args.heads)], dtype=torch.int32)
    key_mask = (torch.arange(args.seq)[None, None, :] < lens[:, None, None]).expand(args.heads, args.seq, args.seq)
    for case in ("non-causal", "causal", "varlen"):
        causal = case == "causal"
        mask = key_mask if case == "varlen" else None
        row(case, lambda: torch.nn.functional.scaled_dot_product_attention(
                q.float(), k.float(), v.float(), is_causal=causal, attn_mask=mask),
            lambda: run_varlen(q, k, v, lens) if case == "varlen" else run(q, k, v, causal), args.repeat)
    # a persistent matmul (1024^3 fp32, 256 tiles over 132 programs: 124 run two tiles, 8 run one)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    row("persistent", lambda: a @ b, lambda: run_persistent(a, b), max(args.repeat, 3))
    # rows routed at random between two sides of an if (and counted in a shared atomic counter)
    x = torch.randn(4096, 1024)
    route = torch.randint(0, 2, (4096,), dtype=torch.int32)
    w = torch.randn(1024)
    row("branches", lambda: (torch.where(route[:, None] == 0, x * w, torch.expm1(x)), torch.bincount(route)),
        lambda: run_routed(x, route, w), max(args.repeat, 3))
    # MoE experts (64, 256 token slots each, 64 wide) with random token counts: the tiles past an expert's count
    # return at once (2 to 8 of 8 tiles per expert run; a fifth of the experts get no tokens)
    E, slots = 64, 256
    counts = torch.randint(0, slots + 1, (E,), dtype=torch.int32)
    counts[torch.randperm(E)[:E // 5]] = 0
    xe, we = torch.randn(E * slots, 64), torch.randn(E, 64, 64)
    row("exits", lambda: moe.expert_tiles_reference(xe, counts, we),
        lambda: run_experts(xe, counts, we), max(args.repeat, 3))
    qs, ks, vs = (x[:2, :args.check_seq].contiguous() for x in (q, k, v))
    for causal in (False, True):
        same = torch.equal(run(qs, ks, vs, causal), run(qs, ks, vs, causal, batch=False))
        print(f"bit-identical to batch=False ({'causal' if causal else 'non-causal'}, 2 heads, S={args.check_seq}): {same}")
    ls = torch.tensor([args.check_seq // 2, args.check_seq], dtype=torch.int32)
    same = torch.equal(run_varlen(qs, ks, vs, ls), run_varlen(qs, ks, vs, ls, batch=False))
    print(f"bit-identical to batch=False (varlen, 2 heads, S={args.check_seq}): {same}")
    a, b = a[:320, :96].contiguous(), b[:96, :448].contiguous()
    same = torch.equal(run_persistent(a, b), run_persistent(a, b, batch=False))
    print(f"bit-identical to batch=False (persistent matmul 320x96x448): {same}")
    xs, rs = x[:256], route[:256]
    same = all(torch.equal(p, q) for p, q in zip(run_routed(xs, rs, w), run_routed(xs, rs, w, batch=False)))
    print(f"bit-identical to batch=False (branches, 256 rows): {same}")
    xs, cs, ws = xe[:16 * slots], counts[:16], we[:16]
    same = torch.equal(run_experts(xs, cs, ws), run_experts(xs, cs, ws, batch=False))
    print(f"bit-identical to batch=False (exits, 16 experts): {same}")


if __name__ == "__main__":
    main()
