"""The browser contract: every JSON endpoint of the web app and the payload it returns.

All payloads are columnar (parallel lists, strings sent once) and bounded, whatever the trace's size.
Every request may fail with a 4xx ``ErrorPayload``; the server never answers a bad request with a 500.
A shared server (``launch(share=True)``) also wants its access token on every request: ``?token=`` once,
after which the ``tt_token`` cookie it sets carries it; without it every route answers 403.

``GET /api/trace`` -> ``TracePayload``
    The launches, columnar: kernel name, grid, programs recorded / left out, op count, findings count,
    completed flag and error; plus the op-kind names and whether the analysis ran.
``GET /api/launch/<i>`` -> ``LaunchPayload``
    One launch: arguments, config, the tensor table (with bytes loaded and stored per tensor), the
    kernel source (at most ``MAX_SOURCE_LINES``) with per-line metrics for its margin, the analysis
    metrics of the launch, and the grid metrics the UI offers (``METRICS``).
``GET /api/launch/<i>/grid?z=<k>`` -> ``GridPayload``
    Per-program metrics of the z-slice ``k`` (default 0) as flat row-major (y, x) columns; ``null`` for
    programs that recorded nothing. Slices of more than ``MAX_GRID_CELLS`` programs are reduced to
    blocks of ``block = [bx, by]`` programs (sums for counts, means for shares). ``ranges`` spans the
    whole launch, so colours agree across slices.
``GET /api/launch/<i>/program/<x>,<y>,<z>?offset=&limit=`` -> ``ProgramPayload``
    One program's ops in execution order (memory and compute), at most ``MAX_OPS`` per page: seq, kind,
    tensor, file, line, block shape, lanes active / total, bytes, 32-byte sectors, out-of-bounds lanes;
    its metrics and the indices of its findings.
``GET /api/launch/<i>/tensor/<t>?mode=&program=&op=&rows=&cols=&index=&wrap=`` -> ``TensorPayload``
    The elements of tensor ``t`` touched by ``mode=op`` (op ``op`` of ``program``), ``mode=program`` (every
    op of ``program``) or ``mode=all`` (every program; the default), on a 2-D plane of the view: view dims
    ``rows`` and ``cols`` (default the last two), the other dims fixed by ``index`` (comma separated, one
    entry per dim), a 1-D view wrapped every ``wrap`` elements. Sparse cells, at most
    ``tensormap.MAX_CELLS`` of them, each ``cell = [fr, fc]`` elements; the whole answer stays under
    ``tensorview.MAX_TENSOR_BYTES`` (about 1 MB), dropping columns it names in ``dropped`` if needed.
``GET /api/launch/<i>/findings`` -> ``FindingsPayload``
    The analysis findings of the launch (at most ``MAX_FINDINGS``), each with the program, op (its seq in
    the program) and source line to jump to.
``GET /api/launch/<i>/charts`` -> ``ChartsPayload``
    ``HIST_BINS``-bin histograms of every grid metric over the programs, the launch's roofline point, and
    bytes loaded / stored per tensor.

Static routes (not JSON): ``/`` the page, ``/static/<file>`` the frontend's files, ``/vendor/plotly.min.js``
from the installed plotly package.
"""
from __future__ import annotations

from typing import Any, Optional, TypedDict

import numpy as np

from ..model import KINDS
from .index import LaunchIndex, TraceIndex
from .tensormap import _factors

MAX_GRID_CELLS = 1 << 14
MAX_OPS = 2000
MAX_FINDINGS = 1000
MAX_SOURCE_LINES = 5000
MAX_LINE_CHARS = 400
HIST_BINS = 32

# grid metrics: key -> (label, how blocks of programs combine)
METRICS = {
    "load_bytes": ("Bytes loaded", "sum"),
    "store_bytes": ("Bytes stored", "sum"),
    "masked_share": ("Masked-lane share", "mean"),
    "sector_efficiency": ("Sector efficiency", "mean"),
    "findings": ("Findings", "sum"),
    "oob_lanes": ("Out-of-bounds lanes", "sum"),
}


class ApiError(Exception):
    """A request the payloads cannot answer; the server turns it into an ``ErrorPayload``."""
    status = 400

    def __init__(self, message: str, status: Optional[int] = None):
        super().__init__(message)
        if status is not None:
            self.status = status


class ErrorPayload(TypedDict):
    error: str
    status: int


class TracePayload(TypedDict):
    kinds: list
    launches: dict        # kernel, grid, programs, skipped, ops, findings, completed, error: parallel lists
    analysis: dict        # {"available": bool, "error": str | None}
    metrics: dict         # metric key -> label


class LaunchPayload(TypedDict):
    index: int
    kernel: str
    grid: list
    args: dict
    config: Any
    completed: bool
    error: Optional[str]
    values_truncated: bool
    recorded_programs: int
    skipped_programs: int
    tensors: dict         # name, dtype, shape, strides, storage_offset, storage_size, elem_bytes,
                          # load_bytes, store_bytes: parallel lists
    files: list
    source: dict          # file, first_line, lines, truncated, margin: {line, ops, bytes, sectors} lists
    metrics: dict         # analysis metrics of the launch ({} without analysis)
    findings: int
    analysis_error: Optional[str]


class GridPayload(TypedDict):
    grid: list
    z: int
    block: list           # [bx, by] programs per cell
    cols: int
    rows: int
    metrics: dict         # metric key -> list (row-major over rows x cols), None where nothing was recorded
    recorded: list        # 1 where the cell holds a recorded program
    ranges: dict          # metric key -> [min, max] over the launch


class ProgramPayload(TypedDict):
    program: list
    linear: int
    recorded: bool
    metrics: dict
    ops: dict             # seq, kind, tensor, file, line, shape, active, lanes, bytes, sectors, oob, dims
    total_ops: int
    offset: int
    findings: list        # indices into the launch's FindingsPayload


class TensorPayload(TypedDict):
    launch: int
    tensor: int
    name: str
    dtype: str
    shape: list
    strides: list
    storage_offset: int
    storage_size: int
    plane: dict           # see tensormap.Plane.to_dict
    selection: dict       # {"mode", "program", "op"}
    elements: int         # distinct elements touched, all planes
    elements_other_planes: int
    oob_lanes: int
    oob_examples: list
    cells: dict           # cell, kinds (1 read | 2 written), lanes, program, programs, value | fill
    dropped: list


class FindingsPayload(TypedDict):
    kind: list
    message: list
    program: list         # [x, y, z] or None
    op: list              # seq within the program, or None
    line: list
    tensor: list
    total: int
    truncated: bool


class ChartsPayload(TypedDict):
    histograms: dict      # metric -> {"edges": [...], "counts": [...]}
    roofline: dict
    tensors: dict         # name, load_bytes, store_bytes


def _num(values, decimals: int = 4) -> list:
    """Floats rounded for transport; NaN (no data) becomes None, since JSON has no NaN."""
    a = np.round(np.asarray(values, dtype=np.float64), decimals)
    return [None if v != v else v for v in a.tolist()]


def _json_safe(v):
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return f if np.isfinite(f) else None
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


# --------------------------------------------------------------------------------------------------------
# analysis report adapters: the report is a dict (Report.to_dict()); these read the parts the views show
# --------------------------------------------------------------------------------------------------------
def report_launch(ti: TraceIndex, i: int) -> dict:
    report, _ = ti.report()
    launches = (report or {}).get("launches") or []
    return launches[i] if i < len(launches) else {}


def launch_findings(ti: TraceIndex, i: int) -> list:
    report, _ = ti.report()
    return [f for f in (report or {}).get("findings") or [] if f.get("launch") == i]


def program_metrics(ti: TraceIndex, i: int) -> dict:
    """Every grid metric over the whole grid (indexed by linear program id), NaN where unknown. The
    analysis report's per-program columns win over the numbers derived here from the trace."""
    return ti.memo(("programs", i), lambda: _program_metrics(ti, i))


def _program_metrics(ti: TraceIndex, i: int) -> dict:
    ix = ti.launch(i)
    local = {"load_bytes": ix.load_bytes, "store_bytes": ix.store_bytes, "masked_share": ix.masked_share,
             "sector_efficiency": ix.sector_efficiency, "oob_lanes": ix.oob_lanes}
    out = {name: np.where(ix.recorded, v.astype(np.float64), np.nan) for name, v in local.items()}
    counts = np.zeros(ix.num_programs)
    for f in launch_findings(ti, i):
        lin = _finding_lin(ix, f)
        if lin is not None:
            counts[lin] += 1
    out["findings"] = np.where(ix.recorded, counts, np.nan)
    progs = report_launch(ti, i).get("programs") or {}
    if "program" in progs:
        lins = [_lin_or_none(ix, pid) for pid in progs["program"]]
        for name in METRICS:
            if name in progs and name != "findings":
                col = np.full(ix.num_programs, np.nan)
                for lin, v in zip(lins, progs[name]):
                    if lin is not None and v is not None:
                        col[lin] = float(v)
                out[name] = col
    return out


def _lin_or_none(ix: LaunchIndex, pid) -> Optional[int]:
    try:
        p = [int(v) for v in pid] + [0] * (3 - len(pid))
    except (TypeError, ValueError):
        return None
    if len(p) != 3 or not all(0 <= v < g for v, g in zip(p, ix.grid)):
        return None
    return ix.linear(tuple(p))


def _finding_lin(ix: LaunchIndex, f: dict) -> Optional[int]:
    pid = f.get("program")
    return _lin_or_none(ix, pid) if pid is not None else None


# --------------------------------------------------------------------------------------------------------
# payload builders
# --------------------------------------------------------------------------------------------------------
def trace_payload(ti: TraceIndex) -> TracePayload:
    report, error = ti.report()
    lcs = ti.trace.launches
    counts = [len(launch_findings(ti, i)) for i in range(len(lcs))]
    return {
        "kinds": list(KINDS),
        "launches": {
            "kernel": [lc.kernel_name for lc in lcs], "grid": [list(lc.grid) for lc in lcs],
            "programs": [lc.recorded_programs for lc in lcs], "skipped": [lc.skipped_programs for lc in lcs],
            "ops": [lc.num_ops for lc in lcs], "findings": counts, "completed": [lc.completed for lc in lcs],
            "error": [lc.error for lc in lcs]},
        "analysis": {"available": report is not None, "error": error},
        "metrics": {k: label for k, (label, _) in METRICS.items()},
    }


def launch_payload(ti: TraceIndex, i: int) -> LaunchPayload:
    ix = ti.launch(i)
    lc = ix.launch
    _, error = ti.report()
    o = lc.ops
    nt = len(lc.tensors)
    t = o["tensor"].astype(np.int64)
    mem = ix.memory & (t >= 0)
    load = np.bincount(t[mem], weights=np.where(ix.read, ix.bytes, 0)[mem], minlength=nt)[:nt]
    store = np.bincount(t[mem], weights=np.where(ix.write, ix.bytes, 0)[mem], minlength=nt)[:nt]
    return {
        "index": i, "kernel": lc.kernel_name, "grid": list(lc.grid), "args": _json_safe(lc.args),
        "config": _json_safe(lc.config), "completed": lc.completed, "error": lc.error,
        "values_truncated": lc.values_truncated, "recorded_programs": lc.recorded_programs,
        "skipped_programs": lc.skipped_programs,
        "tensors": {
            "name": [x.name for x in lc.tensors], "dtype": [x.dtype for x in lc.tensors],
            "shape": [list(x.shape) for x in lc.tensors], "strides": [list(x.strides) for x in lc.tensors],
            "storage_offset": [x.storage_offset for x in lc.tensors],
            "storage_size": [x.storage_size for x in lc.tensors], "elem_bytes": [x.elem_bytes for x in lc.tensors],
            "load_bytes": load.astype(np.int64).tolist(), "store_bytes": store.astype(np.int64).tolist()},
        "files": list(lc.files),
        "source": _source(ix),
        "metrics": _json_safe(report_launch(ti, i).get("metrics") or {}),
        "findings": len(launch_findings(ti, i)),
        "analysis_error": error,
    }


def _source(ix: LaunchIndex) -> dict:
    lc, o = ix.launch, ix.launch.ops
    lines = lc.source.splitlines()
    def_at = next((k for k, text in enumerate(lines) if text.lstrip().startswith("def ")), 0)
    first = max(1, lc.source_line - def_at) if lc.source_line else 1
    fid = lc.files.index(lc.source_file) if lc.source_file in lc.files else -1
    rows = np.nonzero((o["file"] == fid) & (o["line"] > 0))[0] if fid >= 0 else np.zeros(0, np.int64)
    line = o["line"][rows].astype(np.int64)
    uniq, inv = np.unique(line, return_inverse=True)
    per = lambda w: np.bincount(inv, weights=w, minlength=len(uniq)).astype(np.int64).tolist()
    return {
        "file": lc.source_file, "first_line": int(first),
        "lines": [s[:MAX_LINE_CHARS] for s in lines[:MAX_SOURCE_LINES]],
        "truncated": len(lines) > MAX_SOURCE_LINES,
        "margin": {"line": uniq.tolist(), "ops": per(np.ones(len(rows))),
                   "bytes": per(ix.bytes[rows].astype(np.float64)),
                   "sectors": per(ix.sectors[rows].astype(np.float64))},
    }


def _ranges(values: np.ndarray) -> list:
    finite = values[np.isfinite(values)]
    return [float(finite.min()), float(finite.max())] if len(finite) else [0.0, 0.0]


def grid_payload(ti: TraceIndex, i: int, z: int) -> GridPayload:
    ix = ti.launch(i)
    gx, gy, gz = ix.grid
    if not 0 <= z < gz:
        raise ApiError(f"z={z} is outside the grid's z range 0..{gz - 1}", 404)
    by, bx = _factors(gy, gx, MAX_GRID_CELLS)
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
    ndim = o["ndim"][rows]
    shape = ["x".join(str(int(s)) for s in o["shape"][r][:d]) for r, d in zip(rows, ndim)]
    metrics = {name: _num(col[lin:lin + 1])[0] for name, col in program_metrics(ti, i).items()}
    findings = [k for k, f in enumerate(launch_findings(ti, i)[:MAX_FINDINGS]) if _finding_lin(ix, f) == lin]
    return {
        "program": list(pid), "linear": lin, "recorded": bool(ix.recorded[lin]), "metrics": metrics,
        "ops": {"seq": o["seq"][rows].tolist(), "kind": o["kind"][rows].tolist(), "tensor": o["tensor"][rows].tolist(),
                "file": o["file"][rows].tolist(), "line": o["line"][rows].tolist(), "shape": shape,
                "active": ix.active[rows].tolist(), "lanes": ix.total[rows].tolist(), "bytes": ix.bytes[rows].tolist(),
                "sectors": ix.sectors[rows].tolist(), "oob": ix.oob[rows].tolist(),
                "values": (o["value_dtype"][rows] >= 0).astype(int).tolist(),
                "aux": o["aux"][rows].tolist()},
        "total_ops": int(len(rows_all)), "offset": int(offset), "findings": findings,
    }


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
    found = launch_findings(ti, i)
    shown = found[:MAX_FINDINGS]
    out: dict = {"kind": [], "message": [], "program": [], "op": [], "line": [], "tensor": []}
    for f in shown:
        lin = _finding_lin(ix, f)
        out["kind"].append(str(f.get("kind", "")))
        out["message"].append(str(f.get("message", "")))
        out["program"].append(list(ix.pid(lin)) if lin is not None else None)
        out["line"].append(int(f["line"]) if isinstance(f.get("line"), (int, np.integer)) else None)
        out["tensor"].append(str(f["tensor"]) if f.get("tensor") is not None else None)
        out["op"].append(_finding_op(ix, lin, f))
    return {**out, "total": len(found), "truncated": len(found) > len(shown)}


def _finding_op(ix: LaunchIndex, lin: Optional[int], f: dict) -> Optional[int]:
    """The seq of the op a finding is about: the first op of its program on its line (and tensor)."""
    if lin is None:
        return None
    rows = ix.program_rows(lin)
    o = ix.launch.ops
    names = [t.name for t in ix.launch.tensors]
    for seq, r in enumerate(rows):
        if f.get("line") is not None and int(o["line"][r]) != f.get("line"):
            continue
        t = int(o["tensor"][r])
        if f.get("tensor") is not None and (t < 0 or names[t] != f.get("tensor")):
            continue
        return seq
    return None


def charts_payload(ti: TraceIndex, i: int) -> ChartsPayload:
    ix = ti.launch(i)
    hist = {}
    for name in METRICS:
        v = program_metrics(ti, i)[name]
        v = v[np.isfinite(v)]
        lo, hi = (float(v.min()), float(v.max())) if len(v) else (0.0, 1.0)
        counts, edges = np.histogram(v, bins=HIST_BINS, range=(lo, hi if hi > lo else lo + 1))
        hist[name] = {"edges": _num(edges, 6), "counts": counts.tolist()}
    lp = launch_payload(ti, i)
    metrics = lp["metrics"]
    roofline = {k: metrics.get(k) for k in ("flops", "dram_bytes_predicted", "arithmetic_intensity",
                                             "load_bytes", "store_bytes")}
    roofline.update(_json_safe(report_launch(ti, i).get("roofline") or {}))
    t = lp["tensors"]
    return {"histograms": hist, "roofline": roofline,
            "tensors": {"name": t["name"], "load_bytes": t["load_bytes"], "store_bytes": t["store_bytes"]}}
