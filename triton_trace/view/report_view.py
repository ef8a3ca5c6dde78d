"""The analysis report as the views read it: per-program metric columns over the grid, findings with
the op row they name, per-line and per-row numbers.

The report is ``triton_trace.analysis.Report`` (schema in analysis/report.py), computed once per app.
When the analysis did not run (it failed on an unusual trace), the columns the trace itself answers
(bytes, masked share, out-of-bounds lanes) come from the LaunchIndex and the others are unknown (NaN).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .lookup import LaunchIndex, TraceIndex

# grid metrics: key -> (label, how blocks of programs combine)
METRICS = {
    "load_bytes": ("Bytes loaded", "sum"),
    "store_bytes": ("Bytes stored", "sum"),
    "masked_share": ("Masked-lane share", "mean"),
    "sector_efficiency": ("Sector efficiency", "mean"),
    "findings": ("Findings", "sum"),
    "dram_bytes": ("DRAM bytes (L2 model)", "sum"),
    "flops": ("FLOPs", "sum"),
    "oob_lanes": ("Out-of-bounds lanes", "sum"),
}


def report_launch(ti: TraceIndex, i: int) -> dict:
    """The launch's entry of ``Report.to_dict()`` without its per-program lists; {} without analysis."""
    report, _ = ti.report()
    if report is None:
        return {}
    return ti.memo(("report", i), lambda: {k: v for k, v in report.launch(i).items() if k != "programs"})


def report_rows(ti: TraceIndex, i: int) -> Optional[dict]:
    """Per op-row metric arrays of the analysis (parallel to Launch.ops), or None."""
    report, _ = ti.report()
    return report.rows(i) if report is not None else None


def launch_findings(ti: TraceIndex, i: int) -> list:
    """[(finding dict, op row or -1)] of one launch, most severe first."""
    report, _ = ti.report()
    if report is None:
        return []
    return ti.memo(("findings-raw", i), lambda: [(f.to_dict(), int(getattr(f, "op_row", -1)))
                                                 for f in report.findings if f.launch == i])


def program_metrics(ti: TraceIndex, i: int) -> dict:
    """Every grid metric over the whole grid (indexed by linear program id), NaN where unknown."""
    return ti.memo(("programs", i), lambda: _program_metrics(ti, i))


def _program_metrics(ti: TraceIndex, i: int) -> dict:
    ix = ti.launch(i)
    n = ix.num_programs
    rec = ix.recorded
    local = {"load_bytes": ix.load_bytes, "store_bytes": ix.store_bytes, "masked_share": ix.masked_share,
             "oob_lanes": ix.oob_lanes}
    out = {name: np.where(rec, v.astype(np.float64), np.nan) for name, v in local.items()}
    for name in ("sector_efficiency", "findings", "dram_bytes", "flops"):
        out[name] = np.full(n, np.nan)
    report, _ = ti.report()
    if report is None:
        return out
    cols = report.programs(i)
    pid = np.asarray(cols["pid"], dtype=np.int64).reshape(-1, 3)
    ok = np.all((pid >= 0) & (pid < np.array(ix.grid)), axis=1)
    lin = (pid[:, 0] + ix.grid[0] * (pid[:, 1] + ix.grid[1] * pid[:, 2]))[ok]

    def put(name, values):
        col = np.full(n, np.nan)
        col[lin] = np.asarray(values, dtype=np.float64)[ok]
        out[name] = col

    for name in ("load_bytes", "store_bytes", "dram_bytes", "flops", "findings"):
        put(name, cols[name])
    sectors = np.asarray(cols["sectors"], dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        put("sector_efficiency", np.where(sectors > 0, np.asarray(cols["used_bytes"]) / (32.0 * sectors), np.nan))
        lanes = np.asarray(cols["active_lanes"], dtype=np.float64) + np.asarray(cols["masked_lanes"])
        put("masked_share", np.where(lanes > 0, np.asarray(cols["masked_lanes"]) / lanes, np.nan))
    return out


def lin_or_none(ix: LaunchIndex, pid) -> Optional[int]:
    try:
        p = [int(v) for v in pid] + [0] * (3 - len(pid))
    except (TypeError, ValueError):
        return None
    if len(p) != 3 or not all(0 <= v < g for v, g in zip(p, ix.grid)):
        return None
    return ix.linear(tuple(p))


def finding_lin(ix: LaunchIndex, f: dict) -> Optional[int]:
    pid = f.get("program")
    return lin_or_none(ix, pid) if pid is not None else None
