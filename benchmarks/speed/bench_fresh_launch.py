"""What one small launch of a kernel made anew costs, plain and traced: the fixed cost that Triton's language
tests pay once per test case (each defines its kernels inside the test function), and a spin lock's launch.

    python benchmarks/speed/bench_fresh_launch.py [--launches 300] [--baseline DIR]

Each (case, mode) runs in a fresh child: ``plain`` sets ``TRITON_INTERPRET=1``; ``traced`` runs the launch
inside ``triton_trace.trace_all()`` (as tests/triton_suite/tt_suite_plugin.py does), with the triton_trace of
this checkout or, for ``traced-before``, of ``--baseline DIR``. Cases: ``nested``: a 1-program XOR of 128
int32 defined inside a function, a new kernel per launch; ``spinlock``: Triton's test_atomic_cas kernel,
2000 programs taking one lock in turn (per launch, not per program). Prints milliseconds per launch and the
garbage collector's share (``gc.callbacks``). Times are medians of 3 children; nothing asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r'''
import gc, json, os, sys, time
case, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
import torch, triton, triton.language as tl
gc_spent, gc_start = [], [0.0]


def on_gc(phase, info):
    if phase == "start":
        gc_start[0] = time.perf_counter()
    else:
        gc_spent.append(time.perf_counter() - gc_start[0])


gc.callbacks.append(on_gc)


def nested():
    @triton.jit
    def xor(Z, X, Y, SIZE: tl.constexpr):
        off = tl.arange(0, SIZE)
        tl.store(Z + off, tl.load(X + off) ^ tl.load(Y + off))
    return xor


@triton.jit
def serialized_add(data, Lock, SEM: tl.constexpr):
    ptrs = data + tl.arange(0, 128)
    while tl.atomic_cas(Lock, 0, 1, SEM) == 1:
        pass
    tl.store(ptrs, tl.load(ptrs) + 1.0)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


x = torch.randint(0, 100, (128,), dtype=torch.int32)
y = torch.randint(0, 100, (128,), dtype=torch.int32)


def once():
    if case == "nested":
        z = torch.empty(128, dtype=torch.int32)
        nested()[(1,)](z, x, y, SIZE=128)
        assert torch.equal(z, x ^ y)
    else:
        data, lock = torch.zeros(128), torch.zeros(1, dtype=torch.int32)
        serialized_add[(2000,)](data, lock, SEM="relaxed")
        assert float(data[0]) == 2000.0


if mode != "plain":
    import triton_trace
    inner = once

    def once():
        triton_trace.reset()
        with triton_trace.trace_all():
            inner()
once()
gc_spent.clear()
t = time.perf_counter()
for _ in range(n):
    once()
wall = time.perf_counter() - t
print(json.dumps({"ms": wall / n * 1e3, "gc_ms": sum(gc_spent) / n * 1e3}))
'''


def child(script: str, case: str, mode: str, n: int, src: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p))
    if mode == "plain":
        env["TRITON_INTERPRET"] = "1"
    out = subprocess.run([sys.executable, script, case, mode, str(n)], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=300, help="launches per child (the spin lock: a tenth)")
    ap.add_argument("--baseline", help="a folder holding an earlier triton_trace package")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    modes = [("plain", ROOT), ("traced", ROOT)] + ([("traced-before", args.baseline)] if args.baseline else [])
    import triton
    print(f"# triton {triton.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs; median of "
          f"{args.repeat} children")
    print(f"{'case':<10}{'mode':<15}{'ms/launch':>10}{'gc ms':>8}{'/plain':>8}")
    folder = tempfile.mkdtemp(prefix="fresh_launch_")      # @triton.jit needs its kernels in a file
    script = os.path.join(folder, "fresh_launch_child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    for case in ("nested", "spinlock"):
        n = args.launches if case == "nested" else max(1, args.launches // 100)
        plain = None
        for mode, src in modes:
            runs = [child(script, case, mode, n, src) for _ in range(args.repeat)]
            ms = statistics.median(r["ms"] for r in runs)
            gc_ms = statistics.median(r["gc_ms"] for r in runs)
            plain = ms if mode == "plain" else plain
            print(f"{case:<10}{mode:<15}{ms:>10.2f}{gc_ms:>8.2f}{ms / plain:>8.2f}")
    shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
