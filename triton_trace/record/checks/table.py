"""The runtime checks that follow values as the kernel computes them: one row per monitor, the one list that
record/interp/hooks.py (installs each row's hooks, in order), record/collector.py (makes each monitor per
launch, drives it per chunk, writes its records into the launch) and store/header.py (checks each record of
a trace file against its schema) read. A new check is its module here (the monitor and its hooks), its row,
its analysis function (analysis/checks/valuechecks.py's RECORDED_CHECKS) and its finding kind
(analysis/findings.py's KINDS).

A row names its monitor class and hook modules as text, loaded on first use: loading a trace file reads
the schemas without importing the hooks (and Triton's interpreter and torch with them). A row may also
hold the objects themselves (a check defined outside this package: a test's).

The row's ``name`` is the collector's attribute the hooks report through (``rec.overflow.reached(...)``);
its records keep the names trace files already use.
"""
from __future__ import annotations

import importlib
from typing import Callable, NamedTuple, Union

from .mathvalues import MAX_ENTRIES
from .monitor import MAX_PROGRAMS
from .schema import COUNT, HITS, NAME, PROGRAM, REACH, TEXT, Field, Record, check

Ref = Union[str, Callable]           # "module:attr" (module under record/checks, or a full dotted path), or the object


class Row(NamedTuple):
    name: str                 # the monitor's attribute on the collector
    monitor: Ref              # its class: made once per launch as monitor(tensors, outputs)
    install: tuple            # modules (or functions) whose install(scope, builder, rec) hook it in, in order
    records: tuple            # the Records it writes into Launch.meta


NONFINITE = Record("nonfinite", {
    "kind": TEXT, "program": PROGRAM, "file": NAME, "line": COUNT, "tensor": NAME, "lanes": COUNT,
    "offsets": Field("ints", lo=-(1 << 62)), "birth": Field("facts", null=True, need=False),
    "input": Field("facts", null=True, need=False)})
_REACHED = {"kind": TEXT, "how": TEXT, "op": TEXT, "program": PROGRAM, "file": NAME, "line": COUNT, "tensor": NAME,
            "lanes": COUNT, "cause": Field("facts"), **REACH, **HITS}
OVERFLOW, INTDIV = Record("overflow", _REACHED), Record("intdiv", _REACHED)
LANE_CONFLICT = Record("lane_conflict", {
    "kind": TEXT, "op": TEXT, "program": PROGRAM, "file": NAME, "line": COUNT, "tensor": NAME, "lanes": COUNT,
    "first": Field("indexes", size=2), "values": Field("scalars", size=2), **REACH, **HITS})
MAX_LINES = 1 << 14        # entries of a record kept per source line (the largest kernels have a few hundred)
INT32_ADDRESS = Record("int32_address", {
    "file": NAME, "line": COUNT, "op": TEXT, "tensor": NAME, "max": COUNT}, entries=MAX_LINES)
TF32_DOT = Record("tf32_dot", {
    "file": NAME, "line": COUNT, "checked": COUNT, "max_abs": Field("real"), "max_result": Field("real"),
    "k": COUNT}, entries=MAX_LINES)
PADDED_REDUCTION = Record("padded_reduction", {
    "kind": TEXT, "op": TEXT, "program": PROGRAM, "file": NAME, "line": COUNT,
    "load": Field("object", fields={"file": NAME, "line": COUNT, "other": Field("scalar")}),
    "outputs": COUNT, "output": Field("ints"), "lanes": COUNT, "contribution": Field("scalar"),
    "result": Field("scalar"), "without": Field("scalar"), **REACH})
ATOMIC_SEM = Record("atomic_sem", {"file": NAME, "line": COUNT, "op": TEXT, "sem": TEXT}, entries=MAX_LINES)
LOWP_ACCUMULATION = Record("lowp_accumulation", {
    "file": NAME, "line": COUNT, "tensor": NAME, "add_file": NAME, "add_line": COUNT, "type": TEXT, "adds": COUNT,
    "checked": COUNT, "hist": Field("ints", size=64), "max_ulps": Field("real"), "max_abs": Field("real"),
    "program": PROGRAM, "value": Field("real"), "exact": Field("real")}, entries=MAX_LINES)
# the float64 shadow (checks/shadow.py, opt-in): what ran, per line and type, per store line, tensor and type
_REAL, _PARTS = Field("real"), Field("scalars", size=32)      # 32: shadow.MAX_PARTS
SHADOW_RUN = Record("shadow_run", {"mode": TEXT, "ops": COUNT}, entries=1)
SHADOW_LINE = Record("shadow_line", {
    "file": NAME, "line": COUNT, "type": TEXT, "ops": TEXT, "executions": COUNT, "trips": COUNT,
    "elements": COUNT, "local_max": _REAL, "local_sum": _REAL, "error_max": _REAL, "error_sum": _REAL,
    "gained_max": _REAL, "gained_sum": _REAL, "amplified_max": _REAL, "amplified_sum": _REAL, "program": PROGRAM,
    "value": _REAL, "exact": _REAL, "operands": _REAL}, entries=MAX_LINES)
SHADOW_STORE = Record("shadow_store", {
    "file": NAME, "line": COUNT, "tensor": NAME, "type": TEXT, "elements": COUNT, "error_max": _REAL,
    "error_sum": _REAL, "abs_max": _REAL, "scale": _REAL, "normwise": _REAL, "program": PROGRAM, "value": _REAL,
    "exact": _REAL, "unexplained_sum": _REAL, "part_files": _PARTS, "part_lines": Field("ints", size=32),
    "part_max": _PARTS, "part_sum": _PARTS}, entries=MAX_LINES)
# not a check: which loads fed each store (record/memory/dataflow.py), carried on values as the checks' tags are
DATAFLOW = Record("dataflow", {
    "file": NAME, "line": COUNT, "op": TEXT, "tensor": NAME, "load_file": NAME, "load_line": COUNT,
    "load_op": TEXT, "load_tensor": NAME, "first": Field("int", lo=-(1 << 62)), "last": Field("int", lo=-(1 << 62)),
    "step": Field("int", lo=1), "dims": Field("ints", lo=-1), "role": TEXT, "how": TEXT,
    "programs": Field("programs", size=MAX_PROGRAMS, need=False)}, entries=MAX_LINES)
# not a check: the values each line's float math produced, per program (checks/mathvalues.py), for the view;
# the p_ lists are parallel, one entry per program kept (MAX_ENTRIES over the launch)
_PER = MAX_ENTRIES
MATH_VALUES = Record("math_values", {
    "file": NAME, "line": COUNT, "count": COUNT, "nan": COUNT, "pinf": COUNT, "ninf": COUNT,
    "min": Field("real", null=True), "max": Field("real", null=True), "programs": COUNT, "left_out": COUNT,
    "first": Field("facts", null=True), "ops": Field("scalars"), "shapes": Field("indexes"),
    "p_program": Field("programs", size=_PER), **{f"p_{k}": Field("ints", size=_PER) for k in
                                                    ("count", "nan", "pinf", "ninf", "kind")},
    "p_first": Field("ints", lo=-1, size=_PER), "p_lane": Field("ints", lo=-1, size=_PER),
    "p_min": Field("reals", size=_PER), "p_max": Field("reals", size=_PER)}, entries=MAX_LINES)

# in install order: the overflow tags come before the hooks that read rec.origin, which provenance (installed
# after every row) sets for each memory op
MONITORS = (
    Row("nonfinite", "nonfinite:NonFinite", ("nonfinite_ops",), (NONFINITE,)),
    Row("overflow", "overflow:Overflow", ("overflow_ops", "intdiv"), (OVERFLOW, INTDIV)),
    Row("lane_conflicts", "lanes:LaneConflicts", ("lanes",), (LANE_CONFLICT,)),
    Row("int32_address", "addresses:Int32Addresses", ("addresses",), (INT32_ADDRESS,)),
    Row("tf32_dots", "tf32:TF32Dots", ("tf32",), (TF32_DOT,)),
    Row("padded", "padding:PaddedReductions", ("padding",), (PADDED_REDUCTION,)),
    Row("atomic_sems", "barriers:AtomicSems", ("barriers",), (ATOMIC_SEM,)),
    Row("lowp_sums", "accumulation:LowpSums", ("accumulation",), (LOWP_ACCUMULATION,)),
    Row("shadow", "shadow:Shadows", ("shadow_ops",), (SHADOW_RUN, SHADOW_LINE, SHADOW_STORE)),
    Row("dataflow", "triton_trace.record.memory.dataflow:Dataflow", ("triton_trace.record.memory.dataflow_ops",),
        (DATAFLOW,)),
    Row("math_values", "mathvalues:MathValues", ("mathvalues_ops",), (MATH_VALUES,)),
)


def resolve(ref: Ref, attr: str = ""):
    """The object a row names: ``"module:attr"`` or ``"module"`` (then ``attr``), modules relative to this
    package unless dotted."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    full = module if "." in module else f"{__package__}.{module}"
    return getattr(importlib.import_module(full), name or attr)


def installers(row: Row) -> list:
    """The row's install functions, in order."""
    return [resolve(ref, "install") for ref in row.install]


def records() -> dict:
    """record name -> its Record, over every row."""
    return {r.name: r for row in MONITORS for r in row.records}


def check_records(meta: dict, where: str) -> set:
    """Check every record of ``meta`` (a launch's meta from a trace file) that a row declares; the names of
    all declared records (store/header.py refuses other unknown keys)."""
    declared = records()
    for name, record in declared.items():
        if name in meta:
            check(record, meta[name], f"{where}.{name}")
    return set(declared)
