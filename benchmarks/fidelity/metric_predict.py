"""The predicted half of a metric case: trace it through the interpreter on the CPU, then analyse it.

``predict_case`` runs in a worker process (tracing is CPU-bound and the cases are independent): it traces
the case, then waits until the measurement has fixed the programs resident at once (the compiled kernel's
occupancy times the SMs) and analyses with that and the device's L2 size, the facts a user of the tool
knows about the GPU the kernel runs on.
"""
from __future__ import annotations

import os
import re
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for p in (ROOT, os.path.join(ROOT, "tests"), os.path.dirname(os.path.abspath(__file__))):
    if p not in sys.path:
        sys.path.insert(0, p)

METRICS = ("load_sectors", "store_sectors", "load_requests", "store_requests", "load_bytes", "store_bytes",
           "dram_read_bytes", "dram_write_bytes", "dram_write_bytes_evicted", "dram_bytes_predicted")


def _capture_cache_results(sink: list) -> None:
    """The analyzer's L2 lookup counts are not in the report schema yet: keep its CacheResult too."""
    from triton_trace.analysis import analyzer
    original = analyzer.simulate

    def simulate(*args, **kwargs):
        result = original(*args, **kwargs)
        sink.append(result)
        return result
    analyzer.simulate = simulate


def predict_case(name: str, l2_bytes, box, ready, wait_s: float) -> dict:
    import torch
    torch.set_num_threads(2)
    import triton_trace
    from metric_cases import CASES
    case = CASES[name]
    launch = case.launcher("cpu")
    kernel = triton_trace.trace(case.factory(), values=False)
    triton_trace.reset()
    t0 = time.perf_counter()
    launch(kernel)
    t1 = time.perf_counter()
    tr = triton_trace.current_trace()
    ready.wait(wait_s)
    pif = box.get(name)
    kw = {"gpu": "H200", "num_warps": case.num_warps, "l2_bytes": l2_bytes, "programs_in_flight": pif}
    sink: list = []
    _capture_cache_results(sink)
    t2 = time.perf_counter()
    report = triton_trace.analyze(tr, **kw)
    t3 = time.perf_counter()
    m = report.to_dict()["launches"][0]["metrics"]
    out = {k: m[k] for k in METRICS}
    out["compiled"] = report.to_dict()["launches"][0].get("compiled")
    # the same counts from the offsets model alone, to show what the compiler's layouts change
    mm = triton_trace.analyze(tr, **kw, layouts="model").to_dict()["launches"][0]["metrics"]
    out["model_only"] = {k: mm[k] for k in ("load_sectors", "store_sectors", "load_requests", "store_requests")}
    if not sink:          # the analyzer no longer calls cache.simulate by that name: run it here
        from triton_trace.analysis.memory.cache import issue_order, simulate
        from triton_trace.analysis.memory.coalescing import coalesce
        from triton_trace.analysis.context import LaunchContext, Params
        ctx = LaunchContext(tr.launches[0], 0, Params(**kw).resolved())
        order = issue_order(ctx)
        sink.append(simulate(ctx, coalesce(ctx, order), order))
    launch_report = report.to_dict()["launches"][0]
    out["copies"] = (copy_counts(tr.launches[0], launch_report["ops"], kw["gpu"], case.num_warps)
                     if (launch_report.get("compiled") or {}).get("layouts") == "compiler" else None)
    cache = sink[0]
    params = report.to_dict()["params"]
    out.update(l2_read_lookups=cache.read_lookups, l2_read_hits=cache.read_hits,
               l2_write_lookups=cache.write_lookups, l2_write_hits=cache.write_hits,
               l2_hit_rate_pct=round(cache.hit_rate, 2), l1_hit_sectors=getattr(cache, "l1_hit_sectors", None), trace_s=round(t1 - t0, 1), analyze_s=round(t3 - t2, 1),
               waited_s=round(t2 - t1, 1), programs=int(tr.launches[0].num_programs),
               params={k: params[k] for k in ("l2_bytes", "l2_ways", "programs_in_flight", "num_warps")})
    return out


_CP_ASYNC = re.compile(r"\bcp\.async\.(c[ag])\.shared\.global\b")


def copy_counts(launch, ops: list, gpu: str, num_warps: int) -> dict:
    """The predicted cp.async (LDGSTS) traffic split as ncu splits it, by the PTX cache operator: {"ca" (through
    L1: ``l1tex__t_*_op_ldgsts_cache_access``), "cg" (bypassing it: ``_cache_bypass``): {"requests" (warp
    instructions with a live lane), "sectors", "issued" (every warp instruction the pipelined loop issues)}}.
    ``l1tex__t_*_op_ld`` already counts all of these: the split is a subset of the load rows, not an addition.

    A pipelined loop issues its copies for trips it never runs (the prologue's num_stages - 1 copies before the
    loop, the in-loop copy of a later trip masked off on the last trips, as zero-fill copies of all lanes):
    ncu's cache_access requests counted them (matmul_1000_64x64x32_fp32_w4: 34 copies of 32 trips)."""
    from triton_trace.analysis.gpus import GPUS
    from triton_trace.analysis.memory.layouts import request_order
    from triton_trace.compiled import compile_launch
    compiled = compile_launch(launch, GPUS[gpu].arch, options={"num_warps": num_warps})
    cache_ops: dict = {}
    for text, loc in zip(compiled.ir["ptx"].splitlines(), compiled.lines["ptx"]):
        m = _CP_ASYNC.search(text)
        if m and loc is not None:
            cache_ops.setdefault(loc, set()).add(m.group(1))
    extra = {(ld["file"], ld["line"]): ld["prologue"] + ld["epilogue"] for p in compiled.pipelines for ld in p["loads"]}
    out = {c: {"requests": 0, "sectors": 0, "issued": 0} for c in ("ca", "cg")}
    for op in ops:
        if op["kind"] != "load" or not str(op.get("compiled_as") or "").startswith("cp.async"):
            continue
        loc = (op["file"], op["line"])
        kinds = cache_ops.get(loc, set())
        copies = [o for o in compiled.ops if (o["file"], o["line"]) == loc and o["instruction"] == "cp.async"]
        if len(kinds) != 1 or not copies or any((o["layout"], o["vector_bytes"]) != (copies[0]["layout"],
                                                 copies[0]["vector_bytes"]) for o in copies):
            continue            # copies of two kinds on one source line: which is which is not told here
        c, copy = next(iter(kinds)), copies[0]
        elem = max(int(re.sub(r"\D", "", copy["element"]) or 8) // 8, 1)       # "f32" -> 4, "bf16" -> 2
        issue = request_order(copy["layout"], tuple(copy["shape"]), num_warps, max(copy["vector_bytes"] // elem, 1),
                              write=False)
        per_execution = issue.shape[0] * issue.shape[1] if issue is not None else 0
        out[c]["requests"] += int(op["requests"])
        out[c]["sectors"] += int(op["sectors"])
        out[c]["issued"] += per_execution * (int(op["rows"]) + int(op["programs"]) * extra.get(loc, 0))
    return out
