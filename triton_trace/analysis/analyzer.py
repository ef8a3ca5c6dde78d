"""``analyze``: run every analysis over every launch of a trace; ``check``: fail when anything is found.

Each launch is analysed on its own (launches on one stream are ordered, so nothing races across them).
The analyses form two explicit lists: the metric stages, in dependency order inside
``_analyze_launch``, and ``CHECKS``, the sanitizer, each a pure ``check(ctx) -> list`` of Findings (and
Suppressed records for groups past the cap).
"""
from __future__ import annotations

from typing import Optional, Union

import numpy as np

from ..native import arena
from ..errors import TraceUsageError
from ..model import Launch, Trace
from .memory import layouts as L
from . import metrics, parallel
from .advice import precision, predictions, shadow as shadow_advice, shadowrun
from .memory.cache import issue_order, simulate
from .memory.coalescing import coalesce
from .context import LOAD, LaunchContext, Params
from .findings import Finding, Suppressed, finalize
from .checks.races import check_races
from .report import UNTRUSTED_NOTE, FindingsError, LaunchReport, Report
from .advice.roofline import dot_precision, flops, roofline
from .gpus import GPUS
from .advice.hints import hints, resource_hints
from .advice.whatif import hints_from, replays, warps_hints
from .checks.sanitizer import check_bounds, check_coverage
from .checks.writeorder import check_double_writes, check_uninitialized
from .checks.valuechecks import RECORDED_CHECKS
from .checks.barriers import check_releases_without_barrier
from .checks.across import Across

# the checks over what the recorder's monitors kept (one per row of record/checks/table.py), then the
# checks over the accesses themselves
CHECKS = (*RECORDED_CHECKS, check_bounds, check_races, check_uninitialized, check_double_writes, check_coverage,
          check_releases_without_barrier)


def analyze(trace: Union[Trace, Launch], *, gpu: str = "H200", warp_size: int = 32, vector_bytes: int = 16,
            num_warps: Optional[int] = None, l2_bytes: Optional[int] = None, l2_ways: int = 16,
            programs_in_flight: Optional[int] = None, max_findings: int = 100, max_examples: int = 8,
            max_programs: int = 1 << 16, layouts: str = "compiler", what_if: Optional[bool] = None,
            shadow: Optional[str] = None) -> Report:
    """Metrics and sanitizer findings for every launch of ``trace`` (a Trace, live or loaded, or a Launch).

    ``gpu`` picks the defaults of ``l2_bytes`` and ``programs_in_flight`` (SMs x 2) and the roofline
    shown first; see analysis.roofline.GPUS. ``num_warps`` defaults to the launch's autotune config,
    else 4. ``layouts="compiler"`` compiles each launch for the GPU's architecture on this machine (no GPU
    needed; cached on disk) and counts requests and sectors with Triton's own layouts and vector widths
    (analysis/memory/layouts.py), falling back to the offsets model for ops it cannot match and for launches that
    do not compile (the report's "compiled" entry says which and why); ``"model"`` never compiles. The
    result is a pure function of the trace, these parameters and the installed Triton. ``what_if``
    replays the launch for the hints (analysis/advice/whatif.py): None with GROUP_M 1 and 8 (where the kernel
    orders its tiles by a group size), for launches of up to 2M cache-stream entries; True with GROUP_M 1,
    4, 8 and 16, through the other GPUs' L2 and with other num_warps, up to 20M entries; False never.
    ``shadow="float64"`` says where precision is lost (each launch's "precision" entry and its
    ``precision_loss`` hints, analysis/advice/shadow.py): a launch recorded without the float64 shadow runs
    again with it, from the inputs ``trace(inputs=True)`` kept (analysis/advice/shadowrun.py); one recorded
    with it (record/checks/shadow.py's ``shadowing()``) has its entry whatever ``shadow`` is.
    """
    params = Params(gpu=gpu, warp_size=warp_size, vector_bytes=vector_bytes, num_warps=num_warps,
                    l2_bytes=l2_bytes, l2_ways=l2_ways, programs_in_flight=programs_in_flight,
                    max_findings=max_findings, max_examples=max_examples, max_programs=max_programs,
                    layouts=layouts, what_if=what_if).resolved()
    if isinstance(trace, Launch):
        launches = (trace,)
    elif isinstance(trace, Trace):
        launches = trace.launches
    else:
        raise TraceUsageError(f"analyze() takes a triton_trace.Trace (e.g. triton_trace.current_trace() or "
                              f"triton_trace.load(path)) or a Launch; got {type(trace).__name__}")
    if shadow is not None:
        launches = shadowrun.with_shadow(launches, shadow)
    reports, found = [], []
    across = Across(launches)
    # what the last launch left for the next one cannot serve the analysis' arrays: unmapped now, not a
    # second later (arena.release); most of the analysis' memory is touched once: small pages map it fastest
    arena.release()
    with arena.small_pages():
        for i, lc in enumerate(launches):
            ctx = LaunchContext(lc, i, params)
            report, findings = _analyze_launch(ctx)
            across.note(ctx)
            reports.append(report)
            found += findings
    found = across.merge(found, params.max_examples)
    kept, counts, suppressed = finalize(found, params.max_findings)
    return Report(launches=tuple(reports), findings=kept, finding_counts=counts, suppressed=suppressed,
                  params=params)


def check(trace: Union[Trace, Launch], **params) -> Report:
    """Analyse ``trace`` and raise ``FindingsError`` (an AssertionError) listing the findings, if any.
    Returns the report when the trace is clean. Takes analyze()'s keyword parameters; findings do not
    depend on the compiled layouts or the what-if replays, so unless asked for they are skipped
    (``layouts="model"``, ``what_if=False``)."""
    report = analyze(trace, **{"layouts": "model", "what_if": False, **params})
    if not report.ok:
        raise FindingsError(report)
    return report


def _skipped_checks(lc: Launch) -> list:
    notes = []
    if lc.skipped_programs:
        notes.append(f"uninitialized_read, unwritten_output: {lc.skipped_programs} program(s) ran unrecorded")
    elif not lc.completed:
        notes.append("unwritten_output: the launch did not complete")
    return notes


def _compile(ctx: LaunchContext, num_warps: int):
    from ..compiled import compile_launch
    from ..compiled.source import SAFE_PACKAGES
    # a trace file may come from anyone: one the user did not record or sign is not compiled at all
    # (compile_launch refuses it), and analysing any must not import what it names beyond Triton, torch,
    # numpy and math (a kernel needing more keeps the inferred layouts, and the note says why)
    return compile_launch(ctx.launch, GPUS[ctx.params.gpu].arch, options={"num_warps": num_warps},
                          allowed_imports=SAFE_PACKAGES)


def _compiled_layouts(ctx: LaunchContext) -> tuple:
    """(static op -> (issue order, vec), static op -> compiled op, the report's "compiled" entry)."""
    arch = GPUS[ctx.params.gpu].arch
    entry = {"target": f"sm_{arch}", "layouts": "model", "note": None, "num_warps": None, "num_stages": None,
             "shared_bytes": None, "registers": None, "spill_bytes": None, "occupancy": None, "triton": None}
    if ctx.params.layouts != "compiler":
        return {}, {}, {**entry, "note": "analyze(layouts='model'): layouts inferred from the offsets"}
    if ctx.launch.module is None:
        return {}, {}, {**entry, "note": "the launch was recorded without its kernel module: layouts inferred"}
    from ..errors import TritonTraceError, UntrustedTrace
    try:
        compiled = _compile(ctx, ctx.num_warps)
    except UntrustedTrace:
        return {}, {}, {**entry, "note": UNTRUSTED_NOTE}
    except TritonTraceError as e:
        return {}, {}, {**entry, "note": f"layouts inferred from the offsets: {e}"}
    matched = L.match(ctx, compiled)
    ops = ctx.launch.ops
    orders = {}
    for sid, o in matched.items():
        row = int(ctx.op_first_row[sid])
        eb = int(ctx.eb[row])
        nd = int(ops["ndim"][row])
        vec = max(int(o["vector_bytes"] or eb) // eb, 1)
        issue = L.request_order(o["layout"], tuple(int(v) for v in ops["shape"][row][:nd]), ctx.num_warps, vec,
                                write=int(ctx.kind[row]) != LOAD)
        if issue is not None and o["instruction"] in ("ld", "st", "atom", "cp.async"):
            orders[sid] = (issue, vec)
    mem = int(sum(1 for r in ctx.op_first_row if r < ctx.n_rows and ctx.is_mem[r]))
    return orders, matched, {
        **entry, "layouts": "compiler",
        "note": "; ".join(list(compiled.notes) + ([] if len(orders) == mem else [
            f"{mem - len(orders)} of {mem} memory ops keep the inferred layout (no blocked layout matched in the "
            f"compiled kernel)"])) or None,
        "num_warps": compiled.num_warps, "num_stages": compiled.num_stages, "shared_bytes": compiled.shared_bytes,
        "registers": compiled.registers, "spill_bytes": compiled.spill_bytes, "occupancy": compiled.occupancy,
        "triton": compiled.triton}


def _elements_and_findings(ctx: LaunchContext) -> tuple:
    return metrics.unique_elements(ctx), [f for check_fn in CHECKS for f in check_fn(ctx)]


def _analyze_launch(ctx: LaunchContext) -> tuple:
    lc = ctx.launch
    order = issue_order(ctx)
    layouts, matched, compiled_entry = _compiled_layouts(ctx)
    with parallel.beside(_elements_and_findings, ctx) as side:
        co = coalesce(ctx, order, layouts)
        with parallel.beside(replays, ctx, co, ctx.params.what_if) as replay:
            cache = simulate(ctx, co, order)
            dot, math = flops(ctx)
            rows = metrics.row_table(ctx, co, cache, dot, math)
    unique, findings = side.result()
    # a finding counts once per program it involves (its extent), and once against the op it names
    built = [f for f in findings if isinstance(f, Finding)]
    suppressed = [f.op_rows for f in findings if isinstance(f, Suppressed)]
    by_program = np.concatenate([f.attributed_rows() for f in built] + suppressed + [np.zeros(0, np.int64)])
    by_op = np.concatenate([np.array([f.op_row for f in built if f.op_row >= 0], dtype=np.int64)] + suppressed)
    cols = metrics.program_columns(ctx, rows, ctx.row_prog[by_program])
    ops = metrics.static_ops(ctx, rows, ctx.row_op[by_op])
    for op in ops:
        op["compiled_as"] = None
    for sid, o in matched.items():
        ops[sid]["compiled_as"] = L.describe(o) + ("" if sid in layouts else " (not used: inferred layout kept)")
    m = metrics.launch_metrics(ctx, rows, unique)
    m["dram_write_bytes_evicted"] = int(cache.evicted_sectors) * 32
    m.update(l2_hit_rate=round(cache.hit_rate, 2), l2_read_lookups=int(cache.read_lookups),
             l2_read_hits=int(cache.read_hits), l2_write_lookups=int(cache.write_lookups),
             l1_hit_sectors=int(cache.l1_hit_sectors))
    summary = {
        "index": ctx.index, "kernel": lc.kernel_name, "grid": [int(g) for g in lc.grid],
        "recorded_programs": int(lc.recorded_programs), "skipped_programs": int(lc.skipped_programs),
        "completed": bool(lc.completed), "config": lc.config, "checks_skipped": _skipped_checks(lc),
        "value_stats": bool(lc.values.nbytes <= metrics.VALUE_STATS_BYTES),
        "execution": dict((lc.meta or {}).get("execution") or {}),
        "numerics": str((lc.meta or {}).get("numerics") or "interpreter"),
        "inline_asm_approx": [str(x) for x in (lc.meta or {}).get("inline_asm_approx") or []],
        "metrics": m,
        "roofline": roofline(m["dot_flops"], m["math_flops"], m["dram_bytes_predicted"], dot_precision(ctx)),
        "balance": metrics.balance(ctx, cols),
        "tensors": metrics.tensor_metrics(ctx, rows, unique),
        "ops": ops,
        "lines": metrics.source_lines(ctx, ops),
        "hints": hints(ctx, ops),
        "compiled": compiled_entry,
        "precision": shadow_advice.summary(ctx),
    }
    replayed, note = replay.result()
    extra = hints_from(replayed, m["dram_read_bytes"])
    note = note if m["dram_read_bytes"] else None
    extra += resource_hints(ctx, compiled_entry, GPUS[ctx.params.gpu].sms) + predictions.hints(ctx) + \
        precision.hints(ctx) + shadow_advice.hints(ctx, summary["precision"])
    if ctx.params.what_if is True:
        extra += warps_hints(ctx, compiled_entry, lambda w: _compile(ctx, w))
    summary["hints"] = sorted(summary["hints"] + extra, key=lambda h: -h["saving"])
    if note:
        summary["checks_skipped"] = summary["checks_skipped"] + [note]
    return LaunchReport(summary=summary, programs=cols, rows=rows), findings
