"""Running a kernel traced and reading its analysis back, as the finding tests do."""
from __future__ import annotations

import numpy as np

import triton_trace


def traced_report(kernel, grid, *args, batch=True, **kw):
    """(trace, report) of one traced launch, analysed with the model layouts and no what-if replays; the
    current trace is left empty before and after."""
    triton_trace.reset()
    triton_trace.trace(batch=batch)(kernel)[grid](*args, **kw)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace, triton_trace.analyze(trace, layouts="model", what_if=False)


def runs(values) -> list:
    """Runs of consecutive sorted distinct integers, inclusive: the independent side of an extent's "ranges"."""
    v = np.unique(np.asarray(values, dtype=np.int64))
    if not len(v):
        return []
    cut = np.flatnonzero(np.diff(v) != 1)
    return [[int(a), int(b)] for a, b in zip(v[np.r_[0, cut + 1]], v[np.r_[cut, len(v) - 1]])]
