"""Where precision is lost, in the report (analysis/advice/shadow.py, shadowrun.py): ``analyze(...,
shadow="float64")`` runs a launch kept with ``trace(inputs=True)`` again with the float64 shadow, maps its
lines back to the kernel's own, and says per line and per stored tensor where precision is lost and whose
rounding it is; the numbers are checked against numpy in float64 (and math.log1p), computed here.
Kernels: tests/kernels/precision_kernels.py."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace import cli
from triton_trace.record.checks.shadow import shadowing
from helpers.source import marked_line
from kernels import precision_kernels as K


def ulp32(x) -> np.ndarray:
    """The float32 unit in the last place at ``x``, from the definition: 2^(exponent - 23), exponent >= -126."""
    x = np.asarray(x, np.float64)
    _, e = np.frexp(np.where(x == 0, 2.0 ** -126, x))
    return 2.0 ** (np.maximum(e - 1, -126) - 23)


def ulps32(value, exact) -> np.ndarray:
    return np.abs(np.asarray(value, np.float64) - np.asarray(exact, np.float64)) / ulp32(exact)


def traced(kernel, grid, *args, inputs=True, shadow=False, **kw):
    triton_trace.reset()
    if shadow:
        with shadowing():
            triton_trace.trace(inputs=inputs)(kernel)[grid](*args, **kw)
    else:
        triton_trace.trace(inputs=inputs)(kernel)[grid](*args, **kw)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace


def analysed(trace, **kw):
    return triton_trace.analyze(trace, layouts="model", what_if=False, **kw)


def log1p_case(n=256):
    x = np.random.default_rng(7).uniform(1e-7, 1e-4, n).astype(np.float32)
    y = torch.empty(n)
    trace = traced(K.naive_log1p, (4,), torch.from_numpy(x), y, n, BLOCK=64)
    return trace, x, y.numpy().copy()


def test_a_launch_kept_with_its_inputs_runs_again_and_names_its_own_lines():
    trace, x, y = log1p_case()
    d = analysed(trace, shadow="float64").to_dict()["launches"][0]
    p = d["precision"]
    add, log, store = (marked_line(K.naive_log1p, m) for m in ("# ADD", "# LOG", "# STORE"))
    file = K.naive_log1p.fn.__code__.co_filename
    assert (p["mode"], p["source"], p["reproduced"]) == ("float64", "rerun", True)
    assert {(ln["file"], ln["line"]) for ln in p["lines"]} == {(file, add), (file, log)}
    err = ulps32(y, [math.log1p(v) for v in x.astype(np.float64)])
    (s,) = p["stores"]
    assert (s["file"], s["line"], s["tensor"], s["type"]) == (file, store, "y_ptr", "fp32")
    assert s["error_max"] == pytest.approx(err.max(), rel=1e-6)
    assert s["error_mean"] == pytest.approx(err.mean(), rel=1e-6)
    # precision is lost at the log; the error is the addition's rounding
    assert s["lost_at"]["line"] == log and s["lost_at"]["gained_max"] > 1e4
    assert s["lines"][0]["line"] == add and s["lines"][0]["share"] > 0.99
    by_line = {ln["line"]: ln for ln in p["lines"]}
    assert by_line[add]["explains"] > 0.99 and by_line[add]["local_max"] <= 0.5
    assert by_line[log]["gained_max"] == pytest.approx(s["lost_at"]["gained_max"])
    (h,) = [h for h in d["hints"] if h["kind"] == "precision_loss"]
    assert (h["file"], h["line"], h["tensor"]) == (file, store, "y_ptr")
    assert f"precision is lost at line {log}" in h["message"] and f"line(s) {add} (" in h["message"]
    assert "log1p" in h["effect"]


def test_the_rerun_gives_what_recording_with_the_shadow_gives():
    trace, x, _ = log1p_case()
    again = traced(K.naive_log1p, (4,), torch.from_numpy(x), torch.empty(len(x)), len(x), BLOCK=64, shadow=True)
    rerun = analysed(trace, shadow="float64").to_dict()["launches"][0]["precision"]
    recorded = analysed(again).to_dict()["launches"][0]["precision"]
    assert recorded["source"] == "recorded" and recorded["reproduced"] is None
    assert rerun["lines"] == recorded["lines"] and rerun["stores"] == recorded["stores"]


def test_without_its_inputs_a_launch_cannot_run_again_and_the_error_says_what_to_pass():
    x = torch.rand(64)
    trace = traced(K.naive_log1p, (1,), x, torch.empty(64), 64, BLOCK=64, inputs=False)
    with pytest.raises(triton_trace.TraceUsageError, match=r"trace\(inputs=True\).*shadowing\(\)"):
        analysed(trace, shadow="float64")
    with pytest.raises(triton_trace.TraceUsageError, match="analyze\\(shadow='float32'\\)"):
        analysed(trace, shadow="float32")
    d = analysed(trace).to_dict()["launches"][0]
    assert d["precision"] is None and not [h for h in d["hints"] if h["kind"] == "precision_loss"]


def test_a_variance_names_the_subtraction_and_the_sums_behind_it():
    rows, n = 4, 128
    x = (500.0 + np.random.default_rng(8).random((rows, n))).astype(np.float32)
    out = torch.empty(rows)
    trace = traced(K.variance, (rows,), torch.from_numpy(x), out, N=n)
    d = analysed(trace, shadow="float64").to_dict()["launches"][0]
    x64 = x.astype(np.float64)
    err = ulps32(out.numpy(), (x64 * x64).sum(axis=1) / n - (x64.sum(axis=1) / n) ** 2)
    (s,) = d["precision"]["stores"]
    assert s["error_max"] == pytest.approx(err.max(), rel=1e-6)
    assert s["lost_at"]["line"] == marked_line(K.variance, "# SUB")
    causes = {c["line"] for c in s["lines"] if c["share"] and c["share"] > 0.1}
    assert {marked_line(K.variance, "# MEAN"), marked_line(K.variance, "# EX2")} <= causes
    (h,) = [h for h in d["hints"] if h["kind"] == "precision_loss"]
    assert "cancellation" in h["effect"]


def test_an_fp16_accumulation_builds_up_at_its_addition():
    k, block = 2048, 16
    x = np.random.default_rng(9).random((k, block)).astype(np.float16)
    out = torch.empty(block, dtype=torch.float16)
    trace = traced(K.fp16_sum, (1,), torch.from_numpy(x), out, k, BLOCK=block, shadow=True, inputs=False)
    d = analysed(trace).to_dict()["launches"][0]
    add = marked_line(K.fp16_sum, "# ADD")
    (s,) = d["precision"]["stores"]
    assert [(c["line"], c["share"]) for c in s["lines"]] == [(add, 1.0)]
    # normwise: the largest error in fp16 ulps of the largest stored sum (2^10 <= it < 2^11: ulps of 1)
    exact = x.astype(np.float64).sum(axis=0)
    assert 1024 <= exact.max() < 2048
    assert s["normwise"] == pytest.approx(np.abs(out.numpy() - exact).max() / 1.0, rel=1e-9) and s["normwise"] > 8
    (h,) = [h for h in d["hints"] if h["kind"] == "precision_loss"]
    assert f"builds up over many roundings at line {add}" in h["effect"]


def test_a_kernel_that_loses_nothing_has_no_hint():
    rng = np.random.default_rng(10)
    a, b, c = (torch.from_numpy(rng.uniform(1, 2, 100).astype(np.float32)) for _ in range(3))
    trace = traced(K.scale_shift, (1,), a, b, c, torch.empty(100), 100, BLOCK=128, shadow=True, inputs=False)
    d = analysed(trace).to_dict()["launches"][0]
    assert all(ln["error_max"] <= 1.0 for ln in d["precision"]["lines"])
    assert not [h for h in d["hints"] if h["kind"] == "precision_loss"]


def test_tiny_values_many_of_their_own_ulps_off_lose_nothing_next_to_the_largest():
    x = np.random.default_rng(12).uniform(-80.0, 0.0, 128).astype(np.float32)
    y = torch.empty(128)
    trace = traced(K.shifted_exp, (1,), torch.from_numpy(x), y, BLOCK=128, shadow=True, inputs=False)
    d = analysed(trace).to_dict()["launches"][0]
    x64 = x.astype(np.float64)
    exact = np.exp(x64 - x64.max())
    err = ulps32(y.numpy(), exact)
    assert err.max() > 8                                         # exp multiplies x's rounding by |x|
    (s,) = d["precision"]["stores"]
    assert s["error_max"] == pytest.approx(err.max(), rel=1e-6)
    assert s["normwise"] == pytest.approx(np.abs(y.numpy() - exact).max() / ulp32(exact.max()), rel=1e-6)
    assert s["normwise"] <= 1 and not [h for h in d["hints"] if h["kind"] == "precision_loss"]
    assert s["lost_at"]["line"] == marked_line(K.shifted_exp, "# EXP")


def test_the_report_command_takes_shadow_on_a_saved_trace(tmp_path, capsys):
    rows, n = 2, 64
    x = (300.0 + np.random.default_rng(11).random((rows, n))).astype(np.float32)
    path = tmp_path / "var.ttrace"
    traced(K.variance, (rows,), torch.from_numpy(x), torch.empty(rows), N=n).save(path)
    assert cli.main(["report", str(path), "--shadow", "float64"]) == 0
    text = capsys.readouterr().out
    sub = marked_line(K.variance, "# SUB")
    assert f"[precision] launch 0 ('variance'): 'out_ptr' stored at line {marked_line(K.variance, '# STORE')}" in text
    assert f"lost at line {sub}" in text
    assert cli.main(["report", str(path)]) == 0 and "[precision]" not in capsys.readouterr().out
