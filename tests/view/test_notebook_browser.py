"""The notebook viewer end to end: the example notebook runs in a real Jupyter kernel (nbclient +
ipykernel), nbconvert exports it to HTML, and a real Chromium opens the export offline (file://) and inside
a cross-site iframe, and works the views the browser tests check: the launch list, the program grid, a
program's ops, the tensor view (checked cell by cell against the elements the kernel touched), findings,
charts. No request may leave the page, and no script may fail.
"""
from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import numpy as np
import pytest

from helpers import paths
from helpers.web import STORED, Watched, highlighted

ROOT = Path(paths.ROOT)
NOTEBOOK = ROOT / "examples" / "trace_in_notebook.ipynb"
PLOTLYJS_MARK = "window.__tt_define=window.define"
BUNDLE_MARK = "window.__ttEmbed = {"
VIEWERS = 5          # the example's displays of a Trace or Launch: the trace, three of the transpose launch, the bug


@pytest.fixture(scope="module")
def executed():
    """The example notebook after a run in a real kernel, and its outputs' HTML in order."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    book = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    html = []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"cell failed: {cell.source[:80]!r}: {errors[0].ename}: {errors[0].evalue}"
        html += [o["data"]["text/html"] for o in cell.outputs if "text/html" in o.get("data", {})]
    return book, html


@pytest.fixture(scope="module")
def exported(executed, tmp_path_factory):
    """The notebook exported by nbconvert (its "basic" template: the lab template adds CDN scripts of its
    own), as a page in a folder of its own."""
    nbconvert = pytest.importorskip("nbconvert")
    body, _ = nbconvert.HTMLExporter(template_name="basic").from_notebook_node(executed[0])
    folder = tmp_path_factory.mktemp("export")
    page = folder / "notebook.html"
    page.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>notebook</title><link rel="icon" href="data:,"></head>'
                    f"<body>{body}</body></html>", encoding="utf-8")
    return page


@pytest.mark.slow
def test_the_example_notebook_runs_and_carries_the_assets_once(executed, exported, tmp_path):
    book, html = executed
    viewers = [h for h in html if "tt-embedded" in h]
    assert len(viewers) == VIEWERS
    everything = "".join(html)
    assert everything.count(PLOTLYJS_MARK) == 1 and everything.count(BUNDLE_MARK) == 1     # once per notebook
    assert viewers[0].count(BUNDLE_MARK) == 1
    assert any("tt-report" in h and "out_of_bounds" not in h for h in html)                 # the report's tables
    bars = [h for h in html if 'class="tt-progress"' in h]
    assert bars and '<progress value="256" max="256"' in bars[-1]       # updated in place to the end
    import nbformat
    saved = tmp_path / "executed.ipynb"
    nbformat.write(book, saved)
    # five displays stay small: plotly.js (4.8 MB) once, the frontend bundle (185 kB) once, each viewer a bounded
    # snapshot (EMBED_BYTES) with its markup and style; about 6.12 MB in all
    assert saved.stat().st_size < 6_130_000, saved.stat().st_size
    assert exported.stat().st_size < 6_130_000, exported.stat().st_size


# --------------------------------------------------------------------------------------------------------
# in Chromium
# --------------------------------------------------------------------------------------------------------
def wait(root, selector: str):
    """Wait for ``selector`` in one viewer; a timeout reports what that viewer shows instead."""
    try:
        root.locator(selector).first.wait_for()
    except Exception as e:
        crumbs, error = root.locator("#crumbs").inner_text(), root.locator("#error").inner_text()
        raise AssertionError(f"{selector} did not appear; the viewer is at {crumbs!r}, error {error!r}") from e


def click_program(root, lin: int):
    canvas = root.locator("#grid-canvas")
    px, cols = int(canvas.get_attribute("data-px")), int(canvas.get_attribute("data-cols"))
    canvas.click(position={"x": (lin % cols) * px + px // 2, "y": (lin // cols) * px + px // 2})


def tensor_key(root, key: str):
    root.locator(f'#tensor-canvas[data-key="{key}"]').wait_for()


def work_the_views(page, roots, keyboard):
    """The same views the browser tests check, in each output (``page``: the page or frame that holds
    them; ``keyboard``: its top page's)."""
    trace_view, corner, store_op, launch_view, bug = (roots.nth(k) for k in range(VIEWERS))
    assert [r.get_attribute("data-view") for r in (trace_view, corner, store_op, launch_view, bug)] == \
        ["list", "launch", "launch", "launch", "launch"]
    assert page.locator(".tt-needs-js").count() == 0
    # the page settles (each opened launch draws its charts once plotly.js is in) before anything is clicked
    for r in (corner, store_op, launch_view, bug):
        wait(r, "#charts-panel[data-ready]")

    # the trace: a list of one launch; opening it draws the 7 x 5 program grid
    rows = trace_view.locator("#launches tbody tr")
    assert rows.count() == 1 and rows.nth(0).locator("td.kernel").inner_text() == "transpose_kernel"
    rows.nth(0).click()
    trace_view.locator("#grid-canvas[data-cols='7'][data-rows='5']").wait_for()
    wait(trace_view, "#charts-panel[data-ready]")
    # a program: its two ops, and in the tensor view the 16 x 16 tile it read of x (100 x 72)
    click_program(trace_view, 7 + 1)          # program (1, 1)
    trace_view.locator("#ops tbody tr[data-seq]").nth(1).wait_for()
    assert trace_view.locator("#ops tbody tr[data-seq]").count() == 2
    tensor_key(trace_view, "program|0|1,1,0|")
    want = np.zeros((100, 72), bool)
    want[16:32, 16:32] = True
    assert np.array_equal(highlighted(trace_view), want)
    # the other outputs did not move
    assert corner.locator("#crumbs").inner_text().replace("\n", " ").endswith("program (6, 4, 0)")

    # the corner program (6, 4): 4 x 8 elements of x survive its masks
    tensor_key(corner, "program|0|6,4,0|")
    want = np.zeros((100, 72), bool)
    want[96:100, 64:72] = True
    assert np.array_equal(highlighted(corner), want)
    # the store op of program (2, 1): a 16 x 16 tile of y (72 x 100), transposed
    tensor_key(store_op, "op|1|2,1,0|1")
    want = np.zeros((72, 100), bool)
    want[16:32, 32:48] = True
    assert np.array_equal(highlighted(store_op, STORED), want)
    assert store_op.locator("#ops tbody tr.sel").get_attribute("data-seq") == "1"
    # the op's block in its own shape, and the tensor coloured by value: the same views as the browser's
    wait(store_op, '#block-canvas[data-key="2,1,0|1"][data-rows="16"][data-cols="16"]')
    assert "256 of 256 lanes active" in store_op.locator("#block-note").inner_text()
    store_op.locator("#tensor-colour").select_option("value")
    wait(store_op, '#tensor-canvas[data-colour="value"]')
    assert "value:" in store_op.locator("#tensor-legend").inner_text()

    # arrow keys move through the ops of the output that has the focus, and no other
    click_program(launch_view, 0)
    wait(launch_view, "#ops tbody tr[data-seq]")
    launch_view.locator("#ops tbody tr[data-seq='0']").click()
    keyboard.press("ArrowDown")
    launch_view.locator("#ops tbody tr.sel[data-seq='1']").wait_for()
    assert store_op.locator("#ops tbody tr.sel").get_attribute("data-seq") == "1"

    # the bug: its finding opens the program, the op and the line
    bug.locator("#findings li[data-k]").first.wait_for()
    assert "out_of_bounds" in bug.locator("#findings").inner_text().replace("-", "_")
    bug.locator("#findings li[data-k]").first.click()
    bug.locator("#ops tbody tr.sel").wait_for()
    assert bug.locator("#crumbs").inner_text().replace("\n", " ").endswith("op 0")
    assert bug.locator("#source").get_attribute("data-current") not in ("", None)

    # charts: plotly.js came once, in the first output, and every output draws with it
    for r in (trace_view, corner, store_op, launch_view, bug):
        assert r.locator("#chart-hist .main-svg").count() >= 1


@pytest.mark.browser
@pytest.mark.slow
def test_the_exported_notebook_works_offline(browser, exported):
    w = Watched(browser)
    w.page.goto(exported.as_uri())
    w.page.wait_for_function(f"[...document.querySelectorAll('.tt-app.tt-embedded')].filter((r) => r.dataset.view).length === {VIEWERS}")
    try:
        work_the_views(w.page, w.page.locator(".tt-app.tt-embedded"), w.page.keyboard)
    finally:
        w.check("exported-notebook")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(folder: Path):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.mark.browser
@pytest.mark.slow
def test_the_exported_notebook_works_in_a_cross_site_iframe(browser, exported, tmp_path):
    """A documentation site embedding the export: the frame is another site (127.0.0.1 inside localhost)."""
    inner = _serve(exported.parent)
    (tmp_path / "host.html").write_text(
        f'<!DOCTYPE html><html><head><link rel="icon" href="data:,"></head><body><h1>docs</h1><iframe id="nb" src="http://127.0.0.1:{inner.server_port}/notebook.html" '
        f'width="1000" height="1200"></iframe></body></html>')
    outer = _serve(tmp_path)
    try:
        w = Watched(browser, width=1100)
        w.page.goto(f"http://localhost:{outer.server_port}/host.html")
        frame = w.page.frame_locator("#nb")
        frame.locator(f".tt-app.tt-embedded >> nth={VIEWERS - 1}").wait_for()
        inner_frame = next(f for f in w.page.frames if f.url.endswith("/notebook.html"))
        inner_frame.wait_for_function(
            f"[...document.querySelectorAll('.tt-app.tt-embedded')].filter((r) => r.dataset.view).length === {VIEWERS}")
        work_the_views(inner_frame, inner_frame.locator(".tt-app.tt-embedded"), w.page.keyboard)
        w.check("exported-notebook-iframe", allowed=(f"http://127.0.0.1:{inner.server_port}/",
                                                     f"http://localhost:{outer.server_port}/"))
    finally:
        inner.shutdown()
        outer.shutdown()


@pytest.mark.browser
def test_a_view_outside_the_snapshot_says_how_to_see_it(browser, tmp_path):
    import torch
    import kernels
    import triton_trace
    from triton_trace.view import notebook as nb
    triton_trace.reset()
    kernels.add(torch.randn(64 * 40), torch.randn(64 * 40), kernel=triton_trace.trace(kernels.make_add()), block=64)
    lc = triton_trace.current_trace().launches[0]
    triton_trace.reset()
    page = tmp_path / "small.html"
    page.write_text(nb.standalone_html(lc, budget=1))       # the opened launch only: no program fits
    w = Watched(browser)
    w.page.goto(page.as_uri())
    root = w.page.locator(".tt-app.tt-embedded")
    root.locator("#grid-canvas[data-cols]").wait_for()
    click_program(root, 3)
    root.locator("#error:not([hidden])").wait_for()
    text = root.locator("#error").inner_text()
    assert "not in the notebook output" in text and "launch 0: the ops of 0 of 40 programs" in text
    assert "triton_trace.launch()" in text and ("/program/3,0,0" in text or "program=3%2C0%2C0" in text)
    w.check("outside-the-snapshot")
