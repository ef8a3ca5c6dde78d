"""L2 cache simulation: which requests reach DRAM, and which L2 lookups hit.

The model, and what it assumes (each H100/H200 behaviour below was measured with Nsight Compute on an
H200; benchmarks/fidelity/fidelity.py measures them):

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
from typing import NamedTuple, Optional

import numpy as np

from .coalescing import LINE_BYTES, SECTOR_BYTES, Coalescing
from ..context import LOAD, LaunchContext
from ..gpus import GPUS
from . import jitsteps, l1jit, streaming
from .. import parallel
from .lockstep import _POPCOUNT, PARTITIONS, L2

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


def _l1_owner(ctx: LaunchContext) -> np.ndarray:
    """Per row: the L1 its program uses, its SM during its wave (programs resident together share it)."""
    pif = ctx.params.programs_in_flight
    sms = GPUS[ctx.params.gpu].sms if ctx.params.gpu in GPUS else pif
    rank = ctx.gpu_rank[ctx.row_prog].astype(np.int64)
    return rank // pif * sms + rank % pif % sms


def _l1_filter(owner, line, mask, wr, load, jit: bool = False) -> np.ndarray:
    """The sectors of each stream entry that go on to L2 (see L1 in the module docstring); ``owner`` is
    each entry's L1, ``mask`` uint8; ``jit``: in compiled loops (l1jit.py)."""
    if jit:
        return l1jit.l1_sent(owner, line, mask, wr, load, LINE_BYTES, L1_BYTES)
    span = int(line.max()) + 1
    key = owner * span + line
    o = np.argsort(key, kind="stable")                        # by (owner, line), in time order (runs: fast)
    k = key[o]
    del key
    first = np.r_[True, k[1:] != k[:-1]]
    del k
    m, w, ld = mask[o], wr[o], load[o]
    start = first | np.r_[False, w[:-1]]                      # a write by the program starts afresh
    del w
    seg = np.cumsum(start, dtype=np.int32 if len(start) < 1 << 31 else np.int64)
    seg -= 1                                                  # segment ids, ascending along o
    del start
    out = m.copy()
    for b in range(4):
        has = (m & np.uint8(1 << b)).astype(bool) & ld
        # the latest segment that loaded this sector so far equals the entry's own: loaded before in it
        latest = np.maximum.accumulate(np.where(has, seg, -1))
        seen = np.r_[False, latest[:-1] == seg[1:]]
        out[seen & has] &= np.uint8(~(1 << b) & 0xFF)
    del seg, has, latest, seen
    po = owner[o]
    lines_per_owner = np.bincount(po[first & ld], minlength=int(owner.max()) + 1)
    big = lines_per_owner[po] * LINE_BYTES > L1_BYTES         # the SM's loads in that wave outgrow L1
    out = np.where(big, m, out)
    res = np.empty_like(mask)
    res[o] = out
    return res


class _Rows(NamedTuple):
    """Per row of the launch, what the stream's entries look up (gathered per entry, not computed)."""
    owner: np.ndarray       # its L1
    near: np.ndarray        # its SM's L2 partition
    base: np.ndarray        # its tensor's first line in the simulated address space
    load: np.ndarray
    write: np.ndarray
    rw: np.ndarray          # read << 2 | write << 1 (uint8): the access-kind bits of an L2 lookup


STREAM_WINDOW = 1 << 21      # stream entries through L1 at once (whole waves): bounds the temporaries
L2_SLICE = 1 << 20           # entries through the L2 at once (its state carries over: any cut is exact)
PIPELINE_WINDOWS = 4         # on two cores a stream is cut into about this many windows, so that the L1
MIN_WINDOW = 1 << 18         # filters of later ones run beside the L2 (windows of at least MIN_WINDOW entries)


def _windows(row_order: np.ndarray, wave_of_row: np.ndarray, entries: np.ndarray, size: int) -> list:
    """Cuts of the issue-ordered stream into windows of about ``size`` entries, each a run of whole waves
    (an L1 lives for one wave, so each window's L1 filter is exact on its own); ``entries``: the stream's
    entries per row. Found from the rows alone: the stream in issue order takes the rows in ``row_order``."""
    n = int(entries.sum())
    by_rank = np.argsort(row_order, kind="stable")
    waves = wave_of_row[by_rank]
    if n <= size or (len(waves) > 1 and (waves[1:] < waves[:-1]).any()):
        return [(0, n)]
    per_wave = np.bincount(waves, weights=entries[by_rank]).astype(np.int64)
    starts = (np.cumsum(per_wave) - per_wave)[per_wave > 0]            # where each wave begins
    cuts, lo = [], 0
    while lo < n:
        k = int(np.searchsorted(starts, lo + size, side="right")) - 1
        hi = int(starts[k]) if k >= 0 and starts[k] > lo else (int(starts[k + 1]) if k + 1 < len(starts) else n)
        cuts.append((lo, hi))
        lo = hi
    return cuts


def _row_runs(stream_row: np.ndarray) -> tuple:
    """Where each run of entries of one row begins in the stream, and its length (a row's entries come in
    runs: counting by run is a pass over the stream, not a 64-bit copy of it as np.bincount makes)."""
    n = len(stream_row)
    idx = np.int32 if n < 1 << 31 else np.int64
    starts = np.flatnonzero(stream_row[1:] != stream_row[:-1]).astype(idx)
    starts += 1
    starts = np.r_[np.zeros(1, idx), starts]
    return starts, np.diff(np.r_[starts, idx(n)])


def _issue_sorted(stream_row: np.ndarray, row_order: np.ndarray, runs: tuple) -> np.ndarray:
    """The stream's entries in issue order: a stable sort by their rows' ranks. A row's entries come in
    ``runs`` (_row_runs), so the runs are sorted (stably: a row's runs keep their order) and expanded, not
    the entries."""
    n = len(stream_row)
    idx = np.int32 if n < 1 << 31 else np.int64
    starts, lengths = runs
    by_rank = np.argsort(row_order[stream_row[starts]], kind="stable")
    starts, lengths = starts[by_rank], lengths[by_rank]
    # entry j of the sorted stream: its run's start plus j less where that run begins in the sorted stream
    shift = starts - (np.cumsum(lengths, dtype=idx) - lengths)
    t = np.repeat(shift, lengths)
    t += np.arange(n, dtype=idx)
    return t


def simulate(ctx: LaunchContext, co: Coalescing, row_order: np.ndarray, window: Optional[int] = None) -> CacheResult:
    """The launch's stream through the L1s and the L2, ``window`` entries (whole waves) at a time (None: at most
    STREAM_WINDOW, smaller on two cores; the counts are the same for any window)."""
    p = ctx.params
    if window is None:
        window = STREAM_WINDOW
        if parallel.cores() > 1:
            window = min(window, max(MIN_WINDOW, -(-len(co.stream_row) // PIPELINE_WINDOWS)))
    n_sets = max(PARTITIONS, p.l2_bytes // (LINE_BYTES * p.l2_ways)) // PARTITIONS * PARTITIONS
    read_s = np.zeros(ctx.n_rows, dtype=np.int64)
    write_s = np.zeros(ctx.n_rows, dtype=np.int64)
    if not len(co.stream_row):
        return CacheResult(read_s, write_s, n_sets, 0)
    runs = _row_runs(co.stream_row)
    t = _issue_sorted(co.stream_row, row_order, runs)
    wave_of_row = ctx.gpu_rank[ctx.row_prog] // p.programs_in_flight
    base_lines = _tensor_base_lines(ctx)
    wide = int(co.stream_line.max()) + int(base_lines.max()) >= 1 << 31
    # lines as int32 where they fit: every per-entry gather, repeat and compare of the L2 moves half the bytes
    rows = _Rows(_l1_owner(ctx), ctx.gpu_rank[ctx.row_prog] % PARTITIONS,
                 base_lines[ctx.tensor].astype(np.int64 if wide else np.int32),
                 ctx.kind == LOAD, ctx.is_write,
                 (ctx.is_read.astype(np.uint8) << 2) | (ctx.is_write.astype(np.uint8) << 1))
    l2 = L2(n_sets, p.l2_ways, np.int64 if wide else np.int32, fetch_sectors=FETCH_SECTORS,
             dirty_ways=max(1, int(round(p.l2_ways * DIRTY_FRACTION))),
             lines=int(base_lines.max()) if len(co.stream_row) * 4 >= int(base_lines.max()) else None,
             jit=jitsteps.use(len(co.stream_row)))
    # sets that no line enters twice need no stepping (analysis/memory/streaming.py)
    fast, l2.open = streaming.plan(co, t, rows, l2, _POPCOUNT, ctx.n_rows, int(base_lines.max()))
    if fast is not None:                      # no line repeats at all
        read_s, write_s, evicted, tot = fast
        return CacheResult(read_s, write_s, n_sets, evicted, read_lookups=tot[0], read_hits=tot[1],
                           write_lookups=tot[2], write_hits=tot[3], l1_hit_sectors=tot[4])
    totals = np.zeros(5, dtype=np.int64)      # read lookups, read hits, write lookups, write hits, L1 hits
    # A window's L1 filter needs no cache state: the next window's runs on the second core while this
    # one's entries go through the L2 (parallel.py; the results do not depend on it).
    per_row = np.bincount(co.stream_row[runs[0]], weights=runs[1], minlength=ctx.n_rows).astype(np.int64)
    cuts = _windows(row_order, wave_of_row, per_row, window)
    threaded = len(cuts) > 1 and parallel.cores() > 1
    pending = None
    try:
        for i, (lo, hi) in enumerate(cuts):
            stage = pending.result() if pending is not None else _l1_stage(co, t[lo:hi], rows, l2.jit)
            pending = None
            if i + 1 < len(cuts):
                nlo, nhi = cuts[i + 1]
                pending = parallel.Beside(_l1_stage, (co, t[nlo:nhi], rows, l2.jit), threaded)
            _l2_stage(stage, rows, l2, read_s, write_s, totals)
    finally:
        if pending is not None:
            pending.join()
    evicted = l2.evicted + (l2.open.written_back() if l2.open is not None else 0)
    return CacheResult(read_s, write_s, n_sets, evicted, read_lookups=int(totals[0]), read_hits=int(totals[1]),
                       write_lookups=int(totals[2]), write_hits=int(totals[3]), l1_hit_sectors=int(totals[4]))


def _l1_stage(co, t, rows: _Rows, jit: bool = False) -> tuple:
    """A window's entries (``t``: stream indices, whole waves) through the L1s: (rows, lines, the sectors
    that go on to L2, load sectors served by L1)."""
    if jit:
        return l1jit.l1_window(t, co.stream_row, co.stream_line, co.stream_mask, rows.base, rows.owner, rows.write,
                               rows.load, LINE_BYTES, L1_BYTES)
    row = co.stream_row[t]
    line = co.stream_line[t] + rows.base[row]
    mask = co.stream_mask[t].astype(np.uint8, copy=False)
    sent = _l1_filter(rows.owner[row], line, mask, rows.write[row], rows.load[row])
    return row, line, sent, int(_POPCOUNT[(mask & ~sent) & 15].sum())


def _l2_stage(stage: tuple, rows: _Rows, l2, read_s, write_s, totals) -> None:
    row, line, sent, l1_hits = stage
    totals[4] += l1_hits
    if l2.jit:                  # one compiled loop, access by access (jitsteps.py)
        jitsteps.entries(l2, row, line, sent, rows.near, rows.rw, read_s, write_s, totals)
        return
    keep = np.flatnonzero(sent)
    for a in range(0, len(keep), L2_SLICE):
        k = keep[a:a + L2_SLICE]
        _l2_slice(row[k], line[k], sent[k], rows, l2, read_s, write_s, totals)


def _l2_slice(row, line, mask, rows: _Rows, l2, read_s, write_s, totals) -> None:
    # The home partition holds every line; a far access also goes to the near partition (a copy): each
    # entry becomes its home access, then (far ones) its copy.
    home_set = l2.home_sets(line)                       # home partition * sets per partition + slot
    is_far = rows.near[row] != l2.partition(home_set)
    # what each access is, in one byte: sector mask << 3 | read << 2 | write << 1 | copy
    kind = (mask.astype(np.uint8) & 15) << 3 | rows.rw[row]
    if is_far.any():
        width = 1 + is_far
        at = np.cumsum(width) - width                   # each entry's home access
        copies = at[is_far] + 1
        sets = np.repeat(home_set, width)
        sets[copies] = l2.partner(home_set[is_far])
        lines = np.repeat(line, width)
        kind = np.repeat(kind, width)
        kind[copies] |= 1
        first = np.repeat(~is_far, width)               # the lookup an SM makes first: its near partition
        first[copies] = True
        entry = np.repeat(np.arange(len(row), dtype=np.int64), width)    # each access's entry
        del at, copies
    else:
        sets, lines, first, entry = home_set, line, None, None
    del home_set
    # the accesses that change the cache, with what each fetched, dirtied and found; the rest repeat the
    # previous access of their set: they hit all they ask for, fetch and dirty nothing
    if l2.open is None:
        stepped, got, made, hit_s = l2.steps(sets, lines, kind)
    else:                                 # accesses to sets that no line enters twice: closed form
        is_open = l2.open.stepped[sets]
        a = np.flatnonzero(~is_open)
        b = np.flatnonzero(is_open)
        open_got, open_made = l2.open.take(sets[a], kind[a])
        stepped, got, made, hit_s = l2.steps(sets[b], lines[b], kind[b]) if len(b) else \
            (np.zeros(0, np.int64),) * 4
        stepped = np.concatenate([a, b[stepped]])
        got, made = np.concatenate([open_got, got]), np.concatenate([open_made, made])
        hit_s = np.concatenate([np.zeros(len(a), np.int64), hit_s])
        del a, b, is_open, open_got, open_made
    del sets, lines
    k = kind[stepped]
    home_acc = (k & 1) == 0                         # DRAM traffic is counted at home
    where = stepped if entry is None else entry[stepped]
    for counts, per_access in ((read_s, got), (write_s, made)):
        some = np.flatnonzero(home_acc & (per_access != 0))
        counts += np.bincount(row[where[some]], weights=per_access[some], minlength=len(counts)).astype(np.int64)
    sectors = _POPCOUNT[kind >> 3]
    if first is not None:
        sectors = np.where(first, sectors, 0)
    rd, wr = (kind & 4) != 0, (kind & 2) != 0
    reads, writes = int(sectors[rd].sum()), int(sectors[wr].sum())
    # read hits: every sector a first lookup asks for, less what the stepped ones did not find
    asked = sectors[stepped]
    missed = int((asked - hit_s)[((k & 4) != 0) & (asked > 0)].sum())
    totals[:4] += (reads, reads - missed, writes, writes)


def dram_bytes(result: CacheResult) -> tuple:
    """(read bytes, write bytes) per row."""
    return result.read_sectors * SECTOR_BYTES, result.write_sectors * SECTOR_BYTES
