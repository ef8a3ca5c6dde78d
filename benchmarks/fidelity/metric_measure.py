"""Measure the metric cases with Nsight Compute: one ncu process profiles every case, one launch each.

ncu runs this file with ``--child``: the child compiles every kernel first (``warmup=True``, no launch),
then launches each case once; ncu profiles only kernels whose names are the cases' (so the fills and
copies torch does around them are not profiled), with ``--clock-control none`` and its default cache
control (L2 flushed before every replay pass: each measured launch starts from a cold L2, as the model
assumes). The child writes each compiled kernel's registers, spills and shared memory to a JSON file.
"""
from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
for p in (ROOT, os.path.join(ROOT, "tests"), os.path.dirname(os.path.abspath(__file__))):
    if p not in sys.path:
        sys.path.insert(0, p)

# What the comparison needs, then what explains a gap (L1 hits, L2 lookups by kind, partition crossing,
# requested bytes, occupancy). Names ncu does not know on this GPU are dropped before the run.
CORE_METRICS = [
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sector_hit_rate.pct",
]
EXTRA_METRICS = [
    "sm__sass_data_bytes_mem_global_op_ld.sum",
    "sm__sass_data_bytes_mem_global_op_st.sum",
    "sm__sass_data_bytes_mem_global_op_ldgsts.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts_cache_access.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts_cache_bypass.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts_cache_access.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum",
    "lts__t_sectors.sum",
    "lts__t_sectors_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
    "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
    "lts__t_sectors_srcunit_tex_op_write.sum",
    "lts__t_sectors_srcunit_tex_op_write_lookup_hit.sum",
    "lts__t_sectors_srcunit_ltcfabric.sum",
    "lts__t_sectors_srcunit_ltcfabric_lookup_hit.sum",
    "lts__t_sector_op_read_hit_rate.pct",
    "lts__t_sector_op_write_hit_rate.pct",
    "dram__sectors_read.sum",
    "dram__sectors_write.sum",
    "gpu__time_duration.sum",
    "launch__occupancy_limit_blocks",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__registers_per_thread",
    "launch__waves_per_multiprocessor",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
]
# Hopper's L2 request coalescer (the lrc unit) merges read requests of several SMs for one sector before the
# L2 looks them up: every counter of it that ncu knows here is collected (names differ between ncu releases)
PREFIXES = ("lrc__request_sectors_op_read", "lrc__lts2lrc_sectors_op_read", "lrc__lrc2xbar_sectors_op_read",
            "lrc__xbar2gpc_sectors_op_read", "lrc__xbar2lrc_requests_op_read")
MAX_PREFIXED = 16


class _Compile:
    """Stands in for a kernel in a launcher: ``k[grid](...)`` compiles for those arguments, launching nothing."""

    def __init__(self, kernel):
        self.kernel, self.compiled = kernel, None

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            self.compiled = self.kernel.run(*args, grid=grid, warmup=True, **kwargs)
        return run


def child(names: list, meta_path: str) -> None:
    import torch
    from metric_cases import CASES
    meta = {}
    for name in names:
        case = CASES[name]
        kernel = case.factory()
        launch = case.launcher("cuda")
        probe = _Compile(kernel)
        launch(probe)
        torch.cuda.synchronize()
        launch(kernel)                      # the profiled launch
        torch.cuda.synchronize()
        c, md = probe.compiled, getattr(probe.compiled, "metadata", None)
        meta[name] = {"n_regs": getattr(c, "n_regs", None), "n_spills": getattr(c, "n_spills", None),
                      "shared": getattr(md, "shared", None), "num_warps": getattr(md, "num_warps", None),
                      "num_stages": getattr(md, "num_stages", None)}
        del launch
        torch.cuda.empty_cache()
    with open(meta_path, "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)


def available(metrics: list) -> tuple:
    """(metrics ncu knows on this GPU, dropped ones). Keeps everything when the query gives nothing."""
    try:
        r = subprocess.run(["ncu", "--query-metrics"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return metrics, []
    known = {ln.split()[0] for ln in r.stdout.splitlines() if ln.strip() and "__" in ln.split()[0]}
    if not known:
        return metrics, []
    # launch__* are launch statistics, not counters: the query does not list them
    keep = [m for m in metrics if m.split(".")[0] in known or m.startswith("launch__")]
    keep += [b + ".sum" for b in sorted(known) if b.startswith(PREFIXES) and "programmatic" not in b][:MAX_PREFIXED]
    return keep, [m for m in metrics if m not in keep]


def _parse(stdout: str) -> list:
    """Per profiled launch, in launch order: {"kernel": name, metric: value}."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if not rows:
        return []
    header = rows[0]
    by_id: dict = {}
    for row in rows[1:]:
        rec = dict(zip(header, row))
        if "Metric Name" not in rec or "ID" not in rec:
            continue
        entry = by_id.setdefault(int(rec["ID"]), {"kernel": rec.get("Kernel Name", "")})
        text = rec.get("Metric Value", "").replace(",", "")
        try:
            entry[rec["Metric Name"]] = float(text)
        except ValueError:
            entry[rec["Metric Name"]] = text
    return [by_id[i] for i in sorted(by_id)]


def measure(cases: list, workdir: str, log=print, timeout_s: float = 300) -> dict:
    """Profile ``cases`` (metric_cases.Case) in one ncu run. Returns {"cases": {name: metrics}, ...}."""
    metrics, dropped = available(CORE_METRICS + EXTRA_METRICS)
    kernels = sorted({c.kernel for c in cases})
    meta_path = os.path.join(workdir, "compiled.json")
    result = {"metrics": metrics, "dropped_metrics": dropped, "cases": {}, "compiled": {}}
    attempts = (metrics, [m for m in metrics if not m.startswith("launch__")],
                [m for m in CORE_METRICS if m in metrics] or CORE_METRICS)
    for attempt in attempts:
        cmd = ["ncu", "--clock-control", "none", "--print-units", "base", "--csv",
               "--kernel-name", "regex:^(" + "|".join(map(re.escape, kernels)) + ")$",
               "--metrics", ",".join(attempt), sys.executable, os.path.abspath(__file__),
               "--child", ",".join(c.name for c in cases), "--meta", meta_path]
        result["command"] = " ".join(cmd)
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT)
        except subprocess.TimeoutExpired:
            result["error"] = f"ncu did not finish in {timeout_s} s"
            log(result["error"])
            break
        launches = _parse(r.stdout)
        if len(launches) == len(cases):
            result["metrics"] = attempt
            result.pop("error", None)
            for case, m in zip(cases, launches):
                if m["kernel"] != case.kernel:
                    m["error"] = f"profiled kernel {m['kernel']!r}, expected {case.kernel!r}"
                result["cases"][case.name] = m
            break
        result.setdefault("attempt_errors", []).append(f"{len(attempt)} metrics: rc {r.returncode}")
        result["error"] = (f"ncu returned {len(launches)} launches for {len(cases)} cases (rc {r.returncode}): "
                           + (r.stdout[-1500:] + r.stderr[-1500:]))
        log(result["error"])
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            result["compiled"] = json.load(f)
    return result


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="The process Nsight Compute profiles (see the module docstring).")
    ap.add_argument("--child", required=True, help="comma-separated case names")
    ap.add_argument("--meta", required=True, help="where to write the compiled kernels' resources")
    a = ap.parse_args()
    child(a.child.split(","), a.meta)
