"""Findings first, in a real headless Chromium: a launch with findings opens on its worst one, and the
finding card walks finding -> line -> program -> element for an out-of-bounds, a race and a NaN kernel.

What the page draws is checked against values computed here from the kernels' own launch parameters (which
lane is past the end, which programs write which row, which element overflows), never against the tool.
"""
from __future__ import annotations

import pytest
import torch

import triton_trace
from helpers.source import marked_line
from helpers.web import READ, Page, cell_pixel, docs_shot, highlighted
from kernels import broken as B
from kernels import value_bugs as V

pytestmark = pytest.mark.browser

OOB_RED = (220, 38, 38)          # frontend/evidence.js
MARK_INK = (17, 24, 39)
TWO_WRITERS = (249, 115, 22)
NAN_PINK = (236, 72, 153)        # frontend/tensorlegend.js
N_SCALE, BLOCK_SCALE = 250, 64   # kernels/broken.py's run_scale


@pytest.fixture(scope="module")
def served(browser):
    triton_trace.reset()
    B.run_scale(B.scale_off_by_one, False)            # launch 0: one lane past the end of x
    B.run_rows(B.rows_race, False)                    # launch 1: programs 2r and 2r+1 both store row r
    x = torch.randn(6, 40)
    x[3, 7] = 120.0                                   # exp(120) overflows float32: inf / inf = NaN
    triton_trace.trace(V.softmax_no_max)[(6,)](x, torch.empty_like(x), 40, BLOCK=64)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    yield srv
    srv.stop()


@pytest.fixture
def page(browser, served):
    p = Page(browser, served.url)
    p.page.set_viewport_size({"width": 1440, "height": 1000})
    yield p
    p.close()


def opened(pg, li: int, program_lin: int, tensor_key: str):
    pg.goto(pg.url.split("#")[0] + f"#/launch/{li}")
    pg.wait_for_selector('#finding-card[data-k="0"]')
    pg.wait_for_selector(f'#tensor-canvas[data-key^="{tensor_key}"]')
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    assert pg.get_attribute("#grid-canvas", "data-selected") == str(program_lin)


def test_out_of_bounds_opens_on_the_lane_past_the_end(page):
    pg = page.open("#/")
    opened(pg, 0, 3, "op|0|3,0,0|0")
    assert pg.evaluate("location.hash") == "#/launch/0/program/3,0,0/op/0"
    assert pg.get_attribute("#grid-canvas", "data-metric") == "findings"      # not a uniform metric
    assert pg.get_attribute("#grid-canvas", "data-marks") == "3"
    assert pg.get_attribute("#source", "data-current") == str(marked_line(B.scale_off_by_one))
    assert pg.inner_text("#finding-card .fc-title .fk") == "out_of_bounds"
    # the elements program 3 loads inside x, blue; the lane at offset n in the halo at its would-be cell
    # of the view wrapped one block per row
    first = 3 * BLOCK_SCALE
    got = highlighted(pg, READ)
    assert got.shape == (-(-N_SCALE // BLOCK_SCALE), BLOCK_SCALE)
    assert got[3, : N_SCALE - first].all() and got.sum() == N_SCALE - first
    assert pg.get_attribute("#tensor-canvas", "data-halo") == "1"
    assert cell_pixel(pg, N_SCALE // BLOCK_SCALE, N_SCALE % BLOCK_SCALE) == OOB_RED
    assert "would-be" in pg.inner_text("#tensor-legend")
    # the op's block shows the same lane (lane 58 of 64) outside the tensor
    pg.wait_for_selector('#block-canvas[data-key="3,0,0|0"]')
    assert "1 active lane(s) outside 'x'" in pg.inner_text("#block-note")
    page.check("finding-oob")
    docs_shot(pg, "finding-oob", "#finding-card", "#tensor-panel")


def test_race_draws_the_writer_counts_and_both_programs(page):
    pg = page.open("#/")
    opened(pg, 1, 0, "all|1||")
    line = marked_line(B.rows_race)
    assert pg.get_attribute("#source", "data-current") == str(line)
    assert pg.get_attribute("#grid-canvas", "data-marks") == "0,1"           # both racing programs ringed
    assert pg.get_attribute("#tensor-canvas", "data-colour") == "writers"
    # out is 2 x 32; program p stores row p // 2, so every element has exactly two writers
    cells = pg.locator("#tensor-canvas")
    assert (cells.get_attribute("data-cell-rows"), cells.get_attribute("data-cell-cols")) == ("2", "32")
    for r in range(2):
        for c in (0, 13, 31):
            assert cell_pixel(pg, r, c) == TWO_WRITERS
    # the finding's example elements (row 0, the first 8 columns) outlined, their centres still coloured
    assert pg.get_attribute("#tensor-canvas", "data-marks") == "8"
    assert cell_pixel(pg, 0, 3, dx=0.1) == MARK_INK and cell_pixel(pg, 0, 3) == TWO_WRITERS
    assert cell_pixel(pg, 1, 3, dx=0.1) != MARK_INK
    # one card: element -> its accesses (two programs store it), then the other program
    pg.click('#fc-body button[data-step="element"][data-j="0"]')
    pg.wait_for_selector('#tensor-touches[data-index="0,0"]')
    stores = [t for t in pg.locator("#tensor-touches li").all_inner_texts() if t.startswith("store")]
    assert len(stores) == 2 and "program (0, 0, 0)" in stores[0] and "program (1, 0, 0)" in stores[1]
    pg.click('#fc-body button[data-step="program"][data-j="1"]')
    pg.wait_for_selector('#grid-canvas[data-selected="1"]')
    assert pg.evaluate("location.hash") == "#/launch/1/program/1,0,0"
    pg.click('#fc-body button[data-step="finding"]')                        # and back to the finding
    pg.wait_for_selector('#grid-canvas[data-selected="0"]')
    page.check("finding-race")
    docs_shot(pg, "finding-race", "#tensor-panel", page=False)


def test_nan_selects_its_birth_line_and_draws_the_element(page):
    pg = page.open("#/")
    opened(pg, 2, 3, "op|1|3,0,0|")
    born = marked_line(V.softmax_no_max)
    # the finding's op is the store (the next line); the line selected is where the NaN was born
    assert pg.get_attribute("#source", "data-current") == str(born)
    assert "born at line" in pg.inner_text("#fc-body")
    assert pg.get_attribute("#tensor-canvas", "data-colour") == "value"
    assert pg.get_attribute("#tensor-canvas", "data-marks") == "1"
    assert cell_pixel(pg, 3, 7) == NAN_PINK and cell_pixel(pg, 3, 7, dx=0.1) == MARK_INK
    assert cell_pixel(pg, 3, 8) != NAN_PINK
    docs_shot(pg, "finding-nan", "#finding-card", "#tensor-panel", page=False)
    # the line step keeps the birth line; a plain op click moves to the op's own line
    pg.click('#fc-body button[data-step="line"]')
    assert pg.get_attribute("#source", "data-current") == str(born)
    store_line = pg.locator('#ops tbody tr.sel td').nth(3).inner_text()
    assert store_line.startswith(str(born + 1))
    pg.locator("#ops tbody tr.sel td").first.click()
    pg.wait_for_selector(f'#source[data-current="{born + 1}"]')
    page.check("finding-nan")


def test_a_launch_without_findings_opens_without_a_card(browser):
    triton_trace.reset()
    B.run_scale(B.scale_ok, True)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    p = Page(browser, srv.url)
    try:
        pg = p.open("#/launch/0")
        pg.wait_for_selector('#launch-view[aria-busy="false"]')
        assert pg.locator("#finding-card").is_hidden()
        assert pg.evaluate("location.hash") == "#/launch/0"
        assert pg.get_attribute("#grid-canvas", "data-metric") != "findings"
        assert pg.title().startswith("scale_ok")
    finally:
        p.close()
        srv.stop()


def test_keys_walk_the_findings_and_go_to_a_program(page):
    pg = page.open("#/")
    opened(pg, 0, 3, "op|0|3,0,0|0")                 # the off-by-one mask: its load (x) and its store (out)
    load = marked_line(B.scale_off_by_one)
    assert pg.get_attribute("#source", "data-current") == str(load)
    pg.keyboard.press("n")
    pg.wait_for_selector('#finding-card[data-k="1"]')
    pg.wait_for_selector(f'#source[data-current="{load + 1}"]')          # the store, on the next line
    pg.wait_for_selector('#tensor-canvas[data-key="op|1|3,0,0|1"]')      # out, past its end too
    assert pg.get_attribute("#tensor-canvas", "data-halo") == "1"
    pg.keyboard.press("p")
    pg.wait_for_selector(f'#source[data-current="{load}"]')
    pg.keyboard.press("?")
    assert pg.locator("#key-help").is_visible()
    pg.keyboard.press("Escape")
    assert pg.locator("#key-help").is_hidden()
    pg.keyboard.press("g")
    pg.keyboard.type("(1, 0)")
    pg.keyboard.press("Enter")
    pg.wait_for_selector('#grid-canvas[data-selected="1"]')
    pg.wait_for_function("location.hash === '#/launch/0/program/1,0,0'")
    pg.fill("#goto-pid", "9, 0, 0")
    pg.press("#goto-pid", "Enter")
    pg.wait_for_selector("#error:not([hidden])")
    assert "outside the grid 4×1×1" in pg.inner_text("#error")
    pg.fill("#goto-pid", "x")
    pg.press("#goto-pid", "Enter")
    pg.wait_for_function("document.querySelector('#error').textContent.includes('is not a program id')")


def test_a_link_names_an_element_and_clicking_one_names_it(page):
    pg = page.open("#/")
    # the race launch: out is 2 x 32, row r stored by programs 2r and 2r+1
    pg.goto(pg.url.split("#")[0] + "#/launch/1/element/1:1,5")
    pg.wait_for_selector('#tensor-touches[data-index="1,5"]')
    assert pg.get_attribute("#tensor-canvas", "data-key") == "all|1||"
    stores = [t for t in pg.locator("#tensor-touches li").all_inner_texts() if t.startswith("store")]
    assert len(stores) == 2 and "program (2, 0, 0)" in stores[0] and "program (3, 0, 0)" in stores[1]
    assert pg.get_attribute("#tensor-canvas", "data-marks") == "1"
    assert cell_pixel(pg, 1, 5, dx=0.1) == MARK_INK
    # a click on another element puts it in the URL (a permalink), and lists its accesses
    canvas = pg.locator("#tensor-canvas")
    px, ox, oy = (int(canvas.get_attribute(f"data-{k}")) for k in ("px", "ox", "oy"))
    canvas.click(position={"x": (ox + 9) * px + px // 2, "y": (oy + 0) * px + px // 2})
    pg.wait_for_selector('#tensor-touches[data-index="0,9"]')
    assert pg.evaluate("location.hash") == "#/launch/1/element/1:0,9"
    assert cell_pixel(pg, 0, 9, dx=0.1) == MARK_INK
