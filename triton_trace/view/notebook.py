"""Inline display in Jupyter: self-contained HTML for a Trace, a Launch, a Report and a tensor view.

The HTML needs no running server and no internet, so it survives in an exported notebook. The program
grid and the tensor views are inline SVG (svg.py); charts are plotly figures whose plotly.js comes from
the installed plotly package and is embedded once per page: once per IPython shell for rich outputs,
always in ``standalone_html``. Analysis numbers are read from ``Report.to_dict()`` (analysis/report.py).
Every string taken from a trace is escaped, since a trace file may come from someone else.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..errors import TraceUsageError
from ..model import Launch, Trace
from .limits import (HIST_BINS, NOTEBOOK_FINDINGS, NOTEBOOK_GRID_CELLS, NOTEBOOK_LAUNCHES, NOTEBOOK_TENSOR_CELLS,
                     NOTEBOOK_TRACE_CELLS)
from .lookup import LaunchIndex
from .svg import METRICS, esc as _e, fmt as _fmt, grid_svg, label as _label, tensor_views

KEY_METRICS = ("load_bytes", "store_bytes", "atomic_bytes", "masked_share", "oob_lanes", "sector_efficiency",
               "dram_bytes_predicted", "flops", "arithmetic_intensity")
_CSS = ("<style>.tt-root{font-family:system-ui,sans-serif;font-size:13px;color:#222;background:#fff;"
        "padding:4px 2px}.tt-root h3{font-size:15px;margin:10px 0 4px}.tt-root h4{font-size:13px;margin:8px 0 3px}"
        ".tt-root table{border-collapse:collapse;margin:4px 0}.tt-root th,.tt-root td{border:1px solid #ddd;"
        "padding:2px 6px;text-align:left;font-size:12px;vertical-align:top}.tt-root th{background:#f4f4f4}"
        ".tt-launches td{white-space:nowrap}.tt-note{color:#666;font-size:12px}.tt-err{color:#b00020}</style>")


def _root(body: str) -> str:
    return f'<div class="tt-root">{_CSS}{body}</div>'


# --------------------------------------------------------------------------------------------------------
# the analysis report, read through its to_dict() schema
# --------------------------------------------------------------------------------------------------------
def _report_dict(report, trace: Trace, analyze: bool = True) -> tuple:
    """(``Report.to_dict()`` or None, a note to show or None). ``report`` may be a Report or its dict;
    None analyses the trace now when the analysis is installed."""
    if report is not None:
        return (report if isinstance(report, dict) else report.to_dict()), None
    if not analyze:
        return None, None
    try:
        from ..analysis import analyze as run_analysis
    except ImportError:
        return None, "the analysis is not installed: metrics come from the trace alone"
    return run_analysis(trace).to_dict(), None


def _entry(rd: Optional[dict], i: int, launch: Launch) -> tuple:
    """(the report's entry for launch ``i``, its findings); ({}, []) when the report is not about it."""
    entries = (rd or {}).get("launches") or []
    if i >= len(entries) or entries[i].get("kernel") != launch.kernel_name:
        return {}, []
    return entries[i], [f for f in rd.get("findings") or [] if f.get("launch") == i]


def _only(rd: Optional[dict], launch: Launch, index: Optional[int]) -> tuple:
    """(the part of a whole-trace report about ``launch``, renumbered as launch 0; a note). The entry is
    ``index`` when given, else the one launch of the same kernel and grid."""
    if rd is None:
        return None, None
    entries = rd.get("launches") or []
    same = [i for i, e in enumerate(entries) if e.get("kernel") == launch.kernel_name
            and list(e.get("grid") or []) == list(launch.grid)]
    if index is not None:
        same = [index] if index in same else []
    note = None
    if len(same) > 1:
        note = f"the report has {len(same)} launches of {launch.kernel_name} on this grid; showing the first (pass index=)"
    if not same:
        return {"launches": [], "findings": []}, "the report has no entry for this launch"
    i = same[0]
    return {**rd, "launches": [entries[i]], "findings": [{**f, "launch": 0} for f in rd.get("findings") or []
                                                          if f.get("launch") == i]}, note


def report_program_metrics(entry: dict) -> dict:
    """Per-program columns of one launch entry of ``Report.to_dict()`` as arrays over the linear program
    id (x fastest), NaN for programs the report does not list."""
    gx, gy, gz = (int(g) for g in entry.get("grid") or (0, 0, 0))
    progs = entry.get("programs") or {}
    pids = np.asarray(progs.get("pid") or [], dtype=np.int64).reshape(-1, 3)
    ok = np.all((pids >= 0) & (pids < np.array([gx, gy, gz])), axis=1)
    lin = (pids[:, 0] + gx * (pids[:, 1] + gy * pids[:, 2]))[ok]
    out = {}
    for name in METRICS:
        col = progs.get(name)
        if isinstance(col, list) and len(col) == len(pids):
            full = np.full(gx * gy * gz, np.nan)
            full[lin] = np.array([np.nan if v is None else float(v) for v in col], dtype=np.float64)[ok]
            out[name] = full
    return out


def program_metrics(ix: LaunchIndex, entry: dict) -> dict:
    """Grid metrics over the linear program id: from the trace, overridden by the report's columns."""
    local = {"load_bytes": ix.load_bytes, "store_bytes": ix.store_bytes, "masked_share": ix.masked_share,
             "oob_lanes": ix.oob_lanes}
    out = {k: np.where(ix.recorded, v.astype(np.float64), np.nan) for k, v in local.items()}
    if entry:
        out.update(report_program_metrics(entry))
    return out


# --------------------------------------------------------------------------------------------------------
# tables and charts
# --------------------------------------------------------------------------------------------------------
def findings_table(findings: list) -> str:
    if not findings:
        return '<table class="tt-findings"><tr><th>findings</th></tr><tr><td>no findings</td></tr></table>'
    head = "".join(f"<th>{h}</th>" for h in ("kind", "severity", "kernel", "launch", "program", "line", "tensor",
                                                "message"))
    body = []
    for f in findings[:NOTEBOOK_FINDINGS]:
        prog = f.get("program")
        prog = tuple(prog) if isinstance(prog, (list, tuple)) else prog
        cells = (f.get("kind"), f.get("severity"), f.get("kernel"), f.get("launch"), prog, f.get("line"),
                 f.get("tensor"), f.get("message"))
        body.append("<tr>" + "".join(f"<td>{'' if v is None else _e(v)}</td>" for v in cells) + "</tr>")
    more = (f'<div class="tt-note">{len(findings) - NOTEBOOK_FINDINGS} more findings not shown</div>'
            if len(findings) > NOTEBOOK_FINDINGS else "")
    return f'<table class="tt-findings"><tr>{head}</tr>{"".join(body)}</table>{more}'


def _metrics_html(metrics: dict) -> str:
    """The key launch metrics in a small table, every metric in a collapsed one (no JavaScript needed)."""
    if not metrics:
        return ""
    key = {k: metrics[k] for k in KEY_METRICS if k in metrics}
    return (_kv_table(key, "tt-metrics") +
            f"<details><summary class=\"tt-note\">all {len(metrics)} metrics</summary>"
            f"{_kv_table(metrics, 'tt-all-metrics')}</details>")


def _kv_table(d: dict, cls: str, per_row: int = 4) -> str:
    items = [(k, v) for k, v in d.items() if not isinstance(v, (dict, list))]
    rows = ["".join(f"<th>{_e(k)}</th><td>{_e(_fmt(v, str(k)))}</td>" for k, v in items[i:i + per_row])
            for i in range(0, len(items), per_row)]
    return f'<table class="{cls}">{"".join(f"<tr>{r}</tr>" for r in rows)}</table>' if rows else ""


def _figure_html(fig) -> str:
    fig.update_layout(template="none", height=300, margin=dict(l=60, r=20, t=40, b=60),
                      font=dict(family="sans-serif", size=11))
    return fig.to_html(full_html=False, include_plotlyjs=False, config={"displaylogo": False})


def _tensor_bytes(ix: LaunchIndex) -> tuple:
    """(bytes loaded, bytes stored) per tensor argument, active in-bounds lanes only."""
    lc = ix.launch
    nt = len(lc.tensors)
    t = lc.ops["tensor"].astype(np.int64)
    mem = ix.memory & (t >= 0)
    load = np.bincount(t[mem], weights=np.where(ix.read, ix.bytes, 0)[mem], minlength=nt)[:nt]
    store = np.bincount(t[mem], weights=np.where(ix.write, ix.bytes, 0)[mem], minlength=nt)[:nt]
    return load, store


def _launch_chart(ix: LaunchIndex, metrics: dict, metric: str) -> str:
    from plotly.subplots import make_subplots
    import plotly.graph_objects as go
    label = _label(metric)[0]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("bytes per tensor", f"programs by {label.lower()}"))
    names = [_e(t.name) for t in ix.launch.tensors]
    load, store = _tensor_bytes(ix)
    fig.add_trace(go.Bar(name="loaded", x=names, y=load.tolist()), row=1, col=1)
    fig.add_trace(go.Bar(name="stored", x=names, y=store.tolist()), row=1, col=1)
    v = metrics[metric][np.isfinite(metrics[metric])]
    if len(v):
        lo, hi = float(v.min()), float(v.max())
        counts, edges = np.histogram(v, bins=HIST_BINS, range=(lo, hi if hi > lo else lo + 1))
        fig.add_trace(go.Bar(name="programs", x=((edges[:-1] + edges[1:]) / 2).tolist(), y=counts.tolist(),
                             width=np.diff(edges).tolist(), showlegend=False), row=1, col=2)
    return _figure_html(fig)


def _report_chart(rd: dict) -> str:
    import plotly.graph_objects as go
    launches = (rd.get("launches") or [])[:NOTEBOOK_LAUNCHES * 4]
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
def _launch_section(ix: LaunchIndex, i: int, entry: dict, metric: Optional[str], chart: bool,
                    details: bool, max_cells: int = NOTEBOOK_GRID_CELLS) -> str:
    lc = ix.launch
    metrics = program_metrics(ix, entry)
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
    parts.append(_metrics_html(entry.get("metrics") or {}))
    parts.append(grid_svg(ix.grid, metrics, metric, ix.recorded, max_cells))
    if chart:
        parts.append(_launch_chart(ix, metrics, metric))
    return "".join(parts)


def _note(note: Optional[str]) -> str:
    return f'<div class="tt-note">{_e(note)}</div>' if note else ""


def trace_html(trace: Trace, report=None, metric: Optional[str] = None, analyze: bool = True) -> str:
    """The whole trace: findings, a chart of bytes per launch, and each launch's program grid.

    ``report``: a Report (or its to_dict()) of this trace; None analyses it now (``analyze=False``: not)."""
    rd, note = _report_dict(report, trace, analyze)
    n = len(trace.launches)
    parts = [f"<h3>Trace: {n} launch(es) of {_e(', '.join(trace.kernels()) or 'no kernels')}</h3>", _note(note)]
    if rd is not None:
        parts += ["<h4>Findings</h4>", findings_table(rd.get("findings") or []), _report_chart(rd)]
    cells = min(NOTEBOOK_GRID_CELLS, max(256, NOTEBOOK_TRACE_CELLS // max(1, min(n, NOTEBOOK_LAUNCHES))))
    for i, lc in enumerate(trace.launches[:NOTEBOOK_LAUNCHES]):
        entry, _ = _entry(rd, i, lc)
        parts.append(_launch_section(LaunchIndex(lc), i, entry, metric, chart=False, details=False, max_cells=cells))
    if n > NOTEBOOK_LAUNCHES:
        rest = ", ".join(f"[{i}] {lc.kernel_name}" for i, lc in enumerate(trace.launches[NOTEBOOK_LAUNCHES:], NOTEBOOK_LAUNCHES))
        parts.append(f'<div class="tt-note">not drawn: {_e(rest[:2000])}</div>')
    return _root("".join(parts))


def launch_html(launch: Launch, report=None, program=None, metric: Optional[str] = None,
                analyze: bool = True, index: Optional[int] = None) -> str:
    """One launch: arguments, tensors, metrics, program grid, charts, findings, and with ``program`` the
    tensor views of that program. ``report`` may be the report of a whole trace holding this launch, whose
    entry ``index`` is (default: the launch of the same kernel and grid); None analyses the launch now."""
    given, _ = _report_dict(report, Trace(), analyze=False)
    part, match_note = _only(given, launch, index)
    rd, note = _report_dict(part, Trace((launch,)), analyze)
    entry, findings = _entry(rd, 0, launch)
    ix = LaunchIndex(launch)
    parts = [_launch_section(ix, 0, entry, metric, chart=True, details=True), _note(match_note or note)]
    if rd is not None:
        parts += ["<h4>Findings</h4>", findings_table(findings)]
    if program is not None:
        parts.append(tensor_views(ix, program))
    return _root("".join(parts))


def report_html(report, metric: Optional[str] = None) -> str:
    """A report on its own (no trace needed): per-launch metrics, the findings, a chart, and each launch's
    program grid from the report's per-program columns."""
    rd = report if isinstance(report, dict) else report.to_dict()
    launches = rd.get("launches") or []
    shown = launches[:NOTEBOOK_LAUNCHES * 4]
    keys = [k for k in KEY_METRICS if any(k in (lr.get("metrics") or {}) for lr in shown)]
    head = "".join(f"<th>{_e(k)}</th>" for k in ["launch", "kernel", "grid"] + keys)
    rows = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in [i, lr.get("kernel"), tuple(lr.get("grid") or ())]) +
                   "".join(f"<td>{_e(_fmt((lr.get('metrics') or {}).get(k), k))}</td>" for k in keys) + "</tr>"
                   for i, lr in enumerate(shown))
    findings = rd.get("findings") or []
    parts = [f"<h3>Report: {len(launches)} launch(es), {len(findings)} finding(s)</h3>",
             f'<table class="tt-launches"><tr>{head}</tr>{rows}</table>']
    if len(launches) > len(shown):
        parts.append(f'<div class="tt-note">{len(launches) - len(shown)} more launches not listed</div>')
    parts += ["<h4>Findings</h4>", findings_table(findings)]
    if rd.get("suppressed"):
        parts.append(f'<div class="tt-note">{_e(rd["suppressed"])} more findings suppressed by max_findings</div>')
    parts.append(_report_chart(rd))
    cells = min(NOTEBOOK_GRID_CELLS, max(256, NOTEBOOK_TRACE_CELLS // max(1, min(len(launches), NOTEBOOK_LAUNCHES))))
    for i, lr in enumerate(launches[:NOTEBOOK_LAUNCHES]):
        metrics = report_program_metrics(lr)
        if not metrics:
            continue
        pick = metric if metric in metrics else "load_bytes" if "load_bytes" in metrics else next(iter(metrics))
        cut = " (programs cut at max_programs)" if (lr.get("programs") or {}).get("truncated") else ""
        parts.append(f"<h3>[{i}] {_e(lr.get('kernel', ''))} <span class=\"tt-note\">grid "
                     f"{_e(tuple(lr.get('grid') or ()))}{cut}</span></h3>")
        parts.append(grid_svg(tuple(lr["grid"]), metrics, pick, max_cells=cells))
    return _root("".join(parts))


def tensor_view_html(launch: Launch, program=0, op=None, max_cells: int = NOTEBOOK_TENSOR_CELLS) -> str:
    """The tensors one program touched, each as a 2-D heatmap of its view with the touched elements
    highlighted (coloured by value where values were recorded). ``op``: an Access of that program or its
    ``seq``, to show only that op; None shows every memory op of the program, one view per tensor."""
    return _root(tensor_views(LaunchIndex(launch), program, op, max_cells))


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
        return report_html(obj, **kw)
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


def repr_html(obj) -> str:
    """The HTML a front end shows for ``obj`` (its ``_repr_html_``). In an IPython shell plotly.js comes
    once per shell, as with show(); elsewhere (marimo, a plain exported page) every output carries it, so
    each works alone."""
    body = _html_for(obj)
    try:
        from IPython import get_ipython
        ip = get_ipython()
    except ImportError:
        ip = None
    if ip is not None:
        return _state(ip).with_plotly(body)
    return (plotlyjs_html() + body) if _needs_plotly(body) else body


def show(obj, **kw) -> None:
    """Display a Trace, Launch or Report (or HTML from this module) in the notebook. plotly.js is included
    the first time this shell shows a chart (a notebook page keeps it for every later output)."""
    from IPython import get_ipython
    from IPython.display import HTML, display
    ip = get_ipython()
    if ip is None:
        raise TraceUsageError("show() displays in Jupyter or IPython; in a script use triton_trace.launch() for "
                              "the web UI, or write triton_trace.view.notebook.standalone_html(obj) to a file")
    display(HTML(_state(ip).with_plotly(_html_for(obj, **kw))))


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


__all__ = ["repr_html", "trace_html", "launch_html", "report_html", "tensor_view_html", "grid_svg", "findings_table",
           "plotlyjs_html", "standalone_html", "show", "iframe", "register_formatters"]
