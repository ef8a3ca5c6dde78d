"""'Fed by' in a notebook output: a small matmul traced in a real Jupyter kernel (nbclient + ipykernel), its
output saved as a page and opened offline (file://) in a real Chromium; clicking C[i, j] lists the loads that
fed it, and they are row i of A and column j of B on every trip of the K loop, computed here from the
launch's own parameters. No request may leave the page, and no script may fail."""
from __future__ import annotations

import pytest

from helpers.web import Watched

pytestmark = [pytest.mark.browser, pytest.mark.slow]

M = N = K = 32
BM = BN = BK = 16
PROGRAM = (1, 0, 0)                 # rows 16..31, cols 0..15 of C
I, J = 17, 5                        # an element of its tile

SOURCE = f'''
import torch, triton, triton.language as tl
import triton_trace
from triton_trace.view import notebook as ttnb

@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :])
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)

a, b, c = torch.randn({M}, {K}), torch.randn({K}, {N}), torch.empty({M}, {N})
triton_trace.trace(mm)[({M // BM}, {N // BN})](a, b, c, {M}, {N}, {K}, BM={BM}, BN={BN}, BK={BK})
ttnb.show(triton_trace.current_trace().launches[0], program={PROGRAM})
'''


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SOURCE)])
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3").execute()
    outputs = book.cells[0].outputs
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, f"{errors[0].ename}: {errors[0].evalue}"
    html = "".join(o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {}))
    assert "tt-embedded" in html
    path = tmp_path_factory.mktemp("feeds") / "output.html"
    path.write_text(f'<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,"></head>'
                    f"<body>{html}</body></html>", encoding="utf-8")
    return path


def test_an_outputs_element_lists_the_loads_that_fed_it(browser, page):
    w = Watched(browser, width=1200)
    try:
        w.page.goto(page.as_uri())
        root = w.page.locator(".tt-app.tt-embedded")
        root.locator('#launch-view[aria-busy="false"]').wait_for()
        root.locator("#tensor").select_option("2")                  # c_ptr, as the opened program wrote it
        pid = ",".join(str(v) for v in PROGRAM)
        canvas = root.locator(f'#tensor-canvas[data-key="program|2|{pid}|"]')
        canvas.wait_for()
        px, ox, oy = (int(canvas.get_attribute(k)) for k in ("data-px", "data-ox", "data-oy"))
        canvas.click(position={"x": (J + ox + 0.5) * px, "y": (I + oy + 0.5) * px})
        feeds = root.locator(f'#tensor-feeds[data-index="{I},{J}"]')
        feeds.wait_for()
        assert root.locator("#error").is_hidden(), root.locator("#error").inner_text()
        text = feeds.inner_text()
        assert f"c_ptr[{I}, {J}] was written by store" in text and f"program ({', '.join(map(str, PROGRAM))})" in text
        items = feeds.locator("li button").all_inner_texts()
        trips = K // BK
        # A: row I, every column of the K loop; B: every row, column J; each read once per trip
        want = [("load a_ptr", f"{trips} of {trips} executions", f"row {I} · cols 0–{K - 1}", f"{K} element(s)"),
                ("load b_ptr", f"{trips} of {trips} executions", f"rows 0–{K - 1} · col {J}", f"{K} element(s)")]
        assert len(items) == len(want), items
        for item, parts in zip(sorted(items), want):
            assert all(p in item for p in parts), (item, parts)
        # the first one outlines its K elements of A, over all programs
        feeds.locator("li button").first.click()
        outlined = root.locator('#tensor-canvas[data-key="all|0||"][data-fed="0"]')
        outlined.wait_for()
        assert outlined.get_attribute("data-marks") == str(K)
        assert root.locator("#error").is_hidden(), root.locator("#error").inner_text()
    finally:
        w.check("notebook-feeds")
