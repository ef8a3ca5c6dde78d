"""Every finding is one root cause (kind, kernel line, tensor) with its full extent, exact over the launch:
compared here with counts computed independently from the inputs (numpy), on buggy kernels that spread
one bug over many programs. The report text, the JSON and (through Report.summary) the pytest failure
show the same numbers."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis import context
from triton_trace.analysis.findings import FINDING_KINDS, KINDS, SEVERITY
from kernels.value_bugs import softmax_no_max


@triton.jit
def store_without_mask(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs, x * 2.0)                        # BUG: no mask


@triton.jit
def everyone_writes_row_zero(x_ptr, out_ptr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + cols, tl.load(x_ptr + tl.program_id(0) * BLOCK + cols))     # BUG: every program, row 0


@triton.jit
def lost_update(x_ptr, acc_ptr, GROUP: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0) // GROUP
    v = tl.load(acc_ptr + row * BLOCK + cols)
    tl.store(acc_ptr + row * BLOCK + cols, v + tl.load(x_ptr + tl.program_id(0) * BLOCK + cols))   # BUG


@triton.jit
def wrapped_tile_offsets(x_ptr, k_ptr, out_ptr, MULT: tl.constexpr, BLOCK: tl.constexpr):
    # each program's base k * MULT leaves int32 for a large k: then every lane reads a wrapped address
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    base = tl.load(k_ptr + pid) * MULT                     # BUG
    x = tl.load(x_ptr + ((base + cols) & 1023))
    tl.store(out_ptr + pid * BLOCK + cols, x)


def analyzed(kernel, grid, *args, batch=True, max_findings=100, **kw):
    triton_trace.reset()
    triton_trace.trace(kernel, batch=batch)[grid](*args, **kw)
    return triton_trace.analyze(triton_trace.current_trace(), layouts="model", what_if=False,
                                max_findings=max_findings)


def runs(values) -> list:
    """Runs of consecutive sorted distinct integers, inclusive: the independent side of "ranges"."""
    v = np.unique(np.asarray(values))
    cut = np.flatnonzero(np.diff(v) != 1)
    return [[int(a), int(b)] for a, b in zip(v[np.r_[0, cut + 1]], v[np.r_[cut, len(v) - 1]])]


@pytest.mark.parametrize("batch", [True, False])
def test_a_softmax_without_max_names_every_poisoned_value_and_program(batch):
    """The issue's case: "7 values by program 0" where many values in many programs are NaN."""
    rng = np.random.default_rng(7)
    rows, cols = 24, 100
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    hot = rng.choice(rows, 16, replace=False)
    for r in hot:                                          # exp overflows float32 past ~88.7
        x[r, rng.choice(cols, int(rng.integers(1, 12)), replace=False)] = rng.uniform(90, 200)
    with np.errstate(over="ignore", invalid="ignore"):
        num = np.exp(x)
        expect = num / num.sum(axis=1, keepdims=True)      # numpy's float32 softmax without the max
    bad = ~np.isfinite(expect)
    out = torch.empty(rows, cols)
    report = analyzed(softmax_no_max, (rows,), torch.from_numpy(x), out, cols, BLOCK=128, batch=batch)
    (f,) = report.findings
    assert f.kind == "nonfinite" and f.tensor == "out_ptr"
    x_ = f.extent
    assert x_["exact"] and x_["poisoned"]["values"] == int(bad.sum()) == f.count
    assert x_["poisoned"]["programs"] == len(hot) == x_["programs"]["count"]
    assert x_["programs"]["first"] == [[int(r), 0, 0] for r in np.sort(hot)[:8]]
    assert x_["elements"]["count"] == int(bad.sum()) and x_["elements"]["ranges"] == runs(np.flatnonzero(bad))[:8]
    assert x_["poisoned"]["nan"] == int(np.isnan(expect).sum())
    assert x_["birth"]["op"] == "exp"
    assert f"wrote {int(bad.sum())} non-finite value(s) in {len(hot)} program(s)" in f.message
    assert int(torch.isnan(out).sum()) == int(bad.sum())


@pytest.mark.parametrize("shortcuts", [True, False])
def test_a_race_of_eight_writers_is_one_finding_naming_all_of_them(shortcuts, monkeypatch):
    monkeypatch.setattr(context, "SHORTCUTS", shortcuts)
    block, grid = 32, 8
    report = analyzed(everyone_writes_row_zero, (grid,), torch.randn(grid * block), torch.empty(block),
                      BLOCK=block)
    (f,) = report.findings
    assert f.kind == "race" and f.tensor == "out_ptr" and report.finding_counts["race"] == 1
    x_ = f.extent
    assert x_["writers"] == {"count": grid, "programs": [[p, 0, 0] for p in range(grid)]}
    assert x_["readers"] == {"count": 0, "programs": []}
    assert x_["elements"]["count"] == block == f.count and x_["elements"]["ranges"] == [[0, block - 1]]
    assert x_["elements"]["lanes"] == grid * block
    assert f"{grid} program(s) write" in f.message and "0 read" in f.message


@pytest.mark.parametrize("shortcuts", [True, False])
def test_a_lost_update_lists_its_readers_and_writers_per_group(shortcuts, monkeypatch):
    """Programs 4g..4g+3 read-modify-write row g: every program reads and writes; each row is racy."""
    monkeypatch.setattr(context, "SHORTCUTS", shortcuts)
    block, group, grid = 16, 4, 12
    report = analyzed(lost_update, (grid,), torch.randn(grid * block), torch.zeros(grid // group * block),
                      GROUP=group, BLOCK=block)
    races = [f for f in report.findings if f.kind == "race"]
    assert len(races) == 1
    x_ = races[0].extent
    pids = [[p, 0, 0] for p in range(grid)]
    assert x_["writers"]["programs"] == pids and x_["readers"]["programs"] == pids
    assert x_["elements"]["count"] == grid // group * block
    assert x_["elements"]["ranges"] == [[0, grid // group * block - 1]]
    assert {a["op"] for a in x_["accesses"]} == {"load", "store"}


@pytest.mark.parametrize("batch", [True, False])
def test_ten_thousand_lanes_of_one_missing_mask_are_one_finding(batch):
    block, grid = 1024, 20
    n = grid * block - 10_000
    report = analyzed(store_without_mask, (grid,), torch.randn(n), torch.empty(n), n, BLOCK=block, batch=batch,
                      max_findings=1)
    offs = np.arange(grid * block)
    oob = offs[offs >= n]                                  # the lanes of the unmasked store past the end
    (f,) = report.findings
    assert report.finding_counts["out_of_bounds"] == 1 and report.suppressed == 0
    assert f.kind == "out_of_bounds" and f.op == "store" and f.tensor == "y_ptr"
    x_ = f.extent
    assert f.count == len(oob) == 10_000 == x_["elements"]["lanes"] == x_["elements"]["count"]
    progs = np.unique(oob // block)
    assert x_["programs"]["count"] == len(progs) and x_["programs"]["ranges"] == [[[int(progs[0]), 0, 0],
                                                                                  [int(progs[-1]), 0, 0]]]
    assert x_["past_end"]["past_end"] == int(oob.max()) - n + 1 and x_["past_end"]["limit"] == n
    lanes = np.unique(oob % block)
    assert x_["mask_lanes"]["count"] == len(lanes) and x_["mask_lanes"]["ranges"] == runs(lanes)
    assert x_["elements"]["ranges"] == runs(oob)
    assert f"10000 lane(s) in {len(progs)} program(s)" in f.message


def test_the_mask_lanes_of_a_partial_tail():
    block, grid, n = 64, 4, 200
    (f,) = analyzed(store_without_mask, (grid,), torch.randn(n), torch.empty(n), n, BLOCK=block).findings
    offs = np.arange(grid * block)
    tail = offs[offs >= n]
    assert f.extent["mask_lanes"]["ranges"] == runs(tail % block) == [[n % block, block - 1]]
    assert f.extent["programs"]["count"] == 1 and f.program == (n // block, 0, 0)
    assert f"block lanes {n % block}..{block - 1} ({block - n % block} of {block})" in f.message


def test_the_extent_counts_every_program_of_a_big_grid_whatever_the_cap():
    block, grid = 16, 3000
    n = 8
    report = analyzed(store_without_mask, (grid,), torch.randn(n), torch.empty(n), n, BLOCK=block, max_findings=0)
    assert report.findings == () and report.suppressed == 1 and report.finding_counts["out_of_bounds"] == 1
    report = analyzed(store_without_mask, (grid,), torch.randn(n), torch.empty(n), n, BLOCK=block)
    (f,) = report.findings
    assert f.extent["programs"]["count"] == grid and f.count == grid * block - n


@pytest.mark.parametrize("batch", [True, False])
def test_an_int32_overflow_over_a_big_grid_names_every_program_and_element(batch):
    """Overflow's extent is every program the wrapped value reached, not the first one: the programs and the
    elements they read, from numpy over the inputs."""
    rng = np.random.default_rng(11)
    grid, block, mult = 600, 16, 1_000_003
    k = rng.integers(0, 2147, grid).astype(np.int32)        # 2146 * mult fits int32, 2148 * mult does not
    hit = np.sort(rng.choice(grid, 150, replace=False))
    k[hit] = rng.integers(2148, 4096, len(hit))
    assert np.array_equal(np.flatnonzero(k.astype(np.int64) * mult > 2**31 - 1), hit)
    x = rng.standard_normal(1024).astype(np.float32)
    report = analyzed(wrapped_tile_offsets, (grid,), torch.from_numpy(x), torch.from_numpy(k),
                      torch.empty(grid * block), MULT=mult, BLOCK=block, batch=batch)
    (f,) = [f for f in report.findings if f.kind == "overflow"]
    x_ = f.extent
    base = (k[hit].astype(np.int64) * mult).astype(np.int32).astype(np.int64)   # what int32 arithmetic gives
    read = (base[:, None] + np.arange(block)) & 1023
    assert x_["exact"] and f.count == len(hit) * block == x_["elements"]["lanes"]
    assert x_["programs"]["count"] == len(hit) and x_["programs"]["runs"] == len(runs(hit))
    assert x_["programs"]["ranges"] == [[[a, 0, 0], [b, 0, 0]] for a, b in runs(hit)[:8]]
    assert x_["programs"]["first"] == [[int(p), 0, 0] for p in hit[:8]]
    assert x_["elements"]["count"] == len(np.unique(read)) and x_["elements"]["ranges"] == runs(read)[:8]
    assert [e["value"] for e in x_["elements"]["first"]] == pytest.approx(x[read.reshape(-1)[:8]].tolist())
    assert f"{len(hit)} program(s)" in f.message


def test_report_json_and_summary_agree():
    block, grid, n = 64, 6, 300
    report = analyzed(store_without_mask, (grid,), torch.randn(n), torch.empty(n), n, BLOCK=block)
    d = json.loads(json.dumps(report.to_dict()))
    (f,) = d["findings"]
    x_ = f["extent"]
    text = report.summary()
    assert f["message"] in text
    assert f"{x_['elements']['lanes']} lane(s) in {x_['programs']['count']} program(s)" in text
    assert [k["kind"] for k in d["kinds"]] == list(FINDING_KINDS)
    assert all(SEVERITY[k["kind"]] == k["severity"] and k["meaning"] for k in d["kinds"])


def test_the_kinds_table_orders_errors_first():
    levels = [s for _, s, _ in KINDS]
    assert levels == sorted(levels)                        # "error" < "warning"
    assert len(set(FINDING_KINDS)) == len(KINDS)
