"""The storage view and one program's tiles side by side, in a real headless Chromium at 1440 px, and in a
notebook output (the same frontend, offline): what each canvas draws, cell by cell, against what the kernels
of tests/kernels/layouts.py touch by their own parameters and the tensors' own strides."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import triton_trace
from helpers.web import READ, STORED, UNTOUCHED, Page, Watched, canvas_cells, cell_pixel, docs_shot
from kernels import broken as B
from kernels import layouts as L

pytestmark = pytest.mark.browser

SIZE, BLOCK = 64, 32            # the matmul: 2 x 2 programs, each 2 trips of its K loop
PADDED = (12, 10, 16)           # launch 1: x = (12, 16)[:, :10], row stride 16 over 10 columns
TRANSPOSED = (5, 6, 4)          # launch 2: x = (5, 6).t(), its first 4 rows read
CONTEXT = (148, 163, 184)       # frontend/tiles.js
PADDING, NO_STORAGE = (254, 243, 199), (255, 255, 255)      # frontend/storage.js
OOB_RED = (220, 38, 38)         # frontend/evidence.js


def _trace():
    triton_trace.reset()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(SIZE, SIZE, generator=g), torch.randn(SIZE, SIZE, generator=g).t()    # B: column-major
    L.matmul(triton_trace.trace(L.tiled_matmul), a, b, block=BLOCK, block_k=BLOCK)          # launch 0
    read = triton_trace.trace(L.strided_read)
    m, n, p = PADDED
    L.read_rows(read, torch.randn(m, p)[:, :n])                                              # launch 1
    rows, cols, first = TRANSPOSED
    L.read_rows(read, torch.randn(rows, cols).t(), rows=first)                              # launch 2
    B.run_scale(B.scale_off_by_one, False)                                                   # launch 3: x[250] read
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr


@pytest.fixture(scope="module")
def traced():
    return _trace()


@pytest.fixture(scope="module")
def server(traced):
    srv = triton_trace.launch(trace=traced, block=False, port=0)
    yield srv
    srv.stop()


@pytest.fixture
def page(browser, server):
    p = Page(browser, server.url)
    p.page.set_viewport_size({"width": 1440, "height": 900})
    yield p
    p.close()


def tile(where, t: int) -> np.ndarray:
    return canvas_cells(where, f'#tiles-body canvas[data-tensor="{t}"]')


def painted(shape, colours) -> np.ndarray:
    """An (rows, cols, 3) picture: UNTOUCHED, with each (rows slice, cols slice, colour) painted in order."""
    out = np.empty(shape + (3,), np.int64)
    out[:] = UNTOUCHED
    for rows, cols, colour in colours:
        out[rows, cols] = colour
    return out


def check_tiles(root, step):
    """Program (1, 0): pid_m 1, pid_n 0. Every step: A rows 32..63, B columns 0..31, C rows 32..63 x cols 0..31;
    trip k: A columns and B rows 32k..32k+31, the rest of the program's elements as context."""
    M, N, ALL = slice(32, 64), slice(0, 32), slice(0, SIZE)
    if step is None:
        want = [[(M, ALL, READ)], [(ALL, N, READ)], [(M, N, STORED)]]
    else:
        k = slice(step * BLOCK, (step + 1) * BLOCK)
        want = [[(M, ALL, CONTEXT), (M, k, READ)], [(ALL, N, CONTEXT), (k, N, READ)], [(M, N, CONTEXT)]]
    for t, colours in enumerate(want):
        got = tile(root, t)
        assert got.shape == (SIZE, SIZE, 3), got.shape
        assert np.array_equal(got, painted((SIZE, SIZE), colours)), (step, t)


def test_one_programs_tiles_side_by_side_step_through_its_k_trips(page):
    pg = page.open("#/launch/0/program/1,0,0")
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    pg.click("#program-tiles")
    pg.wait_for_selector('#tiles-panel[data-key="1,0,0|all"]')
    names = pg.locator("#tiles-body figure h3").all_inner_texts()
    assert names == ["a_ptr 64×64", "b_ptr 64×64", "c_ptr 64×64"]
    # side by side: one row of three figures
    boxes = [pg.locator(f'#tiles-body figure[data-tensor="{t}"]').bounding_box() for t in range(3)]
    assert boxes[0]["x"] < boxes[1]["x"] < boxes[2]["x"] and len({round(b["y"]) for b in boxes}) == 1
    check_tiles(pg, None)
    assert pg.locator("#tiles-body .box").all_inner_texts() == ["rows 32–63 · cols 0–63", "rows 0–63 · cols 0–31",
                                                                "rows 32–63 · cols 0–31"]
    assert pg.inner_text("#tiles-step") == "all 2 trips"
    pg.click("#tiles-next")
    pg.wait_for_selector('#tiles-panel[data-key="1,0,0|0"]')
    check_tiles(pg, 0)
    pg.click("#tiles-next")
    pg.wait_for_selector('#tiles-panel[data-key="1,0,0|1"]')
    check_tiles(pg, 1)
    assert pg.inner_text("#tiles-step") == "trip 1 of 2" and pg.locator("#tiles-next").is_disabled()
    assert pg.locator("#tiles-body .box").all_inner_texts() == ["rows 32–63 · cols 32–63", "rows 32–63 · cols 0–31",
                                                                "not touched in this step"]
    assert "inferred" in pg.inner_text("#tiles-note") and "ops 3 (line" in pg.inner_text("#tiles-note")
    docs_shot(pg, "layout-tiles", "#tiles-panel", page=False)
    # another program keeps the panel open, back on every step
    pg.evaluate("location.hash = '#/launch/0/program/0,1,0'")
    pg.wait_for_selector('#tiles-panel[data-key="0,1,0|all"]')
    assert pg.locator("#tiles-body .box").all_inner_texts() == ["rows 0–31 · cols 0–63", "rows 0–63 · cols 32–63",
                                                                "rows 0–31 · cols 32–63"]
    page.check("layout-tiles")


def open_storage(pg, key: str):
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    pg.click("#tensor-storage")
    pg.wait_for_selector(f'#storage-canvas[data-key="{key}"]')


def test_the_storage_of_a_row_padded_tensor(page):
    m, n, p = PADDED
    pg = page.open("#/launch/1")
    open_storage(pg, "all|0||")
    got = canvas_cells(pg, "#storage-canvas")
    # a drawn row is a row of storage (the row stride): n logical elements read, then p - n of padding
    assert np.array_equal(got, painted((m, p), [(slice(None), slice(0, n), READ), (slice(None), slice(n, p), PADDING)]))
    fact = lambda key: pg.inner_text(f'#storage-facts [data-fact="{key}"] b')
    assert fact("strides") == f"({p}, 1)" and fact("storage") == f"{m * p} ({4 * m * p} B)"
    assert fact("padding") == f"{m * (p - n)} ({4 * m * (p - n)} B)"
    assert fact("where") == f"0 · {(m - 1) * (p - n)} · {p - n}" and fact("span") == f"0–{(m - 1) * p + n - 1}"
    px = int(pg.get_attribute("#storage-canvas", "data-px"))
    for col, what in ((n + 1, "padding"), (2, "x_ptr[1, 2] · loaded")):     # storage row 1: x's row 1, then padding
        pg.locator("#storage-canvas").hover(position={"x": (col + 0.5) * px, "y": 1.5 * px})
        off = p + col
        assert pg.inner_text("#storage-hover").startswith(f"storage offset {off} (bytes {4 * off}–{4 * off + 3}) · {what}")
    docs_shot(pg, "layout-storage", "#storage-panel", page=False)
    page.check("layout-storage-padded")


def test_the_storage_of_a_transposed_view_follows_the_selection(page):
    rows, cols, first = TRANSPOSED          # x[i, j] at i + cols * j: storage row j, column i
    pg = page.open("#/launch/2")
    open_storage(pg, "all|0||")
    got = canvas_cells(pg, "#storage-canvas")
    assert np.array_equal(got, painted((rows, cols), [(slice(None), slice(0, first), READ)]))
    assert "order 1, 0" in pg.inner_text("#storage-note")
    # an op selected: the storage follows the tensor view to the store into out (4 x 5, contiguous)
    pg.evaluate("location.hash = '#/launch/2/program/0,0,0/op/1'")
    pg.wait_for_selector('#storage-canvas[data-key="op|1|0,0,0|1"]')
    got = canvas_cells(pg, "#storage-canvas")
    assert np.array_equal(got, painted((first, rows), [(slice(None), slice(None), STORED)]))
    page.check("layout-storage-transposed")


def test_an_out_of_bounds_read_is_drawn_past_the_storages_end(page):
    n, block = 250, 64                      # x: 250 elements drawn 64 a row; lane n reads offset 250
    pg = page.open("#/launch/3")
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    pg.select_option("#tensor", "0")
    pg.click('#tensor-mode button[data-mode="all"]')
    open_storage(pg, "all|0||")
    assert pg.get_attribute("#storage-canvas", "data-halo") == "1"
    row, col = divmod(n, block)
    assert cell_pixel(pg, row, col, selector="#storage-canvas") == OOB_RED
    assert cell_pixel(pg, row, col - 1, selector="#storage-canvas") == READ
    assert cell_pixel(pg, row, col + 1, selector="#storage-canvas") == NO_STORAGE
    px = int(pg.get_attribute("#storage-canvas", "data-px"))
    pg.locator("#storage-canvas").hover(position={"x": col * px + px / 2, "y": row * px + px / 2})
    assert pg.inner_text("#storage-hover").startswith(f"storage offset {n}: outside the storage (0..{n - 1})")
    page.check("layout-storage-oob")


def test_the_notebook_output_draws_the_same_tiles_offline(browser, traced, tmp_path):
    from triton_trace.view import notebook as nb
    path = tmp_path / "tiles.html"
    path.write_text(nb.standalone_html(traced.launches[0], program=(1, 0, 0)), encoding="utf-8")
    w = Watched(browser, width=1440)
    try:
        w.page.goto(path.as_uri())
        root = w.page.locator(".tt-app")
        root.locator('#launch-view[aria-busy="false"]').wait_for()
        root.locator("#program-tiles").click()
        root.locator('#tiles-panel[data-key="1,0,0|all"]').wait_for()
        check_tiles(root, None)
        root.locator("#tiles-next").click()
        root.locator("#tiles-next").click()
        root.locator('#tiles-panel[data-key="1,0,0|1"]').wait_for()
        check_tiles(root, 1)
        root.locator("#tensor-storage").click()
        root.locator("#storage-canvas[data-key]").wait_for()
        assert root.locator("#error").is_hidden()
        w.check("layout-tiles-notebook")
    finally:
        w.ctx.close()


def test_the_tiles_panel_keeps_its_trip_in_the_url_and_steps_by_keys(page, browser, server):
    pg = page.open("#/launch/0/program/1,0,0")
    pg.wait_for_selector('#launch-view[aria-busy="false"]')
    assert "/tiles" not in pg.evaluate("location.hash")
    pg.click("#program-tiles")
    pg.wait_for_selector('#tiles-panel[data-key="1,0,0|all"]')
    assert pg.evaluate("location.hash") == "#/launch/0/program/1,0,0/tiles/all"
    # ] and [ anywhere on the page: from every step to the first, then trip by trip (clamped at the ends)
    for key, step in (("]", 0), ("]", 1), ("]", 1), ("[", 0)):
        pg.keyboard.press(key)
        pg.wait_for_selector(f'#tiles-panel[data-key="1,0,0|{step}"]')
        assert pg.evaluate("location.hash") == f"#/launch/0/program/1,0,0/tiles/{step}"
    # → and ← while the panel has focus; ↓ stays the op key
    pg.focus("#tiles-panel")
    pg.keyboard.press("ArrowRight")
    pg.wait_for_selector('#tiles-panel[data-key="1,0,0|1"]')
    check_tiles(pg, 1)
    url = pg.url
    assert url.endswith("#/launch/0/program/1,0,0/tiles/1")
    pg.keyboard.press("?")
    assert "loop trip of the Tiles panel" in pg.inner_text("#key-help")
    # the URL the panel wrote, in a page of its own: the same panel, program and trip
    other = Page(browser, server.url)
    try:
        p2 = other.page
        p2.goto(url)
        p2.wait_for_selector('#tiles-panel[data-state="open"][data-key="1,0,0|1"]')
        check_tiles(p2, 1)
        assert p2.inner_text("#tiles-step") == "trip 1 of 2"
        assert p2.get_attribute("#grid-canvas", "data-selected") == "1"
        other.check("layout-tiles-url")
    finally:
        other.close()
    page.check("layout-tiles-keys")


def test_the_storage_panel_reopens_from_its_url(page, browser, server):
    rows, cols, first = TRANSPOSED
    pg = page.open("#/launch/2/program/0,0,0/op/1")
    open_storage(pg, "op|1|0,0,0|1")
    assert pg.evaluate("location.hash") == "#/launch/2/program/0,0,0/op/1/storage/1:op"
    # the tensor view moves to x over all programs: the storage follows, and so does the URL
    pg.select_option("#tensor", "0")
    pg.click('#tensor-mode button[data-mode="all"]')
    pg.wait_for_selector('#storage-canvas[data-key="all|0||"]')
    assert pg.evaluate("location.hash") == "#/launch/2/program/0,0,0/op/1/storage/0:all"
    other = Page(browser, server.url)
    try:
        p2 = other.page
        p2.goto(pg.url)
        p2.wait_for_selector('#storage-panel[data-state="open"]')
        p2.wait_for_selector('#storage-canvas[data-key="all|0||"]')
        assert p2.input_value("#tensor") == "0"
        assert p2.get_attribute('#tensor-mode button[data-mode="all"]', "aria-pressed") == "true"
        assert np.array_equal(canvas_cells(p2, "#storage-canvas"), painted((rows, cols), [(slice(None), slice(0, first), READ)]))
        # the op's own view, as the first page had it
        p2.goto(server.url.split("?")[0].rstrip("/") + "/#/launch/2/program/0,0,0/op/1/storage/1:op")
        p2.wait_for_selector('#storage-canvas[data-key="op|1|0,0,0|1"]')
        other.check("layout-storage-url")
    finally:
        other.close()
    page.check("layout-storage-url-first")


VIRIDIS = [(68, 1, 84), (71, 44, 122), (59, 81, 139), (44, 113, 142), (33, 144, 141), (39, 173, 129), (92, 200, 99),
           (170, 220, 50), (253, 231, 37)]     # frontend/dom.js's stops


def viridis(t: float) -> tuple:
    x = min(max(t, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(len(VIRIDIS) - 2, int(x))
    f = x - i
    return tuple(int(np.floor(a + (b - a) * f + 0.5)) for a, b in zip(VIRIDIS[i], VIRIDIS[i + 1]))


def js_number(v) -> str:
    """The hover's number: the payload's 6 significant digits, then dom.js's fmtNum (toPrecision(5))."""
    text = repr(float(f"{float(f'{float(v):.6g}'):.5g}"))
    return text[:-2] if text.endswith(".0") else text


def test_tile_and_storage_cells_show_the_recorded_values(page):
    g = torch.Generator().manual_seed(0)              # _trace()'s inputs, drawn again
    a = torch.randn(SIZE, SIZE, generator=g).numpy()
    pg = page.open("#/launch/0/program/1,0,0/tiles/1")
    pg.wait_for_selector('#tiles-panel[data-key="1,0,0|1"]')
    canvas = pg.locator('#tiles-body canvas[data-tensor="0"]')
    px = int(canvas.get_attribute("data-px"))
    for r, c in ((40, 37), (63, 32)):                 # trip 1 reads A[32:64, 32:64]
        canvas.hover(position={"x": (c + 0.5) * px, "y": (r + 0.5) * px})
        assert pg.inner_text("#tiles-hover") == f"a_ptr[{r}, {c}]: loaded · value {js_number(a[r, c])}"
    # by value: the trip's A cells on viridis over their finite range
    pg.select_option("#tiles-colour", "value")
    pg.wait_for_selector('#tiles-body canvas[data-tensor="0"][data-colour="value"]')
    seen = np.array([float(f"{v:.6g}") for v in a[32:64, 32:64].reshape(-1)])
    lo, hi = seen.min(), seen.max()
    for r, c in ((40, 37), (33, 60)):
        want = viridis((float(f"{a[r, c]:.6g}") - lo) / (hi - lo))
        assert cell_pixel(pg, r, c, selector='#tiles-body canvas[data-tensor="0"]') == want, (r, c)
    assert cell_pixel(pg, 40, 3, selector='#tiles-body canvas[data-tensor="0"]') == CONTEXT    # trip 0: context
    assert "value:" in pg.inner_text("#tiles-legend")
    # the storage of A beside the program's view: each cell's value in its hover
    pg.click("#tensor-storage")
    pg.wait_for_selector('#storage-canvas[data-key="program|0|1,0,0|"]')
    assert pg.locator("#storage-zoom").is_hidden()    # the whole storage fits: a drawn row is a row of A
    spx = int(pg.get_attribute("#storage-canvas", "data-px"))
    pg.locator("#storage-canvas").hover(position={"x": 37.5 * spx, "y": 40.5 * spx})
    text = pg.inner_text("#storage-hover")
    assert "a_ptr[40, 37] · loaded" in text and text.endswith(f"value {js_number(a[40, 37])}")
    page.check("layout-values")


def test_an_fp16_matmul_opens_every_panel_without_a_csp_violation(browser):
    """An fp16 dot's roofline reaches 1 PFLOP/s, past plotly's own SI tick labels (its 10^15 would be a
    <tspan> with a style attribute, which the page's Content-Security-Policy blocks): Page.check fails on any
    CSP violation or console error, after every panel has drawn."""
    triton_trace.reset()
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(SIZE, SIZE, generator=g).half(), torch.randn(SIZE, SIZE, generator=g).half()
    L.matmul(triton_trace.trace(L.tiled_matmul), a, b, block=BLOCK, block_k=BLOCK)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    p = Page(browser, srv.url)
    try:
        pg = p.open("#/launch/0/program/1,0,0/op/1/storage/1:op/tiles/all")
        pg.wait_for_selector('#storage-canvas[data-key="op|1|1,0,0|1"]')
        pg.wait_for_selector('#tiles-panel[data-key="1,0,0|all"]')
        pg.wait_for_selector("#charts-panel[data-ready]")
        ticks = pg.eval_on_selector_all("#chart-roofline .ytick text", "(els) => els.map((e) => e.textContent)")
        assert "1P" in ticks, ticks                       # the fp16 peak's decade, labelled as the others are
        for colour in ("program", "writers", "value"):
            pg.select_option("#tensor-colour", colour)
        pg.select_option("#storage-colour", "value")
        pg.select_option("#tiles-colour", "value")
        pg.click('#tensor-mode button[data-mode="all"]')
        pg.wait_for_selector('#tensor-canvas[data-key="all|1||"]')
        p.check("fp16-matmul-panels")
    finally:
        p.close()
        srv.stop()
