"""The first ``analyze()`` of a process, as in a notebook: a cell traces, the user pauses, the next cell analyses.
Each case runs twice in fresh child processes: once as a script does (the cache simulation's compiled loops
not loaded: streams below jitsteps.MIN_ENTRIES take the numpy passes) and once with the loops loaded on a
background thread after the trace (what the notebook hook does after a cell that traced; analysis/jitsteps.py).

    python tests/benchmarks/bench_jit_load.py [--cases matmul_1024,ln_fwd,transpose,add_4m] [--pause 1.0]

Not part of the test run: nothing here asserts a time. The reports of both runs must be equal (checked).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def child(case: str, prefetch: bool, pause: float) -> dict:
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, ".."))
    import bench_suite as B
    import triton_trace
    from triton_trace.analysis import jitsteps
    _, make, _ = B.CASES[case][1](False)
    run = make(lambda k: triton_trace.trace(k))
    triton_trace.reset()
    run()
    trace = triton_trace.current_trace()
    if prefetch:
        jitsteps.prefetch()
    time.sleep(pause)                # the user between two cells
    t0 = time.perf_counter()
    report = triton_trace.analyze(trace)
    seconds = time.perf_counter() - t0
    digest = hashlib.sha256(json.dumps(report.to_dict(), sort_keys=True, default=str).encode()).hexdigest()
    return {"seconds": seconds, "loaded": jitsteps._loaded, "report": digest[:16]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="matmul_1024,ln_fwd,transpose,add_4m")
    ap.add_argument("--pause", type=float, default=1.0)
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1] == "prefetch", args.pause)))
        return
    print(f"first analyze() after a {args.pause:g} s pause, each in a fresh process")
    print(f"{'case':<14}{'script s':>10}{'loaded s':>10}{'ratio':>8}  same report")
    for case in args.cases.split(","):
        got = {}
        for mode in ("script", "prefetch"):
            out = subprocess.run([sys.executable, __file__, "--child", case, mode, "--pause", str(args.pause)],
                                 capture_output=True, text=True, check=True).stdout
            got[mode] = json.loads(out.strip().splitlines()[-1])
        a, b = got["script"], got["prefetch"]
        assert b["loaded"], f"{case}: the loops did not load during the pause"
        print(f"{case:<14}{a['seconds']:>10.3f}{b['seconds']:>10.3f}{a['seconds'] / b['seconds']:>7.1f}x  "
              f"{a['report'] == b['report']}")


if __name__ == "__main__":
    main()
