"""``tl.inline_asm_elementwise`` traced on the CPU (record/gpu/inlineasm.py, numerics/ptx*.py): PTX idioms of
real kernels give the bits the PTX ISA defines. References are computed here independently: Python
integers bit by bit, exact rationals, torch's own float16/bfloat16/float8 conversions; the GPU check of the
same instructions is benchmarks/fidelity/inline_asm.py."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.errors import UnsupportedOp

N = 256
RS = np.random.RandomState(7)


@triton.jit
def one_in(X, O, ASM: tl.constexpr, CONS: tl.constexpr, OUT: tl.constexpr, PACK: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(X + r)
    tl.store(O + r, tl.inline_asm_elementwise(ASM, CONS, [x], dtype=OUT, is_pure=True, pack=PACK))


@triton.jit
def two_in(X, Y, O, ASM: tl.constexpr, CONS: tl.constexpr, OUT: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    x, y = tl.load(X + r), tl.load(Y + r)
    tl.store(O + r, tl.inline_asm_elementwise(ASM, CONS, [x, y], dtype=OUT, is_pure=True, pack=1))


@triton.jit
def three_in(X, Y, Z, O, ASM: tl.constexpr, CONS: tl.constexpr, OUT: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    x, y, z = tl.load(X + r), tl.load(Y + r), tl.load(Z + r)
    tl.store(O + r, tl.inline_asm_elementwise(ASM, CONS, [x, y, z], dtype=OUT, is_pure=True, pack=1))


def u32(n=N):
    return RS.randint(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a).view({1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[a.itemsize]))


def run(asm, cons, *inputs, out=tl.int32, pack=1):
    width = {tl.int32: np.uint32, tl.int16: np.uint16, tl.int64: np.uint64, tl.int8: np.uint8}[out]
    o = torch.zeros(inputs[0].size, dtype={tl.int32: torch.int32, tl.int16: torch.int16, tl.int64: torch.int64,
                                           tl.int8: torch.int8}[out])
    kernel = triton_trace.trace({1: one_in, 2: two_in, 3: three_in}[len(inputs)])
    args = [_t(a) for a in inputs] + [o]
    if len(inputs) == 1:
        kernel[(1,)](*args, ASM=asm, CONS=cons, OUT=out, PACK=pack, N=inputs[0].size)
    else:
        kernel[(1,)](*args, ASM=asm, CONS=cons, OUT=out, N=inputs[0].size)
    return o.numpy().view(width)


def test_lop3_matches_its_truth_table_for_any_lut():
    a, b, c = u32(), u32(), u32()
    for lut in (0xEA, 0x96, 0xF8, 0xE4, 0x01, 0x80, 0x6A):
        got = run(f"lop3.b32 $0, $1, $2, $3, {lut:#x};", "=r,r,r,r", a, b, c)
        for i in range(0, N, 37):
            want = 0
            for bit in range(32):
                k = ((int(a[i]) >> bit & 1) << 2) | ((int(b[i]) >> bit & 1) << 1) | (int(c[i]) >> bit & 1)
                want |= (lut >> k & 1) << bit
            assert int(got[i]) == want, (hex(lut), i)


def _prmt_ref(a: int, b: int, c: int, mode: str | None) -> int:
    src = [(a >> 8 * k) & 0xFF for k in range(4)] + [(b >> 8 * k) & 0xFF for k in range(4)]
    n = c & 3
    idx = {"f4e": [(n + i) % 8 for i in range(4)], "b4e": [(n - i) % 8 for i in range(4)], "rc8": [n] * 4,
           "ecl": [max(i, n) for i in range(4)], "ecr": [min(i, n) for i in range(4)],
           "rc16": [2 * (n & 1) + (i & 1) for i in range(4)]}.get(mode)
    out = 0
    for i in range(4):
        if mode is None:
            sel = (c >> 4 * i) & 0xF
            byte = src[sel & 7]
            byte = (0xFF if byte & 0x80 else 0) if sel & 8 else byte
        else:
            byte = src[idx[i]]
        out |= byte << 8 * i
    return out


@pytest.mark.parametrize("mode", [None, "f4e", "b4e", "rc8", "ecl", "ecr", "rc16"])
def test_prmt_selects_bytes_as_the_isa_table_says(mode):
    a, b, c = u32(), u32(), u32()
    op = "prmt.b32" + (f".{mode}" if mode else "")
    got = run(f"{op} $0, $1, $2, $3;", "=r,r,r,r", a, b, c)
    assert [int(g) for g in got] == [_prmt_ref(int(x), int(y), int(z), mode) for x, y, z in zip(a, b, c)]


def test_bit_field_extract_insert_and_counts():
    a, b = u32(), u32()
    pos = RS.randint(0, 40, N).astype(np.uint32)
    ln = RS.randint(0, 40, N).astype(np.uint32)
    bfe = run("bfe.u32 $0, $1, $2, $3;", "=r,r,r,r", a, pos, ln)
    bfe_s = run("bfe.s32 $0, $1, $2, $3;", "=r,r,r,r", a, pos, ln)
    for i in range(N):
        x, p, n = int(a[i]), int(pos[i]), int(ln[i])
        field = [(x >> (p + k)) & 1 if p + k <= 31 else None for k in range(min(n, 32))]
        want_u = sum(bit << k for k, bit in enumerate(field) if bit)
        assert int(bfe[i]) == want_u
        if n:
            sbit = (x >> min(p + n - 1, 31)) & 1
            want_s = sum((bit if bit is not None else sbit) << k for k, bit in enumerate(field))
            want_s |= (0xFFFFFFFF << min(n, 32) & 0xFFFFFFFF) if sbit else 0
            assert int(bfe_s[i]) == want_s & 0xFFFFFFFF, (x, p, n)
        else:
            assert int(bfe_s[i]) == 0
    assert [int(v) for v in run("popc.b32 $0, $1;", "=r,r", a)] == [bin(int(x)).count("1") for x in a]
    assert [int(v) for v in run("brev.b32 $0, $1;", "=r,r", a)] == [int(f"{int(x):032b}"[::-1], 2) for x in a]
    assert [int(v) for v in run("clz.b32 $0, $1;", "=r,r", a >> (a & 31))] == \
        [32 - int(x >> (x & 31)).bit_length() for x in a]
    ins = run("bfi.b32 $0, $1, $2, 8, 12;", "=r,r,r", a, b)
    assert [int(v) for v in ins] == [(int(y) & ~(0xFFF << 8) | (int(x) & 0xFFF) << 8) & 0xFFFFFFFF for x, y in zip(a, b)]


def test_integer_arithmetic_wraps_and_divides_toward_zero():
    a, b = u32(), u32()
    sa, sb = a.view(np.int32).astype(object), b.view(np.int32).astype(object)
    mhi = run("mul.hi.s32 $0, $1, $2;", "=r,r,r", a, b).view(np.int32)
    assert [int(v) for v in mhi] == [(int(x) * int(y)) >> 32 for x, y in zip(sa, sb)]
    mhu = run("mul.hi.u32 $0, $1, $2;", "=r,r,r", a, b)
    assert [int(v) for v in mhu] == [(int(x) * int(y)) >> 32 for x, y in zip(a, b)]
    wide = run("mul.wide.s32 $0, $1, $2;", "=l,r,r", a, b, out=tl.int64).view(np.int64)
    assert [int(v) for v in wide] == [int(x) * int(y) for x, y in zip(sa, sb)]
    b_small = (b % 1000).astype(np.uint32) - np.uint32(500)
    d = run("div.s32 $0, $1, $2;", "=r,r,r", a, b_small).view(np.int32)
    r = run("rem.s32 $0, $1, $2;", "=r,r,r", a, b_small).view(np.int32)
    for i in range(N):
        x, y = int(sa[i]), int(b_small.view(np.int32)[i])
        if y:
            q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
            assert (int(d[i]), int(r[i])) == (q, x - q * y)
    sat = run("add.sat.s32 $0, $1, $2;", "=r,r,r", a, b).view(np.int32)
    assert [int(v) for v in sat] == [max(-2 ** 31, min(2 ** 31 - 1, int(x) + int(y))) for x, y in zip(sa, sb)]
    n = (b & 63).astype(np.uint32)
    shr = run("shr.s32 $0, $1, $2;", "=r,r,r", a, n).view(np.int32)
    assert [int(v) for v in shr] == [int(x) >> min(int(k), 31) for x, k in zip(sa, n)]
    shf = run("shf.r.clamp.b32 $0, $1, $2, $3;", "=r,r,r,r", a, b, n)
    want = [(((int(y) << 32) | int(x)) >> min(int(k), 32)) & 0xFFFFFFFF for x, y, k in zip(a, b, n)]
    assert [int(v) for v in shf] == want


def test_predicates_and_guards():
    a, b = u32(), u32()
    asm = """{ .reg .pred p, q;
             setp.lt.s32 p|q, $1, $2;
             mov.b32 $0, 7;
             @p mov.b32 $0, 1;
             @!p add.u32 $0, $0, 2; }"""
    got = run(asm, "=r,r,r", a, b)
    assert [int(v) for v in got] == [1 if int(x) < int(y) else 9
                                     for x, y in zip(a.view(np.int32), b.view(np.int32))]
    sel = run("{ .reg .pred p; setp.lo.u32 p, $1, $2; selp.b32 $0, $1, $2, p; }", "=r,r,r", a, b)
    assert np.array_equal(sel, np.minimum(a, b))


def _exact(v) -> Fraction:
    return Fraction(float(v))


def _rounded_f32(x: Fraction, mode: str) -> np.float32:
    """The float32 nearest ``x`` in ``mode`` (exact comparisons of the neighbours)."""
    f = np.float32(float(x))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    below = [c for c in cands if _exact(c) <= x]
    above = [c for c in cands if _exact(c) >= x]
    lo, hi = max(below, key=_exact), min(above, key=_exact)
    if mode == "rm":
        return lo
    if mode == "rp":
        return hi
    if mode == "rz":
        return lo if x >= 0 else hi
    dl, dh = x - _exact(lo), _exact(hi) - x
    if dl != dh:
        return lo if dl < dh else hi
    return lo if int(np.float32(lo).view(np.uint32)) % 2 == 0 else hi


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_float32_arithmetic_in_every_rounding_mode(mode):
    x = (RS.randn(64) * 10.0 ** RS.randint(-3, 4, 64)).astype(np.float32)
    y = (RS.randn(64) * 10.0 ** RS.randint(-3, 4, 64)).astype(np.float32)
    z = RS.randn(64).astype(np.float32)
    xb, yb, zb = x.view(np.uint32), y.view(np.uint32), z.view(np.uint32)
    fma = run(f"fma.{mode}.f32 $0, $1, $2, $3;", "=r,r,r,r", xb, yb, zb).view(np.float32)
    add = run(f"add.{mode}.f32 $0, $1, $2;", "=r,r,r", xb, yb).view(np.float32)
    div = run(f"div.{mode}.f32 $0, $1, $2;", "=r,r,r", xb, yb).view(np.float32)
    sq = run(f"sqrt.{mode}.f32 $0, $1;", "=r,r", np.abs(x).view(np.uint32)).view(np.float32)
    for i in range(64):
        X, Y, Z = _exact(x[i]), _exact(y[i]), _exact(z[i])
        assert fma[i] == _rounded_f32(X * Y + Z, mode)
        assert add[i] == _rounded_f32(X + Y, mode)
        assert div[i] == _rounded_f32(X / Y, mode)
        assert _sqrt_ok(sq[i], abs(X), mode), (x[i], sq[i], mode)


def _sqrt_ok(r: np.float32, x: Fraction, mode: str) -> bool:
    """Whether ``r`` is sqrt(x) rounded in ``mode``, by squaring its neighbours exactly."""
    lo, hi = _exact(np.nextafter(r, np.float32(-np.inf))), _exact(np.nextafter(r, np.float32(np.inf)))
    R = _exact(r)
    if mode in ("rz", "rm"):
        return R * R <= x < hi * hi
    if mode == "rp":
        return lo * lo < x <= R * R
    return ((lo + R) / 2) ** 2 <= x <= ((R + hi) / 2) ** 2


def test_half_conversions_match_torch():
    x = np.concatenate([RS.randn(120) * 1000, [65504.0, 65520.0, 1e6, -1e6, 6e-8, 3e-8, 0.0, -0.0]]).astype(np.float32)
    y = RS.randn(x.size).astype(np.float32)
    f16 = run("cvt.rn.f16x2.f32 $0, $1, $2;", "=r,r,r", x.view(np.uint32), y.view(np.uint32))
    want_hi = torch.from_numpy(x).half().view(torch.int16).numpy().view(np.uint16)
    want_lo = torch.from_numpy(y).half().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal(f16 >> 16, want_hi) and np.array_equal(f16 & 0xFFFF, want_lo)
    bf = run("cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,r,r", x.view(np.uint32), y.view(np.uint32))
    assert np.array_equal(bf >> 16, torch.from_numpy(x).bfloat16().view(torch.int16).numpy().view(np.uint16))
    relu = run("cvt.rn.relu.f16x2.f32 $0, $1, $2;", "=r,r,r", x.view(np.uint32), y.view(np.uint32))
    assert np.array_equal((relu >> 16).astype(np.uint16).view(np.float16),
                          np.maximum(torch.from_numpy(x).half().numpy(), np.float16(0)))


@pytest.mark.parametrize("fmt, torch_dtype", [("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)])
def test_fp8_pairs_round_trip_as_torch_converts(fmt, torch_dtype):
    big = 448.0 if fmt == "e4m3" else 57344.0
    x = np.concatenate([RS.randn(200) * 30, RS.randn(40) * 1e-3, [big, -big, 2e-9]]).astype(np.float32)
    x = np.concatenate([x, np.zeros(N - x.size, np.float32)])
    y = x[::-1].copy()
    got = run(f"cvt.rn.satfinite.{fmt}x2.f32 $0, $1, $2;", "=h,r,r", x.view(np.uint32), y.view(np.uint32),
              out=tl.int16)
    want = torch.from_numpy(x).to(torch_dtype).view(torch.uint8).numpy()
    assert np.array_equal((got >> 8).astype(np.uint8), want)
    back = run(f"cvt.rn.f16x2.{fmt}x2 $0, $1;", "=r,h", got, out=tl.int32)
    want_back = torch.from_numpy(want).view(torch_dtype).half().view(torch.int16).numpy().view(np.uint16)
    assert np.array_equal((back >> 16).astype(np.uint16), want_back)
    sat = run(f"cvt.rn.satfinite.{fmt}x2.f32 $0, $1, $2;", "=h,r,r",
              np.full(N, 1e30, np.float32).view(np.uint32), np.full(N, -np.inf, np.float32).view(np.uint32),
              out=tl.int16)
    top = torch.tensor([big]).to(torch_dtype).view(torch.uint8).item()
    assert set((sat >> 8).tolist()) == {top} and set((sat & 0xFF).tolist()) == {top | 0x80}


def test_float_to_int_saturates_and_nan_gives_zero():
    x = np.array([1.5, 2.5, -1.5, -2.5, 3e9, -3e9, np.nan, np.inf, -np.inf, 0.49999997] * 8 + [0.0] * 176,
                 dtype=np.float32)
    rni = run("cvt.rni.s32.f32 $0, $1;", "=r,r", x.view(np.uint32)).view(np.int32)
    rzi = run("cvt.rzi.u32.f32 $0, $1;", "=r,r", x.view(np.uint32))
    want_n = [0 if np.isnan(v) else int(np.clip(np.rint(v), -2 ** 31, 2 ** 31 - 1)) for v in x.astype(np.float64)]
    want_z = [0 if np.isnan(v) else int(np.clip(np.trunc(v), 0, 2 ** 32 - 1)) for v in x.astype(np.float64)]
    assert rni.tolist() == want_n and rzi.tolist() == want_z


def test_awq_style_dequantisation_idiom():
    """int4 nibbles into fp16 by the magic-number trick: (q & 0x000F000F) | 0x64006400 is 1024 + n in each
    half, minus 1024 (sub.f16x2) leaves n exactly."""
    q = u32()
    asm = "lop3.b32 $0, $1, 0x000F000F, 0x64006400, 0xEA; sub.f16x2 $0, $0, $2;"
    got = run(asm, "=r,r,r", q, np.full(N, 0x64006400, np.uint32))
    lo = (got & 0xFFFF).astype(np.uint16).view(np.float16)
    hi = (got >> 16).astype(np.uint16).view(np.float16)
    assert np.array_equal(lo, (q & 0xF).astype(np.float16)) and np.array_equal(hi, ((q >> 16) & 0xF).astype(np.float16))


@triton.jit
def asm_copy(X, Y, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.inline_asm_elementwise("ld.global.b32 $0, [$1]; add.s32 $0, $0, 1; st.global.b32 [$2], $0;",
                              "=r,l,l", [X + offs, Y + offs], dtype=tl.int32, is_pure=False, pack=1)


def test_loads_and_stores_in_asm_are_recorded_and_bounds_checked():
    x = torch.arange(100, dtype=torch.int32)
    y = torch.zeros(128, dtype=torch.int32)
    traced = triton_trace.trace(asm_copy)
    traced[(2,)](x, y, 100, BLOCK=64)
    launch = triton_trace.current_trace().launches[-1]
    assert y[:100].tolist() == list(range(1, 101))
    report = triton_trace.analyze(launch)
    oob = [f for f in report.findings if f.kind == "out_of_bounds"]
    assert oob and oob[0].line == asm_copy.fn.__code__.co_firstlineno + 3
    assert len(launch.accesses(program=(1, 0, 0), kind="load")) == 1
    assert len(launch.accesses(program=(1, 0, 0), kind="store")) == 1


def test_unsupported_asm_names_the_instruction_and_the_line():
    with pytest.raises(UnsupportedOp) as info:
        run("mov.u32 $0, %laneid;", "=r,r", u32())
    msg = str(info.value)
    assert "inline asm not supported" in msg and "%laneid" in msg and "one_in" in msg
    with pytest.raises(UnsupportedOp, match="shfl.sync"):
        run("shfl.sync.bfly.b32 $0, $1, 1, 31, -1;", "=r,r", u32())


def test_batched_programs_keep_their_own_lanes():
    x = torch.from_numpy(u32(4 * 64).view(np.int32))
    y = torch.zeros_like(x)

    @triton.jit
    def swap_halves(X, Y, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(X + offs)
        tl.store(Y + offs, tl.inline_asm_elementwise("prmt.b32 $0, $1, 0, 0x1032;", "=r,r", [v], dtype=tl.int32,
                                                     is_pure=True, pack=1))
    triton_trace.trace(swap_halves)[(4,)](x, y, BLOCK=64)
    xs = x.numpy().view(np.uint32)
    assert np.array_equal(y.numpy().view(np.uint32), (xs >> 16) | (xs << 16))


def test_approximate_instructions_run_and_the_report_says_so(tmp_path):
    """tanh.approx.f32 (GELU kernels use it) runs correctly rounded; the launch records that its bits may
    not be the GPU's, and the note survives a save and load."""
    x = (RS.randn(N) * 3).astype(np.float32)
    got = run("tanh.approx.f32 $0, $1;", "=r,r", x.view(np.uint32)).view(np.float32)
    np.testing.assert_array_equal(got, np.tanh(x.astype(np.float64)).astype(np.float32))
    launch = triton_trace.current_trace().launches[-1]
    assert launch.meta["inline_asm_approx"] == ["tanh.approx.f32"]
    path = tmp_path / "t.ttrace"
    triton_trace.save(triton_trace.current_trace(), str(path))
    text = triton_trace.analyze(triton_trace.load(str(path))).summary()
    assert "inline asm ran tanh.approx.f32 correctly rounded" in text


def test_fp4_e2m1_pairs_round_to_nearest_even_and_saturate():
    """Blackwell's cvt.rn.satfinite.e2m1x2.f32 (as NVFP4 quantisation kernels write it): a to the upper
    nibble, b to the lower; the reference picks the nearest of the 8 magnitudes by exact distances."""
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    x = np.concatenate([RS.randn(200) * 3, [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 1e9, -0.25]]).astype(np.float32)
    x = np.concatenate([x, np.zeros(N - x.size, np.float32)])
    y = x[::-1].copy()
    asm = "{ .reg .b8 t; cvt.rn.satfinite.e2m1x2.f32 t, $1, $2; cvt.u32.u8 $0, t; }"
    got = run(asm, "=r,r,r", x.view(np.uint32), y.view(np.uint32))

    def code(v):
        a = min(abs(Fraction(float(v))), Fraction(6))
        best = min(range(8), key=lambda i: (abs(Fraction(mags[i]) - a), i % 2))
        return best | (8 if np.signbit(v) else 0)
    assert [int(g) for g in got] == [code(a) << 4 | code(b) for a, b in zip(x, y)]
    back = run("{ .reg .b8 t; cvt.u8.u32 t, $1; cvt.rn.f16x2.e2m1x2 $0, t; }", "=r,r", got)
    hi = (back >> 16).astype(np.uint16).view(np.float16).astype(np.float64)
    assert hi.tolist() == [(-1 if c & 8 else 1) * mags[c & 7] for c in (int(g) >> 4 for g in got)]


def test_timer_registers_read_the_host_clock():
    t0 = __import__("time").monotonic_ns()
    got = run("mov.u64 $0, %globaltimer;", "=l,l", np.zeros(N, np.uint64), out=tl.int64)
    assert len(set(got.tolist())) == 1 and t0 <= int(got[0]) <= __import__("time").monotonic_ns()
