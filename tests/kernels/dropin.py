"""Small kernels, written from scratch, for each class of failure that once made the tracer differ from
Triton's plain interpreter (the drop-in fidelity issue). ``CASES`` maps a name to a runner
``run(make) -> dict`` of output tensors; ``make(kernel, **trace_options)`` returns the kernel to launch:
the kernel itself for a plain run (under TRITON_INTERPRET=1), a traced copy otherwise. The runners take
fresh inputs from a fixed seed, so a plain and a traced run see the same values.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


# -- errors raised by Triton's front end ---------------------------------------------------------------------
@triton.jit
def bad_arange(x_ptr):
    offs = tl.arange(0, 3)                # not a power of two: Triton's front end refuses it
    tl.store(x_ptr + offs, offs)


@triton.jit
def bad_axis(x_ptr):
    pid = tl.program_id(5)
    tl.store(x_ptr, pid)


# -- 64-bit atomics in a chunk that is undone ----------------------------------------------------------------
@triton.jit
def atomics64(u_ptr, f_ptr, out_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, N)
    v = tl.load(u_ptr + offs)
    tl.atomic_add(u_ptr + N + offs, v)
    tl.atomic_max(u_ptr + 2 * N + offs, v * (pid + 1).to(tl.uint64))
    tl.atomic_min(u_ptr + 3 * N + offs, v + pid.to(tl.uint64))
    f = tl.load(f_ptr + offs) - pid.to(tl.float64)
    tl.atomic_max(f_ptr + N + offs, f)
    tl.atomic_min(f_ptr + 2 * N + offs, f)
    if pid == 2:                          # programs branch differently: the batched chunk is undone
        tl.store(out_ptr + offs, v)


def run_atomics64(make, **opts):
    N = 8
    torch.manual_seed(0)
    u = torch.randint(1 << 60, (4 * N,), dtype=torch.int64).view(torch.uint64)
    f = torch.randn(3 * N, dtype=torch.float64) * 4
    out = torch.zeros(N, dtype=torch.int64).view(torch.uint64)
    make(atomics64, **opts)[(5,)](u, f, out, N=N)
    return {"u": u.view(torch.int64), "f": f, "out": out.view(torch.int64)}


# -- a rank-9 block ----------------------------------------------------------------------------------------
@triton.jit
def rank9(x_ptr, out_ptr):
    offs = tl.arange(0, 512)
    x = tl.load(x_ptr + offs)
    y = tl.reshape(x, (2, 2, 2, 2, 2, 2, 2, 2, 2))
    i = tl.reshape(offs, (2, 2, 2, 2, 2, 2, 2, 2, 2))
    tl.store(out_ptr + i, y * 2)


def run_rank9(make, **opts):
    x = torch.arange(512, dtype=torch.float32)
    out = torch.zeros(512)
    make(rank9, **opts)[(1,)](x, out)
    return {"out": out}


# -- kernel parameters named like launch options -----------------------------------------------------------
@triton.jit
def option_names(x_ptr, num_stages: tl.constexpr, num_warps: tl.constexpr, num_ctas: tl.constexpr):
    offs = tl.arange(0, 16)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + num_stages * 100 + num_warps * 10 + num_ctas)


def run_option_names(make, **opts):
    x = torch.zeros(16)
    make(option_names, **opts)[(1,)](x, num_stages=3, num_warps=2, num_ctas=1)
    return {"x": x}


# -- pointers loaded from memory (grouped GEMM / MoE "array of tensors") ---------------------------------------
@triton.jit
def array_of_tensors(ptrs_ptr, sizes_ptr, out_ptr, BLOCK: tl.constexpr):
    g = tl.program_id(0)
    src = tl.load(ptrs_ptr + g).to(tl.pointer_type(tl.float16))
    n = tl.load(sizes_ptr + g)
    offs = tl.arange(0, BLOCK)
    x = tl.load(src + offs, mask=offs < n, other=0.0)
    tl.store(src + offs, x * 2, mask=offs < n)                # written back into the caller's tensor
    tl.store(out_ptr + g * BLOCK + offs, x.to(tl.float32), mask=offs < n)


def run_array_of_tensors(make, **opts):
    torch.manual_seed(1)
    ts = [torch.randn(n).half() for n in (5, 16, 9)]
    ptrs = torch.tensor([t.data_ptr() for t in ts], dtype=torch.int64)
    sizes = torch.tensor([t.numel() for t in ts], dtype=torch.int32)
    out = torch.zeros(3 * 16)
    make(array_of_tensors, **opts)[(3,)](ptrs, sizes, out, BLOCK=16)
    return {"out": out, **{f"t{i}": t for i, t in enumerate(ts)}}


# -- tensor-like arguments ---------------------------------------------------------------------------------
class StridedView:
    """What a library passes instead of a torch.Tensor: data_ptr(), dtype, shape, stride(), nothing else."""

    def __init__(self, t: torch.Tensor):
        self._t = t
        self.dtype, self.shape, self.device = t.dtype, tuple(t.shape), t.device

    def data_ptr(self) -> int:
        return self._t.data_ptr()

    def stride(self):
        return self._t.stride()


@triton.jit
def scale_rows(x_ptr, y_ptr, sx, sy, N: tl.constexpr):
    r = tl.program_id(0)
    offs = tl.arange(0, N)
    tl.store(y_ptr + r * sy + offs, tl.load(x_ptr + r * sx + offs) * 3)


def run_tensor_like(make, **opts):
    base = torch.arange(64, dtype=torch.float32).reshape(4, 16)
    x = base[:, 8:]
    y = torch.zeros(4, 8)
    make(scale_rows, **opts)[(4,)](StridedView(x), StridedView(y), x.stride(0), y.stride(0), N=8)
    return {"y": y}


# -- Python logic on blocks ----------------------------------------------------------------------------------
@triton.jit
def and_or_not(x_ptr, y_ptr, M, N, lo, BM: tl.constexpr, BN: tl.constexpr, FLAG: tl.constexpr):
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.arange(0, BN)
    mask = rows[:, None] < M and cols[None, :] < N             # elementwise, as compiled
    x = tl.load(x_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0)
    keep = x > lo or not (x > -lo)                            # |x| > lo
    keep = FLAG and keep                                      # a constexpr decides at once
    y = tl.where(keep, x, 0.0)
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y, mask=mask)


def and_or_not_reference(x: torch.Tensor, lo: float) -> torch.Tensor:
    return torch.where(x.abs() > lo, x, torch.zeros_like(x))


def run_and_or_not(make, **opts):
    torch.manual_seed(2)
    M, N = 5, 6
    x = torch.randn(M, N)
    y = torch.full((M, N), 7.0)
    make(and_or_not, **opts)[(2,)](x, y, M, N, 0.5, BM=4, BN=8, FLAG=True)
    return {"x": x, "y": y}


# -- a view restrided with a zero stride ---------------------------------------------------------------------
@triton.jit
def gather_restrided(x_ptr, idx_ptr, out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    i = tl.load(idx_ptr + offs)
    tl.store(out_ptr + offs, tl.load(x_ptr + i))


def run_restrided(make, **opts):
    base = torch.arange(64, dtype=torch.float32)
    x = base.as_strided((4,), (0,))           # one element, nominally; the kernel reads the base's memory
    idx = torch.arange(16) * 3
    out = torch.zeros(16)
    make(gather_restrided, **opts)[(1,)](x, idx, out, N=16)
    return {"out": out}


# -- device_assert and prints ---------------------------------------------------------------------------------
@triton.jit
def checked(x_ptr, limit, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    x = tl.load(x_ptr + offs)
    tl.device_assert(x < limit, "x must stay below the limit")
    tl.store(x_ptr + offs, x + 1)


@triton.jit
def printing(x_ptr, N: tl.constexpr):
    pid = tl.program_id(0)
    x = tl.load(x_ptr + pid * N + tl.arange(0, N))
    print("block", x)
    tl.device_print("pid", pid)
    tl.store(x_ptr + pid * N + tl.arange(0, N), x * 2)


def run_printing(make, **opts):
    x = torch.arange(24, dtype=torch.float32)
    make(printing, **opts)[(6,)](x, N=4)
    return {"x": x}


# -- reductions over 2-D tiles: a block sums in its memory order, so a load must make Triton's C-ordered block ---
@triton.jit
def tile_sums(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    keep = (rm[:, None] < M) & (rn[None, :] < N)
    x = tl.load(x_ptr + rm[:, None] * N + rn[None, :], mask=keep, other=1.5)
    t = tl.load(x_ptr + rn[None, :] * M + rm[:, None], mask=keep, other=0.5)       # x read as its transpose
    p = tl.program_id(0) * tl.num_programs(1) + tl.program_id(1)
    tl.store(out_ptr + 3 * p, tl.sum(x))
    tl.store(out_ptr + 3 * p + 1, tl.sum(tl.sum(t, axis=1), axis=0))
    tl.store(out_ptr + 3 * p + 2, tl.sum(x * t))


def run_tile_sums(make, **opts):
    torch.manual_seed(0)
    M, N = 70, 100                    # tiles cut along rows, columns and both at the edges
    x = torch.randn(M * N)
    grid = (triton.cdiv(M, 16), triton.cdiv(N, 32))
    out = torch.zeros(3 * grid[0] * grid[1])
    make(tile_sums, **opts)[grid](x, out, M, N, BM=16, BN=32)
    return {"out": out}


# -- early exits that programs take differently: those that leave sit out the rest (divergence/exits.py) ---------
@triton.jit
def early_exits(x_ptr, counts_ptr, out_ptr, hits_ptr, B: tl.constexpr):
    pid = tl.program_id(0)
    n = tl.load(counts_ptr + pid)
    if n < 0:
        tl.store(out_ptr + pid * B + tl.arange(0, B), tl.full((B,), -1.0, tl.float32))
        return
    if n == 0:
        return
    acc = tl.zeros((B,), dtype=tl.float32)
    for i in tl.static_range(4):      # (Triton 3.6's own interpreter fails on range(n) under numpy >= 2.4)
        if i < n:
            acc += tl.load(x_ptr + pid * 4 * B + i * B + tl.arange(0, B)) * (i + 1)
    if tl.sum(acc) > 0:
        acc = tl.sqrt(tl.abs(acc))
    tl.atomic_add(hits_ptr + n, 1)
    tl.store(out_ptr + pid * B + tl.arange(0, B), acc)


def run_early_exits(make, **opts):
    torch.manual_seed(0)
    P, B = 96, 8
    counts = torch.randint(-1, 5, (P,), dtype=torch.int32)
    x = torch.randn(P * 4 * B)
    out, hits = torch.zeros(P * B), torch.zeros(5, dtype=torch.int32)
    make(early_exits, **opts)[(P,)](x, counts, out, hits, B=B)
    return {"out": out, "hits": hits}


# The plain interpreter reads and writes the rows past M of and_or_not (it takes `a and b` as Python's
# `and`), corrupting the heap: compared with torch only.
PLAIN_UNSAFE = {"and_or_not"}

CASES = {
    "atomics64": run_atomics64,
    "rank9": run_rank9,
    "option_names": run_option_names,
    "array_of_tensors": run_array_of_tensors,
    "and_or_not": run_and_or_not,
    "restrided": run_restrided,
    "printing": run_printing,
    "tile_sums": run_tile_sums,
    "early_exits": run_early_exits,
}


@triton.jit
def scaled_index(x_ptr, y_ptr, scale, N: tl.constexpr):
    """int32 ``x * scale``: wraps for large x (Triton's overflow check applies under debug only)."""
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs) * scale)


@triton.jit
def difference(x_ptr, y_ptr, out_ptr, N: tl.constexpr):
    offs = tl.program_id(0) * N + tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) - tl.load(y_ptr + offs))
