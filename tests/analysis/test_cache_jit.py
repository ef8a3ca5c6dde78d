"""The cache simulation's compiled loops (analysis/memory/jitsteps.py, l1jit.py: loops.c) against its numpy passes (lockstep.py's lock
step, cache.py's L1 filter, streaming.py's closed form): two implementations of one cache, so every count
must agree, on random streams (evictions, the dirty limit, far copies dropped by writes, repeated accesses,
cut into windows) and on the streams of real kernels through the whole simulation (L1, far copies, windows
of waves, streams in which no line repeats)."""

import numpy as np
import pytest

import triton_trace
from triton_trace.analysis.memory import cache, jitsteps, lockstep
from triton_trace.analysis import parallel
from triton_trace.analysis.memory.cache import issue_order, simulate
from triton_trace.analysis.memory.coalescing import coalesce
from triton_trace.analysis.context import LaunchContext, Params

from helpers.cache_streams import (assert_same_counts, launch_add_tail, launch_histogram, launch_matmul, launch_scale,
                                   launch_strided, launch_transpose, random_stream, step_windows)

pytestmark = pytest.mark.skipif(not jitsteps.available(), reason="the loops cannot be built here (no C compiler, "
                                "or TRITON_TRACE_NO_JIT is set)")


@pytest.mark.parametrize("seed", range(24))
def test_random_streams_count_what_the_lock_step_counts(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    n_sets, sets, lines, kind = random_stream(rng, n)
    ways = int(rng.integers(1, 5))
    cuts = [0, *sorted(rng.integers(0, n, 2)), n]
    dirty_ways = [None, 1, 2][seed % 3]
    runs = []
    for jit in (False, True):
        l2 = lockstep.L2(n_sets, ways, [np.int64, np.int32][seed % 2], fetch_sectors=1 + seed % 2,
                         dirty_ways=dirty_ways, jit=jit)
        runs.append((step_windows(l2, sets, lines, kind, cuts), l2.evicted))
    (want, want_ev), (got, got_ev) = runs
    np.testing.assert_array_equal(got, want)
    assert got_ev == want_ev
    assert want[0].sum() > 0 and want[2].sum() > 0      # (the streams fetch and hit)


def test_a_stream_that_evicts_and_cleans_writes_back_what_the_lock_step_does():
    rng = np.random.default_rng(7)
    n = 20000
    lines = rng.integers(0, 400, n)
    kind = ((np.full(n, 15) << 3) | (rng.integers(0, 2, n) << 2) | (2 * (rng.random(n) < 0.5))).astype(np.uint8)
    ev = []
    for jit in (False, True):
        l2 = lockstep.L2(16, 4, np.int64, fetch_sectors=2, dirty_ways=2, jit=jit)
        step_windows(l2, lines % 16, lines, kind, [0, n])
        ev.append(l2.evicted)
    assert ev[0] == ev[1] > 0


KERNELS = [launch_add_tail, launch_strided, launch_transpose, launch_scale, launch_matmul, launch_histogram]


def _made(made: list, table: bool):
    """L2.__init__ noting whether it steps in compiled loops; ``table``: with its table of every line's home
    set (built for streams long beside the address space: these short ones would not get it)."""
    real = lockstep.L2.__init__

    def init(self, *a, **k):
        made.append(k["jit"])
        if table and k.get("lines") is None:
            k["lines"] = 1 << 22
        real(self, *a, **k)
    return init


@pytest.mark.parametrize("run", KERNELS)
@pytest.mark.parametrize("params", [{}, {"l2_bytes": 1 << 15, "programs_in_flight": 8},
                                    {"l2_bytes": 1 << 17, "l2_ways": 4, "programs_in_flight": 3}])
@pytest.mark.parametrize("table", [False, True], ids=["hashed", "table"])
@pytest.mark.parametrize("split", [False, True], ids=["one_loop", "partitions_on_two_threads"])
def test_kernels_count_the_same_through_the_compiled_loop(run, params, table, split, monkeypatch):
    # split: every window's L2 lookups taken partition by partition on two threads (jitsteps.entries)
    monkeypatch.setattr(jitsteps, "SPLIT_ENTRIES", 1 if split else 1 << 62)
    monkeypatch.setattr(parallel, "cores", lambda: 2)
    triton_trace.reset()
    run()
    ctx = LaunchContext(triton_trace.current_trace().launches[0], 0, Params(**params).resolved())
    order = issue_order(ctx)
    co = coalesce(ctx, order)
    made = []
    monkeypatch.setattr(lockstep.L2, "__init__", _made(made, table))
    monkeypatch.setattr(jitsteps, "use", lambda n: jitsteps.ENABLED)
    closed = []
    real_open = jitsteps.open_stream
    monkeypatch.setattr(jitsteps, "open_stream", lambda *a: closed.append(real_open(*a)) or closed[-1])
    compiled = simulate(ctx, co, order, window=max(1, len(co.stream_row) // 3))     # three windows or so
    # no line repeats: the closed form's counts (else the pass stops at the first repeat and every set is stepped)
    assert [isinstance(c, tuple) for c in closed] == [run in (launch_add_tail, launch_strided, launch_transpose)]
    monkeypatch.setattr(jitsteps, "ENABLED", False)
    numpy_only = simulate(ctx, co, order, window=max(1, len(co.stream_row) // 3))
    assert made == [True, False] or (made == [] and len(co.stream_row) == 0)
    assert numpy_only.read_lookups > 0
    if params and run is not launch_histogram:    # small caches evict and clean: the write-backs are exercised
        assert numpy_only.evicted_sectors > 0
    assert_same_counts(compiled, numpy_only)


def test_a_whole_report_is_the_same_with_and_without_the_compiled_loop(monkeypatch):
    triton_trace.reset()
    launch_matmul()
    tr = triton_trace.current_trace()
    monkeypatch.setattr(jitsteps, "use", lambda n: jitsteps.ENABLED)
    with_jit = triton_trace.analyze(tr, layouts="model", l2_bytes=1 << 16).to_dict()
    monkeypatch.setattr(jitsteps, "ENABLED", False)
    without = triton_trace.analyze(tr, layouts="model", l2_bytes=1 << 16).to_dict()
    assert with_jit == without
    assert with_jit["launches"][0]["metrics"]["dram_read_bytes"] > 0


def test_every_stream_takes_the_compiled_loops(monkeypatch):
    made = []
    monkeypatch.setattr(lockstep.L2, "__init__", _made(made, False))
    triton_trace.reset()
    launch_matmul()                    # a 256^3 matmul: short, and still no numpy passes
    triton_trace.analyze(triton_trace.current_trace(), layouts="model")
    assert made and all(made)            # (what-if variants simulate again)


@pytest.mark.parametrize("seed", range(16))
def test_the_l1_filter_sends_on_what_the_numpy_filter_does(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    # L1s of a later wave (numbered from hundreds), some of which have no entries in the window
    owner = rng.integers(0, int(rng.integers(1, 6)), n) * int(rng.integers(1, 3)) + [0, 500][seed % 2]
    line = rng.integers(0, int(rng.integers(1, 40)), n)
    if seed % 4 == 1:                                 # lines far apart: the table holds the distinct ones
        line = line * int(rng.integers(1 << 20, 1 << 30))
    elif seed % 4 == 2:                               # lines of a tensor far into the address space
        line = line + int(rng.integers(1 << 20, 1 << 30))
    mask = rng.integers(0, 16, n).astype(np.uint8)
    wr = rng.random(n) < 0.2                          # stores, and atomics (loads that write)
    load = ~wr | (rng.random(n) < 0.1)
    # an L1 of 5 or 20 lines: some owners load more than theirs holds and filter nothing
    monkeypatch.setattr(cache, "L1_BYTES", [128 * 5, 128 * 20, 1 << 18][seed % 3])
    want = cache._l1_filter(owner, line, mask, wr, load)
    got = cache._l1_filter(owner, line, mask, wr, load, jit=True)
    np.testing.assert_array_equal(got, want)
    if seed % 3 == 2:                                 # an L1 that holds everything serves repeated loads
        assert (want != mask).any()
