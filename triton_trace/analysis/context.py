"""What every analysis of one launch shares: the parameters, and row- and lane-level arrays derived once.

A launch's op table is indexed by row; the lanes of a memory row live in the flat ``Launch.offsets`` /
``Launch.mask`` buffers at ``[lane_start, lane_start + lane_count)``. ``LaunchContext`` lays the lanes of
every memory row out once, in row order, together with the row that owns each lane and whether the lane
lies inside its tensor's storage, so that every analysis works on flat numpy arrays.

Program order. Programs are indexed by their lexicographic (x, y, z) id. "Before" in the sanitizer means
earlier in the execution order the recorder lists (``Launch.recorded_ids``; without it, (x, y, z) order,
the interpreter's ``for x: for y: for z:``), or earlier in the same program. The cache simulation uses
the GPU's dispatch order instead (x fastest), see ``gpu_rank``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import Optional

import numpy as np

from ..errors import TraceUsageError
from ..model import ATOMIC_KINDS, KIND_CODE, KINDS, MEMORY_KINDS, Launch
from .arrays import lane_index, pattern_intervals, pattern_runs, sorted_unique, unique_rows  # noqa: F401
from .gpus import GPUS

# Analyses take shortcuts for regular data (rows that are one pattern shifted, programs whose memory is
# disjoint, ...) that must give exactly what the lane-by-lane path gives; tests switch them off to compare.
SHORTCUTS = True

N_MEMORY = len(MEMORY_KINDS)          # model.KINDS lists the memory kinds first
LOAD = KIND_CODE["load"]
STORE = KIND_CODE["store"]
CAS = KIND_CODE["atomic_cas"]
XCHG = KIND_CODE["atomic_xchg"]
DOT = KIND_CODE["dot"]
MATH = KIND_CODE["math"]
ATOMIC_CODES = np.array(sorted(KIND_CODE[k] for k in ATOMIC_KINDS))
KIND_NAMES = np.array(KINDS)


@dataclass(frozen=True)
class Params:
    """Knobs of the GPU model. ``None`` means "take it from the GPU table" (see roofline.GPUS)."""
    gpu: str = "H200"
    warp_size: int = 32
    vector_bytes: int = 16            # widest access one thread issues (128-bit loads/stores)
    num_warps: Optional[int] = None   # None: the launch's autotune config, else Triton's default of 4
    l2_bytes: Optional[int] = None
    l2_ways: int = 16
    programs_in_flight: Optional[int] = None
    max_findings: int = 100           # findings kept in the report; the rest are counted as suppressed
    max_examples: int = 8             # offending offsets listed per finding
    max_programs: int = 1 << 16       # per-program columns in to_dict() beyond this are cut (and flagged)
    layouts: str = "compiler"         # "compiler": Triton's layouts for the GPU (analysis/memory/layouts.py); "model"
    what_if: Optional[bool] = None    # replays for the what-if hints (analysis/advice/whatif.py): None = small launches

    def resolved(self) -> "Params":
        if self.gpu not in GPUS:
            raise TraceUsageError(f"analyze(gpu={self.gpu!r}): unknown GPU; choose one of {sorted(GPUS)}")
        if self.layouts not in ("compiler", "model"):
            raise TraceUsageError(f"analyze(layouts={self.layouts!r}): 'compiler' (Triton's own layouts for the "
                                  f"GPU, compiled on this machine) or 'model' (inferred from the offsets)")
        for name in ("warp_size", "vector_bytes", "l2_ways", "max_examples"):
            if int(getattr(self, name)) < 1:
                raise TraceUsageError(f"analyze({name}={getattr(self, name)!r}): must be a positive integer")
        if self.max_findings < 0 or self.max_programs < 0:
            raise TraceUsageError("analyze(max_findings=..., max_programs=...) must not be negative")
        gpu = GPUS[self.gpu]
        l2 = gpu.l2_bytes if self.l2_bytes is None else int(self.l2_bytes)
        inflight = gpu.default_programs_in_flight if self.programs_in_flight is None else int(self.programs_in_flight)
        if l2 < 128 * self.l2_ways or inflight < 1:
            raise TraceUsageError(f"analyze(l2_bytes={l2}, programs_in_flight={inflight}): the L2 must hold at "
                                  f"least one set of {self.l2_ways} 128-byte lines and at least one program runs")
        return replace(self, l2_bytes=l2, programs_in_flight=inflight)

    def to_dict(self) -> dict:
        return {k: v for k, v in sorted(asdict(self).items())}


class LaunchContext:
    """Derived arrays of one launch. Built once per launch, read by every analysis; never mutated after."""

    def __init__(self, launch: Launch, index: int, params: Params):
        self.launch = launch
        self.index = index
        self.params = params
        config = launch.config or {}
        self.num_warps = int(params.num_warps or config.get("num_warps") or 4)   # 4: Triton's default
        ops = launch.ops
        self.n_rows = launch.num_ops
        self.kind = ops["kind"].astype(np.int64)
        self.tensor = ops["tensor"].astype(np.int64)
        self.eb = ops["elem_bytes"].astype(np.int64)
        self.seq = ops["seq"].astype(np.int64)
        self.line = ops["line"].astype(np.int64)
        self.file = ops["file"].astype(np.int64)
        self.is_mem = self.kind < N_MEMORY
        self.is_atomic = np.isin(self.kind, ATOMIC_CODES)
        self.is_read = self.is_mem & (self.kind != STORE)     # loads and atomics read memory
        self.is_write = self.is_mem & (self.kind != LOAD)     # stores and atomics write it
        self._programs(launch)
        self._static_ops()
        self._lanes(launch)

    # -- programs --------------------------------------------------------------------------------------
    def _programs(self, launch: Launch) -> None:
        p = launch.ops["program"].astype(np.int64).reshape(-1, 3)
        ids = getattr(launch, "recorded_ids", None)        # also the recorded programs that did no op
        ids = np.zeros((0, 3), np.int64) if ids is None else np.asarray(ids, dtype=np.int64).reshape(-1, 3)
        dims = np.asarray(launch.grid, dtype=np.int64)
        for a in (p, ids):
            if len(a):
                dims = np.maximum(dims, a.max(axis=0) + 1)
        self.dims = dims
        linear = lambda a: (a[:, 0] * dims[1] + a[:, 1]) * dims[2] + a[:, 2]
        lin, lin_ids = linear(p), linear(ids)
        self.programs = sorted_unique(np.concatenate([lin, lin_ids]))     # (x, y, z) order
        self.n_programs = len(self.programs)
        self.row_prog = np.searchsorted(self.programs, lin)
        # Execution order: the recorder's list when it has one, else (x, y, z), the interpreter's loops.
        self.exec_rank = np.arange(self.n_programs, dtype=np.int64) + len(lin_ids)
        np.minimum.at(self.exec_rank, np.searchsorted(self.programs, lin_ids), np.arange(len(lin_ids)))
        x, rest = np.divmod(self.programs, dims[1] * dims[2])
        y, z = np.divmod(rest, dims[2])
        self.pids = np.stack([x, y, z], axis=1)
        # GPU dispatch order: blockIdx.x varies fastest.
        gpu_lin = x + dims[0] * (y + dims[1] * z)
        self.gpu_rank = np.argsort(np.argsort(gpu_lin, kind="stable"), kind="stable")

    # -- static ops: (kind, tensor, file, line), the same op executed by every program and loop trip ------
    def _static_ops(self) -> None:
        # One int per row that sorts by (file, line, kind, tensor): the display order of the "ops" table.
        key = (((self.file + 1) << 44) | (np.clip(self.line, 0, (1 << 28) - 1) << 16)
               | (self.kind << 11) | np.clip(self.tensor + 1, 0, (1 << 11) - 1))
        if self.n_rows:
            uniq, self.row_op = np.unique(key, return_inverse=True)
            self.row_op = self.row_op.reshape(-1)
        else:
            uniq, self.row_op = key, np.zeros(0, dtype=np.int64)
        first = np.full(len(uniq), self.n_rows, dtype=np.int64)
        np.minimum.at(first, self.row_op, np.arange(self.n_rows))   # a representative row per static op
        self.op_first_row = first
        self.n_static = len(uniq)

    # -- lanes --------------------------------------------------------------------------------------------
    # The flat lane arrays (offsets, mask, lane_row) are built on first use: rows whose lanes are a
    # known pattern (``row_sig``) give their per-row facts without decoding, and analyses that find every
    # row regular never expand the lanes at all.
    def _lanes(self, launch: Launch) -> None:
        ops = launch.ops
        counts = ops["lane_count"].astype(np.int64)
        self.lane_count = np.where(self.is_mem, counts, 0)
        self.mem_rows = mem = np.nonzero(self.lane_count > 0)[0]
        starts = ops["lane_start"].astype(np.int64)[mem]
        cnt = self.lane_count[mem]
        excl = np.cumsum(cnt) - cnt
        self._source = (starts, cnt)
        self.n_lanes = int(cnt.sum())
        self.lane_pos = np.zeros(self.n_rows, dtype=np.int64)        # first lane of each row in self.offsets
        self.lane_pos[mem] = excl
        # Storage size in the access's own units (a pointer cast can change the element size).
        tb = np.array([t.storage_size * t.elem_bytes for t in launch.tensors] + [0], dtype=np.int64)
        self.row_limit = np.where(self.eb > 0, tb[self.tensor] // np.maximum(self.eb, 1), 0)
        # Per row: active lanes; the smallest and largest offset of any lane (masked-off ones included), a
        # cheap superset of what the row touches (lo > hi for rows without lanes); active out-of-bounds lanes.
        self.active_lanes = np.zeros(self.n_rows, dtype=np.int64)
        self.row_lo = np.zeros(self.n_rows, dtype=np.int64)
        self.row_hi = np.full(self.n_rows, -1, dtype=np.int64)
        self.oob_lanes = np.zeros(self.n_rows, dtype=np.int64)
        self._affine(launch, starts, cnt)
        reg = self.row_sig[mem] >= 0
        if reg.any():
            sig = self.row_sig[mem[reg]]
            pmin, pmax = np.zeros(int(sig.max()) + 1, np.int64), np.zeros(int(sig.max()) + 1, np.int64)
            for g in sorted_unique(sig):
                lo, hi = self._prefix_extremes(int(g))
                pmin[g], pmax[g] = lo[-1], hi[-1]
            base = self.row_base[mem[reg]]
            self.row_lo[mem[reg]], self.row_hi[mem[reg]] = base + pmin[sig], base + pmax[sig]
        irr = np.flatnonzero(~reg)
        if len(irr):
            o, m = launch.lanes.gather(starts[irr], cnt[irr])
            at = np.cumsum(cnt[irr]) - cnt[irr]
            self.row_lo[mem[irr]] = np.minimum.reduceat(o, at)
            self.row_hi[mem[irr]] = np.maximum.reduceat(o, at)
            self.active_lanes[mem[irr]] = np.add.reduceat(m.view(np.uint8), at, dtype=np.int64)
        # Most rows lie inside their storage entirely; check lane by lane only the others.
        out = np.flatnonzero((self.row_lo[mem] < 0) | (self.row_hi[mem] >= self.row_limit[mem]))
        self._out_lanes = lane_index(excl[out], cnt[out])
        self.oob_lane_index = np.zeros(0, dtype=np.int64)            # active out-of-bounds lanes, ascending
        if len(out):
            o, m = launch.lanes.gather(starts[out], cnt[out])
            limit = np.repeat(self.row_limit[mem[out]], cnt[out])
            bad = m & ~((o >= 0) & (o < limit))
            self.oob_lane_index = self._out_lanes[bad]
            self.oob_lanes[mem[out]] = np.add.reduceat(bad.view(np.uint8), np.cumsum(cnt[out]) - cnt[out],
                                                       dtype=np.int64)

    @cached_property
    def _expanded(self) -> tuple:
        starts, cnt = self._source
        if not len(starts):
            return np.zeros(0, np.int64), np.zeros(0, bool)
        return self.launch.lanes.gather(starts, cnt)            # rows in program order, lanes in event order

    @property
    def offsets(self) -> np.ndarray:
        """Element offset of every lane of every memory row, rows in row order (see ``lane_pos``)."""
        return self._expanded[0]

    @property
    def mask(self) -> np.ndarray:
        return self._expanded[1]

    @cached_property
    def lane_row(self) -> np.ndarray:
        """The row of every lane."""
        row_type = np.int32 if self.n_rows < 1 << 31 else np.int64
        return np.repeat(self.mem_rows.astype(row_type), self.lane_count[self.mem_rows])

    def row_lanes(self, rows: np.ndarray) -> tuple:
        """(row, offset) of every active in-bounds lane of ``rows``, rows in the given order, decoding only
        those rows' lanes unless the launch's lanes are expanded already (or most are asked for)."""
        lr, _, off = self.inside_lanes(rows)
        return lr, off

    def inside_lanes(self, rows: np.ndarray) -> tuple:
        """(row, lane index, offset) of the active lanes of ``rows`` that lie inside their storage."""
        lanes, off, msk = self.decode(rows)
        lr = np.repeat(rows, self.lane_count[rows])
        keep = msk & (off >= 0) & (off < self.row_limit[lr]) if len(self._out_lanes) else msk
        return lr[keep], lanes[keep], off[keep]

    def rows_of_lanes(self, lanes: np.ndarray) -> np.ndarray:
        """The row of each lane, without the per-lane table unless it exists."""
        if "lane_row" in self.__dict__:
            return self.lane_row[lanes]
        mem = self.mem_rows
        return mem[np.searchsorted(self.lane_pos[mem], lanes, side="right") - 1]

    def lane_offsets(self, lanes: np.ndarray) -> np.ndarray:
        """The offsets of a few lanes, decoding only their rows unless every lane is decoded already."""
        lanes = np.asarray(lanes, dtype=np.int64)
        if "_expanded" in self.__dict__ or not len(lanes):
            return self.offsets[lanes]
        rows = sorted_unique(self.rows_of_lanes(lanes))
        all_lanes, off, _ = self.decode(rows)
        return off[np.searchsorted(all_lanes, lanes)]

    def decode(self, rows: np.ndarray) -> tuple:
        """(lane indices, offsets, mask) of the lanes of ``rows``, in order: from the expanded arrays when
        they exist (or most lanes are asked for), else decoding only these rows."""
        cnt = self.lane_count[rows]
        lanes = lane_index(self.lane_pos[rows], cnt)
        if "_expanded" in self.__dict__ or 2 * len(lanes) > self.n_lanes:
            return lanes, self.offsets[lanes], self.mask[lanes]
        return (lanes,) + tuple(self.launch.lanes.gather(self.launch.ops["lane_start"][rows], cnt))

    def block(self, rows: np.ndarray, n: int) -> tuple:
        """(offsets, mask) of rows of ``n`` lanes each, as (rows, n) arrays, from their pattern when they
        share one, else from the lanes."""
        sig = self.row_sig[rows]
        if len(rows) and sig[0] >= 0 and (sig == sig[0]).all():
            return (self.row_base[rows][:, None] + self.pattern(sig[0]),
                    np.arange(n) < self.active_lanes[rows][:, None])
        _, off, msk = self.decode(rows)
        return off.reshape(len(rows), n), msk.reshape(len(rows), n)

    def first_offsets(self, rows: np.ndarray) -> np.ndarray:
        """The offset of the first lane of each row (the address of a scalar access)."""
        out = self.row_base[rows].copy()
        irr = np.flatnonzero(self.row_sig[rows] < 0)
        if len(irr):
            off = self.decode(rows[irr])[1]
            cnt = self.lane_count[rows[irr]]
            out[irr] = off[np.cumsum(cnt) - cnt]
        return out

    def _affine(self, launch: Launch, starts: np.ndarray, cnt: np.ndarray) -> None:
        """Per row: the lanes' pattern when the offsets are ``row_base + pattern`` and the active lanes are
        the first ``active_lanes`` (``row_sig`` >= 0, see Lanes.affine_rows and ``pattern``), else -1."""
        self.row_sig = np.full(self.n_rows, -1, dtype=np.int64)
        self.row_base = np.zeros(self.n_rows, dtype=np.int64)
        if not SHORTCUTS or not len(starts):
            return
        l_start, l_n, l_sig, l_base, l_active = launch.lanes.affine_rows()
        keep = l_n > 0
        l_start, l_n, l_sig, l_base, l_active = l_start[keep], l_n[keep], l_sig[keep], l_base[keep], l_active[keep]
        if not len(l_start):
            return
        j = np.minimum(np.searchsorted(l_start, starts), len(l_start) - 1)
        ok = (l_start[j] == starts) & (l_n[j] == cnt) & (l_sig[j] >= 0)
        self.row_sig[self.mem_rows[ok]] = l_sig[j[ok]]
        self.row_base[self.mem_rows[ok]] = l_base[j[ok]]
        self.active_lanes[self.mem_rows[ok]] = l_active[j[ok]]

    def regular(self, rows: np.ndarray) -> np.ndarray:
        """Per row: its lanes are a known pattern (``row_sig``), the active ones its first
        ``active_lanes``, and those lie inside its tensor's storage. What every shortcut requires."""
        sig = self.row_sig[rows]
        ok = sig >= 0
        for g in sorted_unique(sig[ok]):
            sel = np.flatnonzero(ok & (sig == g))
            lo, hi = self._prefix_extremes(int(g))
            last = np.maximum(self.active_lanes[rows[sel]] - 1, 0)
            base = self.row_base[rows[sel]]
            ok[sel] = (self.active_lanes[rows[sel]] == 0) | (
                (base + lo[last] >= 0) & (base + hi[last] < self.row_limit[rows[sel]]))
        return ok

    def regular_groups(self, rows: np.ndarray) -> tuple:
        """(per row: ``regular``, [(offsets of the active lanes relative to the base, rows)] of the regular
        rows grouped by pattern and active lanes)."""
        ok = self.regular(rows)
        reg = rows[ok]
        groups = []
        if len(reg):
            classes, inverse = unique_rows(np.column_stack([self.row_sig[reg], self.active_lanes[reg]]))
            order = np.argsort(inverse, kind="stable")
            bounds = np.searchsorted(inverse[order], np.arange(len(classes) + 1))
            for c, (g, k) in enumerate(classes.tolist()):
                groups.append((self.pattern(g)[:k], reg[order[bounds[c]:bounds[c + 1]]]))
        return ok, groups

    def _prefix_extremes(self, g: int) -> tuple:
        """Running minimum and maximum of pattern g: the extremes of its first k lanes at k - 1."""
        memo = self.__dict__.setdefault("_extremes", {})
        if g not in memo:
            pat = self.pattern(g)
            memo[g] = (np.minimum.accumulate(pat), np.maximum.accumulate(pat))
        return memo[g]

    def pattern(self, sig: int) -> np.ndarray:
        """Offsets relative to ``row_base`` of the rows whose ``row_sig`` is ``sig``."""
        return self.launch.lanes.pattern(sig)

    def time(self) -> np.ndarray:
        """Per-row position in the interpreter's sequential execution: program order, then seq."""
        return self.exec_rank[self.row_prog] * (int(self.seq.max(initial=0)) + 1) + self.seq

    def row_location(self, row: int) -> dict:
        f = int(self.file[row])
        files = self.launch.files
        return {"file": files[f] if 0 <= f < len(files) else None, "line": int(self.line[row]) or None}

    def tensor_name(self, t: int) -> Optional[str]:
        return self.launch.tensors[t].name if 0 <= t < len(self.launch.tensors) else None

    def pid(self, program_index: int) -> list:
        return [int(v) for v in self.pids[program_index]]
