"""Kernels whose bad integer values reach some lanes of some programs, each beside its fixed twin: an int32
wrap, a division by zero, two lanes of one store that disagree, a division by zero that only decides a
``tl.where``, a mask or an ``if``. The bug's line is marked ``# BUG`` (tests/record/test_value_extents.py)."""
from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def wrapped_offsets(out_ptr, n, BIG: tl.constexpr, BLOCK: tl.constexpr, LIMIT: tl.constexpr,
                    AS_ADDRESS: tl.constexpr):
    # pid * BIG fits int32 for the first programs; + lane wraps in the last lanes of one, every lane later
    pid = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    offs = pid * BIG + lane  # BUG
    if AS_ADDRESS:
        tl.store(out_ptr + (offs & (n - 1)), lane, mask=lane < LIMIT)
    else:
        tl.store(out_ptr + pid * BLOCK + lane, offs, mask=lane < LIMIT)


@triton.jit
def wrapped_offsets_int64(out_ptr, n, BIG: tl.constexpr, BLOCK: tl.constexpr, LIMIT: tl.constexpr,
                          AS_ADDRESS: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    lane = tl.arange(0, BLOCK)
    offs = pid * BIG + lane
    if AS_ADDRESS:
        tl.store(out_ptr + (offs & (n - 1)), lane, mask=lane < LIMIT)
    else:
        tl.store(out_ptr + pid * BLOCK + lane, offs, mask=lane < LIMIT)


@triton.jit
def tile_quotients(a_ptr, d_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    # one row per program, its tail columns masked (their divisor loads as 0)
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < cols
    a = tl.load(a_ptr + row * cols + c, mask=m, other=0)
    d = tl.load(d_ptr + row * cols + c, mask=m, other=0)
    tl.store(out_ptr + row * cols + c, a // d, mask=m)  # BUG


@triton.jit
def tile_quotients_guarded(a_ptr, d_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < cols
    a = tl.load(a_ptr + row * cols + c, mask=m, other=0)
    d = tl.load(d_ptr + row * cols + c, mask=m, other=1)
    tl.store(out_ptr + row * cols + c, tl.where(d != 0, a // tl.where(d != 0, d, 1), 0), mask=m)


@triton.jit
def scatter_slots(slot_ptr, v_ptr, out_ptr, BLOCK: tl.constexpr):
    # each program scatters its lanes into its own BLOCK slots: lanes sharing a slot may disagree
    pid = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    slot = tl.load(slot_ptr + pid * BLOCK + lane)
    tl.store(out_ptr + pid * BLOCK + slot, tl.load(v_ptr + pid * BLOCK + lane))  # BUG


@triton.jit
def scatter_slots_fixed(slot_ptr, v_ptr, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    lane = tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + pid * BLOCK + tl.load(slot_ptr + pid * BLOCK + lane), tl.load(v_ptr + pid * BLOCK + lane))


@triton.jit
def keep_positive_quotients(a_ptr, d_ptr, x_ptr, out_ptr, n, BLOCK: tl.constexpr, AS_MASK: tl.constexpr):
    # the quotient only decides which lanes keep x: through tl.where, or as the store's mask
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    q = tl.load(a_ptr + offs, mask=m, other=0) // tl.load(d_ptr + offs, mask=m, other=0)  # BUG
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    if AS_MASK:
        tl.store(out_ptr + offs, x, mask=m & (q > 0))
    else:
        tl.store(out_ptr + offs, tl.where(q > 0, x, 0.0), mask=m)


@triton.jit
def keep_positive_quotients_guarded(a_ptr, d_ptr, x_ptr, out_ptr, n, BLOCK: tl.constexpr, AS_MASK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    d = tl.load(d_ptr + offs, mask=m, other=0)
    q = tl.load(a_ptr + offs, mask=m, other=0) // tl.where(d != 0, d, 1)
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    if AS_MASK:
        tl.store(out_ptr + offs, x, mask=m & (d != 0) & (q > 0))
    else:
        tl.store(out_ptr + offs, tl.where((d != 0) & (q > 0), x, 0.0), mask=m)


@triton.jit
def branch_on_quotient(a_ptr, d_ptr, out_ptr):
    pid = tl.program_id(0)
    q = tl.load(a_ptr + pid) // tl.load(d_ptr + pid)  # BUG
    if q > 0:
        tl.store(out_ptr + pid, 1.0)
    else:
        tl.store(out_ptr + pid, 2.0)


@triton.jit
def branch_on_quotient_guarded(a_ptr, d_ptr, out_ptr):
    pid = tl.program_id(0)
    d = tl.load(d_ptr + pid)
    q = tl.load(a_ptr + pid) // tl.maximum(d, 1)
    if q > 0:
        tl.store(out_ptr + pid, 1.0)
    else:
        tl.store(out_ptr + pid, 2.0)


@triton.jit
def tile_quotients_discarded(a_ptr, d_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    # divides by zero, but tl.where throws those lanes' quotients away: no finding
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    m = c < cols
    a = tl.load(a_ptr + row * cols + c, mask=m, other=0)
    d = tl.load(d_ptr + row * cols + c, mask=m, other=0)
    tl.store(out_ptr + row * cols + c, tl.where(d != 0, a // d, 0), mask=m)
