"""A lock released, or a flag or counter set, by a scalar atomic right after plain block stores of data other
programs read, with no ``tl.debug_barrier()`` between them.

The pattern (Triton's layer-norm backward, split-K and stream-K "the last program reduces" kernels): store a
block, then ``tl.atomic_xchg(lock, 0)`` or ``tl.atomic_add(count, 1)`` to tell other programs it is there.
On a GPU a program runs as several warps, each holding some lanes of the block, and a scalar atomic is
issued by one thread (the compiler predicates the redundant copies off). Its ``sem`` (``acq_rel`` by
default, or ``release``) is a release *for that thread*: PTX's release orders the issuing thread's own
earlier writes (and what it observed), not the other warps' stores, which may still be in flight when
another program sees the atomic and reads the block. ``tl.debug_barrier()`` lowers to ``bar.sync``, after
which every warp's earlier stores are ordered before the releasing thread's atomic: that is the fix, as the
tutorial's "need a barrier to ensure all threads finished before releasing the lock". Which Triton compiles
the kernel matters: 3.6 emits no barrier between the ``st.global`` and the predicated ``atom`` (its PTX for
sm_80 and sm_90, checked with compiled/), while releases with triton-lang/triton#10816 (3.9) put a
``bar.sync`` before a release or acq_rel atomic themselves. The finding stands for both (a kernel right only
on the newest compiler), and its message says so.

The interpreter runs a program as one step, so no value shows the race: this is a check of each program's
recorded op order (``record/checks/barriers.py`` records barriers as op rows and each atomic line's sem).
An atomic is flagged in a program when

- it is scalar (one active lane, or every active lane on one address) with ``sem`` ``acq_rel`` or
  ``release`` (``acquire`` and ``relaxed`` publish nothing);
- some plain store of the program since its last barrier before the atomic is a block store (more than one
  lane, so other warps may hold lanes; ``num_warps`` is not in the trace) with an active lane on an
  element that another program of the launch also accesses (load, store or atomic): a store nobody else
  touches during the kernel cannot be read too early.

One finding per atomic line: its programs (count, runs), the stores it follows (their lines, tensors and
shared elements: the kind's own extent key ``stores``), and the elements those stores write that other
programs access (the extent's ``elements`` when the stores write one tensor). Severity warning: a possible
race on the GPU, invisible to the trace. A trace recorded before barriers were (no ``atomic_sem`` record)
is not judged.
"""
from __future__ import annotations

import numpy as np

from ...model import KIND_CODE
from ...model.overlap import ranges_disjoint
from . import extent as E
from ..context import KIND_NAMES, STORE, LaunchContext, sorted_unique
from ..findings import Finding
from .recorded import named_elements

BARRIER = KIND_CODE["barrier"]
RELEASING = ("acq_rel", "release")
S, B, A = 0, 1, 2          # event types: a block store, a barrier, a releasing scalar atomic


def check_releases_without_barrier(ctx: LaunchContext) -> list:
    sems = (ctx.launch.meta or {}).get("atomic_sem")
    if not sems or not ctx.n_rows:
        return []
    atoms = _releasing_atomics(ctx, sems)
    stores = np.flatnonzero((ctx.kind == STORE) & (ctx.lane_count > 1) & (ctx.active_lanes > 0))
    if not len(atoms) or not len(stores):
        return []
    order = _Order(ctx, stores, np.flatnonzero(ctx.kind == BARRIER), atoms)
    unfenced = order.unfenced_stores()
    if not len(unfenced):
        return []
    shared = _shared_lanes(ctx, unfenced)
    if not len(shared[0]):
        return []
    order.keep_stores(sorted_unique(shared[0]))
    flagged = order.flagged()
    out = []
    for op in sorted_unique(ctx.row_op[order.rows[flagged]]):
        mine = flagged[ctx.row_op[order.rows[flagged]] == op]
        out.append(_finding(ctx, order.rows[mine], order.covered_stores(mine), sems, shared))
    return out


def _releasing_atomics(ctx: LaunchContext, sems: list) -> np.ndarray:
    """The rows of scalar atomics at lines whose sem releases."""
    files = list(ctx.launch.files)
    keys = [(files.index(r.get("file")) if r.get("file") in files else -1) * (1 << 32) + int(r.get("line") or 0)
            for r in sems if r.get("sem") in RELEASING]
    rows = np.flatnonzero(ctx.is_atomic & (ctx.active_lanes > 0) & np.isin(ctx.file * (1 << 32) + ctx.line, keys))
    wide = rows[ctx.lane_count[rows] > 1]
    if len(wide):             # several lanes: scalar only when every active one is on one address
        lr, _, off = ctx.inside_lanes(wide)
        lo, hi = np.full(ctx.n_rows, np.iinfo(np.int64).max), np.full(ctx.n_rows, -1)
        np.minimum.at(lo, lr, off)
        np.maximum.at(hi, lr, off)
        rows = rows[(ctx.lane_count[rows] == 1) | (lo[rows] == hi[rows])]
    return rows


class _Order:
    """The block stores, barriers and releasing atomics of every program, in each program's op order, and
    which stores come before an atomic with no barrier between."""

    def __init__(self, ctx: LaunchContext, stores, barriers, atoms):
        rows = np.concatenate([stores, barriers, atoms]).astype(np.int64)
        typ = np.repeat([S, B, A], [len(stores), len(barriers), len(atoms)])
        o = np.lexsort((ctx.seq[rows], ctx.row_prog[rows]))
        self.rows, self.typ = rows[o], typ[o]
        n = len(rows)
        prog = ctx.row_prog[self.rows]
        pos = np.arange(n)
        new = np.r_[True, prog[1:] != prog[:-1]]
        self.first = np.maximum.accumulate(np.where(new, pos, 0))                  # the program's first event
        self.last = np.minimum.accumulate(np.where(np.r_[new[1:], True], pos, n)[::-1])[::-1]
        self.last_barrier = np.maximum.accumulate(np.where(self.typ == B, pos, -1))
        self.store = self.typ == S

    def unfenced_stores(self) -> np.ndarray:
        """Rows of the stores followed, in their program, by a releasing atomic before any barrier."""
        n, pos = len(self.rows), np.arange(len(self.rows))
        nxt = lambda t: np.minimum.accumulate(np.where(self.typ == t, pos, n)[::-1])[::-1]
        next_a, next_b = nxt(A), nxt(B)
        return self.rows[self.store & (next_a < next_b) & (next_a <= self.last)]

    def keep_stores(self, rows: np.ndarray) -> None:
        """Only these stores count (the others write nothing another program accesses)."""
        self.store = (self.typ == S) & np.isin(self.rows, rows)

    def flagged(self) -> np.ndarray:
        """Positions of the atomics some counted store precedes with no barrier between, in their program."""
        pos = np.arange(len(self.rows))
        last_store = np.maximum.accumulate(np.where(self.store, pos, -1))
        return pos[(self.typ == A) & (last_store >= self.first) & (last_store > self.last_barrier)]

    def covered_stores(self, atoms: np.ndarray) -> np.ndarray:
        """Rows of the counted stores between each of the atomics ``atoms`` (positions) and the barrier
        before it (or its program's start)."""
        cover = np.zeros(len(self.rows) + 1, np.int64)
        np.add.at(cover, np.maximum(self.last_barrier[atoms] + 1, self.first[atoms]), 1)
        np.add.at(cover, atoms, -1)
        return self.rows[self.store & (np.cumsum(cover)[:-1] > 0)]


def _shared_lanes(ctx: LaunchContext, stores: np.ndarray) -> tuple:
    """(row, lane index, offset) of the active lanes of ``stores`` on an element that another program also
    accesses, by storage (arguments that view one storage compared in its smallest element size)."""
    infos = ctx.launch.tensors
    storage = np.array([t.storage if t.storage >= 0 else -1 - i for i, t in enumerate(infos)] + [-(1 << 40)])
    found = [], [], []
    for sid in sorted_unique(storage[ctx.tensor[stores]]):
        members = np.flatnonzero(storage[:-1] == sid)
        if not len(members):
            continue              # (lanes no argument holds)
        unit = min(infos[i].elem_bytes for i in members)
        rows = ctx.mem_rows[np.isin(ctx.tensor[ctx.mem_rows], members)]
        if _spans_disjoint(ctx, rows, unit):
            continue              # each program keeps to its own part of the storage (rows, blocks)
        lr, lane, off = ctx.inside_lanes(rows)
        el, prog = off * ctx.eb[lr] // unit, ctx.row_prog[lr]
        o = np.lexsort((prog, el))
        e, p = el[o], prog[o]
        # an element whose sorted accesses span two programs: its first and last program differ
        start = np.r_[True, e[1:] != e[:-1]]
        group = np.cumsum(start) - 1
        lo, hi = p[start], p[np.r_[start[1:], True]]
        many = (lo != hi)[group]
        mine = np.isin(lr[o], stores) & many
        for a, b in zip(found, (lr[o][mine], lane[o][mine], off[o][mine])):
            a.append(b)
    if not found[0]:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return tuple(np.concatenate(x).astype(np.int64) for x in found)


def _spans_disjoint(ctx: LaunchContext, rows: np.ndarray, unit: int) -> bool:
    """Whether the programs' spans of the storage (each row's lowest to highest offset, masked lanes
    included) miss each other: then no element is shared, decided without decoding a lane."""
    lo = np.full(ctx.n_programs, np.iinfo(np.int64).max, np.int64)
    hi = np.full(ctx.n_programs, -1, np.int64)
    np.minimum.at(lo, ctx.row_prog[rows], ctx.row_lo[rows] * ctx.eb[rows] // unit)
    np.maximum.at(hi, ctx.row_prog[rows], ((ctx.row_hi[rows] + 1) * ctx.eb[rows] - 1) // unit)
    return ranges_disjoint(lo, hi)


def _finding(ctx: LaunchContext, atoms: np.ndarray, stores: np.ndarray, sems: list, shared: tuple) -> Finding:
    lc = ctx.launch
    first = int(atoms.min())
    loc = ctx.row_location(first)
    op = str(KIND_NAMES[int(ctx.kind[first])])
    lock = ctx.tensor_name(int(ctx.tensor[first]))
    prog = sorted_unique(ctx.row_prog[atoms])
    sel = np.isin(shared[0], stores)
    lr, lanes, off = shared[0][sel], shared[1][sel], shared[2][sel]
    listed, tensors = [], sorted_unique(ctx.tensor[stores])
    for sop in sorted_unique(ctx.row_op[stores]):
        r = stores[ctx.row_op[stores] == sop]
        hit = np.isin(lr, r)
        at = ctx.row_location(int(r[0]))
        listed.append({"file": at["file"], "line": at["line"], "tensor": ctx.tensor_name(int(ctx.tensor[r[0]])),
                       "elements": int(len(sorted_unique(off[hit]))), "lanes": int(hit.sum())})
    extent = {"programs": E.programs(ctx, prog), "exact": True, "stores": listed[:E.MAX_RANGES]}
    if len(tensors) == 1:
        extent["elements"] = named_elements(ctx, int(tensors[0]), np.sort(lanes), int(len(lanes)))
    else:
        extent["elements"] = E.uncounted(int(len(lanes)), "the stores write several tensors: 'stores' counts "
                                                          "each one's")
    line_sems = sorted({r.get("sem") for r in sems if r.get("file") == loc["file"] and
                        int(r.get("line") or 0) == loc["line"] and r.get("sem") in RELEASING})
    sem = "/".join(line_sems) or "acq_rel"
    what = "; ".join(f"'{s['tensor']}' at {s['file']}:{s['line']} ({s['elements']} element(s) other programs "
                     f"access)" for s in listed[:4]) + ("; ..." if len(listed) > 4 else "")
    triton = getattr(getattr(lc, "module", None), "triton", None)
    message = (f"tl.{op} of '{lock}' at {loc['file']}:{loc['line']} in kernel '{lc.kernel_name}' (sem='{sem}'"
               f"{', the default' if sem == 'acq_rel' else ''}) follows plain block stores with no "
               f"tl.debug_barrier() between them: {what}; {E.describe(extent)}. On a GPU the scalar atomic is "
               f"issued by one thread of the program, and its release orders that thread's own earlier stores, "
               f"not the other warps': their lanes may not be stored yet when another program sees '{lock}' "
               f"change and reads them. Triton 3.6 compiles no barrier there; releases with "
               f"triton-lang/triton#10816 (3.9) put a bar.sync before a release atomic themselves"
               f"{f' (this trace: Triton {triton})' if triton else ''}, so the kernel is right only with those. "
               f"The interpreter runs a program as one step, so the trace cannot show it. Put "
               f"tl.debug_barrier() (bar.sync) between the last store and the atomic")
    return Finding(kind="release_without_barrier", kernel=lc.kernel_name, launch=ctx.index, message=message,
                   count=int(len(lanes)), program=tuple(ctx.pid(int(prog[0]))), file=loc["file"],
                   line=loc["line"], tensor=lock, op=op, offsets=tuple(int(v) for v in ctx.first_offsets(atoms[:1])),
                   rows=int(len(atoms)), extent=extent, op_row=first, op_rows=E.attributed(ctx, prog, atoms))
