"""A lock released, or a counter bumped, by a scalar atomic right after block stores other programs read, with
no tl.debug_barrier() between them (analysis/checks/barriers.py): found on the buggy kernel with its programs,
the stores it follows and their elements counted again here with numpy from the kernel's own indexing; the
fixed twin (a barrier before the atomic) has no such finding. Kernels: tests/kernels/sync_kernels.py."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.analysis.findings import SEVERITY
from helpers.findings import runs, traced_report
from helpers.source import marked_line
from kernels import sync_kernels as K

KIND = "release_without_barrier"


def analyzed(kernel, grid, *args, batch=True, **kw):
    trace, report = traced_report(kernel, grid, *args, batch=batch, **kw)
    return trace, report.findings


def shared_elements(written: dict, touched: dict) -> np.ndarray:
    """The elements each program writes (``written``: program -> offsets) that another program touches
    (``touched``: program -> offsets it reads or writes), over every program: numpy, from the kernel's indexing."""
    out = []
    for p, w in written.items():
        others = np.concatenate([np.asarray(t) for q, t in touched.items() if q != p] or [np.zeros(0, np.int64)])
        out.append(np.intersect1d(w, others))
    return np.unique(np.concatenate(out))


def ticket_case(G=6, BLOCK=32, short=5):
    n = G * BLOCK - short
    x = torch.randn(n)
    part, count, out = torch.zeros(G * BLOCK), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
    # program p writes its own part (masked past n); the last to take a ticket (the interpreter's order: G - 1)
    # reads every program's part
    written = {p: np.arange(p * BLOCK, min((p + 1) * BLOCK, n)) for p in range(G)}
    touched = {p: w for p, w in written.items()}
    touched[G - 1] = np.arange(n)
    return (x, part, count, out, n), dict(BLOCK=BLOCK), written, touched, x


@pytest.mark.parametrize("batch", [True, False])
def test_a_ticket_taken_right_after_the_partial_sums_are_stored(batch):
    G = 6
    args, kw, written, touched, x = ticket_case(G)
    _, found = analyzed(K.last_program_sums, (G,), *args, batch=batch, **kw)
    assert abs(args[3].item() - 2 * x.sum().item()) < 1e-3            # the kernel computes what it should
    (f,) = [f for f in found if f.kind == KIND]
    assert SEVERITY[KIND] == "warning" and f.severity == "warning"
    assert (f.line, f.op, f.tensor, f.program) == (marked_line(K.last_program_sums), "atomic_add", "count_ptr",
                                                    (0, 0, 0))
    # every program but the last publishes a part the last one reads; the last one's part nobody else reads
    want = shared_elements(written, touched)
    x_ = f.extent
    assert x_["programs"]["count"] == G - 1 and x_["programs"]["ranges"] == [[[0, 0, 0], [G - 2, 0, 0]]]
    assert x_["elements"]["count"] == len(want) and x_["elements"]["ranges"] == runs(want)
    assert f.count == len(want) and f.rows == G - 1 and x_["exact"]
    (s,) = x_["stores"]
    assert (s["line"], s["tensor"], s["elements"]) == (marked_line(K.last_program_sums, "# STORE"), "part_ptr",
                                                       len(want))
    for text in ("tl.atomic_add of 'count_ptr'", "sem='acq_rel', the default", "'part_ptr'",
                 f"{G - 1} program(s) (0..{G - 2})", f"{len(want)} element(s)", "tl.debug_barrier()"):
        assert text in f.message, (text, f.message)
    # the tickets order the parts before the last program's reads: no race (tests/analysis/test_tickets.py)
    assert {g.kind for g in found} == {KIND}


@pytest.mark.parametrize("batch", [True, False])
def test_the_ticket_after_a_barrier_is_not_a_finding(batch):
    args, kw, *_ = ticket_case()
    trace, found = analyzed(K.last_program_sums_fenced, (6,), *args, batch=batch, **kw)
    assert KIND not in {f.kind for f in found}
    assert len(trace.launches[0].rows(kind="barrier", memory_only=False)) == 6      # one barrier row per program


def lock_case(R=7, C=20, GROUPS=4):
    x = torch.randn(R, C)
    y, part, lock = torch.zeros(R, C), torch.zeros(GROUPS, C), torch.zeros(GROUPS, dtype=torch.int32)
    rows = np.arange(R)
    written = {r: (r % GROUPS) * C + np.arange(C) for r in rows}       # each program adds into its group's row
    return (x, y, part, lock, C), dict(GROUPS=GROUPS, BLOCK=32), written, x, rows % GROUPS


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("sem", ["acq_rel", "release"])
def test_a_lock_released_right_after_the_guarded_stores(batch, sem):
    R, C, GROUPS = 7, 20, 4
    args, kw, written, x, group = lock_case(R, C, GROUPS)
    _, found = analyzed(K.group_sums_locked, (R,), *args, batch=batch, SEM=sem, **kw)
    torch.testing.assert_close(args[2], torch.stack([x[group == g].sum(0) for g in range(GROUPS)]))
    f = [f for f in found if f.kind == KIND]
    assert len(f) == 1 and len(found) == 1, [(g.kind, g.message) for g in found]   # the lock orders the data
    f = f[0]
    assert (f.line, f.op, f.tensor) == (marked_line(K.group_sums_locked), "atomic_xchg", "lock_ptr")
    # a group of one program (here 3) has nobody to hand its row to; the acquire after the program's own
    # store of y (nobody else reads y) is not flagged either
    alone = np.bincount(group, minlength=GROUPS) == 1
    want_programs = np.flatnonzero(~alone[group])
    want = shared_elements(written, written)
    assert f.extent["programs"]["count"] == len(want_programs) == 6
    assert f.extent["programs"]["ranges"] == [[[a, 0, 0], [b, 0, 0]] for a, b in runs(want_programs)]
    assert f.extent["elements"]["count"] == len(want) == 3 * C and f.extent["elements"]["ranges"] == runs(want)
    assert f.count == len(want_programs) * C                              # the stores' lanes on those elements
    assert f"sem='{sem}'" in f.message and "'part_ptr'" in f.message


@pytest.mark.parametrize("batch", [True, False])
def test_the_lock_released_after_a_barrier_is_clean(batch):
    args, kw, *_ = lock_case()
    trace, found = analyzed(K.group_sums_locked_fenced, (7,), *args, batch=batch, SEM="acq_rel", **kw)
    assert found == ()
    triton_trace.check(trace)


@pytest.mark.parametrize("sem", ["relaxed", "acquire"])
def test_an_atomic_that_releases_nothing_is_not_judged(sem):
    args, kw, *_ = lock_case()
    _, found = analyzed(K.group_sums_locked, (7,), *args, SEM=sem, **kw)
    assert found == ()


def test_the_finding_comes_from_a_saved_file_and_needs_the_sems(tmp_path):
    args, kw, *_ = lock_case()
    trace, found = analyzed(K.group_sums_locked, (7,), *args, SEM="acq_rel", **kw)
    path = tmp_path / "lock.ttrace"
    trace.save(path)
    loaded = triton_trace.load(path)
    assert loaded.launches[0].meta["atomic_sem"] == trace.launches[0].meta["atomic_sem"]
    again = triton_trace.analyze(loaded, layouts="model", what_if=False).findings
    assert [f.to_dict() for f in again] == [f.to_dict() for f in found]
    # a trace recorded before barriers were (no sems, no barrier rows) is not judged
    lc = trace.launches[0]
    older = dataclasses.replace(lc, meta={k: v for k, v in lc.meta.items() if k != "atomic_sem"})
    assert triton_trace.analyze(older, layouts="model", what_if=False).findings == ()
