"""The predicted half of a metric case: trace it through the interpreter on the CPU, then analyse it.

``predict_case`` runs in a worker process (tracing is CPU-bound and the cases are independent): it traces
the case, then waits until the measurement has fixed the programs resident at once (the compiled kernel's
occupancy times the SMs) and analyses with that and the device's L2 size, the facts a user of the tool
knows about the GPU the kernel runs on.
"""
from __future__ import annotations

import os
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
    cache = sink[0]
    params = report.to_dict()["params"]
    out.update(l2_read_lookups=cache.read_lookups, l2_read_hits=cache.read_hits,
               l2_write_lookups=cache.write_lookups, l2_write_hits=cache.write_hits,
               l2_hit_rate_pct=round(cache.hit_rate, 2), l1_hit_sectors=getattr(cache, "l1_hit_sectors", None), trace_s=round(t1 - t0, 1), analyze_s=round(t3 - t2, 1),
               waited_s=round(t2 - t1, 1), programs=int(tr.launches[0].num_programs),
               params={k: params[k] for k in ("l2_bytes", "l2_ways", "programs_in_flight", "num_warps")})
    return out
