"""Columnar recording of one launch.

Programs run in chunks: one program at a time, or many at once in batched mode. Each op of a chunk is one
*event* (a small tuple) whose lanes are one block of shape (programs kept, lanes per program); ``finish``
expands events into the per-program rows of ``Launch.ops``, ordered program by program as a sequential
run records them, so both modes give the same trace. Nothing here knows about Triton: the hooks hand in
plain numpy arrays and program ids.

The collector is the recorder's one entry point (executor, hooks, memory proxy and checks drive it) over
four parts: ``events.EventStore`` keeps what was recorded, ``budget.Budget`` decides how much may be and
notes what was left out, ``chunkstate.ChunkState`` says which programs the running ops belong to, and
``budget.Execution`` counts how the programs ran. The runtime checks are checks/table.py's monitors, one
per row, reached as ``rec.<row name>`` (``rec.overflow``) and each driven like the recording itself.
"""
from __future__ import annotations

import copy
from typing import Callable, NamedTuple, Optional

import numpy as np

from ..errors import BatchFallback, OutOfBoundsAccess
from ..model import Launch
from ..model.lanes.encoding import core
from .memory.space import HostMemory
from .batch.affine import LazyOffsets
from .batch.check import ChunkConflicts
from .budget import Budget, BudgetMark, Execution, ExecutionMark, Fallback
from .checks import table
from .chunkstate import ChunkState
from .events import EventsMark, EventStore
from .options import DEFAULT_VALUE_CAP

__all__ = ["Collector", "MemoryAccess", "Mark", "DEFAULT_VALUE_CAP"]


class MemoryAccess(NamedTuple):
    """What ``memory_op`` decided about one memory op, for the memory seam that executes it."""
    safe: np.ndarray        # lanes to execute (active and inside the attributed storage)
    row: int                # the event the op was recorded as, or -1
    tensor: int             # the argument it was attributed to, or -1
    offsets: np.ndarray     # element offsets into that argument's storage
    aligned: bool           # every lane element-aligned (numpy can serve it from a typed view)


class Mark(NamedTuple):
    """Where the recording stood before a chunk, to forget the chunk if it is undone."""
    events: EventsMark
    budget: BudgetMark
    execution: ExecutionMark
    monitors: tuple          # each monitor's own mark, in table order
    stored: object           # the memory's written-argument flags


class Collector:
    def __init__(self, kernel: str, memory: HostMemory, values_cap: Optional[int] = DEFAULT_VALUE_CAP,
                 program_filter: Optional[Callable] = None, on_oob: str = "skip",
                 memory_limit: Optional[int] = None, outputs: tuple = ()):
        self.kernel = kernel
        self.memory = memory
        self.on_oob = on_oob
        self.budget = Budget(values_cap, memory_limit)
        self.events = EventStore(self.budget.values_cap)
        self.chunk = ChunkState(program_filter)
        self.execution = Execution()
        self.meta_extra: dict = {}           # more entries of Launch.meta (e.g. the failing device_assert)
        self.origin = None                   # the argument the running memory op's pointers derive from
        self.touches = None                  # a worker's note of the memory its ops touch (record/parallel/)
        self._conflicts: Optional[ChunkConflicts] = None
        self._scratch: dict = {}
        # one monitor per row of the checks table, in table order (the order they are driven and marked in),
        # each also an attribute named as its row: what the row's hooks report to (rec.overflow)
        self.monitors = {row.name: table.resolve(row.monitor)(memory.tensors, outputs) for row in table.MONITORS}
        for name, monitor in self.monitors.items():
            if hasattr(self, name):
                raise TypeError(f"checks/table.py: the row '{name}' names an attribute the collector has; "
                                f"give the row another name")
            setattr(self, name, monitor)

    # the running chunk, as the hooks read it on every op
    recording = property(lambda self: self.chunk.recording)
    batched = property(lambda self: self.chunk.batched)
    pid = property(lambda self: self.chunk.pid)
    values_truncated = property(lambda self: self.budget.values_truncated)

    @property
    def nbytes(self) -> int:
        """Bytes the recording holds now: lanes, values and event rows."""
        return self.events.nbytes

    # -- chunk boundaries ---------------------------------------------------------------------------------
    def begin_chunk(self, pids: np.ndarray, batched: bool) -> None:
        """Start recording the programs ``pids`` ((P, 3), execution order); batched: they run at once."""
        pids = np.asarray(pids, dtype=np.int32).reshape(-1, 3)
        record = self.budget.chunk_starts(self.nbytes, tuple(int(v) for v in pids[0]))
        self.memory.end_views()
        self.chunk.begin(pids, batched, record)
        self.events.begin_chunk()
        for m in self.monitors.values():
            m.begin(pids, self.chunk.keep, batched)
        self._conflicts = ChunkConflicts(self.memory, len(pids), self._scratch) if batched else None

    def begin_program(self, pid: tuple) -> None:
        self.begin_chunk(np.array([pid]), batched=False)

    def set_active(self, active: Optional[np.ndarray], rows: Optional[np.ndarray] = None) -> None:
        """From now on the ops' values have one row per program ``rows`` of the chunk (indexes, in order;
        None: every program), and of these only ``active`` (bool over the rows; None: all) run the ops: a
        loop whose trip count differs between programs, past some programs' last trip."""
        if active is not None:
            active = active.copy()               # kept by this trip's events: the caller may reuse its array
        self.chunk.set_active(active, rows)
        for m in self.monitors.values():
            m.set_active(active, rows)

    def active_programs(self) -> Optional[np.ndarray]:
        """Of the rows the ops' values have, the programs running the current ops; None when all do (or one
        program runs)."""
        return self.chunk.active_programs()

    def end_chunk(self) -> None:
        """Close the chunk: check it (batched), flush elementwise-math counters, count its programs."""
        c = self.chunk
        if not c.open:
            return
        if self._conflicts is not None:
            self._conflicts.check()           # raises BatchFallback before anything is committed
        c.reset_active()
        self.events.end_chunk(c.kept, c.keep)
        self.execution.chunk_ended(c.size, len(c.kept), c.batched)
        self.budget.chunk_ends(self.nbytes)
        c.open = False

    end_program = end_chunk

    def abort_chunk(self) -> None:
        """The running chunk stopped (it raised or will be undone): no longer batched or open."""
        self.chunk.abort()

    def note_fallback(self, first: int, programs: int, why: str) -> None:
        """Programs ``first .. first + programs`` ran one by one instead of batched, and why."""
        self.execution.fallbacks.append(Fallback(first, programs, why))

    def mark(self) -> Mark:
        return Mark(self.events.mark(), self.budget.mark(), self.execution.mark(),
                    tuple(m.mark() for m in self.monitors.values()), self.memory.stored_flags())

    def rollback(self, mark: Mark) -> None:
        """Forget everything recorded since ``mark`` (a chunk that is re-run program by program)."""
        self.memory.restore_stored(mark.stored)
        for m, at in zip(self.monitors.values(), mark.monitors):
            m.rollback(at)
        self.budget.rollback(mark.budget)
        self.execution.rollback(mark.execution)
        self.events.rollback(mark.events)
        self.chunk.open = False

    # -- ops ------------------------------------------------------------------------------------------------
    def memory_op(self, kind: str, file: Optional[str], line: int, addrs: np.ndarray, mask: np.ndarray,
                  elem_bytes: int) -> MemoryAccess:
        """Check and record one memory op before it executes (its pointers derive from ``self.origin``
        when the seam knows it).

        In a batched chunk ``addrs`` has a leading program axis over every program of the chunk."""
        c = self.chunk
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), addrs.shape)
        if c.batched:
            tensor, offsets, safe = self.memory.attribute(addrs, mask, elem_bytes, chunk=True, origin=self.origin)
            affine = self.memory.affine
            shape = addrs.shape[1:]
            self.execution.widest = max(self.execution.widest, int(np.prod(shape, dtype=np.int64)))
            if tensor >= 0:
                self._conflicts.add(tensor, offsets, safe, kind != "load", elem_bytes, affine, c.data_rows)
        else:
            tensor, offsets, safe = self.memory.attribute(addrs, mask, elem_bytes, origin=self.origin)
            shape, affine = addrs.shape, None
        if self.touches is not None and tensor >= 0:
            self.touches.add(self.memory.storage_of(tensor), kind != "load", kind not in ("load", "store"),
                             offsets, safe, elem_bytes, c.batched, self.memory.affine if c.batched else None)
        row = -1
        rows = c.event_rows()
        if c.recording and (rows is None or rows.any()):
            row = self._record_lanes(kind, file, line, tensor, elem_bytes, shape, offsets, mask, affine, rows)
        if kind != "load" and tensor >= 0 and safe.any():
            self.memory.mark_written(tensor)
        if self.on_oob == "raise" and not np.array_equal(safe, mask):
            self._out_of_bounds(kind, file, line, tensor, offsets, mask, safe)
        return MemoryAccess(safe, row, tensor, offsets, self.memory.aligned)

    def _record_lanes(self, kind, file, line, tensor, elem_bytes, shape, offsets, mask, affine, rows) -> int:
        """The event of a memory op, with its kept programs' lanes; its index."""
        sel, lanes = self.chunk.sel, self.events.lanes
        n = int(np.prod(shape, dtype=np.int64))
        if not mask.flags.c_contiguous and core(mask).all():      # a broadcast all-true mask: no copy
            m = np.broadcast_to(np.True_, (mask.shape[0] if self.chunk.batched else 1, n))
        else:
            m = mask.reshape(-1, n)
        if isinstance(offsets, LazyOffsets):         # described pointers: recorded without their lanes
            o = offsets if sel is None else offsets.rows(sel)
            m = m if sel is None else m[sel]
            start = lanes.add_affine(o.first, o.strides, m, tuple(shape))
        else:
            o = offsets.reshape(-1, n)
            if sel is not None:
                o, m = o[sel], m[sel]
            start = lanes.add(o, m, shape=tuple(shape), affine=affine is not None)
        return self.events.add(kind, self.events.file_id(file), int(line or 0), tensor, elem_bytes, shape, start, n,
                               (0, 0, 0), rows=rows)

    def _out_of_bounds(self, kind, file, line, tensor, offsets, mask, safe) -> None:
        if self.chunk.batched:
            raise BatchFallback("an out-of-bounds access with on_oob='raise'")
        t = self.memory.tensors[tensor] if tensor >= 0 else None
        bad = np.argwhere(mask & ~safe)
        raise OutOfBoundsAccess(
            f"kernel '{self.kernel}' program {self.pid} at {file}:{line}: {kind} of "
            f"'{t.name if t is not None else '<unknown>'}' touches {len(bad)} lane(s) outside its storage (first "
            f"at block index {tuple(int(v) for v in bad[0])}, element offset {int(offsets[tuple(bad[0])])}, valid "
            f"0..{t.storage_size - 1 if t is not None else '?'})")

    def stored_values(self, tensor: int, values) -> None:
        """The values of the plain store ``memory_op`` just checked (a batched chunk's exact check may need
        them: batch/check.ChunkConflicts.stored)."""
        if self._conflicts is not None and tensor >= 0:
            self._conflicts.stored(tensor, values)

    def record_values(self, row: int, values) -> None:
        if row < 0:
            return
        c, ev = self.chunk, self.events.events[row]
        rows, n = (len(c.kept) if ev.rows is None else int(ev.rows.sum())), ev.lanes
        b = self.budget
        if not b.take_values(rows * n, self.nbytes if b.memory_limit is not None else 0, c.pid, row):
            return
        v = np.asarray(values)
        if c.batched:
            v = np.broadcast_to(v, (c.value_rows(),) + ev.shape)
            if c.sel is not None:
                v = v[c.sel]
            shape = (rows,) + ev.shape
        else:
            shape = ev.shape
        v = np.broadcast_to(v, shape)
        t = ev.tensor
        if v.dtype == np.uint16 and t >= 0 and self.memory.tensors[t].dtype == "bfloat16" and ev.elem_bytes == 2:
            # numpy has no bfloat16: the interpreter carries its bit patterns as uint16. Widen them to the
            # float32 they denote (exact), so a loaded 1.0 reads 1.0 and not 16256.
            v = (v.astype(np.uint32) << np.uint32(16)).view(np.float32)
        self.events.add_values(row, v)

    def compute_op(self, kind: str, file: Optional[str], line: int, shape: tuple, aux: tuple) -> None:
        rows = self.chunk.event_rows()
        if self.chunk.recording and (rows is None or rows.any()):
            self.events.add(kind, self.events.file_id(file), int(line or 0), -1, 0, tuple(shape), 0, 0,
                            tuple(aux) + (0,) * (3 - len(aux)), rows=rows)

    def add_flops(self, file: Optional[str], line: int, flops: int) -> None:
        """Count elementwise flops of one program (every program of a batched chunk does the same)."""
        c = self.chunk
        if c.recording and flops:
            key = (self.events.file_id(file), int(line or 0))
            # some programs sit out (a masked loop): counted per program
            self.events.add_flops(key, flops, c.active if c.batched else None, c.size)

    # -- worker processes (record/parallel/) ------------------------------------------------------------------
    def begin_worker(self) -> dict:
        """In a worker process, right after it forked: record from here into fresh stores (what ``handoff``
        gives back), keeping the value budget and the checks' state, which decide what later programs record.
        Returns where the worker's part began."""
        self.events.restart()
        self.execution = Execution()
        self.budget.refused = None
        return {"monitors": {name: m.fork_point() for name, m in self.monitors.items()},
                "meta": copy.deepcopy(self.meta_extra)}

    def handoff(self, began: dict) -> dict:
        """What the worker recorded since ``begin_worker``, for ``absorb`` in the process that goes on."""
        return {"events": self.events.handoff(), "execution": self.execution, "refused": self.budget.refused,
                "monitors": {name: m.since(began["monitors"][name]) for name, m in self.monitors.items()},
                "meta": {k: v for k, v in self.meta_extra.items() if k not in began["meta"] or began["meta"][k] != v}}

    def mergeable(self, part: dict) -> Optional[str]:
        """Why ``absorb(part)`` would not record what running its programs here would have, or None."""
        for name, monitor in self.monitors.items():
            why = monitor.mergeable(part["monitors"][name])
            if why is not None:
                return f"the {name} check: {why}"
        other = sorted(set(part["meta"]) - {"inline_asm_approx"})
        return f"the worker set the launch's meta {other}" if other else None

    def absorb(self, part: dict) -> None:
        """Record what a worker recorded (``handoff``, ``mergeable`` said yes) for the programs after those
        recorded here, as if they had run here: values kept within the same value cap, checks merged."""
        b = self.budget
        self.events.absorb(part["events"], lambda elems: b.take_values(elems, 0, self.chunk.pid), part["refused"])
        self.execution.absorb(part["execution"])
        for name, monitor in self.monitors.items():
            monitor.merge(part["monitors"][name])
        approx = part["meta"].get("inline_asm_approx")
        if approx:
            seen = self.meta_extra.setdefault("inline_asm_approx", [])
            seen.extend(name for name in approx if name not in seen)

    # -- finishing --------------------------------------------------------------------------------------------
    def checks_meta(self) -> dict:
        """The monitors' records, under the names their rows declare (each cut to the entries its schema
        allows, so a saved trace always loads); records with no entry are left out."""
        out = {}
        for row in table.MONITORS:
            found = self.monitors[row.name].records()
            for record in row.records:
                entries = found.get(record.name)
                if entries:
                    out[record.name] = list(entries[:record.entries])
        return out

    def finish(self, **meta) -> Launch:
        if self.chunk.open:                     # a program that failed: keep what it recorded
            self._conflicts = None
            self.end_chunk()
        ex = self.execution
        return Launch(
            tensors=tuple(self.memory.tensors), **self.events.columns(),
            recorded_programs=ex.recorded_programs, skipped_programs=ex.skipped_programs,
            values_truncated=self.budget.values_truncated,
            meta={"execution": ex.meta(self.budget), **self.meta_extra, **self.checks_meta()}, **meta)
