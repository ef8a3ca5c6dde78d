"""The cache simulation's tests share: the streams of real kernels (each ``launch_*`` traces one launch into
the current trace), random streams for the compiled loops against the lock step, and the check that two
counts are equal field by field."""
import dataclasses

import numpy as np
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis.memory import lockstep
import kernels as K


def assert_same_counts(got, want):
    """Every field of two CacheResults equal."""
    for f in dataclasses.fields(want):
        np.testing.assert_array_equal(getattr(got, f.name), getattr(want, f.name), err_msg=f.name)


def launch_matmul():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    K.matmul(a, b, kernel=triton_trace.trace(K.make_matmul()), block_m=32, block_n=32, block_k=32, group_m=4)


def launch_histogram():       # atomics: reads and writes at L2, far-partition copies dropped by writes
    x = torch.randint(0, 64, (8000,), dtype=torch.int32)
    K.histogram(x, 64, kernel=triton_trace.trace(K.make_histogram()), block=128)


def launch_add():
    K.add(torch.randn(1 << 16), torch.randn(1 << 16), kernel=triton_trace.trace(K.make_add()), block=128)


@triton.jit
def _strided_streams(x_ptr, y_ptr, z_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    # each line once: a strided read (sectors left out), a store of every element, a far-and-near atomic
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs * STRIDE, mask=m, other=0.0)
    tl.store(y_ptr + offs, x * 2, mask=m)
    tl.atomic_add(z_ptr + offs, x, mask=m)


def launch_strided():
    n = 5000                       # a masked tail
    triton_trace.trace(_strided_streams)[(triton.cdiv(n, 128),)](torch.randn(4 * n), torch.empty(n), torch.zeros(n),
                                                                 n, STRIDE=4, BLOCK=128)


def launch_transpose():
    K.transpose(torch.randn(192, 160), kernel=triton_trace.trace(K.make_transpose()), block_m=32, block_n=32)


def launch_add_tail():
    K.add(torch.randn(70_000), torch.randn(70_000), kernel=triton_trace.trace(K.make_add()), block=256)


@triton.jit
def _scale_rows(x_ptr, w_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # out[r] = x[r] * w: x and out lines once each, w's lines read by every program
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    r = tl.program_id(0)
    x = tl.load(x_ptr + r * n_cols + cols, mask=m)
    tl.store(out_ptr + r * n_cols + cols, x * tl.load(w_ptr + cols, mask=m), mask=m)


def launch_scale():
    x = torch.randn(300, 192)     # rows of whole lines: only w's lines repeat
    triton_trace.trace(_scale_rows)[(300,)](x, torch.randn(192), torch.empty_like(x), 192, BLOCK=256)


def random_stream(rng, n):
    lines = rng.integers(0, int(rng.integers(2, 80)), n)
    n_sets = int(rng.choice([2, 4, 8]))
    sets = (lines * 7 + rng.integers(0, 2, n) * (rng.random(n) < 0.3)) % n_sets    # a line in two sets: copies
    kind = ((rng.integers(0, 16, n) << 3) | (rng.integers(0, 2, n) << 2) | (rng.integers(0, 2, n) << 1)
            | (rng.random(n) < 0.3)).astype(np.uint8)
    again = np.maximum(np.arange(n) - (rng.random(n) < 0.3), 0)      # a third repeat the access before them
    return n_sets, sets[again], lines[again], kind[again]


def step_windows(l2, sets, lines, kind, cuts):
    """Per access (fetched, made dirty, found valid), the windows stepped one after the other."""
    out = np.zeros((3, len(sets)), dtype=np.int64)
    for a, b in zip(cuts[:-1], cuts[1:]):
        k = kind[a:b]
        out[2, a:b] = lockstep._POPCOUNT[k >> 3] * ((k >> 2) & 1)      # an access left out repeats: it hits
        stepped, got, made, found = l2.steps(sets[a:b], lines[a:b], k)
        out[0, a + stepped], out[1, a + stepped], out[2, a + stepped] = got, made, found
    return out
