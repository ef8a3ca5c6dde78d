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
        within = ranges(np.zeros(len(sel), np.int64), counts[sel])
        starts = np.repeat(o["value_start"][rows][sel].astype(np.int64), counts[sel])
        byte0 = starts + within * dt.itemsize
        raw = launch.values[byte0[:, None] + np.arange(dt.itemsize)]
        dest = ranges(pos[sel], counts[sel])
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
    seg = np.repeat(np.arange(n), counts)
    use = has & mask
    finite = use & np.isfinite(values)
    recorded = np.bincount(seg[has], minlength=n) > 0
    out["nan"] = np.where(recorded, np.bincount(seg[use & np.isnan(values)], minlength=n), -1)
    out["inf"] = np.where(recorded, np.bincount(seg[use & np.isinf(values)], minlength=n), -1)
    k = np.bincount(seg[finite], minlength=n)
    out["count"] = np.where(recorded, k, -1)
    total = np.bincount(seg[finite], weights=values[finite], minlength=n)
    out["mean"] = np.where(k > 0, total / np.maximum(k, 1), np.nan)
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    np.minimum.at(lo, seg[finite], values[finite])
    np.maximum.at(hi, seg[finite], values[finite])
    out["min"], out["max"] = np.where(k > 0, lo, np.nan), np.where(k > 0, hi, np.nan)
    return out
