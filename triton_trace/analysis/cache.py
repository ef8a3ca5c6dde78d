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
        return CacheResult(read_s, write_s, n_sets)
    t = np.argsort(row_order[co.stream_row], kind="stable")      # sorted runs: nearly linear
    row = co.stream_row[t]
    line = co.stream_line[t] + _tensor_base_lines(ctx)[ctx.tensor[row]]
    mask = co.stream_mask[t].astype(np.int64)
    rd = ctx.is_read[row]
    wr = ctx.is_write[row]
    h = (line.astype(np.uint64) * _HASH) >> np.uint64(40)
    sets = (h % np.uint64(n_sets)).astype(np.int64)
    fetched, dirtied = _lockstep(sets, line, mask, rd, wr, n_sets, p.l2_ways)
    read_s += np.bincount(row, weights=fetched, minlength=ctx.n_rows).astype(np.int64)
    write_s += np.bincount(row, weights=dirtied, minlength=ctx.n_rows).astype(np.int64)
    return CacheResult(read_s, write_s, n_sets)


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
    by_set, s_sorted = by_set[~same], s_sorted[~same]
    counts = np.bincount(s_sorted, minlength=n_sets)
    starts = np.cumsum(counts) - counts
    busiest = np.argsort(-counts, kind="stable")
    left = counts[busiest]                                            # descending
    tags = np.full((n_sets, ways), -1, dtype=np.int64)
    last = np.full((n_sets, ways), -1, dtype=np.int64)
    valid = np.zeros((n_sets, ways), dtype=np.int64)
    dirty = np.zeros((n_sets, ways), dtype=np.int64)
    fetched = np.zeros(n, dtype=np.int64)
    dirtied = np.zeros(n, dtype=np.int64)
    for step in range(int(left[0]) if len(left) else 0):
        live = busiest[:int(np.searchsorted(-left, -step, side="left"))]
        i = by_set[starts[live] + step]
        s, tg, m = live, line[i], mask[i]
        match = tags[s] == tg[:, None]
        hit = match.any(axis=1)
        way = np.where(hit, match.argmax(axis=1), last[s].argmin(axis=1))
        v = np.where(hit, valid[s, way], 0)
        d = np.where(hit, dirty[s, way], 0)
        fetched[i] = np.where(rd[i], _POPCOUNT[m & ~v & 15], 0)
        nd = np.where(wr[i], m, 0)
        dirtied[i] = _POPCOUNT[nd & ~d & 15]
        tags[s, way], last[s, way] = tg, step
        valid[s, way], dirty[s, way] = v | m, d | nd
    return fetched, dirtied


def dram_bytes(result: CacheResult) -> tuple:
    """(read bytes, write bytes) per row."""
    return result.read_sectors * SECTOR_BYTES, result.write_sectors * SECTOR_BYTES
