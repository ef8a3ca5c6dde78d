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


@pytest.mark.parametrize("top", [1, 300, 1 << 16, (1 << 16) + 1, 1 << 28, 1 << 45])
def test_radix_argsort_is_numpys_stable_argsort(top):
    from triton_trace.analysis.context import stable_argsort
    rng = np.random.default_rng(top)
    for n in (0, 1, 7, 50_000):
        key = rng.integers(0, top, n)
        key[: n // 3] = key[n // 3: 2 * (n // 3)]           # many equal keys: their order must be kept
        for dtype in (np.int64, np.int32, np.uint32):
            if top > 1 << 31 and dtype != np.int64:
                continue
            k = key.astype(dtype)
            np.testing.assert_array_equal(stable_argsort(k), np.argsort(k, kind="stable"))
    neg = rng.integers(-5, 5, 1000)                          # negative keys: numpy's own sort
    np.testing.assert_array_equal(stable_argsort(neg), np.argsort(neg, kind="stable"))
