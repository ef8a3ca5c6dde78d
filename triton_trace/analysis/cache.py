"""L2 cache simulation: which requests reach DRAM.

The model, and what it assumes:

- Issue order. Programs are dispatched in the GPU's order (x fastest) in waves of
  ``programs_in_flight``; within a wave the programs advance together, so the stream takes op ``seq``
  0 of every program of the wave, then op 1, and so on (a loop's trips are successive seqs).
- The cache. A sectored, set-associative LRU cache of 128-byte lines with 32-byte sectors,
  ``l2_bytes`` in total and ``l2_ways`` ways per set; the set is a hash of the line address (NVIDIA
  hashes addresses across L2 slices, so power-of-two strides do not all land in one set). A load
  fetches the sectors it needs that are not valid in its line; a store allocates without fetching and
  marks its sectors dirty; an atomic does both (atomics execute in L2). Each sector that turns dirty is
  written back to DRAM once, at eviction or at the end of the kernel.
- Tensors occupy disjoint address ranges; two arguments that alias one storage are two ranges.
  The cache starts cold, as after another kernel streamed through it.

The simulation is exact for that cache. It runs all sets in lock step: step t applies every set's t-th
access at once, so the Python loop runs as many times as the busiest set has accesses (an L2 of 50 MB
has ~25,000 sets), and consecutive repeats of one line in a set collapse into one step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .coalescing import LINE_BYTES, SECTOR_BYTES, Coalescing
from .context import LaunchContext

_POPCOUNT = np.array([bin(i).count("1") for i in range(16)], dtype=np.int64)
_HASH = np.uint64(0x9E3779B97F4A7C15)     # Fibonacci hashing: spreads neighbouring lines over sets


@dataclass(frozen=True)
class CacheResult:
    read_sectors: np.ndarray     # per row: sectors fetched from DRAM
    write_sectors: np.ndarray    # per row: sectors it made dirty (each written back once)
    sets: int
    # Dirty sectors written back by evictions while the kernel ran. The rest stay dirty in L2 when the
    # kernel ends and reach DRAM later, so a profiler's per-kernel DRAM write counter (ncu's
    # dram__bytes_write) sees only these: on an H200 a 16 MB vector-add output stays in its L2.
    evicted_sectors: int = 0
    # L2 lookups, in sectors: what reads (loads, atomics) and writes (stores, atomics) asked for, and how
    # many found their sector valid (a read) or their line present (a write, which never fetches).
    read_lookups: int = 0
    read_hits: int = 0
    write_lookups: int = 0
    write_hits: int = 0

    @property
    def hit_rate(self) -> float:
        """Sector hit rate of all L2 lookups, in percent (ncu's lts__t_sector_hit_rate.pct)."""
        total = self.read_lookups + self.write_lookups
        return 100.0 * (self.read_hits + self.write_hits) / total if total else 0.0


def issue_order(ctx: LaunchContext) -> np.ndarray:
    """Rank of every row in the stream the cache sees (see the module docstring)."""
    rank = ctx.gpu_rank[ctx.row_prog] if ctx.n_rows else np.zeros(0, dtype=np.int64)
    wave = rank // ctx.params.programs_in_flight
    order = np.lexsort((np.arange(ctx.n_rows), rank, ctx.seq, wave))
    out = np.empty(ctx.n_rows, dtype=np.int64)
    out[order] = np.arange(ctx.n_rows)
    return out


def _tensor_base_lines(ctx: LaunchContext) -> np.ndarray:
    # Each storage gets its own range, padded to a 1 MiB boundary.
    sizes = [-(-(t.storage_size * t.elem_bytes) // (1 << 20)) * (1 << 20) // LINE_BYTES + (1 << 13)
             for t in ctx.launch.tensors]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def simulate(ctx: LaunchContext, co: Coalescing, row_order: np.ndarray) -> CacheResult:
    p = ctx.params
    n_sets = max(1, p.l2_bytes // (LINE_BYTES * p.l2_ways))
    read_s = np.zeros(ctx.n_rows, dtype=np.int64)
    write_s = np.zeros(ctx.n_rows, dtype=np.int64)
    if not len(co.stream_row):
        return CacheResult(read_s, write_s, n_sets, 0)
    t = np.argsort(row_order[co.stream_row], kind="stable")      # sorted runs: nearly linear
    row = co.stream_row[t]
    line = co.stream_line[t] + _tensor_base_lines(ctx)[ctx.tensor[row]]
    mask = co.stream_mask[t].astype(np.int64)
    rd = ctx.is_read[row]
    wr = ctx.is_write[row]
    h = (line.astype(np.uint64) * _HASH) >> np.uint64(40)
    sets = (h % np.uint64(n_sets)).astype(np.int64)
    fetched, dirtied, evicted, hits = _lockstep(sets, line, mask, rd, wr, n_sets, p.l2_ways)
    read_s += np.bincount(row, weights=fetched, minlength=ctx.n_rows).astype(np.int64)
    write_s += np.bincount(row, weights=dirtied, minlength=ctx.n_rows).astype(np.int64)
    sectors = _POPCOUNT[mask & 15]
    return CacheResult(read_s, write_s, n_sets, evicted, read_lookups=int(sectors[rd].sum()),
                       read_hits=hits[0], write_lookups=int(sectors[wr].sum()), write_hits=hits[1])


def _lockstep(sets, line, mask, rd, wr, n_sets: int, ways: int):
    n = len(sets)
    key = sets.astype(np.uint16) if n_sets <= 1 << 16 else sets     # 16-bit keys take numpy's radix sort
    by_set = np.argsort(key, kind="stable")                           # time order kept within a set
    s_sorted = sets[by_set]
    # A repeat of the previous access of the same set to the same line, with the same sectors and kind,
    # is a hit that changes nothing: drop it from the steps (it fetches and dirties nothing).
    same = np.zeros(n, dtype=bool)
    if n > 1:
        a, b = by_set[1:], by_set[:-1]
        same[1:] = ((s_sorted[1:] == s_sorted[:-1]) & (line[a] == line[b]) & (mask[a] == mask[b])
                    & (rd[a] == rd[b]) & (wr[a] == wr[b]))
    dropped = by_set[same]
    hits = [int(_POPCOUNT[mask[dropped][rd[dropped]] & 15].sum()), int(_POPCOUNT[mask[dropped][wr[dropped]] & 15].sum())]
    by_set, s_sorted = by_set[~same], s_sorted[~same]
    counts = np.bincount(s_sorted, minlength=n_sets)
    rank = np.arange(len(by_set)) - np.repeat(np.cumsum(counts) - counts, counts)
    # Step-major order (step t: the t-th access of every set, sets ascending), so each step is a slice.
    rkey = rank.astype(np.uint16) if len(rank) and rank.max() < 1 << 16 else rank
    step_major = by_set[np.argsort(rkey, kind="stable")]
    bounds = np.r_[0, np.cumsum(np.bincount(rank, minlength=1))]
    sl_set = sets[step_major]
    sl_line = line[step_major]
    if len(sl_line) and sl_line.max() < 1 << 31:
        sl_line = sl_line.astype(np.int32)      # half the memory traffic of the tag compares
    m8 = mask[step_major].astype(np.uint8)
    read_m = np.where(rd[step_major], m8, 0).astype(np.uint8)
    write_m = np.where(wr[step_major], m8, 0).astype(np.uint8)
    # State: tags and last use per (set, way); sector bits flat at set * ways + way.
    tags = np.full((n_sets, ways), -1, dtype=sl_line.dtype)
    last = np.full((n_sets, ways), -1, dtype=np.int32)
    valid = np.zeros(n_sets * ways, dtype=np.uint8)
    dirty = np.zeros(n_sets * ways, dtype=np.uint8)
    got = np.zeros(len(step_major), dtype=np.int64)
    made = np.zeros(len(step_major), dtype=np.int64)
    evicted = 0
    for step in range(len(bounds) - 1):
        lo, hi = bounds[step], bounds[step + 1]
        live = sl_set[lo:hi]
        every = hi - lo == n_sets          # every set has a t-th access: whole arrays, no gather
        tg = sl_line[lo:hi]
        # One argmin finds the way: the matching tag (scored -1) or else the least recently used.
        score = np.where((tags if every else tags[live]) == tg[:, None], -1, last if every else last[live])
        way = score.argmin(axis=1)
        hit = score[np.arange(hi - lo), way] < 0
        f = live * ways + way
        evicted += int(_POPCOUNT[np.where(hit, 0, dirty[f]) & 15].sum())
        v = np.where(hit, valid[f], 0).astype(np.uint8)
        d = np.where(hit, dirty[f], 0).astype(np.uint8)
        got[lo:hi] = _POPCOUNT[read_m[lo:hi] & ~v & 15]
        hits[0] += int(_POPCOUNT[read_m[lo:hi] & v & 15].sum())
        hits[1] += int(_POPCOUNT[np.where(tags[live, way] == tg, write_m[lo:hi], 0) & 15].sum())
        made[lo:hi] = _POPCOUNT[write_m[lo:hi] & ~d & 15]
        tags[live, way], last[live, way] = tg, step
        valid[f], dirty[f] = v | m8[lo:hi], d | write_m[lo:hi]
    fetched = np.zeros(n, dtype=np.int64)
    dirtied = np.zeros(n, dtype=np.int64)
    fetched[step_major], dirtied[step_major] = got, made
    return fetched, dirtied, evicted, hits


def dram_bytes(result: CacheResult) -> tuple:
    """(read bytes, write bytes) per row."""
    return result.read_sectors * SECTOR_BYTES, result.write_sectors * SECTOR_BYTES
