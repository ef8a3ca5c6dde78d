"""Small kernels with one planted out-of-bounds access each, beside a masked twin, and their launcher: the
command line's and the views' tests (tests/cli/test_cli_bugs.py, tests/view/test_ui_bugs.py, the web tests'
shift kernel). Each planted line carries a marker comment (OOB, STORE, READ, "planted bug") that the tests
find with ``helpers.source.line_of``, so expectations follow the source."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

import triton_trace


@triton.jit
def tail_unmasked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 2)          # OOB: no mask on the last block


@triton.jit
def one_past_the_end(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=offs <= n)            # STORE: one element past the end of out


@triton.jit
def masked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, x * 2, mask=offs < n)


@triton.jit
def reads_one_past(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + 1, mask=offs < n, other=0.0)    # READ: one element past the end of x
    tl.store(out_ptr + offs, x, mask=offs < n)


def traced(kernel, n=100, block=64, **options):
    """(trace, x, out) of one launch of ``kernel`` over ``n`` elements, leaving the current trace empty."""
    triton_trace.reset()
    x, out = torch.arange(n, dtype=torch.float32), torch.zeros(n)
    triton_trace.trace(kernel, **options)[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr, x, out


def shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + 1, mask=offs < n)   # planted bug: reads one element past the end of x
    tl.store(out_ptr + offs, x, mask=offs < n)


def make_shift():
    return triton.jit(shift_kernel)
