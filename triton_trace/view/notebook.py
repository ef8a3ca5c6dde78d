"""Inline display in Jupyter: self-contained HTML for a Trace, a Launch, a Report and a tensor view.

The HTML needs no running server and no internet, so it survives in an exported notebook. The program
grid and the tensor views are inline SVG (readable without JavaScript; ``<title>`` tooltips carry the
numbers); charts are plotly figures whose plotly.js comes from the installed plotly package and is
embedded once per page: once per IPython shell for rich outputs, always in ``standalone_html``. The numbers
come from the same payload functions as the web app (payload.py, tensorview.py), and every string taken
from a trace is escaped, since a trace file may come from someone else.
"""
from __future__ import annotations

import html
import math
from typing import Optional

import numpy as np

from ..errors import TraceUsageError
from ..model import KINDS, Access, Launch, Trace
from .index import LaunchIndex, TraceIndex
from .payload import METRICS, charts_payload, launch_findings, program_metrics, report_launch
from .tensormap import cell_sizes, invertible, locate, make_plane, view_index
from .tensorview import elements, plane_cells

MAX_LAUNCHES = 16          # launches drawn in full by trace_html / report_html; the rest are only listed
MAX_GRID_CELLS = 4096      # SVG cells of one launch's program grid (larger grids are drawn in blocks)
GRID_WRAP = 64             # a 1-D grid wider than this is drawn in rows of this many programs
MAX_Z = 8                  # z slices drawn
MAX_FINDINGS = 200         # rows of a findings table
TENSOR_CELLS = 128         # a tensor view is at most TENSOR_CELLS x TENSOR_CELLS cells
MAX_TENSOR_VIEWS = 8       # tensors drawn for one program
MAX_CELL_TITLES = 1024     # per-cell tooltips up to this many touched cells, one per colour above it

_VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58",
            "#b5de2b", "#fde725"]
_KIND_COLOR = {1: ("#4c78a8", "read"), 2: ("#f58518", "written"), 3: ("#9d5fc0", "read and written")}
_CSS = ("<style>.tt-root{font-family:system-ui,sans-serif;font-size:13px;color:#222;background:#fff;"
        "padding:4px 2px}.tt-root h3{font-size:15px;margin:10px 0 4px}.tt-root h4{font-size:13px;margin:8px 0 3px}"
        ".tt-root table{border-collapse:collapse;margin:4px 0}.tt-root th,.tt-root td{border:1px solid #ddd;"
        "padding:2px 6px;text-align:left;font-size:12px;vertical-align:top}.tt-root th{background:#f4f4f4}"
        ".tt-note{color:#666;font-size:12px}.tt-err{color:#b00020}</style>")


def _e(s) -> str:
    return html.escape(str(s), quote=True)


def _root(body: str) -> str:
    return f'<div class="tt-root">{_CSS}{body}</div>'


def _fmt(v, name: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-"
    if isinstance(v, (bool, str)) or not isinstance(v, (int, float, np.integer, np.floating)):
        return str(v)
    v = float(v)
    if "bytes" in name:
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(v) < 1024 or unit == "GiB":
                return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
            v /= 1024
    if name.endswith(("share", "efficiency", "rate")):
        return f"{100 * v:.1f}%"
    return f"{int(v)}" if v == int(v) and abs(v) < 1e15 else f"{v:.4g}"


def _color(t: float) -> str:
    """Viridis at t in [0, 1]."""
    x = min(max(t, 0.0), 1.0) * (len(_VIRIDIS) - 1)
    i = min(int(x), len(_VIRIDIS) - 2)
    a, b = _VIRIDIS[i], _VIRIDIS[i + 1]
    mix = [round(int(a[k:k + 2], 16) + (x - i) * (int(b[k:k + 2], 16) - int(a[k:k + 2], 16))) for k in (1, 3, 5)]
    return "#" + "".join(f"{c:02x}" for c in mix)


# --------------------------------------------------------------------------------------------------------
# the analysis report: a Report, its to_dict(), or None (analyse now when the analysis is installed)
# --------------------------------------------------------------------------------------------------------
def _index(trace: Trace, report=None) -> TraceIndex:
    if report is not None:
        rd = report if isinstance(report, dict) else report.to_dict()
        return TraceIndex(trace, analyze=lambda _: rd)
    try:
        from ..analysis import analyze
    except ImportError:
        return TraceIndex(trace)
    return TraceIndex(trace, analyze=lambda t: analyze(t).to_dict())


def _launch_report(report, launch: Launch):
    """The part of a whole-trace report that is about ``launch``, renumbered as launch 0 of its own."""
    if report is None:
        return None
    rd = report if isinstance(report, dict) else report.to_dict()
    entries = rd.get("launches") or []
    same = [i for i, lr in enumerate(entries) if lr.get("kernel") == launch.kernel_name
            and list(lr.get("grid") or []) == list(launch.grid)]
    if not same:
        return {"launches": [], "findings": []}
    i = same[0]
    findings = [{**f, "launch": 0} for f in rd.get("findings") or [] if f.get("launch") == i]
    return {**rd, "launches": [entries[i]], "findings": findings}


# --------------------------------------------------------------------------------------------------------
# the program grid
# --------------------------------------------------------------------------------------------------------
def _layout(v: np.ndarray, grid: tuple, z: int, wrap: bool) -> np.ndarray:
    """Per-program values of one z slice as a (rows, cols) array, NaN padded."""
    gx, gy, _ = grid
    if wrap:
        out = np.full(-(-gx // GRID_WRAP) * GRID_WRAP, np.nan)
        out[:gx] = v[:gx]
        return out.reshape(-1, GRID_WRAP)
    return v[z * gx * gy:(z + 1) * gx * gy].reshape(gy, gx)


def _blocks(a: np.ndarray, b: int, how: str) -> np.ndarray:
    if b == 1:
        return a
    h, w = a.shape
    pad = np.full((-(-h // b) * b, -(-w // b) * b), np.nan)
    pad[:h, :w] = a
    blk = pad.reshape(pad.shape[0] // b, b, pad.shape[1] // b, b)
    known = np.isfinite(blk).sum(axis=(1, 3))
    total = np.nansum(blk, axis=(1, 3))
    return np.where(known > 0, total / np.maximum(known, 1) if how == "mean" else total, np.nan)


def grid_svg(ix: LaunchIndex, metrics: dict, metric: str = "load_bytes") -> str:
    """One rect per program at (x, y), z slices side by side, coloured by ``metric`` with a legend."""
    gx, gy, gz = ix.grid
    if metric not in metrics:
        raise TraceUsageError(f"grid metric '{metric}' is unknown; choose one of {sorted(metrics)}")
    label, how = METRICS.get(metric, (metric, "mean"))
    wrap = gy == 1 and gz == 1 and gx > GRID_WRAP
    rows, cols = (-(-gx // GRID_WRAP), GRID_WRAP) if wrap else (gy, gx)
    nz = min(gz, MAX_Z)
    b = max(1, math.isqrt(nz * rows * cols // MAX_GRID_CELLS))
    while nz * -(-rows // b) * -(-cols // b) > MAX_GRID_CELLS:
        b += 1
    crows, ccols = -(-rows // b), -(-cols // b)
    s = max(3, min(24, 640 // max(1, nz * ccols), 420 // max(1, crows)))
    gap = 18 if nz > 1 else 0
    values = metrics[metric]
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)
    names = [n for n in METRICS if n in metrics] + [n for n in metrics if n not in METRICS]
    stroke = ' stroke="#fff" stroke-width="0.5"' if s >= 6 else ""
    out, top = [], 14
    for z in range(nz):
        x0 = z * (ccols * s + gap)
        if nz > 1:
            out.append(f'<text x="{x0}" y="10" font-size="10">z = {z}</text>')
        cell_v = _blocks(_layout(values, ix.grid, z, wrap), b, how)
        for r in range(crows):
            for c in range(ccols):
                v = cell_v[r, c]
                if b == 1:
                    lin = r * GRID_WRAP + c if wrap else z * gx * gy + r * gx + c
                    if wrap and lin >= gx:
                        continue
                    pid = ix.pid(lin)
                    tip = f"program {pid}" + "".join(
                        f"\n{METRICS.get(n, (n,))[0]}: {_fmt(float(metrics[n][lin]), n)}" for n in names
                    ) if ix.recorded[lin] else f"program {pid}: not recorded"
                    attrs = f'class="tt-prog" data-pid="{pid[0]},{pid[1]},{pid[2]}"'
                else:
                    span = (f"programs {r * b * GRID_WRAP + c * b}.. (rows {r * b}-{r * b + b - 1})" if wrap else
                            f"programs x {c * b}-{min(gx, c * b + b) - 1}, y {r * b}-{min(gy, r * b + b) - 1}, z {z}")
                    tip = f"{span}\n{label} ({how}): {_fmt(float(v), metric)}"
                    attrs = 'class="tt-progs"'
                fill = _color((v - lo) / (hi - lo) if hi > lo else 0.5) if np.isfinite(v) else "#e6e6e6"
                out.append(f'<rect {attrs} x="{x0 + c * s}" y="{top + r * s}" width="{s}" height="{s}" '
                           f'fill="{fill}"{stroke}><title>{_e(tip)}</title></rect>')
    width = nz * (ccols * s + gap)
    ly = top + crows * s + 14
    legend = [f'<text x="0" y="{ly}" font-size="11">{_e(label)}: {_e(_fmt(lo, metric))}</text>']
    for k in range(10):
        legend.append(f'<rect x="{150 + 14 * k}" y="{ly - 10}" width="14" height="12" fill="{_color(k / 9)}"/>')
    legend.append(f'<text x="{296}" y="{ly}" font-size="11">{_e(_fmt(hi, metric))}</text>'
                  f'<rect x="370" y="{ly - 10}" width="12" height="12" fill="#e6e6e6"/>'
                  f'<text x="386" y="{ly}" font-size="11">not recorded</text>')
    note = [f"1-D grid of {gx} programs drawn in rows of {GRID_WRAP}" if wrap else "x across, y down"]
    if b > 1:
        note.append(f"each cell is a block of {b}x{b} programs ({how} of {label.lower()})")
    if gz > nz:
        note.append(f"showing z slices 0-{nz - 1} of {gz}")
    svg = (f'<svg class="tt-grid" xmlns="http://www.w3.org/2000/svg" width="{max(width, 460)}" '
           f'height="{ly + 6}" font-family="sans-serif">{"".join(out)}{"".join(legend)}</svg>')
    return svg + (f'<div class="tt-note">{_e("; ".join(note))}</div>' if note else "")


# --------------------------------------------------------------------------------------------------------
# tables and charts
# --------------------------------------------------------------------------------------------------------
def findings_table(findings: list, kernels: Optional[list] = None) -> str:
    if not findings:
        return '<table class="tt-findings"><tr><th>findings</th></tr><tr><td>no findings</td></tr></table>'
    head = "".join(f"<th>{h}</th>" for h in ("kind", "severity", "kernel", "launch", "program", "line", "tensor",
                                                "message"))
    body = []
    for f in findings[:MAX_FINDINGS]:
        prog = f.get("program")
        prog = tuple(prog) if isinstance(prog, (list, tuple)) else prog
        cells = (f.get("kind"), f.get("severity"), f.get("kernel"), f.get("launch"), prog, f.get("line"),
                 f.get("tensor"), f.get("message"))
        body.append("<tr>" + "".join(f"<td>{'' if v is None else _e(v)}</td>" for v in cells) + "</tr>")
    more = (f'<div class="tt-note">{len(findings) - MAX_FINDINGS} more findings not shown</div>'
            if len(findings) > MAX_FINDINGS else "")
    return f'<table class="tt-findings"><tr>{head}</tr>{"".join(body)}</table>{more}'


def _kv_table(d: dict, cls: str, per_row: int = 4) -> str:
    items = [(k, v) for k, v in d.items() if not isinstance(v, (dict, list))]
    rows = ["".join(f"<th>{_e(k)}</th><td>{_e(_fmt(v, str(k)))}</td>" for k, v in items[i:i + per_row])
            for i in range(0, len(items), per_row)]
    return f'<table class="{cls}">{"".join(f"<tr>{r}</tr>" for r in rows)}</table>' if rows else ""


def _figure_html(fig) -> str:
    fig.update_layout(template="none", height=300, margin=dict(l=60, r=20, t=40, b=60),
                      font=dict(family="sans-serif", size=11))
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})


def _launch_chart(ti: TraceIndex, i: int, metric: str) -> str:
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go
    ch = charts_payload(ti, i)
    label = METRICS.get(metric, (metric,))[0]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("bytes per tensor", f"programs by {label.lower()}"))
    names = [_e(n) for n in ch["tensors"]["name"]]
    fig.add_trace(go.Bar(name="loaded", x=names, y=ch["tensors"]["load_bytes"]), row=1, col=1)
    fig.add_trace(go.Bar(name="stored", x=names, y=ch["tensors"]["store_bytes"]), row=1, col=1)
    h = ch["histograms"].get(metric)
    if h:
        e = h["edges"]
        fig.add_trace(go.Bar(name="programs", x=[(a + b) / 2 for a, b in zip(e[:-1], e[1:])], y=h["counts"],
                             width=[(b - a) for a, b in zip(e[:-1], e[1:])], showlegend=False), row=1, col=2)
    return _figure_html(fig)


def _report_chart(rd: dict) -> str:
    import plotly.graph_objects as go
    launches = (rd.get("launches") or [])[:MAX_LAUNCHES * 4]
    if not launches:
        return ""
    x = [_e(f"[{i}] {lr.get('kernel', '')}") for i, lr in enumerate(launches)]
    fig = go.Figure()
    for key, name in (("load_bytes", "loaded"), ("store_bytes", "stored"), ("dram_bytes_predicted", "DRAM predicted")):
        y = [(lr.get("metrics") or {}).get(key) for lr in launches]
        if any(isinstance(v, (int, float)) for v in y):
            fig.add_trace(go.Bar(name=name, x=x, y=y))
    fig.update_layout(title="bytes per launch", barmode="group")
    return _figure_html(fig)


# --------------------------------------------------------------------------------------------------------
# public HTML builders
# --------------------------------------------------------------------------------------------------------
def _launch_section(ti: TraceIndex, i: int, metric: Optional[str], chart: bool, details: bool) -> str:
    ix = ti.launch(i)
    lc = ix.launch
    metrics = program_metrics(ti, i)
    metric = metric or "load_bytes"
    parts = [f"<h3>[{i}] {_e(lc.kernel_name)} <span class=\"tt-note\">grid {_e(lc.grid)}, "
             f"{lc.recorded_programs} programs recorded"
             f"{f', {lc.skipped_programs} left out' if lc.skipped_programs else ''}, {lc.num_ops} ops"
             f"{', values truncated' if lc.values_truncated else ''}</span></h3>"]
    if not lc.completed:
        parts.append(f'<div class="tt-err">incomplete: {_e(lc.error)}</div>')
    if details:
        if lc.config:
            parts.append(f'<div class="tt-note">config: {_e(lc.config)}</div>')
        if lc.args:
            parts.append(f'<div class="tt-note">arguments: {_e(", ".join(f"{k}={v}" for k, v in lc.args.items()))}</div>')
        rows = "".join(f"<tr><td>{_e(t.name)}</td><td>{_e(t.dtype)}</td><td>{_e(t.shape)}</td><td>{_e(t.strides)}</td>"
                       f"</tr>" for t in lc.tensors)
        parts.append(f'<table class="tt-tensors"><tr><th>tensor</th><th>dtype</th><th>shape</th><th>strides</th></tr>'
                     f"{rows}</table>")
    parts.append(_kv_table(report_launch(ti, i).get("metrics") or {}, "tt-metrics"))
    parts.append(grid_svg(ix, metrics, metric))
    if chart:
        parts.append(_launch_chart(ti, i, metric))
    return "".join(parts)


def _analysis_note(ti: TraceIndex) -> str:
    _, error = ti.report()
    return f'<div class="tt-note">{_e(error)}</div>' if error else ""


def trace_html(trace: Trace, report=None, metric: Optional[str] = None) -> str:
    """The whole trace: findings, a chart of bytes per launch, and each launch's program grid."""
    ti = _index(trace, report)
    rd, _ = ti.report()
    n = len(trace.launches)
    parts = [f"<h3>Trace: {n} launch(es) of {_e(', '.join(trace.kernels()) or 'no kernels')}</h3>",
             _analysis_note(ti)]
    if rd is not None:
        parts += ["<h4>Findings</h4>", findings_table(rd.get("findings") or []), _report_chart(rd)]
    for i in range(min(n, MAX_LAUNCHES)):
        parts.append(_launch_section(ti, i, metric, chart=False, details=False))
    if n > MAX_LAUNCHES:
        rest = ", ".join(f"[{i}] {lc.kernel_name}" for i, lc in enumerate(trace.launches[MAX_LAUNCHES:], MAX_LAUNCHES))
        parts.append(f'<div class="tt-note">not drawn: {_e(rest[:2000])}</div>')
    return _root("".join(parts))


def launch_html(launch: Launch, report=None, program=None, metric: Optional[str] = None) -> str:
    """One launch: arguments, tensors, metrics, program grid, charts, findings, and optionally the tensor
    view of one program. ``report`` may be the report of a whole trace holding this launch."""
    ti = _index(Trace((launch,)), _launch_report(report, launch))
    parts = [_launch_section(ti, 0, metric, chart=True, details=True), _analysis_note(ti)]
    rd, _ = ti.report()
    if rd is not None:
        parts += ["<h4>Findings</h4>", findings_table(launch_findings(ti, 0))]
    if program is not None:
        parts.append(_tensor_views(ti.launch(0), program, None))
    return _root("".join(parts))


def report_html(report) -> str:
    """A report on its own: per-launch metrics, the findings and a chart (no trace needed)."""
    rd = report if isinstance(report, dict) else report.to_dict()
    launches = rd.get("launches") or []
    keys = []
    for lr in launches[:MAX_LAUNCHES * 4]:
        keys += [k for k, v in (lr.get("metrics") or {}).items() if k not in keys and not isinstance(v, (dict, list))]
    head = "".join(f"<th>{_e(k)}</th>" for k in ["launch", "kernel", "grid"] + keys)
    rows = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in [i, lr.get("kernel"), tuple(lr.get("grid") or ())]) +
                   "".join(f"<td>{_e(_fmt((lr.get('metrics') or {}).get(k), k))}</td>" for k in keys) + "</tr>"
                   for i, lr in enumerate(launches[:MAX_LAUNCHES * 4]))
    parts = [f"<h3>Report: {len(launches)} launch(es), {len(rd.get('findings') or [])} finding(s)</h3>",
             f'<table class="tt-launches"><tr>{head}</tr>{rows}</table>',
             "<h4>Findings</h4>", findings_table(rd.get("findings") or []), _report_chart(rd)]
    return _root("".join(parts))


# --------------------------------------------------------------------------------------------------------
# tensor view
# --------------------------------------------------------------------------------------------------------
def _pid(program, grid: tuple) -> tuple:
    p = (int(program),) if isinstance(program, (int, np.integer)) else tuple(int(v) for v in program)
    p = p + (0,) * (3 - len(p))
    if len(p) != 3 or not all(0 <= v < g for v, g in zip(p, grid)):
        raise TraceUsageError(f"program {program!r} is not in the grid {tuple(grid)}")
    return p


def tensor_view_html(launch: Launch, program=0, op=None, max_cells: int = TENSOR_CELLS) -> str:
    """The tensors one program touched, each as a 2-D heatmap of its view with the touched elements
    highlighted (coloured by value where values were recorded). ``op``: an Access of that program or its
    ``seq``, to show only that op; None shows every memory op of the program, one view per tensor."""
    ix = TraceIndex(Trace((launch,))).launch(0)
    return _root(_tensor_views(ix, program, op, max_cells))


def _tensor_views(ix: LaunchIndex, program, op, max_cells: int = TENSOR_CELLS) -> str:
    lc = ix.launch
    pid = _pid(program, lc.grid)
    rows = ix.program_rows(ix.linear(pid))
    if isinstance(op, Access):
        op = op.seq
    if op is not None:
        if not 0 <= int(op) < len(rows) or not ix.memory[rows[int(op)]]:
            raise TraceUsageError(f"program {pid} has no memory op with seq {op}; its memory ops are "
                                  f"{[int(s) for s in np.nonzero(ix.memory[rows])[0]]}")
        rows = rows[int(op):int(op) + 1]
    rows = rows[ix.memory[rows] & (lc.ops["tensor"][rows] >= 0)]
    if not len(rows):
        return f'<div class="tt-note">program {pid} recorded no memory ops</div>'
    tensors = list(dict.fromkeys(int(t) for t in lc.ops["tensor"][rows]))
    what = ""
    if op is not None:
        what = f", op {int(op)} ({KINDS[int(lc.ops['kind'][rows[0]])]} at line {int(lc.ops['line'][rows[0]])})"
    parts = [f"<h4>{_e(lc.kernel_name)}: program {pid}{what}</h4>"]
    for t in tensors[:MAX_TENSOR_VIEWS]:
        parts.append(_tensor_svg(ix, rows[lc.ops["tensor"][rows] == t], t, max_cells))
    if len(tensors) > MAX_TENSOR_VIEWS:
        parts.append(f'<div class="tt-note">{len(tensors) - MAX_TENSOR_VIEWS} more tensors not drawn</div>')
    return "".join(parts)


def _plane_for(ix: LaunchIndex, rows: np.ndarray, t: int, table, max_cells: int):
    info = ix.launch.tensors[t]
    wrap = None
    if len(info.shape) == 1:     # wrap at the op's block size when that gives one row per block
        block = int(ix.launch.ops["lane_count"][rows].max())
        if int(ix.launch.ops["ndim"][rows[0]]) == 1 and 8 <= block <= 1024 and info.shape[0] // block <= max_cells:
            wrap = block
    index = None
    if len(info.shape) > 2 and len(table.offsets) and invertible(info):
        index = view_index(info, table.offsets[:1])[0][0].tolist()   # the slice of the first touched element
    return make_plane(info, index=index, wrap=wrap, max_cells=max_cells * max_cells)


def _tensor_svg(ix: LaunchIndex, rows: np.ndarray, t: int, max_cells: int) -> str:
    info = ix.launch.tensors[t]
    table = elements(ix, rows, t)
    plane = _plane_for(ix, rows, t, table, max_cells)
    pos, entry, placed = locate(info, plane, table.offsets)
    cl = plane_cells(plane, table, pos, entry)
    R, C = plane.cell_rows, plane.cell_cols
    px = py = max(2, min(16, 640 // max(C, 1), 420 // max(R, 1)))
    values = cl.get("value")
    finite = [v for v in values or [] if isinstance(v, (int, float))]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    groups: dict = {}
    for k, cell in enumerate(cl["cell"]):
        v = values[k] if values else None
        if isinstance(v, (int, float)):
            key = (_color((v - lo) / (hi - lo) if hi > lo else 0.5), 1.0)
        else:
            fill = cl["fill"][k] if "fill" in cl else 1.0
            key = (_KIND_COLOR[cl["kinds"][k] or 1][0], (0.4, 0.6, 0.8, 1.0)[min(3, int(fill * 4 - 1e-9))])
        groups.setdefault(key, []).append(k)
    body = [_runs(cell_sizes(plane, np.arange(R * C)) > 0, R, C, "#ececec", 1.0, "untouched")]
    if len(cl["cell"]) <= MAX_CELL_TITLES:
        for (color, alpha), ks in groups.items():
            for k in ks:
                r, c = divmod(cl["cell"][k], C)
                body.append(f'<rect x="{c}" y="{r}" width="1" height="1" fill="{color}" fill-opacity="{alpha}">'
                            f"<title>{_e(_cell_title(plane, info.name, cl, k, r, c))}</title></rect>")
    else:
        for (color, alpha), ks in groups.items():
            mask = np.zeros(R * C, dtype=bool)
            mask[np.asarray(cl["cell"])[ks]] = True
            body.append(_runs(mask, R, C, color, alpha, f"{len(ks)} cells"))
    svg = (f'<svg class="tt-tensor" xmlns="http://www.w3.org/2000/svg" width="{C * px}" height="{R * py}" '
           f'shape-rendering="crispEdges"><g transform="scale({px} {py})">{"".join(body)}</g></svg>')
    return f"<div><b>{_e(info.name)}</b> {_tensor_caption(info, plane, table, cl, placed, lo, hi)}</div>{svg}"


def _runs(mask: np.ndarray, R: int, C: int, color: str, alpha: float, title: str) -> str:
    """Cells of ``mask`` as one path of horizontal runs (a few bytes per run, not one element per cell)."""
    m = np.pad(mask.reshape(R, C).astype(np.int8), ((0, 0), (1, 1)))
    d = np.diff(m, axis=1)
    starts, ends = np.nonzero(d == 1), np.nonzero(d == -1)
    path = "".join(f"M{c} {r}h{e - c}v1h{c - e}z" for r, c, e in zip(starts[0], starts[1], ends[1]))
    if not path:
        return ""
    return f'<path d="{path}" fill="{color}" fill-opacity="{alpha}"><title>{_e(title)}</title></path>'


def _cell_title(plane, name: str, cl: dict, k: int, r: int, c: int) -> str:
    kind = _KIND_COLOR[cl["kinds"][k] or 1][1]
    if plane.fr == 1 and plane.fc == 1:
        if plane.wrap:
            idx = (r * plane.wrap + c,)
        elif plane.col_dim is None:
            idx = ()
        else:
            idx = list(plane.index)
            if plane.row_dim is not None:
                idx[plane.row_dim] = r
            idx[plane.col_dim] = c
        v = (cl.get("value") or [None] * (k + 1))[k]
        return f"{name}[{', '.join(str(i) for i in idx)}]: {kind}" + ("" if v is None else f", value {v}")
    fill = cl["fill"][k] if "fill" in cl else 1.0
    return (f"{name} rows {r * plane.fr}-{(r + 1) * plane.fr - 1}, cols {c * plane.fc}-{(c + 1) * plane.fc - 1}: "
            f"{kind}, {100 * fill:.0f}% of the cell's elements")


def _tensor_caption(info, plane, table, cl, placed, lo, hi) -> str:
    bits = [f"{info.dtype} shape {tuple(info.shape)} strides {tuple(info.strides)}",
            f"{len(table.offsets)} element(s) touched"]
    if plane.wrap:
        bits.append(f"drawn in rows of {plane.wrap}")
    if plane.fr > 1 or plane.fc > 1:
        bits.append(f"each cell {plane.fr}x{plane.fc} elements")
    if cl.get("value") and hi >= lo and any(v is not None for v in cl["value"]):
        bits.append(f"coloured by value from {lo:.4g} (dark) to {hi:.4g} (yellow)")
    else:
        bits.append("blue read, orange written, purple both")
    other = int((~placed).sum())
    if other:
        bits.append(f"{other} touched element(s) lie outside this slice of the view")
    if table.oob_lanes:
        bits.append(f"{table.oob_lanes} active lane(s) fall outside the tensor's storage (out of bounds), "
                    f"e.g. offsets {list(table.oob_examples)}")
    return f'<span class="tt-note">{_e("; ".join(bits))}</span>'


# --------------------------------------------------------------------------------------------------------
# Jupyter integration
# --------------------------------------------------------------------------------------------------------
def plotlyjs_html() -> str:
    """plotly.js from the installed plotly package as an inline script. AMD loaders (require.js in the
    classic notebook) are hidden while it runs, so it defines ``window.Plotly`` as the figures expect."""
    from plotly.offline import get_plotlyjs
    return ('<script type="text/javascript">window.PlotlyConfig={MathJaxConfig:"local"};'
            "window.__tt_define=window.define;window.define=undefined;</script>"
            f'<script type="text/javascript">{get_plotlyjs()}</script>'
            '<script type="text/javascript">window.define=window.__tt_define;</script>')


def _html_for(obj, **kw) -> str:
    if isinstance(obj, str):
        return obj
    if isinstance(obj, Trace):
        return trace_html(obj, **kw)
    if isinstance(obj, Launch):
        return launch_html(obj, **kw)
    if hasattr(obj, "to_dict") and hasattr(obj, "findings"):
        return report_html(obj)
    raise TraceUsageError(f"cannot display {type(obj).__name__}; show() takes a Trace, a Launch, a Report or HTML")


def _needs_plotly(body: str) -> bool:
    return 'class="plotly-graph-div"' in body


class _ShellState:
    """What one IPython shell has been sent already: plotly.js goes into its first output with a chart."""

    def __init__(self):
        self.plotly_sent = False

    def with_plotly(self, body: str) -> str:
        if _needs_plotly(body) and not self.plotly_sent:
            self.plotly_sent = True
            return plotlyjs_html() + body
        return body


def _state(ip) -> _ShellState:
    st = getattr(ip, "_triton_trace_display", None)
    if st is None:
        st = _ShellState()
        ip._triton_trace_display = st
    return st


def standalone_html(obj, title: str = "triton_trace", **kw) -> str:
    """A complete HTML page for a Trace, Launch or Report, plotly.js included: open it anywhere offline."""
    body = _html_for(obj, **kw)
    js = plotlyjs_html() if _needs_plotly(body) else ""
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{_e(title)}</title></head>'
            f"<body>{js}{body}</body></html>")


def show(obj, **kw) -> None:
    """Display a Trace, Launch or Report (or HTML from this module) in the notebook. plotly.js is included
    the first time this shell shows a chart; outside IPython the page goes to ``standalone_html``."""
    from IPython import get_ipython
    from IPython.display import HTML, display
    ip = get_ipython()
    body = _html_for(obj, **kw)
    display(HTML(_state(ip).with_plotly(body) if ip is not None else standalone_html(obj, **kw)))


def iframe(handle_or_url, height: int = 600):
    """The web UI of ``triton_trace.launch(block=False)`` (its handle, or a URL) embedded in the notebook."""
    from IPython.display import HTML
    url = str(getattr(handle_or_url, "url", handle_or_url))
    if not url.startswith(("http://", "https://")):
        raise TraceUsageError(f"iframe() takes a server handle or an http(s) URL; got {url[:80]!r}")
    return HTML(f'<div class="tt-iframe"><iframe src="{_e(url)}" width="100%" height="{int(height)}" '
                f'style="border:1px solid #ddd" loading="lazy"></iframe></div>')


def register_formatters(ip=None) -> bool:
    """Make Trace, Launch and Report display themselves as rich HTML in this IPython shell.

    Returns False outside IPython. Safe to call more than once."""
    if ip is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        ip = get_ipython()
    if ip is None:
        return False
    state = _state(ip)
    fmt = ip.display_formatter.formatters["text/html"]
    fmt.for_type(Trace, lambda obj: state.with_plotly(trace_html(obj)))
    fmt.for_type(Launch, lambda obj: state.with_plotly(launch_html(obj)))
    try:
        from ..analysis import Report
    except ImportError:
        return True
    fmt.for_type(Report, lambda obj: state.with_plotly(report_html(obj)))
    return True


__all__ = ["trace_html", "launch_html", "report_html", "tensor_view_html", "grid_svg", "findings_table",
           "plotlyjs_html", "standalone_html", "show", "iframe", "register_formatters"]
