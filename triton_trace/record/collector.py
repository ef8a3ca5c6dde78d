"""Columnar recording of one launch: small rows per op, lane data appended as numpy chunks.

Nothing here knows about Triton: the hooks hand in plain numpy arrays and program ids.
"""
from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from ..errors import OutOfBoundsAccess
from ..model import KIND_CODE, MAX_RANK, OP_COLUMNS, Launch, empty_ops
from .memory import HostMemory

DEFAULT_VALUE_CAP = 1 << 22     # elements of values kept per launch (about 32 MB of float64)


class Collector:
    def __init__(self, kernel: str, memory: HostMemory, values_cap: Optional[int] = DEFAULT_VALUE_CAP,
                 program_filter: Optional[Callable] = None, on_oob: str = "skip"):
        self.kernel = kernel
        self.memory = memory
        self.values_cap = 0 if values_cap is None else int(values_cap)
        self.program_filter = program_filter
        self.on_oob = on_oob
        self._rows: list = []
        self._shapes: list = []
        self._offsets: list = []
        self._masks: list = []
        self._values: list = []
        self._lanes = 0
        self._value_bytes = 0
        self._value_elems = 0
        self.values_truncated = False
        self._files: dict = {}
        self._dtypes: dict = {}
        self._seq: dict = {}
        self._flops: dict = {}
        self.recording = True
        self.recorded_programs = 0
        self.skipped_programs = 0
        self.pid = (0, 0, 0)
        self._recorded_ids: list = []

    # -- program boundaries -------------------------------------------------------------------------------
    def begin_program(self, pid: tuple) -> None:
        self.pid = pid
        self.recording = self.program_filter is None or bool(self.program_filter(pid))
        if self.recording:
            self.recorded_programs += 1
            self._recorded_ids.append(pid)
        else:
            self.skipped_programs += 1

    def end_program(self) -> None:
        """Flush the program's elementwise-math counters as one "math" row per source line."""
        if not self._flops:
            return
        for (f, line), flops in sorted(self._flops.items()):
            self._row(self.pid, "math", f, line, -1, 0, (), 0, 0, -1, (flops, 0, 0))
        self._flops.clear()

    # -- ops ------------------------------------------------------------------------------------------------
    def _file_id(self, file: Optional[str]) -> int:
        if file is None:
            return -1
        fid = self._files.get(file)
        if fid is None:
            fid = self._files[file] = len(self._files)
        return fid

    def _row(self, pid, kind, fid, line, tensor, elem_bytes, shape, lane_start, lane_count, value_start, aux,
             value_dtype=-1) -> int:
        seq = self._seq.get(pid, 0)
        self._seq[pid] = seq + 1
        if len(shape) > MAX_RANK:
            shape = (int(np.prod(shape)),)
        self._rows.append((pid, seq, KIND_CODE[kind], fid, line, tensor, elem_bytes, len(shape), lane_start,
                           lane_count, value_start, value_dtype, aux))
        self._shapes.append(shape)
        return len(self._rows) - 1

    def memory_op(self, kind: str, file: Optional[str], line: int, addrs: np.ndarray, mask: np.ndarray,
                  elem_bytes: int):
        """Check and record one memory op before it executes. Returns (lanes safe to execute, row or -1)."""
        mask = np.broadcast_to(np.asarray(mask, dtype=bool), addrs.shape)
        tensor, offsets, safe = self.memory.attribute(addrs, mask, elem_bytes)
        row = -1
        if self.recording:
            n = int(addrs.size)
            self._offsets.append(offsets.reshape(-1))
            self._masks.append(mask.reshape(-1))
            row = self._row(self.pid, kind, self._file_id(file), int(line or 0), tensor, elem_bytes,
                            tuple(addrs.shape), self._lanes, n, -1, (0, 0, 0))
            self._lanes += n
        if kind != "load" and tensor >= 0 and safe.any():
            self.memory.mark_written(tensor)
        if self.on_oob == "raise" and not np.array_equal(safe, mask):
            name = self.memory.tensors[tensor].name if tensor >= 0 else "<unknown>"
            bad = np.argwhere(mask & ~safe)
            raise OutOfBoundsAccess(
                f"kernel '{self.kernel}' program {self.pid} at {file}:{line}: {kind} of '{name}' touches "
                f"{len(bad)} lane(s) outside its storage (first at block index {tuple(int(v) for v in bad[0])}, "
                f"element offset {int(offsets[tuple(bad[0])])}, valid 0..{self.memory.tensors[tensor].storage_size - 1 if tensor >= 0 else '?'})")
        return safe, row

    def record_values(self, row: int, values) -> None:
        if row < 0 or self.values_truncated or self.values_cap <= 0:
            if row >= 0 and self.values_cap > 0:
                self.values_truncated = True
            return
        r = self._rows[row]
        n = r[9]
        if self._value_elems + n > self.values_cap:
            self.values_truncated = True
            return
        v = np.ascontiguousarray(np.broadcast_to(np.asarray(values), self._shapes[row])).reshape(-1)
        t = r[5]
        if v.dtype == np.uint16 and t >= 0 and self.memory.tensors[t].dtype == "bfloat16" and r[6] == 2:
            # numpy has no bfloat16: the interpreter carries its bit patterns as uint16. Widen them to the
            # float32 they denote (exact), so a loaded 1.0 reads 1.0 and not 16256.
            v = (v.astype(np.uint32) << np.uint32(16)).view(np.float32)
        dt = v.dtype.str
        did = self._dtypes.get(dt)
        if did is None:
            did = self._dtypes[dt] = len(self._dtypes)
        self._rows[row] = r[:10] + (self._value_bytes, did) + r[12:]
        self._values.append(v.view(np.uint8))
        self._value_bytes += v.nbytes
        self._value_elems += n

    def compute_op(self, kind: str, file: Optional[str], line: int, shape: tuple, aux: tuple) -> None:
        if self.recording:
            self._row(self.pid, kind, self._file_id(file), int(line or 0), -1, 0, tuple(shape), 0, 0, -1,
                      tuple(aux) + (0,) * (3 - len(aux)))

    def add_flops(self, file: Optional[str], line: int, flops: int) -> None:
        if self.recording and flops:
            key = (self._file_id(file), int(line or 0))
            self._flops[key] = self._flops.get(key, 0) + int(flops)

    # -- finishing --------------------------------------------------------------------------------------------
    def finish(self, **meta) -> Launch:
        self.end_program()
        n = len(self._rows)
        ops = empty_ops(n)
        if n:
            cols = list(zip(*self._rows))
            names = ["program", "seq", "kind", "file", "line", "tensor", "elem_bytes", "ndim", "lane_start",
                     "lane_count", "value_start", "value_dtype", "aux"]
            for name, col in zip(names, cols):
                ops[name] = np.asarray(col, dtype=OP_COLUMNS[name][0]).reshape((n,) + OP_COLUMNS[name][1])
            shapes = np.zeros((n, MAX_RANK), dtype=np.int64)
            for i, s in enumerate(self._shapes):
                shapes[i, :len(s)] = s
            ops["shape"] = shapes
        cat = lambda chunks, dt: np.concatenate(chunks) if chunks else np.zeros(0, dtype=dt)
        return Launch(
            tensors=tuple(self.memory.tensors), files=tuple(self._files), value_dtypes=tuple(self._dtypes),
            ops=ops, offsets=cat(self._offsets, np.int64).astype(np.int64, copy=False),
            mask=cat(self._masks, bool).astype(bool, copy=False), values=cat(self._values, np.uint8),
            recorded_programs=self.recorded_programs, skipped_programs=self.skipped_programs,
            values_truncated=self.values_truncated,
            recorded_ids=np.array(self._recorded_ids, dtype=np.int32).reshape(-1, 3), **meta)
