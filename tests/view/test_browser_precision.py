"""The Source panel's precision column in a real headless Chromium: a launch traced with the float64 shadow
shows each line's error, share and amplification, with the line where precision is lost (the log of a
value rounded next to 1) highlighted; a launch without the shadow shows no values and says how to get them.
The lines are the kernel's own (found in its source), the stored error numpy's, never the tool's."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers.source import marked_line
from helpers.web import Page, docs_shot

pytestmark = pytest.mark.browser

LOST_BG = "rgb(254, 226, 226)"       # frontend/style.css: .src-line.lost .p


@triton.jit
def log_of_one_plus(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    t = x + 1.0  # ADD
    y = tl.log(t)  # LOG
    tl.store(y_ptr + offs, y, mask=m)  # STORE


N, BLOCK = 256, 64


@pytest.fixture(scope="module")
def served():
    """Launch 0 traced with the shadow, launch 1 (the same call) without it; and y of launch 0."""
    x = np.random.default_rng(43).uniform(1e-7, 1e-4, N).astype(np.float32)
    y = torch.empty(N)
    triton_trace.reset()
    triton_trace.trace(shadow="float64")(log_of_one_plus)[(N // BLOCK,)](torch.from_numpy(x), y, N, BLOCK=BLOCK)
    triton_trace.trace(log_of_one_plus)[(N // BLOCK,)](torch.from_numpy(x), torch.empty(N), N, BLOCK=BLOCK)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=trace, block=False, port=0)
    yield srv, x, y.numpy().copy()
    srv.stop()


@pytest.fixture
def page(browser, served):
    p = Page(browser, served[0].url)
    p.page.set_viewport_size({"width": 1440, "height": 1000})
    yield p
    p.close()


def cell(pg, line: int):
    return pg.locator(f'#source .src-line[data-line="{line}"] .p')


def test_the_column_shows_each_lines_numbers_and_highlights_where_precision_is_lost(page, served):
    _, x, y = served
    add, log, store = (marked_line(log_of_one_plus, m) for m in ("# ADD", "# LOG", "# STORE"))
    pg = page.open("#/launch/0")
    pg.wait_for_selector('#source[data-precision="shown"]')
    # the one highlighted line is the log
    assert pg.eval_on_selector_all("#source .src-line.lost", "els => els.map(e => +e.dataset.line)") == [log]
    assert cell(pg, log).evaluate("e => getComputedStyle(e).backgroundColor") == LOST_BG
    assert cell(pg, add).evaluate("e => getComputedStyle(e).backgroundColor") != LOST_BG
    # the addition's rounding is (all but) all of y's error; the log amplifies it
    assert cell(pg, add).locator(".ps").inner_text() == "100% y_ptr"
    assert "precision is lost here" in cell(pg, log).get_attribute("title")
    assert "y_ptr's error" in cell(pg, add).get_attribute("title")
    # the store line's error is y's, as numpy computes it against log1p in float64 (3 significant digits)
    exact = np.array([math.log1p(v) for v in x.astype(np.float64)])
    _, e = np.frexp(exact)
    err = (np.abs(y.astype(np.float64) - exact) / 2.0 ** (np.maximum(e - 1, -126) - 23)).max()
    shown = float(cell(pg, store).locator(".pe").inner_text())
    assert shown == pytest.approx(err, rel=5e-3) and "ulps of fp32" in cell(pg, store).get_attribute("title")
    # a line with no floating op has an empty cell, and the header names the column
    assert cell(pg, marked_line(log_of_one_plus, "# STORE") - 3).inner_text() == ""
    assert "% of error" in pg.inner_text("#source .src-head")
    docs_shot(pg, "precision", "#source-panel", page=False)
    page.check("precision-column")


def test_without_the_shadow_the_header_says_how_to_get_it(page):
    pg = page.open("#/launch/1")
    pg.wait_for_selector('#source[data-precision="absent"]')
    head = pg.inner_text("#source .src-head")
    assert "shadow='float64'" in head and "--shadow float64" in head
    assert pg.locator("#source .src-line .p").count() == 0 and pg.locator("#source .src-line.lost").count() == 0
    page.check("precision-absent")
