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
from helpers.web import READ, Page, Watched, cell_pixel, docs_shot, highlighted
from kernels import broken as B
from kernels import ui_extent as U
from kernels import value_bugs as V

pytestmark = pytest.mark.browser

OOB_RED = (220, 38, 38)          # frontend/evidence.js
MARK_INK = (17, 24, 39)
TWO_WRITERS = (249, 115, 22)
NAN_PINK = (236, 72, 153)        # frontend/tensorlegend.js
WRITER_RING, READER_RING = (234, 88, 12), (37, 99, 235)      # frontend/grid.js's RINGS
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
    # every program that stores a row someone else stores too: all four, not just the two the card names
    assert pg.get_attribute("#grid-canvas", "data-marks") == "0-3"
    assert pg.get_attribute("#grid-canvas", "data-writers") == "0-3"
    assert pg.inner_text('#fc-body [data-part="writers"]') == "4 writers: 0, 1, 2, 3"
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


def runs_of(text: str) -> list:
    """The ids a grid attribute lists ("0-2,4,6-7": runs of linear program ids)."""
    out = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out += range(int(a), int(b or a) + 1)
    return out


def grid_ring(pg, lin: int) -> tuple:
    """The colour one pixel inside the left edge of program ``lin``'s cell (a 1-D grid of one row): a
    finding's ring is drawn there, the cell's own colour shows there otherwise."""
    return tuple(pg.locator("#grid-canvas").evaluate("""(c, lin) => {
        const px = +c.dataset.px, dpr = c.width / parseFloat(c.style.width);
        const x = Math.floor((lin * px + 1) * dpr), y = Math.floor((px / 2) * dpr);
        return Array.from(c.getContext("2d").getImageData(x, y, 1, 1).data.slice(0, 3));
    }""", lin))


@pytest.fixture(scope="module")
def race8():
    """kernels/ui_extent.py's race: 8 writers, 2 readers of one row."""
    triton_trace.reset()
    U.run(triton_trace.trace(U.shared_row))
    tr = triton_trace.current_trace()
    triton_trace.reset()
    assert len(U.writers()) == 8 and len(U.readers()) == 2
    return tr


def check_extent(root, writers, readers):
    """The grid's marks and the card's extent line of the race, in one viewer (``root``: a page or the
    locator of a notebook output's root), against the kernel's own writers and readers."""
    grid = root.locator("#grid-canvas")
    assert runs_of(grid.get_attribute("data-writers")) == writers
    assert runs_of(grid.get_attribute("data-readers")) == readers
    assert runs_of(grid.get_attribute("data-marks")) == sorted(writers + readers)
    assert grid.get_attribute("data-mark-cells") == str(len(writers) + len(readers))
    # the extent line: the writers and readers by id, the row's elements, and every access to them (each
    # writer stores the row, each reader loads it)
    part = lambda name: root.locator(f'#fc-body .fc-extent [data-part="{name}"]').inner_text()
    assert part("writers") == f"{len(writers)} writers: {', '.join(map(str, writers))}"
    assert part("readers") == f"{len(readers)} readers: {', '.join(map(str, readers))}"
    accesses = (len(writers) + len(readers)) * U.N
    assert part("elements") == f"{U.N} elements at offsets 0..{U.N - 1} ({accesses:,} accesses)"
    assert root.locator('#fc-body .fc-extent [data-part="grid"]').count() == 0      # every program ringed


def test_a_race_of_eight_writers_rings_every_program_and_states_its_extent(browser, race8):
    """Eight programs store one row and two read it: the grid rings all eight writers and both readers,
    apart, and no other program, and the card's extent line counts them as the kernel's own branch
    conditions do."""
    writers, readers = U.writers(), U.readers()
    srv = triton_trace.launch(trace=race8, block=False, port=0)
    p = Page(browser, srv.url)
    p.page.set_viewport_size({"width": 1440, "height": 1000})
    try:
        pg = p.open("#/launch/0")
        pg.wait_for_selector('#finding-card[data-k="0"]')
        pg.wait_for_selector('#launch-view[aria-busy="false"]')
        assert pg.inner_text("#finding-card .fc-title .fk") == "race"
        check_extent(pg, writers, readers)
        # on the canvas itself: a red ring on each writer, blue on each reader, none on the other programs
        # (the selected program, a writer, keeps its ring outside the selection's)
        for lin in range(U.GRID):
            want = WRITER_RING if lin in writers else READER_RING if lin in readers else None
            got = grid_ring(pg, lin)
            assert (got == want) if want else got not in (WRITER_RING, READER_RING), (lin, got)
        legend = pg.inner_text("#grid-legend")
        assert "writers" in legend and "readers" in legend
        # every cell in view: the canvas fits the Programs panel at 1440 px, no sideways scrolling
        assert pg.locator("#grid-wrap").evaluate("(w) => w.scrollWidth <= w.clientWidth"), \
            pg.locator("#grid-wrap").evaluate("(w) => [w.scrollWidth, w.clientWidth]")
        p.check("finding-race-extent")
    finally:
        p.close()
        srv.stop()


def test_a_notebook_output_shows_the_same_extent(browser, race8, tmp_path):
    """The notebook's viewer (the same renderer, fed by the output's own payloads, offline) opens on the
    race with the same marks and extent line."""
    from triton_trace.view import notebook as nb
    page = tmp_path / "race8.html"
    page.write_text(nb.standalone_html(race8.launches[0]))
    w = Watched(browser, width=1440)
    try:
        w.page.goto(page.as_uri())
        root = w.page.locator(".tt-app.tt-embedded")
        root.locator('#finding-card[data-k="0"]').wait_for()
        root.locator('#launch-view[aria-busy="false"]').wait_for()
        check_extent(root, U.writers(), U.readers())
        w.check("notebook-race-extent")
    finally:
        w.ctx.close()
