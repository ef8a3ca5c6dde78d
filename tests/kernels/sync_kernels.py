"""Kernels for tests/analysis/test_barriers.py and tests/record/test_lowp_sums.py, each bug beside its fixed
twin, the bug's line marked ``# BUG`` (the stores it follows ``# STORE``):

- a lock released, or a counter bumped, by a scalar atomic right after block stores of data other programs
  read, with no ``tl.debug_barrier()`` between them (the twin has one: Triton's layer-norm tutorial);
- an fp16 (or bf16) accumulator summed over a long loop, against the twin that sums in fp32 and casts once.
"""
from __future__ import annotations

import triton
import triton.language as tl


# -- "the last program reduces": partial sums, then a ticket ------------------------------------------------
@triton.jit
def last_program_sums(x_ptr, part_ptr, count_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = pid * BLOCK + offs < n
    part = tl.load(x_ptr + pid * BLOCK + offs, mask=m, other=0.0) * 2.0
    tl.store(part_ptr + pid * BLOCK + offs, part, mask=m)  # STORE
    ticket = tl.atomic_add(count_ptr, 1)  # BUG
    if ticket == tl.num_programs(0) - 1:            # the last program sums every program's part
        acc = tl.zeros((BLOCK,), tl.float32)
        for p in range(0, tl.num_programs(0)):
            acc += tl.load(part_ptr + p * BLOCK + offs, mask=p * BLOCK + offs < n, other=0.0)
        tl.store(out_ptr, tl.sum(acc, axis=0))


@triton.jit
def last_program_sums_fenced(x_ptr, part_ptr, count_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = pid * BLOCK + offs < n
    tl.store(part_ptr + pid * BLOCK + offs, tl.load(x_ptr + pid * BLOCK + offs, mask=m, other=0.0) * 2.0, mask=m)
    tl.debug_barrier()                              # every warp's part is stored before the ticket
    ticket = tl.atomic_add(count_ptr, 1)
    if ticket == tl.num_programs(0) - 1:
        acc = tl.zeros((BLOCK,), tl.float32)
        for p in range(0, tl.num_programs(0)):
            acc += tl.load(part_ptr + p * BLOCK + offs, mask=p * BLOCK + offs < n, other=0.0)
        tl.store(out_ptr, tl.sum(acc, axis=0))


# -- a lock per group of rows (the layer-norm backward's partial dW) --------------------------------------------
@triton.jit
def group_sums_locked(x_ptr, y_ptr, part_ptr, lock_ptr, n_cols, GROUPS: tl.constexpr, BLOCK: tl.constexpr,
                      SEM: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0)
    tl.store(y_ptr + row * n_cols + cols, x, mask=m)           # this program's own row: nobody else reads it
    lock = lock_ptr + row % GROUPS
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    p = part_ptr + (row % GROUPS) * n_cols + cols
    tl.store(p, tl.load(p, mask=m) + x, mask=m)  # STORE
    tl.atomic_xchg(lock, 0, sem=SEM)  # BUG


@triton.jit
def group_sums_locked_fenced(x_ptr, y_ptr, part_ptr, lock_ptr, n_cols, GROUPS: tl.constexpr, BLOCK: tl.constexpr,
                             SEM: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=m, other=0.0)
    tl.store(y_ptr + row * n_cols + cols, x, mask=m)
    lock = lock_ptr + row % GROUPS
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    p = part_ptr + (row % GROUPS) * n_cols + cols
    tl.store(p, tl.load(p, mask=m) + x, mask=m)
    tl.debug_barrier()                              # "need a barrier to ensure all threads finished" (tutorial 05)
    tl.atomic_xchg(lock, 0, sem=SEM)


# -- fp16 / bf16 accumulators ---------------------------------------------------------------------------------
@triton.jit
def row_times_matrix_lowp(a_ptr, b_ptr, c_ptr, K, N, BLOCK_N: tl.constexpr):
    """c[m, :] = a[m, :] @ b, summed in the inputs' type (fp16 or bf16) over K steps."""
    m = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=c_ptr.dtype.element_ty)
    for k in range(0, K):
        acc += tl.load(a_ptr + m * K + k) * tl.load(b_ptr + k * N + cols, mask=cols < N, other=0.0)  # BUG
    tl.store(c_ptr + m * N + cols, acc, mask=cols < N)


@triton.jit
def row_times_matrix_f32acc(a_ptr, b_ptr, c_ptr, K, N, BLOCK_N: tl.constexpr):
    m = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for k in range(0, K):
        acc += (tl.load(a_ptr + m * K + k) * tl.load(b_ptr + k * N + cols, mask=cols < N, other=0.0)).to(tl.float32)
    tl.store(c_ptr + m * N + cols, acc.to(c_ptr.dtype.element_ty), mask=cols < N)


@triton.jit
def tile_matmul_f16acc(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, BK: tl.constexpr):
    """One BLOCK x BLOCK tile of a @ b with tl.dot into an fp16 accumulator, BK columns at a time."""
    r = tl.arange(0, BLOCK)
    kk = tl.arange(0, BK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float16)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + r[:, None] * K + k + kk[None, :])
        b = tl.load(b_ptr + (k + kk[:, None]) * BLOCK + r[None, :])
        acc = tl.dot(a, b, acc, out_dtype=tl.float16)  # BUG
    tl.store(c_ptr + r[:, None] * BLOCK + r[None, :], acc.to(tl.float32))


@triton.jit
def add_lowp(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """One fp16 addition per element: rounded once, never a drifting sum."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


# -- tickets that do not order: every program reads all parts after its own ticket (for the race check) ------
@triton.jit
def every_program_sums(x_ptr, part_ptr, count_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    m = pid * BLOCK + offs < n
    tl.store(part_ptr + pid * BLOCK + offs, tl.load(x_ptr + pid * BLOCK + offs, mask=m, other=0.0), mask=m)
    tl.debug_barrier()
    tl.atomic_add(count_ptr, 1)
    acc = tl.zeros((BLOCK,), tl.float32)        # no check that this ticket is the last: parts may be missing
    for p in range(0, tl.num_programs(0)):
        acc += tl.load(part_ptr + p * BLOCK + offs, mask=p * BLOCK + offs < n, other=0.0)  # READ
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def shared_part_sums(x_ptr, part_ptr, count_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # every program stores into the same part before its ticket: a write-write race the tickets cannot order
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    tl.store(part_ptr + offs, tl.load(x_ptr + pid * BLOCK + offs, mask=pid * BLOCK + offs < n, other=0.0))  # STORE
    tl.debug_barrier()
    ticket = tl.atomic_add(count_ptr, 1)
    if ticket == tl.num_programs(0) - 1:
        tl.store(out_ptr, tl.sum(tl.load(part_ptr + offs), axis=0))
