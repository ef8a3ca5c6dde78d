"""The values a program's math rows show: what the float ops of each source line produced in that program
(``Launch.meta["math_values"]``, record/checks/mathvalues.py), matched to the row by (program, line), in the
columns a load's values fill (its finite range, NaN and Inf counts), with a marker that they are the ops'
results, the first non-finite result, and whether a NaN or Inf the analysis follows was born on the line.

The record comes from a trace file, which may be damaged: an entry whose parallel lists disagree in length,
or whose values are not numbers, gives nothing rather than an error.
"""
from __future__ import annotations

import numpy as np

from ..model import KIND_CODE

MATH = KIND_CODE["math"]
VALUE = {1: "nan", 2: "inf", 3: "-inf"}          # mathvalues.VALUE: the first non-finite result's kind
_LISTS = ("p_count", "p_nan", "p_pinf", "p_ninf", "p_min", "p_max", "p_first", "p_lane", "p_kind")
RESULTS, LEFT_OUT = 1, 2                          # the "results" column: values from the ops' results; not kept


def math_index(launch) -> dict:
    """(file, line) -> (the line's entry, {program id: its position in the entry's lists}), over the entries
    that hold together; and "born": the (file, line) of every recorded NaN/Inf birth."""
    out: dict = {}
    for e in (launch.meta or {}).get("math_values") or []:
        progs = e.get("p_program") if isinstance(e, dict) else None
        if not isinstance(progs, list) or any(not isinstance(e.get(k), list) or len(e[k]) != len(progs) for k in _LISTS):
            continue
        out[(e.get("file"), e.get("line"))] = (e, {tuple(p): k for k, p in enumerate(progs) if isinstance(p, list)})
    born = set()
    for r in (launch.meta or {}).get("nonfinite") or []:
        b = r.get("birth") if isinstance(r, dict) and r.get("kind") in ("nonfinite", "overflow") else None
        if isinstance(b, dict):
            born.add((b.get("file"), b.get("line")))
    return {"lines": out, "born": born}


def math_columns(index: dict, launch, rows: np.ndarray, pid: tuple, stats: dict) -> dict:
    """Fill ``stats`` (model.values.value_stats of ``rows``) at the program's math rows; the extra op columns:
    ``results`` (RESULTS, LEFT_OUT past the recorder's cap, else 0), ``born`` (1: a NaN/Inf that reached
    memory was born on the line, and this row holds one) and ``first`` (the program's first non-finite
    result on the line: {op, lane, value}, else None)."""
    n = len(rows)
    results, born, first = [0] * n, [0] * n, [None] * n
    kinds, files, lines = launch.ops["kind"][rows], launch.ops["file"][rows], launch.ops["line"][rows]
    for k in np.flatnonzero(kinds == MATH):
        f = int(files[k])
        key = (launch.files[f] if 0 <= f < len(launch.files) else None, int(lines[k]))
        found = index["lines"].get(key)
        if found is None:
            continue
        e, at = found
        j = at.get(tuple(int(v) for v in pid))
        if j is None:
            results[k] = LEFT_OUT if e.get("left_out") else 0
            continue
        try:
            vals = [int(e[c][j]) for c in ("p_count", "p_nan", "p_pinf", "p_ninf")]
            lo, hi = float(e["p_min"][j]), float(e["p_max"][j])
        except (TypeError, ValueError, OverflowError):
            continue
        count, nan, inf = vals[0], vals[1], vals[2] + vals[3]
        finite = count - nan - inf > 0
        stats["min"][k], stats["max"][k] = (lo, hi) if finite else (np.nan, np.nan)
        stats["mean"][k] = np.nan
        stats["nan"][k], stats["inf"][k] = nan, inf
        results[k] = RESULTS
        born[k] = int(bool(nan + inf) and key in index["born"])
        first[k] = _first(e, j)
    return {"results": results, "born": born, "first": first}


def _first(e: dict, j: int):
    lane, which = e["p_lane"][j], e["p_first"][j]
    if not isinstance(lane, int) or lane < 0:
        return None
    ops, shapes = e.get("ops") or [], e.get("shapes") or []
    op = ops[which] if isinstance(which, int) and 0 <= which < len(ops) else None
    shape = shapes[which] if isinstance(which, int) and 0 <= which < len(shapes) else None
    index = [lane]
    if isinstance(shape, list) and shape and all(isinstance(s, int) and s > 0 for s in shape) and \
            lane < int(np.prod(shape, dtype=np.int64)):
        index = [int(v) for v in np.unravel_index(lane, shape)]
    return {"op": str(op)[:64] if op is not None else None, "lane": index, "value": VALUE.get(e["p_kind"][j], "nan")}
