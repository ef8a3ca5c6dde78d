"""The analysis's shortcuts for regular data give exactly what the lane-by-lane path gives.

Shortcuts: rows whose lanes are a known pattern (``LaunchContext.row_sig``) are coalesced once per
(pattern, line phase), counted as intervals and never decoded; the race check skips storages whose
programs (or locks) touch disjoint spans or disjoint tiles, and filters elements that cannot race before
sorting. ``context.SHORTCUTS = False`` switches all of them off; every report here must be identical
both ways, on every kernel of the suite (broken ones included) and with non-default GPU parameters.
"""
import json

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import trace
from triton_trace.analysis import context
from triton_trace.analysis.analyzer import _analyze_launch
from triton_trace.analysis.context import LaunchContext, Params
from helpers.batch import CASES
from helpers.release import runnable
import kernels as K
from kernels import broken as B

PARAMS = ({}, {"num_warps": 8, "l2_bytes": 1 << 18, "programs_in_flight": 4, "vector_bytes": 8})


@triton.jit
def _tiles_kernel(x_ptr, n_cols, stride, HALO: tl.constexpr, BLOCK: tl.constexpr):
    """In place, x[tile] += 1 on 2-D tiles; with HALO each tile also takes the next tile's first row (a
    race between neighbours, found only lane by lane since the tiles' spans overlap either way)."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    rows = pm * BLOCK + tl.arange(0, BLOCK + HALO)
    cols = pn * BLOCK + tl.arange(0, BLOCK)
    ptr = x_ptr + rows[:, None] * stride + cols[None, :]
    mask = (rows[:, None] < n_cols) & (cols[None, :] < n_cols)
    tl.store(ptr, tl.load(ptr, mask=mask) + 1, mask=mask)


def _tiles(halo):
    def run(kw):
        x = torch.zeros(64, 64)
        trace(**kw)(_tiles_kernel)[(4, 4)](x, 64, 64, HALO=halo, BLOCK=16)
        return x
    return run


def _report(tr, params):
    rep = triton_trace.analyze(tr, **params)
    rows = [{k: v.tolist() for k, v in rep.rows(i).items()} for i in range(len(rep.launches))]
    return json.dumps([rep.to_dict(), rows], sort_keys=True)


def assert_same_reports(tr, monkeypatch):
    for params in PARAMS:
        fast = _report(tr, params)
        with monkeypatch.context() as m:
            m.setattr(context, "SHORTCUTS", False)
            slow = _report(tr, params)
        assert fast == slow, f"shortcut and lane-by-lane reports differ (params {params})"


EXTRA = {
    "add_tail": lambda kw: K.add(torch.randn(10003), torch.randn(10003), kernel=trace(**kw)(K.make_add()), block=128),
    "transpose_tiles": lambda kw: K.transpose(torch.randn(256, 192), kernel=trace(**kw)(K.make_transpose()),
                                              block_m=32, block_n=32),
    "transpose_ragged": lambda kw: K.transpose(torch.randn(70, 45), kernel=trace(**kw)(K.make_transpose()),
                                               block_m=16, block_n=16),
    "matmul_tiles": lambda kw: K.matmul(torch.randn(64, 64), torch.randn(64, 64), kernel=trace(**kw)(K.make_matmul()),
                                        block_m=16, block_n=16),
    "tiles_in_place": _tiles(0),
    "tiles_overlapping": _tiles(16),
    # views that do not cover their storage: the out-of-view check reads patterns, and lanes where they leave
    "transpose_column_slice": lambda kw: K.transpose(torch.randn(64, 96)[:, 8:72], kernel=trace(**kw)(K.make_transpose()),
                                                     block_m=16, block_n=16),
    "transpose_row_slice": lambda kw: K.transpose(torch.randn(80, 64)[5:69], kernel=trace(**kw)(K.make_transpose()),
                                                  block_m=16, block_n=16),
    "transpose_strided_slice": lambda kw: K.transpose(torch.randn(64, 128)[:, ::2], kernel=trace(**kw)(K.make_transpose()),
                                                      block_m=16, block_n=16),
    "add_slice_tail": lambda kw: K.add(torch.randn(3000)[7:2007], torch.randn(2000), kernel=trace(**kw)(K.make_add()),
                                       block=256),
    "transpose_past_the_view": lambda kw: _past_the_view(kw),
    # declared outputs that are views (coverage from the views' runs): a column slice, a row slice with a
    # tile band left unwritten, a transposed view (its elements one by one: lanes), a 3-D slice
    "into_column_slice": lambda kw: _into(torch.empty(48, 80)[:, 9:73], (4, 3), kw),
    "into_row_slice_band_missing": lambda kw: _into(torch.empty(80, 64)[7:55], (3, 4), kw),
    "into_transposed": lambda kw: _into(torch.empty(64, 48).t(), (4, 3), kw),
    "into_3d_slice": lambda kw: _into(torch.empty(2, 48, 70)[1, :, 3:67], (4, 2), kw),
    # 8 columns past the slice: writes run on into the next row's padding (out of view), so written runs
    # straddle the view's
    "into_column_slice_and_past": lambda kw: _into(torch.empty(49, 80)[:48, 9:73], (5, 3), kw, cols=72),
}


def _into(y, grid, kw, cols=64):
    """x.T written into the declared output view ``y`` (48 x 64), 16 x 16 tiles over ``grid``: a grid
    short of the view leaves elements unwritten."""
    x = torch.randn(cols, 48)
    trace(outputs=("y_ptr",), **kw)(K.make_transpose())[grid](x, y, cols, 48, x.stride(0), x.stride(1), y.stride(0),
                                                             y.stride(1), BLOCK_M=16, BLOCK_N=16)
    return y


def _past_the_view(kw):
    """A 48-column slice transposed as if it had 56 columns: tiles of the last column band read 8 columns
    past the view, inside the storage (out_of_view findings)."""
    x = torch.randn(64, 96)[:, 8:56]
    y = torch.empty(56, 64)
    trace(**kw)(K.make_transpose())[(4, 4)](x, y, 64, 56, x.stride(0), x.stride(1), y.stride(0), y.stride(1),
                                            BLOCK_M=16, BLOCK_N=16)
    return y


@pytest.mark.parametrize("name", sorted(CASES) + sorted(EXTRA))
def test_suite_kernels_report_the_same_with_and_without_shortcuts(name, monkeypatch):
    triton_trace.reset()
    torch.manual_seed(0)
    (CASES.get(name) or EXTRA[name])({})
    assert_same_reports(triton_trace.current_trace(), monkeypatch)


@pytest.mark.parametrize("case", B.CASES, ids=lambda c: c.name)
def test_broken_kernels_report_the_same_with_and_without_shortcuts(case, monkeypatch):
    runnable(case)
    for kernel in (case.broken, case.fixed):
        triton_trace.reset()
        torch.manual_seed(0)
        case.run(kernel, kernel is case.fixed)
        assert_same_reports(triton_trace.current_trace(), monkeypatch)


def test_overlapping_tiles_are_still_found_as_races():
    _tiles(16)({})
    report = triton_trace.analyze(triton_trace.current_trace())
    assert report.finding_counts.get("race", 0) > 0
    _tiles(0)({})
    assert not triton_trace.analyze(triton_trace.current_trace().launches[-1]).findings


@pytest.mark.parametrize("name", ["add", "softmax", "matmul", "add_tail", "matmul_tiles", "transpose_tiles", "transpose_ragged", "tiles_in_place",
                                  "transpose_column_slice", "transpose_row_slice", "add_slice_tail"])
def test_regular_kernels_are_analysed_without_decoding_lanes(name):
    """The shortcuts engage: every row of these kernels is a known pattern, and no analysis expands the
    launch's lanes or decodes a regular row's (which is where the time and memory went on large launches;
    rows whose masks are not a prefix, at ragged edges, are read from their lanes)."""
    triton_trace.reset()
    torch.manual_seed(0)
    (CASES.get(name) or EXTRA[name])({})
    for i, lc in enumerate(triton_trace.current_trace().launches):
        ctx = LaunchContext(lc, i, Params().resolved())
        full = ctx.active_lanes[ctx.mem_rows] == ctx.lane_count[ctx.mem_rows]
        assert (ctx.row_sig[ctx.mem_rows[full]] >= 0).all()
        decoded = []
        decode = ctx.decode
        ctx.decode = lambda rows: decoded.append(rows[ctx.regular(rows)]) or decode(rows)
        _analyze_launch(ctx)
        assert "_expanded" not in ctx.__dict__, f"{lc.kernel_name}: the analysis decoded every lane"
        regular = np.concatenate(decoded) if decoded else np.zeros(0, int)
        if ctx.regular(ctx.mem_rows).all():     # (else a few regular rows are read beside irregular ones)
            assert not len(regular), f"{lc.kernel_name}: the analysis decoded {len(regular)} regular rows' lanes"


def test_lanes_that_leave_a_sliced_view_are_still_found():
    triton_trace.reset()
    _past_the_view({})
    report = triton_trace.analyze(triton_trace.current_trace())
    found = [f for f in report.findings if f.kind == "out_of_view"]
    assert found and all(f.tensor == "x_ptr" for f in found)
    assert sum(f.count for f in found) == 64 * 8            # every row, the 8 columns past the slice
    triton_trace.reset()
    EXTRA["transpose_column_slice"]({})
    assert not triton_trace.analyze(triton_trace.current_trace()).findings


def test_unwritten_elements_of_output_views_are_counted_from_runs():
    """The coverage check on views that are not one range of their storage: what each grid leaves unwritten
    (counted from the grid by hand: 16 x 16 tiles over a 48 x 64 view), and where the first of them is."""
    for name, want in (("into_column_slice", 0), ("into_3d_slice", 48 * 64 - 32 * 64),
                       ("into_row_slice_band_missing", 48 * 64 - 48 * 48), ("into_transposed", 0),
                       ("into_column_slice_and_past", 0)):
        triton_trace.reset()
        (CASES.get(name) or EXTRA[name])({})
        found = [f for f in triton_trace.analyze(triton_trace.current_trace()).findings if f.kind == "unwritten_output"]
        assert sum(f.count for f in found) == want, name
        if want:
            assert found[0].indices[0] == ((0, 48) if name == "into_row_slice_band_missing" else (32, 0)), name


def test_interval_shortcuts_against_direct_counts():
    """Distinct elements and the tile-overlap test on patterns, checked against numpy on the lanes."""
    from triton_trace.analysis.metrics import _count
    from triton_trace.analysis.context import pattern_runs
    rng = np.random.default_rng(0)
    for _ in range(50):
        pat = rng.choice(40, size=rng.integers(1, 30), replace=False)
        starts, lens = pattern_runs(pat)
        assert sorted(set(pat.tolist())) == [s + i for s, n in zip(starts.tolist(), lens.tolist()) for i in range(n)]
        bases = rng.integers(0, 100, size=rng.integers(1, 8))
        lo = (bases[:, None] + starts).reshape(-1)
        hi = lo + np.tile(lens, len(bases))
        extra = rng.integers(0, 150, size=rng.integers(0, 5))
        want = len(set((bases[:, None] + pat).reshape(-1).tolist()) | set(extra.tolist()))
        assert _count(200, [(lo, hi)], [extra] if len(extra) else []) == want
