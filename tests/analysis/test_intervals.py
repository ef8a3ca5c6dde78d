"""The output checks decide from element intervals when every row is a known pattern (analysis/
intervals.py): the helpers against brute force, and every broken kernel's findings with and without them."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.analysis.checks import intervals
from helpers.release import runnable
from kernels.broken import CASES


def _brute(starts, ends):
    return {x for s, e in zip(starts, ends) for x in range(s, e)}


def test_union_missing_and_overlap_against_brute_force():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(0, 10))
        s = rng.integers(0, 80, n)
        e = s + rng.integers(0, 12, n)
        p = rng.integers(0, 3, n)
        us, ue = intervals.union(s, e)
        assert _brute(us, ue) == _brute(s, e) and (len(us) < 2 or (us[1:] > ue[:-1]).all())
        lo, hi = int(rng.integers(0, 20)), int(rng.integers(40, 100))
        gaps = sorted(set(range(lo, hi)) - _brute(s, e))
        count, first = intervals.missing((us, ue), lo, hi, 5)
        assert count == len(gaps) and list(first) == gaps[:5]
        want = any(p[i] == p[j] and max(s[i], s[j]) < min(e[i], e[j]) for i in range(n) for j in range(i + 1, n))
        assert intervals.same_program_overlap(s, e, p) == want


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("fixed", [False, True])
def test_findings_are_the_same_from_intervals_and_from_lanes(case, fixed, monkeypatch):
    runnable(case)
    triton_trace.reset()
    case.run(case.fixed if fixed else case.broken, fixed)
    trace = triton_trace.current_trace()
    fast = triton_trace.analyze(trace, layouts="model", what_if=False).to_dict()["findings"]
    monkeypatch.setattr(intervals, "row_intervals", lambda *a, **k: None)
    slow = triton_trace.analyze(trace, layouts="model", what_if=False).to_dict()["findings"]
    assert fast == slow


@triton_trace.trace(outputs=("out",))
@triton.jit
def _reread(out, x, shift, n_programs, B: tl.constexpr):
    """Each program stores its tile of ``out``, then reads the tile of program pid + shift (clamped to the
    grid): written before when that program ran earlier, else read before any program wrote it. An atomic after the store reads
    the program's own tile."""
    pid = tl.program_id(0)
    offs = pid * B + tl.arange(0, B)
    tl.store(out + offs, tl.load(x + offs))
    other = tl.minimum(tl.maximum(pid + shift, 0), n_programs - 1)
    v = tl.load(out + other * B + tl.arange(0, B))
    tl.atomic_add(out + offs, v)


@pytest.mark.parametrize("shift", [-1, 0, 1, 3])
def test_uninitialized_reads_from_intervals_equal_the_lanes(shift, monkeypatch):
    """shift -1 and 0 read tiles written earlier (no finding, decided from intervals); 1 and 3 read tiles
    the later programs write (findings, from the lanes); the findings are those of the lane path."""
    triton_trace.reset()
    x = torch.randn(8 * 16)
    _reread[(8,)](torch.empty(8 * 16), x, shift, 8, B=16)
    trace = triton_trace.current_trace()
    decided = []
    real = intervals.reads_after_writes
    monkeypatch.setattr(intervals, "reads_after_writes", lambda *a: decided.append(real(*a)) or decided[-1])
    fast = triton_trace.analyze(trace, layouts="model", what_if=False).to_dict()["findings"]
    uninit = [f for f in fast if f["kind"] == "uninitialized_read"]
    if shift <= 0:
        assert decided == [True] and not uninit
    else:
        assert decided == [False] and uninit and uninit[0]["program"] == [0, 0, 0]
    monkeypatch.setattr(intervals, "row_intervals", lambda *a, **k: None)
    slow = triton_trace.analyze(trace, layouts="model", what_if=False).to_dict()["findings"]
    assert fast == slow
