"""Small multiples in a real headless Chromium at 1440 px: a 3-D tensor of a few planes opens as one panel per
plane, each coloured as the single plane is (by program, by access), captioned, and a click opens a panel as
the single plane. Program p of the kernel writes rows p..p+3 of plane p of y; every expected cell colour is
computed here (numpy for the cells, colorsys for the program colours), never read back from the tool."""
from __future__ import annotations

import colorsys
import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers.web import STORED, UNTOUCHED, Page, canvas_cells, docs_shot, tensor_key

pytestmark = pytest.mark.browser

B, R, C = 4, 8, 16


@triton.jit
def plane_rows_kernel(x_ptr, y_ptr, R: tl.constexpr, C: tl.constexpr):
    p = tl.program_id(0)
    r = tl.arange(0, R)[:, None]
    c = tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + p * R * C + r * C + c)
    tl.store(y_ptr + p * R * C + r * C + c, x * 2.0 + p, mask=(r >= p) & (r < p + 4))


def written() -> np.ndarray:
    p, r = np.arange(B)[:, None, None], np.arange(R)[None, :, None]
    return np.broadcast_to((r >= p) & (r < p + 4), (B, R, C))


def program_colour(lin: int) -> tuple:
    """frontend/dom.js's programColor: golden-angle hues in HSL, rounded half up."""
    rgb = colorsys.hls_to_rgb((lin * 137.508) % 360 / 360, (48 + lin % 3 * 8) / 100, 0.62)
    return tuple(math.floor(v * 255 + 0.5) for v in rgb)


@pytest.fixture(scope="module")
def server():
    triton_trace.reset()
    x, y = torch.randn(B, R, C, generator=torch.Generator().manual_seed(0)), torch.zeros(B, R, C)
    triton_trace.trace(plane_rows_kernel)[(B,)](x, y, R=R, C=C)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    yield srv, y.numpy()
    srv.stop()


def js_number(v) -> str:
    """The hover's number: the payload's 6 significant digits, then dom.js's fmtNum (toPrecision(5))."""
    text = repr(float(f"{float(f'{float(v):.6g}'):.5g}"))
    return text[:-2] if text.endswith(".0") else text


def panel(pg, k: int) -> np.ndarray:
    return canvas_cells(pg, f'#tensor-multiples canvas[data-index="{k}"]')


def picture(mask: np.ndarray, colour) -> np.ndarray:
    out = np.empty(mask.shape + (3,), np.int64)
    out[:] = UNTOUCHED
    out[mask] = colour
    return out


def test_small_multiples_draw_every_plane_and_open_one(browser, server):
    srv, y = server
    page = Page(browser, srv.url)
    try:
        page.page.set_viewport_size({"width": 1440, "height": 900})
        pg = page.open("#/launch/0")
        pg.wait_for_selector('#launch-view[aria-busy="false"]')
        pg.select_option("#tensor", "1")
        pg.wait_for_selector('#tensor-multiples[data-key="all|1||"]')
        assert pg.locator("#tensor-multiples figcaption").all_inner_texts() == [f"dim 0 = {k}" for k in range(B)]
        assert pg.locator("#tensor-canvas").is_hidden()
        want = written()
        # all programs: coloured by the program that wrote each element, plane p by program p
        for k in range(B):
            assert np.array_equal(panel(pg, k), picture(want[k], program_colour(k))), k
        # panels wrap in rows of a few, side by side
        boxes = [pg.locator(f'#tensor-multiples figure[data-index="{k}"]').bounding_box() for k in range(B)]
        assert boxes[0]["x"] < boxes[1]["x"] and round(boxes[0]["y"]) == round(boxes[1]["y"])
        pg.select_option("#tensor-colour", "auto")
        pg.select_option("#tensor-colour", "program")
        docs_shot(pg, "multiples", "#tensor-panel", page=False)
        # by access: every written cell in the store colour
        pg.select_option("#tensor-colour", "auto")
        pg.wait_for_selector('#tensor-multiples[data-key="all|1||"][data-colour="program"]')
        # hover: the element, and the value the kernel stored there (y[2, 3, 5])
        c = pg.locator('#tensor-multiples canvas[data-index="2"]')
        px = int(c.get_attribute("data-px"))
        c.hover(position={"x": 5.5 * px, "y": 3.5 * px})
        text = pg.inner_text("#tensor-hover")
        assert text.startswith("y_ptr[2, 3, 5] · stored") and f" · value {js_number(y[2, 3, 5])} · " in text
        assert "program (2, 0, 0)" in text
        # a click opens the panel as the single plane, at its index
        pg.click('#tensor-multiples figure[data-index="2"]')
        tensor_key(pg, "all|1||")
        assert pg.input_value('#plane-controls input[aria-label="index of dim 0"]') == "2"
        assert np.array_equal(canvas_cells(pg), picture(want[2], program_colour(2)))
        assert pg.locator("#tensor-multiples").is_hidden()
        # and the toggle brings the panels back, coloured by access in one program's selection
        pg.click("#tensor-multi")
        pg.wait_for_selector('#tensor-multiples[data-key="all|1||"]')
        pg.evaluate("location.hash = '#/launch/0/program/3,0,0'")
        pg.wait_for_selector('#tensor-multiples[data-key="program|1|3,0,0|"]')
        for k in range(B):
            assert np.array_equal(panel(pg, k), picture(want[k] & (k == 3), STORED)), k
        assert "Small multiples: 4 of the 4 planes along dim 0" in pg.inner_text("#tensor-note")
        page.check("small-multiples")
    finally:
        page.close()
