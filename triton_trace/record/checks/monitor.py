"""The protocol every runtime check's monitor follows, and the part most of them share.

The collector makes one monitor per row of checks/table.py for each launch and drives it through ``begin``
(a chunk of programs starts), ``set_active`` (a masked loop's trip: which programs run the ops),
``mark`` / ``rollback`` (a chunk that is undone and run again) and ``records`` (the finished launch: each
record the row declares, by name). ``Monitor`` does nothing at each of them, for a check that keeps only
maxima (an undone chunk that runs again finds the same ones); ``ProgramRows`` keeps which programs of the
running chunk its ops' rows are, which of them are kept (the program filter) and which run the current
ops, and the reports it keeps per launch, each with every program its cause reached. The hooks hand a
monitor lanes with the program axis first when batched.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

MAX_REPORTS = 200         # entries kept per launch and list (one per memory line and cause)
MAX_PROGRAMS = 1 << 16    # programs listed per cause (past it the count is a lower bound)


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
        self.batched = False
        self._seen: set = set()
        self._reach: dict = {}         # cause key -> [the programs it reached, in order; its lanes in all]
        for name in self.lists:
            setattr(self, name, [])

    def begin(self, pids: np.ndarray, keep: Optional[np.ndarray], batched: bool) -> None:
        self._pids, self._keep, self.batched = pids, keep, batched
        self._chunk = (pids, keep)
        self._active = None

    def set_active(self, active: Optional[np.ndarray], rows: Optional[np.ndarray] = None) -> None:
        pids, keep = self._chunk
        self._pids = pids if rows is None else pids[rows]
        self._keep = keep if rows is None or keep is None else keep[rows]
        self._active = active

    def mark(self) -> tuple:
        reach = {k: (len(v[0]), v[1]) for k, v in self._reach.items()}
        return tuple(len(getattr(self, name)) for name in self.lists), set(self._seen), reach

    def rollback(self, mark: tuple) -> None:
        sizes, self._seen, reach = mark
        for name, n in zip(self.lists, sizes):
            del getattr(self, name)[n:]
        self._reach = {k: [v[0][:reach[k][0]], reach[k][1]] for k, v in self._reach.items() if k in reach}

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
            out.append({**entry, "programs": [list(p) for p in programs], "reach_lanes": int(lanes)})
        return out

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


def rows_of(lanes: np.ndarray, row: int, batched: bool) -> np.ndarray:
    """One program's lanes of a block (a batched block of one row stands for every program)."""
    if not batched:
        return lanes
    return lanes[min(row, lanes.shape[0] - 1)]
