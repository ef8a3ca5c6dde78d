"""Deliberately broken Triton kernels, each with its corrected version, for the sanitizer tests.

Every case runs its kernel through ``triton_trace.trace`` and says what the analysis must report: the
finding kind, the program, and the source line, which is the kernel line marked ``# BUG`` (``# OTHER``
for the second access of a race), found with ``inspect`` so the expectations follow the source.
A launcher bug (a wrong grid, wrong strides) is reported where the kernel goes wrong, so the marker
sits on that kernel line.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import torch
import triton
import triton.language as tl

import triton_trace
from helpers.source import marked_line


@dataclass(frozen=True)
class Case:
    name: str
    broken: object
    fixed: object
    run: Callable            # run(kernel, fixed) launches it the way its caller would
    kind: str
    program: Optional[tuple]             # None for launch-wide findings
    tensor: str
    other_program: Optional[tuple] = None    # race: the other program, at the line marked "# OTHER"
    other_marker: str = "# OTHER"            # (or at the "# BUG" line, when both run the same op)

    @property
    def line(self) -> Optional[int]:
        return None if self.kind == "unwritten_output" else marked_line(self.broken)

    @property
    def other_line(self) -> Optional[int]:
        return marked_line(self.broken, self.other_marker) if self.other_program is not None else None


# --- 1-2. masks ---------------------------------------------------------------------------------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def add_no_mask(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    a = tl.load(x + offs)  # BUG
    b = tl.load(y + offs)
    tl.store(out + offs, a + b)


@triton_trace.trace(outputs=("out",))
@triton.jit
def add_masked(x, y, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    a = tl.load(x + offs, mask=m)
    b = tl.load(y + offs, mask=m)
    tl.store(out + offs, a + b, mask=m)


def run_add(kernel, fixed):
    n = 300
    x, y, out = torch.randn(n), torch.randn(n), torch.empty(n)
    kernel[(triton.cdiv(n, 128),)](x, y, out, n, BLOCK=128)


@triton_trace.trace(outputs=("out",))
@triton.jit
def scale_off_by_one(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs <= n
    v = tl.load(x + offs, mask=m)  # BUG
    tl.store(out + offs, v * 2.0, mask=m)


@triton_trace.trace(outputs=("out",))
@triton.jit
def scale_ok(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x + offs, mask=m)
    tl.store(out + offs, v * 2.0, mask=m)


def run_scale(kernel, fixed):
    n = 250                    # the last block's lane at offset n passes the "<=" mask
    x, out = torch.randn(n), torch.empty(n)
    kernel[(triton.cdiv(n, 64),)](x, out, n, BLOCK=64)


# --- 3. a wrong stride for a transposed, padded view (the caller passes the unpadded row length) ------
@triton_trace.trace(outputs=("out",))
@triton.jit
def copy_2d(x, out, M, N, sxm, sxn, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.arange(0, BM)[:, None]
    rn = tl.arange(0, BN)[None, :]
    m = (rm < M) & (rn < N)
    v = tl.load(x + rm * sxm + rn * sxn, mask=m)  # BUG
    tl.store(out + rm * N + rn, v, mask=m)


def run_transposed_view(kernel, fixed):
    base = torch.randn(16, 32)
    x = base[:, :24].t()                      # shape (24, 16), strides (1, 32): padded rows
    out = torch.empty(24, 16)
    sxn = x.stride(1) if fixed else x.shape[0]    # the bug: assumes rows of 24, not 32
    kernel[(1,)](x, out, 24, 16, x.stride(0), sxn, BM=32, BN=16)


# --- 4. a row index past the end: the launcher's grid has one program too many ------------------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def row_softmax(x, out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    v = tl.load(x + row * n_cols + cols, mask=m, other=-float("inf"))  # BUG
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(out + row * n_cols + cols, e / tl.sum(e, axis=0), mask=m)


def run_softmax(kernel, fixed):
    rows, cols = 6, 40
    x, out = torch.randn(rows, cols), torch.empty(rows, cols)
    kernel[(rows if fixed else rows + 1,)](x, out, cols, BLOCK=64)


# --- 5. a race: two programs write the same row -------------------------------------------------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def rows_race(x, out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0) // 2
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + tl.program_id(0) * n_cols + cols)
    tl.store(out + row * n_cols + cols, v)  # BUG


@triton_trace.trace(outputs=("out",))
@triton.jit
def rows_ok(x, out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + tl.program_id(0) * n_cols + cols)
    tl.store(out + row * n_cols + cols, v)


def run_rows(kernel, fixed):
    x, out = torch.randn(4, 32), (torch.empty(4, 32) if fixed else torch.empty(2, 32))
    kernel[(4,)](x, out, 32, BLOCK=32)


# --- 6. a read of an output nobody wrote yet (accumulating into torch.empty) --------------------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def accumulate_into_empty(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.load(out + offs, mask=m)  # BUG
    tl.store(out + offs, acc + tl.load(x + offs, mask=m), mask=m)


@triton_trace.trace(outputs=("out",))
@triton.jit
def accumulate_fresh(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    tl.store(out + offs, acc + tl.load(x + offs, mask=m), mask=m)


def run_accumulate(kernel, fixed):
    x, out = torch.randn(100), torch.empty(100)
    kernel[(2,)](x, out, 100, BLOCK=64)


# --- 7. a block pointer without boundary check --------------------------------------------------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def tile_copy_no_check(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(out, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    v = tl.load(src)  # BUG
    tl.store(dst, v, boundary_check=(0, 1))


@triton_trace.trace(outputs=("out",))
@triton.jit
def tile_copy_checked(x, out, M, N, BM: tl.constexpr, BN: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    src = tl.make_block_ptr(x, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    dst = tl.make_block_ptr(out, (M, N), (N, 1), (pm * BM, pn * BN), (BM, BN), (1, 0))
    v = tl.load(src, boundary_check=(0, 1), padding_option="zero")
    tl.store(dst, v, boundary_check=(0, 1))


def run_tiles(kernel, fixed):
    x, out = torch.randn(20, 20), torch.empty(20, 20)
    kernel[(2, 2)](x, out, 20, 20, BM=16, BN=16)


# --- 8. a split reduction that stores its partial sums where it should add them atomically ------------
@triton_trace.trace
@triton.jit
def sum_store(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0)
    tl.store(out, s)  # BUG


@triton_trace.trace
@triton.jit
def sum_atomic(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x + offs, mask=offs < n, other=0.0), axis=0)
    tl.atomic_add(out, s)


def run_sum(kernel, fixed):
    x, out = torch.randn(200), torch.zeros(1)
    kernel[(4,)](x, out, 200, BLOCK=64)


# --- 9. an output left partly unwritten: the launcher rounds the grid down ----------------------------
def run_grid_round_down(kernel, fixed):
    n = 300
    x, out = torch.randn(n), torch.empty(n)
    grid = triton.cdiv(n, 64) if fixed else n // 64
    kernel[(grid,)](x, out, n, BLOCK=64)


# --- 10. a store inside the loop: the same program writes each element once per iteration -------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def running_sum_in_loop(x, out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, n_cols, BLOCK):
        acc += tl.load(x + row * n_cols + k + cols)
        tl.store(out + row * BLOCK + cols, acc)  # BUG


@triton_trace.trace(outputs=("out",))
@triton.jit
def running_sum_after_loop(x, out, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, n_cols, BLOCK):
        acc += tl.load(x + row * n_cols + k + cols)
    tl.store(out + row * BLOCK + cols, acc)


def run_running_sum(kernel, fixed):
    x, out = torch.randn(3, 64), torch.empty(3, 16)
    kernel[(3,)](x, out, 64, BLOCK=16)


# --- 11. a stencil reading its left neighbour without a mask at the left edge -------------------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def diff_left(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    left = tl.load(x + offs - 1, mask=m)  # BUG
    tl.store(out + offs, tl.load(x + offs, mask=m) - left, mask=m)


@triton_trace.trace(outputs=("out",))
@triton.jit
def diff_left_ok(x, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    left = tl.load(x + offs - 1, mask=m & (offs > 0), other=0.0)
    tl.store(out + offs, tl.load(x + offs, mask=m) - left, mask=m)


def run_diff(kernel, fixed):
    x, out = torch.randn(100), torch.empty(100)
    kernel[(2,)](x, out, 100, BLOCK=64)


# --- 12. a 2D tile masked on rows only, over a column slice of a wider tensor -------------------------
@triton_trace.trace(outputs=("out",))
@triton.jit
def tile_rows_mask(x, out, M, N, sx, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    rn = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    v = tl.load(x + rm * sx + rn, mask=rm < M)  # BUG
    tl.store(out + rm * N + rn, v, mask=(rm < M) & (rn < N))


@triton_trace.trace(outputs=("out",))
@triton.jit
def tile_full_mask(x, out, M, N, sx, BM: tl.constexpr, BN: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)[:, None]
    rn = tl.program_id(1) * BN + tl.arange(0, BN)[None, :]
    v = tl.load(x + rm * sx + rn, mask=(rm < M) & (rn < N))
    tl.store(out + rm * N + rn, v, mask=(rm < M) & (rn < N))


def run_tile_slice(kernel, fixed):
    x = torch.randn(16, 64)[:, :24]            # columns 24..63 of every row are not part of x
    out = torch.empty(16, 24)
    kernel[(1, 2)](x, out, 16, 24, x.stride(0), BM=16, BN=16)


# --- 13. an in-place stencil: each program reads the first element of its right neighbour's block -----
@triton_trace.trace
@triton.jit
def shift_in_place(x, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs + 1, mask=offs + 1 < n)  # OTHER
    tl.store(x + offs, v, mask=offs + 1 < n)  # BUG


@triton_trace.trace
@triton.jit
def shift_out_of_place(x, y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x + offs + 1, mask=offs + 1 < n)
    tl.store(y + offs, v, mask=offs + 1 < n)


def run_shift(kernel, fixed):
    x = torch.randn(128)
    if fixed:
        kernel[(4,)](x, torch.empty(128), 128, BLOCK=32)
    else:
        kernel[(4,)](x, 128, BLOCK=32)


# --- 14. partial sums accumulated into a shared buffer without taking the lock ------------------------
@triton_trace.trace
@triton.jit
def group_sum_no_lock(x, partial, lock, n_cols, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * n_cols + cols)
    p = partial + (row % GROUPS) * n_cols + cols
    acc = tl.load(p)  # OTHER
    tl.store(p, acc + v)  # BUG


@triton_trace.trace
@triton.jit
def group_sum_locked(x, partial, lock, n_cols, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    v = tl.load(x + row * n_cols + cols)
    p = partial + (row % GROUPS) * n_cols + cols
    lk = lock + row % GROUPS
    while tl.atomic_cas(lk, 0, 1) == 1:
        pass
    acc = tl.load(p)
    tl.store(p, acc + v)
    tl.debug_barrier()          # every warp's lanes stored before the lock is released (release_without_barrier)
    tl.atomic_xchg(lk, 0)


def run_group_sum(kernel, fixed):
    x = torch.randn(8, 32)
    partial, lock = torch.zeros(2, 32), torch.zeros(2, dtype=torch.int32)
    kernel[(8,)](x, partial, lock, 32, GROUPS=2, BLOCK=32)


# --- 15. two arguments that view one tensor ----------------------------------------------------------
@triton_trace.trace
@triton.jit
def reverse_blocks(src, dst, BLOCK: tl.constexpr):
    # dst block p takes src block (last - p); called in place, program 1 reads what program 0 writes
    pid = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    v = tl.load(src + (tl.num_programs(0) - 1 - pid) * BLOCK + offs)  # OTHER
    tl.store(dst + pid * BLOCK + offs, v)  # BUG


def run_reverse_blocks(kernel, fixed):
    x = torch.arange(72, dtype=torch.float32)
    src = x.clone()[8:] if fixed else x[8:]       # broken: src and dst overlap in x
    kernel[(2,)](src, x[:64], BLOCK=32)


CASES = (
    Case("missing_mask", add_no_mask, add_masked, run_add, "out_of_bounds", (2, 0, 0), "x"),
    Case("off_by_one_mask", scale_off_by_one, scale_ok, run_scale, "out_of_bounds", (3, 0, 0), "x"),
    Case("wrong_stride_transposed_view", copy_2d, copy_2d, run_transposed_view, "out_of_view", (0, 0, 0), "x"),
    Case("row_past_the_end", row_softmax, row_softmax, run_softmax, "out_of_bounds", (6, 0, 0), "x"),
    Case("two_programs_write_one_row", rows_race, rows_ok, run_rows, "race", (0, 0, 0), "out",
         other_program=(1, 0, 0), other_marker="# BUG"),
    Case("read_of_unwritten_output", accumulate_into_empty, accumulate_fresh, run_accumulate,
         "uninitialized_read", (0, 0, 0), "out"),
    Case("block_pointer_without_boundary_check", tile_copy_no_check, tile_copy_checked, run_tiles,
         "out_of_bounds", (1, 0, 0), "x"),
    Case("store_instead_of_atomic_add", sum_store, sum_atomic, run_sum, "race", (0, 0, 0), "out",
         other_program=(1, 0, 0), other_marker="# BUG"),
    Case("grid_rounded_down", scale_ok, scale_ok, run_grid_round_down, "unwritten_output", None, "out"),
    Case("store_inside_loop", running_sum_in_loop, running_sum_after_loop, run_running_sum, "double_write",
         (0, 0, 0), "out"),
    Case("stencil_left_edge", diff_left, diff_left_ok, run_diff, "out_of_bounds", (0, 0, 0), "x"),
    Case("tile_masked_on_rows_only", tile_rows_mask, tile_full_mask, run_tile_slice, "out_of_view", (0, 1, 0),
         "x"),
    Case("in_place_stencil", shift_in_place, shift_out_of_place, run_shift, "race", (1, 0, 0), "x",
         other_program=(0, 0, 0)),
    Case("accumulate_without_lock", group_sum_no_lock, group_sum_locked, run_group_sum, "race", (0, 0, 0),
         "partial", other_program=(2, 0, 0)),
    Case("aliased_views_in_place", reverse_blocks, reverse_blocks, run_reverse_blocks, "race", (0, 0, 0), "dst",
         other_program=(1, 0, 0)),
)
