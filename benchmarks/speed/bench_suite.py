"""The benchmark suite: every case under Triton's plain interpreter, traced, and traced plus analysed.

    python benchmarks/speed/bench_suite.py [--quick] [--repeat 3] [--cases add_1m,softmax]
                                           [--trace-opt batch=False] [--json out.json]
    python benchmarks/speed/bench_suite.py --micro      # the lane compaction alone, per block
    python benchmarks/speed/bench_suite.py --budget 64MB  # the 16M vector add under a memory budget

Each (case, mode) runs in a fresh child process, so its peak memory is its own: ``plain`` sets
``TRITON_INTERPRET=1`` before Triton is imported and runs the bare kernels, as a user would; ``traced``
runs them under ``triton_trace.trace(**trace_opts)``; ``analysed`` traces and then runs
``triton_trace.analyze`` on the trace; ``torch`` does the same math with torch on the CPU (the reference
the performance targets are stated against: traced / torch, (traced + analysis) / torch); ``numpy`` does it
with numpy, as Triton's interpreter computes (the floor of anything that runs the kernel the interpreter's way). Times are
medians over ``--repeat`` runs (torch's over at least 21: its time alone moves 3x between children); ratios compare the modes of one run of this script, measured one after the
other on the same machine, so they are what to read
(absolute times depend on the machine's load). Peak memory is the child's high-water RSS above its RSS
once the inputs exist. Trace sizes count bytes per recorded lane: the compact lanes in memory
(``Lanes.nbytes``), the lane arrays in the saved file, and the whole file (values included).

``--quick`` shrinks every case (the plain interpreter needs minutes for a 1024^3 matmul). Not part of the
test run: nothing here asserts a time.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

if __name__ == "__main__" and "--child" in sys.argv and sys.argv[sys.argv.index("--child") + 1] == "plain":
    os.environ["TRITON_INTERPRET"] = "1"       # before triton is imported, as a user would set it

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))        # the test kernels

MODES = ("plain", "traced", "analysed", "torch", "numpy")


# ------------------------------------------------------------------------------------------------------
# cases: name -> (description, setup(quick) -> run(wrap)); ``wrap`` turns a fresh @triton.jit kernel into
# the kernel to launch (itself for plain, trace(...) of it otherwise)
# ------------------------------------------------------------------------------------------------------
def _add(n_full, n_quick):
    def setup(quick):
        import torch
        import kernels as K
        n = n_quick if quick else n_full
        x, y = torch.randn(n), torch.randn(n)

        def make(wrap):
            k = wrap(K.make_add())
            return lambda: K.add(x, y, kernel=k, block=1024)
        xn, yn = x.numpy(), y.numpy()
        return n, make, lambda: x + y, lambda: xn + yn
    return setup


def _softmax(quick):
    import numpy as np
    import torch
    import kernels as K
    s = torch.randn(1024 if quick else 4096, 1024)

    def make(wrap):
        k = wrap(K.make_softmax())
        return lambda: K.softmax(s, kernel=k)
    sn = s.numpy()

    def with_numpy():
        e = np.exp(sn - sn.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return list(s.shape), make, lambda: torch.softmax(s, dim=1), with_numpy


def _ln_fwd(quick):
    import numpy as np
    import torch
    import kernels as K
    M, N = (1024 if quick else 4096), 1024
    x, w, b = torch.randn(M, N), torch.randn(N), torch.randn(N)

    def make(wrap):
        k = wrap(K.make_layer_norm_fwd())
        return lambda: K.layer_norm_fwd(x, w, b, kernel=k, block=1024)
    xn, wn, bn = x.numpy(), w.numpy(), b.numpy()

    def with_numpy():
        xc = xn - xn.mean(axis=1, keepdims=True)
        return xc / np.sqrt((xc * xc).mean(axis=1, keepdims=True) + 1e-5) * wn + bn
    return [M, N], make, lambda: torch.nn.functional.layer_norm(x, (N,), w, b, 1e-5), with_numpy


def _ln_bwd(quick):
    import torch
    import kernels as K
    M, N = (1024 if quick else 4096), 1024
    x, w, dy = torch.randn(M, N), torch.randn(N), torch.randn(M, N)
    mean = x.mean(dim=1)
    rstd = 1 / torch.sqrt(x.var(dim=1, unbiased=False) + 1e-5)

    def make(wrap):
        dx_k, dwdb_k = wrap(K.make_layer_norm_bwd_dx()), wrap(K.make_layer_norm_bwd_dwdb())
        # the tutorial's sizes for N = 1024: 64 row groups for the partial sums, 32 x 128 reduction tiles
        return lambda: K.layer_norm_bwd(dy, x, w, mean, rstd, group_size_m=64, dx_kernel=dx_k,
                                        dwdb_kernel=dwdb_k, block_m=32, block_n=128)

    def eager():     # dx, dw, db of the same layer norm, by autograd
        xr, wr, br = (t.clone().requires_grad_() for t in (x, w, torch.zeros(N)))
        torch.nn.functional.layer_norm(xr, (N,), wr, br, 1e-5).backward(dy)
        return xr.grad, wr.grad, br.grad
    return [M, N], make, eager


def _matmul(full, quick_size, tiles, half=False):
    def setup(quick):
        import torch
        import kernels as K
        n = quick_size if quick else full
        a, b = torch.randn(n, n), torch.randn(n, n)
        bm, bn, bk = tiles
        # fp16 operands (fp32 accumulation); torch's CPU reference is the fp32 matmul of the same size
        ka, kb = (a.half(), b.half()) if half else (a, b)

        def make(wrap):
            k = wrap(K.make_matmul())
            return lambda: K.matmul(ka, kb, kernel=k, block_m=bm, block_n=bn, block_k=bk, group_m=8)
        a_np, b_np = a.numpy(), b.numpy()
        return [n, n, n], make, lambda: a @ b, lambda: a_np @ b_np
    return setup


def _transpose(quick):
    import numpy as np
    import torch
    import kernels as K
    x = torch.randn(*(2 * [2048 if quick else 4096]))

    def make(wrap):
        k = wrap(K.make_transpose())
        return lambda: K.transpose(x, kernel=k, block_m=64, block_n=64)
    xn = x.numpy()
    return list(x.shape), make, lambda: x.t().contiguous(), lambda: np.ascontiguousarray(xn.T)


CASES = {
    "add_1m": ("vector add, 1M elements (quick: 256K), BLOCK 1024", _add(1 << 20, 1 << 18)),
    "add_4m": ("vector add, 4M elements (quick: 1M), BLOCK 1024", _add(1 << 22, 1 << 20)),
    "softmax": ("fused softmax 4096x1024 (quick: 1024x1024)", _softmax),
    "ln_fwd": ("layer norm forward 4096x1024 (quick: 1024x1024)", _ln_fwd),
    "ln_bwd": ("layer norm backward (dx + dw/db) 4096x1024 (quick: 1024x1024)", _ln_bwd),
    "matmul_512": ("matmul 512^3, 32x32x32 tiles (quick: 256^3)", _matmul(512, 256, (32, 32, 32))),
    "matmul_1024": ("matmul 1024^3, 64x64x32 tiles (quick: 512^3)", _matmul(1024, 512, (64, 64, 32))),
    "transpose": ("transpose 4096x4096, 64x64 tiles (quick: 2048^2)", _transpose),
    "matmul_4096_fp16": ("matmul 4096^3 fp16, 128x128x64 tiles, GROUP_M=8 (quick: 1024^3; torch: fp32)",
                         _matmul(4096, 1024, (128, 128, 64), half=True)),
}


NO_PLAIN = {"matmul_4096_fp16"}      # full size: not run under the plain interpreter
TORCH_RUNS = 21                      # runs of the torch reference in its child (the median is taken)
SIZES_MAX_LANES = 1 << 28            # traces with more lanes are not saved and loaded for the size columns


# ------------------------------------------------------------------------------------------------------
# child: one case in one mode
# ------------------------------------------------------------------------------------------------------
def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trace_sizes(trace) -> dict:
    """Lanes recorded, and bytes of the lanes in memory, of the lane arrays on disk and of the file."""
    import triton_trace
    from triton_trace.store import tracefile as store
    lanes = sum(lc.lanes.size for lc in trace.launches)
    mem = sum(lc.lanes.nbytes for lc in trace.launches)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.ttrace")
        t0 = time.perf_counter()
        trace.save(path)
        save_s = time.perf_counter() - t0
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(20)
            header = json.loads(f.read(int.from_bytes(head[12:20], "little")))
        t0 = time.perf_counter()
        triton_trace.load(path)
        load_s = time.perf_counter() - t0
    disk_lanes = sum(d["nbytes"] for lc in header["launches"] for name, d in lc["arrays"].items()
                     if name.startswith("lanes.") or name in ("offsets", "mask"))
    return {"lanes": lanes, "mem_lane_bytes": mem, "disk_lane_bytes": disk_lanes, "file_bytes": size,
            "format_version": int.from_bytes(head[8:12], "little"), "save_s": save_s, "load_s": load_s,
            "ops": sum(lc.num_ops for lc in trace.launches), "store_version": store.VERSION}


def child(mode: str, case: str, repeat: int, quick: bool, trace_opts: dict) -> dict:
    import numpy as np
    import torch
    import triton
    torch.manual_seed(0)
    np.random.seed(0)
    size, make, eager, *with_numpy = CASES[case][1](quick)
    if mode == "torch":              # the same math by torch on the CPU: the reference for "how fast"
        run, reset = eager, (lambda: None)
    elif mode == "numpy":            # the same math by numpy, as Triton's interpreter computes (what tracing runs on)
        if not with_numpy:
            raise SystemExit(f"no numpy version of {case}")
        run, reset = with_numpy[0], (lambda: None)
    elif mode == "plain":
        run = make(lambda k: k)
        reset = lambda: None
    else:
        import triton_trace
        if mode == "analysed":      # imported before the clock starts, as triton_trace itself is
            import triton_trace.analysis.analyzer  # noqa: F401
        run = make(lambda k: triton_trace.trace(k, **trace_opts))
        reset = triton_trace.reset
    base_rss = _rss_bytes()
    times, analyse_times = [], []
    sizes = None
    # torch's own time moves 3x between children on this machine (page faults, the allocator's state): the
    # reference takes the median of at least TORCH_RUNS runs
    for i in range(max(repeat, TORCH_RUNS) if mode in ("torch", "numpy") else repeat):
        reset()
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
        if mode == "analysed":
            tr = triton_trace.current_trace()
            t0 = time.perf_counter()
            triton_trace.analyze(tr)
            analyse_times.append(time.perf_counter() - t0)
            del tr
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base_rss
    out = {"case": case, "mode": mode, "size": size, "times": times, "peak_bytes": peak,
           "base_rss": base_rss, "triton": triton.__version__}
    if mode not in ("plain", "torch", "numpy"):
        tr = triton_trace.current_trace()
        execution = [getattr(lc, "meta", {}).get("execution") for lc in tr.launches]
        out["execution"] = execution if any(execution) else None
        if mode == "traced":
            if sum(lc.lanes.size for lc in tr.launches) <= SIZES_MAX_LANES:
                sizes = _trace_sizes(tr)
                out.update(sizes)
            else:             # saving and loading it back would measure the disk, not the tracer
                out.update(lanes=sum(lc.lanes.size for lc in tr.launches),
                           mem_lane_bytes=sum(lc.lanes.nbytes for lc in tr.launches))
        else:
            out["analyse_times"] = analyse_times
            out["lanes"] = sum(lc.lanes.size for lc in tr.launches)
    return out


# ------------------------------------------------------------------------------------------------------
# --micro: the cost of compacting lanes, per block, without Triton
# ------------------------------------------------------------------------------------------------------
def micro(repeat: int) -> str:
    """LaneWriter.add() per block, bytes per lane, and decoding, for the blocks the cases record."""
    import timeit
    import numpy as np
    from triton_trace.model.lanes import LaneWriter
    rng = np.random.default_rng(0)
    n = 1024
    r32, c32 = np.arange(32)[:, None], np.arange(32)[None, :]
    r64, c64 = np.arange(64)[:, None], np.arange(64)[None, :]
    blocks = {   # name: (offsets (R, n), mask (R, n), block shape)
        "1-D contiguous, 1024 lanes": ((np.arange(n) + 7)[None], np.ones((1, n), bool), None),
        "1-D, prefix mask (1000 of 1024)": ((np.arange(n) + 7)[None], (np.arange(n) < 1000)[None], None),
        "tile 32x32 (matmul)": ((r32 * 512 + c32).reshape(1, -1), np.ones((1, n), bool), (32, 32)),
        "tile 64x64 transposed": ((r64 + c64 * 4096).reshape(1, -1), np.ones((1, 4096), bool), (64, 64)),
        "tile 64x64, ragged edge (bits)": ((r64 * 4096 + c64).reshape(1, -1),
                                           np.broadcast_to(c64 < 40, (64, 64)).reshape(1, -1), (64, 64)),
        "gather, 1024 random offsets": (rng.integers(0, 1 << 24, (1, n)), np.ones((1, n), bool), None),
        "scalar": (np.array([[5]]), np.ones((1, 1), bool), ()),
        "batch of 256 programs x 1024": (np.arange(256)[:, None] * n + np.arange(n), np.ones((256, n), bool), None),
        "batch of 64 programs x 64x64 tile": (np.arange(64)[:, None] * 64 + (r64 * 4096 + c64).reshape(-1),
                                              np.ones((64, 4096), bool), (64, 64)),
    }
    lines = [f"{'block':36s} {'lanes':>7s} {'add us':>8s} {'ns/lane':>8s} {'B/lane':>7s} {'take us':>8s}"]
    for name, (o, m, shape) in blocks.items():
        w = LaneWriter()
        number = max(1, 20000 // o.size)
        t = min(timeit.repeat(lambda: w.add(o, m, shape), number=number, repeat=repeat)) / number
        lanes = w.finish()
        k = min(o.shape[1], lanes.size)
        take = min(timeit.repeat(lambda: lanes.take(lanes.size // 2, k), number=200, repeat=repeat)) / 200
        lines.append(f"{name:36s} {o.size:7d} {t * 1e6:8.1f} {t * 1e9 / o.size:8.2f} "
                     f"{lanes.nbytes / lanes.size:7.3f} {take * 1e6:8.1f}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------
# parent
# ------------------------------------------------------------------------------------------------------
def budget(limit: str) -> str:
    """The 16M-element vector add traced within a memory budget: time, what was recorded, peak memory."""
    import torch
    import kernels as K
    import triton_trace
    x, y = torch.randn(1 << 24), torch.randn(1 << 24)
    base = _rss_bytes()
    t0 = time.perf_counter()
    out = K.add(x, y, kernel=triton_trace.trace(memory_limit=limit)(K.make_add()), block=1024)
    took = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    lc = triton_trace.current_trace().launches[0]
    ex = lc.meta.get("execution") or {}
    return (f"16M vector add, trace(memory_limit={limit!r}): {took:.2f} s, output equals torch: "
            f"{bool(torch.equal(out, x + y))}; recorded programs {lc.recorded_programs} of {lc.num_programs}, "
            f"lanes {lc.lanes.size:,} ({lc.lanes.nbytes / 1e6:.2f} MB), values {lc.values.nbytes / 1e6:.1f} MB "
            f"(values truncated: {lc.values_truncated}, by the value cap or the limit); limit notes {ex.get('limit_notes') or []}; "
            f"peak RSS {peak / 1e6:.0f} MB above the inputs")


def parse_opt(text: str) -> tuple:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"--trace-opt takes key=value, got {text!r}")
    key, value = text.split("=", 1)
    try:
        return key.strip(), ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key.strip(), value            # a bare word: pass it as a string


def run_child(mode, case, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--cases", case, "--repeat", str(args.repeat)]
    if args.quick:
        cmd.append("--quick")
    for k, v in args.trace_opt:
        cmd += ["--trace-opt", f"{k}={v!r}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        return {"case": case, "mode": mode, "error": (r.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _med(xs):
    return statistics.median(xs) if xs else float("nan")


def summarise(results: dict) -> list:
    rows = []
    for case, by_mode in results.items():
        p, t, a, e, nu = (by_mode.get(m, {}) for m in MODES)
        plain, traced = _med(p.get("times", [])), _med(t.get("times", []))
        an_times = [x + y for x, y in zip(a.get("times", []), a.get("analyse_times", []))]
        analysed = _med(an_times)
        analyse_only = _med(a.get("analyse_times", []))
        lanes = t.get("lanes") or a.get("lanes") or 0
        per = lambda key: t[key] / lanes if lanes and key in t else float("nan")
        eager = _med(e.get("times", []))
        floor = _med(nu.get("times", []))
        rows.append({
            "case": case, "lanes": lanes, "plain_s": plain, "traced_s": traced, "traced_ratio": traced / plain,
            # the issue-20 reference: the same math by torch on this CPU, in the same process conditions
            "torch_s": eager, "traced_torch": traced / eager, "analysed_torch": (traced + analyse_only) / eager,
            "peak_mb_torch": e.get("peak_bytes", float("nan")) / 2 ** 20,
            # the same math by numpy: what an interpreter computing as Triton's does cannot go below
            "numpy_s": floor, "numpy_torch": floor / eager,
            # the analysis time is measured on its own in the analysed child: a difference of two
            # children's medians would carry both children's noise
            "analysed_s": analysed, "analyse_only_s": analyse_only, "analyse_ratio": analyse_only / plain,
            "peak_mb_plain": p.get("peak_bytes", float("nan")) / 2 ** 20,
            "peak_mb_traced": t.get("peak_bytes", float("nan")) / 2 ** 20,
            "peak_mb_analysed": a.get("peak_bytes", float("nan")) / 2 ** 20,
            "mem_b_per_lane": per("mem_lane_bytes"), "disk_lanes_b_per_lane": per("disk_lane_bytes"),
            "file_b_per_lane": per("file_bytes"), "save_s": t.get("save_s"), "load_s": t.get("load_s"),
            "errors": {m: by_mode[m]["error"] for m in MODES if "error" in by_mode.get(m, {})},
        })
    return rows


def table(rows: list) -> str:
    head = (f"{'case':16s} {'lanes':>10s} {'plain s':>8s} {'traced s':>9s} {'tr/plain':>8s} {'analysed s':>10s} "
            f"{'(an-tr)/pl':>10s} {'torch s':>8s} {'tr/torch':>8s} {'(tr+an)/torch':>13s} {'numpy s':>8s} "
            f"{'np/torch':>8s} {'peakMB pl':>9s} "
            f"{'peakMB tr':>9s} {'peakMB an':>9s} {'mem B/ln':>8s} {'disk B/ln':>9s} {'file B/ln':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['case']:16s} {r['lanes']:10d} {r['plain_s']:8.2f} {r['traced_s']:9.2f} "
                     f"{r['traced_ratio']:7.2f}x {r['analysed_s']:10.2f} {r['analyse_ratio']:9.2f}x "
                     f"{r['torch_s']:8.4f} {r['traced_torch']:7.1f}x {r['analysed_torch']:12.1f}x "
                     f"{r['numpy_s']:8.4f} {r['numpy_torch']:7.1f}x "
                     f"{r['peak_mb_plain']:9.0f} {r['peak_mb_traced']:9.0f} {r['peak_mb_analysed']:9.0f} "
                     f"{r['mem_b_per_lane']:8.3f} "
                     f"{r['disk_lanes_b_per_lane']:9.3f} {r['file_b_per_lane']:9.3f}")
        for m, e in r["errors"].items():
            lines.append(f"    {m} failed: {e}")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--repeat", type=int, default=3, help="runs per case and mode; the median is shown")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (minutes instead of tens of minutes)")
    ap.add_argument("--trace-opt", action="append", type=parse_opt, default=[], metavar="KEY=VALUE",
                    help="passed to triton_trace.trace(...), e.g. batch=False, values=False (repeatable)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of plain,traced,analysed,torch,numpy")
    ap.add_argument("--json", help="also write every measurement to this file")
    ap.add_argument("--micro", action="store_true", help="only time LaneWriter.add() on typical blocks")
    ap.add_argument("--budget", metavar="SIZE", help="only trace a 16M-element vector add (16384 programs of "
                    "1024) under trace(memory_limit=SIZE), e.g. 64MB, and report what was kept")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.micro:
        print(micro(max(args.repeat, 3)))
        return
    if args.budget:
        print(budget(args.budget))
        return
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    if args.child:
        print(json.dumps(child(args.child, cases[0], args.repeat, args.quick, dict(args.trace_opt))))
        return
    modes = [m for m in args.modes.split(",") if m]
    import torch
    import triton
    print(f"triton {triton.__version__}, torch {torch.__version__}, python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs; median of {args.repeat}; {'quick' if args.quick else 'full'} sizes; "
          f"trace options {dict(args.trace_opt) or '{}'}", flush=True)
    results = {}
    for case in cases:
        results[case] = {}
        for mode in modes:
            if mode == "plain" and case in NO_PLAIN and not args.quick:
                print(f"  {case:12s} plain     skipped (the plain interpreter would take hours)", file=sys.stderr)
                continue
            t0 = time.perf_counter()
            results[case][mode] = run_child(mode, case, args)
            print(f"  {case:12s} {mode:9s} {time.perf_counter() - t0:7.1f}s wall", file=sys.stderr, flush=True)
    rows = summarise(results)
    print(table(rows))
    print("lanes: recorded lanes (all launches); tr/plain: traced / plain time; analysed s: trace + analyze in "
          "one child; (an-tr)/pl: the analyze() time alone / plain time; numpy s: the same math by numpy (median of 21); peakMB: high-water RSS above the inputs (an: trace + analyze); mem B/ln: Lanes.nbytes per lane; disk B/ln: the lane "
          "arrays in the saved file per lane; file B/ln: the whole file (values included) per lane")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"options": {"repeat": args.repeat, "quick": args.quick,
                                   "trace_opts": {k: repr(v) for k, v in args.trace_opt}},
                       "rows": rows, "raw": results}, f, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main()
