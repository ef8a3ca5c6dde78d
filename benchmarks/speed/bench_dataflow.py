"""What dataflow provenance costs (record/memory/dataflow.py: which loads fed each store): every case traced
with and without its hooks, alternating in one process. Each number is the process's CPU time, the best of
--repeat runs: on a machine shared with other work, wall time and medians move by more than the cost measured.
Not part of the test run: nothing here asserts a time.

The recurrent cases carry a state across T trips (fla's fused recurrent retention: h = decay h + k v^T, a
store a trip; and h = decay h + x[t], one store at the end): a state once carried a tag per trip, so a trip's
ops cost O(T) and the launch O(T^2); their time per trip should not grow with T.

    python benchmarks/speed/bench_dataflow.py [--repeat 9] [--only small|recurrent|matmul]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests"))        # the test kernels

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import kernels as K  # noqa: E402
import triton_trace  # noqa: E402
from triton_trace.record.memory import dataflow_ops  # noqa: E402


@triton.jit
def retention_kernel(q_ptr, k_ptr, v_ptr, o_ptr, T, decay, D: tl.constexpr):
    base = tl.program_id(0) * T * D
    r = tl.arange(0, D)
    h = tl.zeros((D, D), dtype=tl.float32)
    for t in range(T):
        q = tl.load(q_ptr + base + t * D + r)
        k = tl.load(k_ptr + base + t * D + r)
        v = tl.load(v_ptr + base + t * D + r)
        h = h * decay + k[:, None] * v[None, :]
        tl.store(o_ptr + base + t * D + r, tl.sum(h * q[:, None], axis=0))


@triton.jit
def decay_sum_kernel(x_ptr, out_ptr, T, sx, decay, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    h = tl.zeros((BLOCK,), dtype=tl.float32)
    for t in range(T):
        h = h * decay + tl.load(x_ptr + t * sx + offs)
    tl.store(out_ptr + offs, h)


def small_cases(batch):
    g = torch.Generator().manual_seed(0)
    x1, y1 = torch.randn(1 << 20, generator=g), torch.randn(1 << 20, generator=g)
    s = torch.randn(1024, 512, generator=g)
    a, b = torch.randn(512, 512, generator=g), torch.randn(512, 512, generator=g)
    tr = lambda make: triton_trace.trace(batch=batch)(make())
    mode = "batched" if batch else "one program at a time"
    return {
        ("vector add 1M fp32", mode): lambda: K.add(x1, y1, kernel=tr(K.make_add), block=1024),
        ("softmax 1024x512", mode): lambda: K.softmax(s, kernel=tr(K.make_softmax)),
        ("matmul 512^3 (64x64x32)", mode): lambda: K.matmul(a, b, kernel=tr(K.make_matmul), block_m=64,
                                                            block_n=64, block_k=32),
    }


def recurrent_cases():
    g = torch.Generator().manual_seed(0)
    out = {}
    for T in (250, 500, 1000):
        q, k, v = (torch.randn(4, T, 16, generator=g) for _ in range(3))
        o = torch.empty(4, T, 16)
        x = torch.randn(T, 64, generator=g)
        out[(f"retention 4 heads D=16, T={T}", "batched")] = (
            lambda q=q, k=k, v=v, o=o, T=T: triton_trace.trace()(retention_kernel)[(4,)](q, k, v, o, T, 0.9, D=16))
        out[(f"decay sum 64 wide, T={T}", "batched")] = (
            lambda x=x, T=T: triton_trace.trace()(decay_sum_kernel)[(4,)](x, torch.empty(64), T, 64, 0.9, BLOCK=16))
    return out


def matmul_cases():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(1024, 1024, generator=g).half()
    b = torch.randn(1024, 1024, generator=g).half()
    return {("matmul 1024^3 fp16 (64x64x32)", "batched"): lambda: K.matmul(
        a, b, kernel=triton_trace.trace()(K.make_matmul()), block_m=64, block_n=64, block_k=32)}


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
    ap.add_argument("--only", choices=("small", "recurrent", "matmul"), action="append",
                    help="the groups of cases to run (default: all)")
    args = ap.parse_args()
    groups = args.only or ["small", "recurrent", "matmul"]
    cases = {}
    if "small" in groups:
        for batch in (True, False):
            cases.update(small_cases(batch))
    if "recurrent" in groups:
        cases.update(recurrent_cases())
    if "matmul" in groups:
        cases.update(matmul_cases())
    on, off = dataflow_ops.install, (lambda *a, **k: None)
    print("| case | mode | with dataflow | without | ratio |\n| --- | --- | ---: | ---: | ---: |")
    ratios = []
    for (name, mode), fn in cases.items():
        fn()      # warm: compile and caches
        t = {"with": [], "without": []}
        for _ in range(args.repeat):
            for label, hooks in (("with", on), ("without", off)):
                dataflow_ops.install = hooks
                t[label].append(timed(fn))
        dataflow_ops.install = on
        w, wo = min(t["with"]), min(t["without"])
        ratios.append(w / wo)
        print(f"| {name} | {mode} | {w * 1e3:.0f} ms | {wo * 1e3:.0f} ms | {w / wo:.3f} |", flush=True)
    print(f"\ngeometric mean ratio: {statistics.geometric_mean(ratios):.3f}")


if __name__ == "__main__":
    main()
