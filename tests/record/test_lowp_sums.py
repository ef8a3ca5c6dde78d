"""fp16/bf16 sums that drift from the same sum in float64 (record/checks/accumulation.py, the hint in
analysis/advice/precision.py): a K = 4096 loop accumulating ``acc += a * b`` in fp16 is a hint whose counts
(elements over 8 ulps, the largest ulps and absolute error) are those of the same loop replayed with numpy;
the fixed twin (an fp32 accumulator cast once) has none. Kernels: tests/kernels/sync_kernels.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import triton_trace
from triton_trace.analysis.advice import precision
from helpers.findings import traced_report
from helpers.source import marked_line
from kernels import sync_kernels as K


def run(kernel, grid, *args, batch=True, **kw):
    trace, report = traced_report(kernel, grid, *args, batch=batch, **kw)
    return trace, report.findings, [h for h in report.to_dict()["launches"][0]["hints"]
                                    if h["kind"] == "lowp_accumulation"]


def ulps(value: np.ndarray, exact: np.ndarray, bits: int, emin: int) -> np.ndarray:
    """|value - exact| in ulps of a float of ``bits`` significand bits after the leading one (fp16: 10, bf16: 7)
    at ``exact``, written out from the definition: 2^(exponent - bits), the exponent no lower than ``emin``."""
    exponent = np.floor(np.log2(np.where(exact == 0, 2.0 ** emin, np.abs(exact))))
    return np.abs(value - exact) / 2.0 ** (np.maximum(exponent, emin) - bits)


def fp16_loop(a: np.ndarray, b: np.ndarray) -> tuple:
    """The kernel's loop replayed in numpy: fp16 products added one by one into an fp16 accumulator, and the
    same products summed in float64."""
    acc, exact = np.zeros((a.shape[0], b.shape[1]), np.float16), np.zeros((a.shape[0], b.shape[1]))
    for k in range(a.shape[1]):
        p = a[:, k:k + 1] * b[k][None, :]
        acc = acc + p
        exact += p.astype(np.float64)
    return acc, exact


@pytest.mark.parametrize("batch", [True, False])
def test_an_fp16_accumulator_over_k_4096_is_a_hint_with_its_numpy_counts(batch):
    M, KK, N = 3, 4096, 20
    torch.manual_seed(0)
    a, b = torch.randn(M, KK).half(), torch.randn(KK, N).half()
    c = torch.empty(M, N, dtype=torch.float16)
    trace, found, hints = run(K.row_times_matrix_lowp, (M,), a, b, c, KK, N, BLOCK_N=32, batch=batch)
    acc, exact = fp16_loop(a.numpy(), b.numpy())
    assert np.array_equal(c.numpy(), acc)                        # the trace computed what the replay does
    u = ulps(acc.astype(np.float64), exact, 10, -14)
    assert found == ()
    (r,) = trace.launches[0].meta["lowp_accumulation"]
    line = marked_line(K.row_times_matrix_lowp)
    assert (r["type"], r["tensor"], r["add_line"], r["line"], r["adds"]) == ("fp16", "c_ptr", line, line + 1, KK)
    assert r["checked"] == M * N and sum(r["hist"]) == M * N
    assert precision.over(r["hist"]) == int((u > 8).sum()) > 0
    assert precision.over(r["hist"], 64) == int((u > 64).sum())  # the threshold is the analysis' choice
    assert r["max_ulps"] == pytest.approx(u.max(), rel=1e-12)
    assert r["max_abs"] == pytest.approx(np.abs(acc - exact).max(), rel=1e-12)
    worst = np.unravel_index(np.argmax(u), u.shape)
    assert r["program"] == [int(worst[0]), 0, 0] and r["value"] == float(acc[worst])
    (h,) = hints
    assert (h["file"], h["line"], h["tensor"]) == (K.row_times_matrix_lowp.fn.__code__.co_filename, line + 1, "c_ptr")
    for text in (f"{int((u > 8).sum())} of the {M * N} stored element(s) are more than 8 ulps",
                 f"up to {KK} additions", f"by up to {u.max():.4g} ulps", "float16"):
        assert text in h["message"], (text, h["message"])
    assert "float32 accumulator" in h["effect"]


def test_the_fp32_accumulator_cast_once_is_no_hint():
    M, KK, N = 3, 4096, 20
    torch.manual_seed(0)
    a, b = torch.randn(M, KK).half(), torch.randn(KK, N).half()
    c = torch.empty(M, N, dtype=torch.float16)
    trace, found, hints = run(K.row_times_matrix_f32acc, (M,), a, b, c, KK, N, BLOCK_N=32)
    assert found == () and hints == [] and "lowp_accumulation" not in trace.launches[0].meta
    _, exact = fp16_loop(a.numpy(), b.numpy())           # the same fp16 products, summed in float64
    assert ulps(c.numpy().astype(np.float64), exact, 10, -14).max() <= 1.0


def test_a_bf16_accumulator_drifts_as_torch_computes_it():
    M, KK, N = 2, 1024, 20
    torch.manual_seed(1)
    a, b = torch.randn(M, KK).bfloat16(), torch.randn(KK, N).bfloat16()
    c = torch.empty(M, N, dtype=torch.bfloat16)
    trace, _, hints = run(K.row_times_matrix_lowp, (M,), a, b, c, KK, N, BLOCK_N=32)
    acc, exact = torch.zeros(M, N, dtype=torch.bfloat16), torch.zeros(M, N, dtype=torch.float64)
    for k in range(KK):                     # torch's bf16 arithmetic rounds each result to nearest even, as a GPU
        p = a[:, k:k + 1] * b[k][None, :]
        acc, exact = acc + p, exact + p.double()
    assert torch.equal(c, acc)
    u = ulps(acc.double().numpy(), exact.numpy(), 7, -126)
    (r,) = trace.launches[0].meta["lowp_accumulation"]
    assert r["type"] == "bf16" and precision.over(r["hist"]) == int((u > 8).sum()) > 0
    assert r["max_ulps"] == pytest.approx(u.max(), rel=1e-12)
    (h,) = hints
    assert "bfloat16" in h["message"]


def test_a_dot_into_an_fp16_accumulator():
    KK, BK = 2048, 16
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((16, KK)).astype(np.float16), rng.standard_normal((KK, 16)).astype(np.float16)
    c = torch.empty(16, 16)
    trace, _, hints = run(K.tile_matmul_f16acc, (1,), torch.from_numpy(a), torch.from_numpy(b), c, KK, BLOCK=16, BK=BK)
    acc = np.zeros((16, 16), np.float16)
    for k in range(0, KK, BK):              # tl.dot(a, b, acc, out_dtype=fp16) as the interpreter computes it
        acc = np.matmul(a[:, k:k + BK], b[k:k + BK], dtype=np.float16) + acc
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert np.array_equal(c.numpy(), acc.astype(np.float32))
    u = ulps(acc.astype(np.float64), exact, 10, -14)
    (r,) = trace.launches[0].meta["lowp_accumulation"]
    assert (r["type"], r["adds"], r["line"]) == ("fp16", KK // BK, marked_line(K.tile_matmul_f16acc) + 1)
    assert precision.over(r["hist"]) == int((u > 8).sum()) > 0 and len(hints) == 1


@pytest.mark.parametrize("batch", [True, False])
def test_one_fp16_addition_is_one_rounding_not_a_sum(batch):
    x, y = torch.randn(100).half(), torch.randn(100).half()
    out = torch.empty(100, dtype=torch.float16)
    trace, found, hints = run(K.add_lowp, (4,), x, y, out, 100, BLOCK=32, batch=batch)
    assert torch.equal(out, x + y) and found == () and hints == []
    assert "lowp_accumulation" not in trace.launches[0].meta
