"""Memory and work metrics at every level: op row, static op, source line, program and launch.

Everything starts from one table with a value per op row (``row_table``); the other levels are sums of
it by a key (bincount), so they always add up. Bytes count active lanes only; sector counts and the
cache come from coalescing.py and cache.py. Metrics cover the recorded programs only (a program filter
leaves the others out; ``recorded_programs`` says how many there are).
"""
from __future__ import annotations

import numpy as np

from .memory.cache import CacheResult
from .memory.coalescing import PATTERNS, SECTOR_BYTES, Coalescing
from . import context
from .context import KIND_NAMES, LOAD, STORE, LaunchContext, pattern_intervals, sorted_unique

TAIL_TOLERANCE = 0.1       # a program is in the tail when its work is this far from the median
MAX_TAIL_PIDS = 16
# recorded values the report reads for its per-op value statistics: about 70 ns a value, so a 4 MB trace
# (1M fp32 values) adds 0.07 s; larger ones leave it to Launch.value_stats and the UI's program table, which
# read one program's ops on demand
VALUE_STATS_BYTES = 4 << 20


def row_table(ctx: LaunchContext, co: Coalescing, cache: CacheResult, dot_flops, math_flops) -> dict:
    """Per-row metric arrays (length n_rows). Memory columns are zero on compute rows and vice versa."""
    mem = ctx.is_mem
    lanes = ctx.lane_count
    return {
        "program": ctx.row_prog, "static_op": ctx.row_op, "kind": ctx.kind, "tensor": ctx.tensor,
        "file": ctx.file, "line": ctx.line, "seq": ctx.seq,
        "lanes": lanes, "active_lanes": ctx.active_lanes, "masked_lanes": np.where(mem, lanes - ctx.active_lanes, 0),
        "oob_lanes": ctx.oob_lanes, "bytes": np.where(mem, ctx.active_lanes * ctx.eb, 0),
        "requests": co.requests, "sectors": co.sectors, "cache_lines": co.lines, "used_bytes": co.used_bytes,
        "pattern": co.pattern, "stride": co.stride, "vector_width": co.vector, "fast_dim": co.fast_dim,
        "dram_read_bytes": cache.read_sectors * SECTOR_BYTES, "dram_write_bytes": cache.write_sectors * SECTOR_BYTES,
        "dot_flops": dot_flops, "math_flops": math_flops, "flops": dot_flops + math_flops,
    }


def _by(key: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(key, weights=values, minlength=n).astype(np.int64) if len(key) else np.zeros(n, np.int64)


def _ratio(a, b, digits: int = 4):
    return round(float(a) / float(b), digits) if b else None


def _efficiency(used, sectors):
    return _ratio(used, sectors * SECTOR_BYTES)


def _kind_masks(ctx: LaunchContext) -> dict:
    return {"load": ctx.kind == LOAD, "store": ctx.kind == STORE, "atomic": ctx.is_atomic}


def launch_metrics(ctx: LaunchContext, rows: dict, unique: dict) -> dict:
    m = {}
    for name, sel in _kind_masks(ctx).items():
        m[f"{name}_bytes"] = int(rows["bytes"][sel].sum())
        m[f"{name}_lanes"] = int(rows["active_lanes"][sel].sum())
        m[f"{name}_sectors"] = int(rows["sectors"][sel].sum())
        m[f"{name}_requests"] = int(rows["requests"][sel].sum())
        m[f"{name}_sector_efficiency"] = _efficiency(rows["used_bytes"][sel].sum(), rows["sectors"][sel].sum())
    lanes = int(rows["lanes"].sum())
    sectors, requests = int(rows["sectors"].sum()), int(rows["requests"].sum())
    dram_r, dram_w = int(rows["dram_read_bytes"].sum()), int(rows["dram_write_bytes"].sum())
    flops = int(rows["flops"].sum())
    m.update({
        "lanes": lanes, "masked_lanes": int(rows["masked_lanes"].sum()),
        "masked_share": _ratio(rows["masked_lanes"].sum(), lanes), "oob_lanes": int(rows["oob_lanes"].sum()),
        "memory_ops": int(ctx.is_mem.sum()), "requests": requests, "sectors": sectors,
        "cache_lines": int(rows["cache_lines"].sum()), "sectors_per_request": _ratio(sectors, requests, 3),
        "sector_efficiency": _efficiency(rows["used_bytes"].sum(), sectors),
        "unique_load_bytes": int(sum(u["unique_load_bytes"] for u in unique.values())),
        "unique_store_bytes": int(sum(u["unique_store_bytes"] for u in unique.values())),
        "dram_read_bytes": dram_r, "dram_write_bytes": dram_w, "dram_bytes_predicted": dram_r + dram_w,
        "flops": flops, "dot_flops": int(rows["dot_flops"].sum()), "math_flops": int(rows["math_flops"].sum()),
        "arithmetic_intensity": _ratio(flops, dram_r + dram_w, 6),
        "programs": ctx.n_programs,
    })
    return m


def unique_elements(ctx: LaunchContext) -> dict:
    """Per tensor index: distinct elements (and bytes) loaded and stored by active, in-bounds lanes."""
    out = {}
    mem = ctx.mem_rows
    for ti, t in enumerate(ctx.launch.tensors):
        rows_t = mem[ctx.tensor[mem] == ti]
        res = {}
        for name, kind_rows in (("load", rows_t[ctx.is_read[rows_t]]), ("store", rows_t[ctx.is_write[rows_t]])):
            intervals, marks = [], []
            # rows of one element size at a time: offsets count in that size
            for eb in np.unique(ctx.eb[kind_rows]):
                rows = kind_rows[ctx.eb[kind_rows] == eb]
                if eb == t.elem_bytes:
                    rows = _pattern_elements(ctx, rows, t.storage_size, intervals, marks)
                if not len(rows):
                    continue
                el = ctx.row_lanes(rows)[1]
                marks.append(el if eb == t.elem_bytes else el * int(eb) // t.elem_bytes)
            n = _count(t.storage_size, intervals, marks)
            res[f"unique_{name}_elements"], res[f"unique_{name}_bytes"] = n, n * t.elem_bytes
        out[ti] = res
    return out


def _pattern_elements(ctx: LaunchContext, rows: np.ndarray, size: int, intervals: list, marks: list) -> np.ndarray:
    """The elements of the regular rows (``ctx.regular``: a known pattern, active lanes in bounds) without
    decoding lanes: a pattern made of few runs of consecutive elements (a block, a tile's rows) as
    (start, end) intervals, any other as its elements. Returns the other rows."""
    if not context.SHORTCUTS or not len(rows):
        return rows
    ok, groups = ctx.regular_groups(rows)
    for pat, members in groups:
        base = np.unique(ctx.row_base[members])       # rows that load one tile again add no element
        iv = pattern_intervals(pat, base)
        if iv is not None:
            intervals.append(iv)
        else:
            marks.append((base[:, None] + pat).reshape(-1))
    return rows[~ok]


def _count(size: int, intervals: list, marks: list) -> int:
    """Distinct elements in the union of half-open intervals and element arrays."""
    marks = [m for m in marks if len(m)]
    if intervals and not marks:
        lo = np.concatenate([i[0] for i in intervals])
        hi = np.concatenate([i[1] for i in intervals])
        o = np.argsort(lo, kind="stable")
        lo, hi = lo[o], hi[o]
        reach = np.r_[np.iinfo(np.int64).min, np.maximum.accumulate(hi)[:-1]]    # covered before each
        return int(np.maximum(hi - np.maximum(lo, reach), 0).sum())
    seen = np.zeros(size, dtype=bool)
    for m in marks:
        seen[m] = True
    if intervals:
        cover = np.bincount(np.concatenate([i[0] for i in intervals]), minlength=size + 1)
        cover -= np.bincount(np.concatenate([i[1] for i in intervals]), minlength=size + 1)
        seen |= np.cumsum(cover[:size]) > 0
    return int(np.count_nonzero(seen))


def tensor_metrics(ctx: LaunchContext, rows: dict, unique: dict) -> list:
    out = []
    n_t = len(ctx.launch.tensors)
    key = np.where(ctx.tensor >= 0, ctx.tensor, n_t)
    sums = {c: _by(key, rows[c], n_t + 1) for c in ("bytes", "active_lanes", "sectors", "dram_read_bytes",
                                                      "dram_write_bytes")}
    per_kind = {name: {c: _by(key[sel], rows[c][sel], n_t + 1) for c in ("bytes", "active_lanes")}
                for name, sel in _kind_masks(ctx).items()}
    outputs = set(ctx.launch.outputs)
    for ti, t in enumerate(ctx.launch.tensors):
        d = {"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "strides": list(t.strides),
             "is_output": t.name in outputs, "sectors": int(sums["sectors"][ti]),
             "dram_read_bytes": int(sums["dram_read_bytes"][ti]), "dram_write_bytes": int(sums["dram_write_bytes"][ti])}
        for name, s in per_kind.items():
            d[f"{name}_elements"], d[f"{name}_bytes"] = int(s["active_lanes"][ti]), int(s["bytes"][ti])
        d.update(unique[ti])
        d["load_reuse"] = _ratio(d["load_elements"] + d["atomic_elements"], d["unique_load_elements"], 3)
        out.append(d)
    return out


def program_columns(ctx: LaunchContext, rows: dict, finding_programs: np.ndarray) -> dict:
    """Parallel lists, one entry per recorded program (sorted by (x, y, z)), for colouring a grid."""
    n, p = ctx.n_programs, rows["program"]
    cols = {"pid": ctx.pids.astype(np.int64)}
    masks = _kind_masks(ctx)
    for name in ("load", "store", "atomic"):
        cols[f"{name}_bytes"] = _by(p[masks[name]], rows["bytes"][masks[name]], n)
    for name in ("load", "store"):
        cols[f"{name}_sectors"] = _by(p[masks[name]], rows["sectors"][masks[name]], n)
    for c in ("active_lanes", "masked_lanes", "sectors", "used_bytes", "requests", "flops"):
        cols[c] = _by(p, rows[c], n)
    cols["dram_bytes"] = _by(p, rows["dram_read_bytes"] + rows["dram_write_bytes"], n)
    cols["memory_ops"] = _by(p, ctx.is_mem.astype(np.int64), n)
    cols["findings"] = np.bincount(finding_programs, minlength=n)[:n].astype(np.int64)
    return cols


def op_values(ctx: LaunchContext) -> list:
    """Per static op: {"min", "max", "mean" (finite values), "nan", "inf"} over the values its active lanes
    loaded or stored in every execution, or None where none were recorded (or the trace's values exceed
    VALUE_STATS_BYTES, when it is None for every op: Launch.value_stats reads them on demand)."""
    lc, n = ctx.launch, ctx.n_static
    if lc.values.nbytes > VALUE_STATS_BYTES or not len(ctx.mem_rows):
        return [None] * n
    rows = ctx.mem_rows[lc.ops["value_dtype"][ctx.mem_rows] >= 0]     # the rows that recorded values
    s = lc.value_stats(rows)
    key, has = ctx.row_op[rows], s["count"] >= 0
    count = np.bincount(key[has], weights=s["count"][has], minlength=n)
    total = np.bincount(key[has], weights=np.nan_to_num(s["mean"][has]) * s["count"][has], minlength=n)
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    ok = has & (s["count"] > 0)
    np.minimum.at(lo, key[ok], s["min"][ok])
    np.maximum.at(hi, key[ok], s["max"][ok])
    nan = np.bincount(key[has], weights=s["nan"][has], minlength=n)
    inf = np.bincount(key[has], weights=s["inf"][has], minlength=n)
    recorded = np.bincount(key[has], minlength=n) > 0
    return [None if not recorded[k] else
            {"min": _sig(lo[k]) if count[k] else None, "max": _sig(hi[k]) if count[k] else None,
             "mean": _sig(total[k] / count[k]) if count[k] else None, "nan": int(nan[k]), "inf": int(inf[k])}
            for k in range(n)]


def _sig(v: float) -> float:
    return float(f"{float(v):.7g}")


def static_ops(ctx: LaunchContext, rows: dict, finding_ops: np.ndarray) -> list:
    """One entry per (kind, tensor, file, line), sorted by (file, line, kind, tensor)."""
    n, key = ctx.n_static, rows["static_op"]
    sums = {c: _by(key, rows[c], n) for c in ("lanes", "active_lanes", "masked_lanes", "oob_lanes", "bytes",
                                               "requests", "sectors", "cache_lines", "used_bytes",
                                               "dram_read_bytes", "dram_write_bytes", "flops")}
    execs = np.bincount(key, minlength=n)
    span = max(ctx.n_programs, 1)
    programs = np.bincount(sorted_unique(key * span + rows["program"]) // span, minlength=n)
    # The op's access pattern: the most common over its rows; the first such row speaks for the rest.
    pat = np.zeros((n, len(PATTERNS)), dtype=np.int64)
    np.add.at(pat, (key, rows["pattern"]), 1)
    mode = pat.argmax(axis=1)
    rep = np.full(n, ctx.n_rows, dtype=np.int64)
    match = rows["pattern"] == mode[key]
    np.minimum.at(rep, key[match], np.nonzero(match)[0])
    findings = np.bincount(finding_ops, minlength=n)[:n]
    values = op_values(ctx)
    out = []
    for s in range(n):
        r = int(ctx.op_first_row[s])
        mem = bool(ctx.is_mem[r])
        loc = ctx.row_location(r)
        d = {"kind": str(KIND_NAMES[ctx.kind[r]]), "tensor": ctx.tensor_name(int(ctx.tensor[r])),
             "file": loc["file"], "line": loc["line"], "rows": int(execs[s]), "programs": int(programs[s]),
             "findings": int(findings[s])}
        d.update({c: int(v[s]) for c, v in sums.items()})
        d["sectors_per_request"] = _ratio(sums["sectors"][s], sums["requests"][s], 3)
        d["sector_efficiency"] = _efficiency(sums["used_bytes"][s], sums["sectors"][s])
        rr = int(rep[s]) if rep[s] < ctx.n_rows else r
        d["pattern"] = PATTERNS[int(mode[s])] if mem and mode[s] else None
        d["stride"] = int(rows["stride"][rr]) if d["pattern"] == "strided" else None
        d["vector_width"] = int(rows["vector_width"][rr]) if mem else None
        d["fast_dim"] = int(rows["fast_dim"][rr]) if mem else None
        d["values"] = values[s]
        out.append(d)
    return out


def source_lines(ctx: LaunchContext, ops: list) -> list:
    """Per (file, line): the sums of its static ops."""
    lines: dict = {}
    cols = ("bytes", "active_lanes", "masked_lanes", "requests", "sectors", "used_bytes", "dram_read_bytes",
            "dram_write_bytes", "flops", "findings")
    for op in ops:
        key = (op["file"] or "", op["line"] or 0)
        d = lines.setdefault(key, {"file": op["file"], "line": op["line"], "kinds": [], **{c: 0 for c in cols}})
        for c in cols:
            d[c] += op[c]
        if op["kind"] not in d["kinds"]:
            d["kinds"].append(op["kind"])
    out = []
    for key in sorted(lines):
        d = lines[key]
        d["kinds"] = sorted(d["kinds"])
        d["sector_efficiency"] = _efficiency(d["used_bytes"], d["sectors"])
        out.append(d)
    return out


def balance(ctx: LaunchContext, cols: dict) -> dict:
    """How evenly work spreads over the grid, and the programs far from the median."""
    out = {"programs": ctx.n_programs, "programs_in_flight": ctx.params.programs_in_flight,
           "waves": -(-ctx.n_programs // ctx.params.programs_in_flight),
           "last_wave_fill": _ratio(ctx.n_programs - (-(-ctx.n_programs // ctx.params.programs_in_flight) - 1)
                                    * ctx.params.programs_in_flight, ctx.params.programs_in_flight, 3)}
    work = {"bytes": cols["load_bytes"] + cols["store_bytes"] + cols["atomic_bytes"], "flops": cols["flops"],
            "dram_bytes": cols["dram_bytes"]}
    for name, v in work.items():
        if not len(v):
            out[name] = None
            continue
        med = float(np.median(v))
        heavy = np.nonzero(v > med * (1 + TAIL_TOLERANCE))[0]
        light = np.nonzero(v < med * (1 - TAIL_TOLERANCE))[0]
        out[name] = {
            "median": med, "mean": round(float(v.mean()), 3), "min": int(v.min()), "max": int(v.max()),
            "imbalance": _ratio(v.max(), v.mean(), 3),
            "heavy": {"count": int(len(heavy)), "pids": ctx.pids[heavy[:MAX_TAIL_PIDS]].tolist()},
            "light": {"count": int(len(light)), "pids": ctx.pids[light[:MAX_TAIL_PIDS]].tolist()},
        }
    return out
