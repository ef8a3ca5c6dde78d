"""The JSON API through Flask's test client: every endpoint, its payload, and its errors."""
from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.request

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace import create_app, trace
from triton_trace.errors import TraceFileError, TraceUsageError
from triton_trace.model import Trace
from triton_trace.view import server as web
from triton_trace.view.tensorview import MAX_TENSOR_BYTES
from helpers import webcases as K
from helpers.source import line_of
import kernels
from kernels import planted


def strict_json(body: bytes):
    """Parse like a browser does: NaN and Infinity are not JSON."""
    def bad(name):
        raise AssertionError(f"payload contains {name}")
    return json.loads(body, parse_constant=bad)


@pytest.fixture(scope="module")
def mixed():
    """Launch 0: matmul with a transposed B; 1: the shift kernel with a planted out-of-bounds read;
    2: a 3-D grid."""
    triton_trace.reset()
    a, b, c, args = K.traced_matmul()
    K.traced_shift()
    x, y = torch.randn(2, 8, 16), torch.randn(2, 8, 16)
    kernels.sub3d(x, y, kernel=trace(kernels.make_grid3d()), block_m=4, block_n=8)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    return {"trace": tr, "a": a, "b": b, "c": c, "args": args}


@pytest.fixture(scope="module")
def client(mixed):
    c = create_app(mixed["trace"]).test_client()
    c.environ_base["HTTP_X_TT_CLIENT"] = "1"         # as the page sends it (app.py, CLIENT_HEADER)
    return c


def get(client, url, status=200):
    r = client.get(url)
    assert r.status_code == status, (url, r.status_code, r.get_data(as_text=True)[:300])
    assert r.mimetype == "application/json"
    return strict_json(r.get_data())


# ---------------------------------------------------------------------------------------------------------
# endpoints
# ---------------------------------------------------------------------------------------------------------
def test_trace_lists_launches(client, mixed):
    d = get(client, "/api/trace")
    L = d["launches"]
    assert L["kernel"] == ["matmul_kernel", "shift_kernel", "grid3d_kernel"]
    assert L["grid"][2] == [2, 2, 2]
    assert all(len(col) == 3 for col in L.values())
    assert L["findings"][0] == 0 and L["findings"][1] >= 1
    assert d["analysis"] == {"available": True, "error": None}
    assert d["metrics"]["key"][:5] == ["load_bytes", "store_bytes", "masked_share", "sector_efficiency", "findings"]
    assert len(d["metrics"]["label"]) == len(d["metrics"]["key"])


def test_launch_payload(client, mixed):
    d = get(client, "/api/launch/0")
    lc = mixed["trace"].launches[0]
    assert d["kernel"] == "matmul_kernel" and d["grid"] == list(lc.grid)
    t = d["tensors"]
    assert t["name"] == ["a_ptr", "b_ptr", "c_ptr"]
    assert t["strides"][1] == [1, 24]                      # the transposed view, as recorded
    loads = sum(int(x.mask.sum()) * x.elem_bytes for x in lc.accesses(kind="load", tensor="a_ptr"))
    assert t["load_bytes"][0] == loads and t["store_bytes"][2] == 40 * 30 * 4
    src = d["source"]
    for line in src["margin"]["line"]:                     # every op line is a line of the shown source
        text = src["lines"][line - src["first_line"]]
        assert "tl." in text or "+=" in text or "acc" in text
    load_line = src["lines"][lc.accesses(program=0)[0].line - src["first_line"]]
    assert "tl.load(a_ptrs" in load_line
    assert d["metrics"]["load_bytes"] == sum(t["load_bytes"])


def test_grid_metrics_match_the_trace(client, mixed):
    lc = mixed["trace"].launches[0]
    d = get(client, "/api/launch/0/grid")
    assert d["cols"] * d["rows"] == len(d["metrics"]["load_bytes"]) == lc.num_programs
    for p in range(lc.num_programs):
        acc = lc.accesses(program=p)
        want = sum(int(x.mask.sum()) * x.elem_bytes for x in acc if x.kind == "load")
        assert d["metrics"]["load_bytes"][p] == want
        lanes = sum(x.mask.size for x in acc)
        assert d["metrics"]["masked_share"][p] == pytest.approx(1 - sum(int(x.mask.sum()) for x in acc) / lanes, abs=1e-4)
        assert 0 < d["metrics"]["sector_efficiency"][p] <= 1
    assert d["ranges"]["load_bytes"] == [min(d["metrics"]["load_bytes"]), max(d["metrics"]["load_bytes"])]


def test_grid_slices_of_a_3d_grid(client):
    seen = set()
    for z in range(2):
        d = get(client, f"/api/launch/2/grid?z={z}")
        assert d["z"] == z and (d["cols"], d["rows"]) == (2, 2) and all(d["recorded"])
        seen.add(tuple(d["metrics"]["store_bytes"]))
    assert get(client, "/api/launch/2/grid?z=2", 404)["error"].startswith("z=2 is outside")
    get(client, "/api/launch/2/grid?z=x", 400)


def test_program_ops_in_order(client, mixed):
    lc = mixed["trace"].launches[0]
    d = get(client, "/api/launch/0/program/3,0,0")
    ops = lc.all_ops(program=3)
    assert d["program"] == [3, 0, 0] and d["total_ops"] == len(ops) and d["recorded"]
    o = d["ops"]
    assert o["seq"] == list(range(len(ops)))
    assert [triton_trace.KINDS[k] for k in o["kind"]] == [x.kind for x in ops]
    for i, x in enumerate(ops):
        if x.offsets is not None:
            assert o["active"][i] == int(x.mask.sum()) and o["lanes"][i] == x.mask.size
            assert o["bytes"][i] == int(x.mask.sum()) * x.elem_bytes
            sectors = np.unique(x.offsets[x.mask] * x.elem_bytes // 32)
            assert o["sectors"][i] == len(sectors)
        assert o["line"][i] == x.line
    page = get(client, "/api/launch/0/program/3?offset=2&limit=3")
    assert page["ops"]["seq"] == [2, 3, 4] and page["offset"] == 2 and page["total_ops"] == len(ops)


def tensor_cells(d):
    plane, cells = d["plane"], d["cells"]
    assert plane["cell"] == [1, 1]
    return {divmod(c, plane["cell_cols"]) for c in cells["cell"]}


def test_long_programs_come_in_pages(make_client):
    c = make_client(K.synthetic_long(2500))
    first = get(c, "/api/launch/0/program/0")
    assert first["total_ops"] == 2500 and first["limit"] == 2000 and first["ops"]["seq"] == list(range(2000))
    second = get(c, "/api/launch/0/program/0?offset=2000")
    assert second["ops"]["seq"] == list(range(2000, 2500)) and second["offset"] == 2000
    d = get(c, "/api/launch/0/tensor/0?mode=op&program=0&op=2300")
    assert d["cells"]["cell"] == [2300] and d["plane"]["wrap"] == 64
    assert get(c, "/api/trace")["limits"]["ops_per_page"] == 2000


def test_tensor_op_mode_uses_the_recorded_strides(client, mixed):
    """B is a transposed view: the op's lanes must land on the (k, n) tile the matmul indexing says."""
    args = mixed["args"]
    lc = mixed["trace"].launches[0]
    for pid in range(lc.num_programs):
        prog = get(client, f"/api/launch/0/program/{pid}")
        loads_b = [s for s, k, t in zip(prog["ops"]["seq"], prog["ops"]["kind"], prog["ops"]["tensor"]) if k == 0 and t == 1]
        union = set()
        for k_iter, seq in enumerate(loads_b):
            d = get(client, f"/api/launch/0/tensor/1?mode=op&program={pid}&op={seq}")
            _, pn = K.matmul_program_tile(pid, **args)
            ks = range(k_iter * args["BLOCK_K"], min(args["K"], (k_iter + 1) * args["BLOCK_K"]))
            ns = range(pn * args["BLOCK_N"], min(args["N"], (pn + 1) * args["BLOCK_N"]))
            assert tensor_cells(d) == {(k, n) for k in ks for n in ns}
            assert set(d["cells"]["kinds"]) == {1}
            union |= tensor_cells(d)
        want = K.matmul_loaded_b(pid, args)
        assert union == set(zip(*np.nonzero(want)))
        # the values shown are the recorded ones, which are the tensor's elements
        d = get(client, f"/api/launch/0/tensor/1?mode=op&program={pid}&op={loads_b[0]}")
        for c, v in zip(d["cells"]["cell"], d["cells"]["value"]):
            k, n = divmod(c, d["plane"]["cell_cols"])
            assert v == pytest.approx(float(mixed["b"][k, n]), rel=1e-5)


def test_tensor_all_mode_shows_the_tiling(client, mixed):
    args = mixed["args"]
    d = get(client, "/api/launch/0/tensor/2?mode=all")
    owner = {}
    for pid in range(6):
        pm, pn = K.matmul_program_tile(pid, **args)
        for m in range(pm * 16, min(40, pm * 16 + 16)):
            for n in range(pn * 16, min(30, pn * 16 + 16)):
                owner[(m, n)] = pid
    got = {divmod(c, 30): p for c, p in zip(d["cells"]["cell"], d["cells"]["program"])}
    assert got == owner
    assert set(d["cells"]["kinds"]) == {2} and set(d["cells"]["programs"]) == {1}
    a = get(client, "/api/launch/0/tensor/0?mode=all")
    assert max(a["cells"]["programs"]) == 2                # every row band of A is read by two programs


def test_tensor_program_mode_and_oob(client):
    d = get(client, "/api/launch/1/tensor/0?mode=program&program=3")
    assert d["oob_lanes"] == 1 and d["oob_examples"] == [200]
    assert d["plane"]["wrap"] == 64                        # a 1-D view wraps at the kernel's block
    assert d["elements"] == 7                             # elements 193..199; the 8th lane is outside


def test_tensor_planes_of_a_3d_tensor(client):
    d = get(client, "/api/launch/2/tensor/0?mode=all&rows=0&cols=2&index=0,5,0")
    assert d["plane"]["row_dim"] == 0 and d["plane"]["col_dim"] == 2
    assert (d["plane"]["rows"], d["plane"]["cols"]) == (2, 16)
    assert len(d["cells"]["cell"]) == 32 and d["elements_hidden"] == 2 * 8 * 16 - 32
    p = get(client, "/api/launch/2/tensor/2?mode=program&program=1,1,1")      # no index: the program's slice
    assert p["plane"]["index"][0] == 1 and p["elements_hidden"] == 0 and len(p["cells"]["cell"]) == 32


def test_tensor_payload_is_bounded_and_downsampled(make_client):
    big = K.synthetic_tiled(64, 64, 16, 16)
    c = make_client(big)
    for url in ("/api/launch/0/tensor/0?mode=all", "/api/launch/0/tensor/1?mode=program&program=3,4"):
        r = c.get(url)
        assert r.status_code == 200 and len(r.get_data()) < MAX_TENSOR_BYTES
        d = strict_json(r.get_data())
        assert d["plane"]["cell"][0] > 1 and d["plane"]["cell_rows"] * d["plane"]["cell_cols"] <= 1 << 15
    # downsampled "fill" is the share of each cell touched; all programs together touch every element
    d = strict_json(c.get("/api/launch/0/tensor/0?mode=all").get_data())
    assert d["elements"] == 1024 * 1019 and min(d["cells"]["fill"]) == 1.0


def test_tensor_payload_drops_columns_to_stay_under_the_bound(make_client):
    """A 1-D tensor of 2**15 elements shown element by element, each with a value: the worst case."""
    t = K.synthetic_tiled(128, 1, 256, 1, ragged=0)
    c = make_client(t)
    r = c.get("/api/launch/0/tensor/0?mode=all&wrap=256")
    assert r.status_code == 200 and len(r.get_data()) < MAX_TENSOR_BYTES
    d = strict_json(r.get_data())
    assert len(d["cells"]["cell"]) == 1 << 15


def test_findings_point_at_program_op_and_line(client, mixed):
    d = get(client, "/api/launch/1/findings")
    assert d["total"] >= 1 and not d["truncated"]
    k = d["kind"].index("out_of_bounds")
    line = line_of(planted.shift_kernel, "planted bug")
    assert d["program"][k] == [3, 0, 0] and d["line"][k] == line and d["op"][k] == 0 and d["tensor"][k] == "x_ptr"
    prog = get(client, "/api/launch/1/program/3,0,0")
    assert k in prog["findings"] and prog["metrics"]["findings"] >= 1
    assert get(client, "/api/launch/0/findings")["total"] == 0


def test_a_findings_extent_is_the_reports_and_the_grid_marks_every_program(make_client):
    """The race of kernels/ui_extent.py (8 writers, 2 readers): the findings payload carries the analysis
    report's extent for it unchanged, and its grid marks hold every writer and reader (counted from the
    kernel's branch conditions) as runs of linear program ids."""
    from kernels import ui_extent as U
    triton_trace.reset()
    U.run(trace(U.shared_row))
    tr = triton_trace.current_trace()
    triton_trace.reset()
    d = get(make_client(tr), "/api/launch/0/findings")
    k = d["kind"].index("race")
    report = [f for f in triton_trace.analyze(tr).to_dict()["findings"] if f["kind"] == "race" and f["launch"] == 0]
    assert len(report) == 1 and d["extent"][k] == report[0]["extent"]
    expand = lambda runs: [p for a, b in runs for p in range(a, b + 1)]
    g = d["evidence"][k]["grid"]
    assert expand(g["writers"]["ranges"]) == U.writers() and g["writers"]["count"] == len(U.writers())
    assert expand(g["readers"]["ranges"]) == U.readers() and g["readers"]["count"] == len(U.readers())
    assert expand(g["ranges"]) == sorted(U.writers() + U.readers()) and g["count"] == 10
    assert g["exact"] and g["writers"]["exact"] and g["readers"]["exact"]
    assert d["extent"][k]["writers"]["count"] == 8 and d["extent"][k]["readers"]["count"] == 2


def test_grid_marks_of_a_million_programs_are_a_few_runs():
    """A finding over 2**20 programs is its runs, cut at MARK_RUNS (and says so), never a list of ids."""
    from types import SimpleNamespace
    from triton_trace.view.evidence import MARK_RUNS, grid_marks
    n = 1 << 20
    ix = SimpleNamespace(grid=(n, 1, 1), num_programs=n, lin=np.arange(n, dtype=np.int64))
    every = {"extent": {"exact": True, "programs": {"count": n, "runs": 1, "ranges": [[[0, 0, 0], [n - 1, 0, 0]]]}}}
    g = grid_marks(ix, every, np.arange(n, dtype=np.int64))
    assert g["ranges"] == [[0, n - 1]] and g["count"] == n and g["exact"] and g["writers"] is None
    odd = {"extent": {"exact": True, "programs": {"count": n // 2, "runs": n // 2, "ranges": []}}}
    g = grid_marks(ix, odd, np.arange(1, n, 2, dtype=np.int64))
    assert g["count"] == n // 2 and g["runs"] == n // 2 and not g["exact"]
    assert g["ranges"] == [[p, p] for p in range(1, 2 * MARK_RUNS, 2)]
    assert len(json.dumps(g)) < 20 * MARK_RUNS


def test_charts(client, mixed):
    d = get(client, "/api/launch/0/charts")
    h = d["histograms"]["load_bytes"]
    assert len(h["edges"]) == len(h["counts"]) + 1 and sum(h["counts"]) == 6
    assert d["tensors"]["name"] == ["a_ptr", "b_ptr", "c_ptr"]
    r = d["roofline"]
    assert r["flops"] == 2 * 40 * 30 * 24 + 0 or r["flops"] >= 2 * 40 * 30 * 24
    assert r["arithmetic_intensity"] > 0 and r["peak_flops"] > 0 and r["peak_bandwidth"] > 0


def test_payloads_are_deterministic(client):
    for url in ("/api/trace", "/api/launch/0", "/api/launch/0/tensor/0?mode=all", "/api/launch/1/findings"):
        assert client.get(url).get_data() == client.get(url).get_data()


# ---------------------------------------------------------------------------------------------------------
# errors: always a 4xx JSON answer, never a 500
# ---------------------------------------------------------------------------------------------------------
BAD = [
    ("/api/launch/9", 404), ("/api/launch/-1", 404), ("/api/launch/x", 404), ("/api/launch/9/grid", 404),
    ("/api/launch/0/program/6,0,0", 404), ("/api/launch/0/program/0,1,0", 404), ("/api/launch/0/program/a,b", 400),
    ("/api/launch/0/program/1,2,3,4", 400), ("/api/launch/0/program/-1", 404), ("/api/launch/0/program/1e3", 400),
    ("/api/launch/0/program/99999999999999999999999", 400), ("/api/launch/0/program/0?offset=-1", 400),
    ("/api/launch/0/program/0?limit=0", 400), ("/api/launch/0/program/0?limit=100000", 400),
    ("/api/launch/0/tensor/7", 404), ("/api/launch/0/tensor/0?mode=evil", 400), ("/api/launch/0/tensor/0?mode=op", 400),
    ("/api/launch/0/tensor/0?mode=op&program=0", 400), ("/api/launch/0/tensor/0?mode=op&program=0&op=99", 404),
    ("/api/launch/0/tensor/0?mode=op&program=0&op=1", 400), ("/api/launch/0/tensor/0?mode=op&program=0&op=2", 400),
    ("/api/launch/0/tensor/0?mode=program", 400), ("/api/launch/0/tensor/0?rows=0&cols=0", 400),
    ("/api/launch/0/tensor/0?rows=5", 400), ("/api/launch/0/tensor/0?index=1", 400),
    ("/api/launch/2/tensor/0?index=5,0,0", 400), ("/api/launch/1/tensor/0?wrap=0", 400),
    ("/api/launch/1/tensor/0?wrap=abc", 400), ("/api/launch/0/grid?z=-1", 400), ("/api/launch/0/grid?z=1", 404),
    ("/api/nothing", 404), ("/api/launch/0/nothing", 404), ("/nothing", 404),
    ("/static/../triton_trace/view/server.py", 404), ("/static/..%2fserver.py", 404),
    ("/static/%2e%2e/%2e%2e/pyproject.toml", 404), ("/static//etc/passwd", 404), ("/static/app.js/..", 404),
    ("/static/..\\server.py", 404), ("/static/.%00./x", 404), ("/static/index.html%00.js", 404),
]


@pytest.mark.parametrize("url,status", BAD)
def test_bad_requests_get_a_json_4xx(client, url, status):
    d = get(client, url, status)
    assert d["status"] == status and isinstance(d["error"], str) and d["error"]


def test_wrong_method_is_a_json_405(client):
    r = client.post("/api/trace")
    assert r.status_code == 405 and strict_json(r.get_data())["status"] == 405


def test_fuzzed_parameters_never_500(client):
    rng = np.random.default_rng(0)
    junk = ["", "0", "-0", "1,", ",", "1,,1", "0x10", " 1", "1 ", "nan", "inf", "%00", "'; DROP", "<script>", "1" * 40,
            "2,1,1", "0,0,0,0", "９", "1.5", "-99999999999"]
    for _ in range(300):
        pick = lambda: junk[rng.integers(len(junk))]
        urls = [f"/api/launch/{rng.integers(0, 4)}/program/{pick()}?offset={pick()}&limit={pick()}",
                f"/api/launch/{rng.integers(0, 3)}/tensor/{rng.integers(0, 3)}?mode={rng.choice(['op', 'program', 'all', pick()])}"
                f"&program={pick()}&op={pick()}&rows={pick()}&cols={pick()}&index={pick()}&wrap={pick()}",
                f"/api/launch/{rng.integers(0, 4)}/grid?z={pick()}"]
        for url in urls:
            r = client.get(url)
            assert r.status_code < 500, (url, r.get_data(as_text=True))
            strict_json(r.get_data())


# ---------------------------------------------------------------------------------------------------------
# the page: static files, headers, token
# ---------------------------------------------------------------------------------------------------------
def test_page_and_static_files(client):
    r = client.get("/")
    assert r.status_code == 200 and r.mimetype == "text/html"
    html = r.get_data(as_text=True)
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", html, re.S)
    assert scripts and all(not s.strip() for s in scripts), "no inline script"
    assert not re.search(r"\son\w+\s*=", html), "no inline event handlers"
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "nothing from another origin"
    for src in re.findall(r"(?:src|href)=\"(/[^\"]+)\"", html):
        assert client.get(src).status_code == 200, src
    for name in ("app.js", "dom.js", "grid.js", "tensor.js", "detail.js", "charts.js"):
        r = client.get(f"/static/{name}")
        assert r.status_code == 200 and r.mimetype == "text/javascript"
        js = r.get_data(as_text=True)
        assert "innerHTML" not in js and "insertAdjacentHTML" not in js and "eval(" not in js
        assert "http://" not in js and "https://" not in js
    r = client.get("/vendor/plotly.min.js")
    assert r.status_code == 200 and len(r.get_data()) > 1_000_000
    guards = strict_json(client.get("/vendor/plotly-guards.json").get_data())["ids"]
    assert all(re.fullmatch(r"[0-9a-f]{16,128}", g) for g in guards)


def test_security_headers(client):
    for url in ("/", "/api/trace", "/static/app.js", "/api/launch/9"):
        r = client.get(url)
        csp = r.headers["Content-Security-Policy"]
        policy = dict((p.split(" ", 1) + [""])[:2] for p in (s.strip() for s in csp.split(";")))
        assert policy["default-src"] == "'self'" and policy["script-src"] == "'self'"
        assert "unsafe-" not in csp                          # no inline script or style, no eval
        assert policy["style-src"] == "'self'"
        assert policy["object-src"] == "'none'"
        for directive, sources in policy.items():            # no outside origin anywhere
            for src in sources.split():
                ok = src in ("'self'", "'none'", "data:") or (
                    directive == "frame-ancestors" and src in ("http://127.0.0.1:*", "http://localhost:*")) or (
                    directive == "img-src" and src == "blob:")      # plotly's PNG download, same page only
                assert ok, (directive, src)
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert client.get("/api/trace").headers["Cache-Control"] == "no-store"


def test_token_is_required_when_shared(mixed, make_client):
    c = make_client(mixed["trace"], token="s3cret-token")
    for url in ("/", "/api/trace", "/api/launch/0/grid", "/api/launch/0/tensor/0"):
        assert c.get(url).status_code == 403
        assert c.get(url + ("&" if "?" in url else "?") + "token=wrong").status_code == 403
        assert c.get(url, headers={"X-TT-Token": "wrong"}).status_code == 403
    # the page's code holds nothing from the trace, and a notebook's cross-site iframe cannot send the
    # token with it; the trace's data (every /api/ answer) still needs the token
    for url in ("/static/app.js", "/vendor/plotly.min.js", "/favicon.svg"):
        assert c.get(url).status_code == 200
    assert c.get("/api/trace", headers={"X-TT-Token": "s3cret-token"}).status_code == 200
    r = c.get("/?token=s3cret-token")
    assert r.status_code == 200
    # no cookie: one would be sent to every port of this host (another local app would receive it)
    assert "Set-Cookie" not in r.headers
    assert c.get("/api/trace").status_code == 403


def test_create_app_reads_trace_files(tmp_path, mixed, make_client):
    path = tmp_path / "t.ttrace"
    mixed["trace"].save(path)
    d = strict_json(make_client(str(path)).get("/api/trace").get_data())
    assert d["launches"]["kernel"][0] == "matmul_kernel"
    (tmp_path / "bad.ttrace").write_bytes(b"not a trace")
    with pytest.raises(TraceFileError):
        create_app(tmp_path / "bad.ttrace")
    with pytest.raises(TraceUsageError, match="Trace or a trace file path"):
        create_app(42)


def test_views_work_when_the_analysis_fails(mixed, monkeypatch, make_client):
    from triton_trace.view import answers

    def broken(trace):
        raise ValueError("an unusual trace")
    monkeypatch.setattr(answers, "analyzer", lambda options=None: broken)
    c = make_client(mixed["trace"])
    assert get(c, "/api/trace")["analysis"] == {"available": False, "error": "analysis failed: ValueError: an unusual trace"}
    d = get(c, "/api/launch/0")
    assert d["analysis_error"].startswith("analysis failed") and d["metrics"] == {}
    assert d["tensors"]["load_bytes"][0] > 0                     # from the trace itself
    g = get(c, "/api/launch/0/grid")
    assert all(v is None for v in g["metrics"]["sector_efficiency"]) and all(v > 0 for v in g["metrics"]["load_bytes"])
    assert get(c, "/api/launch/1/findings")["total"] == 0
    for url in ("/api/launch/0/program/1", "/api/launch/0/charts", "/api/launch/0/tensor/0?mode=all"):
        get(c, url)


def test_huge_strings_from_a_trace_file_are_clipped(make_client):
    from dataclasses import replace
    lc = K.synthetic_tiled(2, 2, 4, 4).launches[0]
    big = "x" * 100_000
    lc = replace(lc, kernel_name=big, error=big, args={big: big, "many": list(range(10_000))},
                 tensors=tuple(replace(t, name=big) for t in lc.tensors))
    c = make_client(Trace((lc,)))
    for url in ("/api/trace", "/api/launch/0", "/api/launch/0/tensor/0"):
        r = c.get(url)
        assert r.status_code == 200 and len(r.get_data()) < 20_000, url
    d = get(c, "/api/launch/0")
    assert len(d["kernel"]) == 1001 and len(d["args"]["many"]) == 200


def test_non_finite_values_are_sent_as_text(make_client):
    t = K.synthetic_tiled(2, 2, 4, 4, ragged=0)
    lc = t.launches[0]
    vals = lc.values.view(np.float32).copy()
    vals[:3] = [np.nan, np.inf, -np.inf]                           # the first three lanes of program (0, 0)
    from dataclasses import replace
    c = make_client(Trace((replace(lc, values=vals.view(np.uint8)),)))
    d = get(c, "/api/launch/0/tensor/0?mode=op&program=0,0&op=0")
    assert d["cells"]["value"][:3] == ["nan", "inf", "-inf"]


def test_empty_trace(make_client):
    c = make_client(Trace(()))
    assert strict_json(c.get("/api/trace").get_data())["launches"]["kernel"] == []
    assert c.get("/api/launch/0").status_code == 404


# ---------------------------------------------------------------------------------------------------------
# launch(): a real server on loopback
# ---------------------------------------------------------------------------------------------------------
def fetch(url, cookie=None):
    """(status, body, headers), sending the X-TT-Client header as the page does."""
    headers = {"X-TT-Client": "1", **({"Cookie": cookie} if cookie else {})}
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers


def test_launch_serves_and_stops(mixed, capsys):
    srv = triton_trace.launch(trace=mixed["trace"], block=False, port=0)
    try:
        assert srv.url.startswith("http://127.0.0.1:") and srv.port > 0
        status, body, _ = fetch(srv.url + "api/trace")
        assert status == 200 and strict_json(body)["launches"]["kernel"][0] == "matmul_kernel"
        assert srv.url in capsys.readouterr().out
        assert srv._httpd.socket.getsockname()[0] == "127.0.0.1"
    finally:
        srv.stop()
    with pytest.raises(OSError):
        fetch(srv.url + "api/trace")


def test_launch_takes_the_next_free_port(mixed, capsys, monkeypatch):
    first = triton_trace.launch(trace=mixed["trace"], block=False, port=0)
    monkeypatch.setattr(web, "DEFAULT_PORT", first.port)   # pretend the default port is the busy one
    try:
        second = triton_trace.launch(trace=mixed["trace"], block=False)
        try:
            assert second.port != first.port
            assert f"port {first.port} was taken" in capsys.readouterr().out
        finally:
            second.stop()
        with pytest.raises(TraceUsageError, match=f"port {first.port}"):
            triton_trace.launch(trace=mixed["trace"], block=False, port=first.port)
    finally:
        first.stop()


@pytest.mark.parametrize("port", [65536, -1, "http", 1.5])
def test_launch_refuses_a_bad_port_before_analysing(mixed, monkeypatch, port):
    """A bad port= is a TraceUsageError naming the port (socket.bind raised OverflowError/TypeError),
    and it comes before the trace is analysed, not after."""
    monkeypatch.setattr(web, "_warm", lambda ti: pytest.fail("analysed the trace before checking port="))
    with pytest.raises(TraceUsageError, match="is not a port number"):
        triton_trace.launch(trace=mixed["trace"], block=False, port=port)


def test_launch_shared_needs_the_token(mixed, tmp_path):
    path = tmp_path / "t.ttrace"
    mixed["trace"].save(path)
    srv = triton_trace.launch(trace=str(path), share=True, block=False, port=0)
    try:
        assert srv._httpd.socket.getsockname()[0] == "0.0.0.0"
        token = srv.url.split("token=")[1]
        assert len(token) >= 32
        base = f"http://127.0.0.1:{srv.port}"
        assert fetch(base + "/api/trace")[0] == 403
        status, _, headers = fetch(srv.url)
        assert status == 200 and "Set-Cookie" not in headers
        assert fetch(base + "/api/trace?token=" + token)[0] == 200
    finally:
        srv.stop()


def test_launch_uses_the_current_trace(mixed):
    K.traced_shift()
    srv = triton_trace.launch(block=False, port=0)
    try:
        assert strict_json(fetch(srv.url + "api/trace")[1])["launches"]["kernel"] == ["shift_kernel"]
    finally:
        srv.stop()


def test_block_defaults_to_not_blocking_only_in_ipython(mixed, monkeypatch):
    assert web._in_ipython() is False
    waited = []
    monkeypatch.setattr(web.Server, "wait", lambda self: (waited.append(self.url), self.stop()))
    srv = triton_trace.launch(trace=mixed["trace"], port=0)          # a script: blocks (in wait())
    assert waited == [srv.url]

    class FakeIPython:
        @staticmethod
        def get_ipython():
            return object()

    monkeypatch.setitem(sys.modules, "IPython", FakeIPython)
    srv = triton_trace.launch(trace=mixed["trace"], port=0)          # Jupyter / IPython: returns at once
    try:
        assert waited == [waited[0]] and fetch(srv.url + "api/trace")[0] == 200
    finally:
        srv.stop()
        srv.stop()


def test_an_ops_block_in_its_own_shape(make_client):
    """/api/launch/<i>/block: every lane of one op, checked against the kernel's own index arithmetic."""
    import kernels as KK
    src = torch.randn(24, 40).T                  # 40 x 24, non-contiguous: strides (1, 40)
    triton_trace.reset()
    KK.transpose(src, kernel=triton_trace.trace(KK.make_transpose()), block_m=8, block_n=16)
    tr = triton_trace.current_trace()
    triton_trace.reset()
    c = make_client(tr)
    b = get(c, "/api/launch/0/block/4,1,0/0")            # program (4, 1): the last row block, cut by the mask
    rm, rn = 4 * 8 + np.arange(8), 1 * 16 + np.arange(16)
    want_off = rm[:, None] * src.stride(0) + rn[None, :] * src.stride(1)
    want_mask = (rm[:, None] < 40) & (rn[None, :] < 24)
    assert (b["kind"], b["tensor"], b["shape"], b["grid"]) == ("load", "x_ptr", [8, 16], [8, 16])
    assert b["offset"] == want_off.reshape(-1).tolist() and b["mask"] == want_mask.reshape(-1).astype(int).tolist()
    want_out = (want_off < 0) | (want_off >= 40 * 24)                 # masked-off lanes may point past x
    assert b["active"] == int(want_mask.sum()) and b["oob"] == 0 and b["out"] == want_out.reshape(-1).astype(int).tolist()
    k = 3 * 16 + 5
    assert b["index"][k] == [int(rm[3]), int(rn[5])]
    assert b["value"][k] == pytest.approx(src[rm[3], rn[5]].item(), rel=1e-6)
    assert get(c, "/api/launch/0/block/4,1,0/1")["kind"] == "store"
    r = c.get("/api/launch/0/block/4,1,0/9")
    assert r.status_code == 404 and "no op 9" in r.get_json()["error"]


def test_the_diff_endpoint_needs_a_compared_trace(make_client):
    import kernels as KK
    x, y = torch.randn(300), torch.randn(300)
    traces = []
    for shift in (0.0, 1.0):
        triton_trace.reset()
        KK.add(x, y + shift * (torch.arange(300) == 17), kernel=triton_trace.trace(KK.make_add()), block=64)
        traces.append(triton_trace.current_trace())
    triton_trace.reset()
    r = make_client(traces[0]).get("/api/launch/0/diff/2")
    assert r.status_code == 404 and "compare=" in r.get_json()["error"]
    c = make_client(traces[0], compare=traces[1])
    assert get(c, "/api/trace")["compare"] == {"available": True, "launches": 1}
    d = get(c, "/api/launch/0/diff/2")
    assert (d["name"], d["differing"], d["compared"], d["only_a"], d["only_b"]) == ("out_ptr", 1, 300, 0, 0)
    assert d["elements"]["index"] == [[17]] and d["elements"]["a_program"] == [[0, 0, 0]]
    assert d["elements"]["a"] == [pytest.approx((x[17] + y[17]).item(), rel=1e-6)]
    assert d["elements"]["b"] == [pytest.approx((x[17] + y[17] + 1).item(), rel=1e-6)]
    assert get(c, "/api/launch/0/diff/0")["differing"] == 0                   # x is only read: nothing written


def test_values_npy_holds_the_recorded_values_in_the_view_shape(monkeypatch):
    """GET .../values.npy: the tensor in its view shape, float64, the values the trace recorded (computed
    here from synthetic_tiled's own formula), NaN nowhere it wrote; too big a tensor is refused by name."""
    import io
    from triton_trace.view import download
    from triton_trace.view.app import create_app
    from helpers.webcases import synthetic_tiled
    client = create_app(synthetic_tiled(2, 3, 4, 4, ragged=2)).test_client()
    M, N = 2 * 4, 3 * 4 - 2
    r = client.get("/api/launch/0/tensor/1/values.npy", headers={"X-TT-Client": "1"})
    assert r.status_code == 200
    y = np.load(io.BytesIO(r.data))
    x = (np.arange(M * N, dtype=np.float32) % 97) / 10
    assert y.shape == (M, N) and np.array_equal(y, (x * 2).astype(np.float64).reshape(M, N))
    monkeypatch.setattr(download, "MAX_NPY_ELEMENTS", 10)
    r = client.get("/api/launch/0/tensor/0/values.npy", headers={"X-TT-Client": "1"})
    assert r.status_code == 413 and "read it from the trace file" in r.get_json()["error"]


def test_a_watched_trace_file_is_reloaded_when_rewritten(tmp_path):
    """GET /api/version: served from a file, the app loads it again once rewritten (the page reloads on
    a new version); a file caught damaged keeps the old trace and says why; an object is not watched."""
    import os
    from triton_trace.view.app import create_app
    from helpers.webcases import synthetic_long, synthetic_tiled
    path = tmp_path / "t.ttrace"
    synthetic_tiled(2, 2, 4, 4).save(path)
    loads = []
    loader = lambda p: loads.append(p) or triton_trace_load(p)
    client = create_app(str(path), loader=loader).test_client()
    H = {"X-TT-Client": "1"}
    assert client.get("/api/version", headers=H).get_json() == {"error": None, "version": 0, "watching": True}
    path.write_bytes(b"not a trace")
    v = client.get("/api/version", headers=H).get_json()
    assert v["version"] == 0 and "could not be loaded" in v["error"]
    assert client.get("/api/trace", headers=H).get_json()["launches"]["kernel"] == ["tile_copy"]
    synthetic_long(10).save(path)
    os.utime(path, ns=(1, 2))              # a new stamp even on a coarse clock
    assert client.get("/api/version", headers=H).get_json() == {"error": None, "version": 1, "watching": True}
    assert client.get("/api/trace", headers=H).get_json()["launches"]["kernel"] == ["long_loop"]
    assert len(loads) == 2
    plain = create_app(synthetic_tiled(2, 2, 4, 4)).test_client()
    assert plain.get("/api/version", headers=H).get_json()["watching"] is False


def triton_trace_load(p):
    from triton_trace import load
    return load(p)
