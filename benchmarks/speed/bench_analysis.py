"""Benchmark: analyse synthetic launches of about 10 million recorded lanes and print the time of each stage.

    /work/venv39/bin/python benchmarks/speed/bench_analysis.py [--lanes 10000000] [--only NAME]

The launches are built directly with numpy (tracing 10 million lanes through the interpreter would take
minutes and measure the recorder, not the analysis):

- stream:    a vector add, 1-D blocks of 1024 fp32 lanes, the last block masked;
- tiled:     a matmul-like loop: 64x64 fp32 tiles of A and B reloaded by many programs (L2 reuse), 2-D
             blocks, then a 64x64 store; a transposed store so the contiguous dim is dim 0;
- gather:    1-D blocks of 1024 random offsets into a 64 MB table (the worst case for sorting and the
             cache model), scattered stores.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from triton_trace.analysis import analyze
from triton_trace.analysis import analyzer as A
from triton_trace.analysis.context import LaunchContext, Params
from triton_trace.model import KIND_CODE, Launch, TensorInfo, empty_ops


def build(name: str, programs: np.ndarray, rows: list, tensors: list, grid: tuple) -> Launch:
    """A launch where every program runs ``rows`` in order: (kind, tensor index, block shape, offsets of
    every program (n, *shape), mask (n, *shape) or None). Programs run in the order given."""
    n_prog, per = len(programs), len(rows)
    ops = empty_ops(n_prog * per)
    lanes = sum(int(np.prod(shape)) for _, _, shape, _, _ in rows)
    offsets = np.empty((n_prog, lanes), dtype=np.int64)      # program-major, like the recorder's buffers
    mask = np.ones((n_prog, lanes), dtype=bool)
    col = 0
    for seq, (kind, tensor, shape, off, m) in enumerate(rows):
        size = int(np.prod(shape))
        offsets[:, col:col + size] = off.reshape(n_prog, size)
        if m is not None:
            mask[:, col:col + size] = m.reshape(n_prog, size)
        idx = np.arange(n_prog) * per + seq
        for column, value in (("program", programs), ("seq", seq), ("kind", KIND_CODE[kind]), ("line", 10 + seq),
                              ("tensor", tensor), ("elem_bytes", 4), ("ndim", len(shape)), ("lane_count", size),
                              ("lane_start", np.arange(n_prog) * lanes + col), ("value_dtype", -1),
                              ("value_start", -1)):
            ops[column][idx] = value
        ops["shape"][idx, :len(shape)] = shape
        col += size
    return Launch.from_flat(kernel_name=name, source="", source_file="bench.py", source_line=1, grid=grid, args={},
                  tensors=tuple(tensors), files=("bench.py",), value_dtypes=(), ops=ops,
                  offsets=offsets.reshape(-1), mask=mask.reshape(-1), values=np.zeros(0, np.uint8),
                  recorded_programs=n_prog, outputs=("out",))


def t(name, shape):
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    return TensorInfo(name, "float32", tuple(shape), strides, 0, int(np.prod(shape)), 4)


def stream(lanes: int) -> Launch:
    block = 1024
    n_prog = lanes // (3 * block)
    n = n_prog * block - 100
    pid = np.arange(n_prog)
    off = pid[:, None] * block + np.arange(block)
    m = off < n
    rows = [("load", 0, (block,), off, m), ("load", 1, (block,), off, m), ("store", 2, (block,), off, m)]
    prog = np.stack([pid, 0 * pid, 0 * pid], axis=1)
    return build("stream", prog, rows, [t("x", (n,)), t("y", (n,)), t("out", (n,))], (n_prog, 1, 1))


def tiled(lanes: int) -> Launch:
    b, k_iters = 64, 4
    per_prog = (2 * k_iters + 1) * b * b
    n_prog = max(1, lanes // per_prog)
    side = int(np.ceil(np.sqrt(n_prog)))
    n_prog = side * side
    M = N = side * b
    K = k_iters * b
    pid = np.arange(n_prog)
    pm, pn = pid // side, pid % side
    r = np.arange(b)
    rows = []
    for k in range(k_iters):
        a = (pm[:, None, None] * b + r[None, :, None]) * K + k * b + r[None, None, :]
        bb = (k * b + r[None, :, None]) * N + pn[:, None, None] * b + r[None, None, :]
        rows += [("load", 0, (b, b), a, None), ("load", 1, (b, b), bb, None)]
    # out stored transposed: element (i, j) of the tile goes to out[(pn*b + j), (pm*b + i)]
    c = (pn[:, None, None] * b + r[None, None, :]) * M + pm[:, None, None] * b + r[None, :, None]
    rows.append(("store", 2, (b, b), c, None))
    prog = np.stack([pid, 0 * pid, 0 * pid], axis=1)
    return build("tiled", prog, rows, [t("a", (M, K)), t("b", (K, N)), t("out", (N, M))],
                 (n_prog, 1, 1))


def gather(lanes: int) -> Launch:
    block = 1024
    n_prog = lanes // (2 * block)
    rng = np.random.default_rng(0)
    table = 1 << 24
    pid = np.arange(n_prog)
    idx = rng.integers(0, table, (n_prog, block))
    out = pid[:, None] * block + np.arange(block)
    rows = [("load", 0, (block,), idx, None), ("store", 1, (block,), out, None)]
    prog = np.stack([pid, 0 * pid, 0 * pid], axis=1)
    return build("gather", prog, rows, [t("table", (table,)), t("out", (n_prog * block,))],
                 (n_prog, 1, 1))


def stages(lc: Launch) -> dict:
    """Time each stage of analyzer._analyze_launch separately."""
    from triton_trace.analysis import metrics
    from triton_trace.analysis.memory.cache import issue_order, simulate
    from triton_trace.analysis.memory.coalescing import coalesce
    from triton_trace.analysis.advice.roofline import flops
    times = {}

    def timed(name, fn, *args):
        t0 = time.perf_counter()
        out = fn(*args)
        times[name] = time.perf_counter() - t0
        return out
    ctx = timed("context", LaunchContext, lc, 0, Params().resolved())
    order = timed("issue order", issue_order, ctx)
    co = timed("coalescing", coalesce, ctx, order)
    timed("L2 simulation", simulate, ctx, co, order)
    timed("unique bytes", metrics.unique_elements, ctx)
    timed("flops", flops, ctx)
    for check in A.CHECKS:
        timed(check.__name__, check, ctx)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lanes", type=int, default=10_000_000)
    ap.add_argument("--only", choices=("stream", "tiled", "gather"))
    args = ap.parse_args()
    for name, make in (("stream", stream), ("tiled", tiled), ("gather", gather)):
        if args.only and name != args.only:
            continue
        lc = make(args.lanes)
        print(f"{name}: {len(lc.offsets):,} lanes, {lc.num_ops:,} op rows, {lc.recorded_programs:,} programs")
        for stage, s in stages(lc).items():
            print(f"    {stage:<22}{s:7.2f} s")
        t0 = time.perf_counter()
        report = analyze(lc)
        total = time.perf_counter() - t0
        m = report.to_dict()["launches"][0]["metrics"]
        print(f"    {'analyze() total':<22}{total:7.2f} s   sectors={m['sectors']:,} "
              f"efficiency={m['sector_efficiency']} dram={m['dram_bytes_predicted']:,} B "
              f"findings={sum(report.finding_counts.values())}")


if __name__ == "__main__":
    main()
