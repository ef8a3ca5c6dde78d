"""End-to-end tests of the web UI in a real headless Chromium (Debian's, through Playwright).

Every page load checks that no request leaves the server's loopback origin, that no script error or
Content-Security-Policy violation happened, and saves a screenshot of the view under test-output/browser/.
"""
from __future__ import annotations

import numpy as np
import pytest

import torch
import triton_trace
from helpers import webcases as K
from helpers.web import BROWSER_OUT, Page, all_programs, canvas_cells, highlighted, served, tensor_key, trace_of
import kernels

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def matmul_run():
    triton_trace.reset()
    a, b, c, args = K.traced_matmul()
    K.traced_shift()
    x, y = torch.randn(2, 8, 16), torch.randn(2, 8, 16)
    kernels.sub3d(x, y, kernel=triton_trace.trace(kernels.make_grid3d()), block_m=4, block_n=8)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    yield {"url": srv.url, "args": args, "trace": tr, "b": b}
    srv.stop()


@pytest.fixture
def page(browser, matmul_run):
    p = Page(browser, matmul_run["url"])
    yield p
    p.close()


def click_program(pg, lin: int):
    px = int(pg.get_attribute("#grid-canvas", "data-px"))
    cols = int(pg.get_attribute("#grid-canvas", "data-cols"))
    pg.click("#grid-canvas", position={"x": (lin % cols) * px + px // 2, "y": (lin // cols) * px + px // 2})


# ---------------------------------------------------------------------------------------------------------
def test_launch_list_opens_a_launch(page):
    pg = page.open()
    pg.wait_for_selector("#launches tbody tr")
    rows = pg.locator("#launches tbody tr")
    assert rows.count() == 3
    assert rows.nth(0).locator("td.kernel").inner_text() == "matmul_kernel"
    assert rows.nth(1).locator("td").nth(5).inner_text() != "0"     # the shift kernel has findings
    page.check("launch-list")
    rows.nth(0).click()
    pg.wait_for_selector("#grid-canvas[data-metric]")
    assert pg.evaluate("location.hash") == "#/launch/0"
    # the matmul has no findings: the grid opens on a metric that varies over its programs, never a uniform one
    metric = pg.get_attribute("#grid-canvas", "data-metric")
    lo, hi = pg.evaluate("""async (m) => (await (await fetch('/api/launch/0/grid?z=0', {headers: {'X-TT-Client': '1'}})).json()).ranges[m]""", metric)
    assert metric != "findings" and lo < hi
    pg.wait_for_selector("#charts-panel[data-ready] #chart-hist .main-svg")
    assert pg.locator("#chart-roofline .main-svg").count() >= 1
    assert pg.locator("#chart-tensors .main-svg").count() >= 1
    page.check("launch")
    pg.locator("#charts-panel").screenshot(path=str(BROWSER_OUT / "charts.png"))


def test_click_a_program_highlights_exactly_what_it_loaded(page, matmul_run):
    args = matmul_run["args"]
    pg = page.open("#/launch/0")
    pg.wait_for_selector("#grid-canvas[data-px]")
    for lin in (1, 4):
        click_program(pg, lin)
        tensor_key(pg, f"program|0|{lin},0,0|")
        assert pg.evaluate("location.hash") == f"#/launch/0/program/{lin},0,0"
        # the program's ops arrive by their own request, beside the tensor view's: wait for them (bounded)
        want = len(matmul_run["trace"].launches[0].all_ops(program=lin))
        pg.wait_for_function(f"document.querySelectorAll('#ops tbody tr').length === {want}", timeout=10_000)
        assert np.array_equal(highlighted(pg), K.matmul_loaded_a(lin, args))
        pg.select_option("#tensor", "1")                         # B: a transposed, non-contiguous view
        tensor_key(pg, f"program|1|{lin},0,0|")
        assert np.array_equal(highlighted(pg), K.matmul_loaded_b(lin, args))
        pg.select_option("#tensor", "0")
        tensor_key(pg, f"program|0|{lin},0,0|")
    pg.go_back()                                                  # history works like any page's
    tensor_key(pg, "program|0|1,0,0|")
    assert pg.evaluate("location.hash") == "#/launch/0/program/1,0,0"
    pg.go_forward()
    tensor_key(pg, "program|0|4,0,0|")
    page.check("program")


def test_back_from_a_program_to_its_launch_clears_the_op_table(page, matmul_run):
    pg = page.open("#/launch/0")
    pg.wait_for_selector("#grid-canvas[data-px]")
    click_program(pg, 2)
    tensor_key(pg, "program|0|2,0,0|")
    assert pg.locator("#ops tbody tr[data-seq]").count() > 0
    pg.go_back()
    tensor_key(pg, "all|0||")
    assert pg.evaluate("location.hash") == "#/launch/0"
    assert pg.locator("#ops tbody tr[data-seq]").count() == 0
    assert "Click a program" in pg.inner_text("#ops tbody")
    assert pg.text_content("#program-title") == "Program"
    pg.hover("#ops tbody tr")                                     # hovering the old rows threw a TypeError
    pg.mouse.move(5, 5)
    page.check("back-to-launch")


def test_plotly_png_download_is_allowed(page, tmp_path):
    pg = page.open("#/launch/0")
    pg.wait_for_selector("#charts-panel[data-ready] #chart-hist .main-svg")
    pg.hover("#chart-hist")
    with pg.expect_download() as info:
        pg.click('#chart-hist .modebar-btn[data-title="Download plot as a PNG"]')
    target = tmp_path / "chart.png"
    info.value.save_as(target)
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and target.stat().st_size > 1000
    page.check("chart-download")                                  # no CSP violation (img-src blob:)


def test_click_an_op_highlights_its_tile_and_line(page, matmul_run):
    args = matmul_run["args"]
    pg = page.open("#/launch/0/program/4,0,0")
    tensor_key(pg, "program|0|4,0,0|")
    pg.click('#ops tbody tr[data-seq="4"]')                       # the second load of B (k = 8..15)
    tensor_key(pg, "op|1|4,0,0|4")
    assert pg.evaluate("location.hash") == "#/launch/0/program/4,0,0/op/4"
    want = np.zeros((args["K"], args["N"]), bool)
    _, pn = K.matmul_program_tile(4, **args)
    want[8:16, pn * 16:(pn + 1) * 16] = True
    assert np.array_equal(highlighted(pg), want)
    line = pg.locator("#source .src-line.cur")
    assert "tl.load(b_ptrs" in line.inner_text()
    assert pg.locator("#ops tbody tr.sel").get_attribute("data-seq") == "4"
    # hovering an element shows its recorded value
    px = int(pg.get_attribute("#tensor-canvas", "data-px"))
    k, n = 9, pn * 16 + 2
    pg.hover("#tensor-canvas", position={"x": n * px + px // 2, "y": k * px + px // 2})
    text = pg.inner_text("#tensor-hover")
    assert f"b_ptr[{k}, {n}]" in text and "loaded" in text
    assert f"{float(matmul_run['b'][k, n]):.4g}"[:5] in text
    page.check("tensor-op")


def test_all_programs_mode_shows_the_tiling(page, matmul_run):
    args = matmul_run["args"]
    pg = page.open("#/launch/0")
    pg.wait_for_selector("#grid-canvas[data-px]")
    pg.select_option("#tensor", "2")
    tensor_key(pg, "all|2||")
    cells = canvas_cells(pg).reshape(-1, 3)
    owner = np.zeros((args["M"], args["N"]), int)
    for lin in range(6):
        pm, pn = K.matmul_program_tile(lin, **args)
        owner[pm * 16:(pm + 1) * 16, pn * 16:(pn + 1) * 16] = lin
    colours = {}
    for o, c in zip(owner.reshape(-1), map(tuple, cells)):
        colours.setdefault(o, set()).add(c)
    assert all(len(s) == 1 for s in colours.values()), "one colour per program"
    assert len({next(iter(s)) for s in colours.values()}) == 6, "a different colour for every program"
    page.check("tensor-all-programs")


def test_follow_a_finding_to_its_line(page):
    pg = page.open("#/launch/1")
    pg.wait_for_selector("#findings li[data-k]")
    item = pg.locator("#findings li[data-k]").first
    assert "out_of_bounds" in item.inner_text()
    item.click()
    tensor_key(pg, "op|0|3,0,0|0")
    assert pg.evaluate("location.hash") == "#/launch/1/program/3,0,0/op/0"
    assert "planted bug" in pg.locator("#source .src-line.cur").inner_text()
    assert pg.locator("#ops tbody tr.sel").get_attribute("data-seq") == "0"
    assert "outside the tensor's storage" in pg.inner_text("#tensor-note")
    page.check("finding")


def test_grid_hover_and_metric_legend(page):
    pg = page.open("#/launch/0")
    pg.wait_for_selector("#grid-canvas[data-px]")
    pg.hover("#grid-canvas", position={"x": 10, "y": 10})
    assert "program (0, 0, 0)" in pg.inner_text("#grid-hover") and "Bytes loaded" in pg.inner_text("#grid-hover")
    for metric in ("store_bytes", "masked_share", "sector_efficiency", "findings"):
        pg.select_option("#metric", metric)
        pg.wait_for_selector(f'#grid-canvas[data-metric="{metric}"]')
        if metric.endswith(("share", "efficiency")):
            assert "%" in pg.inner_text("#grid-legend")


def test_a_3d_grid_is_shown_as_z_slices(page):
    pg = page.open("#/launch/2")
    pg.wait_for_selector("#grid-canvas[data-px]")
    assert pg.is_visible("#z-label")
    pg.select_option("#z", "1")
    pg.wait_for_selector('#grid-canvas[data-z="1"]')                # the slice's grid has arrived and is drawn
    click_program(pg, 3)                                          # x = 1, y = 1 of the z = 1 slice
    # x is (2, 8, 16): two planes, so it opens as small multiples
    pg.wait_for_selector('#tensor-multiples[data-key="program|0|1,1,1|"]')
    assert pg.evaluate("location.hash") == "#/launch/2/program/1,1,1"
    assert pg.text_content("#program-title") == "Program (1, 1, 1)"
    pg.select_option("#tensor", "2")                              # out: rank 3
    pg.wait_for_selector('#tensor-multiples[data-key="program|2|1,1,1|"]')
    assert pg.locator("#tensor-multiples figcaption").all_inner_texts() == ["dim 0 = 0", "dim 0 = 1"]
    stored = [int(np.all(canvas_cells(pg, f'#tensor-multiples canvas[data-index="{k}"]') == (234, 88, 12), axis=2).sum())
              for k in range(2)]
    assert stored == [0, 4 * 8]                                   # its 4 x 8 tile, stored in batch 1
    pg.click('#tensor-multiples figure[data-index="1"]')          # batch 1 as the single plane
    tensor_key(pg, "program|2|1,1,1|")
    assert pg.locator("#plane-controls input").count() == 1       # the index of the third dimension
    assert pg.input_value("#plane-controls input") == "1"         # opened at the panel's batch
    assert int(highlighted(pg, (234, 88, 12)).sum()) == 4 * 8     # its 4 x 8 tile, stored
    page.check("grid-3d")
    pg.goto(page.base + "/#/launch/2/program/0,1,1")              # a deep link to another z slice
    tensor_key(pg, "program|2|0,1,1|")                            # the same tensor, still one plane
    assert pg.evaluate("document.getElementById('z').value") == "1"


def test_a_4096_program_launch_stays_small_and_fast(browser):
    """Every answer the browser gets for one view stays under about 1 MB, and the grid paints quickly
    (benchmarks/speed/bench_web_browser.py measures the speed properly; this only catches regressions)."""
    srv = triton_trace.launch(trace=K.synthetic_tiled(64, 64, 16, 16), block=False, port=0)
    p = Page(browser, srv.url)
    sizes = {}
    p.page.on("response", lambda r: sizes.__setitem__(r.url, len(r.body())) if "/api/" in r.url else None)
    try:
        pg = p.open("#/launch/0")
        pg.wait_for_selector("#grid-canvas[data-px]")
        paint = pg.evaluate("performance.getEntriesByName('tt-grid-painted')[0].startTime")
        click_program(pg, 64 * 7 + 5)                                # program (5, 7): x runs along a row
        tensor_key(pg, "program|0|5,7,0|")
        pg.click('#tensor-mode button[data-mode="all"]')
        tensor_key(pg, "all|0||")
        assert "Downsampled" in pg.inner_text("#tensor-note")
        p.check("big-launch")
        assert sizes and max(sizes.values()) < 1_000_000, sizes
        assert paint < 3000
    finally:
        p.close()
        srv.stop()


def test_long_programs_page_their_ops(browser):
    srv = triton_trace.launch(trace=K.synthetic_long(2500), block=False, port=0)
    p = Page(browser, srv.url)
    try:
        pg = p.open("#/launch/0/program/0,0,0/op/2300")           # a deep link into the second page
        tensor_key(pg, "op|0|0,0,0|2300")
        assert pg.locator("#ops tbody tr.sel").get_attribute("data-seq") == "2300"
        assert "ops 2000–2499 of 2500" in pg.inner_text("#ops-pager")
        pg.click("#ops-pager button:first-child")                # back to the first page
        tensor_key(pg, "op|0|0,0,0|0")
        assert pg.locator("#ops tbody tr").count() == 2000
        p.check("long-program")
    finally:
        p.close()
        srv.stop()


def test_hostile_trace_is_shown_as_text(browser, tmp_path):
    path = tmp_path / "hostile.ttrace"
    K.hostile_trace().save(path)
    srv = triton_trace.launch(trace=str(path), block=False, port=0)
    p = Page(browser, srv.url)
    try:
        pg = p.open()
        pg.wait_for_selector("#launches tbody tr")
        assert K.HOSTILE in pg.inner_text("#launches")
        p.check("hostile-list")
        pg.locator("#launches tbody tr").first.click()
        pg.wait_for_selector("#grid-canvas[data-px]")
        click_program(pg, 3)
        tensor_key(pg, "program|0|1,1,0|")
        pg.click('#ops tbody tr[data-seq="0"]')
        tensor_key(pg, "op|0|1,1,0|0")
        pg.wait_for_selector("#charts-panel[data-ready]")
        assert K.HOSTILE in pg.inner_text("#summary") and K.HOSTILE in pg.inner_text("#source")
        assert pg.evaluate("typeof window.__pwned") == "undefined"
        assert pg.locator("img, svg[onload]").count() == 0 or pg.evaluate(
            "[...document.querySelectorAll('img')].every(i => !i.getAttribute('onerror'))")
        p.check("hostile-launch")
    finally:
        p.close()
        srv.stop()


def test_shared_ui_works_in_a_cross_site_iframe(browser, matmul_run):
    """A notebook on http://localhost:PORT embedding the shared UI (http://127.0.0.1:...?token=) is a
    cross-site frame, where the SameSite token cookie is not sent: the UI must still load its data."""
    import http.server
    import threading
    srv = triton_trace.launch(trace=matmul_run["trace"], share=True, block=False, port=0)
    page = f'<html><body><iframe src="{srv.url}#/launch/0/program/2,0,0" width="1500" height="1100"></iframe></body></html>'

    class Notebook(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page.encode())

        def log_message(self, *args):
            pass

    host = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Notebook)
    threading.Thread(target=host.serve_forever, daemon=True).start()
    p = Page(browser, srv.url)
    try:
        p.page.goto(f"http://localhost:{host.server_address[1]}/")
        frame = p.page.frame_locator("iframe")
        frame.locator("#tensor-canvas[data-key='program|0|2,0,0|']").wait_for()
        assert "matmul_kernel" in frame.locator("#status").text_content()
        assert not p.errors, p.errors
    finally:
        p.close()
        host.shutdown()
        host.server_close()
        srv.stop()


def test_token_page_works_through_its_header_without_a_cookie(browser, matmul_run):
    srv = triton_trace.launch(trace=matmul_run["trace"], share=True, block=False, port=0)
    p = Page(browser, srv.url)
    try:
        pg = p.page
        pg.goto(srv.url + "#/launch/0/program/2,0,0")
        tensor_key(pg, "program|0|2,0,0|")
        assert p.ctx.cookies() == []            # a cookie would reach every other server on this host
        p.check("shared")
    finally:
        p.close()
        srv.stop()


def test_values_heatmap_and_who_touched_an_element(browser):
    """The value bug of tests/kernels/value_bugs.py (a softmax without the max subtraction): coloured by value, the
    NaN it stored stands out; clicking that element lists its one write, and the write opens its op."""
    from kernels import value_bugs as V
    x = torch.randn(6, 40)
    x[3, 7] = 120.0
    out = torch.empty_like(x)
    with served(browser, trace_of(V.softmax_no_max, (6,), x, out, 40, BLOCK=64)) as p:
        pg = p.open("#/launch/0")
        all_programs(pg, 1)                                                 # out_ptr, all programs
        pg.select_option("#tensor-colour", "value")
        pg.wait_for_selector('#tensor-canvas[data-colour="value"]')
        cells = canvas_cells(pg)
        nan = np.all(cells == np.array((236, 72, 153)), axis=2)
        assert np.argwhere(nan).tolist() == [[3, 7]]                        # the one NaN, where torch has it
        assert torch.isnan(out[3, 7]) and int(torch.isnan(out).sum()) == 1
        assert "NaN" in pg.inner_text("#tensor-legend")
        c = pg.locator("#tensor-canvas")
        px = int(c.get_attribute("data-px"))
        c.hover(position={"x": 7 * px + px // 2, "y": 3 * px + px // 2})
        assert "last written by program (3, 0, 0)" in pg.inner_text("#tensor-hover")
        c.click(position={"x": 7 * px + px // 2, "y": 3 * px + px // 2})
        pg.wait_for_selector('#tensor-touches[data-index="3,7"] li[data-k]')
        items = pg.locator("#tensor-touches li[data-k]")
        assert items.count() == 1
        text = items.nth(0).inner_text()
        assert "store" in text and "program (3, 0, 0)" in text and "value nan" in text
        items.nth(0).click()
        pg.wait_for_function("location.hash.startsWith('#/launch/0/program/3,0,0/op/')")
        seq = int(pg.evaluate("location.hash").rsplit("/", 1)[1])
        assert pg.get_attribute("#ops tbody tr.sel", "data-seq") == str(seq)
        assert "NaN" in pg.inner_text("#ops tbody tr.sel td.vals")            # the op's value statistics
        p.check("values-and-touches")


def test_an_ops_block_is_drawn_in_its_shape(page, matmul_run):
    """Op 0 of matmul program (1, 0): its A tile, 16 x 8 lanes, every lane active (the tile fits)."""
    pg = page.open("#/launch/0/program/1,0,0/op/0")
    pg.wait_for_selector('#block-canvas[data-key="1,0,0|0"]')
    c = pg.locator("#block-canvas")
    assert (c.get_attribute("data-rows"), c.get_attribute("data-cols")) == ("16", "8")
    assert "load of a_ptr, block 16×8" in pg.inner_text("#block-title")
    assert "128 of 128 lanes active" in pg.inner_text("#block-note")
    px = int(c.get_attribute("data-px"))
    c.hover(position={"x": 2 * px + px // 2, "y": 3 * px + px // 2})
    pid_m, _ = K.matmul_program_tile(1, **matmul_run["args"])
    want = (pid_m * 16 + 3) * 24 + 2                                      # A is 40 x 24, contiguous
    assert f"lane (3, 2) · offset {want}" in pg.inner_text("#block-hover")
    pg.click("#ops tbody tr[data-seq='2']")                                 # a dot: no block to draw
    pg.wait_for_function("document.querySelector('#block-note').textContent.startsWith('Select an op')")
    page.check("op-block")


def test_two_traces_side_by_side_on_the_tensor_view(browser, tmp_path):
    """``triton-trace view a --compare b``: a softmax without the max subtraction against the fixed one;
    the tensor view marks exactly the elements torch says differ, and hover shows both sides."""
    from kernels import value_bugs as V
    x = torch.randn(6, 40)
    x[3, 7] = 120.0
    outs = {}
    for name, kernel in (("a", V.softmax_no_max), ("b", V.softmax)):
        outs[name] = torch.empty_like(x)
        triton_trace.reset()
        triton_trace.trace(kernel)[(6,)](x, outs[name], 40, BLOCK=64)
        triton_trace.current_trace().save(tmp_path / f"{name}.ttrace")
    triton_trace.reset()
    a, b = outs["a"], outs["b"]
    want = ~((a == b) | (a.isnan() & b.isnan()))                          # bit for bit, as the diff compares
    with served(browser, str(tmp_path / "a.ttrace"), compare=str(tmp_path / "b.ttrace")) as p:
        pg = p.open("#/launch/0")
        all_programs(pg, 1)
        pg.select_option("#tensor-colour", "diff")
        pg.wait_for_selector('#tensor-canvas[data-colour="diff"]')
        red = np.all(canvas_cells(pg) == np.array((220, 38, 38)), axis=2)
        assert np.array_equal(red, want.numpy()) and 1 < red.sum() < 240
        assert f"{int(want.sum())} of 240 written element(s) differ" in pg.inner_text("#tensor-legend")
        c = pg.locator("#tensor-canvas")
        px = int(c.get_attribute("data-px"))
        c.hover(position={"x": 7 * px + px // 2, "y": 3 * px + px // 2})
        text = pg.inner_text("#tensor-hover")
        assert "here nan (program (3, 0, 0)" in text and "compared " in text
        p.check("compare-traces")


def test_hints_appear_with_the_findings_and_mark_their_line(browser):
    from kernels import value_bugs as V
    from helpers.source import marked_line
    x = torch.randn(64, 512).T
    tr = trace_of(V.row_sum_wide_block, (512,), x, torch.empty(512), 64, x.stride(0), x.stride(1), BLOCK=256)
    with served(browser, tr) as p:
        pg = p.open("#/launch/0")
        pg.wait_for_selector("#findings li.hint")
        texts = pg.locator("#findings li.hint").all_inner_texts()
        assert any("masked lanes" in t and "75% of the lanes" in t for t in texts)
        assert any("uncoalesced" in t and "strides by 512 elements" in t for t in texts)
        pg.locator("#findings li.hint").first.click()
        assert pg.get_attribute("#source", "data-current") == str(marked_line(V.row_sum_wide_block, "# HINT"))
        p.check("hints")
