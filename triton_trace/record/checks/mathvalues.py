"""The values each source line's float math produced, per program: what the Program card shows beside a math
row as it shows a load's values (the ``tl.exp`` line of a softmax that went NaN reads "inf").

The hooks (checks/mathvalues_ops.py) reduce every float result to one row per program of the chunk (count,
NaN, +Inf and -Inf counts, the finite minimum and maximum, the first non-finite lane) in one C pass
(native/rowstats.c; numpy's reductions where none can be built), and hand the rows here, where they add into
the running chunk's arrays (one row per program of the chunk, per line). When the next chunk begins (or a mark
is taken, or the launch ends) those arrays become the chunk's entries, so a chunk that is undone and run again
(``rollback``) drops what it added.

Bounded, and saying so: the programs' entries are kept for the first ``MAX_VALUE_LINES`` lines to compute
floats and up to ``MAX_ENTRIES`` entries in all, in execution order; past either, a line keeps its totals
only and counts the programs it ``left_out``. Results go to ``Launch.meta["math_values"]``, one entry per
line, its programs' values as parallel lists (``p_*``); the view matches them to the program's math rows.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from .monitor import ProgramRows

MAX_VALUE_LINES = 64        # lines whose values are kept per program
MAX_ENTRIES = 1 << 16       # per-program entries kept per launch, over all lines
MAX_FIRSTS = 64             # distinct (op, block shape) of a line's first non-finite results named
# the int columns of a line's rows: sums first (added), then the first non-finite result (kept once set)
COUNT, NAN, PINF, NINF, LANE, KIND, FIRST = range(7)
_SUMS = 4
_EMPTY = np.array([0, 0, 0, 0, -1, 0, -1], np.int64)
VALUE = {1: "nan", 2: "inf", 3: "-inf"}       # KIND: what the first non-finite result was


class _Line:
    """One source line over the launch: its totals, its programs' entries (chunks of arrays, in execution
    order) and the (op, block shape) each entry's first non-finite result came from."""
    __slots__ = ("tot", "lo", "hi", "first", "parts", "detailed", "firsts")

    def __init__(self, detailed: bool):
        self.tot = np.zeros(6, np.int64)     # count, nan, +inf, -inf, programs, programs left out
        self.lo, self.hi = np.inf, -np.inf
        self.first: Optional[dict] = None     # the launch's first non-finite result on the line
        self.parts: list = []                 # (flush seq, pids (k, 3), ints (k, 7), floats (k, 2))
        self.detailed = detailed              # its programs' entries are kept (until MAX_ENTRIES)
        self.firsts: list = []                # (op name, block shape) of the entries' FIRST column

    def state(self) -> tuple:
        return self.tot.copy(), self.lo, self.hi, self.first, len(self.parts), len(self.firsts)


class MathValues(ProgramRows):
    lists = ()

    def __init__(self, tensors, outputs=()):
        super().__init__(tensors, outputs)
        self.lines: dict = {}         # (file, line) -> _Line
        self._pending: dict = {}      # (file, line) -> [ints (P, 7), floats (P, 2), touched (P,)]: this chunk
        self._entries = 0             # per-program entries kept
        self._flushes = 0             # chunks flushed: the order of a line's parts among every line's

    # -- the running chunk -------------------------------------------------------------------------------------
    def begin(self, pids: np.ndarray, keep: Optional[np.ndarray], batched: bool) -> None:
        self._flush()
        super().begin(pids, keep, batched)

    def note(self, file, line, op: str, shape: tuple, stats: tuple) -> None:
        """A result of ``op`` on ``file:line``: ``stats`` per row of its values (the program axis when batched;
        one row that every program shares, or one per program the ops' rows are): mathvalues_ops.row_stats."""
        ints, lo, hi = stats
        pids = self._chunk[0]
        if not self.batched:
            idx, sel = slice(0, 1), None if self._keep is None else np.asarray(self._keep[:1], bool)
            n = 1
        else:
            n = len(pids) if self._rows is None else len(self._rows)
            idx = slice(None) if self._rows is None else np.asarray(self._rows)
            sel = self._active
            if self._keep is not None:
                sel = self._keep if sel is None else sel & self._keep
        shared = len(ints) == 1 and n > 1          # one row that every program shares (numpy broadcasts it)
        if len(ints) != n and not shared:
            return                    # rows that are not the chunk's programs: nothing to attribute them to
        whole = isinstance(idx, slice) and n == len(pids)                   # every program of the chunk
        if sel is not None and not sel.all():
            idx = np.arange(len(pids))[idx][sel]
            if not shared:
                ints, lo, hi = ints[sel], lo[sel], hi[sel]
            whole = False
            if not len(idx):
                return
        key = (file, int(line or 0))
        p = self._pending.get(key)
        if p is None and whole and not shared:
            # the line's first result in the chunk: row_stats' fresh rows become the chunk's as they stand
            self._pending[key] = [ints, np.stack([lo, hi], axis=1), np.ones(len(pids), bool)]
            new = np.flatnonzero(ints[:, LANE] >= 0)
            if len(new):
                ints[new, FIRST] = self._first_id(key, op, shape)
            return
        if p is None:
            p = self._pending[key] = [np.tile(_EMPTY, (len(pids), 1)),
                                      np.tile(np.array([np.inf, -np.inf]), (len(pids), 1)), np.zeros(len(pids), bool)]
        mine, fl, touched = p
        mine[idx, :_SUMS] += ints[:, :_SUMS]
        if isinstance(idx, slice):            # (views: updated in place)
            np.minimum(fl[idx, 0], lo, out=fl[idx, 0])
            np.maximum(fl[idx, 1], hi, out=fl[idx, 1])
        else:
            fl[idx, 0] = np.minimum(fl[idx, 0], lo)
            fl[idx, 1] = np.maximum(fl[idx, 1], hi)
        touched[idx] = True
        if ints[:, LANE].max() < 0:           # no non-finite result: no first one to keep
            return
        new = (mine[idx, LANE] < 0) & (ints[:, LANE] >= 0)
        if new.any():
            at = np.arange(len(pids))[idx][new]
            src = ints[np.zeros(len(at), np.intp)] if shared else ints[new]
            mine[at, LANE], mine[at, KIND] = src[:, LANE], src[:, KIND]
            mine[at, FIRST] = self._first_id(key, op, shape)

    def _first_id(self, key, op: str, shape: tuple) -> int:
        line = self._line(key)
        name = (op, tuple(int(s) for s in shape))
        if name in line.firsts:
            return line.firsts.index(name)
        if len(line.firsts) >= MAX_FIRSTS:
            return -1
        line.firsts.append(name)
        return len(line.firsts) - 1

    def _line(self, key) -> _Line:
        line = self.lines.get(key)
        if line is None:
            line = self.lines[key] = _Line(sum(x.detailed for x in self.lines.values()) < MAX_VALUE_LINES)
        return line

    def _flush(self) -> None:
        """The running chunk's rows become its entries and add into each line's totals."""
        pids = self._chunk[0]
        for key, (ints, fl, touched) in sorted(self._pending.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if touched.all():
                self._add(self._line(key), pids.astype(np.int64), ints, fl)
                continue
            at = np.flatnonzero(touched)
            self._add(self._line(key), pids[at].astype(np.int64), ints[at], fl[at])
        if self._pending:
            self._flushes += 1
        self._pending = {}

    def _add(self, line: _Line, pids: np.ndarray, ints: np.ndarray, fl: np.ndarray) -> None:
        """Programs' rows (in execution order, after every row the line holds) into the line."""
        if not len(pids):
            return
        line.tot[:_SUMS] += ints[:, :_SUMS].sum(axis=0)
        line.tot[4] += len(pids)
        line.lo, line.hi = min(line.lo, float(fl[:, 0].min())), max(line.hi, float(fl[:, 1].max()))
        bad = np.flatnonzero(ints[:, LANE] >= 0)
        if line.first is None and len(bad):
            k = int(bad[0])
            op, shape = line.firsts[ints[k, FIRST]] if 0 <= ints[k, FIRST] < len(line.firsts) else ("?", ())
            lane = [int(v) for v in np.unravel_index(int(ints[k, LANE]), shape)] if shape else [int(ints[k, LANE])]
            line.first = {"program": [int(v) for v in pids[k]], "lane": lane, "op": op,
                          "value": VALUE.get(int(ints[k, KIND]), "nan")}
        room = max(MAX_ENTRIES - self._entries, 0) if line.detailed else 0
        if room < len(pids):
            line.tot[5] += len(pids) - room
            pids, ints, fl = pids[:room], ints[:room], fl[:room]
        if len(pids):
            line.parts.append((self._flushes, pids, ints, fl))
            self._entries += len(pids)

    # -- undoing a chunk ----------------------------------------------------------------------------------------
    def mark(self) -> tuple:
        self._flush()
        return self._entries, {key: line.state() for key, line in self.lines.items()}

    def rollback(self, mark: tuple) -> None:
        self._pending = {}
        self._entries, states = mark
        self.lines = {k: v for k, v in self.lines.items() if k in states}
        for key, (tot, lo, hi, first, parts, firsts) in states.items():
            line = self.lines[key]
            line.tot, line.lo, line.hi, line.first = tot.copy(), lo, hi, first
            del line.parts[parts:]
            del line.firsts[firsts:]
        self._seqs = None

    # -- worker processes (record/parallel/): their programs come after this process's --------------------------
    def fork_point(self):
        return self.mark()

    def since(self, point) -> dict:
        self._flush()
        _, states = point
        out = {}
        for key, line in self.lines.items():
            tot, lo, hi, first, parts, _ = states.get(key, (np.zeros(6, np.int64), np.inf, -np.inf, None, 0, 0))
            if line.tot[4] != tot[4]:
                out[key] = {"tot": line.tot - tot, "lo": line.lo, "hi": line.hi, "parts": line.parts[parts:],
                            "first": line.first if first is None else None, "firsts": list(line.firsts)}
        return out

    def mergeable(self, added) -> Optional[str]:
        self._flush()                # (this process's last chunk: its programs come before the worker's)
        # programs a worker left out (the caps) are kept here only as totals: right where this process, having
        # run the programs before them, would have left them out too, which is certain once its entries are full
        if self._entries < MAX_ENTRIES and any(part["tot"][5] for part in added.values()):
            return "a worker left out math values (MAX_ENTRIES, MAX_VALUE_LINES) that one process might keep"
        return None

    def merge(self, added) -> None:
        # the worker's entries as its chunks flushed them (chunk by chunk, lines in order): the caps as one
        # process would have reached them
        self._flush()
        order = sorted(((part[0], str(key[0]), key[1], key, part) for key, p in added.items() for part in p["parts"]),
                       key=lambda x: x[:3])
        for _, _, _, key, (seq, pids, ints, fl) in order:
            names, ints = added[key]["firsts"], ints.copy()
            has = np.flatnonzero(ints[:, FIRST] >= 0)
            ints[has, FIRST] = [self._first_id(key, *names[i]) for i in ints[has, FIRST]]
            self._add(self._line(key), pids, ints, fl)
        for key, p in sorted(added.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            line, rest = self._line(key), p["tot"].copy()
            for part in p["parts"]:
                rest[:_SUMS] -= part[2][:, :_SUMS].sum(axis=0)
                rest[4] -= len(part[1])
            line.tot[:_SUMS] += rest[:_SUMS]        # the programs the worker kept only as totals
            line.tot[4] += rest[4]
            line.tot[5] += rest[4]
            line.lo, line.hi = min(line.lo, p["lo"]), max(line.hi, p["hi"])
            if line.first is None and p["first"] is not None:
                line.first = p["first"]

    # -- the finished launch ------------------------------------------------------------------------------------
    def records(self) -> dict:
        self._flush()
        out = []
        for (file, ln), line in sorted(self.lines.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            out.append({"file": file, "line": ln, **_entry(line)})
        return {"math_values": out}


def _entry(line: _Line) -> dict:
    t = line.tot
    finite = int(t[COUNT] - t[NAN] - t[PINF] - t[NINF])
    pids = np.concatenate([p[1] for p in line.parts]) if line.parts else np.zeros((0, 3), np.int64)
    ints = np.concatenate([p[2] for p in line.parts]) if line.parts else np.zeros((0, 7), np.int64)
    fl = np.concatenate([p[3] for p in line.parts]) if line.parts else np.zeros((0, 2))
    has = (ints[:, COUNT] - ints[:, NAN] - ints[:, PINF] - ints[:, NINF]) > 0
    fl = np.where(has[:, None], fl, 0.0)       # (no finite value: the counts say so; JSON has no inf)
    return {
        "count": int(t[COUNT]), "nan": int(t[NAN]), "pinf": int(t[PINF]), "ninf": int(t[NINF]),
        "min": float(line.lo) if finite else None, "max": float(line.hi) if finite else None,
        "programs": int(t[4]), "left_out": int(t[5]), "first": line.first,
        "ops": [op for op, _ in line.firsts], "shapes": [list(s) for _, s in line.firsts],
        "p_program": pids.tolist(), "p_count": ints[:, COUNT].tolist(), "p_nan": ints[:, NAN].tolist(),
        "p_pinf": ints[:, PINF].tolist(), "p_ninf": ints[:, NINF].tolist(), "p_min": fl[:, 0].tolist(),
        "p_max": fl[:, 1].tolist(), "p_first": ints[:, FIRST].tolist(), "p_lane": ints[:, LANE].tolist(),
        "p_kind": ints[:, KIND].tolist()}
