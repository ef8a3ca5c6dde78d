"""The L2's sets stepped in lock step: the state of a sectored, set-associative LRU cache (tags, ages, valid
and dirty sectors per way) and the accesses applied to it, every set at once (cache.py's docstring has the
model; analysis/memory/streaming.py the closed form for sets that no line enters twice).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from . import jitsteps

_POPCOUNT = np.array([bin(i).count("1") for i in range(16)], dtype=np.int64)
_PAIRS = np.array([m | (m & 5) << 1 | (m & 10) >> 1 for m in range(16)], dtype=np.uint8)   # sector pairs
_HASH = np.uint64(0x9E3779B97F4A7C15)     # Fibonacci hashing: spreads neighbouring lines over sets
_HOME = np.uint64(0xC2B2AE3D27D4EB4F)     # an independent hash bit picks a line's home partition

PARTITIONS = 2            # H100/H200 (and A100): two L2 partitions joined by a fabric


def _lockstep(sets, line, mask, rd, wr, n_sets: int, ways: int, copy=None, fetch_sectors: int = 1,
              dirty_ways=None, jit=None):
    """Per access: (sectors fetched from DRAM, sectors made dirty, dirty sectors written back during the
    run, requested sectors that were valid), from a cold cache (see ``L2.run``)."""
    l2 = L2(n_sets, ways, np.int64, fetch_sectors=fetch_sectors, dirty_ways=dirty_ways, jit=jit)
    copy = np.zeros(len(sets), dtype=bool) if copy is None else np.asarray(copy, dtype=bool)
    kind = ((np.asarray(mask).astype(np.uint8) & 15) << 3) | (np.asarray(rd, dtype=np.uint8) << 2) | \
        (np.asarray(wr, dtype=np.uint8) << 1) | copy.astype(np.uint8)
    fetched, dirtied, hit_sectors = l2.run(np.asarray(sets), np.asarray(line), kind)
    return fetched, dirtied, l2.evicted, hit_sectors


class L2:
    """The cache's state (tags, LRU ages, valid and dirty sectors per way), kept from one window of the
    stream to the next."""

    def __init__(self, n_sets: int, ways: int, line_dtype, fetch_sectors: int = 1, dirty_ways=None,
                 lines: Optional[int] = None, jit: Optional[bool] = None):
        self.n_sets, self.ways, self.dirty_ways = n_sets, ways, dirty_ways
        self.per_part = n_sets // PARTITIONS
        # stepped access by access in compiled code, with the state in jitsteps' layout (jitsteps.py)
        self.jit = jitsteps.available() if jit is None else jit
        # lines 0..lines-1 hashed once into a table (when the stream is long enough to pay for it; the
        # compiled loops hash as they go)
        self._table = None if lines is None or self.jit else self._hash(np.arange(lines + 1, dtype=np.int64))
        self.open = None             # streaming.OpenSets: sets left out of the stepping
        self.widen = _PAIRS if fetch_sectors == 2 else np.arange(16, dtype=np.uint8)
        self.step = 0
        self.evicted = 0
        if self.jit:
            self.state = jitsteps.new_state(n_sets, ways, line_dtype)
            return
        # tags and last use per (set, way) (-1: empty); sector bits flat at set * ways + way
        self.tags = np.full((n_sets, ways), -1, dtype=line_dtype)
        self.last = np.full((n_sets, ways), -1, dtype=np.int32)
        self.valid = np.zeros(n_sets * ways, dtype=np.uint8)
        self.dirty = np.zeros(n_sets * ways, dtype=np.uint8)
        self.n_dirty = np.zeros(n_sets, dtype=np.int32)            # dirty lines per set
        self.prev = np.full(n_sets, -1, dtype=np.int64)            # each set's last access (line, sectors, kind)

    def _hash(self, line: np.ndarray) -> np.ndarray:
        """Each line's set in its home partition: home * sets per partition + slot (int32)."""
        per_part = self.n_sets // PARTITIONS
        u = line.astype(np.uint64)
        slot = ((u * _HASH) >> np.uint64(40)) % np.uint64(per_part)
        home = (u * _HOME) >> np.uint64(63)         # PARTITIONS == 2: one hash bit
        return (home * np.uint64(per_part) + slot).astype(np.int32 if self.n_sets < 1 << 31 else np.int64)

    def partition(self, sets: np.ndarray) -> np.ndarray:
        """The partition each set belongs to."""
        return sets // (self.n_sets // PARTITIONS)

    def partner(self, sets: np.ndarray) -> np.ndarray:
        """The same slot in the other partition (where a far access leaves its copy)."""
        per_part = self.n_sets // PARTITIONS
        return np.where(sets >= per_part, sets - per_part, sets + per_part)

    def home_sets(self, line: np.ndarray) -> np.ndarray:
        table = self.home_table(line)
        return self._hash(line) if table is None else table[line]

    def home_table(self, line: np.ndarray) -> Optional[np.ndarray]:
        """Every line's home set, indexed by line, when the table covers ``line``; else None."""
        if self._table is not None and len(line) and int(line.max()) < len(self._table):
            return self._table
        return None

    def run(self, sets, line, kind) -> tuple:
        """Apply accesses in time order; ``kind`` per access: sector mask << 3 | read << 2 | write << 1 |
        copy, where a copy is an access to a near-partition copy: a read fills it without DRAM traffic, a
        write drops it. Per access: (sectors fetched from DRAM, sectors made dirty, requested sectors that
        were valid). Dirty lines beyond ``dirty_ways`` per set are cleaned."""
        n = len(sets)
        stepped, got, made, hit_s = self.steps(sets, line, kind)
        fetched = np.zeros(n, dtype=np.int64)
        dirtied = np.zeros(n, dtype=np.int64)
        hit_sectors = _POPCOUNT[kind >> 3] * ((kind >> 2) & 1)       # a repeat hits all it asks for
        fetched[stepped], dirtied[stepped], hit_sectors[stepped] = got, made, hit_s
        return fetched, dirtied, hit_sectors

    def steps(self, sets, line, kind) -> tuple:
        """``run`` for the accesses that change the cache: (their indices, sectors each fetched, made dirty,
        found valid). Every other access repeats the previous access of its set (the same line, sectors and
        kind): it hits every sector it asks for and fetches and dirties nothing."""
        if self.jit:
            return jitsteps.steps(self, sets, line, kind)
        n, n_sets = len(sets), self.n_sets
        key = sets.astype(np.uint16) if n_sets <= 1 << 16 else sets     # 16-bit keys take numpy's radix sort
        by_set = np.argsort(key, kind="stable")                           # time order kept within a set
        s_sorted = key[by_set]
        del key
        # A repeat of the previous access of the same set to the same line, with the same sectors and kind,
        # is a hit that changes nothing: drop it from the steps (it fetches and dirties nothing). The
        # previous access may be the last of an earlier window. (Lines and kinds are compared apart: two
        # narrow gathers cost half of one of a combined 64-bit key.)
        ln = np.asarray(line)[by_set]
        kd = kind[by_set]
        same = np.empty(n, dtype=bool)
        if n:
            starts = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]])
            np.equal(ln[1:], ln[:-1], out=same[1:])
            same[1:] &= kd[1:] == kd[:-1]
            what = lambda at, ln=ln, kd=kd: (ln[at].astype(np.int64) << 8) | kd[at]
            same[starts] = what(starts) == self.prev[s_sorted[starts]]
            ends = np.r_[starts[1:] - 1, n - 1]
            self.prev[s_sorted[ends]] = what(ends)
        del ln, kd
        by_set, s_sorted = by_set[~same], s_sorted[~same]
        counts = np.bincount(s_sorted, minlength=n_sets)
        rank = np.arange(len(by_set)) - np.repeat(np.cumsum(counts) - counts, counts)
        # Step-major order (step t: the t-th access of every set, sets ascending), so each step is a slice.
        rkey = rank.astype(np.uint16) if len(rank) and rank.max() < 1 << 16 else rank
        step_major = by_set[np.argsort(rkey, kind="stable")]
        bounds = np.r_[0, np.cumsum(np.bincount(rank, minlength=1))]
        del rkey, rank, by_set, s_sorted
        sl_set = sets[step_major]
        sl_line = line[step_major].astype(self.tags.dtype)
        k = kind[step_major]
        m8 = k >> 3
        cp = (k & 1) != 0
        wr = (k & 2) != 0
        read_m = np.where((k & 4) != 0, m8, 0).astype(np.uint8)
        write_m = np.where(wr & ~cp, m8, 0).astype(np.uint8)
        drop = wr & cp
        del k, wr
        got, made, hit_s = self._steps(bounds, sl_set, sl_line, m8, cp, read_m, write_m, drop)
        return step_major, got, made, hit_s

    def _steps(self, bounds, sl_set, sl_line, m8, cp, read_m, write_m, drop) -> tuple:
        tags, last, valid, dirty, n_dirty = self.tags, self.last, self.valid, self.dirty, self.n_dirty
        n_sets, ways, widen, dirty_ways = self.n_sets, self.ways, self.widen, self.dirty_ways
        tags_flat, last_flat = tags.reshape(-1), last.reshape(-1)     # views: 1-D fancy indexing is faster
        got = np.zeros(len(sl_set), dtype=np.int64)
        made = np.zeros(len(sl_set), dtype=np.int64)
        hit_s = np.zeros(len(sl_set), dtype=np.int64)
        evicted = 0
        for i in range(len(bounds) - 1):
            step = self.step + i
            lo, hi = bounds[i], bounds[i + 1]
            live = sl_set[lo:hi]
            every = hi - lo == n_sets          # every set has a t-th access: whole arrays, no gather
            tg = sl_line[lo:hi]
            match = (tags if every else tags[live]) == tg[:, None]
            # One argmin finds the way: the matching tag (scored -2), else an empty way (-1), else the LRU.
            score = np.where(match, -2, last if every else last[live])
            way = score.argmin(axis=1)
            hit = match[np.arange(hi - lo), way]
            f = live * ways + way
            dr = drop[lo:hi]
            any_drop = dr.any()
            df = dirty[f]
            evicted += int(_POPCOUNT[np.where(hit | dr if any_drop else hit, 0, df) & 15].sum())
            v = np.where(hit, valid[f], 0).astype(np.uint8)
            d = np.where(hit, df, 0).astype(np.uint8)
            rm = read_m[lo:hi]
            wm = write_m[lo:hi]
            fetch = widen[rm & ~v & 15] & ~v & 15
            got[lo:hi] = np.where(cp[lo:hi], 0, _POPCOUNT[fetch])
            made[lo:hi] = _POPCOUNT[wm & ~d & 15]
            hit_s[lo:hi] = _POPCOUNT[rm & v & 15]
            new_v, new_d = v | fetch | m8[lo:hi], d | wm
            if any_drop:                       # a write dropped the other partition's copy
                stay = dr & ~hit               # (there was none: nothing changes)
                tg = np.where(dr, -1, tg).astype(tags.dtype)
                tg = np.where(stay, tags_flat[f], tg)
                step_t = np.where(stay, last_flat[f], np.where(dr, -1, step))
                new_v = np.where(stay, valid[f], np.where(dr, 0, new_v))
                new_d = np.where(stay, df, np.where(dr, 0, new_d))
            else:
                step_t = step
            tags_flat[f], last_flat[f] = tg, step_t
            valid[f], dirty[f] = new_v, new_d
            if dirty_ways is not None:
                n_dirty[live] += (new_d != 0).astype(np.int32) - (df != 0)
                over = live[n_dirty[live] > dirty_ways]
                if len(over):
                    evicted += _clean_lru_dirty(over, dirty, last, ways)
                    n_dirty[over] -= 1
        self.step += len(bounds) - 1
        self.evicted += evicted
        return got, made, hit_s


def _clean_lru_dirty(sets, dirty, last, ways: int) -> int:
    """Write back the least recently used dirty line of each of ``sets`` (it stays, clean); returns the
    sectors written back."""
    d = dirty.reshape(-1, ways)[sets]
    age = np.where(d != 0, last[sets], np.iinfo(np.int32).max)
    f = sets * ways + age.argmin(axis=1)
    written = int(_POPCOUNT[dirty[f] & 15].sum())
    dirty[f] = 0
    return written

