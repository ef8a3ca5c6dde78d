"""Findings: one per root cause, each with its full extent.

A finding names one root cause: a kind, a kernel line, a tensor (for lane checks, one static op: kind,
tensor, file, line, over every program). Its ``extent`` (analysis/checks/extent.py) counts exactly what the
cause reaches over the whole launch: the programs (count, runs, first ids), the elements (count, runs of
offsets, first few with values), and per kind the writers and readers of a race, how far past the end
an out-of-bounds access reaches and which block lanes a mask must cover, how many values and programs a
NaN poisons. ``count`` is the offending lanes (elements, for race and coverage findings) over every
program; ``program`` the first program involved, the one the UI opens. Findings sort most severe first,
then by launch, line; the report keeps the first ``max_findings`` and counts the rest as suppressed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .context import KIND_NAMES, LaunchContext

# Every finding kind, most severe first: (name, severity, meaning). The report schema, the pytest plugin
# and the UI read this table; a new check appends its row. "error": the kernel computes garbage or faults
# on a GPU; "warning": suspicious or wasteful, but a kernel may do it on purpose.
KINDS = (
    ("assert_failed", "error", "a tl.device_assert was false on some lanes (a GPU traps there)"),
    ("out_of_bounds", "error", "an active lane addressed memory outside its tensor's storage"),
    ("race", "error", "programs accessed one element with no atomic, common lock or ticket ordering them"),
    ("uninitialized_read", "error", "an element of an undefined output was read before any program wrote it"),
    ("nonfinite", "error", "a NaN or Inf born in the kernel from finite operands reached memory"),
    ("overflow", "error", "a value did not fit its type (int32 wrap, narrowing cast) and reached memory"),
    ("int_division", "error", "an integer // or % by zero (or INT_MIN // -1) whose result reached memory"),
    ("lane_conflict", "error", "two lanes of one store wrote one address with different values (kept: either)"),
    ("padded_reduction", "error", "a masked load's other= value, changed by arithmetic, entered a sum/max/min"),
    ("out_of_view", "warning", "an access inside the storage but outside the tensor's view (shape, strides)"),
    ("double_write", "warning", "one program stored the same element of an output twice"),
    ("unwritten_output", "warning",
     "elements of a declared output that no program wrote (of any launch of the trace on that storage)"),
    ("nonfinite_input", "warning", "a NaN or Inf already held by an argument was carried into memory"),
    ("release_without_barrier", "warning", "a scalar atomic released a lock or set a flag right after block "
                                           "stores other programs read, with no tl.debug_barrier() between"),
)
FINDING_KINDS = tuple(k for k, _, _ in KINDS)
SEVERITY = {k: s for k, s, _ in KINDS}
MEANING = {k: m for k, _, m in KINDS}


@dataclass(frozen=True)
class Finding:
    kind: str
    kernel: str
    launch: int
    message: str
    count: int                           # offending lanes over every program (elements, for race/coverage)
    program: Optional[tuple] = None      # (x, y, z) of the first program; None for launch-wide findings
    file: Optional[str] = None
    line: Optional[int] = None
    tensor: Optional[str] = None
    op: Optional[str] = None             # the op kind: load, store, atomic_add, ...
    offsets: tuple = ()                  # first offending element offsets into the tensor's storage
    indices: tuple = ()                  # their indices in the tensor's view, None where outside it
    lanes: tuple = ()                    # their positions in the op's block
    valid_range: Optional[tuple] = None  # inclusive element offsets an access may touch
    rows: int = 0                        # op executions involved (a loop runs one op many times)
    other: dict = field(default_factory=dict)   # race: the first other program, file, line, op
    extent: dict = field(default_factory=dict)  # the full extent (analysis/checks/extent.py; report.py's schema)
    op_row: int = field(default=-1, compare=False, repr=False)   # a row of the op, for per-op counts
    # a row of each program involved (its first), for per-program counts; empty: op_row alone
    op_rows: tuple = field(default=(), compare=False, repr=False)

    @property
    def severity(self) -> str:
        return SEVERITY[self.kind]

    def sort_key(self) -> tuple:
        return (FINDING_KINDS.index(self.kind), self.launch, self.file or "", self.line or 0, self.tensor or "",
                self.op or "", self.program or (-1, -1, -1), self.message)

    def attributed_rows(self) -> np.ndarray:
        """The op rows this finding counts against, one per program involved."""
        rows = self.op_rows if len(self.op_rows) else ([self.op_row] if self.op_row >= 0 else [])
        return np.asarray(rows, dtype=np.int64)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind, "severity": self.severity, "kernel": self.kernel, "launch": self.launch,
            "program": list(self.program) if self.program is not None else None, "file": self.file,
            "line": self.line, "tensor": self.tensor, "op": self.op, "message": self.message,
            "count": self.count, "rows": self.rows, "offsets": list(self.offsets),
            "indices": [list(i) if i is not None else None for i in self.indices],
            "lanes": [list(i) for i in self.lanes],
            "valid_range": list(self.valid_range) if self.valid_range is not None else None,
            "other": {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(self.other.items())},
            "extent": _sorted(self.extent),
        }


def _sorted(d):
    """Dict keys sorted at every level (deterministic JSON)."""
    if isinstance(d, dict):
        return {k: _sorted(d[k]) for k in sorted(d)}
    if isinstance(d, (list, tuple)):
        return [_sorted(v) for v in d]
    return d


@dataclass(frozen=True)
class Suppressed:
    """Findings of one kind that were counted but not built (``op_rows``: a row of each)."""
    kind: str
    op_rows: np.ndarray


def block_index(ctx: LaunchContext, lane: int) -> tuple:
    """Position of a lane in its op's block, e.g. (3, 17)."""
    row = int(ctx.rows_of_lanes(np.array([lane]))[0])
    nd = int(ctx.launch.ops["ndim"][row])
    shape = tuple(int(s) for s in ctx.launch.ops["shape"][row][:nd])
    pos = lane - int(ctx.lane_pos[row])
    return tuple(int(v) for v in np.unravel_index(pos, shape)) if shape else ()


def op_fields(ctx: LaunchContext, row: int) -> dict:
    loc = ctx.row_location(row)
    return {"file": loc["file"], "line": loc["line"], "op": str(KIND_NAMES[ctx.kind[row]]),
            "tensor": ctx.tensor_name(int(ctx.tensor[row]))}


def where(fields: dict) -> str:
    if fields["line"] is None:
        return "an unknown line"
    return f"{fields['file'] or '?'}:{fields['line']}"


def short_list(values, limit: int = 4) -> str:
    vals = list(values)
    text = ", ".join(str(v) for v in vals[:limit])
    return text + (", ..." if len(vals) > limit else "")


def finalize(found: list, max_findings: int) -> tuple:
    """(kept findings, most severe first; counts per kind before the cap; how many were suppressed).
    ``found`` holds Findings and Suppressed records."""
    findings = sorted((f for f in found if isinstance(f, Finding)), key=Finding.sort_key)
    counts = {k: 0 for k in FINDING_KINDS}
    for f in found:
        counts[f.kind] += len(f.op_rows) if isinstance(f, Suppressed) else 1
    kept = tuple(findings[:max_findings])
    return kept, counts, sum(counts.values()) - len(kept)
