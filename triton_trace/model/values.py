"""The recorded values of memory ops, decoded per lane, and their statistics per op.

Values sit in ``Launch.values`` as raw bytes, one run per op row in the row's value dtype (every lane of
the op, active or not). ``lane_values`` decodes a set of rows at once, grouped by dtype, without a Python
loop over rows; ``value_stats`` reduces them over each row's active lanes.
"""
from __future__ import annotations

import numpy as np

from .lanes.encoding import ranges


def lane_values(launch, rows: np.ndarray) -> tuple:
    """(lane index into the launch's lane buffers, value as float64 or NaN when not recorded, has value)
    for every lane of the given memory rows, in row order."""
    o = launch.ops
    rows = np.asarray(rows, dtype=np.int64)
    counts = o["lane_count"][rows].astype(np.int64)
    lanes = ranges(o["lane_start"][rows], counts)
    values = np.full(len(lanes), np.nan)
    has = np.zeros(len(lanes), dtype=bool)
    vd = o["value_dtype"][rows]
    pos = np.cumsum(counts) - counts
    for code in np.unique(vd[vd >= 0]):
        dt = np.dtype(launch.value_dtypes[int(code)])
        sel = np.nonzero(vd == code)[0]
        vstart = o["value_start"][rows][sel].astype(np.int64)
        dest = ranges(pos[sel], counts[sel])
        if not (vstart % dt.itemsize).any():
            # every run starts on an element boundary (the recorder's layout): view the buffer as this dtype
            # once and gather elements, not bytes
            whole = np.frombuffer(launch.values, dtype=dt, count=len(launch.values) // dt.itemsize)
            values[dest] = whole[ranges(vstart // dt.itemsize, counts[sel])]
        else:
            within = ranges(np.zeros(len(sel), np.int64), counts[sel])
            byte0 = np.repeat(vstart, counts[sel]) + within * dt.itemsize
            raw = launch.values[byte0[:, None] + np.arange(dt.itemsize)]
            values[dest] = np.ascontiguousarray(raw).view(dt).reshape(-1).astype(np.float64)
        has[dest] = True
    return lanes, values, has


STATS = ("min", "max", "mean", "count", "nan", "inf")


def value_stats(launch, rows: np.ndarray) -> dict:
    """Per row, over its active lanes whose values were recorded: min, max and mean of the finite values
    (NaN where there are none), their count, and the counts of NaN and of +-Inf. Rows without values get
    NaN / -1."""
    rows = np.asarray(rows, dtype=np.int64)
    o = launch.ops
    n = len(rows)
    out = {"min": np.full(n, np.nan), "max": np.full(n, np.nan), "mean": np.full(n, np.nan),
           "count": np.full(n, -1, np.int64), "nan": np.full(n, -1, np.int64), "inf": np.full(n, -1, np.int64)}
    counts = o["lane_count"][rows].astype(np.int64)
    if not n or not counts.sum():
        return out
    _, values, has = lane_values(launch, rows)
    _, mask = launch.lanes.gather(o["lane_start"][rows], counts)
    use = has & mask
    finite = use & np.isfinite(values)
    # the lanes are laid out row after row: reduce each row's contiguous segment (reduceat, no ufunc.at)
    starts = np.cumsum(counts) - counts
    nz = counts > 0
    seg_sum = lambda a: np.add.reduceat(a, starts[nz]) if nz.any() else np.zeros(0)
    recorded = np.zeros(n, bool)
    recorded[nz] = seg_sum(has.astype(np.int64)) > 0
    k, nan, inf = (np.zeros(n, np.int64) for _ in range(3))
    k[nz] = seg_sum(finite.astype(np.int64))
    nan[nz] = seg_sum((use & np.isnan(values)).astype(np.int64))
    inf[nz] = seg_sum((use & np.isinf(values)).astype(np.int64))
    total = np.zeros(n)
    total[nz] = seg_sum(np.where(finite, values, 0.0))
    lo, hi = np.full(n, np.nan), np.full(n, np.nan)
    if nz.any():
        lo[nz] = np.minimum.reduceat(np.where(finite, values, np.inf), starts[nz])
        hi[nz] = np.maximum.reduceat(np.where(finite, values, -np.inf), starts[nz])
    out["count"] = np.where(recorded, k, -1)
    out["nan"] = np.where(recorded, nan, -1)
    out["inf"] = np.where(recorded, inf, -1)
    out["mean"] = np.where(k > 0, total / np.maximum(k, 1), np.nan)
    out["min"], out["max"] = np.where(k > 0, lo, np.nan), np.where(k > 0, hi, np.nan)
    return out
