"""Two traces of the same kernels side by side: before and after a fix, two configs, two Triton releases.

Launches are paired in order (their tensor arguments must agree in names and shapes; the kernel may
have been renamed by the fix). For each tensor a launch wrote, the final
value of every element is the last recorded write to it (execution order); the elements whose final values
differ (NaN equals NaN; ``rtol`` / ``atol`` as in ``numpy.isclose``), or that only one side wrote, are
reported with the program, op and line that wrote them on each side. The launches' metrics that changed
and the findings that appeared or disappeared (matched by kind, tensor and program) come with them.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ..errors import TraceUsageError
from ..model import KINDS, WRITE_KINDS, Trace
from ..model.layout import invertible, view_index
from ..model.touches import execution_rank
from ..model.values import lane_values

MAX_EXAMPLES = 20


@dataclass(frozen=True)
class Writes:
    """The final write of each element of one tensor: storage offsets, values (NaN where not recorded),
    and the row of the op that wrote it."""
    offsets: np.ndarray
    values: np.ndarray
    rows: np.ndarray
    recorded: bool           # every write had its values recorded


def final_writes(launch, t: int) -> Writes:
    o = launch.ops
    write_codes = [KINDS.index(k) for k in WRITE_KINDS]
    rows = np.flatnonzero((o["tensor"] == t) & np.isin(o["kind"], write_codes) & (o["lane_count"] > 0))
    empty = Writes(np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), True)
    if not len(rows):
        return empty
    rows = rows[np.lexsort((o["seq"][rows], execution_rank(launch, o["program"][rows])))]
    counts = o["lane_count"][rows].astype(np.int64)
    offsets, mask = launch.lanes.gather(o["lane_start"][rows], counts)
    _, values, has = lane_values(launch, rows)        # NaN where a row's values were not recorded
    recorded = bool(has.all())
    lane_row = np.repeat(rows, counts)
    # a lane outside the storage was recorded but never stored (the trace skips it): no element holds its value
    info = launch.tensors[t]
    limit = (info.storage_size * info.elem_bytes) // np.maximum(o["elem_bytes"][lane_row].astype(np.int64), 1)
    keep = np.flatnonzero(mask & (offsets >= 0) & (offsets < limit))
    offsets, values, lane_row = offsets[keep], values[keep], lane_row[keep]
    # the last write of each offset wins: unique over the reversed order keeps each offset's last lane
    uniq, first_rev = np.unique(offsets[::-1], return_index=True)
    last = len(offsets) - 1 - first_rev
    return Writes(uniq, values[last], lane_row[last], recorded)


def _where(launch, row: int) -> dict:
    o = launch.ops
    f = int(o["file"][row])
    return {"program": [int(v) for v in o["program"][row]], "seq": int(o["seq"][row]), "kind": KINDS[int(o["kind"][row])],
            "line": int(o["line"][row]), "file": launch.files[f] if 0 <= f < len(launch.files) else None}


def _index(info, offset: int) -> Optional[list]:
    """The view index of a storage offset, or None when the view does not hold it (or no single one does)."""
    if not invertible(info):
        return None
    idx, ok = view_index(info, np.array([offset]))
    return idx[0].tolist() if ok[0] else None


@dataclass(frozen=True)
class TensorDiff:
    tensor: str
    compared: int                 # elements written on both sides
    differing: int                # of those, with different final values
    only_a: int                   # elements only trace a wrote
    only_b: int
    values_recorded: bool
    examples: tuple = ()          # {"index", "offset", "a": {value, program, seq, kind, line, file}, "b": {...}}

    @property
    def same(self) -> bool:
        return not (self.differing or self.only_a or self.only_b)

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "compared": self.compared, "differing": self.differing, "only_a": self.only_a,
                "only_b": self.only_b, "values_recorded": self.values_recorded, "examples": list(self.examples)}


def diff_tensor(a, b, t: int, rtol: float, atol: float, max_examples: int = MAX_EXAMPLES) -> TensorDiff:
    wa, wb = final_writes(a, t), final_writes(b, t)
    both, ia, ib = np.intersect1d(wa.offsets, wb.offsets, assume_unique=True, return_indices=True)
    va, vb = wa.values[ia], wb.values[ib]
    differs = ~np.isclose(va, vb, rtol=rtol, atol=atol, equal_nan=True)
    only_a = np.setdiff1d(wa.offsets, wb.offsets, assume_unique=True)
    only_b = np.setdiff1d(wb.offsets, wa.offsets, assume_unique=True)
    info = a.tensors[t]
    examples = []

    def side(launch, w, k):
        if k is None:
            return None
        v = w.values[k]
        return {"value": None if np.isnan(v) and not w.recorded else (repr(float(v)) if not np.isfinite(v) else float(v)),
                **_where(launch, int(w.rows[k]))}
    for k in np.flatnonzero(differs)[:max_examples]:
        off = int(both[k])
        examples.append({"offset": off, "index": _index(info, off), "a": side(a, wa, ia[k]), "b": side(b, wb, ib[k])})
    for offs, w, launch, name in ((only_a, wa, a, "a"), (only_b, wb, b, "b")):
        for off in offs[:max(0, max_examples - len(examples))]:
            k = int(np.searchsorted(w.offsets, off))
            examples.append({"offset": int(off), "index": _index(info, int(off)),
                             "a": side(a, wa, k) if name == "a" else None, "b": side(b, wb, k) if name == "b" else None})
    return TensorDiff(info.name, int(len(both)), int(differs.sum()), int(len(only_a)), int(len(only_b)),
                      wa.recorded and wb.recorded, tuple(examples))


@dataclass(frozen=True)
class LaunchDiff:
    index: int
    kernel: str
    outputs: tuple                           # TensorDiff of each tensor either side wrote
    metrics: dict = field(default_factory=dict)     # name -> [a, b], the metrics that changed
    findings_added: tuple = ()               # in b, not in a: {"kind", "tensor", "program", "line", "message"}
    findings_removed: tuple = ()

    @property
    def outputs_differ(self) -> bool:
        return any(not t.same for t in self.outputs)

    def to_dict(self) -> dict:
        return {"index": self.index, "kernel": self.kernel, "outputs": [t.to_dict() for t in self.outputs],
                "metrics": self.metrics, "findings_added": list(self.findings_added),
                "findings_removed": list(self.findings_removed)}


@dataclass(frozen=True)
class TraceDiff:
    launches: tuple
    unmatched: tuple = ()                    # notes on launches that could not be paired

    @property
    def outputs_differ(self) -> bool:
        return any(lc.outputs_differ for lc in self.launches) or bool(self.unmatched)

    def to_dict(self) -> dict:
        return {"outputs_differ": self.outputs_differ, "launches": [lc.to_dict() for lc in self.launches],
                "unmatched": list(self.unmatched)}

    def summary(self) -> str:
        lines = []
        for d in self.launches:
            lines.append(f"[{d.index}] {d.kernel}: " + ("outputs differ" if d.outputs_differ else "outputs equal"))
            for t in d.outputs:
                if t.same:
                    lines.append(f"  {t.tensor}: {t.compared} element(s) equal"
                                 + ("" if t.values_recorded else " (values not recorded: written elements only)"))
                    continue
                lines.append(f"  {t.tensor}: {t.differing} of {t.compared} element(s) differ"
                             + (f", {t.only_a} written only in a" if t.only_a else "")
                             + (f", {t.only_b} written only in b" if t.only_b else ""))
                for e in t.examples[:5]:
                    lines.append(f"    {t.tensor}{e['index'] if e['index'] is not None else '@' + str(e['offset'])}: "
                                 f"a {_side_text(e['a'])} | b {_side_text(e['b'])}")
            for name, (va, vb) in sorted(d.metrics.items()):
                lines.append(f"  metric {name}: {va} -> {vb}")
            for f in d.findings_added:
                lines.append(f"  + {f['kind']}: {f['message']}")
            for f in d.findings_removed:
                lines.append(f"  - {f['kind']}: {f['message']}")
        lines += [f"unmatched: {u}" for u in self.unmatched]
        return "\n".join(lines)


def _side_text(s: Optional[dict]) -> str:
    if s is None:
        return "not written"
    return f"{s['value']} by program {tuple(s['program'])} op {s['seq']} ({s['kind']}) line {s['line']}"


def _finding_key(f) -> tuple:
    return (f.kind, f.tensor, f.file, f.line)      # one finding per root cause: kind, tensor, source line


def _finding_dict(f) -> dict:
    return {"kind": f.kind, "tensor": f.tensor, "program": list(f.program) if f.program else None, "line": f.line,
            "message": f.message}


def _arguments(launch) -> list:
    return [(t.name, t.shape) for t in launch.tensors]


def unrelated(a: Trace, b: Trace, names=("a", "b")) -> Optional[str]:
    """One line saying how ``b`` is not a trace of ``a``'s kernels (launches paired in order whose tensor
    arguments differ, or another number of launches), or None when it is one. ``names``: what to call them."""
    pairs = [(i, la, lb) for i, (la, lb) in enumerate(zip(a.launches, b.launches)) if _arguments(la) != _arguments(lb)]
    if not pairs and len(a.launches) == len(b.launches):
        return None
    parts = [f"launch {i} is {la.kernel_name}{_shapes(la)} in {names[0]} and {lb.kernel_name}{_shapes(lb)} in "
             f"{names[1]}" for i, la, lb in pairs[:3]]
    if len(pairs) > 3:
        parts.append(f"{len(pairs) - 3} more launch(es) differ")
    if len(a.launches) != len(b.launches):
        parts.append(f"{names[0]} holds {len(a.launches)} launch(es), {names[1]} {len(b.launches)}")
    return "; ".join(parts)


def _shapes(launch) -> str:
    return "(" + ", ".join(f"{t.name} {list(t.shape)}" for t in launch.tensors) + ")"


def diff(a, b, rtol: float = 0.0, atol: float = 0.0, analyze: bool = True,
         max_examples: int = MAX_EXAMPLES) -> TraceDiff:
    """Compare two traces of the same kernels (see the module docstring): Traces, or trace file paths.
    ``analyze=False`` skips the metrics and findings (outputs only)."""
    from ..store.tracefile import load
    from .analyzer import analyze as run_analysis
    a, b = (load(t) if isinstance(t, (str, os.PathLike)) else t for t in (a, b))
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, Trace):
            raise TraceUsageError(f"diff({name}=...) takes a triton_trace.Trace or a trace file path; got {type(t).__name__}")
    ra = run_analysis(a) if analyze else None
    rb = run_analysis(b) if analyze else None
    out, unmatched = [], []
    for i, (la, lb) in enumerate(zip(a.launches, b.launches)):
        if _arguments(la) != _arguments(lb):
            unmatched.append(f"launch {i}: {la.kernel_name} in a and {lb.kernel_name} in b take other tensors "
                             f"({[t.name for t in la.tensors]} vs {[t.name for t in lb.tensors]})")
            continue
        kernel = la.kernel_name if la.kernel_name == lb.kernel_name else f"{la.kernel_name} -> {lb.kernel_name}"
        tensors = [t for t in range(len(la.tensors)) if len(final_writes(la, t).offsets) or len(final_writes(lb, t).offsets)]
        outputs = tuple(diff_tensor(la, lb, t, rtol, atol, max_examples) for t in tensors)
        metrics, added, removed = {}, (), ()
        if analyze:
            ma = ra.to_dict()["launches"][i].get("metrics") or {}
            mb = rb.to_dict()["launches"][i].get("metrics") or {}
            metrics = {k: [ma.get(k), mb.get(k)] for k in sorted(set(ma) | set(mb))
                       if not isinstance(ma.get(k), (dict, list)) and ma.get(k) != mb.get(k)}
            fa = {_finding_key(f): f for f in ra.findings if f.launch == i}
            fb = {_finding_key(f): f for f in rb.findings if f.launch == i}
            added = tuple(_finding_dict(fb[k]) for k in fb if k not in fa)
            removed = tuple(_finding_dict(fa[k]) for k in fa if k not in fb)
        out.append(LaunchDiff(i, kernel, outputs, metrics, added, removed))
    if len(a.launches) != len(b.launches):
        unmatched.append(f"a has {len(a.launches)} launch(es), b has {len(b.launches)}")
    return TraceDiff(tuple(out), tuple(unmatched))
