"""Issue 43 in the views: the compare view counts no skipped out-of-bounds store as written (bug 8), the page
writes a number as the command line does (bug 7), the IR view names the kernel's own file and lines (bug 9),
and a kernel from a notebook cell is "cell In[n]" as IPython's own traceback names it (bug 9): the truth is
the traceback IPython prints for an error raised in that cell, run in a real Jupyter kernel."""
from __future__ import annotations

import json
import os
import re

import pytest
import torch

import triton_trace
from triton_trace.analysis.units import nbytes
from helpers import examples
from helpers.paths import ROOT
from helpers.source import line_of
from helpers.web import all_programs, served
from kernels import planted
from kernels.planted import masked, one_past_the_end, traced

N = 100


@pytest.fixture(scope="module")
def past_and_fixed():
    past, _, out_past = traced(one_past_the_end, n=N)
    fixed, _, out_fixed = traced(masked, n=N)
    assert torch.equal(out_past, out_fixed)            # what the storages hold: no element differs
    return past, fixed


def test_the_compare_views_diff_skips_out_of_bounds_stores(past_and_fixed, make_client):
    past, fixed = past_and_fixed
    client = make_client(past, compare=fixed)
    d = client.get("/api/launch/0/diff/1").get_json()
    assert d["name"] == "out_ptr"
    assert (d["compared"], d["differing"], d["only_a"], d["only_b"]) == (N, 0, 0, 0)


@pytest.mark.browser
def test_the_compare_view_says_every_written_element_equals(browser, past_and_fixed):
    past, fixed = past_and_fixed
    with served(browser, past, compare=fixed) as p:
        pg = p.open("#/launch/0")
        all_programs(pg, 1)           # the launch opens on its out-of-bounds finding; then all programs
        pg.select_option("#tensor-colour", "diff")
        pg.wait_for_selector('#tensor-canvas[data-colour="diff"]')
        legend = pg.inner_text("#tensor-legend")
        assert f"all {N} written element(s) equal the compared trace's" in legend
        assert "written only here (0)" in legend
        p.check("compare-oob")


@pytest.mark.browser
def test_the_page_writes_bytes_as_the_report_does(browser):
    n = 3000                                           # 3000 float32 loaded and stored: 12,000 bytes each way
    tr, _, _ = traced(masked, n=n)
    table = triton_trace.analyze(tr, what_if=False).summary()
    assert "12 kB" in table.splitlines()[-1]
    with served(browser, tr) as p:
        pg = p.open("#/launch/0")
        pg.wait_for_selector("#summary .stat")
        stats = {s.locator("span").last.text_content(): s.locator("b").text_content()
                 for s in pg.locator("#summary .stat").all()}
        assert stats.get("loaded") == stats.get("stored") == nbytes(4 * n) == "12 kB", stats
        p.check("units")


def test_the_ir_view_names_the_kernels_file_not_the_cache(make_client, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))
    tr, _, _ = traced(masked, n=N)
    c = make_client(tr).get("/api/launch/0/compiled?target=sm_90").get_json()
    assert c["error"] is None and c["files"] == [os.path.abspath(planted.__file__)]
    text = "\n".join(c["stages"]["ttgir"]["lines"] + c["stages"]["ptx"]["lines"])
    assert str(tmp_path / "cache") not in text and "/modules/" not in text
    store = line_of(masked, "tl.store")
    assert f'loc("{c["files"][0]}":{store}:' in text and f"// planted.py:{store}" in text


# --------------------------------------------------------------------------------------------------------
CELLS = [
    "import json, torch, triton, triton.language as tl, triton_trace\n"
    "from triton_trace.view import answers as A, payload as P\n"
    "from triton_trace.view.compiledview import compiled_payload\n"
    "from triton_trace.view.lookup import TraceIndex",
    # the kernel's cell, ending in an error whose traceback says how IPython names the cell
    "@triton.jit\n"
    "def shift(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    x = tl.load(x_ptr + offs + 1, mask=offs < n)\n"
    "    tl.store(out_ptr + offs, x, mask=offs < n)\n"
    "raise RuntimeError('the cell that defines the kernel')",
    "x, out = torch.arange(100.0), torch.empty(100)\n"
    "triton_trace.trace(shift)[(2,)](x, out, 100, BLOCK=64)\n"
    "ti = TraceIndex(triton_trace.current_trace(), analyze=A.analyzer())\n"
    "launch, compiled = P.launch_payload(ti, 0), compiled_payload(ti, 0, 'sm_90')\n"
    "print(json.dumps({'files': launch['files'], 'source': launch['source']['file'],\n"
    "                  'messages': P.findings_payload(ti, 0)['message'], 'error': compiled['error'],\n"
    "                  'compiled_files': compiled['files'], 'ttgir': compiled['stages']['ttgir']['lines']}))",
]


@pytest.mark.slow
def test_a_notebook_kernel_is_named_as_ipython_names_its_cell(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))      # the kernel's compiles
    nbclient.NotebookClient(book, timeout=300, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": ROOT}}).execute()
    error = next(o for o in book.cells[1].outputs if o.output_type == "error")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    cell = re.search(r"Cell (In\[\d+\]), line 6", plain).group(1)     # IPython's name of the kernel's cell
    out = [o for o in book.cells[2].outputs if o.output_type == "stream" and o.name == "stdout"]
    assert out, book.cells[2].outputs
    got = json.loads(out[-1].text.strip().splitlines()[-1])
    assert got["files"] == [f"cell {cell}"] and got["source"] == f"cell {cell}"
    load_line = CELLS[1].splitlines().index("    x = tl.load(x_ptr + offs + 1, mask=offs < n)") + 1
    assert any(f"at cell {cell}, line {load_line} " in m for m in got["messages"]), got["messages"]
    assert not any("ipykernel" in m for m in got["messages"])
    assert got["error"] is None and got["compiled_files"] == [f"cell {cell}"]
    assert any(f'loc("cell {cell}":{load_line}:' in line for line in got["ttgir"])
    assert not any("ipykernel" in line or "/modules/" in line for line in got["ttgir"])


# --- bug 5: the GROUP_M example's effect where it is served --------------------------------------------------
@pytest.fixture(scope="module")
def grouped_matmul():
    ex = examples.load("matmul_grouped")
    triton_trace.reset()
    torch.manual_seed(0)
    a, b = torch.randn(96, 96), torch.randn(96, 96)               # the example's default size
    for group_m in (1, 4):
        ex.matmul(a, b, group_m)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace


def test_the_served_analysis_uses_the_scripts_l2(grouped_matmul):
    from triton_trace.view.app import create_app
    options = {"l2_bytes": 16 << 10, "programs_in_flight": 8, "what_if": True}     # the example's options
    want = triton_trace.analyze(grouped_matmul, **options).to_dict()["launches"]
    served_app = create_app(grouped_matmul, analysis=options).test_client()
    plain = create_app(grouped_matmul).test_client()
    got, default = [], []
    for i in range(2):
        got.append(served_app.get(f"/api/launch/{i}", headers={"X-TT-Client": "1"}).get_json())
        default.append(plain.get(f"/api/launch/{i}", headers={"X-TT-Client": "1"}).get_json())
    dram = [g["metrics"]["dram_bytes_predicted"] for g in got]
    assert dram == [w["metrics"]["dram_bytes_predicted"] for w in want]     # the page says what the script printed
    assert dram[1] < dram[0]                                                # and GROUP_M=4 moves fewer bytes
    # the GPU's own L2 holds these 72 KiB of inputs whole: without the options there is no GROUP_M effect,
    # which is why the page used to disagree with the printout
    assert default[0]["metrics"]["dram_bytes_predicted"] == default[1]["metrics"]["dram_bytes_predicted"]
    # the what-if hint of the row-order launch, on the page too
    hints = [h["message"] for h in got[0]["hints"]]
    assert any("GROUP_M=4 instead of 1 would cut predicted DRAM reads" in m for m in hints), hints


def test_unknown_analysis_options_name_the_valid_ones(grouped_matmul):
    from triton_trace.errors import TraceUsageError
    from triton_trace.view.app import create_app
    with pytest.raises(TraceUsageError, match="l2_bytes"):
        create_app(grouped_matmul, analysis={"l2_kib": 16})
