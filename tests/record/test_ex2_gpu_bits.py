"""``ex2.approx`` and fp32 ``tl.exp``/``tl.exp2`` under ``numerics="compiled"`` with an H100's bits
(numerics/ex2.py). The emulation is built from one measured binade ([1, 2)); the references here are GPU
results it was not built from: every fp32 input of [0.5, 1) and [-1, -0.5) (``gpu_2026-12-07b/tables``,
the H100's result minus the correctly rounded one), and the random inputs the inline-PTX runs saved where
the trace had differed (``gpu_2026-12-07{b,c,e}/inline_asm``)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from helpers import paths
from triton_trace.numerics.ex2 import LOG2E, ex2_approx, exp_approx

FID = os.path.join(paths.ROOT, "benchmarks", "fidelity")
TABLES = os.path.join(FID, "gpu_2026-12-07b", "tables", "tables.npz")


def _binade(first: float) -> np.ndarray:
    i = np.arange(1 << 23, dtype=np.int32)
    return (np.array(first, np.float32).view(np.int32) + i).view(np.float32)


@pytest.mark.parametrize("key, first", [("ex2.approx.ftz.f32_[0.5,_1)", 0.5), ("ex2.approx.ftz.f32_[-1,_-0.5)", -0.5),
                                        ("ex2.approx.ftz.f32_[1,_2)", 1.0)])
def test_every_input_of_a_measured_binade(key, first):
    """[0.5, 1): 24 fraction bits the unit truncates to 23; [-1, -0.5): one's complement; [1, 2): the table."""
    x = _binade(first)
    with np.load(TABLES) as f:
        offset = f[key].astype(np.int32)
    gpu = np.exp2(x.astype(np.float64)).astype(np.float32).view(np.int32) + offset
    got = ex2_approx(x, ftz=True).view(np.int32)
    assert np.array_equal(got, gpu), f"{int(np.sum(got != gpu))} of {len(x)} differ"
    # and the GPU is not simply correctly rounded there: the check can fail
    assert np.any(offset != 0)


def _examples():
    for run in ("gpu_2026-12-07b", "gpu_2026-12-07c", "gpu_2026-12-07e"):
        with open(os.path.join(FID, run, "inline_asm", "inline_asm.json")) as f:
            for r in json.load(f)["rows"]:
                if r["case"] == "ex2.approx.f32":
                    for e in r["examples"]:
                        yield run, int(e["inputs"][0], 16), int(e["gpu"], 16)


EXAMPLES = list(_examples())


def test_recorded_inline_ptx_examples():
    assert len(EXAMPLES) == 18
    x = np.array([e[1] for e in EXAMPLES], np.uint32).view(np.float32)
    got = ex2_approx(x, ftz=False).view(np.uint32)
    assert [hex(int(g)) for g in got] == [hex(e[2]) for e in EXAMPLES]


@triton.jit
def _asm_ex2(X, O, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(O + r, tl.inline_asm_elementwise("ex2.approx.f32 $0, $1;", "=r,r", [tl.load(X + r)],
                                              dtype=tl.float32, is_pure=True, pack=1))


def test_inline_ptx_ex2_runs_the_emulation():
    bits = np.array([e[1] for e in EXAMPLES] + [e[1] for e in EXAMPLES[:14]], np.uint32)      # 32 lanes
    x = torch.from_numpy(bits.view(np.float32).copy())
    out = torch.empty(32)
    triton_trace.trace(_asm_ex2)[(1,)](x, out, N=32)
    want = [e[2] for e in EXAMPLES] + [e[2] for e in EXAMPLES[:14]]
    assert [hex(int(b)) for b in out.numpy().view(np.uint32)] == [hex(w) for w in want]


def test_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 128.0, 200.0, -150.0, -300.0], np.float32)
    ftz = ex2_approx(x, ftz=True)
    assert ftz.view(np.uint32)[0] == 0x7FFFFFFF
    assert list(ftz[1:]) == [np.inf, 0.0, 1.0, 1.0, 1.0, np.inf, np.inf, 0.0, 0.0]
    # the non-ftz form squares MUFU.EX2(x / 2) below -126: 2^-140 is a subnormal, not zero
    assert ex2_approx(np.float32(-140.0)) == np.float32(2.0 ** -140)
    assert ex2_approx(np.float32(-140.0), ftz=True) == 0.0


@triton.jit
def _exps(X, E, E2, N: tl.constexpr):
    r = tl.arange(0, N)
    x = tl.load(X + r)
    tl.store(E + r, tl.exp(x))
    tl.store(E2 + r, tl.exp2(x))


def test_tl_exp_and_exp2_as_compiled():
    """tl.exp is mul.f32 by log2(e) then ex2.approx.f32; tl.exp2 ex2.approx.ftz.f32 (Triton's PTX for sm_90);
    the default numerics keep numpy's correctly rounded exp."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4096, generator=g) * 30
    e, e2 = torch.empty(4096), torch.empty(4096)
    triton_trace.trace(_exps, numerics="compiled")[(1,)](x, e, e2, N=4096)
    xn = x.numpy()
    assert np.array_equal(e.numpy().view(np.uint32), ex2_approx(xn * LOG2E).view(np.uint32))
    assert np.array_equal(e.numpy().view(np.uint32), exp_approx(xn).view(np.uint32))
    assert np.array_equal(e2.numpy().view(np.uint32), ex2_approx(xn, ftz=True).view(np.uint32))
    with np.errstate(over="ignore"):
        exact = np.exp(xn.astype(np.float64)).astype(np.float32)
    assert np.any(e.numpy() != exact)            # the GPU's approximation, not the correctly rounded exp
    d, d2 = torch.empty(4096), torch.empty(4096)
    triton_trace.trace(_exps)[(1,)](x, d, d2, N=4096)
    with np.errstate(over="ignore"):
        assert np.array_equal(d.numpy(), np.exp(xn))
