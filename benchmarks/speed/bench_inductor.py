"""torch.compile through the tracer (triton_trace/suite/inductor.py): compile + first call and steady-state
call time of three workloads, per way of running them, in one process:

- ``eager``: plain torch on CPU tensors (steady state only);
- ``cpp``: torch.compile with Inductor's C++ backend on CPU tensors, the reference;
- ``cpu/triton untraced`` and ``cpu/triton traced``: ``inductor_on_cpu(trace=False / True)``, Inductor's
  Triton kernels for the CPU run on the interpreter;
- ``cuda untraced`` and ``cuda traced``: under ``cuda_on_cpu(trace=False / True)``, Inductor's CUDA kernels
  for the redirect's GPU (H200) run on the interpreter (inference, under torch.no_grad()).

Every compile is cold (``force_disable_caches``, ``torch.compiler.reset()`` before each): Inductor's FX and
kernel caches would else turn a later compile into a load. One throwaway compile per way warms the process
first (imports, Inductor's pattern tables), and is reported on its own line.

    python benchmarks/speed/bench_inductor.py [--repeat 3] [--quick]

Not part of the test run: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from contextlib import contextmanager

import torch
import torch.nn.functional as F
import triton

import triton_trace
from triton_trace.suite import cuda_on_cpu, inductor_on_cpu


def workloads(quick: bool) -> list:
    """Softmax is small: its row max is Inductor's ``triton_helpers.max2``, a reduction with a custom combine
    function, which the tracer runs one program at a time on Triton's element-by-element reduce."""
    n, rows, width = (1 << 16, 64, 256) if quick else (1 << 18, 256, 1024)
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g)
    mlp = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU()).eval()
    return [(f"pointwise {n}", lambda x, y: (x + y) * 2, (randn(n), randn(n))),
            (f"layer_norm {rows}x{width}", lambda x, w, b: F.layer_norm(x, (width,), w, b),
             (randn(rows, width), randn(width), randn(width))),
            ("softmax 16x256", lambda x: torch.softmax(x, -1), (randn(16, 256),)),
            (f"linear+gelu {rows}x{width}", mlp, (randn(rows, width),))]


@contextmanager
def cuda_block(trace: bool):
    with cuda_on_cpu(trace=trace):
        yield "cuda"


@contextmanager
def cpu_triton(trace: bool):
    with inductor_on_cpu(trace=trace):
        yield "cpu"


@contextmanager
def plain():
    yield "cpu"


WAYS = [("cpp", plain), ("cpu/triton untraced", lambda: cpu_triton(False)),
        ("cpu/triton traced", lambda: cpu_triton(True)), ("cuda untraced", lambda: cuda_block(False)),
        ("cuda traced", lambda: cuda_block(True))]


def _to(fn, args, device: str):
    if isinstance(fn, torch.nn.Module):
        fn = fn.to(device)
    return fn, tuple(a.to(device) for a in args)


def measure(fn, args, repeat: int) -> tuple:
    """(compile + first call, sorted steady-state call times) in seconds; launches of the last call."""
    torch.compiler.reset()
    compiled = torch.compile(fn)
    start = time.perf_counter()
    compiled(*args)
    first = time.perf_counter() - start
    steady = []
    for _ in range(repeat):
        triton_trace.reset()
        start = time.perf_counter()
        compiled(*args)
        steady.append(time.perf_counter() - start)
    return first, sorted(steady), len(triton_trace.current_trace().launches)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="steady-state calls per way (default 3)")
    ap.add_argument("--quick", action="store_true", help="smaller workloads")
    args = ap.parse_args(argv)
    torch._inductor.config.force_disable_caches = True
    warnings.filterwarnings("ignore")        # each cold compile repeats torch's notes about disabled caches
    command = " ".join(["python benchmarks/speed/bench_inductor.py", *(argv if argv is not None else sys.argv[1:])])
    print(f"# {command}; "
          f"torch {torch.__version__}, triton {triton.__version__}, {torch.get_num_threads()} torch threads")
    print("# times in s: compile + first call (cold caches), then the sorted steady-state calls; "
          "launches traced per call")
    with torch.no_grad():
        # the first compile of the process pays dynamo's and Inductor's one-time set-up; the cpp way's first
        # compile then adds the C++ toolchain's (headers, the compiler's first run)
        for way, block in [("(process)", WAYS[1][1])] + WAYS:
            with block() as device:
                fn, inputs = _to(lambda x: x.sin() + 1, (torch.randn(8),), device)
                start = time.perf_counter()
                torch.compiler.reset()
                torch.compile(fn)(*inputs)
                print(f"{'warm-up':28} {way:20} first compile: {time.perf_counter() - start:6.2f}")
        for name, fn, inputs in workloads(args.quick):
            eager = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                fn(*inputs)
                eager.append(time.perf_counter() - start)
            print(f"{name:28} {'eager':20} {'':>8}   steady: {' '.join(f'{t:.4f}' for t in sorted(eager))}")
            for way, block in WAYS:
                with block() as device:
                    f, a = _to(fn, inputs, device)
                    first, steady, launches = measure(f, a, args.repeat)
                print(f"{name:28} {way:20} {first:8.2f}   steady: {' '.join(f'{t:.4f}' for t in steady)}"
                      f"   launches: {launches}")
            if isinstance(fn, torch.nn.Module):
                fn.to("cpu")


if __name__ == "__main__":
    main()
