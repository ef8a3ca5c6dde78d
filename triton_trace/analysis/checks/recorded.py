"""Findings the recorder noted while the kernel ran: failed device asserts, NaN/Inf that reached memory,
integers that did not fit their type (definitions: sanitizer.py's docstring).

The recorder keeps one report per cause (record/checks/nonfinite.py, overflow.py): the first program
where it happened. A NaN's reach is counted here again, exactly, from the values the stores wrote: every
non-finite value the cause's store(s) put in memory, over every program, so a softmax that poisons 16
rows says 16 programs, not the first. The reach of an integer overflow (and of the other causes the
recorder follows as values, valuechecks.py) is the recorder's: every program the cause reached and its
lanes in all (``reach``), exact unless the recorder's list of programs was capped. Its elements are those
of the lanes the recorder names per op row it reached (``hits``: record/checks/monitor.py), counted here
from the rows' recorded offsets (``hit_elements``). A trace from before the recorder named them has the
lane count only: its elements are named where that settles it (the bad value took every active lane of
the op in every program it reached: ``whole_rows``), else the extent says they are not counted.
"""
from __future__ import annotations

import numpy as np

from ...model import KIND_CODE, MEMORY_KINDS, WRITE_KINDS
from ...model.values import lane_values
from ...record.checks.monitor import HIT_HEAD, MAX_HIT_INTS
from . import extent as E
from ..context import LaunchContext, sorted_unique
from ..findings import Finding, short_list

WRITE_CODES = [KIND_CODE[k] for k in WRITE_KINDS]
MEMORY_CODES = list(range(len(MEMORY_KINDS)))
MAX_PROGRAMS = 1 << 16        # the recorder's cap on the programs it lists per cause (record/checks/monitor.py)
_FIRST_ONLY = "the recorder keeps the first program of each cause"
# why a cause's elements are not counted
SOME_LANES = ("the recorder counts the lanes the bad value reached, not which ones (they are named only when "
              "it reached every lane of one tensor's accesses at that line)")
NOT_MEMORY = "a device_assert checks values, not memory elements"


def _memory_row(ctx: LaunchContext, pid, line, kinds) -> int:
    """The first op row of program ``pid`` at ``line`` whose kind is one of ``kinds`` (op codes), or -1:
    what a finding recorded by program and line (not by row) opens in the UI."""
    o = ctx.launch.ops
    hit = np.flatnonzero(np.all(o["program"] == np.asarray(pid, dtype=o["program"].dtype), axis=1) &
                         (o["line"] == int(line or 0)) & np.isin(o["kind"], list(kinds)))
    return int(hit[0]) if len(hit) else -1


def _one_program(pid, lanes: int, exact: bool, why: str = _FIRST_ONLY) -> dict:
    """The extent of a cause seen in one program: all of it (an assert stops the launch) or the first; its
    elements are not counted (``why``)."""
    x = {"programs": {"count": 1, "runs": 1, "ranges": [[list(pid), list(pid)]], "first": [list(pid)]},
         "elements": E.uncounted(lanes, why), "exact": exact}
    return x if exact else {**x, "note": _FIRST_ONLY}


def reach(ctx: LaunchContext, r: dict, pid: tuple, why: str = SOME_LANES) -> tuple:
    """(extent, lanes, program indexes) of a cause the recorder followed: every program it reached (the
    recorder's list), its lanes in all; elements not counted (``why``: the caller names them where it can).
    A report without the list (an older trace) has its first program only (indexes None)."""
    listed = r.get("programs") or []
    if not listed:
        return _one_program(pid, int(r.get("lanes") or 0), False), int(r.get("lanes") or 0), None
    d1, d2 = int(ctx.dims[1]), int(ctx.dims[2])
    lin = np.unique(np.array([int(x) * d1 * d2 + int(y) * d2 + int(z) for x, y, z in listed], dtype=np.int64))
    at = np.clip(np.searchsorted(ctx.programs, lin), 0, max(len(ctx.programs) - 1, 0))
    prog = at[ctx.programs[at] == lin] if len(ctx.programs) else at[:0]
    lanes = int(r.get("reach_lanes") or r.get("lanes") or 0)
    exact = len(listed) < MAX_PROGRAMS
    x = {"programs": E.programs(ctx, prog), "elements": E.uncounted(lanes, why), "exact": exact}
    return (x if exact else {**x, "note": "the recorder lists the first 65536 programs of a cause"}), lanes, prog


def rows_at(ctx: LaunchContext, file, line, codes, prog) -> np.ndarray:
    """Every row of the ops at ``file:line`` of kinds ``codes`` run by the programs ``prog`` (indexes), in
    row order."""
    files = list(ctx.launch.files)
    if file not in files or prog is None or not len(prog):
        return np.zeros(0, np.int64)
    at = (ctx.file == files.index(file)) & (ctx.line == int(line or 0)) & np.isin(ctx.kind, list(codes))
    rows = np.flatnonzero(at)
    return rows[np.isin(ctx.row_prog[rows], prog)]


def one_tensor(ctx: LaunchContext, rows: np.ndarray):
    """The tensor index all of ``rows`` access, or None when they access several (their offsets would mix
    storages)."""
    t = sorted_unique(ctx.tensor[rows]) if len(rows) else rows
    return int(t[0]) if len(t) == 1 else None


def named_elements(ctx: LaunchContext, ti: int, lanes: np.ndarray, accesses: int) -> dict:
    """The extent of the elements lanes ``lanes`` (indexes into ctx.offsets, in execution order) of tensor
    ``ti`` touch, ``accesses`` accesses to them, with the first few and their values."""
    off = ctx.lane_offsets(lanes)
    u = sorted_unique(off)
    t = ctx.launch.tensors[ti] if ti >= 0 else None
    return E.elements(u, u + 1, accesses, E.examples(ctx, lanes[:ctx.params.max_examples], t))


def whole_rows(ctx: LaunchContext, r: dict, prog, lanes: int):
    """The elements of a cause that reached ``lanes`` lanes of the memory op at the report's line in the
    programs ``prog``, when those are every active lane the line's memory ops ran there: then the bad
    value reached each of them (the recorder's lanes are some of these, as many as all of them); None
    when some lane was not reached, or the rows access several tensors. Every memory op of the line
    counts, whatever the report's op: the recorder's key is the line, so a load and a store there that
    both carry the bad value add up in one report (``tl.store(y + j, tl.load(x + j))``)."""
    rows = rows_at(ctx, r.get("file"), r.get("line"), MEMORY_CODES, prog)
    ti = one_tensor(ctx, rows)
    if ti is None or not lanes:
        return None
    idx, _, msk = ctx.decode(rows)
    if int(msk.sum()) != lanes:
        return None
    return named_elements(ctx, ti, idx[msk], lanes)


def hit_lanes(ctx: LaunchContext, r: dict, codes):
    """(lanes (indexes into ctx.offsets, ascending), their recorded mask, whether they are every lane the
    cause reached) that the report's hits name in the rows of ``codes`` at its line; None without hits (an
    older trace). A hit whose row is not in the trace, or whose lanes exceed the row's, is left out."""
    h = r.get("hits")
    if not h:
        return None
    h = np.asarray(h, np.int64)
    heads, pos = [], 0
    while pos + HIT_HEAD <= len(h):
        heads.append(pos)
        pos += HIT_HEAD + 2 * int(h[pos + 4])
    heads = np.asarray(heads[:-1] if pos > len(h) else heads, np.int64)
    d1, d2 = int(ctx.dims[1]), int(ctx.dims[2])
    lin = (h[heads] * d1 + h[heads + 1]) * d2 + h[heads + 2]
    at = np.clip(np.searchsorted(ctx.programs, lin), 0, max(len(ctx.programs) - 1, 0))
    known = (ctx.programs[at] == lin) if len(ctx.programs) else np.zeros(len(lin), bool)
    rows = rows_at(ctx, r.get("file"), r.get("line"), codes, sorted_unique(at[known]))
    span = int(max(ctx.seq[rows].max(initial=0), h[heads + 3].max(initial=0))) + 1
    key_rows = ctx.row_prog[rows] * span + ctx.seq[rows]
    order = np.argsort(key_rows, kind="stable")
    key = at * span + h[heads + 3]
    i = np.clip(np.searchsorted(key_rows[order], key), 0, max(len(rows) - 1, 0))
    found = known & (len(rows) > 0) & (key_rows[order][i] == key if len(rows) else False)
    row = np.where(found, rows[order][i] if len(rows) else -1, -1)
    k = h[heads + 4]
    run_head, run_row = np.repeat(heads, k), np.repeat(row, k)
    nth = np.arange(len(run_head)) - np.repeat(np.cumsum(k) - k, k)
    first, end = h[run_head + HIT_HEAD + 2 * nth], h[run_head + HIT_HEAD + 2 * nth + 1]
    reached = int((end - first).sum())
    ok = (run_row >= 0) & (first >= 0) & (first < end) & (end <= ctx.lane_count[np.maximum(run_row, 0)])
    first, end, run_row = first[ok], end[ok], run_row[ok]
    n = end - first
    lanes = np.repeat(ctx.lane_pos[run_row] + first - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    lanes = sorted_unique(lanes)
    idx, _, msk = ctx.decode(sorted_unique(run_row))
    mask = msk[np.searchsorted(idx, lanes)] if len(lanes) else np.zeros(0, bool)
    complete = bool(found.all() and ok.all() and len(lanes) == reached == int(r.get("reach_lanes") or 0))
    return lanes, mask, complete


def hit_elements(ctx: LaunchContext, r: dict, extent: dict, codes) -> bool:
    """Set ``extent``'s elements to those the report's hits name, of the report's tensor: the lanes the op
    accessed, or for a mask the bad value decided, every lane it decided (a GPU may access any of them);
    False without hits (an older trace: the caller keeps what it had)."""
    got = hit_lanes(ctx, r, codes)
    if got is None or not len(got[0]):       # (none of its rows in the trace: as an older trace)
        return False
    lanes, mask, complete = got
    mask = np.ones(len(lanes), bool) if r.get("how") == "mask" else mask
    names = [t.name for t in ctx.launch.tensors]
    rows = ctx.rows_of_lanes(lanes).astype(np.int64) if len(lanes) else np.zeros(0, np.int64)
    ti = names.index(r["tensor"]) if r.get("tensor") in names else one_tensor(ctx, sorted_unique(rows))
    if ti is None:
        extent["elements"] = E.uncounted(int(mask.sum()), "the op's rows access several tensors")
        return True
    keep = mask & (ctx.tensor[rows] == ti)
    extent["elements"] = named_elements(ctx, ti, lanes[keep], int(keep.sum()))
    if not complete:
        extent["exact"] = False
        extent["note"] = f"the recorder names the lanes its first {MAX_HIT_INTS} numbers per launch hold"
    return True


def check_asserts(ctx: LaunchContext) -> list:
    d = (ctx.launch.meta or {}).get("assert_failed")
    if not d:
        return []
    lc = ctx.launch
    pid = tuple(d.get("program") or (0, 0, 0))
    expr = f" ({d.get('expression')})" if d.get("expression") else ""
    values = "; ".join(f"{k}={v}" for k, v in sorted((d.get("values") or {}).items()))
    message = (f"device_assert {d.get('message', '')!r}{expr} failed at {d.get('file')}:{d.get('line')} in program "
               f"{pid} on {d.get('count', 0)} lane(s), first at block index "
               f"{[tuple(v) for v in d.get('lanes') or []]}" + (f"; values {values}" if values else "") +
               "; the launch stopped there, as a GPU traps: later programs did not run")
    # exact: the launch stops at the first program whose assert fails, so no other program is involved
    return [Finding(kind="assert_failed", kernel=lc.kernel_name, launch=ctx.index, message=message,
                    count=int(d.get("count", 0)), program=pid, file=d.get("file"), line=int(d.get("line") or 0),
                    op="device_assert", lanes=tuple(tuple(v) for v in d.get("lanes") or []),
                    extent=_one_program(pid, int(d.get("count", 0)), True, NOT_MEMORY))]


def _stored_nonfinite(ctx: LaunchContext, ti: int, places: list) -> tuple:
    """(rows, offsets, values, complete, dropped) of the active lanes whose stores to tensor ``ti`` at
    ``places`` ((file, line) pairs) wrote NaN or Inf and whose program did not overwrite them later;
    ``complete``: every such row's values were recorded; ``dropped``: the lanes left out as overwritten."""
    lc, files = ctx.launch, list(ctx.launch.files)
    at = np.zeros(ctx.n_rows, dtype=bool)
    for file, line in places:
        if file in files:
            at |= (ctx.file == files.index(file)) & (ctx.line == int(line or 0))
    rows = np.flatnonzero(at & (ctx.tensor == ti) & ctx.is_write & (ctx.lane_count > 0))
    if not len(rows):
        return rows, rows, np.zeros(0), True, 0
    _, vals, has = lane_values(lc, rows)
    cnt = ctx.lane_count[rows]
    off, mask = lc.lanes.gather(lc.ops["lane_start"][rows], cnt)
    bad = has & mask & ~np.isfinite(vals)
    lane_rows = np.repeat(rows, cnt)
    complete = bool((lc.ops["value_dtype"][rows] >= 0).all())
    lane_rows, off, vals = lane_rows[bad], off[bad].astype(np.int64), vals[bad]
    keep = ~_overwritten_later(ctx, ti, lane_rows, off)
    return lane_rows[keep], off[keep], vals[keep], complete, int((~keep).sum())


def _overwritten_later(ctx: LaunchContext, ti: int, rows: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Per (row, offset): the same program writes that element of tensor ``ti`` again later, so the value
    never stays in memory (a tile stored whole, then its upper triangle zeroed: fla's GLA ``A``). A program's
    rows are in its execution order."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    progs = sorted_unique(ctx.row_prog[rows])
    writes = np.flatnonzero((ctx.tensor == ti) & ctx.is_write & (ctx.lane_count > 0))
    writes = writes[np.isin(ctx.row_prog[writes], progs)]
    wr, wo = ctx.row_lanes(writes)
    lo = int(min(wo.min(initial=0), off.min()))
    span = int(max(wo.max(initial=0), off.max())) - lo + 1
    if len(progs) * span >= 1 << 62:          # the key below would not fit: keep every value
        return np.zeros(len(rows), dtype=bool)
    key_w = ctx.row_prog[wr].astype(np.int64) * span + (wo.astype(np.int64) - lo)
    order = np.lexsort((wr, key_w))            # by key, then row: each key's last write is its last entry
    key_w, last_row = key_w[order], wr[order]
    ends = np.flatnonzero(np.append(key_w[1:] != key_w[:-1], True))
    key_w, last_row = key_w[ends], last_row[ends]
    key = ctx.row_prog[rows].astype(np.int64) * span + (off - lo)
    at = np.clip(np.searchsorted(key_w, key), 0, max(len(key_w) - 1, 0))
    found = (len(key_w) > 0) & (key_w[at] == key)
    return found & (last_row[at] > rows)


def _poisoned(ctx: LaunchContext, ti: int, places: list, fallback_pid, fallback_lanes: int) -> tuple:
    """(extent, attributed rows) of every non-finite value the stores at ``places`` wrote to tensor ``ti``;
    None when every one was overwritten by its own program before the launch ended."""
    rows, off, vals, complete, dropped = _stored_nonfinite(ctx, ti, places)
    if not len(rows):
        if dropped and complete:
            return None
        return (_one_program(fallback_pid, fallback_lanes, False, "the stores' values were not recorded"),
                np.zeros(0, np.int64))
    prog = sorted_unique(ctx.row_prog[rows])
    u = sorted_unique(off)
    k = ctx.params.max_examples
    first = [{"offset": int(o), "index": None, "program": ctx.pid(int(ctx.row_prog[r])), "value": E._number(v)}
             for o, r, v in zip(off[:k].tolist(), rows[:k].tolist(), vals[:k].tolist())]
    t = ctx.launch.tensors[ti]
    if len(t.shape) and first:
        inside, idx = E.view_positions(t, off[:k])
        for i, f in enumerate(first):
            f["index"] = [int(v) for v in idx[i]] if inside[i] else None
    x = {"programs": E.programs(ctx, prog), "elements": E.elements(u, u + 1, len(off), first),
         "poisoned": {"values": int(len(off)), "programs": int(len(prog)),
                      "nan": int(np.isnan(vals).sum()), "inf": int(np.isinf(vals).sum())},
         "exact": complete}
    if not complete:
        x["note"] = "the value cap was hit: later stores' values were not recorded"
    return x, E.attributed(ctx, prog, rows)


def check_nonfinite(ctx: LaunchContext) -> list:
    """NaN / Inf that reached memory (record/checks/nonfinite.py): born in the kernel from finite operands
    (``nonfinite``), or carried in from an argument that already held them (``nonfinite_input``). One
    finding per cause (the birth line, or the input argument) and stored tensor."""
    lc = ctx.launch
    causes: dict = {}
    for r in (lc.meta or {}).get("nonfinite") or []:
        kind = r.get("kind", "nonfinite")
        src = (r.get("birth") or {}) if kind in ("nonfinite", "overflow") else (r.get("input") or {})
        cause = (src.get("file"), src.get("line")) if kind != "nonfinite_input" else (src.get("tensor"),)
        # repr: a key whatever a (possibly damaged) trace file put in these fields
        causes.setdefault(repr((kind, cause, r.get("tensor"))), []).append(r)
    names = {t.name: i for i, t in enumerate(lc.tensors)}
    out = []
    for rs in causes.values():
        r = rs[0]
        kind, tensor = r.get("kind", "nonfinite"), r.get("tensor")
        pid = tuple(r.get("program") or (0, 0, 0))
        places = sorted({(str(x.get("file")), int(x.get("line") or 0)) for x in rs})
        stores = ", ".join(f"{f}:{ln}" for f, ln in places)
        if isinstance(tensor, str) and tensor in names:
            found = _poisoned(ctx, names[tensor], places, pid, int(r.get("lanes") or 0))
            if found is None:           # never stayed in memory: overwritten by the program that stored it
                continue
            extent, attributed = found
        else:
            extent = _one_program(pid, int(r.get("lanes") or 0), False, "the stored tensor is not in the trace")
            attributed = np.zeros(0, np.int64)
        if kind in ("nonfinite", "overflow"):
            b = r.get("birth") or {}
            ops = ", ".join(str(v) for v in b.get("operands") or [])
            extent["birth"] = {"file": b.get("file"), "line": b.get("line"), "op": b.get("op")}
            # the recorder names a zero divisor as the cause (record/checks/nonfinite.py): "a float division by zero"
            why = f"{b.get('cause')}; " if b.get("cause") else ""
            head = (f"born at {b.get('file')}:{b.get('line')} in {b.get('op')} from finite operands ({ops}) -> "
                    f"{b.get('result')} ({why}first in program {pid}, at block index {tuple(b.get('lane') or ())})")
            line = b.get("line")
        else:
            s = r.get("input") or {}
            head = (f"came from '{s.get('tensor')}', which already held NaN/Inf (element offset {s.get('offset')}, "
                    f"loaded at {s.get('file')}:{s.get('line')} by program {pid})")
            line = r.get("line")
        el = extent["elements"]
        n = el["lanes"] or int(r.get("lanes") or 0)
        message = (f"NaN/Inf {head}; the store(s) of '{tensor}' at {stores} wrote {n} non-finite value(s) "
                   f"{E.describe(extent)}" + (f" (element offsets {short_list(f['offset'] for f in el['first'])})"
                                             if el["first"] else ""))
        out.append(Finding(kind=kind, kernel=lc.kernel_name, launch=ctx.index, message=message, count=n,
                           program=pid, file=r.get("file"), line=int(line or 0), tensor=tensor, op="store",
                           offsets=tuple(f["offset"] for f in el["first"]) or tuple(r.get("offsets") or ()),
                           rows=len(attributed), extent=extent, op_rows=attributed,
                           op_row=_memory_row(ctx, pid, r.get("line"), WRITE_CODES)))
    return out


def check_overflow(ctx: LaunchContext) -> list:
    """Integers that did not fit their type and reached memory (record/checks/overflow.py): an int32 index that
    wrapped and then addressed memory, a float-to-int conversion out of range that was stored or used as
    an address. (Floats that overflow a narrower float type are check_nonfinite's, kind ``overflow``.) One
    finding per cause (the wrapping op's line, the memory op's line, address or value), with every program
    it reached."""
    lc = ctx.launch
    out = []
    for r in (lc.meta or {}).get("overflow") or []:
        pid, c = tuple(r.get("program") or (0, 0, 0)), r.get("cause") or {}
        op = str(c.get("op", ""))
        ops = f" {op.split()[-1]} ".join(str(v) for v in c.get("operands") or []) if op.startswith("int32") \
            else ", ".join(str(v) for v in c.get("operands") or [])
        what = ("addressed memory" if r.get("how") == "address" else "was stored") + \
            (f" ('{r.get('tensor')}')" if r.get("tensor") else "")
        extent, count, prog = reach(ctx, r, pid)
        if not hit_elements(ctx, r, extent, MEMORY_CODES):
            el = whole_rows(ctx, r, prog, count)
            if el is not None:
                extent["elements"] = el
        message = (f"{c.get('op')} at {c.get('file')}:{c.get('line')} does not fit: {ops} = {c.get('exact')}, "
                   f"became {c.get('result')}; the value {what} at {r.get('file')}:{r.get('line')}, first in "
                   f"program {pid}: {count} active lane(s) {E.describe(extent)}")
        out.append(Finding(kind="overflow", kernel=lc.kernel_name, launch=ctx.index, message=message,
                           count=count, program=pid, file=c.get("file"), line=int(c.get("line") or 0),
                           tensor=r.get("tensor"), op=r.get("op"), extent=extent,
                           offsets=tuple(f["offset"] for f in extent["elements"]["first"]),
                           op_rows=op_rows(ctx, r.get("file"), r.get("line"), MEMORY_CODES, prog),
                           op_row=_memory_row(ctx, pid, r.get("line"), MEMORY_CODES)))
    return out


def op_rows(ctx: LaunchContext, file, line, codes, prog) -> np.ndarray:
    """A row of the op at ``file:line`` (kinds ``codes``) for each program in ``prog``: what the per-program
    and per-op finding counts attribute the finding to."""
    if prog is None or not len(prog):
        return np.zeros(0, np.int64)
    return E.attributed(ctx, prog, rows_at(ctx, file, line, codes, prog))
