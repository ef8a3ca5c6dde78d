"""The elements rows touch, cut into pieces that each access covers whole or not at all.

A check that asks, element by element, who touched it (the race check) needs one entry per lane when it
reads lanes: a million programs storing a 1024-element block make a billion entries, although their rows
are a handful of intervals. Cutting the storage at every interval's ends gives pieces (runs of
consecutive elements) over which nothing changes from one element to the next: the same rows touch every
element of a piece, in the same order. So a piece stands for all its elements, with its length as weight,
and the entries are (row, piece) pairs: as many as the intervals times the pieces each spans, which for
tiles, rows and blocks is a few per row.

Regular rows (``LaunchContext.regular``: a pattern, a prefix mask, in bounds) of the storage's unit
element size whose pattern has few runs (``pattern_intervals``) give intervals; every other row gives its
active in-bounds lanes, one element each (``off * elem_bytes // unit``, as the lane path counts them).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import numpy as np

from ..context import LaunchContext, pattern_intervals, sorted_unique


class Pieces(NamedTuple):
    row: np.ndarray       # per entry: the row that touches the piece
    piece: np.ndarray     # per entry: the piece; entries sorted by piece, then row (execution order)
    start: np.ndarray     # per piece: its first element
    length: np.ndarray    # per piece: how many elements it holds
    lane: np.ndarray      # per entry: the lane it stands for, when its row gives lanes; -1: an interval's


def cut(ctx: LaunchContext, rows: np.ndarray, unit: int, distinct: bool = False) -> Optional[Pieces]:
    """The entries of ``rows`` (ascending, in execution order) as pieces, in elements of ``unit`` bytes;
    None when a quarter of the lanes belong to irregular rows, or the pieces would make more entries than
    the rows have lanes (intervals that each span many pieces): the lanes are then the cheaper list.
    ``distinct``: an entry stands for as many lanes as its piece has elements (a pattern that touches an
    element twice, a broadcast, gives its lanes instead)."""
    regular, groups = ctx.regular_groups(rows)
    regular &= ctx.eb[rows] == unit
    starts, ends, owners = [], [], []
    for pat, members in groups:
        members = members[ctx.eb[members] == unit]
        if not len(members) or not len(pat):
            continue                      # no active lane: touches nothing
        iv = pattern_intervals(pat, ctx.row_base[members])
        if iv is None or (distinct and len(sorted_unique(pat)) != len(pat)):   # its lanes are the list
            regular[np.isin(rows, members)] = False
            continue
        starts.append(iv[0])
        ends.append(iv[1])
        owners.append(np.repeat(members, len(iv[0]) // len(members)))
    irregular = rows[~regular]
    total = int(ctx.lane_count[rows].sum())
    if 4 * int(ctx.lane_count[irregular].sum()) > total:
        return None                       # many gathers: their lanes are the list (the lane path filters)
    lr, lanes, off = ctx.inside_lanes(irregular)
    el = off * ctx.eb[lr] // unit
    s = np.concatenate(starts + [el]).astype(np.int64, copy=False)
    e = np.concatenate(ends + [el + 1]).astype(np.int64, copy=False)
    r = np.concatenate(owners + [lr]).astype(np.int64, copy=False)
    ln = np.concatenate([np.full(len(s) - len(el), -1, dtype=np.int64), lanes.astype(np.int64)])
    bounds = sorted_unique(np.concatenate([s, e]))
    first = np.searchsorted(bounds, s)
    spans = np.searchsorted(bounds, e) - first
    if int(spans.sum()) > total:
        return None
    entry = np.repeat(np.arange(len(s)), spans)
    step = np.arange(len(entry)) - np.repeat(np.cumsum(spans) - spans, spans)
    piece, row = first[entry] + step, r[entry]
    order = np.lexsort((row, piece))
    return Pieces(row[order], piece[order], bounds[:-1], np.diff(bounds), ln[entry][order])


def lanes_in(ctx: LaunchContext, row: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The active in-bounds lanes of ``row`` (in the row's element size) whose element lies in one of the
    sorted, disjoint intervals [starts, ends), in order: one row decoded."""
    _, lanes, off = ctx.inside_lanes(np.array([row]))
    at = np.searchsorted(starts, off, side="right") - 1
    return lanes[(at >= 0) & (off < ends[np.maximum(at, 0)])]


def elements(ids: np.ndarray, pieces: Optional[Pieces], limit: int) -> tuple:
    """(how many elements, the first ``limit`` of them) of the pieces ``ids`` in ascending order (elements
    themselves when ``pieces`` is None)."""
    if pieces is None:
        return len(ids), ids[:limit]
    length = pieces.length[ids]
    upto = int(np.searchsorted(np.cumsum(length), limit)) + 1       # the pieces that hold the first few
    first = np.concatenate([np.arange(a, a + n) for a, n in zip(pieces.start[ids[:upto]].tolist(),
                                                                 length[:upto].tolist())] or [np.zeros(0, np.int64)])
    return int(length.sum()), first[:limit]
