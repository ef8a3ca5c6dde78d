"""The protocol every runtime check's monitor follows, and the part most of them share.

The collector makes one monitor per row of checks/table.py for each launch and drives it through ``begin``
(a chunk of programs starts), ``set_active`` (a masked loop's trip: which programs run the ops),
``mark`` / ``rollback`` (a chunk that is undone and run again) and ``records`` (the finished launch: each
record the row declares, by name). ``Monitor`` does nothing at each of them, for a check that keeps only
maxima (an undone chunk that runs again finds the same ones); ``ProgramRows`` keeps which programs of the
running chunk its ops' rows are, which of them are kept (the program filter) and which run the current
ops, and the reports it keeps per launch, each with every program its cause reached and, where its check
names them (``hit``), which lanes of which op rows: the exact extent, without per-lane Python. The hooks hand
a monitor lanes with the program axis first when batched.
"""
from __future__ import annotations

import pickle
from typing import Optional

import numpy as np

MAX_REPORTS = 200         # entries kept per launch and list (one per memory line and cause)
MAX_PROGRAMS = 1 << 16    # programs listed per cause (past it the count is a lower bound)
# ints of the lanes a monitor's causes reached, per launch (past it a cause's lanes are some, not all: the
# analysis sees the listed lanes fall short of its lane count)
MAX_HIT_INTS = 1 << 18
HIT_HEAD = 5              # a hit: x, y, z, the op row's seq in its program, runs; then each run's first, end
# what ProgramRows.begin and set_active set anew for every chunk: not state a worker's merge must carry
_PER_CHUNK = frozenset({"_pids", "_keep", "_active", "_chunk", "batched", "_rows", "_seqs"})


class Monitor:
    """A check with nothing to follow per chunk. ``tensors``: the launch's TensorInfo list (it fills as the
    arguments are bound, after the monitor is made); ``outputs``: the arguments declared undefined at launch."""

    def __init__(self, tensors, outputs=()):
        self._tensors = tensors

    def begin(self, pids: np.ndarray, keep: Optional[np.ndarray], batched: bool) -> None:
        """A chunk starts: programs ``pids`` ((P, 3), in execution order), of which ``keep`` are recorded
        (None: all); batched: they run at once."""

    def set_active(self, active: Optional[np.ndarray], rows: Optional[np.ndarray] = None) -> None:
        """The ops' rows are the chunk's programs ``rows`` (None: all), of which ``active`` run the current
        ops (a masked loop's trips; None: all)."""

    def mark(self):
        return None

    def rollback(self, mark) -> None:
        """Forget what was noted since ``mark``."""

    def records(self) -> dict:
        """record name -> its entries, for each record the monitor's row in checks/table.py declares."""
        return {}

    # -- worker processes ------------------------------------------------------------------------------------
    # A check without its own four methods below keeps workers only where its whole state (records() folded
    # in) is what it was when the worker forked: what it counts need not show in its records until another
    # process's counts are added, so equal records alone say nothing.
    def fork_point(self):
        """In a worker process, right after it forked: where its own part begins."""
        return self._state()

    def since(self, point):
        """In the worker, at its end: what it noted since ``point`` (picklable), for ``merge``."""
        now = self._state()
        return None if now == point and now is not None else "changed"

    def mergeable(self, added) -> Optional[str]:
        """Why folding in ``added`` (``since`` of a worker that ran the programs after this monitor's) would
        not give what one process running them all in order notes, or None."""
        return None if added is None else (f"{type(self).__name__} has no merge of what a worker process noted "
                                           f"(record/checks/monitor.py: fork_point, since, mergeable, merge)")

    def _state(self) -> Optional[bytes]:
        self.records()
        try:
            return pickle.dumps(sorted((k, v) for k, v in vars(self).items() if k not in _PER_CHUNK), protocol=5)
        except (TypeError, AttributeError, pickle.PicklingError):
            return None                   # (then never taken as unchanged: see since)

    def merge(self, added) -> None:
        """Fold in ``added``, which ``mergeable`` accepted."""

    def tensor_name(self, tensor: int) -> Optional[str]:
        return self._tensors[tensor].name if tensor >= 0 else None


class ProgramRows(Monitor):
    lists: tuple = ("reports",)     # the report lists a rollback cuts back

    def __init__(self, tensors, outputs=()):
        super().__init__(tensors, outputs)
        self._pids = np.zeros((1, 3), np.int32)
        self._keep: Optional[np.ndarray] = None
        self._active: Optional[np.ndarray] = None
        self._chunk = (self._pids, None)     # the chunk's programs and which are kept, as begin() gave them
        self._rows: Optional[np.ndarray] = None      # the chunk's programs the ops' rows are (None: all)
        self._seqs = None              # (events counted, ops each kept program of the chunk ran so far)
        self.batched = False
        self._seen: set = set()
        self._reach: dict = {}         # cause key -> [the programs it reached, in order; its lanes in all]
        self._hits: dict = {}          # cause key -> [int64 arrays of hits, HIT_HEAD + 2 * runs ints each]
        self._hit_ints = 0
        for name in self.lists:
            setattr(self, name, [])

    def begin(self, pids: np.ndarray, keep: Optional[np.ndarray], batched: bool) -> None:
        self._pids, self._keep, self.batched = pids, keep, batched
        self._chunk = (pids, keep)
        self._active = self._rows = self._seqs = None

    def set_active(self, active: Optional[np.ndarray], rows: Optional[np.ndarray] = None) -> None:
        pids, keep = self._chunk
        self._pids = pids if rows is None else pids[rows]
        self._keep = keep if rows is None or keep is None else keep[rows]
        self._active, self._rows = active, rows

    def mark(self) -> tuple:
        reach = {k: (len(v[0]), v[1]) for k, v in self._reach.items()}
        hits = ({k: len(v) for k, v in self._hits.items()}, self._hit_ints)
        return tuple(len(getattr(self, name)) for name in self.lists), set(self._seen), reach, hits

    def rollback(self, mark: tuple) -> None:
        sizes, self._seen, reach, (hits, self._hit_ints) = mark
        for name, n in zip(self.lists, sizes):
            del getattr(self, name)[n:]
        self._reach = {k: [v[0][:reach[k][0]], reach[k][1]] for k, v in self._reach.items() if k in reach}
        self._hits = {k: v[:hits[k]] for k, v in self._hits.items() if k in hits}
        self._seqs = None              # the events it counted may be undone

    def reach(self, key, pid: tuple, lanes: int) -> None:
        """One more program (and its lanes) a cause reached: the extent, beyond the first program reported."""
        r = self._reach.setdefault(key, [[], 0])
        if len(r[0]) < MAX_PROGRAMS:
            r[0].append(list(pid))
        r[1] += int(lanes)

    def report(self, out: list, key, entry: dict) -> None:
        """Keep ``entry`` as the report of cause ``key`` (its first program)."""
        self._seen.add(key)
        out.append({**entry, "_key": key})

    def finished(self, reports: list) -> list:
        """The reports as the trace keeps them: each with every program its cause reached ("programs",
        in the order they ran, a program listed once per time it was reached) and its lanes in all."""
        out = []
        for r in reports:
            entry = {k: v for k, v in r.items() if k != "_key"}
            programs, lanes = self._reach.get(r.get("_key"), [[], 0])
            hits = self._hits.get(r.get("_key"))
            more = {"hits": np.concatenate(hits).tolist()} if hits else {}
            out.append({**entry, "programs": [list(p) for p in programs], "reach_lanes": int(lanes), **more})
        return out

    def hit(self, key, events, rows: np.ndarray, lanes: np.ndarray) -> None:
        """Which lanes cause ``key`` reached in the memory op about to be recorded: ``rows`` (of the ops'
        rows, each a program ``programs`` yielded) and their lanes (len(rows), lanes of one program's block).
        ``events``: the collector's event store, whose events of this chunk give each program's seq of the
        op. Kept as runs of lane indices until the launch's MAX_HIT_INTS are used."""
        if not len(rows) or self._hit_ints >= MAX_HIT_INTS:
            return
        lanes = np.asarray(lanes, bool).reshape(len(rows), -1)
        seq = self._next_seqs(events)
        if seq is None:
            return
        kept = self._kept_index(np.asarray(rows, np.int64))
        flat = encode_hits(self._pids[rows], seq[kept], lanes)
        if self._hit_ints + len(flat) <= MAX_HIT_INTS:
            self._hits.setdefault(key, []).append(flat)
        self._hit_ints += len(flat)

    def _kept_index(self, rows: np.ndarray) -> np.ndarray:
        """The kept-program index (what an event's ``rows`` mask is over) of the ops' rows ``rows``."""
        chunk = rows if self._rows is None else np.asarray(self._rows)[rows]
        keep = self._chunk[1]
        return chunk if keep is None else (np.cumsum(keep) - 1)[chunk]

    def _next_seqs(self, events) -> Optional[np.ndarray]:
        """Per kept program of the running chunk, the seq its next op row will have: how many of the chunk's
        events so far it ran (oprows.op_rows numbers a program's rows so), counted on from the last call."""
        evs, chunk = events.events, len(events.chunk_pids)
        pids, keep = self._chunk
        n = len(pids) if keep is None else int(keep.sum())
        done, counts = self._seqs if self._seqs is not None and self._seqs[0] <= len(evs) else (None, None)
        if done is None:
            done = len(evs)
            while done and evs[done - 1].chunk == chunk:
                done -= 1
            counts = np.zeros(n, np.int64)
        for ev in evs[done:]:
            if ev.rows is None:
                counts += 1
            elif len(ev.rows) == n:
                counts += ev.rows
            else:
                return None
        self._seqs = (len(evs), counts)
        return counts

    def programs(self, lanes: np.ndarray):
        """(row of the chunk, program id) of each program whose lanes hold a bad one (program axis first when
        batched; a batched block of one row stands for every program), kept and running the op."""
        if not self.batched:
            if lanes.any():
                yield 0, tuple(int(v) for v in self._pids[0])
            return
        flat = lanes.reshape(lanes.shape[0], -1).any(axis=1)
        if len(flat) == 1 and len(self._pids) > 1:
            flat = np.ones(len(self._pids), bool)
        for p in np.flatnonzero(flat):
            if (self._keep is None or self._keep[p]) and (self._active is None or self._active[p]):
                yield int(p), tuple(int(v) for v in self._pids[p])


# A worker's reports, merged as ProgramRows keeps them (record/parallel/): a check that keeps nothing else names
# these as its own four methods (``fork_point, since, mergeable, merge = ROWS_MERGE``); one that keeps more
# writes its own, and one that writes none keeps workers only where its state did not change (Monitor's).
def _rows_fork_point(self):
    return ProgramRows.mark(self)


def _rows_since(self, point) -> dict:
    sizes, _, reach, (hits, _) = point
    grown = {}
    for k, (programs, lanes) in self._reach.items():
        n0, l0 = reach.get(k, (0, 0))
        if len(programs) > n0 or lanes != l0:
            grown[k] = (programs[n0:], lanes - l0)
    more = {k: v[hits.get(k, 0):] for k, v in self._hits.items() if len(v) > hits.get(k, 0)}
    return {"lists": {name: getattr(self, name)[n:] for name, n in zip(self.lists, sizes)}, "reach": grown,
            "hits": more}


def _rows_mergeable(self, added) -> Optional[str]:
    if any("_key" not in e for entries in added["lists"].values() for e in entries):
        return "a report without its cause (report() keeps it) cannot be merged"
    return None


def _rows_merge(self, added) -> None:
    # A report the worker kept is this monitor's unless its cause was reported here already or the list is
    # full. One the worker left out because its list was full would not fit here either: this list holds every
    # report the worker's did when it forked, and the worker's later ones that are not here yet.
    for name, entries in added["lists"].items():
        out = getattr(self, name)
        for entry in entries:
            key = entry["_key"]
            if key in self._seen or len(out) >= MAX_REPORTS:
                continue
            self._seen.add(key)
            out.append(entry)
    for key, (programs, lanes) in added["reach"].items():
        r = self._reach.setdefault(key, [[], 0])
        r[0].extend(programs[:max(MAX_PROGRAMS - len(r[0]), 0)])
        r[1] += int(lanes)
    for key, arrays in added.get("hits", {}).items():
        for flat in arrays:            # (the cap as one process would have reached it)
            if self._hit_ints + len(flat) <= MAX_HIT_INTS:
                self._hits.setdefault(key, []).append(flat)
            self._hit_ints += len(flat)


ROWS_MERGE = (_rows_fork_point, _rows_since, _rows_mergeable, _rows_merge)


def encode_hits(pids: np.ndarray, seqs: np.ndarray, lanes: np.ndarray) -> np.ndarray:
    """Hits as one int64 array: per row of ``lanes`` (bool, (rows, n)), its program id, its op's seq, how
    many runs of consecutive lanes it holds, then each run's first lane and end (exclusive)."""
    rows, n = lanes.shape
    d = np.diff(np.pad(lanes, ((0, 0), (1, 1))).astype(np.int8), axis=1)
    r0, first = np.nonzero(d == 1)                 # row-major: each row's runs in order
    _, end = np.nonzero(d == -1)
    k = np.bincount(r0, minlength=rows)
    size = HIT_HEAD + 2 * k
    base = np.cumsum(size) - size
    out = np.empty(int(size.sum()), np.int64)
    for c in range(3):
        out[base + c] = pids[:, c]
    out[base + 3], out[base + 4] = seqs, k
    at = base[r0] + HIT_HEAD + 2 * (np.arange(len(r0)) - (np.cumsum(k) - k)[r0])
    out[at], out[at + 1] = first, end
    return out


def rows_of(lanes: np.ndarray, row: int, batched: bool) -> np.ndarray:
    """One program's lanes of a block (a batched block of one row stands for every program)."""
    if not batched:
        return lanes
    return lanes[min(row, lanes.shape[0] - 1)]
