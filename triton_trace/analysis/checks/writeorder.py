"""The order of reads and writes of declared outputs: uninitialised reads and double writes (definitions:
sanitizer.py's docstring).

Each is shown without lanes when the outputs' rows are intervals that do not partly overlap
(``intervals.py``). Otherwise the elements are cut into pieces every access covers whole
(``pieces.py``): an entry per (row, piece) says whether those lanes offend, so a launch whose programs all
read an output before writing it (an accumulator never zeroed) is checked from its rows, and only the rows
that give a finding's examples are decoded. The lane-by-lane path remains for ``context.SHORTCUTS = False``
(the tests compare both) and where the pieces would outnumber the lanes.
"""
from __future__ import annotations

import numpy as np

from .. import context
from . import intervals, pieces
from ..context import STORE, LaunchContext
from . import extent as E
from ..findings import where
from .sanitizer import _output_lanes, _output_rows, _outputs, _undefined, lane_findings

_NEVER = np.iinfo(np.int64).max


def check_uninitialized(ctx: LaunchContext) -> list:
    if ctx.launch.skipped_programs:
        return []          # an unrecorded program may have written the element first
    time = ctx.time()
    todo = []
    for ti in _undefined(ctx):
        rows = _output_rows(ctx, ti)
        if not ctx.is_read[rows].any():
            continue                  # never read: nothing can be read before it is written
        if intervals.reads_after_writes(ctx, rows, time):
            continue                  # every read element written before, shown from intervals
        todo.append((ti, rows))

    def bad_entries(cut):
        r, piece = cut.row, cut.piece
        t, w = time[r], ctx.is_write[r]
        first = np.full(len(cut.start), _NEVER, dtype=np.int64)
        np.minimum.at(first, piece[w], t[w])
        return ctx.is_read[r] & (first[piece] >= t)      # an atomic's own write comes after its read

    groups = _by_pieces(ctx, todo, bad_entries)
    if groups is None:
        groups = E.group_lanes(ctx, _uninitialized_lanes(ctx, todo, time))

    declared = set(ctx.launch.outputs)

    def describe(f, g, t):
        what = "declared output" if f['tensor'] in declared else "never-written torch.empty result"
        return (f"{f['op']} of {what} '{f['tensor']}' at {where(f)} reads elements before any program wrote "
                f"them"), None, {}, ""
    return lane_findings(ctx, groups, "uninitialized_read", describe)


def _uninitialized_lanes(ctx: LaunchContext, todo: list, time: np.ndarray) -> np.ndarray:
    bad_parts = []
    for ti, _ in todo:
        lanes, off = _output_lanes(ctx, ti)
        rows = ctx.lane_row[lanes]
        t = time[rows]
        first = np.full(ctx.launch.tensors[ti].storage_size, _NEVER, dtype=np.int64)
        w = ctx.is_write[rows]
        np.minimum.at(first, off[w], t[w])
        r = ctx.is_read[rows]
        bad_parts.append(lanes[r & (first[off] >= t)])
    return np.sort(np.concatenate(bad_parts)) if bad_parts else np.zeros(0, dtype=np.int64)


def check_double_writes(ctx: LaunchContext) -> list:
    todo = []
    for ti in _outputs(ctx):
        rows = _output_rows(ctx, ti)
        rows = rows[ctx.kind[rows] == STORE]
        iv = intervals.row_intervals(ctx, rows, distinct=True)
        if iv is not None and not intervals.same_program_overlap(*iv[:3]):
            continue                  # the stores' elements, as intervals: no program stores one twice
        todo.append((ti, rows))

    def bad_entries(cut):
        # entries of one piece are in row (execution) order: a later entry of the same program stores again
        prog = ctx.row_prog[cut.row]
        order = np.lexsort((cut.row, prog, cut.piece))
        again = np.zeros(len(order), dtype=bool)
        again[order[1:]] = (cut.piece[order[1:]] == cut.piece[order[:-1]]) & (prog[order[1:]] == prog[order[:-1]])
        return again

    groups = _by_pieces(ctx, todo, bad_entries)
    if groups is None:
        groups = E.group_lanes(ctx, _double_write_lanes(ctx, todo))

    def describe(f, g, t):
        return (f"store to declared output '{f['tensor']}' at {where(f)} writes elements that the same program "
                f"already stored"), None, {}, ""
    return lane_findings(ctx, groups, "double_write", describe)


def _double_write_lanes(ctx: LaunchContext, todo: list) -> np.ndarray:
    bad_parts = []
    for ti, _ in todo:
        lanes, off = _output_lanes(ctx, ti)
        store = ctx.kind[ctx.lane_row[lanes]] == STORE
        lanes, off = lanes[store], off[store]
        many = np.bincount(off, minlength=ctx.launch.tensors[ti].storage_size) > 1
        lanes, off = lanes[many[off]], off[many[off]]     # usually none: skip the sort below
        if not len(lanes):
            continue
        key = off * ctx.n_programs + ctx.row_prog[ctx.lane_row[lanes]]
        order = np.argsort(key, kind="stable")
        again = np.zeros(len(lanes), dtype=bool)
        again[order[1:]] = key[order[1:]] == key[order[:-1]]      # a later store by the same program
        bad_parts.append(lanes[again])
    return np.sort(np.concatenate(bad_parts)) if bad_parts else np.zeros(0, dtype=np.int64)


def _by_pieces(ctx: LaunchContext, todo: list, bad_entries):
    """The offending lanes of every (tensor, rows) in ``todo`` grouped by static op (``extent.group_by_op``),
    from pieces (``bad_entries(cut)``: per entry, whether its lanes offend); None when some tensor's rows
    do not cut into pieces (the lanes decide)."""
    if not context.SHORTCUTS:
        return None
    rows, counts, spans, lo_el, hi_el = [], [], [], [], []
    for ti, tensor_rows in todo:
        cut = pieces.cut(ctx, tensor_rows, ctx.launch.tensors[ti].elem_bytes, distinct=True)
        if cut is None:
            return None
        bad = bad_entries(cut)
        r, piece = cut.row[bad], cut.piece[bad]
        rows.append(r)
        counts.append(cut.length[piece])
        lo_el.append(cut.start[piece])
        hi_el.append(cut.start[piece] + cut.length[piece])
        o = np.lexsort((cut.lane[bad], piece, r))       # by row, then element
        spans.append((r[o], cut.start[piece[o]], cut.start[piece[o]] + cut.length[piece[o]], cut.lane[bad][o]))
    if not rows:
        return []

    def lanes_of(row):
        for r, lo, hi, lane in spans:                    # (a row is one tensor's)
            a, b = np.searchsorted(r, row), np.searchsorted(r, row, side="right")
            if b > a and lane[a] >= 0:                   # a row listed by lanes: those lanes
                return np.sort(lane[a:b])
            if b > a:
                return pieces.lanes_in(ctx, row, lo[a:b], hi[a:b])
        return np.zeros(0, dtype=np.int64)
    return E.group_by_op(ctx, np.concatenate(rows), np.concatenate(counts), np.concatenate(lo_el),
                         np.concatenate(hi_el), lanes_of)
