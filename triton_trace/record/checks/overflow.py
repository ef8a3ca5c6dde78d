"""Integer values that do not fit their type, recorded when they reach memory.

The hooks (checks/overflow_ops.py) compare each int32 ``+``, ``-`` and ``*`` with the same operation in
int64, and each float-to-int conversion with the target's range. A result with a lane that wrapped (or
saturated) carries a tag, with the operation, its line, the exact and the wrapped value of its first bad
lane, and the bad lanes; the tag follows the value through integer and pointer arithmetic, broadcasts,
reshapes and ``tl.where``. Nothing is reported until the value reaches memory in an active lane: as an
address (``x_ptr + offs`` with a wrapped ``offs``: the access goes to the wrong element, or out of bounds)
or as a stored value. A GPU computes int32 the same way, so the wrong address is the kernel's, not the
interpreter's. Float results that turn to Inf in a narrower float type are record/checks/nonfinite.py's
(reported there as ``overflow``). Results go to ``Launch.meta["overflow"]``.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

MAX_REPORTS = 200         # entries kept per launch (one per memory line and cause)


class Overflow:
    def __init__(self, tensors):
        self._tensors = tensors
        self._pids = np.zeros((1, 3), np.int32)
        self._keep: Optional[np.ndarray] = None
        self._active: Optional[np.ndarray] = None
        self._chunk = (self._pids, None)     # the chunk's programs and which are kept, as begin() gave them
        self.batched = False
        self.reports: list = []
        self._seen: set = set()

    def begin(self, pids: np.ndarray, keep: Optional[np.ndarray], batched: bool) -> None:
        self._pids, self._keep, self.batched = pids, keep, batched
        self._chunk = (pids, keep)
        self._active = None

    def set_active(self, active: Optional[np.ndarray], rows: Optional[np.ndarray] = None) -> None:
        """The ops' rows are the chunk's programs ``rows`` (None: all), of which ``active`` run the current
        ops (a masked loop's trips; None: all)."""
        pids, keep = self._chunk
        self._pids = pids if rows is None else pids[rows]
        self._keep = keep if rows is None or keep is None else keep[rows]
        self._active = active

    def mark(self) -> tuple:
        return len(self.reports), set(self._seen)

    def rollback(self, mark: tuple) -> None:
        n, self._seen = mark
        del self.reports[n:]

    def reached(self, cause: dict, lanes: np.ndarray, how: str, op: str, tensor: int, file, line) -> None:
        """A tagged value reached memory: ``lanes`` are the active lanes that hold a bad value (program axis
        first when batched); ``how`` is "address" or "value"."""
        if not lanes.any():
            return
        key = (file, int(line or 0), how, cause["file"], cause["line"])
        if key in self._seen or len(self.reports) >= MAX_REPORTS:
            return
        if self.batched:
            flat = lanes.reshape(lanes.shape[0], -1).any(axis=1)
            if len(flat) == 1 and len(self._pids) > 1:
                flat = np.ones(len(self._pids), bool)
            rows = [p for p in np.flatnonzero(flat) if (self._keep is None or self._keep[p]) and
                    (self._active is None or self._active[p])]
            if not rows:
                return
            pid, count = self._pids[rows[0]], int(lanes.reshape(lanes.shape[0], -1)[min(rows[0], lanes.shape[0] - 1)].sum())
        else:
            pid, count = self._pids[0], int(lanes.sum())
        self._seen.add(key)
        self.reports.append({"kind": "overflow", "how": how, "op": op, "program": [int(v) for v in pid], "file": file,
                             "line": int(line or 0), "tensor": self._tensors[tensor].name if tensor >= 0 else None,
                             "lanes": count, "cause": dict(cause)})
