"""Findings the recorder's newer value checks noted: integer division, lanes of one store that disagree,
reductions over padded lanes:

- int_division: an integer ``//`` or ``%`` by zero, or ``INT_MIN // -1``, whose result reached memory (as
  an address or a stored value) in an active lane (record/checks/intdiv.py). LLVM leaves the result
  undefined and a GPU gives garbage or traps; the interpreter's numpy gives 0 or wraps, so the output
  looked plausible. A division whose lanes the mask leaves out is not a finding.
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
gives (exact unless the recorder's list of programs was capped).
"""
from __future__ import annotations

import numpy as np

from ...model import KIND_CODE
from . import extent as E
from ..context import LaunchContext
from ..findings import Finding
from .recorded import MEMORY_CODES, WRITE_CODES, _memory_row, _one_program, check_asserts, check_nonfinite, \
    check_overflow

MAX_PROGRAMS = 1 << 16        # the recorder's cap on the programs it lists per cause (record/checks/monitor.py)

_NEUTRAL = {"sum": "0", "max": "-inf", "min": "+inf"}


def check_int_division(ctx: LaunchContext) -> list:
    lc = ctx.launch
    out = []
    for r in (lc.meta or {}).get("intdiv") or []:
        pid, c = tuple(r.get("program") or (0, 0, 0)), r.get("cause") or {}
        a, b = (list(c.get("operands") or []) + [None, None])[:2]
        symbol = "%" if "%" in str(c.get("op", "")) else "//"
        reached = (f"addressed '{r.get('tensor')}'" if r.get("how") == "address" else
                   f"was stored to '{r.get('tensor')}'")
        zero = "by zero" in str(c.get("op", ""))
        fix = ("guard the divisor (e.g. tl.where(d != 0, d, 1)) or leave those lanes out of the mask" if zero
               else "compute in a wider type or keep the dividend above the lowest value")
        extent, count, prog = _reach(ctx, r, pid)
        message = (f"integer division with no defined result: {c.get('op')} at {c.get('file')}:{c.get('line')} "
                   f"({a} {symbol} {b}, first in program {pid}); a GPU gives garbage or traps there (the "
                   f"interpreter gave {c.get('result')}); the result {reached} at {r.get('file')}:{r.get('line')} "
                   f"({count} active lane(s) {E.describe(extent)}); {fix}")
        out.append(Finding(kind="int_division", kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=count, program=pid, file=c.get("file"),
                           line=int(c.get("line") or 0), tensor=r.get("tensor"), op=r.get("op"), extent=extent,
                           op_rows=_op_rows(ctx, r.get("file"), r.get("line"), MEMORY_CODES, prog),
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
        extent, count, prog = _reach(ctx, r, pid)
        message = (f"{r.get('op')} of '{r.get('tensor')}' at {r.get('file')}:{r.get('line')} in program {pid}: "
                   f"two lanes write one address with different values ({pairs}){at}; {count} lane(s) "
                   f"write addresses that disagree {E.describe(extent)}. A GPU keeps one of the values, which one "
                   f"is undefined (the interpreter's order kept one); give each lane its own element, or combine "
                   f"the values first (tl.sum, tl.max, an atomic) and store once")
        out.append(Finding(kind="lane_conflict", kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=count, program=pid, file=r.get("file"),
                           line=int(r.get("line") or 0), tensor=r.get("tensor"), op=r.get("op"),
                           offsets=tuple(offsets), lanes=tuple(first), extent=extent, op_row=row,
                           op_rows=_op_rows(ctx, r.get("file"), r.get("line"), WRITE_CODES, prog)))
    return out


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
        extent, count, prog = _reach(ctx, r, pid)
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
                           op_rows=_op_rows(ctx, r.get("file"), r.get("line"), [KIND_CODE["reduce"]], prog)))
    return out


def _reach(ctx: LaunchContext, r: dict, pid: tuple) -> tuple:
    """(extent, lanes, program indexes) of a recorded cause: every program it reached (the recorder's list),
    its lanes in all; a report without the list (an older trace) has its first program only (indexes None)."""
    listed = r.get("programs") or []
    if not listed:
        return _one_program(pid, int(r.get("lanes") or 0), False), int(r.get("lanes") or 0), None
    d1, d2 = int(ctx.dims[1]), int(ctx.dims[2])
    lin = np.unique(np.array([int(x) * d1 * d2 + int(y) * d2 + int(z) for x, y, z in listed], dtype=np.int64))
    at = np.clip(np.searchsorted(ctx.programs, lin), 0, max(len(ctx.programs) - 1, 0))
    prog = at[ctx.programs[at] == lin] if len(ctx.programs) else at[:0]
    lanes = int(r.get("reach_lanes") or r.get("lanes") or 0)
    exact = len(listed) < MAX_PROGRAMS
    x = {"programs": E.programs(ctx, prog), "elements": {"count": 0, "lanes": lanes, "runs": 0, "ranges": [],
                                                         "first": []}, "exact": exact}
    return (x if exact else {**x, "note": "the recorder lists the first 65536 programs of a cause"}), lanes, prog


def _op_rows(ctx: LaunchContext, file, line, codes, prog) -> np.ndarray:
    """A row of the op at ``file:line`` (kinds ``codes``) for each program in ``prog``: what the per-program
    and per-op finding counts attribute the finding to."""
    files = list(ctx.launch.files)
    if file not in files or prog is None or not len(prog):
        return np.zeros(0, np.int64)
    rows = np.flatnonzero((ctx.file == files.index(file)) & (ctx.line == int(line or 0)) & np.isin(ctx.kind, codes))
    return E.attributed(ctx, prog, rows)


# Every check over what the recorder noted as the kernel ran, in the order the analyzer lists their findings
# (analysis/analyzer.py's CHECKS starts with these): a runtime check's function joins here, beside its
# monitor's row in record/checks/table.py and its kind in analysis/findings.py's KINDS.
RECORDED_CHECKS = (check_asserts, check_nonfinite, check_overflow, check_int_division, check_lane_conflicts,
                   check_padded_reductions)
