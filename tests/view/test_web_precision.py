"""The Source panel's precision column through the Flask client (/api/launch/<i>/precision, view/precisionview.py):
its numbers are the analysis' "precision" entry, the stored error is the one numpy computes in float64 here,
the line where precision is lost is the one the kernel's math says, and a launch without the shadow has no
values but says how to get them; ``--shadow float64`` / ``analysis={"shadow": ...}`` run a kept launch again,
and are refused for a launch without its inputs or from a file not trusted to run."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import cli
from triton_trace.view import server as view_server
from helpers.source import marked_line


@triton.jit
def log_of_one_plus(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    t = x + 1.0  # ADD
    y = tl.log(t)  # LOG
    tl.store(y_ptr + offs, y, mask=m)  # STORE


@triton.jit
def fp16_total(x_ptr, out_ptr, K, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), tl.float16)
    for k in range(0, K):
        acc += tl.load(x_ptr + k * BLOCK + offs)  # ACC
    tl.store(out_ptr + offs, acc)  # STORE


N, BLOCK = 256, 64
ADD, LOG, STORE = (marked_line(log_of_one_plus, m) for m in ("# ADD", "# LOG", "# STORE"))


def ulps(value, exact, bits: int = 23, emin: int = -126) -> np.ndarray:
    """|value - exact| in units of the last place at ``exact`` of a float with ``bits`` significand bits."""
    exact = np.asarray(exact, np.float64)
    _, e = np.frexp(np.where(exact == 0, 2.0 ** emin, exact))
    return np.abs(np.asarray(value, np.float64) - exact) / 2.0 ** (np.maximum(e - 1, emin) - bits)


def log_case(shadow=None, inputs=False):
    x = np.random.default_rng(41).uniform(1e-7, 1e-4, N).astype(np.float32)
    y = torch.empty(N)
    triton_trace.reset()
    triton_trace.trace(shadow=shadow, inputs=inputs)(log_of_one_plus)[(N // BLOCK,)](torch.from_numpy(x), y, N, BLOCK=BLOCK)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace, x, y.numpy().copy()


def precision(client, i: int = 0) -> dict:
    r = client.get(f"/api/launch/{i}/precision")
    assert r.status_code == 200, r.get_data(as_text=True)
    return r.get_json()


def by_line(entry: dict, file: str) -> dict:
    """The analysis' per (line, type) rows of ``file``, grouped by line."""
    out: dict = {}
    for e in entry["lines"]:
        if e["file"] == file:
            out.setdefault(e["line"], []).append(e)
    return out


@pytest.fixture(scope="module")
def recorded():
    return log_case(shadow="float64")


def test_the_column_holds_the_analysis_numbers_and_the_stored_error_numpy_gives(recorded, make_client):
    trace, x, y = recorded
    p = precision(make_client(trace))
    entry = triton_trace.analyze(trace).to_dict()["launches"][0]["precision"]
    file = log_of_one_plus.fn.__code__.co_filename
    rows = by_line(entry, file)
    assert (p["available"], p["note"], p["mode"], p["source"], p["file"]) == (True, None, "float64", "recorded", file)
    assert p["lines"]["line"] == sorted(rows) == [ADD, LOG]
    for k, ln in enumerate(p["lines"]["line"]):
        (e,) = rows[ln]              # one result type (fp32) a line
        for key in ("error_max", "error_mean", "local_max", "gained_max", "amplified_max", "amplified_mean",
                    "explains", "type", "ops"):
            assert p["lines"][key][k] == e[key], (ln, key)
    # the stored error, from numpy: y against log1p(x) in float64
    x64 = x.astype(np.float64)
    err = ulps(y, [math.log1p(v) for v in x64])
    assert p["stores"]["line"] == [STORE] and p["stores"]["tensor"] == ["y_ptr"]
    assert p["stores"]["error_max"][0] == pytest.approx(err.max(), rel=1e-6) and err.max() > 1e4
    assert p["stores"]["error_mean"][0] == pytest.approx(err.mean(), rel=1e-6)
    # the addition only rounds (its error is the float32 rounding of 1 + x, at most half an ulp) ...
    t32 = np.float32(1.0) + x
    add = p["lines"]["line"].index(ADD)
    assert p["lines"]["error_max"][add] == pytest.approx(ulps(t32, 1.0 + x64).max(), rel=1e-9)
    assert p["lines"]["error_max"][add] <= 0.5
    # ... and the stored error is that rounding (the counterfactual "only line ADD rounds" leaves it all)
    (share,) = p["lines"]["shares"][add]
    assert (share["tensor"], share["store_line"]) == ("y_ptr", STORE) and share["share"] > 0.99
    # the log turns that rounding into the whole answer: its result's error over its operand's, per element
    log = p["lines"]["line"].index(LOG)
    amplified = ulps(y, np.log(1.0 + x64)) / np.maximum(ulps(t32, 1.0 + x64), 0.5)
    assert p["lines"]["amplified_max"][log] == pytest.approx(amplified.max(), rel=1e-3)
    assert p["lines"]["amplified_mean"][log] == pytest.approx(amplified.mean(), rel=1e-3)
    # where precision is lost: the log, for the one stored tensor (its hint)
    assert [(x["line"], x["tensor"], x["store_line"]) for x in p["lost"]] == [(LOG, "y_ptr", STORE)]
    assert p["stores"]["lost_at"] == [LOG]


def test_an_fp16_accumulation_loses_its_precision_at_the_addition(make_client):
    k = 1500
    x = np.random.default_rng(42).random((k, 16)).astype(np.float16)
    out = torch.empty(16, dtype=torch.float16)
    triton_trace.reset()
    triton_trace.trace(shadow="float64")(fp16_total)[(1,)](torch.from_numpy(x), out, k, BLOCK=16)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    p = precision(make_client(trace))
    acc, store = marked_line(fp16_total, "# ACC"), marked_line(fp16_total, "# STORE")
    exact = x.astype(np.float64).sum(axis=0)
    err = ulps(out.numpy(), exact, bits=10, emin=-14)
    assert p["stores"]["line"] == [store]
    assert p["stores"]["error_max"][0] == pytest.approx(err.max(), rel=1e-6) and err.max() > 8
    (row,) = [k for k, ln in enumerate(p["lines"]["line"]) if ln == acc]
    assert p["lines"]["type"][row] == "fp16" and p["lines"]["explains"][row] == pytest.approx(1.0)
    assert [(x["line"], x["tensor"]) for x in p["lost"]] == [(acc, "out_ptr")]


def test_a_launch_without_the_shadow_has_no_values_and_says_how_to_get_them(make_client):
    trace, _, _ = log_case()
    p = precision(make_client(trace))
    assert p["available"] is False and p["lost"] == [] and p["truncated"] is False
    assert all(v == [] for v in p["lines"].values()) and all(v == [] for v in p["stores"].values())
    assert "shadow='float64'" in p["note"] and "--shadow float64" in p["note"]
    assert precision(make_client(trace, analysis=None))["available"] is False
    assert make_client(trace).get("/api/launch/1/precision").status_code == 404


def test_serving_with_the_shadow_runs_a_kept_launch_again(recorded, make_client):
    trace, x, _ = log_case(inputs=True)
    rerun = precision(make_client(trace, analysis={"shadow": "float64"}))
    same = precision(make_client(recorded[0]))
    assert (rerun["source"], rerun["reproduced"]) == ("rerun", True)
    assert rerun["lines"] == same["lines"] and rerun["stores"] == same["stores"] and rerun["lost"] == same["lost"]


def test_serving_with_the_shadow_is_refused_without_inputs_or_trust(tmp_path, monkeypatch):
    trace, _, _ = log_case()
    with pytest.raises(triton_trace.TraceUsageError, match=r"launch 0 \('log_of_one_plus'\).*trace\(inputs=True\)"):
        triton_trace.launch(trace=trace, analysis={"shadow": "float64"}, block=False, port=0)
    # a file saved under another user's key is data: running its kernel needs --trust
    kept, _, _ = log_case(inputs=True)
    mine = tmp_path / "mine"
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "theirs"))
    kept.save(tmp_path / "theirs.ttrace")
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(mine))
    foreign = triton_trace.load(tmp_path / "theirs.ttrace")
    with pytest.raises(triton_trace.TraceUsageError, match="did not record or sign.*--trust"):
        triton_trace.launch(trace=foreign, analysis={"shadow": "float64"}, block=False, port=0)


def test_the_view_command_passes_the_shadow_and_says_why_it_cannot(tmp_path, monkeypatch, capsys):
    started = []
    real = view_server.launch

    def launch(**kwargs):           # the command blocks until Ctrl-C; here it returns at once
        started.append(real(**{**kwargs, "block": False, "port": 0}))
        return started[-1]
    monkeypatch.setattr(view_server, "launch", launch)
    monkeypatch.setenv("TRITON_TRACE_CACHE_DIR", str(tmp_path / "cache"))
    bare, _, _ = log_case()
    bare.save(tmp_path / "bare.ttrace")
    assert cli.main(["view", str(tmp_path / "bare.ttrace"), "--shadow", "float64"]) == 2
    assert "trace(inputs=True)" in capsys.readouterr().err and not started
    kept, _, _ = log_case(inputs=True)
    kept.save(tmp_path / "kept.ttrace")
    assert cli.main(["view", str(tmp_path / "kept.ttrace"), "--shadow", "float64"]) == 0
    (srv,) = started
    try:
        ti = srv._httpd.app.extensions["triton_trace"]
        from triton_trace.view import routes as R
        p = json.loads(R.answer(ti, R.url("precision", i=0)))
        assert p["source"] == "rerun" and [x["line"] for x in p["lost"]] == [LOG]
    finally:
        srv.stop()
