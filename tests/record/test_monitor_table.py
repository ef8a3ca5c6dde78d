"""The table of runtime-check monitors (record/checks/table.py) is the one list the hooks, the collector and the
trace file's header read: every row is installed, recorded and checked at load by its declared schema; a
damaged record is refused naming it; and a check a test adds to the table at run time goes through the whole
recorder and the file untouched, which is what keeps a new check to four files."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import triton_trace
from triton_trace import TraceFileError
from triton_trace.record.checks import schema, table
from triton_trace.record.checks.monitor import Monitor
from triton_trace.record.checks.schema import COUNT, NAME, Record
from triton_trace.record.checks.shadow import shadowing
from triton_trace.record.collector import Collector
from triton_trace.record.frames import where
from triton_trace.record.gpu.lowp import inner_method
from triton_trace.record.memory.space import HostMemory
from triton_trace.store import tracefile as store

BLOCK, N = 16, 10


@triton.jit
def _every_check(x_ptr, a_ptr, out_ptr, ints_ptr, c_ptr, h_ptr, n, BLOCK: tl.constexpr):
    tl.atomic_add(ints_ptr + 2 * BLOCK, 1)                   # atomic_sem (before any store: no missing barrier)
    offs = tl.arange(0, BLOCK)                               # int32 offsets behind every access: int32_address
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m, other=0.0)
    mean = tl.sum(x, axis=0) / n
    tl.store(out_ptr, tl.sum((x - mean) * (x - mean), axis=0))     # padded lanes add mean^2: padded_reduction
    tl.store(out_ptr + 1 + offs, x / 0.0, mask=m)                    # nonfinite
    tl.store(ints_ptr + offs, tl.full((BLOCK,), 2147483647, tl.int32) + offs, mask=m)   # overflow
    tl.store(ints_ptr + BLOCK + offs, offs // (offs * 0), mask=m)                        # intdiv
    tl.store(out_ptr + 1 + BLOCK + offs // 2, x, mask=m)                                 # lane_conflict
    r = tl.arange(0, 16)
    a = tl.load(a_ptr + r[:, None] * 16 + r[None, :])
    tl.store(c_ptr + r[:, None] * 16 + r[None, :], tl.dot(a, a))                         # tf32_dot
    h = x.to(tl.float16)
    tl.store(h_ptr + offs, h + h + h, mask=m)                                             # lowp_accumulation


def _record_every_check(programs: int = 1, **options):
    """(Every program does the same: with several, a batched chunk runs them at once.)"""
    x, a = torch.randn(N) + 3.0, torch.randn(16, 16)
    out, ints = torch.zeros(1 + 2 * BLOCK), torch.zeros(2 * BLOCK + 1, dtype=torch.int32)
    with shadowing():          # the one opt-in row (every value followed in float64) records too
        triton_trace.trace(**options)(_every_check)[(programs,)](x, a, out, ints, torch.zeros(16, 16),
                                                                 torch.zeros(BLOCK, dtype=torch.float16), N, BLOCK=BLOCK)
    trace = triton_trace.current_trace()
    triton_trace.reset()
    return trace


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A trace of the kernel that trips every check, and its file."""
    trace = _record_every_check()
    path = tmp_path_factory.mktemp("monitors") / "every.ttrace"
    trace.save(path)
    return trace, path


def _parts(path):
    raw = path.read_bytes()
    hlen = int.from_bytes(raw[12:20], "little")
    return json.loads(raw[20:20 + hlen]), raw[20 + hlen:]


def _write(path, header, blobs):
    h = json.dumps(header).encode()
    path.write_bytes(store.MAGIC + store.VERSION.to_bytes(4, "little") + len(h).to_bytes(8, "little") + h + blobs)


# -- (a) every row: installed, recorded, checked at load -------------------------------------------------------
def test_every_row_resolves_to_a_monitor_and_its_installers():
    names = set()
    for row in table.MONITORS:
        monitor = table.resolve(row.monitor)(HostMemory().tensors, ())
        assert isinstance(monitor, Monitor)
        assert set(monitor.records()) == {r.name for r in row.records}, row.name
        assert table.installers(row) and all(callable(f) for f in table.installers(row))
        names |= {r.name for r in row.records}
    assert len(names) == sum(len(row.records) for row in table.MONITORS)        # one owner per record name
    assert {"nonfinite", "overflow", "intdiv", "lane_conflict", "int32_address", "tf32_dot",
            "padded_reduction", "atomic_sem", "lowp_accumulation"} <= names      # the names files already use


def test_every_declared_field_has_a_kind_the_schema_checks():
    def kinds(fields):
        for f in fields.values():
            yield f.kind
            yield from kinds(f.fields or {})
    for record in table.records().values():
        assert set(kinds(record.fields)) <= set(schema.KINDS), record.name
        assert record.entries > 0


def test_the_collector_makes_one_monitor_per_row_reached_by_its_name():
    rec = Collector("k", HostMemory())
    assert list(rec.monitors) == [row.name for row in table.MONITORS]
    for row in table.MONITORS:
        assert getattr(rec, row.name) is rec.monitors[row.name]


def test_hooks_install_every_row_in_table_order(monkeypatch):
    installed = []
    real = table.installers
    monkeypatch.setattr(table, "installers", lambda row: installed.append(row.name) or real(row))
    _record_every_check()
    assert installed == [row.name for row in table.MONITORS]


@pytest.mark.parametrize("batch", [False, True])
def test_a_kernel_that_trips_every_check_records_and_saves_every_record(saved, batch, tmp_path):
    trace = saved[0] if not batch else _record_every_check(3, batch=True)
    meta = trace.launches[0].meta
    for row in table.MONITORS:
        for record in row.records:
            assert meta.get(record.name), f"{row.name} wrote no '{record.name}'"
            assert table.check_records({record.name: meta[record.name]}, "meta") >= {record.name}
    path = tmp_path / "again.ttrace"
    trace.save(path)
    loaded = triton_trace.load(path).launches[0].meta
    assert {r.name: loaded[r.name] for r in table.records().values()} == \
        {r.name: json.loads(json.dumps(meta[r.name])) for r in table.records().values()}


def test_the_findings_of_every_check_come_from_the_loaded_file(saved):
    kinds = {f.kind for f in triton_trace.analyze(triton_trace.load(saved[1]), layouts="model",
                                                  what_if=False).findings}
    assert {"nonfinite", "overflow", "int_division", "lane_conflict", "padded_reduction"} <= kinds


# -- (b) a damaged record is refused, naming it ----------------------------------------------------------------
def _first(name):
    return lambda meta: meta[name][0]


DAMAGE = [
    ("wrong type", lambda meta: _first("lane_conflict")(meta).__setitem__("line", "12"),
     r"meta\.lane_conflict\[0\]\.line is '12', not an integer"),
    ("a float for a count", lambda meta: _first("overflow")(meta).__setitem__("lanes", 1.5),
     r"meta\.overflow\[0\]\.lanes"),
    ("a negative block index", lambda meta: _first("lane_conflict")(meta).__setitem__("first", [[-1], [1]]),
     r"meta\.lane_conflict\[0\]\.first is a list of 2, not a list of block indexes .*from 0"),
    ("a program id of two numbers", lambda meta: _first("padded_reduction")(meta).__setitem__("program", [0, 0]),
     r"meta\.padded_reduction\[0\]\.program"),
    ("a negative program id", lambda meta: _first("intdiv")(meta).__setitem__("programs", [[0, -3, 0]]),
     r"meta\.intdiv\[0\]\.programs"),
    ("more entries than the recorder keeps", lambda meta: meta.__setitem__("nonfinite", meta["nonfinite"] * 201),
     r"meta\.nonfinite holds \d+ entries, more than the 200"),
    ("an oversized list inside an entry", lambda meta: _first("nonfinite")(meta).__setitem__("offsets", [0] * 65),
     r"meta\.nonfinite\[0\]\.offsets"),
    ("an object in a cause", lambda meta: _first("overflow")(meta)["cause"].__setitem__("op", {"a": 1}),
     r"meta\.overflow\[0\]\.cause\.op"),
    ("an unknown field", lambda meta: _first("tf32_dot")(meta).__setitem__("run", "rm -rf"),
     r"meta\.tf32_dot\[0\] has unknown keys \['run'\]"),
    ("a missing field", lambda meta: _first("int32_address")(meta).pop("max"),
     r"meta\.int32_address\[0\] has .*lacks \['max'\]"),
    ("a histogram of text", lambda meta: _first("lowp_accumulation")(meta).__setitem__("hist", ["1"]),
     r"meta\.lowp_accumulation\[0\]\.hist is a list of 1, not a list of integers"),
    ("a sem that is not text", lambda meta: _first("atomic_sem")(meta).__setitem__("sem", 3),
     r"meta\.atomic_sem\[0\]\.sem is 3, not a string"),
    ("a record that is not a list", lambda meta: meta.__setitem__("padded_reduction", {"0": 1}),
     r"meta\.padded_reduction is dict, not a list"),
    ("numerics that is not one of the two", lambda meta: meta.__setitem__("numerics", "import os"),
     r"meta\.numerics is 'import os', not 'interpreter' or 'compiled'"),
]


@pytest.mark.parametrize("what,damage,match", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_check_record_is_refused_naming_it(saved, tmp_path, what, damage, match):
    header, blobs = _parts(saved[1])
    damage(header["launches"][0]["meta"])
    path = tmp_path / "damaged.ttrace"
    _write(path, header, blobs)
    with pytest.raises(TraceFileError, match=match) as e:
        triton_trace.load(path)
    assert str(path) in str(e.value) and "\n" not in str(e.value)


def test_the_recorder_keeps_no_more_entries_than_the_schema_allows(monkeypatch):
    """A record over its declared entries is cut when the launch finishes, so what is saved always loads."""
    rows = tuple(row._replace(records=tuple(r._replace(entries=1) for r in row.records)) for row in table.MONITORS)
    monkeypatch.setattr(table, "MONITORS", rows)
    meta = _record_every_check().launches[0].meta
    assert all(len(meta[r.name]) == 1 for row in rows for r in row.records)


# -- (c) a check added at run time: a monitor, its hooks and its row, nothing else ------------------------------
class LargestSum(Monitor):
    """A toy check: the largest int32 sum each source line made. A maximum is the same however the programs
    ran (one by one, batched, a chunk undone and run again), so the Monitor's defaults do for the rest."""

    def __init__(self, tensors, outputs=()):
        super().__init__(tensors, outputs)
        self.lines: dict = {}

    def note(self, file, line, largest: int) -> None:
        self.lines[(file, line)] = max(self.lines.get((file, line), largest), largest)

    def records(self) -> dict:
        return {"toy_sums": [{"file": f, "line": line, "largest": n} for (f, line), n in sorted(self.lines.items())]}


def install_largest_sum(scope, builder, rec) -> None:
    inner = inner_method(builder, "binary_op")

    def binary_op(lhs, rhs, op, *args, **kwargs):
        out = inner(lhs, rhs, op, *args, **kwargs)
        data = np.asarray(out.data)
        if rec.recording and op is np.add and data.dtype == np.int32 and data.size:
            rec.toy.note(*where(), int(data.max()))
        return out
    scope.set_attr(builder, "binary_op", binary_op)


TOY = table.Row("toy", LargestSum, (install_largest_sum,),
                (Record("toy_sums", {"file": NAME, "line": COUNT, "largest": COUNT}),))


@pytest.fixture
def toy_check(monkeypatch):
    monkeypatch.setattr(table, "MONITORS", table.MONITORS + (TOY,))
    yield TOY


@triton.jit
def _adds(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1.0)


@pytest.mark.parametrize("batch", [False, True])
def test_a_check_added_to_the_table_is_installed_recorded_saved_and_loaded(toy_check, tmp_path, batch):
    x, out = torch.randn(64), torch.zeros(64)
    triton_trace.trace(batch=batch)(_adds)[(4,)](x, out, BLOCK=16)
    assert torch.equal(out, x + 1.0)
    trace = triton_trace.current_trace()
    # one int32 addition, program_id * BLOCK + arange (ptr + offs is an addptr): its largest sum is 63
    assert trace.launches[0].meta["toy_sums"] == [{"file": _adds.fn.__code__.co_filename,
                                                   "line": _adds.fn.__code__.co_firstlineno + 2, "largest": 63}]
    path = tmp_path / "toy.ttrace"
    trace.save(path)
    assert triton_trace.load(path).launches[0].meta["toy_sums"] == trace.launches[0].meta["toy_sums"]
    header, blobs = _parts(path)
    header["launches"][0]["meta"]["toy_sums"][0]["largest"] = -1
    _write(tmp_path / "bad_toy.ttrace", header, blobs)
    with pytest.raises(TraceFileError, match=r"meta\.toy_sums\[0\]\.largest is -1, not an integer from 0"):
        triton_trace.load(tmp_path / "bad_toy.ttrace")


def test_a_file_with_a_record_no_row_declares_is_refused(tmp_path, monkeypatch):
    """The toy's record loads only while its row is in the table: the header reads the table, nothing else."""
    monkeypatch.setattr(table, "MONITORS", table.MONITORS + (TOY,))
    x = torch.randn(16)
    triton_trace.trace(_adds)[(1,)](x, torch.zeros(16), BLOCK=16)
    path = tmp_path / "toy.ttrace"
    triton_trace.current_trace().save(path)
    monkeypatch.setattr(table, "MONITORS", table.MONITORS[:-1])
    with pytest.raises(TraceFileError, match=r"meta has unknown keys \['toy_sums'\]"):
        triton_trace.load(path)


def test_a_row_may_not_take_a_name_the_collector_uses(monkeypatch):
    monkeypatch.setattr(table, "MONITORS", table.MONITORS + (TOY._replace(name="budget"),))
    with pytest.raises(TypeError, match="the row 'budget' names an attribute the collector has"):
        Collector("k", HostMemory())
