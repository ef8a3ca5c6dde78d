"""Inline PTX where the GPU's bits are not the PTX ISA's plain reading, traced on the CPU (numerics/ptx*.py):
integer remainder by zero, the sign of exact zero sums, the NaNs each instruction writes, ``.relu`` of -0.
The references are an H100's own results (``benchmarks/fidelity/gpu_2026-12-07b/inline_asm/inline_asm.json``,
the examples benchmarks/fidelity/inline_asm.py saved where the trace had differed), read from that file; the
same instructions away from those corners are checked against Fractions, torch and Python integers."""
from __future__ import annotations

import importlib.util
import json
import math
import os
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers import paths

FID = os.path.join(paths.ROOT, "benchmarks", "fidelity")
RS = np.random.RandomState(11)
_TORCH = {np.uint32: torch.int32, np.uint16: torch.int16, np.uint64: torch.int64, np.uint8: torch.int8}


def _harness():
    """The benchmark's module: its case table (asm, constraints, input kinds, output kind, pack) and the array
    type of each kind (``_NP``) say how the GPU ran each case."""
    spec = importlib.util.spec_from_file_location("fidelity_inline_asm", os.path.join(FID, "inline_asm.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _gpu_rows() -> dict:
    with open(os.path.join(FID, "gpu_2026-12-07b", "inline_asm", "inline_asm.json")) as f:
        rows = json.load(f)["rows"]
    return {r["case"]: r for r in rows if r.get("examples") and r["status"] == "differs"}


HARNESS, ROWS = _harness(), _gpu_rows()


@triton.jit
def asm_kernel(X, Y, Z, O, ASM: tl.constexpr, CONS: tl.constexpr, K: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    if K == 1:
        args = [tl.load(X + r)]
    elif K == 2:
        args = [tl.load(X + r), tl.load(Y + r)]
    else:
        args = [tl.load(X + r), tl.load(Y + r), tl.load(Z + r)]
    tl.store(O + r, tl.inline_asm_elementwise(ASM, CONS, args, dtype=O.dtype.element_ty, is_pure=True, pack=1))


def run(asm: str, cons: str, inputs: list, out=np.uint32) -> np.ndarray:
    """The traced kernel's output bits for inputs given as unsigned bit arrays (one launch, padded to 2^k)."""
    n = len(inputs[0])
    size = 1 << max(n - 1, 1).bit_length()
    tensors = [torch.from_numpy(np.resize(np.asarray(x), size).view(np.asarray(x).dtype.str.replace("u", "i")))
               for x in inputs]
    o = torch.zeros(size, dtype=_TORCH[out])
    tensors += [tensors[0]] * (3 - len(tensors))
    triton_trace.trace(asm_kernel)[(1,)](*tensors, o, ASM=asm, CONS=cons, K=len(inputs), N=size)
    return o.numpy().view(out)[:n]


# --- the GPU's recorded examples ------------------------------------------------------------------------------
_FIXED = ["rem.s32", "add.rm.f32", "fma.rn.f32", "fma.rz.f32", "fma.rn.f16", "fma.rn.f16x2", "fma.rn.bf16x2",
          "abs.f32", "neg.f32", "add.f64", "fma.rn.f64", "div.rn.f64", "add.rz.f64", "cvt.rn.relu.f16x2.f32",
          "cvt.rmi.s64.f64", "cvt.rn.f32.f64", "cvt.f32.f16", "cvt.rna.tf32.f32"]


def test_every_recorded_difference_is_covered():
    """A new GPU run's differing cases (other than the approximate instructions) are all checked below."""
    assert sorted(ROWS) == sorted(_FIXED)


@pytest.mark.parametrize("case", _FIXED)
def test_gpu_examples_bit_for_bit(case):
    asm, cons, kinds, out_kind, pack = HARNESS.CASES[case]
    row = ROWS[case]
    assert row["asm"] == asm and pack == 1
    inputs = [np.array([int(e["inputs"][k], 16) for e in row["examples"]], dtype=np.uint64).astype(HARNESS._NP[kind])
              for k, kind in enumerate(kinds)]
    got = run(asm, cons, inputs, HARNESS._NP[out_kind])
    want = [int(e["gpu"], 16) for e in row["examples"]]
    assert [hex(int(g)) for g in got] == [hex(w) for w in want]


def _rows_of(run: str) -> dict:
    with open(os.path.join(FID, run, "inline_asm", "inline_asm.json")) as f:
        return {r["case"]: r for r in json.load(f)["rows"] if r.get("examples") and r["status"] == "differs"}


# the rerun after the first fixes (gpu_2026-12-07c, other inputs: NaNs with payloads, infinities): the f64
# NaN rules (numerics/ptx_float.py _f64_nans) and cvt.rn.f32.f64's payload
_RERUN = ["add.f64", "fma.rn.f64", "div.rn.f64", "add.rz.f64", "cvt.rn.f32.f64"]


def test_the_reruns_differences_are_covered():
    assert sorted(_rows_of("gpu_2026-12-07c")) == sorted(_RERUN)


def _replay(case: str, row: dict) -> tuple:
    """The traced bits of a GPU run's saved examples of ``case``, beside the GPU's, as hex strings."""
    asm, cons, kinds, out_kind, pack = HARNESS.CASES[case]
    inputs = [np.array([int(e["inputs"][k], 16) for e in row["examples"]], dtype=np.uint64).astype(HARNESS._NP[kind])
              for k, kind in enumerate(kinds)]
    return [hex(int(g)) for g in run(asm, cons, inputs, HARNESS._NP[out_kind])], [e["gpu"] for e in row["examples"]]


@pytest.mark.parametrize("case", _RERUN)
def test_rerun_examples_bit_for_bit(case):
    got, gpu = _replay(case, _rows_of("gpu_2026-12-07c")[case])
    assert got == gpu


# the third run (gpu_2026-12-07e): 95 of 100 bit-exact, the four approximations and fma.rn.f64 of a finite
# product past float64's range with an infinite addend (the GPU: the addend; the trace gave NaN)
def test_the_third_runs_differences_are_covered():
    assert sorted(_rows_of("gpu_2026-12-07e")) == ["fma.rn.f64"]


def test_fma_f64_of_a_product_past_the_range_has_the_gpus_bits():
    got, gpu = _replay("fma.rn.f64", _rows_of("gpu_2026-12-07e")["fma.rn.f64"])
    assert got == gpu


def test_fma_f64_past_the_range_with_a_finite_addend_against_fractions():
    """2 * DBL_MAX - DBL_MAX is DBL_MAX, not inf: the exact sum decides, as Fractions compute it."""
    big = np.finfo(np.float64).max
    a = np.array([2.0, -2.0, 4.0, 1.5, 2.0], dtype=np.float64)
    b = np.array([big, big, big, big, big], dtype=np.float64)
    c = np.array([-big, big, -big, -big, -1.0], dtype=np.float64)
    got = run("fma.rn.f64 $0, $1, $2, $3;", "=l,l,l,l", [a.view(np.uint64), b.view(np.uint64), c.view(np.uint64)],
              np.uint64).view(np.float64)
    for x, y, z, g in zip(a, b, c, got):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        want = float(exact) if abs(exact) <= Fraction(big) else (math.inf if exact > 0 else -math.inf)
        assert g == want, (x, y, z, g, want)


@pytest.mark.parametrize("case", ["rcp.approx.f32", "div.full.f32"])
def test_mufu_instructions_in_inline_asm_have_the_gpus_bits(case):
    """rcp.approx and div.full in inline PTX run numerics/mufu.py: the GPU's recorded examples (held out from
    the tables the emulation is built on) bit for bit."""
    with open(os.path.join(FID, "gpu_2026-12-07b", "inline_asm", "inline_asm.json")) as f:
        row = {r["case"]: r for r in json.load(f)["rows"]}[case]
    asm, cons, kinds, out_kind, pack = HARNESS.CASES[case]
    assert row["asm"] == asm and row["status"] == "approximate" and len(row["examples"]) >= 6
    inputs = [np.array([int(e["inputs"][k], 16) for e in row["examples"]], dtype=np.uint64).astype(HARNESS._NP[kind])
              for k, kind in enumerate(kinds)]
    got = run(asm, cons, inputs, HARNESS._NP[out_kind])
    assert [hex(int(g)) for g in got] == [e["gpu"] for e in row["examples"]]


# --- the same instructions away from those corners --------------------------------------------------------------
def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def test_rem_s32_by_nonzero_truncates_toward_zero():
    a = RS.randint(-2 ** 31, 2 ** 31, 256).astype(np.int32)
    b = RS.randint(-300, 300, 256).astype(np.int32)
    b[b == 0] = 7
    got = run("rem.s32 $0, $1, $2;", "=r,r,r", [a.view(np.uint32), b.view(np.uint32)]).view(np.int32)
    assert got.tolist() == [int(math.fmod(int(x), int(y))) for x, y in zip(a, b)]


def _zero_sum_sign(x: float, y: float, down: bool) -> float:
    """IEEE 754 (section 6.3): an exact zero sum is -0 when both addends are -0, or in roundTowardNegative."""
    both_neg = math.copysign(1, x) < 0 and math.copysign(1, y) < 0
    return -0.0 if both_neg or (down and not (math.copysign(1, x) > 0 and math.copysign(1, y) > 0)) else 0.0


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
def test_add_and_fma_signs_of_exact_zeros_and_other_sums(mode):
    x = (RS.randn(64) * 10.0 ** RS.randint(-3, 4, 64)).astype(np.float32)
    x[:16] = [0.0, -0.0, 0.0, -0.0, 1.5, -1.5, 3e38, -3e38, 1e-45, -1e-45] + [2.0] * 6
    y = -x                                       # exact cancellation everywhere but the rows below
    y[:4] = [0.0, -0.0, -0.0, 0.0]
    y[32:] = RS.randn(32).astype(np.float32)
    one = np.ones(64, dtype=np.float32)
    add = run(f"add.{mode}.f32 $0, $1, $2;", "=r,r,r", [_f32(x), _f32(y)]).view(np.float32)
    fma = run(f"fma.{mode}.f32 $0, $1, $2, $3;", "=r,r,r,r", [_f32(x), _f32(one), _f32(y)]).view(np.float32)
    for i in range(64):
        X, Y = Fraction(float(x[i])), Fraction(float(y[i]))
        for got in (add[i], fma[i]):
            if X + Y == 0:
                want = _zero_sum_sign(float(x[i]), float(y[i]), mode == "rm")
                assert math.copysign(1, got) == math.copysign(1, want) and got == 0, (mode, x[i], y[i], got)
            else:
                assert got == _round_f32(X + Y, mode), (mode, x[i], y[i], got)


def _round_f32(v: Fraction, mode: str) -> np.float32:
    """``v`` rounded to float32 in ``mode``, chosen among float32 neighbours by exact comparison."""
    near = np.float32(float(v))
    cands = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    lo = max((c for c in cands if Fraction(float(c)) <= v), key=lambda c: Fraction(float(c)))
    hi = min((c for c in cands if Fraction(float(c)) >= v), key=lambda c: Fraction(float(c)))
    if mode != "rn":
        return {"rm": lo, "rp": hi, "rz": lo if v > 0 else hi}[mode]
    dl, dh = v - Fraction(float(lo)), Fraction(float(hi)) - v
    return lo if dl < dh or (dl == dh and int(lo.view(np.uint32)) % 2 == 0) else hi


def test_fma_of_a_zero_product_keeps_the_product_sign():
    a = np.array([0.0, -0.0, 0.0, -0.0, 0.0, 5.0], dtype=np.float32)
    b = np.array([-3.0, 2.0, 3.0, -2.0, 3.0, 0.0], dtype=np.float32)
    c = np.array([-0.0, -0.0, -0.0, -0.0, 0.0, 0.0], dtype=np.float32)
    half = run("fma.rn.f16 $0, $1, $2, $3;", "=h,h,h,h",
               [a.astype(np.float16).view(np.uint16), b.astype(np.float16).view(np.uint16),
                c.astype(np.float16).view(np.uint16)], np.uint16)
    single = run("fma.rn.f32 $0, $1, $2, $3;", "=r,r,r,r", [_f32(a), _f32(b), _f32(c)])
    signs = [_zero_sum_sign(float(p), float(z), False) for p, z in zip(a * b, c)]
    assert np.signbit(half.view(np.float16)).tolist() == np.signbit(signs).tolist()
    assert np.signbit(single.view(np.float32)).tolist() == np.signbit(signs).tolist()


def test_abs_neg_of_numbers_change_only_the_sign():
    x = np.concatenate([RS.randn(60) * 1e3, [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
    got_abs = run("abs.f32 $0, $1;", "=r,r", [_f32(x)])
    got_neg = run("neg.f32 $0, $1;", "=r,r", [_f32(x)])
    assert got_abs.tolist() == torch.from_numpy(x).abs().numpy().view(np.uint32).tolist()
    assert got_neg.tolist() == torch.from_numpy(x).neg().numpy().view(np.uint32).tolist()


def test_conversions_of_numbers_round_as_torch_does():
    h = np.concatenate([RS.randn(60) * 100, [0.0, -0.0, np.inf, 6e-8]]).astype(np.float16)
    f32 = run("cvt.f32.f16 $0, $1;", "=r,h", [h.view(np.uint16)])
    assert f32.tolist() == torch.from_numpy(h).float().numpy().view(np.uint32).tolist()
    d = np.concatenate([RS.randn(60) * 10.0 ** RS.randint(-40, 40, 60), [1e300, -1e-300, -0.0, np.inf]])
    narrow = run("cvt.rn.f32.f64 $0, $1;", "=r,l", [d.view(np.uint64)])
    assert narrow.tolist() == torch.from_numpy(d).float().numpy().view(np.uint32).tolist()
    floor = run("cvt.rmi.s64.f64 $0, $1;", "=l,l", [d.view(np.uint64)], np.uint64).view(np.int64)
    want = [max(-2 ** 63, min(2 ** 63 - 1, math.floor(v))) if math.isfinite(v) else (2 ** 63 - 1 if v > 0 else -2 ** 63)
            for v in d]
    assert floor.tolist() == want


def test_tf32_of_numbers_rounds_ties_away_at_ten_bits():
    x = np.concatenate([RS.randn(60) * 10.0 ** RS.randint(-30, 30, 60), [0.0, -0.0, np.inf, -np.inf]])
    x = x.astype(np.float32)
    x[:8] = np.float32(1.0) + np.float32(2.0 ** -11) * np.arange(8)      # ties and neighbours at bit 13
    got = run("cvt.rna.tf32.f32 $0, $1;", "=r,r", [_f32(x)]).view(np.float32)
    for g, v in zip(got, x):
        if not np.isfinite(v) or v == 0:
            assert g.view(np.uint32) == v.view(np.uint32)
            continue
        ulp = Fraction(2) ** (math.frexp(float(v))[1] - 11)          # 10 fraction bits kept
        q = Fraction(float(v)) / ulp
        want = (math.floor(abs(q) + Fraction(1, 2))) * ulp * (1 if v > 0 else -1)
        assert Fraction(float(g)) == want, (v, g)


def test_relu_pair_gives_plus_zero_and_keeps_halves_in_order():
    a = np.concatenate([RS.randn(62) * 100, [-1e-9, 1e-9]]).astype(np.float32)
    b = np.concatenate([RS.randn(62), [-0.0, -1e-9]]).astype(np.float32)
    got = run("cvt.rn.relu.f16x2.f32 $0, $1, $2;", "=r,r,r", [_f32(a), _f32(b)])
    halves = [torch.from_numpy(v).half() for v in (a, b)]
    relu = [torch.where(h > 0, h, torch.zeros_like(h)).numpy().view(np.uint16).astype(np.uint32) for h in halves]
    want = (relu[0] << np.uint32(16)) | relu[1]         # a in the upper half, b in the lower (PTX ISA)
    assert got.tolist() == want.tolist()
    assert (got & 0x80008000).tolist() == [0] * 64


def test_f64_extremes_round_from_the_exact_value():
    """Operands past the float64 pair's range (a product near overflow or underflow, an overflowing sum in a
    directed mode): fma.rn.f64 against Python's correctly rounded Fraction-to-float, add.rz.f64 by hand."""
    big = np.finfo(np.float64).max
    a = np.array([big, -big, big, 1e308, 1.0], dtype=np.float64)
    b = np.array([big, -big, -1.0, 1e308, 1.0], dtype=np.float64)
    rz = run("add.rz.f64 $0, $1, $2;", "=l,l,l", [a.view(np.uint64), b.view(np.uint64)], np.uint64).view(np.float64)
    assert rz.tolist() == [big, -big, np.nextafter(big, 0.0), big, 2.0]        # toward zero: never past the largest
    rn = run("add.f64 $0, $1, $2;", "=l,l,l", [a.view(np.uint64), b.view(np.uint64)], np.uint64).view(np.float64)
    assert rn.tolist() == [np.inf, -np.inf, big, np.inf, 2.0]
    rs = np.random.RandomState(5)
    x = [np.ldexp(rs.uniform(1, 2, 256) * rs.choice([-1, 1], 256), rs.randint(lo, hi, 256))
         for lo, hi in ((-1074, 1023), (-1074, 1023), (-1074, 1023))]
    x[0][:4], x[1][:4], x[2][:4] = [-2.0 ** -1060, 2.0 ** -1060, big, 0.5], [2.0 ** -20, 2.0 ** -14, 0.75, 2.0 ** -1070], \
        [0.0, 0.0, -big / 2, -0.0]
    got = run("fma.rn.f64 $0, $1, $2, $3;", "=l,l,l,l", [v.view(np.uint64) for v in x], np.uint64).view(np.float64)
    for i in range(256):
        exact = Fraction(float(x[0][i])) * Fraction(float(x[1][i])) + Fraction(float(x[2][i]))
        try:
            want = float(exact)
        except OverflowError:
            want = math.inf if exact > 0 else -math.inf
        sign = math.copysign(1, got[i]) == math.copysign(1, want) if exact != 0 else True
        assert got[i] == want and sign, (i, [v[i] for v in x], got[i], want)
