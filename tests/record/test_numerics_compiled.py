"""numerics/compiled.py: the contracted ``a * b + c`` of a compiled kernel (``fma.rn``, which IEEE 754 defines
as the exact value rounded once), against that exact value rounded once with Python fractions (no float
arithmetic in the reference)."""
from fractions import Fraction

import numpy as np
import pytest

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
    import torch
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
