"""numerics/mufu.py: the MUFU approximations (rcp, sqrt, rsqrt and the divisions built on rcp) against what an
H100 returned. The references are the GPU's own results: the per-binade tables as recorded
(``benchmarks/fidelity/gpu_2026-12-07b/tables/tables.npz``: GPU result minus the correctly rounded one, which
this file recomputes with float64 and torch, not with the module), the held-out random samples of
``launches_h100/intrinsics.npz`` and ``inline_asm.json``'s examples, none of which built the shipped table.
With CUDA, the instructions also run on the GPU here and are compared bit for bit."""
from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from helpers import paths
from triton_trace.numerics import mufu

FID = os.path.join(paths.ROOT, "benchmarks", "fidelity")
TABLES = os.path.join(FID, "gpu_2026-12-07b", "tables", "tables.npz")
ONE = 0x3F800000


@pytest.fixture(scope="module")
def tables():
    with np.load(TABLES) as f:
        return {k: f[k] for k in f.files}


def _key(bits):
    """The value order of fp32 bit patterns (as record_intrinsics.py measured ulps)."""
    b = np.asarray(bits, dtype=np.uint32).astype(np.int64)
    return np.where(b >= 1 << 31, -(b & 0x7FFFFFFF), b)


def _unkey(k):
    return np.where(k < 0, (-k) | (1 << 31), k).astype(np.uint32)


def _binade(first: float, n: int) -> np.ndarray:
    start = int(np.float32(first).view(np.uint32))
    return np.arange(start, start + n, dtype=np.int64).astype(np.uint32).view(np.float32)


_REF = {  # the correctly rounded result, as the recording computed it: float64 (torch), rounded to fp32
    "rcp": lambda x: (1.0 / torch.from_numpy(x).double()).float().numpy(),
    "sqrt": lambda x: torch.sqrt(torch.from_numpy(x).double()).float().numpy(),
    "rsqrt": lambda x: torch.rsqrt(torch.from_numpy(x).double()).float().numpy(),
}
_CASES = [  # table key, first input, inputs, function, p: the result of x * 4^k is 2^(p*k) times that of x
    ("rcp.approx.ftz.f32", 1.0, 1 << 23, "rcp", -2),
    ("rcp.approx.ftz.f32_[2,_4)", 2.0, 1 << 23, "rcp", -2),
    ("sqrt.approx.ftz.f32", 1.0, 1 << 24, "sqrt", 1),
    ("rsqrt.approx.ftz.f32", 1.0, 1 << 24, "rsqrt", -1),
]
_FN = {"rcp": mufu.rcp_approx, "sqrt": mufu.sqrt_approx, "rsqrt": mufu.rsqrt_approx}


@pytest.mark.parametrize("key, first, n, name, _", _CASES, ids=[c[0] for c in _CASES])
def test_every_table_entry_is_reproduced(tables, key, first, n, name, _):
    """Every input of the recorded binade(s) at once: GPU value = correctly rounded + recorded offset."""
    x = _binade(first, n)
    gpu = _unkey(_key(_REF[name](x).view(np.uint32)) + tables[key])
    for ftz in (True, False):           # the non-ftz forms only differ outside the normal range
        got = _FN[name](x, ftz=ftz).view(np.uint32)
        assert (got == gpu).all(), (key, ftz, int((got != gpu).sum()))


@pytest.mark.parametrize("key, first, n, name, power", _CASES, ids=[c[0] for c in _CASES])
def test_other_binades_scale_exactly(tables, key, first, n, name, power):
    """x * 4^k gives the binade's result times 2^(power*k), bit for bit, from the smallest to the largest
    normal binade; negative inputs of rcp give the negated result."""
    x = _binade(first, n)[::7]
    gpu = _unkey(_key(_REF[name](x).view(np.uint32)) + tables[key][::7]).view(np.float32)
    for k in (-63, -40, -9, -1, 1, 5, 33, 62):
        if not (2.0 ** -126 <= first * 4.0 ** k and first * 4.0 ** k * 4 <= 2.0 ** 128):
            continue
        xs = x * np.float32(4.0 ** k)
        want = gpu * np.float32(2.0 ** (power * k))
        assert (_FN[name](xs, ftz=True).view(np.uint32) == want.view(np.uint32)).all(), (key, k)
        if name == "rcp":
            assert (mufu.rcp_approx(-xs).view(np.uint32) == (-want).view(np.uint32)).all(), (key, k)


def _intrinsics():
    spec = importlib.util.spec_from_file_location("record_intrinsics", os.path.join(FID, "record_intrinsics.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with np.load(os.path.join(FID, "launches_h100", "intrinsics.npz")) as f:
        return mod.sample_inputs, {k: f[k] for k in f.files}


def test_held_out_gpu_samples_match_bit_for_bit():
    """65,536 inputs each, recorded on an H100 before the tables: half random bit patterns (zeros,
    subnormals, infinities, NaNs, divisors beyond 2^126 among them), half ordinary values."""
    sample_inputs, gpu = _intrinsics()
    x = sample_inputs(1)[:, 0].view(np.float32)
    assert (mufu.sqrt_approx(x, ftz=True).view(np.uint32) == gpu["sqrt_approx_ftz_f32"]).all()
    assert (mufu.rsqrt_approx(x, ftz=True).view(np.uint32) == gpu["rsqrt_approx_ftz_f32"]).all()
    pairs = sample_inputs(2)
    num, den = pairs[:, 0].view(np.float32), pairs[:, 1].view(np.float32)
    got = mufu.div_full(num, den).view(np.uint32)
    assert (got == gpu["div_full_f32"]).all(), int((got != gpu["div_full_f32"]).sum())
    # the sample reaches both scalings of div.full and the flushing MUFU: the match covers them
    field = (pairs[:, 1] >> 23) & 0xFF
    assert (field == 254).sum() > 100 and ((field == 0) & (pairs[:, 1] & 0x7FFFFF != 0)).sum() > 100
    # and it is not the correctly rounded quotient
    with np.errstate(all="ignore"):
        rn = (num.astype(np.float64) / den.astype(np.float64)).astype(np.float32).view(np.uint32)
    assert (rn != gpu["div_full_f32"]).sum() > 10000


def test_inline_asm_examples_match_bit_for_bit():
    """The examples of today's inline-asm run where the tracer's correctly rounded value differed from the
    GPU: non-ftz rcp.approx at arbitrary exponents, and div.full."""
    with open(os.path.join(FID, "gpu_2026-12-07b", "inline_asm", "inline_asm.json")) as f:
        rows = {r["case"]: r for r in json.load(f)["rows"]}
    fns = {"rcp.approx.f32": mufu.rcp_approx, "div.full.f32": mufu.div_full}
    for case, fn in fns.items():
        examples = rows[case]["examples"]
        assert len(examples) == 6
        for e in examples:
            args = [np.uint32(int(v, 16)).view(np.float32) for v in e["inputs"]]
            got = int(fn(*args).view(np.uint32))
            assert got == int(e["gpu"], 16) != int(e["trace"], 16), (case, e)


_F = np.float32
_NAN_BITS = 0x7FFFFFFF


def _bits(v):
    return int(np.asarray(v, dtype=np.float32).view(np.uint32))


@pytest.mark.parametrize("x, ftz, want", [
    (0.0, True, np.inf), (-0.0, True, -np.inf), (np.inf, True, 0.0), (-np.inf, False, -0.0),
    (1e-40, True, np.inf), (-1e-40, True, -np.inf),        # ftz: a subnormal input reads as zero
    (2.0 ** -127, False, 2.0 ** 127),                       # scaled by 2^24 around MUFU, exact (offset 0 at 1.0)
    (2.0 ** -149, False, np.inf),                           # 2^149 overflows
    (2.0 ** 127, True, 0.0),                                # 2^-127 is subnormal: flushed
    (2.0 ** 127, False, 2.0 ** -127),                       # scaled by 1/4 around MUFU: kept
    (-(2.0 ** 126), True, -(2.0 ** -126)),                  # the smallest normal result
])
def test_rcp_special_inputs_follow_the_ptx_isa(x, ftz, want):
    assert _bits(mufu.rcp_approx(_F(x), ftz=ftz)) == _bits(want)


def test_nan_is_the_canonical_nan_everywhere():
    nan = np.uint32(0xFFC00001).view(np.float32)            # a negative NaN with a payload
    for r in (mufu.rcp_approx(nan), mufu.sqrt_approx(nan, ftz=True), mufu.rsqrt_approx(nan), mufu.div_full(nan, _F(1)),
              mufu.div_full(_F(0), _F(0)), mufu.div_full(_F(np.inf), _F(-np.inf)), mufu.sqrt_approx(_F(-1)),
              mufu.rsqrt_approx(_F(-np.inf), ftz=True), mufu.div_approx(_F(0), _F(0))):
        assert _bits(r) == _NAN_BITS


@pytest.mark.parametrize("fn, x, ftz, want", [
    ("sqrt", 0.0, True, 0.0), ("sqrt", -0.0, True, -0.0), ("sqrt", np.inf, True, np.inf),
    ("sqrt", -1e-40, True, -0.0), ("sqrt", 1e-40, True, 0.0), ("sqrt", 2.0 ** -140, False, 2.0 ** -70),
    ("rsqrt", 0.0, True, np.inf), ("rsqrt", -0.0, True, -np.inf), ("rsqrt", np.inf, True, 0.0),
    ("rsqrt", 1e-40, True, np.inf), ("rsqrt", 2.0 ** -140, False, 2.0 ** 70), ("rsqrt", 4.0, True, 0.5),
])
def test_sqrt_and_rsqrt_special_inputs(fn, x, ftz, want):
    assert _bits(_FN[fn](_F(x), ftz=ftz)) == _bits(want)


def test_division_is_the_product_with_the_reciprocal():
    """div.full = fl(x * rcp(y)) in the normal range (the earlier finding on 60,883 recorded pairs), and with a
    constant divisor the reciprocal is correctly rounded instead (ptxas folds it)."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(4096) * 1e3).astype(np.float32)
    y = (rng.standard_normal(4096) * 1e-2).astype(np.float32)
    assert (mufu.div_full(x, y) == (x * mufu.rcp_approx(y, ftz=True)).astype(np.float32)).all()
    c = _F(61.0)                                            # MUFU's reciprocal of 61 is 1 ulp above rn(1/61)
    assert _bits(mufu.rcp_approx(c)) == _bits(1 / np.float64(c)) + 1
    folded = mufu.div_full(x, c, constant_divisor=True)
    assert (folded == (x * _F(1 / 61)).astype(np.float32)).all()
    assert (folded != mufu.div_full(x, c)).mean() > 0.5
    assert _bits(mufu.div_full(_F(1), _F(0))) == _bits(np.inf) and _bits(mufu.div_full(_F(-3), _F(np.inf))) == _bits(-0.0)
    # |y| > 2^126: both operands times 1/4 first, so 1/y keeps its subnormal bits
    assert _bits(mufu.div_full(_F(1), _F(2.0 ** 127))) == _bits(2.0 ** -127)
    assert _bits(mufu.div_full(_F(1), _F(2.0 ** 127), ftz=True)) == 0           # .ftz flushes the quotient
    assert _bits(mufu.div_approx(_F(1), _F(2.0 ** 127))) == 0                   # no scaling: MUFU flushes


def test_the_shipped_table_is_small_ships_in_the_wheel_and_loads_lazily():
    path = os.path.join(paths.ROOT, "triton_trace", "numerics", "mufu_tables.npz")
    assert os.path.getsize(path) < 1 << 20
    tomllib = pytest.importorskip("tomllib")
    with open(os.path.join(paths.ROOT, "pyproject.toml"), "rb") as f:
        data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    assert any(fnmatch.fnmatch("mufu_tables.npz", g) for g in data.get("triton_trace.numerics", []))
    code = ("import triton_trace.numerics.mufu as m; assert m._packed.cache_info().currsize == 0; "
            "m.rcp_approx(3.0); assert m._packed.cache_info().currsize == 1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=paths.ROOT, timeout=120)
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------------------------------------------
# on the GPU
# ------------------------------------------------------------------------------------------------------
_ONE_INPUT = {
    "rcp.approx.ftz.f32": lambda x: mufu.rcp_approx(x, ftz=True), "rcp.approx.f32": mufu.rcp_approx,
    "sqrt.approx.ftz.f32": lambda x: mufu.sqrt_approx(x, ftz=True), "sqrt.approx.f32": mufu.sqrt_approx,
    "rsqrt.approx.ftz.f32": lambda x: mufu.rsqrt_approx(x, ftz=True), "rsqrt.approx.f32": mufu.rsqrt_approx,
}
_TWO_INPUTS = {
    "div.full.f32": mufu.div_full, "div.full.ftz.f32": lambda x, y: mufu.div_full(x, y, ftz=True),
    "div.approx.f32": mufu.div_approx, "div.approx.ftz.f32": lambda x, y: mufu.div_approx(x, y, ftz=True),
}
gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _gpu_inputs(rng, n):
    """Random bit patterns, the ranges the tables leave out (every third input above 2^126, where rcp's result
    is subnormal; every 31st subnormal), and the specials, each with both signs."""
    bits = [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32),
            np.arange(0x7E800000, 0x7F800000, 3, dtype=np.uint32), np.arange(0, 1 << 23, 31, dtype=np.uint32),
            np.array([0, 0x7F800000, 0x7FC00000, 0x00800000, 0x7F7FFFFF, 0x3F800000], dtype=np.uint32)]
    b = np.concatenate(bits)
    return np.concatenate([b, b | np.uint32(0x80000000)]).view(np.float32)


@triton.jit
def _one(x_ptr, o_ptr, n, ASM: tl.constexpr):
    offs = tl.program_id(0) * 1024 + tl.arange(0, 1024)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(o_ptr + offs, tl.inline_asm_elementwise(ASM, "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1),
             mask=offs < n)


@triton.jit
def _two(x_ptr, y_ptr, o_ptr, n, ASM: tl.constexpr):
    offs = tl.program_id(0) * 1024 + tl.arange(0, 1024)
    x, y = tl.load(x_ptr + offs, mask=offs < n), tl.load(y_ptr + offs, mask=offs < n)
    tl.store(o_ptr + offs, tl.inline_asm_elementwise(ASM, "=f,f,f", [x, y], dtype=tl.float32, is_pure=True, pack=1),
             mask=offs < n)


def _asm(asm, inputs):
    xs = [torch.from_numpy(np.ascontiguousarray(v)).cuda() for v in inputs]
    out = torch.empty_like(xs[0])
    n = out.numel()
    if len(xs) == 1:
        _one[(triton.cdiv(n, 1024),)](xs[0], out, n, ASM=asm + " $0, $1;")
    else:
        _two[(triton.cdiv(n, 1024),)](xs[0], xs[1], out, n, ASM=asm + " $0, $1, $2;")
    return out.cpu().numpy().view(np.uint32)


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("asm", sorted(_ONE_INPUT))
def test_one_input_instructions_on_the_gpu(asm):
    x = _gpu_inputs(np.random.default_rng(1), 1 << 21)
    got, want = _asm(asm, [x]), _ONE_INPUT[asm](x).view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (asm, bad.size, [(hex(x.view(np.uint32)[i]), hex(got[i]), hex(want[i])) for i in bad[:8]])


@gpu
@pytest.mark.gpu
@pytest.mark.parametrize("asm", sorted(_TWO_INPUTS))
def test_divisions_on_the_gpu(asm):
    rng = np.random.default_rng(2)
    y = _gpu_inputs(rng, 1 << 21)
    x = np.concatenate([rng.integers(0, 1 << 32, y.size // 2, dtype=np.uint64).astype(np.uint32),
                        (rng.standard_normal(y.size - y.size // 2) * 1e3).astype(np.float32).view(np.uint32)])
    x = rng.permutation(x).view(np.float32)
    got, want = _asm(asm, [x, y]), _TWO_INPUTS[asm](x, y).view(np.uint32)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (asm, bad.size, [(hex(x.view(np.uint32)[i]), hex(y.view(np.uint32)[i]), hex(got[i]),
                                           hex(want[i])) for i in bad[:8]])
