"""The tags dataflow provenance carries on values (record/memory/dataflow.py): which executions of which load
lines a value derives from, as runs, so a state carried across a loop's trips holds one entry per load line and
lane map, not one per trip.

An entry is ``(site, dims, first, last, step)``: ``site`` the load line's id in the running chunk (the monitor's
``read`` gives it), ``dims`` the lane map (dims[d]: the value's dim load dim d follows, or ALL), and the
executions ``first, first + step, ..., last`` of that line in the chunk (its "places"). A tag is a frozenset of
entries with at most one run per (site, dims) where the runs can be joined exactly: ``h = h * decay + load(t)``
extends h's run by one place each trip. Entries are never widened past the places they list; runs that do not
line up stay apart (an exact answer, at the cost of more entries).
"""
from __future__ import annotations

ALL = -1                  # a lane map's "every index along this dim"
EXPAND = 64               # runs whose places number at most this are re-cut from their places (exact, fewest runs)
EMPTY: frozenset = frozenset()


def single(site: int, dims: tuple, place: int) -> frozenset:
    return frozenset(((site, dims, place, place, 1),))


def join(a: frozenset, b: frozenset) -> frozenset:
    """The union of two tags, with the runs of one (site, lane map) joined. On every op with two tagged
    operands: a set union, then a key count that is all most ops pay."""
    if not b or a is b:
        return a
    if not a:
        return b
    u = a | b
    if len(u) == len(a):
        return a
    if len(u) == len(b):
        return b
    return normal(u)


def join_all(sets) -> frozenset:
    out = EMPTY
    for s in sets:
        out = join(out, s) if s else out
    return out


def normal(u: frozenset) -> frozenset:
    """``u`` with each (site, lane map)'s runs joined where that is exact."""
    if len(u) < 2:
        return u
    groups: dict = {}
    for e in u:
        groups.setdefault((e[0], e[1]), []).append(e[2:])
    if len(groups) == len(u):
        return u
    return frozenset((site, dims) + r for (site, dims), rs in groups.items()
                     for r in (merge_runs(rs) if len(rs) > 1 else rs))


def remap(found: frozenset, where) -> frozenset:
    """``found`` with each value dim ``d`` sent to ``where(d)`` (ALL: every index along it)."""
    out = frozenset((s, tuple(ALL if d == ALL else where(d) for d in dims), a, b, k) for s, dims, a, b, k in found)
    return normal(out) if len(out) > 1 else out


def every(found: frozenset) -> frozenset:
    return remap(found, lambda d: ALL)


def count(run: tuple) -> int:
    first, last, step = run
    return (last - first) // step + 1


def merge_runs(runs: list) -> list:
    """Runs of places (first, last, step) covering the same places as ``runs``, joined where one extends,
    overlaps or holds another: a recurrent state's run and its trip's one place become one run."""
    runs = sorted(runs)
    out = [runs[0]]
    for r in runs[1:]:
        both = _combined(out[-1], r)
        if both is None:
            out.append(r)
        else:
            out[-1] = both
    if len(out) > 1 and sum(count(r) for r in out) <= EXPAND:
        return list(runs_of(sorted({p for r in out for p in range(r[0], r[1] + 1, r[2])})))
    return out


def _combined(a: tuple, b: tuple):
    """One run covering exactly the places of runs ``a`` and ``b`` (a's first <= b's), or None."""
    a0, a1, s = a
    b0, b1, t = b
    if a0 == a1:                        # a single place: its step is whatever b's run needs
        if b0 == b1:
            return a if a0 == b0 else (a0, b0, b0 - a0)
        return b if a0 == b0 else (a0, b1, t) if b0 - a0 == t else None
    if (b0 - a0) % s:
        return None
    if b0 == b1:
        return a if b0 <= a1 else (a0, b0, s) if b0 == a1 + s else None
    if t % s == 0 and b1 <= a1:
        return a                        # b's places are some of a's
    if t == s and b0 <= a1 + s:
        return (a0, max(a1, b1), s)
    return None


def runs_of(places: list):
    """Sorted distinct places as (first, last, step) runs of one stride each."""
    i = 0
    while i < len(places):
        if i + 1 == len(places):
            yield places[i], places[i], 1
            return
        step, j = places[i + 1] - places[i], i + 1
        while j + 1 < len(places) and places[j + 1] - places[j] == step:
            j += 1
        yield places[i], places[j], step
        i = j + 1
