"""The sanitizer's per-lane checks: bounds, views, uninitialised reads, output coverage, double writes.

Definitions (what each finding means exactly):

- out_of_bounds: an active lane whose element lies outside its tensor's storage (offset < 0 or past the
  end). The recorder skipped it at runtime; on a GPU it reads garbage or faults.
- out_of_view: an active lane inside the storage but not at any element of the tensor's view (its
  shape, strides and storage offset): e.g. a wrong stride on a transposed view, or the padding of a
  slice. Milder: the memory exists, but it is not the tensor's. Views with a zero stride (expanded or
  restrided on purpose) are checked against their storage only.
- uninitialized_read: a load or atomic of an element of a declared output (``trace(outputs=...)``, whose
  contents are undefined at launch) at a point where no program had yet written that element, in the
  interpreter's sequential order: programs in the order they ran (``Launch.recorded_ids``, else (x, y, z)),
  each program's ops in order. A read of an element another program wrote earlier without
  synchronisation is a race (races.py), not this.
- nonfinite: a store wrote NaN or Inf that was born in the kernel from finite operands (a division by
  zero, ``exp`` overflow, a cast to float16 out of range); the finding names the birth (line, operation,
  operand values). nonfinite_input: the NaN/Inf came from an argument that already held it (a warning).
- assert_failed: a ``tl.device_assert`` (checked when the launch ran with debug on, as a compiled
  kernel checks it) was false on some lanes; the launch stopped in that program, as a GPU traps.
- unwritten_output: elements of a declared output's view that no program wrote (stores or atomics).
  Checked only when every program ran and was recorded.
- double_write: an element of a declared output stored more than once by the same program with plain
  stores. Two programs storing one element is a race instead, or, inside a lock's critical section,
  intended (see races.py).

Lanes whose element size differs from their tensor's (a pointer cast) are bounds-checked in bytes but
skip the element-level checks.
"""
from __future__ import annotations

import numpy as np

from ...model import TensorInfo
from .. import context
from . import intervals
from . import extent as E
from ..context import LaunchContext, pattern_intervals, sorted_unique
from .extent import view_positions
from ..findings import Finding, block_index, op_fields, short_list, where


def _covers_storage(t: TensorInfo) -> bool:
    """The view is a permutation of the whole storage: every in-storage element is in the view."""
    dims = sorted((d for d in range(len(t.shape)) if t.shape[d] > 1), key=lambda d: t.strides[d])
    expect = 1
    for d in dims:
        if t.strides[d] != expect:
            return False
        expect *= t.shape[d]
    return t.storage_offset == 0 and expect == t.storage_size


def _expanded(t: TensorInfo) -> bool:
    """A view with a zero stride (``expand``, ``as_strided(..., (0, ...))``, a broadcast): made on purpose
    to reuse memory, and libraries index the memory behind it past its nominal extent (a gather over a
    restrided input, even along a dimension of size 1). Such a view is checked against its storage only
    (out_of_bounds)."""
    return any(st == 0 for st in t.strides)


def _example_fields(ctx: LaunchContext, t: TensorInfo, lanes: np.ndarray) -> dict:
    off = ctx.lane_offsets(lanes)
    fields = {"offsets": tuple(int(o) for o in off), "lanes": tuple(block_index(ctx, int(i)) for i in lanes)}
    if t is not None and len(t.shape):
        inside, idx = view_positions(t, off)
        fields["indices"] = tuple(tuple(int(v) for v in idx[i]) if inside[i] else None for i in range(len(off)))
    return fields


def lane_findings(ctx: LaunchContext, groups: list, kind: str, describe, with_values: bool = True) -> list:
    """One finding per ``extent.OpGroup``: ``describe(fields, group, tensor)`` gives (what happened, the
    valid range or None, kind-specific extent keys, their words); the extent's words follow.
    ``with_values`` False: the examples' values only for stores and atomics (what an out-of-bounds load
    "read" was never memory's)."""
    out = []
    for g in groups:
        f = op_fields(ctx, g.row)
        ti = int(ctx.tensor[g.row])
        t = ctx.launch.tensors[ti] if ti >= 0 else None
        ex = _example_fields(ctx, t, g.lanes)
        what, valid, more, words = describe(f, g, t)
        extent = {"exact": True, "programs": E.programs(ctx, g.programs),
                  "elements": E.elements(g.starts, g.ends, g.count,
                                         E.examples(ctx, g.lanes, t, with_values or bool(ctx.is_write[g.row]))),
                  **more}
        first = "" if len(g.programs) == 1 else f", first in program {E.pid_text(ctx.pid(int(ctx.row_prog[g.row])))}"
        message = f"{what}: {g.count} lane(s) {E.describe(extent)}{words} (first element offsets " \
                  f"{short_list(ex['offsets'])}{first})"
        out.append(Finding(kind=kind, kernel=ctx.launch.kernel_name, launch=ctx.index, message=message,
                           count=g.count, program=tuple(ctx.pid(int(ctx.row_prog[g.row]))), valid_range=valid,
                           rows=g.rows, extent=extent, op_row=g.row, op_rows=g.op_rows, **f, **ex))
    return out


def check_bounds(ctx: LaunchContext) -> list:
    bad = ctx.oob_lane_index
    if not len(bad):
        return _check_views(ctx)
    rows = ctx.rows_of_lanes(bad).astype(np.int64)
    off = ctx.lane_offsets(bad)

    def lanes_of(row):
        return bad[np.searchsorted(rows, row):np.searchsorted(rows, row, side="right")]
    groups = E.group_by_op(ctx, rows, np.ones(len(bad), np.int64), off, off + 1, lanes_of)

    def describe(f, g, t):
        o, r = off[g.members], rows[g.members]
        limit = int(ctx.row_limit[g.row])
        more = {"past_end": _past_end(o, limit), "mask_lanes": _mask_lanes(ctx, bad[g.members], r)}
        pe, ml = more["past_end"], more["mask_lanes"]
        words = "".join([f"; up to {pe['past_end']} element(s) past the end" if pe["past_end"] else "",
                         f"; up to {pe['before_start']} before the start" if pe["before_start"] else "",
                         f"; a mask must turn off block lanes {E.span_text(ml['ranges'], ml['runs'])} "
                         f"({ml['count']} of {ml['of']})"])
        if t is None:
            return f"{f['op']} at {where(f)} at addresses outside every tensor argument", None, more, words
        return (f"{f['op']} at {where(f)} outside the storage of '{f['tensor']}' (valid 0..{limit - 1})",
                (0, limit - 1), more, words)
    return lane_findings(ctx, groups, "out_of_bounds", describe, with_values=False) + _check_views(ctx)


def _past_end(off: np.ndarray, limit: int) -> dict:
    """How far out-of-bounds offsets reach: past the last element, before the first."""
    over, under = off[off >= limit], off[off < 0]
    return {"limit": int(limit), "past_end": int(over.max() - limit + 1) if len(over) else 0,
            "before_start": int(-under.min()) if len(under) else 0,
            "elements_past_end": int(len(sorted_unique(over))), "elements_before_start": int(len(sorted_unique(under)))}


def _mask_lanes(ctx: LaunchContext, lanes: np.ndarray, rows: np.ndarray) -> dict:
    """The positions in the op's block (flat) of the out-of-bounds lanes: what a mask must turn off."""
    pos = sorted_unique(lanes - ctx.lane_pos[rows])
    lo, hi = E.runs(pos)
    row = int(rows[0])
    nd = int(ctx.launch.ops["ndim"][row])
    return {"count": int(len(pos)), "of": int(ctx.lane_count[row]), "runs": int(len(lo)),
            "ranges": [[int(a), int(b)] for a, b in zip(lo[:E.MAX_RANGES], hi[:E.MAX_RANGES])],
            "shape": [int(s) for s in ctx.launch.ops["shape"][row][:nd]]}


def _check_views(ctx: LaunchContext) -> list:
    bad_parts = []
    for ti, t in enumerate(ctx.launch.tensors):
        if _covers_storage(t) or _expanded(t):
            continue
        rows = _output_rows(ctx, ti)
        if context.SHORTCUTS:
            rows = _rows_maybe_outside(ctx, t, rows)
        lanes, off = _lanes_of_rows(ctx, rows)
        inside, _ = view_positions(t, off)
        bad_parts.append(lanes[~inside])
    bad = np.sort(np.concatenate(bad_parts)) if bad_parts else np.zeros(0, dtype=np.int64)

    def describe(f, g, t):
        vo = t.view_offsets()
        valid = (int(vo.min()), int(vo.max())) if vo.size else None
        return (f"{f['op']} of '{f['tensor']}' at {where(f)} inside the storage but outside the view (shape "
                f"{list(t.shape)}, strides {list(t.strides)}, storage offset {t.storage_offset})"), valid, {}, ""
    return lane_findings(ctx, E.group_lanes(ctx, bad), "out_of_view", describe)


def _output_rows(ctx: LaunchContext, ti: int) -> np.ndarray:
    """Tensor ti's rows in its own element size."""
    t = ctx.launch.tensors[ti]
    return ctx.mem_rows[(ctx.tensor[ctx.mem_rows] == ti) & (ctx.eb[ctx.mem_rows] == t.elem_bytes)]


def _output_lanes(ctx: LaunchContext, ti: int) -> tuple:
    """(lane indices, offsets) of the active in-bounds lanes of tensor ti's rows in its own element size,
    decoding only those rows."""
    return _lanes_of_rows(ctx, _output_rows(ctx, ti))


def _rows_maybe_outside(ctx: LaunchContext, t: TensorInfo, rows: np.ndarray) -> np.ndarray:
    """The rows whose lanes may leave the view ``t`` (a slice, a strided view), without reading lanes: a
    regular row whose pattern is a few runs of consecutive elements (a tile's rows) stays inside when every
    run starts inside the view and fits in the view's contiguous stretch there (its innermost dimensions
    whose elements follow one another in the storage: a run of one element only has to start inside). The
    others (and irregular rows) are for the lanes to decide."""
    merged, extent = [], 1
    for d in sorted((d for d in range(len(t.shape)) if t.shape[d] > 1), key=lambda d: t.strides[d]):
        if t.strides[d] != extent:
            break
        merged.append(d)
        extent *= t.shape[d]
    ok, groups = ctx.regular_groups(rows)
    for pat, members in groups:
        iv = pattern_intervals(pat, ctx.row_base[members]) if len(pat) else None
        if iv is None:
            ok[np.isin(rows, members)] = False
            continue
        starts, length = iv[0], iv[1] - iv[0]
        inside, idx = view_positions(t, starts)
        at = (idx[:, merged] * np.array([t.strides[d] for d in merged], dtype=np.int64)).sum(axis=1)
        inside &= at + length <= extent            # (no contiguous dimension: extent 1, runs of one)
        per_row = inside.reshape(len(members), -1).all(axis=1)
        ok[np.isin(rows, members[~per_row])] = False
    return rows[~ok]


def _lanes_of_rows(ctx: LaunchContext, rows: np.ndarray) -> tuple:
    _, lanes, off = ctx.inside_lanes(rows)
    return lanes, off


def _outputs(ctx: LaunchContext) -> list:
    names = {t.name: i for i, t in enumerate(ctx.launch.tensors)}
    return sorted({names[o] for o in ctx.launch.outputs if o in names})


def _undefined(ctx: LaunchContext) -> list:
    """The declared outputs and the arguments whose storage still held the poison of an empty tensor at
    launch (``meta["poisoned"]``, record/memory/poison.py): undefined for the uninitialised-read check. Only
    declared outputs are checked for coverage and double writes: a poisoned buffer need not be filled."""
    names = {t.name: i for i, t in enumerate(ctx.launch.tensors)}
    undefined = set(ctx.launch.outputs) | set((ctx.launch.meta or {}).get("poisoned", ()))
    return sorted({names[o] for o in undefined if o in names})


def _stretches(t: TensorInfo):
    """The view's elements as runs of ``extent`` consecutive storage elements starting at ``starts``, in the
    view's index order (row-major): (starts, extent) when its last dimensions are contiguous in that order
    (a row-major tensor, a slice of one) and its runs do not meet; None otherwise, or when the runs are
    short and many (a transposed view: its elements one by one)."""
    extent, d = 1, len(t.shape) - 1
    while d >= 0 and (t.shape[d] == 1 or t.strides[d] == extent):
        extent *= t.shape[d]
        d -= 1
    outer = t.shape[:d + 1]
    if int(np.prod(outer)) > max(1 << 16, int(np.prod(t.shape)) // 8):
        return None
    starts = np.full((), t.storage_offset, dtype=np.int64)
    for size, stride in zip(outer, t.strides[:d + 1]):
        starts = starts[..., None] + np.arange(size, dtype=np.int64) * stride
    starts = starts.reshape(-1)
    ordered = np.sort(starts)
    return None if (np.diff(ordered) < extent).any() else (starts, extent)


def _coverage_by_intervals(ctx: LaunchContext, ti: int):
    """The elements of an output no program wrote, as sorted disjoint half-open intervals of storage
    offsets, from the write rows' intervals and the view's runs (``_stretches``); None when a write row is
    irregular or the view has no such runs."""
    t = ctx.launch.tensors[ti]
    view = _stretches(t) if t.shape and context.SHORTCUTS else None
    if view is None:
        return None
    rows = _output_rows(ctx, ti)
    iv = intervals.row_intervals(ctx, rows[ctx.is_write[rows]])
    if iv is None:
        return None
    s, e = intervals.union(iv[0], iv[1])
    starts, extent = view
    vs, ve = intervals.union(starts, starts + extent)
    lo, hi = int(vs[0]), int(ve[-1])
    s, e = np.clip(s, lo, hi), np.clip(e, lo, hi)
    gs, ge = np.r_[lo, e], np.r_[s, hi]                      # what the writes leave between them
    keep = ge > gs
    return E.intersect(gs[keep], ge[keep], vs, ve)


def _coverage_by_lanes(ctx: LaunchContext, ti: int) -> tuple:
    t = ctx.launch.tensors[ti]
    lanes, off = _output_lanes(ctx, ti)
    written = np.zeros(t.storage_size, dtype=bool)
    written[off[ctx.is_write[ctx.lane_row[lanes]]]] = True
    vo = t.view_offsets().reshape(-1)
    miss = sorted_unique(vo[~written[vo]]) if vo.size else np.zeros(0, np.int64)
    lo, hi = E.runs(miss)
    return lo, hi + 1


def missing_elements(ctx: LaunchContext, ti: int) -> tuple:
    """The elements of output ``ti`` no program of the launch wrote: sorted disjoint half-open intervals of
    storage offsets, in its element size."""
    found = _coverage_by_intervals(ctx, ti)
    return _coverage_by_lanes(ctx, ti) if found is None else found


def written_elements(ctx: LaunchContext, ti: int) -> tuple:
    """The elements of tensor ``ti``'s storage its write rows (in its element size) wrote, as sorted disjoint
    half-open intervals of storage offsets."""
    rows = _output_rows(ctx, ti)
    rows = rows[ctx.is_write[rows]]
    iv = intervals.row_intervals(ctx, rows)
    if iv is not None:
        return intervals.union(iv[0], iv[1])
    _, off = _lanes_of_rows(ctx, rows)
    lo, hi = E.runs(sorted_unique(off)) if len(off) else (np.zeros(0, np.int64), np.zeros(0, np.int64) - 1)
    return lo, hi + 1


def unwritten_finding(launch, index: int, ti: int, s: np.ndarray, e: np.ndarray, k: int,
                      by: str = "any program") -> Finding:
    """The unwritten_output finding of output ``ti`` of ``launch`` (launch number ``index``), whose
    elements in [s, e) nobody wrote; ``by`` names who could have."""
    t = launch.tensors[ti]
    n = int((e - s).sum())
    first = np.concatenate([np.arange(a, min(b, a + k)) for a, b in zip(s[:k].tolist(), e[:k].tolist())])[:k]
    inside, idx = view_positions(t, first)
    index_ = tuple(tuple(int(v) for v in i) for i in idx)
    ex = [{"offset": int(o), "index": list(i), "program": None, "value": None} for o, i in zip(first.tolist(), index_)]
    extent = {"exact": True, "elements": E.elements(s, e, 0, ex)}
    el = extent["elements"]
    return Finding(
        kind="unwritten_output", kernel=launch.kernel_name, launch=index, tensor=t.name, count=n,
        message=(f"declared output '{t.name}': {n} of {int(np.prod(t.shape))} element(s) were never written by {by}, "
                 f"at offsets {E.span_text(el['ranges'], el['runs'])} ({el['runs']} run(s); first at "
                 f"index {short_list(index_)})"),
        offsets=tuple(int(v) for v in first), indices=index_, extent=extent)


def check_coverage(ctx: LaunchContext) -> list:
    lc = ctx.launch
    if lc.skipped_programs or not lc.completed:
        return []          # the programs that did not run or were not recorded may write the rest
    out = []
    for ti in _outputs(ctx):
        s, e = missing_elements(ctx, ti)
        if int((e - s).sum()):
            out.append(unwritten_finding(lc, ctx.index, ti, s, e, ctx.params.max_examples))
    return out
