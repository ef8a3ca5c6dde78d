"""Kernels that take the analysis' per-element paths, at scale: trace and analysis time, its memory.

    python benchmarks/speed/bench_findings.py [--programs 1024,4096] [--repeat 3]

Cases (each in a fresh child process, so the peak is its own), programs x 1024-element blocks:
- ``one_block``: every program stores its 1024 values over the same block (a missing ``pid * BLOCK``:
  the race a kernel author brings to the tool);
- ``halo``: 64x64 tiles in place, each also writing the next tile's first row (neighbours race on it);
- ``accumulate``: each program adds into its block of a declared output never zeroed (uninitialised reads);
- ``twice``: each program stores its block, then again half a block further on (double writes, and races
  with the next program);
- ``slice``: 64x64 tiles of a column slice of a wider matrix transposed (no finding: the out-of-view check
  of a view that does not cover its storage).
Times are medians of ``--repeat`` runs; "peak" is the child's high-water RSS above its RSS once the trace
exists (the analysis' own memory). Not part of the test run: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def one_block(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + tl.program_id(0) * BLOCK + offs))

    @triton.jit
    def halo(x_ptr, n, BLOCK: tl.constexpr):
        r = tl.arange(0, 2 * BLOCK)               # the tile's rows and the next tile's first (BLOCK + 1)
        rows = tl.program_id(0) * BLOCK + r
        cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        ptr = x_ptr + rows[:, None] * n + cols[None, :]
        mask = (r[:, None] <= BLOCK) & (rows[:, None] < n) & (cols[None, :] < n)
        tl.store(ptr, tl.load(ptr, mask=mask) + 1, mask=mask)
    @triton.jit
    def accumulate(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(out_ptr + offs) + tl.load(x_ptr + offs))

    @triton.jit
    def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + offs)
        tl.store(out_ptr + offs, v)
        tl.store(out_ptr + offs + BLOCK // 2, v, mask=offs + BLOCK // 2 < n)
    return one_block, halo, accumulate, twice


def _transpose():
    import triton
    import triton.language as tl

    @triton.jit
    def transpose(x_ptr, y_ptr, M, N, sxm, sxn, sym, syn, BLOCK: tl.constexpr):
        rm = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        rn = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        x = tl.load(x_ptr + rm[:, None] * sxm + rn[None, :] * sxn, mask=mask)
        tl.store(y_ptr + rn[None, :] * sym + rm[:, None] * syn, x, mask=mask)
    return transpose


def child(case: str, programs: int, repeat: int) -> dict:
    import torch
    import triton_trace
    import triton_trace.analysis.analyzer  # noqa: F401  (imported before the clock, as triton_trace is)
    one_block, halo, accumulate, twice = _kernels()
    x = torch.randn(programs * 1024)
    if case == "one_block":
        out = torch.empty(1024)
        run = lambda: triton_trace.trace(one_block)[(programs,)](x, out, BLOCK=1024)
    elif case == "accumulate":
        out = torch.zeros(programs * 1024)
        run = lambda: triton_trace.trace(accumulate, outputs=("out_ptr",))[(programs,)](x, out, BLOCK=1024)
    elif case == "slice":
        side = int(round(programs ** 0.5)) * 64
        view = torch.randn(side, side + 512)[:, 256:256 + side]
        y = torch.empty(side, side)
        transpose = _transpose()
        run = lambda: triton_trace.trace(transpose)[(side // 64, side // 64)](
            view, y, side, side, view.stride(0), view.stride(1), y.stride(0), y.stride(1), BLOCK=64)
    elif case == "twice":
        out = torch.zeros(programs * 1024)
        run = lambda: triton_trace.trace(twice, outputs=("out_ptr",))[(programs,)](x, out, x.numel(), BLOCK=1024)
    else:
        side = int(round(programs ** 0.5)) * 64
        x = torch.zeros(side, side)
        run = lambda: triton_trace.trace(halo)[(side // 64, side // 64)](x, side, BLOCK=64)
    traced, analysed, peak, found = [], [], 0, {}
    for _ in range(repeat):
        triton_trace.reset()
        t0 = time.perf_counter()
        run()
        traced.append(time.perf_counter() - t0)
        tr = triton_trace.current_trace()
        base = _rss()
        t0 = time.perf_counter()
        rep = triton_trace.analyze(tr)
        analysed.append(time.perf_counter() - t0)
        peak = max(peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base)
        found = {k: v for k, v in rep.finding_counts.items() if v}
    lanes = sum(lc.lanes.size for lc in tr.launches)
    return {"case": case, "programs": programs, "lanes": lanes, "traced_s": statistics.median(traced),
            "analyze_s": statistics.median(analysed), "peak_mb": peak / 1e6, "findings": found}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", default="1024,4096")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), args.repeat)))
        return
    print(f"{'case':10s} {'programs':>8s} {'lanes':>10s} {'traced s':>9s} {'analyze s':>9s} {'peak MB':>8s}  findings")
    for case in ("one_block", "halo", "accumulate", "twice", "slice"):
        for n in (int(v) for v in args.programs.split(",")):
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", case, str(n),
                                "--repeat", str(args.repeat)], capture_output=True, text=True)
            if r.returncode:
                print(f"{case:10s} {n:8d} failed: {r.stderr.strip().splitlines()[-1:]}")
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"{case:10s} {n:8d} {d['lanes']:10d} {d['traced_s']:9.3f} {d['analyze_s']:9.3f} "
                  f"{d['peak_mb']:8.0f}  {d['findings']}")


if __name__ == "__main__":
    main()
