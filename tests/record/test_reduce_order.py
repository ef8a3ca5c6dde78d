"""``numerics="compiled"`` sums and scans in the order the kernel compiled for sm_90 combines them
(record/gpu/reduceorder.py, numerics/reduction_tree.py). The expectations are computed here by simulating
the lowering thread by thread (each lane's registers, ``shfl.sync.bfly`` xor partners, ``shfl.sync.up``
rounds), on the layout read from the TTGIR that compiled/ (a separate parser) gives for the same launch; the
default numerics must still give numpy's own sums."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from benchmarks.fidelity import order_probe
from helpers import paths
from triton_trace.compiled import ir, toolchain
from triton_trace.numerics import reduction_tree as rt
from triton_trace.record.gpu import asbuilt, reduceorder

SAMPLES = 4


@triton.jit
def reduce_rows(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, AXIS: tl.constexpr, OP: tl.constexpr):
    s = tl.program_id(0)
    orow, ocol = tl.arange(0, R), tl.arange(0, C)
    x = tl.load(x_ptr + s * R * C + orow[:, None] * C + ocol[None, :])
    if OP == "sum":
        y = tl.sum(x, axis=AXIS)
        if AXIS == 0:
            tl.store(out_ptr + s * C + ocol, y)
        else:
            tl.store(out_ptr + s * R + orow, y)
    else:
        if OP == "cumsum":
            y = tl.cumsum(x, axis=AXIS)
        elif OP == "cumprod":
            y = tl.cumprod(x, axis=AXIS)
        else:
            y = tl.cumsum(x, axis=AXIS, reverse=True)
        tl.store(out_ptr + s * R * C + orow[:, None] * C + ocol[None, :], y)


def _inputs(R, C, op, seed=0):
    rs = np.random.RandomState(seed)
    if op == "cumprod":
        return (1 + rs.standard_normal((SAMPLES, R, C)) * 0.05).astype(np.float32)
    return (rs.standard_normal((SAMPLES, R, C)) * np.exp2(rs.randint(-10, 11, (SAMPLES, R, C)))).astype(np.float32)


def _trace(x, R, C, axis, op, warps, numerics="compiled", **kw):
    xt = torch.from_numpy(x)
    out = torch.empty((SAMPLES, C) if op == "sum" and axis == 0 else (SAMPLES, R) if op == "sum" else x.shape)
    args = dict(x_ptr=xt, out_ptr=out, R=R, C=C, AXIS=axis, OP=op)
    # the launch names itself to gpu/asbuilt under numerics="compiled" (record/session.py)
    launch = triton_trace.trace(reduce_rows, numerics=numerics, **kw)[(SAMPLES,)](**args, num_warps=warps)
    return out.numpy(), launch


def _layout(R, C, axis, op, warps) -> dict:
    """The blocked layout of the reduction's operand, from compiled/ (its own compile and TTGIR parser)."""
    f32 = lambda a: toolchain.DeviceTensor(torch.float32, a)  # noqa: E731
    raw = toolchain.compile_jit(reduce_rows, dict(x_ptr=f32(1 << 30), out_ptr=f32(2 << 30), R=R, C=C, AXIS=axis,
                                                  OP=op), {"num_warps": warps}, 90)
    line = next(ln for ln in raw["ttgir"].splitlines() if ln.lstrip().startswith("}) : (tensor<"))
    name = line.split("#", 1)[1].split(">")[0]
    return ir.layouts(raw["ttgir"])[name]


def _threads(layout, shape, axis):
    """Per (warp, lane) of the axis: the axis positions the thread holds, in register order (a blocked layout:
    sizePerThread contiguous, then the tile's repeats; a thread alone on the axis holds it whole), and the
    lanes, warps and elements per chunk along the axis."""
    spt, tpw, wpc = layout["sizePerThread"][axis], layout["threadsPerWarp"][axis], layout["warpsPerCTA"][axis]
    n = shape[axis]
    spt = min(spt, n)
    tpw = min(tpw, n // spt)
    wpc = min(wpc, n // (spt * tpw))
    tile = spt * tpw * wpc
    holders = {(w, l): [c * tile + w * spt * tpw + l * spt + e for c in range(n // tile) for e in range(spt)]
               for w in range(wpc) for l in range(tpw)}
    return holders, tpw, wpc, (n if tpw == wpc == 1 else spt)


def _simulate_sum(vec, holders, lanes, warps, in_thread):
    acc = {}
    for (w, l), pos in holders.items():
        vals = [np.float32(vec[p]) for p in pos]
        if in_thread == "sequential":
            a = vals[0]
            for v in vals[1:]:
                a = np.float32(a + v)
        else:
            while len(vals) > 1:
                vals = [np.float32(vals[i] + vals[i + 1]) for i in range(0, len(vals), 2)]
            a = vals[0]
        acc[(w, l)] = a
    n = lanes // 2
    while n:                                  # shfl.sync.bfly, xor largest first, every lane at once
        acc = {(w, l): np.float32(acc[(w, l)] + acc[(w, l ^ n)]) for (w, l) in acc}
        n //= 2
    part = [acc[(w, 0)] for w in range(warps)]
    n = warps // 2
    while n:
        part = [np.float32(part[j] + part[j ^ n]) for j in range(warps)]
        n //= 2
    return part[0]


def _simulate_scan(vec, holders, lanes, chunk, op):
    """One warp along the axis: per block, a thread's inclusive prefix of its chunk, Kogge-Stone
    (``shfl.sync.up`` 1, 2, 4, ...) over the lanes' chunk totals, the block's carry (the previous block's last
    lane) in front; a lane's other elements take the previous lane's last value (lane 0: the carry) in front."""
    f = (lambda a, b: np.float32(a + b)) if op == "cumsum" else (lambda a, b: np.float32(a * b))
    out = np.empty(len(vec), np.float32)
    carry = None
    for c in range(len(holders[(0, 0)]) // chunk):
        pos = {l: holders[(0, l)][c * chunk:(c + 1) * chunk] for l in range(lanes)}
        pre = {}
        for l in range(lanes):
            run = [np.float32(vec[pos[l][0]])]
            for p in pos[l][1:]:
                run.append(f(run[-1], np.float32(vec[p])))
            pre[l] = run
        tot = {l: pre[l][-1] for l in pre}
        d = 1
        while d < lanes:
            tot = {l: f(tot[l - d], tot[l]) if l >= d else tot[l] for l in tot}
            d *= 2
        last = {l: tot[l] if carry is None else f(carry, tot[l]) for l in tot}
        for l in range(lanes):
            front = last[l - 1] if l else carry
            for k, p in enumerate(pos[l]):
                out[p] = last[l] if k == chunk - 1 else (pre[l][k] if front is None else f(front, pre[l][k]))
        carry = last[lanes - 1]
    return out


IN_THREAD = reduceorder.thread_order(triton.__version__)


@pytest.mark.parametrize("R, C, axis, warps", [(32, 32, 1, 1), (32, 32, 0, 4), (16, 256, 1, 4), (64, 128, 0, 1)])
def test_sums_take_the_compiled_tree(R, C, axis, warps):
    x = _inputs(R, C, "sum", seed=R + C + axis)
    got, launch = _trace(x, R, C, axis, "sum", warps)
    layout = _layout(R, C, axis, "sum", warps)
    holders, lanes, nw, _ = _threads(layout, (R, C), axis)
    want = np.array([[_simulate_sum(np.take(x[p], i, axis=1 - axis), holders, lanes, nw, IN_THREAD)
                      for i in range(x.shape[2 - axis])] for p in range(SAMPLES)], np.float32)
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    assert "sm_90 order" in next(iter(launch.meta["reduction_order"].values()))
    # numpy's sums differ somewhere where lanes share the axis: the test tells the orders apart
    assert lanes == 1 or not np.array_equal(np.sum(x, axis=1 + axis).view(np.int32), want.view(np.int32))


@pytest.mark.parametrize("R, C, op", [(8, 32, "cumsum"), (16, 128, "cumprod"), (4, 512, "cumsum"), (64, 8, "cumsum")])
def test_scans_in_one_warp_take_the_compiled_order(R, C, op):
    x = _inputs(R, C, op, seed=C)
    got, _ = _trace(x, R, C, 1, op, 1)
    holders, lanes, _, chunk = _threads(_layout(R, C, 1, op, 1), (R, C), 1)
    want = np.array([[_simulate_scan(x[p, r], holders, lanes, chunk, op) for r in range(R)] for p in range(SAMPLES)])
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    numpy_order = (np.cumsum if op == "cumsum" else np.cumprod)(x, axis=2)
    assert not np.array_equal(numpy_order.view(np.int32), want.view(np.int32))


def test_default_numerics_keep_numpys_sums():
    x = _inputs(32, 32, "sum", seed=5)
    got, launch = _trace(x, 32, 32, 0, "sum", 4, numerics="interpreter")
    assert np.array_equal(got.view(np.int32), np.stack([np.sum(x[p], axis=0) for p in range(SAMPLES)]).view(np.int32))
    assert "reduction_order" not in launch.meta
    got, _ = _trace(x, 32, 32, 1, "cumsum", 4, numerics="interpreter")
    assert np.array_equal(got.view(np.int32), np.cumsum(x, axis=2).view(np.int32))


@pytest.mark.parametrize("op, axis, warps", [("sum", 0, 4), ("cumsum", 1, 4), ("cumprod", 0, 4), ("sum", 1, 1)])
def test_batched_chunks_equal_one_program_at_a_time(op, axis, warps):
    x = _inputs(64, 32, op, seed=11)
    batched, launch = _trace(x, 64, 32, axis, op, warps)
    alone, _ = _trace(x, 64, 32, axis, op, warps, batch=False)
    assert launch.meta["execution"]["batched_programs"] == SAMPLES
    assert np.array_equal(batched.view(np.int32), alone.view(np.int32))


@pytest.mark.parametrize("R, C", [(8, 32), (4, 512), (64, 8)])
def test_reverse_scans_are_the_forward_order_of_the_reversed_axis(R, C):
    """Triton's lowering reverses each thread's registers and swaps lane l with 31 - l before a forward scan
    and after it: the forward tree over the reversed row."""
    x = _inputs(R, C, "cumsum", seed=C + 1)
    got, launch = _trace(x, R, C, 1, "revcumsum", 1)
    holders, lanes, _, chunk = _threads(_layout(R, C, 1, "cumsum", 1), (R, C), 1)
    want = np.array([[_simulate_scan(x[p, r, ::-1], holders, lanes, chunk, "cumsum")[::-1] for r in range(R)]
                     for p in range(SAMPLES)])
    assert np.array_equal(got.view(np.int32), want.view(np.int32))
    assert "sm_90 order: reversed" in next(iter(launch.meta["reduction_order"].values()))
    numpy_order = np.flip(np.cumsum(np.flip(x, 2), axis=2), 2)
    assert lanes == 1 or not np.array_equal(numpy_order.view(np.int32), want.view(np.int32))


def test_what_is_not_modelled_keeps_numpys_order_and_says_why(monkeypatch):
    x = _inputs(16, 64, "cumsum", seed=2)
    # a launch whose kernel did not compile for sm_90 has no compiled facts
    monkeypatch.setattr(asbuilt, "facts", lambda *a, **k: asbuilt.Facts(error="no compile on this machine"))
    got, launch = _trace(x, 16, 64, 1, "sum", 4)
    assert np.array_equal(got.view(np.int32), np.stack([np.sum(x[p], axis=1) for p in range(SAMPLES)]).view(np.int32))
    assert "no compile on this machine" in next(iter(launch.meta["reduction_order"].values()))


def test_layout_split_of_blocked_and_sliced_layouts():
    bases = rt.blocked_bases([1, 4], [4, 8], [4, 1], [1, 0], [64, 32])
    assert rt.axis_split(bases, [64, 32], 1) == rt.AxisSplit(blocks=1, warps=1, lanes=8, per_thread=4)
    assert rt.axis_split(bases, [64, 32], 0) == rt.AxisSplit(blocks=4, warps=4, lanes=4, per_thread=1)
    sliced = rt.layout_bases({"kind": "slice", "dim": 1, "parent": {"kind": "blocked", "sizePerThread": [1, 4],
                              "threadsPerWarp": [4, 8], "warpsPerCTA": [4, 1], "order": [1, 0]}}, [64])
    assert rt.axis_split(sliced, [64], 0) == rt.AxisSplit(blocks=4, warps=4, lanes=4, per_thread=1)
    # a layout wider than the block: the lanes past it hold copies
    small = rt.blocked_bases([1], [32], [4], [0], [16])
    assert rt.axis_split(small, [16], 0) == rt.AxisSplit(blocks=1, warps=1, lanes=16, per_thread=1)


def test_trees_cover_every_element_once():
    rs = np.random.RandomState(0)
    for split in (rt.AxisSplit(2, 4, 8, 4), rt.AxisSplit(4, 1, 8, 2), rt.AxisSplit(1, 2, 1, 1), rt.AxisSplit(8, 4, 1, 1)):
        x = rs.randint(-50, 50, (3, split.size, 2)).astype(np.float64)      # integers: exact in any order
        for order in rt.THREAD_ORDERS:
            assert np.array_equal(rt.reduce(x, 1, split, thread_order=order)[:, 0], x.sum(1))
        assert np.array_equal(rt.scan(x, 1, split), np.cumsum(x, 1))


# ---------------------------------------------------------------- traced against an H100's bits

_GPU = os.path.join(paths.FIXTURES, "gpu_orders")


@pytest.mark.skipif(reduceorder.thread_order(triton.__version__) != "sequential",
                    reason="the bits were recorded with Triton 3.6, whose threads fold their own elements in "
                           "register order; this release takes a pairwise tree there")
@pytest.mark.parametrize("name", sorted(f for f in os.listdir(_GPU) if f.startswith("reduce_")))
def test_traced_reductions_match_an_h100s_bits(name):
    """order_probe.py's reduce/sum1d kernels on inputs drawn again from the case's seed, traced with
    numerics="compiled", against the output bits an H100 gave (Triton 3.6; every one of the 91 reduction
    cases of that run matched, these 13 are kept: sums over either axis with 1, 4 and 8 warps, cumsum and
    cumprod over either axis). numpy's order differs from the GPU's on every one of them."""
    stored = np.load(os.path.join(_GPU, name))
    entry = json.loads(str(stored["case"]))
    keys = ("kind", "N", "warps", "samples") if entry["kind"] == "sum1d" else \
        ("kind", "op", "R", "C", "axis", "warps", "samples")
    x = order_probe.inputs({k: entry[k] for k in keys})["x"]
    outs = {}
    for numerics in ("compiled", "interpreter"):
        out = torch.zeros(stored["out"].shape, dtype=torch.float32)
        k = triton_trace.trace(order_probe.sum1d_kernel if entry["kind"] == "sum1d" else order_probe.reduce_kernel,
                               numerics=numerics)
        if entry["kind"] == "sum1d":
            k[(entry["samples"],)](x, out, N=entry["N"], num_warps=entry["warps"])
        else:
            k[(entry["samples"],)](x, out, R=entry["R"], C=entry["C"], AXIS=entry["axis"], OP=entry["op"],
                                   num_warps=entry["warps"])
        outs[numerics] = out.numpy().view(np.int32)
    assert np.array_equal(outs["compiled"], stored["out"]), (outs["compiled"] != stored["out"]).mean()
    assert (outs["interpreter"] != stored["out"]).any()
