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
simulation's, bit for bit (tests/test_cache_windows.py compares both on streams that evict and clean).
"""
from __future__ import annotations

import numpy as np

from . import context

MAX_TABLE = 1 << 26          # lines counted in one table to tell that none repeats


def distinct_lines(line: np.ndarray) -> bool:
    """Whether no line occurs twice (``line``: non-negative global line numbers)."""
    if len(line) < 2:
        return True
    top = int(line.max())
    if top >= MAX_TABLE and top >= 8 * len(line):
        s = np.sort(line)
        return not (s[1:] == s[:-1]).any()
    return int(np.bincount(line, minlength=1).max()) <= 1


def simulate_distinct(co, t: np.ndarray, rows, l2, popcount: np.ndarray, n_rows: int, partitions: int):
    """(read sectors per row, write sectors per row, sectors written back during the kernel, totals) for
    the stream in issue order ``t`` when no line repeats in it, else None. ``rows``, ``l2``: cache.py's
    per-row lookups and cache (only its shape and set hash are used); totals as cache.simulate keeps them."""
    if not context.SHORTCUTS or not len(t):
        return None
    mask = co.stream_mask[t].astype(np.uint8) & 15
    tt = t[mask != 0]                      # entries that ask for no sector never reach L2
    mask = mask[mask != 0]
    row = co.stream_row[tt]
    line = co.stream_line[tt] + rows.base[row]
    if not distinct_lines(line):
        return None
    rw = rows.rw[row]
    rd, wr = (rw & 4) != 0, (rw & 2) != 0
    sectors = popcount[mask]
    per_part = l2.n_sets // partitions
    home_set = l2.home_sets(line)
    far = rows.near[row] != home_set // per_part
    read_s = np.bincount(row[rd], weights=popcount[l2.widen[mask[rd]] & 15], minlength=n_rows).astype(np.int64)
    write_s = np.bincount(row[wr], weights=sectors[wr], minlength=n_rows).astype(np.int64)
    totals = (int(sectors[rd].sum()), 0, int(sectors[wr].sum()), int(sectors[wr].sum()), 0)
    # the lines each set takes in, in time order: every entry's at home, then a far read's copy
    copy = far & ~wr
    width = 1 + copy
    at = np.cumsum(width) - width
    sets = np.repeat(home_set, width)
    other = home_set[copy]
    sets[at[copy] + 1] = np.where(other >= per_part, other - per_part, other + per_part)
    dirty = np.zeros(len(sets), dtype=np.int64)          # the sectors each fill leaves dirty
    dirty[at] = np.where(wr, sectors, 0)
    del at, other, home_set
    key = sets.astype(np.uint16) if l2.n_sets <= 1 << 16 else sets
    by_set = np.argsort(key, kind="stable")
    s = sets[by_set]
    d = dirty[by_set]
    counts = np.bincount(s, minlength=l2.n_sets)
    ends = np.cumsum(counts)                              # one past each set's last fill
    after = ends[s] - np.arange(len(s)) - 1               # fills of the same set after this one
    is_dirty = (d > 0).astype(np.int64)
    c = np.cumsum(is_dirty)
    dirty_after = c[ends[s] - 1] - c                      # dirty fills of the same set after this one
    back = (d > 0) & ((after >= l2.ways) | (dirty_after >= l2.dirty_ways))
    return read_s, write_s, int(d[back].sum()), totals
