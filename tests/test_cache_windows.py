"""The L2 simulation runs the stream in windows of whole waves, carrying the cache from one to the next
(the next window's L1 filter computed beside, on a second core): every count must equal simulating the
stream at once, whatever the window size. A stream in which no line repeats takes a closed form instead
(analysis/memory/streaming.py): every count must equal the stepped simulation's, on caches small enough that
lines are evicted and the dirty limit cleans. These are the numpy passes' (tests/test_cache_jit.py checks the
compiled loops against them)."""
import dataclasses

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis.memory import cache, jitsteps, streaming
from triton_trace.analysis import context
from triton_trace.analysis.memory.cache import issue_order, simulate
from triton_trace.analysis.memory.coalescing import coalesce
from triton_trace.analysis.context import LaunchContext, Params

import kernels as K


@pytest.fixture(autouse=True)
def numpy_passes(monkeypatch):
    monkeypatch.setattr(jitsteps, "ENABLED", False)


def assert_same_counts(got, want):
    """Every field of two CacheResults equal."""
    for f in dataclasses.fields(want):
        np.testing.assert_array_equal(getattr(got, f.name), getattr(want, f.name), err_msg=f.name)


def _matmul():
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    K.matmul(a, b, kernel=triton_trace.trace(K.make_matmul()), block_m=32, block_n=32, block_k=32, group_m=4)


def _histogram():       # atomics: reads and writes at L2, far-partition copies dropped by writes
    x = torch.randint(0, 64, (8000,), dtype=torch.int32)
    K.histogram(x, 64, kernel=triton_trace.trace(K.make_histogram()), block=128)


def _add():
    K.add(torch.randn(1 << 16), torch.randn(1 << 16), kernel=triton_trace.trace(K.make_add()), block=128)


@pytest.mark.parametrize("run", [_matmul, _histogram, _add])
@pytest.mark.parametrize("params", [{}, {"l2_bytes": 1 << 15, "programs_in_flight": 8}])
@pytest.mark.parametrize("threads", ["1", "2"])     # the next window's L1 filter in the caller's thread / beside
def test_windows_of_waves_count_exactly_what_one_pass_counts(run, params, threads, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_THREADS", threads)
    triton_trace.reset()
    run()
    ctx = LaunchContext(triton_trace.current_trace().launches[0], 0, Params(**params).resolved())
    order = issue_order(ctx)
    co = coalesce(ctx, order)
    monkeypatch.setattr(cache, "L2_SLICE", 1 << 40)
    whole = simulate(ctx, co, order, window=1 << 40)
    assert whole.read_lookups > 0
    for window, l2_slice in ((1, 1 << 40), (777, 1 << 40), (1 << 40, 97), (5, 3)):
        monkeypatch.setattr(cache, "L2_SLICE", l2_slice)
        got = simulate(ctx, co, order, window=window)
        for f in dataclasses.fields(whole):
            np.testing.assert_array_equal(getattr(got, f.name), getattr(whole, f.name), err_msg=f"{f.name}, window {window}")



@triton.jit
def _strided_streams(x_ptr, y_ptr, z_ptr, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    # each line once: a strided read (sectors left out), a store of every element, a far-and-near atomic
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs * STRIDE, mask=m, other=0.0)
    tl.store(y_ptr + offs, x * 2, mask=m)
    tl.atomic_add(z_ptr + offs, x, mask=m)


def _strided():
    n = 5000                       # a masked tail
    triton_trace.trace(_strided_streams)[(triton.cdiv(n, 128),)](torch.randn(4 * n), torch.empty(n), torch.zeros(n),
                                                                 n, STRIDE=4, BLOCK=128)


def _transpose():
    K.transpose(torch.randn(192, 160), kernel=triton_trace.trace(K.make_transpose()), block_m=32, block_n=32)


def _add_tail():
    K.add(torch.randn(70_000), torch.randn(70_000), kernel=triton_trace.trace(K.make_add()), block=256)


@triton.jit
def _scale_rows(x_ptr, w_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    # out[r] = x[r] * w: x and out lines once each, w's lines read by every program
    cols = tl.arange(0, BLOCK)
    m = cols < n_cols
    r = tl.program_id(0)
    x = tl.load(x_ptr + r * n_cols + cols, mask=m)
    tl.store(out_ptr + r * n_cols + cols, x * tl.load(w_ptr + cols, mask=m), mask=m)


def _scale():
    x = torch.randn(300, 192)     # rows of whole lines: only w's lines repeat
    triton_trace.trace(_scale_rows)[(300,)](x, torch.randn(192), torch.empty_like(x), 192, BLOCK=256)


@pytest.mark.parametrize("run", [_add_tail, _strided, _transpose, _scale, _matmul, _histogram])
@pytest.mark.parametrize("params", [{}, {"l2_bytes": 1 << 15, "programs_in_flight": 8},
                                    {"l2_bytes": 1 << 17, "l2_ways": 4, "programs_in_flight": 3}])
def test_streams_without_repeated_lines_count_what_the_stepped_simulation_counts(run, params, monkeypatch):
    triton_trace.reset()
    run()
    ctx = LaunchContext(triton_trace.current_trace().launches[0], 0, Params(**params).resolved())
    order = issue_order(ctx)
    co = coalesce(ctx, order)
    taken = []
    real = streaming.plan
    monkeypatch.setattr(streaming, "plan", lambda *a: taken.append(real(*a)) or taken[-1])
    fast = simulate(ctx, co, order)
    whole, some = taken[0]
    if run is _scale:              # w's lines repeat: their sets are stepped, the others take the closed form
        assert whole is None         # (unless w's sets are half of a tiny cache's: all stepped)
        assert (some is not None and 0 < some.stepped.mean() < 0.5) or (some is None and fast.sets <= 16)
    elif run in (_matmul, _histogram):      # tiles and bins read again and again
        assert whole is None and (some is not None or fast.sets <= 256)
    else:                          # no line repeats: the closed form for the whole stream
        assert whole is not None
    monkeypatch.setattr(context, "SHORTCUTS", False)
    slow = simulate(ctx, co, order)
    assert taken[-1] == (None, None)
    if params and run is not _histogram:    # small caches evict and clean: the write-backs are exercised
        assert slow.evicted_sectors > 0
    assert_same_counts(fast, slow)


def test_a_stream_whose_lines_repeat_everywhere_is_stepped(monkeypatch):
    triton_trace.reset()
    K.matmul(torch.randn(512, 512), torch.randn(512, 512), kernel=triton_trace.trace(K.make_matmul()), block_m=32,
             block_n=32, block_k=32, group_m=4)
    ctx = LaunchContext(triton_trace.current_trace().launches[0], 0, Params().resolved())
    order = issue_order(ctx)
    co = coalesce(ctx, order)
    taken = []
    real = streaming.plan
    monkeypatch.setattr(streaming, "plan", lambda *a: taken.append(real(*a)) or taken[-1])
    simulate(ctx, co, order)
    assert taken == [(None, None)]        # each line read 16 times: nothing is even counted
