"""Numpy building blocks the analyses share over offsets and op rows: sorted distinct values, a pattern's runs
of consecutive elements and the intervals they cover, distinct rows of a table, and the flat lane indices of
rows. Plain functions of arrays (no launch, no parameters): analysis/context.py lays a launch out with them,
and the checks and metrics read them through it."""
from __future__ import annotations

import numpy as np


def sorted_unique(a: np.ndarray) -> np.ndarray:
    # np.unique without return_inverse hashes in numpy >= 2.3 and is ~50x slower than sorting here.
    if a.size == 0:
        return a.copy()
    s = np.sort(a)
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def pattern_runs(pattern: np.ndarray) -> tuple:
    """The distinct offsets of a pattern as runs of consecutive elements: (starts, lengths)."""
    u = sorted_unique(pattern)
    if not len(u):
        return u, u
    first = np.flatnonzero(np.r_[True, np.diff(u) != 1])
    return u[first], np.diff(np.r_[first, len(u)])


def pattern_intervals(pattern: np.ndarray, bases: np.ndarray):
    """The elements of rows ``bases + pattern`` as half-open intervals (starts, ends), one run of
    consecutive elements after another; None when the pattern has too many runs for intervals to pay
    (more than a quarter of its lanes: a gather)."""
    run_start, run_len = pattern_runs(pattern)
    if len(run_start) * 4 > max(len(pattern), 1):
        return None
    starts = (bases[:, None] + run_start).reshape(-1)
    return starts, starts + np.tile(run_len, len(bases))


def unique_rows(key: np.ndarray) -> tuple:
    """(distinct rows of a 2-D int array, the class of every row), classes in a deterministic order.
    np.unique(axis=0) sorts rows as bytes (~10 s for a million rows); a 64-bit fingerprint sorts fast,
    and a check falls back to np.unique on a collision."""
    mult = np.uint64(0x9E3779B97F4A7C15) ** np.arange(1, key.shape[1] + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        fp = (key.astype(np.uint64) * mult).sum(axis=1, dtype=np.uint64)
    _, first, inverse = np.unique(fp, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not (key[first][inverse] == key).all():
        classes, inverse = np.unique(key, axis=0, return_inverse=True)
        return classes, inverse.reshape(-1)
    return key[first], inverse


def lane_index(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Flat indices of the lanes of rows given by (start, count), row after row."""
    counts = counts.astype(np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = starts.astype(np.int64) - (np.cumsum(counts) - counts)
    return np.repeat(shift, counts) + np.arange(total, dtype=np.int64)
