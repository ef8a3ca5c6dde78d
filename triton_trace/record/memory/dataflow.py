"""Which loads fed each store: dataflow provenance, carried on the values as the kernel computes them.

Every value a load (or an atomic, which reads) returns is tagged with its op's event and the identity map of
its lanes; every builder op passes the union of its operands' tags on, each with the map from the load's
lane dims to the result's: the same lanes through elementwise math and broadcasts, a dot's A row and B
column (the contracted dim becomes "every index"), a reduction's or scan's axis becomes "every index", a
transpose permutes. An op this module does not know maps every dim to "every index": the whole loaded tile,
a superset, never a loss. A store (or an atomic) then records, per load line it depends on, which of that
line's executions fed it and the lane map; the view narrows a stored element to the loaded elements from it
(view/feeds.py).

A tag (record/memory/feedtags.py) is a frozenset of (load line, lane map, run of its executions): a loop's
state, fed by a load every trip, carries one entry per load line however many trips ran (a K loop's
accumulator: two), so an op costs a dict lookup per operand and a union where tags meet. The monitor is
a row of checks/table.py (not a check: it follows their protocol, so the collector drives it, a worker process
merges it and the trace file checks its record). Loops
whose trip counts differ between the programs of a batched chunk merge values row by row
(record/divergence), which does not keep these tags: a write in a chunk that ran such a construct records,
conservatively, every load line its chunk ran before it, every lane ("how": "untraced").

The facts go to ``Launch.meta["dataflow"]``, one entry per (write line, load line, executions, lane map,
role), with the programs it holds for when not every program that ran the write line. Executions are
counted per program among its executions of the load line before the write: ``first`` from the start (0) or,
negative, back from the write; ``last`` back from the write (-1: the most recent one). A write line's facts
hold for each of its executions: a run that starts at the line's first execution counts from the start only
when more than one ran (at a loop's first trip the most recent one is the first too, and "the most recent"
is what a later trip's query, fed by its own trip's load alone, needs).
"""
from __future__ import annotations

import numpy as np

from ..checks.monitor import MAX_PROGRAMS, Monitor
from .feedtags import ALL, EXPAND, count, merge_runs, runs_of

__all__ = ["ALL", "Dataflow", "kind_codes"]


def kind_codes() -> tuple:
    """(op kind names, codes of the kinds that read, codes of those that write). Loaded on first use: the
    model's lanes and values are no import of the hooks (tests/project/test_import_chains.py)."""
    from ...model.trace import KINDS, READ_KINDS, WRITE_KINDS
    return (KINDS, frozenset(i for i, k in enumerate(KINDS) if k in READ_KINDS),
            frozenset(i for i, k in enumerate(KINDS) if k in WRITE_KINDS))


class Dataflow(Monitor):
    """One launch's facts: what each write line was fed by. The running chunk's go to ``pending`` (a chunk that
    is undone forgets them) and are folded into counts when the next chunk starts or a mark is taken (the
    collector marks just before the chunk it may undo)."""

    def __init__(self, tensors, outputs=()):
        super().__init__(tensors, outputs)
        self.pending: list = []         # (fact or ("write",) + write-site key, the programs it holds for)
        self.count: dict = {}           # key -> the write events it was recorded at
        self.parts: dict = {}           # fact key -> the program arrays it holds for (None: past MAX_PROGRAMS)
        self._kept = np.zeros((0, 3), np.int32)     # the running chunk's recorded programs
        self.diverged = False
        self._sites: dict = {}          # load site -> [its id, its block's rank, its executions so far in the chunk]
        self._names: dict = {}          # a load site's id -> the site (ids are new each chunk: a stale tag names none)
        self._pos: dict = {}            # event index -> (its load site's id, its place among the site's)
        self._scanned = None            # the next event to file under its site
        self._next = 0
        self._kinds, self._reads, _ = kind_codes()

    def begin(self, pids, keep, batched) -> None:
        self._fold()
        self._kept = pids if keep is None else pids[keep]
        self.diverged = False
        self._forget()

    def _forget(self) -> None:
        self._sites, self._names, self._pos, self._scanned = {}, {}, {}, None

    def set_active(self, active, rows=None) -> None:
        if active is not None or rows is not None:
            self.diverged = True        # a masked construct: merged values lose their tags (module doc)

    def mark(self):
        self._fold()

    def rollback(self, mark) -> None:
        self.pending.clear()
        self._forget()

    def _fold(self) -> None:
        for key, pids in self.pending:
            self.count[key] = self.count.get(key, 0) + 1
            if key[0] == "write":
                continue
            parts = self.parts.setdefault(key, [0])
            if parts is not None and parts[0] + len(pids) <= MAX_PROGRAMS:
                parts[0] += len(pids)
                parts.append(pids)
            else:
                self.parts[key] = None
        self.pending.clear()

    # -- worker processes (record/parallel/): a worker's counts and programs add to this process's -----------
    def fork_point(self):
        self._fold()
        return dict(self.count), {k: None if v is None else len(v) for k, v in self.parts.items()}

    def since(self, point) -> tuple:
        self._fold()
        counts, sizes = point
        grown = {k: n - counts.get(k, 0) for k, n in self.count.items() if n != counts.get(k, 0)}
        parts = {k: None if v is None else v[sizes.get(k) or 1:] for k, v in self.parts.items()
                 if v is None or len(v) != sizes.get(k)}
        return grown, parts

    def mergeable(self, added):
        return None

    def merge(self, added) -> None:
        grown, parts = added
        for k, n in grown.items():
            self.count[k] = self.count.get(k, 0) + n
        for k, new in parts.items():
            mine = self.parts.setdefault(k, [0])
            if new is None or mine is None or mine[0] + sum(len(p) for p in new) > MAX_PROGRAMS:
                self.parts[k] = None
            else:
                mine[0] += sum(len(p) for p in new)
                mine.extend(new)

    # -- a read and a write ----------------------------------------------------------------------------------
    def read(self, events, r: int) -> tuple:
        """(the id of read event ``r``'s load site in the running chunk, its place among the site's executions)."""
        if r not in self._pos:
            self._file_sites(events.events, r + 1, r)
        return self._pos[r]

    def wrote(self, events, files, w: int, fed: dict) -> None:
        """Event ``w`` (a store or an atomic) wrote values depending on ``fed``: role -> tag (feedtags.py)."""
        ev = events.events[w]
        site = self._site(ev, files)
        kept = self._kept if ev.rows is None else self._kept[ev.rows]
        self.pending.append((("write",) + site, kept))
        self._file_sites(events.events, w, w)
        if self.diverged:
            for lsite, (_, ndim, _) in self._sites.items():
                self.pending.append((site + self._named(lsite, files) + (0, -1, 1, (ALL,) * ndim, "value", "untraced"),
                                     kept))
            return
        for role, found in fed.items():
            groups: dict = {}
            for sid, dims, first, last, step in found:
                lsite = self._names.get(sid)
                if lsite is not None:
                    groups.setdefault((lsite, dims), []).append((first, last, step))
            for (lsite, dims), runs in groups.items():
                n = self._sites[lsite][2]
                named = site + self._named(lsite, files)
                for first, last, step in _cut(runs):
                    key = named + (first if first == 0 and n > 1 else first - n, last - n, step, dims, role, "traced")
                    self.pending.append((key, kept))

    def _site(self, ev, files) -> tuple:
        return (files[ev.file] if 0 <= ev.file < len(files) else None, int(ev.line), self._kinds[ev.kind],
                self.tensor_name(ev.tensor))

    def _named(self, lsite: tuple, files) -> tuple:
        f, line, kind, tensor = lsite
        return (files[f] if 0 <= f < len(files) else None, line, self._kinds[kind], self.tensor_name(tensor))

    def _file_sites(self, events: list, upto: int, at: int) -> None:
        """File the running chunk's read events before ``upto`` under their load sites (``at``: one of its events)."""
        if self._scanned is None:           # the chunk's first read or write: find where the chunk began
            chunk = events[at].chunk
            while at > 0 and events[at - 1].chunk == chunk:
                at -= 1
            self._scanned = at
        for i in range(self._scanned, upto):
            ev = events[i]
            if ev.kind in self._reads:
                key = (ev.file, int(ev.line), ev.kind, ev.tensor)
                entry = self._sites.get(key)
                if entry is None:
                    entry = self._sites[key] = [self._next, len(ev.shape), 0]
                    self._names[self._next] = key
                    self._next += 1
                self._pos[i] = (entry[0], entry[2])
                entry[2] += 1
        self._scanned = max(self._scanned, upto)

    # -- the finished launch ---------------------------------------------------------------------------------
    def records(self) -> dict:
        self._fold()
        out = []
        for key in sorted((k for k in self.count if k[0] != "write"), key=_order):
            wfile, wline, wop, wtensor, lfile, lline, lop, ltensor, first, last, step, dims, role, how = key
            entry = {"file": wfile, "line": wline, "op": wop, "tensor": wtensor, "load_file": lfile,
                     "load_line": lline, "load_op": lop, "load_tensor": ltensor,
                     "first": first, "last": last, "step": step, "dims": list(dims), "role": role, "how": how}
            parts = self.parts.get(key)
            # fewer write events than its line's: it holds for some programs only (listed when they fit; past
            # MAX_PROGRAMS it is given for all of them, a superset)
            if self.count[key] < self.count.get(("write",) + key[:4], 0) and parts is not None:
                pids = np.concatenate([np.asarray(p, np.int64).reshape(-1, 3) for p in parts[1:]])
                entry["programs"] = [list(p) for p in sorted({tuple(int(v) for v in p) for p in pids})]
            out.append(entry)
        return {"dataflow": out}


def _order(key) -> tuple:
    return tuple((0, "") if v is None else (1, str(v)) if isinstance(v, (str, tuple)) else (1, f"{v:020d}")
                 for v in key)


def _cut(runs: list) -> list:
    """A load line's runs as a write records them: few places are re-cut from the places themselves (the same
    runs whatever order the tags were joined in), many are the tags' runs, joined."""
    if len(runs) == 1:
        return runs
    if sum(count(r) for r in runs) <= EXPAND:
        return list(runs_of(sorted({p for a, b, k in runs for p in range(a, b + 1, k)})))
    return merge_runs(runs)
