"""Driving the web UI in a real headless Chromium (the ``browser`` fixture of tests/conftest.py): pages that
record every request and every script or CSP error, a server of a trace, reading the views' canvases, and
the documentation's screenshots."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np

import triton_trace
from helpers.paths import OUTPUT, ROOT

BROWSER_OUT = Path(OUTPUT) / "browser"      # a screenshot of every page a test checks
NOTEBOOK_OUT = Path(OUTPUT) / "notebook"
# TT_DOCS_SHOTS=1 saves the views the browser tests walk as the documentation's screenshots (docs/img/)
DOCS_IMG = Path(ROOT) / "docs" / "img"

WATCH = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));
"""


def trace_of(kernel, grid, *args, **kwargs):
    """The trace of one launch of ``kernel`` (a plain @triton.jit), leaving the current trace empty."""
    triton_trace.reset()
    triton_trace.trace(kernel)[grid](*args, **kwargs)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr


@contextmanager
def served(browser, trace, **launch_kwargs):
    """A Page on a server of ``trace``; both closed afterwards."""
    srv = triton_trace.launch(trace=trace, block=False, port=0, **launch_kwargs)
    p = Page(browser, srv.url)
    try:
        yield p
    finally:
        p.close()
        srv.stop()


class Page:
    """A page that records every request and every script or CSP error."""

    def __init__(self, browser, base: str):
        self.ctx = browser.new_context(viewport={"width": 1600, "height": 1250}, device_scale_factor=1)
        self.page = self.ctx.new_page()
        self.page.set_default_timeout(10_000)
        self.base = base.split("?")[0].rstrip("/")
        self.requests, self.errors, self.dialogs = [], [], []
        self.page.add_init_script(WATCH)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def open(self, hash_: str = "#/"):
        self.page.goto(f"{self.base}/{hash_}")
        return self.page

    def check(self, name: str):
        """Nothing left loopback, nothing failed; save a screenshot."""
        BROWSER_OUT.mkdir(parents=True, exist_ok=True)
        if self.page.evaluate("document.body.dataset.view") == "launch":
            self.page.wait_for_selector("#charts-panel[data-ready]")
        self.page.screenshot(path=str(BROWSER_OUT / f"{name}.png"), full_page=True)
        # blob: URLs of the page's own origin are in-memory objects (plotly's PNG download), not requests
        remote = [u for u in self.requests if not u.startswith("blob:" + self.base + "/")]
        outside = [u for u in remote if not u.startswith(self.base + "/")]
        assert not outside, f"requests left the server: {outside}"
        assert all(u.startswith("http://127.0.0.1:") for u in remote)
        assert self.page.evaluate("window.__csp") == []
        assert self.errors == [] and self.dialogs == []

    def close(self):
        self.ctx.close()


def tensor_key(pg, key: str):
    pg.wait_for_selector(f'#tensor-canvas[data-key="{key}"]')


def all_programs(pg, t: int):
    """Tensor ``t`` over all programs, once the launch has opened (on its worst finding, when it has one)."""
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    pg.select_option("#tensor", str(t))
    pg.click('#tensor-mode button[data-mode="all"]')
    tensor_key(pg, f"all|{t}||")


class Watched:
    """A page that records every request and every script error."""

    def __init__(self, browser, width=1000):
        self.ctx = browser.new_context(viewport={"width": width, "height": 1200}, device_scale_factor=1)
        self.page = self.ctx.new_page()
        self.page.set_default_timeout(15_000)
        self.requests, self.errors = [], []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)

    def check(self, name: str, allowed=("file://",)):
        NOTEBOOK_OUT.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(NOTEBOOK_OUT / f"{name}.png"), full_page=True)
        outside = [u for u in self.requests if not u.startswith(allowed) and not u.startswith(("data:", "blob:"))]
        assert not outside, f"requests left the page: {outside}"
        assert self.errors == []


def docs_shot(pg, name: str, *selectors: str, page: bool = True):
    """Screenshots of the page (1440 px wide; not with ``page=False``) and of single panels, for docs/ui.md."""
    if os.environ.get("TT_DOCS_SHOTS") != "1":
        return
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    pg.wait_for_selector("#charts-panel[data-ready]")
    if page:
        pg.screenshot(path=str(DOCS_IMG / f"{name}.png"))
    for sel in selectors:
        pg.locator(sel).screenshot(path=str(DOCS_IMG / f"{name}-{sel.strip('#').split('-')[0]}.png"))


# --------------------------------------------------------------------------------------------------------
# reading the views' canvases
# --------------------------------------------------------------------------------------------------------
UNTOUCHED = (233, 236, 240)     # frontend/tensor.js's colours
READ = (37, 99, 235)
STORED = (234, 88, 12)


def canvas_cells(where, selector: str = "#tensor-canvas") -> np.ndarray:
    """The colour at the centre of every cell of the tensor heatmap, as an (rows, cols, 3) array.
    ``where``: a Playwright page, or a locator of one viewer's root."""
    data = where.locator(selector).evaluate("""(c) => {
        const px = +c.dataset.px, R = +c.dataset.cellRows, C = +c.dataset.cellCols, dpr = c.width / parseFloat(c.style.width);
        const ox = +(c.dataset.ox || 0), oy = +(c.dataset.oy || 0);    // halo cells before the plane
        const img = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, out = [];
        for (let r = 0; r < R; r++) for (let k = 0; k < C; k++) {
            const x = Math.floor(((k + ox) * px + px / 2) * dpr), y = Math.floor(((r + oy) * px + px / 2) * dpr), i = (y * c.width + x) * 4;
            out.push(img[i], img[i + 1], img[i + 2]);
        }
        return [R, C, out];
    }""")
    R, C, flat = data
    return np.array(flat, dtype=np.int64).reshape(R, C, 3)


def cell_pixel(where, row: int, col: int, dx: float = 0.5, dy: float = 0.5, selector: str = "#tensor-canvas") -> tuple:
    """The colour at (dx, dy) of the way across cell (row, col) of a tensor canvas (plane cells; negative or
    past-the-end cells are the halo)."""
    return tuple(where.locator(selector).evaluate("""(c, [row, col, dx, dy]) => {
        const px = +c.dataset.px, dpr = c.width / parseFloat(c.style.width);
        const x = Math.floor(((col + +c.dataset.ox) * px + px * dx) * dpr), y = Math.floor(((row + +c.dataset.oy) * px + px * dy) * dpr);
        return Array.from(c.getContext("2d").getImageData(x, y, 1, 1).data.slice(0, 3));
    }""", [row, col, dx, dy]))


def highlighted(where, colour=READ) -> np.ndarray:
    return np.all(canvas_cells(where) == np.array(colour), axis=2)
