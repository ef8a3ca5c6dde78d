"""Reductions and scans under numerics="compiled" against an H100's bits: order_probe.py's reduce/sum1d cases
(inputs drawn again from each case's seed), traced with numerics="compiled" and with the interpreter's, each
compared element by element with the GPU's output.

    PYTHONPATH=. python benchmarks/fidelity/fit_reductions.py --data <order_probe's output folder>

Run with the Triton release the bits were recorded with (3.6 for benchmarks/gpu/session5.sh's run): the order
in which a thread folds its own elements differs between releases.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import order_probe  # noqa: E402

import triton_trace  # noqa: E402


def traced(c: dict, ins: dict, shape: tuple, numerics: str) -> np.ndarray:
    out = torch.zeros(shape, dtype=torch.float32)
    k = triton_trace.trace(order_probe.sum1d_kernel if c["kind"] == "sum1d" else order_probe.reduce_kernel,
                           numerics=numerics)
    if c["kind"] == "sum1d":
        k[(c["samples"],)](ins["x"], out, N=c["N"], num_warps=c["warps"])
    else:
        k[(c["samples"],)](ins["x"], out, R=c["R"], C=c["C"], AXIS=c["axis"], OP=c["op"], num_warps=c["warps"])
    return out.numpy().view(np.int32).reshape(shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, help="the folder holding cases.json and the cases' .npz files")
    data = ap.parse_args().data
    rows = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
    for e in json.load(open(os.path.join(data, "cases.json"))):
        if e["kind"] == "dot" or not os.path.exists(os.path.join(data, e["name"] + ".npz")):
            continue
        keys = ("kind", "N", "warps", "samples") if e["kind"] == "sum1d" else \
            ("kind", "op", "R", "C", "axis", "warps", "samples")
        c = {k: e[k] for k in keys}            # the seed comes from these keys only, in this order
        gpu = np.load(os.path.join(data, e["name"] + ".npz"))["out"]
        ins = order_probe.inputs(c)
        compiled, interp = (traced(c, ins, gpu.shape, n) for n in ("compiled", "interpreter"))
        r = rows[(c["kind"], c.get("op", "sum"), c.get("axis", 0))]
        r[0] += 1
        r[1] += int(np.array_equal(compiled, gpu))
        r[2] += gpu.size
        r[3] += int((compiled == gpu).sum())
        r[4] += int((interp == gpu).sum())
    print("| kind | op | axis | cases | cases bit-exact | elements exact, compiled | elements exact, interpreter |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (kind, op, axis), r in sorted(rows.items()):
        print(f"| {kind} | {op} | {axis} | {r[0]} | {r[1]} | {100 * r[3] / r[2]:.1f}% | {100 * r[4] / r[2]:.1f}% |")


if __name__ == "__main__":
    main()
