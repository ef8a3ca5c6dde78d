"""Findings the recorder's newer value checks noted: integer division, lanes of one store that disagree,
reductions over padded lanes:

- int_division: an integer ``//`` or ``%`` by zero, or ``INT_MIN // -1``, whose result reached memory (as
  an address or a stored value) in an active lane, or decided control flow: a load's or store's mask, a
  ``tl.where`` condition whose result reached memory, a scalar ``if`` (record/checks/intdiv.py). LLVM
  leaves the result undefined and a GPU gives garbage or traps; the interpreter's numpy gives 0 or wraps,
  so the output looked plausible. A division whose lanes the mask leaves out is not a finding.
- lane_conflict: one store (or atomic exchange / compare-and-swap) of one program wrote one address from
  two lanes with different values (record/checks/lanes.py). A GPU keeps one of them, which one is not
  defined; the interpreter's sequential order picked one.
- padded_reduction: a ``tl.sum`` / ``tl.max`` / ``tl.min`` whose result the padding of a masked load
  changed (record/checks/padding.py). ``tl.load(..., mask=m, other=0.0)`` pads the lanes the mask leaves out;
  a sum ignores zeros, but after ``x - mean`` the padded lanes hold ``-mean`` and a variance gains
  ``mean^2`` per padded lane; a max over ``x - 1`` with ``other=0.0`` returns -1 for a row of smaller values.
  The finding is at the reduction's line, names the load and its ``other``, and gives the padded lanes'
  contribution (for a sum their sum, for a max or min how far they moved the result) beside the result the
  real lanes alone give.

All three come from the recorder's reports: one per cause (the division's, store's or reduction's line),
naming its first program, with every program the cause reached and its lanes in all, which the extent
gives (exact unless the recorder's list of programs was capped). The elements: a division's where its
undefined result took every active lane of the memory op in the programs it reached (recorded.whole_rows);
a conflict's counted again from the stores' recorded offsets and values (every address two lanes of one
store wrote with different values), kept when that count is the recorder's; a padded reduction has none
(its padded lanes are lanes a mask left out). Where the records do not settle them, the extent says its
elements are not counted.
"""
from __future__ import annotations

import numpy as np

from ...model import KIND_CODE
from ...model.values import lane_values
from . import extent as E
from ..context import LaunchContext
from ..findings import Finding
from .recorded import MEMORY_CODES, WRITE_CODES, _memory_row, check_asserts, check_nonfinite, check_overflow, \
    SOME_LANES, hit_elements, named_elements, one_tensor, op_rows, reach, rows_at, whole_rows

_NEUTRAL = {"sum": "0", "max": "-inf", "min": "+inf"}
# the writes a lane conflict judges (record/checks/lanes.py): other atomics combine their lanes
CONFLICT_CODES = [KIND_CODE["store"], KIND_CODE["atomic_xchg"], KIND_CODE["atomic_cas"]]
PADDED = "the padded lanes are lanes a masked load left out, not memory elements"
BRANCH = "the result decided a branch (control flow), not memory elements"


def check_int_division(ctx: LaunchContext) -> list:
    lc = ctx.launch
    out = []
    for r in (lc.meta or {}).get("intdiv") or []:
        pid, c = tuple(r.get("program") or (0, 0, 0)), r.get("cause") or {}
        a, b = (list(c.get("operands") or []) + [None, None])[:2]
        symbol = "%" if "%" in str(c.get("op", "")) else "//"
        how, tensor = r.get("how"), r.get("tensor")
        reached = {"address": f"addressed '{tensor}'", "value": f"was stored to '{tensor}'",
                   "mask": f"decided which lanes the {r.get('op')} of '{tensor}' masked",
                   "branch": "decided control flow (an if's condition)"}.get(how, f"reached '{tensor}'")
        if c.get("via"):
            reached = (f"decided which value each lane took in the {c.get('via')} at {c.get('via_file')}:"
                       f"{c.get('via_line')}, whose result {reached}")
        zero = "by zero" in str(c.get("op", ""))
        fix = ("guard the divisor (e.g. tl.where(d != 0, d, 1)) or leave those lanes out of the mask" if zero
               else "compute in a wider type or keep the dividend above the lowest value")
        extent, count, prog = reach(ctx, r, pid, BRANCH if how == "branch" else SOME_LANES)
        if how != "branch" and not hit_elements(ctx, r, extent, MEMORY_CODES):
            el = whole_rows(ctx, r, prog, count)
            if el is not None:
                extent["elements"] = el
        message = (f"integer division with no defined result: {c.get('op')} at {c.get('file')}:{c.get('line')} "
                   f"({a} {symbol} {b}, first in program {pid}); a GPU gives garbage or traps there (the "
                   f"interpreter gave {c.get('result')}); the result {reached} at {r.get('file')}:{r.get('line')} "
                   f"({count} active lane(s) {E.describe(extent)}); {fix}")
        out.append(Finding(kind="int_division", kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=count, program=pid, file=c.get("file"),
                           line=int(c.get("line") or 0), tensor=r.get("tensor"), op=r.get("op"), extent=extent,
                           offsets=tuple(f["offset"] for f in extent["elements"]["first"]),
                           op_rows=op_rows(ctx, r.get("file"), r.get("line"), MEMORY_CODES, prog),
                           op_row=_memory_row(ctx, pid, r.get("line"), MEMORY_CODES)))
    return out


def check_lane_conflicts(ctx: LaunchContext) -> list:
    lc = ctx.launch
    out = []
    for r in (lc.meta or {}).get("lane_conflict") or []:
        pid = tuple(r.get("program") or (0, 0, 0))
        row = _memory_row(ctx, pid, r.get("line"), WRITE_CODES)
        first = [tuple(int(v) for v in lane) for lane in r.get("first") or []]
        offsets = _offsets(ctx, row, first)
        values = list(r.get("values") or [])
        at = f" (element offset {offsets[0]})" if offsets else ""
        pairs = " and ".join(f"block index {lane} writes {v}" for lane, v in zip(first, values))
        extent, count, prog = reach(ctx, r, pid)
        if not hit_elements(ctx, r, extent, CONFLICT_CODES):
            extent["elements"] = _conflicting(ctx, r, prog, count)
        message = (f"{r.get('op')} of '{r.get('tensor')}' at {r.get('file')}:{r.get('line')} in program {pid}: "
                   f"two lanes write one address with different values ({pairs}){at}; {count} lane(s) "
                   f"write addresses that disagree {E.describe(extent)}. A GPU keeps one of the values, which one "
                   f"is undefined (the interpreter's order kept one); give each lane its own element, or combine "
                   f"the values first (tl.sum, tl.max, an atomic) and store once")
        out.append(Finding(kind="lane_conflict", kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=count, program=pid, file=r.get("file"),
                           line=int(r.get("line") or 0), tensor=r.get("tensor"), op=r.get("op"),
                           offsets=tuple(offsets), lanes=tuple(first), extent=extent, op_row=row,
                           op_rows=op_rows(ctx, r.get("file"), r.get("line"), WRITE_CODES, prog)))
    return out


def _conflicting(ctx: LaunchContext, r: dict, prog, lanes: int) -> dict:
    """The elements two lanes of one execution of the conflict's store wrote with different values, counted
    again from the recorded offsets and values of the store's rows in the programs ``prog``: kept when they
    account for the recorder's ``lanes`` exactly, else not counted."""
    rows = rows_at(ctx, r.get("file"), r.get("line"), CONFLICT_CODES, prog)
    ti = one_tensor(ctx, rows)
    if ti is None:
        return E.uncounted(lanes, "the store's rows are not in the trace")
    idx, off, msk = ctx.decode(rows)
    _, vals, has = lane_values(ctx.launch, rows)          # the same lanes, in the same order
    if not has[msk].all():
        return E.uncounted(lanes, "the store's values were not recorded (the value cap)")
    row = np.repeat(rows, ctx.lane_count[rows])[msk]
    idx, off, bits = idx[msk], off[msk].astype(np.int64), np.ascontiguousarray(vals[msk]).view(np.uint64)
    order = np.lexsort((bits, off, row))
    row, off, bits = row[order], off[order], bits[order]
    start = np.r_[True, (row[1:] != row[:-1]) | (off[1:] != off[:-1])]     # a new (execution, address)
    other = np.r_[False, ~start[1:] & (bits[1:] != bits[:-1])]             # a second value at one address
    group = np.cumsum(start) - 1
    bad = np.zeros(int(group[-1]) + 1 if len(group) else 0, bool)
    bad[group[other]] = True
    hit = bad[group]
    if int(hit.sum()) != lanes:
        return E.uncounted(lanes, "the recorded values do not show which lanes disagree")
    return named_elements(ctx, ti, np.sort(idx[order][hit]), lanes)


def _offsets(ctx: LaunchContext, row: int, lanes: list) -> list:
    """The element offsets of block positions ``lanes`` of op row ``row`` (empty when the row is unknown)."""
    if row < 0 or not lanes:
        return []
    nd = int(ctx.launch.ops["ndim"][row])
    shape = tuple(int(s) for s in ctx.launch.ops["shape"][row][:nd])
    try:
        flat = [int(np.ravel_multi_index(lane, shape)) if shape else 0 for lane in lanes]
    except ValueError:
        return []
    return [int(v) for v in ctx.lane_offsets(np.asarray(flat, dtype=np.int64) + int(ctx.lane_pos[row]))]


def check_padded_reductions(ctx: LaunchContext) -> list:
    lc = ctx.launch
    out = []
    for r in (lc.meta or {}).get("padded_reduction") or []:
        pid, load = tuple(r.get("program") or (0, 0, 0)), r.get("load") or {}
        op = r.get("op")
        extent, count, prog = reach(ctx, r, pid, PADDED)
        message = (f"tl.{op} at {r.get('file')}:{r.get('line')} reduces lanes padded by the masked "
                   f"load at {load.get('file')}:{load.get('line')} (other={load.get('other')}), which no longer hold "
                   f"the {op}'s neutral value ({_NEUTRAL.get(op, '?')}): {count} padded lane(s) changed results "
                   f"{E.describe(extent)}; in program {pid}, at output {tuple(r.get('output') or ())} they contribute "
                   f"{r.get('contribution')} (result {r.get('result')}, the real lanes alone give {r.get('without')}). "
                   f"Re-mask before reducing (tl.where(mask, value, {_NEUTRAL.get(op, '0')})) or pad with the "
                   f"neutral value")
        out.append(Finding(kind="padded_reduction", kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=count, program=pid, file=r.get("file"),
                           line=int(r.get("line") or 0), op=f"reduce ({op})", extent=extent,
                           op_rows=op_rows(ctx, r.get("file"), r.get("line"), [KIND_CODE["reduce"]], prog)))
    return out


# Every check over what the recorder noted as the kernel ran, in the order the analyzer lists their findings
# (analysis/analyzer.py's CHECKS starts with these): a runtime check's function joins here, beside its
# monitor's row in record/checks/table.py and its kind in analysis/findings.py's KINDS.
RECORDED_CHECKS = (check_asserts, check_nonfinite, check_overflow, check_int_division, check_lane_conflicts,
                   check_padded_reductions)
