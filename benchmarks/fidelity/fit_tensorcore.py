"""Fit and check the tensor-core accumulation model (triton_trace/numerics/tensorcore.py) against the bits
an H100 gave for order_probe.py's dot cases.

    python3 benchmarks/fidelity/fit_tensorcore.py --data /tmp/gpu5/r/order [--traced] [--alternatives]

Each dot case's inputs are drawn again (order_probe.inputs) and the kernel's dot loop modelled as it runs:
K in slices of BK, each slice one ``tl.dot`` taking the previous result as its accumulator. The model runs
with the unit of the instruction the compiled PTX used (cases.json's ``mma``); fp32 at "ieee" (no tensor
core: an fma chain along K) with compiled.fma_f32. ``--traced`` also runs order_probe's kernel through
``triton_trace.trace(numerics="compiled")`` and compares that too. ``--alternatives`` scores models that
differ in one parameter (rounding, alignment bits, block size), so the table shows that the data pins each
of them, and the interpreter's own dot (float32 numpy matmul).

One row per (inputs, accumulator, instruction): cases, elements, exact %, the largest distance in ulps.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import order_probe  # noqa: E402

from triton_trace.numerics import compiled, rounding, tensorcore  # noqa: E402

_CASE_KEYS = ("kind", "dt", "acc", "M", "N", "K", "BK", "prec", "warps", "samples")


def case_of(entry: dict) -> dict:
    """The case as order_probe drew it (its name, and so its seed, from these keys only, in this order)."""
    return {k: entry[k] for k in _CASE_KEYS}


def instruction_of(entry: dict) -> str:
    """"wgmma", "mma" (mma.sync) or "fma" (no tensor-core instruction in the PTX)."""
    mma = " ".join(entry.get("mma", []))
    return "wgmma" if "wgmma" in mma else "mma" if "mma.sync" in mma else "fma"


def inputs_of(entry: dict, samples: int = None):
    """(a, b, c) as numpy: a, b the values the tensor cores read (TF32: fp32 with its low 13 bits dropped),
    c in the accumulator's dtype; the first ``samples`` samples."""
    ins = order_probe.inputs(case_of(entry))
    s = slice(0, samples)
    a, b = (ins[k][s].float().numpy() for k in "ab")
    if entry["dt"] == "fp32" and entry["prec"] == "tf32":
        a, b = compiled.tf32_truncated(a), compiled.tf32_truncated(b)
    return a, b, ins["c"][s].numpy()


def unit_of(entry: dict) -> tensorcore.Unit:
    inputs = "tf32" if entry["dt"] == "fp32" else entry["dt"]
    return tensorcore.unit(inputs, entry["acc"], instruction_of(entry))


def modelled(entry: dict, a, b, c, unit=None, dot=None) -> np.ndarray:
    """The kernel's K loop: one dot per BK slice, the last result the next one's accumulator."""
    if dot is None:
        u = unit or unit_of(entry)
        dot = tensorcore.fma_dot if instruction_of(entry) == "fma" else (lambda x, y, z: tensorcore.dot(x, y, z, u))
    acc, BK = c, entry["BK"]
    for k in range(0, entry["K"], BK):
        acc = dot(a[..., k:k + BK], b[..., k:k + BK, :], acc)
    return acc


def traced(entry: dict, samples: int = None) -> np.ndarray:
    """order_probe's kernel run by triton_trace with numerics="compiled", on the first ``samples``."""
    import torch
    import triton_trace
    ins = order_probe.inputs(case_of(entry))
    S = samples or entry["samples"]
    out = torch.empty_like(ins["c"])
    kernel = triton_trace.trace(order_probe.dot_kernel, numerics="compiled")
    kernel[(S,)](ins["a"], ins["b"], ins["c"], out, M=entry["M"], N=entry["N"], K=entry["K"], BK=entry["BK"],
                 PREC=entry["prec"], num_warps=entry["warps"])
    return out[:S].numpy()


def bits(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x).view({2: np.int16, 4: np.int32}[x.dtype.itemsize])


def compare(got_bits: np.ndarray, want_bits: np.ndarray):
    """(exact elements, elements, the largest ulp distance): distances on the values' total order."""
    def ordered(x):
        u = x.astype(np.int64) & ((1 << (8 * x.dtype.itemsize)) - 1)
        sign = 1 << (8 * x.dtype.itemsize - 1)
        return np.where(u & sign, sign - 1 - (u ^ sign), u + sign)    # -0 and +0 one apart, NaNs at the ends
    d = np.abs(ordered(got_bits) - ordered(want_bits))
    return int((d == 0).sum()), d.size, int(d.max()) if d.size else 0


def alternatives(entry: dict) -> dict:
    """Models one parameter away from the fitted one, and the interpreter's float32 matmul."""
    if instruction_of(entry) == "fma":
        return {"f32 matmul": lambda a, b, c: (np.matmul(a, b) + c).astype(c.dtype)}
    u = unit_of(entry)
    units = {f"frac {u.frac - 1}": replace(u, frac=u.frac - 1), f"frac {u.frac + 1}": replace(u, frac=u.frac + 1),
             f"block {u.block // 2}": replace(u, block=u.block // 2),
             f"block {2 * u.block}": replace(u, block=2 * u.block)}
    out = {k: (lambda a, b, c, v=v: tensorcore.dot(a, b, c, v)) for k, v in units.items()}
    if u.out == "fp32":                        # each step's sum rounded to nearest instead of toward zero
        out["round rn"] = lambda a, b, c: _with_rounding(a, b, c, u, lambda v: v.astype(np.float32))
    else:                                      # the fp16 step truncated instead of rounded to nearest
        out["round rz"] = lambda a, b, c: _with_rounding(
            a, b, c, u, lambda v: rounding.f64_to_narrow(v, np.float16, False, "rz").astype(np.float16))
    out["f32 matmul"] = lambda a, b, c: (np.matmul(a, b, dtype=np.float32) + c).astype(c.dtype)
    return out


def _with_rounding(a, b, c, u, round_step):
    """The fitted steps with each step's exact sum rounded by ``round_step`` (tensorcore's own steps)."""
    saved = tensorcore._round
    tensorcore._round = lambda v, unit: round_step(v)
    try:
        return tensorcore.dot(a, b, c, u)
    finally:
        tensorcore._round = saved


def _class(entry: dict) -> tuple:
    dt = "tf32" if entry["dt"] == "fp32" and entry["prec"] == "tf32" else entry["dt"]
    return dt, entry["acc"], instruction_of(entry), entry["prec"]


def store(entries: list, data: str, folder: str) -> None:
    """A few cases of each class as test data (tests/fixtures/gpu_orders/): per class the largest K, in one dot
    (BK = K) and in the kernel's smallest BK slices; the GPU's bits of the first sample of a 64 x 64 tile,
    of every sample of a 16 x 16 one, with the case (inputs are drawn again from it)."""
    os.makedirs(folder, exist_ok=True)
    by_class = {}
    for e in entries:
        by_class.setdefault(_class(e), []).append(e)
    for cls, group in sorted(by_class.items()):
        K = max(e["K"] for e in group)
        picks = [e for e in group if e["K"] == K]
        for e in {min(picks, key=lambda e: e["BK"])["name"]: 0, max(picks, key=lambda e: e["BK"])["name"]: 0}:
            e = next(x for x in picks if x["name"] == e)
            samples = 1 if e["M"] >= 64 else e["samples"]
            out = np.load(os.path.join(data, e["name"] + ".npz"))["out"][:samples]
            name = f"dot_{cls[0]}_{cls[1]}_{cls[2]}_K{e['K']}_BK{e['BK']}.npz"
            np.savez_compressed(os.path.join(folder, name), out=out, case=json.dumps(dict(e, stored=samples)))
            print("stored", name, out.shape)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="/tmp/gpu5/r/order", help="order_probe.py's output folder")
    ap.add_argument("--traced", action="store_true", help="also trace the kernel with numerics='compiled'")
    ap.add_argument("--alternatives", action="store_true", help="score models one parameter away")
    ap.add_argument("--store", metavar="DIR", help="write the test subset there (tests/fixtures/gpu_orders)")
    args = ap.parse_args()
    entries = [e for e in json.load(open(os.path.join(args.data, "cases.json"))) if e["kind"] == "dot"]
    if args.store:
        store([e for e in entries if "error" not in e], args.data, args.store)
        return
    skipped = [e["name"] for e in entries if "error" in e]
    rows, alt_rows = {}, {}
    for e in entries:
        if "error" in e:
            continue
        gpu = np.load(os.path.join(args.data, e["name"] + ".npz"))["out"]
        a, b, c = inputs_of(e)
        got = {"model": modelled(e, a, b, c)}
        if args.traced:
            got["traced"] = traced(e)
        for how, out in got.items():
            ex, n, ulp = compare(bits(out), gpu)
            r = rows.setdefault((_class(e), how), [0, 0, 0, 0])
            r[0], r[1], r[2], r[3] = r[0] + 1, r[1] + ex, r[2] + n, max(r[3], ulp)
        if args.alternatives:
            for name, dot in alternatives(e).items():
                ex, n, ulp = compare(bits(modelled(e, a, b, c, dot=dot)), gpu)
                r = alt_rows.setdefault((_class(e), name), [0, 0, 0, 0])
                r[0], r[1], r[2], r[3] = r[0] + 1, r[1] + ex, r[2] + n, max(r[3], ulp)
    print(f"{'inputs':6} {'acc':4} {'instr':5} {'prec':4} {'run':7} {'cases':>5} {'elements':>8} {'exact %':>8} "
          f"{'max ulp':>7}")
    for ((dt, acc, ins, prec), how), (cases, ex, n, ulp) in sorted(rows.items()):
        print(f"{dt:6} {acc:4} {ins:5} {prec:4} {how:7} {cases:5} {n:8} {100 * ex / n:8.3f} {ulp:7}")
    if alt_rows:
        print("\nalternatives (one parameter changed; the fitted model is exact where the table above says so)")
        for ((dt, acc, ins, prec), how), (cases, ex, n, ulp) in sorted(alt_rows.items()):
            print(f"{dt:6} {acc:4} {ins:5} {prec:4} {how:16} {cases:5} {n:8} {100 * ex / n:8.3f} {ulp:10}")
    if skipped:
        print("\nno GPU output (errored on the GPU):", ", ".join(skipped))


if __name__ == "__main__":
    main()
