"""The Source panel's precision column: where a launch followed by a float64 shadow loses precision, per line
of the kernel's own file, from the analysis' "precision" entry (analysis/advice/shadow.py's ``summary``).

A launch has that entry when it was recorded with the shadow (``trace(shadow="float64")``) or when the served
analysis runs it again with the shadow from its kept inputs (``triton-trace view --shadow float64``,
``launch(analysis={"shadow": "float64"})``). ``shadow_refusal`` says, before a server starts, why the
second cannot run (no kept inputs, a file not trusted to run), so the server refuses instead of serving a
page whose whole analysis failed.

The column shows one line's numbers where the analysis has one entry per line and result type: the type whose
result is furthest from float64 gives ``type``, ``error_*`` and ``local_max``; the growth numbers are the
largest over the types (as shadow.py compares lines for "where precision is lost"); ``explains`` is the line's.
"""
from __future__ import annotations

import math
from typing import Optional

from .limits import MAX_SOURCE_LINES
from .lookup import TraceIndex
from .payload import clip
from .report_view import report_launch

MAX_STORES = 64          # stored tensors (store lines) of one launch listed
MAX_SHARES = 8           # stored tensors a line's share of the error is listed for (the largest first)
NO_SHADOW = ("this launch was not followed by a float64 shadow: trace it with trace(shadow='float64'), or "
             "serve it with --shadow float64 (launch(analysis={'shadow': 'float64'})) to run it again from "
             "the inputs trace(inputs=True) kept")
_WORST = ("type", "error_max", "error_mean", "local_max")
_GROWTH = ("gained_max", "amplified_max", "amplified_mean")
_COLUMNS = ("line", "ops", "explains", "shares") + _WORST + _GROWTH


def _num(v) -> Optional[float]:
    """A float JSON can carry (shadow.py keeps finite errors only; a trace file may hold anything)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _empty(note: Optional[str], file) -> dict:
    return {"available": False, "note": note, "mode": None, "source": None, "reproduced": None, "file": file,
            "lines": {k: [] for k in _COLUMNS}, "stores": {k: [] for k in ("line", "tensor", "type", "error_max",
                                                                             "error_mean", "normwise", "lost_at")},
            "lost": [], "other_files": 0, "truncated": False}


def precision_payload(ti: TraceIndex, i: int) -> dict:
    """The launch's ``PrecisionPayload`` (contract.py)."""
    lc = ti.trace.launches[i]
    file = clip(lc.source_file)
    report, error = ti.report()
    if report is None:
        return _empty(f"no analysis ran ({error}), so there is no precision column" if error else
                      "no analysis ran, so there is no precision column", file)
    summary = report_launch(ti, i)
    entry = summary.get("precision")
    if not entry:
        return _empty(NO_SHADOW, file)
    out = _empty(None, file)
    out.update(available=True, mode=clip(entry.get("mode")), source=clip(entry.get("source")),
               reproduced=entry.get("reproduced") if isinstance(entry.get("reproduced"), bool) else None)
    mine = lambda e: e.get("file") == lc.source_file and isinstance(e.get("line"), int)
    stores = [s for s in entry.get("stores") or [] if isinstance(s, dict)]
    by_line: dict = {}
    for e in entry.get("lines") or []:
        if isinstance(e, dict) and mine(e):
            by_line.setdefault(e["line"], []).append(e)
    out["other_files"] = len({(e.get("file"), e.get("line")) for e in entry.get("lines") or []
                              if isinstance(e, dict) and not mine(e)})
    lines = sorted(by_line)
    out["truncated"] = len(lines) > MAX_SOURCE_LINES or len(stores) > MAX_STORES
    cols = out["lines"]
    for ln in lines[:MAX_SOURCE_LINES]:
        entries = by_line[ln]
        worst = max(entries, key=lambda e: _num(e.get("error_max")) or 0.0)
        cols["line"].append(ln)
        cols["ops"].append(sorted({clip(o) for e in entries for o in e.get("ops") or []}))
        cols["explains"].append(_num(worst.get("explains")))
        cols["shares"].append(_shares(stores, lc.source_file, ln))
        cols["type"].append(clip(worst.get("type")))
        for k in _WORST[1:]:
            cols[k].append(_num(worst.get(k)))
        for k in _GROWTH:
            cols[k].append(max((_num(e.get(k)) or 0.0 for e in entries), default=0.0))
    hinted = {(h.get("tensor"), h.get("file"), h.get("line")) for h in summary.get("hints") or []
              if isinstance(h, dict) and h.get("kind") == "precision_loss"}
    for s in stores[:MAX_STORES]:
        at = s.get("lost_at") if isinstance(s.get("lost_at"), dict) else None
        at_line = at.get("line") if at is not None and at.get("file") == lc.source_file else None
        if mine(s):
            st = out["stores"]
            st["line"].append(s["line"])
            st["tensor"].append(clip(s.get("tensor")))
            st["type"].append(clip(s.get("type")))
            for k in ("error_max", "error_mean", "normwise"):
                st[k].append(_num(s.get(k)))
            st["lost_at"].append(at_line)
        if at_line is not None and (s.get("tensor"), s.get("file"), s.get("line")) in hinted:
            out["lost"].append({"line": at_line, "tensor": clip(s.get("tensor")), "store_line": s.get("line"),
                                "amplified_mean": _num(at.get("amplified_mean")),
                                "gained_max": _num(at.get("gained_max"))})
    return out


def _shares(stores: list, file, line: int) -> list:
    """[{tensor, store_line, share}]: the line's part of each stored tensor's error, the largest first."""
    found = []
    for s in stores:
        for part in s.get("lines") or []:
            if isinstance(part, dict) and part.get("file") == file and part.get("line") == line:
                share = _num(part.get("share"))
                if share:
                    found.append({"tensor": clip(s.get("tensor")), "store_line": s.get("line"), "share": share})
    found.sort(key=lambda p: -p["share"])
    return found[:MAX_SHARES]


def shadow_refusal(trace, mode: str) -> Optional[str]:
    """Why the served analysis cannot follow ``trace``'s launches with the ``mode`` shadow, or None: a launch
    recorded without it runs again from the inputs it kept, which needs them, and a file trusted to run."""
    from ..record.checks.shadow import MODES
    if mode not in MODES:
        return f"the shadow is one of {', '.join(map(repr, MODES))}, not {mode!r}"
    for i, lc in enumerate(trace.launches):
        if (lc.meta or {}).get("shadow_run"):
            continue
        what = f"launch {i} ('{lc.kernel_name}')"
        kept = lc.module.inputs if lc.module is not None else None
        if lc.inputs is None or kept is None or not kept.kept:
            why = kept.note if kept is not None and kept.note else "it was traced without them"
            return (f"serving with the {mode} shadow runs {what} again from its inputs, and the trace kept none "
                    f"({why}): trace it with trace(inputs=True), or with trace(shadow='{mode}') to record the "
                    f"shadow as it runs")
        if not getattr(lc, "trusted", True):
            return (f"serving with the {mode} shadow runs {what} again, and it comes from "
                    f"{lc.origin or 'a trace file'}, which this user did not record or sign: a kernel from a file "
                    f"runs only when you trust the file (--trust on the command line, or "
                    f"triton_trace.load(path, trust=True))")
    return None
