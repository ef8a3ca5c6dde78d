"""What the per-program math values cost (record/checks/mathvalues*.py): each case traced with the monitor
off (``TRITON_TRACE_MATH_VALUES=0``), with it on through numpy's reductions (the fallback, and what ran
before native/rowstats.c), and with it on through the C pass. The three alternate in one process, run after
run; each cell is the best of ``--repeat`` runs, and the ratios are over the cell with the monitor off. Not
part of the test run: nothing here asserts a time.

    python benchmarks/speed/bench_math_values.py [--repeat 7] [--size full|small] [--cases softmax,matmul]
    PYTHONPATH=<a checkout from before native/rowstats.c> python benchmarks/speed/bench_math_values.py   # before
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers_kernels as PK  # noqa: E402
import triton_trace  # noqa: E402
from triton_trace.record.checks import mathvalues_ops  # noqa: E402

try:
    from triton_trace.native import rowstats
except ImportError:             # a checkout from before the C pass (PYTHONPATH=<it>): numpy's passes only
    rowstats = None
MODES = ("off", "numpy", "C") if rowstats is not None else ("off", "numpy")


def _set(mode: str) -> None:
    os.environ[mathvalues_ops.ENV] = "0" if mode == "off" else "1"
    if rowstats is not None:
        rowstats.DISABLED = mode != "C"


def timed(run) -> float:
    triton_trace.reset()
    t0 = time.perf_counter()
    run()
    took = time.perf_counter() - t0
    triton_trace.reset()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--size", choices=("small", "full"), default="full")
    ap.add_argument("--cases", default="softmax,matmul")
    args = ap.parse_args()
    if rowstats is not None and rowstats.library() is None:
        raise SystemExit(f"the C pass is not available here: {rowstats.failure()}")
    print(f"triton_trace from {os.path.dirname(triton_trace.__file__)}; best of {args.repeat} traced launches per "
          f"cell, modes alternating; ratio = time / monitor off")
    print("| case | " + " | ".join(MODES) + " | " + " | ".join(f"{m} / off" for m in MODES[1:]) + " |\n| --- |"
          + " ---: |" * (2 * len(MODES) - 1))
    for name in args.cases.split(","):
        case = PK.CASES[name](args.size, 0)
        run = case.make(triton_trace.trace)
        for mode in MODES:             # warm: compiled kernel, caches, the C build
            _set(mode)
            timed(run)
        best = {m: float("inf") for m in MODES}
        for _ in range(args.repeat):
            for mode in MODES:
                _set(mode)
                best[mode] = min(best[mode], timed(run))
        off = best["off"]
        print(f"| {case.desc} | " + " | ".join(f"{best[m] * 1e3:.0f} ms" for m in MODES) + " | "
              + " | ".join(f"{best[m] / off:.3f}" for m in MODES[1:]) + " |", flush=True)
    _set(MODES[-1])


if __name__ == "__main__":
    main()
