"""The L2 simulation runs the stream in windows of whole waves, carrying the cache from one to the next
(the next window's L1 filter computed beside, on a second core): every count must equal simulating the
stream at once, whatever the window size."""
import dataclasses

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.analysis import cache
from triton_trace.analysis.cache import issue_order, simulate
from triton_trace.analysis.coalescing import coalesce
from triton_trace.analysis.context import LaunchContext, Params

import kernels as K


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

