"""Kernels for test_touches.py (in a real file: Triton's interpreter re-reads kernel sources)."""
import triton
import triton.language as tl


@triton.jit
def stencil(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    left = tl.load(x_ptr + i - 1, mask=(i >= 1) & (i < n), other=0.0)
    mid = tl.load(x_ptr + i, mask=i < n, other=0.0)
    right = tl.load(x_ptr + i + 1, mask=i + 1 < n, other=0.0)
    tl.store(y_ptr + i, left + mid + right, mask=i < n)


@triton.jit
def overlapping_store(x_ptr, y_ptr, n, BLOCK: tl.constexpr, SPAN: tl.constexpr):
    j = tl.arange(0, SPAN)
    i = tl.program_id(0) * BLOCK + j
    ok = (j <= BLOCK) & (i < n)          # one element past the block: the next program's first
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=ok) * (tl.program_id(0) + 1), mask=ok)


@triton.jit
def shifted_sum(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(a_ptr + i, mask=i < n) + tl.load(b_ptr + i, mask=i < n), mask=i < n)
