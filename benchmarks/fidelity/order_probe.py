"""GPU bits for the orders numerics="compiled" has to follow: the tensor cores' dot accumulation (wgmma on
sm_90, mma.sync where the tile is too small for a warpgroup) and the reduction and scan trees of `tl.sum`,
`tl.cumsum` and `tl.cumprod`. Inputs are drawn on the CPU from fixed seeds with wide exponent ranges (an
order shows only where the terms differ in magnitude), run on the GPU, and saved with the outputs so that a
model can be fitted and checked off the GPU:

    python3 benchmarks/fidelity/order_probe.py --out $OUT/order          # on the GPU machine, ~30 s
    TRITON_INTERPRET=1 python3 benchmarks/fidelity/order_probe.py --out /tmp/o --device cpu   # Triton's interpreter

Each case is one file `<name>.npz` (the outputs' raw bits; `inputs(case)` draws the same inputs again) and
`cases.json` lists them with the instructions the compiled kernel used (wgmma / mma shapes from its PTX).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import time
import zlib

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def dot_kernel(a_ptr, b_ptr, c_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, BK: tl.constexpr,
               PREC: tl.constexpr):
    s = tl.program_id(0)
    om, on = tl.arange(0, M), tl.arange(0, N)
    acc = tl.load(c_ptr + s * M * N + om[:, None] * N + on[None, :])
    for k in tl.static_range(0, K, BK):
        ok = k + tl.arange(0, BK)
        a = tl.load(a_ptr + s * M * K + om[:, None] * K + ok[None, :])
        b = tl.load(b_ptr + s * K * N + ok[:, None] * N + on[None, :])
        acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=acc.dtype)
    tl.store(out_ptr + s * M * N + om[:, None] * N + on[None, :], acc)


@triton.jit
def reduce_kernel(x_ptr, out_ptr, R: tl.constexpr, C: tl.constexpr, AXIS: tl.constexpr, OP: tl.constexpr):
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
        else:
            y = tl.cumprod(x, axis=AXIS)
        tl.store(out_ptr + s * R * C + orow[:, None] * C + ocol[None, :], y)


@triton.jit
def sum1d_kernel(x_ptr, out_ptr, N: tl.constexpr):
    s = tl.program_id(0)
    tl.store(out_ptr + s, tl.sum(tl.load(x_ptr + s * N + tl.arange(0, N)), axis=0))


TORCH = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "e4m3": torch.float8_e4m3fn,
         "e5m2": torch.float8_e5m2}


def _wide(rs, shape, spread):
    """Normal values scaled by 2^u, u uniform in [-spread, spread]: terms of different magnitudes."""
    return rs.standard_normal(shape) * np.exp2(rs.randint(-spread, spread + 1, size=shape))


def dot_cases():
    out = []
    for dt, ks, acc in (("fp16", (16, 32, 64, 128), "fp32"), ("bf16", (16, 32, 64, 128), "fp32"),
                        ("fp16", (16, 64), "fp16"), ("fp32", (8, 32, 64), "fp32"), ("e4m3", (32, 64, 128), "fp32"),
                        ("e5m2", (32, 128), "fp32")):
        for K in ks:
            prec = "tf32" if dt == "fp32" else "ieee"
            for (M, N, w) in ((64, 64, 4), (16, 16, 1)):
                if dt in ("e4m3", "e5m2") and M < 64:
                    continue                      # fp8 dots need a warpgroup on sm_90
                for bk in sorted({K, min(K, 32 if dt in ("e4m3", "e5m2") else 16)}):
                    out.append(dict(kind="dot", dt=dt, acc=acc, M=M, N=N, K=K, BK=bk, prec=prec, warps=w, samples=8))
    out.append(dict(kind="dot", dt="fp32", acc="fp32", M=64, N=64, K=32, BK=32, prec="ieee", warps=4, samples=8))
    return out


def reduce_cases():
    out = []
    for n, w in ((32, 1), (128, 1), (128, 4), (1024, 4), (1024, 8), (4096, 4), (512, 2)):
        out.append(dict(kind="sum1d", N=n, warps=w, samples=64))
    for (r, c) in ((32, 32), (64, 128), (128, 64), (16, 256), (256, 16), (8, 512), (128, 128)):
        for axis in (0, 1):
            for op in ("sum", "cumsum", "cumprod"):
                for w in (1, 4):
                    out.append(dict(kind="reduce", op=op, R=r, C=c, axis=axis, warps=w, samples=8))
    return out


def name_of(c):
    return "_".join(f"{k}{v}" for k, v in c.items() if k != "samples")


def inputs(c):
    rs = np.random.RandomState(zlib.crc32(name_of(c).encode()))
    S = c["samples"]
    if c["kind"] == "dot":
        M, N, K = c["M"], c["N"], c["K"]
        spread = {"fp16": 6, "bf16": 12, "fp32": 12, "e4m3": 3, "e5m2": 6}[c["dt"]]
        a = torch.from_numpy(_wide(rs, (S, M, K), spread)).to(TORCH[c["dt"]])
        b = torch.from_numpy(_wide(rs, (S, K, N), spread)).to(TORCH[c["dt"]])
        cc = torch.from_numpy(_wide(rs, (S, M, N), 4) * (rs.rand(S, 1, 1) < 0.5)).to(TORCH[c["acc"]])
        return {"a": a, "b": b, "c": cc}
    if c["kind"] == "sum1d":
        return {"x": torch.from_numpy(_wide(rs, (S, c["N"]), 10)).float()}
    shape = (S, c["R"], c["C"])
    if c["op"] == "cumprod":
        x = 1 + rs.standard_normal(shape) * 0.05
    else:
        x = _wide(rs, shape, 10)
    return {"x": torch.from_numpy(x).float()}


def launch(c, ins, device):
    d = {k: v.to(device) for k, v in ins.items()}
    S = c["samples"]
    if c["kind"] == "dot":
        o = torch.empty_like(d["c"])
        k = dot_kernel[(S,)](d["a"], d["b"], d["c"], o, M=c["M"], N=c["N"], K=c["K"], BK=c["BK"], PREC=c["prec"],
                             num_warps=c["warps"])
    elif c["kind"] == "sum1d":
        o = torch.empty(S, device=device)
        k = sum1d_kernel[(S,)](d["x"], o, N=c["N"], num_warps=c["warps"])
    else:
        o = torch.empty((S, c["C"]) if c["op"] == "sum" and c["axis"] == 0 else
                        (S, c["R"]) if c["op"] == "sum" else (S, c["R"], c["C"]), device=device)
        k = reduce_kernel[(S,)](d["x"], o, R=c["R"], C=c["C"], AXIS=c["axis"], OP=c["op"], num_warps=c["warps"])
    return o, k


def bits(t):
    t = t.cpu().contiguous()
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]).numpy()


def mma_of(kernel):
    ptx = getattr(kernel, "asm", {}).get("ptx", "")
    return sorted({m.group(0) for m in re.finditer(r"\b(wgmma\.mma_async[\w.]*|mma\.sync[\w.]*)", ptx)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", help="cpu: check the cases under TRITON_INTERPRET=1")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    index, t0 = [], time.time()
    for c in dot_cases() + reduce_cases():
        name = name_of(c)
        try:
            ins = inputs(c)
            o, k = launch(c, ins, args.device)
            if args.device == "cuda":
                torch.cuda.synchronize()
            np.savez_compressed(os.path.join(args.out, name + ".npz"), out=bits(o))
            index.append(dict(c, name=name, mma=mma_of(k)))
        except Exception as e:                       # a case that fails is listed with its error, the rest go on
            index.append(dict(c, name=name, error=str(e).strip().splitlines()[-1][:300]))
        json.dump(index, open(os.path.join(args.out, "cases.json"), "w"), indent=0)
    print(len(index), "cases,", sum("error" in c for c in index), "errors,", f"{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
