"""The output checks decide from element intervals when every row is a known pattern (analysis/
intervals.py): the helpers against brute force, and every broken kernel's findings with and without them."""
import numpy as np
import pytest

import triton_trace
from triton_trace.analysis import intervals
from broken_kernels import CASES
from test_analysis_sanitizer import runnable


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
