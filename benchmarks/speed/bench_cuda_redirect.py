"""What the CUDA redirect (triton_trace.suite.cuda_on_cpu) costs: a suite written for the GPU against the
same suite written for the CPU, both traced, alternating in one process (this machine's load moves absolute
times between sittings; the ratio is what reads).

- ``ops``: microseconds per torch op: a plain CPU add; the same add while the redirect's factory mode is
  installed; an add of two CUDA tensors (the subclass); ``torch.empty`` plain and with ``device="cuda"``.
- ``suite``: the kernels of tests/cuda_suite as its tests use them (an add of three sizes, a persistent sum
  over the SM count, an autotuned row softmax, each checked against torch), run as "tests": each under
  ``trace_all()``, analysed for findings as ``pytest --triton-trace`` does. Side A: CPU tensors, no redirect.
  Side B: ``device="cuda"`` inside ``cuda_on_cpu()`` (installed once, as ``pytest --tt-cuda`` does, with
  ``torch.empty`` poisoned).

    python benchmarks/speed/bench_cuda_redirect.py [--repeat 7] [--rounds 3]

Prints the sorted times of each side and the ratio of the medians. Not part of the test run: nothing here
asserts a time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import ExitStack

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "cuda_suite"))

import torch  # noqa: E402
import triton  # noqa: E402

import triton_trace  # noqa: E402
from triton_trace.suite import cuda_on_cpu  # noqa: E402
from triton_trace.suite.tensors import CudaFactories  # noqa: E402


def _kernels():
    # tests/cuda_suite/kernels.py imports only torch and triton: usable on either side
    import kernels
    return kernels


def per_op(n: int = 20000) -> dict:
    def clock(fn):
        fn()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - start) / n * 1e6
    a, b = torch.randn(64), torch.randn(64)
    out = {"plain add": clock(lambda: a + b), "plain empty": clock(lambda: torch.empty(64))}
    with cuda_on_cpu(trace=False):
        x, y = a.cuda(), b.cuda()
        out["add, mode installed"] = clock(lambda: a + b)
        out["add of CUDA tensors"] = clock(lambda: x + y)
        out["empty(device='cuda')"] = clock(lambda: torch.empty(64, device="cuda"))
    with CudaFactories():
        out["add, mode only"] = clock(lambda: a + b)
    return out


def one_test(body) -> None:
    """A test as the plugin runs it: traced, then analysed for findings."""
    triton_trace.reset()
    with triton_trace.trace_all():
        body()
    trace = triton_trace.current_trace()
    if trace.launches:
        triton_trace.analyze(trace, layouts="model", what_if=False)
    triton_trace.reset()


def suite(device: str, rounds: int) -> None:
    k = _kernels()

    def add_test(n):
        x, y = torch.randn(n, device=device), torch.randn(n, device=device)
        out = torch.empty_like(x)
        k.add_kernel[(triton.cdiv(n, 256),)](x, y, out, n, BLOCK=256)
        torch.testing.assert_close(out, x + y)

    def persistent_test():
        x = torch.randn(100_000, device=device)
        programs = 132
        partial = torch.empty(programs, device=device)
        k.persistent_sum_kernel[(programs,)](x, partial, x.numel(), NUM_PROGRAMS=programs, BLOCK=64)
        torch.testing.assert_close(partial.sum(), x.sum(), rtol=1e-4, atol=1e-3)

    def softmax_test():
        x = torch.randn(16, 100, device=device)
        out = torch.empty_like(x)
        if device == "cuda":        # autotuned, pruned by what Triton's driver reports
            k.row_softmax_kernel[(16,)](x, out, 100, x.stride(0))
        else:                       # a CPU-written suite has no device to prune by: the config it picks
            k.row_softmax_kernel.fn[(16,)](x, out, 100, x.stride(0), BLOCK_N=128, num_warps=4, num_stages=2)
        torch.testing.assert_close(out, torch.softmax(x, dim=1))

    for _ in range(rounds):
        for n in (1, 1000, 4099):
            one_test(lambda: add_test(n))
        one_test(persistent_test)
        one_test(softmax_test)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3, help="times each side runs the suite per timing")
    args = ap.parse_args(argv)
    for name, us in per_op().items():
        print(f"  {name:28s} {us:7.2f} us")
    suite("cpu", 1)                                            # warm: the kernels' rewrites are cached
    with cuda_on_cpu(trace=False, poison_empty=True):
        suite("cuda", 1)
    times = {"cpu": [], "cuda": []}
    for _ in range(args.repeat):
        for side in ("cpu", "cuda"):
            with ExitStack() as stack:
                if side == "cuda":
                    stack.enter_context(cuda_on_cpu(trace=False, poison_empty=True))
                start = time.perf_counter()
                suite(side, args.rounds)
                times[side].append(time.perf_counter() - start)
    for side, ts in times.items():
        print(f"  suite on {side:5s} " + " ".join(f"{t:.3f}" for t in sorted(ts)) + " s")
    ratio = statistics.median(times["cuda"]) / statistics.median(times["cpu"])
    print(f"  redirect / CPU-written: {ratio:.3f}x (medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
