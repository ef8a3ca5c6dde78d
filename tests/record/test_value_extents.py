"""Exact extents of the value checks (issue 41, item 1): an int32 wrap, an integer division by zero and a lane
conflict that reach some lanes of some programs name every program and every element, counted against
numpy; a division by zero that only decides a ``tl.where``, a mask or an ``if`` is a finding too. Each
beside its fixed twin (no finding). Kernels: tests/kernels/value_extents.py, the bug's line marked ``# BUG``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import triton_trace
from helpers.findings import runs, traced_report
from helpers.source import marked_line
from kernels import value_extents as K

I32_MAX = (1 << 31) - 1


def only(found, kind, besides=()):
    """The one finding of ``kind``, the others all of the kinds ``besides``."""
    got = [f for f in found if f.kind == kind]
    assert len(got) == 1 and all(f.kind in besides for f in found if f.kind != kind), \
        [(f.kind, f.message) for f in found]
    return got[0]


def program_runs(ids) -> list:
    return [[[a, 0, 0], [b, 0, 0]] for a, b in runs(ids)]


def check_programs(extent, progs):
    assert extent["programs"]["count"] == len(progs) and extent["programs"]["ranges"] == program_runs(progs)[:8]
    assert extent["programs"]["first"] == [[int(p), 0, 0] for p in progs[:8]]


def check_elements(f, offsets, lanes):
    """The finding's elements are exactly ``offsets`` (distinct, sorted), reached by ``lanes`` accesses."""
    el = f.extent["elements"]
    assert el["count"] == len(offsets) and el["lanes"] == lanes and el["ranges"] == runs(offsets)[:8], el
    assert f.extent["exact"] and "not counted" not in f.message and "at least" not in f.message
    assert f"{len(offsets)} element(s)" in f.message


# -- an int32 wrap in the last lanes of one program and every lane of the later ones ---------------------------
BIG, BLOCK, LIMIT, GRID, N = 715_827_882, 16, 13, 6, 1024       # 3 * BIG fits int32, 3 * BIG + 2 does not


def wrap_expectation():
    p, lane = np.meshgrid(np.arange(GRID), np.arange(BLOCK), indexing="ij")
    exact = p.astype(np.int64) * BIG + lane
    bad = (exact > I32_MAX) & (lane < LIMIT)                       # the store's mask leaves lanes >= LIMIT out
    return p, lane, exact.astype(np.int32), bad                     # astype: what a GPU's int32 holds


@pytest.mark.parametrize("batch", [True, False])
def test_a_wrapped_offset_stored_names_every_wrapped_lane_and_its_value(batch):
    p, lane, wrapped, bad = wrap_expectation()
    assert 0 < bad[3].sum() < LIMIT and bad[:3].sum() == 0          # some lanes of program 3, all of 4 and 5
    out = torch.zeros(GRID * BLOCK, dtype=torch.int32)
    _, found = traced_report(K.wrapped_offsets, (GRID,), out, N, BIG=BIG, BLOCK=BLOCK, LIMIT=LIMIT,
                             AS_ADDRESS=False, batch=batch)
    f = only(found.findings, "overflow")
    assert f.line == marked_line(K.wrapped_offsets) and f.count == int(bad.sum())
    check_programs(f.extent, np.unique(p[bad]))
    elements = (p * BLOCK + lane)[bad]                              # row-major: the order the lanes ran in
    check_elements(f, elements, int(bad.sum()))
    first = f.extent["elements"]["first"]
    assert [e["offset"] for e in first] == elements[:8].tolist()
    assert [e["value"] for e in first] == wrapped[bad][:8].tolist()
    out64 = torch.zeros(GRID * BLOCK, dtype=torch.int64)
    _, fixed = traced_report(K.wrapped_offsets_int64, (GRID,), out64, N, BIG=BIG, BLOCK=BLOCK, LIMIT=LIMIT,
                             AS_ADDRESS=False, batch=batch)
    assert fixed.findings == ()
    want = np.where(lane < LIMIT, p.astype(np.int64) * BIG + lane, 0).reshape(-1)
    assert np.array_equal(out64.numpy(), want)


@pytest.mark.parametrize("batch", [True, False])
def test_a_wrapped_offset_used_as_an_address_names_the_distinct_elements_it_reached(batch):
    p, lane, wrapped, bad = wrap_expectation()
    out = torch.zeros(N, dtype=torch.int32)
    _, found = traced_report(K.wrapped_offsets, (GRID,), out, N, BIG=BIG, BLOCK=BLOCK, LIMIT=LIMIT,
                             AS_ADDRESS=True, batch=batch)
    f = only(found.findings, "overflow", besides=("race",))     # (programs meet at their wrapped indices)
    assert "addressed memory ('out_ptr')" in f.message and f.count == int(bad.sum())
    index = wrapped.astype(np.int64) & (N - 1)
    check_elements(f, np.unique(index[bad]), int(bad.sum()))
    first = f.extent["elements"]["first"]
    assert [e["offset"] for e in first] == index[bad][:8].tolist()
    assert [e["value"] for e in first] == lane[bad][:8].tolist()
    _, fixed = traced_report(K.wrapped_offsets_int64, (GRID,), torch.zeros(N, dtype=torch.int32), N, BIG=BIG,
                             BLOCK=BLOCK, LIMIT=LIMIT, AS_ADDRESS=True, batch=batch)
    assert [f.kind for f in fixed.findings] in ([], ["race"])


# -- a division by zero where a divisor tile holds zeros ---------------------------------------------------------
@pytest.mark.parametrize("batch", [True, False])
def test_a_division_by_zero_names_each_zero_divisor_element(batch):
    rng = np.random.default_rng(7)
    rows, cols = 10, 20
    a = rng.integers(-50, 50, (rows, cols)).astype(np.int32)
    d = rng.integers(1, 9, (rows, cols)).astype(np.int32)
    zeros = np.sort(rng.choice(rows * cols, 15, replace=False))
    d.reshape(-1)[zeros] = 0
    out = torch.zeros(rows * cols, dtype=torch.int32)
    _, found = traced_report(K.tile_quotients, (rows,), torch.from_numpy(a), torch.from_numpy(d), out, cols,
                             BLOCK=32, batch=batch)
    f = only(found.findings, "int_division")
    assert f.count == len(zeros) and "was stored to 'out_ptr'" in f.message
    check_programs(f.extent, np.unique(zeros // cols))
    check_elements(f, zeros, len(zeros))
    first = f.extent["elements"]["first"]
    assert [e["offset"] for e in first] == zeros[:8].tolist()
    assert [e["index"] for e in first] == [[int(z)] for z in zeros[:8]]
    assert [e["value"] for e in first] == out.numpy()[zeros[:8]].tolist()      # what the interpreter stored
    out = torch.zeros(rows * cols, dtype=torch.int32)
    _, fixed = traced_report(K.tile_quotients_guarded, (rows,), torch.from_numpy(a), torch.from_numpy(d), out,
                             cols, BLOCK=32, batch=batch)
    want = np.where(d != 0, np.trunc(a / np.where(d != 0, d, 1)), 0).astype(np.int32).reshape(-1)
    assert fixed.findings == () and np.array_equal(out.numpy(), want)
    out = torch.zeros(rows * cols, dtype=torch.int32)       # the quotients by zero divided, then discarded
    _, fixed = traced_report(K.tile_quotients_discarded, (rows,), torch.from_numpy(a), torch.from_numpy(d), out,
                             cols, BLOCK=32, batch=batch)
    assert fixed.findings == () and np.array_equal(out.numpy(), want)


# -- two lanes of one store, one address, two values -----------------------------------------------------------
def conflicts(slot: np.ndarray, v: np.ndarray) -> tuple:
    """(elements, lanes) of a scatter ``out[p * B + slot[p, i]] = v[p, i]``: every slot of a program two of
    whose lanes write different values, and the lanes writing those slots."""
    elements, lanes = [], 0
    for p in range(slot.shape[0]):
        for s in np.unique(slot[p]):
            at = slot[p] == s
            if len(np.unique(v[p][at])) > 1:
                elements.append(p * slot.shape[1] + int(s))
                lanes += int(at.sum())
    return np.array(elements, np.int64), lanes


@pytest.mark.parametrize("values", [True, False])
@pytest.mark.parametrize("batch", [True, False])
def test_a_lane_conflict_names_every_slot_and_lane_even_without_recorded_values(batch, values):
    rng = np.random.default_rng(11)
    programs, block = 12, 16
    slot = np.tile(np.arange(block, dtype=np.int32), (programs, 1))
    v = rng.integers(0, 1000, (programs, block)).astype(np.int32)
    for p in (1, 4, 5, 9):                   # some programs send a few lanes to a slot another lane writes
        lanes = rng.choice(block, 3, replace=False)
        slot[p, lanes] = slot[p, lanes[0]]
    slot[5, 7], v[5, 7] = slot[5, 8], v[5, 8]          # one shared slot with one value: fine
    elements, lanes = conflicts(slot, v)
    progs = np.unique(elements // block)
    triton_trace.reset()
    triton_trace.trace(batch=batch, values=values)(K.scatter_slots)[(programs,)](
        torch.from_numpy(slot), torch.from_numpy(v), torch.zeros(programs * block, dtype=torch.int32), BLOCK=block)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    f = only(triton_trace.analyze(trace, layouts="model", what_if=False).findings, "lane_conflict")
    assert f.count == lanes
    check_programs(f.extent, progs)
    check_elements(f, elements, lanes)
    _, fixed = traced_report(K.scatter_slots_fixed, (programs,), torch.from_numpy(slot), torch.from_numpy(v),
                             torch.zeros(programs * block, dtype=torch.int32), BLOCK=block, batch=batch)
    assert fixed.findings == ()


# -- a division by zero that only decides which lanes are kept ---------------------------------------------------
@pytest.mark.parametrize("as_mask", [False, True])
@pytest.mark.parametrize("batch", [True, False])
def test_a_division_by_zero_deciding_a_where_or_a_mask_is_a_finding(batch, as_mask):
    rng = np.random.default_rng(13)
    n, block = 200, 32                       # 7 programs, the last one's 24 tail lanes masked (divisor 0 there)
    a = rng.integers(1, 100, n).astype(np.int32)
    d = rng.integers(1, 5, n).astype(np.int32)
    zeros = np.sort(rng.choice(n, 9, replace=False))
    d[zeros] = 0
    x = torch.randn(n)
    args = (torch.from_numpy(a), torch.from_numpy(d), x)
    _, found = traced_report(K.keep_positive_quotients, ((n + block - 1) // block,), *args, torch.zeros(n), n,
                             BLOCK=block, AS_MASK=as_mask, batch=batch)
    f = only(found.findings, "int_division")
    assert f.line == marked_line(K.keep_positive_quotients) and f.count == len(zeros)
    if as_mask:
        assert "decided which lanes the store of 'out_ptr' masked" in f.message
    else:
        assert "decided which value each lane took in the tl.where" in f.message
    check_programs(f.extent, np.unique(zeros // block))
    check_elements(f, zeros, len(zeros))
    out = torch.zeros(n)
    _, fixed = traced_report(K.keep_positive_quotients_guarded, ((n + block - 1) // block,), *args, out, n,
                             BLOCK=block, AS_MASK=as_mask, batch=batch)
    assert fixed.findings == ()
    assert torch.equal(out, torch.where(torch.from_numpy((d != 0) & (a // np.maximum(d, 1) > 0)), x, 0.0))


# a few zeros: a batched chunk splits into the runs of programs that agree; every other program: both sides
# of the if run masked (record/divergence/branches.py), its truth never asked: the branch hands its condition
# to the check (divergence/masked.decided)


@pytest.mark.parametrize("zero", [[3, 17, 18, 30], list(range(0, 40, 2))])
@pytest.mark.parametrize("batch", [True, pytest.param(False, id="one-by-one")])
def test_a_division_by_zero_deciding_an_if_is_a_finding(batch, zero):
    grid = 40
    a = torch.arange(1, grid + 1, dtype=torch.int32)
    d = torch.ones(grid, dtype=torch.int32)
    d[zero] = 0
    _, found = traced_report(K.branch_on_quotient, (grid,), a, d, torch.zeros(grid), batch=batch)
    f = only(found.findings, "int_division")
    assert "decided control flow" in f.message and f.count == len(zero)
    check_programs(f.extent, np.array(zero))
    el = f.extent["elements"]
    assert el["count"] is None and "control flow" in el["not_counted"]
    out = torch.zeros(grid)
    _, fixed = traced_report(K.branch_on_quotient_guarded, (grid,), a, d, out, batch=batch)
    assert fixed.findings == () and torch.equal(out, torch.where(a // d.clamp(min=1) > 0, 1.0, 2.0))


# -- the lanes in a trace file, an older trace without them, a launch over worker processes ---------------------
def quotient_case():
    rng = np.random.default_rng(17)
    a = rng.integers(-50, 50, (6, 20)).astype(np.int32)
    d = rng.integers(1, 9, (6, 20)).astype(np.int32)
    zeros = np.array([4, 5, 47, 90, 119])
    d.reshape(-1)[zeros] = 0
    return (torch.from_numpy(a), torch.from_numpy(d), torch.zeros(120, dtype=torch.int32), 20), zeros


def test_the_lanes_survive_a_trace_file_and_an_older_trace_keeps_its_words(tmp_path):
    args, zeros = quotient_case()
    trace, _ = traced_report(K.tile_quotients, (6,), *args, BLOCK=32)
    triton_trace.save(trace, tmp_path / "t.tt")
    loaded = triton_trace.load(tmp_path / "t.tt")
    assert loaded.launches[0].meta["intdiv"] == trace.launches[0].meta["intdiv"]
    f = only(triton_trace.analyze(loaded, layouts="model", what_if=False).findings, "int_division")
    check_elements(f, zeros, len(zeros))
    for r in loaded.launches[0].meta["intdiv"]:          # as a trace from before the recorder named lanes
        del r["hits"]
    f = only(triton_trace.analyze(loaded, layouts="model", what_if=False).findings, "int_division")
    assert f.extent["elements"]["count"] is None and "elements not counted" in f.message


def test_a_damaged_list_of_lanes_is_refused(tmp_path):
    from triton_trace.errors import TraceFileError
    args, _ = quotient_case()
    trace, _ = traced_report(K.tile_quotients, (6,), *args, BLOCK=32)
    trace.launches[0].meta["intdiv"][0]["hits"][3] = -1          # a negative seq
    triton_trace.save(trace, tmp_path / "t.tt")
    with pytest.raises(TraceFileError, match=r"intdiv\[0\]\.hits"):
        triton_trace.load(tmp_path / "t.tt")


def test_worker_processes_name_the_same_lanes(monkeypatch):
    from triton_trace.record.parallel import plan
    for name, value in (("WORKER_COST", 1.0), ("FIXED_SECONDS", 0.0), ("FORK_SECONDS", 0.0)):
        monkeypatch.setattr(plan, name, value)
    args, zeros = quotient_case()
    metas = []
    for workers in (1, 2):
        triton_trace.reset()
        triton_trace.trace(workers=workers, batch=2)(K.tile_quotients)[(6,)](*args, BLOCK=32)
        launch = triton_trace.current_trace().launches[0]
        metas.append(launch.meta["intdiv"])
        assert workers == 1 or launch.meta["execution"]["workers"]["used"] == 2, launch.meta["execution"]
        f = only(triton_trace.analyze(triton_trace.current_trace(), layouts="model", what_if=False).findings,
                 "int_division")
        check_elements(f, zeros, len(zeros))
    triton_trace.reset()
    assert metas[0] == metas[1]
