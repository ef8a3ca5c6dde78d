"""Notebook display (view/notebook.py), the progress bars (view/progress.py) and the example notebook.

The HTML functions are checked on real traced kernels (tests/kernels.py) and on small synthetic
launches; the example notebook runs headless in a real Jupyter kernel (nbclient + ipykernel).
"""
from __future__ import annotations

import dataclasses
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import kernels
import triton_trace
from synthetic import load_launch
from triton_trace.model import Launch, Trace
from triton_trace.view import notebook as nb
from triton_trace.view import progress

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOK = os.path.join(ROOT, "examples", "trace_in_notebook.ipynb")
PLOTLYJS_MARK = "window.__tt_define=window.define"
PIDS = re.compile(r'class="tt-prog" data-pid="(\d+),(\d+),(\d+)"')


def traced_transpose(M=40, N=24, transposed_input=True):
    """A 2-D launch over a non-contiguous input: grid (cdiv(M, 8), cdiv(N, 16))."""
    src = torch.randn(N, M).T if transposed_input else torch.randn(M, N)
    kernels.transpose(src, kernel=triton_trace.trace(kernels.make_transpose()), block_m=8, block_n=16)
    return triton_trace.current_trace(), src


def synthetic_launch(grid=(1, 1, 1), shape=(16,), strides=None, ops=(), name="k", tensor="x") -> Launch:
    """A launch with one tensor and the given load ops: a list of (program, offsets, mask)."""
    return load_launch(grid, shape, strides, ops, name=name, tensor_name=tensor)


# --------------------------------------------------------------------------------------------------------
# the program grid
# --------------------------------------------------------------------------------------------------------
def test_trace_html_draws_one_cell_per_program():
    trace, _ = traced_transpose()
    html = nb.trace_html(trace)
    pids = {tuple(int(v) for v in m) for m in PIDS.findall(html)}
    assert pids == {(x, y, 0) for x in range(5) for y in range(2)}
    assert html.count('class="tt-prog"') == 10
    assert "<svg" in html and "transpose_kernel" in html
    assert PLOTLYJS_MARK not in html             # plotly.js is added once per page, not per output


def test_grid_tooltips_carry_the_numbers():
    trace, _ = traced_transpose()
    html = nb.trace_html(trace)
    # program (4, 1, 0) is the corner tile: 8 x 8 of its 8 x 16 lanes survive the masks, 4 bytes each
    tip = re.search(r'data-pid="4,1,0"[^>]*><title>([^<]*)</title>', html).group(1)
    assert "program (4, 1, 0)" in tip and "Bytes loaded: 256 B" in tip


def test_grid_of_a_long_1d_launch_is_wrapped_and_bounded():
    n = 20000
    lc = synthetic_launch(grid=(n, 1, 1), shape=(n,), ops=[((p, 0, 0), [p], None) for p in range(0, n, 7)])
    html = nb.trace_html(Trace((lc,)), report={"launches": [], "findings": []})
    cells = html.count("<rect ")
    assert cells <= nb.NOTEBOOK_GRID_CELLS + 64
    assert "drawn in rows of" in html and "block of" in html
    assert len(html) < 2_000_000


def test_grid_with_z_slices():
    ops = [((x, y, z), [x + 2 * y + 6 * z], None) for x in range(2) for y in range(3) for z in range(2)]
    lc = synthetic_launch(grid=(2, 3, 2), shape=(12,), ops=ops)
    html = nb.launch_html(lc, report={"launches": [], "findings": []})
    assert len(PIDS.findall(html)) == 12
    assert "z = 0" in html and "z = 1" in html


def test_unrecorded_programs_are_marked():
    lc = synthetic_launch(grid=(4, 1, 1), shape=(4,), ops=[((0, 0, 0), [0], None), ((2, 0, 0), [2], None)])
    html = nb.trace_html(Trace((lc,)))
    assert html.count("not recorded</title>") == 2


# --------------------------------------------------------------------------------------------------------
# launch, report and findings
# --------------------------------------------------------------------------------------------------------
REPORT = {
    "launches": [{"kernel": "transpose_kernel", "grid": [5, 2, 1],
                  "metrics": {"load_bytes": 3840, "store_bytes": 3840, "sector_efficiency": 0.5,
                              "dram_bytes_predicted": 4096}}],
    "findings": [{"kind": "out_of_bounds", "kernel": "transpose_kernel", "launch": 0, "program": [1, 0, 0],
                  "line": 12, "tensor": "x_ptr", "message": "3 lanes read past the end"}],
}


def test_launch_html_has_tables_grid_chart_and_findings():
    trace, _ = traced_transpose()
    html = nb.launch_html(trace.launches[0], report=REPORT)
    for part in ('class="tt-tensors"', 'class="tt-metrics"', 'class="tt-grid"', 'class="plotly-graph-div"',
                 'class="tt-findings"', "3 lanes read past the end", "50.0%"):
        assert part in html, part
    assert html.count('class="tt-prog"') == 10


def test_launch_html_with_program_adds_its_tensor_views():
    trace, _ = traced_transpose()
    html = nb.launch_html(trace.launches[0], report=REPORT, program=(1, 1))
    assert html.count('class="tt-tensor"') == 2


def test_launch_html_picks_its_entry_of_a_whole_trace_report():
    trace, _ = traced_transpose()
    lc = trace.launches[0]
    other = {"kernel": "other_kernel", "grid": [1, 1, 1], "metrics": {"load_bytes": 1}}
    second = dict(REPORT["launches"][0], metrics={"load_bytes": 12345})
    report = {"launches": [other, REPORT["launches"][0], second],
              "findings": [dict(REPORT["findings"][0], launch=2, message="about the second")]}
    html = nb.launch_html(lc, report=report)
    assert "3.8 KiB" in html and "about the second" not in html and "pass index=" in html
    html = nb.launch_html(lc, report=report, index=2)
    assert "12 KiB" in html or "12.1 KiB" in html
    assert "about the second" in html and "pass index=" not in html
    assert "no entry for this launch" in nb.launch_html(lc, report=report, index=0)


def test_report_html_from_a_report_dict():
    html = nb.report_html(REPORT)
    assert 'class="tt-launches"' in html and 'class="tt-findings"' in html
    assert "4.0 KiB" in html                      # dram_bytes_predicted, formatted
    assert 'class="plotly-graph-div"' in html


def test_report_html_draws_grids_from_the_report_programs():
    entry = dict(REPORT["launches"][0], programs={
        "count": 3, "truncated": False, "pid": [[0, 0, 0], [1, 0, 0], [4, 1, 0]],
        "load_bytes": [512, 512, 256], "dram_bytes": [600, 100, None]})
    html = nb.report_html({**REPORT, "launches": [entry]})
    assert html.count('class="tt-prog"') == 10 and html.count("not recorded</title>") == 7
    tip = re.search(r'data-pid="4,1,0"[^>]*><title>([^<]*)</title>', html).group(1)
    assert "256 B" in tip and "DRAM bytes (L2 model): -" in tip


def test_findings_table_is_bounded():
    many = [dict(REPORT["findings"][0], message=f"finding {i}") for i in range(nb.NOTEBOOK_FINDINGS + 50)]
    html = nb.findings_table(many)
    assert html.count("<tr>") == nb.NOTEBOOK_FINDINGS + 1
    assert "50 more findings not shown" in html
    assert "no findings" in nb.findings_table([])


def test_report_html_with_the_real_analysis():
    analysis = pytest.importorskip("triton_trace.analysis")
    if not hasattr(analysis, "analyze"):
        pytest.skip("the analysis is not built yet")
    trace, _ = traced_transpose()
    report = triton_trace.analyze(trace)
    html = nb.report_html(report)
    assert 'class="tt-findings"' in html and "transpose_kernel" in html
    html = nb.trace_html(trace, report=report)
    assert html.count('class="tt-prog"') == 10 and 'class="plotly-graph-div"' in html


# --------------------------------------------------------------------------------------------------------
# escaping: a trace file may come from someone else
# --------------------------------------------------------------------------------------------------------
EVIL = '<script>alert("x")</script>'
EVIL_IMG = '<img src=x onerror=alert(1)>'


def test_every_trace_string_is_escaped():
    trace, _ = traced_transpose()
    lc = trace.launches[0]
    evil = dataclasses.replace(
        lc, kernel_name=EVIL, source=f"# {EVIL}\n" + lc.source, error=EVIL, completed=False,
        args={EVIL: EVIL}, config={"kwargs": {"BLOCK": EVIL}},
        tensors=tuple(dataclasses.replace(t, name=f"{EVIL_IMG}{i}", dtype=EVIL) for i, t in enumerate(lc.tensors)))
    report = {"launches": [{"kernel": EVIL, "grid": list(lc.grid), "metrics": {EVIL: 1}}],
              "findings": [{"kind": EVIL, "kernel": EVIL, "launch": 0, "program": [0, 0, 0], "line": 1,
                            "tensor": EVIL_IMG, "message": EVIL}]}
    pages = [nb.trace_html(Trace((evil,)), report=report), nb.launch_html(evil, report=report, program=(0, 0)),
             nb.report_html(report), nb.tensor_view_html(evil, program=(0, 0)),
             nb.standalone_html(evil, report=report)]
    for html in pages:
        assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in pages[0]
    assert "&lt;img src=x onerror=alert(1)&gt;0" in pages[3]


def test_iframe_escapes_and_checks_the_url():
    class Handle:
        url = 'http://127.0.0.1:5001/?token=a"b'
    html = nb.iframe(Handle(), height=400).data
    assert 'src="http://127.0.0.1:5001/?token=a&quot;b"' in html and 'height="400"' in html
    with pytest.raises(triton_trace.TraceUsageError):
        nb.iframe("javascript:alert(1)")
    assert triton_trace.iframe is nb.iframe and "iframe" in triton_trace.__all__     # public API


# --------------------------------------------------------------------------------------------------------
# tensor view
# --------------------------------------------------------------------------------------------------------
CELL = re.compile(r"<title>(\w+)\[(\d+), (\d+)\]: (read|written|read and written), value (\S+)</title>")


def test_tensor_view_maps_storage_offsets_through_the_strides():
    trace, src = traced_transpose(transposed_input=True)     # x is a transposed, non-contiguous view
    lc = trace.launches[0]
    load = lc.accesses(program=(2, 1), kind="load")[0]
    html = nb.tensor_view_html(lc, program=(2, 1), op=load)
    cells = CELL.findall(html)
    assert len(cells) == 8 * 8                                 # rows 16..23, cols 16..23 (N = 24)
    for name, i, j, kind, value in cells:
        i, j = int(i), int(j)
        assert name == "x_ptr" and kind == "read"
        assert 16 <= i < 24 and 16 <= j < 24
        assert float(value) == pytest.approx(float(src[i, j]), rel=1e-5)


def test_tensor_view_of_a_whole_program_draws_each_tensor():
    trace, _ = traced_transpose()
    lc = trace.launches[0]
    html = nb.tensor_view_html(lc, program=(0, 0))
    assert html.count('class="tt-tensor"') == 2
    kinds = {kind for _, _, _, kind, _ in CELL.findall(html)}
    assert kinds == {"read", "written"}


def test_tensor_view_is_downsampled_and_bounded():
    shape = (1000, 1000)
    lanes = np.arange(0, 1_000_000, 3)
    lc = synthetic_launch(shape=shape, ops=[((0, 0, 0), lanes, None)])
    html = nb.tensor_view_html(lc, program=0)
    w, h = (int(v) for v in re.search(r'class="tt-tensor"[^>]*width="(\d+)" height="(\d+)"', html).groups())
    assert "each cell 8x8 elements" in html
    assert len(html) < 600_000
    assert w <= 640 and h <= 640


def test_tensor_view_of_a_broadcast_view():
    # stride 0: every row of the view is the same 8 storage elements, so each touched element shows 4 times
    lc = synthetic_launch(shape=(4, 8), strides=(0, 1), ops=[((0, 0, 0), np.arange(8), None)])
    html = nb.tensor_view_html(lc, program=0)
    titles = re.findall(r"<title>x\[(\d+), (\d+)\]: read</title>", html)
    assert sorted((int(r), int(c)) for r, c in titles) == [(r, c) for r in range(4) for c in range(8)]


def test_tensor_view_of_a_3d_tensor_shows_the_touched_slice():
    lc = synthetic_launch(shape=(3, 4, 8), ops=[((0, 0, 0), np.arange(64, 72), None)])
    html = nb.tensor_view_html(lc, program=0)
    titles = re.findall(r"<title>x\[(\d+), (\d+), (\d+)\]: read</title>", html)
    assert sorted(tuple(int(v) for v in t) for t in titles) == [(2, 0, c) for c in range(8)]


def test_tensor_view_reports_out_of_bounds_lanes():
    lc = synthetic_launch(shape=(8,), ops=[((0, 0, 0), [6, 7, 8, 9], None)])
    html = nb.tensor_view_html(lc, program=0)
    assert "2 active lane(s) fall outside the tensor" in html
    assert len(CELL.findall(html)) == 0 and html.count("x[") == 2


def test_tensor_view_bad_arguments():
    trace, _ = traced_transpose()
    lc = trace.launches[0]
    with pytest.raises(triton_trace.TraceUsageError, match="not in the grid"):
        nb.tensor_view_html(lc, program=(9, 0))
    with pytest.raises(triton_trace.TraceUsageError, match="no memory op"):
        nb.tensor_view_html(lc, program=(0, 0), op=99)


# --------------------------------------------------------------------------------------------------------
# IPython integration
# --------------------------------------------------------------------------------------------------------
@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    yield ip
    InteractiveShell.clear_instance()


def test_formatters_embed_plotlyjs_once_per_shell(shell):
    trace, _ = traced_transpose()
    assert nb.register_formatters(shell)
    first, _ = shell.display_formatter.format(trace.launches[0])
    second, _ = shell.display_formatter.format(trace.launches[0])
    assert first["text/html"].count(PLOTLYJS_MARK) == 1
    assert PLOTLYJS_MARK not in second["text/html"] and 'class="plotly-graph-div"' in second["text/html"]
    data, _ = shell.display_formatter.format(trace)
    assert data["text/html"].count('class="tt-prog"') == 10


def test_register_formatters_outside_ipython():
    assert nb.register_formatters() is False


def test_show_includes_plotlyjs_the_first_time_only(shell, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj.data))
    trace, _ = traced_transpose()
    nb.show(trace.launches[0], report=REPORT)
    nb.show(trace.launches[0], report=REPORT)
    nb.show(nb.tensor_view_html(trace.launches[0], program=0))
    assert shown[0].count(PLOTLYJS_MARK) == 1 and PLOTLYJS_MARK not in shown[1] + shown[2]
    assert 'class="tt-tensor"' in shown[2]


def test_show_outside_ipython_says_what_to_use():
    trace, _ = traced_transpose()
    with pytest.raises(triton_trace.TraceUsageError, match="standalone_html"):
        nb.show(trace)


def test_standalone_html_is_a_complete_offline_page():
    trace, _ = traced_transpose()
    page = nb.standalone_html(trace.launches[0], report=REPORT)
    assert page.startswith("<!DOCTYPE html>") and page.count(PLOTLYJS_MARK) == 1
    assert "cdn." not in page.split(PLOTLYJS_MARK)[0]


# --------------------------------------------------------------------------------------------------------
# progress
# --------------------------------------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_terminal_bar_draws_throttled_and_ends_with_a_newline():
    out, clock = io.StringIO(), Clock()
    bar = progress.TerminalProgress(stream=out, min_programs=10, interval=0.5, clock=clock)
    for done in range(1, 21):
        clock.t = done * 0.1
        bar(done, 20, "k")
    text = out.getvalue()
    frames = text.split("\r")[1:]
    assert 2 <= len(frames) <= 6                   # 2 s of programs, one frame per 0.5 s, plus the last
    assert frames[-1].endswith("\n") and frames[-1].rstrip() == "k: [" + "#" * 30 + "] 20/20 programs 1.9s"
    assert len(frames[-1]) - 1 == len(frames[-2])  # the final, shorter frame blanks the hint of the one before
    assert "Ctrl-C" in frames[0]


def test_terminal_bar_skips_short_launches_but_not_slow_ones():
    out, clock = io.StringIO(), Clock()
    bar = progress.TerminalProgress(stream=out, min_programs=100, min_seconds=1.0, clock=clock)
    for done in range(1, 6):
        bar(done, 5, "quick")
    assert out.getvalue() == ""
    for done in range(1, 6):                        # a new launch, each program taking 0.5 s
        clock.t += 0.5
        bar(done, 5, "slow")
    assert "slow: [" in out.getvalue() and out.getvalue().rstrip().endswith("5/5 programs 2.0s")


def test_progress_callback_runs_during_a_trace(capsys):
    out = io.StringIO()
    triton_trace.set_progress(progress.TerminalProgress(stream=out, min_programs=1, interval=0.0))
    try:
        kernels.add(torch.randn(500), torch.randn(500), kernel=triton_trace.trace(batch=False)(kernels.make_add()), block=64)
    finally:
        triton_trace.set_progress(None)
    text = out.getvalue()
    assert "add_kernel: [" in text and "] 8/8 programs" in text and text.endswith("\n")
    assert text.count("\r") == 8                   # interval=0: one frame per program


def test_keyboard_interrupt_from_the_callback_keeps_completed_programs():
    def stop_after_three(done, total, kernel):
        if done == 3:
            raise KeyboardInterrupt

    triton_trace.set_progress(stop_after_three)
    x, y = torch.randn(640), torch.randn(640)
    try:
        with pytest.raises(KeyboardInterrupt):
            kernels.add(x, y, kernel=triton_trace.trace(batch=False)(kernels.make_add()), block=64)
    finally:
        triton_trace.set_progress(None)
    (lc,) = triton_trace.current_trace().launches
    assert not lc.completed and "interrupted after 3 of 10" in lc.error
    assert lc.recorded_programs == 3
    assert sorted({a.program for a in lc.accesses()}) == [(0, 0, 0), (1, 0, 0), (2, 0, 0)]
    assert "tt-prog" in nb.trace_html(triton_trace.current_trace())   # an interrupted trace still displays


def test_enable_progress_chooses_a_bar():
    try:
        assert progress.enable_progress("auto") is None            # pytest's stderr is not a terminal
        assert isinstance(progress.enable_progress("terminal", stream=io.StringIO()), progress.TerminalProgress)
        assert isinstance(progress.enable_progress("notebook"), progress.NotebookProgress)
        assert progress.enable_progress(None) is None
        with pytest.raises(triton_trace.TraceUsageError):
            progress.enable_progress("sometimes")
    finally:
        triton_trace.set_progress(None)


class FakeHandle:
    def __init__(self, first):
        self.shown = [first]

    def update(self, obj):
        self.shown.append(obj.data)


def test_notebook_bar_updates_one_display_per_launch(monkeypatch):
    handles = []

    def display(obj, display_id=False):
        assert display_id
        handles.append(FakeHandle(obj.data))
        return handles[-1]

    monkeypatch.setattr("IPython.display.display", display)
    bar = progress.NotebookProgress(min_programs=1, interval=0.0, clock=Clock())
    for done in range(1, 6):
        bar(done, 5, "k")
    assert len(handles) == 1 and len(handles[0].shown) == 5
    assert '<progress value="5" max="5"' in handles[0].shown[-1] and "(done)" in handles[0].shown[-1]
    bar(1, 4, "k2")
    bar(2, 4, "k2")                                 # interrupted here: the next launch starts over
    bar(1, 4, "k2")
    assert len(handles) == 3 and "(stopped)" in handles[1].shown[-1] and "2/4 programs" in handles[1].shown[-1]


def test_notebook_bar_html_is_escaped():
    html = progress.NotebookProgress.html(3, 10, EVIL, 1.25)
    assert '<progress value="3" max="10"' in html and "<script>alert" not in html


# --------------------------------------------------------------------------------------------------------
# the example notebook, run headless in a real Jupyter kernel
# --------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_example_notebook_runs():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    book = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": ROOT}}).execute()
    html = []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"cell failed: {cell.source[:80]!r}: {errors[0].ename}: {errors[0].evalue}"
        html += [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
    everything = "".join(html)
    grids = [h for h in html if 'class="tt-grid"' in h]
    assert grids and grids[0].count('class="tt-prog"') == 35          # the transpose grid is 7 x 5
    assert any('class="tt-tensor"' in h for h in html)
    assert 'class="tt-findings"' in everything and "out_of_bounds" in everything.lower().replace("-", "_")
    assert 'class="plotly-graph-div"' in everything
    assert everything.count(PLOTLYJS_MARK) == 1                        # plotly.js once per notebook
    bars = [h for h in html if 'class="tt-progress"' in h]
    assert bars and '<progress value="256" max="256"' in bars[-1]       # updated in place to the end


def test_repr_html_outside_ipython():
    """marimo, VS Code, Quarto and nbconvert read _repr_html_: Trace, Launch and Report provide it,
    self-contained (plotly.js inside) when no IPython shell shares one copy between outputs."""
    code = ("import sys, torch, triton_trace\n"
            "sys.path.insert(0, 'tests')\n"
            "import kernels as K\n"
            "K.add(torch.randn(300), torch.randn(300), kernel=triton_trace.trace(K.make_add()), block=64)\n"
            "t = triton_trace.current_trace()\n"
            "assert 'IPython' not in sys.modules or sys.modules['IPython'].get_ipython() is None\n"
            "for obj in (t, t.launches[0], triton_trace.analyze(t)):\n"
            "    h = obj._repr_html_()\n"
            "    print(type(obj).__name__, 'tt-root' in h, 'add_kernel' in h, h.count('window.__tt_define=window.define'))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[:3] == ["Trace True True 1", "Launch True True 1", "Report True True 1"], r.stdout
