"""Dataflow provenance on loops (record/memory/dataflow.py): a state carried across the trips of a loop is fed by
every trip's load, and carries one tag per static load op however many trips ran (a range of executions),
so a recurrent kernel's ops cost the same at every trip.

The fed elements are asked of view/feeds.py, the answer a user sees, and compared with the elements computed
here from each kernel's own offsets: x[t, j] for every trip t of ``h = h * decay + x[t]``, q's row t with k's
rows 0..t and v's column j up to t for a retention step, A's row i and B's column j for a K loop.
"""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers.source import line_of
from triton_trace.record.memory.dataflow import Dataflow
from triton_trace.view.feeds import feeds_payload
from triton_trace.view.lookup import TraceIndex


@triton.jit
def recurrent_kernel(x_ptr, out_ptr, T, sx, decay, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    h = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in range(T):
        h = h * decay + tl.load(x_ptr + t * sx + offs)
    tl.store(out_ptr + offs, h)


@triton.jit
def alternating_kernel(x_ptr, even_ptr, odd_ptr, T, sx, BLOCK: tl.constexpr):
    """Each trip's load feeds one of two states: the even trips one, the odd trips the other."""
    offs = tl.arange(0, BLOCK)
    even = tl.zeros((BLOCK,), dtype=tl.float32)
    odd = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in range(T):
        v = tl.load(x_ptr + t * sx + offs)
        if t % 2 == 0:
            even = even * 0.5 + v
        else:
            odd = odd * 0.5 + v
    tl.store(even_ptr + offs, even)
    tl.store(odd_ptr + offs, odd)


@triton.jit
def unrolled_kernel(x_ptr, out_ptr, T, sx, BLOCK: tl.constexpr):
    """One load line run twice a trip (an unrolled inner loop): its executions 2t and 2t + 1."""
    offs = tl.arange(0, BLOCK)
    h = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in range(T):
        for u in tl.static_range(2):
            h = h * 0.5 + tl.load(x_ptr + (2 * t + u) * sx + offs)
    tl.store(out_ptr + offs, h)


@triton.jit
def retention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, T, decay, D: tl.constexpr):
    """fla's fused recurrent retention, one head a program: h_t = decay h_{t-1} + k_t v_t^T, o_t = q_t h_t."""
    base = tl.program_id(0) * T * D
    r = tl.arange(0, D)
    h = tl.zeros((D, D), dtype=tl.float32)
    for t in range(T):
        q = tl.load(q_ptr + base + t * D + r)
        k = tl.load(k_ptr + base + t * D + r)
        v = tl.load(v_ptr + base + t * D + r)
        h = h * decay + k[:, None] * v[None, :]
        tl.store(o_ptr + base + t * D + r, tl.sum(h * q[:, None], axis=0))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, K, sam, sak, sbk, sbn, scm, scn,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc)


BATCH = pytest.mark.parametrize("batch", [True, False], ids=["batched", "one-at-a-time"])


def _traced(batch: bool, kernel, grid, *args, **kw) -> triton_trace.Trace:
    triton_trace.reset()
    triton_trace.trace(batch=batch)(kernel)[grid](*args, **kw)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr


def _feeds(tr, t: int, index) -> dict:
    """Load name -> its feed of ``index`` of tensor ``t`` (the launch's one write of it)."""
    d = feeds_payload(TraceIndex(tr), 0, t, tuple(index))
    assert len(d["writes"]) == 1
    out = {}
    for f in d["feeds"]:
        assert f["name"] not in out and (f["how"], f["role"], f["truncated"]) == ("traced", "value", False)
        out[f["name"]] = f
    return out


def _elements(feed) -> set:
    return {tuple(ix) for ix in feed["indices"]}


@BATCH
@pytest.mark.parametrize("j", [0, 5, 20, 31])
def test_a_recurrent_state_is_fed_by_the_load_of_every_trip(batch, j):
    T, N, BLOCK = 37, 32, 16
    x, out = torch.randn(T, N), torch.empty(N)
    tr = _traced(batch, recurrent_kernel, (N // BLOCK,), x, out, T, x.stride(0), 0.5, BLOCK=BLOCK)
    want = torch.zeros(N)
    for t in range(T):
        want = want * 0.5 + x[t]
    torch.testing.assert_close(out, want)
    (x_feed,) = _feeds(tr, 1, (j,)).values()
    assert _elements(x_feed) == {(t, j) for t in range(T)}
    assert (x_feed["trips"], x_feed["of"], x_feed["elements"]) == (T, T, T)
    assert x_feed["line"] == line_of(recurrent_kernel, "tl.load")


@BATCH
@pytest.mark.parametrize("T", [9, 40])
def test_a_load_feeding_two_states_by_turns(batch, T):
    N = 16
    x = torch.randn(T, N)
    even, odd = torch.empty(N), torch.empty(N)
    tr = _traced(batch, alternating_kernel, (1,), x, even, odd, T, x.stride(0), BLOCK=N)
    for tensor, first in ((1, 0), (2, 1)):
        (fed,) = _feeds(tr, tensor, (3,)).values()
        trips = range(first, T, 2)
        assert _elements(fed) == {(t, 3) for t in trips}
        assert (fed["trips"], fed["of"]) == (len(trips), T)


@BATCH
def test_a_load_line_run_twice_a_trip(batch):
    T, N = 21, 16
    x, out = torch.randn(2 * T, N), torch.empty(N)
    tr = _traced(batch, unrolled_kernel, (1,), x, out, T, x.stride(0), BLOCK=N)
    (fed,) = _feeds(tr, 1, (7,)).values()
    assert _elements(fed) == {(s, 7) for s in range(2 * T)}
    assert (fed["trips"], fed["of"]) == (2 * T, 2 * T)


@BATCH
@pytest.mark.parametrize("b, t, j", [(0, 0, 0), (1, 13, 5), (2, 29, 15), (1, 30, 9)])
def test_a_retention_step_is_fed_by_its_query_and_every_key_and_value_so_far(batch, b, t, j):
    B, T, D = 3, 31, 16
    q, k, v = torch.randn(B, T, D), torch.randn(B, T, D), torch.randn(B, T, D)
    o = torch.empty(B, T, D)
    tr = _traced(batch, retention_kernel, (B,), q, k, v, o, T, 0.9, D=D)
    h = torch.zeros(B, D, D)
    for s in range(T):
        h = h * 0.9 + k[:, s, :, None] * v[:, s, None, :]
        torch.testing.assert_close(o[:, s], (h * q[:, s, :, None]).sum(1))
    fed = _feeds(tr, 3, (b, t, j))
    assert sorted(fed) == ["k_ptr", "q_ptr", "v_ptr"]
    assert _elements(fed["q_ptr"]) == {(b, t, i) for i in range(D)}
    assert _elements(fed["k_ptr"]) == {(b, s, i) for s in range(t + 1) for i in range(D)}
    assert _elements(fed["v_ptr"]) == {(b, s, j) for s in range(t + 1)}
    assert (fed["q_ptr"]["trips"], fed["q_ptr"]["of"]) == (1, t + 1)
    assert (fed["k_ptr"]["trips"], fed["v_ptr"]["trips"], fed["v_ptr"]["of"]) == (t + 1, t + 1, t + 1)


M, N, K, BM, BN, BK = 32, 32, 128, 16, 16, 16


@BATCH
@pytest.mark.parametrize("i, j", [(0, 0), (5, 7), (31, 31), (17, 20)])
def test_a_k_loop_element_is_fed_by_its_row_of_a_and_column_of_b_on_every_trip(batch, i, j):
    a, b = torch.randn(M, K), torch.randn(N, K).t()           # B a transposed view: strides (1, K)
    c = torch.empty(M, N)
    tr = _traced(batch, matmul_kernel, (M // BM, N // BN), a, b, c, K, *a.stride(), *b.stride(), *c.stride(),
                 BM=BM, BN=BN, BK=BK)
    torch.testing.assert_close(c, a @ b, atol=1e-3, rtol=1e-3)
    fed = _feeds(tr, 2, (i, j))
    assert _elements(fed["a_ptr"]) == {(i, kk) for kk in range(K)}
    assert _elements(fed["b_ptr"]) == {(kk, j) for kk in range(K)}
    for f in fed.values():
        assert (f["trips"], f["of"], f["box"]) == (K // BK, K // BK, True)
    # the store's facts: per load line, every execution before it (first 0, last -1, one apart)
    facts = [(f["load_line"], f["first"], f["last"], f["step"], f["dims"]) for f in tr.launches[0].meta["dataflow"]]
    assert sorted(facts) == [(line_of(matmul_kernel, "a = tl.load"), 0, -1, 1, [0, -1]),
                             (line_of(matmul_kernel, "b = tl.load"), 0, -1, 1, [-1, 1])]


def _tags_at_writes(monkeypatch, kernel, grid, *args, **kw) -> list:
    """How many tags each write's stored value carried, as the monitor is handed them."""
    seen = []
    wrote = Dataflow.wrote

    def counting(self, events, files, w, fed):
        seen.append(len(fed["value"]))
        return wrote(self, events, files, w, fed)
    monkeypatch.setattr(Dataflow, "wrote", counting)
    _traced(True, kernel, grid, *args, **kw)
    return seen


@pytest.mark.parametrize("case", ["recurrent", "unrolled", "retention", "matmul"])
def test_a_state_carries_a_tag_per_load_line_however_many_trips(monkeypatch, case):
    """One tag per (load line, lane map) at T = 16 and at T = 256: a trip's ops cost the same at every trip."""
    counts = []
    for T in (16, 256):
        if case == "recurrent":
            x = torch.randn(T, 16)
            seen = _tags_at_writes(monkeypatch, recurrent_kernel, (1,), x, torch.empty(16), T, 16, 0.5, BLOCK=16)
        elif case == "unrolled":
            x = torch.randn(2 * T, 16)
            seen = _tags_at_writes(monkeypatch, unrolled_kernel, (1,), x, torch.empty(16), T, 16, BLOCK=16)
        elif case == "retention":
            q, k, v = torch.randn(3, 1, T, 16)
            seen = _tags_at_writes(monkeypatch, retention_kernel, (1,), q, k, v, torch.empty(1, T, 16), T, 0.9, D=16)
        else:
            a, b = torch.randn(16, T), torch.randn(T, 16)
            seen = _tags_at_writes(monkeypatch, matmul_kernel, (1, 1), a, b, torch.empty(16, 16), T, *a.stride(),
                                   *b.stride(), 16, 1, BM=16, BN=16, BK=16)
        counts.append(seen)
    want = {"recurrent": 1, "unrolled": 1, "retention": 3, "matmul": 2}[case]     # q, k, v; A and B
    assert set(counts[0]) == set(counts[1]) == {want}


def test_joined_runs_cover_exactly_the_places_of_their_parts():
    """feedtags.merge_runs on random runs, against the places listed one by one."""
    import random

    from triton_trace.record.memory.feedtags import merge_runs
    places = lambda runs: {p for a, b, k in runs for p in range(a, b + 1, k)}
    rng = random.Random(0)
    for _ in range(2000):
        runs = []
        for _ in range(rng.randint(1, 5)):
            first, step = rng.randint(0, 300), rng.randint(1, 4)
            runs.append((first, first + step * rng.randint(0, 40), step))
        got = merge_runs(runs)
        assert places(got) == places(runs), runs
        assert all(a <= b and k >= 1 and (b - a) % k == 0 for a, b, k in got)
    # a recurrent state's run and its trip's place, and two interleaved halves, join into one run
    assert merge_runs([(0, 499, 1), (500, 500, 1)]) == [(0, 500, 1)]
    assert merge_runs([(0, 998, 2), (1, 999, 2)]) == [(0, 998, 2), (1, 999, 2)]      # 1000 places: kept apart
    assert merge_runs([(0, 40, 2), (1, 41, 2)]) == [(0, 41, 1)]                        # few: re-cut from the places
