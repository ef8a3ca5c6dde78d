"""numerics/compiled.py: the contracted ``a * b + c`` of a compiled kernel (``fma.rn``, which IEEE 754 defines
as the exact value rounded once), against that exact value rounded once with Python fractions (no float
arithmetic in the reference); and a traced kernel's division, sqrt and rsqrt under ``numerics="compiled"``
against the GPU's values rebuilt from the raw tables recorded on an H100."""
import os
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers import paths
from triton_trace.numerics import compiled


def _nearest_f32(exact: Fraction) -> np.float32:
    """The float32 nearest to an exact rational, ties to even, by comparing exact distances."""
    guess = np.float32(float(exact))        # within one float32 of the answer
    cands = [guess, np.nextafter(guess, np.float32(np.inf)), np.nextafter(guess, np.float32(-np.inf))]
    cands = [c for c in cands if np.isfinite(c)]
    best = min(cands, key=lambda c: (abs(Fraction(float(c)) - exact), int(np.float32(c).view(np.uint32)) & 1))
    return np.float32(best)


def _exact_fma(a, b, c) -> np.float32:
    return _nearest_f32(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)))


def test_fma_rounds_once():
    a = b = np.float32(1 + 2.0 ** -12)
    c = -(a * b)                                  # the product rounded: its rounding error is what is left
    assert np.float32(a * b + c) == 0.0
    assert compiled.fma_f32(a, b, c) == np.float32(2.0 ** -24)


def test_fma_f32_matches_the_exact_value_rounded_once():
    rng = np.random.default_rng(42)
    n = 3000
    a = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)).astype(np.float32)
    b = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)).astype(np.float32)
    c = (rng.standard_normal(n) * 10.0 ** rng.integers(-5, 6, n)).astype(np.float32)
    c[: n // 3] = -(a[: n // 3] * b[: n // 3])                       # cancellation: only the error is left
    c[n // 3: n // 2] = -(a[n // 3: n // 2] * b[n // 3: n // 2]) * np.float32(1 + 2.0 ** -20)
    got = compiled.fma_f32(a, b, c)
    want = np.array([_exact_fma(x, y, z) for x, y, z in zip(a, b, c)], dtype=np.float32)
    assert (got.view(np.uint32) == want.view(np.uint32)).all()
    # and the contraction is visible: the two-rounding expression differs on many of them
    assert (np.float32(a * b + c) != got).sum() > n // 10


def test_fma_special_values_follow_ieee():
    inf, nan = np.float32(np.inf), np.float32(np.nan)
    assert compiled.fma_f32(inf, np.float32(2), np.float32(1)) == inf
    assert np.isnan(compiled.fma_f32(inf, np.float32(0), np.float32(1)))
    assert np.isnan(compiled.fma_f32(np.float32(1), np.float32(1), nan))
    big = np.float32(3e38)
    assert compiled.fma_f32(big, np.float32(2), -big) == big      # exact 3e38 despite the fp32 overflow of a*b


def test_fma_dispatches_on_dtype_and_broadcasts():
    a = np.full((2, 1, 3), 1 + 2.0 ** -30)
    got = compiled.fma(a, a, np.float64(-(1 + 2.0 ** -29)))
    assert got.dtype == np.float64 and got.shape == (2, 1, 3) and (got == 2.0 ** -60).all()
    f = compiled.mul_sub(np.float32(3), np.float32(5), np.float32(1))
    assert f.dtype == np.float32 and f == 14
    assert compiled.mul_sub(np.float32(3), np.float32(5), np.float32(1), product_first=False) == -14


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_inputs_like_test_math_fma_op_round_once(dtype):
    """Triton's test_math_fma_op stores tl.math.fma(x, y, z) of normal samples: the plain interpreter rounds
    twice (its launches differ from the trace's in benchmarks/fidelity/RESULTS_launches.md), fma.rn once."""
    rng = np.random.default_rng(7)
    x, y, z = (rng.standard_normal(4096).astype(dtype) for _ in range(3))
    once = compiled.fma(x, y, z)
    twice = (x * y + z).astype(dtype)
    assert (once != twice).any()
    if dtype == np.float32:
        want = np.array([_exact_fma(p, q, r) for p, q, r in zip(x, y, z)], dtype=np.float32)
        assert (once.view(np.uint32) == want.view(np.uint32)).all()


@pytest.mark.parametrize("fmt, torch_dtype", [("fp8e5", "float8_e5m2"), ("fp8e4nv", "float8_e4m3fn")])
def test_fp8_codes_decode_as_torch_and_the_gpu_do(fmt, torch_dtype):
    """Every code, subnormals included: the H100 run found Triton's interpreter turning e5m2 subnormals into
    0 on their way to fp16 (test_scaled_dot's mxfp_upcast_kernel, RESULTS_launches.md); the GPU's cvt and
    torch's conversion are exact."""
    from triton_trace.numerics import rounding
    codes = np.arange(256, dtype=np.uint8)
    want = torch.from_numpy(codes).view(getattr(torch, torch_dtype)).float().numpy()
    got = rounding.fp8_to_f32(codes, fmt)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all()
    assert (got[~nan].view(np.uint32) == want[~nan].view(np.uint32)).all()
    if fmt == "fp8e5":          # fp16 is e5m2 with 8 more mantissa bits: the conversion is a shift
        f16 = got.astype(np.float16).view(np.uint16)
        assert (f16[~nan] == (codes.astype(np.uint16) << 8)[~nan]).all()


# ------------------------------------------------------------------------------------------------------
# the MUFU approximations in a traced kernel (record/gpu/ascompiled.py, numerics/mufu.py)
# ------------------------------------------------------------------------------------------------------
_TABLES = os.path.join(paths.ROOT, "benchmarks", "fidelity", "gpu_2026-12-07b", "tables", "tables.npz")
M = 1024
DIVISOR = 2.081946849822998      # 0x40053e9e: MUFU's reciprocal is 1 ulp above the correctly rounded one


@triton.jit
def mufu_ops(x_ptr, y_ptr, h_ptr, g_ptr, out_ptr, hout_ptr, s, M: tl.constexpr, C: tl.constexpr):
    r = tl.arange(0, M)
    x, y = tl.load(x_ptr + r), tl.load(y_ptr + r)
    tl.store(out_ptr + r, x / y)
    tl.store(out_ptr + M + r, x / C)                    # a constant divisor: ptxas folds rn(1/C)
    tl.store(out_ptr + 2 * M + r, x / s)                # a scalar argument: MUFU at run time
    tl.store(out_ptr + 3 * M + r, tl.sqrt(y * y))
    tl.store(out_ptr + 4 * M + r, tl.rsqrt(y * y))
    tl.store(out_ptr + 5 * M + r, tl.fdiv(y, x))
    tl.store(hout_ptr + r, tl.load(h_ptr + r) / tl.load(g_ptr + r))   # fp16: widened, div.full, rounded back


def _table(name):
    with np.load(_TABLES) as f:
        return f[name].astype(np.int64)


def _from_table(values: np.ndarray, name: str, exact, period: int) -> np.ndarray:
    """The GPU's result for normal positive fp32 ``values``, from the recorded table alone: the input written
    as rep * 2^(period*k) with rep in the table's range [1, 2^period), the correctly rounded result of rep
    (float64, rounded once) moved by the recorded number of ulps, then scaled exactly."""
    mant, exp = np.frexp(values.astype(np.float64))              # values = mant * 2^exp, mant in [0.5, 1)
    k = np.floor_divide(exp - 1, period)
    rep = (values.astype(np.float64) / 2.0 ** (period * k)).astype(np.float32)
    index = rep.view(np.uint32).astype(np.int64) - 0x3F800000
    base = exact(rep.astype(np.float64)).astype(np.float32).view(np.uint32).astype(np.int64)
    moved = (base + _table(name)[index]).astype(np.uint32).view(np.float32)
    return moved.astype(np.float64), k


def _rcp_from_table(y: np.ndarray) -> np.ndarray:
    r, k = _from_table(np.abs(y), "rcp.approx.ftz.f32", lambda v: 1.0 / v, 1)
    return (np.sign(y) * r * 2.0 ** -k).astype(np.float32)


@pytest.mark.parametrize("batch", [True, False])
def test_traced_division_and_roots_are_the_gpu_tables(batch):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(M, generator=g) * 50
    y = torch.randn(M, generator=g) * torch.exp2(torch.randint(-20, 20, (M,), generator=g).float())
    h, hg = (torch.randn(M, generator=g) * 8).half(), (torch.randn(M, generator=g) + 3).half()
    s = 0.7391
    out, hout = torch.empty(6 * M), torch.empty(M, dtype=torch.float16)
    triton_trace.trace(mufu_ops, numerics="compiled", batch=batch)[(1,)](x, y, h, hg, out, hout, s, M, DIVISOR)
    o = out.numpy().reshape(6, M)
    xn, yn = x.numpy(), y.numpy()
    fl = lambda a, b: (a * b).astype(np.float32)  # noqa: E731  (fp32 products: rounded once by numpy)
    want = {
        0: fl(xn, _rcp_from_table(yn)),
        1: fl(xn, np.float32(1.0 / np.float64(np.float32(DIVISOR)))),
        2: fl(xn, _rcp_from_table(np.full(M, s, dtype=np.float32))),
        5: fl(yn, _rcp_from_table(xn)),
    }
    yy = fl(yn, yn)
    sq, k = _from_table(yy, "sqrt.approx.ftz.f32", np.sqrt, 2)
    want[3] = (sq * 2.0 ** k).astype(np.float32)
    rs, k = _from_table(yy, "rsqrt.approx.ftz.f32", lambda v: 1.0 / np.sqrt(v), 2)
    want[4] = (rs * 2.0 ** -k).astype(np.float32)
    for i, w in want.items():
        np.testing.assert_array_equal(o[i].view(np.uint32), w.view(np.uint32), err_msg=f"store {i}")
    hq = _rcp_from_table(hg.numpy().astype(np.float32))
    want_h = fl(h.numpy().astype(np.float32), hq).astype(np.float16)
    np.testing.assert_array_equal(hout.numpy().view(np.uint16), want_h.view(np.uint16))
    # the tables change the bits: the interpreter's correctly rounded quotient differs on many elements,
    # the constant divisor's on most (its reciprocal is one ulp off)
    plain = torch.empty(6 * M)
    triton_trace.trace(mufu_ops, batch=batch)[(1,)](x, y, h, hg, plain, torch.empty_like(hout), s, M, DIVISOR)
    p = plain.numpy().reshape(6, M)
    assert (p[0] != o[0]).mean() > 0.1 and (p[3] != o[3]).mean() > 0.02 and (p[4] != o[4]).mean() > 0.02
    assert (fl(xn, _rcp_from_table(np.full(M, DIVISOR, dtype=np.float32))) != o[1]).mean() > 0.5


def test_a_division_by_zero_is_still_reported_as_one():
    """The runtime checks tell a division by its numpy function's name: the emulation keeps it."""
    x, y, h = torch.ones(M), torch.zeros(M), torch.ones(M, dtype=torch.float16)
    out = torch.empty(6 * M)
    triton_trace.trace(mufu_ops, numerics="compiled")[(1,)](x, y, h, h, out, torch.empty_like(h), 1.0, M, DIVISOR)
    assert np.isinf(out.numpy()[:M]).all()
    found = [f for f in triton_trace.analyze(triton_trace.current_trace()).findings if f.kind == "nonfinite"]
    assert any("in divide from finite operands (1.0, 0.0) -> inf" in f.message and
               "a float division by zero" in f.message for f in found), [f.message for f in found]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.gpu
def test_the_traced_kernel_matches_the_gpu_bit_for_bit():
    g = torch.Generator().manual_seed(12)
    x = torch.randn(M, generator=g) * 50
    y = torch.randn(M, generator=g) * torch.exp2(torch.randint(-60, 60, (M,), generator=g).float())
    h, hg = (torch.randn(M, generator=g) * 8).half(), (torch.randn(M, generator=g) + 3).half()
    args = (x, y, h, hg, torch.empty(6 * M), torch.empty(M, dtype=torch.float16))
    triton_trace.trace(mufu_ops, numerics="compiled")[(1,)](*args, 0.7391, M, DIVISOR)
    dev = [a.cuda() for a in args[:4]] + [torch.empty(6 * M, device="cuda"), torch.empty(M, device="cuda",
                                                                                          dtype=torch.float16)]
    mufu_ops[(1,)](*dev, 0.7391, M, DIVISOR)
    for traced, gpu in zip(args[4:], dev[4:]):
        t, d = traced.numpy(), gpu.cpu().numpy()
        bad = np.flatnonzero(t.view(np.uint16 if t.dtype == np.float16 else np.uint32) !=
                             d.view(np.uint16 if d.dtype == np.float16 else np.uint32))
        assert bad.size == 0, (bad.size, bad[:10] // M)
