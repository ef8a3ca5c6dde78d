"""Traced time with ``trace(workers=1)`` against more worker processes (record/parallel/), on the issue-45 sizes:

    python benchmarks/speed/bench_workers.py [--repeat 5] [--cases add,softmax,matmul] [--workers 1,2,4]
                                             [--free] [--apart]

Cases are ``peers_kernels.py``'s at ``--size full``: vector add of 16M fp32 (BLOCK 1024), softmax 4096 x 4096
fp32 (a row a program), matmul 1024^3 fp16 (64x64x32 tiles). In one process, each case runs once to warm
up, then ``--repeat`` rounds, each round every worker count once in turn (so a change in the machine's
load falls on all of them alike); a cell is the median of its rounds. Beside wall time it gives the CPU
seconds the launch used in this process and in its workers together (what a worker costs in all), how many
workers ran, and why not more. The default worker counts are 1, 2, every core this process may use, and ``default``
(``workers=None``: those cores less the ones other processes keep busy, and only where the cost model
says workers pay).
Every traced run's outputs are checked to the bit against ``workers=1``'s.

``--free`` makes record/parallel/plan.py's cost model count workers as free (a launch of two chunks or more
is split as many ways as asked), to measure what workers cost on launches the model keeps in one process.
``--apart`` has the launch's process wait until its workers are done before it runs its own range: nothing
runs side by side, so wall times mean nothing, but the CPU column is what the workers cost in all without two
processes competing for a busy machine's cores and memory (``cpu / workers=1's`` is then printed).

Ratios compare cells of one run of this script; on a shared machine absolute times move between runs.
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


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _apart() -> None:
    """Make the launch's process wait for its workers (without reaping them) before its own range."""
    from triton_trace.record import executor
    from triton_trace.record.parallel import worker
    forked, fork, advance = [], worker.fork, executor.Grid.advance

    def fork_and_note(*args, **kwargs):
        w = fork(*args, **kwargs)
        forked.append(w.pid)
        return w

    def advance_after_workers(self, s, until):
        while forked:
            os.waitid(os.P_PID, forked.pop(), os.WEXITED | os.WNOWAIT)
        return advance(self, s, until)
    worker.fork = fork_and_note
    executor.Grid.advance = advance_after_workers


def main() -> None:
    import numpy as np
    import torch
    import triton
    import peers_kernels as PK
    import triton_trace
    from triton_trace.record.parallel import plan

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cases", default="add,softmax,matmul")
    ap.add_argument("--workers", default=None,
                    help="comma-separated worker counts, 'default' for workers=None (default: 1, 2, all cores, default)")
    ap.add_argument("--free", action="store_true", help="split every launch of two chunks or more")
    ap.add_argument("--apart", action="store_true", help="the launch's process runs its range after its workers")
    args = ap.parse_args()
    if args.workers:
        counts = [None if v.strip() == "default" else int(v) for v in args.workers.split(",")]
    else:
        counts = sorted({1, 2, plan.cores()}) + [None]
    if args.free:
        plan.WORKER_COST, plan.FIXED_SECONDS, plan.FORK_SECONDS = 1.0, 0.0, 0.0
    if args.apart:
        _apart()
    load = os.getloadavg()
    print(f"triton {triton.__version__}, torch {torch.__version__}, numpy {np.__version__}; {plan.cores()} cores "
          f"this process may use (os.sched_getaffinity); load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"at the start; cost model: workers' programs {plan.WORKER_COST}x, {plan.FORK_SECONDS} s a fork, "
          f"{plan.FIXED_SECONDS} s to take them back; median of {args.repeat} rounds")
    rows = []
    for name in args.cases.split(","):
        case = PK.CASES[name]("full", 0)
        # (trace() decorates the kernel object it is given: each worker count gets a jit function of its own)
        runs = {w: case.make(lambda k, w=w: triton_trace.trace(triton.jit(k.fn), workers=w)) for w in counts}
        want = None
        for w in counts:                                 # warm up, and the outputs to the bit
            triton_trace.reset()
            out = runs[w]()
            bits = out.numpy().tobytes()
            want = bits if want is None else want
            if bits != want:
                raise SystemExit(f"{name}: workers={w} gave other outputs than workers={counts[0]}")
        wall = {w: [] for w in counts}
        cpu = {w: [] for w in counts}
        note = {}
        for _ in range(args.repeat):
            for w in counts:
                triton_trace.reset()
                t0, c0 = time.perf_counter(), _cpu()
                runs[w]()
                wall[w].append(time.perf_counter() - t0)
                cpu[w].append(_cpu() - c0)
                note[w] = triton_trace.current_trace().launches[0].meta["execution"].get("workers")
        base = statistics.median(wall[counts[0]])
        for w in counts:
            t, c = statistics.median(wall[w]), statistics.median(cpu[w])
            n = note[w] or {"used": 1, "reason": None}
            rows.append((case.desc if w == counts[0] else "", "default" if w is None else str(w), n["used"], t,
                         base / t, c, n["reason"] or ""))
    print(f"\n{'case':58s} {'workers':>7s} {'ran':>4s} {'wall':>8s} {'speedup':>8s} {'cpu':>8s}  why not more")
    base_cpu = None
    for desc, w, used, t, speed, c, why in rows:
        base_cpu = c if desc else base_cpu
        tail = f"  cpu {c / base_cpu:4.2f}x workers=1's" if args.apart else ""
        print(f"{desc[:58]:58s} {w:>7s} {used:4d} {t:7.3f}s {speed:7.2f}x {c:7.3f}s  {why}{tail}")
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the end")


if __name__ == "__main__":
    main()
