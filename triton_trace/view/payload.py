"""The web API's payloads, built from a served trace: every JSON endpoint's answer (contract.py lists the
endpoints and the shape of each answer), columnar and bounded whatever the trace's size."""
from __future__ import annotations

import json
from typing import Optional

import numpy as np

from ..errors import TraceUsageError
from ..model import KINDS
from .contract import (ChartsPayload, DiffPayload, FindingsPayload, GridPayload, LaunchPayload, ProgramPayload,
                       TouchesPayload, TracePayload)
from .lookup import LaunchIndex, TraceIndex
from .places import cell_name, cell_text
from .mathrows import math_columns, math_index
from .evidence import MARK_RUNS, MARK_RUNS_MIN, MARK_RUNS_TOTAL, finding_evidence, grid_marks, release_stores
from .report_view import METRICS, finding_lin, launch_findings, program_metrics, report_launch, report_rows
from .limits import (HIST_BINS, MAX_FINDINGS, MAX_GRID_CELLS, MAX_ITEMS, MAX_LAUNCHES, MAX_LINE_CHARS, MAX_OPS,  # noqa: F401
                     MAX_SOURCE_LINES, MAX_TEXT, MAX_TOUCHES, MAX_DIFF_ELEMENTS, MAX_HINTS)
from .tensormap import factors


def encode(payload) -> str:
    """Compact, key-sorted JSON, the form every endpoint sends (NaN is refused: JSON has none)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


class ApiError(Exception):
    """A request the payloads cannot answer; the server turns it into an ``ErrorPayload``."""
    status = 400

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status


def _num(values, decimals: int = 4) -> list:
    """Floats rounded for transport; NaN (no data) becomes None, since JSON has no NaN."""
    a = np.round(np.asarray(values, dtype=np.float64), decimals)
    return [None if v != v else v for v in a.tolist()]


def _sig(values, digits: int = 6) -> list:
    """Floats to ``digits`` significant digits (values span any magnitude); NaN becomes None."""
    return [None if v != v else float(f"{v:.{digits}g}") for v in np.asarray(values, dtype=np.float64).tolist()]


def clip(text) -> Optional[str]:
    """A string from the trace, cut to MAX_TEXT characters: a trace file may come from anyone."""
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _json_safe(v, depth: int = 0):
    """Arguments and configs from the trace as bounded JSON: clipped strings, at most MAX_ITEMS entries
    per container, no NaN, nothing nested deeper than a few levels."""
    if depth > 4:
        return clip(repr(v))
    if isinstance(v, dict):
        return {clip(k): _json_safe(x, depth + 1) for k, x in list(v.items())[:MAX_ITEMS]}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x, depth + 1) for x in list(v)[:MAX_ITEMS]]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if np.isfinite(f) else None
    if v is None or isinstance(v, (bool, int)):
        return v
    return clip(v)


def trace_payload(ti: TraceIndex) -> TracePayload:
    report, error = ti.report()
    lcs = ti.trace.launches[:MAX_LAUNCHES]
    return {
        "kinds": list(KINDS),
        "launches": {
            "kernel": [clip(lc.kernel_name) for lc in lcs], "grid": [list(lc.grid) for lc in lcs],
            "programs": [lc.recorded_programs for lc in lcs], "skipped": [lc.skipped_programs for lc in lcs],
            "ops": [lc.num_ops for lc in lcs], "findings": [len(launch_findings(ti, i)) for i in range(len(lcs))],
            "completed": [lc.completed for lc in lcs], "error": [clip(lc.error) for lc in lcs],
            **_launch_columns(ti, len(lcs))},
        "total_launches": len(ti.trace.launches),
        "analysis": {"available": report is not None, "error": error},
        "limits": {"ops_per_page": MAX_OPS, "findings": MAX_FINDINGS},
        "metrics": {"key": list(METRICS), "label": [label for label, _ in METRICS.values()]},
        "compare": {"available": ti.compare is not None,
                    "launches": len(ti.compare.launches) if ti.compare is not None else 0},
    }


def _launch_columns(ti: TraceIndex, n: int) -> dict:
    """The launch list's verdict columns: the worst finding's kind, sector efficiency, and what bounds the
    launch on the report's GPU (memory or compute), None where the analysis did not say."""
    report, _ = ti.report()
    out: dict = {"worst": [], "efficiency": [], "bound": []}
    for i in range(n):
        found = launch_findings(ti, i)
        entry = report_launch(ti, i)
        eff = (entry.get("metrics") or {}).get("sector_efficiency")
        roof = (entry.get("roofline") or {}).get(report.params.gpu) if report is not None else None
        out["worst"].append(clip(found[0][0].get("kind")) if found else None)
        out["efficiency"].append(round(float(eff), 4) if isinstance(eff, (int, float)) and np.isfinite(eff) else None)
        out["bound"].append(clip((roof or {}).get("bound")))
    return out


def launch_payload(ti: TraceIndex, i: int) -> LaunchPayload:
    return ti.memo(("launch", i), lambda: _launch(ti, i))


def _launch(ti: TraceIndex, i: int) -> LaunchPayload:
    ix = ti.launch(i)
    lc = ix.launch
    _, error = ti.report()
    summary = report_launch(ti, i)
    tensors = {
        "name": [clip(x.name) for x in lc.tensors], "dtype": [clip(x.dtype) for x in lc.tensors],
        "shape": [list(x.shape) for x in lc.tensors], "strides": [list(x.strides) for x in lc.tensors],
        "storage_offset": [x.storage_offset for x in lc.tensors],
        "storage_size": [x.storage_size for x in lc.tensors], "elem_bytes": [x.elem_bytes for x in lc.tensors]}
    per_tensor = summary.get("tensors")
    if per_tensor and len(per_tensor) == len(lc.tensors):
        for key in ("load_bytes", "store_bytes", "atomic_bytes", "unique_load_bytes", "dram_read_bytes",
                    "dram_write_bytes"):
            tensors[key] = [int(t.get(key) or 0) for t in per_tensor]
    else:     # no analysis: bytes of the executed lanes, from the trace
        nt, t = len(lc.tensors), lc.ops["tensor"].astype(np.int64)
        mem = ix.memory & (t >= 0)
        for key, sel in (("load_bytes", ix.read), ("store_bytes", ix.write)):
            tensors[key] = np.bincount(t[mem], weights=np.where(sel, ix.bytes, 0)[mem],
                                       minlength=nt)[:nt].astype(np.int64).tolist()
    return {
        "index": i, "kernel": clip(lc.kernel_name), "grid": list(lc.grid), "args": _json_safe(lc.args),
        "config": _json_safe(lc.config), "completed": lc.completed, "error": clip(lc.error),
        "values_truncated": lc.values_truncated, "recorded_programs": lc.recorded_programs,
        "skipped_programs": lc.skipped_programs, "tensors": tensors, "files": [clip(cell_name(f)) for f in lc.files],
        "source": _source(ti, i), "metrics": _json_safe(summary.get("metrics") or {}),
        "checks_skipped": [clip(c) for c in summary.get("checks_skipped") or []],
        "findings": len(launch_findings(ti, i)), "analysis_error": error,
        "programs_in_flight": _int_or_none((summary.get("balance") or {}).get("programs_in_flight")),
        "hints": [{k: (clip(h.get(k)) if isinstance(h.get(k), str) else h.get(k)) for k in ("kind", "line", "message", "effect")}
                  for h in (summary.get("hints") or [])[:MAX_HINTS]],
    }


def _int_or_none(v) -> Optional[int]:
    return int(v) if isinstance(v, (int, np.integer)) else None


def _source(ti: TraceIndex, i: int) -> dict:
    """The kernel source and its margin: per-line numbers over all programs (the analysis' "lines")."""
    ix = ti.launch(i)
    lc = ix.launch
    lines = lc.source.splitlines()
    def_at = next((k for k, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)
    first = max(1, lc.source_line - def_at) if lc.source_line else 1
    margin: dict = {"line": [], "ops": [], "bytes": [], "sectors": [], "sector_efficiency": [], "findings": []}
    per_line = [ln for ln in report_launch(ti, i).get("lines") or [] if ln.get("file") == lc.source_file]
    if per_line:
        for ln in per_line:
            margin["line"].append(int(ln["line"]))
            margin["ops"].append(len(ln.get("kinds") or []))
            for key in ("bytes", "sectors", "findings"):
                margin[key].append(int(ln.get(key) or 0))
            margin["sector_efficiency"].append(ln.get("sector_efficiency"))
    else:      # no analysis: op rows and bytes per line, from the trace
        o = lc.ops
        fid = lc.files.index(lc.source_file) if lc.source_file in lc.files else -1
        rows = np.nonzero((o["file"] == fid) & (o["line"] > 0))[0] if fid >= 0 else np.zeros(0, np.int64)
        uniq, inv = np.unique(o["line"][rows].astype(np.int64), return_inverse=True)
        margin["line"] = uniq.tolist()
        margin["ops"] = np.bincount(inv, minlength=len(uniq)).tolist()
        margin["bytes"] = np.bincount(inv, weights=ix.bytes[rows], minlength=len(uniq)).astype(np.int64).tolist()
        for key in ("sectors", "sector_efficiency", "findings"):
            margin[key] = [None] * len(uniq)
    return {"file": clip(cell_name(lc.source_file)), "first_line": int(first),
            "lines": [s[:MAX_LINE_CHARS] for s in lines[:MAX_SOURCE_LINES]],
            "truncated": len(lines) > MAX_SOURCE_LINES, "margin": margin}


def _ranges(values: np.ndarray) -> list:
    finite = values[np.isfinite(values)]
    return [float(finite.min()), float(finite.max())] if len(finite) else [0.0, 0.0]


def grid_payload(ti: TraceIndex, i: int, z: int) -> GridPayload:
    ix = ti.launch(i)
    gx, gy, gz = ix.grid
    if not 0 <= z < gz:
        raise ApiError(f"z={z} is outside the grid's z range 0..{gz - 1}", 404)
    return ti.memo(("grid", i, z), lambda: _grid(ti, i, z))


def _grid(ti: TraceIndex, i: int, z: int) -> GridPayload:
    ix = ti.launch(i)
    gx, gy, gz = ix.grid
    by, bx = factors(gy, gx, MAX_GRID_CELLS)
    rows, cols = -(-gy // by), -(-gx // bx)
    lo = z * gx * gy
    metrics, ranges = {}, {}
    for name, (_, how) in METRICS.items():
        full = program_metrics(ti, i)[name]
        ranges[name] = _ranges(full)
        metrics[name] = _num(_blocks(full[lo:lo + gx * gy].reshape(gy, gx), by, bx, how).reshape(-1))
    recorded = _blocks(ix.recorded[lo:lo + gx * gy].reshape(gy, gx).astype(np.float64), by, bx, "sum")
    return {"grid": [gx, gy, gz], "z": z, "block": [bx, by], "cols": cols, "rows": rows, "metrics": metrics,
            "recorded": (recorded.reshape(-1) > 0).astype(int).tolist(), "ranges": ranges}


def _blocks(a: np.ndarray, by: int, bx: int, how: str) -> np.ndarray:
    if by == 1 and bx == 1:
        return a
    h, w = a.shape
    pad = np.full((-(-h // by) * by, -(-w // bx) * bx), np.nan)
    pad[:h, :w] = a
    blocks = pad.reshape(pad.shape[0] // by, by, pad.shape[1] // bx, bx)
    known = np.isfinite(blocks).sum(axis=(1, 3))
    total = np.nansum(blocks, axis=(1, 3))
    out = total / np.maximum(known, 1) if how == "mean" else total
    return np.where(known > 0, out, np.nan)


def program_payload(ti: TraceIndex, i: int, pid: tuple, offset: int = 0, limit: int = MAX_OPS) -> ProgramPayload:
    ix = ti.launch(i)
    lin = ix.linear(pid)
    rows_all = ix.program_rows(lin)
    rows = rows_all[offset:offset + min(limit, MAX_OPS)]
    o = ix.launch.ops
    shape = ["x".join(str(int(s)) for s in o["shape"][r][:d]) for r, d in zip(rows, o["ndim"][rows])]
    metrics = {name: _num(col[lin:lin + 1])[0] for name, col in program_metrics(ti, i).items()}
    found = findings_payload(ti, i)["program"]
    pid_list = list(pid)
    an = report_rows(ti, i)
    stats = ix.launch.value_stats(rows)
    maths = math_columns(ti.memo(("math", i), lambda: math_index(ix.launch)), ix.launch, rows, pid, stats)
    sectors = an["sectors"][rows].tolist() if an is not None else [None] * len(rows)
    efficiency = [None] * len(rows)
    if an is not None:
        used = an["used_bytes"][rows].astype(np.float64)
        efficiency = _num(np.where(an["sectors"][rows] > 0, used / np.maximum(an["sectors"][rows] * 32.0, 1), np.nan))
    return {
        "program": pid_list, "linear": lin, "recorded": bool(ix.recorded[lin]), "metrics": metrics,
        "ops": {"seq": o["seq"][rows].tolist(), "kind": o["kind"][rows].tolist(), "tensor": o["tensor"][rows].tolist(),
                "file": o["file"][rows].tolist(), "line": o["line"][rows].tolist(), "shape": shape,
                "active": ix.active[rows].tolist(), "lanes": ix.total[rows].tolist(),
                "bytes": (ix.active[rows] * o["elem_bytes"][rows]).astype(np.int64).tolist(),
                "sectors": sectors, "sector_efficiency": efficiency, "oob": ix.oob[rows].tolist(),
                "values": (o["value_dtype"][rows] >= 0).astype(int).tolist(), "aux": o["aux"][rows].tolist(),
                "vmin": _sig(stats["min"]), "vmax": _sig(stats["max"]), "vmean": _sig(stats["mean"]),
                "nan": stats["nan"].tolist(), "inf": stats["inf"].tolist(), **maths},
        "total_ops": int(len(rows_all)), "offset": int(offset), "limit": int(min(limit, MAX_OPS)),
        "findings": [k for k, p in enumerate(found) if p == pid_list],
    }


def touches_payload(ti: TraceIndex, i: int, t: int, index: tuple) -> TouchesPayload:
    from ..model.touches import element_offset
    lc = ti.trace.launches[i]
    try:
        found = lc.touches(t, index)
        offset = element_offset(lc.tensors[t], index)
    except TraceUsageError as e:
        raise ApiError(str(e)) from None
    shown = found[:MAX_TOUCHES]
    return {"tensor": t, "name": clip(lc.tensors[t].name), "index": list(index), "offset": offset,
            "touches": {"order": [x.order for x in shown], "program": [list(x.program) for x in shown],
                        "seq": [x.seq for x in shown], "kind": [x.kind for x in shown],
                        "tensor": [clip(x.tensor) for x in shown], "line": [x.line for x in shown],
                        "lane": [list(x.lane) for x in shown], "value": json_values(x.value for x in shown)},
            "total": len(found), "truncated": len(found) > MAX_TOUCHES}


def diff_payload(ti: TraceIndex, i: int, t: int) -> DiffPayload:
    from ..analysis.diff import diff_tensor
    if ti.compare is None:
        raise ApiError("no trace to compare with: serve one with launch(compare=...) or triton-trace view --compare", 404)
    if i >= len(ti.compare.launches):
        raise ApiError(f"the compared trace has {len(ti.compare.launches)} launch(es); there is no launch {i}", 404)
    a, b = ti.trace.launches[i], ti.compare.launches[i]
    if [(x.name, x.shape) for x in a.tensors] != [(x.name, x.shape) for x in b.tensors]:
        raise ApiError(f"launch {i} takes other tensors in the compared trace; nothing to diff")
    d = diff_tensor(a, b, t, 0.0, 0.0, MAX_DIFF_ELEMENTS)
    ex = d.examples
    side = lambda e, k, f: (e[k] or {}).get(f) if e[k] else None
    return {"tensor": t, "name": clip(d.tensor), "compared": d.compared, "differing": d.differing,
            "only_a": d.only_a, "only_b": d.only_b, "values_recorded": d.values_recorded,
            "elements": {"index": [e["index"] for e in ex], "offset": [e["offset"] for e in ex],
                         "a": json_values(side(e, "a", "value") for e in ex), "b": json_values(side(e, "b", "value") for e in ex),
                         "a_program": [side(e, "a", "program") for e in ex], "b_program": [side(e, "b", "program") for e in ex],
                         "a_line": [side(e, "a", "line") for e in ex], "b_line": [side(e, "b", "line") for e in ex]},
            "truncated": d.differing + d.only_a + d.only_b > len(ex)}


def json_values(values, digits: int = 7) -> list:
    """Recorded values for JSON: floats to ``digits`` significant digits, NaN and infinities as the strings
    "nan", "inf", "-inf" (JSON has none), None, ints and strings as they are."""
    out = []
    for v in (values.tolist() if isinstance(values, np.ndarray) else values):
        if v is None or isinstance(v, (bool, int, str)):
            out.append(v)
        elif v != v:
            out.append("nan")
        elif v in (float("inf"), float("-inf")):
            out.append("inf" if v > 0 else "-inf")
        else:
            out.append(float(f"{v:.{digits}g}"))
    return out


def op_row(ix: LaunchIndex, pid: tuple, seq: int) -> int:
    """The op-table row of op ``seq`` of a program (its position in execution order)."""
    rows = ix.program_rows(ix.linear(pid))
    if not 0 <= seq < len(rows):
        raise ApiError(f"program {tuple(pid)} has {len(rows)} ops; there is no op {seq}", 404)
    return int(rows[seq])


def findings_payload(ti: TraceIndex, i: int) -> FindingsPayload:
    return ti.memo(("findings", i), lambda: _findings(ti, i))


def _findings(ti: TraceIndex, i: int) -> FindingsPayload:
    ix = ti.launch(i)
    report, _ = ti.report()
    found = launch_findings(ti, i)
    shown = found[:MAX_FINDINGS]
    out: dict = {k: [] for k in ("kind", "severity", "message", "program", "op", "line", "tensor", "count", "evidence",
                                 "extent")}
    # the Finding objects, in launch_findings' order: the rows they count against name every program involved
    objects = [x for x in report.findings if x.launch == i] if report is not None else []
    if len(objects) != len(found):
        objects = []
    budget = MARK_RUNS_TOTAL
    for n, (f, row) in enumerate(shown):
        lin = finding_lin(ix, f)
        out["kind"].append(clip(f.get("kind", "")))
        out["severity"].append(clip(f.get("severity", "")))
        out["message"].append(clip(cell_text(f.get("message", ""), ix.launch.files)))
        out["program"].append(list(ix.pid(lin)) if lin is not None else None)
        out["line"].append(int(f["line"]) if isinstance(f.get("line"), (int, np.integer)) else None)
        out["tensor"].append(clip(f.get("tensor")))
        out["count"].append(int(f.get("count") or 0))
        out["op"].append(_finding_op(ix, lin, row))
        ev = finding_evidence(ix, f)
        rows = objects[n].attributed_rows() if objects else np.zeros(0, np.int64)
        ev["grid"] = grid_marks(ix, f, rows, max(MARK_RUNS_MIN, min(MARK_RUNS, budget)))
        if f.get("kind") == "release_without_barrier":
            ev["stores"] = release_stores(ix, f, lin, row)
        budget -= sum(len(m["ranges"]) for m in (ev["grid"], ev["grid"]["writers"], ev["grid"]["readers"]) if m)
        out["evidence"].append(ev)
        out["extent"].append(f.get("extent") or {})        # bounded: its lists are cut (analysis/checks/extent.py)
    from ..analysis.findings import KINDS
    return {**out, "kinds": [{"kind": k, "severity": sv, "meaning": m} for k, sv, m in KINDS],
            "total": len(found), "truncated": len(found) > len(shown),
            "suppressed": int(report.suppressed) if report is not None else 0}


def _finding_op(ix: LaunchIndex, lin: Optional[int], row: int) -> Optional[int]:
    """The seq (position in its program) of the op row a finding names."""
    if lin is None or not 0 <= row < ix.launch.num_ops or ix.lin[row] != lin:
        return None
    hit = np.nonzero(ix.program_rows(lin) == row)[0]
    return int(hit[0]) if len(hit) else None


def charts_payload(ti: TraceIndex, i: int) -> ChartsPayload:
    report, _ = ti.report()
    hist = {}
    for name in METRICS:
        v = program_metrics(ti, i)[name]
        v = v[np.isfinite(v)]
        lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.0, 1.0)
        if hi <= lo:                     # one value: a bin centred on it
            pad = max(abs(lo) * 0.05, 0.5)
            lo, hi = lo - pad, hi + pad
        counts, edges = np.histogram(v, bins=HIST_BINS, range=(lo, hi))
        hist[name] = {"edges": _num(edges, 6), "counts": counts.tolist()}
    lp = launch_payload(ti, i)
    metrics = lp["metrics"]
    roofline = {k: metrics.get(k) for k in ("flops", "dram_bytes_predicted", "arithmetic_intensity")}
    roofs = report_launch(ti, i).get("roofline") or {}
    if report is not None and report.params.gpu in roofs:
        from ..analysis.gpus import GPUS
        gpu, roof = report.params.gpu, roofs[report.params.gpu]
        bandwidth = GPUS[gpu].dram_bytes_per_s
        roofline.update(machine=roof.get("name", gpu), peak_bandwidth=bandwidth,
                        peak_flops=float(roof["ridge_intensity"]) * bandwidth, bound=roof.get("bound"),
                        time_s=roof.get("time_s"))
    t = lp["tensors"]
    return {"histograms": hist, "roofline": _json_safe(roofline),
            "tensors": {k: t[k] for k in ("name", "load_bytes", "store_bytes", "dram_read_bytes", "dram_write_bytes")
                        if k in t}}
