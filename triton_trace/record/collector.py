"""Columnar recording of one launch.

Programs run in chunks: one program at a time, or many at once in batched mode. Each op of a chunk is one
*event* (a small tuple) whose lanes are one block of shape (programs kept, lanes per program); ``finish``
expands events into the per-program rows of ``Launch.ops``, ordered program by program as a sequential
run records them, so both modes give the same trace. Nothing here knows about Triton: the hooks hand in
plain numpy arrays and program ids.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional

import numpy as np

from ..errors import BatchFallback, OutOfBoundsAccess
from ..model.lanes import LaneWriter
from ..model import KIND_CODE, Launch
from ..model.lanes.encoding import core
from .memory.space import HostMemory
from .batch.affine import LazyOffsets
from .batch.check import ChunkConflicts
from .checks.nonfinite import NonFinite
from .oprows import Event, op_rows
from .checks.overflow import Overflow
from .checks.lanes import LaneConflicts
from .checks.addresses import Int32Addresses
from .checks.tf32 import TF32Dots
from .checks.padding import PaddedReductions
from .valueblob import ValueBlob

DEFAULT_VALUE_CAP = 1 << 22     # elements of values kept per launch (about 32 MB of float64)


class MemoryAccess(NamedTuple):
    """What ``memory_op`` decided about one memory op, for the memory seam that executes it."""
    safe: np.ndarray        # lanes to execute (active and inside the attributed storage)
    row: int                # the event the op was recorded as, or -1
    tensor: int             # the argument it was attributed to, or -1
    offsets: np.ndarray     # element offsets into that argument's storage
    aligned: bool           # every lane element-aligned (numpy can serve it from a typed view)


class Collector:
    def __init__(self, kernel: str, memory: HostMemory, values_cap: Optional[int] = DEFAULT_VALUE_CAP,
                 program_filter: Optional[Callable] = None, on_oob: str = "skip",
                 memory_limit: Optional[int] = None, outputs: tuple = ()):
        self.kernel = kernel
        self.memory = memory
        self.values_cap = 0 if values_cap is None else int(values_cap)
        self.program_filter = program_filter
        self.on_oob = on_oob
        self._events: list = []
        self._chunk_pids: list = []      # per chunk: (R, 3) int32, the kept programs in execution order
        self._lanes = LaneWriter()
        self._blob = ValueBlob(self.values_cap)
        self._value_bytes = 0
        self._value_elems = 0
        self.values_truncated = False
        self._files: dict = {}
        self._dtypes: dict = {}
        self._flops: dict = {}
        self.recording = True
        self.recorded_programs = 0
        self.skipped_programs = 0
        self.pid = (0, 0, 0)
        self.batched = False
        self._keep: Optional[np.ndarray] = None
        self._active: Optional[np.ndarray] = None   # programs of the chunk running the current ops (masked loops)
        self._data_rows: Optional[np.ndarray] = None  # the chunk's programs the ops' rows belong to (a sub-chunk)
        self._data_active: Optional[np.ndarray] = None  # of those rows, the ones running (None: all)
        self._sel: Optional[np.ndarray] = None      # of those rows, the ones recorded (kept and running)
        self._size = 1
        self._seq = 0
        self._open = False
        self._conflicts: Optional[ChunkConflicts] = None
        self._scratch: dict = {}
        self.fallbacks: list = []            # (first program index, programs, reason) of chunks re-run one by one
        self.batched_programs = 0
        self.widest = 0                 # lanes per program of the widest memory op a chunk ran
        self.diverged_chunks = 0             # chunks whose programs diverged and ran as runs that agree
        self.memory_limit = memory_limit
        self.limit_notes: list = []          # what the memory limit made us leave out
        self._stopped = False                # the limit is reached: later programs run unrecorded
        self._growth = 0                     # bytes the last chunk added (to stop before the next one)
        self._chunk_start_bytes = 0
        self.meta_extra: dict = {}           # more entries of Launch.meta (e.g. the failing device_assert)
        self.origin = None                   # the argument the running memory op's pointers derive from
        self.nonfinite = NonFinite(memory.tensors, outputs)   # NaN/Inf births and the stores they reach
        self.overflow = Overflow(memory.tensors)     # wrapped int32 / saturated conversions that reach memory
        self.lane_conflicts = LaneConflicts(memory.tensors)   # two lanes of one store, one address, two values
        self.int32_address = Int32Addresses(memory.tensors)   # the largest int32 offset behind each memory op
        self.tf32_dots = TF32Dots()                  # float32 dots: how far the GPU's TF32 result lies
        self.padded = PaddedReductions(memory.tensors)   # reductions a masked load's other= value changed

    # -- chunk boundaries ---------------------------------------------------------------------------------
    def begin_chunk(self, pids: np.ndarray, batched: bool) -> None:
        """Start recording the programs ``pids`` ((P, 3), execution order); batched: they run at once."""
        pids = np.asarray(pids, dtype=np.int32).reshape(-1, 3)
        self.pid = tuple(int(v) for v in pids[0])
        self.batched, self._size, self._seq, self._open = batched, len(pids), 0, True
        if self.memory_limit is not None and not self._stopped and \
                self.nbytes + self._growth > self.memory_limit:
            self._stopped = True
            self.limit_notes.append(f"memory_limit: programs from {self.pid} on ran without being recorded")
        self._chunk_start_bytes = self.nbytes
        self.memory.end_views()
        if self._stopped:
            keep, kept = np.zeros(len(pids), bool), pids[:0]
        elif self.program_filter is None:
            keep, kept = None, pids
        else:
            keep = np.fromiter((bool(self.program_filter(tuple(int(v) for v in p))) for p in pids), bool, len(pids))
            kept = pids[keep]
        self._keep = keep
        self._reset_active()
        self.nonfinite.begin(pids, keep, batched)
        self.overflow.begin(pids, keep, batched)
        self.lane_conflicts.begin(pids, keep, batched)
        self.padded.begin(pids, keep, batched)
        self.recording = len(kept) > 0
        self._kept = kept
        self._conflicts = ChunkConflicts(self.memory, len(pids), self._scratch) if batched else None

    def set_active(self, active: Optional[np.ndarray], rows: Optional[np.ndarray] = None) -> None:
        """From now on the ops' values have one row per program ``rows`` of the chunk (indexes, in order;
        None: every program), and of these only ``active`` (bool over the rows; None: all) run the ops: a
        loop whose trip count differs between programs, past some programs' last trip."""
        if active is not None:
            active = active.copy()               # kept by this trip's events: the caller may reuse its array
        self._data_rows, self._data_active = rows, active
        if rows is None and active is None:
            self._active, self._sel = None, self._keep
        else:
            if rows is None:
                self._active = active
            else:
                self._active = np.zeros(self._size, dtype=bool)
                self._active[rows if active is None else rows[active]] = True
            keep = self._keep if rows is None or self._keep is None else self._keep[rows]
            self._sel = active if keep is None else (keep if active is None else keep & active)
        self.nonfinite.set_active(active, rows)
        self.overflow.set_active(active, rows)
        self.lane_conflicts.set_active(active, rows)
        self.padded.set_active(active, rows)

    def _reset_active(self) -> None:
        self._active = self._data_rows = self._data_active = None
        self._sel = self._keep

    def active_programs(self) -> Optional[np.ndarray]:
        """Of the rows the ops' values have, the programs running the current ops; None when all do (or one
        program runs)."""
        return self._data_active if self.batched else None

    def _event_rows(self):
        """The kept programs running the current op: None for all of them, else a bool mask over them."""
        if self._active is None:
            return None
        return self._active if self._keep is None else self._active[self._keep]

    def begin_program(self, pid: tuple) -> None:
        self.begin_chunk(np.array([pid]), batched=False)

    def end_chunk(self) -> None:
        """Close the chunk: check it (batched), flush elementwise-math counters, count its programs."""
        if not self._open:
            return
        if self._conflicts is not None:
            self._conflicts.check()           # raises BatchFallback before anything is committed
        self._reset_active()
        for (f, line), flops in sorted(self._flops.items()):
            if np.ndim(flops) == 0:
                self._event("math", f, line, -1, 0, (), 0, 0, (int(flops), 0, 0))
                continue
            per = flops if self._keep is None else flops[self._keep]    # per program: masked loops differ
            for v in np.unique(per[per > 0]).tolist():
                self._event("math", f, line, -1, 0, (), 0, 0, (int(v), 0, 0), rows=per == v)
        self._flops.clear()
        self._chunk_pids.append(self._kept)
        self.recorded_programs += len(self._kept)
        self.skipped_programs += self._size - len(self._kept)
        if self.batched:
            self.batched_programs += self._size
        self._growth = max(self._growth, self.nbytes - self._chunk_start_bytes)
        self._open = False

    @property
    def nbytes(self) -> int:
        """Bytes the recording holds now: lanes, values and event rows."""
        return self._lanes.nbytes + self._value_bytes + 120 * len(self._events)

    end_program = end_chunk

    def abort_chunk(self) -> None:
        """The running chunk stopped (it raised or will be undone): no longer batched or open."""
        self.batched = False
        self._open = False
        self._reset_active()

    def note_fallback(self, first: int, programs: int, why: str) -> None:
        """Programs ``first .. first + programs`` ran one by one instead of batched, and why."""
        self.fallbacks.append((first, programs, why))

    def mark(self) -> tuple:
        return (len(self._events), len(self._chunk_pids), self._lanes.mark(), self._blob.used,
                self._value_bytes, self._value_elems, self.values_truncated, set(self._files), set(self._dtypes),
                self._stopped, len(self.limit_notes), self.nonfinite.mark(), self.overflow.mark(),
                self.lane_conflicts.mark(), self.padded.mark(), self.memory.stored_flags())

    def rollback(self, mark: tuple) -> None:
        """Forget everything recorded since ``mark`` (a chunk that is re-run program by program)."""
        (ne, nc, lanes, nv, self._value_bytes, self._value_elems, self.values_truncated, files, dtypes,
         self._stopped, nn, nonfinite, overflow, conflicts, padded, stored) = mark
        self.memory.restore_stored(stored)
        self.nonfinite.rollback(nonfinite)
        self.overflow.rollback(overflow)
        self.lane_conflicts.rollback(conflicts)
        self.padded.rollback(padded)
        del self.limit_notes[nn:]
        del self._events[ne:], self._chunk_pids[nc:]
        self._blob.used = nv
        self._lanes.rollback(lanes)
        self._files = {k: v for k, v in self._files.items() if k in files}
        self._dtypes = {k: v for k, v in self._dtypes.items() if k in dtypes}
        self._flops.clear()
        self._open = False

    # -- ops ------------------------------------------------------------------------------------------------
    def _file_id(self, file: Optional[str]) -> int:
        if file is None:
            return -1
        fid = self._files.get(file)
        if fid is None:
            fid = self._files[file] = len(self._files)
        return fid

    def _event(self, kind, fid, line, tensor, elem_bytes, shape, lane_start, lane_count, aux, rows=None) -> int:
        # the event keeps the block's own shape (values are broadcast to it); a rank above the ops
        # table's MAX_RANK is flattened only when the table is built
        ev = Event(len(self._chunk_pids), self._seq, KIND_CODE[kind], fid, line, tensor, elem_bytes,
                    tuple(shape), lane_start, lane_count, aux)
        ev.rows = rows
        self._events.append(ev)
        self._seq += 1
        return len(self._events) - 1

    def memory_op(self, kind: str, file: Optional[str], line: int, addrs: np.ndarray, mask: np.ndarray,
                  elem_bytes: int) -> MemoryAccess:
        """Check and record one memory op before it executes (its pointers derive from ``self.origin``
        when the seam knows it).

        In a batched chunk ``addrs`` has a leading program axis over every program of the chunk."""
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), addrs.shape)
        if self.batched:
            tensor, offsets, safe = self.memory.attribute(addrs, mask, elem_bytes, chunk=True, origin=self.origin)
            affine = self.memory.affine
            shape = addrs.shape[1:]
            self.widest = max(self.widest, int(np.prod(shape, dtype=np.int64)))
            if tensor >= 0:
                self._conflicts.add(tensor, offsets, safe, kind != "load", elem_bytes, affine, self._data_rows)
        else:
            tensor, offsets, safe = self.memory.attribute(addrs, mask, elem_bytes, origin=self.origin)
            shape, affine = addrs.shape, None
        row = -1
        rows = self._event_rows() if self.batched else None
        if self.recording and (rows is None or rows.any()):
            n = int(np.prod(shape, dtype=np.int64))
            if not mask.flags.c_contiguous and core(mask).all():      # a broadcast all-true mask: no copy
                m = np.broadcast_to(np.True_, (mask.shape[0] if self.batched else 1, n))
            else:
                m = mask.reshape(-1, n)
            if isinstance(offsets, LazyOffsets):         # described pointers: recorded without their lanes
                o = offsets if self._sel is None else offsets.rows(self._sel)
                m = m if self._sel is None else m[self._sel]
                start = self._lanes.add_affine(o.first, o.strides, m, tuple(shape))
            else:
                o = offsets.reshape(-1, n)
                if self._sel is not None:
                    o, m = o[self._sel], m[self._sel]
                start = self._lanes.add(o, m, shape=tuple(shape), affine=affine is not None)
            row = self._event(kind, self._file_id(file), int(line or 0), tensor, elem_bytes, shape, start, n,
                              (0, 0, 0), rows=rows)
        if kind != "load" and tensor >= 0 and safe.any():
            self.memory.mark_written(tensor)
        if self.on_oob == "raise" and not np.array_equal(safe, mask):
            if self.batched:
                raise BatchFallback("an out-of-bounds access with on_oob='raise'")
            name = self.memory.tensors[tensor].name if tensor >= 0 else "<unknown>"
            bad = np.argwhere(mask & ~safe)
            raise OutOfBoundsAccess(
                f"kernel '{self.kernel}' program {self.pid} at {file}:{line}: {kind} of '{name}' touches "
                f"{len(bad)} lane(s) outside its storage (first at block index {tuple(int(v) for v in bad[0])}, "
                f"element offset {int(offsets[tuple(bad[0])])}, valid 0..{self.memory.tensors[tensor].storage_size - 1 if tensor >= 0 else '?'})")
        return MemoryAccess(safe, row, tensor, offsets, self.memory.aligned)

    def stored_values(self, tensor: int, values) -> None:
        """The values of the plain store ``memory_op`` just checked (a batched chunk's exact check may need
        them: batch/check.ChunkConflicts.stored)."""
        if self._conflicts is not None and tensor >= 0:
            self._conflicts.stored(tensor, values)

    def record_values(self, row: int, values) -> None:
        if row < 0 or self.values_truncated or self.values_cap <= 0:
            if row >= 0 and self.values_cap > 0:
                self.values_truncated = True
            return
        ev = self._events[row]
        rows, n = (len(self._kept) if ev.rows is None else int(ev.rows.sum())), ev.lanes
        if self._value_elems + rows * n > self.values_cap:
            self.values_truncated = True
            return
        if self.memory_limit is not None and self.nbytes + 2 * rows * n * 8 + self._growth > self.memory_limit:
            self.values_truncated = True
            self.limit_notes.append(f"memory_limit: values dropped from program {self.pid} on")
            return
        v = np.asarray(values)
        if self.batched:
            v = np.broadcast_to(v, (self._size if self._data_rows is None else len(self._data_rows),) + ev.shape)
            if self._sel is not None:
                v = v[self._sel]
            shape = (rows,) + ev.shape
        else:
            shape = ev.shape
        v = np.broadcast_to(v, shape)
        t = ev.tensor
        if v.dtype == np.uint16 and t >= 0 and self.memory.tensors[t].dtype == "bfloat16" and ev.elem_bytes == 2:
            # numpy has no bfloat16: the interpreter carries its bit patterns as uint16. Widen them to the
            # float32 they denote (exact), so a loaded 1.0 reads 1.0 and not 16256.
            v = (v.astype(np.uint32) << np.uint32(16)).view(np.float32)
        dt = v.dtype.str
        did = self._dtypes.get(dt)
        if did is None:
            did = self._dtypes[dt] = len(self._dtypes)
        start = self._blob.append(v)
        ev.value_start, ev.value_dtype, ev.value_size = start, did, v.dtype.itemsize
        self._value_bytes = self._blob.used
        self._value_elems += rows * n

    def compute_op(self, kind: str, file: Optional[str], line: int, shape: tuple, aux: tuple) -> None:
        rows = self._event_rows() if self.batched else None
        if self.recording and (rows is None or rows.any()):
            self._event(kind, self._file_id(file), int(line or 0), -1, 0, tuple(shape), 0, 0,
                        tuple(aux) + (0,) * (3 - len(aux)), rows=rows)

    def add_flops(self, file: Optional[str], line: int, flops: int) -> None:
        """Count elementwise flops of one program (every program of a batched chunk does the same)."""
        if self.recording and flops:
            key = (self._file_id(file), int(line or 0))
            if self._active is None or not self.batched:
                self._flops[key] = self._flops.get(key, 0) + int(flops)
            else:                 # some programs sit out (a masked loop): count per program
                per = self._flops.get(key, 0)
                if np.ndim(per) == 0:
                    per = np.full(self._size, per, dtype=np.int64)
                per[self._active] += int(flops)
                self._flops[key] = per

    # -- finishing --------------------------------------------------------------------------------------------
    def execution(self) -> dict:
        """How the programs ran: how many in batched chunks, and which chunks were re-run one by one."""
        return {"batched_programs": int(self.batched_programs), "diverged_chunks": int(self.diverged_chunks),
                "memory_limit": self.memory_limit,
                "limit_notes": list(self.limit_notes),
                "fallbacks": [{"first": int(a), "programs": int(b), "reason": r} for a, b, r in self.fallbacks]}

    def finish(self, **meta) -> Launch:
        if self._open:                          # a program that failed: keep what it recorded
            self._conflicts = None
            self.end_chunk()
        ops = op_rows(self._events, self._chunk_pids)
        lanes = self._lanes.finish()
        values = self._blob.array()
        recorded = np.concatenate(self._chunk_pids) if self._chunk_pids else np.zeros((0, 3), np.int32)
        return Launch(
            tensors=tuple(self.memory.tensors), files=tuple(self._files), value_dtypes=tuple(self._dtypes),
            ops=ops, lanes=lanes, values=values,
            recorded_programs=self.recorded_programs, skipped_programs=self.skipped_programs,
            values_truncated=self.values_truncated, recorded_ids=recorded.astype(np.int32).reshape(-1, 3),
            meta={"execution": self.execution(), **self.meta_extra,
                  **({"nonfinite": list(self.nonfinite.reports)} if self.nonfinite.reports else {}),
                  **({"overflow": self.overflow.finished(self.overflow.reports)} if self.overflow.reports else {}),
                  **({"intdiv": self.overflow.finished(self.overflow.divisions)} if self.overflow.divisions else {}),
                  **({"lane_conflict": self.lane_conflicts.finished(self.lane_conflicts.reports)}
                     if self.lane_conflicts.reports else {}),
                  **({"int32_address": self.int32_address.reports()} if self.int32_address.largest else {}),
                  **({"tf32_dot": self.tf32_dots.reports()} if self.tf32_dots.lines else {}),
                  **({"padded_reduction": self.padded.finished(self.padded.reports)} if self.padded.reports else {})},
            **meta)
