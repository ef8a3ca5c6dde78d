"""The L2 simulation alone: ``simulate()`` time (min of --repeat) and a hash of everything it returns, per case
and cache size, so that a change to analysis/memory/cache.py, lockstep.py or streaming.py can be checked for the
same counts (equal hashes) and timed, on this commit and on another one (a worktree, PYTHONPATH=it).

    python benchmarks/speed/bench_cache.py [--cases add,softmax,ln,transpose,hist,mm512,mm1k,mm2k,mm4k] [--repeat 3]

Not part of the test run: nothing here asserts a time (tests/analysis/test_cache_windows.py checks the counts).
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))        # the test kernels


def _trace(case: str):
    import torch
    import kernels as K
    import triton_trace
    torch.manual_seed(0)
    triton_trace.reset()
    mm = {"mm512": (512, (32, 32, 32), False), "mm1k": (1024, (64, 64, 32), False),
          "mm2k": (2048, (128, 128, 64), True), "mm4k": (4096, (128, 128, 64), True)}
    if case in mm:
        n, (bm, bn, bk), half = mm[case]
        a, b = torch.randn(n, n), torch.randn(n, n)
        if half:
            a, b = a.half(), b.half()
        K.matmul(a, b, kernel=triton_trace.trace(K.make_matmul()), block_m=bm, block_n=bn, block_k=bk, group_m=8)
    elif case == "add":
        K.add(torch.randn(1 << 22), torch.randn(1 << 22), kernel=triton_trace.trace(K.make_add()), block=1024)
    elif case == "softmax":
        K.softmax(torch.randn(4096, 1024), kernel=triton_trace.trace(K.make_softmax()))
    elif case == "ln":
        x, w, b = torch.randn(1024, 1024), torch.randn(1024), torch.randn(1024)
        K.layer_norm_fwd(x, w, b, kernel=triton_trace.trace(K.make_layer_norm_fwd()), block=1024)
    elif case == "transpose":
        K.transpose(torch.randn(4096, 4096), kernel=triton_trace.trace(K.make_transpose()), block_m=64, block_n=64)
    elif case == "hist":
        x = torch.randint(0, 64, (1 << 20,), dtype=torch.int32)
        K.histogram(x, 64, kernel=triton_trace.trace(K.make_histogram()), block=128)
    else:
        raise SystemExit(f"unknown case {case!r}")
    return triton_trace.current_trace().launches[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="add,softmax,ln,hist,mm512,mm1k,mm2k")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import numpy as np
    import triton_trace
    from triton_trace.analysis.memory.cache import issue_order, simulate
    from triton_trace.analysis.memory.coalescing import coalesce
    from triton_trace.analysis.context import LaunchContext, Params
    print(f"# triton_trace from {os.path.dirname(triton_trace.__file__)}")
    for case in args.cases.split(","):
        launch = _trace(case)
        for params in ({}, {"l2_bytes": 1 << 22}):
            ctx = LaunchContext(launch, 0, Params(**params).resolved())
            order = issue_order(ctx)
            co = coalesce(ctx, order)
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                result = simulate(ctx, co, order)
                times.append(time.perf_counter() - t0)
            h = hashlib.sha1()
            for f in dataclasses.fields(result):
                h.update(np.asarray(getattr(result, f.name)).tobytes())
            print(f"{case:8s} {str(params):22s} {min(times):7.3f} s  {len(co.stream_row):>10,} entries  "
                  f"hit {result.hit_rate:6.3f}%  {h.hexdigest()[:16]}", flush=True)


if __name__ == "__main__":
    main()
