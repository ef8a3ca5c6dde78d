"""Nsight Compute's own advice beside triton_trace's hints, on the same kernels and data.

ncu profiles one launch of each case (metric_cases.py) with its memory, source-counter and occupancy
sections and prints the rule results ("OPT" / "WRN" lines: uncoalesced accesses, excessive sectors, L2
behaviour, occupancy limits); the same case is traced on the CPU and analysed with the what-if replays
on (``analyze(gpu="H200", what_if=True)``). Both go to OUT/ncu_rules.md, case by case, and OUT/ncu_rules.json.

    PYTHONPATH=. python3 benchmarks/fidelity/ncu_rules.py --out OUT
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for p in (ROOT, os.path.join(ROOT, "tests"), HERE):
    if p not in sys.path:
        sys.path.insert(0, p)

CASES_USED = ["stride2_4M", "gather_4M", "softmax_16k_x_1000", "transpose_4k", "matmul_big_g1", "matmul_2k_g8",
              "matmul_1k_128x128x32_fp32_w4"]
SECTIONS = ["MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables", "SourceCounters", "Occupancy", "LaunchStats"]
_HEAD = re.compile(r"^\s{2}(\w+)\s+\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)")
_RULE = re.compile(r"^\s+(OPT|WRN)\s+(.*)$")


def ncu_rules(names: list, kernels: list, workdir: str) -> list:
    """Per profiled launch, in order: {"kernel", "rules": [text]} from ncu's text report."""
    cmd = ["ncu", "--clock-control", "none"] + [a for s in SECTIONS for a in ("--section", s)] + [
        "--kernel-name", "regex:^(" + "|".join(map(re.escape, sorted(set(kernels)))) + ")$",
        sys.executable, os.path.join(HERE, "metric_measure.py"), "--child", ",".join(names),
        "--meta", os.path.join(workdir, "meta.json")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, cwd=ROOT)
    out, cur, rule = [], None, None
    for line in r.stdout.splitlines():
        h = _HEAD.match(line)
        if h:
            cur = {"kernel": h.group(1), "rules": []}
            out.append(cur)
            rule = None
            continue
        m = _RULE.match(line)
        if m and cur is not None:
            rule = f"{m.group(1)}: {m.group(2).strip()}"
            cur["rules"].append(rule)
        elif rule is not None and cur is not None and line.startswith(" " * 10) and line.strip() and \
                not line.strip().startswith(("-", "Section:", "Metric")):
            cur["rules"][-1] += " " + line.strip()
        else:
            rule = None
    if not out:
        raise RuntimeError(f"ncu printed no kernels (rc {r.returncode}): {r.stdout[-2000:]} {r.stderr[-2000:]}")
    return out


def hints_of(name: str, l2_bytes: int) -> list:
    import triton_trace
    from metric_cases import CASES
    case = CASES[name]
    launch = case.launcher("cpu")
    triton_trace.reset()
    launch(triton_trace.trace(case.factory(), values=False))
    rep = triton_trace.analyze(triton_trace.current_trace(), gpu="H200", num_warps=case.num_warps, l2_bytes=l2_bytes,
                               what_if=True).to_dict()["launches"][0]
    return [{"kind": h["kind"], "line": h["line"], "message": h["message"], "effect": h["effect"]}
            for h in rep["hints"]] + [{"kind": "note", "line": None, "message": n, "effect": ""}
                                      for n in rep["checks_skipped"]]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    import torch
    from metric_cases import CASES
    os.makedirs(args.out, exist_ok=True)
    l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    with tempfile.TemporaryDirectory() as d:
        profiled = ncu_rules(CASES_USED, [CASES[n].kernel for n in CASES_USED], d)
    rows = []
    for name, prof in zip(CASES_USED, profiled):
        rows.append({"case": name, "what": CASES[name].what, "ncu": prof["rules"], "triton_trace": hints_of(name, l2)})
    with open(os.path.join(args.out, "ncu_rules.json"), "w") as f:
        json.dump(rows, f, indent=1)
    md = ["# Nsight Compute's rules and triton_trace's hints, same kernels and data (H200)", ""]
    for r in rows:
        md += [f"## {r['case']}: {r['what']}", "", "Nsight Compute:", ""]
        md += [f"- {t}" for t in r["ncu"]] or ["- (no OPT / WRN rule fired)"]
        md += ["", "triton_trace (`analyze(gpu='H200', what_if=True)`):", ""]
        md += [f"- [{h['kind']}] {h['message']}" + (f" ({h['effect']})" if h["effect"] else "")
               for h in r["triton_trace"]] or ["- (no hint)"]
        md.append("")
    with open(os.path.join(args.out, "ncu_rules.md"), "w") as f:
        f.write("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
