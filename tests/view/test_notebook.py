"""Notebook display (view/notebook.py, embed.py, bundle.py) and the progress bars (view/progress.py).

What an output carries is checked here on real traced kernels (tests/kernels.py) and small synthetic
launches: the payloads are the web app's own answers, by the paths the frontend asks for. The views
themselves run in Chromium in test_notebook_browser.py, with the example notebook executed in a real kernel.
"""
from __future__ import annotations

import base64
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.model import Launch, Trace
from triton_trace.view import notebook as nb
from triton_trace.view import progress
from helpers.paths import ROOT
from helpers.synthetic import load_launch
import kernels

NOTEBOOK = os.path.join(ROOT, "examples", "trace_in_notebook.ipynb")
PLOTLYJS_MARK = "window.__tt_define=window.define"


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("compile-cache")


@pytest.fixture(autouse=True)
def _compile_cache(compile_cache, monkeypatch):
    """An output carries the Compiled panel (a compile on the CPU): compiles go to this module's own cache."""
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(compile_cache))


def traced_transpose(M=40, N=24, transposed_input=True):
    """A 2-D launch over a non-contiguous input: grid (cdiv(M, 8), cdiv(N, 16))."""
    src = torch.randn(N, M).T if transposed_input else torch.randn(M, N)
    kernels.transpose(src, kernel=triton_trace.trace(kernels.make_transpose()), block_m=8, block_n=16)
    return triton_trace.current_trace(), src


def synthetic_launch(grid=(1, 1, 1), shape=(16,), strides=None, ops=(), name="k", tensor="x") -> Launch:
    """A launch with one tensor and the given load ops: a list of (program, offsets, mask)."""
    return load_launch(grid, shape, strides, ops, name=name, tensor_name=tensor)


# --------------------------------------------------------------------------------------------------------
# what an output carries
# --------------------------------------------------------------------------------------------------------
DATA = re.compile(r'<script type="application/json" id="(tt-[0-9a-f]+)-data">(.*?)</script>', re.S)


def carried(html: str) -> dict:
    """The data of the one viewer in ``html``: {"payloads": {path: payload}, "start": ..., "note": ...}."""
    found = DATA.findall(html)
    assert len(found) == 1, f"{len(found)} viewers in the output"
    uid, text = found[0]
    assert f'id="{uid}"' in html
    data = json.loads(text)
    data["sizes"] = {k: len(v) for k, v in data["payloads"].items()}
    data["payloads"] = {k: json.loads(zlib.decompress(base64.b64decode(v))) for k, v in data["payloads"].items()}
    return data


def served(client, path: str):
    r = client.get(path)
    assert r.status_code == 200, (path, r.get_json())
    return r.get_json()


def test_an_output_carries_the_apps_answers_for_the_paths_the_frontend_asks(make_client):
    trace, _ = traced_transpose()
    lc = trace.launches[0]
    data = carried(nb.launch_html(lc, program=(2, 1)))
    assert data["start"] == {"view": "launch", "li": 0, "pid": [2, 1, 0], "op": None}
    got = data["payloads"]
    client = make_client(Trace((lc,)))
    for path in ["/api/trace", "/api/launch/0", "/api/launch/0/grid?z=0", "/api/launch/0/findings",
                 "/api/launch/0/charts", "/api/launch/0/program/2,1,0", "/api/launch/0/tensor/0?mode=all",
                 "/api/launch/0/tensor/0?mode=program&program=2%2C1%2C0&window=auto",
                 "/api/launch/0/tensor/1?mode=op&program=2%2C1%2C0&op=1&window=auto",
                 "/api/launch/0/compiled?target=sm_90"]:
        assert path in got, path
        assert got[path] == served(client, path), path          # the same answer as the web app's
    # every recorded program fits the default budget of a small launch
    assert len([k for k in got if "/program/" in k]) == lc.recorded_programs == 10
    assert data["note"].startswith("it holds every program")
    assert got["/api/launch/0/compiled?target=sm_90"]["error"] is None            # compiled: sm_90 only, and says so
    assert not [k for k in got if "/compiled?" in k and not k.endswith("=sm_90")]
    assert "the Compiled panel of launch 0 for sm_90 only" in data["note"]


def test_a_large_launch_is_cut_at_the_budget_and_says_so():
    lc = synthetic_launch(grid=(4096, 1, 1), shape=(4096 * 16,),
                          ops=[((p, 0, 0), np.arange(16) + 16 * p, np.ones(16, bool)) for p in range(4096)])
    html = nb.launch_html(lc, program=(4000, 0, 0), budget=60_000)
    data = carried(html)
    sizes = data["sizes"]
    forced = sum(v for k, v in sizes.items() if "/program/" not in k and "mode=program" not in k and "mode=op" not in k)
    assert sum(sizes.values()) <= max(60_000, forced) * 1.02
    programs = [k for k in data["payloads"] if "/program/" in k]
    assert "/api/launch/0/program/4000,0,0" in programs          # the program asked for comes first
    assert 1 <= len(programs) < 4096
    assert f"launch 0: the ops of {len(programs)} of 4096 programs" in data["note"] and "budget=" in data["note"]
    # the Compiled panel comes after every program's ops: a budget spent on them leaves it (and its compile) out
    assert not [k for k in data["payloads"] if "/compiled?" in k] and "not the Compiled panel of launch 0" in data["note"]


def test_a_trace_of_many_launches_lists_them_all_and_carries_the_first_ones():
    lcs = tuple(synthetic_launch(ops=[((0, 0, 0), np.arange(16), np.ones(16, bool))], name=f"k{i}") for i in range(20))
    data = carried(nb.trace_html(Trace(lcs)))
    assert data["start"] == {"view": "list"}
    assert data["payloads"]["/api/trace"]["launches"]["kernel"] == [f"k{i}" for i in range(20)]
    assert "/api/launch/15" in data["payloads"] and "/api/launch/16" not in data["payloads"]
    assert "4 launch(es) not included" in data["note"]


def test_bad_places_are_refused_with_the_launch_grid_and_op_count():
    trace, _ = traced_transpose()
    lc = trace.launches[0]
    with pytest.raises(triton_trace.TraceUsageError, match=r"outside the grid \(5, 2, 1\)"):
        nb.launch_html(lc, program=(9, 0))
    with pytest.raises(triton_trace.TraceUsageError, match="has 2 ops; there is no op 99"):
        nb.tensor_view_html(lc, program=(0, 0), op=99)
    with pytest.raises(triton_trace.TraceUsageError, match="the trace has 1 launch"):
        nb.trace_html(trace, launch=3)
    with pytest.raises(triton_trace.TraceUsageError, match="report= must be the Report of the trace shown"):
        nb.trace_html(trace, report=triton_trace.analyze(Trace(trace.launches * 2)))
    store = lc.accesses(program=(1, 1), kind="store")[0]
    assert carried(nb.tensor_view_html(lc, program=(1, 1), op=store))["start"]["op"] == store.seq


def test_a_report_of_the_trace_is_used_as_given():
    trace, _ = traced_transpose()
    report = triton_trace.analyze(trace, gpu="A100")         # not the views' default GPU (H200)
    data = carried(nb.trace_html(trace, report=report, launch=0))
    assert "A100" in data["payloads"]["/api/launch/0/charts"]["roofline"]["machine"]
    assert data["payloads"]["/api/launch/0"]["metrics"]["load_bytes"] == report.to_dict()["launches"][0]["metrics"]["load_bytes"]
    data = carried(nb.trace_html(trace, launch=0, analyze=False))
    assert data["payloads"]["/api/trace"]["analysis"]["available"] is False


def test_report_html_is_tables_of_the_report():
    html = nb.report_html(REPORT)
    assert "transpose_kernel" in html and "3 lanes read past the end" in html and "(1, 0, 0)" in html
    assert "<script" not in html and "tt-embedded" not in html
    many = {**REPORT, "findings": [dict(REPORT["findings"][0], message=f"f{i}") for i in range(250)]}
    html = nb.report_html(many)
    assert html.count("<tr>") == 1 + 1 + 1 + 200 and "50 more findings" in html


REPORT = {
    "launches": [{"kernel": "transpose_kernel", "grid": [5, 2, 1],
                  "metrics": {"load_bytes": 3840, "store_bytes": 3840, "sector_efficiency": 0.5,
                              "dram_bytes_predicted": 4096}}],
    "findings": [{"kind": "out_of_bounds", "kernel": "transpose_kernel", "launch": 0, "program": [1, 0, 0],
                  "line": 12, "tensor": "x_ptr", "message": "3 lanes read past the end"}],
}


# --------------------------------------------------------------------------------------------------------
# escaping: a trace file may come from someone else
# --------------------------------------------------------------------------------------------------------
EVIL = '</script><script>alert("x")</script><!--'
EVIL_IMG = '<img src=x onerror=alert(1)>'


def test_every_trace_string_stays_data():
    trace, _ = traced_transpose()
    lc = trace.launches[0]
    evil = dataclasses.replace(
        lc, kernel_name=EVIL, source=f"# {EVIL}\n" + lc.source, error=EVIL, completed=False,
        args={EVIL: EVIL}, config={"kwargs": {"BLOCK": EVIL}},
        tensors=tuple(dataclasses.replace(t, name=f"{EVIL_IMG}{i}", dtype=EVIL) for i, t in enumerate(lc.tensors)))
    report = {"launches": [{"kernel": EVIL, "grid": list(lc.grid), "metrics": {EVIL: 1}}],
              "findings": [{"kind": EVIL, "kernel": EVIL, "launch": 0, "program": [0, 0, 0], "line": 1,
                            "tensor": EVIL_IMG, "message": EVIL}]}
    for html in [nb.trace_html(Trace((evil,))), nb.launch_html(evil, program=(0, 0)), nb.report_html(report),
                 nb.standalone_html(evil)]:
        assert "<script>alert" not in html and "<img src=x" not in html and "<!--" not in html
    data = carried(nb.launch_html(evil, program=(0, 0)))
    assert data["payloads"]["/api/launch/0"]["kernel"] == EVIL               # the same text, as data
    assert data["payloads"]["/api/launch/0"]["tensors"]["name"][0] == f"{EVIL_IMG}0"
    assert "&lt;/script&gt;&lt;script&gt;alert(&quot;x&quot;)" in nb.report_html(report)


def test_the_bundle_refuses_module_syntax_it_does_not_handle(tmp_path):
    from triton_trace.view.bundle import BundleError, bundle
    from triton_trace.view.embed import frontend_dir
    for f in frontend_dir().glob("*.js"):
        (tmp_path / f.name).write_text(f.read_text())
    code, version = bundle(tmp_path)
    assert "window.__ttEmbed" in code and len(version) == 16 and "import {" not in code
    (tmp_path / "grid.js").write_text((tmp_path / "grid.js").read_text() + "\nexport default ProgramGrid;\n")
    with pytest.raises(BundleError, match=r"grid\.js:\d+: module syntax"):
        bundle.__wrapped__(tmp_path)
    (tmp_path / "grid.js").write_text((frontend_dir() / "grid.js").read_text().replace("export class", "class"))
    with pytest.raises(BundleError, match="imports ProgramGrid from ./grid.js, which does not export"):
        bundle.__wrapped__(tmp_path)


def test_iframe_escapes_and_checks_the_url():
    class Handle:
        url = 'http://127.0.0.1:5001/?token=a"b'
    html = nb.iframe(Handle(), height=400).data
    assert 'src="http://127.0.0.1:5001/?token=a&quot;b"' in html and 'height="400"' in html
    with pytest.raises(triton_trace.TraceUsageError):
        nb.iframe("javascript:alert(1)")
    assert triton_trace.iframe is nb.iframe and "iframe" in triton_trace.__all__     # public API


# --------------------------------------------------------------------------------------------------------
# IPython integration
# --------------------------------------------------------------------------------------------------------
BUNDLE_MARK = "window.__ttEmbed = {"


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    ip = InteractiveShell.instance()
    yield ip
    InteractiveShell.clear_instance()


def test_formatters_send_plotlyjs_and_the_bundle_once_per_shell(shell):
    trace, _ = traced_transpose()
    assert nb.register_formatters(shell)
    first, _ = shell.display_formatter.format(trace.launches[0])
    second, _ = shell.display_formatter.format(trace)
    assert first["text/html"].count(PLOTLYJS_MARK) == 1 and first["text/html"].count(BUNDLE_MARK) == 1
    assert PLOTLYJS_MARK not in second["text/html"] and BUNDLE_MARK not in second["text/html"]
    assert carried(second["text/html"])["start"] == {"view": "list"}
    report, _ = shell.display_formatter.format(triton_trace.analyze(trace))
    assert "tt-report" in report["text/html"] and PLOTLYJS_MARK not in report["text/html"]


def test_register_formatters_outside_ipython():
    assert nb.register_formatters() is False


def test_show_includes_the_assets_the_first_time_only(shell, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj.data))
    trace, _ = traced_transpose()
    nb.show(triton_trace.analyze(trace))          # tables only: no assets needed yet
    nb.show(trace.launches[0])
    nb.show(trace.launches[0], program=(1, 1))
    assert PLOTLYJS_MARK not in shown[0]
    assert shown[1].count(PLOTLYJS_MARK) == 1 and PLOTLYJS_MARK not in shown[2] and BUNDLE_MARK not in shown[2]
    assert carried(shown[2])["start"]["pid"] == [1, 1, 0]


def test_show_outside_ipython_says_what_to_use():
    trace, _ = traced_transpose()
    with pytest.raises(triton_trace.TraceUsageError, match="standalone_html"):
        nb.show(trace)


def test_standalone_html_is_a_complete_offline_page():
    trace, _ = traced_transpose()
    page = nb.standalone_html(trace.launches[0])
    assert page.startswith("<!DOCTYPE html>") and page.count(PLOTLYJS_MARK) == 1 and page.count(BUNDLE_MARK) == 1
    from plotly.offline import get_plotlyjs
    ours = page.replace(get_plotlyjs(), "")
    assert not re.search(r"""(src|href)=["']?https?:""", ours)      # nothing loaded from anywhere
    assert carried(page)["start"]["li"] == 0


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
    assert "tt-embedded" in nb.trace_html(triton_trace.current_trace())   # an interrupted trace still displays


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


def test_repr_html_outside_ipython():
    """marimo, VS Code, Quarto and nbconvert read _repr_html_: Trace, Launch and Report provide it,
    self-contained (plotly.js and the viewer inside) when no IPython shell shares one copy between
    outputs; a Report alone is tables."""
    code = ("import sys, torch, triton_trace\n"
            "sys.path.insert(0, 'tests')\n"
            "import kernels as K\n"
            "K.add(torch.randn(300), torch.randn(300), kernel=triton_trace.trace(K.make_add()), block=64)\n"
            "t = triton_trace.current_trace()\n"
            "assert 'IPython' not in sys.modules or sys.modules['IPython'].get_ipython() is None\n"
            "for obj in (t, t.launches[0], triton_trace.analyze(t)):\n"
            "    h = obj._repr_html_()\n"
            "    print(type(obj).__name__, 'tt-embedded' in h or 'tt-report' in h, 'add_kernel' in h or '-data' in h, h.count('window.__tt_define=window.define'))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert lines[:3] == ["Trace True True 1", "Launch True True 1", "Report True True 0"], r.stdout


def test_the_notebook_and_the_browser_run_the_same_frontend_modules():
    """One renderer: the notebook's bundle holds every module of the browser page but its entry (app.js),
    and the two entries differ only in where payloads come from (both mount view.js)."""
    from triton_trace.view.bundle import ENTRY, _order
    from triton_trace.view.embed import frontend_dir
    folder = frontend_dir()
    bundled = {name for name, _ in _order(folder, ENTRY)}
    page = {p.stem for p in folder.glob("*.js")}
    assert bundled == page - {"app"}
    for entry in ("app", "embed"):
        assert 'from "./view.js"' in (folder / f"{entry}.js").read_text()
