"""tl.dot at input_precision "tf32x3", "bf16x3", "bf16x6": accepted as the GPU accepts them, and split as the
compiler splits them under numerics="compiled" (triton_trace/numerics/splitdot.py)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.numerics import splitdot

N = 16


@triton.jit
def dot_kernel(A, B, C, P: tl.constexpr, N: tl.constexpr):
    r = tl.arange(0, N)
    tile = r[:, None] * N + r[None, :]
    a, b, c = tl.load(A + tile), tl.load(B + tile), tl.load(C + tile)
    tl.store(C + tile, tl.dot(a, b, c, input_precision=P))


# ---------------------------------------------------------------- the order is the installed compiler's


def _compiled_order(precision):
    """The (a part, b part) of each tt.dot the installed Triton emits for sm_90, parts numbered from the
    high one, read from the TTGIR by following each part back to its operand."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    src = ASTSource(fn=dot_kernel, signature={"A": "*fp32", "B": "*fp32", "C": "*fp32", "P": "constexpr",
                                              "N": "constexpr"}, constexprs={"P": precision, "N": N})
    ttgir = triton.compile(src, target=GPUTarget("cuda", 90, 32)).asm["ttgir"]
    role, order, fixed = {}, [], None
    for line in ttgir.splitlines():
        m = re.match(r"\s*(%[\w.]+) = (\S+) (.*)", line)
        if not m:
            continue
        name, op, rest = m.groups()
        args = re.findall(r"%[\w.]+", rest)
        operand = re.search(r"opIdx = (\d)", rest)
        if op == "ttg.local_load" and operand:          # a dot operand, in its dot layout
            role[name] = (int(operand.group(1)), "whole", 0)
        elif op == "arith.truncf" or (op == "tt.elementwise_inline_asm" and "cvt.rna.tf32" in rest):
            src_role = role.get(args[0])
            if src_role is not None:
                role[name] = (src_role[0], "part", src_role[2])
        elif op == "arith.extf" and args[0] in role:
            role[name] = role[args[0]]
        elif op == "arith.subf" and args[0] in role and args[1] in role:
            x, k = role[args[0]], role[args[1]]
            role[name] = (x[0], "rest", k[2] + 1)
            if precision == "tf32x3":           # the remainder itself is the low part
                role[name] = (x[0], "part", k[2] + 1)
        elif op == "arith.cmpf" and "uno" in rest:
            fixed = len(order)
        elif op == "tt.dot":
            (oa, _, ia), (ob, _, ib) = role[args[0]], role[args[1]]
            assert (oa, ob) == (0, 1)
            order.append((ia, ib))
    return tuple(order[:fixed]), order[fixed:]


@pytest.mark.parametrize("precision", splitdot.SPLIT)
def test_the_order_is_what_the_installed_compiler_emits(precision):
    before, after = _compiled_order(precision)
    assert before == splitdot._ORDER[precision][1]
    assert after == [(0, 0)]


# ---------------------------------------------------------------- values


def _parts_torch(x, precision):
    """The parts, computed with torch's own conversions (independent of splitdot)."""
    if precision == "tf32x3":
        bits = x.view(torch.int32).to(torch.int64)
        hi = ((bits + 0x1000) & 0xFFFFE000).to(torch.int32).view(torch.float32)
        lo = x - hi
        cut = lambda v: (v.view(torch.int32) & -8192).view(torch.float32)      # low 13 bits dropped
        return [cut(hi), cut(lo)]
    out, rest = [], x
    for _ in range(2 if precision == "bf16x3" else 3):
        p = rest.to(torch.bfloat16).to(torch.float32)
        out.append(p)
        rest = rest - p
    return out


def _one_product_reference(a, b, c, precision):
    """With a single nonzero column of ``a`` each partial dot is one product per element: the GPU's
    result is then the order of the partial dots alone, each a tensor-core step (the product aligned with
    the accumulator and the sum truncated: numerics/tensorcore.py, checked against an H100's bits in
    test_tensorcore_order.py) on parts computed here in torch; the dot's own accumulator added last."""
    from triton_trace.numerics import tensorcore as tc
    pa, pb = _parts_torch(a[:, :1], precision), _parts_torch(b[:1, :], precision)
    unit = tc.unit("tf32" if precision == "tf32x3" else "bf16", "fp32", tc.instruction(2, N, N, 4))
    acc = np.zeros((N, N), np.float32)
    for i, j in splitdot._ORDER[precision][1]:
        acc = tc.dot(pa[i].numpy(), pb[j].numpy(), acc, unit)
    acc = np.where(np.isnan(acc), np.float32(0), acc)
    acc = tc.dot(pa[0].numpy(), pb[0].numpy(), acc, unit)
    return torch.from_numpy(acc) + c


@pytest.mark.parametrize("precision", splitdot.SPLIT)
def test_compiled_numerics_follow_the_split_bit_for_bit(precision):
    g = torch.Generator().manual_seed(3)
    a = torch.zeros(N, N)
    a[:, 0] = torch.randn(N, generator=g) * 3
    b, c = torch.randn(N, N, generator=g), torch.randn(N, N, generator=g)
    out = c.clone()
    triton_trace.trace(numerics="compiled")(dot_kernel)[(1,)](a, b, out, P=precision, N=N)
    want = _one_product_reference(a, b, c, precision)
    assert torch.equal(out.view(torch.int32), want.view(torch.int32))
    plain = a @ b + c                                   # the split is not the fp32 product
    assert not torch.equal(out, plain) and torch.allclose(out, plain, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("precision", ("bf16x3", "bf16x6"))
def test_bf16_splits_run_traced_in_float32_by_default(precision):
    """The plain interpreter stops at the dot (its options allow only tf32, tf32x3, ieee); traced, the
    dot runs as the GPU accepts it, in float32 like "tf32" (within float32 of torch's product)."""
    g = torch.Generator().manual_seed(5)
    a, b, c = (torch.randn(N, N, generator=g) for _ in range(3))
    out = c.clone()
    triton_trace.trace(dot_kernel)[(1,)](a, b, out, P=precision, N=N)
    assert torch.allclose(out, a @ b + c, rtol=1e-5, atol=1e-5)


def test_a_nan_among_the_small_products_is_dropped_as_compiled():
    """a = inf: hi = inf, mid = inf - inf = NaN, so mid*hi is NaN; the compiled dot zeroes it before hi*hi,
    and the result is +-inf, not NaN."""
    a = torch.zeros(N, N)
    a[0, 0] = float("inf")
    b = torch.ones(N, N)
    out = torch.zeros(N, N)
    triton_trace.trace(numerics="compiled")(dot_kernel)[(1,)](a, b, out, P="bf16x3", N=N)
    assert torch.isinf(out[0]).all() and not torch.isnan(out).any()
    assert np.array_equal(splitdot.split_dot(a.numpy(), b.numpy(), np.zeros((N, N), np.float32), "bf16x3"),
                          out.numpy())
