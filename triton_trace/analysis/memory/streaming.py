"""The L2 simulation of a stream in which no line is touched twice, without stepping the cache.

Elementwise kernels, copies, softmax and transposes read each line once and write each line once. For such a
stream the model of cache.py (its docstring) has a closed form:

- No lookup finds its line: every read misses and fetches its sectors in aligned pairs from DRAM; a write
  makes its sectors dirty; a far access's copy in the near partition is filled by a read, and a write's
  drop of a copy that does not exist changes nothing. Nothing is served by L1 (no load repeats a line).
- Every access that fills a way is a new line, so each set's least recently used line is the one it took in
  first: eviction is first in, first out. A dirty line is written back while the kernel runs exactly when
  ``ways`` more lines enter its set after it (it is evicted), or ``dirty_ways`` more dirty ones (the dirty
  limit cleans the oldest dirty line first, and every older dirty line went before it).

So one stable sort of the accesses by set stands in for the lock-step simulation; the counts are the
simulation's, bit for bit (tests/analysis/test_cache_windows.py compares both on streams that evict and clean).
"""
from __future__ import annotations

import numpy as np

from .. import context
from . import jitsteps

MAX_TABLE = 1 << 24          # lines counted in one table to tell which repeat
REUSE = 8                    # entries per line above which lines repeat in most sets: nothing to count
COUNT_SLICE = 1 << 20


class OpenSets:
    """The sets of a stream where lines do repeat that no line enters twice: each set of the L2 is a cache of
    its own, so the closed form above holds in those sets while the others are stepped (cache.py). A layer
    norm's weights, read by every program, are a few dozen lines: the rest of its sets take the closed form.
    Accesses to open sets are handed to ``take`` in time order, window after window."""

    def __init__(self, stepped: np.ndarray, l2, popcount: np.ndarray):
        self.stepped = stepped               # per set: some line enters it twice (simulate it)
        self._l2, self._popcount = l2, popcount
        self._sets: list = []
        self._dirty: list = []

    def take(self, sets: np.ndarray, kind: np.ndarray) -> tuple:
        """(sectors fetched from DRAM, sectors made dirty) per access (kind: cache.py's access byte); none
        hits."""
        m = kind >> 3
        home, wr = (kind & 1) == 0, (kind & 2) != 0
        fetched = np.where(home & ((kind & 4) != 0), self._popcount[self._l2.widen[m] & 15], 0)
        dirtied = np.where(home & wr, self._popcount[m], 0)
        fills = ~(wr & ~home)                # a write's drop of a copy that is not there changes nothing
        self._sets.append(sets[fills])
        self._dirty.append(dirtied[fills])
        return fetched, dirtied

    def written_back(self) -> int:
        """Dirty sectors the open sets wrote back while the kernel ran."""
        if not self._sets:
            return 0
        return _written_back(np.concatenate(self._sets), np.concatenate(self._dirty), self._l2)


def _written_back(sets: np.ndarray, dirty: np.ndarray, l2) -> int:
    """Dirty sectors written back while the kernel ran, of fills that are each a new line of their set
    (``sets``, ``dirty``: per fill in time order, its set and the sectors it left dirty)."""
    if not len(sets):
        return 0
    per_set = np.bincount(sets, minlength=l2.n_sets)
    dirty_per_set = np.bincount(sets[dirty > 0], minlength=l2.n_sets)
    over = (per_set > l2.ways) | (dirty_per_set > l2.dirty_ways)
    if not over.any():
        return 0                  # no set takes in more lines than it holds, nor more dirty ones than it keeps
    if not over.all():            # only the fills of sets that overflow can be written back
        keep = over[sets]
        sets, dirty = sets[keep], dirty[keep]
    dirty = dirty.astype(np.uint8)                           # (sectors: at most 4)
    key = sets.astype(np.uint16) if l2.n_sets <= 1 << 16 else sets
    by_set = np.argsort(key, kind="stable")
    s = key[by_set]
    d = dirty[by_set]
    idx = np.int32 if len(s) < 1 << 31 else np.int64
    ends = np.cumsum(np.bincount(s, minlength=l2.n_sets), dtype=idx)[s]   # one past the last fill of its set
    after = ends - np.arange(1, len(s) + 1, dtype=idx)       # fills of the same set after this one
    is_dirty = d > 0
    c = np.cumsum(is_dirty, dtype=idx)
    dirty_after = c[ends - 1] - c                            # dirty fills of the same set after this one
    back = is_dirty & ((after >= l2.ways) | (dirty_after >= l2.dirty_ways))
    return int(d[back].sum(dtype=np.int64))


def plan(co, t: np.ndarray, rows, l2, popcount: np.ndarray, n_rows: int, lines: int) -> tuple:
    """How much of the stream (in issue order ``t``) takes the closed form: (counts, None) when no line
    repeats in it, counts being (read sectors per row, write sectors per row, sectors written back while the
    kernel ran, totals as cache.simulate keeps them); (None, OpenSets) when lines repeat in less than half
    the sets; (None, None) when every set is to be stepped. ``rows``, ``l2``: cache.py's per-row lookups and
    cache (only its shape and set hash are used here); ``lines``: an upper bound of the stream's lines."""
    if not context.SHORTCUTS or not len(t) or len(t) > REUSE * lines or lines > MAX_TABLE:
        return None, None                 # lines repeat in most sets (or too many lines to count)
    if l2.jit:                # whether a line repeats, and if none does the counts, in compiled passes
        got = jitsteps.open_stream(co, t, rows, l2, n_rows, lines)
        if got == -2:         # the compiled loop steps every set for less than splitting the stream costs
            return None, None
        if got != -3:
            return got, None
    counts = np.zeros(lines + 1, dtype=np.int64)
    for a in range(0, len(t), COUNT_SLICE):       # in slices: temporaries of a few MB
        k = t[a:a + COUNT_SLICE]
        k = k[(co.stream_mask[k] & 15) != 0]       # entries that ask for no sector never reach L2
        counts += np.bincount(co.stream_line[k] + rows.base[co.stream_row[k]], minlength=lines + 1)
    if int(counts.max(initial=0)) > 1:
        if l2.jit:
            return None, None
        again = np.flatnonzero(counts > 1)
        home = l2.home_sets(again)
        stepped = np.zeros(l2.n_sets, dtype=bool)
        stepped[home] = True
        stepped[l2.partner(home)] = True
        return None, (OpenSets(stepped, l2, popcount) if stepped.mean() < 0.5 else None)
    mask = co.stream_mask[t].astype(np.uint8) & 15
    tt = t[mask != 0]
    row = co.stream_row[tt]
    return _all_open(row, co.stream_line[tt] + rows.base[row], mask[mask != 0], rows, l2, popcount, n_rows), None


def _all_open(row, line, mask, rows, l2, popcount, n_rows: int) -> tuple:
    rw = rows.rw[row]
    rd, wr = (rw & 4) != 0, (rw & 2) != 0
    sectors = popcount[mask]
    home_set = l2.home_sets(line)
    far = rows.near[row] != l2.partition(home_set)
    read_s = np.bincount(row[rd], weights=popcount[l2.widen[mask[rd]] & 15], minlength=n_rows).astype(np.int64)
    write_s = np.bincount(row[wr], weights=sectors[wr], minlength=n_rows).astype(np.int64)
    totals = (int(sectors[rd].sum()), 0, int(sectors[wr].sum()), int(sectors[wr].sum()), 0)
    # the lines each set takes in, in time order: every entry's at home, then a far read's copy
    copy = far & ~wr
    width = 1 + copy
    at = np.cumsum(width) - width
    sets = np.repeat(home_set, width)
    sets[at[copy] + 1] = l2.partner(home_set[copy])
    dirty = np.zeros(len(sets), dtype=np.int64)          # the sectors each fill leaves dirty
    dirty[at] = np.where(wr, sectors, 0)
    return read_s, write_s, _written_back(sets, dirty, l2), totals
