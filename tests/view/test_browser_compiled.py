"""The Compiled panel (frontend/compiled.js) end to end in a real headless Chromium: the launch's kernel compiled
on the server's CPU, its resources and memory ops, and its source linked both ways to the IR lines of each
stage, checked against the app's own JSON and against the kernel's source file read here; then the panel
reached from a program's op, a kernel that does not compile, and a notebook output that carries sm_90 only.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import torch

import triton_trace
from triton_trace.model import Trace
from helpers import examples
from helpers.web import Watched, served, trace_of
import kernels

pytestmark = pytest.mark.browser

KERNEL_FILE = Path(kernels.launch_styles.__file__).resolve()
READY = "#compiled-panel[data-state=ready]"
# the states the panel goes through, with its status line at each: to see "compiling…" however fast it is
WATCH_STATES = """() => {
  window.__states = [];
  const p = document.querySelector("#compiled-panel"), s = document.querySelector("#compiled-status");
  new MutationObserver(() => window.__states.push(p.dataset.state + "|" + s.textContent))
    .observe(p, { attributes: true, attributeFilter: ["data-state"] });
}"""


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    """Compiles go to this test's own disk cache."""
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def nested():
    """One launch of a kernel that calls a @triton.jit helper (out = 2 x^2 + 1)."""
    x = torch.randn(100)
    return trace_of(kernels.make_nested(), (4,), x, torch.empty_like(x), 100, BLOCK=32)


def source_lines(function: str) -> dict:
    """{line number: text} of ``function``'s lines in the kernels' source file, read here (not from a payload)."""
    text = KERNEL_FILE.read_text().splitlines()
    start = next(k for k, t in enumerate(text) if t.startswith(f"def {function}("))
    out = {start + 1: text[start]}
    for k in range(start + 1, len(text)):
        if text[k] and not text[k][0].isspace():
            break
        out[k + 1] = text[k]
    return out


def line_with(function: str, needle: str) -> tuple:
    found = [(n, t) for n, t in source_lines(function).items() if needle in t]
    assert len(found) == 1, found
    return found[0]


def compiled_json(trace, target: str) -> dict:
    r = triton_trace.create_app(trace).test_client().get(f"/api/launch/0/compiled?target={target}",
                                                          headers={"X-TT-Client": "1"})
    assert r.status_code == 200
    return r.get_json()


def ir_lines_of(P: dict, stage: str, file: int, line: int) -> set:
    return {i for i, s in enumerate(P["stages"][stage]["src"]) if s == [file, line]}


def highlighted_ir(pg) -> set:
    return {int(v) for v in pg.eval_on_selector_all("#compiled-ir .ir-line.hl", "(rows) => rows.map((r) => r.dataset.i)")}


def wait_selected(pg, key: str):
    pg.wait_for_selector(f'#compiled-ir[data-selected="{key}"]')


def first_highlight_in_view(pg) -> bool:
    return pg.evaluate("""() => {
      const box = document.querySelector("#compiled-ir"), row = box.querySelector(".ir-line.hl");
      const b = box.getBoundingClientRect(), r = row.getBoundingClientRect();
      return r.top >= b.top && r.bottom <= b.bottom;
    }""")


def layout_text(layout: dict) -> str:
    return f"{layout['kind']} " + " ".join(f"{k}=[{','.join(map(str, layout[k]))}]"
                                           for k in ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order"))


# ---------------------------------------------------------------------------------------------------------
def test_the_compiled_panel_links_source_and_ir_both_ways(browser, nested):
    load_line, load_text = line_with("nested_kernel", "tl.load(")
    store_line, store_text = line_with("nested_kernel", "tl.store(")
    helper_line, _ = line_with("_poly", "return ")
    with served(browser, nested) as p:
        pg = p.open("#/launch/0")
        pg.wait_for_selector("#charts-panel[data-ready]")
        assert pg.get_attribute("#compiled-panel", "data-state") == "closed"
        assert pg.is_hidden("#compiled-body")
        assert not [u for u in p.requests if "/api/launch/0/compiled" in u]        # nothing compiled until the panel opens
        pg.evaluate(WATCH_STATES)
        pg.click("#compiled-open")
        pg.wait_for_selector(READY, timeout=60_000)
        states = pg.evaluate("window.__states")
        assert states[0] == "loading|compiling for sm_90…" and states[-1].startswith("ready|"), states
        assert pg.evaluate("location.hash") == "#/launch/0/compiled/sm_90/ttgir"
        P = compiled_json(nested, "sm_90")                             # the app's answer (now from the disk cache)
        assert P["error"] is None and P["target"] == "sm_90"
        kfile = P["files"].index(str(KERNEL_FILE))

        # resources, on one line
        r, occ = P["resources"], P["resources"]["occupancy"]
        text = pg.inner_text("#compiled-resources")
        for part in (f"{r['num_warps']} warps", f"{r['num_stages']} stages", f"{r['registers']} registers per thread",
                     "no spills" if r["spill_bytes"] == 0 else "spilled", f"{occ['programs_per_sm']} programs",
                     f"limited by {occ['limited_by']}", f"Triton {r['triton']}"):
            assert part in text, (part, text)

        # the memory ops as compiled: the payload's, each at the line of the source file that has its tl.load / tl.store
        rows = pg.eval_on_selector_all("#compiled-ops tbody tr", "(trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent))")
        assert len(rows) == len(P["ops"]) == 2
        for row, op, (line, src) in zip(rows, P["ops"], [(load_line, load_text), (store_line, store_text)]):
            assert [op["direction"], op["file"], op["line"]] == [("load" if "load" in src else "store"), kfile, line]
            assert row == [str(line), src.strip(), op["op"], op["instruction"], f"{op['vector_bytes']} B",
                           layout_text(op["layout"]), "×".join(map(str, op["shape"])), op["element"]]

        # a source line: exactly the IR lines the payload maps to it, the first scrolled into view
        stage_lines = pg.locator("#compiled-ir .ir-line")
        assert stage_lines.count() == len(P["stages"]["ttgir"]["lines"])
        pg.click(f'#compiled-source .cl-src[data-file="{kfile}"][data-line="{load_line}"]')
        wait_selected(pg, f"{kfile}:{load_line}")
        want = ir_lines_of(P, "ttgir", kfile, load_line)
        assert want and highlighted_ir(pg) == want
        assert any(o["ir_line"] - 1 in want for o in P["ops"])          # the tt.load itself is among them
        pg.wait_for_function("() => { const b = document.querySelector('#compiled-ir'), r = b.querySelector('.ir-line.hl');"
                             " return r.getBoundingClientRect().top >= b.getBoundingClientRect().top; }")
        assert first_highlight_in_view(pg)
        assert pg.evaluate("location.hash") == f"#/launch/0/compiled/sm_90/ttgir/line/{kfile}:{load_line}"
        assert pg.locator("#compiled-ops tbody tr.sel").get_attribute("data-k") == "0"

        # an IR line of the helper: its source line, in the helper's own function
        k = min(ir_lines_of(P, "ttgir", kfile, helper_line))
        pg.click(f'#compiled-ir .ir-line[data-i="{k}"]')
        wait_selected(pg, f"{kfile}:{helper_line}")
        assert pg.get_attribute(f'#compiled-source .cl-src[data-line="{helper_line}"]', "class").split().count("cur") == 1
        assert highlighted_ir(pg) == ir_lines_of(P, "ttgir", kfile, helper_line)
        assert pg.locator("#compiled-ir .ir-line.cur").get_attribute("data-i") == str(k)

        # a row of the op table selects its line the same way
        pg.click('#compiled-ops tbody tr[data-k="1"]')
        wait_selected(pg, f"{kfile}:{store_line}")
        assert "cur" in pg.get_attribute(f'#compiled-source .cl-src[data-line="{store_line}"]', "class")
        assert highlighted_ir(pg) == ir_lines_of(P, "ttgir", kfile, store_line)

        # another stage keeps the line
        pg.click('#compiled-stage button[data-stage="ptx"]')
        pg.wait_for_selector('#compiled-ir[data-stage="ptx"]')
        wait_selected(pg, f"{kfile}:{store_line}")
        assert stage_lines.count() == len(P["stages"]["ptx"]["lines"])
        assert highlighted_ir(pg) == ir_lines_of(P, "ptx", kfile, store_line) != set()
        assert "PTX" in pg.inner_text("#compiled-ir-note") and "truncated" not in pg.inner_text("#compiled-ir-note")

        # another target: its own compile
        pg.select_option("#compiled-target", "sm_80")
        pg.wait_for_selector(f"{READY}[data-target=sm_80]", timeout=60_000)
        wait_selected(pg, f"{kfile}:{store_line}")
        Q = compiled_json(nested, "sm_80")
        assert ".target sm_80" in pg.inner_text("#compiled-ir") and Q["stages"]["ptx"]["lines"][5] == ".target sm_80"
        assert highlighted_ir(pg) == ir_lines_of(Q, "ptx", kfile, store_line)
        assert f"{Q['resources']['registers']} registers per thread" in pg.inner_text("#compiled-resources")
        assert pg.evaluate("location.hash") == f"#/launch/0/compiled/sm_80/ptx/line/{kfile}:{store_line}"

        pg.go_back()                                                   # Back: the sm_90 compile again
        pg.wait_for_selector(f"{READY}[data-target=sm_90]")
        assert pg.input_value("#compiled-target") == "sm_90"
        p.check("compiled")
        pg.click("#compiled-open")                                     # Hide
        pg.wait_for_selector("#compiled-panel[data-state=closed]")
        assert pg.evaluate("location.hash") == "#/launch/0"

        # the panel's place is a URL like the other views'
        pg = p.open(f"#/launch/0/compiled/sm_90/ttir/line/{kfile}:{store_line}")
        pg.reload()
        pg.wait_for_selector(f'{READY}[data-stage="ttir"]')
        wait_selected(pg, f"{kfile}:{store_line}")
        assert highlighted_ir(pg) == ir_lines_of(P, "ttir", kfile, store_line) != set()
        assert pg.get_attribute('#compiled-stage button[data-stage="ttir"]', "aria-pressed") == "true"
        p.check("compiled-ttir")


def test_a_memory_op_of_a_program_opens_its_compiled_line(browser, nested):
    load_line, _ = line_with("nested_kernel", "tl.load(")
    store_line, _ = line_with("nested_kernel", "tl.store(")
    lc = nested.launches[0]
    seqs = {a.kind: a.seq for a in lc.accesses(program=(1,))}
    with served(browser, nested) as p:
        pg = p.open("#/launch/0/program/1,0,0")
        pg.wait_for_selector("#ops tbody tr[data-seq]")
        assert pg.locator("#ops tbody .ir-link").count() == 2           # the load and the store; not the math
        assert pg.get_attribute("#compiled-panel", "data-state") == "closed"
        pg.click(f'#ops tbody tr[data-seq="{seqs["load"]}"] .ir-link')
        pg.wait_for_selector(READY, timeout=60_000)
        kfile = compiled_json(nested, "sm_90")["files"].index(str(KERNEL_FILE))
        wait_selected(pg, f"{kfile}:{load_line}")
        assert "cur" in pg.get_attribute(f'#compiled-source .cl-src[data-line="{load_line}"]', "class")
        assert pg.locator("#ops tbody tr.sel").get_attribute("data-seq") == str(seqs["load"])   # the op is selected too
        assert re.fullmatch(rf"#/launch/0/program/1,0,0/op/{seqs['load']}/compiled/sm_90/ttgir/line/(\d+:)?{load_line}",
                            pg.evaluate("location.hash"))
        # the arrow keys still walk the program's ops, and the panel stays open
        pg.keyboard.press("ArrowDown")
        pg.wait_for_selector(f'#ops tbody tr.sel[data-seq="{seqs["load"] + 1}"]')
        assert "/compiled/sm_90/ttgir" in pg.evaluate("location.hash")
        assert pg.get_attribute("#compiled-panel", "data-state") == "ready"
        pg.click(f'#ops tbody tr[data-seq="{seqs["store"]}"] .ir-link')
        wait_selected(pg, f"{kfile}:{store_line}")
        p.check("compiled-from-op")


def test_a_kernel_that_does_not_compile_says_why_in_the_panel(browser, nested):
    lc = nested.launches[0]
    broken = Trace((dataclasses.replace(lc, module=None),))
    P = compiled_json(broken, "sm_90")
    assert P["error"]
    with served(browser, broken) as p:
        pg = p.open("#/launch/0/compiled/sm_90/ttgir")
        pg.wait_for_selector("#compiled-panel[data-state=error]", timeout=60_000)
        assert P["error"] in pg.inner_text("#compiled-error")
        assert pg.is_hidden("#compiled-main") and pg.is_hidden("#error")     # in the panel, not the page's banner
        pg.wait_for_selector("#grid-canvas[data-px]")                  # the rest of the launch works as before
        p.check("compiled-error")


def test_a_notebook_output_carries_the_compiled_panel_for_sm90(browser, nested, tmp_path):
    from triton_trace.view import notebook as nb
    load_line, _ = line_with("nested_kernel", "tl.load(")
    page = tmp_path / "nested.html"
    page.write_text(nb.standalone_html(nested.launches[0]))
    w = Watched(browser, width=1400)
    w.page.goto(page.as_uri())
    root = w.page.locator(".tt-app.tt-embedded")
    root.locator("#grid-canvas[data-cols]").wait_for()
    root.locator("#compiled-open").click()
    root.locator(READY).wait_for()
    P = compiled_json(nested, "sm_90")
    kfile = P["files"].index(str(KERNEL_FILE))
    root.locator(f'#compiled-source .cl-src[data-line="{load_line}"]').click()
    root.locator(f'#compiled-ir[data-selected="{kfile}:{load_line}"]').wait_for()
    assert highlighted_ir(w.page) == ir_lines_of(P, "ttgir", kfile, load_line)
    assert root.locator("#compiled-ops tbody tr").count() == len(P["ops"])
    # another target is not in the output: the panel says so, and how to see it
    root.locator("#compiled-target").select_option("sm_80")
    root.locator("#compiled-panel[data-state=error]").wait_for()
    text = root.locator("#compiled-error").inner_text()
    assert "not in the notebook output" in text and "compiled?target=sm_80" in text and "sm_90 only" in text
    w.check("notebook-compiled")


def test_a_truncated_stage_says_so(browser, nested):
    """The server sends at most MAX_IR_LINES lines of a stage; a payload cut here to 50 stands in for a huge kernel."""
    shown = {}

    def cut(route):
        body = route.fetch().json()
        ptx = body["stages"]["ptx"]
        shown["total"] = ptx["total"]
        body["stages"]["ptx"] = {"lines": ptx["lines"][:50], "src": ptx["src"][:50], "total": ptx["total"], "truncated": True}
        route.fulfill(json=body)

    with served(browser, nested) as p:
        p.page.route(re.compile(r"/api/launch/0/compiled\?target=sm_90$"), cut)
        pg = p.open("#/launch/0/compiled/sm_90/ptx")
        pg.wait_for_selector(f'{READY}[data-stage="ptx"]', timeout=60_000)
        assert shown["total"] > 50
        assert pg.inner_text("#compiled-ir-note") == f"PTX: the first 50 of {shown['total']} lines (truncated)"
        assert pg.locator("#compiled-ir .ir-line").count() == 50
        p.check("compiled-truncated")


def test_the_panel_says_what_a_dot_became(browser):
    """tl.dot in fp32 with input_precision="ieee" (examples/matmul_grouped.py) gets no tensor cores: the
    panel says FMA, as the compiled PTX's own instructions at that line do (wgmma / mma.sync absent)."""
    from triton_trace.compiled import compile_launch
    from triton_trace.compiled.source import SAFE_PACKAGES
    ex = examples.load("matmul_grouped")
    triton_trace.reset()
    ex.matmul(torch.randn(32, 32), torch.randn(32, 32), 1)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    src = Path(examples.path("matmul_grouped")).read_text().splitlines()
    dot_line = next(k + 1 for k, t in enumerate(src) if "tl.dot(" in t)
    ptx = compile_launch(tr.launches[0], "sm_90", allowed_imports=SAFE_PACKAGES).ir["ptx"]
    assert "wgmma." not in ptx and "mma.sync" not in ptx and "fma.rn.f32" in ptx
    with served(browser, tr) as p:
        pg = p.open("#/launch/0/compiled/sm_90/ttgir")
        pg.wait_for_selector(READY, timeout=60_000)
        text = pg.inner_text("#compiled-resources")
        assert f"tl.dot at line {dot_line} → FMA: no tensor cores" in text
        p.check("compiled-dot")
