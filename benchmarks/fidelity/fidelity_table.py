"""The tables fidelity.py writes (markdown), and the list of failures that make it exit non-zero."""
from __future__ import annotations

# quantity, predicted key(s), measured metric(s), kind of target, target
ROWS = [
    # l1tex__t_*_op_ld counts cp.async (LDGSTS) copies too, on an H100 and an H200 alike (ncu 2025.3: in every
    # cp.async case the SASS moved no LDG bytes and op_ld held the whole tile); the _op_ldgsts_cache_access /
    # _cache_bypass metrics split the same copies by L1 use, so adding them counted 4-byte cp.async.ca copies
    # twice (matmul_1000_64x64x32_fp32_w4: 8,000,000 "measured" sectors of 4,000,000). counters_recheck.py
    # checks the split on its own rows.
    ("load sectors", ("load_sectors",), ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",), "rel", 0.05),
    ("store sectors", ("store_sectors",), ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",), "rel", 0.05),
    ("load requests", ("load_requests",), ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",), "rel", 0.05),
    ("store requests", ("store_requests",), ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",), "rel", 0.05),
    ("requested bytes", ("load_bytes", "store_bytes"),
     ("sm__sass_data_bytes_mem_global_op_ld.sum", "sm__sass_data_bytes_mem_global_op_st.sum",
      "sm__sass_data_bytes_mem_global_op_ldgsts.sum"), "rel", 0.05),
    ("DRAM read bytes", ("dram_read_bytes",), ("dram__bytes_read.sum",), "rel", 0.15),
    ("DRAM write bytes", ("dram_write_bytes_evicted",), ("dram__bytes_write.sum",), "rel", 0.15),
    ("DRAM bytes, read + write", ("dram_read_bytes", "dram_write_bytes_evicted"),
     ("dram__bytes_read.sum", "dram__bytes_write.sum"), "rel", 0.15),
    ("L2 hit rate %", ("l2_hit_rate_pct",), ("lts__t_sector_hit_rate.pct",), "abs", 10.0),
]
# How the L2 model reached its numbers, beside the counters that show the same thing (not judged).
DETAIL = [
    ("L1 hit sectors", "l1_hit_sectors", ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum",)),
    ("L2 read lookups", "l2_read_lookups", ("lts__t_sectors_srcunit_tex_op_read.sum",)),
    ("L2 read hits", "l2_read_hits", ("lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",)),
    ("L2 write lookups", "l2_write_lookups", ("lts__t_sectors_srcunit_tex_op_write.sum",)),
    ("read sectors the L2 request coalescer merged", "", ("lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum",)),
    ("L2 hit rate % as ncu counts it (after the coalescer)", "l2_hit_rate_pct", ("lts__t_sector_hit_rate.pct",)),
    ("DRAM write bytes, eventually", "dram_write_bytes", ()),
]
DRAM_SLACK = 256 << 10     # bytes: below this a DRAM difference is counted as agreement (ncu's own noise)
# Hopper's L2 request coalescer (LRC) merges reads of one sector that several SMs send at about the same time
# before the L2 looks them up; lts__t_sector_hit_rate counts the lookups after it, so the sectors it merged
# (hits the L2 never saw: the model counts each as the hit it is for a coalescing-free L2) are added back to
# both the lookups and the hits. Where ncu does not know the counter (before Hopper) the rate is ncu's own.
LRC_MERGED = "lrc__request_sectors_op_read_coalescing_achieved_type_hardware.sum"


def l2_hit_rate_before_lrc(meas: dict):
    """ncu's L2 hit rate with the coalescer's merged read sectors counted as the hits they replace; None where
    the counters are missing."""
    merged, lookups = meas.get(LRC_MERGED), meas.get("lts__t_sectors.sum")
    hits = meas.get("lts__t_sectors_lookup_hit.sum")
    if not all(isinstance(v, (int, float)) for v in (merged, lookups, hits)) or lookups + merged <= 0:
        return None
    return 100.0 * (hits + merged) / (lookups + merged)


def _sum(d: dict, keys) -> object:
    vals = [d.get(k) for k in keys]
    nums = [v for v in vals if isinstance(v, (int, float))]
    return sum(nums) if nums else None


def _fmt(v) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, float) and not v.is_integer():
        return f"{v:,.2f}"
    return f"{int(v):,}"


def metric_rows(results: dict) -> list:
    rows = []
    for name, r in results.get("metrics", {}).items():
        pred, meas = r["predicted"], r["measured"]
        for quantity, pk, mk, kind, target in ROWS:
            p, m = _sum(pred, pk), _sum(meas, mk)
            if quantity == "L2 hit rate %" and l2_hit_rate_before_lrc(meas) is not None:
                quantity, m = "L2 hit rate % (before the request coalescer)", round(l2_hit_rate_before_lrc(meas), 2)
            if p is None or m is None:
                ok, ratio = None, None
            elif kind == "abs":
                ok, ratio = abs(p - m) <= target, None
            else:
                ratio = p / m if m else None
                slack = DRAM_SLACK if "DRAM" in quantity else 0
                ok = abs(p - m) <= max(target * m, slack)
            rows.append({"case": name, "quantity": quantity, "predicted": p, "measured": m, "ratio": ratio,
                         "target": f"±{target:g} points" if kind == "abs" else f"±{target:.0%}", "ok": ok})
    return rows


def _outputs_table(out: dict) -> list:
    lines = ["| kernel | spec | status | outputs (tolerance: worst |Δ| / bound, or relative errors) |",
             "| --- | --- | --- | --- |"]
    for r in out["results"]:
        parts = []
        for o in r.get("outputs", []):
            if o["tol"] == "dot":
                parts.append(f"dot: GPU {o['rel_err_gpu']:.1e}, trace {o['rel_err_trace']:.1e} vs float64")
            elif o["tol"] == "exact" or "worst_over_bound" not in o:
                parts.append("bit-exact" if not o["bad_elements"] else f"{o['bad_elements']} differ")
            else:
                parts.append(f"{o['tol']} {o['worst_over_bound']:.3f}")
            if o.get("unwritten_gpu") or o.get("unwritten_trace"):
                parts[-1] += f" (unwritten: GPU {o['unwritten_gpu']}, trace {o['unwritten_trace']})"
            for ex in o.get("examples", [])[:2]:
                parts[-1] += (f"; element {ex['index']}: GPU {ex['gpu']:g}, trace {ex['trace']:g}, stored by "
                              f"{ex.get('kernel')} program {ex.get('program')} {ex.get('op')} {ex.get('line')}")
        detail = "; ".join(parts) or r.get("reason") or r.get("error", "")
        lines.append(f"| `{r['kernel']}` | {r.get('spec') or ''} | {r['status']} | {detail} |")
    c = out["counts"]
    lines.append("")
    lines.append(f"{sum(c.values())} kernels: " + ", ".join(f"{v} {k}" for k, v in c.items()) + ".")
    for what, why in out.get("excluded", {}).items():
        lines.append(f"Not compared: `{what}`: {why}.")
    return lines


def markdown(results: dict) -> str:
    env = results["environment"]
    lines = [f"Date {env['date']}; {env['gpu']} ({env['sms']} SMs, L2 {env['l2_bytes']:,} bytes), driver "
             f"{', '.join(env['driver'])}, CUDA {env['cuda']}; torch {env['torch']}, Triton {env['triton']}, "
             f"numpy {env['numpy']}, Python {env['python']}; {env['ncu']}.", "",
             f"Command: `{env['command']}` ({results.get('seconds')} s).", ""]
    if "metrics" in results:
        lines += ["| case | quantity | predicted | measured (ncu) | predicted / measured | target | within |",
                  "| --- | --- | ---: | ---: | ---: | --- | --- |"]
        for r in metric_rows(results):
            ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
            ok = {True: "yes", False: "**no**", None: "n/a"}[r["ok"]]
            lines.append(f"| {r['case']} | {r['quantity']} | {_fmt(r['predicted'])} | {_fmt(r['measured'])} | "
                         f"{ratio} | {r['target']} | {ok} |")
        lines += ["", "How the model got there (L1 and L2 lookups in sectors; not judged):", "",
                  "| case | " + " | ".join(f"{q}: predicted / measured" for q, _, _ in DETAIL) + " |",
                  "| --- |" + " ---: |" * len(DETAIL)]
        for name, r in results["metrics"].items():
            cells = [f"{_fmt(r['predicted'].get(pk)) if pk else '-'} / {_fmt(_sum(r['measured'], mk)) if mk else '-'}"
                     for _, pk, mk in DETAIL]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "| case | what | programs in flight (occupancy) | regs | trace s | analyse s |",
                  "| --- | --- | ---: | ---: | ---: | ---: |"]
        for name, r in results["metrics"].items():
            p = r["predicted"]
            lines.append(f"| {name} | {r['what']} | {_fmt(p.get('params', {}).get('programs_in_flight'))} | "
                         f"{_fmt((r.get('compiled') or {}).get('n_regs'))} | {_fmt(p.get('trace_s'))} | "
                         f"{_fmt(p.get('analyze_s'))} |" + (f" error: {p['error']}" if "error" in p else ""))
        lines.append("")
    if "outputs" in results:
        lines += _outputs_table(results["outputs"]) + [""]
    cc = results.get("compile_check")
    if cc:
        lines += ["Tracing leaves compilation alone:"] + [f"- {k}: {'yes' if v else '**no**'}"
                                                      for k, v in cc["checks"].items()] + [""]
    return "\n".join(lines)


def failures(results: dict) -> list:
    bad = [f"{r['kernel']}: {r['status']} {r.get('error') or r.get('reason') or ''}".strip()
           for r in results.get("outputs", {}).get("results", []) if r["status"] in ("mismatch", "error", "uncovered")]
    cc = results.get("compile_check")
    if cc and not cc["ok"]:
        bad += [f"compile check: {k}" for k, v in cc["checks"].items() if not v]
    for name, r in results.get("metrics", {}).items():
        if "error" in r["predicted"] or not r["measured"] or "error" in r["measured"]:
            bad.append(f"metric case {name}: {r['predicted'].get('error') or r['measured'].get('error') or 'not measured'}")
    return bad
