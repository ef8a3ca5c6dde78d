"""A lock released right after the stores it guards, with no barrier between (release_without_barrier), in a
real headless Chromium: the finding card names the stores and the atomic, the tensor view draws the stored
elements other programs reach, coloured by writers and outlined, the grid rings the programs, and the lock is
one step away.

Expected values come from the kernel's own parameters (tests/kernels/sync_kernels.py's group_sums_locked):
program r adds its row into part[r % GROUPS] under lock[r % GROUPS]; a group of two programs hands its row
from one to the other, a group of one hands it to nobody.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import triton_trace
from helpers.source import marked_line
from helpers.web import Page, canvas_cells, cell_pixel, docs_shot
from kernels import sync_kernels as K

pytestmark = pytest.mark.browser

R, C, GROUPS = 7, 20, 4
MARK_INK = (17, 24, 39)                              # frontend/evidence.js
WRITERS = {1: (100, 116, 139), 2: (249, 115, 22)}    # evidence.js's WRITERS: one program, two programs
X, Y, PART, LOCK = range(4)                          # the kernel's tensor arguments


@pytest.fixture(scope="module")
def served(browser):
    triton_trace.reset()
    x = torch.randn(R, C)
    triton_trace.trace(K.group_sums_locked)[(R,)](x, torch.zeros(R, C), torch.zeros(GROUPS, C),
                                                  torch.zeros(GROUPS, dtype=torch.int32), C, GROUPS=GROUPS, BLOCK=32,
                                                  SEM="acq_rel")
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    yield srv
    srv.stop()


def _rings(pg) -> np.ndarray:
    R_, C_, flat = pg.locator("#tensor-canvas").evaluate("""(c) => {
        const px = +c.dataset.px, R = +c.dataset.cellRows, C = +c.dataset.cellCols, dpr = c.width / parseFloat(c.style.width);
        const img = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, out = [];
        for (let r = 0; r < R; r++) for (let k = 0; k < C; k++) {
            const x = Math.floor(((k + +c.dataset.ox) * px + px * 0.1) * dpr), y = Math.floor(((r + +c.dataset.oy) * px + px * 0.5) * dpr);
            const i = (y * c.width + x) * 4;
            out.push(img[i], img[i + 1], img[i + 2]);
        }
        return [R, C, out];
    }""")
    return np.all(np.array(flat).reshape(R_, C_, 3) == np.array(MARK_INK), axis=2)


def test_the_stores_a_release_follows_and_the_lock(browser, served):
    group = np.arange(R) % GROUPS
    writers = np.bincount(group, minlength=GROUPS)               # programs per group: 2, 2, 2, 1
    handed = writers > 1                                         # rows another program reads after the lock
    first = int(np.flatnonzero(handed[group])[0])                # the finding's program: the first that hands one
    page = Page(browser, served.url)
    try:
        pg = page.open("#/launch/0")
        pg.wait_for_selector('#finding-card[data-k="0"]')
        pg.wait_for_selector(f'#tensor-canvas[data-key="all|{PART}||"]')
        pg.wait_for_selector('#launch-view[aria-busy="false"]')
        assert pg.inner_text("#finding-card .fc-title .fk") == "release_without_barrier"
        # the program's store into part is selected: its ops are load x, store y, the lock's cas, load part,
        # store part (op 4), then the releasing xchg
        assert pg.evaluate("location.hash") == f"#/launch/0/program/{first},0,0/op/4"
        card = pg.inner_text("#fc-body")
        assert f"part_ptr at line {marked_line(K.group_sums_locked, '# STORE')}" in card
        assert f"{int(handed.sum()) * C} element(s) other programs reach" in card and "lock_ptr[0]" in card
        # the tensor: part over all programs, by writers; the rows a lock hands on outlined, the lone group's not
        assert pg.get_attribute("#tensor-canvas", "data-colour") == "writers"
        cells = canvas_cells(pg)
        for g in range(GROUPS):
            assert (cells[g] == np.array(WRITERS[int(writers[g])])).all(), g
        want = np.repeat(handed[:, None], C, axis=1)
        assert (_rings(pg) == want).all()
        assert pg.get_attribute("#tensor-canvas", "data-marks") == str(int(handed.sum()) * C)
        # the grid rings every program of a group of two
        ringed = np.flatnonzero(handed[group])
        assert pg.get_attribute("#grid-canvas", "data-marks") == "0-2,4-6" and list(ringed) == [0, 1, 2, 4, 5, 6]
        docs_shot(pg, "finding-release", "#finding-card", "#tensor-panel", page=False)
        # the atomic: the lock tensor, its element outlined, its accesses listed (the cas, then the xchg)
        pg.click('#fc-body button[data-step="element"]')
        pg.wait_for_selector(f'#tensor-canvas[data-key^="all|{LOCK}|"], #tensor-canvas[data-key^="program|{LOCK}|"]')
        pg.wait_for_selector('#tensor-touches[data-index="0"]')
        assert cell_pixel(pg, 0, 0, dx=0.1) == MARK_INK
        kinds = pg.locator("#tensor-touches li .kind").all_inner_texts()
        assert kinds[:2] == ["atomic_cas", "atomic_xchg"]
        # and back to the store
        pg.click('#fc-body button[data-step="store"]')
        pg.wait_for_selector(f'#tensor-canvas[data-key="all|{PART}||"]')
        assert (_rings(pg) == want).all()
        page.check("finding-release")
    finally:
        page.close()
