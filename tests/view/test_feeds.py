"""Dataflow provenance: the loads that fed one stored element (record/memory/dataflow.py records the facts,
view/feeds.py narrows them to the element's lane), through the feeds route and in real Chromium.

Every expectation is computed here from the kernel's own launch parameters: C[i, j] of a matmul reads row i
of A and column j of B on every trip of the K loop; a row sum's output reads that row only, never the other
rows its program loaded; a store of x alone lists no load of y.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers.source import line_of
from kernels.layouts import tiled_matmul as matmul_kernel
from helpers.web import Page, docs_shot

MARK_INK = (17, 24, 39)          # frontend/evidence.js


@triton.jit
def row_sums_kernel(x_ptr, out_ptr, R, C, sx, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=(rows[:, None] < R) & (cols[None, :] < C), other=0.0)
    tl.store(out_ptr + rows, tl.sum(x, axis=1), mask=rows < R)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, C, sx, so, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * sx + cols, mask=cols < C, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + r * so + cols, e / tl.sum(e, axis=0), mask=cols < C)


@triton.jit
def one_of_two_kernel(x_ptr, y_ptr, out_ptr, out2_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, x * 2.0, mask=m)
    tl.store(out2_ptr + offs, y + 1.0, mask=m)


@triton.jit
def growing_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Program p sums blocks 0..p of x: a loop whose trip count differs between the programs."""
    p = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for k in range(0, p + 1):
        acc += tl.load(x_ptr + k * BLOCK + offs)
    tl.store(out_ptr + p * BLOCK + offs, acc)


@triton.jit
def dot_transposed_kernel(a_ptr, b_ptr, c_ptr, N: tl.constexpr):
    """c = a @ b.T, with b's tile transposed by ``.T`` (a tensor property, not a builder op)."""
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    bt = tl.load(b_ptr + r[:, None] * N + r[None, :]).T
    tl.store(c_ptr + r[:, None] * N + r[None, :], tl.dot(a, bt))


M, N, K, BM, BN, BK = 32, 48, 64, 16, 16, 16


def _record(batch: bool) -> triton_trace.Trace:
    triton_trace.reset()
    tt = lambda fn: triton_trace.trace(batch=batch)(fn)
    a, b = torch.randn(M, K), torch.randn(N, K).t()           # B a transposed view: strides (1, K)
    c = torch.empty(M, N)
    tt(matmul_kernel)[(M // BM, N // BN)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                          BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK)
    x = torch.randn(10, 20)
    tt(row_sums_kernel)[(3,)](x, torch.empty(10), 10, 20, x.stride(0), ROWS=4, BLOCK=32)
    tt(softmax_kernel)[(6,)](torch.randn(6, 20), torch.empty(6, 20), 20, 20, 20, BLOCK=32)
    tt(one_of_two_kernel)[(3,)](torch.randn(40), torch.randn(40), torch.empty(40), torch.empty(40), 40, BLOCK=16)
    tt(growing_kernel)[(4,)](torch.randn(64), torch.empty(64), BLOCK=16)
    tt(dot_transposed_kernel)[(1,)](torch.randn(16, 16), torch.randn(16, 16), torch.empty(16, 16), N=16)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr


@pytest.fixture(scope="module", params=[True, False], ids=["batched", "one-at-a-time"])
def traced(request):
    return request.param, _record(request.param)


def _feeds(client, i: int, t: int, index) -> dict:
    r = client.get(f"/api/launch/{i}/feeds/{t}?index={','.join(str(v) for v in index)}")
    assert r.status_code == 200, r.get_json()
    return r.get_json()


def _fed(payload, name) -> list:
    return [f for f in payload["feeds"] if f["name"] == name]


def _elements(feed) -> set:
    return {tuple(ix) for ix in feed["indices"]}


@pytest.mark.parametrize("i, j", [(0, 0), (5, 7), (31, 47), (17, 20)])
def test_a_matmul_element_is_fed_by_its_row_of_a_and_its_column_of_b(make_client, traced, i, j):
    d = _feeds(make_client(traced[1]), 0, 2, (i, j))
    (w,) = d["writes"]
    assert (w["kind"], w["program"], w["lane"]) == ("store", [i // BM, j // BN, 0], [i % BM, j % BN])
    (a,), (b,) = _fed(d, "a_ptr"), _fed(d, "b_ptr")
    assert len(d["feeds"]) == 2
    assert _elements(a) == {(i, k) for k in range(K)} and _elements(b) == {(k, j) for k in range(K)}
    for f in (a, b):        # every trip of the K loop, each contributing one row (column) of its tile
        assert (f["trips"], f["of"], f["elements"], f["box"], f["role"], f["how"]) == (K // BK, K // BK, K, True, "value", "traced")
    assert a["ranges"] == [{"runs": [[i, i]], "count": 1}, {"runs": [[0, K - 1]], "count": 1}]
    assert b["maps"] == [[-1, 1]] and a["maps"] == [[0, -1]]
    assert a["line"] == line_of(matmul_kernel, "a = tl.load") and b["line"] == line_of(matmul_kernel, "b = tl.load")


@pytest.mark.parametrize("r", [0, 3, 4, 9])
def test_a_row_sum_is_fed_by_its_own_row_not_the_others_its_program_loaded(make_client, traced, r):
    d = _feeds(make_client(traced[1]), 1, 1, (r,))
    (x,) = d["feeds"]
    assert d["writes"][0]["program"] == [r // 4, 0, 0]
    assert _elements(x) == {(r, c) for c in range(20)}        # the masked lanes past column 20 are no element
    assert (x["trips"], x["maps"]) == (1, [[0, -1]])


def test_a_softmax_element_is_fed_by_its_whole_row(make_client, traced):
    d = _feeds(make_client(traced[1]), 2, 1, (4, 13))
    (x,) = d["feeds"]
    assert _elements(x) == {(4, c) for c in range(20)}
    # the element's own lane through exp and the division, the whole row through max and sum
    assert sorted(x["maps"]) == [[-1], [0]]


@pytest.mark.parametrize("k", [0, 17, 39])
def test_an_output_that_uses_one_input_lists_only_that_one(make_client, traced, k):
    client = make_client(traced[1])
    d = _feeds(client, 3, 2, (k,))
    assert [f["name"] for f in d["feeds"]] == ["x_ptr"] and _elements(d["feeds"][0]) == {(k,)}
    d2 = _feeds(client, 3, 3, (k,))
    assert [f["name"] for f in d2["feeds"]] == ["y_ptr"] and _elements(d2["feeds"][0]) == {(k,)}


@pytest.mark.parametrize("p", [0, 3])
def test_a_loop_whose_trips_differ_between_programs(make_client, traced, p):
    """Program p adds blocks 0..p. One program at a time the tags follow every trip; a batched chunk (all four
    programs) runs the loop masked, which merges values without their tags: then every lane of every earlier
    load of the line is named, for every program of the chunk."""
    batch, tr = traced
    d = _feeds(make_client(tr), 4, 1, (p * 16 + 5,))
    (x,) = d["feeds"]
    assert (x["trips"], x["of"]) == (p + 1, p + 1)
    if batch:
        assert x["how"] == "untraced" and _elements(x) == {(e,) for e in range((p + 1) * 16)}
    else:
        assert x["how"] == "traced" and _elements(x) == {(k * 16 + 5,) for k in range(p + 1)}


def test_a_transposed_operand_feeds_its_row(make_client, traced):
    """c[i, j] = sum_k a[i, k] * b[j, k]: row j of b, through the ``.T`` the dot's operand took."""
    d = _feeds(make_client(traced[1]), 5, 2, (3, 5))
    (a,), (b,) = _fed(d, "a_ptr"), _fed(d, "b_ptr")
    assert _elements(a) == {(3, k) for k in range(16)} and _elements(b) == {(5, k) for k in range(16)}


def test_the_facts_survive_a_trace_file(make_client, traced, tmp_path):
    path = tmp_path / "feeds.ttrace"
    traced[1].save(path)
    loaded = triton_trace.load(path)
    assert loaded.launches[0].meta["dataflow"] == traced[1].launches[0].meta["dataflow"]
    assert _feeds(make_client(loaded), 0, 2, (5, 7)) == _feeds(make_client(traced[1]), 0, 2, (5, 7))


def test_an_element_nothing_wrote_and_a_bad_index(make_client, traced):
    client = make_client(traced[1])
    d = _feeds(client, 0, 0, (3, 3))               # A is only read
    assert d["writes"] == [] and d["feeds"] == [] and d["recorded"]
    assert client.get("/api/launch/0/feeds/2?index=99,0").status_code == 400


# -- in Chromium ----------------------------------------------------------------------------------------------
def _rings(pg) -> np.ndarray:
    """Per cell of the tensor canvas, whether its ring (the outline tensor.js draws) is there: the ink a tenth
    of the way across the cell."""
    R, C, flat = pg.locator("#tensor-canvas").evaluate("""(c) => {
        const px = +c.dataset.px, R = +c.dataset.cellRows, C = +c.dataset.cellCols, dpr = c.width / parseFloat(c.style.width);
        const img = c.getContext("2d").getImageData(0, 0, c.width, c.height).data, out = [];
        for (let r = 0; r < R; r++) for (let k = 0; k < C; k++) {
            const x = Math.floor(((k + +c.dataset.ox) * px + px * 0.1) * dpr), y = Math.floor(((r + +c.dataset.oy) * px + px * 0.5) * dpr);
            const i = (y * c.width + x) * 4;
            out.push(img[i], img[i + 1], img[i + 2]);
        }
        return [R, C, out];
    }""")
    return np.all(np.array(flat).reshape(R, C, 3) == np.array(MARK_INK), axis=2)


def outlined(pg, launch: int, index: str, name: str, paint, shape) -> None:
    """Open an element of launch ``launch``'s output (tensor 1), click its one feed, and check the outlined cells
    of its input (tensor 0, of ``shape``) are what ``paint(want)`` marks."""
    pg.goto(pg.url.split("#")[0] + f"#/launch/{launch}/element/1:{index}")
    pg.wait_for_selector(f'#tensor-feeds[data-index="{index}"]')
    pg.click(f'#tensor-feeds button:has-text("{name}")')
    pg.wait_for_selector('#tensor-canvas[data-key="all|0||"][data-fed="0"]')
    want = np.zeros(shape, bool)
    paint(want)
    assert (_rings(pg) == want).all()


@pytest.mark.browser
def test_the_page_lists_the_feeds_and_outlines_them_on_the_inputs(browser):
    tr = _record(True)
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    page = Page(browser, srv.url)
    try:
        pg = page.open("#/launch/0/element/2:5,7")
        pg.wait_for_selector('#tensor-feeds[data-index="5,7"]')
        text = pg.inner_text("#tensor-feeds")
        assert "c_ptr[5, 7]" in text and "program (0, 0, 0)" in text
        assert "a_ptr" in text and "row 5 · cols 0–63" in text and f"{K // BK} of {K // BK} executions" in text
        assert "b_ptr" in text and "rows 0–63 · col 7" in text
        # A: row 5 outlined, nothing else (the picked C element is on another tensor)
        pg.click('#tensor-feeds button:has-text("a_ptr")')
        pg.wait_for_selector('#tensor-canvas[data-key="all|0||"][data-fed="0"]')
        rings = _rings(pg)
        want = np.zeros((M, K), bool)
        want[5, :] = True
        assert rings.shape == want.shape and (rings == want).all()
        assert pg.get_attribute("#tensor-canvas", "data-marks") == str(K)
        assert "the elements that fed c_ptr[5, 7]" in pg.inner_text("#tensor-legend")
        docs_shot(pg, "feeds", "#tensor-panel", page=False)
        # B: column 7
        pg.click('#tensor-feeds button:has-text("b_ptr")')
        pg.wait_for_selector('#tensor-canvas[data-key="all|1||"][data-fed="1"]')
        want = np.zeros((K, N), bool)
        want[:, 7] = True
        assert (_rings(pg) == want).all()
        # the same element with its program's tiles open (the URL names them): every input outlined at once
        pg.goto(pg.url.split("#")[0] + "#/launch/0/program/0,0,0/element/2:5,7/tiles/all")
        pg.wait_for_selector('#tiles-panel[data-key="0,0,0|all"]')
        pg.wait_for_selector(f'#tiles-body canvas[data-tensor="0"][data-marks="{K}"]')
        assert pg.get_attribute('#tiles-body canvas[data-tensor="1"]', "data-marks") == str(K)
        assert pg.get_attribute('#tiles-body canvas[data-tensor="2"]', "data-marks") == "0"
        assert "what fed the element" in pg.inner_text("#tiles-legend")
        docs_shot(pg, "feeds-tiles", "#tiles-panel", page=False)
        # another element forgets the outlines: C[20, 33] of program (1, 2, 0)
        pg.goto(pg.url.split("#")[0] + "#/launch/0/element/2:20,33")
        pg.wait_for_selector('#tensor-feeds[data-index="20,33"]')
        assert "program (1, 2, 0)" in pg.inner_text("#tensor-feeds")
        pg.wait_for_selector('#tensor-canvas[data-key^="all|2|"][data-fed=""]')
        # a row sum: out[5] is fed by row 5 of x (10 x 20), not by the other rows its program loaded
        outlined(pg, 1, "5", "x_ptr", lambda want: want.__setitem__((5, slice(0, 20)), True), (10, 20))
        # a softmax: out[4, 13] by the whole of row 4 (6 x 20)
        outlined(pg, 2, "4,13", "x_ptr", lambda want: want.__setitem__((4, slice(0, 20)), True), (6, 20))
        # out = x * 2 with y loaded beside it: out[17] by x[17] alone, and y is not listed
        pg.goto(pg.url.split("#")[0] + "#/launch/3/element/2:17")
        pg.wait_for_selector('#tensor-feeds[data-index="17"]')
        assert "x_ptr" in pg.inner_text("#tensor-feeds") and "y_ptr" not in pg.inner_text("#tensor-feeds")
        pg.click('#tensor-feeds button:has-text("x_ptr")')
        pg.wait_for_selector('#tensor-canvas[data-key="all|0||"][data-fed="0"]')
        rings, wrap = _rings(pg), int(pg.get_attribute("#tensor-canvas", "data-cell-cols"))
        want = np.zeros(rings.shape, bool)
        want[divmod(17, wrap)] = True
        assert (rings == want).all()
        page.check("feeds")
    finally:
        page.close()
        srv.stop()
