"""``tl.dot_scaled`` traced as an sm_90 GPU computes it (record/gpu/dotscaled.py over numerics/mx.py).

The element decoding is checked against torch's float8 dtypes (all 256 codes of e4m3fn and e5m2) and against
tables written out by hand here (e2m1, e2m3, e3m2, e8m0). The op is checked against a reference built in
torch from those decoded values the way the compiled decomposition builds its operands (16-bit upcast, the
scale as bf16 bits ``s << 7`` or fp16, one rounding of the product, NaN for a 0xFF scale), then summed in
float64: where the data keep every partial sum exact in float32 the trace must equal it bit for bit; on
test_core's full-range data within the float32 summation bound (K * 2^-24 * sum|a_ik * b_kj|, plus
K subnormal steps). Under Triton
3.9, whose interpreter has a create_dot_scaled of its own, the two agree on data where its float32 scaling
and the GPU's 16-bit one coincide."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.numerics import mx
from helpers.release import TRITON_39
from helpers.source import line_of


# --------------------------------------------------------------------------------------------------------
# decoding: every code of every format
# --------------------------------------------------------------------------------------------------------
def _same_values(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok])
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))       # -0.0 included


@pytest.mark.parametrize("fmt, dtype", [("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)])
def test_fp8_codes_match_torch(fmt, dtype):
    codes = np.arange(256, dtype=np.uint8)
    want = torch.from_numpy(codes.copy()).view(dtype).float().numpy()
    _same_values(mx.decode(codes, fmt), want)
    assert np.isnan(mx.table(fmt)).sum() == {"e4m3": 2, "e5m2": 6}[fmt]


_E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
# e2m3 (bias 1): subnormals k/8, then 1..1.875, 2..3.75, 4..7.5
_E2M3 = [k / 8 for k in range(8)] + [1 + k / 8 for k in range(8)] + [2 + k / 4 for k in range(8)] + \
        [4 + k / 2 for k in range(8)]
# e3m2 (bias 3): subnormals k/16, then 0.25..0.4375, 0.5.., 1.., 2.., 4.., 8.., 16..28
_E3M2 = [k / 16 for k in range(4)] + [2.0 ** e * (1 + k / 4) for e in range(-2, 5) for k in range(4)]


@pytest.mark.parametrize("fmt, positive", [("e2m1", _E2M1), ("e2m3", _E2M3), ("e3m2", _E3M2)])
def test_small_float_codes_match_hand_tables(fmt, positive):
    want = positive + [-v for v in positive]           # the sign is the top bit of the code
    assert len(want) == {"e2m1": 16, "e2m3": 64, "e3m2": 64}[fmt]
    _same_values(mx.decode(np.arange(len(want), dtype=np.uint8), fmt), want)
    assert max(positive) == {"e2m1": 6.0, "e2m3": 7.5, "e3m2": 28.0}[fmt]


def test_fp4_unpacks_low_nibble_first_along_the_axis():
    packed = np.array([[0x21, 0x8F], [0x70, 0x09]], dtype=np.uint8)
    np.testing.assert_array_equal(mx.unpack_fp4(packed, -1), [[1, 2, 15, 8], [0, 7, 9, 0]])
    np.testing.assert_array_equal(mx.unpack_fp4(packed, 0), [[1, 15], [2, 8], [0, 9], [7, 0]])


def test_e8m0_scales():
    s = np.arange(256, dtype=np.uint8)
    exact = mx.e8m0_to_f32(s)
    _same_values(exact[:255], [math.ldexp(1.0, int(v) - 127) for v in range(255)])
    assert np.isnan(exact[255]) and exact[0] == 2.0 ** -127 and exact[127] == 1.0
    # compiled code's bf16 scale: the bits s << 7 (0 is 0, 0xFF is Inf)
    bf16 = mx.compiled_scale(s, "e8m0", "bf16")
    _same_values(bf16, [0.0] + [math.ldexp(1.0, int(v) - 127) for v in range(1, 255)] + [math.inf])
    # fp16: 2^(s-127) rounded to fp16: 2^-25 ties to 0, 2^-24 is the smallest subnormal, 2^16 overflows
    fp16 = mx.compiled_scale(s, "e8m0", "fp16")
    want = [0.0 if v <= 102 else math.inf if v >= 143 else math.ldexp(1.0, v - 127) for v in range(256)]
    _same_values(fp16, want)


def test_scaled_operand_rounds_once_in_the_compute_type():
    bits = lambda x: np.asarray(x).view(np.uint16)      # noqa: E731
    # 7 * 2^-9 (an e4m3 subnormal) times 2^-126 is 1.75 bf16 subnormal steps: rounds to 2 * 2^-133
    out = mx.scaled_operand(np.float32(7 * 2.0 ** -9), np.uint8(1), "e8m0", "bf16", False)
    assert mx.decode(out, "bf16") == 2.0 ** -132
    # 1.5 * 2^-24 in fp16 is a tie between 1 and 2 subnormal steps: even, 2^-23
    assert mx.scaled_operand(np.float32(1.5), np.uint8(103), "e8m0", "fp16", False) == np.float16(2.0 ** -23)
    # a bf16 operand in an fp16 dot rounds on conversion: 2^-20 + 2^-27 is below fp16's subnormal step
    v = np.float32(2.0 ** -20 + 2.0 ** -27)
    assert mx.scaled_operand(v, None, "e8m0", "fp16", False) == np.float16(2.0 ** -20)
    # scale 0xFF: the quiet NaN unless fast_math; with it, Inf times the value
    vals = np.array([0.0, 1.0, -2.0], dtype=np.float32)
    assert (bits(mx.scaled_operand(vals, np.full(3, 255, np.uint8), "e8m0", "bf16", False)) == 0x7FC0).all()
    fast = mx.decode(mx.scaled_operand(vals, np.full(3, 255, np.uint8), "e8m0", "bf16", True), "bf16")
    assert np.isnan(fast[0]) and fast[1] == np.inf and fast[2] == -np.inf
    assert (bits(mx.scaled_operand(vals, np.full(3, 255, np.uint8), "e8m0", "fp16", False)) == 0x7E00).all()
    # byte 0 is 0 in bf16 (not 2^-127)
    assert (mx.decode(mx.scaled_operand(vals, np.zeros(3, np.uint8), "e8m0", "bf16", False), "bf16") == 0).all()


# --------------------------------------------------------------------------------------------------------
# the op, traced: a kernel like test_core's dot_scale_kernel, with an accumulator and both packings
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _dot_scale(a_ptr, sa_ptr, b_ptr, sb_ptr, acc_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr,
               K: tl.constexpr, FA: tl.constexpr, FB: tl.constexpr, A_KPACK: tl.constexpr, B_KPACK: tl.constexpr,
               HAS_ACC: tl.constexpr, FAST: tl.constexpr):
    pid = tl.program_id(0)                     # one tile per program: its own A, scales and output
    AR: tl.constexpr = M // 2 if FA == "e2m1" and not A_KPACK else M
    AC: tl.constexpr = K // 2 if FA == "e2m1" and A_KPACK else K
    BR: tl.constexpr = K // 2 if FB == "e2m1" and B_KPACK else K
    BC: tl.constexpr = N // 2 if FB == "e2m1" and not B_KPACK else N
    a = tl.load(a_ptr + pid * AR * AC + tl.arange(0, AR)[:, None] * AC + tl.arange(0, AC)[None, :])
    b = tl.load(b_ptr + tl.arange(0, BR)[:, None] * BC + tl.arange(0, BC)[None, :])
    SK: tl.constexpr = K // 32
    if sa_ptr is not None:
        sa = tl.load(sa_ptr + pid * M * SK + tl.arange(0, M)[:, None] * SK + tl.arange(0, SK)[None, :])
    else:
        sa = None
    if sb_ptr is not None:
        sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * SK + tl.arange(0, SK)[None, :])
    else:
        sb = None
    offs = pid * M * N + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
    if HAS_ACC:
        c = tl.dot_scaled(a, sa, FA, b, sb, FB, acc=tl.load(acc_ptr + offs), fast_math=FAST, lhs_k_pack=A_KPACK,
                          rhs_k_pack=B_KPACK)
    else:
        c = tl.dot_scaled(a, sa, FA, b, sb, FB, fast_math=FAST, lhs_k_pack=A_KPACK, rhs_k_pack=B_KPACK)
    tl.store(out_ptr + offs, c)


_TORCH = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "bf16": torch.bfloat16, "fp16": torch.float16}
_E2M1_SIGNED = torch.tensor(_E2M1 + [-v for v in _E2M1], dtype=torch.float32)


def _unpack(x: torch.Tensor, dim: int) -> torch.Tensor:
    lo, hi = _E2M1_SIGNED[(x & 0xF).long()], _E2M1_SIGNED[(x >> 4).long()]
    return torch.stack([lo, hi], dim=dim + 1).flatten(dim, dim + 1)


def _ref_operand(x, scale, fmt, k_pack, compute, fast, is_rhs):
    """The compiled decomposition's operand, built in torch: [M, K] (lhs) or [K, N] (rhs), in ``compute``."""
    if fmt == "e2m1":
        k_dim = 0 if is_rhs else 1
        v = _unpack(x, k_dim if k_pack else 1 - k_dim)
    else:
        v = x.view(_TORCH[fmt]).float()
    v = v.to(compute)
    if scale is None:
        return v
    if compute == torch.bfloat16:
        s16 = (scale.to(torch.int16) << 7).view(torch.bfloat16)
    else:
        s16 = (scale.to(torch.int32) << 23).view(torch.float32).to(torch.float16)
    s16 = s16.repeat_interleave(32, dim=1)
    if is_rhs:
        s16 = s16.T
    out = v * s16                                      # one product of two 16-bit floats, rounded once
    if fast:
        return out
    nan = (scale == 255).repeat_interleave(32, dim=1)
    return torch.where(nan.T if is_rhs else nan, torch.nan, out)


def _reference(a, sa, fa, b, sb, fb, acc, a_kpack=True, b_kpack=True, fast=False):
    """float64 sum of the exact products of the 16-bit operands, plus acc; and the per-element bound on
    float32 summation error: K * 2^-24 * sum |products|, plus K float32 subnormal steps (2^-149) for
    products and sums below float32's normal range (scales down to 2^-127 on both sides)."""
    compute = torch.float16 if "fp16" in (fa, fb) else torch.bfloat16
    x = _ref_operand(a, sa, fa, a_kpack, compute, fast, False).double()
    y = _ref_operand(b, sb, fb, b_kpack, compute, fast, True).double()
    exact = x @ y + acc.double()
    bound = x.shape[1] * (2.0 ** -24 * (x.abs() @ y.abs() + acc.double().abs()) + 2.0 ** -149)
    return exact.numpy(), bound.numpy()


def _run(a, sa, fa, b, sb, fb, m, n, k, *, acc=None, a_kpack=True, b_kpack=True, fast=False, programs=1,
         batch=True):
    out = torch.zeros(programs * m, n)
    acc_t = acc if acc is not None else torch.zeros(programs * m, n)
    triton_trace.trace(batch=batch)(_dot_scale)[(programs,)](
        a, sa, b, sb, acc_t, out, m, n, k, fa, fb, a_kpack, b_kpack, acc is not None, fast)
    return out


def _codes(shape, g, fmt, exact=False):
    """Random operand data of ``fmt``: full range but finite (test_core's make_finite), or, with ``exact``,
    values whose products and sums float32 holds exactly (e4m3/e5m2 in [1, 4), bf16/fp16 multiples of 1/8
    in [-8, 8])."""
    if fmt in ("bf16", "fp16"):
        if exact:
            return (torch.randint(-64, 65, shape, generator=g).float() / 8).to(_TORCH[fmt])
        return torch.randn(shape, generator=g).to(_TORCH[fmt])
    x = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)
    if fmt == "e2m1":
        return x
    if exact:          # exponent field just above the bias: [1, 2) and [2, 4), either sign
        bias_field = {"e4m3": 7, "e5m2": 15}[fmt]
        m_bits = {"e4m3": 3, "e5m2": 2}[fmt]
        exp = bias_field + (x & 1)
        return ((x & 0x80) | (exp << m_bits) | ((x >> 1) & ((1 << m_bits) - 1))).to(torch.uint8)
    mask = 0x7F if fmt == "e4m3" else 0x7C
    return torch.where((x & mask) == mask, x & 0x83, x)          # NaN/Inf codes made finite


CASES = [
    # (lhs format, rhs format, which sides are scaled)
    ("bf16", "e2m1", "rhs"),
    ("e2m1", "bf16", "lhs"),
    ("e4m3", "e5m2", "both"),
    ("e4m3", "e5m2", "none"),
    ("e5m2", "e2m1", "both"),
    ("e2m1", "fp16", "lhs"),
    ("fp16", "e4m3", "rhs"),
]


def _make(case, m, n, k, g, exact, programs=1, scale_range=(124, 131)):
    fa, fb, scaled = case
    a = _codes((programs * m, k // 2 if fa == "e2m1" else k), g, fa, exact)
    b = _codes((k // 2 if fb == "e2m1" else k, n), g, fb, exact)
    lo, hi = scale_range
    sa = torch.randint(lo, hi + 1, (programs * m, k // 32), generator=g, dtype=torch.uint8) \
        if scaled in ("lhs", "both") else None
    sb = torch.randint(lo, hi + 1, (n, k // 32), generator=g, dtype=torch.uint8) if scaled in ("rhs", "both") else None
    return a, sa, b, sb


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(c))
def test_exact_data_gives_the_exact_sum(case):
    m, n, k = 16, 16, 64
    g = torch.Generator().manual_seed(11)
    a, sa, b, sb = _make(case, m, n, k, g, exact=True, scale_range=(126, 128))
    acc = (torch.randint(-64, 65, (m, n), generator=g) / 4).float()
    out = _run(a, sa, case[0], b, sb, case[1], m, n, k, acc=acc)
    want, _ = _reference(a, sa, case[0], b, sb, case[1], acc)
    np.testing.assert_array_equal(out.numpy(), want.astype(np.float32))


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(c))
def test_full_range_data_within_the_summation_bound(case):
    """test_core's data: every code but NaN/Inf, scales from 0 (bf16) or 124 to 131 (fp16) up to 142."""
    m, n, k = 32, 32, 128
    g = torch.Generator().manual_seed(3)
    lo = 124 if "fp16" in case[:2] else 0
    a, sa, b, sb = _make(case, m, n, k, g, exact=False, scale_range=(lo, 131 if lo else 142))
    out = _run(a, sa, case[0], b, sb, case[1], m, n, k).numpy().astype(np.float64)
    want, bound = _reference(a, sa, case[0], b, sb, case[1], torch.zeros(m, n))
    assert np.isfinite(out).all()
    assert (np.abs(out - want) <= bound).all()


@pytest.mark.parametrize("a_kpack, b_kpack", [(False, True), (True, False), (False, False)])
def test_fp4_packed_along_m_or_n(a_kpack, b_kpack):
    m, n, k = 16, 16, 64
    g = torch.Generator().manual_seed(5)
    a = torch.randint(0, 256, (m // 2 if not a_kpack else m, k // 2 if a_kpack else k), generator=g,
                      dtype=torch.uint8)
    b = torch.randint(0, 256, (k // 2 if b_kpack else k, n // 2 if not b_kpack else n), generator=g,
                      dtype=torch.uint8)
    sa = torch.randint(126, 129, (m, k // 32), generator=g, dtype=torch.uint8)
    sb = torch.randint(126, 129, (n, k // 32), generator=g, dtype=torch.uint8)
    out = _run(a, sa, "e2m1", b, sb, "e2m1", m, n, k, a_kpack=a_kpack, b_kpack=b_kpack)
    want, _ = _reference(a, sa, "e2m1", b, sb, "e2m1", torch.zeros(m, n), a_kpack, b_kpack)
    np.testing.assert_array_equal(out.numpy(), want.astype(np.float32))


@pytest.mark.parametrize("fast", [False, True])
def test_nan_scale_and_fast_math(fast):
    m, n, k = 16, 16, 64
    g = torch.Generator().manual_seed(9)
    a, sa, b, sb = _make(("e4m3", "e2m1", "both"), m, n, k, g, exact=True, scale_range=(126, 128))
    sa[3, 1] = 255                 # row 3 of A, its second block of 32 along K
    sb[5, 0] = 255                 # column 5 of B, its first block
    out = _run(a, sa, "e4m3", b, sb, "e2m1", m, n, k, fast=fast).numpy()
    want, _ = _reference(a, sa, "e4m3", b, sb, "e2m1", torch.zeros(m, n), fast=fast)
    np.testing.assert_array_equal(out, want.astype(np.float32))           # NaN where want is NaN
    if not fast:
        assert np.isnan(out[3]).all() and np.isnan(out[:, 5]).all() and not np.isnan(np.delete(
            np.delete(out, 3, 0), 5, 1)).any()


@pytest.mark.parametrize("batch", [False, True])
def test_programs_of_a_chunk_and_the_recorded_dot(batch):
    m, n, k, programs = 16, 32, 64, 4
    g = torch.Generator().manual_seed(2)
    a, sa, b, sb = _make(("e2m1", "e4m3", "both"), m, n, k, g, exact=True, programs=programs,
                         scale_range=(126, 128))
    out = _run(a, sa, "e2m1", b, sb, "e4m3", m, n, k, programs=programs, batch=batch)
    for p in range(programs):
        rows = slice(p * m, (p + 1) * m)
        want, _ = _reference(a[rows], sa[rows], "e2m1", b, sb, "e4m3", torch.zeros(m, n))
        np.testing.assert_array_equal(out[rows].numpy(), want.astype(np.float32))
    lc = triton_trace.current_trace().launches[0]
    line = line_of(_dot_scale, "c = tl.dot_scaled(a, sa, FA, b, sb, FB, fast_math")
    for p in range(programs):
        dots = [o for o in lc.all_ops(program=p) if o.kind == "dot"]
        assert [(o.dims, o.line) for o in dots] == [((m, n, k), line)]
    d = triton_trace.analyze(triton_trace.current_trace()).to_dict()["launches"][0]
    assert d["metrics"]["dot_flops"] == programs * 2 * m * n * k


# --------------------------------------------------------------------------------------------------------
# Triton 3.9: the interpreter's own create_dot_scaled
# --------------------------------------------------------------------------------------------------------
@pytest.mark.skipif(not TRITON_39, reason="Triton 3.6's interpreter has no create_dot_scaled")
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(c))
def test_same_values_as_the_interpreters_own(case):
    """Where the interpreter's float32 scaling equals the GPU's bf16/fp16 one (scales 1..254 that the
    compute type holds, operands whose scaled values it holds), the two give the same bits."""
    from triton.runtime.interpreter import InterpretedFunction
    m, n, k = 16, 16, 64
    g = torch.Generator().manual_seed(4)
    a, sa, b, sb = _make(case, m, n, k, g, exact=True, scale_range=(126, 128))
    acc = (torch.randint(-64, 65, (m, n), generator=g) / 4).float()
    out = _run(a, sa, case[0], b, sb, case[1], m, n, k, acc=acc)
    plain = torch.zeros(m, n)
    InterpretedFunction(_dot_scale.fn)[(1,)](a, sa, b, sb, acc, plain, m, n, k, case[0], case[1], True, True,
                                            True, False)
    np.testing.assert_array_equal(out.numpy(), plain.numpy())
