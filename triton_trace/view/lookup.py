"""Per-app lookup tables over a frozen Trace, built on first use and kept for the app's lifetime.

The web app answers many small questions about one launch ("the ops of program (3, 1, 0)", "which
elements of ``a`` did every program touch"); scanning the whole op table for each would make a click
cost O(ops). A ``LaunchIndex`` sorts the op rows by program once and derives the per-op numbers the
views show (active lanes, bytes, out-of-bounds lanes); sectors, the cache model and findings come from
the analysis report. A ``TraceIndex`` holds one LaunchIndex per launch plus the report, and belongs to
one app: there is no module-level cache.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Optional

import numpy as np

from ..model import KINDS, MEMORY_KINDS, READ_KINDS, WRITE_KINDS, Launch, Trace
from ..model.values import lane_values

_N_MEM = len(MEMORY_KINDS)
_READ = np.array([k in READ_KINDS for k in KINDS])
_WRITE = np.array([k in WRITE_KINDS for k in KINDS])


class LaunchIndex:
    """Rows of one launch ordered by (program, seq), with per-op and per-program numbers."""

    def __init__(self, launch: Launch):
        self.launch = launch
        o = launch.ops
        gx, gy, gz = (int(g) for g in launch.grid)
        self.grid = (gx, gy, gz)
        self.num_programs = gx * gy * gz
        p = o["program"].astype(np.int64)
        valid = np.all((p >= 0) & (p < np.array([gx, gy, gz])), axis=1) if len(p) else np.zeros(0, bool)
        lin = p[:, 0] + gx * (p[:, 1] + gy * p[:, 2]) if len(p) else np.zeros(0, np.int64)
        lin = np.where(valid, lin, -1)        # rows of a damaged file whose program is off the grid
        self.lin = lin
        order = np.lexsort((o["seq"], lin))
        self.order = order[lin[order] >= 0]
        self.bounds = np.searchsorted(lin[self.order], np.arange(self.num_programs + 1))
        self._op_numbers()
        self._program_numbers()

    # -- per op ------------------------------------------------------------------------------------------
    def _op_numbers(self) -> None:
        lc, o = self.launch, self.launch.ops
        n = lc.num_ops
        kind = o["kind"].astype(np.int64)
        self.memory = kind < _N_MEM
        counts = np.where(self.memory, o["lane_count"], 0).astype(np.int64)
        rows = np.nonzero(counts)[0]
        # every lane, decoded once while the index is built and dropped after: the index keeps per-row numbers
        off, active = lc.lanes.gather(o["lane_start"][rows], counts[rows])
        lane_row = np.repeat(rows, counts[rows])
        size = np.array([t.storage_size for t in lc.tensors] + [0], dtype=np.int64)
        t = o["tensor"].astype(np.int64)[lane_row]
        inside = (off >= 0) & (off < size[t]) & (t >= 0)
        self.total = counts
        self.active = np.bincount(lane_row[active], minlength=n).astype(np.int64)
        self.oob = np.bincount(lane_row[active & ~inside], minlength=n).astype(np.int64)
        executed = (self.active - self.oob)
        self.bytes = executed * o["elem_bytes"].astype(np.int64)
        self.read = _READ[kind] if n else np.zeros(0, bool)
        self.write = _WRITE[kind] if n else np.zeros(0, bool)

    # -- per program -------------------------------------------------------------------------------------
    def _program_numbers(self) -> None:
        n = self.num_programs
        rows = self.order
        lin = self.lin[rows]
        mem = self.memory[rows]

        def per_program(values) -> np.ndarray:
            return np.bincount(lin, weights=values, minlength=n)[:n] if len(rows) else np.zeros(n)

        self.recorded = np.diff(self.bounds) > 0
        ids = getattr(self.launch, "recorded_ids", None)
        if ids is not None and len(ids):      # programs that ran recorded but issued no op
            ids = np.asarray(ids, dtype=np.int64)
            ok = np.all((ids >= 0) & (ids < np.array(self.grid)), axis=1)
            gx, gy, _ = self.grid
            self.recorded[ids[ok, 0] + gx * (ids[ok, 1] + gy * ids[ok, 2])] = True
        self.load_bytes = per_program(np.where(self.read[rows], self.bytes[rows], 0)).astype(np.int64)
        self.store_bytes = per_program(np.where(self.write[rows], self.bytes[rows], 0)).astype(np.int64)
        lanes = per_program(np.where(mem, self.total[rows], 0))
        active = per_program(np.where(mem, self.active[rows], 0))
        self.masked_share = np.where(lanes > 0, 1.0 - active / np.maximum(lanes, 1), np.nan)
        self.oob_lanes = per_program(self.oob[rows]).astype(np.int64)
        self.mem_ops = per_program(mem.astype(np.float64)).astype(np.int64)

    # -- lookups -----------------------------------------------------------------------------------------
    def linear(self, pid: tuple) -> int:
        gx, gy, _ = self.grid
        return int(pid[0]) + gx * (int(pid[1]) + gy * int(pid[2]))

    def pid(self, lin: int) -> tuple:
        gx, gy, _ = self.grid
        return (lin % gx, (lin // gx) % gy, lin // (gx * gy))

    def program_rows(self, lin: int) -> np.ndarray:
        """Every op row of one program (memory and compute), in execution order."""
        return self.order[self.bounds[lin]:self.bounds[lin + 1]]

    def tensor_rows(self, tensor: int, lin: Optional[int] = None) -> np.ndarray:
        rows = self.order if lin is None else self.program_rows(lin)
        return rows[self.memory[rows] & (self.launch.ops["tensor"][rows] == tensor)]

    def lane_values(self, rows: np.ndarray) -> tuple:
        """See model.values.lane_values."""
        return lane_values(self.launch, rows)


class TraceIndex:
    """Everything one app derives from its trace: a LaunchIndex per launch, the analysis report, and an
    LRU of expensive per-tensor results bounded in bytes. Thread-safe: the WSGI server answers from several threads."""

    def __init__(self, trace: Trace, analyze: Optional[Callable] = None, lru_bytes: int = 256 << 20,
                 compare: Optional[Trace] = None):
        self.trace = trace
        self.compare = compare       # a second trace of the same kernels, whose outputs the views diff against
        self._analyze = analyze
        self._lock = threading.Lock()
        self._report_lock = threading.Lock()    # held while the analysis runs; other lookups go on
        self._building: dict = {}                 # key -> lock held while that result is built
        self._report = None
        self._report_error: Optional[str] = None
        self._report_done = False
        self._memo: dict = {}
        self._lru: OrderedDict = OrderedDict()     # key -> (value, bytes)
        self._lru_bytes = 0
        self._lru_budget = lru_bytes

    def _single(self, key):
        """A lock per key, so concurrent requests for one missing result build it once, not N times."""
        with self._lock:
            return self._building.setdefault(key, threading.Lock())

    def launch(self, i: int) -> LaunchIndex:
        return self.memo(("index", i), lambda: LaunchIndex(self.trace.launches[i]))

    def report(self) -> tuple:
        """(Report or None, error message or None). The analysis runs once, on first use."""
        with self._report_lock:
            if not self._report_done:
                if self._analyze is None:
                    self._report_error = "analysis is not available"
                else:
                    try:
                        self._report = self._analyze(self.trace)
                    except Exception as e:   # a damaged or unusual trace: show the views without analysis
                        self._report_error = f"analysis failed: {type(e).__name__}: {e}"
                self._report_done = True
            return self._report, self._report_error

    def compare_report(self) -> tuple:
        """(Report or None, error or None) of the compared trace, by the same analysis as this one's."""
        def run():
            if self.compare is None or self._analyze is None:
                return None, "no compared trace" if self.compare is None else "analysis is not available"
            try:
                return self._analyze(self.compare), None
            except Exception as e:   # as report(): the diff view says why, the other views go on
                return None, f"analysis of the compared trace failed: {type(e).__name__}: {e}"
        return self.memo(("compare-report",), run)

    def memo(self, key, build: Callable):
        """Keep a small per-launch result (indexes, program metrics, findings) for the app's lifetime."""
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        with self._single(key):
            with self._lock:
                if key in self._memo:
                    return self._memo[key]
            value = build()
            with self._lock:
                self._memo[key] = value
            return value

    def cached(self, key, build: Callable):
        """An LRU of expensive results (element tables, encoded tensor views), bounded in bytes."""
        with self._lock:
            if key in self._lru:
                self._lru.move_to_end(key)
                return self._lru[key][0]
        with self._single(key):
            try:
                with self._lock:
                    if key in self._lru:
                        return self._lru[key][0]
                value = build()
                size = len(value) if isinstance(value, (str, bytes)) else int(getattr(value, "nbytes", 0))
                with self._lock:
                    self._lru[key] = (value, size)
                    self._lru_bytes += size
                    while self._lru_bytes > self._lru_budget and len(self._lru) > 1:
                        _, (_, freed) = self._lru.popitem(last=False)
                        self._lru_bytes -= freed
                return value
            finally:
                with self._lock:
                    self._building.pop(key, None)
