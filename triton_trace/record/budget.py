"""How much one launch may record, what it left out, and how its programs ran.

``Budget`` holds the two limits: the value cap (elements of values kept per launch) and the memory limit
(bytes of the whole recording). Past the cap later values are dropped (``values_truncated``); near the
memory limit later programs run unrecorded, and each thing left out is a note the trace keeps, so a
view never shows a partial recording as a whole one. ``Execution`` counts how the programs ran (batched,
diverged, re-run one by one); both become ``Launch.meta["execution"]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple, Optional


class BudgetMark(NamedTuple):
    value_elems: int
    values_truncated: bool
    stopped: bool
    notes: int
    refused: Optional[tuple]


class Budget:
    def __init__(self, values_cap: Optional[int], memory_limit: Optional[int]):
        self.values_cap = 0 if values_cap is None else int(values_cap)
        self.memory_limit = memory_limit
        self.value_elems = 0                 # elements of values kept so far
        self.values_truncated = False
        self.notes: list = []                # what the memory limit made us leave out
        self.stopped = False                 # the limit is reached: later programs run unrecorded
        self._growth = 0                     # the most bytes one chunk added (to stop before the next one)
        self._chunk_start = 0

    # A worker process's view of the values the workers before it kept (record/parallel/), or None: past
    # what they kept, later values are dropped whatever this worker keeps (``past``). It is told what this
    # one kept at the end of each chunk that stays (``publish``), never what an undone chunk took back.
    peers = None

    def chunk_starts(self, nbytes: int, pid: tuple) -> bool:
        """Whether the chunk starting at program ``pid`` is recorded, with ``nbytes`` recorded so far: not
        once another chunk as large as the largest yet would pass the memory limit."""
        if self.memory_limit is not None and not self.stopped and nbytes + self._growth > self.memory_limit:
            self.stopped = True
            self.notes.append(f"memory_limit: programs from {pid} on ran without being recorded")
        self._chunk_start = nbytes
        return not self.stopped

    def chunk_ends(self, nbytes: int) -> None:
        self._growth = max(self._growth, nbytes - self._chunk_start)
        if self.peers is not None:
            self.peers.publish(self.value_elems, self.values_truncated)

    refused = None      # (event, elements) of the values that were refused first, when the cap was reached

    def take_values(self, elems: int, nbytes: int, pid: tuple, event: int = -1) -> bool:
        """Whether ``elems`` more values (of event ``event``) are kept (then counted), with ``nbytes``
        recorded so far (read only under a memory limit)."""
        if self.values_cap <= 0 or self.values_truncated:
            return False
        if self.value_elems + elems > self.values_cap or (
                self.peers is not None and self.peers.past(self.value_elems + elems, self.values_cap)):
            self.values_truncated, self.refused = True, (event, elems)
            return False
        if self.memory_limit is not None and nbytes + 2 * elems * 8 + self._growth > self.memory_limit:
            self.values_truncated = True
            self.notes.append(f"memory_limit: values dropped from program {pid} on")
            return False
        self.value_elems += elems
        return True

    def mark(self) -> BudgetMark:
        return BudgetMark(self.value_elems, self.values_truncated, self.stopped, len(self.notes), self.refused)

    def rollback(self, mark: BudgetMark) -> None:
        self.value_elems, self.values_truncated, self.stopped = mark.value_elems, mark.values_truncated, mark.stopped
        self.refused = mark.refused
        del self.notes[mark.notes:]


class Fallback(NamedTuple):
    """Programs ``first .. first + programs`` (launch positions) ran one by one instead of batched."""
    first: int
    programs: int
    reason: str


class ExecutionMark(NamedTuple):
    recorded_programs: int
    skipped_programs: int
    batched_programs: int


@dataclass
class Execution:
    """How a launch's programs ran."""
    recorded_programs: int = 0       # programs whose ops were recorded
    skipped_programs: int = 0        # programs run unrecorded (the program filter, the memory limit)
    batched_programs: int = 0        # programs run in batched chunks
    diverged_chunks: int = 0         # chunks whose programs diverged and ran as runs that agree
    widest: int = 0                  # lanes per program of the widest memory op a batched chunk ran
    fallbacks: list = field(default_factory=list)     # Fallbacks, in launch order
    workers: Optional[dict] = None   # how many worker processes ran the launch, and why not more (record/parallel/)

    def chunk_ended(self, size: int, kept: int, batched: bool) -> None:
        self.recorded_programs += kept
        self.skipped_programs += size - kept
        if batched:
            self.batched_programs += size

    def mark(self) -> ExecutionMark:
        # (how chunks ran, diverged or fell back, stays true of a chunk that is undone)
        return ExecutionMark(self.recorded_programs, self.skipped_programs, self.batched_programs)

    def rollback(self, mark: ExecutionMark) -> None:
        self.recorded_programs, self.skipped_programs, self.batched_programs = mark

    def absorb(self, later: "Execution") -> None:
        """Add how the programs after this one's ran (a worker process's: record/parallel/)."""
        self.recorded_programs += later.recorded_programs
        self.skipped_programs += later.skipped_programs
        self.batched_programs += later.batched_programs
        self.diverged_chunks += later.diverged_chunks
        self.widest = max(self.widest, later.widest)
        self.fallbacks.extend(later.fallbacks)

    def meta(self, budget: Budget) -> dict:
        """``Launch.meta["execution"]``."""
        out = {"batched_programs": int(self.batched_programs), "diverged_chunks": int(self.diverged_chunks),
               "memory_limit": budget.memory_limit, "limit_notes": list(budget.notes),
               "fallbacks": [{"first": int(f.first), "programs": int(f.programs), "reason": f.reason}
                             for f in self.fallbacks]}
        if self.workers is not None:
            out["workers"] = dict(self.workers)
        return out
