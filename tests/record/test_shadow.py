"""The float64 shadow (record/checks/shadow.py, shadow_ops.py): every floating value followed by the same
computation in float64, per source line and per store. Each number is checked against numpy in float64 (or
math.log1p), computed here from the kernel's inputs and its real outputs, never from the tool's own records.
Kernels: tests/kernels/precision_kernels.py."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.record.checks.shadow import shadowing
from helpers.source import marked_line
from kernels import precision_kernels as K


def ulp(x, bits: int, emin: int) -> np.ndarray:
    """The unit in the last place at ``x`` of a float with ``bits`` significand bits after the leading one
    (fp32: 23, fp16: 10): 2^(exponent - bits), the exponent no lower than ``emin``."""
    x = np.asarray(x, np.float64)
    _, e = np.frexp(np.where(x == 0, 2.0 ** emin, x))
    return 2.0 ** (np.maximum(e - 1, emin) - bits)


def ulps(value, exact, bits: int, emin: int) -> np.ndarray:
    """|value - exact| in ulps at ``exact``."""
    return np.abs(np.asarray(value, np.float64) - np.asarray(exact, np.float64)) / ulp(exact, bits, emin)


FP32, FP16 = (23, -126), (10, -14)


def shadowed(kernel, grid, *args, batch=True, **kw):
    """The launch of ``kernel`` traced with the float64 shadow on: (its meta, its lines by source line)."""
    triton_trace.reset()
    with shadowing("float64"):
        triton_trace.trace(batch=batch)(kernel)[grid](*args, **kw)
    launch = triton_trace.current_trace().launches[0]
    triton_trace.reset()
    lines = {}
    for e in launch.meta["shadow_line"]:
        lines.setdefault(e["line"], []).append(e)
    return launch.meta, lines


def line_max(lines, line, field):
    return max(e[field] for e in lines[line])


@pytest.mark.parametrize("batch", [True, False])
def test_log_of_one_plus_tiny_x_loses_precision_at_the_log(batch):
    n = 200
    x32 = np.random.default_rng(1).uniform(1e-7, 1e-4, n).astype(np.float32)
    y = torch.empty(n)
    meta, lines = shadowed(K.naive_log1p, (4,), torch.from_numpy(x32), y, n, BLOCK=64, batch=batch)
    add, log, store = (marked_line(K.naive_log1p, m) for m in ("# ADD", "# LOG", "# STORE"))
    x64 = x32.astype(np.float64)
    t32 = np.float32(1.0) + x32
    # the addition: one rounding of 1 + x, and its error is all the error t has
    t_err = ulps(t32, 1.0 + x64, *FP32)
    assert line_max(lines, add, "local_max") == pytest.approx(t_err.max(), rel=1e-9) and t_err.max() <= 0.5
    assert line_max(lines, add, "gained_max") == pytest.approx(t_err.max(), rel=1e-9)
    # the log: the stored value against log1p(x), which the float64 shadow log(1 + x) is to ~1e-11
    err = ulps(y.numpy(), [math.log1p(v) for v in x64], *FP32)
    assert err.max() > 1e4
    assert line_max(lines, log, "error_max") == pytest.approx(err.max(), rel=1e-6)
    log_err = ulps(y.numpy(), np.log(1.0 + x64), *FP32)
    gained = np.maximum(log_err - ulps(t32, 1.0 + x64, *FP32), 0)
    assert line_max(lines, log, "gained_max") == pytest.approx(gained.max(), rel=1e-9)
    own = ulps(y.numpy(), np.log(t32.astype(np.float64)), *FP32)          # the log's own rounding is small
    assert line_max(lines, log, "local_max") == pytest.approx(own.max(), rel=1e-9) and own.max() < 4
    (s,) = meta["shadow_store"]
    assert (s["line"], s["tensor"], s["type"], s["elements"]) == (store, "y_ptr", "fp32", n)
    assert s["error_max"] == pytest.approx(log_err.max(), rel=1e-9)
    assert s["error_sum"] / n == pytest.approx(log_err.mean(), rel=1e-9)
    # whose rounding: the addition's (the log only adds its own few ulps)
    parts = dict(zip(s["part_lines"], s["part_sum"]))
    assert set(parts) == {add, log} and parts[add] / sum(parts.values()) > 0.99
    assert s["unexplained_sum"] <= 1e-6 * s["error_sum"]


@pytest.mark.parametrize("batch", [True, False])
def test_a_variance_as_e_x2_minus_e_x_squared_cancels_at_the_subtraction(batch):
    rows, n = 6, 256
    x32 = (1000.0 + np.random.default_rng(2).random((rows, n))).astype(np.float32)
    out = torch.empty(rows)
    meta, lines = shadowed(K.variance, (rows,), torch.from_numpy(x32), out, N=n, batch=batch)
    mean_l, ex2_l, sub_l, store = (marked_line(K.variance, m) for m in ("# MEAN", "# EX2", "# SUB", "# STORE"))
    x64 = x32.astype(np.float64)
    var64 = (x64 * x64).sum(axis=1) / n - (x64.sum(axis=1) / n) ** 2
    err = ulps(out.numpy(), var64, *FP32)
    assert err.max() > 1e5                                       # most of the 24 bits are gone
    (s,) = meta["shadow_store"]
    assert s["error_max"] == pytest.approx(err.max(), rel=1e-6)
    assert s["error_sum"] / rows == pytest.approx(err.mean(), rel=1e-6)
    assert s["abs_max"] == pytest.approx(np.abs(out.numpy() - var64).max(), rel=1e-6)
    assert s["normwise"] == pytest.approx(np.abs(out.numpy() - var64).max() / ulp(np.abs(var64).max(), *FP32),
                                          rel=1e-6)
    # the subtraction rounds correctly (its own error is at most half an ulp) but gains nearly all the error
    assert line_max(lines, sub_l, "local_max") <= 0.5
    assert line_max(lines, sub_l, "error_max") == pytest.approx(err.max(), rel=1e-6)
    assert line_max(lines, sub_l, "gained_max") > 0.99 * err.max()
    # the sums gain only their own rounding, a few ulps of float32
    for line in (mean_l, ex2_l):
        assert line_max(lines, line, "gained_max") < 4
    # the error is the rounding of the two means (and of mean * mean), not the subtraction's
    shares = {ln: v / sum(s["part_sum"]) for ln, v in zip(s["part_lines"], s["part_sum"])}
    assert shares[mean_l] + shares[ex2_l] > 0.5 and shares[mean_l] > 0.1 and shares[ex2_l] > 0.1


@pytest.mark.parametrize("batch", [True, False])
def test_an_fp16_accumulation_loop_is_all_the_additions_rounding(batch):
    k, block, programs = 512, 32, 3
    x16 = np.random.default_rng(3).random((k, programs * block)).astype(np.float16)
    out = torch.empty(programs * block, dtype=torch.float16)
    meta, lines = shadowed(K.fp16_sum, (programs,), torch.from_numpy(x16), out, k, BLOCK=block, batch=batch)
    add, store = marked_line(K.fp16_sum, "# ADD"), marked_line(K.fp16_sum, "# STORE")
    acc = np.zeros(programs * block, np.float16)
    worst_step = 0.0
    for row in x16:                                   # the loop replayed: fp16 additions, one by one
        before = acc
        acc = acc + row
        worst_step = max(worst_step, ulps(acc, before.astype(np.float64) + row, *FP16).max())
    exact = x16.astype(np.float64).sum(axis=0)        # exact: sums of 512 fp16 values fit a float64
    assert np.array_equal(out.numpy(), acc)
    err = ulps(acc, exact, *FP16)
    (e,) = lines[add]
    assert (e["type"], e["ops"], e["trips"]) == ("fp16", "add", k)
    assert e["local_max"] == pytest.approx(worst_step, rel=1e-9) and worst_step <= 0.5
    (s,) = meta["shadow_store"]
    assert (s["line"], s["type"], s["elements"]) == (store, "fp16", programs * block)
    assert s["error_max"] == pytest.approx(err.max(), rel=1e-9) and err.max() > 8
    assert s["error_sum"] / (programs * block) == pytest.approx(err.mean(), rel=1e-9)
    assert s["part_lines"] == [add] and s["part_sum"][0] == pytest.approx(s["error_sum"], rel=1e-9)
    assert s["unexplained_sum"] == pytest.approx(0.0, abs=1e-6 * s["error_sum"])


@pytest.mark.parametrize("batch", [True, False])
def test_a_kernel_that_loses_nothing_stays_within_an_ulp(batch):
    n = 300
    rng = np.random.default_rng(4)
    a, b, c = (rng.uniform(1.0, 2.0, n).astype(np.float32) for _ in range(3))
    out = torch.empty(n)
    meta, lines = shadowed(K.scale_shift, (3,), *(torch.from_numpy(v) for v in (a, b, c)), out, n, BLOCK=128,
                           batch=batch)
    mul, add = marked_line(K.scale_shift, "# MUL"), marked_line(K.scale_shift, "# ADD")
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    y32 = a * b
    assert line_max(lines, mul, "local_max") == pytest.approx(ulps(y32, a64 * b64, *FP32).max(), rel=1e-9)
    err = ulps(out.numpy(), a64 * b64 + c64, *FP32)
    assert err.max() <= 1.0
    assert line_max(lines, add, "local_max") == pytest.approx(
        ulps(out.numpy(), y32.astype(np.float64) + c64, *FP32).max(), rel=1e-9)
    for line in lines.values():
        for e in line:
            assert e["local_max"] <= 0.5 and e["error_max"] <= 1.0 and e["gained_max"] <= 1.0
    (s,) = meta["shadow_store"]
    assert s["error_max"] == pytest.approx(err.max(), rel=1e-9)
    assert s["error_sum"] / n == pytest.approx(err.mean(), rel=1e-9)


def test_a_dot_of_a_transposed_block_plus_a_broadcast_bias_is_shadowed_by_numpy_in_float64():
    M, N, KK = 16, 32, 64
    rng = np.random.default_rng(5)
    a, b, bias = (rng.standard_normal(s).astype(np.float16) for s in ((M, KK), (N, KK), (N,)))
    c = torch.empty(M, N, dtype=torch.float16)
    meta, lines = shadowed(K.dot_bias, (1,), *(torch.from_numpy(v) for v in (a, b, bias)), c, M=M, N=N, K=KK)
    exact = a.astype(np.float64) @ b.astype(np.float64).T + bias.astype(np.float64)[None, :]
    err = ulps(c.numpy(), exact, *FP16)
    (s,) = meta["shadow_store"]
    assert s["error_max"] == pytest.approx(err.max(), rel=1e-9)
    assert s["error_sum"] == pytest.approx(err.sum(), rel=1e-9)
    worst = np.unravel_index(np.argmax(err), err.shape)
    assert s["exact"] == pytest.approx(exact[worst], rel=1e-12)
    assert {e["ops"] for e in lines[marked_line(K.dot_bias, "# DOT")]} == {"add,cast,dot"}     # (bias to fp32)


def test_off_unless_asked_and_the_same_however_the_programs_ran():
    x = torch.from_numpy(np.random.default_rng(6).uniform(1e-6, 1e-4, 100).astype(np.float32))
    triton_trace.reset()
    triton_trace.trace(K.naive_log1p)[(2,)](x, torch.empty(100), 100, BLOCK=64)
    meta = triton_trace.current_trace().launches[0].meta
    triton_trace.reset()
    assert not {"shadow_run", "shadow_line", "shadow_store"} & set(meta)
    batched = shadowed(K.naive_log1p, (2,), x, torch.empty(100), 100, BLOCK=64, batch=True)[0]
    one_by_one = shadowed(K.naive_log1p, (2,), x, torch.empty(100), 100, BLOCK=64, batch=False)[0]
    for name in ("shadow_line", "shadow_store"):          # sums in another order: equal to rounding
        for e, f in zip(batched[name], one_by_one[name], strict=True):
            assert {k: v for k, v in e.items() if "sum" not in k} == {k: v for k, v in f.items() if "sum" not in k}
            sums = lambda d: np.hstack([d[k] for k in sorted(d) if "sum" in k])
            assert sums(e) == pytest.approx(sums(f), rel=1e-12)
    assert batched["shadow_run"][0]["mode"] == "float64"


def test_an_unknown_mode_is_refused():
    with pytest.raises(triton_trace.TraceUsageError, match="shadow='float128'"):
        with shadowing("float128"):
            pass


def test_the_trace_option_records_what_the_block_records():
    from triton_trace.errors import TraceUsageError
    n = 200
    x = torch.from_numpy(np.random.default_rng(1).uniform(1e-7, 1e-4, n).astype(np.float32))
    meta, _ = shadowed(K.naive_log1p, (4,), x, torch.empty(n), n, BLOCK=64)
    triton_trace.reset()
    triton_trace.trace(shadow="float64")(K.naive_log1p)[(4,)](x, torch.empty(n), n, BLOCK=64)
    again = triton_trace.current_trace().launches[0].meta
    triton_trace.reset()
    assert again["shadow_line"] == meta["shadow_line"] and again["shadow_store"] == meta["shadow_store"]
    triton_trace.trace(K.naive_log1p)[(4,)](x, torch.empty(n), n, BLOCK=64)
    assert "shadow_line" not in triton_trace.current_trace().launches[0].meta      # off unless asked
    triton_trace.reset()
    with pytest.raises(TraceUsageError, match="shadow"):
        triton_trace.trace(K.naive_log1p, shadow="float32")
