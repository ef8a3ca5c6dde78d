"""Re-run the predicted half of a fidelity counters run on this machine (no GPU) and set it beside the ncu
numbers that run measured: requests and sectors of global loads and stores, and the cp.async (LDGSTS) split.

    python benchmarks/fidelity/counters_recheck.py benchmarks/fidelity/gpu_2026-12-07c/counters/results.json
    python benchmarks/fidelity/counters_recheck.py RESULTS --cases matmul_1000_64x64x32_fp32_w4

What "measured" is here: ``l1tex__t_{requests,sectors}_pipe_lsu_mem_global_op_ld`` alone. On an H100 and an
H200 (ncu 2025.3) it already counts every LDGSTS copy: in every cp.async case the SASS moved no LDG bytes
(``sm__sass_data_bytes_mem_global_op_ld`` = 0) and op_ld still counts the whole tile traffic. The
``_op_ldgsts_cache_access`` / ``_cache_bypass`` metrics split the same copies by L1 use; fidelity_table.py adds
them to op_ld, which counts the 4-byte ``cp.async.ca`` copies twice (matmul_1000_64x64x32_fp32_w4, the only
case with such copies: 4,000,000 + 4,000,000 sectors). The split is checked on its own rows here: the predicted
``.ca`` copies' sectors against ``_cache_access`` sectors, and the copies the pipelined loop issues (masked-off
zero-fill copies included) against ``_cache_access`` requests.

Programs in flight and the L2 size are the ones the run used (its results.json), so the analysis sees what it saw.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import metric_predict  # noqa: E402

OP_LD = "l1tex__t_{}_pipe_lsu_mem_global_op_ld.sum"
ROWS = [  # quantity, predicted (a key of predict_case's answer, or a path into it), measured metric
    ("load requests", ("load_requests",), OP_LD.format("requests")),
    ("load sectors", ("load_sectors",), OP_LD.format("sectors")),
    ("store requests", ("store_requests",), "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
    ("store sectors", ("store_sectors",), "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
    ("cp.async.ca sectors", ("copies", "ca", "sectors"), "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum"),
    ("cp.async.ca requests issued", ("copies", "ca", "issued"),
     "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts_cache_access.sum"),
    # (ncu 2025.3 on an H100 and an H200 does not know the bypass metrics: these rows show where it does)
    ("cp.async.cg sectors", ("copies", "cg", "sectors"), "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum"),
    ("cp.async.cg requests issued", ("copies", "cg", "issued"),
     "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum"),
]
SUMMED = ("l1tex__t_{}_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum",
          "l1tex__t_{}_pipe_lsu_mem_global_op_ldgsts_cache_access.sum")


def _get(d: dict, path: tuple):
    for k in path:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def predict(name: str, run: dict) -> dict:
    """predict_case as fidelity.py calls it, with the programs in flight and L2 size the run used."""
    params = run["metrics"][name]["predicted"].get("params", {})
    ready = threading.Event()
    ready.set()
    return metric_predict.predict_case(name, params.get("l2_bytes"), {name: params.get("programs_in_flight")}, ready, 0)


def table(results: dict, predicted: dict) -> tuple:
    """(markdown lines, cases whose rows differ)."""
    lines = ["| case | quantity | predicted | measured (ncu) | fidelity_table.py's sum | equal |",
             "| --- | --- | ---: | ---: | ---: | --- |"]
    bad = []
    for name, pred in predicted.items():
        meas = results["metrics"][name]["measured"]
        for quantity, path, metric in ROWS:
            p, m = _get(pred, path), meas.get(metric)
            if m is None:
                continue
            summed = ""
            if metric.startswith(OP_LD.split("{}")[0]) and quantity.startswith("load"):
                unit = quantity.split()[1]
                summed = f"{int(m + sum(meas.get(s.format(unit)) or 0 for s in SUMMED)):,}"
            ok = p is not None and int(p) == int(m)
            bad += [] if ok else [name]
            lines.append(f"| {name} | {quantity} | {'n/a' if p is None else f'{int(p):,}'} | {int(m):,} | {summed} | "
                         f"{'yes' if ok else '**no**'} |")
    return lines, sorted(set(bad))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", help="a fidelity run's results.json (its counters measured by ncu)")
    ap.add_argument("--cases", help="comma-separated case names (default: every case of the run)")
    a = ap.parse_args(argv)
    with open(a.results, encoding="utf-8") as f:
        results = json.load(f)
    names = a.cases.split(",") if a.cases else list(results["metrics"])
    predicted = {}
    for name in names:
        predicted[name] = predict(name, results)
        print(f"predicted {name}", file=sys.stderr, flush=True)
    lines, bad = table(results, predicted)
    print("\n".join(lines))
    print(f"\n{len(names) - len(bad)} of {len(names)} cases equal on every row" + (f"; differ: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
