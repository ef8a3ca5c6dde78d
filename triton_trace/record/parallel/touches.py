"""What one worker's programs touched: per storage, byte ranges read and written.

A worker's programs see the memory as the launch left it when the worker forked, plus their own writes;
run after the earlier workers' programs in one process, they would see those workers' writes as well. So
a worker's recording is the one-process recording exactly when it read nothing an earlier worker wrote,
and its writes can be copied back over the earlier ones' exactly when no earlier worker wrote where it did
(``meet``). Reads matter only of storages written before the workers forked (``watch``): a storage first
written by some worker is judged whole (``storages``: any worker after it that touches it is refused).

Each memory op adds ranges that hold every lane it touched: for a batched op of plain pointer arithmetic,
each program's runs of consecutive elements (a tile's rows: the safe part of each), for one program's op its
lanes sorted into runs, and otherwise (a batched gather) each program's smallest and largest element.
A range may hold elements no lane touched (a strided access, a gather), which can only make two workers
look as if they meet, never hide that they do. Ranges of one storage are merged as they pile up, so a
kernel that streams through memory keeps a handful of them.
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from ...model.lanes.encoding import core
from ..batch.affine import LazyOffsets, affine_offsets, extent

BIG, SMALL = np.iinfo(np.int64).max, np.iinfo(np.int64).min
COALESCE = 1 << 18          # ranges of one storage kept unmerged, at most
EXACT_LANES = 1 << 16       # a batched op without a run dimension this small is kept lane by lane


class Touches:
    """The byte ranges one worker's ops touched, by storage; reads only of the storages in ``watch``."""

    def __init__(self, watch: frozenset = frozenset()):
        self.watch = watch
        self.storages: set = set()        # every storage an op was attributed to, lanes or not
        self.atomic: set = set()          # storages an atomic op touched
        self._ranges: dict = {}           # (storage, is_write) -> [(lo, hi) arrays], bytes, half-open
        self._count: dict = {}

    def add(self, sid: int, is_write: bool, is_atomic: bool, offsets, safe, elem_bytes: int, batched: bool,
            affine=None) -> None:
        """One op's lanes: element ``offsets`` into storage ``sid`` (``batched``: a chunk's, the program axis
        first; ``affine`` its (first offsets, element strides) when known), ``safe`` the lanes that ran."""
        self.storages.add(sid)
        if is_atomic:
            self.atomic.add(sid)
        if not is_write and sid not in self.watch:
            return
        lo, hi = _spans(offsets, safe, batched, affine)
        if not len(lo):
            return
        key = (sid, is_write)
        pile = self._ranges.setdefault(key, [])
        pile.append((lo * elem_bytes, hi * elem_bytes + elem_bytes))
        self._count[key] = self._count.get(key, 0) + len(lo)
        if self._count[key] > COALESCE:
            merged = merge(pile)
            self._ranges[key], self._count[key] = [merged], len(merged[0])

    def summary(self) -> dict:
        """{"reads": {storage: (lo, hi)}, "writes": {...}, "storages", "atomic"}: merged, sorted ranges."""
        out = {"reads": {}, "writes": {}, "storages": set(self.storages), "atomic": set(self.atomic)}
        for (sid, is_write), pile in self._ranges.items():
            out["writes" if is_write else "reads"][sid] = merge(pile)
        return out


_EMPTY = (np.zeros(0, np.int64), np.zeros(0, np.int64))


def _spans(offsets, safe, batched: bool, affine) -> tuple:
    """Element ranges (inclusive lo, hi) that hold every safe lane of one op."""
    safe = np.asarray(safe)
    if isinstance(offsets, LazyOffsets) or (batched and affine is not None):
        first, strides = (offsets.first, offsets.strides) if isinstance(offsets, LazyOffsets) else affine
        return _affine(np.asarray(first, np.int64), tuple(int(v) for v in strides), tuple(offsets.shape[1:]), safe)
    o = np.asarray(offsets)
    if not o.size:
        return _EMPTY
    if not batched:
        lanes = o[np.broadcast_to(safe, o.shape)] if not core(safe).all() else o.reshape(-1)
        return _runs(np.unique(lanes))
    rows = o.shape[0]
    o2 = o.reshape(rows, -1)
    if core(safe).all():
        return o2.min(axis=1), o2.max(axis=1)
    s2 = np.broadcast_to(safe, o.shape).reshape(rows, -1)
    has = s2.any(axis=1)
    return np.where(s2, o2, BIG).min(axis=1)[has], np.where(s2, o2, SMALL).max(axis=1)[has]


def _runs(u: np.ndarray) -> tuple:
    """Sorted distinct elements as runs of consecutive ones."""
    if not len(u):
        return _EMPTY
    cut = np.flatnonzero(np.diff(u) != 1)
    return u[np.r_[0, cut + 1]], u[np.r_[cut, len(u) - 1]]


def _affine(first: np.ndarray, strides: tuple, block: tuple, safe: np.ndarray) -> tuple:
    """Ranges of a batched op whose program p touches ``first[p]`` plus the pattern of ``strides`` over
    ``block``: per program, its runs along a dimension of stride +-1 (the safe part of each), else its lanes
    (few) or its smallest and largest lane."""
    rows, n = len(first), math.prod(block)
    if not rows or not n:
        return _EMPTY
    every = bool(core(safe).all())
    d = next((k for k, (st, size) in enumerate(zip(strides, block)) if size > 1 and abs(st) == 1), None)
    if d is None and rows * n <= EXACT_LANES:            # lane by lane (a column, a scalar per program)
        o = affine_offsets(first, strides, block).reshape(rows, n)
        o = o.reshape(-1) if every else o[np.broadcast_to(safe, (rows,) + block).reshape(rows, n)]
        return o, o.copy()
    if d is None:
        p_lo, p_hi = extent(strides, block)
        lo, hi = first + p_lo, first + p_hi
        if every:
            return lo, hi
        s2 = np.broadcast_to(safe, (rows,) + block).reshape(rows, n)
        has = s2.any(axis=1)
        part = np.flatnonzero(has & ~s2.all(axis=1))
        if len(part):
            pat = affine_offsets(np.zeros(1, np.int64), strides, block).reshape(1, n)
            lo[part] = first[part] + np.where(s2[part], pat, BIG).min(axis=1)
            hi[part] = first[part] + np.where(s2[part], pat, SMALL).max(axis=1)
        return lo[has], hi[has]
    size, step = block[d], strides[d]
    others = tuple(1 if k == d else v for k, v in enumerate(block))
    starts = affine_offsets(first, tuple(0 if k == d else v for k, v in enumerate(strides)), others).reshape(rows, -1)
    if every:
        lo = starts + min(0, step * (size - 1))
        return lo.reshape(-1), (lo + (size - 1)).reshape(-1)
    m = np.moveaxis(np.broadcast_to(safe, (rows,) + block), d + 1, -1).reshape(rows, -1, size)
    has = m.any(axis=-1)
    a = np.argmax(m, axis=-1)                              # first safe lane of each run
    b = size - 1 - np.argmax(m[..., ::-1], axis=-1)         # last
    lo, hi = (starts + a, starts + b) if step > 0 else (starts - b, starts - a)
    return lo[has], hi[has]


def merge(pile: list) -> tuple:
    """Half-open ranges (a list of (lo, hi) arrays) as sorted, disjoint ones; touching ranges join."""
    lo = np.concatenate([p[0] for p in pile]) if len(pile) > 1 else pile[0][0]
    hi = np.concatenate([p[1] for p in pile]) if len(pile) > 1 else pile[0][1]
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    starts = np.flatnonzero(np.r_[True, lo[1:] > reach[:-1]])
    ends = np.r_[starts[1:], len(lo)] - 1
    return lo[starts].copy(), reach[ends].copy()


def meet(a: Optional[tuple], b: Optional[tuple]) -> bool:
    """Whether two sets of sorted, disjoint half-open ranges share a byte."""
    if a is None or b is None or not len(a[0]) or not len(b[0]):
        return False
    alo, ahi = a
    blo, bhi = b
    j = np.searchsorted(alo, bhi, side="left") - 1       # the last range of ``a`` starting before each b ends
    ok = j >= 0
    return bool((ahi[j[ok]] > blo[ok]).any())


def union(a: Optional[tuple], b: tuple) -> tuple:
    return b if a is None else merge([a, b])
