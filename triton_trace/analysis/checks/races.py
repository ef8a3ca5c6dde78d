"""Races between the programs of one launch, with locks taken into account.

Definitions:

- Accesses are plain loads (R), plain stores (W) and atomics (A: an indivisible read and write).
  Two accesses to one element by different programs conflict when one is a plain store, or one is an
  atomic and the other a plain load: W-R, W-W, W-A, A-R. Atomics never conflict with each other, nor
  loads with loads. A conflict is a race: a GPU runs programs concurrently, in no guaranteed order.
- Locks. A program holds lock L from an ``atomic_cas`` on address L until its next ``atomic_xchg`` on L:
  ``while tl.atomic_cas(L, 0, 1) == 1: pass ... tl.atomic_xchg(L, 0)``, as in Triton's layer-norm
  backward tutorial. Two conflicting accesses made while both programs held the same lock are ordered
  by it: not a race. Only the innermost lock counts.
- Tickets. A scalar ``atomic_add`` (acq_rel, Triton's default, or release/acquire) on a counter orders
  its program's earlier stores before the later accesses of every program that takes a ticket on the same
  counter after it: "the last program to take a ticket reads every program's partial result" (split-K,
  stream-K, a grid-wide reduction). A store before a program's ticket and a load after a later ticket of
  another program are then not a race; two such stores of one element still are, and so is a load after
  an earlier ticket. The tickets' order is the order the interpreter ran them in (the row order), which is
  an order the GPU could have run them in, and the one the trace's values come from.
- Not recognised: other ways programs order themselves (a flag polled in a loop), a lock taken or released
  another way. Their accesses are reported as races. (The interpreter runs the programs one after
  another, so a spin loop never spins and the trace cannot show a wait.)
- An element is a place in a storage: two arguments that view one storage (``x`` and ``x[1:]``, an
  in-place kernel) are compared with each other, in units of the smallest element size among them.

A race is reported once per root cause: the op (kind, tensor, line) of the elements' first writer, over
every program. The writer of an element is its first plain store in execution order (else its first
atomic). The finding counts every racy element whose first writer is that op and lists every program
that writes them (stores, atomics) and every one that reads them (plain loads), with the lines they do
it at; ``other`` names the first access of another program that conflicts with the first writer.
"""
from __future__ import annotations

import numpy as np

from ...model.overlap import ranges_disjoint, shared_elements
from .. import context
from . import intervals, pieces
from ..context import CAS, LOAD, STORE, XCHG, LaunchContext, pattern_intervals, sorted_unique, unique_rows
from ...model import KIND_CODE
from . import extent as E
from ..findings import Finding, op_fields, short_list, where
from .extent import view_positions

R, W, A = 0, 1, 2
_NONE = np.iinfo(np.int64).max
ADD = KIND_CODE["atomic_add"]
_PUBLISH = ("acq_rel", "release")
_ACQUIRE = ("acq_rel", "acquire")


def lock_of_rows(ctx: LaunchContext) -> np.ndarray:
    """Per row: an id of the innermost lock its program holds when it runs, or -1."""
    lock = np.full(ctx.n_rows, -1, dtype=np.int64)
    cas = np.nonzero((ctx.kind == CAS) & (ctx.lane_count > 0))[0]
    if not len(cas):
        return lock
    rel = np.nonzero((ctx.kind == XCHG) & (ctx.lane_count > 0))[0]
    ev = np.r_[cas, rel]
    release = np.r_[np.zeros(len(cas), dtype=bool), np.ones(len(rel), dtype=bool)]
    addr = (ctx.tensor[ev] << 40) | (ctx.first_offsets(ev) & ((1 << 40) - 1))
    prog, seq = ctx.row_prog[ev], ctx.seq[ev]
    o = np.lexsort((seq, addr, prog))
    release, addr, prog, seq = release[o], addr[o], prog[o], seq[o]
    paired = np.r_[(prog[1:] == prog[:-1]) & (addr[1:] == addr[:-1]) & release[1:], False]
    until = np.where(paired, np.r_[seq[1:], 0], _NONE)        # the seq that releases each acquire
    acq = ~release
    span = int(ctx.seq.max(initial=0)) + 1
    akey = prog[acq] * span + seq[acq]
    o2 = np.argsort(akey, kind="stable")
    akey, a_prog, a_until = akey[o2], prog[acq][o2], until[acq][o2]
    a_id = np.unique(addr[acq], return_inverse=True)[1].reshape(-1)[o2]
    rows = ctx.mem_rows
    j = np.searchsorted(akey, ctx.row_prog[rows] * span + ctx.seq[rows], side="left") - 1
    jc = np.clip(j, 0, None)
    held = (j >= 0) & (a_prog[jc] == ctx.row_prog[rows]) & (ctx.seq[rows] < a_until[jc])
    lock[rows[held]] = a_id[jc[held]]
    return lock


def tickets_of_rows(ctx: LaunchContext) -> tuple:
    """Per row, (pub, acq): the row of the next ticket its program takes after it, and of the last one it
    took before it (-1: none), and (pub_at, acq_at) the counter of each (an id). A ticket is a scalar
    ``atomic_add`` (one active lane) whose sem publishes (acq_rel, release) or acquires (acq_rel, acquire);
    a trace without recorded sems has Triton's default, acq_rel."""
    n = ctx.n_rows
    none = np.full(n, -1, dtype=np.int64)
    rows = np.flatnonzero((ctx.kind == ADD) & (ctx.lane_count == 1) & (ctx.active_lanes == 1))
    if not len(rows):
        return none, none, none, none
    sem = {}
    files = list(ctx.launch.files)
    for e in (ctx.launch.meta or {}).get("atomic_sem") or []:
        if e.get("op") == "atomic_add" and e.get("file") in files:
            sem.setdefault((files.index(e["file"]), int(e["line"])), set()).add(e.get("sem"))
    sems = [sem.get((int(f), int(ln)), {"acq_rel"}) for f, ln in zip(ctx.file[rows], ctx.line[rows])]
    addr = (ctx.tensor[rows] << 40) | (ctx.first_offsets(rows) & ((1 << 40) - 1))
    at = np.unique(addr, return_inverse=True)[1].reshape(-1)
    span = int(ctx.seq.max(initial=0)) + 2
    mem = ctx.mem_rows
    key = ctx.row_prog[mem] * span + ctx.seq[mem]
    out = []
    for allowed, side in ((_PUBLISH, "right"), (_ACQUIRE, "left")):
        ok = np.array([bool(s & set(allowed)) for s in sems], dtype=bool)
        t, a = rows[ok], at[ok]
        tkey = ctx.row_prog[t] * span + ctx.seq[t]
        o = np.argsort(tkey, kind="stable")
        t, a, tkey = t[o], a[o], tkey[o]
        order, where_ = none.copy(), none.copy()
        if len(t):
            # publish: the first ticket after the row in its program; acquire: the last one before it
            j = np.searchsorted(tkey, key, side=side) - (0 if side == "right" else 1)
            jc = np.clip(j, 0, len(t) - 1)
            same = (j >= 0) & (j < len(t)) & (ctx.row_prog[t[jc]] == ctx.row_prog[mem]) & (t[jc] != mem)
            order[mem[same]], where_[mem[same]] = t[jc[same]], a[jc[same]]
        out.append((order, where_))
    (pub, pub_at), (acq, acq_at) = out
    return pub, acq, pub_at, acq_at


def check_races(ctx: LaunchContext) -> list:
    lock = lock_of_rows(ctx)
    tickets = tickets_of_rows(ctx)
    typ = np.where(ctx.kind == LOAD, R, np.where(ctx.kind == STORE, W, A))
    mem = ctx.mem_rows
    writers = mem[ctx.is_write[mem] & (ctx.active_lanes[mem] > 0)]
    written = {int(t) for t in sorted_unique(ctx.tensor[writers]) if t >= 0}
    findings = []
    for group in _storage_groups(ctx.launch.tensors):
        if not written.intersection(group):
            continue
        infos = [ctx.launch.tensors[i] for i in group]
        unit = min(t.elem_bytes for t in infos)
        size = max(t.storage_size * t.elem_bytes for t in infos) // unit
        rows = mem[np.isin(ctx.tensor[mem], group)]
        t = typ[rows]
        if context.SHORTCUTS and not (t == W).any() and not ((t == A).any() and (t == R).any()):
            continue                  # only atomics, or atomics and no plain loads: nothing can race
        if context.SHORTCUTS and (_owners_disjoint(ctx, rows, lock, unit) or _touched_once(ctx, rows, unit)):
            continue
        cut = pieces.cut(ctx, rows, unit) if context.SHORTCUTS else None
        if cut is not None:       # the elements as pieces: an entry per row and piece, not per lane
            lr = cut.row
            findings += _races(ctx, unit, cut.piece, lr, ctx.row_prog[lr], typ[lr], lock[lr],
                               tuple(x[lr] for x in tickets), cut)
            continue
        lr, off = ctx.row_lanes(rows)
        el = off * ctx.eb[lr] // unit
        p = ctx.row_prog[lr]
        sel = _may_race(el, p, typ[lr], lock[lr], size)
        if sel.any():
            findings += _races(ctx, unit, el[sel], lr[sel], p[sel], typ[lr[sel]], lock[lr[sel]],
                               tuple(x[lr[sel]] for x in tickets))
    return findings


def _owners_disjoint(ctx: LaunchContext, rows: np.ndarray, lock: np.ndarray, unit: int) -> bool:
    """No element of the storage can race, decided from per-row extremes without looking at lanes: the
    spans of offsets (every lane, masked or not) of different programs miss each other; or, giving each
    row to an owner (the lock it holds, else its program), the spans of different owners miss each other,
    so every element is touched by one program or only under one lock (a lock per group of rows)."""
    lo_el = ctx.row_lo[rows] * ctx.eb[rows] // unit
    hi_el = ctx.row_hi[rows] * ctx.eb[rows] // unit

    def disjoint(owner, n):
        lo = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        hi = np.full(n, -1, dtype=np.int64)
        np.minimum.at(lo, owner, lo_el)
        np.maximum.at(hi, owner, hi_el)
        return ranges_disjoint(lo, hi)

    prog = ctx.row_prog[rows]
    if disjoint(prog, ctx.n_programs):
        return True
    lk = lock[rows]
    if not (lk >= 0).any():
        return False
    n_locks = int(lk.max()) + 1
    return disjoint(np.where(lk >= 0, lk, n_locks + prog), n_locks + ctx.n_programs)


def _touched_once(ctx: LaunchContext, rows: np.ndarray, unit: int) -> bool:
    """No element of the storage is touched by two programs, decided from the rows' patterns: every row
    whose lanes are a known pattern of few runs (``ctx.row_sig``; a tile) gives intervals of elements,
    every other row the elements of its active in-bounds lanes, and a program's repeats of one access
    count once; when no two of them overlap, no element has two programs (tiles of a transpose)."""
    regular, groups = ctx.regular_groups(rows)
    regular &= ctx.eb[rows] == unit
    starts, ends = [], []
    for pat, members in groups:
        members = members[ctx.eb[members] == unit]
        if not len(members):
            continue
        key, _ = unique_rows(np.column_stack([ctx.row_prog[members], ctx.row_base[members]]))
        iv = pattern_intervals(pat, key[:, 1])
        if iv is None or len(sorted_unique(pat)) != len(pat):
            return False
        starts.append(iv[0])
        ends.append(iv[1])
    lr, off = ctx.row_lanes(rows[~regular])
    if len(lr):
        key, _ = unique_rows(np.column_stack([ctx.row_prog[lr], off * ctx.eb[lr] // unit]))
        starts.append(key[:, 1])
        ends.append(key[:, 1] + 1)
    if not starts:
        return True
    lo, hi = np.concatenate(starts), np.concatenate(ends)
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], hi[o]
    return bool((hi[:-1] <= lo[1:]).all())


def _may_race(el, p, typ, lk, size) -> np.ndarray:
    """Per lane: its element can race, a filter that _races confirms. An element can race only when a
    plain store, or an atomic and a plain load, reach it; when two programs touch it; and unless every
    access to it holds one and the same lock. Scatters and gathers over the storage, no sorting."""
    def touched(sel):
        m = np.zeros(size, dtype=bool)
        m[el[sel]] = True
        return m
    need = touched(typ == W)
    if (typ == A).any():
        need |= touched(typ == A) & touched(typ == R)
    keep = need[el]
    if not context.SHORTCUTS:
        return keep & shared_elements(el, p, size)[el]
    if keep.any() and (lk >= 0).any():
        one = np.empty(size, dtype=np.int64)
        one[el] = lk                                      # one of the locks the element is accessed under
        keep &= touched((lk < 0) | (one[el] != lk))[el]
    if keep.any():
        keep &= shared_elements(el[keep], p[keep], size)[el]
    return keep


def _storage_groups(tensors) -> list:
    """Tensor indices grouped by the storage they view, in argument order of each group's first."""
    groups: dict = {}
    for i, t in enumerate(tensors):
        groups.setdefault(("t", i) if t.storage < 0 else ("s", t.storage), []).append(i)
    return list(groups.values())


def _races(ctx, unit, el, lr, p, typ, lk, tickets, cut=None) -> list:
    """Per element (or per piece of ``cut``: ``el`` then numbers pieces), whether it races, and the
    findings. ``tickets``: (pub, acq, pub_at, acq_at) of each access (tickets_of_rows)."""
    o = np.argsort(el, kind="stable")                 # execution order kept within an element
    el, lr, p, typ, lk = el[o], lr[o], p[o], typ[o], lk[o]
    pub, acq, pub_at, acq_at = (x[o] for x in tickets)
    n = len(el)
    start = np.r_[0, np.flatnonzero(el[1:] != el[:-1]) + 1]
    seg = np.repeat(np.arange(len(start)), np.diff(np.r_[start, n]))

    def progs(sel):
        return (np.minimum.reduceat(np.where(sel, p, _NONE), start),
                np.maximum.reduceat(np.where(sel, p, -1), start))

    def pair(a, b):       # some access in a and some in b come from different programs
        (l1, h1), (l2, h2) = progs(a), progs(b)
        return (h1 >= 0) & (h2 >= 0) & ~((l1 == h1) & (h1 == l2) & (l2 == h2))

    locked = lk >= 0
    wr, at, rd = typ == W, typ == A, typ == R
    published = wr & ~locked & (pub >= 0)
    ordered = _ticket_ordered(p, rd & ~locked & (acq >= 0), published, pub, acq, pub_at, acq_at, start, seg)
    race = (pair(wr & ~locked & ~published, np.ones(n, dtype=bool)) | pair(published, ~ordered)
            | pair(wr & locked, ~locked) | pair(at & ~locked, rd) | pair(at & locked, rd & ~locked))
    lk_lo = np.minimum.reduceat(np.where(locked, lk, _NONE), start)
    lk_hi = np.maximum.reduceat(np.where(locked, lk, -1), start)
    race |= (lk_hi >= 0) & (lk_lo != lk_hi) & (pair(wr & locked, locked) | pair(at & locked, rd & locked))
    if not race.any():
        return []
    pos = np.arange(n)
    first = lambda sel: np.minimum.reduceat(np.where(sel, pos, _NONE), start)
    w = _NONE
    for cand in (wr & ~locked, at & ~locked, wr & locked, at & locked):    # the writer, by priority
        w = np.where(w == _NONE, first(cand), w)
    w = np.where(w == _NONE, start, w)
    wp, wt, wl = p[w][seg], typ[w][seg], lk[w][seg]
    conflicts = (p != wp) & ((wt == W) | (typ == W) | ((wt == A) & (typ == R))) & ~((lk >= 0) & (lk == wl)) \
        & ~(ordered & published[w][seg])
    other = first(conflicts)
    other = np.where(other == _NONE, first(p != wp), other)
    return _findings(ctx, unit, race, w, other, (lr, p, el, typ, seg), cut)


def _ticket_ordered(p, acquired, published, pub, acq, pub_at, acq_at, start, seg) -> np.ndarray:
    """Per access: a load after a ticket that comes after every other program's published store of its
    element, on the same counter (so every such store happened before it)."""
    if not acquired.any() or not published.any():
        return np.zeros(len(p), dtype=bool)
    pos = np.arange(len(p))
    last = np.maximum.reduceat(np.where(published, pub, -1), start)           # the latest publishing ticket
    at_last = np.maximum.reduceat(np.where(published & (pub == last[seg]), pos, -1), start)
    last_prog = np.where(at_last >= 0, p[np.maximum(at_last, 0)], -1)
    # the latest among the other programs': the reader's own store is ordered by its program anyway
    second = np.maximum.reduceat(np.where(published & (p != last_prog[seg]), pub, -1), start)
    before = np.where(p == last_prog[seg], second[seg], last[seg])
    lo = np.minimum.reduceat(np.where(published, pub_at, _NONE), start)
    hi = np.maximum.reduceat(np.where(published, pub_at, -1), start)
    one_counter = (lo[seg] == hi[seg]) & ((hi[seg] < 0) | (acq_at == hi[seg]))
    return acquired & one_counter & (before < acq)


def _findings(ctx, unit, race, w, other, acc, cut) -> list:
    """One finding per writer op: ``race`` per element (segment), ``w`` and ``other`` its first writer and
    first conflicting access, ``acc`` the accesses (row, program, element, type, segment)."""
    lr, p, el, typ, seg = acc
    bad = np.flatnonzero(race)
    key = ctx.row_op[lr[w[bad]]]
    ops = sorted_unique(key)
    gid = np.full(len(race), -1, dtype=np.int64)
    gid[bad] = np.searchsorted(ops, key)
    acc_gid = gid[seg]
    k = ctx.params.max_examples
    out = []
    for g in range(len(ops)):
        mine = bad[gid[bad] == g]                        # racy elements, ascending
        a = np.flatnonzero(acc_gid == g)                 # every access to them
        wrow, orow = int(lr[w[mine[0]]]), int(lr[other[mine[0]]])
        f, fo = op_fields(ctx, wrow), op_fields(ctx, orow)
        t = ctx.launch.tensors[int(ctx.tensor[wrow])]
        ids = el[w[mine]]
        count, first = pieces.elements(ids, cut, k)
        offs = first * unit // t.elem_bytes               # in the writer's tensor's elements
        lo = (ids if cut is None else cut.start[ids]) * unit
        hi = lo + (unit if cut is None else cut.length[ids] * unit)
        s, e = intervals.union(lo // t.elem_bytes, (hi + t.elem_bytes - 1) // t.elem_bytes)
        inside, idx = view_positions(t, offs)
        writes = typ[a] != R
        writers, readers = sorted_unique(p[a][writes]), sorted_unique(p[a][~writes])
        every = sorted_unique(p[a])
        ex = [{"offset": int(o), "index": [int(v) for v in idx[i]] if inside[i] else None, "program": None,
               "value": None} for i, o in enumerate(offs.tolist())]
        lanes = len(a) if cut is None else int(cut.length[el[a]].sum())     # an entry: a piece's elements
        extent = {"exact": True, "programs": E.programs(ctx, every), "elements": E.elements(s, e, lanes, ex),
                  "writers": E.listed(ctx, writers), "readers": E.listed(ctx, readers),
                  "accesses": _places(ctx, lr[a])}
        prog, oprog = ctx.pid(int(p[w[mine[0]]])), ctx.pid(int(p[other[mine[0]]]))
        what = f"'{t.name}'" if fo["tensor"] == t.name else \
            f"'{t.name}' and '{fo['tensor']}' (arguments that view the same memory)"
        places = "; ".join(f"{x['op']} at {x['file']}:{x['line']} by {x['programs']} program(s)"
                           for x in extent["accesses"][:4])
        msg = (f"race on {what}: {len(writers)} program(s) write ({_ids(ctx, writers)}) and {len(readers)} read "
               f"({_ids(ctx, readers)}) {E.elements_text(extent['elements'])} with no atomic, common lock or ticket "
               f"ordering them ({places}); first: program {E.pid_text(prog)} ({f['op']} at {where(f)}) and program "
               f"{E.pid_text(oprog)} ({fo['op']} at {where(fo)}), element offsets {short_list(int(v) for v in offs)}")
        out.append(Finding(
            kind="race", kernel=ctx.launch.kernel_name, launch=ctx.index, message=msg, count=count,
            program=tuple(prog), rows=len(sorted_unique(lr[a])), offsets=tuple(int(v) for v in offs),
            indices=tuple(tuple(int(v) for v in idx[i]) if inside[i] else None for i in range(len(offs))),
            other={"program": tuple(oprog), "file": fo["file"], "line": fo["line"], "op": fo["op"],
                   "tensor": fo["tensor"]},
            extent=extent, op_row=wrow, op_rows=E.attributed(ctx, every, lr[a]), **f))
    return out


def _ids(ctx: LaunchContext, prog: np.ndarray) -> str:
    return short_list((E.pid_text(ctx.pid(int(q))) for q in prog), 8) if len(prog) else "none"


def _places(ctx: LaunchContext, rows: np.ndarray) -> list:
    """The static ops of the accesses to the racy elements: {"op", "file", "line", "tensor", "programs"}."""
    sid = ctx.row_op[rows]
    out = []
    for op in sorted_unique(sid).tolist():
        sel = sid == op
        f = op_fields(ctx, int(ctx.op_first_row[op]))
        out.append({**f, "programs": int(len(sorted_unique(ctx.row_prog[rows[sel]])))})
    return out
