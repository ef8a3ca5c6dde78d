"""The one route table (view/routes.py): the Flask app registers exactly its routes, the notebook output
carries only answers to its URLs, the page receives it and builds no API URL of its own, and every
parameter it declares is bounded: a malformed or out-of-bounds one is a 400 that names it, on every route.
"""
from __future__ import annotations

import base64
import html
import inspect
import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

from helpers.paths import ROOT
from helpers.synthetic import load_launch
from triton_trace.model import Trace
from triton_trace.view import answers, blockview, contract, embed
from triton_trace.view import notebook as nb
from triton_trace.view import routes as R

FRONTEND = Path(ROOT) / "frontend"
AUTOMATIC = {"HEAD", "OPTIONS"}          # Flask adds these to every GET rule


# --------------------------------------------------------------------------------------------------------
# the table itself
# --------------------------------------------------------------------------------------------------------
def test_every_route_declares_its_path_parameters_and_names_a_real_answer():
    names = [r.name for r in R.ROUTES]
    assert len(names) == len(set(names)) and len({r.rule for r in R.ROUTES}) == len(R.ROUTES)
    for r in R.ROUTES:
        declared = [p.name for p in r.params]
        assert len(declared) == len(set(declared)), r.name
        assert set(r.path_names) <= set(declared), (r.name, r.path_names)
        assert r.rule.startswith("/api/") and r.context in ("trace", "reloader"), r.name
        answer = getattr(answers, r.answer)
        # answer(context, *path values[, {query}]): the convention routes.call uses
        want = 1 + len(r.path_names) + (1 if r.query else 0)
        assert len(inspect.signature(answer).parameters) == want, r.name
        for p in r.params:
            assert p.kind in ("int", "ints", "choice") and p.lo <= p.hi and p.count[0] <= p.count[1], (r.name, p)
            assert p.kind != "choice" or p.default is None or p.default in p.words, (r.name, p)


def test_every_route_and_its_payload_are_in_the_contract():
    """contract.py documents each route (writing <i> for <int:i>, <x>,<y>,<z> for a program id) and the
    payload type the table names for it."""
    types = {n for m in (contract, blockview) for n in vars(m) if n.endswith("Payload")}
    for r in R.ROUTES:
        shape = re.sub(r"<(?:\w+:)?\w+>", lambda m: "<[^>]+>(?:,<[^>]+>)*", re.escape(r.rule))
        line = re.search(rf"``GET {shape}(?:\?[^`]*)?`` -> (.*)", contract.__doc__)
        assert line, r.rule
        if r.payload.endswith("Payload"):
            assert line.group(1).startswith(f"``{r.payload}``"), (r.rule, line.group(1))
            assert r.payload in types or r.payload == "CompiledPayload", r.payload    # compiledview builds a plain dict


def test_urls_are_built_and_matched_back_by_the_same_table():
    cases = [("trace", {}), ("version", {}), ("launch", {"i": 3}), ("grid", {"i": 0, "z": 0}), ("grid", {"i": 1}),
             ("program", {"i": 0, "pid": (2, 1, 0)}), ("program", {"i": 0, "pid": [5], "offset": 2000, "limit": 10}),
             ("tensor", {"i": 0, "t": 1, "mode": "op", "program": (2, 1, 0), "op": 1, "window": "auto"}),
             ("tensor", {"i": 2, "t": 0, "mode": "all", "rows": 0, "cols": 2, "wrap": 8, "index": [0, 3, 0]}),
             ("values_npy", {"i": 0, "t": 0, "mode": "program", "program": [1, 0, 0]}),
             ("block", {"i": 0, "pid": (0, 0, 0), "seq": 4}), ("compiled", {"i": 0, "target": "sm_80"}),
             ("diff", {"i": 0, "t": 2}), ("compare", {"i": 0}), ("touches", {"i": 0, "t": 0, "index": (1, 2)}),
             ("touches", {"i": 0, "t": 0, "index": ()}), ("findings", {"i": 7}), ("charts", {"i": 7}),
             ("storage", {"i": 0, "t": 1, "mode": "op", "program": (2, 1, 0), "op": 1, "wrap": 8, "window": "auto"}),
             ("storage", {"i": 1, "t": 0, "mode": "all", "window": [0, 4, 0, 8]}), ("tiles", {"i": 0, "pid": (1, 0, 0)}),
             ("tiles", {"i": 0, "pid": [1, 2], "step": 3})]
    for name, values in cases:
        url = R.url(name, **values)
        route, path, query = R.match(url)
        assert route.name == name, url
        pv, args = R.arguments(route, path, query)
        assert dict(zip(route.path_names, pv)) == {k: (tuple(v) if isinstance(v, list) else v)
                                                    for k, v in values.items() if k in route.path_names}, url
        for k, v in values.items():
            if k not in route.path_names:
                assert args[k] == (tuple(v) if isinstance(v, list) else v), (url, k)
    assert R.url("tensor", i=0, t=1, mode="op", program=(2, 1, 0), op=1, window="auto") == \
        "/api/launch/0/tensor/1?mode=op&program=2%2C1%2C0&op=1&window=auto"       # the page's own URL for it
    assert R.match("/api/launch/0/nothing") is None and R.match("/static/app.js") is None
    with pytest.raises(ValueError, match="takes"):
        R.url("grid", i=0, zz=1)
    with pytest.raises(ValueError, match="needs"):
        R.url("block", i=0, pid=(0, 0, 0))


# --------------------------------------------------------------------------------------------------------
# the Flask app registers the table, and nothing else
# --------------------------------------------------------------------------------------------------------
def test_the_app_registers_exactly_the_tables_routes(small_trace, make_client):
    app = make_client(small_trace).application
    got = {r.rule: (r.endpoint, frozenset(r.methods - AUTOMATIC)) for r in app.url_map.iter_rules()}
    want = {r.rule: ("api_" + r.name, frozenset(r.methods)) for r in R.ROUTES}
    want.update({p.rule: (p.name, frozenset(p.methods)) for p in R.PAGES})
    assert got == want


def test_the_page_carries_the_table_and_the_frontend_builds_no_url_of_its_own(small_trace, make_client):
    page = make_client(small_trace).get("/").get_data(as_text=True)
    found = re.search(r'<body data-tt-routes="([^"]*)"', page)
    assert found and json.loads(html.unescape(found.group(1))) == R.frontend_table()
    for js in FRONTEND.glob("*.js"):
        text = re.sub(r"//.*", "", js.read_text(encoding="utf-8"))         # comments may name a route
        assert not re.search(r"[\"'`]/api/", text), f"{js.name} writes an API URL: build it from the route table"
    # the Compiled panel opens at the target a notebook output carries
    assert re.search(rf'export const DEFAULT_TARGET = "{R.DEFAULT_TARGET}";', (FRONTEND / "compiled.js").read_text())
    assert embed.COMPILED_TARGET == R.DEFAULT_TARGET == R.BY_NAME["compiled"].param("target").default


# --------------------------------------------------------------------------------------------------------
# the notebook output: only the table's URLs, answered as the app answers them
# --------------------------------------------------------------------------------------------------------
DATA = re.compile(r'<script type="application/json" id="tt-[0-9a-f]+-data">(.*?)</script>', re.S)


def test_every_answer_a_notebook_output_carries_is_one_of_the_tables(make_client, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path))
    ops = [((p, 0, 0), np.arange(8) + 8 * p, np.arange(8) < 6) for p in range(3)]
    lc = load_launch((3, 1, 1), (24,), None, ops)
    data = json.loads(DATA.search(nb.launch_html(lc, program=(1, 0, 0))).group(1))
    assert data["routes"] == R.frontend_table()
    client = make_client(Trace((lc,)))
    kinds = set()
    for url, packed in data["payloads"].items():
        found = R.match(url)
        assert found is not None, url
        route, path, query = found
        kinds.add(route.name)
        path_values, query_values = R.arguments(route, path, query)
        values = {**dict(zip(route.path_names, path_values)), **{k: v for k, v in query_values.items() if k in query}}
        assert R.url(route.name, **values) == url, "stored under the URL the page builds for it"
        if route.name != "tensor" or query.get("mode") != "all":    # the all-programs view is a lighter one
            assert json.loads(zlib.decompress(base64.b64decode(packed))) == client.get(url).get_json(), url
    assert {"trace", "launch", "grid", "findings", "charts", "program", "tensor", "block"} <= kinds


# --------------------------------------------------------------------------------------------------------
# every declared parameter is bounded: a bad one is a 400 naming it
# --------------------------------------------------------------------------------------------------------
GOOD = {"i": 0, "t": 0, "seq": 0, "pid": "0,0,0", "z": 0, "offset": 0, "limit": 1, "mode": "all", "program": "0",
        "op": 0, "rows": 0, "cols": 0, "wrap": 1, "index": "0", "window": "auto", "target": R.DEFAULT_TARGET}


def _bad_values(p: R.Param) -> list:
    if p.kind == "choice":
        return ["evil", p.words[0].upper() + "x"]
    if p.kind == "int":
        return ["x", "1.5", "\uff10", str(p.lo - 1), str(p.hi + 1), "9" * 13]
    zeros = ["0"] * (p.count[0] - 1)
    many, few = ",".join(["0"] * (p.count[1] + 1)), ",".join(zeros) if zeros else None
    return [v for v in ("a,b", "1.5", many, few, ",".join(zeros + [str(p.hi + 1)]), ",".join(zeros + [str(p.lo - 1)])) if v]


def _request(route: R.Route, bad: str, value: str) -> str:
    path = route.rule
    for m in re.finditer(r"<(?:\w+:)?(\w+)>", route.rule):
        name = m.group(1)
        path = path.replace(m.group(0), value if name == bad else str(GOOD[name]), 1)
    query = "&".join(f"{p.name}={value}" for p in route.query if p.name == bad)
    return path + ("?" + query if query else "")


@pytest.mark.parametrize("route", [r for r in R.ROUTES if r.params], ids=lambda r: r.name)
def test_a_malformed_or_out_of_bounds_parameter_is_a_400_naming_it(route, small_trace, make_client):
    c = make_client(small_trace)
    tried = 0
    for p in route.params:
        for value in _bad_values(p):
            if p.name in route.path_names and p.kind == "int" and not (value.isascii() and value.isdigit()):
                continue               # the rule's converter takes ASCII digits only: anything else is a 404
            url = _request(route, p.name, value)
            r = c.get(url)
            assert r.status_code == 400, (url, r.status_code, r.get_data(as_text=True)[:200])
            assert f"'{p.name}'" in r.get_json()["error"], (url, r.get_json())
            tried += 1
    assert tried >= 1
