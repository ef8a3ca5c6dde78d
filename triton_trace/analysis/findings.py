"""Findings: one problem, grouped so a broken kernel reports a handful of them, not one per lane.

A finding groups the offending lanes (or elements) of one kind, one program and one static op
(kind, tensor, file, line); it carries their count and the first few element offsets in execution
order. Findings sort most severe first, then by launch, program, line; the report keeps the first
``max_findings`` and counts the rest as suppressed. A check builds in full only the first
``max_findings`` groups of each kind in (program, op) order, since no later one could be shown; it
returns the rest as a ``Suppressed`` record, so a grid of a million broken programs stays cheap.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .context import KIND_NAMES, LaunchContext

# Most severe first. "error": the kernel computes garbage or faults on a GPU; "warning": suspicious or
# wasteful, but a kernel may do it on purpose.
FINDING_KINDS = ("assert_failed", "out_of_bounds", "race", "uninitialized_read", "nonfinite", "out_of_view",
                 "double_write", "unwritten_output", "nonfinite_input", "overflow")
SEVERITY = {"assert_failed": "error", "nonfinite": "error", "overflow": "error", "nonfinite_input": "warning", "out_of_bounds": "error", "race": "error", "uninitialized_read": "error",
            "out_of_view": "warning", "double_write": "warning", "unwritten_output": "warning"}


@dataclass(frozen=True)
class Finding:
    kind: str
    kernel: str
    launch: int
    message: str
    count: int                           # offending lanes (or elements, for race/coverage findings)
    program: Optional[tuple] = None      # (x, y, z); None for launch-wide findings (unwritten_output)
    file: Optional[str] = None
    line: Optional[int] = None
    tensor: Optional[str] = None
    op: Optional[str] = None             # the op kind: load, store, atomic_add, ...
    offsets: tuple = ()                  # first offending element offsets into the tensor's storage
    indices: tuple = ()                  # their indices in the tensor's view, None where outside it
    lanes: tuple = ()                    # their positions in the op's block
    valid_range: Optional[tuple] = None  # inclusive element offsets an access may touch
    rows: int = 0                        # op executions involved (a loop runs one op many times)
    other: dict = field(default_factory=dict)   # race: the other program, file, line, op
    op_row: int = field(default=-1, compare=False, repr=False)   # a row of the op, for per-op counts

    @property
    def severity(self) -> str:
        return SEVERITY[self.kind]

    def sort_key(self) -> tuple:
        return (FINDING_KINDS.index(self.kind), self.launch, self.program or (-1, -1, -1), self.file or "",
                self.line or 0, self.tensor or "", self.op or "", self.message)

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
        }


@dataclass(frozen=True)
class Suppressed:
    """Finding groups of one kind that were counted but not built: past the first ``max_findings`` of
    their launch and kind, they could never make the report. ``op_rows`` holds a row of each group."""
    kind: str
    op_rows: np.ndarray


@dataclass(frozen=True)
class LaneGroup:
    """Offending lanes of one (program, static op)."""
    program: int           # program index (ctx.pids)
    row: int               # first offending row
    count: int
    rows: int
    lanes: np.ndarray      # first offending lanes (indices into ctx.offsets), execution order


def group_lanes(ctx: LaunchContext, bad: np.ndarray) -> tuple:
    """Group offending lanes (ascending indices into ctx.offsets) by (program, static op).

    Returns (the first max_findings groups in (program, op) order, a row of each further group)."""
    if not len(bad):
        return [], np.zeros(0, dtype=np.int64)
    k, limit = ctx.params.max_examples, ctx.params.max_findings
    rows = ctx.lane_row[bad]
    key = ctx.row_prog[rows] * ctx.n_static + ctx.row_op[rows]
    groups, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    inverse = inverse.reshape(-1)
    # Examples: at most k lanes per row first (lanes are laid out row by row), then per group.
    row_starts = np.r_[True, rows[1:] != rows[:-1]]
    starts = np.flatnonzero(row_starts)
    rank = np.arange(len(bad)) - np.repeat(starts, np.diff(np.r_[starts, len(bad)]))
    few = np.nonzero((rank < k) & (inverse < limit))[0]
    few = few[np.argsort(inverse[few], kind="stable")]
    n_rows = np.bincount(inverse[row_starts], minlength=len(groups))
    out = []
    bounds = np.searchsorted(inverse[few], np.arange(min(limit, len(groups)) + 1))
    for g in range(min(limit, len(groups))):
        ex = bad[few[bounds[g]:bounds[g + 1]]][:k]
        out.append(LaneGroup(int(ctx.row_prog[ctx.lane_row[ex[0]]]), int(ctx.lane_row[ex[0]]), int(counts[g]),
                             int(n_rows[g]), ex))
    return out, rows[first[limit:]].astype(np.int64)


def group_entries(ctx: LaunchContext, rows: np.ndarray, counts: np.ndarray, lanes_of) -> tuple:
    """What ``group_lanes`` gives for offending lanes known per row, without listing them: ``rows`` and
    ``counts`` say how many lanes of each row offend (a row may appear more than once), ``lanes_of(row)``
    lists one row's offending lanes in order; it is asked only for the first rows of the groups built."""
    if not len(rows):
        return [], np.zeros(0, dtype=np.int64)
    k, limit = ctx.params.max_examples, ctx.params.max_findings
    urow, inv = np.unique(rows, return_inverse=True)
    per_row = np.bincount(inv.reshape(-1), weights=counts, minlength=len(urow)).astype(np.int64)
    key = ctx.row_prog[urow] * ctx.n_static + ctx.row_op[urow]
    groups, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    counts_g = np.bincount(inverse, weights=per_row, minlength=len(groups)).astype(np.int64)
    n_rows = np.bincount(inverse, minlength=len(groups))
    order = np.argsort(inverse, kind="stable")                    # rows ascending within a group
    bounds = np.searchsorted(inverse[order], np.arange(min(limit, len(groups)) + 1))
    out = []
    for g in range(min(limit, len(groups))):
        mine = urow[order[bounds[g]:bounds[g + 1]]]
        ex: list = []
        for r in mine.tolist():          # lanes in execution order: rows ascending, lanes within a row
            ex += lanes_of(r)[:k - len(ex)].tolist()
            if len(ex) >= k:
                break
        out.append(LaneGroup(int(ctx.row_prog[mine[0]]), int(mine[0]), int(counts_g[g]), int(n_rows[g]),
                             np.array(ex, dtype=np.int64)))
    return out, urow[first[limit:]].astype(np.int64)


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
