"""The launch-level comparison with a second trace of the same kernels (``launch(compare=...)``,
``triton-trace view a.ttrace --compare b.ttrace``): the metrics that changed and the findings that
appeared or vanished, so a fix can be checked at a glance; the tensor view's "by difference" colour shows
the outputs element by element. Both traces are analysed with the same options (the app's analyzer)."""
from __future__ import annotations

from .lookup import TraceIndex
from .payload import ApiError, clip, _json_safe
from .places import cell_text
from .report_view import report_launch

MAX_LISTED = 50      # findings listed per side


def _key(f: dict) -> tuple:
    """A finding's identity across the two traces: the same kind, tensor and program (messages name
    offsets and counts, which a fix changes)."""
    return (f.get("kind"), f.get("tensor"), tuple(f.get("program") or ()) or None)


def _row(f: dict, files) -> dict:
    return {"kind": clip(f.get("kind")), "tensor": clip(f.get("tensor")), "program": f.get("program"),
            "line": f.get("line"), "message": clip(cell_text(f.get("message", ""), files))}


def compare_payload(ti: TraceIndex, i: int) -> dict:
    if ti.compare is None:
        raise ApiError("no trace to compare with: serve one with launch(compare=...) or triton-trace view --compare", 404)
    if i >= len(ti.compare.launches):
        raise ApiError(f"the compared trace has {len(ti.compare.launches)} launch(es); launch {i} has no counterpart", 404)
    report, error = ti.report()
    other, other_error = ti.compare_report()
    out = {"launch": i, "kernel": clip(ti.compare.launches[i].kernel_name), "metrics": {"key": [], "here": [], "there": []},
           "only_here": [], "only_there": [], "error": clip(error or other_error)}
    if report is None or other is None:
        return out
    here = report_launch(ti, i).get("metrics") or {}
    there = other.launch(i).get("metrics") or {}
    for k in sorted(set(here) | set(there)):
        a, b = here.get(k), there.get(k)
        if isinstance(a, (dict, list)) or isinstance(b, (dict, list)) or a == b:
            continue
        out["metrics"]["key"].append(k)
        out["metrics"]["here"].append(_json_safe(a))
        out["metrics"]["there"].append(_json_safe(b))
    mine = [f.to_dict() for f in report.findings if f.launch == i]
    theirs = [f.to_dict() for f in other.findings if f.launch == i]
    kh, kt = {_key(f) for f in mine}, {_key(f) for f in theirs}
    files_here, files_there = ti.trace.launches[i].files, ti.compare.launches[i].files
    out["only_here"] = [_row(f, files_here) for f in mine if _key(f) not in kt][:MAX_LISTED]
    out["only_there"] = [_row(f, files_there) for f in theirs if _key(f) not in kh][:MAX_LISTED]
    return out
