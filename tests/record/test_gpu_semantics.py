"""Ops where Triton's interpreter differed from the compiled kernel on an H100 (benchmarks/fidelity/
RESULTS_launches.md: test_propagate_nan, test_block_copy, test_histogram_silent_data_corruption,
test_sum_dtype, test_scaled_dot). Every expected value is what the PTX the compiler emits defines, computed
here in numpy without the tracer: max.f32/min.f32 return the operand that is not NaN and the canonical NaN
(0x7fffffff, fp16/bf16 0x7fff); NaN padding is the type's quiet NaN (bf16 0x7fc0); a histogram drops values
outside its bins; integer sums wrap in their type; fp8 decodes exactly (e5m2 to fp16 is a shift by 8)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from triton.runtime import interpreter as _ti

import triton_trace


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).numpy()


# --------------------------------------------------------------------------------------------------------
# 1. maximum / minimum / clamp and NaN
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _minmax(a_ptr, b_ptr, out_ptr, FUNC: tl.constexpr, NAN: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + offs)
    b = tl.load(b_ptr + offs)
    if FUNC == "maximum":
        c = tl.maximum(a, b, propagate_nan=NAN)
    elif FUNC == "minimum":
        c = tl.minimum(a, b, propagate_nan=NAN)
    else:
        c = tl.clamp(a, -b, b, propagate_nan=NAN)
    tl.store(out_ptr + offs, c)


_CANON = {torch.float32: 0x7FFFFFFF, torch.float16: 0x7FFF, torch.bfloat16: 0x7FFF}


def _expected_minmax(a, b, func, nan_mode):
    a64, b64 = a.double().numpy(), b.double().numpy()
    if func == "clamp":            # minnum(maxnum(x, lo), hi); ALL: maximum/minimum (NaN wins)
        lo, hi = -b64, b64
        if nan_mode == "NONE":
            v = np.fmin(np.fmax(a64, lo), hi)
        else:
            v = np.minimum(np.maximum(a64, lo), hi)
    else:
        ops = {("maximum", "NONE"): np.fmax, ("minimum", "NONE"): np.fmin,
               ("maximum", "ALL"): np.maximum, ("minimum", "ALL"): np.minimum}
        v = ops[func, nan_mode](a64, b64)
    out = torch.from_numpy(v).to(a.dtype)
    bits = _bits(out).copy()
    bits[np.isnan(v)] = np.array(_CANON[a.dtype]).astype(bits.dtype)
    return bits


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("nan_mode", ["NONE", "ALL"])
@pytest.mark.parametrize("func", ["maximum", "minimum", "clamp"])
def test_minmax_nan(func, nan_mode, dtype):
    g = torch.Generator().manual_seed(1)
    n = 8
    a = torch.rand(n, generator=g).to(dtype) + 0.25
    b = torch.rand(n, generator=g).to(dtype) + 0.25
    a[[0, 2]] = float("nan")                  # a NaN, b NaN, both, and plain lanes
    b[[1, 2]] = float("nan")
    out = torch.zeros(n, dtype=dtype)
    triton_trace.trace(_minmax)[(1,)](a, b, out, func, getattr(tl.PropagateNan, nan_mode), n)
    np.testing.assert_array_equal(_bits(out), _expected_minmax(a, b, func, nan_mode))


# --------------------------------------------------------------------------------------------------------
# 2. padding_option="nan" on bfloat16 and fp8 loads
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _desc_copy(src, dst, n, BLOCK: tl.constexpr):
    desc = tl.make_tensor_descriptor(src, shape=[n], strides=[1], block_shape=[BLOCK], padding_option="nan")
    tl.store(dst + tl.arange(0, BLOCK), desc.load([0]))


@triton.jit
def _block_ptr_copy(src, dst, n, BLOCK: tl.constexpr):
    p = tl.make_block_ptr(src, shape=(n,), strides=(1,), offsets=(0,), block_shape=(BLOCK,), order=(0,))
    tl.store(dst + tl.arange(0, BLOCK), tl.load(p, boundary_check=(0,), padding_option="nan"))


_PAD = {torch.bfloat16: 0x7FC0, torch.float16: 0x7E00, torch.float32: 0x7FC00000}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("kind", ["descriptor", "block_ptr"])
def test_nan_padding(kind, dtype):
    if kind == "block_ptr" and not hasattr(_ti.InterpreterBuilder, "create_tensor_pointer_load"):
        pytest.skip("this Triton release has no block pointers")
    n, block = 5, 8
    src = torch.arange(1, n + 1).to(dtype)
    dst = torch.zeros(block, dtype=dtype)
    kernel = _desc_copy if kind == "descriptor" else _block_ptr_copy
    triton_trace.trace(kernel)[(1,)](src, dst, n, block)
    expected = np.concatenate([_bits(src), np.full(block - n, _PAD[dtype])]).astype(_bits(dst).dtype)
    np.testing.assert_array_equal(_bits(dst), expected)


# --------------------------------------------------------------------------------------------------------
# 3. histogram drops values outside [0, num_bins)
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _hist(x_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    z = tl.histogram(tl.load(x_ptr + tl.arange(0, M)), N)
    tl.store(z_ptr + tl.arange(0, N), z)


@triton.jit
def _hist_masked(x_ptr, z_ptr, M: tl.constexpr, N: tl.constexpr):
    offs = tl.arange(0, M)
    z = tl.histogram(tl.load(x_ptr + offs), N, mask=offs % 2 == 0)
    tl.store(z_ptr + tl.arange(0, N), z)


@pytest.mark.parametrize("masked", [False, True])
def test_histogram_out_of_range(masked):
    m, bins = 16, 4
    x = torch.tensor([0, 1, 4, 3, 4, 5, -1, 2, 3, 4, 100, 0, -7, 1, 4, 2], dtype=torch.int32)
    z = torch.full((bins + 1,), 99, dtype=torch.int32)        # the sentinel after the bins stays
    triton_trace.trace(_hist_masked if masked else _hist)[(1,)](x, z, m, bins)
    xs = x.numpy()[::2] if masked else x.numpy()
    kept = xs[(xs >= 0) & (xs < bins)]
    np.testing.assert_array_equal(z.numpy(), np.append(np.bincount(kept, minlength=bins), 99))


# --------------------------------------------------------------------------------------------------------
# 4. integer sums wrap in their type
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _sum_dtype(out_ptr, init, IN: tl.constexpr, OUT: tl.constexpr):
    x = tl.full((32, 32), init, dtype=IN)
    tl.store(out_ptr, tl.sum(x, dtype=OUT).to(tl.int32))


@triton.jit
def _sum_rows(x_ptr, out_ptr, cum_ptr, N: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :])
    tl.store(out_ptr + tl.arange(0, N), tl.sum(x, axis=1, dtype=tl.int8))
    tl.store(cum_ptr + tl.arange(0, N)[:, None] * N + tl.arange(0, N)[None, :], tl.cumsum(x, axis=1))


@pytest.mark.parametrize("init, in_dtype, out_dtype, expected", [
    (1, tl.int1, tl.int1, 1024 % 2),
    (1, tl.int1, None, 1024),                                  # promoted to int32: no wrap
    (7, tl.int8, tl.int8, (7 * 1024 + 128) % 256 - 128),
    (3, tl.int8, tl.int8, (3 * 1024 + 128) % 256 - 128),
    (100, tl.int16, tl.int16, (100 * 1024 + 2**15) % 2**16 - 2**15),
    (2**30, tl.int32, None, (2**40 + 2**31) % 2**32 - 2**31),
])
def test_integer_sum_wraps(init, in_dtype, out_dtype, expected):
    out = torch.full((1,), -5, dtype=torch.int32)
    triton_trace.trace(_sum_dtype)[(1,)](out, init, in_dtype, out_dtype)
    assert out.item() == expected


def test_integer_sum_and_cumsum_blocks_wrap():
    n = 16
    x = torch.randint(-128, 128, (n, n), dtype=torch.int8, generator=torch.Generator().manual_seed(3))
    out = torch.zeros(n, dtype=torch.int8)
    cum = torch.zeros(n, n, dtype=torch.int8)
    triton_trace.trace(_sum_rows)[(1,)](x, out, cum, n)
    x64 = x.numpy().astype(np.int64)
    np.testing.assert_array_equal(out.numpy(), (x64.sum(axis=1) + 128) % 256 - 128)
    np.testing.assert_array_equal(cum.numpy(), (np.cumsum(x64, axis=1) + 128) % 256 - 128)


# --------------------------------------------------------------------------------------------------------
# 5. fp8 -> fp16 / bf16 / fp32 / fp64, all 256 codes
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _fp8_cast(x_ptr, out_ptr, N: tl.constexpr, OUT: tl.constexpr):
    offs = tl.arange(0, N)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs).to(OUT))


def _fp8_values(codes: np.ndarray, fmt: str) -> np.ndarray:
    """Each code's value by the format's definition (OCP FP8: e5m2 IEEE-like, e4m3fn no Inf)."""
    e_bits, m_bits, bias = (5, 2, 15) if fmt == "e5m2" else (4, 3, 7)
    c = codes.astype(np.int64)
    sign = np.where(c >> 7, -1.0, 1.0)
    e, m = (c >> m_bits) & ((1 << e_bits) - 1), c & ((1 << m_bits) - 1)
    mag = np.where(e == 0, m / 2.0 ** m_bits * 2.0 ** (1 - bias), (1 + m / 2.0 ** m_bits) * 2.0 ** (e - bias))
    if fmt == "e5m2":
        mag = np.where(e == 31, np.where(m == 0, np.inf, np.nan), mag)
    else:
        mag = np.where((e == 15) & (m == 7), np.nan, mag)
    return sign * mag


@pytest.mark.parametrize("fmt, torch_fp8", [("e5m2", torch.float8_e5m2), ("e4m3", torch.float8_e4m3fn)])
@pytest.mark.parametrize("out_t, out_tl", [(torch.float16, tl.float16), (torch.bfloat16, tl.bfloat16),
                                           (torch.float32, tl.float32), (torch.float64, tl.float64)])
def test_fp8_upcast_exact(fmt, torch_fp8, out_t, out_tl):
    codes = np.arange(256, dtype=np.uint8)
    x = torch.from_numpy(codes).view(torch_fp8)
    out = torch.zeros(256, dtype=out_t)
    triton_trace.trace(_fp8_cast)[(1,)](x, out, 256, out_tl)
    want = _fp8_values(codes, fmt)
    got = out.double().numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok], want[ok])
    np.testing.assert_array_equal(np.signbit(got[ok]), np.signbit(want[ok]))      # -0 stays -0
    if fmt == "e5m2" and out_t == torch.float16:     # cvt.rn.f16x2.e5m2x2: fp16's bits are e5m2's << 8
        np.testing.assert_array_equal(_bits(out).view(np.uint16), codes.astype(np.uint16) << 8)


# --------------------------------------------------------------------------------------------------------
# 6. dot_scaled: runs on every supported Triton, 3.6 included
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _dot_scaled(a_ptr, sa_ptr, b_ptr, sb_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                FMT: tl.constexpr):
    a = tl.load(a_ptr + tl.arange(0, M)[:, None] * K + tl.arange(0, K)[None, :])
    b = tl.load(b_ptr + tl.arange(0, K)[:, None] * N + tl.arange(0, N)[None, :])
    SK: tl.constexpr = K // 32
    sa = tl.load(sa_ptr + tl.arange(0, M)[:, None] * SK + tl.arange(0, SK)[None, :])
    sb = tl.load(sb_ptr + tl.arange(0, N)[:, None] * SK + tl.arange(0, SK)[None, :])
    c = tl.dot_scaled(a, sa, FMT, b, sb, FMT)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], c)


def test_dot_scaled_matches_the_scaled_product_on_every_triton():
    """Triton 3.6's interpreter has no create_dot_scaled: record/gpu/dotscaled.py supplies it."""
    m = n = 16
    k = 64
    g = torch.Generator().manual_seed(5)
    # small integers times powers of two: every product and sum is exact in fp32, whatever the order
    a = torch.randint(-4, 5, (m, k), generator=g).float().to(torch.float8_e4m3fn)
    b = torch.randint(-4, 5, (k, n), generator=g).float().to(torch.float8_e4m3fn)
    sa = torch.randint(124, 131, (m, k // 32), generator=g, dtype=torch.uint8)
    sb = torch.randint(124, 131, (n, k // 32), generator=g, dtype=torch.uint8)
    out = torch.zeros(m, n)
    kernel = triton_trace.trace(_dot_scaled)
    kernel[(1,)](a, sa, b, sb, out, m, n, k, "e4m3")
    # e8m0 scales: 2^(s - 127), one per 32 elements along K
    a_scaled = a.double().numpy() * np.repeat(2.0 ** (sa.numpy().astype(np.float64) - 127), 32, axis=1)
    b_scaled = b.double().numpy() * np.repeat(2.0 ** (sb.numpy().astype(np.float64) - 127), 32, axis=1).T
    np.testing.assert_array_equal(out.numpy(), (a_scaled @ b_scaled).astype(np.float32))


# --------------------------------------------------------------------------------------------------------
# the same ops in a batched chunk (several programs in one numpy pass)
# --------------------------------------------------------------------------------------------------------
@triton.jit
def _per_program(a_ptr, b_ptr, x_ptr, c_ptr, mm_ptr, hist_ptr, sum_ptr, pad_ptr, n, N: tl.constexpr,
                 BINS: tl.constexpr, PAD: tl.constexpr):
    pid = tl.program_id(0)
    offs = tl.arange(0, N)
    a = tl.load(a_ptr + pid * N + offs)
    b = tl.load(b_ptr + pid * N + offs)
    tl.store(mm_ptr + pid * N + offs, tl.clamp(tl.maximum(a, b), -b, b))
    x = tl.load(x_ptr + pid * N + offs)
    tl.store(hist_ptr + pid * BINS + tl.arange(0, BINS), tl.histogram(x, BINS))
    tl.store(sum_ptr + pid, tl.sum(x.to(tl.int8), dtype=tl.int8))
    desc = tl.make_tensor_descriptor(c_ptr + pid * N, shape=[n], strides=[1], block_shape=[PAD],
                                     padding_option="nan")
    tl.store(pad_ptr + pid * PAD + tl.arange(0, PAD), desc.load([0]))


@pytest.mark.parametrize("batch", [False, True])
def test_batched_chunk_matches(batch):
    progs, n, bins, pad = 4, 16, 4, 32
    g = torch.Generator().manual_seed(7)
    a = torch.rand(progs * n, generator=g) + 0.5
    b = torch.rand(progs * n, generator=g) + 0.5
    a[::3] = float("nan")
    b[1::5] = float("nan")
    x = torch.randint(-2, 7, (progs * n,), generator=g, dtype=torch.int32) * 13
    x[x > 60] = 3
    mm = torch.zeros(progs * n)
    hist = torch.zeros(progs * bins, dtype=torch.int32)
    sums = torch.zeros(progs, dtype=torch.int8)
    padded = torch.zeros(progs * pad, dtype=torch.bfloat16)
    c = torch.arange(progs * n).to(torch.bfloat16)
    triton_trace.trace(batch=batch)(_per_program)[(progs,)](a, b, x, c, mm, hist, sums, padded, n, n, bins, pad)
    a64, b64 = a.double().numpy(), b.double().numpy()
    want = np.fmin(np.fmax(np.fmax(a64, b64), -b64), b64).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(mm.numpy()), np.isnan(want))
    np.testing.assert_array_equal(mm.numpy()[~np.isnan(want)], want[~np.isnan(want)])
    xs = x.numpy().reshape(progs, n)
    for p in range(progs):
        kept = xs[p][(xs[p] >= 0) & (xs[p] < bins)]
        np.testing.assert_array_equal(hist.numpy()[p * bins:(p + 1) * bins], np.bincount(kept, minlength=bins))
    np.testing.assert_array_equal(sums.numpy(), (xs.astype(np.int8).astype(np.int64).sum(axis=1) + 128) % 256 - 128)
    pad_bits = _bits(padded).view(np.uint16).reshape(progs, pad)
    np.testing.assert_array_equal(pad_bits[:, n:], np.full((progs, pad - n), 0x7FC0))
    np.testing.assert_array_equal(pad_bits[:, :n], _bits(c).view(np.uint16).reshape(progs, n))


# ---------------------------------------------------------------- numerics="compiled": arithmetic's NaN


@triton.jit
def _nan_arith(a_ptr, b_ptr, c_ptr, out_ptr, B: tl.constexpr):
    o = tl.arange(0, B)
    a, b, c = tl.load(a_ptr + o), tl.load(b_ptr + o), tl.load(c_ptr + o)
    tl.store(out_ptr + 0 * B + o, a + b)
    tl.store(out_ptr + 1 * B + o, a - b)
    tl.store(out_ptr + 2 * B + o, a * b)
    tl.store(out_ptr + 3 * B + o, a * b + c)
    tl.store(out_ptr + 4 * B + o, -a)
    tl.store(out_ptr + 5 * B + o, tl.fma(a, b, c))


@pytest.mark.parametrize("batch", [True, False])
def test_arithmetic_nans_are_canonical_under_compiled_numerics(batch):
    """add.f32/sub/mul/fma/neg write 0x7fffffff for every NaN result (an H100 did for FlagGems' softmax
    backward); numpy keeps an operand's payload and sign or makes x86's 0xffc00000 (inf - inf)."""
    # a quiet, a negative and a signalling NaN; -0.0, whose negation is +0 both as fneg and as 3.6's 0 - x
    payload = np.array([0x7FC00123, 0xFFC00456, 0x7F800001], np.uint32).view(np.float32)
    a = np.array([payload[0], 1.0, np.inf, -0.0, payload[1], 2.0, payload[2], 3.0], np.float32)
    b = np.array([1.0, payload[1], np.inf, np.inf, 1.0, 2.0, 1.0, 4.0], np.float32)
    c = np.array([0.0, 0.0, -np.inf, 1.0, 0.0, payload[0], 0.0, 5.0], np.float32)
    with np.errstate(invalid="ignore"):
        want = np.stack([a + b, a - b, a * b, a * b + c, -a, a * b + c]).astype(np.float32)
    want_bits = np.where(np.isnan(want), np.uint32(0x7FFFFFFF), want.view(np.uint32))
    out = torch.empty(6 * 8)
    triton_trace.trace(_nan_arith, numerics="compiled", batch=batch)[(1,)](
        torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c), out, B=8)
    assert np.isnan(want).sum() >= 20           # the inputs do make NaNs, of several kinds
    assert np.array_equal(out.numpy().view(np.uint32), want_bits.ravel())
    plain = torch.empty(6 * 8)                  # the default keeps the interpreter's numpy bits
    triton_trace.trace(_nan_arith, batch=batch)[(1,)](torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c),
                                                      plain, B=8)
    assert not np.array_equal(plain.numpy().view(np.uint32), want_bits.ravel())


@triton.jit
def _remainder(x_ptr, y_ptr, out_ptr, B: tl.constexpr):
    o = tl.arange(0, B)
    tl.store(out_ptr + o, tl.load(x_ptr + o) % tl.load(y_ptr + o))


def _frem_as_compiled(x: float, y: float, t: torch.dtype) -> float:
    """sm_90's frem: q = div.rn(x, y) in fp32 (fp64 for fp64), r = fma.rn(-trunc(q), y, x), x where y is
    infinite; worked here with exact fractions (the fma's one rounding) and torch's rounding to the type."""
    from fractions import Fraction
    work = torch.float64 if t == torch.float64 else torch.float32
    if np.isinf(y):
        return x
    q = (torch.tensor(x, dtype=work) / torch.tensor(y, dtype=work)).item()
    exact = Fraction(x) - Fraction(int(q)) * Fraction(y)          # |q| < 2^53 here: int() is trunc
    r = torch.tensor(float(exact), dtype=torch.float64).to(work)   # exact fits float64 for these inputs
    if exact == 0:
        r = torch.tensor(0.0, dtype=work)                          # an exact zero sum is +0 (round to nearest)
    return r.to(t).item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_float_remainder_is_the_compiled_frem_expansion(dtype):
    """-4 % 2 is +0 on the GPU (C's fmod: -0); a quotient past 2^24 is rounded before it is truncated, so
    1e10 % 3 is not fmod's exact 1; x % inf is x."""
    xs = [-4.0, 5.5, 65504.0 if dtype == torch.float16 else 1e10, 7.0, -7.5, 3.0, 100.25, -0.0]
    ys = [2.0, -2.0, 3.0, float("inf"), 2.5, 7.0, -0.75, 5.0]
    x, y = torch.tensor(xs, dtype=dtype), torch.tensor(ys, dtype=dtype)
    out = torch.empty_like(x)
    triton_trace.trace(_remainder, numerics="compiled")[(1,)](x, y, out, B=8)
    want = torch.tensor([_frem_as_compiled(a, b, dtype) for a, b in zip(x.double().tolist(), y.double().tolist())],
                        dtype=dtype)
    assert torch.equal(_bits_t(out), _bits_t(want)), (out, want)
    assert torch.signbit(out[0]) == torch.tensor(False)                 # +0, where fmod gives -0
    assert torch.fmod(x[0], y[0]).signbit()


def _bits_t(t: torch.Tensor) -> torch.Tensor:
    return t.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@triton.jit
def _to_fp8(x_ptr, out_ptr, B: tl.constexpr, DT: tl.constexpr):
    o = tl.arange(0, B)
    tl.store(out_ptr + o, tl.load(x_ptr + o).to(DT))


@pytest.mark.parametrize("batch", [True, False])
@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("dst, tl_dst, top", [(torch.float8_e4m3fn, tl.float8e4nv, 448.0),
                                              (torch.float8_e5m2, tl.float8e5, 57344.0)])
def test_conversion_to_fp8_rounds_to_nearest_and_saturates(batch, src, dst, tl_dst, top):
    """cvt.rn.satfinite.e4m3x2/e5m2x2 (the PTX Triton 3.6 emits for sm_90): nearest-even, magnitudes past the
    largest finite (infinities too) clamped to it. The interpreter gave 256 for 1000 into e4m3. Expected:
    torch's nearest-even cast of the clamped value."""
    g = torch.Generator().manual_seed(1)
    x = torch.cat([torch.randn(244, generator=g) * 4.0 ** torch.randint(-6, 9, (244,), generator=g),
                   torch.tensor([1000.0, -1000.0, 500.0, 464.0, 60000.0, -70000.0, 0.0, -0.0,
                                 float("inf"), float("-inf"), 1e-9, top])]).to(src)
    out = torch.empty(x.numel(), dtype=dst)
    triton_trace.trace(_to_fp8, batch=batch)[(1,)](x, out, B=x.numel(), DT=tl_dst)
    want = x.double().clamp(-top, top).to(dst)
    assert torch.equal(out.view(torch.uint8), want.view(torch.uint8))
    if top == 448.0:
        assert out.float()[244:247].tolist() == [448.0, -448.0, 448.0]      # 1000, -1000, 500
    nan = torch.empty(1, dtype=dst)
    triton_trace.trace(_to_fp8, batch=batch)[(1,)](torch.tensor([float("nan")], dtype=src), nan, B=1, DT=tl_dst)
    assert torch.isnan(nan.float()).all()
