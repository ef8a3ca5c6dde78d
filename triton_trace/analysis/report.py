"""The analysis report, and ``Report.to_dict()``: the JSON schema the CLI, the web UI and agents read.

Schema "triton_trace.analysis/1". Every key is always present; values are ints unless noted; null
where a value is undefined (a ratio over zero). Lists are in a fixed order and dict keys are sorted, so
``json.dumps(report.to_dict(), sort_keys=True)`` is byte-identical for the same trace (live or loaded).

    {
      "schema": "triton_trace.analysis/1",
      "params": {"gpu", "warp_size", "vector_bytes", "num_warps", "l2_bytes", "l2_ways",
                 "programs_in_flight", "max_findings", "max_examples", "max_programs",
                 "layouts": "compiler" | "model", "what_if": bool | null},
      "launches": [ one per Launch of the trace, in trace order:
        {"index", "kernel": str, "grid": [x, y, z], "recorded_programs", "skipped_programs",
         "completed": bool, "config": dict | null,
         "execution": {"batched_programs", "diverged_chunks", "memory_limit", "limit_notes": [str],
                       "fallbacks": [{"first", "programs", "reason"}]}   how the programs ran ({} for
                                        traces recorded before batched execution),
         "numerics": "interpreter" | "compiled"   how the trace computed (trace(numerics=...)),
         "inline_asm_approx": [str]      approximate PTX instructions (ex2.approx.f32, ...) its inline asm ran,
                                         computed correctly rounded (record/gpu/inlineasm.py),
         "checks_skipped": [str]        sanitizer checks and what-if replays not run, with the reason,
         "compiled": {"target": "sm_90" ..., "layouts": "compiler" | "model" (what counted requests and
                      sectors, see analysis/memory/layouts.py), "note": str | null (why not, or which ops kept the
                      inferred layout), "num_warps", "num_stages", "shared_bytes", "registers",
                      "spill_bytes" (local memory per thread), "occupancy": {"programs_per_sm",
                      "warps_per_sm", "occupancy" (float), "limited_by"}, "triton": str   (all null with
                      the "model" layouts)},
         "value_stats": bool            whether the ops' "values" were read (metrics.VALUE_STATS_BYTES),
         "metrics": {                   over the recorded programs; bytes and lanes count active lanes:
            "load_bytes", "store_bytes", "atomic_bytes", "load_lanes", "store_lanes", "atomic_lanes",
            "lanes" (all lanes of memory ops), "masked_lanes", "masked_share" (float), "oob_lanes",
            "memory_ops" (op rows), "requests" (warp-wide instructions), "sectors" (32 B),
            "load_sectors", "store_sectors", "atomic_sectors", "load_requests", "store_requests",
            "atomic_requests", "cache_lines" (128 B), "sectors_per_request" (float),
            "sector_efficiency", "load_sector_efficiency", "store_sector_efficiency",
            "atomic_sector_efficiency" (floats: bytes used / bytes in the sectors touched),
            "unique_load_bytes", "unique_store_bytes" (distinct elements x size),
            "dram_read_bytes", "dram_write_bytes", "dram_bytes_predicted" (the L2 simulation; every
            dirty sector counted as written back once), "dram_write_bytes_evicted" (the part written
            back while the kernel ran, evicted or cleaned by the dirty limit: what a per-kernel profiler
            counter such as ncu's dram__bytes_write sees, the rest staying dirty in L2 at the end),
            "l2_hit_rate" (float, percent of L2 sector lookups that hit, stores counting as hits, as ncu's
            lts__t_sector_hit_rate.pct), "l2_read_lookups", "l2_read_hits", "l2_write_lookups" (sectors),
            "l1_hit_sectors" (load sectors served by L1, which programs on one SM share),
            "flops", "dot_flops", "math_flops", "arithmetic_intensity" (float: flops / DRAM byte),
            "programs"},
         "roofline": {gpu key: {"name", "memory_s", "compute_s", "time_s" (floats, lower bounds),
                                "bound": "memory" | "compute", "ridge_intensity" (float), "dot_peak"}},
         "balance": {"programs", "programs_in_flight", "waves", "last_wave_fill" (float),
                     "bytes" | "flops" | "dram_bytes": {"median", "mean", "min", "max", "imbalance" (max/mean),
                        "heavy": {"count", "pids"}, "light": {"count", "pids"}}   (pids: first 16, > / <
                        the median by more than 10%)},
         "tensors": [{"name", "dtype", "shape", "strides", "is_output": bool, "load_elements", "load_bytes",
                      "store_elements", "store_bytes", "atomic_elements", "atomic_bytes",
                      "unique_load_elements", "unique_load_bytes", "unique_store_elements",
                      "unique_store_bytes", "load_reuse" (float), "sectors", "dram_read_bytes",
                      "dram_write_bytes"}]   in argument order,
         "programs": {"count", "truncated": bool, "pid": [[x, y, z], ...], and parallel lists:
                      "load_bytes", "store_bytes", "atomic_bytes", "load_sectors", "store_sectors",
                      "active_lanes", "masked_lanes", "sectors", "used_bytes", "requests",
                      "sector_efficiency" (float | null), "dram_bytes", "flops", "memory_ops", "findings"}
                     sorted by (x, y, z); cut after params.max_programs (Report.programs() has all),
         "ops": [one per static op (kind, tensor, file, line), sorted by (file, line, kind, tensor):
                 {"kind", "tensor", "file", "line", "rows" (executions), "programs", "findings", "lanes",
                  "active_lanes", "masked_lanes", "oob_lanes", "bytes", "requests", "sectors",
                  "cache_lines", "used_bytes", "dram_read_bytes", "dram_write_bytes", "flops",
                  "sectors_per_request", "sector_efficiency" (floats), "pattern": "scalar" |
                  "contiguous" | "strided" | "broadcast" | "gather" | null, "stride" (strided only),
                  "vector_width" (elements per thread), "fast_dim" (block dim lanes are ordered along),
                  "compiled_as": str | null (the compiled op's instruction, vector bytes and layout),
                  "values": {"min", "max", "mean" (of the finite values its active lanes loaded or
                  stored, null without any), "nan", "inf" (counts)} | null (no values recorded, or the
                  launch's "value_stats" is false: its values exceed metrics.VALUE_STATS_BYTES)}]
                 per-row arrays: Report.rows(launch),
         "hints": [advice, largest saving first (analysis/advice/hints.py, analysis/advice/whatif.py): {"kind":
                   "masked_lanes" | "uncoalesced" | "program_order" (another GROUP_M, replayed) | "other_gpu"
                   (the same stream through another GPU's L2, what_if=True) | "num_warps" (other warp counts compiled,
                   what_if=True) | "occupancy" | "spills" | "tail_wave"
                   (the compiled kernel's resources) | "int32_offsets" | "tf32_dot" (analysis/advice/predictions.py)
                   | "lowp_accumulation" (an fp16/bf16 sum stored more than 8 ulps from float64's,
                   analysis/advice/precision.py) | "precision_loss" (a stored value more than 8 ulps from the
                   float64 shadow: where precision is lost and whose rounding it is, analysis/advice/shadow.py),
                   "file", "line", "op", "tensor" (null for
                   what-ifs), "saving" (share of lanes / sector bytes / DRAM reads saved), "message",
                   "effect" (the predicted change, in words)}],
         "lines": [per (file, line), sorted: {"file", "line", "kinds": [str], "bytes", "active_lanes",
                   "masked_lanes", "requests", "sectors", "used_bytes", "sector_efficiency" (float),
                   "dram_read_bytes", "dram_write_bytes", "flops", "findings"}],
         "precision": null (the launch was not followed by a float64 shadow: analyze(shadow="float64")) |
                      {"mode": "float64", "ops" (floating ops followed), "source": "recorded" | "rerun",
                       "reproduced": bool | null (a rerun wrote the bytes the trace kept),
                       "lines": [per (file, line, type), sorted: {"file", "line", "type" ("fp32", "fp16", ...),
                                 "ops": [str], "executions", "trips" (the most in one program), "elements",
                                 "local_max", "local_mean", "error_max", "error_mean", "gained_max", "gained_mean"
                                 (floats, ulps of the type: its own rounding, its result against the shadow, the
                                 error it added beyond its operands'), "amplified_max", "amplified_mean" (its
                                 result's error over its operands'), "explains" (float | null: its share of the
                                 stored error), "worst": {"program", "value", "exact", "operands"} (the element
                                 of largest gain)}]   a UI's per-line precision column reads these,
                       "stores": [per (file, line, tensor, type): {"file", "line", "tensor", "type", "elements",
                                  "error_max", "error_mean", "abs_max", "scale" (largest |value| stored), "normwise"
                                  (abs_max in ulps of scale), "unexplained" (float | null), "worst": {"program",
                                  "value", "exact"}, "lost_at": {"file", "line", "gained_max", "amplified_max",
                                  "amplified_mean"} | null (the line of its path that amplifies most on average),
                                  "lines": [{"file", "line", "share", "max_ulps", "mean_ulps", "gained_max",
                                  "amplified_max", "amplified_mean"}] (most error first)}]}}
      ],
      "kinds": [{"kind", "severity": "error" | "warning", "meaning": str}]   every finding kind, most severe
               first (analysis/findings.py's KINDS table),
      "findings": [most severe first, at most params.max_findings; one per root cause: a kind, a kernel line,
                   a tensor (for lane checks: one static op over every program):
        {"kind": one of "kinds", "severity": "error" | "warning", "kernel", "launch" (index),
         "program": [x, y, z] (the first program involved) | null, "file", "line", "tensor", "op",
         "message": str (what happened, then the extent in words, as the pytest failure shows it),
         "count" (offending lanes over every program; elements for race, unwritten_output),
         "rows" (op executions), "offsets": [first element offsets into the storage],
         "indices": [view index | null], "lanes": [position in the op's block], "valid_range": [lo, hi] | null,
         "other": {} | race: {"program", "file", "line", "op", "tensor" (the first other access; its argument
                   differs from "tensor" when two arguments view one storage)},
         "extent": the full extent, exact over the launch whatever max_findings keeps (analysis/checks/extent.py):
           {"exact": bool (false: a lower bound, "note" says why),
            "programs": {"count", "runs" (runs of consecutive (x, y, z) ids), "ranges": [[first pid, last pid]]
                         (the first 8 runs), "first": [pid] (the first max_examples)}   (not for unwritten_output),
            "elements": {"count" (distinct elements), "lanes" (accesses to them), "runs", "ranges":
                         [[lo, hi]] (inclusive storage offsets, the first 8 runs), "first": [{"offset",
                         "index" (view index | null), "program" (pid | null), "value" (the value loaded or
                         stored: number, "nan", "inf", "-inf" | null)}]},
            out_of_bounds: "past_end": {"limit" (elements in the storage), "past_end", "before_start" (how far
                           the farthest lane reaches), "elements_past_end", "elements_before_start"},
                           "mask_lanes": {"count", "of" (block lanes), "runs", "ranges": [[lo, hi]] (flat
                           positions in the block a mask must turn off), "shape" (the block's)},
            race: "writers", "readers": {"count", "programs": [pid] (the first 64)}, "accesses": [{"op",
                  "file", "line", "tensor", "programs"}] (every op that touches the racy elements),
            nonfinite, overflow (float): "birth": {"file", "line", "op"}; nonfinite, nonfinite_input,
                  overflow (float): "poisoned": {"values", "programs", "nan", "inf"} (every non-finite value
                  the cause's stores wrote),
            release_without_barrier: "stores": [{"file", "line", "tensor", "elements", "lanes"}] (the block
                  stores the atomic follows, each with the elements of it another program accesses; the
                  extent's "elements" when they write one tensor, else not counted)}}],
      "finding_counts": {kind: findings found, before the cap},
      "suppressed": findings left out by the cap
    }
"""
from __future__ import annotations

from dataclasses import dataclass
from ..model.actions import RichDisplay
from ..errors import FindingsError  # noqa: F401  (re-exported for callers of analysis.report)
from .context import Params
from .findings import FINDING_KINDS, KINDS, SEVERITY
from .units import metric, nbytes, percent, seconds

# the one line a report of a file the user did not record or sign prints, for all its launches at once
UNTRUSTED_NOTE = ("compiled layouts skipped: the trace file is not one this user recorded or signed, so its kernel "
                  "is not compiled (layouts inferred from the offsets); load(path, trust=True) or --trust compiles it")

SCHEMA = "triton_trace.analysis/1"


@dataclass(frozen=True)
class LaunchReport:
    summary: dict                 # the launch's to_dict() entry, without its "programs" lists
    programs: dict                # column -> numpy array, one entry per recorded program
    rows: dict                    # column -> numpy array, one entry per op row

    def to_dict(self, max_programs: int) -> dict:
        n = len(self.programs["pid"])
        cut = min(n, max_programs)
        cols = {k: v[:cut].tolist() for k, v in self.programs.items()}
        sectors, used = self.programs["sectors"][:cut], self.programs["used_bytes"][:cut]
        cols["sector_efficiency"] = [round(float(u) / (32.0 * s), 4) if s else None for u, s in zip(used, sectors)]
        return {**self.summary, "programs": {"count": n, "truncated": cut < n, **cols}}


@dataclass(frozen=True)
class Report(RichDisplay):
    launches: tuple
    findings: tuple               # Finding, most severe first, capped at params.max_findings
    finding_counts: dict          # kind -> findings found (before the cap)
    suppressed: int
    params: Params

    @property
    def ok(self) -> bool:
        return not self.findings and not self.suppressed

    def to_dict(self) -> dict:
        return {
            "schema": SCHEMA,
            "params": self.params.to_dict(),
            "launches": [lr.to_dict(self.params.max_programs) for lr in self.launches],
            "kinds": [{"kind": k, "severity": sev, "meaning": m} for k, sev, m in KINDS],
            "findings": [f.to_dict() for f in self.findings],
            "finding_counts": dict(sorted(self.finding_counts.items())),
            "suppressed": self.suppressed,
        }

    def rows(self, launch: int = 0) -> dict:
        """Per op-row metric arrays of one launch (numpy, parallel to Launch.ops): not in to_dict, as a
        large launch has millions of rows. Columns: see metrics.row_table; "pattern" indexes
        coalescing.PATTERNS, "program" indexes Report.programs()["pid"]."""
        return dict(self.launches[launch].rows)

    def programs(self, launch: int = 0) -> dict:
        """Every per-program column of one launch, uncapped (numpy)."""
        return dict(self.launches[launch].programs)

    def launch(self, index: int = 0) -> dict:
        return self.launches[index].to_dict(self.params.max_programs)

    def summary(self, limit: int = 20) -> str:
        """The findings (up to ``limit``), then one line per launch with its headline metrics."""
        total = sum(self.finding_counts.values())
        if self.ok:
            lines = [f"triton_trace: no findings in {len(self.launches)} launch(es)"]
        else:
            counts = ", ".join(f"{k}={self.finding_counts[k]}" for k in FINDING_KINDS if self.finding_counts.get(k))
            lines = [f"triton_trace found {total} problem(s) in {len(self.launches)} launch(es) ({counts}):"]
        for f in self.findings[:limit]:
            lines.append(f"  [{SEVERITY[f.kind]}] {f.kind} in '{f.kernel}' (launch {f.launch}): {f.message}")
        hidden = total - min(limit, len(self.findings))
        if hidden > 0:
            lines.append(f"  ... and {hidden} more (Report.findings and Report.to_dict() list up to "
                         f"max_findings={self.params.max_findings})")
        # A launch that raised is analysed as far as it ran; say so, or a clean report would hide it.
        lines += [f"  [note] launch {d['index']} ('{d['kernel']}') did not complete; metrics and checks cover "
                  f"the {d['recorded_programs']} program(s) recorded before it stopped"
                  for d in (lr.summary for lr in self.launches) if not d["completed"]]
        for d in (lr.summary for lr in self.launches):
            ex = d.get("execution") or {}
            fb = ex.get("fallbacks") or []
            if fb:
                ran = sum(f["programs"] for f in fb)
                lines.append(f"  [note] launch {d['index']} ('{d['kernel']}'): {ran} program(s) ran one at a time "
                             f"instead of batched ({fb[0]['reason']})")
            lines += [f"  [note] launch {d['index']} ('{d['kernel']}'): {n}" for n in ex.get("limit_notes") or []]
        compiled_numerics = [d["index"] for d in (lr.summary for lr in self.launches) if d.get("numerics") == "compiled"]
        if compiled_numerics:
            lines.append(f"  [note] {_launch_list(compiled_numerics)}: values computed as the compiled kernel does "
                         f"(numerics='compiled': a*b+c as one FMA, fp32 tl.dot inputs read as TF32)")
        for d in (lr.summary for lr in self.launches):
            if d.get("inline_asm_approx"):
                lines.append(f"  [note] launch {d['index']} ('{d['kernel']}'): inline asm ran "
                             f"{', '.join(d['inline_asm_approx'])} correctly rounded; the GPU's hardware "
                             f"approximation may differ in the last bits (docs/fidelity.md, 'Inline PTX')")
        untrusted = [d["index"] for d in (lr.summary for lr in self.launches)
                     if (d.get("compiled") or {}).get("note") == UNTRUSTED_NOTE]
        if untrusted:
            lines.append(f"  [note] {_launch_list(untrusted)}: {UNTRUSTED_NOTE}")
        for d in (lr.summary for lr in self.launches):
            c = d.get("compiled") or {}
            if c.get("note") == UNTRUSTED_NOTE:
                continue
            if c.get("layouts") == "compiler":
                occ = c.get("occupancy") or {}
                lines.append(f"  [compiled] launch {d['index']} ('{d['kernel']}') for {c['target']}: {c['num_warps']} "
                             f"warps, {c['registers']} registers per thread, {nbytes(c['spill_bytes'] or 0)} spilled, "
                             f"{nbytes(c['shared_bytes'])} shared, occupancy {percent(occ.get('occupancy', 0))} "
                             f"(limited by {occ.get('limited_by', '?')})" + (f"; {c['note']}" if c.get("note") else ""))
            elif c.get("note") and "layouts='model'" not in c["note"]:
                lines.append(f"  [note] launch {d['index']} ('{d['kernel']}'): {c['note']}")
        for d in (lr.summary for lr in self.launches):
            lines += [f"  [hint] launch {d['index']} ('{d['kernel']}'): {h['message']}; {h['effect']}"
                      for h in (d.get("hints") or [])[:3]]
            lines += _precision_lines(d)
        return "\n".join(lines + self._table())

    def _table(self) -> list:
        head = ("launch", "kernel", "grid", "programs", "loaded", "stored", "sector eff.", "DRAM (model)", "FLOPs",
                f"bound on {self.params.gpu}")
        body = []
        for lr in self.launches:
            d, m = lr.summary, lr.summary["metrics"]
            eff = m["sector_efficiency"]
            roof = d["roofline"].get(self.params.gpu, {})
            body.append((str(d["index"]), d["kernel"], "x".join(str(g) for g in d["grid"]), str(m["programs"]),
                         nbytes(m["load_bytes"]), nbytes(m["store_bytes"] + m["atomic_bytes"]),
                         percent(eff), nbytes(m["dram_bytes_predicted"]),
                         metric("flops", m["flops"]), f"{roof.get('bound', '-')}, >= {seconds(roof.get('time_s', 0.0))}"))
        widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
        fmt = lambda row: "  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
        return [fmt(head)] + [fmt(r) for r in body]

    def __repr__(self) -> str:
        return (f"<Report launches={len(self.launches)} findings={sum(self.finding_counts.values())}"
                f"{' ok' if self.ok else ''}>")


def _precision_lines(d: dict, limit: int = 10) -> list:
    """The float64 shadow's verdict per stored tensor: its error, where precision is lost, whose rounding."""
    p = d.get("precision")
    if not p:
        return []
    head = f"  [precision] launch {d['index']} ('{d['kernel']}')"
    out = [f"{head}: the rerun did not write the bytes the trace kept; the numbers are the rerun's"] \
        if p.get("reproduced") is False else []
    for s in p["stores"][:limit]:
        at, causes = s["lost_at"], [c for c in s["lines"] if c["share"]][:3]
        lossy = s["normwise"] > 8          # (analysis/advice/shadow.py's ULPS: what its hint needs)
        out.append(f"{head}: '{s['tensor']}' stored at line {s['line']} is up to {s['error_max']:.3g} ulps of "
                   f"{s['type']} from float64 (mean {s['error_mean']:.3g})"
                   + (f", {s['normwise']:.3g} ulps of its largest value" if s["normwise"] > 1 else "")
                   + (f"; lost at line {at['line']} (error x{at['amplified_mean']:.3g} there on average)"
                      if at and lossy else "")
                   + ("; rounding of line(s) " + ", ".join(f"{c['line']} ({c['share']:.0%})" for c in causes)
                      if causes and lossy else ""))
    return out


def _launch_list(indices: list) -> str:
    if len(indices) == 1:
        return f"launch {indices[0]}"
    shown = ", ".join(str(i) for i in indices[:8])
    return f"launches {shown}{f' (+{len(indices) - 8} more)' if len(indices) > 8 else ''}"

