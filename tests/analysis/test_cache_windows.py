"""The L2 simulation runs the stream in windows of whole waves, carrying the cache from one to the next
(the next window's L1 filter computed beside, on a second core): every count must equal simulating the
stream at once, whatever the window size. A stream in which no line repeats takes a closed form instead
(analysis/memory/streaming.py): every count must equal the stepped simulation's, on caches small enough that
lines are evicted and the dirty limit cleans. These are the numpy passes' (tests/analysis/test_cache_jit.py checks the
compiled loops against them)."""
import dataclasses

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.analysis.memory import cache, jitsteps, streaming
from triton_trace.analysis import context
from triton_trace.analysis.memory.cache import issue_order, simulate
from triton_trace.analysis.memory.coalescing import coalesce
from triton_trace.analysis.context import LaunchContext, Params
import kernels as K

from helpers.cache_streams import (assert_same_counts, launch_add, launch_add_tail, launch_histogram, launch_matmul,
                                   launch_scale, launch_strided, launch_transpose)


@pytest.fixture(autouse=True)
def numpy_passes(monkeypatch):
    monkeypatch.setattr(jitsteps, "ENABLED", False)


@pytest.mark.parametrize("run", [launch_matmul, launch_histogram, launch_add])
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


@pytest.mark.parametrize("run", [launch_add_tail, launch_strided, launch_transpose, launch_scale, launch_matmul,
                                 launch_histogram])
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
    if run is launch_scale:              # w's lines repeat: their sets are stepped, the others take the closed form
        assert whole is None         # (unless w's sets are half of a tiny cache's: all stepped)
        assert (some is not None and 0 < some.stepped.mean() < 0.5) or (some is None and fast.sets <= 16)
    elif run in (launch_matmul, launch_histogram):      # tiles and bins read again and again
        assert whole is None and (some is not None or fast.sets <= 256)
    else:                          # no line repeats: the closed form for the whole stream
        assert whole is not None
    monkeypatch.setattr(context, "SHORTCUTS", False)
    slow = simulate(ctx, co, order)
    assert taken[-1] == (None, None)
    if params and run is not launch_histogram:    # small caches evict and clean: the write-backs are exercised
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
