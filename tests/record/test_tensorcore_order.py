"""``tl.dot`` under ``numerics="compiled"`` as an H100's tensor cores sum it (numerics/tensorcore.py).

The model against cases worked by hand (a small term dropped by the alignment, the step's sum truncated
toward zero, the accumulator's low bits dropped, where the K blocks fall, fp8's 13 bits); the instruction
rule against the PTX the installed Triton compiles for sm_90; and traced outputs against the bits an H100
gave (tests/fixtures/gpu_orders/dot_*.npz, inputs redrawn by benchmarks/fidelity/order_probe.py)."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from benchmarks.fidelity import order_probe
from helpers import paths
from triton_trace.numerics import tensorcore as tc

FP16_WGMMA = tc.unit("fp16", "fp32", "wgmma")


def _dot(a, b, c, u=FP16_WGMMA):
    a = np.asarray(a, dtype=np.float64)[None, :]
    b = np.asarray(b, dtype=np.float64)[:, None]
    return tc.dot(a, b, np.array([[c]], dtype=np.float16 if u.out == "fp16" else np.float32), u)[0, 0]


def _ieee(a, b, c):
    """The exact sum rounded once to nearest (float64 holds these sums exactly)."""
    return np.float32(np.dot(np.asarray(a, np.float64), np.asarray(b, np.float64)) + np.float64(c))


# ---------------------------------------------------------------- the model, by hand


def test_terms_below_the_alignment_are_dropped():
    """1 and fifteen products of 1.5 * 2^-26: aligned to 2^0 with 25 bits, 1.5 * 2^-26 is 0.75 of the last
    bit kept and is dropped whole, so the sum is 1; the exact sum 1 + 22.5 * 2^-26 rounds to 1 + 3 * 2^-23."""
    a = [1.0] + [1.5 * 2.0 ** -14] * 15
    b = [1.0] + [2.0 ** -12] * 15
    assert _dot(a, b, 0.0) == np.float32(1.0)
    assert _ieee(a, b, 0.0) == np.float32(1 + 3 * 2.0 ** -23)


def test_the_sum_is_truncated_toward_zero():
    """1 + 2^-24 + 2^-25 is kept exactly (25 bits below 2^0), then truncated to fp32: 1, where rounding to
    nearest gives 1 + 2^-23; negated, -1 (toward zero, not down)."""
    a, b = [1.0, 2.0 ** -12, 2.0 ** -13], [1.0, 2.0 ** -12, 2.0 ** -12]
    assert _dot(a, b, 0.0) == np.float32(1.0)
    assert _ieee(a, b, 0.0) == np.float32(1 + 2.0 ** -23)
    assert _dot([-x for x in a], b, 0.0) == np.float32(-1.0)


def test_the_accumulator_is_aligned_with_the_products():
    """16 - 16 + (1 + 2^-23): the products set the alignment at 2^4, 25 bits below it is 2^-21, so the
    accumulator's 2^-23 is dropped: 1, where IEEE keeps 1 + 2^-23."""
    c = np.float32(1 + 2.0 ** -23)
    assert _dot([4.0, 4.0], [4.0, -4.0], c) == np.float32(1.0)
    assert _ieee([4.0, 4.0], [4.0, -4.0], c) == c


def test_an_unnormalised_product_sets_a_lower_alignment():
    """1.5 * 1.5 = 2.25 aligns at 2^0 (the inputs' exponents, its significand left in [2, 4)), so 2^-25 in
    the accumulator is kept: 2.25 + 2^-25 - 2.25 = 2^-25, where an alignment at 2^1 would have dropped it."""
    assert _dot([1.5, 1.5], [1.5, -1.5], np.float32(2.0 ** -25)) == np.float32(2.0 ** -25)


@pytest.mark.parametrize("inputs, block", [("fp16", 16), ("bf16", 16), ("tf32", 8)])
def test_products_are_fused_in_blocks_along_k(inputs, block):
    """2^-23 in the same block as the pair 16 - 16 is below the 25 bits kept under 2^4 and dropped; one
    block later it meets only the exact 1 the pair's block left, and is kept."""
    u = tc.unit(inputs, "fp32", "wgmma")
    assert u.block == block
    for at, want in ((2, 1.0), (block, 1 + 2.0 ** -23)):
        a, b = np.zeros(2 * block), np.zeros(2 * block)
        a[:2], b[:2] = 4.0, [4.0, -4.0]
        a[at], b[at] = 2.0 ** -11, 2.0 ** -12
        assert _dot(a, b, np.float32(1.0), u) == np.float32(want), at


def test_fp8_wgmma_keeps_13_bits():
    """e4m3 on wgmma aligns to 13 bits: the accumulator 1 + 2^-20 loses its 2^-20, the product 2^-12 stays."""
    u = tc.unit("e4m3", "fp32", "wgmma")
    assert _dot([2.0 ** -6], [2.0 ** -6], np.float32(1 + 2.0 ** -20), u) == np.float32(1 + 2.0 ** -12)
    # through mma.sync the operands are widened to fp16 and keep 25 bits: exact here
    u16 = tc.unit("e4m3", "fp32", "mma")
    assert _dot([2.0 ** -6], [2.0 ** -6], np.float32(1 + 2.0 ** -20), u16) == np.float32(1 + 2.0 ** -12 + 2.0 ** -20)


def test_fp8_imprecise_groups_start_from_zero_and_add_in_fp32():
    """e5m2, K = 64 (two wgmma of 32): 16 (4 * 4) at k = 0, 2^-14 (2^-7 * 2^-7) at k = 32, accumulator
    3 * 2^-20. Unpromoted, the accumulator is dropped under 16's alignment (13 bits: down to 2^-9) and so is
    2^-14: 16. max_num_imprecise_acc=32: each instruction starts from zero, 16 and 2^-14 exact, added in fp32
    to nearest: 3 * 2^-20 + 16 is 1.5 ulps above 16, to even 16 + 2^-18; + 2^-14 exact. 48 groups
    ceil(48 / 32) = 2 instructions: 16 then 2^-14 dropped under it, added to the accumulator: 16 + 2^-18.
    64 (= K): the same single group."""
    u = tc.unit("e5m2", "fp32", "wgmma")
    a, b = np.zeros(64), np.zeros(64)
    a[0], b[0], a[32], b[32] = 4.0, 4.0, 2.0 ** -7, 2.0 ** -7
    c = np.array([[3 * 2.0 ** -20]], dtype=np.float32)
    run = lambda imprecise: tc.dot(a[None, :], b[:, None], c, u, imprecise)[0, 0]  # noqa: E731
    assert run(None) == np.float32(16)
    assert run(32) == np.float32(16 + 2.0 ** -18 + 2.0 ** -14)
    assert run(48) == run(64) == np.float32(16 + 2.0 ** -18)


def test_an_fp16_accumulator_rounds_to_nearest_even():
    """2048 + 1 + 2^-10 in fp16 (ulp 2 there): the 25-bit sum is exact, rounded to nearest: 2050."""
    u = tc.unit("fp16", "fp16", "wgmma")
    assert _dot([1.0, 2.0 ** -5], [1.0, 2.0 ** -5], np.float16(2048), u) == np.float16(2050)
    assert _dot([1.0], [1.0], np.float16(2048), u) == np.float16(2048)       # a tie: to even


def test_special_values():
    assert np.isinf(_dot([np.inf, 1.0], [1.0, 1.0], 0.0))
    assert np.isnan(_dot([np.inf, 1.0], [0.0, 1.0], 0.0))
    assert np.isnan(_dot([np.inf, -np.inf], [1.0, 1.0], 0.0))
    assert _dot([0.0], [0.0], 0.0) == 0.0


def test_leading_axes_broadcast_and_blocks_are_independent():
    rs = np.random.RandomState(1)
    a = rs.standard_normal((3, 1, 8, 32)).astype(np.float16)
    b = rs.standard_normal((1, 2, 32, 16)).astype(np.float16)
    c = rs.standard_normal((8, 16)).astype(np.float32)
    whole = tc.dot(a, b, c, FP16_WGMMA)
    assert whole.shape == (3, 2, 8, 16)
    one = tc.dot(a[2, 0], b[0, 1], c, FP16_WGMMA)
    assert np.array_equal(whole[2, 1].view(np.uint32), one.view(np.uint32))
    # and close to the exact product (the model is a sum, not something else)
    exact = np.matmul(a.astype(np.float64), b.astype(np.float64)) + c
    assert np.allclose(whole, exact, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- which instruction: the installed compiler's


@triton.jit
def _tile_dot(A, B, C, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    om, on, ok = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(A + om[:, None] * K + ok[None, :])
    b = tl.load(B + ok[:, None] * N + on[None, :])
    tl.store(C + om[:, None] * N + on[None, :], tl.dot(a, b))


def _compiled_instruction(dtype: str, m: int, n: int, k: int, warps: int) -> str:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    src = ASTSource(fn=_tile_dot, signature={"A": "*" + dtype, "B": "*" + dtype, "C": "*fp32", "M": "constexpr",
                                             "N": "constexpr", "K": "constexpr"}, constexprs={"M": m, "N": n, "K": k})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]
    found = set(re.findall(r"\b(wgmma\.mma_async|mma\.sync)", ptx))
    assert len(found) == 1, found
    return "wgmma" if found == {"wgmma.mma_async"} else "mma"


@pytest.mark.parametrize("dtype, m, n, k, warps", [("fp16", 64, 64, 16, 4), ("fp16", 64, 64, 16, 2),
                                                   ("fp16", 64, 8, 16, 4), ("fp16", 32, 64, 16, 4),
                                                   ("bf16", 128, 16, 16, 8), ("fp8e4nv", 64, 32, 32, 4),
                                                   ("fp8e5", 16, 16, 32, 1)])
def test_the_instruction_is_the_installed_compilers(dtype, m, n, k, warps):
    n_multiple = 8 if tuple(int(x) for x in re.findall(r"\d+", triton.__version__)[:2]) >= (3, 9) else 16
    assert tc.instruction(2, m, n, warps, n_multiple) == _compiled_instruction(dtype, m, n, k, warps)


@triton.jit
def _fp8_dot(A, B, C, OUT, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, IMP: tl.constexpr):
    om, on, ok = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(A + om[:, None] * K + ok[None, :])
    b = tl.load(B + ok[:, None] * N + on[None, :])
    c = tl.load(C + om[:, None] * N + on[None, :])
    if IMP < 0:
        d = tl.dot(a, b, c)
    else:
        d = tl.dot(a, b, c, max_num_imprecise_acc=IMP)
    tl.store(OUT + om[:, None] * N + on[None, :], d)


def _wgmma_scale_d(imprecise: int, k: int) -> list:
    """Each wgmma's scale-d operand in the PTX of a 64 x 64 x ``k`` e4m3 dot (0: the accumulator not read),
    or "mma" where the compiler picks mma.sync."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    src = ASTSource(fn=_fp8_dot, signature={"A": "*fp8e4nv", "B": "*fp8e4nv", "C": "*fp32", "OUT": "*fp32",
                                            "M": "constexpr", "N": "constexpr", "K": "constexpr", "IMP": "constexpr"},
                    constexprs={"M": 64, "N": 64, "K": k, "IMP": imprecise})
    ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4}).asm["ptx"]
    if "mma.sync" in ptx:
        return "mma"
    calls = re.findall(r"wgmma\.mma_async[^;]*;", ptx, flags=re.S)
    return [call.rstrip(";").split(",")[-3].strip() for call in calls]


@pytest.mark.parametrize("imprecise", [-1, 0, 16, 32, 48, 64, 128])
def test_fp8_imprecise_grouping_is_the_installed_compilers(imprecise):
    """What the model and the hook take from max_num_imprecise_acc, against the PTX: unset (-1 here), every
    wgmma reads the accumulator; below 32, mma.sync; else groups of ceil(m / 32) instructions, the first of
    each not reading it (its result is added with add.f32)."""
    got = _wgmma_scale_d(imprecise, 128)
    if 0 <= imprecise < 32:
        assert got == "mma"
        return
    group = 4 if imprecise < 0 else -(-imprecise // 32)
    assert [s == "0" for s in got] == [imprecise >= 0 and i % group == 0 for i in range(4)], got


@pytest.mark.parametrize("imprecise", [-1, 16, 32, 48])
def test_traced_fp8_dots_take_the_compilers_instruction_and_groups(imprecise):
    rs = np.random.RandomState(5)
    a = torch.from_numpy(rs.standard_normal((64, 64)) * 2.0 ** rs.randint(-5, 4, (64, 64))).to(torch.float8_e5m2)
    b = torch.from_numpy(rs.standard_normal((64, 64)) * 2.0 ** rs.randint(-5, 4, (64, 64))).to(torch.float8_e5m2)
    c = torch.from_numpy(rs.standard_normal((64, 64)).astype(np.float32))
    out = torch.empty_like(c)
    triton_trace.trace(_fp8_dot, numerics="compiled")[(1,)](a, b, c, out, 64, 64, 64, imprecise, num_warps=4)
    af, bf = a.float().numpy(), b.float().numpy()
    if imprecise == 16:
        want = tc.dot(af, bf, c.numpy(), tc.unit("e5m2", "fp32", "mma"))
    else:
        want = tc.dot(af, bf, c.numpy(), tc.unit("e5m2", "fp32", "wgmma"), None if imprecise < 0 else imprecise)
    assert np.array_equal(out.numpy().view(np.uint32), want.view(np.uint32))
    if imprecise >= 0:       # mma.sync and the groups change the bits here: the test tells them apart
        plain = tc.dot(af, bf, c.numpy(), tc.unit("e5m2", "fp32", "wgmma"))
        assert (plain.view(np.uint32) != want.view(np.uint32)).any()


# ---------------------------------------------------------------- traced: the wiring, batched and not


@triton.jit
def _tiles(A, B, C, OUT, K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    om, on = pm * BM + tl.arange(0, BM), pn * BN + tl.arange(0, BN)
    n = tl.num_programs(1) * BN
    acc = tl.load(C + om[:, None] * n + on[None, :])
    for k in range(0, K, BK):
        ok = k + tl.arange(0, BK)
        acc = tl.dot(tl.load(A + om[:, None] * K + ok[None, :]), tl.load(B + ok[:, None] * n + on[None, :]), acc)
    tl.store(OUT + om[:, None] * n + on[None, :], acc)


@pytest.mark.parametrize("dtype, bm, warps", [(torch.float16, 64, 4), (torch.bfloat16, 16, 1),
                                              (torch.float8_e5m2, 64, 4), (torch.float8_e4m3fn, 16, 1)])
def test_traced_dots_follow_the_model_batched_or_not(dtype, bm, warps):
    rs = np.random.RandomState(3)
    K, grid = 64, (2, 3)
    a = torch.from_numpy(rs.standard_normal((bm * grid[0], K)) * 2.0 ** rs.randint(-4, 5, (bm * grid[0], K))).to(dtype)
    b = torch.from_numpy(rs.standard_normal((K, 16 * grid[1])) * 2.0 ** rs.randint(-4, 5, (K, 16 * grid[1]))).to(dtype)
    c = torch.from_numpy(rs.standard_normal((bm * grid[0], 16 * grid[1])).astype(np.float32))
    outs = {}
    for batch in (True, False):
        out = torch.empty_like(c)
        triton_trace.trace(_tiles, numerics="compiled", batch=batch)[grid](a, b, c, out, K, bm, 16, 32, num_warps=warps)
        outs[batch] = out.numpy().view(np.uint32)
    assert np.array_equal(outs[True], outs[False])
    u = tc.unit({torch.float16: "fp16", torch.bfloat16: "bf16", torch.float8_e5m2: "e5m2",
                 torch.float8_e4m3fn: "e4m3"}[dtype], "fp32", tc.instruction(2, bm, 16, warps))
    want = tc.dot(a.float().numpy(), b.float().numpy(), c.numpy(), u)      # the whole product: tiles are rows
    assert np.array_equal(outs[True], want.view(np.uint32))
    plain = torch.empty_like(c)
    triton_trace.trace(_tiles)[grid](a, b, c, plain, K, bm, 16, 32, num_warps=warps)
    assert (plain.numpy().view(np.uint32) != outs[True]).any()     # the interpreter's float32 sums differ


@pytest.mark.parametrize("warps", [1, 2])
def test_the_launchs_num_warps_picks_the_fp8_instruction(warps):
    """A 64-row fp8 tile with fewer than 4 warps compiles to mma.sync (fp8 widened to fp16, 25 bits kept),
    not wgmma (13 bits): the launch's num_warps reaches the dot."""
    rs = np.random.RandomState(warps)
    a = torch.from_numpy(rs.standard_normal((64, 64)) * 2.0 ** rs.randint(-6, 7, (64, 64))).to(torch.float8_e4m3fn)
    b = torch.from_numpy(rs.standard_normal((64, 16)) * 2.0 ** rs.randint(-6, 7, (64, 16))).to(torch.float8_e4m3fn)
    c = torch.from_numpy(rs.standard_normal((64, 16)).astype(np.float32))
    out = torch.empty_like(c)
    triton_trace.trace(_tiles, numerics="compiled")[(1, 1)](a, b, c, out, 64, 64, 16, 32, num_warps=warps)
    assert tc.instruction(2, 64, 16, warps) == "mma" and tc.instruction(2, 64, 16, 4) == "wgmma"
    args = a.float().numpy(), b.float().numpy(), c.numpy()
    mma, wgmma = (tc.dot(*args, tc.unit("e4m3", "fp32", i)).view(np.uint32) for i in ("mma", "wgmma"))
    assert not np.array_equal(mma, wgmma)
    assert np.array_equal(out.numpy().view(np.uint32), mma)


# ---------------------------------------------------------------- traced against an H100's bits

_GPU = os.path.join(paths.FIXTURES, "gpu_orders")
_CASE_KEYS = ("kind", "dt", "acc", "M", "N", "K", "BK", "prec", "warps", "samples")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(_GPU) if f.startswith("dot_")))
def test_traced_dots_match_an_h100s_bits(name):
    """order_probe.py's dot kernel (K in BK slices, each a tl.dot into the last one's result) on inputs drawn
    again from the case's seed, traced with numerics="compiled", against the output bits an H100 gave
    (Triton 3.6; fit_tensorcore.py --store picked these from every class it fits exactly: fp16, bf16, TF32,
    e4m3, e5m2 on wgmma and mma.sync, fp16 accumulators, fp32 at "ieee"). The interpreter's own numerics
    differ from those bits: the stored cases can tell the models apart."""
    stored = np.load(os.path.join(_GPU, name))
    entry = json.loads(str(stored["case"]))
    ins = order_probe.inputs({k: entry[k] for k in _CASE_KEYS})
    S = entry["stored"]
    outs = {}
    for numerics in ("compiled", "interpreter"):
        out = torch.empty_like(ins["c"])
        triton_trace.trace(order_probe.dot_kernel, numerics=numerics)[(S,)](
            ins["a"], ins["b"], ins["c"], out, M=entry["M"], N=entry["N"], K=entry["K"], BK=entry["BK"],
            PREC=entry["prec"], num_warps=entry["warps"])
        outs[numerics] = order_probe.bits(out[:S])
    assert stored["out"].shape == outs["compiled"].shape
    assert np.array_equal(outs["compiled"], stored["out"]), (outs["compiled"] != stored["out"]).mean()
    assert (outs["interpreter"] != stored["out"]).any()


# ---------------------------------------------------------------- an add folded into the dot's accumulator


@triton.jit
def _dot_plus(A, B, BIAS, OUT, N: tl.constexpr, K: tl.constexpr, PREC: tl.constexpr, LOOP: tl.constexpr):
    om, on, ok = tl.arange(0, N), tl.arange(0, N), tl.arange(0, K)
    if LOOP:        # acc += tl.dot(a, b): Triton's combine pass makes it tl.dot(a, b, acc)
        acc = tl.load(BIAS + om[:, None] * N + on[None, :])
        for k in range(0, 2):
            a = tl.load(A + om[:, None] * (2 * K) + k * K + ok[None, :])
            b = tl.load(B + (k * K + ok[:, None]) * N + on[None, :])
            acc += tl.dot(a, b, input_precision=PREC)
    else:           # tl.dot(a, b) + bias, a bias broadcast over the rows
        a = tl.load(A + om[:, None] * K + ok[None, :])
        b = tl.load(B + ok[:, None] * N + on[None, :])
        acc = tl.dot(a, b, input_precision=PREC) + tl.load(BIAS + on)[None, :]
    tl.store(OUT + om[:, None] * N + on[None, :], acc)


def _combine_in_ttir(prec: str, loop: bool) -> bool:
    """Whether the installed compiler's TTIR has the add folded (no arith.addf on the dot's result)."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    sig = {"A": "*fp32", "B": "*fp32", "BIAS": "*fp32", "OUT": "*fp32", "N": "constexpr", "K": "constexpr",
           "PREC": "constexpr", "LOOP": "constexpr"}
    src = ASTSource(fn=_dot_plus, signature=sig, constexprs={"N": 16, "K": 16, "PREC": prec, "LOOP": loop})
    ttir = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ttir"]
    return "arith.addf" not in ttir and "tt.dot" in ttir


@pytest.mark.parametrize("prec, loop", [("ieee", False), ("tf32", False), ("ieee", True), ("tf32", True)])
def test_an_add_of_a_dot_is_its_accumulator(prec, loop):
    assert _combine_in_ttir(prec, loop)
    rs = np.random.RandomState(7)
    K = 16
    a = torch.from_numpy(rs.standard_normal((16, 2 * K if loop else K)).astype(np.float32))
    b = torch.from_numpy(rs.standard_normal((2 * K if loop else K, 16)).astype(np.float32))
    bias = torch.from_numpy((rs.standard_normal((16, 16) if loop else (16,)) * 8).astype(np.float32))
    out = torch.empty(16, 16)
    triton_trace.trace(_dot_plus, numerics="compiled")[(1,)](a, b, bias, out, N=16, K=K, PREC=prec, LOOP=loop)
    an, bn = a.numpy(), b.numpy()
    if prec == "tf32":
        from triton_trace.numerics.compiled import tf32_truncated
        an, bn = tf32_truncated(an), tf32_truncated(bn)
    step = (lambda x, y, c: tc.fma_dot(x, y, c)) if prec == "ieee" else \
        (lambda x, y, c: tc.dot(x, y, c, tc.unit("tf32", "fp32", tc.instruction(2, 16, 16, 4))))
    acc = np.broadcast_to(bias.numpy(), (16, 16)).astype(np.float32)
    for k in range(2 if loop else 1):
        acc = step(an[:, k * K:(k + 1) * K], bn[k * K:(k + 1) * K], acc)
    assert np.array_equal(out.numpy().view(np.uint32), acc.view(np.uint32))
    # the dot then the add, each rounded: what the trace computed before, and different
    apart = np.broadcast_to(bias.numpy(), (16, 16)).astype(np.float32)
    for k in range(2 if loop else 1):
        apart = apart + step(an[:, k * K:(k + 1) * K], bn[k * K:(k + 1) * K], np.zeros((16, 16), np.float32))
    assert not np.array_equal(apart.view(np.uint32), acc.view(np.uint32))
