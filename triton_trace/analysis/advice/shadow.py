"""Where precision is lost: the report's per-line table of a launch followed by a float64 shadow, and a hint
per stored tensor that ends far from its shadow.

The recorder (record/checks/shadow.py) followed every floating value with the same computation in float64
and kept, per source line and result type, how far its results are off in ulps of their type, and per store
the stored value against its shadow with each line's part of it. This module reads them as:

- ``local``: the line's own rounding (its op in float64 on the real operands). At most 0.5 for a correctly
  rounded op; more for an approximate one (a libdevice function, the interpreter's own math).
- ``error``: how far the line's result is from its shadow, everything before it included.
- ``gained``: how much of that error appeared at this line: the result's error beyond its operands' largest
  (both in the result type's ulps). A line that only rounds gains at most its local error; a line that
  amplifies its operands' errors (``a - b`` of nearly equal values, ``log(t)`` of a ``t`` next to 1) gains
  far more than it rounds.
- ``amplified``: the same as a factor, the result's error over its operands' (at least half an ulp): about
  1 to 2 where a line only rounds (an accumulator's ``+=``), 2 where it squares, hundreds to millions where
  it cancels. **Where precision is lost** is the line of a stored value's path that amplifies most on
  average (a factor, not a difference: squaring a value 1000 ulps off gains 1000 more, but it is the line
  that made the first 1000 that lost them).
- ``normwise`` (per store): its largest error in ulps of the largest value stored there. A hint needs it
  over ``ULPS``: a softmax's 1e-35 that is 60 of its own ulps off, or a dot's result that cancels to near 0,
  loses nothing next to the tensor's other values.
- ``explains`` (per line, and per store in ``stores[].lines``): the line's share of the final error, from
  the counterfactual "only this line rounds, every other op exact", computed for every line at once in the
  same run: the summed ulps of ``|value_L - exact|`` over the stored elements, over the same sum for every
  line. It names **whose rounding** the stored error is (the ``1 + x`` before a ``log``, the sums before a
  cancelling subtraction, an fp16 accumulator's addition). ``unexplained`` is how much of the total the
  lines' parts do not add up to (their errors interact); near 0, the shares are exact.

A hint (``precision_loss``) goes with every stored tensor whose normwise error is over ``ULPS`` ulps: the
line where precision is lost, the lines whose rounding it is, and the usual fix for the pattern.
"""
from __future__ import annotations

from typing import Optional

from ..context import LaunchContext

ULPS = 8              # as analysis/advice/precision.py: more than any single rounding or a short chain explains
_CAUSES = 3           # lines named in a hint


def _mean(total: float, n: int) -> Optional[float]:
    return float(total) / n if n else None


def _key(file, line) -> tuple:
    return (file or "", int(line or 0))


def summary(ctx: LaunchContext) -> Optional[dict]:
    """The launch's "precision" entry (report.py's schema), or None when it was not followed by a shadow."""
    meta = ctx.launch.meta or {}
    run = meta.get("shadow_run")
    if not run:
        return None
    stores = [_store(s) for s in meta.get("shadow_store") or []]
    share: dict = {}
    for s in meta.get("shadow_store") or []:
        for f, ln, part in zip(s["part_files"], s["part_lines"], s["part_sum"]):
            share[_key(f, ln)] = share.get(_key(f, ln), 0.0) + float(part)
    total = sum(share.values())
    lines = []
    for e in meta.get("shadow_line") or []:
        n = int(e["elements"])
        lines.append({
            "file": e["file"], "line": e["line"], "type": e["type"], "ops": [o for o in e["ops"].split(",") if o],
            "executions": e["executions"], "trips": e["trips"], "elements": n, "local_max": e["local_max"],
            "local_mean": _mean(e["local_sum"], n), "error_max": e["error_max"], "error_mean": _mean(e["error_sum"], n),
            "gained_max": e["gained_max"], "gained_mean": _mean(e["gained_sum"], n),
            "amplified_max": e["amplified_max"], "amplified_mean": _mean(e["amplified_sum"], n),
            "explains": (share.get(_key(e["file"], e["line"]), 0.0) / total) if total else None,
            "worst": {"program": list(e["program"]), "value": e["value"], "exact": e["exact"],
                      "operands": e["operands"]}})
    growth = _growth(lines)
    for s in stores:
        for ln in s["lines"]:
            ln.update(growth.get(_key(ln["file"], ln["line"]), dict.fromkeys(_GROWTH, 0.0)))
        # the line that multiplies the error most on average: squaring a centred value doubles its error in
        # every element, one element's cancellation (x * w + b near 0) gains more at its maximum, but the
        # centring itself (x - mean of values far from 0) multiplies every element's error by 64
        path = [ln for ln in s["lines"] if _key(ln["file"], ln["line"]) in growth]
        at = max(path, key=lambda ln: (ln["amplified_mean"], ln["amplified_max"]), default=None)
        s["lost_at"] = None if at is None else {k: at[k] for k in ("file", "line") + _GROWTH}
    rerun = meta.get("shadow_rerun") or {}
    return {"mode": run[0]["mode"], "ops": run[0]["ops"], "source": "rerun" if rerun else "recorded",
            "reproduced": rerun.get("reproduced"), "lines": lines, "stores": stores}


_GROWTH = ("gained_max", "amplified_max", "amplified_mean")


def _growth(lines: list) -> dict:
    """(file, line) -> how its error grows (the largest over the types it computes in)."""
    out: dict = {}
    for ln in lines:
        d = out.setdefault(_key(ln["file"], ln["line"]), dict.fromkeys(_GROWTH, 0.0))
        for k in _GROWTH:
            d[k] = max(d[k], ln[k] or 0.0)
    return out


def _store(s: dict) -> dict:
    n = int(s["elements"])
    total = sum(float(v) for v in s["part_sum"])
    return {
        "file": s["file"], "line": s["line"], "tensor": s["tensor"], "type": s["type"], "elements": n,
        "error_max": s["error_max"], "error_mean": _mean(s["error_sum"], n), "abs_max": s["abs_max"],
        "scale": s["scale"], "normwise": s["normwise"],
        "unexplained": (float(s["unexplained_sum"]) / float(s["error_sum"])) if s["error_sum"] else None,
        "worst": {"program": list(s["program"]), "value": s["value"], "exact": s["exact"]},
        "lines": [{"file": f or None, "line": ln, "share": (float(ps) / total) if total else None,
                   "max_ulps": float(mx), "mean_ulps": _mean(ps, n)}
                  for f, ln, mx, ps in zip(s["part_files"], s["part_lines"], s["part_max"], s["part_sum"])]}


def hints(ctx: LaunchContext, entry: Optional[dict] = None) -> list:
    """A ``precision_loss`` hint per stored tensor more than ``ULPS`` ulps of its largest value from its shadow
    (normwise: a value far smaller than the others may be many of its own ulps off and lose nothing)."""
    entry = summary(ctx) if entry is None else entry
    if entry is None:
        return []
    by_line = {}
    for ln in entry["lines"]:
        by_line.setdefault(_key(ln["file"], ln["line"]), []).append(ln)
    out = []
    for s in entry["stores"]:
        if s["normwise"] <= ULPS:
            continue
        causes = [c for c in s["lines"] if c["share"]][:_CAUSES]
        named = ", ".join(f"{c['line']} ({c['share']:.0%})" for c in causes) or "none recorded"
        at = s["lost_at"]
        at_ops = sorted({o for ln in by_line.get(_key(at["file"], at["line"]), []) for o in ln["ops"]}) if at else []
        lost = (f"precision is lost at line {at['line']} ({', '.join(at_ops) or 'op'}: its result's error is "
                f"{at['amplified_mean']:.3g}x its operands' on average, up to {at['gained_max']:.4g} ulps more)"
                if at else "no line on its path gains error")
        w = s["worst"]
        out.append({
            "kind": "precision_loss", "file": s["file"], "line": s["line"], "op": "store", "tensor": s["tensor"],
            "saving": 0.0,
            "message": (f"'{s['tensor']}' stored at {s['file']}:{s['line']} in kernel '{ctx.launch.kernel_name}' is up "
                        f"to {s['error_max']:.4g} ulps of {s['type']} (mean {s['error_mean']:.3g}; "
                        f"{s['normwise']:.4g} ulps of its largest value) from the same computation in float64 "
                        f"(program {tuple(w['program'])} stored {w['value']:.7g} where float64 gives "
                        f"{w['exact']:.7g}); {lost}; the error is the rounding of line(s) {named}"),
            "effect": _effect(at_ops, at, causes, by_line)})
    return out


def _effect(at_ops: list, at: Optional[dict], causes: list, by_line: dict) -> str:
    if at is not None and at["amplified_max"] > ULPS:
        if "log" in at_ops or "log2" in at_ops:
            return ("the log of a value rounded next to 1 keeps only that rounding: compute log(1 + x) as log1p(x) "
                    "(libdevice.log1p), or carry x itself")
        if "subtract" in at_ops or "add" in at_ops:
            return ("a difference of nearly equal values keeps only their rounding errors (cancellation): compute "
                    "the difference directly (a variance as the mean of (x - mean)^2, two passes or Welford's "
                    "update) or form the operands in a wider type")
        return (f"line {at['line']} amplifies its operands' rounding: compute its operands in a wider type or "
                f"rearrange it")
    loop = [c for c in causes if any(ln["trips"] > 1 for ln in by_line.get(_key(c["file"], c["line"]), []))]
    if loop:
        return (f"the error builds up over many roundings at line {loop[0]['line']}: accumulate in a wider type "
                f"(float32 for fp16/bf16 values, cast once when stored) or sum pairwise")
    return "compute the named lines in a wider type"
