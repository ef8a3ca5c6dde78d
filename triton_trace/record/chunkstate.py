"""The running chunk of one launch: its programs, which of them are recorded, and which run the current ops.

A chunk is one program, or many run at once (batched). Its programs are *kept* (recorded) unless the
program filter or the memory limit leaves them out. Inside a loop whose trip count differs between the
programs of a chunk, the ops' values have one row per program of a sub-chunk (``data_rows``) and only some
of them run the current trip (``data_active``); ``sel`` is, of those rows, the ones recorded, which picks
an op's lanes and values out of its block.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np


class ChunkState:
    def __init__(self, program_filter: Optional[Callable] = None):
        self.program_filter = program_filter
        self.pid = (0, 0, 0)                 # the chunk's first program (what an error names)
        self.batched = False
        self.size = 1                        # programs in the chunk
        self.open = False
        self.recording = True                # some program of the chunk is kept
        self.keep: Optional[np.ndarray] = None      # bool per program of the chunk (None: all kept)
        self.kept = np.zeros((0, 3), np.int32)      # the kept programs' ids, in execution order
        self.active: Optional[np.ndarray] = None    # programs of the chunk running the current ops
        self.data_rows: Optional[np.ndarray] = None   # the chunk's programs the ops' rows belong to (a sub-chunk)
        self.data_active: Optional[np.ndarray] = None  # of those rows, the ones running (None: all)
        self.sel: Optional[np.ndarray] = None       # of those rows, the ones recorded (kept and running)

    def begin(self, pids: np.ndarray, batched: bool, record: bool) -> None:
        """Programs ``pids`` ((P, 3), execution order) start; ``record``: the budget lets them be recorded."""
        self.pid = tuple(int(v) for v in pids[0])
        self.batched, self.size, self.open = batched, len(pids), True
        if not record:
            keep, kept = np.zeros(len(pids), bool), pids[:0]
        elif self.program_filter is None:
            keep, kept = None, pids
        else:
            keep = np.fromiter((bool(self.program_filter(tuple(int(v) for v in p))) for p in pids), bool, len(pids))
            kept = pids[keep]
        self.keep, self.kept = keep, kept
        self.reset_active()
        self.recording = len(kept) > 0

    def set_active(self, active: Optional[np.ndarray], rows: Optional[np.ndarray] = None) -> None:
        """From now on the ops' values have one row per program ``rows`` of the chunk (indexes, in order;
        None: every program), and of these only ``active`` (bool over the rows; None: all) run the ops."""
        self.data_rows, self.data_active = rows, active
        if rows is None and active is None:
            self.active, self.sel = None, self.keep
            return
        if rows is None:
            self.active = active
        else:
            self.active = np.zeros(self.size, dtype=bool)
            self.active[rows if active is None else rows[active]] = True
        keep = self.keep if rows is None or self.keep is None else self.keep[rows]
        self.sel = active if keep is None else (keep if active is None else keep & active)

    def reset_active(self) -> None:
        self.active = self.data_rows = self.data_active = None
        self.sel = self.keep

    def abort(self) -> None:
        """The chunk stopped (it raised or will be undone): no longer batched or open."""
        self.batched = self.open = False
        self.reset_active()

    def active_programs(self) -> Optional[np.ndarray]:
        """Of the rows the ops' values have, the programs running the current ops; None when all do (or one
        program runs)."""
        return self.data_active if self.batched else None

    def event_rows(self) -> Optional[np.ndarray]:
        """The kept programs running the current op, when batched: None for all of them, else a bool mask
        over them."""
        if not self.batched or self.active is None:
            return None
        return self.active if self.keep is None else self.active[self.keep]

    def value_rows(self) -> int:
        """Rows the ops' values have now (a batched chunk: one per program of the sub-chunk)."""
        return self.size if self.data_rows is None else len(self.data_rows)
