"""Integer values that do not fit their type, or that an integer division made undefined, recorded when they
reach memory.

The hooks (checks/overflow_ops.py) compare each int32 ``+``, ``-`` and ``*`` with the same operation in
int64, and each float-to-int conversion with the target's range; checks/intdiv.py looks at every integer
``//`` and ``%`` for a zero divisor or ``INT_MIN // -1``. A result with a bad lane (wrapped, saturated or
undefined) carries a tag, with the operation, its line, the operands and the result of its first bad lane,
and the bad lanes; the tag follows the value through integer and pointer arithmetic, broadcasts, reshapes
and ``tl.where`` (which takes a lane's bad value only where it picks it, and a bad condition's lanes).
Nothing is reported until the value reaches memory in an active lane: as an address (``x_ptr + offs``
with a wrapped ``offs``: the access goes to the wrong element, or out of bounds) or as a stored value; an
undefined division's result also where it decides control flow: through comparisons (``q > 0``) into a
load's or store's mask, a ``tl.where`` condition (whose result then reaches memory) or a scalar ``if``.
Each report keeps, per memory op row it reached, which lanes (monitor.py's hits): the exact elements. A GPU computes int32 the same way, so the wrong address is the kernel's, not the
interpreter's; a division by zero has no defined result on a GPU at all. Float results that turn to Inf in
a narrower float type are record/checks/nonfinite.py's (reported there as ``overflow``). Results go to
``Launch.meta["overflow"]``, the divisions' to ``Launch.meta["intdiv"]``.
"""
from __future__ import annotations

import numpy as np

from .monitor import MAX_REPORTS, ROWS_MERGE, ProgramRows, rows_of


class Overflow(ProgramRows):
    lists = ("reports", "divisions")
    fork_point, since, mergeable, merge = ROWS_MERGE     # (reports only: record/parallel/)

    def records(self) -> dict:
        return {"overflow": self.finished(self.reports), "intdiv": self.finished(self.divisions)}

    def reached(self, cause: dict, lanes: np.ndarray, how: str, op: str, tensor: int, file, line,
                events=None) -> None:
        """A tagged value reached memory, or decided control flow: ``lanes`` are the active lanes that hold a
        bad value (program axis first when batched); ``how`` is "address", "value", "mask" (a load's or
        store's mask) or "branch" (the condition of an ``if``). ``events``: the collector's event store, to
        name the lanes of the memory op's rows (a branch has none)."""
        if not lanes.any():
            return
        kind = cause.get("kind", "overflow")
        out = self.divisions if kind == "intdiv" else self.reports
        key = (file, int(line or 0), how, cause["file"], cause["line"])
        found = list(self.programs(lanes))
        for row, pid in found:
            self.reach(key, pid, int(rows_of(lanes, row, self.batched).sum()))
        if not found:
            return
        if events is not None:
            rows = np.array([row for row, _ in found], np.int64)
            flat = lanes.reshape(lanes.shape[0], -1) if self.batched and lanes.ndim else lanes.reshape(1, -1)
            self.hit(key, events, rows, flat[np.minimum(rows, len(flat) - 1)])
        if key in self._seen or len(out) >= MAX_REPORTS:
            return
        row, pid = found[0]
        self.report(out, key, {"kind": kind, "how": how, "op": op, "program": list(pid), "file": file,
                               "line": int(line or 0), "tensor": self.tensor_name(tensor),
                               "lanes": int(rows_of(lanes, row, self.batched).sum()), "cause": dict(cause)})
