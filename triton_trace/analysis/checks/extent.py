"""The full extent of a finding: every program, every element, counted exactly, listed in short.

A finding names one root cause (a kernel line, a kind, a tensor); its extent says how far the cause
reaches: the programs involved (count, runs of consecutive ids, the first few), the elements (distinct
count, runs of consecutive storage offsets, the first few with their values), the lanes. The counts are
exact over the whole launch, whatever ``max_findings`` keeps; the lists are cut (``MAX_RANGES`` runs,
``MAX_LISTED`` ids) and say how many there are in all, so a short list never reads as the whole. A kind
whose records tell how many lanes a cause took but not which (``uncounted``) gives no element count at all
(``count`` None, ``not_counted`` saying why), never a 0.

Checks hand their offending lanes (or pieces: intervals of elements, pieces.py) to ``group_by_op``, which
groups them by static op (kind, tensor, file, line) without a Python loop over lanes: one group per
root cause, whatever the number of programs. ``view_positions`` (storage offsets to view indices) lives
here, below the checks that name elements by their index.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...model import TensorInfo
from ...model.values import lane_values
from ..context import LaunchContext, sorted_unique
from . import intervals

MAX_RANGES = 8       # runs of programs or elements listed per extent
MAX_LISTED = 64      # program ids listed for a race's writers and readers


class OpGroup(NamedTuple):
    """The offending lanes of one static op, over every program."""
    op: int                 # static op id (ctx.row_op)
    row: int                # its first offending row
    count: int              # offending lanes
    rows: int               # offending rows (op executions)
    programs: np.ndarray    # program indices (ctx.pids), ascending
    op_rows: np.ndarray     # the first offending row of each program: what per-program counts attribute
    starts: np.ndarray      # the offending elements as sorted disjoint half-open intervals
    ends: np.ndarray
    lanes: np.ndarray       # the first offending lanes (indices into ctx.offsets), execution order
    members: np.ndarray     # indices into the arrays group_by_op was given


def group_by_op(ctx: LaunchContext, rows, counts, starts, ends, lanes_of) -> list:
    """Entries (a row, how many of its lanes offend, the elements [starts, ends) they touch) grouped by
    static op, in op order. ``lanes_of(row)`` lists one row's offending lanes in order; it is asked only
    for the first rows of each group (its examples)."""
    if not len(rows):
        return []
    rows, counts = np.asarray(rows, np.int64), np.asarray(counts, np.int64)
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    k = ctx.params.max_examples
    key = ctx.row_op[rows]
    order = np.lexsort((rows, key))
    bounds = np.flatnonzero(np.r_[True, key[order][1:] != key[order][:-1], True])
    out = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        mine = order[a:b]
        r = rows[mine]
        urow = sorted_unique(r)
        prog = ctx.row_prog[urow]
        po = np.lexsort((urow, prog))
        head = np.r_[True, prog[po][1:] != prog[po][:-1]]
        s, e = intervals.union(starts[mine], ends[mine])
        ex: list = []
        for row in urow.tolist():        # lanes in execution order: rows ascending, lanes within a row
            ex += lanes_of(row)[:k - len(ex)].tolist()
            if len(ex) >= k:
                break
        out.append(OpGroup(int(key[mine[0]]), int(urow[0]), int(counts[mine].sum()), len(urow),
                           sorted_unique(prog), urow[po][head], s, e, np.array(ex, np.int64), mine))
    return out


def group_lanes(ctx: LaunchContext, bad: np.ndarray) -> list:
    """``group_by_op`` of offending lanes (ascending indices into ctx.offsets)."""
    bad = np.asarray(bad, np.int64)
    if not len(bad):
        return []
    rows = ctx.rows_of_lanes(bad).astype(np.int64)
    off = ctx.lane_offsets(bad)

    def lanes_of(row):
        a, b = np.searchsorted(rows, row), np.searchsorted(rows, row, side="right")
        return bad[a:b]
    return group_by_op(ctx, rows, np.ones(len(bad), np.int64), off, off + 1, lanes_of)


def runs(values: np.ndarray) -> tuple:
    """Sorted distinct integers as runs of consecutive ones: (firsts, lasts), inclusive."""
    if not len(values):
        return values, values
    cut = np.flatnonzero(np.diff(values) != 1)
    return values[np.r_[0, cut + 1]], values[np.r_[cut, len(values) - 1]]


def programs(ctx: LaunchContext, prog: np.ndarray) -> dict:
    """The extent of program indices ``prog`` (ascending): runs of consecutive (x, y, z) ids over the grid."""
    lin = ctx.programs[np.asarray(prog, np.int64)]
    lo, hi = runs(lin)
    pid = lambda v: [int(c) for c in np.unravel_index(int(v), tuple(int(d) for d in ctx.dims))]
    return {"count": int(len(lin)), "runs": int(len(lo)),
            "ranges": [[pid(a), pid(b)] for a, b in zip(lo[:MAX_RANGES], hi[:MAX_RANGES])],
            "first": [ctx.pid(int(p)) for p in np.asarray(prog)[:ctx.params.max_examples]]}


def listed(ctx: LaunchContext, prog: np.ndarray) -> dict:
    """A set of programs named in full up to ``MAX_LISTED`` (a race's writers, its readers)."""
    prog = np.asarray(prog, np.int64)
    return {"count": int(len(prog)), "programs": [ctx.pid(int(p)) for p in prog[:MAX_LISTED]]}


def elements(starts: np.ndarray, ends: np.ndarray, lanes: int, first: list) -> dict:
    """The extent of the elements [starts, ends) (sorted, disjoint), ``lanes`` accesses to them."""
    s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    if len(s):                         # runs that touch merge: [0, 4) and [4, 8) read as 0..7
        new = np.r_[True, s[1:] > e[:-1]]
        last = np.r_[np.flatnonzero(new)[1:] - 1, len(s) - 1]
        s, e = s[new], e[last]
    return {"count": int((e - s).sum()), "lanes": int(lanes), "runs": int(len(s)),
            "ranges": [[int(a), int(b) - 1] for a, b in zip(s[:MAX_RANGES], e[:MAX_RANGES])], "first": first}


def uncounted(lanes: int, why: str) -> dict:
    """The elements of a finding whose records say how many lanes it took, not which: ``count`` None (never
    a 0 that reads as "no element"), ``not_counted`` says why."""
    return {"count": None, "lanes": int(lanes), "runs": 0, "ranges": [], "first": [], "not_counted": why}


def examples(ctx: LaunchContext, lanes: np.ndarray, tensor, with_values: bool = True) -> list:
    """[{"offset", "index", "program", "value"}] of a few lanes; "index" is the position in the tensor's
    view (None outside it), "value" what the lane loaded or stored (None when not recorded)."""
    lanes = np.asarray(lanes, np.int64)
    if not len(lanes):
        return []
    rows = ctx.rows_of_lanes(lanes).astype(np.int64)
    off = ctx.lane_offsets(lanes)
    if tensor is not None and len(tensor.shape):
        inside, idx = view_positions(tensor, off)
        index = [[int(v) for v in idx[i]] if inside[i] else None for i in range(len(off))]
    else:
        index = [None] * len(off)
    value = [None] * len(off)
    if with_values:
        urow = sorted_unique(rows)
        _, vals, has = lane_values(ctx.launch, urow)
        cnt = ctx.lane_count[urow]
        at = (np.cumsum(cnt) - cnt)[np.searchsorted(urow, rows)] + (lanes - ctx.lane_pos[rows])
        value = [_number(vals[a]) if has[a] else None for a in at.tolist()]
    return [{"offset": int(o), "index": i, "program": ctx.pid(int(ctx.row_prog[r])), "value": v}
            for o, i, r, v in zip(off.tolist(), index, rows.tolist(), value)]


def view_positions(t: TensorInfo, off: np.ndarray) -> tuple:
    """(inside the view, index in the view (n, ndim)) for element offsets into the storage."""
    off = np.asarray(off, dtype=np.int64)
    nd = len(t.shape)
    idx = np.zeros((len(off), nd), dtype=np.int64)
    if any(s == 0 for s in t.shape):
        return np.zeros(len(off), dtype=bool), idx
    dims = sorted((d for d in range(nd) if t.shape[d] > 1 and t.strides[d] != 0), key=lambda d: t.strides[d])
    reach, nested = 0, True
    for d in dims:                      # each stride beyond the reach of the smaller ones: unique indices
        nested &= t.strides[d] > reach
        reach += (t.shape[d] - 1) * t.strides[d]
    if nested:
        r = off - t.storage_offset
        inside = r >= 0
        for d in reversed(dims):
            q = r // t.strides[d]
            inside &= q < t.shape[d]
            idx[:, d] = np.clip(q, 0, t.shape[d] - 1)
            r = r - idx[:, d] * t.strides[d]
        return inside & (r == 0), idx
    # Overlapping or unusual strides: look the offsets up among the view's own.
    vo = t.view_offsets().reshape(-1)
    order = np.argsort(vo, kind="stable")
    pos = np.clip(np.searchsorted(vo[order], off), 0, len(vo) - 1)
    inside = vo[order][pos] == off
    idx[:] = np.stack(np.unravel_index(order[pos], t.shape), axis=1) if nd else idx
    return inside, idx


def _number(v: float):
    """A value for JSON: an int when whole, NaN and Inf as strings (JSON has neither)."""
    if not np.isfinite(v):
        return "nan" if np.isnan(v) else ("inf" if v > 0 else "-inf")
    return int(v) if float(v).is_integer() and abs(v) < 2 ** 53 else float(v)


def pid_text(pid) -> str:
    return str(tuple(pid)) if any(pid[1:]) else str(pid[0])


def span_text(ranges: list, n_runs: int, fmt=str) -> str:
    """'0..15, 32..47, ...' of the listed runs."""
    text = ", ".join(fmt(a) if a == b else f"{fmt(a)}..{fmt(b)}" for a, b in ranges[:4])
    return text + (", ..." if n_runs > min(4, len(ranges)) else "")


def describe(extent: dict) -> str:
    """The extent in words, as the report, the pytest failure and the UI's message show it."""
    parts = []
    p = extent.get("programs")
    if p and p["count"] == 1:
        parts.append(f"program {pid_text(p['first'][0])}")
    elif p and p["count"]:
        parts.append(f"{p['count']} program(s) ({span_text(p['ranges'], p['runs'], pid_text)})")
    el = extent.get("elements")
    parts.append(elements_text(el))
    parts = [x for x in parts if x]
    text = "in " + ", ".join(parts) if parts else ""
    if el and el.get("count") is None and el.get("not_counted"):
        text += f"{'; ' if text else ''}elements not counted: {el['not_counted']}"
    if not extent.get("exact", True):
        text += f" (at least: {extent.get('note', 'not every program was seen')})"
    return text


def elements_text(el) -> str:
    if not el or not el.get("count"):
        return ""
    return (f"{el['count']} element(s) at offsets {span_text(el['ranges'], el['runs'])}"
            + (f" ({el['lanes']} accesses)" if el["lanes"] and el["lanes"] != el["count"] else ""))


def attributed(ctx: LaunchContext, prog: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The first of ``rows`` of each program in ``prog``, for per-program counts; -1 where a program has none."""
    rows = np.asarray(rows, np.int64)
    if not len(rows):
        return rows
    p = ctx.row_prog[rows]
    o = np.lexsort((rows, p))
    head = np.r_[True, p[o][1:] != p[o][:-1]]
    return rows[o][head][np.isin(p[o][head], prog)]


def intersect(a_s: np.ndarray, a_e: np.ndarray, b_s: np.ndarray, b_e: np.ndarray) -> tuple:
    """The intersection of two lists of sorted disjoint half-open intervals, sorted and disjoint."""
    if not len(a_s) or not len(b_s):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    points = sorted_unique(np.concatenate([a_s, a_e, b_s, b_e]).astype(np.int64))
    lo, hi = points[:-1], points[1:]
    inside = lambda s, e: (np.searchsorted(s, lo, side="right") - np.searchsorted(e, lo, side="right")) == 1
    keep = inside(a_s, a_e) & inside(b_s, b_e)
    return intervals.union(lo[keep], hi[keep])
