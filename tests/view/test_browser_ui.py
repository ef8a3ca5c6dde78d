"""Rough edges a newcomer hit (issue 43), in a real headless Chromium at 1440 px: a 1-D op block is
readable (bug 11), the page background reaches the bottom of a short page (bug 11), and a slow launch
switch shows loading, never the new launch's summary beside the old launch's panels (bug 6)."""
from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers.web import Page, docs_shot

pytestmark = pytest.mark.browser

N, BLOCK = 1500, 1024
MASKED = (229, 231, 235)       # frontend/block.js
INPUTS: dict = {}              # what the module's server traced, for the tests' own expectations


@triton.jit
def copy_block(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@pytest.fixture(scope="module")
def server():
    triton_trace.reset()
    traced = triton_trace.trace(copy_block)
    x = INPUTS["x"] = torch.randn(N)
    traced[(triton.cdiv(N, BLOCK),)](x, torch.empty(N), N, BLOCK=BLOCK)     # launch 0: 2 programs
    traced[(1,)](x, torch.empty(N), 700, BLOCK=BLOCK)                       # launch 1: 1 program
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    yield srv
    srv.stop()


@pytest.fixture
def page(browser, server):
    p = Page(browser, server.url)
    p.page.set_viewport_size({"width": 1440, "height": 900})
    yield p
    p.close()


def block_pixel(pg, lane: int) -> tuple:
    return tuple(pg.locator("#block-canvas").evaluate("""(c, k) => {
        const px = +c.dataset.px, C = +c.dataset.cols, dpr = c.width / parseFloat(c.style.width);
        const x = Math.floor(((k % C) * px + px / 2) * dpr), y = Math.floor((Math.floor(k / C) * px + px / 2) * dpr);
        return Array.from(c.getContext("2d").getImageData(x, y, 1, 1).data.slice(0, 3));
    }""", lane))


def test_a_1d_block_of_1024_lanes_wraps_into_readable_rows(page):
    pg = page.open("#/launch/0/program/1,0,0/op/0")
    pg.wait_for_selector('#block-canvas[data-key="1,0,0|0"]')
    px, rows, cols = (int(pg.get_attribute("#block-canvas", f"data-{k}")) for k in ("px", "rows", "cols"))
    assert px >= 8 and rows > 1 and rows * cols >= BLOCK and cols < BLOCK
    assert pg.locator("#block-canvas").bounding_box()["height"] >= rows * px - 1
    assert f"{BLOCK} lanes wrapped into rows of {cols}" in pg.inner_text("#block-note")
    # program 1 covers offsets 1024..2047 of 1500: lane k is active exactly when 1024 + k < 1500
    for lane in (0, 100, N - BLOCK - 1, N - BLOCK, 700, BLOCK - 1):
        active = BLOCK + lane < N
        assert (block_pixel(pg, lane) != MASKED) == active, lane
    page.check("block-1d")
    docs_shot(pg, "block-1d", "#block-panel", page=False)


def test_the_background_reaches_the_bottom_of_a_short_page(page):
    pg = page.open("#/")
    pg.wait_for_selector("#launches tbody tr")
    height = pg.evaluate("document.body.getBoundingClientRect().height")
    assert height >= 900
    assert pg.evaluate("getComputedStyle(document.documentElement).backgroundColor") == "rgb(244, 245, 247)"
    page.check("short-page")


def test_a_slow_launch_switch_shows_loading_not_a_mixed_page(page):
    pg = page.open("#/launch/0")
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    assert "2" in pg.inner_text("#summary")
    held = []
    pg.route("**/api/launch/1/grid*", lambda route: held.append(route))
    pg.evaluate("location.hash = '#/launch/1'")
    pg.wait_for_selector('#launch-view[aria-busy="true"]', state="attached")
    pg.wait_for_function("() => document.querySelectorAll('#crumbs a, #crumbs span').length > 0")
    assert pg.locator("#loading").is_visible()
    for panel in ("#summary", "#grid-panel", "#tensor-panel"):
        assert not pg.locator(panel).is_visible(), panel       # nothing of launch 0 beside launch 1
    assert "#1" in pg.inner_text("#crumbs")
    pg.wait_for_function("() => true")
    for route in held:
        route.continue_()
    pg.unroute("**/api/launch/1/grid*")
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    assert pg.locator("#summary").is_visible() and pg.locator("#loading").is_hidden()
    assert "n=700" in pg.inner_text("#summary")
    assert "#1 copy_block" in pg.inner_text("#crumbs")


def test_the_program_table_shows_every_column_at_1280_and_1440(page):
    for width in (1440, 1280):
        page.page.set_viewport_size({"width": width, "height": 900})
        pg = page.open("#/launch/0/program/1,0,0/op/0")
        pg.wait_for_selector('#launch-view[aria-busy="false"]')
        box = pg.locator("#program-panel .ops-scroll")
        assert box.evaluate("(b) => b.scrollWidth <= b.clientWidth + 1"), width       # no hidden column
        for header in ("OOB", "Values"):
            th = pg.locator("#ops thead th", has_text=header).bounding_box()
            panel = box.bounding_box()
            assert th["x"] + th["width"] <= panel["x"] + panel["width"] + 1, (width, header)


def test_the_launch_list_gives_each_launch_its_verdict(browser):
    from kernels import broken as B
    triton_trace.reset()
    B.run_scale(B.scale_off_by_one, False)
    B.run_scale(B.scale_ok, True)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    p = Page(browser, srv.url)
    try:
        pg = p.open("#/")
        pg.wait_for_selector("#launches tbody tr")
        heads = pg.locator("#launches thead th").all_inner_texts()
        rows = [dict(zip(heads, r.locator("td").all_inner_texts())) for r in pg.locator("#launches tbody tr").all()]
        assert rows[0]["Worst"] == "out_of_bounds" and rows[1]["Worst"] == ""
        # 250 float32 in 4 programs of 64 lanes, each loaded and stored once: 1000 bytes per access kind over
        # 32 sectors of 32 bytes (programs 0-2: 8 full sectors; program 3: bytes 768..999, sectors 24..31)
        eff = float(rows[1]["Sector eff."].rstrip("%"))
        assert abs(eff - 100 * 1000 / 1024) < 0.1, rows[1]
        # 1 multiply per 8 bytes moved: far below any GPU's ridge point
        assert rows[0]["Bound"] == rows[1]["Bound"] == "memory"
        assert pg.title() == "triton_trace"
    finally:
        p.close()
        srv.stop()


@pytest.mark.parametrize("group_m", [1, 4])
def test_waves_show_the_tiles_group_m_runs_together(browser, group_m):
    """The GROUP_M example (bug 5): served with the script's simulated GPU (8 programs at once), the
    output coloured by wave shows which tiles run together: a row and a half of tiles with GROUP_M=1,
    a 4 x 2 block with GROUP_M=4."""
    from helpers import examples
    from helpers.web import canvas_cells
    from helpers.webcases import matmul_program_tile
    ex = examples.load("matmul_grouped")
    triton_trace.reset()
    torch.manual_seed(0)
    size, block, in_flight = 96, 16, 8
    ex.matmul(torch.randn(size, size), torch.randn(size, size), group_m, block=block)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0, analysis={"l2_bytes": 16 << 10, "programs_in_flight": in_flight})
    p = Page(browser, srv.url)
    try:
        pg = p.open("#/launch/0")
        pg.wait_for_selector('#launch-view[aria-busy="false"]')
        pg.select_option("#tensor", "2")                                  # c
        pg.select_option("#tensor-colour", "wave")
        pg.wait_for_selector('#tensor-canvas[data-key="all|2||"][data-colour="wave"]')
        cells = canvas_cells(pg)
        assert cells.shape[:2] == (size, size)
        n = (size // block) ** 2
        args = dict(M=size, N=size, K=size, BLOCK_M=block, BLOCK_N=block, GROUP_M=group_m)
        colour, wave = {}, {}
        for pid in range(n):
            pm, pn = matmul_program_tile(pid, **args)
            colour[pm, pn] = tuple(cells[pm * block + block // 2, pn * block + block // 2])
            wave[pm, pn] = pid // in_flight
        tiles = sorted(colour)
        for a in tiles:
            for b in tiles:
                assert (colour[a] == colour[b]) == (wave[a] == wave[b]), (a, b)
        first = sorted(t for t in tiles if wave[t] == 0)
        assert first == ([(0, c) for c in range(6)] + [(1, 0), (1, 1)] if group_m == 1
                         else [(r, c) for r in range(4) for c in range(2)])
        if group_m == 4:
            docs_shot(pg, "waves-group-m", "#tensor-panel", page=False)
    finally:
        p.close()
        srv.stop()


def test_the_compared_trace_says_what_the_fix_changed(browser, tmp_path):
    from kernels import broken as B
    for name, kernel, fixed in (("a", B.scale_off_by_one, False), ("b", B.scale_ok, True)):
        triton_trace.reset()
        B.run_scale(kernel, fixed)
        triton_trace.current_trace().save(tmp_path / f"{name}.ttrace")
    triton_trace.reset()
    srv = triton_trace.launch(trace=str(tmp_path / "a.ttrace"), block=False, port=0, compare=str(tmp_path / "b.ttrace"))
    p = Page(browser, srv.url)
    try:
        pg = p.open("#/launch/0")
        pg.wait_for_selector("#compare-card[data-ready]")
        # "<=" lets lane 250 load and store: 251 elements of 4 bytes each way, against 250 after the fix
        row = pg.locator('#compare-card tr[data-metric="load_bytes"] td').all_inner_texts()
        assert row[1:] == ["1,004", "1,000"]
        here = pg.locator("#compare-card li.new").all_inner_texts()
        assert sorted(here) == ["out_of_bounds on out · program (3, 0, 0) · line %d" % (B.marked_line(B.scale_off_by_one) + 1),
                                "out_of_bounds on x · program (3, 0, 0) · line %d" % B.marked_line(B.scale_off_by_one)]
        assert pg.locator("#compare-card li.gone").count() == 0
        p.check("compare-launch")
    finally:
        p.close()
        srv.stop()


def test_download_a_tensors_values_as_npy(page, tmp_path):
    import numpy as np
    pg = page.open("#/launch/0")
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    pg.select_option("#tensor", "1")                                  # y: every program's stores
    pg.wait_for_selector('#tensor-canvas[data-key="all|1||"]')
    with pg.expect_download() as got:
        pg.click("#tensor-npy")
    assert got.value.suggested_filename == "copy_block_y_ptr_all.npy"
    path = tmp_path / "y.npy"
    got.value.save_as(path)
    y = np.load(path)
    assert y.shape == (N,) and y.dtype == np.float64
    assert np.array_equal(y, INPUTS["x"].numpy().astype(np.float64))      # launch 0 copied x into y
    # one op of program 1: only its 476 active lanes hold a value, the rest is NaN
    pg.goto(pg.url.split("#")[0] + "#/launch/0/program/1,0,0/op/1")
    pg.wait_for_selector('#tensor-canvas[data-key="op|1|1,0,0|1"]')
    with pg.expect_download() as got:
        pg.click("#tensor-npy")
    got.value.save_as(path)
    y = np.load(path)
    assert np.isnan(y[:BLOCK]).all() and np.array_equal(y[BLOCK:], INPUTS["x"].numpy()[BLOCK:].astype(np.float64))
    page.check("download")


def test_the_page_follows_its_trace_file(browser, tmp_path):
    from kernels import broken as B
    path = tmp_path / "run.ttrace"
    triton_trace.reset()
    B.run_scale(B.scale_ok, True)
    triton_trace.current_trace().save(path)
    srv = triton_trace.launch(trace=str(path), block=False, port=0)
    p = Page(browser, srv.url)
    try:
        pg = p.open("#/")
        pg.wait_for_selector("#launches tbody tr")
        assert pg.locator("#launches td.kernel").all_inner_texts() == ["scale_ok"]
        triton_trace.reset()                                   # a new run writes the file again
        B.run_scale(B.scale_off_by_one, False)
        B.run_rows(B.rows_race, False)
        triton_trace.current_trace().save(path)
        pg.wait_for_function("() => document.querySelectorAll('#launches td.kernel').length === 2", timeout=20_000)
        assert pg.locator("#launches td.kernel").all_inner_texts() == ["scale_off_by_one", "rows_race"]
        p.check("reloaded")
    finally:
        p.close()
        srv.stop()
        triton_trace.reset()
