"""What dataflow provenance costs (record/memory/dataflow.py: which loads fed each store): every case traced
with and without its hooks, alternating in one process. Each number is the process's CPU time, the best of
--repeat runs: on a machine shared with other work, wall time and medians move by more than the cost measured.
Not part of the test run: nothing here asserts a time.

    python benchmarks/speed/bench_dataflow.py [--repeat 9]
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
from triton_trace.record.memory import dataflow_ops  # noqa: E402


def cases(batch):
    g = torch.Generator().manual_seed(0)
    x1, y1 = torch.randn(1 << 20, generator=g), torch.randn(1 << 20, generator=g)
    s = torch.randn(1024, 512, generator=g)
    a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
    tr = lambda make: triton_trace.trace(batch=batch)(make())
    return {
        "vector add 1M fp32": lambda: K.add(x1, y1, kernel=tr(K.make_add), block=1024),
        "softmax 1024x512": lambda: K.softmax(s, kernel=tr(K.make_softmax)),
        "matmul 512^3 (64x64x32)": lambda: K.matmul(a, b, kernel=tr(K.make_matmul), block_m=64, block_n=64,
                                                    block_k=32),
    }


def timed(fn) -> float:
    triton_trace.reset()
    t0 = time.process_time()
    fn()
    dt = time.process_time() - t0
    triton_trace.reset()
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    on, off = dataflow_ops.install, (lambda *a, **k: None)
    print("| case | mode | with dataflow | without | ratio |\n| --- | --- | ---: | ---: | ---: |")
    ratios = []
    for batch in (True, False):
        for name, fn in cases(batch).items():
            fn()      # warm: compile and caches
            t = {"with": [], "without": []}
            for _ in range(args.repeat):
                for label, hooks in (("with", on), ("without", off)):
                    dataflow_ops.install = hooks
                    t[label].append(timed(fn))
            dataflow_ops.install = on
            w, wo = min(t["with"]), min(t["without"])
            ratios.append(w / wo)
            mode = "batched" if batch else "one program at a time"
            print(f"| {name} | {mode} | {w * 1e3:.0f} ms | {wo * 1e3:.0f} ms | {w / wo:.3f} |", flush=True)
    print(f"\ngeometric mean ratio: {statistics.geometric_mean(ratios):.3f}")


if __name__ == "__main__":
    main()
