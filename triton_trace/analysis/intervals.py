"""The elements regular rows touch, as intervals: what the output checks (coverage, double writes) need,
without a lane or a per-element array when every row is a known pattern (tiles, rows, slices).

Rows qualify when ``LaunchContext.regular`` holds (a pattern, a prefix mask, in bounds) and their pattern
has few runs of consecutive elements (``pattern_intervals``); otherwise these return None and the checks
read the lanes.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .context import LaunchContext, pattern_intervals, sorted_unique


def row_intervals(ctx: LaunchContext, rows: np.ndarray, distinct: bool = False) -> Optional[tuple]:
    """(starts, ends, programs): half-open intervals of the elements the active lanes of ``rows`` touch,
    in the rows' element size; None when some row is irregular. ``distinct``: also None when a pattern
    touches an element twice (a broadcast), which intervals would hide."""
    ok, groups = ctx.regular_groups(rows)
    if not ok.all():
        return None
    starts, ends, progs = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
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
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(progs)


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
