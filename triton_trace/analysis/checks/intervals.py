"""The elements regular rows touch, as intervals: what the output checks (coverage, double writes) need,
without a lane or a per-element array when every row is a known pattern (tiles, rows, slices).

Rows qualify when ``LaunchContext.regular`` holds (a pattern, a prefix mask, in bounds) and their pattern
has few runs of consecutive elements (``pattern_intervals``); otherwise these return None and the checks
read the lanes.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..context import LaunchContext, pattern_intervals, sorted_unique, unique_rows


def row_intervals(ctx: LaunchContext, rows: np.ndarray, distinct: bool = False) -> Optional[tuple]:
    """(starts, ends, programs, rows): half-open intervals of the elements the active lanes of ``rows``
    touch, in the rows' element size, with the row of each; None when some row is irregular. ``distinct``:
    also None when a pattern touches an element twice (a broadcast), which intervals would hide."""
    ok, groups = ctx.regular_groups(rows)
    if not ok.all():
        return None
    starts, ends, progs, of = ([np.zeros(0, np.int64)] for _ in range(4))
    for pat, members in groups:
        if not len(pat):
            continue
        if distinct and len(sorted_unique(pat)) != len(pat):
            return None
        iv = pattern_intervals(pat, ctx.row_base[members])
        if iv is None:
            return None
        starts.append(iv[0])
        ends.append(iv[1])
        progs.append(np.repeat(ctx.row_prog[members], len(iv[0]) // len(members)))
        of.append(np.repeat(members, len(iv[0]) // len(members)))
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(progs), np.concatenate(of)


def reads_after_writes(ctx: LaunchContext, rows: np.ndarray, time: np.ndarray) -> bool:
    """Whether every element the reading ``rows`` (loads, atomics) read was written earlier (``time``,
    per row) by one of the writing ``rows``, shown from intervals without lanes. False when that is not
    shown (some row irregular, two writes of one element, or a read of an element not written before):
    then the lanes decide."""
    iv = row_intervals(ctx, rows)
    if iv is None:
        return False
    s, e, _, r = iv
    keep = e > s
    s, e, r = s[keep], e[keep], r[keep]
    w, rd = ctx.is_write[r], ctx.is_read[r]
    if not rd.any():
        return True
    # writes of the same elements (a store, then an atomic on it) count from the first of them
    key, cls = unique_rows(np.column_stack([s[w], e[w]]))
    wt = np.full(len(key), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(wt, cls, time[r[w]])
    o = np.argsort(key[:, 0], kind="stable")
    ws, we, wt = key[o, 0], key[o, 1], wt[o]
    if not len(ws) or (ws[1:] < we[:-1]).any():
        return False                    # nothing written, or writes that partly overlap: lanes
    # the first write time along the storage, piecewise: write k on [ws[k], we[k]), nothing between writes
    points = np.column_stack([ws, we]).reshape(-1)
    never = np.iinfo(np.int64).max
    gap = np.where(we[:-1] < ws[1:], never, np.iinfo(np.int64).min)     # an empty gap holds no element
    value = np.column_stack([wt, np.r_[gap, never]]).reshape(-1)[:-1]
    a, b = s[rd], e[rd] - 1
    ia = np.searchsorted(points, a, side="right") - 1
    ib = np.searchsorted(points, b, side="right") - 1
    if (ia < 0).any() or (ib >= len(points) - 1).any():
        return False                    # a read reaches outside every write
    latest = np.maximum.reduceat(np.r_[value, never], np.column_stack([ia, ib + 1]).reshape(-1))[::2]
    return bool((latest < time[r[rd]]).all())


def union(starts: np.ndarray, ends: np.ndarray) -> tuple:
    """The union of half-open intervals, as sorted disjoint (starts, ends)."""
    if not len(starts):
        return starts, ends
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], np.maximum.accumulate(ends[o])
    new = np.r_[True, s[1:] > e[:-1]]                 # a gap before it: a new piece starts
    last = np.r_[np.flatnonzero(new)[1:] - 1, len(s) - 1]
    return s[new], e[last]


def same_program_overlap(starts: np.ndarray, ends: np.ndarray, progs: np.ndarray) -> bool:
    """Whether two intervals of one program share an element."""
    keep = ends > starts                              # an empty interval touches nothing
    starts, ends, progs = starts[keep], ends[keep], progs[keep]
    if len(starts) < 2:
        return False
    o = np.lexsort((starts, progs))
    s, e, p = starts[o], ends[o], progs[o]
    # per program: the largest end so far (restarted at each program) against the next start
    first = np.r_[True, p[1:] != p[:-1]]
    group = np.cumsum(first) - 1
    span = int(e.max()) - int(s.min()) + 2
    run = np.maximum.accumulate(e - int(s.min()) + group * span) - group * span + int(s.min())
    return bool(((s[1:] < run[:-1]) & ~first[1:]).any())


def missing(pieces: tuple, lo: int, hi: int, limit: int) -> tuple:
    """(how many elements of [lo, hi) no piece covers, the first ``limit`` of them); ``pieces`` from
    ``union``."""
    s, e = pieces
    s, e = np.clip(s, lo, hi), np.clip(e, lo, hi)
    covered = int((e - s).sum())
    gap_s = np.r_[lo, e]
    gap_e = np.r_[s, hi]
    keep = gap_e > gap_s
    gap_s, gap_e = gap_s[keep], gap_e[keep]
    first = []
    for a, b in zip(gap_s.tolist(), gap_e.tolist()):
        first += range(a, min(b, a + limit - len(first)))
        if len(first) >= limit:
            break
    return (hi - lo) - covered, first
