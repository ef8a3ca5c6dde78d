"""The checks on pieces (analysis/checks/pieces.py) against the lane-by-lane checks, and their memory.

When the tile, span and interval shortcuts cannot decide, the race, uninitialised-read and double-write
checks used to list every lane; they now cut the storage into pieces that every access covers whole and
list (row, piece) pairs. Random launches of one kernel (each program a store, load, atomic, locked store
or scatter of a random block, strided, masked, through views of one storage in two element sizes, into a
declared output) must give exactly the lane path's findings, and launches whose programs all race on one
block, or all read an output before writing it, must be checked without decoding their lanes.
"""
import tracemalloc

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis import context
from triton_trace.analysis.checks import pieces
from triton_trace.analysis.context import LaunchContext, Params
from triton_trace.analysis.findings import Finding
from triton_trace.analysis.checks.races import check_races
from triton_trace.analysis.checks.writeorder import check_double_writes, check_uninitialized


@triton.jit
def _mixed(x_ptr, h_ptr, kinds, bases, limits, locks, BLOCK: tl.constexpr, STRIDE: tl.constexpr):
    pid = tl.program_id(0)
    kind = tl.load(kinds + pid)
    base = tl.load(bases + pid)
    lanes = tl.arange(0, BLOCK)
    offs = base + lanes * STRIDE
    mask = lanes < tl.load(limits + pid)
    if kind == 0:
        tl.store(x_ptr + offs, 1.0, mask=mask)
        # every other program stores again one element further on: over its own block (a double write)
        tl.store(x_ptr + offs + STRIDE, 5.0, mask=mask & (lanes < BLOCK - 1) & (pid % 2 == 0))
    elif kind == 1:
        v = tl.load(x_ptr + offs, mask=mask, other=0.0)
        tl.store(x_ptr + offs, v * 0.0 + 2.0, mask=mask & (v > 100.0))     # a load; a store of no lane
    elif kind == 2:
        tl.atomic_add(x_ptr + offs, 1.0, mask=mask)
    elif kind == 3:
        lock = locks + pid % 2
        while tl.atomic_cas(lock, 0, 1) == 1:
            pass
        tl.store(x_ptr + offs, 3.0, mask=mask)
        tl.atomic_xchg(lock, 0)
    elif kind == 4:
        # a permutation of the block (one run), or every other element twice (many runs: lanes)
        scattered = tl.where(pid % 2 == 0, (lanes * 5) % BLOCK, (lanes // 2) * 2 * STRIDE)
        tl.store(x_ptr + base + scattered, 4.0, mask=mask)
    else:
        tl.store(h_ptr + 2 * offs, 7, mask=mask)                             # int16 view of the storage


def _launch(seed):
    rng = np.random.default_rng(seed)
    n_prog, block = int(rng.integers(2, 12)), int(rng.choice([8, 16, 32]))
    stride = int(rng.choice([1, 1, 2]))
    span = block * stride
    size = int(rng.integers(span + 1, 4 * span))
    kinds = torch.tensor(rng.choice(6, n_prog, p=[.3, .2, .15, .15, .1, .1]), dtype=torch.int32)
    bases = torch.tensor(rng.integers(0, size - span + 1, n_prog), dtype=torch.int32)
    limits = torch.tensor(rng.integers(0, block + 1, n_prog), dtype=torch.int32)
    x = torch.zeros(size)
    locks = torch.zeros(2, dtype=torch.int32)
    # a fifth of the launches alias an int16 view onto x: its rows then count in 2-byte units (lanes)
    h = x.view(torch.int16) if seed % 5 == 0 else torch.zeros(2 * size, dtype=torch.int16)
    triton_trace.trace(_mixed, outputs=("x_ptr",))[(n_prog,)](x, h, kinds, bases, limits, locks, BLOCK=block,
                                                              STRIDE=stride)
    return triton_trace.current_trace().launches[-1]


CHECKS = (check_races, check_uninitialized, check_double_writes)


def _findings(lc, shortcuts, monkeypatch, checks=CHECKS):
    with monkeypatch.context() as m:
        m.setattr(context, "SHORTCUTS", shortcuts)
        ctx = LaunchContext(lc, 0, Params(max_examples=3, max_findings=2).resolved())
        return [f.to_dict() if hasattr(f, "to_dict") else (f.kind, f.op_rows.tolist())
                for check in checks for f in check(ctx)]


@pytest.mark.parametrize("seed", range(60))
def test_random_launches_find_what_the_lane_paths_find(seed, monkeypatch):
    triton_trace.reset()
    lc = _launch(seed)
    assert _findings(lc, True, monkeypatch) == _findings(lc, False, monkeypatch)


def test_random_launches_take_the_pieces_and_find_races(monkeypatch):
    """The comparison above means something: most launches go through pieces, with rows in many orders
    (the pieces list rows in execution order, not in the order their patterns group them), and many race,
    read before writing or write twice."""
    used, kinds = 0, {}
    cut = pieces.cut

    def counting(*a, **kw):
        nonlocal used
        got = cut(*a, **kw)
        used += got is not None
        return got
    monkeypatch.setattr(pieces, "cut", counting)
    for seed in range(60):
        triton_trace.reset()
        for f in _findings(_launch(seed), True, monkeypatch):
            kind = f["kind"] if isinstance(f, dict) else "suppressed " + f[0]
            kinds[kind] = kinds.get(kind, 0) + 1
    assert used >= 60, used     # of 180 (launches where a quarter of the lanes are scattered take the lanes)
    assert all(kinds.get(k, 0) >= 5 for k in ("race", "uninitialized_read", "double_write")), kinds


@triton.jit
def _same_block(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + tl.program_id(0) * BLOCK + offs))   # every program: one block


def test_a_race_on_one_block_is_counted_without_lanes():
    """1024 programs x 1024 lanes write one block: one finding of 1024 elements, found from 1024 rows'
    intervals, no lane decoded, in a few MB (the lane path held ~40 bytes a lane: 40 MB here)."""
    triton_trace.reset()
    x, out = torch.randn(1024 * 1024), torch.empty(1024)
    triton_trace.trace(_same_block)[(1024,)](x, out, BLOCK=1024)
    ctx = LaunchContext(triton_trace.current_trace().launches[-1], 0, Params().resolved())
    found, decoded, peak = _measured(check_races, ctx)
    assert [f.count for f in found] == [1024]
    assert found[0].program == (0, 0, 0) and found[0].other["program"] == (1, 0, 0)
    assert found[0].offsets[:4] == (0, 1, 2, 3)
    assert sum(decoded) == 0 and "_expanded" not in ctx.__dict__
    assert peak < 4 << 20, f"race check peak {peak / 1e6:.1f} MB"


def _measured(check, ctx):
    """(what ``check(ctx)`` finds, the lanes of each ``decode`` call it made, its peak of traced memory)."""
    decoded = []
    decode = ctx.decode
    ctx.decode = lambda rows: decoded.append(int(ctx.lane_count[rows].sum())) or decode(rows)
    tracemalloc.start()
    try:
        found = check(ctx)
        return found, decoded, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@triton.jit
def _accumulate(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(out_ptr + offs) + tl.load(x_ptr + offs))     # out never zeroed


def test_reads_of_an_output_never_written_are_found_from_rows():
    """1024 programs read their block of a declared output before writing it: one finding (one load line)
    of 1024 x 1024 elements in 1024 programs, the examples' lanes decoded from the one row that shows
    them, in a few MB (the lane path held ~50 bytes a lane: 50 MB here)."""
    triton_trace.reset()
    x = torch.randn(1024 * 1024)
    triton_trace.trace(_accumulate, outputs=("out_ptr",))[(1024,)](x, torch.zeros(1024 * 1024), BLOCK=1024)
    ctx = LaunchContext(triton_trace.current_trace().launches[-1], 0, Params(max_findings=5).resolved())
    found, decoded, peak = _measured(check_uninitialized, ctx)
    (f,) = found
    assert isinstance(f, Finding) and f.count == 1024 * 1024 and f.program == (0, 0, 0)
    assert f.extent["programs"]["count"] == 1024 and f.extent["programs"]["runs"] == 1
    assert f.extent["elements"]["count"] == 1024 * 1024 and f.extent["elements"]["ranges"] == [[0, 1024 * 1024 - 1]]
    assert f.offsets[:3] == (0, 1, 2) and f.lanes[:3] == ((0,), (1,), (2,))
    assert len(f.op_rows) == 1024                      # a row of each program, for the per-program counts
    # the first row only: its offending lanes, then the examples' offsets (twice: the finding's, the extent's)
    assert sum(decoded) == 3 * 1024 and "_expanded" not in ctx.__dict__ and "lane_row" not in ctx.__dict__
    assert peak < 4 << 20, f"uninitialised-read check peak {peak / 1e6:.1f} MB"


def test_pieces_elements_count_and_list_the_first():
    cut = pieces.Pieces(row=np.zeros(0, np.int64), piece=np.zeros(0, np.int64),
                        start=np.array([0, 10, 12, 40]), length=np.array([10, 2, 28, 5]), lane=np.zeros(0, np.int64))
    assert pieces.elements(np.array([1, 3]), cut, 4)[0] == 7
    assert pieces.elements(np.array([1, 3]), cut, 4)[1].tolist() == [10, 11, 40, 41]
    assert pieces.elements(np.array([0]), cut, 3)[1].tolist() == [0, 1, 2]
    assert pieces.elements(np.array([5, 6, 9]), None, 2)[1].tolist() == [5, 6]
