"""Inline display in Jupyter: the browser's viewer in a notebook output (embed.py), for a Trace or a Launch.

An output works without a server and without the internet, so it survives in an exported notebook. What a
page needs once, the frontend bundle and plotly.js (from the installed plotly package, 4.8 MB), goes into
the first triton_trace output of each IPython shell; ``standalone_html`` pages and displays outside IPython
(marimo, a plain exported page) carry them in every output, so each works alone. A Report on its own has
no trace to view: it shows as tables. Every string taken from a trace is escaped.
"""
from __future__ import annotations

import html as _html
from typing import Optional

from ..analysis.units import metric
from ..errors import TraceUsageError
from ..model import Launch, Trace
from . import answers as A
from .embed import assets, viewer_html
from .limits import EMBED_BYTES, REPORT_ROWS
from .lookup import TraceIndex
from .report_view import METRICS


def _e(v) -> str:
    return _html.escape(str(v), quote=True)


def _index(trace: Trace, report) -> TraceIndex:
    """The views' index over ``trace``; ``report``, a Report of this very trace, saves analysing it again."""
    if report is not None and not (hasattr(report, "launches") and len(report.launches) == len(trace.launches)):
        raise TraceUsageError("report= must be the Report of the trace shown (triton_trace.analyze(trace)); "
                              "leave it out to analyse the trace here")
    return TraceIndex(trace, analyze=(lambda _t: report) if report is not None else A.analyzer())


def _pid(launch: Launch, program) -> tuple:
    """``program`` as (x, y, z): a pid of 1 to 3 coordinates, or an int for (x, 0, 0)."""
    try:
        pid = tuple(int(v) for v in ((program,) if isinstance(program, int) else program))
    except (TypeError, ValueError):
        raise TraceUsageError(f"program= is a program id (x, y, z) or an int; got {program!r}") from None
    pid += (0,) * (3 - len(pid))
    grid = tuple(launch.grid)
    if len(pid) != 3 or not all(0 <= v < n for v, n in zip(pid, grid)):
        raise TraceUsageError(f"program {program!r} is outside the grid {grid} of {launch.kernel_name}")
    return pid


def _seq(launch: Launch, pid: tuple, op) -> Optional[int]:
    """The op's seq in its program (the viewer's op number); ``op`` is that seq or an Access."""
    if op is None:
        return None
    seq = int(getattr(op, "seq", op))
    count = len(launch.rows(pid, memory_only=False))
    if not 0 <= seq < count:
        raise TraceUsageError(f"program {pid} of {launch.kernel_name} has {count} ops; there is no op {seq}")
    return seq


def trace_html(trace: Trace, report=None, launch: Optional[int] = None, program=None, op=None,
               budget: int = EMBED_BYTES, analyze: bool = True) -> str:
    """The viewer over a whole trace, opening at its list of launches (or at ``launch`` / ``program`` / ``op``).
    ``budget``: bytes of payloads the output carries (see embed.py); ``analyze=False``: no findings."""
    ti = _index(trace, report) if analyze else TraceIndex(trace)
    if launch is None and (program is not None or op is not None):
        launch = 0
    if launch is None:
        return viewer_html(ti, {"view": "list"}, budget)
    if not 0 <= launch < len(trace.launches):
        raise TraceUsageError(f"launch={launch}: the trace has {len(trace.launches)} launch(es)")
    lc = trace.launches[launch]
    pid = _pid(lc, program) if program is not None else None
    start = {"view": "launch", "li": launch, "pid": list(pid) if pid else None,
             "op": _seq(lc, pid, op) if pid else None}
    return viewer_html(ti, start, budget)


def launch_html(launch: Launch, report=None, program=None, op=None, budget: int = EMBED_BYTES,
                analyze: bool = True) -> str:
    """The viewer over one launch, opened at it (and at ``program``, a pid or linear id, and ``op``)."""
    return trace_html(Trace((launch,)), report, 0, program, op, budget, analyze)


def tensor_view_html(launch: Launch, program=0, op=None, budget: int = EMBED_BYTES) -> str:
    """The viewer opened at one program (and op: an Access of that program or its seq), whose tensor view
    shows what it touched."""
    return launch_html(launch, program=program, op=op, budget=budget)


def report_html(report) -> str:
    """A Report (or its ``to_dict()``) on its own: launch metrics and findings as tables."""
    rd = report if isinstance(report, dict) else report.to_dict()
    launches, findings = rd.get("launches") or [], rd.get("findings") or []
    keys = [k for k in METRICS if any(k in (lr.get("metrics") or {}) for lr in launches[:REPORT_ROWS])]
    head = "".join(f"<th>{_e(k)}</th>" for k in ["launch", "kernel", "grid"] + keys)
    rows = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in (i, lr.get("kernel"), tuple(lr.get("grid") or ()))) +
                   "".join(f"<td>{_e(metric(k, (lr.get('metrics') or {}).get(k)))}</td>" for k in keys) + "</tr>"
                   for i, lr in enumerate(launches[:REPORT_ROWS]))
    cols = ("kind", "severity", "kernel", "launch", "program", "line", "tensor", "message")
    frows = "".join("<tr>" + "".join(f"<td>{_e(_cell(f.get(c)))}</td>" for c in cols) + "</tr>"
                    for f in findings[:REPORT_ROWS])
    more = [f"{len(launches) - REPORT_ROWS} more launches" if len(launches) > REPORT_ROWS else "",
            f"{len(findings) - REPORT_ROWS} more findings" if len(findings) > REPORT_ROWS else "",
            f"{rd['suppressed']} findings suppressed by max_findings" if rd.get("suppressed") else ""]
    note = "; ".join(m for m in more if m)
    return (f'<div class="tt-report"><h3>Report: {len(launches)} launch(es), {len(findings)} finding(s)</h3>'
            f'<table class="tt-launches"><tr>{head}</tr>{rows}</table>'
            f'<table class="tt-findings"><tr>{"".join(f"<th>{c}</th>" for c in cols)}</tr>'
            f'{frows or "<tr><td colspan=8>no findings</td></tr>"}</table>'
            f'{f"<p>not shown: {_e(note)}</p>" if note else ""}'
            "<p>The program grid, source, tensors and charts need the trace: show(trace) or triton_trace.launch().</p></div>")


def _cell(v) -> str:
    return "" if v is None else str(tuple(v) if isinstance(v, list) else v)


# --------------------------------------------------------------------------------------------------------
# Jupyter integration
# --------------------------------------------------------------------------------------------------------
def plotlyjs_html() -> str:
    """plotly.js from the installed plotly package as an inline script. AMD loaders (require.js in the
    classic notebook) are hidden while it runs, so it defines ``window.Plotly`` as the charts expect."""
    from plotly.offline import get_plotlyjs
    return ('<script type="text/javascript">window.PlotlyConfig={MathJaxConfig:"local"};'
            "window.__tt_define=window.define;window.define=undefined;</script>"
            f'<script type="text/javascript">{get_plotlyjs()}</script>'
            '<script type="text/javascript">window.define=window.__tt_define;</script>')


def page_assets() -> str:
    """Everything an embedded viewer needs once per page: plotly.js, then the frontend bundle."""
    return plotlyjs_html() + assets()


def _html_for(obj, **kw) -> tuple:
    """(HTML, whether it holds a viewer that needs the page assets)."""
    if isinstance(obj, str):
        return obj, "tt-embedded" in obj
    if isinstance(obj, Trace):
        return trace_html(obj, **kw), True
    if isinstance(obj, Launch):
        return launch_html(obj, **kw), True
    if hasattr(obj, "to_dict") and hasattr(obj, "findings"):
        return report_html(obj), False
    raise TraceUsageError(f"cannot display {type(obj).__name__}; show() takes a Trace, a Launch, a Report or HTML")


class _ShellState:
    """What one IPython shell's page has been sent: the assets go into its first output with a viewer."""

    def __init__(self):
        self.sent = False

    def with_assets(self, body: str, needs: bool) -> str:
        if needs and not self.sent:
            self.sent = True
            return page_assets() + body
        return body


def _state(ip) -> _ShellState:
    st = getattr(ip, "_triton_trace_display", None)
    if st is None:
        st = _ShellState()
        ip._triton_trace_display = st
    return st


def standalone_html(obj, title: str = "triton_trace", **kw) -> str:
    """A complete HTML page for a Trace, Launch or Report, every asset included: open it anywhere offline."""
    body, needs = _html_for(obj, **kw)
    return (f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{_e(title)}</title></head>'
            f'<body style="margin:0">{page_assets() if needs else ""}{body}</body></html>')


def repr_html(obj) -> str:
    """The HTML a front end shows for ``obj`` (its ``_repr_html_``): in an IPython shell the assets come
    once per shell, as with show(); elsewhere every output carries them."""
    body, needs = _html_for(obj)
    try:
        from IPython import get_ipython
        ip = get_ipython()
    except ImportError:
        ip = None
    if ip is not None:
        return _state(ip).with_assets(body, needs)
    return (page_assets() + body) if needs else body


def show(obj, **kw) -> None:
    """Display a Trace, Launch or Report in the notebook. Keywords: see trace_html / launch_html (launch=,
    program=, op=, budget=, report=)."""
    from IPython import get_ipython
    from IPython.display import HTML, display
    ip = get_ipython()
    if ip is None:
        raise TraceUsageError("show() displays in Jupyter or IPython; in a script use triton_trace.launch() for "
                              "the web UI, or write triton_trace.view.notebook.standalone_html(obj) to a file")
    display(HTML(_state(ip).with_assets(*_html_for(obj, **kw))))


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
    fmt.for_type(Trace, lambda obj: state.with_assets(trace_html(obj), True))
    fmt.for_type(Launch, lambda obj: state.with_assets(launch_html(obj), True))
    try:
        from ..analysis import Report
    except ImportError:
        return True
    fmt.for_type(Report, lambda obj: report_html(obj))
    return True


__all__ = ["repr_html", "trace_html", "launch_html", "report_html", "tensor_view_html", "plotlyjs_html",
           "page_assets", "standalone_html", "show", "iframe", "register_formatters"]
