"""An MoE expert's token rows times its weights, a tile of rows per program, with the early exit such kernels
have: the tiles past the expert's token count return at once (``if start >= n: return``), so programs that
leave alternate with programs that stay, expert after expert (record/divergence/exits.py). Used by
tests/record/test_masked_exits.py and benchmarks/speed/bench_divergent.py."""
from __future__ import annotations

import torch
import triton
import triton.language as tl


def expert_tiles_kernel(x_ptr, counts_ptr, w_ptr, out_ptr, D: tl.constexpr, BM: tl.constexpr, TILES: tl.constexpr):
    pid = tl.program_id(0)
    e = pid // TILES
    n = tl.load(counts_ptr + e)
    start = (pid % TILES) * BM
    if start >= n:
        return
    rows = start + tl.arange(0, BM)
    cols = tl.arange(0, D)
    keep = rows < n
    x = tl.load(x_ptr + (e * TILES * BM + rows)[:, None] * D + cols[None, :], mask=keep[:, None], other=0.0)
    w = tl.load(w_ptr + e * D * D + cols[:, None] * D + cols[None, :])
    tl.store(out_ptr + (e * TILES * BM + rows)[:, None] * D + cols[None, :], tl.dot(x, w), mask=keep[:, None])


def make_expert_tiles():
    return triton.jit(expert_tiles_kernel)


def expert_tiles(x, counts, w, kernel=None, block_m=32):
    """``x``: (experts * slots, D) token rows, ``counts``: tokens per expert, ``w``: (experts, D, D). Rows past
    an expert's count stay zero."""
    kernel = kernel or make_expert_tiles()
    E, D = w.shape[0], w.shape[1]
    tiles = x.shape[0] // E // block_m
    out = torch.zeros(x.shape, dtype=torch.float32)
    kernel[(E * tiles,)](x, counts, w, out, D=D, BM=block_m, TILES=tiles)
    return out


def expert_tiles_reference(x, counts, w):
    E, D = w.shape[0], w.shape[1]
    used = (torch.arange(x.shape[0] // E)[None, :] < counts[:, None]).reshape(-1, 1)
    return torch.where(used, torch.bmm(x.float().view(E, -1, D), w.float()).reshape(-1, D), 0.0)
