"""Two lanes of one store (or exchange) of one program writing one address with different values.

A GPU runs the lanes of a store at once: when two of them write one address, the memory keeps one of the
values, and which one is not defined (it differs between warps, GPUs and runs). The interpreter writes the
lanes in order, so its result is one of the possible ones, and looks fine. An atomic ``xchg`` or ``cas`` of
two lanes at one address leaves a value that depends on their order the same way; other atomics (``add``,
``max``, ...) combine both lanes and are not judged. Lanes writing one address with one value are fine
(a row value broadcast to a tile and stored once per column is a common, harmless pattern).

Most stores write distinct addresses, which is settled without looking at every pair: a batched block of
described pointers (batch/described.py) by its strides, other blocks by their addresses increasing (or
decreasing) along the block; only the rest are sorted. Results go to ``Launch.meta["lane_conflict"]``,
one entry per store line (its first program), with the first conflicting address' two lanes and values,
every program and, per store row, the lanes writing a conflicting address (monitor.py's hits).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..frames import where
from ..batch import described
from ..gpu.lowp import floats
from .monitor import MAX_REPORTS, ROWS_MERGE, ProgramRows
from .outermost import hook_outermost

# memory operations: (position of the pointer, of the value, of the mask) in their arguments
_STORES = {"create_store": (0, 1, None), "create_masked_store": (0, 1, 2), "create_atomic_rmw": (1, 2, 3),
           "create_atomic_cas": (0, 2, None)}
_UNSET = np.uint64(np.iinfo(np.uint64).max)    # the address given to masked-off lanes (they write nothing)


class LaneConflicts(ProgramRows):
    fork_point, since, mergeable, merge = ROWS_MERGE     # (reports only: record/parallel/)
    def records(self) -> dict:
        return {"lane_conflict": self.finished(self.reports)}

    def conflict(self, kind: str, tensor: int, file, line, addrs: np.ndarray, values: np.ndarray,
                 mask: np.ndarray, shape: tuple, events=None) -> None:
        """``addrs``, ``values``, ``mask``: (rows, lanes) per program of the block (one row per program of
        the chunk when batched); ``shape``: one program's block; ``events``: the collector's event store
        (to name the conflicting lanes of the store's rows)."""
        key = (file, int(line or 0))
        found = _first_conflicts(addrs, values, mask)
        if found is None:
            return
        bad, pairs, hit = found
        counts = hit.sum(axis=1)
        rows = []
        for row, pid in self.programs(bad[:, None] if self.batched else bad[:1]):
            row = min(row, len(bad) - 1)          # (a block of one row stands for every program)
            if not bad[row]:
                continue
            rows.append((row, pid))
            self.reach(key, pid, int(counts[row]))
        if not rows:
            return
        if events is not None:
            at = np.array([r for r, _ in rows], np.int64)
            self.hit(key, events, at, hit[at])
        row, pid = rows[0]
        if key in self._seen or len(self.reports) >= MAX_REPORTS:
            return
        i, j = pairs[row]
        v = np.broadcast_to(values, bad.shape + values.shape[1:])[row]
        self.report(self.reports, key, {
            "kind": "lane_conflict", "op": kind, "program": list(pid), "file": file, "line": int(line or 0),
            "tensor": self.tensor_name(tensor), "lanes": int(counts[row]),
            "first": [_index(i, shape), _index(j, shape)], "values": [_plain(v[i]), _plain(v[j])]})


def _index(lane: int, shape: tuple) -> list:
    return [int(v) for v in np.unravel_index(int(lane), shape)] if shape else []


def _plain(v):
    v = np.asarray(v).item()
    return v if not isinstance(v, float) or np.isfinite(v) else repr(v)


def _first_conflicts(addrs: np.ndarray, values: np.ndarray, mask: np.ndarray):
    """(rows with a conflict, per row the first two conflicting lanes, (rows, lanes) the lanes writing an
    address two lanes write with different values), or None when no row has one. Lanes are compared by
    their values' bits (NaN equals NaN)."""
    rows = max(len(addrs), len(values), len(mask))
    a = np.broadcast_to(addrs, (rows, addrs.shape[1]))
    key = np.where(np.broadcast_to(mask, a.shape), a, _UNSET)
    order = np.argsort(key, axis=1, kind="stable")
    k = np.take_along_axis(key, order, axis=1)
    same = (k[:, 1:] == k[:, :-1]) & (k[:, 1:] != _UNSET)
    if not same.any():
        return None
    bits = _bits(np.broadcast_to(values, a.shape))
    b = np.take_along_axis(bits, order, axis=1)
    differ = same & (b[:, 1:] != b[:, :-1])
    bad = differ.any(axis=1)
    if not bad.any():
        return None
    first = np.argmax(differ, axis=1)
    pairs = {int(r): (int(order[r, first[r]]), int(order[r, first[r] + 1])) for r in np.flatnonzero(bad)}
    # every lane of an address with two values: number the runs of one address (each row starts one), mark
    # the runs holding a second value, and put the marks back in lane order
    start = np.ones(k.shape, bool)
    start[:, 1:] = ~same
    group = np.cumsum(start.reshape(-1)).reshape(k.shape) - 1
    marked = np.zeros(int(group[-1, -1]) + 1, bool)
    marked[group[:, 1:][differ]] = True
    hit = np.zeros(k.shape, bool)
    np.put_along_axis(hit, order, marked[group], axis=1)
    return bad, pairs, hit


def _bits(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "fc" or values.dtype == np.bool_:
        size = max(values.dtype.itemsize, 1)
        return np.ascontiguousarray(values).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size])
    return values


def _distinct_by_description(ptr, shape: tuple) -> bool:
    """Whether a batched block's described pointers are distinct in every program: each lane axis of more
    than one lane strides past everything the smaller strides reach."""
    k = described.known(ptr)
    if k is None:
        return False
    reach = 0
    for s, n in sorted(((abs(int(s)), n) for s, n in zip(k[1], shape) if n > 1)):
        if s <= reach:
            return False
        reach += (n - 1) * s
    return True


def _increasing(a: np.ndarray) -> bool:
    """Whether the addresses of every row go one way along the block (so no two are equal)."""
    if a.shape[1] < 2:
        return True
    d = np.diff(a.view(np.int64), axis=1)
    return bool((d > 0).all() or (d < 0).all())


def install(scope, builder, rec) -> None:
    def before(name, args, kwargs):
        at = _STORES[name]
        if rec.recording and len(args) > at[1]:
            _check(rec, name, args, *at)
    hook_outermost(scope, builder, tuple(_STORES), before)


def _kind(name: str, args) -> Optional[str]:
    if name == "create_atomic_cas":
        return "atomic_cas"
    if name == "create_atomic_rmw":
        return "atomic_xchg" if "XCHG" in str(args[0]).upper() else None
    return "store"


def _check(rec, name, args, ptr_at, value_at, mask_at) -> None:
    kind = _kind(name, args)
    if kind is None:
        return
    ptr, value = args[ptr_at], args[value_at]
    mask = args[mask_at] if mask_at is not None and len(args) > mask_at else None
    shape = described.shape_of(ptr)
    batched = rec.batched and len(shape) > 0
    lane_shape = tuple(shape[1:]) if batched else tuple(shape)
    n = int(np.prod(lane_shape, dtype=np.int64))
    if n < 2 or (batched and _distinct_by_description(ptr, lane_shape)):
        return
    addrs = np.asarray(ptr.data)
    rows = shape[0] if batched else 1
    a = np.broadcast_to(addrs, shape).reshape(rows, n).view(np.uint64) if addrs.dtype.itemsize == 8 else \
        np.broadcast_to(addrs, shape).reshape(rows, n).astype(np.uint64)
    if _increasing(a):
        return
    v = floats(value)
    v = np.asarray(value.data if v is None else v)
    # (a batched block of one row stands for every program: the pointers may be one row while the values
    # have a row per program, or the other way round)
    try:
        v = np.broadcast_to(v, np.broadcast_shapes(v.shape, shape)).reshape(-1, n)
        m = np.ones((1, n), bool) if mask is None else np.asarray(mask.data, bool)
        m = m if mask is None else np.broadcast_to(m, np.broadcast_shapes(m.shape, shape)).reshape(-1, n)
    except ValueError:
        return
    file, line = where()
    rec.lane_conflicts.conflict(kind, rec.origin if rec.origin is not None else -1, file, line, a, v, m, lane_shape,
                                rec.events)
