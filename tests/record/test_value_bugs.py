"""Value bugs found where the bad value is made (issue: value debugging), each with a clean twin.

Every broken kernel reports the right kind, program and source line (the line marked ``# BUG`` in
tests/kernels/value_bugs.py); every corrected twin analyses to no findings; results are checked batched and one
program at a time.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.model import KIND_CODE
from helpers.source import marked_line
from kernels import value_bugs as V


def run(kernel, grid, *args, batch=True, **kw):
    triton_trace.reset()
    traced = triton_trace.trace(batch=batch)(kernel)
    traced[grid](*args, **kw)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace, triton_trace.analyze(trace).findings


def only(findings, kind):
    got = [f for f in findings if f.kind == kind]
    assert got, f"no {kind} finding in {[(f.kind, f.message) for f in findings]}"
    return got[0]


@pytest.mark.parametrize("batch", [True, False])
def test_softmax_without_the_max_subtraction(batch):
    x = torch.randn(6, 40)
    x[3, 7] = 120.0                      # exp(120) is past float32: Inf, then Inf / Inf = NaN
    _, found = run(V.softmax_no_max, (6,), x, torch.empty_like(x), 40, BLOCK=64, batch=batch)
    f = only(found, "nonfinite")
    assert (f.program, f.line, f.tensor) == ((3, 0, 0), marked_line(V.softmax_no_max), "out_ptr")
    assert "in exp from finite operands (120.0) -> inf" in f.message
    out = torch.empty_like(x)
    _, found = run(V.softmax, (6,), x, out, 40, BLOCK=64, batch=batch)
    assert found == () and torch.allclose(out, torch.softmax(x, dim=1))


@pytest.mark.parametrize("batch", [True, False])
def test_layer_norm_of_a_constant_row_without_eps(batch):
    x = torch.randn(5, 30)
    x[2] = 0.75                          # zero variance: 1 / sqrt(0) = Inf, then 0 * Inf = NaN
    _, found = run(V.layer_norm_no_eps, (5,), x, torch.empty_like(x), 30, BLOCK=32, batch=batch)
    f = only(found, "nonfinite")
    assert (f.program, f.line, f.tensor) == ((2, 0, 0), marked_line(V.layer_norm_no_eps), "y_ptr")
    y = torch.empty_like(x)
    _, found = run(V.layer_norm, (5,), x, y, 30, 1e-5, BLOCK=32, batch=batch)
    assert found == ()
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (30,), eps=1e-5), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("batch", [True, False])
def test_an_fp16_store_of_a_large_accumulator(batch):
    x = torch.full((4, 300), 2.0)
    x[1] = 20.0                          # 300 * 400 = 120000 > 65504, the largest float16
    out = torch.empty(4, dtype=torch.float16)
    _, found = run(V.sum_of_squares, (4,), x, out, 300, BLOCK=64, batch=batch)
    f = only(found, "overflow")
    assert (f.program, f.line, f.tensor) == ((1, 0, 0), marked_line(V.sum_of_squares), "out_ptr")
    assert "conversion to fp16" in f.message and "120000.0" in f.message
    assert torch.isinf(out[1]) and not torch.isinf(out[[0, 2, 3]]).any()     # what the kernel wrote
    _, found = run(V.mean_of_squares_fp16, (4,), x, out, 300, BLOCK=64, batch=batch)
    assert found == () and torch.equal(out, (x * x).mean(dim=1).half())


@pytest.mark.parametrize("batch", [True, False])
def test_an_int32_index_that_wraps(batch):
    n, mult, block = 100_000, 40503, 1024
    x = torch.arange(n, dtype=torch.float32)
    grid = (triton_trace_cdiv(n, block),)
    _, found = run(V.hashed_gather, grid, x, torch.empty(n), n, MULT=mult, BLOCK=block, batch=batch)
    f = only(found, "overflow")
    first = int(np.argmax(np.arange(n, dtype=np.int64) * mult > 2**31 - 1))     # the first i that wraps
    assert (f.program, f.line, f.tensor) == ((first // block, 0, 0), marked_line(V.hashed_gather), "x_ptr")
    assert f"{first} * {mult} = {first * mult}" in f.message and "addressed memory" in f.message
    out = torch.empty(n)
    _, found = run(V.hashed_gather_int64, grid, x, out, n, MULT=mult, BLOCK=block, batch=batch)
    assert found == ()
    assert torch.equal(out, x[(torch.arange(n, dtype=torch.int64) * mult) % n])


def test_a_float_to_int_conversion_out_of_range():
    x = torch.linspace(-1, 1, 256)
    x[200] = 5.0                         # 5 * 1e9 is past int32
    _, found = run(V.quantize, (4,), x, torch.empty(256, dtype=torch.int32), 256, 1e9, BLOCK=64)
    f = only(found, "overflow")
    assert (f.program, f.line) == ((3, 0, 0), marked_line(V.quantize))
    assert "conversion to int32 out of range" in f.message and "was stored" in f.message
    _, found = run(V.quantize, (4,), x, torch.empty(256, dtype=torch.int32), 256, 1e8, BLOCK=64)
    assert found == ()


def triton_trace_cdiv(a, b):
    return -(-a // b)


def test_per_op_value_statistics_match_torch(make_client):
    x = torch.randn(6, 40)
    x[3, 7] = 120.0
    out = torch.empty_like(x)
    trace, _ = run(V.softmax_no_max, (6,), x, out, 40, BLOCK=64)
    lc = trace.launches[0]
    load, store = (lc.rows(program=(3, 0, 0), kind=k)[0] for k in ("load", "store"))
    s = lc.value_stats([load, store])
    assert s["max"][0] == 120.0 and s["min"][0] == x[3].min().item()           # masked lanes (-inf) left out
    assert s["mean"][0] == pytest.approx(x[3].double().mean().item(), rel=1e-6)
    assert [s["nan"].tolist(), s["inf"].tolist()] == [[0, 1], [0, 0]]         # the NaN the store wrote
    assert s["max"][1] == pytest.approx(torch.nan_to_num(out[3], nan=0.0).max().item())
    ops = make_client(trace).get("/api/launch/0/program/3,0,0").get_json()["ops"]
    k = ops["kind"].index(KIND_CODE["store"])
    assert ops["nan"][k] == 1 and ops["vmax"][0] == 120.0 and ops["vmin"][0] == pytest.approx(x[3].min().item(), rel=1e-5)    # 6 significant digits


def test_the_report_has_each_ops_value_statistics():
    x = torch.randn(6, 40)
    x[3, 7] = 120.0
    out = torch.empty_like(x)
    trace, _ = run(V.softmax_no_max, (6,), x, out, 40, BLOCK=64)
    ops = triton_trace.analyze(trace).to_dict()["launches"][0]["ops"]
    load = next(o for o in ops if o["kind"] == "load")
    store = next(o for o in ops if o["kind"] == "store")
    assert load["values"]["max"] == 120.0 and load["values"]["min"] == pytest.approx(x.min().item(), rel=1e-6)
    assert load["values"]["mean"] == pytest.approx(x.double().mean().item(), rel=1e-5)
    assert (load["values"]["nan"], store["values"]["nan"], store["values"]["inf"]) == (0, 1, 0)
    assert store["values"]["max"] == pytest.approx(torch.nan_to_num(out, nan=0.0).max().item(), rel=1e-6)
    assert next(o for o in ops if o["kind"] == "reduce")["values"] is None           # compute ops: no values


def test_a_value_finding_opens_its_store_in_the_ui(make_client):
    """The findings payload gives the op (its number in the program) to open: the store that wrote the NaN."""
    x = torch.randn(6, 40)
    x[3, 7] = 120.0
    trace, _ = run(V.softmax_no_max, (6,), x, torch.empty_like(x), 40, BLOCK=64)
    f = make_client(trace).get("/api/launch/0/findings").get_json()
    k = f["kind"].index("nonfinite")
    lc = trace.launches[0]
    store = lc.accesses(program=(3, 0, 0), kind="store")[0]
    assert f["program"][k] == [3, 0, 0] and f["op"][k] == store.seq


def test_hints_name_the_wasted_lanes_and_the_strided_reads():
    """analysis/advice/hints.py: a BLOCK of 256 over rows of 64 wastes 75% of the lanes; reading a row of a
    transposed 64 x 512 tensor strides by 512 elements: each 4-byte element costs a 32-byte sector."""
    base = torch.randn(64, 512)
    x = base.T                                    # 512 rows of 64, column stride 512
    out = torch.empty(512)
    trace, _ = run(V.row_sum_wide_block, (512,), x, out, 64, x.stride(0), x.stride(1), BLOCK=256)
    torch.testing.assert_close(out, x.sum(dim=1))
    hints = triton_trace.analyze(trace).to_dict()["launches"][0]["hints"]
    line = marked_line(V.row_sum_wide_block, "# HINT")
    masked = next(h for h in hints if h["kind"] == "masked_lanes")
    assert masked["line"] == line and masked["tensor"] == "x_ptr" and masked["saving"] == pytest.approx(0.75)
    assert "75% of the lanes of the load of 'x_ptr'" in masked["message"] and "(256) is 4x" in masked["message"]
    assert f"{512 * (256 - 64):,} fewer lanes" in masked["effect"]
    strided = next(h for h in hints if h["kind"] == "uncoalesced")
    assert strided["line"] == line and "strides by 512 elements" in strided["message"]
    assert "uses 12.5% of the bytes" in strided["message"]        # 4 of every 32 bytes
    clean, _ = run(V.softmax, (6,), torch.randn(6, 40), torch.empty(6, 40), 40, BLOCK=64)
    assert triton_trace.analyze(clean).to_dict()["launches"][0]["hints"] == []   # 38% masked: a power of two


def test_the_report_says_whether_it_read_the_values():
    x = torch.randn(6, 40)
    trace, _ = run(V.softmax, (6,), x, torch.empty_like(x), 40, BLOCK=64)
    assert triton_trace.analyze(trace).to_dict()["launches"][0]["value_stats"] is True
    from triton_trace.analysis import metrics
    saved = metrics.VALUE_STATS_BYTES
    metrics.VALUE_STATS_BYTES = 16
    try:
        d = triton_trace.analyze(trace).to_dict()["launches"][0]
    finally:
        metrics.VALUE_STATS_BYTES = saved
    assert d["value_stats"] is False and all(o["values"] is None for o in d["ops"])
