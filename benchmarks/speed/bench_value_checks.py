"""What the value checks cost: every case traced with and without the hooks behind the nonfinite and
overflow findings (record/checks/nonfinite_ops.py, overflow_ops.py), alternating in one process, median
of --repeat runs each. Not part of the test run: nothing here asserts a time.

    python benchmarks/speed/bench_value_checks.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))        # the test kernels

import torch  # noqa: E402

import kernels as K  # noqa: E402
import triton_trace  # noqa: E402
from triton_trace.record.checks import nonfinite_ops, overflow_ops  # noqa: E402


def cases():
    g = torch.Generator().manual_seed(0)
    x1, y1 = torch.randn(1 << 20, generator=g), torch.randn(1 << 20, generator=g)
    s = torch.randn(1024, 512, generator=g)
    a, b = torch.randn(256, 256, generator=g), torch.randn(256, 256, generator=g)
    w, bias = torch.randn(512, generator=g), torch.randn(512, generator=g)
    return {
        "vector add 1M fp32": lambda: K.add(x1, y1, kernel=triton_trace.trace(K.make_add()), block=1024),
        "softmax 1024x512": lambda: K.softmax(s, kernel=triton_trace.trace(K.make_softmax())),
        "layer norm fwd 1024x512": lambda: K.layer_norm_fwd(s, w, bias, kernel=triton_trace.trace(K.make_layer_norm_fwd()), block=128),
        "matmul 256^3 (32x32x32)": lambda: K.matmul(a, b, kernel=triton_trace.trace(K.make_matmul()), block_m=32, block_n=32, block_k=32),
    }


def timed(fn) -> float:
    triton_trace.reset()
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    triton_trace.reset()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    on = (nonfinite_ops.install, overflow_ops.install)
    off = (lambda *a, **k: None, lambda *a, **k: None)
    print("| case | with checks | without | ratio |\n| --- | ---: | ---: | ---: |")
    ratios = []
    for name, fn in cases().items():
        fn()      # warm: compile and caches
        t = {"with": [], "without": []}
        for _ in range(args.repeat):
            for label, hooks in (("with", on), ("without", off)):
                nonfinite_ops.install, overflow_ops.install = hooks
                t[label].append(timed(fn))
        nonfinite_ops.install, overflow_ops.install = on
        w, wo = statistics.median(t["with"]), statistics.median(t["without"])
        ratios.append(w / wo)
        print(f"| {name} | {w * 1e3:.0f} ms | {wo * 1e3:.0f} ms | {w / wo:.2f} |")
    print(f"\ngeometric mean ratio: {statistics.geometric_mean(ratios):.2f}")


if __name__ == "__main__":
    main()
