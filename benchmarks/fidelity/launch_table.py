"""The launch-by-launch table: per-launch JSON lines (launch_plugin.py) folded into counts and examples.

A launch's status is its worst output's: ``exact`` (every output bit-identical), ``nan_bits`` (only NaNs
with other payload or sign bits differ), ``1ulp`` (floats at most one representable value apart),
``beyond``, or ``trace_error`` (the tracer raised: an op it does not run). Rows are op classes, the test
function's name (``test_bin_op``), by the dtypes of the outputs the launch wrote.
"""
from __future__ import annotations

import collections
import json
from pathlib import Path

STATUSES = ("exact", "nan_bits", "1ulp", "beyond", "trace_error")
EXAMPLES_PER_CLASS = 4


def read_logs(paths) -> tuple:
    """(launch records, node ids of the tests the deadline cut) from the plugin's log files."""
    launches, cut = [], []
    for path in paths:
        for line in Path(path).read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:      # the line a worker was writing when the run was stopped at its limit
                continue
            (cut.append(rec["nodeid"]) if rec.get("cut") else launches.append(rec))
    launches.sort(key=lambda r: (r["nodeid"], r.get("kernel", "")))
    return launches, sorted(cut)


def dtypes_of(rec: dict) -> str:
    outs = rec.get("outputs") or []
    return "+".join(sorted({o["dtype"] for o in outs})) or ("-" if "outputs" in rec else "?")


def mismatch_class(rec: dict) -> str:
    """A key naming a kind of mismatch: family, status and output dtype (trace errors by their message)."""
    if rec["status"] == "trace_error":
        return f"trace_error: {rec['error'][:120]}"
    return f"{rec['family']} / {rec['status']} / {dtypes_of(rec)}"


def summarize(launches: list, cut: list) -> dict:
    total = collections.Counter(r["status"] for r in launches)
    rows = collections.defaultdict(collections.Counter)
    for r in launches:
        rows[(r["family"], dtypes_of(r))][r["status"]] += 1
    classes = collections.defaultdict(list)
    for r in launches:
        if r["status"] != "exact":
            classes[mismatch_class(r)].append(r)
    return {
        "launches": len(launches), "tests_with_launches": len({r["nodeid"] for r in launches}),
        "tests_cut_by_deadline": len(cut), "by_status": {s: total.get(s, 0) for s in STATUSES},
        "rows": [{"family": f, "dtypes": d, **{s: c.get(s, 0) for s in STATUSES}}
                 for (f, d), c in sorted(rows.items())],
        "classes": {k: {"launches": len(v), "examples": [_example(r) for r in v[:EXAMPLES_PER_CLASS]]}
                    for k, v in sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[0]))},
        "trace_s": round(sum(r.get("trace_s", 0.0) for r in launches), 1),
    }


def _example(r: dict) -> dict:
    ex = {"nodeid": r["nodeid"], "kernel": r["kernel"], "grid": r.get("grid")}
    if r["status"] == "trace_error":
        ex.update(error=r["error"], where=r.get("where"))
    else:
        ex["outputs"] = [o for o in r["outputs"] if o["status"] != "exact"]
    return ex


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:.1f}%" if d else "-"


def markdown(s: dict, header: str = "") -> str:
    n = s["launches"]
    b = s["by_status"]
    lines = [header, "",
             f"**{n} launches** of {s['tests_with_launches']} tests; {s['tests_cut_by_deadline']} tests not run "
             "(deadline). " + ", ".join(f"{k}: {b[k]} ({_pct(b[k], n)})" for k in STATUSES), "",
             "| op class | dtypes | launches | exact | nan bits | 1 ulp | beyond | trace error |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in s["rows"]:
        k = sum(r[x] for x in STATUSES)
        lines.append(f"| {r['family']} | {r['dtypes']} | {k} | " + " | ".join(str(r[x]) for x in STATUSES) + " |")
    lines += ["", f"## Mismatch classes ({len(s['classes'])})", ""]
    for name, c in s["classes"].items():
        lines.append(f"- **{name}**: {c['launches']} launch(es)")
        for ex in c["examples"][:2]:
            if "error" in ex:
                lines.append(f"  - `{ex['nodeid']}` ({ex['kernel']}): {ex['error']}")
                continue
            for o in ex["outputs"][:1]:
                e = o["examples"][0] if o["examples"] else {}
                lines.append(f"  - `{ex['nodeid']}` ({ex['kernel']}) `{o['name']}` {o['dtype']}: {o['differing']} of "
                             f"{o['elements']} differ, max {o['max_ulp']} ulp; e.g. {e.get('index')}: ref "
                             f"{e.get('ref')} ({e.get('ref_bits')}), trace {e.get('trace')} ({e.get('trace_bits')})")
    return "\n".join(lines) + "\n"
