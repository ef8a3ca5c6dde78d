"""``numerics="compiled"``: a sum of products (``tl.sum(x * w, axis)``) as the kernel compiled for sm_90 adds
them, with LLVM's contraction of each add that takes a product into ``fma.rn`` (record/gpu/reduceorder.py,
numerics/reduction_tree.py's ``reduce_contracted``).

The expected values are a plain loop over one thread's registers and one warp's lanes in the instruction
order read from the PTX of Triton 3.6 and 3.9 for sm_90 (``_ptx_sum`` says which), with the layout of each
case written out by hand from the TTGIR (the same in both releases; the ``CASES`` comments); ``_fma`` is
numerics/compiled's ``fma_f32``. A test also compiles the kernel and checks the PTX still shows that
instruction sequence, so a release that contracts otherwise fails here rather than passing silently."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace.compiled import toolchain
from triton_trace.numerics.compiled import fma_f32 as _fma

PROGRAMS = 3
TREE = tuple(int(v) for v in triton.__version__.split(".")[:2]) >= (3, 7)     # 3.9's pairwise in-thread tree


@triton.jit
def sum_of_products(x_ptr, w_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, AXIS: tl.constexpr):
    s = tl.program_id(0)
    orow, ocol = tl.arange(0, R), tl.arange(0, C)
    offs = s * R * C + orow[:, None] * C + ocol[None, :]
    x = tl.load(x_ptr + offs)
    w = tl.load(w_ptr + offs)
    y = tl.sum(x * w, axis=AXIS)
    if AXIS == 0:
        tl.store(out_ptr + s * C + ocol, y)
    else:
        tl.store(out_ptr + s * R + orow, y)


@triton.jit
def sum_of_squares_1d(x_ptr, out_ptr, N: tl.constexpr):
    s = tl.program_id(0)
    x = tl.load(x_ptr + s * N + tl.arange(0, N))
    tl.store(out_ptr + s, tl.sum(x * x, 0))


# (R, C, axis, num_warps) -> the reduced axis as the TTGIR of both releases lays it out for these launches
# (16-byte aligned pointers), read off its blocked layout: (spt, lanes, warps, blocks), element
# i = ((c * warps + w) * lanes + l) * spt + e, a thread's registers in order c then e
CASES = {
    (16, 64, 1, 4): (4, 16, 1, 1),    # sizePerThread [1,4] threadsPerWarp [2,16] warpsPerCTA [4,1]
    (64, 16, 0, 4): (1, 8, 4, 2),     # [1,4] [8,4] [4,1]
    (8, 256, 1, 4): (4, 32, 2, 1),    # [1,4] [1,32] [2,2]
    (32, 32, 0, 1): (1, 4, 1, 8),     # [1,4] [4,8] [1,1]
    (64, 8, 0, 4): (1, 16, 4, 1),     # [1,4] [16,2] [4,1]: one element a thread, lanes and warps
    (4, 32, 0, 4): (1, 1, 4, 1),      # [1,1] [1,32] [4,1]: rows only across warps
}
CASES_1D = {(1024, 4): (4, 32, 4, 2), (32, 1): (1, 32, 1, 1), (2048, 4): (4, 32, 4, 4)}


def _ptx_sum(x, w, spt, lanes, warps, blocks):
    """One output's sum of x[i] * w[i] (1-D, in axis order), as the PTX computes lane 0's value.

    In a thread (register order), Triton 3.6: ``mul.f32 p1; fma.rn x0*w0 + p1; fma.rn x_r*w_r + acc`` from r=2
    on; Triton 3.9: ``mul.f32`` of each odd register, ``fma.rn`` of each even one onto the next odd product,
    then ``add.f32`` of those pairwise (neighbours first). One register per thread: the first
    ``shfl.sync.bfly`` step is ``fma.rn(own x, own w, partner's product)``. Later butterfly steps over the
    lanes (xor lanes/2 first) and over the warps' partials from shared memory are ``add.f32``."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    regs = blocks * spt
    idx = lambda r, wp, ln: ((r // spt * warps + wp) * lanes + ln) * spt + r % spt     # noqa: E731
    partials = []
    for wp in range(warps):
        vals = []
        for ln in range(lanes):
            xs = [x[idx(r, wp, ln)] for r in range(regs)]
            ws = [w[idx(r, wp, ln)] for r in range(regs)]
            if regs == 1:
                vals.append(None)
                continue
            if not TREE:
                acc = _fma(xs[0], ws[0], np.float32(xs[1] * ws[1]))
                for r in range(2, regs):
                    acc = _fma(xs[r], ws[r], acc)
            else:
                level = [_fma(xs[r], ws[r], np.float32(xs[r + 1] * ws[r + 1])) for r in range(0, regs, 2)]
                while len(level) > 1:
                    level = [np.float32(level[i] + level[i + 1]) for i in range(0, len(level), 2)]
                acc = level[0]
            vals.append(np.float32(acc))
        if regs == 1:          # own product fused into the first butterfly step (lane 0's operands)
            prods = [np.float32(x[idx(0, wp, ln)] * w[idx(0, wp, ln)]) for ln in range(lanes)]
            if lanes == 1:
                vals = prods
            else:
                h = lanes // 2
                vals = [_fma(x[idx(0, wp, ln)], w[idx(0, wp, ln)], prods[ln + h]) for ln in range(h)]
        while len(vals) > 1:
            h = len(vals) // 2
            vals = [np.float32(vals[i] + vals[i + h]) for i in range(h)]
        partials.append(vals[0])
    while len(partials) > 1:
        h = len(partials) // 2
        partials = [np.float32(partials[i] + partials[i + h]) for i in range(h)]
    return np.float32(partials[0])


def _inputs(shape, seed):
    rs = np.random.RandomState(seed)
    # wide exponents and cancellation: an unfused product or another order changes the low bits
    return (rs.standard_normal(shape) * np.exp2(rs.randint(-8, 9, shape))).astype(np.float32)


@pytest.mark.parametrize("R,C,axis,warps", list(CASES))
def test_2d_sums_of_products_fuse_as_the_ptx_does(R, C, axis, warps):
    x, w = _inputs((PROGRAMS, R, C), 1), _inputs((PROGRAMS, R, C), 2)
    out = torch.empty((PROGRAMS, C) if axis == 0 else (PROGRAMS, R))
    launch = triton_trace.trace(sum_of_products, numerics="compiled")[(PROGRAMS,)](
        x_ptr=torch.from_numpy(x), w_ptr=torch.from_numpy(w), out_ptr=out, R=R, C=C, AXIS=axis, num_warps=warps)
    xs, ws = (np.moveaxis(v, 1 + axis, -1) for v in (x, w))      # (programs, kept, reduced)
    want = np.array([[_ptx_sum(xs[p, k], ws[p, k], *CASES[(R, C, axis, warps)]) for k in range(xs.shape[1])]
                     for p in range(PROGRAMS)], dtype=np.float32)
    got = out.numpy()
    assert np.array_equal(got.view(np.int32), want.view(np.int32)), np.argwhere(got != want)[:5]
    note = next(iter(launch.meta["reduction_order"].values()))
    spt, lanes, _, blocks = CASES[(R, C, axis, warps)]
    assert ("products fused (fma.rn)" in note) == (spt * blocks > 1 or lanes > 1), note
    # the plain sum in the same order differs somewhere: the test can tell fused from unfused
    plain = triton_trace.trace(sum_of_products, numerics="interpreter")
    ref = torch.empty_like(out)
    plain[(PROGRAMS,)](x_ptr=torch.from_numpy(x), w_ptr=torch.from_numpy(w), out_ptr=ref, R=R, C=C, AXIS=axis,
                       num_warps=warps)
    assert not np.array_equal(ref.numpy(), want) or (R, C, axis, warps) == (4, 32, 0, 4)


@pytest.mark.parametrize("N,warps", list(CASES_1D))
def test_1d_sums_of_squares_fuse_as_the_ptx_does(N, warps):
    x = _inputs((PROGRAMS, N), 3)
    out = torch.empty(PROGRAMS)
    launch = triton_trace.trace(sum_of_squares_1d, numerics="compiled")[(PROGRAMS,)](
        x_ptr=torch.from_numpy(x), out_ptr=out, N=N, num_warps=warps)
    want = np.array([_ptx_sum(x[p], x[p], *CASES_1D[(N, warps)]) for p in range(PROGRAMS)], dtype=np.float32)
    assert np.array_equal(out.numpy().view(np.int32), want.view(np.int32))
    note = next(iter(launch.meta["reduction_order"].values()))
    assert "products fused" in note and (("lane 0's value" in note) == (CASES_1D[(N, warps)] == (1, 32, 1, 1)))


def test_batched_chunks_fuse_as_one_program_at_a_time():
    x, w = _inputs((PROGRAMS, 64, 16), 4), _inputs((PROGRAMS, 64, 16), 5)
    outs = []
    for kw in ({}, {"batch": False}):
        out = torch.empty((PROGRAMS, 16))
        launch = triton_trace.trace(sum_of_products, numerics="compiled", **kw)[(PROGRAMS,)](
            x_ptr=torch.from_numpy(x), w_ptr=torch.from_numpy(w), out_ptr=out, R=64, C=16, AXIS=0, num_warps=4)
        outs.append(out.numpy())
        if not kw:
            assert launch.meta["execution"]["batched_programs"] == PROGRAMS
    assert np.array_equal(outs[0].view(np.int32), outs[1].view(np.int32))


def test_interpreter_numerics_do_not_fuse():
    x, w = _inputs((PROGRAMS, 64, 16), 6), _inputs((PROGRAMS, 64, 16), 7)
    out = torch.empty((PROGRAMS, 16))
    triton_trace.trace(sum_of_products, numerics="interpreter")[(PROGRAMS,)](
        x_ptr=torch.from_numpy(x), w_ptr=torch.from_numpy(w), out_ptr=out, R=64, C=16, AXIS=0, num_warps=4)
    want = np.stack([np.sum(x[p] * w[p], axis=0) for p in range(PROGRAMS)])
    assert np.array_equal(out.numpy().view(np.int32), want.view(np.int32))


def _ptx(R, C, axis, warps) -> str:
    """The PTX of the launch the tests trace (16-byte aligned pointers), compiled here for sm_90."""
    f32 = lambda a: toolchain.DeviceTensor(torch.float32, a)  # noqa: E731
    args = dict(x_ptr=f32(1 << 30), w_ptr=f32(2 << 30), out_ptr=f32(3 << 30), R=R, C=C, AXIS=axis)
    return toolchain.compile_jit(sum_of_products, args, {"num_warps": warps}, 90)["ptx"]


@pytest.mark.parametrize("R,C,axis,warps,outs", [(64, 16, 0, 4, 4), (16, 64, 1, 4, 2), (64, 8, 0, 4, 4)])
def test_ptx_shows_the_fused_sequence(R, C, axis, warps, outs):
    """The op sequence ``_ptx_sum`` evaluates, as this release's PTX has it (its first reduced outputs)."""
    ops = re.findall(r"^\s*(mul\.f32|fma\.rn\.f32|add\.f32|shfl\.sync\.bfly\.b32)", _ptx(R, C, axis, warps), re.M)
    code = "".join({"mul.f32": "M", "fma.rn.f32": "F", "add.f32": "A", "shfl.sync.bfly.b32": "S"}[o] for o in ops)
    spt, lanes, _, blocks = CASES[(R, C, axis, warps)]
    regs = spt * blocks                   # outs: the outputs a thread holds, from the same layouts
    if regs == 1:
        # each output's product, then per output: shuffle of the product, fma of its own, then plain adds
        assert code.startswith("M" * outs + "SFSA"), code
    elif not TREE:
        assert code.startswith("M" * outs + ("F" * (regs - 1)) * outs + "SA"), code
    else:
        pairs = regs // 2
        assert code.startswith("M" * pairs * outs + ("F" * pairs + "A" * (pairs - 1)) * outs + "SA"), code
