"""Three of the tracer's speed-ups, each measured against its own absence in one process, alternating runs
(this machine's load moves absolute times by 2x between sittings; alternating A and B within one process
is what makes the ratio readable):

- ``dot``: a chunk's ``tl.dot`` as one stacked matmul (record/batch/dot.py) against one product per
  program (what every kind of operands falls back to), on the bench_suite cases named by ``--dot``;
- ``threads``: ``analyze()`` on two cores against ``TRITON_TRACE_THREADS=1`` (analysis/parallel.py), on the
  cases named by ``--threads``; the two reports must be equal byte for byte (checked on every run);
- ``jit``: ``analyze()`` with the cache simulation's compiled loops (analysis/loops.c through native.py; built
  and loaded before the clock starts) against its numpy passes, on the cases named by ``--jit``;
  the reports must be equal byte for byte.

    python benchmarks/speed/bench_ab.py [--dot matmul_1024,matmul_4096_fp16] [--threads matmul_1024,transpose]
                                        [--jit ln_fwd,matmul_4096_fp16] [--repeat 3] [--quick]

Prints the sorted times of each side and the ratio of the medians. Not part of the test run: nothing here
asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))        # the test kernels
sys.path.insert(0, HERE)

import bench_suite as B  # noqa: E402
import triton_trace  # noqa: E402
from triton_trace.analysis.memory import jitsteps  # noqa: E402
from triton_trace.record.batch import dot as batchdot  # noqa: E402


class _PerProgram(dict):
    """A kind table that knows every kind as one whose stacked product differs: one product per program."""

    def get(self, key, default=None):
        return False

    def __setitem__(self, key, value):
        pass


def _row(label: str, case: str, a: str, ta: list, b: str, tb: list) -> str:
    ma, mb = statistics.median(ta), statistics.median(tb)
    fmt = lambda ts: " ".join(f"{t:.2f}" for t in sorted(ts))     # noqa: E731
    return f"{label:8} {case:18} {a}: {fmt(ta):24} {b}: {fmt(tb):24} {a}/{b} = {ma / mb:.2f}x"


def ab_dot(case: str, repeat: int, quick: bool) -> str:
    _, make, _ = B.CASES[case][1](quick)
    run = make(lambda k: triton_trace.trace(k, values=False))
    real = batchdot._stacked_ok
    times = {"per-program": [], "stacked": []}
    run()                                           # the first launch compares each kind once
    try:
        for _ in range(repeat):
            for side in times:
                batchdot._stacked_ok = _PerProgram() if side == "per-program" else real
                triton_trace.reset()
                t0 = time.perf_counter()
                run()
                times[side].append(time.perf_counter() - t0)
    finally:
        batchdot._stacked_ok = real
    return _row("dot", case, "per-program", times["per-program"], "stacked", times["stacked"])


def ab_threads(case: str, repeat: int, quick: bool) -> str:
    _, make, _ = B.CASES[case][1](quick)
    triton_trace.reset()
    make(lambda k: triton_trace.trace(k))()
    trace = triton_trace.current_trace()
    saved = os.environ.get("TRITON_TRACE_THREADS")
    times, reports = {"1": [], "2": []}, {}
    try:
        for _ in range(repeat):
            for side in times:
                os.environ["TRITON_TRACE_THREADS"] = side
                t0 = time.perf_counter()
                report = triton_trace.analyze(trace)
                times[side].append(time.perf_counter() - t0)
                text = json.dumps(report.to_dict(), sort_keys=True, default=str)
                if reports.setdefault(side, text) != text or reports.get("1", text) != text:
                    raise SystemExit(f"{case}: the report on {side} core(s) differs")
    finally:
        if saved is None:
            os.environ.pop("TRITON_TRACE_THREADS", None)
        else:
            os.environ["TRITON_TRACE_THREADS"] = saved
    return _row("analyze", case, "1 core", times["1"], "2 cores", times["2"])


def ab_jit(case: str, repeat: int, quick: bool) -> str:
    _, make, _ = B.CASES[case][1](quick)
    triton_trace.reset()
    make(lambda k: triton_trace.trace(k))()
    trace = triton_trace.current_trace()
    real = jitsteps.use
    times, reports = {"numpy": [], "compiled": []}, {}
    try:
        jitsteps.use = lambda n: jitsteps.ENABLED
        triton_trace.analyze(trace)                 # loads (or builds) the loops, and compiles the kernel's layouts
        for _ in range(repeat):
            for side in times:
                jitsteps.use = (lambda n: False) if side == "numpy" else (lambda n: jitsteps.ENABLED)
                t0 = time.perf_counter()
                report = triton_trace.analyze(trace)
                times[side].append(time.perf_counter() - t0)
                text = json.dumps(report.to_dict(), sort_keys=True, default=str)
                if reports.setdefault("numpy", text) != text:
                    raise SystemExit(f"{case}: the report with the compiled loops differs")
    finally:
        jitsteps.use = real
    return _row("analyze", case, "numpy", times["numpy"], "compiled", times["compiled"])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dot", default="matmul_1024,matmul_4096_fp16")
    ap.add_argument("--threads", default="softmax,matmul_1024,transpose,matmul_4096_fp16")
    ap.add_argument("--jit", default="add_4m,ln_fwd,matmul_1024,transpose,matmul_4096_fp16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="the bench_suite cases' quick sizes")
    args = ap.parse_args(argv)
    import torch
    import triton
    print(f"# python benchmarks/speed/bench_ab.py {' '.join(argv if argv is not None else sys.argv[1:])}; triton "
          f"{triton.__version__}, torch {torch.__version__}, {os.cpu_count()} CPUs; sorted times in s", flush=True)
    for case in filter(None, args.dot.split(",")):
        print(ab_dot(case, args.repeat, args.quick), flush=True)
    for case in filter(None, args.threads.split(",")):
        print(ab_threads(case, args.repeat, args.quick), flush=True)
    if not jitsteps.available():
        print("# jit: the compiled loops cannot be built here (no C compiler, or TRITON_TRACE_NO_JIT is set): "
              "nothing to compare", flush=True)
        return
    for case in filter(None, args.jit.split(",")):
        print(ab_jit(case, args.repeat, args.quick), flush=True)


if __name__ == "__main__":
    main()
