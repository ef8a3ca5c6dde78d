"""``numerics="compiled"``: reductions and scans whose combine is the kernel's own function (tuple combines),
and ``axis=None`` sums of 2-D and 3-D blocks, in the order the kernel compiled for sm_90 combines them
(record/gpu/reduceorder.py, record/gpu/flatorder.py). Checked against an H100's bits for launches of Triton
3.6's language tests (tests/fixtures/gpu_orders: the inputs' recipe and the GPU's bits), and against a
thread-by-thread simulation of the lowering on the layouts compiled/ reads from the TTGIR (its own compile
and parser). The default numerics keep the interpreter's order."""
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
from helpers import paths
from triton_trace.compiled import ir, toolchain
from triton_trace.record.gpu import reduceorder

_GPU = os.path.join(paths.FIXTURES, "gpu_orders")
SEQUENTIAL = reduceorder.thread_order(triton.__version__) == "sequential"
AS_RECORDED = pytest.mark.skipif(not SEQUENTIAL, reason="the bits were recorded with Triton 3.6, whose threads fold "
                                 "their own elements in register order; this release takes a pairwise tree there")


@triton.jit
def linear_recurrence(a1, b1, a2, b2):
    return a1 * a2, b1 * a2 + b2


@triton.jit
def scan_kernel(X, Y, Z, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, AXIS: tl.constexpr, REVERSE: tl.constexpr):
    range_m = tl.arange(0, BLOCK_M)
    range_n = tl.arange(0, BLOCK_N)
    x = tl.load(X + range_m[:, None] * BLOCK_N + range_n[None, :])
    y = tl.load(Y + range_m[:, None] * BLOCK_N + range_n[None, :])
    _, z = tl.associative_scan((x, y), axis=AXIS, combine_fn=linear_recurrence, reverse=REVERSE)
    tl.store(Z + range_m[:, None] * BLOCK_N + range_n[None, :], z)


@triton.jit
def reduce_kernel(X, Y, A, B, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, AXIS: tl.constexpr):
    range_m = tl.arange(0, BLOCK_M)
    range_n = tl.arange(0, BLOCK_N)
    x = tl.load(X + range_m[:, None] * BLOCK_N + range_n[None, :])
    y = tl.load(Y + range_m[:, None] * BLOCK_N + range_n[None, :])
    a, b = tl.reduce((x, y), AXIS, linear_recurrence)
    rng = range_n if AXIS == 0 else range_m
    tl.store(A + rng, a)
    tl.store(B + rng, b)


@triton.jit
def _welford_combine(mean_1, m2_1, weight_1, mean_2, m2_2, weight_2):
    delta = mean_2 - mean_1
    new_weight = weight_1 + weight_2
    w2_over_w = weight_2 / new_weight
    return (
        mean_1 + delta * w2_over_w,
        m2_1 + m2_2 + delta * delta * weight_1 * w2_over_w,
        new_weight,
    )


@triton.jit
def _sum_combine(a, b):
    return a + b


@triton.jit
def var_mean_kernel(X, out_mean, out_var, out_sum0, out_sum1, BLOCK: tl.constexpr):
    xindex = tl.arange(0, BLOCK)
    x = tl.load(X + xindex)
    mean = x
    m2 = tl.zeros_like(x)
    weight = tl.full(x.shape, 1, x.dtype)
    sum0, = tl.reduce((x, ), 0, _sum_combine)
    sum1 = tl.reduce(x, 0, _sum_combine)
    (mean, m2, weight) = tl.reduce((mean, m2, weight), 0, _welford_combine)
    tl.store(out_mean, mean)
    tl.store(out_var, m2 / weight)
    tl.store(out_sum0, sum0)
    tl.store(out_sum1, sum1)


@triton.jit
def sum_all_kernel(X, Z, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IS_3D: tl.constexpr):
    range_m = tl.arange(0, BLOCK_M)
    range_n = tl.arange(0, BLOCK_N)
    range_k = tl.arange(0, BLOCK_K)
    if IS_3D:
        x = tl.load(X + range_m[:, None, None] * BLOCK_N * BLOCK_K + range_n[None, :, None] * BLOCK_K +
                    range_k[None, None, :])
    else:
        x = tl.load(X + range_m[:, None] * BLOCK_N + range_n[None, :])
    tl.store(Z, tl.sum(x, axis=None))


def _bits(v) -> str:
    return hex(int(np.asarray(v, np.float32).view(np.uint32)))


def _ulps(a, b) -> np.ndarray:
    a, b = (np.asarray(v, np.float32).view(np.int32).astype(np.int64) for v in (a, b))
    order = lambda v: np.where(v < 0, -(v & 0x7fffffff), v)    # noqa: E731
    return np.abs(order(a) - order(b))


def _scan(x, y, axis, reverse, warps, **kw):
    z = torch.empty(x.shape, dtype=torch.float32)
    launch = triton_trace.trace(scan_kernel, **kw)[(1,)](torch.from_numpy(x), torch.from_numpy(y), z,
                                                       BLOCK_M=x.shape[0], BLOCK_N=x.shape[1], AXIS=axis,
                                                       REVERSE=reverse, num_warps=warps)
    return z.numpy(), launch


# ---------------------------------------------------------------- traced against an H100's bits

SCANS = json.load(open(os.path.join(_GPU, "scan2d_linear_recurrence.json")))["cases"]


@pytest.mark.parametrize("case", SCANS, ids=[c["nodeid"].split("[")[1][:-1] for c in SCANS])
def test_linear_recurrence_scans_match_an_h100s_bits(case, monkeypatch):
    """Every recorded element of the launches whose trace differed (the scan in the interpreter's order) has
    the GPU's bits; and the trace differs from that order in as many elements, by as many ulps at most, as
    the GPU did: the whole block, not only the recorded elements, is the GPU's."""
    rs = np.random.RandomState(17)
    x = rs.normal(0, 1, case["shape"]).astype(np.float32)
    y = rs.normal(0, 1, case["shape"]).astype(np.float32)
    z, launch = _scan(x, y, case["axis"], case["reverse"], case["num_warps"], numerics="compiled")
    monkeypatch.setattr(reduceorder, "own_combine", lambda *a, **k: ("the interpreter's order, for the test", None))
    before, _ = _scan(x, y, case["axis"], case["reverse"], case["num_warps"], numerics="compiled")
    for e in case["examples"]:
        assert _bits(before[tuple(e["index"])]) == e["numpy_order_bits"]      # the inputs are the GPU run's
        assert _bits(z[tuple(e["index"])]) == e["gpu_bits"], e["index"]
    ulps = _ulps(z, before)
    assert (int((ulps > 0).sum()), int((ulps > 1).sum()), int(ulps.max())) == \
        (case["differing"], case["beyond"], case["max_ulp"])
    assert "sm_90 order: reversed" in next(iter(launch.meta["reduction_order"].values()))


def test_welford_var_mean_and_a_merged_sum_match_an_h100s_bits():
    """test_generic_reduction: a Welford combine over (mean, m2, weight), and two identical sums the compiler
    merged into one reduce (the TTGIR has no reduce at the second one's line)."""
    stored = np.load(os.path.join(_GPU, "generic_reduction_var_mean.npz"))
    want = json.loads(str(stored["case"]))["outputs"]
    outs = {n: torch.empty((), dtype=torch.float32) for n in ("out_mean", "out_var", "out_sum0", "out_sum1")}
    launch = triton_trace.trace(var_mean_kernel, numerics="compiled")[(1,)](torch.from_numpy(stored["x"]), **outs,
                                                                           BLOCK=512)
    got = {n: _bits(t.item()) for n, t in outs.items()}
    assert got["out_sum1"] == got["out_sum0"] == want["out_sum1"]["gpu_bits"]
    assert any("merged by CSE" in note for note in launch.meta["reduction_order"].values())
    if not SEQUENTIAL:
        pytest.skip("the Welford bits were recorded with Triton 3.6's in-thread order")
    assert (got["out_mean"], got["out_var"]) == (want["out_mean"]["gpu_bits"], want["out_var"]["gpu_bits"])


FLAT = json.load(open(os.path.join(_GPU, "flat_sum_axis_none.json")))["cases"]


def _sum_all(x, **kw):
    z = torch.empty((), dtype=torch.float32)
    shape = x.shape + (1,) * (3 - x.ndim)
    launch = triton_trace.trace(sum_all_kernel, **kw)[(1,)](torch.from_numpy(x), z, BLOCK_M=shape[0],
                                                          BLOCK_N=shape[1], BLOCK_K=shape[2], IS_3D=x.ndim == 3,
                                                          num_warps=4)
    return np.float32(z.item()), launch


@AS_RECORDED
@pytest.mark.parametrize("case", FLAT, ids=[c["nodeid"].split("[")[1][:-1] for c in FLAT])
def test_axis_none_sums_match_an_h100s_bits(case):
    """test_reduce's tl.sum(x, axis=None) of 2-D and 3-D blocks (keep_dims only reshapes the result)."""
    x = np.random.RandomState(17).normal(0, 1, case["shape"]).astype(np.float32)
    z, launch = _sum_all(x, numerics="compiled")
    assert _bits(z) == case["examples"][0]["gpu_bits"]
    assert "flattened as compiled" in next(iter(launch.meta["reduction_order"].values()))


# ---------------------------------------------------------------- against a simulation of the lowering

def _ttgir(jit, args: dict, warps: int) -> str:
    f32 = lambda a: toolchain.DeviceTensor(torch.float32, a)  # noqa: E731
    args = {k: f32((i + 1) << 30) if v is None else v for i, (k, v) in enumerate(args.items())}
    return toolchain.compile_jit(jit, args, {"num_warps": warps}, 90)["ttgir"]


def _blocked_coords(layout: dict, shape) -> list:
    """[(warp, lane, the warp's and the lane's index along each dim, the block coordinates its registers hold
    in register order)]: a blocked layout puts sizePerThread elements in a thread, threadsPerWarp threads
    and warpsPerCTA warps side by side, each numbered over ``order`` (fastest first), and repeats that tile
    over the shape in further registers."""
    spt, tpw, wpc, order = (layout[k] for k in ("sizePerThread", "threadsPerWarp", "warpsPerCTA", "order"))
    tile = [s * t * w for s, t, w in zip(spt, tpw, wpc)]
    assert all(n >= t for n, t in zip(shape, tile)), "a layout wider than the block: not simulated here"
    reps = [n // t for n, t in zip(shape, tile)]

    def digits(v, radices):
        out = [0] * len(shape)
        for d in order:
            out[d], v = v % radices[d], v // radices[d]
        return out
    threads = []
    for w in range(int(np.prod(wpc))):
        for ln in range(int(np.prod(tpw))):
            wd, ld = digits(w, wpc), digits(ln, tpw)
            regs = [tuple(cd[d] * tile[d] + wd[d] * spt[d] * tpw[d] + ld[d] * spt[d] + ed[d] for d in range(len(shape)))
                    for cd in (digits(c, reps) for c in range(int(np.prod(reps))))
                    for ed in (digits(e, spt) for e in range(int(np.prod(spt))))]
            threads.append((w, ln, wd, ld, regs))
    return threads


def _tree_reduce(per_thread: dict, lanes: int, warps: int, f):
    """(warp, lane) -> a thread's values in register order: folded (Triton 3.6) or paired (3.9); then lane 0's
    chain of shfl.sync.bfly rounds (xor largest first, its own value on the left); the warps' partials alike."""
    acc = {}
    for key, vals in per_thread.items():
        if SEQUENTIAL:
            a = vals[0]
            for v in vals[1:]:
                a = f(a, v)
        else:
            while len(vals) > 1:
                vals = [f(vals[i], vals[i + 1]) for i in range(0, len(vals), 2)]
            a = vals[0]
        acc[key] = a
    n = lanes // 2
    while n:
        acc = {(w, ln): f(v, acc[(w, ln ^ n)]) for (w, ln), v in acc.items()}
        n //= 2
    part = [acc[(w, 0)] for w in range(warps)]
    n = warps // 2
    while n:
        part = [f(part[w], part[w ^ n]) for w in range(warps)]
        n //= 2
    return part[0]


def _linrec(p, q):
    """linear_recurrence on one pair, each op rounded to float32 (fusion off)."""
    return np.float32(p[0] * q[0]), np.float32(np.float32(p[1] * q[0]) + q[1])


@pytest.mark.parametrize("R, C, axis, warps", [(4, 256, 1, 4), (64, 32, 0, 4), (8, 128, 1, 1)])
def test_tuple_reductions_follow_the_lowering(R, C, axis, warps):
    """tl.reduce((x, y), axis, linear_recurrence): not commutative, so the operand order of every combine
    shows; fp fusion off so that each op rounds alone."""
    rs = np.random.RandomState(R + C)
    x, y = (rs.normal(1, 0.3, (R, C)).astype(np.float32) for _ in range(2))
    a, b = (torch.empty(C if axis == 0 else R, dtype=torch.float32) for _ in range(2))
    triton_trace.trace(reduce_kernel, numerics="compiled")[(1,)](torch.from_numpy(x), torch.from_numpy(y), a, b,
                                                                BLOCK_M=R, BLOCK_N=C, AXIS=axis, num_warps=warps,
                                                                enable_fp_fusion=False)
    text = _ttgir(reduce_kernel, dict(X=None, Y=None, A=None, B=None, BLOCK_M=R, BLOCK_N=C, AXIS=axis), warps)
    operand = next(ln for ln in text.splitlines() if ln.lstrip().startswith("}) : (tensor<"))
    layout = ir.layouts(text)[operand.split("#", 1)[1].split(">")[0]]
    lanes, nw = layout["threadsPerWarp"][axis], layout["warpsPerCTA"][axis]
    want, sequential = [], []
    for i in range(C if axis == 0 else R):
        line = [(x[i, j], y[i, j]) for j in range(C)] if axis else [(x[j, i], y[j, i]) for j in range(R)]
        per = {(wd[axis], ld[axis]): [(x[r], y[r]) for r in regs if r[1 - axis] == i]
               for _, _, wd, ld, regs in _blocked_coords(layout, (R, C)) if any(r[1 - axis] == i for r in regs)}
        assert sorted(len(v) for v in per.values()) == [len(line) // (lanes * nw)] * (lanes * nw)
        want.append(_tree_reduce(per, lanes, nw, _linrec))
        acc = line[0]
        for v in line[1:]:
            acc = _linrec(acc, v)
        sequential.append(acc)
    got = np.stack([a.numpy(), b.numpy()], 1).view(np.int32)
    assert np.array_equal(got, np.array(want, np.float32).view(np.int32))
    # the interpreter's left-to-right order differs: the test tells the orders apart
    assert not np.array_equal(got, np.array(sequential, np.float32).view(np.int32))


@pytest.mark.parametrize("shape", [(16, 32), (32, 2, 16), (32, 32)])
def test_axis_none_flattening_follows_the_compiled_reshape(shape):
    """The compiler flattens through ``tt.reshape allow_reorder``: each thread keeps its registers, which
    the 1-D layout (32 lanes, 4 warps, its tile repeated in registers) numbers anew."""
    full = shape + (1,) * (3 - len(shape))
    text = _ttgir(sum_all_kernel, dict(X=None, Z=None, BLOCK_M=full[0], BLOCK_N=full[1], BLOCK_K=full[2],
                                      IS_3D=len(shape) == 3), 4)
    src = re.search(r"tt\.reshape %\S+ allow_reorder : tensor<[^,]+, #(\w+)> -> tensor<\d+xf32, #(\w+)>", text)
    flat = ir.layouts(text)[src.group(2)]
    assert (flat["sizePerThread"], flat["threadsPerWarp"], flat["warpsPerCTA"]) == ([1], [32], [4])
    threads = _blocked_coords(ir.layouts(text)[src.group(1)], shape)
    add = lambda a, b: np.float32(a + b)    # noqa: E731
    apart = 0
    for seed in range(3):
        rs = np.random.RandomState(seed)
        x = (rs.standard_normal(shape) * np.exp2(rs.randint(-10, 11, shape))).astype(np.float32)
        z, _ = _sum_all(x, numerics="compiled")
        assert _bits(z) == _bits(_tree_reduce({(w, ln): [x[r] for r in regs] for w, ln, _, _, regs in threads},
                                              32, 4, add))
        rowmajor = x.reshape(-1, 4, 32)         # the interpreter's flattening, in the same tree
        apart += _bits(z) != _bits(_tree_reduce({(w, ln): list(rowmajor[:, w, ln]) for w in range(4)
                                                 for ln in range(32)}, 32, 4, add))
    assert apart      # the test tells the orders apart


def test_default_numerics_keep_the_interpreters_order():
    rs = np.random.RandomState(3)
    x, y = (rs.normal(0, 1, (8, 32)).astype(np.float32) for _ in range(2))
    z, launch = _scan(x, y, 1, False, 4)
    want = np.empty_like(x)
    for r in range(8):
        acc = (x[r, 0], y[r, 0])
        want[r, 0] = acc[1]
        for j in range(1, 32):
            acc = _linrec(acc, (x[r, j], y[r, j]))
            want[r, j] = acc[1]
    assert np.array_equal(z.view(np.int32), want.view(np.int32))
    assert "reduction_order" not in launch.meta


def test_bf16_operands_keep_the_interpreters_order_and_say_why():
    rs = np.random.RandomState(4)
    x, y = (torch.from_numpy(rs.normal(0, 1, (8, 32)).astype(np.float32)).to(torch.bfloat16) for _ in range(2))
    z = torch.empty((8, 32), dtype=torch.bfloat16)
    launch = triton_trace.trace(scan_kernel, numerics="compiled")[(1,)](x, y, z, BLOCK_M=8, BLOCK_N=32, AXIS=1,
                                                                       REVERSE=False, num_warps=4)
    assert "held as uint16" in next(iter(launch.meta["reduction_order"].values()))
