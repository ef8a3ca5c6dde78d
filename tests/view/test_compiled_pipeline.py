"""Software pipelining in the Compiled panel: a matmul launched with num_stages=3 compiles (on this CPU, for
sm_90 and sm_80) its two tile loads into asynchronous copies, num_stages - 1 of each before the K loop (the
prologue) and one inside it (the steady state), and a wait after it that drains them; with num_stages=1 the
same loads stay plain loads and nothing is labelled. Checked through the compiled route's JSON, against the
TTGIR text itself (the lines the labels point at), and in Chromium.
"""
from __future__ import annotations

import pytest
import torch

import triton_trace
from helpers.source import line_of
from kernels.layouts import tiled_matmul as matmul_kernel
from helpers.web import docs_shot, served

M = N = K = 128
BM = BN = 64
BK = 32


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def trace():
    """Launch 0: num_stages=3; launch 1: num_stages=1."""
    triton_trace.reset()
    a, b = torch.randn(M, K), torch.randn(K, N)
    for stages in (3, 1):
        c = torch.empty(M, N)
        triton_trace.trace(matmul_kernel)[(M // BM, N // BN)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                                                               BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, num_stages=stages)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return tr


LOADS = (line_of(matmul_kernel, "a = tl.load"), line_of(matmul_kernel, "b = tl.load"))
LOOP = line_of(matmul_kernel, "for k in range")


@pytest.mark.parametrize("target", ["sm_90", "sm_80"])
def test_three_stages_put_two_copies_of_each_load_before_the_loop_and_one_in_it(make_client, trace, target):
    d = make_client(trace).get(f"/api/launch/0/compiled?target={target}").get_json()
    assert d["error"] is None and d["resources"]["num_stages"] == 3
    ttgir = d["stages"]["ttgir"]["lines"]
    (loop,) = d["pipelines"]
    assert loop["line"] == LOOP and "scf.for" in ttgir[loop["ir_line"] - 1] and ttgir[loop["end_line"] - 1].strip().startswith("}")
    assert "num = 0" in ttgir[loop["drain_line"] - 1] and loop["drain_line"] > loop["end_line"]
    assert [(x["line"], x["prologue"], x["steady"], x["epilogue"]) for x in loop["loads"]] == [(ln, 3 - 1, 1, 0) for ln in LOADS]
    for ln in LOADS:
        ops = [o for o in d["ops"] if o["line"] == ln]
        assert [o["pipeline"] for o in ops] == ["prologue"] * (3 - 1) + ["steady"]
        for o in ops:       # each label sits on an async copy, before the loop or inside it as it says
            assert o["instruction"] == "cp.async" and "async_copy_global_to_local" in ttgir[o["ir_line"] - 1]
            inside = loop["ir_line"] < o["ir_line"] < loop["end_line"]
            assert inside == (o["pipeline"] == "steady") and (inside or o["ir_line"] < loop["ir_line"])
    (store,) = [o for o in d["ops"] if o["direction"] == "store"]
    assert store["pipeline"] is None


@pytest.mark.parametrize("target", ["sm_90", "sm_80"])
def test_one_stage_keeps_plain_loads_and_labels_nothing(make_client, trace, target):
    d = make_client(trace).get(f"/api/launch/1/compiled?target={target}").get_json()
    assert d["error"] is None and d["resources"]["num_stages"] == 1 and d["pipelines"] == []
    assert [(o["line"], o["instruction"], o["pipeline"]) for o in d["ops"] if o["direction"] == "load"] == \
        [(ln, "ld", None) for ln in LOADS]


@pytest.mark.browser
def test_the_panel_labels_the_pipelined_copies(browser, trace):
    with served(browser, trace) as page:
        pg = page.open("#/launch/0/compiled/sm_90/ttgir")
        pg.wait_for_selector("#compiled-panel[data-state=ready]", timeout=120_000)
        note = pg.inner_text("#compiled-pipeline")
        assert f"Software pipelined, 3 stages: the loop at line {LOOP}" in note
        assert f"lines {LOADS[0]} and {LOADS[1]} ahead: before the loop 2 async copies each (prologue), inside it 1 each " \
               f"(steady state)" in note and "drains the rest (epilogue)" in note
        cells = pg.locator("#compiled-ops tbody td[data-pipeline]")
        assert [cells.nth(k).get_attribute("data-pipeline") for k in range(cells.count())] == \
            ["prologue", "prologue", "prologue", "prologue", "steady", "steady"]
        assert cells.nth(5).inner_text().replace("\n", "") == "cp.asyncsteady state"
        docs_shot(pg, "compiled-pipeline", "#compiled-panel", page=False)
        # one stage: plain loads, no note
        pg.evaluate("location.hash = '#/launch/1/compiled/sm_90/ttgir'")
        pg.reload()
        pg.wait_for_selector("#compiled-panel[data-state=ready]", timeout=120_000)
        assert "1 stages" in pg.inner_text("#compiled-resources")
        assert pg.locator("#compiled-pipeline").is_hidden()
        assert pg.locator("#compiled-ops tbody td[data-pipeline]").count() == 0
        page.check("compiled-pipeline")
