"""Math rows of the Program card carry the values their float ops produced (view/mathrows.py over
record/checks/mathvalues.py): a softmax that forgets to subtract the row maximum overflows ``tl.exp`` in the
rows holding a 100.0; the program payload's exp row reads the Inf, the division's row the NaN, each range
and count as numpy computes them on the same inputs, and the exp line is where the stored NaN was born. In a
real Chromium, the exp row of the Program card shows "inf" and "born here"."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.model import KINDS
from helpers.web import Page

ROWS, N, BLOCK = 4, 40, 64
HOT = {1: [3, 30], 2: [7]}          # row -> columns holding 100.0


@triton.jit
def _naive_softmax(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + offs, mask=offs < n, other=0.0)
    num = tl.exp(x)                                                     # EXP
    tl.store(y_ptr + row * n + offs, num / tl.sum(num, axis=0), mask=offs < n)     # DIV


def _line(marker: str) -> int:
    src, first = inspect.getsourcelines(_naive_softmax.fn)
    return first + next(k for k, text in enumerate(src) if f"# {marker}" in text)


@pytest.fixture(scope="module")
def traced():
    triton_trace.reset()
    torch.manual_seed(3)
    x = torch.randn(ROWS, N)
    for r, cols in HOT.items():
        x[r, cols] = 100.0
    triton_trace.trace(_naive_softmax)[(ROWS,)](x, torch.empty(ROWS, N), N, BLOCK=BLOCK)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr, x


def _numpy_lines(x: torch.Tensor, row: int) -> dict:
    """line -> the float32 results of that line's ops in program ``row`` (every lane of its block)."""
    v = np.zeros(BLOCK, np.float32)
    v[:N] = x[row].numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        num = np.exp(v)
        return {_line("EXP"): num, _line("DIV"): num / num.sum(dtype=np.float32)}


def _math_rows(client, row: int) -> dict:
    r = client.get(f"/api/launch/0/program/{row},0,0")
    assert r.status_code == 200, r.get_data(as_text=True)[:300]
    o = r.get_json()["ops"]
    math = KINDS.index("math")
    return {o["line"][k]: {c: o[c][k] for c in ("vmin", "vmax", "vmean", "nan", "inf", "results", "born", "first")}
            for k in range(len(o["seq"])) if o["kind"][k] == math}


@pytest.mark.parametrize("row", range(ROWS))
def test_the_program_payloads_math_rows_carry_numpys_values(traced, make_client, row):
    trace, x = traced
    rows = _math_rows(make_client(trace), row)
    want = _numpy_lines(x, row)
    assert set(rows) == set(want)
    for ln, w in want.items():
        got, finite = rows[ln], np.isfinite(w)
        assert got["results"] == 1 and got["vmean"] is None
        assert got["nan"] == int(np.isnan(w).sum()) and got["inf"] == int(np.isinf(w).sum())
        np.testing.assert_allclose([got["vmin"], got["vmax"]], [w[finite].min(), w[finite].max()], rtol=1e-3)
        bad = np.flatnonzero(~finite)
        if len(bad):
            value = "nan" if np.isnan(w[bad[0]]) else "inf"
            assert got["first"]["lane"] == [int(bad[0])] and got["first"]["value"] == value
        else:
            assert got["first"] is None
    # the stored NaN was born in exp (every operand finite, the result not): only the exp row says so, and
    # only where this program's exp made one
    assert rows[_line("EXP")]["born"] == int(row in HOT)
    assert rows[_line("DIV")]["born"] == 0
    if row in HOT:
        assert rows[_line("EXP")]["first"]["op"] == "exp"


def test_a_program_past_the_cap_is_marked_not_kept(traced, make_client):
    trace, _ = traced
    launch = trace.launches[0]
    for e in launch.meta["math_values"]:      # as the recorder leaves a line past MAX_ENTRIES
        keep = 1
        for k in [k for k in e if k.startswith("p_")]:
            e[k] = e[k][:keep]
        e["left_out"] = ROWS - keep
    try:
        rows = _math_rows(make_client(trace), 2)
        assert {r["results"] for r in rows.values()} == {2}
        assert all(r["nan"] == -1 and r["vmin"] is None for r in rows.values())
    finally:
        launch.meta.pop("math_values")


@pytest.mark.browser
def test_the_exp_row_of_the_program_card_shows_inf(browser):
    triton_trace.reset()
    torch.manual_seed(3)
    x = torch.randn(ROWS, N)
    for r, cols in HOT.items():
        x[r, cols] = 100.0
    triton_trace.trace(_naive_softmax)[(ROWS,)](x, torch.empty(ROWS, N), N, BLOCK=BLOCK)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    srv = triton_trace.launch(trace=tr, block=False, port=0)
    page = Page(browser, srv.url)
    try:
        pg = page.open("#/launch/0/program/1,0,0/op/0")
        pg.wait_for_selector("#ops tbody tr[data-seq]")
        rows = pg.locator("#ops tbody tr[data-seq]")
        cells = {}
        for k in range(rows.count()):
            tds = rows.nth(k).locator("td")
            cells[(tds.nth(1).inner_text(), tds.nth(3).inner_text().split("\n")[0].strip())] = tds.nth(10)
        exp = cells[("math", str(_line("EXP")))]
        assert "2 Inf" in exp.inner_text() and "born here" in exp.inner_text()
        title = exp.get_attribute("title")
        assert "values from the ops' results" in title and "first non-finite: inf in exp at lane (3)" in title
        div = cells[("math", str(_line("DIV")))]
        assert "2 NaN" in div.inner_text() and "born here" not in div.inner_text()
        assert exp.locator(".flag.bad").count() == 2          # Inf and born here: flagged as a load's NaN/Inf are
        page.check("math-rows")
    finally:
        page.close()
        srv.stop()
