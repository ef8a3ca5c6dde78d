"""Launches in a row, in one process: each case of bench_suite.py traced ``--runs`` times, the median time of
the runs after the first two, and the page faults (minor, ``ru_minflt``) each of them took.

    python benchmarks/speed/bench_launches.py [--runs 9] add_4m softmax ln_fwd transpose

Run it from two checkouts alternately to compare them (``PYTHONPATH=<other checkout>`` picks that
checkout's triton_trace; the cases come from this file's bench_suite.py). Not part of the test run: nothing
here asserts a time.
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))        # the test kernels


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="+")
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args(argv)
    import bench_suite
    import triton_trace
    print(f"triton_trace from {os.path.dirname(triton_trace.__file__)}")
    for case in args.cases:
        _, make, *_ = bench_suite.CASES[case][1](False)
        run = make(lambda k: triton_trace.trace(k))
        times, faults = [], []
        for _ in range(args.runs):
            triton_trace.reset()
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        print(f"{case:12s} {1e3 * statistics.median(times[2:]):7.1f} ms   page faults per run {faults[2:]}")


if __name__ == "__main__":
    main()
