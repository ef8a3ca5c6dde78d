"""Where a NaN or an Inf was born, recorded only when it reaches memory.

The arithmetic hooks (checks/nonfinite_ops.py) check every float result with one vectorised
``isfinite``; only when some lane is not finite do they look further, and note a *birth* where every
operand of that lane was finite (a division by zero, ``exp`` overflow, ``log`` of a negative, a cast to
float16 out of range), keeping the first birth of each program. A birth in a lane that is later masked
off is harmless, so nothing is reported until a store writes a non-finite value to an active lane: then
the finding names the store, and the first birth in that program (its line, the operation, the operand
values of its first lane). Non-finite values loaded from an argument the launch has not written are an
*input*, reported once per argument, not as a birth (not for arguments declared undefined at launch:
their bits are garbage, and reading them is an uninitialized read). Results go to ``Launch.meta["nonfinite"]``; the
analysis turns them into ``nonfinite`` / ``nonfinite_input`` findings.

Births only matter once a store writes a non-finite value, and most kernels never do. So a batched chunk
runs *lazily*: no check per operation, only the stores' (which every launch needs). A store that writes a
non-finite value sends the chunk back (``ChunkRetry``: undone and run again, as the executor does for the
exact check), and from then on the launch checks every operation, so the reports are those of an eager run
and a kernel that stores infinities on purpose (-inf padding) pays for one chunk twice.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ...errors import ChunkRetry
from .monitor import MAX_REPORTS, ROWS_MERGE, ProgramRows, rows_of

MAX_VALUES = 4           # operand values shown per birth
MAX_BIRTHS = 16          # births kept per program (the first of each source line)
# operations that divide (numpy's names, as the arithmetic hooks give them): a birth of one of them whose
# divisor is zero says so, since that, not the operation, is what to fix
DIVISIONS = ("divide", "true_divide", "fmod", "remainder", "div_rn", "fdiv", "div")


def _kind(cause) -> str:
    """A value born non-finite in a conversion (to a narrower float type) is an ``overflow``."""
    if cause is None:
        return "nonfinite_input"
    return "overflow" if str(cause.get("op", "")).startswith("conversion to") else "nonfinite"


def _plain(v):
    v = np.asarray(v).reshape(-1)[0].item()
    return v if not isinstance(v, float) or np.isfinite(v) else repr(v)


def all_finite(values: np.ndarray) -> bool:
    """Whether every value is finite; float16 by its exponent bits (numpy's isfinite on halves is
    four times slower). Other floats are summed first: a NaN or an infinity makes any sum of them
    non-finite, so a finite sum decides in one vectorised pass; a sum that overflowed is settled lane by lane."""
    if values.dtype == np.float16:
        exp = np.uint16(0x7C00)
        return not ((np.ascontiguousarray(values).view(np.uint16) & exp) == exp).any()
    with np.errstate(all="ignore"):
        if np.isfinite(np.add.reduce(values, axis=None)):
            return True
    return bool(np.isfinite(values).all())


class NonFinite(ProgramRows):
    def __init__(self, tensors, outputs=()):
        super().__init__(tensors, outputs)
        # arguments declared undefined at launch (trace(outputs=...)): whatever bits they hold are not an
        # input's NaN; reading them is the analysis' uninitialized_read
        # (names: the tensor table fills as the launch's arguments are bound, after this is made)
        self._undefined = frozenset(outputs)
        # (argument, dtype) -> its storage holds only finite values (asked only while nothing wrote it)
        self._finite_storage: dict = {}
        self.lazy = False                # this chunk checks only its stores (docstring)
        self._lazy_ok = True             # until a store wrote a non-finite value in a lazy chunk
        self.births: dict = {}           # program -> its births, the first of each source line, in order
        self.inputs: dict = {}           # program -> its first non-finite load of an unwritten argument

    def begin(self, pids: np.ndarray, keep: Optional[np.ndarray], batched: bool) -> None:
        super().begin(pids, keep, batched)
        self.lazy = batched and self._lazy_ok

    def mark(self) -> tuple:
        return super().mark(), {k: list(v) for k, v in self.births.items()}, dict(self.inputs)

    def rollback(self, mark: tuple) -> None:
        rows, self.births, self.inputs = mark
        super().rollback(rows)

    def records(self) -> dict:
        return {"nonfinite": [{k: v for k, v in r.items() if k != "_key"} for r in self.reports]}

    fork_point, mergeable = ROWS_MERGE[0], ROWS_MERGE[2]

    def since(self, point) -> dict:
        return {**ROWS_MERGE[1](self, point), "lazy_ok": self._lazy_ok, "finite": dict(self._finite_storage)}

    def merge(self, added) -> None:
        ROWS_MERGE[3](self, added)
        # (births and inputs are per program, read only by the program's own stores: none crosses a worker)
        self._lazy_ok = self._lazy_ok and added["lazy_ok"]
        for key, finite in added["finite"].items():    # (of storages nothing wrote: the same everywhere)
            self._finite_storage.setdefault(key, finite)

    def _programs(self, bad: np.ndarray):
        """(row of the chunk, program id, lanes of that program) for each program with a bad lane."""
        for row, pid in self.programs(bad):
            yield row, pid, rows_of(bad, row, self.batched)

    def birth(self, op: str, file, line, born: np.ndarray, operands: list, result: np.ndarray) -> None:
        """``born``: lanes not finite whose operands all were (program axis first when batched)."""
        shape = born.shape
        if self.batched and born.shape[0] == 1 and len(self._pids) > 1:   # uniform: every program alike
            shape = (len(self._pids),) + born.shape[1:]
            born = np.broadcast_to(born, shape)
        for row, pid, lanes in self._programs(born):
            mine = self.births.setdefault(pid, [])
            if len(mine) >= MAX_BIRTHS or any(b["file"] == file and b["line"] == int(line or 0) for b in mine):
                continue                  # the first birth of each line is the one that matters
            first = tuple(int(v) for v in np.argwhere(lanes)[0])
            index = ((row,) if self.batched else ()) + first

            def at(a):
                a = np.asarray(a)
                try:
                    return _plain(np.broadcast_to(a, shape)[index])
                except (ValueError, IndexError):
                    return _plain(a)
            values = [at(o) for o in operands[:MAX_VALUES]]
            birth = {"file": file, "line": int(line or 0), "op": op, "lane": list(first), "operands": values,
                     "result": at(result), "lanes": int(lanes.sum()), "_mask": np.array(lanes, dtype=bool)}
            if op in DIVISIONS and len(values) == 2 and values[1] == 0:
                birth["cause"] = f"a float {'remainder' if op in ('fmod', 'remainder') else 'division'} by zero"
            mine.append(birth)

    def load(self, tensor: int, written: bool, file, line, values: np.ndarray, safe: np.ndarray,
             offsets: np.ndarray, storage: Optional[np.ndarray] = None) -> None:
        """``storage``: the typed view of the argument's storage the values were read from, when they were:
        an argument no program wrote is scanned once, not at every load from it. A lazy chunk skips it: an
        input only matters once a store writes a non-finite value, and that store runs the chunk again,
        checking its loads."""
        if self.lazy or tensor < 0 or written or values.dtype.kind != "f" or self._tensors[tensor].name in self._undefined:
            return
        if storage is not None and storage.dtype == values.dtype:
            key = (tensor, values.dtype.str)
            finite = self._finite_storage.get(key)
            if finite is None:
                finite = self._finite_storage[key] = all_finite(storage)
            if finite:          # every safe lane holds one of its values (masked lanes do not count)
                return
        if all_finite(values):
            return
        bad = safe & ~np.isfinite(values)
        for row, pid, lanes in self._programs(bad):
            if pid not in self.inputs:
                off = np.asarray(offsets)[(row,) if self.batched else ()]
                self.inputs[pid] = {"tensor": self._tensors[tensor].name, "file": file, "line": int(line or 0),
                                    "offset": int(np.asarray(off)[lanes][0]), "lanes": int(lanes.sum())}

    def store(self, tensor: int, file, line, values: np.ndarray, safe: np.ndarray, offsets: np.ndarray) -> None:
        if values.dtype.kind != "f" or all_finite(values):
            return
        bad = safe & ~np.isfinite(np.broadcast_to(values, safe.shape))
        if self.lazy:
            if next(self._programs(bad), None) is None:
                return            # only lanes masked off, or programs sitting out: nothing is reported
            self._lazy_ok = self.lazy = False
            raise ChunkRetry("a store wrote a non-finite value: the chunk runs again, checking every operation")
        for row, pid, lanes in self._programs(bad):
            cause = self._cause(pid, lanes)
            source = None if cause is not None else self.inputs.get(pid)
            if cause is None and source is None:
                continue          # a non-finite constant written on purpose (-inf padding), not a birth
            key = (file, line, "birth", cause["file"], cause["line"]) if cause else (file, line, "input", source["tensor"])
            if key in self._seen or len(self.reports) >= MAX_REPORTS:
                continue
            off = np.asarray(offsets)[(row,) if self.batched else ()]
            self.report(self.reports, key, {
                "kind": _kind(cause), "program": list(pid), "file": file,
                "line": int(line or 0), "tensor": self._tensors[tensor].name if tensor >= 0 else None,
                "lanes": int(lanes.sum()), "offsets": [int(v) for v in np.asarray(off)[lanes][:8]],
                "birth": cause and {k: v for k, v in cause.items() if k != "_mask"}, "input": source})

    def _cause(self, pid, lanes: np.ndarray):
        """The birth behind non-finite lanes a program stores: the latest birth whose lanes meet them in a
        block of the same shape (the value usually goes straight from the op to the store), else the
        program's first birth."""
        mine = self.births.get(pid) or []
        for b in reversed(mine):
            m = b["_mask"]
            if m.shape == lanes.shape and (m & lanes).any():
                return b
        return mine[0] if mine else None
