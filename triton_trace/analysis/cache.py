"""L2 cache simulation: which requests reach DRAM, and which L2 lookups hit.

The model, and what it assumes (each H100/H200 behaviour below was measured with Nsight Compute on an
H200; tests/gpu/RESULTS.md has the numbers):

- Issue order. Programs are dispatched in the GPU's order (x fastest) in waves of
  ``programs_in_flight``; within a wave the programs advance together, so the stream takes op ``seq``
  0 of every program of the wave, then op 1, and so on (a loop's trips are successive seqs).
- L1. Programs resident on one SM at once (a wave's programs, dealt round-robin over the SMs) share
  its L1: a load of a sector one of them loaded before (and did not write since) hits in L1 and never
  reaches L2 (a stride-2 load's four instructions touch the same 32 sectors: one L2 lookup, not four;
  layer norm's weights are read from L2 once per SM). Where what they load outgrows L1 (a random
  gather), nothing is filtered. Atomics and stores always go to L2.
- The L2. Sectored, set-associative LRU caches of 128-byte lines with 32-byte sectors, ``l2_bytes`` in
  total and ``l2_ways`` ways per set; the set is a hash of the line address (NVIDIA hashes addresses
  across L2 slices, so power-of-two strides do not all land in one set). It is split in two partitions
  (``PARTITIONS``); each line has a home partition (an address hash), each program a near one (its SM's
  side). A read from the far side also leaves a clean copy in the near partition, so data read from
  both sides takes two slots; a write goes to the home partition and drops the other side's copy.
- Reads fetch from DRAM the sectors they need that are not valid at home, in aligned pairs (64 bytes,
  ``FETCH_SECTORS``: a lone 4-byte gather costs 64 bytes of DRAM reads). A store allocates without
  fetching and marks its sectors dirty; an atomic does both (atomics execute in L2).
- Write-back. A dirty line is written back when it is evicted, or early when its set holds more than
  ``DIRTY_FRACTION`` of its ways dirty (the least recently used dirty line is cleaned and stays): an
  H200 keeps at most ~27 MB dirty whatever is stored. What is still dirty at the end stays in L2 and
  reaches DRAM after the kernel, so a per-kernel DRAM write counter (ncu's dram__bytes_write) sees only
  ``evicted_sectors``; every sector that turns dirty is written back once in the end (``write_sectors``).
- Hit rate. ncu counts every store sector as an L2 hit (a store never waits for DRAM); a read hits when
  its sectors are valid in the partition the SM asks first (its near one).
- Tensors occupy disjoint address ranges; two arguments that alias one storage are two ranges.
  The cache starts cold, as after another kernel streamed through it (ncu flushes it before each pass).

The simulation is exact for that cache. It runs all sets in lock step: step t applies every set's t-th
access at once, so the Python loop runs as many times as the busiest set has accesses (an L2 of 60 MB
has ~30,000 sets), and consecutive repeats of one line in a set collapse into one step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .coalescing import LINE_BYTES, SECTOR_BYTES, Coalescing
from .context import LOAD, LaunchContext
from .gpus import GPUS

_POPCOUNT = np.array([bin(i).count("1") for i in range(16)], dtype=np.int64)
_PAIRS = np.array([m | (m & 5) << 1 | (m & 10) >> 1 for m in range(16)], dtype=np.uint8)   # sector pairs
_HASH = np.uint64(0x9E3779B97F4A7C15)     # Fibonacci hashing: spreads neighbouring lines over sets
_HOME = np.uint64(0xC2B2AE3D27D4EB4F)     # an independent hash bit picks a line's home partition

PARTITIONS = 2            # H100/H200 (and A100): two L2 partitions joined by a fabric
FETCH_SECTORS = 2         # a read miss fetches an aligned pair of sectors (64 bytes) from DRAM
DIRTY_FRACTION = 7 / 16   # at most this share of a set's ways stays dirty (27.5 MB of an H200's 60 MB)
L1_BYTES = 256 << 10      # an SM's combined L1 / shared memory


@dataclass(frozen=True)
class CacheResult:
    read_sectors: np.ndarray     # per row: sectors fetched from DRAM
    write_sectors: np.ndarray    # per row: sectors it made dirty (each written back once)
    sets: int
    # Dirty sectors written back while the kernel ran (evicted, or cleaned by the dirty limit). The rest
    # stay dirty in L2 when the kernel ends and reach DRAM later, so a profiler's per-kernel DRAM write
    # counter (ncu's dram__bytes_write) sees only these.
    evicted_sectors: int = 0
    # L2 lookups in sectors (after L1): what reads (loads, atomics) and writes (stores, atomics) asked for,
    # and how many hit (ncu counts every write sector as a hit).
    read_lookups: int = 0
    read_hits: int = 0
    write_lookups: int = 0
    write_hits: int = 0
    l1_hit_sectors: int = 0      # load sectors served by L1

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


def _l1_owner(ctx: LaunchContext, row) -> np.ndarray:
    """The L1 a row's program uses: its SM during its wave (programs resident together share it)."""
    pif = ctx.params.programs_in_flight
    sms = GPUS[ctx.params.gpu].sms if ctx.params.gpu in GPUS else pif
    rank = ctx.gpu_rank[ctx.row_prog[row]].astype(np.int64)
    return rank // pif * sms + rank % pif % sms


def _l1_filter(ctx: LaunchContext, row, line, mask, wr) -> np.ndarray:
    """The sectors of each stream entry that go on to L2 (see L1 in the module docstring)."""
    prog = _l1_owner(ctx, row)
    key = prog * (int(line.max()) + 1) + line
    o = np.argsort(key, kind="stable")                        # by (owner, line), in time order
    k, m, w = key[o], mask[o], wr[o]
    load = ctx.kind[row[o]] == LOAD
    first = np.r_[True, k[1:] != k[:-1]]
    start = first | np.r_[False, w[:-1]]                      # a write by the program starts afresh
    seg_start = np.flatnonzero(start)
    seg = np.cumsum(start) - 1
    out = m.copy()
    for b in range(4):
        bit = ((m >> b) & 1) * load
        before = np.cumsum(bit) - bit
        seen = before - before[seg_start][seg] > 0
        out[seen & (bit > 0)] &= ~(1 << b)
    lines_per_owner = np.bincount(prog[o][first & load], minlength=int(prog.max()) + 1)
    big = lines_per_owner[prog[o]] * LINE_BYTES > L1_BYTES    # the SM's loads in that wave outgrow L1
    out = np.where(big, m, out)
    res = np.empty_like(mask)
    res[o] = out
    return res


def simulate(ctx: LaunchContext, co: Coalescing, row_order: np.ndarray) -> CacheResult:
    p = ctx.params
    n_sets = max(PARTITIONS, p.l2_bytes // (LINE_BYTES * p.l2_ways)) // PARTITIONS * PARTITIONS
    read_s = np.zeros(ctx.n_rows, dtype=np.int64)
    write_s = np.zeros(ctx.n_rows, dtype=np.int64)
    if not len(co.stream_row):
        return CacheResult(read_s, write_s, n_sets, 0)
    t = np.argsort(row_order[co.stream_row], kind="stable")      # sorted runs: nearly linear
    row = co.stream_row[t]
    line = co.stream_line[t] + _tensor_base_lines(ctx)[ctx.tensor[row]]
    rd = ctx.is_read[row]
    wr = ctx.is_write[row]
    mask = co.stream_mask[t].astype(np.int64)
    sent = _l1_filter(ctx, row, line, mask, wr)
    l1_hits = int(_POPCOUNT[(mask & ~sent) & 15].sum())
    keep = sent != 0
    row, line, mask, rd, wr = row[keep], line[keep], sent[keep], rd[keep], wr[keep]
    # The home partition holds every line; a far access also goes to the near partition (a copy).
    per_part = n_sets // PARTITIONS
    slot = ((line.astype(np.uint64) * _HASH) >> np.uint64(40)) % np.uint64(per_part)
    home = ((line.astype(np.uint64) * _HOME) >> np.uint64(63)).astype(np.int64) % PARTITIONS
    near = ctx.gpu_rank[ctx.row_prog[row]] % PARTITIONS
    is_far = near != home
    width = 1 + is_far                                  # a far entry: its home access, then its copy
    at = np.cumsum(width) - width
    n_acc = int(width.sum())
    idx = np.repeat(np.arange(len(row)), width)         # the stream entry each access belongs to
    copy = np.zeros(n_acc, dtype=bool)
    copy[at[is_far] + 1] = True
    slot = slot.astype(np.int64)
    sets = np.where(copy, near[idx], home[idx]) * per_part + slot[idx]
    fetched, dirtied, evicted, hit_sectors = _lockstep(
        sets, line[idx], mask[idx], rd[idx], wr[idx], n_sets, p.l2_ways, copy=copy,
        fetch_sectors=FETCH_SECTORS, dirty_ways=max(1, int(round(p.l2_ways * DIRTY_FRACTION))))
    home_acc = ~copy
    read_s += np.bincount(row[idx[home_acc]], weights=fetched[home_acc], minlength=ctx.n_rows).astype(np.int64)
    write_s += np.bincount(row[idx[home_acc]], weights=dirtied[home_acc], minlength=ctx.n_rows).astype(np.int64)
    # the lookup an SM makes first: its near partition (the copy for a far line)
    first = copy | (home_acc & (near[idx] == home[idx]))
    sectors = _POPCOUNT[mask[idx] & 15]
    r_first, w_first = first & rd[idx], first & wr[idx]
    return CacheResult(read_s, write_s, n_sets, evicted, read_lookups=int(sectors[r_first].sum()),
                       read_hits=int(hit_sectors[r_first].sum()), write_lookups=int(sectors[w_first].sum()),
                       write_hits=int(sectors[w_first].sum()), l1_hit_sectors=l1_hits)


def _lockstep(sets, line, mask, rd, wr, n_sets: int, ways: int, copy=None, fetch_sectors: int = 1,
              dirty_ways=None):
    """Per access: (sectors fetched from DRAM, sectors made dirty, dirty sectors written back during the
    run, requested sectors that were valid). ``copy`` marks accesses to a near-partition copy: a read
    fills it without DRAM traffic, a write drops it. ``dirty_ways`` caps the dirty lines of a set."""
    n = len(sets)
    copy = np.zeros(n, dtype=bool) if copy is None else copy
    key = sets.astype(np.uint16) if n_sets <= 1 << 16 else sets     # 16-bit keys take numpy's radix sort
    by_set = np.argsort(key, kind="stable")                           # time order kept within a set
    s_sorted = sets[by_set]
    # A repeat of the previous access of the same set to the same line, with the same sectors and kind,
    # is a hit that changes nothing: drop it from the steps (it fetches and dirties nothing).
    same = np.zeros(n, dtype=bool)
    if n > 1:
        # one key per access: line, sectors and kind (lines are far below 2**55)
        i64 = lambda a: np.asarray(a).astype(np.int64)
        what = (i64(line) << 8) | ((i64(mask) & 15) << 3) | (i64(rd) << 2) | (i64(wr) << 1) | i64(copy)
        what = what[by_set]
        same[1:] = (s_sorted[1:] == s_sorted[:-1]) & (what[1:] == what[:-1])
    hit_sectors = np.zeros(n, dtype=np.int64)
    dropped = by_set[same]
    hit_sectors[dropped] = np.where(rd[dropped], _POPCOUNT[mask[dropped] & 15], 0)
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
    cp = copy[step_major]
    read_m = np.where(rd[step_major], m8, 0).astype(np.uint8)
    write_m = np.where(wr[step_major] & ~cp, m8, 0).astype(np.uint8)
    drop = wr[step_major] & cp
    widen = _PAIRS if fetch_sectors == 2 else np.arange(16, dtype=np.uint8)
    # State: tags and last use per (set, way) (-1: empty); sector bits flat at set * ways + way.
    tags = np.full((n_sets, ways), -1, dtype=sl_line.dtype)
    last = np.full((n_sets, ways), -1, dtype=np.int32)
    tags_flat, last_flat = tags.reshape(-1), last.reshape(-1)     # views: 1-D fancy indexing is faster
    valid = np.zeros(n_sets * ways, dtype=np.uint8)
    dirty = np.zeros(n_sets * ways, dtype=np.uint8)
    n_dirty = np.zeros(n_sets, dtype=np.int32)            # dirty lines per set
    got = np.zeros(len(step_major), dtype=np.int64)
    made = np.zeros(len(step_major), dtype=np.int64)
    hit_s = np.zeros(len(step_major), dtype=np.int64)
    evicted = 0
    for step in range(len(bounds) - 1):
        lo, hi = bounds[step], bounds[step + 1]
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
    fetched = np.zeros(n, dtype=np.int64)
    dirtied = np.zeros(n, dtype=np.int64)
    fetched[step_major], dirtied[step_major], hit_sectors[step_major] = got, made, hit_s
    return fetched, dirtied, evicted, hit_sectors


def _clean_lru_dirty(sets, dirty, last, ways: int) -> int:
    """Write back the least recently used dirty line of each of ``sets`` (it stays, clean); returns the
    sectors written back."""
    d = dirty.reshape(-1, ways)[sets]
    age = np.where(d != 0, last[sets], np.iinfo(np.int32).max)
    f = sets * ways + age.argmin(axis=1)
    written = int(_POPCOUNT[dirty[f] & 15].sum())
    dirty[f] = 0
    return written


def dram_bytes(result: CacheResult) -> tuple:
    """(read bytes, write bytes) per row."""
    return result.read_sectors * SECTOR_BYTES, result.write_sectors * SECTOR_BYTES
