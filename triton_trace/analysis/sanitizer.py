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

from ..model import KIND_CODE, MEMORY_KINDS, WRITE_KINDS, TensorInfo
from . import intervals
from . import context
from .context import LaunchContext, pattern_intervals
from .findings import Finding, Suppressed, block_index, group_lanes, op_fields, short_list, where


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
    restrided input). Such a view is checked against its storage only (out_of_bounds)."""
    return any(n > 1 and st == 0 for n, st in zip(t.shape, t.strides))


def _example_fields(ctx: LaunchContext, t: TensorInfo, lanes: np.ndarray) -> dict:
    off = ctx.lane_offsets(lanes)
    fields = {"offsets": tuple(int(o) for o in off), "lanes": tuple(block_index(ctx, int(i)) for i in lanes)}
    if t is not None and len(t.shape):
        inside, idx = view_positions(t, off)
        fields["indices"] = tuple(tuple(int(v) for v in idx[i]) if inside[i] else None for i in range(len(off)))
    return fields


def _lane_findings(ctx, bad, kind, describe, grouped=None) -> list:
    """Findings of the offending lanes ``bad``, or of ``grouped`` (``group_entries``) when given."""
    groups, rest = group_lanes(ctx, bad) if grouped is None else grouped
    out = [Suppressed(kind, rest)] if len(rest) else []
    for g in groups:
        f = op_fields(ctx, g.row)
        ti = int(ctx.tensor[g.row])
        t = ctx.launch.tensors[ti] if ti >= 0 else None
        ex = _example_fields(ctx, t, g.lanes)
        message, valid = describe(f, g, t, ex)
        out.append(Finding(kind=kind, kernel=ctx.launch.kernel_name, launch=ctx.index, message=message,
                           count=g.count, program=tuple(ctx.pid(g.program)), valid_range=valid, rows=g.rows,
                           op_row=g.row, **f, **ex))
    return out


def check_asserts(ctx: LaunchContext) -> list:
    d = (ctx.launch.meta or {}).get("assert_failed")
    if not d:
        return []
    lc = ctx.launch
    expr = f" ({d.get('expression')})" if d.get("expression") else ""
    values = "; ".join(f"{k}={v}" for k, v in sorted((d.get("values") or {}).items()))
    message = (f"device_assert {d.get('message', '')!r}{expr} failed at {d.get('file')}:{d.get('line')} in program "
               f"{tuple(d.get('program') or ())} on {d.get('count', 0)} lane(s), first at block index "
               f"{[tuple(v) for v in d.get('lanes') or []]}" + (f"; values {values}" if values else ""))
    return [Finding(kind="assert_failed", kernel=lc.kernel_name, launch=ctx.index, message=message,
                    count=int(d.get("count", 0)), program=tuple(d.get("program") or (0, 0, 0)),
                    file=d.get("file"), line=int(d.get("line") or 0), op="device_assert",
                    lanes=tuple(tuple(v) for v in d.get("lanes") or []))]


WRITE_CODES = [KIND_CODE[k] for k in WRITE_KINDS]
MEMORY_CODES = list(range(len(MEMORY_KINDS)))


def _memory_row(ctx: LaunchContext, pid, line, kinds) -> int:
    """The first op row of program ``pid`` at ``line`` whose kind is one of ``kinds`` (op codes), or -1:
    what a finding recorded by program and line (not by row) opens in the UI."""
    o = ctx.launch.ops
    hit = np.flatnonzero(np.all(o["program"] == np.asarray(pid, dtype=o["program"].dtype), axis=1) &
                         (o["line"] == int(line or 0)) & np.isin(o["kind"], list(kinds)))
    return int(hit[0]) if len(hit) else -1


def check_nonfinite(ctx: LaunchContext) -> list:
    """NaN / Inf that reached memory (record/checks/nonfinite.py): born in the kernel from finite operands
    (``nonfinite``), or carried in from an argument that already held them (``nonfinite_input``)."""
    lc = ctx.launch
    out = []
    for r in (lc.meta or {}).get("nonfinite") or []:
        pid = tuple(r.get("program") or (0, 0, 0))
        where_ = f"{r.get('file')}:{r.get('line')}"
        stored = (f"store of '{r.get('tensor')}' at {where_} by program {pid} wrote {r.get('lanes')} non-finite "
                  f"value(s) (element offsets {short_list(r.get('offsets') or [])})")
        if r.get("kind") in ("nonfinite", "overflow"):
            b = r.get("birth") or {}
            ops = ", ".join(str(v) for v in b.get("operands") or [])
            message = (f"{stored}; born at {b.get('file')}:{b.get('line')} in {b.get('op')} from finite operands "
                       f"({ops}) -> {b.get('result')}, first at block index {tuple(b.get('lane') or ())}")
            line = b.get("line")
        else:
            src = r.get("input") or {}
            message = (f"{stored}; they came from '{src.get('tensor')}', which already held NaN/Inf (element "
                       f"offset {src.get('offset')}, loaded at {src.get('file')}:{src.get('line')})")
            line = r.get("line")
        out.append(Finding(kind=r.get("kind", "nonfinite"), kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=int(r.get("lanes") or 0), program=pid, file=r.get("file"), line=int(line or 0),
                           tensor=r.get("tensor"), op="store", offsets=tuple(r.get("offsets") or ()),
                           op_row=_memory_row(ctx, pid, r.get("line"), WRITE_CODES)))
    return out


def check_overflow(ctx: LaunchContext) -> list:
    """Integers that did not fit their type and reached memory (record/checks/overflow.py): an int32 index that
    wrapped and then addressed memory, a float-to-int conversion out of range that was stored or used as
    an address. (Floats that overflow a narrower float type are check_nonfinite's, kind ``overflow``.)"""
    lc = ctx.launch
    out = []
    for r in (lc.meta or {}).get("overflow") or []:
        pid, c = tuple(r.get("program") or (0, 0, 0)), r.get("cause") or {}
        op = str(c.get("op", ""))
        ops = f" {op.split()[-1]} ".join(str(v) for v in c.get("operands") or []) if op.startswith("int32") \
            else ", ".join(str(v) for v in c.get("operands") or [])
        what = ("addressed memory" if r.get("how") == "address" else "was stored") + \
            (f" ('{r.get('tensor')}')" if r.get("tensor") else "")
        message = (f"{c.get('op')} at {c.get('file')}:{c.get('line')} does not fit: {ops} = {c.get('exact')}, "
                   f"became {c.get('result')}; the value {what} at {r.get('file')}:{r.get('line')} in program {pid} "
                   f"({r.get('lanes')} active lane(s))")
        out.append(Finding(kind="overflow", kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=int(r.get("lanes") or 0), program=pid, file=c.get("file"), line=int(c.get("line") or 0),
                           tensor=r.get("tensor"), op=r.get("op"),
                           op_row=_memory_row(ctx, pid, r.get("line"), MEMORY_CODES)))
    return out


def check_bounds(ctx: LaunchContext) -> list:
    bad = ctx.oob_lane_index

    def describe(f, g, t, ex):
        head = f"{f['op']} at {where(f)} by program {ctx.pid(g.program)}: {g.count} active lane(s)"
        if t is None:
            return f"{head} at addresses outside every tensor argument", None
        hi = int(ctx.row_limit[g.row]) - 1
        return (f"{head} outside the storage of '{f['tensor']}' (element offsets {short_list(ex['offsets'])}; "
                f"valid 0..{hi})"), (0, hi)
    findings = _lane_findings(ctx, bad, "out_of_bounds", describe)
    return findings + _check_views(ctx)


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

    def describe(f, g, t, ex):
        vo = t.view_offsets()
        valid = (int(vo.min()), int(vo.max())) if vo.size else None
        return (f"{f['op']} of '{f['tensor']}' at {where(f)} by program {ctx.pid(g.program)}: {g.count} lane(s) "
                f"inside the storage but outside the view (shape {list(t.shape)}, strides {list(t.strides)}, "
                f"storage offset {t.storage_offset}); element offsets {short_list(ex['offsets'])}"), valid
    return _lane_findings(ctx, bad, "out_of_view", describe)


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


def _coverage_by_intervals(ctx: LaunchContext, ti: int, k: int):
    """(elements of an output no program wrote, the first k of their offsets in the view's order) from the
    write rows' intervals and the view's runs (``_stretches``); None when a write row is irregular or the
    view has no such runs."""
    t = ctx.launch.tensors[ti]
    view = _stretches(t) if t.shape and context.SHORTCUTS else None
    if view is None:
        return None
    rows = _output_rows(ctx, ti)
    iv = intervals.row_intervals(ctx, rows[ctx.is_write[rows]])
    if iv is None:
        return None
    s, e = intervals.union(iv[0], iv[1])
    done = np.r_[0, np.cumsum(e - s)]

    def written_before(x):          # elements of the union below x
        j = np.searchsorted(s, x)
        return done[j] - np.maximum(0, np.where(j > 0, e[np.maximum(j - 1, 0)], 0) - x) if len(s) else 0 * x
    starts, extent = view
    gaps = extent - (written_before(starts + extent) - written_before(starts))
    first: list = []
    for a in np.flatnonzero(gaps).tolist():
        first += intervals.missing((s, e), int(starts[a]), int(starts[a]) + extent, k - len(first))[1]
        if len(first) >= k:
            break
    return int(gaps.sum()), first


def check_coverage(ctx: LaunchContext) -> list:
    lc = ctx.launch
    if lc.skipped_programs or not lc.completed:
        return []          # the programs that did not run or were not recorded may write the rest
    out = []
    for ti in _outputs(ctx):
        t = lc.tensors[ti]
        k = ctx.params.max_examples
        found = _coverage_by_intervals(ctx, ti, k)
        if found is None:
            lanes, off = _output_lanes(ctx, ti)
            written = np.zeros(t.storage_size, dtype=bool)
            written[off[ctx.is_write[ctx.lane_row[lanes]]]] = True
            vo = t.view_offsets()
            missing = ~written[vo] if vo.size else np.zeros(t.shape, dtype=bool)
            n = int(missing.sum())
            idx = np.argwhere(missing)[:k]
            offs = tuple(int(vo[tuple(i)]) for i in idx)
        else:
            n, offs = found[0], tuple(found[1])
            idx = view_positions(t, np.array(offs, dtype=np.int64))[1]
        if not n:
            continue
        out.append(Finding(
            kind="unwritten_output", kernel=lc.kernel_name, launch=ctx.index, tensor=t.name, count=n,
            message=(f"declared output '{t.name}': {n} of {int(np.prod(t.shape))} element(s) were never written by any program "
                     f"(first at index {short_list(tuple(int(v) for v in i) for i in idx)})"),
            offsets=offs, indices=tuple(tuple(int(v) for v in i) for i in idx)))
    return out

